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
use rope_kernels::{Apply, HeadsMut, Layout, Rope, RopeConfig, View};
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
    let view = View::bshd(positions.len(), heads, rope.config().head_dim);
    rope.apply(HeadsMut::new(&mut out, view), &Apply::ids(positions)).unwrap();
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
        "half" => Layout::HalfSplit,
        "interleaved" => Layout::Interleaved,
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
    half.layout = Layout::HalfSplit;
    assert!(max_abs(&run(&Rope::new(half).unwrap(), &v, &positions), &f64s(&v["out_exact"])) > 1e-3);
}
