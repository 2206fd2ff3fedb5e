//! Fused per-head QK norm + RoPE (issue 15): [`QkNorm`], [`Rope::apply_qk_norm`] and its
//! siblings.
//!
//! One pass per token and tensor, each head read from the caller's tensor and written once:
//! - `Rms` forms (norm, then RoPE): one kernel call per token and tensor
//!   (`norm_rope_heads` of the tier, `kernels/generic/qknorm.rs`) computes the `inv_rms` of
//!   a chunk of heads, then normalises and rotates each head in registers;
//! - `L2After` (RoPE, then norm): for f32 `HalfSplit` heads rotated whole of 4, 8 or 16
//!   vectors of the tier, the same kernel call rotates and normalises each head in registers;
//!   otherwise the tier's rotate kernel writes a group of heads' rotated part into a small
//!   scratch buffer on the stack (in L1), and the norm kernel reads it from there and writes
//!   the output.
//!
//! The kernels' module docs give the exact operation order; the result equals the norm
//! kernel followed by the rotate kernel (or the reverse) bit for bit, on every tier.

use core::mem::MaybeUninit;
use core::ops::Range;

use super::{
    for_each_row, CallFreqs, FixedFreqs, Heads, HeadsMut, Rope, RopeView, Tensor, Tensors, TokenParams,
};
use crate::config::MAX_PAIRS;
use crate::element::Element;
use crate::error::{Operand, RopeError};
use crate::freq::FreqRef;
use crate::kernels::generic::qknorm::{NormArgs, NormForm, NormRopeArgs};
use crate::kernels::{RotateArgs, PREFETCH_MIN_BYTES};
use crate::ApplyOptions;

/// How a [`QkNorm::Rms`] weight enters the formula.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum WeightOffset {
    /// `weight * normed` (transformers `Qwen3RMSNorm`; weights near 1).
    #[default]
    Zero,
    /// `normed * (1 + weight)` (transformers `Gemma3RMSNorm`; weights near 0).
    One,
}

/// A per-head norm of q and k, fused with RoPE by [`Rope::apply_qk_norm`].
///
/// Every form normalises each head over all `head_dim` elements (also the pass-through ones
/// past `rotary_dim`) with `inv_rms = 1 / sqrt(mean(x²) + eps)`, computed in f32:
///
/// | form | formula | source (transformers) | rounding |
/// |---|---|---|---|
/// | `Rms`, `WeightOffset::Zero` | `y = weight * round_T(x * inv_rms)`, then RoPE(y) | `Qwen3RMSNorm` (`modeling_qwen3.py`) | HF-exact: `x * inv_rms` is rounded to the element type `T` (HF's `hidden_states.to(input_dtype)`) before the weight multiply, the product is rounded to `T` (HF multiplies two `T` tensors); both a no-op for f32 |
/// | `Rms`, `WeightOffset::One` | `y = (x * inv_rms) * (1 + weight)`, then RoPE(y) | `Gemma3RMSNorm` (`modeling_gemma3.py`) | all in f32, rounded once to `T` (HF's `.type_as(x)`) |
/// | `L2After` | RoPE first, then `y = r * inv_rms(r)` on the rotated head `r` | `Llama4TextL2Norm` (`modeling_llama4.py`, applied to q and k after `apply_rotary_emb` on the layers that use RoPE) | the rotated head is rounded to `T` (HF's `.type_as(xq)`), then the norm in f32, rounded once |
///
/// Weights are f32 (`head_dim` entries each; a bf16 checkpoint's weights widen exactly).
/// When a weight is exactly representable in `T` (as a checkpoint's is), the `Zero` form
/// equals HF's op for op. RoPE is then this crate's (math in f32, one rounding per stored
/// element), so for f16/bf16 the rotation itself differs from HF's bf16 arithmetic as
/// [`Rope::apply_qk`] does. `sum(x²)` is reduced in a fixed order (16 partial sums,
/// then a pairwise tree), the same on every tier, which differs from PyTorch's order: the
/// norm agrees with HF to about 1e-7 relative for f32 (golden test: within 2e-6 absolute).
/// OLMo 2 normalises q and k over all heads together (`Olmo2RMSNorm(num_heads * head_dim)`),
/// not per head, so it is not this op.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum QkNorm<'a> {
    /// Weighted RMS norm before RoPE (Qwen3, Gemma 3).
    Rms {
        /// Weight of the q norm (`q_norm.weight`), `head_dim` entries.
        q_weight: &'a [f32],
        /// Weight of the k norm (`k_norm.weight`), `head_dim` entries (checked only when
        /// the call has a k tensor).
        k_weight: &'a [f32],
        /// `rms_norm_eps` of the config; finite, `>= 0`.
        eps: f32,
        /// How the weight enters the formula.
        offset: WeightOffset,
    },
    /// Weightless L2 (RMS) norm after RoPE (Llama 4's `use_qk_norm`).
    L2After {
        /// `rms_norm_eps` of the config; finite, `>= 0`.
        eps: f32,
    },
}

impl<'a> QkNorm<'a> {
    /// Qwen3's `q_norm` / `k_norm`: `QkNorm::Rms` with [`WeightOffset::Zero`].
    pub fn qwen3(q_weight: &'a [f32], k_weight: &'a [f32], eps: f32) -> Self {
        QkNorm::Rms { q_weight, k_weight, eps, offset: WeightOffset::Zero }
    }

    /// Gemma 3's `q_norm` / `k_norm`: `QkNorm::Rms` with [`WeightOffset::One`].
    pub fn gemma3(q_weight: &'a [f32], k_weight: &'a [f32], eps: f32) -> Self {
        QkNorm::Rms { q_weight, k_weight, eps, offset: WeightOffset::One }
    }

    /// Llama 4's post-RoPE `Llama4TextL2Norm`: [`QkNorm::L2After`].
    pub fn llama4(eps: f32) -> Self {
        QkNorm::L2After { eps }
    }

    /// The per-tensor plans, after checking the weights (of q, and of k when `has_k`) and eps.
    fn plans(&self, head_dim: usize, has_k: bool) -> Result<[Plan<'a>; 2], RopeError> {
        let eps = match *self {
            QkNorm::Rms { eps, .. } | QkNorm::L2After { eps } => eps,
        };
        match *self {
            QkNorm::Rms { q_weight, k_weight, offset, .. } => {
                let check = |w: &[f32], operand| {
                    if w.len() == head_dim {
                        Ok(())
                    } else {
                        Err(RopeError::NormWeightLength { operand, expected: head_dim, len: w.len() })
                    }
                };
                check(q_weight, Operand::Q)?;
                if has_k {
                    check(k_weight, Operand::K)?;
                }
                if !eps.is_finite() || eps < 0.0 {
                    return Err(RopeError::InvalidNormEps);
                }
                let form = match offset {
                    WeightOffset::Zero => NormForm::Weighted,
                    WeightOffset::One => NormForm::OnePlus,
                };
                Ok([q_weight, k_weight].map(|weight| Plan { form, weight, eps, after: false }))
            }
            QkNorm::L2After { .. } => {
                if !eps.is_finite() || eps < 0.0 {
                    return Err(RopeError::InvalidNormEps);
                }
                Ok([Plan { form: NormForm::Plain, weight: &[], eps, after: true }; 2])
            }
        }
    }
}

/// The norm of one tensor of a call.
#[derive(Clone, Copy)]
struct Plan<'a> {
    form: NormForm,
    /// `head_dim` entries (empty for `Plain`).
    weight: &'a [f32],
    eps: f32,
    /// Norm after the rotation (`L2After`) instead of before.
    after: bool,
}

/// Elements of the per-token scratch buffer that holds the rotated part of a group of heads
/// (8 KB of f32 on 64-bit targets, in L1; 2 KB elsewhere, microcontroller stacks).
const SCRATCH: usize = if cfg!(target_pointer_width = "64") { 2048 } else { 512 };
const _: () = assert!(SCRATCH >= 2 * MAX_PAIRS);

impl Rope<'_> {
    /// Normalises each head of q and (optionally) k and rotates it, in place, in one pass
    /// (see [`QkNorm`] for the forms, their formulas and their transformers sources).
    ///
    /// Shapes as [`Rope::apply_qk`]: q is `[tokens][q_heads][head_dim]` and k
    /// `[tokens][kv_heads][head_dim]` through their [`View`](crate::View)s (strides in
    /// elements; GQA: any head counts, the same tokens). The norm runs over all `head_dim`
    /// elements of a head (pass-through dimensions past `rotary_dim` are normalised too),
    /// the rotation over `0..rotary_dim`, at the positions and with the cos/sin source of
    /// `opts` (angles in radians, positions as token indices). Each head is read once and
    /// written once; the result equals [`Rope::norm_qk`] followed by [`Rope::apply_qk`]
    /// (`Rms` forms) or the reverse (`L2After`) bit for bit, on every tier.
    ///
    /// ```
    /// use rope_kernels::{ApplyOptions, HeadsMut, QkNorm, Rope, RopeConfig, View};
    ///
    /// // Qwen3-8B shapes: 32 q heads, 8 kv heads, head_dim 128, theta 1e6, eps 1e-6.
    /// let rope = Rope::new(RopeConfig::new(128, 1_000_000.0))?;
    /// let (q_w, k_w) = (vec![1.0f32; 128], vec![1.0f32; 128]);
    /// let mut q = vec![0.5f32; 3 * 32 * 128];
    /// let mut k = vec![0.5f32; 3 * 8 * 128];
    /// rope.apply_qk_norm(
    ///     HeadsMut::new(&mut q, View::token_major(3, 32, 128)),
    ///     Some(HeadsMut::new(&mut k, View::token_major(3, 8, 128))),
    ///     &QkNorm::qwen3(&q_w, &k_w, 1e-6),
    ///     &ApplyOptions::start(0),
    /// )?;
    /// // At position 0 the rotation is the identity: a constant head normalises to ~1.
    /// assert!((q[0] - 1.0).abs() < 1e-5);
    /// # Ok::<(), rope_kernels::RopeError>(())
    /// ```
    ///
    /// # Errors
    /// See [`Rope::apply_qk_norm_into`].
    pub fn apply_qk_norm<T: Element>(
        &self,
        q: HeadsMut<'_, T>,
        k: Option<HeadsMut<'_, T>>,
        norm: &QkNorm<'_>,
        opts: &ApplyOptions<'_>,
    ) -> Result<(), RopeError> {
        let r = self.view();
        let has_k = k.is_some();
        let (tokens, tensors) = r.qk_tensors(q, k)?;
        let plans = norm.plans(r.params.head_dim, has_k)?;
        r.run_norm(tokens, &tensors, &plans, opts)
    }

    /// [`Rope::apply_qk_norm`] out of place: reads q (and k), writes the normed and rotated
    /// heads to the outputs (same shapes, their own strides); pass-through dimensions are
    /// normalised too.
    ///
    /// # Errors
    /// Nothing is written when an error is returned. First those of the views, in the order
    /// of [`Rope::apply_qk_into`]; then [`RopeError::NormWeightLength`] for a q weight (or,
    /// with k, a k weight) whose length is not `head_dim`, then
    /// [`RopeError::InvalidNormEps`] for an `eps` that is NaN, infinite or negative; then
    /// the position and table errors of [`Rope::apply_qk_into`].
    pub fn apply_qk_norm_into<T: Element>(
        &self,
        q: Heads<'_, T>,
        q_out: HeadsMut<'_, T>,
        k: Option<(Heads<'_, T>, HeadsMut<'_, T>)>,
        norm: &QkNorm<'_>,
        opts: &ApplyOptions<'_>,
    ) -> Result<(), RopeError> {
        let r = self.view();
        let has_k = k.is_some();
        let (tokens, tensors) = r.qk_into_tensors(q, q_out, k)?;
        let plans = norm.plans(r.params.head_dim, has_k)?;
        r.run_norm(tokens, &tensors, &plans, opts)
    }

    /// The norm of [`QkNorm`] alone, in place, without RoPE (for an `L2After` norm: the
    /// weightless norm). The same kernel and bits as the norm step of
    /// [`Rope::apply_qk_norm`].
    ///
    /// # Errors
    /// Those of the views (as [`Rope::apply_qk`]), then those of the norm (as
    /// [`Rope::apply_qk_norm_into`]). Nothing is written on error.
    pub fn norm_qk<T: Element>(
        &self,
        q: HeadsMut<'_, T>,
        k: Option<HeadsMut<'_, T>>,
        norm: &QkNorm<'_>,
    ) -> Result<(), RopeError> {
        let r = self.view();
        let has_k = k.is_some();
        let (tokens, tensors) = r.qk_tensors(q, k)?;
        let plans = norm.plans(r.params.head_dim, has_k)?;
        let norm_fn = T::norm_fn(r.kernels());
        let hd = r.params.head_dim;
        let large = prefetch_worthy(&tensors, hd, tokens);
        for (x, plan) in tensors.iter().zip(&plans) {
            let Some(x) = x else { continue };
            for t in 0..tokens {
                let p = x.dst.wrapping_add(t * x.dst_token_stride);
                let args = NormArgs {
                    heads: x.heads,
                    head_dim: hd,
                    split: hd,
                    src0: p,
                    src0_stride: x.dst_head_stride,
                    dst0: p,
                    dst0_stride: x.dst_head_stride,
                    src1: p,
                    src1_stride: 0,
                    dst1: p,
                    dst1_stride: 0,
                    weight: plan.weight,
                    form: plan.form,
                    eps: plan.eps,
                    prefetch: large && x.dst_head_stride < x.dst_token_stride,
                };
                // SAFETY: an in-place view validated against its buffer: every head of token
                // t is in bounds and heads do not overlap; the weight has head_dim entries
                // (checked) unless Plain; the kernels come from the dispatcher.
                unsafe { norm_fn(&args) };
            }
        }
        Ok(())
    }
}

impl RopeView<'_> {
    /// The checks of [`RopeView::run`] (positions, table), then the fused pass over every
    /// token with the call's frequencies.
    fn run_norm<T: Element>(
        &self,
        tokens: usize,
        tensors: &Tensors<T>,
        plans: &[Plan<'_>; 2],
        opts: &ApplyOptions<'_>,
    ) -> Result<(), RopeError> {
        let Some(seq_len) = self.check_call(tokens, tensors, opts)? else {
            return Ok(());
        };
        let p = self.token_params(opts, tokens);
        if !self.per_call(seq_len) {
            let mut fixed = FixedFreqs;
            let freqs = self.freqs_at(seq_len, &mut fixed)?;
            // SAFETY: as in `RopeView::run_with`: validated views of buffers this call
            // borrows, `tokens` long; positions and table checked; dispatcher kernels.
            unsafe { norm_rotate_tokens(&p, &freqs, tensors, plans, 0..tokens) };
            return Ok(());
        }
        let mut slot = CallFreqs::<MAX_PAIRS>::new();
        let freqs = self.freqs_at(seq_len, &mut slot)?;
        // SAFETY: as above.
        unsafe { norm_rotate_tokens(&p, &freqs, tensors, plans, 0..tokens) };
        Ok(())
    }
}

/// Whether a call is large enough to prefetch (as `rotate_tokens` decides, over whole heads:
/// the norm reads all of them): more than [`PREFETCH_MIN_BYTES`] of input.
fn prefetch_worthy<T>(tensors: &Tensors<T>, head_dim: usize, tokens: usize) -> bool {
    let head_bytes = head_dim.saturating_mul(core::mem::size_of::<T>());
    let bytes = tensors
        .iter()
        .flatten()
        .fold(0usize, |b, x| b.saturating_add(x.heads.saturating_mul(head_bytes)))
        .saturating_mul(tokens);
    bytes > PREFETCH_MIN_BYTES
}

/// Normalises and rotates tokens `range` of every tensor of a validated call.
///
/// # Safety
/// The contract of [`super::rotate_tokens`]; each tensor's plan has a weight of `head_dim`
/// entries unless its form is `Plain`.
unsafe fn norm_rotate_tokens<T: Element>(
    p: &TokenParams<'_>,
    freqs: &FreqRef<'_>,
    tensors: &Tensors<T>,
    plans: &[Plan<'_>; 2],
    range: Range<usize>,
) {
    let large = prefetch_worthy(tensors, p.head_dim, p.call_tokens);
    let token = |t: usize, cos: &[f32], sin: &[f32]| {
        for (x, plan) in tensors.iter().zip(plans) {
            let Some(x) = x else { continue };
            if x.heads == 0 {
                continue;
            }
            // SAFETY: forwarded: token t of a validated tensor, its plan's weight.
            unsafe { norm_rotate_token(p, x, plan, t, cos, sin, large) };
        }
    };
    for_each_row(p, freqs, range, &token);
}

/// Token `t` of one tensor: one call of the fused kernel for all its heads; for `L2After`
/// on a shape the kernel does not take, groups of heads rotated into the scratch buffer and
/// normalised from it.
///
/// # Safety
/// As [`norm_rotate_tokens`], for token `t` of `x`.
#[inline(always)]
unsafe fn norm_rotate_token<T: Element>(
    p: &TokenParams<'_>,
    x: &Tensor<T>,
    plan: &Plan<'_>,
    t: usize,
    cos: &[f32],
    sin: &[f32],
    large: bool,
) {
    let (hd, rd) = (p.head_dim, 2 * p.pairs);
    let (src, dst) = (x.src.wrapping_add(t * x.src_token_stride), x.dst.wrapping_add(t * x.dst_token_stride));
    // One kernel call for every head of the token: norm and rotation in one pass (for
    // `after`, only when the kernel has a register path for the shape; else below).
    let args = NormRopeArgs {
        rotate: RotateArgs {
            src,
            dst,
            heads: x.heads,
            src_head_stride: x.src_head_stride,
            dst_head_stride: x.dst_head_stride,
            head_dim: hd,
            cos,
            sin,
            layout: p.layout,
            inverse: p.inverse,
            prefetch: large && x.src_head_stride < x.src_token_stride,
        },
        weight: plan.weight,
        form: plan.form,
        eps: plan.eps,
        after: plan.after,
    };
    // SAFETY: token t of a validated tensor (the contract of `rotate_tokens`): heads in bounds,
    // in place or disjoint; a weight of head_dim entries and not Plain, or Plain with `after`.
    if unsafe { T::norm_rope_fn(p.kernels)(&args) } {
        return;
    }
    // `after` on a shape without a register path: the rotate kernel into a scratch buffer
    // of `T` (in L1), then the norm kernel from it into the output.
    let (rotate, norm) = (T::rotate_fn(p.kernels), T::norm_fn(p.kernels));
    let group = SCRATCH / rd;
    let mut scratch = [MaybeUninit::<T>::uninit(); SCRATCH];
    let tmp = scratch.as_mut_ptr().cast::<T>();
    let mut h0 = 0;
    while h0 < x.heads {
        let n = group.min(x.heads - h0);
        let (s, d) = (src.wrapping_add(h0 * x.src_head_stride), dst.wrapping_add(h0 * x.dst_head_stride));
        let ra = RotateArgs {
            src: s,
            dst: tmp,
            heads: n,
            src_head_stride: x.src_head_stride,
            dst_head_stride: rd,
            head_dim: rd,
            cos,
            sin,
            layout: p.layout,
            inverse: p.inverse,
            prefetch: false,
        };
        let na = NormArgs {
            heads: n,
            head_dim: hd,
            split: rd,
            src0: tmp,
            src0_stride: rd,
            dst0: d,
            dst0_stride: x.dst_head_stride,
            src1: s.wrapping_add(rd),
            src1_stride: x.src_head_stride,
            dst1: d.wrapping_add(rd),
            dst1_stride: x.dst_head_stride,
            weight: plan.weight,
            form: plan.form,
            eps: plan.eps,
            prefetch: large && x.src_head_stride < x.src_token_stride,
        };
        // Heads h0 .. h0 + n of token t lie in the validated views (in place: one buffer;
        // out of place: a `&[T]` and a disjoint `&mut [T]`); the scratch holds n * rd
        // elements, is disjoint from both, and the rotation writes it before the norm reads.
        // SAFETY: as just said; the kernels come from the dispatcher.
        unsafe {
            rotate(&ra);
            norm(&na);
        }
        h0 += n;
    }
}
