//! One attention layer's RoPE from C (issue 17): q, k and v as head sets of one fused QKV
//! buffer, each rotated in place, into a tensor, or into KV-cache rows (`slot_mapping` or a
//! paged `block_table`), in its own element type (f32, f16, bf16, ggml `q8_0`), for one
//! sequence or a ragged batch, in one call: `rope_apply_layer`.

use core::ffi::c_void;
use core::mem::{align_of, size_of};

use rope_kernels::{
    bf16, f16, Batch, BlockQ8_0, CacheLayout, CosSin, CosSinTable, Dest, Direction, Element, ErasedDest,
    HeadSet, LayerOptions, Positions, Qkv, Rope, Slots, View,
};

use crate::apply::{
    rope_cos_sin_source, rope_direction, rope_position_mode, rope_view, ROPE_COS_SIN_ON_THE_FLY,
    ROPE_COS_SIN_TABLE, ROPE_FORWARD, ROPE_INVERSE, ROPE_POSITIONS_IDS, ROPE_POSITIONS_START,
};
use crate::boundary::{disjoint, guard, read_versioned, rust, Buf, R};
use crate::handle::{rope_t, storage, with_rope};
use crate::status::*;

/// The element type of a buffer of `rope_apply_layer` (`rope_layer_args.qkv_dtype`,
/// `rope_dest.dtype`).
pub type rope_dtype = u32;
/// `float`.
pub const ROPE_DTYPE_F32: rope_dtype = 0;
/// IEEE binary16 as its `uint16_t` bit pattern; stores round to nearest-even.
pub const ROPE_DTYPE_F16: rope_dtype = 1;
/// bfloat16 as its `uint16_t` bit pattern; stores round to nearest-even.
pub const ROPE_DTYPE_BF16: rope_dtype = 2;
/// ggml `q8_0` blocks (`rope_block_q8_0`, 32 values each); an output type only. A head of
/// `head_dim` values is `head_dim / 32` consecutive blocks (`head_dim % 32 == 0`), and
/// every length, offset and stride of a `q8_0` buffer counts blocks.
pub const ROPE_DTYPE_Q8_0: rope_dtype = 3;

/// ggml's `block_q8_0` (ggml-common.h): 32 values `qs[j] * d`, `d` an IEEE binary16 scale
/// (`uint16_t` bit pattern). 34 bytes, 2-byte aligned. Written as ggml's
/// `quantize_row_q8_0_ref` (ggml-quants.c) writes it, in `float`: `d = max|x| / 127`,
/// `id = d != 0 ? 1 / d : 0`, `qs[j] = roundf(x[j] * id)` (half away from zero; a product
/// with the reciprocal, which rounds some values differently from `x[j] / d`), then `d`
/// stored rounded to nearest-even.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct rope_block_q8_0 {
    /// The scale, IEEE binary16 bits.
    pub d: u16,
    /// The quantized values.
    pub qs: [i8; 32],
}

// The C struct is ggml's block and the Rust crate's `BlockQ8_0`, byte for byte.
const _: () = assert!(size_of::<rope_block_q8_0>() == 34 && align_of::<rope_block_q8_0>() == 2);
const _: () = assert!(size_of::<BlockQ8_0>() == 34 && align_of::<BlockQ8_0>() == 2);
const _: () = assert!(core::mem::offset_of!(BlockQ8_0, qs) == core::mem::offset_of!(rope_block_q8_0, qs));

/// A set of heads inside the `qkv` buffer, in elements of `qkv_dtype`: head `h` of token
/// `t` is the `head_dim` elements at `offset + t * token_stride + h * head_stride`.
/// Llama `qkv_proj` rows `[tokens][q_heads + 2 * kv_heads][head_dim]`: q
/// `{0, q_heads, (q_heads + 2 * kv_heads) * head_dim, head_dim}`, k at
/// `offset = q_heads * head_dim`, v at `(q_heads + kv_heads) * head_dim`
/// (`rope_head_sets_qkv_rows`). GPT-NeoX `query_key_value` `[tokens][heads][3][head_dim]`:
/// `head_stride = 3 * head_dim`, offsets 0, `head_dim`, `2 * head_dim`
/// (`rope_head_sets_neox`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct rope_head_set {
    /// Elements before head 0 of token 0.
    pub offset: usize,
    /// Heads per token.
    pub heads: usize,
    /// Elements between token `t` and `t + 1` of a head.
    pub token_stride: usize,
    /// Elements between head `h` and `h + 1` of a token.
    pub head_stride: usize,
}

/// KV-cache addressing, in elements of the cache's dtype (blocks for `q8_0`): head `h` of
/// slot `s` starts at `(s / block_size) * block_stride + (s % block_size) * slot_stride +
/// h * head_stride`; the cache has `num_blocks * block_size` slots. vLLM's NHD
/// `[num_blocks][block_size][kv_heads][head_dim]` and HND `[num_blocks][kv_heads][block_size]
/// [head_dim]` (`rope_cache_layout_nhd`, `rope_cache_layout_hnd`); a contiguous
/// `[slots][kv_heads][head_dim]` cache is one block of all slots.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct rope_cache_layout {
    /// Blocks (pages) of the cache.
    pub num_blocks: usize,
    /// Slots (tokens) per block.
    pub block_size: usize,
    /// Elements between block `b` and `b + 1`.
    pub block_stride: usize,
    /// Elements between slot `i` and `i + 1` of a block.
    pub slot_stride: usize,
    /// Elements between head `h` and `h + 1` of a slot.
    pub head_stride: usize,
}

/// Where q, k or v goes (`rope_dest.kind`).
pub type rope_dest_kind = u32;
/// Not written (v: not copied). A zeroed `rope_dest` is this.
pub const ROPE_DEST_SKIP: rope_dest_kind = 0;
/// Rotated where it lies in `qkv` (q and k). v is never rotated: for v it is left where it
/// lies, as `ROPE_DEST_SKIP`. For q, k and v, `dtype` must be `qkv_dtype`
/// (`ROPE_UNSUPPORTED_TYPE_PAIR` otherwise), as Rust's `Dest::InPlace`.
pub const ROPE_DEST_IN_PLACE: rope_dest_kind = 1;
/// Into a `[tokens][heads][head_dim]` tensor `data` with `view` (its tokens and heads
/// those of the set).
pub const ROPE_DEST_TENSOR: rope_dest_kind = 2;
/// Into KV-cache rows of `data` (layout `cache`), a slot per token as `slots` says.
pub const ROPE_DEST_CACHE: rope_dest_kind = 3;

/// Which cache slot each token goes to (`rope_dest.slots`).
pub type rope_slots_kind = u32;
/// vLLM `slot_mapping` (`reshape_and_cache_flash`; ggml `set_rows` row ids): token `t` to
/// slot `slot_mapping[t]` (`slot_mapping_len == tokens`), `-1` skips the token.
pub const ROPE_SLOTS_MAPPING: rope_slots_kind = 0;
/// A paged cache: token `j` of sequence `i` (a ragged batch: `ROPE_BATCH_RAGGED`) at
/// position `p` goes to block `block_table[i * blocks_per_seq + p / block_size]`, slot
/// `block * block_size + p % block_size`.
pub const ROPE_SLOTS_BLOCK_TABLE: rope_slots_kind = 1;
/// Slot = the token's position (one sequence into its own contiguous cache, llama.cpp's
/// per-sequence KV cache).
pub const ROPE_SLOTS_POSITIONS: rope_slots_kind = 2;

/// One destination of `rope_apply_layer`. Fields its `kind` (and `slots`) does not use are
/// ignored, pointers included. `data` must not overlap `qkv`, the other destinations, nor
/// any buffer the call reads (`ROPE_OVERLAPPING_BUFFERS`, by address range): k and v
/// caches are two buffers.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct rope_dest {
    /// A `ROPE_DEST_*` value.
    pub kind: rope_dest_kind,
    /// A `ROPE_DTYPE_*` value: the element type of `data` (`ROPE_DEST_IN_PLACE`: must be
    /// `qkv_dtype`, else `ROPE_UNSUPPORTED_TYPE_PAIR`). Ignored by `ROPE_DEST_SKIP`.
    pub dtype: rope_dtype,
    /// `ROPE_DEST_TENSOR`, `ROPE_DEST_CACHE`: the first element (block for `q8_0`),
    /// aligned for `dtype` (`float` 4, `uint16_t` 2, `rope_block_q8_0` 2).
    pub data: *mut c_void,
    /// Elements (blocks for `q8_0`) at `data`; the view or every slot of the cache must
    /// fit (`ROPE_BUFFER_TOO_SMALL`).
    pub len: usize,
    /// `ROPE_DEST_TENSOR`: shape and strides in elements of `dtype` (in blocks for
    /// `q8_0`: a head is `head_dim / 32` blocks).
    pub view: rope_view,
    /// `ROPE_DEST_CACHE`: the cache's addressing.
    pub cache: rope_cache_layout,
    /// `ROPE_DEST_CACHE`: a `ROPE_SLOTS_*` value.
    pub slots: rope_slots_kind,
    /// `ROPE_SLOTS_MAPPING`: one slot per token, `-1` = skip.
    pub slot_mapping: *const i64,
    /// `ROPE_SLOTS_MAPPING`: values at `slot_mapping` (must equal `tokens`).
    pub slot_mapping_len: usize,
    /// `ROPE_SLOTS_BLOCK_TABLE`: `blocks_per_seq` block numbers per sequence, row-major
    /// `[sequences][blocks_per_seq]`.
    pub block_table: *const u32,
    /// `ROPE_SLOTS_BLOCK_TABLE`: values at `block_table` (at least `sequences *
    /// blocks_per_seq`).
    pub block_table_len: usize,
    /// `ROPE_SLOTS_BLOCK_TABLE`: the row length of `block_table`.
    pub blocks_per_seq: usize,
}

/// The tokens of a `rope_apply_layer` call (`rope_layer_args.batch`).
pub type rope_batch_kind = u32;
/// One sequence: positions as `position_mode` says (`start + t` or `position_ids[t]`).
pub const ROPE_BATCH_SINGLE: rope_batch_kind = 0;
/// Several sequences (FlashInfer `append_indptr`): sequence `i` owns tokens
/// `indptr[i] .. indptr[i + 1]` (non-decreasing from 0 to `tokens`), at positions
/// `seq_start[i] + j` (`ROPE_POSITIONS_START`) or `position_ids[t]` (`ROPE_POSITIONS_IDS`).
pub const ROPE_BATCH_RAGGED: rope_batch_kind = 1;

/// The arguments of `rope_apply_layer`. Fields that the selected modes do not use are
/// ignored (pointers included). Every buffer is a pointer and an element count.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct rope_layer_args {
    /// `sizeof(rope_layer_args)`.
    pub struct_size: usize,
    /// A `ROPE_DTYPE_*` value other than `ROPE_DTYPE_Q8_0`: the element type of `qkv`.
    pub qkv_dtype: rope_dtype,
    /// The fused QKV projection output: `qkv_len` elements of `qkv_dtype`; read, and
    /// written where a destination is `ROPE_DEST_IN_PLACE`.
    pub qkv: *mut c_void,
    /// Elements at `qkv`; every set must fit (`ROPE_BUFFER_TOO_SMALL`).
    pub qkv_len: usize,
    /// Tokens of the call (rows of `qkv`).
    pub tokens: usize,
    /// The q heads in `qkv`. q and k sets must not share an element with each other nor
    /// with the v set (`ROPE_OVERLAPPING_HEAD_SETS`, decided on the elements touched).
    pub q_set: rope_head_set,
    /// The k heads in `qkv`.
    pub k_set: rope_head_set,
    /// The v heads in `qkv` (copied or converted, never rotated).
    pub v_set: rope_head_set,
    /// Where the rotated q heads go.
    pub q: rope_dest,
    /// Where the rotated k heads go.
    pub k: rope_dest,
    /// Where the v heads go.
    pub v: rope_dest,
    /// A `ROPE_BATCH_*` value.
    pub batch: rope_batch_kind,
    /// A `ROPE_POSITIONS_*` value.
    pub position_mode: rope_position_mode,
    /// `ROPE_BATCH_SINGLE` + `ROPE_POSITIONS_START`: the position of token 0.
    pub start: u32,
    /// `ROPE_POSITIONS_IDS`: one position per token.
    pub position_ids: *const u32,
    /// `ROPE_POSITIONS_IDS`: values at `position_ids` (must equal `tokens`).
    pub position_ids_len: usize,
    /// `ROPE_BATCH_RAGGED`: `sequences + 1` token offsets.
    pub indptr: *const u32,
    /// `ROPE_BATCH_RAGGED`: values at `indptr` (`sequences + 1`, at least 1).
    pub indptr_len: usize,
    /// `ROPE_BATCH_RAGGED` + `ROPE_POSITIONS_START`: the position of each sequence's first
    /// token of the call (its cached length).
    pub seq_start: *const u32,
    /// `ROPE_BATCH_RAGGED` + `ROPE_POSITIONS_START`: values at `seq_start` (must equal
    /// `indptr_len - 1`).
    pub seq_start_len: usize,
    /// A `ROPE_COS_SIN_*` value.
    pub cos_sin: rope_cos_sin_source,
    /// `ROPE_COS_SIN_TABLE`: `table_len` cos values, rows of `rotary_dim / 2` by position.
    pub cos: *const f32,
    /// `ROPE_COS_SIN_TABLE`: `table_len` sin values, same layout.
    pub sin: *const f32,
    /// `ROPE_COS_SIN_TABLE`: floats in each of `cos` and `sin`.
    pub table_len: usize,
    /// A `ROPE_FORWARD`/`ROPE_INVERSE` value.
    pub direction: rope_direction,
}

/// A destination buffer that passed the boundary checks for its dtype, untyped (the typed
/// slice is made in [`typed`], after the overlap check).
#[derive(Clone, Copy)]
struct RawBuf {
    data: *mut c_void,
    len: usize,
    bytes: (usize, usize),
}

/// Checks `(data, len)` as a buffer of `dtype` (NULL, alignment, size); the dtype is a
/// known value (checked by [`out_dtype`]).
fn raw_buf(dtype: rope_dtype, data: *mut c_void, len: usize) -> R<RawBuf> {
    let bytes = match dtype {
        ROPE_DTYPE_F32 => Buf::<f32>::new(data.cast_const().cast(), len)?.bytes(),
        ROPE_DTYPE_F16 | ROPE_DTYPE_BF16 => Buf::<u16>::new(data.cast_const().cast(), len)?.bytes(),
        _ => Buf::<rope_block_q8_0>::new(data.cast_const().cast(), len)?.bytes(),
    };
    Ok(RawBuf { data, len, bytes })
}

/// A destination, checked, before its element type is known.
enum RawDest<'a> {
    Skip,
    InPlace,
    Tensor { buf: RawBuf, view: View },
    Cache { buf: RawBuf, layout: CacheLayout, slots: Slots<'a> },
}

impl RawDest<'_> {
    /// The bytes it writes, for [`disjoint`] (empty unless it is a tensor or a cache).
    fn bytes(&self) -> (usize, usize) {
        match self {
            RawDest::Tensor { buf, .. } | RawDest::Cache { buf, .. } => buf.bytes,
            _ => (0, 0),
        }
    }
}

/// The dtype a destination is instantiated with: its own for a tensor or a cache, the
/// input's for `ROPE_DEST_SKIP` (no type) and `ROPE_DEST_IN_PLACE` (the input's elements).
fn out_dtype(d: &rope_dest, qkv_dtype: rope_dtype) -> R<rope_dtype> {
    match d.kind {
        ROPE_DEST_SKIP => Ok(qkv_dtype),
        ROPE_DEST_IN_PLACE | ROPE_DEST_TENSOR | ROPE_DEST_CACHE => match d.dtype {
            ROPE_DTYPE_F32 | ROPE_DTYPE_F16 | ROPE_DTYPE_BF16 | ROPE_DTYPE_Q8_0 => {
                if d.kind == ROPE_DEST_IN_PLACE && d.dtype != qkv_dtype {
                    return Err(ROPE_UNSUPPORTED_TYPE_PAIR);
                }
                Ok(d.dtype)
            }
            _ => Err(ROPE_UNKNOWN_ENUM),
        },
        _ => Err(ROPE_UNKNOWN_ENUM),
    }
}

/// Checks one destination at the boundary; `reads` receives the byte ranges of its slot
/// arrays.
///
/// # Safety
/// The used arrays of `d` are readable for their counts and not written during `'a`.
unsafe fn raw_dest<'a>(d: &rope_dest, dtype: rope_dtype, reads: &mut [(usize, usize); 2]) -> R<RawDest<'a>> {
    Ok(match d.kind {
        ROPE_DEST_SKIP => RawDest::Skip,
        ROPE_DEST_IN_PLACE => RawDest::InPlace,
        ROPE_DEST_TENSOR => {
            let v = d.view;
            let view = View {
                tokens: v.tokens,
                heads: v.heads,
                token_stride: v.token_stride,
                head_stride: v.head_stride,
            };
            RawDest::Tensor { buf: raw_buf(dtype, d.data, d.len)?, view }
        }
        _ => {
            let slots = match d.slots {
                ROPE_SLOTS_MAPPING => {
                    let m = Buf::new(d.slot_mapping, d.slot_mapping_len)?;
                    reads[0] = m.bytes();
                    // SAFETY: checked by `Buf::new`; readable, unchanged (the contract).
                    Slots::Mapping(unsafe { m.slice() })
                }
                ROPE_SLOTS_BLOCK_TABLE => {
                    let t = Buf::new(d.block_table, d.block_table_len)?;
                    reads[1] = t.bytes();
                    // SAFETY: as above.
                    Slots::BlockTable { block_table: unsafe { t.slice() }, blocks_per_seq: d.blocks_per_seq }
                }
                ROPE_SLOTS_POSITIONS => Slots::Positions,
                _ => return Err(ROPE_UNKNOWN_ENUM),
            };
            let c = d.cache;
            let layout = CacheLayout {
                num_blocks: c.num_blocks,
                block_size: c.block_size,
                block_stride: c.block_stride,
                slot_stride: c.slot_stride,
                head_stride: c.head_stride,
            };
            RawDest::Cache { buf: raw_buf(dtype, d.data, d.len)?, layout, slots }
        }
    })
}

/// The batch, direction and cos/sin source of the call (a table's rows, checked later:
/// its shape is the Rust crate's error, which comes after every boundary check), and the
/// byte ranges they read (`position_ids`, `indptr`, `seq_start`, `cos`, `sin`).
///
/// # Safety
/// The used arrays of `a` are readable for their counts and not written during `'a`.
#[allow(clippy::type_complexity)]
unsafe fn options<'a>(
    a: &rope_layer_args,
) -> R<(LayerOptions<'a>, Option<[&'a [f32]; 2]>, [(usize, usize); 5])> {
    let mut reads = [(0, 0); 5];
    let direction = match a.direction {
        ROPE_FORWARD => Direction::Forward,
        ROPE_INVERSE => Direction::Inverse,
        _ => return Err(ROPE_UNKNOWN_ENUM),
    };
    if a.position_mode != ROPE_POSITIONS_START && a.position_mode != ROPE_POSITIONS_IDS {
        return Err(ROPE_UNKNOWN_ENUM);
    }
    let ids = || -> R<&'a [u32]> {
        let b = Buf::new(a.position_ids, a.position_ids_len)?;
        // SAFETY: checked by `Buf::new`; readable, unchanged (the contract).
        Ok(unsafe { b.slice() })
    };
    let batch = match (a.batch, a.position_mode) {
        (ROPE_BATCH_SINGLE, ROPE_POSITIONS_START) => Batch::Single(Positions::Start(a.start)),
        (ROPE_BATCH_SINGLE, _) => {
            let ids = ids()?;
            reads[0] = range(ids);
            Batch::Single(Positions::Ids(ids))
        }
        (ROPE_BATCH_RAGGED, mode) => {
            let b = Buf::new(a.indptr, a.indptr_len)?;
            // SAFETY: checked by `Buf::new`; readable, unchanged (the contract).
            let indptr = unsafe { b.slice() };
            reads[1] = range(indptr);
            if mode == ROPE_POSITIONS_START {
                let s = Buf::new(a.seq_start, a.seq_start_len)?;
                // SAFETY: as above.
                let start = unsafe { s.slice() };
                reads[2] = range(start);
                Batch::Ragged { indptr, start }
            } else {
                let ids = ids()?;
                reads[0] = range(ids);
                Batch::RaggedIds { indptr, position_ids: ids }
            }
        }
        _ => return Err(ROPE_UNKNOWN_ENUM),
    };
    let table = match a.cos_sin {
        ROPE_COS_SIN_ON_THE_FLY => None,
        ROPE_COS_SIN_TABLE => {
            let (cos, sin) = (Buf::new(a.cos, a.table_len)?, Buf::new(a.sin, a.table_len)?);
            (reads[3], reads[4]) = (cos.bytes(), sin.bytes());
            // SAFETY: checked by `Buf::new`; readable, unchanged (the contract).
            Some(unsafe { [cos.slice(), sin.slice()] })
        }
        _ => return Err(ROPE_UNKNOWN_ENUM),
    };
    Ok((LayerOptions { batch, cos_sin: CosSin::OnTheFly, direction }, table, reads))
}

/// The byte range of a slice, for [`disjoint`].
fn range<T>(s: &[T]) -> (usize, usize) {
    let start = s.as_ptr() as usize;
    (start, start + core::mem::size_of_val(s))
}

/// Everything of a call, checked at the boundary: the input (untyped), the three
/// destinations, the options.
struct Call<'a> {
    qkv: RawBuf,
    tokens: usize,
    sets: [HeadSet; 3],
    dests: [RawDest<'a>; 3],
    opts: LayerOptions<'a>,
}

fn head_set(s: &rope_head_set) -> HeadSet {
    HeadSet { offset: s.offset, heads: s.heads, token_stride: s.token_stride, head_stride: s.head_stride }
}

/// Checks the arguments at the boundary (enums, pointers, counts, overlap of buffers by
/// address range); returns the call and the dtypes `[qkv, q, k, v]` to instantiate.
/// Out of line and not generic: the 192 typed instances share it.
///
/// # Safety
/// The contract of `rope_apply_layer`; the buffers stay valid and untouched by others for
/// `'a`.
#[inline(never)]
unsafe fn check<'a>(
    a: &rope_layer_args,
    pairs: usize,
    handle: (usize, usize),
) -> R<(Call<'a>, [rope_dtype; 4])> {
    let input = match a.qkv_dtype {
        ROPE_DTYPE_F32 | ROPE_DTYPE_F16 | ROPE_DTYPE_BF16 => a.qkv_dtype,
        ROPE_DTYPE_Q8_0 => return Err(ROPE_UNSUPPORTED_TYPE_PAIR),
        _ => return Err(ROPE_UNKNOWN_ENUM),
    };
    let dtypes = [input, out_dtype(&a.q, input)?, out_dtype(&a.k, input)?, out_dtype(&a.v, input)?];
    // SAFETY: the caller's contract (used arrays readable, unchanged).
    let (mut opts, table, [ids, indptr, start, cos, sin]) = unsafe { options(a) }?;
    let qkv = raw_buf(input, a.qkv, a.qkv_len)?;
    let mut slot_reads = [[(0, 0); 2]; 3];
    let [sq, sk, sv] = &mut slot_reads;
    // SAFETY: the caller's contract (used arrays readable, unchanged).
    let dests = unsafe {
        [raw_dest(&a.q, dtypes[1], sq)?, raw_dest(&a.k, dtypes[2], sk)?, raw_dest(&a.v, dtypes[3], sv)?]
    };
    let [[m0, t0], [m1, t1], [m2, t2]] = slot_reads;
    // `qkv` is borrowed mutably (rotated in place where asked): it is written for this check.
    let written = [qkv.bytes, dests[0].bytes(), dests[1].bytes(), dests[2].bytes()];
    disjoint(&written, &[ids, indptr, start, cos, sin, m0, t0, m1, t1, m2, t2, handle])?;
    // The first of the Rust crate's checks: every boundary check comes before.
    if let Some([cos, sin]) = table {
        opts.cos_sin = CosSin::Table(rust(CosSinTable::new(cos, sin, pairs))?);
    }
    let sets = [head_set(&a.q_set), head_set(&a.k_set), head_set(&a.v_set)];
    Ok((Call { qkv, tokens: a.tokens, sets, dests, opts }, dtypes))
}

/// The typed slice of a buffer that [`raw_buf`] checked for `T`'s dtype.
///
/// Out of line, as [`dest`]: one instance per element type, not per combination.
///
/// # Safety
/// `b` came from [`raw_buf`] with the dtype of `T` (same size and alignment: `f16`/`bf16`
/// as `uint16_t`, `BlockQ8_0` as `rope_block_q8_0`); writable, initialized, accessed by
/// nothing else during `'a` (the contract), disjoint from every other buffer (checked).
#[inline(never)]
unsafe fn typed<'a, T>(b: RawBuf) -> R<&'a mut [T]> {
    let buf = Buf::<T>::new(b.data.cast_const().cast(), b.len)?;
    // SAFETY: the function's contract; any bits are a valid `T` (plain numbers, and
    // `BlockQ8_0` is a `u16`-sized f16 and `i8`s).
    Ok(unsafe { buf.slice_mut() })
}

/// The destination of a checked [`RawDest`], typed. Out of line: 4 instances (one per
/// output type) instead of one in each of the 192 typed calls.
///
/// # Safety
/// As [`typed`], for its buffer.
#[inline(never)]
unsafe fn dest<'a, O>(d: RawDest<'a>) -> R<Dest<'a, O>> {
    Ok(match d {
        RawDest::Skip => Dest::Skip,
        RawDest::InPlace => Dest::InPlace,
        // SAFETY: the function's contract.
        RawDest::Tensor { buf, view } => Dest::Tensor { data: unsafe { typed(buf) }?, view },
        // SAFETY: the function's contract.
        RawDest::Cache { buf, layout, slots } => Dest::Cache { data: unsafe { typed(buf) }?, layout, slots },
    })
}

/// Runs a dtype-dispatched expression: `$T` is the element type of the output tag `$tag`
/// (a value [`out_dtype`] returned).
macro_rules! by_dtype {
    ($tag:expr, $T:ident => $body:expr) => {
        match $tag {
            ROPE_DTYPE_F32 => {
                type $T = f32;
                $body
            }
            ROPE_DTYPE_F16 => {
                type $T = f16;
                $body
            }
            ROPE_DTYPE_BF16 => {
                type $T = bf16;
                $body
            }
            _ => {
                type $T = BlockQ8_0;
                $body
            }
        }
    };
}

/// # Safety
/// `call` came from [`check`] with `dtypes`, under the contract of `rope_apply_layer`.
unsafe fn run_input(r: &Rope<'_>, call: Call<'_>, dtypes: [rope_dtype; 4]) -> R<()> {
    // SAFETY: the same contract, each with the type of its tag.
    unsafe {
        match dtypes[0] {
            ROPE_DTYPE_F32 => run_q::<f32>(r, call, dtypes),
            ROPE_DTYPE_F16 => run_q::<f16>(r, call, dtypes),
            _ => run_q::<bf16>(r, call, dtypes),
        }
    }
}

/// The call of input type `I`: slices of the checked buffers, each destination erased
/// ([`erased`]: one instance per output type), then `Rope::apply_layer_erased` (one
/// instance per input type), which validates the rest (sets, overlap, shapes, batch,
/// slots) before writing.
///
/// # Safety
/// As [`run_input`], `I` the type of `dtypes[0]`.
unsafe fn run_q<I: Element>(r: &Rope<'_>, call: Call<'_>, dtypes: [rope_dtype; 4]) -> R<()> {
    let [q, k, v] = call.dests;
    // SAFETY: each buffer was checked for its tag's type, which is the type it is made
    // with here (the caller's contract); all are disjoint (checked).
    let (qkv, q, k, v) = unsafe {
        (typed::<I>(call.qkv)?, erased(q, dtypes[1])?, erased(k, dtypes[2])?, erased(v, dtypes[3])?)
    };
    rust(r.apply_layer_erased(Qkv::new(qkv, call.tokens, call.sets), q, k, v, &call.opts))
}

/// A destination of the type its tag `dtype` names (a value [`out_dtype`] returned), erased.
///
/// # Safety
/// As [`dest`], for the type of `dtype`.
#[inline(never)]
unsafe fn erased<'a>(d: RawDest<'a>, dtype: rope_dtype) -> R<ErasedDest<'a>> {
    // SAFETY: the function's contract.
    by_dtype!(dtype, O => Ok(ErasedDest::new(unsafe { dest::<O>(d) }?)))
}

/// Rotates one attention layer's q and k and appends k and v to their destinations, in one
/// call (see `rope_layer_args`): q, k and v are head sets of the fused `qkv` buffer; q and k
/// are rotated (dimensions `0..rotary_dim`; the rest converted) in place or into a tensor or
/// KV-cache rows, v converted into its own; each destination in its own dtype (math in f32,
/// one rounding per stored element; `q8_0` rows as ggml's `quantize_row_q8_0_ref`). The
/// result is bit-identical to the Rust crate's `Rope::apply_layer` on every tier.
///
/// Buffers: `qkv` is borrowed for writing (it must be writable memory even when nothing is
/// in place) and must not overlap any other buffer of the call; the destinations' `data`
/// must not overlap each other, `qkv`, the arrays the call reads (`position_ids`, `indptr`,
/// `seq_start`, `cos`, `sin`, `slot_mapping`, `block_table`) nor the handle's storage
/// (`ROPE_OVERLAPPING_BUFFERS`, decided by address range). Within `qkv` the q, k and v sets
/// are checked exactly, on the elements they touch (`ROPE_OVERLAPPING_HEAD_SETS`).
///
/// k and v in one cache allocation (FlashInfer `[num_blocks][2][block_size][kv_heads]
/// [head_dim]`) overlap by address range: make two calls, q and k (k to the cache, `block`
/// stride spanning both halves) with v `ROPE_DEST_SKIP`, then q and k `ROPE_DEST_SKIP` and v
/// to the cache at the v half (`data` `block_size * kv_heads * head_dim` elements in). v is
/// never rotated, so the result is that of one call.
///
/// Duplicate rows (`ROPE_DUPLICATE_SLOT`) cost one pass when the written slots increase,
/// `O(b log b)` for a block table with positions increasing per sequence (`b` the entries
/// used); otherwise the written slots are sorted, `O(n log n)`, in an allocation with the
/// default `std` feature; a `no_std` build (no allocator) sorts up to 64 written tokens on
/// the stack and beyond that compares each token with the earlier ones (`O(n^2)`: pass
/// increasing `slot_mapping`s or a block table for long calls there).
///
/// Errors (nothing is written): `ROPE_NULL_POINTER` (`rope`, `args`, a used buffer with a
/// non-zero count), `ROPE_MISALIGNED_POINTER`, `ROPE_INVALID_HANDLE`,
/// `ROPE_UNSUPPORTED_STRUCT_SIZE`, `ROPE_UNKNOWN_ENUM` (a dtype, kind, slots, batch,
/// position mode, cos/sin source or direction that is no value), `ROPE_INVALID_ARGUMENT`
/// (a buffer whose byte size exceeds `PTRDIFF_MAX`), `ROPE_OVERLAPPING_BUFFERS`,
/// `ROPE_OVERLAPPING_HEAD_SETS`, `ROPE_UNSUPPORTED_TYPE_PAIR` (`ROPE_DTYPE_Q8_0` input, or
/// in place in another dtype), `ROPE_OVERLAPPING_STRIDES`, `ROPE_STRIDE_OVERFLOW`,
/// `ROPE_BUFFER_TOO_SMALL`, `ROPE_SHAPE_MISMATCH` (a tensor destination of other tokens
/// or heads than its set), `ROPE_PARTIAL_QUANT_BLOCK`, `ROPE_INVALID_INDPTR`,
/// `ROPE_POSITION_COUNT_MISMATCH`, `ROPE_POSITION_OVERFLOW`, `ROPE_SLOT_MAPPING_LENGTH`,
/// `ROPE_BLOCK_TABLE_TOO_SHORT`, `ROPE_BLOCK_OUT_OF_RANGE`, `ROPE_SLOT_OUT_OF_RANGE`,
/// `ROPE_DUPLICATE_SLOT`, `ROPE_INVALID_BLOCK_SIZE` (a block table with `block_size` 0),
/// `ROPE_TABLE_SHAPE`, `ROPE_POSITION_OUT_OF_RANGE`,
/// `ROPE_INVALID_SCALING_PARAMETER` (dynamic NTK at this length), `ROPE_PANIC`. When several
/// apply: first the boundary's (handle, struct, dtypes and kinds, options, buffers, overlap
/// of buffers), then `ROPE_TABLE_SHAPE`, then those of the Rust crate in the order
/// `Rope::apply_layer` documents (sets, head-set overlap, destinations, batch, slots,
/// positions against the table).
///
/// # Safety
/// `rope` is a handle; `args` is NULL or a readable `rope_layer_args` whose used buffers
/// are valid for their counts (`qkv` and the destinations readable and writable, the rest
/// readable) and not accessed by anyone else during the call.
#[no_mangle]
pub unsafe extern "C" fn rope_apply_layer(rope: *const rope_t, args: *const rope_layer_args) -> rope_status {
    let body = |r: &Rope<'_>| {
        // SAFETY: the caller's contract (NULL or a readable struct); any bits are valid.
        let a = unsafe { read_versioned(args) }?;
        // SAFETY: `rope` passed `rope_ref`'s checks (`with_rope`).
        let handle = unsafe { storage(rope) };
        // SAFETY: the caller's contract, passed on.
        let (call, dtypes) = unsafe { check(&a, r.pairs(), handle) }?;
        // SAFETY: `call` and `dtypes` came from `check` under the same contract.
        unsafe { run_input(r, call, dtypes) }
    };
    // SAFETY: the caller's contract (a handle).
    guard(|| unsafe { with_rope(rope, body) })
}

/// Fills `sets[0..3]` with the q, k, v head sets of a fused projection
/// `[tokens][q_heads + 2 * kv_heads][head_dim]` (Llama `qkv_proj`, vLLM
/// `QKVParallelLinear`): rows `[q heads | k heads | v heads]`.
///
/// Errors (nothing is written): `ROPE_NULL_POINTER`, `ROPE_MISALIGNED_POINTER`,
/// `ROPE_STRIDE_OVERFLOW` (the row length overflows `size_t`).
///
/// # Safety
/// `sets` is NULL or writable for 3 structs.
#[no_mangle]
pub unsafe extern "C" fn rope_head_sets_qkv_rows(
    q_heads: usize,
    kv_heads: usize,
    head_dim: usize,
    sets: *mut rope_head_set,
) -> rope_status {
    guard(|| {
        let out = Buf::new(sets.cast_const(), 3)?;
        let row = kv_heads.checked_mul(2).and_then(|kv| kv.checked_add(q_heads));
        row.and_then(|r| r.checked_mul(head_dim)).ok_or(ROPE_STRIDE_OVERFLOW)?;
        let c = |s: HeadSet| rope_head_set {
            offset: s.offset,
            heads: s.heads,
            token_stride: s.token_stride,
            head_stride: s.head_stride,
        };
        let v = HeadSet::qkv_rows(q_heads, kv_heads, head_dim).map(c);
        // SAFETY: checked by `Buf::new`, writable for 3 structs (the contract).
        unsafe { out.slice_mut() }.copy_from_slice(&v);
        Ok(())
    })
}

/// Fills `sets[0..3]` with the q, k, v head sets of GPT-NeoX's `query_key_value` output
/// viewed as `[tokens][heads][3][head_dim]` (transformers `GPTNeoXAttention`).
///
/// Errors (nothing is written): `ROPE_NULL_POINTER`, `ROPE_MISALIGNED_POINTER`,
/// `ROPE_STRIDE_OVERFLOW` (the row length overflows `size_t`).
///
/// # Safety
/// `sets` is NULL or writable for 3 structs.
#[no_mangle]
pub unsafe extern "C" fn rope_head_sets_neox(
    heads: usize,
    head_dim: usize,
    sets: *mut rope_head_set,
) -> rope_status {
    guard(|| {
        let out = Buf::new(sets.cast_const(), 3)?;
        heads.checked_mul(3).and_then(|h| h.checked_mul(head_dim)).ok_or(ROPE_STRIDE_OVERFLOW)?;
        let c = |s: HeadSet| rope_head_set {
            offset: s.offset,
            heads: s.heads,
            token_stride: s.token_stride,
            head_stride: s.head_stride,
        };
        let v = HeadSet::neox_qkv(heads, head_dim).map(c);
        // SAFETY: checked by `Buf::new`, writable for 3 structs (the contract).
        unsafe { out.slice_mut() }.copy_from_slice(&v);
        Ok(())
    })
}

/// Fills `*layout` for a KV cache `[num_blocks][block_size][kv_heads][head_len]` (vLLM's
/// flash layout, NHD) when `hnd` is 0, or `[num_blocks][kv_heads][block_size][head_len]`
/// (HND) when it is 1. `head_len` is `head_dim`, or `head_dim / 32` for a `q8_0` cache; a
/// contiguous `[slots][kv_heads][head_len]` cache is `num_blocks = 1, block_size = slots`.
///
/// Errors (nothing is written): `ROPE_NULL_POINTER`, `ROPE_MISALIGNED_POINTER`,
/// `ROPE_INVALID_ARGUMENT` (`hnd` not 0 or 1), `ROPE_STRIDE_OVERFLOW` (the cache's extent
/// overflows `size_t`).
///
/// # Safety
/// `layout` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn rope_cache_layout_init(
    num_blocks: usize,
    block_size: usize,
    kv_heads: usize,
    head_len: usize,
    hnd: u8,
    layout: *mut rope_cache_layout,
) -> rope_status {
    guard(|| {
        let out = Buf::new(layout.cast_const(), 1)?;
        let hnd = crate::boundary::flag(hnd)?;
        let block = block_size.checked_mul(kv_heads).and_then(|b| b.checked_mul(head_len));
        block.and_then(|b| b.checked_mul(num_blocks)).ok_or(ROPE_STRIDE_OVERFLOW)?;
        let l = if hnd {
            CacheLayout::hnd(num_blocks, block_size, kv_heads, head_len)
        } else {
            CacheLayout::nhd(num_blocks, block_size, kv_heads, head_len)
        };
        let c = rope_cache_layout {
            num_blocks: l.num_blocks,
            block_size: l.block_size,
            block_stride: l.block_stride,
            slot_stride: l.slot_stride,
            head_stride: l.head_stride,
        };
        // SAFETY: checked by `Buf::new`, writable (the contract).
        unsafe { out.slice_mut()[0] = c };
        Ok(())
    })
}
