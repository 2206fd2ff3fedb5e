//! MRoPE and 2-D vision RoPE against the plain 1-D RoPE of the same shape (issue 15
//! acceptance: within 1.2x), cached and on the fly, f32, the dispatcher's tier.
//!
//! Shapes:
//! - `qwen25vl_decode`: Qwen2.5-VL-7B text, 1 token, 28 q + 4 k heads, head_dim 128, in one
//!   `apply_qk` call, text position 1000 (t = h = w);
//! - `qwen25vl_prefill512`: 512 tokens (100 text, a 32x24-patch image = 192 tokens, 220 text)
//!   with positions from `MRopeIndex`, 28 q + 4 k heads;
//! - `qwen2vl_vit1024`: the ViT, head_dim 80, 16 heads, 1024 patches (a 32x32 grid), q and k.
//!
//! Each group holds `plain/cached`, `plain/on_the_fly` (the 1-D RoPE at positions 0..tokens,
//! or the decode position; cache indexed by position) and the same for `mrope_sectioned`
//! ([16, 24, 24]), `mrope_interleaved` ([24, 20, 20]) or `vision` (cached: a per-token table
//! built once with `build_table`, as one serves every layer). Throughput in elements (q plus k).
//!
//! Run: `cargo bench --bench mrope -- --warm-up-time 1 --measurement-time 2`.
//! The variants of a group run one after another in the same process, so compare ratios
//! within one run only; on a shared machine repeat the run and quote the spread.

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use rope_kernels::{
    vision_position_ids, ApplyOptions, HeadsMut, MRope, MRopeIndex, MRopeOptions, MRopeStyle, Rope,
    RopeConfig, View, VisionOptions, VisionRope, TOKEN_IMAGE, TOKEN_TEXT,
};

fn data(n: usize, seed: u32) -> Vec<f32> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            (s >> 8) as f32 / (1u32 << 23) as f32 - 1.0
        })
        .collect()
}

/// The three MRoPE streams of a shape.
fn streams(tokens: usize) -> [Vec<u32>; 3] {
    if tokens == 1 {
        return [vec![1000], vec![1000], vec![1000]];
    }
    let mut types = vec![TOKEN_TEXT; 100];
    types.extend(std::iter::repeat_n(TOKEN_IMAGE, 192));
    types.extend(std::iter::repeat_n(TOKEN_TEXT, tokens - 292));
    let grids = [[1, 32, 24]];
    let idx = MRopeIndex {
        token_types: &types,
        image_grid_thw: &grids,
        spatial_merge_size: 2,
        ..Default::default()
    };
    idx.to_vecs().unwrap().0
}

fn text(c: &mut Criterion) {
    let (hd, qh, kh) = (128, 28, 4);
    for (name, tokens) in [("qwen25vl_decode", 1usize), ("qwen25vl_prefill512", 512)] {
        let mut g = c.benchmark_group(name);
        g.throughput(Throughput::Elements((tokens * (qh + kh) * hd) as u64));
        let config = RopeConfig::new(hd, 1e6);
        let plain = Rope::new(config.clone()).unwrap();
        let ids = streams(tokens);
        let (qv, kv) = (View::token_major(tokens, qh, hd), View::token_major(tokens, kh, hd));
        let (mut q, mut k) = (data(tokens * qh * hd, 1), data(tokens * kh * hd, 2));
        let start = ids[0][0];
        let cache = plain.build_cache(start as usize + tokens).unwrap();
        g.bench_function("plain/cached", |b| {
            let opts = ApplyOptions::start(start).with_table(cache.table());
            b.iter(|| {
                plain
                    .apply_qk(HeadsMut::new(&mut q, qv), Some(HeadsMut::new(&mut k, kv)), black_box(&opts))
                    .unwrap()
            })
        });
        g.bench_function("plain/on_the_fly", |b| {
            let opts = ApplyOptions::start(start);
            b.iter(|| {
                plain
                    .apply_qk(HeadsMut::new(&mut q, qv), Some(HeadsMut::new(&mut k, kv)), black_box(&opts))
                    .unwrap()
            })
        });
        for (label, section, style) in [
            ("mrope_sectioned", [16, 24, 24], MRopeStyle::Sectioned),
            ("mrope_interleaved", [24, 20, 20], MRopeStyle::Interleaved),
        ] {
            let m = MRope::new(config.clone(), section, style).unwrap();
            let s = [&ids[0][..], &ids[1][..], &ids[2][..]];
            let cache = m.build_table(s).unwrap();
            let table = cache.table();
            g.bench_function(format!("{label}/cached"), |b| {
                let opts = MRopeOptions::table(table);
                b.iter(|| {
                    m.apply_qk(HeadsMut::new(&mut q, qv), Some(HeadsMut::new(&mut k, kv)), black_box(&opts))
                        .unwrap()
                })
            });
            g.bench_function(format!("{label}/on_the_fly"), |b| {
                let opts = MRopeOptions::ids(s);
                b.iter(|| {
                    m.apply_qk(HeadsMut::new(&mut q, qv), Some(HeadsMut::new(&mut k, kv)), black_box(&opts))
                        .unwrap()
                })
            });
        }
        g.finish();
    }
}

fn vision(c: &mut Criterion) {
    let (hd, heads, tokens) = (80, 16, 1024);
    let mut g = c.benchmark_group("qwen2vl_vit1024");
    g.throughput(Throughput::Elements((2 * tokens * heads * hd) as u64));
    let config = RopeConfig::new(hd, 1e4);
    let plain = Rope::new(config.clone()).unwrap();
    let v = VisionRope::new(config).unwrap();
    let view = View::token_major(tokens, heads, hd);
    let (mut q, mut k) = (data(tokens * heads * hd, 3), data(tokens * heads * hd, 4));
    let (mut h, mut w) = (vec![0u32; tokens], vec![0u32; tokens]);
    vision_position_ids([1, 32, 32], 2, &mut h, &mut w).unwrap();
    let cache = plain.build_cache(tokens).unwrap();
    g.bench_function("plain/cached", |b| {
        let opts = ApplyOptions::start(0).with_table(cache.table());
        b.iter(|| {
            plain
                .apply_qk(HeadsMut::new(&mut q, view), Some(HeadsMut::new(&mut k, view)), black_box(&opts))
                .unwrap()
        })
    });
    g.bench_function("plain/on_the_fly", |b| {
        let opts = ApplyOptions::start(0);
        b.iter(|| {
            plain
                .apply_qk(HeadsMut::new(&mut q, view), Some(HeadsMut::new(&mut k, view)), black_box(&opts))
                .unwrap()
        })
    });
    let vcache = v.build_table([&h, &w]).unwrap();
    let table = vcache.table();
    g.bench_function("vision/cached", |b| {
        let opts = VisionOptions::table(table);
        b.iter(|| {
            v.apply_qk(HeadsMut::new(&mut q, view), Some(HeadsMut::new(&mut k, view)), black_box(&opts))
                .unwrap()
        })
    });
    g.bench_function("vision/on_the_fly", |b| {
        let opts = VisionOptions::ids([&h, &w]);
        b.iter(|| {
            v.apply_qk(HeadsMut::new(&mut q, view), Some(HeadsMut::new(&mut k, view)), black_box(&opts))
                .unwrap()
        })
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(2));
    targets = text, vision
}
criterion_main!(benches);
