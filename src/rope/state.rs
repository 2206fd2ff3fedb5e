//! [`RopeState`]: the fixed-size part of a [`Rope`], whose tables live in two slices of
//! exactly [`Rope::table_lens`] elements (28 bytes per pair, twice for LongRoPE), computed
//! where they are kept (a box, or caller memory: [`Rope::new_in`]), so neither creating a
//! `Rope` nor using it puts a table-sized value on the stack.

use crate::config::{AngleMode, RopeParams, MAX_PAIRS};
use crate::dispatch::Tier;
use crate::error::RopeError;
use crate::freq::{
    check_inv_freq, compute_inv_freq, derive_tables, FreqRef, LongRopeRef, ScalingRef, MAX_INV_FREQ,
};
use crate::rope::{Rope, RopeView, Tables};

/// f64 tables of one frequency set: `inv_freq`, `turns_hi`, `turns_lo`.
const F64_TABLES: usize = 3;

/// The fixed-size part of a [`Rope`]: the configuration (without its arrays), the
/// attention factors and the tier; its tables are elsewhere (the caller's slices, a box).
/// Position-independent and `Copy`: what the C ABI keeps in a handle's header, the tables
/// right after it ([`Rope::state`], [`RopeState::rope`]). Not part of the Rust API: a
/// [`Rope`] is that.
#[doc(hidden)]
#[derive(Clone, Copy, Debug)]
pub struct RopeState {
    /// The configuration with its arrays dropped (their values are in the tables); the angle
    /// mode is the effective one.
    params: RopeParams<'static>,
    /// 1, or 2 for LongRoPE (short, then long).
    sets: usize,
    attention_factor: [f64; 2],
    caller_f32: bool,
    tier: Option<Tier>,
}

impl RopeState {
    /// As [`Rope::table_lens`].
    pub(crate) fn table_lens(params: &RopeParams<'_>) -> Result<(usize, usize), RopeError> {
        params.validate()?;
        let sets = sets_of(&params.scaling);
        Ok((sets * F64_TABLES * params.pairs(), sets * params.pairs()))
    }

    /// As [`Rope::check_in`].
    pub(crate) fn check(
        params: &RopeParams<'_>,
        inv_freq_f32: Option<&[f32]>,
    ) -> Result<(usize, usize), RopeError> {
        let lens = RopeState::table_lens(params)?;
        let pairs = params.pairs();
        // The frequencies of the first call and of the longest (as `Rope::new`), then the
        // caller table (as `Rope::with_hf_inv_freq`).
        check_inv_freq(params, 0)?;
        if params.scaling.depends_on_seq_len() {
            check_inv_freq(params, 1 << 32)?;
        }
        if let Some(t) = inv_freq_f32 {
            if t.len() != pairs {
                return Err(RopeError::InvFreqLength { expected: pairs, len: t.len() });
            }
            if !t.iter().all(|v| (0.0..=MAX_INV_FREQ).contains(&f64::from(*v))) {
                return Err(RopeError::InvalidScalingParameter { name: "inv_freq" });
            }
        }
        Ok(lens)
    }

    /// Validates `params` (and the optional caller f32 `inv_freq` table) and computes the
    /// frequencies into `f64s` and `f32s`: see [`Rope::new_in`].
    pub(crate) fn init(
        params: &RopeParams<'_>,
        inv_freq_f32: Option<&[f32]>,
        f64s: &mut [f64],
        f32s: &mut [f32],
    ) -> Result<RopeState, RopeError> {
        let (n64, n32) = RopeState::check(params, inv_freq_f32)?;
        let pairs = params.pairs();
        if f64s.len() != n64 || f32s.len() != n32 {
            return Err(RopeError::TableShape);
        }
        let sets = sets_of(&params.scaling);
        let mut attention_factor = [1.0; 2];
        // LongRoPE: set 0 short (seq_len 0), set 1 that of the longest call there can be
        // (`2^32` positions: the long factors above the original length), the lengths
        // `check` validated. (`u64::MAX` would need the long factors even where no call can
        // reach them, original length >= 2^32, and refuse what `check` and `Rope::new`
        // accept: found by the `capi` fuzz target.)
        let seq_lens = [0, 1 << 32];
        for (set, (c64, c32)) in
            f64s.chunks_exact_mut(F64_TABLES * pairs).zip(f32s.chunks_exact_mut(pairs)).enumerate()
        {
            let (inv, turns) = c64.split_at_mut(pairs);
            let (hi, lo) = turns.split_at_mut(pairs);
            attention_factor[set] = compute_inv_freq(params, seq_lens[set], inv)?;
            if let Some(t) = inv_freq_f32 {
                c32.copy_from_slice(t);
            }
            derive_tables(inv, c32, inv_freq_f32.is_some(), hi, lo);
        }
        let mut stored = RopeParams {
            head_dim: params.head_dim,
            rotary_dim: params.rotary_dim,
            layout: params.layout,
            theta: params.theta,
            scaling: without_arrays(&params.scaling),
            angle_mode: params.angle_mode,
        };
        if inv_freq_f32.is_some() {
            stored.angle_mode = AngleMode::HfCompatible;
        }
        Ok(RopeState {
            params: stored,
            sets,
            attention_factor,
            caller_f32: inv_freq_f32.is_some(),
            tier: None,
        })
    }

    /// The RoPE of these tables (the slices [`Rope::new_in`] filled, or copies of them);
    /// `None` if their lengths are not this state's. See [`Rope::with_tables`].
    #[inline]
    pub fn rope<'a>(&self, f64s: &'a [f64], f32s: &'a [f32]) -> Option<Rope<'a>> {
        let pairs = self.params.pairs();
        if pairs == 0
            || pairs > MAX_PAIRS
            || f64s.len() != self.sets * F64_TABLES * pairs
            || f32s.len() != self.sets * pairs
        {
            return None;
        }
        Some(Rope { state: *self, tables: Tables::Borrowed { f64s, f32s } })
    }

    /// The borrowed form every call runs on, over tables of this state's lengths (those of a
    /// [`Rope`] made from it).
    #[inline]
    pub(crate) fn view<'a>(&self, f64s: &'a [f64], f32s: &'a [f32]) -> RopeView<'a> {
        let pairs = self.params.pairs();
        let set = |s: usize| {
            let c64 = &f64s[s * F64_TABLES * pairs..(s + 1) * F64_TABLES * pairs];
            FreqRef {
                inv_freq: &c64[..pairs],
                inv_freq_f32: &f32s[s * pairs..(s + 1) * pairs],
                turns_hi: &c64[pairs..2 * pairs],
                turns_lo: &c64[2 * pairs..],
                attention_factor: self.attention_factor[s],
            }
        };
        let long = if self.sets == 2 { Some(set(1)) } else { None };
        RopeView { params: self.params, freqs: set(0), long, caller_f32: self.caller_f32, tier: self.tier }
    }

    /// The configuration (arrays dropped; the angle mode is the effective one).
    #[inline]
    pub(crate) fn params(&self) -> &RopeParams<'static> {
        &self.params
    }

    /// Marks the f32 tables as the caller's ([`Rope::with_hf_inv_freq`]).
    #[cfg(feature = "alloc")]
    pub(crate) fn set_caller_f32(&mut self) {
        self.caller_f32 = true;
        self.params.angle_mode = AngleMode::HfCompatible;
    }

    /// The table lengths of this state, as [`Rope::table_lens`] gave them.
    pub fn lens(&self) -> (usize, usize) {
        let pairs = self.params.pairs();
        (self.sets * F64_TABLES * pairs, self.sets * pairs)
    }

    /// Pins the calls of this state to `tier` (checked by [`Rope::with_tier`]).
    pub(crate) fn set_tier(&mut self, tier: Tier) {
        self.tier = Some(tier);
    }
}

/// Frequency sets kept for `scaling`: LongRoPE keeps its short and long ones.
fn sets_of(scaling: &ScalingRef<'_>) -> usize {
    if matches!(scaling, ScalingRef::LongRope(_)) {
        2
    } else {
        1
    }
}

/// `scaling` without its arrays (their effect is in the tables): what a call still reads.
fn without_arrays(scaling: &ScalingRef<'_>) -> ScalingRef<'static> {
    match *scaling {
        ScalingRef::None => ScalingRef::None,
        ScalingRef::Linear { factor } => ScalingRef::Linear { factor },
        ScalingRef::DynamicNtk { factor, max_position_embeddings } => {
            ScalingRef::DynamicNtk { factor, max_position_embeddings }
        }
        ScalingRef::NtkAlpha { alpha } => ScalingRef::NtkAlpha { alpha },
        ScalingRef::Yarn(p) => ScalingRef::Yarn(p),
        ScalingRef::Llama3 {
            factor,
            low_freq_factor,
            high_freq_factor,
            original_max_position_embeddings,
        } => {
            ScalingRef::Llama3 { factor, low_freq_factor, high_freq_factor, original_max_position_embeddings }
        }
        ScalingRef::LongRope(p) => ScalingRef::LongRope(LongRopeRef::new(
            &[],
            &[],
            p.original_max_position_embeddings,
            p.factor,
            p.attention_factor,
        )),
        ScalingRef::Proportional { factor, partial_rotary_factor } => {
            ScalingRef::Proportional { factor, partial_rotary_factor }
        }
        ScalingRef::FreqFactors(_) => ScalingRef::FreqFactors(&[]),
    }
}
