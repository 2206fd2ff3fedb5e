//! Golden multimodal / per-model cases through the `config.json` loader (issue 15):
//! `tests/data/golden/mm/{llama4_text_llama3,gemma3_sliding_local}.json` (transformers 5.24
//! beside an f64 evaluation; format in ../shared/golden/README.md, section `mm/`).
//!
//! For each case, both `config_published` and `config_resaved` go through
//! `ModelConfig::from_json_str`; the `Rope` of the case's layer type is applied to `x` at
//! `position_ids`: within 2e-6 of `out_exact` (`AngleMode::Exact`) and within 1e-5 of
//! `out_hf` (`AngleMode::HfCompatible` with the case's `hf_inv_freq`, `Rope::with_hf_inv_freq`).
//! The 2e-6 bound is that of tests/golden.rs (|x| ≤ 4.11, three f32 roundings).
#![cfg(feature = "hf-config")]

use rope_kernels::hf_config::{LayerType, ModelConfig};
use rope_kernels::{ApplyOptions, HeadsMut, PairLayout, Rope, RopeConfig, View};
use serde_json::Value;

fn case(name: &str) -> Value {
    let path = format!("{}/tests/data/golden/mm/{name}.json", env!("CARGO_MANIFEST_DIR"));
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))).unwrap()
}

fn f64s(v: &Value) -> Vec<f64> {
    v.as_array().expect("array").iter().map(|x| x.as_f64().expect("number")).collect()
}

fn max_abs(a: &[f32], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).map(|(x, y)| (f64::from(*x) - y).abs()).fold(0.0, f64::max)
}

fn run(rope: &Rope, v: &Value, positions: &[u32]) -> Vec<f32> {
    let mut out: Vec<f32> = f64s(&v["x"]).into_iter().map(|x| x as f32).collect();
    let heads = v["heads"].as_u64().unwrap() as usize;
    let view = View::token_major(positions.len(), heads, rope.config().head_dim);
    rope.apply(HeadsMut::new(&mut out, view), &ApplyOptions::ids(positions)).unwrap();
    out
}

/// Loads both config forms of the case, picks the configuration with `pick`, and checks
/// the outputs; returns the configuration (the same from both forms).
fn check(name: &str, pick: impl Fn(&ModelConfig) -> RopeConfig) -> RopeConfig {
    let v = case(name);
    let streams = v["position_ids"].as_array().unwrap();
    assert_eq!(streams.len(), 1, "{name}: a 1-D case");
    let positions: Vec<u32> = f64s(&streams[0]).iter().map(|&p| p as u32).collect();
    let hf_inv_freq: Vec<f32> = f64s(&v["hf_inv_freq"]).into_iter().map(|x| x as f32).collect();
    let exact_inv_freq = f64s(&v["exact_inv_freq"]);
    let (out_exact, out_hf) = (f64s(&v["out_exact"]), f64s(&v["out_hf"]));
    let layout = match v["layout"].as_str().unwrap() {
        "half" => PairLayout::HalfSplit,
        "interleaved" => PairLayout::Interleaved,
        other => panic!("{name}: layout {other}"),
    };
    let mut configs = Vec::new();
    for form in ["config_published", "config_resaved"] {
        let json = serde_json::to_string(&v[form]).unwrap();
        let model = ModelConfig::from_json_str(&json).unwrap_or_else(|e| panic!("{name} {form}: {e}"));
        let config = pick(&model);
        assert_eq!(config.layout, layout, "{name} {form}: layout");
        assert_eq!(config.head_dim, v["head_dim"].as_u64().unwrap() as usize, "{name} {form}");
        assert_eq!(config.rotary_dim, v["rotary_dim"].as_u64().unwrap() as usize, "{name} {form}");

        let rope = Rope::new(config.clone()).unwrap();
        for (i, (got, want)) in rope.frequencies().inv_freq().iter().zip(&exact_inv_freq).enumerate() {
            let rel = ((got - want) / want).abs();
            assert!(rel <= 1e-12, "{name} {form}: inv_freq[{i}] = {got:e}, exact {want:e}");
        }
        let err = max_abs(&run(&rope, &v, &positions), &out_exact);
        println!("{name} ({form}): exact mode, max abs error vs out_exact {err:.3e}");
        assert!(err <= 2e-6, "{name} {form}: {err:e} vs out_exact");

        let hf = Rope::new(config.clone()).unwrap().with_hf_inv_freq(&hf_inv_freq).unwrap();
        let err = max_abs(&run(&hf, &v, &positions), &out_hf);
        println!("{name} ({form}): HF mode, max abs error vs out_hf {err:.3e}");
        assert!(err <= 1e-5, "{name} {form}: {err:e} vs out_hf");
        configs.push(config);
    }
    assert_eq!(configs[0], configs[1], "{name}: published and re-saved forms load the same");
    configs.remove(0)
}

/// Llama 4 Scout text: a RoPE layer (layer 0; layer 3 has none), interleaved pairs, llama3
/// with low == high.
#[test]
fn llama4_text_llama3() {
    check("llama4_text_llama3", |m| {
        assert!(m.rope_for_layer(3).is_none(), "layer 3 is NoPE");
        m.rope_for_layer(0).expect("layer 0 uses RoPE").clone()
    });
}

/// Gemma 3 27B sliding-window layers: theta 1e4 (the default `rope_local_base_freq`), no
/// scaling; the published file has neither theta.
#[test]
fn gemma3_sliding_local() {
    let layer_type = LayerType::from_hf(case("gemma3_sliding_local")["layer_type"].as_str().unwrap());
    assert_eq!(layer_type, LayerType::SlidingAttention);
    let config = check("gemma3_sliding_local", |m| {
        assert_eq!(m.rope_for_layer(0), m.rope_for_layer_type(&layer_type));
        m.rope_for_layer_type(&layer_type).expect("a sliding layer type").clone()
    });
    assert_eq!(config.theta, 1e4);
}

/// The check discriminates: the full-attention configuration (theta 1e6, linear 8) or the
/// other layout fail it.
#[test]
fn golden_mm_discriminates() {
    let v = case("gemma3_sliding_local");
    let positions: Vec<u32> = f64s(&v["position_ids"][0]).iter().map(|&p| p as u32).collect();
    let m = ModelConfig::from_json_str(&serde_json::to_string(&v["config_published"]).unwrap()).unwrap();
    let full = Rope::new(m.rope_for_layer_type(&LayerType::FullAttention).unwrap().clone()).unwrap();
    assert!(max_abs(&run(&full, &v, &positions), &f64s(&v["out_exact"])) > 1e-3);
    let v = case("llama4_text_llama3");
    let positions: Vec<u32> = f64s(&v["position_ids"][0]).iter().map(|&p| p as u32).collect();
    let m = ModelConfig::from_json_str(&serde_json::to_string(&v["config_published"]).unwrap()).unwrap();
    let mut half = m.rope.clone();
    half.layout = PairLayout::HalfSplit;
    assert!(max_abs(&run(&Rope::new(half).unwrap(), &v, &positions), &f64s(&v["out_exact"])) > 1e-3);
}

// ---- Loader → operations (issue 15): MRoPE, vision RoPE and fused QK-norm built from the
// ---- loaded configuration, on the golden cases of the Qwen families.

use rope_kernels::hf_config::{QkNormKind, VisionAxis};
use rope_kernels::{vision_position_ids, MRopeIndex, MRopeOptions, MRopeStyle, VisionOptions, WeightOffset};

fn u32s(v: &Value) -> Vec<u32> {
    f64s(v).iter().map(|&p| p as u32).collect()
}

fn models(v: &Value) -> Vec<(&'static str, ModelConfig)> {
    ["config_published", "config_resaved"]
        .into_iter()
        .map(|form| {
            let json = serde_json::to_string(&v[form]).unwrap();
            (form, ModelConfig::from_json_str(&json).unwrap_or_else(|e| panic!("{form}: {e}")))
        })
        .collect()
}

fn f32s(v: &Value) -> Vec<f32> {
    f64s(v).into_iter().map(|x| x as f32).collect()
}

/// MRoPE of a Qwen-VL config, as the loader builds it: the sectioned / interleaved style,
/// the positions of the case from `MRopeIndex`, and the outputs.
fn mrope_through_loader(name: &str, style: MRopeStyle) {
    let v = case(name);
    let ids: Vec<Vec<u32>> = v["position_ids"].as_array().unwrap().iter().map(u32s).collect();
    // MRopeIndex gives the case's streams (the same that the runtime would pass).
    let types: Vec<u8> = u32s(&v["token_types"]).iter().map(|&t| t as u8).collect();
    let grids: Vec<[u32; 3]> = v["image_grid_thw"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| <[u32; 3]>::try_from(u32s(g)).unwrap())
        .collect();
    let index = MRopeIndex {
        token_types: &types,
        image_grid_thw: &grids,
        spatial_merge_size: v["spatial_merge_size"].as_u64().unwrap() as u32,
        ..MRopeIndex::default()
    };
    assert_eq!(index.to_vecs().unwrap().0.to_vec(), ids, "{name}: MRopeIndex");
    let streams = [&ids[0][..], &ids[1][..], &ids[2][..]];
    let (heads, hd) = (v["heads"].as_u64().unwrap() as usize, v["head_dim"].as_u64().unwrap() as usize);
    let x = f32s(&v["x"]);
    let view = View::token_major(ids[0].len(), heads, hd);
    for (form, model) in models(&v) {
        let spec = model.mrope.unwrap_or_else(|| panic!("{name} {form}: no MRoPE"));
        assert_eq!(spec.mrope_section.map(|s| s as u32).to_vec(), u32s(&v["mrope_section"]), "{name} {form}");
        let m = model.mrope_rope().unwrap().unwrap_or_else(|| panic!("{name} {form}: no MRope"));
        assert_eq!(m.style(), style, "{name} {form}");
        for (j, s) in u32s(&v["freq_stream"]).into_iter().enumerate() {
            assert_eq!(m.stream_of_pair(j), Some(s as usize), "{name} {form}: stream of pair {j}");
        }
        let mut y = x.clone();
        m.apply(HeadsMut::new(&mut y, view), &MRopeOptions::ids(streams)).unwrap();
        let err = max_abs(&y, &f64s(&v["out_exact"]));
        let hf = m.clone().with_hf_inv_freq(&f32s(&v["hf_inv_freq"])).unwrap();
        let mut z = x.clone();
        hf.apply(HeadsMut::new(&mut z, view), &MRopeOptions::ids(streams)).unwrap();
        let hf_err = max_abs(&z, &f64s(&v["out_hf"]));
        println!("{name} ({form}) via loader: exact {err:.3e}, hf {hf_err:.3e}");
        assert!(err <= 2e-6, "{name} {form}: {err:e} vs out_exact");
        assert!(hf_err <= 1e-5, "{name} {form}: {hf_err:e} vs out_hf");
        // The wrong style fails the check (it is not silently plain RoPE either).
        let other =
            if style == MRopeStyle::Sectioned { MRopeStyle::Interleaved } else { MRopeStyle::Sectioned };
        if let Ok(w) = rope_kernels::MRope::new(model.rope.clone(), spec.mrope_section, other) {
            let mut yw = x.clone();
            w.apply(HeadsMut::new(&mut yw, view), &MRopeOptions::ids(streams)).unwrap();
            assert!(max_abs(&yw, &f64s(&v["out_exact"])) > 1e-3, "{name}: the other style passes");
        }
    }
}

#[test]
fn qwen2vl_mrope_via_loader() {
    mrope_through_loader("qwen2vl_mrope", MRopeStyle::Sectioned);
}

#[test]
fn qwen3vl_mrope_interleaved_via_loader() {
    mrope_through_loader("qwen3vl_mrope_interleaved", MRopeStyle::Interleaved);
}

/// The Qwen2-VL ViT's 2-D RoPE from `vision_config`: half-split, rows then columns, the
/// patch positions of `vision_position_ids` with the config's `spatial_merge_size`.
#[test]
fn qwen2vl_vision_4x6_via_loader() {
    let v = case("qwen2vl_vision_4x6");
    let ids: Vec<Vec<u32>> = v["position_ids"].as_array().unwrap().iter().map(u32s).collect();
    let grid = <[u32; 3]>::try_from(u32s(&v["grid_thw"][0])).unwrap();
    let (heads, hd) = (v["heads"].as_u64().unwrap() as usize, v["head_dim"].as_u64().unwrap() as usize);
    let x = f32s(&v["x"]);
    let n = ids[0].len();
    for (form, model) in models(&v) {
        let spec = model.vision.clone().unwrap_or_else(|| panic!("{form}: no vision RoPE"));
        assert_eq!(
            (spec.head_dim, spec.layout, spec.axes),
            (hd, PairLayout::HalfSplit, [VisionAxis::Row, VisionAxis::Col])
        );
        let merge = spec.spatial_merge_size.expect("spatial_merge_size") as u32;
        let (mut rows, mut cols) = (vec![0u32; n], vec![0u32; n]);
        vision_position_ids(grid, merge, &mut rows, &mut cols).unwrap();
        let (mut a, mut b) = (vec![0u32; n], vec![0u32; n]);
        spec.fill_position_ids(&rows, &cols, &mut a, &mut b).unwrap();
        assert_eq!([a.clone(), b.clone()].to_vec(), ids, "{form}: patch positions");
        let vit = model.vision_rope().unwrap().expect("a VisionRope");
        let view = View::token_major(n, heads, hd);
        let mut y = x.clone();
        vit.apply(HeadsMut::new(&mut y, view), &VisionOptions::ids([&a, &b])).unwrap();
        let err = max_abs(&y, &f64s(&v["out_exact"]));
        let hf = vit.with_hf_inv_freq(&f32s(&v["hf_inv_freq"])).unwrap();
        let mut z = x.clone();
        hf.apply(HeadsMut::new(&mut z, view), &VisionOptions::ids([&a, &b])).unwrap();
        let hf_err = max_abs(&z, &f64s(&v["out_hf"]));
        println!("qwen2vl_vision_4x6 ({form}) via loader: exact {err:.3e}, hf {hf_err:.3e}");
        assert!(err <= 2e-6, "{form}: {err:e} vs out_exact");
        assert!(hf_err <= 1e-5, "{form}: {hf_err:e} vs out_hf");
    }
}

/// Qwen3-8B: the loader's QK-norm form (RMS with weight before RoPE, eps `rms_norm_eps`)
/// with the case's weight, fused with the layer's RoPE.
#[test]
fn qwen3_qknorm_rope_via_loader() {
    let v = case("qwen3_qknorm_rope");
    let positions = u32s(&v["positions"]);
    let (heads, hd) = (v["heads"].as_u64().unwrap() as usize, v["head_dim"].as_u64().unwrap() as usize);
    let x = f32s(&v["x"]);
    let weight = f32s(&v["qk_norm"]["weight"]);
    let view = View::token_major(positions.len(), heads, hd);
    for (form, model) in models(&v) {
        let spec = model.qk_norm().unwrap().unwrap_or_else(|| panic!("{form}: no qk norm"));
        assert_eq!(spec.kind, QkNormKind::RmsBefore(WeightOffset::Zero), "{form}");
        assert_eq!(spec.eps, v["qk_norm"]["eps"].as_f64().unwrap() as f32, "{form}");
        for layer in [0, 35] {
            assert_eq!(model.qk_norm_for_layer(layer).unwrap(), Some(spec), "{form}: layer {layer}");
        }
        assert_eq!(model.qk_norm_for_layer(36).unwrap(), None, "{form}: past the layers");
        let norm = spec.with_weights(Some((&weight, &weight))).unwrap();
        let config = model.rope_for_layer(0).unwrap().clone();
        let rope = Rope::new(config.clone()).unwrap();
        let mut y = x.clone();
        rope.apply_qk_norm(HeadsMut::new(&mut y, view), None, &norm, &ApplyOptions::ids(&positions)).unwrap();
        let err = max_abs(&y, &f64s(&v["out_exact"]));
        let hf = Rope::new(config).unwrap().with_hf_inv_freq(&f32s(&v["hf_inv_freq"])).unwrap();
        let mut z = x.clone();
        hf.apply_qk_norm(HeadsMut::new(&mut z, view), None, &norm, &ApplyOptions::ids(&positions)).unwrap();
        let hf_err = max_abs(&z, &f64s(&v["out_hf"]));
        println!("qwen3_qknorm_rope ({form}) via loader: exact {err:.3e}, hf {hf_err:.3e}");
        assert!(err <= 2e-6, "{form}: {err:e} vs out_exact");
        assert!(hf_err <= 1e-5, "{form}: {hf_err:e} vs out_hf");
        // A weighted form wants weights.
        assert!(spec.with_weights(None).is_err());
    }
}

fn config(name: &str) -> ModelConfig {
    ModelConfig::from_path(format!("{}/tests/data/configs/{name}.json", env!("CARGO_MANIFEST_DIR")))
        .unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// What each real config wires to: MRoPE style, vision layout / axes / offset, QK-norm form
/// per layer.
#[test]
fn operations_of_every_multimodal_config() {
    for form in ["published", "resaved"] {
        for (name, style) in [
            ("qwen2-vl-7b-instruct", MRopeStyle::Sectioned),
            ("qwen2.5-vl-7b-instruct", MRopeStyle::Sectioned),
            ("qwen3-vl-8b-instruct", MRopeStyle::Interleaved),
        ] {
            let m = config(&format!("{name}-{form}"));
            assert_eq!(m.mrope_rope().unwrap().map(|r| r.style()), Some(style), "{name} {form}");
            let vit = m.vision_rope().unwrap().expect("vision RoPE");
            assert_eq!(vit.rope().config().layout, PairLayout::HalfSplit, "{name} {form}");
        }
        let qwen3vl = config(&format!("qwen3-vl-8b-instruct-{form}"));
        assert_eq!(
            qwen3vl.qk_norm().unwrap().map(|s| s.kind),
            Some(QkNormKind::RmsBefore(WeightOffset::Zero))
        );
        for name in ["qwen2-vl-7b-instruct", "qwen2.5-vl-7b-instruct"] {
            assert_eq!(config(&format!("{name}-{form}")).qk_norm().unwrap(), None, "{name}: no qk norm");
        }

        let llama4 = config(&format!("llama-4-scout-17b-16e-instruct-{form}"));
        assert!(llama4.mrope_rope().unwrap().is_none());
        let spec = llama4.vision.clone().expect("Llama 4 vision RoPE");
        assert_eq!(
            (spec.layout, spec.axes, spec.position_offset),
            (PairLayout::Interleaved, [VisionAxis::Col, VisionAxis::Row], 1)
        );
        assert_eq!(llama4.vision_rope().unwrap().unwrap().rope().config().layout, PairLayout::Interleaved);
        let (mut x1, mut y1) = ([0u32; 2], [0u32; 2]);
        spec.fill_position_ids(&[0, 5], &[3, 0], &mut x1, &mut y1).unwrap();
        assert_eq!((x1, y1), ([4, 1], [1, 6]), "[x + 1, y + 1]");
        let qk = llama4.qk_norm().unwrap().expect("use_qk_norm");
        assert_eq!(qk.kind, QkNormKind::L2After);
        assert_eq!(f64::from(qk.eps), f64::from(llama4.rms_norm_eps.unwrap() as f32));
        assert_eq!(llama4.qk_norm_for_layer(0).unwrap(), Some(qk), "a RoPE layer");
        assert_eq!(llama4.qk_norm_for_layer(3).unwrap(), None, "a NoPE layer has no qk norm");
        assert!(matches!(qk.with_weights(None), Ok(rope_kernels::QkNorm::L2After { .. })));
        assert!(qk.with_weights(Some((&[1.0], &[1.0]))).is_err(), "weights for the weightless norm");

        for name in ["gemma-3-1b-it", "gemma-3-27b-it"] {
            let g = config(&format!("{name}-{form}"));
            assert_eq!(g.qk_norm().unwrap().map(|s| s.kind), Some(QkNormKind::RmsBefore(WeightOffset::One)));
            assert!(g.vision_rope().unwrap().is_none() && g.mrope_rope().unwrap().is_none(), "{name}");
        }
        let q3 = config(&format!("qwen3-8b-{form}"));
        assert_eq!(
            q3.qk_norm().unwrap().map(|s| (s.kind, s.eps)),
            Some((QkNormKind::RmsBefore(WeightOffset::Zero), 1e-6))
        );
    }
    for name in ["llama-3.1-8b", "mistral-7b-v0.1", "gpt-j-6b", "phi-2"] {
        let m = config(name);
        assert!(
            m.qk_norm().unwrap().is_none()
                && m.mrope_rope().unwrap().is_none()
                && m.vision_rope().unwrap().is_none(),
            "{name}"
        );
    }
}

/// What the wiring cannot represent is an error naming the field.
#[test]
fn wiring_errors_name_the_field() {
    let load = |json: &str| ModelConfig::from_json_str(json).unwrap();
    let olmo2 = load(
        r#"{"model_type": "olmo2", "hidden_size": 4096, "num_attention_heads": 32, "rms_norm_eps": 1e-6}"#,
    );
    assert!(
        matches!(olmo2.qk_norm(), Err(rope_kernels::hf_config::ConfigError::Conflict { field, .. }) if field == "model_type")
    );
    let cohere = load(
        r#"{"model_type": "cohere", "hidden_size": 4096, "num_attention_heads": 32, "use_qk_norm": true}"#,
    );
    assert!(
        matches!(cohere.qk_norm(), Err(rope_kernels::hf_config::ConfigError::Conflict { field, .. }) if field == "use_qk_norm")
    );
    let bad_eps = load(
        r#"{"model_type": "qwen3", "head_dim": 128, "hidden_size": 4096, "num_attention_heads": 32, "rms_norm_eps": -1}"#,
    );
    assert!(
        matches!(bad_eps.qk_norm(), Err(rope_kernels::hf_config::ConfigError::Invalid { field, error: rope_kernels::RopeError::InvalidNormEps }) if field == "rms_norm_eps")
    );
    let huge_eps = load(
        r#"{"model_type": "gemma3_text", "head_dim": 256, "num_attention_heads": 4, "num_hidden_layers": 6, "rms_norm_eps": 1e300}"#,
    );
    assert!(
        matches!(huge_eps.qk_norm(), Err(rope_kernels::hf_config::ConfigError::Invalid { field, .. }) if field == "rms_norm_eps")
    );
    // A vision theta the operation refuses is refused by the load (found by the config_json
    // fuzz target: 1e-300 passed the loader's `> 0` check, then VisionRope::new failed).
    let tiny = r#"{"model_type": "qwen2_vl", "hidden_size": 3584, "num_attention_heads": 28,
        "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]},
        "vision_config": {"embed_dim": 1280, "num_heads": 16, "rope_theta": 1e-300}}"#;
    assert!(
        matches!(ModelConfig::from_json_str(tiny),
        Err(rope_kernels::hf_config::ConfigError::Invalid { field, error: rope_kernels::RopeError::InvalidTheta })
            if field == "vision_config.rope_theta"),
        "{:?}",
        ModelConfig::from_json_str(tiny)
    );
    // Vision: overflowing positions and mismatched lengths are call errors, nothing written.
    let llama4 = config("llama-4-scout-17b-16e-instruct-published");
    let spec = llama4.vision.unwrap();
    let (mut a, mut b) = ([7u32; 1], [7u32; 1]);
    assert_eq!(
        spec.fill_position_ids(&[u32::MAX], &[0], &mut a, &mut b),
        Err(rope_kernels::RopeError::PositionOverflow)
    );
    assert!(matches!(
        spec.fill_position_ids(&[0, 1], &[0], &mut a, &mut b),
        Err(rope_kernels::RopeError::PositionCountMismatch { .. })
    ));
    assert_eq!((a, b), ([7], [7]), "nothing written on error");
}
