//! Calls split by token ranges (`Rope::prepare*`, `PreparedCall`, `TokenChunk`) and, with
//! the `rayon` feature, `Rope::par_apply*`: output bit-identical to the single-threaded
//! call for every dtype, layout, partial rotary_dim, stride pattern, position source, cos/sin
//! source and direction, in place and out of place; the same errors in the same order, with
//! nothing written; zero tokens and zero heads; dynamic NTK frequencies computed once per
//! call from the call's largest position, not per chunk.
//!
//! Every comparison covers whole buffers, padding included, bit for bit.

mod common;

use common::*;
use rand::RngExt;
use rope_kernels::{
    bf16, f16, ApplyOptions, CosSinTable, Heads, HeadsMut, PairLayout, PreparedCall, Rope, RopeConfig,
    RopeError, Scaling, View,
};

/// How a prepared call is driven.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Drive {
    /// `PreparedCall::run`.
    Run,
    /// `parts(n)`, collected, then run in reverse order on this thread.
    PartsReversed(usize),
    /// `chunks(max_tokens)`, each chunk on its own scoped thread.
    ChunksThreads(usize),
    /// `whole()` split recursively at uneven points, halves on scoped threads.
    SplitThreads,
    /// One chunk of `parts(3)`, the iterator dropped, then `run` for the pending rest.
    FirstThenRest,
}

const DRIVES: [Drive; 8] = [
    Drive::Run,
    Drive::PartsReversed(1),
    Drive::PartsReversed(2),
    Drive::PartsReversed(5),
    Drive::ChunksThreads(1),
    Drive::ChunksThreads(3),
    Drive::SplitThreads,
    Drive::FirstThenRest,
];

fn split_run<T: rope_kernels::Element>(chunk: rope_kernels::TokenChunk<'_, T>) {
    if chunk.len() <= 2 {
        chunk.run();
        return;
    }
    let mid = chunk.len() / 3 + 1;
    let (a, b) = chunk.split_at(mid);
    std::thread::scope(|s| {
        s.spawn(move || split_run(a));
        split_run(b);
    });
}

/// Runs `call` the way `how` says, checking the chunks it hands out; `name` names the case
/// in every message.
fn drive<T: rope_kernels::Element>(mut call: PreparedCall<'_, T>, how: Drive, name: &str) {
    let total = call.tokens();
    match how {
        Drive::Run => call.run(),
        Drive::PartsReversed(n) => {
            let chunks: Vec<_> = call.parts(n).collect();
            assert_eq!(chunks.len(), n.min(total), "{name}: number of parts");
            // Consecutive, covering every token once, sizes within one of each other.
            let mut next = 0;
            for c in &chunks {
                assert_eq!(c.range().start, next, "{name}: parts not consecutive");
                next = c.range().end;
            }
            assert_eq!(next, total, "{name}: parts do not cover the call");
            if let (Some(min), Some(max)) =
                (chunks.iter().map(|c| c.len()).min(), chunks.iter().map(|c| c.len()).max())
            {
                assert!(max - min <= 1, "{name}: uneven parts {min}..{max}");
            }
            for c in chunks.into_iter().rev() {
                c.run();
            }
            assert_eq!(call.pending(), 0, "{name}: tokens pending after every part ran");
        }
        Drive::ChunksThreads(m) => {
            let chunks = call.chunks(m);
            assert_eq!(chunks.len(), total.div_ceil(m), "{name}: number of chunks");
            std::thread::scope(|s| {
                for c in chunks {
                    assert!(c.len() <= m, "{name}: chunk longer than {m}");
                    s.spawn(move || c.run());
                }
            });
        }
        Drive::SplitThreads => split_run(call.whole()),
        Drive::FirstThenRest => {
            if let Some(first) = call.parts(3).next() {
                first.run();
            }
            assert_eq!(call.pending(), total - total.div_ceil(3), "{name}: pending after the first part");
            call.run();
        }
    }
}

/// A strided view: 0 BSHD, 1 BHSD, 2 padded rows and tokens (a fused-QKV-like layout).
fn view(kind: u8, tokens: usize, heads: usize, hd: usize) -> View {
    match kind {
        0 => View::token_major(tokens, heads, hd),
        1 => View::head_major(tokens, heads, hd),
        _ => View { tokens, heads, token_stride: heads * (hd + 1) + 2, head_stride: hd + 1 },
    }
}

/// A buffer for `v` with 5 spare elements, random contents.
fn buffer<T: TestElem>(rng: &mut TestRng, v: View, hd: usize) -> Vec<T> {
    let needed = v.validate(hd, usize::MAX, rope_kernels::Operand::Q).unwrap();
    random_vec(rng, needed + 5)
}

fn assert_bits<T: rope_kernels::Element>(a: &[T], b: &[T], what: &str) {
    assert_eq!(a.len(), b.len());
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        assert_eq!(x.to_bits_u32(), y.to_bits_u32(), "{what}: element {i} differs");
    }
}

/// Where a qk call writes: q and k in place, or q_out and k_out (`*_into`).
#[derive(Clone, Copy, Debug, PartialEq)]
enum Mode {
    InPlace,
    Into,
}

/// How a qk call is made: `apply_qk*` (the reference every other way is compared with),
/// `prepare_qk*` driven one way, `prepare_qk*` dropped without running, or (rayon)
/// `par_apply_qk*`.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Via {
    Apply,
    Prepared(Drive),
    Unrun,
    #[cfg(feature = "rayon")]
    Par,
}

impl Via {
    /// The ways a random case driven `how` compares with `Apply`.
    fn compared(how: Drive) -> Vec<Via> {
        [
            Via::Prepared(how),
            #[cfg(feature = "rayon")]
            Via::Par,
        ]
        .to_vec()
    }
}

/// The parallel way of the error test: `par_apply_qk*` with rayon, otherwise a prepared
/// call run whole.
#[cfg(feature = "rayon")]
const PARALLEL: Via = Via::Par;
#[cfg(not(feature = "rayon"))]
const PARALLEL: Via = Via::Prepared(Drive::Run);

/// The views of one qk call: q and k, and (out of place) q_out and k_out. k and k_out are
/// used only when both are present.
#[derive(Clone, Copy, Debug)]
struct Views {
    q: View,
    k: Option<View>,
    q_out: View,
    k_out: Option<View>,
}

/// The buffers of one qk call: q, k, q_out, k_out (the last two unused in place).
type Bufs<T> = (Vec<T>, Vec<T>, Vec<T>, Vec<T>);

/// Makes one qk call `via` a way, in `mode`, on copies of `bufs`; returns its result and
/// the two buffers the mode writes (q and k in place, q_out and k_out out of place).
/// `name` names the case in the messages of [`drive`].
fn call_qk<T: rope_kernels::Element>(
    rope: &Rope,
    mode: Mode,
    via: Via,
    v: &Views,
    bufs: &Bufs<T>,
    opts: &ApplyOptions<'_>,
    name: &str,
) -> (Result<(), RopeError>, Vec<T>, Vec<T>) {
    let (mut q, mut k, mut qo, mut ko) = bufs.clone();
    let r = match mode {
        Mode::InPlace => {
            let (qm, km) = (HeadsMut::new(&mut q, v.q), v.k.map(|kv| HeadsMut::new(&mut k, kv)));
            match via {
                Via::Apply => rope.apply_qk(qm, km, opts),
                Via::Prepared(how) => rope.prepare_qk(qm, km, opts).map(|c| drive(c, how, name)),
                Via::Unrun => rope.prepare_qk(qm, km, opts).map(drop),
                #[cfg(feature = "rayon")]
                Via::Par => rope.par_apply_qk(qm, km, opts),
            }
        }
        Mode::Into => {
            let (qi, qom) = (Heads::new(&q, v.q), HeadsMut::new(&mut qo, v.q_out));
            let kp = v.k.zip(v.k_out).map(|(kv, kov)| (Heads::new(&k, kv), HeadsMut::new(&mut ko, kov)));
            match via {
                Via::Apply => rope.apply_qk_into(qi, qom, kp, opts),
                Via::Prepared(how) => rope.prepare_qk_into(qi, qom, kp, opts).map(|c| drive(c, how, name)),
                Via::Unrun => rope.prepare_qk_into(qi, qom, kp, opts).map(drop),
                #[cfg(feature = "rayon")]
                Via::Par => rope.par_apply_qk_into(qi, qom, kp, opts),
            }
        }
    };
    match mode {
        Mode::InPlace => (r, q, k),
        Mode::Into => (r, qo, ko),
    }
}

/// One random call: configuration, shapes, views, positions, cos/sin source, direction.
struct Case {
    rope: Rope<'static>,
    tokens: usize,
    q_heads: usize,
    k_heads: Option<usize>,
    views: [u8; 4],
    positions: Vec<u32>,
    use_ids: bool,
    start: u32,
    table: Option<(Vec<f32>, Vec<f32>)>,
    inverse: bool,
}

impl Case {
    fn random(rng: &mut TestRng, dynamic: bool) -> Case {
        let pairs = [1usize, 3, 4, 8, 17][rng.random_range(0..5)];
        let rotary_dim = 2 * pairs;
        let head_dim = rotary_dim + [0, 0, 2, 5][rng.random_range(0..4)];
        let layout = if rng.random_bool(0.5) { PairLayout::HalfSplit } else { PairLayout::Interleaved };
        let mut config = RopeConfig::new(head_dim, 10_000.0).with_rotary_dim(rotary_dim).with_layout(layout);
        if dynamic && head_dim > 2 && rotary_dim > 2 {
            config = config.with_scaling(Scaling::DynamicNtk { factor: 2.0, max_position_embeddings: 16 });
        }
        let rope = Rope::new(config).unwrap();
        let tokens = rng.random_range(0..12);
        let q_heads = rng.random_range(0..4);
        let k_heads = if rng.random_bool(0.7) { Some(rng.random_range(0..3)) } else { None };
        let views = [0; 4].map(|_| rng.random_range(0..3u8));
        let use_ids = rng.random_bool(0.5);
        let table = rng.random_bool(0.5);
        let (positions, start) = if table {
            // Positions inside a table of 64 rows.
            (
                (0..tokens).map(|_| rng.random_range(0..64)).collect(),
                rng.random_range(0..=(64 - tokens as u32)),
            )
        } else {
            (
                (0..tokens).map(|_| random_position(rng)).collect(),
                rng.random_range(0..=u32::MAX - tokens as u32),
            )
        };
        let table = table.then(|| {
            let (mut cos, mut sin) = (vec![0.0; 64 * pairs], vec![0.0; 64 * pairs]);
            rope.fill_table(0, &mut cos, &mut sin).unwrap();
            (cos, sin)
        });
        Case {
            rope,
            tokens,
            q_heads,
            k_heads,
            views,
            positions,
            use_ids,
            start,
            table,
            inverse: rng.random_bool(0.3),
        }
    }

    fn opts(&self) -> ApplyOptions<'_> {
        let mut o =
            if self.use_ids { ApplyOptions::ids(&self.positions) } else { ApplyOptions::start(self.start) };
        if let Some((cos, sin)) = &self.table {
            o = o.with_table(CosSinTable::new(cos, sin, self.rope.config().pairs()).unwrap());
        }
        if self.inverse {
            o = o.inverse();
        }
        o
    }

    fn views(&self) -> Views {
        let hd = self.rope.config().head_dim;
        let q = |i: usize| view(self.views[i], self.tokens, self.q_heads, hd);
        let k = |i: usize| self.k_heads.map(|h| view(self.views[i], self.tokens, h, hd));
        Views { q: q(0), k: k(1), q_out: q(2), k_out: k(3) }
    }

    /// Random buffers for `mode`: q and k, then (out of place) q_out and k_out.
    fn buffers<T: TestElem>(&self, rng: &mut TestRng, mode: Mode) -> Bufs<T> {
        let (v, hd) = (self.views(), self.rope.config().head_dim);
        let mut draw = |view: Option<View>| view.map_or(vec![], |v| buffer(rng, v, hd));
        let (q, k) = (draw(Some(v.q)), draw(v.k));
        let (qo, ko) = match mode {
            Mode::InPlace => (vec![], vec![]),
            Mode::Into => (draw(Some(v.q_out)), draw(v.k_out)),
        };
        (q, k, qo, ko)
    }

    /// In place and out of place: the prepared call driven `how` and (rayon) the parallel
    /// call give the bits of `apply_qk*`. `name` names the case in every message.
    fn check<T: TestElem>(&self, rng: &mut TestRng, how: Drive, name: &str) {
        let (v, opts) = (self.views(), self.opts());
        for mode in [Mode::InPlace, Mode::Into] {
            let bufs = self.buffers::<T>(rng, mode);
            let (r, q1, k1) = call_qk(&self.rope, mode, Via::Apply, &v, &bufs, &opts, name);
            assert_eq!(r, Ok(()), "{name}: {mode:?} via apply");
            for via in Via::compared(how) {
                let (r, q2, k2) = call_qk(&self.rope, mode, via, &v, &bufs, &opts, name);
                assert_eq!(r, Ok(()), "{name}: {mode:?} via {via:?}");
                assert_bits(&q1, &q2, &format!("{name}: {mode:?} via {via:?}, q"));
                assert_bits(&k1, &k2, &format!("{name}: {mode:?} via {via:?}, k"));
            }
        }
    }
}

impl core::fmt::Display for Case {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{:?}, {} tokens, ", self.rope.config(), self.tokens)?;
        write!(f, "heads {} / {:?}, views {:?}, ", self.q_heads, self.k_heads, self.views)?;
        if self.use_ids {
            write!(f, "ids {:?}", self.positions)?;
        } else {
            write!(f, "start {}", self.start)?;
        }
        write!(f, ", table {}, inverse {}", self.table.is_some(), self.inverse)
    }
}

/// 120 random cases from `seed`, each checked with the next way of [`DRIVES`].
fn random_cases<T: TestElem>(seed: u64, dynamic: bool) {
    let mut rng = rng(seed);
    for i in 0..120 {
        let case = Case::random(&mut rng, dynamic);
        let how = DRIVES[i % DRIVES.len()];
        case.check::<T>(&mut rng, how, &format!("{} seed {seed} case {i} ({how:?}): {case}", T::NAME));
    }
}

/// One run of random cases: the instance of `random_cases` (the element type), the seed,
/// and whether the configurations use dynamic NTK.
type RandomRun = (fn(u64, bool), u64, bool);

const RANDOM_RUNS: [RandomRun; 5] = [
    (random_cases::<f32>, 1, false),
    (random_cases::<f16>, 2, false),
    (random_cases::<bf16>, 3, false),
    (random_cases::<f32>, 4, true),
    (random_cases::<bf16>, 5, true),
];

#[test]
fn chunked_equals_single() {
    for (run, seed, dynamic) in RANDOM_RUNS {
        run(seed, dynamic);
    }
}

/// Dynamic NTK takes its frequencies from the call's largest position: a chunk whose own
/// positions are small must still use the frequencies of the whole call. The fixture is
/// chosen so that per-chunk frequencies would differ (checked), so the test can fail.
#[test]
fn dynamic_frequencies_once_per_call() {
    let config = RopeConfig::new(16, 10_000.0)
        .with_scaling(Scaling::DynamicNtk { factor: 4.0, max_position_embeddings: 32 });
    let rope = Rope::new(config).unwrap();
    let tokens = 40;
    let positions: Vec<u32> = (0..tokens as u32).collect();
    // The first of 4 chunks sees positions 0..10, inside max_position_embeddings.
    assert_ne!(
        rope.frequencies_at(10).unwrap().inv_freq(),
        rope.frequencies_at(tokens as u64).unwrap().inv_freq(),
        "the fixture must make per-chunk frequencies differ"
    );
    let v = View::token_major(tokens, 3, 16);
    let x0: Vec<f32> = random_vec(&mut rng(9), tokens * 3 * 16);
    let mut single = x0.clone();
    rope.apply(HeadsMut::new(&mut single, v), &ApplyOptions::ids(&positions)).unwrap();
    let mut chunked = x0.clone();
    let mut call = rope.prepare(HeadsMut::new(&mut chunked, v), &ApplyOptions::ids(&positions)).unwrap();
    let chunks: Vec<_> = call.parts(4).collect();
    assert_eq!(chunks[0].range(), 0..10);
    chunks.into_iter().for_each(|c| c.run());
    assert_bits(&single, &chunked, "dynamic ntk, 4 parts");
    // The first chunk run as a call of its own differs: what per-chunk frequencies would do.
    let mut alone = x0.clone();
    rope.apply(HeadsMut::new(&mut alone, View::token_major(10, 3, 16)), &ApplyOptions::ids(&positions[..10]))
        .unwrap();
    assert_ne!(alone[..10 * 48], single[..10 * 48]);
}

/// Zero tokens and zero heads: `Ok`, nothing handed out, nothing written.
#[test]
fn empty_calls() {
    let rope = Rope::new(RopeConfig::new(8, 10_000.0)).unwrap();
    let mut q = vec![1.5f32; 40];
    let mut k = vec![2.5f32; 40];
    for (tokens, qh, kh) in [(0, 2, 1), (3, 0, 0), (0, 0, 0)] {
        let mut call = rope
            .prepare_qk(
                HeadsMut::new(&mut q, View::token_major(tokens, qh, 8)),
                Some(HeadsMut::new(&mut k, View::token_major(tokens, kh, 8))),
                &ApplyOptions::start(7),
            )
            .unwrap();
        let case = format!("{tokens} tokens, {qh} q heads, {kh} k heads");
        assert_eq!(call.tokens(), 0, "{case}");
        assert_eq!(call.parts(4).count(), 0, "{case}");
        assert!(call.whole().is_empty(), "{case}");
        call.run();
        #[cfg(feature = "rayon")]
        rope.par_apply_qk(
            HeadsMut::new(&mut q, View::token_major(tokens, qh, 8)),
            Some(HeadsMut::new(&mut k, View::token_major(tokens, kh, 8))),
            &ApplyOptions::start(7),
        )
        .unwrap();
    }
    assert!(q.iter().all(|&x| x == 1.5) && k.iter().all(|&x| x == 2.5));
    // Zero q heads but k heads: the tokens are there and k is rotated.
    let call = rope
        .prepare_qk(
            HeadsMut::new(&mut q, View::token_major(2, 0, 8)),
            Some(HeadsMut::new(&mut k, View::token_major(2, 1, 8))),
            &ApplyOptions::start(7),
        )
        .unwrap();
    assert_eq!((call.tokens(), call.elements_per_token()), (2, 8));
    call.run();
    assert!(k[..16].iter().any(|&x| x != 2.5) && k[16..].iter().all(|&x| x == 2.5));
}

/// `chunks(0)` and `parts(0)` count as 1; `split_at` past the end clamps.
#[test]
fn degenerate_chunk_arguments() {
    let rope = Rope::new(RopeConfig::new(4, 10_000.0)).unwrap();
    let mut x = vec![1.0f32; 5 * 4];
    let mut call =
        rope.prepare(HeadsMut::new(&mut x, View::token_major(5, 1, 4)), &ApplyOptions::start(1)).unwrap();
    assert_eq!(call.chunks(0).len(), 5);
    assert_eq!(call.parts(0).len(), 1);
    let (a, b) = call.whole().split_at(99);
    assert_eq!((a.range(), b.range()), (0..5, 5..5));
    let (c, d) = a.split_at(2);
    assert_eq!((c.range(), d.range()), (0..2, 2..5));
    // Everything was handed out: the call has nothing pending.
    assert_eq!(call.pending(), 0);
    assert_eq!(call.parts(3).count(), 0);
}

// ---------------------------------------------------------------------------------------
// Errors: each bad call gives the same error from apply, prepare and par_apply, and none
// writes anything.

fn bufs() -> Bufs<f32> {
    let mut r = rng(11);
    (random_vec(&mut r, 200), random_vec(&mut r, 100), random_vec(&mut r, 200), random_vec(&mut r, 100))
}

/// An in-place call: q view, k view, position ids (None: start), start, table rows.
struct Bad {
    qv: View,
    kv: Option<View>,
    ids: Option<Vec<u32>>,
    start: u32,
    table_rows: Option<usize>,
    table_pairs: usize,
    qov: View,
    kov: Option<View>,
}

fn bad_cases() -> Vec<Bad> {
    let hd = 8;
    let ok = Bad {
        qv: View::token_major(3, 4, hd),
        kv: Some(View::token_major(3, 2, hd)),
        ids: None,
        start: 5,
        table_rows: None,
        table_pairs: 3,
        qov: View::token_major(3, 4, hd),
        kov: Some(View::token_major(3, 2, hd)),
    };
    let with = |f: &dyn Fn(&mut Bad)| {
        let mut b = Bad { ids: ok.ids.clone(), ..ok };
        f(&mut b);
        b
    };
    vec![
        with(&|b| b.qv = View::token_major(30, 4, hd)), // q too short
        with(&|b| b.qv = View { tokens: 3, heads: 4, token_stride: 8, head_stride: 2 }), // q overlap
        with(&|b| b.kv = Some(View::token_major(4, 2, hd))), // k tokens
        with(&|b| b.kv = Some(View { tokens: 3, heads: 2, token_stride: usize::MAX / 2, head_stride: 8 })),
        with(&|b| b.ids = Some(vec![1, 2])),                      // count
        with(&|b| b.start = u32::MAX - 1),                        // overflow
        with(&|b| (b.table_rows, b.table_pairs) = (Some(10), 2)), // table width
        with(&|b| b.table_rows = Some(7)),                        // out of range
        with(&|b| (b.table_rows, b.ids) = (Some(7), Some(vec![0, 6, 2]))), // ids in range: ok
        with(&|b| (b.table_rows, b.ids) = (Some(7), Some(vec![0, 7, 2]))), // ids out of range
        with(&|b| (b.qv, b.start) = (View::token_major(30, 4, hd), u32::MAX)), // order: view first
        with(&|b| {
            (b.qv, b.kv, b.start) = (View::token_major(3, 0, hd), Some(View::token_major(3, 0, hd)), u32::MAX)
        }),
        with(&|b| {
            (b.qv, b.kv, b.table_rows) =
                (View::token_major(0, 4, hd), Some(View::token_major(0, 2, hd)), Some(1))
        }),
        with(&|b| b.qov = View::token_major(3, 3, hd)), // q_out shape
        with(&|b| b.kov = Some(View::token_major(3, 2, 20))), // k_out too short
        with(&|b| (b.qov, b.kv) = (View::token_major(3, 3, hd), Some(View::token_major(4, 2, hd)))), // order
        ok,
    ]
}

#[test]
fn errors_identical_and_nothing_written() {
    let rope = Rope::new(RopeConfig::new(8, 10_000.0).with_rotary_dim(6)).unwrap();
    let (mut cos, mut sin) = (vec![0.0; 10 * 3], vec![0.0; 10 * 3]);
    rope.fill_table(0, &mut cos, &mut sin).unwrap();
    let mut seen_err = 0;
    for (i, b) in bad_cases().iter().enumerate() {
        let mut opts = match &b.ids {
            Some(ids) => ApplyOptions::ids(ids),
            None => ApplyOptions::start(b.start),
        };
        if let Some(rows) = b.table_rows {
            let n = rows * b.table_pairs;
            opts = opts.with_table(CosSinTable::new(&cos[..n], &sin[..n], b.table_pairs).unwrap());
        }
        let orig = bufs();
        let v = Views { q: b.qv, k: b.kv, q_out: b.qov, k_out: b.kov };
        for (mode, untouched) in [(Mode::InPlace, (&orig.0, &orig.1)), (Mode::Into, (&orig.2, &orig.3))] {
            let (r0, q0, k0) = call_qk(&rope, mode, Via::Apply, &v, &orig, &opts, &format!("case {i}"));
            for via in [Via::Unrun, PARALLEL] {
                let what = format!("case {i}, {mode:?}, via {via:?}");
                let (r, q, k) = call_qk(&rope, mode, via, &v, &orig, &opts, &what);
                assert_eq!(r, r0, "{what}");
                // Errors write nothing; a prepared call that is never run writes nothing.
                let (want_q, want_k) = if r.is_err() || via == Via::Unrun { untouched } else { (&q0, &k0) };
                assert_bits(&q, want_q, &format!("{what}, q"));
                assert_bits(&k, want_k, &format!("{what}, k"));
            }
            if mode == Mode::InPlace {
                seen_err += usize::from(r0.is_err());
            }
        }
    }
    assert!(seen_err >= 10, "the fixture must produce errors ({seen_err})");
}

// ---------------------------------------------------------------------------------------
// rayon: shapes large enough to be split (at least 64 Ki elements), in pools of several
// sizes, against the single-threaded call.

#[cfg(feature = "rayon")]
fn par_large<T: TestElem>(seed: u64) {
    let mut rng = rng(seed);
    for (i, layout) in [PairLayout::HalfSplit, PairLayout::Interleaved].into_iter().enumerate() {
        let hd = 64;
        let rope = Rope::new(RopeConfig::new(hd, 500_000.0).with_rotary_dim(48).with_layout(layout)).unwrap();
        let cache = rope.build_cache(4096).unwrap();
        let tokens = 301;
        let (qv, kv) = if i == 0 {
            (View::token_major(tokens, 6, hd), View::token_major(tokens, 2, hd))
        } else {
            (View::head_major(tokens, 6, hd), view(2, tokens, 2, hd))
        };
        let ids: Vec<u32> = (0..tokens).map(|_| rng.random_range(0..4096)).collect();
        let q0: Vec<T> = buffer(&mut rng, qv, hd);
        let k0: Vec<T> = buffer(&mut rng, kv, hd);
        let options = [
            ("start 3000", ApplyOptions::start(3000)),
            ("ids, cache table", ApplyOptions::ids(&ids).with_table(cache.table())),
            ("ids, inverse", ApplyOptions::ids(&ids).inverse()),
        ];
        for (what, opts) in options {
            let name = format!("{} seed {seed} {layout:?} {what}", T::NAME);
            let (mut q1, mut k1) = (q0.clone(), k0.clone());
            rope.apply_qk(HeadsMut::new(&mut q1, qv), Some(HeadsMut::new(&mut k1, kv)), &opts).unwrap();
            for threads in [1, 2, 3, 8] {
                let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
                let (mut q2, mut k2) = (q0.clone(), k0.clone());
                pool.install(|| {
                    rope.par_apply_qk(HeadsMut::new(&mut q2, qv), Some(HeadsMut::new(&mut k2, kv)), &opts)
                })
                .unwrap();
                assert_bits(&q1, &q2, &format!("{name}: par q, {threads} threads"));
                assert_bits(&k1, &k2, &format!("{name}: par k, {threads} threads"));
                // Out of place, q only, into BSHD.
                let mut o1 = vec![T::default(); tokens * 6 * hd];
                let mut o2 = o1.clone();
                let ov = View::token_major(tokens, 6, hd);
                rope.apply_into(Heads::new(&q0, qv), HeadsMut::new(&mut o1, ov), &opts).unwrap();
                pool.install(|| rope.par_apply_into(Heads::new(&q0, qv), HeadsMut::new(&mut o2, ov), &opts))
                    .unwrap();
                assert_bits(&o1, &o2, &format!("{name}: par into, {threads} threads"));
                // One tensor in place.
                let mut x2 = q0.clone();
                pool.install(|| rope.par_apply(HeadsMut::new(&mut x2, qv), &opts)).unwrap();
                let mut x1 = q0.clone();
                rope.apply(HeadsMut::new(&mut x1, qv), &opts).unwrap();
                assert_bits(&x1, &x2, &format!("{name}: par apply, {threads} threads"));
            }
        }
    }
}

/// The runs of `par_large`: the element type (the instance) and the seed.
#[cfg(feature = "rayon")]
const PAR_LARGE_RUNS: [(fn(u64), u64); 3] =
    [(par_large::<f32>, 21), (par_large::<f16>, 22), (par_large::<bf16>, 23)];

#[cfg(feature = "rayon")]
#[test]
fn par_large_equals_single() {
    for (run, seed) in PAR_LARGE_RUNS {
        run(seed);
    }
}

/// Dynamic NTK with rayon on a call that is split: frequencies of the whole call.
#[cfg(feature = "rayon")]
#[test]
fn par_dynamic_ntk() {
    let config = RopeConfig::new(64, 10_000.0)
        .with_scaling(Scaling::DynamicNtk { factor: 4.0, max_position_embeddings: 256 });
    let rope = Rope::new(config).unwrap();
    let tokens = 1024;
    let v = View::token_major(tokens, 4, 64);
    let x0: Vec<f32> = random_vec(&mut rng(31), tokens * 4 * 64);
    let (mut a, mut b) = (x0.clone(), x0);
    rope.apply(HeadsMut::new(&mut a, v), &ApplyOptions::start(0)).unwrap();
    let pool = rayon::ThreadPoolBuilder::new().num_threads(4).build().unwrap();
    pool.install(|| rope.par_apply(HeadsMut::new(&mut b, v), &ApplyOptions::start(0))).unwrap();
    assert_bits(&a, &b, "par dynamic ntk");
}
