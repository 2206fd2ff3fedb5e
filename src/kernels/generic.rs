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
use crate::kernels::shape::{Layout, MAX_PAIRS, MAX_ROTARY_DIM};

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
pub(crate) mod qknorm;
pub(crate) mod rows;

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
        Layout::Interleaved if !T::PAIRED_WORDS => 2 * pairs,
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
/// The `L` of [`rotate_in`] for `Layout::HalfSplit` only.
pub(crate) const HALF_SPLIT: u8 = 1;
/// The `L` of [`rotate_in`] for `Layout::Interleaved` only.
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
        HALF_SPLIT => a.layout == Layout::HalfSplit,
        INTERLEAVED => a.layout == Layout::Interleaved,
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
        (HALF_SPLIT, _) | (EITHER_LAYOUT, Layout::HalfSplit) => unsafe { half_split(s, a) },
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
            (Layout::HalfSplit, false) => unsafe {
                let last = half_split_last::<S, T, false>(s, src, cos, sin, 0);
                half_split_head::<S, T, false>(s, src, dst, cos, sin, 0, last);
            },
            // SAFETY: as above.
            (Layout::HalfSplit, true) => unsafe {
                let last = half_split_last::<S, T, true>(s, src, cos, sin, 0);
                half_split_head::<S, T, true>(s, src, dst, cos, sin, 0, last);
            },
            (Layout::Interleaved, _) => {
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

/// # Safety
/// As [`rotate`].
#[inline(always)]
unsafe fn half_split<S: Simd, T: SimdElement>(s: S, a: &RotateArgs<'_, T>) {
    if a.inverse {
        // SAFETY: forwarded from the caller.
        unsafe { half_split_dir::<S, T, true>(s, a) }
    } else {
        // SAFETY: forwarded from the caller.
        unsafe { half_split_dir::<S, T, false>(s, a) }
    }
}

/// # Safety
/// As [`rotate`]; `INVERSE == a.inverse`.
#[inline(always)]
unsafe fn half_split_dir<S: Simd, T: SimdElement, const INVERSE: bool>(s: S, a: &RotateArgs<'_, T>) {
    // SAFETY: forwarded from the caller.
    if unsafe { T::half_split_special::<S, INVERSE>(s, a) } {
        return;
    }
    let pairs = a.cos.len();
    // Heads whose pairs fill one to eight whole vectors (rotary_dim 128 is 4 on AVX-512 and 8
    // on AVX2): the row's vectors are loaded once per call and each head is one unrolled run
    // of steps. 32-bit targets (microcontrollers) keep the loops: eight copies of the kernel
    // for a few cycles per head are not worth their flash there.
    if cfg!(target_pointer_width = "64")
        && pairs.is_multiple_of(S::LANES)
        // SAFETY: forwarded from the caller; `pairs == NV * S::LANES`.
        && whole_vectors!(pairs / S::LANES, NV => unsafe { half_split_whole::<S, T, INVERSE, NV, false>(s, a) })
    {
        return;
    }
    // Heads of two to eight vectors of pairs whose last one overlaps (pairs 9-15 on AVX2:
    // GPT-NeoX-20B's 12), unrolled the same way: through the loop below they took twice the
    // time of the next whole size (rotary_dim 24 against 32 on AVX2: 0.99-1.05 against
    // 0.50 µs for 128 heads), slower than the portable tier, whose 4 lanes fill them.
    if cfg!(target_pointer_width = "64")
        && pairs > S::LANES
        && !pairs.is_multiple_of(S::LANES)
        // SAFETY: forwarded from the caller; `(NV - 1) * S::LANES < pairs < NV * S::LANES`.
        && whole_vectors!(pairs.div_ceil(S::LANES), NV => unsafe { half_split_whole::<S, T, INVERSE, NV, true>(s, a) })
    {
        return;
    }
    // On 16 lanes two loops, so that heads without an overlapping tail run the loop without
    // one (the code from before tails overlapped): one loop measured up to 10% slower on
    // AVX-512 decode and prefill (scripts/bench-gate.sh against the previous kernels). On
    // 8 lanes the opposite: two loops made AVX2 decode f32 25% slower, one loop 4%. Both
    // code-layout effects; the bits are the same either way.
    if S::LANES < 16 || (!pairs.is_multiple_of(S::LANES) && pairs >= S::LANES) {
        // SAFETY: forwarded from the caller.
        unsafe { half_split_heads::<S, T, INVERSE, true>(s, a) }
    } else {
        // SAFETY: forwarded from the caller.
        unsafe { half_split_heads::<S, T, INVERSE, false>(s, a) }
    }
}

/// The head loop of [`half_split_dir`] for heads of `NV` vectors of pairs: the row's `NV`
/// cos and sin vectors loaded before the loop (every head of a call shares the row), each
/// head `NV` steps of the same operations as [`half_split_head`], unrolled. With `OVERLAP`
/// the last vector starts at `pairs - LANES` and overlaps the one before: it is rotated
/// first and stored last (as [`half_split_last`]; the shared lanes get the same values
/// twice).
///
/// # Safety
/// As [`rotate`]; `INVERSE == a.inverse`; `a.cos.len() == NV * S::LANES`, or with `OVERLAP`
/// `(NV - 1) * S::LANES < a.cos.len() < NV * S::LANES`.
#[inline(always)]
unsafe fn half_split_whole<
    S: Simd,
    T: SimdElement,
    const INVERSE: bool,
    const NV: usize,
    const OVERLAP: bool,
>(
    s: S,
    a: &RotateArgs<'_, T>,
) {
    let lanes = S::LANES;
    // Whole heads: a compile-time length, so every offset below is a constant.
    let pairs = if OVERLAP { a.cos.len() } else { NV * lanes };
    debug_assert!(a.cos.len() == pairs && a.sin.len() == pairs);
    debug_assert!(if OVERLAP { (NV - 1) * lanes < pairs && pairs < NV * lanes } else { true });
    // Vector j's first pair: j * lanes, the last one's `pairs - lanes` (the same for whole
    // heads; overlapping the one before otherwise).
    let last = pairs - lanes;
    let (cos, sin) = (a.cos.as_ptr(), a.sin.as_ptr());
    // A loop, not `core::array::from_fn`: a closure does not inherit this function's target
    // features, so wherever the inliner left `from_fn` out of line (it did in one build of
    // the gate bench: 6 calls per decode step, +20% instructions), every intrinsic in it
    // became a call.
    let mut rows = MaybeUninit::<[(S::V, S::V); NV]>::uninit();
    let first = rows.as_mut_ptr().cast::<(S::V, S::V)>();
    for j in 0..NV - 1 {
        let i = j * lanes;
        // SAFETY: i + lanes <= pairs: vector j lies in the rows; entry j < NV of `rows`.
        unsafe { first.add(j).write(row_vectors::<S, INVERSE>(s, cos.add(i), sin.add(i))) };
    }
    // SAFETY: the last vector, `last..pairs`, lies in the rows; entry NV - 1 of `rows`.
    unsafe { first.add(NV - 1).write(row_vectors::<S, INVERSE>(s, cos.add(last), sin.add(last))) };
    // SAFETY: every one of the NV entries was written just above.
    let rows = unsafe { rows.assume_init() };
    let bytes = 2 * pairs * core::mem::size_of::<T>();
    let ahead = heads_ahead(bytes);
    // The head loop of `half_split_heads`, written out again: one helper taking each head
    // as a closure, shared by the two, cost AVX2 decode 8% more instructions (Llama 3.1,
    // callgrind: 6,640 against 6,150 per call).
    for h in 0..a.heads {
        prefetch_head(s, a, h, ahead, bytes);
        // SAFETY: head `h` is in bounds for both pointers (RotateFn contract), and every
        // vector below lies in 0..pairs of its half; with OVERLAP the last vector is loaded
        // before any store (as `half_split_last`), so in place it reads unmodified elements.
        unsafe {
            let (src, dst) = (a.src.add(h * a.src_head_stride), a.dst.add(h * a.dst_head_stride));
            let y = if OVERLAP {
                let (c, sn) = rows[NV - 1];
                let (x0, x1) = (T::load(s, src.add(last)), T::load(s, src.add(pairs + last)));
                Some([s.sub(s.mul(x0, c), s.mul(x1, sn)), s.add(s.mul(x1, c), s.mul(x0, sn))])
            } else {
                None
            };
            let stepped = if OVERLAP { NV - 1 } else { NV };
            for (j, &(c, sn)) in rows.iter().enumerate().take(stepped) {
                let i = j * lanes;
                half_split_vectors::<S, T, T>(
                    s,
                    [src.add(i), src.add(pairs + i)],
                    [dst.add(i), dst.add(pairs + i)],
                    c,
                    sn,
                );
            }
            if let Some(y) = y {
                T::store2(s, [dst.add(last), dst.add(pairs + last)], y);
            }
        }
    }
}

/// The head loop of [`half_split_dir`]; `OVERLAP`: the heads end with an overlapping
/// vector ([`half_split_last`]).
///
/// # Safety
/// As [`rotate`]; `INVERSE == a.inverse`.
#[inline(always)]
unsafe fn half_split_heads<S: Simd, T: SimdElement, const INVERSE: bool, const OVERLAP: bool>(
    s: S,
    a: &RotateArgs<'_, T>,
) {
    let bytes = 2 * a.cos.len() * core::mem::size_of::<T>();
    let ahead = heads_ahead(bytes);
    for h in 0..a.heads {
        prefetch_head(s, a, h, ahead, bytes);
        // SAFETY: head `h` is in bounds for both pointers (RotateFn contract).
        unsafe {
            let (src, dst) = (a.src.add(h * a.src_head_stride), a.dst.add(h * a.dst_head_stride));
            let last = if OVERLAP { half_split_last::<S, T, INVERSE>(s, src, a.cos, a.sin, 0) } else { None };
            half_split_head::<S, T, INVERSE>(s, src, dst, a.cos, a.sin, 0, last);
        }
    }
}

/// The last vector of pairs of a head (`pairs - LANES ..`), rotated but not stored, when
/// the pairs from `start` do not fill whole vectors but the head holds at least one: the
/// tail of [`half_split_head`], which stores it over the end of the head. Called before any
/// store to the head, so in place it reads only unmodified elements; the lanes it shares
/// with the last whole vector get the same values twice (same inputs, same operations).
///
/// # Safety
/// `src` is one head of a [`RotateArgs`] (its contract) with `cos.len()` pairs.
#[inline(always)]
unsafe fn half_split_last<S: Simd, T: SimdElement, const INVERSE: bool>(
    s: S,
    src: *const T,
    cos: &[f32],
    sin: &[f32],
    start: usize,
) -> Option<[S::V; 2]> {
    let (lanes, pairs) = (S::LANES, cos.len());
    if (pairs - start).is_multiple_of(lanes) || pairs < lanes {
        return None;
    }
    let i = pairs - lanes;
    // SAFETY: i + lanes == pairs: both halves' chunks lie in the head, the rows' in the rows.
    unsafe {
        let c = s.load(cos.as_ptr().add(i));
        let sn = sin.as_ptr().add(i);
        let sn = if INVERSE { s.xor(s.load(sn), s.splat(-0.0)) } else { s.load(sn) };
        let x0 = T::load(s, src.add(i));
        let x1 = T::load(s, src.add(pairs + i));
        Some([s.sub(s.mul(x0, c), s.mul(x1, sn)), s.add(s.mul(x1, c), s.mul(x0, sn))])
    }
}

/// `HalfSplit` on pairs `start..` of one head (`src`/`dst` point at element 0). A last
/// partial vector is `last` ([`half_split_last`], computed before the head's first store)
/// stored over the end of the head, or without one (a head shorter than a vector) is
/// rotated pair by pair with the oracle's formula.
///
/// # Safety
/// `src` and `dst` are one head of a [`RotateArgs`] (its contract) with `cos.len()` pairs;
/// `last` is [`half_split_last`] of the same head and `start`.
#[inline(always)]
unsafe fn half_split_head<S: Simd, T: SimdElement, const INVERSE: bool>(
    s: S,
    src: *const T,
    dst: *mut T,
    cos: &[f32],
    sin: &[f32],
    start: usize,
    last: Option<[S::V; 2]>,
) {
    let lanes = S::LANES;
    let pairs = cos.len();
    let body = pairs - (pairs - start) % lanes;
    let tail = pairs - body;
    let (cos, sin) = (cos.as_ptr(), sin.as_ptr());
    let mut i = start;
    while i < body {
        // SAFETY: i + lanes <= pairs, so both halves' chunks lie in 0..rotary_dim of the head
        // and the cos/sin chunks in the rows.
        unsafe {
            half_split_step::<S, T, INVERSE>(
                s,
                [src.add(i), src.add(pairs + i)],
                [dst.add(i), dst.add(pairs + i)],
                cos.add(i),
                sin.add(i),
            );
        }
        i += lanes;
    }
    if let Some(y) = last {
        // SAFETY: pairs >= lanes (`half_split_last` returned a vector): both chunks end at
        // the end of their half.
        unsafe { T::store2(s, [dst.add(pairs - lanes), dst.add(2 * pairs - lanes)], y) };
    } else if tail != 0 {
        // A head shorter than one vector (pairs < lanes): pair by pair with the oracle's own
        // formula (`scalar::rotate_pair`, `Element::from_f32`), the same bits by definition.
        // Zero-padded stack copies in and out (four reads and two writes of variable length,
        // each a `memcpy` call) took ~47 ns per head: 128 heads at rotary_dim 2-6 took
        // 6-7.5 µs per decode call on AVX2 against 0.28 µs at rotary_dim 8 (issue 18's
        // rotary_dim sweep).
        for i in body..pairs {
            // SAFETY: i < pairs: both members of the pair lie in the head, the rows hold
            // `pairs` entries; each pair is read before it is written, and no other pair
            // shares its elements.
            unsafe {
                let (x0, x1) = ((*src.add(i)).to_f32(), (*src.add(pairs + i)).to_f32());
                let (y0, y1) = rotate_pair(x0, x1, *cos.add(i), *sin.add(i), INVERSE);
                *dst.add(i) = T::from_f32(y0);
                *dst.add(pairs + i) = T::from_f32(y1);
            }
        }
    }
}

/// `HalfSplit` for bf16 without shuffles: `2 * LANES` consecutive elements of a half are
/// `LANES` 32-bit words, widened to their even and odd elements with a shift and a mask
/// ([`Simd::load_bf16_pairs`]). The rows are split the same way once per call, each lane
/// computes the `HalfSplit` formula, and [`Simd::store_bf16_pairs`] narrows back. Pairs
/// past the last whole block of `2 * LANES` take [`half_split_head`].
///
/// # Safety
/// As [`rotate`]; `INVERSE == a.inverse`.
#[inline(always)]
unsafe fn half_split_words<S: Simd, const INVERSE: bool>(s: S, a: &RotateArgs<'_, bf16>) {
    let (lanes, pairs) = (S::LANES, a.cos.len());
    // As in `half_split_dir`: heads without an overlapping tail get a loop without one
    // (one loop measured 15% slower on AVX-512 bf16 prefill).
    let blocks = pairs - pairs % (2 * lanes);
    if !(pairs - blocks).is_multiple_of(lanes) && pairs >= lanes {
        // SAFETY: forwarded from the caller.
        unsafe { half_split_words_in::<S, INVERSE, true>(s, a) }
    } else {
        // SAFETY: forwarded from the caller.
        unsafe { half_split_words_in::<S, INVERSE, false>(s, a) }
    }
}

/// [`half_split_words`]; `OVERLAP`: the heads end with an overlapping vector
/// ([`half_split_last`]).
///
/// # Safety
/// As [`rotate`]; `INVERSE == a.inverse`.
#[inline(always)]
unsafe fn half_split_words_in<S: Simd, const INVERSE: bool, const OVERLAP: bool>(
    s: S,
    a: &RotateArgs<'_, bf16>,
) {
    let lanes = S::LANES;
    let pairs = a.cos.len();
    let blocks = pairs - pairs % (2 * lanes);
    // Rows split into even and odd entries per block: block `b` lane `j` holds entry
    // `2 * lanes * b + 2 * j` (even) or `.. + 1` (odd). Only 0..blocks is written and read.
    let mut ce = Row([MaybeUninit::uninit(); SPLIT_ENTRIES]);
    let mut co = Row([MaybeUninit::uninit(); SPLIT_ENTRIES]);
    let mut se = Row([MaybeUninit::uninit(); SPLIT_ENTRIES]);
    let mut so = Row([MaybeUninit::uninit(); SPLIT_ENTRIES]);
    {
        let (cos, sin) = (a.cos.as_ptr(), a.sin.as_ptr());
        let [ce, co, se, so] = [&mut ce, &mut co, &mut se, &mut so].map(|r| r.0.as_mut_ptr().cast::<f32>());
        // Block b, lane j: row entry 2 lanes b + 2 j (even) or + 1 (odd) goes to lanes b + j,
        // which is k / 2 for the entry k = 2 lanes b + 2 j: a plain stride-2 split.
        for k in 0..blocks / 2 {
            // SAFETY: 2 k + 1 < blocks <= pairs entries of the rows; k < blocks / 2 <=
            // MAX_PAIRS / 2 = SPLIT_ENTRIES entries of the buffers.
            unsafe {
                ce.add(k).write(*cos.add(2 * k));
                co.add(k).write(*cos.add(2 * k + 1));
                se.add(k).write(*sin.add(2 * k));
                so.add(k).write(*sin.add(2 * k + 1));
            }
        }
    }
    let rows = [&ce, &co, &se, &so].map(|r| r.0.as_ptr().cast::<f32>());
    let ahead = heads_ahead(4 * pairs);
    for h in 0..a.heads {
        prefetch_head(s, a, h, ahead, 4 * pairs);
        // SAFETY: head `h` is in bounds for both pointers (RotateFn contract); each block
        // covers elements i .. i + 2 lanes of both halves, i + 2 lanes <= blocks <= pairs,
        // and row entries i / 2 .. i / 2 + lanes < blocks / 2, all initialised.
        unsafe {
            let (src, dst) = (a.src.add(h * a.src_head_stride), a.dst.add(h * a.dst_head_stride));
            // Before the blocks' stores: the last vector may overlap the last block.
            let last = if OVERLAP {
                half_split_last::<S, bf16, INVERSE>(s, src, a.cos, a.sin, blocks)
            } else {
                None
            };
            let mut i = 0;
            while i < blocks {
                let r = i / 2;
                // Written out, not `rows.map(..)`: a closure does not inherit the target
                // features (see `half_split_whole`).
                let [ce, co, se, so] = [rows[0], rows[1], rows[2], rows[3]];
                let [ce, co, se, so] =
                    [s.load(ce.add(r)), s.load(co.add(r)), s.load(se.add(r)), s.load(so.add(r))];
                let (se, so) =
                    if INVERSE { (s.xor(se, s.splat(-0.0)), s.xor(so, s.splat(-0.0))) } else { (se, so) };
                let (x0e, x0o) = s.load_bf16_pairs(src.add(i));
                let (x1e, x1o) = s.load_bf16_pairs(src.add(pairs + i));
                let y0e = s.sub(s.mul(x0e, ce), s.mul(x1e, se));
                let y0o = s.sub(s.mul(x0o, co), s.mul(x1o, so));
                let y1e = s.add(s.mul(x1e, ce), s.mul(x0e, se));
                let y1o = s.add(s.mul(x1o, co), s.mul(x0o, so));
                store_words(s, dst.add(i), y0e, y0o);
                store_words(s, dst.add(pairs + i), y1e, y1o);
                i += 2 * lanes;
            }
            half_split_head::<S, bf16, INVERSE>(s, src, dst, a.cos, a.sin, blocks, last);
        }
    }
}

/// [`Simd::store_bf16_pairs`] after the NaN check.
///
/// # Safety
/// `p .. p + 2 * S::LANES` is valid for writes.
#[inline(always)]
unsafe fn store_words<S: Simd>(s: S, p: *mut bf16, even: S::V, odd: S::V) {
    let (even, odd) =
        if s.any_nan(even, odd) { (s.canonicalize_nan(even), s.canonicalize_nan(odd)) } else { (even, odd) };
    // SAFETY: forwarded from the caller.
    unsafe { s.store_bf16_pairs(p, even, odd) }
}

/// # Safety
/// As [`rotate`].
#[inline(always)]
unsafe fn interleaved<S: Simd, T: SimdElement>(s: S, a: &RotateArgs<'_, T>) {
    // SAFETY: forwarded from the caller.
    if unsafe { T::interleaved_special(s, a) } {
        return;
    }
    // On 64-bit targets every head is one block (`ROW_PAIRS == MAX_PAIRS`): one pass, as
    // fast as the kernel was before blocks (a loop of one block measured 15-25% slower on
    // interleaved prefill, AVX-512).
    if ROW_PAIRS == MAX_PAIRS {
        // SAFETY: the caller's contract; `a.cos.len() <= MAX_PAIRS == ROW_PAIRS`.
        return unsafe { interleaved_block(s, a) };
    }
    // Elsewhere in blocks of `ROW_PAIRS` pairs, so that the expanded rows stay small on the
    // stack (issue 13: a microcontroller's stack). Each element gets the same operations as
    // in one pass; only the order in which heads and blocks are visited changes.
    let pairs = a.cos.len();
    let mut p0 = 0;
    while p0 < pairs {
        let n = (pairs - p0).min(ROW_PAIRS);
        let block = RotateArgs {
            // In bounds of every head: 2 * (p0 + n) <= rotary_dim <= head_dim.
            src: a.src.wrapping_add(2 * p0),
            dst: a.dst.wrapping_add(2 * p0),
            cos: &a.cos[p0..p0 + n],
            sin: &a.sin[p0..p0 + n],
            ..*a
        };
        // SAFETY: the caller's contract, for pairs p0 .. p0 + n of every head.
        unsafe { interleaved_block(s, &block) };
        p0 += n;
    }
}

/// [`interleaved`] for at most [`ROW_PAIRS`] pairs.
///
/// # Safety
/// As [`rotate`], with `a.cos.len() <= ROW_PAIRS`.
#[inline(always)]
unsafe fn interleaved_block<S: Simd, T: SimdElement>(s: S, a: &RotateArgs<'_, T>) {
    let rotary_dim = 2 * a.cos.len();
    // Expand the rows once per call: cc = [c0 c0 c1 c1 ..], ss = [-s0 s0 ..] forward or
    // [s0 -s0 ..] inverse. Only 0..rotary_dim is written, and only that is read. One pair of
    // rows for every loop below (each inlined loop with rows of its own overflowed a 2 MB
    // test thread's stack in debug builds).
    let mut cc = Row([MaybeUninit::uninit(); 2 * ROW_PAIRS]);
    let mut ss = Row([MaybeUninit::uninit(); 2 * ROW_PAIRS]);
    let (ccp, ssp) = (cc.0.as_mut_ptr().cast::<f32>(), ss.0.as_mut_ptr().cast::<f32>());
    // SAFETY: both rows hold 2 * ROW_PAIRS >= rotary_dim entries.
    unsafe { expand_rows(s, a.cos, a.sin, a.inverse, ccp, ssp) };
    let rows = [ccp.cast_const(), ssp.cast_const()];
    // As in `half_split_dir`: heads of one to eight whole steps of two vectors, unrolled.
    if cfg!(target_pointer_width = "64")
        && rotary_dim.is_multiple_of(2 * S::LANES)
        // SAFETY: forwarded from the caller; `rotary_dim == 2 * NV * S::LANES`; the rows are
        // the call's, expanded.
        && whole_vectors!(rotary_dim / (2 * S::LANES), NV => unsafe { interleaved_whole::<S, T, NV>(s, a, rows) })
    {
        return;
    }
    // Heads of exactly one vector (half a step: rotary_dim 8 on AVX2, 16 on AVX-512): the
    // rows in registers once per call, one load, formula and store per head. The general
    // loop below reloaded its pointers and bounds from the stack per head: 128 heads at
    // rotary_dim 8 took 1.0-1.07 µs per decode call on AVX2, 1.6x the portable tier's time
    // (issue 18's rotary_dim sweep).
    if cfg!(target_pointer_width = "64") && rotary_dim == S::LANES {
        // SAFETY: both expanded rows hold rotary_dim == LANES initialised entries.
        let (c, sn) = unsafe { (s.load(ccp), s.load(ssp)) };
        let bytes = rotary_dim * core::mem::size_of::<T>();
        let ahead = heads_ahead(bytes);
        for h in 0..a.heads {
            prefetch_head(s, a, h, ahead, bytes);
            // SAFETY: head `h` is in bounds for both pointers (RotateFn contract), and its
            // 0..rotary_dim is one vector; the load precedes the store.
            unsafe {
                let (src, dst) = (a.src.add(h * a.src_head_stride), a.dst.add(h * a.dst_head_stride));
                T::store(s, dst, interleaved_formula(s, T::load(s, src), c, sn));
            }
        }
        return;
    }
    // As in `half_split_dir`: heads without an overlapping tail get a loop without one.
    if !rotary_dim.is_multiple_of(S::LANES) && rotary_dim >= S::LANES {
        // SAFETY: forwarded from the caller; the rows are the call's, expanded.
        unsafe { interleaved_block_in::<S, T, true>(s, a, rows) }
    } else {
        // SAFETY: forwarded from the caller; the rows are the call's, expanded.
        unsafe { interleaved_block_in::<S, T, false>(s, a, rows) }
    }
}

/// [`interleaved_block`] for heads of exactly `NV` steps of two vectors: each head `NV` steps
/// of [`interleaved_step`]'s operations, unrolled, reading the expanded rows' vectors (every
/// head of a call shares them) for every head.
///
/// # Safety
/// As [`interleaved_block`], with `2 * a.cos.len() == 2 * NV * S::LANES`; `[ccp, ssp]` are
/// the call's rows expanded by [`expand_rows`] (`rotary_dim` entries each).
#[inline(always)]
unsafe fn interleaved_whole<S: Simd, T: SimdElement, const NV: usize>(
    s: S,
    a: &RotateArgs<'_, T>,
    [ccp, ssp]: [*const f32; 2],
) {
    let lanes = S::LANES;
    let rotary_dim = 2 * NV * lanes;
    debug_assert!(2 * a.cos.len() == rotary_dim);
    // The expanded rows are read again for every head (memory operands), not held in
    // registers: NV steps of 4 vectors exceed the register file, and an array built once per
    // call (`core::array::from_fn`, whose closure does not inherit the target features) cost
    // interleaved decode 14% more instructions than these loads (AVX2, callgrind).
    let bytes = rotary_dim * core::mem::size_of::<T>();
    let ahead = heads_ahead(bytes);
    for h in 0..a.heads {
        prefetch_head(s, a, h, ahead, bytes);
        // Step j reads entries o..o + 2 * lanes < rotary_dim of the rows (all initialised by
        // `expand_rows`) and of head `h`.
        // SAFETY: head `h` is in bounds for both pointers (RotateFn contract), and step j's
        // two vectors lie in its 0..rotary_dim; both loads of a step precede its stores.
        unsafe {
            let (src, dst) = (a.src.add(h * a.src_head_stride), a.dst.add(h * a.dst_head_stride));
            for j in 0..NV {
                let o = 2 * j * lanes;
                let (c0, s0) = (s.load(ccp.add(o)), s.load(ssp.add(o)));
                let (c1, s1) = (s.load(ccp.add(o + lanes)), s.load(ssp.add(o + lanes)));
                let (x0, x1) = (T::load(s, src.add(o)), T::load(s, src.add(o + lanes)));
                let y = [interleaved_formula(s, x0, c0, s0), interleaved_formula(s, x1, c1, s1)];
                T::store2(s, [dst.add(o), dst.add(o + lanes)], y);
            }
        }
    }
}

/// [`interleaved_block`]; `OVERLAP`: the heads end with an overlapping vector.
///
/// # Safety
/// As [`interleaved_block`]; `[ccp, ssp]` are the call's rows expanded by [`expand_rows`].
#[inline(always)]
unsafe fn interleaved_block_in<S: Simd, T: SimdElement, const OVERLAP: bool>(
    s: S,
    a: &RotateArgs<'_, T>,
    [ccp, ssp]: [*const f32; 2],
) {
    let lanes = S::LANES;
    let pairs = a.cos.len();
    let rotary_dim = 2 * pairs;

    // Two vectors per step, then at most one single vector, then a partial one.
    let body2 = rotary_dim - rotary_dim % (2 * lanes);
    let body = rotary_dim - rotary_dim % lanes;
    let tail = rotary_dim - body;
    let bytes = rotary_dim * core::mem::size_of::<T>();
    let ahead = heads_ahead(bytes);
    for h in 0..a.heads {
        prefetch_head(s, a, h, ahead, bytes);
        // SAFETY: head `h` is in bounds for both pointers (RotateFn contract).
        let (src, dst) = unsafe { (a.src.add(h * a.src_head_stride), a.dst.add(h * a.dst_head_stride)) };
        // A partial last vector: the vector ending at rotary_dim (pair-aligned: both even),
        // rotated before the head's first store and stored last (see `half_split_last`).
        let last = if OVERLAP {
            let o = rotary_dim - lanes;
            // SAFETY: o + lanes == rotary_dim: inside the head and the initialised rows.
            Some(unsafe { interleaved_vec(s, src.add(o), ccp.add(o), ssp.add(o)) })
        } else {
            None
        };
        let mut j = 0;
        while j < body2 {
            // SAFETY: j + 2 * lanes <= rotary_dim: inside the head and the initialised part
            // of cc/ss.
            unsafe { interleaved_step(s, src.add(j), dst.add(j), ccp.add(j), ssp.add(j)) };
            j += 2 * lanes;
        }
        if body2 < body {
            // SAFETY: body2 + lanes == body <= rotary_dim, as above.
            unsafe {
                let y = interleaved_vec(s, src.add(body2), ccp.add(body2), ssp.add(body2));
                T::store(s, dst.add(body2), y);
            }
        }
        if let Some(y) = last {
            // SAFETY: rotary_dim - lanes .. rotary_dim is in the head.
            unsafe { T::store(s, dst.add(rotary_dim - lanes), y) };
        } else if tail != 0 {
            // A head shorter than one vector: pair by pair with the oracle's own formula, as
            // in `half_split_head` (the padded copies made rotary_dim 2 on AVX2 7x slower
            // than on the portable tier).
            for i in body / 2..pairs {
                // SAFETY: 2 i + 1 < rotary_dim: the pair lies in the head, the rows hold
                // `pairs` entries; each pair is read before it is written.
                unsafe {
                    let (x0, x1) = ((*src.add(2 * i)).to_f32(), (*src.add(2 * i + 1)).to_f32());
                    let (y0, y1) = rotate_pair(x0, x1, a.cos[i], a.sin[i], a.inverse);
                    *dst.add(2 * i) = T::from_f32(y0);
                    *dst.add(2 * i + 1) = T::from_f32(y1);
                }
            }
        }
    }
}

/// Expands a cos/sin row for `Interleaved` into `cc = [c0 c0 c1 c1 ..]` and
/// `ss = [-s0 s0 -s1 s1 ..]` (forward) or `[s0 -s0 ..]` (`inverse`): `2 * cos.len()`
/// entries each at `ccp`, `ssp` (see the module docs for why lane `2i` then computes the
/// oracle's `y0`).
///
/// # Safety
/// `ccp` and `ssp` are valid for writes of `2 * cos.len()` f32; `sin.len() == cos.len()`.
#[inline(always)]
pub(super) unsafe fn expand_rows<S: Simd>(
    s: S,
    cos: &[f32],
    sin: &[f32],
    inverse: bool,
    ccp: *mut f32,
    ssp: *mut f32,
) {
    let (lanes, pairs) = (S::LANES, cos.len());
    let sign = s.splat(if inverse { -0.0 } else { 0.0 });
    let neg = s.splat(-0.0);
    let expand_body = pairs - pairs % lanes;
    let mut i = 0;
    while i < expand_body {
        // SAFETY: i + lanes <= pairs; 2 * i + 2 * lanes <= 2 * pairs entries of the rows.
        unsafe {
            let c = s.load(cos.as_ptr().add(i));
            let sn = s.xor(s.load(sin.as_ptr().add(i)), sign);
            let (c0, c1) = s.zip(c, c);
            let (s0, s1) = s.zip(s.xor(sn, neg), sn);
            s.store(ccp.add(2 * i), c0);
            s.store(ccp.add(2 * i + lanes), c1);
            s.store(ssp.add(2 * i), s0);
            s.store(ssp.add(2 * i + lanes), s1);
        }
        i += lanes;
    }
    for i in expand_body..pairs {
        let (c, sn) = (cos[i], if inverse { -sin[i] } else { sin[i] });
        // SAFETY: 2 * i + 1 < 2 * pairs.
        unsafe {
            ccp.add(2 * i).write(c);
            ccp.add(2 * i + 1).write(c);
            ssp.add(2 * i).write(-sn);
            ssp.add(2 * i + 1).write(sn);
        }
    }
}

/// `Interleaved` for bf16: each pair is one 32-bit word, widened to `(x0, x1)` vectors
/// with a shift and a mask ([`Simd::load_bf16_pairs`]), rotated with the `HalfSplit`
/// formula and the rows as they are, and narrowed back without a shuffle.
///
/// # Safety
/// As [`rotate`]; `INVERSE == a.inverse`.
#[inline(always)]
unsafe fn interleaved_words<S: Simd, const INVERSE: bool>(s: S, a: &RotateArgs<'_, bf16>) {
    let pairs = a.cos.len();
    // As in `half_split_dir`: heads without an overlapping tail get a loop without one
    // (one loop measured 12% slower on AVX-512 bf16 prefill).
    if !pairs.is_multiple_of(S::LANES) && pairs >= S::LANES {
        // SAFETY: forwarded from the caller.
        unsafe { interleaved_words_in::<S, INVERSE, true>(s, a) }
    } else {
        // SAFETY: forwarded from the caller.
        unsafe { interleaved_words_in::<S, INVERSE, false>(s, a) }
    }
}

/// [`interleaved_words`]; `OVERLAP`: the heads end with an overlapping vector.
///
/// # Safety
/// As [`rotate`]; `INVERSE == a.inverse`.
#[inline(always)]
unsafe fn interleaved_words_in<S: Simd, const INVERSE: bool, const OVERLAP: bool>(
    s: S,
    a: &RotateArgs<'_, bf16>,
) {
    let lanes = S::LANES;
    let pairs = a.cos.len();
    let body = pairs - pairs % lanes;
    let tail = pairs - body;
    let (cos, sin) = (a.cos.as_ptr(), a.sin.as_ptr());
    let ahead = heads_ahead(4 * pairs);
    for h in 0..a.heads {
        prefetch_head(s, a, h, ahead, 4 * pairs);
        // SAFETY: head `h` is in bounds for both pointers (RotateFn contract).
        let (src, dst) = unsafe { (a.src.add(h * a.src_head_stride), a.dst.add(h * a.dst_head_stride)) };
        // A partial last vector: the one ending at the last pair, rotated before the head's
        // first store and stored last (see `half_split_last`).
        let last = if OVERLAP {
            let i = pairs - lanes;
            // SAFETY: i + lanes == pairs: elements 2i .. rotary_dim and the rows' entries.
            Some(unsafe { words_rot::<S, INVERSE>(s, src.add(2 * i), cos.add(i), sin.add(i)) })
        } else {
            None
        };
        let mut i = 0;
        while i < body {
            // SAFETY: i + lanes <= pairs: elements 2i .. 2i + 2 lanes are in the head.
            unsafe { words_step::<S, INVERSE>(s, src.add(2 * i), dst.add(2 * i), cos.add(i), sin.add(i)) };
            i += lanes;
        }
        if let Some((y0, y1)) = last {
            // SAFETY: elements 2 (pairs - lanes) .. rotary_dim are in the head.
            unsafe { store_words(s, dst.add(2 * (pairs - lanes)), y0, y1) };
        } else if tail != 0 {
            // A head shorter than one vector: pair by pair with the oracle's own formula, as
            // in `half_split_head` (padded copies in and out cost ~47 ns per head).
            for i in body..pairs {
                // SAFETY: 2 i + 1 < rotary_dim: the pair lies in the head, the rows hold
                // `pairs` entries; each pair is read before it is written.
                unsafe {
                    let (x0, x1) = ((*src.add(2 * i)).to_f32(), (*src.add(2 * i + 1)).to_f32());
                    let (y0, y1) = rotate_pair(x0, x1, *cos.add(i), *sin.add(i), INVERSE);
                    *dst.add(2 * i) = <bf16 as Element>::from_f32(y0);
                    *dst.add(2 * i + 1) = <bf16 as Element>::from_f32(y1);
                }
            }
        }
    }
}

/// One step of [`interleaved_words`]: `S::LANES` pairs from `p` to `q`, rows at `c`, `sn`
/// (negated when `INVERSE`).
///
/// # Safety
/// `p` valid for reads and `q` for writes of `2 * S::LANES` bf16, `c` and `sn` for reads of
/// `S::LANES` f32; `p == q` or disjoint.
#[inline(always)]
unsafe fn words_step<S: Simd, const INVERSE: bool>(
    s: S,
    p: *const bf16,
    q: *mut bf16,
    c: *const f32,
    sn: *const f32,
) {
    // SAFETY: the caller guarantees every range; the loads precede the store.
    unsafe {
        let (y0, y1) = words_rot::<S, INVERSE>(s, p, c, sn);
        store_words(s, q, y0, y1);
    }
}

/// The rotation of [`words_step`] without the store: `(y0, y1)` of `S::LANES` pairs at `p`.
///
/// # Safety
/// `p` valid for reads of `2 * S::LANES` bf16, `c` and `sn` of `S::LANES` f32.
#[inline(always)]
unsafe fn words_rot<S: Simd, const INVERSE: bool>(
    s: S,
    p: *const bf16,
    c: *const f32,
    sn: *const f32,
) -> (S::V, S::V) {
    // SAFETY: the caller guarantees every range.
    unsafe {
        let c = s.load(c);
        let sn = if INVERSE { s.xor(s.load(sn), s.splat(-0.0)) } else { s.load(sn) };
        let (x0, x1) = s.load_bf16_pairs(p);
        (s.sub(s.mul(x0, c), s.mul(x1, sn)), s.add(s.mul(x1, c), s.mul(x0, sn)))
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

/// The roofline baseline: `x[i] = round(x[i] * c)` in place through the same
/// load/convert/store path as [`rotate`] (so NaN canonicalisation included).
///
/// # Safety
/// `x .. x + len` is valid for reads and writes; `s` proves the CPU supports its tier.
#[cfg(feature = "bench-internals")]
#[inline(always)]
pub(crate) unsafe fn scale<S: Simd, T: SimdElement>(s: S, x: *mut T, len: usize, c: f32) {
    // SAFETY: forwarded from the caller.
    if unsafe { T::scale_special(s, x, len, c) } {
        return;
    }
    // SAFETY: forwarded from the caller.
    unsafe { scale_generic(s, x, len, c) }
}

/// [`scale`] through [`SimdElement::load`] and [`SimdElement::store2`].
///
/// # Safety
/// As [`scale`].
#[cfg(feature = "bench-internals")]
#[inline(always)]
unsafe fn scale_generic<S: Simd, T: SimdElement>(s: S, x: *mut T, len: usize, c: f32) {
    let lanes = S::LANES;
    let body2 = len - len % (2 * lanes);
    let body = len - len % lanes;
    let cv = s.splat(c);
    let mut i = 0;
    // Two vectors per step with one NaN check, as the rotate kernels store.
    while i < body2 {
        s.prefetch(x.wrapping_add(i).cast::<u8>().wrapping_add(SCALE_PREFETCH_BYTES));
        // SAFETY: i + 2 * lanes <= len.
        unsafe {
            let (p0, p1) = (x.add(i), x.add(i + lanes));
            let (y0, y1) = (s.mul(T::load(s, p0), cv), s.mul(T::load(s, p1), cv));
            T::store2(s, [p0, p1], [y0, y1]);
        }
        i += 2 * lanes;
    }
    if body2 < body {
        // SAFETY: body2 + lanes == body <= len.
        unsafe {
            let p = x.add(body2);
            T::store(s, p, s.mul(T::load(s, p), cv));
        }
    }
    if body < len {
        // SAFETY: body..len is in bounds; the pad holds a full vector.
        unsafe {
            let mut b = Pad::read(x.add(body), len - body);
            let p = b.0.as_mut_ptr();
            T::store(s, p, s.mul(T::load(s, p), cv));
            b.write(x.add(body), len - body);
        }
    }
}

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
