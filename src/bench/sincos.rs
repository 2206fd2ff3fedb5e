//! The cos/sin generator of each tier (`rope_kernels::__bench::sincos`), for the
//! `sincos` benchmark and the examples.

use crate::config::AngleMode;
use crate::dispatch::kernels_for;
use crate::dispatch::{Tier, ALL_TIERS};
use crate::freq::Frequencies;
use crate::kernels::sincos::{RowInputs, SinCos};

/// The tiers whose generator this build and CPU have.
pub fn tiers() -> impl Iterator<Item = Tier> {
    ALL_TIERS.into_iter().filter(|t| kernels_for(*t).is_some())
}

/// Fills a row with the generator of `tier` (the scalar one if the tier is missing).
pub fn fill_row(
    tier: Tier,
    freqs: &Frequencies,
    mode: AngleMode,
    position: u32,
    cos: &mut [f32],
    sin: &mut [f32],
) {
    let gen = match kernels_for(tier) {
        Some(k) => SinCos::of(k),
        None => SinCos::of(&crate::kernels::scalar::KERNELS),
    };
    gen.fill(&RowInputs::new(&freqs.view(), mode), position, cos, sin);
}

/// Fills a row with the former libm generator (the test reference).
pub fn fill_row_libm(freqs: &Frequencies, mode: AngleMode, position: u32, cos: &mut [f32], sin: &mut [f32]) {
    crate::cossin::fill_row_libm(freqs, mode, position, cos, sin);
}
