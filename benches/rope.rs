//! RoPE throughput per tier against a roofline compiled for the same tier.
//!
//! Shapes (head_dim 128, rotary_dim 128, Llama-style theta 10000, cached cos/sin rows):
//! - `decode`: 1 token, q of 32 heads and k of 8 heads in one `apply_qk` call, position 1000;
//! - `prefill`: 512 tokens × 32 heads, positions 0..512;
//! - `long`: 4096 tokens × 32 heads, positions 0..4096.
//!
//! Every (shape, dtype, layout) is one criterion group holding, for every tier available
//! here, `<tier>/rope` (the in-place rotation) and `<tier>/roofline`: the fastest pass
//! the tier makes over the same bytes of the same buffers, every byte read and written back
//! (`rope_kernels::__bench::roofline_in_place`, issue 18: an upper bound, so no rope row
//! may beat it by more than the noise), and `<tier>/roofline_pf`, the same with a 4 KB
//! software prefetch (the table takes the faster); for bf16 also `<tier>/conv`, the in-place `x *= c`
//! pass through the tier's widen/round path (`rope_kernels::__bench::scale`).
//! Throughput is in elements (q plus k) per second.
//!
//! Run: `cargo bench --features bench-internals --bench rope` (a few minutes), then `python3 scripts/bench-table.py`
//! for the README table (from each benchmark's fastest sample; `--median` for criterion's
//! median). Filter with criterion's usual argument, e.g.
//! `cargo bench --features bench-internals --bench rope -- prefill/bf16`.

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkGroup, Criterion, Throughput};
use rope_kernels::__bench::{roofline_in_place, RooflineRows};
use rope_kernels::dispatch::available_tiers;
use rope_kernels::{bf16, ApplyOptions, Element, HeadsMut, PairLayout, Rope, RopeCache, RopeConfig, View};

const HEAD_DIM: usize = 128;

struct Shape {
    name: &'static str,
    tokens: usize,
    q_heads: usize,
    /// `None`: q only.
    k_heads: Option<usize>,
    start: u32,
}

const SHAPES: [Shape; 3] = [
    Shape { name: "decode", tokens: 1, q_heads: 32, k_heads: Some(8), start: 1000 },
    Shape { name: "prefill", tokens: 512, q_heads: 32, k_heads: None, start: 0 },
    Shape { name: "long", tokens: 4096, q_heads: 32, k_heads: None, start: 0 },
];

/// Values in [-1, 1) from a fixed LCG (no dependency on the RNG crate's stream).
fn data<T: Element>(n: usize, seed: u32) -> Vec<T> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            T::from_f32((s >> 8) as f32 / (1u32 << 23) as f32 - 1.0)
        })
        .collect()
}

fn bench_shape<T: Element>(
    g: &mut BenchmarkGroup<'_, criterion::measurement::WallTime>,
    shape: &Shape,
    layout: PairLayout,
) {
    let config = RopeConfig::new(HEAD_DIM, 10_000.0).with_layout(layout);
    let base = Rope::new(config).unwrap();
    let cache: RopeCache = base.build_cache(shape.start as usize + shape.tokens).unwrap();
    let qv = View::token_major(shape.tokens, shape.q_heads, HEAD_DIM);
    let kv = shape.k_heads.map(|h| View::token_major(shape.tokens, h, HEAD_DIM));
    let mut q = data::<T>(shape.tokens * shape.q_heads * HEAD_DIM, 1);
    let mut k = data::<T>(kv.map_or(0, |v| v.tokens * v.heads * HEAD_DIM), 2);
    g.throughput(Throughput::Elements((q.len() + k.len()) as u64));
    let opts = ApplyOptions::start(shape.start).with_table(cache.table());
    for tier in available_tiers() {
        let rope = base.clone().with_tier(tier).unwrap();
        g.bench_function(format!("{tier}/rope"), |b| {
            b.iter(|| {
                let kh = kv.map(|v| HeadsMut::new(&mut k[..], v));
                rope.apply_qk(HeadsMut::new(&mut q[..], qv), kh, black_box(&opts)).unwrap();
            })
        });
        for (kind, prefetch) in [("roofline", false), ("roofline_pf", true)] {
            g.bench_function(format!("{tier}/{kind}"), |b| {
                b.iter(|| {
                    let rows = |n: usize| RooflineRows {
                        rows: n / HEAD_DIM,
                        stride: HEAD_DIM,
                        row_len: HEAD_DIM,
                        prefetch,
                    };
                    let (qr, kr) = (rows(q.len()), rows(k.len()));
                    roofline_in_place(tier, &mut q, qr, black_box(0)).unwrap();
                    roofline_in_place(tier, &mut k, kr, black_box(0)).unwrap();
                })
            });
        }
        if std::mem::size_of::<T>() != 4 {
            g.bench_function(format!("{tier}/conv"), |b| {
                b.iter(|| {
                    rope_kernels::__bench::scale(tier, &mut q, black_box(1.0)).unwrap();
                    if !k.is_empty() {
                        rope_kernels::__bench::scale(tier, &mut k, black_box(1.0)).unwrap();
                    }
                })
            });
        }
    }
}

fn bench(c: &mut Criterion) {
    for shape in &SHAPES {
        for (dtype, is_f32) in [("f32", true), ("bf16", false)] {
            for (lname, layout) in
                [("half_split", PairLayout::HalfSplit), ("interleaved", PairLayout::Interleaved)]
            {
                let mut g = c.benchmark_group(format!("{}/{dtype}/{lname}", shape.name));
                if is_f32 {
                    bench_shape::<f32>(&mut g, shape, layout);
                } else {
                    bench_shape::<bf16>(&mut g, shape, layout);
                }
                g.finish();
            }
        }
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_millis(1000))
        .sample_size(50);
    targets = bench
}
criterion_main!(benches);
