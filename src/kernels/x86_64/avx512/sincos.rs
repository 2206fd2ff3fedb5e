//! The AVX-512F-tier generator: eight f64 lanes in `__m512d`, tails through masked loads
//! and stores. Only AVX-512F instructions (and the AVX ones it implies) are used; no FMA.
//!
//! Miri does not interpret the 512-bit `vcvtpd2ps`/`vcvtps2pd`; under `cfg(miri)` those two
//! conversions are done as two 256-bit halves (`_mm256_cvtpd_ps`/`_mm256_cvtps_pd`, the same
//! IEEE conversion per lane). Everything else is the code that runs natively.

use core::arch::x86_64::*;

use crate::kernels::sincos::{F64Simd, RowInputs};

/// Proof that the CPU supports AVX-512F.
#[derive(Clone, Copy)]
pub(crate) struct Avx512(());

/// # Safety
/// The CPU supports AVX-512F (the contract of [`SinCosFn`]).
#[target_feature(enable = "avx512f")]
pub(crate) unsafe fn fill_row(inputs: &RowInputs<'_>, position: u32, cos: &mut [f32], sin: &mut [f32]) {
    // The contract guarantees AVX-512F, which is what the token asserts.
    crate::kernels::sincos::fill_row(Avx512(()), inputs, position, cos, sin);
}

const SIGN: i64 = i64::MIN;

/// A mask of the low `n <= 8` lanes.
#[inline(always)]
fn mask(n: usize) -> u8 {
    ((1u16 << n) - 1) as u8
}

/// f64 → f32, nearest even (MXCSR default), eight lanes.
///
/// # Safety
/// The CPU supports AVX-512F.
#[inline(always)]
unsafe fn narrow(a: __m512d) -> __m256 {
    #[cfg(not(miri))]
    // SAFETY: the caller guarantees AVX-512F.
    unsafe {
        _mm512_cvtpd_ps(a)
    }
    #[cfg(miri)]
    // SAFETY: the caller guarantees AVX-512F, which implies AVX.
    unsafe {
        let lo = _mm256_cvtpd_ps(_mm512_castpd512_pd256(a));
        let hi = _mm256_cvtpd_ps(_mm512_extractf64x4_pd::<1>(a));
        _mm256_set_m128(hi, lo)
    }
}

/// f32 → f64 (exact), eight lanes.
///
/// # Safety
/// The CPU supports AVX-512F.
#[inline(always)]
unsafe fn widen(a: __m256) -> __m512d {
    #[cfg(not(miri))]
    // SAFETY: the caller guarantees AVX-512F.
    unsafe {
        _mm512_cvtps_pd(a)
    }
    #[cfg(miri)]
    // SAFETY: the caller guarantees AVX-512F, which implies AVX.
    unsafe {
        let lo = _mm256_cvtps_pd(_mm256_castps256_ps128(a));
        let hi = _mm256_cvtps_pd(_mm256_extractf128_ps::<1>(a));
        _mm512_insertf64x4::<1>(_mm512_castpd256_pd512(lo), hi)
    }
}

impl F64Simd for Avx512 {
    const LANES: usize = 8;
    type V = __m512d;

    #[inline(always)]
    fn splat(self, x: f64) -> __m512d {
        // SAFETY: the token proves AVX-512F.
        unsafe { _mm512_set1_pd(x) }
    }
    #[inline(always)]
    fn add(self, a: __m512d, b: __m512d) -> __m512d {
        // SAFETY: the token proves AVX-512F.
        unsafe { _mm512_add_pd(a, b) }
    }
    #[inline(always)]
    fn sub(self, a: __m512d, b: __m512d) -> __m512d {
        // SAFETY: the token proves AVX-512F.
        unsafe { _mm512_sub_pd(a, b) }
    }
    #[inline(always)]
    fn mul(self, a: __m512d, b: __m512d) -> __m512d {
        // SAFETY: the token proves AVX-512F.
        unsafe { _mm512_mul_pd(a, b) }
    }
    #[inline(always)]
    fn abs(self, a: __m512d) -> __m512d {
        // SAFETY: the token proves AVX-512F.
        unsafe { _mm512_abs_pd(a) }
    }
    #[inline(always)]
    fn round_f32(self, a: __m512d) -> __m512d {
        // SAFETY: the token proves AVX-512F.
        unsafe { widen(narrow(a)) }
    }
    #[inline(always)]
    fn clamp_abs(self, a: __m512d, limit: f64) -> __m512d {
        // SAFETY: the token proves AVX-512F. |a| and limit have a clear sign bit, so the
        // signed 64-bit compare of their bits orders them as unsigned integers.
        unsafe {
            let bits = _mm512_castpd_si512(a);
            let abs = _mm512_andnot_si512(_mm512_set1_epi64(SIGN), bits);
            let limit = limit.to_bits() as i64;
            let over = _mm512_cmpgt_epi64_mask(abs, _mm512_set1_epi64(limit));
            let clamped =
                _mm512_or_si512(_mm512_set1_epi64(limit), _mm512_and_si512(_mm512_set1_epi64(SIGN), bits));
            _mm512_mask_blend_pd(over, a, _mm512_castsi512_pd(clamped))
        }
    }
    #[inline(always)]
    fn load(self, src: &[f64]) -> __m512d {
        let src = &src[..8];
        // SAFETY: the token proves AVX-512F; `src` holds 8 f64 (unaligned load).
        unsafe { _mm512_loadu_pd(src.as_ptr()) }
    }
    #[inline(always)]
    fn load_f32(self, src: &[f32]) -> __m512d {
        let src = &src[..8];
        // SAFETY: the token proves AVX-512F (so AVX); `src` holds 8 f32 (unaligned load).
        unsafe { widen(_mm256_loadu_ps(src.as_ptr())) }
    }
    #[inline(always)]
    fn store_f32(self, a: __m512d, dst: &mut [f32]) {
        let dst = &mut dst[..8];
        // SAFETY: the token proves AVX-512F (so AVX); `dst` holds 8 f32 (unaligned store).
        unsafe { _mm256_storeu_ps(dst.as_mut_ptr(), narrow(a)) }
    }
    #[inline(always)]
    fn load_partial(self, src: &[f64]) -> __m512d {
        let m = mask(src.len().min(8));
        // SAFETY: the token proves AVX-512F; the mask covers the `src.len()` elements of
        // `src` only, and masked-off lanes are not accessed.
        unsafe { _mm512_maskz_loadu_pd(m, src.as_ptr()) }
    }
    #[inline(always)]
    fn load_f32_partial(self, src: &[f32]) -> __m512d {
        let m = u16::from(mask(src.len().min(8)));
        // SAFETY: as in `load_partial`, for 16 f32 lanes of which the low `src.len()` are
        // loaded; the low half is widened.
        unsafe { widen(_mm512_castps512_ps256(_mm512_maskz_loadu_ps(m, src.as_ptr()))) }
    }
    #[inline(always)]
    fn store_f32_partial(self, a: __m512d, dst: &mut [f32]) {
        let m = u16::from(mask(dst.len().min(8)));
        // SAFETY: the token proves AVX-512F; the mask covers the `dst.len()` elements of
        // `dst` only, and masked-off lanes are not written.
        unsafe { _mm512_mask_storeu_ps(dst.as_mut_ptr(), m, _mm512_castps256_ps512(narrow(a))) }
    }
}
