//! The multimodal parts: MRoPE sections of a Qwen-VL text model, the vision encoder's 2-D
//! RoPE (`vision_config`), and Qwen2.5-VL's video time step.

use std::format;
use std::string::{String, ToString};
use std::vec::Vec;

use serde_json::Value;

use super::json::Obj;
use super::parse::{MropeUse, Text};
use super::{ConfigError, MropeSpec, VisionAxis, VisionRopeSpec};
use crate::config::{PairLayout, MAX_ROTARY_DIM};
use crate::error::RopeError;

/// `mrope_section` / `mrope_interleaved` of a rope dict, as the text model type uses them
/// ([`MropeUse`]), validated against the layout and `rotary_dim`. Any scaling combines
/// with MRoPE (HF builds `inv_freq` with `ROPE_INIT_FUNCTIONS[rope_type]` first).
pub(super) fn mrope_of(
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
    if ctx.layout != PairLayout::HalfSplit {
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
pub(super) fn vision_of(
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
            layout: PairLayout::Interleaved,
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
            layout: PairLayout::HalfSplit,
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

/// The temporal positions per second of video: `vision_config.tokens_per_second`, read for
/// Qwen2.5-VL only (its `get_rope_index` is the one that multiplies by it), 4 when absent
/// (`Qwen2_5_VLVisionConfig(tokens_per_second=4)`). Elsewhere the field is a warning.
pub(super) fn tokens_per_second_of(
    top: Obj<'_>,
    model_type: &str,
    text_model_type: &str,
    warnings: &mut Vec<String>,
) -> Result<Option<f64>, ConfigError> {
    let Some(map) = top.object("vision_config")? else { return Ok(None) };
    let vis = Obj { map, prefix: "vision_config." };
    let key = "tokens_per_second";
    if !(model_type.starts_with("qwen2_5_vl") || text_model_type.starts_with("qwen2_5_vl")) {
        if vis.get(key).is_some() {
            warnings.push(format!(
                "{}: read for Qwen2.5-VL only (model type `{model_type}`); ignored",
                vis.name(key)
            ));
        }
        return Ok(None);
    }
    let Some(value) = vis.get(key) else { return Ok(Some(4.0)) };
    // `MRopeIndex` takes it as f32: finite and > 0 there too.
    match value.as_f64() {
        Some(v) if v.is_finite() && v > 0.0 && (v as f32).is_finite() && v as f32 > 0.0 => Ok(Some(v)),
        _ => Err(vis.malformed(key, "a number > 0 (finite and non-zero as f32)")),
    }
}

/// The two position streams of Llama 4's vision encoder, in its token order: the
/// `grid_size * grid_size` patches row by row, then the class token. Writes `x_out` (the
/// patch column, the first stream) and `y_out` (the row, the second stream) and returns the
/// token count `grid_size * grid_size + 1`.
///
/// transformers' `Llama4VisionRotaryEmbedding` numbers the patches `img_idx = 0..idx * idx`
/// (`idx = image_size // patch_size`, [`VisionRopeSpec::grid_size`]) and appends the class
/// token with id -2; patch `n` rotates by `x = n % idx` and `y = n // idx` plus 1 (`(x + 1) *
/// rope_freq` for the first half of the pairs, `(y + 1) * rope_freq` for the second), and the
/// class token's angles are set to 0 (`masked_fill(img_idx < 0, 0)`), the identity. So here
/// patch `n < idx * idx` gets `x_out[n] = n % idx + 1` and `y_out[n] = n / idx + 1` (the
/// spec's `position_offset` 1 is included), and the class token, at index `idx * idx`, gets
/// position 0 on both axes: angle `0 * inv_freq = 0` for every pair, which leaves it
/// unchanged as transformers' masked angle does. Pass the streams as they are,
/// `VisionOptions::ids([&x, &y])`, to the encoder's [`VisionRope`](crate::VisionRope)
/// ([`ModelConfig::vision_rope`](super::ModelConfig::vision_rope)), not through
/// [`VisionRopeSpec::fill_position_ids`] (which would add the offset again).
///
/// ```
/// use rope_kernels::hf_config::{llama4_vision_position_ids, ModelConfig};
/// use rope_kernels::{HeadsMut, View, VisionOptions};
///
/// let json = r#"{"model_type": "llama4",
///     "text_config": {"model_type": "llama4_text", "head_dim": 128, "hidden_size": 5120,
///                     "num_attention_heads": 40, "num_hidden_layers": 48},
///     "vision_config": {"model_type": "llama4_vision_model", "hidden_size": 1408,
///                       "num_attention_heads": 16, "image_size": 42, "patch_size": 14}}"#;
/// let model = ModelConfig::from_json_str(json)?;
/// let side = model.vision.as_ref().and_then(|v| v.grid_size).unwrap(); // 42 / 14 = 3
/// let n = side * side + 1; // the patches, then the class token
/// let (mut x, mut y) = (vec![0u32; n], vec![0u32; n]);
/// assert_eq!(llama4_vision_position_ids(side, &mut x, &mut y)?, n);
/// assert_eq!(x, [1, 2, 3, 1, 2, 3, 1, 2, 3, 0]);
/// assert_eq!(y, [1, 1, 1, 2, 2, 2, 3, 3, 3, 0]);
///
/// // The encoder's 2-D RoPE (head_dim 1408 / 16 = 88): the class token stays as it is.
/// let vit = model.vision_rope()?.unwrap();
/// let mut q = vec![0.5f32; n * 16 * 88];
/// vit.apply(HeadsMut::new(&mut q, View::token_major(n, 16, 88)), &VisionOptions::ids([&x, &y]))?;
/// assert!(q[(n - 1) * 16 * 88..].iter().all(|v| *v == 0.5));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Errors
/// Nothing is written when any is returned: [`RopeError::InvalidPositionLayout`] for
/// `grid_size == 0` (transformers has no class token position without a patch);
/// [`RopeError::PositionOverflow`] if the token count overflows `usize` or `grid_size`
/// exceeds `u32::MAX` (the largest position); [`RopeError::PositionCountMismatch`] unless
/// `x_out` and `y_out` are each `grid_size * grid_size + 1` long.
pub fn llama4_vision_position_ids(
    grid_size: usize,
    x_out: &mut [u32],
    y_out: &mut [u32],
) -> Result<usize, RopeError> {
    if grid_size == 0 {
        return Err(RopeError::InvalidPositionLayout { reason: "the Llama 4 patch grid side must be > 0" });
    }
    let side = u32::try_from(grid_size).map_err(|_| RopeError::PositionOverflow)?;
    let patches = grid_size.checked_mul(grid_size).ok_or(RopeError::PositionOverflow)?;
    let n = patches.checked_add(1).ok_or(RopeError::PositionOverflow)?;
    for len in [x_out.len(), y_out.len()] {
        if len != n {
            return Err(RopeError::PositionCountMismatch { tokens: n, positions: len });
        }
    }
    let mut i = 0;
    for row in 1..=side {
        for col in 1..=side {
            x_out[i] = col;
            y_out[i] = row;
            i += 1;
        }
    }
    // The class token (HF id -2, its angles masked to 0): position 0 on both axes.
    x_out[patches] = 0;
    y_out[patches] = 0;
    Ok(n)
}
