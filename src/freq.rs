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

use crate::config::{RopeConfig, RopeParams, MAX_PAIRS};
use crate::error::RopeError;

// The scaling parameters are configuration data (`crate::config::scaling`); re-exported
// here so `crate::freq::Scaling` and the crate root's re-exports keep their paths.
pub use crate::config::{LongRopeParams, LongRopeRef, PairFactors, Scaling, ScalingRef, YarnParams};

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
        Frequencies::from_params(&config.params(), seq_len, None)
    }

    /// [`Frequencies::new`] from borrowed parameters, with the caller's f32 table if any
    /// (already checked: that of a [`Rope`](crate::Rope)).
    pub(crate) fn from_params(
        params: &RopeParams<'_>,
        seq_len: u64,
        caller_f32: Option<&[f32]>,
    ) -> Result<Self, RopeError> {
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
        f.attention_factor = compute_inv_freq(params, seq_len, &mut f.inv_freq[..pairs])?;
        f.sync_f32();
        if let Some(t) = caller_f32 {
            f.inv_freq_f32[..pairs].copy_from_slice(t);
            f.caller_f32 = true;
        }
        Ok(f)
    }

    /// A copy of stored frequencies (a [`Rope`](crate::Rope)'s tables).
    pub(crate) fn from_ref(r: &FreqRef<'_>, caller_f32: bool) -> Self {
        let pairs = r.inv_freq.len();
        let mut f = Frequencies {
            inv_freq: [0.0; MAX_PAIRS],
            inv_freq_f32: [0.0; MAX_PAIRS],
            pairs,
            attention_factor: r.attention_factor,
            caller_f32,
            turns_hi: [0.0; MAX_PAIRS],
            turns_lo: [0.0; MAX_PAIRS],
        };
        f.inv_freq[..pairs].copy_from_slice(r.inv_freq);
        f.inv_freq_f32[..pairs].copy_from_slice(r.inv_freq_f32);
        f.turns_hi[..pairs].copy_from_slice(r.turns_hi);
        f.turns_lo[..pairs].copy_from_slice(r.turns_lo);
        f
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
    #[cfg(any(test, feature = "bench-internals"))]
    #[inline]
    pub(crate) fn turns_hi(&self) -> &[f64] {
        &self.turns_hi[..self.pairs]
    }

    /// Low parts of `inv_freq / 2π mod 1`.
    #[cfg(any(test, feature = "bench-internals"))]
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
    #[cfg(any(test, feature = "bench-internals"))]
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
