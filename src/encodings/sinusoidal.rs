//! Sinusoidal absolute position encoding (Vaswani et al. 2017, "Attention Is All You Need",
//! §3.5), in the interleaved layout of the paper and the concatenated `[sin | cos]` layout
//! of tensor2tensor and fairseq.

use crate::config::AngleMode;
use crate::dispatch::Tier;
use crate::element::Element;
use crate::encodings::row_kernels::{add_row, add_row_fn, check_tier, kernels};
use crate::encodings::{check_rows, max_position, position_at};
use crate::error::RopeError;
use crate::freq::MAX_INV_FREQ;
use crate::kernels::sincos::{turns, RowInputs, SinCos};
use crate::rope::Positions;

/// The base of the paper and of every reference implementation (`max_timescale` in
/// tensor2tensor).
const DEFAULT_BASE: f64 = 10_000.0;

/// Frequencies generated per block: their reduced turns, one cos/sin row and one encoding
/// segment live on the stack (10 KiB). The blocks are the outer loop (each block's turns
/// are computed once per call) and the tokens the inner one, so each token's row is
/// touched in segments of up to `2 * BLOCK` columns; 256 was 6-8% faster than 64 on
/// 512 x 4096 on the development machine.
const BLOCK: usize = 256;

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

/// A sinusoidal absolute position encoding of width `dim` (`d_model`).
///
/// # Accuracy
/// Each value is `sin` or `cos` of the angle `position * inv_freq`, where `inv_freq` is
/// computed in f64 from the reference formula (`pow` or `exp`, see [`SinusoidalLayout`])
/// and the product with the position is taken exactly, not rounded to f64. The values come
/// from the crate's cos/sin generator, the one RoPE's on-the-fly path uses
/// ([`AngleMode::Exact`](crate::AngleMode::Exact), `src/kernels/sincos/mod.rs`): exact
/// range reduction of the angle in turns, then minimax polynomials, within `2.5e-12` of the
/// true sine and cosine before the single rounding to f32. So every value is within half
/// an f32 ulp plus `2.5e-12` (at most `3e-8`) of the true value at every `u32` position:
/// the correctly rounded f32, except when the true value lies within `2.5e-12` of a
/// rounding boundary (then it may be the neighbour). The generator is bit-identical on
/// every tier, so the encoding does not depend on the CPU.
///
/// (Earlier versions rounded `sin`/`cos` from `libm` of the f64-rounded angle: correctly
/// rounded for that angle, but its rounding, up to `2^-53 * angle`, is `5e-7` rad near
/// position `2^32`; this one is more accurate at large positions and faster: the
/// 512 x 4096 f32 add of `cargo bench --bench encodings` went from 10.9 ms to 2.2 ms on
/// the AVX-512 tier, 2.7 ms on AVX2 and 4.6 ms on the scalar one, on the development
/// machine. Frequencies above `2^95`, which only a base below `2^-95` produces, still
/// take that path.) tensor2tensor and fairseq form the angle in f32, which loses the phase at
/// large positions; XLM/DistilBERT divide by `10000^(2i/dim)` in f64 instead of
/// multiplying by its inverse, an angle an f64 rounding (about `2^-52 * angle`) away.
///
/// The encoding is added to embeddings by [`Sinusoidal::add_to`] or written to a table by
/// [`Sinusoidal::fill_table`]; both run on the process-wide dispatcher's tier, or the one
/// pinned with [`Sinusoidal::with_tier`] (same bits on every tier).
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
    /// The pinned tier ([`Sinusoidal::with_tier`]), or the dispatcher's.
    tier: Option<Tier>,
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
        Ok(Sinusoidal { dim, base, layout, tier: None })
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

    /// Pins the calls to `tier` instead of the process-wide dispatcher (tests and
    /// benchmarks; every tier gives the same bits).
    ///
    /// # Errors
    /// [`RopeError::TierUnavailable`] if this build or CPU lacks the tier.
    pub fn with_tier(mut self, tier: Tier) -> Result<Self, RopeError> {
        self.tier = Some(check_tier(tier)?);
        Ok(self)
    }

    /// The tier this object's calls run on.
    pub fn tier(&self) -> Tier {
        kernels(self.tier).tier
    }

    /// The number of frequencies: `ceil(dim / 2)` interleaved (an odd width ends with a
    /// sine), `floor(dim / 2)` concatenated (an odd width ends with a zero column).
    fn pairs(&self) -> usize {
        match self.layout {
            SinusoidalLayout::Interleaved => self.dim.div_ceil(2),
            SinusoidalLayout::Concatenated => self.dim / 2,
        }
    }

    /// Frequency `i < pairs()` in radians per position (see [`SinusoidalLayout`]).
    fn inv_freq(&self, i: usize) -> f64 {
        match self.layout {
            SinusoidalLayout::Interleaved => 1.0 / libm::pow(self.base, (2 * i) as f64 / self.dim as f64),
            SinusoidalLayout::Concatenated => {
                let half = self.dim / 2;
                let increment = libm::log(self.base) / (half.saturating_sub(1).max(1)) as f64;
                libm::exp(-(i as f64) * increment)
            }
        }
    }

    /// Calls `emit(t, column, values)` for every token `t < tokens` and every segment of
    /// the encoding row of position `position(t)`: `values` are the encoding at columns
    /// `column .. column + values.len()`. Every column `< dim` is emitted once per token.
    #[inline(always)]
    fn for_each_segment(
        &self,
        tokens: usize,
        position: impl Fn(usize) -> u32,
        mut emit: impl FnMut(usize, usize, &[f32]),
    ) {
        let gen = SinCos::of(kernels(self.tier));
        let pairs = self.pairs();
        let (mut cos, mut sin) = ([0.0f32; BLOCK], [0.0f32; BLOCK]);
        let mut seg = [0.0f32; 2 * BLOCK];
        for i0 in (0..pairs).step_by(BLOCK) {
            let block = FreqBlock::new(self, i0, BLOCK.min(pairs - i0));
            let m = block.len;
            for t in 0..tokens {
                block.row(gen, position(t), &mut cos[..m], &mut sin[..m]);
                match self.layout {
                    SinusoidalLayout::Interleaved => {
                        for (j, pair) in seg[..2 * m].chunks_exact_mut(2).enumerate() {
                            (pair[0], pair[1]) = (sin[j], cos[j]);
                        }
                        // An odd width drops the last cosine.
                        let len = (2 * m).min(self.dim - 2 * i0);
                        emit(t, 2 * i0, &seg[..len]);
                    }
                    SinusoidalLayout::Concatenated => {
                        emit(t, i0, &sin[..m]);
                        emit(t, pairs + i0, &cos[..m]);
                    }
                }
            }
        }
        if self.layout == SinusoidalLayout::Concatenated && self.dim % 2 == 1 {
            for t in 0..tokens {
                emit(t, self.dim - 1, &[0.0]);
            }
        }
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
            // Nothing to write; skip the frequency loop, whose cost grows with `dim`.
            return Ok(());
        }
        let dim = self.dim;
        self.for_each_segment(
            rows,
            |r| start + r as u32,
            |r, c, v| out[r * dim + c..r * dim + c + v.len()].copy_from_slice(v),
        );
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
        let add = add_row_fn::<T, f32>(kernels(self.tier));
        self.for_each_segment(
            tokens,
            |t| position_at(&positions, t),
            |t, c, v| {
                let at = t * row_stride + c;
                add_row(add, &mut x[at..at + v.len()], v);
            },
        );
        Ok(())
    }
}

/// The frequencies `i0 .. i0 + len` of an encoding, prepared for the generator.
struct FreqBlock {
    len: usize,
    inv_freq: [f64; BLOCK],
    /// `turns(inv_freq[i])`: the turns per position reduced mod 1, split for the exact
    /// reduction of the generator.
    turns_hi: [f64; BLOCK],
    turns_lo: [f64; BLOCK],
    /// Every frequency is within the generator's range `[0, 2^95]` (the bound RoPE's
    /// frequencies have too); otherwise the block takes the libm path.
    generator: bool,
}

impl FreqBlock {
    fn new(pe: &Sinusoidal, i0: usize, len: usize) -> Self {
        let mut b = FreqBlock {
            len,
            inv_freq: [0.0; BLOCK],
            turns_hi: [0.0; BLOCK],
            turns_lo: [0.0; BLOCK],
            generator: true,
        };
        for i in 0..len {
            let f = pe.inv_freq(i0 + i);
            b.inv_freq[i] = f;
            if (0.0..=MAX_INV_FREQ).contains(&f) {
                (b.turns_hi[i], b.turns_lo[i]) = turns(f);
            } else {
                b.generator = false;
            }
        }
        b
    }

    /// `cos[i]`, `sin[i]` of `position * inv_freq[i]` for `i < len` (the slices' length).
    #[inline(always)]
    fn row(&self, gen: SinCos, position: u32, cos: &mut [f32], sin: &mut [f32]) {
        let n = self.len;
        if self.generator {
            let inputs = RowInputs {
                mode: AngleMode::Exact,
                turns_hi: &self.turns_hi[..n],
                turns_lo: &self.turns_lo[..n],
                inv_freq_f32: &[],
                attention_factor: 1.0,
            };
            gen.fill(&inputs, position, cos, sin);
        } else {
            // A frequency above 2^95 (a base below 2^-95): the f64 angle, as before.
            for ((c, s), &f) in cos.iter_mut().zip(sin.iter_mut()).zip(&self.inv_freq[..n]) {
                let angle = f64::from(position) * f;
                (*c, *s) = (libm::cos(angle) as f32, libm::sin(angle) as f32);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frequencies_follow_the_formulas() {
        let pe = Sinusoidal::new(6, SinusoidalLayout::Interleaved).unwrap();
        assert_eq!(pe.pairs(), 3);
        assert_eq!(pe.inv_freq(0), 1.0);
        // A relative tolerance: Miri perturbs std's `powf` by a few ulps.
        assert!((pe.inv_freq(2) / 10_000f64.powf(-4.0 / 6.0) - 1.0).abs() < 1e-14);
        // Odd width: the last pair is a lone sine.
        assert_eq!(Sinusoidal::new(5, SinusoidalLayout::Interleaved).unwrap().pairs(), 3);
        let pe = Sinusoidal::new(7, SinusoidalLayout::Concatenated).unwrap();
        assert_eq!(pe.pairs(), 3);
        assert_eq!(pe.inv_freq(0), 1.0);
        assert!((pe.inv_freq(2) - 1e-4).abs() < 1e-18, "{}", pe.inv_freq(2));
        // half == 1: tensor2tensor's max(half - 1, 1) guard.
        let pe = Sinusoidal::new(3, SinusoidalLayout::Concatenated).unwrap();
        assert_eq!((pe.pairs(), pe.inv_freq(0)), (1, 1.0));
        assert_eq!(Sinusoidal::new(1, SinusoidalLayout::Concatenated).unwrap().pairs(), 0);
    }

    /// Layouts and the zero column, and the libm path of frequencies above 2^95 (a base
    /// of 1e-40: pair i of 70 columns has inv_freq 1e40^(2i/70), above 2^95 from i = 25).
    #[test]
    #[cfg_attr(miri, ignore = "arithmetic only (48 s under Miri): runs natively and under qemu")]
    fn columns_and_the_libm_path() {
        for (d, layout, base) in [
            (9, SinusoidalLayout::Interleaved, 1e4),
            (9, SinusoidalLayout::Concatenated, 1e4),
            (70, SinusoidalLayout::Interleaved, 1e-40),
            (141, SinusoidalLayout::Concatenated, 1e-40),
        ] {
            let pe = Sinusoidal::with_base(d, layout, base).unwrap();
            for start in [3u32, 1 << 20] {
                let mut t = [f32::NAN; 2 * 141];
                pe.fill_table(start, &mut t[..2 * d]).unwrap();
                for r in 0..2 {
                    let p = start + r as u32;
                    for j in 0..d {
                        let got = t[r * d + j];
                        let (i, sine) = match layout {
                            SinusoidalLayout::Interleaved => (j / 2, j % 2 == 0),
                            SinusoidalLayout::Concatenated if j == d - 1 && d % 2 == 1 => {
                                assert_eq!(got.to_bits(), 0, "zero column");
                                continue;
                            }
                            SinusoidalLayout::Concatenated => (j % (d / 2), j < d / 2),
                        };
                        let f = pe.inv_freq(i);
                        let angle = f64::from(p) * f;
                        let want = if sine { libm::sin(angle) } else { libm::cos(angle) };
                        if f > MAX_INV_FREQ {
                            assert_eq!(
                                got.to_bits(),
                                (want as f32).to_bits(),
                                "{layout:?} d {d} p {p} j {j}"
                            );
                        } else {
                            // The generator: within half an ulp plus 2.5e-12 of the true
                            // value; these angles are small enough for the f64 one to be
                            // as close.
                            assert!((f64::from(got) - want).abs() <= 3e-8, "{layout:?} d {d} p {p} j {j}");
                        }
                    }
                }
            }
        }
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
