//! The half-split rotation walks of [`rotate_in`](super::rotate_in): per head, or whole
//! heads of a few vectors kept in registers, the bf16 word paths, and the tails.

use super::*;

/// # Safety
/// As [`rotate`].
#[inline(always)]
pub(super) unsafe fn half_split<S: Simd, T: SimdElement>(s: S, a: &RotateArgs<'_, T>) {
    if a.inverse {
        // SAFETY: forwarded from the caller.
        unsafe { half_split_dir::<S, T, true>(s, a) }
    } else {
        // SAFETY: forwarded from the caller.
        unsafe { half_split_dir::<S, T, false>(s, a) }
    }
}

/// # Safety
/// As [`rotate`]; `INVERSE == a.inverse`.
#[inline(always)]
pub(super) unsafe fn half_split_dir<S: Simd, T: SimdElement, const INVERSE: bool>(
    s: S,
    a: &RotateArgs<'_, T>,
) {
    // SAFETY: forwarded from the caller.
    if unsafe { T::half_split_special::<S, INVERSE>(s, a) } {
        return;
    }
    let pairs = a.cos.len();
    // Heads whose pairs fill one to eight whole vectors (rotary_dim 128 is 4 on AVX-512 and 8
    // on AVX2): the row's vectors are loaded once per call and each head is one unrolled run
    // of steps. 32-bit targets (microcontrollers) keep the loops: eight copies of the kernel
    // for a few cycles per head are not worth their flash there.
    if cfg!(target_pointer_width = "64")
        && pairs.is_multiple_of(S::LANES)
        // SAFETY: forwarded from the caller; `pairs == NV * S::LANES`.
        && whole_vectors!(pairs / S::LANES, NV => unsafe { half_split_whole::<S, T, INVERSE, NV, false>(s, a) })
    {
        return;
    }
    // Heads of two to eight vectors of pairs whose last one overlaps (pairs 9-15 on AVX2:
    // GPT-NeoX-20B's 12), unrolled the same way: through the loop below they took twice the
    // time of the next whole size (rotary_dim 24 against 32 on AVX2: 0.99-1.05 against
    // 0.50 µs for 128 heads), slower than the portable tier, whose 4 lanes fill them.
    if cfg!(target_pointer_width = "64")
        && pairs > S::LANES
        && !pairs.is_multiple_of(S::LANES)
        // SAFETY: forwarded from the caller; `(NV - 1) * S::LANES < pairs < NV * S::LANES`.
        && whole_vectors!(pairs.div_ceil(S::LANES), NV => unsafe { half_split_whole::<S, T, INVERSE, NV, true>(s, a) })
    {
        return;
    }
    // On 16 lanes two loops, so that heads without an overlapping tail run the loop without
    // one (the code from before tails overlapped): one loop measured up to 10% slower on
    // AVX-512 decode and prefill (scripts/bench-gate.sh against the previous kernels). On
    // 8 lanes the opposite: two loops made AVX2 decode f32 25% slower, one loop 4%. Both
    // code-layout effects; the bits are the same either way.
    if S::LANES < 16 || (!pairs.is_multiple_of(S::LANES) && pairs >= S::LANES) {
        // SAFETY: forwarded from the caller.
        unsafe { half_split_heads::<S, T, INVERSE, true>(s, a) }
    } else {
        // SAFETY: forwarded from the caller.
        unsafe { half_split_heads::<S, T, INVERSE, false>(s, a) }
    }
}

/// The head loop of [`half_split_dir`] for heads of `NV` vectors of pairs: the row's `NV`
/// cos and sin vectors loaded before the loop (every head of a call shares the row), each
/// head `NV` steps of the same operations as [`half_split_head`], unrolled. With `OVERLAP`
/// the last vector starts at `pairs - LANES` and overlaps the one before: it is rotated
/// first and stored last (as [`half_split_last`]; the shared lanes get the same values
/// twice).
///
/// # Safety
/// As [`rotate`]; `INVERSE == a.inverse`; `a.cos.len() == NV * S::LANES`, or with `OVERLAP`
/// `(NV - 1) * S::LANES < a.cos.len() < NV * S::LANES`.
#[inline(always)]
pub(super) unsafe fn half_split_whole<
    S: Simd,
    T: SimdElement,
    const INVERSE: bool,
    const NV: usize,
    const OVERLAP: bool,
>(
    s: S,
    a: &RotateArgs<'_, T>,
) {
    let lanes = S::LANES;
    // Whole heads: a compile-time length, so every offset below is a constant.
    let pairs = if OVERLAP { a.cos.len() } else { NV * lanes };
    debug_assert!(a.cos.len() == pairs && a.sin.len() == pairs);
    debug_assert!(if OVERLAP { (NV - 1) * lanes < pairs && pairs < NV * lanes } else { true });
    // Vector j's first pair: j * lanes, the last one's `pairs - lanes` (the same for whole
    // heads; overlapping the one before otherwise).
    let last = pairs - lanes;
    let (cos, sin) = (a.cos.as_ptr(), a.sin.as_ptr());
    // A loop, not `core::array::from_fn`: a closure does not inherit this function's target
    // features, so wherever the inliner left `from_fn` out of line (it did in one build of
    // the gate bench: 6 calls per decode step, +20% instructions), every intrinsic in it
    // became a call.
    let mut rows = MaybeUninit::<[(S::V, S::V); NV]>::uninit();
    let first = rows.as_mut_ptr().cast::<(S::V, S::V)>();
    for j in 0..NV - 1 {
        let i = j * lanes;
        // SAFETY: i + lanes <= pairs: vector j lies in the rows; entry j < NV of `rows`.
        unsafe { first.add(j).write(row_vectors::<S, INVERSE>(s, cos.add(i), sin.add(i))) };
    }
    // SAFETY: the last vector, `last..pairs`, lies in the rows; entry NV - 1 of `rows`.
    unsafe { first.add(NV - 1).write(row_vectors::<S, INVERSE>(s, cos.add(last), sin.add(last))) };
    // SAFETY: every one of the NV entries was written just above.
    let rows = unsafe { rows.assume_init() };
    let bytes = 2 * pairs * core::mem::size_of::<T>();
    let ahead = heads_ahead(bytes);
    // The head loop of `half_split_heads`, written out again: one helper taking each head
    // as a closure, shared by the two, cost AVX2 decode 8% more instructions (Llama 3.1,
    // callgrind: 6,640 against 6,150 per call).
    for h in 0..a.heads {
        prefetch_head(s, a, h, ahead, bytes);
        // SAFETY: head `h` is in bounds for both pointers (RotateFn contract), and every
        // vector below lies in 0..pairs of its half; with OVERLAP the last vector is loaded
        // before any store (as `half_split_last`), so in place it reads unmodified elements.
        unsafe {
            let (src, dst) = (a.src.add(h * a.src_head_stride), a.dst.add(h * a.dst_head_stride));
            let y = if OVERLAP {
                let (c, sn) = rows[NV - 1];
                let (x0, x1) = (T::load(s, src.add(last)), T::load(s, src.add(pairs + last)));
                Some([s.sub(s.mul(x0, c), s.mul(x1, sn)), s.add(s.mul(x1, c), s.mul(x0, sn))])
            } else {
                None
            };
            let stepped = if OVERLAP { NV - 1 } else { NV };
            for (j, &(c, sn)) in rows.iter().enumerate().take(stepped) {
                let i = j * lanes;
                half_split_vectors::<S, T, T>(
                    s,
                    [src.add(i), src.add(pairs + i)],
                    [dst.add(i), dst.add(pairs + i)],
                    c,
                    sn,
                );
            }
            if let Some(y) = y {
                T::store2(s, [dst.add(last), dst.add(pairs + last)], y);
            }
        }
    }
}

/// The head loop of [`half_split_dir`]; `OVERLAP`: the heads end with an overlapping
/// vector ([`half_split_last`]).
///
/// # Safety
/// As [`rotate`]; `INVERSE == a.inverse`.
#[inline(always)]
pub(super) unsafe fn half_split_heads<S: Simd, T: SimdElement, const INVERSE: bool, const OVERLAP: bool>(
    s: S,
    a: &RotateArgs<'_, T>,
) {
    let bytes = 2 * a.cos.len() * core::mem::size_of::<T>();
    let ahead = heads_ahead(bytes);
    for h in 0..a.heads {
        prefetch_head(s, a, h, ahead, bytes);
        // SAFETY: head `h` is in bounds for both pointers (RotateFn contract).
        unsafe {
            let (src, dst) = (a.src.add(h * a.src_head_stride), a.dst.add(h * a.dst_head_stride));
            let last = if OVERLAP { half_split_last::<S, T, INVERSE>(s, src, a.cos, a.sin, 0) } else { None };
            half_split_head::<S, T, INVERSE>(s, src, dst, a.cos, a.sin, 0, last);
        }
    }
}

/// The last vector of pairs of a head (`pairs - LANES ..`), rotated but not stored, when
/// the pairs from `start` do not fill whole vectors but the head holds at least one: the
/// tail of [`half_split_head`], which stores it over the end of the head. Called before any
/// store to the head, so in place it reads only unmodified elements; the lanes it shares
/// with the last whole vector get the same values twice (same inputs, same operations).
///
/// # Safety
/// `src` is one head of a [`RotateArgs`] (its contract) with `cos.len()` pairs.
#[inline(always)]
pub(super) unsafe fn half_split_last<S: Simd, T: SimdElement, const INVERSE: bool>(
    s: S,
    src: *const T,
    cos: &[f32],
    sin: &[f32],
    start: usize,
) -> Option<[S::V; 2]> {
    let (lanes, pairs) = (S::LANES, cos.len());
    if (pairs - start).is_multiple_of(lanes) || pairs < lanes {
        return None;
    }
    let i = pairs - lanes;
    // SAFETY: i + lanes == pairs: both halves' chunks lie in the head, the rows' in the rows.
    unsafe {
        let c = s.load(cos.as_ptr().add(i));
        let sn = sin.as_ptr().add(i);
        let sn = if INVERSE { s.xor(s.load(sn), s.splat(-0.0)) } else { s.load(sn) };
        let x0 = T::load(s, src.add(i));
        let x1 = T::load(s, src.add(pairs + i));
        Some([s.sub(s.mul(x0, c), s.mul(x1, sn)), s.add(s.mul(x1, c), s.mul(x0, sn))])
    }
}

/// `HalfSplit` on pairs `start..` of one head (`src`/`dst` point at element 0). A last
/// partial vector is `last` ([`half_split_last`], computed before the head's first store)
/// stored over the end of the head, or without one (a head shorter than a vector) is
/// rotated pair by pair with the oracle's formula.
///
/// # Safety
/// `src` and `dst` are one head of a [`RotateArgs`] (its contract) with `cos.len()` pairs;
/// `last` is [`half_split_last`] of the same head and `start`.
#[inline(always)]
pub(super) unsafe fn half_split_head<S: Simd, T: SimdElement, const INVERSE: bool>(
    s: S,
    src: *const T,
    dst: *mut T,
    cos: &[f32],
    sin: &[f32],
    start: usize,
    last: Option<[S::V; 2]>,
) {
    let lanes = S::LANES;
    let pairs = cos.len();
    let body = pairs - (pairs - start) % lanes;
    let tail = pairs - body;
    let (cos, sin) = (cos.as_ptr(), sin.as_ptr());
    let mut i = start;
    while i < body {
        // SAFETY: i + lanes <= pairs, so both halves' chunks lie in 0..rotary_dim of the head
        // and the cos/sin chunks in the rows.
        unsafe {
            half_split_step::<S, T, INVERSE>(
                s,
                [src.add(i), src.add(pairs + i)],
                [dst.add(i), dst.add(pairs + i)],
                cos.add(i),
                sin.add(i),
            );
        }
        i += lanes;
    }
    if let Some(y) = last {
        // SAFETY: pairs >= lanes (`half_split_last` returned a vector): both chunks end at
        // the end of their half.
        unsafe { T::store2(s, [dst.add(pairs - lanes), dst.add(2 * pairs - lanes)], y) };
    } else if tail != 0 {
        // A head shorter than one vector (pairs < lanes): pair by pair with the oracle's own
        // formula (`scalar::rotate_pair`, `Element::from_f32`), the same bits by definition.
        // Zero-padded stack copies in and out (four reads and two writes of variable length,
        // each a `memcpy` call) took ~47 ns per head: 128 heads at rotary_dim 2-6 took
        // 6-7.5 µs per decode call on AVX2 against 0.28 µs at rotary_dim 8 (issue 18's
        // rotary_dim sweep).
        for i in body..pairs {
            // SAFETY: i < pairs: both members of the pair lie in the head, the rows hold
            // `pairs` entries; each pair is read before it is written, and no other pair
            // shares its elements.
            unsafe {
                let (x0, x1) = ((*src.add(i)).to_f32(), (*src.add(pairs + i)).to_f32());
                let (y0, y1) = rotate_pair(x0, x1, *cos.add(i), *sin.add(i), INVERSE);
                *dst.add(i) = T::from_f32(y0);
                *dst.add(pairs + i) = T::from_f32(y1);
            }
        }
    }
}

/// `HalfSplit` for bf16 without shuffles: `2 * LANES` consecutive elements of a half are
/// `LANES` 32-bit words, widened to their even and odd elements with a shift and a mask
/// ([`Simd::load_bf16_pairs`]). The rows are split the same way once per call, each lane
/// computes the `HalfSplit` formula, and [`Simd::store_bf16_pairs`] narrows back. Pairs
/// past the last whole block of `2 * LANES` take [`half_split_head`].
///
/// # Safety
/// As [`rotate`]; `INVERSE == a.inverse`.
#[inline(always)]
pub(super) unsafe fn half_split_words<S: Simd, const INVERSE: bool>(s: S, a: &RotateArgs<'_, bf16>) {
    let (lanes, pairs) = (S::LANES, a.cos.len());
    // As in `half_split_dir`: heads without an overlapping tail get a loop without one
    // (one loop measured 15% slower on AVX-512 bf16 prefill).
    let blocks = pairs - pairs % (2 * lanes);
    if !(pairs - blocks).is_multiple_of(lanes) && pairs >= lanes {
        // SAFETY: forwarded from the caller.
        unsafe { half_split_words_in::<S, INVERSE, true>(s, a) }
    } else {
        // SAFETY: forwarded from the caller.
        unsafe { half_split_words_in::<S, INVERSE, false>(s, a) }
    }
}

/// [`half_split_words`]; `OVERLAP`: the heads end with an overlapping vector
/// ([`half_split_last`]).
///
/// # Safety
/// As [`rotate`]; `INVERSE == a.inverse`.
#[inline(always)]
pub(super) unsafe fn half_split_words_in<S: Simd, const INVERSE: bool, const OVERLAP: bool>(
    s: S,
    a: &RotateArgs<'_, bf16>,
) {
    let lanes = S::LANES;
    let pairs = a.cos.len();
    let blocks = pairs - pairs % (2 * lanes);
    // Rows split into even and odd entries per block: block `b` lane `j` holds entry
    // `2 * lanes * b + 2 * j` (even) or `.. + 1` (odd). Only 0..blocks is written and read.
    let mut ce = Row([MaybeUninit::uninit(); SPLIT_ENTRIES]);
    let mut co = Row([MaybeUninit::uninit(); SPLIT_ENTRIES]);
    let mut se = Row([MaybeUninit::uninit(); SPLIT_ENTRIES]);
    let mut so = Row([MaybeUninit::uninit(); SPLIT_ENTRIES]);
    {
        let (cos, sin) = (a.cos.as_ptr(), a.sin.as_ptr());
        let [ce, co, se, so] = [&mut ce, &mut co, &mut se, &mut so].map(|r| r.0.as_mut_ptr().cast::<f32>());
        // Block b, lane j: row entry 2 lanes b + 2 j (even) or + 1 (odd) goes to lanes b + j,
        // which is k / 2 for the entry k = 2 lanes b + 2 j: a plain stride-2 split.
        for k in 0..blocks / 2 {
            // SAFETY: 2 k + 1 < blocks <= pairs entries of the rows; k < blocks / 2 <=
            // MAX_PAIRS / 2 = SPLIT_ENTRIES entries of the buffers.
            unsafe {
                ce.add(k).write(*cos.add(2 * k));
                co.add(k).write(*cos.add(2 * k + 1));
                se.add(k).write(*sin.add(2 * k));
                so.add(k).write(*sin.add(2 * k + 1));
            }
        }
    }
    let rows = [&ce, &co, &se, &so].map(|r| r.0.as_ptr().cast::<f32>());
    let ahead = heads_ahead(4 * pairs);
    for h in 0..a.heads {
        prefetch_head(s, a, h, ahead, 4 * pairs);
        // SAFETY: head `h` is in bounds for both pointers (RotateFn contract); each block
        // covers elements i .. i + 2 lanes of both halves, i + 2 lanes <= blocks <= pairs,
        // and row entries i / 2 .. i / 2 + lanes < blocks / 2, all initialised.
        unsafe {
            let (src, dst) = (a.src.add(h * a.src_head_stride), a.dst.add(h * a.dst_head_stride));
            // Before the blocks' stores: the last vector may overlap the last block.
            let last = if OVERLAP {
                half_split_last::<S, bf16, INVERSE>(s, src, a.cos, a.sin, blocks)
            } else {
                None
            };
            let mut i = 0;
            while i < blocks {
                let r = i / 2;
                // Written out, not `rows.map(..)`: a closure does not inherit the target
                // features (see `half_split_whole`).
                let [ce, co, se, so] = [rows[0], rows[1], rows[2], rows[3]];
                let [ce, co, se, so] =
                    [s.load(ce.add(r)), s.load(co.add(r)), s.load(se.add(r)), s.load(so.add(r))];
                let (se, so) =
                    if INVERSE { (s.xor(se, s.splat(-0.0)), s.xor(so, s.splat(-0.0))) } else { (se, so) };
                let (x0e, x0o) = s.load_bf16_pairs(src.add(i));
                let (x1e, x1o) = s.load_bf16_pairs(src.add(pairs + i));
                let y0e = s.sub(s.mul(x0e, ce), s.mul(x1e, se));
                let y0o = s.sub(s.mul(x0o, co), s.mul(x1o, so));
                let y1e = s.add(s.mul(x1e, ce), s.mul(x0e, se));
                let y1o = s.add(s.mul(x1o, co), s.mul(x0o, so));
                store_words(s, dst.add(i), y0e, y0o);
                store_words(s, dst.add(pairs + i), y1e, y1o);
                i += 2 * lanes;
            }
            half_split_head::<S, bf16, INVERSE>(s, src, dst, a.cos, a.sin, blocks, last);
        }
    }
}

/// [`Simd::store_bf16_pairs`] after the NaN check.
///
/// # Safety
/// `p .. p + 2 * S::LANES` is valid for writes.
#[inline(always)]
pub(super) unsafe fn store_words<S: Simd>(s: S, p: *mut bf16, even: S::V, odd: S::V) {
    let (even, odd) =
        if s.any_nan(even, odd) { (s.canonicalize_nan(even), s.canonicalize_nan(odd)) } else { (even, odd) };
    // SAFETY: forwarded from the caller.
    unsafe { s.store_bf16_pairs(p, even, odd) }
}
