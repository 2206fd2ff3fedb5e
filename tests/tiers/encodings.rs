//! The encodings' row kernels (sinusoidal/learned add, ALiBi) directly, on every row
//! length, and end to end through the encodings pinned to a tier.

use super::*;

/// Row lengths of the row-kernel cases: every length 0..=67 (empty, tails alone, one and
/// two vectors, bodies with every tail on lane counts 4, 8, 16); a sample under Miri.
fn row_lengths() -> Vec<usize> {
    if cfg!(miri) {
        vec![0, 1, 5, 16, 17, 40, 67]
    } else {
        (0..=67).collect()
    }
}

/// Random rows per (tier, length) in the row-kernel suites.
const ROW_REPS: usize = if cfg!(miri) { 1 } else { 6 };

/// An encoding value that puts `x + pe` on a rounding tie of `T` (or next to one): half an
/// ulp of `x`, times 1 or 3, either sign, converted to `P`.
fn tie<T: TestElem, P: TestElem>(rng: &mut TestRng, x: T) -> P {
    let v = x.to_f32();
    if !v.is_finite() {
        return element(rng);
    }
    let next = T::from_bits(x.to_bits_u32() + 1).to_f32();
    let ulp = (next - v).abs();
    P::from_f32(ulp * [0.5f32, 1.5, -0.5, -1.5][rng.random_range(0..4)])
}

/// Every tier's add-row kernel for embeddings `T` plus rows `P` against the oracle: every
/// row length, random start alignments, random values with specials, ties, canaries.
fn add_row_suite<T: TestElem, P: TestElem + LearnedElement<T>>(seed: u64) {
    for tier in tiers() {
        let mut rng = rng(seed ^ tier as u64);
        let mut cases = 0;
        for n in row_lengths() {
            for _ in 0..ROW_REPS {
                let (x0, live) = padded_at::<T>(&mut rng, n);
                let mut pe = padded::<P>(&mut rng, n);
                for (i, p) in pe[PAD..PAD + n].iter_mut().enumerate() {
                    if rng.random_bool(0.3) {
                        *p = tie::<T, P>(&mut rng, x0[live.start + i]);
                    }
                }
                let pe0 = pe.clone();
                let what = format!("{tier} add row {}+{} n {n}", T::NAME, P::NAME);
                let run = |t: Tier| {
                    let mut x = x0.clone();
                    rope_kernels::__bench::encodings::add_row(t, &mut x[live.clone()], &pe[PAD..PAD + n])
                        .unwrap();
                    x
                };
                let (want, got) = (run(Tier::Scalar), run(tier));
                check_outside(&x0, &got, &live, &what);
                assert_eq!(bits(&want), bits(&got), "{what}");
                assert_eq!(bits(&pe0), bits(&pe), "{what}: the encoding row was written");
                cases += 1;
            }
        }
        println!("{tier}: {cases} add-row {}+{} cases bit-identical to scalar", T::NAME, P::NAME);
    }
}

#[test]
fn add_row_f32_f32_matches_oracle() {
    add_row_suite::<f32, f32>(0xADD_0001);
}

#[test]
fn add_row_f16_f32_matches_oracle() {
    add_row_suite::<f16, f32>(0xADD_0002);
}

#[test]
fn add_row_bf16_f32_matches_oracle() {
    add_row_suite::<bf16, f32>(0xADD_0003);
}

#[test]
fn add_row_f16_f16_matches_oracle() {
    add_row_suite::<f16, f16>(0xADD_0004);
}

#[test]
fn add_row_bf16_bf16_matches_oracle() {
    add_row_suite::<bf16, bf16>(0xADD_0005);
}

/// Every f16/bf16 bit pattern (a stride of them under Miri) as the embedding, plus random,
/// special and tie values, and as the encoding row; on every tier.
fn add_all_patterns<T: TestElem>()
where
    f32: LearnedElement<T>,
{
    let step = if cfg!(miri) { 257 } else { 1 };
    let patterns: Vec<T> = (0..=u16::MAX as u32).step_by(step).map(T::from_bits).collect();
    let mut rng = rng(0xADD_B175);
    let pe32: Vec<f32> = patterns
        .iter()
        .map(|&x| if rng.random_bool(0.5) { tie::<T, f32>(&mut rng, x) } else { element(&mut rng) })
        .collect();
    let pe16: Vec<T> = (0..patterns.len()).map(|_| element(&mut rng)).collect();
    let run32 = |t: Tier| {
        let mut x = patterns.clone();
        rope_kernels::__bench::encodings::add_row(t, &mut x, &pe32).unwrap();
        x
    };
    let run16 = |t: Tier, x: &[T], pe: &[T]| {
        let mut x = x.to_vec();
        rope_kernels::__bench::encodings::add_row(t, &mut x, pe).unwrap();
        x
    };
    let want =
        (run32(Tier::Scalar), run16(Tier::Scalar, &patterns, &pe16), run16(Tier::Scalar, &pe16, &patterns));
    for tier in tiers() {
        assert_eq!(bits(&want.0), bits(&run32(tier)), "{tier} {}+f32", T::NAME);
        assert_eq!(bits(&want.1), bits(&run16(tier, &patterns, &pe16)), "{tier} {0}+{0}", T::NAME);
        assert_eq!(bits(&want.2), bits(&run16(tier, &pe16, &patterns)), "{tier} {0}+{0} (row)", T::NAME);
    }
}

#[test]
fn add_row_all_f16_patterns_match_oracle() {
    add_all_patterns::<f16>();
}

#[test]
fn add_row_all_bf16_patterns_match_oracle() {
    add_all_patterns::<bf16>();
}

/// Hand-computed add results on every tier, each placed in the vector body and in the tail:
/// ties to even, overflow, subnormals, canonical NaN.
#[test]
fn add_row_known_values() {
    // (x bits, pe, expected bits)
    let f16_cases: &[(u32, f32, u32)] = &[
        (0x3C00, 0.00048828125, 0x3C00),     // 1 + 2^-11: tie, to even 1.0
        (0x3C01, 0.00048828125, 0x3C02),     // tie, up to even
        (0x7BFF, 15.99, 0x7BFF),             // 65504 + 15.99: below 65520, stays
        (0x7BFF, 16.0, 0x7C00),              // 65520: tie, to even 2^16: +inf
        (0x0001, -2.9802322e-8, 0x0000),     // 2^-24 - 2^-25: tie to 0
        (0x7C00, f32::NEG_INFINITY, 0x7E00), // inf - inf: canonical NaN
        (0xFE01, 1.0, 0x7E00),               // NaN in: canonical NaN out
    ];
    let bf16_cases: &[(u32, f32, u32)] = &[
        (0x3F80, 0.00390625, 0x3F80), // 1 + 2^-8: tie, to even
        (0x3F81, 0.00390625, 0x3F82), // tie, up to even
        (0x7F7F, 1e38, 0x7F80),       // overflow to +inf
        (0x0001, 0.0, 0x0001),        // subnormals kept
        (0x7F81, 0.0, 0x7FC0),        // signalling NaN: canonical NaN
    ];
    let f32_cases: &[(u32, f32, u32)] = &[
        (0x3F80_0000, 5.9604645e-8, 0x3F80_0000), // 1 + 2^-24: tie, to even
        (0x0000_0001, 1e-45, 0x0000_0002),        // subnormal sum, no flush to zero
        (0x8000_0000, 0.0, 0x0000_0000),          // -0 + 0 = +0
        (0x7FA0_1234, 1.0, 0x7FC0_0000),
    ];
    fn run<T: TestElem>(cases: &[(u32, f32, u32)])
    where
        f32: LearnedElement<T>,
    {
        for tier in tiers() {
            for &(x, pe, want) in cases {
                let mut xs = vec![T::from_f32(1.0); 37];
                let mut pes = vec![0.0f32; 37];
                for i in [0, 36] {
                    (xs[i], pes[i]) = (T::from_bits(x), pe);
                }
                rope_kernels::__bench::encodings::add_row(tier, &mut xs, &pes).unwrap();
                for i in [0, 36] {
                    let got = xs[i].to_bits_u32();
                    assert_eq!(got, want, "{tier} {} x {x:#x} + {pe}: {got:#x}", T::NAME);
                }
            }
        }
    }
    run::<f16>(f16_cases);
    run::<bf16>(bf16_cases);
    run::<f32>(f32_cases);
}

/// Every tier's ALiBi row kernel against the oracle: every row length, both forms, random
/// and special slopes and scores, first distances around 0, at and across +-2^24 (where the
/// SIMD tiers hand a row to the oracle), across the i32 limits and far beyond.
#[test]
fn alibi_row_matches_oracle() {
    const SLOPES: &[f32] =
        &[0.5, 0.00390625, 0.70710677, -0.25, 0.0, -0.0, 1e30, 1e-40, f32::INFINITY, f32::NAN];
    const EXACT: i64 = 1 << 24;
    for tier in tiers() {
        let mut rng = rng(0xA11B ^ tier as u64);
        let mut cases = 0;
        for n in row_lengths() {
            for _ in 0..ROW_REPS {
                let n64 = n as i64;
                let first = match rng.random_range(0..8) {
                    0..=2 => rng.random_range(-80..=80) - n64 / 2,
                    3 => EXACT - n64 + rng.random_range(-2..=2),
                    4 => -EXACT + rng.random_range(-2..=2),
                    5 => rng.random_range(-(1i64 << 33)..=1 << 33),
                    6 => i64::from(i32::MAX) - n64 / 2,
                    _ => i64::from(i32::MIN) - n64 / 2,
                };
                let slope = if rng.random_bool(0.5) {
                    SLOPES[rng.random_range(0..SLOPES.len())]
                } else {
                    rng.random_range(-1.0f32..1.0)
                };
                let symmetric = rng.random_bool(0.5);
                let (row0, live) = padded_at::<f32>(&mut rng, n);
                let what =
                    format!("{tier} alibi row n {n} first {first} slope {slope} symmetric {symmetric}");
                let run = |t: Tier| {
                    let mut r = row0.clone();
                    rope_kernels::__bench::encodings::alibi_row(
                        t,
                        &mut r[live.clone()],
                        slope,
                        first,
                        symmetric,
                    )
                    .unwrap();
                    r
                };
                let (want, got) = (run(Tier::Scalar), run(tier));
                check_outside(&row0, &got, &live, &what);
                assert_eq!(bits(&want), bits(&got), "{what}");
                cases += 1;
            }
        }
        println!("{tier}: {cases} alibi-row cases bit-identical to scalar");
    }
}

/// Sinusoidal tables and adds pinned to every tier equal the scalar tier's bits: both
/// layouts, odd widths, widths over one 64-frequency block, strided rows, positions by id
/// and by start, up to `u32::MAX`; the gaps between rows and the canaries stay unchanged.
#[test]
fn sinusoidal_matches_oracle_on_every_tier() {
    const DIMS: &[usize] = &[1, 2, 3, 5, 8, 63, 64, 65, 129, 130, 131, 260];
    let dims = if cfg!(miri) { &[5, 65][..] } else { DIMS };
    let reps = if cfg!(miri) { 1 } else { 4 };
    fn add<T: TestElem>(rng: &mut TestRng, pe: Sinusoidal, oracle: Sinusoidal, what: &str) {
        let d = pe.dim();
        let tokens = rng.random_range(1..=if cfg!(miri) { 2 } else { 5 });
        let stride = d + rng.random_range(0..3);
        let ids: Vec<u32> = (0..tokens)
            .map(|_| if rng.random_bool(0.3) { u32::MAX - rng.random_range(0..4) } else { rng.random() })
            .collect();
        let positions = if rng.random_bool(0.5) {
            Positions::Ids(&ids)
        } else {
            Positions::Start(rng.random_range(0..100_000))
        };
        let x0 = padded::<T>(rng, (tokens - 1) * stride + d);
        let run = |e: &Sinusoidal| {
            let mut x = x0.clone();
            e.add_to(&mut x[PAD..x0.len() - PAD], tokens, stride, positions).unwrap();
            x
        };
        let (want, got) = (run(&oracle), run(&pe));
        let live = PAD..x0.len() - PAD;
        check_outside(&x0, &got, &live, what);
        assert_eq!(
            bits(&want),
            bits(&got),
            "{what} {} tokens {tokens} stride {stride} {positions:?}",
            T::NAME
        );
    }
    for tier in tiers() {
        let mut rng = rng(0x51_0000 ^ tier as u64);
        for &d in dims {
            for layout in [SinusoidalLayout::Interleaved, SinusoidalLayout::Concatenated] {
                let base = if rng.random_bool(0.8) { 10_000.0 } else { rng.random_range(1.5..1e6) };
                let oracle = Sinusoidal::with_base(d, layout, base).unwrap().with_tier(Tier::Scalar).unwrap();
                let pe = oracle.with_tier(tier).unwrap();
                assert_eq!(pe.tier(), tier);
                let what = format!("{tier} sinusoidal {layout:?} d {d} base {base}");
                let rows = 3;
                let start = if rng.random_bool(0.5) { u32::MAX - 2 } else { rng.random_range(0..1 << 20) };
                let (mut want, mut got) = (vec![0.0f32; rows * d], vec![0.0f32; rows * d]);
                oracle.fill_table(start, &mut want).unwrap();
                pe.fill_table(start, &mut got).unwrap();
                assert_eq!(bits(&want), bits(&got), "{what} table at {start}");
                for _ in 0..reps {
                    add::<f32>(&mut rng, pe, oracle, &what);
                    add::<f16>(&mut rng, pe, oracle, &what);
                    add::<bf16>(&mut rng, pe, oracle, &what);
                }
            }
        }
        println!("{tier}: sinusoidal tables and add cases bit-identical to scalar");
    }
}

/// Learned adds pinned to every tier equal the scalar tier's bits, for every type pair.
#[test]
fn learned_matches_oracle_on_every_tier() {
    fn run<T: TestElem, P: TestElem + LearnedElement<T>>(rng: &mut TestRng, tier: Tier) {
        let d = [1usize, 7, 16, 33, 67, 130][rng.random_range(0..if cfg!(miri) { 4 } else { 6 })];
        let max_positions = rng.random_range(1..12);
        let table: Vec<P> = (0..max_positions * d).map(|_| element(rng)).collect();
        let oracle = LearnedPositions::new(&table, d).unwrap().with_tier(Tier::Scalar).unwrap();
        let wpe = oracle.with_tier(tier).unwrap();
        assert_eq!(wpe.tier(), tier);
        let tokens = rng.random_range(1..=4);
        let stride = d + rng.random_range(0..3);
        let ids: Vec<u32> = (0..tokens).map(|_| rng.random_range(0..max_positions as u32)).collect();
        let x0 = padded::<T>(rng, (tokens - 1) * stride + d);
        let run = |w: &LearnedPositions<'_, P>| {
            let mut x = x0.clone();
            w.add_to(&mut x[PAD..x0.len() - PAD], tokens, stride, Positions::Ids(&ids)).unwrap();
            x
        };
        let (want, got) = (run(&oracle), run(&wpe));
        let what = format!("{tier} learned {}+{} d {d} stride {stride} ids {ids:?}", T::NAME, P::NAME);
        check_outside(&x0, &got, &(PAD..x0.len() - PAD), &what);
        assert_eq!(bits(&want), bits(&got), "{what}");
    }
    let reps = if cfg!(miri) { 1 } else { 20 };
    for tier in tiers() {
        let mut rng = rng(0x1EA_0000 ^ tier as u64);
        for _ in 0..reps {
            run::<f32, f32>(&mut rng, tier);
            run::<f16, f32>(&mut rng, tier);
            run::<bf16, f32>(&mut rng, tier);
            run::<f16, f16>(&mut rng, tier);
            run::<bf16, bf16>(&mut rng, tier);
        }
        println!("{tier}: learned add cases bit-identical to scalar");
    }
}

/// ALiBi blocks pinned to every tier equal the scalar tier's bits: random head counts,
/// grids with KV-cache offsets, strides, both forms.
#[test]
fn alibi_matches_oracle_on_every_tier() {
    let reps = if cfg!(miri) { 2 } else { 30 };
    for tier in tiers() {
        let mut rng = rng(0xA11_0000 ^ tier as u64);
        for _ in 0..reps {
            let heads = rng.random_range(1..=if cfg!(miri) { 2 } else { 12 });
            let mut slopes = vec![0.0f32; heads];
            alibi_slopes(&mut slopes);
            let q = rng.random_range(1..=if cfg!(miri) { 2 } else { 6 });
            let k = rng.random_range(0..=if cfg!(miri) { 20 } else { 70 });
            let offsets = match rng.random_range(0..3) {
                0 => (0, 0),
                1 => (rng.random_range(0..1000), 0),
                _ => (u32::MAX - q as u32, u32::MAX - k.max(1) as u32 - rng.random_range(0..5)),
            };
            let grid = RelativeGrid::new(q, k).with_offsets(offsets.0, offsets.1);
            let stride = k + rng.random_range(0..3);
            let form = if rng.random_bool(0.5) { AlibiForm::Causal } else { AlibiForm::Symmetric };
            let s0 = padded::<f32>(&mut rng, (heads * q - 1) * stride + k);
            let run = |t: Tier| {
                let mut s = s0.clone();
                add_alibi_with_tier(&mut s[PAD..s0.len() - PAD], stride, grid, &slopes, form, t).unwrap();
                s
            };
            let (want, got) = (run(Tier::Scalar), run(tier));
            let what = format!("{tier} alibi heads {heads} {grid:?} stride {stride} {form:?}");
            check_outside(&s0, &got, &(PAD..s0.len() - PAD), &what);
            assert_eq!(bits(&want), bits(&got), "{what}");
        }
        println!("{tier}: alibi block cases bit-identical to scalar");
    }
}

/// The encodings refuse to pin a tier this build or CPU lacks, like `Rope::with_tier`.
#[test]
fn encodings_refuse_unavailable_tiers() {
    let pe = Sinusoidal::new(8, SinusoidalLayout::Interleaved).unwrap();
    let table = [0.0f32; 8];
    let wpe = LearnedPositions::new(&table, 8).unwrap();
    let mut s = [1.0f32; 4];
    let grid = RelativeGrid::new(2, 2);
    for t in ALL_TIERS {
        let ok = t.is_available();
        assert_eq!(pe.with_tier(t).is_ok(), ok, "{t}");
        assert_eq!(wpe.with_tier(t).is_ok(), ok, "{t}");
        let r = add_alibi_with_tier(&mut s, 2, grid, &[0.5], AlibiForm::Causal, t);
        assert_eq!(r.err(), (!ok).then_some(RopeError::TierUnavailable), "{t}");
        if !ok {
            assert_eq!(
                rope_kernels::__bench::encodings::alibi_row(t, &mut s, 1.0, 0, false),
                Err(RopeError::TierUnavailable)
            );
        }
    }
}
