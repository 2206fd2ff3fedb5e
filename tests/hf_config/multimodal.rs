//! MRoPE sections of the Qwen-VL text models and the vision encoders' 2-D RoPE.

use super::*;

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
