//! Runtime CPU feature detection and tier selection, without `std`.
//!
//! The best tier the CPU supports is detected once (x86: `cpufeatures`, which also checks
//! that the OS saves the wider registers; aarch64: NEON is baseline) and cached in an
//! atomic, so a call pays one relaxed load and an indirect call. Callers may cap the
//! process-wide tier ([`set_max_tier`]) or force one ([`force_tier`]); a
//! [`Rope`](crate::Rope) may also pin its own tier ([`Rope::with_tier`](crate::Rope::with_tier)),
//! which is what tests and benchmarks use.

use core::sync::atomic::{AtomicU8, Ordering};

use crate::element::Element;
use crate::error::{Operand, RopeError};
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
    // Test-only: a deliberately broken kernel in the portable tier's slot (kernels/mutant.rs).
    #[cfg(rope_broken_tier_demo)]
    if tier == Tier::Portable {
        return Some(&kernels::mutant::KERNELS);
    }
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

/// The roofline baseline of a tier, for benchmarks: `x[i] = round(x[i] * c)` in place,
/// through the tier's own load, widen, round and store path (NaN results canonical), so a
/// rotate kernel can be compared with a memory pass compiled for the same instructions.
/// Not part of the API (re-exported as `rope_kernels::__bench::scale`).
///
/// # Errors
/// [`RopeError::TierUnavailable`] if this build or CPU lacks `tier`.
#[doc(hidden)]
pub fn bench_scale<T: Element>(tier: Tier, x: &mut [T], c: f32) -> Result<(), RopeError> {
    let k = kernels_for(tier).ok_or(RopeError::TierUnavailable)?;
    // SAFETY: the slice is valid for reads and writes of its length; `kernels_for` only
    // returns tables whose tier this CPU supports.
    unsafe { T::scale_fn(k)(x.as_mut_ptr(), x.len(), c) };
    Ok(())
}

/// The shape of a roofline pass ([`bench_roofline_in_place`], [`bench_roofline_copy`]):
/// `rows` rows of `row_len` elements, `stride` elements apart, from the start of the buffer.
/// Not part of the API (`rope_kernels::__bench::RooflineRows`).
#[doc(hidden)]
#[derive(Clone, Copy, Debug)]
pub struct RooflineRows {
    /// Number of rows (e.g. tokens × heads).
    pub rows: usize,
    /// Elements from one row's start to the next (`head_dim` for a dense tensor).
    pub stride: usize,
    /// Elements of each row the pass touches (`rotary_dim` in place; `head_dim` out of place).
    pub row_len: usize,
    /// Prefetch 4 KB ahead, as the rotations do in large calls (x86-64 tiers); benchmarks
    /// take the faster of the passes with and without.
    pub prefetch: bool,
}

impl RooflineRows {
    /// The pass in bytes of `T`, if every row lies in `len` elements and rows do not overlap.
    fn bytes<T>(self, len: usize, operand: Operand) -> Result<kernels::roofline::Rows, RopeError> {
        if self.rows > 1 && self.row_len > self.stride {
            return Err(RopeError::OverlappingStrides { operand });
        }
        let needed = match self.rows {
            0 => 0,
            n => (n - 1)
                .checked_mul(self.stride)
                .and_then(|e| e.checked_add(self.row_len))
                .ok_or(RopeError::StrideOverflow { operand })?,
        };
        if needed > len {
            return Err(RopeError::BufferTooShort { operand, needed, len });
        }
        let size = core::mem::size_of::<T>();
        // In bounds of a buffer, so the byte counts fit.
        Ok(kernels::roofline::Rows {
            rows: self.rows,
            stride: self.stride * size,
            row_bytes: self.row_len * size,
            prefetch: self.prefetch,
        })
    }
}

/// The in-place memory roofline of a tier, for benchmarks (issue 18): every byte of every
/// row of `r` in `x` read and written back unchanged with the tier's widest vectors (`x ^=
/// zero`, `zero` opaque to the compiler: pass `black_box(0)`; any other value is refused).
/// The fastest pass over the bytes an in-place rotation reads and writes.
/// Not part of the API (`rope_kernels::__bench::roofline_in_place`).
///
/// # Errors
/// [`RopeError::TierUnavailable`] if this build or CPU lacks `tier`;
/// [`RopeError::BufferTooShort`], [`RopeError::OverlappingStrides`] or
/// [`RopeError::StrideOverflow`] if the rows do not fit `x`;
/// [`RopeError::InvalidEncodingParameter`] if `zero != 0`.
#[doc(hidden)]
pub fn bench_roofline_in_place<T: Element>(
    tier: Tier,
    x: &mut [T],
    r: RooflineRows,
    zero: u64,
) -> Result<(), RopeError> {
    kernels_for(tier).ok_or(RopeError::TierUnavailable)?;
    if zero != 0 {
        return Err(RopeError::InvalidEncodingParameter { name: "zero", requirement: "must be 0" });
    }
    let rows = r.bytes::<T>(x.len(), Operand::Q)?;
    // SAFETY: every row lies in `x` (checked); `kernels_for` returned the tier's table, so the
    // CPU supports it.
    unsafe { kernels::roofline::pass_in_place(tier, x.as_mut_ptr().cast(), rows, zero) };
    Ok(())
}

/// [`bench_roofline_in_place`] of two BSHD tensors token by token, in one call: for each of
/// `tokens` tokens, the rows `q_rows` of that token of `q`, then those `k_rows` of `k` (the
/// order an in-place BSHD rotation walks them). `q_rows` and `k_rows` give one token's rows;
/// token `t`'s start `t × rows × stride` elements into the buffer. The in-place roofline of
/// a multi-token BSHD rotation, without a call per token.
/// Not part of the API (`rope_kernels::__bench::roofline_in_place_tokens`).
///
/// # Errors
/// As [`bench_roofline_in_place`], for either tensor ([`Operand::Q`], [`Operand::K`]).
#[doc(hidden)]
pub fn bench_roofline_in_place_tokens<T: Element>(
    tier: Tier,
    q: &mut [T],
    q_rows: RooflineRows,
    k: &mut [T],
    k_rows: RooflineRows,
    tokens: usize,
    zero: u64,
) -> Result<(), RopeError> {
    kernels_for(tier).ok_or(RopeError::TierUnavailable)?;
    if zero != 0 {
        return Err(RopeError::InvalidEncodingParameter { name: "zero", requirement: "must be 0" });
    }
    let part = |x: &mut [T], r: RooflineRows, operand| {
        let all = r.rows.checked_mul(tokens).ok_or(RopeError::StrideOverflow { operand })?;
        // Every token's rows lie in `x` when all tokens' rows, taken as one set, do.
        RooflineRows { rows: all, ..r }.bytes::<T>(x.len(), operand)?;
        let rows = r.bytes::<T>(usize::MAX, operand)?;
        let token_stride = rows.rows.checked_mul(rows.stride).ok_or(RopeError::StrideOverflow { operand })?;
        Ok(kernels::roofline::TokenPart { p: x.as_mut_ptr().cast(), token_stride, rows })
    };
    let parts = [part(q, q_rows, Operand::Q)?, part(k, k_rows, Operand::K)?];
    // SAFETY: every token's rows lie in their buffer (checked), two distinct borrows; the CPU
    // supports the tier (as above).
    unsafe { kernels::roofline::pass_in_place_tokens(tier, parts, tokens, zero) };
    Ok(())
}

/// The out-of-place memory roofline of a tier, for benchmarks (issue 18): every row of `r`
/// copied from `src` to the same place in `dst` with the tier's widest vectors, with
/// ordinary or (`streaming`) non-temporal stores (which skip the destination's read for
/// ownership); benchmarks take the faster of the two.
/// Not part of the API (`rope_kernels::__bench::roofline_copy`).
///
/// # Errors
/// [`RopeError::TierUnavailable`] if this build or CPU lacks `tier`;
/// [`RopeError::BufferTooShort`], [`RopeError::OverlappingStrides`] or
/// [`RopeError::StrideOverflow`] if the rows do not fit either buffer.
#[doc(hidden)]
pub fn bench_roofline_copy<T: Element>(
    tier: Tier,
    src: &[T],
    dst: &mut [T],
    r: RooflineRows,
    streaming: bool,
) -> Result<(), RopeError> {
    kernels_for(tier).ok_or(RopeError::TierUnavailable)?;
    let rows = r.bytes::<T>(src.len(), Operand::Q)?;
    r.bytes::<T>(dst.len(), Operand::QOut)?;
    // SAFETY: every row lies in both buffers (checked), which are distinct borrows; the CPU
    // supports the tier (as above).
    unsafe { kernels::roofline::copy(tier, src.as_ptr().cast(), dst.as_mut_ptr().cast(), rows, streaming) };
    Ok(())
}

/// The shape of a convert pass ([`bench_convert`]): `tokens` tokens of `heads` heads of
/// `head_dim` values; source head `h` of token `t` at `t * src_token_stride + h *
/// src_head_stride` elements, destination at `t * dst_token_stride + h * dst_head_stride`
/// units of the destination type (blocks for `q8_0`).
/// Not part of the API (`rope_kernels::__bench::ConvertRows`).
#[doc(hidden)]
#[derive(Clone, Copy, Debug)]
pub struct ConvertRows {
    /// Tokens (one kernel call each).
    pub tokens: usize,
    /// Heads per token.
    pub heads: usize,
    /// Values per head (a multiple of 32 for `q8_0`).
    pub head_dim: usize,
    /// Source elements from one token to the next.
    pub src_token_stride: usize,
    /// Source elements from one head to the next.
    pub src_head_stride: usize,
    /// Destination units from one token to the next.
    pub dst_token_stride: usize,
    /// Destination units from one head to the next.
    pub dst_head_stride: usize,
}

/// The units a lattice of `tokens x heads` rows of `row` units needs, if its rows do not
/// overlap (checked conservatively: each stride covers the rows below it).
fn lattice_extent(
    tokens: usize,
    heads: usize,
    row: usize,
    [token_stride, head_stride]: [usize; 2],
    operand: Operand,
) -> Result<usize, RopeError> {
    if tokens == 0 || heads == 0 {
        return Ok(0);
    }
    let overflow = RopeError::StrideOverflow { operand };
    let token = (heads - 1).checked_mul(head_stride).and_then(|e| e.checked_add(row)).ok_or(overflow)?;
    if (heads > 1 && head_stride < row) || (tokens > 1 && token_stride < token) {
        return Err(RopeError::OverlappingStrides { operand });
    }
    (tokens - 1).checked_mul(token_stride).and_then(|e| e.checked_add(token)).ok_or(overflow)
}

/// The convert kernel of a tier (issue 17), for benchmarks and the tier tests: each token's
/// heads read from `src` as `I`, rotated with the row `cos`/`sin` (`rotary_dim / 2` values;
/// empty: a pure convert) in `layout` and direction `inverse`, and stored in `dst` as `O`
/// with one rounding (or quantized to `q8_0`), one kernel call per token.
/// Not part of the API (`rope_kernels::__bench::convert_rows`).
///
/// # Errors
/// [`RopeError::TierUnavailable`] if this build or CPU lacks `tier`;
/// [`RopeError::TableShape`] if `sin.len() != cos.len()`;
/// [`RopeError::RotaryDimExceedsHeadDim`] / [`RopeError::RotaryDimTooLarge`] for a row
/// too long; [`RopeError::ShapeMismatch`] (`KOut`) if `O` is `q8_0` and `head_dim % 32 != 0`;
/// [`RopeError::BufferTooShort`], [`RopeError::OverlappingStrides`] or
/// [`RopeError::StrideOverflow`] if the heads do not fit (`K`: the source, `KOut`: the
/// destination). Nothing is written then.
#[doc(hidden)]
#[allow(clippy::too_many_arguments)]
pub fn bench_convert<I: Element, O: crate::CacheElement>(
    tier: Tier,
    src: &[I],
    dst: &mut [O],
    r: ConvertRows,
    cos: &[f32],
    sin: &[f32],
    layout: crate::Layout,
    inverse: bool,
) -> Result<(), RopeError> {
    let k = kernels_for(tier).ok_or(RopeError::TierUnavailable)?;
    if sin.len() != cos.len() {
        return Err(RopeError::TableShape);
    }
    let rotary_dim = 2 * cos.len();
    if rotary_dim > crate::MAX_ROTARY_DIM {
        return Err(RopeError::RotaryDimTooLarge { rotary_dim, max: crate::MAX_ROTARY_DIM });
    }
    if rotary_dim > r.head_dim {
        return Err(RopeError::RotaryDimExceedsHeadDim { rotary_dim, head_dim: r.head_dim });
    }
    if !r.head_dim.is_multiple_of(O::ELEMENTS_PER_UNIT) {
        return Err(RopeError::ShapeMismatch { operand: Operand::KOut });
    }
    let units = r.head_dim / O::ELEMENTS_PER_UNIT;
    for (len, row, strides, operand) in [
        (src.len(), r.head_dim, [r.src_token_stride, r.src_head_stride], Operand::K),
        (dst.len(), units, [r.dst_token_stride, r.dst_head_stride], Operand::KOut),
    ] {
        let needed = lattice_extent(r.tokens, r.heads, row, strides, operand)?;
        if needed > len {
            return Err(RopeError::BufferTooShort { operand, needed, len });
        }
    }
    let f = kernels::convert_fn::<I, O>(k);
    for t in 0..r.tokens {
        let a = kernels::ConvertArgs {
            // In bounds: token t's heads lie in the buffers (checked above).
            src: src.as_ptr().wrapping_add(t * r.src_token_stride),
            dst: dst.as_mut_ptr().wrapping_add(t * r.dst_token_stride),
            heads: r.heads,
            src_head_stride: r.src_head_stride,
            dst_head_stride: r.dst_head_stride,
            head_dim: r.head_dim,
            cos,
            sin,
            layout,
            inverse,
        };
        // Checked above: every head of token t lies in its buffer, destination heads do not
        // overlap, `src`/`dst` are distinct borrows, the row fits, head_dim is whole units.
        // SAFETY: as just said; `kernels_for` returned a table whose tier this CPU supports.
        unsafe { f(&a) };
    }
    Ok(())
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
