//! Rotation, in place, out of place and from one fused QKV buffer: random cases, every
//! f16/bf16 bit pattern, whole-vector heads, calls large enough to prefetch, and
//! hand-computed values.

use super::*;

/// One random case: shape, strides, options; run on the oracle and on `tier`, compare.
fn random_case<T: TestElem>(rng: &mut TestRng, tier: Tier) {
    // Body and tail on every lane count (4, 8, 16); Miri gets the smaller half.
    const PAIRS: &[usize] = &[1, 3, 4, 8, 9, 16, 17, 2, 5, 7, 15, 24, 31, 32, 33, 64];
    let pairs = PAIRS[rng.random_range(0..if cfg!(miri) { 7 } else { PAIRS.len() })];
    let rotary_dim = 2 * pairs;
    let head_dim = rotary_dim + if rng.random_bool(0.5) { 0 } else { rng.random_range(1..10) };
    let layout = if rng.random_bool(0.5) { PairLayout::HalfSplit } else { PairLayout::Interleaved };
    let config = RopeConfig::new(head_dim, 10_000.0).with_rotary_dim(rotary_dim).with_layout(layout);
    let oracle = pinned(config.clone(), Tier::Scalar);
    let rope = pinned(config, tier);
    assert_eq!(rope.tier(), tier);

    let tokens = rng.random_range(1..=MAX_TOKENS);
    let q_heads = rng.random_range(1..=MAX_HEADS);
    // GQA/MQA: k often has fewer heads; sometimes no k at all.
    let k_heads = if rng.random_bool(0.2) { None } else { Some(rng.random_range(1..=q_heads)) };

    // Positions: random ids or a start offset, all below `rows`.
    let rows = MAX_TOKENS + 8;
    let ids: Vec<u32> = (0..tokens).map(|_| rng.random_range(0..rows as u32)).collect();
    let mut opts = if rng.random_bool(0.5) {
        ApplyOptions::ids(&ids)
    } else {
        ApplyOptions::start(rng.random_range(0..8))
    };
    // cos/sin source: the cache, a caller table of specials, or on the fly.
    let source = rng.random_range(0..3);
    let cache = (source == 0).then(|| oracle.build_cache(rows).unwrap());
    let mut special = || -> Vec<f32> {
        let n = if source == 1 { rows * pairs } else { 0 };
        (0..n).map(|_| TABLE_SPECIALS[rng.random_range(0..TABLE_SPECIALS.len())]).collect()
    };
    let (special_cos, special_sin) = (special(), special());
    match source {
        0 => opts = opts.with_table(cache.as_ref().unwrap().table()),
        1 => opts = opts.with_table(CosSinTable::new(&special_cos, &special_sin, pairs).unwrap()),
        _ => {}
    }
    if rng.random_bool(0.5) {
        opts = opts.inverse();
    }
    let what = format!(
        "{tier} {} {layout:?} head_dim {head_dim} rotary_dim {rotary_dim} tokens {tokens} heads {q_heads}/{k_heads:?} {opts:?}",
        T::NAME
    );

    let fused = k_heads.is_some() && rng.random_bool(0.25);
    let in_place = !fused && rng.random_bool(0.5);
    if fused {
        // One fused QKV buffer [tokens][q_heads + 2 * k_heads][head_dim], read out of place.
        let kh = k_heads.unwrap();
        let ts = (q_heads + 2 * kh) * head_dim;
        let qv = View { tokens, heads: q_heads, token_stride: ts, head_stride: head_dim };
        let kv = View { heads: kh, ..qv };
        let src = padded::<T>(rng, tokens * ts);
        let (qov, qlen) = random_view(rng, tokens, q_heads, head_dim);
        let (kov, klen) = random_view(rng, tokens, kh, head_dim);
        let (q0, k0) = (padded::<T>(rng, qlen), padded::<T>(rng, klen));
        let run = |r: &Rope| {
            let (mut qo, mut ko) = (q0.clone(), k0.clone());
            let inner = &src[PAD..PAD + tokens * ts];
            let k_src = Heads::new(&inner[q_heads * head_dim..], kv);
            r.apply_qk_into(
                Heads::new(inner, qv),
                HeadsMut::new(&mut qo[PAD..PAD + qlen], qov),
                Some((k_src, HeadsMut::new(&mut ko[PAD..PAD + klen], kov))),
                &opts,
            )
            .unwrap();
            (qo, ko)
        };
        let (eq, ek) = run(&oracle);
        let (gq, gk) = run(&rope);
        check_untouched(&q0, &gq, &qov, head_dim, &what);
        check_untouched(&k0, &gk, &kov, head_dim, &what);
        assert_eq!(bits(&eq), bits(&gq), "q: {what}");
        assert_eq!(bits(&ek), bits(&gk), "k: {what}");
        return;
    }

    let (qv, qlen) = random_view(rng, tokens, q_heads, head_dim);
    let kview = k_heads.map(|kh| random_view(rng, tokens, kh, head_dim));
    let q0 = padded::<T>(rng, qlen);
    let k0 = kview.map(|(_, klen)| padded::<T>(rng, klen));
    if in_place {
        let run = |r: &Rope| {
            let mut q = q0.clone();
            let mut k = k0.clone();
            let kh = k.as_mut().zip(kview).map(|(k, (kv, klen))| HeadsMut::new(&mut k[PAD..PAD + klen], kv));
            r.apply_qk(HeadsMut::new(&mut q[PAD..PAD + qlen], qv), kh, &opts).unwrap();
            (q, k)
        };
        let (eq, ek) = run(&oracle);
        let (gq, gk) = run(&rope);
        check_untouched(&q0, &gq, &qv, head_dim, &what);
        assert_eq!(bits(&eq), bits(&gq), "q in place: {what}");
        if let (Some(k0), Some(ek), Some(gk), Some((kv, _))) = (&k0, ek, gk, kview) {
            check_untouched(k0, &gk, &kv, head_dim, &what);
            assert_eq!(bits(&ek), bits(&gk), "k in place: {what}");
        }
    } else {
        let (qov, qolen) = random_view(rng, tokens, q_heads, head_dim);
        let kout = k_heads.map(|kh| random_view(rng, tokens, kh, head_dim));
        let qo0 = padded::<T>(rng, qolen);
        let ko0 = kout.map(|(_, l)| padded::<T>(rng, l));
        let run = |r: &Rope| {
            let mut qo = qo0.clone();
            let mut ko = ko0.clone();
            let k = match (&k0, kview, ko.as_mut(), kout) {
                (Some(k0), Some((kv, kl)), Some(ko), Some((kov, kol))) => {
                    Some((Heads::new(&k0[PAD..PAD + kl], kv), HeadsMut::new(&mut ko[PAD..PAD + kol], kov)))
                }
                _ => None,
            };
            r.apply_qk_into(
                Heads::new(&q0[PAD..PAD + qlen], qv),
                HeadsMut::new(&mut qo[PAD..PAD + qolen], qov),
                k,
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

fn random_suite<T: TestElem>(seed: u64) {
    for tier in tiers() {
        let mut rng = rng(seed ^ tier as u64);
        for _ in 0..CASES {
            random_case::<T>(&mut rng, tier);
        }
        println!("{tier}: {CASES} random {} cases bit-identical to scalar", T::NAME);
    }
}

#[test]
fn random_cases_match_oracle_f32() {
    random_suite::<f32>(0x5EED_0001);
}

#[test]
fn random_cases_match_oracle_f16() {
    random_suite::<f16>(0x5EED_0002);
}

#[test]
fn random_cases_match_oracle_bf16() {
    random_suite::<bf16>(0x5EED_0003);
}

/// Every f16/bf16 bit pattern (a stride of them under Miri) as `x0` and `x1` of a head,
/// rotated by random and special cos/sin, both layouts, on every tier.
fn all_patterns<T: TestElem>() {
    let step = if cfg!(miri) { 257 } else { 1 };
    let patterns: Vec<T> = (0..=u16::MAX as u32).step_by(step).map(T::from_bits).collect();
    let head_dim = 2 * 9; // 9 pairs: a vector body plus a tail on every tier.
    let heads = patterns.len() / head_dim;
    let n = heads * head_dim;
    let mut rng = rng(0xA11_B175);
    let cos: Vec<f32> = (0..9).map(|_| TABLE_SPECIALS[rng.random_range(0..TABLE_SPECIALS.len())]).collect();
    let sin: Vec<f32> = (0..9).map(|_| rng.random_range(-1.5f32..1.5)).collect();
    let table = CosSinTable::new(&cos, &sin, 9).unwrap();
    for layout in [PairLayout::HalfSplit, PairLayout::Interleaved] {
        let config = RopeConfig::new(head_dim, 10_000.0).with_layout(layout);
        let oracle = pinned(config.clone(), Tier::Scalar);
        let mut expect = patterns[..n].to_vec();
        let opts = ApplyOptions::start(0).with_table(table);
        oracle.apply(HeadsMut::new(&mut expect, View::token_major(1, heads, head_dim)), &opts).unwrap();
        for tier in tiers() {
            let rope = pinned(config.clone(), tier);
            let mut got = patterns[..n].to_vec();
            rope.apply(HeadsMut::new(&mut got, View::token_major(1, heads, head_dim)), &opts).unwrap();
            assert_eq!(bits(&expect), bits(&got), "{tier} {} {layout:?}", T::NAME);
        }
    }
}

#[test]
fn all_f16_patterns_match_oracle() {
    all_patterns::<f16>();
}

#[test]
fn all_bf16_patterns_match_oracle() {
    all_patterns::<bf16>();
}

/// Heads whose pairs fill whole vectors, one to nine of them on 4, 8 and 16 lanes (the
/// kernels unroll one to eight with the cos/sin row loaded once per call, `Interleaved` one
/// to eight steps of two vectors; more take the loops), both layouts, whole and partial
/// rotary, in place and out of place, both directions, every tier against the oracle with
/// canaries around every buffer.
fn whole_vector_heads<T: TestElem>(seed: u64) {
    let mut rng = rng(seed);
    // Under Miri (bounds, not bits): the smallest and the largest unrolled count, partial
    // rotary (the rest is copied or kept) and one direction; the native run does the rest.
    let counts: &[usize] = if cfg!(miri) { &[1, 8] } else { &[1, 2, 3, 4, 5, 6, 7, 8, 9] };
    let mut all_pairs: Vec<usize> =
        [4, 8, 16].iter().flat_map(|l| counts.iter().map(move |n| l * n)).collect();
    all_pairs.sort_unstable();
    all_pairs.dedup();
    let (tokens, heads) = if cfg!(miri) { (1, 2) } else { (2, 3) };
    let extras: &[usize] = if cfg!(miri) { &[3] } else { &[0, 3] };
    let directions: &[bool] = if cfg!(miri) { &[false] } else { &[false, true] };
    let shapes = all_pairs.iter().flat_map(|&p| extras.iter().map(move |&e| (p, e)));
    for ((pairs, extra), layout) in
        shapes.flat_map(|s| [(s, PairLayout::HalfSplit), (s, PairLayout::Interleaved)])
    {
        let head_dim = 2 * pairs + extra;
        let config = RopeConfig::new(head_dim, 10_000.0).with_rotary_dim(2 * pairs).with_layout(layout);
        let oracle = pinned(config.clone(), Tier::Scalar);
        let cache = oracle.build_cache(8).unwrap();
        let view = View::token_major(tokens, heads, head_dim);
        let n = tokens * heads * head_dim;
        let x0 = padded::<T>(&mut rng, n);
        let out0 = padded::<T>(&mut rng, n);
        for &inverse in directions {
            let mut opts = ApplyOptions::start(5).with_table(cache.table());
            if inverse {
                opts = opts.inverse();
            }
            let run = |r: &Rope| {
                let (mut x, mut out) = (x0.clone(), out0.clone());
                r.apply(HeadsMut::new(&mut x[PAD..PAD + n], view), &opts).unwrap();
                r.apply_into(
                    Heads::new(&x0[PAD..PAD + n], view),
                    HeadsMut::new(&mut out[PAD..PAD + n], view),
                    &opts,
                )
                .unwrap();
                (x, out)
            };
            let (ex, eo) = run(&oracle);
            for tier in tiers() {
                let rope = pinned(config.clone(), tier);
                let what = format!(
                    "{tier} {} {layout:?} pairs {pairs} head_dim {head_dim} inverse {inverse}",
                    T::NAME
                );
                let (gx, go) = run(&rope);
                check_untouched(&x0, &gx, &view, head_dim, &what);
                check_untouched(&out0, &go, &view, head_dim, &what);
                assert_eq!(bits(&ex), bits(&gx), "in place: {what}");
                assert_eq!(bits(&eo), bits(&go), "out of place: {what}");
            }
        }
    }
}

#[test]
fn whole_vector_heads_match_oracle_f32() {
    whole_vector_heads::<f32>(0x5EC7_0001);
}

#[test]
#[cfg_attr(miri, ignore = "f32 covers the kernel's bounds under Miri")]
fn whole_vector_heads_match_oracle_f16() {
    whole_vector_heads::<f16>(0x5EC7_0002);
}

#[test]
#[cfg_attr(miri, ignore = "f32 covers the kernel's bounds under Miri")]
fn whole_vector_heads_match_oracle_bf16() {
    whole_vector_heads::<bf16>(0x5EC7_0003);
}

/// Calls large enough for the kernels' prefetch path (more rotated input bytes than
/// `__bench::PREFETCH_MIN_BYTES`, 512 KiB;
/// `[t][h][d]` prefetches, `[h][t][d]` does not), GQA k, both layouts, whole and (`[t][h][d]`
/// only) partial rotary (58 of 128: 29 pairs, a tail on every tier; out of place this is the
/// head-by-head walk that copies each pass-through part after its rotation), in place and
/// out of place, every tier against the oracle, with canaries around every buffer. Not under
/// Miri (millions of elements).
fn prefetching_calls<T: TestElem>(seed: u64) {
    let mut rng = rng(seed);
    let (tokens, q_heads, k_heads, head_dim) = (300, 12, 4, 128);
    let cases =
        [PairLayout::HalfSplit, PairLayout::Interleaved].into_iter().flat_map(|l| [(l, head_dim), (l, 58)]);
    for (layout, rotary_dim) in cases {
        // 58 rotated bf16 elements of 300 x 16 heads: 544 KiB, still above the threshold.
        assert!(
            tokens * (q_heads + k_heads) * rotary_dim * size_of::<T>()
                > rope_kernels::__bench::PREFETCH_MIN_BYTES
        );
        let rope_cfg =
            |layout| RopeConfig::new(head_dim, 500_000.0).with_layout(layout).with_rotary_dim(rotary_dim);
        // Partial rotary in BSHD only: BHSD calls do not prefetch (nor take the head-by-head
        // walk), and each case costs seconds under qemu.
        for bhsd in [false, true].into_iter().filter(|&b| !b || rotary_dim == head_dim) {
            let view = |h| {
                if bhsd {
                    View::head_major(tokens, h, head_dim)
                } else {
                    View::token_major(tokens, h, head_dim)
                }
            };
            let (qv, kv) = (view(q_heads), view(k_heads));
            let q0 = padded::<T>(&mut rng, tokens * q_heads * head_dim);
            let k0 = padded::<T>(&mut rng, tokens * k_heads * head_dim);
            let opts = ApplyOptions::start(7);
            // In place on the live part of canary-padded copies of q0 and k0.
            let in_place = |rope: &Rope| {
                let (mut q, mut k) = (q0.clone(), k0.clone());
                let (nq, nk) = (q.len(), k.len());
                let k_live = HeadsMut::new(&mut k[PAD..nk - PAD], kv);
                rope.apply_qk(HeadsMut::new(&mut q[PAD..nq - PAD], qv), Some(k_live), &opts).unwrap();
                (q, k)
            };
            let oracle = pinned(rope_cfg(layout), Tier::Scalar);
            let (eq, ek) = in_place(&oracle);
            for tier in tiers() {
                let rope = pinned(rope_cfg(layout), tier);
                let what = format!("{tier} {} {layout:?} rotary_dim={rotary_dim} bhsd={bhsd}", T::NAME);
                let (gq, gk) = in_place(&rope);
                assert_eq!(bits(&eq), bits(&gq), "{what}: q in place (canaries included)");
                assert_eq!(bits(&ek), bits(&gk), "{what}: k in place (canaries included)");
                // Out of place into canary-padded outputs.
                let (mut oq, mut ok) =
                    (padded::<T>(&mut rng, q0.len() - 2 * PAD), padded::<T>(&mut rng, k0.len() - 2 * PAD));
                let (oq0, ok0) = (oq.clone(), ok.clone());
                {
                    let (nq, nk) = (oq.len(), ok.len());
                    rope.apply_qk_into(
                        Heads::new(&q0[PAD..q0.len() - PAD], qv),
                        HeadsMut::new(&mut oq[PAD..nq - PAD], qv),
                        Some((
                            Heads::new(&k0[PAD..k0.len() - PAD], kv),
                            HeadsMut::new(&mut ok[PAD..nk - PAD], kv),
                        )),
                        &opts,
                    )
                    .unwrap();
                }
                assert_eq!(
                    bits(&eq[PAD..eq.len() - PAD]),
                    bits(&oq[PAD..oq.len() - PAD]),
                    "{what}: q out of place"
                );
                assert_eq!(
                    bits(&ek[PAD..ek.len() - PAD]),
                    bits(&ok[PAD..ok.len() - PAD]),
                    "{what}: k out of place"
                );
                for (o, o0, name) in [(&oq, &oq0, "q"), (&ok, &ok0, "k")] {
                    let n = o.len();
                    assert_eq!(bits(&o[..PAD]), bits(&o0[..PAD]), "{what}: {name} output canary before");
                    assert_eq!(
                        bits(&o[n - PAD..]),
                        bits(&o0[n - PAD..]),
                        "{what}: {name} output canary after"
                    );
                }
            }
        }
    }
}

#[test]
#[cfg_attr(miri, ignore = "millions of elements")]
fn prefetching_calls_match_oracle_f32() {
    prefetching_calls::<f32>(0xFE7C_4001);
}

#[test]
#[cfg_attr(miri, ignore = "millions of elements")]
fn prefetching_calls_match_oracle_bf16() {
    prefetching_calls::<bf16>(0xFE7C_4002);
}

/// Hand-computed results (not just agreement with the oracle): ties to even, subnormal
/// results, overflow, canonical NaN. One pair, `HalfSplit`, forward: `y0 = x0*c - x1*s`.
#[test]
fn known_values() {
    // (x0 bits, x1 bits, c, s, expected y0 bits)
    let bf16_cases: &[(u32, u32, f32, f32, u32)] = &[
        (0x3F80, 0x3F80, 1.0, -0.00390625, 0x3F80), // 1 + 2^-8: tie, down to even 1.0
        (0x3F81, 0x3F80, 1.0, -0.00390625, 0x3F82), // 1 + 2^-7 + 2^-8: tie, up to even
        (0x0001, 0x0000, 0.5, 0.0, 0x0000),         // smallest subnormal halved: tie to 0
        (0x0001, 0x0000, 1.5, 0.0, 0x0002),         // 1.5 ulp: tie, up to even
        (0x7F7F, 0x0000, 2.0, 0.0, 0x7F80),         // overflow to +inf
        (0x7F81, 0x0000, 1.0, 0.0, 0x7FC0),         // signalling NaN in: canonical NaN out
        (0x7F80, 0x0000, 0.0, 0.0, 0x7FC0),         // inf * 0
    ];
    let f16_cases: &[(u32, u32, f32, f32, u32)] = &[
        (0x3C00, 0x3C00, 1.0, -0.00048828125, 0x3C00), // 1 + 2^-11: tie, to even 1.0
        (0x3C01, 0x3C00, 1.0, -0.00048828125, 0x3C02), // tie, up to even
        (0x0001, 0x0000, 0.5, 0.0, 0x0000),
        (0x0001, 0x0000, 1.5, 0.0, 0x0002),
        (0x7BFF, 0x0000, 2.0, 0.0, 0x7C00),
        (0xFC01, 0x0000, 1.0, 0.0, 0x7E00),
        (0x3C00, 0x0000, 1e-8, 0.0, 0x0000), // below half the smallest subnormal
    ];
    let f32_cases: &[(u32, u32, f32, f32, u32)] = &[
        (0x0000_0003, 0, 0.5, 0.0, 0x0000_0002), // 1.5 * 2^-149: tie, to even; no flush to zero
        (0x0080_0000, 0, 0.5, 0.0, 0x0040_0000), // normal to subnormal
        (0x7FA0_1234, 0, 1.0, 0.0, 0x7FC0_0000),
        (0xFFC0_0001, 0, 1.0, 0.0, 0x7FC0_0000),
        (0x7F7F_FFFF, 0, 2.0, 0.0, 0x7F80_0000),
        (0x3F80_0000, 0x3F80_0000, -0.0, 0.0, 0x8000_0000), // (1 * -0) - (1 * 0) = -0
    ];
    fn run<T: TestElem>(cases: &[(u32, u32, f32, f32, u32)]) {
        for tier in tiers() {
            for &(x0, x1, c, s, want) in cases {
                // 17 pairs: the case sits in the vector body (pair 0) and in the tail (16).
                let mut cos = vec![1.0f32; 17];
                let mut sin = vec![0.0f32; 17];
                let mut x = vec![T::from_f32(1.0); 34];
                for i in [0, 16] {
                    (cos[i], sin[i]) = (c, s);
                    (x[i], x[i + 17]) = (T::from_bits(x0), T::from_bits(x1));
                }
                let rope = pinned(RopeConfig::new(34, 10_000.0), tier);
                let table = CosSinTable::new(&cos, &sin, 17).unwrap();
                rope.apply(
                    HeadsMut::new(&mut x, View::token_major(1, 1, 34)),
                    &ApplyOptions::start(0).with_table(table),
                )
                .unwrap();
                for i in [0, 16] {
                    let got = x[i].to_bits_u32();
                    assert_eq!(got, want, "{tier} {} x0 {x0:#x} x1 {x1:#x} c {c} s {s}: {got:#x}", T::NAME);
                }
            }
        }
    }
    run::<bf16>(bf16_cases);
    run::<f16>(f16_cases);
    run::<f32>(f32_cases);
}
