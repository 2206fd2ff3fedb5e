//! 2-D RoPE of vision encoders: two position streams (patch row h, patch column w).

use super::axes::{self, AxisFreqs, AxisOptions};
use super::{Heads, HeadsMut, Rope, RopeView};
#[cfg(feature = "alloc")]
use crate::config::RopeConfig;
use crate::config::MAX_PAIRS;
use crate::dispatch::Tier;
use crate::element::Element;
use crate::error::RopeError;
use crate::freq::Frequencies;
use crate::freq::ScalingRef;

/// Per-call options of [`VisionRope`]: the two position streams `[h, w]` (or a per-token
/// table) and the direction (48 bytes on 64-bit targets).
pub type VisionOptions<'a> = AxisOptions<'a, 2>;

/// The old name of [`VisionOptions`].
#[deprecated(since = "0.2.0", note = "renamed to `VisionOptions`")]
pub type VisionApply<'a> = VisionOptions<'a>;

/// 2-D vision RoPE (Qwen2-VL / Qwen2.5-VL ViT, transformers `Qwen2VLVisionRotaryEmbedding`
/// with `apply_rotary_pos_emb_vision`; ggml `GGML_ROPE_TYPE_VISION`).
///
/// Each axis has `rotary_dim / 4` frequencies `inv_k = theta^(-2k / (rotary_dim / 2))`,
/// `k < rotary_dim / 4` (a 1-D RoPE of dimension `rotary_dim / 2`). Pair `j < rotary_dim /
/// 4` rotates by `h * inv_j`, pair `j >= rotary_dim / 4` by `w * inv_(j - rotary_dim / 4)`,
/// where `(h, w)` are the patch's row and column ([`vision_position_ids`] builds them in the
/// ViT's patch order). The pairs are those of the configuration's [`PairLayout`](crate::PairLayout):
/// `HalfSplit` for Qwen (`rotate_half` over the whole head).
///
/// Llama 4's vision encoder (`Llama4VisionRotaryEmbedding` with `vision_apply_rotary_emb`)
/// is the same rule with `PairLayout::Interleaved` (complex pairs `(2j, 2j+1)`), the column
/// first and 1-based positions: pass `[w + 1, h + 1]` as the streams and `[0, 0]` for the
/// CLS token, whose rotation transformers masks to the identity.
///
/// ```
/// use rope_kernels::{vision_position_ids, HeadsMut, RopeConfig, View, VisionOptions, VisionRope};
///
/// // Qwen2-VL ViT: head_dim 80, theta 1e4; a 4x6 patch grid, 2x2 merge blocks.
/// let vit = VisionRope::new(RopeConfig::new(80, 1e4))?;
/// let (mut h, mut w) = ([0u32; 24], [0u32; 24]);
/// assert_eq!(vision_position_ids([1, 4, 6], 2, &mut h, &mut w)?, 24);
/// let mut q = vec![0.5f32; 24 * 16 * 80];
/// vit.apply(HeadsMut::new(&mut q, View::token_major(24, 16, 80)), &VisionOptions::ids([&h, &w]))?;
/// # Ok::<(), rope_kernels::RopeError>(())
/// ```
///
/// The handle is small (a [`Rope`] and a pointer: 200 bytes on 64-bit targets). With
/// `alloc`, the per-pair axis tables are built once, on the heap; without it, per call from
/// the 1-D frequencies.
#[derive(Clone, Debug)]
pub struct VisionRope<'a> {
    rope: Rope<'a>,
    /// The per-axis pair tables, built once (with `alloc`: on the heap, so the handle stays
    /// small); without `alloc`, built per call as [`Rope::apply_vision_qk`] does.
    #[cfg(feature = "alloc")]
    axes: Option<alloc::boxed::Box<AxisFreqs>>,
}

#[cfg(feature = "alloc")]
impl VisionRope<'static> {
    /// Validates `config` (`head_dim`, `rotary_dim`, `theta`, layout, angle mode; as
    /// [`Rope::new`]) and computes the per-axis frequencies.
    ///
    /// # Errors
    /// Those of [`Rope::new`]; [`RopeError::InvalidRotaryDim`] if `rotary_dim` is not a
    /// multiple of 4; [`RopeError::UnsupportedScaling`] for any scaling (vision encoders
    /// have none).
    pub fn new(config: RopeConfig) -> Result<Self, RopeError> {
        VisionRope::from_rope(Rope::new(config)?)
    }
}

impl<'a> VisionRope<'a> {
    /// Vision RoPE on `rope` (e.g. one in caller memory, [`Rope::new_in`]).
    ///
    /// # Errors
    /// Those of [`VisionRope::new`] after [`Rope::new`]'s.
    pub fn from_rope(rope: Rope<'a>) -> Result<Self, RopeError> {
        let p = rope.params();
        if !matches!(p.scaling, ScalingRef::None) {
            return Err(RopeError::UnsupportedScaling {
                operation: "vision",
                scaling: scaling_name(&p.scaling),
            });
        }
        if !p.rotary_dim.is_multiple_of(4) {
            return Err(RopeError::InvalidRotaryDim { rotary_dim: p.rotary_dim });
        }
        let mut v = VisionRope {
            rope,
            #[cfg(feature = "alloc")]
            axes: None,
        };
        v.cache_axes()?;
        Ok(v)
    }

    /// Builds the stored axis tables (see the `axes` field); a no-op without `alloc`.
    fn cache_axes(&mut self) -> Result<(), RopeError> {
        #[cfg(feature = "alloc")]
        {
            self.axes = Some(alloc::boxed::Box::new(self.rope.view().vision_axes()?));
        }
        Ok(())
    }

    /// Uses transformers' own f32 per-axis `inv_freq` (`rotary_dim / 4` values, the
    /// `inv_freq` buffer of `Qwen2VLVisionRotaryEmbedding`) and switches to
    /// [`AngleMode::HfCompatible`](crate::AngleMode::HfCompatible), as
    /// [`Rope::with_hf_inv_freq`].
    ///
    /// # Errors
    /// [`RopeError::InvFreqLength`] if `inv_freq.len() != rotary_dim / 4`; those of
    /// [`Rope::with_hf_inv_freq`] for the values.
    #[cfg(feature = "alloc")]
    pub fn with_hf_inv_freq(mut self, inv_freq: &[f32]) -> Result<Self, RopeError> {
        let quarter = self.rope.pairs() / 2;
        if inv_freq.len() != quarter {
            return Err(RopeError::InvFreqLength { expected: quarter, len: inv_freq.len() });
        }
        // Value k at 1-D pairs 2k (the one read) and 2k + 1.
        let mut full = [0.0f32; MAX_PAIRS];
        for (i, f) in full[..2 * quarter].iter_mut().enumerate() {
            *f = inv_freq[i / 2];
        }
        self.rope = self.rope.with_hf_inv_freq(&full[..2 * quarter])?;
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

    /// The configuration and tier; its frequencies are those of a 1-D RoPE, of which the
    /// even pairs are the per-axis ones.
    pub fn rope(&self) -> &Rope<'a> {
        &self.rope
    }

    /// The per-axis frequencies (`rotary_dim / 4` pairs): `theta^(-2k / (rotary_dim / 2))`,
    /// the 1-D RoPE's even pairs (the same f64 exponent, one rational rounded once, so the
    /// same bits), with the caller's f32 table if [`VisionRope::with_hf_inv_freq`] gave one.
    pub fn axis_frequencies(&self) -> Frequencies {
        let r = self.rope.view();
        let quarter = r.pairs() / 2;
        let (mut inv, mut hi, mut lo) = ([0.0f64; MAX_PAIRS], [0.0f64; MAX_PAIRS], [0.0f64; MAX_PAIRS]);
        let mut f32s = [0.0f32; MAX_PAIRS];
        for k in 0..quarter {
            inv[k] = r.freqs.inv_freq[2 * k];
            hi[k] = r.freqs.turns_hi[2 * k];
            lo[k] = r.freqs.turns_lo[2 * k];
            f32s[k] = r.freqs.inv_freq_f32[2 * k];
        }
        let axis = crate::freq::FreqRef {
            inv_freq: &inv[..quarter],
            inv_freq_f32: &f32s[..quarter],
            turns_hi: &hi[..quarter],
            turns_lo: &lo[..quarter],
            attention_factor: r.freqs.attention_factor,
        };
        Frequencies::from_ref(&axis, r.caller_f32)
    }

    /// Fills a per-token cos/sin table: row `n` is patch `n` at `(position_ids[0][n],
    /// position_ids[1][n])` = `(h, w)`. Pass it with [`VisionOptions::table`]: one table
    /// serves every layer of the encoder.
    ///
    /// # Errors
    /// As [`MRope::fill_table`](crate::MRope::fill_table).
    pub fn fill_table(
        &self,
        position_ids: [&[u32]; 2],
        cos: &mut [f32],
        sin: &mut [f32],
    ) -> Result<(), RopeError> {
        self.rope.fill_vision_table(position_ids, cos, sin)
    }

    /// [`VisionRope::fill_table`] into a new per-token table (`tokens` rows, each array on a
    /// 64-byte line, as `Rope::build_cache`); pass `cache.table()`.
    ///
    /// # Errors
    /// [`RopeError::PositionCountMismatch`] if the streams differ in length;
    /// [`RopeError::OutOfMemory`] if the allocator refuses the tables.
    #[cfg(feature = "alloc")]
    pub fn build_table(&self, position_ids: [&[u32]; 2]) -> Result<crate::RopeCache, RopeError> {
        let r = self.rope.view();
        axes::build_table(&r, &r.vision_axes()?, position_ids)
    }

    /// Rotates one tensor in place.
    ///
    /// # Errors
    /// See [`MRope::apply_qk_into`](crate::MRope::apply_qk_into) (two streams, h then w).
    pub fn apply<T: Element>(&self, x: HeadsMut<'_, T>, opts: &VisionOptions<'_>) -> Result<(), RopeError> {
        self.apply_qk(x, None, opts)
    }

    /// Rotates q and (optionally) k in place at the same positions.
    ///
    /// # Errors
    /// See [`MRope::apply_qk_into`](crate::MRope::apply_qk_into).
    pub fn apply_qk<T: Element>(
        &self,
        q: HeadsMut<'_, T>,
        k: Option<HeadsMut<'_, T>>,
        opts: &VisionOptions<'_>,
    ) -> Result<(), RopeError> {
        #[cfg(feature = "alloc")]
        if let Some(axes) = &self.axes {
            let r = self.rope.view();
            let (tokens, tensors) = r.qk_tensors(q, k)?;
            return axes::run(&r, axes, tokens, &tensors, opts, None);
        }
        self.rope.apply_vision_qk(q, k, opts)
    }

    /// Rotates q and (optionally) k out of place.
    ///
    /// # Errors
    /// See [`MRope::apply_qk_into`](crate::MRope::apply_qk_into).
    pub fn apply_qk_into<T: Element>(
        &self,
        q: Heads<'_, T>,
        q_out: HeadsMut<'_, T>,
        k: Option<(Heads<'_, T>, HeadsMut<'_, T>)>,
        opts: &VisionOptions<'_>,
    ) -> Result<(), RopeError> {
        #[cfg(feature = "alloc")]
        if let Some(axes) = &self.axes {
            let r = self.rope.view();
            let (tokens, tensors) = r.qk_into_tensors(q, q_out, k)?;
            return axes::run(&r, axes, tokens, &tensors, opts, None);
        }
        self.rope.apply_vision_qk_into(q, q_out, k, opts)
    }
}

/// The stream of vision pair `j`: 0 (h) below `quarter = rotary_dim / 4`, else 1 (w).
/// [`Scaling::name`](crate::Scaling::name) of a borrowed scaling.
fn scaling_name(s: &ScalingRef<'_>) -> &'static str {
    match s {
        ScalingRef::None => "default",
        ScalingRef::Linear { .. } => "linear",
        ScalingRef::DynamicNtk { .. } => "dynamic",
        ScalingRef::NtkAlpha { .. } => "ntk_alpha",
        ScalingRef::Yarn(_) => "yarn",
        ScalingRef::Llama3 { .. } => "llama3",
        ScalingRef::LongRope(_) => "longrope",
        ScalingRef::Proportional { .. } => "proportional",
        ScalingRef::FreqFactors(_) => "freq_factors",
    }
}

pub(crate) fn vision_stream(quarter: usize) -> impl Fn(usize) -> usize {
    move |j| usize::from(j >= quarter)
}

/// The 1-D frequency index of vision pair `j`: `2 * (j mod quarter)` (see [`VisionRope::new`]).
pub(crate) fn vision_freq(quarter: usize) -> impl Fn(usize) -> usize {
    move |j| 2 * (j % quarter)
}

/// The `(h, w)` patch positions of a Qwen2-VL / Qwen2.5-VL ViT input of `grid_thw = [t, h,
/// w]` patches, in the encoder's patch order: frames in order, within a frame the
/// `spatial_merge_size`² merge blocks row-major over the grid, within a block row-major
/// (transformers `Qwen2VisionTransformerPretrainedModel.rot_pos_emb`,
/// `Qwen2_5_VisionTransformerPretrainedModel.rot_pos_emb`). Writes `t * h * w` entries to
/// `h_out`, `w_out` and returns that count.
///
/// This is the order of the patch embeddings as they enter the ViT. Qwen2.5-VL's ViT then
/// reorders its hidden states by `window_index` (`get_window_index`: merge blocks grouped
/// into `window_size` windows) and permutes `rotary_pos_emb` with the same index before the
/// blocks run, so a Qwen2.5-VL runtime that applies this RoPE to the reordered q and k must
/// apply the same permutation to these positions: slot `b` takes merge block
/// `window_index[b]` (`spatial_merge_size`² consecutive patches each), as HF's
/// `rotary_pos_emb[window_index, :, :]`. Qwen2-VL and Qwen3-VL keep this order.
///
/// # Errors
/// [`RopeError::InvalidPositionLayout`] if `spatial_merge_size` is 0 or does not divide
/// `h` and `w`; [`RopeError::PositionCountMismatch`] if `h_out` or `w_out` is not `t * h * w`
/// long (`tokens` is that count). Nothing is written on error.
pub fn vision_position_ids(
    grid_thw: [u32; 3],
    spatial_merge_size: u32,
    h_out: &mut [u32],
    w_out: &mut [u32],
) -> Result<usize, RopeError> {
    let [t, h, w] = grid_thw;
    let m = spatial_merge_size;
    if m == 0 || h % m != 0 || w % m != 0 {
        return Err(RopeError::InvalidPositionLayout {
            reason: "spatial_merge_size must be > 0 and divide the grid's h and w",
        });
    }
    let n = (t as usize).checked_mul(h as usize).and_then(|x| x.checked_mul(w as usize));
    let n = n.ok_or(RopeError::PositionOverflow)?;
    for len in [h_out.len(), w_out.len()] {
        if len != n {
            return Err(RopeError::PositionCountMismatch { tokens: n, positions: len });
        }
    }
    let mut i = 0;
    for _ in 0..t {
        for br in 0..h / m {
            for bc in 0..w / m {
                for r in 0..m {
                    for c in 0..m {
                        h_out[i] = br * m + r;
                        w_out[i] = bc * m + c;
                        i += 1;
                    }
                }
            }
        }
    }
    Ok(n)
}

/// 2-D vision RoPE on a borrowed RoPE of the encoder's configuration (`head_dim`,
/// `rotary_dim`, `theta`, no scaling; as the C ABI holds it): the same operation and bits as
/// [`VisionRope`], whose per-axis frequency `k` is this RoPE's `inv_freq[2k]` (for a caller
/// f32 table too: put HF's per-axis value `k` at index `2k`).
impl Rope<'_> {
    /// As [`VisionRope::apply_qk`] with this RoPE's configuration and frequencies.
    ///
    /// # Errors
    /// First [`RopeError::UnsupportedScaling`] (any scaling) and
    /// [`RopeError::InvalidRotaryDim`] (not a multiple of 4), then those of
    /// [`MRope::apply_qk_into`](crate::MRope::apply_qk_into) (two streams).
    pub fn apply_vision_qk<T: Element>(
        &self,
        q: HeadsMut<'_, T>,
        k: Option<HeadsMut<'_, T>>,
        opts: &VisionOptions<'_>,
    ) -> Result<(), RopeError> {
        let r = self.view();
        let axes = r.vision_axes()?;
        let (tokens, tensors) = r.qk_tensors(q, k)?;
        axes::run(&r, &axes, tokens, &tensors, opts, None)
    }

    /// As [`VisionRope::apply_qk_into`] with this RoPE's configuration and frequencies.
    ///
    /// # Errors
    /// As [`Rope::apply_vision_qk`].
    pub fn apply_vision_qk_into<T: Element>(
        &self,
        q: Heads<'_, T>,
        q_out: HeadsMut<'_, T>,
        k: Option<(Heads<'_, T>, HeadsMut<'_, T>)>,
        opts: &VisionOptions<'_>,
    ) -> Result<(), RopeError> {
        let r = self.view();
        let axes = r.vision_axes()?;
        let (tokens, tensors) = r.qk_into_tensors(q, q_out, k)?;
        axes::run(&r, &axes, tokens, &tensors, opts, None)
    }

    /// As [`VisionRope::fill_table`] with this RoPE's configuration and frequencies: row `n`
    /// is patch `n` at `(position_ids[0][n], position_ids[1][n])` = `(h, w)`, the frequency
    /// index restarting per axis (not the global index of
    /// [`Rope::fill_mrope_table`], whose table is wrong for vision).
    ///
    /// # Errors
    /// As [`Rope::apply_vision_qk`]'s configuration checks, then
    /// [`MRope::fill_table`](crate::MRope::fill_table)'s.
    pub fn fill_vision_table(
        &self,
        position_ids: [&[u32]; 2],
        cos: &mut [f32],
        sin: &mut [f32],
    ) -> Result<(), RopeError> {
        let r = self.view();
        let axes = r.vision_axes()?;
        axes::fill_table(&r, &axes, position_ids, cos, sin)
    }
}

impl RopeView<'_> {
    /// The pair tables of a vision call, after its configuration checks.
    pub(super) fn vision_axes(&self) -> Result<AxisFreqs, RopeError> {
        if !matches!(self.params.scaling, ScalingRef::None) {
            return Err(RopeError::UnsupportedScaling { operation: "vision", scaling: "scaled" });
        }
        let rd = self.params.rotary_dim;
        if !rd.is_multiple_of(4) {
            return Err(RopeError::InvalidRotaryDim { rotary_dim: rd });
        }
        let q = rd / 4;
        Ok(AxisFreqs::new(rd / 2, 2, vision_stream(q), vision_freq(q), &self.freqs))
    }
}
