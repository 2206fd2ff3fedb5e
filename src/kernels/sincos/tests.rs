//! Accuracy of the generator against an independent double-double reference, and bit
//! identity of every tier with the scalar generator.
//!
//! Under Miri (which is here to check the unsafe SIMD loads, stores and masks) only the
//! tier, clamp and apply-path tests run, on reduced sizes; the pure-arithmetic accuracy
//! tests run natively and under qemu.

use std::println;
use std::vec::Vec;

use super::{cos_sin, poly, split_turns, turns, RowInputs, SinCos, HF_MAX_ANGLE, HF_TURNS};
use crate::config::{AngleMode, RopeConfig, MAX_PAIRS};
use crate::cossin::fill_row_libm;
use crate::dispatch::{Tier, ALL_TIERS};
use crate::freq::Frequencies;
use crate::kernels::scalar::sincos::Scalar;

/// The generator of `tier`, or `None` if this build or CPU lacks the tier.
fn sincos_fn(tier: Tier) -> Option<super::SinCosFn> {
    crate::dispatch::kernels_for(tier).map(|k| k.sincos)
}

/// The accuracy target for `Exact` mode.
const TARGET: f64 = 2.5e-7;
/// The module docs' bound on the f64 values before the final rounding (`inv_freq <= 1`,
/// every u32 position).
const F64_BOUND: f64 = 2.5e-12;
/// Half an f32 ulp of values in [1/2, 1]: the final rounding.
const F32_HALF_ULP: f64 = 1.0 / (1u64 << 25) as f64;
/// `2π` as three f64 (about 160 bits); independent of the generator's `1/2π`.
const TWO_PI: [f64; 3] = [core::f64::consts::TAU, 2.4492935982947064e-16, -5.989539619436679e-33];

/// splitmix64: a fixed-seed generator for samples.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Log-uniform in `[1, 2^32)`: as many samples in `[2^k, 2^(k+1))` for every `k`.
    fn position(&mut self) -> u32 {
        let e = self.next() % 32;
        let base = 1u64 << e;
        (base + self.next() % base) as u32
    }

    /// Uniform in `[0, 1)`.
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// The reference's exact product, with `libm::fma` (independent of the generator's Dekker
/// product; not for Miri, where libm's x86 `fma` uses CPUID and inline assembly).
fn two_prod(a: f64, b: f64) -> (f64, f64) {
    let h = a * b;
    (h, libm::fma(a, b, -h))
}

/// cos and sin of the real number `a_hi + a_lo` (`|a_hi| < 2^40`), reduced modulo 2π in
/// radians with a three-part 2π: good to about 1e-15.
fn ref_cos_sin(a_hi: f64, a_lo: f64) -> (f64, f64) {
    let k = libm::rint(a_hi / TWO_PI[0]);
    let (m0, e0) = two_prod(k, TWO_PI[0]);
    let (m1, e1) = two_prod(k, TWO_PI[1]);
    let m2 = k * TWO_PI[2];
    // Exact by Sterbenz's lemma: a_hi / m0 lies in [1/2, 3/2] when k >= 1 (and m0 = 0 else).
    let r = a_hi - m0;
    let r = r + (((a_lo - e0) - m1) - (e1 + m2));
    (libm::cos(r), libm::sin(r))
}

/// `cos_true`, `sin_true` of the exact product of `position` and the f64 `inv_freq`.
fn ref_exact(position: u32, inv_freq: f64) -> (f64, f64) {
    let (h, l) = two_prod(f64::from(position), inv_freq);
    ref_cos_sin(h, l)
}

fn frequencies(theta: f64, rotary_dim: usize) -> Frequencies {
    Frequencies::new(&RopeConfig::new(rotary_dim, theta), 0).unwrap()
}

/// The dense position sample: every position up to 2048 (1024 under Miri), `2^k - 1, 2^k,
/// 2^k + 1` for every k, the top of the u32 range, and `n` log-uniform positions.
fn positions(n: usize) -> Vec<u32> {
    let dense = if cfg!(miri) { 16 } else { 2048 };
    let mut v: Vec<u32> = (0..=dense).collect();
    for k in 1..32 {
        let b = 1u64 << k;
        v.extend([b - 1, b, b + 1].map(|x| x as u32));
    }
    v.extend([u32::MAX, u32::MAX - 1, (1 << 31) - 1, 1 << 31, (1 << 24) - 1, 1 << 24, (1 << 24) + 1]);
    let mut rng = Rng(0x5EED_0001);
    v.extend((0..n).map(|_| rng.position()));
    v
}

fn sample_size() -> usize {
    if cfg!(miri) {
        8
    } else {
        8_000
    }
}

/// A row generator under test: `(freqs, position, cos, sin)`.
type RowFn = dyn Fn(&Frequencies, u32, &mut [f32], &mut [f32]);
/// The f64 values of pair `i` at a position, before rounding.
type ValueFn = dyn Fn(&Frequencies, usize, u32) -> (f64, f64);

/// Max errors of a row generator against the reference over `positions` (below `limit`)
/// and every frequency of theta 1e4, 5e5, 1e6 at rotary_dim 128: `(f32 rows, f64 values)`.
/// `f64_values` gives the f64 cos/sin before rounding, where the generator has them.
fn max_errors(positions: &[u32], limit: u64, fill: &RowFn, f64_values: Option<&ValueFn>) -> (f64, f64) {
    let (mut e32, mut e64) = (0.0f64, 0.0f64);
    for theta in [1e4, 5e5, 1e6] {
        let freqs = frequencies(theta, 128);
        let (mut c, mut s) = ([0.0f32; 64], [0.0f32; 64]);
        for &p in positions.iter().filter(|&&p| u64::from(p) < limit) {
            fill(&freqs, p, &mut c, &mut s);
            for (i, &f) in freqs.inv_freq().iter().enumerate() {
                let (rc, rs) = ref_exact(p, f);
                e32 = e32.max((f64::from(c[i]) - rc).abs()).max((f64::from(s[i]) - rs).abs());
                if let Some(values) = f64_values {
                    let (vc, vs) = values(&freqs, i, p);
                    e64 = e64.max((vc - rc).abs()).max((vs - rs).abs());
                }
            }
        }
    }
    (e32, e64)
}

fn generator_row(freqs: &Frequencies, p: u32, c: &mut [f32], s: &mut [f32]) {
    crate::kernels::scalar::sincos::fill_row(&RowInputs::new(&freqs.view(), AngleMode::Exact), p, c, s);
}

fn generator_f64(freqs: &Frequencies, i: usize, p: u32) -> (f64, f64) {
    cos_sin(Scalar, f64::from(p), freqs.turns_hi()[i], freqs.turns_lo()[i])
}

#[test]
#[cfg_attr(miri, ignore = "arithmetic only: runs natively and under qemu")]
fn reference_matches_high_precision_values() {
    // (position, inv_freq, cos, sin): correctly rounded values from mpmath at 60 digits of
    // the exact product.
    let cases = [
        (4294967295, 1.0, -0.8679353473572022, 0.49667719175328817),
        (2147483647, 0.8659643233600653, -0.9814920223716952, -0.19150302875077396),
        (16777217, 0.1, -0.29891565259979835, -0.9542795358964985),
        (3000000000, 0.0001, -0.9942521687064115, 0.10706364939883847),
        (123456789, 0.5, 0.7550694277792969, 0.6556448422988205),
        (4294967295, 0.7498942093324559, -0.08684279873725308, -0.9962220276160736),
        (1000000007, 0.3333333333333333, 0.9083798376650697, 0.4181459918779345),
    ];
    for (p, f, c, s) in cases {
        let (rc, rs) = ref_exact(p, f);
        assert!((rc - c).abs() <= 2e-15 && (rs - s).abs() <= 2e-15, "reference at ({p}, {f}): {rc} {rs}");
        // The generator agrees to its f64 bound.
        let (hi, lo) = turns(f);
        let (gc, gs) = cos_sin(Scalar, f64::from(p), hi, lo);
        assert!((gc - c).abs() <= F64_BOUND && (gs - s).abs() <= F64_BOUND, "generator at ({p}, {f})");
    }
}

/// The bound of the module docs for every accepted frequency (`inv_freq <= 2^95`).
const F64_BOUND_ANY: f64 = 2.8e-12;

/// `(position, inv_freq, cos, sin)` of the exact product, from mpmath at 600 bits, for
/// frequencies far above 1 (up to the accepted maximum, 2^95). The former reduction kept
/// `inv_freq / 2π` only to about `2^-107` relative, so above about `2^55` its cos/sin were
/// wrong (1.6e-5 at 2^60, meaningless at 2^80); issue 16.
const LARGE_FREQUENCY_CASES: [(u32, f64, f64, f64); 35] = [
    (1, 1357421750469.6238, -0.3450948957308253, -0.9385677987980041),
    (3, 1357421750469.6238, 0.870894610335193, 0.4914698136092514),
    (65537, 1357421750469.6238, -0.5591649972280551, -0.829056394870065),
    (2147483647, 1357421750469.6238, 0.029847909477355158, 0.9995544518933581),
    (4294967295, 1357421750469.6238, 0.4004836172019056, 0.9163039192063284),
    (1, 1e+18, 0.11837199021871073, -0.9929693207404051),
    (3, 1e+18, -0.3484814914071296, 0.9373156619552789),
    (65537, 1e+18, -0.5101234346358698, 0.8601012041819865),
    (2147483647, 1e+18, -0.22605932724963942, 0.9741135357664631),
    (4294967295, 1e+18, -0.5435921905430704, 0.8393494685651419),
    (1, 1.152921504606847e+18, -0.5567960822766417, -0.8306492176372546),
    (3, 1.152921504606847e+18, 0.979912380163878, -0.1994285014775054),
    (65537, 1.152921504606847e+18, -0.13000927243993493, 0.9915127780717901),
    (2147483647, 1.152921504606847e+18, 0.9951262715117605, -0.09860884213447632),
    (4294967295, 1.152921504606847e+18, -0.7089881491767726, -0.7052203941512856),
    (1, 7.178979876918526e+23, 0.9991351059966963, -0.04158172633465903),
    (3, 7.178979876918526e+23, 0.9922249278820031, -0.12445759313739674),
    (65537, 7.178979876918526e+23, 0.5612510341590009, 0.8276456226280979),
    (2147483647, 7.178979876918526e+23, 0.23458640420914392, 0.9720952725737453),
    (4294967295, 7.178979876918526e+23, -0.8702041139338205, 0.492691384228154),
    (1, 2.0939209421543852e+24, 0.9790083160884835, -0.2038203057342225),
    (3, 2.0939209421543852e+24, 0.8163256543089589, -0.5775919200586606),
    (65537, 2.0939209421543852e+24, 0.9640232679517586, 0.2658178678110481),
    (2147483647, 2.0939209421543852e+24, -0.5718447911949102, -0.8203618316226381),
    (4294967295, 2.0939209421543852e+24, -0.1474920013374648, 0.989063248504093),
    (1, 3.961408125713217e+28, 0.03310796515000713, 0.9994517810498043),
    (3, 3.961408125713217e+28, -0.09917873194044358, -0.995069635317391),
    (65537, 3.961408125713217e+28, 0.6029683507474096, -0.7977651082849818),
    (2147483647, 3.961408125713217e+28, 0.36128586689821607, -0.9324551047528264),
    (4294967295, 3.961408125713217e+28, 0.6489313638132457, -0.7608469524546189),
    (1, 1.1e+25, -0.8417148804072316, 0.53992227227726),
    (3, 1.1e+25, 0.13977874225170428, 0.9901827625315095),
    (65537, 1.1e+25, -0.9998831576524523, 0.015286302462046148),
    (2147483647, 1.1e+25, -0.4401585598083113, 0.8979200644976552),
    (4294967295, 1.1e+25, 0.9423518813903661, 0.334623567072072),
];

#[test]
#[cfg_attr(miri, ignore = "arithmetic only: runs natively and under qemu")]
fn exact_for_every_accepted_frequency() {
    assert_eq!(crate::freq::MAX_INV_FREQ, 2f64.powi(95));
    for (p, f, c, s) in LARGE_FREQUENCY_CASES {
        let (hi, lo) = turns(f);
        let (gc, gs) = cos_sin(Scalar, f64::from(p), hi, lo);
        let err = (gc - c).abs().max((gs - s).abs());
        assert!(err <= F64_BOUND_ANY, "inv_freq {f:e} at position {p}: error {err:e}");
    }
    // Through the public path: linear factors 2^-60 and 2^-95 give `inv_freq` 2^60 and
    // 2^95 exactly; the f32 rows are within the documented 2.99e-8 at every position.
    for (k, f) in [(60, 1.152921504606847e18), (95, 3.961408125713217e28)] {
        let cfg = RopeConfig::new(2, 1e4).with_scaling(crate::Scaling::Linear { factor: 2f64.powi(-k) });
        let freqs = Frequencies::new(&cfg, 0).unwrap();
        assert_eq!(freqs.inv_freq(), &[f]);
        for (p, _, c, s) in LARGE_FREQUENCY_CASES.iter().filter(|case| case.1 == f) {
            let (mut rc, mut rs) = ([0.0f32], [0.0f32]);
            crate::kernels::scalar::sincos::fill_row(
                &RowInputs::new(&freqs.view(), AngleMode::Exact),
                *p,
                &mut rc,
                &mut rs,
            );
            let err = (f64::from(rc[0]) - c).abs().max((f64::from(rs[0]) - s).abs());
            assert!(err <= 2.99e-8, "linear factor 2^-{k} at position {p}: error {err:e}");
        }
    }
}

#[test]
#[cfg_attr(miri, ignore = "arithmetic only: runs natively and under qemu")]
fn turns_split_is_exact_and_reduced() {
    let mut rng = Rng(7);
    let mut fs: Vec<f64> = [0.0, 1.0, 0.5, 2.0, 1e-9, core::f64::consts::TAU, 1e3, 12345.678, 1e6].to_vec();
    for theta in [1e4, 5e5, 1e6, 10.0] {
        fs.extend_from_slice(frequencies(theta, 512).inv_freq());
    }
    fs.extend((0..1000).map(|_| libm::exp(rng.unit() * 30.0 - 20.0)));
    for f in fs {
        // Dekker's product is exact: it agrees with the fma-based one.
        for c in super::INV_2PI {
            assert_eq!(super::two_prod(f, c), two_prod(f, c), "two_prod({f}, {c})");
        }
        let (hi, lo) = turns(f);
        // At most 21 significant bits: the low 32 bits of the significand are zero.
        assert_eq!(hi.to_bits() & 0xFFFF_FFFF, 0, "hi of {f} has more than 21 bits");
        assert!(hi.abs() <= 0.5, "hi of {f} not reduced: {hi}");
        assert!(lo.abs() <= hi.abs() * (1.0 / (1u64 << 20) as f64), "lo of {f}: {lo} vs {hi}");
        // p * hi is exact for the largest position.
        let p = f64::from(u32::MAX);
        assert_eq!(libm::fma(p, hi, -(p * hi)), 0.0, "u32::MAX * hi of {f} is inexact");
        // hi + lo is inv_freq / 2π mod 1: cos and sin of 2π(hi + lo) against the reference.
        if f <= 1e3 {
            let r = ref_cos_sin(f, 0.0);
            let (c, s) = cos_sin(Scalar, 1.0, hi, lo);
            assert!((c - r.0).abs() <= F64_BOUND && (s - r.1).abs() <= F64_BOUND, "turns of {f}");
        }
    }
    // The slice form fills the same values.
    let f = [0.25, 1e-3, 3.0];
    let (mut hi, mut lo) = ([0.0; 3], [0.0; 3]);
    split_turns(&f, &mut hi, &mut lo);
    for i in 0..3 {
        assert_eq!((hi[i], lo[i]), turns(f[i]));
    }
    // The HfCompatible constant: 29 significant bits, so its product with any f32 is exact.
    assert_eq!(HF_TURNS.0.to_bits() & 0xFF_FFFF, 0);
    assert!(HF_TURNS.1.abs() <= HF_TURNS.0 / (1u64 << 28) as f64);
    assert_eq!(libm::fma(f64::from(f32::MAX), HF_TURNS.0, -(f64::from(f32::MAX) * HF_TURNS.0)), 0.0);
}

#[test]
#[cfg_attr(miri, ignore = "arithmetic only: runs natively and under qemu")]
fn polynomials_within_bound() {
    let n: i64 = if cfg!(miri) { 200 } else { 400_000 };
    let (mut es, mut ec) = (0.0f64, 0.0f64);
    for j in -n..=n {
        let x = j as f64 / (2 * n) as f64;
        let (s, c) = poly(Scalar, x);
        let a = x * core::f64::consts::FRAC_PI_2;
        es = es.max((s - libm::sin(a)).abs());
        ec = ec.max((c - libm::cos(a)).abs());
    }
    println!("polynomial max error: sin {es:.3e}, cos {ec:.3e}");
    // Minimax errors 1.694e-12 and 6.16e-14, plus evaluation and reference rounding.
    assert!(es <= 1.70e-12, "sin polynomial error {es:e}");
    assert!(ec <= 6.2e-14, "cos polynomial error {ec:e}");
}

#[test]
#[cfg_attr(miri, ignore = "arithmetic only: runs natively and under qemu")]
fn exact_mode_accuracy() {
    let positions = positions(sample_size());
    let (e32, e64) = max_errors(&positions, 1 << 32, &generator_row, Some(&generator_f64));
    println!(
        "exact mode, {} positions x 192 frequencies: max error f64 {e64:.3e}, f32 rows {e32:.3e}",
        positions.len()
    );
    assert!(e64 <= F64_BOUND, "f64 error {e64:e} exceeds the documented bound");
    assert!(e32 <= F32_HALF_ULP + F64_BOUND, "f32 error {e32:e} exceeds the documented bound");
    assert!(e32 <= TARGET);
}

#[test]
#[cfg_attr(miri, ignore = "arithmetic only: runs natively and under qemu")]
fn accuracy_check_fails_on_naive_f32_angle() {
    // The test of the test: the same check applied to the naive generator (angle formed as
    // f32(p) * f32(inv_freq), then an accurate cos/sin of that f32 angle) must fail.
    let positions = positions(sample_size());
    let naive = |freqs: &Frequencies, p: u32, c: &mut [f32], s: &mut [f32]| {
        for (i, &f) in freqs.inv_freq().iter().enumerate() {
            let a = f64::from(p as f32 * f as f32);
            c[i] = libm::cos(a) as f32;
            s[i] = libm::sin(a) as f32;
        }
    };
    let (e32, _) = max_errors(&positions, 1 << 31, &naive, None);
    println!("naive f32 angle: max error {e32:.3e}");
    assert!(e32 > TARGET, "the accuracy check does not catch a naive f32 angle ({e32:e})");
    // Even below 2^17 it is far off (the issue quotes ~4e-3 at 131072).
    let (e17, _) = max_errors(&positions, 1 << 17, &naive, None);
    assert!(e17 > 1e-3, "naive error below 2^17: {e17:e}");
    // The former libm path, for comparison (its f64 product loses accuracy above 2^24).
    let libm_row = |freqs: &Frequencies, p: u32, c: &mut [f32], s: &mut [f32]| {
        fill_row_libm(freqs, AngleMode::Exact, p, c, s);
    };
    let (el, _) = max_errors(&positions[positions.len() / 2..], 1 << 32, &libm_row, None);
    println!("former libm path: max error {el:.3e}");
}

#[test]
#[cfg_attr(miri, ignore = "arithmetic only: runs natively and under qemu")]
fn hf_mode_accuracy_of_the_f32_angle() {
    // HfCompatible: cos/sin of the f32 angle itself, to the same bound.
    let positions = positions(sample_size() / 4);
    let mut worst = (0.0f64, 0.0f64);
    for theta in [1e4, 5e5, 1e6] {
        let freqs = frequencies(theta, 128);
        let inputs = RowInputs::new(&freqs.view(), AngleMode::HfCompatible);
        let (mut c, mut s) = ([0.0f32; 64], [0.0f32; 64]);
        for &p in &positions {
            crate::kernels::scalar::sincos::fill_row(&inputs, p, &mut c, &mut s);
            for (i, &g) in freqs.inv_freq_f32().iter().enumerate() {
                let a = f64::from(p as f32 * g);
                let (rc, rs) = ref_cos_sin(a, 0.0);
                let (vc, vs) = cos_sin(Scalar, a, HF_TURNS.0, HF_TURNS.1);
                worst.0 = worst.0.max((vc - rc).abs()).max((vs - rs).abs());
                worst.1 = worst.1.max((f64::from(c[i]) - rc).abs()).max((f64::from(s[i]) - rs).abs());
            }
        }
    }
    println!("hf mode vs cos/sin of the f32 angle: f64 {:.3e}, f32 {:.3e}", worst.0, worst.1);
    assert!(worst.0 <= F64_BOUND);
    assert!(worst.1 <= F32_HALF_ULP + F64_BOUND);
}

#[test]
fn hf_mode_clamps_huge_angles() {
    // rotary_dim 10: no exponent 2i/10 is 1/2, where libm's pow calls its x86 sqrt (inline
    // assembly, which Miri cannot run).
    let mut freqs = frequencies(1e4, 10);
    // The largest accepted value (2^95, see `Frequencies::set_inv_freq_f32`) first; built
    // by an exact conversion, not `powi`, which Miri may perturb by an ulp.
    freqs.set_inv_freq_f32(&[(1u128 << 95) as f32, 1e28, 3e14, 0.0, 2.5e5]).unwrap();
    assert!(freqs.clone().set_inv_freq_f32(&[f32::MAX, 1.0, 1.0, 0.0, 1.0]).is_err());
    let inputs = RowInputs::new(&freqs.view(), AngleMode::HfCompatible);
    let (mut c, mut s) = ([9.0f32; 5], [9.0f32; 5]);
    for p in [u32::MAX, 1 << 20, 1] {
        crate::kernels::scalar::sincos::fill_row(&inputs, p, &mut c, &mut s);
        for i in 0..5 {
            assert!(c[i].abs() <= 1.0 && s[i].abs() <= 1.0, "position {p}, pair {i}: {} {}", c[i], s[i]);
        }
        // An angle above the clamp gives the values of the clamp.
        let (cc, sc) = cos_sin(Scalar, HF_MAX_ANGLE, HF_TURNS.0, HF_TURNS.1);
        assert_eq!((c[0], s[0]), (cc as f32, sc as f32));
    }
}

#[test]
#[cfg_attr(miri, ignore = "arithmetic only: runs natively and under qemu")]
fn hf_mode_accurate_up_to_the_clamp() {
    // f32 angles up to the clamp, log-uniform.
    let mut rng = Rng(5);
    let mut angles = [HF_MAX_ANGLE, (1u64 << 40) as f64, f64::from(3.0e13f32)].to_vec();
    angles
        .extend((0..2000).map(|_| f64::from(libm::ldexp(1.0 + rng.unit(), (rng.next() % 50) as i32) as f32)));
    for a in angles {
        let (rc, rs) = ref_cos_sin(a, 0.0);
        let (cc, sc) = cos_sin(Scalar, a, HF_TURNS.0, HF_TURNS.1);
        // 1.7e-12 (polynomial) + 2π (2^-54 + 3 * 2^-85 |a|) (module docs).
        let bound = 1.7e-12 + core::f64::consts::TAU * (libm::ldexp(1.0, -54) + 3.0 * libm::ldexp(a, -85));
        assert!((cc - rc).abs() <= bound && (sc - rs).abs() <= bound, "angle {a}: bound {bound:e}");
    }
}

#[test]
#[cfg_attr(miri, ignore = "arithmetic only: runs natively and under qemu")]
fn precision_change_against_the_libm_path() {
    // Below 2^20 the former path's f64 product is good to 1.2e-10 rad, so both are within
    // a rounding of the true value: they differ by at most one f32 step of size <= 2^-24.
    let mut rng = Rng(11);
    let n = if cfg!(miri) { 4 } else { 4000 };
    let (mut differ, mut total, mut worst) = (0usize, 0usize, 0.0f64);
    for mode in [AngleMode::Exact, AngleMode::HfCompatible] {
        let freqs = frequencies(1e4, 128);
        let inputs = RowInputs::new(&freqs.view(), mode);
        for _ in 0..n {
            let p = (rng.next() % (1 << 20)) as u32;
            let (mut c0, mut s0, mut c1, mut s1) = ([0f32; 64], [0f32; 64], [0f32; 64], [0f32; 64]);
            fill_row_libm(&freqs, mode, p, &mut c0, &mut s0);
            crate::kernels::scalar::sincos::fill_row(&inputs, p, &mut c1, &mut s1);
            for (a, b) in c0.iter().chain(&s0).zip(c1.iter().chain(&s1)) {
                worst = worst.max((f64::from(*a) - f64::from(*b)).abs());
                differ += usize::from(a != b);
                total += 1;
            }
        }
    }
    println!("new vs libm generator below 2^20: {differ} of {total} values differ, by at most {worst:.3e}");
    assert!(worst <= 1.0 / (1u64 << 24) as f64);
}

#[test]
fn tiers_bit_identical() {
    let mut rng = Rng(0xB17);
    // Inputs beyond the usual range too: inv_freq from 1e-9 to 1e3, inv_freq_f32 up to
    // f32::MAX (the clamp), zeros.
    let mut inv_freq = [0.0f64; MAX_PAIRS];
    let mut inv_freq_f32 = [0.0f32; MAX_PAIRS];
    for i in 0..MAX_PAIRS {
        inv_freq[i] = libm::exp(rng.unit() * 27.0 - 20.7);
        inv_freq_f32[i] = libm::exp(rng.unit() * 90.0 - 20.0) as f32;
    }
    inv_freq[3] = 0.0;
    inv_freq_f32[5] = 0.0;
    inv_freq_f32[6] = f32::MAX;
    let (mut hi, mut lo) = ([0.0f64; MAX_PAIRS], [0.0f64; MAX_PAIRS]);
    split_turns(&inv_freq, &mut hi, &mut lo);
    let special = [0, 1, (1 << 24) - 1, 1 << 24, (1 << 24) + 1, (1 << 31) - 1, 1 << 31, u32::MAX];
    let mut positions: Vec<u32> = special.to_vec();
    positions.extend((0..8).map(|_| rng.next() as u32));
    let pair_counts: Vec<usize> = if cfg!(miri) { [1, 7, 9, 17].to_vec() } else { (1..=MAX_PAIRS).collect() };
    let factors: &[f64] = if cfg!(miri) { &[1.2345678901234] } else { &[1.0, 1.2345678901234, 0.0625] };
    const CANARY: f32 = -7.5;
    for tier in ALL_TIERS.into_iter().filter(|t| *t != Tier::Scalar) {
        let Some(f) = sincos_fn(tier) else {
            println!("sincos: skipping tier {tier}: not in this build or on this CPU");
            continue;
        };
        let mut rows = 0usize;
        for (j, &pairs) in pair_counts.iter().enumerate() {
            for mode in [AngleMode::Exact, AngleMode::HfCompatible] {
                for &af in factors {
                    let inputs = RowInputs {
                        mode,
                        turns_hi: &hi[..pairs],
                        turns_lo: &lo[..pairs],
                        inv_freq_f32: &inv_freq_f32[..pairs],
                        attention_factor: af,
                    };
                    // Every position for a few pair counts, two of them for the others.
                    let ps: Vec<u32> = if cfg!(miri) {
                        [positions[j], u32::MAX].to_vec()
                    } else if j % 16 == 0 || pairs <= 17 {
                        positions.clone()
                    } else {
                        [positions[j % positions.len()], positions[(j * 7 + 3) % positions.len()]].to_vec()
                    };
                    for p in ps {
                        let (mut c0, mut s0) = ([0.0f32; MAX_PAIRS], [0.0f32; MAX_PAIRS]);
                        crate::kernels::scalar::sincos::fill_row(
                            &inputs,
                            p,
                            &mut c0[..pairs],
                            &mut s0[..pairs],
                        );
                        // Canaries on both sides of the output slices.
                        let (mut c1, mut s1) = ([CANARY; MAX_PAIRS + 16], [CANARY; MAX_PAIRS + 16]);
                        // SAFETY: `f` comes from `sincos_fn`, which checked the CPU.
                        unsafe { f(&inputs, p, &mut c1[8..8 + pairs], &mut s1[8..8 + pairs]) };
                        for i in 0..pairs {
                            assert_eq!(
                                (c0[i].to_bits(), s0[i].to_bits()),
                                (c1[8 + i].to_bits(), s1[8 + i].to_bits()),
                                "tier {tier}, {mode:?}, af {af}, pairs {pairs}, position {p}, pair {i}"
                            );
                        }
                        let mut outside =
                            c1[..8].iter().chain(&c1[8 + pairs..]).chain(&s1[..8]).chain(&s1[8 + pairs..]);
                        assert!(outside.all(|&x| x == CANARY), "tier {tier} wrote outside the row");
                        rows += 1;
                    }
                }
            }
        }
        println!("sincos: tier {tier} bit-identical to scalar on {rows} rows");
    }
}

#[test]
fn apply_paths_agree() {
    use crate::{ApplyOptions, HeadsMut, Rope, View};
    // On the fly, from a cache and from fill_table: the same generator, the same bits.
    for mode in [AngleMode::Exact, AngleMode::HfCompatible] {
        let rope = Rope::new(RopeConfig::new(32, 5e5).with_rotary_dim(22).with_angle_mode(mode)).unwrap();
        let cache = rope.build_cache(40).unwrap();
        let mut x0: Vec<f32> = (0..3 * 2 * 32).map(|i| ((i * 37 % 101) as f32 - 50.0) / 50.0).collect();
        let mut x1 = x0.clone();
        let view = View::token_major(3, 2, 32);
        rope.apply(HeadsMut::new(&mut x0, view), &ApplyOptions::start(37)).unwrap();
        rope.apply(HeadsMut::new(&mut x1, view), &ApplyOptions::start(37).with_table(cache.table())).unwrap();
        assert!(x0.iter().zip(&x1).all(|(a, b)| a.to_bits() == b.to_bits()));
        let (mut c, mut s) = ([0.0f32; 11], [0.0f32; 11]);
        rope.fill_table(39, &mut c, &mut s).unwrap();
        let (cr, sr) = cache.table().row(39).unwrap();
        assert_eq!((&c[..], &s[..]), (cr, sr));
        let (mut c2, mut s2) = ([0.0f32; 11], [0.0f32; 11]);
        SinCos::of(crate::dispatch::kernels_for(rope.tier()).unwrap()).fill(
            &RowInputs::new(&rope.frequencies().view(), mode),
            39,
            &mut c2,
            &mut s2,
        );
        assert_eq!((c, s), (c2, s2));
    }
}
