//! The attention-layer call (`Rope::apply_layer`, issue 17) against a straightforward
//! reference built from the existing calls: each token's rows converted to f32 (exact),
//! rotated with `apply_into` in f32 at the token's position, then rounded once to the
//! destination type (`Element::from_f32`, or `quantize_row_q8_0` for q8_0 rows) and placed
//! where the destination says; `InPlace` against `apply` on the set's view. Every buffer
//! (the fused input and every destination, filled with canaries) is compared whole, by bits.
//! Every error variant leaves every buffer untouched; the overlap rule of head sets is checked
//! against brute force on random sets.
//!
//! One test binary; the topics are its modules, in tests/layer/ (`#[path]`: this root is
//! tests/layer.rs, so that `--test layer` and the scripts that list tests/*.rs find it).

use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use rope_kernels::{
    bf16, f16, quantize_row_q8_0, ApplyOptions, Batch, BlockQ8_0, CacheElement, CacheLayout, CosSin,
    CosSinTable, Dest, Element, HeadSet, Heads, HeadsMut, LayerOptions, Operand, PairLayout, Positions, Qkv,
    Rope, RopeConfig, RopeError, Scaling, Slots, View,
};

const CASES: usize = if cfg!(miri) { 2 } else { 40 };

/// Test-side access to an input element type.
trait In: Element {
    fn pick(rng: &mut SmallRng) -> Self;
}

impl In for f32 {
    fn pick(rng: &mut SmallRng) -> Self {
        if rng.random_range(0..50) == 0 {
            return [f32::NAN, f32::INFINITY, -0.0, 1e-40][rng.random_range(0..4)];
        }
        rng.random_range(-4.0f32..4.0)
    }
}
impl In for f16 {
    fn pick(rng: &mut SmallRng) -> Self {
        f16::from_f32(f32::pick(rng))
    }
}
impl In for bf16 {
    fn pick(rng: &mut SmallRng) -> Self {
        bf16::from_f32(f32::pick(rng))
    }
}

/// Test-side access to a destination type: a canary, bits, and a row from f32 values.
trait Out: CacheElement {
    fn canary() -> Self;
    fn key(&self) -> Vec<u32>;
    fn row(x: &[f32]) -> Vec<Self>;
}

impl Out for f32 {
    fn canary() -> Self {
        f32::from_bits(0xDEAD_BEEF)
    }
    fn key(&self) -> Vec<u32> {
        vec![self.to_bits()]
    }
    fn row(x: &[f32]) -> Vec<Self> {
        x.iter().map(|&v| <f32 as Element>::from_f32(v)).collect()
    }
}
impl Out for f16 {
    fn canary() -> Self {
        f16::from_bits(0xBEEF)
    }
    fn key(&self) -> Vec<u32> {
        vec![u32::from(self.to_bits())]
    }
    fn row(x: &[f32]) -> Vec<Self> {
        x.iter().map(|&v| <f16 as Element>::from_f32(v)).collect()
    }
}
impl Out for bf16 {
    fn canary() -> Self {
        bf16::from_bits(0xBEEF)
    }
    fn key(&self) -> Vec<u32> {
        vec![u32::from(self.to_bits())]
    }
    fn row(x: &[f32]) -> Vec<Self> {
        x.iter().map(|&v| <bf16 as Element>::from_f32(v)).collect()
    }
}
impl Out for BlockQ8_0 {
    fn canary() -> Self {
        BlockQ8_0 { d: f16::from_bits(0xBEEF), qs: [0x5A; 32] }
    }
    fn key(&self) -> Vec<u32> {
        let mut v = vec![u32::from(self.d.to_bits())];
        v.extend(self.qs.iter().map(|&q| q as u8 as u32));
        v
    }
    fn row(x: &[f32]) -> Vec<Self> {
        let mut out = vec![BlockQ8_0::default(); x.len() / 32];
        quantize_row_q8_0(x, &mut out).unwrap();
        out
    }
}

fn keys<T: Out>(v: &[T]) -> Vec<u32> {
    v.iter().flat_map(Out::key).collect()
}

fn in_bits<T: Element>(v: &[T]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits_u32()).collect()
}

/// The tokens of a batch: `(token, sequence, position)`.
fn walk(batch: &Batch<'_>, tokens: usize) -> Vec<(usize, usize, u32)> {
    match *batch {
        Batch::Single(Positions::Start(s)) => (0..tokens).map(|t| (t, 0, s + t as u32)).collect(),
        Batch::Single(Positions::Ids(ids)) => (0..tokens).map(|t| (t, 0, ids[t])).collect(),
        Batch::Ragged { indptr, start } => (0..indptr.len() - 1)
            .flat_map(|i| (indptr[i]..indptr[i + 1]).map(move |t| (t as usize, i, start[i] + t - indptr[i])))
            .collect(),
        Batch::RaggedIds { indptr, position_ids } => (0..indptr.len() - 1)
            .flat_map(|i| (indptr[i]..indptr[i + 1]).map(move |t| (t as usize, i, position_ids[t as usize])))
            .collect(),
    }
}

#[path = "layer/duplicates.rs"]
mod duplicates;
#[path = "layer/errors.rs"]
mod errors;
#[path = "layer/overlap.rs"]
mod overlap;
#[path = "layer/reference.rs"]
mod reference;
#[path = "layer/zero_heads.rs"]
mod zero_heads;
