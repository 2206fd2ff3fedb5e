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

use core::mem::MaybeUninit;

use half::bf16;

use super::{heads_ahead, prefetch_range, store_words, Row, Simd, SimdElement, MAX_LANES, SPLIT_ENTRIES};
use crate::kernels::element::Element;
use crate::kernels::shape::{PairLayout, MAX_ROTARY_DIM};
use crate::kernels::RotateArgs;

mod rope;
pub(crate) use rope::{norm_rope_heads, norm_rope_heads_scalar, NormRopeArgs, NormRopeFn};

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
    /// Prefetch heads ahead (a hint, as [`RotateArgs::prefetch`](crate::kernels::RotateArgs)).
    pub prefetch: bool,
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
pub(super) fn tree(mut acc: [f32; PARTIALS]) -> f32 {
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
    1.0 / sqrt(sum / head_dim as f32 + eps)
}

/// The correctly rounded IEEE 754 square root: the baseline instruction of the target
/// (`sqrtss` on x86-64, `fsqrt` on aarch64), else (and under Miri) `libm::sqrtf`, whose
/// software square root is also correctly rounded and about 10x slower (it dominated the
/// norm's time).
#[inline(always)]
pub(super) fn sqrt(x: f32) -> f32 {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    {
        use core::arch::x86_64::{_mm_cvtss_f32, _mm_set_ss, _mm_sqrt_ss};
        // SAFETY: SSE is part of the x86-64 baseline.
        unsafe { _mm_cvtss_f32(_mm_sqrt_ss(_mm_set_ss(x))) }
    }
    #[cfg(all(target_arch = "aarch64", not(miri)))]
    {
        use core::arch::aarch64::{vdup_n_f32, vget_lane_f32, vsqrt_f32};
        // SAFETY: NEON is part of the aarch64 baseline.
        unsafe { vget_lane_f32::<0>(vsqrt_f32(vdup_n_f32(x))) }
    }
    #[cfg(not(all(any(target_arch = "x86_64", target_arch = "aarch64"), not(miri))))]
    {
        libm::sqrtf(x)
    }
}

/// The scalar form of one element (see the module docs).
#[inline(always)]
pub(super) fn norm_elem<T: Element>(x: f32, inv: f32, w: f32, form: NormForm) -> T {
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
        let x = |i: usize| {
            // SAFETY: i < split reads segment 0, split <= i < head_dim segment 1 (contract).
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
/// Heads of one segment (`split == head_dim`) of 4, 8 or 16 whole vectors take the register
/// path [`norm_whole`]; the rest this generic one, in two phases per chunk of up to
/// [`CHUNK`] heads: first every head's `inv_rms` (the sums of [`GROUP`] heads accumulated
/// side by side, independent dependency chains), then every head's output, so that a head's
/// reduction, square root and division never stall the loop that writes it (one head at a
/// time measured latency bound). The chunk's heads are still in L1 for the second phase.
/// The order of the operations within each head is unchanged.
///
/// # Safety
/// The contract of [`NormFn`]; `s` proves the CPU supports its tier.
#[inline(always)]
pub(crate) unsafe fn norm_heads<S: Simd, T: SimdElement>(s: S, a: &NormArgs<'_, T>) {
    let (split, hd) = (a.split, a.head_dim);
    // Heads of one segment and whole vectors: the register path.
    if split == hd && hd % (2 * S::LANES) == 0 {
        // SAFETY: forwarded from the caller; head_dim = NV * LANES, one segment.
        unsafe {
            match hd / S::LANES {
                4 => return norm_whole_form::<S, T, 4>(s, a, a.form),
                8 => return norm_whole_form::<S, T, 8>(s, a, a.form),
                16 => return norm_whole_form::<S, T, 16>(s, a, a.form),
                _ => {}
            }
        }
    }
    let w = if a.form == NormForm::Plain { ptr::null() } else { a.weight.as_ptr() };
    let mut inv = [0.0f32; CHUNK];
    let mut h0 = 0;
    while h0 < a.heads {
        let n = CHUNK.min(a.heads - h0);
        // SAFETY: heads h0 .. h0 + n exist (contract).
        unsafe { inv_rms_heads(s, a, h0, n, &mut inv) };
        for (j, &inv) in inv.iter().enumerate().take(n) {
            let h = h0 + j;
            let (s0, d0) = (a.src0.wrapping_add(h * a.src0_stride), a.dst0.wrapping_add(h * a.dst0_stride));
            let (s1, d1) = (a.src1.wrapping_add(h * a.src1_stride), a.dst1.wrapping_add(h * a.dst1_stride));
            // SAFETY: head h's segments are valid (contract); weight has head_dim entries
            // unless Plain, the second segment's from entry `split`; every head was read for
            // its sum before this chunk's first write, and each head's destination is its own.
            unsafe {
                scale_segment(s, s0, d0, split, inv, w, a.form);
                scale_segment(s, s1, d1, hd - split, inv, w.wrapping_add(split), a.form);
            }
        }
        h0 += n;
    }
}

/// [`norm_whole`] for the form `form`.
///
/// # Safety
/// As [`norm_whole`].
#[inline(always)]
pub(super) unsafe fn norm_whole_form<S: Simd, T: SimdElement, const NV: usize>(
    s: S,
    a: &NormArgs<'_, T>,
    form: NormForm,
) {
    // SAFETY: forwarded from the caller.
    unsafe {
        match form {
            NormForm::Weighted => norm_whole::<S, T, WEIGHTED, NV>(s, a),
            NormForm::OnePlus => norm_whole::<S, T, ONE_PLUS, NV>(s, a),
            NormForm::Plain => norm_whole::<S, T, PLAIN, NV>(s, a),
        }
    }
}

/// [`norm_heads`] for heads of one segment (`split == head_dim`) of `NV * S::LANES`
/// elements (`NV` even), as [`half_split_whole`](rope::half_split_whole) walks them: in
/// chunks of up to [`CHUNK`] heads, first every head's `inv_rms` ([`head_inv_rms`]: the order of the module docs),
/// then each head read again (from L1, or L2 for a chunk larger than L1), scaled and stored,
/// the weights loaded once per call (into registers where they fit; 16 vectors spill on
/// AVX2, NEON and portable). The generic path (segments, gathered chunks, pointers per head)
/// took about 2x a RoPE pass over the same bytes (f32 prefill, Qwen3-8B shapes, 512 tokens:
/// AVX-512 302-327 against 150 µs, this path 173-179 µs; AVX2 326-330, this path 213-217 µs).
/// The operations per element are [`scale_segment`]'s.
///
/// # Safety
/// As [`norm_heads`], with `split == head_dim == NV * S::LANES`.
#[cfg_attr(debug_assertions, inline(never))]
#[cfg_attr(not(debug_assertions), inline(always))]
pub(super) unsafe fn norm_whole<S: Simd, T: SimdElement, const F: u8, const NV: usize>(
    s: S,
    a: &NormArgs<'_, T>,
) {
    let lanes = S::LANES;
    let mut w = [s.splat(0.0); NV];
    if F & FORM != PLAIN {
        for (v, w) in w.iter_mut().enumerate() {
            // SAFETY: the weight has head_dim = NV * lanes entries unless Plain.
            *w = unsafe { s.load(a.weight.as_ptr().add(v * lanes)) };
        }
    }
    let head_bytes = a.head_dim * core::mem::size_of::<T>();
    let ahead = heads_ahead(head_bytes);
    let mut inv = [0.0f32; CHUNK];
    let mut h0 = 0;
    while h0 < a.heads {
        let n = CHUNK.min(a.heads - h0);
        for (j, inv) in inv.iter_mut().enumerate().take(n) {
            let h = h0 + j;
            // Wrapping: past the call they are only hints.
            let next = a.src0.wrapping_add(h.wrapping_add(ahead).wrapping_mul(a.src0_stride));
            prefetch_range(s, a.prefetch, next.cast(), head_bytes);
            // SAFETY: head h exists (contract).
            *inv = unsafe {
                head_inv_rms::<S, T, NV>(s, a.src0.wrapping_add(h * a.src0_stride), a.head_dim, a.eps)
            };
        }
        for (j, &inv) in inv.iter().enumerate().take(n) {
            let h = h0 + j;
            let iv = s.splat(inv);
            let (src, dst) = (a.src0.wrapping_add(h * a.src0_stride), a.dst0.wrapping_add(h * a.dst0_stride));
            for k in (0..NV).step_by(2) {
                // SAFETY: vectors k, k + 1 < NV of head h (contract); each store follows
                // the loads of the same elements (in place: equal pointers).
                unsafe {
                    let (x0, x1) = (T::load(s, src.add(k * lanes)), T::load(s, src.add((k + 1) * lanes)));
                    let y = [normed_w::<S, T, F>(s, x0, iv, w[k]), normed_w::<S, T, F>(s, x1, iv, w[k + 1])];
                    T::store2(s, [dst.add(k * lanes), dst.add((k + 1) * lanes)], y);
                }
            }
        }
        h0 += n;
    }
}

/// Heads whose `inv_rms` [`norm_heads`] computes before writing any of them.
pub(super) const CHUNK: usize = 64;

/// Heads whose sums [`inv_rms_heads`] accumulates side by side.
pub(super) const GROUP: usize = 4;

/// `inv[j]` = `inv_rms` of head `h0 + j` of `a`, for `j < n <= CHUNK`.
///
/// # Safety
/// As [`norm_heads`], with `h0 + n <= a.heads`.
#[inline(always)]
pub(super) unsafe fn inv_rms_heads<S: Simd, T: SimdElement>(
    s: S,
    a: &NormArgs<'_, T>,
    h0: usize,
    n: usize,
    inv: &mut [f32; CHUNK],
) {
    let mut j = 0;
    while j + GROUP <= n {
        // SAFETY: heads h0 + j .. + GROUP exist.
        let sums = unsafe { group_sums::<S, T, GROUP>(s, a, h0 + j) };
        for (k, sum) in sums.into_iter().enumerate() {
            inv[j + k] = inv_rms(sum, a.head_dim, a.eps);
        }
        j += GROUP;
    }
    while j < n {
        // SAFETY: head h0 + j exists.
        let [sum] = unsafe { group_sums::<S, T, 1>(s, a, h0 + j) };
        inv[j] = inv_rms(sum, a.head_dim, a.eps);
        j += 1;
    }
}

/// The sums of squares of heads `h0 .. h0 + G` of `a`, prefetching the heads about 4 KB
/// ahead when `a.prefetch`.
///
/// # Safety
/// As [`norm_heads`], with `h0 + G <= a.heads`.
#[inline(always)]
pub(super) unsafe fn group_sums<S: Simd, T: SimdElement, const G: usize>(
    s: S,
    a: &NormArgs<'_, T>,
    h0: usize,
) -> [f32; G] {
    let (split, hd) = (a.split, a.head_dim);
    let (mut src0, mut src1) = ([a.src0; G], [a.src1; G]);
    for j in 0..G {
        src0[j] = a.src0.wrapping_add((h0 + j) * a.src0_stride);
        src1[j] = a.src1.wrapping_add((h0 + j) * a.src1_stride);
    }
    if a.prefetch {
        // Wrapping: past the call they are only hints.
        let (b0, b1) = (split * core::mem::size_of::<T>(), (hd - split) * core::mem::size_of::<T>());
        let ahead = heads_ahead(b0 + b1);
        for j in 0..G {
            let h = h0 + j + ahead;
            prefetch_range(s, true, a.src0.wrapping_add(h.wrapping_mul(a.src0_stride)).cast(), b0);
            prefetch_range(s, b1 > 0, a.src1.wrapping_add(h.wrapping_mul(a.src1_stride)).cast(), b1);
        }
    }
    // SAFETY: the segments of heads h0 .. h0 + G are valid (contract).
    unsafe { sum_squares::<S, T, G>(s, src0, split, src1, hd - split) }
}

/// `sum(x²)` of `G` heads, each `n0` elements at `p0[j]` followed by `n1` at `p1[j]`, in the
/// order of the module docs.
///
/// # Safety
/// `p0[j] .. + n0` and `p1[j] .. + n1` are valid for reads.
#[inline(always)]
pub(super) unsafe fn sum_squares<S: Simd, T: SimdElement, const G: usize>(
    s: S,
    p0: [*const T; G],
    n0: usize,
    p1: [*const T; G],
    n1: usize,
) -> [f32; G] {
    let lanes = S::LANES;
    let nv = PARTIALS / lanes;
    let mut acc = [[s.splat(0.0); 4]; G];
    let n = n0 + n1;
    let mut pad = [[T::default(); PARTIALS]; G];
    let mut i = 0;
    // Whole chunks of the first segment: no gathering, no branches.
    while i + PARTIALS <= n0 {
        for j in 0..G {
            for (v, a) in acc[j].iter_mut().enumerate().take(nv) {
                // SAFETY: i + PARTIALS <= n0: inside the first segment.
                let x = unsafe { T::load(s, p0[j].add(i + v * lanes)) };
                *a = s.add(*a, s.mul(x, x));
            }
        }
        i += PARTIALS;
    }
    while i < n {
        for j in 0..G {
            let p = if i + PARTIALS <= n0 {
                p0[j].wrapping_add(i)
            } else if i >= n0 && i + PARTIALS <= n {
                p1[j].wrapping_add(i - n0)
            } else {
                // A chunk across the segment boundary or at the end: gathered into zeros.
                for (e, k) in pad[j].iter_mut().zip(i..) {
                    *e = if k >= n {
                        T::default()
                    } else if k < n0 {
                        // SAFETY: k < n0: inside the first segment.
                        unsafe { *p0[j].add(k) }
                    } else {
                        // SAFETY: n0 <= k < n: inside the second segment.
                        unsafe { *p1[j].add(k - n0) }
                    };
                }
                pad[j].as_ptr()
            };
            for (v, a) in acc[j].iter_mut().enumerate().take(nv) {
                // SAFETY: `p` points at PARTIALS readable elements (a whole chunk of a
                // segment, or the pad).
                let x = unsafe { T::load(s, p.add(v * lanes)) };
                *a = s.add(*a, s.mul(x, x));
            }
        }
        i += PARTIALS;
    }
    // Plain loops, no closures: a closure is not compiled with the tier's target features,
    // so the vector code in it would not inline (measured: 3x slower).
    let mut sums = [0.0f32; G];
    for (sum, acc) in sums.iter_mut().zip(acc) {
        *sum = tree_vectors(s, acc);
    }
    sums
}

/// `dst[i] = form(src[i], inv, w[i])` for `i < n`.
///
/// # Safety
/// `src .. + n` valid for reads, `dst .. + n` for writes (equal or disjoint), `w .. + n`
/// for reads unless `form` is `Plain`.
#[inline(always)]
pub(super) unsafe fn scale_segment<S: Simd, T: SimdElement>(
    s: S,
    src: *const T,
    dst: *mut T,
    n: usize,
    inv: f32,
    w: *const f32,
    form: NormForm,
) {
    // One loop per form, the form known at compile time in each.
    // SAFETY: forwarded from the caller.
    unsafe {
        match form {
            NormForm::Weighted => scale_segment_in::<S, T, WEIGHTED>(s, src, dst, n, inv, w),
            NormForm::OnePlus => scale_segment_in::<S, T, ONE_PLUS>(s, src, dst, n, inv, w),
            NormForm::Plain => scale_segment_in::<S, T, PLAIN>(s, src, dst, n, inv, w),
        }
    }
}

/// [`NormForm`] as a const generic parameter.
pub(super) const WEIGHTED: u8 = 0;
pub(super) const ONE_PLUS: u8 = 1;
pub(super) const PLAIN: u8 = 2;
/// The bits of the form in a const `F` (the rest are flags).
pub(super) const FORM: u8 = 3;
/// Flag of `F`: no weight is NaN, so every NaN the fused kernel can meet before its final
/// store is quiet with its low 16 bits clear (made from a bf16 input, or the default NaN of
/// `0 * inf`), and the intermediate bf16 rounding skips the NaN canonicalisation
/// ([`Simd::round_bf16_f32_quiet`]): such a NaN rounds to a NaN, and any NaN lane ends as the
/// canonical NaN at the final store, as in the oracle.
pub(super) const QUIET: u8 = 4;

/// [`scale_segment`] for the form `F`.
///
/// # Safety
/// As [`scale_segment`].
#[inline(always)]
pub(super) unsafe fn scale_segment_in<S: Simd, T: SimdElement, const F: u8>(
    s: S,
    src: *const T,
    dst: *mut T,
    n: usize,
    inv: f32,
    w: *const f32,
) {
    let lanes = S::LANES;
    let body = n - n % lanes;
    let iv = s.splat(inv);
    let mut i = 0;
    while i < body {
        // SAFETY: i + lanes <= n.
        unsafe {
            let y = normed::<S, T, F>(s, T::load(s, src.add(i)), iv, w.wrapping_add(i));
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
            if F & FORM != PLAIN {
                ptr::copy_nonoverlapping(w.add(body), wv.as_mut_ptr(), r);
            }
            let y = normed::<S, T, F>(s, T::load(s, x.as_ptr()), iv, wv.as_ptr());
            T::store(s, x.as_mut_ptr(), y);
            ptr::copy_nonoverlapping(x.as_ptr(), dst.add(body), r);
        }
    }
}

/// One vector of the form `F` (see the module docs), before the final rounding.
///
/// # Safety
/// `w .. w + S::LANES` is valid for reads unless `F` is `PLAIN`.
#[inline(always)]
pub(super) unsafe fn normed<S: Simd, T: SimdElement, const F: u8>(
    s: S,
    x: S::V,
    iv: S::V,
    w: *const f32,
) -> S::V {
    // SAFETY: forwarded from the caller.
    let w = if F & FORM == PLAIN { iv } else { unsafe { s.load(w) } };
    normed_w::<S, T, F>(s, x, iv, w)
}

/// [`normed`] with the weights `w` in a vector (ignored for `PLAIN`).
#[inline(always)]
pub(super) fn normed_w<S: Simd, T: SimdElement, const F: u8>(s: S, x: S::V, iv: S::V, w: S::V) -> S::V {
    let n = s.mul(x, iv);
    match F & FORM {
        PLAIN => n,
        ONE_PLUS => s.mul(n, s.add(s.splat(1.0), w)),
        // The rounding to the input type first is HF's `.to(input_dtype)` (exact for f32).
        // SAFETY: `round_to` needs nothing beyond `s`.
        _ => s.mul(w, unsafe { round_to::<S, T, F>(s, n) }),
    }
}

/// `v` rounded to `T` and widened back (NaN canonical), as storing and reloading it does
/// ([`SimdElement::round`]: the identity for f32, in registers for bf16).
///
/// # Safety
/// None beyond `s` proving its tier.
#[inline(always)]
pub(super) unsafe fn round_to<S: Simd, T: SimdElement, const F: u8>(s: S, v: S::V) -> S::V {
    if F & QUIET != 0 {
        T::round_quiet(s, v)
    } else {
        T::round(s, v)
    }
}

/// The `inv_rms` of a head of `NV * S::LANES` elements at `src`: the squares
/// summed into the partial sums in the order of the module docs (vector `v` into partials
/// `(v % (16 / LANES)) * LANES ..`), then [`tree_vectors`] and [`inv_rms`].
///
/// # Safety
/// `src .. + NV * S::LANES` is valid for reads.
#[inline(always)]
pub(super) unsafe fn head_inv_rms<S: Simd, T: SimdElement, const NV: usize>(
    s: S,
    src: *const T,
    head_dim: usize,
    eps: f32,
) -> f32 {
    let lanes = S::LANES;
    let nacc = PARTIALS / lanes;
    let mut acc = [s.splat(0.0); 4];
    for v in 0..NV {
        // SAFETY: v * lanes + lanes <= NV * lanes (the caller's contract).
        let x = unsafe { T::load(s, src.add(v * lanes)) };
        acc[v % nacc] = s.add(acc[v % nacc], s.mul(x, x));
    }
    inv_rms(tree_vectors(s, acc), head_dim, eps)
}

/// The fixed pairwise tree over the [`PARTIALS`] partial sums held in `16 / S::LANES`
/// vectors (partial `j` in lane `j % LANES` of vector `j / LANES`): the steps with
/// `w >= LANES` add whole vectors, the rest run within one ([`Simd::tree_lanes`]). Every
/// add is the oracle's `acc[j] + acc[j + w]` ([`tree`]).
#[inline(always)]
pub(super) fn tree_vectors<S: Simd>(s: S, mut acc: [S::V; 4]) -> f32 {
    let mut n = PARTIALS / S::LANES;
    while n > 1 {
        n /= 2;
        for j in 0..n {
            acc[j] = s.add(acc[j], acc[j + n]);
        }
    }
    s.tree_lanes(acc[0])
}
