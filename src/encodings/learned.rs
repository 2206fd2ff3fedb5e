//! Learned absolute position embeddings: rows of a trained table added by position id
//! (GPT-2 `wpe`, BERT/RoBERTa/OPT `position_embeddings`: in HF transformers,
//! `inputs_embeds + self.position_embeddings(position_ids)`).

use half::{bf16, f16};

use crate::dispatch::Tier;
use crate::element::Element;
use crate::encodings::row_kernels::{add_row, add_row_fn, check_tier, kernels};
use crate::encodings::{check_rows, max_position, position_at};
use crate::error::RopeError;
use crate::rope::Positions;

mod sealed {
    /// Seals [`LearnedElement`](super::LearnedElement) and ties each (embeddings, table)
    /// type pair to its add-row kernel.
    #[allow(private_bounds)]
    pub trait Sealed<T>: crate::kernels::SelectAddRow<T> {}
    impl<T: crate::element::Element> Sealed<T> for T {}
    impl Sealed<half::f16> for f32 {}
    impl Sealed<half::bf16> for f32 {}
}

/// The element types a learned table may have for embeddings of type `T`: `T` itself, or
/// `f32` (a table kept in full precision next to half-precision activations). Sealed.
pub trait LearnedElement<T: Element>: Element + sealed::Sealed<T> {}

impl<T: Element> LearnedElement<T> for T {}
impl LearnedElement<f16> for f32 {}
impl LearnedElement<bf16> for f32 {}

/// A trained position table `[max_positions][dim]` (row `p` is the embedding of position
/// `p`), borrowed from the caller.
///
/// The model was trained on positions `0..max_positions` only: a larger position is an
/// error ([`RopeError::BeyondTrainedLength`]), never an extrapolation. Models that offset
/// their position ids (OPT adds 2; RoBERTa starts at `padding_idx + 1`) need those ids
/// passed as they are.
///
/// ```
/// use rope_kernels::encodings::LearnedPositions;
/// use rope_kernels::{Positions, RopeError};
///
/// let table = [0.5f32, 1.0, 1.5, 2.0]; // 2 positions of width 2
/// let wpe = LearnedPositions::new(&table, 2)?;
/// let mut x = [10.0f32, 10.0];
/// wpe.add_to(&mut x, 1, 2, Positions::Ids(&[1]))?;
/// assert_eq!(x, [11.5, 12.0]);
/// let err = wpe.add_to(&mut x, 1, 2, Positions::Ids(&[2])).unwrap_err();
/// assert_eq!(err, RopeError::BeyondTrainedLength { position: 2, max_positions: 2 });
/// # Ok::<(), RopeError>(())
/// ```
#[derive(Clone, Copy, Debug)]
pub struct LearnedPositions<'a, P> {
    table: &'a [P],
    dim: usize,
    /// The pinned tier ([`LearnedPositions::with_tier`]), or the dispatcher's.
    tier: Option<Tier>,
}

impl<'a, P: Element> LearnedPositions<'a, P> {
    /// Wraps a table of `max_positions * dim` elements.
    ///
    /// # Errors
    /// [`RopeError::InvalidEncodingParameter`] (`"dim"`) if `dim` is 0;
    /// [`RopeError::RaggedTable`] if `table.len()` is not a multiple of `dim`.
    pub fn new(table: &'a [P], dim: usize) -> Result<Self, RopeError> {
        if dim == 0 {
            return Err(RopeError::InvalidEncodingParameter { name: "dim", requirement: "must be > 0" });
        }
        if !table.len().is_multiple_of(dim) {
            return Err(RopeError::RaggedTable { len: table.len(), row_len: dim });
        }
        Ok(LearnedPositions { table, dim, tier: None })
    }

    /// Pins the adds to `tier` instead of the process-wide dispatcher (tests and
    /// benchmarks; every tier gives the same bits).
    ///
    /// # Errors
    /// [`RopeError::TierUnavailable`] if this build or CPU lacks the tier.
    pub fn with_tier(mut self, tier: Tier) -> Result<Self, RopeError> {
        self.tier = Some(check_tier(tier)?);
        Ok(self)
    }

    /// The tier this object's adds run on.
    pub fn tier(&self) -> Tier {
        kernels(self.tier).tier
    }

    /// The width of a row.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// The trained length: rows of the table (HF `max_position_embeddings`).
    pub fn max_positions(&self) -> usize {
        self.table.len() / self.dim
    }

    /// Adds the table rows of the tokens' positions to embeddings in place:
    /// `x[t][c] = round(x[t][c] + table[position(t)][c])` for the `tokens` rows of `dim`
    /// elements at `x[t * row_stride ..]`, summed in f32 and rounded once to `T`.
    ///
    /// # Errors
    /// Nothing is written when any of these is returned:
    /// - [`RopeError::PositionCountMismatch`], [`RopeError::PositionOverflow`] for
    ///   positions that do not match `tokens`;
    /// - [`RopeError::RowStrideTooSmall`], [`RopeError::EncodingSizeOverflow`],
    ///   [`RopeError::EncodingBufferTooShort`] (`"embeddings"`) if the rows do not fit `x`;
    /// - [`RopeError::BeyondTrainedLength`] if a position is `>= max_positions`.
    pub fn add_to<T: Element>(
        &self,
        x: &mut [T],
        tokens: usize,
        row_stride: usize,
        positions: Positions<'_>,
    ) -> Result<(), RopeError>
    where
        P: LearnedElement<T>,
    {
        let max = max_position(tokens, &positions)?;
        check_rows("embeddings", tokens, self.dim, row_stride, x.len())?;
        if let Some(m) = max {
            if m as usize >= self.max_positions() {
                return Err(RopeError::BeyondTrainedLength {
                    position: m,
                    max_positions: self.max_positions(),
                });
            }
        }
        let add = add_row_fn::<T, P>(kernels(self.tier));
        for t in 0..tokens {
            let p = position_at(&positions, t) as usize * self.dim;
            let row = t * row_stride;
            add_row(add, &mut x[row..row + self.dim], &self.table[p..p + self.dim]);
        }
        Ok(())
    }
}
