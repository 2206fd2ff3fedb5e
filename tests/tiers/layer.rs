//! A whole attention-layer call (`Rope::apply_layer`) on every tier.

use super::*;

/// One layer call of random sets, values, positions and destinations, with `Rope::with_tier`:
/// the fused buffer and every destination (canaried) by bits.
fn layer_call<I: TestElem + rope_kernels::CacheElement>(
    tier: Tier,
    seed: u64,
) -> (Vec<u32>, Vec<u32>, Vec<u32>, Vec<rope_kernels::BlockQ8_0>) {
    use rope_kernels::{BlockQ8_0, CacheLayout, Dest, HeadSet, LayerOptions, Qkv, Slots};
    let mut rng = rng(seed);
    let hd = 64;
    let layout = if rng.random_range(0..2) == 0 { PairLayout::HalfSplit } else { PairLayout::Interleaved };
    let rotary_dim = [64, 32, 16][rng.random_range(0..3)];
    let rope = Rope::new(RopeConfig::new(hd, 10_000.0).with_rotary_dim(rotary_dim).with_layout(layout))
        .unwrap()
        .with_tier(tier)
        .unwrap();
    let (tokens, qh, kvh) = (rng.random_range(1..9), rng.random_range(1..6), rng.random_range(1..4));
    let sets =
        if rng.random_range(0..3) == 0 { HeadSet::neox_qkv(qh, hd) } else { HeadSet::qkv_rows(qh, kvh, hd) };
    let mut qkv: Vec<I> = (0..tokens * sets[0].token_stride).map(|_| element(&mut rng)).collect();
    let mut q_out = vec![I::from_bits(I::CANARY); tokens * sets[0].heads * hd];
    let kvh = sets[1].heads;
    let kl = if rng.random_range(0..2) == 0 {
        CacheLayout::nhd(6, 4, kvh, hd)
    } else {
        CacheLayout::hnd(6, 4, kvh, hd)
    };
    let mut k_cache = vec![bf16::from_bits(0xBEEF); 6 * 4 * kvh * hd];
    let vl = CacheLayout::contiguous(24, kvh, hd / 32);
    let mut v_cache = vec![BlockQ8_0 { d: f16::from_bits(0xBEEF), qs: [0x5A; 32] }; 24 * kvh * hd / 32];
    // Two sequences; sequence i owns blocks 3i..3i+3 in a shuffled order.
    let cut = rng.random_range(0..=tokens as u32);
    let indptr = [0, cut, tokens as u32];
    let start = [rng.random_range(0..4), rng.random_range(0..4)];
    let block_table = [4u32, 0, 2, 1, 5, 3];
    let mapping: Vec<i64> = (0..tokens as i64).map(|t| if t % 3 == 2 { -1 } else { 23 - t }).collect();
    let slots = Slots::BlockTable { block_table: &block_table, blocks_per_seq: 3 };
    let opts = LayerOptions::batch(rope_kernels::Batch::Ragged { indptr: &indptr, start: &start });
    let opts = if rng.random_range(0..2) == 0 { opts.inverse() } else { opts };
    let q = if rng.random_range(0..2) == 0 {
        Dest::Tensor { data: &mut q_out, view: View::token_major(tokens, sets[0].heads, hd) }
    } else {
        Dest::InPlace
    };
    rope.apply_layer(
        Qkv::new(&mut qkv, tokens, sets),
        q,
        Dest::Cache { data: &mut k_cache, layout: kl, slots },
        Dest::Cache { data: &mut v_cache, layout: vl, slots: Slots::Mapping(&mapping) },
        &opts,
    )
    .unwrap();
    let bits = |v: &[I]| v.iter().map(|x| x.to_bits_u32()).collect::<Vec<u32>>();
    (bits(&qkv), bits(&q_out), k_cache.iter().map(|x| u32::from(x.to_bits())).collect(), v_cache)
}

fn layer_suite<I: TestElem + rope_kernels::CacheElement>(seed: u64) {
    // Under Miri one case per dtype and tier (a layer call takes about 9 s there), and not the
    // scalar tier against itself (natively that checks that a case is deterministic).
    let cases = if cfg!(miri) { 1 } else { 60 };
    for tier in tiers() {
        if cfg!(miri) && tier == Tier::Scalar {
            println!("skipping scalar: layer calls against itself are not run under Miri");
            continue;
        }
        for c in 0..cases {
            let s = seed + c;
            assert!(
                layer_call::<I>(tier, s) == layer_call::<I>(Tier::Scalar, s),
                "{tier} {} case {c}",
                I::NAME
            );
        }
        println!("{tier}: {cases} layer calls from {} bit-identical to scalar", I::NAME);
    }
}

// Each run generates its case from the seed, so the generation must be deterministic: under
// Miri two scalar runs of one case once differed, because the values came from `f32::powi`,
// which Miri evaluates with a random error (now `pow2`, exact).
#[test]
fn layer_calls_match_oracle() {
    layer_suite::<f32>(17_100);
    layer_suite::<f16>(17_200);
    layer_suite::<bf16>(17_300);
}
