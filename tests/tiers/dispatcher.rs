//! The roofline baseline's scale kernel, and the dispatcher running the tier it reports.

use super::*;

/// The roofline baseline computes `round(x * c)` on every tier, like the oracle.
#[test]
fn bench_scale_matches_scalar() {
    let mut rng = rng(7);
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
        rope.apply(HeadsMut::new(&mut x, View::token_major(1, 1, 8)), &ApplyOptions::start(3)).unwrap();
        assert_eq!(pinned(config.clone(), t).tier(), t);
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
