//! The sibling positional encodings through the C ABI: sinusoidal and learned absolute
//! encodings added to embeddings, relative position index matrices (DeBERTa, DeBERTa-v2,
//! T5) and ALiBi. Each function wraps one entry point of `rope_kernels::encodings`; the
//! formulas, their sources (paper and reference implementation files) and the edge cases
//! are documented there (src/encodings/ of rope-kernels).
//!
//! Shapes are row-major with strides in elements. Element types: `float` for the `_f32`
//! calls, `uint16_t` bit patterns of IEEE binary16 (`_f16`) or bfloat16 (`_bf16`); sums
//! are formed in f32 and rounded once to nearest-even on store, a NaN result is stored as
//! the canonical NaN (0x7FC00000, 0x7E00, 0x7FC0). Check order: the C boundary (enum
//! values, flags, pointers, byte sizes, overlaps), then the Rust crate's checks; a call
//! that fails has written nothing.

use rope_kernels::encodings::{
    add_alibi, alibi_slopes, alibi_slopes_with_bias_max, deberta_log_bucket_position,
    t5_relative_position_bucket, AlibiForm, LearnedElement, LearnedPositions, RelativeGrid,
    RelativePositions, Sinusoidal, SinusoidalLayout,
};
use rope_kernels::{bf16, f16, Positions};

use crate::apply::{rope_position_mode, ROPE_POSITIONS_IDS, ROPE_POSITIONS_START};
use crate::boundary::{disjoint, flag, guard, read, read_versioned, required, rust, Buf, CElement, R};
use crate::status::*;

// ---------------------------------------------------------------- positions

/// The positions of the rows of an absolute-encoding call (the counterpart of the
/// position fields of `rope_apply_opts`). Plain struct, not versioned.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct rope_positions {
    /// A `ROPE_POSITIONS_*` value: row `t` is at `start + t` (`ROPE_POSITIONS_START`) or at
    /// `position_ids[t]` (`ROPE_POSITIONS_IDS`).
    pub mode: rope_position_mode,
    /// `ROPE_POSITIONS_START`: the position of row 0 (a KV-cache offset).
    pub start: u32,
    /// `ROPE_POSITIONS_IDS`: one position per row (HF `position_ids` of one sequence);
    /// ignored otherwise.
    pub position_ids: *const u32,
    /// `ROPE_POSITIONS_IDS`: number of values at `position_ids`; must equal the rows
    /// (`ROPE_POSITION_COUNT_MISMATCH`).
    pub position_ids_len: usize,
}

/// The positions, and the byte range of the ids they read (empty for a start).
///
/// # Safety
/// `p` NULL or a readable `rope_positions` whose ids, in `ROPE_POSITIONS_IDS` mode, are
/// readable for their count and not written during the call.
unsafe fn positions<'a>(p: *const rope_positions) -> R<(Positions<'a>, (usize, usize))> {
    // SAFETY: the caller's contract; every field accepts any bits.
    let p = unsafe { read(p) }?;
    match p.mode {
        ROPE_POSITIONS_START => Ok((Positions::Start(p.start), (0, 0))),
        ROPE_POSITIONS_IDS => {
            let ids = Buf::new(p.position_ids, p.position_ids_len)?;
            // SAFETY: checked by `Buf::new`; readable, unchanged (the contract).
            Ok((Positions::Ids(unsafe { ids.slice() }), ids.bytes()))
        }
        _ => Err(ROPE_UNKNOWN_ENUM),
    }
}

/// The embeddings of an add: `tokens` rows, `row_stride` elements apart, in the buffer
/// `(x, len)` of `T`s (the C arguments, unchecked).
struct Rows<T: CElement> {
    x: *mut T::C,
    len: usize,
    tokens: usize,
    row_stride: usize,
}

// ---------------------------------------------------------------- sinusoidal

/// Where the sine and cosine columns of a sinusoidal encoding go.
pub type rope_sinusoidal_layout = u32;
/// The paper's layout (Vaswani et al. 2017, section 3.5): column `2i` is
/// `sin(pos / base^(2i / dim))`, column `2i + 1` the cosine; an odd `dim` ends in a sine
/// (XLM / HF DistilBERT `create_sinusoidal_embeddings`).
pub const ROPE_SINUSOIDAL_INTERLEAVED: rope_sinusoidal_layout = 0;
/// tensor2tensor / fairseq: `[sin | cos]` halves with timescales `exp(-k ln(base) /
/// (dim / 2 - 1))`; an odd `dim` ends in a zero column.
pub const ROPE_SINUSOIDAL_CONCATENATED: rope_sinusoidal_layout = 1;

/// The base of the paper and of every reference implementation.
pub const ROPE_SINUSOIDAL_BASE: f64 = 10000.0;

fn sinusoidal(dim: usize, layout: rope_sinusoidal_layout, base: f64) -> R<Sinusoidal> {
    let layout = match layout {
        ROPE_SINUSOIDAL_INTERLEAVED => SinusoidalLayout::Interleaved,
        ROPE_SINUSOIDAL_CONCATENATED => SinusoidalLayout::Concatenated,
        _ => return Err(ROPE_UNKNOWN_ENUM),
    };
    rust(Sinusoidal::with_base(dim, layout, base))
}

/// Writes the sinusoidal encoding of width `dim` (`d_model`) of positions
/// `start .. start + rows` into `out`, shaped `[rows][dim]` with `rows = out_len / dim`:
/// `out[r * dim + c]` is column `c` of position `start + r`. Each value is computed from
/// the f64 angle with f64 sin/cos and rounded once to f32 (accurate at every position).
/// `base` is `ROPE_SINUSOIDAL_BASE` (10000) in the references.
///
/// Errors (nothing is written): `ROPE_UNKNOWN_ENUM` (`layout`), `ROPE_NULL_POINTER`,
/// `ROPE_MISALIGNED_POINTER`, `ROPE_INVALID_ARGUMENT` (byte size of `out`),
/// `ROPE_INVALID_ENCODING_PARAMETER` (`dim` 0, `base` not finite or not > 0),
/// `ROPE_RAGGED_TABLE` (`out_len` not a multiple of `dim`), `ROPE_POSITION_OVERFLOW`
/// (`start + rows - 1` past `UINT32_MAX`).
///
/// # Safety
/// `out` is NULL or writable for `out_len` floats, accessed by no one else during the call.
#[no_mangle]
pub unsafe extern "C" fn rope_sinusoidal_fill_table_f32(
    dim: usize,
    layout: rope_sinusoidal_layout,
    base: f64,
    start: u32,
    out: *mut f32,
    out_len: usize,
) -> rope_status {
    guard(|| {
        let pe = sinusoidal(dim, layout, base)?;
        let out = Buf::new(out.cast_const(), out_len)?;
        // SAFETY: checked by `Buf::new`; writable and not accessed by others (the contract).
        rust(pe.fill_table(start, unsafe { out.slice_mut() }))
    })
}

/// The sinusoidal add for embeddings of type `T`.
///
/// # Safety
/// The contract of the `rope_sinusoidal_add_*` functions.
unsafe fn sinusoidal_add<T: CElement>(
    dim: usize,
    layout: rope_sinusoidal_layout,
    base: f64,
    x: Rows<T>,
    positions: *const rope_positions,
) -> rope_status {
    guard(|| {
        let pe = sinusoidal(dim, layout, base)?;
        let xb = Buf::<T>::from_c(x.x.cast_const(), x.len)?;
        // SAFETY: the caller's contract (NULL or a readable struct, readable ids).
        let (positions, ids) = unsafe { self::positions(positions) }?;
        disjoint(&[xb.bytes()], &[ids])?;
        // SAFETY: checked by `Buf::new`, writable and not accessed by others (the
        // contract), disjoint from the ids (checked).
        rust(pe.add_to(unsafe { xb.slice_mut() }, x.tokens, x.row_stride, positions))
    })
}

/// Adds the sinusoidal encoding to f32 embeddings in place (the fused "embeddings +
/// positional encoding" of the paper): `x[t * row_stride + c] += PE[position(t)][c]` for
/// the `tokens` rows of `dim` elements, positions from `*positions`. `row_stride` (in
/// elements) may exceed `dim` (a row inside a larger buffer) and is free with one row.
/// Zero tokens is a no-op. The encoding is the one `rope_sinusoidal_fill_table_f32`
/// writes; the sum is formed in f32.
///
/// Errors (nothing is written): `ROPE_UNKNOWN_ENUM` (`layout`, `positions->mode`),
/// `ROPE_NULL_POINTER` (`positions`, a buffer with a non-zero count),
/// `ROPE_MISALIGNED_POINTER`, `ROPE_INVALID_ARGUMENT` (byte size),
/// `ROPE_OVERLAPPING_BUFFERS` (`x` and `position_ids`), `ROPE_INVALID_ENCODING_PARAMETER`,
/// `ROPE_POSITION_COUNT_MISMATCH`, `ROPE_POSITION_OVERFLOW`, `ROPE_ROW_STRIDE_TOO_SMALL`,
/// `ROPE_ENCODING_SIZE_OVERFLOW`, `ROPE_ENCODING_BUFFER_TOO_SHORT` (`x_len` shorter than
/// `(tokens - 1) * row_stride + dim`).
///
/// # Safety
/// `x` is NULL or readable and writable for `x_len` elements; `positions` is NULL or a
/// readable struct whose ids are readable for their count; no one else accesses them
/// during the call.
#[no_mangle]
pub unsafe extern "C" fn rope_sinusoidal_add_f32(
    dim: usize,
    layout: rope_sinusoidal_layout,
    base: f64,
    x: *mut f32,
    x_len: usize,
    tokens: usize,
    row_stride: usize,
    positions: *const rope_positions,
) -> rope_status {
    // SAFETY: the same contract.
    unsafe { sinusoidal_add::<f32>(dim, layout, base, Rows { x, len: x_len, tokens, row_stride }, positions) }
}

/// `rope_sinusoidal_add_f32` for IEEE binary16 embeddings (`uint16_t` storage): each sum
/// `x + PE` is formed in f32 and rounded once.
///
/// # Safety
/// As for `rope_sinusoidal_add_f32`.
#[no_mangle]
pub unsafe extern "C" fn rope_sinusoidal_add_f16(
    dim: usize,
    layout: rope_sinusoidal_layout,
    base: f64,
    x: *mut u16,
    x_len: usize,
    tokens: usize,
    row_stride: usize,
    positions: *const rope_positions,
) -> rope_status {
    // SAFETY: the same contract.
    unsafe { sinusoidal_add::<f16>(dim, layout, base, Rows { x, len: x_len, tokens, row_stride }, positions) }
}

/// `rope_sinusoidal_add_f32` for bfloat16 embeddings (`uint16_t` storage).
///
/// # Safety
/// As for `rope_sinusoidal_add_f32`.
#[no_mangle]
pub unsafe extern "C" fn rope_sinusoidal_add_bf16(
    dim: usize,
    layout: rope_sinusoidal_layout,
    base: f64,
    x: *mut u16,
    x_len: usize,
    tokens: usize,
    row_stride: usize,
    positions: *const rope_positions,
) -> rope_status {
    // SAFETY: the same contract.
    unsafe {
        sinusoidal_add::<bf16>(dim, layout, base, Rows { x, len: x_len, tokens, row_stride }, positions)
    }
}

// ---------------------------------------------------------------- learned

/// The learned add for embeddings `T` and a table of `P` (`T` itself or `f32`).
///
/// # Safety
/// The contract of the `rope_learned_add_*` functions.
unsafe fn learned_add<T: CElement, P: CElement + LearnedElement<T>>(
    table: *const P::C,
    table_len: usize,
    dim: usize,
    x: Rows<T>,
    positions: *const rope_positions,
) -> rope_status {
    guard(|| {
        let tb = Buf::<P>::from_c(table, table_len)?;
        let xb = Buf::<T>::from_c(x.x.cast_const(), x.len)?;
        // SAFETY: the caller's contract (NULL or a readable struct, readable ids).
        let (positions, ids) = unsafe { self::positions(positions) }?;
        disjoint(&[xb.bytes()], &[tb.bytes(), ids])?;
        // SAFETY: checked by `Buf::new`, readable and not written during the call (the
        // contract), disjoint from `x` (checked).
        let wpe = rust(LearnedPositions::new(unsafe { tb.slice() }, dim))?;
        // SAFETY: checked by `Buf::new`, writable and not accessed by others (the
        // contract), disjoint from the table and the ids (checked).
        rust(wpe.add_to(unsafe { xb.slice_mut() }, x.tokens, x.row_stride, positions))
    })
}

/// Adds rows of a trained position table to f32 embeddings in place (GPT-2 `wpe`,
/// BERT/OPT `position_embeddings`: `inputs_embeds + position_embeddings(position_ids)`):
/// `x[t * row_stride + c] += table[position(t) * dim + c]` for the `tokens` rows of `dim`
/// elements. `table` is `[max_positions][dim]` with `max_positions = table_len / dim`, the
/// trained length: a position `>= max_positions` is `ROPE_BEYOND_TRAINED_LENGTH` (the
/// model cannot extrapolate), never an extrapolation. Pass ids as the model numbers them
/// (OPT adds 2, RoBERTa starts at `padding_idx + 1`). Zero tokens is a no-op.
///
/// Errors (nothing is written): `ROPE_UNKNOWN_ENUM` (`positions->mode`),
/// `ROPE_NULL_POINTER`, `ROPE_MISALIGNED_POINTER`, `ROPE_INVALID_ARGUMENT` (byte size),
/// `ROPE_OVERLAPPING_BUFFERS` (`x` and `table` or `position_ids`),
/// `ROPE_INVALID_ENCODING_PARAMETER` (`dim` 0), `ROPE_RAGGED_TABLE` (`table_len` not a
/// multiple of `dim`), `ROPE_POSITION_COUNT_MISMATCH`, `ROPE_POSITION_OVERFLOW`,
/// `ROPE_ROW_STRIDE_TOO_SMALL`, `ROPE_ENCODING_SIZE_OVERFLOW`,
/// `ROPE_ENCODING_BUFFER_TOO_SHORT`, `ROPE_BEYOND_TRAINED_LENGTH`.
///
/// # Safety
/// `table` is NULL or readable for `table_len` elements; `x` NULL or readable and writable
/// for `x_len` elements; `positions` NULL or a readable struct whose ids are readable for
/// their count; `x` is accessed by no one else and the rest not written during the call.
#[no_mangle]
pub unsafe extern "C" fn rope_learned_add_f32(
    table: *const f32,
    table_len: usize,
    dim: usize,
    x: *mut f32,
    x_len: usize,
    tokens: usize,
    row_stride: usize,
    positions: *const rope_positions,
) -> rope_status {
    // SAFETY: the same contract.
    unsafe {
        learned_add::<f32, f32>(table, table_len, dim, Rows { x, len: x_len, tokens, row_stride }, positions)
    }
}

/// `rope_learned_add_f32` for IEEE binary16 embeddings and table (`uint16_t` storage):
/// each sum is formed in f32 and rounded once.
///
/// # Safety
/// As for `rope_learned_add_f32`.
#[no_mangle]
pub unsafe extern "C" fn rope_learned_add_f16(
    table: *const u16,
    table_len: usize,
    dim: usize,
    x: *mut u16,
    x_len: usize,
    tokens: usize,
    row_stride: usize,
    positions: *const rope_positions,
) -> rope_status {
    // SAFETY: the same contract.
    unsafe {
        learned_add::<f16, f16>(table, table_len, dim, Rows { x, len: x_len, tokens, row_stride }, positions)
    }
}

/// `rope_learned_add_f32` for bfloat16 embeddings and table (`uint16_t` storage).
///
/// # Safety
/// As for `rope_learned_add_f32`.
#[no_mangle]
pub unsafe extern "C" fn rope_learned_add_bf16(
    table: *const u16,
    table_len: usize,
    dim: usize,
    x: *mut u16,
    x_len: usize,
    tokens: usize,
    row_stride: usize,
    positions: *const rope_positions,
) -> rope_status {
    // SAFETY: the same contract.
    unsafe {
        learned_add::<bf16, bf16>(
            table,
            table_len,
            dim,
            Rows { x, len: x_len, tokens, row_stride },
            positions,
        )
    }
}

/// `rope_learned_add_f16` with an f32 table (kept in full precision next to binary16
/// activations).
///
/// # Safety
/// As for `rope_learned_add_f32`.
#[no_mangle]
pub unsafe extern "C" fn rope_learned_add_f16_table_f32(
    table: *const f32,
    table_len: usize,
    dim: usize,
    x: *mut u16,
    x_len: usize,
    tokens: usize,
    row_stride: usize,
    positions: *const rope_positions,
) -> rope_status {
    // SAFETY: the same contract.
    unsafe {
        learned_add::<f16, f32>(table, table_len, dim, Rows { x, len: x_len, tokens, row_stride }, positions)
    }
}

/// `rope_learned_add_bf16` with an f32 table.
///
/// # Safety
/// As for `rope_learned_add_f32`.
#[no_mangle]
pub unsafe extern "C" fn rope_learned_add_bf16_table_f32(
    table: *const f32,
    table_len: usize,
    dim: usize,
    x: *mut u16,
    x_len: usize,
    tokens: usize,
    row_stride: usize,
    positions: *const rope_positions,
) -> rope_status {
    // SAFETY: the same contract.
    unsafe {
        learned_add::<bf16, f32>(table, table_len, dim, Rows { x, len: x_len, tokens, row_stride }, positions)
    }
}

// ---------------------------------------------------------------- relative

/// How a (query position, key position) pair becomes an index (`rope_relative.kind`).
pub type rope_relative_kind = u32;
/// `clip(q - k, -max_distance, max_distance)` (DeBERTa `build_relative_position` sign,
/// query minus key). Parameter: `max_distance` in `[1, INT32_MAX]`.
pub const ROPE_RELATIVE_CLIPPED: rope_relative_kind = 0;
/// `clip(q - k, -max_distance, max_distance) + max_distance`, a row of a table of
/// `2 * max_distance + 1` relative embeddings. Parameter: `max_distance` in
/// `[1, (INT32_MAX - 1) / 2]`.
pub const ROPE_RELATIVE_CLIPPED_INDEX: rope_relative_kind = 1;
/// DeBERTa's `delta(q, k) = clamp(q - k + att_span, 0, 2 * att_span - 1)` (HF
/// `disentangled_att_bias`, `c2p_pos`). Parameter: `att_span` in `[1, 2^30]`.
pub const ROPE_RELATIVE_DEBERTA_INDEX: rope_relative_kind = 2;
/// DeBERTa-v2 `make_log_bucket_position(q - k, bucket_size, max_position)` (HF
/// `modeling_deberta_v2.py`), unclamped. Parameters: `bucket_size` (HF
/// `position_buckets`) >= 2, `max_position` (HF `max_relative_positions`) >
/// `bucket_size / 2 + 1`.
pub const ROPE_RELATIVE_DEBERTA_V2_LOG_BUCKET: rope_relative_kind = 3;
/// T5 `_relative_position_bucket(k - q, bidirectional=True, num_buckets, max_distance)`
/// (HF `modeling_t5.py`, encoders). Parameters: `num_buckets` in `[4, INT32_MAX]`,
/// `max_distance` > `num_buckets / 4`.
pub const ROPE_RELATIVE_T5_BIDIRECTIONAL: rope_relative_kind = 4;
/// T5 buckets with `bidirectional=False` (causal decoders: keys after the query share
/// bucket 0). Parameters: `num_buckets` in `[2, INT32_MAX]`, `max_distance` >
/// `num_buckets / 2`.
pub const ROPE_RELATIVE_T5_CAUSAL: rope_relative_kind = 5;

/// A relative position scheme: `kind` and its parameters (the Rust `RelativePositions`).
/// Only the fields of `kind` are read (see each `ROPE_RELATIVE_*`). Versioned:
/// `struct_size = sizeof(rope_relative)`; zero the struct, then set the fields.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct rope_relative {
    /// `sizeof(rope_relative)`.
    pub struct_size: usize,
    /// A `ROPE_RELATIVE_*` value.
    pub kind: rope_relative_kind,
    /// Clipped kinds: the clipping distance `k`; T5: HF `relative_attention_max_distance`
    /// (128 in T5).
    pub max_distance: u32,
    /// `ROPE_RELATIVE_DEBERTA_INDEX`: the attention span.
    pub att_span: u32,
    /// `ROPE_RELATIVE_DEBERTA_V2_LOG_BUCKET`: HF `position_buckets`.
    pub bucket_size: u32,
    /// `ROPE_RELATIVE_DEBERTA_V2_LOG_BUCKET`: HF `max_relative_positions`.
    pub max_position: u32,
    /// T5: HF `relative_attention_num_buckets` (32 in T5).
    pub num_buckets: u32,
}

/// The query and key positions of a relative call: query row `i` is at position
/// `q_offset + i` (`i < query_len`), key column `j` at `k_offset + j` (`j < key_len`).
/// Prefill of `n` tokens: `{n, n, 0, 0}`; decode of `n` new tokens after `past` cached
/// ones: `{n, past + n, past, 0}`. Plain struct, not versioned.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct rope_relative_grid {
    /// Number of query rows.
    pub query_len: usize,
    /// Number of key columns.
    pub key_len: usize,
    /// Position of query row 0.
    pub q_offset: u32,
    /// Position of key column 0.
    pub k_offset: u32,
}

/// The scheme of a `rope_relative` (boundary checks only; the Rust crate checks the
/// parameters).
///
/// # Safety
/// `p` NULL or readable for `struct_size` bytes.
unsafe fn relative(p: *const rope_relative) -> R<RelativePositions> {
    // SAFETY: the caller's contract; every field accepts any bits.
    let r = unsafe { read_versioned(p) }?;
    let t5 = |bidirectional| RelativePositions::T5Bucket {
        bidirectional,
        num_buckets: r.num_buckets,
        max_distance: r.max_distance,
    };
    Ok(match r.kind {
        ROPE_RELATIVE_CLIPPED => RelativePositions::Clipped { max_distance: r.max_distance },
        ROPE_RELATIVE_CLIPPED_INDEX => RelativePositions::ClippedIndex { max_distance: r.max_distance },
        ROPE_RELATIVE_DEBERTA_INDEX => RelativePositions::DebertaIndex { att_span: r.att_span },
        ROPE_RELATIVE_DEBERTA_V2_LOG_BUCKET => {
            RelativePositions::DebertaV2LogBucket { bucket_size: r.bucket_size, max_position: r.max_position }
        }
        ROPE_RELATIVE_T5_BIDIRECTIONAL => t5(true),
        ROPE_RELATIVE_T5_CAUSAL => t5(false),
        _ => return Err(ROPE_UNKNOWN_ENUM),
    })
}

/// The grid of a `rope_relative_grid`.
///
/// # Safety
/// `p` NULL or a readable `rope_relative_grid`.
unsafe fn grid(p: *const rope_relative_grid) -> R<RelativeGrid> {
    // SAFETY: the caller's contract; every field accepts any bits.
    let g = unsafe { read(p) }?;
    Ok(RelativeGrid::new(g.query_len, g.key_len).with_offsets(g.q_offset, g.k_offset))
}

/// Checks a relative position scheme.
///
/// Errors: `ROPE_NULL_POINTER`, `ROPE_MISALIGNED_POINTER`, `ROPE_UNSUPPORTED_STRUCT_SIZE`,
/// `ROPE_UNKNOWN_ENUM` (`kind`), `ROPE_INVALID_ENCODING_PARAMETER` (a parameter of `kind`
/// out of its domain, see each `ROPE_RELATIVE_*`).
///
/// # Safety
/// `params` is NULL or readable for `struct_size` bytes.
#[no_mangle]
pub unsafe extern "C" fn rope_relative_validate(params: *const rope_relative) -> rope_status {
    // SAFETY: the caller's contract, passed on.
    guard(|| rust(unsafe { relative(params) }?.validate()))
}

/// `*index` = the index of the pair (query at `query_position`, key at `key_position`),
/// with the sign convention of `params->kind`.
///
/// Errors (nothing is written): those of `rope_relative_validate`, `ROPE_NULL_POINTER` and
/// `ROPE_MISALIGNED_POINTER` (`index`), `ROPE_RELATIVE_INDEX_OVERFLOW` (DeBERTa-v2 log
/// buckets only).
///
/// # Safety
/// `params` as for `rope_relative_validate`; `index` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn rope_relative_index(
    params: *const rope_relative,
    query_position: u32,
    key_position: u32,
    index: *mut i32,
) -> rope_status {
    guard(|| {
        // SAFETY: the caller's contract.
        let r = unsafe { relative(params) }?;
        let out = required(index)?;
        let v = rust(r.index(query_position, key_position))?;
        // SAFETY: non-NULL, aligned (checked), writable (the contract).
        unsafe { out.as_ptr().write(v) };
        Ok(())
    })
}

/// Fills the index matrix `[grid->query_len][grid->key_len]` (contiguous rows) into `out`:
/// `out[i * key_len + j]` is the index of query position `q_offset + i` and key position
/// `k_offset + j`, for gathering relative embeddings or per-head biases. Elements past
/// `query_len * key_len` are left alone; an empty grid is a no-op.
///
/// Errors (nothing is written): those of `rope_relative_validate`, `ROPE_NULL_POINTER`
/// (`grid`, `out` with a non-zero count), `ROPE_MISALIGNED_POINTER`,
/// `ROPE_INVALID_ARGUMENT` (byte size), `ROPE_POSITION_OVERFLOW` (last query or key
/// position), `ROPE_ENCODING_SIZE_OVERFLOW`, `ROPE_ENCODING_BUFFER_TOO_SHORT` (`out_len <
/// query_len * key_len`), `ROPE_RELATIVE_INDEX_OVERFLOW`.
///
/// # Safety
/// `params` as for `rope_relative_validate`; `grid` NULL or readable; `out` NULL or
/// writable for `out_len` values, accessed by no one else during the call.
#[no_mangle]
pub unsafe extern "C" fn rope_relative_fill(
    params: *const rope_relative,
    grid: *const rope_relative_grid,
    out: *mut i32,
    out_len: usize,
) -> rope_status {
    guard(|| {
        // SAFETY: the caller's contract.
        let r = unsafe { relative(params) }?;
        // SAFETY: the caller's contract.
        let g = unsafe { self::grid(grid) }?;
        let out = Buf::new(out.cast_const(), out_len)?;
        // SAFETY: checked by `Buf::new`; writable and not accessed by others (the contract).
        rust(r.fill(unsafe { out.slice_mut() }, g))
    })
}

/// `*bucket` = T5's `_relative_position_bucket(relative_position, bidirectional,
/// num_buckets, max_distance)` of one `relative_position = key_position -
/// query_position` (HF `transformers/models/t5/modeling_t5.py`; Raffel et al. 2020), in
/// the reference's f32 arithmetic, clamped to the last bucket. T5: 32 buckets, max
/// distance 128 (`+1000` gives 31 bidirectional).
///
/// Errors (nothing is written): `ROPE_INVALID_ARGUMENT` (`bidirectional` not 0 or 1),
/// `ROPE_NULL_POINTER`, `ROPE_MISALIGNED_POINTER` (`bucket`),
/// `ROPE_INVALID_ENCODING_PARAMETER` (`num_buckets` below 4 bidirectional / 2 causal or
/// above `INT32_MAX`; `max_distance` not above `num_buckets / 4` / `num_buckets / 2`).
///
/// # Safety
/// `bucket` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn rope_t5_relative_position_bucket(
    relative_position: i64,
    bidirectional: u8,
    num_buckets: u32,
    max_distance: u32,
    bucket: *mut i32,
) -> rope_status {
    guard(|| {
        let bidirectional = flag(bidirectional)?;
        let out = required(bucket)?;
        let b =
            rust(t5_relative_position_bucket(relative_position, bidirectional, num_buckets, max_distance))?;
        // SAFETY: non-NULL, aligned (checked), writable (the contract).
        unsafe { out.as_ptr().write(b) };
        Ok(())
    })
}

/// `*bucket` = DeBERTa-v2's `make_log_bucket_position(relative_pos, bucket_size,
/// max_position)` of one `relative_pos = query_position - key_position` (HF
/// `transformers/models/deberta_v2/modeling_deberta_v2.py`): `|relative_pos| <=
/// bucket_size / 2` unchanged, larger distances mapped logarithmically in the reference's
/// f32 arithmetic, unclamped.
///
/// Errors (nothing is written): `ROPE_NULL_POINTER`, `ROPE_MISALIGNED_POINTER` (`bucket`),
/// `ROPE_INVALID_ENCODING_PARAMETER` (`bucket_size` below 2, `max_position` not above
/// `bucket_size / 2 + 1`).
///
/// # Safety
/// `bucket` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn rope_deberta_log_bucket_position(
    relative_pos: i64,
    bucket_size: u32,
    max_position: u32,
    bucket: *mut i64,
) -> rope_status {
    guard(|| {
        let out = required(bucket)?;
        let b = rust(deberta_log_bucket_position(relative_pos, bucket_size, max_position))?;
        // SAFETY: non-NULL, aligned (checked), writable (the contract).
        unsafe { out.as_ptr().write(b) };
        Ok(())
    })
}

// ---------------------------------------------------------------- ALiBi

/// How the ALiBi bias depends on the distance (`rope_alibi_add_f32`).
pub type rope_alibi_form = u32;
/// `slope * (key_position - query_position)`: the paper's causal bias (0 on the diagonal,
/// negative for past keys; BLOOM's `slope * key_position` differs by a per-row constant).
pub const ROPE_ALIBI_CAUSAL: rope_alibi_form = 0;
/// `-slope * |key_position - query_position|`: bidirectional (encoder) models.
pub const ROPE_ALIBI_SYMMETRIC: rope_alibi_form = 1;

/// Writes the ALiBi slopes of `heads` heads into `slopes[0..heads]` (Press et al. 2022,
/// `get_slopes` of `ofirpress/attention_with_linear_biases`): a power of two `n` gives
/// head `h` the slope `2^(-8 (h + 1) / n)` (8 heads: `2^-1 .. 2^-8`); otherwise, with `c`
/// the largest power of two below `n`, the slopes of `c` heads then every other slope of
/// `2c` heads. Computed in f64, rounded once to f32. Zero heads is a no-op.
///
/// Errors (nothing is written): `ROPE_NULL_POINTER`, `ROPE_MISALIGNED_POINTER`,
/// `ROPE_INVALID_ARGUMENT` (byte size).
///
/// # Safety
/// `slopes` is NULL or writable for `heads` floats, accessed by no one else during the call.
#[no_mangle]
pub unsafe extern "C" fn rope_alibi_slopes(slopes: *mut f32, heads: usize) -> rope_status {
    guard(|| {
        let out = Buf::new(slopes.cast_const(), heads)?;
        // SAFETY: checked by `Buf::new`; writable and not accessed by others (the contract).
        alibi_slopes(unsafe { out.slice_mut() });
        Ok(())
    })
}

/// `rope_alibi_slopes` with another maximum bias in place of 8 (MPT `alibi_bias_max`):
/// a power of two `n` gives head `h` the slope `2^(-alibi_bias_max (h + 1) / n)`.
///
/// Errors (nothing is written): those of `rope_alibi_slopes`,
/// `ROPE_INVALID_ENCODING_PARAMETER` (`alibi_bias_max` not finite or not > 0).
///
/// # Safety
/// As for `rope_alibi_slopes`.
#[no_mangle]
pub unsafe extern "C" fn rope_alibi_slopes_with_bias_max(
    slopes: *mut f32,
    heads: usize,
    alibi_bias_max: f64,
) -> rope_status {
    guard(|| {
        let out = Buf::new(slopes.cast_const(), heads)?;
        // SAFETY: checked by `Buf::new`; writable and not accessed by others (the contract).
        rust(alibi_slopes_with_bias_max(unsafe { out.slice_mut() }, alibi_bias_max))
    })
}

/// Adds the ALiBi bias to a block of f32 attention scores in place, before the softmax.
/// `scores` holds `heads` heads (one slope each) of `grid->query_len` rows of
/// `grid->key_len` scores: score `(h, i, j)` is at `(h * query_len + i) * row_stride + j`
/// (`row_stride` in elements, free with one row in all). Query row `i` is at position
/// `q_offset + i`, key `j` at `k_offset + j`; with `d = key_position - query_position`
/// rounded to f32, each score gets `slopes[h] * d` (`ROPE_ALIBI_CAUSAL`) or
/// `-(slopes[h] * |d|)` (`ROPE_ALIBI_SYMMETRIC`), added in f32 without fused
/// multiply-add. For a tensor-parallel shard pass the slopes of its heads.
///
/// Errors (nothing is written): `ROPE_UNKNOWN_ENUM` (`form`), `ROPE_NULL_POINTER` (`grid`,
/// a buffer with a non-zero count), `ROPE_MISALIGNED_POINTER`, `ROPE_INVALID_ARGUMENT`
/// (byte size), `ROPE_OVERLAPPING_BUFFERS` (`scores` and `slopes`),
/// `ROPE_INVALID_ENCODING_PARAMETER` (a slope not finite), `ROPE_POSITION_OVERFLOW`,
/// `ROPE_ROW_STRIDE_TOO_SMALL`, `ROPE_ENCODING_SIZE_OVERFLOW`,
/// `ROPE_ENCODING_BUFFER_TOO_SHORT`.
///
/// # Safety
/// `scores` is NULL or readable and writable for `scores_len` floats and accessed by no
/// one else during the call; `grid` NULL or readable; `slopes` NULL or readable for
/// `heads` floats, not written during the call.
#[no_mangle]
pub unsafe extern "C" fn rope_alibi_add_f32(
    scores: *mut f32,
    scores_len: usize,
    row_stride: usize,
    grid: *const rope_relative_grid,
    slopes: *const f32,
    heads: usize,
    form: rope_alibi_form,
) -> rope_status {
    guard(|| {
        let form = match form {
            ROPE_ALIBI_CAUSAL => AlibiForm::Causal,
            ROPE_ALIBI_SYMMETRIC => AlibiForm::Symmetric,
            _ => return Err(ROPE_UNKNOWN_ENUM),
        };
        let sb = Buf::new(scores.cast_const(), scores_len)?;
        // SAFETY: the caller's contract.
        let g = unsafe { self::grid(grid) }?;
        let lb = Buf::new(slopes, heads)?;
        disjoint(&[sb.bytes()], &[lb.bytes()])?;
        // SAFETY: checked by `Buf::new`, readable and not written during the call (the
        // contract), disjoint from `scores` (checked).
        let slopes = unsafe { lb.slice() };
        // SAFETY: checked by `Buf::new`, writable and not accessed by others (the
        // contract), disjoint from `slopes` (checked).
        rust(add_alibi(unsafe { sb.slice_mut() }, row_stride, g, slopes, form))
    })
}

#[cfg(test)]
mod tests;
