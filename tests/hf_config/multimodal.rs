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
    assert_eq!((v.head_dim, v.num_heads, v.theta, v.layout), (80, 16, 1e4, PairLayout::HalfSplit));
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
        (88, PairLayout::Interleaved, [VisionAxis::Col, VisionAxis::Row], 1)
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

/// Qwen2.5-VL's `vision_config.tokens_per_second`: read, validated, and what a video's t
/// positions come out as through `MRopeIndex`.
#[test]
fn qwen2_5_vl_tokens_per_second() {
    use rope_kernels::{MRopeIndex, TOKEN_TEXT, TOKEN_VIDEO};

    for file in ["qwen2.5-vl-7b-instruct-published.json", "qwen2.5-vl-7b-instruct-resaved.json"] {
        let m = load(file);
        assert_eq!(m.tokens_per_second, Some(2.0), "{file}");
        assert!(m.warnings().is_empty(), "{file}: {:?}", m.warnings());
    }
    // Qwen2-VL (t advances 1 per grid step) and Qwen3-VL (one grid per frame) do not read it.
    for file in [
        "qwen2-vl-7b-instruct-published.json",
        "qwen2-vl-7b-instruct-resaved.json",
        "qwen3-vl-8b-instruct-published.json",
        "qwen3-vl-8b-instruct-resaved.json",
        "llama-4-scout-17b-16e-instruct-published.json",
        "llama-3.1-8b.json",
    ] {
        assert_eq!(load(file).tokens_per_second, None, "{file}");
    }

    // A video of Qwen2.5-VL-7B: 2 text tokens, then 4 grid steps of 4x4 patches (2x2 merged:
    // 4 tokens per step), `second_per_grid_t` 2 / 4 fps = 0.5 s. transformers:
    // t = start + f * 0.5 * 2 = start + f; h, w = start + row, start + col.
    let m = load("qwen2.5-vl-7b-instruct-published.json");
    let merge = m.vision.as_ref().and_then(|v| v.spatial_merge_size).unwrap() as u32;
    let mut types = vec![TOKEN_TEXT; 2];
    types.extend([TOKEN_VIDEO; 16]);
    let index = MRopeIndex {
        token_types: &types,
        video_grid_thw: &[[4, 4, 4]],
        second_per_grid_ts: &[0.5],
        tokens_per_second: m.tokens_per_second.unwrap() as f32,
        spatial_merge_size: merge,
        ..Default::default()
    };
    let ([t, h, w], next) = index.to_vecs().unwrap();
    let step = |f: u32| [2 + f; 4];
    let t_want: Vec<u32> = [0, 1].into_iter().chain((0..4).flat_map(step)).collect();
    assert_eq!(t, t_want);
    let hw = |a: [u32; 4]| [0, 1].into_iter().chain((0..4).flat_map(move |_| a)).collect::<Vec<u32>>();
    assert_eq!(h, hw([2, 2, 3, 3]));
    assert_eq!(w, hw([2, 3, 2, 3]));
    assert_eq!(next, 6);

    let qwen25 = |vision: &str| {
        format!(
            r#"{{"model_type": "qwen2_5_vl", "hidden_size": 3584, "num_attention_heads": 28,
                "rope_scaling": {{"type": "mrope", "mrope_section": [16, 24, 24]}},
                "vision_config": {{"hidden_size": 1280, "num_heads": 16{vision}}}}}"#
        )
    };
    let tps = |vision: &str| ModelConfig::from_json_str(&qwen25(vision)).unwrap().tokens_per_second;
    // Absent (or null): `Qwen2_5_VLVisionConfig`'s default, 4.
    assert_eq!(tps(""), Some(4.0));
    assert_eq!(tps(r#", "tokens_per_second": null"#), Some(4.0));
    assert_eq!(tps(r#", "tokens_per_second": 25"#), Some(25.0));
    assert_eq!(tps(r#", "tokens_per_second": 0.5"#), Some(0.5));
    // A wrong type or a value MRopeIndex refuses is an error naming the field.
    let expected = "a number > 0 (finite and non-zero as f32)";
    for bad in ["\"2\"", "true", "[2]", "0", "-2", "1e39", "1e-50"] {
        assert_eq!(
            parse_err(&qwen25(&format!(r#", "tokens_per_second": {bad}"#))),
            malformed("vision_config.tokens_per_second", expected),
            "{bad}"
        );
    }
    // The text part alone (no vision_config): no video.
    let text_only = r#"{"model_type": "qwen2_5_vl", "hidden_size": 3584, "num_attention_heads": 28,
        "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]}}"#;
    assert_eq!(ModelConfig::from_json_str(text_only).unwrap().tokens_per_second, None);
    // Elsewhere it is a warning, not read.
    let m = ModelConfig::from_json_str(&vl_with(
        r#""rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]},
            "vision_config": {"embed_dim": 1280, "num_heads": 16, "tokens_per_second": 2}"#,
    ))
    .unwrap();
    assert_eq!(m.tokens_per_second, None);
    assert_eq!(
        m.warnings(),
        ["vision_config.tokens_per_second: read for Qwen2.5-VL only (model type `qwen2_vl`); ignored"]
    );
}

/// The reference: transformers' `Llama4VisionRotaryEmbedding` for an `idx x idx` grid, as
/// (x + 1, y + 1, masked) per token, with Python's `%` and `//` on `img_idx` (the class
/// token's id -2 included).
fn llama4_reference(idx: i64) -> Vec<(i64, i64, bool)> {
    let img_idx: Vec<i64> = (0..idx * idx).chain([-2]).collect();
    img_idx.iter().map(|&i| (i.rem_euclid(idx) + 1, i.div_euclid(idx) + 1, i < 0)).collect()
}

/// Llama 4's ViT positions: the patches row by row, then the class token at position 0.
#[test]
fn llama4_vision_positions() {
    use rope_kernels::hf_config::llama4_vision_position_ids;
    use rope_kernels::{HeadsMut, View, VisionOptions};

    // By hand for idx = 2: img_idx [0, 1, 2, 3, -2]; x = img_idx % 2 + 1 = [1, 2, 1, 2, (1)],
    // y = img_idx // 2 + 1 = [1, 1, 2, 2, (0)]; the class token's angles are masked to 0.
    let (mut x, mut y) = ([9u32; 5], [9u32; 5]);
    assert_eq!(llama4_vision_position_ids(2, &mut x, &mut y), Ok(5));
    assert_eq!((x, y), ([1, 2, 1, 2, 0], [1, 1, 2, 2, 0]));
    // idx = 1: one patch at (1, 1), then the class token.
    let (mut x, mut y) = ([9u32; 2], [9u32; 2]);
    assert_eq!(llama4_vision_position_ids(1, &mut x, &mut y), Ok(2));
    assert_eq!((x, y), ([1, 0], [1, 0]));
    // Against the reference formula for several grids (24: Llama 4 Scout, 336 / 14).
    for idx in [3usize, 5, 24] {
        let n = idx * idx + 1;
        let (mut x, mut y) = (vec![9u32; n], vec![9u32; n]);
        assert_eq!(llama4_vision_position_ids(idx, &mut x, &mut y), Ok(n));
        for (i, (rx, ry, masked)) in llama4_reference(idx as i64).into_iter().enumerate() {
            let want = if masked { (0, 0) } else { (rx as u32, ry as u32) };
            assert_eq!((x[i], y[i]), want, "idx {idx}, token {i}");
        }
    }

    // Errors: nothing written.
    let (mut x, mut y) = ([9u32; 5], [9u32; 5]);
    assert!(matches!(
        llama4_vision_position_ids(0, &mut x[..1], &mut y[..1]),
        Err(RopeError::InvalidPositionLayout { .. })
    ));
    assert_eq!(
        llama4_vision_position_ids(2, &mut x[..4], &mut y),
        Err(RopeError::PositionCountMismatch { tokens: 5, positions: 4 })
    );
    assert_eq!(
        llama4_vision_position_ids(2, &mut x, &mut y[..3]),
        Err(RopeError::PositionCountMismatch { tokens: 5, positions: 3 })
    );
    assert_eq!(llama4_vision_position_ids(usize::MAX, &mut x, &mut y), Err(RopeError::PositionOverflow));
    assert_eq!(
        llama4_vision_position_ids(u32::MAX as usize + 1, &mut x, &mut y),
        Err(RopeError::PositionOverflow)
    );
    assert_eq!((x, y), ([9; 5], [9; 5]));

    // On the shipped Llama 4 Scout config: the encoder's RoPE with these streams rotates
    // patch (x, y) by the reference angles (x + 1) * f_k on pairs k < 22 and (y + 1) * f_k on
    // the others (interleaved pairs, f_k = 1e4^(-2k / 44)); the class token is unchanged.
    let m = load("llama-4-scout-17b-16e-instruct-published.json");
    let spec = m.vision.as_ref().unwrap();
    let idx = spec.grid_size.unwrap();
    let (heads, d) = (spec.num_heads, spec.head_dim);
    assert_eq!((idx, heads, d), (24, 16, 88));
    let n = idx * idx + 1;
    let (mut x, mut y) = (vec![0u32; n], vec![0u32; n]);
    llama4_vision_position_ids(idx, &mut x, &mut y).unwrap();
    let vit = m.vision_rope().unwrap().unwrap();
    let input: Vec<f32> = (0..n * heads * d).map(|i| ((i % 97) as f32 - 48.0) / 50.0).collect();
    let mut q = input.clone();
    vit.apply(HeadsMut::new(&mut q, View::token_major(n, heads, d)), &VisionOptions::ids([&x, &y])).unwrap();
    let quarter = d / 4;
    for (token, (rx, ry, masked)) in llama4_reference(idx as i64).into_iter().enumerate() {
        for head in [0, heads - 1] {
            let at = (token * heads + head) * d;
            for j in 0..d / 2 {
                let (pos, k) = if j < quarter { (rx, j) } else { (ry, j - quarter) };
                let angle =
                    if masked { 0.0 } else { pos as f64 * 1e4f64.powf(-2.0 * k as f64 / (d / 2) as f64) };
                let (a, b) = (input[at + 2 * j] as f64, input[at + 2 * j + 1] as f64);
                let want = [a * angle.cos() - b * angle.sin(), a * angle.sin() + b * angle.cos()];
                for (got, want) in [q[at + 2 * j], q[at + 2 * j + 1]].into_iter().zip(want) {
                    assert!(
                        (got as f64 - want).abs() < 1e-5,
                        "token {token} head {head} pair {j}: {got} vs {want}"
                    );
                }
            }
        }
    }
    assert_eq!(q[(n - 1) * heads * d..], input[(n - 1) * heads * d..], "the class token");
}
