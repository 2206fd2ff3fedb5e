//! From a loaded [`ModelConfig`] to ready operations: [`MRope`] of a Qwen-VL text model,
//! [`VisionRope`] of a vision encoder, and the per-head QK norm a layer applies
//! ([`QkNormSpec`], the form a runtime passes its `q_norm` / `k_norm` weights into).
//!
//! Whatever an operation of this crate cannot represent is an error naming the field,
//! never a silent default.

use std::format;

use crate::config::RopeConfig;
use crate::error::{Operand, RopeError};
use crate::rope::{MRope, MRopeStyle, QkNorm, VisionRope, WeightOffset};

use super::{ConfigError, LayerType, ModelConfig, MropeSpec, VisionAxis, VisionRopeSpec};

/// Text model types known to have no per-head q/k norm (their transformers attention
/// has no `q_norm` / `k_norm`), for which [`ModelConfig::qk_norm`] answers `Ok(None)`
/// (unless `use_qk_norm: true`).
pub const NO_QK_NORM_TYPES: &[&str] = &[
    "llama",
    "mistral",
    "mixtral",
    "qwen2",
    "qwen2_moe",
    "qwen2_vl",
    "qwen2_vl_text",
    "qwen2_5_vl",
    "qwen2_5_vl_text",
    "gemma",
    "gemma2",
    "phi",
    "phi3",
    "gptj",
    "gpt_neox",
    "gpt_oss",
    "deepseek_v2",
    "deepseek_v3",
    "smollm3",
    "starcoder2",
];

/// The per-head q/k norm of a layer, as data: the form and `eps`. The weights are the
/// runtime's (`q_norm.weight`, `k_norm.weight`); [`QkNormSpec::with_weights`] makes the
/// [`QkNorm`] that [`Rope::apply_qk_norm`](crate::Rope::apply_qk_norm) takes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct QkNormSpec {
    /// Where and how the norm applies.
    pub kind: QkNormKind,
    /// `rms_norm_eps` (or the model type's default), as f32: finite, `>= 0`.
    pub eps: f32,
    /// Entries of each weight of a weighted form: the attention `head_dim`.
    pub head_dim: usize,
}

/// The forms of per-head q/k norm (see [`QkNorm`] for the formulas and their sources).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum QkNormKind {
    /// RMS norm with a `head_dim` weight before RoPE: `WeightOffset::Zero` for Qwen3
    /// (`Qwen3RMSNorm`), `WeightOffset::One` for Gemma 3 (`Gemma3RMSNorm`, `1 + weight`).
    RmsBefore(WeightOffset),
    /// Weightless RMS (L2) norm after RoPE: Llama 4 with `use_qk_norm`
    /// (`Llama4TextL2Norm`), on the layers that use RoPE.
    L2After,
}

impl QkNormSpec {
    /// The [`QkNorm`] of this form with the layer's weights (`head_dim` f32 values each;
    /// their lengths are checked by the call). `weights` must be `Some((q_weight, k_weight))` for
    /// [`QkNormKind::RmsBefore`] and `None` for [`QkNormKind::L2After`].
    ///
    /// # Errors
    /// [`RopeError::NormWeightLength`] (operand q, `len` 0) when a weighted form gets no
    /// weights; [`RopeError::NormWeightLength`] (`expected` 0) when the weightless form
    /// gets weights.
    pub fn with_weights<'a>(&self, weights: Option<(&'a [f32], &'a [f32])>) -> Result<QkNorm<'a>, RopeError> {
        match (self.kind, weights) {
            (QkNormKind::RmsBefore(offset), Some((q_weight, k_weight))) => {
                Ok(QkNorm::Rms { q_weight, k_weight, eps: self.eps, offset })
            }
            (QkNormKind::RmsBefore(_), None) => {
                Err(RopeError::NormWeightLength { operand: Operand::Q, expected: self.head_dim, len: 0 })
            }
            (QkNormKind::L2After, None) => Ok(QkNorm::L2After { eps: self.eps }),
            (QkNormKind::L2After, Some((q, _))) => {
                Err(RopeError::NormWeightLength { operand: Operand::Q, expected: 0, len: q.len() })
            }
        }
    }

    /// Whether the norm comes after the rotation (Llama 4) rather than before.
    pub fn after_rope(&self) -> bool {
        self.kind == QkNormKind::L2After
    }
}

impl MropeSpec {
    /// Sectioned (Qwen2-VL, Qwen2.5-VL) or interleaved (Qwen3-VL).
    pub fn style(&self) -> MRopeStyle {
        if self.interleaved {
            MRopeStyle::Interleaved
        } else {
            MRopeStyle::Sectioned
        }
    }
}

impl VisionRopeSpec {
    /// The [`RopeConfig`] of the encoder's 2-D RoPE: `head_dim` (all rotary), `theta`,
    /// the layout, no scaling, exact angles.
    pub fn rope_config(&self) -> RopeConfig {
        RopeConfig::new(self.head_dim, self.theta).with_layout(self.layout)
    }

    /// The two position streams [`VisionRope`] takes, from each patch's row and column:
    /// stream `s` of patch `n` is `(axes[s] of patch n) + position_offset` (Qwen: `[h, w]`;
    /// Llama 4: `[x + 1, y + 1]`). A class token has no patch: give it `[0, 0]` in the
    /// streams yourself (Llama 4 masks its rotation to the identity), or, for Llama 4's whole
    /// grid, take both streams from [`llama4_vision_position_ids`](super::llama4_vision_position_ids).
    ///
    /// # Errors
    /// [`RopeError::PositionCountMismatch`] unless `rows`, `cols` and both outputs have one
    /// length; [`RopeError::PositionOverflow`] if an offset position exceeds `u32::MAX`.
    /// Nothing is written on error.
    pub fn fill_position_ids(
        &self,
        rows: &[u32],
        cols: &[u32],
        first: &mut [u32],
        second: &mut [u32],
    ) -> Result<(), RopeError> {
        let n = rows.len();
        for len in [cols.len(), first.len(), second.len()] {
            if len != n {
                return Err(RopeError::PositionCountMismatch { tokens: n, positions: len });
            }
        }
        let off = self.position_offset;
        let top = rows.iter().chain(cols).copied().max().unwrap_or(0);
        top.checked_add(off).ok_or(RopeError::PositionOverflow)?;
        let pick = |axis: VisionAxis| if axis == VisionAxis::Row { rows } else { cols };
        for (out, axis) in [first, second].into_iter().zip(self.axes) {
            for (o, &p) in out.iter_mut().zip(pick(axis)) {
                *o = p + off;
            }
        }
        Ok(())
    }
}

impl ModelConfig {
    /// The text model's multimodal RoPE, ready to apply: [`MRope`] over [`ModelConfig::rope`]
    /// with [`ModelConfig::mrope`]'s section and style (exact angles; for HF's f32 angles,
    /// [`MRope::with_hf_inv_freq`]). `Ok(None)` for a model without MRoPE.
    ///
    /// # Errors
    /// [`ConfigError::Invalid`] (field `mrope_section`) if [`MRope::new`] refuses the
    /// configuration.
    pub fn mrope_rope(&self) -> Result<Option<MRope<'static>>, ConfigError> {
        let Some(spec) = self.mrope else { return Ok(None) };
        MRope::new(self.rope.clone(), spec.mrope_section, spec.style())
            .map(Some)
            .map_err(|error| ConfigError::Invalid { field: "mrope_section".into(), error })
    }

    /// The vision encoder's 2-D RoPE, ready to apply: [`VisionRope`] of
    /// [`VisionRopeSpec::rope_config`] (Qwen-VL: half-split, streams `[h, w]`; Llama 4:
    /// interleaved, streams `[x + 1, y + 1]`, see [`VisionRopeSpec::fill_position_ids`]).
    /// `Ok(None)` for a model without a vision RoPE.
    ///
    /// # Errors
    /// [`ConfigError::Invalid`] (field `vision_config`) if [`VisionRope::new`] refuses it.
    pub fn vision_rope(&self) -> Result<Option<VisionRope<'static>>, ConfigError> {
        let Some(spec) = &self.vision else { return Ok(None) };
        VisionRope::new(spec.rope_config())
            .map(Some)
            .map_err(|error| ConfigError::Invalid { field: "vision_config".into(), error })
    }

    /// The per-head q/k norm of the model's attention layers, as transformers' modeling
    /// file for the text model type applies it:
    ///
    /// | text model type | norm |
    /// |---|---|
    /// | `qwen3`, `qwen3_moe`, `qwen3_vl_text`, `qwen3_vl_moe_text` | RMS with weight before RoPE (`Qwen3RMSNorm(head_dim)`) |
    /// | `gemma3_text` | RMS with `1 + weight` before RoPE (`Gemma3RMSNorm(head_dim)`) |
    /// | `qwen3_next` | RMS with `1 + weight` before RoPE (`Qwen3NextRMSNorm(head_dim)`), `full_attention` layers only |
    /// | `llama4_text` with `use_qk_norm` | weightless L2 after RoPE (`Llama4TextL2Norm`), RoPE layers only |
    /// | [`NO_QK_NORM_TYPES`] (Llama, Mistral, Qwen2, Gemma 2, Phi, GPT-J, DeepSeek, ...) | none (`Ok(None)`) |
    /// | any other type | an error: the crate does not know whether it has one |
    ///
    /// `eps` is `rms_norm_eps`, else the config class's default (1e-6 for Qwen3 and Gemma 3,
    /// 1e-5 for Llama 4).
    ///
    /// # Errors
    /// [`ConfigError::Conflict`] (field `model_type`) for a text model type this crate does
    /// not know (e.g. `exaone4`, whose q/k norm and NoPE layers are not read): `Ok(None)`
    /// always means "no per-head norm". [`ConfigError::Conflict`] for a norm the per-head
    /// op cannot represent: OLMo 2 / 3 and
    /// OLMoE (`model_type`: their q/k norms span all heads, `Olmo2RMSNorm(num_heads *
    /// head_dim)`), `use_qk_norm: true` on a model type other than Llama 4 (field
    /// `use_qk_norm`: e.g. Cohere's per-head LayerNorm); [`ConfigError::Invalid`] (field
    /// `rms_norm_eps`, [`RopeError::InvalidNormEps`]) for an eps that is not finite and
    /// `>= 0` in f32.
    pub fn qk_norm(&self) -> Result<Option<QkNormSpec>, ConfigError> {
        let t = self.text_model_type.as_str();
        let (kind, default_eps) = match t {
            "qwen3" | "qwen3_moe" | "qwen3_vl" | "qwen3_vl_text" | "qwen3_vl_moe" | "qwen3_vl_moe_text" => {
                (Some(QkNormKind::RmsBefore(WeightOffset::Zero)), 1e-6)
            }
            "gemma3_text" | "gemma3" => (Some(QkNormKind::RmsBefore(WeightOffset::One)), 1e-6),
            // `Qwen3NextRMSNorm`: `(1 + weight)`, eps 1e-6 (`Qwen3NextConfig`).
            "qwen3_next" => (Some(QkNormKind::RmsBefore(WeightOffset::One)), 1e-6),
            "llama4_text" | "llama4" => {
                (self.use_qk_norm.unwrap_or(false).then_some(QkNormKind::L2After), 1e-5)
            }
            "olmo2" | "olmo3" | "olmoe" => {
                return Err(ConfigError::Conflict {
                    field: "model_type".into(),
                    message: format!(
                    "`{t}` normalises q and k over all heads together (Olmo2RMSNorm(num_heads * head_dim)); \
                         the fused per-head QK norm cannot represent it"
                ),
                })
            }
            _ if self.use_qk_norm == Some(true) => {
                return Err(ConfigError::Conflict {
                    field: "use_qk_norm".into(),
                    message: format!("the q/k norm of model type `{t}` is not one this crate represents"),
                })
            }
            _ if NO_QK_NORM_TYPES.contains(&t) => (None, 0.0),
            _ => {
                return Err(ConfigError::Conflict {
                    field: "model_type".into(),
                    message: format!(
                        "whether model type `{t}` has a per-head q/k norm is not known to this crate"
                    ),
                })
            }
        };
        let Some(kind) = kind else { return Ok(None) };
        let eps64 = self.rms_norm_eps.unwrap_or(default_eps);
        let eps = eps64 as f32;
        if !eps.is_finite() || eps < 0.0 {
            return Err(ConfigError::Invalid {
                field: "rms_norm_eps".into(),
                error: RopeError::InvalidNormEps,
            });
        }
        Ok(Some(QkNormSpec { kind, eps, head_dim: self.head_dim }))
    }

    /// The q/k norm of layer `layer` ([`ModelConfig::qk_norm`]): `None` also for a layer past
    /// `num_hidden_layers` and, for the norm after RoPE (Llama 4), on a layer without RoPE
    /// (transformers builds `Llama4TextL2Norm` only where `use_rope`).
    ///
    /// # Errors
    /// Those of [`ModelConfig::qk_norm`].
    pub fn qk_norm_for_layer(&self, layer: usize) -> Result<Option<QkNormSpec>, ConfigError> {
        let Some(spec) = self.qk_norm()? else { return Ok(None) };
        if self.num_hidden_layers.is_some_and(|n| layer >= n) || (spec.after_rope() && !self.uses_rope(layer))
        {
            return Ok(None);
        }
        // Qwen3-Next: `linear_attention` layers (Gated DeltaNet) have no q/k norm of this form.
        if matches!(self.layer_types.get(layer), Some(LayerType::Other(_))) {
            return Ok(None);
        }
        Ok(Some(spec))
    }
}
