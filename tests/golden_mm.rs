//! Golden cases of multimodal RoPE (issue 15): Qwen2-VL sectioned MRoPE, Qwen3-VL
//! interleaved MRoPE and the Qwen2-VL ViT's 2-D RoPE, from `tests/data/golden/mm/` (copied
//! from the shared set; transformers 5.24 in f32 for `out_hf`, the f64 formulas for
//! `out_exact`).
//!
//! Acceptance: `AngleMode::Exact` within 2e-6 of `out_exact` (the f32 kernel's own error,
//! as in `tests/golden.rs`), `HfCompatible` with the case's `hf_inv_freq` within 1e-5 of
//! `out_hf`; the position helpers reproduce `position_ids`; on the fly and a per-token table
//! agree bit for bit.

use std::path::PathBuf;

use rope_kernels::{
    vision_position_ids, AxisOptions, CosSinTable, HeadsMut, MRope, MRopeIndex, MRopeStyle, RopeConfig, View,
    VisionRope,
};
use serde_json::Value;

fn load(name: &str) -> Value {
    let path: PathBuf =
        [env!("CARGO_MANIFEST_DIR"), "tests", "data", "golden", "mm", &format!("{name}.json")]
            .iter()
            .collect();
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

fn f64s(v: &Value) -> Vec<f64> {
    v.as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect()
}

fn u32s(v: &Value) -> Vec<u32> {
    v.as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as u32).collect()
}

fn streams(v: &Value) -> Vec<Vec<u32>> {
    v["position_ids"].as_array().unwrap().iter().map(u32s).collect()
}

fn max_diff(y: &[f32], want: &[f64]) -> f64 {
    assert_eq!(y.len(), want.len());
    y.iter().zip(want).map(|(a, b)| (f64::from(*a) - b).abs()).fold(0.0, f64::max)
}

/// Runs `apply` on the fly and with a per-token table filled by `fill`; asserts both agree
/// bit for bit and returns the output.
fn run<const N: usize>(
    x: &[f32],
    view: View,
    ids: [&[u32]; N],
    pairs: usize,
    fill: impl Fn([&[u32]; N], &mut [f32], &mut [f32]),
    apply: impl Fn(HeadsMut<'_, f32>, &AxisOptions<'_, N>),
) -> Vec<f32> {
    let mut y = x.to_vec();
    apply(HeadsMut::new(&mut y, view), &AxisOptions::ids(ids));
    let tokens = ids[0].len();
    let (mut cos, mut sin) = (vec![0.0f32; tokens * pairs], vec![0.0f32; tokens * pairs]);
    fill(ids, &mut cos, &mut sin);
    let mut z = x.to_vec();
    apply(HeadsMut::new(&mut z, view), &AxisOptions::table(CosSinTable::new(&cos, &sin, pairs).unwrap()));
    assert_eq!(
        y.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
        z.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
    );
    y
}

fn mrope_case(name: &str, style: MRopeStyle) {
    let v = load(name);
    let hd = v["head_dim"].as_u64().unwrap() as usize;
    let heads = v["heads"].as_u64().unwrap() as usize;
    let theta = v["params"]["rope_theta"].as_f64().unwrap();
    let section: Vec<usize> = u32s(&v["mrope_section"]).iter().map(|&s| s as usize).collect();
    let section = [section[0], section[1], section[2]];
    let pos = streams(&v);
    let x: Vec<f32> = f64s(&v["x"]).iter().map(|&a| a as f32).collect();
    let tokens = pos[0].len();
    let view = View::token_major(tokens, heads, hd);

    // The position helper reproduces `get_rope_index`.
    let types: Vec<u8> = u32s(&v["token_types"]).iter().map(|&t| t as u8).collect();
    let grids: Vec<[u32; 3]> = v["image_grid_thw"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
            let g = u32s(g);
            [g[0], g[1], g[2]]
        })
        .collect();
    let index = MRopeIndex {
        token_types: &types,
        image_grid_thw: &grids,
        spatial_merge_size: v["spatial_merge_size"].as_u64().unwrap() as u32,
        ..MRopeIndex::default()
    };
    let (got, next) = index.to_vecs().unwrap();
    assert_eq!(got.to_vec(), pos, "{name}: position_ids");
    assert_eq!(u64::from(next), v["seq_len"].as_u64().unwrap(), "{name}: next position");

    let mrope = MRope::new(RopeConfig::new(hd, theta), section, style).unwrap();
    let freq_stream = u32s(&v["freq_stream"]);
    for (j, &s) in freq_stream.iter().enumerate() {
        assert_eq!(mrope.stream_of_pair(j), Some(s as usize), "{name}: stream of pair {j}");
    }
    let ids = [&pos[0][..], &pos[1][..], &pos[2][..]];
    let pairs = hd / 2;
    let go = |m: &MRope| {
        run(&x, view, ids, pairs, |i, c, s| m.fill_table(i, c, s).unwrap(), |h, o| m.apply(h, o).unwrap())
    };
    let exact = max_diff(&go(&mrope), &f64s(&v["out_exact"]));
    let hf_inv: Vec<f32> = f64s(&v["hf_inv_freq"]).iter().map(|&a| a as f32).collect();
    let hf = mrope.with_hf_inv_freq(&hf_inv).unwrap();
    let hf_err = max_diff(&go(&hf), &f64s(&v["out_hf"]));
    println!("{name}: exact {exact:.3e}, hf {hf_err:.3e}");
    assert!(exact <= 2e-6, "{name}: exact error {exact:e}");
    assert!(hf_err <= 1e-5, "{name}: hf error {hf_err:e}");
}

#[test]
fn qwen2vl_mrope() {
    mrope_case("qwen2vl_mrope", MRopeStyle::Sectioned);
}

#[test]
fn qwen3vl_mrope_interleaved() {
    mrope_case("qwen3vl_mrope_interleaved", MRopeStyle::Interleaved);
}

#[test]
fn qwen2vl_vision_4x6() {
    let name = "qwen2vl_vision_4x6";
    let v = load(name);
    let hd = v["head_dim"].as_u64().unwrap() as usize;
    let heads = v["heads"].as_u64().unwrap() as usize;
    let theta = v["params"]["rope_theta"].as_f64().unwrap();
    let pos = streams(&v);
    let tokens = pos[0].len();
    let g = u32s(&v["grid_thw"].as_array().unwrap()[0]);
    let (mut h, mut w) = (vec![0u32; tokens], vec![0u32; tokens]);
    let m = v["spatial_merge_size"].as_u64().unwrap() as u32;
    assert_eq!(vision_position_ids([g[0], g[1], g[2]], m, &mut h, &mut w).unwrap(), tokens);
    assert_eq!(vec![h, w], pos, "{name}: position_ids");

    let x: Vec<f32> = f64s(&v["x"]).iter().map(|&a| a as f32).collect();
    let view = View::token_major(tokens, heads, hd);
    let vit = VisionRope::new(RopeConfig::new(hd, theta)).unwrap();
    let exact_inv = f64s(&v["exact_inv_freq"]);
    for (a, b) in vit.axis_frequencies().inv_freq().iter().zip(&exact_inv) {
        assert!((a - b).abs() <= 1e-12 * b.abs(), "{name}: inv_freq {a} vs {b}");
    }
    let ids = [&pos[0][..], &pos[1][..]];
    let go = |m: &VisionRope| {
        run(&x, view, ids, hd / 2, |i, c, s| m.fill_table(i, c, s).unwrap(), |h, o| m.apply(h, o).unwrap())
    };
    let exact = max_diff(&go(&vit), &f64s(&v["out_exact"]));
    let hf_inv: Vec<f32> = f64s(&v["hf_inv_freq"]).iter().map(|&a| a as f32).collect();
    let hf = vit.with_hf_inv_freq(&hf_inv).unwrap();
    let hf_err = max_diff(&go(&hf), &f64s(&v["out_hf"]));
    println!("{name}: exact {exact:.3e}, hf {hf_err:.3e}");
    assert!(exact <= 2e-6, "{name}: exact error {exact:e}");
    assert!(hf_err <= 1e-5, "{name}: hf error {hf_err:e}");
}
