//! The one error type of the crate.

use core::fmt;

/// Which tensor of a call an error refers to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Operand {
    /// The query tensor (or the only tensor of a single-tensor call).
    Q,
    /// The key tensor.
    K,
    /// The output of the query tensor in an out-of-place call.
    QOut,
    /// The output of the key tensor in an out-of-place call.
    KOut,
    /// A caller-provided cos/sin table or cache.
    CosSin,
    /// The value tensor of an attention-layer call ([`Rope::apply_layer`]): its head set
    /// in the fused buffer.
    ///
    /// [`Rope::apply_layer`]: crate::Rope::apply_layer
    V,
    /// The destination of the value tensor of an attention-layer call (a tensor or cache).
    VOut,
}

/// Every way a call can fail. A call that returns an error has written nothing.
///
/// The enum is `#[non_exhaustive]`: new scaling methods and encodings add variants.
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub enum RopeError {
    /// `head_dim` is 0.
    ZeroHeadDim,
    /// `rotary_dim` is 0 or odd: RoPE rotates pairs of dimensions. For 2-D vision RoPE
    /// ([`VisionRope`](crate::VisionRope)) also when it is not a multiple of 4 (each of the
    /// two axes rotates `rotary_dim / 4` pairs).
    InvalidRotaryDim {
        /// The rejected value.
        rotary_dim: usize,
    },
    /// `rotary_dim` is larger than `head_dim`.
    RotaryDimExceedsHeadDim {
        /// The rejected value.
        rotary_dim: usize,
        /// The configured head dimension.
        head_dim: usize,
    },
    /// `rotary_dim` is larger than [`MAX_ROTARY_DIM`](crate::MAX_ROTARY_DIM), the size of
    /// the on-stack frequency and cos/sin buffers.
    RotaryDimTooLarge {
        /// The rejected value.
        rotary_dim: usize,
        /// The largest supported value.
        max: usize,
    },
    /// `theta` (the RoPE base) is not finite or not > 0, or so small that an `inv_freq`
    /// overflows f64.
    InvalidTheta,
    /// A scaling parameter is out of its domain (not finite, ≤ 0, or inconsistent with
    /// another parameter). `name` is the parameter's Hugging Face name.
    InvalidScalingParameter {
        /// The parameter, e.g. `"factor"`, `"beta_fast"`, `"long_factor"`.
        name: &'static str,
    },
    /// `head_stride` or `token_stride` make two (token, head) rows share elements, or
    /// a stride smaller than `head_dim` on a dimension with more than one entry.
    OverlappingStrides {
        /// The tensor.
        operand: Operand,
    },
    /// The view's extent does not fit in `usize`.
    StrideOverflow {
        /// The tensor.
        operand: Operand,
    },
    /// The buffer is shorter than the view it is declared with.
    BufferTooShort {
        /// The tensor.
        operand: Operand,
        /// Elements the view needs.
        needed: usize,
        /// Elements the buffer has.
        len: usize,
    },
    /// Two tensors of one call disagree on the number of tokens, or an output's shape
    /// differs from its input's.
    ShapeMismatch {
        /// The tensor that disagrees with the query tensor (or with its input).
        operand: Operand,
    },
    /// `position_ids` has a length other than the number of tokens.
    PositionCountMismatch {
        /// Number of tokens in the tensors.
        tokens: usize,
        /// Length of `position_ids`.
        positions: usize,
    },
    /// `start + tokens - 1` does not fit in a `u32` position.
    PositionOverflow,
    /// An allocation failed: only `Rope::build_cache` allocates
    /// (feature `alloc`), and reports a cache larger than the allocator can give instead of
    /// aborting the process.
    OutOfMemory {
        /// Bytes requested for one of the two arrays (cos or sin).
        bytes: usize,
    },
    /// A position is at or past the end of the cos/sin table or cache.
    PositionOutOfRange {
        /// The offending position.
        position: u32,
        /// Rows in the table (valid positions are `0..rows`).
        rows: usize,
    },
    /// A cos/sin table whose row width is not `rotary_dim / 2`, or whose `cos`/`sin`
    /// slices are not `rows * rotary_dim / 2` long.
    TableShape,
    /// The requested tier is not available on this CPU or in this build.
    TierUnavailable,
    /// A caller-supplied `inv_freq` table
    /// ([`Rope::with_hf_inv_freq`](crate::Rope::with_hf_inv_freq)) whose length is not
    /// `rotary_dim / 2`.
    InvFreqLength {
        /// `rotary_dim / 2`.
        expected: usize,
        /// Length of the caller's table.
        len: usize,
    },

    // ---- Multimodal RoPE (`MRope`, `VisionRope`, `MRopeIndex`) ----
    /// An `mrope_section` `[t, h, w]` that does not fit the rotary pairs: its sum is not
    /// `rotary_dim / 2`, or (interleaved) `3 * h > pairs + 1` or `3 * w > pairs`, so that the
    /// h or w frequencies would run past the last pair (see [`MRopeStyle`](crate::MRopeStyle)).
    InvalidMropeSection {
        /// The rejected section `[t, h, w]`, in pairs.
        mrope_section: [usize; 3],
        /// `rotary_dim / 2`.
        pairs: usize,
    },
    /// A scaling the operation does not combine with: any scaling, for 2-D vision RoPE
    /// (vision encoders have none). MRoPE combines with every scaling.
    UnsupportedScaling {
        /// The operation, e.g. `"mrope"`, `"vision"`.
        operation: &'static str,
        /// The scaling's Hugging Face `rope_type`, e.g. `"dynamic"`.
        scaling: &'static str,
    },
    /// The token types and grids given to [`MRopeIndex`](crate::MRopeIndex) do not describe
    /// one sequence (a block shorter than its grid, a grid left over, an unknown type, ...).
    InvalidPositionLayout {
        /// What is wrong.
        reason: &'static str,
    },

    // ---- Positional encodings other than RoPE (`crate::encodings`) ----
    /// A parameter of a positional encoding is out of its domain.
    InvalidEncodingParameter {
        /// The parameter, e.g. `"dim"`, `"base"`, `"num_buckets"`, `"slopes"`.
        name: &'static str,
        /// The rule it breaks, e.g. `"must be > 0"`.
        requirement: &'static str,
    },
    /// A buffer of an encoding call is shorter than its shape needs.
    EncodingBufferTooShort {
        /// The buffer, e.g. `"embeddings"`, `"table"`, `"scores"`, `"out"`.
        buffer: &'static str,
        /// Elements the shape needs.
        needed: usize,
        /// Elements the buffer has.
        len: usize,
    },
    /// `row_stride` is smaller than the row length while there is more than one row, so
    /// rows would share elements.
    RowStrideTooSmall {
        /// The buffer.
        buffer: &'static str,
        /// The rejected stride, in elements.
        row_stride: usize,
        /// Elements per row.
        row_len: usize,
    },
    /// The extent of a buffer's shape does not fit in `usize`.
    EncodingSizeOverflow {
        /// The buffer.
        buffer: &'static str,
    },
    /// A table whose length is not a whole number of rows.
    RaggedTable {
        /// Elements in the table.
        len: usize,
        /// Elements per row.
        row_len: usize,
    },
    /// A learned absolute position embedding was asked for a position at or past the end
    /// of its table: the model cannot extrapolate beyond the length it was trained on.
    BeyondTrainedLength {
        /// The offending position (the largest one of the call).
        position: u32,
        /// The trained length (rows of the table; valid positions are `0..max_positions`).
        max_positions: usize,
    },
    /// A relative position index of the call does not fit in `i32`.
    RelativeIndexOverflow {
        /// The relative position whose index overflows.
        relative_position: i64,
    },

    // ---- Fused QK-norm + RoPE (`Rope::apply_qk_norm`) ----
    /// A per-head norm weight whose length is not `head_dim`.
    NormWeightLength {
        /// The tensor the weight is for ([`Operand::Q`] or [`Operand::K`]).
        operand: Operand,
        /// `head_dim`.
        expected: usize,
        /// Length of the weight.
        len: usize,
    },
    /// The norm's `eps` is not finite or is negative.
    InvalidNormEps,

    // ---- Attention-layer calls (`Rope::apply_layer`: head sets, destinations, batches) ----
    /// Two head sets of the fused buffer share an element (decided exactly on the elements
    /// the sets touch, not by address range). `a` comes before `b` in q, k, v order.
    OverlappingHeadSets {
        /// The first set ([`Operand::Q`] or [`Operand::K`]).
        a: Operand,
        /// The second set ([`Operand::K`] or [`Operand::V`]).
        b: Operand,
    },
    /// An input/output element-type pair the call cannot do: `Dest::InPlace` with an output
    /// type other than the input's (in place means the input's own elements).
    UnsupportedTypePair {
        /// The destination ([`Operand::QOut`], [`Operand::KOut`] or [`Operand::VOut`]).
        operand: Operand,
    },
    /// A `q8_0` destination whose `head_dim` is not a multiple of 32: a head row must be a
    /// whole number of ggml `block_q8_0` blocks.
    PartialQuantBlock {
        /// The destination.
        operand: Operand,
        /// The head dimension.
        head_dim: usize,
    },
    /// A ragged batch whose `indptr` (FlashInfer `append_indptr`) is empty, does not start at
    /// 0, decreases, or does not end at the call's token count; or whose per-sequence `start`
    /// has another length than `indptr.len() - 1`.
    InvalidIndptr {
        /// What is wrong.
        reason: &'static str,
    },
    /// A vLLM `slot_mapping` whose length is not the call's token count.
    SlotMappingLength {
        /// The destination.
        operand: Operand,
        /// Tokens of the call.
        tokens: usize,
        /// Entries of `slot_mapping`.
        len: usize,
    },
    /// A token's cache slot is outside the cache (`slot >= num_blocks * block_size`, or a
    /// `slot_mapping` entry below -1).
    SlotOutOfRange {
        /// The destination.
        operand: Operand,
        /// The token (index in the call).
        token: usize,
        /// The slot.
        slot: i64,
        /// Slots of the cache (`num_blocks * block_size`).
        slots: usize,
    },
    /// A `block_table` entry names a block outside the cache (`block >= num_blocks`).
    BlockOutOfRange {
        /// The destination.
        operand: Operand,
        /// The token (index in the call) whose position reads the entry.
        token: usize,
        /// The block number read from the table.
        block: u32,
        /// Blocks of the cache.
        num_blocks: usize,
    },
    /// A `block_table` too short for a token's position: `position / block_size >=
    /// blocks_per_seq`, or the table has fewer than `(sequence + 1) * blocks_per_seq` entries.
    BlockTableTooShort {
        /// The destination.
        operand: Operand,
        /// The sequence of the batch.
        sequence: usize,
        /// The position that needs a block.
        position: u32,
    },
    /// Two tokens of the call would write one cache row (the same slot).
    DuplicateSlot {
        /// The destination.
        operand: Operand,
        /// The later of the two tokens (index in the call).
        token: usize,
        /// The slot both map to.
        slot: usize,
    },

    // ---- ggml q8_0 blocks ----
    /// [`quantize_row_q8_0`](crate::quantize_row_q8_0): the values are not exactly 32 per
    /// output block.
    QuantizeLength {
        /// Values given.
        values: usize,
        /// Blocks given (`values` must be `32 * blocks`).
        blocks: usize,
    },

    /// A cache destination addressed by a block table ([`Slots::BlockTable`](crate::Slots))
    /// whose [`CacheLayout`](crate::CacheLayout) has `block_size` 0 (no position maps to a
    /// block).
    InvalidBlockSize {
        /// The destination.
        operand: Operand,
    },
}

impl fmt::Display for RopeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            RopeError::ZeroHeadDim => f.write_str("head_dim must be > 0"),
            RopeError::InvalidRotaryDim { rotary_dim } => {
                write!(f, "rotary_dim must be even and > 0, got {rotary_dim}")
            }
            RopeError::RotaryDimExceedsHeadDim { rotary_dim, head_dim } => {
                write!(f, "rotary_dim {rotary_dim} exceeds head_dim {head_dim}")
            }
            RopeError::RotaryDimTooLarge { rotary_dim, max } => {
                write!(f, "rotary_dim {rotary_dim} exceeds the supported maximum {max}")
            }
            RopeError::InvalidTheta => f.write_str("theta must be finite and > 0"),
            RopeError::InvalidScalingParameter { name } => {
                write!(f, "invalid rope scaling parameter `{name}`")
            }
            RopeError::OverlappingStrides { operand } => {
                write!(f, "{operand:?}: strides make heads overlap")
            }
            RopeError::StrideOverflow { operand } => {
                write!(f, "{operand:?}: view extent overflows usize")
            }
            RopeError::BufferTooShort { operand, needed, len } => {
                write!(f, "{operand:?}: buffer has {len} elements, view needs {needed}")
            }
            RopeError::ShapeMismatch { operand } => {
                write!(f, "{operand:?}: shape does not match the other tensors of the call")
            }
            RopeError::PositionCountMismatch { tokens, positions } => {
                write!(f, "{positions} position_ids for {tokens} tokens")
            }
            RopeError::PositionOverflow => f.write_str("start position + tokens overflows u32"),
            RopeError::OutOfMemory { bytes } => write!(f, "allocation of {bytes} bytes failed"),
            RopeError::PositionOutOfRange { position, rows } => {
                write!(f, "position {position} is outside the cos/sin table of {rows} rows")
            }
            RopeError::TableShape => {
                f.write_str("cos/sin table row width is not rotary_dim / 2 or slices are short")
            }
            RopeError::TierUnavailable => f.write_str("tier not available on this CPU"),
            RopeError::InvFreqLength { expected, len } => {
                write!(f, "inv_freq table has {len} entries, expected rotary_dim / 2 = {expected}")
            }

            // ---- Multimodal RoPE ----
            RopeError::InvalidMropeSection { mrope_section, pairs } => write!(
                f,
                "mrope_section {mrope_section:?} does not fit rotary_dim / 2 = {pairs} pairs \
                 (it must sum to the pairs; interleaved: 3 * h <= pairs + 1, 3 * w <= pairs)"
            ),
            RopeError::UnsupportedScaling { operation, scaling } => {
                write!(f, "{operation} does not support rope scaling `{scaling}`")
            }
            RopeError::InvalidPositionLayout { reason } => write!(f, "mrope position ids: {reason}"),

            // ---- Positional encodings other than RoPE ----
            RopeError::InvalidEncodingParameter { name, requirement } => {
                write!(f, "invalid positional encoding parameter `{name}`: {requirement}")
            }
            RopeError::EncodingBufferTooShort { buffer, needed, len } => {
                write!(f, "{buffer}: buffer has {len} elements, shape needs {needed}")
            }
            RopeError::RowStrideTooSmall { buffer, row_stride, row_len } => {
                write!(f, "{buffer}: row_stride {row_stride} is smaller than the row length {row_len}")
            }
            RopeError::EncodingSizeOverflow { buffer } => write!(f, "{buffer}: shape extent overflows usize"),
            RopeError::RaggedTable { len, row_len } => {
                write!(f, "table of {len} elements is not a whole number of rows of {row_len}")
            }
            RopeError::BeyondTrainedLength { position, max_positions } => write!(
                f,
                "position {position} is beyond the trained length of {max_positions} positions: \
                 a learned absolute position embedding cannot extrapolate beyond the length it was trained on"
            ),
            RopeError::RelativeIndexOverflow { relative_position } => {
                write!(f, "the index of relative position {relative_position} does not fit in i32")
            }

            // ---- Fused QK-norm + RoPE ----
            RopeError::NormWeightLength { operand, expected, len } => {
                write!(f, "{operand:?}: norm weight has {len} entries, expected head_dim = {expected}")
            }
            RopeError::InvalidNormEps => f.write_str("norm eps must be finite and >= 0"),

            // ---- Attention-layer calls ----
            RopeError::OverlappingHeadSets { a, b } => {
                write!(f, "head sets {a:?} and {b:?} share elements of the fused buffer")
            }
            RopeError::UnsupportedTypePair { operand } => {
                write!(f, "{operand:?}: in place needs the output type to be the input type")
            }
            RopeError::PartialQuantBlock { operand, head_dim } => {
                write!(f, "{operand:?}: q8_0 rows need head_dim % 32 == 0, got {head_dim}")
            }
            RopeError::InvalidIndptr { reason } => write!(f, "ragged batch: {reason}"),
            RopeError::SlotMappingLength { operand, tokens, len } => {
                write!(f, "{operand:?}: slot_mapping has {len} entries for {tokens} tokens")
            }
            RopeError::SlotOutOfRange { operand, token, slot, slots } => {
                write!(
                    f,
                    "{operand:?}: token {token} maps to slot {slot}, outside the cache of {slots} slots"
                )
            }
            RopeError::BlockOutOfRange { operand, token, block, num_blocks } => write!(
                f,
                "{operand:?}: token {token} maps to block {block}, outside the cache of {num_blocks} blocks"
            ),
            RopeError::BlockTableTooShort { operand, sequence, position } => write!(
                f,
                "{operand:?}: the block table of sequence {sequence} has no block for position {position}"
            ),
            RopeError::DuplicateSlot { operand, token, slot } => {
                write!(
                    f,
                    "{operand:?}: token {token} maps to slot {slot}, already written by an earlier token"
                )
            }
            RopeError::QuantizeLength { values, blocks } => {
                write!(f, "q8_0: {values} values for {blocks} blocks of 32")
            }
            RopeError::InvalidBlockSize { operand } => {
                write!(f, "{operand:?}: a block table needs a cache layout with block_size > 0")
            }
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for RopeError {}
