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

fn all_finite(v: &[f64]) -> bool {
    v.iter().all(|x| x.is_finite())
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
}

impl Frequencies {
    /// Computes the frequencies of `config` for a call whose largest position is
    /// `seq_len - 1` (`seq_len` matters only when [`Scaling::depends_on_seq_len`]).
    ///
    /// ```
    /// use rope_kernels::{Frequencies, RopeConfig, Scaling};
    ///
    /// // inv_freq[i] = theta^(-2i / rotary_dim): 1 and 1/100 for theta 10000, rotary_dim 4.
    /// let f = Frequencies::new(&RopeConfig::new(4, 10_000.0), 0)?;
    /// assert_eq!(f.inv_freq(), &[1.0, 0.01]);
    /// // Linear position interpolation divides every frequency by the factor.
    /// let linear = RopeConfig::new(4, 10_000.0).with_scaling(Scaling::Linear { factor: 4.0 });
    /// assert_eq!(Frequencies::new(&linear, 0)?.inv_freq(), &[0.25, 0.0025]);
    /// # Ok::<(), rope_kernels::RopeError>(())
    /// ```
    ///
    /// # Errors
    /// Any error of [`RopeConfig::validate`]; also [`RopeError::InvalidTheta`] or
    /// [`RopeError::InvalidScalingParameter`] (`"factor"`) when a theta or factor that
    /// passes it is so small that an `inv_freq` overflows f64.
    pub fn new(config: &RopeConfig, seq_len: u64) -> Result<Self, RopeError> {
        config.validate()?;
        let _ = seq_len;
        let pairs = config.pairs();
        let mut f = Frequencies {
            inv_freq: [0.0; MAX_PAIRS],
            inv_freq_f32: [0.0; MAX_PAIRS],
            pairs,
            attention_factor: 1.0,
        };
        let dim = config.rotary_dim as f64;
        for (i, v) in f.inv_freq[..pairs].iter_mut().enumerate() {
            *v = 1.0 / libm::pow(config.theta, (2 * i) as f64 / dim);
        }
        // A finite theta > 0 can still be so small (subnormal) that `theta^(2i/d)` underflows
        // and its inverse overflows; an infinite frequency would make every output NaN.
        if !all_finite(&f.inv_freq[..pairs]) {
            return Err(RopeError::InvalidTheta);
        }
        match config.scaling {
            Scaling::None => {}
            Scaling::Linear { factor } => {
                f.inv_freq[..pairs].iter_mut().for_each(|v| *v /= factor);
                // Likewise for a tiny factor (e.g. 1e-310).
                if !all_finite(&f.inv_freq[..pairs]) {
                    return Err(RopeError::InvalidScalingParameter { name: "factor" });
                }
            }
        }
        f.sync_f32();
        Ok(f)
    }

    /// Replaces the f32 table used by [`AngleMode::HfCompatible`](crate::AngleMode) with
    /// the caller's (e.g. the `inv_freq` buffer exported from transformers).
    ///
    /// ```
    /// use rope_kernels::{Frequencies, RopeConfig, RopeError};
    ///
    /// let mut f = Frequencies::new(&RopeConfig::new(4, 10_000.0), 0)?;
    /// f.set_inv_freq_f32(&[1.0, 0.0099999998])?;
    /// assert_eq!(f.inv_freq_f32(), &[1.0, 0.0099999998]);
    /// assert_eq!(f.set_inv_freq_f32(&[1.0]), Err(RopeError::TableShape));
    /// # Ok::<(), RopeError>(())
    /// ```
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
