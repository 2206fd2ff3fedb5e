//! The process-wide implementation tier: which are available, which is in use, and
//! forcing or capping it (for tests and benchmarks). Every tier gives bit-identical
//! output; only the speed differs.

use rope_kernels::dispatch::{self, ALL_TIERS};
use rope_kernels::Tier;

use crate::boundary::{guard, required, rust, R};
use crate::status::*;

/// An implementation tier. The values are the Rust `Tier` discriminants; a bit mask of
/// tiers (`rope_tiers_available`) has bit `1 << tier` set for each.
pub type rope_tier = u32;
/// Plain Rust, no target features: the oracle.
pub const ROPE_TIER_SCALAR: rope_tier = 1;
/// The `wide` crate compiled for the build's baseline (SSE2, NEON, wasm simd128).
pub const ROPE_TIER_PORTABLE: rope_tier = 2;
/// aarch64 NEON intrinsics.
pub const ROPE_TIER_NEON: rope_tier = 3;
/// x86-64 AVX2 + FMA + F16C intrinsics.
pub const ROPE_TIER_AVX2: rope_tier = 4;
/// x86-64 AVX-512F intrinsics.
pub const ROPE_TIER_AVX512: rope_tier = 5;

fn tier(v: rope_tier) -> R<Tier> {
    ALL_TIERS.into_iter().find(|t| *t as rope_tier == v).ok_or(ROPE_UNKNOWN_ENUM)
}

/// Writes `v` to an optional out-parameter.
///
/// # Safety
/// `out` is NULL or writable.
unsafe fn put(out: *mut rope_tier, v: Tier) -> R<()> {
    if !out.is_null() {
        let p = required(out)?;
        // SAFETY: non-NULL, aligned (checked), writable (the contract).
        unsafe { p.as_ptr().write(v as rope_tier) };
    }
    Ok(())
}

/// `*mask` = the tiers this build can run on this CPU, bit `1 << tier` each
/// (`ROPE_TIER_SCALAR` is always there).
///
/// Errors: `ROPE_NULL_POINTER`, `ROPE_MISALIGNED_POINTER`.
///
/// # Safety
/// `mask` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn rope_tiers_available(mask: *mut u32) -> rope_status {
    guard(|| {
        let p = required(mask)?;
        let m = dispatch::available_tiers().fold(0u32, |m, t| m | 1 << (t as u32));
        // SAFETY: non-NULL, aligned, writable (the contract).
        unsafe { p.as_ptr().write(m) };
        Ok(())
    })
}

/// `*tier` = the tier the process-wide dispatcher uses now.
///
/// Errors: `ROPE_NULL_POINTER`, `ROPE_MISALIGNED_POINTER`.
///
/// # Safety
/// `tier` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn rope_tier_active(tier: *mut rope_tier) -> rope_status {
    guard(|| {
        required(tier)?;
        // SAFETY: the caller's contract.
        unsafe { put(tier, dispatch::active_tier()) }
    })
}

/// Makes every later call of the process use `tier`.
///
/// Errors (nothing changes): `ROPE_UNKNOWN_ENUM`, `ROPE_TIER_UNAVAILABLE`.
#[no_mangle]
pub extern "C" fn rope_tier_force(tier: rope_tier) -> rope_status {
    guard(|| rust(dispatch::force_tier(self::tier(tier)?)))
}

/// Makes the process use the best available tier no faster than `cap` (always possible:
/// `ROPE_TIER_SCALAR` is always available); `*chosen` (may be NULL) receives it.
///
/// Errors (nothing changes): `ROPE_UNKNOWN_ENUM`, `ROPE_MISALIGNED_POINTER`.
///
/// # Safety
/// `chosen` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn rope_tier_cap(cap: rope_tier, chosen: *mut rope_tier) -> rope_status {
    guard(|| {
        let cap = tier(cap)?;
        if !chosen.is_null() {
            required(chosen)?;
        }
        // SAFETY: the caller's contract.
        unsafe { put(chosen, dispatch::set_max_tier(cap)) }
    })
}

/// Returns the process to the best tier of this CPU; `*chosen` (may be NULL) receives it.
///
/// Errors (nothing changes): `ROPE_MISALIGNED_POINTER`.
///
/// # Safety
/// `chosen` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn rope_tier_reset(chosen: *mut rope_tier) -> rope_status {
    guard(|| {
        if !chosen.is_null() {
            required(chosen)?;
        }
        // SAFETY: the caller's contract.
        unsafe { put(chosen, dispatch::reset_tier()) }
    })
}

/// The tier's name (`"scalar"`, `"portable"`, `"neon"`, `"avx2"`, `"avx512"`), a static
/// NUL-terminated string; `"unknown"` for a value that is no tier.
#[no_mangle]
pub extern "C" fn rope_tier_name(tier: rope_tier) -> *const core::ffi::c_char {
    let name: &'static str = match self::tier(tier) {
        Ok(Tier::Scalar) => "scalar\0",
        Ok(Tier::Portable) => "portable\0",
        Ok(Tier::Neon) => "neon\0",
        Ok(Tier::Avx2) => "avx2\0",
        Ok(Tier::Avx512) => "avx512\0",
        _ => "unknown\0",
    };
    name.as_ptr().cast()
}
