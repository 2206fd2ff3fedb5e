//! The sibling positional encodings against their published formulas (evaluated here in
//! f64 with `std`, independently of the crate's `libm` path) and the reference
//! implementations' behaviour; every error path leaves the buffers unchanged.
// Index loops read closer to the formulas than iterator chains here.
#![allow(clippy::needless_range_loop)]

use std::f64::consts::FRAC_1_SQRT_2;

use rope_kernels::encodings::{
    add_alibi, alibi_slopes, alibi_slopes_with_bias_max, deberta_log_bucket_position,
    t5_relative_position_bucket, AlibiForm, LearnedPositions, RelativeGrid, RelativePositions, Sinusoidal,
    SinusoidalLayout,
};
use rope_kernels::{
    bf16, f16, Element, Positions, RopeError, CANONICAL_NAN_BF16, CANONICAL_NAN_F16, CANONICAL_NAN_F32,
};

/// Distance in units in the last place between two finite f32 of the same sign.
fn ulps(a: f32, b: f32) -> u32 {
    let key = |v: f32| {
        let i = v.to_bits() as i32;
        if i < 0 {
            i32::MIN - i
        } else {
            i
        }
    };
    key(a).abs_diff(key(b))
}

// ---------------------------------------------------------------- sinusoidal

/// The paper's interleaved encoding (XLM / DistilBERT `create_sinusoidal_embeddings`):
/// column j is sin (even j) or cos (odd j) of pos / 10000^(2 (j / 2) / d).
/// Returns the value and, for a rounded frequency (not exactly 1), the angle.
fn interleaved_ref(pos: f64, d: usize, j: usize) -> (f64, f64) {
    let angle = pos / 10_000f64.powf((2 * (j / 2)) as f64 / d as f64);
    let v = if j.is_multiple_of(2) { angle.sin() } else { angle.cos() };
    (v, if j / 2 == 0 { 0.0 } else { angle })
}

/// fairseq `get_embedding` / tensor2tensor `get_timing_signal_1d` in f64.
fn concatenated_ref(pos: f64, d: usize, j: usize) -> (f64, f64) {
    let half = d / 2;
    if j >= 2 * half {
        return (0.0, 0.0);
    }
    let increment = 10_000f64.ln() / (half.saturating_sub(1).max(1)) as f64;
    let k = j % half;
    let angle = pos * (-(k as f64) * increment).exp();
    let v = if j < half { angle.sin() } else { angle.cos() };
    (v, if k == 0 { 0.0 } else { angle })
}

#[test]
fn sinusoidal_d5_pos1_matches_the_paper() {
    let pe = Sinusoidal::new(5, SinusoidalLayout::Interleaved).unwrap();
    let mut row = [0.0f32; 5];
    pe.fill_table(1, &mut row).unwrap();
    let expected = [0.841471f32, 0.540302, 0.025116, 0.999685, 0.000631];
    for (c, (&v, &e)) in row.iter().zip(&expected).enumerate() {
        // The expected values are printed to 6 decimals.
        assert!((v - e).abs() <= 5e-7, "column {c}: {v} vs {e}");
    }
    // The last (odd) column is a sine: sin(1 / 10000^(4/5)).
    assert_eq!(ulps(row[4], (1.0 / 10_000f64.powf(0.8)).sin() as f32), 0);
}

#[test]
fn sinusoidal_tables_match_the_formulas_in_f64() {
    let positions = [0u32, 1, 2, 7, 1000, 65_535, 1 << 24, (1 << 31) + 12_345, u32::MAX - 1];
    for layout in [SinusoidalLayout::Interleaved, SinusoidalLayout::Concatenated] {
        for d in [1usize, 2, 3, 4, 5, 8, 63, 64, 65, 130] {
            let pe = Sinusoidal::new(d, layout).unwrap();
            for &p in &positions {
                let mut row = vec![f32::NAN; 2 * d];
                pe.fill_table(p, &mut row).unwrap();
                for r in 0..2 {
                    for j in 0..d {
                        let pos = f64::from(p) + r as f64;
                        let (want, angle) = match layout {
                            SinusoidalLayout::Interleaved => interleaved_ref(pos, d, j),
                            _ => concatenated_ref(pos, d, j),
                        };
                        // Both sides round an f64 sin/cos once (the two libms may differ by
                        // an f64 ulp: one f32 ulp after rounding). A frequency other than 1
                        // is itself rounded in f64 (pow/exp, and the crate multiplies by
                        // 1 / timescale where the paper divides): a couple of f64 ulps of
                        // the angle, which is visible at positions near 2^32.
                        let got = row[r * d + j];
                        let f32_ulp = f64::from(f32::EPSILON) * want.abs().max(f64::from(f32::MIN_POSITIVE));
                        let tol = f32_ulp + angle * 2f64.powi(-51);
                        assert!(
                            (f64::from(got) - want).abs() <= tol,
                            "{layout:?} d={d} pos={pos} j={j}: {got} vs {want}"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn sinusoidal_concatenated_odd_width_is_zero_padded() {
    let pe = Sinusoidal::new(7, SinusoidalLayout::Concatenated).unwrap();
    let mut t = [1.0f32; 3 * 7];
    pe.fill_table(10, &mut t).unwrap();
    for r in 0..3 {
        assert_eq!(t[r * 7 + 6], 0.0);
        // Columns 0 and 3 are sin and cos of the position itself (timescale 1).
        let pos = 10.0 + r as f64;
        assert_eq!(t[r * 7], pos.sin() as f32);
        assert_eq!(t[r * 7 + 3], pos.cos() as f32);
    }
}

#[test]
fn sinusoidal_angles_are_exact_at_large_positions() {
    // At 2^31 + 12345 an f32 angle is off by up to 128 radians; the f64 one is exact.
    let p = (1u32 << 31) + 12_345;
    let pe = Sinusoidal::new(2, SinusoidalLayout::Interleaved).unwrap();
    let mut row = [0.0f32; 2];
    pe.fill_table(p, &mut row).unwrap();
    assert_eq!(ulps(row[0], f64::from(p).sin() as f32), 0);
    assert_eq!(ulps(row[1], f64::from(p).cos() as f32), 0);
    let f32_angle = (p as f32) as f64;
    assert!((f32_angle.sin() as f32 - row[0]).abs() > 0.1, "the test would not catch an f32 angle");
}

fn check_add<T: Element>(layout: SinusoidalLayout, canonical_nan: u32) {
    let (d, tokens, stride) = (70usize, 4usize, 75usize);
    let pe = Sinusoidal::new(d, layout).unwrap();
    let ids = [9u32, 0, 123_456, 9];
    let mut x: Vec<T> = (0..tokens * stride).map(|i| T::from_f32(i as f32 * 0.37 - 40.0)).collect();
    x[1] = T::from_f32(f32::NAN);
    let before = x.clone();
    pe.add_to(&mut x, tokens, stride, Positions::Ids(&ids)).unwrap();
    for t in 0..tokens {
        let mut row = vec![0.0f32; d];
        pe.fill_table(ids[t], &mut row).unwrap();
        for c in 0..stride {
            let i = t * stride + c;
            if c < d {
                let want = T::from_f32(before[i].to_f32() + row[c]);
                assert_eq!(x[i].to_bits_u32(), want.to_bits_u32(), "t={t} c={c}");
            } else {
                assert_eq!(x[i].to_bits_u32(), before[i].to_bits_u32(), "gap t={t} c={c} was written");
            }
        }
    }
    // NaN in, canonical NaN out.
    assert_eq!(x[1].to_bits_u32(), canonical_nan);
}

#[test]
fn sinusoidal_add_all_types_rounds_once() {
    for layout in [SinusoidalLayout::Interleaved, SinusoidalLayout::Concatenated] {
        check_add::<f32>(layout, CANONICAL_NAN_F32);
        check_add::<f16>(layout, u32::from(CANONICAL_NAN_F16));
        check_add::<bf16>(layout, u32::from(CANONICAL_NAN_BF16));
    }
    // Start positions equal the same Ids.
    let pe = Sinusoidal::new(16, SinusoidalLayout::Interleaved).unwrap();
    let mut a = vec![bf16::from_f32(1.0); 3 * 16];
    let mut b = a.clone();
    pe.add_to(&mut a, 3, 16, Positions::Start(41)).unwrap();
    pe.add_to(&mut b, 3, 16, Positions::Ids(&[41, 42, 43])).unwrap();
    assert_eq!(a, b);
}

#[test]
fn sinusoidal_errors_write_nothing() {
    let bad = |name| RopeError::InvalidEncodingParameter { name, requirement: "" };
    let name_of = |e: RopeError| match e {
        RopeError::InvalidEncodingParameter { name, .. } => bad(name),
        other => other,
    };
    assert_eq!(Sinusoidal::new(0, SinusoidalLayout::Interleaved).map_err(name_of), Err(bad("dim")));
    for base in [0.0, -1.0, f64::NAN, f64::INFINITY] {
        assert_eq!(
            Sinusoidal::with_base(4, SinusoidalLayout::Concatenated, base).map_err(name_of),
            Err(bad("base")),
            "{base}"
        );
    }
    let pe = Sinusoidal::new(4, SinusoidalLayout::Interleaved).unwrap();
    let mut t = [7.0f32; 12];
    assert_eq!(pe.fill_table(0, &mut t[..10]), Err(RopeError::RaggedTable { len: 10, row_len: 4 }));
    assert_eq!(pe.fill_table(u32::MAX - 1, &mut t), Err(RopeError::PositionOverflow));
    assert!(t.iter().all(|&v| v == 7.0));
    // The last representable positions are fine.
    assert_eq!(pe.fill_table(u32::MAX - 2, &mut t), Ok(()));

    let mut x = [f16::from_f32(3.0); 12];
    let orig = x;
    let cases: [(usize, usize, Positions<'_>, RopeError); 5] = [
        (2, 4, Positions::Ids(&[1]), RopeError::PositionCountMismatch { tokens: 2, positions: 1 }),
        (3, 4, Positions::Start(u32::MAX - 1), RopeError::PositionOverflow),
        (
            2,
            3,
            Positions::Start(0),
            RopeError::RowStrideTooSmall { buffer: "embeddings", row_stride: 3, row_len: 4 },
        ),
        (
            3,
            5,
            Positions::Start(0),
            RopeError::EncodingBufferTooShort { buffer: "embeddings", needed: 14, len: 12 },
        ),
        (3, usize::MAX, Positions::Start(0), RopeError::EncodingSizeOverflow { buffer: "embeddings" }),
    ];
    for (tokens, stride, pos, err) in cases {
        assert_eq!(pe.add_to(&mut x, tokens, stride, pos), Err(err));
        assert_eq!(x, orig);
    }
    // Zero tokens: a no-op, even with an empty buffer.
    assert_eq!(pe.add_to::<f32>(&mut [], 0, 0, Positions::Start(u32::MAX)), Ok(()));
}

// ---------------------------------------------------------------- learned

#[test]
fn learned_adds_rows_in_every_type_combination() {
    let (d, rows, stride) = (5usize, 6usize, 7usize);
    let table32: Vec<f32> = (0..rows * d).map(|i| (i as f32).sin() * 3.0).collect();
    let ids = [5u32, 0, 3];

    fn run<T: Element, P: rope_kernels::encodings::LearnedElement<T>>(
        table: &[P],
        d: usize,
        stride: usize,
        ids: &[u32],
    ) {
        let wpe = LearnedPositions::new(table, d).unwrap();
        assert_eq!(wpe.max_positions(), table.len() / d);
        let mut x: Vec<T> = (0..ids.len() * stride).map(|i| T::from_f32(1.0 + i as f32 * 0.013)).collect();
        let before = x.clone();
        wpe.add_to(&mut x, ids.len(), stride, Positions::Ids(ids)).unwrap();
        for (t, &p) in ids.iter().enumerate() {
            for c in 0..stride {
                let i = t * stride + c;
                let want = if c < d {
                    T::from_f32(before[i].to_f32() + table[p as usize * d + c].to_f32())
                } else {
                    before[i]
                };
                assert_eq!(x[i].to_bits_u32(), want.to_bits_u32(), "t={t} c={c}");
            }
        }
    }
    run::<f32, f32>(&table32, d, stride, &ids);
    run::<f16, f32>(&table32, d, stride, &ids);
    run::<bf16, f32>(&table32, d, stride, &ids);
    let table16: Vec<f16> = table32.iter().map(|&v| f16::from_f32(v)).collect();
    run::<f16, f16>(&table16, d, stride, &ids);
    let tablebf: Vec<bf16> = table32.iter().map(|&v| bf16::from_f32(v)).collect();
    run::<bf16, bf16>(&tablebf, d, stride, &ids);
}

#[test]
fn learned_cannot_extrapolate_and_errors_write_nothing() {
    let table = vec![0.25f32; 2048 * 4];
    let wpe = LearnedPositions::new(&table, 4).unwrap();
    let mut x = [1.0f32; 8];
    let err = wpe.add_to(&mut x, 2, 4, Positions::Start(2047)).unwrap_err();
    assert_eq!(err, RopeError::BeyondTrainedLength { position: 2048, max_positions: 2048 });
    let text = err.to_string();
    assert!(text.contains("cannot extrapolate") && text.contains("2048 positions"), "{text}");
    assert_eq!(x, [1.0; 8]);
    // The last trained position is fine.
    wpe.add_to(&mut x, 2, 4, Positions::Ids(&[2047, 0])).unwrap();
    assert_eq!(x, [1.25; 8]);

    assert_eq!(
        LearnedPositions::new(&table[..10], 4).unwrap_err(),
        RopeError::RaggedTable { len: 10, row_len: 4 }
    );
    assert!(matches!(
        LearnedPositions::new(&table, 0),
        Err(RopeError::InvalidEncodingParameter { name: "dim", .. })
    ));
    let mut y = [f16::from_f32(2.0); 8];
    let t16 = [f16::from_f32(1.0); 8];
    let w16 = LearnedPositions::new(&t16, 4).unwrap();
    let errs = [
        (
            w16.add_to(&mut y, 2, 4, Positions::Ids(&[0])),
            RopeError::PositionCountMismatch { tokens: 2, positions: 1 },
        ),
        (
            w16.add_to(&mut y, 2, 4, Positions::Ids(&[0, 2])),
            RopeError::BeyondTrainedLength { position: 2, max_positions: 2 },
        ),
        (
            w16.add_to(&mut y, 2, 5, Positions::Start(0)),
            RopeError::EncodingBufferTooShort { buffer: "embeddings", needed: 9, len: 8 },
        ),
        (
            w16.add_to(&mut y, 2, 2, Positions::Start(0)),
            RopeError::RowStrideTooSmall { buffer: "embeddings", row_stride: 2, row_len: 4 },
        ),
        (w16.add_to(&mut y, 2, 4, Positions::Start(u32::MAX)), RopeError::PositionOverflow),
    ];
    for (got, want) in errs {
        assert_eq!(got, Err(want));
    }
    assert_eq!(y, [f16::from_f32(2.0); 8]);
}

// ---------------------------------------------------------------- relative: T5

/// `_relative_position_bucket` in f64 (the formula, not torch's f32 arithmetic).
fn t5_f64(rel: i64, bidirectional: bool, num_buckets: u32, max_distance: u32) -> i32 {
    let (mut n, mut bucket) = (num_buckets as i64, 0i64);
    let dist = if bidirectional {
        n /= 2;
        if rel > 0 {
            bucket += n;
        }
        rel.abs()
    } else {
        (-rel).max(0)
    };
    let max_exact = n / 2;
    let v = if dist < max_exact {
        dist
    } else {
        let f = (dist as f64 / max_exact as f64).ln() / (max_distance as f64 / max_exact as f64).ln()
            * (n - max_exact) as f64;
        (max_exact + f as i64).min(n - 1)
    };
    (bucket + v) as i32
}

#[test]
fn t5_buckets_by_hand() {
    // 32 buckets, max_distance 128, bidirectional: 16 per direction, max_exact 8,
    // large: 8 + trunc(ln(d / 8) / ln(16) * 8), clamped to 15; keys after the query +16.
    // ln(11/8)/ln16*8 = 0.919 -> 8; ln(12/8)/ln16*8 = 1.170 -> 9; ln2/ln16*8 = 2 -> 10;
    // ln(22/8)/ln16*8 = 2.919 -> 10; ln(23/8)/ln16*8 = 3.047 -> 11; d = 32 -> 12;
    // 45 -> 4.984 -> 12; 46 -> 5.047 -> 13; 64 -> 14; 90 -> 6.984 -> 14; 91 -> 7.016 -> 15;
    // 128 and beyond -> 16 -> clamped 15.
    let table: [(i64, i32); 29] = [
        (0, 0),
        (1, 17),
        (-1, 1),
        (7, 23),
        (-7, 7),
        (8, 24),
        (-8, 8),
        (11, 24),
        (-11, 8),
        (12, 25),
        (-12, 9),
        (15, 25),
        (16, 26),
        (-16, 10),
        (22, 26),
        (23, 27),
        (-23, 11),
        (31, 27),
        (32, 28),
        (45, 28),
        (46, 29),
        (63, 29),
        (64, 30),
        (90, 30),
        (91, 31),
        (127, 31),
        (128, 31),
        (1000, 31),
        (-1000, 15),
    ];
    for (rel, want) in table {
        assert_eq!(t5_relative_position_bucket(rel, true, 32, 128), Ok(want), "bidirectional {rel}");
    }
    // Causal: 32 buckets, max_exact 16, large: 16 + trunc(ln(d / 16) / ln 8 * 16);
    // keys after the query -> 0. ln(20/16)/ln8*16 = 1.717 -> 17; ln2/ln8*16 = 5.33 -> 21;
    // 64: 10.67 -> 26; 112: 14.97 -> 30; 113: 15.04 -> 31; 128: 16 -> clamped 31.
    let causal: [(i64, i32); 15] = [
        (5, 0),
        (0, 0),
        (-1, 1),
        (-15, 15),
        (-16, 16),
        (-17, 16),
        (-20, 17),
        (-32, 21),
        (-64, 26),
        (-112, 30),
        (-113, 31),
        (-127, 31),
        (-128, 31),
        (-1000, 31),
        (i64::from(u32::MAX), 0),
    ];
    for (rel, want) in causal {
        assert_eq!(t5_relative_position_bucket(rel, false, 32, 128), Ok(want), "causal {rel}");
    }
}

#[test]
fn t5_matches_the_formula_for_common_configs() {
    // For these configs torch's f32 arithmetic never crosses a bucket edge differently
    // from the exact formula (checked over this range).
    for (nb, md) in [(32u32, 128u32), (64, 128), (32, 256), (128, 1024), (320, 800)] {
        for bidirectional in [true, false] {
            for rel in -5000i64..=5000 {
                assert_eq!(
                    t5_relative_position_bucket(rel, bidirectional, nb, md).unwrap(),
                    t5_f64(rel, bidirectional, nb, md),
                    "{nb} {md} {bidirectional} {rel}"
                );
            }
        }
    }
}

// ---------------------------------------------------------------- relative: DeBERTa

/// `make_log_bucket_position` in f64 (the formula).
fn deberta_f64(rel: i64, bucket_size: u32, max_position: u32) -> i64 {
    let mid = i64::from(bucket_size / 2);
    if rel.abs() <= mid {
        return rel;
    }
    let v = ((rel.abs() as f64 / mid as f64).ln() / ((max_position - 1) as f64 / mid as f64).ln()
        * (mid - 1) as f64)
        .ceil() as i64
        + mid;
    v * rel.signum()
}

#[test]
fn deberta_log_buckets_match_the_formula_at_the_edges() {
    // DeBERTa-v3 (position_buckets 256, max_relative_positions 512): the first |q - k|
    // of every 16th bucket, from the f64 formula, and the bucket just below each edge.
    let edges = [(145i64, 153i64), (161, 182), (177, 216), (193, 258), (209, 307), (225, 365), (241, 434)];
    for (bucket, first) in edges {
        assert_eq!(deberta_f64(first, 256, 512), bucket);
        assert_eq!(deberta_f64(first - 1, 256, 512), bucket - 1);
        for sign in [1, -1] {
            assert_eq!(deberta_log_bucket_position(sign * first, 256, 512), Ok(sign * bucket));
            assert_eq!(deberta_log_bucket_position(sign * (first - 1), 256, 512), Ok(sign * (bucket - 1)));
        }
    }
    // |q - k| <= mid is kept; max_position - 1 is the last bucket 255; beyond, unclamped.
    for (rel, want) in [(0i64, 0i64), (1, 1), (-127, -127), (128, 128), (-128, -128), (129, 129), (511, 255)]
    {
        assert_eq!(deberta_log_bucket_position(rel, 256, 512), Ok(want));
    }
    assert_eq!(deberta_log_bucket_position(600, 256, 512), Ok(270));
    assert_eq!(deberta_log_bucket_position(-5000, 256, 512), Ok(-465));
    // Every distance agrees with the formula for these configs over these ranges...
    for (bs, mp, range) in
        [(256u32, 512u32, 65_316i64), (128, 256, 20_000), (64, 128, 20_000), (512, 1024, 10_127)]
    {
        for rel in 1..=range {
            for r in [rel, -rel] {
                assert_eq!(
                    deberta_log_bucket_position(r, bs, mp).unwrap(),
                    deberta_f64(r, bs, mp),
                    "{bs} {mp} {r}"
                );
            }
        }
    }
    // ...and the first one that does not shows the f32 arithmetic of the reference:
    // ln(65317 / 128) / ln(511 / 128) * 127 = 572.0000212 exactly, ceil 573 -> 701, but
    // in f32 the product rounds to 572.0 -> 700 (robust to a 1-ulp error in logf).
    assert_eq!(deberta_f64(65_317, 256, 512), 701);
    assert_eq!(deberta_log_bucket_position(65_317, 256, 512), Ok(700));
    assert_eq!(deberta_log_bucket_position(-65_317, 256, 512), Ok(-700));
}

#[test]
fn clipped_and_deberta_index_matrices() {
    let grid = RelativeGrid::new(3, 4);
    let fill = |kind: RelativePositions| {
        let mut m = vec![i32::MIN; 13];
        kind.fill(&mut m, grid).unwrap();
        assert_eq!(m[12], i32::MIN, "past query_len * key_len was written");
        m.truncate(12);
        m
    };
    // q - k: [0 -1 -2 -3; 1 0 -1 -2; 2 1 0 -1]
    assert_eq!(
        fill(RelativePositions::Clipped { max_distance: 2 }),
        [0, -1, -2, -2, 1, 0, -1, -2, 2, 1, 0, -1]
    );
    assert_eq!(
        fill(RelativePositions::ClippedIndex { max_distance: 2 }),
        [2, 1, 0, 0, 3, 2, 1, 0, 4, 3, 2, 1]
    );
    // DeBERTa's delta: clamp(q - k + 2, 0, 3).
    assert_eq!(fill(RelativePositions::DebertaIndex { att_span: 2 }), [2, 1, 0, 0, 3, 2, 1, 0, 3, 3, 2, 1]);
}

#[test]
fn kv_cache_offsets_shift_the_grid() {
    // Decode 2 new tokens after 3 cached ones: queries at 3, 4; keys at 0..5.
    let grid = RelativeGrid::new(2, 5).with_offsets(3, 0);
    let kinds = [
        RelativePositions::Clipped { max_distance: 3 },
        RelativePositions::DebertaIndex { att_span: 2 },
        RelativePositions::DebertaV2LogBucket { bucket_size: 4, max_position: 8 },
        RelativePositions::T5Bucket { bidirectional: true, num_buckets: 8, max_distance: 4 },
        RelativePositions::T5Bucket { bidirectional: false, num_buckets: 8, max_distance: 6 },
    ];
    for kind in kinds {
        let mut m = [0i32; 10];
        kind.fill(&mut m, grid).unwrap();
        for i in 0..2u32 {
            for j in 0..5u32 {
                assert_eq!(m[(i * 5 + j) as usize], kind.index(3 + i, j).unwrap(), "{kind:?} {i} {j}");
            }
        }
    }
    // The T5 variant uses key - query; DeBERTa query - key.
    let t5 = RelativePositions::T5Bucket { bidirectional: true, num_buckets: 32, max_distance: 128 };
    assert_eq!(t5.index(0, 1000), Ok(31));
    assert_eq!(t5.index(1000, 0), Ok(15));
    let deb = RelativePositions::DebertaV2LogBucket { bucket_size: 256, max_position: 512 };
    assert_eq!(deb.index(600, 0), Ok(270));
}

#[test]
fn relative_errors_write_nothing() {
    let bad = |kind: RelativePositions| match kind.validate() {
        Err(RopeError::InvalidEncodingParameter { name, .. }) => name,
        other => panic!("{kind:?}: {other:?}"),
    };
    assert_eq!(bad(RelativePositions::Clipped { max_distance: 0 }), "max_distance");
    assert_eq!(bad(RelativePositions::Clipped { max_distance: 1 << 31 }), "max_distance");
    assert_eq!(bad(RelativePositions::ClippedIndex { max_distance: 1 << 30 }), "max_distance");
    assert!(RelativePositions::ClippedIndex { max_distance: (1 << 30) - 1 }.validate().is_ok());
    assert_eq!(bad(RelativePositions::DebertaIndex { att_span: 0 }), "att_span");
    assert_eq!(bad(RelativePositions::DebertaIndex { att_span: (1 << 30) + 1 }), "att_span");
    assert_eq!(
        bad(RelativePositions::DebertaV2LogBucket { bucket_size: 1, max_position: 512 }),
        "bucket_size"
    );
    assert_eq!(
        bad(RelativePositions::DebertaV2LogBucket { bucket_size: 256, max_position: 129 }),
        "max_position"
    );
    assert_eq!(
        bad(RelativePositions::DebertaV2LogBucket { bucket_size: 1 << 31, max_position: (1 << 30) + 2 }),
        "max_position"
    );
    let t5 = |b, n, m| RelativePositions::T5Bucket { bidirectional: b, num_buckets: n, max_distance: m };
    assert_eq!(bad(t5(true, 3, 128)), "num_buckets");
    assert_eq!(bad(t5(false, 1, 128)), "num_buckets");
    assert_eq!(bad(t5(true, 32, 8)), "max_distance");
    assert_eq!(bad(t5(true, u32::MAX, 1 << 31)), "num_buckets");
    assert!(t5(true, 4, 2).validate().is_ok() && t5(false, 2, 2).validate().is_ok());
    assert!(t5_relative_position_bucket(1, true, 32, 8).is_err());
    assert!(deberta_log_bucket_position(1, 0, 8).is_err());

    let ok = RelativePositions::Clipped { max_distance: 4 };
    let mut m = [-9i32; 6];
    assert_eq!(
        ok.fill(&mut m, RelativeGrid::new(2, 4)),
        Err(RopeError::EncodingBufferTooShort { buffer: "out", needed: 8, len: 6 })
    );
    assert_eq!(
        ok.fill(&mut m, RelativeGrid::new(2, 3).with_offsets(u32::MAX, 0)),
        Err(RopeError::PositionOverflow)
    );
    assert_eq!(
        ok.fill(&mut m, RelativeGrid::new(2, 3).with_offsets(0, u32::MAX)),
        Err(RopeError::PositionOverflow)
    );
    // 2^32 x 2^32 cells: the positions fit in u32, the size does not fit in usize.
    let huge = u32::MAX as usize + 1;
    assert_eq!(
        ok.fill(&mut m, RelativeGrid::new(huge, huge)),
        Err(RopeError::EncodingSizeOverflow { buffer: "out" })
    );
    // Log buckets with a base barely above 1 grow past i32 at large distances.
    let steep =
        RelativePositions::DebertaV2LogBucket { bucket_size: 1 << 21, max_position: (1 << 20) + 1025 };
    let far = RelativeGrid::new(1, 2).with_offsets(u32::MAX, 0);
    assert_eq!(
        steep.fill(&mut m, far),
        Err(RopeError::RelativeIndexOverflow { relative_position: i64::from(u32::MAX) - 1 })
    );
    assert!(matches!(steep.index(0, u32::MAX), Err(RopeError::RelativeIndexOverflow { .. })));
    assert_eq!(m, [-9; 6]);
}

// ---------------------------------------------------------------- ALiBi

#[test]
fn alibi_slopes_follow_the_interleaving_rule() {
    let mut s8 = [0.0f32; 8];
    alibi_slopes(&mut s8);
    assert_eq!(s8, [0.5, 0.25, 0.125, 0.0625, 0.03125, 0.015625, 0.0078125, 0.00390625]);
    // 12 heads: the 8 slopes of 8 heads, then every other slope of 16 heads
    // (2^-0.5, 2^-1.5, 2^-2.5, 2^-3.5).
    let mut s12 = [0.0f32; 12];
    alibi_slopes(&mut s12);
    let want12: [f64; 12] = [
        0.5,
        0.25,
        0.125,
        0.0625,
        0.03125,
        0.015625,
        0.0078125,
        0.00390625,
        FRAC_1_SQRT_2,       // 2^-0.5 = 0.70710678...
        FRAC_1_SQRT_2 / 2.0, // 2^-1.5 = 0.35355339...
        FRAC_1_SQRT_2 / 4.0, // 2^-2.5 = 0.17677670...
        FRAC_1_SQRT_2 / 8.0, // 2^-3.5 = 0.08838835...
    ];
    for (h, (&got, &want)) in s12.iter().zip(&want12).enumerate() {
        assert_eq!(got.to_bits(), (want as f32).to_bits(), "head {h}");
    }
    let mut s1 = [0.0f32; 1];
    alibi_slopes(&mut s1);
    assert_eq!(s1, [0.00390625]);
    let mut s3 = [0.0f32; 3];
    alibi_slopes(&mut s3);
    assert_eq!(s3, [0.0625, 0.00390625, 0.25]);
    alibi_slopes(&mut []);

    // Against MPT's gen_slopes (next power of two N, 2^-(8k/N), odd k first, then even),
    // an independent statement of the same rule, for every head count up to 100.
    for n in 1usize..=100 {
        let big = n.next_power_of_two();
        let all: Vec<f64> = (1..=big).map(|k| 2f64.powf(-8.0 * k as f64 / big as f64)).collect();
        let mpt: Vec<f64> = if big == n {
            all
        } else {
            all.iter().skip(1).step_by(2).chain(all.iter().step_by(2)).copied().take(n).collect()
        };
        let mut got = vec![0.0f32; n];
        alibi_slopes(&mut got);
        for h in 0..n {
            assert!(ulps(got[h], mpt[h] as f32) <= 1, "n={n} h={h}: {} vs {}", got[h], mpt[h]);
        }
    }
    let mut s = [1.0f32; 4];
    alibi_slopes_with_bias_max(&mut s, 16.0).unwrap();
    assert_eq!(s, [2f32.powi(-4), 2f32.powi(-8), 2f32.powi(-12), 2f32.powi(-16)]);
    for bad in [0.0, -8.0, f64::NAN, f64::INFINITY] {
        let mut t = [1.0f32; 4];
        assert!(matches!(
            alibi_slopes_with_bias_max(&mut t, bad),
            Err(RopeError::InvalidEncodingParameter { name: "alibi_bias_max", .. })
        ));
        assert_eq!(t, [1.0; 4]);
    }
}

#[test]
fn alibi_adds_the_bias_with_offsets_and_stride() {
    // 2 heads, queries at positions 1, 2, keys at 0..3, rows of 4 (column 3 is a gap).
    let grid = RelativeGrid::new(2, 3).with_offsets(1, 0);
    let mut s = [1.0f32; 16];
    for g in [3, 7, 11, 15] {
        s[g] = 7.0;
    }
    add_alibi(&mut s, 4, grid, &[0.5, 0.25], AlibiForm::Causal).unwrap();
    #[rustfmt::skip]
    let want = [
        0.5, 1.0, 1.5, 7.0,     // head 0, query 1: k - q = -1, 0, 1
        0.0, 0.5, 1.0, 7.0,     // head 0, query 2: -2, -1, 0
        0.75, 1.0, 1.25, 7.0,   // head 1
        0.5, 0.75, 1.0, 7.0,
    ];
    assert_eq!(s, want);
    let mut s = [1.0f32; 16];
    add_alibi(&mut s, 4, grid, &[0.5, 0.25], AlibiForm::Symmetric).unwrap();
    assert_eq!(&s[..8], &[0.5, 1.0, 0.5, 1.0, 0.0, 0.5, 1.0, 1.0]);

    // A 32-head block against the definition, bit for bit, with KV-cache offsets.
    let mut slopes = [0.0f32; 32];
    alibi_slopes(&mut slopes);
    let grid = RelativeGrid::new(5, 37).with_offsets(100, 70);
    let mut scores: Vec<f32> = (0..32 * 5 * 40).map(|i| (i as f32 * 0.01).cos()).collect();
    let before = scores.clone();
    add_alibi(&mut scores, 40, grid, &slopes, AlibiForm::Causal).unwrap();
    for h in 0..32 {
        for i in 0..5 {
            for j in 0..40 {
                let at = (h * 5 + i) * 40 + j;
                let want = if j < 37 {
                    let d = (70 + j as i64) - (100 + i as i64);
                    before[at] + slopes[h] * d as f32
                } else {
                    before[at]
                };
                assert_eq!(scores[at].to_bits(), want.to_bits());
            }
        }
    }
}

#[test]
fn alibi_errors_write_nothing() {
    let mut s = [2.0f32; 12];
    let grid = RelativeGrid::new(2, 3);
    let cases = [
        (add_alibi(&mut s, 3, grid, &[0.5, f32::NAN], AlibiForm::Causal), "slopes"),
        (add_alibi(&mut s, 3, grid, &[f32::INFINITY], AlibiForm::Causal), "slopes"),
    ];
    for (got, name) in cases {
        assert!(matches!(got, Err(RopeError::InvalidEncodingParameter { name: n, .. }) if n == name));
    }
    assert_eq!(
        add_alibi(&mut s, 3, grid, &[0.5, 0.25, 0.125], AlibiForm::Causal),
        Err(RopeError::EncodingBufferTooShort { buffer: "scores", needed: 18, len: 12 })
    );
    assert_eq!(
        add_alibi(&mut s, 2, grid, &[0.5], AlibiForm::Causal),
        Err(RopeError::RowStrideTooSmall { buffer: "scores", row_stride: 2, row_len: 3 })
    );
    assert_eq!(
        add_alibi(&mut s, 3, grid.with_offsets(u32::MAX, 0), &[0.5], AlibiForm::Causal),
        Err(RopeError::PositionOverflow)
    );
    assert_eq!(
        add_alibi(&mut s, usize::MAX / 2, grid, &[0.5, 0.5], AlibiForm::Causal),
        Err(RopeError::EncodingSizeOverflow { buffer: "scores" })
    );
    assert_eq!(s, [2.0; 12]);
    // No heads or an empty grid: a no-op.
    assert_eq!(add_alibi(&mut [], 0, grid, &[], AlibiForm::Causal), Ok(()));
    assert_eq!(add_alibi(&mut [], 0, RelativeGrid::new(0, 3), &[0.5], AlibiForm::Causal), Ok(()));
}

#[test]
fn display_texts_name_the_problem() {
    let e = RopeError::InvalidEncodingParameter { name: "num_buckets", requirement: "must be >= 2" };
    assert_eq!(e.to_string(), "invalid positional encoding parameter `num_buckets`: must be >= 2");
    assert_eq!(
        RopeError::RaggedTable { len: 10, row_len: 4 }.to_string(),
        "table of 10 elements is not a whole number of rows of 4"
    );
    assert!(RopeError::RelativeIndexOverflow { relative_position: -5 }.to_string().contains("-5"));
}
