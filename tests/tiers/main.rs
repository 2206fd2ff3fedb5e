//! One suite, run for every tier this build can run on this CPU: each tier's output must
//! be bit-identical to the scalar oracle (`to_bits`), for random shapes, strides, positions
//! and values from fixed seeds, over buffers padded with canaries on both sides (and in the
//! gaps between strided rows) that are checked after every call. Unavailable tiers are
//! skipped and reported by name (run with `--nocapture` to see the report).
//!
//! The encodings' row kernels (sinusoidal/learned add, ALiBi) are in the same suite, both
//! directly (every row length 0..=67) and end to end through the encodings pinned to a tier.
//!
//! One test binary (`tiers`), one module per operation.
//!
//! Under Miri the same suite runs with fewer and smaller cases.

#[path = "../support/mod.rs"]
mod support;

mod convert;
mod dispatcher;
mod encodings;
mod layer;
mod mrope;
mod qknorm;
mod rotary_dim;
mod rotate;

use support::elem::{bits, TestElem};
use support::padded::{check_outside, check_untouched, PAD};
use support::rng::{element, padded, padded_at, pow2, rng, TestRng};
use support::tiers::{pinned, tiers};

use rand::RngExt;
use rope_kernels::dispatch::{self, ALL_TIERS};
use rope_kernels::encodings::{
    add_alibi_with_tier, alibi_slopes, AlibiForm, LearnedElement, LearnedPositions, RelativeGrid, Sinusoidal,
    SinusoidalLayout,
};
use rope_kernels::{
    bf16, f16, ApplyOptions, CosSinTable, Element, Heads, HeadsMut, PairLayout, Positions, Rope, RopeConfig,
    RopeError, Tier, View,
};

/// Random cases per (tier, dtype) in `random_cases_match_oracle`.
const CASES: usize = if cfg!(miri) { 6 } else { 150 };
/// Largest token count, head count and extra (pass-through) dims of a random case.
const MAX_TOKENS: usize = if cfg!(miri) { 2 } else { 5 };
const MAX_HEADS: usize = if cfg!(miri) { 2 } else { 6 };
/// Special cos/sin values for caller tables: exact products that tie in bf16/f16, results
/// that overflow or become subnormal, infinities and NaN.
const TABLE_SPECIALS: &[f32] = &[
    1.0,
    -1.0,
    0.0,
    -0.0,
    0.5,
    0.00390625,
    -0.00390625,
    0.005859375,
    0.00048828125,
    1.0 + 1.0 / 256.0,
    1.0 - 1.0 / 512.0,
    1.5,
    1e30,
    1e-40,
    f32::INFINITY,
    f32::NAN,
    0.70710677,
];

/// A random view of `tokens × heads` rows of `head_dim`, and the buffer length it needs.
fn random_view(rng: &mut TestRng, tokens: usize, heads: usize, head_dim: usize) -> (View, usize) {
    let gap_h = if rng.random_bool(0.5) { 0 } else { rng.random_range(1..4) };
    let gap_t = if rng.random_bool(0.5) { 0 } else { rng.random_range(1..4) };
    let view = match rng.random_range(0..3) {
        0 => View::token_major(tokens, heads, head_dim),
        1 => View::head_major(tokens, heads, head_dim),
        // Strided with gaps, BSHD-like or BHSD-like.
        _ if rng.random_bool(0.5) => {
            let hs = head_dim + gap_h;
            View { tokens, heads, head_stride: hs, token_stride: heads * hs + gap_t }
        }
        _ => {
            let ts = head_dim + gap_t;
            View { tokens, heads, token_stride: ts, head_stride: tokens * ts + gap_h }
        }
    };
    let len = view.validate(head_dim, usize::MAX, rope_kernels::Operand::Q).unwrap();
    (view, len)
}
