//! x86-64 tiers: AVX2 (+ FMA + F16C) and AVX-512F.
//!
//! Each module holds a zero-sized token implementing [`Simd`](super::generic::Simd) with
//! `core::arch` intrinsics, and the `#[target_feature]` boundary functions (`rotate`,
//! `scale`, `add_row`, `alibi_row`) that run the generic kernels with it. A module's `get()`
//! hands out its `KERNELS` only after detecting its features (below, once per process).
//!
//! Miri interprets the generic-SIMD intrinsics used here, but not the f16 conversion
//! instructions `vcvtps2ph` (F16C and AVX-512F) and the 512-bit `vcvtph2ps`. Under
//! `cfg(miri)` those few conversions fall back to `half`, lane by lane (the same rounding);
//! everything else (loads, arithmetic, shuffles, NaN handling, tails) is the code that runs
//! natively.

use core::sync::atomic::{AtomicU8, Ordering};

pub(crate) mod avx2;
pub(crate) mod avx512;
#[cfg(feature = "bench-internals")]
pub(crate) mod roofline;

pub(crate) mod cpuid {
    // `cpufeatures` checks CPUID and that the OS saves the YMM/ZMM state (XGETBV).
    cpufeatures::new!(avx2_fma, "avx2", "fma");
    cpufeatures::new!(avx512, "avx512f");

    /// (AVX2 tier usable, AVX-512 tier usable) on this CPU (see [`tiers_from`]).
    pub(crate) fn detect() -> (bool, bool) {
        tiers_from(avx2_fma::get(), f16c(), avx512::get())
    }

    /// Which x86-64 tiers a CPU with these features can run: the AVX2 tier needs AVX2, FMA
    /// and F16C; the AVX-512 tier needs AVX-512F **and** all of those, because its code is
    /// compiled with `avx512f`, which implies them (rustc may emit, and the f16 paths do
    /// emit, AVX2, FMA and F16C instructions there). A virtual CPU can mask F16C or AVX2
    /// while exposing AVX-512F; selecting the AVX-512 tier on AVX-512F alone would then
    /// raise SIGILL.
    pub(crate) const fn tiers_from(avx2_fma: bool, f16c: bool, avx512f: bool) -> (bool, bool) {
        let avx2 = avx2_fma && f16c;
        (avx2, avx2 && avx512f)
    }

    /// F16C (CPUID.1:ECX bit 29), which `cpufeatures` does not name. It needs the same
    /// YMM state as AVX2, which `avx2_fma` has already checked with XGETBV.
    fn f16c() -> bool {
        if cfg!(target_feature = "f16c") {
            return true;
        }
        #[cfg(all(target_arch = "x86_64", not(miri)))]
        {
            // SAFETY: CPUID leaf 1 exists on every x86-64 CPU.
            #[allow(unused_unsafe)]
            let leaf1 = unsafe { core::arch::x86_64::__cpuid(1) };
            leaf1.ecx & (1 << 29) != 0
        }
        #[cfg(not(all(target_arch = "x86_64", not(miri))))]
        {
            false
        }
    }
}

/// Bit set of detected CPU features, computed once: bit 7 = detected, then one bit per
/// feature group.
static FEATURES: AtomicU8 = AtomicU8::new(0);
const DETECTED: u8 = 1 << 7;
pub(crate) const HAS_AVX2: u8 = 1 << 0;
pub(crate) const HAS_AVX512: u8 = 1 << 1;

pub(crate) fn features() -> u8 {
    let f = FEATURES.load(Ordering::Relaxed);
    if f & DETECTED != 0 {
        return f;
    }
    let mut f = DETECTED;
    let (avx2, avx512) = cpuid::detect();
    if avx2 {
        f |= HAS_AVX2;
    }
    if avx512 {
        f |= HAS_AVX512;
    }
    // Every racing thread stores the same value.
    FEATURES.store(f, Ordering::Relaxed);
    f
}
