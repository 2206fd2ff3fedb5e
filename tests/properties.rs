//! Property tests (issue 7) run for every available tier, on random configurations from
//! fixed seeds: every scaling method, both layouts and angle modes, full and partial
//! `rotary_dim` (odd pair counts included), random positions up to `u32::MAX`.
//!
//! `tests/rotation.rs` checks norm, composition, inverse and relative position on a fixed
//! list of unscaled configurations through the default tier, against the f64 rotation
//! matrix; here the same properties are checked per tier, on random and scaled
//! configurations (the norm then scales by the attention factor), with an error bound that
//! does not need the angle (so it also holds for dynamic NTK and LongRoPE, whose
//! frequencies change per call). Added properties are bit-exact:
//! - HalfSplit ↔ Interleaved: permuting each pair `(i, i + n)` to `(2i, 2i + 1)` before and
//!   back after gives the same bits;
//! - f16/bf16 results are the f32 results of the widened inputs rounded once;
//! - no state between calls: any history of calls (long dynamic-NTK and LongRoPE calls,
//!   other tiers, other element types, tables, other threads changing the dispatcher)
//!   leaves the bits of a call unchanged;
//! - a NaN (or infinity) in one pair leaves every other element bit-identical to a run
//!   without it, and makes both members of its pair the canonical NaN.
//!
//! Every tier must also give the scalar tier's bits (checked as a by-product).
// Row-indexed loops over several parallel arrays read best with the index.
#![allow(clippy::needless_range_loop)]

mod common;

use common::*;
use rand::RngExt;
use rope_kernels::dispatch;
use rope_kernels::{
    bf16, f16, AngleMode, ApplyOptions, CosSinTable, Element, Heads, HeadsMut, LongRopeParams, PairLayout,
    Rope, RopeConfig, Scaling, Tier, View, YarnParams,
};

// ---------------------------------------------------------------------------------------
// Random configurations.

/// A random valid configuration. `scaled` allows every scaling method; otherwise only
/// those with attention factor 1 and frequencies that do not depend on the call length.
fn random_config(rng: &mut TestRng, scaled: bool) -> RopeConfig {
    let head_dim = rng.random_range(2..=160usize);
    let pairs = match rng.random_range(0..4) {
        0 => head_dim / 2,
        1 => rng.random_range(1..=(head_dim / 2)),
        // Odd pair counts (tails of 1, 3, 5, 9, 17... elements).
        _ => {
            let odd: Vec<usize> = [1, 3, 5, 9, 17, 33].into_iter().filter(|&p| p <= head_dim / 2).collect();
            odd[rng.random_range(0..odd.len())]
        }
    };
    let rotary_dim = 2 * pairs;
    let theta = [10_000.0, 500_000.0, 1e6, 0.5, 2.0, 150_000.0][rng.random_range(0..6)];
    let orig = rng.random_range(1..5000u64);
    let n = if scaled { 9 } else { 5 };
    let scaling = match rng.random_range(0..n) {
        0 => Scaling::None,
        1 => Scaling::Linear { factor: [2.0, 4.0, 0.5][rng.random_range(0..3)] },
        2 => Scaling::NtkAlpha { alpha: 2.5 },
        3 if rotary_dim > 2 => Scaling::Llama3 {
            factor: 8.0,
            low_freq_factor: 1.0,
            high_freq_factor: 4.0,
            original_max_position_embeddings: orig,
        },
        4 => Scaling::Proportional { factor: 2.0, partial_rotary_factor: 0.5 },
        5 if theta != 1.0 => Scaling::Yarn(YarnParams::new(4.0, orig).with_truncate(rng.random())),
        6 => Scaling::DynamicNtk { factor: 2.0, max_position_embeddings: orig },
        7 => {
            let s: Vec<f64> = (0..pairs).map(|i| 1.0 + (i % 3) as f64 / 2.0).collect();
            let l: Vec<f64> = (0..pairs).map(|i| 1.0 + i as f64).collect();
            Scaling::LongRope(LongRopeParams::new(&s, &l, orig, 32.0).unwrap())
        }
        8 => Scaling::freq_factors(&(0..pairs).map(|i| 1.0 + (i % 4) as f64).collect::<Vec<_>>()).unwrap(),
        _ => Scaling::None,
    };
    let layout = if rng.random() { PairLayout::Interleaved } else { PairLayout::HalfSplit };
    let mode = if rng.random_range(0..4) == 0 { AngleMode::HfCompatible } else { AngleMode::Exact };
    let cfg = RopeConfig { head_dim, rotary_dim, layout, theta, scaling, angle_mode: mode };
    // NTK alpha needs rotary_dim > 2; fall back to no scaling.
    if Rope::new(cfg.clone()).is_err() {
        return RopeConfig { scaling: Scaling::None, ..cfg };
    }
    cfg
}

/// `n` positions (random, each below `limit`).
fn positions(rng: &mut TestRng, n: usize, limit: u32) -> Vec<u32> {
    (0..n).map(|_| random_position(rng) % limit.max(1)).collect()
}

// ---------------------------------------------------------------------------------------
// The trial driver: every property runs on random configurations, per tier.

/// Draws the configuration of one trial.
type Draw = fn(&mut TestRng) -> RopeConfig;

/// Any valid configuration, every scaling method included.
fn scaled_config(rng: &mut TestRng) -> RopeConfig {
    random_config(rng, true)
}

/// One case of a property: the element type, the seed of its generator, the tier, the trial
/// number on that tier and the configuration. `Display` names it in every assertion message.
struct Trial {
    ty: &'static str,
    seed: u64,
    tier: Tier,
    n: usize,
    cfg: RopeConfig,
    rope: Rope<'static>,
}

impl core::fmt::Display for Trial {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let Trial { ty, seed, tier, n, cfg, .. } = self;
        write!(f, "{ty} seed {seed:#x} tier {tier} trial {n} {cfg:?}")
    }
}

/// Runs `check` on `count` trials per available tier, each on a configuration drawn by
/// `draw`, all from one generator seeded with `seed` (so the trials and their inputs are
/// fixed). `check` draws the rest of its inputs from the same generator and returns whether
/// the trial counts: `false` skips it (its configuration does not have the property), and
/// another one is drawn.
fn for_each_trial<T: TestElem>(
    seed: u64,
    count: usize,
    draw: Draw,
    mut check: impl FnMut(&mut TestRng, &Trial) -> bool,
) {
    let mut rng = rng(seed);
    for tier in tiers() {
        let mut n = 0;
        while n < count {
            let cfg = draw(&mut rng);
            let rope = Rope::new(cfg.clone()).unwrap();
            let trial = Trial { ty: T::NAME, seed, tier, n, cfg, rope };
            if check(&mut rng, &trial) {
                n += 1;
            }
        }
    }
}

/// Rotates `x` (`positions.len()` tokens of `heads` heads, BSHD) with the trial's `Rope` on
/// its tier; also checks the bits against the scalar tier.
fn rotate<T: Element>(t: &Trial, x: &[T], heads: usize, pos: &[u32], inverse: bool) -> Vec<T> {
    let view = View::token_major(pos.len(), heads, t.cfg.head_dim);
    let mut opts = ApplyOptions::ids(pos);
    if inverse {
        opts = opts.inverse();
    }
    let run = |tier: Tier| {
        let mut y = x.to_vec();
        t.rope.clone().with_tier(tier).unwrap().apply(HeadsMut::new(&mut y, view), &opts).unwrap();
        y
    };
    let y = run(t.tier);
    if t.tier != Tier::Scalar {
        assert_eq!(bits(&y), bits(&run(Tier::Scalar)), "{t}: differs from the scalar tier");
    }
    y
}

/// The property tests: one `#[test]` each, running its check on each element type listed,
/// with that type's seed. A macro because the checks are generic over the element type.
macro_rules! property_tests {
    ($($test:ident => $check:ident [$($ty:ty: $seed:expr),+ $(,)?];)+) => {
        $(
            #[test]
            fn $test() {
                $($check::<$ty>($seed);)+
            }
        )+
    };
}

property_tests! {
    norm_scaled_by_attention_factor => check_norm[f32: 0x7001, f16: 0x7002, bf16: 0x7003];
    inverse_undoes_forward => check_inverse[f32: 0x7011, f16: 0x7012, bf16: 0x7013];
    composition_adds_positions => check_composition[f32: 0x7021, f16: 0x7022, bf16: 0x7023];
    relative_position_invariance => check_relative[f32: 0x7031, f16: 0x7032, bf16: 0x7033];
    half_split_equals_interleaved_under_the_pair_permutation =>
        check_layouts[f32: 0x7041, f16: 0x7042, bf16: 0x7043];
    half_types_are_the_f32_result_rounded_once => check_rounded_once[f16: 0x7051, bf16: 0x7052];
    nan_in_one_pair_leaves_every_other_pair_exact =>
        check_nan_isolated[f32: 0x7061, f16: 0x7062, bf16: 0x7063];
}

/// Per-element bound on `|kernel - af R x|` for each rotated element of a head, without
/// the angle: a pair's exact outputs have magnitude at most `af (|x0| + |x1|)`, so
/// `GAMMA_F32 af (|x0| + |x1|) + ETA_F32` bounds the f32 result (as in `common::reference`)
/// and one rounding to `T` adds `T::U (af |(x0, x1)| + b32) + T::ETA`.
fn bounds<T: TestElem>(cfg: &RopeConfig, af: f64, x: &[T]) -> Vec<f64> {
    let mut b = vec![0.0; cfg.head_dim];
    for (a, c) in pairs(cfg.layout, cfg.rotary_dim) {
        let (x0, x1) = (f64::from(x[a].to_f32()), f64::from(x[c].to_f32()));
        let b32 = GAMMA_F32 * af * (x0.abs() + x1.abs()) + ETA_F32;
        let e = b32 + T::U * (af * x0.hypot(x1) + b32) + T::ETA;
        b[a] = e;
        b[c] = e;
    }
    b
}

/// The attention factor of the call whose largest position is `max`.
fn af(rope: &Rope, max: u32) -> f64 {
    rope.frequencies_at(u64::from(max) + 1).unwrap().attention_factor()
}

fn row<T: Copy>(v: &[T], hd: usize, r: usize) -> &[T] {
    &v[r * hd..(r + 1) * hd]
}

// ---------------------------------------------------------------------------------------
// Norm, inverse, composition, relative position: per tier, random configurations.

/// `| ||y|| - af ||x|| | <= ||bound||` (+ `1e-12 af ||x||` for the f64 evaluation), over
/// the rotated dimensions (pairs are rotated as a whole, so their norm is the norm of the
/// first `rotary_dim` elements in either layout); pass-through dimensions bit for bit.
fn check_norm<T: TestElem>(seed: u64) {
    for_each_trial::<T>(seed, 24, scaled_config, |rng, t| {
        let (hd, rd) = (t.cfg.head_dim, t.cfg.rotary_dim);
        let n = 6;
        let p = positions(rng, n, u32::MAX);
        let x: Vec<T> = random_vec(rng, n * hd);
        let inverse = rng.random();
        let y = rotate(t, &x, 1, &p, inverse);
        let a = af(&t.rope, *p.iter().max().unwrap());
        for r in 0..n {
            let (xr, yr) = (row(&x, hd, r), row(&y, hd, r));
            // The rotated part scales by the attention factor; the rest is copied.
            let (xn, yn) = (norm(&to_f64(&xr[..rd])), norm(&to_f64(&yr[..rd])));
            assert_eq!(bits(&yr[rd..]), bits(&xr[rd..]), "{t} p={}: pass-through", p[r]);
            let tol = norm(&bounds(&t.cfg, a, xr)) + 1e-12 * a * xn;
            assert!((yn - a * xn).abs() <= tol, "{t} p={}: |{yn} - {a} * {xn}| > {tol:e}", p[r]);
        }
        true
    });
}

/// `R_p^T (R_p x) = x` for attention factor 1 (dynamic NTK and LongRoPE included: both
/// calls have the same positions, so the same frequencies): `||z - x|| <= ||b1|| + ||b2||`.
/// Configurations whose attention factor is not 1 are skipped.
fn check_inverse<T: TestElem>(seed: u64) {
    for_each_trial::<T>(seed, 24, scaled_config, |rng, t| {
        let hd = t.cfg.head_dim;
        let n = 6;
        let p = positions(rng, n, u32::MAX);
        if af(&t.rope, *p.iter().max().unwrap()) != 1.0 {
            return false;
        }
        let x: Vec<T> = random_vec(rng, n * hd);
        let y = rotate(t, &x, 1, &p, false);
        let z = rotate(t, &y, 1, &p, true);
        for r in 0..n {
            let (xr, yr, zr) = (row(&x, hd, r), row(&y, hd, r), row(&z, hd, r));
            let diff: Vec<f64> = to_f64(zr).iter().zip(to_f64(xr)).map(|(a, b)| a - b).collect();
            let tol =
                norm(&bounds(&t.cfg, 1.0, xr)) + norm(&bounds(&t.cfg, 1.0, yr)) + 1e-13 * norm(&to_f64(xr));
            assert!(norm(&diff) <= tol, "{t} p={}: {} > {tol:e}", p[r], norm(&diff));
            for d in t.cfg.rotary_dim..hd {
                assert_eq!(zr[d].to_bits_u32(), xr[d].to_bits_u32(), "{t} p={}: pass-through", p[r]);
            }
        }
        true
    });
}

/// Configurations where `R_a R_b = R_{a+b}` and `<R_m q, R_n k> = <R_{m-n} q, k>` hold:
/// exact angles, attention factor 1, frequencies independent of the call.
fn group_config(rng: &mut TestRng) -> RopeConfig {
    let mut cfg = random_config(rng, false);
    cfg.angle_mode = AngleMode::Exact;
    cfg
}

/// `2^-52 * position * max inv_freq`: the f64 rounding of one angle, relative.
fn angle_slack(rope: &Rope, position: f64) -> f64 {
    let fmax = rope.frequencies().inv_freq().iter().fold(0.0f64, |a, &b| a.max(b));
    2f64.powi(-52) * position * fmax
}

/// `R_a (R_b x) = R_{a+b} x`: `||y2 - z|| <= ||b1|| + ||b2|| + ||b3||` plus the angle
/// rounding and `1e-13 ||x||`.
fn check_composition<T: TestElem>(seed: u64) {
    for_each_trial::<T>(seed, 24, group_config, |rng, t| {
        let hd = t.cfg.head_dim;
        let n = 6;
        let a = positions(rng, n, 1 << 24);
        let b = positions(rng, n, 1 << 24);
        let ab: Vec<u32> = a.iter().zip(&b).map(|(a, b)| a + b).collect();
        let x: Vec<T> = random_vec(rng, n * hd);
        let inverse = rng.random();
        let y1 = rotate(t, &x, 1, &b, inverse);
        let y2 = rotate(t, &y1, 1, &a, inverse);
        let z = rotate(t, &x, 1, &ab, inverse);
        for r in 0..n {
            let diff: Vec<f64> =
                to_f64(row(&y2, hd, r)).iter().zip(to_f64(row(&z, hd, r))).map(|(p, q)| p - q).collect();
            let xn = norm(&to_f64(row(&x, hd, r)));
            let tol = norm(&bounds(&t.cfg, 1.0, row(&x, hd, r)))
                + norm(&bounds(&t.cfg, 1.0, row(&y1, hd, r)))
                + norm(&bounds(&t.cfg, 1.0, row(&x, hd, r)))
                + (angle_slack(&t.rope, f64::from(ab[r])) + 1e-13) * xn;
            assert!(norm(&diff) <= tol, "{t} a={} b={}: {} > {tol:e}", a[r], b[r], norm(&diff));
        }
        true
    });
}

/// `<R_m q, R_n k> = <R_{m-n} q, k>` (RoFormer eq. 16), several heads per token; the
/// tolerance as in `tests/rotation.rs` (`check_relative`) with the angle-free bounds.
fn check_relative<T: TestElem>(seed: u64) {
    for_each_trial::<T>(seed, 24, group_config, |rng, t| {
        let hd = t.cfg.head_dim;
        let n = 6;
        let m = positions(rng, n, 1 << 24);
        let k_pos = positions(rng, n, 1 << 24);
        let q: Vec<T> = random_vec(rng, n * hd);
        let k: Vec<T> = random_vec(rng, n * hd);
        let yq = rotate(t, &q, 1, &m, false);
        let yk = rotate(t, &k, 1, &k_pos, false);
        for r in 0..n {
            let (d, inverse) = (m[r].abs_diff(k_pos[r]), m[r] < k_pos[r]);
            let z = rotate(t, row(&q, hd, r), 1, &[d], inverse);
            let (qr, kr) = (row(&q, hd, r), row(&k, hd, r));
            let (qn, kn) = (norm(&to_f64(qr)), norm(&to_f64(kr)));
            let lhs = dot(&to_f64(row(&yq, hd, r)), &to_f64(row(&yk, hd, r)));
            let rhs = dot(&to_f64(&z), &to_f64(kr));
            // The bound of R_{m-n} q is that of R_m q: it does not depend on the angle.
            let (eq, ek) = (norm(&bounds(&t.cfg, 1.0, qr)), norm(&bounds(&t.cfg, 1.0, kr)));
            let ez = eq;
            let delta = angle_slack(&t.rope, f64::from(m[r]) + f64::from(k_pos[r]));
            let tol = eq * kn + qn * ek + eq * ek + ez * kn + (delta + 1e-13) * qn * kn;
            assert!((lhs - rhs).abs() <= tol, "{t} m={} n={}: |{lhs} - {rhs}| > {tol:e}", m[r], k_pos[r]);
        }
        true
    });
}

// ---------------------------------------------------------------------------------------
// Bit-exact properties.

/// The HalfSplit head of an Interleaved one and back: pair `i` is `(i, i + n)` in one and
/// `(2i, 2i + 1)` in the other; pass-through dimensions stay.
fn to_interleaved<T: Copy>(h: &[T], rotary_dim: usize) -> Vec<T> {
    let n = rotary_dim / 2;
    let mut v = h.to_vec();
    for i in 0..n {
        v[2 * i] = h[i];
        v[2 * i + 1] = h[i + n];
    }
    v
}

fn to_half_split<T: Copy>(h: &[T], rotary_dim: usize) -> Vec<T> {
    let n = rotary_dim / 2;
    let mut v = h.to_vec();
    for i in 0..n {
        v[i] = h[2 * i];
        v[i + n] = h[2 * i + 1];
    }
    v
}

/// HalfSplit on `x` equals Interleaved on the permuted `x`, permuted back, bit for bit, on
/// every tier, in place and out of place, on the fly and from a table, special values
/// included.
fn check_layouts<T: TestElem>(seed: u64) {
    let nans = nan_payloads::<T>();
    for_each_trial::<T>(seed, 32, scaled_config, |rng, t| {
        let (cfg, tier) = (&t.cfg, t.tier);
        let (hd, rd) = (cfg.head_dim, cfg.rotary_dim);
        let hs = pinned(cfg.clone().with_layout(PairLayout::HalfSplit), tier);
        let il = pinned(cfg.clone().with_layout(PairLayout::Interleaved), tier);
        let (tokens, heads) = (rng.random_range(1..5usize), rng.random_range(1..4usize));
        let limit = if rng.random() { u32::MAX } else { 64 };
        let p = positions(rng, tokens, limit);
        let mut x: Vec<T> = random_vec(rng, tokens * heads * hd);
        for _ in 0..3 {
            let i = rng.random_range(0..x.len());
            x[i] = nans[rng.random_range(0..nans.len())];
        }
        let xi: Vec<T> = x.chunks(hd).flat_map(|h| to_interleaved(h, rd)).collect();
        let view = View::token_major(tokens, heads, hd);
        let max = *p.iter().max().unwrap();
        let use_table = max < 64 && rng.random();
        let rows = if use_table { max as usize + 1 } else { 1 };
        let (mut cos, mut sin) = (vec![0.0f32; rows * rd / 2], vec![0.0f32; rows * rd / 2]);
        if use_table {
            hs.fill_table(0, &mut cos, &mut sin).unwrap();
        }
        let table = CosSinTable::new(&cos, &sin, rd / 2).unwrap();
        let inverse: bool = rng.random();
        let mut opts = ApplyOptions::ids(&p);
        if use_table {
            opts = opts.with_table(table);
        }
        if inverse {
            opts = opts.inverse();
        }
        let out_of_place: bool = rng.random();
        let run = |rope: &Rope, x: &[T]| -> Vec<T> {
            if out_of_place {
                let mut out = vec![T::default(); x.len()];
                rope.apply_into(Heads::new(x, view), HeadsMut::new(&mut out, view), &opts).unwrap();
                out
            } else {
                let mut y = x.to_vec();
                rope.apply(HeadsMut::new(&mut y, view), &opts).unwrap();
                y
            }
        };
        let y_hs = run(&hs, &x);
        let y_il: Vec<T> = run(&il, &xi).chunks(hd).flat_map(|h| to_half_split(h, rd)).collect();
        assert_eq!(
            bits(&y_il),
            bits(&y_hs),
            "{t} positions {p:?} table {use_table} inverse {inverse} out of place {out_of_place}"
        );
        true
    });
}

/// Each f16/bf16 output is the f32 output of the widened input rounded once (the crate's
/// f32 path, rounded here with the `half` crate), on every tier, special values included.
fn check_rounded_once<T: TestElem>(seed: u64) {
    let nans = nan_payloads::<T>();
    for_each_trial::<T>(seed, 32, scaled_config, |rng, t| {
        let hd = t.cfg.head_dim;
        let (tokens, heads) = (rng.random_range(1..5usize), rng.random_range(1..4usize));
        let p = positions(rng, tokens, u32::MAX);
        let mut x: Vec<T> = random_vec(rng, tokens * heads * hd);
        for v in x.iter_mut() {
            match rng.random_range(0..16) {
                0 => *v = nans[rng.random_range(0..nans.len())],
                1 => *v = from_bits::<T>(rng.random_range(0..8)), // zero and subnormals
                2 => *v = T::from_f32(f32::INFINITY),
                _ => {}
            }
        }
        let x32: Vec<f32> = x.iter().map(|v| v.to_f32()).collect();
        let inverse = rng.random();
        let y = rotate(t, &x, heads, &p, inverse);
        let y32 = rotate(t, &x32, heads, &p, inverse);
        let want: Vec<u32> = y32.iter().map(|v| round_bits::<T>(*v)).collect();
        for (i, (g, w)) in bits(&y).iter().zip(&want).enumerate() {
            if i % hd < t.cfg.rotary_dim {
                assert_eq!(g, w, "{t} element {i}: {g:#x} vs f32 {} rounded {w:#x}", y32[i]);
            } else {
                assert_eq!(*g, x[i].to_bits_u32(), "{t} element {i}: pass-through");
            }
        }
        true
    });
}

/// A NaN or infinity in one element leaves every element outside its pair (in every head
/// and token of the call) bit-identical to the run with a finite value there; a NaN makes
/// both members of its pair the canonical NaN.
fn check_nan_isolated<T: TestElem>(seed: u64) {
    let nans = nan_payloads::<T>();
    for_each_trial::<T>(seed, 32, scaled_config, |rng, t| {
        let (hd, rd) = (t.cfg.head_dim, t.cfg.rotary_dim);
        let (tokens, heads) = (rng.random_range(1..4usize), rng.random_range(1..4usize));
        let p = positions(rng, tokens, u32::MAX);
        let clean: Vec<T> = random_vec(rng, tokens * heads * hd);
        let (tk, h) = (rng.random_range(0..tokens), rng.random_range(0..heads));
        let pair = rng.random_range(0..rd / 2);
        let (a, b) = pairs(t.cfg.layout, rd)[pair];
        let member = if rng.random() { a } else { b };
        let is_nan = rng.random_range(0..3) != 0;
        let bad = if is_nan { nans[rng.random_range(0..nans.len())] } else { T::from_f32(f32::NEG_INFINITY) };
        let base = (tk * heads + h) * hd;
        let mut dirty = clean.clone();
        dirty[base + member] = bad;
        let inverse = rng.random();
        let yc = rotate(t, &clean, heads, &p, inverse);
        let yd = rotate(t, &dirty, heads, &p, inverse);
        for i in 0..yc.len() {
            if i == base + a || i == base + b {
                if is_nan {
                    let nan = round_bits::<T>(f32::NAN);
                    assert_eq!(yd[i].to_bits_u32(), nan, "{t}: element {i} of the NaN's pair not NaN");
                }
                continue;
            }
            assert_eq!(
                yd[i].to_bits_u32(),
                yc[i].to_bits_u32(),
                "{t}: element {i} changed by a bad value at {}",
                base + member
            );
        }
        true
    });
}

// ---------------------------------------------------------------------------------------
// No state between calls.

/// One call of the history test: the configuration index, positions, element type, table
/// or not, tier.
#[derive(Clone, Debug)]
struct Call {
    cfg: usize,
    positions: Vec<u32>,
    dtype: u8,
    table: bool,
    tier: Tier,
}

/// The configurations of the history test: dynamic NTK (grows past 256), LongRoPE (long
/// factors past 256), the same with a caller f32 `inv_freq` table, YaRN, and a plain one.
fn history_ropes() -> Vec<Rope<'static>> {
    let d = 40;
    let long: Vec<f64> = (0..d / 2).map(|i| 1.0 + i as f64).collect();
    let short: Vec<f64> = (0..d / 2).map(|i| 1.0 + (i % 3) as f64).collect();
    let dynamic = RopeConfig::new(d, 10_000.0)
        .with_rotary_dim(d - 2)
        .with_scaling(Scaling::DynamicNtk { factor: 3.0, max_position_embeddings: 256 });
    let longrope = RopeConfig::new(d, 10_000.0)
        .with_layout(PairLayout::Interleaved)
        .with_scaling(Scaling::LongRope(LongRopeParams::new(&short, &long, 256, 64.0).unwrap()));
    let hf = Rope::new(dynamic.clone().with_angle_mode(AngleMode::HfCompatible)).unwrap();
    let table: Vec<f32> = hf.frequencies().inv_freq_f32().iter().map(|f| f * 1.5).collect();
    vec![
        Rope::new(dynamic).unwrap(),
        Rope::new(longrope).unwrap(),
        hf.with_hf_inv_freq(&table).unwrap(),
        Rope::new(RopeConfig::new(d, 1e6).with_scaling(Scaling::Yarn(YarnParams::new(8.0, 256)))).unwrap(),
        Rope::new(RopeConfig::new(d, 10_000.0).with_rotary_dim(10)).unwrap(),
    ]
}

/// Input of the history calls: fixed per (configuration, element type).
fn history_input<T: TestElem>(i: usize, tokens: usize, hd: usize) -> Vec<T> {
    random_vec(&mut rng(0x7070 + i as u64), tokens * 3 * hd)
}

/// Runs one call; returns the output bits.
fn history_call(rope: &Rope, c: &Call) -> Vec<u32> {
    fn go<T: TestElem>(rope: &Rope, c: &Call) -> Vec<u32> {
        let rope = rope.clone().with_tier(c.tier).unwrap();
        let hd = rope.config().head_dim;
        let mut x = history_input::<T>(c.cfg, c.positions.len(), hd);
        let view = View::head_major(c.positions.len(), 3, hd);
        let max = *c.positions.iter().max().unwrap();
        let pairs = rope.config().rotary_dim / 2;
        let (mut cos, mut sin) =
            (vec![0.0f32; (max as usize + 1) * pairs], vec![0.0f32; (max as usize + 1) * pairs]);
        let mut opts = ApplyOptions::ids(&c.positions);
        if c.table {
            rope.fill_table(0, &mut cos, &mut sin).unwrap();
            opts = opts.with_table(CosSinTable::new(&cos, &sin, pairs).unwrap());
        }
        rope.apply(HeadsMut::new(&mut x, view), &opts).unwrap();
        bits(&x)
    }
    match c.dtype % 3 {
        0 => go::<f32>(rope, c),
        1 => go::<f16>(rope, c),
        _ => go::<bf16>(rope, c),
    }
}

fn random_calls(rng: &mut TestRng, n: usize, tiers: &[Tier], n_cfg: usize) -> Vec<Call> {
    (0..n)
        .map(|_| {
            let long = rng.random();
            let tokens = rng.random_range(1..5);
            let limit = if long { 2000 } else { 200 };
            let mut positions: Vec<u32> = (0..tokens).map(|_| rng.random_range(0..limit)).collect();
            if long {
                positions[0] = rng.random_range(257..limit); // past every original length
            }
            Call {
                cfg: rng.random_range(0..n_cfg),
                table: rng.random_range(0..4) == 0,
                positions,
                dtype: rng.random_range(0..3),
                tier: tiers[rng.random_range(0..tiers.len())],
            }
        })
        .collect()
}

/// Every call of a random history (short and long calls of dynamic NTK and LongRoPE, other
/// configurations, element types, tables and tiers interleaved) gives the bits the same call
/// gives on a fresh `Rope` on the scalar tier.
#[test]
fn results_do_not_depend_on_call_history() {
    let tiers = tiers();
    let ropes = history_ropes();
    let mut rng = rng(0x7071);
    let calls = random_calls(&mut rng, 300, &tiers, ropes.len());
    for (i, c) in calls.iter().enumerate() {
        let got = history_call(&ropes[c.cfg], c);
        let fresh = history_ropes().swap_remove(c.cfg);
        let want = history_call(&fresh, &Call { tier: Tier::Scalar, ..c.clone() });
        assert_eq!(got, want, "call {i} {c:?} after {:?}", &calls[..i]);
    }
    // A short dynamic-NTK call before and after a long one on the same object.
    let short = Call { cfg: 0, positions: vec![0, 100, 255], dtype: 0, table: false, tier: Tier::Scalar };
    let long = Call { positions: vec![5000], ..short.clone() };
    let plain = Rope::new(RopeConfig { scaling: Scaling::None, ..ropes[0].config().clone() }).unwrap();
    let before = history_call(&ropes[0], &short);
    assert_eq!(before, history_call(&plain, &short), "L = 256: the original frequencies");
    let grown = history_call(&ropes[0], &long);
    assert_ne!(grown, history_call(&plain, &long), "L = 5001 > 256 must scale");
    assert_eq!(history_call(&ropes[0], &short), before, "L = 256 again, after the long call");
}

/// The same histories on several threads at once (sharing the `Rope` objects), while
/// another thread keeps changing the process-wide tier: every call gives the bits of the
/// single-threaded run.
#[test]
fn results_do_not_depend_on_other_threads() {
    let tiers = tiers();
    let ropes = history_ropes();
    let mut rng = rng(0x7072);
    let histories: Vec<Vec<Call>> = (0..4).map(|_| random_calls(&mut rng, 60, &tiers, ropes.len())).collect();
    let expected: Vec<Vec<Vec<u32>>> =
        histories.iter().map(|h| h.iter().map(|c| history_call(&ropes[c.cfg], c)).collect()).collect();
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut k = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                dispatch::set_max_tier(tiers[k % tiers.len()]);
                k += 1;
                std::thread::yield_now();
            }
            dispatch::reset_tier();
        });
        let workers: Vec<_> = histories
            .iter()
            .zip(&expected)
            .map(|(h, e)| {
                let ropes = &ropes;
                s.spawn(move || {
                    for (c, want) in h.iter().zip(e) {
                        // Half the calls through the process-wide dispatcher.
                        let got = if c.positions.len() % 2 == 0 {
                            history_call(&ropes[c.cfg], c)
                        } else {
                            let mut x = history_input::<f32>(c.cfg, c.positions.len(), 40);
                            let view = View::head_major(c.positions.len(), 3, 40);
                            ropes[c.cfg]
                                .apply(HeadsMut::new(&mut x, view), &ApplyOptions::ids(&c.positions))
                                .unwrap();
                            let plain = Call { dtype: 0, table: false, tier: Tier::Scalar, ..c.clone() };
                            assert_eq!(
                                bits(&x),
                                history_call(&ropes[c.cfg], &plain),
                                "{c:?} via the dispatcher"
                            );
                            continue;
                        };
                        assert_eq!(&got, want, "{c:?} on a worker thread");
                    }
                })
            })
            .collect();
        for w in workers {
            w.join().unwrap();
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
    });
}
