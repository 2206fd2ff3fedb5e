//! The encoding row kernels of one tier, on slices (`rope_kernels::__bench::encodings`):
//! the tier suite calls them directly.

use crate::dispatch::Tier;
use crate::element::Element;
use crate::encodings::row_kernels::{self, add_row_fn, alibi_row_fn, check_tier, kernels};
use crate::encodings::LearnedElement;
use crate::error::RopeError;

/// `x[i] = round(x[i] + pe[i])` for `i < x.len()` with the add-row kernel of `tier`
/// (`P` is `T` or `f32`, the pairs a learned table may have).
///
/// # Errors
/// [`RopeError::TierUnavailable`]; [`RopeError::EncodingBufferTooShort`] (`"pe"`) if
/// `pe` is shorter than `x`. Nothing is written then.
pub fn add_row<T: Element, P: LearnedElement<T>>(tier: Tier, x: &mut [T], pe: &[P]) -> Result<(), RopeError> {
    let k = kernels(Some(check_tier(tier)?));
    if pe.len() < x.len() {
        return Err(RopeError::EncodingBufferTooShort { buffer: "pe", needed: x.len(), len: pe.len() });
    }
    row_kernels::add_row(add_row_fn::<T, P>(k), x, &pe[..x.len()]);
    Ok(())
}

/// Adds the ALiBi bias of keys at distances `first_distance + j` to `row[j]` with the
/// kernel of `tier` (`symmetric`: `-(slope * |d|)`, else `slope * d`).
///
/// # Errors
/// [`RopeError::TierUnavailable`]; [`RopeError::PositionOverflow`] if
/// `first_distance + row.len()` overflows `i64`. Nothing is written then.
pub fn alibi_row(
    tier: Tier,
    row: &mut [f32],
    slope: f32,
    first_distance: i64,
    symmetric: bool,
) -> Result<(), RopeError> {
    let k = kernels(Some(check_tier(tier)?));
    let n = i64::try_from(row.len()).map_err(|_| RopeError::PositionOverflow)?;
    first_distance.checked_add(n).ok_or(RopeError::PositionOverflow)?;
    row_kernels::alibi_row(alibi_row_fn(k), row, slope, first_distance, symmetric);
    Ok(())
}
