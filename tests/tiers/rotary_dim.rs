//! Every rotary_dim, no tail cliff (tails overlap the last whole vector or, on AVX-512, run
//! on the AVX2 width; both must stay bit-identical), and the head-major walk of BHSD
//! tensors.

use super::*;

/// The widest f32 vector of any tier of this target: AVX-512's 16 lanes on x86-64, 4
/// (NEON, portable) elsewhere.
const WIDEST_LANES: usize = if cfg!(target_arch = "x86_64") { 16 } else { 4 };

/// One (rotary_dim, layout, dtype) case on every tier: 2 tokens × 3 heads, head_dim =
/// rotary_dim (+ 3 pass-through dims when `extra`), forward and inverse, in place and out
/// of place, canaries around every buffer.
fn every_rotary_dim_case<T: TestElem>(rng: &mut TestRng, rotary_dim: usize, layout: PairLayout, extra: bool) {
    let head_dim = rotary_dim + if extra { 3 } else { 0 };
    let (tokens, heads) = (2, 3);
    let config = RopeConfig::new(head_dim, 10_000.0).with_rotary_dim(rotary_dim).with_layout(layout);
    let oracle = pinned(config.clone(), Tier::Scalar);
    let view = View::token_major(tokens, heads, head_dim);
    let n = tokens * heads * head_dim;
    let x0 = padded::<T>(rng, n);
    // Under Miri forward only (the inverse is the same code with other signs).
    for inverse in [false, true].into_iter().take(if cfg!(miri) { 1 } else { 2 }) {
        let opts = if inverse { ApplyOptions::start(5).inverse() } else { ApplyOptions::start(5) };
        let in_place = |r: &Rope| {
            let mut x = x0.clone();
            r.apply(HeadsMut::new(&mut x[PAD..PAD + n], view), &opts).unwrap();
            x
        };
        let out_of_place = |r: &Rope, o0: &[T]| {
            let mut o = o0.to_vec();
            r.apply_into(
                Heads::new(&x0[PAD..PAD + n], view),
                HeadsMut::new(&mut o[PAD..PAD + n], view),
                &opts,
            )
            .unwrap();
            o
        };
        let o0 = padded::<T>(rng, n);
        let (want, want_out) = (in_place(&oracle), out_of_place(&oracle, &o0));
        for tier in tiers() {
            let rope = pinned(config.clone(), tier);
            let what = format!(
                "{tier} {} {layout:?} rotary_dim {rotary_dim} head_dim {head_dim} inverse {inverse}",
                T::NAME
            );
            let got = in_place(&rope);
            check_untouched(&x0, &got, &view, head_dim, &what);
            assert_eq!(bits(&want), bits(&got), "in place: {what}");
            let got = out_of_place(&rope, &o0);
            check_untouched(&o0, &got, &view, head_dim, &what);
            assert_eq!(bits(&want_out), bits(&got), "out of place: {what}");
        }
    }
}

fn every_rotary_dim<T: TestElem>(seed: u64) {
    let mut rng = rng(seed);
    // Under Miri every fourth rotary_dim (2, 10, 18, 26, 34: tails on every width, and
    // heads shorter than one vector).
    let step = if cfg!(miri) { 4 } else { 1 };
    // Then a few wider heads: whole blocks of the bf16 paths plus a tail on every width.
    let wide: &[usize] = if cfg!(miri) { &[] } else { &[46, 62, 66, 94, 98] };
    for rotary_dim in (2..=2 * WIDEST_LANES + 2).step_by(2 * step).chain(wide.iter().copied()) {
        for layout in [PairLayout::HalfSplit, PairLayout::Interleaved] {
            for extra in [false, true] {
                if cfg!(miri) && extra {
                    continue;
                }
                every_rotary_dim_case::<T>(&mut rng, rotary_dim, layout, extra);
            }
        }
    }
    println!(
        "every rotary_dim 2..={} of {} bit-identical to scalar on {:?}",
        2 * WIDEST_LANES + 2,
        T::NAME,
        tiers()
    );
}

#[test]
fn every_rotary_dim_matches_oracle_f32() {
    every_rotary_dim::<f32>(18_01);
}

#[test]
fn every_rotary_dim_matches_oracle_f16() {
    every_rotary_dim::<f16>(18_02);
}

#[test]
fn every_rotary_dim_matches_oracle_bf16() {
    every_rotary_dim::<bf16>(18_03);
}

/// The head-major walk of BHSD tensors (issue 18: calls with a table and consecutive
/// positions; `HalfSplit`, and `Interleaved` out of place) gives the bits of the token-major
/// walk (the same positions as `position_ids`), on every tier, for every dtype: whole and
/// partial rotary, both layouts, q BHSD and k BSHD in one call, in place and out of place
/// (BHSD into BSHD), canaries intact.
fn head_major_bhsd<T: TestElem>(seed: u64) {
    let mut rng = rng(seed);
    let (tokens, q_heads, k_heads) = if cfg!(miri) { (3, 2, 1) } else { (70, 3, 2) };
    let shapes: &[(usize, usize)] = if cfg!(miri) {
        &[(20, 8), (40, 34), (32, 32)]
    } else {
        &[(20, 8), (80, 20), (96, 24), (40, 34), (32, 32), (40, 40), (128, 128)]
    };
    let cases = shapes.iter().flat_map(|&s| [PairLayout::HalfSplit, PairLayout::Interleaved].map(|l| (s, l)));
    for ((head_dim, rotary_dim), layout) in cases {
        let config = RopeConfig::new(head_dim, 10_000.0).with_rotary_dim(rotary_dim).with_layout(layout);
        let (qv, kv) =
            (View::head_major(tokens, q_heads, head_dim), View::token_major(tokens, k_heads, head_dim));
        let (qn, kn) = (tokens * q_heads * head_dim, tokens * k_heads * head_dim);
        let (q0, k0) = (padded::<T>(&mut rng, qn), padded::<T>(&mut rng, kn));
        let ids: Vec<u32> = (0..tokens as u32).map(|t| t + 3).collect();
        for tier in tiers() {
            let rope = pinned(config.clone(), tier);
            let cache = rope.build_cache(tokens + 3).unwrap();
            let what = format!("{tier} {} head_dim {head_dim} rotary_dim {rotary_dim} {layout:?}", T::NAME);
            let in_place = |opts: &ApplyOptions<'_>| {
                let (mut q, mut k) = (q0.clone(), k0.clone());
                let kh = Some(HeadsMut::new(&mut k[PAD..PAD + kn], kv));
                rope.apply_qk(HeadsMut::new(&mut q[PAD..PAD + qn], qv), kh, opts).unwrap();
                (q, k)
            };
            let (hq, hk) = in_place(&ApplyOptions::start(3).with_table(cache.table()));
            let (tq, tk) = in_place(&ApplyOptions::ids(&ids).with_table(cache.table()));
            check_untouched(&q0, &hq, &qv, head_dim, &what);
            check_untouched(&k0, &hk, &kv, head_dim, &what);
            assert_eq!(bits(&hq), bits(&tq), "q in place: {what}");
            assert_eq!(bits(&hk), bits(&tk), "k in place: {what}");
            let out = View::token_major(tokens, q_heads, head_dim);
            let o0 = padded::<T>(&mut rng, qn);
            let out_of_place = |opts: &ApplyOptions<'_>| {
                let mut o = o0.clone();
                rope.apply_into(
                    Heads::new(&q0[PAD..PAD + qn], qv),
                    HeadsMut::new(&mut o[PAD..PAD + qn], out),
                    opts,
                )
                .unwrap();
                o
            };
            let h = out_of_place(&ApplyOptions::start(3).with_table(cache.table()));
            check_untouched(&o0, &h, &out, head_dim, &what);
            assert_eq!(
                bits(&h),
                bits(&out_of_place(&ApplyOptions::ids(&ids).with_table(cache.table()))),
                "out: {what}"
            );
        }
    }
}

#[test]
fn head_major_bhsd_matches_token_major_f32() {
    head_major_bhsd::<f32>(18_11);
}

#[test]
#[cfg_attr(miri, ignore = "f32 covers the head-major walk's bounds under Miri")]
fn head_major_bhsd_matches_token_major_f16() {
    head_major_bhsd::<f16>(18_12);
}

#[test]
#[cfg_attr(miri, ignore = "f32 covers the head-major walk's bounds under Miri")]
fn head_major_bhsd_matches_token_major_bf16() {
    head_major_bhsd::<bf16>(18_13);
}
