//! The convert kernel (issue 17), written once over [`Simd`]: heads read as `I`, rotated
//! (or only converted), and stored as `O` with one rounding, or quantized to ggml `q8_0`
//! blocks ([`BlockQ8_0`]).
//!
//! # Segments
//! A head is walked in segments whose elements are each computed by one vector formula:
//! - `HalfSplit`: `0..pairs` (each the `y0` of its pair, `(x0 * c) - (x1 * s')`) and
//!   `pairs..rotary_dim` (each the `y1`, `(x1 * c) + (x0 * s')`), `s' = ±s` as in
//!   [`rotate`](super::rotate); the two members of a pair are computed by different
//!   vectors, which load the pair's inputs once each (out of place, nothing is clobbered);
//! - `Interleaved`: `0..rotary_dim`, `(x * cc) + (swap(x) * ss)` with the expanded rows
//!   ([`expand_rows`]);
//! - `rotary_dim..head_dim`: the elements widened.
//!
//! These are the oracle's operations ([`scalar::convert_value`]) lane by lane (see the
//! module docs of [`generic`](super) for the sign identities). A segment is covered by
//! whole vectors, the last one overlapping the previous (out of place, the shared
//! elements are stored twice with the same bits); a segment shorter than one vector is
//! computed element by element with the oracle's own function.
//!
//! # Outputs
//! - f32, f16, bf16: each vector is stored through [`SimdElement::store2`] /
//!   [`SimdElement::store`] (one rounding, NaN → canonical NaN); two vectors of consecutive
//!   elements through [`SimdElement::store_run2`] (the same bits, one store on AVX2 and
//!   NEON for bf16).
//! - `q8_0`: the values of up to [`CHUNK_BLOCKS`] blocks (across heads) are computed into
//!   an aligned L1 buffer (segments clipped to each head's blocks), then quantized in three
//!   passes ([`quantize_chunk`]) so that the blocks' chains overlap: `amax` per block by
//!   [`Simd::max_abs`] and [`Simd::reduce_max_abs`] (integer maxima of the `|x|` bits, so a
//!   NaN or infinity shows as a non-finite `amax`); `d` and `id` in scalar f32 by the
//!   oracle's own [`scale_of`]; `q = x * id` rounded half away from zero and packed by
//!   [`Simd::store_round_i8`] (`t + trunc(2 (q - t))` with `t = trunc(q)`, both steps
//!   exact); `d` rounded by [`Simd::f16_of`]. Non-finite blocks, and blocks so small that
//!   `1 / d` overflows, take the oracle ([`BlockQ8_0::quantize`]) — the same bits by
//!   definition.

use core::mem::MaybeUninit;

use half::{bf16, f16};

use super::{expand_rows, Row, Simd, SimdElement, MAX_LANES};
use crate::kernels::element::Element;
use crate::kernels::q8_0::{scale_of, BlockQ8_0, QK8_0};
use crate::kernels::scalar::convert_value;
use crate::kernels::shape::{PairLayout, MAX_PAIRS};
use crate::kernels::ConvertArgs;

/// A destination type of the convert kernels: its unit of storage, its oracle and its
/// vector body.
pub(crate) trait ConvertOut: Copy + 'static {
    /// Values per unit (1, or 32 for `q8_0`).
    const UNIT: usize;
    /// The oracle: the unit holding the `UNIT` values `x` (`O::from_f32`, or ggml's
    /// quantizer).
    fn from_values(x: &[f32]) -> Self;
    /// The vector body for this output.
    ///
    /// # Safety
    /// The contract of [`ConvertFn`](crate::kernels::ConvertFn); `s` proves its tier.
    unsafe fn convert_heads<S: Simd, I: SimdElement>(s: S, a: &ConvertArgs<'_, I, Self>);
}

macro_rules! convert_out_element {
    ($($t:ty),+) => {$(
        impl ConvertOut for $t {
            const UNIT: usize = 1;
            #[inline(always)]
            fn from_values(x: &[f32]) -> Self {
                <$t as Element>::from_f32(x[0])
            }
            #[inline(always)]
            unsafe fn convert_heads<S: Simd, I: SimdElement>(s: S, a: &ConvertArgs<'_, I, Self>) {
                // SAFETY: forwarded.
                unsafe { dispatch::<S, I, Self, ToElements>(s, a) }
            }
        }
    )+};
}
convert_out_element!(f32, f16, bf16);

impl ConvertOut for BlockQ8_0 {
    const UNIT: usize = QK8_0;
    #[inline(always)]
    fn from_values(x: &[f32]) -> Self {
        let mut b = [0.0; QK8_0];
        b.copy_from_slice(x);
        BlockQ8_0::quantize(&b)
    }
    #[inline(always)]
    unsafe fn convert_heads<S: Simd, I: SimdElement>(s: S, a: &ConvertArgs<'_, I, Self>) {
        // SAFETY: forwarded.
        unsafe { dispatch::<S, I, Self, ToBlocks>(s, a) }
    }
}

/// The vector kernel behind every tier's `convert` entry point.
///
/// # Safety
/// The contract of [`ConvertFn`](crate::kernels::ConvertFn); `s` proves its tier.
#[inline(always)]
pub(crate) unsafe fn convert<S: Simd, I: SimdElement, O: ConvertOut>(s: S, a: &ConvertArgs<'_, I, O>) {
    const { assert!(S::LANES <= MAX_LANES && QK8_0.is_multiple_of(2 * S::LANES)) };
    debug_assert!(a.sin.len() == a.cos.len() && 2 * a.cos.len() <= a.head_dim && a.cos.len() <= MAX_PAIRS);
    // SAFETY: forwarded.
    unsafe { O::convert_heads(s, a) }
}

/// How a head loop writes its heads: element by element ([`ToElements`]) or in `q8_0`
/// blocks ([`ToBlocks`]).
trait Heads<O> {
    /// # Safety
    /// As [`convert`]; `h` describes the call, `INTERLEAVED == (a.layout == Interleaved)`.
    unsafe fn run<S: Simd, I: SimdElement, const INTERLEAVED: bool, const INVERSE: bool>(
        s: S,
        a: &ConvertArgs<'_, I, O>,
        h: &Rows<'_>,
    );
}

/// Picks the monomorphic head loop for the call's layout and direction and expands the
/// `Interleaved` rows once.
///
/// # Safety
/// As [`convert`].
#[inline(always)]
unsafe fn dispatch<S: Simd, I: SimdElement, O, H: Heads<O>>(s: S, a: &ConvertArgs<'_, I, O>) {
    let rows =
        Rows { pairs: a.cos.len(), cos: a.cos, sin: a.sin, cc: core::ptr::null(), ss: core::ptr::null() };
    match (a.layout, a.inverse) {
        // SAFETY: forwarded; the layout and direction are the call's.
        (PairLayout::HalfSplit, false) => unsafe { H::run::<S, I, false, false>(s, a, &rows) },
        // SAFETY: as above.
        (PairLayout::HalfSplit, true) => unsafe { H::run::<S, I, false, true>(s, a, &rows) },
        (PairLayout::Interleaved, inverse) => {
            let mut cc = Row([MaybeUninit::uninit(); 2 * MAX_PAIRS]);
            let mut ss = Row([MaybeUninit::uninit(); 2 * MAX_PAIRS]);
            let (ccp, ssp) = (cc.0.as_mut_ptr().cast::<f32>(), ss.0.as_mut_ptr().cast::<f32>());
            // SAFETY: both rows hold 2 * MAX_PAIRS >= 2 * pairs entries.
            unsafe { expand_rows(s, a.cos, a.sin, inverse, ccp, ssp) };
            let rows = Rows { cc: ccp.cast_const(), ss: ssp.cast_const(), ..rows };
            if inverse {
                // SAFETY: as above.
                unsafe { H::run::<S, I, true, true>(s, a, &rows) }
            } else {
                // SAFETY: as above.
                unsafe { H::run::<S, I, true, false>(s, a, &rows) }
            }
        }
    }
}

/// The cos/sin rows of a call: as given, and (`Interleaved`) expanded (`cc`, `ss`, the
/// first `2 * pairs` entries initialised; null for `HalfSplit`).
struct Rows<'a> {
    pairs: usize,
    cos: &'a [f32],
    sin: &'a [f32],
    cc: *const f32,
    ss: *const f32,
}

/// Segment kinds (see the module docs).
const FIRST: u8 = 0;
const SECOND: u8 = 1;
const INTER: u8 = 2;
const REST: u8 = 3;

/// The values of elements `e .. e + S::LANES` of the head at `src`, all in one segment of
/// kind `KIND`.
///
/// # Safety
/// `src` is a source head of the call of `r`; `e .. e + S::LANES` lies in one segment of
/// kind `KIND` (even `e` for [`INTER`]).
#[inline(always)]
unsafe fn vec<S: Simd, I: SimdElement, const KIND: u8, const INVERSE: bool>(
    s: S,
    src: *const I,
    r: &Rows<'_>,
    e: usize,
) -> S::V {
    // SAFETY: the caller keeps every range in its segment: inside the head and the rows.
    unsafe {
        match KIND {
            FIRST => {
                let (c, sn) =
                    (s.load(r.cos.as_ptr().add(e)), signed::<S, INVERSE>(s, s.load(r.sin.as_ptr().add(e))));
                let (x0, x1) = (I::load(s, src.add(e)), I::load(s, src.add(e + r.pairs)));
                s.sub(s.mul(x0, c), s.mul(x1, sn))
            }
            SECOND => {
                let i = e - r.pairs;
                let (c, sn) =
                    (s.load(r.cos.as_ptr().add(i)), signed::<S, INVERSE>(s, s.load(r.sin.as_ptr().add(i))));
                let (x0, x1) = (I::load(s, src.add(i)), I::load(s, src.add(e)));
                s.add(s.mul(x1, c), s.mul(x0, sn))
            }
            INTER => {
                let x = I::load(s, src.add(e));
                s.add(s.mul(x, s.load(r.cc.add(e))), s.mul(s.swap_pairs(x), s.load(r.ss.add(e))))
            }
            _ => I::load(s, src.add(e)),
        }
    }
}

/// `-v` when `INVERSE` (a sign flip, exact), else `v`.
#[inline(always)]
fn signed<S: Simd, const INVERSE: bool>(s: S, v: S::V) -> S::V {
    if INVERSE {
        s.xor(v, s.splat(-0.0))
    } else {
        v
    }
}

/// Where a segment's values go.
trait Sink<S: Simd> {
    /// Elements `e .. e + S::LANES`.
    ///
    /// # Safety
    /// The elements lie in the sink's range.
    unsafe fn put(&mut self, s: S, e: usize, v: S::V);
    /// Elements `e .. e + 2 * S::LANES`.
    ///
    /// # Safety
    /// As [`Sink::put`].
    unsafe fn put2(&mut self, s: S, e: usize, v: [S::V; 2]);
    /// Element `e`.
    ///
    /// # Safety
    /// As [`Sink::put`].
    unsafe fn put_one(&mut self, e: usize, x: f32);
}

/// Stores into a destination head of `O` (element `e` at `dst + e`).
struct ElementSink<O>(*mut O);

impl<S: Simd, O: SimdElement> Sink<S> for ElementSink<O> {
    #[inline(always)]
    unsafe fn put(&mut self, s: S, e: usize, v: S::V) {
        // SAFETY: the caller keeps e .. e + LANES in the head.
        unsafe { O::store(s, self.0.add(e), v) }
    }
    #[inline(always)]
    unsafe fn put2(&mut self, s: S, e: usize, v: [S::V; 2]) {
        // SAFETY: the caller keeps e .. e + 2 LANES in the head.
        unsafe { O::store_run2(s, self.0.add(e), v) }
    }
    #[inline(always)]
    unsafe fn put_one(&mut self, e: usize, x: f32) {
        // SAFETY: the caller keeps e in the head.
        unsafe { self.0.add(e).write(O::from_f32(x)) }
    }
}

/// Stores into the f32 buffer of the block starting at element `base` (element `e` at
/// `buf + e - base`).
struct BlockSink {
    buf: *mut f32,
    base: usize,
}

impl<S: Simd> Sink<S> for BlockSink {
    #[inline(always)]
    unsafe fn put(&mut self, s: S, e: usize, v: S::V) {
        // SAFETY: the caller keeps e - base .. + LANES in the block.
        unsafe { s.store(self.buf.add(e - self.base), v) }
    }
    #[inline(always)]
    unsafe fn put2(&mut self, s: S, e: usize, [v0, v1]: [S::V; 2]) {
        // SAFETY: the caller keeps e - base .. + 2 LANES in the block.
        unsafe {
            s.store(self.buf.add(e - self.base), v0);
            s.store(self.buf.add(e - self.base + S::LANES), v1);
        }
    }
    #[inline(always)]
    unsafe fn put_one(&mut self, e: usize, x: f32) {
        // SAFETY: the caller keeps e - base in the block.
        unsafe { self.buf.add(e - self.base).write(x) }
    }
}

/// Elements `lo..hi` of the head at `src`, all of segment kind `KIND`, into `k`: two
/// vectors per step, then one, then one overlapping the previous; element by element
/// (the oracle's [`convert_value`]) when shorter than a vector.
///
/// # Safety
/// `src` is a source head of the call `a`; `lo..hi` lies in one segment of kind `KIND`
/// (`lo` even for [`INTER`]) and in `k`'s range.
#[inline(always)]
unsafe fn segment<S: Simd, I: SimdElement, O, K: Sink<S>, const KIND: u8, const INVERSE: bool>(
    s: S,
    a: &ConvertArgs<'_, I, O>,
    src: *const I,
    r: &Rows<'_>,
    [lo, hi]: [usize; 2],
    k: &mut K,
) {
    let l = S::LANES;
    if hi <= lo {
        return;
    }
    if hi - lo < l {
        for e in lo..hi {
            // SAFETY: e < hi <= head_dim; the rows are the call's.
            let x = unsafe { convert_value(src, a.cos, a.sin, a.layout, a.inverse, e) };
            // SAFETY: e is in k's range.
            unsafe { k.put_one(e, x) };
        }
        return;
    }
    let mut e = lo;
    // SAFETY (every step): each vector lies in lo..hi (the last one ends at hi; lo, hi and
    // l are even for INTER, so its start is even).
    unsafe {
        while e + 2 * l <= hi {
            let v = [vec::<S, I, KIND, INVERSE>(s, src, r, e), vec::<S, I, KIND, INVERSE>(s, src, r, e + l)];
            k.put2(s, e, v);
            e += 2 * l;
        }
        if e + l <= hi {
            k.put(s, e, vec::<S, I, KIND, INVERSE>(s, src, r, e));
            e += l;
        }
        if e < hi {
            k.put(s, hi - l, vec::<S, I, KIND, INVERSE>(s, src, r, hi - l));
        }
    }
}

/// The segments of a head clipped to `lo..hi`, into `k`.
///
/// # Safety
/// As [`segment`], for `lo..hi` inside the head (even bounds for `Interleaved`).
#[inline(always)]
unsafe fn head_range<S: Simd, I: SimdElement, O, K: Sink<S>, const INTERLEAVED: bool, const INVERSE: bool>(
    s: S,
    a: &ConvertArgs<'_, I, O>,
    src: *const I,
    r: &Rows<'_>,
    [lo, hi]: [usize; 2],
    k: &mut K,
) {
    let (pairs, rotary_dim) = (r.pairs, 2 * r.pairs);
    // SAFETY: each range is one segment clipped to lo..hi.
    unsafe {
        if INTERLEAVED {
            segment::<S, I, O, K, INTER, INVERSE>(s, a, src, r, [lo, hi.min(rotary_dim)], k);
        } else {
            segment::<S, I, O, K, FIRST, INVERSE>(s, a, src, r, [lo, hi.min(pairs)], k);
            segment::<S, I, O, K, SECOND, INVERSE>(s, a, src, r, [lo.max(pairs), hi.min(rotary_dim)], k);
        }
        segment::<S, I, O, K, REST, INVERSE>(s, a, src, r, [lo.max(rotary_dim), hi], k);
    }
}

/// Heads of f32, f16 or bf16: every segment straight into the destination head.
struct ToElements;

impl<O: SimdElement> Heads<O> for ToElements {
    #[inline(always)]
    unsafe fn run<S: Simd, I: SimdElement, const INTERLEAVED: bool, const INVERSE: bool>(
        s: S,
        a: &ConvertArgs<'_, I, O>,
        r: &Rows<'_>,
    ) {
        for h in 0..a.heads {
            // SAFETY: head `h` is in bounds for both pointers (ConvertFn contract).
            let (src, dst) = unsafe { (a.src.add(h * a.src_head_stride), a.dst.add(h * a.dst_head_stride)) };
            let k = &mut ElementSink(dst);
            // SAFETY: the whole head, into its destination head: `HalfSplit` pairs (both
            // members per vector, as `rotate` computes them) then the rest, or every segment.
            unsafe {
                if INTERLEAVED || r.pairs < S::LANES {
                    head_range::<S, I, O, _, INTERLEAVED, INVERSE>(s, a, src, r, [0, a.head_dim], k);
                } else {
                    half_split_pairs::<S, I, O, INVERSE>(s, src, dst, r);
                    segment::<S, I, O, _, REST, INVERSE>(s, a, src, r, [2 * r.pairs, a.head_dim], k);
                }
            }
        }
    }
}

/// The `HalfSplit` pairs of one head (`pairs >= S::LANES`), both members of `2 * S::LANES`
/// pairs per step while they last ([`pair_step2`]), then of `S::LANES` (one load of each
/// input; the [`FIRST`] and [`SECOND`] formulas), the last step overlapping the previous one.
///
/// # Safety
/// `src`, `dst` are a source and destination head of the call of `r`; `r.pairs >= S::LANES`.
#[inline(always)]
unsafe fn half_split_pairs<S: Simd, I: SimdElement, O: SimdElement, const INVERSE: bool>(
    s: S,
    src: *const I,
    dst: *mut O,
    r: &Rows<'_>,
) {
    let (l, pairs) = (S::LANES, r.pairs);
    let mut i = 0;
    // SAFETY: every step has i + 2 l <= pairs, or i + l <= pairs.
    unsafe {
        while i + 2 * l <= pairs {
            pair_step2::<S, I, O, INVERSE>(s, src, dst, r, i);
            i += 2 * l;
        }
        while i + l <= pairs {
            pair_step::<S, I, O, INVERSE>(s, src, dst, r, i);
            i += l;
        }
        if i < pairs {
            pair_step::<S, I, O, INVERSE>(s, src, dst, r, pairs - l);
        }
    }
}

/// Pairs `i .. i + S::LANES` of a `HalfSplit` head, both members.
///
/// # Safety
/// As [`half_split_pairs`], with `i + S::LANES <= r.pairs`.
#[inline(always)]
unsafe fn pair_step<S: Simd, I: SimdElement, O: SimdElement, const INVERSE: bool>(
    s: S,
    src: *const I,
    dst: *mut O,
    r: &Rows<'_>,
    i: usize,
) {
    // SAFETY: i + LANES <= pairs: both halves' chunks lie in the head, the rows' in the rows.
    unsafe {
        let y = pair_values::<S, I, INVERSE>(s, src, r, i);
        O::store2(s, [dst.add(i), dst.add(r.pairs + i)], y);
    }
}

/// Pairs `i .. i + 2 * S::LANES` of a `HalfSplit` head, both members: the operations of two
/// [`pair_step`]s, each half's `2 * S::LANES` results stored as one run
/// ([`SimdElement::store_run2`]; the same bits).
///
/// # Safety
/// As [`half_split_pairs`], with `i + 2 * S::LANES <= r.pairs`.
#[inline(always)]
unsafe fn pair_step2<S: Simd, I: SimdElement, O: SimdElement, const INVERSE: bool>(
    s: S,
    src: *const I,
    dst: *mut O,
    r: &Rows<'_>,
    i: usize,
) {
    let (l, pairs) = (S::LANES, r.pairs);
    // SAFETY: i + 2 LANES <= pairs: both halves' chunks lie in the head, the rows' in the rows.
    unsafe {
        let [y0a, y1a] = pair_values::<S, I, INVERSE>(s, src, r, i);
        let [y0b, y1b] = pair_values::<S, I, INVERSE>(s, src, r, i + l);
        O::store_run2(s, dst.add(i), [y0a, y0b]);
        O::store_run2(s, dst.add(pairs + i), [y1a, y1b]);
    }
}

/// Both members of pairs `i .. i + S::LANES` of a `HalfSplit` head: `[y0, y1]`.
///
/// # Safety
/// `src` is a source head of the call of `r`, with `i + S::LANES <= r.pairs`.
#[inline(always)]
unsafe fn pair_values<S: Simd, I: SimdElement, const INVERSE: bool>(
    s: S,
    src: *const I,
    r: &Rows<'_>,
    i: usize,
) -> [S::V; 2] {
    // SAFETY: i + LANES <= pairs: both halves' chunks lie in the head, the rows' in the rows.
    unsafe {
        let c = s.load(r.cos.as_ptr().add(i));
        let sn = signed::<S, INVERSE>(s, s.load(r.sin.as_ptr().add(i)));
        let (x0, x1) = (I::load(s, src.add(i)), I::load(s, src.add(r.pairs + i)));
        [s.sub(s.mul(x0, c), s.mul(x1, sn)), s.add(s.mul(x1, c), s.mul(x0, sn))]
    }
}

/// Heads of `q8_0` blocks: the values of chunks of blocks into an L1 buffer, then [`quantize_chunk`].
struct ToBlocks;

impl Heads<BlockQ8_0> for ToBlocks {
    #[inline(always)]
    unsafe fn run<S: Simd, I: SimdElement, const INTERLEAVED: bool, const INVERSE: bool>(
        s: S,
        a: &ConvertArgs<'_, I, BlockQ8_0>,
        r: &Rows<'_>,
    ) {
        let mut values = ChunkValues([MaybeUninit::uninit(); QK8_0 * CHUNK_BLOCKS]);
        let buf = values.0.as_mut_ptr().cast::<f32>();
        let mut outs = [core::ptr::null_mut::<BlockQ8_0>(); CHUNK_BLOCKS];
        let blocks = a.head_dim / QK8_0;
        let mut n = 0;
        // `HalfSplit` with whole vectors of pairs and heads that fit a chunk (the common
        // case): each head whole into the buffer, both members of a pair from one load of
        // its inputs, without the segment bookkeeping.
        let whole_heads =
            !INTERLEAVED && r.pairs >= S::LANES && r.pairs.is_multiple_of(S::LANES) && blocks <= CHUNK_BLOCKS;
        for h in 0..a.heads {
            // SAFETY: head `h` is in bounds for both pointers (ConvertFn contract).
            let (src, dst) = unsafe { (a.src.add(h * a.src_head_stride), a.dst.add(h * a.dst_head_stride)) };
            if whole_heads {
                if n + blocks > CHUNK_BLOCKS {
                    // SAFETY: the chunk's n blocks are initialised, each with its output.
                    unsafe { quantize_chunk(s, buf, &outs[..n]) };
                    n = 0;
                }
                // SAFETY: the head's values fill chunk blocks n .. n + blocks (n + blocks
                // <= CHUNK_BLOCKS); i + LANES <= pairs in every step; its destinations are
                // the blocks of the destination head.
                unsafe {
                    let out = buf.add(n * QK8_0);
                    let mut i = 0;
                    while i < r.pairs {
                        let [y0, y1] = pair_values::<S, I, INVERSE>(s, src, r, i);
                        s.store(out.add(i), y0);
                        s.store(out.add(r.pairs + i), y1);
                        i += S::LANES;
                    }
                    let mut k = BlockSink { buf: out, base: 0 };
                    segment::<S, I, BlockQ8_0, _, REST, INVERSE>(
                        s,
                        a,
                        src,
                        r,
                        [2 * r.pairs, a.head_dim],
                        &mut k,
                    );
                    for j in 0..blocks {
                        outs[n + j] = dst.add(j);
                    }
                }
                n += blocks;
                continue;
            }
            let mut b = 0;
            while b < blocks {
                let m = (blocks - b).min(CHUNK_BLOCKS - n);
                // SAFETY: blocks b .. b + m of the head lie in it (head_dim % 32 == 0) and
                // fill chunk blocks n .. n + m of the buffer (element lo at buf + 32 n);
                // their destinations are blocks of the destination head.
                unsafe {
                    let lo = b * QK8_0;
                    let mut k = BlockSink { buf: buf.add(n * QK8_0), base: lo };
                    head_range::<S, I, BlockQ8_0, _, INTERLEAVED, INVERSE>(
                        s,
                        a,
                        src,
                        r,
                        [lo, lo + m * QK8_0],
                        &mut k,
                    );
                    for j in 0..m {
                        outs[n + j] = dst.add(b + j);
                    }
                }
                (b, n) = (b + m, n + m);
                if n == CHUNK_BLOCKS {
                    // SAFETY: the chunk's n blocks are initialised, each with its output.
                    unsafe { quantize_chunk(s, buf, &outs[..n]) };
                    n = 0;
                }
            }
        }
        if n > 0 {
            // SAFETY: as above.
            unsafe { quantize_chunk(s, buf, &outs[..n]) };
        }
    }
}

/// Blocks quantized together (see [`quantize_chunk`]): the rotated values of up to this
/// many blocks, across heads, wait in an L1 buffer (4 KB).
const CHUNK_BLOCKS: usize = 32;

/// The values of a chunk of blocks, aligned so that vector loads and stores never split a
/// line.
#[repr(C, align(64))]
struct ChunkValues([MaybeUninit<f32>; QK8_0 * CHUNK_BLOCKS]);

/// Quantizes the blocks held in `buf` (block `j` at `buf + 32 j`) into `outs[j]`, in three
/// passes so that no block's chain (maximum, reduction, two divisions, scaling) waits on
/// another's: every block's `amax` first, then every block's `d` and `id` (the oracle's
/// [`scale_of`], independent scalar divisions), then the quants. The bits are those of
/// the previous one-block-at-a-time quantizer (the same operations per block, in the same order).
///
/// # Safety
/// `buf` holds `32 * outs.len()` initialised values; each `outs[j]` is valid for a write.
#[inline(always)]
unsafe fn quantize_chunk<S: Simd>(s: S, buf: *const f32, outs: &[*mut BlockQ8_0]) {
    let n = outs.len().min(CHUNK_BLOCKS);
    let vectors = QK8_0 / S::LANES;
    let mut amax = [0.0f32; CHUNK_BLOCKS];
    for (j, amax) in amax.iter_mut().take(n).enumerate() {
        let mut m = s.splat(0.0);
        for v in 0..vectors {
            // SAFETY: block j's values lie in the buffer (caller).
            m = s.max_abs(m, s.abs(unsafe { s.load(buf.add(j * QK8_0 + v * S::LANES)) }));
        }
        *amax = s.reduce_max_abs(m);
    }
    let (mut d, mut id) = ([0.0f32; CHUNK_BLOCKS], [0.0f32; CHUNK_BLOCKS]);
    for ((d, id), &amax) in d.iter_mut().zip(&mut id).zip(&amax).take(n) {
        // Non-finite blocks (and those whose `1 / d` overflows) take the oracle below.
        (*d, *id) = if amax.is_finite() { scale_of(amax) } else { (0.0, f32::INFINITY) };
    }
    if id.iter().all(|id| id.is_finite()) {
        // Every block regular: the scales rounded to f16 a vector at a time (the rounding of
        // `f16_of`; every `d` is finite), the quants without a branch.
        let mut dh = [f16::ZERO; CHUNK_BLOCKS];
        for g in (0..CHUNK_BLOCKS).step_by(S::LANES) {
            // SAFETY: g + LANES <= CHUNK_BLOCKS (LANES divides 32).
            unsafe { s.store_f16(dh.as_mut_ptr().add(g), s.load(d.as_ptr().add(g))) };
        }
        for (j, (&out, (&id, &dh))) in outs.iter().zip(id.iter().zip(&dh)).take(n).enumerate() {
            // SAFETY: block j's values lie in the buffer; `out` is valid for a write (caller).
            unsafe { quantize_block(s, buf.add(j * QK8_0), id, dh, out) };
        }
        return;
    }
    for (j, (&out, (&d, &id))) in outs.iter().zip(d.iter().zip(&id)).take(n).enumerate() {
        // SAFETY: block j's values lie in the buffer; `out` is valid for a write (caller).
        unsafe {
            let x = buf.add(j * QK8_0);
            if id.is_finite() {
                quantize_block(s, x, id, s.f16_of(d), out);
            } else {
                let mut b = [0.0f32; QK8_0];
                core::ptr::copy_nonoverlapping(x, b.as_mut_ptr(), QK8_0);
                out.write(BlockQ8_0::quantize(&b));
            }
        }
    }
}

/// The block of the 32 values at `x` with the finite `id` and the f16 scale `dh` into `out`.
///
/// # Safety
/// `x` holds 32 values; `out` is valid for a write.
#[inline(always)]
unsafe fn quantize_block<S: Simd>(s: S, x: *const f32, id: f32, dh: f16, out: *mut BlockQ8_0) {
    let idv = s.splat(id);
    // SAFETY: the caller's; `qs` and `d` are fields of `out`.
    unsafe {
        let qs = core::ptr::addr_of_mut!((*out).qs).cast::<i8>();
        for v in 0..QK8_0 / S::LANES {
            // |x * id| < 127.5 (at most ~127.00006: module docs).
            s.store_round_i8(qs.add(v * S::LANES), s.mul(s.load(x.add(v * S::LANES)), idv));
        }
        core::ptr::addr_of_mut!((*out).d).write(dh);
    }
}
