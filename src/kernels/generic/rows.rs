//! The encoding row kernels (the add of a sinusoidal or learned row, the ALiBi bias of a
//! score row), written once over [`Simd`] like the rotate kernel of the parent module and
//! instantiated per tier.
//!
//! # Operation order (bit-identity with the scalar oracles)
//! The oracles are `add_row_scalar` and `alibi_row_scalar` in
//! `src/kernels/rows.rs`; every lane computes exactly what they compute, without
//! fusing:
//!
//! - add: `y = x + pe` (both widened exactly to f32), one f32 add, rounded once to the
//!   element type by [`SimdElement::store`] (NaN lanes replaced by the canonical NaN first).
//! - ALiBi: `d` is the f32 distance of the lane, `b = slope * d` (`Causal`) or
//!   `b = -(slope * |d|)` (`Symmetric`, the negation an exact sign flip), `y = row + b`,
//!   stored with the canonical NaN. The oracle rounds the exact integer distance to f32
//!   once; when every distance of the row lies in `[-2^24, 2^24]` that rounding is exact,
//!   and so is the vector form here: `d = f32(first) + lane` and `d + LANES` per step are
//!   sums of integers whose results are exact in f32. Rows with a distance beyond `2^24`
//!   (a context of more than 16M tokens) run the oracle itself, which rounds them.
//!
//! IEEE 754 addition and multiplication are commutative bit for bit (the NaN payload aside,
//! and every NaN is stored canonical), so operand order does not matter.
//!
//! # Tails and prefetch
//! As in the rotate kernel: two vectors per step with one NaN check, at most one single
//! vector, then the last `< LANES` elements through zero-padded stack buffers ([`Pad`]),
//! of which only the live lanes are copied back. The two-vector loops prefetch
//! [`PREFETCH_BYTES`] ahead, as the roofline pass does: on the development machine that
//! took the ALiBi add of 32 x 512 x 512 scores from 2.2 ms to 1.4 ms on the AVX-512 tier
//! (1.45 to 1.35 ms on AVX2). Aligning the stores to the vector size first did not help.

use super::{Pad, Simd, SimdElement, MAX_LANES};
use crate::kernels::rows::alibi_row_scalar;

/// Lane indices `0, 1, 2, ..`, exact in f32.
static IOTA: [f32; MAX_LANES] = {
    let mut a = [0.0f32; MAX_LANES];
    let mut i = 0;
    while i < MAX_LANES {
        a[i] = i as f32;
        i += 1;
    }
    a
};

/// How far ahead the loops prefetch (as the roofline pass of the parent module does).
const PREFETCH_BYTES: usize = 1024;

/// The largest distance magnitude every integer up to which is exact in f32.
const EXACT_DISTANCE: i64 = 1 << 24;

/// `x[i] = round_T(x[i] + pe[i])` for `i < n`: the vector form of
/// [`AddRowFn`](crate::kernels::rows::AddRowFn).
///
/// # Safety
/// The contract of `AddRowFn` (`x .. x + n` valid for reads and writes, `pe .. pe + n`
/// for reads, not overlapping); `s` proves the CPU supports its tier.
#[inline(always)]
pub(crate) unsafe fn add_row<S: Simd, T: SimdElement, P: SimdElement>(
    s: S,
    x: *mut T,
    pe: *const P,
    n: usize,
) {
    let lanes = S::LANES;
    let body2 = n - n % (2 * lanes);
    let body = n - n % lanes;
    let mut i = 0;
    while i < body2 {
        s.prefetch(x.wrapping_add(i).cast::<u8>().wrapping_add(PREFETCH_BYTES));
        s.prefetch(pe.wrapping_add(i).cast::<u8>().wrapping_add(PREFETCH_BYTES));
        // SAFETY: i + 2 * lanes <= n: both vectors lie in both ranges; the loads precede the
        // stores.
        unsafe {
            let (p0, p1) = (x.add(i), x.add(i + lanes));
            let y0 = s.add(T::load(s, p0), P::load(s, pe.add(i)));
            let y1 = s.add(T::load(s, p1), P::load(s, pe.add(i + lanes)));
            T::store2(s, [p0, p1], [y0, y1]);
        }
        i += 2 * lanes;
    }
    if body2 < body {
        // SAFETY: body2 + lanes == body <= n.
        unsafe {
            let p = x.add(body2);
            T::store(s, p, s.add(T::load(s, p), P::load(s, pe.add(body2))));
        }
    }
    if body < n {
        let tail = n - body;
        // SAFETY: body..n is in both ranges; tail < lanes <= MAX_LANES, and each pad holds
        // two vectors.
        unsafe {
            let mut xb = Pad::read(x.add(body), tail);
            let eb = Pad::read(pe.add(body), tail);
            let p = xb.0.as_mut_ptr();
            T::store(s, p, s.add(T::load(s, p), P::load(s, eb.0.as_ptr())));
            xb.write(x.add(body), tail);
        }
    }
}

/// The ALiBi bias of one query row added to `n` scores: the vector form of
/// [`AlibiRowFn`](crate::kernels::rows::AlibiRowFn).
///
/// # Safety
/// The contract of `AlibiRowFn` (`row .. row + n` valid for reads and writes,
/// `first_distance + n` does not overflow `i64`); `s` proves the CPU supports its tier.
#[inline(always)]
pub(crate) unsafe fn alibi_row<S: Simd>(
    s: S,
    row: *mut f32,
    n: usize,
    slope: f32,
    first_distance: i64,
    symmetric: bool,
) {
    if n == 0 {
        return;
    }
    // n <= isize::MAX (a buffer), and first_distance + n does not overflow (contract).
    let last = first_distance + (n as i64 - 1);
    if first_distance < -EXACT_DISTANCE || last > EXACT_DISTANCE {
        // SAFETY: forwarded from the caller.
        return unsafe { alibi_row_scalar(row, n, slope, first_distance, symmetric) };
    }
    // |first_distance| <= 2^24: exact in f32.
    let first = first_distance as f32;
    if symmetric {
        // SAFETY: forwarded from the caller; every distance is within 2^24.
        unsafe { alibi_form::<S, true>(s, row, n, slope, first) }
    } else {
        // SAFETY: as above.
        unsafe { alibi_form::<S, false>(s, row, n, slope, first) }
    }
}

/// [`alibi_row`] for one form, the distances `first + j` all within `2^24` in magnitude.
///
/// # Safety
/// `row .. row + n` is valid for reads and writes; `first + n - 1` (as integers) is within
/// `[-2^24, 2^24]` and `first` an integer.
#[inline(always)]
unsafe fn alibi_form<S: Simd, const SYMMETRIC: bool>(s: S, row: *mut f32, n: usize, slope: f32, first: f32) {
    let lanes = S::LANES;
    let slope = s.splat(slope);
    let neg = s.splat(-0.0);
    let step = s.splat(lanes as f32);
    let bias = |d: S::V| {
        if SYMMETRIC {
            s.xor(s.mul(slope, s.abs(d)), neg)
        } else {
            s.mul(slope, d)
        }
    };
    // SAFETY: IOTA holds MAX_LANES >= LANES values.
    let mut d = s.add(s.splat(first), unsafe { s.load(IOTA.as_ptr()) });
    let body2 = n - n % (2 * lanes);
    let body = n - n % lanes;
    let mut j = 0;
    while j < body2 {
        s.prefetch(row.wrapping_add(j).cast::<u8>().wrapping_add(PREFETCH_BYTES));
        let d1 = s.add(d, step);
        // SAFETY: j + 2 * lanes <= n; the loads precede the stores.
        unsafe {
            let (p0, p1) = (row.add(j), row.add(j + lanes));
            let y0 = s.add(s.load(p0), bias(d));
            let y1 = s.add(s.load(p1), bias(d1));
            f32::store2(s, [p0, p1], [y0, y1]);
        }
        d = s.add(d1, step);
        j += 2 * lanes;
    }
    if body2 < body {
        // SAFETY: body2 + lanes == body <= n.
        unsafe {
            let p = row.add(body2);
            f32::store(s, p, s.add(s.load(p), bias(d)));
        }
        d = s.add(d, step);
    }
    if body < n {
        let tail = n - body;
        // SAFETY: body..n is in the row; tail < lanes, and the pad holds two vectors. The
        // padding lanes' distances may be inexact; they are never written back.
        unsafe {
            let mut b = Pad::read(row.add(body), tail);
            let p = b.0.as_mut_ptr();
            f32::store(s, p, s.add(s.load(p), bias(d)));
            b.write(row.add(body), tail);
        }
    }
}
