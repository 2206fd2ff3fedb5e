//! A load-tolerant cross-check of `benches/mrope.rs` (issue 15: MRoPE and 2-D vision RoPE
//! within 1.2x of plain RoPE of the same shape): the variants of each shape run in
//! alternation, 30 rounds, and each keeps its fastest round, so drift and other processes on
//! a shared machine hit every variant alike. Prints the ratios; asserts nothing (timing).
//!
//! Run: `cargo test --release --test mrope_speed -- --ignored --nocapture`.

use std::hint::black_box;
use std::time::Instant;

use rope_kernels::{
    vision_position_ids, Apply, HeadsMut, MRope, MRopeApply, MRopeIndex, MRopeStyle, Rope, RopeConfig, View,
    VisionApply, VisionRope, TOKEN_IMAGE, TOKEN_TEXT,
};

fn data(n: usize) -> Vec<f32> {
    (0..n).map(|i| ((i * 7919 % 1000) as f32) / 500.0 - 1.0).collect()
}

/// The fastest of 30 rounds of `reps` calls of each variant, in ns per call.
fn race(reps: usize, n: usize, call: &mut dyn FnMut(usize)) -> Vec<f64> {
    let mut best = vec![f64::MAX; n];
    for _ in 0..30 {
        for (v, b) in best.iter_mut().enumerate() {
            let t0 = Instant::now();
            for _ in 0..reps {
                call(v);
            }
            *b = b.min(t0.elapsed().as_secs_f64() * 1e9 / reps as f64);
        }
    }
    best
}

fn report(shape: &str, names: &[&str], t: &[f64], base_of: impl Fn(usize) -> usize) {
    for (i, n) in names.iter().enumerate() {
        println!("{shape:22} {n:28} {:12.1} ns  {:.3}x plain", t[i], t[i] / t[base_of(i)]);
    }
}

#[test]
#[ignore = "timing; run with --release --ignored --nocapture"]
fn mrope_and_vision_against_plain() {
    let (hd, qh, kh) = (128, 28, 4);
    for (shape, tokens, reps) in [("qwen25vl_decode", 1usize, 20_000), ("qwen25vl_prefill512", 512, 40)] {
        let config = RopeConfig::new(hd, 1e6);
        let plain = Rope::new(config.clone()).unwrap();
        let sec = MRope::new(config.clone(), [16, 24, 24], MRopeStyle::Sectioned).unwrap();
        let int = MRope::new(config, [24, 20, 20], MRopeStyle::Interleaved).unwrap();
        // Decode: a text token (t = h = w); prefill: 100 text tokens, a 32x24-patch image
        // (192 tokens), 220 text tokens, as benches/mrope.rs.
        let streams = if tokens == 1 {
            [vec![1000], vec![1000], vec![1000]]
        } else {
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
        };
        let s = [&streams[0][..], &streams[1][..], &streams[2][..]];
        let start = streams[0][0];
        let (qv, kv) = (View::bshd(tokens, qh, hd), View::bshd(tokens, kh, hd));
        let (mut q, mut k) = (data(tokens * qh * hd), data(tokens * kh * hd));
        let cache = plain.build_cache(start as usize + tokens).unwrap();
        let (ts, ti) = (sec.build_table(s).unwrap(), int.build_table(s).unwrap());
        let mut go = |v: usize| {
            let (qq, kk) = (HeadsMut::new(&mut q, qv), Some(HeadsMut::new(&mut k, kv)));
            match v {
                0 => plain.apply_qk(qq, kk, black_box(&Apply::start(start).with_table(cache.table()))),
                1 => sec.apply_qk(qq, kk, black_box(&MRopeApply::table(ts.table()))),
                2 => int.apply_qk(qq, kk, black_box(&MRopeApply::table(ti.table()))),
                3 => plain.apply_qk(qq, kk, black_box(&Apply::start(start))),
                4 => sec.apply_qk(qq, kk, black_box(&MRopeApply::ids(s))),
                _ => int.apply_qk(qq, kk, black_box(&MRopeApply::ids(s))),
            }
            .unwrap()
        };
        let t = race(reps, 6, &mut go);
        let names = [
            "plain/cached",
            "mrope_sectioned/cached",
            "mrope_interleaved/cached",
            "plain/on_the_fly",
            "mrope_sectioned/on_the_fly",
            "mrope_interleaved/on_the_fly",
        ];
        report(shape, &names, &t, |i| if i < 3 { 0 } else { 3 });
    }

    let (hd, heads, tokens) = (80, 16, 1024);
    let config = RopeConfig::new(hd, 1e4);
    let plain = Rope::new(config.clone()).unwrap();
    let vit = VisionRope::new(config).unwrap();
    let view = View::bshd(tokens, heads, hd);
    let (mut q, mut k) = (data(tokens * heads * hd), data(tokens * heads * hd));
    let (mut h, mut w) = (vec![0u32; tokens], vec![0u32; tokens]);
    vision_position_ids([1, 32, 32], 2, &mut h, &mut w).unwrap();
    let cache = plain.build_cache(tokens).unwrap();
    let vt = vit.build_table([&h, &w]).unwrap();
    let mut go = |v: usize| {
        let (qq, kk) = (HeadsMut::new(&mut q, view), Some(HeadsMut::new(&mut k, view)));
        match v {
            0 => plain.apply_qk(qq, kk, black_box(&Apply::start(0).with_table(cache.table()))),
            1 => vit.apply_qk(qq, kk, black_box(&VisionApply::table(vt.table()))),
            2 => plain.apply_qk(qq, kk, black_box(&Apply::start(0))),
            _ => vit.apply_qk(qq, kk, black_box(&VisionApply::ids([&h, &w]))),
        }
        .unwrap()
    };
    let t = race(5, 4, &mut go);
    let names = ["plain/cached", "vision/cached", "plain/on_the_fly", "vision/on_the_fly"];
    report("qwen2vl_vit1024", &names, &t, |i| if i < 2 { 0 } else { 2 });
}
