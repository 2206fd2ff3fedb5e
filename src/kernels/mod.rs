//! The kernel tiers and the signature table they share.
//!
//! Each tier module exposes one `pub(crate) static KERNELS: Kernels`. The scalar tier is
//! the oracle: every other tier must produce bit-identical output for every input. To keep
//! that possible, every tier performs the same f32 operations in the same order and none
//! fuses a multiply with an add:
//!
//! ```text
//! forward:  y0 = (x0 * cos) - (x1 * sin)      inverse:  y0 = (x0 * cos) + (x1 * sin)
//!           y1 = (x1 * cos) + (x0 * sin)                y1 = (x1 * cos) - (x0 * sin)
//! ```
//!
//! where `(x0, x1)` is a pair (see [`Layout`](crate::Layout)), then each result is rounded
//! once to the element type ([`Element::from_f32`](crate::Element::from_f32)).

use half::{bf16, f16};

use crate::config::Layout;
use crate::dispatch::Tier;

#[cfg(feature = "__broken-tier-for-fuzz-demo")]
pub(crate) mod mutant;
pub(crate) mod scalar;
pub(crate) mod sincos;

/// Arguments of one rotate call: the heads of one token of one tensor.
///
/// Head `h` reads `head_dim` elements at `src + h * src_head_stride` and writes them at
/// `dst + h * dst_head_stride`. Elements `0..rotary_dim` are rotated pairwise with
/// `cos[i]`, `sin[i]` for pair `i`; elements `rotary_dim..head_dim` are copied when
/// `src != dst` and left alone otherwise.
pub(crate) struct RotateArgs<'a, T> {
    pub src: *const T,
    pub dst: *mut T,
    pub heads: usize,
    pub src_head_stride: usize,
    pub dst_head_stride: usize,
    pub head_dim: usize,
    /// `rotary_dim / 2` values each; `sin.len() == cos.len()`.
    pub cos: &'a [f32],
    pub sin: &'a [f32],
    pub layout: Layout,
    pub inverse: bool,
}

/// A rotate kernel.
///
/// # Safety
/// For every head `h < heads`, `src + h * src_head_stride .. + head_dim` must be valid for
/// reads and `dst + h * dst_head_stride .. + head_dim` valid for writes; `2 * cos.len() <=
/// head_dim`. Either `src == dst` with equal head strides (in place), or the source and
/// destination ranges do not overlap at all. The heads must not overlap one another.
pub(crate) type RotateFn<T> = unsafe fn(&RotateArgs<'_, T>);

/// One tier's entry points.
pub(crate) struct Kernels {
    pub tier: Tier,
    pub rotate_f32: RotateFn<f32>,
    pub rotate_f16: RotateFn<f16>,
    pub rotate_bf16: RotateFn<bf16>,
}

/// Picks the entry point for an element type out of a [`Kernels`] table.
pub(crate) trait SelectKernel: Sized {
    fn rotate_fn(k: &Kernels) -> RotateFn<Self>;
}

impl SelectKernel for f32 {
    #[inline(always)]
    fn rotate_fn(k: &Kernels) -> RotateFn<Self> {
        k.rotate_f32
    }
}

impl SelectKernel for f16 {
    #[inline(always)]
    fn rotate_fn(k: &Kernels) -> RotateFn<Self> {
        k.rotate_f16
    }
}

impl SelectKernel for bf16 {
    #[inline(always)]
    fn rotate_fn(k: &Kernels) -> RotateFn<Self> {
        k.rotate_bf16
    }
}
