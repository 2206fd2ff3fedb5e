//! One rope dict (`rope_parameters` / `rope_scaling`, or one entry per layer type) mapped to
//! a validated [`RopeConfig`]: theta, rotary_dim, and the scaling method with its
//! parameters (transformers `modeling_rope_utils.py`).

use std::format;
use std::string::{String, ToString};
use std::vec::Vec;

use super::json::Obj;
use super::multimodal::mrope_of;
use super::parse::{Mapped, Sources, Text};
use super::ConfigError;
use crate::config::{AngleMode, RopeConfig};
use crate::error::RopeError;
use crate::freq::{LongRopeParams, Scaling, YarnParams};

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

/// Maps one rope dict (`rope`) of the text model. `theta_before_top`: a theta that wins
/// over the text part's `rope_theta` (Gemma 3's `rope_local_base_freq`), with its field.
pub(super) fn rope_of(
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
