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
//! | layout | `gptj`, `deepseek_v2`, `llama4`/`llama4_text` (complex pairs, HF `apply_rotary_emb`), and `deepseek_v3` unless `rope_interleave: false`: [`Layout::Interleaved`]; every other model type [`Layout::HalfSplit`] |
//! | layers | `num_hidden_layers` (required for the types with a layer pattern: Gemma 2/3, Llama 4, SmolLM3, Qwen3-Next); `layer_types`, else the model type's pattern: Gemma 3 `sliding_window_pattern` (`_sliding_window_pattern`; default 6: layer `i` slides unless `(i + 1) % 6 == 0`), Gemma 2 every other layer, Qwen3-Next `full_attention` every `full_attention_interval`-th layer (default 4) and `linear_attention` on the others (`Qwen3NextConfig`), Llama 4 `chunked_attention` on RoPE layers and `full_attention` on the others; else every layer `full_attention` |
//! | per layer type | the keyed rope dict; Gemma 3 (`gemma3_text`): `sliding_attention` layers use `rope_local_base_freq` with no scaling (HF `Gemma3RotaryEmbedding` for local layers), the others the rope dict; a `rope_local_base_freq` beside a keyed `sliding_attention.rope_theta` must equal it (else an error) |
//! | no RoPE | `no_rope_layers` (1: the layer uses RoPE); Llama 4 / SmolLM3 when absent or empty: every `no_rope_layer_interval`-th layer (default 4) has none (HF `Llama4TextConfig`) |
//! | qk norm | `use_qk_norm` (Llama 4 default `true`), `rms_norm_eps` |
//! | vision | `vision_config` of Qwen2-VL, Qwen2.5-VL, Qwen3-VL and Llama 4: [`VisionRopeSpec`]; the width must be a multiple of the heads; keys of its rope dict other than `rope_type`/`type`/`rope_theta` are warnings |
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
//! non-zero `alpha` (HunYuan) is static NTK ([`Scaling::NtkAlpha`]); Llama 3 accepts
//! `low_freq_factor == high_freq_factor` (Llama 4: no blend band).
//!
//! **Operations.** [`ModelConfig::mrope_rope`] builds the [`MRope`](crate::MRope) of an MRoPE
//! config, [`ModelConfig::vision_rope`] the [`VisionRope`](crate::VisionRope) of its vision
//! encoder (streams from [`VisionRopeSpec::fill_position_ids`]), and
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

use std::format;
use std::string::{String, ToString};
use std::vec::Vec;

use serde_json::{Map, Value};

use crate::config::{AngleMode, Layout, RopeConfig, MAX_ROTARY_DIM};
use crate::error::RopeError;
use crate::freq::{LongRopeParams, Scaling, YarnParams};

mod ops;
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
    /// absent; e.g. `"su"`, whose method is [`Scaling::LongRope`], or `"mrope"`;
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
    /// at most [`MAX_ROTARY_DIM`].
    pub head_dim: usize,
    /// ViT heads (`num_heads`, Llama 4 `num_attention_heads`).
    pub num_heads: usize,
    /// Base (`rope_theta` in `vision_config` or its `rope_parameters`; default 1e4).
    pub theta: f64,
    /// Pair layout.
    pub layout: Layout,
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

/// One JSON object and the prefix its field names get in errors (`""` or `"rope_scaling."`).
#[derive(Clone, Copy)]
struct Obj<'a> {
    map: &'a Map<String, Value>,
    prefix: &'a str,
}

impl<'a> Obj<'a> {
    fn name(&self, key: &str) -> String {
        format!("{}{}", self.prefix, key)
    }

    fn malformed(&self, key: &str, expected: &'static str) -> ConfigError {
        ConfigError::Malformed { field: self.name(key), expected }
    }

    /// The value of `key`; `null` counts as absent.
    fn get(&self, key: &str) -> Option<&'a Value> {
        self.map.get(key).filter(|v| !v.is_null())
    }

    fn f64(&self, key: &str) -> Result<Option<f64>, ConfigError> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v.as_f64().map(Some).ok_or_else(|| self.malformed(key, "a number")),
        }
    }

    /// A non-negative integer; an integral float (`4096.0`) is accepted.
    fn u64(&self, key: &str) -> Result<Option<u64>, ConfigError> {
        let Some(v) = self.get(key) else { return Ok(None) };
        if let Some(n) = v.as_u64() {
            return Ok(Some(n));
        }
        match v.as_f64() {
            // Integral and exactly representable (at most 2^53).
            Some(x) if (0.0..=9_007_199_254_740_992.0).contains(&x) && x == libm::trunc(x) => {
                Ok(Some(x as u64))
            }
            _ => Err(self.malformed(key, "a non-negative integer")),
        }
    }

    /// An integer > 0 that fits in `usize`.
    fn positive(&self, key: &str) -> Result<Option<usize>, ConfigError> {
        match self.u64(key) {
            Ok(Some(n)) if n > 0 => {
                usize::try_from(n).map(Some).map_err(|_| self.malformed(key, "an integer > 0"))
            }
            Ok(Some(_)) | Err(_) => Err(self.malformed(key, "an integer > 0")),
            Ok(None) => Ok(None),
        }
    }

    fn bool(&self, key: &str) -> Result<Option<bool>, ConfigError> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v.as_bool().map(Some).ok_or_else(|| self.malformed(key, "true or false")),
        }
    }

    fn str(&self, key: &str) -> Result<Option<&'a str>, ConfigError> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v.as_str().map(Some).ok_or_else(|| self.malformed(key, "a string")),
        }
    }

    fn f64_array(&self, key: &str) -> Result<Option<Vec<f64>>, ConfigError> {
        let Some(v) = self.get(key) else { return Ok(None) };
        let arr = v.as_array().ok_or_else(|| self.malformed(key, "an array of numbers"))?;
        arr.iter()
            .map(|x| x.as_f64().ok_or_else(|| self.malformed(key, "an array of numbers")))
            .collect::<Result<Vec<_>, _>>()
            .map(Some)
    }

    fn require<T>(&self, key: &str, v: Option<T>) -> Result<T, ConfigError> {
        v.ok_or_else(|| ConfigError::Missing { field: self.name(key) })
    }

    /// The first of `keys` present, with the key.
    fn first_positive(&self, keys: &[&'static str]) -> Result<Option<(usize, &'static str)>, ConfigError> {
        for &k in keys {
            if let Some(v) = self.positive(k)? {
                return Ok(Some((v, k)));
            }
        }
        Ok(None)
    }
    /// An array of non-negative integers that fit in `usize`.
    fn usize_array(&self, key: &str, expected: &'static str) -> Result<Option<Vec<usize>>, ConfigError> {
        let Some(v) = self.get(key) else { return Ok(None) };
        let arr = v.as_array().ok_or_else(|| self.malformed(key, expected))?;
        arr.iter()
            .map(|x| {
                x.as_u64().and_then(|n| usize::try_from(n).ok()).ok_or_else(|| self.malformed(key, expected))
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some)
    }

    /// The object at `key` (`null` or absent: `None`).
    fn object(&self, key: &str) -> Result<Option<&'a Map<String, Value>>, ConfigError> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v.as_object().map(Some).ok_or_else(|| self.malformed(key, "an object or null")),
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
        parse(Obj { map, prefix: "" })
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
    /// keys of the vision rope dict besides its type and theta, `rope_local_base_freq` outside Gemma 3, RoPE fields at the top
    /// level beside a `text_config` that has its own, a keyed rope dict entry no layer has,
    /// a vision encoder whose RoPE is not read. Empty for a file whose every RoPE field was
    /// applied.
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

/// The most layers a config may declare (the per-layer lists are built from it; real models
/// have at most a few hundred).
const MAX_LAYERS: usize = 65_536;

/// Defaults of fields a published file may omit, per text model type (transformers'
/// config classes; see the module docs).
struct TypeDefaults {
    theta: f64,
    /// Gemma 3: `rope_local_base_freq` of the sliding layers.
    local_theta: Option<f64>,
    /// Gemma 2/3: every `pattern`-th layer is full attention, the others slide.
    sliding_pattern: Option<usize>,
    /// Qwen3-Next: every `interval`-th layer is `full_attention`, the others
    /// `linear_attention` (`full_attention_interval`).
    full_attention_interval: Option<usize>,
    max_position_embeddings: Option<u64>,
    /// Llama 4, SmolLM3: every `interval`-th layer has no RoPE.
    no_rope_interval: Option<usize>,
    /// Llama 4: RoPE layers are `chunked_attention`, NoPE layers `full_attention`.
    chunked_on_rope_layers: bool,
    use_qk_norm: Option<bool>,
    /// Whether (and how) transformers' text model of this type applies MRoPE.
    mrope: MropeUse,
}

/// How a text model type uses MRoPE (transformers' modeling files).
#[derive(Clone, Copy, PartialEq, Eq)]
enum MropeUse {
    /// Plain 1-D RoPE: `mrope_section` / `mrope_interleaved` are errors.
    Never,
    /// Qwen2-VL / Qwen2.5-VL: `apply_multimodal_rotary_pos_emb(.., rope_scaling["mrope_section"])`
    /// needs the section; sectioned; `mrope_interleaved` is not read.
    Sectioned,
    /// Qwen3-VL (MoE too): `Qwen3VLTextRotaryEmbedding` reads
    /// `rope_scaling.get("mrope_section", [24, 20, 20])` and always calls
    /// `apply_interleaved_mrope`; `mrope_interleaved` is not read.
    Interleaved,
}

fn type_defaults(text_model_type: &str) -> TypeDefaults {
    let mut d = TypeDefaults {
        theta: 10_000.0,
        local_theta: None,
        sliding_pattern: None,
        full_attention_interval: None,
        max_position_embeddings: None,
        no_rope_interval: None,
        chunked_on_rope_layers: false,
        use_qk_norm: None,
        mrope: MropeUse::Never,
    };
    match text_model_type {
        // `Gemma3TextConfig`: rope_theta=1_000_000.0, rope_local_base_freq=10_000.0,
        // sliding_window_pattern 6, max_position_embeddings=131_072.
        "gemma3_text" | "gemma3" => {
            d.theta = 1e6;
            d.local_theta = Some(1e4);
            d.sliding_pattern = Some(6);
            d.max_position_embeddings = Some(131_072);
        }
        // `Gemma2Config`: layer i slides when (i + 1) % 2 != 0.
        "gemma2" => d.sliding_pattern = Some(2),
        // `Qwen3NextConfig`: full_attention_interval=4; layer i is linear attention unless
        // (i + 1) % 4 == 0.
        "qwen3_next" => d.full_attention_interval = Some(4),
        // `Llama4TextConfig`: rope_theta=500000, max_position_embeddings=4096 * 32,
        // no_rope_layer_interval=4, use_qk_norm=True.
        "llama4_text" | "llama4" => {
            d.theta = 5e5;
            d.max_position_embeddings = Some(131_072);
            d.no_rope_interval = Some(4);
            d.chunked_on_rope_layers = true;
            d.use_qk_norm = Some(true);
        }
        // `SmolLM3Config`: no_rope_layer_interval=4.
        "smollm3" => d.no_rope_interval = Some(4),
        // `Qwen2VLConfig` / `Qwen2_5_VLConfig` (and their text configs): rope_theta=1000000.0.
        "qwen2_vl" | "qwen2_vl_text" | "qwen2_5_vl" | "qwen2_5_vl_text" => {
            d.theta = 1e6;
            d.mrope = MropeUse::Sectioned;
        }
        // `Qwen3VLTextConfig`, `Qwen3VLMoeTextConfig`: rope_theta=5000000.0.
        "qwen3_vl" | "qwen3_vl_text" | "qwen3_vl_moe" | "qwen3_vl_moe_text" => {
            d.theta = 5e6;
            d.mrope = MropeUse::Interleaved;
        }
        _ => {}
    }
    d
}

/// The text model's shape, shared by every layer type's configuration.
struct Text<'a> {
    obj: Obj<'a>,
    head_dim: usize,
    /// The field head_dim came from (with prefix).
    head_src: String,
    /// DeepSeek MLA: rotary_dim is `qk_rope_head_dim`.
    mla: bool,
    layout: Layout,
    max_pos: Option<u64>,
    top_original: Option<u64>,
    defaults: TypeDefaults,
}

/// Where each derived quantity came from, to name the field in validation errors.
struct Sources {
    head_dim: String,
    rotary_dim: String,
    theta: String,
    max_pos: String,
}

/// One rope dict mapped: the configuration, its rope type as spelled, its MRoPE fields.
struct Mapped {
    config: RopeConfig,
    scaling_name: String,
    mrope: Option<MropeSpec>,
}

/// Keys every rope dict may carry; without a type, only these (a parameter would
/// belong to an unknown method).
const COMMON_ROPE_KEYS: [&str; 6] =
    ["rope_type", "type", "rope_theta", "partial_rotary_factor", "mrope_section", "mrope_interleaved"];

/// The keys each rope type reads besides [`COMMON_ROPE_KEYS`] (transformers
/// `modeling_rope_utils.py` `_validate_*_rope_parameters`).
fn keys_read(method: &str) -> &'static [&'static str] {
    match method {
        "linear" => &["factor"],
        "dynamic" => &["factor", "alpha"],
        "yarn" => &[
            "factor",
            "original_max_position_embeddings",
            "beta_fast",
            "beta_slow",
            "mscale",
            "mscale_all_dim",
            "attention_factor",
            "truncate",
        ],
        "llama3" => &["factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"],
        "longrope" | "su" => {
            &["short_factor", "long_factor", "factor", "original_max_position_embeddings", "attention_factor"]
        }
        "proportional" => &["factor"],
        _ => &[],
    }
}

fn parse(top: Obj<'_>) -> Result<ModelConfig, ConfigError> {
    let mut warnings = Vec::new();
    let model_type = top.require("model_type", top.str("model_type")?)?.to_string();
    let text = match top.object("text_config")? {
        Some(map) => Obj { map, prefix: "text_config." },
        None => top,
    };
    if text.prefix != top.prefix {
        // transformers builds the text config from `text_config` alone when it is given.
        for key in ["rope_scaling", "rope_parameters", "rope_theta", "partial_rotary_factor", "head_dim"] {
            if top.get(key).is_some() && top.get(key) != text.get(key) {
                warnings
                    .push(format!("{key}: at the top level beside text_config; text_config.{key} is read"));
            }
        }
    }
    let text_model_type = text.str("model_type")?.unwrap_or(&model_type).to_string();
    if text_model_type.starts_with("gemma3n") || model_type.starts_with("gemma3n") {
        // HF `Gemma3nTextConfig`: per-layer `layer_types` with KV sharing across layers and
        // AltUp; its layer pattern is not one this loader represents.
        return Err(ConfigError::Conflict {
            field: text.name("model_type"),
            message: format!(
                "`{text_model_type}` (Gemma 3n: KV-shared layers, its own layer pattern) is not supported by this loader"
            ),
        });
    }
    if text_model_type == "exaone4" {
        // HF `Exaone4Config`: global (full-attention) layers of a hybrid model apply no RoPE
        // (`sliding_window_pattern`), a rule this loader does not represent.
        return Err(ConfigError::Conflict {
            field: text.name("model_type"),
            message: "`exaone4` (RoPE only on its sliding-window layers) is not supported by this loader"
                .to_string(),
        });
    }
    let defaults = type_defaults(&text_model_type);

    let (heads, heads_key) = text
        .first_positive(&["num_attention_heads", "n_head"])?
        .ok_or_else(|| ConfigError::Missing { field: text.name("num_attention_heads") })?;
    let kv_heads = text.positive("num_key_value_heads")?.unwrap_or(heads);
    if heads % kv_heads != 0 {
        return Err(text.malformed("num_key_value_heads", "a divisor of num_attention_heads"));
    }
    let max_pos = match text.u64("max_position_embeddings")? {
        Some(v) => Some(v),
        None => text.u64("n_positions")?.or(defaults.max_position_embeddings),
    };

    // head_dim.
    let (head_dim, nope_head_dim, head_key) = if let Some(d) = text.positive("qk_rope_head_dim")? {
        let nope = text.u64("qk_nope_head_dim")?.unwrap_or(0);
        let nope = usize::try_from(nope).map_err(|_| text.malformed("qk_nope_head_dim", "an integer"))?;
        (d, nope, "qk_rope_head_dim")
    } else if let Some(d) = text.positive("head_dim")? {
        (d, 0, "head_dim")
    } else {
        let (hidden, hidden_key) = text
            .first_positive(&["hidden_size", "n_embd"])?
            .ok_or_else(|| ConfigError::Missing { field: text.name("hidden_size") })?;
        // transformers: `hidden_size // num_attention_heads`.
        let d = hidden / heads;
        if d == 0 {
            return Err(text.malformed(hidden_key, "at least num_attention_heads"));
        }
        (d, 0, if heads_key == "n_head" { "n_embd" } else { "hidden_size" })
    };

    let layout = match text_model_type.as_str() {
        "gptj" | "deepseek_v2" | "llama4" | "llama4_text" => Layout::Interleaved,
        "deepseek_v3" if text.bool("rope_interleave")?.unwrap_or(true) => Layout::Interleaved,
        _ => Layout::HalfSplit,
    };
    let ctx = Text {
        obj: text,
        head_dim,
        head_src: text.name(head_key),
        mla: head_key == "qk_rope_head_dim",
        layout,
        max_pos,
        top_original: text.u64("original_max_position_embeddings")?,
        defaults,
    };

    let num_hidden_layers = text.positive("num_hidden_layers")?;
    if num_hidden_layers.is_some_and(|n| n > MAX_LAYERS) {
        return Err(text.malformed("num_hidden_layers", "an integer in 1..=65536"));
    }
    // A model type with a per-layer pattern (Gemma 2/3 sliding layers, Llama 4 / SmolLM3
    // NoPE layers) cannot say which layer is which without the layer count.
    let has_pattern = ctx.defaults.sliding_pattern.is_some()
        || ctx.defaults.no_rope_interval.is_some()
        || ctx.defaults.full_attention_interval.is_some();
    if has_pattern && num_hidden_layers.is_none() {
        return Err(ConfigError::Missing { field: text.name("num_hidden_layers") });
    }
    let no_rope_layers = no_rope_layers_of(&ctx, num_hidden_layers, &mut warnings)?;
    let layer_types = layer_types_of(&ctx, num_hidden_layers, no_rope_layers.as_deref())?;

    // The rope dict: transformers 5 `rope_parameters`, else legacy `rope_scaling`.
    let (rope_key, rope_value) = match (text.get("rope_parameters"), text.get("rope_scaling")) {
        (Some(p), Some(legacy)) => {
            both_rope_dicts_agree(text, p, legacy)?;
            ("rope_parameters", Some(p))
        }
        (Some(v), _) => ("rope_parameters", Some(v)),
        (None, v) => ("rope_scaling", v),
    };
    let rope_field = text.name(rope_key);
    let rope_prefix = format!("{rope_field}.");
    let empty = Map::new();
    let rope_map = match rope_value {
        None => &empty,
        Some(v) => v.as_object().ok_or_else(|| text.malformed(rope_key, "an object or null"))?,
    };
    let typed = ["rope_type", "type"].iter().any(|k| rope_map.get(*k).is_some_and(|v| !v.is_null()));
    let per_type = !typed && rope_map.values().any(Value::is_object);
    if per_type && !rope_map.values().all(Value::is_object) {
        return Err(ConfigError::Malformed {
            field: rope_field,
            expected: "one parameter object, or one object per layer type",
        });
    }
    // Gemma 3: the sliding layers' theta (HF `rope_local_base_freq`).
    let local_theta = match ctx.defaults.local_theta {
        Some(d) => Some((text.f64("rope_local_base_freq")?.unwrap_or(d), text.name("rope_local_base_freq"))),
        None => {
            if text.get("rope_local_base_freq").is_some() {
                warnings.push(format!(
                    "{}: read for Gemma 3 only (model type `{text_model_type}`); ignored",
                    text.name("rope_local_base_freq")
                ));
            }
            None
        }
    };

    // The configuration of each layer type that occurs.
    let mut layer_ropes: Vec<LayerRope> = Vec::new();
    let mut distinct: Vec<LayerType> = Vec::new();
    for t in &layer_types {
        if !distinct.contains(t) {
            distinct.push(t.clone());
        }
    }
    let mrope;
    if per_type {
        let mut entries: Vec<(LayerRope, Option<MropeSpec>)> = Vec::new();
        for (name, v) in rope_map {
            let prefix = format!("{rope_prefix}{name}.");
            let map = v.as_object().ok_or_else(|| text.malformed(rope_key, "an object per layer type"))?;
            let layer_type = LayerType::from_hf(name);
            let before_top =
                if layer_type == LayerType::SlidingAttention { local_theta.clone() } else { None };
            if let (LayerType::SlidingAttention, Some(local)) =
                (&layer_type, text.f64("rope_local_base_freq")?)
            {
                let entry = Obj { map, prefix: &prefix };
                if let Some(t) = entry.f64("rope_theta")?.filter(|t| *t != local) {
                    return Err(ConfigError::Conflict {
                        field: text.name("rope_local_base_freq"),
                        message: format!("{local} disagrees with `{}` {t}", entry.name("rope_theta")),
                    });
                }
            }
            let m = rope_of(&ctx, Obj { map, prefix: &prefix }, before_top, &mut warnings)?;
            if !distinct.is_empty() && !distinct.contains(&layer_type) {
                warnings.push(format!("{rope_prefix}{name}: no layer has this type; ignored"));
            }
            entries.push((LayerRope { layer_type, rope: m.config, scaling_name: m.scaling_name }, m.mrope));
        }
        for t in &distinct {
            if !entries.iter().any(|(e, _)| &e.layer_type == t) {
                return Err(ConfigError::Missing { field: format!("{rope_prefix}{t}") });
            }
        }
        let first_mrope = entries.first().and_then(|(_, m)| *m);
        if let Some((e, _)) = entries.iter().find(|(_, m)| *m != first_mrope) {
            return Err(ConfigError::Conflict {
                field: format!("{rope_prefix}{}.mrope_section", e.layer_type),
                message: "MRoPE differs between layer types".to_string(),
            });
        }
        mrope = first_mrope;
        if distinct.is_empty() {
            layer_ropes = entries.into_iter().map(|(e, _)| e).collect();
        } else {
            for t in &distinct {
                let found = entries.iter().find(|(e, _)| &e.layer_type == t);
                layer_ropes.extend(found.map(|(e, _)| e.clone()));
            }
        }
    } else {
        let m = rope_of(&ctx, Obj { map: rope_map, prefix: &rope_prefix }, None, &mut warnings)?;
        mrope = m.mrope;
        let main =
            LayerRope { layer_type: LayerType::FullAttention, rope: m.config, scaling_name: m.scaling_name };
        // Gemma 3 local layers: `rope_local_base_freq` and no scaling (HF copies the config
        // with `rope_theta = rope_local_base_freq`, `rope_scaling = {"rope_type": "default"}`).
        let local = match &local_theta {
            Some(t) if distinct.contains(&LayerType::SlidingAttention) => Some(rope_of(
                &ctx,
                Obj { map: &empty, prefix: &rope_prefix },
                Some(t.clone()),
                &mut warnings,
            )?),
            _ => None,
        };
        if distinct.is_empty() {
            layer_ropes.push(main);
        } else {
            for t in distinct {
                let lr = match (&t, &local) {
                    (LayerType::SlidingAttention, Some(l)) => LayerRope {
                        layer_type: t,
                        rope: l.config.clone(),
                        scaling_name: l.scaling_name.clone(),
                    },
                    _ => LayerRope { layer_type: t, ..main.clone() },
                };
                layer_ropes.push(lr);
            }
        }
    }
    let main = layer_ropes
        .iter()
        .find(|l| l.layer_type == LayerType::FullAttention)
        .or(layer_ropes.first())
        .cloned()
        .ok_or(ConfigError::Malformed { field: rope_field, expected: "at least one layer type" })?;

    let use_qk_norm = text.bool("use_qk_norm")?.or(ctx.defaults.use_qk_norm);
    let rms_norm_eps = text.f64("rms_norm_eps")?;
    let vision = vision_of(top, &model_type, &mut warnings)?;
    Ok(ModelConfig {
        model_type,
        text_model_type,
        num_attention_heads: heads,
        num_key_value_heads: kv_heads,
        head_dim,
        nope_head_dim,
        rope: main.rope,
        max_position_embeddings: max_pos,
        scaling_name: main.scaling_name,
        num_hidden_layers,
        layer_types,
        layer_ropes,
        no_rope_layers,
        use_qk_norm,
        rms_norm_eps,
        mrope,
        vision,
        warnings,
    })
}

/// `rope_parameters` and legacy `rope_scaling` side by side: every key both carry must have
/// one value (`type` beside `rope_type` is the legacy spelling, compared as the rope type).
fn both_rope_dicts_agree(text: Obj<'_>, params: &Value, legacy: &Value) -> Result<(), ConfigError> {
    let (Some(p), Some(l)) = (params.as_object(), legacy.as_object()) else {
        if params != legacy {
            return Err(ConfigError::Conflict {
                field: text.name("rope_scaling"),
                message: format!("differs from `{}`", text.name("rope_parameters")),
            });
        }
        return Ok(());
    };
    for (k, v) in l {
        if v.is_null() {
            continue;
        }
        if let Some(pv) = p.get(k).filter(|pv| !pv.is_null()) {
            let same = pv == v || (pv.as_f64().is_some() && pv.as_f64() == v.as_f64());
            if !same {
                return Err(ConfigError::Conflict {
                    field: format!("{}.{k}", text.name("rope_scaling")),
                    message: format!("{v} disagrees with `{}.{k}` {pv}", text.name("rope_parameters")),
                });
            }
        } else if k == "type" {
            // The legacy spelling of the type: against `rope_type` (`mrope` is default + sections).
            let pt = p.get("rope_type").and_then(Value::as_str).unwrap_or("default");
            if v.as_str().is_some_and(|t| t != pt && t != "mrope") {
                return Err(ConfigError::Conflict {
                    field: format!("{}.type", text.name("rope_scaling")),
                    message: format!("{v} disagrees with `{}.rope_type` {pt}", text.name("rope_parameters")),
                });
            }
        } else if k != "rope_type" {
            return Err(ConfigError::Conflict {
                field: format!("{}.{k}", text.name("rope_scaling")),
                message: format!("absent from `{}`, which is read", text.name("rope_parameters")),
            });
        }
    }
    Ok(())
}

/// `no_rope_layers` (1 or `true`: the layer uses RoPE), or the model type's default
/// pattern when absent or empty (HF `Llama4TextConfig`: `no_rope_layers if no_rope_layers
/// else [int((i + 1) % no_rope_layer_interval != 0) ...]`).
fn no_rope_layers_of(
    ctx: &Text<'_>,
    num_layers: Option<usize>,
    warnings: &mut Vec<String>,
) -> Result<Option<Vec<bool>>, ConfigError> {
    let text = ctx.obj;
    let expected = "an array of 0 and 1";
    let list = match text.get("no_rope_layers") {
        None => Vec::new(),
        Some(v) => {
            let arr = v.as_array().ok_or_else(|| text.malformed("no_rope_layers", expected))?;
            arr.iter()
                .map(|x| match (x.as_u64(), x.as_bool()) {
                    (Some(0), _) | (_, Some(false)) => Ok(false),
                    (Some(1), _) | (_, Some(true)) => Ok(true),
                    _ => Err(text.malformed("no_rope_layers", expected)),
                })
                .collect::<Result<Vec<_>, _>>()?
        }
    };
    if !list.is_empty() {
        if let Some(n) = num_layers {
            if list.len() != n {
                return Err(ConfigError::Conflict {
                    field: text.name("no_rope_layers"),
                    message: format!("{} entries, but num_hidden_layers is {n}", list.len()),
                });
            }
        }
        return Ok(Some(list));
    }
    let Some(default_interval) = ctx.defaults.no_rope_interval else {
        if text.get("no_rope_layer_interval").is_some() {
            warnings.push(format!(
                "{}: not read for this model type; ignored",
                text.name("no_rope_layer_interval")
            ));
        }
        return Ok(None);
    };
    let interval = text.positive("no_rope_layer_interval")?.unwrap_or(default_interval);
    Ok(num_layers.map(|n| (0..n).map(|i| (i + 1) % interval != 0).collect()))
}

/// `layer_types`, else the model type's pattern (see the module docs).
fn layer_types_of(
    ctx: &Text<'_>,
    num_layers: Option<usize>,
    no_rope_layers: Option<&[bool]>,
) -> Result<Vec<LayerType>, ConfigError> {
    let text = ctx.obj;
    if let Some(v) = text.get("layer_types") {
        let expected = "an array of layer type names";
        let arr = v.as_array().ok_or_else(|| text.malformed("layer_types", expected))?;
        let list = arr
            .iter()
            .map(|x| {
                x.as_str().map(LayerType::from_hf).ok_or_else(|| text.malformed("layer_types", expected))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let n = num_layers.or(no_rope_layers.map(<[bool]>::len));
        if let Some(n) = n {
            if list.len() != n {
                return Err(ConfigError::Conflict {
                    field: text.name("layer_types"),
                    message: format!("{} entries, but the model has {n} layers", list.len()),
                });
            }
        }
        return Ok(list);
    }
    let Some(n) = num_layers.or(no_rope_layers.map(<[bool]>::len)) else { return Ok(Vec::new()) };
    if let Some(default_pattern) = ctx.defaults.sliding_pattern {
        // Gemma 3: `sliding_window_pattern` (re-saved: `_sliding_window_pattern`).
        let pattern = match text.positive("sliding_window_pattern")? {
            Some(p) => p,
            None => text.positive("_sliding_window_pattern")?.unwrap_or(default_pattern),
        };
        return Ok((0..n)
            .map(
                |i| {
                    if (i + 1) % pattern != 0 {
                        LayerType::SlidingAttention
                    } else {
                        LayerType::FullAttention
                    }
                },
            )
            .collect());
    }
    if let Some(default_interval) = ctx.defaults.full_attention_interval {
        let interval = text.positive("full_attention_interval")?.unwrap_or(default_interval);
        return Ok((0..n)
            .map(|i| {
                if (i + 1) % interval != 0 {
                    LayerType::Other("linear_attention".to_string())
                } else {
                    LayerType::FullAttention
                }
            })
            .collect());
    }
    if let (true, Some(uses)) = (ctx.defaults.chunked_on_rope_layers, no_rope_layers) {
        return Ok(uses
            .iter()
            .map(|u| if *u { LayerType::ChunkedAttention } else { LayerType::FullAttention })
            .collect());
    }
    Ok(std::vec![LayerType::FullAttention; n])
}

/// Maps one rope dict (`rope`) of the text model. `theta_before_top`: a theta that wins
/// over the text part's `rope_theta` (Gemma 3's `rope_local_base_freq`), with its field.
fn rope_of(
    ctx: &Text<'_>,
    rope: Obj<'_>,
    theta_before_top: Option<(f64, String)>,
    warnings: &mut Vec<String>,
) -> Result<Mapped, ConfigError> {
    let text = ctx.obj;
    let rope_type = rope.str("rope_type")?;
    let legacy_type = rope.str("type")?;
    if rope_type.is_none() && legacy_type.is_none() {
        let param = rope.map.iter().find(|(k, v)| !v.is_null() && !COMMON_ROPE_KEYS.contains(&k.as_str()));
        if let Some((key, _)) = param {
            return Err(ConfigError::Conflict {
                field: rope.name(key),
                message: format!(
                    "a rope parameter without `{}` (or `type`): its scaling method is unknown",
                    rope.name("rope_type")
                ),
            });
        }
    }
    let spelled = rope_type.or(legacy_type).unwrap_or("default");
    let is_mrope_type = rope_type == Some("mrope") || legacy_type == Some("mrope");
    // Re-saved Qwen2-VL: `rope_type: "default"` beside the legacy `type: "mrope"`.
    let method = match (rope_type, legacy_type) {
        (Some(r), Some(l)) if r != l => {
            if r == "mrope" {
                l
            } else {
                if l != "mrope" {
                    warnings.push(format!(
                        "{}: `{l}` differs from rope_type `{r}`; rope_type read",
                        rope.name("type")
                    ));
                }
                r
            }
        }
        _ => spelled,
    };
    let method = if method == "mrope" { "default" } else { method };

    // theta.
    let (theta, theta_src) = if let Some(t) = rope.f64("rope_theta")? {
        (t, rope.name("rope_theta"))
    } else if let Some(t) = theta_before_top {
        t
    } else if let Some(t) = text.f64("rope_theta")? {
        (t, text.name("rope_theta"))
    } else if let Some(t) = text.f64("rotary_emb_base")? {
        (t, text.name("rotary_emb_base"))
    } else {
        (ctx.defaults.theta, text.name("rope_theta"))
    };

    // rotary_dim.
    let head_dim = ctx.head_dim;
    let partial = |o: Obj<'_>, key: &str| -> Result<Option<f64>, ConfigError> {
        match o.f64(key)? {
            Some(p) if !(p.is_finite() && p > 0.0 && p <= 1.0) => Err(o.malformed(key, "a number in (0, 1]")),
            p => Ok(p),
        }
    };
    let top_prf = partial(text, "partial_rotary_factor")?;
    let prf = match partial(rope, "partial_rotary_factor")? {
        Some(p) => {
            if let Some(t) = top_prf.filter(|t| *t != p) {
                return Err(ConfigError::Conflict {
                    field: rope.name("partial_rotary_factor"),
                    message: format!("{p} disagrees with `{}` {t}", text.name("partial_rotary_factor")),
                });
            }
            Some((p, rope.name("partial_rotary_factor")))
        }
        None => top_prf.map(|p| (p, text.name("partial_rotary_factor"))),
    };
    let pct = partial(text, "rotary_pct")?.map(|p| (p, text.name("rotary_pct")));
    // `int(head_dim * factor)` as transformers computes it.
    let fraction = |p: f64| libm::floor(head_dim as f64 * p) as usize;
    let (rotary_dim, rotary_src) = if method == "proportional" || ctx.mla {
        (head_dim, ctx.head_src.clone())
    } else if let Some(r) = text.positive("rotary_dim")? {
        for (p, src) in prf.iter().chain(&pct) {
            if fraction(*p) != r {
                return Err(ConfigError::Conflict {
                    field: text.name("rotary_dim"),
                    message: format!(
                        "{r} disagrees with `{src}` {p} (floor(head_dim {head_dim} * {p}) = {})",
                        fraction(*p)
                    ),
                });
            }
        }
        (r, text.name("rotary_dim"))
    } else if let Some((p, src)) = &prf {
        (fraction(*p), src.clone())
    } else if let Some((p, src)) = &pct {
        (fraction(*p), src.clone())
    } else {
        (head_dim, ctx.head_src.clone())
    };

    let mrope = mrope_of(ctx, rope, is_mrope_type, rotary_dim, &rotary_src, warnings)?;

    let reads = keys_read(method);
    for (k, v) in rope.map {
        if !v.is_null() && !COMMON_ROPE_KEYS.contains(&k.as_str()) && !reads.contains(&k.as_str()) {
            warnings.push(format!("{}: not read by rope type `{method}`; ignored", rope.name(k)));
        }
    }

    let scaling =
        scaling_from(method, rope, text, ctx.max_pos, ctx.top_original, prf.as_ref().map(|(p, _)| *p))?;
    let config =
        RopeConfig { head_dim, rotary_dim, layout: ctx.layout, theta, scaling, angle_mode: AngleMode::Exact };
    let sources = Sources {
        head_dim: ctx.head_src.clone(),
        rotary_dim: rotary_src,
        theta: theta_src,
        max_pos: text.name("max_position_embeddings"),
    };
    // As `Rope::new` checks it (field domains, then frequencies that stay finite for every
    // call length), so a loaded configuration always builds a `Rope`.
    crate::Rope::new(config.clone()).map_err(|error| invalid(error, &sources, rope))?;
    Ok(Mapped { config, scaling_name: spelled.to_string(), mrope })
}

/// `mrope_section` / `mrope_interleaved` of a rope dict, as the text model type uses them
/// ([`MropeUse`]), validated against the layout and `rotary_dim`. Any scaling combines
/// with MRoPE (HF builds `inv_freq` with `ROPE_INIT_FUNCTIONS[rope_type]` first).
fn mrope_of(
    ctx: &Text<'_>,
    rope: Obj<'_>,
    is_mrope_type: bool,
    rotary_dim: usize,
    rotary_src: &str,
    warnings: &mut Vec<String>,
) -> Result<Option<MropeSpec>, ConfigError> {
    let expected = "an array of 3 non-negative integers";
    let section = rope.usize_array("mrope_section", expected)?;
    let interleaved = rope.bool("mrope_interleaved")?;
    let field = rope.name("mrope_section");
    let conflict = |message: String| ConfigError::Conflict { field: field.clone(), message };
    let interleaved = match ctx.defaults.mrope {
        MropeUse::Never => {
            let key = if section.is_some() {
                Some("mrope_section")
            } else if interleaved.is_some() {
                Some("mrope_interleaved")
            } else if is_mrope_type {
                Some(if rope.get("rope_type") == Some(&Value::from("mrope")) { "rope_type" } else { "type" })
            } else {
                None
            };
            let Some(key) = key else { return Ok(None) };
            return Err(ConfigError::Conflict {
                field: rope.name(key),
                message: "MRoPE on a model type whose transformers model applies plain RoPE \
                          (MRoPE types: qwen2_vl, qwen2_5_vl, qwen3_vl, qwen3_vl_moe)"
                    .to_string(),
            });
        }
        MropeUse::Sectioned => {
            if interleaved == Some(true) {
                warnings.push(format!(
                    "{}: not read for Qwen2-VL / Qwen2.5-VL (sectioned MRoPE, HF apply_multimodal_rotary_pos_emb); ignored",
                    rope.name("mrope_interleaved")
                ));
            }
            false
        }
        MropeUse::Interleaved => {
            if interleaved == Some(false) {
                warnings.push(format!(
                    "{}: false is not read; Qwen3-VL always interleaves (HF apply_interleaved_mrope); ignored",
                    rope.name("mrope_interleaved")
                ));
            }
            true
        }
    };
    let [s_t, s_h, s_w] = match section {
        Some(section) => {
            <[usize; 3]>::try_from(section).map_err(|_| rope.malformed("mrope_section", expected))?
        }
        // HF `Qwen3VLTextRotaryEmbedding`: `.get("mrope_section", [24, 20, 20])`.
        None if interleaved => [24, 20, 20],
        None => return Err(ConfigError::Missing { field }),
    };
    if ctx.layout != Layout::HalfSplit {
        return Err(conflict(
            "MRoPE rotates half-split pairs (HF rotate_half); this model type rotates interleaved pairs"
                .to_string(),
        ));
    }
    if rotary_dim != ctx.head_dim {
        return Err(conflict(format!(
            "MRoPE rotates the whole head (head_dim {}), but `{rotary_src}` gives rotary_dim {rotary_dim}",
            ctx.head_dim
        )));
    }
    let pairs = rotary_dim / 2;
    let sum = s_t.checked_add(s_h).and_then(|s| s.checked_add(s_w));
    if sum != Some(pairs) {
        return Err(conflict(format!(
            "[{s_t}, {s_h}, {s_w}] must sum to rotary_dim / 2 = {pairs} (HF splits cos/sin into these sections)"
        )));
    }
    // HF `apply_interleaved_mrope`: h at 1, 4, .. < 3 * s_h and w at 2, 5, .. < 3 * s_w,
    // which must lie inside the pairs.
    if interleaved && (3 * s_h > pairs + 1 || 3 * s_w > pairs) {
        return Err(conflict(format!(
            "interleaved sections [{s_t}, {s_h}, {s_w}] need 3 * h <= {} and 3 * w <= {pairs}",
            pairs + 1
        )));
    }
    Ok(Some(MropeSpec { mrope_section: [s_t, s_h, s_w], interleaved }))
}

/// The vision encoder's 2-D RoPE from `vision_config` (see [`VisionRopeSpec`]).
fn vision_of(
    top: Obj<'_>,
    model_type: &str,
    warnings: &mut Vec<String>,
) -> Result<Option<VisionRopeSpec>, ConfigError> {
    let Some(map) = top.object("vision_config")? else { return Ok(None) };
    let vis = Obj { map, prefix: "vision_config." };
    let vision_type = vis.str("model_type")?.unwrap_or("");
    let family = |p: &str| vision_type.starts_with(p) || model_type.starts_with(p);
    let llama4 = family("llama4");
    let qwen = ["qwen2_vl", "qwen2_5_vl", "qwen3_vl"].iter().any(|p| family(p));
    if !llama4 && !qwen {
        if vision_type != "siglip_vision_model" {
            warnings.push(format!(
                "vision_config: model type `{vision_type}` (of `{model_type}`) has no vision RoPE this loader reads; ignored"
            ));
        }
        return Ok(None);
    }
    // theta: `rope_parameters`/`rope_scaling` (re-saved: `rope_type` "default"/"axial"),
    // `rope_theta`, else 1e4.
    let dict_key = if vis.get("rope_parameters").is_some() { "rope_parameters" } else { "rope_scaling" };
    let dict_prefix = vis.name(&format!("{dict_key}."));
    let mut theta = None;
    if let Some(dict) = vis.object(dict_key)? {
        let d = Obj { map: dict, prefix: &dict_prefix };
        let (key, t) = match d.str("rope_type")? {
            Some(t) => ("rope_type", Some(t)),
            None => ("type", d.str("type")?),
        };
        if let Some(t) = t.filter(|t| !matches!(*t, "default" | "axial")) {
            return Err(ConfigError::Conflict {
                field: d.name(key),
                message: format!(
                    "vision RoPE `{t}` is not supported (the ViT's 2-D RoPE is `default`/`axial`)"
                ),
            });
        }
        theta = d.f64("rope_theta")?.map(|t| (t, d.name("rope_theta")));
        for (k, v) in dict {
            if !v.is_null() && !matches!(k.as_str(), "rope_type" | "type" | "rope_theta") {
                warnings.push(format!("{}: not read for the vision RoPE; ignored", d.name(k)));
            }
        }
    }
    let (theta, theta_src) = match theta {
        Some(t) => t,
        None => (vis.f64("rope_theta")?.unwrap_or(10_000.0), vis.name("rope_theta")),
    };
    if !(theta.is_finite() && theta > 0.0) {
        return Err(ConfigError::Invalid { field: theta_src, error: RopeError::InvalidTheta });
    }
    let (width_key, heads_key) = if llama4 {
        ("hidden_size", "num_attention_heads")
    } else if vis.get("embed_dim").is_some() {
        // Qwen2-VL: `embed_dim` is the ViT width, `hidden_size` the LLM's.
        ("embed_dim", "num_heads")
    } else {
        ("hidden_size", "num_heads")
    };
    let width = vis.require(width_key, vis.positive(width_key)?)?;
    let num_heads = vis.require(heads_key, vis.positive(heads_key)?)?;
    if width % num_heads != 0 {
        return Err(vis.malformed(width_key, "a multiple of the vision heads (HF: embed_dim // num_heads)"));
    }
    let head_dim = width / num_heads;
    if head_dim == 0 || head_dim % 4 != 0 {
        return Err(vis.malformed(width_key, "num_heads times a multiple of 4 (two axes of pairs per head)"));
    }
    if head_dim > MAX_ROTARY_DIM {
        let error = RopeError::RotaryDimTooLarge { rotary_dim: head_dim, max: MAX_ROTARY_DIM };
        return Err(ConfigError::Invalid { field: vis.name(width_key), error });
    }
    let patch_size = vis.positive("patch_size")?;
    let spec = if llama4 {
        let grid_size = match (vis.positive("image_size")?, patch_size) {
            (Some(i), Some(p)) => Some(i / p),
            _ => None,
        };
        VisionRopeSpec {
            model_type: if vision_type.is_empty() { "llama4_vision_model" } else { vision_type }.to_string(),
            head_dim,
            num_heads,
            theta,
            layout: Layout::Interleaved,
            axes: [VisionAxis::Col, VisionAxis::Row],
            position_offset: 1,
            spatial_merge_size: None,
            patch_size,
            grid_size,
        }
    } else {
        let name =
            if vision_type.is_empty() { format!("{model_type}_vision") } else { vision_type.to_string() };
        VisionRopeSpec {
            model_type: name,
            head_dim,
            num_heads,
            theta,
            layout: Layout::HalfSplit,
            axes: [VisionAxis::Row, VisionAxis::Col],
            position_offset: 0,
            // `Qwen2VLVisionConfig`: spatial_merge_size=2.
            spatial_merge_size: Some(vis.positive("spatial_merge_size")?.unwrap_or(2)),
            patch_size,
            grid_size: None,
        }
    };
    // What the operation (`VisionRope`) refuses is refused here, naming the field: e.g. a
    // theta so small that a frequency is not finite.
    if let Err(error) = crate::VisionRope::new(spec.rope_config()) {
        let field = if error == RopeError::InvalidTheta { theta_src } else { vis.name(width_key) };
        return Err(ConfigError::Invalid { field, error });
    }
    Ok(Some(spec))
}

/// Names the field behind a validation error.
fn invalid(error: RopeError, src: &Sources, rope: Obj<'_>) -> ConfigError {
    let field = match error {
        RopeError::ZeroHeadDim => src.head_dim.clone(),
        RopeError::InvalidRotaryDim { .. }
        | RopeError::RotaryDimExceedsHeadDim { .. }
        | RopeError::RotaryDimTooLarge { .. } => src.rotary_dim.clone(),
        RopeError::InvalidTheta => src.theta.clone(),
        RopeError::InvalidScalingParameter { name: "rotary_dim" } => src.rotary_dim.clone(),
        RopeError::InvalidScalingParameter { name: "max_position_embeddings" } => src.max_pos.clone(),
        RopeError::InvalidScalingParameter { name } => rope.name(name),
        _ => rope.prefix.trim_end_matches('.').to_string(),
    };
    ConfigError::Invalid { field, error }
}

fn scaling_from(
    rope_type: &str,
    rope: Obj<'_>,
    text: Obj<'_>,
    max_pos: Option<u64>,
    top_original: Option<u64>,
    partial_rotary_factor: Option<f64>,
) -> Result<Scaling, ConfigError> {
    let factor = || -> Result<f64, ConfigError> { rope.require("factor", rope.f64("factor")?) };
    let max_required = || max_pos.ok_or(ConfigError::Missing { field: text.name("max_position_embeddings") });
    // transformers: `rope_parameters["original_max_position_embeddings"]`, standardized from
    // the top-level field or `max_position_embeddings`. A zero is an error naming the field
    // it came from, before anything divides by it (the fallback `factor` below).
    // `llama3` has no `max_position_embeddings` fallback (transformers requires the field).
    let original_or = |fallback: Option<u64>| -> Result<u64, ConfigError> {
        let (value, field) = if let Some(o) = rope.u64("original_max_position_embeddings")? {
            (o, rope.name("original_max_position_embeddings"))
        } else if let Some(o) = top_original {
            (o, text.name("original_max_position_embeddings"))
        } else if let Some(o) = fallback {
            (o, text.name("max_position_embeddings"))
        } else {
            return Err(ConfigError::Missing { field: rope.name("original_max_position_embeddings") });
        };
        if value == 0 {
            let error = RopeError::InvalidScalingParameter { name: "original_max_position_embeddings" };
            return Err(ConfigError::Invalid { field, error });
        }
        Ok(value)
    };
    let original = || original_or(max_pos);
    // `factor` when present, else `max_position_embeddings / original` (`original > 0`).
    let factor_or_ratio = |orig: u64| -> Result<f64, ConfigError> {
        match rope.f64("factor")? {
            Some(f) => Ok(f),
            None => match max_pos {
                Some(m) => Ok(m as f64 / orig as f64),
                None => Err(ConfigError::Missing { field: rope.name("factor") }),
            },
        }
    };
    Ok(match rope_type {
        "default" => Scaling::None,
        "linear" => Scaling::Linear { factor: factor()? },
        "dynamic" => match rope.f64("alpha")? {
            Some(alpha) if alpha != 0.0 => Scaling::NtkAlpha { alpha },
            _ => Scaling::DynamicNtk { factor: factor()?, max_position_embeddings: max_required()? },
        },
        "yarn" => {
            let orig = original()?;
            let mut p = YarnParams::new(factor_or_ratio(orig)?, orig);
            // transformers: `get("beta_fast") or 32`, `get("beta_slow") or 1`.
            if let Some(b) = rope.f64("beta_fast")?.filter(|b| *b != 0.0) {
                p.beta_fast = b;
            }
            if let Some(b) = rope.f64("beta_slow")?.filter(|b| *b != 0.0) {
                p.beta_slow = b;
            }
            p.mscale = rope.f64("mscale")?;
            p.mscale_all_dim = rope.f64("mscale_all_dim")?;
            p.attention_factor = rope.f64("attention_factor")?;
            p.truncate = rope.bool("truncate")?.unwrap_or(true);
            Scaling::Yarn(p)
        }
        "llama3" => Scaling::Llama3 {
            factor: factor()?,
            low_freq_factor: rope.require("low_freq_factor", rope.f64("low_freq_factor")?)?,
            high_freq_factor: rope.require("high_freq_factor", rope.f64("high_freq_factor")?)?,
            original_max_position_embeddings: original_or(None)?,
        },
        "longrope" | "su" => {
            let short = rope.require("short_factor", rope.f64_array("short_factor")?)?;
            let long = rope.require("long_factor", rope.f64_array("long_factor")?)?;
            let orig = original()?;
            let mut p =
                LongRopeParams::new(&short, &long, orig, factor_or_ratio(orig)?).map_err(|error| {
                    let field = match error {
                        RopeError::InvalidScalingParameter { name } => rope.name(name),
                        _ => rope.name("short_factor"),
                    };
                    ConfigError::Invalid { field, error }
                })?;
            p.attention_factor = rope.f64("attention_factor")?;
            Scaling::LongRope(p)
        }
        "proportional" => Scaling::Proportional {
            factor: rope.f64("factor")?.unwrap_or(1.0),
            partial_rotary_factor: partial_rotary_factor.unwrap_or(1.0),
        },
        other => return Err(ConfigError::UnsupportedRopeType { rope_type: other.to_string() }),
    })
}
