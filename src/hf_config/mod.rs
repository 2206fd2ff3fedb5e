//! Loading the RoPE settings of a Hugging Face `config.json` (feature `hf-config`, on by
//! default; needs `std`).
//!
//! [`ModelConfig::from_json_str`] maps the fields real configurations use, current and
//! legacy spellings alike, published (`rope_scaling`, `rope_theta`) or re-saved by
//! transformers 5 (`rope_parameters`, possibly one per layer type), to validated
//! [`RopeConfig`]s, plus the data a runtime needs around them: which layers use which
//! configuration ([`ModelConfig::rope_for_layer`]), which layers have no RoPE
//! (`no_rope_layers`), multimodal RoPE sections ([`MropeSpec`]) and the vision encoder's
//! 2-D RoPE ([`VisionRopeSpec`]).
//!
//! **Nesting.** A multimodal config keeps the language model's fields in `text_config`
//! (Gemma 3, Llama 4, Qwen3-VL, re-saved Qwen2-VL) or at the top level (published Qwen2-VL
//! and Qwen2.5-VL); the text part is `text_config` when present, else the top level. Its
//! `model_type` (e.g. `gemma3_text`; the top-level one when it has none) picks the layout
//! and the defaults below. Error fields carry the path, e.g. `text_config.rope_scaling.factor`.
//!
//! | What | Fields read (in the text part), first found wins |
//! |---|---|
//! | heads | `num_attention_heads`, `n_head` (GPT-J) |
//! | kv heads | `num_key_value_heads`; default: the heads |
//! | head_dim | `qk_rope_head_dim` (DeepSeek MLA: the rotary part), `head_dim`, `hidden_size / num_attention_heads` (`n_embd / n_head`) |
//! | rotary_dim | `rope_type: "proportional"`: head_dim; `qk_rope_head_dim`; `rotary_dim` (GPT-J); `floor(head_dim * partial_rotary_factor)` (in the rope dict or top level; both present and different: an error; Phi); `floor(head_dim * rotary_pct)` (GPT-NeoX); head_dim. `rotary_dim` beside a `partial_rotary_factor`/`rotary_pct` that gives another value is an error |
//! | theta | `rope_theta` in the rope dict, `rope_theta`, `rotary_emb_base` (GPT-NeoX); default by model type (below) |
//! | rope dict | `rope_parameters` (transformers 5), `rope_scaling` (legacy; beside `rope_parameters`, every key both carry must agree, else an error); `null` or absent: no scaling; an object of objects keyed by layer type (`{"full_attention": {..}, "sliding_attention": {..}}`): one configuration per layer type |
//! | rope type | `rope_type`, `type` (legacy); default `"default"`; `"su"` is LongRoPE; `"mrope"` is the default frequencies with [`MropeSpec`]; a dict with parameters but no type (`{"factor": 8}`) is an error |
//! | MRoPE | by text model type, as transformers' modeling files read it ([`ModelConfig::mrope`]; any rope type combines with it): `qwen2_vl`, `qwen2_5_vl` (and `_text`): sectioned, `mrope_section` `[t, h, w]` in the rope dict required (HF indexes `rope_scaling["mrope_section"]`), `mrope_interleaved: true` a warning (not read); `qwen3_vl`, `qwen3_vl_moe` (and `_text`): always interleaved (HF `Qwen3VLTextRotaryEmbedding` calls `apply_interleaved_mrope` and never reads `mrope_interleaved`: `false` is a warning), `mrope_section` default `[24, 20, 20]`; every other type: `mrope_section`, `mrope_interleaved` or rope type `mrope` is an error |
//! | context | `max_position_embeddings`, `n_positions` (GPT-J); `original_max_position_embeddings` in the rope dict or top level (Phi-3) |
//! | layout | `gptj`, `deepseek_v2`, `llama4`/`llama4_text` (complex pairs, HF `apply_rotary_emb`), and `deepseek_v3` unless `rope_interleave: false`: [`PairLayout::Interleaved`]; every other model type [`PairLayout::HalfSplit`] |
//! | layers | `num_hidden_layers` (required for the types with a layer pattern: Gemma 2/3, Llama 4, SmolLM3, Qwen3-Next); `layer_types`, else the model type's pattern: Gemma 3 `sliding_window_pattern` (`_sliding_window_pattern`; default 6: layer `i` slides unless `(i + 1) % 6 == 0`), Gemma 2 every other layer, Qwen3-Next `full_attention` every `full_attention_interval`-th layer (default 4) and `linear_attention` on the others (`Qwen3NextConfig`), Llama 4 `chunked_attention` on RoPE layers and `full_attention` on the others; else every layer `full_attention` |
//! | per layer type | the keyed rope dict; Gemma 3 (`gemma3_text`): `sliding_attention` layers use `rope_local_base_freq` with no scaling (HF `Gemma3RotaryEmbedding` for local layers), the others the rope dict; a `rope_local_base_freq` beside a keyed `sliding_attention.rope_theta` must equal it (else an error) |
//! | no RoPE | `no_rope_layers` (1: the layer uses RoPE); Llama 4 / SmolLM3 when absent or empty: every `no_rope_layer_interval`-th layer (default 4) has none (HF `Llama4TextConfig`) |
//! | qk norm | `use_qk_norm` (Llama 4 default `true`), `rms_norm_eps` |
//! | vision | `vision_config` of Qwen2-VL, Qwen2.5-VL, Qwen3-VL and Llama 4: [`VisionRopeSpec`]; the width must be a multiple of the heads; keys of its rope dict other than `rope_type`/`type`/`rope_theta` are warnings |
//! | video t step | Qwen2.5-VL (`qwen2_5_vl`, `qwen2_5_vl_text`): `vision_config.tokens_per_second`, default 4 ([`ModelConfig::tokens_per_second`]); elsewhere a warning |
//! | refused | Gemma 3n (`gemma3n`, `gemma3n_text`: KV-shared layers and its own layer pattern) and EXAONE 4 (`exaone4`: RoPE on sliding-window layers only): [`ConfigError::Conflict`] on `model_type` |
//!
//! **Defaults of fields a published file omits**, as transformers' config classes set them:
//! theta 10000 (`PretrainedConfig` convention, `rope_theta=10000.0` in most classes);
//! `gemma3_text`: theta 1e6, `rope_local_base_freq` 1e4, `max_position_embeddings` 131072
//! (`Gemma3TextConfig`); `llama4_text`: theta 5e5, `max_position_embeddings` 131072,
//! `no_rope_layer_interval` 4, `use_qk_norm` true (`Llama4TextConfig`); `qwen2_vl`,
//! `qwen2_5_vl` (and their `_text`): theta 1e6 (`Qwen2VLConfig`, `Qwen2_5_VLConfig`);
//! `qwen3_vl_text`, `qwen3_vl_moe_text`: theta 5e6 (`Qwen3VLTextConfig`,
//! `Qwen3VLMoeTextConfig`), `mrope_section` [24, 20, 20] (`Qwen3VLTextRotaryEmbedding`); vision RoPE theta 1e4
//! (`VisionRotaryEmbedding(theta=10000.0)`, `Llama4VisionConfig.rope_theta`).
//!
//! Scaling parameters follow transformers `modeling_rope_utils.py`: YaRN's `factor`
//! defaults to `max_position_embeddings / original_max_position_embeddings` and its
//! `original_max_position_embeddings` to `max_position_embeddings`; `beta_fast`/`beta_slow`
//! of 0 or `null` mean 32/1; `truncate` defaults to `true`; LongRoPE's `factor` defaults to
//! `max_position_embeddings / original_max_position_embeddings`; `"dynamic"` with a
//! non-zero `alpha` (HunYuan) is static NTK ([`Scaling::NtkAlpha`](crate::Scaling::NtkAlpha));
//! Llama 3 accepts `low_freq_factor == high_freq_factor` (Llama 4: no blend band).
//!
//! **Operations.** [`ModelConfig::mrope_rope`] builds the [`MRope`](crate::MRope) of an MRoPE
//! config, [`ModelConfig::vision_rope`] the [`VisionRope`](crate::VisionRope) of its vision
//! encoder (streams from [`VisionRopeSpec::fill_position_ids`]; Llama 4's patches and class
//! token: [`llama4_vision_position_ids`]), and
//! [`ModelConfig::qk_norm_for_layer`] the per-head q/k norm of a layer ([`QkNormSpec`], into
//! which the runtime passes its weights for [`Rope::apply_qk_norm`](crate::Rope::apply_qk_norm)).
//!
//! **Warnings.** Keys of a rope dict that its rope type does not read (and the few other
//! fields read but not applied) do not fail the load: they are listed in
//! [`ModelConfig::warnings`], one line each naming the field.
//!
//! ```
//! use rope_kernels::hf_config::ModelConfig;
//! use rope_kernels::Rope;
//!
//! let json = r#"{"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32,
//!     "num_key_value_heads": 8, "max_position_embeddings": 131072, "rope_theta": 500000.0,
//!     "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
//!                      "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}}"#;
//! let model = ModelConfig::from_json_str(json)?;
//! assert_eq!((model.num_key_value_heads, model.head_dim), (8, 128));
//! assert_eq!(model.rope.scaling.name(), "llama3");
//! let rope = Rope::new(model.rope.clone())?;
//! # let _ = rope;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Gemma 3: one configuration per layer type.
//!
//! ```
//! use rope_kernels::hf_config::{LayerType, ModelConfig};
//!
//! let json = r#"{"model_type": "gemma3_text", "head_dim": 256, "num_attention_heads": 4,
//!     "num_hidden_layers": 12, "rope_local_base_freq": 10000, "rope_theta": 1000000}"#;
//! let model = ModelConfig::from_json_str(json)?;
//! assert_eq!(model.layer_types[0], LayerType::SlidingAttention);
//! assert_eq!(model.rope_for_layer(0).map(|r| r.theta), Some(1e4));
//! assert_eq!(model.rope_for_layer(5).map(|r| r.theta), Some(1e6)); // full_attention
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::string::{String, ToString};
use std::vec::Vec;

use serde_json::Value;

use crate::config::{PairLayout, RopeConfig};
use crate::error::RopeError;

mod json;
mod layers;
mod multimodal;
mod ops;
mod parse;
mod rope_dict;

use json::Obj;
pub use multimodal::llama4_vision_position_ids;
pub use ops::{QkNormKind, QkNormSpec, NO_QK_NORM_TYPES};

/// The attention and RoPE shape of a model, from its `config.json`.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct ModelConfig {
    /// `model_type` at the top level, e.g. `"llama"` or `"qwen2_vl"`.
    pub model_type: String,
    /// `model_type` of the text part (`text_config.model_type`, e.g. `"gemma3_text"`);
    /// the top-level one for a config without `text_config` or without its own.
    pub text_model_type: String,
    /// Query heads.
    pub num_attention_heads: usize,
    /// Key/value heads (GQA/MQA); divides `num_attention_heads`.
    pub num_key_value_heads: usize,
    /// Elements per head that [`ModelConfig::rope`] covers (its `head_dim`). For DeepSeek
    /// MLA this is the rotary part `qk_rope_head_dim` only; see
    /// [`ModelConfig::nope_head_dim`].
    pub head_dim: usize,
    /// DeepSeek MLA: `qk_nope_head_dim`, the leading elements of each q/k head that carry
    /// no position and precede the rotary part (apply RoPE to a view starting at this
    /// offset with `head_stride = nope_head_dim + head_dim`). 0 for every other model.
    pub nope_head_dim: usize,
    /// The validated RoPE configuration (exact angles) of the model's main layer type
    /// (`full_attention`, what the legacy `rope_theta`/`rope_scaling` describe):
    /// [`Rope::new`](crate::Rope::new) accepts it. For models with several layer types,
    /// see [`ModelConfig::layer_ropes`] and [`ModelConfig::rope_for_layer`].
    pub rope: RopeConfig,
    /// `max_position_embeddings` (`n_positions`), if present (or the model type's default).
    pub max_position_embeddings: Option<u64>,
    /// The rope type of [`ModelConfig::rope`] as the file spells it (`"default"` when
    /// absent; e.g. `"su"`, whose method is [`Scaling::LongRope`](crate::Scaling::LongRope), or `"mrope"`;
    /// `rope.scaling.name()` gives the canonical name).
    pub scaling_name: String,
    /// `num_hidden_layers`, if present (at most 65536).
    pub num_hidden_layers: Option<usize>,
    /// The attention type of each layer (`layer_types`, or the model type's pattern; see
    /// the module docs); empty when the file gives neither `layer_types` nor
    /// `num_hidden_layers`.
    pub layer_types: Vec<LayerType>,
    /// One RoPE configuration per layer type that occurs (in order of first occurrence);
    /// a single entry (`full_attention`, equal to [`ModelConfig::rope`]) for a model
    /// without layer information.
    pub layer_ropes: Vec<LayerRope>,
    /// Per layer, whether it applies RoPE (`true`; HF `no_rope_layers[i] == 1`) or not
    /// (`false`: a NoPE layer). `None`: every layer applies RoPE.
    pub no_rope_layers: Option<Vec<bool>>,
    /// `use_qk_norm` (Llama 4: a weightless RMS norm of q and k after RoPE,
    /// `Llama4TextL2Norm`), if present or the model type's default.
    pub use_qk_norm: Option<bool>,
    /// `rms_norm_eps`, if present (also the eps of per-head q/k norms: Qwen3, Llama 4).
    pub rms_norm_eps: Option<f64>,
    /// Multimodal RoPE of the text model: `Some` exactly for the MRoPE model types
    /// (Qwen2-VL and Qwen2.5-VL: sectioned; Qwen3-VL and Qwen3-VL-MoE: interleaved); see
    /// the module docs.
    pub mrope: Option<MropeSpec>,
    /// The vision encoder's 2-D RoPE, from `vision_config` (Qwen2-VL, Qwen2.5-VL, Qwen3-VL,
    /// Llama 4). `None` for models without a vision encoder or whose encoder has no RoPE
    /// (Gemma 3's SigLIP: learned positions).
    pub vision: Option<VisionRopeSpec>,
    /// Qwen2.5-VL: `vision_config.tokens_per_second`, the temporal positions per second of
    /// video. transformers' `Qwen2_5_VLModel.get_rope_index` gives grid step `f` of a video
    /// the t index `f * second_per_grid_t * tokens_per_second` (plus the block's start):
    /// pass it (`as f32`) as [`MRopeIndex::tokens_per_second`](crate::MRopeIndex), with the
    /// videos' `second_per_grid_ts` from the processor. 4 when `vision_config` omits it
    /// (`Qwen2_5_VLVisionConfig(tokens_per_second=4)`); a number > 0, finite and non-zero
    /// as f32 (anything else is [`ConfigError::Malformed`]). `None` for every other model
    /// type (Qwen2-VL: t advances one per grid step; Qwen3-VL: one video grid per frame;
    /// there the field is a warning) and without `vision_config`.
    ///
    /// ```
    /// use rope_kernels::hf_config::ModelConfig;
    /// use rope_kernels::{MRopeIndex, TOKEN_TEXT, TOKEN_VIDEO};
    ///
    /// let json = r#"{"model_type": "qwen2_5_vl", "hidden_size": 3584, "num_attention_heads": 28,
    ///     "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]},
    ///     "vision_config": {"hidden_size": 1280, "num_heads": 16, "tokens_per_second": 2}}"#;
    /// let model = ModelConfig::from_json_str(json)?;
    /// assert_eq!(model.tokens_per_second, Some(2.0));
    ///
    /// // A text token, then a video of 3 grid steps of 2x2 patches (one token per step after
    /// // the 2x2 merge), one second per grid step: t = 1 + f * 1 * 2.
    /// let types = [TOKEN_TEXT, TOKEN_VIDEO, TOKEN_VIDEO, TOKEN_VIDEO];
    /// let index = MRopeIndex {
    ///     token_types: &types,
    ///     video_grid_thw: &[[3, 2, 2]],
    ///     second_per_grid_ts: &[1.0],
    ///     tokens_per_second: model.tokens_per_second.unwrap() as f32,
    ///     spatial_merge_size: model.vision.as_ref().and_then(|v| v.spatial_merge_size).unwrap() as u32,
    ///     ..Default::default()
    /// };
    /// let ([t, h, w], next) = index.to_vecs()?;
    /// assert_eq!((t, h, w, next), (vec![0, 1, 3, 5], vec![0, 1, 1, 1], vec![0, 1, 1, 1], 6));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub tokens_per_second: Option<f64>,
    warnings: Vec<String>,
}

/// An attention layer type, as `layer_types` spells it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LayerType {
    /// `"full_attention"`: global attention.
    FullAttention,
    /// `"sliding_attention"`: sliding-window (local) attention (Gemma 2/3, Mistral, ...).
    SlidingAttention,
    /// `"chunked_attention"`: attention within chunks of `attention_chunk_size` (Llama 4).
    ChunkedAttention,
    /// Any other name (e.g. `"linear_attention"`).
    Other(String),
}

impl LayerType {
    /// The type `name` stands for.
    pub fn from_hf(name: &str) -> Self {
        match name {
            "full_attention" => LayerType::FullAttention,
            "sliding_attention" => LayerType::SlidingAttention,
            "chunked_attention" => LayerType::ChunkedAttention,
            other => LayerType::Other(other.to_string()),
        }
    }

    /// The name as `layer_types` spells it.
    pub fn as_str(&self) -> &str {
        match self {
            LayerType::FullAttention => "full_attention",
            LayerType::SlidingAttention => "sliding_attention",
            LayerType::ChunkedAttention => "chunked_attention",
            LayerType::Other(name) => name,
        }
    }
}

impl core::fmt::Display for LayerType {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The RoPE configuration of one layer type.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct LayerRope {
    /// The layer type.
    pub layer_type: LayerType,
    /// Its validated configuration.
    pub rope: RopeConfig,
    /// Its rope type as the file spells it (see [`ModelConfig::scaling_name`]).
    pub scaling_name: String,
}

/// Multimodal RoPE (MRoPE) of a Qwen-VL text model, as plain data: three position streams
/// (time, height, width) per token, and which frequency uses which stream.
///
/// With `pairs = rotary_dim / 2` and frequencies `inv_freq[j]` of the text RoPE
/// ([`ModelConfig::rope`]; the index is global across sections):
/// - sectioned (Qwen2-VL, Qwen2.5-VL; HF `apply_multimodal_rotary_pos_emb`): pair `j` uses
///   t for `j < s_t`, h for `s_t <= j < s_t + s_h`, w above;
/// - interleaved (Qwen3-VL, whatever `mrope_interleaved` says; HF `apply_interleaved_mrope`, ggml
///   `IMROPE`): pair `j` uses h when `j % 3 == 1 && j < 3 * s_h`, w when
///   `j % 3 == 2 && j < 3 * s_w`, t otherwise.
///
/// For text tokens the three streams are equal, and MRoPE equals plain RoPE at that
/// position.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MropeSpec {
    /// `mrope_section` `[s_t, s_h, s_w]`, in pairs; sums to `rotary_dim / 2`.
    pub mrope_section: [usize; 3],
    /// Interleaved (Qwen3-VL, whatever `mrope_interleaved` says) or sectioned (Qwen2-VL,
    /// Qwen2.5-VL), by the text model type.
    pub interleaved: bool,
}

/// A patch coordinate of the vision encoder's 2-D RoPE.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VisionAxis {
    /// The patch row (`h`, Llama 4's `y`).
    Row,
    /// The patch column (`w`, Llama 4's `x`).
    Col,
}

/// The 2-D RoPE of a vision encoder (ViT), as plain data.
///
/// With `n = head_dim / 4` frequencies per axis, `inv_freq[k] = theta^(-2k / (head_dim / 2))`
/// for `k < n`, pair `j < n` rotates by `(axes[0] + position_offset) * inv_freq[j]` and pair
/// `j >= n` by `(axes[1] + position_offset) * inv_freq[j - n]` (the frequency index restarts
/// per axis; ggml `VISION`). Pairs are [`VisionRopeSpec::layout`]'s.
/// - Qwen2-VL / Qwen2.5-VL / Qwen3-VL (HF `VisionRotaryEmbedding(head_dim // 2)` and
///   `rot_pos_emb`, `apply_rotary_pos_emb_vision`): rows then columns, half-split pairs,
///   offset 0; patches in `spatial_merge_size` x `spatial_merge_size` blocks.
/// - Llama 4 (HF `Llama4VisionRotaryEmbedding`, `vision_apply_rotary_emb`): columns (`x`)
///   then rows (`y`), interleaved (complex) pairs, offset 1; the class token's angle is 0.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct VisionRopeSpec {
    /// `vision_config.model_type` (or the family it was read as, e.g. `"qwen2_vl_vision"`).
    pub model_type: String,
    /// Per-head width of the ViT: `embed_dim` (else `hidden_size`) / heads; a multiple of 4,
    /// at most [`MAX_ROTARY_DIM`](crate::MAX_ROTARY_DIM).
    pub head_dim: usize,
    /// ViT heads (`num_heads`, Llama 4 `num_attention_heads`).
    pub num_heads: usize,
    /// Base (`rope_theta` in `vision_config` or its `rope_parameters`; default 1e4).
    pub theta: f64,
    /// Pair layout.
    pub layout: PairLayout,
    /// The coordinate of the first and the second half of the pairs.
    pub axes: [VisionAxis; 2],
    /// Added to both coordinates (Llama 4: 1).
    pub position_offset: u32,
    /// `spatial_merge_size` (Qwen: patches merged per side before the LLM, and the block
    /// order of the ViT's patches); `None` for Llama 4 (pixel shuffle instead).
    pub spatial_merge_size: Option<usize>,
    /// `patch_size`, if present.
    pub patch_size: Option<usize>,
    /// Llama 4: `image_size / patch_size`, the patch grid side the encoder's table covers.
    pub grid_size: Option<usize>,
}

impl VisionRopeSpec {
    /// Frequencies per axis: `head_dim / 4`.
    pub fn freqs_per_axis(&self) -> usize {
        self.head_dim / 4
    }

    /// The `freqs_per_axis()` frequencies `theta^(-2k / (head_dim / 2))`, in f64.
    pub fn inv_freq(&self) -> Vec<f64> {
        let half = (self.head_dim / 2) as f64;
        (0..self.freqs_per_axis()).map(|k| 1.0 / libm::pow(self.theta, (2 * k) as f64 / half)).collect()
    }
}

/// Why a `config.json` could not be mapped. Every variant names what was wrong.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum ConfigError {
    /// The file could not be read.
    Io {
        /// The path as given.
        path: String,
        /// The operating system's message.
        message: String,
    },
    /// The text is not JSON.
    Json {
        /// serde_json's message (with line and column).
        message: String,
    },
    /// The top level is not a JSON object.
    NotAnObject,
    /// A required field is absent (or `null`).
    Missing {
        /// The field, e.g. `"num_attention_heads"` or `"rope_scaling.low_freq_factor"`.
        field: String,
    },
    /// A field has the wrong JSON type or a value outside its domain.
    Malformed {
        /// The field.
        field: String,
        /// What it should have been.
        expected: &'static str,
    },
    /// The rope type is not one this crate implements.
    UnsupportedRopeType {
        /// The type as written, e.g. `"fancy"`.
        rope_type: String,
    },
    /// The values parse but do not form a valid [`RopeConfig`].
    Invalid {
        /// The field held responsible.
        field: String,
        /// The validation error.
        error: RopeError,
    },
    /// A field disagrees with another field or with what the model can carry: `rotary_dim`
    /// against `partial_rotary_factor`, the rope dict's `partial_rotary_factor` against the
    /// top-level one, `rope_scaling` against `rope_parameters`, `rope_local_base_freq`
    /// against a keyed `sliding_attention` entry, `mrope_section` that does not sum to
    /// `rotary_dim / 2`, sits beside a layout or partial rotary that cannot carry it, or on
    /// a model type without MRoPE, a list whose length is not `num_hidden_layers`, a model
    /// type the loader refuses (Gemma 3n).
    Conflict {
        /// The field.
        field: String,
        /// What it disagrees with, with the values.
        message: String,
    },
}

impl core::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            ConfigError::Io { path, message } => write!(f, "cannot read {path}: {message}"),
            ConfigError::Json { message } => write!(f, "config.json is not valid JSON: {message}"),
            ConfigError::NotAnObject => f.write_str("config.json: the top level is not a JSON object"),
            ConfigError::Missing { field } => write!(f, "missing field `{field}`"),
            ConfigError::Malformed { field, expected } => write!(f, "field `{field}` must be {expected}"),
            ConfigError::UnsupportedRopeType { rope_type } => {
                write!(f, "unsupported rope scaling type `{rope_type}`")
            }
            ConfigError::Invalid { field, error } => write!(f, "field `{field}`: {error}"),
            ConfigError::Conflict { field, message } => write!(f, "field `{field}`: {message}"),
        }
    }
}

impl std::error::Error for ConfigError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ConfigError::Invalid { error, .. } => Some(error),
            _ => None,
        }
    }
}

impl ModelConfig {
    /// Parses the text of a `config.json`.
    ///
    /// # Errors
    /// [`ConfigError::Json`] for invalid JSON, [`ConfigError::NotAnObject`], and every
    /// mapping error: [`ConfigError::Missing`], [`ConfigError::Malformed`],
    /// [`ConfigError::UnsupportedRopeType`], [`ConfigError::Invalid`],
    /// [`ConfigError::Conflict`].
    pub fn from_json_str(json: &str) -> Result<Self, ConfigError> {
        let value: Value =
            serde_json::from_str(json).map_err(|e| ConfigError::Json { message: e.to_string() })?;
        let map = value.as_object().ok_or(ConfigError::NotAnObject)?;
        parse::parse(Obj { map, prefix: "" })
    }

    /// Reads and parses a `config.json` file.
    ///
    /// # Errors
    /// [`ConfigError::Io`] if the file cannot be read, then those of
    /// [`ModelConfig::from_json_str`].
    pub fn from_path(path: impl AsRef<std::path::Path>) -> Result<Self, ConfigError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError::Io { path: path.display().to_string(), message: e.to_string() })?;
        ModelConfig::from_json_str(&text)
    }

    /// What the load ignored, one line per field, e.g. "rope_scaling.foo: not read by rope
    /// type \`linear\`; ignored": keys a rope type does not read, a `type` that differs
    /// from `rope_type`, `mrope_interleaved` where the model type does not read it,
    /// keys of the vision rope dict besides its type and theta, `rope_local_base_freq`
    /// outside Gemma 3, RoPE fields at the top level beside a `text_config` that has its
    /// own, a keyed rope dict entry no layer has, a vision encoder whose RoPE is not read,
    /// `vision_config.tokens_per_second` outside Qwen2.5-VL. Empty for a file whose every
    /// RoPE field was applied.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// Whether layer `layer` applies RoPE: `false` for a NoPE layer of `no_rope_layers`, a
    /// `linear_attention` layer (Qwen3-Next), or a layer past `num_hidden_layers` (when known)
    /// or past `layer_types`.
    pub fn uses_rope(&self, layer: usize) -> bool {
        if self.num_hidden_layers.is_some_and(|n| layer >= n) {
            return false;
        }
        if !self.layer_types.is_empty() && layer >= self.layer_types.len() {
            return false;
        }
        // Qwen3-Next's `linear_attention` layers (gated DeltaNet) have no RoPE.
        if matches!(self.layer_types.get(layer), Some(LayerType::Other(t)) if t == "linear_attention") {
            return false;
        }
        self.no_rope_layers.as_ref().is_none_or(|v| v.get(layer).copied().unwrap_or(false))
    }

    /// The RoPE configuration of layer `layer` (0-based): that of its layer type
    /// ([`ModelConfig::layer_types`]), or [`ModelConfig::rope`] for a model without layer
    /// types. `None` for a layer without RoPE ([`ModelConfig::uses_rope`]) or past the
    /// layers the file describes.
    pub fn rope_for_layer(&self, layer: usize) -> Option<&RopeConfig> {
        if !self.uses_rope(layer) {
            return None;
        }
        if self.layer_types.is_empty() {
            return Some(&self.rope);
        }
        self.rope_for_layer_type(self.layer_types.get(layer)?)
    }

    /// The RoPE configuration of a layer type, if the model has that type.
    pub fn rope_for_layer_type(&self, layer_type: &LayerType) -> Option<&RopeConfig> {
        self.layer_ropes.iter().find(|l| &l.layer_type == layer_type).map(|l| &l.rope)
    }

    /// The layers of type `layer_type`, in order.
    pub fn layers_of_type<'s>(&'s self, layer_type: &'s LayerType) -> impl Iterator<Item = usize> + 's {
        self.layer_types.iter().enumerate().filter(move |(_, t)| *t == layer_type).map(|(i, _)| i)
    }

    /// The layers without RoPE (`no_rope_layers[i] == 0`, or `linear_attention` layers), in
    /// order: every layer `i` below the described layer count with `!uses_rope(i)`.
    pub fn layers_without_rope(&self) -> Vec<usize> {
        let n = self
            .num_hidden_layers
            .or(self.no_rope_layers.as_ref().map(Vec::len))
            .unwrap_or(self.layer_types.len());
        (0..n).filter(|&i| !self.uses_rope(i)).collect()
    }
}
