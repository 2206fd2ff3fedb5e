//! The model-zoo benchmark (issue 18): RoPE on the shapes of real models, each row against
//! its own roofline measured in the same run, on the same buffers.
//!
//! Models: every config of `tests/data/configs/` (loaded with `ModelConfig`, so their
//! scaling is the real one), plus Pythia-2.8B (head_dim 80, rotary_dim 20) and Gemma 2 9B
//! (head_dim 256, 16 q + 8 kv heads), which have no config there. DeepSeek-V2-Lite is its
//! MLA rope part (64 elements, interleaved, 16 q heads + 1 shared k head).
//!
//! Shapes: `decode` (1 token at position 4000), `prefill` (512 tokens from 0), `long` (4096
//! tokens from 0). Each (model, shape) is run in these variants, named
//! `<dtype>-<tensor layout>-<place>-<cos/sin>[-<extra>]`:
//! - `f32-bshd-in-cached` (the base), `f32-bshd-out-cached`, `f16-bshd-in-cached`,
//!   `bf16-bshd-in-cached`; `f32-bhsd-in-cached` and `f32-bhsd-out-cached` for prefill and
//!   long (one decode token is the same in both layouts);
//! - decode: `f32-bshd-in-fly` (cos/sin computed in the call), `f32-bshd-in-cached-off16`
//!   (q and k 16 bytes past a 64-byte boundary; the others start on one);
//! - models whose scaling depends on the call length (LongRoPE) and Llama 2 with dynamic NTK
//!   (factor 2, `max_position_embeddings` 2048, so decode at 4000 is scaled): the same rows
//!   with `-default` scaling beside them, cached and on the fly.
//!
//! Every group `<model>/<shape>/<variant>` holds, per tier (`ZOO_TIERS`, default the SIMD
//! tiers of this CPU): `<tier>/rope` and the rooflines of its bytes: `<tier>/roof` (in place:
//! every rotated byte read and written back; out of place: every byte copied, ordinary
//! stores), `<tier>/roof_nt` (out of place, streaming stores), the same with `_pf` (4 KB
//! software prefetch, as the rotations do in large calls; the table takes the fastest
//! `roof*` of a row as its roofline) and for f16/bf16
//! `<tier>/conv` (the in-place widen, multiply, round pass of the rotated part,
//! `__bench::scale`); in place on BSHD prefill and long also `<tier>/roof_tok_pf` (the
//! in-place pass token by token, in the rotation's order). Each is measured in rounds
//! (`ZOO_ROUNDS`: 4 for prefill and long, 1 for decode), named `<tier>/<kind>@<round>`, every
//! kind of the group in turn within a round, so that the machine's drift reaches rope and
//! rooflines alike; the table takes each kind's fastest sample over its rounds.
//! `scripts/zoo.sh` runs it and prints the table (`scripts/zoo-table.py`).
//!
//! First, the rotary_dim sweep ([`sweep`]): one decode token of 64 q + 64 k heads of
//! head_dim 64, every even rotary_dim from 2 to 34, both layouts, on the portable tier and
//! the SIMD tiers (`rd-sweep/decode/f32-bshd-in-cached-<half|inter>-rd<NN>`), for the
//! "any rotary_dim" targets: time per rotated element within 1.25x of the nearest rotary_dim
//! whose pairs fill whole vectors, and no SIMD tier slower than the portable one.
//!
//! Run: `scripts/zoo.sh` (about 40 minutes), or `ZOO_FILTER=phi-2/decode,/long/f32-bshd-in
//! cargo bench --features bench-internals --bench zoo` for a subset (comma-separated substrings of the group names,
//! checked before any buffer is built; criterion's own filter argument also works).

use std::hint::black_box;
use std::time::Duration;

use criterion::measurement::WallTime;
use criterion::{criterion_group, criterion_main, BenchmarkGroup, Criterion, SamplingMode, Throughput};
use rope_kernels::__bench::{self, RooflineRows};
use rope_kernels::dispatch::available_tiers;
use rope_kernels::hf_config::ModelConfig;
use rope_kernels::{
    bf16, f16, ApplyOptions, Element, Heads, HeadsMut, PairLayout, Rope, RopeCache, RopeConfig, Scaling,
    Tier, View,
};

struct Model {
    name: String,
    config: RopeConfig,
    q_heads: usize,
    k_heads: usize,
    /// The same model with default scaling, for models whose scaling depends on the call.
    default: Option<RopeConfig>,
}

fn models() -> Vec<Model> {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/configs");
    let mut files: Vec<_> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    let mut out = Vec::new();
    for f in files {
        let m = ModelConfig::from_path(&f).unwrap();
        let name = f.file_stem().unwrap().to_string_lossy().into_owned();
        // DeepSeek MLA: one k_pe head shared by every head.
        let k_heads = if m.nope_head_dim > 0 { 1 } else { m.num_key_value_heads };
        let mut config = unit_attention(m.rope.clone());
        let mut default = None;
        if config.scaling.depends_on_seq_len() {
            default = Some(config.clone().with_scaling(Scaling::None));
        }
        if name == "llama-2-7b" {
            // Dynamic NTK on the Llama 2 shape (the scaled regime from position 2048).
            config = config.with_scaling(Scaling::DynamicNtk { factor: 2.0, max_position_embeddings: 2048 });
            out.push(Model {
                name: name.clone(),
                config: m.rope.clone(),
                q_heads: m.num_attention_heads,
                k_heads,
                default: None,
            });
            out.push(Model {
                name: "llama-2-7b-dynamic".into(),
                config,
                q_heads: m.num_attention_heads,
                k_heads,
                default: Some(m.rope.clone()),
            });
            continue;
        }
        out.push(Model { name, config, q_heads: m.num_attention_heads, k_heads, default });
    }
    out.push(Model {
        name: "pythia-2.8b".into(),
        config: RopeConfig::new(80, 10_000.0).with_rotary_dim(20),
        q_heads: 32,
        k_heads: 32,
        default: None,
    });
    out.push(Model {
        name: "gemma-2-9b".into(),
        config: RopeConfig::new(256, 10_000.0),
        q_heads: 16,
        k_heads: 8,
        default: None,
    });
    out
}

/// `c` with an attention factor of 1 (YaRN, LongRoPE). Every row applies its rotation to
/// the same buffers on every iteration, so a factor above 1 (Phi-3 128k's LongRoPE 1.19,
/// the YaRN models' mscale) grew the values by that factor per call until they overflowed
/// to infinity and NaN, and the rows timed the stores' NaN path (Phi-3 decode: 8,833
/// instructions per call against 7,202 with default scaling, callgrind; 1.8x the time).
/// The kernels' work is the same: the factor lives in the cos/sin values.
fn unit_attention(mut c: RopeConfig) -> RopeConfig {
    match &mut c.scaling {
        Scaling::Yarn(p) => p.attention_factor = Some(1.0),
        Scaling::LongRope(p) => p.attention_factor = Some(1.0),
        _ => {}
    }
    c
}

struct Shape {
    name: &'static str,
    tokens: usize,
    start: u32,
}

const SHAPES: [Shape; 3] = [
    Shape { name: "decode", tokens: 1, start: 4000 },
    Shape { name: "prefill", tokens: 512, start: 0 },
    Shape { name: "long", tokens: 4096, start: 0 },
];

#[derive(Clone, Copy, PartialEq)]
enum Dtype {
    F32,
    F16,
    Bf16,
}

#[derive(Clone, Copy)]
struct Variant {
    dtype: Dtype,
    bhsd: bool,
    out_of_place: bool,
    fly: bool,
    /// Bytes past a 64-byte boundary where q and k start.
    offset: usize,
    /// Run the model's default-scaling twin instead.
    default_scaling: bool,
}

impl Variant {
    const BASE: Variant = Variant {
        dtype: Dtype::F32,
        bhsd: false,
        out_of_place: false,
        fly: false,
        offset: 0,
        default_scaling: false,
    };

    fn name(&self) -> String {
        let d = match self.dtype {
            Dtype::F32 => "f32",
            Dtype::F16 => "f16",
            Dtype::Bf16 => "bf16",
        };
        let mut s = format!(
            "{d}-{}-{}-{}",
            if self.bhsd { "bhsd" } else { "bshd" },
            if self.out_of_place { "out" } else { "in" },
            if self.fly { "fly" } else { "cached" }
        );
        if self.offset != 0 {
            s += &format!("-off{}", self.offset);
        }
        if self.default_scaling {
            s += "-default";
        }
        s
    }
}

fn variants(shape: &Shape, model: &Model) -> Vec<Variant> {
    let b = Variant::BASE;
    let mut v = vec![
        b,
        Variant { out_of_place: true, ..b },
        Variant { dtype: Dtype::F16, ..b },
        Variant { dtype: Dtype::Bf16, ..b },
    ];
    if shape.tokens > 1 {
        v.push(Variant { bhsd: true, ..b });
        v.push(Variant { bhsd: true, out_of_place: true, ..b });
    } else {
        v.push(Variant { fly: true, ..b });
        v.push(Variant { offset: 16, ..b });
    }
    if model.default.is_some() {
        v.push(Variant { default_scaling: true, ..b });
        if shape.tokens == 1 {
            v.push(Variant { default_scaling: true, fly: true, ..b });
        }
    }
    v
}

/// A buffer of `len` elements starting `offset` bytes past a 64-byte boundary.
struct Buf<T> {
    v: Vec<T>,
    start: usize,
    len: usize,
}

impl<T: Element> Buf<T> {
    fn new(len: usize, offset: usize, seed: u32) -> Self {
        let size = std::mem::size_of::<T>();
        let extra = 128 / size;
        let mut s = seed;
        let v: Vec<T> = (0..len + extra)
            .map(|_| {
                s = s.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                T::from_f32((s >> 8) as f32 / (1u32 << 23) as f32 - 1.0)
            })
            .collect();
        let addr = v.as_ptr() as usize;
        let start = (0..extra).find(|i| (addr + i * size) % 64 == offset).unwrap();
        Buf { v, start, len }
    }
    fn get(&mut self) -> &mut [T] {
        &mut self.v[self.start..self.start + self.len]
    }
    fn get_ref(&self) -> &[T] {
        &self.v[self.start..self.start + self.len]
    }
}

fn tiers() -> Vec<Tier> {
    let want = std::env::var("ZOO_TIERS").unwrap_or_default();
    available_tiers()
        .filter(|t| {
            if want.is_empty() {
                !matches!(t, Tier::Scalar | Tier::Portable)
            } else {
                want.split(',').any(|w| w == t.name())
            }
        })
        .collect()
}

fn bench_row<T: Element>(g: &mut BenchmarkGroup<'_, WallTime>, m: &Model, shape: &Shape, var: &Variant) {
    let config = if var.default_scaling { m.default.clone().unwrap() } else { m.config.clone() };
    let (hd, rd) = (config.head_dim, config.rotary_dim);
    let base = Rope::new(config).unwrap();
    let cache: RopeCache = base.build_cache(shape.start as usize + shape.tokens).unwrap();
    let view = |heads| {
        if var.bhsd {
            View::head_major(shape.tokens, heads, hd)
        } else {
            View::token_major(shape.tokens, heads, hd)
        }
    };
    let (qv, kv) = (view(m.q_heads), view(m.k_heads));
    let (qn, kn) = (shape.tokens * m.q_heads * hd, shape.tokens * m.k_heads * hd);
    let mut q = Buf::<T>::new(qn, var.offset, 1);
    let mut k = Buf::<T>::new(kn, var.offset, 2);
    let mut qo = Buf::<T>::new(if var.out_of_place { qn } else { 0 }, var.offset, 3);
    let mut ko = Buf::<T>::new(if var.out_of_place { kn } else { 0 }, var.offset, 4);
    g.throughput(Throughput::Elements((qn + kn) as u64));
    let opts = if var.fly {
        ApplyOptions::start(shape.start)
    } else {
        ApplyOptions::start(shape.start).with_table(cache.table())
    };
    // Every (token, head) row is head_dim apart in both dense layouts.
    let rows = |n: usize, len, prefetch| RooflineRows { rows: n / hd, stride: hd, row_len: len, prefetch };
    let ropes: Vec<(Tier, Rope)> =
        tiers().into_iter().map(|t| (t, base.clone().with_tier(t).unwrap())).collect();
    let kinds = kinds(shape, var);
    let mut run = |rope: &Rope, tier: Tier, kind: Kind| match kind {
        Kind::Rope if var.out_of_place => {
            let (qs, ks) = (q.get_ref(), k.get_ref());
            let (qd, kd) = (&mut qo.v[qo.start..qo.start + qo.len], &mut ko.v[ko.start..ko.start + ko.len]);
            rope.apply_qk_into(
                Heads::new(qs, qv),
                HeadsMut::new(qd, qv),
                Some((Heads::new(ks, kv), HeadsMut::new(kd, kv))),
                black_box(&opts),
            )
            .unwrap();
        }
        Kind::Rope => {
            let kh = Some(HeadsMut::new(k.get(), kv));
            rope.apply_qk(HeadsMut::new(q.get(), qv), kh, black_box(&opts)).unwrap();
        }
        Kind::Roof { streaming, prefetch } if var.out_of_place => {
            __bench::roofline_copy(tier, q.get_ref(), qo.get(), rows(qn, hd, prefetch), black_box(streaming))
                .unwrap();
            __bench::roofline_copy(tier, k.get_ref(), ko.get(), rows(kn, hd, prefetch), black_box(streaming))
                .unwrap();
        }
        Kind::Roof { prefetch, .. } => {
            __bench::roofline_in_place(tier, q.get(), rows(qn, rd, prefetch), black_box(0)).unwrap();
            __bench::roofline_in_place(tier, k.get(), rows(kn, rd, prefetch), black_box(0)).unwrap();
        }
        Kind::RoofTokens => {
            let (qt, kt) = (rows(qn / shape.tokens, rd, true), rows(kn / shape.tokens, rd, true));
            __bench::roofline_in_place_tokens(tier, q.get(), qt, k.get(), kt, shape.tokens, black_box(0))
                .unwrap();
        }
        Kind::Conv => {
            for buf in [q.get(), k.get()] {
                if rd == hd {
                    __bench::scale(tier, buf, black_box(1.0)).unwrap();
                } else {
                    for row in buf.chunks_exact_mut(hd) {
                        __bench::scale(tier, &mut row[..rd], black_box(1.0)).unwrap();
                    }
                }
            }
        }
    };
    // Round by round, every kind of every tier in turn: the machine's speed drifts by more
    // than the 1.05x the table allows between rope and roofline (the DRAM-bound long rows
    // moved 0.78-1.24x from run to run when each kind was measured in one stretch), so each
    // kind's samples are spread over the same stretch of time as the others'.
    for round in 0..rounds(shape) {
        for (tier, rope) in &ropes {
            for &kind in &kinds {
                g.bench_function(format!("{tier}/{}@{round}", kind.name()), |b| {
                    b.iter(|| run(rope, *tier, kind))
                });
            }
        }
    }
}

/// What a group times: the rotation, and the rooflines of its bytes.
#[derive(Clone, Copy)]
enum Kind {
    Rope,
    /// In place: every rotated byte read and written back; out of place: every byte copied
    /// (ordinary or `streaming` stores); with or without the 4 KB software prefetch.
    Roof {
        streaming: bool,
        prefetch: bool,
    },
    /// In place on several BSHD tokens, token by token in the rotation's own order (q's
    /// heads, then k's heads of each token), prefetching, in one call. On partial-rotary long
    /// rows that order ran up to 1.6x faster than all of q then all of k (Phi-2, AVX-512: 1.40
    /// against 2.24 ms), and the rotation had beaten the q-then-k roofline by up to 1.42x; made
    /// as two calls per token, it charged the roofline a call's overhead per token, and five
    /// long rows still beat it by 1.06-1.15x.
    RoofTokens,
    /// f16/bf16 in place: the widen, multiply, round pass of the rotated part.
    Conv,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Rope => "rope",
            Kind::Roof { streaming: false, prefetch: false } => "roof",
            Kind::Roof { streaming: true, prefetch: false } => "roof_nt",
            Kind::Roof { streaming: false, prefetch: true } => "roof_pf",
            Kind::Roof { streaming: true, prefetch: true } => "roof_nt_pf",
            Kind::RoofTokens => "roof_tok_pf",
            Kind::Conv => "conv",
        }
    }
}

fn kinds(shape: &Shape, var: &Variant) -> Vec<Kind> {
    let mut v = vec![Kind::Rope];
    let streaming: &[bool] = if var.out_of_place { &[false, true] } else { &[false] };
    for &prefetch in &[false, true] {
        for &streaming in streaming {
            v.push(Kind::Roof { streaming, prefetch });
        }
    }
    if !var.out_of_place && shape.tokens > 1 && !var.bhsd {
        v.push(Kind::RoofTokens);
    }
    if var.dtype != Dtype::F32 && !var.out_of_place {
        v.push(Kind::Conv);
    }
    v
}

/// Measurement rounds per group: `ZOO_ROUNDS`, default 4 for prefill and long, 1 for decode
/// (decode rows are cache-resident and each benchmark is long enough on its own).
fn rounds(shape: &Shape) -> usize {
    let default = if shape.tokens > 1 { 4 } else { 1 };
    std::env::var("ZOO_ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// Whether `ZOO_FILTER` (comma-separated substrings; empty: all) selects the group `id`.
/// Checked before the group's buffers are built, which criterion's own filter cannot do.
fn selected(id: &str) -> bool {
    let f = std::env::var("ZOO_FILTER").unwrap_or_default();
    f.is_empty() || f.split(',').any(|w| id.contains(w))
}

/// The rotary_dim sweep (issue 18: "time per rotated element <= 1.25x that of the nearest
/// rotary_dim whose pairs fill whole vectors; no SIMD tier slower than the portable tier"):
/// one decode token at position 4000 of [`SWEEP_HEADS`] q and as many k heads of head_dim
/// [`SWEEP_HEAD_DIM`], f32 in place, cached cos/sin, every even rotary_dim from 2 to
/// 2 x 16 + 2 (twice AVX-512's lanes, plus one pair), both layouts, on the portable tier and
/// the SIMD tiers. Groups `rd-sweep/decode/f32-bshd-in-cached-<half|inter>-rd<NN>`, functions
/// `<tier>/rope@<round>` (three rounds, every tier in turn), throughput in rotated elements
/// (`scripts/zoo-table.py` prints the sweep).
/// Decode is cache-resident, so a cliff in the kernel shows undiluted; on many tokens the
/// rows are memory-bound at the cache-line granularity instead.
const SWEEP_HEAD_DIM: usize = 64;
const SWEEP_HEADS: usize = 64;
const SWEEP_ROUNDS: usize = 3;

fn sweep(c: &mut Criterion) {
    let mut tiers = tiers();
    if !tiers.contains(&Tier::Portable) {
        tiers.insert(0, Tier::Portable);
    }
    let shape = &SHAPES[0];
    for (layout, lname) in [(PairLayout::HalfSplit, "half"), (PairLayout::Interleaved, "inter")] {
        for rd in (2..=34).step_by(2) {
            let id = format!("rd-sweep/{}/f32-bshd-in-cached-{lname}-rd{rd:02}", shape.name);
            if !selected(&id) {
                continue;
            }
            let config = RopeConfig::new(SWEEP_HEAD_DIM, 10_000.0).with_rotary_dim(rd).with_layout(layout);
            let base = Rope::new(config).unwrap();
            let cache: RopeCache = base.build_cache(shape.start as usize + shape.tokens).unwrap();
            let opts = ApplyOptions::start(shape.start).with_table(cache.table());
            let view = View::token_major(shape.tokens, SWEEP_HEADS, SWEEP_HEAD_DIM);
            let n = shape.tokens * SWEEP_HEADS * SWEEP_HEAD_DIM;
            let (mut q, mut k) = (Buf::<f32>::new(n, 0, 1), Buf::<f32>::new(n, 0, 2));
            let mut g = c.benchmark_group(id);
            g.throughput(Throughput::Elements((2 * shape.tokens * SWEEP_HEADS * rd) as u64));
            let ropes: Vec<(Tier, Rope)> =
                tiers.iter().map(|&t| (t, base.clone().with_tier(t).unwrap())).collect();
            // Rounds, every tier in turn within each (the table takes the fastest sample):
            // the portable comparison is within the machine's drift otherwise.
            for round in 0..SWEEP_ROUNDS {
                for (tier, rope) in &ropes {
                    g.bench_function(format!("{tier}/rope@{round}"), |b| {
                        b.iter(|| {
                            let kh = Some(HeadsMut::new(k.get(), view));
                            rope.apply_qk(HeadsMut::new(q.get(), view), kh, black_box(&opts)).unwrap();
                        })
                    });
                }
            }
            g.finish();
        }
    }
}

fn bench(c: &mut Criterion) {
    sweep(c);
    for m in models() {
        for shape in &SHAPES {
            for var in variants(shape, &m) {
                let id = format!("{}/{}/{}", m.name, shape.name, var.name());
                if !selected(&id) {
                    continue;
                }
                let mut g = c.benchmark_group(id);
                if shape.tokens > 1 {
                    // Flat: ten samples of equal length, so that a round fits in its share of
                    // the measurement time even at milliseconds per iteration.
                    g.sample_size(10).sampling_mode(SamplingMode::Flat);
                    g.measurement_time(measurement_time() / rounds(shape) as u32);
                }
                match var.dtype {
                    Dtype::F32 => bench_row::<f32>(&mut g, &m, shape, &var),
                    Dtype::F16 => bench_row::<f16>(&mut g, &m, shape, &var),
                    Dtype::Bf16 => bench_row::<bf16>(&mut g, &m, shape, &var),
                }
                g.finish();
            }
        }
    }
}

/// `ZOO_MEASURE_MS` (default 200 ms): the measurement time of one benchmark, shared by its
/// rounds.
fn measurement_time() -> Duration {
    let ms = std::env::var("ZOO_MEASURE_MS").ok().and_then(|v| v.parse().ok()).unwrap_or(200);
    Duration::from_millis(ms)
}

/// Criterion's settings: short (the zoo has about a thousand benchmarks); `ZOO_MEASURE_MS`
/// sets the measurement time per benchmark (default 200 ms).
fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_millis(50))
        .measurement_time(measurement_time())
        .sample_size(20)
        .without_plots()
}

criterion_group! {
    name = benches;
    config = config();
    targets = bench
}
criterion_main!(benches);
