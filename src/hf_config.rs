//! Loading the RoPE settings of a Hugging Face `config.json` (feature `hf-config`, on by
//! default; needs `std`).
//!
//! [`ModelConfig::from_json_str`] maps the fields real configurations use, current and
//! legacy spellings alike, to a validated [`RopeConfig`]:
//!
//! | What | Fields read, first found wins |
//! |---|---|
//! | heads | `num_attention_heads`, `n_head` (GPT-J) |
//! | kv heads | `num_key_value_heads`; default: the heads |
//! | head_dim | `qk_rope_head_dim` (DeepSeek MLA: the rotary part), `head_dim`, `hidden_size / num_attention_heads` (`n_embd / n_head`) |
//! | rotary_dim | `rope_type: "proportional"`: head_dim; `qk_rope_head_dim`; `rotary_dim` (GPT-J); `floor(head_dim * partial_rotary_factor)` (in the rope dict or top level; Phi); `floor(head_dim * rotary_pct)` (GPT-NeoX); head_dim |
//! | theta | `rope_theta` in the rope dict, top-level `rope_theta`, `rotary_emb_base` (GPT-NeoX); default 10000 |
//! | rope dict | `rope_parameters` (transformers 5), `rope_scaling` (legacy); `null` or absent: no scaling |
//! | rope type | `rope_type`, `type` (legacy); default `"default"`; `"su"` is LongRoPE |
//! | context | `max_position_embeddings`, `n_positions` (GPT-J); `original_max_position_embeddings` in the rope dict or top level (Phi-3) |
//! | layout | `gptj`, `deepseek_v2`, and `deepseek_v3` unless `rope_interleave: false`: [`Layout::Interleaved`]; every other model type [`Layout::HalfSplit`] |
//!
//! Scaling parameters follow transformers `modeling_rope_utils.py`: YaRN's `factor`
//! defaults to `max_position_embeddings / original_max_position_embeddings` and its
//! `original_max_position_embeddings` to `max_position_embeddings`; `beta_fast`/`beta_slow`
//! of 0 or `null` mean 32/1; `truncate` defaults to `true`; LongRoPE's `factor` defaults to
//! `max_position_embeddings / original_max_position_embeddings`; `"dynamic"` with a
//! non-zero `alpha` (HunYuan) is static NTK ([`Scaling::NtkAlpha`]).
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

use std::format;
use std::string::{String, ToString};
use std::vec::Vec;

use serde_json::{Map, Value};

use crate::config::{AngleMode, Layout, RopeConfig};
use crate::error::RopeError;
use crate::freq::{LongRopeParams, Scaling, YarnParams};

/// The attention and RoPE shape of a model, from its `config.json`.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct ModelConfig {
    /// `model_type`, e.g. `"llama"`.
    pub model_type: String,
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
    /// The validated RoPE configuration (exact angles): [`Rope::new`](crate::Rope::new) accepts it.
    pub rope: RopeConfig,
    /// `max_position_embeddings` (`n_positions`), if present.
    pub max_position_embeddings: Option<u64>,
    /// The rope type as the file spells it (`"default"` when absent; e.g. `"su"`, whose
    /// method is [`Scaling::LongRope`]; `rope.scaling.name()` gives the canonical name).
    pub scaling_name: String,
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
        /// The type as written, e.g. `"mrope"`.
        rope_type: String,
    },
    /// The values parse but do not form a valid [`RopeConfig`].
    Invalid {
        /// The field held responsible.
        field: String,
        /// The validation error.
        error: RopeError,
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
}

impl ModelConfig {
    /// Parses the text of a `config.json`.
    ///
    /// # Errors
    /// [`ConfigError::Json`] for invalid JSON, [`ConfigError::NotAnObject`], and every
    /// mapping error: [`ConfigError::Missing`], [`ConfigError::Malformed`],
    /// [`ConfigError::UnsupportedRopeType`], [`ConfigError::Invalid`].
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
}

/// Where each derived quantity came from, to name the field in validation errors.
struct Sources {
    head_dim: &'static str,
    rotary_dim: String,
    theta: String,
}

fn parse(top: Obj<'_>) -> Result<ModelConfig, ConfigError> {
    let model_type = top.require("model_type", top.str("model_type")?)?.to_string();
    let (heads, heads_key) = top
        .first_positive(&["num_attention_heads", "n_head"])?
        .ok_or(ConfigError::Missing { field: "num_attention_heads".to_string() })?;
    let kv_heads = top.positive("num_key_value_heads")?.unwrap_or(heads);
    if heads % kv_heads != 0 {
        return Err(top.malformed("num_key_value_heads", "a divisor of num_attention_heads"));
    }
    let max_pos = match top.u64("max_position_embeddings")? {
        Some(v) => Some(v),
        None => top.u64("n_positions")?,
    };

    // The rope dict: transformers 5 `rope_parameters`, else legacy `rope_scaling`.
    let (rope_key, rope_value) = match (top.get("rope_parameters"), top.get("rope_scaling")) {
        (Some(v), _) => ("rope_parameters", Some(v)),
        (None, v) => ("rope_scaling", v),
    };
    let rope_prefix = format!("{rope_key}.");
    let empty = Map::new();
    let rope_map = match rope_value {
        None => &empty,
        Some(v) => v.as_object().ok_or_else(|| top.malformed(rope_key, "an object or null"))?,
    };
    let rope = Obj { map: rope_map, prefix: &rope_prefix };
    let typed = rope.get("rope_type").is_some() || rope.get("type").is_some();
    if !typed && !rope_map.is_empty() && rope_map.values().all(Value::is_object) {
        return Err(
            top.malformed(rope_key, "one parameter object (per-layer-type parameters are not supported)")
        );
    }
    let scaling_name = match rope.str("rope_type")? {
        Some(t) => t,
        None => rope.str("type")?.unwrap_or("default"),
    }
    .to_string();

    // theta.
    let (theta, theta_src) = if let Some(t) = rope.f64("rope_theta")? {
        (t, rope.name("rope_theta"))
    } else if let Some(t) = top.f64("rope_theta")? {
        (t, "rope_theta".to_string())
    } else if let Some(t) = top.f64("rotary_emb_base")? {
        (t, "rotary_emb_base".to_string())
    } else {
        (10_000.0, "rope_theta".to_string())
    };

    // head_dim and rotary_dim.
    let proportional = scaling_name == "proportional";
    let (head_dim, nope_head_dim, head_src) = if let Some(d) = top.positive("qk_rope_head_dim")? {
        let nope = top.u64("qk_nope_head_dim")?.unwrap_or(0);
        let nope = usize::try_from(nope).map_err(|_| top.malformed("qk_nope_head_dim", "an integer"))?;
        (d, nope, "qk_rope_head_dim")
    } else if let Some(d) = top.positive("head_dim")? {
        (d, 0, "head_dim")
    } else {
        let (hidden, hidden_key) = top
            .first_positive(&["hidden_size", "n_embd"])?
            .ok_or(ConfigError::Missing { field: "hidden_size".to_string() })?;
        // transformers: `hidden_size // num_attention_heads`.
        let d = hidden / heads;
        if d == 0 {
            return Err(top.malformed(hidden_key, "at least num_attention_heads"));
        }
        (d, 0, if heads_key == "n_head" { "n_embd" } else { "hidden_size" })
    };
    let partial = |o: Obj<'_>, key: &str| -> Result<Option<f64>, ConfigError> {
        match o.f64(key)? {
            Some(p) if !(p.is_finite() && p > 0.0 && p <= 1.0) => Err(o.malformed(key, "a number in (0, 1]")),
            p => Ok(p),
        }
    };
    let prf = match partial(rope, "partial_rotary_factor")? {
        Some(p) => Some((p, rope.name("partial_rotary_factor"))),
        None => partial(top, "partial_rotary_factor")?.map(|p| (p, "partial_rotary_factor".to_string())),
    };
    // `int(head_dim * factor)` as transformers computes it.
    let fraction = |p: f64| libm::floor(head_dim as f64 * p) as usize;
    let (rotary_dim, rotary_src) = if proportional || head_src == "qk_rope_head_dim" {
        (head_dim, head_src.to_string())
    } else if let Some(r) = top.positive("rotary_dim")? {
        (r, "rotary_dim".to_string())
    } else if let Some((p, src)) = &prf {
        (fraction(*p), src.clone())
    } else if let Some(p) = partial(top, "rotary_pct")? {
        (fraction(p), "rotary_pct".to_string())
    } else {
        (head_dim, head_src.to_string())
    };

    let layout = match model_type.as_str() {
        "gptj" | "deepseek_v2" => Layout::Interleaved,
        "deepseek_v3" if top.bool("rope_interleave")?.unwrap_or(true) => Layout::Interleaved,
        _ => Layout::HalfSplit,
    };

    let top_original = top.u64("original_max_position_embeddings")?;
    let scaling = scaling_from(&scaling_name, rope, max_pos, top_original, prf.map(|(p, _)| p))?;

    let rope_config =
        RopeConfig { head_dim, rotary_dim, layout, theta, scaling, angle_mode: AngleMode::Exact };
    let sources = Sources { head_dim: head_src, rotary_dim: rotary_src, theta: theta_src };
    // As `Rope::new` checks it (field domains, then frequencies that stay finite for every
    // call length), so a loaded configuration always builds a `Rope`.
    crate::Rope::new(rope_config.clone()).map_err(|error| invalid(error, &sources, rope))?;
    Ok(ModelConfig {
        model_type,
        num_attention_heads: heads,
        num_key_value_heads: kv_heads,
        head_dim,
        nope_head_dim,
        rope: rope_config,
        max_position_embeddings: max_pos,
        scaling_name,
    })
}

/// Names the field behind a validation error.
fn invalid(error: RopeError, src: &Sources, rope: Obj<'_>) -> ConfigError {
    let field = match error {
        RopeError::ZeroHeadDim => src.head_dim.to_string(),
        RopeError::InvalidRotaryDim { .. }
        | RopeError::RotaryDimExceedsHeadDim { .. }
        | RopeError::RotaryDimTooLarge { .. } => src.rotary_dim.clone(),
        RopeError::InvalidTheta => src.theta.clone(),
        RopeError::InvalidScalingParameter { name: "rotary_dim" } => src.rotary_dim.clone(),
        RopeError::InvalidScalingParameter { name: "max_position_embeddings" } => {
            "max_position_embeddings".to_string()
        }
        RopeError::InvalidScalingParameter { name } => rope.name(name),
        _ => rope.prefix.trim_end_matches('.').to_string(),
    };
    ConfigError::Invalid { field, error }
}

fn scaling_from(
    rope_type: &str,
    rope: Obj<'_>,
    max_pos: Option<u64>,
    top_original: Option<u64>,
    partial_rotary_factor: Option<f64>,
) -> Result<Scaling, ConfigError> {
    let factor = || -> Result<f64, ConfigError> { rope.require("factor", rope.f64("factor")?) };
    let max_required =
        || max_pos.ok_or(ConfigError::Missing { field: "max_position_embeddings".to_string() });
    // transformers: `rope_parameters["original_max_position_embeddings"]`, standardized from
    // the top-level field or `max_position_embeddings`. A zero is an error naming the field
    // it came from, before anything divides by it (the fallback `factor` below).
    // `llama3` has no `max_position_embeddings` fallback (transformers requires the field).
    let original_or = |fallback: Option<u64>| -> Result<u64, ConfigError> {
        let (value, field) = if let Some(o) = rope.u64("original_max_position_embeddings")? {
            (o, rope.name("original_max_position_embeddings"))
        } else if let Some(o) = top_original {
            (o, "original_max_position_embeddings".to_string())
        } else if let Some(o) = fallback {
            (o, "max_position_embeddings".to_string())
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
