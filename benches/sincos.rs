//! The on-the-fly cos/sin generator: one row (64 pairs, rotary_dim 128) per tier against
//! the former libm row, and the decode step (one token, 32 q + 8 k heads, head_dim 128,
//! f32, in place) with cos/sin generated on the fly against the same step reading a
//! precomputed cache.
//!
//! Run: `cargo bench --features bench-internals --bench sincos` (criterion; `-- row` or `-- decode` to pick a group).
//!
//! The rotate itself runs on the tier of the `Rope` (the process-wide dispatcher's). The
//! `decode/gen_<tier>+table` rows generate the row with that generator tier and rotate with
//! a one-row caller table, which is what the on-the-fly path does per token.

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use rope_kernels::__bench::sincos as gen;
use rope_kernels::{AngleMode, ApplyOptions, CosSinTable, HeadsMut, Rope, RopeConfig, View};

const HEAD_DIM: usize = 128;
const PAIRS: usize = HEAD_DIM / 2;
const Q_HEADS: usize = 32;
const K_HEADS: usize = 8;
/// A position past 2^17, where the accuracy of f32 angles is already lost.
const POSITION: u32 = 200_000;

fn config() -> RopeConfig {
    RopeConfig::new(HEAD_DIM, 500_000.0)
}

fn row(c: &mut Criterion) {
    let rope = Rope::new(config()).unwrap();
    let freqs = &rope.frequencies();
    let mut g = c.benchmark_group("row");
    let (mut cos, mut sin) = ([0.0f32; PAIRS], [0.0f32; PAIRS]);
    // Positions cycle through 1024 values from `start`: libm's cost depends on the angle
    // (large arguments take its slow reduction), the generator's does not.
    let cycle = |start: u32, i: &mut u32| {
        *i = (*i + 1) & 1023;
        black_box(start + *i)
    };
    for tier in gen::tiers() {
        for mode in [AngleMode::Exact, AngleMode::HfCompatible] {
            let name = format!("{tier}/{}", if mode == AngleMode::Exact { "exact" } else { "hf" });
            g.bench_function(name, |b| {
                let mut i = 0;
                b.iter(|| {
                    gen::fill_row(tier, freqs, mode, cycle(POSITION, &mut i), &mut cos, &mut sin);
                    black_box((&cos, &sin));
                })
            });
        }
    }
    for (name, start) in [("libm/exact", POSITION), ("libm/exact@2^30", 1 << 30)] {
        g.bench_function(name, |b| {
            let mut i = 0;
            b.iter(|| {
                gen::fill_row_libm(freqs, AngleMode::Exact, cycle(start, &mut i), &mut cos, &mut sin);
                black_box((&cos, &sin));
            })
        });
    }
    g.finish();
}

fn decode(c: &mut Criterion) {
    let rope = Rope::new(config()).unwrap();
    let freqs = &rope.frequencies();
    let cache = rope.build_cache(POSITION as usize + 1).unwrap();
    let mut q = vec![0.25f32; Q_HEADS * HEAD_DIM];
    let mut k = vec![0.5f32; K_HEADS * HEAD_DIM];
    let (qv, kv) = (View::token_major(1, Q_HEADS, HEAD_DIM), View::token_major(1, K_HEADS, HEAD_DIM));
    let mut g = c.benchmark_group("decode");
    let rotate_tier = rope.tier();

    g.bench_function(format!("cached/{rotate_tier}"), |b| {
        let opts = ApplyOptions::start(POSITION).with_table(cache.table());
        b.iter(|| {
            rope.apply_qk(HeadsMut::new(&mut q, qv), Some(HeadsMut::new(&mut k, kv)), black_box(&opts))
                .unwrap()
        })
    });
    g.bench_function(format!("on_the_fly/{rotate_tier}"), |b| {
        let opts = ApplyOptions::start(POSITION);
        b.iter(|| {
            rope.apply_qk(HeadsMut::new(&mut q, qv), Some(HeadsMut::new(&mut k, kv)), black_box(&opts))
                .unwrap()
        })
    });
    let (mut cos, mut sin) = ([0.0f32; PAIRS], [0.0f32; PAIRS]);
    let one_row = ApplyOptions::start(0);
    for tier in gen::tiers() {
        g.bench_function(format!("gen_{tier}+table/{rotate_tier}"), |b| {
            b.iter(|| {
                gen::fill_row(tier, freqs, AngleMode::Exact, black_box(POSITION), &mut cos, &mut sin);
                let table = CosSinTable::new(&cos, &sin, PAIRS).unwrap();
                let opts = one_row.with_table(table);
                rope.apply_qk(HeadsMut::new(&mut q, qv), Some(HeadsMut::new(&mut k, kv)), &opts).unwrap()
            })
        });
    }
    g.bench_function(format!("gen_libm+table/{rotate_tier}"), |b| {
        b.iter(|| {
            gen::fill_row_libm(freqs, AngleMode::Exact, black_box(POSITION), &mut cos, &mut sin);
            let table = CosSinTable::new(&cos, &sin, PAIRS).unwrap();
            let opts = one_row.with_table(table);
            rope.apply_qk(HeadsMut::new(&mut q, qv), Some(HeadsMut::new(&mut k, kv)), &opts).unwrap()
        })
    });
    // The baseline: the scalar tier generating its row with libm.
    let scalar = rope.clone().with_tier(rope_kernels::Tier::Scalar).unwrap();
    g.bench_function("scalar_libm/scalar", |b| {
        b.iter(|| {
            gen::fill_row_libm(freqs, AngleMode::Exact, black_box(POSITION), &mut cos, &mut sin);
            let table = CosSinTable::new(&cos, &sin, PAIRS).unwrap();
            let opts = one_row.with_table(table);
            scalar.apply_qk(HeadsMut::new(&mut q, qv), Some(HeadsMut::new(&mut k, kv)), &opts).unwrap()
        })
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(2));
    targets = row, decode
}
criterion_main!(benches);
