//! The statuses of the header and the judgement of one call: its status against the
//! defects of its arguments and the Rust API's result.

use std::ffi::CStr;
use std::fmt::Write as _;

use rope_kernels::dispatch;
use rope_kernels::RopeError;
use rope_kernels_capi::{self as c, rope_status};

use super::CapiCase;

/// Every status of the header, in numeric order.
pub const ALL_STATUSES: [rope_status; 43] = [
    c::ROPE_OK,
    c::ROPE_ZERO_HEAD_DIM,
    c::ROPE_INVALID_ROTARY_DIM,
    c::ROPE_ROTARY_DIM_EXCEEDS_HEAD_DIM,
    c::ROPE_ROTARY_DIM_TOO_LARGE,
    c::ROPE_INVALID_THETA,
    c::ROPE_INVALID_SCALING_PARAMETER,
    c::ROPE_INV_FREQ_LENGTH,
    c::ROPE_OVERLAPPING_STRIDES,
    c::ROPE_STRIDE_OVERFLOW,
    c::ROPE_BUFFER_TOO_SMALL,
    c::ROPE_SHAPE_MISMATCH,
    c::ROPE_POSITION_COUNT_MISMATCH,
    c::ROPE_POSITION_OVERFLOW,
    c::ROPE_POSITION_OUT_OF_RANGE,
    c::ROPE_TABLE_SHAPE,
    c::ROPE_TIER_UNAVAILABLE,
    c::ROPE_NULL_POINTER,
    c::ROPE_MISALIGNED_POINTER,
    c::ROPE_UNKNOWN_ENUM,
    c::ROPE_INVALID_ARGUMENT,
    c::ROPE_UNSUPPORTED_STRUCT_SIZE,
    c::ROPE_INVALID_HANDLE,
    c::ROPE_OVERLAPPING_BUFFERS,
    c::ROPE_OUT_OF_MEMORY,
    c::ROPE_PANIC,
    c::ROPE_INVALID_ENCODING_PARAMETER,
    c::ROPE_ENCODING_BUFFER_TOO_SHORT,
    c::ROPE_ROW_STRIDE_TOO_SMALL,
    c::ROPE_ENCODING_SIZE_OVERFLOW,
    c::ROPE_RAGGED_TABLE,
    c::ROPE_BEYOND_TRAINED_LENGTH,
    c::ROPE_RELATIVE_INDEX_OVERFLOW,
    c::ROPE_OVERLAPPING_HEAD_SETS,
    c::ROPE_UNSUPPORTED_TYPE_PAIR,
    c::ROPE_PARTIAL_QUANT_BLOCK,
    c::ROPE_INVALID_INDPTR,
    c::ROPE_SLOT_MAPPING_LENGTH,
    c::ROPE_SLOT_OUT_OF_RANGE,
    c::ROPE_BLOCK_OUT_OF_RANGE,
    c::ROPE_BLOCK_TABLE_TOO_SHORT,
    c::ROPE_DUPLICATE_SLOT,
    c::ROPE_INVALID_BLOCK_SIZE,
];

/// The status the header documents for a Rust error (one per `RopeError` kind).
pub fn status_of(e: RopeError) -> rope_status {
    match e {
        RopeError::ZeroHeadDim => c::ROPE_ZERO_HEAD_DIM,
        RopeError::InvalidRotaryDim { .. } => c::ROPE_INVALID_ROTARY_DIM,
        RopeError::RotaryDimExceedsHeadDim { .. } => c::ROPE_ROTARY_DIM_EXCEEDS_HEAD_DIM,
        RopeError::RotaryDimTooLarge { .. } => c::ROPE_ROTARY_DIM_TOO_LARGE,
        RopeError::InvalidTheta => c::ROPE_INVALID_THETA,
        RopeError::InvalidScalingParameter { .. } => c::ROPE_INVALID_SCALING_PARAMETER,
        RopeError::InvFreqLength { .. } => c::ROPE_INV_FREQ_LENGTH,
        RopeError::OverlappingStrides { .. } => c::ROPE_OVERLAPPING_STRIDES,
        RopeError::StrideOverflow { .. } => c::ROPE_STRIDE_OVERFLOW,
        RopeError::BufferTooShort { .. } => c::ROPE_BUFFER_TOO_SMALL,
        RopeError::ShapeMismatch { .. } => c::ROPE_SHAPE_MISMATCH,
        RopeError::PositionCountMismatch { .. } => c::ROPE_POSITION_COUNT_MISMATCH,
        RopeError::PositionOverflow => c::ROPE_POSITION_OVERFLOW,
        RopeError::PositionOutOfRange { .. } => c::ROPE_POSITION_OUT_OF_RANGE,
        RopeError::TableShape => c::ROPE_TABLE_SHAPE,
        RopeError::TierUnavailable => c::ROPE_TIER_UNAVAILABLE,
        RopeError::InvalidEncodingParameter { .. } => c::ROPE_INVALID_ENCODING_PARAMETER,
        RopeError::EncodingBufferTooShort { .. } => c::ROPE_ENCODING_BUFFER_TOO_SHORT,
        RopeError::RowStrideTooSmall { .. } => c::ROPE_ROW_STRIDE_TOO_SMALL,
        RopeError::EncodingSizeOverflow { .. } => c::ROPE_ENCODING_SIZE_OVERFLOW,
        RopeError::RaggedTable { .. } => c::ROPE_RAGGED_TABLE,
        RopeError::BeyondTrainedLength { .. } => c::ROPE_BEYOND_TRAINED_LENGTH,
        RopeError::RelativeIndexOverflow { .. } => c::ROPE_RELATIVE_INDEX_OVERFLOW,
        RopeError::OverlappingHeadSets { .. } => c::ROPE_OVERLAPPING_HEAD_SETS,
        RopeError::UnsupportedTypePair { .. } => c::ROPE_UNSUPPORTED_TYPE_PAIR,
        RopeError::PartialQuantBlock { .. } => c::ROPE_PARTIAL_QUANT_BLOCK,
        RopeError::InvalidIndptr { .. } => c::ROPE_INVALID_INDPTR,
        RopeError::SlotMappingLength { .. } => c::ROPE_SLOT_MAPPING_LENGTH,
        RopeError::SlotOutOfRange { .. } => c::ROPE_SLOT_OUT_OF_RANGE,
        RopeError::BlockOutOfRange { .. } => c::ROPE_BLOCK_OUT_OF_RANGE,
        RopeError::BlockTableTooShort { .. } => c::ROPE_BLOCK_TABLE_TOO_SHORT,
        RopeError::DuplicateSlot { .. } => c::ROPE_DUPLICATE_SLOT,
        RopeError::InvalidBlockSize { .. } => c::ROPE_INVALID_BLOCK_SIZE,
        _ => c::ROPE_INVALID_ARGUMENT,
    }
}

/// The status of a Rust result.
pub fn status<T>(r: &Result<T, RopeError>) -> rope_status {
    r.as_ref().err().map_or(c::ROPE_OK, |e| status_of(*e))
}

/// What a case did, for the checks' messages and the statistics of the tests.
pub struct Ctx<'a> {
    case: &'a CapiCase,
    /// `(call, status)` of every call so far.
    pub calls: Vec<(&'static str, rope_status)>,
}

impl<'a> Ctx<'a> {
    pub fn new(case: &'a CapiCase) -> Self {
        Ctx { case, calls: Vec::new() }
    }

    pub fn describe(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "tier {}; calls so far {:?}", dispatch::active_tier(), self.calls);
        let _ = write!(s, "case {:?}", self.case);
        s
    }

    /// Checks the status `s` of `call` against the defects of its arguments and the Rust
    /// API's status for the same call (`None` when it cannot be formed: then there is a
    /// defect). Returns whether the call succeeded.
    pub fn judge(
        &mut self,
        call: &'static str,
        s: rope_status,
        defects: &[rope_status],
        rust: Option<rope_status>,
    ) -> bool {
        self.calls.push((call, s));
        assert!(ALL_STATUSES.contains(&s), "{call}: {s} is no status of the header\n{}", self.describe());
        assert_ne!(s, c::ROPE_PANIC, "{call}: a panic was caught at the boundary\n{}", self.describe());
        // SAFETY: rope_status_str/_name return static NUL-terminated strings for any value.
        let (msg, name) =
            unsafe { (CStr::from_ptr(c::rope_status_str(s)), CStr::from_ptr(c::rope_status_name(s))) };
        assert!(
            !msg.is_empty() && msg != c"unknown rope_status" && name.to_bytes().starts_with(b"ROPE_"),
            "{call}: status {s} has message {msg:?}, name {name:?}"
        );
        if defects.is_empty() {
            let want = rust.unwrap_or_else(|| panic!("harness: {call} has no defect and no oracle"));
            assert_eq!(s, want, "{call}: status {s}, the Rust API's is {want}\n{}", self.describe());
        } else {
            assert!(
                s != c::ROPE_OK && (defects.contains(&s) || rust == Some(s)),
                "{call}: status {s}, but the arguments have the defects {defects:?} (Rust API: {rust:?})\n{}",
                self.describe()
            );
        }
        s == c::ROPE_OK
    }
}
