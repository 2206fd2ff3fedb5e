//! Benchmark support (feature `bench-internals`): the rooflines and per-tier kernels the
//! benchmarks compare the rotations with, and the tier suite's direct kernel calls. Not
//! part of the API: no stability promise, may change in any release. Re-exported as
//! `rope_kernels::__bench`.

use crate::dispatch::{kernels_for, Tier};
use crate::error::{Operand, RopeError};
use crate::kernels;
use crate::kernels::element::Element;

pub mod encodings;
pub mod sincos;

/// Calls with more rotated input bytes than this take the kernels' prefetch path (and,
/// out of place with a pass-through part, the head-by-head walk); the tier suite sizes
/// its large calls by it.
pub const PREFETCH_MIN_BYTES: usize = crate::kernels::PREFETCH_MIN_BYTES;

/// The roofline baseline of a tier, for benchmarks: `x[i] = round(x[i] * c)` in place,
/// through the tier's own load, widen, round and store path (NaN results canonical), so a
/// rotate kernel can be compared with a memory pass compiled for the same instructions.
///
/// # Errors
/// [`RopeError::TierUnavailable`] if this build or CPU lacks `tier`.
pub fn scale<T: Element>(tier: Tier, x: &mut [T], c: f32) -> Result<(), RopeError> {
    let k = kernels_for(tier).ok_or(RopeError::TierUnavailable)?;
    // SAFETY: the slice is valid for reads and writes of its length; `kernels_for` only
    // returns tables whose tier this CPU supports.
    unsafe { T::scale_fn(k)(x.as_mut_ptr(), x.len(), c) };
    Ok(())
}

/// The shape of a roofline pass ([`roofline_in_place`], [`roofline_copy`]):
/// `rows` rows of `row_len` elements, `stride` elements apart, from the start of the buffer.
#[derive(Clone, Copy, Debug)]
pub struct RooflineRows {
    /// Number of rows (e.g. tokens × heads).
    pub rows: usize,
    /// Elements from one row's start to the next (`head_dim` for a dense tensor).
    pub stride: usize,
    /// Elements of each row the pass touches (`rotary_dim` in place; `head_dim` out of place).
    pub row_len: usize,
    /// Prefetch 4 KB ahead, as the rotations do in large calls (x86-64 tiers); benchmarks
    /// take the faster of the passes with and without.
    pub prefetch: bool,
}

impl RooflineRows {
    /// The pass in bytes of `T`, if every row lies in `len` elements and rows do not overlap.
    fn bytes<T>(self, len: usize, operand: Operand) -> Result<kernels::roofline::Rows, RopeError> {
        if self.rows > 1 && self.row_len > self.stride {
            return Err(RopeError::OverlappingStrides { operand });
        }
        let needed = match self.rows {
            0 => 0,
            n => (n - 1)
                .checked_mul(self.stride)
                .and_then(|e| e.checked_add(self.row_len))
                .ok_or(RopeError::StrideOverflow { operand })?,
        };
        if needed > len {
            return Err(RopeError::BufferTooShort { operand, needed, len });
        }
        let size = core::mem::size_of::<T>();
        // In bounds of a buffer, so the byte counts fit.
        Ok(kernels::roofline::Rows {
            rows: self.rows,
            stride: self.stride * size,
            row_bytes: self.row_len * size,
            prefetch: self.prefetch,
        })
    }
}

/// The in-place memory roofline of a tier, for benchmarks (issue 18): every byte of every
/// row of `r` in `x` read and written back unchanged with the tier's widest vectors (`x ^=
/// zero`, `zero` opaque to the compiler: pass `black_box(0)`; any other value is refused).
/// The fastest pass over the bytes an in-place rotation reads and writes.
///
/// # Errors
/// [`RopeError::TierUnavailable`] if this build or CPU lacks `tier`;
/// [`RopeError::BufferTooShort`], [`RopeError::OverlappingStrides`] or
/// [`RopeError::StrideOverflow`] if the rows do not fit `x`;
/// [`RopeError::InvalidEncodingParameter`] if `zero != 0`.
pub fn roofline_in_place<T: Element>(
    tier: Tier,
    x: &mut [T],
    r: RooflineRows,
    zero: u64,
) -> Result<(), RopeError> {
    kernels_for(tier).ok_or(RopeError::TierUnavailable)?;
    if zero != 0 {
        return Err(RopeError::InvalidEncodingParameter { name: "zero", requirement: "must be 0" });
    }
    let rows = r.bytes::<T>(x.len(), Operand::Q)?;
    // SAFETY: every row lies in `x` (checked); `kernels_for` returned the tier's table, so the
    // CPU supports it.
    unsafe { kernels::roofline::pass_in_place(tier, x.as_mut_ptr().cast(), rows, zero) };
    Ok(())
}

/// [`roofline_in_place`] of two BSHD tensors token by token, in one call: for each of
/// `tokens` tokens, the rows `q_rows` of that token of `q`, then those `k_rows` of `k` (the
/// order an in-place BSHD rotation walks them). `q_rows` and `k_rows` give one token's rows;
/// token `t`'s start `t × rows × stride` elements into the buffer. The in-place roofline of
/// a multi-token BSHD rotation, without a call per token.
///
/// # Errors
/// As [`roofline_in_place`], for either tensor ([`Operand::Q`], [`Operand::K`]).
pub fn roofline_in_place_tokens<T: Element>(
    tier: Tier,
    q: &mut [T],
    q_rows: RooflineRows,
    k: &mut [T],
    k_rows: RooflineRows,
    tokens: usize,
    zero: u64,
) -> Result<(), RopeError> {
    kernels_for(tier).ok_or(RopeError::TierUnavailable)?;
    if zero != 0 {
        return Err(RopeError::InvalidEncodingParameter { name: "zero", requirement: "must be 0" });
    }
    let part = |x: &mut [T], r: RooflineRows, operand| {
        let all = r.rows.checked_mul(tokens).ok_or(RopeError::StrideOverflow { operand })?;
        // Every token's rows lie in `x` when all tokens' rows, taken as one set, do.
        RooflineRows { rows: all, ..r }.bytes::<T>(x.len(), operand)?;
        let rows = r.bytes::<T>(usize::MAX, operand)?;
        let token_stride = rows.rows.checked_mul(rows.stride).ok_or(RopeError::StrideOverflow { operand })?;
        Ok(kernels::roofline::TokenPart { p: x.as_mut_ptr().cast(), token_stride, rows })
    };
    let parts = [part(q, q_rows, Operand::Q)?, part(k, k_rows, Operand::K)?];
    // SAFETY: every token's rows lie in their buffer (checked), two distinct borrows; the CPU
    // supports the tier (as above).
    unsafe { kernels::roofline::pass_in_place_tokens(tier, parts, tokens, zero) };
    Ok(())
}

/// The out-of-place memory roofline of a tier, for benchmarks (issue 18): every row of `r`
/// copied from `src` to the same place in `dst` with the tier's widest vectors, with
/// ordinary or (`streaming`) non-temporal stores (which skip the destination's read for
/// ownership); benchmarks take the faster of the two.
///
/// # Errors
/// [`RopeError::TierUnavailable`] if this build or CPU lacks `tier`;
/// [`RopeError::BufferTooShort`], [`RopeError::OverlappingStrides`] or
/// [`RopeError::StrideOverflow`] if the rows do not fit either buffer.
pub fn roofline_copy<T: Element>(
    tier: Tier,
    src: &[T],
    dst: &mut [T],
    r: RooflineRows,
    streaming: bool,
) -> Result<(), RopeError> {
    kernels_for(tier).ok_or(RopeError::TierUnavailable)?;
    let rows = r.bytes::<T>(src.len(), Operand::Q)?;
    r.bytes::<T>(dst.len(), Operand::QOut)?;
    // SAFETY: every row lies in both buffers (checked), which are distinct borrows; the CPU
    // supports the tier (as above).
    unsafe { kernels::roofline::copy(tier, src.as_ptr().cast(), dst.as_mut_ptr().cast(), rows, streaming) };
    Ok(())
}

/// The shape of a convert pass ([`convert_rows`]): `tokens` tokens of `heads` heads of
/// `head_dim` values; source head `h` of token `t` at `t * src_token_stride + h *
/// src_head_stride` elements, destination at `t * dst_token_stride + h * dst_head_stride`
/// units of the destination type (blocks for `q8_0`).
#[derive(Clone, Copy, Debug)]
pub struct ConvertRows {
    /// Tokens (one kernel call each).
    pub tokens: usize,
    /// Heads per token.
    pub heads: usize,
    /// Values per head (a multiple of 32 for `q8_0`).
    pub head_dim: usize,
    /// Source elements from one token to the next.
    pub src_token_stride: usize,
    /// Source elements from one head to the next.
    pub src_head_stride: usize,
    /// Destination units from one token to the next.
    pub dst_token_stride: usize,
    /// Destination units from one head to the next.
    pub dst_head_stride: usize,
}

/// The units a lattice of `tokens x heads` rows of `row` units needs, if its rows do not
/// overlap (checked conservatively: each stride covers the rows below it).
fn lattice_extent(
    tokens: usize,
    heads: usize,
    row: usize,
    [token_stride, head_stride]: [usize; 2],
    operand: Operand,
) -> Result<usize, RopeError> {
    if tokens == 0 || heads == 0 {
        return Ok(0);
    }
    let overflow = RopeError::StrideOverflow { operand };
    let token = (heads - 1).checked_mul(head_stride).and_then(|e| e.checked_add(row)).ok_or(overflow)?;
    if (heads > 1 && head_stride < row) || (tokens > 1 && token_stride < token) {
        return Err(RopeError::OverlappingStrides { operand });
    }
    (tokens - 1).checked_mul(token_stride).and_then(|e| e.checked_add(token)).ok_or(overflow)
}

/// The convert kernel of a tier (issue 17), for benchmarks and the tier tests: each token's
/// heads read from `src` as `I`, rotated with the row `cos`/`sin` (`rotary_dim / 2` values;
/// empty: a pure convert) in `layout` and direction `inverse`, and stored in `dst` as `O`
/// with one rounding (or quantized to `q8_0`), one kernel call per token.
///
/// # Errors
/// [`RopeError::TierUnavailable`] if this build or CPU lacks `tier`;
/// [`RopeError::TableShape`] if `sin.len() != cos.len()`;
/// [`RopeError::RotaryDimExceedsHeadDim`] / [`RopeError::RotaryDimTooLarge`] for a row
/// too long; [`RopeError::ShapeMismatch`] (`KOut`) if `O` is `q8_0` and `head_dim % 32 != 0`;
/// [`RopeError::BufferTooShort`], [`RopeError::OverlappingStrides`] or
/// [`RopeError::StrideOverflow`] if the heads do not fit (`K`: the source, `KOut`: the
/// destination). Nothing is written then.
#[allow(clippy::too_many_arguments)]
pub fn convert_rows<I: Element, O: crate::kernels::q8_0::CacheElement>(
    tier: Tier,
    src: &[I],
    dst: &mut [O],
    r: ConvertRows,
    cos: &[f32],
    sin: &[f32],
    layout: crate::kernels::shape::PairLayout,
    inverse: bool,
) -> Result<(), RopeError> {
    let k = kernels_for(tier).ok_or(RopeError::TierUnavailable)?;
    if sin.len() != cos.len() {
        return Err(RopeError::TableShape);
    }
    let rotary_dim = 2 * cos.len();
    if rotary_dim > crate::kernels::shape::MAX_ROTARY_DIM {
        return Err(RopeError::RotaryDimTooLarge { rotary_dim, max: crate::kernels::shape::MAX_ROTARY_DIM });
    }
    if rotary_dim > r.head_dim {
        return Err(RopeError::RotaryDimExceedsHeadDim { rotary_dim, head_dim: r.head_dim });
    }
    if !r.head_dim.is_multiple_of(O::ELEMENTS_PER_UNIT) {
        return Err(RopeError::ShapeMismatch { operand: Operand::KOut });
    }
    let units = r.head_dim / O::ELEMENTS_PER_UNIT;
    for (len, row, strides, operand) in [
        (src.len(), r.head_dim, [r.src_token_stride, r.src_head_stride], Operand::K),
        (dst.len(), units, [r.dst_token_stride, r.dst_head_stride], Operand::KOut),
    ] {
        let needed = lattice_extent(r.tokens, r.heads, row, strides, operand)?;
        if needed > len {
            return Err(RopeError::BufferTooShort { operand, needed, len });
        }
    }
    let f = kernels::convert_fn::<I, O>(k);
    for t in 0..r.tokens {
        let a = kernels::ConvertArgs {
            // In bounds: token t's heads lie in the buffers (checked above).
            src: src.as_ptr().wrapping_add(t * r.src_token_stride),
            dst: dst.as_mut_ptr().wrapping_add(t * r.dst_token_stride),
            heads: r.heads,
            src_head_stride: r.src_head_stride,
            dst_head_stride: r.dst_head_stride,
            head_dim: r.head_dim,
            cos,
            sin,
            layout,
            inverse,
        };
        // Checked above: every head of token t lies in its buffer, destination heads do not
        // overlap, `src`/`dst` are distinct borrows, the row fits, head_dim is whole units.
        // SAFETY: as just said; `kernels_for` returned a table whose tier this CPU supports.
        unsafe { f(&a) };
    }
    Ok(())
}
