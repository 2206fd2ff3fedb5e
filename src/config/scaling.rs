//! The scaling parameters of a RoPE configuration (context extension): what each method is
//! given, with its validation. The frequencies computed from them are in `crate::freq`.

use core::f64::consts::PI;
use core::fmt;

use super::MAX_PAIRS;
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
    /// [`Rope::new_in`](crate::Rope::new_in));
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
/// ([`RopeParams`](super::RopeParams), [`Rope::new_in`](crate::Rope::new_in)). The formulas are
/// those of the matching [`Scaling`] variant.
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
