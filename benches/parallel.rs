//! One call on every core (issue 9): the prefill (512 tokens) and long (4096 tokens) shapes
//! of `benches/rope.rs` (32 heads, head_dim 128, BSHD, in place, half-split, cached cos/sin),
//! f32 and bf16, single-threaded against the same call split by token ranges.
//!
//! Run: `cargo bench --features rayon --bench parallel` (`-- prefill/f32` etc. to filter).
//!
//! Per group (`<shape>/<dtype>`):
//! - `single`: `Rope::apply` on the calling thread;
//! - `rayon`: `Rope::par_apply` on rayon's global pool (one thread per core);
//! - `scoped2`: `Rope::prepare` + `PreparedCall::parts(2)`, one chunk on a scoped thread
//!   spawned per call, the other on the calling thread (a runtime's own threads, crudely);
//! - `roofline`, `roofline_rayon`: an in-place `x *= c` pass over the same buffer, on one
//!   thread and split over the pool, the memory-bound ceiling of each.
//!
//! Throughput is in elements (tokens × heads × head_dim) per second.

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use rayon::prelude::*;
use rope_kernels::{bf16, ApplyOptions, Element, HeadsMut, Rope, RopeConfig, View};

const HEADS: usize = 32;
const HEAD_DIM: usize = 128;
const SHAPES: [(&str, usize); 2] = [("prefill", 512), ("long", 4096)];

/// `x *= c` over the buffer, in the element type (bf16 widened to f32 and rounded back, as
/// the kernels do).
#[inline(never)]
fn scale<T: Element>(x: &mut [T], c: f32) {
    for v in x.iter_mut() {
        *v = T::from_f32(v.to_f32() * c);
    }
}

fn group<T: Element>(c: &mut Criterion, dtype: &str, value: T) {
    let rope = Rope::new(RopeConfig::new(HEAD_DIM, 500_000.0)).unwrap();
    let cache = rope.build_cache(4096).unwrap();
    let opts = ApplyOptions::start(0).with_table(cache.table());
    for (shape, tokens) in SHAPES {
        let n = tokens * HEADS * HEAD_DIM;
        let v = View::token_major(tokens, HEADS, HEAD_DIM);
        let mut x = vec![value; n];
        let mut g = c.benchmark_group(format!("{shape}/{dtype}"));
        g.throughput(Throughput::Elements(n as u64));
        g.bench_function("single", |b| {
            b.iter(|| rope.apply(HeadsMut::new(&mut x, v), black_box(&opts)).unwrap())
        });
        g.bench_function("rayon", |b| {
            b.iter(|| rope.par_apply(HeadsMut::new(&mut x, v), black_box(&opts)).unwrap())
        });
        g.bench_function("scoped2", |b| {
            b.iter(|| {
                let mut call = rope.prepare(HeadsMut::new(&mut x, v), black_box(&opts)).unwrap();
                let mut parts = call.parts(2);
                let (first, second) = (parts.next().unwrap(), parts.next().unwrap());
                std::thread::scope(|s| {
                    s.spawn(move || second.run());
                    first.run();
                });
            })
        });
        // Alternating `c` and `1 / c` keeps the values put however many calls run.
        let mut y = vec![value; n];
        let mut flip = false;
        let mut factor = move || {
            flip = !flip;
            if flip {
                0.75
            } else {
                1.0 / 0.75
            }
        };
        g.bench_function("roofline", |b| b.iter(|| scale(black_box(&mut y), factor())));
        g.bench_function("roofline_rayon", |b| {
            b.iter(|| {
                let c = factor();
                black_box(&mut y).par_chunks_mut(16 * 1024).for_each(|ch| scale(ch, c))
            })
        });
        g.finish();
    }
}

fn benches(c: &mut Criterion) {
    group::<f32>(c, "f32", 0.5);
    group::<bf16>(c, "bf16", bf16::from_f32(0.5));
}

criterion_group! {
    name = parallel;
    config = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    targets = benches
}
criterion_main!(parallel);
