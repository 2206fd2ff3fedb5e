//! Helpers shared by the integration tests: the f64 block-diagonal rotation matrix, the
//! error bound of one kernel output, random inputs, and strided-row access; with the
//! workspace's test support (`tests/support/`: element traits, tiers, generator).
//!
//! Each test file uses a subset, hence the `dead_code` allowance.
#![allow(dead_code, unused_imports)]

#[path = "../support/mod.rs"]
pub mod support;

use rand::RngExt;
use rope_kernels::{bf16, f16, Element, PairLayout, Rope, View};

pub use support::elem::{bits, TestElem};
pub use support::rng::{rng, TestRng};
pub use support::tiers::{pinned, tiers};

/// Unit roundoff of f32, round to nearest: `2^-24`.
pub const U_F32: f64 = 1.0 / 16_777_216.0;

/// Relative error bound of one rotated f32 output against the exact rotation of the same
/// (exactly representable) input. The kernel computes `y0 = fl(fl(x0 * c) - fl(x1 * s))` with
/// `c = fl32(cos θ)`, `s = fl32(sin θ)` (θ and cos/sin in f64, each within one f64 ulp), so
///
/// `|y0 - (x0 cos θ - x1 sin θ)| ≤ ((1+u)^3 - 1 + O(2^-52)) (|x0 cos θ| + |x1 sin θ|)`:
///
/// one rounding for cos/sin, one for the product, one for the sum or difference. `(1+u)^3 - 1`
/// is `3u + 3u² + u³`; the factor `1 + 2^-20` covers the `u²` terms, the f64 error of cos/sin
/// (2^-52 relative, i.e. 2^-28 u) and the f64 rounding of the reference itself.
pub const GAMMA_F32: f64 = 3.0 * U_F32 * (1.0 + 1.0 / 1_048_576.0);

/// Absolute slack for f32 underflow: each of the two products may lose up to half the
/// smallest subnormal (2^-150); the subtraction of two f32 values in the subnormal range is
/// exact. Irrelevant for normal-range data, but keeps the bound honest.
pub const ETA_F32: f64 = 2.0 * 1.401_298_464_324_817e-45;

/// A random finite value `±[0, 1) * 2^e`, `|e| <= T::MAX_EXP`, rounded to `T`.
pub fn random_value<T: TestElem>(rng: &mut TestRng) -> T {
    let m: f32 = rng.random_range(-1.0f32..1.0);
    let e = rng.random_range(-T::MAX_EXP..=T::MAX_EXP);
    T::from_f32(m * 2f32.powi(e))
}

pub fn random_vec<T: TestElem>(rng: &mut TestRng, n: usize) -> Vec<T> {
    (0..n).map(|_| random_value::<T>(rng)).collect()
}

/// A position drawn from small, medium, full-range and near-`u32::MAX` values, so that the
/// f64 angle path is exercised where an f32 angle would be badly wrong.
pub fn random_position(rng: &mut TestRng) -> u32 {
    match rng.random_range(0..5) {
        0 => rng.random_range(0..16),
        1 => rng.random_range(0..4096),
        2 => rng.random_range(0..1 << 20),
        3 => rng.random_range(0..=u32::MAX),
        _ => u32::MAX - rng.random_range(0..16),
    }
}

/// The members of each rotated pair, written out from the layout definitions (independent
/// of the crate's own `pair_index`).
pub fn pairs(layout: PairLayout, rotary_dim: usize) -> Vec<(usize, usize)> {
    let n = rotary_dim / 2;
    match layout {
        PairLayout::HalfSplit => (0..n).map(|i| (i, i + n)).collect(),
        PairLayout::Interleaved => (0..n).map(|i| (2 * i, 2 * i + 1)).collect(),
    }
}

/// 2π as a sum of three f64 values (≈ 160 bits).
const TWO_PI: [f64; 3] = [core::f64::consts::TAU, 2.4492935982947064e-16, -5.989539619436679e-33];

/// sin and cos of the exact real product `position * inv_freq`, good to about 1e-15.
///
/// A plain f64 product is off by up to 2^-53 of the angle (2.4e-7 rad near 2^32), more than
/// the kernel's error, so the product is kept error-free (`h + l`, with an FMA) and reduced
/// modulo a three-part 2π before taking sin/cos.
pub fn exact_sin_cos(position: u32, inv_freq: f64) -> (f64, f64) {
    let two_prod = |a: f64, b: f64| {
        let h = a * b;
        (h, a.mul_add(b, -h))
    };
    let (h, l) = two_prod(f64::from(position), inv_freq);
    let k = (h / TWO_PI[0]).round();
    let (m0, e0) = two_prod(k, TWO_PI[0]);
    let (m1, e1) = two_prod(k, TWO_PI[1]);
    let m2 = k * TWO_PI[2];
    // h - m0 is exact (Sterbenz) when k >= 1; the small terms are added after.
    let r = (h - m0) + (((l - e0) - m1) - (e1 + m2));
    r.sin_cos()
}

/// The `head_dim × head_dim` block-diagonal rotation matrix `R_p` (row-major, f64) of `rope`
/// at `position`, or its transpose `R_p^T = R_{-p}` when `inverse`. Pair `i` gets the block
/// `[[c, -s], [s, c]]` with `c = af * cos(p * inv_freq[i])`, `s = af * sin(p * inv_freq[i])`,
/// the angle the exact product of `p` and the crate's f64 `inv_freq` ([`exact_sin_cos`]); dims past `rotary_dim` get 1.
pub fn rotation_matrix(rope: &Rope, position: u32, inverse: bool) -> Vec<f64> {
    let cfg = rope.config();
    let hd = cfg.head_dim;
    let freqs = rope.frequencies();
    let af = freqs.attention_factor();
    let mut m = vec![0.0f64; hd * hd];
    for j in 0..hd {
        m[j * hd + j] = 1.0;
    }
    for (i, (a, b)) in pairs(cfg.layout, cfg.rotary_dim).into_iter().enumerate() {
        let (s, c) = exact_sin_cos(position, freqs.inv_freq()[i]);
        let (c, s) = (af * c, af * s);
        let s = if inverse { -s } else { s };
        m[a * hd + a] = c;
        m[a * hd + b] = -s;
        m[b * hd + a] = s;
        m[b * hd + b] = c;
    }
    m
}

/// Exact rotation of one head and the per-element bound on the kernel's error in `T`.
pub struct Reference {
    /// `M x` in f64.
    pub y: Vec<f64>,
    /// `|kernel - y| <= bound` elementwise; 0 for pass-through dims (they must be exact).
    pub bound: Vec<f64>,
}

/// `M x` for the matrix `m` of [`rotation_matrix`] and the error bound of a kernel storing
/// `T`: `GAMMA_F32 * Σ_k |m_jk x_k| + ETA_F32` for the f32 result, plus one rounding to `T`
/// (`T::U * |y| + T::ETA`, evaluated at the largest `|y|` the f32 bound allows).
/// Non-finite pass-through inputs are read as 0 for the product (they are checked bitwise).
pub fn reference<T: TestElem>(m: &[f64], rotary_dim: usize, x: &[T]) -> Reference {
    let hd = x.len();
    let xs: Vec<f64> = x
        .iter()
        .enumerate()
        .map(|(k, v)| {
            let v = f64::from(v.to_f32());
            if k >= rotary_dim && !v.is_finite() {
                0.0
            } else {
                v
            }
        })
        .collect();
    let mut y = vec![0.0; hd];
    let mut bound = vec![0.0; hd];
    for j in 0..hd {
        let row = &m[j * hd..(j + 1) * hd];
        y[j] = row.iter().zip(&xs).map(|(a, b)| a * b).sum();
        if j < rotary_dim {
            let mag: f64 = row.iter().zip(&xs).map(|(a, b)| (a * b).abs()).sum();
            let b32 = GAMMA_F32 * mag + ETA_F32;
            bound[j] = b32 + T::U * (y[j].abs() + b32) + T::ETA;
        }
    }
    Reference { y, bound }
}

/// Euclidean norm in f64.
pub fn norm(v: &[f64]) -> f64 {
    v.iter().map(|x| x * x).sum::<f64>().sqrt()
}

pub fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

pub fn to_f64<T: Element>(v: &[T]) -> Vec<f64> {
    v.iter().map(|x| f64::from(x.to_f32())).collect()
}

/// Offset of row `(t, h)` in a buffer described by `view`.
pub fn row_offset(view: &View, t: usize, h: usize) -> usize {
    t * view.token_stride + h * view.head_stride
}

/// For each element of a buffer of `len` elements: `Some((t, h, d))` if the view covers it.
pub fn coverage(view: &View, head_dim: usize, len: usize) -> Vec<Option<(usize, usize, usize)>> {
    let mut c = vec![None; len];
    for t in 0..view.tokens {
        for h in 0..view.heads {
            let o = row_offset(view, t, h);
            for d in 0..head_dim {
                assert!(c[o + d].is_none(), "test bug: view {view:?} overlaps itself");
                c[o + d] = Some((t, h, d));
            }
        }
    }
    c
}

/// A few NaN bit patterns with payloads (quiet and signalling) for `T`.
pub fn nan_payloads<T: TestElem>() -> Vec<T> {
    let pats: [u32; 4] = match T::DTYPE {
        rope_kernels::DType::F32 => [0x7FA0_0001, 0xFFC0_1234, 0x7F80_0001, 0x7FFF_FFFF],
        rope_kernels::DType::F16 => [0x7D01, 0xFE55, 0x7C01, 0x7FFF],
        rope_kernels::DType::BF16 => [0x7FA1, 0xFFC5, 0x7F81, 0x7FFF],
    };
    pats.iter().map(|&b| T::from_bits(b)).collect()
}

/// The canonical quiet NaNs documented in `element.rs`, written out (not read from the crate).
pub const CANONICAL_NAN_F32: u32 = <f32 as TestElem>::CANONICAL_NAN;
pub const CANONICAL_NAN_F16: u16 = <f16 as TestElem>::CANONICAL_NAN as u16;
pub const CANONICAL_NAN_BF16: u16 = <bf16 as TestElem>::CANONICAL_NAN as u16;

/// The bits of `v` rounded once to `T` (nearest, ties to even; NaN to the canonical NaN of
/// the type), computed with the `half` crate directly rather than through the crate's
/// `Element::from_f32` ([`TestElem::round`]).
pub fn round_bits<T: TestElem>(v: f32) -> u32 {
    T::round(v)
}

/// The element with bits `b`.
pub fn from_bits<T: TestElem>(b: u32) -> T {
    T::from_bits(b)
}
