//! A deliberately broken tier, for one demonstration: that the `diff_f32` fuzz target
//! catches a tier that mishandles a tail. Never part of a real build.
//!
//! With the feature `__broken-tier-for-fuzz-demo` (not in `default`; the double underscore
//! marks it internal), [`dispatch::kernels_for`](crate::dispatch) returns this table in
//! the slot of [`Tier::Portable`], so the fuzz target, which compares every available tier
//! with the scalar one, sees a "portable" tier with a bug. The module refuses to compile
//! outside `cargo fuzz` (which sets `--cfg fuzzing`), so the feature cannot slip into a
//! test, a benchmark or a library build:
//!
//! ```text
//! cargo +nightly fuzz run --features broken-tier-demo diff_f32 -- -max_total_time=60
//! ```
//!
//! The bug is the kind SIMD kernels have: pairs are processed two at a time, and when
//! `rotary_dim / 2` is odd the last pair (the tail) ignores the direction and is always
//! rotated forward. Only an inverse rotation with an odd number of pairs, a non-zero sine
//! and non-zero data shows it.

#[cfg(not(fuzzing))]
compile_error!(
    "the feature `__broken-tier-for-fuzz-demo` installs a deliberately wrong kernel; it only \
     builds under `cargo fuzz` (cfg(fuzzing)) for the broken-tier demonstration"
);

use half::{bf16, f16};

use super::scalar::{pair_index, rotate_pair};
use super::{Kernels, RotateArgs};
use crate::dispatch::Tier;
use crate::element::Element;

pub(crate) static KERNELS: Kernels = Kernels {
    tier: Tier::Portable,
    rotate_f32: rotate::<f32>,
    rotate_f16: rotate::<f16>,
    rotate_bf16: rotate::<bf16>,
    ..super::scalar::KERNELS
};

/// The scalar kernel with the tail bug described in the module docs.
///
/// # Safety
/// The contract of [`RotateFn`](super::RotateFn).
unsafe fn rotate<T: Element>(a: &RotateArgs<'_, T>) {
    let pairs = a.cos.len();
    let rotary_dim = 2 * pairs;
    let in_place = core::ptr::eq(a.src, a.dst);
    for h in 0..a.heads {
        // SAFETY: the caller guarantees both heads are in bounds (RotateFn contract).
        let (src, dst) = unsafe { (a.src.add(h * a.src_head_stride), a.dst.add(h * a.dst_head_stride)) };
        for i in 0..pairs {
            let tail = pairs % 2 == 1 && i == pairs - 1;
            let (i0, i1) = pair_index(a.layout, pairs, i);
            // SAFETY: i0, i1 < rotary_dim <= head_dim, inside this head's range.
            let (x0, x1) = unsafe { ((*src.add(i0)).to_f32(), (*src.add(i1)).to_f32()) };
            // The bug: the tail pair is always rotated forward.
            let (y0, y1) = rotate_pair(x0, x1, a.cos[i], a.sin[i], a.inverse && !tail);
            // SAFETY: as above, for the destination head; both inputs are already read.
            unsafe {
                *dst.add(i0) = T::from_f32(y0);
                *dst.add(i1) = T::from_f32(y1);
            }
        }
        if !in_place {
            // SAFETY: rotary_dim..head_dim lies in both heads; out-of-place buffers do not
            // overlap (contract).
            unsafe {
                core::ptr::copy_nonoverlapping(
                    src.add(rotary_dim),
                    dst.add(rotary_dim),
                    a.head_dim - rotary_dim,
                );
            }
        }
    }
}
