//! The seeded generator of the tests (`rand`'s `SmallRng`: fast, also under Miri) and the
//! random elements drawn from it.

use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};

use super::elem::TestElem;

/// The generator every test draws from.
pub type TestRng = SmallRng;

/// The generator for `seed`: the same sequence on every run and target.
pub fn rng(seed: u64) -> TestRng {
    SmallRng::seed_from_u64(seed)
}

/// Short draws for tests that pick from lists and ranges of `u64`.
pub trait Draw {
    /// A value in `0..n`.
    fn below(&mut self, n: u64) -> u64;
    /// One element of `xs`.
    fn pick<T: Copy>(&mut self, xs: &[T]) -> T;
    /// A value in `[-1, 1)`.
    fn unit(&mut self) -> f32;
}

impl<R: RngExt + ?Sized> Draw for R {
    fn below(&mut self, n: u64) -> u64 {
        self.random_range(0..n)
    }
    fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.random_range(0..xs.len())]
    }
    fn unit(&mut self) -> f32 {
        self.random_range(-1.0f32..1.0)
    }
}

/// `2^e` for `-149 <= e <= 127`, built from its bits: exact and deterministic everywhere
/// (`f32::powi` is not: Miri gives it a non-deterministic error, so two generations of one
/// seed differed there).
pub fn pow2(e: i32) -> f32 {
    assert!((-149..=127).contains(&e));
    if e >= -126 {
        f32::from_bits(((e + 127) as u32) << 23)
    } else {
        f32::from_bits(1 << (e + 149))
    }
}

/// A random element: mostly values exact in every type (so products and sums land on
/// rounding ties often), some random finite values, some specials.
pub fn element<T: TestElem>(rng: &mut TestRng) -> T {
    match rng.random_range(0..20) {
        0..=11 => {
            let m = rng.random_range(-64i32..=64) as f32;
            T::from_f32(m * pow2(rng.random_range(-8..=0)))
        }
        12..=16 => T::from_f32(rng.random_range(-8.0f32..8.0)),
        _ => T::from_bits(T::SPECIALS[rng.random_range(0..T::SPECIALS.len())]),
    }
}

/// A buffer of `PAD` canaries, `len` random [`element`]s, `PAD` canaries.
pub fn padded<T: TestElem>(rng: &mut TestRng, len: usize) -> std::vec::Vec<T> {
    super::padded::padded_with(len, || element(rng))
}

/// A buffer of `PAD + off` canaries (`off` random in `0..8`: the start's alignment), `n`
/// random [`element`]s, `PAD` canaries; returns it and the range of the live elements.
pub fn padded_at<T: TestElem>(rng: &mut TestRng, n: usize) -> (std::vec::Vec<T>, core::ops::Range<usize>) {
    let off = rng.random_range(0..8);
    super::padded::padded_at_with(off, n, || element(rng))
}
