//! The AVX2 tier: 8 f32 lanes; `f16` through F16C, `bf16` through integer AVX2.
//!
//! The tier requires AVX2, FMA and F16C (detected together), but the kernels never fuse a
//! multiply with an add (bit-identity with the oracle), so FMA is not enabled for codegen.

#[cfg(feature = "bench-internals")]
pub(crate) mod roofline;
pub(crate) mod sincos;

use core::arch::x86_64::*;

use half::{bf16, f16};

use crate::kernels::generic::{self, Simd, SimdElement};
use crate::kernels::tier::Tier;
use crate::kernels::{kernels_table, Kernels, RotateArgs};

pub(crate) static KERNELS: Kernels = kernels_table!(Tier::Avx2, sincos::fill_row);

/// This tier's table, if the CPU has AVX2, FMA and F16C.
pub(crate) fn get() -> Option<&'static Kernels> {
    (super::features() & super::HAS_AVX2 != 0).then_some(&KERNELS)
}

/// Proof that the CPU supports AVX2 and F16C.
#[derive(Clone, Copy)]
pub(crate) struct Avx2(());

impl Avx2 {
    /// `bits + 0x7FFF + ((bits >> 16) & 1)` per lane: the bf16 rounding of
    /// [`Simd::store_bf16`]; the rounded bf16 is the high half.
    #[inline(always)]
    fn round_bf16(self, v: __m256) -> __m256i {
        // SAFETY: the token proves AVX2.
        unsafe {
            let bits = _mm256_castps_si256(v);
            let lsb = _mm256_and_si256(_mm256_srli_epi32::<16>(bits), _mm256_set1_epi32(1));
            _mm256_add_epi32(_mm256_add_epi32(bits, _mm256_set1_epi32(0x7FFF)), lsb)
        }
    }

    /// # Safety
    /// The CPU supports AVX2 and F16C.
    #[inline(always)]
    pub(crate) unsafe fn new_unchecked() -> Self {
        Avx2(())
    }
}

crate::kernels::tier_boundary! {
    features = "avx2,f16c",
    token = Avx2::new_unchecked();

    /// # Safety
    /// The contract of [`RotateFn`](crate::kernels::RotateFn) (which includes AVX2 + F16C).
    pub(crate) unsafe fn rotate<T: SimdElement>(a: &RotateArgs<'_, T>) {
        // Heads shorter than 8 lanes with a tail: 4 lanes need no padded copy (same bits).
        if T::PORTABLE_VECTORS && generic::pads::<T>(Avx2::LANES, a) && !generic::pads::<T>(4, a) {
            // SAFETY: forwarded.
            return unsafe { rotate_short(a) };
        }
        match a.layout {
            // SAFETY: forwarded.
            crate::kernels::PairLayout::HalfSplit => unsafe { rotate_layout::<T, { generic::HALF_SPLIT }>(a) },
            // SAFETY: forwarded.
            crate::kernels::PairLayout::Interleaved => unsafe { rotate_layout::<T, { generic::INTERLEAVED }>(a) },
        }
    }

    /// [`rotate`] for one layout (`generic::rotate_in`), out of line: one function holding both
    /// layouts' kernels compiled each worse than alone (AVX2, callgrind of
    /// `scripts/instr-gate.sh`: half-split cases 1-12% and interleaved 12-34% fewer instructions
    /// split than together).
    ///
    /// # Safety
    /// As [`rotate`]; `a.layout` is the one `L` names.
    #[inline(never)]
    unsafe fn rotate_layout<T: SimdElement, const L: u8>(a: &RotateArgs<'_, T>) {
        // SAFETY: the contract says the CPU supports this table's tier; the rest is forwarded.
        unsafe { generic::rotate_in::<_, _, L>(Avx2::new_unchecked(), a) }
    }

    /// # Safety
    /// The contract of [`RotateRowsFn`](crate::kernels::RotateRowsFn) (and of `rotate`).
    pub(crate) unsafe fn rotate_rows<T: SimdElement>(a: &RotateArgs<'_, T>, cos_rows: &[f32], sin_rows: &[f32]) {
        if T::PORTABLE_VECTORS && generic::pads::<T>(Avx2::LANES, a) && !generic::pads::<T>(4, a) {
            // SAFETY: as in `rotate`.
            return unsafe { rotate_rows_short(a, cos_rows, sin_rows) };
        }
        // SAFETY: as in `rotate`.
        unsafe { generic::rotate_rows(Avx2::new_unchecked(), a, cos_rows, sin_rows) }
    }
}

/// [`rotate`] for heads shorter than 8 lanes, on the portable tier's 4 (same bits). Out of
/// line: inlined, its second copy of the kernel made every AVX2 call slower (decode f32
/// +29% in scripts/bench-gate.sh).
///
/// # Safety
/// As [`rotate`].
#[inline(never)]
unsafe fn rotate_short<T: SimdElement>(a: &RotateArgs<'_, T>) {
    // SAFETY: the portable tier needs only the baseline; the rest is forwarded.
    unsafe { generic::rotate(crate::kernels::portable::Portable, a) }
}

/// [`rotate_rows`] on the portable tier's 4 lanes (as [`rotate_short`]).
///
/// # Safety
/// As [`rotate_rows`].
#[inline(never)]
unsafe fn rotate_rows_short<T: SimdElement>(a: &RotateArgs<'_, T>, cos_rows: &[f32], sin_rows: &[f32]) {
    // SAFETY: the portable tier needs only the baseline; the rest is forwarded.
    unsafe { generic::rotate_rows(crate::kernels::portable::Portable, a, cos_rows, sin_rows) }
}

impl Simd for Avx2 {
    const LANES: usize = 8;
    type V = __m256;

    #[inline(always)]
    fn splat(self, x: f32) -> __m256 {
        // SAFETY (every `unsafe` block of this impl): the token proves AVX2 and F16C; the
        // pointer ranges are the caller's `# Safety` contract.
        unsafe { _mm256_set1_ps(x) }
    }
    #[inline(always)]
    unsafe fn load(self, p: *const f32) -> __m256 {
        // SAFETY: see `splat`.
        unsafe { _mm256_loadu_ps(p) }
    }
    #[inline(always)]
    unsafe fn store(self, p: *mut f32, v: __m256) {
        // SAFETY: see `splat`.
        unsafe { _mm256_storeu_ps(p, v) }
    }
    #[inline(always)]
    fn add(self, a: __m256, b: __m256) -> __m256 {
        // SAFETY: see `splat`.
        unsafe { _mm256_add_ps(a, b) }
    }
    #[inline(always)]
    fn sub(self, a: __m256, b: __m256) -> __m256 {
        // SAFETY: see `splat`.
        unsafe { _mm256_sub_ps(a, b) }
    }
    #[inline(always)]
    fn mul(self, a: __m256, b: __m256) -> __m256 {
        // SAFETY: see `splat`.
        unsafe { _mm256_mul_ps(a, b) }
    }
    #[inline(always)]
    fn xor(self, a: __m256, b: __m256) -> __m256 {
        // SAFETY: see `splat`.
        unsafe { _mm256_xor_ps(a, b) }
    }
    #[inline(always)]
    fn abs(self, a: __m256) -> __m256 {
        // SAFETY: see `splat`.
        unsafe { _mm256_andnot_ps(_mm256_set1_ps(-0.0), a) }
    }
    #[inline(always)]
    fn max_abs(self, a: __m256, b: __m256) -> __m256 {
        // SAFETY: see `splat`. Integer maxima of the bits (see the trait).
        unsafe { _mm256_castsi256_ps(_mm256_max_epi32(_mm256_castps_si256(a), _mm256_castps_si256(b))) }
    }
    #[inline(always)]
    fn reduce_max_abs(self, v: __m256) -> f32 {
        // SAFETY: see `splat` (AVX2 implies SSE4.1); integer maxima as in `max_abs`.
        unsafe {
            let v = _mm256_castps_si256(v);
            let m = _mm_max_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256::<1>(v));
            let m = _mm_max_epi32(m, _mm_shuffle_epi32::<0b01_00_11_10>(m));
            let m = _mm_max_epi32(m, _mm_shuffle_epi32::<0b10_11_00_01>(m));
            f32::from_bits(_mm_cvtsi128_si32(m) as u32)
        }
    }
    #[cfg(not(miri))]
    #[inline(always)]
    fn f16_of(self, x: f32) -> f16 {
        // SAFETY: see `splat`. Immediate 0: round to nearest even (Miri: the default).
        unsafe {
            f16::from_bits(
                _mm_extract_epi16::<0>(_mm_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(_mm_set_ss(x))) as u16
            )
        }
    }
    #[inline(always)]
    unsafe fn store_round_i8(self, p: *mut i8, q: __m256) {
        // SAFETY: see `splat`; the caller guarantees 8 writable i8.
        // `trunc(q + copysign(HALF_BELOW, q))` (see the trait); the results lie in
        // -127..=127, so both saturating packs are exact.
        unsafe {
            let sign = _mm256_set1_ps(-0.0);
            let h = _mm256_set1_ps(crate::kernels::generic::HALF_BELOW);
            let adj = _mm256_or_ps(_mm256_and_ps(q, sign), h);
            let r = _mm256_cvttps_epi32(_mm256_add_ps(q, adj));
            let w = _mm_packs_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256::<1>(r));
            _mm_storel_epi64(p.cast(), _mm_packs_epi16(w, w));
        }
    }
    #[inline(always)]
    fn swap_pairs(self, v: __m256) -> __m256 {
        // SAFETY: see `splat`.
        unsafe { _mm256_permute_ps::<0b10_11_00_01>(v) }
    }
    #[inline(always)]
    fn zip(self, a: __m256, b: __m256) -> (__m256, __m256) {
        // SAFETY: see `splat`.
        unsafe {
            // [a0 b0 a1 b1 | a4 b4 a5 b5] and [a2 b2 a3 b3 | a6 b6 a7 b7]; then the 128-bit
            // halves in memory order.
            let lo = _mm256_unpacklo_ps(a, b);
            let hi = _mm256_unpackhi_ps(a, b);
            (_mm256_permute2f128_ps::<0x20>(lo, hi), _mm256_permute2f128_ps::<0x31>(lo, hi))
        }
    }
    #[inline(always)]
    fn any_nan(self, a: __m256, b: __m256) -> bool {
        // SAFETY: the token proves AVX2.
        unsafe { _mm256_movemask_ps(_mm256_cmp_ps::<_CMP_UNORD_Q>(a, b)) != 0 }
    }
    #[inline(always)]
    fn canonicalize_nan(self, v: __m256) -> __m256 {
        // SAFETY: see `splat`.
        unsafe {
            let nan = _mm256_cmp_ps::<_CMP_UNORD_Q>(v, v);
            _mm256_blendv_ps(
                v,
                _mm256_castsi256_ps(_mm256_set1_epi32(crate::kernels::element::CANONICAL_NAN_F32 as i32)),
                nan,
            )
        }
    }
    #[inline(always)]
    unsafe fn load_f16(self, p: *const f16) -> __m256 {
        // SAFETY: see `splat`.
        unsafe { _mm256_cvtph_ps(_mm_loadu_si128(p.cast())) }
    }
    #[inline(always)]
    unsafe fn store_f16(self, p: *mut f16, v: __m256) {
        #[cfg(not(miri))]
        // SAFETY: see `splat`. Immediate 0: round to nearest even, whatever MXCSR says.
        unsafe {
            _mm_storeu_si128(p.cast(), _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(v))
        }
        #[cfg(miri)]
        // SAFETY: see `splat`; 8 f32 are 8 writable f16's worth of lanes.
        unsafe {
            let mut a = [0.0f32; 8];
            _mm256_storeu_ps(a.as_mut_ptr(), v);
            p.cast::<[f16; 8]>().write_unaligned(a.map(f16::from_f32_const));
        }
    }
    #[inline(always)]
    unsafe fn load_bf16(self, p: *const bf16) -> __m256 {
        // SAFETY: see `splat`.
        unsafe {
            _mm256_castsi256_ps(_mm256_slli_epi32::<16>(_mm256_cvtepu16_epi32(_mm_loadu_si128(p.cast()))))
        }
    }
    #[inline(always)]
    unsafe fn store_bf16(self, p: *mut bf16, v: __m256) {
        // SAFETY: see `splat`.
        unsafe {
            let r = _mm256_srli_epi32::<16>(self.round_bf16(v));
            // Every lane is < 0x10000, so the unsigned saturating pack is exact.
            let packed = _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256::<1>(r));
            _mm_storeu_si128(p.cast(), packed);
        }
    }
    #[inline(always)]
    unsafe fn store_bf16_run2(self, p: *mut bf16, v0: __m256, v1: __m256) {
        // SAFETY: see `splat`; the caller guarantees 16 writable bf16.
        unsafe {
            let r0 = _mm256_srli_epi32::<16>(self.round_bf16(v0));
            let r1 = _mm256_srli_epi32::<16>(self.round_bf16(v1));
            // Every lane is < 0x10000, so the unsigned saturating pack is exact; it packs
            // within 128-bit halves (r0 lo, r1 lo, r0 hi, r1 hi), put in order by vpermq.
            let packed = _mm256_permute4x64_epi64::<0b11_01_10_00>(_mm256_packus_epi32(r0, r1));
            _mm256_storeu_si256(p.cast(), packed);
        }
    }
    #[inline(always)]
    fn prefetch(self, p: *const u8) {
        // SAFETY: `prefetcht0` never faults, whatever the address.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(p.cast()) }
    }
    #[inline(always)]
    unsafe fn load_bf16_pairs(self, p: *const bf16) -> (__m256, __m256) {
        // SAFETY: the token proves AVX2; the caller guarantees 16 readable bf16.
        unsafe {
            let w = _mm256_loadu_si256(p.cast());
            let x0 = _mm256_slli_epi32::<16>(w);
            let x1 = _mm256_and_si256(w, _mm256_set1_epi32(0xFFFF_0000u32 as i32));
            (_mm256_castsi256_ps(x0), _mm256_castsi256_ps(x1))
        }
    }
    #[inline(always)]
    unsafe fn store_bf16_pairs(self, p: *mut bf16, y0: __m256, y1: __m256) {
        // SAFETY: the token proves AVX2; the caller guarantees 16 writable bf16.
        unsafe {
            let lo = _mm256_srli_epi32::<16>(self.round_bf16(y0));
            let hi = _mm256_and_si256(self.round_bf16(y1), _mm256_set1_epi32(0xFFFF_0000u32 as i32));
            _mm256_storeu_si256(p.cast(), _mm256_or_si256(lo, hi));
        }
    }
    #[inline(always)]
    fn round_bf16_f32(self, v: __m256) -> __m256 {
        self.round_bf16_f32_quiet(self.canonicalize_nan(v))
    }
    #[inline(always)]
    fn round_bf16_f32_quiet(self, v: __m256) -> __m256 {
        let r = self.round_bf16(v);
        // SAFETY: the token proves AVX2.
        unsafe { _mm256_castsi256_ps(_mm256_and_si256(r, _mm256_set1_epi32(0xFFFF_0000u32 as i32))) }
    }
    #[inline(always)]
    fn tree_lanes(self, v: __m256) -> f32 {
        // SAFETY: the token proves AVX2.
        unsafe { tree_lanes8(v) }
    }
}

/// [`Simd::tree_lanes`] of 8 lanes in registers: `w = 4, 2, 1`, each step `v[j] + v[j + w]`.
///
/// # Safety
/// The CPU supports AVX (every x86-64 tier of this crate does).
#[inline(always)]
pub(super) unsafe fn tree_lanes8(v: __m256) -> f32 {
    // SAFETY: the caller's contract.
    unsafe {
        let b = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
        let c = _mm_add_ps(b, _mm_movehl_ps(b, b));
        _mm_cvtss_f32(_mm_add_ss(c, _mm_movehdup_ps(c)))
    }
}
