//! `rope_status`: the result of every fallible C function, with fixed numeric values.
//!
//! Numbering: 0 is success; 1..=19 configuration errors and 20..=39 call errors (one per
//! [`RopeError`] kind of the Rust crate); 40..=59 errors that only the C boundary can
//! detect; 60..=79 errors of the sibling encodings (sinusoidal, learned, relative, ALiBi;
//! one per [`RopeError`] kind), then multimodal RoPE and QK-norm (67..=71) and the
//! attention-layer call `rope_apply_layer` (72..=80, one per [`RopeError`] kind). Values are
//! never reused or renumbered.

use rope_kernels::RopeError;

/// The result of a C function: `ROPE_OK` (0) or one of the `ROPE_*` error codes below.
/// A function that returns anything but `ROPE_OK` has written nothing: not to tensors,
/// tables, handles, storage nor out-parameters. The numbers are part of the ABI.
pub type rope_status = i32;

/// Success.
pub const ROPE_OK: rope_status = 0;

// ---- Configuration (RopeError) ----

/// `head_dim` is 0.
pub const ROPE_ZERO_HEAD_DIM: rope_status = 1;
/// `rotary_dim` is 0 or odd (RoPE rotates pairs of dimensions).
pub const ROPE_INVALID_ROTARY_DIM: rope_status = 2;
/// `rotary_dim` is larger than `head_dim`.
pub const ROPE_ROTARY_DIM_EXCEEDS_HEAD_DIM: rope_status = 3;
/// `rotary_dim` is larger than 512, the size of the on-stack frequency buffers.
pub const ROPE_ROTARY_DIM_TOO_LARGE: rope_status = 4;
/// `theta` is not finite or not > 0.
pub const ROPE_INVALID_THETA: rope_status = 5;
/// A scaling parameter is out of its domain: not finite (NaN included), <= 0, an array of
/// the wrong length, or inconsistent with another parameter.
pub const ROPE_INVALID_SCALING_PARAMETER: rope_status = 6;
/// The caller's f32 `inv_freq` table does not have `rotary_dim / 2` entries.
pub const ROPE_INV_FREQ_LENGTH: rope_status = 7;

// ---- Calls (RopeError) ----

/// The strides of a view make two (token, head) rows share elements.
pub const ROPE_OVERLAPPING_STRIDES: rope_status = 20;
/// The extent of a view does not fit in `size_t`.
pub const ROPE_STRIDE_OVERFLOW: rope_status = 21;
/// A caller buffer is shorter than the call needs: a tensor shorter than its view, the
/// storage of `rope_init`, or the `inv_freq` output of `rope_frequencies`.
pub const ROPE_BUFFER_TOO_SMALL: rope_status = 22;
/// k has another token count than q, or an output another shape than its input.
pub const ROPE_SHAPE_MISMATCH: rope_status = 23;
/// `position_ids_len` differs from the number of tokens.
pub const ROPE_POSITION_COUNT_MISMATCH: rope_status = 24;
/// `start + tokens - 1` (or `start + rows - 1` of a table, or the last query or key
/// position of a relative grid) does not fit in `uint32_t`.
pub const ROPE_POSITION_OVERFLOW: rope_status = 25;
/// A position is at or past the last row of the cos/sin table.
pub const ROPE_POSITION_OUT_OF_RANGE: rope_status = 26;
/// A cos/sin table whose length is not a multiple of `rotary_dim / 2`.
pub const ROPE_TABLE_SHAPE: rope_status = 27;
/// The tier is not available in this build or on this CPU.
pub const ROPE_TIER_UNAVAILABLE: rope_status = 28;

// ---- The C boundary ----

/// A required pointer is NULL (a buffer pointer may be NULL only when its length is 0).
pub const ROPE_NULL_POINTER: rope_status = 40;
/// A pointer is not aligned for its type (`float` 4, `uint16_t` 2, structs and handles
/// their `_Alignof`).
pub const ROPE_MISALIGNED_POINTER: rope_status = 41;
/// An enum-typed integer (`rope_layout`, `rope_scaling_type`, `rope_tier`,
/// `rope_relative_kind`, ...) holds no value of its enum.
pub const ROPE_UNKNOWN_ENUM: rope_status = 42;
/// Any other invalid argument: a flag other than 0 or 1, a buffer whose byte size exceeds
/// `PTRDIFF_MAX` or wraps the address space, or an error of the Rust crate that this
/// version of the C ABI does not name.
pub const ROPE_INVALID_ARGUMENT: rope_status = 43;
/// `struct_size` of a versioned struct is not a size this library knows (the header the
/// caller compiled against is newer than the library, or the field is not set).
pub const ROPE_UNSUPPORTED_STRUCT_SIZE: rope_status = 44;
/// The `rope_t` pointer does not point to a handle made by `rope_init` or `rope_new`
/// (or `rope_free` was given a handle that `rope_new` did not make).
pub const ROPE_INVALID_HANDLE: rope_status = 45;
/// Two buffers of one call overlap where one of them is written: q and k in place, an
/// output and any other buffer out of place, `cos` and `sin` of `rope_fill_table`, the
/// handle out-parameter and the storage of `rope_init`, or an encoding's written buffer
/// (embeddings, scores) and the buffers it reads (table, position ids, slopes).
pub const ROPE_OVERLAPPING_BUFFERS: rope_status = 46;
/// `rope_new` could not allocate (always so in a build without `std`).
pub const ROPE_OUT_OF_MEMORY: rope_status = 47;
/// A panic (a bug in the library) was caught at the boundary; nothing unwound into C.
pub const ROPE_PANIC: rope_status = 48;

// ---- The sibling encodings (RopeError): sinusoidal, learned, relative, ALiBi ----

/// A parameter of a positional encoding is out of its domain: a `dim` of 0, a `base` or
/// `alibi_bias_max` that is not finite and > 0, a slope that is not finite, T5
/// `num_buckets`/`max_distance` or DeBERTa `bucket_size`/`max_position` out of range, a
/// clipping distance or `att_span` of 0 or too large for `int32_t` indices.
pub const ROPE_INVALID_ENCODING_PARAMETER: rope_status = 60;
/// A buffer of an encoding call (embeddings, index matrix, scores) is shorter than its
/// shape needs.
pub const ROPE_ENCODING_BUFFER_TOO_SHORT: rope_status = 61;
/// `row_stride` is smaller than the row length while there is more than one row.
pub const ROPE_ROW_STRIDE_TOO_SMALL: rope_status = 62;
/// The extent of an encoding buffer's shape (rows, row stride, row length) does not fit in
/// `size_t`.
pub const ROPE_ENCODING_SIZE_OVERFLOW: rope_status = 63;
/// A table (learned positions, sinusoidal output) whose length is not a whole number of
/// rows of `dim`.
pub const ROPE_RAGGED_TABLE: rope_status = 64;
/// A position is at or past the end of a learned position table: the model cannot
/// extrapolate beyond the length it was trained on.
pub const ROPE_BEYOND_TRAINED_LENGTH: rope_status = 65;
/// A relative position index of the call does not fit in `int32_t` (DeBERTa-v2 log
/// buckets at extreme distances).
pub const ROPE_RELATIVE_INDEX_OVERFLOW: rope_status = 66;

// ---- Multimodal RoPE (MRoPE, 2-D vision RoPE) and fused QK-norm + RoPE ----

/// An `mrope_section` that does not fit the rotary pairs: its sum is not `rotary_dim / 2`,
/// or (interleaved) `3 * h > pairs + 1` or `3 * w > pairs`.
pub const ROPE_INVALID_MROPE_SECTION: rope_status = 67;
/// A scaling the operation does not combine with: any scaling with 2-D vision RoPE.
pub const ROPE_UNSUPPORTED_SCALING: rope_status = 68;
/// MRoPE position helper: token types and grids that do not describe one sequence.
pub const ROPE_INVALID_POSITION_LAYOUT: rope_status = 69;
/// A QK-norm weight whose length is not `head_dim` (`rope_apply_qk_norm_*`).
pub const ROPE_NORM_WEIGHT_LENGTH: rope_status = 70;
/// A QK-norm `eps` that is NaN, infinite or negative (`rope_apply_qk_norm_*`).
pub const ROPE_INVALID_NORM_EPS: rope_status = 71;

// ---- The attention-layer call (`rope_apply_layer`) ----

/// Two head sets of the `qkv` buffer (q and k, or either and v) share an element, decided
/// exactly on the elements the sets touch (interleaved sets of one buffer are fine).
pub const ROPE_OVERLAPPING_HEAD_SETS: rope_status = 72;
/// A destination's `dtype` the call cannot produce from `qkv_dtype`: `ROPE_DEST_IN_PLACE`
/// with another type than `qkv_dtype` (in place means the input's own elements).
pub const ROPE_UNSUPPORTED_TYPE_PAIR: rope_status = 73;
/// A `ROPE_DTYPE_Q8_0` destination whose `head_dim` is not a multiple of 32: a head must be
/// a whole number of `rope_block_q8_0` blocks.
pub const ROPE_PARTIAL_QUANT_BLOCK: rope_status = 74;
/// A ragged batch whose `indptr` is empty, does not start at 0, decreases or does not end at
/// `tokens`, or whose `seq_start` does not have `indptr_len - 1` values.
pub const ROPE_INVALID_INDPTR: rope_status = 75;
/// `slot_mapping_len` differs from `tokens`.
pub const ROPE_SLOT_MAPPING_LENGTH: rope_status = 76;
/// A token's cache slot is outside the cache: at or past `num_blocks * block_size`, or a
/// `slot_mapping` value below -1.
pub const ROPE_SLOT_OUT_OF_RANGE: rope_status = 77;
/// A `block_table` entry at or past `num_blocks`.
pub const ROPE_BLOCK_OUT_OF_RANGE: rope_status = 78;
/// A `block_table` with no entry for a token's position: `position / block_size >=
/// blocks_per_seq`, or fewer than `sequences * blocks_per_seq` values.
pub const ROPE_BLOCK_TABLE_TOO_SHORT: rope_status = 79;
/// Two tokens of the call map to one cache slot (one row written twice).
pub const ROPE_DUPLICATE_SLOT: rope_status = 80;
/// `ROPE_SLOTS_BLOCK_TABLE` with a cache layout whose `block_size` is 0.
pub const ROPE_INVALID_BLOCK_SIZE: rope_status = 81;

/// Every status, in numeric order (tests check that each has a name and a message).
#[cfg(test)]
pub(crate) const ALL_STATUSES: [rope_status; 48] = [
    ROPE_OK,
    ROPE_ZERO_HEAD_DIM,
    ROPE_INVALID_ROTARY_DIM,
    ROPE_ROTARY_DIM_EXCEEDS_HEAD_DIM,
    ROPE_ROTARY_DIM_TOO_LARGE,
    ROPE_INVALID_THETA,
    ROPE_INVALID_SCALING_PARAMETER,
    ROPE_INV_FREQ_LENGTH,
    ROPE_OVERLAPPING_STRIDES,
    ROPE_STRIDE_OVERFLOW,
    ROPE_BUFFER_TOO_SMALL,
    ROPE_SHAPE_MISMATCH,
    ROPE_POSITION_COUNT_MISMATCH,
    ROPE_POSITION_OVERFLOW,
    ROPE_POSITION_OUT_OF_RANGE,
    ROPE_TABLE_SHAPE,
    ROPE_TIER_UNAVAILABLE,
    ROPE_NULL_POINTER,
    ROPE_MISALIGNED_POINTER,
    ROPE_UNKNOWN_ENUM,
    ROPE_INVALID_ARGUMENT,
    ROPE_UNSUPPORTED_STRUCT_SIZE,
    ROPE_INVALID_HANDLE,
    ROPE_OVERLAPPING_BUFFERS,
    ROPE_OUT_OF_MEMORY,
    ROPE_PANIC,
    ROPE_INVALID_ENCODING_PARAMETER,
    ROPE_ENCODING_BUFFER_TOO_SHORT,
    ROPE_ROW_STRIDE_TOO_SMALL,
    ROPE_ENCODING_SIZE_OVERFLOW,
    ROPE_RAGGED_TABLE,
    ROPE_BEYOND_TRAINED_LENGTH,
    ROPE_RELATIVE_INDEX_OVERFLOW,
    ROPE_INVALID_MROPE_SECTION,
    ROPE_UNSUPPORTED_SCALING,
    ROPE_INVALID_POSITION_LAYOUT,
    ROPE_NORM_WEIGHT_LENGTH,
    ROPE_INVALID_NORM_EPS,
    ROPE_OVERLAPPING_HEAD_SETS,
    ROPE_UNSUPPORTED_TYPE_PAIR,
    ROPE_PARTIAL_QUANT_BLOCK,
    ROPE_INVALID_INDPTR,
    ROPE_SLOT_MAPPING_LENGTH,
    ROPE_SLOT_OUT_OF_RANGE,
    ROPE_BLOCK_OUT_OF_RANGE,
    ROPE_BLOCK_TABLE_TOO_SHORT,
    ROPE_DUPLICATE_SLOT,
    ROPE_INVALID_BLOCK_SIZE,
];

/// The status of a Rust error.
pub(crate) fn from_error(e: RopeError) -> rope_status {
    match e {
        RopeError::ZeroHeadDim => ROPE_ZERO_HEAD_DIM,
        RopeError::InvalidRotaryDim { .. } => ROPE_INVALID_ROTARY_DIM,
        RopeError::RotaryDimExceedsHeadDim { .. } => ROPE_ROTARY_DIM_EXCEEDS_HEAD_DIM,
        RopeError::RotaryDimTooLarge { .. } => ROPE_ROTARY_DIM_TOO_LARGE,
        RopeError::InvalidTheta => ROPE_INVALID_THETA,
        RopeError::InvalidScalingParameter { .. } => ROPE_INVALID_SCALING_PARAMETER,
        RopeError::InvFreqLength { .. } => ROPE_INV_FREQ_LENGTH,
        RopeError::OverlappingStrides { .. } => ROPE_OVERLAPPING_STRIDES,
        RopeError::StrideOverflow { .. } => ROPE_STRIDE_OVERFLOW,
        RopeError::BufferTooShort { .. } => ROPE_BUFFER_TOO_SMALL,
        RopeError::ShapeMismatch { .. } => ROPE_SHAPE_MISMATCH,
        RopeError::PositionCountMismatch { .. } => ROPE_POSITION_COUNT_MISMATCH,
        RopeError::PositionOverflow => ROPE_POSITION_OVERFLOW,
        RopeError::OutOfMemory { .. } => ROPE_OUT_OF_MEMORY,
        RopeError::PositionOutOfRange { .. } => ROPE_POSITION_OUT_OF_RANGE,
        RopeError::TableShape => ROPE_TABLE_SHAPE,
        RopeError::TierUnavailable => ROPE_TIER_UNAVAILABLE,
        RopeError::InvalidEncodingParameter { .. } => ROPE_INVALID_ENCODING_PARAMETER,
        RopeError::EncodingBufferTooShort { .. } => ROPE_ENCODING_BUFFER_TOO_SHORT,
        RopeError::RowStrideTooSmall { .. } => ROPE_ROW_STRIDE_TOO_SMALL,
        RopeError::EncodingSizeOverflow { .. } => ROPE_ENCODING_SIZE_OVERFLOW,
        RopeError::RaggedTable { .. } => ROPE_RAGGED_TABLE,
        RopeError::BeyondTrainedLength { .. } => ROPE_BEYOND_TRAINED_LENGTH,
        RopeError::RelativeIndexOverflow { .. } => ROPE_RELATIVE_INDEX_OVERFLOW,
        RopeError::InvalidMropeSection { .. } => ROPE_INVALID_MROPE_SECTION,
        RopeError::UnsupportedScaling { .. } => ROPE_UNSUPPORTED_SCALING,
        RopeError::InvalidPositionLayout { .. } => ROPE_INVALID_POSITION_LAYOUT,
        RopeError::NormWeightLength { .. } => ROPE_NORM_WEIGHT_LENGTH,
        RopeError::InvalidNormEps => ROPE_INVALID_NORM_EPS,
        RopeError::OverlappingHeadSets { .. } => ROPE_OVERLAPPING_HEAD_SETS,
        RopeError::UnsupportedTypePair { .. } => ROPE_UNSUPPORTED_TYPE_PAIR,
        RopeError::PartialQuantBlock { .. } => ROPE_PARTIAL_QUANT_BLOCK,
        RopeError::InvalidIndptr { .. } => ROPE_INVALID_INDPTR,
        RopeError::SlotMappingLength { .. } => ROPE_SLOT_MAPPING_LENGTH,
        RopeError::SlotOutOfRange { .. } => ROPE_SLOT_OUT_OF_RANGE,
        RopeError::BlockOutOfRange { .. } => ROPE_BLOCK_OUT_OF_RANGE,
        RopeError::BlockTableTooShort { .. } => ROPE_BLOCK_TABLE_TOO_SHORT,
        RopeError::DuplicateSlot { .. } => ROPE_DUPLICATE_SLOT,
        RopeError::InvalidBlockSize { .. } => ROPE_INVALID_BLOCK_SIZE,
        // `RopeError` is `#[non_exhaustive]`: a kind added to the Rust crate before the C
        // ABI names it is reported generically.
        _ => ROPE_INVALID_ARGUMENT,
    }
}

/// `(name, message)` of a status, or `None` for a value that is no status.
pub(crate) fn describe(status: rope_status) -> Option<(&'static str, &'static str)> {
    // Each string ends in NUL: they are handed to C as they are.
    Some(match status {
        ROPE_OK => ("ROPE_OK\0", "success\0"),
        ROPE_ZERO_HEAD_DIM => ("ROPE_ZERO_HEAD_DIM\0", "head_dim must be > 0\0"),
        ROPE_INVALID_ROTARY_DIM => ("ROPE_INVALID_ROTARY_DIM\0", "rotary_dim must be even and > 0\0"),
        ROPE_ROTARY_DIM_EXCEEDS_HEAD_DIM => {
            ("ROPE_ROTARY_DIM_EXCEEDS_HEAD_DIM\0", "rotary_dim exceeds head_dim\0")
        }
        ROPE_ROTARY_DIM_TOO_LARGE => {
            ("ROPE_ROTARY_DIM_TOO_LARGE\0", "rotary_dim exceeds the supported maximum of 512\0")
        }
        ROPE_INVALID_THETA => ("ROPE_INVALID_THETA\0", "theta must be finite and > 0\0"),
        ROPE_INVALID_SCALING_PARAMETER => {
            ("ROPE_INVALID_SCALING_PARAMETER\0", "a rope scaling parameter is out of its domain\0")
        }
        ROPE_INV_FREQ_LENGTH => {
            ("ROPE_INV_FREQ_LENGTH\0", "the inv_freq table must have rotary_dim / 2 entries\0")
        }
        ROPE_OVERLAPPING_STRIDES => {
            ("ROPE_OVERLAPPING_STRIDES\0", "the strides of a view make heads overlap\0")
        }
        ROPE_STRIDE_OVERFLOW => ("ROPE_STRIDE_OVERFLOW\0", "the extent of a view overflows size_t\0"),
        ROPE_BUFFER_TOO_SMALL => ("ROPE_BUFFER_TOO_SMALL\0", "a buffer is shorter than the call needs\0"),
        ROPE_SHAPE_MISMATCH => ("ROPE_SHAPE_MISMATCH\0", "tensor shapes of the call do not match\0"),
        ROPE_POSITION_COUNT_MISMATCH => {
            ("ROPE_POSITION_COUNT_MISMATCH\0", "position_ids_len differs from the number of tokens\0")
        }
        ROPE_POSITION_OVERFLOW => {
            ("ROPE_POSITION_OVERFLOW\0", "the last position does not fit in uint32_t\0")
        }
        ROPE_POSITION_OUT_OF_RANGE => {
            ("ROPE_POSITION_OUT_OF_RANGE\0", "a position is past the end of the cos/sin table\0")
        }
        ROPE_TABLE_SHAPE => {
            ("ROPE_TABLE_SHAPE\0", "the cos/sin table length is not a multiple of rotary_dim / 2\0")
        }
        ROPE_TIER_UNAVAILABLE => {
            ("ROPE_TIER_UNAVAILABLE\0", "the tier is not available in this build or on this CPU\0")
        }
        ROPE_NULL_POINTER => ("ROPE_NULL_POINTER\0", "a required pointer is NULL\0"),
        ROPE_MISALIGNED_POINTER => ("ROPE_MISALIGNED_POINTER\0", "a pointer is not aligned for its type\0"),
        ROPE_UNKNOWN_ENUM => ("ROPE_UNKNOWN_ENUM\0", "an enum argument holds an unknown value\0"),
        ROPE_INVALID_ARGUMENT => ("ROPE_INVALID_ARGUMENT\0", "invalid argument\0"),
        ROPE_UNSUPPORTED_STRUCT_SIZE => {
            ("ROPE_UNSUPPORTED_STRUCT_SIZE\0", "struct_size is not a size this library knows\0")
        }
        ROPE_INVALID_HANDLE => {
            ("ROPE_INVALID_HANDLE\0", "the rope_t pointer is not a live handle of this kind\0")
        }
        ROPE_OVERLAPPING_BUFFERS => {
            ("ROPE_OVERLAPPING_BUFFERS\0", "buffers of the call overlap where one is written\0")
        }
        ROPE_OUT_OF_MEMORY => ("ROPE_OUT_OF_MEMORY\0", "allocation failed or no allocator\0"),
        ROPE_PANIC => ("ROPE_PANIC\0", "a panic was caught at the C boundary (library bug)\0"),
        ROPE_INVALID_ENCODING_PARAMETER => {
            ("ROPE_INVALID_ENCODING_PARAMETER\0", "a positional encoding parameter is out of its domain\0")
        }
        ROPE_ENCODING_BUFFER_TOO_SHORT => {
            ("ROPE_ENCODING_BUFFER_TOO_SHORT\0", "an encoding buffer is shorter than its shape needs\0")
        }
        ROPE_ROW_STRIDE_TOO_SMALL => {
            ("ROPE_ROW_STRIDE_TOO_SMALL\0", "row_stride is smaller than the row length\0")
        }
        ROPE_ENCODING_SIZE_OVERFLOW => {
            ("ROPE_ENCODING_SIZE_OVERFLOW\0", "the extent of an encoding buffer overflows size_t\0")
        }
        ROPE_RAGGED_TABLE => ("ROPE_RAGGED_TABLE\0", "the table length is not a whole number of rows\0"),
        ROPE_BEYOND_TRAINED_LENGTH => (
            "ROPE_BEYOND_TRAINED_LENGTH\0",
            "a position is past the learned table: the model cannot extrapolate beyond its trained length\0",
        ),
        ROPE_RELATIVE_INDEX_OVERFLOW => {
            ("ROPE_RELATIVE_INDEX_OVERFLOW\0", "a relative position index does not fit in int32_t\0")
        }
        ROPE_INVALID_MROPE_SECTION => {
            ("ROPE_INVALID_MROPE_SECTION\0", "mrope_section does not fit the rotary pairs of the handle\0")
        }
        ROPE_UNSUPPORTED_SCALING => {
            ("ROPE_UNSUPPORTED_SCALING\0", "the operation does not support the handle's rope scaling\0")
        }
        ROPE_INVALID_POSITION_LAYOUT => {
            ("ROPE_INVALID_POSITION_LAYOUT\0", "token types and grids do not describe one sequence\0")
        }
        ROPE_NORM_WEIGHT_LENGTH => {
            ("ROPE_NORM_WEIGHT_LENGTH\0", "a QK-norm weight does not have head_dim entries\0")
        }
        ROPE_INVALID_NORM_EPS => ("ROPE_INVALID_NORM_EPS\0", "the QK-norm eps must be finite and >= 0\0"),
        ROPE_OVERLAPPING_HEAD_SETS => {
            ("ROPE_OVERLAPPING_HEAD_SETS\0", "two head sets of the qkv buffer share elements\0")
        }
        ROPE_UNSUPPORTED_TYPE_PAIR => (
            "ROPE_UNSUPPORTED_TYPE_PAIR\0",
            "the destination dtype cannot be produced from the input dtype (in place needs the same type)\0",
        ),
        ROPE_PARTIAL_QUANT_BLOCK => {
            ("ROPE_PARTIAL_QUANT_BLOCK\0", "a q8_0 destination needs head_dim to be a multiple of 32\0")
        }
        ROPE_INVALID_INDPTR => (
            "ROPE_INVALID_INDPTR\0",
            "indptr must run non-decreasing from 0 to tokens, with one seq_start per sequence\0",
        ),
        ROPE_SLOT_MAPPING_LENGTH => {
            ("ROPE_SLOT_MAPPING_LENGTH\0", "slot_mapping_len differs from the number of tokens\0")
        }
        ROPE_SLOT_OUT_OF_RANGE => ("ROPE_SLOT_OUT_OF_RANGE\0", "a token's cache slot is outside the cache\0"),
        ROPE_BLOCK_OUT_OF_RANGE => {
            ("ROPE_BLOCK_OUT_OF_RANGE\0", "a block_table entry is at or past num_blocks\0")
        }
        ROPE_BLOCK_TABLE_TOO_SHORT => {
            ("ROPE_BLOCK_TABLE_TOO_SHORT\0", "the block table has no block for a token's position\0")
        }
        ROPE_DUPLICATE_SLOT => ("ROPE_DUPLICATE_SLOT\0", "two tokens of the call map to one cache slot\0"),
        ROPE_INVALID_BLOCK_SIZE => {
            ("ROPE_INVALID_BLOCK_SIZE\0", "a block table needs a cache layout with block_size > 0\0")
        }
        _ => return None,
    })
}
