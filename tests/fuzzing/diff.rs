//! The differential check behind `diff_f32` and `diff_half`.
//!
//! A [`DiffCase`] is one call of the public API: a configuration (every scaling method, both
//! layouts and angle modes, full or partial `rotary_dim`), q and optionally k with their own
//! head counts and views (BSHD, BHSD, padded, fused QKV rows, or arbitrary strides),
//! positions (`position_ids` or a start offset, up to `u32::MAX`), the cos/sin source (on the
//! fly, `fill_table`, `build_cache`, or a caller table of arbitrary values), the direction,
//! in place or out of place, and the data (random, special values, or bits taken verbatim
//! from the input). Some fields can be made wrong (a buffer too short, overlapping strides,
//! mismatched counts, a table too small) so the error path is fuzzed as well.
//!
//! [`check`] runs the call once per available tier ([`dispatch::available_tiers`]), each on
//! its own copy of every buffer, and asserts:
//! - every tier returns the scalar tier's result and leaves every buffer (and every table it
//!   filled) with the scalar tier's bits;
//! - on error nothing changed, canaries included;
//! - on success nothing outside the views changed: the canaries around each buffer, the
//!   gaps between rows, the inputs of an out-of-place call; pass-through dimensions were
//!   left (in place) or copied (out of place) bit for bit; and every rotated element has the
//!   bits of the rotation recomputed here from the cos/sin row (`y0 = x0 c - x1 s`,
//!   `y1 = x1 c + x0 s`, inverse with the signs flipped, one rounding to the element type),
//!   so the scalar oracle itself is checked, not only agreement with it;
//! - a call the harness knows to be valid succeeded.

use std::fmt::Write as _;

use rope_kernels::dispatch::{self, Tier};
use rope_kernels::{
    ApplyOptions, CosSinTable, Heads, HeadsMut, PairLayout, QkNorm, Rope, RopeConfig, RopeError, View,
};

use super::elem::TestElem as FuzzElem;
use super::input::SplitMix;

// The broken-tier demonstration (`--cfg rope_broken_tier_demo`, under `cargo fuzz` only).
#[cfg(rope_broken_tier_demo)]
mod broken_tier;

// ---------------------------------------------------------------------------------------
// The case and its byte encoding.

mod case;
pub use case::*;

// ---------------------------------------------------------------------------------------
// Buffers.

/// One tensor's buffer: canaries, then the slice handed to the call, then canaries.
#[derive(Clone)]
struct Buf<T> {
    data: Vec<T>,
    front: usize,
    len: usize,
    view: View,
}

impl<T: FuzzElem> Buf<T> {
    fn slice(&self) -> &[T] {
        &self.data[self.front..self.front + self.len]
    }

    fn heads(&self) -> Heads<'_, T> {
        Heads::new(self.slice(), self.view)
    }

    fn heads_mut(&mut self) -> HeadsMut<'_, T> {
        HeadsMut::new(&mut self.data[self.front..self.front + self.len], self.view)
    }

    fn bits(&self) -> Vec<u32> {
        self.data.iter().map(|v| v.to_bits_u32()).collect()
    }
}

/// Elements a view spans (0 when empty); `None` if that overflows (the call must reject it).
pub fn extent(view: &View, hd: usize) -> Option<usize> {
    if view.tokens == 0 || view.heads == 0 {
        return Some(0);
    }
    (view.tokens - 1)
        .checked_mul(view.token_stride)?
        .checked_add((view.heads - 1).checked_mul(view.head_stride)?)?
        .checked_add(hd)
}

/// The largest buffer the harness builds; larger views are skipped (not interesting, slow).
const MAX_BUF: usize = 1 << 16;

pub fn random_elem<T: FuzzElem>(rng: &mut SplitMix, specials: u8) -> T {
    let r = rng.below(256);
    if r < u64::from(specials) {
        return T::from_bits(T::SPECIALS[rng.below(T::SPECIALS.len() as u64) as usize]);
    }
    if r.is_multiple_of(8) {
        // Any bit pattern: NaNs, infinities, subnormals, huge values.
        return T::from_bits((rng.next() as u32) & (((1u64 << T::BITS) - 1) as u32));
    }
    let m = (rng.next() >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0;
    let e = (rng.below(2 * T::MAX_EXP as u64 + 1) as i32) - T::MAX_EXP;
    T::from_bits(T::round(m * 2f32.powi(e)))
}

// ---------------------------------------------------------------------------------------
// The check.

/// What a case did (for statistics of the fixed-seed tests).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Outcome {
    /// The configuration was rejected (or the case was too large to build).
    Skipped,
    /// The call returned this error on every tier, with every buffer unchanged.
    Rejected(RopeError),
    /// The call succeeded on every tier with identical, correct results.
    Rotated,
}

/// Everything one tier's run produced.
struct Run<T> {
    tier: Tier,
    result: Result<(), RopeError>,
    bufs: [Option<Buf<T>>; 4],
    cos: Vec<f32>,
    sin: Vec<f32>,
}

const NAMES: [&str; 4] = ["q", "k", "q_out", "k_out"];

/// Runs `case` for element type `T` on every available tier and checks it; panics with a
/// description of the case on any violation.
pub fn check<T: FuzzElem>(case: &DiffCase) -> Outcome {
    let cfg = case.config.config();
    let Ok(rope) = Rope::new(cfg.clone()) else { return Outcome::Skipped };
    let (hd, rd, pairs) = (cfg.head_dim, cfg.rotary_dim, cfg.rotary_dim / 2);
    let tokens = usize::from(case.tokens % 9);
    let q_heads = usize::from(case.q_heads % 7);
    let kv_heads = (!case.k.is_multiple_of(6)).then(|| usize::from(case.k % 6) - 1);
    let k_tokens = (tokens as isize + count_delta_of(case.k_tokens)).max(0) as usize;
    let out_extra = usize::from(case.out_heads >= 252);
    let mut known_valid = case.k_tokens < 250 || count_delta_of(case.k_tokens) == 0;
    known_valid &= out_extra == 0 || !case.out_of_place;

    // The tensors: [q, k, q_out, k_out], those the entry point takes.
    let mut rng = SplitMix(case.data_seed);
    let mut raw = case.raw.chunks_exact((T::BITS / 8) as usize);
    let mut make = |spec: &TensorSpec, tokens: usize, heads: usize| -> Option<Buf<T>> {
        let view = spec.view(tokens, heads, hd);
        let len = (extent(&view, hd)? as isize + spec.len_delta()).max(0) as usize;
        if len > MAX_BUF {
            return None;
        }
        let (front, back) = (usize::from(spec.front % 8), usize::from(spec.back % 8));
        let mut data = vec![T::from_bits(T::CANARY); front + len + back];
        for v in &mut data[front..front + len] {
            *v = match raw.next() {
                Some(b) if b.len() == 4 => T::from_bits(u32::from_le_bytes([b[0], b[1], b[2], b[3]])),
                Some(b) => T::from_bits(u32::from(u16::from_le_bytes([b[0], b[1]]))),
                None => random_elem(&mut rng, case.specials),
            };
        }
        Some(Buf { data, front, len, view })
    };
    let Some(q) = make(&case.q, tokens, q_heads) else { return Outcome::Skipped };
    known_valid &= case.q.known_valid();
    let k = match kv_heads {
        Some(h) => {
            known_valid &= case.k_spec.known_valid();
            let Some(b) = make(&case.k_spec, k_tokens, h) else { return Outcome::Skipped };
            Some(b)
        }
        None => None,
    };
    let (mut q_out, mut k_out) = (None, None);
    if case.out_of_place {
        known_valid &= case.q_out.known_valid();
        let Some(b) = make(&case.q_out, tokens, q_heads + out_extra) else { return Outcome::Skipped };
        q_out = Some(b);
        if let Some(h) = kv_heads {
            known_valid &= case.k_out.known_valid();
            let Some(b) = make(&case.k_out, k_tokens, h + out_extra) else { return Outcome::Skipped };
            k_out = Some(b);
        }
    }
    let initial: [Option<Buf<T>>; 4] = [Some(q), k, q_out, k_out];

    // Positions.
    let table_mode = !case.source.sel.is_multiple_of(4);
    let reduce = |p: u32| if table_mode { p % 256 } else { p };
    let (ids, start): (Option<Vec<u32>>, u32) = match &case.positions {
        PosSpec::Start { sel, raw } => {
            let s = match sel % 6 {
                0 => 0,
                1 => raw % 256,
                2 => (1 << 24) + raw % 256,
                3 => (1 << 31) + raw % (1 << 31),
                4 => (u32::MAX - tokens as u32).wrapping_add(1).wrapping_add(raw % 4),
                _ => *raw,
            };
            let s = if table_mode { s % 256 } else { s };
            if tokens > 0 && u64::from(s) + tokens as u64 - 1 > u64::from(u32::MAX) {
                known_valid = false;
            }
            (None, s)
        }
        PosSpec::Ids { count_delta, ids } => {
            known_valid &= count_delta_of(*count_delta) == 0;
            let mut prev = 0u32;
            let v = ids
                .iter()
                .map(|&(sel, raw)| {
                    let p = match sel % 5 {
                        0 => raw % 16,
                        1 => raw % 4096,
                        2 => raw,
                        3 => u32::MAX - raw % 16,
                        _ => prev,
                    };
                    prev = reduce(p);
                    prev
                })
                .collect();
            (Some(v), 0)
        }
    };
    let position = |t: usize| ids.as_ref().map_or_else(|| start.wrapping_add(t as u32), |v| v[t]);
    let max_pos: Option<u32> = match &ids {
        Some(v) => v.iter().copied().max(),
        None => (tokens > 0).then(|| start.wrapping_add(tokens as u32 - 1)),
    };

    // The table shape (same for every tier; the values of fill_table/build_cache per tier).
    let (table_rows, table_pairs) = if !table_mode {
        (0, pairs)
    } else {
        let need = max_pos.map_or(0, |m| m as usize + 1);
        match case.source.rows {
            r if r >= 252 => {
                if need > 0 && tokens > 0 {
                    known_valid = false;
                }
                (need.saturating_sub(1), pairs)
            }
            251 => {
                known_valid = false;
                (need, pairs + 1)
            }
            r => (need + usize::from(r % 4), pairs),
        }
    };
    let base = case.source.base;
    if case.source.sel % 4 == 1
        && table_rows > 0
        && u64::from(base) + table_rows as u64 - 1 > u64::from(u32::MAX)
    {
        known_valid = false;
    }

    // The call's direction (the broken-tier demonstration also runs it forward).
    let inverse = core::cell::Cell::new(case.inverse);
    let entry =
        |rope: &Rope, bufs: &mut [Option<Buf<T>>; 4], cos: &[f32], sin: &[f32]| -> Result<(), RopeError> {
            let mut opts = match &ids {
                Some(v) => ApplyOptions::ids(v),
                None => ApplyOptions::start(start),
            };
            if inverse.get() {
                opts = opts.inverse();
            }
            if table_mode {
                opts = opts.with_table(CosSinTable::new(cos, sin, table_pairs)?);
            }
            let [q, k, qo, ko] = bufs;
            let q = q.as_mut().expect("q");
            match (k.as_mut(), case.out_of_place) {
                (None, false) => rope.apply(q.heads_mut(), &opts),
                (Some(k), false) => rope.apply_qk(q.heads_mut(), Some(k.heads_mut()), &opts),
                (None, true) => {
                    let qo = qo.as_mut().expect("q_out");
                    rope.apply_into(q.heads(), qo.heads_mut(), &opts)
                }
                (Some(k), true) => {
                    let (qo, ko) = (qo.as_mut().expect("q_out"), ko.as_mut().expect("k_out"));
                    rope.apply_qk_into(q.heads(), qo.heads_mut(), Some((k.heads(), ko.heads_mut())), &opts)
                }
            }
        };

    // Raw caller tables: the same values for every tier.
    let raw_table: (Vec<f32>, Vec<f32>) = {
        let n = table_rows * table_pairs;
        let mut g = SplitMix(case.data_seed ^ 0x000C_051A);
        let mut v = || random_elem::<f32>(&mut g, case.specials);
        ((0..n).map(|_| v()).collect(), (0..n).map(|_| v()).collect())
    };

    let mut runs: Vec<Run<T>> = Vec::new();
    for tier in dispatch::available_tiers() {
        let rope_t = rope.clone().with_tier(tier).expect("available tier");
        let mut bufs = initial.clone();
        let n = table_rows * table_pairs;
        let (mut cos, mut sin) = (vec![0.0f32; n], vec![0.0f32; n]);
        let filled: Result<(), RopeError> = match case.source.sel % 4 {
            0 => Ok(()),
            // fill_table rows have rotary_dim / 2 values; a wrong-width table is left zero.
            1 if table_pairs == pairs => rope_t.fill_table(base, &mut cos, &mut sin),
            2 if table_pairs == pairs => rope_t.build_cache(table_rows).map(|c| {
                let t = c.table();
                for r in 0..table_rows {
                    let (a, b) = t.row(r as u32).expect("cache row");
                    cos[r * pairs..(r + 1) * pairs].copy_from_slice(a);
                    sin[r * pairs..(r + 1) * pairs].copy_from_slice(b);
                }
            }),
            3 => {
                cos.copy_from_slice(&raw_table.0);
                sin.copy_from_slice(&raw_table.1);
                Ok(())
            }
            _ => Ok(()),
        };
        let (cos_before, sin_before) = (cos.clone(), sin.clone());
        let result = filled.and_then(|()| entry(&rope_t, &mut bufs, &cos, &sin));
        #[cfg(rope_broken_tier_demo)]
        if tier == Tier::Portable && case.inverse {
            broken_tier::corrupt(&cfg, case.out_of_place, &initial, &mut bufs, &result, |b| {
                inverse.set(false);
                let r = entry(&rope_t, b, &cos, &sin);
                inverse.set(true);
                r
            });
        }
        assert!(
            bits32(&cos) == bits32(&cos_before) && bits32(&sin) == bits32(&sin_before),
            "{tier}: the call changed its cos/sin table\n{}",
            describe::<T>(case, &cfg)
        );
        runs.push(Run { tier, result, bufs, cos, sin });
    }

    // 1. Every tier agrees with the scalar tier, bit for bit.
    let scalar = runs.iter().find(|r| r.tier == Tier::Scalar).expect("the scalar tier is always available");
    for run in &runs {
        let ctx = || format!("tier {} vs scalar\n{}", run.tier, describe::<T>(case, &cfg));
        assert_eq!(run.result, scalar.result, "{}", ctx());
        assert!(
            bits32(&run.cos) == bits32(&scalar.cos) && bits32(&run.sin) == bits32(&scalar.sin),
            "cos/sin table differs: {}",
            ctx()
        );
        for ((name, a), b) in NAMES.iter().zip(&run.bufs).zip(&scalar.bufs) {
            if let (Some(a), Some(b)) = (a, b) {
                if let Some(j) = first_diff(&a.bits(), &b.bits()) {
                    panic!(
                        "{name}[{j}] (slice index {}, at {:?}): {} has {:#x}, scalar {:#x}\n{}",
                        j as isize - a.front as isize,
                        locate(&a.view, hd, j as isize - a.front as isize),
                        run.tier,
                        a.bits()[j],
                        b.bits()[j],
                        ctx()
                    );
                }
            }
        }
    }

    // 1b. The same call as fused QK-norm + RoPE (issue 15), with a norm drawn from the data
    // seed: every tier agrees with the scalar tier, errors write nothing, and in place the
    // scalar result equals the norm pass and the RoPE pass run one after the other.
    let fused = |rope: &Rope, bufs: &mut [Option<Buf<T>>; 4], norm: &QkNorm<'_>| -> Result<(), RopeError> {
        let mut opts = match &ids {
            Some(v) => ApplyOptions::ids(v),
            None => ApplyOptions::start(start),
        };
        if case.inverse {
            opts = opts.inverse();
        }
        if table_mode {
            opts = opts.with_table(CosSinTable::new(&scalar.cos, &scalar.sin, table_pairs)?);
        }
        let [q, k, qo, ko] = bufs;
        let q = q.as_mut().expect("q");
        match (k.as_mut(), case.out_of_place) {
            (k, false) => rope.apply_qk_norm(q.heads_mut(), k.map(|k| k.heads_mut()), norm, &opts),
            (None, true) => {
                let qo = qo.as_mut().expect("q_out");
                rope.apply_qk_norm_into(q.heads(), qo.heads_mut(), None, norm, &opts)
            }
            (Some(k), true) => {
                let (qo, ko) = (qo.as_mut().expect("q_out"), ko.as_mut().expect("k_out"));
                rope.apply_qk_norm_into(
                    q.heads(),
                    qo.heads_mut(),
                    Some((k.heads(), ko.heads_mut())),
                    norm,
                    &opts,
                )
            }
        }
    };
    {
        let mut g = SplitMix(case.data_seed ^ 0x0A4B_0015);
        let wlen = |g: &mut SplitMix| if g.next().is_multiple_of(16) { hd + 1 } else { hd };
        let (ql, kl) = (wlen(&mut g), wlen(&mut g));
        let qw: Vec<f32> = (0..ql).map(|_| random_elem::<f32>(&mut g, case.specials)).collect();
        let kw: Vec<f32> = (0..kl).map(|_| random_elem::<f32>(&mut g, case.specials)).collect();
        let eps = [1e-6f32, 1e-5, 0.0, 1e-6, -1e-6, f32::NAN][(g.next() % 6) as usize];
        let norm = match g.next() % 3 {
            0 => QkNorm::qwen3(&qw, &kw, eps),
            1 => QkNorm::gemma3(&qw, &kw, eps),
            _ => QkNorm::llama4(eps),
        };
        let mut fruns = Vec::new();
        for tier in dispatch::available_tiers() {
            let rope_t = rope.clone().with_tier(tier).expect("available tier");
            let mut bufs = initial.clone();
            let result = fused(&rope_t, &mut bufs, &norm);
            fruns.push((tier, result, bufs));
        }
        let (_, sres, sbufs) = fruns.iter().find(|r| r.0 == Tier::Scalar).expect("scalar");
        for (tier, result, bufs) in &fruns {
            assert_eq!(result, sres, "fused {norm:?}: tier {tier} vs scalar\n{}", describe::<T>(case, &cfg));
            for ((name, a), b) in NAMES.iter().zip(bufs).zip(sbufs) {
                if let (Some(a), Some(b)) = (a, b) {
                    if let Some(j) = first_diff(&a.bits(), &b.bits()) {
                        panic!("fused {norm:?}: {name}[{j}] {tier} vs scalar\n{}", describe::<T>(case, &cfg));
                    }
                }
            }
        }
        if sres.is_err() {
            for ((name, a), b) in NAMES.iter().zip(sbufs).zip(&initial) {
                if let (Some(a), Some(b)) = (a, b) {
                    assert!(
                        a.bits() == b.bits(),
                        "fused error {sres:?} but {name} changed\n{}",
                        describe::<T>(case, &cfg)
                    );
                }
            }
        } else if !case.out_of_place {
            // Two scalar passes, in the order of the form.
            let oracle = rope.clone().with_tier(Tier::Scalar).expect("scalar");
            let mut bufs = initial.clone();
            let norm_pass = |bufs: &mut [Option<Buf<T>>; 4]| {
                let [q, k, _, _] = bufs;
                let q = q.as_mut().expect("q");
                oracle.norm_qk(q.heads_mut(), k.as_mut().map(|k| k.heads_mut()), &norm).expect("norm pass");
            };
            let after = matches!(norm, QkNorm::L2After { .. });
            if !after {
                norm_pass(&mut bufs);
            }
            let r = entry(&oracle, &mut bufs, &scalar.cos, &scalar.sin);
            assert_eq!(
                r,
                Ok(()),
                "the RoPE pass failed where the fused call did not\n{}",
                describe::<T>(case, &cfg)
            );
            if after {
                norm_pass(&mut bufs);
            }
            for ((name, a), b) in NAMES.iter().zip(&bufs).zip(sbufs) {
                if let (Some(a), Some(b)) = (a, b) {
                    if let Some(j) = first_diff(&a.bits(), &b.bits()) {
                        panic!(
                            "fused {norm:?}: {name}[{j}] differs from two passes\n{}",
                            describe::<T>(case, &cfg)
                        );
                    }
                }
            }
        }
    }

    // 2. The scalar run against the contract.
    let ctx = || describe::<T>(case, &cfg);
    if let Err(e) = scalar.result {
        assert!(!known_valid, "a valid call failed with {e:?}\n{}", ctx());
        for ((name, a), b) in NAMES.iter().zip(&scalar.bufs).zip(&initial) {
            if let (Some(a), Some(b)) = (a, b) {
                if let Some(j) = first_diff(&a.bits(), &b.bits()) {
                    panic!("error {e:?} but {name}[{j}] changed\n{}", ctx());
                }
            }
        }
        return Outcome::Rejected(e);
    }

    // Cos/sin rows for the model: from the table, or (on the fly, for frequencies that do
    // not depend on the call length) from `fill_table` of the scalar tier.
    let row = |p: u32| -> Option<(Vec<f32>, Vec<f32>)> {
        if table_mode {
            let r = p as usize * pairs;
            Some((scalar.cos[r..r + pairs].to_vec(), scalar.sin[r..r + pairs].to_vec()))
        } else if cfg.scaling.depends_on_seq_len() {
            None
        } else {
            let (mut c, mut s) = (vec![0.0f32; pairs], vec![0.0f32; pairs]);
            rope.clone().with_tier(Tier::Scalar).ok()?.fill_table(p, &mut c, &mut s).ok()?;
            Some((c, s))
        }
    };
    let pair_members: Vec<(usize, usize)> = (0..pairs)
        .map(|i| if cfg.layout == PairLayout::Interleaved { (2 * i, 2 * i + 1) } else { (i, i + pairs) })
        .collect();

    // Rows of each (source, destination) tensor: (input index, output index).
    let jobs: &[(usize, usize)] = if case.out_of_place { &[(0, 2), (1, 3)] } else { &[(0, 0), (1, 1)] };
    for &(si, di) in jobs {
        let (Some(src0), Some(dst0), Some(dst1)) = (&initial[si], &initial[di], &scalar.bufs[di]) else {
            continue;
        };
        // Inputs of an out-of-place call are untouched.
        if si != di {
            let now = scalar.bufs[si].as_ref().expect("input");
            assert!(now.bits() == src0.bits(), "{} (input) changed\n{}", NAMES[si], ctx());
        }
        let (before, after) = (dst0.bits(), dst1.bits());
        let mut covered = vec![false; before.len()];
        let (sv, dv) = (src0.view, dst0.view);
        for t in 0..sv.tokens {
            let p = position(t);
            let rows = row(p);
            for h in 0..sv.heads {
                let so = src0.front + t * sv.token_stride + h * sv.head_stride;
                let o = dst0.front + t * dv.token_stride + h * dv.head_stride;
                let x = &src0.data[so..so + hd];
                for d in 0..hd {
                    covered[o + d] = true;
                }
                for d in rd..hd {
                    assert_eq!(
                        after[o + d],
                        x[d].to_bits_u32(),
                        "pass-through {}[t={t}, h={h}, d={d}]\n{}",
                        NAMES[di],
                        ctx()
                    );
                }
                if let Some((c, s)) = &rows {
                    for (i, &(a, b)) in pair_members.iter().enumerate() {
                        let (x0, x1) = (x[a].to_f32(), x[b].to_f32());
                        let (y0, y1) = if case.inverse {
                            ((x0 * c[i]) + (x1 * s[i]), (x1 * c[i]) - (x0 * s[i]))
                        } else {
                            ((x0 * c[i]) - (x1 * s[i]), (x1 * c[i]) + (x0 * s[i]))
                        };
                        for (d, y) in [(a, y0), (b, y1)] {
                            assert_eq!(
                                after[o + d],
                                T::round(y),
                                "{}[t={t}, h={h}, d={d}] at position {p}: x = ({x0:e}, {x1:e}), cos {:e}, sin {:e}\n{}",
                                NAMES[di],
                                c[i],
                                s[i],
                                ctx()
                            );
                        }
                    }
                }
            }
        }
        for (j, c) in covered.iter().enumerate() {
            if !c {
                assert_eq!(
                    after[j],
                    before[j],
                    "{}[{j}] outside the view changed ({})\n{}",
                    NAMES[di],
                    if j < dst0.front || j >= dst0.front + dst0.len { "canary" } else { "gap" },
                    ctx()
                );
            }
        }
    }
    Outcome::Rotated
}

/// Runs a `diff_half` input: the first byte picks f16 or bf16.
pub fn check_half(bytes: &[u8]) -> Outcome {
    let Some((&sel, rest)) = bytes.split_first() else { return Outcome::Skipped };
    let case = DiffCase::read(rest);
    if sel & 1 == 0 {
        check::<rope_kernels::f16>(&case)
    } else {
        check::<rope_kernels::bf16>(&case)
    }
}

fn bits32(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

fn first_diff(a: &[u32], b: &[u32]) -> Option<usize> {
    a.iter().zip(b).position(|(x, y)| x != y)
}

/// The (token, head, dim) a slice index belongs to, if any.
fn locate(view: &View, hd: usize, i: isize) -> Option<(usize, usize, usize)> {
    if i < 0 {
        return None;
    }
    let i = i as usize;
    for t in 0..view.tokens {
        for h in 0..view.heads {
            let o = t * view.token_stride + h * view.head_stride;
            if (o..o + hd).contains(&i) {
                return Some((t, h, i - o));
            }
        }
    }
    None
}

fn describe<T: FuzzElem>(case: &DiffCase, cfg: &RopeConfig) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "element {}; tiers {:?}", T::NAME, dispatch::available_tiers().collect::<Vec<_>>());
    let _ = writeln!(s, "config {cfg:?}");
    let _ = write!(s, "case {case:?}");
    s
}
