//! RoPE configuration and its validation: [`RopeConfig`], [`RopeParams`] and the scaling
//! parameters ([`scaling`]). The frequencies computed from them are in `crate::freq`, which
//! imports this module (never the other way round).

use crate::error::RopeError;

pub(crate) mod scaling;

pub use scaling::{LongRopeParams, LongRopeRef, PairFactors, Scaling, ScalingRef, YarnParams};

#[allow(deprecated)]
pub use crate::kernels::shape::Layout;
pub use crate::kernels::shape::{PairLayout, MAX_PAIRS, MAX_ROTARY_DIM};

pub use crate::kernels::sincos::AngleMode;

/// What a [`Rope`](crate::Rope) is built from. Construct with [`RopeConfig::new`] and
/// adjust the public fields; [`RopeConfig::validate`] (called by `Rope::new`) checks it.
#[derive(Clone, Debug, PartialEq)]
pub struct RopeConfig {
    /// Elements per head. Dimensions `rotary_dim..head_dim` pass through unchanged.
    pub head_dim: usize,
    /// Rotated dimensions: even, `0 < rotary_dim <= head_dim`, `<= MAX_ROTARY_DIM`.
    pub rotary_dim: usize,
    /// Pair layout.
    pub layout: PairLayout,
    /// The base `theta` of `inv_freq[i] = theta^(-2i / rotary_dim)` (HF `rope_theta`,
    /// GPT-NeoX `rotary_emb_base`). Finite and > 0.
    pub theta: f64,
    /// Frequency scaling (context extension).
    pub scaling: Scaling,
    /// How the angle is formed.
    pub angle_mode: AngleMode,
}

impl RopeConfig {
    /// A configuration with full rotary dimension, `HalfSplit` layout, no scaling and
    /// exact angles.
    pub fn new(head_dim: usize, theta: f64) -> Self {
        RopeConfig {
            head_dim,
            rotary_dim: head_dim,
            layout: PairLayout::HalfSplit,
            theta,
            scaling: Scaling::None,
            angle_mode: AngleMode::Exact,
        }
    }

    /// Builder: set `rotary_dim`.
    pub fn with_rotary_dim(mut self, rotary_dim: usize) -> Self {
        self.rotary_dim = rotary_dim;
        self
    }

    /// Builder: set the layout.
    pub fn with_layout(mut self, layout: PairLayout) -> Self {
        self.layout = layout;
        self
    }

    /// Builder: set the scaling.
    pub fn with_scaling(mut self, scaling: Scaling) -> Self {
        self.scaling = scaling;
        self
    }

    /// Builder: set the angle mode.
    pub fn with_angle_mode(mut self, angle_mode: AngleMode) -> Self {
        self.angle_mode = angle_mode;
        self
    }

    /// Number of rotated pairs, `rotary_dim / 2`.
    #[inline]
    pub fn pairs(&self) -> usize {
        self.rotary_dim / 2
    }

    /// Checks every field.
    ///
    /// ```
    /// use rope_kernels::{RopeConfig, RopeError};
    ///
    /// // GPT-NeoX-20B: head_dim 96, rotary_pct 0.25.
    /// assert_eq!(RopeConfig::new(96, 10_000.0).with_rotary_dim(24).validate(), Ok(()));
    /// assert_eq!(RopeConfig::new(96, 0.0).validate(), Err(RopeError::InvalidTheta));
    /// assert_eq!(
    ///     RopeConfig::new(96, 1e4).with_rotary_dim(128).validate(),
    ///     Err(RopeError::RotaryDimExceedsHeadDim { rotary_dim: 128, head_dim: 96 })
    /// );
    /// ```
    ///
    /// # Errors
    /// [`RopeError::ZeroHeadDim`], [`RopeError::InvalidRotaryDim`],
    /// [`RopeError::RotaryDimExceedsHeadDim`], [`RopeError::RotaryDimTooLarge`],
    /// [`RopeError::InvalidTheta`], and the scaling's own errors
    /// ([`RopeError::InvalidScalingParameter`]). These are checks of each field's domain;
    /// [`Rope::new`](crate::Rope::new) also rejects (with the same variants) a subnormal theta
    /// or factor for which some `inv_freq` overflows f64.
    pub fn validate(&self) -> Result<(), RopeError> {
        self.params().validate()
    }

    /// The same configuration with borrowed scaling arrays (a few words, no copy).
    #[inline]
    pub fn params(&self) -> RopeParams<'_> {
        RopeParams {
            head_dim: self.head_dim,
            rotary_dim: self.rotary_dim,
            layout: self.layout,
            theta: self.theta,
            scaling: self.scaling.as_ref(),
            angle_mode: self.angle_mode,
        }
    }
}

/// [`RopeConfig`] with borrowed scaling arrays ([`ScalingRef`]): what a RoPE built in caller
/// memory ([`Rope::new_in`](crate::Rope::new_in)) is made from, without [`RopeConfig`]'s inline
/// arrays on the stack. The fields mean what [`RopeConfig`]'s do.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RopeParams<'a> {
    /// As [`RopeConfig::head_dim`].
    pub head_dim: usize,
    /// As [`RopeConfig::rotary_dim`].
    pub rotary_dim: usize,
    /// As [`RopeConfig::layout`].
    pub layout: PairLayout,
    /// As [`RopeConfig::theta`].
    pub theta: f64,
    /// As [`RopeConfig::scaling`].
    pub scaling: ScalingRef<'a>,
    /// As [`RopeConfig::angle_mode`].
    pub angle_mode: AngleMode,
}

impl RopeParams<'_> {
    /// A configuration with full rotary dimension, `HalfSplit` layout, no scaling and exact
    /// angles (as [`RopeConfig::new`]).
    pub fn new(head_dim: usize, theta: f64) -> Self {
        RopeParams {
            head_dim,
            rotary_dim: head_dim,
            layout: PairLayout::HalfSplit,
            theta,
            scaling: ScalingRef::None,
            angle_mode: AngleMode::Exact,
        }
    }

    /// Number of rotated pairs, `rotary_dim / 2`.
    #[inline]
    pub fn pairs(&self) -> usize {
        self.rotary_dim / 2
    }

    /// As [`RopeConfig::validate`].
    ///
    /// # Errors
    /// Those of [`RopeConfig::validate`].
    pub fn validate(&self) -> Result<(), RopeError> {
        if self.head_dim == 0 {
            return Err(RopeError::ZeroHeadDim);
        }
        if self.rotary_dim == 0 || !self.rotary_dim.is_multiple_of(2) {
            return Err(RopeError::InvalidRotaryDim { rotary_dim: self.rotary_dim });
        }
        if self.rotary_dim > self.head_dim {
            return Err(RopeError::RotaryDimExceedsHeadDim {
                rotary_dim: self.rotary_dim,
                head_dim: self.head_dim,
            });
        }
        if self.rotary_dim > MAX_ROTARY_DIM {
            return Err(RopeError::RotaryDimTooLarge { rotary_dim: self.rotary_dim, max: MAX_ROTARY_DIM });
        }
        if !(self.theta.is_finite() && self.theta > 0.0) {
            return Err(RopeError::InvalidTheta);
        }
        self.scaling.validate(self.rotary_dim)
    }
}
