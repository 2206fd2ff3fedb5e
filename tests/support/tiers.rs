//! The tiers a test runs on, and handles pinned to one of them.

use std::println;
use std::vec::Vec;

use rope_kernels::dispatch::ALL_TIERS;
use rope_kernels::{Rope, RopeConfig, Tier};

/// The tiers to test: those this build can run on this CPU. Prints
/// `skipping <tier>: not on this CPU` for each other one (run with `--nocapture` to see
/// the report). `ROPE_TIERS=avx2,avx512` narrows the list (the Miri script uses it so that
/// each run spends its time on the tier it adds).
pub fn tiers() -> Vec<Tier> {
    let only = std::env::var("ROPE_TIERS").ok();
    let mut v = Vec::new();
    for t in ALL_TIERS {
        if !t.is_available() {
            println!("skipping {t}: not on this CPU (or not in this build)");
        } else if only.as_ref().is_some_and(|o| !o.split(',').any(|n| n.trim() == t.name())) {
            println!("skipping {t}: not selected by ROPE_TIERS");
        } else {
            v.push(t);
        }
    }
    v
}

/// A handle for `config` pinned to `tier`; asserts that it reports `tier` (`Rope::tier`
/// names the kernel table its calls use), so a test of a tier cannot run another one.
pub fn pinned(config: RopeConfig, tier: Tier) -> Rope<'static> {
    let rope = Rope::new(config).unwrap().with_tier(tier).unwrap();
    assert_eq!(rope.tier(), tier, "a handle pinned to {tier} runs {}", rope.tier());
    rope
}
