//! The convert kernels of issue 17 against the in-place rotation of the same shape, per
//! tier: k of Llama-3.1-8B at prefill, 512 tokens × 8 heads × 128 (`HalfSplit`, one cos/sin
//! row per token from a cache), f32 input.
//!
//! Each group holds, for every tier available here:
//! - `<tier>/rope_f32`: the in-place f32 rotation (`Rope::apply`), the kernel a runtime
//!   calls today;
//! - `<tier>/rope_to_bf16`: the convert kernel, rotating f32 into a separate bf16 buffer
//!   (`__bench::convert_rows`, one call per token);
//! - `<tier>/rope_then_bf16`: today's two passes, the in-place rotation then a convert
//!   pass of the whole buffer to bf16 (the convert kernel with `cos` empty: our fastest
//!   conversion);
//! - `<tier>/rope_to_q8_0`, `<tier>/rope_then_q8_0`: the same with `q8_0` output (the second
//!   pass a flat quantize);
//! - `<tier>/flat_bf16`, `<tier>/flat_q8_0`: the second passes alone.
//!
//! Throughput is in elements per second. Run: `cargo bench --features bench-internals --bench convert_kernels`
//! (short: `-- --warm-up-time 1 --measurement-time 2`).

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use rope_kernels::__bench::{convert_rows, ConvertRows};
use rope_kernels::dispatch::available_tiers;
use rope_kernels::{
    bf16, ApplyOptions, BlockQ8_0, CacheElement, HeadsMut, PairLayout, Rope, RopeConfig, View,
};

const TOKENS: usize = 512;
const HEADS: usize = 8;
const HEAD_DIM: usize = 128;

/// Values in [-1, 1) from a fixed LCG.
fn data(n: usize) -> Vec<f32> {
    let mut s = 1u32;
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            (s >> 8) as f32 / (1u32 << 23) as f32 - 1.0
        })
        .collect()
}

/// Token `t`'s heads through the convert kernel with cos/sin row `t` of the cache (one
/// call per token, as a layer call makes them).
fn convert_with_rows<O: CacheElement>(
    tier: rope_kernels::Tier,
    x: &[f32],
    out: &mut [O],
    cos: &[f32],
    sin: &[f32],
) {
    let pairs = HEAD_DIM / 2;
    let (row, units) = (HEADS * HEAD_DIM, HEADS * HEAD_DIM / O::ELEMENTS_PER_UNIT);
    let r = ConvertRows {
        tokens: 1,
        heads: HEADS,
        head_dim: HEAD_DIM,
        src_token_stride: row,
        src_head_stride: HEAD_DIM,
        dst_token_stride: units,
        dst_head_stride: HEAD_DIM / O::ELEMENTS_PER_UNIT,
    };
    for t in 0..TOKENS {
        let (c, s) = (&cos[t * pairs..][..pairs], &sin[t * pairs..][..pairs]);
        convert_rows(
            tier,
            &x[t * row..][..row],
            &mut out[t * units..][..units],
            r,
            c,
            s,
            PairLayout::HalfSplit,
            false,
        )
        .unwrap();
    }
}

/// The whole buffer as one flat pass (`cos` empty): the separate conversion.
fn flat<O: CacheElement>(tier: rope_kernels::Tier, x: &[f32], out: &mut [O]) {
    let r = ConvertRows {
        tokens: 1,
        heads: 1,
        head_dim: x.len(),
        src_token_stride: x.len(),
        src_head_stride: x.len(),
        dst_token_stride: out.len(),
        dst_head_stride: out.len(),
    };
    convert_rows(tier, x, out, r, &[], &[], PairLayout::HalfSplit, false).unwrap();
}

fn bench(c: &mut Criterion) {
    let n = TOKENS * HEADS * HEAD_DIM;
    let base = Rope::new(RopeConfig::new(HEAD_DIM, 500_000.0)).unwrap();
    let cache = base.build_cache(TOKENS).unwrap();
    let rows: Vec<_> = (0..TOKENS as u32).map(|t| cache.table().row(t).unwrap()).collect();
    let cos: Vec<f32> = rows.iter().flat_map(|r| r.0.iter().copied()).collect();
    let sin: Vec<f32> = rows.iter().flat_map(|r| r.1.iter().copied()).collect();
    let (cos, sin) = (&cos[..], &sin[..]);
    let view = View::token_major(TOKENS, HEADS, HEAD_DIM);
    let opts = ApplyOptions::start(0).with_table(cache.table());
    let src = data(n);
    let mut g = c.benchmark_group(format!("convert/{TOKENS}x{HEADS}x{HEAD_DIM}/f32"));
    g.throughput(Throughput::Elements(n as u64));
    for tier in available_tiers() {
        let rope = base.clone().with_tier(tier).unwrap();
        let mut x = src.clone();
        let mut b16 = vec![bf16::ZERO; n];
        let mut q8 = vec![BlockQ8_0::default(); n / 32];
        g.bench_function(format!("{tier}/rope_f32"), |b| {
            b.iter(|| rope.apply(HeadsMut::new(&mut x[..], view), black_box(&opts)).unwrap())
        });
        g.bench_function(format!("{tier}/rope_to_bf16"), |b| {
            b.iter(|| convert_with_rows(tier, black_box(&src), &mut b16, cos, sin))
        });
        g.bench_function(format!("{tier}/rope_then_bf16"), |b| {
            b.iter(|| {
                rope.apply(HeadsMut::new(&mut x[..], view), black_box(&opts)).unwrap();
                flat(tier, &x, &mut b16);
            })
        });
        g.bench_function(format!("{tier}/flat_bf16"), |b| b.iter(|| flat(tier, black_box(&src), &mut b16)));
        g.bench_function(format!("{tier}/flat_q8_0"), |b| b.iter(|| flat(tier, black_box(&src), &mut q8)));
        g.bench_function(format!("{tier}/rope_to_q8_0"), |b| {
            b.iter(|| convert_with_rows(tier, black_box(&src), &mut q8, cos, sin))
        });
        g.bench_function(format!("{tier}/rope_then_q8_0"), |b| {
            b.iter(|| {
                rope.apply(HeadsMut::new(&mut x[..], view), black_box(&opts)).unwrap();
                flat(tier, &x, &mut q8);
            })
        });
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_millis(1000))
        .sample_size(30);
    targets = bench
}
criterion_main!(benches);
