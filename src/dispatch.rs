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

pub use crate::kernels::tier::{Tier, ALL_TIERS};

impl Tier {
    /// Whether this build has the tier and this CPU can run it.
    pub fn is_available(self) -> bool {
        kernels_for(self).is_some()
    }
}

/// The tier whose discriminant is `v`.
fn tier_from_u8(v: u8) -> Option<Tier> {
    ALL_TIERS.into_iter().find(|t| *t as u8 == v)
}

/// The kernel table of `tier`, or `None` if this build or CPU lacks it: each tier module's
/// `get()` checks its own features.
pub(crate) fn kernels_for(tier: Tier) -> Option<&'static Kernels> {
    match tier {
        Tier::Scalar => kernels::scalar::get(),
        Tier::Portable => kernels::portable::get(),
        #[cfg(all(target_arch = "aarch64", target_endian = "little"))]
        Tier::Neon => kernels::aarch64::neon::get(),
        #[cfg(target_arch = "x86_64")]
        Tier::Avx2 => kernels::x86_64::avx2::get(),
        #[cfg(target_arch = "x86_64")]
        Tier::Avx512 => kernels::x86_64::avx512::get(),
        #[allow(unreachable_patterns)]
        _ => None,
    }
}

/// The fastest table this build and CPU have: the first tier, fastest first, whose `get()`
/// finds its features.
fn best_kernels() -> &'static Kernels {
    let best = None;
    #[cfg(target_arch = "x86_64")]
    let best = best.or_else(kernels::x86_64::avx512::get).or_else(kernels::x86_64::avx2::get);
    #[cfg(all(target_arch = "aarch64", target_endian = "little"))]
    let best = best.or_else(kernels::aarch64::neon::get);
    best.or_else(kernels::portable::get).unwrap_or(&kernels::scalar::KERNELS)
}

/// The tiers this build can run on this CPU, slowest first (`Scalar` is always there).
pub fn available_tiers() -> impl Iterator<Item = Tier> {
    ALL_TIERS.into_iter().filter(|t| t.is_available())
}

/// The best available tier, optionally no faster than `cap`.
fn best_tier(cap: Option<Tier>) -> Tier {
    match cap {
        None => best_kernels().tier,
        Some(c) => available_tiers().filter(|t| *t <= c).last().unwrap_or(Tier::Scalar),
    }
}

/// 0: not chosen yet; otherwise a `Tier as u8`.
static ACTIVE: AtomicU8 = AtomicU8::new(0);

/// The kernels the process-wide dispatcher uses.
#[inline]
pub(crate) fn active_kernels() -> &'static Kernels {
    let t = tier_from_u8(ACTIVE.load(Ordering::Relaxed)).unwrap_or_else(|| {
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
        // The chain of `get()`s picks the fastest available tier.
        assert_eq!(Some(best_kernels().tier), available_tiers().last());
    }

    /// The AVX-512 tier is chosen only with every feature its code is compiled for (issue
    /// 16: on AVX-512F alone, a virtual CPU with F16C masked got SIGILL).
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn avx512_tier_needs_avx2_fma_f16c() {
        use crate::kernels::x86_64::cpuid::tiers_from;
        // (avx2+fma, f16c, avx512f) -> (avx2 tier, avx512 tier)
        assert_eq!(tiers_from(true, true, true), (true, true));
        assert_eq!(tiers_from(true, true, false), (true, false));
        assert_eq!(tiers_from(true, false, true), (false, false), "F16C masked");
        assert_eq!(tiers_from(false, true, true), (false, false), "AVX2 or FMA masked");
        assert_eq!(tiers_from(false, false, false), (false, false));
        // What this CPU reports agrees with the rule.
        let (avx2, avx512) = crate::kernels::x86_64::cpuid::detect();
        assert!(!avx512 || avx2);
        assert_eq!(Tier::Avx512.is_available(), avx512);
    }
}
