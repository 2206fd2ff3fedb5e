//! One attention layer's RoPE and KV-cache append (`Rope::apply_layer`, issue 17) against
//! what a runtime does with this crate without it: `apply` in place on the head sets of the
//! fused buffer, then conversion passes of k and v into the cache.
//!
//! Shapes: Llama-3.1-8B (32 q heads, 8 kv heads, head_dim 128, theta 500000 with its llama3
//! scaling), cos/sin from a cache (`build_cache`), f32 fused QKV rows `[tokens][48][128]`, a
//! paged vLLM NHD cache (block_size 16). Each row is one criterion group (same run) per tier
//! (AVX-512, AVX2; each object pinned with `with_tier`, a tier this CPU lacks is skipped):
//!
//! | row | today | fused | bytes per element of k (and v, q) today ÷ fused |
//! |---|---|---|---|
//! | `k_bf16`: prefill 512, k into a bf16 cache | rope k in place (4+4), convert (4+2) | 4+2 | 14 / 6 ≈ 2.33 |
//! | `kv_bf16`: k and v appended | + convert v (4+2) | k 6 + v 6 | 20 / 12 ≈ 1.67 |
//! | `layer_bf16`: q in place, k, v appended | q 8 × 32 heads, k 14 × 8, v 6 × 8 | q 8 × 32, k 6 × 8, v 6 × 8 | 416 / 352 ≈ 1.18 |
//! | `k_q8_0`: k into a q8_0 cache | rope k (8), quantize (4 + 34/32) | 4 + 34/32 | 13.06 / 5.06 ≈ 2.58 |
//! | `decode8`: 8 sequences at positions 100..8000, q in place, k, v into the paged cache | 8 `apply` calls + scatter of k and v | one call | (see output) |
//!
//! "Today" converts with the fastest honest pass available, each measured in the same group:
//! `half`'s `HalfFloatSliceExt::convert_from_f32_slice` per token row (`today_half`), or this
//! crate's own convert kernel with no rotation in one strided pass
//! (`rope_kernels::__bench::convert_rows`, `today_kernel`; the q8_0 row only has this one).
//! `k_bf16` also times the two passes of `today_kernel` alone (`rope_only`, `convert_only`).
//! `decode8` also has `no_cache`: the 8 plain decode calls alone, writing no cache (the fused
//! call should be within 1.15× of it), and `convert_only`: the k and v of the 8 tokens
//! converted to bf16 without rotation into consecutive rows (two strided calls): what a
//! separate conversion pass costs (loads, bf16 rounding, stores, call overhead), a reference
//! for the fused row's extra over `no_cache`, not a bound on it.
//!
//! Run: `cargo bench --features bench-internals --bench layer -- --warm-up-time 1 --measurement-time 2`; set
//! `LAYER_FUSED_FIRST=1` to put the fused row first in each group (alternate runs to see drift).

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use half::slice::HalfFloatSliceExt;
use rope_kernels::__bench::{convert_rows, ConvertRows};
use rope_kernels::{
    bf16, ApplyOptions, Batch, BlockQ8_0, CacheElement, CacheLayout, Dest, HeadSet, HeadsMut, LayerOptions,
    Qkv, Rope, RopeCache, RopeConfig, Scaling, Slots, Tier, View,
};

const HD: usize = 128;
const QH: usize = 32;
const KVH: usize = 8;
const WIDTH: usize = (QH + 2 * KVH) * HD;
const TOKENS: usize = 512;
const BLOCK: usize = 16;

/// Values in [-1, 1) from a fixed LCG.
fn data(n: usize, seed: u32) -> Vec<f32> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            (s >> 8) as f32 / (1u32 << 23) as f32 - 1.0
        })
        .collect()
}

fn llama31() -> RopeConfig {
    RopeConfig::new(HD, 500_000.0).with_scaling(Scaling::Llama3 {
        factor: 8.0,
        low_freq_factor: 1.0,
        high_freq_factor: 4.0,
        original_max_position_embeddings: 8192,
    })
}

/// The k (or v) heads of `tokens` tokens of the fused buffer, from head set `set`, converted
/// into cache rows without rotation: the runtime's conversion pass.
struct Pass<'a> {
    tier: Tier,
    set: HeadSet,
    tokens: usize,
    slots: &'a [usize],
    layout: CacheLayout,
}

impl Pass<'_> {
    /// `half`'s slice conversion, one token row (8 heads × 128 contiguous) at a time.
    fn half(&self, qkv: &[f32], cache: &mut [bf16]) {
        let n = self.set.heads * HD;
        for t in 0..self.tokens {
            let src = self.set.offset + t * self.set.token_stride;
            let dst = self.layout.row(self.slots[t], 0);
            cache[dst..dst + n].convert_from_f32_slice(&qkv[src..src + n]);
        }
    }

    /// The crate's convert kernel without rotation: one strided pass when the slots are
    /// consecutive (prefill), else one call per token (decode scatter).
    fn kernel<O: CacheElement>(&self, qkv: &[f32], cache: &mut [O]) {
        let consecutive = self.slots.windows(2).all(|w| w[1] == w[0] + 1);
        // Runs `(first token, tokens)`: one of all tokens, or one per token (no allocation
        // in the timed loop).
        let (runs, n) = if consecutive { (1, self.tokens) } else { (self.tokens, 1) };
        for t0 in (0..runs).map(|r| r * n) {
            let r = ConvertRows {
                tokens: n,
                heads: self.set.heads,
                head_dim: HD,
                src_token_stride: self.set.token_stride,
                src_head_stride: HD,
                dst_token_stride: self.layout.slot_stride,
                dst_head_stride: self.layout.head_stride,
            };
            let src = &qkv[self.set.offset + t0 * self.set.token_stride..];
            let dst = &mut cache[self.layout.row(self.slots[t0], 0)..];
            convert_rows(self.tier, src, dst, r, &[], &[], rope_kernels::PairLayout::HalfSplit, false)
                .unwrap();
        }
    }
}

/// The rows of a group.
#[derive(Clone, Copy)]
enum Row {
    /// Diagnostics: the two passes of `today_kernel` alone.
    RopeOnly,
    ConvertOnly,
    NoCache,
    TodayHalf,
    TodayKernel,
    Fused,
}

impl Row {
    fn name(self) -> &'static str {
        match self {
            Row::RopeOnly => "rope_only",
            Row::ConvertOnly => "convert_only",
            Row::NoCache => "no_cache",
            Row::TodayHalf => "today_half",
            Row::TodayKernel => "today_kernel",
            Row::Fused => "fused",
        }
    }
}

/// One group: `today` variants and `fused`, in the order `LAYER_FUSED_FIRST` picks.
fn group(
    c: &mut Criterion,
    name: &str,
    bound: &str,
    elements: usize,
    labels: &[Row],
    mut run: impl FnMut(Row),
) {
    eprintln!("layer/{name}: bytes bound (today / fused) {bound}");
    let mut g = c.benchmark_group(format!("layer/{name}"));
    g.throughput(Throughput::Elements(elements as u64));
    let mut labels = labels.to_vec();
    if std::env::var("LAYER_FUSED_FIRST").is_ok() {
        labels.reverse();
    }
    for label in labels {
        g.bench_function(label.name(), |b| b.iter(|| run(label)));
    }
    g.finish();
}

/// Cache rows by vLLM `slot_mapping`.
fn rows<'a, O>(data: &'a mut [O], layout: CacheLayout, mapping: &'a [i64]) -> Dest<'a, O> {
    Dest::Cache { data, layout, slots: Slots::Mapping(mapping) }
}

fn prefill(c: &mut Criterion, tier: Tier) {
    let Ok(rope) = Rope::new(llama31()).unwrap().with_tier(tier) else {
        eprintln!("skipping {tier}: not on this CPU");
        return;
    };
    let cache: RopeCache = rope.build_cache(TOKENS).unwrap();
    let apply = ApplyOptions::start(0).with_table(cache.table());
    let opts = LayerOptions::batch(Batch::Single(apply.positions)).with_table(cache.table());
    let [qs, ks, vs] = HeadSet::qkv_rows(QH, KVH, HD);
    let layout = CacheLayout::nhd(TOKENS / BLOCK, BLOCK, KVH, HD);
    let layout_q8 = CacheLayout::nhd(TOKENS / BLOCK, BLOCK, KVH, HD / 32);
    let mapping: Vec<i64> = (0..TOKENS as i64).collect();
    let slots: Vec<usize> = (0..TOKENS).collect();
    let qkv0 = data(TOKENS * WIDTH, 1);
    let (mut a, mut b) = (qkv0.clone(), qkv0.clone());
    let mut kc = vec![bf16::ZERO; TOKENS * KVH * HD];
    let mut vc = kc.clone();
    let (mut kc2, mut vc2) = (kc.clone(), kc.clone());
    let mut kq = vec![BlockQ8_0::default(); TOKENS * KVH * HD / 32];
    let mut kq2 = kq.clone();
    let kpass = Pass { tier, set: ks, tokens: TOKENS, slots: &slots, layout };
    let vpass = Pass { tier, set: vs, ..kpass };
    let kpass_q8 = Pass { layout: layout_q8, ..kpass };
    // In place on k alone, and on q and k together (k heads directly after q heads: one view).
    let k_view = ks.view(TOKENS);
    let qk_view = View { heads: QH + KVH, ..qs.view(TOKENS) };
    let rope_k = |x: &mut [f32]| rope.apply(HeadsMut::new(&mut x[ks.offset..], k_view), &apply).unwrap();
    let rope_qk = |x: &mut [f32]| rope.apply(HeadsMut::new(x, qk_view), &apply).unwrap();
    let t = tier;

    let n = TOKENS * KVH * HD;
    group(
        c,
        &format!("k_bf16/{t}"),
        "14 / 6 = 2.33",
        n,
        &[Row::RopeOnly, Row::ConvertOnly, Row::TodayHalf, Row::TodayKernel, Row::Fused],
        |label| match label {
            Row::RopeOnly => {
                rope_k(&mut a);
                black_box(&a);
            }
            Row::ConvertOnly => {
                kpass.kernel(&a, &mut kc);
                black_box(&kc);
            }
            Row::TodayHalf => {
                rope_k(&mut a);
                kpass.half(&a, &mut kc);
                black_box(&kc);
            }
            Row::TodayKernel => {
                rope_k(&mut a);
                kpass.kernel(&a, &mut kc);
                black_box(&kc);
            }
            _ => {
                let qkv = Qkv::new(&mut b, TOKENS, [qs, ks, vs]);
                rope.apply_layer(
                    qkv,
                    Dest::<f32>::Skip,
                    rows(&mut kc2[..], layout, &mapping),
                    Dest::<f32>::Skip,
                    &opts,
                )
                .unwrap();
                black_box(&kc2);
            }
        },
    );
    group(
        c,
        &format!("kv_bf16/{t}"),
        "20 / 12 = 1.67",
        2 * n,
        &[Row::TodayHalf, Row::TodayKernel, Row::Fused],
        |label| match label {
            Row::TodayHalf => {
                rope_k(&mut a);
                kpass.half(&a, &mut kc);
                vpass.half(&a, &mut vc);
                black_box((&kc, &vc));
            }
            Row::TodayKernel => {
                rope_k(&mut a);
                kpass.kernel(&a, &mut kc);
                vpass.kernel(&a, &mut vc);
                black_box((&kc, &vc));
            }
            _ => {
                let qkv = Qkv::new(&mut b, TOKENS, [qs, ks, vs]);
                let (k, v) = (rows(&mut kc2[..], layout, &mapping), rows(&mut vc2[..], layout, &mapping));
                rope.apply_layer(qkv, Dest::<f32>::Skip, k, v, &opts).unwrap();
                black_box((&kc2, &vc2));
            }
        },
    );
    group(
        c,
        &format!("layer_bf16/{t}"),
        "416 / 352 = 1.18",
        TOKENS * WIDTH,
        &[Row::TodayHalf, Row::TodayKernel, Row::Fused],
        |label| match label {
            Row::TodayHalf => {
                rope_qk(&mut a);
                kpass.half(&a, &mut kc);
                vpass.half(&a, &mut vc);
                black_box((&a, &kc, &vc));
            }
            Row::TodayKernel => {
                rope_qk(&mut a);
                kpass.kernel(&a, &mut kc);
                vpass.kernel(&a, &mut vc);
                black_box((&a, &kc, &vc));
            }
            _ => {
                let qkv = Qkv::new(&mut b, TOKENS, [qs, ks, vs]);
                let (k, v) = (rows(&mut kc2[..], layout, &mapping), rows(&mut vc2[..], layout, &mapping));
                rope.apply_layer(qkv, Dest::<f32>::InPlace, k, v, &opts).unwrap();
                black_box((&b, &kc2, &vc2));
            }
        },
    );
    group(c, &format!("k_q8_0/{t}"), "13.06 / 5.06 = 2.58", n, &[Row::TodayKernel, Row::Fused], |label| {
        match label {
            Row::TodayKernel => {
                rope_k(&mut a);
                kpass_q8.kernel(&a, &mut kq);
                black_box(&kq);
            }
            _ => {
                let qkv = Qkv::new(&mut b, TOKENS, [qs, ks, vs]);
                let k =
                    Dest::Cache { data: &mut kq2[..], layout: layout_q8, slots: Slots::Mapping(&mapping) };
                rope.apply_layer(qkv, Dest::<f32>::Skip, k, Dest::<f32>::Skip, &opts).unwrap();
                black_box(&kq2);
            }
        }
    });
}

fn decode(c: &mut Criterion, tier: Tier) {
    let Ok(rope) = Rope::new(llama31()).unwrap().with_tier(tier) else {
        return;
    };
    const SEQS: usize = 8;
    const BLOCKS_PER_SEQ: usize = 8192 / BLOCK;
    let cache: RopeCache = rope.build_cache(8192).unwrap();
    let starts: [u32; SEQS] = [100, 1000, 2000, 3000, 4500, 5000, 6000, 8000];
    let indptr: Vec<u32> = (0..=SEQS as u32).collect();
    // Each sequence's current block is its own (block 2i + 1); the rest of its row points at
    // block 0 (never read by this step).
    let mut table = vec![0u32; SEQS * BLOCKS_PER_SEQ];
    for (i, &p) in starts.iter().enumerate() {
        table[i * BLOCKS_PER_SEQ + p as usize / BLOCK] = 2 * i as u32 + 1;
    }
    let num_blocks = 2 * SEQS + 1;
    let layout = CacheLayout::nhd(num_blocks, BLOCK, KVH, HD);
    let slots: Vec<usize> = starts
        .iter()
        .enumerate()
        .map(|(i, &p)| table[i * BLOCKS_PER_SEQ + p as usize / BLOCK] as usize * BLOCK + p as usize % BLOCK)
        .collect();
    let [qs, ks, vs] = HeadSet::qkv_rows(QH, KVH, HD);
    let qkv0 = data(SEQS * WIDTH, 2);
    let (mut a, mut b, mut c0) = (qkv0.clone(), qkv0.clone(), qkv0.clone());
    let mut kc = vec![bf16::ZERO; num_blocks * BLOCK * KVH * HD];
    let mut vc = kc.clone();
    let (mut kc2, mut vc2) = (kc.clone(), kc.clone());
    let kpass = Pass { tier, set: ks, tokens: SEQS, slots: &slots, layout };
    let vpass = Pass { tier, set: vs, ..kpass };
    // `convert_only`: a separate conversion pass of k and v of the 8 tokens (not rotated) into
    // 8 consecutive rows, one strided call each (a reference, see the module docs).
    let consecutive: Vec<usize> = (0..SEQS).collect();
    let kconv = Pass { slots: &consecutive, ..kpass };
    let vconv = Pass { set: vs, ..kconv };
    let qk_view = View { heads: QH + KVH, ..qs.view(1) };
    let calls = |x: &mut [f32]| {
        for (i, &p) in starts.iter().enumerate() {
            let opts = ApplyOptions::start(p).with_table(cache.table());
            rope.apply(HeadsMut::new(&mut x[i * WIDTH..], qk_view), &opts).unwrap();
        }
    };
    let block_table = Slots::BlockTable { block_table: &table, blocks_per_seq: BLOCKS_PER_SEQ };
    let opts =
        LayerOptions::batch(Batch::Ragged { indptr: &indptr, start: &starts }).with_table(cache.table());
    let t = tier;
    group(
        c,
        &format!("decode8/{t}"),
        "8 x (q 8 x 32 + k 14 x 8 + v 6 x 8) / 8 x (q 8 x 32 + k 6 x 8 + v 6 x 8) = 1.18; \
         no_cache moves 8 x (8 x 40) (fused within 1.15x of it is the target)",
        SEQS * WIDTH,
        &[Row::ConvertOnly, Row::NoCache, Row::TodayHalf, Row::TodayKernel, Row::Fused],
        |label| match label {
            Row::NoCache => {
                calls(&mut c0);
                black_box(&c0);
            }
            Row::ConvertOnly => {
                kconv.kernel(&c0, &mut kc);
                vconv.kernel(&c0, &mut vc);
                black_box((&kc, &vc));
            }
            Row::TodayHalf => {
                calls(&mut a);
                kpass.half(&a, &mut kc);
                vpass.half(&a, &mut vc);
                black_box((&a, &kc, &vc));
            }
            Row::TodayKernel => {
                calls(&mut a);
                kpass.kernel(&a, &mut kc);
                vpass.kernel(&a, &mut vc);
                black_box((&a, &kc, &vc));
            }
            _ => {
                let qkv = Qkv::new(&mut b, SEQS, [qs, ks, vs]);
                let k = Dest::Cache { data: &mut kc2[..], layout, slots: block_table };
                let v = Dest::Cache { data: &mut vc2[..], layout, slots: block_table };
                rope.apply_layer(qkv, Dest::<f32>::InPlace, k, v, &opts).unwrap();
                black_box((&b, &kc2, &vc2));
            }
        },
    );
}

fn benches(c: &mut Criterion) {
    for tier in [Tier::Avx512, Tier::Avx2] {
        prefill(c, tier);
        decode(c, tier);
    }
}

criterion_group!(layer, benches);
criterion_main!(layer);
