//! The roofline baseline `scale` (feature `bench-internals`): `x[i] = round(x[i] * c)`
//! through the rotations' own load/convert/store path.

use super::*;

/// The roofline baseline: `x[i] = round(x[i] * c)` in place through the same
/// load/convert/store path as [`rotate`] (so NaN canonicalisation included).
///
/// # Safety
/// `x .. x + len` is valid for reads and writes; `s` proves the CPU supports its tier.
#[inline(always)]
pub(crate) unsafe fn scale<S: Simd, T: SimdElement>(s: S, x: *mut T, len: usize, c: f32) {
    // SAFETY: forwarded from the caller.
    if unsafe { T::scale_special(s, x, len, c) } {
        return;
    }
    // SAFETY: forwarded from the caller.
    unsafe { scale_generic(s, x, len, c) }
}

/// [`scale`] through [`SimdElement::load`] and [`SimdElement::store2`].
///
/// # Safety
/// As [`scale`].
#[inline(always)]
pub(super) unsafe fn scale_generic<S: Simd, T: SimdElement>(s: S, x: *mut T, len: usize, c: f32) {
    let lanes = S::LANES;
    let body2 = len - len % (2 * lanes);
    let body = len - len % lanes;
    let cv = s.splat(c);
    let mut i = 0;
    // Two vectors per step with one NaN check, as the rotate kernels store.
    while i < body2 {
        s.prefetch(x.wrapping_add(i).cast::<u8>().wrapping_add(SCALE_PREFETCH_BYTES));
        // SAFETY: i + 2 * lanes <= len.
        unsafe {
            let (p0, p1) = (x.add(i), x.add(i + lanes));
            let (y0, y1) = (s.mul(T::load(s, p0), cv), s.mul(T::load(s, p1), cv));
            T::store2(s, [p0, p1], [y0, y1]);
        }
        i += 2 * lanes;
    }
    if body2 < body {
        // SAFETY: body2 + lanes == body <= len.
        unsafe {
            let p = x.add(body2);
            T::store(s, p, s.mul(T::load(s, p), cv));
        }
    }
    if body < len {
        // SAFETY: body..len is in bounds; the pad holds a full vector.
        unsafe {
            let mut b = Pad::read(x.add(body), len - body);
            let p = b.0.as_mut_ptr();
            T::store(s, p, s.mul(T::load(s, p), cv));
            b.write(x.add(body), len - body);
        }
    }
}
