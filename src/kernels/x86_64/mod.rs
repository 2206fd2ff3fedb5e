//! x86-64 tiers: AVX2 (+ FMA + F16C) and AVX-512F.
//!
//! Each module holds a zero-sized token implementing [`Simd`](super::generic::Simd) with
//! `core::arch` intrinsics, and the `#[target_feature]` boundary functions (`rotate`,
//! `scale`, `add_row`, `alibi_row`) that run the generic kernels with it. The dispatcher (`crate::dispatch`) hands out a module's
//! `KERNELS` only after detecting its features.
//!
//! Miri interprets the generic-SIMD intrinsics used here, but not the f16 conversion
//! instructions `vcvtps2ph` (F16C and AVX-512F) and the 512-bit `vcvtph2ps`. Under
//! `cfg(miri)` those few conversions fall back to `half`, lane by lane (the same rounding);
//! everything else (loads, arithmetic, shuffles, NaN handling, tails) is the code that runs
//! natively.

pub(crate) mod avx2;
pub(crate) mod avx512;
