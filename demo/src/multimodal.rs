//! The operations the loader wires beside the 1-D RoPE: MRoPE on a synthetic text + image
//! sequence, the vision encoder's 2-D RoPE on a patch grid, and the fused QK norm + RoPE of
//! each layer type; each output checked against an f64 evaluation of its formula.

use std::time::Instant;

use rope_kernels::hf_config::{ModelConfig, MropeSpec, QkNormKind, QkNormSpec, VisionAxis, VisionRopeSpec};
use rope_kernels::{
    vision_position_ids, ApplyOptions, HeadsMut, MRope, MRopeIndex, MRopeOptions, PairLayout, QkNorm, Rope,
    View, VisionOptions, VisionRope, WeightOffset, TOKEN_IMAGE, TOKEN_TEXT,
};

use super::{Failure, XorShift};

/// Text tokens before and after the image of the MRoPE sequence.
const TEXT_TOKENS: usize = 16;
/// The image of the MRoPE sequence and the vision run: 32 x 32 patches.
const IMAGE_PATCHES: u32 = 32;
/// Tokens of the fused QK-norm run.
const QK_NORM_TOKENS: usize = 256;
/// Largest error accepted against the f64 evaluation (relative to `max(1, |expected|)`).
const BOUND: f64 = 1e-5;

/// `[tokens][heads][head_dim]` f32 values in `[-1, 1)`.
fn random(n: usize, rng: &mut XorShift) -> Vec<f32> {
    (0..n).map(|_| rng.uniform()).collect()
}

/// The pair `(a, b)` of pair `j` of a head.
fn pair(layout: PairLayout, j: usize, pairs: usize) -> (usize, usize) {
    match layout {
        PairLayout::Interleaved => (2 * j, 2 * j + 1),
        _ => (j, j + pairs),
    }
}

/// Rotates `head` (f64) in place: pair `j` by `angle(j)`, times `af`.
fn rotate(head: &mut [f64], layout: PairLayout, pairs: usize, af: f64, angle: impl Fn(usize) -> f64) {
    for j in 0..pairs {
        let (a, b) = pair(layout, j, pairs);
        let (s, c) = angle(j).sin_cos();
        let (x0, x1) = (head[a], head[b]);
        head[a] = (x0 * c - x1 * s) * af;
        head[b] = (x1 * c + x0 * s) * af;
    }
}

/// Largest `|got - want| / max(1, |want|)`; NaN is an infinite error.
fn error(got: &[f32], want: &[f64]) -> f64 {
    got.iter().zip(want).fold(0.0f64, |e, (g, w)| {
        let d = (f64::from(*g) - w).abs() / w.abs().max(1.0);
        if d.is_nan() {
            f64::INFINITY
        } else {
            e.max(d)
        }
    })
}

fn check(what: &str, err: f64) -> Result<(), Failure> {
    if err > BOUND || !err.is_finite() {
        return Err(format!("{what}: error {err:.3e} exceeds {BOUND:.0e}").into());
    }
    println!("check:     ok ({what}: max error {err:.3e} <= {BOUND:.0e})");
    Ok(())
}

/// The position stream (0 t, 1 h, 2 w) of pair `j`, from the formulas of `MropeSpec`
/// (written here again, independently of the kernel's own mapping).
fn stream_of(spec: MropeSpec, j: usize) -> usize {
    let [s_t, s_h, s_w] = spec.mrope_section;
    if spec.interleaved {
        match j % 3 {
            1 if j < 3 * s_h => 1,
            2 if j < 3 * s_w => 2,
            _ => 0,
        }
    } else if j < s_t {
        0
    } else if j < s_t + s_h {
        1
    } else {
        2
    }
}

/// MRoPE on 16 text tokens, a 32 x 32-patch image (merge 2: 16 x 16 tokens) and 16 text
/// tokens, positions from `MRopeIndex`; q and k heads in one call.
pub(crate) fn run_mrope(model: &ModelConfig, m: &MRope, rng: &mut XorShift) -> Result<(), Failure> {
    let spec = model.mrope.ok_or("MRoPE without mrope_section")?;
    let merge = 2u32;
    let side = (IMAGE_PATCHES / merge) as usize;
    let image_tokens = side * side;
    let mut types = vec![TOKEN_TEXT; TEXT_TOKENS];
    types.extend(std::iter::repeat_n(TOKEN_IMAGE, image_tokens));
    types.extend(std::iter::repeat_n(TOKEN_TEXT, TEXT_TOKENS));
    let grid = [[1, IMAGE_PATCHES, IMAGE_PATCHES]];
    let index = MRopeIndex {
        token_types: &types,
        image_grid_thw: &grid,
        spatial_merge_size: merge,
        ..MRopeIndex::default()
    };
    let ([t, h, w], next) = index.to_vecs().map_err(|e| format!("MRopeIndex: {e}"))?;
    let n = types.len();
    let cfg = m.rope().config();
    let (hd, pairs) = (cfg.head_dim, cfg.rotary_dim / 2);
    let (heads, kv) = (model.num_attention_heads, model.num_key_value_heads);
    let (q_in, k_in) = (random(n * heads * hd, rng), random(n * kv * hd, rng));
    let (mut q, mut k) = (q_in.clone(), k_in.clone());
    let start = Instant::now();
    m.apply_qk(
        HeadsMut::new(&mut q, View::token_major(n, heads, hd)),
        Some(HeadsMut::new(&mut k, View::token_major(n, kv, hd))),
        &MRopeOptions::ids([&t, &h, &w]),
    )
    .map_err(|e| format!("MRoPE: {e}"))?;
    let took = start.elapsed();
    let freqs = m.rope().frequencies_at(u64::from(next)).map_err(|e| e.to_string())?;
    let streams = [&t, &h, &w];
    let mut want = Vec::new();
    for x in [&q_in, &k_in] {
        let mut y: Vec<f64> = x.iter().map(|&v| f64::from(v)).collect();
        for (i, head) in y.chunks_mut(hd).enumerate() {
            let tok = i / (x.len() / n / hd);
            rotate(head, cfg.layout, pairs, freqs.attention_factor(), |j| {
                f64::from(streams[stream_of(spec, j)][tok]) * freqs.inv_freq()[j]
            });
        }
        want.push(y);
    }
    println!(
        "mrope:     {TEXT_TOKENS} text + {image_tokens} image ({IMAGE_PATCHES}x{IMAGE_PATCHES} patches, merge {merge}) \
         + {TEXT_TOKENS} text tokens, positions from MRopeIndex (next {next}); {} in {:.3} ms",
        n,
        took.as_secs_f64() * 1e3
    );
    check("MRoPE vs f64", error(&q, &want[0]).max(error(&k, &want[1])))
}

/// The encoder's 2-D RoPE on its patch grid: Qwen's 32 x 32 patches in merge-block order,
/// Llama 4's `grid_size`² patches row-major plus the class token.
pub(crate) fn run_vision(spec: &VisionRopeSpec, vit: &VisionRope, rng: &mut XorShift) -> Result<(), Failure> {
    let (rows, cols, what) = match spec.spatial_merge_size {
        Some(merge) => {
            let grid = [1, IMAGE_PATCHES, IMAGE_PATCHES];
            let n = (IMAGE_PATCHES * IMAGE_PATCHES) as usize;
            let (mut r, mut c) = (vec![0u32; n], vec![0u32; n]);
            vision_position_ids(grid, merge as u32, &mut r, &mut c)
                .map_err(|e| format!("vision_position_ids: {e}"))?;
            (r, c, format!("{IMAGE_PATCHES}x{IMAGE_PATCHES} patches in {merge}x{merge} merge-block order"))
        }
        None => {
            let g = spec.grid_size.unwrap_or(IMAGE_PATCHES as usize) as u32;
            let rows = (0..g * g).map(|i| i / g).collect();
            let cols = (0..g * g).map(|i| i % g).collect();
            (rows, cols, format!("{g}x{g} patches row-major + the class token"))
        }
    };
    let patches = rows.len();
    let cls = spec.spatial_merge_size.is_none();
    let n = patches + usize::from(cls);
    let (mut s0, mut s1) = (vec![0u32; n], vec![0u32; n]);
    spec.fill_position_ids(&rows, &cols, &mut s0[..patches], &mut s1[..patches])
        .map_err(|e| format!("vision positions: {e}"))?;
    let (hd, heads) = (spec.head_dim, spec.num_heads);
    let x = random(n * heads * hd, rng);
    let mut y = x.clone();
    let start = Instant::now();
    vit.apply(HeadsMut::new(&mut y, View::token_major(n, heads, hd)), &VisionOptions::ids([&s0, &s1]))
        .map_err(|e| format!("vision RoPE: {e}"))?;
    let took = start.elapsed();
    // f64: pair j < hd/4 by (axes[0] + offset) * inv[j], else (axes[1] + offset) * inv[j - hd/4].
    let inv = spec.inv_freq();
    let q = spec.freqs_per_axis();
    let coord = |tok: usize, axis: VisionAxis| -> f64 {
        if tok >= patches {
            return 0.0; // the class token: angle 0
        }
        let p = if axis == VisionAxis::Row { rows[tok] } else { cols[tok] };
        f64::from(p) + f64::from(spec.position_offset)
    };
    let mut want: Vec<f64> = x.iter().map(|&v| f64::from(v)).collect();
    for (i, head) in want.chunks_mut(hd).enumerate() {
        let tok = i / heads;
        rotate(head, spec.layout, hd / 2, 1.0, |j| {
            if j < q {
                coord(tok, spec.axes[0]) * inv[j]
            } else {
                coord(tok, spec.axes[1]) * inv[j - q]
            }
        });
    }
    println!("vision:    ran on {what}: {n} tokens x {heads} heads in {:.3} ms", took.as_secs_f64() * 1e3);
    check("vision RoPE vs f64", error(&y, &want))
}

/// One line of what a layer type's q/k norm is.
pub(crate) fn describe_qk_norm(spec: Option<&QkNormSpec>) -> String {
    match spec.map(|s| (s.kind, s.eps)) {
        None => "none".to_string(),
        Some((QkNormKind::RmsBefore(WeightOffset::Zero), eps)) => {
            format!("per-head RMS norm with weight before RoPE (Qwen3RMSNorm), eps {eps:e}")
        }
        Some((QkNormKind::RmsBefore(WeightOffset::One), eps)) => {
            format!("per-head RMS norm with 1 + weight before RoPE (Gemma3RMSNorm), eps {eps:e}")
        }
        Some((QkNormKind::L2After, eps)) => {
            format!("weightless L2 norm after RoPE (Llama4TextL2Norm), eps {eps:e}")
        }
        Some((kind, eps)) => format!("{kind:?}, eps {eps:e}"),
    }
}

/// The fused QK norm + RoPE of one layer on 256 tokens with a synthetic weight, checked
/// against the f64 norm and rotation in the form's order.
pub(crate) fn run_qk_norm(
    model: &ModelConfig,
    rope: &Rope,
    spec: &QkNormSpec,
    rng: &mut XorShift,
) -> Result<(), Failure> {
    let cfg = rope.config();
    let (hd, pairs, n) = (cfg.head_dim, cfg.rotary_dim / 2, QK_NORM_TOKENS);
    let (heads, kv) = (model.num_attention_heads, model.num_key_value_heads);
    // Synthetic weights as checkpoints hold them: near 1 (weight), near 0 (1 + weight).
    let centre = if spec.kind == QkNormKind::RmsBefore(WeightOffset::Zero) { 1.0 } else { 0.0 };
    let qw: Vec<f32> = (0..hd).map(|_| centre + 0.25 * rng.uniform()).collect();
    let kw: Vec<f32> = (0..hd).map(|_| centre + 0.25 * rng.uniform()).collect();
    let weights = matches!(spec.kind, QkNormKind::RmsBefore(_)).then_some((&qw[..], &kw[..]));
    let norm: QkNorm<'_> = spec.with_weights(weights).map_err(|e| format!("qk norm: {e}"))?;
    let (q_in, k_in) = (random(n * heads * hd, rng), random(n * kv * hd, rng));
    let (mut q, mut k) = (q_in.clone(), k_in.clone());
    let start = Instant::now();
    rope.apply_qk_norm(
        HeadsMut::new(&mut q, View::token_major(n, heads, hd)),
        Some(HeadsMut::new(&mut k, View::token_major(n, kv, hd))),
        &norm,
        &ApplyOptions::start(0),
    )
    .map_err(|e| format!("fused qk norm + RoPE: {e}"))?;
    let took = start.elapsed();
    let freqs = rope.frequencies_at(n as u64).map_err(|e| e.to_string())?;
    let eps = f64::from(spec.eps);
    let rms_norm = |head: &mut [f64], w: Option<&[f32]>| {
        let inv = 1.0 / (head.iter().map(|v| v * v).sum::<f64>() / hd as f64 + eps).sqrt();
        for (i, v) in head.iter_mut().enumerate() {
            let scale = match (spec.kind, w) {
                (QkNormKind::RmsBefore(WeightOffset::One), Some(w)) => 1.0 + f64::from(w[i]),
                (_, Some(w)) => f64::from(w[i]),
                (_, None) => 1.0,
            };
            *v *= inv * scale;
        }
    };
    let mut err = 0.0f64;
    for (x, y, w) in [(&q_in, &q, &qw), (&k_in, &k, &kw)] {
        let per_token = x.len() / n;
        let mut want: Vec<f64> = x.iter().map(|&v| f64::from(v)).collect();
        for (i, head) in want.chunks_mut(hd).enumerate() {
            let pos = (i * hd / per_token) as f64;
            let angle = |j: usize| pos * freqs.inv_freq()[j];
            if spec.after_rope() {
                rotate(head, cfg.layout, pairs, freqs.attention_factor(), angle);
                rms_norm(head, None);
            } else {
                rms_norm(head, Some(w));
                rotate(head, cfg.layout, pairs, freqs.attention_factor(), angle);
            }
        }
        err = err.max(error(y, &want));
    }
    println!(
        "qk norm:   fused with RoPE on {n} tokens ({heads} q + {kv} k heads), synthetic weight, in {:.3} ms",
        took.as_secs_f64() * 1e3
    );
    check("fused QK norm + RoPE vs f64", err)
}
