//! The sibling positional encodings per tier: fused sinusoidal add, learned add, ALiBi add.
//!
//! Run: `cargo bench --bench encodings` (append `-- --quick` for a short run; filter with
//! criterion's usual argument, e.g. `-- alibi_add`).
//! Shapes: embeddings 512 tokens x 4096 dims (f32 and bf16); ALiBi 32 heads x 512 x 512
//! f32 scores. Throughput is reported in elements of the tensor that is written.
//!
//! Every (encoding, dtype) is one criterion group holding `<case>/<tier>` for every tier
//! available here, each object pinned to its tier (`with_tier`, `add_alibi_with_tier`), so
//! the scalar oracle and the SIMD tiers compare in the same group. The sinusoidal add
//! generates its values on the fly with the tier's cos/sin generator, then adds them with
//! the tier's add-row kernel.

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkGroup, BenchmarkId, Criterion, Throughput};
use rope_kernels::dispatch::available_tiers;
use rope_kernels::encodings::{
    add_alibi_with_tier, alibi_slopes, AlibiForm, LearnedPositions, RelativeGrid, Sinusoidal,
    SinusoidalLayout,
};
use rope_kernels::{bf16, Element, Positions};

const TOKENS: usize = 512;
const DIM: usize = 4096;
const HEADS: usize = 32;
const SEQ: usize = 512;

type Group<'a> = BenchmarkGroup<'a, criterion::measurement::WallTime>;

fn embeddings<T: Element>() -> Vec<T> {
    (0..TOKENS * DIM).map(|i| T::from_f32((i % 97) as f32 * 0.01)).collect()
}

fn configure(g: &mut Group<'_>, elements: usize) {
    g.throughput(Throughput::Elements(elements as u64));
    g.sample_size(10).warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(3));
}

fn sinusoidal_add<T: Element>(c: &mut Criterion, dtype: &str) {
    let mut g = c.benchmark_group(format!("sinusoidal_add/{dtype}"));
    configure(&mut g, TOKENS * DIM);
    let mut x = embeddings::<T>();
    for layout in [SinusoidalLayout::Interleaved, SinusoidalLayout::Concatenated] {
        let name = if layout == SinusoidalLayout::Interleaved { "interleaved" } else { "concatenated" };
        for tier in available_tiers() {
            let pe = Sinusoidal::new(DIM, layout).unwrap().with_tier(tier).unwrap();
            g.bench_function(BenchmarkId::new(format!("{name}_512x4096"), tier), |b| {
                b.iter(|| pe.add_to(black_box(&mut x), TOKENS, DIM, Positions::Start(0)).unwrap())
            });
        }
    }
    g.finish();
}

fn sinusoidal(c: &mut Criterion) {
    sinusoidal_add::<f32>(c, "f32");
    sinusoidal_add::<bf16>(c, "bf16");
}

fn learned(c: &mut Criterion) {
    let table32: Vec<f32> = (0..TOKENS * DIM).map(|i| (i % 89) as f32 * 0.001).collect();
    let table16: Vec<bf16> = table32.iter().map(|&v| bf16::from_f32(v)).collect();
    let ids: Vec<u32> = (0..TOKENS as u32).rev().collect();

    let mut g = c.benchmark_group("learned_add/f32");
    configure(&mut g, TOKENS * DIM);
    let mut x32 = embeddings::<f32>();
    for tier in available_tiers() {
        let w32 = LearnedPositions::new(&table32, DIM).unwrap().with_tier(tier).unwrap();
        g.bench_function(BenchmarkId::new("table_f32_512x4096", tier), |b| {
            b.iter(|| w32.add_to(black_box(&mut x32), TOKENS, DIM, Positions::Ids(&ids)).unwrap())
        });
    }
    g.finish();

    let mut g = c.benchmark_group("learned_add/bf16");
    configure(&mut g, TOKENS * DIM);
    let mut x16 = embeddings::<bf16>();
    for tier in available_tiers() {
        let w16 = LearnedPositions::new(&table16, DIM).unwrap().with_tier(tier).unwrap();
        g.bench_function(BenchmarkId::new("table_bf16_512x4096", tier), |b| {
            b.iter(|| w16.add_to(black_box(&mut x16), TOKENS, DIM, Positions::Ids(&ids)).unwrap())
        });
        let w32 = LearnedPositions::new(&table32, DIM).unwrap().with_tier(tier).unwrap();
        g.bench_function(BenchmarkId::new("table_f32_512x4096", tier), |b| {
            b.iter(|| w32.add_to(black_box(&mut x16), TOKENS, DIM, Positions::Ids(&ids)).unwrap())
        });
    }
    g.finish();
}

fn alibi(c: &mut Criterion) {
    let mut g = c.benchmark_group("alibi_add/f32");
    configure(&mut g, HEADS * SEQ * SEQ);
    let mut slopes = [0.0f32; HEADS];
    alibi_slopes(&mut slopes);
    let mut scores: Vec<f32> = (0..HEADS * SEQ * SEQ).map(|i| (i % 101) as f32 * 0.01).collect();
    let grid = RelativeGrid::new(SEQ, SEQ);
    for (form, name) in
        [(AlibiForm::Causal, "causal_32x512x512"), (AlibiForm::Symmetric, "symmetric_32x512x512")]
    {
        for tier in available_tiers() {
            g.bench_function(BenchmarkId::new(name, tier), |b| {
                b.iter(|| {
                    add_alibi_with_tier(black_box(&mut scores), SEQ, grid, &slopes, form, tier).unwrap()
                })
            });
        }
    }
    g.finish();
}

criterion_group!(benches, sinusoidal, learned, alibi);
criterion_main!(benches);
