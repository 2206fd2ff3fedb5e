//! The implementation tiers (re-exported as `rope_kernels::Tier` and by `dispatch`, which
//! says which of them this CPU has).

/// An implementation tier. Ordered from slowest to fastest within an architecture.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u8)]
pub enum Tier {
    /// Plain Rust, no target features: the oracle.
    Scalar = 1,
    /// The `wide` crate compiled for the build's baseline (SSE2, NEON, wasm simd128).
    Portable = 2,
    /// aarch64 NEON intrinsics.
    Neon = 3,
    /// x86-64 AVX2 + FMA + F16C intrinsics.
    Avx2 = 4,
    /// x86-64 AVX-512F intrinsics (chosen only when AVX2, FMA and F16C are present too).
    Avx512 = 5,
}

/// Every tier, slowest first.
pub const ALL_TIERS: [Tier; 5] = [Tier::Scalar, Tier::Portable, Tier::Neon, Tier::Avx2, Tier::Avx512];

impl Tier {
    /// The tier's name, e.g. `"avx2"`.
    pub const fn name(self) -> &'static str {
        match self {
            Tier::Scalar => "scalar",
            Tier::Portable => "portable",
            Tier::Neon => "neon",
            Tier::Avx2 => "avx2",
            Tier::Avx512 => "avx512",
        }
    }
}

impl core::fmt::Display for Tier {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
}
