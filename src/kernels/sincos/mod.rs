//! The on-the-fly cos/sin row generator: exact range reduction, then a minimax polynomial,
//! written once over [`F64Simd`] lanes and instantiated per tier, bit-identical across
//! tiers.
//!
//! A row holds, for one position `p` and every pair `i < rotary_dim / 2`,
//! `cos[i] = f32(attention_factor * cos(angle_i))` and the same for `sin`, with
//! `angle_i = p * inv_freq[i]` ([`AngleMode::Exact`], the exact real product with the f64
//! `inv_freq`) or `angle_i = f32(p) * inv_freq_f32[i]` rounded in f32
//! ([`AngleMode::HfCompatible`]).
//!
//! # Algorithm
//!
//! Angles are measured in turns (`angle / 2π`). For each lane, with `P` the position (or
//! the f32 angle) and `hi + lo` the turns per unit of `P`:
//!
//! ```text
//! t   = P * hi                 exact: P has <= 32 significant bits, hi <= 21 (Exact mode)
//! r   = t - rint(t)            exact, |r| <= 1/2: the fraction of P * hi
//! s   = r + P * lo             two roundings, |s| <= 1/2 + 2^10
//! u   = s - rint(s)            exact, |u| <= 1/2 turn
//! w   = 4 * u                  exact, quarter turns
//! k   = rint(w)                quadrant, in {-2, -1, 0, 1, 2}
//! x   = w - k                  exact, |x| <= 1/2 quarter turn (|angle| <= pi/4)
//! S   = x * (S1 + z*(S3 + z*(S5 + z*(S7 + z*S9))))       z = x*x, ~ sin(pi/2 * x)
//! C   = 1 + z*(C2 + z*(C4 + z*(C6 + z*(C8 + z*C10))))            ~ cos(pi/2 * x)
//! a   = 1 - |k|,  b = k * (2 - |k|)                     cos and sin of k * pi/2, exact
//! cos = (C*a - S*b) * attention_factor,   sin = (S*a + C*b) * attention_factor
//! ```
//!
//! then each is rounded once to f32. `rint(v)` is `(v + 1.5 * 2^52) - 1.5 * 2^52`, the
//! round-to-nearest-even of every `|v| <= 2^51`, which every value above satisfies. The
//! products with `a`, `b` (one of them is 0, the other ±1) and the sums with a zero term are
//! exact, so the quadrant step only permutes and negates `C` and `S`.
//!
//! `hi + lo` comes from [`split_turns`] for `Exact` (`inv_freq * (1/2π)` formed against a
//! 4-part `1/2π` with Dekker's exact products, each term reduced mod 1 exactly, summed in
//! double-double and split with Veltkamp's method; see [`turns`]; stored in
//! [`Frequencies`], computed once per frequency set), and is the
//! constant `1/2π` split to 29 + 53 bits for `HfCompatible` (the f32 angle has 24 significant
//! bits, so `P * hi` is again exact). In `HfCompatible` mode the angle is formed as
//! `f64(f32(p)) * f64(inv_freq_f32)` (exact in f64) rounded to f32, which is the f32 product
//! bit for bit, and clamped to `|angle| <= 2^50` (see the bound below).
//!
//! The polynomial coefficients are minimax (Remez, absolute error, on `|x| <= 1/2`) for
//! `sin(pi/2 x)` (odd, degree 9) and `cos(pi/2 x)` (even, degree 10, constant term fixed to
//! 1); `tools/sincos_coefficients.py` recomputes them and their error.
//!
//! # Error bound
//!
//! Let `D = |inv_freq / 2π mod 1| <= 1/2` (`D = inv_freq / 2π <= 0.16` for `inv_freq <= 1`,
//! which holds for every `theta >= 1` with any frequency-lowering scaling). The reduced
//! angle (in turns) is off by at most
//!
//! ```text
//! delta(p) <= 2^-54 + 3 * 2^-74 * p * D + 2^-99 * p      turns
//! ```
//!
//! (`lo` is rounded to f64, `P * lo` and `r + P * lo` each round once, `|lo| <= 2^-21 D`
//! about; [`turns`] is good to `2^-99` turns for every accepted `inv_freq <= 2^95`, whatever
//! its size; every other step is exact). The
//! polynomials are within `1.6941e-12` (sin) and `6.153e-14` (cos) of the true functions
//! (Remez, exact arithmetic); rounding the coefficients to f64 and the f64 Horner evaluation
//! add at most about `1e-15`, and the measured total on a dense grid is `1.694e-12` and
//! `6.17e-14` (`tools/sincos_coefficients.py`, unit test `polynomials_within_bound`). The
//! quadrant step is exact, so before the attention factor and the final rounding
//!
//! ```text
//! |cos - cos_true|, |sin - sin_true| <= 1.70e-12 + 2π * delta(p)      (f64 values)
//! ```
//!
//! which for every `u32` position and `inv_freq <= 1` is at most `2.5e-12` (the position
//! term is `6.8e-13` at `p = 2^32`: it grows linearly, from `3.5e-16` at `p = 0`), and for
//! every accepted `inv_freq <= 2^95` (`D <= 1/2`; the `2^-99 * p` term stays below `2^-67`
//! turns) at most `2.8e-12`. With `attention_factor` 1, the f32 result is within
//! `2^-25 + 2.8e-12 <= 2.99e-8` of the true value at every `u32` position: the half ulp of
//! correct rounding plus 4e-5 of an ulp, far inside the 2.5e-7 target (the result is the
//! correctly rounded one unless the true value lies within 2.5e-12 of a rounding boundary).
//! For a general `attention_factor` the bound is half an f32 ulp of the result plus
//! `attention_factor * (2.5e-12 + 2^-53)`.
//!
//! `HfCompatible` computes cos and sin of the f32 angle `A` with the same bound, `p * D`
//! replaced by `|A| / 2π` (the `lo` part of `1/2π` is 32 bits below `hi`):
//! `delta <= 2^-54 + 3 * 2^-85 * |A|`, so `2.5e-12` for `|A| <= 2^32` and `6e-10` at the
//! clamp, `|A| = 2^50` (an f32 angle that large is only reached with `inv_freq_f32 > 2^18`;
//! its ulp is 2^27 radians, so its cos is meaningless anyway). The error of the f32 angle
//! itself, which grows with the position, is what the mode is for.
//!
//! # Bit identity
//!
//! Every tier runs [`fill_row`] with its own [`F64Simd`] token: the same IEEE 754 operations
//! (f64 add, sub, mul, exact sign clear, f64↔f32 conversions rounding to nearest even, bit
//! compares) in the same order, no fused multiply-add anywhere, lanes independent of one
//! another (a tail is computed in a zero-padded vector). So every tier produces the scalar
//! tier's bits; `tests::tiers_bit_identical` checks it.

use crate::kernels::Kernels;

#[cfg(test)]
mod tests;

/// The lane operations the generator uses, each exactly specified by IEEE 754 (or a bit
/// operation), so every implementation computes the same bits.
///
/// Implemented by zero-sized tokens whose existence proves the CPU supports the ISA (a
/// token is created only after detection, or by an `unsafe` constructor). All methods are
/// `#[inline(always)]` in the implementations, so they inline into the `#[target_feature]`
/// boundary function of their tier.
pub(crate) trait F64Simd: Copy {
    /// Lanes per vector, at most 8.
    const LANES: usize;
    /// A vector of `LANES` f64.
    type V: Copy;

    /// Every lane `x`.
    fn splat(self, x: f64) -> Self::V;
    /// `a + b`, rounded to nearest even.
    fn add(self, a: Self::V, b: Self::V) -> Self::V;
    /// `a - b`, rounded to nearest even.
    fn sub(self, a: Self::V, b: Self::V) -> Self::V;
    /// `a * b`, rounded to nearest even (never fused with another operation).
    fn mul(self, a: Self::V, b: Self::V) -> Self::V;
    /// `|a|`: the sign bit cleared.
    fn abs(self, a: Self::V) -> Self::V;
    /// Each lane rounded to the nearest f32 (ties to even) and widened back.
    fn round_f32(self, a: Self::V) -> Self::V;
    /// Per lane: if the bits of `|a|` exceed those of `limit` (so `|a| > limit`, or `a` is
    /// NaN), `limit` with the sign of `a`; otherwise `a`. `limit` is positive and finite.
    fn clamp_abs(self, a: Self::V, limit: f64) -> Self::V;
    /// Loads `src[..LANES]` (`src.len() >= LANES`).
    fn load(self, src: &[f64]) -> Self::V;
    /// Loads `src[..LANES]` widened to f64 (`src.len() >= LANES`).
    fn load_f32(self, src: &[f32]) -> Self::V;
    /// Rounds each lane to f32 (nearest even) and stores it to `dst[..LANES]`
    /// (`dst.len() >= LANES`).
    fn store_f32(self, a: Self::V, dst: &mut [f32]);

    /// Loads `src` (`src.len() < LANES`) into the low lanes; the others are 0.
    #[inline(always)]
    fn load_partial(self, src: &[f64]) -> Self::V {
        let mut buf = [0.0f64; 8];
        buf[..src.len()].copy_from_slice(src);
        self.load(&buf)
    }
    /// Loads `src` (`src.len() < LANES`) widened into the low lanes; the others are 0.
    #[inline(always)]
    fn load_f32_partial(self, src: &[f32]) -> Self::V {
        let mut buf = [0.0f32; 8];
        buf[..src.len()].copy_from_slice(src);
        self.load_f32(&buf)
    }
    /// Rounds the low `dst.len() < LANES` lanes to f32 and stores them to `dst`.
    #[inline(always)]
    fn store_f32_partial(self, a: Self::V, dst: &mut [f32]) {
        let mut buf = [0.0f32; 8];
        self.store_f32(a, &mut buf);
        let n = dst.len();
        dst.copy_from_slice(&buf[..n]);
    }
}

/// How the rotation angle `position * inv_freq` is formed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum AngleMode {
    /// The angle is formed from the f64 `inv_freq`, so it is accurate at every position.
    #[default]
    Exact,
    /// The angle is `f32(position) * inv_freq_f32` rounded in f32, as Hugging Face
    /// transformers forms it; cos/sin of that f32 angle are then taken accurately. Use it
    /// for parity with the reference implementation.
    HfCompatible,
}

/// What a row is computed from: the per-frequency inputs a `Frequencies` holds (built by
/// `RowInputs::new` in `freq.rs`, above the kernels).
#[derive(Clone, Copy, Debug)]
pub(crate) struct RowInputs<'a> {
    pub mode: AngleMode,
    /// [`Frequencies::turns_hi`] (used by `Exact`).
    pub turns_hi: &'a [f64],
    /// [`Frequencies::turns_lo`] (used by `Exact`).
    pub turns_lo: &'a [f64],
    /// [`Frequencies::inv_freq_f32`] (used by `HfCompatible`).
    pub inv_freq_f32: &'a [f32],
    pub attention_factor: f64,
}

impl RowInputs<'_> {
    /// Pairs this row has inputs for.
    fn pairs(&self) -> usize {
        match self.mode {
            AngleMode::HfCompatible => self.inv_freq_f32.len(),
            AngleMode::Exact => self.turns_hi.len().min(self.turns_lo.len()),
        }
    }
}

/// One tier's generator: fills `cos[i]`, `sin[i]` for `i < min(cos.len(), sin.len(),
/// pairs)` at `position`, and writes nothing else.
///
/// # Safety
/// The CPU supports the tier the function comes from (the dispatcher hands out a table only
/// after checking).
pub(crate) type SinCosFn = unsafe fn(&RowInputs<'_>, u32, &mut [f32], &mut [f32]);

/// A generator proven available on this CPU.
#[derive(Clone, Copy)]
pub(crate) struct SinCos {
    f: SinCosFn,
}

impl SinCos {
    /// The generator of a tier's kernel table.
    #[inline]
    pub(crate) fn of(kernels: &Kernels) -> Self {
        SinCos { f: kernels.sincos }
    }

    /// Fills the row of `position` (see [`SinCosFn`]).
    #[inline]
    pub(crate) fn fill(&self, inputs: &RowInputs<'_>, position: u32, cos: &mut [f32], sin: &mut [f32]) {
        // SAFETY: `f` comes from a `Kernels` table, which the dispatcher hands out only
        // after checking that the CPU supports its tier.
        unsafe { (self.f)(inputs, position, cos, sin) }
    }
}

/// `1/2π` as an unevaluated sum of four f64 (about 215 bits; each part is the rest rounded
/// to nearest, so the sum is within `2^-217` of `1/2π`).
pub(crate) const INV_2PI: [f64; 4] =
    [0.15915494309189535, -9.839338337591243e-18, -5.360718141446502e-34, 4.026781963297056e-50];

/// Veltkamp's split: `x = hi + lo` exactly, `hi` with at most `53 - s` significant bits.
/// Needs `|x| * (2^s + 1)` finite.
const fn veltkamp(x: f64, s: i32) -> (f64, f64) {
    let c = x * ((1u64 << s) as f64 + 1.0);
    let hi = c - (c - x);
    (hi, x - hi)
}

/// `1/2π` for `HfCompatible`: `HF_TURNS.0` has 29 significant bits, so its product with an
/// f32 angle (24 bits) is exact; `HF_TURNS.1` is the rest, rounded to f64.
const HF_TURNS: (f64, f64) = {
    let (hi, lo) = veltkamp(INV_2PI[0], 24);
    (hi, lo + INV_2PI[1])
};

/// The largest `|angle|` of `HfCompatible` (larger ones are clamped): keeps every `rint`
/// argument within `2^51` and the reduction error at `6e-10` rad.
const HF_MAX_ANGLE: f64 = (1u64 << 50) as f64;

/// Minimax coefficients of `sin(pi/2 x)`, `x` odd powers 1..=9, `|x| <= 1/2`.
const SIN: [f64; 5] = [
    1.5707963267576122,
    -0.6459640945212808,
    0.0796925593230346,
    -0.004681141461214965,
    0.0001579844693104091,
];
/// Minimax coefficients of `cos(pi/2 x) - 1`, even powers 2..=10, `|x| <= 1/2`.
const COS: [f64; 5] = [
    -1.2337005501249463,
    0.2536695072643426,
    -0.020863469031658286,
    0.0009191659012208869,
    -2.4857068351721465e-05,
];

/// `1.5 * 2^52`: `(v + RINT) - RINT` rounds `|v| <= 2^51` to the nearest integer, ties even.
const RINT: f64 = 6755399441055744.0;

/// `a * b` as `hi + lo` exactly (Dekker's product on Veltkamp halves; plain operations, so
/// it runs anywhere, Miri included). Exact when `|a|, |b| < 2^996` and `lo` does not
/// underflow.
pub(crate) fn two_prod(a: f64, b: f64) -> (f64, f64) {
    let hi = a * b;
    let (ah, al) = veltkamp(a, 27);
    let (bh, bl) = veltkamp(b, 27);
    (hi, (((ah * bh - hi) + ah * bl) + al * bh) + al * bl)
}

/// `a + b` as `hi + lo` exactly (Knuth).
fn two_sum(a: f64, b: f64) -> (f64, f64) {
    let s = a + b;
    let bb = s - a;
    (s, (a - (s - bb)) + (b - bb))
}

/// The turns per position of one frequency, `inv_freq / 2π`, reduced modulo 1 and split as
/// `hi + lo` with `|hi| <= 1/2` of at most 21 significant bits (so `p * hi` is exact for
/// every `p < 2^32`) and `|lo| <= 2^-21 |hi|`.
///
/// `inv_freq * (c0 + c1 + c2 + c3)` (the four parts of [`INV_2PI`]) is formed as seven f64
/// terms, `p_i + e_i = inv_freq * c_i` exactly by Dekker's product for `i < 3` and `p3`
/// rounded; each term loses its whole turns exactly (`t - rint(t)` is exact for every f64,
/// and 0 for `|t| >= 2^52`), and the fractions are summed in double-double and reduced once
/// more. Every step but `p3`, the last part of `1/2π` and the summation is exact, so for any
/// `0 <= inv_freq <= 2^95` (every value [`Frequencies`] accepts) the result is within
/// `2^-99` turns of `inv_freq / 2π mod 1` (the leftover of `1/2π` contributes
/// `2^95 * 2^-217`, `p3`'s rounding `2^-120`, the summation of seven fractions below
/// `2^-100`). A position `p < 2^32` multiplies that by at most `2^32`: `2^-67` turns.
pub(crate) fn turns(inv_freq: f64) -> (f64, f64) {
    let frac = |t: f64| t - libm::rint(t);
    let (p0, e0) = two_prod(inv_freq, INV_2PI[0]);
    let (p1, e1) = two_prod(inv_freq, INV_2PI[1]);
    let (p2, e2) = two_prod(inv_freq, INV_2PI[2]);
    let p3 = inv_freq * INV_2PI[3];
    // Smallest first, into a double-double `(s, e)`; every fraction is at most 1/2.
    let (mut s, mut e) = (0.0, 0.0);
    for t in [p3, e2, p2, e1, p1, e0, p0] {
        let (sum, err) = two_sum(s, frac(t));
        (s, e) = (sum, e + err);
    }
    // |s| <= 7/2: drop its whole turns (exact), then fold in `e` and reduce once more.
    let (s, e) = two_sum(frac(s), e);
    let (s, e) = two_sum(frac(s), e);
    let (hi, rest) = veltkamp(s, 32);
    (hi, rest + e)
}

/// Fills `hi[i] + lo[i] = turns(inv_freq[i])` (see [`turns`]); the slices have one length.
pub(crate) fn split_turns(inv_freq: &[f64], hi: &mut [f64], lo: &mut [f64]) {
    for ((&f, h), l) in inv_freq.iter().zip(hi.iter_mut()).zip(lo.iter_mut()) {
        (*h, *l) = turns(f);
    }
}

/// Round to nearest integer, ties even, for `|v| <= 2^51`.
#[inline(always)]
fn rint<S: F64Simd>(s: S, v: S::V) -> S::V {
    let m = s.splat(RINT);
    s.sub(s.add(v, m), m)
}

/// cos and sin of `2π * P * (hi + lo)`, in f64, before the attention factor.
#[inline(always)]
pub(crate) fn cos_sin<S: F64Simd>(s: S, p: S::V, hi: S::V, lo: S::V) -> (S::V, S::V) {
    let t = s.mul(p, hi);
    let r = s.sub(t, rint(s, t));
    let sum = s.add(r, s.mul(p, lo));
    let u = s.sub(sum, rint(s, sum));
    let w = s.mul(u, s.splat(4.0));
    let k = rint(s, w);
    let x = s.sub(w, k);
    let (sp, cp) = poly(s, x);
    let ak = s.abs(k);
    let a = s.sub(s.splat(1.0), ak);
    let b = s.mul(k, s.sub(s.splat(2.0), ak));
    let c = s.sub(s.mul(cp, a), s.mul(sp, b));
    let sn = s.add(s.mul(sp, a), s.mul(cp, b));
    (c, sn)
}

/// `(sin(pi/2 x), cos(pi/2 x))` for `|x| <= 1/2`, by the minimax polynomials.
#[inline(always)]
pub(crate) fn poly<S: F64Simd>(s: S, x: S::V) -> (S::V, S::V) {
    let z = s.mul(x, x);
    let mut sp = s.splat(SIN[4]);
    for &c in SIN[..4].iter().rev() {
        sp = s.add(s.splat(c), s.mul(z, sp));
    }
    let mut cp = s.splat(COS[4]);
    for &c in COS[..4].iter().rev() {
        cp = s.add(s.splat(c), s.mul(z, cp));
    }
    (s.mul(x, sp), s.add(s.splat(1.0), s.mul(z, cp)))
}

/// Computes one block of lanes and stores `LANES` (or, for a tail, `cos.len()`) results.
#[inline(always)]
fn block<S: F64Simd>(s: S, p: S::V, hi: S::V, lo: S::V, af: S::V, cos: &mut [f32], sin: &mut [f32]) {
    let (c, sn) = cos_sin(s, p, hi, lo);
    let (c, sn) = (s.mul(c, af), s.mul(sn, af));
    if cos.len() >= S::LANES {
        s.store_f32(c, cos);
        s.store_f32(sn, sin);
    } else {
        s.store_f32_partial(c, cos);
        s.store_f32_partial(sn, sin);
    }
}

/// The `HfCompatible` angles of a block: the f32 product `f32(p) * inv_freq_f32`, clamped.
#[inline(always)]
fn hf_angle<S: F64Simd>(s: S, p: S::V, g: S::V) -> S::V {
    s.clamp_abs(s.round_f32(s.mul(p, g)), HF_MAX_ANGLE)
}

/// The generator, for any tier's token (the contract of [`SinCosFn`]).
#[inline(always)]
pub(crate) fn fill_row<S: F64Simd>(
    s: S,
    inputs: &RowInputs<'_>,
    position: u32,
    cos: &mut [f32],
    sin: &mut [f32],
) {
    let n = inputs.pairs().min(cos.len()).min(sin.len());
    let (cos, sin) = (&mut cos[..n], &mut sin[..n]);
    let af = s.splat(inputs.attention_factor);
    let mut cs = cos.chunks_exact_mut(S::LANES);
    let mut ss = sin.chunks_exact_mut(S::LANES);
    match inputs.mode {
        AngleMode::HfCompatible => {
            let p = s.splat(f64::from(position as f32));
            let (hi, lo) = (s.splat(HF_TURNS.0), s.splat(HF_TURNS.1));
            let mut gs = inputs.inv_freq_f32[..n].chunks_exact(S::LANES);
            for ((g, c), sn) in (&mut gs).zip(&mut cs).zip(&mut ss) {
                let a = hf_angle(s, p, s.load_f32(g));
                block(s, a, hi, lo, af, c, sn);
            }
            let g = gs.remainder();
            if !g.is_empty() {
                let a = hf_angle(s, p, s.load_f32_partial(g));
                block(s, a, hi, lo, af, cs.into_remainder(), ss.into_remainder());
            }
        }
        AngleMode::Exact => {
            let p = s.splat(f64::from(position));
            let mut his = inputs.turns_hi[..n].chunks_exact(S::LANES);
            let mut los = inputs.turns_lo[..n].chunks_exact(S::LANES);
            for (((hi, lo), c), sn) in (&mut his).zip(&mut los).zip(&mut cs).zip(&mut ss) {
                block(s, p, s.load(hi), s.load(lo), af, c, sn);
            }
            let (hi, lo) = (his.remainder(), los.remainder());
            if !hi.is_empty() {
                let (hi, lo) = (s.load_partial(hi), s.load_partial(lo));
                block(s, p, hi, lo, af, cs.into_remainder(), ss.into_remainder());
            }
        }
    }
}
