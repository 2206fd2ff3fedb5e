//! The committed corpus of the `capi` target (`fuzz/corpus/capi/`):
//! - the ten real configurations of `tests/data/configs` (exact parameters; LongRoPE's
//!   factor arrays approximated by a ramp), each with a decode step in f32 (q and GQA k in
//!   place, at the end of the original context), `rope_frequencies` and `rope_fill_table`,
//!   a prefill out of place in f16 from a cos/sin table with position ids, and an inverse
//!   bf16 call with HF angles, on caller storage or on the heap;
//! - a seed per error path, so that every status of the header except `ROPE_PANIC` is
//!   returned by some seed (`workspace-tests/tests/fuzz_logic.rs` checks);
//! - the tier functions; every sibling encoding, valid and failing;
//! - `rope_apply_layer`: a ragged batch into an f32 tensor, a bf16 and a q8_0 cache, a paged
//!   cache, and one seed per status of the call (72..80).

use rope_kernels::hf_config::ModelConfig;
use rope_kernels::{AngleMode, PairLayout, Scaling};
use rope_kernels_capi as c;

use super::super::config_json::CONFIGS;
use super::config::{ArrayRaw, ConfigRaw, HandleRaw};
use super::encodings::{AlibiRaw, GridRaw, LearnedRaw, PosRaw, RelativeRaw, SinusoidalRaw, U32Raw};
use super::fields::{EnumRaw, F64Raw, StartRaw, U64Raw};
use super::layer::{DestRaw, LayerRaw};
use super::rope::{ApplyRaw, FillRaw, FreqRaw, OptsRaw, TensorRaw, TierRaw};
use super::{CapiCase, Op};

/// Pointer bytes of [`super::memory::pass`].
const NULL: u8 = 12;
const MISALIGNED: u8 = 14;

/// `head_dim`, `rotary_dim`, `theta`, no scaling.
fn config(head_dim: usize, rotary_dim: usize, theta: f64) -> ConfigRaw {
    ConfigRaw {
        head_dim: ConfigRaw::head_dim_raw(head_dim),
        rotary_dim: ConfigRaw::rotary_dim_raw(rotary_dim),
        theta: F64Raw::exact(theta),
        ..ConfigRaw::default()
    }
}

/// `rope_init` into storage of the right size; `rope_free(NULL)` at the end.
fn storage() -> HandleRaw {
    HandleRaw { free: NULL, ..HandleRaw::default() }
}

/// `rope_new`; `rope_free` of the handle at the end.
fn heap() -> HandleRaw {
    HandleRaw { kind: 3, ..HandleRaw::default() }
}

fn tensor(tokens: u8, heads: u8, view: u8) -> TensorRaw {
    TensorRaw { tokens, heads, view, ..TensorRaw::default() }
}

/// Forward, positions from `start`, cos/sin on the fly.
fn start(start: u32) -> OptsRaw {
    OptsRaw { start: StartRaw::exact(start), ..OptsRaw::default() }
}

/// An in-place call of `dtype` (0 f32, 1 f16, 2 bf16) on q and, if given, k.
fn apply(dtype: u8, q: TensorRaw, k: Option<TensorRaw>, opts: OptsRaw) -> ApplyRaw {
    ApplyRaw {
        dtype,
        k: u8::from(k.is_some()),
        q,
        k_t: k.unwrap_or_default(),
        opts,
        seed: 0x5EED,
        specials: 8,
        ..ApplyRaw::default()
    }
}

/// 2 tokens of 3 q heads (BSHD) and 1 k head (BHSD) at positions 5, 6.
fn small_apply() -> ApplyRaw {
    apply(0, tensor(2, 3, 0), Some(tensor(0, 1, 1)), start(5))
}

fn case(config: ConfigRaw, handle: HandleRaw, ops: Vec<Op>) -> Vec<u8> {
    CapiCase { config, handle, ops }.write()
}

/// The `ConfigRaw` of a real configuration: its exact values.
fn real_config(m: &ModelConfig) -> ConfigRaw {
    let r = &m.rope;
    let mut c = config(r.head_dim, r.rotary_dim, r.theta);
    c.layout = EnumRaw::valid(u32::from(r.layout == PairLayout::Interleaved));
    c.angle_mode = EnumRaw::valid(u32::from(r.angle_mode == AngleMode::HfCompatible));
    let exact = F64Raw::exact;
    let opt = |v: Option<f64>| (u8::from(v.is_some()), exact(v.unwrap_or(0.0)));
    let ramp = |v: &[f64]| ArrayRaw { first: exact(v[0]), ..ArrayRaw::default() };
    let ty = match &r.scaling {
        Scaling::None => c::ROPE_SCALING_NONE,
        Scaling::Yarn(p) => {
            c.factor = exact(p.factor);
            c.original_max_position_embeddings = U64Raw::exact(p.original_max_position_embeddings);
            (c.beta_fast, c.beta_slow) = (exact(p.beta_fast), exact(p.beta_slow));
            c.truncate = u8::from(p.truncate) ^ 1;
            (c.has_mscale, c.mscale) = opt(p.mscale);
            (c.has_mscale_all_dim, c.mscale_all_dim) = opt(p.mscale_all_dim);
            (c.has_attention_factor, c.attention_factor) = opt(p.attention_factor);
            c::ROPE_SCALING_YARN
        }
        Scaling::Llama3 { factor, low_freq_factor, high_freq_factor, original_max_position_embeddings } => {
            (c.factor, c.low_freq_factor, c.high_freq_factor) =
                (exact(*factor), exact(*low_freq_factor), exact(*high_freq_factor));
            c.original_max_position_embeddings = U64Raw::exact(*original_max_position_embeddings);
            c::ROPE_SCALING_LLAMA3
        }
        Scaling::LongRope(p) => {
            c.short_factor = ramp(p.short_factor.as_slice());
            c.long_factor = ramp(p.long_factor.as_slice());
            c.original_max_position_embeddings = U64Raw::exact(p.original_max_position_embeddings);
            c.factor = exact(p.factor);
            (c.has_attention_factor, c.attention_factor) = opt(p.attention_factor);
            c::ROPE_SCALING_LONGROPE
        }
        other => panic!("add the parameters of {other:?} to the capi seed writer"),
    };
    c.rope_type = EnumRaw::valid(ty);
    c
}

/// Every seed, `(file name, bytes)`.
pub fn seeds() -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<(String, Vec<u8>)> = Vec::new();
    let mut push = |name: &str, bytes: Vec<u8>| v.push((name.to_string(), bytes));

    for (name, text) in CONFIGS {
        let m = ModelConfig::from_json_str(text).expect("shipped config");
        let cfg = real_config(&m);
        let orig = m.max_position_embeddings.unwrap_or(4096);
        let last = u32::try_from(orig - 1).unwrap_or(u32::MAX);
        // Decode: 1 token, 6 q heads (BSHD), 2 kv heads (BHSD), at the last position.
        let decode = apply(0, tensor(1, 6, 0), Some(tensor(0, 2, 1)), start(last));
        let freqs = FreqRaw { seq_len: U64Raw::exact(2 * orig), af: 0, ..FreqRaw::default() };
        let table = FillRaw { start: StartRaw::exact(100), rows: 4, ..FillRaw::default() };
        push(
            &format!("{name}_decode_f32"),
            case(cfg, storage(), vec![Op::Apply(decode), Op::Frequencies(freqs), Op::FillTable(table)]),
        );
        // Prefill out of place, f16: 8 tokens, 4 q heads (padded rows) into BHSD, 1 kv head
        // of a fused QKV row into BSHD; shuffled ids; cos/sin from a table.
        let mut prefill = apply(1, tensor(8, 4, 2), Some(tensor(0, 1, 3)), OptsRaw::default());
        prefill.mode = 1;
        prefill.q_out = tensor(0, 0, 1);
        prefill.k_out = tensor(0, 0, 0);
        prefill.q.a = 2;
        prefill.k_t.a = 5;
        prefill.opts.position_mode = EnumRaw::valid(c::ROPE_POSITIONS_IDS);
        prefill.opts.ids_sel = 1;
        prefill.opts.cos_sin = EnumRaw::valid(c::ROPE_COS_SIN_TABLE);
        push(&format!("{name}_prefill_f16_table"), case(cfg, heap(), vec![Op::Apply(prefill)]));
        // bf16, inverse, HF angles, far positions.
        let mut hf = cfg;
        hf.angle_mode = EnumRaw::valid(c::ROPE_ANGLE_HF_COMPATIBLE);
        let mut inv = apply(2, tensor(3, 2, 1), None, start(1 << 20));
        inv.opts.direction = EnumRaw::valid(c::ROPE_INVERSE);
        push(&format!("{name}_inverse_bf16_hf"), case(hf, storage(), vec![Op::Apply(inv)]));
    }

    // A caller inv_freq table (rotary_dim / 2 values: 0xE8 is `pairs - 8 + 8`).
    let base = config(64, 64, 10_000.0);
    let mut hf_table = base;
    hf_table.inv_freq = ArrayRaw { len: 0xE8, ..ArrayRaw::default() };
    push("hf_inv_freq_table", case(hf_table, storage(), vec![Op::Apply(small_apply())]));
    // Partial rotary, interleaved, odd pair count, every scaling method's typical values.
    for ty in 0..9 {
        let mut c = config(40, 18, 10_000.0);
        c.layout = EnumRaw::valid(c::ROPE_LAYOUT_INTERLEAVED);
        c.rope_type = EnumRaw::valid(ty);
        c.original_max_position_embeddings = U64Raw::exact(64);
        c.max_position_embeddings = U64Raw::exact(64);
        c.factor = F64Raw::exact(4.0);
        let mut a = small_apply();
        a.opts = start(100);
        push(&format!("scaling_{ty}_partial_interleaved"), case(c, heap(), vec![Op::Apply(a)]));
    }

    // ---- the error paths; after a failed rope_init, calls get ROPE_INVALID_HANDLE.
    let after = || vec![Op::Apply(small_apply())];
    let with = |f: &dyn Fn(&mut ConfigRaw)| {
        let mut c = base;
        f(&mut c);
        c
    };
    let errors: [(&str, ConfigRaw); 14] = [
        ("cfg_struct_size", with(&|c| c.size = 0xF0)),
        ("cfg_null", with(&|c| c.ptr = NULL)),
        ("cfg_misaligned", with(&|c| c.ptr = MISALIGNED)),
        ("cfg_layout_unknown", with(&|c| c.layout = EnumRaw::any(7))),
        ("cfg_rope_type_unknown", with(&|c| c.rope_type = EnumRaw::any(1000))),
        (
            "cfg_yarn_truncate_flag",
            with(&|c| {
                c.rope_type = EnumRaw::valid(c::ROPE_SCALING_YARN);
                c.truncate = 0xF5;
            }),
        ),
        (
            "cfg_zero_head_dim",
            with(&|c| {
                c.head_dim = 0xFF00;
                c.rotary_dim = 0xFF02;
            }),
        ),
        ("cfg_odd_rotary_dim", with(&|c| c.rotary_dim = 0xFF07)),
        ("cfg_rotary_dim_exceeds", with(&|c| c.rotary_dim = 0xFE00)),
        (
            "cfg_rotary_dim_too_large",
            with(&|c| {
                c.head_dim = ConfigRaw::head_dim_raw(1024);
                c.rotary_dim = 0xFE00 + 172;
            }),
        ),
        ("cfg_theta_nan", with(&|c| c.theta = F64Raw::exact(f64::NAN))),
        (
            "cfg_linear_factor_zero",
            with(&|c| {
                c.rope_type = EnumRaw::valid(c::ROPE_SCALING_LINEAR);
                c.factor = F64Raw::exact(0.0);
            }),
        ),
        ("cfg_inv_freq_length", with(&|c| c.inv_freq = ArrayRaw { len: 0xE9, ..ArrayRaw::default() })),
        (
            "cfg_longrope_null_array",
            with(&|c| {
                c.rope_type = EnumRaw::valid(c::ROPE_SCALING_LONGROPE);
                c.short_factor.ptr = NULL;
            }),
        ),
    ];
    for (name, c) in errors {
        push(name, case(c, storage(), after()));
    }

    let handles: [(&str, HandleRaw); 6] = [
        ("handle_storage_too_small", HandleRaw { size: 0xE0, ..storage() }),
        ("handle_storage_null", HandleRaw { storage: NULL, ..storage() }),
        ("handle_out_inside_storage", HandleRaw { out: 15, ..storage() }),
        ("handle_out_of_memory", HandleRaw { fault: 0xFA, ..heap() }),
        ("handle_free_storage", HandleRaw { free: 0, ..storage() }),
        ("handle_free_misaligned", HandleRaw { free: MISALIGNED, ..heap() }),
    ];
    for (name, h) in handles {
        push(name, case(base, h, after()));
    }

    let mut applies: Vec<(&str, ApplyRaw)> = Vec::new();
    let mut each = |name, f: &dyn Fn(&mut ApplyRaw)| {
        let mut a = small_apply();
        f(&mut a);
        applies.push((name, a));
    };
    each("apply_q_null", &|a| a.q.st = NULL);
    each("apply_data_misaligned", &|a| a.q.data = MISALIGNED);
    each("apply_count_past_ptrdiff_max", &|a| a.q.len = 0xF8);
    each("apply_opts_struct_size", &|a| a.opts.size = 0xF1);
    each("apply_direction_unknown", &|a| a.opts.direction = EnumRaw::any(2));
    each("apply_k_aliases_q", &|a| a.mode = 2);
    each("apply_into_k_out_null", &|a| {
        a.mode = 1;
        a.k = 0xF1;
    });
    each("apply_overlapping_strides", &|a| {
        a.q.view = 4;
        a.q.wild = u64::from_le_bytes([192, 0, 4, 0, 0, 0, 0, 0]);
    });
    each("apply_stride_overflow", &|a| {
        a.q.view = 5;
        a.q.wild = u64::from_le_bytes([2, 1, 10, 4, 0, 0, 0, 0]);
    });
    each("apply_buffer_too_small", &|a| a.q.len = 0xE8);
    each("apply_k_shape_mismatch", &|a| a.k_t.tokens = 0xF9);
    each("apply_position_count", &|a| {
        a.opts.position_mode = EnumRaw::valid(c::ROPE_POSITIONS_IDS);
        a.opts.ids_len = 0xF4;
    });
    each("apply_position_overflow", &|a| a.opts.start = StartRaw { sel: 4, raw: 1 });
    each("apply_table_too_few_rows", &|a| {
        a.opts.cos_sin = EnumRaw::valid(c::ROPE_COS_SIN_TABLE);
        a.opts.rows = 0xF0;
    });
    each("apply_table_ragged", &|a| {
        a.opts.cos_sin = EnumRaw::valid(c::ROPE_COS_SIN_TABLE);
        a.opts.rows = 0xF8;
    });
    each("apply_opts_null_defaults", &|a| a.opts.ptr = NULL);
    for (name, a) in applies {
        push(name, case(base, storage(), vec![Op::Apply(a)]));
    }
    let short = FreqRaw { len: 0xE0, ..FreqRaw::default() };
    let alias = FillRaw { rows: 2, alias: 1, ..FillRaw::default() };
    push("frequencies_buffer_too_small", case(base, storage(), vec![Op::Frequencies(short)]));
    push("fill_table_cos_is_sin", case(base, storage(), vec![Op::FillTable(alias)]));

    // ---- tiers: NEON and AVX2 never coexist, so one of them is unavailable.
    let tier = |op: u8, t: EnumRaw| Op::Tier(TierRaw { op, tier: t, out: 0 });
    push(
        "tiers",
        case(
            base,
            storage(),
            vec![
                tier(0, EnumRaw::valid(0)),
                tier(1, EnumRaw::valid(0)),
                tier(2, EnumRaw::valid(c::ROPE_TIER_NEON)),
                tier(2, EnumRaw::valid(c::ROPE_TIER_AVX2)),
                tier(2, EnumRaw::any(0)),
                tier(3, EnumRaw::valid(c::ROPE_TIER_AVX512)),
            ],
        ),
    );
    push(
        "tiers_force_scalar_then_apply",
        case(
            base,
            storage(),
            vec![
                tier(2, EnumRaw::valid(c::ROPE_TIER_SCALAR)),
                Op::Apply(small_apply()),
                tier(4, EnumRaw::valid(0)),
            ],
        ),
    );

    // ---- the sibling encodings.
    let sin = |variant: u8, f: &dyn Fn(&mut SinusoidalRaw)| {
        let mut s = SinusoidalRaw { variant, dim: 63, tokens: 3, seed: 7, ..SinusoidalRaw::default() };
        f(&mut s);
        Op::Sinusoidal(s)
    };
    let ids = PosRaw { mode: EnumRaw::valid(c::ROPE_POSITIONS_IDS), ids_sel: 1, ..PosRaw::default() };
    push(
        "sinusoidal",
        case(
            base,
            storage(),
            vec![
                sin(0, &|_| {}),
                sin(1, &|s| s.pos = ids),
                sin(2, &|s| s.layout = EnumRaw::valid(c::ROPE_SINUSOIDAL_CONCATENATED)),
                sin(3, &|s| s.stride = 2),
            ],
        ),
    );
    push(
        "sinusoidal_errors",
        case(
            base,
            storage(),
            vec![
                sin(0, &|s| s.dim = 0xFF00),
                sin(0, &|s| s.len = 0xF0),
                sin(1, &|s| s.stride = 0xF0),
                sin(1, &|s| s.stride = 0xFB),
                sin(2, &|s| s.len = 0xE8),
                sin(3, &|s| s.layout = EnumRaw::any(2)),
            ],
        ),
    );
    let learned = |variant: u8, f: &dyn Fn(&mut LearnedRaw)| {
        let mut l =
            LearnedRaw { variant, dim: 31, rows: 16, tokens: 4, pos: ids, seed: 9, ..LearnedRaw::default() };
        f(&mut l);
        Op::Learned(l)
    };
    push(
        "learned",
        case(
            base,
            storage(),
            vec![
                learned(0, &|_| {}),
                learned(1, &|_| {}),
                learned(2, &|_| {}),
                learned(3, &|_| {}),
                learned(4, &|_| {}),
            ],
        ),
    );
    push(
        "learned_errors",
        case(
            base,
            storage(),
            vec![
                learned(0, &|l| l.pos.ids_sel = 0xF2),
                learned(1, &|l| l.table_len = 0xE0),
                learned(2, &|l| l.table = MISALIGNED),
                learned(0, &|l| l.pos.st = NULL),
            ],
        ),
    );
    let rel = |variant: u8, kind: u32, f: &dyn Fn(&mut RelativeRaw)| {
        let mut r = RelativeRaw {
            variant,
            kind: EnumRaw::valid(kind),
            max_distance: U32Raw::exact(128),
            att_span: U32Raw::exact(256),
            bucket_size: U32Raw::exact(256),
            max_position: U32Raw::exact(512),
            num_buckets: U32Raw::exact(32),
            q: 1000,
            k: 3,
            grid: GridRaw { q_len: 5, k_len: 7, ..GridRaw::default() },
            rel: 1000,
            bidirectional: 1,
            ..RelativeRaw::default()
        };
        f(&mut r);
        Op::Relative(r)
    };
    push(
        "relative",
        case(
            base,
            storage(),
            vec![
                rel(0, c::ROPE_RELATIVE_T5_BIDIRECTIONAL, &|_| {}),
                rel(1, c::ROPE_RELATIVE_CLIPPED, &|_| {}),
                rel(2, c::ROPE_RELATIVE_DEBERTA_INDEX, &|_| {}),
                rel(2, c::ROPE_RELATIVE_T5_CAUSAL, &|_| {}),
                rel(3, 0, &|_| {}),
                rel(4, 0, &|_| {}),
            ],
        ),
    );
    push(
        "relative_errors",
        case(
            base,
            storage(),
            vec![
                rel(1, c::ROPE_RELATIVE_DEBERTA_V2_LOG_BUCKET, &|r| {
                    (r.bucket_size, r.max_position) = (U32Raw::exact(u32::MAX), U32Raw::exact(u32::MAX));
                    (r.q, r.k) = (u32::MAX, 0);
                }),
                rel(0, c::ROPE_RELATIVE_CLIPPED_INDEX, &|r| r.max_distance = U32Raw::exact(0)),
                rel(2, c::ROPE_RELATIVE_CLIPPED, &|r| r.len = 0xE8),
                rel(0, 0, &|r| r.kind = EnumRaw::any(6)),
                rel(3, 0, &|r| r.bidirectional = 0xF2),
                rel(0, 0, &|r| r.size = 0xF2),
            ],
        ),
    );
    let alibi = |variant: u8, f: &dyn Fn(&mut AlibiRaw)| {
        let mut a = AlibiRaw {
            variant,
            heads: 8,
            grid: GridRaw { q_len: 3, k_len: 5, ..GridRaw::default() },
            seed: 11,
            ..AlibiRaw::default()
        };
        f(&mut a);
        Op::Alibi(a)
    };
    push(
        "alibi",
        case(
            base,
            storage(),
            vec![
                alibi(0, &|_| {}),
                alibi(1, &|a| a.bias_max = F64Raw::exact(16.0)),
                alibi(2, &|_| {}),
                alibi(2, &|a| a.form = EnumRaw::valid(c::ROPE_ALIBI_SYMMETRIC)),
            ],
        ),
    );
    push(
        "alibi_errors",
        case(
            base,
            storage(),
            vec![
                alibi(1, &|a| a.bias_max = F64Raw::exact(f64::NAN)),
                alibi(2, &|a| a.specials = 255),
                alibi(2, &|a| a.form = EnumRaw::any(9)),
                alibi(0, &|a| a.slopes_len = 0xF9),
            ],
        ),
    );
    layer_seeds(&mut push);
    v
}

/// A cache destination of `dtype` (32 slots: 4 blocks of 8) addressed by `slot_mapping`
/// (increasing from a random slot).
fn cache(dtype: u32) -> DestRaw {
    DestRaw {
        kind: EnumRaw::valid(c::ROPE_DEST_CACHE),
        dtype: EnumRaw::valid(dtype),
        blocks: 31,
        slots: EnumRaw::valid(c::ROPE_SLOTS_MAPPING),
        ..DestRaw::default()
    }
}

/// 6 tokens of 4 q and 2 kv heads (`[q | k | v]` rows) in 2 sequences; q into an f32 tensor,
/// k into a bf16 cache, v into a q8_0 cache.
fn layer() -> LayerRaw {
    LayerRaw {
        tokens: 6,
        heads: 0x22,
        q: DestRaw { kind: EnumRaw::valid(c::ROPE_DEST_TENSOR), ..DestRaw::default() },
        k: cache(c::ROPE_DTYPE_BF16),
        v: cache(c::ROPE_DTYPE_Q8_0),
        batch: EnumRaw::valid(c::ROPE_BATCH_RAGGED),
        seqs: 1,
        seed: 17,
        ..LayerRaw::default()
    }
}

fn layer_seeds(push: &mut impl FnMut(&str, Vec<u8>)) {
    let base = config(64, 64, 10_000.0);
    let with = |f: &dyn Fn(&mut LayerRaw)| {
        let mut l = layer();
        f(&mut l);
        Op::Layer(l)
    };
    push(
        "layer",
        case(
            base,
            heap(),
            vec![
                with(&|_| {}),
                // bf16 input, q in place, k and v into a paged NHD cache of 4 blocks of 2 slots
                // by a block table, one sequence from position 0, a cos/sin table, inverse.
                with(&|l| {
                    l.qkv_dtype = 2;
                    l.q = DestRaw {
                        kind: EnumRaw::valid(c::ROPE_DEST_IN_PLACE),
                        dtype: EnumRaw::valid(2),
                        ..l.q
                    };
                    for d in [&mut l.k, &mut l.v] {
                        (d.slots, d.blocks, d.sel) = (EnumRaw::valid(c::ROPE_SLOTS_BLOCK_TABLE), 7, 1);
                    }
                    l.v.dtype = EnumRaw::valid(c::ROPE_DTYPE_F16);
                    (l.batch, l.start, l.seed) = (EnumRaw::valid(0), StartRaw::exact(0), 5);
                    (l.cos_sin, l.direction) = (EnumRaw::valid(1), EnumRaw::valid(1));
                }),
                // GPT-NeoX sets, one sequence, k by position into a contiguous f16 cache.
                with(&|l| {
                    l.sets = 1;
                    l.k = DestRaw { dtype: EnumRaw::valid(1), shape: 2, slots: EnumRaw::valid(2), ..l.k };
                    (l.v, l.batch) = (DestRaw::default(), EnumRaw::valid(0));
                }),
                // Position ids, padded rows; k into an f16 and v into a bf16 tensor (BHSD).
                with(&|l| {
                    l.sets = 2;
                    let t = |dtype| DestRaw {
                        kind: EnumRaw::valid(2),
                        dtype: EnumRaw::valid(dtype),
                        shape: 3,
                        ..l.q
                    };
                    (l.k, l.v) = (t(1), t(2));
                    (l.batch, l.position_mode) = (EnumRaw::valid(0), EnumRaw::valid(1));
                }),
            ],
        ),
    );
    push(
        "layer_errors",
        case(
            base,
            storage(),
            vec![
                with(&|l| l.sets = 4),
                with(&|l| {
                    l.q = DestRaw {
                        kind: EnumRaw::valid(c::ROPE_DEST_IN_PLACE),
                        dtype: EnumRaw::valid(2),
                        ..l.q
                    }
                }),
                with(&|l| l.indptr_sel = 0xF0),
                with(&|l| l.k.arr_len = 0xE8),
                with(&|l| l.k.sel = 4),
                with(&|l| l.v.sel = 3),
            ],
        ),
    );
    push(
        "layer_block_errors",
        case(
            base,
            storage(),
            vec![
                with(&|l| {
                    (l.k.slots, l.k.blocks, l.k.sel) = (EnumRaw::valid(c::ROPE_SLOTS_BLOCK_TABLE), 0x1F, 3);
                    (l.batch, l.start, l.v) = (EnumRaw::valid(0), StartRaw::exact(0), DestRaw::default());
                }),
                with(&|l| {
                    (l.k.slots, l.k.bps) = (EnumRaw::valid(c::ROPE_SLOTS_BLOCK_TABLE), 0xF0);
                    l.v = DestRaw::default();
                }),
                with(&|l| {
                    (l.k.slots, l.k.shape) = (EnumRaw::valid(c::ROPE_SLOTS_BLOCK_TABLE), 0xFF);
                    l.v = DestRaw::default();
                }),
                with(&|l| l.qkv_dtype = 0xE0),
                with(&|l| l.k.dtype = EnumRaw::any(9)),
                with(&|l| (l.alias, l.v.len) = (4, 0)),
            ],
        ),
    );
    push("layer_q8_0_head_dim_48", case(config(48, 48, 10_000.0), storage(), vec![with(&|_| {})]));
}
