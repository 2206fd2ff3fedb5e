//! The NEON tier: 4 f32 lanes; `f16` through `fcvtl`/`fcvtn`, `bf16` through `ushll`/`shrn`.
//!
//! NEON is part of the aarch64 baseline, so the token needs no runtime check. The f16
//! conversions are written as inline assembly because their intrinsics
//! (`vcvt_f32_f16`, `vcvt_f16_f32`) are stable only from Rust 1.94, above this crate's
//! MSRV. Both instructions are in base ARMv8.0 Advanced SIMD; `fcvtn` rounds by FPCR,
//! which Rust code always runs with its default (round to nearest even, no flush to zero),
//! so subnormal f16 results are kept.

pub(crate) mod sincos;

use core::arch::aarch64::*;
use core::arch::asm;

use half::{bf16, f16};

use crate::kernels::generic::{self, Simd, SimdElement};
use crate::kernels::tier::Tier;
use crate::kernels::{kernels_table, Kernels, RotateArgs};

pub(crate) static KERNELS: Kernels = kernels_table!(Tier::Neon, sincos::fill_row);

/// This tier's table: NEON is part of every aarch64 target's baseline.
pub(crate) fn get() -> Option<&'static Kernels> {
    cfg!(target_feature = "neon").then_some(&KERNELS)
}

/// Proof that the CPU supports NEON (always true on aarch64).
#[derive(Clone, Copy)]
pub(crate) struct Neon(());

impl Neon {
    /// `bits + 0x7FFF + ((bits >> 16) & 1)` per lane: the bf16 rounding of
    /// [`Simd::store_bf16`]; the rounded bf16 is the high half.
    #[inline(always)]
    fn round_bf16(self, v: float32x4_t) -> uint32x4_t {
        // SAFETY: the token proves NEON.
        unsafe {
            let bits = vreinterpretq_u32_f32(v);
            let lsb = vandq_u32(vshrq_n_u32::<16>(bits), vdupq_n_u32(1));
            vaddq_u32(vaddq_u32(bits, vdupq_n_u32(0x7FFF)), lsb)
        }
    }
}

crate::kernels::tier_boundary! {
    features = "neon",
    token = Neon(());

    /// # Safety
    /// The contract of [`RotateFn`](crate::kernels::RotateFn).
    pub(crate) unsafe fn rotate<T: SimdElement>(a: &RotateArgs<'_, T>) {
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
        unsafe { generic::rotate_in::<_, _, L>(Neon(()), a) }
    }

    /// # Safety
    /// The contract of [`RotateRowsFn`](crate::kernels::RotateRowsFn) (and of `rotate`).
    pub(crate) unsafe fn rotate_rows<T: SimdElement>(a: &RotateArgs<'_, T>, cos_rows: &[f32], sin_rows: &[f32]) {
        // SAFETY: as in `rotate`.
        unsafe { generic::rotate_rows(Neon(()), a, cos_rows, sin_rows) }
    }
}

impl Simd for Neon {
    const LANES: usize = 4;
    type V = float32x4_t;

    #[inline(always)]
    fn splat(self, x: f32) -> float32x4_t {
        // SAFETY: the token proves NEON.
        unsafe { vdupq_n_f32(x) }
    }
    #[inline(always)]
    unsafe fn load(self, p: *const f32) -> float32x4_t {
        // SAFETY: the token proves NEON; the caller guarantees 4 readable f32 (`ld1` needs
        // no alignment beyond the element's).
        unsafe { vld1q_f32(p) }
    }
    #[inline(always)]
    unsafe fn store(self, p: *mut f32, v: float32x4_t) {
        // SAFETY: the token proves NEON; the caller guarantees 4 writable f32.
        unsafe { vst1q_f32(p, v) }
    }
    #[inline(always)]
    fn add(self, a: float32x4_t, b: float32x4_t) -> float32x4_t {
        // SAFETY: the token proves NEON.
        unsafe { vaddq_f32(a, b) }
    }
    #[inline(always)]
    fn sub(self, a: float32x4_t, b: float32x4_t) -> float32x4_t {
        // SAFETY: the token proves NEON.
        unsafe { vsubq_f32(a, b) }
    }
    #[inline(always)]
    fn mul(self, a: float32x4_t, b: float32x4_t) -> float32x4_t {
        // SAFETY: the token proves NEON.
        unsafe { vmulq_f32(a, b) }
    }
    #[inline(always)]
    fn xor(self, a: float32x4_t, b: float32x4_t) -> float32x4_t {
        // SAFETY: the token proves NEON.
        unsafe { vreinterpretq_f32_u32(veorq_u32(vreinterpretq_u32_f32(a), vreinterpretq_u32_f32(b))) }
    }
    #[inline(always)]
    fn abs(self, a: float32x4_t) -> float32x4_t {
        // SAFETY: the token proves NEON.
        unsafe { vabsq_f32(a) }
    }
    #[inline(always)]
    fn max_abs(self, a: float32x4_t, b: float32x4_t) -> float32x4_t {
        // SAFETY: the token proves NEON. Integer maxima of the bits (see the trait).
        unsafe { vreinterpretq_f32_u32(vmaxq_u32(vreinterpretq_u32_f32(a), vreinterpretq_u32_f32(b))) }
    }
    #[inline(always)]
    fn reduce_max_abs(self, v: float32x4_t) -> f32 {
        // SAFETY: the token proves NEON; integer maxima as in `max_abs`.
        unsafe { f32::from_bits(vmaxvq_u32(vreinterpretq_u32_f32(v))) }
    }
    #[inline(always)]
    unsafe fn store_round_i8(self, p: *mut i8, q: float32x4_t) {
        // SAFETY: the token proves NEON; the caller guarantees 4 writable i8. `fcvtzs`
        // truncates (exact here); the results lie in -127..=127, so the narrowings are
        // exact; the NEON tier is little-endian, so the word's bytes are lanes 0..4.
        unsafe {
            let i = vcvtq_s32_f32(q);
            let f = vsubq_f32(q, vcvtq_f32_s32(i));
            let r = vaddq_s32(i, vcvtq_s32_f32(vaddq_f32(f, f)));
            let n = vmovn_s32(r);
            let b = vmovn_s16(vcombine_s16(n, n));
            p.cast::<u32>().write_unaligned(vget_lane_u32::<0>(vreinterpret_u32_s8(b)));
        }
    }
    #[inline(always)]
    fn swap_pairs(self, v: float32x4_t) -> float32x4_t {
        // SAFETY: the token proves NEON.
        unsafe { vrev64q_f32(v) }
    }
    #[inline(always)]
    fn zip(self, a: float32x4_t, b: float32x4_t) -> (float32x4_t, float32x4_t) {
        // SAFETY: the token proves NEON.
        unsafe { (vzip1q_f32(a, b), vzip2q_f32(a, b)) }
    }
    #[inline(always)]
    fn any_nan(self, a: float32x4_t, b: float32x4_t) -> bool {
        // SAFETY: the token proves NEON.
        unsafe { vminvq_u32(vandq_u32(vceqq_f32(a, a), vceqq_f32(b, b))) == 0 }
    }
    #[inline(always)]
    fn canonicalize_nan(self, v: float32x4_t) -> float32x4_t {
        // SAFETY: the token proves NEON.
        unsafe {
            // All ones where v == v, i.e. not NaN.
            let ordered = vceqq_f32(v, v);
            vbslq_f32(
                ordered,
                v,
                vreinterpretq_f32_u32(vdupq_n_u32(crate::kernels::element::CANONICAL_NAN_F32)),
            )
        }
    }
    #[inline(always)]
    unsafe fn load_f16(self, p: *const f16) -> float32x4_t {
        // SAFETY: the token proves NEON; the caller guarantees 4 readable f16. `fcvtl`
        // only reads and writes the named registers.
        unsafe {
            let h = vld1_u16(p.cast());
            let r: float32x4_t;
            asm!("fcvtl {r:v}.4s, {h:v}.4h", r = lateout(vreg) r, h = in(vreg) h,
                options(pure, nomem, nostack, preserves_flags));
            r
        }
    }
    #[inline(always)]
    unsafe fn store_f16(self, p: *mut f16, v: float32x4_t) {
        // SAFETY: the token proves NEON; the caller guarantees 4 writable f16. `fcvtn`
        // only reads and writes the named registers.
        unsafe {
            let h: uint16x4_t;
            asm!("fcvtn {h:v}.4h, {v:v}.4s", h = lateout(vreg) h, v = in(vreg) v,
                options(pure, nomem, nostack, preserves_flags));
            vst1_u16(p.cast(), h);
        }
    }
    #[inline(always)]
    unsafe fn load_bf16(self, p: *const bf16) -> float32x4_t {
        // SAFETY: the token proves NEON; the caller guarantees 4 readable bf16.
        unsafe { vreinterpretq_f32_u32(vshll_n_u16::<16>(vld1_u16(p.cast()))) }
    }
    #[inline(always)]
    unsafe fn store_bf16(self, p: *mut bf16, v: float32x4_t) {
        // SAFETY: the token proves NEON; the caller guarantees 4 writable bf16.
        unsafe {
            vst1_u16(p.cast(), vshrn_n_u32::<16>(self.round_bf16(v)));
        }
    }
    #[inline(always)]
    unsafe fn store_bf16_run2(self, p: *mut bf16, v0: float32x4_t, v1: float32x4_t) {
        // SAFETY: the token proves NEON; the caller guarantees 8 writable bf16.
        unsafe {
            let lo = vshrn_n_u32::<16>(self.round_bf16(v0));
            vst1q_u16(p.cast(), vshrn_high_n_u32::<16>(lo, self.round_bf16(v1)));
        }
    }
    #[inline(always)]
    unsafe fn load_bf16_pairs(self, p: *const bf16) -> (float32x4_t, float32x4_t) {
        // SAFETY: the token proves NEON; the caller guarantees 8 readable bf16. The NEON
        // tier is little-endian only, so a pair is the word `x1 << 16 | x0`.
        unsafe {
            let w = vreinterpretq_u32_u16(vld1q_u16(p.cast()));
            let x0 = vshlq_n_u32::<16>(w);
            let x1 = vandq_u32(w, vdupq_n_u32(0xFFFF_0000));
            (vreinterpretq_f32_u32(x0), vreinterpretq_f32_u32(x1))
        }
    }
    #[inline(always)]
    unsafe fn store_bf16_pairs(self, p: *mut bf16, y0: float32x4_t, y1: float32x4_t) {
        // SAFETY: the token proves NEON; the caller guarantees 8 writable bf16.
        unsafe {
            let w = vorrq_u32(
                vshrq_n_u32::<16>(self.round_bf16(y0)),
                vandq_u32(self.round_bf16(y1), vdupq_n_u32(0xFFFF_0000)),
            );
            vst1q_u16(p.cast(), vreinterpretq_u16_u32(w));
        }
    }
    #[inline(always)]
    fn round_bf16_f32(self, v: float32x4_t) -> float32x4_t {
        self.round_bf16_f32_quiet(self.canonicalize_nan(v))
    }
    #[inline(always)]
    fn round_bf16_f32_quiet(self, v: float32x4_t) -> float32x4_t {
        let r = self.round_bf16(v);
        // SAFETY: the token proves NEON.
        unsafe { vreinterpretq_f32_u32(vandq_u32(r, vdupq_n_u32(0xFFFF_0000))) }
    }
}
