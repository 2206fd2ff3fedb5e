//! Test-only: a deliberately slowed apply path, so that `scripts/bench-gate.sh` can be shown
//! to fail on a regression. Never part of a real build.
//!
//! With the feature `__slow-kernel-for-gate-demo` (not in `default`; the double underscore
//! marks it internal), every apply call (`Rope::apply*`, and each chunk of a
//! [`PreparedCall`](super::PreparedCall)) first runs the rotate kernel of its tier a second
//! time over every (token, head) row of its input, writing into a stack scratch row that is
//! then discarded. The output is unchanged; the work is about twice the real one (a little
//! more for calls with few heads, since the extra pass calls the kernel once per row), on
//! every tier, so the slowdown is far above the gate's 10% threshold whatever tier runs.
//!
//! ```text
//! scripts/bench-gate.sh save  parallel 'single'
//! CARGO_ARGS='--features rayon,__slow-kernel-for-gate-demo' scripts/bench-gate.sh check parallel 'single'
//! ```

use core::ops::Range;

use crate::config::{Layout, MAX_PAIRS, MAX_ROTARY_DIM};
use crate::element::Element;
use crate::kernels::{Kernels, RotateArgs};

const ONES: [f32; MAX_PAIRS] = [1.0; MAX_PAIRS];
const ZEROS: [f32; MAX_PAIRS] = [0.0; MAX_PAIRS];

/// Runs the rotate kernel over the first `2 * pairs` elements of every row `(t, h)`,
/// `t in tokens`, `h < heads`, at `src + t * token_stride + h * head_stride`, into a
/// scratch row.
///
/// # Safety
/// Every such row must be valid for reads of `2 * pairs` elements and not written by
/// anyone during the call.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn extra_pass<T: Element>(
    kernels: &'static Kernels,
    layout: Layout,
    pairs: usize,
    src: *const T,
    tokens: Range<usize>,
    heads: usize,
    token_stride: usize,
    head_stride: usize,
) {
    let rotate = T::rotate_fn(kernels);
    let mut scratch = [T::default(); MAX_ROTARY_DIM];
    for t in tokens {
        for h in 0..heads {
            let args = RotateArgs {
                // SAFETY: row (t, h) is in bounds (caller contract).
                src: unsafe { src.add(t * token_stride + h * head_stride) },
                dst: scratch.as_mut_ptr(),
                heads: 1,
                src_head_stride: 0,
                dst_head_stride: 0,
                head_dim: 2 * pairs,
                cos: &ONES[..pairs],
                sin: &ZEROS[..pairs],
                layout,
                inverse: false,
                prefetch: false,
            };
            // SAFETY: one head of `2 * pairs` elements: readable at src (caller contract),
            // writable in `scratch` (MAX_ROTARY_DIM >= 2 * pairs), and the stack scratch
            // cannot overlap the caller's buffer.
            unsafe { rotate(&args) };
            core::hint::black_box(&scratch);
        }
    }
}
