//! The scalar generator: one f64 lane, plain Rust. The oracle the other tiers are compared
//! with bit for bit.

use crate::kernels::sincos::{F64Simd, RowInputs};

/// The scalar "ISA": always available.
#[derive(Clone, Copy)]
pub(crate) struct Scalar;

/// The scalar generator (the contract of [`SinCosFn`](crate::kernels::sincos::SinCosFn); nothing to prove).
pub(crate) fn fill_row(inputs: &RowInputs<'_>, position: u32, cos: &mut [f32], sin: &mut [f32]) {
    crate::kernels::sincos::fill_row(Scalar, inputs, position, cos, sin);
}

impl F64Simd for Scalar {
    const LANES: usize = 1;
    type V = f64;

    #[inline(always)]
    fn splat(self, x: f64) -> f64 {
        x
    }
    #[inline(always)]
    fn add(self, a: f64, b: f64) -> f64 {
        a + b
    }
    #[inline(always)]
    fn sub(self, a: f64, b: f64) -> f64 {
        a - b
    }
    #[inline(always)]
    fn mul(self, a: f64, b: f64) -> f64 {
        a * b
    }
    #[inline(always)]
    fn abs(self, a: f64) -> f64 {
        f64::from_bits(a.to_bits() & !(1 << 63))
    }
    #[inline(always)]
    fn round_f32(self, a: f64) -> f64 {
        f64::from(a as f32)
    }
    #[inline(always)]
    fn clamp_abs(self, a: f64, limit: f64) -> f64 {
        if a.to_bits() & !(1 << 63) > limit.to_bits() {
            f64::from_bits(limit.to_bits() | (a.to_bits() & (1 << 63)))
        } else {
            a
        }
    }
    #[inline(always)]
    fn load(self, src: &[f64]) -> f64 {
        src[0]
    }
    #[inline(always)]
    fn load_f32(self, src: &[f32]) -> f64 {
        f64::from(src[0])
    }
    #[inline(always)]
    fn store_f32(self, a: f64, dst: &mut [f32]) {
        dst[0] = a as f32;
    }
}
