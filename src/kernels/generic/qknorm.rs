//! The per-head norm of fused QK-norm + RoPE (issue 15), written once over [`Simd`] like the
//! rotate kernel of the parent module and instantiated per tier (`norm_heads` in each tier
//! module), with its scalar oracle [`norm_heads_scalar`].
//!
//! # Operation order (bit-identity with the scalar oracle)
//! For one head of `head_dim` elements `x[i]` (each widened exactly to f32):
//!
//! 1. `sum(x²)`: 16 partial sums, `acc[i % 16] += x[i] * x[i]` for `i` ascending (a
//!    multiply, then an add: never fused), then a fixed pairwise tree
//!    `acc[j] += acc[j + w]` for `w = 8, 4, 2, 1`; the sum is `acc[0]`. A vector tier holds
//!    the 16 partial sums in `16 / LANES` vectors (AVX-512: one of 16 lanes, AVX2: two of 8,
//!    NEON and portable: four of 4), so every lane adds the same squares in the same order as
//!    the oracle; a head whose length is not a multiple of 16 is padded with zeros, and
//!    `acc + 0.0 == acc` bit for bit (a partial sum is never `-0.0`).
//! 2. `inv_rms = 1 / sqrt(sum / head_dim + eps)`: f32 division, add, `libm::sqrtf` and
//!    division, all correctly rounded IEEE 754 operations, computed once per head in scalar
//!    code on every tier.
//! 3. Per element, by [`NormForm`]:
//!    - `Weighted` (Qwen3RMSNorm): `y = round_T(w[i] * round_T(x[i] * inv_rms))`, the inner
//!      rounding being HF's `hidden_states.to(input_dtype)` before the weight multiply (a
//!      no-op for f32);
//!    - `OnePlus` (Gemma3RMSNorm): `y = round_T((x[i] * inv_rms) * (1 + w[i]))`;
//!    - `Plain` (Llama4TextL2Norm): `y = round_T(x[i] * inv_rms)`.
//!
//! PyTorch reduces `pow(2).mean(-1)` in its own (vectorised, thread-count dependent) order,
//! so `inv_rms` may differ from HF's in the last bits (relative 1e-7 for head_dim 128, well
//! within 1e-5).
//!
//! A head is given as two segments (elements `0..split` and `split..head_dim`) that may lie
//! in different buffers: the fused call keeps the rotated part of a head in a scratch buffer
//! while the pass-through part stays in the caller's tensor ([`NormArgs`]).

use core::ptr;

use super::{Simd, SimdElement, MAX_LANES};
use crate::element::Element;

/// Partial sums of `sum(x²)`: the fixed reduction width of every tier.
pub(crate) const PARTIALS: usize = 16;

/// The element-wise form of a norm (see the module docs for the exact formulas).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum NormForm {
    /// `w * round_T(x * inv_rms)` (Qwen3, OLMo-style weight).
    Weighted,
    /// `(x * inv_rms) * (1 + w)` (Gemma).
    OnePlus,
    /// `x * inv_rms` (Llama 4 L2 norm, no weight).
    Plain,
}

/// Arguments of one norm call over `heads` heads.
///
/// Head `h`'s elements `0..split` are read at `src0 + h * src0_stride` and written at
/// `dst0 + h * dst0_stride`; its elements `split..head_dim` are read at `src1 + h *
/// src1_stride` and written at `dst1 + h * dst1_stride` (`src1`, `dst1` point at element
/// `split` of head 0; unused when `split == head_dim`). A segment's source and destination
/// are equal (in place) or disjoint.
pub(crate) struct NormArgs<'a, T> {
    pub heads: usize,
    pub head_dim: usize,
    pub split: usize,
    pub src0: *const T,
    pub src0_stride: usize,
    pub dst0: *mut T,
    pub dst0_stride: usize,
    pub src1: *const T,
    pub src1_stride: usize,
    pub dst1: *mut T,
    pub dst1_stride: usize,
    /// `head_dim` entries for `Weighted` and `OnePlus`; empty for `Plain`.
    pub weight: &'a [f32],
    pub form: NormForm,
    pub eps: f32,
}

/// A norm kernel.
///
/// # Safety
/// Every segment range of every head described by [`NormArgs`] is valid (reads for the
/// sources, writes for the destinations); `weight.len() >= head_dim` unless the form is
/// `Plain`; each segment's source and destination are equal or do not overlap, and heads do
/// not overlap one another. The CPU supports the tier the function comes from.
pub(crate) type NormFn<T> = unsafe fn(&NormArgs<'_, T>);

/// The fixed pairwise tree over the partial sums.
#[inline(always)]
fn tree(mut acc: [f32; PARTIALS]) -> f32 {
    let mut w = PARTIALS / 2;
    while w > 0 {
        for j in 0..w {
            acc[j] += acc[j + w];
        }
        w /= 2;
    }
    acc[0]
}

/// `1 / sqrt(sum / head_dim + eps)`, correctly rounded step by step.
#[inline(always)]
pub(crate) fn inv_rms(sum: f32, head_dim: usize, eps: f32) -> f32 {
    1.0 / libm::sqrtf(sum / head_dim as f32 + eps)
}

/// The scalar form of one element (see the module docs).
#[inline(always)]
fn norm_elem<T: Element>(x: f32, inv: f32, w: f32, form: NormForm) -> T {
    match form {
        NormForm::Weighted => T::from_f32(w * T::from_f32(x * inv).to_f32()),
        NormForm::OnePlus => T::from_f32((x * inv) * (1.0 + w)),
        NormForm::Plain => T::from_f32(x * inv),
    }
}

/// The scalar oracle.
///
/// # Safety
/// The contract of [`NormFn`].
pub(crate) unsafe fn norm_heads_scalar<T: Element>(a: &NormArgs<'_, T>) {
    let (split, hd) = (a.split, a.head_dim);
    for h in 0..a.heads {
        let (s0, d0) = (a.src0.wrapping_add(h * a.src0_stride), a.dst0.wrapping_add(h * a.dst0_stride));
        let (s1, d1) = (a.src1.wrapping_add(h * a.src1_stride), a.dst1.wrapping_add(h * a.dst1_stride));
        // SAFETY: i < split reads segment 0, split <= i < head_dim segment 1 (contract).
        let x = |i: usize| {
            unsafe {
                if i < split {
                    *s0.add(i)
                } else {
                    *s1.add(i - split)
                }
            }
            .to_f32()
        };
        let mut acc = [0.0f32; PARTIALS];
        for i in 0..hd {
            acc[i % PARTIALS] += x(i) * x(i);
        }
        let inv = inv_rms(tree(acc), hd, a.eps);
        for i in 0..hd {
            let w = if a.form == NormForm::Plain { 0.0 } else { a.weight[i] };
            let y = norm_elem::<T>(x(i), inv, w, a.form);
            // SAFETY: as above, for the destinations; element i is read before it is written.
            unsafe {
                if i < split {
                    *d0.add(i) = y;
                } else {
                    *d1.add(i - split) = y;
                }
            }
        }
    }
}

/// The vector kernel behind every tier's `norm_heads`.
///
/// # Safety
/// The contract of [`NormFn`]; `s` proves the CPU supports its tier.
#[inline(always)]
pub(crate) unsafe fn norm_heads<S: Simd, T: SimdElement>(s: S, a: &NormArgs<'_, T>) {
    const { assert!(PARTIALS.is_multiple_of(S::LANES) && PARTIALS / S::LANES <= 4 && S::LANES <= MAX_LANES) };
    let (split, hd) = (a.split, a.head_dim);
    for h in 0..a.heads {
        let (s0, d0) = (a.src0.wrapping_add(h * a.src0_stride), a.dst0.wrapping_add(h * a.dst0_stride));
        let (s1, d1) = (a.src1.wrapping_add(h * a.src1_stride), a.dst1.wrapping_add(h * a.dst1_stride));
        // SAFETY: the segments of head h are valid (contract).
        let sum = unsafe { sum_squares(s, s0, split, s1, hd - split) };
        let inv = inv_rms(sum, hd, a.eps);
        let w = if a.form == NormForm::Plain { ptr::null() } else { a.weight.as_ptr() };
        // SAFETY: as above; weight has head_dim entries unless Plain (contract), and the
        // second segment's weights start at entry `split`.
        unsafe {
            scale_segment(s, s0, d0, split, inv, w, a.form);
            scale_segment(s, s1, d1, hd - split, inv, w.wrapping_add(split), a.form);
        }
    }
}

/// `sum(x²)` over `n0` elements at `p0` followed by `n1` at `p1`, in the order of the
/// module docs.
///
/// # Safety
/// `p0 .. p0 + n0` and `p1 .. p1 + n1` are valid for reads.
#[inline(always)]
unsafe fn sum_squares<S: Simd, T: SimdElement>(
    s: S,
    p0: *const T,
    n0: usize,
    p1: *const T,
    n1: usize,
) -> f32 {
    let lanes = S::LANES;
    let nv = PARTIALS / lanes;
    let zero = s.splat(0.0);
    let mut acc = [zero; 4];
    let n = n0 + n1;
    let mut i = 0;
    let mut pad = [T::default(); PARTIALS];
    while i < n {
        let p = if i + PARTIALS <= n0 {
            p0.wrapping_add(i)
        } else if i >= n0 && i + PARTIALS <= n {
            p1.wrapping_add(i - n0)
        } else {
            // A chunk across the segment boundary or at the end: gathered into zeros.
            for (j, e) in pad.iter_mut().enumerate() {
                let k = i + j;
                // SAFETY: k < n: inside one of the two segments.
                *e = if k >= n {
                    T::default()
                } else if k < n0 {
                    unsafe { *p0.add(k) }
                } else {
                    unsafe { *p1.add(k - n0) }
                };
            }
            pad.as_ptr()
        };
        for (j, a) in acc.iter_mut().enumerate().take(nv) {
            // SAFETY: `p` points at PARTIALS readable elements (a whole chunk of a segment,
            // or the pad).
            let x = unsafe { T::load(s, p.add(j * lanes)) };
            *a = s.add(*a, s.mul(x, x));
        }
        i += PARTIALS;
    }
    let mut parts = [0.0f32; PARTIALS];
    for (j, a) in acc.iter().enumerate().take(nv) {
        // SAFETY: j * lanes + lanes <= PARTIALS.
        unsafe { s.store(parts.as_mut_ptr().add(j * lanes), *a) };
    }
    tree(parts)
}

/// `dst[i] = form(src[i], inv, w[i])` for `i < n`.
///
/// # Safety
/// `src .. + n` valid for reads, `dst .. + n` for writes (equal or disjoint), `w .. + n`
/// for reads unless `form` is `Plain`.
#[inline(always)]
unsafe fn scale_segment<S: Simd, T: SimdElement>(
    s: S,
    src: *const T,
    dst: *mut T,
    n: usize,
    inv: f32,
    w: *const f32,
    form: NormForm,
) {
    let lanes = S::LANES;
    let body = n - n % lanes;
    let iv = s.splat(inv);
    let mut i = 0;
    while i < body {
        // SAFETY: i + lanes <= n.
        unsafe {
            let y = norm_vec::<S, T>(s, T::load(s, src.add(i)), iv, w.wrapping_add(i), form);
            T::store(s, dst.add(i), y);
        }
        i += lanes;
    }
    if body < n {
        let r = n - body;
        let mut x = [T::default(); MAX_LANES];
        let mut wv = [0.0f32; MAX_LANES];
        // SAFETY: r < lanes elements of each range; the stack buffers hold a full vector.
        unsafe {
            ptr::copy_nonoverlapping(src.add(body), x.as_mut_ptr(), r);
            if form != NormForm::Plain {
                ptr::copy_nonoverlapping(w.add(body), wv.as_mut_ptr(), r);
            }
            let y = norm_vec::<S, T>(s, T::load(s, x.as_ptr()), iv, wv.as_ptr(), form);
            T::store(s, x.as_mut_ptr(), y);
            ptr::copy_nonoverlapping(x.as_ptr(), dst.add(body), r);
        }
    }
}

/// One vector of [`scale_segment`]: the form of the module docs.
///
/// # Safety
/// `w .. w + S::LANES` is valid for reads unless `form` is `Plain`.
#[inline(always)]
unsafe fn norm_vec<S: Simd, T: SimdElement>(s: S, x: S::V, iv: S::V, w: *const f32, form: NormForm) -> S::V {
    let n = s.mul(x, iv);
    match form {
        NormForm::Plain => n,
        // SAFETY: forwarded from the caller.
        NormForm::OnePlus => s.mul(n, s.add(s.splat(1.0), unsafe { s.load(w) })),
        NormForm::Weighted => {
            // Round to the input type first (HF's `.to(input_dtype)`); exact for f32.
            let n = if core::mem::size_of::<T>() == 4 {
                n
            } else {
                let mut b = [T::default(); MAX_LANES];
                // SAFETY: the buffer holds a full vector.
                unsafe {
                    T::store(s, b.as_mut_ptr(), n);
                    T::load(s, b.as_ptr())
                }
            };
            // SAFETY: forwarded from the caller.
            s.mul(unsafe { s.load(w) }, n)
        }
    }
}
