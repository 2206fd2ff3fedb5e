//! The kernel tiers and the signatures they share.
//!
//! One folder per tier holds all of that tier's code, with the same file names in each:
//! `scalar/` (the oracle), `portable/`, `x86_64/avx2/`, `x86_64/avx512/`, `aarch64/neon/`;
//! in each, `mod.rs` (its SIMD token, its `#[target_feature]` boundary, [`tier_boundary!`],
//! and `get()`, which returns its `KERNELS` table only if the CPU has its features),
//! `sincos.rs` (its cos/sin generator) and, for the x86-64 tiers, `roofline.rs` (benchmark
//! support). The algorithms they share are generic over the tier's token: `generic`
//! (rotation, conversion, QK-norm, row kernels), `sincos` (the generator), `roofline`.
//! The element data ([`element`]) and the tiers ([`tier`]) live here too, so the kernels
//! depend on nothing above them. The per-operation tables below pick a tier's boundary
//! functions by tier and element type (`per_tier!`). The scalar tier is the oracle: every other tier must produce bit-identical output for every input. To keep
//! that possible, every tier performs the same f32 operations in the same order and none
//! fuses a multiply with an add:
//!
//! ```text
//! forward:  y0 = (x0 * cos) - (x1 * sin)      inverse:  y0 = (x0 * cos) + (x1 * sin)
//!           y1 = (x1 * cos) + (x0 * sin)                y1 = (x1 * cos) - (x0 * sin)
//! ```
//!
//! where `(x0, x1)` is a pair (see [`PairLayout`](crate::PairLayout)), then each result is rounded
//! once to the element type ([`Element::from_f32`](crate::Element::from_f32)).

use half::{bf16, f16};

use crate::kernels::element::Element;
use crate::kernels::shape::PairLayout;
use crate::kernels::tier::Tier;
pub(crate) use rows::{AddRowFn, AlibiRowFn};

// The NEON tier reads a bf16 pair as one little-endian word; aarch64_be gets Portable.
#[cfg(all(target_arch = "aarch64", target_endian = "little"))]
pub(crate) mod aarch64;
pub(crate) mod element;
pub(crate) mod generic;
pub(crate) mod portable;
pub(crate) mod q8_0;
#[cfg(feature = "bench-internals")]
pub(crate) mod roofline;
pub(crate) mod rows;
pub(crate) mod scalar;
pub(crate) mod shape;
pub(crate) mod sincos;
pub(crate) mod tier;
#[cfg(target_arch = "x86_64")]
pub(crate) mod x86_64;

/// Arguments of one rotate call: the heads of one token of one tensor.
///
/// Head `h` reads `head_dim` elements at `src + h * src_head_stride` and writes them at
/// `dst + h * dst_head_stride`. Elements `0..rotary_dim` are rotated pairwise with
/// `cos[i]`, `sin[i]` for pair `i`; elements `rotary_dim..head_dim` are copied when
/// `src != dst` and left alone otherwise.
pub(crate) struct RotateArgs<'a, T> {
    pub src: *const T,
    pub dst: *mut T,
    pub heads: usize,
    pub src_head_stride: usize,
    pub dst_head_stride: usize,
    pub head_dim: usize,
    /// `rotary_dim / 2` values each; `sin.len() == cos.len()`.
    pub cos: &'a [f32],
    pub sin: &'a [f32],
    pub layout: PairLayout,
    pub inverse: bool,
    /// Whether the call streams from memory (a hint; results do not depend on it): set when
    /// the rotated input bytes of the whole call exceed [`PREFETCH_MIN_BYTES`] and the heads
    /// of a token lie closer together than a head's consecutive tokens. The kernel then
    /// prefetches heads ahead and, out of place, copies each head's pass-through part right
    /// after rotating it.
    pub prefetch: bool,
}

/// Calls whose rotated input is larger than this (`rotary_dim` elements of every token and
/// head of q and k; pass-through dimensions and out-of-place outputs are not counted) ask the
/// kernels to prefetch ([`RotateArgs::prefetch`]). Smaller ones (decode: 20 KB for 40 heads
/// of 128 f32) are usually still in cache from the projection that produced them.
pub(crate) const PREFETCH_MIN_BYTES: usize = 512 * 1024;

/// A rotate kernel.
///
/// # Safety
/// For every head `h < heads`, `src + h * src_head_stride .. + head_dim` must be valid for
/// reads and `dst + h * dst_head_stride .. + head_dim` valid for writes; `2 * cos.len() <=
/// head_dim`. Either `src == dst` with equal head strides (in place), or the source and
/// destination ranges do not overlap at all. The heads must not overlap one another.
/// The CPU supports the tier of the [`Kernels`] table the function comes from (the
/// dispatcher hands out a table only after detecting its features).
pub(crate) type RotateFn<T> = unsafe fn(&RotateArgs<'_, T>);

/// A head-major rotate kernel (issue 18): as [`RotateFn`], except that "head" `h` of `a`
/// (in practice one head at consecutive tokens: `src_head_stride` is the token stride) is
/// rotated with its own row, `cos_rows[h * pairs ..][..pairs]` and the same of `sin_rows`,
/// where `pairs = a.cos.len()` (`a.cos`/`a.sin` are row 0).
///
/// # Safety
/// The contract of [`RotateFn`]; `cos_rows` and `sin_rows` hold at least `a.heads * pairs`
/// values each.
pub(crate) type RotateRowsFn<T> = unsafe fn(&RotateArgs<'_, T>, cos_rows: &[f32], sin_rows: &[f32]);

/// Arguments of one convert call (issue 17): the heads of one token of one head set, read
/// as `I` and written as `O`.
///
/// Head `h` reads `head_dim` elements at `src + h * src_head_stride` and writes them at
/// `dst + h * dst_head_stride`. Elements `0..2 * cos.len()` are rotated pairwise as in
/// [`RotateArgs`] (same layout, direction and operation order, no FMA); the rest are
/// converted, `O::from_f32(I::to_f32(x))` (so a NaN becomes the canonical NaN of `O`, even
/// for `I == O`). `cos.len() == 0` is a pure convert (the v append). Each stored value is
/// rounded once.
///
/// For `O` = [`BlockQ8_0`](q8_0::BlockQ8_0), `dst` and `dst_head_stride` count blocks,
/// `head_dim % 32 == 0`, and head `h`'s `head_dim / 32` blocks are consecutive from
/// `dst + h * dst_head_stride`: block `b` quantizes the head's (rotated) f32 values
/// `32 b .. 32 b + 32` ([`q8_0`] docs).
pub(crate) struct ConvertArgs<'a, I, O> {
    pub src: *const I,
    pub dst: *mut O,
    pub heads: usize,
    pub src_head_stride: usize,
    pub dst_head_stride: usize,
    pub head_dim: usize,
    /// `rotary_dim / 2` values each (0 for a pure convert); `sin.len() == cos.len()`.
    pub cos: &'a [f32],
    pub sin: &'a [f32],
    pub layout: PairLayout,
    pub inverse: bool,
}

/// A convert kernel.
///
/// # Safety
/// For every head `h < heads`, `src + h * src_head_stride .. + head_dim` is valid for reads
/// and `dst + h * dst_head_stride .. + head_dim / O::ELEMENTS_PER_UNIT` for writes;
/// `2 * cos.len() <= head_dim`, `cos.len() <= MAX_PAIRS`, `sin.len() == cos.len()`; for
/// `q8_0`, `head_dim % 32 == 0`. No source element overlaps a destination element, and the
/// destination heads do not overlap one another. The CPU supports the tier of the
/// [`Kernels`] table the function comes from.
pub(crate) type ConvertFn<I, O> = unsafe fn(&ConvertArgs<'_, I, O>);

/// The roofline baseline of a tier: `x[i] = round(x[i] * c)` in place over `len` elements,
/// through the tier's own load/convert/store path.
///
/// # Safety
/// `x .. x + len` is valid for reads and writes; the CPU supports the table's tier.
#[cfg(feature = "bench-internals")]
pub(crate) type ScaleFn<T> = unsafe fn(x: *mut T, len: usize, c: f32);

/// One tier, proven available: the table the dispatcher hands out only after detecting the
/// CPU's features. It holds the tier and its cos/sin row generator (every call uses one);
/// every other entry point is picked per operation and element type from the tier
/// ([`SelectKernel`], [`SelectAddRow`], [`alibi_row_fn`], each a `match` over the tiers,
/// [`per_tier!`]), so a program references only the kernels of the operations and types it
/// calls and the linker drops the rest (issue 13: an f32-only program carries no f16/bf16,
/// encoding or benchmark kernels). A new (operation, types) entry is a new trait or
/// function here, not a field of a central struct.
pub(crate) struct Kernels {
    pub tier: Tier,
    /// The on-the-fly cos/sin row generator of the tier ([`sincos`]).
    pub sincos: sincos::SinCosFn,
}

/// `$($f)+` (e.g. `rotate::<f32>`) of the tier module of `$tier`: the per-operation table,
/// one `match` arm per tier this build has. Tiers come from a [`Kernels`] the dispatcher
/// handed out (the CPU has their features); a tier this build lacks cannot occur and maps
/// to the scalar one.
macro_rules! per_tier {
    ($tier:expr, $($f:tt)+) => {
        match $tier {
            $crate::kernels::tier::Tier::Portable => $crate::kernels::portable::$($f)+,
            #[cfg(target_arch = "x86_64")]
            $crate::kernels::tier::Tier::Avx2 => $crate::kernels::x86_64::avx2::$($f)+,
            #[cfg(target_arch = "x86_64")]
            $crate::kernels::tier::Tier::Avx512 => $crate::kernels::x86_64::avx512::$($f)+,
            #[cfg(all(target_arch = "aarch64", target_endian = "little"))]
            $crate::kernels::tier::Tier::Neon => $crate::kernels::aarch64::neon::$($f)+,
            _ => $crate::kernels::scalar::$($f)+,
        }
    };
}

/// Picks the entry points for an element type from a tier.
pub(crate) trait SelectKernel: Sized {
    fn rotate_fn(k: &Kernels) -> RotateFn<Self>;
    fn rotate_rows_fn(k: &Kernels) -> RotateRowsFn<Self>;
    #[cfg(feature = "bench-internals")]
    fn scale_fn(k: &Kernels) -> ScaleFn<Self>;
    /// The add-row kernel for rows of this type plus f32 encoding rows.
    fn add_row_f32_fn(k: &Kernels) -> AddRowFn<Self, f32>;
    /// The per-head norm kernel of fused QK-norm + RoPE (`generic/qknorm.rs`).
    fn norm_fn(k: &Kernels) -> generic::qknorm::NormFn<Self>;
    /// The fused norm-then-rotate kernel (`generic/qknorm.rs`).
    fn norm_rope_fn(k: &Kernels) -> generic::qknorm::NormRopeFn<Self>;
}

/// Implements [`SelectKernel`] for an element type: its rotate, scale and add-row tables
/// ([`per_tier!`]).
macro_rules! select_kernel {
    ($t:ty) => {
        impl SelectKernel for $t {
            #[inline(always)]
            fn rotate_fn(k: &Kernels) -> RotateFn<Self> {
                per_tier!(k.tier, rotate::<$t>)
            }
            #[inline(always)]
            fn rotate_rows_fn(k: &Kernels) -> RotateRowsFn<Self> {
                per_tier!(k.tier, rotate_rows::<$t>)
            }
            #[cfg(feature = "bench-internals")]
            #[inline(always)]
            fn scale_fn(k: &Kernels) -> ScaleFn<Self> {
                per_tier!(k.tier, scale::<$t>)
            }
            #[inline(always)]
            fn add_row_f32_fn(k: &Kernels) -> AddRowFn<Self, f32> {
                per_tier!(k.tier, add_row::<$t, f32>)
            }
            #[inline(always)]
            fn norm_fn(k: &Kernels) -> generic::qknorm::NormFn<Self> {
                per_tier!(k.tier, norm_heads::<$t>)
            }
            #[inline(always)]
            fn norm_rope_fn(k: &Kernels) -> generic::qknorm::NormRopeFn<Self> {
                per_tier!(k.tier, norm_rope_heads::<$t>)
            }
        }
    };
}
select_kernel!(f32);
select_kernel!(f16);
select_kernel!(bf16);

/// Picks the convert kernel from input type `Self` to output type `O` ([`per_tier!`]).
/// Implemented for every input in {f32, f16, bf16} and every output in {f32, f16, bf16,
/// [`BlockQ8_0`](q8_0::BlockQ8_0)}; every [`Element`] is `SelectConvert<O>` for each of
/// those `O` (supertraits of `Element`'s seal), and [`convert_fn`] picks for a generic
/// `O: CacheElement`.
pub(crate) trait SelectConvert<O>: Sized {
    fn convert_fn(k: &Kernels) -> ConvertFn<Self, O>;
}

/// Implements [`SelectConvert`] for one (input, output) pair.
macro_rules! select_convert {
    ($($i:ty => $($o:ty),+;)+) => {$($(
        impl SelectConvert<$o> for $i {
            #[inline(always)]
            fn convert_fn(k: &Kernels) -> ConvertFn<$i, $o> {
                per_tier!(k.tier, convert::<$i, $o>)
            }
        }
    )+)+};
}
select_convert! {
    f32 => f32, f16, bf16, q8_0::BlockQ8_0;
    f16 => f32, f16, bf16, q8_0::BlockQ8_0;
    bf16 => f32, f16, bf16, q8_0::BlockQ8_0;
}

/// The destination side of [`SelectConvert`] (a supertrait of the seal of
/// [`CacheElement`](q8_0::CacheElement)): the kernel from any [`Element`] into `Self`.
pub(crate) trait ConvertTarget: generic::convert::ConvertOut {
    fn convert_fn<I: Element>(k: &Kernels) -> ConvertFn<I, Self>;
}

/// Implements [`ConvertTarget`] for an output type through the input's [`SelectConvert`].
macro_rules! convert_target {
    ($($o:ty),+) => {$(
        impl ConvertTarget for $o {
            #[inline(always)]
            fn convert_fn<I: Element>(k: &Kernels) -> ConvertFn<I, $o> {
                <I as SelectConvert<$o>>::convert_fn(k)
            }
        }
    )+};
}
convert_target!(f32, f16, bf16, q8_0::BlockQ8_0);

/// The convert kernel from `I` to `O` of a tier.
#[inline(always)]
pub(crate) fn convert_fn<I: Element, O: q8_0::CacheElement>(k: &Kernels) -> ConvertFn<I, O> {
    O::convert_fn::<I>(k)
}

/// Picks the add-row kernel for embeddings of type `T` plus encoding rows of type `Self`:
/// f32 rows for any `T`, or rows of `T` itself (a learned table stored in the embeddings'
/// type). Every [`Element`] `T` has `T: SelectAddRow<T>` (a supertrait of `Element`'s seal).
pub(crate) trait SelectAddRow<T>: Sized {
    fn add_row_fn(k: &Kernels) -> AddRowFn<T, Self>;
}

impl<T: Element> SelectAddRow<T> for f32 {
    #[inline(always)]
    fn add_row_fn(k: &Kernels) -> AddRowFn<T, f32> {
        T::add_row_f32_fn(k)
    }
}

impl SelectAddRow<f16> for f16 {
    #[inline(always)]
    fn add_row_fn(k: &Kernels) -> AddRowFn<f16, f16> {
        per_tier!(k.tier, add_row::<f16, f16>)
    }
}

impl SelectAddRow<bf16> for bf16 {
    #[inline(always)]
    fn add_row_fn(k: &Kernels) -> AddRowFn<bf16, bf16> {
        per_tier!(k.tier, add_row::<bf16, bf16>)
    }
}

/// The ALiBi row kernel of a tier.
#[inline(always)]
pub(crate) fn alibi_row_fn(k: &Kernels) -> AlibiRowFn {
    per_tier!(k.tier, alibi_row)
}

/// Builds a tier's [`Kernels`] token from the tier and its cos/sin generator.
macro_rules! kernels_table {
    ($tier:expr, $sincos:expr) => {
        $crate::kernels::Kernels { tier: $tier, sincos: $sincos }
    };
}
pub(crate) use kernels_table;

/// The `#[target_feature]` boundary of a SIMD tier, written once per tier (in its
/// `mod.rs`): every entry point the per-operation tables hand out is compiled with the
/// tier's features and runs the shared generic kernel with the tier's token. The generic
/// kernels and the token's operations are `#[inline(always)]`, so they inline into these
/// functions and are compiled for the tier's instructions.
///
/// ```text
/// tier_boundary! {
///     features = "avx2,f16c",         // omitted for the portable tier (the baseline)
///     token = Avx2::new_unchecked();  // the tier's token, built only in these functions
///     // the tier's own entry points (rotate, rotate_rows and their out-of-line parts,
///     // whose choices differ by tier), each given the features above
///     pub(crate) unsafe fn rotate<T: SimdElement>(a: &RotateArgs<'_, T>) { ... }
/// }
/// ```
///
/// It defines `convert`, `scale` (feature `bench-internals`), `norm_heads`,
/// `norm_rope_heads`, `add_row` and `alibi_row`, each with the contract of its function type
/// ([`ConvertFn`], [`ScaleFn`], [`NormFn`](generic::qknorm::NormFn),
/// [`NormRopeFn`](generic::qknorm::NormRopeFn), [`AddRowFn`], [`AlibiRowFn`]), which
/// includes that the CPU supports the tier: that is what makes building `token` sound.
macro_rules! tier_boundary {
    (features = $f:literal, token = $token:expr; $($item:item)*) => {
        $crate::kernels::tier_boundary!(@ops [#[target_feature(enable = $f)]] $token);
        $crate::kernels::tier_boundary!(@items $f; $($item)*);
    };
    (token = $token:expr; $($item:item)*) => {
        $crate::kernels::tier_boundary!(@ops [] $token);
        $($item)*
    };
    (@items $f:literal;) => {};
    (@items $f:literal; $item:item $($rest:item)*) => {
        #[target_feature(enable = $f)]
        $item
        $crate::kernels::tier_boundary!(@items $f; $($rest)*);
    };
    (@ops [$($attr:tt)*] $token:expr) => {
        $($attr)*
        /// # Safety
        /// The contract of [`ConvertFn`]($crate::kernels::ConvertFn) (which includes this
        /// tier's features).
        pub(crate) unsafe fn convert<
            I: $crate::kernels::generic::SimdElement,
            O: $crate::kernels::generic::convert::ConvertOut,
        >(
            a: &$crate::kernels::ConvertArgs<'_, I, O>,
        ) {
            // SAFETY: the caller's contract says the CPU supports this tier (so the token
            // may be built); the rest is forwarded.
            unsafe { $crate::kernels::generic::convert::convert($token, a) }
        }

        $($attr)*
        /// # Safety
        /// The contract of [`ScaleFn`]($crate::kernels::ScaleFn) (which includes this tier's
        /// features).
        #[cfg(feature = "bench-internals")]
        pub(crate) unsafe fn scale<T: $crate::kernels::generic::SimdElement>(x: *mut T, len: usize, c: f32) {
            // SAFETY: as in `convert`.
            unsafe { $crate::kernels::generic::scale($token, x, len, c) }
        }

        $($attr)*
        /// # Safety
        /// The contract of [`NormFn`]($crate::kernels::generic::qknorm::NormFn) (which
        /// includes this tier's features).
        pub(crate) unsafe fn norm_heads<T: $crate::kernels::generic::SimdElement>(
            a: &$crate::kernels::generic::qknorm::NormArgs<'_, T>,
        ) {
            // SAFETY: as in `convert`.
            unsafe { $crate::kernels::generic::qknorm::norm_heads($token, a) }
        }

        $($attr)*
        /// # Safety
        /// The contract of [`NormRopeFn`]($crate::kernels::generic::qknorm::NormRopeFn)
        /// (which includes this tier's features).
        pub(crate) unsafe fn norm_rope_heads<T: $crate::kernels::generic::SimdElement>(
            a: &$crate::kernels::generic::qknorm::NormRopeArgs<'_, T>,
        ) -> bool {
            // SAFETY: as in `convert`.
            unsafe { $crate::kernels::generic::qknorm::norm_rope_heads($token, a) }
        }

        $($attr)*
        /// # Safety
        /// The contract of [`AddRowFn`]($crate::kernels::AddRowFn) (which includes this
        /// tier's features).
        pub(crate) unsafe fn add_row<
            T: $crate::kernels::generic::SimdElement,
            P: $crate::kernels::generic::SimdElement,
        >(
            x: *mut T,
            pe: *const P,
            n: usize,
        ) {
            // SAFETY: as in `convert`.
            unsafe { $crate::kernels::generic::rows::add_row($token, x, pe, n) }
        }

        $($attr)*
        /// # Safety
        /// The contract of [`AlibiRowFn`]($crate::kernels::AlibiRowFn) (which includes this
        /// tier's features).
        pub(crate) unsafe fn alibi_row(row: *mut f32, n: usize, slope: f32, first_distance: i64, symmetric: bool) {
            // SAFETY: as in `convert`.
            unsafe { $crate::kernels::generic::rows::alibi_row($token, row, n, slope, first_distance, symmetric) }
        }
    };
}
pub(crate) use tier_boundary;
