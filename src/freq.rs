//! Rotation frequencies (`inv_freq`) and the attention factor, for every scaling method.
//!
//! Everything is computed in f64 with `libm`. The unscaled frequencies are
//! `inv_freq[i] = 1 / theta^(2i / rotary_dim)` for `i in 0..rotary_dim / 2` (Su et al. 2021,
//! "RoFormer", eq. 15; HF `_compute_default_rope_parameters` in
//! `transformers/modeling_rope_utils.py`).

use crate::config::{RopeConfig, MAX_PAIRS};
use crate::error::RopeError;

/// Frequency scaling for context extension. `#[non_exhaustive]`: match with a wildcard.
#[derive(Clone, Debug, PartialEq, Default)]
#[non_exhaustive]
pub enum Scaling {
    /// No scaling (HF `rope_type: "default"`).
    #[default]
    None,
    /// Linear position interpolation (Chen et al. 2023, "Extending Context Window of Large
    /// Language Models via Positional Interpolation"; HF `rope_type: "linear"`): every
    /// `inv_freq` divided by `factor`. Attention factor 1.
    Linear {
        /// The interpolation factor, finite and > 0.
        factor: f64,
    },
}

impl Scaling {
    /// Checks the parameters against `rotary_dim`.
    ///
    /// # Errors
    /// [`RopeError::InvalidScalingParameter`] naming the first bad parameter.
    pub fn validate(&self, _rotary_dim: usize) -> Result<(), RopeError> {
        match *self {
            Scaling::None => Ok(()),
            Scaling::Linear { factor } => positive_finite(factor, "factor"),
        }
    }

    /// True when the frequencies depend on the sequence length of the call (dynamic NTK,
    /// LongRoPE), so they are recomputed per call instead of once.
    pub fn depends_on_seq_len(&self) -> bool {
        match self {
            Scaling::None | Scaling::Linear { .. } => false,
        }
    }
}

fn positive_finite(v: f64, name: &'static str) -> Result<(), RopeError> {
    if v.is_finite() && v > 0.0 {
        Ok(())
    } else {
        Err(RopeError::InvalidScalingParameter { name })
    }
}

/// The frequencies of one configuration at one sequence length: `rotary_dim / 2` values of
/// `inv_freq` (radians per position) and the `attention_factor` that multiplies cos and
/// sin. Fixed-size, so it lives on the stack.
#[derive(Clone, Debug, PartialEq)]
pub struct Frequencies {
    inv_freq: [f64; MAX_PAIRS],
    inv_freq_f32: [f32; MAX_PAIRS],
    pairs: usize,
    attention_factor: f64,
    // `inv_freq / 2π` (turns per position) modulo 1, split as `turns_hi + turns_lo` with
    // `turns_hi` of at most 21 significant bits, for the exact range reduction of the
    // cos/sin generator (`kernels::sincos`). Derived from `inv_freq` in `sync_f32`.
    turns_hi: [f64; MAX_PAIRS],
    turns_lo: [f64; MAX_PAIRS],
}

impl Frequencies {
    /// Computes the frequencies of `config` for a call whose largest position is
    /// `seq_len - 1` (`seq_len` matters only when [`Scaling::depends_on_seq_len`]).
    ///
    /// # Errors
    /// Any error of [`RopeConfig::validate`].
    pub fn new(config: &RopeConfig, seq_len: u64) -> Result<Self, RopeError> {
        config.validate()?;
        let _ = seq_len;
        let pairs = config.pairs();
        let mut f = Frequencies {
            inv_freq: [0.0; MAX_PAIRS],
            inv_freq_f32: [0.0; MAX_PAIRS],
            pairs,
            attention_factor: 1.0,
            turns_hi: [0.0; MAX_PAIRS],
            turns_lo: [0.0; MAX_PAIRS],
        };
        let dim = config.rotary_dim as f64;
        for (i, v) in f.inv_freq[..pairs].iter_mut().enumerate() {
            *v = 1.0 / libm::pow(config.theta, (2 * i) as f64 / dim);
        }
        match config.scaling {
            Scaling::None => {}
            Scaling::Linear { factor } => f.inv_freq[..pairs].iter_mut().for_each(|v| *v /= factor),
        }
        f.sync_f32();
        Ok(f)
    }

    /// Replaces the f32 table used by [`AngleMode::HfCompatible`](crate::AngleMode) with
    /// the caller's (e.g. the `inv_freq` buffer exported from transformers).
    ///
    /// # Errors
    /// [`RopeError::TableShape`] if `inv_freq_f32.len() != rotary_dim / 2`;
    /// [`RopeError::InvalidScalingParameter`] (`"inv_freq"`) for a value that is not
    /// finite and ≥ 0.
    pub fn set_inv_freq_f32(&mut self, inv_freq_f32: &[f32]) -> Result<(), RopeError> {
        if inv_freq_f32.len() != self.pairs {
            return Err(RopeError::TableShape);
        }
        if inv_freq_f32.iter().any(|v| !(v.is_finite() && *v >= 0.0)) {
            return Err(RopeError::InvalidScalingParameter { name: "inv_freq" });
        }
        self.inv_freq_f32[..self.pairs].copy_from_slice(inv_freq_f32);
        Ok(())
    }

    fn sync_f32(&mut self) {
        for i in 0..self.pairs {
            self.inv_freq_f32[i] = self.inv_freq[i] as f32;
        }
        let n = self.pairs;
        crate::kernels::sincos::split_turns(&self.inv_freq[..n], &mut self.turns_hi[..n], &mut self.turns_lo[..n]);
    }

    /// High parts of `inv_freq / 2π mod 1` (at most 21 significant bits each).
    pub(crate) fn turns_hi(&self) -> &[f64] {
        &self.turns_hi[..self.pairs]
    }

    /// Low parts of `inv_freq / 2π mod 1`.
    pub(crate) fn turns_lo(&self) -> &[f64] {
        &self.turns_lo[..self.pairs]
    }

    /// `inv_freq`, `rotary_dim / 2` values, radians per position.
    pub fn inv_freq(&self) -> &[f64] {
        &self.inv_freq[..self.pairs]
    }

    /// The f32 `inv_freq` table of [`AngleMode::HfCompatible`](crate::AngleMode).
    pub fn inv_freq_f32(&self) -> &[f32] {
        &self.inv_freq_f32[..self.pairs]
    }

    /// The factor multiplying cos and sin (1 unless YaRN or LongRoPE set it).
    pub fn attention_factor(&self) -> f64 {
        self.attention_factor
    }

    /// Number of pairs, `rotary_dim / 2`.
    pub fn pairs(&self) -> usize {
        self.pairs
    }
}
