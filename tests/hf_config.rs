//! The `config.json` loader: every real config in tests/data/configs, and malformed input.
#![cfg(feature = "hf-config")]

use rope_kernels::hf_config::{ConfigError, LayerType, ModelConfig, MropeSpec, VisionAxis};
use rope_kernels::{Frequencies, Layout, Rope, RopeError, Scaling};

fn load(name: &str) -> ModelConfig {
    let path = format!("{}/tests/data/configs/{name}", env!("CARGO_MANIFEST_DIR"));
    ModelConfig::from_path(&path).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// (file, model_type, heads, kv heads, head_dim, rotary_dim, layout, theta, scaling name)
/// of the main (`full_attention`) configuration.
type Expected = (&'static str, &'static str, usize, usize, usize, usize, Layout, f64, &'static str);

const EXPECTED: [Expected; 24] = [
    ("deepseek-v2-lite.json", "deepseek_v2", 16, 16, 64, 64, Layout::Interleaved, 10_000.0, "yarn"),
    ("gemma-3-1b-it-published.json", "gemma3_text", 4, 1, 256, 256, Layout::HalfSplit, 1e6, "default"),
    ("gemma-3-1b-it-resaved.json", "gemma3_text", 4, 1, 256, 256, Layout::HalfSplit, 1e6, "default"),
    ("gemma-3-27b-it-published.json", "gemma3", 32, 16, 128, 128, Layout::HalfSplit, 1e6, "linear"),
    ("gemma-3-27b-it-resaved.json", "gemma3", 32, 16, 128, 128, Layout::HalfSplit, 1e6, "linear"),
    ("gpt-j-6b.json", "gptj", 16, 16, 256, 64, Layout::Interleaved, 10_000.0, "default"),
    ("gpt-neox-20b.json", "gpt_neox", 64, 64, 96, 24, Layout::HalfSplit, 10_000.0, "default"),
    ("gpt-oss-20b.json", "gpt_oss", 64, 8, 64, 64, Layout::HalfSplit, 150_000.0, "yarn"),
    ("llama-2-7b.json", "llama", 32, 32, 128, 128, Layout::HalfSplit, 10_000.0, "default"),
    ("llama-3.1-8b.json", "llama", 32, 8, 128, 128, Layout::HalfSplit, 500_000.0, "llama3"),
    (
        "llama-4-scout-17b-16e-instruct-published.json",
        "llama4",
        40,
        8,
        128,
        128,
        Layout::Interleaved,
        5e5,
        "llama3",
    ),
    (
        "llama-4-scout-17b-16e-instruct-resaved.json",
        "llama4",
        40,
        8,
        128,
        128,
        Layout::Interleaved,
        5e5,
        "llama3",
    ),
    ("mistral-7b-v0.1.json", "mistral", 32, 8, 128, 128, Layout::HalfSplit, 10_000.0, "default"),
    ("phi-2.json", "phi", 32, 32, 80, 32, Layout::HalfSplit, 10_000.0, "default"),
    ("phi-3-128k-su.json", "phi3", 32, 32, 96, 96, Layout::HalfSplit, 10_000.0, "longrope"),
    ("qwen2-vl-7b-instruct-published.json", "qwen2_vl", 28, 4, 128, 128, Layout::HalfSplit, 1e6, "default"),
    ("qwen2-vl-7b-instruct-resaved.json", "qwen2_vl", 28, 4, 128, 128, Layout::HalfSplit, 1e6, "default"),
    ("qwen2.5-7b-instruct-yarn.json", "qwen2", 28, 4, 128, 128, Layout::HalfSplit, 1_000_000.0, "yarn"),
    (
        "qwen2.5-vl-7b-instruct-published.json",
        "qwen2_5_vl",
        28,
        4,
        128,
        128,
        Layout::HalfSplit,
        1e6,
        "default",
    ),
    ("qwen2.5-vl-7b-instruct-resaved.json", "qwen2_5_vl", 28, 4, 128, 128, Layout::HalfSplit, 1e6, "default"),
    ("qwen3-8b-published.json", "qwen3", 32, 8, 128, 128, Layout::HalfSplit, 1e6, "default"),
    ("qwen3-8b-resaved.json", "qwen3", 32, 8, 128, 128, Layout::HalfSplit, 1e6, "default"),
    ("qwen3-vl-8b-instruct-published.json", "qwen3_vl", 32, 8, 128, 128, Layout::HalfSplit, 5e6, "default"),
    ("qwen3-vl-8b-instruct-resaved.json", "qwen3_vl", 32, 8, 128, 128, Layout::HalfSplit, 5e6, "default"),
];

/// Every config file and what it loads to, in one line: the text model type, GQA heads,
/// each layer type (its layers, theta, rotary_dim, layout, scaling), the layers without
/// RoPE, qk norm, MRoPE, the vision RoPE, and the warnings.
const SUMMARIES: [(&str, &str); 24] = [
    ("deepseek-v2-lite.json", "deepseek_v2 heads 16/16 | full_attention (all): theta 10000 rotary_dim 64/64 Interleaved yarn"),
    (
        "gemma-3-1b-it-published.json",
        "gemma3_text heads 4/1 | sliding_attention (22 of 26, first 0): theta 10000 rotary_dim 256/256 HalfSplit default | full_attention (4 of 26, first 5): theta 1000000 rotary_dim 256/256 HalfSplit default",
    ),
    (
        "gemma-3-1b-it-resaved.json",
        "gemma3_text heads 4/1 | sliding_attention (22 of 26, first 0): theta 10000 rotary_dim 256/256 HalfSplit default | full_attention (4 of 26, first 5): theta 1000000 rotary_dim 256/256 HalfSplit default",
    ),
    (
        "gemma-3-27b-it-published.json",
        "gemma3_text heads 32/16 | sliding_attention (52 of 62, first 0): theta 10000 rotary_dim 128/128 HalfSplit default | full_attention (10 of 62, first 5): theta 1000000 rotary_dim 128/128 HalfSplit linear x8",
    ),
    (
        "gemma-3-27b-it-resaved.json",
        "gemma3_text heads 32/16 | sliding_attention (52 of 62, first 0): theta 10000 rotary_dim 128/128 HalfSplit default | full_attention (10 of 62, first 5): theta 1000000 rotary_dim 128/128 HalfSplit linear x8",
    ),
    ("gpt-j-6b.json", "gptj heads 16/16 | full_attention (all): theta 10000 rotary_dim 64/256 Interleaved default"),
    ("gpt-neox-20b.json", "gpt_neox heads 64/64 | full_attention (all): theta 10000 rotary_dim 24/96 HalfSplit default"),
    ("gpt-oss-20b.json", "gpt_oss heads 64/8 | full_attention (all): theta 150000 rotary_dim 64/64 HalfSplit yarn"),
    ("llama-2-7b.json", "llama heads 32/32 | full_attention (all): theta 10000 rotary_dim 128/128 HalfSplit default"),
    ("llama-3.1-8b.json", "llama heads 32/8 | full_attention (all): theta 500000 rotary_dim 128/128 HalfSplit llama3"),
    (
        "llama-4-scout-17b-16e-instruct-published.json",
        "llama4_text heads 40/8 | chunked_attention (36 of 48, first 0): theta 500000 rotary_dim 128/128 Interleaved llama3 | full_attention (12 of 48, first 3): theta 500000 rotary_dim 128/128 Interleaved llama3 | no RoPE: [3, 7, 11, 15, 19, 23, 27, 31, 35, 39, 43, 47] | qk_norm true | vision llama4_vision_model: head_dim 88, theta 10000, Interleaved, [Col, Row] + 1, merge None",
    ),
    (
        "llama-4-scout-17b-16e-instruct-resaved.json",
        "llama4_text heads 40/8 | chunked_attention (36 of 48, first 0): theta 500000 rotary_dim 128/128 Interleaved llama3 | full_attention (12 of 48, first 3): theta 500000 rotary_dim 128/128 Interleaved llama3 | no RoPE: [3, 7, 11, 15, 19, 23, 27, 31, 35, 39, 43, 47] | qk_norm true | vision llama4_vision_model: head_dim 88, theta 10000, Interleaved, [Col, Row] + 1, merge None",
    ),
    ("mistral-7b-v0.1.json", "mistral heads 32/8 | full_attention (all): theta 10000 rotary_dim 128/128 HalfSplit default"),
    ("phi-2.json", "phi heads 32/32 | full_attention (all): theta 10000 rotary_dim 32/80 HalfSplit default"),
    ("phi-3-128k-su.json", "phi3 heads 32/32 | full_attention (all): theta 10000 rotary_dim 96/96 HalfSplit longrope"),
    (
        "qwen2-vl-7b-instruct-published.json",
        "qwen2_vl heads 28/4 | full_attention (28 of 28, first 0): theta 1000000 rotary_dim 128/128 HalfSplit default | mrope [16, 24, 24] sectioned | vision qwen2_vl_vision: head_dim 80, theta 10000, HalfSplit, [Row, Col] + 0, merge Some(2)",
    ),
    (
        "qwen2-vl-7b-instruct-resaved.json",
        "qwen2_vl_text heads 28/4 | full_attention (28 of 28, first 0): theta 1000000 rotary_dim 128/128 HalfSplit default | mrope [16, 24, 24] sectioned | vision qwen2_vl_vision: head_dim 80, theta 10000, HalfSplit, [Row, Col] + 0, merge Some(2)",
    ),
    ("qwen2.5-7b-instruct-yarn.json", "qwen2 heads 28/4 | full_attention (all): theta 1000000 rotary_dim 128/128 HalfSplit yarn"),
    (
        "qwen2.5-vl-7b-instruct-published.json",
        "qwen2_5_vl heads 28/4 | full_attention (28 of 28, first 0): theta 1000000 rotary_dim 128/128 HalfSplit default | mrope [16, 24, 24] sectioned | vision qwen2_5_vl_vision: head_dim 80, theta 10000, HalfSplit, [Row, Col] + 0, merge Some(2)",
    ),
    (
        "qwen2.5-vl-7b-instruct-resaved.json",
        "qwen2_5_vl_text heads 28/4 | full_attention (28 of 28, first 0): theta 1000000 rotary_dim 128/128 HalfSplit default | mrope [16, 24, 24] sectioned | vision qwen2_5_vl_vision: head_dim 80, theta 10000, HalfSplit, [Row, Col] + 0, merge Some(2)",
    ),
    ("qwen3-8b-published.json", "qwen3 heads 32/8 | full_attention (36 of 36, first 0): theta 1000000 rotary_dim 128/128 HalfSplit default"),
    ("qwen3-8b-resaved.json", "qwen3 heads 32/8 | full_attention (36 of 36, first 0): theta 1000000 rotary_dim 128/128 HalfSplit default"),
    (
        "qwen3-vl-8b-instruct-published.json",
        "qwen3_vl_text heads 32/8 | full_attention (36 of 36, first 0): theta 5000000 rotary_dim 128/128 HalfSplit default | mrope [24, 20, 20] interleaved | vision qwen3_vl: head_dim 72, theta 10000, HalfSplit, [Row, Col] + 0, merge Some(2)",
    ),
    (
        "qwen3-vl-8b-instruct-resaved.json",
        "qwen3_vl_text heads 32/8 | full_attention (36 of 36, first 0): theta 5000000 rotary_dim 128/128 HalfSplit default | mrope [24, 20, 20] interleaved | vision qwen3_vl_vision: head_dim 72, theta 10000, HalfSplit, [Row, Col] + 0, merge Some(2)",
    ),
];

/// The one-line summary of [`SUMMARIES`].
fn summary(m: &ModelConfig) -> String {
    let mut s = format!("{} heads {}/{}", m.text_model_type, m.num_attention_heads, m.num_key_value_heads);
    for l in &m.layer_ropes {
        let layers: Vec<usize> = m.layers_of_type(&l.layer_type).collect();
        let which = if m.layer_types.is_empty() {
            "all".to_string()
        } else {
            format!("{} of {}, first {}", layers.len(), m.layer_types.len(), layers[0])
        };
        let r = &l.rope;
        let scaling = match &r.scaling {
            Scaling::Linear { factor } => format!("linear x{factor}"),
            other => other.name().to_string(),
        };
        s += &format!(
            " | {} ({which}): theta {} rotary_dim {}/{} {:?} {scaling}",
            l.layer_type, r.theta, r.rotary_dim, r.head_dim, r.layout
        );
    }
    if let Some(list) = &m.no_rope_layers {
        let nope: Vec<usize> = (0..list.len()).filter(|&i| !list[i]).collect();
        s += &format!(" | no RoPE: {nope:?}");
    }
    if let Some(q) = m.use_qk_norm {
        s += &format!(" | qk_norm {q}");
    }
    if let Some(mr) = &m.mrope {
        let kind = if mr.interleaved { "interleaved" } else { "sectioned" };
        s += &format!(" | mrope {:?} {kind}", mr.mrope_section);
    }
    if let Some(v) = &m.vision {
        s += &format!(
            " | vision {}: head_dim {}, theta {}, {:?}, {:?} + {}, merge {:?}",
            v.model_type, v.head_dim, v.theta, v.layout, v.axes, v.position_offset, v.spatial_merge_size
        );
    }
    for w in m.warnings() {
        s += &format!(" | warning: {w}");
    }
    s
}

#[test]
fn every_config_file_loads() {
    let dir = format!("{}/tests/data/configs", env!("CARGO_MANIFEST_DIR"));
    let mut seen = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "json") {
            let m = ModelConfig::from_path(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            assert!(m.rope.validate().is_ok());
            for l in &m.layer_ropes {
                assert!(Rope::new(l.rope.clone()).is_ok(), "{}: {}", path.display(), l.layer_type);
            }
            seen.push(path.file_name().unwrap().to_str().unwrap().to_string());
        }
    }
    seen.sort();
    let listed: Vec<&str> = SUMMARIES.iter().map(|(f, _)| *f).collect();
    assert_eq!(seen, listed, "every file in tests/data/configs has a summary below, and only those");
}

/// The table of what every config loads to (issue 15: "a test lists every config in
/// tests/data/configs with what it loads to").
#[test]
fn what_each_config_loads_to() {
    for (file, want) in SUMMARIES {
        let got = summary(&load(file));
        assert_eq!(got, want, "{file}");
    }
}

#[test]
fn dims_layout_and_scaling_of_each_config() {
    for (file, model_type, heads, kv, head_dim, rotary_dim, layout, theta, scaling) in EXPECTED {
        let m = load(file);
        assert_eq!(m.model_type, model_type, "{file}");
        assert_eq!((m.num_attention_heads, m.num_key_value_heads), (heads, kv), "{file}");
        assert_eq!(
            (m.head_dim, m.rope.head_dim, m.rope.rotary_dim),
            (head_dim, head_dim, rotary_dim),
            "{file}"
        );
        assert_eq!(m.rope.layout, layout, "{file}");
        assert_eq!(m.rope.theta, theta, "{file}");
        assert_eq!(m.rope.scaling.name(), scaling, "{file}");
    }
}

fn attention_factor(m: &ModelConfig) -> f64 {
    Frequencies::new(&m.rope, 0).unwrap().attention_factor()
}

#[test]
fn scaling_parameters_of_each_config() {
    let m = load("llama-3.1-8b.json");
    assert_eq!(
        m.rope.scaling,
        Scaling::Llama3 {
            factor: 8.0,
            low_freq_factor: 1.0,
            high_freq_factor: 4.0,
            original_max_position_embeddings: 8192
        }
    );
    assert_eq!(m.max_position_embeddings, Some(131_072));

    let m = load("qwen2.5-7b-instruct-yarn.json");
    let Scaling::Yarn(y) = &m.rope.scaling else { panic!("{:?}", m.rope.scaling) };
    assert_eq!((y.factor, y.original_max_position_embeddings, y.truncate), (4.0, 32768, true));
    assert_eq!((y.beta_fast, y.beta_slow), (32.0, 1.0));
    assert!((attention_factor(&m) - (0.1 * 4f64.ln() + 1.0)).abs() < 1e-15);

    let m = load("gpt-oss-20b.json");
    let Scaling::Yarn(y) = &m.rope.scaling else { panic!() };
    assert_eq!((y.factor, y.original_max_position_embeddings, y.truncate), (32.0, 4096, false));
    assert!((attention_factor(&m) - 1.3465736).abs() < 5e-8);

    let m = load("deepseek-v2-lite.json");
    let Scaling::Yarn(y) = &m.rope.scaling else { panic!() };
    assert_eq!((y.factor, y.mscale, y.mscale_all_dim), (40.0, Some(0.707), Some(0.707)));
    assert_eq!(attention_factor(&m), 1.0);
    assert_eq!(m.nope_head_dim, 128);

    let m = load("phi-3-128k-su.json");
    assert_eq!(m.scaling_name, "su");
    let Scaling::LongRope(p) = &m.rope.scaling else { panic!() };
    assert_eq!((p.original_max_position_embeddings, p.factor), (4096, 32.0));
    assert_eq!((p.short_factor.len(), p.long_factor.len()), (48, 48));
    assert_eq!(p.long_factor.as_slice()[0], 1.0299999713897705);
    assert!((attention_factor(&m) - (1.0 + 32f64.ln() / 4096f64.ln()).sqrt()).abs() < 1e-15);

    let m = load("gpt-j-6b.json");
    assert_eq!(m.max_position_embeddings, Some(2048)); // n_positions
    assert_eq!(m.nope_head_dim, 0);
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

#[test]
fn minimal_config_and_spellings() {
    let m = ModelConfig::from_json_str(&with("")).unwrap();
    assert_eq!((m.head_dim, m.rope.rotary_dim, m.num_key_value_heads), (128, 128, 32));
    assert_eq!(
        (m.rope.theta, m.rope.scaling.clone(), m.scaling_name.as_str()),
        (10_000.0, Scaling::None, "default")
    );
    // transformers 5 `rope_parameters` with theta and partial_rotary_factor inside.
    let m = ModelConfig::from_json_str(&with(
        r#""rope_parameters": {"rope_type": "linear", "factor": 2, "rope_theta": 1e6, "partial_rotary_factor": 0.5}"#,
    ))
    .unwrap();
    assert_eq!(
        (m.rope.theta, m.rope.rotary_dim, m.rope.scaling.clone()),
        (1e6, 64, Scaling::Linear { factor: 2.0 })
    );
    // Dynamic NTK, and HunYuan's alpha.
    let m = ModelConfig::from_json_str(&with(
        r#""max_position_embeddings": 4096, "rope_scaling": {"type": "dynamic", "factor": 2.0}"#,
    ))
    .unwrap();
    assert_eq!(m.rope.scaling, Scaling::DynamicNtk { factor: 2.0, max_position_embeddings: 4096 });
    let m = ModelConfig::from_json_str(&with(
        r#""rope_scaling": {"type": "dynamic", "alpha": 1000.0, "factor": 1.0}"#,
    ))
    .unwrap();
    assert_eq!(m.rope.scaling, Scaling::NtkAlpha { alpha: 1000.0 });
    // YaRN without factor: max / original; beta 0 means the default; explicit attention factor.
    let m = ModelConfig::from_json_str(&with(
        r#""max_position_embeddings": 163840, "rope_scaling": {"rope_type": "yarn",
            "original_max_position_embeddings": 4096, "beta_fast": 0, "attention_factor": 0.5}"#,
    ))
    .unwrap();
    let Scaling::Yarn(y) = &m.rope.scaling else { panic!() };
    assert_eq!((y.factor, y.beta_fast, y.attention_factor), (40.0, 32.0, Some(0.5)));
    // Proportional (Gemma 4): rotary_dim stays head_dim.
    let m = ModelConfig::from_json_str(&with(
        r#""head_dim": 256, "rope_parameters": {"rope_type": "proportional", "partial_rotary_factor": 0.25, "rope_theta": 1e6}"#,
    ))
    .unwrap();
    assert_eq!(m.rope.rotary_dim, 256);
    assert_eq!(m.rope.scaling, Scaling::Proportional { factor: 1.0, partial_rotary_factor: 0.25 });
    // DeepSeek-V3 interleaves unless told otherwise.
    let v3 = r#"{"model_type": "deepseek_v3", "num_attention_heads": 128, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128"#;
    assert_eq!(ModelConfig::from_json_str(&format!("{v3}}}")).unwrap().rope.layout, Layout::Interleaved);
    let flat = format!("{v3}, \"rope_interleave\": false}}");
    assert_eq!(ModelConfig::from_json_str(&flat).unwrap().rope.layout, Layout::HalfSplit);
}

#[test]
fn malformed_inputs_name_the_field() {
    assert!(matches!(parse_err("{"), ConfigError::Json { .. }));
    assert_eq!(parse_err("[1, 2]"), ConfigError::NotAnObject);
    assert_eq!(parse_err(r#"{"hidden_size": 64, "num_attention_heads": 4}"#), missing("model_type"));
    assert_eq!(parse_err(r#"{"model_type": "llama", "hidden_size": 64}"#), missing("num_attention_heads"));
    assert_eq!(parse_err(r#"{"model_type": "llama", "num_attention_heads": 4}"#), missing("hidden_size"));
    assert_eq!(
        parse_err(r#"{"model_type": "llama", "hidden_size": 64, "num_attention_heads": "4"}"#),
        malformed("num_attention_heads", "an integer > 0")
    );
    assert_eq!(
        parse_err(r#"{"model_type": "llama", "hidden_size": 64, "num_attention_heads": 0}"#),
        malformed("num_attention_heads", "an integer > 0")
    );
    assert_eq!(parse_err(&with(r#""head_dim": 12.5"#)), malformed("head_dim", "an integer > 0"));
    assert_eq!(
        parse_err(&with(r#""num_key_value_heads": 5"#)),
        malformed("num_key_value_heads", "a divisor of num_attention_heads")
    );
    assert_eq!(parse_err(&with(r#""rope_theta": "big""#)), malformed("rope_theta", "a number"));
    assert_eq!(parse_err(&with(r#""rope_scaling": 4"#)), malformed("rope_scaling", "an object or null"));
    assert_eq!(
        parse_err(&with(r#""rope_scaling": {"type": 8}"#)),
        malformed("rope_scaling.type", "a string")
    );
    assert_eq!(
        parse_err(&with(
            r#""rope_parameters": {"full_attention": {"rope_type": "default"}, "rope_theta": 5}"#
        )),
        malformed("rope_parameters", "one parameter object, or one object per layer type")
    );
    assert_eq!(
        parse_err(&with(r#""partial_rotary_factor": 1.5"#)),
        malformed("partial_rotary_factor", "a number in (0, 1]")
    );
}

#[test]
fn unsupported_rope_type_names_the_type() {
    let e = parse_err(&with(r#""rope_scaling": {"rope_type": "fancy-new-rope"}"#));
    assert_eq!(e, ConfigError::UnsupportedRopeType { rope_type: "fancy-new-rope".to_string() });
    assert_eq!(e.to_string(), "unsupported rope scaling type `fancy-new-rope`");
}

#[test]
fn missing_scaling_parameters() {
    assert_eq!(parse_err(&with(r#""rope_scaling": {"type": "linear"}"#)), missing("rope_scaling.factor"));
    assert_eq!(
        parse_err(&with(
            r#""rope_scaling": {"rope_type": "llama3", "factor": 8, "high_freq_factor": 4, "original_max_position_embeddings": 8192}"#
        )),
        missing("rope_scaling.low_freq_factor")
    );
    assert_eq!(
        parse_err(&with(r#""rope_scaling": {"type": "dynamic", "factor": 2}"#)),
        missing("max_position_embeddings")
    );
    assert_eq!(
        parse_err(&with(r#""rope_scaling": {"type": "yarn", "factor": 4}"#)),
        missing("rope_scaling.original_max_position_embeddings")
    );
    assert_eq!(
        parse_err(&with(r#""rope_scaling": {"type": "su", "short_factor": [1.0]}"#)),
        missing("rope_scaling.long_factor")
    );
    assert_eq!(
        parse_err(&with(
            r#""rope_scaling": {"type": "longrope", "short_factor": [1, "x"], "long_factor": [1]}"#
        )),
        malformed("rope_scaling.short_factor", "an array of numbers")
    );
}

#[test]
fn invalid_values_name_the_field() {
    assert_eq!(
        parse_err(&with(r#""rope_scaling": {"type": "linear", "factor": 0}"#)),
        invalid("rope_scaling.factor", RopeError::InvalidScalingParameter { name: "factor" })
    );
    assert_eq!(
        parse_err(&with(
            r#""rope_scaling": {"rope_type": "llama3", "factor": 8, "low_freq_factor": 4, "high_freq_factor": 1, "original_max_position_embeddings": 8192}"#
        )),
        invalid(
            "rope_scaling.low_freq_factor",
            RopeError::InvalidScalingParameter { name: "low_freq_factor" }
        )
    );
    assert_eq!(
        parse_err(&with(
            r#""rope_scaling": {"rope_type": "yarn", "factor": 4, "original_max_position_embeddings": 0}"#
        )),
        invalid(
            "rope_scaling.original_max_position_embeddings",
            RopeError::InvalidScalingParameter { name: "original_max_position_embeddings" }
        )
    );
    // Without a `factor` the fallback would divide by the zero: the error names the zero,
    // not a missing `factor` (issue 16), wherever it was written.
    assert_eq!(
        parse_err(&with(
            r#""max_position_embeddings": 8192, "rope_scaling": {"rope_type": "yarn", "original_max_position_embeddings": 0}"#
        )),
        invalid(
            "rope_scaling.original_max_position_embeddings",
            RopeError::InvalidScalingParameter { name: "original_max_position_embeddings" }
        )
    );
    assert_eq!(
        parse_err(&with(r#""rope_scaling": {"rope_type": "yarn", "original_max_position_embeddings": 0}"#)),
        invalid(
            "rope_scaling.original_max_position_embeddings",
            RopeError::InvalidScalingParameter { name: "original_max_position_embeddings" }
        )
    );
    assert_eq!(
        parse_err(&with(
            r#""max_position_embeddings": 8192, "original_max_position_embeddings": 0, "rope_scaling": {"type": "longrope", "short_factor": [1], "long_factor": [1]}"#
        )),
        invalid(
            "original_max_position_embeddings",
            RopeError::InvalidScalingParameter { name: "original_max_position_embeddings" }
        )
    );
    // Llama 3 too: a top-level zero is named where it was written.
    assert_eq!(
        parse_err(&with(
            r#""original_max_position_embeddings": 0, "rope_scaling": {"rope_type": "llama3", "factor": 8, "low_freq_factor": 1, "high_freq_factor": 4}"#
        )),
        invalid(
            "original_max_position_embeddings",
            RopeError::InvalidScalingParameter { name: "original_max_position_embeddings" }
        )
    );
    assert_eq!(
        parse_err(&with(r#""max_position_embeddings": 0, "rope_scaling": {"rope_type": "yarn"}"#)),
        invalid(
            "max_position_embeddings",
            RopeError::InvalidScalingParameter { name: "original_max_position_embeddings" }
        )
    );
    assert_eq!(
        parse_err(&with(
            r#""rope_scaling": {"rope_type": "yarn", "factor": 4, "original_max_position_embeddings": 4096, "beta_fast": 1, "beta_slow": 2}"#
        )),
        invalid("rope_scaling.beta_fast", RopeError::InvalidScalingParameter { name: "beta_fast" })
    );
    // 128 pairs expected (head_dim 256 here), 2 given.
    assert_eq!(
        parse_err(&with(
            r#""head_dim": 256, "max_position_embeddings": 8192, "rope_scaling": {"type": "longrope", "short_factor": [1, 1], "long_factor": [1, 1], "original_max_position_embeddings": 4096}"#
        )),
        invalid("rope_scaling.short_factor", RopeError::InvalidScalingParameter { name: "short_factor" })
    );
    assert_eq!(parse_err(&with(r#""rope_theta": -5"#)), invalid("rope_theta", RopeError::InvalidTheta));
    // head_dim 400 / 4 = 100; floor(100 * 0.25) = 25 is odd.
    assert_eq!(
        parse_err(
            r#"{"model_type": "phi", "hidden_size": 400, "num_attention_heads": 4, "partial_rotary_factor": 0.25}"#
        ),
        invalid("partial_rotary_factor", RopeError::InvalidRotaryDim { rotary_dim: 25 })
    );
    assert_eq!(
        parse_err(&with(r#""rotary_dim": 256"#)),
        invalid("rotary_dim", RopeError::RotaryDimExceedsHeadDim { rotary_dim: 256, head_dim: 128 })
    );
    assert_eq!(
        parse_err(&with(r#""max_position_embeddings": 0, "rope_scaling": {"type": "dynamic", "factor": 2}"#)),
        invalid(
            "max_position_embeddings",
            RopeError::InvalidScalingParameter { name: "max_position_embeddings" }
        )
    );
    let e = parse_err(&with(r#""rope_scaling": {"type": "linear", "factor": -1}"#));
    assert_eq!(e.to_string(), "field `rope_scaling.factor`: invalid rope scaling parameter `factor`");
    assert!(std::error::Error::source(&e).is_some());
}

#[test]
fn io_error_names_the_path() {
    let e = ModelConfig::from_path("/nonexistent/config.json").unwrap_err();
    assert!(matches!(&e, ConfigError::Io { path, .. } if path == "/nonexistent/config.json"), "{e:?}");
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

/// Issue 15: the re-saved Qwen2.5-VL form (`rope_type: default` + `mrope_section`) is
/// MRoPE, not plain 1-D RoPE; so are `type: mrope` and Qwen3-VL's interleaved form.
#[test]
fn mrope_is_read_in_every_spelling() {
    let m = ModelConfig::from_json_str(&vl_with(
        r#""rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]}"#,
    ))
    .unwrap();
    assert_eq!(m.mrope, Some(MropeSpec { mrope_section: [16, 24, 24], interleaved: false }));
    assert_eq!((m.rope.scaling.clone(), m.scaling_name.as_str()), (Scaling::None, "mrope"));
    let m = ModelConfig::from_json_str(&vl_with(
        r#""rope_parameters": {"rope_type": "default", "mrope_section": [16, 24, 24], "rope_theta": 1e6}"#,
    ))
    .unwrap();
    assert_eq!(m.mrope.map(|s| s.mrope_section), Some([16, 24, 24]));
    let m = load("qwen2.5-vl-7b-instruct-resaved.json");
    assert_eq!(m.mrope, Some(MropeSpec { mrope_section: [16, 24, 24], interleaved: false }));
    let m = load("qwen3-vl-8b-instruct-published.json");
    assert_eq!(m.mrope, Some(MropeSpec { mrope_section: [24, 20, 20], interleaved: true }));
    assert!(load("qwen3-8b-published.json").mrope.is_none());
}

#[test]
fn mrope_errors_name_the_field() {
    // Sum of the sections: rotary_dim / 2 = 64.
    assert_eq!(
        conflict_field(&vl_with(r#""rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 16]}"#)),
        "rope_scaling.mrope_section"
    );
    // A layout that cannot carry it (Llama 4 rotates interleaved pairs).
    assert_eq!(
        conflict_field(
            r#"{"model_type": "llama4_text", "head_dim": 128, "num_attention_heads": 8, "num_hidden_layers": 4,
                "rope_scaling": {"rope_type": "default", "mrope_section": [16, 24, 24]}}"#
        ),
        "rope_scaling.mrope_section"
    );
    // Partial rotary: MRoPE rotates the whole head.
    assert_eq!(
        conflict_field(&vl_with(
            r#""partial_rotary_factor": 0.5, "rope_scaling": {"type": "mrope", "mrope_section": [8, 12, 12]}"#
        )),
        "rope_scaling.mrope_section"
    );
    // Interleaved sections must fit the 64 pairs: h at 1, 4, .. < 3 * 40.
    assert_eq!(
        conflict_field(
            &vl_with(r#""rope_scaling": {"rope_type": "default", "mrope_section": [4, 40, 20]}"#)
                .replacen("qwen2_vl", "qwen3_vl", 1)
        ),
        "rope_scaling.mrope_section"
    );
    assert_eq!(
        parse_err(&vl_with(r#""rope_scaling": {"type": "mrope"}"#)),
        missing("rope_scaling.mrope_section")
    );
    // Qwen2-VL cannot run without the section (HF indexes `rope_scaling["mrope_section"]`),
    // whatever the dict says, and without a dict.
    assert_eq!(
        parse_err(&vl_with(r#""rope_scaling": {"rope_type": "default", "mrope_interleaved": true}"#)),
        missing("rope_scaling.mrope_section")
    );
    assert_eq!(parse_err(&vl_with("")), missing("rope_scaling.mrope_section"));
    assert_eq!(
        parse_err(&vl_with(r#""model_type": "qwen2_5_vl", "rope_scaling": null"#).replacen(
            r#""model_type": "qwen2_vl", "#,
            "",
            1
        )),
        missing("rope_scaling.mrope_section")
    );
    assert_eq!(
        parse_err(&vl_with(r#""rope_scaling": {"type": "mrope", "mrope_section": [32, 32]}"#)),
        malformed("rope_scaling.mrope_section", "an array of 3 non-negative integers")
    );
    assert_eq!(
        parse_err(&vl_with(r#""rope_scaling": {"type": "mrope", "mrope_section": [16, -24, 24]}"#)),
        malformed("rope_scaling.mrope_section", "an array of 3 non-negative integers")
    );
    let e = parse_err(&vl_with(r#""rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 16]}"#));
    assert!(
        e.to_string()
            .starts_with("field `rope_scaling.mrope_section`: [16, 24, 16] must sum to rotary_dim / 2 = 64"),
        "{e}"
    );
}

/// An untyped rope dict with a parameter, and `rotary_dim` against `partial_rotary_factor`.
#[test]
fn strictness_errors_name_the_field() {
    assert_eq!(conflict_field(&with(r#""rope_scaling": {"factor": 8}"#)), "rope_scaling.factor");
    assert_eq!(
        conflict_field(
            r#"{"model_type": "gemma3", "text_config": {"head_dim": 128, "num_attention_heads": 8, "num_hidden_layers": 6, "rope_parameters": {"factor": 8}}}"#
        ),
        "text_config.rope_parameters.factor"
    );
    // Untyped with only theta: the default method.
    let m = ModelConfig::from_json_str(&with(r#""rope_parameters": {"rope_theta": 5e5}"#)).unwrap();
    assert_eq!((m.rope.theta, m.rope.scaling.clone()), (5e5, Scaling::None));
    // rotary_dim 64 with partial_rotary_factor 0.25 of head_dim 128 (= 32), and rotary_pct.
    assert_eq!(conflict_field(&with(r#""rotary_dim": 64, "partial_rotary_factor": 0.25"#)), "rotary_dim");
    assert_eq!(conflict_field(&with(r#""rotary_dim": 64, "rotary_pct": 0.25"#)), "rotary_dim");
    let m = ModelConfig::from_json_str(&with(r#""rotary_dim": 32, "partial_rotary_factor": 0.25"#)).unwrap();
    assert_eq!(m.rope.rotary_dim, 32);
    // Lists whose length is not the layer count.
    assert_eq!(
        conflict_field(&with(r#""num_hidden_layers": 4, "layer_types": ["full_attention"]"#)),
        "layer_types"
    );
    assert_eq!(
        conflict_field(
            r#"{"model_type": "llama4_text", "head_dim": 128, "num_attention_heads": 8, "num_hidden_layers": 4, "no_rope_layers": [1, 0]}"#
        ),
        "no_rope_layers"
    );
    assert_eq!(
        parse_err(&with(r#""no_rope_layers": [1, 2]"#)),
        malformed("no_rope_layers", "an array of 0 and 1")
    );
    assert_eq!(parse_err(&with(r#""text_config": 3"#)), malformed("text_config", "an object or null"));
    assert_eq!(
        parse_err(&with(r#""num_hidden_layers": 1000000000000"#)),
        malformed("num_hidden_layers", "an integer in 1..=65536")
    );
}

/// Unknown keys in a rope dict are warnings the caller can read, not errors.
#[test]
fn unknown_rope_keys_are_warnings() {
    let m = ModelConfig::from_json_str(&with(
        r#""rope_scaling": {"rope_type": "linear", "factor": 2, "foo": 1}"#,
    ))
    .unwrap();
    assert_eq!(m.warnings(), ["rope_scaling.foo: not read by rope type `linear`; ignored"]);
    let m = ModelConfig::from_json_str(&with(r#""rope_scaling": {"rope_type": "default", "factor": 2}"#))
        .unwrap();
    assert_eq!(m.warnings(), ["rope_scaling.factor: not read by rope type `default`; ignored"]);
    assert_eq!(m.rope.scaling, Scaling::None);
    // A top-level rope dict beside text_config is not read: said so.
    let m = ModelConfig::from_json_str(
        r#"{"model_type": "qwen2_vl", "rope_scaling": {"type": "mrope", "mrope_section": [16, 16, 32]},
            "text_config": {"hidden_size": 4096, "num_attention_heads": 32,
                            "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]}}}"#,
    )
    .unwrap();
    assert_eq!(
        m.warnings(),
        ["rope_scaling: at the top level beside text_config; text_config.rope_scaling is read"]
    );
    assert_eq!(m.mrope.map(|s| s.mrope_section), Some([16, 24, 24]));
    // Without its own, the text part has no section: HF Qwen2-VL cannot run.
    assert_eq!(
        parse_err(
            r#"{"model_type": "qwen2_vl", "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]},
                "text_config": {"hidden_size": 3584, "num_attention_heads": 28}}"#
        ),
        missing("text_config.rope_scaling.mrope_section")
    );
    // Every shipped config loads without a warning.
    for (file, ..) in EXPECTED {
        assert_eq!(load(file).warnings(), [] as [String; 0], "{file}");
    }
}

/// Gemma 2/3 and transformers 5 `rope_parameters` keyed by layer type.
#[test]
fn per_layer_type_rope() {
    // Gemma 3 27B as published: no rope_theta, no rope_local_base_freq (defaults 1e6 and
    // 1e4), linear x8 on the full layers only, every 6th layer full.
    for file in ["gemma-3-27b-it-published.json", "gemma-3-27b-it-resaved.json"] {
        let m = load(file);
        assert_eq!(m.layer_types.len(), 62, "{file}");
        assert_eq!(m.max_position_embeddings, Some(131_072), "{file}");
        for i in 0..62 {
            let r = m.rope_for_layer(i).unwrap();
            if (i + 1) % 6 == 0 {
                assert_eq!(m.layer_types[i], LayerType::FullAttention);
                assert_eq!(
                    (r.theta, r.scaling.clone()),
                    (1e6, Scaling::Linear { factor: 8.0 }),
                    "{file} {i}"
                );
            } else {
                assert_eq!(m.layer_types[i], LayerType::SlidingAttention);
                assert_eq!((r.theta, r.scaling.clone()), (1e4, Scaling::None), "{file} {i}");
            }
        }
        assert!(m.rope_for_layer(62).is_none());
        assert_eq!(m.rope_for_layer_type(&LayerType::SlidingAttention).map(|r| r.theta), Some(1e4));
    }
    // Gemma 3 1B's explicit fields give the same as its re-saved keyed form.
    let (a, b) = (load("gemma-3-1b-it-published.json"), load("gemma-3-1b-it-resaved.json"));
    assert_eq!(
        (a.layer_types.clone(), a.layer_ropes.clone()),
        (b.layer_types.clone(), b.layer_ropes.clone())
    );
    // Gemma 2: every other layer slides, with the same theta.
    let m = ModelConfig::from_json_str(
        r#"{"model_type": "gemma2", "head_dim": 256, "num_attention_heads": 8, "num_hidden_layers": 4}"#,
    )
    .unwrap();
    assert_eq!(
        m.layer_types,
        [
            LayerType::SlidingAttention,
            LayerType::FullAttention,
            LayerType::SlidingAttention,
            LayerType::FullAttention
        ]
    );
    assert_eq!(m.rope_for_layer(0), m.rope_for_layer(1));
    // A keyed dict must cover every layer type.
    assert_eq!(
        parse_err(&with(
            r#""layer_types": ["full_attention", "sliding_attention"], "rope_parameters": {"full_attention": {"rope_type": "default"}}"#
        )),
        missing("rope_parameters.sliding_attention")
    );
    // Errors inside an entry name it.
    assert_eq!(
        parse_err(&with(
            r#""rope_parameters": {"full_attention": {"rope_type": "linear", "factor": 0}, "sliding_attention": {"rope_type": "default"}}"#
        )),
        invalid(
            "rope_parameters.full_attention.factor",
            RopeError::InvalidScalingParameter { name: "factor" }
        )
    );
    // Nested names carry the path.
    assert_eq!(
        parse_err(
            r#"{"model_type": "gemma3", "text_config": {"head_dim": 128, "num_attention_heads": 8, "num_hidden_layers": 6, "rope_scaling": {"rope_type": "linear"}}}"#
        ),
        missing("text_config.rope_scaling.factor")
    );
    assert_eq!(
        parse_err(r#"{"model_type": "gemma3", "text_config": {"head_dim": 128}}"#),
        missing("text_config.num_attention_heads")
    );
}

/// Llama 4: interleaved pairs, llama3 with low == high, every 4th layer without RoPE.
#[test]
fn llama4_text() {
    for file in
        ["llama-4-scout-17b-16e-instruct-published.json", "llama-4-scout-17b-16e-instruct-resaved.json"]
    {
        let m = load(file);
        assert_eq!(m.rope.layout, Layout::Interleaved, "{file}");
        assert_eq!(
            m.rope.scaling,
            Scaling::Llama3 {
                factor: 16.0,
                low_freq_factor: 1.0,
                high_freq_factor: 1.0,
                original_max_position_embeddings: 8192
            }
        );
        let uses: Vec<bool> = (0..48).map(|i| m.uses_rope(i)).collect();
        assert_eq!(uses, (0..48).map(|i| (i + 1) % 4 != 0).collect::<Vec<_>>(), "{file}");
        assert!(m.rope_for_layer(3).is_none() && m.rope_for_layer(2).is_some());
        assert_eq!(m.use_qk_norm, Some(true));
        assert_eq!(m.rms_norm_eps, Some(1e-5));
    }
    // The default pattern follows `no_rope_layer_interval`.
    let m = ModelConfig::from_json_str(
        r#"{"model_type": "llama4_text", "head_dim": 64, "num_attention_heads": 4, "num_hidden_layers": 6, "no_rope_layer_interval": 2}"#,
    )
    .unwrap();
    assert_eq!(m.layers_without_rope(), [1, 3, 5]);
}

/// Vision RoPE from `vision_config`.
#[test]
fn vision_rope() {
    let v = load("qwen2-vl-7b-instruct-published.json").vision.unwrap();
    assert_eq!((v.head_dim, v.num_heads, v.theta, v.layout), (80, 16, 1e4, Layout::HalfSplit));
    assert_eq!(
        (v.axes, v.position_offset, v.spatial_merge_size),
        ([VisionAxis::Row, VisionAxis::Col], 0, Some(2))
    );
    assert_eq!(v.freqs_per_axis(), 20);
    let inv = v.inv_freq();
    assert!((inv[1] - 1e4f64.powf(-2.0 / 40.0)).abs() < 1e-15);
    assert_eq!(load("qwen2.5-vl-7b-instruct-published.json").vision.unwrap().head_dim, 80);
    assert_eq!(load("qwen3-vl-8b-instruct-resaved.json").vision.unwrap().head_dim, 72);
    let v = load("llama-4-scout-17b-16e-instruct-resaved.json").vision.unwrap();
    assert_eq!(
        (v.head_dim, v.layout, v.axes, v.position_offset),
        (88, Layout::Interleaved, [VisionAxis::Col, VisionAxis::Row], 1)
    );
    assert_eq!(v.grid_size, Some(24));
    // SigLIP (Gemma 3) has learned positions: no vision RoPE, no warning.
    let m = load("gemma-3-27b-it-published.json");
    assert!(m.vision.is_none() && m.warnings().is_empty());
    let qwen = |vision: &str| {
        format!(
            r#"{{"model_type": "qwen2_vl", "hidden_size": 3584, "num_attention_heads": 28,
                "rope_scaling": {{"type": "mrope", "mrope_section": [16, 24, 24]}}, "vision_config": {vision}}}"#
        )
    };
    assert_eq!(parse_err(&qwen(r#"{"embed_dim": 1280}"#)), missing("vision_config.num_heads"));
    assert_eq!(
        parse_err(&qwen(r#"{"embed_dim": 1240, "num_heads": 20}"#)),
        malformed("vision_config.embed_dim", "num_heads times a multiple of 4 (two axes of pairs per head)")
    );
    assert_eq!(
        parse_err(&qwen(r#"{"embed_dim": 1000000000000, "num_heads": 16}"#)),
        invalid(
            "vision_config.embed_dim",
            RopeError::RotaryDimTooLarge { rotary_dim: 62_500_000_000, max: rope_kernels::MAX_ROTARY_DIM }
        )
    );
    assert_eq!(
        conflict_field(&qwen(
            r#"{"embed_dim": 1280, "num_heads": 16, "rope_parameters": {"rope_type": "yarn"}}"#
        )),
        "vision_config.rope_parameters.rope_type"
    );
    assert_eq!(
        parse_err(&qwen(r#"{"embed_dim": 1280, "num_heads": 16, "rope_theta": -1}"#)),
        invalid("vision_config.rope_theta", RopeError::InvalidTheta)
    );
}

// Review of issue 15, findings 2, 3, 5, 6, 7, 8, 10 (the loader).

/// A Qwen3-VL config (text part in `text_config`) with the given text rope dict.
fn qwen3_vl(rope: &str) -> String {
    format!(
        r#"{{"model_type": "qwen3_vl", "text_config": {{"model_type": "qwen3_vl_text", "head_dim": 128,
            "hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8, "num_hidden_layers": 36,
            "max_position_embeddings": 262144, "rope_theta": 5000000, "rope_scaling": {rope}}}}}"#
    )
}

/// Findings 2, 3: Qwen3-VL always interleaves (HF `Qwen3VLTextRotaryEmbedding` never reads
/// `mrope_interleaved`; section default [24, 20, 20]); Qwen2-VL / Qwen2.5-VL need the section.
#[test]
fn review_mrope_style_by_model_type() {
    let interleaved = |s| Some(MropeSpec { mrope_section: s, interleaved: true });
    // No interleaved key, a misspelled one, or no rope dict at all: interleaved.
    let m =
        ModelConfig::from_json_str(&qwen3_vl(r#"{"rope_type": "default", "mrope_section": [24, 20, 20]}"#))
            .unwrap();
    assert_eq!((m.mrope, m.warnings().len()), (interleaved([24, 20, 20]), 0));
    let m = ModelConfig::from_json_str(&qwen3_vl(
        r#"{"rope_type": "default", "mrope_section": [24, 20, 20], "mrope_interleave": true}"#,
    ))
    .unwrap();
    assert_eq!(m.mrope, interleaved([24, 20, 20]));
    assert_eq!(
        m.warnings(),
        ["text_config.rope_scaling.mrope_interleave: not read by rope type `default`; ignored"]
    );
    let m = ModelConfig::from_json_str(&qwen3_vl("null")).unwrap();
    assert_eq!(m.mrope, interleaved([24, 20, 20]));
    assert_eq!(m.mrope_rope().unwrap().unwrap().style(), rope_kernels::MRopeStyle::Interleaved);
    // `mrope_interleaved: false`: HF ignores it; so does the load, with a warning.
    let m = ModelConfig::from_json_str(&qwen3_vl(
        r#"{"rope_type": "default", "mrope_section": [24, 20, 20], "mrope_interleaved": false}"#,
    ))
    .unwrap();
    assert_eq!(m.mrope, interleaved([24, 20, 20]));
    assert_eq!(m.warnings().len(), 1);
    assert!(m.warnings()[0].starts_with("text_config.rope_scaling.mrope_interleaved: false is not read"));
    // The MoE text model too (and its theta default, `Qwen3VLMoeTextConfig` 5e6).
    let moe = qwen3_vl("null")
        .replace("qwen3_vl_text", "qwen3_vl_moe_text")
        .replace(r#""rope_theta": 5000000, "#, "");
    let m = ModelConfig::from_json_str(&moe).unwrap();
    assert_eq!((m.mrope, m.rope.theta), (interleaved([24, 20, 20]), 5e6));
    // Qwen2-VL / Qwen2.5-VL without the section: HF cannot run; an error naming it.
    for t in ["qwen2_vl", "qwen2_5_vl"] {
        let json = format!(r#"{{"model_type": "{t}", "hidden_size": 3584, "num_attention_heads": 28}}"#);
        assert_eq!(parse_err(&json), missing("rope_scaling.mrope_section"), "{t}");
    }
}

/// Finding 5: MRoPE with the scaling HF combines it with; Qwen3-VL's long-context form.
#[test]
fn review_mrope_with_scaling() {
    let m = ModelConfig::from_json_str(&qwen3_vl(
        r#"{"rope_type": "yarn", "factor": 3.0, "original_max_position_embeddings": 262144,
            "mrope_section": [24, 20, 20], "mrope_interleaved": true}"#,
    ))
    .unwrap();
    assert_eq!(m.mrope, Some(MropeSpec { mrope_section: [24, 20, 20], interleaved: true }));
    let Scaling::Yarn(p) = &m.rope.scaling else { panic!("{:?}", m.rope.scaling) };
    assert_eq!((p.factor, p.original_max_position_embeddings), (3.0, 262_144));
    assert!(m.warnings().is_empty(), "{:?}", m.warnings());
    let mrope = m.mrope_rope().unwrap().unwrap();
    assert_eq!(mrope.mrope_section(), [24, 20, 20]);
    // Linear and dynamic on Qwen2-VL.
    for dict in [
        r#"{"type": "linear", "factor": 2, "mrope_section": [16, 24, 24]}"#,
        r#"{"rope_type": "dynamic", "factor": 2, "mrope_section": [16, 24, 24]}"#,
        r#"{"rope_type": "yarn", "type": "mrope", "factor": 2, "original_max_position_embeddings": 4096, "mrope_section": [16, 24, 24]}"#,
    ] {
        let m = ModelConfig::from_json_str(&vl_with(&format!(
            r#""max_position_embeddings": 32768, "rope_scaling": {dict}"#
        )))
        .unwrap_or_else(|e| panic!("{dict}: {e}"));
        assert_eq!(m.mrope.map(|s| s.mrope_section), Some([16, 24, 24]), "{dict}");
        assert!(m.mrope_rope().unwrap().is_some(), "{dict}");
        assert_ne!(m.rope.scaling, Scaling::None, "{dict}");
    }
}

/// Finding 6: a layer-pattern model type without `num_hidden_layers` is an error.
#[test]
fn review_layer_pattern_needs_layer_count() {
    for (json, field) in [
        (
            r#"{"model_type": "gemma3_text", "head_dim": 256, "num_attention_heads": 4, "rope_local_base_freq": 10000}"#,
            "num_hidden_layers",
        ),
        (r#"{"model_type": "gemma2", "head_dim": 256, "num_attention_heads": 8}"#, "num_hidden_layers"),
        (
            r#"{"model_type": "llama4", "text_config": {"model_type": "llama4_text", "head_dim": 128, "num_attention_heads": 40}}"#,
            "text_config.num_hidden_layers",
        ),
        (
            r#"{"model_type": "gemma3_text", "head_dim": 256, "num_attention_heads": 4, "layer_types": ["sliding_attention", "full_attention"]}"#,
            "num_hidden_layers",
        ),
    ] {
        assert_eq!(parse_err(json), missing(field), "{json}");
    }
    // Without a pattern, `layer_types` alone bounds the layers.
    let m = ModelConfig::from_json_str(&with(r#""layer_types": ["full_attention", "sliding_attention"]"#))
        .unwrap();
    assert!(m.uses_rope(1) && !m.uses_rope(3) && m.rope_for_layer(3).is_none());
}

/// Finding 7: `qk_norm` for a type the crate does not know is an error, not "none";
/// Qwen3-Next is `1 + weight` on its full-attention layers; Gemma 3n is refused.
#[test]
fn review_qk_norm_of_unknown_types() {
    use rope_kernels::hf_config::QkNormKind;
    use rope_kernels::WeightOffset;
    let exaone4 = ModelConfig::from_json_str(
        r#"{"model_type": "exaone4", "head_dim": 128, "num_attention_heads": 40, "num_hidden_layers": 4}"#,
    );
    // EXAONE 4 applies RoPE on its sliding-window layers only: refused at load.
    assert!(matches!(exaone4, Err(ConfigError::Conflict { field, .. }) if field == "model_type"));
    let unknown = ModelConfig::from_json_str(
        r#"{"model_type": "some_new_model", "head_dim": 128, "num_attention_heads": 40, "num_hidden_layers": 4}"#,
    )
    .unwrap();
    assert!(matches!(unknown.qk_norm(), Err(ConfigError::Conflict { field, .. }) if field == "model_type"));
    let next = ModelConfig::from_json_str(
        r#"{"model_type": "qwen3_next", "head_dim": 256, "num_attention_heads": 16, "num_hidden_layers": 4,
            "partial_rotary_factor": 0.25,
            "layer_types": ["linear_attention", "linear_attention", "linear_attention", "full_attention"]}"#,
    )
    .unwrap();
    let spec = next.qk_norm().unwrap().unwrap();
    assert_eq!((spec.kind, spec.eps), (QkNormKind::RmsBefore(WeightOffset::One), 1e-6));
    assert_eq!(next.qk_norm_for_layer(0).unwrap(), None);
    assert_eq!(next.qk_norm_for_layer(3).unwrap(), Some(spec));
    // Its gated-DeltaNet `linear_attention` layers apply no RoPE.
    assert_eq!(next.layers_without_rope(), [0, 1, 2]);
    assert!(next.rope_for_layer(0).is_none() && next.rope_for_layer(3).is_some());
    // Without `layer_types`: HF `Qwen3NextConfig`'s pattern (full attention every 4th layer).
    let next = ModelConfig::from_json_str(
        r#"{"model_type": "qwen3_next", "head_dim": 256, "num_attention_heads": 16, "num_hidden_layers": 8}"#,
    )
    .unwrap();
    let full: Vec<usize> = next.layers_of_type(&LayerType::FullAttention).collect();
    assert_eq!(full, [3, 7]);
    assert_eq!(next.qk_norm_for_layer(2).unwrap(), None);
    assert!(next.qk_norm_for_layer(7).unwrap().is_some());
    assert_eq!(
        parse_err(r#"{"model_type": "qwen3_next", "head_dim": 256, "num_attention_heads": 16}"#),
        missing("num_hidden_layers")
    );
    for name in ["llama-3.1-8b.json", "mistral-7b-v0.1.json", "qwen2-vl-7b-instruct-published.json"] {
        assert_eq!(load(name).qk_norm().unwrap(), None, "{name}");
    }
    assert_eq!(
        conflict_field(
            r#"{"model_type": "gemma3n", "text_config": {"model_type": "gemma3n_text", "head_dim": 256,
                "num_attention_heads": 8, "num_hidden_layers": 30, "rope_local_base_freq": 10000}}"#
        ),
        "text_config.model_type"
    );
}

/// Finding 8: MRoPE fields on a model type that applies plain RoPE are errors.
#[test]
fn review_mrope_on_plain_rope_types() {
    assert_eq!(
        conflict_field(&with(r#""rope_scaling": {"rope_type": "default", "mrope_section": [16, 24, 24]}"#)),
        "rope_scaling.mrope_section"
    );
    assert_eq!(
        conflict_field(&with(r#""rope_scaling": {"rope_type": "default", "mrope_interleaved": true}"#)),
        "rope_scaling.mrope_interleaved"
    );
    assert_eq!(conflict_field(&with(r#""rope_scaling": {"type": "mrope"}"#)), "rope_scaling.type");
}

/// Finding 10: each leniency is an error naming the field, or a warning.
#[test]
fn review_leniencies() {
    let qwen = |vision: &str| {
        format!(
            r#"{{"model_type": "qwen2_vl", "hidden_size": 3584, "num_attention_heads": 28,
                "rope_scaling": {{"type": "mrope", "mrope_section": [16, 24, 24]}}, "vision_config": {vision}}}"#
        )
    };
    // 1283 / 16 is not an integer.
    assert!(matches!(parse_err(&qwen(r#"{"embed_dim": 1283, "num_heads": 16}"#)),
        ConfigError::Malformed { field, .. } if field == "vision_config.embed_dim"));
    // Unknown keys of the vision rope dict: warnings.
    let m = ModelConfig::from_json_str(&qwen(
        r#"{"embed_dim": 1280, "num_heads": 16, "rope_parameters": {"rope_type": "default", "rope_theta": 1e4, "factor": 2}}"#,
    ))
    .unwrap();
    assert_eq!(m.warnings(), ["vision_config.rope_parameters.factor: not read for the vision RoPE; ignored"]);
    // rope_scaling beside rope_parameters: the same is fine, a difference an error.
    let same = with(
        r#""rope_scaling": {"rope_type": "linear", "factor": 8}, "rope_parameters": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1e4}"#,
    );
    assert_eq!(ModelConfig::from_json_str(&same).unwrap().rope.scaling, Scaling::Linear { factor: 8.0 });
    assert_eq!(
        conflict_field(&with(
            r#""rope_scaling": {"rope_type": "linear", "factor": 8}, "rope_parameters": {"rope_type": "linear", "factor": 4}"#
        )),
        "rope_scaling.factor"
    );
    assert_eq!(
        conflict_field(&with(
            r#""rope_scaling": {"rope_type": "linear", "factor": 8}, "rope_parameters": {"rope_type": "default"}"#
        )),
        "rope_scaling.factor"
    );
    assert_eq!(
        conflict_field(&with(
            r#""rope_scaling": {"rope_type": "dynamic"}, "rope_parameters": {"rope_type": "default"}"#
        )),
        "rope_scaling.rope_type"
    );
    assert_eq!(
        conflict_field(&with(
            r#""rope_scaling": {"type": "dynamic"}, "rope_parameters": {"rope_type": "default"}"#
        )),
        "rope_scaling.type"
    );
    // rope_local_base_freq against the keyed sliding_attention entry.
    let gemma = |local: u32| {
        format!(
            r#"{{"model_type": "gemma3_text", "head_dim": 128, "num_attention_heads": 8, "num_hidden_layers": 6,
                "rope_local_base_freq": {local}, "rope_parameters": {{"full_attention": {{"rope_type": "default", "rope_theta": 1000000}},
                "sliding_attention": {{"rope_type": "default", "rope_theta": 10000}}}}}}"#
        )
    };
    assert_eq!(conflict_field(&gemma(20_000)), "rope_local_base_freq");
    assert_eq!(ModelConfig::from_json_str(&gemma(10_000)).unwrap().rope_for_layer(0).unwrap().theta, 1e4);
    // Top-level partial_rotary_factor against the rope dict's.
    let phi = |top: f64| {
        format!(
            r#"{{"model_type": "phi", "hidden_size": 2560, "num_attention_heads": 32, "partial_rotary_factor": {top},
                "rope_parameters": {{"rope_type": "default", "partial_rotary_factor": 0.25}}}}"#
        )
    };
    assert_eq!(conflict_field(&phi(0.5)), "rope_parameters.partial_rotary_factor");
    assert_eq!(ModelConfig::from_json_str(&phi(0.25)).unwrap().rope.rotary_dim, 20);
}
