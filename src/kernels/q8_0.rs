//! ggml's `q8_0` blocks and the destination element types of the convert kernels.
//!
//! The layout, the quantization (ggml's reference arithmetic) and the defined results for
//! non-finite inputs are documented on [`BlockQ8_0`].

use half::{bf16, f16};

use crate::error::RopeError;

/// Values per [`BlockQ8_0`] (ggml `QK8_0`).
pub const QK8_0: usize = 32;

/// One ggml `q8_0` block (`block_q8_0` in ggml's `ggml-common.h`): 32 values as
/// `d * qs[j]`. 34 bytes, no padding, the layout ggml and llama.cpp store in a `q8_0`
/// tensor (a KV cache of type `GGML_TYPE_Q8_0`).
///
/// The quantization ([`BlockQ8_0::quantize`], [`quantize_row_q8_0`], and the kernels that
/// write rotated rows as `q8_0`) is
/// ggml's reference quantizer `quantize_row_q8_0_ref` (`ggml/src/ggml-quants.c`), in f32:
///
/// ```text
/// amax = max_j |x[j]|
/// d    = amax / 127
/// id   = d != 0 ? 1 / d : 0
/// qs[j] = roundf(x[j] * id)            (round half away from zero)
/// d is stored as f16, rounded to nearest even
/// ```
///
/// ggml's C leaves inputs that make `x[j] * id` non-finite undefined (a float to `int8_t`
/// conversion out of range). Here every input has one defined result, the same on every
/// tier:
/// - a block holding a NaN: `d` is the canonical f16 NaN (`0x7E00`), every `qs` 0;
/// - a block holding an infinity (and no NaN): `d` is `+inf` (`0x7C00`), every `qs` 0;
/// - otherwise each `x[j] * id` that is NaN (`0 * inf`, when `d` is so small that `1 / d`
///   overflows: a block of subnormals) gives 0, and each product is clamped to
///   `-127..=127` before rounding. For every block where ggml's result is defined this is
///   ggml's result (there `|x[j] * id| <= 127.00003` for a normal `d`, about
///   `127.00006` for a subnormal one: always below `127.5`, so it rounds to at most 127).
///
/// `d` itself may round to f16 infinity (`amax > 65504 * 127`) or zero, as in ggml.
///
/// Equality is bitwise (the scale's f16 bits and the quants), so a block equals itself even
/// when its scale is NaN.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct BlockQ8_0 {
    /// The scale: `max |x| / 127`, rounded to f16 (nearest even).
    pub d: f16,
    /// The quantized values, `round(x[j] * id)` (half away from zero) with `id = 1 / d` (`d`
    /// in f32, before its f16 rounding; `id = 0` when `d` is 0): a product with the
    /// reciprocal, as ggml, which rounds some values differently from `x[j] / d`.
    pub qs: [i8; QK8_0],
}

const _: () = assert!(core::mem::size_of::<BlockQ8_0>() == 34);

impl PartialEq for BlockQ8_0 {
    fn eq(&self, other: &Self) -> bool {
        self.d.to_bits() == other.d.to_bits() && self.qs == other.qs
    }
}
impl Eq for BlockQ8_0 {}

impl BlockQ8_0 {
    /// Quantizes 32 values (the reference quantizer: see [`BlockQ8_0`] for the arithmetic
    /// and for non-finite inputs).
    pub fn quantize(x: &[f32; QK8_0]) -> BlockQ8_0 {
        if x.iter().any(|v| v.is_nan()) {
            return BlockQ8_0 {
                d: f16::from_bits(crate::kernels::element::CANONICAL_NAN_F16),
                qs: [0; QK8_0],
            };
        }
        if x.iter().any(|v| v.is_infinite()) {
            return BlockQ8_0 { d: f16::INFINITY, qs: [0; QK8_0] };
        }
        let amax = x.iter().fold(0.0f32, |m, v| if v.abs() > m { v.abs() } else { m });
        let (d, id) = scale_of(amax);
        BlockQ8_0 { d: f16::from_f32_const(d), qs: x.map(|v| round_q8(v * id)) }
    }

    /// The 32 values the block stands for: `f32(d) * qs[j]` (ggml `dequantize_row_q8_0`).
    pub fn dequantize(&self) -> [f32; QK8_0] {
        let d = self.d.to_f32_const();
        self.qs.map(|q| f32::from(q) * d)
    }
}

/// `(d, id)` of a block whose `max |x|` is the finite `amax`: `d = amax / 127`,
/// `id = d != 0 ? 1 / d : 0`, in f32 (ggml's operations; every tier computes these two
/// scalars with exactly this code).
#[inline(always)]
pub(crate) fn scale_of(amax: f32) -> (f32, f32) {
    let d = amax / 127.0;
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    (d, id)
}

/// `x * id` rounded half away from zero to an i8: NaN gives 0, the rest is clamped to
/// `-127..=127` first (see [`BlockQ8_0`]). For finite `|q| <= 127.5` it is C's
/// `roundf(q)`: `t = trunc(q)`, `t + trunc(2 * (q - t))` (both steps exact), which is what
/// the vector tiers compute.
#[inline(always)]
pub(crate) fn round_q8(q: f32) -> i8 {
    if q.is_nan() {
        return 0;
    }
    let q = q.clamp(-127.0, 127.0);
    // Exact: |q| <= 127, so the casts truncate toward zero without saturating.
    let t = q as i32 as f32;
    let f = q - t;
    let r = t + (f + f) as i32 as f32;
    r as i8
}

/// Quantizes a row of f32 to `q8_0` blocks with ggml's reference arithmetic
/// (`quantize_row_q8_0_ref`; see [`BlockQ8_0`]): block `b`
/// holds `x[32 * b .. 32 * b + 32]`.
///
/// # Errors
/// [`RopeError::QuantizeLength`] when `x.len() != 32 * out.len()`; nothing is written then.
pub fn quantize_row_q8_0(x: &[f32], out: &mut [BlockQ8_0]) -> Result<(), RopeError> {
    if out.len().checked_mul(QK8_0) != Some(x.len()) {
        return Err(RopeError::QuantizeLength { values: x.len(), blocks: out.len() });
    }
    for (chunk, b) in x.chunks_exact(QK8_0).zip(out.iter_mut()) {
        // The chunk holds exactly QK8_0 values (chunks_exact).
        let chunk: &[f32; QK8_0] = chunk.try_into().unwrap_or(&[0.0; QK8_0]);
        *b = BlockQ8_0::quantize(chunk);
    }
    Ok(())
}

/// Which destination type a [`CacheElement`] is (for the C ABI and error messages).
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CacheDType {
    /// IEEE 754 binary32.
    F32,
    /// IEEE 754 binary16.
    F16,
    /// bfloat16.
    BF16,
    /// ggml `q8_0` blocks ([`BlockQ8_0`]).
    Q8_0,
}

mod sealed {
    /// Seals [`CacheElement`](super::CacheElement) and ties each destination type to its
    /// convert kernels: `O::convert_fn::<I>` for every [`Element`](crate::Element) `I`.
    #[allow(private_bounds)]
    pub trait Sealed: crate::kernels::ConvertTarget {}
    impl Sealed for f32 {}
    impl Sealed for half::f16 {}
    impl Sealed for half::bf16 {}
    impl Sealed for super::BlockQ8_0 {}
}

/// A type a rotated (or copied) row can be stored as: `f32`, `f16`, `bf16`, or ggml's
/// [`BlockQ8_0`]. Sealed.
///
/// Buffers of a `CacheElement` are counted in units: one element each for the float types,
/// one block of [`ELEMENTS_PER_UNIT`](CacheElement::ELEMENTS_PER_UNIT) = 32 values for
/// `q8_0` (so a row of `head_dim` values is `head_dim / 32` blocks, and `head_dim` must be
/// a multiple of 32).
pub trait CacheElement:
    Copy + Default + PartialEq + core::fmt::Debug + Send + Sync + sealed::Sealed + 'static
{
    /// Values per unit of storage: 1, or 32 for [`BlockQ8_0`].
    const ELEMENTS_PER_UNIT: usize;
    /// Which type this is.
    #[doc(hidden)]
    const CACHE_DTYPE: CacheDType;
}

impl CacheElement for f32 {
    const ELEMENTS_PER_UNIT: usize = 1;
    const CACHE_DTYPE: CacheDType = CacheDType::F32;
}
impl CacheElement for f16 {
    const ELEMENTS_PER_UNIT: usize = 1;
    const CACHE_DTYPE: CacheDType = CacheDType::F16;
}
impl CacheElement for bf16 {
    const ELEMENTS_PER_UNIT: usize = 1;
    const CACHE_DTYPE: CacheDType = CacheDType::BF16;
}
impl CacheElement for BlockQ8_0 {
    const ELEMENTS_PER_UNIT: usize = QK8_0;
    const CACHE_DTYPE: CacheDType = CacheDType::Q8_0;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_q8_is_half_away_from_zero() {
        for (q, r) in [(0.5, 1), (-0.5, -1), (1.5, 2), (2.5, 3), (-2.5, -3), (0.49999997, 0), (126.5, 127)] {
            assert_eq!(round_q8(q), r, "{q}");
        }
        assert_eq!(round_q8(f32::NAN), 0);
        assert_eq!(round_q8(f32::INFINITY), 127);
        assert_eq!(round_q8(-1e9), -127);
    }

    /// Every tier's vector rounding equals [`round_q8`] at and next to every half and
    /// integer of `-127..=127` (blocks holding 127, so `d = 1`, `id = 1` and the quants
    /// are the rounded values themselves).
    #[cfg(feature = "alloc")]
    #[test]
    fn tiers_round_like_the_oracle() {
        use alloc::{vec, vec::Vec};
        let mut x = Vec::new();
        for n in -254i32..=254 {
            let h = n as f32 / 2.0;
            for v in [h, f32::from_bits(h.to_bits().wrapping_sub(1)), f32::from_bits(h.to_bits() + 1)] {
                if v.abs() <= 127.0 {
                    x.push(v);
                }
            }
        }
        let mut row = Vec::new();
        for chunk in x.chunks(31) {
            row.push(127.0);
            row.extend_from_slice(chunk);
            row.resize(row.len().next_multiple_of(QK8_0), 0.0);
        }
        let want: Vec<BlockQ8_0> =
            row.chunks_exact(QK8_0).map(|b| BlockQ8_0::quantize(b.try_into().unwrap())).collect();
        for tier in crate::dispatch::available_tiers() {
            let mut got = vec![BlockQ8_0::default(); want.len()];
            let k = crate::dispatch::kernels_for(tier).unwrap();
            let a = crate::kernels::ConvertArgs {
                src: row.as_ptr(),
                dst: got.as_mut_ptr(),
                heads: 1,
                src_head_stride: row.len(),
                dst_head_stride: got.len(),
                head_dim: row.len(),
                cos: &[],
                sin: &[],
                layout: crate::PairLayout::HalfSplit,
                inverse: false,
            };
            // One head of `row.len()` values (a multiple of 32) into `got`'s
            // `row.len() / 32` blocks, distinct buffers; no rotated part.
            // SAFETY: as just said; `kernels_for` returned a table this CPU supports.
            unsafe { crate::kernels::convert_fn::<f32, BlockQ8_0>(k)(&a) };
            assert_eq!(got, want, "{tier}");
        }
    }

    #[test]
    fn quantize_row_checks_length() {
        let mut out = [BlockQ8_0::default(); 2];
        assert_eq!(
            quantize_row_q8_0(&[1.0; 63], &mut out),
            Err(RopeError::QuantizeLength { values: 63, blocks: 2 })
        );
        assert_eq!(out, [BlockQ8_0::default(); 2]);
        let x: [f32; 64] = core::array::from_fn(|i| i as f32 - 31.5);
        quantize_row_q8_0(&x, &mut out).unwrap();
        assert_eq!(out[0].qs[0], -127);
        assert_eq!(out[1].qs[31], 127);
    }
}
