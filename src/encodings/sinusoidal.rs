//! Sinusoidal absolute position encoding (Vaswani et al. 2017, "Attention Is All You Need",
//! §3.5), in the interleaved layout of the paper and the concatenated `[sin | cos]` layout
//! of tensor2tensor and fairseq.

use crate::element::Element;
use crate::encodings::row_kernels::{add_row, add_row_fn};
use crate::encodings::{check_rows, max_position, position_at};
use crate::error::RopeError;
use crate::rope::Positions;

/// The base of the paper and of every reference implementation (`max_timescale` in
/// tensor2tensor).
const DEFAULT_BASE: f64 = 10_000.0;

/// Columns generated per block: the frequencies and one encoding block live on the stack.
const BLOCK: usize = 64;

/// Where the sine and cosine columns go.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum SinusoidalLayout {
    /// The paper's layout: `PE[pos, 2i] = sin(pos / base^(2i / dim))`,
    /// `PE[pos, 2i + 1] = cos(pos / base^(2i / dim))`.
    ///
    /// Odd `dim`: the last column `dim - 1 = 2i` is a sine with exponent `2i / dim`, as
    /// the reference that supports odd widths computes it (`create_sinusoidal_embeddings`
    /// in HF `transformers/models/distilbert/modeling_distilbert.py`, from XLM: angle
    /// `pos / 10000^(2 * (j // 2) / dim)`, sine on even `j`, cosine on odd `j`). The
    /// Annotated Transformer's version cannot build odd widths at all.
    #[default]
    Interleaved,
    /// The tensor2tensor / fairseq layout: `half = dim / 2` timescales with the geometric
    /// spacing `ln(base) / (half - 1)`, `PE[pos, k] = sin(pos * inv_timescale[k])` and
    /// `PE[pos, half + k] = cos(pos * inv_timescale[k])` for `k < half`, where
    /// `inv_timescale[k] = exp(-k * ln(base) / (half - 1))` (so the last one is exactly
    /// `1 / base`, unlike the paper's `base^(-(dim - 2) / dim)`).
    ///
    /// Sources: `get_timing_signal_1d` in `tensor2tensor/layers/common_attention.py`;
    /// `SinusoidalPositionalEmbedding.get_embedding` in
    /// `fairseq/modules/sinusoidal_positional_embedding.py` (also HF FSMT).
    ///
    /// Odd `dim`: the last column is 0 (both references zero-pad at the end).
    /// `dim` 2 or 3 (`half == 1`): the spacing denominator is `max(half - 1, 1)` as in
    /// tensor2tensor (fairseq divides by zero there), so the only timescale is 1.
    /// fairseq also zeroes the row of `padding_idx` and numbers positions from
    /// `padding_idx + 1`; pass those positions and skip padding tokens to match it.
    Concatenated,
}

/// One column of the encoding: which function of `position * inv_freq`.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Column {
    Sin(f64),
    Cos(f64),
    /// The zero padding of an odd width in the concatenated layout.
    Zero,
}

impl Column {
    /// The value at `position`: the angle is formed in f64 (exact enough at every `u32`
    /// position), sine or cosine taken in f64, rounded once to f32.
    #[inline(always)]
    fn at(self, position: f64) -> f32 {
        match self {
            Column::Sin(inv_freq) => libm::sin(position * inv_freq) as f32,
            Column::Cos(inv_freq) => libm::cos(position * inv_freq) as f32,
            Column::Zero => 0.0,
        }
    }
}

/// A sinusoidal absolute position encoding of width `dim` (`d_model`).
///
/// Values are computed from the f64 angle `position * inv_freq` (`inv_freq` in f64, from
/// `pow` or `exp`) with f64 `sin`/`cos` (`libm`) and rounded once to f32, so they are
/// accurate at every `u32` position: tensor2tensor and fairseq form the angle in f32, which
/// loses the phase at large positions. (XLM/DistilBERT divide by `10000^(2i/dim)` in f64
/// instead of multiplying by its inverse; the two angles differ by an f64 rounding, about
/// `2^-52 * angle`: under 4e-9 in absolute value up to position 2^24, 1e-6 near 2^32.)
/// The encoding is added to embeddings by [`Sinusoidal::add_to`] or written to a table by
/// [`Sinusoidal::fill_table`].
///
/// ```
/// use rope_kernels::encodings::{Sinusoidal, SinusoidalLayout};
/// use rope_kernels::Positions;
///
/// let pe = Sinusoidal::new(8, SinusoidalLayout::Interleaved)?;
/// // 3 tokens of width 8 in rows of 10 elements (e.g. a larger buffer), positions 5, 6, 7.
/// let mut x = vec![0.0f32; 3 * 10];
/// pe.add_to(&mut x, 3, 10, Positions::Start(5))?;
/// assert_eq!(x[0], 5.0f64.sin() as f32);
/// # Ok::<(), rope_kernels::RopeError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sinusoidal {
    dim: usize,
    base: f64,
    layout: SinusoidalLayout,
}

impl Sinusoidal {
    /// An encoding of width `dim` with the base 10000 of the paper.
    ///
    /// # Errors
    /// [`RopeError::InvalidEncodingParameter`] (`"dim"`) if `dim` is 0.
    pub fn new(dim: usize, layout: SinusoidalLayout) -> Result<Self, RopeError> {
        Self::with_base(dim, layout, DEFAULT_BASE)
    }

    /// An encoding with another base (tensor2tensor's `max_timescale` with
    /// `min_timescale = 1`).
    ///
    /// # Errors
    /// [`RopeError::InvalidEncodingParameter`]: `"dim"` if 0, `"base"` if not finite or
    /// not > 0.
    pub fn with_base(dim: usize, layout: SinusoidalLayout, base: f64) -> Result<Self, RopeError> {
        if dim == 0 {
            return Err(RopeError::InvalidEncodingParameter { name: "dim", requirement: "must be > 0" });
        }
        if !(base.is_finite() && base > 0.0) {
            return Err(RopeError::InvalidEncodingParameter {
                name: "base",
                requirement: "must be finite and > 0",
            });
        }
        Ok(Sinusoidal { dim, base, layout })
    }

    /// The width (`d_model`).
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// The base.
    pub fn base(&self) -> f64 {
        self.base
    }

    /// The layout.
    pub fn layout(&self) -> SinusoidalLayout {
        self.layout
    }

    /// Column `j` of the encoding (`j < dim`).
    fn column(&self, j: usize) -> Column {
        match self.layout {
            SinusoidalLayout::Interleaved => {
                let i = j / 2;
                let inv_freq = 1.0 / libm::pow(self.base, (2 * i) as f64 / self.dim as f64);
                if j.is_multiple_of(2) {
                    Column::Sin(inv_freq)
                } else {
                    Column::Cos(inv_freq)
                }
            }
            SinusoidalLayout::Concatenated => {
                let half = self.dim / 2;
                if j >= 2 * half {
                    return Column::Zero;
                }
                let k = j % half;
                let increment = libm::log(self.base) / (half.saturating_sub(1).max(1)) as f64;
                let inv_timescale = libm::exp(-(k as f64) * increment);
                if j < half {
                    Column::Sin(inv_timescale)
                } else {
                    Column::Cos(inv_timescale)
                }
            }
        }
    }

    /// The columns `c0 .. c0 + n` (`n <= BLOCK`).
    fn columns(&self, c0: usize, n: usize) -> [Column; BLOCK] {
        let mut cols = [Column::Zero; BLOCK];
        for (k, c) in cols[..n].iter_mut().enumerate() {
            *c = self.column(c0 + k);
        }
        cols
    }

    /// Writes the encoding of positions `start .. start + rows` into `out`, shaped
    /// `[rows][dim]` (`rows = out.len() / dim`, row `r` is position `start + r`).
    ///
    /// # Errors
    /// [`RopeError::RaggedTable`] if `out.len()` is not a multiple of `dim`;
    /// [`RopeError::PositionOverflow`] if `start + rows - 1` exceeds `u32::MAX`.
    pub fn fill_table(&self, start: u32, out: &mut [f32]) -> Result<(), RopeError> {
        if !out.len().is_multiple_of(self.dim) {
            return Err(RopeError::RaggedTable { len: out.len(), row_len: self.dim });
        }
        let rows = out.len() / self.dim;
        max_position(rows, &Positions::Start(start))?;
        if rows == 0 {
            // Nothing to write; skip the column loop, whose cost grows with `dim`.
            return Ok(());
        }
        for c0 in (0..self.dim).step_by(BLOCK) {
            let n = BLOCK.min(self.dim - c0);
            let cols = self.columns(c0, n);
            for (r, row) in out.chunks_exact_mut(self.dim).enumerate() {
                let p = f64::from(start + r as u32);
                for (v, c) in row[c0..c0 + n].iter_mut().zip(&cols[..n]) {
                    *v = c.at(p);
                }
            }
        }
        Ok(())
    }

    /// A table of positions `0..max_positions`, shaped `[max_positions][dim]` (needs
    /// `alloc`).
    ///
    /// # Errors
    /// [`RopeError::EncodingSizeOverflow`] (`"table"`) if the size overflows `usize`;
    /// [`RopeError::PositionOverflow`] if `max_positions > 2^32`.
    #[cfg(feature = "alloc")]
    pub fn table(&self, max_positions: usize) -> Result<alloc::vec::Vec<f32>, RopeError> {
        let n =
            max_positions.checked_mul(self.dim).ok_or(RopeError::EncodingSizeOverflow { buffer: "table" })?;
        max_position(max_positions, &Positions::Start(0))?;
        let mut out = alloc::vec![0.0f32; n];
        self.fill_table(0, &mut out)?;
        Ok(out)
    }

    /// Adds the encoding to embeddings in place: `x[t][c] += PE[position(t)][c]` for the
    /// `tokens` rows of `dim` elements at `x[t * row_stride ..]`. Each element is loaded,
    /// the f32 encoding added in f32, and the sum rounded once to `T`.
    ///
    /// # Errors
    /// Nothing is written when any of these is returned:
    /// - [`RopeError::PositionCountMismatch`] if `positions` is `Ids` of a length other
    ///   than `tokens`; [`RopeError::PositionOverflow`] if `start + tokens - 1` exceeds
    ///   `u32::MAX`;
    /// - [`RopeError::RowStrideTooSmall`], [`RopeError::EncodingSizeOverflow`],
    ///   [`RopeError::EncodingBufferTooShort`] (`"embeddings"`) if the rows do not fit `x`.
    pub fn add_to<T: Element>(
        &self,
        x: &mut [T],
        tokens: usize,
        row_stride: usize,
        positions: Positions<'_>,
    ) -> Result<(), RopeError> {
        max_position(tokens, &positions)?;
        check_rows("embeddings", tokens, self.dim, row_stride, x.len())?;
        if tokens == 0 {
            // Nothing to write; skip the column loop, whose cost grows with `dim`.
            return Ok(());
        }
        let add = add_row_fn::<T, f32>();
        let mut pe = [0.0f32; BLOCK];
        for c0 in (0..self.dim).step_by(BLOCK) {
            let n = BLOCK.min(self.dim - c0);
            let cols = self.columns(c0, n);
            for t in 0..tokens {
                let p = f64::from(position_at(&positions, t));
                for (v, c) in pe[..n].iter_mut().zip(&cols[..n]) {
                    *v = c.at(p);
                }
                let row = t * row_stride + c0;
                add_row(add, &mut x[row..row + n], &pe[..n]);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_follow_the_formulas() {
        let pe = Sinusoidal::new(6, SinusoidalLayout::Interleaved).unwrap();
        assert_eq!(pe.column(0), Column::Sin(1.0));
        assert_eq!(pe.column(1), Column::Cos(1.0));
        let Column::Cos(f) = pe.column(5) else { panic!() };
        // libm, not `powf`: Miri perturbs the std transcendental functions on purpose.
        assert!((f - libm::pow(10_000.0, -4.0 / 6.0)).abs() < 1e-18);
        let pe = Sinusoidal::new(7, SinusoidalLayout::Concatenated).unwrap();
        assert_eq!(pe.column(0), Column::Sin(1.0));
        assert_eq!(pe.column(3), Column::Cos(1.0));
        let Column::Sin(f) = pe.column(2) else { panic!() };
        assert!((f - 1e-4).abs() < 1e-18, "{f}");
        assert_eq!(pe.column(6), Column::Zero);
        // half == 1: tensor2tensor's max(half - 1, 1) guard.
        let pe = Sinusoidal::new(3, SinusoidalLayout::Concatenated).unwrap();
        assert_eq!(
            [pe.column(0), pe.column(1), pe.column(2)],
            [Column::Sin(1.0), Column::Cos(1.0), Column::Zero]
        );
        let pe = Sinusoidal::new(1, SinusoidalLayout::Concatenated).unwrap();
        assert_eq!(pe.column(0), Column::Zero);
    }

    #[test]
    fn empty_calls_return_at_once_whatever_the_width() {
        // Without the early return these would generate 2^58 column blocks.
        let pe = Sinusoidal::new(usize::MAX / 2, SinusoidalLayout::Interleaved).unwrap();
        assert_eq!(pe.fill_table(7, &mut []), Ok(()));
        assert_eq!(pe.add_to::<f32>(&mut [], 0, 0, Positions::Start(0)), Ok(()));
        assert_eq!(
            pe.add_to::<f32>(&mut [], 0, 0, Positions::Ids(&[1])),
            Err(RopeError::PositionCountMismatch { tokens: 0, positions: 1 })
        );
    }
}
