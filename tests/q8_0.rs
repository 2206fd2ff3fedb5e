//! `q8_0` blocks against a transcription of ggml's reference quantizer,
//! `quantize_row_q8_0_ref` (`ggml/src/ggml-quants.c`): its arithmetic written out again in
//! Rust, step by step, and compared bit for bit with [`quantize_row_q8_0`] and with every
//! tier's convert kernel, both as a plain quantize pass (`cos` empty) and after rotation.
//!
//! ggml's C is undefined where `x * id` leaves the `int8_t` range or is NaN (non-finite
//! inputs, or blocks so small that `1 / d` overflows); those blocks are left out here and
//! tested against the documented choices of `BlockQ8_0` instead.

mod support;

use rand::RngExt;
use rope_kernels::__bench::{convert_rows, ConvertRows};
use rope_kernels::{f16, quantize_row_q8_0, BlockQ8_0, PairLayout, RopeError, Tier};
use support::rng::{rng, TestRng};
use support::tiers::tiers;

/// ggml's `quantize_row_q8_0_ref`, transcribed: per block of 32,
/// `amax = MAX(amax, fabsf(v))` (`MAX(a, b)` is `a > b ? a : b`), `d = amax / ((1 << 7) - 1)`,
/// `id = d ? 1.0f / d : 0.0f`, `y.d = GGML_FP32_TO_FP16(d)` (round to nearest even),
/// `y.qs[j] = roundf(x[j] * id)` (half away from zero). (`from_f32_const`: `half`'s software
/// rounding, which Miri can run whatever the target features.)
fn ggml_quantize_row_q8_0_ref(x: &[f32]) -> Vec<BlockQ8_0> {
    assert_eq!(x.len() % 32, 0);
    x.chunks(32)
        .map(|b| {
            let mut amax = 0.0f32;
            for &v in b {
                amax = if amax > v.abs() { amax } else { v.abs() };
            }
            let d = amax / ((1 << 7) - 1) as f32;
            let id = if d != 0.0 { 1.0 / d } else { 0.0 };
            let mut qs = [0i8; 32];
            for (q, &v) in qs.iter_mut().zip(b) {
                let x0 = v * id;
                let r = x0.round();
                assert!((-128.0..=127.0).contains(&r), "outside ggml's defined range: {r}");
                *q = r as i8;
            }
            BlockQ8_0 { d: f16::from_f32_const(d), qs }
        })
        .collect()
}

/// Whether ggml's C is defined on every block of `x` (finite values, and `1 / d` finite).
fn ggml_defined(x: &[f32]) -> bool {
    x.chunks(32).all(|b| {
        let amax = b.iter().fold(0.0f32, |m, v| m.max(v.abs()));
        b.iter().all(|v| v.is_finite()) && (amax == 0.0 || (1.0 / (amax / 127.0)).is_finite())
    })
}

const BLOCKS: usize = if cfg!(miri) { 4 } else { 64 };
const ROUNDS: usize = if cfg!(miri) { 2 } else { 40 };

/// Random finite values, often exact ties: a block whose maximum is `127 * 2^e` has
/// `d = 2^e`, `id = 2^-e`, so `(k + 0.5) * 2^e` lands on `k + 0.5` exactly.
fn random_row(rng: &mut TestRng, blocks: usize) -> Vec<f32> {
    let mut x = Vec::with_capacity(32 * blocks);
    for _ in 0..blocks {
        let e = rng.random_range(-20i32..=20);
        let scale = f32::powi(2.0, e);
        match rng.random_range(0..4) {
            0 => {
                x.push(127.0 * scale * if rng.random_range(0..2) == 0 { 1.0 } else { -1.0 });
                for _ in 1..32 {
                    x.push((rng.random_range(-127i32..127) as f32 + 0.5) * scale);
                }
            }
            1 => x.extend((0..32).map(|_| 0.0)),
            2 => x.extend((0..32).map(|_| rng.random_range(-1.0f32..1.0) * scale * 1e-30)),
            _ => x.extend((0..32).map(|_| rng.random_range(-1.0f32..1.0) * scale)),
        }
    }
    x
}

#[test]
fn quantize_row_equals_ggml_reference() {
    let mut rng = rng(8_0);
    for _ in 0..ROUNDS {
        let x = random_row(&mut rng, BLOCKS);
        assert!(ggml_defined(&x));
        let mut out = vec![BlockQ8_0::default(); BLOCKS];
        quantize_row_q8_0(&x, &mut out).unwrap();
        assert_eq!(out, ggml_quantize_row_q8_0_ref(&x));
    }
}

/// A flat quantize pass through `convert_rows`: one head of all the values, no rotation.
fn convert_pass(tier: Tier, x: &[f32], cos: &[f32], sin: &[f32], layout: PairLayout) -> Vec<BlockQ8_0> {
    let head_dim = if cos.is_empty() { x.len() } else { 2 * cos.len() };
    let tokens = x.len() / head_dim;
    let mut out = vec![BlockQ8_0::default(); x.len() / 32];
    let units = head_dim / 32;
    let r = ConvertRows {
        tokens,
        heads: 1,
        head_dim,
        src_token_stride: head_dim,
        src_head_stride: head_dim,
        dst_token_stride: units,
        dst_head_stride: units,
    };
    convert_rows(tier, x, &mut out, r, cos, sin, layout, false).unwrap();
    out
}

#[test]
fn convert_kernels_equal_ggml_reference() {
    let mut rng = rng(8_1);
    for tier in tiers() {
        for _ in 0..ROUNDS {
            let x = random_row(&mut rng, BLOCKS);
            let want = ggml_quantize_row_q8_0_ref(&x);
            assert_eq!(
                convert_pass(tier, &x, &[], &[], PairLayout::HalfSplit),
                want,
                "{tier}: plain quantize"
            );

            // After rotation: heads of 128 (or 32 under Miri), rotated in f32 by the f32
            // convert kernel, then quantized by ggml's reference.
            let head_dim = if cfg!(miri) { 32 } else { 128 };
            let pairs = head_dim / 2;
            let cos: Vec<f32> = (0..pairs).map(|i| (i as f32 * 0.37).cos()).collect();
            let sin: Vec<f32> = (0..pairs).map(|i| (i as f32 * 0.37).sin()).collect();
            for layout in [PairLayout::HalfSplit, PairLayout::Interleaved] {
                let mut rotated = vec![0.0f32; x.len()];
                let r = ConvertRows {
                    tokens: x.len() / head_dim,
                    heads: 1,
                    head_dim,
                    src_token_stride: head_dim,
                    src_head_stride: head_dim,
                    dst_token_stride: head_dim,
                    dst_head_stride: head_dim,
                };
                convert_rows(Tier::Scalar, &x, &mut rotated, r, &cos, &sin, layout, false).unwrap();
                if !ggml_defined(&rotated) {
                    continue;
                }
                let want = ggml_quantize_row_q8_0_ref(&rotated);
                assert_eq!(convert_pass(tier, &x, &cos, &sin, layout), want, "{tier}: rotated {layout:?}");
            }
        }
        println!("{tier}: q8_0 convert kernel equals ggml's quantize_row_q8_0_ref");
    }
}

#[test]
fn non_finite_blocks_are_defined() {
    let mut x = [1.0f32; 32];
    x[5] = f32::NAN;
    x[6] = f32::INFINITY;
    let b = BlockQ8_0::quantize(&x);
    assert_eq!((b.d.to_bits(), b.qs), (rope_kernels::CANONICAL_NAN_F16, [0; 32]));
    x[5] = -2.0;
    let b = BlockQ8_0::quantize(&x);
    assert_eq!((b.d.to_bits(), b.qs), (f16::INFINITY.to_bits(), [0; 32]));
    // A block of subnormals: `1 / d` overflows; zeros stay 0, the rest clamp to ±127.
    let mut x = [0.0f32; 32];
    x[0] = 1e-39;
    x[1] = -3e-40;
    let b = BlockQ8_0::quantize(&x);
    assert!(!(1.0 / (1e-39f32 / 127.0)).is_finite());
    assert_eq!(b.d.to_bits(), 0);
    assert_eq!(&b.qs[..3], &[127, -127, 0]);
    // Smaller still: `d` underflows to 0, so `id = 0` and every quant is 0 (as in ggml).
    let tiny = BlockQ8_0::quantize(&core::array::from_fn(|i| f32::from_bits(i as u32)));
    assert_eq!((tiny.d.to_bits(), tiny.qs), (0, [0; 32]));
    for tier in tiers() {
        let mut row = [0.0f32; 64];
        row[..32].copy_from_slice(&x);
        row[40] = f32::NAN;
        let want = [BlockQ8_0::quantize(&x), BlockQ8_0::quantize(row[32..].try_into().unwrap())];
        assert_eq!(convert_pass(tier, &row, &[], &[], PairLayout::HalfSplit), want, "{tier}");
    }
}

#[test]
fn dequantize_and_errors() {
    let x: [f32; 32] = core::array::from_fn(|i| (i as f32 - 16.0) * 0.25);
    let b = BlockQ8_0::quantize(&x);
    let y = b.dequantize();
    for (a, r) in x.iter().zip(y) {
        assert!((a - r).abs() <= b.d.to_f32() / 2.0 + 1e-6, "{a} {r}");
    }
    let canary = BlockQ8_0 { d: f16::from_bits(0xBEEF), qs: [0x5A; 32] };
    let mut out = [canary; 1];
    assert_eq!(
        quantize_row_q8_0(&x[..31], &mut out),
        Err(RopeError::QuantizeLength { values: 31, blocks: 1 })
    );
    assert_eq!(out, [canary], "nothing written on error");
    assert_eq!(quantize_row_q8_0(&[], &mut []), Ok(()));
    assert_eq!(core::mem::size_of::<BlockQ8_0>(), 34);
}
