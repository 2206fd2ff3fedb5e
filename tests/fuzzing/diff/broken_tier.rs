//! A deliberately broken tier, for one demonstration: that the `diff_f32` fuzz target
//! catches a tier that mishandles a tail. Never part of the library or of a real build.
//!
//! With `--cfg rope_broken_tier_demo` in `RUSTFLAGS` (a cfg flag, not a feature, so that no
//! `--all-features` build picks it up), [`check`](super::check) corrupts the output of the
//! portable tier after its run, so the comparison with the scalar tier sees a "portable"
//! tier with a bug. The module refuses to compile outside `cargo fuzz` (which sets
//! `--cfg fuzzing`), so the flag cannot slip into a test:
//!
//! ```text
//! RUSTFLAGS='--cfg rope_broken_tier_demo' cargo +nightly fuzz run diff_f32 -- -max_total_time=60
//! ```
//!
//! The bug is the kind SIMD kernels have: pairs are processed two at a time, and when
//! `rotary_dim / 2` is odd the last pair (the tail) ignores the direction and is always
//! rotated forward. Only an inverse rotation with an odd number of pairs, a non-zero sine
//! and non-zero data shows it. The harness makes it so: after an inverse call with an odd
//! pair count succeeds, the tail pair of every rotated head of its outputs is replaced by
//! the same call's forward result (the tiers are bit-identical, so that is exactly the
//! forward rotation of the pair).

#[cfg(not(fuzzing))]
compile_error!(
    "`--cfg rope_broken_tier_demo` corrupts a tier's output; it only builds under `cargo \
     fuzz` (cfg(fuzzing)) for the broken-tier demonstration"
);

use rope_kernels::{PairLayout, RopeConfig, RopeError};

use super::{Buf, FuzzElem};

/// Applies the tail bug to `bufs`, the buffers after the run of an inverse call
/// (`result`) that started from `initial`; `forward` runs the same call forward on a copy.
/// `out_of_place`: the outputs are buffers 2 and 3 (q_out, k_out), else 0 and 1.
pub(super) fn corrupt<T: FuzzElem>(
    cfg: &RopeConfig,
    out_of_place: bool,
    initial: &[Option<Buf<T>>; 4],
    bufs: &mut [Option<Buf<T>>; 4],
    result: &Result<(), RopeError>,
    forward: impl FnOnce(&mut [Option<Buf<T>>; 4]) -> Result<(), RopeError>,
) {
    let (hd, pairs) = (cfg.head_dim, cfg.rotary_dim / 2);
    if result.is_err() || pairs.is_multiple_of(2) {
        return;
    }
    let mut fwd = initial.clone();
    if forward(&mut fwd).is_err() {
        return;
    }
    let tail = pairs - 1;
    let (i0, i1) = match cfg.layout {
        PairLayout::HalfSplit => (tail, pairs + tail),
        PairLayout::Interleaved => (2 * tail, 2 * tail + 1),
    };
    let outputs = if out_of_place { 2..4 } else { 0..2 };
    for i in outputs {
        let (Some(b), Some(f)) = (bufs[i].as_mut(), fwd[i].as_ref()) else { continue };
        let v = b.view;
        for t in 0..v.tokens {
            for h in 0..v.heads {
                let o = t * v.token_stride + h * v.head_stride;
                for d in [i0, i1] {
                    if d < hd && o + d < b.len {
                        b.data[b.front + o + d] = f.data[f.front + o + d];
                    }
                }
            }
        }
    }
}
