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
}

/// Every way a call can fail. A call that returns an error has written nothing.
///
/// The enum is `#[non_exhaustive]`: new scaling methods and encodings add variants.
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub enum RopeError {
    /// `head_dim` is 0.
    ZeroHeadDim,
    /// `rotary_dim` is 0 or odd: RoPE rotates pairs of dimensions.
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
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for RopeError {}
