//! aarch64 tiers: NEON (Advanced SIMD, baseline on every aarch64 target).

pub(crate) mod neon;
