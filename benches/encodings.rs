//! The sibling positional encodings: fused sinusoidal add, learned add, ALiBi add.
//!
//! Run: `cargo bench --bench encodings` (append `-- --quick` for a short run).
//! Shapes: embeddings 512 tokens x 4096 dims (f32 and bf16); ALiBi 32 heads x 512 x 512
//! f32 scores. Throughput is reported in elements of the tensor that is written.

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use rope_kernels::encodings::{
    add_alibi, alibi_slopes, AlibiForm, LearnedPositions, RelativeGrid, Sinusoidal, SinusoidalLayout,
};
use rope_kernels::{bf16, Element, Positions};

const TOKENS: usize = 512;
const DIM: usize = 4096;
const HEADS: usize = 32;
const SEQ: usize = 512;

fn embeddings<T: Element>() -> Vec<T> {
    (0..TOKENS * DIM).map(|i| T::from_f32((i % 97) as f32 * 0.01)).collect()
}

fn sinusoidal(c: &mut Criterion) {
    let mut g = c.benchmark_group("sinusoidal_add");
    g.throughput(Throughput::Elements((TOKENS * DIM) as u64));
    g.sample_size(10).warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(5));
    let pe = Sinusoidal::new(DIM, SinusoidalLayout::Interleaved).unwrap();
    let mut x32 = embeddings::<f32>();
    g.bench_function("f32_512x4096", |b| {
        b.iter(|| pe.add_to(black_box(&mut x32), TOKENS, DIM, Positions::Start(0)).unwrap())
    });
    let mut x16 = embeddings::<bf16>();
    g.bench_function("bf16_512x4096", |b| {
        b.iter(|| pe.add_to(black_box(&mut x16), TOKENS, DIM, Positions::Start(0)).unwrap())
    });
    g.finish();
}

fn learned(c: &mut Criterion) {
    let mut g = c.benchmark_group("learned_add");
    g.throughput(Throughput::Elements((TOKENS * DIM) as u64));
    let table32: Vec<f32> = (0..TOKENS * DIM).map(|i| (i % 89) as f32 * 0.001).collect();
    let table16: Vec<bf16> = table32.iter().map(|&v| bf16::from_f32(v)).collect();
    let ids: Vec<u32> = (0..TOKENS as u32).rev().collect();
    let w32 = LearnedPositions::new(&table32, DIM).unwrap();
    let w16 = LearnedPositions::new(&table16, DIM).unwrap();
    let mut x32 = embeddings::<f32>();
    g.bench_function("f32_512x4096", |b| {
        b.iter(|| w32.add_to(black_box(&mut x32), TOKENS, DIM, Positions::Ids(&ids)).unwrap())
    });
    let mut x16 = embeddings::<bf16>();
    g.bench_function("bf16_table_bf16_512x4096", |b| {
        b.iter(|| w16.add_to(black_box(&mut x16), TOKENS, DIM, Positions::Ids(&ids)).unwrap())
    });
    g.bench_function("bf16_table_f32_512x4096", |b| {
        b.iter(|| w32.add_to(black_box(&mut x16), TOKENS, DIM, Positions::Ids(&ids)).unwrap())
    });
    g.finish();
}

fn alibi(c: &mut Criterion) {
    let mut g = c.benchmark_group("alibi_add");
    g.throughput(Throughput::Elements((HEADS * SEQ * SEQ) as u64));
    let mut slopes = [0.0f32; HEADS];
    alibi_slopes(&mut slopes);
    let mut scores: Vec<f32> = (0..HEADS * SEQ * SEQ).map(|i| (i % 101) as f32 * 0.01).collect();
    let grid = RelativeGrid::new(SEQ, SEQ);
    g.bench_function("f32_32x512x512", |b| {
        b.iter(|| add_alibi(black_box(&mut scores), SEQ, grid, &slopes, AlibiForm::Causal).unwrap())
    });
    g.finish();
}

criterion_group!(benches, sinusoidal, learned, alibi);
criterion_main!(benches);
