//! The interleaved rotation walks of [`rotate_in`](super::rotate_in): blocks of pairs with
//! expanded cos/sin rows, whole heads, the bf16 word paths, and the tails.

use super::*;

/// # Safety
/// As [`rotate`].
#[inline(always)]
pub(super) unsafe fn interleaved<S: Simd, T: SimdElement>(s: S, a: &RotateArgs<'_, T>) {
    // SAFETY: forwarded from the caller.
    if unsafe { T::interleaved_special(s, a) } {
        return;
    }
    // On 64-bit targets every head is one block (`ROW_PAIRS == MAX_PAIRS`): one pass, as
    // fast as the kernel was before blocks (a loop of one block measured 15-25% slower on
    // interleaved prefill, AVX-512).
    if ROW_PAIRS == MAX_PAIRS {
        // SAFETY: the caller's contract; `a.cos.len() <= MAX_PAIRS == ROW_PAIRS`.
        return unsafe { interleaved_block(s, a) };
    }
    // Elsewhere in blocks of `ROW_PAIRS` pairs, so that the expanded rows stay small on the
    // stack (issue 13: a microcontroller's stack). Each element gets the same operations as
    // in one pass; only the order in which heads and blocks are visited changes.
    let pairs = a.cos.len();
    let mut p0 = 0;
    while p0 < pairs {
        let n = (pairs - p0).min(ROW_PAIRS);
        let block = RotateArgs {
            // In bounds of every head: 2 * (p0 + n) <= rotary_dim <= head_dim.
            src: a.src.wrapping_add(2 * p0),
            dst: a.dst.wrapping_add(2 * p0),
            cos: &a.cos[p0..p0 + n],
            sin: &a.sin[p0..p0 + n],
            ..*a
        };
        // SAFETY: the caller's contract, for pairs p0 .. p0 + n of every head.
        unsafe { interleaved_block(s, &block) };
        p0 += n;
    }
}

/// [`interleaved`] for at most [`ROW_PAIRS`] pairs.
///
/// # Safety
/// As [`rotate`], with `a.cos.len() <= ROW_PAIRS`.
#[inline(always)]
pub(super) unsafe fn interleaved_block<S: Simd, T: SimdElement>(s: S, a: &RotateArgs<'_, T>) {
    let rotary_dim = 2 * a.cos.len();
    // Expand the rows once per call: cc = [c0 c0 c1 c1 ..], ss = [-s0 s0 ..] forward or
    // [s0 -s0 ..] inverse. Only 0..rotary_dim is written, and only that is read. One pair of
    // rows for every loop below (each inlined loop with rows of its own overflowed a 2 MB
    // test thread's stack in debug builds).
    let mut cc = Row([MaybeUninit::uninit(); 2 * ROW_PAIRS]);
    let mut ss = Row([MaybeUninit::uninit(); 2 * ROW_PAIRS]);
    let (ccp, ssp) = (cc.0.as_mut_ptr().cast::<f32>(), ss.0.as_mut_ptr().cast::<f32>());
    // SAFETY: both rows hold 2 * ROW_PAIRS >= rotary_dim entries.
    unsafe { expand_rows(s, a.cos, a.sin, a.inverse, ccp, ssp) };
    let rows = [ccp.cast_const(), ssp.cast_const()];
    // As in `half_split_dir`: heads of one to eight whole steps of two vectors, unrolled.
    if cfg!(target_pointer_width = "64")
        && rotary_dim.is_multiple_of(2 * S::LANES)
        // SAFETY: forwarded from the caller; `rotary_dim == 2 * NV * S::LANES`; the rows are
        // the call's, expanded.
        && whole_vectors!(rotary_dim / (2 * S::LANES), NV => unsafe { interleaved_whole::<S, T, NV>(s, a, rows) })
    {
        return;
    }
    // Heads of exactly one vector (half a step: rotary_dim 8 on AVX2, 16 on AVX-512): the
    // rows in registers once per call, one load, formula and store per head. The general
    // loop below reloaded its pointers and bounds from the stack per head: 128 heads at
    // rotary_dim 8 took 1.0-1.07 µs per decode call on AVX2, 1.6x the portable tier's time
    // (issue 18's rotary_dim sweep).
    if cfg!(target_pointer_width = "64") && rotary_dim == S::LANES {
        // SAFETY: both expanded rows hold rotary_dim == LANES initialised entries.
        let (c, sn) = unsafe { (s.load(ccp), s.load(ssp)) };
        let bytes = rotary_dim * core::mem::size_of::<T>();
        let ahead = heads_ahead(bytes);
        for h in 0..a.heads {
            prefetch_head(s, a, h, ahead, bytes);
            // SAFETY: head `h` is in bounds for both pointers (RotateFn contract), and its
            // 0..rotary_dim is one vector; the load precedes the store.
            unsafe {
                let (src, dst) = (a.src.add(h * a.src_head_stride), a.dst.add(h * a.dst_head_stride));
                T::store(s, dst, interleaved_formula(s, T::load(s, src), c, sn));
            }
        }
        return;
    }
    // As in `half_split_dir`: heads without an overlapping tail get a loop without one.
    if !rotary_dim.is_multiple_of(S::LANES) && rotary_dim >= S::LANES {
        // SAFETY: forwarded from the caller; the rows are the call's, expanded.
        unsafe { interleaved_block_in::<S, T, true>(s, a, rows) }
    } else {
        // SAFETY: forwarded from the caller; the rows are the call's, expanded.
        unsafe { interleaved_block_in::<S, T, false>(s, a, rows) }
    }
}

/// [`interleaved_block`] for heads of exactly `NV` steps of two vectors: each head `NV` steps
/// of [`interleaved_step`]'s operations, unrolled, reading the expanded rows' vectors (every
/// head of a call shares them) for every head.
///
/// # Safety
/// As [`interleaved_block`], with `2 * a.cos.len() == 2 * NV * S::LANES`; `[ccp, ssp]` are
/// the call's rows expanded by [`expand_rows`] (`rotary_dim` entries each).
#[inline(always)]
pub(super) unsafe fn interleaved_whole<S: Simd, T: SimdElement, const NV: usize>(
    s: S,
    a: &RotateArgs<'_, T>,
    [ccp, ssp]: [*const f32; 2],
) {
    let lanes = S::LANES;
    let rotary_dim = 2 * NV * lanes;
    debug_assert!(2 * a.cos.len() == rotary_dim);
    // The expanded rows are read again for every head (memory operands), not held in
    // registers: NV steps of 4 vectors exceed the register file, and an array built once per
    // call (`core::array::from_fn`, whose closure does not inherit the target features) cost
    // interleaved decode 14% more instructions than these loads (AVX2, callgrind).
    let bytes = rotary_dim * core::mem::size_of::<T>();
    let ahead = heads_ahead(bytes);
    for h in 0..a.heads {
        prefetch_head(s, a, h, ahead, bytes);
        // Step j reads entries o..o + 2 * lanes < rotary_dim of the rows (all initialised by
        // `expand_rows`) and of head `h`.
        // SAFETY: head `h` is in bounds for both pointers (RotateFn contract), and step j's
        // two vectors lie in its 0..rotary_dim; both loads of a step precede its stores.
        unsafe {
            let (src, dst) = (a.src.add(h * a.src_head_stride), a.dst.add(h * a.dst_head_stride));
            for j in 0..NV {
                let o = 2 * j * lanes;
                let (c0, s0) = (s.load(ccp.add(o)), s.load(ssp.add(o)));
                let (c1, s1) = (s.load(ccp.add(o + lanes)), s.load(ssp.add(o + lanes)));
                let (x0, x1) = (T::load(s, src.add(o)), T::load(s, src.add(o + lanes)));
                let y = [interleaved_formula(s, x0, c0, s0), interleaved_formula(s, x1, c1, s1)];
                T::store2(s, [dst.add(o), dst.add(o + lanes)], y);
            }
        }
    }
}

/// [`interleaved_block`]; `OVERLAP`: the heads end with an overlapping vector.
///
/// # Safety
/// As [`interleaved_block`]; `[ccp, ssp]` are the call's rows expanded by [`expand_rows`].
#[inline(always)]
pub(super) unsafe fn interleaved_block_in<S: Simd, T: SimdElement, const OVERLAP: bool>(
    s: S,
    a: &RotateArgs<'_, T>,
    [ccp, ssp]: [*const f32; 2],
) {
    let lanes = S::LANES;
    let pairs = a.cos.len();
    let rotary_dim = 2 * pairs;

    // Two vectors per step, then at most one single vector, then a partial one.
    let body2 = rotary_dim - rotary_dim % (2 * lanes);
    let body = rotary_dim - rotary_dim % lanes;
    let tail = rotary_dim - body;
    let bytes = rotary_dim * core::mem::size_of::<T>();
    let ahead = heads_ahead(bytes);
    for h in 0..a.heads {
        prefetch_head(s, a, h, ahead, bytes);
        // SAFETY: head `h` is in bounds for both pointers (RotateFn contract).
        let (src, dst) = unsafe { (a.src.add(h * a.src_head_stride), a.dst.add(h * a.dst_head_stride)) };
        // A partial last vector: the vector ending at rotary_dim (pair-aligned: both even),
        // rotated before the head's first store and stored last (see `half_split_last`).
        let last = if OVERLAP {
            let o = rotary_dim - lanes;
            // SAFETY: o + lanes == rotary_dim: inside the head and the initialised rows.
            Some(unsafe { interleaved_vec(s, src.add(o), ccp.add(o), ssp.add(o)) })
        } else {
            None
        };
        let mut j = 0;
        while j < body2 {
            // SAFETY: j + 2 * lanes <= rotary_dim: inside the head and the initialised part
            // of cc/ss.
            unsafe { interleaved_step(s, src.add(j), dst.add(j), ccp.add(j), ssp.add(j)) };
            j += 2 * lanes;
        }
        if body2 < body {
            // SAFETY: body2 + lanes == body <= rotary_dim, as above.
            unsafe {
                let y = interleaved_vec(s, src.add(body2), ccp.add(body2), ssp.add(body2));
                T::store(s, dst.add(body2), y);
            }
        }
        if let Some(y) = last {
            // SAFETY: rotary_dim - lanes .. rotary_dim is in the head.
            unsafe { T::store(s, dst.add(rotary_dim - lanes), y) };
        } else if tail != 0 {
            // A head shorter than one vector: pair by pair with the oracle's own formula, as
            // in `half_split_head` (the padded copies made rotary_dim 2 on AVX2 7x slower
            // than on the portable tier).
            for i in body / 2..pairs {
                // SAFETY: 2 i + 1 < rotary_dim: the pair lies in the head, the rows hold
                // `pairs` entries; each pair is read before it is written.
                unsafe {
                    let (x0, x1) = ((*src.add(2 * i)).to_f32(), (*src.add(2 * i + 1)).to_f32());
                    let (y0, y1) = rotate_pair(x0, x1, a.cos[i], a.sin[i], a.inverse);
                    *dst.add(2 * i) = T::from_f32(y0);
                    *dst.add(2 * i + 1) = T::from_f32(y1);
                }
            }
        }
    }
}

/// Expands a cos/sin row for `Interleaved` into `cc = [c0 c0 c1 c1 ..]` and
/// `ss = [-s0 s0 -s1 s1 ..]` (forward) or `[s0 -s0 ..]` (`inverse`): `2 * cos.len()`
/// entries each at `ccp`, `ssp` (see the module docs for why lane `2i` then computes the
/// oracle's `y0`).
///
/// # Safety
/// `ccp` and `ssp` are valid for writes of `2 * cos.len()` f32; `sin.len() == cos.len()`.
#[inline(always)]
pub(super) unsafe fn expand_rows<S: Simd>(
    s: S,
    cos: &[f32],
    sin: &[f32],
    inverse: bool,
    ccp: *mut f32,
    ssp: *mut f32,
) {
    let (lanes, pairs) = (S::LANES, cos.len());
    let sign = s.splat(if inverse { -0.0 } else { 0.0 });
    let neg = s.splat(-0.0);
    let expand_body = pairs - pairs % lanes;
    let mut i = 0;
    while i < expand_body {
        // SAFETY: i + lanes <= pairs; 2 * i + 2 * lanes <= 2 * pairs entries of the rows.
        unsafe {
            let c = s.load(cos.as_ptr().add(i));
            let sn = s.xor(s.load(sin.as_ptr().add(i)), sign);
            let (c0, c1) = s.zip(c, c);
            let (s0, s1) = s.zip(s.xor(sn, neg), sn);
            s.store(ccp.add(2 * i), c0);
            s.store(ccp.add(2 * i + lanes), c1);
            s.store(ssp.add(2 * i), s0);
            s.store(ssp.add(2 * i + lanes), s1);
        }
        i += lanes;
    }
    for i in expand_body..pairs {
        let (c, sn) = (cos[i], if inverse { -sin[i] } else { sin[i] });
        // SAFETY: 2 * i + 1 < 2 * pairs.
        unsafe {
            ccp.add(2 * i).write(c);
            ccp.add(2 * i + 1).write(c);
            ssp.add(2 * i).write(-sn);
            ssp.add(2 * i + 1).write(sn);
        }
    }
}

/// `Interleaved` for bf16: each pair is one 32-bit word, widened to `(x0, x1)` vectors
/// with a shift and a mask ([`Simd::load_bf16_pairs`]), rotated with the `HalfSplit`
/// formula and the rows as they are, and narrowed back without a shuffle.
///
/// # Safety
/// As [`rotate`]; `INVERSE == a.inverse`.
#[inline(always)]
pub(super) unsafe fn interleaved_words<S: Simd, const INVERSE: bool>(s: S, a: &RotateArgs<'_, bf16>) {
    let pairs = a.cos.len();
    // As in `half_split_dir`: heads without an overlapping tail get a loop without one
    // (one loop measured 12% slower on AVX-512 bf16 prefill).
    if !pairs.is_multiple_of(S::LANES) && pairs >= S::LANES {
        // SAFETY: forwarded from the caller.
        unsafe { interleaved_words_in::<S, INVERSE, true>(s, a) }
    } else {
        // SAFETY: forwarded from the caller.
        unsafe { interleaved_words_in::<S, INVERSE, false>(s, a) }
    }
}

/// [`interleaved_words`]; `OVERLAP`: the heads end with an overlapping vector.
///
/// # Safety
/// As [`rotate`]; `INVERSE == a.inverse`.
#[inline(always)]
pub(super) unsafe fn interleaved_words_in<S: Simd, const INVERSE: bool, const OVERLAP: bool>(
    s: S,
    a: &RotateArgs<'_, bf16>,
) {
    let lanes = S::LANES;
    let pairs = a.cos.len();
    let body = pairs - pairs % lanes;
    let tail = pairs - body;
    let (cos, sin) = (a.cos.as_ptr(), a.sin.as_ptr());
    let ahead = heads_ahead(4 * pairs);
    for h in 0..a.heads {
        prefetch_head(s, a, h, ahead, 4 * pairs);
        // SAFETY: head `h` is in bounds for both pointers (RotateFn contract).
        let (src, dst) = unsafe { (a.src.add(h * a.src_head_stride), a.dst.add(h * a.dst_head_stride)) };
        // A partial last vector: the one ending at the last pair, rotated before the head's
        // first store and stored last (see `half_split_last`).
        let last = if OVERLAP {
            let i = pairs - lanes;
            // SAFETY: i + lanes == pairs: elements 2i .. rotary_dim and the rows' entries.
            Some(unsafe { words_rot::<S, INVERSE>(s, src.add(2 * i), cos.add(i), sin.add(i)) })
        } else {
            None
        };
        let mut i = 0;
        while i < body {
            // SAFETY: i + lanes <= pairs: elements 2i .. 2i + 2 lanes are in the head.
            unsafe { words_step::<S, INVERSE>(s, src.add(2 * i), dst.add(2 * i), cos.add(i), sin.add(i)) };
            i += lanes;
        }
        if let Some((y0, y1)) = last {
            // SAFETY: elements 2 (pairs - lanes) .. rotary_dim are in the head.
            unsafe { store_words(s, dst.add(2 * (pairs - lanes)), y0, y1) };
        } else if tail != 0 {
            // A head shorter than one vector: pair by pair with the oracle's own formula, as
            // in `half_split_head` (padded copies in and out cost ~47 ns per head).
            for i in body..pairs {
                // SAFETY: 2 i + 1 < rotary_dim: the pair lies in the head, the rows hold
                // `pairs` entries; each pair is read before it is written.
                unsafe {
                    let (x0, x1) = ((*src.add(2 * i)).to_f32(), (*src.add(2 * i + 1)).to_f32());
                    let (y0, y1) = rotate_pair(x0, x1, *cos.add(i), *sin.add(i), INVERSE);
                    *dst.add(2 * i) = <bf16 as Element>::from_f32(y0);
                    *dst.add(2 * i + 1) = <bf16 as Element>::from_f32(y1);
                }
            }
        }
    }
}

/// One step of [`interleaved_words`]: `S::LANES` pairs from `p` to `q`, rows at `c`, `sn`
/// (negated when `INVERSE`).
///
/// # Safety
/// `p` valid for reads and `q` for writes of `2 * S::LANES` bf16, `c` and `sn` for reads of
/// `S::LANES` f32; `p == q` or disjoint.
#[inline(always)]
pub(super) unsafe fn words_step<S: Simd, const INVERSE: bool>(
    s: S,
    p: *const bf16,
    q: *mut bf16,
    c: *const f32,
    sn: *const f32,
) {
    // SAFETY: the caller guarantees every range; the loads precede the store.
    unsafe {
        let (y0, y1) = words_rot::<S, INVERSE>(s, p, c, sn);
        store_words(s, q, y0, y1);
    }
}

/// The rotation of [`words_step`] without the store: `(y0, y1)` of `S::LANES` pairs at `p`.
///
/// # Safety
/// `p` valid for reads of `2 * S::LANES` bf16, `c` and `sn` of `S::LANES` f32.
#[inline(always)]
pub(super) unsafe fn words_rot<S: Simd, const INVERSE: bool>(
    s: S,
    p: *const bf16,
    c: *const f32,
    sn: *const f32,
) -> (S::V, S::V) {
    // SAFETY: the caller guarantees every range.
    unsafe {
        let c = s.load(c);
        let sn = if INVERSE { s.xor(s.load(sn), s.splat(-0.0)) } else { s.load(sn) };
        let (x0, x1) = s.load_bf16_pairs(p);
        (s.sub(s.mul(x0, c), s.mul(x1, sn)), s.add(s.mul(x1, c), s.mul(x0, sn)))
    }
}
