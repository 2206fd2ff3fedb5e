//! A deliberately broken tier, for one demonstration: that the `diff_f32` fuzz target
//! catches a tier that mishandles a tail. Never part of a real build.
//!
//! With `--cfg rope_broken_tier_demo` in `RUSTFLAGS` (a cfg flag, not a feature, so that
//! no `--all-features` build picks it up), [`dispatch::kernels_for`](crate::dispatch)
//! returns this table in the slot of [`Tier::Portable`], so the fuzz target, which
//! compares every available tier with the scalar one, sees a "portable" tier with a bug.
//! The module refuses to compile outside `cargo fuzz` (which sets `--cfg fuzzing`), so the
//! flag cannot slip into a test, a benchmark or a library build:
//!
//! ```text
//! RUSTFLAGS='--cfg rope_broken_tier_demo' cargo +nightly fuzz run diff_f32 -- -max_total_time=60
//! ```
//!
//! The bug is the kind SIMD kernels have: pairs are processed two at a time, and when
//! `rotary_dim / 2` is odd the last pair (the tail) ignores the direction and is always
//! rotated forward. Only an inverse rotation with an odd number of pairs, a non-zero sine
//! and non-zero data shows it.

#[cfg(not(fuzzing))]
compile_error!(
    "`--cfg rope_broken_tier_demo` installs a deliberately wrong kernel; it only \
     builds under `cargo fuzz` (cfg(fuzzing)) for the broken-tier demonstration"
);

use super::scalar::{self, pair_index, rotate_pair};
use super::{Kernels, RotateArgs};
use crate::dispatch::Tier;
use crate::element::Element;

/// The portable tier's slot: the scalar cos/sin generator; the rotate table picks
/// [`rotate`] for it (`kernels/mod.rs`); the other operations keep the portable kernels.
pub(crate) static KERNELS: Kernels = Kernels { tier: Tier::Portable, ..scalar::KERNELS };

/// The scalar kernel with the tail bug described in the module docs: each head goes through
/// the scalar rotate, then the tail pair of an inverse call with an odd pair count is
/// overwritten with its forward rotation.
///
/// # Safety
/// The contract of [`RotateFn`](super::RotateFn).
pub(crate) unsafe fn rotate<T: Element>(a: &RotateArgs<'_, T>) {
    let pairs = a.cos.len();
    if !a.inverse || pairs.is_multiple_of(2) {
        // SAFETY: the caller upholds the RotateFn contract for `a`; without a tail to
        // break, the mutant is the scalar kernel.
        unsafe { scalar::rotate(a) };
        return;
    }
    let tail = pairs - 1;
    let (i0, i1) = pair_index(a.layout, pairs, tail);
    for h in 0..a.heads {
        // SAFETY: the caller guarantees both heads are in bounds (RotateFn contract).
        let (src, dst) = unsafe { (a.src.add(h * a.src_head_stride), a.dst.add(h * a.dst_head_stride)) };
        // Read the tail pair before the scalar kernel can overwrite it (in place).
        // SAFETY: i0, i1 < rotary_dim <= head_dim, inside this head's range.
        let (x0, x1) = unsafe { ((*src.add(i0)).to_f32(), (*src.add(i1)).to_f32()) };
        let head = RotateArgs { src, dst, heads: 1, ..*a };
        // SAFETY: `head` is head `h` of `a`, which the caller guarantees to be in bounds and
        // in place or non-overlapping (RotateFn contract); one head cannot overlap another.
        unsafe { scalar::rotate(&head) };
        // The bug: the tail pair is always rotated forward.
        let (y0, y1) = rotate_pair(x0, x1, a.cos[tail], a.sin[tail], false);
        // SAFETY: as above, for the destination head; the scalar kernel has returned.
        unsafe {
            *dst.add(i0) = T::from_f32(y0);
            *dst.add(i1) = T::from_f32(y1);
        }
    }
}
