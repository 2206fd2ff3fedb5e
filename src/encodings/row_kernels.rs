//! The element-wise inner loops of the encoding kernels, picked from a tier's
//! [`Kernels`] table, and their safe fronts. The signatures and the scalar oracles (which
//! define the exact operations) live with the kernels, in `src/kernels/rows.rs`; the SIMD
//! tiers' versions in `src/kernels/generic/rows.rs`.

use crate::dispatch::{self, Tier};
use crate::element::Element;
use crate::error::RopeError;
pub(crate) use crate::kernels::rows::{AddRowFn, AlibiRowFn};
use crate::kernels::{Kernels, SelectAddRow};

/// The kernel table an encoding call runs on: that of `tier` when the caller pinned one
/// (checked available when it was pinned), otherwise the process-wide dispatcher's.
#[inline]
pub(crate) fn kernels(tier: Option<Tier>) -> &'static Kernels {
    match tier {
        Some(t) => dispatch::kernels_for(t).unwrap_or_else(dispatch::active_kernels),
        None => dispatch::active_kernels(),
    }
}

/// Checks that `tier` can be pinned (the `with_tier` builders of the encodings).
///
/// # Errors
/// [`RopeError::TierUnavailable`] if this build or CPU lacks it.
pub(crate) fn check_tier(tier: Tier) -> Result<Tier, RopeError> {
    if tier.is_available() {
        Ok(tier)
    } else {
        Err(RopeError::TierUnavailable)
    }
}

/// The add-row kernel of a tier's table for embeddings `T` and encoding rows `P`.
#[inline]
pub(crate) fn add_row_fn<T: Element, P: SelectAddRow<T>>(k: &Kernels) -> AddRowFn<T, P> {
    P::add_row_fn(k)
}

/// The ALiBi row kernel of a tier's table.
#[inline]
pub(crate) fn alibi_row_fn(k: &Kernels) -> AlibiRowFn {
    crate::kernels::alibi_row_fn(k)
}

/// Safe front of an [`AddRowFn`]: adds `pe` to `x` element-wise (`x.len() == pe.len()`).
#[inline(always)]
pub(crate) fn add_row<T, P>(f: AddRowFn<T, P>, x: &mut [T], pe: &[P]) {
    debug_assert_eq!(x.len(), pe.len());
    let n = x.len().min(pe.len());
    // SAFETY: both slices hold at least n elements, and a `&mut` and a `&` slice cannot
    // overlap; `f` comes from a `Kernels` table, handed out only for a supported tier.
    unsafe { f(x.as_mut_ptr(), pe.as_ptr(), n) }
}

/// Safe front of an [`AlibiRowFn`].
#[inline(always)]
pub(crate) fn alibi_row(f: AlibiRowFn, row: &mut [f32], slope: f32, first_distance: i64, symmetric: bool) {
    debug_assert!(first_distance.checked_add(row.len() as i64).is_some());
    // SAFETY: the row holds row.len() elements; callers pass distances between u32
    // positions, far from the i64 limits; `f` comes from a `Kernels` table, handed out
    // only for a supported tier.
    unsafe { f(row.as_mut_ptr(), row.len(), slope, first_distance, symmetric) }
}

#[cfg(test)]
mod tests {
    use half::{bf16, f16};

    use super::*;
    use crate::element::{CANONICAL_NAN_BF16, CANONICAL_NAN_F16, CANONICAL_NAN_F32};

    /// Every tier's table: the checks below hold for each (the tier suite in tests/tiers/
    /// compares the tiers with the oracle on random rows).
    fn tables() -> impl Iterator<Item = &'static Kernels> {
        dispatch::available_tiers().map(|t| kernels(Some(t)))
    }

    #[test]
    fn add_row_rounds_once_and_canonicalizes_nan() {
        for k in tables() {
            add_row_case(k);
        }
    }

    fn add_row_case(k: &Kernels) {
        // f16: 1 + 2^-11 is a tie between 1 and 1 + 2^-10 (ties to even: 1); just above
        // the tie rounds up; inf + -inf is NaN, stored canonical.
        let mut x = [f16::from_f32_const(1.0), f16::from_f32_const(1.0), f16::from_f32_const(f32::INFINITY)];
        // Exact literals (2^-11, 2^-11 + 2^-20): Miri may perturb `powi` by an ulp.
        let pe = [0.00048828125, 0.00048828125 + 1.0 / 1_048_576.0, f32::NEG_INFINITY];
        add_row(add_row_fn::<f16, f32>(k), &mut x, &pe);
        assert_eq!(x[0].to_bits(), f16::from_f32_const(1.0).to_bits());
        assert_eq!(x[1].to_bits(), f16::from_f32_const(1.0 + 0.0009765625).to_bits());
        assert_eq!(x[2].to_bits(), CANONICAL_NAN_F16);

        let mut y = [bf16::from_f32(2.0), bf16::from_f32(0.0)];
        let pe16 = [bf16::from_f32(0.5), bf16::from_f32(f32::NAN)];
        add_row(add_row_fn::<bf16, bf16>(k), &mut y, &pe16);
        assert_eq!(y[0].to_f32(), 2.5);
        assert_eq!(y[1].to_bits(), CANONICAL_NAN_BF16);

        let mut z = [1.0f32, f32::from_bits(0x7FC0_1234)];
        add_row(add_row_fn::<f32, f32>(k), &mut z, &[2.0, 1.0]);
        assert_eq!(z[0], 3.0);
        assert_eq!(z[1].to_bits(), CANONICAL_NAN_F32);
    }

    #[test]
    fn alibi_row_signs() {
        for k in tables() {
            let mut r = [10.0f32; 5];
            // Keys at distances -2..=2 from the query.
            alibi_row(alibi_row_fn(k), &mut r, 0.5, -2, false);
            assert_eq!(r, [9.0, 9.5, 10.0, 10.5, 11.0], "{}", k.tier);
            let mut s = [10.0f32; 5];
            alibi_row(alibi_row_fn(k), &mut s, 0.5, -2, true);
            assert_eq!(s, [9.0, 9.5, 10.0, 9.5, 9.0], "{}", k.tier);
        }
    }

    #[test]
    fn alibi_row_i32_and_i64_paths_agree_with_the_definition() {
        // Rows inside i32, crossing i32::MAX, crossing i32::MIN, and beyond 2^32 (where
        // the distance itself rounds in f32); crossing +-2^24 (where the SIMD tiers hand
        // the row to the oracle) and ending exactly there.
        let slope = 0.3f32;
        let firsts = [
            -70_000i64,
            i64::from(i32::MAX) - 3,
            i64::from(i32::MIN) - 3,
            -(1i64 << 33) - 7,
            (1 << 24) - 4,
            (1 << 24) - 8,
            -(1 << 24) - 2,
            -(1 << 24),
        ];
        for (k, first) in tables().flat_map(|k| firsts.map(|f| (k, f))) {
            for symmetric in [false, true] {
                let mut row: [f32; 9] = core::array::from_fn(|j| j as f32 * 0.25 - 1.0);
                let before = row;
                alibi_row(alibi_row_fn(k), &mut row, slope, first, symmetric);
                for j in 0..9 {
                    let d = (first + j as i64) as f32;
                    let bias = if symmetric { -(slope * d.abs()) } else { slope * d };
                    assert_eq!(
                        row[j].to_bits(),
                        (before[j] + bias).to_bits(),
                        "{} {first} {symmetric} {j}",
                        k.tier
                    );
                }
            }
        }
    }
}
