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
            0 => View::token_major(tokens, heads, hd),
            1 => View::head_major(tokens, heads, hd),
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

/// The handles and per-call option types stay small (a few hundred bytes: their tables are
/// elsewhere), on every target that runs the tests.
#[test]
fn handle_and_option_sizes() {
    use core::mem::size_of;
    use rope_kernels::{ApplyOptions, LayerOptions, MRope, MRopeOptions, Rope, VisionOptions, VisionRope};
    let sizes = [
        ("Rope", size_of::<Rope<'static>>()),
        ("MRope", size_of::<MRope<'static>>()),
        ("VisionRope", size_of::<VisionRope<'static>>()),
        ("ApplyOptions", size_of::<ApplyOptions<'static>>()),
        ("MRopeOptions", size_of::<MRopeOptions<'static>>()),
        ("VisionOptions", size_of::<VisionOptions<'static>>()),
        ("LayerOptions", size_of::<LayerOptions<'static>>()),
    ];
    for (name, size) in sizes {
        println!("size_of::<{name}>() = {size}");
        assert!(size <= 512, "{name}: {size} bytes");
    }
}

/// A `Rope` with owned tables (`Rope::new`, `with_hf_inv_freq`) and one in caller memory
/// (`Rope::new_in`) hold the same tables and give the same bits; `as_ref` and
/// `with_tables` keep them.
#[test]
fn owned_and_caller_tables_agree() {
    use rope_kernels::{ApplyOptions, HeadsMut, LongRopeParams, Rope, RopeConfig, Scaling};
    let long = LongRopeParams::new(&[1.0, 1.5, 2.0, 3.0], &[2.0, 3.0, 4.0, 8.0], 64, 4.0).unwrap();
    let configs = [
        RopeConfig::new(8, 10_000.0),
        RopeConfig::new(8, 10_000.0).with_scaling(Scaling::Linear { factor: 4.0 }),
        RopeConfig::new(8, 10_000.0)
            .with_scaling(Scaling::DynamicNtk { factor: 2.0, max_position_embeddings: 16 }),
        RopeConfig::new(8, 10_000.0).with_scaling(Scaling::LongRope(long)),
    ];
    let hf = [1.0f32, 0.1, 0.01, 0.001];
    for config in configs {
        for table in [None, Some(&hf[..])] {
            let mut owned = Rope::new(config.clone()).unwrap();
            if let Some(t) = table {
                owned = owned.with_hf_inv_freq(t).unwrap();
            }
            let params = config.params();
            let (n64, n32) = Rope::table_lens(&params).unwrap();
            let (mut f64s, mut f32s) = (vec![0.0f64; n64], vec![0.0f32; n32]);
            let caller = Rope::new_in(&params, table, &mut f64s, &mut f32s).unwrap();
            assert_eq!(owned.params(), caller.params(), "{config:?}");
            // The same tables computed again elsewhere, attached to `caller`'s fixed part.
            let (mut c64, mut c32) = (vec![0.0f64; n64], vec![0.0f32; n32]);
            Rope::new_in(&params, table, &mut c64, &mut c32).unwrap();
            let copied = caller.with_tables(&c64, &c32).expect("same lengths");
            assert!(caller.with_tables(&c64[1..], &c32).is_none());
            let borrowed = owned.as_ref();
            for start in [0u32, 15, 16, 63, 64, 1000, u32::MAX - 3] {
                let x: Vec<f32> = (0..4 * 2 * 8).map(|i| (i as f32 * 0.37).sin()).collect();
                let mut outs = Vec::new();
                for rope in [&owned, &caller, &copied, &borrowed] {
                    let mut y = x.clone();
                    rope.apply(
                        HeadsMut::new(&mut y, View::token_major(4, 2, 8)),
                        &ApplyOptions::start(start),
                    )
                    .unwrap();
                    outs.push(y.iter().map(|v| v.to_bits()).collect::<Vec<_>>());
                    let f = rope.frequencies_at(u64::from(start) + 4).unwrap();
                    let g = owned.frequencies_at(u64::from(start) + 4).unwrap();
                    assert_eq!(f, g, "{config:?} {start}");
                }
                assert!(outs.windows(2).all(|w| w[0] == w[1]), "{config:?} {table:?} {start}");
            }
        }
    }
}
