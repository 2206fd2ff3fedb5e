//! What the tests need of an element type beyond [`Element`]: raw bits, a canary, the
//! special values to feed, the rounding error bounds, and rounding done with the `half`
//! crate directly (not through the crate's own `Element::from_f32`), so an expectation
//! cannot share a conversion bug with the kernels. No `rand`: the fuzz targets include
//! this file alone.

use rope_kernels::{bf16, f16, Element};

/// An element type as the tests see it.
pub trait TestElem: Element {
    /// Name for messages.
    const NAME: &'static str;
    /// Bits per element (32 or 16).
    const BITS: u32;
    /// A NaN payload no kernel ever stores (stores are canonical NaNs), put around every
    /// buffer and in the gaps between strided rows.
    const CANARY: u32;
    /// The canonical NaN a NaN result is stored as (written out from `element.rs`'s docs).
    const CANONICAL_NAN: u32;
    /// Values worth trying: zeros, infinities, NaN payloads, subnormals, the extremes, and
    /// values next to rounding boundaries.
    const SPECIALS: &'static [u32];
    /// Largest binary exponent of the "moderate" random values (keeps f16 far from overflow).
    const MAX_EXP: i32;
    /// Unit roundoff of storing an f32 value in this type (0 for f32: no second rounding).
    const U: f64;
    /// Half the smallest positive subnormal of this type (absolute error of a store near 0).
    const ETA: f64;
    /// The element with bits `b` (the low 16 for the 16-bit types).
    fn from_bits(b: u32) -> Self;
    /// `v` rounded once to this type (nearest, ties to even); NaN gives the canonical NaN.
    fn round(v: f32) -> u32;
}

impl TestElem for f32 {
    const NAME: &'static str = "f32";
    const BITS: u32 = 32;
    const CANARY: u32 = 0x7FA5_5A5A;
    const CANONICAL_NAN: u32 = 0x7FC0_0000;
    const SPECIALS: &'static [u32] = &[
        0x0000_0000, // +0
        0x8000_0000, // -0
        0x7F80_0000, // +inf
        0xFF80_0000, // -inf
        0x7FC0_0000, // canonical NaN
        0xFFC0_1234, // negative quiet NaN with payload
        0x7F80_0001, // signalling NaN
        0x0000_0001, // smallest subnormal
        0x807F_FFFF, // largest negative subnormal
        0x0080_0000, // smallest normal
        0x7F7F_FFFF, // f32::MAX
        0xFF7F_FFFF, // f32::MIN
        0x3F80_0000, // 1
        0xBF80_0000, // -1
        0x3F80_0001, // 1 + ulp
        0x4B80_0000, // 2^24
        0x3F00_0000, // 0.5
        0x5F00_0000, // 2^63: products overflow
        0x8000_0003, // negative subnormal
        0x007F_FFFF, // largest subnormal
        0x7FA0_1234, // signalling NaN with payload
        0x3380_0000, // 2^-24
    ];
    const MAX_EXP: i32 = 12;
    const U: f64 = 0.0;
    const ETA: f64 = 0.0;
    fn from_bits(b: u32) -> Self {
        f32::from_bits(b)
    }
    fn round(v: f32) -> u32 {
        if v.is_nan() {
            Self::CANONICAL_NAN
        } else {
            v.to_bits()
        }
    }
}

impl TestElem for f16 {
    const NAME: &'static str = "f16";
    const BITS: u32 = 16;
    const CANARY: u32 = 0x7D5A;
    const CANONICAL_NAN: u32 = 0x7E00;
    const SPECIALS: &'static [u32] = &[
        0x0000, 0x8000, // ±0
        0x7C00, 0xFC00, // ±inf
        0x7E00, 0xFE55, 0x7C01, // NaNs
        0x0001, 0x83FF, // subnormals
        0x0400, // smallest normal
        0x7BFF, 0xFBFF, // ±65504
        0x3C00, 0xBC00, 0x3C01, // ±1, 1 + ulp
        0x3800, // 0.5
        0x7800, // 32768: products overflow
        0x8003, 0x03FF, // subnormals
        0xFE01, 0x7D23, // NaNs
        0x1400, // 2^-5
    ];
    const MAX_EXP: i32 = 4;
    // binary16 has an 11-bit significand: u = 2^-11; smallest subnormal 2^-24.
    const U: f64 = 1.0 / 2048.0;
    const ETA: f64 = 1.0 / 33_554_432.0;
    fn from_bits(b: u32) -> Self {
        f16::from_bits(b as u16)
    }
    fn round(v: f32) -> u32 {
        if v.is_nan() {
            Self::CANONICAL_NAN
        } else {
            u32::from(f16::from_f32(v).to_bits())
        }
    }
}

impl TestElem for bf16 {
    const NAME: &'static str = "bf16";
    const BITS: u32 = 16;
    const CANARY: u32 = 0x7FA5;
    const CANONICAL_NAN: u32 = 0x7FC0;
    const SPECIALS: &'static [u32] = &[
        0x0000, 0x8000, // ±0
        0x7F80, 0xFF80, // ±inf
        0x7FC0, 0xFFC5, 0x7F81, // NaNs
        0x0001, 0x807F, // subnormals
        0x0080, // smallest normal
        0x7F7F, 0xFF7F, // ±MAX
        0x3F80, 0xBF80, 0x3F81, // ±1, 1 + ulp
        0x3F00, // 0.5
        0x5F00, // 2^63
        0x8003, 0x007F, // subnormals
        0xFFC1, 0x7FA3, // NaNs
        0x3B80, // 2^-8
    ];
    const MAX_EXP: i32 = 12;
    // bfloat16 has an 8-bit significand: u = 2^-8; smallest subnormal 2^-133.
    const U: f64 = 1.0 / 256.0;
    const ETA: f64 = 4.591_774_807_899_561e-41; // 2^-134
    fn from_bits(b: u32) -> Self {
        bf16::from_bits(b as u16)
    }
    fn round(v: f32) -> u32 {
        if v.is_nan() {
            Self::CANONICAL_NAN
        } else {
            u32::from(bf16::from_f32(v).to_bits())
        }
    }
}

/// The bits of each element.
pub fn bits<T: Element>(v: &[T]) -> std::vec::Vec<u32> {
    v.iter().map(|x| x.to_bits_u32()).collect()
}
