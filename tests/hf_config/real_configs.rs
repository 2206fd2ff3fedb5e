//! Every real config in tests/data/configs and what it loads to.

use super::*;

/// (file, model_type, heads, kv heads, head_dim, rotary_dim, layout, theta, scaling name)
/// of the main (`full_attention`) configuration.
type Expected = (&'static str, &'static str, usize, usize, usize, usize, PairLayout, f64, &'static str);

pub(crate) const EXPECTED: [Expected; 24] = [
    ("deepseek-v2-lite.json", "deepseek_v2", 16, 16, 64, 64, PairLayout::Interleaved, 10_000.0, "yarn"),
    ("gemma-3-1b-it-published.json", "gemma3_text", 4, 1, 256, 256, PairLayout::HalfSplit, 1e6, "default"),
    ("gemma-3-1b-it-resaved.json", "gemma3_text", 4, 1, 256, 256, PairLayout::HalfSplit, 1e6, "default"),
    ("gemma-3-27b-it-published.json", "gemma3", 32, 16, 128, 128, PairLayout::HalfSplit, 1e6, "linear"),
    ("gemma-3-27b-it-resaved.json", "gemma3", 32, 16, 128, 128, PairLayout::HalfSplit, 1e6, "linear"),
    ("gpt-j-6b.json", "gptj", 16, 16, 256, 64, PairLayout::Interleaved, 10_000.0, "default"),
    ("gpt-neox-20b.json", "gpt_neox", 64, 64, 96, 24, PairLayout::HalfSplit, 10_000.0, "default"),
    ("gpt-oss-20b.json", "gpt_oss", 64, 8, 64, 64, PairLayout::HalfSplit, 150_000.0, "yarn"),
    ("llama-2-7b.json", "llama", 32, 32, 128, 128, PairLayout::HalfSplit, 10_000.0, "default"),
    ("llama-3.1-8b.json", "llama", 32, 8, 128, 128, PairLayout::HalfSplit, 500_000.0, "llama3"),
    (
        "llama-4-scout-17b-16e-instruct-published.json",
        "llama4",
        40,
        8,
        128,
        128,
        PairLayout::Interleaved,
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
        PairLayout::Interleaved,
        5e5,
        "llama3",
    ),
    ("mistral-7b-v0.1.json", "mistral", 32, 8, 128, 128, PairLayout::HalfSplit, 10_000.0, "default"),
    ("phi-2.json", "phi", 32, 32, 80, 32, PairLayout::HalfSplit, 10_000.0, "default"),
    ("phi-3-128k-su.json", "phi3", 32, 32, 96, 96, PairLayout::HalfSplit, 10_000.0, "longrope"),
    (
        "qwen2-vl-7b-instruct-published.json",
        "qwen2_vl",
        28,
        4,
        128,
        128,
        PairLayout::HalfSplit,
        1e6,
        "default",
    ),
    ("qwen2-vl-7b-instruct-resaved.json", "qwen2_vl", 28, 4, 128, 128, PairLayout::HalfSplit, 1e6, "default"),
    ("qwen2.5-7b-instruct-yarn.json", "qwen2", 28, 4, 128, 128, PairLayout::HalfSplit, 1_000_000.0, "yarn"),
    (
        "qwen2.5-vl-7b-instruct-published.json",
        "qwen2_5_vl",
        28,
        4,
        128,
        128,
        PairLayout::HalfSplit,
        1e6,
        "default",
    ),
    (
        "qwen2.5-vl-7b-instruct-resaved.json",
        "qwen2_5_vl",
        28,
        4,
        128,
        128,
        PairLayout::HalfSplit,
        1e6,
        "default",
    ),
    ("qwen3-8b-published.json", "qwen3", 32, 8, 128, 128, PairLayout::HalfSplit, 1e6, "default"),
    ("qwen3-8b-resaved.json", "qwen3", 32, 8, 128, 128, PairLayout::HalfSplit, 1e6, "default"),
    (
        "qwen3-vl-8b-instruct-published.json",
        "qwen3_vl",
        32,
        8,
        128,
        128,
        PairLayout::HalfSplit,
        5e6,
        "default",
    ),
    ("qwen3-vl-8b-instruct-resaved.json", "qwen3_vl", 32, 8, 128, 128, PairLayout::HalfSplit, 5e6, "default"),
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
        "qwen2_5_vl heads 28/4 | full_attention (28 of 28, first 0): theta 1000000 rotary_dim 128/128 HalfSplit default | mrope [16, 24, 24] sectioned | vision qwen2_5_vl_vision: head_dim 80, theta 10000, HalfSplit, [Row, Col] + 0, merge Some(2) | video tokens_per_second 2",
    ),
    (
        "qwen2.5-vl-7b-instruct-resaved.json",
        "qwen2_5_vl_text heads 28/4 | full_attention (28 of 28, first 0): theta 1000000 rotary_dim 128/128 HalfSplit default | mrope [16, 24, 24] sectioned | vision qwen2_5_vl_vision: head_dim 80, theta 10000, HalfSplit, [Row, Col] + 0, merge Some(2) | video tokens_per_second 2",
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
    if let Some(t) = m.tokens_per_second {
        s += &format!(" | video tokens_per_second {t}");
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
