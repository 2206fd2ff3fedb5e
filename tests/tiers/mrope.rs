//! Multimodal RoPE: MRoPE (sectioned, interleaved) and 2-D vision RoPE.

use super::*;

/// An MRoPE or vision RoPE object, so one case runner covers both.
enum MultiRope {
    M(Box<rope_kernels::MRope<'static>>),
    V(Box<rope_kernels::VisionRope<'static>>),
}

impl MultiRope {
    fn streams(&self) -> usize {
        match self {
            MultiRope::M(_) => 3,
            MultiRope::V(_) => 2,
        }
    }

    fn fill_table(&self, ids: &[Vec<u32>], cos: &mut [f32], sin: &mut [f32]) {
        match self {
            MultiRope::M(m) => m.fill_table([&ids[0], &ids[1], &ids[2]], cos, sin).unwrap(),
            MultiRope::V(v) => v.fill_table([&ids[0], &ids[1]], cos, sin).unwrap(),
        }
    }

    /// In place (`src` None) or out of place, q and optionally k.
    fn run<T: Element>(
        &self,
        q: (Option<Heads<'_, T>>, HeadsMut<'_, T>),
        k: Option<(Option<Heads<'_, T>>, HeadsMut<'_, T>)>,
        ids: &[Vec<u32>],
        table: Option<CosSinTable<'_>>,
        inverse: bool,
    ) {
        use rope_kernels::AxisOptions;
        fn opts<'a, const N: usize>(
            ids: [&'a [u32]; N],
            table: Option<CosSinTable<'a>>,
            inverse: bool,
        ) -> AxisOptions<'a, N> {
            let o = table.map_or(AxisOptions::ids(ids), AxisOptions::table);
            if inverse {
                o.inverse()
            } else {
                o
            }
        }
        let (q_src, q_dst) = q;
        match q_src {
            None => {
                let k = k.map(|(_, d)| d);
                match self {
                    MultiRope::M(m) => {
                        m.apply_qk(q_dst, k, &opts([&ids[0], &ids[1], &ids[2]], table, inverse))
                    }
                    MultiRope::V(v) => v.apply_qk(q_dst, k, &opts([&ids[0], &ids[1]], table, inverse)),
                }
            }
            Some(q_src) => {
                let k = k.map(|(s, d)| (s.unwrap(), d));
                match self {
                    MultiRope::M(m) => {
                        m.apply_qk_into(q_src, q_dst, k, &opts([&ids[0], &ids[1], &ids[2]], table, inverse))
                    }
                    MultiRope::V(v) => {
                        v.apply_qk_into(q_src, q_dst, k, &opts([&ids[0], &ids[1]], table, inverse))
                    }
                }
            }
        }
        .unwrap();
    }
}

/// A random MRoPE or vision RoPE of `pairs` pairs (even for vision) on `tier` and on the
/// scalar oracle.
fn random_multi(rng: &mut TestRng, tier: Tier) -> (MultiRope, MultiRope, String) {
    use rope_kernels::{AngleMode, MRope, MRopeStyle, VisionRope};
    const PAIRS: &[usize] = &[2, 4, 6, 8, 10, 16, 18, 24, 32, 34, 40, 64];
    let pairs = PAIRS[rng.random_range(0..if cfg!(miri) { 5 } else { PAIRS.len() })];
    let rotary_dim = 2 * pairs;
    let head_dim = rotary_dim + if rng.random_bool(0.5) { 0 } else { rng.random_range(1..6) };
    let layout = if rng.random_bool(0.5) { PairLayout::HalfSplit } else { PairLayout::Interleaved };
    let mode = if rng.random_bool(0.5) { AngleMode::Exact } else { AngleMode::HfCompatible };
    let config = RopeConfig::new(head_dim, 10_000.0)
        .with_rotary_dim(rotary_dim)
        .with_layout(layout)
        .with_angle_mode(mode);
    let kind = rng.random_range(0..3);
    let hf = rng.random_bool(0.3);
    // A random section; interleaved within its bounds (3h <= pairs + 1, 3w <= pairs).
    let (sh, sw) = if kind == 1 {
        (rng.random_range(0..=(pairs + 1) / 3), rng.random_range(0..=pairs / 3))
    } else {
        let sh = rng.random_range(0..=pairs);
        (sh, rng.random_range(0..=pairs - sh))
    };
    let section = [pairs - sh - sw, sh, sw];
    let make = |t: Tier| -> MultiRope {
        if kind == 2 {
            let mut v = VisionRope::new(config.clone()).unwrap();
            if hf {
                let inv: Vec<f32> = v.axis_frequencies().inv_freq_f32().iter().map(|f| f * 1.0001).collect();
                v = v.with_hf_inv_freq(&inv).unwrap();
            }
            MultiRope::V(Box::new(v.with_tier(t).unwrap()))
        } else {
            let style = if kind == 0 { MRopeStyle::Sectioned } else { MRopeStyle::Interleaved };
            let mut m = MRope::new(config.clone(), section, style).unwrap();
            if hf {
                let inv: Vec<f32> =
                    m.rope().frequencies().inv_freq_f32().iter().map(|f| f * 0.9999).collect();
                m = m.with_hf_inv_freq(&inv).unwrap();
            }
            MultiRope::M(Box::new(m.with_tier(t).unwrap()))
        }
    };
    let what = format!("{tier} kind {kind} section {section:?} head_dim {head_dim} rotary_dim {rotary_dim} {layout:?} {mode:?} hf {hf}");
    (make(Tier::Scalar), make(tier), what)
}

fn multi_case<T: TestElem>(rng: &mut TestRng, tier: Tier) {
    let (oracle, rope, what) = random_multi(rng, tier);
    let (head_dim, pairs) = match &oracle {
        MultiRope::M(m) => (m.rope().config().head_dim, m.rope().config().pairs()),
        MultiRope::V(v) => (v.rope().config().head_dim, v.rope().config().pairs()),
    };
    let tokens = rng.random_range(1..=MAX_TOKENS);
    let q_heads = rng.random_range(1..=MAX_HEADS);
    let k_heads = if rng.random_bool(0.3) { None } else { Some(rng.random_range(1..=q_heads)) };
    // Positions: small, or anywhere in u32 (exercises the reduction).
    let big = rng.random_bool(0.3);
    let ids: Vec<Vec<u32>> = (0..oracle.streams())
        .map(|_| {
            (0..tokens).map(|_| if big { rng.random::<u32>() } else { rng.random_range(0..64) }).collect()
        })
        .collect();
    // Rows: on the fly, a table the oracle fills, or a table of specials (extra rows).
    let source = rng.random_range(0..3);
    let rows = tokens + rng.random_range(0..3);
    let (mut cos, mut sin) = (vec![0.0f32; rows * pairs], vec![0.0f32; rows * pairs]);
    match source {
        1 => {
            let n = tokens * pairs;
            oracle.fill_table(&ids, &mut cos[..n], &mut sin[..n]);
            let (mut c2, mut s2) = (vec![0.0f32; n], vec![0.0f32; n]);
            rope.fill_table(&ids, &mut c2, &mut s2);
            assert_eq!(bits(&cos[..n]), bits(&c2), "fill_table cos: {what}");
            assert_eq!(bits(&sin[..n]), bits(&s2), "fill_table sin: {what}");
        }
        2 => {
            for x in cos.iter_mut().chain(sin.iter_mut()) {
                *x = TABLE_SPECIALS[rng.random_range(0..TABLE_SPECIALS.len())];
            }
        }
        _ => {}
    }
    let table = (source != 0).then(|| CosSinTable::new(&cos, &sin, pairs).unwrap());
    let inverse = rng.random_bool(0.5);
    let in_place = rng.random_bool(0.5);
    let what = format!("{what} {} tokens {tokens} heads {q_heads}/{k_heads:?} source {source} inv {inverse} in_place {in_place}", T::NAME);

    let (qv, qlen) = random_view(rng, tokens, q_heads, head_dim);
    let kview = k_heads.map(|kh| random_view(rng, tokens, kh, head_dim));
    let q0 = padded::<T>(rng, qlen);
    let k0 = kview.map(|(_, l)| padded::<T>(rng, l));
    let (qov, qolen) = random_view(rng, tokens, q_heads, head_dim);
    let kout = k_heads.map(|kh| random_view(rng, tokens, kh, head_dim));
    let qo0 = padded::<T>(rng, qolen);
    let ko0 = kout.map(|(_, l)| padded::<T>(rng, l));
    let go = |r: &MultiRope| -> (Vec<T>, Option<Vec<T>>) {
        if in_place {
            let (mut q, mut k) = (q0.clone(), k0.clone());
            let kh =
                k.as_mut().zip(kview).map(|(k, (kv, kl))| (None, HeadsMut::new(&mut k[PAD..PAD + kl], kv)));
            r.run((None, HeadsMut::new(&mut q[PAD..PAD + qlen], qv)), kh, &ids, table, inverse);
            (q, k)
        } else {
            let (mut qo, mut ko) = (qo0.clone(), ko0.clone());
            let k = match (&k0, kview, ko.as_mut(), kout) {
                (Some(k0), Some((kv, kl)), Some(ko), Some((kov, kol))) => Some((
                    Some(Heads::new(&k0[PAD..PAD + kl], kv)),
                    HeadsMut::new(&mut ko[PAD..PAD + kol], kov),
                )),
                _ => None,
            };
            let q =
                (Some(Heads::new(&q0[PAD..PAD + qlen], qv)), HeadsMut::new(&mut qo[PAD..PAD + qolen], qov));
            r.run(q, k, &ids, table, inverse);
            (qo, ko)
        }
    };
    let (eq, ek) = go(&oracle);
    let (gq, gk) = go(&rope);
    let (q_before, q_view, k_before, k_view) = if in_place {
        (&q0, qv, k0.as_ref(), kview.map(|(v, _)| v))
    } else {
        (&qo0, qov, ko0.as_ref(), kout.map(|(v, _)| v))
    };
    check_untouched(q_before, &gq, &q_view, head_dim, &what);
    assert_eq!(bits(&eq), bits(&gq), "q: {what}");
    if let (Some(kb), Some(ek), Some(gk), Some(kv)) = (k_before, ek, gk, k_view) {
        check_untouched(kb, &gk, &kv, head_dim, &what);
        assert_eq!(bits(&ek), bits(&gk), "k: {what}");
    }
}

fn multi_suite<T: TestElem>(seed: u64) {
    for tier in tiers() {
        let mut rng = rng(seed ^ tier as u64);
        for _ in 0..CASES {
            multi_case::<T>(&mut rng, tier);
        }
        println!("{tier}: {CASES} random MRoPE/vision {} cases bit-identical to scalar", T::NAME);
    }
}

#[test]
fn mrope_vision_match_oracle_f32() {
    multi_suite::<f32>(0x15_0001);
}

#[test]
fn mrope_vision_match_oracle_f16() {
    multi_suite::<f16>(0x15_0002);
}

#[test]
fn mrope_vision_match_oracle_bf16() {
    multi_suite::<bf16>(0x15_0003);
}
