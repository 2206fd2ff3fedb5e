//! Positional encodings other than RoPE: the absolute encodings it replaced and the relative
//! ones it competes with.
//!
//! | encoding | acts on | entry point | reference |
//! |---|---|---|---|
//! | sinusoidal absolute | embeddings `[tokens][dim]` | [`Sinusoidal`] | Vaswani et al. 2017; tensor2tensor, fairseq, XLM/DistilBERT |
//! | learned absolute | embeddings `[tokens][dim]` | [`LearnedPositions`] | GPT-2 `wpe`, BERT/OPT `position_embeddings` |
//! | relative indices (DeBERTa, DeBERTa-v2, T5) | an `i32` matrix `[query_len][key_len]` | [`RelativePositions`] | He et al. 2020; Raffel et al. 2020 |
//! | ALiBi | attention scores `[heads][query_len][key_len]` | [`add_alibi`], [`alibi_slopes`] | Press et al. 2022 |
//!
//! Conventions shared by every function here:
//! - Shapes are row-major; a `row_stride` is in elements (not bytes) and must be at least
//!   the row length when there is more than one row.
//! - Positions are token indices (`u32`), given as [`Positions`]: explicit
//!   `position_ids` or `start..start + tokens`. For relative encodings a [`RelativeGrid`]
//!   places query `i` at `q_offset + i` and key `j` at `k_offset + j` (KV-cache decode).
//! - Element kernels load `f32`, `f16` or `bf16`, compute in `f32` and round once on store
//!   (nearest, ties to even; a NaN result is stored as the canonical NaN of the type, see
//!   [`Element`](crate::Element)).
//! - The element kernels (the sinusoidal and learned adds, the ALiBi add, the sinusoidal
//!   cos/sin generator) run on the process-wide dispatcher's tier, like RoPE; every tier
//!   gives the scalar oracle's bits. [`Sinusoidal::with_tier`],
//!   [`LearnedPositions::with_tier`] and [`add_alibi_with_tier`] pin a tier (tests,
//!   benchmarks).
//! - Nothing allocates; the `alloc` feature adds conveniences that return a `Vec`.
//! - Every bad input is a specific [`RopeError`]; a call that returns an error has written
//!   nothing.

mod alibi;
mod learned;
mod relative;
pub(crate) mod row_kernels;
mod sinusoidal;

#[cfg(feature = "alloc")]
pub use alibi::alibi_slopes_vec;
pub use alibi::{add_alibi, add_alibi_with_tier, alibi_slopes, alibi_slopes_with_bias_max, AlibiForm};
pub use learned::{LearnedElement, LearnedPositions};
pub use relative::{deberta_log_bucket_position, t5_relative_position_bucket, RelativePositions};
pub use sinusoidal::{Sinusoidal, SinusoidalLayout};

use crate::error::RopeError;
use crate::rope::Positions;

/// Query and key positions of a relative-position call: query row `i` is at position
/// `q_offset + i` (`i < query_len`), key column `j` at `k_offset + j` (`j < key_len`).
///
/// Prefill of `n` tokens: `RelativeGrid::new(n, n)`. KV-cache decode of `n` new tokens
/// after `past` cached ones, attending to all of them:
/// `RelativeGrid::new(n, past + n).with_offsets(past, 0)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct RelativeGrid {
    /// Number of query rows.
    pub query_len: usize,
    /// Number of key columns.
    pub key_len: usize,
    /// Position of query row 0.
    pub q_offset: u32,
    /// Position of key column 0.
    pub k_offset: u32,
}

impl RelativeGrid {
    /// A grid with both offsets 0.
    pub const fn new(query_len: usize, key_len: usize) -> Self {
        RelativeGrid { query_len, key_len, q_offset: 0, k_offset: 0 }
    }

    /// Builder: set the query and key offsets.
    pub const fn with_offsets(mut self, q_offset: u32, k_offset: u32) -> Self {
        self.q_offset = q_offset;
        self.k_offset = k_offset;
        self
    }

    /// True when the grid has no cell.
    pub const fn is_empty(&self) -> bool {
        self.query_len == 0 || self.key_len == 0
    }

    /// Checks that the last query and key positions fit in `u32`.
    ///
    /// # Errors
    /// [`RopeError::PositionOverflow`].
    pub fn validate(&self) -> Result<(), RopeError> {
        last_position(self.q_offset, self.query_len)?;
        last_position(self.k_offset, self.key_len)?;
        Ok(())
    }

    /// `query_position - key_position` of cell `(i, j)` (the DeBERTa convention; T5 and
    /// ALiBi use its negation). Exact: positions are `u32`.
    #[inline(always)]
    pub(crate) fn q_minus_k(&self, i: usize, j: usize) -> i64 {
        (i64::from(self.q_offset) + i as i64) - (i64::from(self.k_offset) + j as i64)
    }
}

/// The last position of `len` tokens starting at `start`, or `None` for no token.
fn last_position(start: u32, len: usize) -> Result<Option<u32>, RopeError> {
    if len == 0 {
        return Ok(None);
    }
    let last = u64::from(start).checked_add(len as u64 - 1).ok_or(RopeError::PositionOverflow)?;
    u32::try_from(last).map(Some).map_err(|_| RopeError::PositionOverflow)
}

/// Validates positions against `tokens` and returns the largest (`None` for no token).
///
/// # Errors
/// [`RopeError::PositionCountMismatch`] for `Ids` of another length,
/// [`RopeError::PositionOverflow`] when `start + tokens - 1` exceeds `u32::MAX`.
pub(crate) fn max_position(tokens: usize, positions: &Positions<'_>) -> Result<Option<u32>, RopeError> {
    match *positions {
        Positions::Ids(ids) => {
            if ids.len() != tokens {
                return Err(RopeError::PositionCountMismatch { tokens, positions: ids.len() });
            }
            Ok(ids.iter().copied().max())
        }
        Positions::Start(start) => last_position(start, tokens),
    }
}

/// The position of token `t` (positions validated by [`max_position`]).
#[inline(always)]
pub(crate) fn position_at(positions: &Positions<'_>, t: usize) -> u32 {
    match *positions {
        Positions::Ids(ids) => ids[t],
        // Validated: start + t fits in u32.
        Positions::Start(start) => start + t as u32,
    }
}

/// Checks `rows` rows of `row_len` elements, `row_stride` apart, against a buffer of `len`
/// elements. Zero rows or an empty row need nothing.
///
/// # Errors
/// [`RopeError::RowStrideTooSmall`], [`RopeError::EncodingSizeOverflow`],
/// [`RopeError::EncodingBufferTooShort`], each naming `buffer`.
pub(crate) fn check_rows(
    buffer: &'static str,
    rows: usize,
    row_len: usize,
    row_stride: usize,
    len: usize,
) -> Result<(), RopeError> {
    if rows == 0 || row_len == 0 {
        return Ok(());
    }
    if rows > 1 && row_stride < row_len {
        return Err(RopeError::RowStrideTooSmall { buffer, row_stride, row_len });
    }
    let needed = (rows - 1)
        .checked_mul(row_stride)
        .and_then(|s| s.checked_add(row_len))
        .ok_or(RopeError::EncodingSizeOverflow { buffer })?;
    if len < needed {
        return Err(RopeError::EncodingBufferTooShort { buffer, needed, len });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_and_positions() {
        assert_eq!(check_rows("x", 3, 4, 4, 12), Ok(()));
        assert_eq!(check_rows("x", 3, 4, 6, 16), Ok(()));
        assert_eq!(
            check_rows("x", 3, 4, 6, 15),
            Err(RopeError::EncodingBufferTooShort { buffer: "x", needed: 16, len: 15 })
        );
        assert_eq!(
            check_rows("x", 2, 4, 3, 100),
            Err(RopeError::RowStrideTooSmall { buffer: "x", row_stride: 3, row_len: 4 })
        );
        // One row: any stride.
        assert_eq!(check_rows("x", 1, 4, 0, 4), Ok(()));
        assert_eq!(
            check_rows("x", 3, 4, usize::MAX, 4),
            Err(RopeError::EncodingSizeOverflow { buffer: "x" })
        );
        assert_eq!(max_position(2, &Positions::Start(u32::MAX - 1)), Ok(Some(u32::MAX)));
        assert_eq!(max_position(3, &Positions::Start(u32::MAX - 1)), Err(RopeError::PositionOverflow));
        assert_eq!(max_position(0, &Positions::Start(u32::MAX)), Ok(None));
        assert_eq!(
            max_position(2, &Positions::Ids(&[1])),
            Err(RopeError::PositionCountMismatch { tokens: 2, positions: 1 })
        );
        assert_eq!(max_position(3, &Positions::Ids(&[4, 9, 2])), Ok(Some(9)));
        let g = RelativeGrid::new(2, 3).with_offsets(5, 1);
        assert_eq!(g.q_minus_k(1, 2), 6 - 3);
        assert_eq!(
            RelativeGrid::new(2, 1).with_offsets(u32::MAX, 0).validate(),
            Err(RopeError::PositionOverflow)
        );
    }
}
