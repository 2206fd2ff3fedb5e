//! Rotation frequencies (`inv_freq`) and the attention factor, for every scaling method.
//!
//! Everything is computed in f64 with `libm`. The unscaled frequencies are
//! `inv_freq[i] = 1 / theta^(2i / rotary_dim)` for `i in 0..rotary_dim / 2` (Su et al. 2021,
//! "RoFormer", eq. 15; HF `_compute_default_rope_parameters` in
//! `transformers/modeling_rope_utils.py`). Each [`Scaling`] method maps them, and sets the
//! `attention_factor` that multiplies cos and sin, with the semantics of the matching
//! Hugging Face transformers function (named in each variant's documentation), evaluated
//! in f64 instead of transformers' f32.

use core::f64::consts::PI;
use core::fmt;

use crate::config::{RopeConfig, RopeParams, MAX_PAIRS};
use crate::error::RopeError;

/// Per-pair factors (LongRoPE `short_factor`/`long_factor`, ggml `freq_factors`), stored
/// inline: up to [`MAX_PAIRS`] values, no allocation.
///
/// The length is checked against `rotary_dim / 2` when the configuration is validated,
/// the values (finite and > 0) too.
#[derive(Clone, PartialEq)]
pub struct PairFactors {
    values: [f64; MAX_PAIRS],
    len: usize,
}

impl PairFactors {
    /// Copies `values`; `None` if there are more than [`MAX_PAIRS`].
    pub fn from_slice(values: &[f64]) -> Option<Self> {
        if values.len() > MAX_PAIRS {
            return None;
        }
        let mut f = PairFactors { values: [0.0; MAX_PAIRS], len: values.len() };
        f.values[..values.len()].copy_from_slice(values);
        Some(f)
    }

    /// The factors, one per pair.
    pub fn as_slice(&self) -> &[f64] {
        &self.values[..self.len]
    }

    /// Number of factors.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when there is no factor.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl fmt::Debug for PairFactors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.as_slice()).finish()
    }
}

/// Parameters of YaRN ([`Scaling::Yarn`]). Build with [`YarnParams::new`] and the `with_*`
/// builders; the fields are public for reading and adjusting.
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub struct YarnParams {
    /// Context extension factor `s` (HF `factor`; when a config omits it, transformers uses
    /// `max_position_embeddings / original_max_position_embeddings`). Finite and > 0.
    pub factor: f64,
    /// The pretraining context length `L_orig` (HF `original_max_position_embeddings`). > 0.
    pub original_max_position_embeddings: u64,
    /// Rotations per `L_orig` above which a pair is left unscaled (extrapolated). Default 32.
    pub beta_fast: f64,
    /// Rotations per `L_orig` below which a pair is fully interpolated. Default 1.
    pub beta_slow: f64,
    /// DeepSeek `mscale` (numerator of the attention factor), used only with a non-zero
    /// `mscale_all_dim`.
    pub mscale: Option<f64>,
    /// DeepSeek `mscale_all_dim` (denominator of the attention factor).
    pub mscale_all_dim: Option<f64>,
    /// An explicit attention factor, used verbatim when set.
    pub attention_factor: Option<f64>,
    /// Round the correction range outwards to whole dimensions (default `true`; gpt-oss
    /// uses `false`).
    pub truncate: bool,
}

impl YarnParams {
    /// YaRN with the paper's defaults: `beta_fast = 32`, `beta_slow = 1`, no mscale, the
    /// derived attention factor, `truncate = true`.
    pub fn new(factor: f64, original_max_position_embeddings: u64) -> Self {
        YarnParams {
            factor,
            original_max_position_embeddings,
            beta_fast: 32.0,
            beta_slow: 1.0,
            mscale: None,
            mscale_all_dim: None,
            attention_factor: None,
            truncate: true,
        }
    }

    /// Builder: set `beta_fast` and `beta_slow`.
    pub fn with_beta(mut self, beta_fast: f64, beta_slow: f64) -> Self {
        self.beta_fast = beta_fast;
        self.beta_slow = beta_slow;
        self
    }

    /// Builder: set DeepSeek's `mscale` and `mscale_all_dim`.
    pub fn with_mscale(mut self, mscale: f64, mscale_all_dim: f64) -> Self {
        self.mscale = Some(mscale);
        self.mscale_all_dim = Some(mscale_all_dim);
        self
    }

    /// Builder: an explicit attention factor, used verbatim.
    pub fn with_attention_factor(mut self, attention_factor: f64) -> Self {
        self.attention_factor = Some(attention_factor);
        self
    }

    /// Builder: set `truncate`.
    pub fn with_truncate(mut self, truncate: bool) -> Self {
        self.truncate = truncate;
        self
    }

    /// The attention factor: the explicit one if set; else, when `mscale` and
    /// `mscale_all_dim` are both set and non-zero, `m(s, mscale) / m(s, mscale_all_dim)`;
    /// else `m(s, 1)`, with `m(s, k) = 0.1 * k * ln(s) + 1` for `s > 1` and 1 otherwise
    /// (YaRN paper eq. 22 `sqrt(1/t) = 0.1 ln(s) + 1`; HF `get_mscale`).
    pub fn attention_factor(&self) -> f64 {
        if let Some(a) = self.attention_factor {
            return a;
        }
        let m = |k: f64| if self.factor <= 1.0 { 1.0 } else { 0.1 * k * libm::log(self.factor) + 1.0 };
        match (self.mscale, self.mscale_all_dim) {
            (Some(a), Some(b)) if a != 0.0 && b != 0.0 => m(a) / m(b),
            _ => m(1.0),
        }
    }

    /// The correction range `(low, high)` in pair indices, for `rotary_dim` and `theta`:
    /// `d(r) = rotary_dim * ln(L_orig / (2 pi r)) / (2 ln theta)` at `r = beta_fast` and
    /// `r = beta_slow`, rounded outwards (floor, ceil) when `truncate`, then clamped to
    /// `[0, rotary_dim - 1]` (HF `find_correction_range`).
    pub fn correction_range(&self, rotary_dim: usize, theta: f64) -> (f64, f64) {
        let d = rotary_dim as f64;
        let orig = self.original_max_position_embeddings as f64;
        let dim_of = |r: f64| (d * libm::log(orig / (r * 2.0 * PI))) / (2.0 * libm::log(theta));
        let (mut low, mut high) = (dim_of(self.beta_fast), dim_of(self.beta_slow));
        if self.truncate {
            low = libm::floor(low);
            high = libm::ceil(high);
        }
        (low.max(0.0), high.min(d - 1.0))
    }
}

/// Parameters of LongRoPE ([`Scaling::LongRope`]).
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct LongRopeParams {
    /// Per-pair divisors used while `L <= original_max_position_embeddings`
    /// (`rotary_dim / 2` values, finite and > 0).
    pub short_factor: PairFactors,
    /// Per-pair divisors used when `L > original_max_position_embeddings`.
    pub long_factor: PairFactors,
    /// The pretraining context length (HF `original_max_position_embeddings`, top level in
    /// Phi-3 configs). > 0.
    pub original_max_position_embeddings: u64,
    /// Context extension factor for the attention factor only (HF `factor`, by default
    /// `max_position_embeddings / original_max_position_embeddings`). Finite and > 0.
    pub factor: f64,
    /// An explicit attention factor, used verbatim when set.
    pub attention_factor: Option<f64>,
}

impl LongRopeParams {
    /// LongRoPE from the two factor arrays.
    ///
    /// # Errors
    /// [`RopeError::InvalidScalingParameter`] (`"short_factor"` / `"long_factor"`) if an
    /// array has more than [`MAX_PAIRS`] values. Lengths against `rotary_dim / 2` and the
    /// values are checked by [`Scaling::validate`].
    pub fn new(
        short_factor: &[f64],
        long_factor: &[f64],
        original_max_position_embeddings: u64,
        factor: f64,
    ) -> Result<Self, RopeError> {
        let short_factor = PairFactors::from_slice(short_factor)
            .ok_or(RopeError::InvalidScalingParameter { name: "short_factor" })?;
        let long_factor = PairFactors::from_slice(long_factor)
            .ok_or(RopeError::InvalidScalingParameter { name: "long_factor" })?;
        Ok(LongRopeParams {
            short_factor,
            long_factor,
            original_max_position_embeddings,
            factor,
            attention_factor: None,
        })
    }

    /// Builder: an explicit attention factor, used verbatim.
    pub fn with_attention_factor(mut self, attention_factor: f64) -> Self {
        self.attention_factor = Some(attention_factor);
        self
    }

    /// The attention factor: the explicit one if set; else
    /// `sqrt(1 + ln(factor) / ln(original_max_position_embeddings))` for `factor > 1`, and 1
    /// otherwise (HF `_compute_longrope_parameters`).
    pub fn attention_factor(&self) -> f64 {
        self.as_ref().attention_factor()
    }

    /// The same parameters with borrowed factor arrays.
    #[inline]
    pub fn as_ref(&self) -> LongRopeRef<'_> {
        LongRopeRef {
            short_factor: self.short_factor.as_slice(),
            long_factor: self.long_factor.as_slice(),
            original_max_position_embeddings: self.original_max_position_embeddings,
            factor: self.factor,
            attention_factor: self.attention_factor,
        }
    }
}

/// [`LongRopeParams`] with borrowed factor arrays (no copy): the form [`ScalingRef`] holds.
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub struct LongRopeRef<'a> {
    /// As [`LongRopeParams::short_factor`].
    pub short_factor: &'a [f64],
    /// As [`LongRopeParams::long_factor`].
    pub long_factor: &'a [f64],
    /// As [`LongRopeParams::original_max_position_embeddings`].
    pub original_max_position_embeddings: u64,
    /// As [`LongRopeParams::factor`].
    pub factor: f64,
    /// As [`LongRopeParams::attention_factor`](field@LongRopeParams::attention_factor).
    pub attention_factor: Option<f64>,
}

impl<'a> LongRopeRef<'a> {
    /// LongRoPE from borrowed factor arrays (checked by [`ScalingRef::validate`]).
    pub fn new(
        short_factor: &'a [f64],
        long_factor: &'a [f64],
        original_max_position_embeddings: u64,
        factor: f64,
        attention_factor: Option<f64>,
    ) -> Self {
        LongRopeRef { short_factor, long_factor, original_max_position_embeddings, factor, attention_factor }
    }

    /// As [`LongRopeParams::attention_factor`](LongRopeParams::attention_factor()).
    pub fn attention_factor(&self) -> f64 {
        if let Some(a) = self.attention_factor {
            return a;
        }
        if self.factor <= 1.0 {
            return 1.0;
        }
        let orig = self.original_max_position_embeddings as f64;
        libm::sqrt(1.0 + libm::log(self.factor) / libm::log(orig))
    }
}

/// Frequency scaling for context extension. `#[non_exhaustive]`: match with a wildcard.
///
/// In the formulas, `d = rotary_dim`, `i` is the pair index (`0..d/2`),
/// `b_i = theta^(-2i/d)` is the unscaled frequency, `L` is the length a call sees
/// (largest position + 1). Every variant is checked by [`Scaling::validate`]; invalid
/// parameters give [`RopeError::InvalidScalingParameter`], never NaN.
///
/// `LongRope` and `FreqFactors` hold their arrays inline (no allocation), which makes the
/// enum a few KiB large.
#[derive(Clone, Debug, PartialEq, Default)]
#[non_exhaustive]
#[allow(clippy::large_enum_variant)] // inline arrays: no allocation, `no_std` without `alloc`
pub enum Scaling {
    /// No scaling (HF `rope_type: "default"`): `inv_freq[i] = b_i`, attention factor 1.
    #[default]
    None,
    /// Linear position interpolation (Chen et al. 2023, "Extending Context Window of Large
    /// Language Models via Positional Interpolation"; HF `_compute_linear_scaling_rope_parameters`,
    /// `rope_type: "linear"`): `inv_freq[i] = b_i / factor`. Attention factor 1.
    Linear {
        /// The interpolation factor, finite and > 0.
        factor: f64,
    },
    /// Dynamic NTK scaling (bloc97 and emozilla, 2023, "Dynamically Scaled RoPE"; HF
    /// `_compute_dynamic_ntk_parameters` with `dynamic_rope_update`, `rope_type: "dynamic"`).
    /// Chosen for every call from its `L`: when `L > max_position_embeddings`,
    /// `theta' = theta * (factor * L / max_position_embeddings - (factor - 1))^(d / (d - 2))`
    /// and `inv_freq[i] = theta'^(-2i/d)`; otherwise the unscaled `b_i`. Nothing is kept
    /// between calls (transformers keeps the grown table until the length drops below the
    /// original one; here a shorter call always gets the frequencies of its own `L`). Only
    /// on-the-fly calls past `max_position_embeddings` compute them (a call with a cos/sin
    /// table uses none; up to there the stored unscaled ones serve).
    /// Attention factor 1. Needs `d > 2`.
    DynamicNtk {
        /// Finite and > 0.
        factor: f64,
        /// HF `max_position_embeddings`, > 0.
        max_position_embeddings: u64,
    },
    /// Static NTK-aware scaling (bloc97, 2023, "NTK-Aware Scaled RoPE"; HunYuan's
    /// `rope_scaling: {"type": "dynamic", "alpha": ...}` in transformers
    /// `models/hunyuan_v1_dense/modeling_hunyuan_v1_dense.py`):
    /// `theta' = theta * alpha^(d / (d - 2))`, `inv_freq[i] = theta'^(-2i/d)`. Attention
    /// factor 1. Needs `d > 2`.
    NtkAlpha {
        /// Finite and > 0.
        alpha: f64,
    },
    /// YaRN (Peng et al. 2023, "YaRN: Efficient Context Window Extension of Large Language
    /// Models", arXiv:2309.00071; HF `_compute_yarn_parameters`, `rope_type: "yarn"`).
    /// With `(low, high)` from [`YarnParams::correction_range`] (`high += 0.001` if equal),
    /// `ramp_i = clamp((i - low) / (high - low), 0, 1)`:
    /// `inv_freq[i] = b_i / factor * ramp_i + b_i * (1 - ramp_i)`; the attention factor is
    /// [`YarnParams::attention_factor`].
    Yarn(YarnParams),
    /// Llama 3.1 (Meta `apply_scaling` in the llama-models reference; HF
    /// `_compute_llama3_parameters`, `rope_type: "llama3"`). With wavelength
    /// `w_i = 2 pi / b_i`, `L_orig = original_max_position_embeddings`: `w_i < L_orig /
    /// high_freq_factor` keeps `b_i`; `w_i > L_orig / low_freq_factor` gives `b_i / factor`;
    /// in between, `s = (L_orig / w_i - low_freq_factor) / (high_freq_factor -
    /// low_freq_factor)` and `inv_freq[i] = (1 - s) * b_i / factor + s * b_i`. Attention
    /// factor 1.
    ///
    /// `low_freq_factor == high_freq_factor` (Llama 4 Scout: both 1) has no blend band:
    /// `w_i > L_orig / low_freq_factor` gives `b_i / factor`, every other pair keeps `b_i`.
    /// (At `w_i == L_orig / low_freq_factor` exactly, HF's smooth formula is `0 / 0`, NaN;
    /// this crate keeps `b_i` there, the limit of the band from the high-frequency side.)
    Llama3 {
        /// Finite and > 0.
        factor: f64,
        /// Finite, > 0 and ≤ `high_freq_factor`.
        low_freq_factor: f64,
        /// Finite.
        high_freq_factor: f64,
        /// > 0.
        original_max_position_embeddings: u64,
    },
    /// LongRoPE (Ding et al. 2024, "LongRoPE: Extending LLM Context Window Beyond 2 Million
    /// Tokens", arXiv:2402.13753; HF `_compute_longrope_parameters`, `rope_type: "longrope"`,
    /// legacy `"su"`): `inv_freq[i] = b_i / ext_i` with `ext = long_factor` when
    /// `L > original_max_position_embeddings` and `short_factor` otherwise, chosen per call
    /// (both sets computed once, by [`Rope::new`](crate::Rope::new) or
    /// [`RopeState::init`](crate::RopeState::init));
    /// the attention factor is [`LongRopeParams::attention_factor`].
    LongRope(LongRopeParams),
    /// Proportional RoPE (Gemma 4 global layers; HF `_compute_proportional_rope_parameters`,
    /// `rope_type: "proportional"`): the first `n = floor(partial_rotary_factor * d / 2)`
    /// pairs get `b_i / factor`, the remaining `d/2 - n` pairs frequency 0 (identity). The
    /// exponents run over the whole `d`; set `rotary_dim = head_dim` to match
    /// transformers, which rotates the whole head this way. Attention factor 1.
    Proportional {
        /// Finite and > 0 (transformers' default 1).
        factor: f64,
        /// Share of the pairs that rotate, in `(0, 1]`.
        partial_rotary_factor: f64,
    },
    /// Custom per-pair frequency divisors (ggml `freq_factors`, the optional third source of
    /// `ggml_rope_ext`, as llama.cpp uses for `rope_freqs.weight`):
    /// `inv_freq[i] = b_i / freq_factors[i]`. Attention factor 1.
    FreqFactors(PairFactors),
}

impl Scaling {
    /// Per-pair divisors ([`Scaling::FreqFactors`]) copied from `freq_factors`.
    ///
    /// # Errors
    /// [`RopeError::InvalidScalingParameter`] (`"freq_factors"`) for more than
    /// [`MAX_PAIRS`] values; the length against `rotary_dim / 2` and the values are
    /// checked by [`Scaling::validate`].
    pub fn freq_factors(freq_factors: &[f64]) -> Result<Self, RopeError> {
        PairFactors::from_slice(freq_factors)
            .map(Scaling::FreqFactors)
            .ok_or(RopeError::InvalidScalingParameter { name: "freq_factors" })
    }

    /// The method's name: the HF `rope_type` where there is one (`"default"`, `"linear"`,
    /// `"dynamic"`, `"yarn"`, `"llama3"`, `"longrope"`, `"proportional"`), else
    /// `"ntk_alpha"` or `"freq_factors"`.
    pub fn name(&self) -> &'static str {
        match self {
            Scaling::None => "default",
            Scaling::Linear { .. } => "linear",
            Scaling::DynamicNtk { .. } => "dynamic",
            Scaling::NtkAlpha { .. } => "ntk_alpha",
            Scaling::Yarn(_) => "yarn",
            Scaling::Llama3 { .. } => "llama3",
            Scaling::LongRope(_) => "longrope",
            Scaling::Proportional { .. } => "proportional",
            Scaling::FreqFactors(_) => "freq_factors",
        }
    }

    /// Checks the parameters against `rotary_dim` (see [`ScalingRef::validate`]).
    ///
    /// # Errors
    /// Those of [`ScalingRef::validate`].
    pub fn validate(&self, rotary_dim: usize) -> Result<(), RopeError> {
        self.as_ref().validate(rotary_dim)
    }

    /// True when the frequencies depend on the sequence length of the call (dynamic NTK,
    /// LongRoPE), so they are recomputed per call instead of once.
    pub fn depends_on_seq_len(&self) -> bool {
        self.as_ref().depends_on_seq_len()
    }

    /// The same scaling with borrowed arrays (no copy).
    #[inline]
    pub fn as_ref(&self) -> ScalingRef<'_> {
        match self {
            Scaling::None => ScalingRef::None,
            Scaling::Linear { factor } => ScalingRef::Linear { factor: *factor },
            Scaling::DynamicNtk { factor, max_position_embeddings } => {
                ScalingRef::DynamicNtk { factor: *factor, max_position_embeddings: *max_position_embeddings }
            }
            Scaling::NtkAlpha { alpha } => ScalingRef::NtkAlpha { alpha: *alpha },
            Scaling::Yarn(p) => ScalingRef::Yarn(*p),
            Scaling::Llama3 {
                factor,
                low_freq_factor,
                high_freq_factor,
                original_max_position_embeddings,
            } => ScalingRef::Llama3 {
                factor: *factor,
                low_freq_factor: *low_freq_factor,
                high_freq_factor: *high_freq_factor,
                original_max_position_embeddings: *original_max_position_embeddings,
            },
            Scaling::LongRope(p) => ScalingRef::LongRope(p.as_ref()),
            Scaling::Proportional { factor, partial_rotary_factor } => {
                ScalingRef::Proportional { factor: *factor, partial_rotary_factor: *partial_rotary_factor }
            }
            Scaling::FreqFactors(f) => ScalingRef::FreqFactors(f.as_slice()),
        }
    }
}

/// [`Scaling`] with borrowed arrays: a few words instead of [`Scaling`]'s inline arrays, for
/// building a RoPE in caller memory without a large value on the stack
/// ([`RopeParams`], [`RopeState`](crate::RopeState)). The formulas are those of the
/// matching [`Scaling`] variant.
#[derive(Clone, Copy, Debug, PartialEq, Default)]
#[non_exhaustive]
pub enum ScalingRef<'a> {
    /// [`Scaling::None`].
    #[default]
    None,
    /// [`Scaling::Linear`].
    Linear {
        /// The interpolation factor.
        factor: f64,
    },
    /// [`Scaling::DynamicNtk`].
    DynamicNtk {
        /// The factor.
        factor: f64,
        /// HF `max_position_embeddings`.
        max_position_embeddings: u64,
    },
    /// [`Scaling::NtkAlpha`].
    NtkAlpha {
        /// The alpha.
        alpha: f64,
    },
    /// [`Scaling::Yarn`].
    Yarn(YarnParams),
    /// [`Scaling::Llama3`].
    Llama3 {
        /// The factor.
        factor: f64,
        /// HF `low_freq_factor`.
        low_freq_factor: f64,
        /// HF `high_freq_factor`.
        high_freq_factor: f64,
        /// HF `original_max_position_embeddings`.
        original_max_position_embeddings: u64,
    },
    /// [`Scaling::LongRope`].
    LongRope(LongRopeRef<'a>),
    /// [`Scaling::Proportional`].
    Proportional {
        /// The factor.
        factor: f64,
        /// Share of the pairs that rotate.
        partial_rotary_factor: f64,
    },
    /// [`Scaling::FreqFactors`].
    FreqFactors(&'a [f64]),
}

impl ScalingRef<'_> {
    /// Checks the parameters against `rotary_dim`.
    ///
    /// # Errors
    /// [`RopeError::InvalidScalingParameter`] naming the first bad parameter:
    /// `"factor"`, `"alpha"`, `"attention_factor"`, `"beta_fast"`, `"beta_slow"`,
    /// `"mscale"`, `"mscale_all_dim"`, `"low_freq_factor"`, `"high_freq_factor"`,
    /// `"original_max_position_embeddings"`, `"max_position_embeddings"`,
    /// `"short_factor"`, `"long_factor"`, `"freq_factors"`, `"partial_rotary_factor"` for
    /// a value that is not finite or out of its domain (factors ≤ 0, lengths of 0, arrays
    /// whose length is not `rotary_dim / 2`, `beta_fast <= beta_slow`,
    /// `low_freq_factor > high_freq_factor`, an mscale pair whose attention factor is not
    /// finite and > 0), and `"rotary_dim"` for NTK scaling with `rotary_dim <= 2`.
    pub fn validate(&self, rotary_dim: usize) -> Result<(), RopeError> {
        let pairs = rotary_dim / 2;
        match self {
            ScalingRef::None => Ok(()),
            ScalingRef::Linear { factor } => positive_finite(*factor, "factor"),
            ScalingRef::DynamicNtk { factor, max_position_embeddings } => {
                positive_finite(*factor, "factor")?;
                nonzero(*max_position_embeddings, "max_position_embeddings")?;
                ntk_dim(rotary_dim)
            }
            ScalingRef::NtkAlpha { alpha } => {
                positive_finite(*alpha, "alpha")?;
                ntk_dim(rotary_dim)
            }
            ScalingRef::Yarn(p) => {
                positive_finite(p.factor, "factor")?;
                nonzero(p.original_max_position_embeddings, "original_max_position_embeddings")?;
                positive_finite(p.beta_fast, "beta_fast")?;
                positive_finite(p.beta_slow, "beta_slow")?;
                if p.beta_fast <= p.beta_slow {
                    return Err(RopeError::InvalidScalingParameter { name: "beta_fast" });
                }
                if let Some(m) = p.mscale {
                    finite(m, "mscale")?;
                }
                if let Some(m) = p.mscale_all_dim {
                    finite(m, "mscale_all_dim")?;
                }
                match p.attention_factor {
                    Some(a) => positive_finite(a, "attention_factor"),
                    None => positive_finite(p.attention_factor(), "mscale_all_dim"),
                }
            }
            ScalingRef::Llama3 {
                factor,
                low_freq_factor,
                high_freq_factor,
                original_max_position_embeddings,
            } => {
                positive_finite(*factor, "factor")?;
                positive_finite(*low_freq_factor, "low_freq_factor")?;
                finite(*high_freq_factor, "high_freq_factor")?;
                // Equal factors (Llama 4) are a band of width 0; see `Scaling::Llama3`.
                if low_freq_factor > high_freq_factor {
                    return Err(RopeError::InvalidScalingParameter { name: "low_freq_factor" });
                }
                nonzero(*original_max_position_embeddings, "original_max_position_embeddings")
            }
            ScalingRef::LongRope(p) => {
                check_factors(p.short_factor, pairs, "short_factor")?;
                check_factors(p.long_factor, pairs, "long_factor")?;
                nonzero(p.original_max_position_embeddings, "original_max_position_embeddings")?;
                positive_finite(p.factor, "factor")?;
                match p.attention_factor {
                    Some(a) => positive_finite(a, "attention_factor"),
                    // ln(1) = 0 in the denominator.
                    None => positive_finite(p.attention_factor(), "original_max_position_embeddings"),
                }
            }
            ScalingRef::Proportional { factor, partial_rotary_factor } => {
                positive_finite(*factor, "factor")?;
                let p = *partial_rotary_factor;
                if !(p.is_finite() && p > 0.0 && p <= 1.0) {
                    return Err(RopeError::InvalidScalingParameter { name: "partial_rotary_factor" });
                }
                Ok(())
            }
            ScalingRef::FreqFactors(f) => check_factors(f, pairs, "freq_factors"),
        }
    }

    /// True when the frequencies depend on the sequence length of the call (dynamic NTK,
    /// LongRoPE), so they are recomputed per call instead of once.
    pub fn depends_on_seq_len(&self) -> bool {
        matches!(self, ScalingRef::DynamicNtk { .. } | ScalingRef::LongRope(_))
    }

    /// The parameter blamed when a computed frequency is not finite (overflow or
    /// underflow from extreme but individually valid values).
    pub(crate) fn primary_parameter(&self) -> &'static str {
        match self {
            ScalingRef::NtkAlpha { .. } => "alpha",
            ScalingRef::LongRope(_) => "long_factor",
            ScalingRef::FreqFactors(_) => "freq_factors",
            _ => "factor",
        }
    }
}

/// Length `pairs`, every value finite and > 0; else the error names `name`.
fn check_factors(f: &[f64], pairs: usize, name: &'static str) -> Result<(), RopeError> {
    if f.len() != pairs || f.iter().any(|v| !(v.is_finite() && *v > 0.0)) {
        return Err(RopeError::InvalidScalingParameter { name });
    }
    Ok(())
}

fn finite(v: f64, name: &'static str) -> Result<(), RopeError> {
    if v.is_finite() {
        Ok(())
    } else {
        Err(RopeError::InvalidScalingParameter { name })
    }
}

fn positive_finite(v: f64, name: &'static str) -> Result<(), RopeError> {
    if v.is_finite() && v > 0.0 {
        Ok(())
    } else {
        Err(RopeError::InvalidScalingParameter { name })
    }
}

fn nonzero(v: u64, name: &'static str) -> Result<(), RopeError> {
    if v == 0 {
        Err(RopeError::InvalidScalingParameter { name })
    } else {
        Ok(())
    }
}

/// NTK scaling raises to `d / (d - 2)`.
fn ntk_dim(rotary_dim: usize) -> Result<(), RopeError> {
    if rotary_dim > 2 {
        Ok(())
    } else {
        Err(RopeError::InvalidScalingParameter { name: "rotary_dim" })
    }
}

/// The largest accepted `inv_freq`, 2^95 radians per position: the angle of any `u32`
/// position is then below 2^127, finite in f32 (`HfCompatible`) as in f64. Real models use
/// at most 1 (theta > 1); larger values only come from degenerate parameters, whose cos/sin
/// would otherwise be NaN.
pub(crate) const MAX_INV_FREQ: f64 = 39_614_081_257_132_168_796_771_975_168.0; // 2^95

/// The frequencies of one configuration at one sequence length: `rotary_dim / 2` values of
/// `inv_freq` (radians per position) and the `attention_factor` that multiplies cos and
/// sin. Fixed-size, so it lives on the stack.
#[derive(Clone, Debug, PartialEq)]
pub struct Frequencies {
    inv_freq: [f64; MAX_PAIRS],
    inv_freq_f32: [f32; MAX_PAIRS],
    pairs: usize,
    attention_factor: f64,
    /// The f32 table came from the caller and survives per-call recomputation.
    caller_f32: bool,
    // `inv_freq / 2π` (turns per position) modulo 1, split as `turns_hi + turns_lo` with
    // `turns_hi` of at most 21 significant bits, for the exact range reduction of the
    // cos/sin generator (`kernels::sincos`). Derived from `inv_freq` in `sync_f32`.
    turns_hi: [f64; MAX_PAIRS],
    turns_lo: [f64; MAX_PAIRS],
}

impl Frequencies {
    /// Computes the frequencies of `config` for a call whose largest position is
    /// `seq_len - 1` (`seq_len` matters only when [`Scaling::depends_on_seq_len`]; 0 means
    /// "no call yet": original frequencies for dynamic NTK, short factors for LongRoPE).
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
    /// Any error of [`RopeConfig::validate`]; [`RopeError::InvalidScalingParameter`]
    /// (`"rope_theta"`) for YaRN with `theta == 1` (its correction range divides by
    /// `ln theta`); [`RopeError::InvalidTheta`] when a theta that passes validation is so
    /// small that an unscaled `inv_freq` exceeds 2^95 radians per position (the bound that
    /// keeps the angle of every `u32` position finite in f32 as well as in f64);
    /// [`RopeError::InvalidScalingParameter`] (naming the method's main parameter) if
    /// individually valid parameters still give a frequency that is not finite or exceeds
    /// 2^95; and [`RopeError::InvalidScalingParameter`] (`"attention_factor"`) for an
    /// attention factor above `f32::MAX` (cos/sin rows are f32).
    pub fn new(config: &RopeConfig, seq_len: u64) -> Result<Self, RopeError> {
        let params = config.params();
        params.validate()?;
        let pairs = params.pairs();
        let mut f = Frequencies {
            inv_freq: [0.0; MAX_PAIRS],
            inv_freq_f32: [0.0; MAX_PAIRS],
            pairs,
            attention_factor: 1.0,
            caller_f32: false,
            turns_hi: [0.0; MAX_PAIRS],
            turns_lo: [0.0; MAX_PAIRS],
        };
        f.attention_factor = compute_inv_freq(&params, seq_len, &mut f.inv_freq[..pairs])?;
        f.sync_f32();
        Ok(f)
    }

    /// The frequencies of `config` at `seq_len`, keeping this object's f32 table if it
    /// came from the caller ([`Frequencies::set_inv_freq_f32`]).
    pub(crate) fn at_seq_len(&self, config: &RopeConfig, seq_len: u64) -> Result<Self, RopeError> {
        let mut f = Frequencies::new(config, seq_len)?;
        if self.caller_f32 {
            f.inv_freq_f32 = self.inv_freq_f32;
            f.caller_f32 = true;
        }
        Ok(f)
    }

    /// Replaces the f32 table used by [`AngleMode::HfCompatible`](crate::AngleMode) with
    /// the caller's (e.g. the `inv_freq` buffer exported from transformers). The table is
    /// used verbatim from then on, also where the f64 frequencies are recomputed per call
    /// (dynamic NTK, LongRoPE); the attention factor stays the computed one.
    ///
    /// ```
    /// use rope_kernels::{Frequencies, RopeConfig, RopeError};
    ///
    /// let mut f = Frequencies::new(&RopeConfig::new(4, 10_000.0), 0)?;
    /// f.set_inv_freq_f32(&[1.0, 0.0099999998])?;
    /// assert_eq!(f.inv_freq_f32(), &[1.0, 0.0099999998]);
    /// assert_eq!(f.set_inv_freq_f32(&[1.0]), Err(RopeError::InvFreqLength { expected: 2, len: 1 }));
    /// # Ok::<(), RopeError>(())
    /// ```
    ///
    /// # Errors
    /// [`RopeError::InvFreqLength`] if `inv_freq_f32.len() != rotary_dim / 2`;
    /// [`RopeError::InvalidScalingParameter`] (`"inv_freq"`) for a value that is not in
    /// `[0, 2^95]` (larger ones overflow the f32 angle of large positions). Nothing changes
    /// on error.
    pub fn set_inv_freq_f32(&mut self, inv_freq_f32: &[f32]) -> Result<(), RopeError> {
        if inv_freq_f32.len() != self.pairs {
            return Err(RopeError::InvFreqLength { expected: self.pairs, len: inv_freq_f32.len() });
        }
        if !inv_freq_f32.iter().all(|v| (0.0..=MAX_INV_FREQ).contains(&f64::from(*v))) {
            return Err(RopeError::InvalidScalingParameter { name: "inv_freq" });
        }
        self.inv_freq_f32[..self.pairs].copy_from_slice(inv_freq_f32);
        self.caller_f32 = true;
        Ok(())
    }

    fn sync_f32(&mut self) {
        for i in 0..self.pairs {
            self.inv_freq_f32[i] = self.inv_freq[i] as f32;
        }
        let n = self.pairs;
        crate::kernels::sincos::split_turns(
            &self.inv_freq[..n],
            &mut self.turns_hi[..n],
            &mut self.turns_lo[..n],
        );
    }

    /// High parts of `inv_freq / 2π mod 1` (at most 21 significant bits each).
    #[inline]
    pub(crate) fn turns_hi(&self) -> &[f64] {
        &self.turns_hi[..self.pairs]
    }

    /// Low parts of `inv_freq / 2π mod 1`.
    #[inline]
    pub(crate) fn turns_lo(&self) -> &[f64] {
        &self.turns_lo[..self.pairs]
    }

    /// `inv_freq`, `rotary_dim / 2` values, radians per position.
    #[inline]
    pub fn inv_freq(&self) -> &[f64] {
        &self.inv_freq[..self.pairs]
    }

    /// The f32 `inv_freq` table of [`AngleMode::HfCompatible`](crate::AngleMode): `inv_freq`
    /// rounded to nearest f32, or the caller's table.
    #[inline]
    pub fn inv_freq_f32(&self) -> &[f32] {
        &self.inv_freq_f32[..self.pairs]
    }

    /// True when the f32 table is the caller's ([`Frequencies::set_inv_freq_f32`]).
    #[inline]
    pub fn has_caller_inv_freq_f32(&self) -> bool {
        self.caller_f32
    }

    /// The factor multiplying cos and sin (1 unless YaRN or LongRoPE set it).
    #[inline]
    pub fn attention_factor(&self) -> f64 {
        self.attention_factor
    }

    /// Number of pairs, `rotary_dim / 2`.
    #[inline]
    pub fn pairs(&self) -> usize {
        self.pairs
    }

    /// The tables the cos/sin rows are computed from, borrowed.
    #[inline]
    pub(crate) fn view(&self) -> FreqRef<'_> {
        FreqRef {
            inv_freq: self.inv_freq(),
            inv_freq_f32: self.inv_freq_f32(),
            turns_hi: self.turns_hi(),
            turns_lo: self.turns_lo(),
            attention_factor: self.attention_factor,
        }
    }
}

/// Writes the `inv_freq` of validated `config` at `seq_len` into `inv` (`rotary_dim / 2`
/// values) and returns the attention factor: the computation of [`Frequencies::new`], into
/// any destination (issue 13: the frequencies of a RoPE in caller memory are computed where
/// they are kept). `inv` holds garbage on error.
///
/// # Errors
/// Those of [`Frequencies::new`] after validation.
pub(crate) fn compute_inv_freq(
    config: &RopeParams<'_>,
    seq_len: u64,
    inv: &mut [f64],
) -> Result<f64, RopeError> {
    debug_assert_eq!(inv.len(), config.pairs());
    for_each_inv_freq(config, seq_len, &mut |i, v| inv[i] = v)
}

/// Checks that the frequencies of validated `config` at `seq_len` are computable, writing
/// nothing (the errors of [`compute_inv_freq`]).
pub(crate) fn check_inv_freq(config: &RopeParams<'_>, seq_len: u64) -> Result<f64, RopeError> {
    for_each_inv_freq(config, seq_len, &mut |_, _| {})
}

/// Computes `inv_freq[i]` of validated `config` at `seq_len` for every pair in order, hands
/// each to `sink`, and returns the attention factor, or the error of a value out of range.
/// One instance for every sink (`dyn`): the computation is linked once (issue 13).
fn for_each_inv_freq(
    config: &RopeParams<'_>,
    seq_len: u64,
    sink: &mut dyn FnMut(usize, f64),
) -> Result<f64, RopeError> {
    let pairs = config.pairs();
    // `contains` is false for NaN and infinity.
    let in_range = |v: f64| (0.0..=MAX_INV_FREQ).contains(&v);
    let mut all_in_range = true;
    let mut emit = |i: usize, v: f64| {
        all_in_range &= in_range(v);
        sink(i, v);
    };
    let mut attention_factor = 1.0;
    let d = config.rotary_dim as f64;
    let theta = config.theta;
    // b_i for base `t`: 1 / t^(2i/d), as HF's `1.0 / (base ** (arange(0, d, 2) / d))`.
    let unscaled = |t: f64, i: usize| 1.0 / libm::pow(t, (2 * i) as f64 / d);
    match &config.scaling {
        ScalingRef::None => (0..pairs).for_each(|i| emit(i, unscaled(theta, i))),
        ScalingRef::Linear { factor } => (0..pairs).for_each(|i| emit(i, unscaled(theta, i) / factor)),
        ScalingRef::DynamicNtk { factor, max_position_embeddings } => {
            let max = *max_position_embeddings as f64;
            let base = if seq_len > *max_position_embeddings {
                let grown = (factor * seq_len as f64 / max) - (factor - 1.0);
                theta * libm::pow(grown, d / (d - 2.0))
            } else {
                theta
            };
            (0..pairs).for_each(|i| emit(i, unscaled(base, i)));
        }
        ScalingRef::NtkAlpha { alpha } => {
            let base = theta * libm::pow(*alpha, d / (d - 2.0));
            (0..pairs).for_each(|i| emit(i, unscaled(base, i)));
        }
        ScalingRef::Yarn(p) => {
            if theta == 1.0 {
                // ln(theta) = 0 divides the correction range.
                return Err(RopeError::InvalidScalingParameter { name: "rope_theta" });
            }
            let (low, mut high) = p.correction_range(config.rotary_dim, theta);
            if low == high {
                high += 0.001; // HF `linear_ramp_factor`: prevents 0 / 0.
            }
            for i in 0..pairs {
                let pos_freq = libm::pow(theta, (2 * i) as f64 / d);
                let extrapolation = 1.0 / pos_freq;
                let interpolation = 1.0 / (p.factor * pos_freq);
                let ramp = ((i as f64 - low) / (high - low)).clamp(0.0, 1.0);
                let extrapolation_factor = 1.0 - ramp;
                emit(i, interpolation * (1.0 - extrapolation_factor) + extrapolation * extrapolation_factor);
            }
            attention_factor = p.attention_factor();
        }
        ScalingRef::Llama3 {
            factor,
            low_freq_factor,
            high_freq_factor,
            original_max_position_embeddings,
        } => {
            let orig = *original_max_position_embeddings as f64;
            let low_freq_wavelen = orig / low_freq_factor;
            let high_freq_wavelen = orig / high_freq_factor;
            for i in 0..pairs {
                let b = unscaled(theta, i);
                let wavelen = 2.0 * PI / b;
                let v = if wavelen < high_freq_wavelen {
                    b
                } else if wavelen > low_freq_wavelen {
                    b / factor
                } else if low_freq_factor == high_freq_factor {
                    // No blend band (Llama 4): the smooth formula would be 0 / 0.
                    b
                } else {
                    let smooth = (orig / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor);
                    (1.0 - smooth) * b / factor + smooth * b
                };
                emit(i, v);
            }
        }
        ScalingRef::LongRope(p) => {
            let ext =
                if seq_len > p.original_max_position_embeddings { p.long_factor } else { p.short_factor };
            for (i, e) in ext.iter().enumerate().take(pairs) {
                emit(i, 1.0 / (e * libm::pow(theta, (2 * i) as f64 / d)));
            }
            attention_factor = p.attention_factor();
        }
        ScalingRef::Proportional { factor, partial_rotary_factor } => {
            // HF: `int(partial_rotary_factor * head_dim // 2)`.
            let rotated = libm::floor(partial_rotary_factor * d / 2.0) as usize;
            for i in 0..pairs {
                emit(i, if i < rotated { unscaled(theta, i) / factor } else { 0.0 });
            }
        }
        ScalingRef::FreqFactors(ff) => {
            (0..pairs).for_each(|i| emit(i, unscaled(theta, i) / ff[i]));
        }
    }
    if !all_in_range {
        // A finite theta > 0 can be so small that `theta^(2i/d)` underflows and its
        // inverse overflows (or exceeds the bound); otherwise the scaling parameters are
        // to blame (e.g. a linear factor of 1e-30). An angle that overflows would make
        // cos/sin, and so every output, NaN.
        if !in_range(unscaled(theta, pairs - 1)) {
            return Err(RopeError::InvalidTheta);
        }
        return Err(RopeError::InvalidScalingParameter { name: config.scaling.primary_parameter() });
    }
    if !(0.0..=f64::from(f32::MAX)).contains(&attention_factor) {
        // cos/sin rows are `attention_factor * cos(angle)` rounded to f32.
        return Err(RopeError::InvalidScalingParameter { name: "attention_factor" });
    }
    Ok(attention_factor)
}

/// Fills `inv_freq_f32` (unless `keep_f32`: a caller table) and the turns of `inv_freq`,
/// the derived tables of the cos/sin generator.
pub(crate) fn derive_tables(
    inv_freq: &[f64],
    inv_freq_f32: &mut [f32],
    keep_f32: bool,
    hi: &mut [f64],
    lo: &mut [f64],
) {
    if !keep_f32 {
        for (o, v) in inv_freq_f32.iter_mut().zip(inv_freq) {
            *o = *v as f32;
        }
    }
    crate::kernels::sincos::split_turns(inv_freq, hi, lo);
}

/// Borrowed frequencies: what the cos/sin rows of a call are computed from
/// ([`Frequencies::view`], or arrays in caller memory).
#[derive(Clone, Copy, Debug)]
pub(crate) struct FreqRef<'a> {
    /// Empty for per-call frequencies (rows do not read it).
    pub inv_freq: &'a [f64],
    pub inv_freq_f32: &'a [f32],
    pub turns_hi: &'a [f64],
    pub turns_lo: &'a [f64],
    pub attention_factor: f64,
}

/// The sincos kernel's inputs from a view of frequencies (the kernels know nothing of
/// [`FreqRef`]).
impl<'a> crate::kernels::sincos::RowInputs<'a> {
    pub(crate) fn new(freqs: &FreqRef<'a>, mode: crate::config::AngleMode) -> Self {
        crate::kernels::sincos::RowInputs {
            mode,
            turns_hi: freqs.turns_hi,
            turns_lo: freqs.turns_lo,
            inv_freq_f32: freqs.inv_freq_f32,
            attention_factor: freqs.attention_factor,
        }
    }
}
