//! The convert kernels (every input/output type pair and q8_0).
//!
//! `__bench::convert_rows` runs a tier's convert kernel (one call per token) over strided
//! heads; every tier's output buffer (rows, the gaps between them and canaries on both
//! sides) must equal the scalar oracle's bit for bit, and nothing outside the rows may be
//! written.

use super::*;

use rope_kernels::__bench::{convert_rows, ConvertRows};
use rope_kernels::{BlockQ8_0, CacheElement};

/// Random cases per (tier, input, output) in the convert suite.
const CONVERT_CASES: usize = if cfg!(miri) { 3 } else { 60 };

/// A destination type as the convert tests see it.
trait OutBits: CacheElement {
    const NAME: &'static str;
    fn canary() -> Self;
    fn same(&self, other: &Self) -> bool;
}

impl<T: TestElem + CacheElement> OutBits for T {
    const NAME: &'static str = <T as TestElem>::NAME;
    fn canary() -> Self {
        T::from_bits(T::CANARY)
    }
    fn same(&self, other: &Self) -> bool {
        self.to_bits_u32() == other.to_bits_u32()
    }
}

impl OutBits for BlockQ8_0 {
    const NAME: &'static str = "q8_0";
    fn canary() -> Self {
        BlockQ8_0 { d: f16::from_bits(0xBEEF), qs: [0x5A; 32] }
    }
    fn same(&self, other: &Self) -> bool {
        self == other
    }
}

/// How a convert case draws its input values.
#[derive(Clone, Copy, Debug)]
enum Values {
    /// [`element`]: exact values, random ones and specials (NaN, inf, subnormals).
    Mixed,
    /// Finite values only (q8_0 blocks take the vector path).
    Finite,
    /// Tiny values (q8_0: `1 / d` overflows, or `d` is subnormal).
    Tiny,
}

fn convert_value<I: TestElem>(rng: &mut TestRng, values: Values) -> I {
    match values {
        Values::Mixed => element(rng),
        Values::Finite => I::from_f32(rng.random_range(-4.0f32..4.0) * pow2(rng.random_range(-6..=6))),
        Values::Tiny => I::from_f32(rng.random_range(-1.0f32..1.0) * pow2(rng.random_range(-149..=-120))),
    }
}

/// One random convert call on `tier` against the scalar oracle; `half_split` forces a
/// `HalfSplit` call of that (head_dim, rotary_dim).
fn convert_case<I: TestElem, O: OutBits>(
    rng: &mut TestRng,
    tier: Tier,
    big: bool,
    half_split: Option<[usize; 2]>,
) {
    let unit = O::ELEMENTS_PER_UNIT;
    let head_dim = if let Some([head_dim, _]) = half_split {
        head_dim
    } else if unit > 1 {
        // Heads over 512 values take the q8_0 kernel's per-block path (the others its
        // rotate-then-quantize path).
        unit * if big && rng.random_range(0..6) == 0 {
            rng.random_range(17..=19)
        } else if big {
            rng.random_range(1..=6)
        } else {
            rng.random_range(1..=2)
        }
    } else if big {
        rng.random_range(1..=140)
    } else {
        rng.random_range(1..=24)
    };
    let rotary_dim = match (half_split, rng.random_range(0..4)) {
        (Some([_, rotary_dim]), _) => rotary_dim,
        (None, 0) => 0,
        (None, 1) => head_dim - head_dim % 2,
        _ => 2 * rng.random_range(0..=head_dim / 2),
    }
    .min(rope_kernels::MAX_ROTARY_DIM);
    let (tokens, heads) = (rng.random_range(1..=MAX_TOKENS), rng.random_range(1..=MAX_HEADS));
    let units = head_dim / unit;
    let src_head_stride = head_dim + rng.random_range(0..3);
    let src_token_stride = heads * src_head_stride + rng.random_range(0..4);
    let dst_head_stride = units + rng.random_range(0..3);
    let dst_token_stride = heads * dst_head_stride + rng.random_range(0..3);
    let r = ConvertRows {
        tokens,
        heads,
        head_dim,
        src_token_stride,
        src_head_stride,
        dst_token_stride,
        dst_head_stride,
    };
    let values = match rng.random_range(0..4) {
        0 | 1 => Values::Mixed,
        2 => Values::Finite,
        _ => Values::Tiny,
    };
    let src: Vec<I> = (0..tokens * src_token_stride).map(|_| convert_value(rng, values)).collect();
    let pairs = rotary_dim / 2;
    let angle = |rng: &mut TestRng| {
        if rng.random_range(0..30) == 0 {
            f32::from_bits(
                <f32 as TestElem>::SPECIALS[rng.random_range(0..<f32 as TestElem>::SPECIALS.len())],
            )
        } else {
            rng.random_range(-1.0f32..1.0)
        }
    };
    let cos: Vec<f32> = (0..pairs).map(|_| angle(rng)).collect();
    let sin: Vec<f32> = (0..pairs).map(|_| angle(rng)).collect();
    let layout = if half_split.is_some() || rng.random_range(0..2) == 0 {
        PairLayout::HalfSplit
    } else {
        PairLayout::Interleaved
    };
    let inverse = rng.random_range(0..2) == 0;
    let len = PAD + tokens * dst_token_stride + PAD;
    let run = |t: Tier| {
        let mut dst = vec![O::canary(); len];
        convert_rows(t, &src, &mut dst[PAD..len - PAD], r, &cos, &sin, layout, inverse).unwrap();
        dst
    };
    let what = format!(
        "{tier} {}->{} {layout:?} inverse={inverse} tokens={tokens} heads={heads} head_dim={head_dim} \
         rotary_dim={rotary_dim} strides={src_token_stride}/{src_head_stride}->{dst_token_stride}/\
         {dst_head_stride} {values:?}",
        I::NAME,
        O::NAME
    );
    let want = run(Tier::Scalar);
    let got = run(tier);
    // Canaries: exactly the units of the rows are written.
    let mut live = vec![false; len];
    for t in 0..tokens {
        for h in 0..heads {
            let o = PAD + t * dst_token_stride + h * dst_head_stride;
            live[o..o + units].iter_mut().for_each(|l| *l = true);
        }
    }
    for (i, (w, g)) in want.iter().zip(&got).enumerate() {
        if !live[i] {
            assert!(
                w.same(&O::canary()) && g.same(&O::canary()),
                "{what}: unit {i} outside the rows written"
            );
        }
        assert!(w.same(g), "{what}: unit {i}: scalar {w:?}, tier {g:?}");
    }
}

fn convert_suite<I: TestElem, O: OutBits>(seed: u64) {
    for tier in tiers() {
        let mut rng = rng(seed);
        for c in 0..CONVERT_CASES {
            convert_case::<I, O>(&mut rng, tier, c % 4 != 0, None);
        }
        println!(
            "{tier}: {CONVERT_CASES} random convert {}->{} cases bit-identical to scalar",
            I::NAME,
            O::NAME
        );
    }
}

/// The convert kernel on `HalfSplit` heads of one to nine whole vectors of pairs on 4, 8 and
/// 16 lanes (the shapes `rotate` unrolls, see `whole_vector_heads`), whole and partial
/// rotary, from f32 into f32, f16 and bf16 and from bf16 into f32, every tier against the
/// oracle.
#[test]
#[cfg_attr(miri, ignore = "the convert suites cover these loops' bounds under Miri")]
fn convert_whole_vector_heads_match_oracle() {
    let counts = [1, 2, 3, 4, 5, 6, 7, 8, 9];
    let mut all_pairs: Vec<usize> =
        [4, 8, 16].iter().flat_map(|l| counts.iter().map(move |n| l * n)).collect();
    all_pairs.sort_unstable();
    all_pairs.dedup();
    for tier in tiers() {
        let mut rng = rng(0x17_5EC7);
        for &pairs in &all_pairs {
            for extra in [0, 5] {
                let shape = Some([2 * pairs + extra, 2 * pairs]);
                convert_case::<f32, f32>(&mut rng, tier, false, shape);
                convert_case::<f32, bf16>(&mut rng, tier, false, shape);
                convert_case::<f32, f16>(&mut rng, tier, false, shape);
                convert_case::<bf16, f32>(&mut rng, tier, false, shape);
            }
        }
    }
}

#[test]
fn convert_f32_matches_oracle() {
    convert_suite::<f32, f32>(17_01);
    convert_suite::<f32, f16>(17_02);
    convert_suite::<f32, bf16>(17_03);
    convert_suite::<f32, BlockQ8_0>(17_04);
}

#[test]
fn convert_f16_matches_oracle() {
    convert_suite::<f16, f32>(17_11);
    convert_suite::<f16, f16>(17_12);
    convert_suite::<f16, bf16>(17_13);
    convert_suite::<f16, BlockQ8_0>(17_14);
}

#[test]
fn convert_bf16_matches_oracle() {
    convert_suite::<bf16, f32>(17_21);
    convert_suite::<bf16, f16>(17_22);
    convert_suite::<bf16, bf16>(17_23);
    convert_suite::<bf16, BlockQ8_0>(17_24);
}
