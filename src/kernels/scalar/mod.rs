//! The scalar tier: the oracle every other tier is compared with bit for bit.
//!
//! Written for clarity, with no target features. See the module docs of
//! [`kernels`](super) for the exact operation order.

pub(crate) mod sincos;

use super::generic::convert::ConvertOut;
use super::q8_0::QK8_0;
use super::{kernels_table, ConvertArgs, Kernels, RotateArgs};
use crate::kernels::element::Element;
use crate::kernels::shape::PairLayout;
use crate::kernels::tier::Tier;
// The table's encoding row kernels are the oracles themselves.
// The per-head norm's oracle (fused QK-norm + RoPE).
pub(crate) use super::generic::qknorm::{
    norm_heads_scalar as norm_heads, norm_rope_heads_scalar as norm_rope_heads,
};
pub(crate) use super::rows::{add_row_scalar as add_row, alibi_row_scalar as alibi_row};

pub(crate) static KERNELS: Kernels = kernels_table!(Tier::Scalar, sincos::fill_row);

/// This tier's table: plain Rust, always there.
pub(crate) fn get() -> Option<&'static Kernels> {
    Some(&KERNELS)
}

/// Rotates one pair `(x0, x1)` by the angle whose cosine and sine are `c` and `s`.
/// This is the definition every tier reproduces.
#[inline(always)]
pub(crate) fn rotate_pair(x0: f32, x1: f32, c: f32, s: f32, inverse: bool) -> (f32, f32) {
    if inverse {
        ((x0 * c) + (x1 * s), (x1 * c) - (x0 * s))
    } else {
        ((x0 * c) - (x1 * s), (x1 * c) + (x0 * s))
    }
}

/// The index of the two members of pair `i` in a head.
#[inline(always)]
pub(crate) fn pair_index(layout: PairLayout, pairs: usize, i: usize) -> (usize, usize) {
    match layout {
        PairLayout::HalfSplit => (i, i + pairs),
        PairLayout::Interleaved => (2 * i, 2 * i + 1),
    }
}

/// # Safety
/// The contract of [`RotateFn`](super::RotateFn).
pub(crate) unsafe fn rotate<T: Element>(a: &RotateArgs<'_, T>) {
    let pairs = a.cos.len();
    let rotary_dim = 2 * pairs;
    let in_place = core::ptr::eq(a.src, a.dst);
    for h in 0..a.heads {
        // SAFETY: the caller guarantees both heads are in bounds (RotateFn contract);
        // `h * stride` stays within the allocation, so it cannot overflow.
        let (src, dst) = unsafe { (a.src.add(h * a.src_head_stride), a.dst.add(h * a.dst_head_stride)) };
        for i in 0..pairs {
            let (i0, i1) = pair_index(a.layout, pairs, i);
            // SAFETY: i0, i1 < rotary_dim <= head_dim, inside this head's range.
            let (x0, x1) = unsafe { ((*src.add(i0)).to_f32(), (*src.add(i1)).to_f32()) };
            let (y0, y1) = rotate_pair(x0, x1, a.cos[i], a.sin[i], a.inverse);
            // SAFETY: as above, for the destination head; both inputs are already read,
            // so writing in place cannot clobber an unread element of this pair.
            unsafe {
                *dst.add(i0) = T::from_f32(y0);
                *dst.add(i1) = T::from_f32(y1);
            }
        }
        if !in_place {
            // SAFETY: rotary_dim..head_dim lies in both heads; out-of-place buffers do not
            // overlap (contract).
            unsafe {
                core::ptr::copy_nonoverlapping(
                    src.add(rotary_dim),
                    dst.add(rotary_dim),
                    a.head_dim - rotary_dim,
                );
            }
        }
    }
}

/// One row at a time through [`rotate`].
///
/// # Safety
/// The contract of [`RotateRowsFn`](super::RotateRowsFn).
pub(crate) unsafe fn rotate_rows<T: Element>(a: &RotateArgs<'_, T>, cos_rows: &[f32], sin_rows: &[f32]) {
    let pairs = a.cos.len();
    for h in 0..a.heads {
        let r = h * pairs..(h + 1) * pairs;
        let one = RotateArgs {
            // SAFETY: head h is in bounds (contract); its offset stays in the allocation.
            src: unsafe { a.src.add(h * a.src_head_stride) },
            // SAFETY: as above, for the destination.
            dst: unsafe { a.dst.add(h * a.dst_head_stride) },
            heads: 1,
            cos: &cos_rows[r.clone()],
            sin: &sin_rows[r],
            ..*a
        };
        // SAFETY: one head of the caller's call, with its row.
        unsafe { rotate(&one) };
    }
}

#[cfg(feature = "bench-internals")]
/// The scalar roofline baseline: `x[i] = round(x[i] * c)`.
///
/// # Safety
/// The contract of [`ScaleFn`](super::ScaleFn).
pub(crate) unsafe fn scale<T: Element>(x: *mut T, len: usize, c: f32) {
    for i in 0..len {
        // SAFETY: i < len; the caller guarantees x .. x + len.
        unsafe { *x.add(i) = T::from_f32((*x.add(i)).to_f32() * c) };
    }
}

/// The f32 value of element `e` of one head of a convert call ([`ConvertArgs`]): for
/// `e < 2 * cos.len()` the member of its pair that [`rotate_pair`] gives, otherwise the
/// element widened.
///
/// # Safety
/// `src .. src + head_dim` is valid for reads, `e < head_dim`, `2 * cos.len() <= head_dim`,
/// `sin.len() == cos.len()`.
#[inline(always)]
pub(crate) unsafe fn convert_value<I: Element>(
    src: *const I,
    cos: &[f32],
    sin: &[f32],
    layout: PairLayout,
    inverse: bool,
    e: usize,
) -> f32 {
    let pairs = cos.len();
    if e >= 2 * pairs {
        // SAFETY: e < head_dim (contract).
        return unsafe { (*src.add(e)).to_f32() };
    }
    let (i, second) = match layout {
        PairLayout::HalfSplit => (e % pairs, e >= pairs),
        PairLayout::Interleaved => (e / 2, e % 2 == 1),
    };
    let (i0, i1) = pair_index(layout, pairs, i);
    // SAFETY: i0, i1 < rotary_dim <= head_dim.
    let (x0, x1) = unsafe { ((*src.add(i0)).to_f32(), (*src.add(i1)).to_f32()) };
    let (y0, y1) = rotate_pair(x0, x1, cos[i], sin[i], inverse);
    if second {
        y1
    } else {
        y0
    }
}

/// The convert oracle: each unit of `O` (one element, or one `q8_0` block of 32) is made
/// from the [`convert_value`]s of its elements (`O::from_f32`, or ggml's quantizer).
///
/// # Safety
/// The contract of [`ConvertFn`](super::ConvertFn).
pub(crate) unsafe fn convert<I: Element, O: ConvertOut>(a: &ConvertArgs<'_, I, O>) {
    let unit = O::UNIT;
    let mut values = [0.0f32; QK8_0];
    for h in 0..a.heads {
        // SAFETY: the caller guarantees both heads are in bounds (ConvertFn contract).
        let (src, dst) = unsafe { (a.src.add(h * a.src_head_stride), a.dst.add(h * a.dst_head_stride)) };
        for u in 0..a.head_dim / unit {
            for (j, v) in values[..unit].iter_mut().enumerate() {
                // SAFETY: u * unit + j < head_dim; the rest of the contract is the caller's.
                *v = unsafe { convert_value(src, a.cos, a.sin, a.layout, a.inverse, u * unit + j) };
            }
            // SAFETY: unit u < head_dim / unit of the destination head (contract).
            unsafe { dst.add(u).write(O::from_values(&values[..unit])) };
        }
    }
}
