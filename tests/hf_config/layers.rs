//! Layer types and per-layer-type RoPE (Gemma 2/3, transformers 5 keyed dicts), Llama 4's
//! NoPE layers, layer patterns, per-head q/k norm.

use super::*;

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
        assert_eq!(m.rope.layout, PairLayout::Interleaved, "{file}");
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
