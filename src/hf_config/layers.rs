//! Which layer is which: `no_rope_layers` and `layer_types`, or the model type's pattern.

use std::format;
use std::string::{String, ToString};
use std::vec::Vec;

use super::parse::Text;
use super::{ConfigError, LayerType};

/// `no_rope_layers` (1 or `true`: the layer uses RoPE), or the model type's default
/// pattern when absent or empty (HF `Llama4TextConfig`: `no_rope_layers if no_rope_layers
/// else [int((i + 1) % no_rope_layer_interval != 0) ...]`).
pub(super) fn no_rope_layers_of(
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
pub(super) fn layer_types_of(
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
