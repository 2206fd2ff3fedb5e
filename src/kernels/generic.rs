//! The rotate algorithm, written once over a small vector trait and instantiated per tier.
//!
//! A tier supplies a zero-sized token implementing [`Simd`] (its f32 vector type and a dozen
//! operations, all `#[inline(always)]`); its `#[target_feature]` boundary functions call
//! [`rotate`] and [`scale`] with that token, so the whole algorithm inlines into code
//! compiled for the tier. This is the layout of memchr's `arch/generic` and of pulp.
//!
//! # Operation order (bit-identity with the scalar oracle)
//! Every lane computes exactly what [`scalar::rotate_pair`](super::scalar::rotate_pair)
//! computes, without fusing:
//! - `HalfSplit`: `y0 = (x0 * c) - (x1 * s')`, `y1 = (x1 * c) + (x0 * s')` with `s' = s`
//!   forward and `s' = -s` inverse. `a - (b * -s) == a + (b * s)` and
//!   `a + (b * -s) == a - (b * s)` bit for bit (IEEE 754 defines `a - b` as `a + (-b)`,
//!   and rounding to nearest is symmetric), so the inverse is the oracle's inverse.
//! - `Interleaved`: `y = (x * cc) + (swap(x) * ss)` with `cc = [c0 c0 c1 c1 ..]` and
//!   `ss = [-s0 s0 -s1 s1 ..]` (forward) or `[s0 -s0 ..]` (inverse), built once per call:
//!   lane `2i` is `(x0 * c) + (x1 * -s) == (x0 * c) - (x1 * s)`, lane `2i + 1` is
//!   `(x1 * c) + (x0 * s)`.
//!
//! - bf16, both layouts: a pair of adjacent bf16 is one 32-bit word, so
//!   [`Simd::load_bf16_pairs`] widens its two elements with a shift and a mask (no shuffle)
//!   and the lanes compute the `HalfSplit` formula above; for `HalfSplit` the adjacent
//!   elements are two different pairs, with their row entries split into even and odd once
//!   per call.
//!
//! Each result is then rounded once to the element type with NaN lanes replaced by the
//! canonical NaN first (for `f16`/`bf16` the canonical f32 NaN rounds to the canonical NaN
//! of the type), exactly as [`Element::from_f32`](crate::Element::from_f32) does. The NaN
//! replacement is a branch taken only when one of two result vectors holds a NaN
//! ([`Simd::any_nan`]), so clean data pays one compare per two vectors.
//!
//! # Tails and prefetch
//! Work that does not fill a vector (`rotary_dim / 2` not a multiple of the lane count) is
//! done by one more vector that ends at the end of the head and overlaps the last whole one
//! (issue 18: no tail cliff). It is loaded and rotated before the head's first store, so in
//! place it reads only unmodified elements, and stored last: the shared lanes get the same
//! values twice (same inputs, same operations). Only a head shorter than one vector
//! ([`pads`]; the AVX-512 tier runs those on the AVX2 width, AVX2 on 4 lanes) is rotated pair
//! by pair with the oracle's own formula ([`scalar::rotate_pair`](super::scalar::rotate_pair)),
//! the same bits by definition. Each head loop
//! prefetches the head about [`PREFETCH_BYTES`] ahead ([`Simd::prefetch`]; a no-op where a
//! tier has none), which keeps long, memory-bound calls streaming.

use core::mem::MaybeUninit;
use core::ptr;

use half::{bf16, f16};

use super::scalar::rotate_pair;
use super::RotateArgs;
use crate::kernels::element::Element;
use crate::kernels::shape::{PairLayout, MAX_PAIRS, MAX_ROTARY_DIM};

/// Runs `$body` with the const `$nv` bound to `$n` when `$n` is 1 to 8 (the heads the
/// kernels unroll: that many whole vectors of `HalfSplit` pairs, [`half_split_whole`], or
/// steps of two vectors of `Interleaved` elements, [`interleaved_whole`]) and is true then;
/// false for any other `$n`, without running it.
macro_rules! whole_vectors {
    ($n:expr, $nv:ident => $body:expr) => {
        whole_vectors!(@arms $n, $nv => $body; 1 2 3 4 5 6 7 8)
    };
    (@arms $n:expr, $nv:ident => $body:expr; $($k:literal)+) => {
        match $n {
            $($k => {
                const $nv: usize = $k;
                $body;
                true
            })+
            _ => false,
        }
    };
}

pub(crate) mod convert;
mod half_split;
mod interleaved;
pub(crate) mod qknorm;
pub(crate) mod rows;
#[cfg(feature = "bench-internals")]
mod scale;

use half_split::*;
use interleaved::*;
#[cfg(feature = "bench-internals")]
pub(crate) use scale::scale;
#[cfg(feature = "bench-internals")]
use scale::scale_generic;

/// The most f32 lanes of any tier's vector of this target (AVX-512: 16; 4 elsewhere), the
/// size of the tail buffers ([`Pad`]): small on microcontrollers (issue 13).
pub(crate) const MAX_LANES: usize = if cfg!(target_arch = "x86_64") { 16 } else { 4 };

/// `0.49999997` (`0.5 - 2^-25`, the f32 just below one half): see
/// [`Simd::store_round_i8`].
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
pub(crate) const HALF_BELOW: f32 = f32::from_bits(0x3EFF_FFFF);

/// A tier's f32 vector and the operations the kernels need.
///
/// Implemented by zero-sized tokens whose existence proves the CPU supports the tier, so
/// the operations are safe to call with such a token. Every method must be
/// `#[inline(always)]` so that it inlines into the tier's `#[target_feature]` boundary.
pub(crate) trait Simd: Copy {
    /// f32 lanes per vector; even, at most [`MAX_LANES`].
    const LANES: usize;
    /// The vector type.
    type V: Copy;

    /// Every lane `x`.
    fn splat(self, x: f32) -> Self::V;
    /// Loads `LANES` f32 from `p` (no alignment needed).
    ///
    /// # Safety
    /// `p .. p + LANES` is valid for reads.
    unsafe fn load(self, p: *const f32) -> Self::V;
    /// Stores `LANES` f32 at `p` as they are (no NaN canonicalisation).
    ///
    /// # Safety
    /// `p .. p + LANES` is valid for writes.
    unsafe fn store(self, p: *mut f32, v: Self::V);
    /// Lane-wise `a + b`, rounded to nearest even.
    fn add(self, a: Self::V, b: Self::V) -> Self::V;
    /// Lane-wise `a - b`.
    fn sub(self, a: Self::V, b: Self::V) -> Self::V;
    /// Lane-wise `a * b` (never fused with a later add).
    fn mul(self, a: Self::V, b: Self::V) -> Self::V;
    /// Lane-wise bitwise xor (sign flips).
    fn xor(self, a: Self::V, b: Self::V) -> Self::V;
    /// Lane-wise `|a|`: the sign bit cleared (exact, like `f32::abs`).
    fn abs(self, a: Self::V) -> Self::V;
    /// `[v1 v0 v3 v2 ..]`: swaps the two lanes of every pair.
    fn swap_pairs(self, v: Self::V) -> Self::V;
    /// Interleaves `a` and `b`: `([a0 b0 a1 b1 ..], [a(L/2) b(L/2) ..])`, the two halves in
    /// memory order.
    fn zip(self, a: Self::V, b: Self::V) -> (Self::V, Self::V);
    /// Whether any lane of `a` or `b` is NaN (checked before every store, so it must be
    /// cheap; the rare `true` takes the [`Simd::canonicalize_nan`] path).
    fn any_nan(self, a: Self::V, b: Self::V) -> bool;
    /// Replaces NaN lanes with the canonical f32 NaN `0x7FC0_0000`.
    fn canonicalize_nan(self, v: Self::V) -> Self::V;
    /// Loads `LANES` f16 and widens them exactly.
    ///
    /// # Safety
    /// `p .. p + LANES` is valid for reads.
    unsafe fn load_f16(self, p: *const f16) -> Self::V;
    /// Rounds to f16 (nearest, ties to even, subnormals kept) and stores `LANES` values.
    /// `v` has no NaN but the canonical one.
    ///
    /// # Safety
    /// `p .. p + LANES` is valid for writes.
    unsafe fn store_f16(self, p: *mut f16, v: Self::V);
    /// Loads `LANES` bf16 and widens them (a 16-bit shift).
    ///
    /// # Safety
    /// `p .. p + LANES` is valid for reads.
    unsafe fn load_bf16(self, p: *const bf16) -> Self::V;
    /// Rounds to bf16 (nearest, ties to even) and stores `LANES` values. `v` has no NaN but
    /// the canonical one. Every tier uses the integer rounding `(bits + 0x7FFF + lsb) >> 16`
    /// with `lsb = (bits >> 16) & 1`: for any non-NaN input it equals
    /// `half::bf16::from_f32` (overflow rounds to infinity, subnormals stay exact), and it
    /// maps the canonical f32 NaN `0x7FC0_0000` to the canonical bf16 NaN `0x7FC0`.
    ///
    /// # Safety
    /// `p .. p + LANES` is valid for writes.
    unsafe fn store_bf16(self, p: *mut bf16, v: Self::V);
    /// [`Simd::store_bf16`] of `v0` at `p` and of `v1` at `p + LANES` (the same bits), which
    /// a tier may do in one store (AVX2: one pack and one 32-byte store instead of two
    /// extract-and-pack 16-byte ones). Both have no NaN but the canonical one.
    ///
    /// # Safety
    /// `p .. p + 2 * LANES` is valid for writes.
    #[inline(always)]
    unsafe fn store_bf16_run2(self, p: *mut bf16, v0: Self::V, v1: Self::V) {
        // SAFETY: forwarded from the caller.
        unsafe {
            self.store_bf16(p, v0);
            self.store_bf16(p.add(Self::LANES), v1);
        }
    }
    /// Loads `LANES` interleaved bf16 pairs (`2 * LANES` elements) and widens them to
    /// `(x0, x1)`. A pair is the 32-bit word `x1 << 16 | x0`, so `x0 = word << 16` and
    /// `x1 = word & 0xFFFF_0000`: no shuffle. The x86-64 and NEON tiers (little-endian
    /// only) load that word as one `u32`; the portable tier, which also runs on big-endian
    /// targets, builds it from the two elements.
    ///
    /// # Safety
    /// `p .. p + 2 * LANES` is valid for reads.
    unsafe fn load_bf16_pairs(self, p: *const bf16) -> (Self::V, Self::V);
    /// Rounds `y0`, `y1` to bf16 as [`Simd::store_bf16`] does and stores them as `LANES`
    /// interleaved pairs: `(round(y0) >> 16) | (round(y1) & 0xFFFF_0000)` per word.
    ///
    /// # Safety
    /// `p .. p + 2 * LANES` is valid for writes.
    unsafe fn store_bf16_pairs(self, p: *mut bf16, y0: Self::V, y1: Self::V);
    /// `v` rounded to bf16 as [`Simd::store_bf16`] rounds it (NaN lanes first replaced by
    /// the canonical NaN) and widened back: the bits that storing and reloading give, kept
    /// in registers.
    fn round_bf16_f32(self, v: Self::V) -> Self::V;
    /// [`Simd::round_bf16_f32`] without the NaN canonicalisation, for a `v` whose NaN lanes
    /// (if any) have their low 16 bits clear: such a NaN rounds to itself (a larger
    /// payload could carry into the sign and round to zero).
    fn round_bf16_f32_quiet(self, v: Self::V) -> Self::V;
    /// Lane-wise maximum of two vectors of `|x|` values (sign bits clear), compared as
    /// integers: for such bit patterns the integer order is the float order, with `+inf`
    /// above every finite value and every NaN above `+inf` (the `q8_0` block maximum, which
    /// so also tells whether a block holds a non-finite value).
    fn max_abs(self, a: Self::V, b: Self::V) -> Self::V;
    /// The largest lane of a vector of `|x|` values, in the order of [`Simd::max_abs`]. The
    /// default goes through a stack buffer.
    #[inline(always)]
    fn reduce_max_abs(self, v: Self::V) -> f32 {
        let mut b = [0.0f32; MAX_LANES];
        // SAFETY: the local buffer holds a full vector.
        unsafe { self.store(b.as_mut_ptr(), v) };
        f32::from_bits(b[..Self::LANES].iter().fold(0, |m, x| m.max(x.to_bits())))
    }
    /// Rounds `LANES` lanes half away from zero (C's `roundf`) and stores them as `i8`;
    /// every lane is finite with `|q| < 127.5`. Every tier computes it exactly so:
    /// `i = trunc(q)` (an integer), `f = q - i` (exact), `r = i + trunc(f + f)` (`f + f`
    /// exact, its truncation -1, 0 or 1: `|f| >= 0.5`), packed to bytes; or (the x86-64
    /// tiers, 3 operations instead of 6) `trunc(q + copysign(HALF_BELOW, q))`, which gives
    /// the same integer for every f32 with `|q| < 127.5` (checked exhaustively over
    /// all such bit patterns against [`round_q8`](crate::kernels::q8_0::round_q8); the sum
    /// is within half an ulp of the next integer exactly when `|f| >= 0.5`).
    ///
    /// # Safety
    /// `p .. p + LANES` is valid for writes.
    unsafe fn store_round_i8(self, p: *mut i8, q: Self::V);
    /// One f32 rounded to f16 as [`Simd::store_f16`] rounds it (`x` is not NaN); the
    /// default stores a splat through a stack buffer.
    #[inline(always)]
    fn f16_of(self, x: f32) -> f16 {
        let mut b = [f16::ZERO; MAX_LANES];
        // SAFETY: the local buffer holds a full vector of f16.
        unsafe { self.store_f16(b.as_mut_ptr(), self.splat(x)) };
        b[0]
    }
    /// The pairwise tree over the lanes of `v`: `v[j] += v[j + w]` for `j < w`, with
    /// `w = LANES / 2, .., 2, 1` (each add `v[j] + v[j + w]`, rounded to nearest even), and
    /// the result `v[0]`: the last steps of the norm's fixed reduction order
    /// (`kernels/generic/qknorm.rs`). The default goes through a stack buffer; the x86-64
    /// tiers keep it in registers.
    #[inline(always)]
    fn tree_lanes(self, v: Self::V) -> f32 {
        let mut b = [0.0f32; MAX_LANES];
        // SAFETY: the local buffer holds a full vector.
        unsafe { self.store(b.as_mut_ptr(), v) };
        let mut w = Self::LANES / 2;
        while w > 0 {
            for j in 0..w {
                b[j] += b[j + w];
            }
            w /= 2;
        }
        b[0]
    }
    /// Hints that the cache line holding `p` will be read soon. Never faults (any address
    /// is allowed); the default does nothing.
    #[inline(always)]
    fn prefetch(self, p: *const u8) {
        let _ = p;
    }
}

/// Prefetches every 64-byte line of a head of `bytes` rotated bytes at `p` (a head a few
/// heads ahead; may be past the buffer), if `on` ([`RotateArgs::prefetch`]: the call is
/// too large to be cache-resident; for a decode-sized call the prefetches are pure cost). On the development machine (Xeon, AVX-512), for
/// the long shape (4096 tokens × 32 heads × 128 f32, 64 MB, in place) this with
/// [`PREFETCH_BYTES`] = 4096 took the half-split call from about 0.70 to about 0.85 of the
/// `x *= c` roofline, against prefetching two lines of the head 1 KB ahead; decode-sized
/// (cache-resident) calls did not change measurably.
#[inline(always)]
fn prefetch_range<S: Simd>(s: S, on: bool, p: *const u8, bytes: usize) {
    if !on {
        return;
    }
    let mut o = 0;
    while o < bytes {
        s.prefetch(p.wrapping_add(o));
        o += 64;
    }
}

/// Prefetches `bytes` of head `h + ahead` of `a` when the call streams (`a.prefetch`).
/// Wrapping: past the call's heads it is only a hint.
#[inline(always)]
fn prefetch_head<S: Simd, T>(s: S, a: &RotateArgs<'_, T>, h: usize, ahead: usize, bytes: usize) {
    let p = a.src.wrapping_add(h.wrapping_add(ahead).wrapping_mul(a.src_head_stride));
    prefetch_range(s, a.prefetch, p.cast(), bytes);
}

/// How far ahead the kernels prefetch: the head at least this many bytes of rotated
/// elements ahead (eight heads of 128 f32), and at least the next head. 2 KB was slower on
/// the long shape; 8 KB and 16 KB were no faster.
const PREFETCH_BYTES: usize = 4096;

/// The number of heads to prefetch ahead when a head's rotated part is `bytes` long.
#[inline(always)]
fn heads_ahead(bytes: usize) -> usize {
    PREFETCH_BYTES.div_ceil(bytes.max(1))
}
/// How far ahead the roofline prefetches (as far as the rotations).
#[cfg(feature = "bench-internals")]
const SCALE_PREFETCH_BYTES: usize = PREFETCH_BYTES;

/// An element type as the vector kernels load and store it.
pub(crate) trait SimdElement: Element {
    /// Loads `S::LANES` elements widened to f32.
    ///
    /// # Safety
    /// `p .. p + S::LANES` is valid for reads.
    unsafe fn load<S: Simd>(s: S, p: *const Self) -> S::V;
    /// Rounds `S::LANES` values once to `Self` and stores them; `v` holds no NaN but the
    /// canonical one.
    ///
    /// # Safety
    /// `p .. p + S::LANES` is valid for writes.
    unsafe fn store_canonical<S: Simd>(s: S, p: *mut Self, v: S::V);

    /// Whether this is bf16, whose kernels may take the 32-bit word paths
    /// ([`Simd::load_bf16_pairs`]) through a pointer cast: its `Interleaved` kernel works on
    /// whole pairs per lane (a pair is one 32-bit word), so a vector holds `LANES` pairs
    /// rather than `LANES / 2` (read by the x86-64 tiers' short-head rule, [`pads`]).
    const PAIRED_WORDS: bool = false;

    /// Whether this is f32: [`SimdElement::round`] is the identity, so a value kept in
    /// registers costs nothing to round (the Llama 4 fused path, `rope_norm_whole` in
    /// `generic/qknorm.rs`, is taken only then: for f16 and bf16 it measured slower than the
    /// rotate and norm kernels through a scratch buffer).
    const F32: bool = false;

    /// Rounds `S::LANES` values once to `Self` (NaN → canonical NaN) and stores them.
    ///
    /// # Safety
    /// `p .. p + S::LANES` is valid for writes.
    #[inline(always)]
    unsafe fn store<S: Simd>(s: S, p: *mut Self, v: S::V) {
        let v = if s.any_nan(v, v) { s.canonicalize_nan(v) } else { v };
        // SAFETY: forwarded from the caller; `v` is canonical.
        unsafe { Self::store_canonical(s, p, v) }
    }

    /// Whether the portable tier's 4-lane vectors convert this type in vectors (f32, bf16;
    /// f16 is converted lane by lane there), so that the x86-64 tiers can run heads shorter
    /// than their own vectors on them ([`pads`]) instead of through padded copies.
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    const PORTABLE_VECTORS: bool = true;

    /// Rotates `a` (an `Interleaved` call) if this type has a faster path than the
    /// generic expanded-row one, and says whether it did.
    ///
    /// # Safety
    /// As [`rotate`]; `s` proves its tier.
    #[inline(always)]
    unsafe fn interleaved_special<S: Simd>(s: S, a: &RotateArgs<'_, Self>) -> bool {
        let _ = (s, a);
        false
    }

    /// Runs [`scale`] if this type has a faster path than the generic one, and says whether
    /// it did (the roofline must use the fastest load/store path the rotations use).
    ///
    /// # Safety
    /// As [`scale`].
    #[cfg(feature = "bench-internals")]
    #[inline(always)]
    unsafe fn scale_special<S: Simd>(s: S, x: *mut Self, len: usize, c: f32) -> bool {
        let _ = (s, x, len, c);
        false
    }

    /// Like [`SimdElement::interleaved_special`], for `HalfSplit` (`INVERSE == a.inverse`).
    ///
    /// # Safety
    /// As [`rotate`]; `s` proves its tier.
    #[inline(always)]
    unsafe fn half_split_special<S: Simd, const INVERSE: bool>(s: S, a: &RotateArgs<'_, Self>) -> bool {
        let _ = (s, a);
        false
    }

    /// `v` rounded to `Self` (NaN → canonical NaN) and widened back, as [`SimdElement::store`]
    /// then [`SimdElement::load`] would give; the default goes through a stack buffer.
    #[inline(always)]
    fn round<S: Simd>(s: S, v: S::V) -> S::V {
        let mut b = [Self::default(); MAX_LANES];
        // SAFETY: the local buffer holds a full vector.
        unsafe {
            Self::store(s, b.as_mut_ptr(), v);
            Self::load(s, b.as_ptr())
        }
    }

    /// [`SimdElement::round`] of a `v` whose NaN lanes have their low 16 bits clear; it
    /// may leave such a NaN as it is instead of making it canonical.
    #[inline(always)]
    fn round_quiet<S: Simd>(s: S, v: S::V) -> S::V {
        Self::round(s, v)
    }

    /// [`SimdElement::store`] of two vectors, with one NaN check for both.
    ///
    /// # Safety
    /// `p0 .. p0 + S::LANES` and `p1 .. p1 + S::LANES` are valid for writes.
    #[inline(always)]
    unsafe fn store2<S: Simd>(s: S, [p0, p1]: [*mut Self; 2], [v0, v1]: [S::V; 2]) {
        let (v0, v1) =
            if s.any_nan(v0, v1) { (s.canonicalize_nan(v0), s.canonicalize_nan(v1)) } else { (v0, v1) };
        // SAFETY: forwarded from the caller; both vectors are canonical.
        unsafe {
            Self::store_canonical(s, p0, v0);
            Self::store_canonical(s, p1, v1);
        }
    }

    /// [`SimdElement::store2`] to `p` and `p + S::LANES` (one run of `2 * S::LANES`
    /// elements; the same bits), through the tier's one-store path where it has one
    /// ([`Simd::store_bf16_run2`]).
    ///
    /// # Safety
    /// `p .. p + 2 * S::LANES` is valid for writes.
    #[inline(always)]
    unsafe fn store_run2<S: Simd>(s: S, p: *mut Self, v: [S::V; 2]) {
        // SAFETY: forwarded from the caller.
        unsafe { Self::store2(s, [p, p.add(S::LANES)], v) }
    }
}

impl SimdElement for f32 {
    const F32: bool = true;
    #[inline(always)]
    unsafe fn load<S: Simd>(s: S, p: *const Self) -> S::V {
        // SAFETY: forwarded from the caller.
        unsafe { s.load(p) }
    }
    #[inline(always)]
    unsafe fn store_canonical<S: Simd>(s: S, p: *mut Self, v: S::V) {
        // SAFETY: forwarded from the caller.
        unsafe { s.store(p, v) }
    }
    #[inline(always)]
    fn round<S: Simd>(_: S, v: S::V) -> S::V {
        v
    }
}

impl SimdElement for f16 {
    const PORTABLE_VECTORS: bool = false;
    #[inline(always)]
    unsafe fn load<S: Simd>(s: S, p: *const Self) -> S::V {
        // SAFETY: forwarded from the caller.
        unsafe { s.load_f16(p) }
    }
    #[inline(always)]
    unsafe fn store_canonical<S: Simd>(s: S, p: *mut Self, v: S::V) {
        // SAFETY: forwarded from the caller.
        unsafe { s.store_f16(p, v) }
    }
}

impl SimdElement for bf16 {
    const PAIRED_WORDS: bool = true;
    #[inline(always)]
    unsafe fn load<S: Simd>(s: S, p: *const Self) -> S::V {
        // SAFETY: forwarded from the caller.
        unsafe { s.load_bf16(p) }
    }
    #[inline(always)]
    unsafe fn store_canonical<S: Simd>(s: S, p: *mut Self, v: S::V) {
        // SAFETY: forwarded from the caller.
        unsafe { s.store_bf16(p, v) }
    }
    #[inline(always)]
    unsafe fn store_run2<S: Simd>(s: S, p: *mut Self, [v0, v1]: [S::V; 2]) {
        let (v0, v1) =
            if s.any_nan(v0, v1) { (s.canonicalize_nan(v0), s.canonicalize_nan(v1)) } else { (v0, v1) };
        // SAFETY: forwarded from the caller; both vectors are canonical.
        unsafe { s.store_bf16_run2(p, v0, v1) }
    }
    #[inline(always)]
    fn round<S: Simd>(s: S, v: S::V) -> S::V {
        s.round_bf16_f32(v)
    }
    #[inline(always)]
    fn round_quiet<S: Simd>(s: S, v: S::V) -> S::V {
        s.round_bf16_f32_quiet(v)
    }
    #[cfg(feature = "bench-internals")]
    #[inline(always)]
    unsafe fn scale_special<S: Simd>(s: S, x: *mut Self, len: usize, c: f32) -> bool {
        let blocks = len - len % (2 * S::LANES);
        let cv = s.splat(c);
        let mut i = 0;
        while i < blocks {
            s.prefetch(x.wrapping_add(i).cast::<u8>().wrapping_add(SCALE_PREFETCH_BYTES));
            // SAFETY: i + 2 lanes <= len.
            unsafe {
                let (e, o) = s.load_bf16_pairs(x.add(i));
                store_words(s, x.add(i), s.mul(e, cv), s.mul(o, cv));
            }
            i += 2 * S::LANES;
        }
        // The rest (under two vectors) through the generic path.
        // SAFETY: blocks..len is in bounds; no special path is taken for the rest.
        unsafe { scale_generic(s, x.add(blocks), len - blocks, c) };
        true
    }
    #[inline(always)]
    unsafe fn half_split_special<S: Simd, const INVERSE: bool>(s: S, a: &RotateArgs<'_, Self>) -> bool {
        // SAFETY: forwarded from the caller.
        unsafe { half_split_words::<S, INVERSE>(s, a) };
        true
    }
    #[inline(always)]
    unsafe fn interleaved_special<S: Simd>(s: S, a: &RotateArgs<'_, Self>) -> bool {
        // SAFETY: forwarded from the caller.
        unsafe {
            if a.inverse {
                interleaved_words::<S, true>(s, a);
            } else {
                interleaved_words::<S, false>(s, a);
            }
        }
        true
    }
}

/// A zero-padded stack buffer of up to two vectors ([`MAX_LANES`] each), for tails.
pub(super) struct Pad<T>(pub(super) [T; 2 * MAX_LANES]);

impl<T: Copy + Default> Pad<T> {
    /// The first `n < 2 * MAX_LANES` elements read from `p`, the rest default (zero).
    ///
    /// # Safety
    /// `p .. p + n` is valid for reads.
    #[inline(always)]
    unsafe fn read(p: *const T, n: usize) -> Self {
        let mut b = Pad([T::default(); 2 * MAX_LANES]);
        // SAFETY: n < 2 * MAX_LANES (callers pass a tail shorter than two vectors); the caller
        // guarantees the source; a stack buffer never overlaps the caller's memory.
        unsafe { ptr::copy_nonoverlapping(p, b.0.as_mut_ptr(), n) };
        b
    }

    /// Copies the first `n` elements to `p`.
    ///
    /// # Safety
    /// `p .. p + n` is valid for writes.
    #[inline(always)]
    unsafe fn write(&self, p: *mut T, n: usize) {
        // SAFETY: as in `read`.
        unsafe { ptr::copy_nonoverlapping(self.0.as_ptr(), p, n) };
    }
}

/// One `HalfSplit` step over `S::LANES` pairs: `x0` at `p0`, `x1` at `p1`, results to `q0`,
/// `q1`; `c`, `sn` point at the pairs' cos and sin, negated when `INVERSE`.
///
/// # Safety
/// Each pointer is valid for `S::LANES` elements (reads for `p*`, `c`, `s`; writes for
/// `q*`). `p0`/`q0` and `p1`/`q1` are equal or disjoint.
#[inline(always)]
unsafe fn half_split_step<S: Simd, T: SimdElement, const INVERSE: bool>(
    s: S,
    p: [*const T; 2],
    q: [*mut T; 2],
    c: *const f32,
    sn: *const f32,
) {
    // SAFETY: the caller guarantees every range.
    unsafe {
        let (c, sn) = row_vectors::<S, INVERSE>(s, c, sn);
        half_split_vectors::<S, T, T>(s, p, q, c, sn);
    }
}

/// The cos and sin of `S::LANES` pairs at `c` and `sn`, the sin negated when `INVERSE`.
///
/// # Safety
/// `c` and `sn` are valid for reads of `S::LANES` values.
#[inline(always)]
pub(super) unsafe fn row_vectors<S: Simd, const INVERSE: bool>(
    s: S,
    c: *const f32,
    sn: *const f32,
) -> (S::V, S::V) {
    // SAFETY: forwarded from the caller.
    unsafe {
        let c = s.load(c);
        let sn = if INVERSE { s.xor(s.load(sn), s.splat(-0.0)) } else { s.load(sn) };
        (c, sn)
    }
}

/// [`half_split_step`] with the pairs' cos and sin already loaded ([`row_vectors`]), read
/// as `I` and stored as `O` (the convert kernels' steps too).
///
/// # Safety
/// As [`half_split_step`] for `p*` and `q*`.
#[inline(always)]
pub(super) unsafe fn half_split_vectors<S: Simd, I: SimdElement, O: SimdElement>(
    s: S,
    [p0, p1]: [*const I; 2],
    [q0, q1]: [*mut O; 2],
    c: S::V,
    sn: S::V,
) {
    // SAFETY: the caller guarantees every range; both inputs are loaded before either
    // store, so an in-place step reads only unmodified elements.
    unsafe {
        let x0 = I::load(s, p0);
        let x1 = I::load(s, p1);
        let y0 = s.sub(s.mul(x0, c), s.mul(x1, sn));
        let y1 = s.add(s.mul(x1, c), s.mul(x0, sn));
        O::store2(s, [q0, q1], [y0, y1]);
    }
}

/// `Interleaved` on one vector: `x * cc + swap(x) * ss`.
///
/// # Safety
/// `p`, `cc`, `ss` valid for reads of `S::LANES` elements.
#[inline(always)]
unsafe fn interleaved_vec<S: Simd, T: SimdElement>(
    s: S,
    p: *const T,
    cc: *const f32,
    ss: *const f32,
) -> S::V {
    // SAFETY: forwarded from the caller.
    unsafe { interleaved_formula(s, T::load(s, p), s.load(cc), s.load(ss)) }
}

/// `x * cc + swap(x) * ss` on loaded vectors: the operations of [`interleaved_vec`].
#[inline(always)]
fn interleaved_formula<S: Simd>(s: S, x: S::V, cc: S::V, ss: S::V) -> S::V {
    s.add(s.mul(x, cc), s.mul(s.swap_pairs(x), ss))
}

/// One `Interleaved` step over `2 * S::LANES` elements (`S::LANES` pairs).
///
/// # Safety
/// `p`, `cc`, `ss` valid for reads of `2 * S::LANES` elements, `q` for writes; `p == q`
/// or the ranges are disjoint.
#[inline(always)]
unsafe fn interleaved_step<S: Simd, T: SimdElement>(
    s: S,
    p: *const T,
    q: *mut T,
    cc: *const f32,
    ss: *const f32,
) {
    let l = S::LANES;
    // SAFETY: the caller guarantees every range; both loads precede the stores.
    unsafe {
        let y0 = interleaved_vec(s, p, cc, ss);
        let y1 = interleaved_vec(s, p.add(l), cc.add(l), ss.add(l));
        T::store2(s, [q, q.add(l)], [y0, y1]);
    }
}

/// Whether a call on `lanes`-lane vectors has heads shorter than one vector with a partial
/// vector left over, which the vector loops rotate pair by pair in scalar code. Every other
/// tail overlaps the head's last whole vector. The AVX-512 tier runs such calls on the AVX2
/// width instead, and AVX2 on 4 lanes (same operations, same bits).
#[inline(always)]
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
pub(crate) fn pads<T: SimdElement>(lanes: usize, a: &RotateArgs<'_, T>) -> bool {
    let pairs = a.cos.len();
    let units = match a.layout {
        PairLayout::Interleaved if !T::PAIRED_WORDS => 2 * pairs,
        _ => pairs,
    };
    !units.is_multiple_of(lanes) && units < lanes
}

/// The vector kernel behind every tier's `rotate_*` entry point.
///
/// # Safety
/// The contract of [`RotateFn`](super::RotateFn); `s` proves the CPU supports its tier.
#[inline(always)]
pub(crate) unsafe fn rotate<S: Simd, T: SimdElement>(s: S, a: &RotateArgs<'_, T>) {
    // SAFETY: forwarded.
    unsafe { rotate_in::<S, T, EITHER_LAYOUT>(s, a) }
}

/// The `L` of [`rotate_in`] that compiles both layouts' kernels and branches on `a.layout`.
pub(crate) const EITHER_LAYOUT: u8 = 0;
/// The `L` of [`rotate_in`] for `PairLayout::HalfSplit` only.
pub(crate) const HALF_SPLIT: u8 = 1;
/// The `L` of [`rotate_in`] for `PairLayout::Interleaved` only.
pub(crate) const INTERLEAVED: u8 = 2;

/// [`rotate`] for one layout ([`HALF_SPLIT`], [`INTERLEAVED`]: the caller has checked
/// `a.layout`) or either ([`EITHER_LAYOUT`]).
///
/// # Safety
/// As [`rotate`]; `a.layout` is the one `L` names.
#[inline(always)]
pub(crate) unsafe fn rotate_in<S: Simd, T: SimdElement, const L: u8>(s: S, a: &RotateArgs<'_, T>) {
    // The tail buffers hold two vectors of every tier of this target.
    const { assert!(S::LANES <= MAX_LANES && L <= INTERLEAVED) };
    debug_assert!(match L {
        HALF_SPLIT => a.layout == PairLayout::HalfSplit,
        INTERLEAVED => a.layout == PairLayout::Interleaved,
        _ => true,
    });
    let pairs = a.cos.len();
    let rotary_dim = 2 * pairs;
    debug_assert!(a.sin.len() == pairs && rotary_dim <= a.head_dim && rotary_dim <= MAX_ROTARY_DIM);
    let rest = !ptr::eq(a.src, a.dst) && rotary_dim < a.head_dim;
    // Out of place with a pass-through part, in a call that streams from memory: head by
    // head, each head's bytes in address order (issue 18). Rotating every head, then
    // copying every head's rest, made two interleaved sweeps that the hardware prefetcher
    // followed badly: 1.3-2x slower on GPT-J and GPT-NeoX-20B prefill out of place.
    // Cache-resident calls (decode) and BHSD ones (no prefetch) keep the two loops, which
    // have less per-head work. One call site of `rotate_part` either way: each inlined copy
    // carries the kernels' stack buffers, and two overflowed a 2 MB test thread's stack in
    // debug builds.
    // 32-bit targets (microcontrollers: no call streams from memory there) never split:
    // `by_head` is false at compile time, and the call runs as the plain two loops.
    let by_head = cfg!(target_pointer_width = "64") && rest && a.prefetch;
    let (calls, heads) = if by_head { (a.heads, 1) } else { (1, a.heads) };
    for h in 0..calls {
        // SAFETY: head `h` is in bounds for both pointers (RotateFn contract; h == 0 when the
        // call is not split).
        let (src, dst) = unsafe { (a.src.add(h * a.src_head_stride), a.dst.add(h * a.dst_head_stride)) };
        // SAFETY: heads h .. h + heads of the call.
        unsafe { rotate_part::<S, T, L>(s, &RotateArgs { src, dst, heads, ..*a }) };
        if by_head {
            // SAFETY: rotary_dim..head_dim lies in both heads (RotateFn contract); out of
            // place, source and destination do not overlap.
            unsafe { copy_rest(src.add(rotary_dim), dst.add(rotary_dim), a.head_dim - rotary_dim) };
        }
    }
    if rest && !by_head {
        for h in 0..a.heads {
            // SAFETY: rotary_dim..head_dim lies in both heads (RotateFn contract); out of
            // place, source and destination do not overlap.
            unsafe {
                copy_rest(
                    a.src.add(h * a.src_head_stride + rotary_dim),
                    a.dst.add(h * a.dst_head_stride + rotary_dim),
                    a.head_dim - rotary_dim,
                );
            }
        }
    }
}

/// The rotated part (`0..rotary_dim`) of every head of `a`, in its layout.
///
/// # Safety
/// As [`rotate`].
#[inline(always)]
unsafe fn rotate_part<S: Simd, T: SimdElement, const L: u8>(s: S, a: &RotateArgs<'_, T>) {
    match (L, a.layout) {
        // SAFETY: forwarded from the caller.
        (HALF_SPLIT, _) | (EITHER_LAYOUT, PairLayout::HalfSplit) => unsafe { half_split(s, a) },
        // SAFETY: forwarded from the caller.
        _ => unsafe { interleaved(s, a) },
    }
}

/// Copies the `n` pass-through elements of one head out of place, inline: 32-byte chunks,
/// the last one overlapping, and halves of one below that (issue 18: a `memcpy` call per
/// head made GPT-NeoX-20B prefill out of place, 72 of 96 elements copied, several times
/// slower than in place). Unaligned byte-array moves, which the compiler turns into the
/// tier's vector loads and stores.
///
/// # Safety
/// `src .. src + n` is valid for reads, `dst .. dst + n` for writes; they do not overlap.
#[inline(always)]
unsafe fn copy_rest<T>(src: *const T, dst: *mut T, n: usize) {
    /// Moves `W` bytes at offset `o`.
    ///
    /// # Safety
    /// `o + W` lies within both ranges.
    #[inline(always)]
    unsafe fn mv<const W: usize>(s: *const u8, d: *mut u8, o: usize) {
        // SAFETY: the caller keeps o + W within both ranges.
        unsafe { d.add(o).cast::<[u8; W]>().write_unaligned(s.add(o).cast::<[u8; W]>().read_unaligned()) }
    }
    let bytes = n * core::mem::size_of::<T>();
    let (s, d) = (src.cast::<u8>(), dst.cast::<u8>());
    // SAFETY (every `mv` below): each chunk lies in 0..bytes of both ranges; overlapping
    // chunks of a copy write the same bytes twice.
    unsafe {
        if bytes >= 32 {
            let mut o = 0;
            while o + 32 <= bytes {
                mv::<32>(s, d, o);
                o += 32;
            }
            if o < bytes {
                mv::<32>(s, d, bytes - 32);
            }
        } else if bytes >= 16 {
            mv::<16>(s, d, 0);
            mv::<16>(s, d, bytes - 16);
        } else if bytes >= 8 {
            mv::<8>(s, d, 0);
            mv::<8>(s, d, bytes - 8);
        } else if bytes >= 4 {
            mv::<4>(s, d, 0);
            mv::<4>(s, d, bytes - 4);
        } else if bytes >= 2 {
            mv::<2>(s, d, 0);
            mv::<2>(s, d, bytes - 2);
        } else if bytes == 1 {
            mv::<1>(s, d, 0);
        }
    }
}

/// The vector kernel behind every tier's `rotate_rows` entry point: "head" `h` of `a` gets
/// its own cos/sin row (`cos_rows[h * pairs ..]`), for the head-major walk of BHSD tensors
/// (issue 18). `HalfSplit` runs the same per-head body as [`rotate`] (bf16 through its
/// generic element path: the word path splits its rows once per call); `Interleaved`,
/// whose rows are expanded per call, runs [`rotate`] once per row.
///
/// # Safety
/// The contract of [`RotateRowsFn`](super::RotateRowsFn); `s` proves the CPU supports its
/// tier.
#[inline(always)]
pub(crate) unsafe fn rotate_rows<S: Simd, T: SimdElement>(
    s: S,
    a: &RotateArgs<'_, T>,
    cos_rows: &[f32],
    sin_rows: &[f32],
) {
    const { assert!(S::LANES <= MAX_LANES) };
    let pairs = a.cos.len();
    let rotary_dim = 2 * pairs;
    debug_assert!(cos_rows.len() >= a.heads * pairs && sin_rows.len() >= a.heads * pairs);
    for h in 0..a.heads {
        let r = h * pairs..(h + 1) * pairs;
        let (cos, sin) = (&cos_rows[r.clone()], &sin_rows[r]);
        // SAFETY: head `h` is in bounds for both pointers (RotateFn contract).
        let (src, dst) = unsafe { (a.src.add(h * a.src_head_stride), a.dst.add(h * a.dst_head_stride)) };
        match (a.layout, a.inverse) {
            // SAFETY: one head of the call with its row, as in `half_split_dir`.
            (PairLayout::HalfSplit, false) => unsafe {
                let last = half_split_last::<S, T, false>(s, src, cos, sin, 0);
                half_split_head::<S, T, false>(s, src, dst, cos, sin, 0, last);
            },
            // SAFETY: as above.
            (PairLayout::HalfSplit, true) => unsafe {
                let last = half_split_last::<S, T, true>(s, src, cos, sin, 0);
                half_split_head::<S, T, true>(s, src, dst, cos, sin, 0, last);
            },
            (PairLayout::Interleaved, _) => {
                let one = RotateArgs { src, dst, heads: 1, cos, sin, ..*a };
                // SAFETY: one head of the call with its row (copies its pass-through part).
                unsafe { rotate(s, &one) };
                continue;
            }
        }
        if !ptr::eq(a.src, a.dst) && rotary_dim < a.head_dim {
            // SAFETY: as in `rotate`.
            unsafe { copy_rest(src.add(rotary_dim), dst.add(rotary_dim), a.head_dim - rotary_dim) };
        }
    }
}

/// Pairs per block of [`interleaved`]: its expanded rows hold `2 * ROW_PAIRS` entries.
/// Every head in one block on 64-bit targets (4 KB of rows on the stack, as before blocks);
/// 4 pairs on smaller targets (microcontrollers: 960 bytes less stack per call, issue 13).
/// Pairs are independent, so the block size does not change any result.
const ROW_PAIRS: usize = if cfg!(target_pointer_width = "64") { MAX_PAIRS } else { 4 };

/// The bf16 `HalfSplit` split rows ([`half_split_words`]) hold `blocks / 2 <= MAX_PAIRS / 2`
/// entries each.
const SPLIT_ENTRIES: usize = MAX_PAIRS / 2;

/// A cos/sin row expanded for `Interleaved` (or split for bf16 `HalfSplit`), aligned so that
/// vector loads from it never straddle a cache line.
#[repr(C, align(64))]
pub(super) struct Row<const N: usize>(pub(super) [MaybeUninit<f32>; N]);

#[cfg(test)]
mod tests {
    use half::bf16;

    /// The bf16 rounding every tier vectorises (see [`Simd::store_bf16`](super::Simd)).
    fn bf16_round_bits(bits: u32) -> u16 {
        let lsb = (bits >> 16) & 1;
        (bits.wrapping_add(0x7FFF + lsb) >> 16) as u16
    }

    #[test]
    fn bf16_rounding_matches_half() {
        let edges = [0u32, 1, 0x7FFF, 0x8000, 0x8001, 0x1_8000, 0x7F7F_8000, 0x7F7F_FFFF, 0x7F80_0000];
        let stride = if cfg!(miri) { 0x00FF_F1F1 } else { 0x0000_1F1F };
        let all = (0..=u32::MAX).step_by(stride).chain(edges).chain(edges.map(|b| b | 0x8000_0000));
        for bits in all {
            let x = f32::from_bits(bits);
            if x.is_nan() {
                continue;
            }
            assert_eq!(bf16_round_bits(bits), bf16::from_f32(x).to_bits(), "{bits:#010x}");
        }
        assert_eq!(
            bf16_round_bits(crate::kernels::element::CANONICAL_NAN_F32),
            crate::kernels::element::CANONICAL_NAN_BF16
        );
    }
}
