//! The row kernels of the positional encodings (issue 13's sinusoidal/learned add and ALiBi):
//! their signatures and the scalar oracles. The SIMD tiers' versions are written once in
//! `src/kernels/generic/rows.rs`; the encodings (`src/encodings/`) pick them per tier.
//!
//! Every tier must be bit-identical to the scalar versions here, which define the exact
//! operations (no fused multiply-add):
//!
//! ```text
//! add row:    x[i] = T::from_f32(x[i].to_f32() + pe[i].to_f32())
//! ALiBi row:  d = f32(first_distance + j)      (exact integer, rounded once to f32)
//!             b = slope * d                    Causal
//!             b = -(slope * |d|)               Symmetric
//!             row[j] = f32::from_f32(row[j] + b)
//! ```
//!
//! `from_f32` rounds to nearest, ties to even, and stores a NaN result as the canonical NaN
//! of the type ([`Element`]).

use crate::kernels::element::Element;

/// Adds an encoding row to a row of elements in place:
/// `x[i] = T::from_f32(x[i].to_f32() + pe[i].to_f32())` for `i < n`.
///
/// `P` is `f32` (a generated or f32 table row) or `T` itself (a learned table stored in the
/// embeddings' type). Instances the tiers will provide: `(f32, f32)`, `(f16, f32)`,
/// `(bf16, f32)`, `(f16, f16)`, `(bf16, bf16)`.
///
/// # Safety
/// `x .. x + n` must be valid for reads and writes, `pe .. pe + n` valid for reads, and the
/// two ranges must not overlap. The CPU supports the tier of the
/// [`Kernels`](super::Kernels) table the function comes from (the dispatcher hands out a table only after
/// detecting its features).
pub(crate) type AddRowFn<T, P> = unsafe fn(x: *mut T, pe: *const P, n: usize);

/// Adds the ALiBi bias of one query row to `n` scores in place (see the module docs for
/// the exact operations): score `j` gets the bias of the key at relative distance
/// `first_distance + j` (`key_position - query_position`).
///
/// # Safety
/// `row .. row + n` must be valid for reads and writes; `first_distance + n` must not
/// overflow `i64`. The CPU supports the tier of the [`Kernels`] table the function comes
/// from.
pub(crate) type AlibiRowFn =
    unsafe fn(row: *mut f32, n: usize, slope: f32, first_distance: i64, symmetric: bool);

/// The scalar add-row kernel: the oracle of [`AddRowFn`].
///
/// # Safety
/// The contract of [`AddRowFn`].
pub(crate) unsafe fn add_row_scalar<T: Element, P: Element>(x: *mut T, pe: *const P, n: usize) {
    for i in 0..n {
        // SAFETY: i < n, and the caller guarantees both ranges hold n elements.
        unsafe {
            let v = (*x.add(i)).to_f32() + (*pe.add(i)).to_f32();
            *x.add(i) = T::from_f32(v);
        }
    }
}

/// The scalar ALiBi row kernel: the oracle of [`AlibiRowFn`].
///
/// # Safety
/// The contract of [`AlibiRowFn`].
pub(crate) unsafe fn alibi_row_scalar(
    row: *mut f32,
    n: usize,
    slope: f32,
    first_distance: i64,
    symmetric: bool,
) {
    // SAFETY: the caller guarantees `row .. row + n` is valid for reads and writes, and
    // nothing else refers to it during the call.
    let row = unsafe { core::slice::from_raw_parts_mut(row, n) };
    // A distance converts to the same f32 from i32 as from i64 (both round the exact
    // integer to nearest, ties to even); the i32 conversion vectorizes, so rows whose
    // distances all fit in i32 (every realistic one) take it.
    let fits_i32 = first_distance >= i64::from(i32::MIN)
        && first_distance.saturating_add(n as i64) <= i64::from(i32::MAX);
    match (fits_i32, symmetric) {
        (true, false) => alibi_loop::<false>(row, slope, |j| (first_distance as i32 + j as i32) as f32),
        (true, true) => alibi_loop::<true>(row, slope, |j| (first_distance as i32 + j as i32) as f32),
        (false, false) => alibi_loop::<false>(row, slope, |j| (first_distance + j as i64) as f32),
        (false, true) => alibi_loop::<true>(row, slope, |j| (first_distance + j as i64) as f32),
    }
}

/// `row[j] = from_f32(row[j] + bias(distance(j)))`, the bias of the form `SYMMETRIC`.
#[inline(always)]
fn alibi_loop<const SYMMETRIC: bool>(row: &mut [f32], slope: f32, distance: impl Fn(usize) -> f32) {
    for (j, s) in row.iter_mut().enumerate() {
        let d = distance(j);
        let bias = if SYMMETRIC { -(slope * d.abs()) } else { slope * d };
        *s = f32::from_f32(*s + bias);
    }
}
