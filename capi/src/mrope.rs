//! Multimodal RoPE from C: MRoPE (Qwen2-VL / Qwen2.5-VL sectioned, Qwen3-VL interleaved)
//! and 2-D vision RoPE (Qwen2-VL ViT), on a `rope_t` of the model's 1-D configuration.

use rope_kernels::{
    bf16, f16, AxisOptions, AxisRows, CosSinTable, Direction, Element, HeadsMut, MRopeStyle, Rope,
};

use crate::apply::{
    rope_cos_sin_source, rope_direction, rope_tensor, tensor, ROPE_COS_SIN_ON_THE_FLY, ROPE_COS_SIN_TABLE,
    ROPE_FORWARD, ROPE_INVERSE,
};
use crate::boundary::{disjoint, flag, guard, read_versioned, rust, Buf, R};
use crate::handle::{rope_t, storage, with_rope};
use crate::status::*;

/// Options of `rope_mrope_apply_*` and `rope_vision_apply_*` (required, not NULL): the
/// position streams and the cos/sin source. Fields a call does not use are ignored.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct rope_mrope_opts {
    /// `sizeof(rope_mrope_opts)`.
    pub struct_size: usize,
    /// A `ROPE_FORWARD`/`ROPE_INVERSE` value.
    pub direction: rope_direction,
    /// MRoPE: 0 sectioned (Qwen2-VL, Qwen2.5-VL; ggml MROPE), 1 interleaved (Qwen3-VL; ggml
    /// IMROPE). Ignored by vision.
    pub interleaved: u8,
    /// MRoPE: `mrope_section` `[t, h, w]` in pairs, summing to `rotary_dim / 2`. Ignored by
    /// vision.
    pub mrope_section: [u32; 3],
    /// On the fly: the position streams, `positions_len` values each. MRoPE `[t, h, w]`;
    /// vision `[h, w]` (patch row, column; the third is ignored).
    pub position_ids: [*const u32; 3],
    /// Values in each stream (must equal the tokens).
    pub positions_len: usize,
    /// `ROPE_COS_SIN_ON_THE_FLY`, or `ROPE_COS_SIN_TABLE`: per-token rows (row `n` for
    /// token `n`, `rotary_dim / 2` wide): for `rope_mrope_apply_*` from
    /// `rope_mrope_fill_table`, for `rope_vision_apply_*` from `rope_vision_fill_table` (the
    /// two tables differ; an MRoPE table is wrong for vision).
    pub cos_sin: rope_cos_sin_source,
    /// `ROPE_COS_SIN_TABLE`: `table_len` cos values.
    pub cos: *const f32,
    /// `ROPE_COS_SIN_TABLE`: `table_len` sin values.
    pub sin: *const f32,
    /// `ROPE_COS_SIN_TABLE`: floats in each of `cos` and `sin`.
    pub table_len: usize,
}

/// The checked options: streams (`n` used), rows, direction, MRoPE section and style, and
/// the byte ranges they read.
struct Opts<'a> {
    ids: [&'a [u32]; 3],
    table: Option<CosSinTable<'a>>,
    direction: Direction,
    section: [usize; 3],
    style: MRopeStyle,
    reads: [(usize, usize); 5],
}

impl<'a> Opts<'a> {
    fn apply<const N: usize>(&self) -> AxisOptions<'a, N> {
        let rows = match self.table {
            Some(t) => AxisRows::Table(t),
            None => AxisRows::Ids(core::array::from_fn(|i| self.ids[i])),
        };
        AxisOptions { rows, direction: self.direction }
    }
}

/// Reads and checks `rope_mrope_opts` with `streams` streams.
///
/// # Safety
/// `p` NULL or a readable struct whose used buffers are readable for their counts and not
/// written during the call.
unsafe fn options<'a>(p: *const rope_mrope_opts, streams: usize, pairs: usize) -> R<Opts<'a>> {
    // SAFETY: the caller's contract; every field accepts any bits.
    let o = unsafe { read_versioned(p) }?;
    let direction = match o.direction {
        ROPE_FORWARD => Direction::Forward,
        ROPE_INVERSE => Direction::Inverse,
        _ => return Err(ROPE_UNKNOWN_ENUM),
    };
    let style = if flag(o.interleaved)? { MRopeStyle::Interleaved } else { MRopeStyle::Sectioned };
    let mut reads = [(0, 0); 5];
    let mut ids: [&[u32]; 3] = [&[], &[], &[]];
    let mut table = None;
    match o.cos_sin {
        ROPE_COS_SIN_ON_THE_FLY => {
            for s in 0..streams {
                let b = Buf::new(o.position_ids[s], o.positions_len)?;
                reads[s] = b.bytes();
                // SAFETY: checked by `Buf::new`; readable, unchanged (the contract).
                ids[s] = unsafe { b.slice() };
            }
        }
        ROPE_COS_SIN_TABLE => {
            let cos = Buf::new(o.cos, o.table_len)?;
            let sin = Buf::new(o.sin, o.table_len)?;
            (reads[3], reads[4]) = (cos.bytes(), sin.bytes());
            // SAFETY: checked by `Buf::new`; readable, unchanged (the contract).
            let (cos, sin) = unsafe { (cos.slice(), sin.slice()) };
            table = Some(rust(CosSinTable::new(cos, sin, pairs))?);
        }
        _ => return Err(ROPE_UNKNOWN_ENUM),
    }
    let section = o.mrope_section.map(|s| s as usize);
    Ok(Opts { ids, table, direction, section, style, reads })
}

/// The operation of a call.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Op {
    MRope,
    Vision,
}

/// In place, q and optionally k: checks at the boundary, then the Rust call validates the
/// rest before writing.
///
/// # Safety
/// The contract of the `rope_mrope_apply_*` functions.
unsafe fn in_place<T: Element>(
    op: Op,
    rope: *const rope_t,
    q: *const rope_tensor,
    k: *const rope_tensor,
    opts: *const rope_mrope_opts,
) -> rope_status {
    let body = |r: &Rope<'_>| {
        // SAFETY: the caller's contract (NULL or readable structs).
        let (qb, qv) = unsafe { tensor::<T>(q) }?;
        // SAFETY: as above.
        let k = if k.is_null() { None } else { Some(unsafe { tensor::<T>(k) }?) };
        let streams = if op == Op::MRope { 3 } else { 2 };
        // SAFETY: the caller's contract (readable options and buffers).
        let o = unsafe { options(opts, streams, r.pairs()) }?;
        // SAFETY: `rope` passed `with_rope`'s checks.
        let handle = unsafe { storage(rope) };
        let kb = k.map_or((0, 0), |(b, _)| b.bytes());
        let [a, b, c, d, e] = o.reads;
        disjoint(&[qb.bytes(), kb], &[a, b, c, d, e, handle])?;
        // SAFETY: checked by `Buf::new`, writable and not accessed by others (the
        // contract), and disjoint from every other buffer of the call (checked).
        let qh = HeadsMut::new(unsafe { qb.slice_mut() }, qv);
        // SAFETY: as above.
        let kh = k.map(|(b, v)| HeadsMut::new(unsafe { b.slice_mut() }, v));
        match op {
            Op::MRope => rust(r.apply_mrope_qk(qh, kh, o.section, o.style, &o.apply::<3>())),
            Op::Vision => rust(r.apply_vision_qk(qh, kh, &o.apply::<2>())),
        }
    };
    // SAFETY: the caller's contract (a handle).
    guard(|| unsafe { with_rope(rope, body) })
}

/// Multimodal RoPE (MRoPE), f32, in place: rotates q and (if `k` is not NULL) k with the
/// handle's configuration and frequencies, pair `j` of every head at
/// `position_ids[stream(j)][n] * inv_freq[j]`, the stream given by `opts->mrope_section` and
/// `opts->interleaved` (sectioned: the first `t` pairs use t, the next `h` use h, the last
/// `w` use w; interleaved: `j % 3 == 1 && j < 3h` uses h, `j % 3 == 2 && j < 3w` uses w,
/// the others t). Formula: transformers `apply_multimodal_rotary_pos_emb` (Qwen2-VL),
/// `Qwen3VLTextRotaryEmbedding.apply_interleaved_mrope`. Any scaling of the handle
/// combines; dynamic NTK and LongRoPE use the frequencies of the call's length (its largest
/// position over the streams + 1; a table: those of its `rope_mrope_fill_table`).
///
/// Errors (nothing is written): `ROPE_NULL_POINTER` (`rope`, `q`, `opts`, a used buffer
/// with a non-zero count), `ROPE_MISALIGNED_POINTER`, `ROPE_INVALID_HANDLE`,
/// `ROPE_UNSUPPORTED_STRUCT_SIZE`, `ROPE_UNKNOWN_ENUM`, `ROPE_INVALID_ARGUMENT`
/// (`interleaved` not 0 or 1), `ROPE_OVERLAPPING_BUFFERS`, `ROPE_TABLE_SHAPE`,
/// `ROPE_INVALID_MROPE_SECTION`, the
/// view errors of `rope_apply_f32`, `ROPE_POSITION_COUNT_MISMATCH` (a stream whose
/// length is not the tokens), `ROPE_POSITION_OUT_OF_RANGE` (a table of fewer rows than
/// tokens).
///
/// # Safety
/// `rope` is a handle; `q`, `k`, `opts` are NULL or readable structs whose used buffers are
/// valid for their counts (tensors readable and writable, the rest readable) and not
/// accessed by anyone else during the call.
#[no_mangle]
pub unsafe extern "C" fn rope_mrope_apply_f32(
    rope: *const rope_t,
    q: *const rope_tensor,
    k: *const rope_tensor,
    opts: *const rope_mrope_opts,
) -> rope_status {
    // SAFETY: the same contract.
    unsafe { in_place::<f32>(Op::MRope, rope, q, k, opts) }
}

/// `rope_mrope_apply_f32` for IEEE binary16 (`uint16_t` storage).
///
/// # Safety
/// As for `rope_mrope_apply_f32`.
#[no_mangle]
pub unsafe extern "C" fn rope_mrope_apply_f16(
    rope: *const rope_t,
    q: *const rope_tensor,
    k: *const rope_tensor,
    opts: *const rope_mrope_opts,
) -> rope_status {
    // SAFETY: the same contract.
    unsafe { in_place::<f16>(Op::MRope, rope, q, k, opts) }
}

/// `rope_mrope_apply_f32` for bfloat16 (`uint16_t` storage).
///
/// # Safety
/// As for `rope_mrope_apply_f32`.
#[no_mangle]
pub unsafe extern "C" fn rope_mrope_apply_bf16(
    rope: *const rope_t,
    q: *const rope_tensor,
    k: *const rope_tensor,
    opts: *const rope_mrope_opts,
) -> rope_status {
    // SAFETY: the same contract.
    unsafe { in_place::<bf16>(Op::MRope, rope, q, k, opts) }
}

/// 2-D vision RoPE (Qwen2-VL ViT; transformers `apply_rotary_pos_emb_vision`, ggml
/// VISION), f32, in place, on a handle of the encoder's configuration (`head_dim`,
/// `rotary_dim` a multiple of 4, `theta`, no scaling): pair `j < rotary_dim / 4` rotates by
/// `h * inv_freq[2j]`, pair `j >= rotary_dim / 4` by `w * inv_freq[2(j - rotary_dim / 4)]`
/// (`inv_freq[2k] = theta^(-2k / (rotary_dim / 2))`, the per-axis frequency; with a caller
/// `inv_freq` table, put HF's per-axis value `k` at index `2k`). Streams `[h, w]` in
/// `opts->position_ids[0..2]`, or a table from `rope_vision_fill_table` (not
/// `rope_mrope_fill_table`: its frequency index is global, vision's restarts per axis).
///
/// Errors: those of `rope_mrope_apply_f32` but the section;
/// `ROPE_UNSUPPORTED_SCALING` for any scaling, `ROPE_INVALID_ROTARY_DIM` for a `rotary_dim`
/// that is not a multiple of 4.
///
/// # Safety
/// As for `rope_mrope_apply_f32`.
#[no_mangle]
pub unsafe extern "C" fn rope_vision_apply_f32(
    rope: *const rope_t,
    q: *const rope_tensor,
    k: *const rope_tensor,
    opts: *const rope_mrope_opts,
) -> rope_status {
    // SAFETY: the same contract.
    unsafe { in_place::<f32>(Op::Vision, rope, q, k, opts) }
}

/// `rope_vision_apply_f32` for IEEE binary16 (`uint16_t` storage).
///
/// # Safety
/// As for `rope_mrope_apply_f32`.
#[no_mangle]
pub unsafe extern "C" fn rope_vision_apply_f16(
    rope: *const rope_t,
    q: *const rope_tensor,
    k: *const rope_tensor,
    opts: *const rope_mrope_opts,
) -> rope_status {
    // SAFETY: the same contract.
    unsafe { in_place::<f16>(Op::Vision, rope, q, k, opts) }
}

/// `rope_vision_apply_f32` for bfloat16 (`uint16_t` storage).
///
/// # Safety
/// As for `rope_mrope_apply_f32`.
#[no_mangle]
pub unsafe extern "C" fn rope_vision_apply_bf16(
    rope: *const rope_t,
    q: *const rope_tensor,
    k: *const rope_tensor,
    opts: *const rope_mrope_opts,
) -> rope_status {
    // SAFETY: the same contract.
    unsafe { in_place::<bf16>(Op::Vision, rope, q, k, opts) }
}

/// Fills a per-token MRoPE cos/sin table for the streams of `opts` (on the fly mode:
/// `opts->position_ids`, `positions_len` tokens): row `n` of `cos` and `sin` (`len` floats
/// each, `len = tokens * rotary_dim / 2`) is token `n`. Pass it to `rope_mrope_apply_*`
/// with `ROPE_COS_SIN_TABLE`; one table serves every layer of a step. For
/// `rope_vision_apply_*` use `rope_vision_fill_table` instead.
///
/// Errors (nothing written): `ROPE_NULL_POINTER`, `ROPE_MISALIGNED_POINTER`,
/// `ROPE_INVALID_HANDLE`, `ROPE_UNSUPPORTED_STRUCT_SIZE`, `ROPE_UNKNOWN_ENUM`,
/// `ROPE_INVALID_ARGUMENT`, `ROPE_OVERLAPPING_BUFFERS`, `ROPE_INVALID_MROPE_SECTION`,
/// `ROPE_POSITION_COUNT_MISMATCH` (streams of different lengths), `ROPE_TABLE_SHAPE` (`len`
/// not `tokens * rotary_dim / 2`, or `opts->cos_sin` not on the fly).
///
/// # Safety
/// `rope` is a handle; `opts` readable with readable streams; `cos`, `sin` writable for
/// `len` floats and not accessed by anyone else during the call.
#[no_mangle]
pub unsafe extern "C" fn rope_mrope_fill_table(
    rope: *const rope_t,
    opts: *const rope_mrope_opts,
    cos: *mut f32,
    sin: *mut f32,
    len: usize,
) -> rope_status {
    // SAFETY: the same contract.
    unsafe { fill_table(Op::MRope, rope, opts, cos, sin, len) }
}

/// Fills a per-token 2-D vision cos/sin table (as Rust `VisionRope::fill_table`) for the
/// streams `[h, w]` of `opts` (on the fly mode: `opts->position_ids[0..2]`, `positions_len`
/// patches; the third stream, `interleaved` and `mrope_section` are ignored): row `n` of
/// `cos` and `sin` (`len` floats each, `len = tokens * rotary_dim / 2`) is patch `n`, pair
/// `j < rotary_dim / 4` at `h * inv_freq[2j]`, pair `j >= rotary_dim / 4` at
/// `w * inv_freq[2(j - rotary_dim / 4)]`. Pass it to `rope_vision_apply_*` with
/// `ROPE_COS_SIN_TABLE` (bit for bit the on-the-fly result); one table serves every layer
/// of the encoder.
///
/// Errors (nothing written): `ROPE_NULL_POINTER`, `ROPE_MISALIGNED_POINTER`,
/// `ROPE_INVALID_HANDLE`, `ROPE_UNSUPPORTED_STRUCT_SIZE`, `ROPE_UNKNOWN_ENUM`,
/// `ROPE_INVALID_ARGUMENT`, `ROPE_OVERLAPPING_BUFFERS`, `ROPE_UNSUPPORTED_SCALING` (any
/// scaling), `ROPE_INVALID_ROTARY_DIM` (not a multiple of 4), `ROPE_POSITION_COUNT_MISMATCH`
/// (the two streams differ in length), `ROPE_TABLE_SHAPE` (`len` not
/// `tokens * rotary_dim / 2`, or `opts->cos_sin` not on the fly).
///
/// # Safety
/// As for `rope_mrope_fill_table`.
#[no_mangle]
pub unsafe extern "C" fn rope_vision_fill_table(
    rope: *const rope_t,
    opts: *const rope_mrope_opts,
    cos: *mut f32,
    sin: *mut f32,
    len: usize,
) -> rope_status {
    // SAFETY: the same contract.
    unsafe { fill_table(Op::Vision, rope, opts, cos, sin, len) }
}

/// A per-token table of `op`: checks at the boundary, then the Rust call validates the rest
/// before writing.
///
/// # Safety
/// The contract of `rope_mrope_fill_table`.
unsafe fn fill_table(
    op: Op,
    rope: *const rope_t,
    opts: *const rope_mrope_opts,
    cos: *mut f32,
    sin: *mut f32,
    len: usize,
) -> rope_status {
    let body = |r: &Rope<'_>| {
        // SAFETY: the caller's contract (readable options and buffers).
        let o = unsafe { options(opts, if op == Op::MRope { 3 } else { 2 }, r.pairs()) }?;
        if o.table.is_some() {
            return Err(ROPE_TABLE_SHAPE);
        }
        let (cb, sb) = (Buf::new(cos.cast_const(), len)?, Buf::new(sin.cast_const(), len)?);
        // SAFETY: `rope` passed `with_rope`'s checks.
        let handle = unsafe { storage(rope) };
        let [a, b, c, _, _] = o.reads;
        disjoint(&[cb.bytes(), sb.bytes()], &[a, b, c, handle])?;
        // SAFETY: checked by `Buf::new`, writable, not accessed by others (the contract),
        // disjoint from the call's other buffers (checked).
        let (cs, ss) = unsafe { (cb.slice_mut(), sb.slice_mut()) };
        match op {
            Op::MRope => rust(r.fill_mrope_table(o.ids, o.section, o.style, cs, ss)),
            Op::Vision => rust(r.fill_vision_table([o.ids[0], o.ids[1]], cs, ss)),
        }
    };
    // SAFETY: the caller's contract (a handle).
    guard(|| unsafe { with_rope(rope, body) })
}
