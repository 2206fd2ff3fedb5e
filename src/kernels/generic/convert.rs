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
//!   [`SimdElement::store`] (one rounding, NaN → canonical NaN).
//! - `q8_0`: a rotated head of at most 512 values is first rotated into an f32 stack
//!   buffer (the f32 output path above), then quantized block by block from it; otherwise
//!   (pure converts, longer heads) each block's 32 values are computed in registers when
//!   the block lies in one segment, or through an aligned stack buffer (segments clipped
//!   to the block). Each block is quantized from registers: `amax` by [`Simd::max_abs`]
//!   and [`Simd::reduce_max_abs`] (integer maxima of the `|x|` bits, so a NaN or infinity
//!   shows as a non-finite `amax`), `d` and `id` in scalar f32 by the oracle's own
//!   [`scale_of`], `q = x * id` rounded half away from zero and packed by
//!   [`Simd::store_round_i8`] (`t + trunc(2 (q - t))` with `t = trunc(q)`, both steps
//!   exact); `d` rounded by [`Simd::f16_of`]. Non-finite blocks, and blocks so small that
//!   `1 / d` overflows, take the oracle ([`BlockQ8_0::quantize`]): the same bits by
//!   definition.

use core::mem::MaybeUninit;

use half::{bf16, f16};

use super::{expand_rows, Row, Simd, SimdElement, MAX_LANES};
use crate::element::Element;
use crate::kernels::q8_0::{scale_of, BlockQ8_0, QK8_0};
use crate::kernels::scalar::convert_value;
use crate::kernels::shape::{Layout, MAX_PAIRS};
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
        (Layout::HalfSplit, false) => unsafe { H::run::<S, I, false, false>(s, a, &rows) },
        // SAFETY: as above.
        (Layout::HalfSplit, true) => unsafe { H::run::<S, I, false, true>(s, a, &rows) },
        (Layout::Interleaved, inverse) => {
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
        unsafe { O::store2(s, [self.0.add(e), self.0.add(e + S::LANES)], v) }
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

/// The `HalfSplit` pairs of one head (`pairs >= S::LANES`), both members of `S::LANES`
/// pairs per step (one load of each input; the [`FIRST`] and [`SECOND`] formulas), the last
/// step overlapping the previous one.
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
    // SAFETY: every step has i + l <= pairs.
    unsafe {
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
    let pairs = r.pairs;
    // SAFETY: i + LANES <= pairs: both halves' chunks lie in the head, the rows' in the rows.
    unsafe {
        let c = s.load(r.cos.as_ptr().add(i));
        let sn = signed::<S, INVERSE>(s, s.load(r.sin.as_ptr().add(i)));
        let (x0, x1) = (I::load(s, src.add(i)), I::load(s, src.add(pairs + i)));
        let y = [s.sub(s.mul(x0, c), s.mul(x1, sn)), s.add(s.mul(x1, c), s.mul(x0, sn))];
        O::store2(s, [dst.add(i), dst.add(pairs + i)], y);
    }
}

/// Heads of `q8_0` blocks: each block's 32 values into a stack buffer, then [`quantize`].
struct ToBlocks;

/// One block's values, aligned so that its vector loads and stores never split a line.
#[repr(C, align(64))]
struct BlockValues([MaybeUninit<f32>; QK8_0]);

impl Heads<BlockQ8_0> for ToBlocks {
    #[inline(always)]
    unsafe fn run<S: Simd, I: SimdElement, const INTERLEAVED: bool, const INVERSE: bool>(
        s: S,
        a: &ConvertArgs<'_, I, BlockQ8_0>,
        r: &Rows<'_>,
    ) {
        let mut values = BlockValues([MaybeUninit::uninit(); QK8_0]);
        let buf = values.0.as_mut_ptr().cast::<f32>();
        let (pairs, rotary_dim) = (r.pairs, 2 * r.pairs);
        if rotary_dim > 0 && a.head_dim <= HEAD_VALUES {
            // SAFETY: forwarded (the head fits the buffer).
            return unsafe { Self::two_phase::<S, I, INTERLEAVED, INVERSE>(s, a, r) };
        }
        for h in 0..a.heads {
            // SAFETY: head `h` is in bounds for both pointers (ConvertFn contract).
            let (src, dst) = unsafe { (a.src.add(h * a.src_head_stride), a.dst.add(h * a.dst_head_stride)) };
            for b in 0..a.head_dim / QK8_0 {
                let (lo, hi) = (b * QK8_0, (b + 1) * QK8_0);
                // SAFETY (every arm): the block's elements lie in the head (head_dim % 32 ==
                // 0) and in the segment named; block b is in the destination head.
                unsafe {
                    let out = dst.add(b);
                    // A block inside one segment (every block when `rotary_dim` and `pairs`
                    // are multiples of 32) is computed in registers.
                    if hi <= rotary_dim && INTERLEAVED {
                        quantize(s, block::<S, I, INTER, INVERSE>(s, src, r, lo), out);
                    } else if !INTERLEAVED && hi <= pairs {
                        quantize(s, block::<S, I, FIRST, INVERSE>(s, src, r, lo), out);
                    } else if !INTERLEAVED && lo >= pairs && hi <= rotary_dim {
                        quantize(s, block::<S, I, SECOND, INVERSE>(s, src, r, lo), out);
                    } else if lo >= rotary_dim {
                        quantize(s, block::<S, I, REST, INVERSE>(s, src, r, lo), out);
                    } else {
                        // Elsewhere through the buffer: the segments clipped to the block
                        // fill all of it.
                        let mut k = BlockSink { buf, base: lo };
                        head_range::<S, I, BlockQ8_0, _, INTERLEAVED, INVERSE>(
                            s,
                            a,
                            src,
                            r,
                            [lo, hi],
                            &mut k,
                        );
                        let mut v = [s.splat(0.0); MAX_BLOCK_VECTORS];
                        for (j, v) in v.iter_mut().take(QK8_0 / S::LANES).enumerate() {
                            *v = s.load(buf.add(j * S::LANES));
                        }
                        quantize(s, v, out);
                    }
                }
            }
        }
    }
}

/// The largest head [`ToBlocks::two_phase`] takes (2 KB of f32 on the stack).
const HEAD_VALUES: usize = 512;

/// A head's rotated values, aligned as [`BlockValues`].
#[repr(C, align(64))]
struct HeadValues([MaybeUninit<f32>; HEAD_VALUES]);

impl ToBlocks {
    /// Each head rotated into an f32 stack buffer first (the f32 path of [`ToElements`],
    /// the same values), then quantized block by block from it: two simple loops, which
    /// measured faster than rotating inside each block's quantization (whose long
    /// per-block dependency chain, max → division → division → rounding, leaves little
    /// room for the rotation).
    ///
    /// # Safety
    /// As [`Heads::run`], with `a.head_dim <= HEAD_VALUES`.
    #[inline(always)]
    unsafe fn two_phase<S: Simd, I: SimdElement, const INTERLEAVED: bool, const INVERSE: bool>(
        s: S,
        a: &ConvertArgs<'_, I, BlockQ8_0>,
        r: &Rows<'_>,
    ) {
        let mut values = HeadValues([MaybeUninit::uninit(); HEAD_VALUES]);
        let buf = values.0.as_mut_ptr().cast::<f32>();
        for h in 0..a.heads {
            // SAFETY: head `h` is in bounds for both pointers (ConvertFn contract).
            let (src, dst) = unsafe { (a.src.add(h * a.src_head_stride), a.dst.add(h * a.dst_head_stride)) };
            let one = ConvertArgs::<I, f32> {
                src,
                dst: buf,
                heads: 1,
                src_head_stride: 0,
                dst_head_stride: 0,
                head_dim: a.head_dim,
                cos: a.cos,
                sin: a.sin,
                layout: a.layout,
                inverse: a.inverse,
            };
            // SAFETY: one head of the call into the buffer (head_dim <= HEAD_VALUES), which
            // is then read back whole (all head_dim values written); block b is in the
            // destination head.
            unsafe {
                <ToElements as Heads<f32>>::run::<S, I, INTERLEAVED, INVERSE>(s, &one, r);
                for b in 0..a.head_dim / QK8_0 {
                    quantize(s, block::<S, f32, REST, INVERSE>(s, buf, r, b * QK8_0), dst.add(b));
                }
            }
        }
    }
}

/// Vectors per block on the narrowest tier (4 lanes); wider tiers use the first
/// `32 / S::LANES`.
const MAX_BLOCK_VECTORS: usize = QK8_0 / 4;

/// The 32 values of the block at element `lo` of the head at `src`, all in one segment of
/// kind `KIND`, as `32 / S::LANES` vectors (the rest of the array unused).
///
/// # Safety
/// As [`vec`] for every vector of the block.
#[inline(always)]
unsafe fn block<S: Simd, I: SimdElement, const KIND: u8, const INVERSE: bool>(
    s: S,
    src: *const I,
    r: &Rows<'_>,
    lo: usize,
) -> [S::V; MAX_BLOCK_VECTORS] {
    let mut v = [s.splat(0.0); MAX_BLOCK_VECTORS];
    for (j, v) in v.iter_mut().take(QK8_0 / S::LANES).enumerate() {
        // SAFETY: forwarded; lo + 32 stays in the segment.
        *v = unsafe { vec::<S, I, KIND, INVERSE>(s, src, r, lo + j * S::LANES) };
    }
    v
}

/// Quantizes the block held in the first `32 / S::LANES` vectors of `v` into `out` (see
/// the module docs).
///
/// # Safety
/// `out` is valid for a write.
#[inline(always)]
unsafe fn quantize<S: Simd>(s: S, v: [S::V; MAX_BLOCK_VECTORS], out: *mut BlockQ8_0) {
    let n = QK8_0 / S::LANES;
    let mut m = s.splat(0.0);
    for &v in &v[..n] {
        m = s.max_abs(m, s.abs(v));
    }
    // The integer maximum of the |x| bits is NaN or infinite iff a value is; then the
    // oracle decides (as it does when `1 / d` overflows).
    let amax = s.reduce_max_abs(m);
    let (d, id) = if amax.is_finite() { scale_of(amax) } else { (0.0, f32::INFINITY) };
    if !id.is_finite() {
        let mut x = [0.0f32; QK8_0];
        for (j, &v) in v[..n].iter().enumerate() {
            // SAFETY: j * LANES + LANES <= 32.
            unsafe { s.store(x.as_mut_ptr().add(j * S::LANES), v) };
        }
        // SAFETY: the caller guarantees `out`.
        unsafe { out.write(BlockQ8_0::quantize(&x)) };
        return;
    }
    let idv = s.splat(id);
    // SAFETY: `out` is valid for a write (caller); `qs` is its field.
    let qs = unsafe { core::ptr::addr_of_mut!((*out).qs) }.cast::<i8>();
    for (j, &v) in v[..n].iter().enumerate() {
        // SAFETY: j * LANES + LANES <= 32 quants; |x * id| <= 127.00003 (module docs).
        unsafe { s.store_round_i8(qs.add(j * S::LANES), s.mul(v, idv)) };
    }
    // SAFETY: as above, the scale field.
    unsafe { core::ptr::addr_of_mut!((*out).d).write(s.f16_of(d)) };
}
