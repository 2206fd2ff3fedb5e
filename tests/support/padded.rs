//! Buffers with canaries on both sides (and, for strided views, in the gaps between rows),
//! and the checks that a call wrote nothing outside the elements it owns.

use core::ops::Range;
use std::vec;
use std::vec::Vec;

use rope_kernels::{Element, View};

use super::elem::TestElem;

/// Canary elements on each side of every buffer.
pub const PAD: usize = 9;

/// A buffer of `PAD` canaries, `len` elements from `fill`, `PAD` canaries.
pub fn padded_with<T: TestElem>(len: usize, fill: impl FnMut() -> T) -> Vec<T> {
    padded_at_with(0, len, fill).0
}

/// A buffer of `PAD + off` canaries, `n` elements from `fill`, `PAD` canaries; returns it
/// and the range of the live elements (`off` varies the start's alignment).
pub fn padded_at_with<T: TestElem>(
    off: usize,
    n: usize,
    mut fill: impl FnMut() -> T,
) -> (Vec<T>, Range<usize>) {
    let mut v = vec![T::from_bits(T::CANARY); n + off + 2 * PAD];
    let live = PAD + off..PAD + off + n;
    for x in &mut v[live.clone()] {
        *x = fill();
    }
    (v, live)
}

/// Which elements a view covers (true) inside a buffer of `len` (padding excluded).
pub fn covered(view: &View, head_dim: usize, len: usize) -> Vec<bool> {
    let mut c = vec![false; len];
    for t in 0..view.tokens {
        for h in 0..view.heads {
            let o = t * view.token_stride + h * view.head_stride;
            c[o..o + head_dim].iter_mut().for_each(|x| *x = true);
        }
    }
    c
}

/// Asserts that every element outside `view` (canaries, gaps) of a [`padded_with`] buffer
/// kept its initial bits.
pub fn check_untouched<T: Element>(before: &[T], after: &[T], view: &View, head_dim: usize, what: &str) {
    let inner = before.len() - 2 * PAD;
    let cov = covered(view, head_dim, inner);
    for (i, (b, a)) in before.iter().zip(after).enumerate() {
        let covered = i >= PAD && i < PAD + inner && cov[i - PAD];
        if !covered {
            assert_eq!(b.to_bits_u32(), a.to_bits_u32(), "{what}: element {i} outside the view was written");
        }
    }
}

/// Asserts that nothing outside `live` changed.
pub fn check_outside<T: Element>(before: &[T], after: &[T], live: &Range<usize>, what: &str) {
    for (i, (b, a)) in before.iter().zip(after).enumerate() {
        if !live.contains(&i) {
            assert_eq!(b.to_bits_u32(), a.to_bits_u32(), "{what}: element {i} outside the row was written");
        }
    }
}
