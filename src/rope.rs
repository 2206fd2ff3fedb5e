//! The [`Rope`] object and its apply entry points.

use core::ops::Range;

use crate::config::{AngleMode, Layout, RopeConfig, RopeParams, MAX_PAIRS};
use crate::cossin::{fill_row, CosSinTable};
use crate::dispatch::{self, Tier};
use crate::element::Element;
use crate::error::{Operand, RopeError};
use crate::freq::{compute_inv_freq, FreqRef, Frequencies, Scaling, ScalingRef};
use crate::kernels::sincos::SinCos;
use crate::kernels::{Kernels, RotateArgs};

mod state;
use crate::view::View;
pub use state::RopeState;

mod axes;
mod chunked;
mod mrope;
mod mrope_index;
mod vision;
pub use axes::{AxisApply, AxisRows};
pub use chunked::{PreparedCall, TokenChunk, TokenChunks};
pub use mrope::{MRope, MRopeApply, MRopeStyle};
pub use mrope_index::{MRopeIndex, TOKEN_IMAGE, TOKEN_TEXT, TOKEN_VIDEO};
pub use vision::{vision_position_ids, VisionApply, VisionRope};

mod qknorm;
pub use qknorm::{QkNorm, WeightOffset};

mod layer;
#[doc(hidden)]
pub use layer::ErasedDest;
pub use layer::{Batch, CacheLayout, Dest, HeadSet, LayerApply, Qkv, Slots};

/// Rotation direction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Direction {
    /// `R_p x`: rotate by `+position * inv_freq`.
    #[default]
    Forward,
    /// `R_p^T x = R_{-p} x`: undoes `Forward` at the same positions.
    Inverse,
}

/// The position of each token of a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Positions<'a> {
    /// One position per token (HF `position_ids` of one sequence).
    Ids(&'a [u32]),
    /// Token `t` is at position `start + t` (a KV-cache offset).
    Start(u32),
}

impl Default for Positions<'_> {
    fn default() -> Self {
        Positions::Start(0)
    }
}

impl Positions<'_> {
    #[inline(always)]
    fn get(&self, t: usize) -> u32 {
        match *self {
            Positions::Ids(ids) => ids[t],
            // Validated: start + t fits in u32.
            Positions::Start(s) => s + t as u32,
        }
    }
}

/// Where cos/sin come from.
#[derive(Clone, Copy, Debug, Default)]
pub enum CosSin<'a> {
    /// Generated per token on the fly from the frequencies (no table, no allocation).
    #[default]
    OnTheFly,
    /// Rows of a caller table or a `RopeCache` (feature `alloc`), indexed by position.
    Table(CosSinTable<'a>),
}

/// Per-call options. `Default`: positions from 0, cos/sin on the fly, forward.
#[derive(Clone, Copy, Debug, Default)]
pub struct Apply<'a> {
    /// Token positions.
    pub positions: Positions<'a>,
    /// cos/sin source.
    pub cos_sin: CosSin<'a>,
    /// Forward or inverse rotation.
    pub direction: Direction,
}

impl<'a> Apply<'a> {
    /// Options with explicit `position_ids`.
    pub fn ids(position_ids: &'a [u32]) -> Self {
        Apply { positions: Positions::Ids(position_ids), ..Apply::default() }
    }

    /// Options with positions `start..start + tokens`.
    pub fn start(start: u32) -> Self {
        Apply { positions: Positions::Start(start), ..Apply::default() }
    }

    /// Builder: use a cos/sin table.
    pub fn with_table(mut self, table: CosSinTable<'a>) -> Self {
        self.cos_sin = CosSin::Table(table);
        self
    }

    /// Builder: inverse rotation.
    pub fn inverse(mut self) -> Self {
        self.direction = Direction::Inverse;
        self
    }
}

/// A read-only strided tensor: a buffer and its [`View`].
#[derive(Clone, Copy, Debug)]
pub struct Heads<'a, T> {
    /// The elements; the view must fit inside.
    pub data: &'a [T],
    /// Shape and strides.
    pub view: View,
}

/// A mutable strided tensor: a buffer and its [`View`].
#[derive(Debug)]
pub struct HeadsMut<'a, T> {
    /// The elements; the view must fit inside.
    pub data: &'a mut [T],
    /// Shape and strides.
    pub view: View,
}

impl<'a, T> Heads<'a, T> {
    /// Pairs a buffer with a view.
    pub fn new(data: &'a [T], view: View) -> Self {
        Heads { data, view }
    }
}

impl<'a, T> HeadsMut<'a, T> {
    /// Pairs a buffer with a view.
    pub fn new(data: &'a mut [T], view: View) -> Self {
        HeadsMut { data, view }
    }
}

/// A validated RoPE configuration with its frequencies, ready to apply.
///
/// All apply methods take tensors shaped `[tokens][heads][head_dim]` through a [`View`]
/// (strides in elements), rotate dimensions `0..rotary_dim` of every head and leave (or,
/// out of place, copy) the rest. q and k of one call share positions and cos/sin rows but
/// may have their own head counts and strides (GQA/MQA). Zero tokens or heads is an `Ok`
/// no-op. A call that returns an error has written nothing.
#[derive(Clone, Debug)]
pub struct Rope {
    config: RopeConfig,
    freqs: Frequencies,
    /// LongRoPE's long frequencies (those of every call longer than
    /// `original_max_position_embeddings`), computed once here so that no call computes
    /// frequencies (issue 18: a Phi-3 decode call recomputed them every time).
    long: Option<Frequencies>,
    tier: Option<Tier>,
}

impl Rope {
    /// Validates `config` and computes its frequencies.
    ///
    /// ```
    /// use rope_kernels::{Layout, Rope, RopeConfig, RopeError};
    ///
    /// // GPT-J-6B: head_dim 256, rotary_dim 64, interleaved pairs.
    /// let gptj = RopeConfig::new(256, 10_000.0).with_rotary_dim(64).with_layout(Layout::Interleaved);
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
    pub fn new(config: RopeConfig) -> Result<Self, RopeError> {
        let freqs = Frequencies::new(&config, 0)?;
        let mut long = None;
        if config.scaling.depends_on_seq_len() {
            // Dynamic NTK's frequencies shrink as the length grows, LongRoPE has two regimes:
            // the shortest and the longest call cover every call in between. LongRoPE keeps
            // its long set (every call past the original length uses it, as `RopeState`).
            let longest = Frequencies::new(&config, 1 << 32)?;
            if matches!(config.scaling, Scaling::LongRope(_)) {
                long = Some(longest);
            }
        }
        Ok(Rope { config, freqs, long, tier: None })
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
        self.tier = Some(tier);
        Ok(self)
    }

    /// The configuration.
    pub fn config(&self) -> &RopeConfig {
        &self.config
    }

    /// The frequencies used when they do not depend on the sequence length.
    pub fn frequencies(&self) -> &Frequencies {
        &self.freqs
    }

    /// The frequencies a call whose largest position is `seq_len - 1` uses (differs from
    /// [`Rope::frequencies`] only for dynamic NTK and LongRoPE).
    ///
    /// # Errors
    /// Those of [`Frequencies::new`].
    pub fn frequencies_at(&self, seq_len: u64) -> Result<Frequencies, RopeError> {
        // LongRoPE: the stored set every call past the original length uses (that of the
        // longest call, 2^32 positions), also for a `seq_len` no call reaches.
        if let (Scaling::LongRope(p), Some(long)) = (&self.config.scaling, &self.long) {
            let past = seq_len > p.original_max_position_embeddings;
            return Ok(if past { long.clone() } else { self.freqs.clone() });
        }
        if self.config.scaling.depends_on_seq_len() {
            self.freqs.at_seq_len(&self.config, seq_len)
        } else {
            Ok(self.freqs.clone())
        }
    }

    /// Uses the caller's f32 `inv_freq` table (e.g. the `inv_freq` buffer exported from
    /// Hugging Face transformers) and switches to [`AngleMode::HfCompatible`], so angles are
    /// `f32(position) * inv_freq[i]` rounded in f32 exactly as transformers forms them. The
    /// table is used verbatim by every later call, also for dynamic NTK and LongRoPE whose
    /// f64 frequencies are recomputed per call; the attention factor stays the computed one.
    ///
    /// # Errors
    /// [`RopeError::InvFreqLength`] if `inv_freq.len() != rotary_dim / 2`;
    /// [`RopeError::InvalidScalingParameter`] (`"inv_freq"`) for a value outside `[0, 2^95]`
    /// (see [`Frequencies::set_inv_freq_f32`]).
    pub fn with_hf_inv_freq(mut self, inv_freq: &[f32]) -> Result<Self, RopeError> {
        self.freqs.set_inv_freq_f32(inv_freq)?;
        if let Some(long) = &mut self.long {
            // Same length, already checked: cannot fail.
            long.set_inv_freq_f32(inv_freq)?;
        }
        self.config.angle_mode = AngleMode::HfCompatible;
        Ok(self)
    }

    /// The tier this object's calls run on.
    pub fn tier(&self) -> Tier {
        self.as_ref().tier()
    }

    /// This object as a [`RopeRef`]: the borrowed form every call runs on (a few words).
    #[inline]
    pub fn as_ref(&self) -> RopeRef<'_> {
        let mut params = self.config.params();
        params.angle_mode = self.config.angle_mode;
        RopeRef {
            params,
            freqs: self.freqs.view(),
            long: self.long.as_ref().map(Frequencies::view),
            caller_f32: self.freqs.has_caller_inv_freq_f32(),
            tier: self.tier,
        }
    }

    /// Fills a caller table with the rows of positions `start..start + rows`
    /// (`cos.len() == sin.len() == rows * rotary_dim / 2`), with the same values the
    /// on-the-fly path uses. Row `r` is position `start + r`. For dynamic NTK and LongRoPE
    /// the whole table uses the frequencies of a call of length `start + rows`
    /// ([`Rope::frequencies_at`]); a shorter on-the-fly call may use other ones.
    ///
    /// ```
    /// use rope_kernels::{Apply, CosSinTable, HeadsMut, Rope, RopeConfig, View};
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
    /// rope.apply(HeadsMut::new(&mut a, View::bshd(2, 3, 8)), &Apply::start(0).with_table(table))?;
    /// rope.apply(HeadsMut::new(&mut b, View::bshd(2, 3, 8)), &Apply::start(40))?;
    /// assert_eq!(a, b);
    /// # Ok::<(), rope_kernels::RopeError>(())
    /// ```
    ///
    /// # Errors
    /// [`RopeError::TableShape`] for mismatched lengths, [`RopeError::PositionOverflow`]
    /// if `start + rows - 1` exceeds `u32::MAX`, and those of [`Rope::frequencies_at`].
    pub fn fill_table(&self, start: u32, cos: &mut [f32], sin: &mut [f32]) -> Result<(), RopeError> {
        self.as_ref().fill_table(start, cos, sin)
    }

    /// Builds a cache of positions `0..max_positions`.
    ///
    /// ```
    /// use rope_kernels::{Apply, HeadsMut, Rope, RopeConfig, RopeError, View};
    ///
    /// let rope = Rope::new(RopeConfig::new(64, 10_000.0))?;
    /// let cache = rope.build_cache(4096)?;
    /// let mut q = vec![1.0f32; 3 * 64];
    /// let positions = [0, 17, 4095];
    /// let opts = Apply::ids(&positions).with_table(cache.table());
    /// rope.apply(HeadsMut::new(&mut q, View::bshd(3, 1, 64)), &opts)?;
    /// // Position 4096 is not in the cache.
    /// let err = rope.apply(HeadsMut::new(&mut q, View::bshd(1, 1, 64)), &Apply::start(4096).with_table(cache.table()));
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
        let pairs = self.config.pairs();
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
    /// use rope_kernels::{f16, Apply, HeadsMut, Rope, RopeConfig, View};
    ///
    /// let rope = Rope::new(RopeConfig::new(4, 10_000.0))?;
    /// // One token, one head: pairs (x0, x2) and (x1, x3) (HalfSplit). At position 0 the
    /// // rotation is the identity; the inverse at the same positions undoes the forward.
    /// let x = [1.0f32, 2.0, 3.0, 4.0].map(f16::from_f32);
    /// let mut y = x;
    /// rope.apply(HeadsMut::new(&mut y, View::bshd(1, 1, 4)), &Apply::start(0))?;
    /// assert_eq!(y, x);
    /// rope.apply(HeadsMut::new(&mut y, View::bshd(1, 1, 4)), &Apply::start(7))?;
    /// assert_ne!(y, x);
    /// rope.apply(HeadsMut::new(&mut y, View::bshd(1, 1, 4)), &Apply::start(7).inverse())?;
    /// assert!(y.iter().zip(&x).all(|(a, b)| (a.to_f32() - b.to_f32()).abs() < 1e-2));
    /// # Ok::<(), rope_kernels::RopeError>(())
    /// ```
    ///
    /// # Errors
    /// See [`Rope::apply_qk_into`].
    pub fn apply<T: Element>(&self, x: HeadsMut<'_, T>, opts: &Apply<'_>) -> Result<(), RopeError> {
        self.as_ref().apply_qk(x, None, opts)
    }

    /// Rotates q and (optionally) k in place at the same positions.
    ///
    /// ```
    /// use rope_kernels::{Apply, HeadsMut, Rope, RopeConfig, View};
    ///
    /// // Llama-3-8B shapes (GQA): 32 q heads, 8 kv heads, head_dim 128; a prefill of
    /// // 5 tokens. q is BSHD, k is BHSD (already transposed).
    /// let rope = Rope::new(RopeConfig::new(128, 500_000.0))?;
    /// let mut q = vec![0.5f32; 5 * 32 * 128];
    /// let mut k = vec![0.5f32; 8 * 5 * 128];
    /// rope.apply_qk(
    ///     HeadsMut::new(&mut q, View::bshd(5, 32, 128)),
    ///     Some(HeadsMut::new(&mut k, View::bhsd(5, 8, 128))),
    ///     &Apply::start(0),
    /// )?;
    /// // Token 3 of head 0 in BSHD q and BHSD k went through the same rotation.
    /// assert_eq!(q[3 * 32 * 128..3 * 32 * 128 + 128], k[3 * 128..4 * 128]);
    /// # Ok::<(), rope_kernels::RopeError>(())
    /// ```
    ///
    /// # Errors
    /// See [`Rope::apply_qk_into`].
    pub fn apply_qk<T: Element>(
        &self,
        q: HeadsMut<'_, T>,
        k: Option<HeadsMut<'_, T>>,
        opts: &Apply<'_>,
    ) -> Result<(), RopeError> {
        self.as_ref().apply_qk(q, k, opts)
    }

    /// Rotates one tensor out of place (`out` may have its own strides; same shape).
    ///
    /// ```
    /// use rope_kernels::{Apply, Heads, HeadsMut, Rope, RopeConfig, View};
    ///
    /// // Phi-2: head_dim 80, rotary_dim 32. Read BSHD, write BHSD.
    /// let rope = Rope::new(RopeConfig::new(80, 10_000.0).with_rotary_dim(32))?;
    /// let x: Vec<f32> = (0..4 * 2 * 80).map(|i| i as f32 / 640.0).collect();
    /// let mut out = vec![0.0f32; x.len()];
    /// let (src, dst) = (View::bshd(4, 2, 80), View::bhsd(4, 2, 80));
    /// rope.apply_into(Heads::new(&x, src), HeadsMut::new(&mut out, dst), &Apply::start(10))?;
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
        opts: &Apply<'_>,
    ) -> Result<(), RopeError> {
        self.as_ref().apply_qk_into(x, out, None, opts)
    }

    /// Rotates q and (optionally) k out of place at the same positions. Outputs may have
    /// their own strides but the shapes of their inputs; pass-through dimensions are copied.
    ///
    /// ```
    /// use rope_kernels::{Apply, Heads, HeadsMut, Rope, RopeConfig, View};
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
    ///     HeadsMut::new(&mut q, View::bshd(tokens, q_heads, hd)),
    ///     Some((Heads::new(&qkv[q_heads * hd..], k_view), HeadsMut::new(&mut k, View::bshd(tokens, kv_heads, hd)))),
    ///     &Apply::ids(&[100, 101, 102]),
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
    pub fn apply_qk_into<T: Element>(
        &self,
        q: Heads<'_, T>,
        q_out: HeadsMut<'_, T>,
        k: Option<(Heads<'_, T>, HeadsMut<'_, T>)>,
        opts: &Apply<'_>,
    ) -> Result<(), RopeError> {
        self.as_ref().apply_qk_into(q, q_out, k, opts)
    }
}

/// A RoPE with borrowed frequency tables: what every apply call runs on. From a [`Rope`]
/// ([`Rope::as_ref`]) or from caller memory sized to the configuration
/// ([`RopeState::rope`], no fixed-capacity value anywhere: issue 13). `Copy`, a few words.
/// Its methods are those of [`Rope`], with the same errors.
#[derive(Clone, Copy, Debug)]
pub struct RopeRef<'a> {
    /// The configuration; `angle_mode` is the effective one (`HfCompatible` with a caller
    /// f32 table).
    params: RopeParams<'a>,
    /// The frequencies of calls whose frequencies do not depend on their length, and the
    /// short ones of LongRoPE.
    freqs: FreqRef<'a>,
    /// LongRoPE's long frequencies, when precomputed ([`RopeState`]); else LongRoPE computes
    /// them per call.
    long: Option<FreqRef<'a>>,
    /// The f32 table is the caller's (kept when frequencies are computed per call).
    caller_f32: bool,
    tier: Option<Tier>,
}

impl<'r> RopeRef<'r> {
    /// Assembles a `RopeRef` ([`RopeState::rope`]); the tables are `params.pairs()` long.
    pub(crate) fn from_parts(
        params: RopeParams<'r>,
        freqs: FreqRef<'r>,
        long: Option<FreqRef<'r>>,
        caller_f32: bool,
        tier: Option<Tier>,
    ) -> Self {
        RopeRef { params, freqs, long, caller_f32, tier }
    }

    /// The configuration (the angle mode is the effective one). The frequencies are stored,
    /// so the per-pair arrays of LongRoPE and `FreqFactors` are not kept: here they are
    /// empty (their other parameters are kept), and [`RopeParams::validate`] on the result
    /// of a [`RopeState`](crate::RopeState) refuses them.
    pub fn params(&self) -> &RopeParams<'r> {
        &self.params
    }

    /// Number of rotated pairs, `rotary_dim / 2`.
    #[inline]
    pub fn pairs(&self) -> usize {
        self.params.pairs()
    }

    /// As [`Rope::apply`].
    ///
    /// # Errors
    /// See [`Rope::apply_qk_into`].
    pub fn apply<T: Element>(&self, x: HeadsMut<'_, T>, opts: &Apply<'_>) -> Result<(), RopeError> {
        self.apply_qk(x, None, opts)
    }

    /// As [`Rope::apply_qk`].
    ///
    /// # Errors
    /// See [`Rope::apply_qk_into`].
    #[inline]
    pub fn apply_qk<T: Element>(
        &self,
        q: HeadsMut<'_, T>,
        k: Option<HeadsMut<'_, T>>,
        opts: &Apply<'_>,
    ) -> Result<(), RopeError> {
        let (tokens, tensors) = self.qk_tensors(q, k)?;
        self.run(tokens, &tensors, opts)
    }

    /// As [`Rope::apply_into`].
    ///
    /// # Errors
    /// See [`Rope::apply_qk_into`].
    pub fn apply_into<T: Element>(
        &self,
        x: Heads<'_, T>,
        out: HeadsMut<'_, T>,
        opts: &Apply<'_>,
    ) -> Result<(), RopeError> {
        self.apply_qk_into(x, out, None, opts)
    }

    /// As [`Rope::apply_qk_into`].
    ///
    /// # Errors
    /// See [`Rope::apply_qk_into`].
    #[inline]
    pub fn apply_qk_into<T: Element>(
        &self,
        q: Heads<'_, T>,
        q_out: HeadsMut<'_, T>,
        k: Option<(Heads<'_, T>, HeadsMut<'_, T>)>,
        opts: &Apply<'_>,
    ) -> Result<(), RopeError> {
        let (tokens, tensors) = self.qk_into_tensors(q, q_out, k)?;
        self.run(tokens, &tensors, opts)
    }

    /// As [`Rope::fill_table`].
    ///
    /// # Errors
    /// Those of [`Rope::fill_table`].
    pub fn fill_table(&self, start: u32, cos: &mut [f32], sin: &mut [f32]) -> Result<(), RopeError> {
        let pairs = self.pairs();
        if cos.len() != sin.len() || !cos.len().is_multiple_of(pairs) {
            return Err(RopeError::TableShape);
        }
        let rows = cos.len() / pairs;
        if rows > 0 && u64::from(start) + rows as u64 - 1 > u64::from(u32::MAX) {
            return Err(RopeError::PositionOverflow);
        }
        let mut slot = CallFreqs::<MAX_PAIRS>::new();
        let freqs = self.freqs_at(u64::from(start) + rows as u64, &mut slot)?;
        let gen = SinCos::of(self.kernels());
        for (r, (c, s)) in cos.chunks_exact_mut(pairs).zip(sin.chunks_exact_mut(pairs)).enumerate() {
            fill_row(gen, &freqs, self.params.angle_mode, start + r as u32, c, s);
        }
        Ok(())
    }

    /// The `inv_freq` (f64, radians per position) a call whose largest position is
    /// `seq_len - 1` uses, into `out[..pairs]`, and its attention factor (as
    /// [`Rope::frequencies_at`]). `out` is written only on success.
    ///
    /// # Errors
    /// [`RopeError::InvFreqLength`] if `out.len() < pairs`; those of [`Frequencies::new`]
    /// for frequencies computed per call (dynamic NTK).
    pub fn inv_freq_at(&self, seq_len: u64, out: &mut [f64]) -> Result<f64, RopeError> {
        let pairs = self.pairs();
        if out.len() < pairs {
            return Err(RopeError::InvFreqLength { expected: pairs, len: out.len() });
        }
        if !self.per_call(seq_len) {
            let set = self.set_at(seq_len);
            out[..pairs].copy_from_slice(set.inv_freq);
            return Ok(set.attention_factor);
        }
        // Per call, into a temporary: nothing is written on error.
        let mut tmp = [0.0f64; MAX_PAIRS];
        let af = compute_inv_freq(&self.params, seq_len, &mut tmp[..pairs])?;
        out[..pairs].copy_from_slice(&tmp[..pairs]);
        Ok(af)
    }

    /// True when the frequencies of a call of length `seq_len` are computed for it: dynamic
    /// NTK past `max_position_embeddings` (up to there its frequencies are the unscaled,
    /// stored ones), LongRoPE without precomputed long frequencies.
    #[inline]
    fn per_call(&self, seq_len: u64) -> bool {
        match self.params.scaling {
            ScalingRef::DynamicNtk { max_position_embeddings, .. } => seq_len > max_position_embeddings,
            ScalingRef::LongRope(_) => self.long.is_none(),
            _ => false,
        }
    }

    /// The stored frequencies of a call of length `seq_len` (when not [`Self::per_call`]).
    #[inline]
    fn set_at(&self, seq_len: u64) -> FreqRef<'r> {
        match (self.params.scaling, self.long) {
            (ScalingRef::LongRope(p), Some(long)) if seq_len > p.original_max_position_embeddings => long,
            _ => self.freqs,
        }
    }

    /// The frequencies of a call of length `seq_len`: stored, or computed into `slot`.
    #[inline(always)]
    fn freqs_at<'f, D: FreqSlot + ?Sized>(
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

    /// The tier this object's calls run on.
    pub fn tier(&self) -> Tier {
        self.kernels().tier
    }

    #[inline]
    fn kernels(&self) -> &'static Kernels {
        match self.tier {
            Some(t) => dispatch::kernels_for(t).unwrap_or_else(dispatch::active_kernels),
            None => dispatch::active_kernels(),
        }
    }

    /// Validates positions and the cos/sin source ([`Rope::check_call`]), then rotates every
    /// token ([`rotate_tokens`]).
    #[inline(always)]
    fn run<T: Element>(
        &self,
        tokens: usize,
        tensors: &Tensors<T>,
        opts: &Apply<'_>,
    ) -> Result<(), RopeError> {
        let Some(seq_len) = self.check_call(tokens, tensors, opts)? else {
            return Ok(());
        };
        let p = self.token_params(opts, tokens);
        self.with_freqs(seq_len, opts.cos_sin, |freqs| {
            // The tensors come from views validated against the buffers this call borrows
            // (`apply_qk`, `apply_qk_into`), all `tokens` long; the call holds the only borrows
            // of those buffers; `check_call` passed the positions and cos/sin source for
            // `tokens` tokens; `kernels()` comes from the dispatcher.
            // SAFETY: the contract of `rotate_tokens` holds, as just said.
            unsafe { rotate_tokens(&p, freqs, tensors, 0..tokens) }
        })
    }

    /// Runs `body` with the frequencies of a validated call of length `seq_len` (largest
    /// position + 1) that writes: the object's own, or (dynamic NTK, LongRoPE) those computed
    /// for the call. A call with a cos/sin table never uses frequencies (issue 18: dynamic
    /// NTK and LongRoPE computed theirs even then), so it gets the object's own.
    ///
    /// Each path has a frame of its own (issue 13): the fixed one's row buffers are not on
    /// the stack while a per-call one runs with its frequencies.
    #[inline(always)]
    fn with_freqs<F: FnOnce(&FreqRef<'_>)>(
        &self,
        seq_len: u64,
        cos_sin: CosSin<'_>,
        body: F,
    ) -> Result<(), RopeError> {
        if !self.per_call(seq_len) || matches!(cos_sin, CosSin::Table(_)) {
            return self.run_fixed(seq_len, cos_sin, body);
        }
        if self.pairs() <= SMALL_PAIRS {
            return self.run_dynamic::<F, SMALL_PAIRS>(seq_len, cos_sin, body);
        }
        self.run_dynamic::<F, MAX_PAIRS>(seq_len, cos_sin, body)
    }

    /// [`RopeRef::with_freqs`] for frequencies stored in the object. Out of line on 32-bit
    /// targets (its own frame, for the microcontroller stack bound of issue 13); inlined on
    /// 64-bit ones, where the extra call measured +6-12% on decode (scripts/bench-gate.sh).
    #[cfg_attr(target_pointer_width = "64", inline(always))]
    #[cfg_attr(not(target_pointer_width = "64"), inline(never))]
    fn run_fixed<F: FnOnce(&FreqRef<'_>)>(
        &self,
        seq_len: u64,
        cos_sin: CosSin<'_>,
        body: F,
    ) -> Result<(), RopeError> {
        self.run_with(seq_len, cos_sin, &mut FixedFreqs, body)
    }

    /// [`RopeRef::with_freqs`] for frequencies that depend on the call's length (dynamic NTK,
    /// LongRoPE): out of line, so that only these calls carry the per-call
    /// [`Frequencies`] on their stack.
    #[inline(never)]
    fn run_dynamic<F: FnOnce(&FreqRef<'_>), const N: usize>(
        &self,
        seq_len: u64,
        cos_sin: CosSin<'_>,
        body: F,
    ) -> Result<(), RopeError> {
        let mut dynamic = CallFreqs::<N>::new();
        self.run_call(seq_len, cos_sin, &mut dynamic, body)
    }

    /// The body of [`RopeRef::run_dynamic`], once for every slot size (less code: issue 13).
    #[inline(never)]
    fn run_call<F: FnOnce(&FreqRef<'_>)>(
        &self,
        seq_len: u64,
        cos_sin: CosSin<'_>,
        dynamic: &mut dyn FreqSlot,
        body: F,
    ) -> Result<(), RopeError> {
        self.run_with(seq_len, cos_sin, dynamic, body)
    }

    #[inline(always)]
    fn run_with<F: FnOnce(&FreqRef<'_>), D: FreqSlot + ?Sized>(
        &self,
        seq_len: u64,
        cos_sin: CosSin<'_>,
        dynamic: &mut D,
        body: F,
    ) -> Result<(), RopeError> {
        // `seq_len` is that of a call that passed its checks and writes. A call with a table
        // reads no frequencies.
        let freqs =
            if matches!(cos_sin, CosSin::Table(_)) { self.freqs } else { self.freqs_at(seq_len, dynamic)? };
        body(&freqs);
        Ok(())
    }

    /// Validates the views of an in-place call, in the documented order (the q view, the k
    /// view, k's token count against q's), and returns the call's token count and tensors.
    #[inline]
    fn qk_tensors<T: Element>(
        &self,
        q: HeadsMut<'_, T>,
        k: Option<HeadsMut<'_, T>>,
    ) -> Result<(usize, Tensors<T>), RopeError> {
        let hd = self.params.head_dim;
        q.view.validate(hd, q.data.len(), Operand::Q)?;
        let qp = q.data.as_mut_ptr();
        let mut tensors = [Some(Tensor::new(qp, qp, q.view, q.view)), None];
        if let Some(k) = k {
            k.view.validate(hd, k.data.len(), Operand::K)?;
            if k.view.tokens != q.view.tokens {
                return Err(RopeError::ShapeMismatch { operand: Operand::K });
            }
            let kp = k.data.as_mut_ptr();
            tensors[1] = Some(Tensor::new(kp, kp, k.view, k.view));
        }
        Ok((q.view.tokens, tensors))
    }

    /// Validates the views of an out-of-place call, in the documented order (q, q's output,
    /// q against its output; the same for k; k's token count against q's), and returns the
    /// call's token count and tensors.
    #[inline]
    fn qk_into_tensors<T: Element>(
        &self,
        q: Heads<'_, T>,
        q_out: HeadsMut<'_, T>,
        k: Option<(Heads<'_, T>, HeadsMut<'_, T>)>,
    ) -> Result<(usize, Tensors<T>), RopeError> {
        let hd = self.params.head_dim;
        let pair = |x: &Heads<'_, T>, o: HeadsMut<'_, T>, op_in: Operand, op_out: Operand| {
            x.view.validate(hd, x.data.len(), op_in)?;
            o.view.validate(hd, o.data.len(), op_out)?;
            if o.view.tokens != x.view.tokens || o.view.heads != x.view.heads {
                return Err(RopeError::ShapeMismatch { operand: op_out });
            }
            Ok(Tensor::new(x.data.as_ptr(), o.data.as_mut_ptr(), x.view, o.view))
        };
        let mut tensors = [Some(pair(&q, q_out, Operand::Q, Operand::QOut)?), None];
        if let Some((k, k_out)) = k {
            let t = pair(&k, k_out, Operand::K, Operand::KOut)?;
            if k.view.tokens != q.view.tokens {
                return Err(RopeError::ShapeMismatch { operand: Operand::K });
            }
            tensors[1] = Some(t);
        }
        Ok((q.view.tokens, tensors))
    }

    /// The checks of every call after its views, single or prepared (same errors, same
    /// order): the `position_ids` count or `start` overflow, then the table width, then the
    /// largest position against the table rows. For a call that writes (some token, some
    /// head) it then returns the call's length (largest position + 1), which picks its
    /// frequencies ([`RopeRef::freqs_at`]); `None` for an `Ok` no-op.
    #[inline]
    fn check_call<T>(
        &self,
        tokens: usize,
        tensors: &Tensors<T>,
        opts: &Apply<'_>,
    ) -> Result<Option<u64>, RopeError> {
        let max_pos = max_position(opts.positions, tokens)?;
        check_table(self.pairs(), opts.cos_sin, max_pos)?;
        let Some(max_pos) = max_pos else { return Ok(None) };
        if tensors.iter().flatten().all(|t| t.heads == 0) {
            return Ok(None);
        }
        Ok(Some(u64::from(max_pos) + 1))
    }

    /// The per-token settings of a call of `tokens` tokens with options `opts`.
    #[inline]
    fn token_params<'o>(&self, opts: &Apply<'o>, tokens: usize) -> TokenParams<'o> {
        TokenParams {
            call_tokens: tokens,
            positions: opts.positions,
            cos_sin: opts.cos_sin,
            kernels: self.kernels(),
            layout: self.params.layout,
            mode: self.params.angle_mode,
            inverse: opts.direction == Direction::Inverse,
            head_dim: self.params.head_dim,
            pairs: self.pairs(),
        }
    }
}

/// The positions check of every call: the `position_ids` count against `tokens`, or `start`
/// overflow; returns the largest position (`None` without tokens).
#[inline]
fn max_position(positions: Positions<'_>, tokens: usize) -> Result<Option<u32>, RopeError> {
    match positions {
        Positions::Ids(ids) => {
            if ids.len() != tokens {
                return Err(RopeError::PositionCountMismatch { tokens, positions: ids.len() });
            }
            Ok(ids.iter().copied().max())
        }
        Positions::Start(s) => {
            if tokens == 0 {
                return Ok(None);
            }
            let last = u32::try_from(tokens - 1).ok().and_then(|n| s.checked_add(n));
            Ok(Some(last.ok_or(RopeError::PositionOverflow)?))
        }
    }
}

/// The cos/sin check of every call: a table's width (`pairs`), then its rows against the
/// largest position.
#[inline]
fn check_table(pairs: usize, cos_sin: CosSin<'_>, max_pos: Option<u32>) -> Result<(), RopeError> {
    if let CosSin::Table(table) = cos_sin {
        table.check_pairs(pairs)?;
        if let Some(m) = max_pos {
            if m as usize >= table.rows() {
                return Err(RopeError::PositionOutOfRange { position: m, rows: table.rows() });
            }
        }
    }
    Ok(())
}

/// Where [`Rope::check_call`] puts the frequencies of a call that depend on its length.
pub(crate) trait FreqSlot {
    /// Computes the frequencies of a call of length `seq_len` into the slot.
    fn fill<'f>(&'f mut self, rope: &RopeRef<'_>, seq_len: u64) -> Result<FreqRef<'f>, RopeError>;
}

/// The frequencies of one call computed for its length (dynamic NTK, LongRoPE without
/// precomputed long frequencies), for up to `N` pairs: the row generator's tables only
/// (20 bytes per pair; no f64 `inv_freq`, which is computed into `turns_hi` and reduced in
/// place).
#[derive(Debug)]
pub(crate) struct CallFreqs<const N: usize> {
    inv_freq_f32: [f32; N],
    turns_hi: [f64; N],
    turns_lo: [f64; N],
    pairs: usize,
    attention_factor: f64,
}

impl<const N: usize> CallFreqs<N> {
    pub(crate) fn new() -> Self {
        CallFreqs {
            inv_freq_f32: [0.0; N],
            turns_hi: [0.0; N],
            turns_lo: [0.0; N],
            pairs: 0,
            attention_factor: 1.0,
        }
    }

    /// The tables, borrowed (as filled by the last [`FreqSlot::fill`]).
    pub(crate) fn view(&self) -> FreqRef<'_> {
        let n = self.pairs;
        FreqRef {
            inv_freq: &[],
            inv_freq_f32: &self.inv_freq_f32[..n],
            turns_hi: &self.turns_hi[..n],
            turns_lo: &self.turns_lo[..n],
            attention_factor: self.attention_factor,
        }
    }
}

impl<const N: usize> FreqSlot for CallFreqs<N> {
    #[inline(never)]
    fn fill<'f>(&'f mut self, rope: &RopeRef<'_>, seq_len: u64) -> Result<FreqRef<'f>, RopeError> {
        let n = rope.pairs();
        if n > N {
            // Callers size the slot by the pairs; never taken.
            return Err(RopeError::RotaryDimTooLarge { rotary_dim: 2 * n, max: 2 * N });
        }
        let inv = &mut self.turns_hi[..n];
        self.attention_factor = compute_inv_freq(&rope.params, seq_len, inv)?;
        if rope.caller_f32 {
            self.inv_freq_f32[..n].copy_from_slice(rope.freqs.inv_freq_f32);
        } else {
            for (o, v) in self.inv_freq_f32[..n].iter_mut().zip(inv.iter()) {
                *o = *v as f32;
            }
        }
        for (h, l) in self.turns_hi[..n].iter_mut().zip(self.turns_lo[..n].iter_mut()) {
            (*h, *l) = crate::kernels::sincos::turns(*h);
        }
        self.pairs = n;
        Ok(self.view())
    }
}

/// The slot of calls whose frequencies do not depend on their length: no storage, so
/// their stack carries no [`Frequencies`] (issue 13). Never filled ([`Rope::run`] takes it
/// only when `!depends_on_seq_len()`, where `check_call` returns the object's own).
struct FixedFreqs;

impl FreqSlot for FixedFreqs {
    fn fill<'f>(&'f mut self, _: &RopeRef<'_>, _: u64) -> Result<FreqRef<'f>, RopeError> {
        Err(RopeError::InvalidScalingParameter { name: "seq_len" })
    }
}

/// One tensor of a call after its views were validated: raw pointers to its input and
/// output (the same in place) and their strides, in elements.
struct Tensor<T> {
    src: *const T,
    dst: *mut T,
    heads: usize,
    src_token_stride: usize,
    dst_token_stride: usize,
    src_head_stride: usize,
    dst_head_stride: usize,
}

impl<T> Clone for Tensor<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for Tensor<T> {}

impl<T> Tensor<T> {
    /// Whether the heads of a token lie farther apart than a head's tokens in the input or
    /// the output (`[heads][tokens][head_dim]`).
    #[inline(always)]
    fn head_major(&self) -> bool {
        self.heads > 1
            && (self.src_head_stride > self.src_token_stride || self.dst_head_stride > self.dst_token_stride)
    }

    /// The kernel arguments for every head of token `t` with one cos/sin row; prefetching
    /// in `large` calls where the heads of a token lie closer together than its tokens.
    ///
    /// # Safety
    /// `t` is below the token count of the views this tensor was validated from.
    #[inline(always)]
    unsafe fn token_args<'r>(
        &self,
        t: usize,
        p: &TokenParams<'_>,
        cos: &'r [f32],
        sin: &'r [f32],
        large: bool,
    ) -> RotateArgs<'r, T> {
        RotateArgs {
            // SAFETY: t < tokens of a validated view (caller), so the token's first head lies
            // inside the buffer.
            src: unsafe { self.src.add(t * self.src_token_stride) },
            // SAFETY: as above, for the output view.
            dst: unsafe { self.dst.add(t * self.dst_token_stride) },
            heads: self.heads,
            src_head_stride: self.src_head_stride,
            dst_head_stride: self.dst_head_stride,
            head_dim: p.head_dim,
            cos,
            sin,
            layout: p.layout,
            inverse: p.inverse,
            prefetch: large && self.src_head_stride < self.src_token_stride,
        }
    }

    /// Whether [`rotate_head_major`] walks this tensor head by head: head-major, and
    /// `HalfSplit` or out of place (`Interleaved` in place measured slower head by head).
    fn walks_head_major(&self, layout: Layout) -> bool {
        self.head_major() && (layout == Layout::HalfSplit || !core::ptr::eq(self.src, self.dst.cast_const()))
    }

    #[inline(always)]
    fn new(src: *const T, dst: *mut T, view_src: View, view_dst: View) -> Self {
        Tensor {
            src,
            dst,
            heads: view_src.heads,
            src_token_stride: view_src.token_stride,
            dst_token_stride: view_dst.token_stride,
            src_head_stride: view_src.head_stride,
            dst_head_stride: view_dst.head_stride,
        }
    }
}

/// The tensors of one call: q, then k if any.
type Tensors<T> = [Option<Tensor<T>>; 2];

/// What rotating any token of a validated call reads, besides its tensors and frequencies.
#[derive(Clone, Copy)]
struct TokenParams<'a> {
    /// Tokens of the whole call (a chunk may run fewer): sizes the prefetch decision.
    call_tokens: usize,
    positions: Positions<'a>,
    cos_sin: CosSin<'a>,
    kernels: &'static Kernels,
    layout: Layout,
    mode: AngleMode,
    inverse: bool,
    head_dim: usize,
    pairs: usize,
}

/// A cos or sin row buffer of `N` entries on a 64-byte line (a cache line; one AVX-512
/// vector) on 64-bit targets; 16 bytes on smaller ones (microcontrollers have no cache
/// lines to respect, and a 64-byte realignment costs their stack: issue 13).
#[cfg_attr(target_pointer_width = "64", repr(C, align(64)))]
#[cfg_attr(not(target_pointer_width = "64"), repr(C, align(16)))]
struct LineRow<const N: usize>([f32; N]);

/// Rows of up to this many pairs (head_dim 128) are generated in a buffer of this size;
/// larger ones in a [`MAX_PAIRS`] buffer in a frame of its own ([`on_the_fly_large`]), so
/// that small heads keep a small stack (issue 13).
const SMALL_PAIRS: usize = 64;

/// Generates the cos/sin row of every token of `range` into buffers of `N` entries (`N >=
/// p.pairs`) and hands it to `rotate_token`.
#[inline(always)]
fn on_the_fly<const N: usize>(
    p: &TokenParams<'_>,
    freqs: &FreqRef<'_>,
    range: Range<usize>,
    rotate_token: &impl Fn(usize, &[f32], &[f32]),
) {
    let gen = SinCos::of(p.kernels);
    // On 64-byte lines, like `RopeCache` rows: the kernels' row loads of every head then
    // never straddle two lines.
    let (mut cos_buf, mut sin_buf) = (LineRow([0.0; N]), LineRow([0.0; N]));
    for t in range {
        let pos = p.positions.get(t);
        let (cos, sin) = (&mut cos_buf.0[..p.pairs], &mut sin_buf.0[..p.pairs]);
        fill_row(gen, freqs, p.mode, pos, cos, sin);
        rotate_token(t, cos, sin);
    }
}

/// Rotates token `t` of every tensor of a call with one cos/sin row.
type RotateToken<'a> = dyn Fn(usize, &[f32], &[f32]) + 'a;

/// [`on_the_fly`] for rows of more than [`SMALL_PAIRS`] pairs, in its own frame.
#[inline(never)]
fn on_the_fly_large(
    p: &TokenParams<'_>,
    freqs: &FreqRef<'_>,
    range: Range<usize>,
    rotate_token: &RotateToken<'_>,
) {
    on_the_fly::<MAX_PAIRS>(p, freqs, range, &rotate_token);
}

/// Rotates tokens `range` of every tensor of a validated call: the one per-token loop of
/// the single calls ([`Rope::apply_qk_into`] and its siblings) and of the [`TokenChunk`]s of
/// a [`PreparedCall`], so that both give the same bits. Each token gets one cos/sin row
/// (from the table, or generated from `freqs`), shared by all its tensors.
///
/// # Safety
/// - every tensor comes from views validated against buffers that stay borrowed while this
///   runs (in place `src == dst`; out of place the input is a `&[T]` and the output a
///   distinct `&mut [T]`), and `range` lies within their token count;
/// - nothing else reads or writes the output rows, or writes the input rows, of the tokens
///   of `range` while this runs;
/// - the positions and cos/sin source of `p` passed [`Rope::check_call`] for that token
///   count (so every position of `range` has a table row), and `p.kernels` came from the
///   dispatcher (the CPU has their features).
#[inline(always)]
unsafe fn rotate_tokens<T: Element>(
    p: &TokenParams<'_>,
    freqs: &FreqRef<'_>,
    tensors: &Tensors<T>,
    range: Range<usize>,
) {
    let rotate = T::rotate_fn(p.kernels);
    let pairs = p.pairs;
    // Prefetch only in calls too large to be cache-resident (the whole call, not this chunk
    // of it; saturating: a hint only), and
    // only for tensors whose heads of one token lie closer together than one head's
    // consecutive tokens (`[t][h][d]`): there the kernel's look-ahead over the heads follows
    // memory order. In `[h][t][d]` each head is its own stream that the hardware prefetcher
    // already follows, and prefetching other heads' rows measured slower (prefill f32 on the
    // development machine: about 440 against 375 µs).
    let head_bytes = 2 * pairs * core::mem::size_of::<T>();
    let bytes = tensors
        .iter()
        .flatten()
        .fold(0usize, |b, x| b.saturating_add(x.heads.saturating_mul(head_bytes)))
        .saturating_mul(p.call_tokens);
    let large = bytes > crate::kernels::PREFETCH_MIN_BYTES;
    // Rotates token `t` of every tensor with one cos/sin row.
    let rotate_token = |t: usize, cos: &[f32], sin: &[f32]| {
        for x in tensors.iter().flatten() {
            if x.heads == 0 {
                continue;
            }
            // SAFETY: t < tokens of a view validated against its buffer (contract above).
            let args = unsafe { x.token_args(t, p, cos, sin, large) };
            // Validated views keep every head of token t in bounds and its rows apart from
            // other tokens'; in place src == dst, out of place `&[T]` and `&mut [T]` do not
            // overlap; nobody else touches these rows now.
            // SAFETY: as above (contract of `rotate_tokens`); the dispatcher checked the CPU
            // for `p.kernels`.
            unsafe { rotate(&args) };
        }
    };
    match (p.cos_sin, p.positions) {
        (CosSin::Table(table), Positions::Start(start))
            if range.len() > 1 && tensors.iter().flatten().any(|x| x.walks_head_major(p.layout)) =>
        {
            // SAFETY: forwarded (the same contract).
            unsafe { rotate_head_major(p, table, start, tensors, range, large) }
        }
        _ => for_each_row(p, freqs, range, &rotate_token),
    }
}

/// The one per-token loop of every call: hands each token `t` of `range` its cos/sin row
/// (position `p.positions.get(t)`: from the table, or generated from `freqs` into a row
/// buffer sized to the pairs) and calls `token(t, cos, sin)`. The caller has validated the
/// positions against the table.
#[inline(always)]
fn for_each_row(
    p: &TokenParams<'_>,
    freqs: &FreqRef<'_>,
    range: Range<usize>,
    token: &impl Fn(usize, &[f32], &[f32]),
) {
    match p.cos_sin {
        CosSin::Table(table) => {
            for t in range {
                // Validated: every position of the call is below the table's rows.
                let (cos, sin) = table.row_in_range(p.positions.get(t));
                token(t, cos, sin);
            }
        }
        CosSin::OnTheFly if p.pairs <= SMALL_PAIRS => on_the_fly::<SMALL_PAIRS>(p, freqs, range, token),
        CosSin::OnTheFly => on_the_fly_large(p, freqs, range, &token),
    }
}

/// [`rotate_tokens`] with a table and consecutive positions, for calls with a tensor whose
/// heads lie farther apart than its tokens (`[heads][tokens][head_dim]`, BHSD; see
/// [`Tensor::walks_head_major`] for which): each such tensor is rotated head by head, one
/// kernel call ([`RotateRowsFn`](crate::kernels::RotateRowsFn)) per head over all of
/// `range` with each token's row, so that memory is walked as one stream (the head's rows,
/// beside the table's) instead of one stream per head, 2 MB apart at 4096 tokens. The other
/// tensors of the call go token by token. Each (token, head) row gets the operations of
/// the token-major loop, so the bits are the same.
///
/// Measured on the development machine (issue 18; AMD EPYC, single core, medians of two
/// alternated runs of `benches/zoo.rs`), token by token against head by head:
/// - Llama 3.1 long (4096 tokens) in place: AVX2 10.3 -> 5.2 ms, AVX-512 7.2 -> 4.9 ms; out
///   of place 12.7 -> 7.0 and 9.6 -> 6.4 ms; prefill (512 tokens) unchanged within noise;
/// - GPT-J (`Interleaved`, rotary_dim 64 of 256) out of place: long 17.0 -> 8.5 ms, prefill
///   1.7 -> 0.71 ms (AVX2); in place it was slower (long AVX-512 4.7 -> 9.9 ms: its rows
///   are expanded once per row instead of once per token), so it stays token by token;
/// - blocks of tokens (tables of 8 KB to 512 KB per block) instead of whole heads were
///   slower at long (Llama 3.1: 5.2-6.4 against 4.7-5.1 ms): every block restarts each
///   head's stream.
///
/// # Safety
/// The contract of [`rotate_tokens`]; the positions are `start + t`.
#[inline(never)]
unsafe fn rotate_head_major<T: Element>(
    p: &TokenParams<'_>,
    table: CosSinTable<'_>,
    start: u32,
    tensors: &Tensors<T>,
    range: Range<usize>,
    large: bool,
) {
    let (rotate, rotate_rows) = (T::rotate_fn(p.kernels), T::rotate_rows_fn(p.kernels));
    // Validated: every position of the call (start + t, no overflow) has a table row.
    let (cos_rows, sin_rows) = table.rows_in_range(start + range.start as u32, range.len());
    let (c0, s0) = (&cos_rows[..p.pairs], &sin_rows[..p.pairs]);
    for x in tensors.iter().flatten().filter(|x| x.heads != 0) {
        if x.walks_head_major(p.layout) {
            for h in 0..x.heads {
                let o = range.start * x.src_token_stride + h * x.src_head_stride;
                let od = range.start * x.dst_token_stride + h * x.dst_head_stride;
                let args = RotateArgs {
                    // SAFETY: the tokens of `range` and head h of a view validated against its
                    // buffer (contract of `rotate_tokens`): the row lies inside the buffer.
                    src: unsafe { x.src.add(o) },
                    // SAFETY: as above, for the output view.
                    dst: unsafe { x.dst.add(od) },
                    heads: range.len(),
                    src_head_stride: x.src_token_stride,
                    dst_head_stride: x.dst_token_stride,
                    head_dim: p.head_dim,
                    cos: c0,
                    sin: s0,
                    layout: p.layout,
                    inverse: p.inverse,
                    prefetch: false,
                };
                // Head h at the tokens of `range`, each with its row; the rows of different
                // tokens of one head do not overlap (views are validated), so they are
                // `range.len()` disjoint "heads"; otherwise as in `rotate_tokens`.
                // SAFETY: as just said.
                unsafe { rotate_rows(&args, cos_rows, sin_rows) };
            }
        } else {
            for (i, t) in range.clone().enumerate() {
                let r = i * p.pairs..(i + 1) * p.pairs;
                // SAFETY: token t of a view validated against its buffer (contract of
                // `rotate_tokens`).
                let args = unsafe { x.token_args(t, p, &cos_rows[r.clone()], &sin_rows[r], large) };
                // SAFETY: every head of a validated token; as in `rotate_tokens`.
                unsafe { rotate(&args) };
            }
        }
    }
}

#[cfg(test)]
mod issue18_tests {
    use super::*;
    use crate::freq::LongRopeParams;
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
        let rope = Rope::new(config).unwrap();
        assert!(rope.long.is_some());
        let pre = rope.as_ref();
        let per_call = RopeRef { long: None, ..pre };
        for start in [0u32, 40, 63, 64, 1000, u32::MAX - 2] {
            for inverse in [false, true] {
                let x: Vec<f32> = (0..3 * 2 * 2 * pairs).map(|i| (i as f32 * 0.37).sin()).collect();
                let (mut a, mut b) = (x.clone(), x);
                let view = View::bshd(3, 2, 2 * pairs);
                let opts = if inverse { Apply::start(start).inverse() } else { Apply::start(start) };
                pre.apply(HeadsMut::new(&mut a, view), &opts).unwrap();
                per_call.apply(HeadsMut::new(&mut b, view), &opts).unwrap();
                let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&a), bits(&b), "start {start} inverse {inverse}");
            }
        }
    }
}
