//! The AVX2-tier generator: four f64 lanes in `__m256d`. It uses only AVX instructions
//! (f64 arithmetic, `vcvtpd2ps`/`vcvtps2pd`, blends) plus AVX2's `vpcmpgtq` for the clamp;
//! no FMA. Tails go through the zero-padded defaults of [`F64Simd`].

use core::arch::x86_64::*;

use crate::kernels::sincos::{F64Simd, RowInputs};

/// Proof that the CPU supports AVX2.
#[derive(Clone, Copy)]
pub(crate) struct Avx2(());

/// # Safety
/// The CPU supports AVX2 (the contract of [`SinCosFn`]).
#[target_feature(enable = "avx2")]
pub(crate) unsafe fn fill_row(inputs: &RowInputs<'_>, position: u32, cos: &mut [f32], sin: &mut [f32]) {
    crate::kernels::sincos::fill_row(Avx2(()), inputs, position, cos, sin);
}

impl F64Simd for Avx2 {
    const LANES: usize = 4;
    type V = __m256d;

    #[inline(always)]
    fn splat(self, x: f64) -> __m256d {
        // SAFETY: the token proves AVX2 (which includes AVX).
        unsafe { _mm256_set1_pd(x) }
    }
    #[inline(always)]
    fn add(self, a: __m256d, b: __m256d) -> __m256d {
        // SAFETY: the token proves AVX2.
        unsafe { _mm256_add_pd(a, b) }
    }
    #[inline(always)]
    fn sub(self, a: __m256d, b: __m256d) -> __m256d {
        // SAFETY: the token proves AVX2.
        unsafe { _mm256_sub_pd(a, b) }
    }
    #[inline(always)]
    fn mul(self, a: __m256d, b: __m256d) -> __m256d {
        // SAFETY: the token proves AVX2.
        unsafe { _mm256_mul_pd(a, b) }
    }
    #[inline(always)]
    fn abs(self, a: __m256d) -> __m256d {
        // SAFETY: the token proves AVX2.
        unsafe { _mm256_andnot_pd(_mm256_set1_pd(-0.0), a) }
    }
    #[inline(always)]
    fn round_f32(self, a: __m256d) -> __m256d {
        // SAFETY: the token proves AVX2. `vcvtpd2ps` rounds per MXCSR: nearest even.
        unsafe { _mm256_cvtps_pd(_mm256_cvtpd_ps(a)) }
    }
    #[inline(always)]
    fn clamp_abs(self, a: __m256d, limit: f64) -> __m256d {
        // SAFETY: the token proves AVX2. |a| and limit have a clear sign bit, so the signed
        // 64-bit compare of their bits orders them as unsigned integers.
        unsafe {
            let sign = _mm256_set1_pd(-0.0);
            let abs = _mm256_andnot_pd(sign, a);
            let over =
                _mm256_cmpgt_epi64(_mm256_castpd_si256(abs), _mm256_set1_epi64x(limit.to_bits() as i64));
            let clamped = _mm256_or_pd(_mm256_set1_pd(limit), _mm256_and_pd(sign, a));
            _mm256_blendv_pd(a, clamped, _mm256_castsi256_pd(over))
        }
    }
    #[inline(always)]
    fn load(self, src: &[f64]) -> __m256d {
        let src = &src[..4];
        // SAFETY: the token proves AVX2; `src` holds 4 f64 (unaligned load).
        unsafe { _mm256_loadu_pd(src.as_ptr()) }
    }
    #[inline(always)]
    fn load_f32(self, src: &[f32]) -> __m256d {
        let src = &src[..4];
        // SAFETY: the token proves AVX2; `src` holds 4 f32 (unaligned load).
        unsafe { _mm256_cvtps_pd(_mm_loadu_ps(src.as_ptr())) }
    }
    #[inline(always)]
    fn store_f32(self, a: __m256d, dst: &mut [f32]) {
        let dst = &mut dst[..4];
        // SAFETY: the token proves AVX2; `dst` holds 4 f32 (unaligned store).
        unsafe { _mm_storeu_ps(dst.as_mut_ptr(), _mm256_cvtpd_ps(a)) }
    }
}
