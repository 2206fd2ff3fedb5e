//! The `config_json` target: random and mutated real `config.json` text into
//! [`ModelConfig::from_json_str`]. The loader must return a configuration or an error,
//! never panic; a configuration must be usable: its `RopeConfig` validates, `Rope::new`
//! accepts it, and applying it to a small q/k pair (GQA head counts of the model, positions
//! 0, 1 and the last of the context, and past LongRoPE's original length) succeeds with
//! finite output and untouched pass-through dimensions. Error messages must format.
//!
//! Input: the first byte picks the mode. Even: the rest is the text (lossy UTF-8). Odd: a
//! structured mutation of one of the real configs in `tests/data/configs`: the next byte
//! picks the file, then each 3-byte group `(op, key, value)` sets or removes a field the
//! loader reads (top level or in the rope dict) with a value from [`VALUES`].

use rope_kernels::hf_config::ModelConfig;
use rope_kernels::{Apply, HeadsMut, Rope, Scaling, View};
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

/// Every field the loader reads at the top level.
pub const TOP_KEYS: [&str; 20] = [
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
];

/// Every field the loader reads in the rope dict.
pub const ROPE_KEYS: [&str; 17] = [
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
];

/// Values to set: every JSON type, boundary numbers, the rope type names, arrays.
pub fn value(i: u8, rng: u8) -> Value {
    match i % 40 {
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
        _ => json!(128),
    }
}

/// Applies mutations to a real config.
pub fn mutate(base: &str, ops: &[u8]) -> String {
    let mut v: Value = serde_json::from_str(base).expect("shipped configs are JSON");
    for op in ops.chunks_exact(3) {
        let (kind, key, val) = (op[0], op[1], op[2]);
        let obj = v.as_object_mut().expect("shipped configs are objects");
        let in_rope = kind & 1 == 1;
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
        let name = if in_rope {
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
    let (_, base) = CONFIGS[r.below(CONFIGS.len())];
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
        HeadsMut::new(&mut q, View::bshd(tokens, q_heads, hd)),
        Some(HeadsMut::new(&mut k, View::bhsd(tokens, kv_heads, hd))),
        &Apply::ids(&positions),
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
    true
}
