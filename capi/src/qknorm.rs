//! Fused per-head QK norm + RoPE (issue 15): `rope_apply_qk_norm_*` and
//! `rope_apply_qk_norm_into_*` for f32, f16 and bf16, over the Rust crate's
//! `Rope::apply_qk_norm` / `apply_qk_norm_into`.

use rope_kernels::{bf16, f16, Element, Heads, HeadsMut, QkNorm, Rope};

use crate::apply::{in_place_args, options, rope_apply_opts, rope_tensor, tensor};
use crate::boundary::{disjoint, guard, read_versioned, rust, Buf, R};
use crate::handle::{rope_t, storage, with_rope};
use crate::status::*;

/// The form of a QK norm (`rope_qk_norm.kind`).
pub type rope_qk_norm_kind = u32;
/// `y = weight * round(x * inv_rms)`, then RoPE (transformers `Qwen3RMSNorm`).
pub const ROPE_QK_NORM_RMS: rope_qk_norm_kind = 0;
/// `y = (x * inv_rms) * (1 + weight)`, then RoPE (transformers `Gemma3RMSNorm`).
pub const ROPE_QK_NORM_RMS_ONE_PLUS: rope_qk_norm_kind = 1;
/// RoPE, then the weightless `y = r * inv_rms(r)` (transformers `Llama4TextL2Norm`);
/// the weights are ignored.
pub const ROPE_QK_NORM_L2_AFTER: rope_qk_norm_kind = 2;

/// A per-head QK norm, `inv_rms = 1 / sqrt(mean(x^2 over head_dim) + eps)` computed in
/// f32 (see the Rust crate's `QkNorm` for the exact order of operations). Versioned:
/// `struct_size = sizeof(rope_qk_norm)`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct rope_qk_norm {
    /// `sizeof(rope_qk_norm)`.
    pub struct_size: usize,
    /// A `ROPE_QK_NORM_*` value.
    pub kind: rope_qk_norm_kind,
    /// `rms_norm_eps`; finite and >= 0.
    pub eps: f32,
    /// The q norm's weight (`q_norm.weight`), `head_dim` floats (unused for
    /// `ROPE_QK_NORM_L2_AFTER`).
    pub q_weight: *const f32,
    /// Floats at `q_weight`.
    pub q_weight_len: usize,
    /// The k norm's weight, `head_dim` floats (unused without k or for
    /// `ROPE_QK_NORM_L2_AFTER`).
    pub k_weight: *const f32,
    /// Floats at `k_weight`.
    pub k_weight_len: usize,
}

/// The norm of a call and the byte ranges of its weights.
///
/// # Safety
/// `p` NULL or a readable `rope_qk_norm` whose weights are readable for their counts and
/// not written during the call.
unsafe fn norm<'a>(p: *const rope_qk_norm) -> R<(QkNorm<'a>, [(usize, usize); 2])> {
    // SAFETY: the caller's contract; every field accepts any bits (NULL is refused).
    let n = unsafe { read_versioned(p) }?;
    let norm = match n.kind {
        ROPE_QK_NORM_RMS | ROPE_QK_NORM_RMS_ONE_PLUS => {
            let (q, k) = (Buf::new(n.q_weight, n.q_weight_len)?, Buf::new(n.k_weight, n.k_weight_len)?);
            let reads = [q.bytes(), k.bytes()];
            // SAFETY: checked by `Buf::new`; readable and unchanged (the contract).
            let (q_weight, k_weight) = unsafe { (q.slice(), k.slice()) };
            let norm = if n.kind == ROPE_QK_NORM_RMS {
                QkNorm::qwen3(q_weight, k_weight, n.eps)
            } else {
                QkNorm::gemma3(q_weight, k_weight, n.eps)
            };
            return Ok((norm, reads));
        }
        ROPE_QK_NORM_L2_AFTER => QkNorm::llama4(n.eps),
        _ => return Err(ROPE_UNKNOWN_ENUM),
    };
    Ok((norm, [(0, 0); 2]))
}

/// # Safety
/// The contract of the `rope_apply_qk_norm_*` functions.
unsafe fn in_place<T: Element>(
    rope: *const rope_t,
    q: *const rope_tensor,
    k: *const rope_tensor,
    qk_norm: *const rope_qk_norm,
    opts: *const rope_apply_opts,
) -> rope_status {
    let body = |r: &Rope<'_>| {
        // SAFETY: `rope` passed `rope_ref`'s checks (`with_rope`).
        let handle = unsafe { storage(rope) };
        // SAFETY: the caller's contract (NULL or a readable struct and weights).
        let (norm, [qw, kw]) = unsafe { norm(qk_norm) }?;
        // The tensors must not overlap the weights either.
        let (qb, kb) = {
            // SAFETY: the caller's contract (NULL or readable structs).
            let (qb, _) = unsafe { tensor::<T>(q) }?;
            // SAFETY: as above.
            let kb = if k.is_null() { (0, 0) } else { unsafe { tensor::<T>(k) }?.0.bytes() };
            (qb.bytes(), kb)
        };
        disjoint(&[qb, kb], &[qw, kw])?;
        // SAFETY: the caller's contract, passed on.
        let (q, k, apply) = unsafe { in_place_args::<T>(q, k, opts, r.pairs(), handle) }?;
        rust(r.apply_qk_norm(q, k, &norm, &apply))
    };
    // SAFETY: the caller's contract (a handle).
    guard(|| unsafe { with_rope(rope, body) })
}

/// # Safety
/// The contract of the `rope_apply_qk_norm_into_*` functions.
unsafe fn into<T: Element>(
    rope: *const rope_t,
    q: *const rope_tensor,
    q_out: *const rope_tensor,
    k: *const rope_tensor,
    k_out: *const rope_tensor,
    qk_norm: *const rope_qk_norm,
    opts: *const rope_apply_opts,
) -> rope_status {
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
        // SAFETY: the caller's contract (NULL or a readable struct and weights).
        let (norm, [qw, kw]) = unsafe { norm(qk_norm) }?;
        // SAFETY: the caller's contract (NULL or readable options and buffers).
        let (apply, [ids, cos, sin]) = unsafe { options(opts, r.pairs()) }?;
        let (kb, kob) = k.map_or(((0, 0), (0, 0)), |((b, _), (o, _))| (b.bytes(), o.bytes()));
        // SAFETY: `rope` passed `rope_ref`'s checks (`with_rope`).
        let handle = unsafe { storage(rope) };
        disjoint(&[qob.bytes(), kob], &[qb.bytes(), kb, ids, cos, sin, handle, qw, kw])?;
        // SAFETY: checked by `Buf::new`, readable and not written by others (the contract).
        let q = Heads::new(unsafe { qb.slice() }, qv);
        // SAFETY: checked by `Buf::new`, writable and not accessed by others (the
        // contract), and disjoint from every other buffer of the call (checked).
        let q_out = HeadsMut::new(unsafe { qob.slice_mut() }, qov);
        let k = k.map(|((b, v), (o, ov))| {
            // SAFETY: as for q and q_out.
            (Heads::new(unsafe { b.slice() }, v), HeadsMut::new(unsafe { o.slice_mut() }, ov))
        });
        rust(r.apply_qk_norm_into(q, q_out, k, &norm, &apply))
    };
    // SAFETY: the caller's contract (a handle).
    guard(|| unsafe { with_rope(rope, body) })
}

/// Normalises every head of q and (if `k` is not NULL) k with `qk_norm` and rotates it,
/// in place, f32, in one pass; the norm runs over all `head_dim` elements (pass-through
/// dimensions are normalised too), the rotation over `0..rotary_dim`. Tensors, positions
/// and cos/sin as for `rope_apply_f32`. `qk_norm` is required; its weights must not
/// overlap q or k.
///
/// Errors (nothing is written): those of `rope_apply_f32` (`ROPE_NULL_POINTER` also for a
/// NULL `qk_norm` or weight with a non-zero count, `ROPE_UNKNOWN_ENUM` for an unknown
/// `kind`, `ROPE_UNSUPPORTED_STRUCT_SIZE` for its `struct_size`), and
/// `ROPE_NORM_WEIGHT_LENGTH` (a weight of other than `head_dim` floats; k's checked only
/// with k), `ROPE_INVALID_NORM_EPS` (`eps` NaN, infinite or negative).
///
/// # Safety
/// As for `rope_apply_f32`; `qk_norm` is NULL or a readable struct whose weights are
/// readable for their counts.
#[no_mangle]
pub unsafe extern "C" fn rope_apply_qk_norm_f32(
    rope: *const rope_t,
    q: *const rope_tensor,
    k: *const rope_tensor,
    qk_norm: *const rope_qk_norm,
    opts: *const rope_apply_opts,
) -> rope_status {
    // SAFETY: the same contract.
    unsafe { in_place::<f32>(rope, q, k, qk_norm, opts) }
}

/// `rope_apply_qk_norm_f32` for IEEE binary16 (`uint16_t` storage).
///
/// # Safety
/// As for `rope_apply_qk_norm_f32`.
#[no_mangle]
pub unsafe extern "C" fn rope_apply_qk_norm_f16(
    rope: *const rope_t,
    q: *const rope_tensor,
    k: *const rope_tensor,
    qk_norm: *const rope_qk_norm,
    opts: *const rope_apply_opts,
) -> rope_status {
    // SAFETY: the same contract.
    unsafe { in_place::<f16>(rope, q, k, qk_norm, opts) }
}

/// `rope_apply_qk_norm_f32` for bfloat16 (`uint16_t` storage).
///
/// # Safety
/// As for `rope_apply_qk_norm_f32`.
#[no_mangle]
pub unsafe extern "C" fn rope_apply_qk_norm_bf16(
    rope: *const rope_t,
    q: *const rope_tensor,
    k: *const rope_tensor,
    qk_norm: *const rope_qk_norm,
    opts: *const rope_apply_opts,
) -> rope_status {
    // SAFETY: the same contract.
    unsafe { in_place::<bf16>(rope, q, k, qk_norm, opts) }
}

/// `rope_apply_qk_norm_f32` out of place: reads q (and k), writes the normed and rotated
/// heads to `q_out` (and `k_out`), as `rope_apply_into_f32` does (outputs may have their
/// own strides; they must not overlap any other buffer of the call, weights included).
///
/// Errors: those of `rope_apply_into_f32` and of `rope_apply_qk_norm_f32`.
///
/// # Safety
/// As for `rope_apply_into_f32` and `rope_apply_qk_norm_f32`.
#[no_mangle]
pub unsafe extern "C" fn rope_apply_qk_norm_into_f32(
    rope: *const rope_t,
    q: *const rope_tensor,
    q_out: *const rope_tensor,
    k: *const rope_tensor,
    k_out: *const rope_tensor,
    qk_norm: *const rope_qk_norm,
    opts: *const rope_apply_opts,
) -> rope_status {
    // SAFETY: the same contract.
    unsafe { into::<f32>(rope, q, q_out, k, k_out, qk_norm, opts) }
}

/// `rope_apply_qk_norm_into_f32` for IEEE binary16 (`uint16_t` storage).
///
/// # Safety
/// As for `rope_apply_qk_norm_into_f32`.
#[no_mangle]
pub unsafe extern "C" fn rope_apply_qk_norm_into_f16(
    rope: *const rope_t,
    q: *const rope_tensor,
    q_out: *const rope_tensor,
    k: *const rope_tensor,
    k_out: *const rope_tensor,
    qk_norm: *const rope_qk_norm,
    opts: *const rope_apply_opts,
) -> rope_status {
    // SAFETY: the same contract.
    unsafe { into::<f16>(rope, q, q_out, k, k_out, qk_norm, opts) }
}

/// `rope_apply_qk_norm_into_f32` for bfloat16 (`uint16_t` storage).
///
/// # Safety
/// As for `rope_apply_qk_norm_into_f32`.
#[no_mangle]
pub unsafe extern "C" fn rope_apply_qk_norm_into_bf16(
    rope: *const rope_t,
    q: *const rope_tensor,
    q_out: *const rope_tensor,
    k: *const rope_tensor,
    k_out: *const rope_tensor,
    qk_norm: *const rope_qk_norm,
    opts: *const rope_apply_opts,
) -> rope_status {
    // SAFETY: the same contract.
    unsafe { into::<bf16>(rope, q, q_out, k, k_out, qk_norm, opts) }
}
