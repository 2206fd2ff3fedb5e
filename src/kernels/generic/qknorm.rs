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
use crate::kernels::shape::{Layout, MAX_ROTARY_DIM};
use crate::kernels::RotateArgs;

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
    1.0 / sqrt(sum / head_dim as f32 + eps)
}

/// The correctly rounded IEEE 754 square root: the baseline instruction of the target
/// (`sqrtss` on x86-64, `fsqrt` on aarch64), else (and under Miri) `libm::sqrtf`, whose
/// software square root is also correctly rounded and about 10x slower (it dominated the
/// norm's time).
#[inline(always)]
fn sqrt(x: f32) -> f32 {
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
unsafe fn norm_whole_form<S: Simd, T: SimdElement, const NV: usize>(
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
/// elements (`NV` even), as [`half_split_whole`] walks them: in chunks of up to [`CHUNK`]
/// heads, first every head's `inv_rms` ([`head_inv_rms`]: the order of the module docs),
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
unsafe fn norm_whole<S: Simd, T: SimdElement, const F: u8, const NV: usize>(s: S, a: &NormArgs<'_, T>) {
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
const CHUNK: usize = 64;

/// Heads whose sums [`inv_rms_heads`] accumulates side by side.
const GROUP: usize = 4;

/// `inv[j]` = `inv_rms` of head `h0 + j` of `a`, for `j < n <= CHUNK`.
///
/// # Safety
/// As [`norm_heads`], with `h0 + n <= a.heads`.
#[inline(always)]
unsafe fn inv_rms_heads<S: Simd, T: SimdElement>(
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
unsafe fn group_sums<S: Simd, T: SimdElement, const G: usize>(
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
unsafe fn sum_squares<S: Simd, T: SimdElement, const G: usize>(
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
unsafe fn scale_segment<S: Simd, T: SimdElement>(
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
const WEIGHTED: u8 = 0;
const ONE_PLUS: u8 = 1;
const PLAIN: u8 = 2;
/// The bits of the form in a const `F` (the rest are flags).
const FORM: u8 = 3;
/// Flag of `F`: no weight is NaN, so every NaN the fused kernel can meet before its final
/// store is quiet with its low 16 bits clear (made from a bf16 input, or the default NaN of
/// `0 * inf`), and the intermediate bf16 rounding skips the NaN canonicalisation
/// ([`Simd::round_bf16_f32_quiet`]): such a NaN rounds to a NaN, and any NaN lane ends as the
/// canonical NaN at the final store, as in the oracle.
const QUIET: u8 = 4;

/// [`scale_segment`] for the form `F`.
///
/// # Safety
/// As [`scale_segment`].
#[inline(always)]
unsafe fn scale_segment_in<S: Simd, T: SimdElement, const F: u8>(
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
unsafe fn normed<S: Simd, T: SimdElement, const F: u8>(s: S, x: S::V, iv: S::V, w: *const f32) -> S::V {
    // SAFETY: forwarded from the caller.
    let w = if F & FORM == PLAIN { iv } else { unsafe { s.load(w) } };
    normed_w::<S, T, F>(s, x, iv, w)
}

/// [`normed`] with the weights `w` in a vector (ignored for `PLAIN`).
#[inline(always)]
fn normed_w<S: Simd, T: SimdElement, const F: u8>(s: S, x: S::V, iv: S::V, w: S::V) -> S::V {
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
unsafe fn round_to<S: Simd, T: SimdElement, const F: u8>(s: S, v: S::V) -> S::V {
    if F & QUIET != 0 {
        T::round_quiet(s, v)
    } else {
        T::round(s, v)
    }
}

/// Arguments of one fused call: the heads of one token of one tensor, as [`RotateArgs`]
/// (whose contract applies), plus the norm: norm then rotate (`Weighted` or `OnePlus`
/// forms), or (`after`) rotate then the `Plain` norm.
pub(crate) struct NormRopeArgs<'a, T> {
    pub rotate: RotateArgs<'a, T>,
    /// `head_dim` entries (empty with `after`).
    pub weight: &'a [f32],
    pub form: NormForm,
    pub eps: f32,
    /// Rotate, round to `T`, then the `Plain` norm (Llama 4's `L2After`): taken only on the
    /// register path ([`rope_norm_whole`]: f32 `HalfSplit` heads rotated whole, of 4, 8 or
    /// 16 vectors; not yet `Interleaved`, Llama 4's own layout); otherwise the kernel
    /// returns `false` and writes nothing, and the caller composes the rotate and norm kernels.
    pub after: bool,
}

/// A fused kernel: returns whether it took the call (always, unless `after`).
///
/// # Safety
/// The contract of [`RotateFn`](crate::kernels::RotateFn) for `a.rotate`; unless `after`,
/// `weight.len() >= head_dim` and `form` is not `Plain`; with `after`, `form` is `Plain`.
pub(crate) type NormRopeFn<T> = unsafe fn(&NormRopeArgs<'_, T>) -> bool;

/// The scalar oracle of the fused op: literally the norm ([`norm_heads_scalar`]) into a
/// stack copy of each head's rotated part, then the scalar rotate kernel from it (the
/// pass-through part normalised in place of the output).
///
/// With `after` it takes no call: the caller's composition of the scalar rotate and norm
/// kernels is the oracle.
///
/// # Safety
/// The contract of [`NormRopeFn`].
pub(crate) unsafe fn norm_rope_heads_scalar<T: Element>(a: &NormRopeArgs<'_, T>) -> bool {
    if a.after {
        return false;
    }
    let r = &a.rotate;
    let rd = 2 * r.cos.len();
    let mut tmp = [T::default(); MAX_ROTARY_DIM];
    // One raw pointer for the norm's writes and the rotation's reads (two borrows of `tmp`
    // would invalidate each other).
    let tp = tmp.as_mut_ptr();
    for h in 0..r.heads {
        let (src, dst) =
            (r.src.wrapping_add(h * r.src_head_stride), r.dst.wrapping_add(h * r.dst_head_stride));
        let norm = NormArgs {
            heads: 1,
            head_dim: r.head_dim,
            split: rd,
            src0: src,
            src0_stride: 0,
            dst0: tp,
            dst0_stride: 0,
            src1: src.wrapping_add(rd),
            src1_stride: 0,
            dst1: dst.wrapping_add(rd),
            dst1_stride: 0,
            weight: a.weight,
            form: a.form,
            eps: a.eps,
            prefetch: false,
        };
        let rot = RotateArgs {
            src: tp.cast_const(),
            dst,
            heads: 1,
            src_head_stride: 0,
            dst_head_stride: 0,
            head_dim: rd,
            prefetch: false,
            ..*r
        };
        // SAFETY: head h of the caller's tensors (contract); `tmp` holds rd <= MAX_ROTARY_DIM
        // elements and overlaps neither; the norm reads all of the head before writing.
        unsafe {
            norm_heads_scalar(&norm);
            crate::kernels::scalar::rotate(&rot);
        }
    }
    true
}

/// The vector kernel behind every tier's `norm_rope_heads`: one pass per head. Each chunk of
/// heads first gets its `inv_rms` ([`inv_rms_heads`]); then each head is read once more (from
/// L1), normalised and rotated in registers, and written once. Every lane computes the
/// norm's element formula (rounded to `T` for f16/bf16, as storing it would), then the
/// rotation of the parent module's kernels on that value, so the result equals the norm
/// followed by the rotate kernel bit for bit. The bf16 roundings before the rotation stay in
/// registers ([`SimdElement::round`]), without the NaN canonicalisation when no weight is NaN
/// (`QUIET`), and bf16 `HalfSplit` heads load and store 32-bit words (`half_split_words`).
///
/// An `after` call (rotate, then the `Plain` norm) is taken, and `true` returned, only for
/// f32 `HalfSplit` heads rotated whole of 4, 8 or 16 vectors ([`rope_norm_whole`]); for any
/// other it returns `false` before writing anything.
///
/// # Safety
/// The contract of [`NormRopeFn`]; `s` proves the CPU supports its tier.
#[inline(always)]
pub(crate) unsafe fn norm_rope_heads<S: Simd, T: SimdElement>(s: S, a: &NormRopeArgs<'_, T>) -> bool {
    if a.after {
        let (r, lanes) = (&a.rotate, S::LANES);
        if !T::F32
            || r.layout != Layout::HalfSplit
            || 2 * r.cos.len() != r.head_dim
            || r.head_dim % (2 * lanes) != 0
        {
            return false;
        }
        // SAFETY: forwarded from the caller; head_dim = NV * LANES, all of it rotated.
        unsafe {
            match r.head_dim / lanes {
                4 => rope_norm_whole::<S, T, 4>(s, a),
                8 => rope_norm_whole::<S, T, 8>(s, a),
                16 => rope_norm_whole::<S, T, 16>(s, a),
                _ => return false,
            }
        }
        return true;
    }
    // SAFETY: forwarded from the caller.
    unsafe {
        match (a.form, a.rotate.layout, any_nan(s, a.weight)) {
            (NormForm::OnePlus, Layout::HalfSplit, false) => {
                norm_rope_in::<S, T, { ONE_PLUS | QUIET }, false>(s, a)
            }
            (NormForm::OnePlus, Layout::Interleaved, false) => {
                norm_rope_in::<S, T, { ONE_PLUS | QUIET }, true>(s, a)
            }
            (_, Layout::HalfSplit, false) => norm_rope_in::<S, T, { WEIGHTED | QUIET }, false>(s, a),
            (_, Layout::Interleaved, false) => norm_rope_in::<S, T, { WEIGHTED | QUIET }, true>(s, a),
            (NormForm::OnePlus, Layout::HalfSplit, true) => norm_rope_in::<S, T, ONE_PLUS, false>(s, a),
            (NormForm::OnePlus, Layout::Interleaved, true) => norm_rope_in::<S, T, ONE_PLUS, true>(s, a),
            (_, Layout::HalfSplit, true) => norm_rope_in::<S, T, WEIGHTED, false>(s, a),
            (_, Layout::Interleaved, true) => norm_rope_in::<S, T, WEIGHTED, true>(s, a),
        }
    }
    true
}

/// The `after` call of [`norm_rope_heads`] (Llama 4: RoPE, then the weightless norm) on f32
/// `HalfSplit` heads rotated whole of `NV * S::LANES` elements, one head at a time in
/// registers: the rotate kernel's formula, each value rounded to `T` as its store would
/// ([`SimdElement::round`]: the canonical NaN; the identity for f32, where a NaN makes the
/// whole head's output NaN either way), the squares of the rounded head summed in the order
/// of the module docs ([`head_inv_rms`]'s), then `round_T(y * inv_rms)` stored. So it equals
/// the rotate kernel into a buffer of `T` followed by the norm kernel, bit for bit, without
/// the buffer's store and two reloads.
///
/// # Safety
/// As [`norm_rope_heads`], with `after`, `head_dim == 2 * cos.len() == NV * S::LANES`.
#[cfg_attr(debug_assertions, inline(never))]
#[cfg_attr(not(debug_assertions), inline(always))]
unsafe fn rope_norm_whole<S: Simd, T: SimdElement, const NV: usize>(s: S, a: &NormRopeArgs<'_, T>) {
    let r = &a.rotate;
    let (lanes, half, nacc) = (S::LANES, NV / 2, PARTIALS / S::LANES);
    let sign = s.splat(if r.inverse { -0.0 } else { 0.0 });
    let zero = s.splat(0.0);
    let (mut c, mut sn) = ([zero; NV], [zero; NV]);
    for k in 0..half {
        // SAFETY: cos and sin have half * lanes entries.
        unsafe {
            c[k] = s.load(r.cos.as_ptr().add(k * lanes));
            sn[k] = s.xor(s.load(r.sin.as_ptr().add(k * lanes)), sign);
        }
    }
    let head_bytes = r.head_dim * core::mem::size_of::<T>();
    let ahead = heads_ahead(head_bytes);
    for h in 0..r.heads {
        // Wrapping: past the call they are only hints.
        let next = r.src.wrapping_add(h.wrapping_add(ahead).wrapping_mul(r.src_head_stride));
        prefetch_range(s, r.prefetch, next.cast(), head_bytes);
        let (src, dst) =
            (r.src.wrapping_add(h * r.src_head_stride), r.dst.wrapping_add(h * r.dst_head_stride));
        let mut y = [zero; NV];
        for k in 0..half {
            // SAFETY: elements k * lanes and (half + k) * lanes + lanes <= head_dim of head h
            // (contract); every load of the head comes before its first store.
            unsafe {
                let (x0, x1) = (T::load(s, src.add(k * lanes)), T::load(s, src.add((half + k) * lanes)));
                y[k] = T::round(s, s.sub(s.mul(x0, c[k]), s.mul(x1, sn[k])));
                y[half + k] = T::round(s, s.add(s.mul(x1, c[k]), s.mul(x0, sn[k])));
            }
        }
        let mut acc = [zero; 4];
        for (v, y) in y.iter().enumerate() {
            acc[v % nacc] = s.add(acc[v % nacc], s.mul(*y, *y));
        }
        let iv = s.splat(inv_rms(tree_vectors(s, acc), r.head_dim, a.eps));
        for k in (0..NV).step_by(2) {
            // SAFETY: vectors k, k + 1 < NV of head h (contract).
            unsafe {
                T::store2(
                    s,
                    [dst.add(k * lanes), dst.add((k + 1) * lanes)],
                    [s.mul(y[k], iv), s.mul(y[k + 1], iv)],
                );
            }
        }
    }
}

/// Whether any of `w` is NaN.
#[inline(always)]
fn any_nan<S: Simd>(s: S, w: &[f32]) -> bool {
    let mut c = w.chunks_exact(S::LANES);
    let mut nan = false;
    for v in &mut c {
        // SAFETY: a chunk of S::LANES readable f32.
        let v = unsafe { s.load(v.as_ptr()) };
        nan |= s.any_nan(v, v);
    }
    nan || c.remainder().iter().any(|w| w.is_nan())
}

/// [`norm_rope_heads`] for the form `F` (with flags) and layout (`INTERLEAVED`).
///
/// # Safety
/// As [`norm_rope_heads`].
#[inline(always)]
unsafe fn norm_rope_in<S: Simd, T: SimdElement, const F: u8, const INTERLEAVED: bool>(
    s: S,
    a: &NormRopeArgs<'_, T>,
) {
    let r = &a.rotate;
    let (hd, pairs) = (r.head_dim, r.cos.len());
    let rd = 2 * pairs;
    let norm = NormArgs {
        heads: r.heads,
        head_dim: hd,
        split: hd,
        src0: r.src,
        src0_stride: r.src_head_stride,
        dst0: r.dst,
        dst0_stride: r.dst_head_stride,
        src1: r.src,
        src1_stride: 0,
        dst1: r.dst,
        dst1_stride: 0,
        weight: a.weight,
        form: a.form,
        eps: a.eps,
        prefetch: r.prefetch,
    };
    // Interleaved: the rows expanded once per call, cc = [c0 c0 c1 c1 ..] and ss = [-s0 s0 ..]
    // forward or [s0 -s0 ..] inverse, as the rotate kernel does.
    let mut cc = ExpandedRow([0.0; MAX_ROTARY_DIM]);
    let mut ss = ExpandedRow([0.0; MAX_ROTARY_DIM]);
    if INTERLEAVED {
        for i in 0..pairs {
            let sn = if r.inverse { -r.sin[i] } else { r.sin[i] };
            (cc.0[2 * i], cc.0[2 * i + 1]) = (r.cos[i], r.cos[i]);
            (ss.0[2 * i], ss.0[2 * i + 1]) = (-sn, sn);
        }
    }
    let sign = s.splat(if r.inverse { -0.0 } else { 0.0 });
    let w = a.weight.as_ptr();
    // bf16 HalfSplit: whole blocks of 2 * LANES pairs in 32-bit words, as the rotate kernel's
    // `half_split_words`: the row and weight entries of each half split into even and odd
    // once per call (block b, lane j: entry 2 LANES b + 2 j or + 1, i.e. entry k / 2 of the
    // split row for k = 2 LANES b + 2 j). Only 0..words / 2 is written and read.
    let words = if !INTERLEAVED && T::PAIRED_WORDS { pairs - pairs % (2 * S::LANES) } else { 0 };
    let mut split = [const { Row([MaybeUninit::uninit(); SPLIT_ENTRIES]) }; 8];
    {
        let srcs = [r.cos.as_ptr(), r.sin.as_ptr(), w, w.wrapping_add(pairs)];
        for (m, p) in srcs.into_iter().enumerate() {
            for k in 0..words / 2 {
                // SAFETY: 2 k + 1 < words <= pairs entries of the rows and of each half of
                // the weight (head_dim >= 2 pairs entries); k < MAX_PAIRS / 2 = SPLIT_ENTRIES.
                unsafe {
                    split[2 * m].0[k].write(*p.add(2 * k));
                    split[2 * m + 1].0[k].write(*p.add(2 * k + 1));
                }
            }
        }
    }
    let rows: [*const f32; 8] = core::array::from_fn(|m| split[m].0.as_ptr().cast::<f32>());
    if !INTERLEAVED && rd == hd && hd % (2 * S::LANES) == 0 {
        // bf16 heads of whole word blocks go through the word path.
        let rows = if words == pairs { Some(&rows) } else { None };
        // SAFETY: forwarded from the caller; head_dim = NV * LANES, all of it rotated;
        // `rows` hold words / 2 = pairs / 2 entries each.
        unsafe {
            match hd / S::LANES {
                4 => return half_split_whole::<S, T, F, 4>(s, a, rows),
                8 => return half_split_whole::<S, T, F, 8>(s, a, rows),
                16 => return half_split_whole::<S, T, F, 16>(s, a, rows),
                _ => {}
            }
        }
    }
    let mut inv = [0.0f32; CHUNK];
    let mut h0 = 0;
    while h0 < r.heads {
        let n = CHUNK.min(r.heads - h0);
        // SAFETY: heads h0 .. h0 + n exist (contract).
        unsafe { inv_rms_heads(s, &norm, h0, n, &mut inv) };
        for (j, &inv) in inv.iter().enumerate().take(n) {
            let h = h0 + j;
            let (src, dst) =
                (r.src.wrapping_add(h * r.src_head_stride), r.dst.wrapping_add(h * r.dst_head_stride));
            let iv = s.splat(inv);
            // SAFETY: head h of the contract; each step loads before it stores, so in place
            // it reads only unmodified elements; weight has head_dim entries.
            unsafe {
                if INTERLEAVED {
                    interleaved_head::<S, T, F>(s, src, dst, rd, iv, w, cc.0.as_ptr(), ss.0.as_ptr());
                } else {
                    if words > 0 {
                        // T is bf16 (PAIRED_WORDS).
                        half_split_words::<S, F>(s, src.cast(), dst.cast(), pairs, words, iv, &rows, sign);
                    }
                    half_split_head::<S, T, F>(
                        s,
                        src,
                        dst,
                        words,
                        pairs,
                        iv,
                        w,
                        r.cos.as_ptr(),
                        r.sin.as_ptr(),
                        sign,
                    );
                }
                scale_segment_in::<S, T, F>(s, src.add(rd), dst.add(rd), hd - rd, inv, w.add(rd));
            }
        }
        h0 += n;
    }
}

/// [`norm_rope_in`] for `HalfSplit` heads rotated whole (`rotary_dim == head_dim`) of
/// `NV * S::LANES` elements (`NV` even), in chunks of up to [`CHUNK`] heads: first every
/// head's `inv_rms` ([`head_inv_rms`]: the squares summed into the partial sums as the
/// head is loaded, the tree reduced in registers, then the scalar square root and
/// divisions), independent chains the CPU overlaps; then each head is read again (from
/// L1), normalised, rotated and stored once. Measured against one head at a time (the
/// chain stalls every head), and against a pipeline one head deep with the next head kept
/// in registers (spills; slower on AVX2 and no faster on AVX-512). The cos/sin rows (sign
/// applied) and the weights are loaded once per call; bf16 heads of whole word blocks
/// (`rows`, the split rows of [`norm_rope_in`]) take [`half_split_words`]. The operations
/// per element are those of [`half_split_head`], in the same order.
///
/// # Safety
/// As [`norm_rope_heads`], with `head_dim == 2 * cos.len() == NV * S::LANES`; with `rows`,
/// `T` is bf16 and the rows hold `cos.len() / 2` entries each.
// Not inlined into the tier's boundary in builds with debug assertions: unoptimised, its
// 24 instances (3 head sizes x 8 forms) would add ~200 KB to that function's stack frame
// (a debug test thread overflowed its 2 MB); there it runs without the tier's features.
#[cfg_attr(debug_assertions, inline(never))]
#[cfg_attr(not(debug_assertions), inline(always))]
unsafe fn half_split_whole<S: Simd, T: SimdElement, const F: u8, const NV: usize>(
    s: S,
    a: &NormRopeArgs<'_, T>,
    rows: Option<&[*const f32; 8]>,
) {
    let r = &a.rotate;
    let (lanes, half, pairs) = (S::LANES, NV / 2, r.cos.len());
    let sign = s.splat(if r.inverse { -0.0 } else { 0.0 });
    let zero = s.splat(0.0);
    let (mut c, mut sn, mut w) = ([zero; NV], [zero; NV], [zero; NV]);
    for v in 0..NV {
        // SAFETY: weight has head_dim = NV * lanes entries, cos and sin half * lanes each.
        unsafe {
            w[v] = s.load(a.weight.as_ptr().add(v * lanes));
            if v < half {
                c[v] = s.load(r.cos.as_ptr().add(v * lanes));
                sn[v] = s.xor(s.load(r.sin.as_ptr().add(v * lanes)), sign);
            }
        }
    }
    if r.heads == 0 {
        return;
    }
    let mut inv = [0.0f32; CHUNK];
    let mut h0 = 0;
    while h0 < r.heads {
        let n = CHUNK.min(r.heads - h0);
        for (j, inv) in inv.iter_mut().enumerate().take(n) {
            // SAFETY: head h0 + j exists (contract).
            *inv = unsafe {
                head_inv_rms::<S, T, NV>(
                    s,
                    r.src.wrapping_add((h0 + j) * r.src_head_stride),
                    r.head_dim,
                    a.eps,
                )
            };
        }
        for (j, &inv) in inv.iter().enumerate().take(n) {
            let h = h0 + j;
            let iv = s.splat(inv);
            let (src, dst) =
                (r.src.wrapping_add(h * r.src_head_stride), r.dst.wrapping_add(h * r.dst_head_stride));
            if let Some(rows) = rows {
                // SAFETY: T is bf16 (caller); head h (contract), whole word blocks; loads before stores.
                unsafe { half_split_words::<S, F>(s, src.cast(), dst.cast(), pairs, pairs, iv, rows, sign) };
            } else {
                for k in 0..half {
                    // SAFETY: elements k * lanes and (half + k) * lanes + lanes <= head_dim of
                    // head h (contract); each store follows the loads of the same elements.
                    unsafe {
                        let (x0, x1) =
                            (T::load(s, src.add(k * lanes)), T::load(s, src.add((half + k) * lanes)));
                        let (y0, y1) =
                            rotate_normed::<S, T, F>(s, x0, x1, iv, w[k], w[half + k], c[k], sn[k]);
                        T::store2(s, [dst.add(k * lanes), dst.add((half + k) * lanes)], [y0, y1]);
                    }
                }
            }
        }
        h0 += n;
    }
}

/// The `inv_rms` of a head of `NV * S::LANES` elements at `src`: the squares
/// summed into the partial sums in the order of the module docs (vector `v` into partials
/// `(v % (16 / LANES)) * LANES ..`), then [`tree_vectors`] and [`inv_rms`].
///
/// # Safety
/// `src .. + NV * S::LANES` is valid for reads.
#[inline(always)]
unsafe fn head_inv_rms<S: Simd, T: SimdElement, const NV: usize>(
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
fn tree_vectors<S: Simd>(s: S, mut acc: [S::V; 4]) -> f32 {
    let mut n = PARTIALS / S::LANES;
    while n > 1 {
        n /= 2;
        for j in 0..n {
            acc[j] = s.add(acc[j], acc[j + n]);
        }
    }
    s.tree_lanes(acc[0])
}

/// An expanded cos/sin row on a cache line.
#[repr(C, align(64))]
struct ExpandedRow([f32; MAX_ROTARY_DIM]);

/// Normalises and rotates pairs `words .. pairs` of the `HalfSplit` part of one head (pair
/// `i` is elements `(i, i + pairs)`); `words` is a multiple of `2 * S::LANES`.
///
/// # Safety
/// `src`, `dst` are one head (equal or disjoint) of at least `2 * pairs` elements; `w` has
/// `2 * pairs` entries, `cos` and `sin` `pairs`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn half_split_head<S: Simd, T: SimdElement, const F: u8>(
    s: S,
    src: *const T,
    dst: *mut T,
    words: usize,
    pairs: usize,
    iv: S::V,
    w: *const f32,
    cos: *const f32,
    sin: *const f32,
    sign: S::V,
) {
    let lanes = S::LANES;
    let body = pairs - pairs % lanes;
    let mut i = words;
    while i < body {
        // SAFETY: i + lanes <= pairs.
        unsafe {
            let (x0, x1) = (T::load(s, src.add(i)), T::load(s, src.add(pairs + i)));
            let (c, sn) = (s.load(cos.add(i)), s.xor(s.load(sin.add(i)), sign));
            let (y0, y1) = half_split_vec::<S, T, F>(s, x0, x1, iv, w.add(i), w.add(pairs + i), c, sn);
            T::store2(s, [dst.add(i), dst.add(pairs + i)], [y0, y1]);
        }
        i += lanes;
    }
    if body < pairs {
        let r = pairs - body;
        let (mut x0, mut x1) = ([T::default(); MAX_LANES], [T::default(); MAX_LANES]);
        let (mut w0, mut w1) = ([0.0f32; MAX_LANES], [0.0f32; MAX_LANES]);
        let (mut c, mut sn) = ([0.0f32; MAX_LANES], [0.0f32; MAX_LANES]);
        // SAFETY: the last r < lanes pairs, weights and row entries are in bounds; the stack
        // buffers hold a full vector each.
        unsafe {
            ptr::copy_nonoverlapping(src.add(body), x0.as_mut_ptr(), r);
            ptr::copy_nonoverlapping(src.add(pairs + body), x1.as_mut_ptr(), r);
            ptr::copy_nonoverlapping(w.add(body), w0.as_mut_ptr(), r);
            ptr::copy_nonoverlapping(w.add(pairs + body), w1.as_mut_ptr(), r);
            ptr::copy_nonoverlapping(cos.add(body), c.as_mut_ptr(), r);
            ptr::copy_nonoverlapping(sin.add(body), sn.as_mut_ptr(), r);
            let (cv, sv) = (s.load(c.as_ptr()), s.xor(s.load(sn.as_ptr()), sign));
            let (xv0, xv1) = (T::load(s, x0.as_ptr()), T::load(s, x1.as_ptr()));
            let (y0, y1) = half_split_vec::<S, T, F>(s, xv0, xv1, iv, w0.as_ptr(), w1.as_ptr(), cv, sv);
            T::store2(s, [x0.as_mut_ptr(), x1.as_mut_ptr()], [y0, y1]);
            ptr::copy_nonoverlapping(x0.as_ptr(), dst.add(body), r);
            ptr::copy_nonoverlapping(x1.as_ptr(), dst.add(pairs + body), r);
        }
    }
}

/// Normalises and rotates pairs `0 .. words` (whole blocks of `2 * S::LANES`) of the bf16
/// `HalfSplit` part of one head in 32-bit words ([`Simd::load_bf16_pairs`]): the even and
/// odd elements of a block are two vectors, each computing [`half_split_vec`]'s formula,
/// with `rows` = cos, sin, first-half and second-half weights, each split into even and
/// odd entries (see [`norm_rope_in`]).
///
/// # Safety
/// As [`half_split_head`]; `rows` hold `words / 2` initialised entries each.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn half_split_words<S: Simd, const F: u8>(
    s: S,
    src: *const bf16,
    dst: *mut bf16,
    pairs: usize,
    words: usize,
    iv: S::V,
    rows: &[*const f32; 8],
    sign: S::V,
) {
    let [ce, co, se, so, w0e, w0o, w1e, w1o] = *rows;
    let mut i = 0;
    while i < words {
        let r = i / 2;
        // SAFETY: i + 2 lanes <= words <= pairs elements of each half; row entries
        // r .. r + lanes <= words / 2, initialised.
        unsafe {
            let (x0e, x0o) = s.load_bf16_pairs(src.add(i));
            let (x1e, x1o) = s.load_bf16_pairs(src.add(pairs + i));
            let (c_e, c_o) = (s.load(ce.add(r)), s.load(co.add(r)));
            let (s_e, s_o) = (s.xor(s.load(se.add(r)), sign), s.xor(s.load(so.add(r)), sign));
            let (y0e, y1e) = half_split_vec::<S, bf16, F>(s, x0e, x1e, iv, w0e.add(r), w1e.add(r), c_e, s_e);
            let (y0o, y1o) = half_split_vec::<S, bf16, F>(s, x0o, x1o, iv, w0o.add(r), w1o.add(r), c_o, s_o);
            store_words(s, dst.add(i), y0e, y0o);
            store_words(s, dst.add(pairs + i), y1e, y1o);
        }
        i += 2 * S::LANES;
    }
}

/// One `HalfSplit` vector step: normed `n0`, `n1` (rounded to `T`), then
/// `y0 = (n0 * c) - (n1 * sn)`, `y1 = (n1 * c) + (n0 * sn)` (`sn` negated for the inverse),
/// the rotate kernel's formula.
///
/// # Safety
/// `w0`, `w1` valid for `S::LANES` reads.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn half_split_vec<S: Simd, T: SimdElement, const F: u8>(
    s: S,
    x0: S::V,
    x1: S::V,
    iv: S::V,
    w0: *const f32,
    w1: *const f32,
    c: S::V,
    sn: S::V,
) -> (S::V, S::V) {
    // SAFETY: forwarded from the caller.
    unsafe {
        let (w0, w1) = (s.load(w0), s.load(w1));
        rotate_normed::<S, T, F>(s, x0, x1, iv, w0, w1, c, sn)
    }
}

/// [`half_split_vec`] with the weights in vectors.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn rotate_normed<S: Simd, T: SimdElement, const F: u8>(
    s: S,
    x0: S::V,
    x1: S::V,
    iv: S::V,
    w0: S::V,
    w1: S::V,
    c: S::V,
    sn: S::V,
) -> (S::V, S::V) {
    // SAFETY: `round_to` needs nothing beyond `s`.
    let (n0, n1) = unsafe {
        (
            round_to::<S, T, F>(s, normed_w::<S, T, F>(s, x0, iv, w0)),
            round_to::<S, T, F>(s, normed_w::<S, T, F>(s, x1, iv, w1)),
        )
    };
    (s.sub(s.mul(n0, c), s.mul(n1, sn)), s.add(s.mul(n1, c), s.mul(n0, sn)))
}

/// Normalises and rotates the `Interleaved` part of one head (`rd` elements) with the
/// expanded rows `cc`, `ss`: `y = (n * cc) + (swap(n) * ss)`, the rotate kernel's formula.
///
/// # Safety
/// `src`, `dst` are one head (equal or disjoint) of at least `rd` elements; `w`, `cc`, `ss`
/// have `rd` entries.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn interleaved_head<S: Simd, T: SimdElement, const F: u8>(
    s: S,
    src: *const T,
    dst: *mut T,
    rd: usize,
    iv: S::V,
    w: *const f32,
    cc: *const f32,
    ss: *const f32,
) {
    let lanes = S::LANES;
    let body = rd - rd % lanes;
    let mut i = 0;
    while i < body {
        // SAFETY: i + lanes <= rd.
        unsafe {
            let x = T::load(s, src.add(i));
            let n = round_to::<S, T, F>(s, normed::<S, T, F>(s, x, iv, w.add(i)));
            let y = s.add(s.mul(n, s.load(cc.add(i))), s.mul(s.swap_pairs(n), s.load(ss.add(i))));
            T::store(s, dst.add(i), y);
        }
        i += lanes;
    }
    if body < rd {
        let r = rd - body;
        let mut x = [T::default(); MAX_LANES];
        let (mut wv, mut c, mut sn) = ([0.0f32; MAX_LANES], [0.0f32; MAX_LANES], [0.0f32; MAX_LANES]);
        // SAFETY: the last r < lanes elements and entries are in bounds; the stack buffers
        // hold a full vector each (r is even: whole pairs).
        unsafe {
            ptr::copy_nonoverlapping(src.add(body), x.as_mut_ptr(), r);
            ptr::copy_nonoverlapping(w.add(body), wv.as_mut_ptr(), r);
            ptr::copy_nonoverlapping(cc.add(body), c.as_mut_ptr(), r);
            ptr::copy_nonoverlapping(ss.add(body), sn.as_mut_ptr(), r);
            let n = round_to::<S, T, F>(s, normed::<S, T, F>(s, T::load(s, x.as_ptr()), iv, wv.as_ptr()));
            let y = s.add(s.mul(n, s.load(c.as_ptr())), s.mul(s.swap_pairs(n), s.load(sn.as_ptr())));
            T::store(s, x.as_mut_ptr(), y);
            ptr::copy_nonoverlapping(x.as_ptr(), dst.add(body), r);
        }
    }
}
