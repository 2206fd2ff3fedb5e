//! ALiBi: attention with linear biases (Press et al. 2022, "Train Short, Test Long:
//! Attention with Linear Biases Enables Input Length Extrapolation").
//!
//! Head `h` adds `slope[h] * (key_position - query_position)` to its attention scores
//! before the softmax: `0` on the diagonal, `-slope * distance` for past keys (the paper's
//! `-m * (i - j)`, §3). Slopes follow the paper's `get_slopes`.

use crate::dispatch::Tier;
use crate::encodings::row_kernels::{alibi_row, alibi_row_fn, check_tier, kernels};
use crate::encodings::{check_rows, RelativeGrid};
use crate::error::RopeError;

/// The bias of the paper: 8 (`alibi_bias_max` in MPT).
const DEFAULT_BIAS_MAX: f64 = 8.0;

/// How the bias depends on the distance.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum AlibiForm {
    /// `slope * (key_position - query_position)`: the paper's causal bias, 0 on the
    /// diagonal and negative for past keys. Future keys (positive distance) get a positive
    /// bias; a causal model masks them anyway. BLOOM (`build_alibi_tensor` in HF
    /// `transformers/models/bloom/modeling_bloom.py`) adds `slope * key_position`, which
    /// differs from this by `slope * query_position`, constant along each softmax row, so
    /// the attention probabilities are the same.
    #[default]
    Causal,
    /// `-slope * |key_position - query_position|`: the symmetric form used by
    /// bidirectional (encoder) models with ALiBi.
    Symmetric,
}

/// The slope of head `h` of `heads` (paper, `get_slopes`; `bias_max` is 8 there):
/// with `c` the largest power of two `<= heads`, heads `h < c` get
/// `2^(-bias_max * (h + 1) / c)`, and the remaining heads `c + m` get
/// `2^(-bias_max * (2m + 1) / (2c))` (every other slope of `2c` heads, starting with the
/// first). Computed in f64.
fn slope(h: usize, heads: usize, bias_max: f64) -> f64 {
    let c = 1usize << (usize::BITS - 1 - heads.leading_zeros());
    let exponent = if h < c {
        -bias_max * (h + 1) as f64 / c as f64
    } else {
        -bias_max * (2 * (h - c) + 1) as f64 / (2 * c) as f64
    };
    libm::exp2(exponent)
}

/// Fills `out` with the ALiBi slopes of `heads = out.len()` heads (Press et al. 2022,
/// `get_slopes` in the paper's repository `ofirpress/attention_with_linear_biases`).
///
/// For a power of two `n`, head `h` gets `2^(-8 (h + 1) / n)`: 8 heads give
/// `2^-1, 2^-2, ..., 2^-8`. Otherwise, with `c` the largest power of two below `n`, the
/// first `c` heads get the slopes of `c` heads and the rest get every other slope of `2c`
/// heads (`2^(-8 (2m + 1) / 2c)` for `m = 0, 1, ...`). HF BLOOM's `build_alibi_tensor`
/// and MPT's `gen_slopes` give the same values. Each slope is computed in f64 and rounded
/// once to f32 (BLOOM raises an f32-rounded base to integer powers in f32, which can be an
/// ulp off for head counts that are not powers of two).
pub fn alibi_slopes(out: &mut [f32]) {
    let heads = out.len();
    for (h, s) in out.iter_mut().enumerate() {
        *s = slope(h, heads, DEFAULT_BIAS_MAX) as f32;
    }
}

/// [`alibi_slopes`] with another maximum bias in place of 8 (MPT's `alibi_bias_max`):
/// head `h` of a power-of-two `n` gets `2^(-alibi_bias_max * (h + 1) / n)`.
///
/// # Errors
/// [`RopeError::InvalidEncodingParameter`] (`"alibi_bias_max"`) if it is not finite and
/// `> 0`; `out` is left unchanged.
pub fn alibi_slopes_with_bias_max(out: &mut [f32], alibi_bias_max: f64) -> Result<(), RopeError> {
    if !(alibi_bias_max.is_finite() && alibi_bias_max > 0.0) {
        return Err(RopeError::InvalidEncodingParameter {
            name: "alibi_bias_max",
            requirement: "must be finite and > 0",
        });
    }
    let heads = out.len();
    for (h, s) in out.iter_mut().enumerate() {
        *s = slope(h, heads, alibi_bias_max) as f32;
    }
    Ok(())
}

/// The slopes of `heads` heads as a vector (needs `alloc`); see [`alibi_slopes`].
#[cfg(feature = "alloc")]
pub fn alibi_slopes_vec(heads: usize) -> alloc::vec::Vec<f32> {
    let mut v = alloc::vec![0.0f32; heads];
    alibi_slopes(&mut v);
    v
}

/// Adds the ALiBi bias to a block of attention scores in place.
///
/// `scores` holds `heads = slopes.len()` heads of `grid.query_len` rows of
/// `grid.key_len` scores: score `(h, i, j)` is at `(h * query_len + i) * row_stride + j`
/// (rows `row_stride` elements apart, heads `query_len * row_stride` apart). Query row `i`
/// is at position `grid.q_offset + i`, key `j` at `grid.k_offset + j`. Each score gets
/// `bias = slopes[h] * d` ([`AlibiForm::Causal`]) or `-(slopes[h] * |d|)`
/// ([`AlibiForm::Symmetric`]) with `d = key_position - query_position` rounded to f32,
/// added in f32 (no fused multiply-add; a NaN result is stored as the canonical NaN).
/// For tensor-parallel shards pass the slice of the slopes of the shard's heads.
///
/// # Errors
/// Nothing is written when any of these is returned:
/// - [`RopeError::InvalidEncodingParameter`] (`"slopes"`) for a slope that is not finite;
/// - [`RopeError::PositionOverflow`] if the last query or key position exceeds `u32::MAX`;
/// - [`RopeError::RowStrideTooSmall`], [`RopeError::EncodingSizeOverflow`],
///   [`RopeError::EncodingBufferTooShort`] (`"scores"`) if the block does not fit `scores`.
pub fn add_alibi(
    scores: &mut [f32],
    row_stride: usize,
    grid: RelativeGrid,
    slopes: &[f32],
    form: AlibiForm,
) -> Result<(), RopeError> {
    add_alibi_on(None, scores, row_stride, grid, slopes, form)
}

/// [`add_alibi`] on `tier` instead of the process-wide dispatcher (tests and benchmarks;
/// every tier gives the same bits).
///
/// # Errors
/// [`RopeError::TierUnavailable`] if this build or CPU lacks the tier, then those of
/// [`add_alibi`]; nothing is written when one is returned.
pub fn add_alibi_with_tier(
    scores: &mut [f32],
    row_stride: usize,
    grid: RelativeGrid,
    slopes: &[f32],
    form: AlibiForm,
    tier: Tier,
) -> Result<(), RopeError> {
    add_alibi_on(Some(check_tier(tier)?), scores, row_stride, grid, slopes, form)
}

/// [`add_alibi`] on the kernels of `tier` (the dispatcher's for `None`).
fn add_alibi_on(
    tier: Option<Tier>,
    scores: &mut [f32],
    row_stride: usize,
    grid: RelativeGrid,
    slopes: &[f32],
    form: AlibiForm,
) -> Result<(), RopeError> {
    if slopes.iter().any(|s| !s.is_finite()) {
        return Err(RopeError::InvalidEncodingParameter { name: "slopes", requirement: "must be finite" });
    }
    grid.validate()?;
    let rows = slopes
        .len()
        .checked_mul(grid.query_len)
        .ok_or(RopeError::EncodingSizeOverflow { buffer: "scores" })?;
    check_rows("scores", rows, grid.key_len, row_stride, scores.len())?;
    if grid.is_empty() {
        return Ok(());
    }
    let f = alibi_row_fn(kernels(tier));
    let symmetric = form == AlibiForm::Symmetric;
    for (h, &slope) in slopes.iter().enumerate() {
        for i in 0..grid.query_len {
            let start = (h * grid.query_len + i) * row_stride;
            // key_position - query_position of column 0.
            let first = -grid.q_minus_k(i, 0);
            alibi_row(f, &mut scores[start..start + grid.key_len], slope, first, symmetric);
        }
    }
    Ok(())
}
