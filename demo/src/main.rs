//! RoPE on the shapes of a real model, read from its Hugging Face `config.json`.
//!
//! ```text
//! cargo run --release -p demo                           # embedded Llama 3.1 8B config
//! cargo run --release -p demo -- --config tests/data/configs/phi-3-128k-su.json
//! ```
//!
//! Derives heads, kv heads, head_dim, rotary_dim, layout and scaling with
//! [`rope_kernels::hf_config`] and prints what each layer type applies (Gemma 3: sliding
//! and full layers; Llama 4: the layers without RoPE), the MRoPE sections and the vision
//! RoPE of multimodal models, and the warnings of the load. Then, for each distinct RoPE
//! configuration, runs a prefill of 2048 tokens and 256 single-token decode steps on random
//! q/k (q and k heads in one `apply_qk` call, GQA), checks every output element against an
//! f64 evaluation of the rotation, and prints the error and the speed. What the loader wires
//! beside it runs too, each checked against an f64 evaluation of its formula: MRoPE
//! (`ModelConfig::mrope_rope`) on 16 text tokens, a 32x32-patch image (merge 2) and 16 text
//! tokens with positions from `MRopeIndex`; the vision encoder's 2-D RoPE
//! (`ModelConfig::vision_rope`) on its patch grid; the fused QK norm + RoPE of each layer type
//! that has one (`ModelConfig::qk_norm_for_layer`) with a synthetic weight.
//! Exits with status 2 when the config cannot be used (one line naming the reason, e.g. an
//! unsupported scaling type), and 1 for a bad argument, a failed call or an error above
//! `1e-5 * max(1, attention_factor)`.

use std::ops::Range;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use rope_kernels::hf_config::ModelConfig;

mod multimodal;
use rope_kernels::{ApplyOptions, HeadsMut, PairLayout, Rope, RopeConfig, View};

const EMBEDDED_CONFIG: &str = include_str!("../../tests/data/configs/llama-3.1-8b.json");
const PREFILL_TOKENS: usize = 2048;
const DECODE_STEPS: usize = 256;
/// Timed repetitions; the fastest is reported.
const REPS: usize = 3;

/// Exit status for a config the crate refuses (see the module docs).
const EXIT_CONFIG_REFUSED: u8 = 2;

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::ConfigRefused(message)) => {
            eprintln!("error: {message}");
            ExitCode::from(EXIT_CONFIG_REFUSED)
        }
        Err(Failure::Other(message)) => {
            eprintln!("error: {message}");
            ExitCode::FAILURE
        }
    }
}

/// Why the demo stopped.
enum Failure {
    /// The config file cannot be read or does not describe a RoPE the crate implements.
    ConfigRefused(String),
    /// Anything else: a bad argument, a failed call, an accuracy check.
    Other(String),
}

impl From<String> for Failure {
    fn from(message: String) -> Self {
        Failure::Other(message)
    }
}

impl From<&str> for Failure {
    fn from(message: &str) -> Self {
        Failure::Other(message.to_string())
    }
}

/// One tensor of `tokens × heads` rows of `width = nope + head_dim` elements, RoPE applied
/// to the `head_dim` elements at offset `nope` of every row.
#[derive(Clone)]
struct Tensor {
    data: Vec<f32>,
    heads: usize,
    width: usize,
    nope: usize,
    head_dim: usize,
}

impl Tensor {
    fn random(tokens: usize, heads: usize, nope: usize, head_dim: usize, rng: &mut XorShift) -> Self {
        let width = nope + head_dim;
        let data = (0..tokens * heads * width).map(|_| rng.uniform()).collect();
        Tensor { data, heads, width, nope, head_dim }
    }

    /// The rotary part of tokens `first..first + tokens` as a mutable strided view.
    fn rotary(&mut self, first: usize, tokens: usize) -> HeadsMut<'_, f32> {
        let row = self.heads * self.width;
        let view = View { tokens, heads: self.heads, token_stride: row, head_stride: self.width };
        let start = first * row + self.nope;
        let end = (first + tokens) * row;
        HeadsMut::new(&mut self.data[start..end], view)
    }

    /// Elements per token that a call reads and writes.
    fn rotary_elems_per_token(&self) -> usize {
        self.heads * self.head_dim
    }
}

fn run() -> Result<(), Failure> {
    let mut args = std::env::args().skip(1);
    let mut path: Option<String> = None;
    while let Some(a) = args.next() {
        match a.as_str() {
            "--config" => path = Some(args.next().ok_or("--config needs a path")?),
            "-h" | "--help" => {
                println!("usage: demo [--config PATH/config.json]");
                return Ok(());
            }
            other => return Err(format!("unknown argument `{other}` (usage: demo [--config PATH])").into()),
        }
    }
    let (source, model) = match &path {
        Some(p) => {
            (p.clone(), ModelConfig::from_path(p).map_err(|e| Failure::ConfigRefused(format!("{p}: {e}")))?)
        }
        None => (
            "embedded Llama 3.1 8B config".to_string(),
            ModelConfig::from_json_str(EMBEDDED_CONFIG).map_err(|e| Failure::ConfigRefused(e.to_string()))?,
        ),
    };
    println!("model:     {} ({source})", model.model_type);
    if model.text_model_type != model.model_type {
        println!("text:      {} (text_config)", model.text_model_type);
    }
    let nope = if model.nope_head_dim > 0 {
        format!(" (+ {} unrotated, MLA)", model.nope_head_dim)
    } else {
        String::new()
    };
    println!(
        "dims:      head_dim {}{nope}, heads {}, kv heads {}{}",
        model.head_dim,
        model.num_attention_heads,
        model.num_key_value_heads,
        model.num_hidden_layers.map(|n| format!(", {n} layers")).unwrap_or_default()
    );
    println!("tier:      {}", rope_kernels::dispatch::active_tier());
    for w in model.warnings() {
        println!("warning:   {w}");
    }

    // What each layer type applies, then one prefill/decode run per distinct configuration.
    let refused = |e: rope_kernels::hf_config::ConfigError| Failure::ConfigRefused(format!("{source}: {e}"));
    let mut runs: Vec<(String, RopeConfig, String)> = Vec::new();
    // (layer type, first layer, its RoPE and q/k norm) of each layer type with a q/k norm.
    let mut qk_runs = Vec::new();
    for l in &model.layer_ropes {
        let layers: Vec<usize> = model.layers_of_type(&l.layer_type).collect();
        let which = if model.layer_types.is_empty() {
            "every layer".to_string()
        } else {
            format!("layers {}", layer_list(&layers))
        };
        let rope_layers: Vec<usize> = layers.iter().copied().filter(|&i| model.uses_rope(i)).collect();
        let first = layers.first().copied().unwrap_or(0);
        if !model.layer_types.is_empty() && rope_layers.is_empty() {
            let qk = model.qk_norm_for_layer(first).map_err(refused)?;
            println!(
                "{} ({which}): no RoPE (no_rope_layers); qk norm: {}",
                l.layer_type,
                multimodal::describe_qk_norm(qk.as_ref())
            );
            continue;
        }
        let rope = Rope::new(l.rope.clone()).map_err(|e| Failure::ConfigRefused(format!("{source}: {e}")))?;
        let line = describe(&rope, &l.scaling_name);
        let at = rope_layers.first().copied().unwrap_or(first);
        let qk = model.qk_norm_for_layer(at).map_err(refused)?;
        println!(
            "{} ({which}): {line}; qk norm: {}",
            l.layer_type,
            multimodal::describe_qk_norm(qk.as_ref())
        );
        if let Some(spec) = qk {
            qk_runs.push((l.layer_type.to_string(), at, rope.clone(), spec));
        }
        match runs.iter().position(|(_, c, _)| *c == l.rope) {
            Some(i) => runs[i].0 += &format!(", {}", l.layer_type),
            None => runs.push((l.layer_type.to_string(), l.rope.clone(), line)),
        }
    }
    let without = model.layers_without_rope();
    if !without.is_empty() {
        println!("layers without RoPE (no_rope_layers): {}", layer_list(&without));
    }
    if let Some(q) = model.use_qk_norm {
        let eps = model.rms_norm_eps.map(|e| format!(", rms_norm_eps {e:e}")).unwrap_or_default();
        println!("qk norm:   use_qk_norm {q}{eps}");
    }
    if let Some(m) = &model.mrope {
        let kind = if m.interleaved { "interleaved (Qwen3-VL, ggml IMROPE)" } else { "sectioned (Qwen2-VL)" };
        println!(
            "MRoPE:     mrope_section {:?} {kind} on every layer; text tokens have t = h = w, \
             where MRoPE equals the plain RoPE run below",
            m.mrope_section
        );
    }
    if let Some(v) = &model.vision {
        let axes = match v.axes[0] {
            rope_kernels::hf_config::VisionAxis::Row => "rows then columns",
            rope_kernels::hf_config::VisionAxis::Col => "columns then rows",
        };
        let merge = v.spatial_merge_size.map(|m| format!(", spatial_merge_size {m}")).unwrap_or_default();
        // The model's type, not `vision_config.model_type`: published configs and the same
        // configs re-saved by transformers name the vision part differently (`qwen3_vl`,
        // `qwen3_vl_vision`) for one encoder.
        println!(
            "vision:    {} ViT: head_dim {}, {} heads, 2-D RoPE theta {}, {} frequencies per axis, {axes}, \
             position offset {}, {}{merge}",
            model.model_type,
            v.head_dim,
            v.num_heads,
            v.theta,
            v.freqs_per_axis(),
            v.position_offset,
            layout_name(v.layout)
        );
    }

    let mut rng = XorShift(0x9E37_79B9_7F4A_7C15);
    for (label, config, line) in &runs {
        if runs.len() > 1 {
            println!("-- {label}: {line}");
        }
        let rope = Rope::new(config.clone()).map_err(|e| Failure::ConfigRefused(format!("{source}: {e}")))?;
        exercise(&rope, &model, &mut rng)?;
    }
    if let Some(m) = model.mrope_rope().map_err(refused)? {
        println!("-- MRoPE");
        multimodal::run_mrope(&model, &m, &mut rng)?;
    }
    if let (Some(spec), Some(vit)) = (&model.vision, model.vision_rope().map_err(refused)?) {
        println!("-- vision encoder ({} ViT)", model.model_type);
        multimodal::run_vision(spec, &vit, &mut rng)?;
    }
    for (label, layer, rope, spec) in &qk_runs {
        println!("-- fused QK norm + RoPE: {label} (layer {layer})");
        multimodal::run_qk_norm(&model, rope, spec, &mut rng)?;
    }
    Ok(())
}

/// `theta .. rotary_dim .. layout .. scaling` of one configuration.
fn describe(rope: &Rope, scaling_name: &str) -> String {
    let cfg = rope.config();
    let spelled =
        if scaling_name != cfg.scaling.name() { format!(" (`{scaling_name}`)") } else { String::new() };
    let factor = match &cfg.scaling {
        rope_kernels::Scaling::Linear { factor } => format!(" x{factor}"),
        _ => String::new(),
    };
    format!(
        "theta {}, rotary_dim {}, {}, scaling {}{factor}{spelled}, attention_factor {:.7}",
        cfg.theta,
        cfg.rotary_dim,
        layout_name(cfg.layout),
        cfg.scaling.name(),
        rope.frequencies().attention_factor()
    )
}

/// `0-4,6-10,12` (at most 6 runs, then the count).
fn layer_list(layers: &[usize]) -> String {
    let mut runs: Vec<(usize, usize)> = Vec::new();
    for &l in layers {
        match runs.last_mut() {
            Some((_, end)) if *end + 1 == l => *end = l,
            _ => runs.push((l, l)),
        }
    }
    let mut parts: Vec<String> =
        runs.iter().take(6).map(|&(a, b)| if a == b { a.to_string() } else { format!("{a}-{b}") }).collect();
    if runs.len() > 6 {
        parts.push(format!("... ({} layers)", layers.len()));
    }
    parts.join(",")
}

/// Prefill and decode with one configuration on the model's shapes, checked in f64.
fn exercise(rope: &Rope, model: &ModelConfig, rng: &mut XorShift) -> Result<(), Failure> {
    let attention_factor = rope.frequencies().attention_factor();
    let (heads, kv, nope, hd) =
        (model.num_attention_heads, model.num_key_value_heads, model.nope_head_dim, model.head_dim);
    let bound = 1e-5 * attention_factor.max(1.0);

    // Prefill: positions 0..2048 in one call.
    let q_in = Tensor::random(PREFILL_TOKENS, heads, nope, hd, rng);
    let k_in = Tensor::random(PREFILL_TOKENS, kv, nope, hd, rng);
    let (mut q, mut k) = (q_in.clone(), k_in.clone());
    let mut best = Duration::MAX;
    for _ in 0..REPS {
        q.data.clone_from(&q_in.data);
        k.data.clone_from(&k_in.data);
        let t = Instant::now();
        rope.apply_qk(
            q.rotary(0, PREFILL_TOKENS),
            Some(k.rotary(0, PREFILL_TOKENS)),
            &ApplyOptions::start(0),
        )
        .map_err(|e| format!("prefill: {e}"))?;
        best = best.min(t.elapsed());
    }
    let mut prefill_err = 0.0f64;
    for (input, output) in [(&q_in, &q), (&k_in, &k)] {
        prefill_err = prefill_err.max(max_error(rope, input, output, 0..PREFILL_TOKENS, 0)?);
    }
    let per_token = q.rotary_elems_per_token() + k.rotary_elems_per_token();
    report("prefill", PREFILL_TOKENS, per_token, best, prefill_err);

    // Decode: 256 calls of one token at positions 2048, 2049, ...
    let dq_in = Tensor::random(DECODE_STEPS, heads, nope, hd, rng);
    let dk_in = Tensor::random(DECODE_STEPS, kv, nope, hd, rng);
    let (mut dq, mut dk) = (dq_in.clone(), dk_in.clone());
    let mut best = Duration::MAX;
    for _ in 0..REPS {
        dq.data.clone_from(&dq_in.data);
        dk.data.clone_from(&dk_in.data);
        let t = Instant::now();
        for s in 0..DECODE_STEPS {
            let opts = ApplyOptions::start((PREFILL_TOKENS + s) as u32);
            rope.apply_qk(dq.rotary(s, 1), Some(dk.rotary(s, 1)), &opts)
                .map_err(|e| format!("decode: {e}"))?;
        }
        best = best.min(t.elapsed());
    }
    let mut decode_err = 0.0f64;
    for (input, output) in [(&dq_in, &dq), (&dk_in, &dk)] {
        for s in 0..DECODE_STEPS {
            decode_err = decode_err.max(max_error(rope, input, output, s..s + 1, PREFILL_TOKENS + s)?);
        }
    }
    report("decode", DECODE_STEPS, per_token, best, decode_err);

    let err = prefill_err.max(decode_err);
    if err > bound || !err.is_finite() {
        return Err(format!("max abs error {err:.3e} exceeds the bound {bound:.1e}").into());
    }
    println!("check:     ok (max abs error {err:.3e} <= {bound:.1e})");
    Ok(())
}

/// Largest |output - reference| over `rows` of `output`, in f64, where the rows were
/// rotated by one call at positions `position..position + rows.len()`.
fn max_error(
    rope: &Rope,
    input: &Tensor,
    output: &Tensor,
    rows: Range<usize>,
    position: usize,
) -> Result<f64, String> {
    let freqs = rope.frequencies_at((position + rows.len()) as u64).map_err(|e| e.to_string())?;
    let cfg = rope.config();
    let pairs = cfg.rotary_dim / 2;
    let af = freqs.attention_factor();
    let mut err = 0.0f64;
    let mut cos = vec![0.0f64; pairs];
    let mut sin = vec![0.0f64; pairs];
    let first = rows.start;
    for t in rows {
        let position = (position + t - first) as f64;
        for i in 0..pairs {
            let angle = position * freqs.inv_freq()[i];
            cos[i] = angle.cos() * af;
            sin[i] = angle.sin() * af;
        }
        for h in 0..input.heads {
            let base = (t * input.heads + h) * input.width;
            let x = &input.data[base..base + input.width];
            let y = &output.data[base..base + input.width];
            let mut expect: Vec<f64> = x.iter().map(|v| f64::from(*v)).collect();
            for i in 0..pairs {
                let (a, b) = match cfg.layout {
                    PairLayout::Interleaved => (input.nope + 2 * i, input.nope + 2 * i + 1),
                    _ => (input.nope + i, input.nope + i + pairs),
                };
                let (x0, x1) = (f64::from(x[a]), f64::from(x[b]));
                expect[a] = x0 * cos[i] - x1 * sin[i];
                expect[b] = x1 * cos[i] + x0 * sin[i];
            }
            for (e, v) in expect.iter().zip(y) {
                let d = (e - f64::from(*v)).abs();
                // `f64::max` ignores NaN; a NaN output is an infinite error.
                err = if d.is_nan() { f64::INFINITY } else { err.max(d) };
            }
        }
    }
    Ok(err)
}

fn report(phase: &str, tokens: usize, elems_per_token: usize, time: Duration, err: f64) {
    let secs = time.as_secs_f64().max(1e-9);
    // Every rotated element is read once and written once.
    let bytes = (tokens * elems_per_token * 2 * std::mem::size_of::<f32>()) as f64;
    println!(
        "{:<10} {tokens} tokens in {:.3} ms: {:.0} tokens/s, {:.2} GB/s, max abs error {err:.3e}",
        format!("{phase}:"),
        secs * 1e3,
        tokens as f64 / secs,
        bytes / secs / 1e9,
    );
}

fn layout_name(layout: PairLayout) -> &'static str {
    match layout {
        PairLayout::HalfSplit => "HalfSplit (GPT-NeoX / HF rotate_half)",
        PairLayout::Interleaved => "Interleaved (GPT-J / ggml NORM)",
    }
}

/// xorshift64*: deterministic inputs without a dependency.
struct XorShift(u64);

impl XorShift {
    /// Uniform in `[-1, 1)`.
    fn uniform(&mut self) -> f32 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        let r = self.0.wrapping_mul(0x2545_F491_4F6C_DD1D);
        ((r >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }
}
