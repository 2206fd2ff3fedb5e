//! Golden cases of the context-extension scalings (tests/data/golden, produced with
//! transformers `modeling_rope_utils.py` beside an f64 evaluation; see
//! ../shared/golden/README.md).
//!
//! For each case: `inv_freq` and `attention_factor` equal `exact_*` to 1e-12 relative;
//! the output matches `out_exact` within 2e-6 absolute in `Exact` mode, and `out_hf` within
//! 2e-6 absolute in `HfCompatible` mode with the case's `hf_inv_freq` as the f32 table.

use rope_kernels::{
    ApplyOptions, HeadsMut, LongRopeParams, PairLayout, Rope, RopeConfig, Scaling, View, YarnParams,
};
use serde_json::Value;

struct Case {
    name: String,
    config: RopeConfig,
    heads: usize,
    seq_len: u64,
    positions: Vec<u32>,
    hf_inv_freq: Vec<f32>,
    exact_inv_freq: Vec<f64>,
    exact_attention_factor: f64,
    x: Vec<f32>,
    out_hf: Vec<f64>,
    out_exact: Vec<f64>,
}

fn f64s(v: &Value) -> Vec<f64> {
    v.as_array().expect("array").iter().map(|x| x.as_f64().expect("number")).collect()
}

fn num(p: &Value, key: &str) -> f64 {
    p[key].as_f64().unwrap_or_else(|| panic!("missing {key}"))
}

/// The case's HF `rope_parameters`, mapped by hand (independently of `hf_config`).
fn scaling(p: &Value, max_position_embeddings: u64) -> Scaling {
    match p["rope_type"].as_str().unwrap() {
        "linear" => Scaling::Linear { factor: num(p, "factor") },
        "dynamic" => Scaling::DynamicNtk { factor: num(p, "factor"), max_position_embeddings },
        "llama3" => Scaling::Llama3 {
            factor: num(p, "factor"),
            low_freq_factor: num(p, "low_freq_factor"),
            high_freq_factor: num(p, "high_freq_factor"),
            original_max_position_embeddings: num(p, "original_max_position_embeddings") as u64,
        },
        "yarn" => {
            let mut y = YarnParams::new(num(p, "factor"), num(p, "original_max_position_embeddings") as u64);
            if let Some(b) = p["beta_fast"].as_f64() {
                y.beta_fast = b;
            }
            if let Some(b) = p["beta_slow"].as_f64() {
                y.beta_slow = b;
            }
            if let Some(t) = p["truncate"].as_bool() {
                y.truncate = t;
            }
            Scaling::Yarn(y)
        }
        "longrope" => {
            let orig = num(p, "original_max_position_embeddings") as u64;
            let factor = max_position_embeddings as f64 / orig as f64;
            Scaling::LongRope(
                LongRopeParams::new(&f64s(&p["short_factor"]), &f64s(&p["long_factor"]), orig, factor)
                    .unwrap(),
            )
        }
        other => panic!("unexpected rope_type {other}"),
    }
}

fn load(name: &str) -> Case {
    let path = format!("{}/tests/data/golden/{name}.json", env!("CARGO_MANIFEST_DIR"));
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let layout = match v["layout"].as_str().unwrap() {
        "half" => PairLayout::HalfSplit,
        "interleaved" => PairLayout::Interleaved,
        other => panic!("layout {other}"),
    };
    let p = &v["params"];
    let config = RopeConfig::new(v["head_dim"].as_u64().unwrap() as usize, num(p, "rope_theta"))
        .with_rotary_dim(v["rotary_dim"].as_u64().unwrap() as usize)
        .with_layout(layout)
        .with_scaling(scaling(p, v["max_position_embeddings"].as_u64().unwrap()));
    Case {
        name: name.to_string(),
        config,
        heads: v["heads"].as_u64().unwrap() as usize,
        seq_len: v["seq_len"].as_u64().unwrap(),
        positions: v["positions"].as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as u32).collect(),
        hf_inv_freq: f64s(&v["hf_inv_freq"]).into_iter().map(|x| x as f32).collect(),
        exact_inv_freq: f64s(&v["exact_inv_freq"]),
        exact_attention_factor: num(&v, "exact_attention_factor"),
        x: f64s(&v["x"]).into_iter().map(|x| x as f32).collect(),
        out_hf: f64s(&v["out_hf"]),
        out_exact: f64s(&v["out_exact"]),
    }
}

const CASES: [&str; 6] = [
    "llama31_llama3",
    "qwen25_yarn",
    "linear_x4",
    "dynamic_ntk_grown",
    "longrope_long",
    "gptoss_yarn_notruncate",
];

fn rel(a: f64, b: f64) -> f64 {
    if b == 0.0 {
        a.abs()
    } else {
        ((a - b) / b).abs()
    }
}

fn run(rope: &Rope, c: &Case) -> Vec<f32> {
    let mut out = c.x.clone();
    let view = View::token_major(c.positions.len(), c.heads, c.config.head_dim);
    rope.apply(HeadsMut::new(&mut out, view), &ApplyOptions::ids(&c.positions)).unwrap();
    out
}

fn max_abs(a: &[f32], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).map(|(x, y)| (f64::from(*x) - y).abs()).fold(0.0, f64::max)
}

#[test]
fn golden_frequencies_match_exact() {
    for name in CASES {
        let c = load(name);
        // The golden `seq_len` is what transformers' dynamic/longrope update saw.
        assert_eq!(c.seq_len, u64::from(*c.positions.iter().max().unwrap()) + 1, "{name}");
        let rope = Rope::new(c.config.clone()).unwrap();
        let f = rope.frequencies_at(c.seq_len).unwrap();
        assert_eq!(f.inv_freq().len(), c.exact_inv_freq.len(), "{name}");
        for (i, (got, want)) in f.inv_freq().iter().zip(&c.exact_inv_freq).enumerate() {
            assert!(rel(*got, *want) <= 1e-12, "{name}: inv_freq[{i}] = {got}, exact {want}");
        }
        let worst = f.inv_freq().iter().zip(&c.exact_inv_freq).map(|(a, b)| rel(*a, *b)).fold(0.0, f64::max);
        println!("{name}: inv_freq max rel error {worst:.3e}");
        let af = f.attention_factor();
        assert!(rel(af, c.exact_attention_factor) <= 1e-12, "{name}: attention_factor {af}");
    }
}

#[test]
fn golden_outputs_exact_mode() {
    for name in CASES {
        let c = load(name);
        let rope = Rope::new(c.config.clone()).unwrap();
        let err = max_abs(&run(&rope, &c), &c.out_exact);
        println!("{}: exact mode, max abs error vs out_exact {err:.3e}", c.name);
        assert!(err <= 2e-6, "{}: max abs error {err:e} vs out_exact", c.name);
    }
}

#[test]
fn golden_outputs_hf_compatible_mode() {
    for name in CASES {
        let c = load(name);
        let rope = Rope::new(c.config.clone()).unwrap().with_hf_inv_freq(&c.hf_inv_freq).unwrap();
        let out = run(&rope, &c);
        let err = max_abs(&out, &c.out_hf);
        println!("{}: HF mode, max abs error vs out_hf {err:.3e}", c.name);
        assert!(err <= 2e-6, "{}: max abs error {err:e} vs out_hf", c.name);
        // A second call uses the same caller table (nothing is recomputed away).
        assert_eq!(run(&rope, &c), out, "{}", c.name);
    }
}

/// The two modes differ where the f32 angle has drifted (large positions), so the test
/// above really exercises the HF angle path, and the exact one the f64 path.
#[test]
fn golden_modes_are_distinguishable() {
    let c = load("llama31_llama3");
    let exact = Rope::new(c.config.clone()).unwrap();
    let hf = Rope::new(c.config.clone()).unwrap().with_hf_inv_freq(&c.hf_inv_freq).unwrap();
    assert!(max_abs(&run(&exact, &c), &c.out_hf) > 1e-4);
    assert!(max_abs(&run(&hf, &c), &c.out_exact) > 1e-4);
}
