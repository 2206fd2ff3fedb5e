//! Fused QK-norm + RoPE: every rotary_dim with random views, and whole rotated heads of 4,
//! 8 and 16 vectors (the kernels' register paths `half_split_whole`, `norm_whole`,
//! `rope_norm_whole`), every tier and dtype.

use super::*;

/// One fused QK-norm + RoPE case per rotary_dim (every even value up to 144, then 256 and 512,
/// head_dim = rotary_dim plus 0..20 pass-through dims), both layouts, the three forms, in
/// place and out of place over random (gapped) views with canaries, on the fly or from a
/// cache, GQA k or none: the tier's output must equal the scalar oracle's by bits, and
/// `norm_qk` likewise.
fn qknorm_suite<T: TestElem>(seed: u64) {
    // Under Miri: 3 pairs (a tail of every lane count) and 17 (bodies of 4, 8 and 16 lanes
    // plus a tail), each layout, f32 and bf16 (f16 in the whole-head test), one norm per
    // case in turn (`qknorm_case`).
    let all_pairs: Vec<usize> = if cfg!(miri) { vec![3, 17] } else { (1..=72).chain([128, 256]).collect() };
    for tier in tiers() {
        let mut rng = rng(seed ^ tier as u64);
        let mut n = 0;
        for pairs in all_pairs.iter().copied() {
            let rotary_dim = 2 * pairs;
            let head_dim = rotary_dim + if rng.random_bool(0.4) { 0 } else { rng.random_range(1..20) };
            for layout in [PairLayout::HalfSplit, PairLayout::Interleaved] {
                qknorm_case::<T>(&mut rng, tier, n, head_dim, rotary_dim, layout);
                n += 1;
            }
        }
        println!("{tier}: {n} fused qk-norm {} cases (x3 forms) bit-identical to scalar", T::NAME);
    }
}

/// `case` numbers the calls of one suite: under Miri it picks the one norm form tested.
fn qknorm_case<T: TestElem>(
    rng: &mut TestRng,
    tier: Tier,
    case: usize,
    head_dim: usize,
    rotary_dim: usize,
    layout: PairLayout,
) {
    use rope_kernels::QkNorm;
    let config = RopeConfig::new(head_dim, 10_000.0).with_rotary_dim(rotary_dim).with_layout(layout);
    let oracle = pinned(config.clone(), Tier::Scalar);
    let rope = pinned(config, tier);
    let tokens = rng.random_range(1..=MAX_TOKENS);
    // Sometimes (not under Miri) 16-40 heads: whole groups of heads and their tails.
    let q_heads = if !cfg!(miri) && rng.random_bool(0.25) {
        rng.random_range(16..=40)
    } else {
        rng.random_range(1..=MAX_HEADS)
    };
    let k_heads = if rng.random_bool(0.2) { None } else { Some(rng.random_range(1..=q_heads)) };
    let rows = MAX_TOKENS + 8;
    let ids: Vec<u32> = (0..tokens).map(|_| rng.random_range(0..rows as u32)).collect();
    let cache = oracle.build_cache(rows).unwrap();
    let mut opts = if rng.random_bool(0.5) {
        ApplyOptions::ids(&ids)
    } else {
        ApplyOptions::start(rng.random_range(0..8))
    };
    if rng.random_bool(0.5) {
        opts = opts.with_table(cache.table());
    }
    if rng.random_bool(0.3) {
        opts = opts.inverse();
    }
    // Weights: mostly ordinary values, sometimes exact ones and specials; in some calls NaNs
    // too (with payloads that a bf16 rounding without canonicalisation would carry into the
    // sign: the fused kernel's NaN-free fast path must not be taken then).
    let mut weight = || -> Vec<f32> {
        const W: [f32; 9] = [
            0.0,
            -1.0,
            1.0,
            0.5,
            f32::INFINITY,
            1e-30,
            f32::NAN,
            f32::from_bits(0x7FFF_FFFF),
            f32::from_bits(0xFFBF_FFFF),
        ];
        let specials = if rng.random_bool(0.3) { W.len() } else { 6 };
        (0..head_dim)
            .map(|_| match rng.random_range(0..10) {
                0 => W[rng.random_range(0..specials)],
                _ => rng.random_range(-2.0f32..2.0),
            })
            .collect()
    };
    let (qw, kw) = (weight(), weight());
    let eps = [1e-6f32, 1e-5, 0.0][rng.random_range(0..3)];
    let norms = [QkNorm::qwen3(&qw, &kw, eps), QkNorm::gemma3(&qw, &kw, eps), QkNorm::llama4(eps)];
    // Under Miri one of the three per case, in turn (`case % 3`: a suite's first three
    // calls of a dtype test all three; all three in every case were half of the tier
    // suite's time there).
    let (first, count) = if cfg!(miri) { (case % norms.len(), 1) } else { (0, norms.len()) };

    let (qv, qlen) = random_view(rng, tokens, q_heads, head_dim);
    let kview = k_heads.map(|kh| random_view(rng, tokens, kh, head_dim));
    let q0 = padded::<T>(rng, qlen);
    let k0 = kview.map(|(_, klen)| padded::<T>(rng, klen));
    let (qov, qolen) = random_view(rng, tokens, q_heads, head_dim);
    let kout = k_heads.map(|kh| random_view(rng, tokens, kh, head_dim));
    let qo0 = padded::<T>(rng, qolen);
    let ko0 = kout.map(|(_, l)| padded::<T>(rng, l));
    for norm in norms.iter().skip(first).take(count) {
        let what = format!(
            "{tier} {} {layout:?} head_dim {head_dim} rotary_dim {rotary_dim} tokens {tokens} heads {q_heads}/{k_heads:?} {norm:?} {opts:?}",
            T::NAME
        );
        // In place: the fused op, then the norm alone.
        for norm_only in [false, true] {
            let run = |r: &Rope| {
                let mut q = q0.clone();
                let mut k = k0.clone();
                let kh =
                    k.as_mut().zip(kview).map(|(k, (kv, klen))| HeadsMut::new(&mut k[PAD..PAD + klen], kv));
                let qh = HeadsMut::new(&mut q[PAD..PAD + qlen], qv);
                if norm_only {
                    r.norm_qk(qh, kh, norm).unwrap();
                } else {
                    r.apply_qk_norm(qh, kh, norm, &opts).unwrap();
                }
                (q, k)
            };
            let (eq, ek) = run(&oracle);
            let (gq, gk) = run(&rope);
            check_untouched(&q0, &gq, &qv, head_dim, &what);
            assert_eq!(bits(&eq), bits(&gq), "q in place (norm only {norm_only}): {what}");
            if let (Some(k0), Some(ek), Some(gk), Some((kv, _))) = (&k0, ek, gk, kview) {
                check_untouched(k0, &gk, &kv, head_dim, &what);
                assert_eq!(bits(&ek), bits(&gk), "k in place (norm only {norm_only}): {what}");
            }
        }
        // Out of place.
        let run = |r: &Rope| {
            let mut qo = qo0.clone();
            let mut ko = ko0.clone();
            let k = match (&k0, kview, ko.as_mut(), kout) {
                (Some(k0), Some((kv, kl)), Some(ko), Some((kov, kol))) => {
                    Some((Heads::new(&k0[PAD..PAD + kl], kv), HeadsMut::new(&mut ko[PAD..PAD + kol], kov)))
                }
                _ => None,
            };
            r.apply_qk_norm_into(
                Heads::new(&q0[PAD..PAD + qlen], qv),
                HeadsMut::new(&mut qo[PAD..PAD + qolen], qov),
                k,
                norm,
                &opts,
            )
            .unwrap();
            (qo, ko)
        };
        let (eq, ek) = run(&oracle);
        let (gq, gk) = run(&rope);
        check_untouched(&qo0, &gq, &qov, head_dim, &what);
        assert_eq!(bits(&eq), bits(&gq), "q out of place: {what}");
        if let (Some(ko0), Some(ek), Some(gk), Some((kov, _))) = (&ko0, ek, gk, kout) {
            check_untouched(ko0, &gk, &kov, head_dim, &what);
            assert_eq!(bits(&ek), bits(&gk), "k out of place: {what}");
        }
    }
}

#[test]
fn qknorm_matches_oracle_f32() {
    qknorm_suite::<f32>(0x0A4B_0001);
}

#[test]
#[cfg_attr(miri, ignore = "f32 and bf16 cover its tails under Miri; f16 runs in the whole-head test")]
fn qknorm_matches_oracle_f16() {
    qknorm_suite::<f16>(0x0A4B_0002);
}

#[test]
fn qknorm_matches_oracle_bf16() {
    qknorm_suite::<bf16>(0x0A4B_0003);
}

#[test]
fn qknorm_whole_heads_match_oracle() {
    let dims: &[usize] = if cfg!(miri) { &[16, 32, 64] } else { &[8, 16, 32, 64, 128, 256, 512] };
    let reps = if cfg!(miri) { 1 } else { 6 };
    for tier in tiers() {
        let mut rng = rng(0x0A4B_0015 ^ tier as u64);
        let mut n = 0;
        for (d, &head_dim) in dims.iter().enumerate() {
            for r in 0..reps {
                // One norm form per dtype and head_dim under Miri: each dtype gets the three
                // forms over the three head_dims.
                let case = d * reps + r;
                qknorm_case::<f32>(&mut rng, tier, case, head_dim, head_dim, PairLayout::HalfSplit);
                qknorm_case::<f16>(&mut rng, tier, case + 1, head_dim, head_dim, PairLayout::HalfSplit);
                qknorm_case::<bf16>(&mut rng, tier, case + 2, head_dim, head_dim, PairLayout::HalfSplit);
                n += 3;
            }
        }
        println!("{tier}: {n} fused qk-norm whole-head cases (x3 forms) bit-identical to scalar");
    }
}
