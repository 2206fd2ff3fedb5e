//! The portable generator: `wide::f64x4`, compiled for the build's baseline (SSE2 on
//! x86-64, NEON on aarch64, simd128 on wasm, plain arrays elsewhere). The f32 conversions
//! and the clamp go lane by lane through [`Scalar`]'s definitions, which `wide` has no
//! vector form of; they are the same IEEE operations.

use wide::f64x4;

use super::scalar::Scalar;
use super::{F64Simd, RowInputs};

/// The portable "ISA": always available.
#[derive(Clone, Copy)]
pub(crate) struct Portable;

/// The portable generator (the contract of [`SinCosFn`](super::SinCosFn); nothing to prove).
pub(crate) fn fill_row(inputs: &RowInputs<'_>, position: u32, cos: &mut [f32], sin: &mut [f32]) {
    super::fill_row(Portable, inputs, position, cos, sin);
}

impl F64Simd for Portable {
    const LANES: usize = 4;
    type V = f64x4;

    #[inline(always)]
    fn splat(self, x: f64) -> f64x4 {
        f64x4::splat(x)
    }
    #[inline(always)]
    fn add(self, a: f64x4, b: f64x4) -> f64x4 {
        a + b
    }
    #[inline(always)]
    fn sub(self, a: f64x4, b: f64x4) -> f64x4 {
        a - b
    }
    #[inline(always)]
    fn mul(self, a: f64x4, b: f64x4) -> f64x4 {
        a * b
    }
    #[inline(always)]
    fn abs(self, a: f64x4) -> f64x4 {
        a.abs()
    }
    #[inline(always)]
    fn round_f32(self, a: f64x4) -> f64x4 {
        f64x4::from(a.to_array().map(|x| Scalar.round_f32(x)))
    }
    #[inline(always)]
    fn clamp_abs(self, a: f64x4, limit: f64) -> f64x4 {
        f64x4::from(a.to_array().map(|x| Scalar.clamp_abs(x, limit)))
    }
    #[inline(always)]
    fn load(self, src: &[f64]) -> f64x4 {
        f64x4::from([src[0], src[1], src[2], src[3]])
    }
    #[inline(always)]
    fn load_f32(self, src: &[f32]) -> f64x4 {
        f64x4::from([src[0], src[1], src[2], src[3]].map(f64::from))
    }
    #[inline(always)]
    fn store_f32(self, a: f64x4, dst: &mut [f32]) {
        let a = a.to_array();
        let dst = &mut dst[..4];
        for (d, x) in dst.iter_mut().zip(a) {
            *d = x as f32;
        }
    }
}
