//! The [`Rope`] handle: constructors (tables in a box or in caller memory), accessors and
//! the 1-D apply entry points; `RopeView`, the borrowed form every call runs on.

use super::state::RopeState;
use super::walk::{CallFreqs, FreqSlot};
use super::{ApplyOptions, Heads, HeadsMut};
#[cfg(feature = "alloc")]
use crate::config::AngleMode;
use crate::config::{RopeConfig, RopeParams, MAX_PAIRS};
use crate::cossin::fill_row;
use crate::dispatch::{self, Tier};
use crate::element::Element;
use crate::error::RopeError;
use crate::freq::{compute_inv_freq, FreqRef, Frequencies, LongRopeParams, PairFactors, Scaling, ScalingRef};
use crate::kernels::sincos::SinCos;
use crate::kernels::Kernels;
#[cfg(feature = "alloc")]
use alloc::boxed::Box;

/// A validated RoPE configuration with its frequency tables, ready to apply.
///
/// The tables (28 bytes per pair, twice that for LongRoPE) are either owned
/// ([`Rope::new`], a `Rope<'static>`, with `alloc`) or borrowed from caller memory sized to
/// the configuration ([`Rope::new_in`]: no allocation, nothing table-sized on the stack,
/// `no_std`); the handle itself is small (192 bytes on 64-bit targets) and every method
/// works the same on both. [`Rope::as_ref`] borrows one as a `Rope<'_>` (no copy of the
/// tables).
///
/// All apply methods take tensors shaped `[tokens][heads][head_dim]` through a [`View`]
/// (strides in elements), rotate dimensions `0..rotary_dim` of every head and leave (or,
/// out of place, copy) the rest. q and k of one call share positions and cos/sin rows but
/// may have their own head counts and strides (GQA/MQA). Zero tokens or heads is an `Ok`
/// no-op. A call that returns an error has written nothing.
///
/// ```
/// use rope_kernels::{ApplyOptions, HeadsMut, Rope, RopeParams, View};
///
/// // head_dim 64 in caller memory: 32 pairs, 32 * 3 f64 and 32 f32 of tables (e.g. static
/// // arrays on a microcontroller).
/// let params = RopeParams::new(64, 10_000.0);
/// let (n64, n32) = Rope::table_lens(&params)?;
/// assert_eq!((n64, n32), (96, 32));
/// let (mut f64s, mut f32s) = ([0.0f64; 96], [0.0f32; 32]);
/// let rope = Rope::new_in(&params, None, &mut f64s, &mut f32s)?;
/// let mut q = [0.5f32; 2 * 4 * 64];
/// rope.apply(HeadsMut::new(&mut q, View::token_major(2, 4, 64)), &ApplyOptions::start(7))?;
/// # Ok::<(), rope_kernels::RopeError>(())
/// ```
///
/// [`View`]: crate::View
#[derive(Clone, Debug)]
pub struct Rope<'a> {
    /// The fixed-size part: configuration without arrays, attention factors, tier.
    pub(crate) state: RopeState,
    /// The frequency tables, `state.lens()` long.
    pub(crate) tables: Tables<'a>,
}

/// Where a [`Rope`]'s tables are: `(f64s, f32s)` of `RopeState::lens` elements, laid out
/// per frequency set as `inv_freq, turns_hi, turns_lo` (f64) and `inv_freq_f32` (f32).
#[derive(Clone, Debug)]
pub(crate) enum Tables<'a> {
    Borrowed {
        f64s: &'a [f64],
        f32s: &'a [f32],
    },
    #[cfg(feature = "alloc")]
    Owned {
        f64s: Box<[f64]>,
        f32s: Box<[f32]>,
    },
}

impl Tables<'_> {
    #[inline]
    fn get(&self) -> (&[f64], &[f32]) {
        match self {
            Tables::Borrowed { f64s, f32s } => (f64s, f32s),
            #[cfg(feature = "alloc")]
            Tables::Owned { f64s, f32s } => (f64s, f32s),
        }
    }
}

/// Deprecated name of [`Rope`] (which now has the lifetime of its tables).
#[deprecated(note = "`RopeRef<'a>` is `Rope<'a>`; use `Rope` (and `Rope::as_ref` for a borrowed one)")]
pub type RopeRef<'a> = Rope<'a>;

#[cfg(feature = "alloc")]
impl Rope<'static> {
    /// Validates `config` and computes its frequency tables into a box (the tables
    /// [`Rope::new_in`] computes into caller memory, the same bits).
    ///
    /// ```
    /// use rope_kernels::{PairLayout, Rope, RopeConfig, RopeError};
    ///
    /// // GPT-J-6B: head_dim 256, rotary_dim 64, interleaved pairs.
    /// let gptj = RopeConfig::new(256, 10_000.0).with_rotary_dim(64).with_layout(PairLayout::Interleaved);
    /// let rope = Rope::new(gptj)?;
    /// assert_eq!(rope.frequencies().inv_freq().len(), 32);
    /// // An odd rotary_dim cannot be split into pairs.
    /// let bad = RopeConfig::new(128, 10_000.0).with_rotary_dim(63);
    /// assert_eq!(Rope::new(bad).err(), Some(RopeError::InvalidRotaryDim { rotary_dim: 63 }));
    /// # Ok::<(), RopeError>(())
    /// ```
    ///
    /// # Errors
    /// Any error of [`RopeConfig::validate`], and those of [`Frequencies::new`], for the
    /// first call and, when the frequencies depend on the call length (dynamic NTK,
    /// LongRoPE's long factors), for the longest call (positions up to `u32::MAX`): a `Rope`
    /// that is built computes the frequencies of every call without error.
    pub fn new(config: RopeConfig) -> Result<Rope<'static>, RopeError> {
        let params = config.params();
        let (n64, n32) = RopeState::check(&params, None)?;
        let mut f64s = alloc::vec![0.0f64; n64].into_boxed_slice();
        let mut f32s = alloc::vec![0.0f32; n32].into_boxed_slice();
        let state = RopeState::init(&params, None, &mut f64s, &mut f32s)?;
        Ok(Rope { state, tables: Tables::Owned { f64s, f32s } })
    }
}

impl<'a> Rope<'a> {
    /// The lengths `(f64 elements, f32 elements)` of the two table slices
    /// [`Rope::new_in`] takes for `params`: `(3 * pairs, pairs)`, twice that for LongRoPE
    /// (short and long frequencies, so that no call computes frequencies), with
    /// `pairs = rotary_dim / 2`.
    ///
    /// # Errors
    /// Those of [`RopeParams::validate`].
    pub fn table_lens(params: &RopeParams<'_>) -> Result<(usize, usize), RopeError> {
        RopeState::table_lens(params)
    }

    /// Every check of [`Rope::new_in`], writing nothing; returns [`Rope::table_lens`] (to
    /// size the tables after the configuration is known to be valid).
    ///
    /// # Errors
    /// Those of [`Rope::new_in`] but [`RopeError::TableShape`].
    pub fn check_in(
        params: &RopeParams<'_>,
        inv_freq_f32: Option<&[f32]>,
    ) -> Result<(usize, usize), RopeError> {
        RopeState::check(params, inv_freq_f32)
    }

    /// Validates `params` (and the optional caller f32 `inv_freq` table, as
    /// [`Rope::with_hf_inv_freq`], which then sets [`AngleMode::HfCompatible`]) and computes
    /// the frequencies into `f64s` and `f32s` (of exactly [`Rope::table_lens`] elements),
    /// which the returned `Rope` borrows. No allocation, nothing table-sized on the stack.
    ///
    /// # Errors
    /// Those of [`Rope::new`] and [`Rope::with_hf_inv_freq`], in that order;
    /// [`RopeError::TableShape`] for slices of other lengths. The slices are written only
    /// when it succeeds.
    ///
    /// [`AngleMode::HfCompatible`]: crate::AngleMode::HfCompatible
    pub fn new_in(
        params: &RopeParams<'_>,
        inv_freq_f32: Option<&[f32]>,
        f64s: &'a mut [f64],
        f32s: &'a mut [f32],
    ) -> Result<Rope<'a>, RopeError> {
        let state = RopeState::init(params, inv_freq_f32, f64s, f32s)?;
        let (f64s, f32s): (&'a [f64], &'a [f32]) = (f64s, f32s);
        Ok(Rope { state, tables: Tables::Borrowed { f64s, f32s } })
    }

    /// This RoPE over other tables of the same lengths: copies of its own (e.g. moved to
    /// other memory), which it reads as its own, unchecked; `None` if their lengths are not
    /// this RoPE's. Nothing is copied.
    #[inline]
    pub fn with_tables<'b>(&self, f64s: &'b [f64], f32s: &'b [f32]) -> Option<Rope<'b>> {
        self.state.rope(f64s, f32s)
    }

    /// This RoPE with borrowed tables (no copy of them).
    #[inline]
    pub fn as_ref(&self) -> Rope<'_> {
        let (f64s, f32s) = self.tables.get();
        Rope { state: self.state, tables: Tables::Borrowed { f64s, f32s } }
    }

    /// The fixed-size part, without the tables (the C ABI keeps it in its handle's header).
    #[doc(hidden)]
    #[inline]
    pub fn state(&self) -> RopeState {
        self.state
    }

    /// The borrowed form every call runs on.
    #[inline]
    pub(crate) fn view(&self) -> RopeView<'_> {
        let (f64s, f32s) = self.tables.get();
        self.state.view(f64s, f32s)
    }

    /// Pins this object to `tier` instead of the process-wide dispatcher.
    ///
    /// ```
    /// use rope_kernels::{Rope, RopeConfig, Tier};
    ///
    /// let oracle = Rope::new(RopeConfig::new(64, 10_000.0))?.with_tier(Tier::Scalar)?;
    /// assert_eq!(oracle.tier(), Tier::Scalar);
    /// # Ok::<(), rope_kernels::RopeError>(())
    /// ```
    ///
    /// # Errors
    /// [`RopeError::TierUnavailable`] if this build or CPU lacks the tier.
    pub fn with_tier(mut self, tier: Tier) -> Result<Self, RopeError> {
        if !tier.is_available() {
            return Err(RopeError::TierUnavailable);
        }
        self.state.set_tier(tier);
        Ok(self)
    }

    /// Uses the caller's f32 `inv_freq` table (e.g. the `inv_freq` buffer exported from
    /// Hugging Face transformers) and switches to [`AngleMode::HfCompatible`], so angles are
    /// `f32(position) * inv_freq[i]` rounded in f32 exactly as transformers forms them. The
    /// table is used verbatim by every later call, also for dynamic NTK and LongRoPE whose
    /// f64 frequencies are recomputed per call; the attention factor stays the computed one.
    /// Borrowed tables are copied into owned ones first (`Rope::new_in` takes the table
    /// directly, without allocating).
    ///
    /// # Errors
    /// [`RopeError::InvFreqLength`] if `inv_freq.len() != rotary_dim / 2`;
    /// [`RopeError::InvalidScalingParameter`] (`"inv_freq"`) for a value outside `[0, 2^95]`
    /// (see [`Frequencies::set_inv_freq_f32`]).
    #[cfg(feature = "alloc")]
    pub fn with_hf_inv_freq(self, inv_freq: &[f32]) -> Result<Self, RopeError> {
        let pairs = self.pairs();
        if inv_freq.len() != pairs {
            return Err(RopeError::InvFreqLength { expected: pairs, len: inv_freq.len() });
        }
        if !inv_freq.iter().all(|v| (0.0..=crate::freq::MAX_INV_FREQ).contains(&f64::from(*v))) {
            return Err(RopeError::InvalidScalingParameter { name: "inv_freq" });
        }
        let Rope { mut state, tables } = self;
        let (f64s, mut f32s) = match tables {
            Tables::Owned { f64s, f32s } => (f64s, f32s),
            Tables::Borrowed { f64s, f32s } => (Box::from(f64s), Box::from(f32s)),
        };
        // Every set's f32 table (as `new_in` with the table: the f64 ones do not change).
        for set in f32s.chunks_exact_mut(pairs) {
            set.copy_from_slice(inv_freq);
        }
        state.set_caller_f32();
        debug_assert_eq!(state.params().angle_mode, AngleMode::HfCompatible);
        Ok(Rope { state, tables: Tables::Owned { f64s, f32s } })
    }

    /// The configuration (the angle mode is the effective one). The frequencies are stored,
    /// so the per-pair arrays of LongRoPE and `FreqFactors` are not kept: here they are
    /// empty (their other parameters are kept), and [`RopeParams::validate`] refuses them.
    #[inline]
    pub fn params(&self) -> &RopeParams<'static> {
        self.state.params()
    }

    /// The configuration as a [`RopeConfig`], with the same caveat as [`Rope::params`]: the
    /// per-pair arrays of LongRoPE and `FreqFactors` are empty (not kept after
    /// construction), so such a configuration does not validate.
    pub fn config(&self) -> RopeConfig {
        let p = self.params();
        RopeConfig {
            head_dim: p.head_dim,
            rotary_dim: p.rotary_dim,
            layout: p.layout,
            theta: p.theta,
            scaling: scaling_without_arrays(&p.scaling),
            angle_mode: p.angle_mode,
        }
    }

    /// Number of rotated pairs, `rotary_dim / 2`.
    #[inline]
    pub fn pairs(&self) -> usize {
        self.state.params().pairs()
    }

    /// The tier this object's calls run on.
    pub fn tier(&self) -> Tier {
        self.view().kernels().tier
    }

    /// The frequencies used when they do not depend on the sequence length (a copy of the
    /// stored ones).
    pub fn frequencies(&self) -> Frequencies {
        let r = self.view();
        Frequencies::from_ref(&r.freqs, r.caller_f32)
    }

    /// The frequencies a call whose largest position is `seq_len - 1` uses (differs from
    /// [`Rope::frequencies`] only for dynamic NTK and LongRoPE).
    ///
    /// # Errors
    /// Those of [`Frequencies::new`].
    pub fn frequencies_at(&self, seq_len: u64) -> Result<Frequencies, RopeError> {
        let r = self.view();
        if !r.per_call(seq_len) {
            // LongRoPE: the stored set every call past the original length uses (that of
            // the longest call, 2^32 positions), also for a `seq_len` no call reaches.
            return Ok(Frequencies::from_ref(&r.set_at(seq_len), r.caller_f32));
        }
        let caller = r.caller_f32.then_some(r.freqs.inv_freq_f32);
        Frequencies::from_params(&r.params, seq_len, caller)
    }

    /// The `inv_freq` (f64, radians per position) a call whose largest position is
    /// `seq_len - 1` uses, into `out[..pairs]`, and its attention factor (as
    /// [`Rope::frequencies_at`], without a [`Frequencies`] value). `out` is written only on
    /// success.
    ///
    /// # Errors
    /// [`RopeError::InvFreqLength`] if `out.len() < pairs`; those of [`Frequencies::new`]
    /// for frequencies computed per call (dynamic NTK).
    pub fn inv_freq_at(&self, seq_len: u64, out: &mut [f64]) -> Result<f64, RopeError> {
        let r = self.view();
        let pairs = r.pairs();
        if out.len() < pairs {
            return Err(RopeError::InvFreqLength { expected: pairs, len: out.len() });
        }
        if !r.per_call(seq_len) {
            let set = r.set_at(seq_len);
            out[..pairs].copy_from_slice(set.inv_freq);
            return Ok(set.attention_factor);
        }
        // Per call, into a temporary: nothing is written on error.
        let mut tmp = [0.0f64; MAX_PAIRS];
        let af = compute_inv_freq(&r.params, seq_len, &mut tmp[..pairs])?;
        out[..pairs].copy_from_slice(&tmp[..pairs]);
        Ok(af)
    }

    /// Fills a caller table with the rows of positions `start..start + rows`
    /// (`cos.len() == sin.len() == rows * rotary_dim / 2`), with the same values the
    /// on-the-fly path uses. Row `r` is position `start + r`. For dynamic NTK and LongRoPE
    /// the whole table uses the frequencies of a call of length `start + rows`
    /// ([`Rope::frequencies_at`]); a shorter on-the-fly call may use other ones.
    ///
    /// ```
    /// use rope_kernels::{ApplyOptions, CosSinTable, HeadsMut, Rope, RopeConfig, View};
    ///
    /// let rope = Rope::new(RopeConfig::new(8, 10_000.0))?;
    /// // The rows of one decode step of 2 tokens at positions 40 and 41, filled by the
    /// // caller (no allocation); the call then uses rows 0 and 1.
    /// let (mut cos, mut sin) = ([0.0f32; 2 * 4], [0.0f32; 2 * 4]);
    /// rope.fill_table(40, &mut cos, &mut sin)?;
    /// let table = CosSinTable::new(&cos, &sin, 4)?;
    ///
    /// let mut a = [0.25f32; 2 * 3 * 8];
    /// let mut b = a;
    /// rope.apply(HeadsMut::new(&mut a, View::token_major(2, 3, 8)), &ApplyOptions::start(0).with_table(table))?;
    /// rope.apply(HeadsMut::new(&mut b, View::token_major(2, 3, 8)), &ApplyOptions::start(40))?;
    /// assert_eq!(a, b);
    /// # Ok::<(), rope_kernels::RopeError>(())
    /// ```
    ///
    /// # Errors
    /// [`RopeError::TableShape`] for mismatched lengths, [`RopeError::PositionOverflow`]
    /// if `start + rows - 1` exceeds `u32::MAX`, and those of [`Rope::frequencies_at`].
    pub fn fill_table(&self, start: u32, cos: &mut [f32], sin: &mut [f32]) -> Result<(), RopeError> {
        let r = self.view();
        let pairs = r.pairs();
        if cos.len() != sin.len() || !cos.len().is_multiple_of(pairs) {
            return Err(RopeError::TableShape);
        }
        let rows = cos.len() / pairs;
        if rows > 0 && u64::from(start) + rows as u64 - 1 > u64::from(u32::MAX) {
            return Err(RopeError::PositionOverflow);
        }
        let mut slot = CallFreqs::<MAX_PAIRS>::new();
        let freqs = r.freqs_at(u64::from(start) + rows as u64, &mut slot)?;
        let gen = SinCos::of(r.kernels());
        for (row, (c, s)) in cos.chunks_exact_mut(pairs).zip(sin.chunks_exact_mut(pairs)).enumerate() {
            fill_row(gen, &freqs, r.params.angle_mode, start + row as u32, c, s);
        }
        Ok(())
    }

    /// Builds a cache of positions `0..max_positions`.
    ///
    /// ```
    /// use rope_kernels::{ApplyOptions, HeadsMut, Rope, RopeConfig, RopeError, View};
    ///
    /// let rope = Rope::new(RopeConfig::new(64, 10_000.0))?;
    /// let cache = rope.build_cache(4096)?;
    /// let mut q = vec![1.0f32; 3 * 64];
    /// let positions = [0, 17, 4095];
    /// let opts = ApplyOptions::ids(&positions).with_table(cache.table());
    /// rope.apply(HeadsMut::new(&mut q, View::token_major(3, 1, 64)), &opts)?;
    /// // Position 4096 is not in the cache.
    /// let err = rope.apply(HeadsMut::new(&mut q, View::token_major(1, 1, 64)), &ApplyOptions::start(4096).with_table(cache.table()));
    /// assert_eq!(err, Err(RopeError::PositionOutOfRange { position: 4096, rows: 4096 }));
    /// # Ok::<(), RopeError>(())
    /// ```
    ///
    /// # Errors
    /// [`RopeError::PositionOverflow`] if `max_positions > 2^32` (positions are `u32`) or
    /// the two `max_positions * rotary_dim / 2` tables would not fit in the address space;
    /// checked before anything is allocated. [`RopeError::OutOfMemory`] if the allocator
    /// refuses them (the process is not aborted).
    #[cfg(feature = "alloc")]
    pub fn build_cache(&self, max_positions: usize) -> Result<crate::RopeCache, RopeError> {
        let pairs = self.pairs();
        // Before allocating: `fill_table` would reject more than 2^32 rows, but only after
        // `vec!` had tried (and aborted, or panicked on capacity overflow) for them.
        if u64::try_from(max_positions).map_or(true, |m| m > 1 << 32) {
            return Err(RopeError::PositionOverflow);
        }
        let mut cache = crate::RopeCache::zeroed(max_positions, pairs)?;
        let (cos, sin) = cache.arrays_mut();
        self.fill_table(0, cos, sin)?;
        Ok(cache)
    }

    /// Rotates one tensor in place.
    ///
    /// ```
    /// use rope_kernels::{f16, ApplyOptions, HeadsMut, Rope, RopeConfig, View};
    ///
    /// let rope = Rope::new(RopeConfig::new(4, 10_000.0))?;
    /// // One token, one head: pairs (x0, x2) and (x1, x3) (HalfSplit). At position 0 the
    /// // rotation is the identity; the inverse at the same positions undoes the forward.
    /// let x = [1.0f32, 2.0, 3.0, 4.0].map(f16::from_f32);
    /// let mut y = x;
    /// rope.apply(HeadsMut::new(&mut y, View::token_major(1, 1, 4)), &ApplyOptions::start(0))?;
    /// assert_eq!(y, x);
    /// rope.apply(HeadsMut::new(&mut y, View::token_major(1, 1, 4)), &ApplyOptions::start(7))?;
    /// assert_ne!(y, x);
    /// rope.apply(HeadsMut::new(&mut y, View::token_major(1, 1, 4)), &ApplyOptions::start(7).inverse())?;
    /// assert!(y.iter().zip(&x).all(|(a, b)| (a.to_f32() - b.to_f32()).abs() < 1e-2));
    /// # Ok::<(), rope_kernels::RopeError>(())
    /// ```
    ///
    /// # Errors
    /// See [`Rope::apply_qk_into`].
    pub fn apply<T: Element>(&self, x: HeadsMut<'_, T>, opts: &ApplyOptions<'_>) -> Result<(), RopeError> {
        self.apply_qk(x, None, opts)
    }

    /// Rotates q and (optionally) k in place at the same positions.
    ///
    /// ```
    /// use rope_kernels::{ApplyOptions, HeadsMut, Rope, RopeConfig, View};
    ///
    /// // Llama-3-8B shapes (GQA): 32 q heads, 8 kv heads, head_dim 128; a prefill of
    /// // 5 tokens. q is BSHD, k is BHSD (already transposed).
    /// let rope = Rope::new(RopeConfig::new(128, 500_000.0))?;
    /// let mut q = vec![0.5f32; 5 * 32 * 128];
    /// let mut k = vec![0.5f32; 8 * 5 * 128];
    /// rope.apply_qk(
    ///     HeadsMut::new(&mut q, View::token_major(5, 32, 128)),
    ///     Some(HeadsMut::new(&mut k, View::head_major(5, 8, 128))),
    ///     &ApplyOptions::start(0),
    /// )?;
    /// // Token 3 of head 0 in BSHD q and BHSD k went through the same rotation.
    /// assert_eq!(q[3 * 32 * 128..3 * 32 * 128 + 128], k[3 * 128..4 * 128]);
    /// # Ok::<(), rope_kernels::RopeError>(())
    /// ```
    ///
    /// # Errors
    /// See [`Rope::apply_qk_into`].
    #[inline]
    pub fn apply_qk<T: Element>(
        &self,
        q: HeadsMut<'_, T>,
        k: Option<HeadsMut<'_, T>>,
        opts: &ApplyOptions<'_>,
    ) -> Result<(), RopeError> {
        let r = self.view();
        let (tokens, tensors) = r.qk_tensors(q, k)?;
        r.run(tokens, &tensors, opts)
    }

    /// Rotates one tensor out of place (`out` may have its own strides; same shape).
    ///
    /// ```
    /// use rope_kernels::{ApplyOptions, Heads, HeadsMut, Rope, RopeConfig, View};
    ///
    /// // Phi-2: head_dim 80, rotary_dim 32. Read BSHD, write BHSD.
    /// let rope = Rope::new(RopeConfig::new(80, 10_000.0).with_rotary_dim(32))?;
    /// let x: Vec<f32> = (0..4 * 2 * 80).map(|i| i as f32 / 640.0).collect();
    /// let mut out = vec![0.0f32; x.len()];
    /// let (src, dst) = (View::token_major(4, 2, 80), View::head_major(4, 2, 80));
    /// rope.apply_into(Heads::new(&x, src), HeadsMut::new(&mut out, dst), &ApplyOptions::start(10))?;
    /// // Dims 32..80 of token 1, head 1 are copied unchanged.
    /// assert_eq!(out[(4 + 1) * 80 + 32..(4 + 2) * 80], x[(2 + 1) * 80 + 32..(2 + 2) * 80]);
    /// # Ok::<(), rope_kernels::RopeError>(())
    /// ```
    ///
    /// # Errors
    /// See [`Rope::apply_qk_into`].
    pub fn apply_into<T: Element>(
        &self,
        x: Heads<'_, T>,
        out: HeadsMut<'_, T>,
        opts: &ApplyOptions<'_>,
    ) -> Result<(), RopeError> {
        self.apply_qk_into(x, out, None, opts)
    }

    /// Rotates q and (optionally) k out of place at the same positions. Outputs may have
    /// their own strides but the shapes of their inputs; pass-through dimensions are copied.
    ///
    /// ```
    /// use rope_kernels::{ApplyOptions, Heads, HeadsMut, Rope, RopeConfig, View};
    ///
    /// // A fused QKV projection output [tokens][q_heads + 2 * kv_heads][head_dim]: q and k
    /// // are strided views of one buffer, read in place and written to separate tensors.
    /// let (tokens, q_heads, kv_heads, hd) = (3, 4, 2, 64);
    /// let width = (q_heads + 2 * kv_heads) * hd;
    /// let qkv = vec![0.5f32; tokens * width];
    /// let q_view = View { tokens, heads: q_heads, token_stride: width, head_stride: hd };
    /// let k_view = View { tokens, heads: kv_heads, token_stride: width, head_stride: hd };
    /// let mut q = vec![0.0f32; tokens * q_heads * hd];
    /// let mut k = vec![0.0f32; tokens * kv_heads * hd];
    /// let rope = Rope::new(RopeConfig::new(hd, 10_000.0))?;
    /// rope.apply_qk_into(
    ///     Heads::new(&qkv, q_view),
    ///     HeadsMut::new(&mut q, View::token_major(tokens, q_heads, hd)),
    ///     Some((Heads::new(&qkv[q_heads * hd..], k_view), HeadsMut::new(&mut k, View::token_major(tokens, kv_heads, hd)))),
    ///     &ApplyOptions::ids(&[100, 101, 102]),
    /// )?;
    /// assert_eq!(q[..hd], k[..hd]);
    /// # Ok::<(), rope_kernels::RopeError>(())
    /// ```
    ///
    /// # Errors
    /// Nothing is written when any of these is returned:
    /// - [`RopeError::OverlappingStrides`], [`RopeError::StrideOverflow`],
    ///   [`RopeError::BufferTooShort`] for a view that does not fit its buffer;
    /// - [`RopeError::ShapeMismatch`] if k has another token count than q, or an output
    ///   another shape than its input;
    /// - [`RopeError::PositionCountMismatch`], [`RopeError::PositionOverflow`] for
    ///   positions that do not match the tokens;
    /// - [`RopeError::TableShape`], [`RopeError::PositionOutOfRange`] for a cos/sin table
    ///   of the wrong width or too few rows.
    ///
    /// When several apply, the first in this order is returned (the same for every entry
    /// point, skipping the operands it does not take): the q view, the q output view, q
    /// against its output, the k view, the k output view, k against its output, k's token
    /// count against q's; then `position_ids` count or `start` overflow; then the table
    /// width; then the largest position against the table rows.
    ///
    /// Zero tokens or zero heads make an `Ok` no-op, but errors in the arguments themselves
    /// are still reported: a view that does not fit its buffer, mismatched shapes, a
    /// `position_ids` count other than the token count, a table of the wrong width. Positions
    /// are checked for overflow and against the table only when there are tokens (with zero
    /// heads they still exist and are checked).
    #[inline]
    pub fn apply_qk_into<T: Element>(
        &self,
        q: Heads<'_, T>,
        q_out: HeadsMut<'_, T>,
        k: Option<(Heads<'_, T>, HeadsMut<'_, T>)>,
        opts: &ApplyOptions<'_>,
    ) -> Result<(), RopeError> {
        let r = self.view();
        let (tokens, tensors) = r.qk_into_tensors(q, q_out, k)?;
        r.run(tokens, &tensors, opts)
    }
}

/// A [`Rope`] with its tables as slices: what every call runs on (`Copy`, a few words).
#[derive(Clone, Copy, Debug)]
pub(crate) struct RopeView<'a> {
    /// The configuration without arrays; `angle_mode` is the effective one (`HfCompatible`
    /// with a caller f32 table).
    pub(crate) params: RopeParams<'a>,
    /// The frequencies of calls whose frequencies do not depend on their length, and the
    /// short ones of LongRoPE.
    pub(crate) freqs: FreqRef<'a>,
    /// LongRoPE's long frequencies (always stored by a [`Rope`]; `None` makes LongRoPE
    /// compute them per call, which only the tests use).
    pub(crate) long: Option<FreqRef<'a>>,
    /// The f32 table is the caller's (kept when frequencies are computed per call).
    pub(crate) caller_f32: bool,
    pub(crate) tier: Option<Tier>,
}

impl<'r> RopeView<'r> {
    /// Number of rotated pairs, `rotary_dim / 2`.
    #[inline]
    pub(crate) fn pairs(&self) -> usize {
        self.params.pairs()
    }

    /// True when the frequencies of a call of length `seq_len` are computed for it: dynamic
    /// NTK past `max_position_embeddings` (up to there its frequencies are the unscaled,
    /// stored ones), LongRoPE without stored long frequencies.
    #[inline]
    pub(crate) fn per_call(&self, seq_len: u64) -> bool {
        match self.params.scaling {
            ScalingRef::DynamicNtk { max_position_embeddings, .. } => seq_len > max_position_embeddings,
            ScalingRef::LongRope(_) => self.long.is_none(),
            _ => false,
        }
    }

    /// The stored frequencies of a call of length `seq_len` (when not [`Self::per_call`]).
    #[inline]
    pub(crate) fn set_at(&self, seq_len: u64) -> FreqRef<'r> {
        match (self.params.scaling, self.long) {
            (ScalingRef::LongRope(p), Some(long)) if seq_len > p.original_max_position_embeddings => long,
            _ => self.freqs,
        }
    }

    /// The frequencies of a call of length `seq_len`: stored, or computed into `slot`.
    #[inline(always)]
    pub(crate) fn freqs_at<'f, D: FreqSlot + ?Sized>(
        &'f self,
        seq_len: u64,
        slot: &'f mut D,
    ) -> Result<FreqRef<'f>, RopeError> {
        if self.per_call(seq_len) {
            slot.fill(self, seq_len)
        } else {
            Ok(self.set_at(seq_len))
        }
    }

    #[inline]
    pub(crate) fn kernels(&self) -> &'static Kernels {
        match self.tier {
            Some(t) => dispatch::kernels_for(t).unwrap_or_else(dispatch::active_kernels),
            None => dispatch::active_kernels(),
        }
    }
}

/// `scaling` without its per-pair arrays, as an owned [`Scaling`] ([`Rope::config`]).
fn scaling_without_arrays(scaling: &ScalingRef<'_>) -> Scaling {
    let empty = || PairFactors::from_slice(&[]).expect("no values fit");
    match *scaling {
        ScalingRef::None => Scaling::None,
        ScalingRef::Linear { factor } => Scaling::Linear { factor },
        ScalingRef::DynamicNtk { factor, max_position_embeddings } => {
            Scaling::DynamicNtk { factor, max_position_embeddings }
        }
        ScalingRef::NtkAlpha { alpha } => Scaling::NtkAlpha { alpha },
        ScalingRef::Yarn(p) => Scaling::Yarn(p),
        ScalingRef::Llama3 {
            factor,
            low_freq_factor,
            high_freq_factor,
            original_max_position_embeddings,
        } => Scaling::Llama3 { factor, low_freq_factor, high_freq_factor, original_max_position_embeddings },
        ScalingRef::LongRope(p) => Scaling::LongRope(LongRopeParams {
            short_factor: empty(),
            long_factor: empty(),
            original_max_position_embeddings: p.original_max_position_embeddings,
            factor: p.factor,
            attention_factor: p.attention_factor,
        }),
        ScalingRef::Proportional { factor, partial_rotary_factor } => {
            Scaling::Proportional { factor, partial_rotary_factor }
        }
        ScalingRef::FreqFactors(_) => Scaling::FreqFactors(empty()),
    }
}

#[cfg(test)]
mod issue18_tests {
    use super::*;
    use crate::freq::LongRopeParams;
    use crate::view::View;
    extern crate std;
    use std::vec::Vec;

    /// A `Rope`'s precomputed LongRoPE long set (issue 18) gives the bits the per-call
    /// computation gave, on the fly in both regimes, forward and inverse.
    #[test]
    fn longrope_long_set_matches_per_call_frequencies() {
        let pairs = 8;
        let short: Vec<f64> = (0..pairs).map(|i| 1.0 + i as f64 * 0.1).collect();
        let long: Vec<f64> = (0..pairs).map(|i| 1.5 + i as f64 * 0.7).collect();
        let p = LongRopeParams::new(&short, &long, 64, 4.0).unwrap();
        let config = RopeConfig::new(2 * pairs, 10_000.0).with_scaling(Scaling::LongRope(p));
        let rope = Rope::new(config.clone()).unwrap();
        let pre = rope.view();
        assert!(pre.long.is_some());
        // Per call: the configuration with its arrays, no stored long set.
        let per_call = RopeView { params: config.params(), long: None, ..pre };
        for start in [0u32, 40, 63, 64, 1000, u32::MAX - 2] {
            for inverse in [false, true] {
                let x: Vec<f32> = (0..3 * 2 * 2 * pairs).map(|i| (i as f32 * 0.37).sin()).collect();
                let (mut a, mut b) = (x.clone(), x);
                let view = View::token_major(3, 2, 2 * pairs);
                let opts =
                    if inverse { ApplyOptions::start(start).inverse() } else { ApplyOptions::start(start) };
                rope.apply(HeadsMut::new(&mut a, view), &opts).unwrap();
                let (tokens, tensors) = per_call.qk_tensors(HeadsMut::new(&mut b, view), None).unwrap();
                per_call.run(tokens, &tensors, &opts).unwrap();
                let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&a), bits(&b), "start {start} inverse {inverse}");
            }
        }
    }
}
