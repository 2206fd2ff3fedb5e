//! Element types: `f32`, [`half::f16`] and [`half::bf16`].
//!
//! Every kernel loads an element, computes in `f32`, and rounds once when storing:
//! round to nearest, ties to even, for both half types (subnormals included). A NaN result
//! is stored as the canonical quiet NaN of the type (`0x7FC0_0000`, `0x7E00`, `0x7FC0`), so
//! the output bits never depend on which NaN payload a CPU propagates. Pass-through
//! dimensions (past `rotary_dim`) are copied bit for bit.
//!
//! The scalar `f16` conversions use `half`'s software routines (`*_const`), never F16C:
//! the oracle's bits must not depend on the build's target features, and Miri cannot
//! interpret `vcvtps2ph`. Both round to nearest even, so results are the same.

use half::{bf16, f16};

mod sealed {
    /// Seals [`Element`](super::Element); also ties each type to its kernel entry points
    /// (including the add of encoding rows of its own type and the convert kernels into
    /// every destination type).
    #[allow(private_bounds)]
    pub trait Sealed:
        crate::kernels::SelectKernel
        + crate::kernels::SelectAddRow<Self>
        + crate::kernels::SelectConvert<f32>
        + crate::kernels::SelectConvert<half::f16>
        + crate::kernels::SelectConvert<half::bf16>
        + crate::kernels::SelectConvert<crate::kernels::q8_0::BlockQ8_0>
    {
    }
    impl Sealed for f32 {}
    impl Sealed for half::f16 {}
    impl Sealed for half::bf16 {}
}

/// The storage type of an element kind, as the C ABI and tests see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DType {
    /// IEEE 754 binary32.
    F32,
    /// IEEE 754 binary16.
    F16,
    /// bfloat16 (the upper half of a binary32).
    BF16,
}

/// An element type the kernels accept. Sealed: implemented for `f32`, `f16` and `bf16`.
pub trait Element:
    Copy + Default + PartialEq + core::fmt::Debug + Send + Sync + sealed::Sealed + 'static
{
    /// Which type this is.
    const DTYPE: DType;
    /// Exact widening to `f32`.
    fn to_f32(self) -> f32;
    /// Round an `f32` to this type (nearest, ties to even; NaN becomes the canonical NaN).
    fn from_f32(v: f32) -> Self;
    /// The raw bits, widened to `u32` (for bit-exact comparisons).
    fn to_bits_u32(self) -> u32;
}

/// The canonical quiet NaN stored for a NaN result in `f32`.
pub const CANONICAL_NAN_F32: u32 = 0x7FC0_0000;
/// The canonical quiet NaN stored for a NaN result in `f16`.
pub const CANONICAL_NAN_F16: u16 = 0x7E00;
/// The canonical quiet NaN stored for a NaN result in `bf16`.
pub const CANONICAL_NAN_BF16: u16 = 0x7FC0;

impl Element for f32 {
    const DTYPE: DType = DType::F32;
    #[inline(always)]
    fn to_f32(self) -> f32 {
        self
    }
    #[inline(always)]
    fn from_f32(v: f32) -> Self {
        if v.is_nan() {
            f32::from_bits(CANONICAL_NAN_F32)
        } else {
            v
        }
    }
    #[inline(always)]
    fn to_bits_u32(self) -> u32 {
        self.to_bits()
    }
}

impl Element for f16 {
    const DTYPE: DType = DType::F16;
    #[inline(always)]
    fn to_f32(self) -> f32 {
        f16::to_f32_const(self)
    }
    #[inline(always)]
    fn from_f32(v: f32) -> Self {
        if v.is_nan() {
            f16::from_bits(CANONICAL_NAN_F16)
        } else {
            f16::from_f32_const(v)
        }
    }
    #[inline(always)]
    fn to_bits_u32(self) -> u32 {
        u32::from(self.to_bits())
    }
}

impl Element for bf16 {
    const DTYPE: DType = DType::BF16;
    #[inline(always)]
    fn to_f32(self) -> f32 {
        bf16::to_f32(self)
    }
    #[inline(always)]
    fn from_f32(v: f32) -> Self {
        if v.is_nan() {
            bf16::from_bits(CANONICAL_NAN_BF16)
        } else {
            bf16::from_f32(v)
        }
    }
    #[inline(always)]
    fn to_bits_u32(self) -> u32 {
        u32::from(self.to_bits())
    }
}
