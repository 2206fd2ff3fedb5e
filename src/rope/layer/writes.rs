//! The call's destinations with their element types erased ([`ErasedDest`], [`Part`]) and
//! the typed writer of one token ([`write_token`]).

use core::any::TypeId;
use core::marker::PhantomData;

use super::slots::slot_of;
use super::{CacheLayout, Dest, HeadSet, Slots};
use crate::element::Element;
use crate::error::Operand;
use crate::kernels::q8_0::{BlockQ8_0, CacheDType, CacheElement};
use crate::kernels::{self, ConvertArgs, RotateArgs};
use crate::rope::TokenParams;
use crate::view::View;

/// Where one of q, k, v goes after its types are erased (the typed writer knows them).
#[derive(Clone, Copy)]
pub(super) enum Target<'s> {
    /// Nothing written (`Dest::Skip`; v `InPlace`).
    None,
    /// Rotated in place in the fused buffer.
    InPlace,
    /// A dense tensor (`dst` of the destination's type, view in its units).
    Rows { dst: *mut u8, len: usize, view: View },
    /// Cache rows (`dst` of the destination's type, `len` units).
    Cache { dst: *mut u8, len: usize, layout: CacheLayout, slots: Slots<'s> },
}

/// What a token's write reads besides the part: the token, its sequence and position, its
/// cos/sin row (empty for v), and the call's settings.
pub(super) struct Step<'r> {
    pub(super) t: usize,
    pub(super) seq: usize,
    pub(super) pos: u32,
    pub(super) cos: &'r [f32],
    pub(super) sin: &'r [f32],
    pub(super) p: &'r TokenParams<'r>,
    pub(super) prefetch: bool,
}

/// One of q, k, v of a call: its head set in the fused buffer `src` (of the input type), its
/// target, and the writer of its (input, output) types.
#[derive(Clone, Copy)]
pub(super) struct Part<'s> {
    pub(super) operand: Operand,
    pub(super) set: HeadSet,
    pub(super) src: *mut u8,
    pub(super) to: Target<'s>,
    /// Units of the destination per head (`head_dim`, or `head_dim / 32` blocks).
    pub(super) head_len: usize,
    /// The destination type is the input type.
    pub(super) same_type: bool,
    /// The destination is `q8_0` (`ELEMENTS_PER_UNIT` 32).
    pub(super) quant: bool,
    /// The destination is `Dest::InPlace` (for v too, where it writes nothing).
    pub(super) in_place: bool,
    /// Writes token `step.t` of this part (types restored).
    pub(super) write: unsafe fn(&Part<'s>, &Step<'_>),
}

/// A [`Dest`] with its element type erased: what [`Rope::apply_layer_erased`] takes.
/// Hidden: for the C ABI, which dispatches dtype tags at run time, so that it carries one
/// instance of the call per input type (and one [`ErasedDest::new`] per output type)
/// instead of one per combination of four types.
#[doc(hidden)]
pub struct ErasedDest<'a> {
    to: Target<'a>,
    units: usize,
    ty: TypeId,
    dtype: CacheDType,
    /// The destination's buffer stays borrowed (mutably) for `'a`.
    _data: PhantomData<&'a mut ()>,
}

impl<'a> ErasedDest<'a> {
    /// Erases `dest` (its buffer's pointer and length, its type's tag).
    pub fn new<O: CacheElement>(dest: Dest<'a, O>) -> Self {
        let to = match dest {
            Dest::Skip => Target::None,
            Dest::InPlace => Target::InPlace,
            Dest::Tensor { data, view } => {
                Target::Rows { dst: data.as_mut_ptr().cast(), len: data.len(), view }
            }
            Dest::Cache { data, layout, slots } => {
                Target::Cache { dst: data.as_mut_ptr().cast(), len: data.len(), layout, slots }
            }
        };
        ErasedDest {
            to,
            units: O::ELEMENTS_PER_UNIT,
            ty: TypeId::of::<O>(),
            dtype: O::CACHE_DTYPE,
            _data: PhantomData,
        }
    }
}

impl<'s> Part<'s> {
    /// Part `operand` of input type `I`: its set in the fused buffer `src`, its erased
    /// destination, and the writer of the (input, destination) types.
    pub(super) fn new<I: Element>(
        operand: Operand,
        set: HeadSet,
        src: *mut I,
        dest: ErasedDest<'s>,
        head_dim: usize,
        rotated: bool,
    ) -> Self {
        let in_place = matches!(dest.to, Target::InPlace);
        let to = match dest.to {
            Target::InPlace if !rotated => Target::None,
            to => to,
        };
        // The tag comes from the sealed `CacheElement` of the erased type: the writer's `O`
        // is the destination buffer's type.
        type Write<'s> = unsafe fn(&Part<'s>, &Step<'_>);
        let write = match dest.dtype {
            CacheDType::F32 => write_token::<I, f32> as Write<'s>,
            CacheDType::F16 => write_token::<I, crate::f16> as Write<'s>,
            CacheDType::BF16 => write_token::<I, crate::bf16> as Write<'s>,
            CacheDType::Q8_0 => write_token::<I, BlockQ8_0> as Write<'s>,
        };
        Part {
            operand,
            set,
            src: src.cast(),
            to,
            head_len: head_dim / dest.units,
            same_type: TypeId::of::<I>() == dest.ty,
            quant: dest.units != 1,
            in_place,
            write,
        }
    }

    /// Whether the part reads its set (and so its set must fit and not overlap others).
    pub(super) fn used(&self) -> bool {
        !matches!(self.to, Target::None)
    }

    /// Whether the part is run: used, with at least one head. A set of 0 heads passes its
    /// checks whatever its offset and strides (it touches no element), so it must form no
    /// pointer: it is dropped from the token loop.
    pub(super) fn live(&self) -> bool {
        self.used() && self.set.heads > 0
    }
}

/// Writes token `s.t` of `part`: in place with the input type's rotate kernel (its fast
/// paths), otherwise with the convert kernel from `I` to `O`, to the token's tensor row or
/// cache slot (none for a skipped `slot_mapping` entry).
///
/// # Safety
/// `part` comes from [`Part::new`] with these `I`, `O`, for buffers still borrowed by the
/// call, has at least one head ([`Part::live`]: a set of 0 heads is not checked), and
/// passed `RopeView::check_layer` for the call's tokens,
/// batch and options (`s.t` is one of its tokens, `s.seq`, `s.pos` its sequence and
/// position); nothing else touches the buffers; `s.p.kernels` comes from the dispatcher.
pub(super) unsafe fn write_token<I: Element, O: CacheElement>(part: &Part<'_>, s: &Step<'_>) {
    let set = &part.set;
    let p = s.p;
    // SAFETY: token t's heads lie inside the fused buffer (validated set).
    let src = unsafe { part.src.cast::<I>().add(set.offset + s.t * set.token_stride) };
    let (dst, dst_head_stride) = match part.to {
        Target::None => return,
        Target::InPlace => {
            let args = RotateArgs {
                src,
                dst: src,
                heads: set.heads,
                src_head_stride: set.head_stride,
                dst_head_stride: set.head_stride,
                head_dim: p.head_dim,
                cos: s.cos,
                sin: s.sin,
                layout: p.layout,
                inverse: p.inverse,
                prefetch: s.prefetch && set.head_stride < set.token_stride,
            };
            // In place with the same strides; the set's rows overlap no other set's (checked);
            // `O` is `I` (checked), and the rotate kernel of `I` is the one the in-place
            // calls use.
            // SAFETY: the contract of `RotateFn` holds, as just said.
            unsafe { I::rotate_fn(p.kernels)(&args) };
            return;
        }
        Target::Rows { dst, view, .. } => {
            // SAFETY: token t of a view validated against the tensor's buffer.
            (unsafe { dst.cast::<O>().add(s.t * view.token_stride) }, view.head_stride)
        }
        Target::Cache { dst, layout, ref slots, .. } => {
            let Some(slot) = slot_of(slots, layout.block_size, s.t, s.seq, s.pos) else { return };
            // SAFETY: a slot below `layout.slots()` (checked) of a layout that fits the cache.
            (unsafe { dst.cast::<O>().add(layout.slot_row(slot)) }, layout.head_stride)
        }
    };
    let args = ConvertArgs {
        src,
        dst,
        heads: set.heads,
        src_head_stride: set.head_stride,
        dst_head_stride,
        head_dim: p.head_dim,
        cos: s.cos,
        sin: s.sin,
        layout: p.layout,
        inverse: p.inverse,
    };
    // The source (the fused buffer, `&mut [I]`) and the destination (another `&mut [O]`)
    // are different buffers; the destination rows of one token do not overlap (validated),
    // and no two tokens write one row (duplicate slots checked); q8_0 has head_dim % 32 == 0.
    // SAFETY: the contract of `ConvertFn` holds, as just said.
    unsafe { kernels::convert_fn::<I, O>(p.kernels)(&args) };
}
