//! Multimodal RoPE (MRoPE): three position streams (t, h, w) per token.

use super::axes::{self, AxisFreqs, AxisOptions};
use super::{CallFreqs, Heads, HeadsMut, Rope, RopeView};
#[cfg(feature = "alloc")]
use crate::config::RopeConfig;
use crate::config::MAX_PAIRS;
use crate::dispatch::Tier;
use crate::element::Element;
use crate::error::RopeError;

/// Per-call options of [`MRope`]: the three position streams `[t, h, w]` (or a per-token
/// table) and the direction (56 bytes on 64-bit targets).
pub type MRopeOptions<'a> = AxisOptions<'a, 3>;

/// The old name of [`MRopeOptions`].
#[deprecated(since = "0.2.0", note = "renamed to `MRopeOptions`")]
pub type MRopeApply<'a> = MRopeOptions<'a>;

/// Which pairs of the head use which position stream.
///
/// With `mrope_section = [s_t, s_h, s_w]` (in pairs, summing to `rotary_dim / 2`), pair `j`
/// always uses `inv_freq[j]` (the 1-D RoPE's frequencies) and:
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MRopeStyle {
    /// Qwen2-VL, Qwen2.5-VL: pairs `0..s_t` use t, the next `s_h` use h, the last `s_w`
    /// use w (transformers `apply_multimodal_rotary_pos_emb`, which splits cos/sin of each
    /// half of the head by `mrope_section`; ggml `GGML_ROPE_TYPE_MROPE`).
    Sectioned,
    /// Qwen3-VL: pair `j` uses h if `j % 3 == 1` and `j < 3 * s_h`, w if `j % 3 == 2` and
    /// `j < 3 * s_w`, t otherwise (transformers `Qwen3VLTextRotaryEmbedding.
    /// apply_interleaved_mrope`; ggml `GGML_ROPE_TYPE_IMROPE`). `3 * s_h <= pairs + 1` and
    /// `3 * s_w <= pairs` so that each stream gets exactly its section's count.
    Interleaved,
}

/// Multimodal RoPE (Qwen2-VL, Qwen2.5-VL, Qwen3-VL): every token has three positions
/// `(t, h, w)` (text tokens `t = h = w`; see [`MRopeIndex`](crate::MRopeIndex) to build them),
/// and pair `j` of every head rotates by `position_ids[stream(j)][n] * inv_freq[j]` with the
/// stream given by [`MRopeStyle`] and `mrope_section`.
///
/// Tensors, layouts, element types, angle modes, directions and the checks on the views
/// are those of [`Rope`]; the positions come as three streams of one entry per token
/// ([`MRopeOptions::ids`]) or as a per-token cos/sin table ([`MRope::fill_table`],
/// [`MRopeOptions::table`]).
///
/// ```
/// use rope_kernels::{HeadsMut, MRope, MRopeOptions, MRopeStyle, RopeConfig, View};
///
/// // Qwen2-VL-7B: head_dim 128, theta 1e6, mrope_section [16, 24, 24].
/// let mrope = MRope::new(RopeConfig::new(128, 1e6), [16, 24, 24], MRopeStyle::Sectioned)?;
/// // 2 text tokens, then one image token at (t, h, w) = (2, 2, 3).
/// let (t, h, w) = ([0, 1, 2], [0, 1, 2], [0, 1, 3]);
/// let mut q = vec![0.5f32; 3 * 28 * 128];
/// mrope.apply(HeadsMut::new(&mut q, View::token_major(3, 28, 128)), &MRopeOptions::ids([&t, &h, &w]))?;
/// # Ok::<(), rope_kernels::RopeError>(())
/// ```
///
/// The handle is small (a [`Rope`] and a few words: 232 bytes on 64-bit targets). With
/// `alloc`, the per-pair stream tables are built once, on the heap, unless the frequencies
/// depend on the call's length (dynamic NTK, LongRoPE); otherwise they are built per call.
#[derive(Clone, Debug)]
pub struct MRope<'a> {
    rope: Rope<'a>,
    mrope_section: [usize; 3],
    style: MRopeStyle,
    /// The per-pair stream tables, built once when the frequencies do not depend on the
    /// call's length (with `alloc`: on the heap, so the handle stays small); else built per
    /// call, as [`Rope::apply_mrope_qk`] does.
    #[cfg(feature = "alloc")]
    axes: Option<alloc::boxed::Box<AxisFreqs>>,
}

#[cfg(feature = "alloc")]
impl MRope<'static> {
    /// Validates `config` (as [`Rope::new`]) and `mrope_section` (`[t, h, w]`, in pairs).
    ///
    /// Scaling combines as transformers combines it: `Qwen2VLRotaryEmbedding` takes the
    /// scaled `inv_freq` and attention factor of any `rope_type` (those of the 1-D path,
    /// [`Rope::frequencies`]). Frequencies that depend on the call's length (dynamic NTK,
    /// LongRoPE) are those of a call whose largest position over all three streams is
    /// `seq_len - 1`, as the 1-D path and HF's `dynamic_rope_update` (`max(position_ids) +
    /// 1` over the streams) take it; a table keeps the frequencies of its fill.
    ///
    /// # Errors
    /// Those of [`Rope::new`]; [`RopeError::InvalidMropeSection`] if the section does not
    /// sum to `rotary_dim / 2` or (interleaved) runs past the pairs.
    pub fn new(config: RopeConfig, mrope_section: [usize; 3], style: MRopeStyle) -> Result<Self, RopeError> {
        MRope::from_rope(Rope::new(config)?, mrope_section, style)
    }
}

impl<'a> MRope<'a> {
    /// MRoPE on `rope` (e.g. one in caller memory, [`Rope::new_in`]), as [`MRope::new`].
    ///
    /// # Errors
    /// [`RopeError::InvalidMropeSection`] (see [`MRope::new`]).
    pub fn from_rope(
        rope: Rope<'a>,
        mrope_section: [usize; 3],
        style: MRopeStyle,
    ) -> Result<Self, RopeError> {
        check_section(mrope_section, style, rope.pairs())?;
        let mut m = MRope {
            rope,
            mrope_section,
            style,
            #[cfg(feature = "alloc")]
            axes: None,
        };
        m.cache_axes()?;
        Ok(m)
    }

    /// Builds the stored stream tables (see the `axes` field); a no-op without `alloc`.
    fn cache_axes(&mut self) -> Result<(), RopeError> {
        #[cfg(feature = "alloc")]
        {
            let r = self.rope.view();
            self.axes = if r.params.scaling.depends_on_seq_len() {
                None
            } else {
                Some(alloc::boxed::Box::new(r.mrope_axes(self.mrope_section, self.style, 0)?))
            };
        }
        Ok(())
    }

    /// Uses transformers' own f32 `inv_freq` (`rotary_dim / 2` values) and switches to
    /// [`AngleMode::HfCompatible`](crate::AngleMode::HfCompatible), as
    /// [`Rope::with_hf_inv_freq`]: angles are `f32(position) * inv_freq[j]` rounded in f32,
    /// which is what `Qwen2VLRotaryEmbedding.forward` forms per stream.
    ///
    /// # Errors
    /// Those of [`Rope::with_hf_inv_freq`].
    #[cfg(feature = "alloc")]
    pub fn with_hf_inv_freq(mut self, inv_freq: &[f32]) -> Result<Self, RopeError> {
        self.rope = self.rope.with_hf_inv_freq(inv_freq)?;
        self.cache_axes()?;
        Ok(self)
    }

    /// Pins this object to `tier` (as [`Rope::with_tier`]).
    ///
    /// # Errors
    /// [`RopeError::TierUnavailable`].
    pub fn with_tier(mut self, tier: Tier) -> Result<Self, RopeError> {
        self.rope = self.rope.with_tier(tier)?;
        Ok(self)
    }

    /// The 1-D RoPE underneath: configuration, frequencies (`inv_freq[j]` of pair `j`), tier.
    pub fn rope(&self) -> &Rope<'a> {
        &self.rope
    }

    /// `mrope_section` `[t, h, w]`, in pairs.
    pub fn mrope_section(&self) -> [usize; 3] {
        self.mrope_section
    }

    /// Sectioned or interleaved.
    pub fn style(&self) -> MRopeStyle {
        self.style
    }

    /// The stream (0 = t, 1 = h, 2 = w) pair `j` uses (`freq_stream[j]` of the golden
    /// files); `None` for `j >= rotary_dim / 2`.
    pub fn stream_of_pair(&self, j: usize) -> Option<usize> {
        (j < self.rope.pairs()).then(|| stream_of(self.style, self.mrope_section, j))
    }

    /// Fills a per-token cos/sin table: row `n` of `cos`, `sin` is token `n` at
    /// `(position_ids[0][n], position_ids[1][n], position_ids[2][n])`, the values the
    /// on-the-fly path uses. Pass it with [`MRopeOptions::table`]; it serves every layer of a
    /// step.
    ///
    /// # Errors
    /// [`RopeError::PositionCountMismatch`] if the streams differ in length;
    /// [`RopeError::TableShape`] unless `cos.len() == sin.len() == tokens * rotary_dim / 2`.
    /// Nothing is written on error.
    pub fn fill_table(
        &self,
        position_ids: [&[u32]; 3],
        cos: &mut [f32],
        sin: &mut [f32],
    ) -> Result<(), RopeError> {
        self.rope.fill_mrope_table(position_ids, self.mrope_section, self.style, cos, sin)
    }

    /// [`MRope::fill_table`] into a new per-token table (`tokens` rows, each array on a
    /// 64-byte line, as `Rope::build_cache`); pass `cache.table()`.
    ///
    /// # Errors
    /// [`RopeError::PositionCountMismatch`] if the streams differ in length;
    /// [`RopeError::OutOfMemory`] if the allocator refuses the tables.
    #[cfg(feature = "alloc")]
    pub fn build_table(&self, position_ids: [&[u32]; 3]) -> Result<crate::RopeCache, RopeError> {
        let r = self.rope.view();
        let axes = r.mrope_axes(self.mrope_section, self.style, axes::seq_len(&position_ids))?;
        axes::build_table(&r, &axes, position_ids)
    }

    /// Rotates one tensor in place.
    ///
    /// # Errors
    /// See [`MRope::apply_qk_into`].
    pub fn apply<T: Element>(&self, x: HeadsMut<'_, T>, opts: &MRopeOptions<'_>) -> Result<(), RopeError> {
        self.apply_qk(x, None, opts)
    }

    /// Rotates q and (optionally) k in place at the same positions.
    ///
    /// # Errors
    /// See [`MRope::apply_qk_into`].
    pub fn apply_qk<T: Element>(
        &self,
        q: HeadsMut<'_, T>,
        k: Option<HeadsMut<'_, T>>,
        opts: &MRopeOptions<'_>,
    ) -> Result<(), RopeError> {
        #[cfg(feature = "alloc")]
        if let Some(axes) = &self.axes {
            let r = self.rope.view();
            let (tokens, tensors) = r.qk_tensors(q, k)?;
            return axes::run(&r, axes, tokens, &tensors, opts, r.pair_order(0));
        }
        self.rope.apply_mrope_qk(q, k, self.mrope_section, self.style, opts)
    }

    /// Rotates q and (optionally) k out of place (outputs have their inputs' shapes, their
    /// own strides; pass-through dimensions are copied).
    ///
    /// # Errors
    /// Nothing is written when any is returned. First the views, as
    /// [`Rope::apply_qk_into`] ([`RopeError::OverlappingStrides`],
    /// [`RopeError::StrideOverflow`], [`RopeError::BufferTooShort`],
    /// [`RopeError::ShapeMismatch`]); then, on the fly, [`RopeError::PositionCountMismatch`]
    /// for a stream whose length is not the token count (t, then h, then w); with a table,
    /// [`RopeError::TableShape`] for rows not `rotary_dim / 2` wide, then
    /// [`RopeError::PositionOutOfRange`] (`position`: the last token index) for fewer rows
    /// than tokens. Zero tokens or heads is an `Ok` no-op after these checks.
    pub fn apply_qk_into<T: Element>(
        &self,
        q: Heads<'_, T>,
        q_out: HeadsMut<'_, T>,
        k: Option<(Heads<'_, T>, HeadsMut<'_, T>)>,
        opts: &MRopeOptions<'_>,
    ) -> Result<(), RopeError> {
        #[cfg(feature = "alloc")]
        if let Some(axes) = &self.axes {
            let r = self.rope.view();
            let (tokens, tensors) = r.qk_into_tensors(q, q_out, k)?;
            return axes::run(&r, axes, tokens, &tensors, opts, r.pair_order(0));
        }
        self.rope.apply_mrope_qk_into(q, q_out, k, self.mrope_section, self.style, opts)
    }
}

/// The stream of pair `j` (see [`MRopeStyle`]).
fn stream_of(style: MRopeStyle, [st, sh, sw]: [usize; 3], j: usize) -> usize {
    match style {
        MRopeStyle::Sectioned if j < st => 0,
        MRopeStyle::Sectioned if j < st + sh => 1,
        MRopeStyle::Sectioned => 2,
        MRopeStyle::Interleaved if j % 3 == 1 && j < 3 * sh => 1,
        MRopeStyle::Interleaved if j % 3 == 2 && j < 3 * sw => 2,
        MRopeStyle::Interleaved => 0,
    }
}

/// Checks `mrope_section` against `pairs` (see [`RopeError::InvalidMropeSection`]).
fn check_section(mrope_section: [usize; 3], style: MRopeStyle, pairs: usize) -> Result<(), RopeError> {
    let [st, sh, sw] = mrope_section;
    let bad = RopeError::InvalidMropeSection { mrope_section, pairs };
    let sum = st.checked_add(sh).and_then(|s| s.checked_add(sw)).ok_or(bad)?;
    if sum != pairs {
        return Err(bad);
    }
    if style == MRopeStyle::Interleaved && (sh > (pairs + 1) / 3 || sw > pairs / 3) {
        return Err(bad);
    }
    Ok(())
}

/// MRoPE on any [`Rope`] (e.g. one built in caller memory, as the C ABI does): the same
/// operation as [`MRope`] (which calls these), its pair-to-stream tables built per call (a
/// copy of `rotary_dim / 2` frequencies).
impl Rope<'_> {
    /// As [`MRope::apply_qk`] with this RoPE's configuration and frequencies.
    ///
    /// # Errors
    /// First [`RopeError::InvalidMropeSection`], then those of [`MRope::apply_qk_into`].
    pub fn apply_mrope_qk<T: Element>(
        &self,
        q: HeadsMut<'_, T>,
        k: Option<HeadsMut<'_, T>>,
        mrope_section: [usize; 3],
        style: MRopeStyle,
        opts: &MRopeOptions<'_>,
    ) -> Result<(), RopeError> {
        let seq_len = axes::call_seq_len(&opts.rows);
        let r = self.view();
        let axes = r.mrope_axes(mrope_section, style, seq_len)?;
        let (tokens, tensors) = r.qk_tensors(q, k)?;
        axes::run(&r, &axes, tokens, &tensors, opts, r.pair_order(seq_len))
    }

    /// As [`MRope::apply_qk_into`] with this RoPE's configuration and frequencies.
    ///
    /// # Errors
    /// As [`Rope::apply_mrope_qk`].
    pub fn apply_mrope_qk_into<T: Element>(
        &self,
        q: Heads<'_, T>,
        q_out: HeadsMut<'_, T>,
        k: Option<(Heads<'_, T>, HeadsMut<'_, T>)>,
        mrope_section: [usize; 3],
        style: MRopeStyle,
        opts: &MRopeOptions<'_>,
    ) -> Result<(), RopeError> {
        let seq_len = axes::call_seq_len(&opts.rows);
        let r = self.view();
        let axes = r.mrope_axes(mrope_section, style, seq_len)?;
        let (tokens, tensors) = r.qk_into_tensors(q, q_out, k)?;
        axes::run(&r, &axes, tokens, &tensors, opts, r.pair_order(seq_len))
    }

    /// As [`MRope::fill_table`] with this RoPE's configuration and frequencies.
    ///
    /// # Errors
    /// As [`Rope::apply_mrope_qk`]'s configuration checks, then [`MRope::fill_table`]'s.
    pub fn fill_mrope_table(
        &self,
        position_ids: [&[u32]; 3],
        mrope_section: [usize; 3],
        style: MRopeStyle,
        cos: &mut [f32],
        sin: &mut [f32],
    ) -> Result<(), RopeError> {
        let r = self.view();
        let axes = r.mrope_axes(mrope_section, style, axes::seq_len(&position_ids))?;
        axes::fill_table(&r, &axes, position_ids, cos, sin)
    }
}

impl RopeView<'_> {
    /// The pair tables of an MRoPE call of length `seq_len` (its frequencies: stored, or
    /// computed for that length), after the section check.
    pub(super) fn mrope_axes(
        &self,
        mrope_section: [usize; 3],
        style: MRopeStyle,
        seq_len: u64,
    ) -> Result<AxisFreqs, RopeError> {
        let pairs = self.pairs();
        check_section(mrope_section, style, pairs)?;
        let stream = |j| stream_of(style, mrope_section, j);
        if !self.per_call(seq_len) {
            return Ok(AxisFreqs::new(pairs, 3, stream, |j| j, &self.set_at(seq_len)));
        }
        let mut slot = CallFreqs::<MAX_PAIRS>::new();
        let freqs = self.freqs_at(seq_len, &mut slot)?;
        Ok(AxisFreqs::new(pairs, 3, stream, |j| j, &freqs))
    }

    /// The stored frequencies of a call of length `seq_len`, in pair order (see
    /// `CallParams::pair_order`); `None` for frequencies computed per call.
    pub(super) fn pair_order(&self, seq_len: u64) -> Option<crate::freq::FreqRef<'_>> {
        (!self.per_call(seq_len)).then(|| self.set_at(seq_len))
    }
}
