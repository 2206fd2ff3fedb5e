//! `View::validate` against a brute-force overlap checker.
//!
//! The nesting rule (see `View`'s docs) may reject some disjoint views that interleave rows
//! in exotic ways; that is documented and acceptable. It must never accept a view whose rows
//! share an element, its extent must be exactly one past the last element, and it must report
//! `StrideOverflow` exactly when that extent does not fit in `usize`.

mod common;

use rand::RngExt;
use rope_kernels::{Operand, RopeError, View};

/// The rows of `view` as half-open element ranges, sorted by start.
fn rows(view: &View, hd: usize) -> Vec<(usize, usize)> {
    let mut r: Vec<(usize, usize)> = (0..view.tokens)
        .flat_map(|t| (0..view.heads).map(move |h| t * view.token_stride + h * view.head_stride))
        .map(|o| (o, o + hd))
        .collect();
    r.sort_unstable();
    r
}

/// True if two rows share an element (head_dim > 0).
fn overlaps(rows: &[(usize, usize)]) -> bool {
    rows.windows(2).any(|w| w[1].0 < w[0].1)
}

/// Outcome counts, to report how many disjoint views the rule rejects.
#[derive(Default, Debug)]
struct Tally {
    accepted: usize,
    overlapping: usize,
    disjoint_rejected: usize,
    empty: usize,
}

/// Checks one small view (no overflow possible) and returns how it was classified.
fn check(view: View, hd: usize, tally: &mut Tally) {
    let got = view.validate(hd, usize::MAX, Operand::K);
    if view.is_empty() {
        assert_eq!(got, Ok(0), "{view:?} hd={hd}");
        tally.empty += 1;
        return;
    }
    let r = rows(&view, hd);
    let end = r.iter().map(|x| x.1).max().unwrap();
    if overlaps(&r) {
        assert_eq!(
            got,
            Err(RopeError::OverlappingStrides { operand: Operand::K }),
            "accepted {view:?} hd={hd}"
        );
        tally.overlapping += 1;
        return;
    }
    match got {
        Ok(n) => {
            assert_eq!(n, end, "extent of {view:?} hd={hd}");
            // The buffer length check is exact.
            assert_eq!(view.validate(hd, end, Operand::Q), Ok(end));
            assert_eq!(
                view.validate(hd, end - 1, Operand::Q),
                Err(RopeError::BufferTooShort { operand: Operand::Q, needed: end, len: end - 1 })
            );
            tally.accepted += 1;
        }
        Err(RopeError::OverlappingStrides { .. }) => tally.disjoint_rejected += 1,
        Err(e) => panic!("{view:?} hd={hd}: unexpected {e:?}"),
    }
}

/// Every view with up to 4 tokens and heads, strides up to 16 and head_dim up to 5.
#[test]
fn exhaustive_small_views_never_accept_overlap() {
    let mut tally = Tally::default();
    for hd in 1..=5 {
        for tokens in 0..=4 {
            for heads in 0..=4 {
                for token_stride in 0..=16 {
                    for head_stride in 0..=16 {
                        check(View { tokens, heads, token_stride, head_stride }, hd, &mut tally);
                    }
                }
            }
        }
    }
    eprintln!("exhaustive: {tally:?}");
    assert!(tally.accepted > 0 && tally.overlapping > 0);
}

/// Random larger views, including every standard family (which must be accepted).
#[test]
fn random_views_never_accept_overlap() {
    let mut rng = common::rng(0xB1);
    let mut tally = Tally::default();
    for _ in 0..100_000 {
        let hd = rng.random_range(1..40);
        let tokens = rng.random_range(0..12);
        let heads = rng.random_range(0..12);
        let view = match rng.random_range(0..4) {
            0 => View::bshd(tokens, heads, hd),
            1 => View::bhsd(tokens, heads, hd),
            // Padded BSHD (fused QKV is this with extra heads per token).
            2 => {
                let hs = hd + rng.random_range(0..5);
                View { tokens, heads, token_stride: heads * hs + rng.random_range(0..9), head_stride: hs }
            }
            _ => View {
                tokens,
                heads,
                token_stride: rng.random_range(0..300),
                head_stride: rng.random_range(0..300),
            },
        };
        let before = tally.disjoint_rejected;
        check(view, hd, &mut tally);
        if view.head_stride >= hd && view.token_stride >= view.heads.saturating_sub(1) * view.head_stride + hd
        {
            assert_eq!(tally.disjoint_rejected, before, "nested BSHD-like view rejected: {view:?} hd={hd}");
        }
    }
    eprintln!("random: {tally:?}");
}

/// `StrideOverflow` exactly when `(tokens-1)*token_stride + (heads-1)*head_stride + head_dim`
/// exceeds `usize::MAX` (computed in u128), checked on strides near the limit.
#[test]
fn overflow_exactly_when_extent_does_not_fit() {
    let mut rng = common::rng(0xB2);
    let max = usize::MAX as u128;
    let near = |rng: &mut common::TestRng| -> usize {
        match rng.random_range(0..4) {
            0 => rng.random_range(0..64),
            1 => usize::MAX / rng.random_range(1..8usize) - rng.random_range(0..64),
            2 => usize::MAX - rng.random_range(0..64),
            _ => rng.random_range(0..=usize::MAX),
        }
    };
    let (mut overflowed, mut fitted) = (0, 0);
    for _ in 0..100_000 {
        let hd = rng.random_range(1..64);
        let view = View {
            tokens: rng.random_range(1..5),
            heads: rng.random_range(1..5),
            token_stride: near(&mut rng),
            head_stride: near(&mut rng),
        };
        let extent = (view.tokens as u128 - 1) * view.token_stride as u128
            + (view.heads as u128 - 1) * view.head_stride as u128
            + hd as u128;
        let got = view.validate(hd, usize::MAX, Operand::QOut);
        if extent > max {
            assert_eq!(got, Err(RopeError::StrideOverflow { operand: Operand::QOut }), "{view:?} hd={hd}");
            overflowed += 1;
        } else {
            assert_ne!(got, Err(RopeError::StrideOverflow { operand: Operand::QOut }), "{view:?} hd={hd}");
            if let Ok(n) = got {
                assert_eq!(n as u128, extent);
            }
            fitted += 1;
        }
    }
    assert!(overflowed > 1000 && fitted > 1000, "{overflowed} {fitted}");
}
