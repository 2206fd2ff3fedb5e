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
use rand::rngs::StdRng;
use rand::RngExt;
use rope_kernels::{
    bf16, f16, Apply, CosSinTable, Heads, HeadsMut, Layout, PreparedCall, Rope, RopeConfig, RopeError,
    Scaling, View,
};

/// How a prepared call is driven.
#[derive(Clone, Copy, Debug)]
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

fn drive<T: rope_kernels::Element>(mut call: PreparedCall<'_, T>, how: Drive) {
    let total = call.tokens();
    match how {
        Drive::Run => call.run(),
        Drive::PartsReversed(n) => {
            let chunks: Vec<_> = call.parts(n).collect();
            assert_eq!(chunks.len(), n.min(total));
            // Consecutive, covering every token once, sizes within one of each other.
            let mut next = 0;
            for c in &chunks {
                assert_eq!(c.range().start, next);
                next = c.range().end;
            }
            assert_eq!(next, total);
            if let (Some(min), Some(max)) =
                (chunks.iter().map(|c| c.len()).min(), chunks.iter().map(|c| c.len()).max())
            {
                assert!(max - min <= 1, "uneven parts {min}..{max}");
            }
            for c in chunks.into_iter().rev() {
                c.run();
            }
            assert_eq!(call.pending(), 0);
        }
        Drive::ChunksThreads(m) => {
            let chunks = call.chunks(m);
            assert_eq!(chunks.len(), total.div_ceil(m));
            std::thread::scope(|s| {
                for c in chunks {
                    assert!(c.len() <= m);
                    s.spawn(move || c.run());
                }
            });
        }
        Drive::SplitThreads => split_run(call.whole()),
        Drive::FirstThenRest => {
            if let Some(first) = call.parts(3).next() {
                first.run();
            }
            assert_eq!(call.pending(), total - total.div_ceil(3));
            call.run();
        }
    }
}

/// A strided view: 0 BSHD, 1 BHSD, 2 padded rows and tokens (a fused-QKV-like layout).
fn view(kind: u8, tokens: usize, heads: usize, hd: usize) -> View {
    match kind {
        0 => View::bshd(tokens, heads, hd),
        1 => View::bhsd(tokens, heads, hd),
        _ => View { tokens, heads, token_stride: heads * (hd + 1) + 2, head_stride: hd + 1 },
    }
}

/// A buffer for `v` with 5 spare elements, random contents.
fn buffer<T: TestElem>(rng: &mut StdRng, v: View, hd: usize) -> Vec<T> {
    let needed = v.validate(hd, usize::MAX, rope_kernels::Operand::Q).unwrap();
    random_vec(rng, needed + 5)
}

fn assert_bits<T: rope_kernels::Element>(a: &[T], b: &[T], what: &str) {
    assert_eq!(a.len(), b.len());
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        assert_eq!(x.to_bits_u32(), y.to_bits_u32(), "{what}: element {i} differs");
    }
}

/// One random call: configuration, shapes, views, positions, cos/sin source, direction.
struct Case {
    rope: Rope,
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
    fn random(rng: &mut StdRng, dynamic: bool) -> Case {
        let pairs = [1usize, 3, 4, 8, 17][rng.random_range(0..5)];
        let rotary_dim = 2 * pairs;
        let head_dim = rotary_dim + [0, 0, 2, 5][rng.random_range(0..4)];
        let layout = if rng.random_bool(0.5) { Layout::HalfSplit } else { Layout::Interleaved };
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

    fn opts(&self) -> Apply<'_> {
        let mut o = if self.use_ids { Apply::ids(&self.positions) } else { Apply::start(self.start) };
        if let Some((cos, sin)) = &self.table {
            o = o.with_table(CosSinTable::new(cos, sin, self.rope.config().pairs()).unwrap());
        }
        if self.inverse {
            o = o.inverse();
        }
        o
    }

    fn hd(&self) -> usize {
        self.rope.config().head_dim
    }

    fn qv(&self, i: usize) -> View {
        view(self.views[i], self.tokens, self.q_heads, self.hd())
    }

    fn kv(&self, i: usize) -> Option<View> {
        self.k_heads.map(|h| view(self.views[i], self.tokens, h, self.hd()))
    }

    /// In place: the prepared call driven `how` against `apply_qk`.
    fn check_in_place<T: TestElem>(&self, rng: &mut StdRng, how: Drive) {
        let (qv, kv) = (self.qv(0), self.kv(1));
        let q0: Vec<T> = buffer(rng, qv, self.hd());
        let k0: Vec<T> = kv.map_or(vec![], |kv| buffer(rng, kv, self.hd()));
        let opts = self.opts();
        let (mut q1, mut k1) = (q0.clone(), k0.clone());
        self.rope
            .apply_qk(HeadsMut::new(&mut q1, qv), kv.map(|kv| HeadsMut::new(&mut k1, kv)), &opts)
            .unwrap();
        let (mut q2, mut k2) = (q0.clone(), k0.clone());
        let call = self
            .rope
            .prepare_qk(HeadsMut::new(&mut q2, qv), kv.map(|kv| HeadsMut::new(&mut k2, kv)), &opts)
            .unwrap();
        drive(call, how);
        assert_bits(&q1, &q2, &format!("{} q {how:?}", T::NAME));
        assert_bits(&k1, &k2, &format!("{} k {how:?}", T::NAME));
        #[cfg(feature = "rayon")]
        {
            let (mut q3, mut k3) = (q0, k0);
            self.rope
                .par_apply_qk(HeadsMut::new(&mut q3, qv), kv.map(|kv| HeadsMut::new(&mut k3, kv)), &opts)
                .unwrap();
            assert_bits(&q1, &q3, &format!("{} q par", T::NAME));
            assert_bits(&k1, &k3, &format!("{} k par", T::NAME));
        }
    }

    /// Out of place: the prepared call driven `how` against `apply_qk_into`.
    fn check_into<T: TestElem>(&self, rng: &mut StdRng, how: Drive) {
        let (qv, kv, qov, kov) = (self.qv(0), self.kv(1), self.qv(2), self.kv(3));
        let hd = self.hd();
        let q: Vec<T> = buffer(rng, qv, hd);
        let k: Vec<T> = kv.map_or(vec![], |kv| buffer(rng, kv, hd));
        let qo0: Vec<T> = buffer(rng, qov, hd);
        let ko0: Vec<T> = kov.map_or(vec![], |v| buffer(rng, v, hd));
        let opts = self.opts();
        let (mut qo1, mut ko1) = (qo0.clone(), ko0.clone());
        self.rope
            .apply_qk_into(
                Heads::new(&q, qv),
                HeadsMut::new(&mut qo1, qov),
                k_pair(&k, kv, &mut ko1, kov),
                &opts,
            )
            .unwrap();
        let (mut qo2, mut ko2) = (qo0.clone(), ko0.clone());
        let call = self
            .rope
            .prepare_qk_into(
                Heads::new(&q, qv),
                HeadsMut::new(&mut qo2, qov),
                k_pair(&k, kv, &mut ko2, kov),
                &opts,
            )
            .unwrap();
        drive(call, how);
        assert_bits(&qo1, &qo2, &format!("{} q_out {how:?}", T::NAME));
        assert_bits(&ko1, &ko2, &format!("{} k_out {how:?}", T::NAME));
        #[cfg(feature = "rayon")]
        {
            let (mut qo3, mut ko3) = (qo0, ko0);
            self.rope
                .par_apply_qk_into(
                    Heads::new(&q, qv),
                    HeadsMut::new(&mut qo3, qov),
                    k_pair(&k, kv, &mut ko3, kov),
                    &opts,
                )
                .unwrap();
            assert_bits(&qo1, &qo3, &format!("{} q_out par", T::NAME));
            assert_bits(&ko1, &ko3, &format!("{} k_out par", T::NAME));
        }
    }
}

fn k_pair<'b, T>(
    k: &'b [T],
    kv: Option<View>,
    ko: &'b mut [T],
    kov: Option<View>,
) -> Option<(Heads<'b, T>, HeadsMut<'b, T>)> {
    kv.zip(kov).map(|(kv, kov)| (Heads::new(k, kv), HeadsMut::new(ko, kov)))
}

fn random_cases<T: TestElem>(seed: u64, dynamic: bool) {
    let mut rng = rng(seed);
    for i in 0..120 {
        let case = Case::random(&mut rng, dynamic);
        let how = DRIVES[i % DRIVES.len()];
        case.check_in_place::<T>(&mut rng, how);
        case.check_into::<T>(&mut rng, how);
    }
}

#[test]
fn chunked_equals_single_f32() {
    random_cases::<f32>(1, false);
}

#[test]
fn chunked_equals_single_f16() {
    random_cases::<f16>(2, false);
}

#[test]
fn chunked_equals_single_bf16() {
    random_cases::<bf16>(3, false);
}

#[test]
fn chunked_equals_single_dynamic_ntk() {
    random_cases::<f32>(4, true);
    random_cases::<bf16>(5, true);
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
    let v = View::bshd(tokens, 3, 16);
    let x0: Vec<f32> = random_vec(&mut rng(9), tokens * 3 * 16);
    let mut single = x0.clone();
    rope.apply(HeadsMut::new(&mut single, v), &Apply::ids(&positions)).unwrap();
    let mut chunked = x0.clone();
    let mut call = rope.prepare(HeadsMut::new(&mut chunked, v), &Apply::ids(&positions)).unwrap();
    let chunks: Vec<_> = call.parts(4).collect();
    assert_eq!(chunks[0].range(), 0..10);
    chunks.into_iter().for_each(|c| c.run());
    assert_bits(&single, &chunked, "dynamic ntk, 4 parts");
    // The first chunk run as a call of its own differs: what per-chunk frequencies would do.
    let mut alone = x0.clone();
    rope.apply(HeadsMut::new(&mut alone, View::bshd(10, 3, 16)), &Apply::ids(&positions[..10])).unwrap();
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
                HeadsMut::new(&mut q, View::bshd(tokens, qh, 8)),
                Some(HeadsMut::new(&mut k, View::bshd(tokens, kh, 8))),
                &Apply::start(7),
            )
            .unwrap();
        assert_eq!(call.tokens(), 0);
        assert_eq!(call.parts(4).count(), 0);
        assert!(call.whole().is_empty());
        call.run();
        #[cfg(feature = "rayon")]
        rope.par_apply_qk(
            HeadsMut::new(&mut q, View::bshd(tokens, qh, 8)),
            Some(HeadsMut::new(&mut k, View::bshd(tokens, kh, 8))),
            &Apply::start(7),
        )
        .unwrap();
    }
    assert!(q.iter().all(|&x| x == 1.5) && k.iter().all(|&x| x == 2.5));
    // Zero q heads but k heads: the tokens are there and k is rotated.
    let call = rope
        .prepare_qk(
            HeadsMut::new(&mut q, View::bshd(2, 0, 8)),
            Some(HeadsMut::new(&mut k, View::bshd(2, 1, 8))),
            &Apply::start(7),
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
    let mut call = rope.prepare(HeadsMut::new(&mut x, View::bshd(5, 1, 4)), &Apply::start(1)).unwrap();
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

type Bufs = (Vec<f32>, Vec<f32>, Vec<f32>, Vec<f32>);

fn bufs() -> Bufs {
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
        qv: View::bshd(3, 4, hd),
        kv: Some(View::bshd(3, 2, hd)),
        ids: None,
        start: 5,
        table_rows: None,
        table_pairs: 3,
        qov: View::bshd(3, 4, hd),
        kov: Some(View::bshd(3, 2, hd)),
    };
    let with = |f: &dyn Fn(&mut Bad)| {
        let mut b = Bad { ids: ok.ids.clone(), ..ok };
        f(&mut b);
        b
    };
    vec![
        with(&|b| b.qv = View::bshd(30, 4, hd)), // q too short
        with(&|b| b.qv = View { tokens: 3, heads: 4, token_stride: 8, head_stride: 2 }), // q overlap
        with(&|b| b.kv = Some(View::bshd(4, 2, hd))), // k tokens
        with(&|b| b.kv = Some(View { tokens: 3, heads: 2, token_stride: usize::MAX / 2, head_stride: 8 })),
        with(&|b| b.ids = Some(vec![1, 2])),                      // count
        with(&|b| b.start = u32::MAX - 1),                        // overflow
        with(&|b| (b.table_rows, b.table_pairs) = (Some(10), 2)), // table width
        with(&|b| b.table_rows = Some(7)),                        // out of range
        with(&|b| (b.table_rows, b.ids) = (Some(7), Some(vec![0, 6, 2]))), // ids in range: ok
        with(&|b| (b.table_rows, b.ids) = (Some(7), Some(vec![0, 7, 2]))), // ids out of range
        with(&|b| (b.qv, b.start) = (View::bshd(30, 4, hd), u32::MAX)), // order: view first
        with(&|b| (b.qv, b.kv, b.start) = (View::bshd(3, 0, hd), Some(View::bshd(3, 0, hd)), u32::MAX)),
        with(&|b| (b.qv, b.kv, b.table_rows) = (View::bshd(0, 4, hd), Some(View::bshd(0, 2, hd)), Some(1))),
        with(&|b| b.qov = View::bshd(3, 3, hd)),       // q_out shape
        with(&|b| b.kov = Some(View::bshd(3, 2, 20))), // k_out too short
        with(&|b| (b.qov, b.kv) = (View::bshd(3, 3, hd), Some(View::bshd(4, 2, hd)))), // order
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
            Some(ids) => Apply::ids(ids),
            None => Apply::start(b.start),
        };
        if let Some(rows) = b.table_rows {
            let n = rows * b.table_pairs;
            opts = opts.with_table(CosSinTable::new(&cos[..n], &sin[..n], b.table_pairs).unwrap());
        }
        let orig = bufs();

        // In place.
        let run = |how: u8| {
            let (mut q, mut k, _, _) = orig.clone();
            let (qm, km) = (HeadsMut::new(&mut q, b.qv), b.kv.map(|kv| HeadsMut::new(&mut k, kv)));
            let r = match how {
                0 => rope.apply_qk(qm, km, &opts),
                1 => rope.prepare_qk(qm, km, &opts).map(drop),
                _ => par_qk(&rope, qm, km, &opts),
            };
            (r, q, k)
        };
        let (r0, q0, k0) = run(0);
        for how in 1..3 {
            let (r, q, k) = run(how);
            assert_eq!(r, r0, "case {i}, in place, drive {how}");
            if r.is_err() || how == 1 {
                // Errors write nothing; a prepared call that is never run writes nothing.
                assert_bits(&q, &orig.0, "q untouched");
                assert_bits(&k, &orig.1, "k untouched");
            } else {
                assert_bits(&q, &q0, "q as apply");
                assert_bits(&k, &k0, "k as apply");
            }
        }
        seen_err += usize::from(r0.is_err());

        // Out of place.
        let run_into = |how: u8| {
            let (q, k, mut qo, mut ko) = orig.clone();
            let qi = Heads::new(&q, b.qv);
            let qom = HeadsMut::new(&mut qo, b.qov);
            let kp = b.kv.zip(b.kov).map(|(kv, kov)| (Heads::new(&k, kv), HeadsMut::new(&mut ko, kov)));
            let r = match how {
                0 => rope.apply_qk_into(qi, qom, kp, &opts),
                1 => rope.prepare_qk_into(qi, qom, kp, &opts).map(drop),
                _ => par_qk_into(&rope, qi, qom, kp, &opts),
            };
            (r, qo, ko)
        };
        let (r0, _, _) = run_into(0);
        for how in 1..3 {
            let (r, qo, ko) = run_into(how);
            assert_eq!(r, r0, "case {i}, out of place, drive {how}");
            if r.is_err() {
                assert_bits(&qo, &orig.2, "q_out untouched");
                assert_bits(&ko, &orig.3, "k_out untouched");
            }
        }
    }
    assert!(seen_err >= 10, "the fixture must produce errors ({seen_err})");
}

#[cfg(feature = "rayon")]
fn par_qk(
    rope: &Rope,
    q: HeadsMut<'_, f32>,
    k: Option<HeadsMut<'_, f32>>,
    o: &Apply<'_>,
) -> Result<(), RopeError> {
    rope.par_apply_qk(q, k, o)
}

#[cfg(not(feature = "rayon"))]
fn par_qk(
    rope: &Rope,
    q: HeadsMut<'_, f32>,
    k: Option<HeadsMut<'_, f32>>,
    o: &Apply<'_>,
) -> Result<(), RopeError> {
    rope.prepare_qk(q, k, o).map(PreparedCall::run)
}

#[cfg(feature = "rayon")]
fn par_qk_into(
    rope: &Rope,
    q: Heads<'_, f32>,
    qo: HeadsMut<'_, f32>,
    k: Option<(Heads<'_, f32>, HeadsMut<'_, f32>)>,
    o: &Apply<'_>,
) -> Result<(), RopeError> {
    rope.par_apply_qk_into(q, qo, k, o)
}

#[cfg(not(feature = "rayon"))]
fn par_qk_into(
    rope: &Rope,
    q: Heads<'_, f32>,
    qo: HeadsMut<'_, f32>,
    k: Option<(Heads<'_, f32>, HeadsMut<'_, f32>)>,
    o: &Apply<'_>,
) -> Result<(), RopeError> {
    rope.prepare_qk_into(q, qo, k, o).map(PreparedCall::run)
}

// ---------------------------------------------------------------------------------------
// rayon: shapes large enough to be split (at least 64 Ki elements), in pools of several
// sizes, against the single-threaded call.

#[cfg(feature = "rayon")]
fn par_large<T: TestElem>(seed: u64) {
    let mut rng = rng(seed);
    for (i, layout) in [Layout::HalfSplit, Layout::Interleaved].into_iter().enumerate() {
        let hd = 64;
        let rope = Rope::new(RopeConfig::new(hd, 500_000.0).with_rotary_dim(48).with_layout(layout)).unwrap();
        let cache = rope.build_cache(4096).unwrap();
        let tokens = 301;
        let (qv, kv) = if i == 0 {
            (View::bshd(tokens, 6, hd), View::bshd(tokens, 2, hd))
        } else {
            (View::bhsd(tokens, 6, hd), view(2, tokens, 2, hd))
        };
        let ids: Vec<u32> = (0..tokens).map(|_| rng.random_range(0..4096)).collect();
        let q0: Vec<T> = buffer(&mut rng, qv, hd);
        let k0: Vec<T> = buffer(&mut rng, kv, hd);
        for opts in
            [Apply::start(3000), Apply::ids(&ids).with_table(cache.table()), Apply::ids(&ids).inverse()]
        {
            let (mut q1, mut k1) = (q0.clone(), k0.clone());
            rope.apply_qk(HeadsMut::new(&mut q1, qv), Some(HeadsMut::new(&mut k1, kv)), &opts).unwrap();
            for threads in [1, 2, 3, 8] {
                let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
                let (mut q2, mut k2) = (q0.clone(), k0.clone());
                pool.install(|| {
                    rope.par_apply_qk(HeadsMut::new(&mut q2, qv), Some(HeadsMut::new(&mut k2, kv)), &opts)
                })
                .unwrap();
                assert_bits(&q1, &q2, &format!("{} par q, {threads} threads", T::NAME));
                assert_bits(&k1, &k2, &format!("{} par k, {threads} threads", T::NAME));
                // Out of place, q only, into BSHD.
                let mut o1 = vec![T::default(); tokens * 6 * hd];
                let mut o2 = o1.clone();
                let ov = View::bshd(tokens, 6, hd);
                rope.apply_into(Heads::new(&q0, qv), HeadsMut::new(&mut o1, ov), &opts).unwrap();
                pool.install(|| rope.par_apply_into(Heads::new(&q0, qv), HeadsMut::new(&mut o2, ov), &opts))
                    .unwrap();
                assert_bits(&o1, &o2, &format!("{} par into, {threads} threads", T::NAME));
                // One tensor in place.
                let mut x2 = q0.clone();
                pool.install(|| rope.par_apply(HeadsMut::new(&mut x2, qv), &opts)).unwrap();
                let mut x1 = q0.clone();
                rope.apply(HeadsMut::new(&mut x1, qv), &opts).unwrap();
                assert_bits(&x1, &x2, &format!("{} par apply, {threads} threads", T::NAME));
            }
        }
    }
}

#[cfg(feature = "rayon")]
#[test]
fn par_large_f32() {
    par_large::<f32>(21);
}

#[cfg(feature = "rayon")]
#[test]
fn par_large_f16() {
    par_large::<f16>(22);
}

#[cfg(feature = "rayon")]
#[test]
fn par_large_bf16() {
    par_large::<bf16>(23);
}

/// Dynamic NTK with rayon on a call that is split: frequencies of the whole call.
#[cfg(feature = "rayon")]
#[test]
fn par_dynamic_ntk() {
    let config = RopeConfig::new(64, 10_000.0)
        .with_scaling(Scaling::DynamicNtk { factor: 4.0, max_position_embeddings: 256 });
    let rope = Rope::new(config).unwrap();
    let tokens = 1024;
    let v = View::bshd(tokens, 4, 64);
    let x0: Vec<f32> = random_vec(&mut rng(31), tokens * 4 * 64);
    let (mut a, mut b) = (x0.clone(), x0);
    rope.apply(HeadsMut::new(&mut a, v), &Apply::start(0)).unwrap();
    let pool = rayon::ThreadPoolBuilder::new().num_threads(4).build().unwrap();
    pool.install(|| rope.par_apply(HeadsMut::new(&mut b, v), &Apply::start(0))).unwrap();
    assert_bits(&a, &b, "par dynamic ntk");
}
