//! Every `RopeError` variant, produced through the public API by a test that also checks
//! that every buffer the call received (q, k, outputs, cos/sin tables) is bit-for-bit
//! unchanged; zero tokens or zero heads are `Ok` no-ops; the order in which errors are
//! reported; and a coverage test that parses `src/error.rs` so a new variant without a test
//! fails.
//!
//! Buffers are filled with random values and NaN payloads, so "unchanged" is a comparison of
//! bits, not of values.

mod common;

use common::*;
use rope_kernels::dispatch::{self, ALL_TIERS};
use rope_kernels::{
    bf16, f16, ApplyOptions, CosSinTable, Frequencies, Heads, HeadsMut, Operand, PairLayout, Rope,
    RopeConfig, RopeError, Scaling, View, YarnParams, MAX_ROTARY_DIM,
};

// ---------------------------------------------------------------------------------------
// Fixture: head_dim 8, rotary_dim 6 (3 pairs), 3 tokens, 4 q heads, 2 kv heads, a 5-row table.

const HD: usize = 8;
const RD: usize = 6;
const PAIRS: usize = RD / 2;
const TOKENS: usize = 3;
const QH: usize = 4;
const KH: usize = 2;
const ROWS: usize = 5;

fn rope() -> Rope<'static> {
    Rope::new(RopeConfig::new(HD, 10_000.0).with_rotary_dim(RD).with_layout(PairLayout::Interleaved)).unwrap()
}

/// Every buffer a call may receive.
struct Bufs<T> {
    q: Vec<T>,
    k: Vec<T>,
    q_out: Vec<T>,
    k_out: Vec<T>,
    cos: Vec<f32>,
    sin: Vec<f32>,
}

impl<T: TestElem> Bufs<T> {
    /// Random contents with NaN payloads; each tensor buffer has 5 spare elements.
    fn new(seed: u64) -> Self {
        let mut rng = rng(seed);
        let nans = nan_payloads::<T>();
        let mut v = |n: usize| {
            let mut b: Vec<T> = random_vec(&mut rng, n + 5);
            for (i, x) in b.iter_mut().enumerate().step_by(7) {
                *x = nans[i % nans.len()];
            }
            b
        };
        let (q, k, q_out, k_out) =
            (v(TOKENS * QH * HD), v(TOKENS * KH * HD), v(TOKENS * QH * HD), v(TOKENS * KH * HD));
        let rope = rope();
        let (mut cos, mut sin) = (vec![0.0; ROWS * PAIRS], vec![0.0; ROWS * PAIRS]);
        rope.fill_table(0, &mut cos, &mut sin).unwrap();
        Bufs { q, k, q_out, k_out, cos, sin }
    }

    fn snapshot(&self) -> [Vec<u32>; 6] {
        [bits(&self.q), bits(&self.k), bits(&self.q_out), bits(&self.k_out), bits(&self.cos), bits(&self.sin)]
    }
}

/// Runs `call`, asserts it returns `Err(want)` and that no buffer changed; returns the error.
fn expect_err<T: TestElem>(
    want: RopeError,
    b: &mut Bufs<T>,
    call: impl FnOnce(&mut Bufs<T>) -> Result<(), RopeError>,
) -> RopeError {
    let before = b.snapshot();
    let got = call(b);
    assert_eq!(got, Err(want), "{}", T::NAME);
    let after = b.snapshot();
    for (i, name) in ["q", "k", "q_out", "k_out", "cos", "sin"].iter().enumerate() {
        assert!(before[i] == after[i], "{}: {want:?} modified {name}", T::NAME);
    }
    want
}

/// Runs `call`, asserts `Ok(())` and that no buffer changed.
fn expect_noop<T: TestElem>(b: &mut Bufs<T>, call: impl FnOnce(&mut Bufs<T>) -> Result<(), RopeError>) {
    let before = b.snapshot();
    assert_eq!(call(b), Ok(()), "{}", T::NAME);
    assert!(before == b.snapshot(), "{}: a no-op call modified a buffer", T::NAME);
}

fn q_view() -> View {
    View::token_major(TOKENS, QH, HD)
}
fn k_view() -> View {
    View::head_major(TOKENS, KH, HD)
}
fn q_out_view() -> View {
    View::head_major(TOKENS, QH, HD)
}
fn k_out_view() -> View {
    View::token_major(TOKENS, KH, HD)
}

/// The four entry points, with one operand's view (and buffer length) replaced.
#[derive(Clone, Copy, Debug)]
enum Entry {
    Apply,
    ApplyQk,
    ApplyInto,
    ApplyQkInto,
}

impl Entry {
    fn operands(self) -> &'static [Operand] {
        match self {
            Entry::Apply => &[Operand::Q],
            Entry::ApplyQk => &[Operand::Q, Operand::K],
            Entry::ApplyInto => &[Operand::Q, Operand::QOut],
            Entry::ApplyQkInto => &[Operand::Q, Operand::QOut, Operand::K, Operand::KOut],
        }
    }
}

const ENTRIES: [Entry; 4] = [Entry::Apply, Entry::ApplyQk, Entry::ApplyInto, Entry::ApplyQkInto];

/// Views and buffer lengths of the four operands (`[q, k, q_out, k_out]`).
#[derive(Clone, Copy)]
struct Shapes {
    views: [View; 4],
    lens: [usize; 4],
}

impl Shapes {
    fn good() -> Self {
        let views = [q_view(), k_view(), q_out_view(), k_out_view()];
        let lens = views.map(|v| v.validate(HD, usize::MAX, Operand::Q).unwrap());
        Shapes { views, lens }
    }

    fn with(mut self, op: Operand, view: View, len: Option<usize>) -> Self {
        let i = slot(op);
        self.views[i] = view;
        if let Some(len) = len {
            self.lens[i] = len;
        }
        self
    }
}

fn slot(op: Operand) -> usize {
    match op {
        Operand::Q => 0,
        Operand::K => 1,
        Operand::QOut => 2,
        Operand::KOut => 3,
        Operand::CosSin | Operand::V | Operand::VOut => unreachable!(),
    }
}

/// Calls `entry` on (prefixes of) the buffers with the given shapes.
fn call<T: TestElem>(
    rope: &Rope,
    entry: Entry,
    s: Shapes,
    b: &mut Bufs<T>,
    opts: &ApplyOptions<'_>,
) -> Result<(), RopeError> {
    call_parts(rope, entry, s, [&mut b.q, &mut b.k, &mut b.q_out, &mut b.k_out], opts)
}

/// As [`call`], on the four tensor buffers alone (so that `cos`/`sin` can be borrowed for a
/// table at the same time).
fn call_parts<T: TestElem>(
    rope: &Rope,
    entry: Entry,
    s: Shapes,
    bufs: [&mut Vec<T>; 4],
    opts: &ApplyOptions<'_>,
) -> Result<(), RopeError> {
    let [qv, kv, qov, kov] = s.views;
    let [ql, kl, qol, kol] = s.lens;
    let [q, k, qo, ko] = bufs;
    let (q, k, qo, ko) = (&mut q[..ql], &mut k[..kl], &mut qo[..qol], &mut ko[..kol]);
    match entry {
        Entry::Apply => rope.apply(HeadsMut::new(q, qv), opts),
        Entry::ApplyQk => rope.apply_qk(HeadsMut::new(q, qv), Some(HeadsMut::new(k, kv)), opts),
        Entry::ApplyInto => rope.apply_into(Heads::new(q, qv), HeadsMut::new(qo, qov), opts),
        Entry::ApplyQkInto => rope.apply_qk_into(
            Heads::new(q, qv),
            HeadsMut::new(qo, qov),
            Some((Heads::new(k, kv), HeadsMut::new(ko, kov))),
            opts,
        ),
    }
}

/// `call` with a caller table over the fixture's own `cos`/`sin` buffers.
fn call_with_table<T: TestElem>(
    rope: &Rope,
    entry: Entry,
    s: Shapes,
    b: &mut Bufs<T>,
    pairs: usize,
    opts: &ApplyOptions<'_>,
) -> Result<(), RopeError> {
    let Bufs { q, k, q_out, k_out, cos, sin } = b;
    let table = CosSinTable::new(cos, sin, pairs)?;
    call_parts(rope, entry, s, [q, k, q_out, k_out], &opts.with_table(table))
}

/// For every entry point and every operand it takes: that operand gets `view` (and buffer
/// length `len`, if given), the others stay valid; the call must fail with `want(operand)`.
fn each_operand<T: TestElem>(
    seed: u64,
    view: impl Fn(Operand) -> View,
    len: impl Fn(Operand) -> Option<usize>,
    want: impl Fn(Operand) -> RopeError,
) -> Vec<RopeError> {
    let rope = rope();
    let mut b = Bufs::<T>::new(seed);
    let mut errs = Vec::new();
    for entry in ENTRIES {
        for &op in entry.operands() {
            let s = Shapes::good().with(op, view(op), len(op));
            let e = expect_err(want(op), &mut b, |b| call(&rope, entry, s, b, &ApplyOptions::start(0)));
            errs.push(e);
        }
    }
    errs
}

// ---------------------------------------------------------------------------------------
// Configuration errors (no buffer is involved; `Frequencies::new` agrees with `Rope::new`).

fn config_err(cfg: RopeConfig, want: RopeError) -> RopeError {
    assert_eq!(cfg.validate(), Err(want), "{cfg:?}");
    freq_err(cfg, want)
}

/// A configuration whose fields are in their domains but whose frequencies overflow:
/// rejected by `Rope::new` and `Frequencies::new`.
fn freq_err(cfg: RopeConfig, want: RopeError) -> RopeError {
    assert_eq!(Rope::new(cfg.clone()).map(|_| ()), Err(want), "{cfg:?}");
    assert_eq!(Frequencies::new(&cfg, 1).map(|_| ()), Err(want), "{cfg:?}");
    want
}

fn zero_head_dim() -> Vec<RopeError> {
    vec![
        config_err(RopeConfig::new(0, 10_000.0), RopeError::ZeroHeadDim),
        // head_dim is checked first, whatever rotary_dim is.
        config_err(RopeConfig::new(0, 10_000.0).with_rotary_dim(3), RopeError::ZeroHeadDim),
    ]
}

fn invalid_rotary_dim() -> Vec<RopeError> {
    [0, 1, 3, 7]
        .into_iter()
        .map(|rd| {
            config_err(
                RopeConfig::new(8, 1e4).with_rotary_dim(rd),
                RopeError::InvalidRotaryDim { rotary_dim: rd },
            )
        })
        .collect()
}

fn rotary_dim_exceeds_head_dim() -> Vec<RopeError> {
    vec![config_err(
        RopeConfig::new(8, 1e4).with_rotary_dim(10),
        RopeError::RotaryDimExceedsHeadDim { rotary_dim: 10, head_dim: 8 },
    )]
}

fn rotary_dim_too_large() -> Vec<RopeError> {
    let max = MAX_ROTARY_DIM;
    // The limit itself is fine.
    assert!(Rope::new(RopeConfig::new(max, 1e4)).is_ok());
    [max + 2, 2 * max]
        .into_iter()
        .map(|rd| {
            config_err(
                RopeConfig::new(2 * max, 1e4).with_rotary_dim(rd),
                RopeError::RotaryDimTooLarge { rotary_dim: rd, max },
            )
        })
        .collect()
}

fn invalid_theta() -> Vec<RopeError> {
    let mut errs: Vec<RopeError> = [0.0, -0.0, -1.0, f64::NAN, f64::INFINITY, f64::NEG_INFINITY]
        .into_iter()
        .map(|theta| config_err(RopeConfig::new(8, theta), RopeError::InvalidTheta))
        .collect();
    // Subnormal theta: theta^(126/128) underflows to below 1 / f64::MAX, so inv_freq[63] is
    // infinite and every output of that pair would be NaN.
    let tiny = f64::MIN_POSITIVE / 1e10;
    errs.push(freq_err(RopeConfig::new(128, tiny), RopeError::InvalidTheta));
    // A finite inv_freq above 2^95 (the angle of position u32::MAX would overflow f32): with
    // head_dim 8, inv_freq[3] = theta^(-3/4) is 1e30 for theta 1e-40; 3.2e28 for 1e-38.
    errs.push(freq_err(RopeConfig::new(8, 1e-40), RopeError::InvalidTheta));
    assert!(Rope::new(RopeConfig::new(8, 1e-38)).is_ok());
    errs
}

fn invalid_scaling_parameter() -> Vec<RopeError> {
    let want = RopeError::InvalidScalingParameter { name: "factor" };
    let mut errs: Vec<RopeError> = [0.0, -0.0, -2.0, f64::NAN, f64::INFINITY, f64::NEG_INFINITY]
        .into_iter()
        .map(|factor| config_err(RopeConfig::new(8, 1e4).with_scaling(Scaling::Linear { factor }), want))
        .collect();
    // A factor so small that inv_freq[0] / factor = 1 / 1e-310 overflows.
    errs.push(freq_err(RopeConfig::new(8, 1e4).with_scaling(Scaling::Linear { factor: 1e-310 }), want));
    // Finite, but above 2^95 radians per position: 1 / 1e-30.
    errs.push(freq_err(RopeConfig::new(8, 1e4).with_scaling(Scaling::Linear { factor: 1e-30 }), want));
    // An attention factor above f32::MAX would make the f32 cos/sin rows infinite.
    let yarn = YarnParams::new(4.0, 4096).with_attention_factor(1e39);
    let af = RopeError::InvalidScalingParameter { name: "attention_factor" };
    errs.push(freq_err(RopeConfig::new(8, 1e4).with_scaling(Scaling::Yarn(yarn)), af));
    // `Frequencies::set_inv_freq_f32` rejects non-finite or negative values and keeps its table.
    let mut f = Frequencies::new(&RopeConfig::new(8, 1e4), 0).unwrap();
    let before = f.clone();
    for bad in [f32::NAN, f32::INFINITY, -1.0, 1e30] {
        let table = [1.0, 0.5, bad, 0.25];
        let want = RopeError::InvalidScalingParameter { name: "inv_freq" };
        assert_eq!(f.set_inv_freq_f32(&table), Err(want));
        assert_eq!(f, before);
        errs.push(want);
    }
    errs
}

// ---------------------------------------------------------------------------------------
// View errors, for each operand of each entry point, each element type.

fn overlapping_strides() -> Vec<RopeError> {
    let mut errs = Vec::new();
    let views = [
        // Heads share elements: head_stride < head_dim.
        |_: Operand| View { tokens: TOKENS, heads: 2, token_stride: 2 * HD, head_stride: HD - 1 },
        // Tokens and heads collide: equal strides.
        |_: Operand| View { tokens: TOKENS, heads: 2, token_stride: HD, head_stride: HD },
        // Token stride 0 with several tokens.
        |_: Operand| View { tokens: TOKENS, heads: 1, token_stride: 0, head_stride: HD },
    ];
    for view in views {
        let want = |operand| RopeError::OverlappingStrides { operand };
        errs.extend(each_operand::<f32>(1, view, |_| None, want));
        errs.extend(each_operand::<f16>(2, view, |_| None, want));
        errs.extend(each_operand::<bf16>(3, view, |_| None, want));
    }
    errs
}

fn stride_overflow() -> Vec<RopeError> {
    let mut errs = Vec::new();
    let views = [
        |_: Operand| View { tokens: TOKENS, heads: 1, token_stride: usize::MAX / 2, head_stride: HD },
        |_: Operand| View { tokens: 1, heads: 3, token_stride: 0, head_stride: usize::MAX / 2 + 1 },
        // (t-1)*ts and (h-1)*hs fit separately; their sum does not.
        |_: Operand| View { tokens: 2, heads: 2, token_stride: usize::MAX / 2, head_stride: usize::MAX / 2 },
        // `View::bshd` saturates the token stride.
        |_: Operand| View::token_major(2, usize::MAX / 4, HD),
    ];
    for view in views {
        let want = |operand| RopeError::StrideOverflow { operand };
        errs.extend(each_operand::<f32>(4, view, |_| None, want));
        errs.extend(each_operand::<f16>(5, view, |_| None, want));
    }
    errs
}

fn buffer_too_short() -> Vec<RopeError> {
    let good = Shapes::good();
    let needed = |op: Operand| good.lens[slot(op)];
    let mut errs = Vec::new();
    for short_by in [1, HD] {
        let len = |op: Operand| Some(needed(op) - short_by);
        let want = |operand: Operand| RopeError::BufferTooShort {
            operand,
            needed: needed(operand),
            len: needed(operand) - short_by,
        };
        let view = |op: Operand| good.views[slot(op)];
        errs.extend(each_operand::<f32>(6, view, len, want));
        errs.extend(each_operand::<f16>(7, view, len, want));
        errs.extend(each_operand::<bf16>(8, view, len, want));
    }
    // An empty buffer for a non-empty view.
    errs.extend(each_operand::<f32>(
        9,
        |op| good.views[slot(op)],
        |_| Some(0),
        |operand| RopeError::BufferTooShort { operand, needed: needed(operand), len: 0 },
    ));
    errs
}

// ---------------------------------------------------------------------------------------
// Shapes, positions, tables, tiers.

fn shape_mismatch() -> Vec<RopeError> {
    let rope = rope();
    let mut b = Bufs::<f32>::new(10);
    let mut errs = Vec::new();
    let s = Shapes::good();
    let o = ApplyOptions::start(0);
    let cases: [(Shapes, Operand, &[Entry]); 7] = [
        // k has fewer tokens than q (its output matches k).
        (
            s.with(Operand::K, View::head_major(2, KH, HD), None).with(
                Operand::KOut,
                View::token_major(2, KH, HD),
                None,
            ),
            Operand::K,
            &[Entry::ApplyQk, Entry::ApplyQkInto],
        ),
        // k with zero tokens is still a mismatch with q's 3.
        (
            s.with(Operand::K, View::head_major(0, KH, HD), None).with(
                Operand::KOut,
                View::token_major(0, KH, HD),
                None,
            ),
            Operand::K,
            &[Entry::ApplyQk, Entry::ApplyQkInto],
        ),
        // Output token count or head count differs from its input.
        (
            s.with(Operand::QOut, View::head_major(2, QH, HD), None),
            Operand::QOut,
            &[Entry::ApplyInto, Entry::ApplyQkInto],
        ),
        (
            s.with(Operand::QOut, View::head_major(TOKENS, 3, HD), None),
            Operand::QOut,
            &[Entry::ApplyInto, Entry::ApplyQkInto],
        ),
        (
            s.with(Operand::QOut, View::head_major(TOKENS, 0, HD), None),
            Operand::QOut,
            &[Entry::ApplyInto, Entry::ApplyQkInto],
        ),
        (s.with(Operand::KOut, View::token_major(2, KH, HD), None), Operand::KOut, &[Entry::ApplyQkInto]),
        (s.with(Operand::KOut, View::token_major(TOKENS, 1, HD), None), Operand::KOut, &[Entry::ApplyQkInto]),
    ];
    for (shapes, operand, entries) in cases {
        for &entry in entries {
            let want = RopeError::ShapeMismatch { operand };
            errs.push(expect_err(want, &mut b, |b| call(&rope, entry, shapes, b, &o)));
        }
    }
    errs
}

fn position_count_mismatch() -> Vec<RopeError> {
    let rope = rope();
    let mut b = Bufs::<f32>::new(11);
    let mut errs = Vec::new();
    for ids in [&[0u32, 1][..], &[0, 1, 2, 3][..], &[][..]] {
        let want = RopeError::PositionCountMismatch { tokens: TOKENS, positions: ids.len() };
        for entry in ENTRIES {
            errs.push(expect_err(want, &mut b, |b| {
                call(&rope, entry, Shapes::good(), b, &ApplyOptions::ids(ids))
            }));
        }
    }
    // Zero tokens still need zero position_ids.
    let empty = Shapes::good().with(Operand::Q, View::token_major(0, QH, HD), None);
    let want = RopeError::PositionCountMismatch { tokens: 0, positions: 1 };
    errs.push(expect_err(want, &mut b, |b| call(&rope, Entry::Apply, empty, b, &ApplyOptions::ids(&[5]))));
    errs
}

fn position_overflow() -> Vec<RopeError> {
    let rope = rope();
    let mut b = Bufs::<f32>::new(12);
    let mut errs = Vec::new();
    // Positions start..start + 3: the last must fit in u32.
    for start in [u32::MAX - 1, u32::MAX] {
        for entry in ENTRIES {
            let o = ApplyOptions::start(start);
            errs.push(expect_err(RopeError::PositionOverflow, &mut b, |b| {
                call(&rope, entry, Shapes::good(), b, &o)
            }));
        }
    }
    // The boundary: the last position is u32::MAX.
    let mut q = b.q.clone();
    rope.apply(HeadsMut::new(&mut q, q_view()), &ApplyOptions::start(u32::MAX - 2)).unwrap();
    assert_ne!(bits(&q), bits(&b.q));
    // fill_table: rows start..start + rows.
    errs.push(expect_err(RopeError::PositionOverflow, &mut b, |b| {
        rope.fill_table(u32::MAX - 1, &mut b.cos[..3 * PAIRS], &mut b.sin[..3 * PAIRS])
    }));
    assert_eq!(rope.fill_table(u32::MAX, &mut [0.0; PAIRS], &mut [0.0; PAIRS]), Ok(()));
    // build_cache: more than 2^32 positions; refused before allocating anything.
    #[cfg(all(feature = "alloc", target_pointer_width = "64"))]
    for max in [(1usize << 32) + 1, usize::MAX / PAIRS, usize::MAX] {
        assert_eq!(rope.build_cache(max).map(|_| ()), Err(RopeError::PositionOverflow), "{max}");
        errs.push(RopeError::PositionOverflow);
    }
    #[cfg(all(feature = "alloc", target_pointer_width = "64"))]
    errs.extend(cache_out_of_memory());
    errs
}

/// `build_cache` of 2^32 positions × 256 pairs: 4 TiB per array, within the position range,
/// refused by the allocator: an error, not an abort. Only where the kernel refuses what it
/// cannot back (Linux `vm.overcommit_memory` 0 or 2; with 1 the allocation would succeed
/// and filling it would run the machine out of memory) and not under Miri.
#[cfg(all(feature = "alloc", target_pointer_width = "64"))]
fn cache_out_of_memory() -> Vec<RopeError> {
    let mode = std::fs::read_to_string("/proc/sys/vm/overcommit_memory").unwrap_or_default();
    if cfg!(miri) || !matches!(mode.trim(), "0" | "2") {
        println!("skipping the OutOfMemory case: overcommit mode {mode:?} or Miri");
        return Vec::new();
    }
    let big = Rope::new(RopeConfig::new(512, 10_000.0)).unwrap();
    let e = big.build_cache(1 << 32).map(|_| ());
    assert_eq!(e, Err(RopeError::OutOfMemory { bytes: ((1 << 32) * 256 + 15) * 4 }));
    vec![e.unwrap_err()]
}

/// cos/sin rows of positions `0..rows` in owned vectors.
fn owned_table(rope: &Rope, rows: usize) -> (Vec<f32>, Vec<f32>) {
    let (mut c, mut s) = (vec![0.0; rows * PAIRS], vec![0.0; rows * PAIRS]);
    rope.fill_table(0, &mut c, &mut s).unwrap();
    (c, s)
}

fn position_out_of_range() -> Vec<RopeError> {
    let rope = rope();
    let mut b = Bufs::<f32>::new(13);
    let mut errs = Vec::new();
    // A second table of ROWS rows, outside the checked buffers (a `RopeCache` with `alloc`).
    let (cc, cs) = owned_table(&rope, ROWS);
    #[cfg(feature = "alloc")]
    let owned = rope.build_cache(ROWS).unwrap();
    #[cfg(feature = "alloc")]
    let cache = owned.table();
    #[cfg(not(feature = "alloc"))]
    let cache = CosSinTable::new(&cc, &cs, PAIRS).unwrap();
    assert_eq!(cache.row(ROWS as u32 - 1).unwrap(), (&cc[(ROWS - 1) * PAIRS..], &cs[(ROWS - 1) * PAIRS..]));
    let r = ROWS as u32;
    let ids = [0, r, 1];
    let cases: [(ApplyOptions<'_>, u32); 4] = [
        (ApplyOptions::ids(&ids), r),
        (ApplyOptions::ids(&[u32::MAX, 0, 2]), u32::MAX),
        (ApplyOptions::start(r - 2), r),
        (ApplyOptions::start(r).inverse(), r + 2),
    ];
    for (o, position) in cases {
        for entry in ENTRIES {
            // A caller table (cos/sin in the checked buffers) and the other table.
            let want = RopeError::PositionOutOfRange { position, rows: ROWS };
            errs.push(expect_err(want, &mut b, |b| {
                call_with_table(&rope, entry, Shapes::good(), b, PAIRS, &o)
            }));
            errs.push(expect_err(want, &mut b, |b| {
                call(&rope, entry, Shapes::good(), b, &o.with_table(cache))
            }));
        }
    }
    // The last row is fine.
    let mut q = b.q.clone();
    rope.apply(HeadsMut::new(&mut q, q_view()), &ApplyOptions::start(r - 3).with_table(cache)).unwrap();
    // A table with no rows, and zero heads with tokens (the positions exist, so they are checked).
    let empty = CosSinTable::new(&[], &[], PAIRS).unwrap();
    let want = RopeError::PositionOutOfRange { position: 2, rows: 0 };
    errs.push(expect_err(want, &mut b, |b| {
        call(&rope, Entry::Apply, Shapes::good(), b, &ApplyOptions::start(0).with_table(empty))
    }));
    let no_heads = Shapes::good().with(Operand::Q, View::token_major(TOKENS, 0, HD), None);
    let want = RopeError::PositionOutOfRange { position: r, rows: ROWS };
    errs.push(expect_err(want, &mut b, |b| {
        call(&rope, Entry::Apply, no_heads, b, &ApplyOptions::start(3).with_table(cache))
    }));
    errs
}

fn table_shape() -> Vec<RopeError> {
    let rope = rope();
    let mut b = Bufs::<f32>::new(14);
    let mut errs = Vec::new();
    // A table of 2 or 1 values per row for a rotary_dim of 6 (3 pairs); the buffers hold 15
    // values, a multiple of 1, 3 and 5 but not 2, so use 5 per row for the second case.
    for pairs in [1, 5] {
        for entry in ENTRIES {
            let e = expect_err(RopeError::TableShape, &mut b, |b| {
                call_with_table(&rope, entry, Shapes::good(), b, pairs, &ApplyOptions::start(0))
            });
            errs.push(e);
        }
    }
    // Zero tokens do not excuse a table of the wrong width (the width is a property of the
    // arguments, not of the data).
    let empty = Shapes::good().with(Operand::Q, View::token_major(0, QH, HD), None);
    errs.push(expect_err(RopeError::TableShape, &mut b, |b| {
        call_with_table(&rope, Entry::Apply, empty, b, 1, &ApplyOptions::start(0))
    }));
    // CosSinTable::new: lengths differ, not a multiple of pairs, zero pairs.
    let (c, s) = (vec![0.5f32; 12], vec![0.5f32; 12]);
    for (cl, sl, pairs) in [(12, 9, 3), (12, 12, 5), (12, 12, 0), (0, 0, 0)] {
        assert_eq!(CosSinTable::new(&c[..cl], &s[..sl], pairs).map(|_| ()), Err(RopeError::TableShape));
        errs.push(RopeError::TableShape);
    }
    // fill_table: lengths differ or are not a multiple of rotary_dim / 2; nothing is written.
    for (cl, sl) in [(15, 12), (14, 14), (15, 14)] {
        let e = expect_err(RopeError::TableShape, &mut b, |b| {
            rope.fill_table(0, &mut b.cos[..cl], &mut b.sin[..sl])
        });
        errs.push(e);
    }
    // Frequencies::set_inv_freq_f32 and Rope::with_hf_inv_freq with the wrong number of values
    // fail (InvFreqLength) and keep the table.
    let mut f = Frequencies::new(&rope.config(), 0).unwrap();
    let before = f.clone();
    for n in [0, PAIRS - 1, PAIRS + 1] {
        let e = RopeError::InvFreqLength { expected: PAIRS, len: n };
        assert_eq!(f.set_inv_freq_f32(&vec![0.5; n]), Err(e));
        assert_eq!(f, before);
        assert_eq!(rope.clone().with_hf_inv_freq(&vec![0.5; n]).map(|_| ()), Err(e));
        errs.push(e);
    }
    errs
}

fn tier_unavailable() -> Vec<RopeError> {
    let mut errs = Vec::new();
    // NEON and AVX2 never coexist, so some tier is always missing.
    let missing: Vec<_> = ALL_TIERS.into_iter().filter(|t| !t.is_available()).collect();
    assert!(!missing.is_empty());
    let active = dispatch::active_tier();
    for tier in missing {
        assert_eq!(rope().with_tier(tier).map(|_| ()), Err(RopeError::TierUnavailable), "{tier}");
        assert_eq!(dispatch::force_tier(tier), Err(RopeError::TierUnavailable), "{tier}");
        assert_eq!(dispatch::active_tier(), active, "a failed force_tier changed the tier");
        errs.push(RopeError::TierUnavailable);
    }
    errs
}

/// Fused QK-norm + RoPE (issue 15): a weight of the wrong length, in place and out of place;
/// nothing is written.
fn norm_weight_length() -> Vec<RopeError> {
    use rope_kernels::QkNorm;
    let rope = Rope::new(RopeConfig::new(8, 10_000.0)).unwrap();
    let (w, short) = ([1.0f32; 8], [1.0f32; 9]);
    let x0 = [0.5f32; 16];
    let mut errs = Vec::new();
    for (norm, operand) in
        [(QkNorm::qwen3(&short, &w, 1e-6), Operand::Q), (QkNorm::gemma3(&w, &short, 1e-6), Operand::K)]
    {
        let e = RopeError::NormWeightLength { operand, expected: 8, len: 9 };
        let (mut q, mut k, mut out) = (x0, x0, [0.0f32; 16]);
        let got = rope.apply_qk_norm(
            HeadsMut::new(&mut q, View::token_major(2, 1, 8)),
            Some(HeadsMut::new(&mut k, View::token_major(2, 1, 8))),
            &norm,
            &ApplyOptions::start(0),
        );
        assert_eq!(got, Err(e));
        assert_eq!((q, k), (x0, x0));
        if operand == Operand::Q {
            let got = rope.apply_qk_norm_into(
                Heads::new(&x0, View::token_major(2, 1, 8)),
                HeadsMut::new(&mut out, View::token_major(2, 1, 8)),
                None,
                &norm,
                &ApplyOptions::start(0),
            );
            assert_eq!(got, Err(e));
            assert_eq!(out, [0.0; 16]);
        }
        errs.push(e);
    }
    errs
}

/// Fused QK-norm + RoPE: eps NaN, infinite or negative; nothing is written.
fn invalid_norm_eps() -> Vec<RopeError> {
    use rope_kernels::QkNorm;
    let rope = Rope::new(RopeConfig::new(8, 10_000.0)).unwrap();
    let w = [1.0f32; 8];
    let x0 = [0.5f32; 16];
    let mut errs = Vec::new();
    for norm in
        [QkNorm::qwen3(&w, &w, f32::NAN), QkNorm::gemma3(&w, &w, -1e-6), QkNorm::llama4(f32::INFINITY)]
    {
        let mut q = x0;
        let got = rope.apply_qk_norm(
            HeadsMut::new(&mut q, View::token_major(2, 1, 8)),
            None,
            &norm,
            &ApplyOptions::start(0),
        );
        assert_eq!(got, Err(RopeError::InvalidNormEps));
        assert_eq!(
            rope.norm_qk(HeadsMut::new(&mut q, View::token_major(2, 1, 8)), None, &norm),
            Err(RopeError::InvalidNormEps)
        );
        assert_eq!(q, x0);
        errs.push(RopeError::InvalidNormEps);
    }
    errs
}

// ---------------------------------------------------------------------------------------
// The cases as tests, and a list for the coverage test.

/// Declares one `#[test]` per case function (each must return at least one error) and the
/// list `CASES` of all of them for [`every_variant_is_produced`].
macro_rules! cases {
    ($($name:ident),* $(,)?) => {
        mod case {
            $(
                #[test]
                fn $name() {
                    assert!(!super::$name().is_empty());
                }
            )*
        }
        const CASES: &[(&str, fn() -> Vec<RopeError>)] = &[$((stringify!($name), $name)),*];
    };
}

cases!(
    zero_head_dim,
    invalid_rotary_dim,
    rotary_dim_exceeds_head_dim,
    rotary_dim_too_large,
    invalid_theta,
    invalid_scaling_parameter,
    overlapping_strides,
    stride_overflow,
    buffer_too_short,
    shape_mismatch,
    position_count_mismatch,
    position_overflow,
    position_out_of_range,
    table_shape,
    tier_unavailable,
    norm_weight_length,
    invalid_norm_eps,
);

fn variant_name(e: &RopeError) -> String {
    // The Debug form starts with the variant's name.
    let dbg = format!("{e:?}");
    dbg.split(|c: char| !c.is_alphanumeric()).next().unwrap_or_default().to_owned()
}

/// The variants declared in `src/error.rs` (lines of the `RopeError` body indented by four
/// spaces that start with a capital letter).
fn declared_variants() -> Vec<String> {
    let src = include_str!("../src/error.rs");
    let body = src.split("pub enum RopeError {").nth(1).expect("RopeError in src/error.rs");
    let body = &body[..body.find("\n}").expect("end of RopeError")];
    body.lines()
        .filter_map(|l| l.strip_prefix("    "))
        .filter(|l| l.starts_with(|c: char| c.is_ascii_uppercase()))
        .map(|l| l.split(|c: char| !c.is_alphanumeric()).next().unwrap().to_owned())
        .collect()
}

/// Variants no test can produce through the current API, with the reason. Empty: every
/// variant is produced above. A variant added to `src/error.rs` fails this test until a case
/// produces it or it is listed here with a reason.
const NOT_PRODUCIBLE: &[(&str, &str)] = &[];

#[test]
fn every_variant_is_produced() {
    let declared = declared_variants();
    assert!(declared.len() >= 15, "parsed {declared:?}");
    let mut produced = std::collections::BTreeMap::<String, Vec<&str>>::new();
    for (case, f) in CASES {
        for e in f() {
            produced.entry(variant_name(&e)).or_default().push(case);
        }
    }
    for (name, why) in NOT_PRODUCIBLE {
        eprintln!("not produced: {name}: {why}");
        assert!(!produced.contains_key(*name), "{name} is listed as not producible but is produced");
    }
    // The variants of the other encodings are produced (with buffers checked unchanged) by
    // tests/encodings.rs.
    let encodings_tests = include_str!("encodings.rs");
    // Those of multimodal RoPE (MRope, VisionRope, MRopeIndex) by tests/mrope.rs, likewise.
    let mrope_tests = include_str!("mrope.rs");
    // Those of the fused QK-norm + RoPE by tests/qknorm.rs, likewise.
    let qknorm_tests = include_str!("qknorm.rs");
    // Those of the q8_0 blocks by tests/q8_0.rs, likewise.
    let q8_0_tests = include_str!("q8_0.rs");
    // Those of the attention-layer call (issue 17) by tests/layer.rs and its modules, likewise.
    let layer_tests = [
        include_str!("layer.rs"),
        include_str!("layer/duplicates.rs"),
        include_str!("layer/errors.rs"),
        include_str!("layer/overlap.rs"),
        include_str!("layer/reference.rs"),
        include_str!("layer/zero_heads.rs"),
    ]
    .concat();
    for v in &declared {
        assert!(
            produced.contains_key(v)
                || encodings_tests.contains(&format!("RopeError::{v}"))
                || mrope_tests.contains(&format!("RopeError::{v}"))
                || qknorm_tests.contains(&format!("RopeError::{v}"))
                || q8_0_tests.contains(&format!("RopeError::{v}"))
                || layer_tests.contains(&format!("RopeError::{v}"))
                || NOT_PRODUCIBLE.iter().any(|(n, _)| n == v),
            "RopeError::{v} is produced by no test"
        );
    }
    // Each operand of every view error is covered.
    let all = [overlapping_strides(), stride_overflow(), buffer_too_short()].concat();
    for op in [Operand::Q, Operand::K, Operand::QOut, Operand::KOut] {
        assert!(all.iter().any(|e| matches!(e, RopeError::OverlappingStrides { operand } if *operand == op)));
        assert!(all.iter().any(|e| matches!(e, RopeError::StrideOverflow { operand } if *operand == op)));
        assert!(all.iter().any(|e| matches!(e, RopeError::BufferTooShort { operand, .. } if *operand == op)));
    }
}

// ---------------------------------------------------------------------------------------
// Zero tokens or zero heads: Ok, nothing written.

#[test]
fn zero_tokens_is_a_noop() {
    fn run<T: TestElem>(seed: u64) {
        let rope = rope();
        let mut b = Bufs::<T>::new(seed);
        let empty = CosSinTable::new(&[], &[], PAIRS).unwrap();
        // Strides are irrelevant when there is no row: overlapping or overflowing ones pass.
        let views = [
            View::token_major(0, QH, HD),
            View { tokens: 0, heads: QH, token_stride: 0, head_stride: 0 },
            View { tokens: 0, heads: QH, token_stride: usize::MAX, head_stride: usize::MAX },
        ];
        for v in views {
            let mut s = Shapes::good();
            for op in [Operand::Q, Operand::K, Operand::QOut, Operand::KOut] {
                s = s.with(op, v, Some(0));
            }
            for entry in ENTRIES {
                // No positions are needed, so a start at u32::MAX does not overflow and a table
                // with no rows is not out of range.
                for o in [
                    ApplyOptions::start(0),
                    ApplyOptions::start(u32::MAX),
                    ApplyOptions::ids(&[]),
                    ApplyOptions::start(7).with_table(empty),
                    ApplyOptions::ids(&[]).inverse(),
                ] {
                    expect_noop(&mut b, |b| call(&rope, entry, s, b, &o));
                }
            }
        }
    }
    run::<f32>(20);
    run::<f16>(21);
    run::<bf16>(22);
}

#[test]
fn zero_heads_is_a_noop() {
    fn run<T: TestElem>(seed: u64) {
        let rope = rope();
        let mut b = Bufs::<T>::new(seed);
        let mut s = Shapes::good();
        for op in [Operand::Q, Operand::K, Operand::QOut, Operand::KOut] {
            s = s.with(op, View { tokens: TOKENS, heads: 0, token_stride: 0, head_stride: 0 }, Some(0));
        }
        for entry in ENTRIES {
            for o in
                [ApplyOptions::start(0), ApplyOptions::start(u32::MAX - 2), ApplyOptions::ids(&[9, 1, 4])]
            {
                expect_noop(&mut b, |b| call(&rope, entry, s, b, &o));
            }
        }
        // q without heads, k with heads: k is rotated as if alone, q is untouched.
        let s = Shapes::good().with(Operand::Q, View::token_major(TOKENS, 0, HD), Some(0));
        let mut k_alone = b.k.clone();
        rope.apply(HeadsMut::new(&mut k_alone, k_view()), &ApplyOptions::start(4)).unwrap();
        let q_before = bits(&b.q);
        call(&rope, Entry::ApplyQk, s, &mut b, &ApplyOptions::start(4)).unwrap();
        assert_eq!(bits(&b.q), q_before);
        assert_eq!(bits(&b.k), bits(&k_alone));
    }
    run::<f32>(23);
    run::<f16>(24);
    run::<bf16>(25);
}

// ---------------------------------------------------------------------------------------
// Which error is reported when several apply: the documented order of checks is
// Q view, QOut view, Q/QOut shapes, K view, KOut view, K/KOut shapes, K/Q token counts,
// positions (count, overflow), table width, positions against the table.

#[test]
fn order_of_checks() {
    let rope = rope();
    let mut b = Bufs::<f32>::new(30);
    let overlap = View { tokens: TOKENS, heads: 2, token_stride: HD, head_stride: HD };
    let good = Shapes::good();
    let both_bad = good.with(Operand::Q, overlap, None).with(Operand::K, overlap, None);
    for entry in [Entry::ApplyQk, Entry::ApplyQkInto] {
        let want = RopeError::OverlappingStrides { operand: Operand::Q };
        expect_err(want, &mut b, |b| call(&rope, entry, both_bad, b, &ApplyOptions::start(0)));
    }
    // QOut before K.
    let s = good.with(Operand::QOut, overlap, None).with(Operand::K, overlap, None);
    let want = RopeError::OverlappingStrides { operand: Operand::QOut };
    expect_err(want, &mut b, |b| call(&rope, Entry::ApplyQkInto, s, b, &ApplyOptions::start(0)));
    // A q-side shape mismatch before a K view error.
    let s = good.with(Operand::QOut, View::head_major(2, QH, HD), None).with(Operand::K, overlap, None);
    let want = RopeError::ShapeMismatch { operand: Operand::QOut };
    expect_err(want, &mut b, |b| call(&rope, Entry::ApplyQkInto, s, b, &ApplyOptions::start(0)));
    // Tensors before positions.
    let s = good.with(Operand::K, View::head_major(2, KH, HD), None).with(
        Operand::KOut,
        View::token_major(2, KH, HD),
        None,
    );
    let want = RopeError::ShapeMismatch { operand: Operand::K };
    for entry in [Entry::ApplyQk, Entry::ApplyQkInto] {
        expect_err(want, &mut b, |b| call(&rope, entry, s, b, &ApplyOptions::ids(&[1])));
        expect_err(want, &mut b, |b| call(&rope, entry, s, b, &ApplyOptions::start(u32::MAX)));
    }
    // Positions before the table width; the table width before positions against the table.
    for entry in ENTRIES {
        let want = RopeError::PositionCountMismatch { tokens: TOKENS, positions: 1 };
        expect_err(want, &mut b, |b| call_with_table(&rope, entry, good, b, 1, &ApplyOptions::ids(&[100])));
        expect_err(RopeError::PositionOverflow, &mut b, |b| {
            call_with_table(&rope, entry, good, b, 1, &ApplyOptions::start(u32::MAX))
        });
        expect_err(RopeError::TableShape, &mut b, |b| {
            call_with_table(&rope, entry, good, b, 1, &ApplyOptions::start(100))
        });
    }
}
