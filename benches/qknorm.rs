//! Fused QK-norm + RoPE (issue 15) against a norm pass followed by a RoPE pass, on the
//! AVX-512, AVX2 and NEON tiers (each object pinned with `with_tier`; a tier this CPU lacks is
//! skipped and reported).
//!
//! Shape: Qwen3-8B prefill, 512 tokens, q of 32 heads and k of 8 heads (BSHD), head_dim 128,
//! theta 1e6, cached cos/sin rows, positions 0..512. Each (dtype, form) is one criterion
//! group holding:
//! - `two_pass`: [`Rope::norm_qk`] (the per-head RMS norm over q and k in place, with the
//!   same SIMD norm kernel the fused op uses) followed by [`Rope::apply_qk`];
//! - `fused`: [`Rope::apply_qk_norm`], one pass.
//!
//! Both produce the same bits (tests/qknorm.rs). Throughput is in elements (q plus k).
//! Run: `cargo bench --bench qknorm -- --warm-up-time 1 --measurement-time 2`; again with
//! `QKNORM_FUSED_FIRST=1` (the fused call first in each group) to alternate; with
//! `QKNORM_PARTS=1` the group also times the norm pass and the RoPE pass alone. On a loaded
//! machine: `QKNORM_MIN=300 cargo bench --bench qknorm` prints the minimum of 300
//! alternated calls of each instead (no criterion).

use std::hint::black_box;

use criterion::{criterion_group, Criterion, Throughput};
use rope_kernels::{bf16, ApplyOptions, Element, HeadsMut, QkNorm, Rope, RopeConfig, Tier, View};

const HEAD_DIM: usize = 128;
const TOKENS: usize = 512;
const Q_HEADS: usize = 32;
const K_HEADS: usize = 8;

/// Values in [-1, 1) from a fixed LCG.
fn data<T: Element>(n: usize, seed: u32) -> Vec<T> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            T::from_f32((s >> 8) as f32 / (1u32 << 23) as f32 - 1.0)
        })
        .collect()
}

fn bench_dtype<T: Element>(c: &mut Criterion, name: &str, tier: Tier) {
    let Ok(rope) = Rope::new(RopeConfig::new(HEAD_DIM, 1_000_000.0)).unwrap().with_tier(tier) else {
        eprintln!("skipping {tier}: not on this CPU");
        return;
    };
    let cache = rope.build_cache(TOKENS).unwrap();
    let opts = ApplyOptions::start(0).with_table(cache.table());
    let (qv, kv) =
        (View::token_major(TOKENS, Q_HEADS, HEAD_DIM), View::token_major(TOKENS, K_HEADS, HEAD_DIM));
    // Weights of 1 keep repeated in-place calls stationary (weights other than 1 make some
    // elements decay into subnormals over thousands of iterations, which measures the
    // CPU's subnormal path instead); the cost does not depend on the weights' values.
    let (qw, kw) = (vec![1.0f32; HEAD_DIM], vec![1.0f32; HEAD_DIM]);
    let forms = [("qwen3", QkNorm::qwen3(&qw, &kw, 1e-6)), ("llama4", QkNorm::llama4(1e-5))];
    for (form, norm) in forms {
        let mut g = c.benchmark_group(format!("qknorm/prefill/{name}/{form}/{}", rope.tier()));
        g.throughput(Throughput::Elements(((Q_HEADS + K_HEADS) * TOKENS * HEAD_DIM) as u64));
        let (mut q, mut k) =
            (data::<T>(TOKENS * Q_HEADS * HEAD_DIM, 1), data::<T>(TOKENS * K_HEADS * HEAD_DIM, 2));
        let after = matches!(norm, QkNorm::L2After { .. });
        let two_pass = |q: &mut [T], k: &mut [T]| {
            if !after {
                rope.norm_qk(HeadsMut::new(&mut *q, qv), Some(HeadsMut::new(&mut *k, kv)), &norm).unwrap();
            }
            rope.apply_qk(HeadsMut::new(&mut *q, qv), Some(HeadsMut::new(&mut *k, kv)), &opts).unwrap();
            if after {
                rope.norm_qk(HeadsMut::new(&mut *q, qv), Some(HeadsMut::new(&mut *k, kv)), &norm).unwrap();
            }
            black_box(&*q);
        };
        // `QKNORM_FUSED_FIRST=1` swaps the order of the two (alternate runs to see drift).
        let fused_first = std::env::var("QKNORM_FUSED_FIRST").is_ok();
        if !fused_first {
            g.bench_function("two_pass", |b| b.iter(|| two_pass(&mut q, &mut k)));
        }
        g.bench_function("fused", |b| {
            b.iter(|| {
                rope.apply_qk_norm(HeadsMut::new(&mut q, qv), Some(HeadsMut::new(&mut k, kv)), &norm, &opts)
                    .unwrap();
                black_box(&q);
            })
        });
        if fused_first {
            g.bench_function("two_pass", |b| b.iter(|| two_pass(&mut q, &mut k)));
        }
        // `QKNORM_PARTS=1` also times each pass of `two_pass` alone (where the time goes).
        if std::env::var("QKNORM_PARTS").is_ok() {
            g.bench_function("norm_only", |b| {
                b.iter(|| {
                    rope.norm_qk(HeadsMut::new(&mut q, qv), Some(HeadsMut::new(&mut k, kv)), &norm).unwrap();
                    black_box(&q);
                })
            });
            g.bench_function("rope_only", |b| {
                b.iter(|| {
                    rope.apply_qk(HeadsMut::new(&mut q, qv), Some(HeadsMut::new(&mut k, kv)), &opts).unwrap();
                    black_box(&q);
                })
            });
        }
        g.finish();
    }
}

fn benches(c: &mut Criterion) {
    for tier in [Tier::Avx512, Tier::Avx2, Tier::Neon] {
        bench_dtype::<f32>(c, "f32", tier);
        bench_dtype::<bf16>(c, "bf16", tier);
    }
}

/// `QKNORM_MIN=N`: instead of criterion, the minimum over `N` alternated calls of each
/// variant (two_pass, fused, norm pass alone, RoPE pass alone), qwen3 form, one line per
/// tier and dtype. The minimum is robust on a loaded shared machine, where criterion's
/// means drift 10-30% between the members of a group.
fn min_table<T: Element>(name: &str, tier: Tier, reps: usize) {
    use std::time::Instant;
    let Ok(rope) = Rope::new(RopeConfig::new(HEAD_DIM, 1_000_000.0)).unwrap().with_tier(tier) else {
        eprintln!("skipping {tier}: not on this CPU");
        return;
    };
    let cache = rope.build_cache(TOKENS).unwrap();
    let opts = ApplyOptions::start(0).with_table(cache.table());
    let (qv, kv) =
        (View::token_major(TOKENS, Q_HEADS, HEAD_DIM), View::token_major(TOKENS, K_HEADS, HEAD_DIM));
    let (qw, kw) = (vec![1.0f32; HEAD_DIM], vec![1.0f32; HEAD_DIM]);
    let norm = QkNorm::qwen3(&qw, &kw, 1e-6);
    let (mut q, mut k) =
        (data::<T>(TOKENS * Q_HEADS * HEAD_DIM, 1), data::<T>(TOKENS * K_HEADS * HEAD_DIM, 2));
    let mut best = [f64::MAX; 4];
    for _ in 0..reps {
        for (which, best) in best.iter_mut().enumerate() {
            let t = Instant::now();
            match which {
                0 => {
                    rope.norm_qk(HeadsMut::new(&mut q, qv), Some(HeadsMut::new(&mut k, kv)), &norm).unwrap();
                    rope.apply_qk(HeadsMut::new(&mut q, qv), Some(HeadsMut::new(&mut k, kv)), &opts).unwrap();
                }
                1 => rope
                    .apply_qk_norm(HeadsMut::new(&mut q, qv), Some(HeadsMut::new(&mut k, kv)), &norm, &opts)
                    .unwrap(),
                2 => rope.norm_qk(HeadsMut::new(&mut q, qv), Some(HeadsMut::new(&mut k, kv)), &norm).unwrap(),
                _ => {
                    rope.apply_qk(HeadsMut::new(&mut q, qv), Some(HeadsMut::new(&mut k, kv)), &opts).unwrap()
                }
            }
            *best = best.min(t.elapsed().as_secs_f64() * 1e6);
        }
        black_box(&q);
    }
    let [two, fused, n, r] = best;
    println!(
        "{name:4} {tier:8} two_pass {two:7.1} us  fused {fused:7.1} us  ratio {:.2}  (norm {n:6.1}, rope {r:6.1})",
        two / fused
    );
}

criterion_group!(qknorm, benches);

fn main() {
    if let Some(reps) = std::env::var("QKNORM_MIN").ok().and_then(|v| v.parse().ok()) {
        for tier in [Tier::Avx512, Tier::Avx2, Tier::Neon] {
            min_table::<f32>("f32", tier, reps);
            min_table::<bf16>("bf16", tier, reps);
        }
        return;
    }
    qknorm();
    Criterion::default().configure_from_args().final_summary();
}
