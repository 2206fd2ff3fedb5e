//! The NEON-tier generator: two f64 lanes in `float64x2_t` (NEON is baseline on aarch64).
//! No FMA (`vmulq`/`vaddq` only). Tails go through the zero-padded defaults of
//! [`F64Simd`].

use core::arch::aarch64::*;

use crate::kernels::sincos::{F64Simd, RowInputs};

/// Proof that the CPU supports NEON (always, on aarch64).
#[derive(Clone, Copy)]
pub(crate) struct Neon(());

/// The NEON generator (the contract of [`SinCosFn`](crate::kernels::sincos::SinCosFn); NEON is baseline).
pub(crate) fn fill_row(inputs: &RowInputs<'_>, position: u32, cos: &mut [f32], sin: &mut [f32]) {
    crate::kernels::sincos::fill_row(Neon(()), inputs, position, cos, sin);
}

impl F64Simd for Neon {
    const LANES: usize = 2;
    type V = float64x2_t;

    #[inline(always)]
    fn splat(self, x: f64) -> float64x2_t {
        // SAFETY: the token proves NEON (baseline on aarch64).
        unsafe { vdupq_n_f64(x) }
    }
    #[inline(always)]
    fn add(self, a: float64x2_t, b: float64x2_t) -> float64x2_t {
        // SAFETY: the token proves NEON (baseline on aarch64).
        unsafe { vaddq_f64(a, b) }
    }
    #[inline(always)]
    fn sub(self, a: float64x2_t, b: float64x2_t) -> float64x2_t {
        // SAFETY: the token proves NEON (baseline on aarch64).
        unsafe { vsubq_f64(a, b) }
    }
    #[inline(always)]
    fn mul(self, a: float64x2_t, b: float64x2_t) -> float64x2_t {
        // SAFETY: the token proves NEON (baseline on aarch64).
        unsafe { vmulq_f64(a, b) }
    }
    #[inline(always)]
    fn abs(self, a: float64x2_t) -> float64x2_t {
        // SAFETY: the token proves NEON (baseline on aarch64).
        unsafe { vabsq_f64(a) }
    }
    #[inline(always)]
    fn round_f32(self, a: float64x2_t) -> float64x2_t {
        // SAFETY: the token proves NEON. `fcvtn` rounds per FPCR: nearest even.
        unsafe { vcvt_f64_f32(vcvt_f32_f64(a)) }
    }
    #[inline(always)]
    fn clamp_abs(self, a: float64x2_t, limit: f64) -> float64x2_t {
        // SAFETY: the token proves NEON.
        unsafe {
            let abs = vreinterpretq_u64_f64(vabsq_f64(a));
            let over = vcgtq_u64(abs, vdupq_n_u64(limit.to_bits()));
            let sign = vdupq_n_u64(1 << 63);
            let clamped = vorrq_u64(vdupq_n_u64(limit.to_bits()), vandq_u64(sign, vreinterpretq_u64_f64(a)));
            vbslq_f64(over, vreinterpretq_f64_u64(clamped), a)
        }
    }
    #[inline(always)]
    fn load(self, src: &[f64]) -> float64x2_t {
        let src = &src[..2];
        // SAFETY: the token proves NEON; `src` holds 2 f64.
        unsafe { vld1q_f64(src.as_ptr()) }
    }
    #[inline(always)]
    fn load_f32(self, src: &[f32]) -> float64x2_t {
        let src = &src[..2];
        // SAFETY: the token proves NEON; `src` holds 2 f32.
        unsafe { vcvt_f64_f32(vld1_f32(src.as_ptr())) }
    }
    #[inline(always)]
    fn store_f32(self, a: float64x2_t, dst: &mut [f32]) {
        let dst = &mut dst[..2];
        // SAFETY: the token proves NEON; `dst` holds 2 f32.
        unsafe { vst1_f32(dst.as_mut_ptr(), vcvt_f32_f64(a)) }
    }
}
