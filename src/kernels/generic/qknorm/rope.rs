//! The fused QK-norm + RoPE kernel ([`norm_rope_heads`]) and its scalar oracle
//! ([`norm_rope_heads_scalar`]): the norm of the parent module and the rotation in one pass
//! over each head, the head kept in registers where it fits.

use super::*;

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
            || r.layout != PairLayout::HalfSplit
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
            (NormForm::OnePlus, PairLayout::HalfSplit, false) => {
                norm_rope_in::<S, T, { ONE_PLUS | QUIET }, false>(s, a)
            }
            (NormForm::OnePlus, PairLayout::Interleaved, false) => {
                norm_rope_in::<S, T, { ONE_PLUS | QUIET }, true>(s, a)
            }
            (_, PairLayout::HalfSplit, false) => norm_rope_in::<S, T, { WEIGHTED | QUIET }, false>(s, a),
            (_, PairLayout::Interleaved, false) => norm_rope_in::<S, T, { WEIGHTED | QUIET }, true>(s, a),
            (NormForm::OnePlus, PairLayout::HalfSplit, true) => norm_rope_in::<S, T, ONE_PLUS, false>(s, a),
            (NormForm::OnePlus, PairLayout::Interleaved, true) => norm_rope_in::<S, T, ONE_PLUS, true>(s, a),
            (_, PairLayout::HalfSplit, true) => norm_rope_in::<S, T, WEIGHTED, false>(s, a),
            (_, PairLayout::Interleaved, true) => norm_rope_in::<S, T, WEIGHTED, true>(s, a),
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
