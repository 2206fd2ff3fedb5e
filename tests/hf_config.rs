//! The `config.json` loader: every real config in tests/data/configs, and malformed input.
//! One test binary; the topics are its modules, in tests/hf_config/ (`#[path]`: this root is
//! a file of tests/, and CI lists the test binaries as tests/*.rs).
#![cfg(feature = "hf-config")]

use rope_kernels::hf_config::{ConfigError, LayerType, ModelConfig, MropeSpec, VisionAxis};
use rope_kernels::{Frequencies, PairLayout, Rope, RopeError, Scaling};

/// Errors and warnings: each names the field.
#[path = "hf_config/errors.rs"]
mod errors;
/// Layer types, NoPE layers, per-layer-type RoPE, per-head q/k norm.
#[path = "hf_config/layers.rs"]
mod layers;
/// MRoPE sections, the vision encoder's 2-D RoPE, video positions.
#[path = "hf_config/multimodal.rs"]
mod multimodal;
/// Every file in tests/data/configs: what it loads to, field by field.
#[path = "hf_config/real_configs.rs"]
mod real_configs;

fn load(name: &str) -> ModelConfig {
    let path = format!("{}/tests/data/configs/{name}", env!("CARGO_MANIFEST_DIR"));
    ModelConfig::from_path(&path).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn parse_err(json: &str) -> ConfigError {
    ModelConfig::from_json_str(json).expect_err(json)
}

fn missing(field: &str) -> ConfigError {
    ConfigError::Missing { field: field.to_string() }
}

fn malformed(field: &str, expected: &'static str) -> ConfigError {
    ConfigError::Malformed { field: field.to_string(), expected }
}

fn invalid(field: &str, error: RopeError) -> ConfigError {
    ConfigError::Invalid { field: field.to_string(), error }
}

const BASE: &str = r#""model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32"#;

fn with(extra: &str) -> String {
    format!("{{{BASE}{}{extra}}}", if extra.is_empty() { "" } else { ", " })
}

/// A Qwen2-VL text part (head_dim 128), the model type that reads `mrope_section`.
const VL_BASE: &str = r#""model_type": "qwen2_vl", "hidden_size": 4096, "num_attention_heads": 32"#;

fn vl_with(extra: &str) -> String {
    format!("{{{VL_BASE}{}{extra}}}", if extra.is_empty() { "" } else { ", " })
}

fn conflict_field(json: &str) -> String {
    match parse_err(json) {
        ConfigError::Conflict { field, message } => {
            assert!(!message.is_empty());
            field
        }
        other => panic!("{json}: not a conflict: {other:?}"),
    }
}
