//! Test-only: a deliberately slowed rotation, so that the regression gates
//! (`scripts/bench-gate.sh` in time, `scripts/instr-gate.sh` in instructions) can be shown
//! to catch a slowdown. Never part of a real build.
//!
//! Compiled only with `--cfg rope_gate_slowdown="2x"` or `--cfg rope_gate_slowdown="5pct"`
//! in `RUSTFLAGS` (as `scripts/gate-demo.sh` sets it). It is a `cfg`, not a Cargo feature,
//! so `cargo build --all-features` never switches it on; the crate's one hook is at the top
//! of `rotate_tokens` (src/rope.rs).
//!
//! Before the real rotation, every apply call (`Rope::apply*`, and each chunk of a
//! `PreparedCall`) rotates a share of its (token, head) rows a second time, with the
//! kernel of its tier, into a stack scratch buffer that is then discarded: the output is
//! unchanged. Per tensor, of the `rows = tokens * heads` rows of the call (or chunk):
//! - `"2x"`: every row (about twice the work);
//! - `"5pct"`: `round(rows / 20)` rows (5% more rows; none for a tensor of fewer than 10
//!   rows): decode of 32 q and 8 k heads, 2 of the 40 rows; 64 tokens of 8 heads, 26 of 512.
//!
//! The extra rows are the first ones in (token, head) order, rotated in kernel calls of up
//! to [`GROUP`] heads of one token, as the real pass calls the kernel with all the heads of
//! a token: the extra time is about the extra share of rows, not a multiple of it for
//! the cost of many small calls.

use core::mem::MaybeUninit;
use core::ops::Range;

use super::{Tensors, TokenParams};
use crate::config::{MAX_PAIRS, MAX_ROTARY_DIM};
use crate::element::Element;
use crate::kernels::RotateArgs;

/// Heads per kernel call of the extra pass (its scratch holds this many rows).
const GROUP: usize = 8;

const ONES: [f32; MAX_PAIRS] = [1.0; MAX_PAIRS];
const ZEROS: [f32; MAX_PAIRS] = [0.0; MAX_PAIRS];

/// How many of a tensor's `rows` rows the pass rotates again. The module is compiled for
/// the values "2x" and "5pct" only (src/rope.rs): any other value leaves the build as it
/// is (`scripts/gate-demo.sh` checks that its slowed builds do count more instructions).
fn extra_rows(rows: usize) -> usize {
    if cfg!(rope_gate_slowdown = "2x") {
        rows
    } else {
        rows.saturating_add(10) / 20
    }
}

/// Rotates the first `extra_rows(tokens * heads)` input rows of tokens `range` of every
/// tensor (the first `2 * pairs` elements of each row) into a scratch buffer.
///
/// # Safety
/// As for `rotate_tokens`: every tensor comes from validated views, `range` lies within
/// their token count, and nobody writes the input rows of `range` during the call (this
/// pass only reads them); `p.kernels` came from the dispatcher.
#[inline(never)]
pub(super) unsafe fn extra_pass<T: Element>(p: &TokenParams<'_>, tensors: &Tensors<T>, range: Range<usize>) {
    let rotate = T::rotate_fn(p.kernels);
    let row = 2 * p.pairs;
    // Written by the kernel, never read: left uninitialised (zeroing 16 KiB per call would
    // cost more than the extra rows of a decode call).
    let mut scratch = MaybeUninit::<[T; GROUP * MAX_ROTARY_DIM]>::uninit();
    for x in tensors.iter().flatten() {
        let mut extra = extra_rows(range.len().saturating_mul(x.heads));
        for t in range.clone() {
            let mut h = 0;
            while h < x.heads && extra > 0 {
                let n = GROUP.min(x.heads - h).min(extra);
                let args = RotateArgs {
                    // SAFETY: row (t, h) of a validated view is in bounds (caller contract).
                    src: unsafe { x.src.add(t * x.src_token_stride + h * x.src_head_stride) },
                    dst: scratch.as_mut_ptr().cast::<T>(),
                    heads: n,
                    src_head_stride: x.src_head_stride,
                    dst_head_stride: row,
                    head_dim: row,
                    cos: &ONES[..p.pairs],
                    sin: &ZEROS[..p.pairs],
                    layout: p.layout,
                    inverse: false,
                    prefetch: false,
                };
                // Heads h..h + n of token t are rows of a validated view: readable (caller
                // contract) and pairwise disjoint; their `row` elements go to rows 0..n of
                // `scratch` (n <= GROUP, row <= MAX_ROTARY_DIM; writable, if uninitialised),
                // on the stack, so apart from the caller's buffer.
                // SAFETY: as just said; the kernels came from the dispatcher (contract).
                unsafe { rotate(&args) };
                h += n;
                extra -= n;
            }
            if extra == 0 {
                break;
            }
        }
    }
    core::hint::black_box(scratch.as_ptr());
}
