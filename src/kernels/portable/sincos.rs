//! The portable generator: `wide::f64x4`, compiled for the build's baseline (SSE2 on
//! x86-64, NEON on aarch64, simd128 on wasm, plain arrays elsewhere). The f32 conversions
//! and the clamp go lane by lane through [`Scalar`]'s definitions, which `wide` has no
//! vector form of; they are the same IEEE operations.

use wide::f64x4;

use crate::kernels::scalar::sincos::Scalar;
use crate::kernels::sincos::{F64Simd, RowInputs};

/// The portable "ISA": always available.
#[derive(Clone, Copy)]
pub(crate) struct Portable;

/// The portable generator (the contract of [`SinCosFn`](crate::kernels::sincos::SinCosFn); nothing to prove).
///
/// Where `wide`'s `f64x4` has no vector backend (no SSE2, aarch64 NEON or simd128: plain
/// arrays, e.g. Cortex-M), four lanes are only four scalar computations with more spills, so
/// the scalar generator runs instead: the same bits (every generator is), less code and
/// stack (issue 13: 11.9 KB of code and 300 B of stack per call on thumbv7em).
pub(crate) fn fill_row(inputs: &RowInputs<'_>, position: u32, cos: &mut [f32], sin: &mut [f32]) {
    const VECTORS: bool = cfg!(any(
        target_feature = "sse2",
        target_feature = "simd128",
        all(target_feature = "neon", target_arch = "aarch64")
    ));
    if VECTORS {
        crate::kernels::sincos::fill_row(Portable, inputs, position, cos, sin);
    } else {
        crate::kernels::scalar::sincos::fill_row(inputs, position, cos, sin);
    }
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
