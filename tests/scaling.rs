//! Scaling methods: the acceptance checks of issue 4 and every parameter error.
// Pair-indexed loops over several parallel arrays read best with the index.
#![allow(clippy::needless_range_loop)]

use rope_kernels::{
    AngleMode, ApplyOptions, Frequencies, HeadsMut, LongRopeParams, PairLayout, Rope, RopeConfig, RopeError,
    Scaling, View, YarnParams, MAX_PAIRS,
};

fn freqs(head_dim: usize, theta: f64, scaling: Scaling, seq_len: u64) -> Frequencies {
    Frequencies::new(&RopeConfig::new(head_dim, theta).with_scaling(scaling), seq_len).unwrap()
}

/// `b_i = theta^(-2i/d)`, computed here independently of the crate.
fn unscaled(d: usize, theta: f64) -> Vec<f64> {
    (0..d / 2).map(|i| 1.0 / theta.powf((2 * i) as f64 / d as f64)).collect()
}

fn rel(a: f64, b: f64) -> f64 {
    ((a - b) / b).abs()
}

fn err(name: &'static str) -> RopeError {
    RopeError::InvalidScalingParameter { name }
}

fn test_input(tokens: usize, heads: usize, head_dim: usize) -> Vec<f32> {
    (0..tokens * heads * head_dim).map(|i| ((i * 7919 % 1000) as f32 / 500.0) - 1.0).collect()
}

fn apply(rope: &Rope, x: &[f32], heads: usize, positions: &[u32]) -> Vec<f32> {
    let mut out = x.to_vec();
    let view = View::token_major(positions.len(), heads, rope.config().head_dim);
    rope.apply(HeadsMut::new(&mut out, view), &ApplyOptions::ids(positions)).unwrap();
    out
}

// ---------------------------------------------------------------------------------------
// Llama 3.1

fn llama31() -> Scaling {
    Scaling::Llama3 {
        factor: 8.0,
        low_freq_factor: 1.0,
        high_freq_factor: 4.0,
        original_max_position_embeddings: 8192,
    }
}

#[test]
fn llama3_band_edges() {
    let f = freqs(128, 500_000.0, llama31(), 0);
    let base = freqs(128, 500_000.0, Scaling::None, 0);
    let (inv, b) = (f.inv_freq(), base.inv_freq());
    assert_eq!(inv.len(), 64);
    for i in 0..=28 {
        assert_eq!(inv[i], b[i], "pair {i} must be unchanged");
    }
    for i in 29..=34 {
        assert!(inv[i] < b[i] && inv[i] > b[i] / 8.0, "pair {i} must be smoothed: {} vs {}", inv[i], b[i]);
        // s = (8192 / wavelen - 1) / (4 - 1), inv = (1 - s) b / 8 + s b.
        let s = (8192.0 * b[i] / (2.0 * std::f64::consts::PI) - 1.0) / 3.0;
        assert!(rel(inv[i], (1.0 - s) * b[i] / 8.0 + s * b[i]) < 1e-14, "pair {i}");
    }
    for i in 35..64 {
        assert_eq!(inv[i], b[i] / 8.0, "pair {i} must be divided by 8");
    }
    assert_eq!(f.attention_factor(), 1.0);
}

// ---------------------------------------------------------------------------------------
// YaRN

#[test]
fn yarn_truncate_false_bounds_and_attention_factor() {
    let p = YarnParams::new(32.0, 4096).with_truncate(false);
    let (low, high) = p.correction_range(64, 150_000.0);
    assert!((low - 8.0928).abs() < 5e-5, "low {low}");
    assert!((high - 17.3980).abs() < 5e-5, "high {high}");
    let f = freqs(64, 150_000.0, Scaling::Yarn(p), 0);
    assert!((f.attention_factor() - 1.3465736).abs() < 5e-8, "{}", f.attention_factor());

    // Black box: recover the ramp from inv_freq, ramp_i = (b_i - inv_i) / (b_i - b_i / 32),
    // which is (i - low) / (high - low) inside the band.
    let b = unscaled(64, 150_000.0);
    let ramp: Vec<f64> = (0..32).map(|i| (b[i] - f.inv_freq()[i]) / (b[i] - b[i] / 32.0)).collect();
    let slope = ramp[10] - ramp[9];
    let (low_seen, high_seen) = (9.0 - ramp[9] / slope, 9.0 + (1.0 - ramp[9]) / slope);
    assert!((low_seen - 8.0928).abs() < 5e-5 && (high_seen - 17.3980).abs() < 5e-5, "{low_seen} {high_seen}");
    for i in 0..=8 {
        assert!(ramp[i].abs() < 1e-12, "pair {i} extrapolated");
    }
    for i in 18..32 {
        assert!((ramp[i] - 1.0).abs() < 1e-12, "pair {i} interpolated");
    }

    // With truncation (the default) the bounds are whole: floor 8, ceil 18.
    let t = YarnParams::new(32.0, 4096);
    assert_eq!(t.correction_range(64, 150_000.0), (8.0, 18.0));
    let ft = freqs(64, 150_000.0, Scaling::Yarn(t), 0);
    assert!((((b[9] - ft.inv_freq()[9]) / (b[9] - b[9] / 32.0)) - 0.1).abs() < 1e-12);
}

#[test]
fn yarn_explicit_attention_factor_is_verbatim() {
    for af in [0.8123456789, 1.0, 2.5] {
        let p = YarnParams::new(4.0, 32768).with_attention_factor(af).with_mscale(1.0, 0.5);
        assert_eq!(p.attention_factor(), af);
        assert_eq!(freqs(128, 1e6, Scaling::Yarn(p), 0).attention_factor(), af);
    }
}

#[test]
fn yarn_mscale_equal_to_mscale_all_dim_gives_exactly_one() {
    // DeepSeek-V2: factor 40, mscale = mscale_all_dim = 0.707.
    let p = YarnParams::new(40.0, 4096).with_mscale(0.707, 0.707);
    assert_eq!(freqs(64, 10_000.0, Scaling::Yarn(p), 0).attention_factor(), 1.0);
    // Unequal: the ratio of the two mscales.
    let p = YarnParams::new(40.0, 4096).with_mscale(1.0, 0.707);
    let m = |k: f64| 0.1 * k * 40f64.ln() + 1.0;
    assert!(rel(p.attention_factor(), m(1.0) / m(0.707)) < 1e-15);
    // mscale 0 counts as absent (transformers' truthiness): 0.1 ln(s) + 1.
    let p = YarnParams::new(40.0, 4096).with_mscale(0.0, 0.707);
    assert!(rel(p.attention_factor(), m(1.0)) < 1e-15);
    // No extension, no scaling of the attention.
    assert_eq!(YarnParams::new(1.0, 4096).attention_factor(), 1.0);
}

// ---------------------------------------------------------------------------------------
// Sequence-length dependent methods: no state between calls

#[test]
fn dynamic_ntk_returns_to_original_after_a_long_call() {
    let d = 64;
    let dynamic = Rope::new(
        RopeConfig::new(d, 10_000.0)
            .with_scaling(Scaling::DynamicNtk { factor: 2.0, max_position_embeddings: 2048 }),
    )
    .unwrap();
    let plain = Rope::new(RopeConfig::new(d, 10_000.0)).unwrap();
    let x = test_input(4, 2, d);
    let short = [0u32, 1, 100, 2047];
    let long = [0u32, 1, 100, 8191];

    let before = apply(&dynamic, &x, 2, &short);
    assert_eq!(before, apply(&plain, &x, 2, &short), "L = 2048 uses the original frequencies");
    let grown = apply(&dynamic, &x, 2, &long);
    assert_ne!(grown, apply(&plain, &x, 2, &long), "L = 8192 > 2048 must scale");
    let after = apply(&dynamic, &x, 2, &short);
    assert_eq!(after, before, "a short call after a long one is back to the original frequencies");

    // The grown base: theta * (2 * 8192 / 2048 - 1)^(64 / 62).
    let f = dynamic.frequencies_at(8192).unwrap();
    let base = 10_000.0 * 7f64.powf(64.0 / 62.0);
    for (i, v) in f.inv_freq().iter().enumerate() {
        assert!(rel(*v, base.powf(-(2.0 * i as f64) / 64.0)) < 1e-13, "pair {i}");
    }
    assert_eq!(dynamic.frequencies_at(2048).unwrap().inv_freq(), plain.frequencies().inv_freq());
}

fn longrope_params(pairs: usize) -> LongRopeParams {
    let short: Vec<f64> = (0..pairs).map(|i| 1.0 + i as f64 * 0.01).collect();
    let long: Vec<f64> = (0..pairs).map(|i| 1.0 + i as f64 * 0.5).collect();
    LongRopeParams::new(&short, &long, 4096, 32.0).unwrap()
}

#[test]
fn longrope_short_at_original_long_past_it() {
    let d = 96;
    let p = longrope_params(d / 2);
    let rope = Rope::new(RopeConfig::new(d, 10_000.0).with_scaling(Scaling::LongRope(p.clone()))).unwrap();
    let b = unscaled(d, 10_000.0);
    let at = rope.frequencies_at(4096).unwrap();
    let past = rope.frequencies_at(4097).unwrap();
    for i in 0..d / 2 {
        assert!(rel(at.inv_freq()[i], b[i] / p.short_factor.as_slice()[i]) < 1e-14, "short, pair {i}");
        assert!(rel(past.inv_freq()[i], b[i] / p.long_factor.as_slice()[i]) < 1e-14, "long, pair {i}");
    }
    let af = (1.0 + 32f64.ln() / 4096f64.ln()).sqrt();
    assert!(rel(at.attention_factor(), af) < 1e-15 && rel(past.attention_factor(), af) < 1e-15);

    // Through apply: a call whose largest position is 4095 (L = 4096) uses the short
    // factors, one reaching 4096 (L = 4097) the long ones, whatever came before.
    let x = test_input(1, 1, d);
    let expect = |inv: &[f64], pos: f64| -> Vec<f64> {
        let mut y: Vec<f64> = x.iter().map(|v| f64::from(*v)).collect();
        for i in 0..d / 2 {
            let (c, s) = ((pos * inv[i]).cos() * af, (pos * inv[i]).sin() * af);
            let (x0, x1) = (f64::from(x[i]), f64::from(x[i + d / 2]));
            y[i] = x0 * c - x1 * s;
            y[i + d / 2] = x1 * c + x0 * s;
        }
        y
    };
    let max_err =
        |a: &[f32], b: &[f64]| a.iter().zip(b).map(|(p, q)| (f64::from(*p) - q).abs()).fold(0.0, f64::max);
    for _ in 0..2 {
        let short_out = apply(&rope, &x, 1, &[4095]);
        assert!(max_err(&short_out, &expect(at.inv_freq(), 4095.0)) < 1e-6);
        assert!(max_err(&short_out, &expect(past.inv_freq(), 4095.0)) > 1e-2);
        let long_out = apply(&rope, &x, 1, &[4096]);
        assert!(max_err(&long_out, &expect(past.inv_freq(), 4096.0)) < 1e-6);
    }
}

#[test]
fn longrope_table_uses_the_length_it_covers() {
    let d = 96;
    let rope =
        Rope::new(RopeConfig::new(d, 10_000.0).with_scaling(Scaling::LongRope(longrope_params(d / 2))))
            .unwrap();
    let x = test_input(1, 2, d);
    // A table of 4097 rows covers L = 4097: long factors, as an on-the-fly call at 4096.
    let mut cos = vec![0.0; 4097 * d / 2];
    let mut sin = cos.clone();
    rope.fill_table(0, &mut cos, &mut sin).unwrap();
    let table = rope_kernels::CosSinTable::new(&cos, &sin, d / 2).unwrap();
    let mut via_table = x.clone();
    rope.apply(
        HeadsMut::new(&mut via_table, View::token_major(1, 2, d)),
        &ApplyOptions::ids(&[4096]).with_table(table),
    )
    .unwrap();
    assert_eq!(via_table, apply(&rope, &x, 2, &[4096]));
}

#[test]
fn caller_table_persists_for_dynamic_and_longrope() {
    let d = 64;
    let table: Vec<f32> = (0..d / 2).map(|i| 0.9f32.powi(i as i32)).collect();
    for scaling in [
        Scaling::DynamicNtk { factor: 2.0, max_position_embeddings: 2048 },
        Scaling::LongRope(longrope_params(d / 2)),
    ] {
        let rope = Rope::new(RopeConfig::new(d, 10_000.0).with_scaling(scaling))
            .unwrap()
            .with_hf_inv_freq(&table)
            .unwrap();
        assert_eq!(rope.config().angle_mode, AngleMode::HfCompatible);
        for seq_len in [1, 2048, 4097, 100_000] {
            let f = rope.frequencies_at(seq_len).unwrap();
            assert_eq!(f.inv_freq_f32(), &table[..]);
            assert!(f.has_caller_inv_freq_f32());
        }
        // Output: angle f32(p) * table[i] in f32.
        let x = test_input(1, 1, d);
        let p = 9000u32;
        let out = apply(&rope, &x, 1, &[p]);
        let af = rope.frequencies_at(9001).unwrap().attention_factor();
        for i in 0..d / 2 {
            let angle = f64::from(p as f32 * table[i]);
            let (c, s) = ((angle.cos() * af) as f32, (angle.sin() * af) as f32);
            assert_eq!(out[i], x[i] * c - x[i + d / 2] * s, "pair {i}");
        }
    }
}

#[test]
fn hf_inv_freq_errors() {
    let rope = Rope::new(RopeConfig::new(64, 10_000.0)).unwrap();
    assert_eq!(
        rope.clone().with_hf_inv_freq(&[1.0; 31]).unwrap_err(),
        RopeError::InvFreqLength { expected: 32, len: 31 }
    );
    assert_eq!(
        rope.clone().with_hf_inv_freq(&[1.0; 33]).unwrap_err(),
        RopeError::InvFreqLength { expected: 32, len: 33 }
    );
    for bad in [f32::NAN, f32::INFINITY, -1.0] {
        let mut t = [0.5f32; 32];
        t[7] = bad;
        assert_eq!(rope.clone().with_hf_inv_freq(&t).unwrap_err(), err("inv_freq"));
    }
    let mut f = rope.frequencies().clone();
    let before = f.clone();
    assert!(f.set_inv_freq_f32(&[f32::NAN; 32]).is_err());
    assert_eq!(f, before, "a failed set changes nothing");
}

// ---------------------------------------------------------------------------------------
// The other methods

#[test]
fn linear_divides_every_frequency() {
    let f = freqs(128, 10_000.0, Scaling::Linear { factor: 4.0 }, 0);
    let b = freqs(128, 10_000.0, Scaling::None, 0);
    for (x, y) in f.inv_freq().iter().zip(b.inv_freq()) {
        assert_eq!(*x, y / 4.0);
    }
}

#[test]
fn ntk_alpha_scales_the_base() {
    // HunYuan: alpha 1000, head_dim 128.
    let f = freqs(128, 10_000.0, Scaling::NtkAlpha { alpha: 1000.0 }, 0);
    let base = 10_000.0 * 1000f64.powf(128.0 / 126.0);
    for (i, v) in f.inv_freq().iter().enumerate() {
        assert!(rel(*v, base.powf(-(2.0 * i as f64) / 128.0)) < 1e-13, "pair {i}");
    }
    assert_eq!(f.attention_factor(), 1.0);
    // Static: the same at every length.
    assert!(!Scaling::NtkAlpha { alpha: 2.0 }.depends_on_seq_len());
}

#[test]
fn proportional_zeroes_the_tail() {
    // Gemma 4 global layers: head_dim 128 rotated over its whole width, 1/4 of the pairs live.
    let scaling = Scaling::Proportional { factor: 2.0, partial_rotary_factor: 0.25 };
    let f = freqs(128, 1e6, scaling.clone(), 0);
    let b = unscaled(128, 1e6);
    for i in 0..64 {
        if i < 16 {
            assert!(rel(f.inv_freq()[i], b[i] / 2.0) < 1e-15, "pair {i}");
        } else {
            assert_eq!(f.inv_freq()[i], 0.0, "pair {i}");
        }
    }
    let rope = Rope::new(RopeConfig::new(128, 1e6).with_scaling(scaling)).unwrap();
    let x = test_input(1, 1, 128);
    let out = apply(&rope, &x, 1, &[12345]);
    for i in 16..64 {
        assert_eq!((out[i], out[i + 64]), (x[i], x[i + 64]), "pair {i} is the identity");
    }
    assert_ne!(out[0], x[0]);
}

#[test]
fn freq_factors_divide_per_pair() {
    let ff: Vec<f64> = (0..32).map(|i| 1.0 + i as f64).collect();
    let f = freqs(64, 10_000.0, Scaling::freq_factors(&ff).unwrap(), 0);
    let b = freqs(64, 10_000.0, Scaling::None, 0);
    for i in 0..32 {
        assert_eq!(f.inv_freq()[i], b.inv_freq()[i] / ff[i]);
    }
}

#[test]
fn names() {
    assert_eq!(Scaling::None.name(), "default");
    assert_eq!(llama31().name(), "llama3");
    assert_eq!(Scaling::Yarn(YarnParams::new(2.0, 8)).name(), "yarn");
    assert_eq!(Scaling::LongRope(longrope_params(2)).name(), "longrope");
    assert!(Scaling::LongRope(longrope_params(2)).depends_on_seq_len());
    assert!(Scaling::DynamicNtk { factor: 2.0, max_position_embeddings: 8 }.depends_on_seq_len());
    assert!(!llama31().depends_on_seq_len());
}

// ---------------------------------------------------------------------------------------
// Parameter errors: each is the named error from validate, Frequencies::new and Rope::new.

fn check(d: usize, theta: f64, scaling: Scaling, want: &'static str) {
    assert_eq!(scaling.validate(d), Err(err(want)), "{scaling:?}");
    let config = RopeConfig::new(d, theta).with_scaling(scaling);
    assert_eq!(Frequencies::new(&config, 0).unwrap_err(), err(want));
    assert_eq!(Rope::new(config).unwrap_err(), err(want));
}

const BAD: [f64; 5] = [0.0, -1.0, f64::NAN, f64::INFINITY, f64::NEG_INFINITY];

#[test]
fn linear_and_ntk_errors() {
    for v in BAD {
        check(64, 1e4, Scaling::Linear { factor: v }, "factor");
        check(64, 1e4, Scaling::DynamicNtk { factor: v, max_position_embeddings: 2048 }, "factor");
        check(64, 1e4, Scaling::NtkAlpha { alpha: v }, "alpha");
    }
    check(
        64,
        1e4,
        Scaling::DynamicNtk { factor: 2.0, max_position_embeddings: 0 },
        "max_position_embeddings",
    );
    check(2, 1e4, Scaling::DynamicNtk { factor: 2.0, max_position_embeddings: 8 }, "rotary_dim");
    check(2, 1e4, Scaling::NtkAlpha { alpha: 2.0 }, "rotary_dim");
}

#[test]
fn yarn_errors() {
    let y = || YarnParams::new(4.0, 4096);
    for v in BAD {
        check(64, 1e4, Scaling::Yarn(YarnParams::new(v, 4096)), "factor");
        check(64, 1e4, Scaling::Yarn(y().with_beta(v, 1.0)), "beta_fast");
        check(64, 1e4, Scaling::Yarn(y().with_beta(32.0, v)), "beta_slow");
        check(64, 1e4, Scaling::Yarn(y().with_attention_factor(v)), "attention_factor");
    }
    check(64, 1e4, Scaling::Yarn(YarnParams::new(4.0, 0)), "original_max_position_embeddings");
    check(64, 1e4, Scaling::Yarn(y().with_beta(1.0, 1.0)), "beta_fast");
    check(64, 1e4, Scaling::Yarn(y().with_beta(1.0, 32.0)), "beta_fast");
    check(64, 1e4, Scaling::Yarn(y().with_mscale(f64::NAN, 1.0)), "mscale");
    check(64, 1e4, Scaling::Yarn(y().with_mscale(1.0, f64::INFINITY)), "mscale_all_dim");
    // 0.1 * mscale_all_dim * ln(e^10) + 1 = 0: the ratio would be infinite.
    let e10 = 10f64.exp();
    check(64, 1e4, Scaling::Yarn(YarnParams::new(e10, 4096).with_mscale(1.0, -1.0)), "mscale_all_dim");
    // ln(theta) = 0 in the correction range.
    let config = RopeConfig::new(64, 1.0).with_scaling(Scaling::Yarn(y()));
    assert_eq!(Rope::new(config).unwrap_err(), err("rope_theta"));
}

#[test]
fn llama3_errors() {
    let l = |factor, low, high, orig| Scaling::Llama3 {
        factor,
        low_freq_factor: low,
        high_freq_factor: high,
        original_max_position_embeddings: orig,
    };
    for v in BAD {
        check(128, 5e5, l(v, 1.0, 4.0, 8192), "factor");
        check(128, 5e5, l(8.0, v, 4.0, 8192), "low_freq_factor");
    }
    check(128, 5e5, l(8.0, 1.0, f64::NAN, 8192), "high_freq_factor");
    check(128, 5e5, l(8.0, 1.0, f64::INFINITY, 8192), "high_freq_factor");
    check(128, 5e5, l(8.0, 4.0, 1.0, 8192), "low_freq_factor");
    check(128, 5e5, l(8.0, 1.0, 4.0, 0), "original_max_position_embeddings");
}

#[test]
fn longrope_errors() {
    let p = || longrope_params(48);
    let with = |f: &dyn Fn(&mut LongRopeParams)| {
        let mut q = p();
        f(&mut q);
        Scaling::LongRope(q)
    };
    check(96, 1e4, Scaling::LongRope(longrope_params(47)), "short_factor");
    check(64, 1e4, Scaling::LongRope(longrope_params(48)), "short_factor");
    let mut long47 = p();
    long47.long_factor = rope_kernels::PairFactors::from_slice(&[1.0; 47]).unwrap();
    check(96, 1e4, Scaling::LongRope(long47), "long_factor");
    for v in BAD {
        let mut s = p().short_factor.as_slice().to_vec();
        s[20] = v;
        let mut l = p().long_factor.as_slice().to_vec();
        l[47] = v;
        check(
            96,
            1e4,
            Scaling::LongRope(LongRopeParams::new(&s, p().long_factor.as_slice(), 4096, 32.0).unwrap()),
            "short_factor",
        );
        check(
            96,
            1e4,
            Scaling::LongRope(LongRopeParams::new(p().short_factor.as_slice(), &l, 4096, 32.0).unwrap()),
            "long_factor",
        );
        check(96, 1e4, with(&|q| q.factor = v), "factor");
        check(96, 1e4, with(&|q| q.attention_factor = Some(v)), "attention_factor");
    }
    check(96, 1e4, with(&|q| q.original_max_position_embeddings = 0), "original_max_position_embeddings");
    // ln(1) = 0 in the derived attention factor.
    check(96, 1e4, with(&|q| q.original_max_position_embeddings = 1), "original_max_position_embeddings");
    let too_long = vec![1.0; MAX_PAIRS + 1];
    assert_eq!(LongRopeParams::new(&too_long, &[1.0], 8, 2.0).unwrap_err(), err("short_factor"));
    assert_eq!(LongRopeParams::new(&[1.0], &too_long, 8, 2.0).unwrap_err(), err("long_factor"));
}

#[test]
fn proportional_and_freq_factor_errors() {
    for v in BAD {
        check(64, 1e4, Scaling::Proportional { factor: v, partial_rotary_factor: 0.5 }, "factor");
        check(
            64,
            1e4,
            Scaling::Proportional { factor: 1.0, partial_rotary_factor: v },
            "partial_rotary_factor",
        );
        let mut ff = vec![1.0; 32];
        ff[3] = v;
        check(64, 1e4, Scaling::freq_factors(&ff).unwrap(), "freq_factors");
    }
    check(
        64,
        1e4,
        Scaling::Proportional { factor: 1.0, partial_rotary_factor: 1.5 },
        "partial_rotary_factor",
    );
    check(64, 1e4, Scaling::freq_factors(&[1.0; 31]).unwrap(), "freq_factors");
    check(64, 1e4, Scaling::freq_factors(&[]).unwrap(), "freq_factors");
    assert_eq!(Scaling::freq_factors(&vec![1.0; MAX_PAIRS + 1]).unwrap_err(), err("freq_factors"));
}

#[test]
fn error_display_names_the_parameter() {
    assert_eq!(err("beta_fast").to_string(), "invalid rope scaling parameter `beta_fast`");
    assert_eq!(
        RopeError::InvFreqLength { expected: 64, len: 3 }.to_string(),
        "inv_freq table has 3 entries, expected rotary_dim / 2 = 64"
    );
}

/// Llama 4 Scout: `low_freq_factor == high_freq_factor` has no blend band (HF
/// `_compute_llama3_parameters`): a wavelength above `L_orig / low` is divided by `factor`,
/// every other pair is unchanged, and nothing is NaN.
#[test]
fn llama3_equal_band_factors() {
    let scaling = Scaling::Llama3 {
        factor: 16.0,
        low_freq_factor: 1.0,
        high_freq_factor: 1.0,
        original_max_position_embeddings: 8192,
    };
    let config = RopeConfig::new(128, 5e5).with_layout(PairLayout::Interleaved).with_scaling(scaling);
    let rope = Rope::new(config).unwrap();
    let (mut divided, mut kept) = (0, 0);
    for (i, &v) in rope.frequencies().inv_freq().iter().enumerate() {
        let b = 1.0 / 5e5f64.powf(2.0 * i as f64 / 128.0);
        let want = if 2.0 * std::f64::consts::PI / b > 8192.0 { b / 16.0 } else { b };
        assert!(((v - want) / want).abs() <= 1e-14, "inv_freq[{i}] = {v:e}, want {want:e}");
        if want == b {
            kept += 1;
        } else {
            divided += 1;
        }
    }
    assert!(kept > 0 && divided > 0, "both bands occur ({kept} kept, {divided} divided)");
}
