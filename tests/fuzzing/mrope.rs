//! The multimodal part of `diff_f32` / `diff_half` (issue 15): MRoPE (sectioned,
//! interleaved) and 2-D vision RoPE, every available tier against the scalar one.
//!
//! The same input bytes are read as an [`MRopeCase`] (its own small encoding, so the
//! 1-D [`DiffCase`](super::diff::DiffCase) format is unchanged): the operation, `pairs`, a
//! section (possibly wrong), layout, angle mode, head and token counts, the position
//! streams (possibly of the wrong length, up to `u32::MAX`), the cos/sin source (on the fly,
//! a table filled on each tier, a table of raw values, too few rows), direction, in place or
//! out of place. [`check`] asserts that every tier returns the scalar tier's result and
//! leaves every buffer with its bits (canaries included), and that a failed call changed
//! nothing.
//!
//! [`check_index`] reads the same bytes as an [`MRopeIndex`] case (grids, merge size,
//! `second_per_grid_ts` and `tokens_per_second` from raw bits, `start` near `u32::MAX`,
//! possibly corrupted token types) and compares it with an `i128` reference walk: same
//! result, and nothing written on error.

use rope_kernels::dispatch::{self, Tier};
use rope_kernels::{
    AngleMode, AxisOptions, CosSinTable, Heads, HeadsMut, MRope, MRopeIndex, MRopeStyle, PairLayout,
    RopeConfig, RopeError, View, VisionRope,
};

use super::diff::{random_elem, Outcome};
use super::elem::{bits, TestElem};
use super::input::{Input, SplitMix};
use super::padded::{padded_with, PAD};

/// One multimodal fuzz case (see the module docs); fields are mapped into range by `%`.
#[derive(Clone, Debug)]
pub struct MRopeCase {
    pub op: u8,
    pub pairs: u8,
    pub section: [u8; 3],
    pub extra_dims: u8,
    pub interleaved_layout: bool,
    pub hf: bool,
    pub tokens: u8,
    pub q_heads: u8,
    pub k_heads: u8,
    pub stream_delta: u8,
    pub positions: Vec<(u8, u32)>,
    pub source: u8,
    pub inverse: bool,
    pub out_of_place: bool,
    pub data_seed: u64,
    pub specials: u8,
}

impl MRopeCase {
    pub fn read(bytes: &[u8]) -> Self {
        let mut r = Input::new(bytes);
        let op = r.u8();
        let pairs = r.u8();
        let section = [r.u8(), r.u8(), r.u8()];
        let (extra_dims, interleaved_layout, hf) = (r.u8(), r.bool(), r.bool());
        let (tokens, q_heads, k_heads, stream_delta) = (r.u8(), r.u8(), r.u8(), r.u8());
        let positions = (0..3 * 8).map(|_| (r.u8(), r.u32())).collect();
        let (source, inverse, out_of_place) = (r.u8(), r.bool(), r.bool());
        let (data_seed, specials) = (r.u64(), r.u8());
        MRopeCase {
            op,
            pairs,
            section,
            extra_dims,
            interleaved_layout,
            hf,
            tokens,
            q_heads,
            k_heads,
            stream_delta,
            positions,
            source,
            inverse,
            out_of_place,
            data_seed,
            specials,
        }
    }
}

/// The object under test on one tier.
enum Op {
    M(Box<MRope<'static>>),
    V(Box<VisionRope<'static>>),
}

/// One tier's buffers after the call, and its result.
struct Run<T> {
    tier: Tier,
    result: Result<(), RopeError>,
    bufs: Vec<Vec<T>>,
    table: (Vec<f32>, Vec<f32>),
}

/// Builds the case's object pinned to `tier`, or `None` for a configuration every tier
/// rejects in the same way (checked by the caller against the scalar tier).
fn build(c: &MRopeCase, tier: Tier) -> Result<Op, RopeError> {
    let pairs = 1 + usize::from(c.pairs % 40);
    let rd = 2 * pairs;
    let config = RopeConfig::new(rd + usize::from(c.extra_dims % 4), 10_000.0)
        .with_rotary_dim(rd)
        .with_layout(if c.interleaved_layout { PairLayout::Interleaved } else { PairLayout::HalfSplit })
        .with_angle_mode(if c.hf { AngleMode::HfCompatible } else { AngleMode::Exact });
    if c.op % 3 == 2 {
        return Ok(Op::V(Box::new(VisionRope::new(config)?.with_tier(tier)?)));
    }
    let style = if c.op.is_multiple_of(3) { MRopeStyle::Sectioned } else { MRopeStyle::Interleaved };
    // Mostly a valid section (the rest of the pairs go to t), sometimes the raw bytes.
    let [a, b, w] = c.section.map(usize::from);
    let section = if c.op & 0x80 != 0 {
        [a, b, w]
    } else if style == MRopeStyle::Interleaved {
        let (h, w) = (b % ((pairs + 1) / 3 + 1), w % (pairs / 3 + 1));
        [pairs - h - w, h, w]
    } else {
        let h = b % (pairs + 1);
        let w = w % (pairs - h + 1);
        [pairs - h - w, h, w]
    };
    Ok(Op::M(Box::new(MRope::new(config, section, style)?.with_tier(tier)?)))
}

fn pairs_of(op: &Op) -> (usize, usize, usize) {
    let c = match op {
        Op::M(m) => m.rope().config(),
        Op::V(v) => v.rope().config(),
    };
    (c.head_dim, c.pairs(), if matches!(op, Op::M(_)) { 3 } else { 2 })
}

/// Runs the case on every available tier; see the module docs for what is asserted.
pub fn check<T: TestElem>(bytes: &[u8]) -> Outcome {
    let c = MRopeCase::read(bytes);
    let scalar = build(&c, Tier::Scalar);
    let Ok(op0) = scalar else {
        for tier in dispatch::available_tiers() {
            assert_eq!(build(&c, tier).err(), scalar.as_ref().err().copied(), "{tier}: construction");
        }
        return Outcome::Skipped;
    };
    let (hd, pairs, streams) = pairs_of(&op0);
    let tokens = usize::from(c.tokens % 7);
    let (qh, kh) = (usize::from(c.q_heads % 5), usize::from(c.k_heads % 4));
    let mut rng = SplitMix(c.data_seed);
    // Streams: one may be longer or shorter (a count mismatch).
    let delta = isize::from(c.stream_delta >= 250) * (isize::from(c.stream_delta) - 252);
    let mut ids: Vec<Vec<u32>> = (0..streams)
        .map(|s| {
            (0..tokens)
                .map(|t| {
                    let (sel, raw) = c.positions[(s * 8 + t) % c.positions.len()];
                    match sel % 4 {
                        0 => raw % 16,
                        1 => raw % 4096,
                        2 => u32::MAX - raw % 16,
                        _ => raw,
                    }
                })
                .collect()
        })
        .collect();
    let last = streams - 1;
    let n = (tokens as isize + delta).max(0) as usize;
    ids[last].resize(n, 7);
    // Tensors: q (and k) BSHD in padded buffers, outputs likewise.
    let view = |heads| View::token_major(tokens, heads, hd);
    let padded =
        |rng: &mut SplitMix, len: usize| -> Vec<T> { padded_with(len, || random_elem(rng, c.specials)) };
    let mut bufs = vec![padded(&mut rng, tokens * qh * hd), padded(&mut rng, tokens * kh * hd)];
    if c.out_of_place {
        bufs.push(padded(&mut rng, tokens * qh * hd));
        bufs.push(padded(&mut rng, tokens * kh * hd));
    }
    // Source: 0 on the fly, 1 table filled on each tier, 2 raw table, 3 a row too few.
    let source = c.source % 4;
    let rows = if source == 3 { tokens.saturating_sub(1) } else { tokens };
    let raw_table: Vec<f32> = (0..2 * rows * pairs)
        .map(|_| {
            if rng.below(4) == 0 {
                f32::from_bits(rng.next() as u32)
            } else {
                rng.next() as u32 as f32 / 4e9
            }
        })
        .collect();
    let before = bufs.clone();

    let mut runs = Vec::new();
    for tier in dispatch::available_tiers() {
        let op = build(&c, tier).expect("the scalar tier built it");
        let mut b = before.clone();
        let (mut cos, mut sin) = (raw_table[..rows * pairs].to_vec(), raw_table[rows * pairs..].to_vec());
        let mut result = Ok(());
        if source == 1 {
            result = match &op {
                Op::M(m) => m.fill_table([&ids[0], &ids[1], &ids[2]], &mut cos, &mut sin),
                Op::V(v) => v.fill_table([&ids[0], &ids[1]], &mut cos, &mut sin),
            };
        }
        if result.is_ok() {
            let table = if source == 0 { None } else { Some(CosSinTable::new(&cos, &sin, pairs).ok()) };
            result = call(&op, &c, &mut b, (qh, kh), view, &ids, table);
        }
        runs.push(Run { tier, result, bufs: b, table: (cos, sin) });
    }
    let first = &runs[0];
    for r in &runs[1..] {
        assert_eq!(r.result, first.result, "{}: result differs from {}", r.tier, first.tier);
        for (i, (a, b)) in r.bufs.iter().zip(&first.bufs).enumerate() {
            assert_eq!(bits(a), bits(b), "{}: buffer {i} differs from {}", r.tier, first.tier);
        }
        assert_eq!(bits(&r.table.0), bits(&first.table.0), "{}: table cos", r.tier);
        assert_eq!(bits(&r.table.1), bits(&first.table.1), "{}: table sin", r.tier);
    }
    // Canaries always intact; on error nothing changed.
    for r in &runs {
        for (i, (a, b)) in r.bufs.iter().zip(&before).enumerate() {
            let n = a.len();
            assert_eq!(bits(&a[..PAD]), bits(&b[..PAD]), "{}: canary before buffer {i}", r.tier);
            assert_eq!(bits(&a[n - PAD..]), bits(&b[n - PAD..]), "{}: canary after buffer {i}", r.tier);
            if r.result.is_err() || (c.out_of_place && i < 2) {
                assert_eq!(bits(a), bits(b), "{}: buffer {i} written", r.tier);
            }
        }
    }
    match first.result {
        Ok(()) => Outcome::Rotated,
        Err(e) => Outcome::Rejected(e),
    }
}

/// The call of the case on `op` over the padded buffers (`table`: `Some(None)` for a table
/// the constructor refused, which the call then reports as `TableShape`).
fn call<T: TestElem>(
    op: &Op,
    c: &MRopeCase,
    bufs: &mut [Vec<T>],
    (qh, kh): (usize, usize),
    view: impl Fn(usize) -> View,
    ids: &[Vec<u32>],
    table: Option<Option<CosSinTable<'_>>>,
) -> Result<(), RopeError> {
    let table = match table {
        None => None,
        Some(Some(t)) => Some(t),
        Some(None) => return Err(RopeError::TableShape),
    };
    fn opts<'a, const N: usize>(
        ids: [&'a [u32]; N],
        t: Option<CosSinTable<'a>>,
        inv: bool,
    ) -> AxisOptions<'a, N> {
        let o = t.map_or(AxisOptions::ids(ids), AxisOptions::table);
        if inv {
            o.inverse()
        } else {
            o
        }
    }
    let inner = |v: &mut Vec<T>| {
        let n = v.len() - 2 * PAD;
        (PAD, n)
    };
    let (qv, kv) = (view(qh), view(kh));
    let k_some = kh > 0;
    if !c.out_of_place {
        let (q, rest) = bufs.split_at_mut(1);
        let (qa, qn) = inner(&mut q[0]);
        let (ka, kn) = inner(&mut rest[0]);
        let q = HeadsMut::new(&mut q[0][qa..qa + qn], qv);
        let k = k_some.then(|| HeadsMut::new(&mut rest[0][ka..ka + kn], kv));
        return match op {
            Op::M(m) => m.apply_qk(q, k, &opts([&ids[0], &ids[1], &ids[2]], table, c.inverse)),
            Op::V(v) => v.apply_qk(q, k, &opts([&ids[0], &ids[1]], table, c.inverse)),
        };
    }
    let (ins, outs) = bufs.split_at_mut(2);
    let (qo, ko) = outs.split_at_mut(1);
    let q = Heads::new(&ins[0][PAD..ins[0].len() - PAD], qv);
    let qo_len = qo[0].len();
    let q_out = HeadsMut::new(&mut qo[0][PAD..qo_len - PAD], qv);
    let ko_len = ko[0].len();
    let k = k_some.then(|| {
        (Heads::new(&ins[1][PAD..ins[1].len() - PAD], kv), HeadsMut::new(&mut ko[0][PAD..ko_len - PAD], kv))
    });
    match op {
        Op::M(m) => m.apply_qk_into(q, q_out, k, &opts([&ids[0], &ids[1], &ids[2]], table, c.inverse)),
        Op::V(v) => v.apply_qk_into(q, q_out, k, &opts([&ids[0], &ids[1]], table, c.inverse)),
    }
}

/// [`check`] for f16 (first byte even) or bf16, as `diff_half` reads its input.
pub fn check_half(bytes: &[u8]) -> Outcome {
    let Some((&sel, rest)) = bytes.split_first() else { return Outcome::Skipped };
    if sel & 1 == 0 {
        check::<rope_kernels::f16>(rest)
    } else {
        check::<rope_kernels::bf16>(rest)
    }
}

/// One vision or text run of an [`MRopeIndex`] case: `(token type, grid)`, text runs with
/// the grid `[len, 0, 0]`.
type Segment = (u8, [u32; 3]);

/// [`MRopeIndex::fill`] on the case read from `bytes` (see the module docs) against
/// [`index_reference`]: same result and positions; on error every output keeps its canary.
pub fn check_index(bytes: &[u8]) -> Outcome {
    let mut r = Input::new(bytes);
    let merge = [1, 2, 2, 0, 3][r.below(5)];
    let mut segments: Vec<Segment> = Vec::new();
    for _ in 0..r.u8() % 6 {
        let kind = r.u8() % 3;
        // Mostly multiples of the merge size; sometimes anything below 7.
        let side = |r: &mut Input<'_>| match r.u8() {
            0..=15 => u32::from(r.u8() % 7),
            b => u32::from(b % 3 + 1) * merge.max(1),
        };
        let frames = if r.u8() < 16 { 0 } else { u32::from(r.u8() % 4 + 1) };
        let grid = [frames, side(&mut r), side(&mut r)];
        segments.push(if kind == 0 { (0, [grid[0] + 1, 0, 0]) } else { (kind, grid) });
    }
    let videos = segments.iter().filter(|s| s.0 == 2).count();
    let steps: Vec<f32> = match r.u8() % 8 {
        0 => Vec::new(),
        1 => (0..videos).map(|_| f32::from_bits(r.u32() & !(u32::from(r.bool()) << 31))).collect(),
        7 => (0..=videos).map(|_| 1.0).collect(),
        _ => (0..videos).map(|_| f32::from(r.u8()) / f32::from(r.u8() % 16 + 1)).collect(),
    };
    let tokens_per_second = if r.u8() < 192 { 2.0 } else { f32::from_bits(r.u32()) };
    let start = match r.u8() % 3 {
        0 => 0,
        1 => u32::MAX - u32::from(r.u16()),
        _ => r.u32(),
    };
    let mut types = Vec::new();
    let (mut images, mut video_grids) = (Vec::new(), Vec::new());
    for &(kind, g) in &segments {
        // Tokens of the run: a text run's length, a block's grid count (1 if it has none).
        let n = match (kind, g[1].checked_div(merge), g[2].checked_div(merge)) {
            (0, _, _) => g[0],
            (_, Some(h), Some(w)) => g[0] * h * w,
            _ => 1,
        };
        types.extend(core::iter::repeat_n(kind, n.max(1) as usize));
        match kind {
            1 => images.push(g),
            2 => video_grids.push(g),
            _ => {}
        }
    }
    let corrupt = r.u8() < 40 && !types.is_empty();
    if corrupt {
        // A sequence can hold more than 256 tokens: two bytes pick one.
        let i = usize::from(r.u16()) % types.len();
        types[i] = r.u8() % 4;
    }
    let idx = MRopeIndex {
        token_types: &types,
        image_grid_thw: &images,
        video_grid_thw: &video_grids,
        second_per_grid_ts: &steps,
        tokens_per_second,
        spatial_merge_size: merge,
        start,
    };
    let n = types.len();
    let (mut t, mut h, mut w) = (vec![7u32; n], vec![7u32; n], vec![7u32; n]);
    let got = idx.fill(&mut t, &mut h, &mut w);
    if got.is_err() {
        assert!(t.iter().chain(&h).chain(&w).all(|&v| v == 7), "written on error: {got:?}");
    }
    if !corrupt {
        let want = index_reference(&segments, merge, &steps, tokens_per_second, start, videos);
        match (&got, &want) {
            (Ok(next), Ok((ids, want_next))) => {
                assert_eq!(next, want_next, "next position");
                assert_eq!([t.clone(), h.clone(), w.clone()], *ids, "positions");
            }
            (Err(a), Err(b)) => {
                assert_eq!(core::mem::discriminant(a), core::mem::discriminant(b), "{a:?} vs {b:?}")
            }
            _ => panic!("fill {got:?}, reference {want:?}"),
        }
    }
    match got {
        Ok(_) => Outcome::Rotated,
        Err(e) => Outcome::Rejected(e),
    }
}

/// The positions of `segments` written plainly in `i128` (see [`MRopeIndex`] for the rules;
/// video t: `trunc((f32(f) * s) * tokens_per_second)`, transformers 5.x).
#[allow(clippy::type_complexity)]
fn index_reference(
    segments: &[Segment],
    merge: u32,
    steps: &[f32],
    tps: f32,
    start: u32,
    videos: usize,
) -> Result<([Vec<u32>; 3], u32), RopeError> {
    let layout = RopeError::InvalidPositionLayout { reason: "" };
    if !steps.is_empty() && steps.len() != videos {
        return Err(layout);
    }
    if steps.iter().any(|s| !(*s >= 0.0 && s.is_finite())) {
        return Err(layout);
    }
    let tps_ok = tps > 0.0 && tps.is_finite();
    if !steps.is_empty() && !tps_ok {
        return Err(layout);
    }
    let fit = |v: i128| u32::try_from(v).map_err(|_| RopeError::PositionOverflow);
    let mut out: [Vec<u32>; 3] = Default::default();
    let mut next = i128::from(start);
    let mut video = 0;
    for &(kind, [gt, gh, gw]) in segments {
        if kind == 0 {
            for _ in 0..gt {
                for o in &mut out {
                    o.push(fit(next)?);
                }
                next += 1;
            }
            continue;
        }
        if merge == 0 || gh % merge != 0 || gw % merge != 0 || gt * (gh / merge) * (gw / merge) == 0 {
            return Err(layout);
        }
        let step = if kind == 2 { steps.get(video).copied() } else { None };
        video += usize::from(kind == 2);
        let base = next;
        for f in 0..gt {
            let dt = match step {
                None => i128::from(f),
                Some(s) => {
                    // Any value past u32::MAX overflows alike; capped so that `base + dt`
                    // cannot overflow i128 (a finite f32 past 2^127 saturates to i128::MAX).
                    let x = (f as f32 * s) * tps;
                    if x.is_finite() {
                        (x as i128).min(i128::MAX / 4)
                    } else {
                        i128::MAX / 4
                    }
                }
            };
            for r in 0..gh / merge {
                for c in 0..gw / merge {
                    let p = [base + dt, base + i128::from(r), base + i128::from(c)];
                    for (o, v) in out.iter_mut().zip(p) {
                        o.push(fit(v)?);
                    }
                    next = next.max(p[0] + 1).max(p[1] + 1).max(p[2] + 1);
                }
            }
        }
    }
    Ok((out, fit(next)?))
}
