//! The `config_json` target: random and mutated real `config.json` text into
//! [`ModelConfig::from_json_str`]. The loader must return a configuration or an error,
//! never panic; a configuration must be usable: its `RopeConfig` validates, `Rope::new`
//! accepts it, and applying it to a small q/k pair (GQA head counts of the model, positions
//! 0, 1 and the last of the context, and past LongRoPE's original length) succeeds with
//! finite output and untouched pass-through dimensions. Error messages must format.
//!
//! Every layer type's configuration builds a `Rope` too, `rope_for_layer` answers for every
//! layer, MRoPE sections sum to `rotary_dim / 2`, a vision head is a multiple of 4, and the
//! warnings format. The wired operations (`mrope_rope`, `vision_rope`, `qk_norm_for_layer`)
//! build and run on what loaded (or the q/k norm is an error that formats).
//!
//! Input: the first byte picks the mode. Even: the rest is the text (lossy UTF-8). Odd: a
//! structured mutation of one of the real configs in `tests/data/configs` ([`CONFIGS`], then
//! the nested multimodal / per-layer-type ones, [`NESTED_CONFIGS`]): the next byte picks the
//! file, then each 3-byte group `(op, key, value)` sets or removes a field the loader reads
//! (in the text part, i.e. `text_config` when the file has one, or its rope dict; with
//! `key & 0x80` the outermost object, with `key & 0x40` `vision_config`) with a value from
//! [`value`].

use rope_kernels::hf_config::ModelConfig;
use rope_kernels::{ApplyOptions, HeadsMut, MRopeOptions, Rope, Scaling, View, VisionOptions};
use serde_json::{json, Map, Value};

use super::input::Input;

/// The real configs, embedded so the target needs no files at run time.
pub const CONFIGS: [(&str, &str); 10] = [
    ("deepseek-v2-lite", include_str!("../data/configs/deepseek-v2-lite.json")),
    ("gpt-j-6b", include_str!("../data/configs/gpt-j-6b.json")),
    ("gpt-neox-20b", include_str!("../data/configs/gpt-neox-20b.json")),
    ("gpt-oss-20b", include_str!("../data/configs/gpt-oss-20b.json")),
    ("llama-2-7b", include_str!("../data/configs/llama-2-7b.json")),
    ("llama-3.1-8b", include_str!("../data/configs/llama-3.1-8b.json")),
    ("mistral-7b-v0.1", include_str!("../data/configs/mistral-7b-v0.1.json")),
    ("phi-2", include_str!("../data/configs/phi-2.json")),
    ("phi-3-128k-su", include_str!("../data/configs/phi-3-128k-su.json")),
    ("qwen2.5-7b-instruct-yarn", include_str!("../data/configs/qwen2.5-7b-instruct-yarn.json")),
];

/// The multimodal and per-layer-type configs (nested `text_config` / `vision_config`,
/// `rope_parameters` keyed by layer type, MRoPE, Llama 4's `no_rope_layers`); not in
/// [`CONFIGS`], whose list the other targets' seeds follow.
pub const NESTED_CONFIGS: [(&str, &str); 14] = [
    ("gemma-3-1b-it-published", include_str!("../data/configs/gemma-3-1b-it-published.json")),
    ("gemma-3-1b-it-resaved", include_str!("../data/configs/gemma-3-1b-it-resaved.json")),
    ("gemma-3-27b-it-published", include_str!("../data/configs/gemma-3-27b-it-published.json")),
    ("gemma-3-27b-it-resaved", include_str!("../data/configs/gemma-3-27b-it-resaved.json")),
    (
        "llama-4-scout-published",
        include_str!("../data/configs/llama-4-scout-17b-16e-instruct-published.json"),
    ),
    ("llama-4-scout-resaved", include_str!("../data/configs/llama-4-scout-17b-16e-instruct-resaved.json")),
    ("qwen2-vl-7b-published", include_str!("../data/configs/qwen2-vl-7b-instruct-published.json")),
    ("qwen2-vl-7b-resaved", include_str!("../data/configs/qwen2-vl-7b-instruct-resaved.json")),
    ("qwen2.5-vl-7b-published", include_str!("../data/configs/qwen2.5-vl-7b-instruct-published.json")),
    ("qwen2.5-vl-7b-resaved", include_str!("../data/configs/qwen2.5-vl-7b-instruct-resaved.json")),
    ("qwen3-8b-published", include_str!("../data/configs/qwen3-8b-published.json")),
    ("qwen3-8b-resaved", include_str!("../data/configs/qwen3-8b-resaved.json")),
    ("qwen3-vl-8b-published", include_str!("../data/configs/qwen3-vl-8b-instruct-published.json")),
    ("qwen3-vl-8b-resaved", include_str!("../data/configs/qwen3-vl-8b-instruct-resaved.json")),
];

/// [`CONFIGS`] then [`NESTED_CONFIGS`]: the files structured inputs mutate.
pub fn all_configs() -> Vec<(&'static str, &'static str)> {
    CONFIGS.iter().chain(NESTED_CONFIGS.iter()).copied().collect()
}

/// Every field the loader reads at the top level (or in `text_config`).
pub const TOP_KEYS: [&str; 31] = [
    "model_type",
    "num_attention_heads",
    "n_head",
    "num_key_value_heads",
    "head_dim",
    "hidden_size",
    "n_embd",
    "qk_rope_head_dim",
    "qk_nope_head_dim",
    "rotary_dim",
    "partial_rotary_factor",
    "rotary_pct",
    "rope_theta",
    "rotary_emb_base",
    "max_position_embeddings",
    "n_positions",
    "original_max_position_embeddings",
    "rope_scaling",
    "rope_parameters",
    "rope_interleave",
    "text_config",
    "vision_config",
    "num_hidden_layers",
    "layer_types",
    "sliding_window_pattern",
    "_sliding_window_pattern",
    "rope_local_base_freq",
    "no_rope_layers",
    "no_rope_layer_interval",
    "use_qk_norm",
    "rms_norm_eps",
];

/// Every field the loader reads in `vision_config`.
pub const VISION_KEYS: [&str; 11] = [
    "model_type",
    "hidden_size",
    "embed_dim",
    "num_heads",
    "num_attention_heads",
    "rope_theta",
    "rope_parameters",
    "spatial_merge_size",
    "patch_size",
    "image_size",
    "rope_scaling",
];

/// Every field the loader reads in the rope dict.
pub const ROPE_KEYS: [&str; 19] = [
    "rope_type",
    "type",
    "factor",
    "rope_theta",
    "alpha",
    "original_max_position_embeddings",
    "beta_fast",
    "beta_slow",
    "mscale",
    "mscale_all_dim",
    "attention_factor",
    "truncate",
    "low_freq_factor",
    "high_freq_factor",
    "short_factor",
    "long_factor",
    "partial_rotary_factor",
    "mrope_section",
    "mrope_interleaved",
];

/// Values to set: every JSON type, boundary numbers, the rope type names, arrays.
pub fn value(i: u8, rng: u8) -> Value {
    match i % 52 {
        0 => Value::Null,
        1 => json!(true),
        2 => json!(false),
        3 => json!(0),
        4 => json!(-1),
        5 => json!(1),
        6 => json!(2),
        7 => json!(0.5),
        8 => json!(1e308),
        9 => json!(-1e308),
        10 => json!(1e-320),
        11 => json!(4096),
        12 => json!(4096.0),
        13 => json!(4096.5),
        14 => json!(u64::MAX),
        15 => json!(i64::MIN),
        16 => json!(9_007_199_254_740_993.0f64),
        17 => json!("x"),
        18 => json!("default"),
        19 => json!("linear"),
        20 => json!("dynamic"),
        21 => json!("yarn"),
        22 => json!("llama3"),
        23 => json!("longrope"),
        24 => json!("su"),
        25 => json!("proportional"),
        26 => json!("mrope"),
        27 => json!([]),
        28 => json!({}),
        29 => Value::Array((0..usize::from(rng)).map(|k| json!(1.0 + k as f64 / 4.0)).collect()),
        30 => Value::Array((0..usize::from(rng % 4 + 62)).map(|k| json!(1.0 + k as f64)).collect()),
        31 => json!([1.0, "a", null]),
        32 => json!({"rope_type": "linear", "factor": 2.0}),
        33 => {
            json!({"full_attention": {"rope_type": "default"}, "sliding_attention": {"rope_type": "default"}})
        }
        34 => json!(usize::from(rng) * 64),
        35 => json!(f64::from(rng) / 16.0),
        36 => json!(1e-300),
        37 => json!(1_000_000_000_000u64),
        38 => json!(32),
        39 => json!(128),
        40 => json!([16, 24, 24]),
        41 => json!([24, 20, 20]),
        42 => json!([8, 12, 12]),
        43 => json!([64, 0, 0]),
        44 => json!([0, 64, 0]),
        45 => json!(["sliding_attention", "full_attention"]),
        46 => Value::Array(
            (0..usize::from(rng % 8 + 1))
                .map(|k| json!(if k % 2 == 0 { "sliding_attention" } else { "full_attention" }))
                .collect(),
        ),
        47 => Value::Array((0..usize::from(rng % 64)).map(|k| json!(u8::from(k % 4 != 3))).collect()),
        48 => json!({"rope_type": "axial", "rope_theta": 10000.0}),
        49 => {
            json!({"full_attention": {"rope_type": "linear", "factor": 8.0}, "sliding_attention": {"rope_theta": 1e4}})
        }
        50 => json!({"model_type": "qwen2_vl", "embed_dim": 1280, "num_heads": 16}),
        _ => json!("mrope"),
    }
}

/// Applies mutations to a real config.
pub fn mutate(base: &str, ops: &[u8]) -> String {
    let mut v: Value = serde_json::from_str(base).expect("shipped configs are JSON");
    for op in ops.chunks_exact(3) {
        let (kind, key, val) = (op[0], op[1], op[2]);
        let outer = v.as_object_mut().expect("shipped configs are objects");
        let part = if key & 0x40 != 0 {
            "vision_config"
        } else if key & 0x80 == 0 && outer.get("text_config").is_some_and(Value::is_object) {
            "text_config"
        } else {
            ""
        };
        let obj = match outer.get_mut(part) {
            Some(Value::Object(inner)) => inner,
            _ => outer,
        };
        let in_rope = kind & 1 == 1 && part != "vision_config";
        let target: &mut Map<String, Value> = if in_rope {
            let dict = if obj.contains_key("rope_parameters") { "rope_parameters" } else { "rope_scaling" };
            let entry = obj.entry(dict).or_insert_with(|| json!({}));
            if !entry.is_object() {
                *entry = json!({});
            }
            entry.as_object_mut().expect("just made an object")
        } else {
            obj
        };
        let key = key & 0x3f;
        let name = if part == "vision_config" {
            VISION_KEYS[usize::from(key) % VISION_KEYS.len()]
        } else if in_rope {
            ROPE_KEYS[usize::from(key) % ROPE_KEYS.len()]
        } else {
            TOP_KEYS[usize::from(key) % TOP_KEYS.len()]
        };
        if kind & 6 == 6 {
            target.remove(name);
        } else {
            target.insert(name.to_string(), value(val, kind >> 3));
        }
    }
    serde_json::to_string(&v).expect("a Value serializes")
}

/// The text an input decodes to.
pub fn text(bytes: &[u8]) -> String {
    let mut r = Input::new(bytes);
    if r.u8() & 1 == 0 {
        return String::from_utf8_lossy(r.rest()).into_owned();
    }
    let all = all_configs();
    let (_, base) = all[r.below(all.len())];
    mutate(base, r.rest())
}

/// Runs one `config_json` input; returns whether it loaded.
pub fn check(bytes: &[u8]) -> bool {
    let json = text(bytes);
    let m = match ModelConfig::from_json_str(&json) {
        Ok(m) => m,
        Err(e) => {
            let _ = e.to_string();
            return false;
        }
    };
    let ctx = || format!("{m:?}\nfrom {json}");
    for w in m.warnings() {
        assert!(!w.is_empty(), "{}", ctx());
    }
    for l in &m.layer_ropes {
        assert_eq!(l.rope.validate(), Ok(()), "{}: {}", l.layer_type, ctx());
        assert!(Rope::new(l.rope.clone()).is_ok(), "{}: {}", l.layer_type, ctx());
    }
    for i in 0..m.layer_types.len().min(512) + 2 {
        if let Some(r) = m.rope_for_layer(i) {
            assert!(m.layer_ropes.iter().any(|l| &l.rope == r) || *r == m.rope, "{}", ctx());
        }
    }
    if let Some(mr) = &m.mrope {
        assert_eq!(mr.mrope_section.iter().sum::<usize>(), m.rope.rotary_dim / 2, "{}", ctx());
    }
    if let Some(v) = &m.vision {
        assert!(v.head_dim > 0 && v.head_dim % 4 == 0 && v.theta > 0.0, "{}", ctx());
        assert!(v.inv_freq().iter().all(|f| f.is_finite()), "{}", ctx());
    }
    assert!(m.num_attention_heads > 0 && m.num_key_value_heads > 0, "{}", ctx());
    assert_eq!(m.num_attention_heads % m.num_key_value_heads, 0, "{}", ctx());
    assert_eq!(m.rope.head_dim, m.head_dim, "{}", ctx());
    assert_eq!(m.rope.validate(), Ok(()), "{}", ctx());
    let rope = match Rope::new(m.rope.clone()) {
        Ok(r) => r,
        Err(e) => panic!("a loaded configuration is rejected by Rope::new: {e:?}\n{}", ctx()),
    };

    let hd = m.head_dim;
    if hd > 4096 {
        return true; // Loaded and validated; too large a head to rotate here.
    }
    let q_heads = m.num_attention_heads.min(4);
    let kv_heads = m.num_key_value_heads.min(q_heads);
    let mut positions = vec![0u32, 1];
    if let Some(max) = m.max_position_embeddings {
        positions.push(u32::try_from(max.saturating_sub(1)).unwrap_or(u32::MAX));
    }
    if let Scaling::LongRope(p) = &m.rope.scaling {
        positions.push(u32::try_from(p.original_max_position_embeddings).unwrap_or(u32::MAX));
    }
    let tokens = positions.len();
    let x = |heads: usize| -> Vec<f32> {
        (0..tokens * heads * hd).map(|i| ((i % 13) as f32 - 6.0) / 8.0).collect()
    };
    let (q0, k0) = (x(q_heads), x(kv_heads));
    let (mut q, mut k) = (q0.clone(), k0.clone());
    let res = rope.apply_qk(
        HeadsMut::new(&mut q, View::token_major(tokens, q_heads, hd)),
        Some(HeadsMut::new(&mut k, View::head_major(tokens, kv_heads, hd))),
        &ApplyOptions::ids(&positions),
    );
    assert_eq!(res, Ok(()), "apply_qk at positions {positions:?}\n{}", ctx());
    // Finite output for inputs |x| <= 3/4 unless the attention factor makes cos/sin huge.
    let af = rope.frequencies_at(u64::from(*positions.iter().max().unwrap()) + 1).unwrap().attention_factor();
    if af < 1e30 {
        assert!(q.iter().chain(&k).all(|v| v.is_finite()), "non-finite output\n{}", ctx());
    }
    let rd = m.rope.rotary_dim;
    for (a, b) in q.chunks(hd).zip(q0.chunks(hd)).chain(k.chunks(hd).zip(k0.chunks(hd))) {
        assert_eq!(a[rd..], b[rd..], "pass-through changed\n{}", ctx());
    }
    wired_operations(&m, &positions, &ctx);
    true
}

/// The operations the loader wires (`mrope_rope`, `vision_rope`, `qk_norm_for_layer`): a
/// loaded MRoPE / vision spec always builds and runs; the q/k norm is a spec or an error that
/// formats, and a spec runs fused with the layer's RoPE.
fn wired_operations(m: &ModelConfig, positions: &[u32], ctx: &dyn Fn() -> String) {
    let tokens = positions.len();
    let streams = [positions, positions, positions];
    match m.mrope_rope() {
        Ok(Some(mr)) => {
            let mut y = vec![0.25f32; tokens * m.head_dim];
            let r = mr.apply(
                HeadsMut::new(&mut y, View::token_major(tokens, 1, m.head_dim)),
                &MRopeOptions::ids(streams),
            );
            assert_eq!(r, Ok(()), "MRoPE\n{}", ctx());
        }
        Ok(None) => assert!(m.mrope.is_none(), "{}", ctx()),
        Err(e) => panic!("a loaded MRoPE spec is refused: {e}\n{}", ctx()),
    }
    match (m.vision_rope(), &m.vision) {
        (Ok(Some(vit)), Some(spec)) => {
            let (rows, cols) = ([0u32, 3, 1], [0u32, 2, 5]);
            let (mut a, mut b) = ([0u32; 3], [0u32; 3]);
            spec.fill_position_ids(&rows, &cols, &mut a, &mut b).unwrap();
            let mut y = vec![0.25f32; 3 * spec.head_dim];
            let r = vit.apply(
                HeadsMut::new(&mut y, View::token_major(3, 1, spec.head_dim)),
                &VisionOptions::ids([&a, &b]),
            );
            assert_eq!(r, Ok(()), "vision RoPE\n{}", ctx());
        }
        (Ok(None), None) => {}
        (r, _) => panic!("vision spec and operation disagree: {:?}\n{}", r.map(|v| v.is_some()), ctx()),
    }
    for layer in [0usize, 3] {
        match m.qk_norm_for_layer(layer) {
            Ok(Some(spec)) => {
                assert!(spec.eps.is_finite() && spec.eps >= 0.0, "{}", ctx());
                let Some(config) = m.rope_for_layer(layer) else {
                    assert!(!spec.after_rope(), "a norm after RoPE on a NoPE layer\n{}", ctx());
                    continue;
                };
                let rope = Rope::new(config.clone()).unwrap();
                let w = vec![1.0f32; m.head_dim];
                let weights = (!spec.after_rope()).then_some((&w[..], &w[..]));
                let norm = spec.with_weights(weights).unwrap();
                let mut y = vec![0.25f32; tokens * m.head_dim];
                let r = rope.apply_qk_norm(
                    HeadsMut::new(&mut y, View::token_major(tokens, 1, m.head_dim)),
                    None,
                    &norm,
                    &ApplyOptions::ids(positions),
                );
                assert_eq!(r, Ok(()), "fused qk norm\n{}", ctx());
            }
            Ok(None) => {}
            Err(e) => assert!(!e.to_string().is_empty()),
        }
    }
}
