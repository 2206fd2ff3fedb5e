//! Rotating q and k: tensors, views, per-call options, and the apply entry points for
//! f32, f16 and bf16.

use core::ffi::c_void;

use rope_kernels::{
    bf16, f16, ApplyOptions, CosSin, CosSinTable, Direction, Element, Heads, HeadsMut, Positions, Rope, View,
};

use crate::boundary::{disjoint, guard, read, read_versioned, rust, Buf, R};
use crate::handle::{rope_t, storage, with_rope};
use crate::status::*;

/// Rotation direction (`rope_apply_opts.direction`).
pub type rope_direction = u32;
/// `R_p x`: rotate by `+position * inv_freq`.
pub const ROPE_FORWARD: rope_direction = 0;
/// `R_p^T x`: undoes `ROPE_FORWARD` at the same positions.
pub const ROPE_INVERSE: rope_direction = 1;

/// Where token positions come from (`rope_apply_opts.position_mode`).
pub type rope_position_mode = u32;
/// Token `t` is at position `start + t` (a KV-cache offset).
pub const ROPE_POSITIONS_START: rope_position_mode = 0;
/// Token `t` is at `position_ids[t]` (HF `position_ids` of one sequence).
pub const ROPE_POSITIONS_IDS: rope_position_mode = 1;

/// Where cos/sin come from (`rope_apply_opts.cos_sin`).
pub type rope_cos_sin_source = u32;
/// Generated per token from the frequencies (no table, no allocation).
pub const ROPE_COS_SIN_ON_THE_FLY: rope_cos_sin_source = 0;
/// Rows of a caller table indexed by position (see `rope_fill_table` for the layout).
pub const ROPE_COS_SIN_TABLE: rope_cos_sin_source = 1;

/// The shape and strides of a `[tokens][heads][head_dim]` tensor, in elements (not
/// bytes): element `(t, h, d)` is at `t * token_stride + h * head_stride + d`.
/// BSHD: `token_stride = heads * head_dim`, `head_stride = head_dim`; BHSD:
/// `token_stride = head_dim`, `head_stride = tokens * head_dim`; a fused QKV projection:
/// `token_stride = (q_heads + 2 * kv_heads) * head_dim`. Rows must not share elements.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct rope_view {
    /// Number of tokens (positions).
    pub tokens: usize,
    /// Number of heads.
    pub heads: usize,
    /// Elements between token `t` and `t + 1` of the same head.
    pub token_stride: usize,
    /// Elements between head `h` and `h + 1` of the same token.
    pub head_stride: usize,
}

/// A buffer and its view. `data` points to `len` elements: `float` for the `_f32` calls,
/// `uint16_t` bit patterns of IEEE binary16 (`_f16`) or bfloat16 (`_bf16`) for the
/// others. Inputs of out-of-place calls are only read. `data` may be NULL when `len` is
/// 0 (then the view must be empty: 0 tokens or 0 heads).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct rope_tensor {
    /// The first element.
    pub data: *mut c_void,
    /// Number of elements at `data` (the view must fit: else `ROPE_BUFFER_TOO_SMALL`).
    pub len: usize,
    /// Shape and strides.
    pub view: rope_view,
}

/// Per-call options. A zeroed struct with `struct_size = sizeof(rope_apply_opts)` means:
/// forward, positions from 0, cos/sin on the fly; a NULL `opts` means the same. Fields
/// that the selected modes do not use are ignored (pointers included).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct rope_apply_opts {
    /// `sizeof(rope_apply_opts)`.
    pub struct_size: usize,
    /// A `ROPE_FORWARD`/`ROPE_INVERSE` value.
    pub direction: rope_direction,
    /// A `ROPE_POSITIONS_*` value.
    pub position_mode: rope_position_mode,
    /// `ROPE_POSITIONS_START`: the position of token 0.
    pub start: u32,
    /// `ROPE_POSITIONS_IDS`: one position per token.
    pub position_ids: *const u32,
    /// `ROPE_POSITIONS_IDS`: number of values at `position_ids` (must equal the tokens).
    pub position_ids_len: usize,
    /// A `ROPE_COS_SIN_*` value.
    pub cos_sin: rope_cos_sin_source,
    /// `ROPE_COS_SIN_TABLE`: `table_len` cos values, rows of `rotary_dim / 2`.
    pub cos: *const f32,
    /// `ROPE_COS_SIN_TABLE`: `table_len` sin values, same layout.
    pub sin: *const f32,
    /// `ROPE_COS_SIN_TABLE`: floats in each of `cos` and `sin` (rows * rotary_dim / 2).
    pub table_len: usize,
}

/// The options of a call, and the byte ranges of the buffers they read.
///
/// # Safety
/// `p` NULL or a readable `rope_apply_opts` whose used buffers are readable for their
/// counts and not written during the call.
pub(crate) unsafe fn options<'a>(
    p: *const rope_apply_opts,
    pairs: usize,
) -> R<(ApplyOptions<'a>, [(usize, usize); 3])> {
    let mut reads = [(0, 0); 3];
    if p.is_null() {
        return Ok((ApplyOptions::default(), reads));
    }
    // SAFETY: the caller's contract; every field accepts any bits.
    let o = unsafe { read_versioned(p) }?;
    let direction = match o.direction {
        ROPE_FORWARD => Direction::Forward,
        ROPE_INVERSE => Direction::Inverse,
        _ => return Err(ROPE_UNKNOWN_ENUM),
    };
    let positions = match o.position_mode {
        ROPE_POSITIONS_START => Positions::Start(o.start),
        ROPE_POSITIONS_IDS => {
            let ids = Buf::new(o.position_ids, o.position_ids_len)?;
            reads[0] = ids.bytes();
            // SAFETY: checked by `Buf::new`; readable, unchanged (the contract).
            Positions::Ids(unsafe { ids.slice() })
        }
        _ => return Err(ROPE_UNKNOWN_ENUM),
    };
    let cos_sin = match o.cos_sin {
        ROPE_COS_SIN_ON_THE_FLY => CosSin::OnTheFly,
        ROPE_COS_SIN_TABLE => {
            let cos = Buf::new(o.cos, o.table_len)?;
            let sin = Buf::new(o.sin, o.table_len)?;
            reads[1] = cos.bytes();
            reads[2] = sin.bytes();
            // SAFETY: checked by `Buf::new`; readable, unchanged (the contract).
            let (cos, sin) = unsafe { (cos.slice(), sin.slice()) };
            CosSin::Table(rust(CosSinTable::new(cos, sin, pairs))?)
        }
        _ => return Err(ROPE_UNKNOWN_ENUM),
    };
    Ok((ApplyOptions { positions, cos_sin, direction }, reads))
}

/// A tensor argument: the struct (required), its buffer checked for `T`, and its view.
///
/// # Safety
/// `p` NULL or a readable `rope_tensor`.
pub(crate) unsafe fn tensor<T>(p: *const rope_tensor) -> R<(Buf<T>, View)> {
    // SAFETY: the caller's contract; every field accepts any bits.
    let t = unsafe { read(p) }?;
    let v = t.view;
    let view =
        View { tokens: v.tokens, heads: v.heads, token_stride: v.token_stride, head_stride: v.head_stride };
    Ok((Buf::new(t.data.cast_const().cast::<T>(), t.len)?, view))
}

/// In place: checks everything at the boundary, then hands over to `Rope::apply_qk`,
/// which validates the rest before writing.
///
/// # Safety
/// The contract of the `rope_apply_*` functions.
unsafe fn in_place<T: Element>(
    rope: *const rope_t,
    q: *const rope_tensor,
    k: *const rope_tensor,
    opts: *const rope_apply_opts,
) -> rope_status {
    guard(|| {
        // SAFETY: the caller's contract (a handle).
        unsafe {
            with_rope(rope, |r| {
                // SAFETY: `rope` passed `rope_ref`'s checks (`with_rope`).
                let handle = storage(rope);
                // SAFETY: the caller's contract, passed on.
                let (q, k, apply) = in_place_args::<T>(q, k, opts, r.pairs(), handle)?;
                rust(r.apply_qk(q, k, &apply))
            })
        }
    })
}

/// The arguments of [`in_place`], checked at the boundary. Out of line: the C structs it
/// copies are off the stack by the time the rotation runs (issue 13).
///
/// # Safety
/// The contract of the `rope_apply_*` functions; the buffers stay valid and untouched by
/// others for `'a`.
#[inline(never)]
#[allow(clippy::type_complexity)]
pub(crate) unsafe fn in_place_args<'a, T: Element>(
    q: *const rope_tensor,
    k: *const rope_tensor,
    opts: *const rope_apply_opts,
    pairs: usize,
    handle: (usize, usize),
) -> R<(HeadsMut<'a, T>, Option<HeadsMut<'a, T>>, ApplyOptions<'a>)> {
    // SAFETY: the caller's contract (NULL or a readable struct).
    let (qb, qv) = unsafe { tensor::<T>(q) }?;
    // SAFETY: as above.
    let k = if k.is_null() { None } else { Some(unsafe { tensor::<T>(k) }?) };
    // SAFETY: the caller's contract (NULL or readable options and buffers).
    let (apply, reads) = unsafe { options(opts, pairs) }?;
    let kb = k.map_or((0, 0), |(b, _)| b.bytes());
    disjoint(&[qb.bytes(), kb], &[reads[0], reads[1], reads[2], handle])?;
    // SAFETY: checked by `Buf::new`, writable and not accessed by others (the
    // contract), and disjoint from every other buffer of the call (checked).
    let q = HeadsMut::new(unsafe { qb.slice_mut() }, qv);
    // SAFETY: as above.
    let k = k.map(|(b, v)| HeadsMut::new(unsafe { b.slice_mut() }, v));
    Ok((q, k, apply))
}

/// Out of place: as [`in_place`], handing over to `Rope::apply_qk_into`.
///
/// # Safety
/// The contract of the `rope_apply_into_*` functions.
unsafe fn into<T: Element>(
    rope: *const rope_t,
    q: *const rope_tensor,
    q_out: *const rope_tensor,
    k: *const rope_tensor,
    k_out: *const rope_tensor,
    opts: *const rope_apply_opts,
) -> rope_status {
    // On the RoPE as `with_rope` builds it, borrowed (no copy: issue 13).
    let body = |r: &Rope<'_>| {
        // SAFETY: the caller's contract (NULL or readable structs).
        let (qb, qv) = unsafe { tensor::<T>(q) }?;
        // SAFETY: as above.
        let (qob, qov) = unsafe { tensor::<T>(q_out) }?;
        let k = match (k.is_null(), k_out.is_null()) {
            (true, true) => None,
            // SAFETY: as above.
            (false, false) => Some((unsafe { tensor::<T>(k) }?, unsafe { tensor::<T>(k_out) }?)),
            _ => return Err(ROPE_NULL_POINTER),
        };
        // SAFETY: the caller's contract (NULL or readable options and buffers).
        let (apply, [ids, cos, sin]) = unsafe { options(opts, r.pairs()) }?;
        let (kb, kob) = k.map_or(((0, 0), (0, 0)), |((b, _), (o, _))| (b.bytes(), o.bytes()));
        // SAFETY: `rope` passed `rope_ref`'s checks (`with_rope`).
        let handle = unsafe { storage(rope) };
        disjoint(&[qob.bytes(), kob], &[qb.bytes(), kb, ids, cos, sin, handle])?;
        // SAFETY: checked by `Buf::new`, readable and not written by others (the contract).
        let q = Heads::new(unsafe { qb.slice() }, qv);
        // SAFETY: checked by `Buf::new`, writable and not accessed by others (the
        // contract), and disjoint from every other buffer of the call (checked).
        let q_out = HeadsMut::new(unsafe { qob.slice_mut() }, qov);
        let k = k.map(|((b, v), (o, ov))| {
            // SAFETY: as for q and q_out.
            (Heads::new(unsafe { b.slice() }, v), HeadsMut::new(unsafe { o.slice_mut() }, ov))
        });
        rust(r.apply_qk_into(q, q_out, k, &apply))
    };
    // SAFETY: the caller's contract (a handle).
    guard(|| unsafe { with_rope(rope, body) })
}

/// Rotates q and (if `k` is not NULL) k in place, f32, at the same positions; q and k
/// may have their own head counts and strides (GQA/MQA) but the same tokens. Dimensions
/// `0..rotary_dim` of every head are rotated, the rest left alone. Zero tokens or heads
/// is a no-op. `opts` may be NULL (forward, positions from 0, cos/sin on the fly).
///
/// The buffers of q and k must not overlap (for a fused QKV buffer, call once for q and
/// once for k), nor overlap `position_ids`, the cos/sin table or the handle's storage
/// (a `rope_init` handle lives in caller memory).
///
/// Errors (nothing is written): `ROPE_NULL_POINTER` (`rope`, `q`, a buffer with a
/// non-zero count), `ROPE_MISALIGNED_POINTER`, `ROPE_INVALID_HANDLE`, `ROPE_UNSUPPORTED_STRUCT_SIZE`,
/// `ROPE_UNKNOWN_ENUM`, `ROPE_INVALID_ARGUMENT`, `ROPE_OVERLAPPING_BUFFERS`,
/// `ROPE_OVERLAPPING_STRIDES`, `ROPE_STRIDE_OVERFLOW`, `ROPE_BUFFER_TOO_SMALL`,
/// `ROPE_SHAPE_MISMATCH`, `ROPE_POSITION_COUNT_MISMATCH`, `ROPE_POSITION_OVERFLOW`,
/// `ROPE_TABLE_SHAPE`, `ROPE_POSITION_OUT_OF_RANGE`, `ROPE_INVALID_SCALING_PARAMETER`
/// (dynamic NTK at this length).
///
/// # Safety
/// `rope` is a handle; `q`, `k`, `opts` are NULL or readable structs whose buffers are
/// valid for their counts (tensors readable and writable, the rest readable) and not
/// accessed by anyone else during the call.
#[no_mangle]
pub unsafe extern "C" fn rope_apply_f32(
    rope: *const rope_t,
    q: *const rope_tensor,
    k: *const rope_tensor,
    opts: *const rope_apply_opts,
) -> rope_status {
    // SAFETY: the same contract.
    unsafe { in_place::<f32>(rope, q, k, opts) }
}

/// `rope_apply_f32` for IEEE binary16 (`uint16_t` storage): computed in f32, rounded once
/// to nearest-even on store; a NaN result is stored as 0x7E00.
///
/// # Safety
/// As for `rope_apply_f32`.
#[no_mangle]
pub unsafe extern "C" fn rope_apply_f16(
    rope: *const rope_t,
    q: *const rope_tensor,
    k: *const rope_tensor,
    opts: *const rope_apply_opts,
) -> rope_status {
    // SAFETY: the same contract.
    unsafe { in_place::<f16>(rope, q, k, opts) }
}

/// `rope_apply_f32` for bfloat16 (`uint16_t` storage): computed in f32, rounded once to
/// nearest-even on store; a NaN result is stored as 0x7FC0.
///
/// # Safety
/// As for `rope_apply_f32`.
#[no_mangle]
pub unsafe extern "C" fn rope_apply_bf16(
    rope: *const rope_t,
    q: *const rope_tensor,
    k: *const rope_tensor,
    opts: *const rope_apply_opts,
) -> rope_status {
    // SAFETY: the same contract.
    unsafe { in_place::<bf16>(rope, q, k, opts) }
}

/// Rotates q into `q_out` and (if `k` and `k_out` are not NULL) k into `k_out`, f32.
/// Each output has its input's tokens and heads but may have its own strides; the
/// dimensions past `rotary_dim` are copied. `k` and `k_out` are both NULL or both not.
/// Outputs must not overlap any other buffer of the call nor the handle's storage; inputs
/// may overlap each other.
///
/// Errors: those of `rope_apply_f32` (`ROPE_NULL_POINTER` also when exactly one of `k`,
/// `k_out` is NULL; `ROPE_SHAPE_MISMATCH` also for an output of another shape).
///
/// # Safety
/// As for `rope_apply_f32`; inputs need only be readable, outputs writable.
#[no_mangle]
pub unsafe extern "C" fn rope_apply_into_f32(
    rope: *const rope_t,
    q: *const rope_tensor,
    q_out: *const rope_tensor,
    k: *const rope_tensor,
    k_out: *const rope_tensor,
    opts: *const rope_apply_opts,
) -> rope_status {
    // SAFETY: the same contract.
    unsafe { into::<f32>(rope, q, q_out, k, k_out, opts) }
}

/// `rope_apply_into_f32` for IEEE binary16 (`uint16_t` storage).
///
/// # Safety
/// As for `rope_apply_into_f32`.
#[no_mangle]
pub unsafe extern "C" fn rope_apply_into_f16(
    rope: *const rope_t,
    q: *const rope_tensor,
    q_out: *const rope_tensor,
    k: *const rope_tensor,
    k_out: *const rope_tensor,
    opts: *const rope_apply_opts,
) -> rope_status {
    // SAFETY: the same contract.
    unsafe { into::<f16>(rope, q, q_out, k, k_out, opts) }
}

/// `rope_apply_into_f32` for bfloat16 (`uint16_t` storage).
///
/// # Safety
/// As for `rope_apply_into_f32`.
#[no_mangle]
pub unsafe extern "C" fn rope_apply_into_bf16(
    rope: *const rope_t,
    q: *const rope_tensor,
    q_out: *const rope_tensor,
    k: *const rope_tensor,
    k_out: *const rope_tensor,
    opts: *const rope_apply_opts,
) -> rope_status {
    // SAFETY: the same contract.
    unsafe { into::<bf16>(rope, q, q_out, k, k_out, opts) }
}
