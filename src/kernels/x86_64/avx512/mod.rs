//! The AVX-512F tier: 16 f32 lanes; `f16` through `vcvtph2ps`/`vcvtps2ph` (512-bit, part
//! of AVX-512F), `bf16` through `vpmovzxwd`/`vpmovdw`.
//!
//! Only AVX-512F instructions are used (no BW/DQ/VL), and only ones Miri can interpret
//! (generic SIMD: loads, arithmetic, in-lane permutes, 128-bit block shuffles, integer
//! compares into mask registers, blends), except the f16 conversions noted in the module
//! docs of [`x86_64`](super) and the NaN check `vcmpps` (`Avx512::unordered`): under Miri
//! those take an equivalent path Miri can interpret.

#[cfg(feature = "bench-internals")]
pub(crate) mod roofline;
pub(crate) mod sincos;

use core::arch::x86_64::*;

use half::{bf16, f16};

use super::avx2::tree_lanes8;
use crate::kernels::generic::{self, Simd, SimdElement};
use crate::kernels::tier::Tier;
use crate::kernels::{kernels_table, Kernels, RotateArgs};

pub(crate) static KERNELS: Kernels = kernels_table!(Tier::Avx512, sincos::fill_row);

/// This tier's table, if the CPU has AVX-512F and every feature of the AVX2 tier.
pub(crate) fn get() -> Option<&'static Kernels> {
    (super::features() & super::HAS_AVX512 != 0).then_some(&KERNELS)
}

/// Proof that the CPU supports AVX-512F and the AVX2, FMA and F16C it implies (the
/// dispatcher checks all four; see `kernels::x86_64::cpuid::tiers_from`).
#[derive(Clone, Copy)]
pub(crate) struct Avx512(());

impl Avx512 {
    /// `bits + 0x7FFF + ((bits >> 16) & 1)` per lane: the bf16 rounding of
    /// [`Simd::store_bf16`]; the rounded bf16 is the high half.
    #[inline(always)]
    fn round_bf16(self, v: __m512) -> __m512i {
        // SAFETY: the token proves AVX-512F.
        unsafe {
            let bits = _mm512_castps_si512(v);
            let lsb = _mm512_and_si512(_mm512_srli_epi32::<16>(bits), _mm512_set1_epi32(1));
            _mm512_add_epi32(_mm512_add_epi32(bits, _mm512_set1_epi32(0x7FFF)), lsb)
        }
    }

    /// The lanes where `a` or `b` is NaN. Natively one `vcmpps` (`_CMP_UNORD_Q`) for both
    /// vectors, which keeps the NaN check of every store off the critical FP ports; under
    /// Miri, which does not interpret `vcmpps`, the same mask from an integer compare on
    /// the bits (`|bits| > 0x7F80_0000`).
    #[inline(always)]
    fn unordered(self, a: __m512, b: __m512) -> __mmask16 {
        #[cfg(not(miri))]
        // SAFETY: the token proves AVX-512F.
        unsafe {
            _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(a, b)
        }
        #[cfg(miri)]
        // SAFETY: the token proves AVX-512F.
        unsafe {
            let (abs, inf) = (_mm512_set1_epi32(0x7FFF_FFFF), _mm512_set1_epi32(0x7F80_0000));
            let na = _mm512_cmpgt_epi32_mask(_mm512_and_si512(_mm512_castps_si512(a), abs), inf);
            let nb = _mm512_cmpgt_epi32_mask(_mm512_and_si512(_mm512_castps_si512(b), abs), inf);
            na | nb
        }
    }

    /// Lanes with `|x| < 2^31` truncated toward zero to i32 (`vcvttps2dq`; under Miri,
    /// which does not interpret its 512-bit form, the same lane by lane).
    #[inline(always)]
    fn trunc_epi32(self, v: __m512) -> __m512i {
        #[cfg(not(miri))]
        // SAFETY: the token proves AVX-512F.
        unsafe {
            _mm512_cvttps_epi32(v)
        }
        #[cfg(miri)]
        // SAFETY: the token proves AVX-512F.
        unsafe {
            let mut a = [0.0f32; 16];
            _mm512_storeu_ps(a.as_mut_ptr(), v);
            _mm512_loadu_si512(a.map(|x| x as i32).as_ptr().cast())
        }
    }

    /// # Safety
    /// The CPU supports AVX-512F (which implies AVX2 and F16C).
    #[inline(always)]
    unsafe fn new_unchecked() -> Self {
        Avx512(())
    }
}

crate::kernels::tier_boundary! {
    features = "avx512f",
    token = Avx512::new_unchecked();

    /// # Safety
    /// The contract of [`RotateFn`](crate::kernels::RotateFn) (which includes AVX-512F).
    pub(crate) unsafe fn rotate<T: SimdElement>(a: &RotateArgs<'_, T>) {
        // Heads shorter than a 16-lane vector with a tail: the AVX2 entry point's 8 lanes (or
        // 4) need no padded copy (same bits).
        if generic::pads::<T>(Avx512::LANES, a) {
            // SAFETY: AVX-512F implies AVX2, FMA and F16C (the dispatcher checks all of them for
            // this tier); the rest is forwarded.
            return unsafe { rotate_narrow(a) };
        }
        match a.layout {
            // SAFETY: forwarded.
            crate::kernels::PairLayout::HalfSplit => unsafe { rotate_layout::<T, { generic::HALF_SPLIT }>(a) },
            // SAFETY: forwarded.
            crate::kernels::PairLayout::Interleaved => unsafe { rotate_layout::<T, { generic::INTERLEAVED }>(a) },
        }
    }

    /// [`rotate`] for one layout, out of line (see `avx2::rotate_layout`).
    ///
    /// # Safety
    /// As [`rotate`]; `a.layout` is the one `L` names.
    #[inline(never)]
    unsafe fn rotate_layout<T: SimdElement, const L: u8>(a: &RotateArgs<'_, T>) {
        // SAFETY: the contract says the CPU supports this table's tier; the rest is forwarded.
        unsafe { generic::rotate_in::<_, _, L>(Avx512::new_unchecked(), a) }
    }

    /// # Safety
    /// The contract of [`RotateRowsFn`](crate::kernels::RotateRowsFn) (and of `rotate`).
    pub(crate) unsafe fn rotate_rows<T: SimdElement>(a: &RotateArgs<'_, T>, cos_rows: &[f32], sin_rows: &[f32]) {
        if generic::pads::<T>(Avx512::LANES, a) {
            // SAFETY: as in `rotate`.
            return unsafe { super::avx2::rotate_rows(a, cos_rows, sin_rows) };
        }
        // SAFETY: as in `rotate`.
        unsafe { rotate_rows_wide(a, cos_rows, sin_rows) }
    }

    /// [`rotate_rows`] on this tier's 16 lanes, out of line so that its frame and that of the
    /// AVX2 fallback are siblings, not nested: in a debug build each holds every inlined kernel's
    /// locals (1.4 and 0.8 MB), and nested they overflowed a test thread's 2 MB stack.
    ///
    /// # Safety
    /// As [`rotate_rows`].
    #[inline(never)]
    unsafe fn rotate_rows_wide<T: SimdElement>(a: &RotateArgs<'_, T>, cos_rows: &[f32], sin_rows: &[f32]) {
        // SAFETY: the contract says the CPU supports this table's tier; the rest is forwarded.
        unsafe { generic::rotate_rows(Avx512::new_unchecked(), a, cos_rows, sin_rows) }
    }
}

/// [`rotate`] for heads shorter than 16 lanes: the AVX2 entry point, out of line (a second
/// kernel inlined into `rotate` slows every call).
///
/// # Safety
/// As [`rotate`].
#[inline(never)]
unsafe fn rotate_narrow<T: SimdElement>(a: &RotateArgs<'_, T>) {
    // SAFETY: AVX-512F implies AVX2, FMA and F16C; forwarded.
    unsafe { super::avx2::rotate(a) }
}

impl Simd for Avx512 {
    const LANES: usize = 16;
    type V = __m512;

    #[inline(always)]
    fn splat(self, x: f32) -> __m512 {
        // SAFETY: the token proves AVX-512F.
        unsafe { _mm512_set1_ps(x) }
    }
    #[inline(always)]
    unsafe fn load(self, p: *const f32) -> __m512 {
        // SAFETY: the token proves AVX-512F; the caller guarantees 16 readable f32.
        unsafe { _mm512_loadu_ps(p) }
    }
    #[inline(always)]
    unsafe fn store(self, p: *mut f32, v: __m512) {
        // SAFETY: the token proves AVX-512F; the caller guarantees 16 writable f32.
        unsafe { _mm512_storeu_ps(p, v) }
    }
    #[inline(always)]
    fn add(self, a: __m512, b: __m512) -> __m512 {
        // SAFETY: the token proves AVX-512F.
        unsafe { _mm512_add_ps(a, b) }
    }
    #[inline(always)]
    fn sub(self, a: __m512, b: __m512) -> __m512 {
        // SAFETY: the token proves AVX-512F.
        unsafe { _mm512_sub_ps(a, b) }
    }
    #[inline(always)]
    fn mul(self, a: __m512, b: __m512) -> __m512 {
        // SAFETY: the token proves AVX-512F.
        unsafe { _mm512_mul_ps(a, b) }
    }
    #[inline(always)]
    fn xor(self, a: __m512, b: __m512) -> __m512 {
        // SAFETY: the token proves AVX-512F (`_mm512_xor_ps` would need AVX-512DQ).
        unsafe { _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(a), _mm512_castps_si512(b))) }
    }
    #[inline(always)]
    fn abs(self, a: __m512) -> __m512 {
        // SAFETY: the token proves AVX-512F (`_mm512_and_ps` would need AVX-512DQ).
        unsafe {
            _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(a), _mm512_set1_epi32(0x7FFF_FFFF)))
        }
    }
    #[inline(always)]
    fn max_abs(self, a: __m512, b: __m512) -> __m512 {
        // SAFETY: the token proves AVX-512F. Integer maxima of the bits (see the trait).
        unsafe { _mm512_castsi512_ps(_mm512_max_epi32(_mm512_castps_si512(a), _mm512_castps_si512(b))) }
    }
    #[inline(always)]
    fn reduce_max_abs(self, v: __m512) -> f32 {
        // SAFETY: the token proves AVX-512F (so AVX2); integer maxima as in `max_abs`.
        unsafe {
            let v = _mm512_castps_si512(v);
            let m = _mm256_max_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64::<1>(v));
            let m = _mm_max_epi32(_mm256_castsi256_si128(m), _mm256_extracti128_si256::<1>(m));
            let m = _mm_max_epi32(m, _mm_shuffle_epi32::<0b01_00_11_10>(m));
            let m = _mm_max_epi32(m, _mm_shuffle_epi32::<0b10_11_00_01>(m));
            f32::from_bits(_mm_cvtsi128_si32(m) as u32)
        }
    }
    #[cfg(not(miri))]
    #[inline(always)]
    fn f16_of(self, x: f32) -> f16 {
        // SAFETY: AVX-512F implies F16C. Immediate 0: round to nearest even (Miri: the default).
        unsafe {
            f16::from_bits(
                _mm_extract_epi16::<0>(_mm_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(_mm_set_ss(x))) as u16
            )
        }
    }
    #[inline(always)]
    unsafe fn store_round_i8(self, p: *mut i8, q: __m512) {
        // SAFETY: the token proves AVX-512F; the caller guarantees 16 writable i8.
        // `trunc(q + copysign(HALF_BELOW, q))` (see the trait); `vpmovdb` keeps the low
        // byte of results in -127..=127.
        unsafe {
            let sign = _mm512_set1_epi32(i32::MIN);
            let h = _mm512_set1_epi32(crate::kernels::generic::HALF_BELOW.to_bits() as i32);
            // (q & sign) | h: 0xEC = (A & C) | B.
            let adj = _mm512_ternarylogic_epi32::<0xEC>(_mm512_castps_si512(q), h, sign);
            let r = self.trunc_epi32(_mm512_add_ps(q, _mm512_castsi512_ps(adj)));
            _mm_storeu_si128(p.cast(), _mm512_cvtepi32_epi8(r));
        }
    }
    #[inline(always)]
    fn swap_pairs(self, v: __m512) -> __m512 {
        // SAFETY: the token proves AVX-512F.
        unsafe { _mm512_permute_ps::<0b10_11_00_01>(v) }
    }
    #[inline(always)]
    fn zip(self, a: __m512, b: __m512) -> (__m512, __m512) {
        // SAFETY: the token proves AVX-512F.
        unsafe {
            // Per 128-bit block k: lo_k = [a4k b4k a4k+1 b4k+1], hi_k = [a4k+2 b4k+2 ..].
            let lo = _mm512_unpacklo_ps(a, b);
            let hi = _mm512_unpackhi_ps(a, b);
            // Blocks in memory order: [lo0 hi0 lo1 hi1] and [lo2 hi2 lo3 hi3].
            let t0 = _mm512_shuffle_f32x4::<0b01_00_01_00>(lo, hi); // [lo0 lo1 hi0 hi1]
            let t1 = _mm512_shuffle_f32x4::<0b11_10_11_10>(lo, hi); // [lo2 lo3 hi2 hi3]
            (_mm512_shuffle_f32x4::<0b11_01_10_00>(t0, t0), _mm512_shuffle_f32x4::<0b11_01_10_00>(t1, t1))
        }
    }
    #[inline(always)]
    fn any_nan(self, a: __m512, b: __m512) -> bool {
        self.unordered(a, b) != 0
    }
    #[inline(always)]
    fn canonicalize_nan(self, v: __m512) -> __m512 {
        // SAFETY: the token proves AVX-512F.
        unsafe {
            _mm512_mask_blend_ps(
                self.unordered(v, v),
                v,
                _mm512_castsi512_ps(_mm512_set1_epi32(crate::kernels::element::CANONICAL_NAN_F32 as i32)),
            )
        }
    }
    #[inline(always)]
    unsafe fn load_f16(self, p: *const f16) -> __m512 {
        #[cfg(not(miri))]
        // SAFETY: the token proves AVX-512F; the caller guarantees 16 readable f16.
        unsafe {
            _mm512_cvtph_ps(_mm256_loadu_si256(p.cast()))
        }
        #[cfg(miri)]
        // SAFETY: AVX-512F implies F16C, whose 256-bit `vcvtph2ps` Miri interprets; the
        // caller guarantees 16 readable f16.
        unsafe {
            let lo = _mm256_cvtph_ps(_mm_loadu_si128(p.cast()));
            let hi = _mm256_cvtph_ps(_mm_loadu_si128(p.add(8).cast()));
            concat_256(lo, hi)
        }
    }
    #[inline(always)]
    unsafe fn store_f16(self, p: *mut f16, v: __m512) {
        #[cfg(not(miri))]
        // SAFETY: the token proves AVX-512F; the caller guarantees 16 writable f16.
        // Immediate 0: round to nearest even, whatever MXCSR says.
        unsafe {
            _mm256_storeu_si256(p.cast(), _mm512_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(v))
        }
        #[cfg(miri)]
        // SAFETY: the token proves AVX-512F; the caller guarantees 16 writable f16.
        unsafe {
            let mut a = [0.0f32; 16];
            _mm512_storeu_ps(a.as_mut_ptr(), v);
            p.cast::<[f16; 16]>().write_unaligned(a.map(f16::from_f32_const));
        }
    }
    #[inline(always)]
    unsafe fn load_bf16(self, p: *const bf16) -> __m512 {
        // SAFETY: the token proves AVX-512F; the caller guarantees 16 readable bf16.
        unsafe {
            _mm512_castsi512_ps(_mm512_slli_epi32::<16>(_mm512_cvtepu16_epi32(_mm256_loadu_si256(p.cast()))))
        }
    }
    #[inline(always)]
    unsafe fn store_bf16(self, p: *mut bf16, v: __m512) {
        // SAFETY: the token proves AVX-512F; the caller guarantees 16 writable bf16.
        unsafe {
            let r = _mm512_srli_epi32::<16>(self.round_bf16(v));
            // vpmovdw truncates each lane to 16 bits; every lane is < 0x10000.
            _mm256_storeu_si256(p.cast(), _mm512_cvtepi32_epi16(r));
        }
    }
    #[inline(always)]
    fn prefetch(self, p: *const u8) {
        // SAFETY: `prefetcht0` never faults, whatever the address.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(p.cast()) }
    }
    #[inline(always)]
    unsafe fn load_bf16_pairs(self, p: *const bf16) -> (__m512, __m512) {
        // SAFETY: the token proves AVX-512F; the caller guarantees 32 readable bf16.
        unsafe {
            let w = _mm512_loadu_si512(p.cast());
            let x0 = _mm512_slli_epi32::<16>(w);
            let x1 = _mm512_and_si512(w, _mm512_set1_epi32(0xFFFF_0000u32 as i32));
            (_mm512_castsi512_ps(x0), _mm512_castsi512_ps(x1))
        }
    }
    #[inline(always)]
    unsafe fn store_bf16_pairs(self, p: *mut bf16, y0: __m512, y1: __m512) {
        // SAFETY: the token proves AVX-512F; the caller guarantees 32 writable bf16.
        unsafe {
            let lo = _mm512_srli_epi32::<16>(self.round_bf16(y0));
            let hi = _mm512_and_si512(self.round_bf16(y1), _mm512_set1_epi32(0xFFFF_0000u32 as i32));
            _mm512_storeu_si512(p.cast(), _mm512_or_si512(lo, hi));
        }
    }
    #[inline(always)]
    fn round_bf16_f32(self, v: __m512) -> __m512 {
        self.round_bf16_f32_quiet(self.canonicalize_nan(v))
    }
    #[inline(always)]
    fn round_bf16_f32_quiet(self, v: __m512) -> __m512 {
        let r = self.round_bf16(v);
        // SAFETY: the token proves AVX-512F.
        unsafe { _mm512_castsi512_ps(_mm512_and_si512(r, _mm512_set1_epi32(0xFFFF_0000u32 as i32))) }
    }
    #[inline(always)]
    fn tree_lanes(self, v: __m512) -> f32 {
        // SAFETY: the token proves AVX-512F (and AVX2, which the 256-bit steps need).
        unsafe {
            // w = 8: lanes j + (j + 8), the high half taken with AVX-512F only.
            let hi = _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(v)));
            tree_lanes8(_mm256_add_ps(_mm512_castps512_ps256(v), hi))
        }
    }
}

/// `[lo | hi]` from two 256-bit halves with AVX-512F only (`_mm512_insertf32x8` is DQ).
///
/// # Safety
/// The CPU supports AVX-512F.
#[cfg(miri)]
#[inline(always)]
unsafe fn concat_256(lo: __m256, hi: __m256) -> __m512 {
    // SAFETY: the caller's token proves AVX-512F.
    unsafe {
        _mm512_castpd_ps(_mm512_insertf64x4::<1>(
            _mm512_castpd256_pd512(_mm256_castps_pd(lo)),
            _mm256_castps_pd(hi),
        ))
    }
}
