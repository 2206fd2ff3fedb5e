//! [`ModelConfig`] from the parsed JSON: the text part, its shape, the rope dict(s) and the
//! configuration of each layer type.

use std::format;
use std::string::{String, ToString};
use std::vec::Vec;

use serde_json::{Map, Value};

use super::json::Obj;
use super::layers::{layer_types_of, no_rope_layers_of};
use super::multimodal::{tokens_per_second_of, vision_of};
use super::rope_dict::rope_of;
use super::{ConfigError, LayerRope, LayerType, ModelConfig, MropeSpec};
use crate::config::{PairLayout, RopeConfig};

/// The most layers a config may declare (the per-layer lists are built from it; real models
/// have at most a few hundred).
const MAX_LAYERS: usize = 65_536;

/// Defaults of fields a published file may omit, per text model type (transformers'
/// config classes; see the module docs).
pub(super) struct TypeDefaults {
    pub(super) theta: f64,
    /// Gemma 3: `rope_local_base_freq` of the sliding layers.
    pub(super) local_theta: Option<f64>,
    /// Gemma 2/3: every `pattern`-th layer is full attention, the others slide.
    pub(super) sliding_pattern: Option<usize>,
    /// Qwen3-Next: every `interval`-th layer is `full_attention`, the others
    /// `linear_attention` (`full_attention_interval`).
    pub(super) full_attention_interval: Option<usize>,
    pub(super) max_position_embeddings: Option<u64>,
    /// Llama 4, SmolLM3: every `interval`-th layer has no RoPE.
    pub(super) no_rope_interval: Option<usize>,
    /// Llama 4: RoPE layers are `chunked_attention`, NoPE layers `full_attention`.
    pub(super) chunked_on_rope_layers: bool,
    pub(super) use_qk_norm: Option<bool>,
    /// Whether (and how) transformers' text model of this type applies MRoPE.
    pub(super) mrope: MropeUse,
}

/// How a text model type uses MRoPE (transformers' modeling files).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum MropeUse {
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
pub(super) struct Text<'a> {
    pub(super) obj: Obj<'a>,
    pub(super) head_dim: usize,
    /// The field head_dim came from (with prefix).
    pub(super) head_src: String,
    /// DeepSeek MLA: rotary_dim is `qk_rope_head_dim`.
    pub(super) mla: bool,
    pub(super) layout: PairLayout,
    pub(super) max_pos: Option<u64>,
    pub(super) top_original: Option<u64>,
    pub(super) defaults: TypeDefaults,
}

/// Where each derived quantity came from, to name the field in validation errors.
pub(super) struct Sources {
    pub(super) head_dim: String,
    pub(super) rotary_dim: String,
    pub(super) theta: String,
    pub(super) max_pos: String,
}

/// One rope dict mapped: the configuration, its rope type as spelled, its MRoPE fields.
pub(super) struct Mapped {
    pub(super) config: RopeConfig,
    pub(super) scaling_name: String,
    pub(super) mrope: Option<MropeSpec>,
}

pub(super) fn parse(top: Obj<'_>) -> Result<ModelConfig, ConfigError> {
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
        "gptj" | "deepseek_v2" | "llama4" | "llama4_text" => PairLayout::Interleaved,
        "deepseek_v3" if text.bool("rope_interleave")?.unwrap_or(true) => PairLayout::Interleaved,
        _ => PairLayout::HalfSplit,
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
    let tokens_per_second = tokens_per_second_of(top, &model_type, &text_model_type, &mut warnings)?;
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
        tokens_per_second,
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
