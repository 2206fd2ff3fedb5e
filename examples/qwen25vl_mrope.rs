//! Load a Qwen2.5-VL `config.json` and apply its multimodal RoPE (MRoPE) to q and k of a
//! text + image prompt, with the three position streams from `MRopeIndex`:
//!
//! ```text
//! cargo run --example qwen25vl_mrope [-- path/to/config.json]
//! ```
//!
//! README's "Multimodal RoPE from a config.json" shows these lines.

use rope_kernels::hf_config::ModelConfig;
use rope_kernels::{HeadsMut, MRopeIndex, MRopeOptions, View, TOKEN_IMAGE, TOKEN_TEXT};

const QWEN25_VL: &str = include_str!("../tests/data/configs/qwen2.5-vl-7b-instruct-published.json");

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let model = match std::env::args().nth(1) {
        Some(path) => ModelConfig::from_path(path)?,
        None => ModelConfig::from_json_str(QWEN25_VL)?,
    };
    // MRope from `mrope_section` and the text RoPE (sectioned for Qwen2/2.5-VL).
    let mrope = model.mrope_rope()?.ok_or("not an MRoPE model")?;

    // 4 text tokens, an image of 4x6 patches (2x3 tokens after the 2x2 merge), 4 text tokens.
    let mut types = vec![TOKEN_TEXT; 4];
    types.extend([TOKEN_IMAGE; 6]);
    types.extend([TOKEN_TEXT; 4]);
    let index = MRopeIndex {
        token_types: &types,
        image_grid_thw: &[[1, 4, 6]],
        spatial_merge_size: 2,
        ..Default::default()
    };
    let ([t, h, w], next) = index.to_vecs()?;

    let (n, hd) = (types.len(), model.head_dim);
    let (heads, kv) = (model.num_attention_heads, model.num_key_value_heads);
    let mut q = vec![0.5f32; n * heads * hd];
    let mut k = vec![0.5f32; n * kv * hd];
    mrope.apply_qk(
        HeadsMut::new(&mut q, View::token_major(n, heads, hd)),
        Some(HeadsMut::new(&mut k, View::token_major(n, kv, hd))),
        &MRopeOptions::ids([&t, &h, &w]),
    )?;

    println!("{} {:?}: mrope_section {:?}", model.model_type, mrope.style(), mrope.mrope_section());
    println!("t {t:?}\nh {h:?}\nw {w:?}\nnext position {next}");
    println!("q[token 5, head 0, 0..4] = {:?}", &q[5 * heads * hd..5 * heads * hd + 4]);
    Ok(())
}
