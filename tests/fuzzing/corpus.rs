//! The seed corpora of the fuzz targets, built from the real configs in
//! `tests/data/configs` and the shapes of the test suite and benchmarks (the `capi` seeds:
//! [`capi::seeds`]). The committed files
//! under `fuzz/corpus/<target>/` are exactly [`seeds`]; `workspace-tests/tests/fuzz_logic.rs` checks that
//! and rewrites them when run with `UPDATE_FUZZ_CORPUS=1`.

use rope_kernels::hf_config::ModelConfig;
use rope_kernels::{PairLayout, Scaling};

use super::capi;
use super::config_json::{all_configs, CONFIGS};
use super::diff::{ConfigSpec, DiffCase, PosSpec, SourceSpec, TensorSpec};
use super::frequencies::FreqSeed;

/// `(target, file name, bytes)` of every seed.
pub fn seeds() -> Vec<(&'static str, String, Vec<u8>)> {
    let mut out = Vec::new();
    for (name, case) in diff_cases() {
        out.push(("diff_f32", name.clone(), case.write()));
        for (prefix, ty) in [(0u8, "f16"), (1, "bf16")] {
            let mut b = vec![prefix];
            b.extend(case.write());
            out.push(("diff_half", format!("{name}_{ty}"), b));
        }
    }
    for (name, bytes) in frequency_seeds() {
        out.push(("frequencies", name, bytes));
    }
    for (name, text) in all_configs() {
        let mut b = vec![0u8];
        b.extend_from_slice(text.as_bytes());
        out.push(("config_json", format!("{name}_text"), b));
    }
    for (i, (name, _)) in all_configs().iter().enumerate() {
        // Structured mode: set factor to 0, remove rope_type, set rope_theta to 1e-320.
        let ops: &[u8] = &[1, 2, 3, 7, 0, 0, 0, 12, 10];
        let mut b = vec![1u8, i as u8];
        b.extend_from_slice(ops);
        out.push(("config_json", format!("{name}_mutated"), b));
    }
    for (i, (name, _)) in all_configs().iter().enumerate().skip(CONFIGS.len()) {
        // Nested: a wrong mrope_section, a short layer_types list, the Llama 4 no-RoPE
        // pattern cut short, and a vision head that is not a multiple of 4.
        let ops: &[u8] = &[1, 17, 42, 0, 23, 45, 8, 27, 47, 0, 0x40 | 3, 39];
        let mut b = vec![1u8, i as u8];
        b.extend_from_slice(ops);
        out.push(("config_json", format!("{name}_nested"), b));
    }
    for (name, bytes) in capi::seeds::seeds() {
        out.push(("capi", name, bytes));
    }
    out
}

/// `(file, head_dim, rotary_dim, layout, theta index, scaling, p1, p2, p3, orig)` for each
/// real config: the diff target's palette entries closest to the real parameters.
type RealShape = (&'static str, usize, usize, PairLayout, u8, u8, u8, u8, u8, u16);
const REAL: [RealShape; 10] = [
    // YaRN factor 40, mscale 1 / mscale_all_dim 0.707 (DeepSeek-V2-Lite: 0.707 / 0.707).
    ("deepseek-v2-lite", 64, 64, PairLayout::Interleaved, 0, 4, 15, 0, 0x42, 4096),
    ("gpt-j-6b", 256, 64, PairLayout::Interleaved, 0, 0, 0, 0, 0, 2048),
    ("gpt-neox-20b", 96, 24, PairLayout::HalfSplit, 0, 0, 0, 0, 0, 2048),
    // YaRN factor 32, no truncation.
    ("gpt-oss-20b", 64, 64, PairLayout::HalfSplit, 3, 4, 5, 0, 1, 4096),
    ("llama-2-7b", 128, 128, PairLayout::HalfSplit, 0, 0, 0, 0, 0, 4096),
    // Llama 3: factor 8, low 1, high 4, original 8192.
    ("llama-3.1-8b", 128, 128, PairLayout::HalfSplit, 1, 5, 3, 0, 0, 8192),
    ("mistral-7b-v0.1", 128, 128, PairLayout::HalfSplit, 0, 0, 0, 0, 0, 32768),
    ("phi-2", 80, 32, PairLayout::HalfSplit, 0, 0, 0, 0, 0, 2048),
    // LongRoPE, factor 32, original 4096.
    ("phi-3-128k-su", 96, 96, PairLayout::HalfSplit, 0, 6, 3, 6, 5, 4096),
    // YaRN factor 4, original 32768.
    ("qwen2.5-7b-instruct-yarn", 128, 128, PairLayout::HalfSplit, 2, 4, 2, 0, 0, 32768),
];

fn spec(hd: usize, rd: usize, layout: PairLayout) -> ConfigSpec {
    ConfigSpec::new(hd, rd, layout, 0)
}

/// The differential seeds.
pub fn diff_cases() -> Vec<(String, DiffCase)> {
    let mut v: Vec<(String, DiffCase)> = Vec::new();
    for (name, hd, rd, layout, theta, scaling, p1, p2, p3, orig) in REAL {
        let mut c = ConfigSpec::new(hd, rd, layout, theta);
        (c.scaling, c.p1, c.p2, c.p3, c.orig) = (scaling, p1, p2, p3, orig);
        // Decode: one token at the end of the original context, 6 q heads (BSHD), 2 kv heads.
        v.push((format!("{name}_decode"), DiffCase::simple(c.clone(), 1, 6, Some(2), u32::from(orig) - 1)));
        // Prefill: 8 tokens, out of place into BHSD q / BSHD k, from a cache.
        let mut p = DiffCase::simple(c.clone(), 8, 4, Some(1), 0);
        p.out_of_place = true;
        p.source = SourceSpec { sel: 2, rows: 0, base: 0 };
        v.push((format!("{name}_prefill_cache"), p));
        // Long positions, HF angles, inverse.
        let mut l = DiffCase::simple(c.clone(), 3, 2, None, 1 << 20);
        l.config.hf_angles = true;
        l.inverse = true;
        v.push((format!("{name}_long_hf_inverse"), l));
    }

    // Tails: rotary_dim / 2 of 1, 3, 5, 9, 17 (and 33), both layouts, partial and full.
    for (pairs, hd) in [(1usize, 2usize), (3, 8), (5, 10), (9, 21), (17, 34), (33, 70)] {
        for layout in [PairLayout::HalfSplit, PairLayout::Interleaved] {
            let mut c = DiffCase::simple(spec(hd, 2 * pairs, layout), 4, 3, Some(1), 7);
            c.inverse = pairs % 2 == 1;
            v.push((format!("tail{pairs}_hd{hd}_{layout:?}"), c));
        }
    }

    // The views of tests/rotation.rs: 5 tokens, 3 heads, head_dim 20, rotary_dim 12.
    let views = [
        ("bshd", TensorSpec::BSHD),
        ("bhsd", TensorSpec::BHSD),
        ("padded-bshd", TensorSpec::padded(3, 5, false)),
        ("padded-bhsd", TensorSpec::padded(2, 1, true)),
    ];
    for (i, (in_name, vin)) in views.iter().enumerate() {
        for (out_name, vout) in views.iter().skip(i) {
            for layout in [PairLayout::HalfSplit, PairLayout::Interleaved] {
                let mut c = DiffCase::simple(spec(20, 12, layout), 5, 3, None, 0);
                c.q = *vin;
                c.q_out = *vout;
                c.out_of_place = in_name != out_name;
                c.positions = PosSpec::Ids {
                    count_delta: 0,
                    ids: vec![(0, 3), (2, 123_456_789), (3, 0), (1, 4095), (4, 0)],
                };
                let mode =
                    if c.out_of_place { format!("{in_name}-to-{out_name}") } else { in_name.to_string() };
                v.push((format!("views_{mode}_{layout:?}"), c));
            }
        }
    }

    // The head-major walk of BHSD tensors (issue 18): partial HalfSplit, a cache,
    // consecutive positions, more tokens than a block (64); in place and BHSD into BSHD.
    for out in [false, true] {
        let mut c = DiffCase::simple(spec(20, 12, PairLayout::HalfSplit), 70, 3, Some(1), 5);
        c.q = TensorSpec::BHSD;
        c.source = SourceSpec { sel: 2, rows: 0, base: 0 };
        c.out_of_place = out;
        c.q_out = TensorSpec::BSHD;
        c.inverse = out;
        v.push((format!("head_major_bhsd_{}", if out { "out_of_place" } else { "in_place" }), c));
    }

    // Fused QKV rows: q with 3 other heads per token, k with 3; GQA 4 q / 2 kv.
    let mut f = DiffCase::simple(spec(16, 8, PairLayout::HalfSplit), 6, 4, Some(2), 100);
    f.q = TensorSpec::fused(3);
    f.k_spec = TensorSpec::fused(3);
    v.push(("fused_qkv_in_place".into(), f.clone()));
    f.out_of_place = true;
    v.push(("fused_qkv_out_of_place".into(), f));

    // Cos/sin sources: fill_table from a large base, a cache, caller values with specials.
    let base = spec(40, 32, PairLayout::Interleaved);
    for (name, sel, b) in [("fill_table", 1u8, 1u32 << 30), ("cache", 2, 0), ("caller_values", 3, 0)] {
        let mut c = DiffCase::simple(base.clone(), 7, 3, Some(2), 0);
        c.positions = PosSpec::Ids {
            count_delta: 0,
            ids: vec![(1, 299), (0, 1), (1, 17), (4, 0), (0, 0), (1, 200), (1, 5)],
        };
        c.source = SourceSpec { sel, rows: 0, base: b };
        c.specials = 64;
        v.push((format!("source_{name}"), c));
    }

    // Positions: the last one is u32::MAX; shuffled and repeated ids.
    let mut s = DiffCase::simple(spec(24, 16, PairLayout::HalfSplit), 8, 2, Some(1), 0);
    s.positions = PosSpec::Start { sel: 4, raw: 0 };
    v.push(("start_ends_at_u32_max".into(), s.clone()));
    s.positions = PosSpec::Ids {
        count_delta: 0,
        ids: vec![(0, 7), (0, 3), (4, 0), (0, 0), (3, 0), (2, 100_000), (0, 7), (0, 1)],
    };
    v.push(("ids_shuffled_repeated".into(), s));

    // Special values in most elements; bits given verbatim (f32: NaN, inf, subnormal, max).
    let mut sp = DiffCase::simple(spec(12, 8, PairLayout::Interleaved), 2, 2, None, 3);
    sp.specials = 200;
    v.push(("special_values".into(), sp.clone()));
    sp.specials = 0;
    sp.raw = [0x7FA0_0001u32, 0xFFC0_1234, 0x0000_0001, 0x7F7F_FFFF, 0xFF80_0000, 0x3F80_0000]
        .iter()
        .flat_map(|b| b.to_le_bytes())
        .collect();
    v.push(("verbatim_bits".into(), sp));

    // Empty calls: zero tokens, zero heads.
    v.push(("zero_tokens".into(), DiffCase::simple(spec(8, 8, PairLayout::HalfSplit), 0, 2, Some(1), 9)));
    v.push(("zero_heads".into(), DiffCase::simple(spec(8, 8, PairLayout::HalfSplit), 3, 0, Some(0), 9)));

    // The error path: every buffer must stay unchanged.
    let e = DiffCase::simple(spec(8, 6, PairLayout::Interleaved), 3, 4, Some(2), 0);
    let mut short = e.clone();
    short.q.len = 250; // one element short
    v.push(("error_buffer_too_short".into(), short));
    let mut overlap = e.clone();
    overlap.k_spec = TensorSpec { kind: 4, s1: 32, s2: 4, ..TensorSpec::BSHD }; // head_stride < head_dim
    v.push(("error_overlapping_strides".into(), overlap));
    let mut k_tokens = e.clone();
    k_tokens.k_tokens = 253;
    v.push(("error_k_tokens".into(), k_tokens));
    let mut out_heads = e.clone();
    out_heads.out_of_place = true;
    out_heads.out_heads = 252;
    v.push(("error_out_shape".into(), out_heads));
    let mut count = e.clone();
    count.positions = PosSpec::Ids { count_delta: 253, ids: vec![(0, 1), (0, 2), (0, 3), (0, 4)] };
    v.push(("error_position_count".into(), count));
    let mut overflow = e.clone();
    overflow.positions = PosSpec::Start { sel: 4, raw: 1 };
    v.push(("error_position_overflow".into(), overflow));
    let mut rows = e.clone();
    rows.source = SourceSpec { sel: 1, rows: 252, base: 0 };
    v.push(("error_table_rows".into(), rows));
    let mut width = e;
    width.source = SourceSpec { sel: 3, rows: 251, base: 0 };
    v.push(("error_table_width".into(), width));
    v
}

/// The `frequencies` seeds: each real config's exact `RopeConfig` (parameters as raw f64),
/// then boundary cases of each method.
pub fn frequency_seeds() -> Vec<(String, Vec<u8>)> {
    let mut v = Vec::new();
    for (name, text) in CONFIGS {
        let m = ModelConfig::from_json_str(text).expect("shipped config");
        let r = &m.rope;
        let interleaved = r.layout == PairLayout::Interleaved;
        let method = |s: &Scaling| match s {
            Scaling::None => 0,
            Scaling::Linear { .. } => 1,
            Scaling::DynamicNtk { .. } => 2,
            Scaling::NtkAlpha { .. } => 3,
            Scaling::Yarn(_) => 4,
            Scaling::Llama3 { .. } => 5,
            Scaling::LongRope(_) => 6,
            Scaling::Proportional { .. } => 7,
            _ => 8,
        };
        let mut f = FreqSeed::new(r.head_dim, r.rotary_dim, interleaved, false, r.theta, method(&r.scaling));
        match &r.scaling {
            Scaling::Yarn(p) => {
                f.f64(p.factor).u64(p.original_max_position_embeddings).f64(p.beta_fast).f64(p.beta_slow);
                f.bool(p.truncate);
                let flags = u8::from(p.mscale.is_some())
                    | u8::from(p.mscale_all_dim.is_some()) << 1
                    | u8::from(p.attention_factor.is_some()) << 2;
                f.u8(flags);
                f.f64(p.mscale.unwrap_or(0.0)).f64(p.mscale_all_dim.unwrap_or(0.0));
                f.f64(p.attention_factor.unwrap_or(0.0));
            }
            Scaling::Llama3 {
                factor,
                low_freq_factor,
                high_freq_factor,
                original_max_position_embeddings,
            } => {
                f.f64(*factor)
                    .f64(*low_freq_factor)
                    .f64(*high_freq_factor)
                    .u64(*original_max_position_embeddings);
            }
            Scaling::LongRope(p) => {
                f.array(p.short_factor.as_slice()).array(p.long_factor.as_slice());
                f.u64(p.original_max_position_embeddings)
                    .f64(p.factor)
                    .f64(p.attention_factor.unwrap_or(0.0));
                f.bool(p.attention_factor.is_some());
            }
            Scaling::None => {}
            other => panic!("{name}: add the parameters of {other:?} to the seed writer"),
        }
        let max = m.max_position_embeddings.unwrap_or(4096);
        v.push((name.to_string(), f.finish(max, u32::try_from(max - 1).unwrap_or(u32::MAX))));
    }
    // Boundaries of each method.
    let mut push =
        |name: &str, f: FreqSeed, seq_len: u64, pos: u32| v.push((name.to_string(), f.finish(seq_len, pos)));
    push("tiny_theta", FreqSeed::new(64, 64, false, true, 1e-300, 0), 1, u32::MAX);
    let mut lin = FreqSeed::new(64, 64, false, true, 10_000.0, 1);
    lin.f64(1e-30);
    push("linear_tiny_factor", lin, 1, u32::MAX);
    let mut dynamic = FreqSeed::new(4, 4, false, false, 10_000.0, 2);
    dynamic.f64(1e300).u64(1);
    push("dynamic_huge_factor", dynamic, u64::MAX, u32::MAX);
    let mut alpha = FreqSeed::new(4, 4, false, false, 10_000.0, 3);
    alpha.f64(1e-300);
    push("ntk_alpha_tiny", alpha, 0, 7);
    let mut yarn = FreqSeed::new(64, 64, true, false, 1.0 + f64::EPSILON, 4);
    yarn.f64(4.0).u64(1).f64(32.0).f64(1.0).bool(false).u8(7).f64(-1.0).f64(0.0).f64(1e300);
    push("yarn_extreme", yarn, 1 << 32, u32::MAX);
    let mut llama3 = FreqSeed::new(128, 128, false, false, 500_000.0, 5);
    llama3.f64(8.0).f64(4.0).f64(4.0 + f64::EPSILON * 4.0).u64(u64::MAX);
    push("llama3_narrow_band", llama3, 1, 1);
    let mut longrope = FreqSeed::new(6, 6, false, true, 10_000.0, 6);
    longrope.array(&[1.0, 2.0, 3.0]).array(&[1e-300, 1.0, 1e300]).u64(1).f64(1e300).f64(0.0).bool(false);
    push("longrope_extreme", longrope, u64::MAX, u32::MAX);
    let mut prop = FreqSeed::new(256, 256, false, false, 1e6, 7);
    prop.f64(1.0).f64(0.25);
    push("proportional_gemma", prop, 0, 1 << 20);
    let mut ff = FreqSeed::new(8, 8, true, true, 10_000.0, 8);
    ff.array(&[1.0, 5e-324, 1e308, 2.0]);
    push("freq_factors_extreme", ff, 0, u32::MAX);
    v
}
