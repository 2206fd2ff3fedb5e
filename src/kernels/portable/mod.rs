//! The portable tier: the generic kernel over `wide::f32x4`, compiled for the build's
//! baseline (SSE2 on x86-64, NEON on aarch64, simd128 on wasm32 with that feature, plain
//! arrays elsewhere). Available on every CPU the build runs on.
//!
//! `f16` has no baseline vector conversion on these targets, so its lanes are converted
//! one by one with `half`'s software routines (round to nearest even, the functions the
//! oracle uses); the arithmetic stays in vectors. `bf16` is widened by a 16-bit shift and rounded with
//! the integer rounding of [`Simd::store_bf16`] lane-wise in `u32x4`.

pub(crate) mod sincos;

use half::{bf16, f16};
use wide::{f32x4, u32x4};

use super::generic::{self, Simd, SimdElement};
use super::{kernels_table, Kernels, RotateArgs};
use crate::kernels::shape::PairLayout;
use crate::kernels::tier::Tier;

pub(crate) static KERNELS: Kernels = kernels_table!(Tier::Portable, sincos::fill_row);

/// This tier's table: the build's baseline, always there.
pub(crate) fn get() -> Option<&'static Kernels> {
    Some(&KERNELS)
}

/// The portable tier's token. Needs nothing beyond the build's baseline.
#[derive(Clone, Copy)]
pub(crate) struct Portable;

crate::kernels::tier_boundary! {
    token = Portable;

    /// # Safety
    /// The contract of [`RotateFn`](super::RotateFn).
    pub(crate) unsafe fn rotate<T: SimdElement>(a: &RotateArgs<'_, T>) {
        // One frame per layout, so that a call carries only its layout's buffers (the
        // Interleaved rows expansion stays out of HalfSplit calls: issue 13, microcontroller
        // stacks).
        match a.layout {
            // SAFETY: forwarded.
            PairLayout::HalfSplit => unsafe { rotate_in::<T, false>(a) },
            // SAFETY: forwarded.
            PairLayout::Interleaved => unsafe { rotate_in::<T, true>(a) },
        }
    }

    /// # Safety
    /// The contract of [`RotateRowsFn`](crate::kernels::RotateRowsFn) (and of `rotate`).
    pub(crate) unsafe fn rotate_rows<T: SimdElement>(a: &RotateArgs<'_, T>, cos_rows: &[f32], sin_rows: &[f32]) {
        // SAFETY: as in `rotate`.
        unsafe { generic::rotate_rows(Portable, a, cos_rows, sin_rows) }
    }
}

/// [`rotate`] for one layout (`INTERLEAVED`), known at compile time.
///
/// # Safety
/// The contract of [`RotateFn`](super::RotateFn); `a.layout` is the layout named.
#[inline(never)]
unsafe fn rotate_in<T: SimdElement, const INTERLEAVED: bool>(a: &RotateArgs<'_, T>) {
    let layout = if INTERLEAVED { PairLayout::Interleaved } else { PairLayout::HalfSplit };
    let a = RotateArgs { layout, ..*a };
    // SAFETY: forwarded (the same arguments); the baseline is always there.
    unsafe { generic::rotate(Portable, &a) }
}

impl Simd for Portable {
    const LANES: usize = 4;
    type V = f32x4;

    #[inline(always)]
    fn splat(self, x: f32) -> f32x4 {
        f32x4::splat(x)
    }
    #[inline(always)]
    unsafe fn load(self, p: *const f32) -> f32x4 {
        // SAFETY: the caller guarantees 4 readable f32; read_unaligned needs no alignment.
        f32x4::new(unsafe { p.cast::<[f32; 4]>().read_unaligned() })
    }
    #[inline(always)]
    unsafe fn store(self, p: *mut f32, v: f32x4) {
        // SAFETY: the caller guarantees 4 writable f32.
        unsafe { p.cast::<[f32; 4]>().write_unaligned(v.to_array()) }
    }
    #[inline(always)]
    fn add(self, a: f32x4, b: f32x4) -> f32x4 {
        a + b
    }
    #[inline(always)]
    fn sub(self, a: f32x4, b: f32x4) -> f32x4 {
        a - b
    }
    #[inline(always)]
    fn mul(self, a: f32x4, b: f32x4) -> f32x4 {
        a * b
    }
    #[inline(always)]
    fn xor(self, a: f32x4, b: f32x4) -> f32x4 {
        a ^ b
    }
    #[inline(always)]
    fn abs(self, a: f32x4) -> f32x4 {
        a.abs()
    }
    #[inline(always)]
    fn max_abs(self, a: f32x4, b: f32x4) -> f32x4 {
        // Integer maxima of the bits (see the trait).
        f32x4::from_bits(a.to_bits().max(b.to_bits()))
    }
    #[inline(always)]
    unsafe fn store_round_i8(self, p: *mut i8, q: f32x4) {
        // |q| < 127.5: `as i32` truncates toward zero exactly (see the trait).
        let r = q.to_array().map(|q| {
            let i = q as i32;
            let f = q - i as f32;
            (i + (f + f) as i32) as i8
        });
        // SAFETY: the caller guarantees 4 writable i8.
        unsafe { p.cast::<[i8; 4]>().write_unaligned(r) }
    }
    #[inline(always)]
    fn f16_of(self, x: f32) -> f16 {
        f16::from_f32_const(x)
    }
    #[inline(always)]
    fn swap_pairs(self, v: f32x4) -> f32x4 {
        let [a, b, c, d] = v.to_array();
        f32x4::new([b, a, d, c])
    }
    #[inline(always)]
    fn zip(self, a: f32x4, b: f32x4) -> (f32x4, f32x4) {
        (a.unpack_lo(b), a.unpack_hi(b))
    }
    #[inline(always)]
    fn any_nan(self, a: f32x4, b: f32x4) -> bool {
        (a.is_nan() | b.is_nan()).any()
    }
    #[inline(always)]
    fn canonicalize_nan(self, v: f32x4) -> f32x4 {
        v.is_nan().select(f32x4::splat(f32::from_bits(crate::kernels::element::CANONICAL_NAN_F32)), v)
    }
    #[inline(always)]
    unsafe fn load_f16(self, p: *const f16) -> f32x4 {
        // SAFETY: the caller guarantees 4 readable f16.
        let h = unsafe { p.cast::<[f16; 4]>().read_unaligned() };
        f32x4::new(h.map(f16::to_f32_const))
    }
    #[inline(always)]
    unsafe fn store_f16(self, p: *mut f16, v: f32x4) {
        // SAFETY: the caller guarantees 4 writable f16.
        unsafe { p.cast::<[f16; 4]>().write_unaligned(v.to_array().map(f16::from_f32_const)) }
    }
    #[inline(always)]
    unsafe fn load_bf16(self, p: *const bf16) -> f32x4 {
        // SAFETY: the caller guarantees 4 readable bf16.
        let h = unsafe { p.cast::<[u16; 4]>().read_unaligned() };
        f32x4::from_bits(u32x4::new(h.map(u32::from)) << 16)
    }
    #[inline(always)]
    unsafe fn store_bf16(self, p: *mut bf16, v: f32x4) {
        let r: u32x4 = round_bf16(v) >> 16;
        let r = r.to_array();
        // SAFETY: the caller guarantees 4 writable bf16.
        unsafe { p.cast::<[u16; 4]>().write_unaligned(r.map(|x| x as u16)) }
    }
    #[inline(always)]
    unsafe fn load_bf16_pairs(self, p: *const bf16) -> (f32x4, f32x4) {
        // SAFETY: the caller guarantees 8 readable bf16.
        let h = unsafe { p.cast::<[u16; 8]>().read_unaligned() };
        // The pair word `x1 << 16 | x0`, built explicitly (any endianness).
        let w = u32x4::new([0, 1, 2, 3].map(|i| u32::from(h[2 * i]) | u32::from(h[2 * i + 1]) << 16));
        (f32x4::from_bits(w << 16), f32x4::from_bits(w & u32x4::splat(0xFFFF_0000)))
    }
    #[inline(always)]
    unsafe fn store_bf16_pairs(self, p: *mut bf16, y0: f32x4, y1: f32x4) {
        let (lo, hi): (u32x4, u32x4) = (round_bf16(y0) >> 16, round_bf16(y1) >> 16);
        let (lo, hi) = (lo.to_array(), hi.to_array());
        let h: [u16; 8] =
            core::array::from_fn(|i| if i % 2 == 0 { lo[i / 2] as u16 } else { hi[i / 2] as u16 });
        // SAFETY: the caller guarantees 8 writable bf16.
        unsafe { p.cast::<[u16; 8]>().write_unaligned(h) }
    }
    #[inline(always)]
    fn round_bf16_f32(self, v: f32x4) -> f32x4 {
        self.round_bf16_f32_quiet(self.canonicalize_nan(v))
    }
    #[inline(always)]
    fn round_bf16_f32_quiet(self, v: f32x4) -> f32x4 {
        f32x4::from_bits(round_bf16(v) & u32x4::splat(0xFFFF_0000))
    }
}

/// `bits + 0x7FFF + ((bits >> 16) & 1)` per lane: the bf16 rounding of
/// [`Simd::store_bf16`]; the rounded bf16 is the high half.
#[inline(always)]
fn round_bf16(v: f32x4) -> u32x4 {
    let bits = v.to_bits();
    let lsb: u32x4 = (bits >> 16) & u32x4::splat(1);
    bits + u32x4::splat(0x7FFF) + lsb
}

#[cfg(test)]
mod tests {
    use half::bf16;

    use super::{Portable, Simd};

    /// The bf16 pair path does not depend on the byte order: element `2i` is lane `i` of
    /// `x0` and element `2i + 1` lane `i` of `x1` on little- and big-endian targets alike
    /// (a plain `u32` load of the pair would swap them on big-endian; `tests/cross_arch.rs`
    /// checks the whole rotation's bits against x86-64).
    #[test]
    fn bf16_pairs_keep_element_order_on_any_byte_order() {
        let x: [bf16; 8] = core::array::from_fn(|i| bf16::from_f32(i as f32 + 1.0));
        // SAFETY: `x` holds 8 readable bf16.
        let (x0, x1) = unsafe { Portable.load_bf16_pairs(x.as_ptr()) };
        assert_eq!(x0.to_array(), [1.0, 3.0, 5.0, 7.0]);
        assert_eq!(x1.to_array(), [2.0, 4.0, 6.0, 8.0]);
        let mut y = [bf16::ZERO; 8];
        // SAFETY: `y` holds 8 writable bf16.
        unsafe { Portable.store_bf16_pairs(y.as_mut_ptr(), x0, x1) };
        assert_eq!(y, x);
        let endian = if cfg!(target_endian = "little") { "little" } else { "big" };
        std::println!("portable bf16 pairs: element order kept ({endian}-endian)");
    }
}
