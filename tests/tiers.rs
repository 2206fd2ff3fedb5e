//! One suite, run for every tier this build can run on this CPU: each tier's output must
//! be bit-identical to the scalar oracle (`to_bits`), for random shapes, strides, positions
//! and values from fixed seeds, over buffers padded with canaries on both sides (and in the
//! gaps between strided rows) that are checked after every call. Unavailable tiers are
//! skipped and reported by name (run with `--nocapture` to see the report).
//!
//! Under Miri the same suite runs with fewer and smaller cases.

use rand::rngs::SmallRng as StdRng;
use rand::{RngExt, SeedableRng};
use rope_kernels::dispatch::{self, ALL_TIERS};
use rope_kernels::{
    bf16, f16, Apply, CosSinTable, Element, Heads, HeadsMut, Layout, Rope, RopeConfig, RopeError, Tier, View,
};

/// Random cases per (tier, dtype) in `random_cases_match_oracle`.
const CASES: usize = if cfg!(miri) { 6 } else { 150 };
/// Largest token count, head count and extra (pass-through) dims of a random case.
const MAX_TOKENS: usize = if cfg!(miri) { 2 } else { 5 };
const MAX_HEADS: usize = if cfg!(miri) { 2 } else { 6 };
/// Canary elements on each side of every buffer.
const PAD: usize = 9;

/// The tiers to test; prints the ones skipped. `ROPE_TIERS=avx2,avx512` narrows the list
/// (the Miri script uses it so that each run spends its time on the tier it adds).
fn tiers() -> Vec<Tier> {
    let only = std::env::var("ROPE_TIERS").ok();
    let mut v = Vec::new();
    for t in ALL_TIERS {
        if !t.is_available() {
            println!("skipping {t}: not available on this CPU/build");
        } else if only.as_ref().is_some_and(|o| !o.split(',').any(|n| n.trim() == t.name())) {
            println!("skipping {t}: not selected by ROPE_TIERS");
        } else {
            v.push(t);
        }
    }
    v
}

/// Test-side access to an element's bits.
trait Bits: Element {
    const NAME: &'static str;
    const CANARY: u32;
    /// Interesting bit patterns: zeros, subnormals, extremes, infinities, NaNs.
    const SPECIALS: &'static [u32];
    fn from_bits_u32(b: u32) -> Self;
}

impl Bits for f32 {
    const NAME: &'static str = "f32";
    const CANARY: u32 = 0xDEAD_BEEF;
    const SPECIALS: &'static [u32] = &[
        0x0000_0000,
        0x8000_0000,
        0x0000_0001,
        0x8000_0003,
        0x007F_FFFF,
        0x0080_0000,
        0x7F7F_FFFF,
        0xFF7F_FFFF,
        0x7F80_0000,
        0xFF80_0000,
        0x7FC0_0000,
        0xFFC0_0001,
        0x7F80_0001,
        0x7FA0_1234,
        0x3F80_0000,
        0x3F80_0001,
        0x3380_0000,
    ];
    fn from_bits_u32(b: u32) -> Self {
        f32::from_bits(b)
    }
}

impl Bits for f16 {
    const NAME: &'static str = "f16";
    const CANARY: u32 = 0xBEEF;
    const SPECIALS: &'static [u32] = &[
        0x0000, 0x8000, 0x0001, 0x8003, 0x03FF, 0x0400, 0x7BFF, 0xFBFF, 0x7C00, 0xFC00, 0x7E00, 0xFE01,
        0x7C01, 0x7D23, 0x3C00, 0x3C01, 0x1400,
    ];
    fn from_bits_u32(b: u32) -> Self {
        f16::from_bits(b as u16)
    }
}

impl Bits for bf16 {
    const NAME: &'static str = "bf16";
    const CANARY: u32 = 0xBEEF;
    const SPECIALS: &'static [u32] = &[
        0x0000, 0x8000, 0x0001, 0x8003, 0x007F, 0x0080, 0x7F7F, 0xFF7F, 0x7F80, 0xFF80, 0x7FC0, 0xFFC1,
        0x7F81, 0x7FA3, 0x3F80, 0x3F81, 0x3B80,
    ];
    fn from_bits_u32(b: u32) -> Self {
        bf16::from_bits(b as u16)
    }
}

/// A random element: mostly values exact in every type (so products and sums land on
/// rounding ties often), some random finite values, some specials.
fn element<T: Bits>(rng: &mut StdRng) -> T {
    match rng.random_range(0..20) {
        0..=11 => {
            let m = rng.random_range(-64i32..=64) as f32;
            T::from_f32(m * f32::powi(2.0, rng.random_range(-8..=0)))
        }
        12..=16 => T::from_f32(rng.random_range(-8.0f32..8.0)),
        _ => T::from_bits_u32(T::SPECIALS[rng.random_range(0..T::SPECIALS.len())]),
    }
}

/// Special cos/sin values for caller tables: exact products that tie in bf16/f16, results
/// that overflow or become subnormal, infinities and NaN.
const TABLE_SPECIALS: &[f32] = &[
    1.0,
    -1.0,
    0.0,
    -0.0,
    0.5,
    0.00390625,
    -0.00390625,
    0.005859375,
    0.00048828125,
    1.0 + 1.0 / 256.0,
    1.0 - 1.0 / 512.0,
    1.5,
    1e30,
    1e-40,
    f32::INFINITY,
    f32::NAN,
    0.70710677,
];

/// A buffer of `PAD` canaries, `len` random elements, `PAD` canaries.
fn padded<T: Bits>(rng: &mut StdRng, len: usize) -> Vec<T> {
    let mut v = vec![T::from_bits_u32(T::CANARY); len + 2 * PAD];
    for x in &mut v[PAD..PAD + len] {
        *x = element(rng);
    }
    v
}

/// Which elements a view covers (true) inside a buffer of `len` (padding excluded).
fn coverage(view: &View, head_dim: usize, len: usize) -> Vec<bool> {
    let mut c = vec![false; len];
    for t in 0..view.tokens {
        for h in 0..view.heads {
            let o = t * view.token_stride + h * view.head_stride;
            c[o..o + head_dim].iter_mut().for_each(|x| *x = true);
        }
    }
    c
}

fn bits<T: Element>(v: &[T]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits_u32()).collect()
}

/// Asserts that every element outside `view` (canaries, gaps) kept its initial bits.
fn check_untouched<T: Element>(before: &[T], after: &[T], view: &View, head_dim: usize, what: &str) {
    let inner = before.len() - 2 * PAD;
    let cov = coverage(view, head_dim, inner);
    for (i, (b, a)) in before.iter().zip(after).enumerate() {
        let covered = i >= PAD && i < PAD + inner && cov[i - PAD];
        if !covered {
            assert_eq!(b.to_bits_u32(), a.to_bits_u32(), "{what}: element {i} outside the view was written");
        }
    }
}

/// A random view of `tokens × heads` rows of `head_dim`, and the buffer length it needs.
fn random_view(rng: &mut StdRng, tokens: usize, heads: usize, head_dim: usize) -> (View, usize) {
    let gap_h = if rng.random_bool(0.5) { 0 } else { rng.random_range(1..4) };
    let gap_t = if rng.random_bool(0.5) { 0 } else { rng.random_range(1..4) };
    let view = match rng.random_range(0..3) {
        0 => View::bshd(tokens, heads, head_dim),
        1 => View::bhsd(tokens, heads, head_dim),
        // Strided with gaps, BSHD-like or BHSD-like.
        _ if rng.random_bool(0.5) => {
            let hs = head_dim + gap_h;
            View { tokens, heads, head_stride: hs, token_stride: heads * hs + gap_t }
        }
        _ => {
            let ts = head_dim + gap_t;
            View { tokens, heads, token_stride: ts, head_stride: tokens * ts + gap_h }
        }
    };
    let len = view.validate(head_dim, usize::MAX, rope_kernels::Operand::Q).unwrap();
    (view, len)
}

/// One random case: shape, strides, options; run on the oracle and on `tier`, compare.
fn random_case<T: Bits>(rng: &mut StdRng, tier: Tier) {
    // Body and tail on every lane count (4, 8, 16); Miri gets the smaller half.
    const PAIRS: &[usize] = &[1, 3, 4, 8, 9, 16, 17, 2, 5, 7, 15, 24, 31, 32, 33, 64];
    let pairs = PAIRS[rng.random_range(0..if cfg!(miri) { 7 } else { PAIRS.len() })];
    let rotary_dim = 2 * pairs;
    let head_dim = rotary_dim + if rng.random_bool(0.5) { 0 } else { rng.random_range(1..10) };
    let layout = if rng.random_bool(0.5) { Layout::HalfSplit } else { Layout::Interleaved };
    let config = RopeConfig::new(head_dim, 10_000.0).with_rotary_dim(rotary_dim).with_layout(layout);
    let oracle = Rope::new(config.clone()).unwrap().with_tier(Tier::Scalar).unwrap();
    let rope = Rope::new(config).unwrap().with_tier(tier).unwrap();
    assert_eq!(rope.tier(), tier);

    let tokens = rng.random_range(1..=MAX_TOKENS);
    let q_heads = rng.random_range(1..=MAX_HEADS);
    // GQA/MQA: k often has fewer heads; sometimes no k at all.
    let k_heads = if rng.random_bool(0.2) { None } else { Some(rng.random_range(1..=q_heads)) };

    // Positions: random ids or a start offset, all below `rows`.
    let rows = MAX_TOKENS + 8;
    let ids: Vec<u32> = (0..tokens).map(|_| rng.random_range(0..rows as u32)).collect();
    let mut opts = if rng.random_bool(0.5) { Apply::ids(&ids) } else { Apply::start(rng.random_range(0..8)) };
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

fn random_suite<T: Bits>(seed: u64) {
    for tier in tiers() {
        let mut rng = StdRng::seed_from_u64(seed ^ tier as u64);
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
fn all_patterns<T: Bits>() {
    let step = if cfg!(miri) { 257 } else { 1 };
    let patterns: Vec<T> = (0..=u16::MAX as u32).step_by(step).map(T::from_bits_u32).collect();
    let head_dim = 2 * 9; // 9 pairs: a vector body plus a tail on every tier.
    let heads = patterns.len() / head_dim;
    let n = heads * head_dim;
    let mut rng = StdRng::seed_from_u64(0xA11_B175);
    let cos: Vec<f32> = (0..9).map(|_| TABLE_SPECIALS[rng.random_range(0..TABLE_SPECIALS.len())]).collect();
    let sin: Vec<f32> = (0..9).map(|_| rng.random_range(-1.5f32..1.5)).collect();
    let table = CosSinTable::new(&cos, &sin, 9).unwrap();
    for layout in [Layout::HalfSplit, Layout::Interleaved] {
        let config = RopeConfig::new(head_dim, 10_000.0).with_layout(layout);
        let oracle = Rope::new(config.clone()).unwrap().with_tier(Tier::Scalar).unwrap();
        let mut expect = patterns[..n].to_vec();
        let opts = Apply::start(0).with_table(table);
        oracle.apply(HeadsMut::new(&mut expect, View::bshd(1, heads, head_dim)), &opts).unwrap();
        for tier in tiers() {
            let rope = Rope::new(config.clone()).unwrap().with_tier(tier).unwrap();
            let mut got = patterns[..n].to_vec();
            rope.apply(HeadsMut::new(&mut got, View::bshd(1, heads, head_dim)), &opts).unwrap();
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
    fn run<T: Bits>(cases: &[(u32, u32, f32, f32, u32)]) {
        for tier in tiers() {
            for &(x0, x1, c, s, want) in cases {
                // 17 pairs: the case sits in the vector body (pair 0) and in the tail (16).
                let mut cos = vec![1.0f32; 17];
                let mut sin = vec![0.0f32; 17];
                let mut x = vec![T::from_f32(1.0); 34];
                for i in [0, 16] {
                    (cos[i], sin[i]) = (c, s);
                    (x[i], x[i + 17]) = (T::from_bits_u32(x0), T::from_bits_u32(x1));
                }
                let rope = Rope::new(RopeConfig::new(34, 10_000.0)).unwrap().with_tier(tier).unwrap();
                let table = CosSinTable::new(&cos, &sin, 17).unwrap();
                rope.apply(HeadsMut::new(&mut x, View::bshd(1, 1, 34)), &Apply::start(0).with_table(table))
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

/// The roofline baseline computes `round(x * c)` on every tier, like the oracle.
#[test]
fn bench_scale_matches_scalar() {
    let mut rng = StdRng::seed_from_u64(7);
    let n = if cfg!(miri) { 37 } else { 1000 };
    let src: Vec<bf16> = (0..n).map(|_| element(&mut rng)).collect();
    let mut want = src.clone();
    rope_kernels::__bench::scale(Tier::Scalar, &mut want, 1.25).unwrap();
    for tier in tiers() {
        let mut got = src.clone();
        rope_kernels::__bench::scale(tier, &mut got, 1.25).unwrap();
        assert_eq!(bits(&want), bits(&got), "{tier}");
    }
    let srcf: Vec<f32> = (0..n).map(|_| element(&mut rng)).collect();
    let mut want = srcf.clone();
    rope_kernels::__bench::scale(Tier::Scalar, &mut want, 0.75).unwrap();
    for tier in tiers() {
        let mut got = srcf.clone();
        rope_kernels::__bench::scale(tier, &mut got, 0.75).unwrap();
        assert_eq!(bits(&want), bits(&got), "{tier}");
    }
}

/// The dispatcher runs the tier it reports: forcing, capping and pinning tiers changes
/// what `active_tier` and `Rope::tier` (which name the kernel table a call uses) say, and
/// unavailable tiers are refused without changing anything. The only test of this binary
/// that touches the process-wide tier.
#[test]
fn dispatcher_uses_reported_tier() {
    let available: Vec<Tier> = dispatch::available_tiers().collect();
    assert_eq!(available[0], Tier::Scalar);
    assert!(available.contains(&Tier::Portable));
    #[cfg(all(target_arch = "aarch64", target_feature = "neon"))]
    assert!(available.contains(&Tier::Neon));
    #[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "f16c"))]
    assert!(available.contains(&Tier::Avx2));
    #[cfg(all(target_arch = "x86_64", target_feature = "avx512f"))]
    assert!(available.contains(&Tier::Avx512));
    let best = *available.last().unwrap();
    println!("available tiers: {available:?}; dispatcher default: {best}");
    assert_eq!(dispatch::reset_tier(), best);
    assert_eq!(dispatch::active_tier(), best);

    let config = RopeConfig::new(8, 10_000.0);
    let mut x = [1.0f32; 8];
    for &t in &available {
        dispatch::force_tier(t).unwrap();
        assert_eq!(dispatch::active_tier(), t);
        let rope = Rope::new(config.clone()).unwrap();
        assert_eq!(rope.tier(), t);
        rope.apply(HeadsMut::new(&mut x, View::bshd(1, 1, 8)), &Apply::start(3)).unwrap();
        assert_eq!(Rope::new(config.clone()).unwrap().with_tier(t).unwrap().tier(), t);
        assert_eq!(dispatch::set_max_tier(t), t);
    }
    for t in ALL_TIERS.into_iter().filter(|t| !available.contains(t)) {
        assert_eq!(dispatch::force_tier(t), Err(RopeError::TierUnavailable));
        assert_eq!(Rope::new(config.clone()).unwrap().with_tier(t).err(), Some(RopeError::TierUnavailable));
        assert!(rope_kernels::__bench::scale(t, &mut x, 1.0).is_err());
    }
    assert_eq!(dispatch::set_max_tier(Tier::Scalar), Tier::Scalar);
    assert_eq!(Rope::new(config.clone()).unwrap().tier(), Tier::Scalar);
    assert_eq!(dispatch::reset_tier(), best);
    assert_eq!(dispatch::active_tier(), best);
}
