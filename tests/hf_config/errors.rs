//! Spellings, malformed input, strictness: every error names the field; unread keys are
//! warnings.

use super::*;

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
    assert_eq!(ModelConfig::from_json_str(&format!("{v3}}}")).unwrap().rope.layout, PairLayout::Interleaved);
    let flat = format!("{v3}, \"rope_interleave\": false}}");
    assert_eq!(ModelConfig::from_json_str(&flat).unwrap().rope.layout, PairLayout::HalfSplit);
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
    for (file, ..) in super::real_configs::EXPECTED {
        assert_eq!(load(file).warnings(), [] as [String; 0], "{file}");
    }
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
