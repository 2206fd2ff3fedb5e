//! Runtime CPU feature detection and tier selection, without `std`.
//!
//! The best tier the CPU supports is detected once (x86: `cpufeatures`, which also checks
//! that the OS saves the wider registers; aarch64: NEON is baseline) and cached in an
//! atomic, so a call pays one relaxed load and an indirect call. Callers may cap the
//! process-wide tier ([`set_max_tier`]) or force one ([`force_tier`]); a
//! [`Rope`](crate::Rope) may also pin its own tier ([`Rope::with_tier`](crate::Rope::with_tier)),
//! which is what tests and benchmarks use.

use core::sync::atomic::{AtomicU8, Ordering};

use crate::error::RopeError;
use crate::kernels::{self, Kernels};

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

    /// Whether this build has the tier and this CPU can run it.
    pub fn is_available(self) -> bool {
        kernels_for(self).is_some()
    }

    fn from_u8(v: u8) -> Option<Tier> {
        ALL_TIERS.into_iter().find(|t| *t as u8 == v)
    }
}

impl core::fmt::Display for Tier {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(target_arch = "x86_64")]
mod cpuid {
    // `cpufeatures` checks CPUID and that the OS saves the YMM/ZMM state (XGETBV).
    cpufeatures::new!(avx2_fma, "avx2", "fma");
    cpufeatures::new!(avx512, "avx512f");

    /// (AVX2 tier usable, AVX-512 tier usable) on this CPU (see [`tiers_from`]).
    pub(super) fn detect() -> (bool, bool) {
        tiers_from(avx2_fma::get(), f16c(), avx512::get())
    }

    /// Which x86-64 tiers a CPU with these features can run: the AVX2 tier needs AVX2, FMA
    /// and F16C; the AVX-512 tier needs AVX-512F **and** all of those, because its code is
    /// compiled with `avx512f`, which implies them (rustc may emit, and the f16 paths do
    /// emit, AVX2, FMA and F16C instructions there). A virtual CPU can mask F16C or AVX2
    /// while exposing AVX-512F; selecting the AVX-512 tier on AVX-512F alone would then
    /// raise SIGILL.
    pub(super) const fn tiers_from(avx2_fma: bool, f16c: bool, avx512f: bool) -> (bool, bool) {
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
#[cfg(target_arch = "x86_64")]
static FEATURES: AtomicU8 = AtomicU8::new(0);
#[cfg(target_arch = "x86_64")]
const DETECTED: u8 = 1 << 7;
#[cfg(target_arch = "x86_64")]
const HAS_AVX2: u8 = 1 << 0;
#[cfg(target_arch = "x86_64")]
const HAS_AVX512: u8 = 1 << 1;

#[cfg(target_arch = "x86_64")]
fn features() -> u8 {
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

/// The kernel table of `tier`, or `None` if this build or CPU lacks it.
pub(crate) fn kernels_for(tier: Tier) -> Option<&'static Kernels> {
    match tier {
        Tier::Scalar => Some(&kernels::scalar::KERNELS),
        Tier::Portable => portable(),
        Tier::Neon => neon(),
        Tier::Avx2 => avx2(),
        Tier::Avx512 => avx512(),
    }
}

fn portable() -> Option<&'static Kernels> {
    Some(&kernels::portable::KERNELS)
}

fn neon() -> Option<&'static Kernels> {
    // NEON is part of every aarch64 target's baseline (the tier is little-endian only).
    #[cfg(all(target_arch = "aarch64", target_feature = "neon", target_endian = "little"))]
    {
        Some(&kernels::aarch64::neon::KERNELS)
    }
    #[cfg(not(all(target_arch = "aarch64", target_feature = "neon", target_endian = "little")))]
    {
        None
    }
}

fn avx2() -> Option<&'static Kernels> {
    #[cfg(target_arch = "x86_64")]
    if features() & HAS_AVX2 != 0 {
        return Some(&kernels::x86_64::avx2::KERNELS);
    }
    None
}

fn avx512() -> Option<&'static Kernels> {
    #[cfg(target_arch = "x86_64")]
    if features() & HAS_AVX512 != 0 {
        return Some(&kernels::x86_64::avx512::KERNELS);
    }
    None
}

/// The tiers this build can run on this CPU, slowest first (`Scalar` is always there).
pub fn available_tiers() -> impl Iterator<Item = Tier> {
    ALL_TIERS.into_iter().filter(|t| t.is_available())
}

/// The best available tier, optionally no faster than `cap`.
fn best_tier(cap: Option<Tier>) -> Tier {
    available_tiers().filter(|t| cap.is_none_or(|c| *t <= c)).last().unwrap_or(Tier::Scalar)
}

/// 0: not chosen yet; otherwise a `Tier as u8`.
static ACTIVE: AtomicU8 = AtomicU8::new(0);

/// The kernels the process-wide dispatcher uses.
#[inline]
pub(crate) fn active_kernels() -> &'static Kernels {
    let t = Tier::from_u8(ACTIVE.load(Ordering::Relaxed)).unwrap_or_else(|| {
        let t = best_tier(None);
        // Every racing thread stores the same value.
        ACTIVE.store(t as u8, Ordering::Relaxed);
        t
    });
    kernels_for(t).unwrap_or(&kernels::scalar::KERNELS)
}

/// The tier the process-wide dispatcher uses now.
pub fn active_tier() -> Tier {
    active_kernels().tier
}

/// Makes the dispatcher use `tier`.
///
/// ```
/// use rope_kernels::dispatch::{self, ALL_TIERS};
/// use rope_kernels::{RopeError, Tier};
///
/// dispatch::force_tier(Tier::Scalar)?;
/// assert_eq!(dispatch::active_tier(), Tier::Scalar);
/// // NEON and AVX2 never coexist, so one tier is always missing.
/// let missing = ALL_TIERS.into_iter().find(|t| !t.is_available()).unwrap();
/// assert_eq!(dispatch::force_tier(missing), Err(RopeError::TierUnavailable));
/// assert_eq!(dispatch::active_tier(), Tier::Scalar);
/// dispatch::reset_tier();
/// # Ok::<(), RopeError>(())
/// ```
///
/// # Errors
/// [`RopeError::TierUnavailable`] if this build or CPU lacks it (nothing changes then).
pub fn force_tier(tier: Tier) -> Result<(), RopeError> {
    if !tier.is_available() {
        return Err(RopeError::TierUnavailable);
    }
    ACTIVE.store(tier as u8, Ordering::Relaxed);
    Ok(())
}

/// Makes the dispatcher use the best available tier no faster than `cap`.
/// Returns the tier chosen (`Scalar` is always available).
///
/// ```
/// use rope_kernels::dispatch;
/// use rope_kernels::Tier;
///
/// assert_eq!(dispatch::set_max_tier(Tier::Scalar), Tier::Scalar);
/// assert_eq!(dispatch::active_tier(), Tier::Scalar);
/// let best = dispatch::reset_tier();
/// assert_eq!(Some(best), dispatch::available_tiers().last());
/// ```
pub fn set_max_tier(cap: Tier) -> Tier {
    let t = best_tier(Some(cap));
    ACTIVE.store(t as u8, Ordering::Relaxed);
    t
}

/// Returns the dispatcher to the best tier of this CPU, and returns it.
pub fn reset_tier() -> Tier {
    let t = best_tier(None);
    ACTIVE.store(t as u8, Ordering::Relaxed);
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every table the dispatcher hands out is the table of the tier it was asked for, so
    /// `Rope::tier` and `active_tier` (which read `Kernels::tier`) name the code that runs.
    #[test]
    fn tables_match_their_tiers() {
        for t in ALL_TIERS {
            if let Some(k) = kernels_for(t) {
                assert_eq!(k.tier, t);
            }
        }
        assert!(kernels_for(Tier::Scalar).is_some() && kernels_for(Tier::Portable).is_some());
    }

    /// The AVX-512 tier is chosen only with every feature its code is compiled for (issue
    /// 16: on AVX-512F alone, a virtual CPU with F16C masked got SIGILL).
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn avx512_tier_needs_avx2_fma_f16c() {
        use super::cpuid::tiers_from;
        // (avx2+fma, f16c, avx512f) -> (avx2 tier, avx512 tier)
        assert_eq!(tiers_from(true, true, true), (true, true));
        assert_eq!(tiers_from(true, true, false), (true, false));
        assert_eq!(tiers_from(true, false, true), (false, false), "F16C masked");
        assert_eq!(tiers_from(false, true, true), (false, false), "AVX2 or FMA masked");
        assert_eq!(tiers_from(false, false, false), (false, false));
        // What this CPU reports agrees with the rule.
        let (avx2, avx512) = super::cpuid::detect();
        assert!(!avx512 || avx2);
        assert_eq!(Tier::Avx512.is_available(), avx512);
    }
}
