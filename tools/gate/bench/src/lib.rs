//! The fixed benchmark cases of the regression gates (issue 14), shared by the timing
//! sampler (`src/bin/gate-bench.rs`, for `scripts/bench-gate.sh`) and the instruction-count
//! suite (`benches/instr.rs`, for `scripts/instr-gate.sh`), so both gates measure the same
//! calls.
//!
//! Every case is one call of the public API on fixed inputs (values from a fixed LCG,
//! buffers on a 64-byte boundary so that two builds see the same alignment), head_dim 128
//! and theta 10000 unless said otherwise:
//! - `decode/<dtype>/<layout>`: 1 token at position 1000, q of 32 heads and k of 8 heads
//!   in one `apply_qk` call, cos/sin from a cache;
//! - `prefill/<dtype>/<layout>`: 64 tokens × 8 heads from position 0, cache;
//! - `tail/f32/<layout>`: as prefill with head_dim 64 and rotary_dim 24 (12 pairs: not a
//!   whole number of vectors on any tier, so the kernels' tail paths run);
//! - `on_the_fly/f32/half_split`: as prefill, cos/sin generated per token (the sin/cos
//!   generator of the tier, no cache);
//! - `fill_table/f32`: `Rope::fill_table` of 64 positions (the generator alone).
//!
//! The tier is the best one the CPU has, or the one named by `ROPE_GATE_TIER` (`scalar`,
//! `portable`, `avx2`, `avx512`, `neon`); the instruction-count suite always pins `avx2`,
//! since Valgrind has no AVX-512.
//!
//! Built with `--cfg rope_gate_slowdown="5pct"` or `="2x"`, every `apply_qk` case does
//! extra work first (`src/slowdown.rs`), for the gates' demonstration
//! (`scripts/gate-demo.sh`).

#[cfg(any(rope_gate_slowdown = "2x", rope_gate_slowdown = "5pct"))]
mod slowdown;

use rope_kernels::dispatch::available_tiers;
use rope_kernels::{
    bf16, f16, ApplyOptions, Element, HeadsMut, PairLayout, Rope, RopeCache, RopeConfig, Tier, View,
};

/// How a case calls the library.
#[derive(Clone, Copy, Debug)]
enum Kind {
    /// `apply_qk` of `tokens` tokens from `start`: q of `q_heads`, k of `k_heads` (0: none).
    Apply { tokens: usize, q_heads: usize, k_heads: usize, start: u32, table: bool },
    /// `fill_table` of `rows` positions from 0.
    FillTable { rows: usize },
}

#[derive(Clone, Copy, Debug)]
enum Dtype {
    F32,
    F16,
    Bf16,
}

/// One benchmark case.
#[derive(Clone, Copy, Debug)]
pub struct Case {
    /// Its name, e.g. `prefill/bf16/interleaved`.
    pub name: &'static str,
    kind: Kind,
    dtype: Dtype,
    layout: PairLayout,
    head_dim: usize,
    rotary_dim: usize,
}

const HS: PairLayout = PairLayout::HalfSplit;
const IL: PairLayout = PairLayout::Interleaved;
const DECODE: Kind = Kind::Apply { tokens: 1, q_heads: 32, k_heads: 8, start: 1000, table: true };
const PREFILL: Kind = Kind::Apply { tokens: 64, q_heads: 8, k_heads: 0, start: 0, table: true };
const ON_THE_FLY: Kind = Kind::Apply { tokens: 64, q_heads: 8, k_heads: 0, start: 0, table: false };

const fn case(name: &'static str, kind: Kind, dtype: Dtype, layout: PairLayout) -> Case {
    Case { name, kind, dtype, layout, head_dim: 128, rotary_dim: 128 }
}

const fn tail(name: &'static str, layout: PairLayout) -> Case {
    Case { name, kind: PREFILL, dtype: Dtype::F32, layout, head_dim: 64, rotary_dim: 24 }
}

/// Every case, in the order the gates print them.
pub const CASES: &[Case] = &[
    case("decode/f32/half_split", DECODE, Dtype::F32, HS),
    case("decode/f32/interleaved", DECODE, Dtype::F32, IL),
    case("decode/f16/half_split", DECODE, Dtype::F16, HS),
    case("decode/bf16/half_split", DECODE, Dtype::Bf16, HS),
    case("prefill/f32/half_split", PREFILL, Dtype::F32, HS),
    case("prefill/f32/interleaved", PREFILL, Dtype::F32, IL),
    case("prefill/f16/half_split", PREFILL, Dtype::F16, HS),
    case("prefill/f16/interleaved", PREFILL, Dtype::F16, IL),
    case("prefill/bf16/half_split", PREFILL, Dtype::Bf16, HS),
    case("prefill/bf16/interleaved", PREFILL, Dtype::Bf16, IL),
    tail("tail/f32/half_split", HS),
    tail("tail/f32/interleaved", IL),
    case("on_the_fly/f32/half_split", ON_THE_FLY, Dtype::F32, HS),
    case("fill_table/f32", Kind::FillTable { rows: 64 }, Dtype::F32, HS),
];

/// The case called `name`.
pub fn find(name: &str) -> Option<&'static Case> {
    CASES.iter().find(|c| c.name == name)
}

/// The tier named `name` (as [`Tier::name`] spells it).
pub fn tier_named(name: &str) -> Option<Tier> {
    rope_kernels::dispatch::ALL_TIERS.into_iter().find(|t| t.name() == name)
}

/// The tier the gates time: `ROPE_GATE_TIER` if set, else the best this CPU has.
///
/// # Errors
/// A message if `ROPE_GATE_TIER` names no tier, or one this build or CPU lacks.
pub fn tier_from_env() -> Result<Tier, String> {
    match std::env::var("ROPE_GATE_TIER") {
        Ok(name) => {
            let t = tier_named(&name).ok_or_else(|| format!("ROPE_GATE_TIER={name}: no such tier"))?;
            if t.is_available() {
                Ok(t)
            } else {
                Err(format!("ROPE_GATE_TIER={name}: this build or CPU lacks it"))
            }
        }
        Err(_) => Ok(available_tiers().last().unwrap_or(Tier::Scalar)),
    }
}

/// A case set up on a tier: `run` makes its one call.
pub trait Prepared {
    /// Makes the case's call once.
    fn run(&mut self);
    /// The tier the call runs on.
    fn tier(&self) -> Tier;
    /// A hash (FNV-1a) of the bits of the case's outputs as they are now.
    fn checksum(&mut self) -> u64;
}

/// FNV-1a over `words`.
fn fnv(words: impl Iterator<Item = u32>) -> u64 {
    words.fold(0xcbf2_9ce4_8422_2325, |h, w| {
        w.to_le_bytes().iter().fold(h, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3))
    })
}

impl Case {
    /// Builds the case's inputs and `Rope` on `tier`.
    ///
    /// # Errors
    /// A message if the library rejects the configuration or the tier.
    pub fn prepare(&self, tier: Tier) -> Result<Box<dyn Prepared>, String> {
        let config = RopeConfig::new(self.head_dim, 10_000.0)
            .with_rotary_dim(self.rotary_dim)
            .with_layout(self.layout);
        let rope =
            Rope::new(config).and_then(|r| r.with_tier(tier)).map_err(|e| format!("{}: {e:?}", self.name))?;
        match self.kind {
            Kind::FillTable { rows } => {
                let pairs = self.rotary_dim / 2;
                Ok(Box::new(FillTable { rope, cos: vec![0.0; rows * pairs], sin: vec![0.0; rows * pairs] }))
            }
            Kind::Apply { tokens, q_heads, k_heads, start, table } => {
                let cache = if table {
                    let c = rope
                        .build_cache(start as usize + tokens)
                        .map_err(|e| format!("{}: {e:?}", self.name))?;
                    Some(c)
                } else {
                    None
                };
                let shape = Shape { tokens, q_heads, k_heads, start, head_dim: self.head_dim };
                Ok(match self.dtype {
                    Dtype::F32 => Box::new(Call::<f32>::new(rope, cache, shape)),
                    Dtype::F16 => Box::new(Call::<f16>::new(rope, cache, shape)),
                    Dtype::Bf16 => Box::new(Call::<bf16>::new(rope, cache, shape)),
                })
            }
        }
    }
}

struct FillTable {
    rope: Rope<'static>,
    cos: Vec<f32>,
    sin: Vec<f32>,
}

impl Prepared for FillTable {
    fn run(&mut self) {
        self.rope.fill_table(0, &mut self.cos, &mut self.sin).unwrap();
        std::hint::black_box((&self.cos, &self.sin));
    }

    fn tier(&self) -> Tier {
        self.rope.tier()
    }

    fn checksum(&mut self) -> u64 {
        fnv(self.cos.iter().chain(&self.sin).map(|x| x.to_bits()))
    }
}

#[derive(Clone, Copy)]
struct Shape {
    tokens: usize,
    q_heads: usize,
    k_heads: usize,
    start: u32,
    head_dim: usize,
}

/// A buffer whose data starts on a 64-byte boundary.
struct Aligned<T> {
    storage: Vec<T>,
    offset: usize,
    len: usize,
}

impl<T: Element> Aligned<T> {
    /// `len` values in [-1, 1) from a fixed LCG seeded with `seed`.
    fn new(len: usize, seed: u32) -> Self {
        let size = std::mem::size_of::<T>();
        let mut storage = vec![T::from_f32(0.0); len + 64 / size];
        let misalign = storage.as_ptr() as usize % 64;
        let offset = (64 - misalign) % 64 / size;
        let mut s = seed;
        for x in &mut storage[offset..offset + len] {
            s = s.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            *x = T::from_f32((s >> 8) as f32 / (1u32 << 23) as f32 - 1.0);
        }
        Aligned { storage, offset, len }
    }

    fn slice(&mut self) -> &mut [T] {
        &mut self.storage[self.offset..self.offset + self.len]
    }
}

struct Call<T> {
    rope: Rope<'static>,
    cache: Option<RopeCache>,
    q: Aligned<T>,
    k: Aligned<T>,
    shape: Shape,
    /// The slowdown's scratch rows (`slowdown::GROUP` heads).
    #[cfg(any(rope_gate_slowdown = "2x", rope_gate_slowdown = "5pct"))]
    scratch: Vec<T>,
}

impl<T: Element> Call<T> {
    fn new(rope: Rope<'static>, cache: Option<RopeCache>, shape: Shape) -> Self {
        let q = Aligned::new(shape.tokens * shape.q_heads * shape.head_dim, 1);
        let k = Aligned::new(shape.tokens * shape.k_heads * shape.head_dim, 2);
        Call {
            rope,
            cache,
            q,
            k,
            shape,
            #[cfg(any(rope_gate_slowdown = "2x", rope_gate_slowdown = "5pct"))]
            scratch: vec![T::from_f32(0.0); slowdown::GROUP * shape.head_dim],
        }
    }

    /// The case's call itself (no slowdown).
    fn call(&mut self) {
        let s = self.shape;
        let mut opts = ApplyOptions::start(s.start);
        if let Some(c) = &self.cache {
            opts = opts.with_table(c.table());
        }
        let q = HeadsMut::new(self.q.slice(), View::token_major(s.tokens, s.q_heads, s.head_dim));
        let k = (s.k_heads > 0)
            .then(|| HeadsMut::new(self.k.slice(), View::token_major(s.tokens, s.k_heads, s.head_dim)));
        self.rope.apply_qk(q, k, std::hint::black_box(&opts)).unwrap();
    }

    /// The slowdown's extra pass over q and k (`src/slowdown.rs`).
    #[cfg(any(rope_gate_slowdown = "2x", rope_gate_slowdown = "5pct"))]
    fn extra_pass(&mut self) {
        let s = self.shape;
        let table = self.cache.as_ref().map(RopeCache::table);
        for (x, heads) in [(&mut self.q, s.q_heads), (&mut self.k, s.k_heads)] {
            let shape = [s.tokens, heads, s.head_dim];
            slowdown::extra_pass(&self.rope, x.slice(), shape, s.start, table, &mut self.scratch);
        }
    }
}

impl<T: Element> Prepared for Call<T> {
    fn run(&mut self) {
        #[cfg(any(rope_gate_slowdown = "2x", rope_gate_slowdown = "5pct"))]
        self.extra_pass();
        self.call();
    }

    fn tier(&self) -> Tier {
        self.rope.tier()
    }

    fn checksum(&mut self) -> u64 {
        let q: Vec<T> = self.q.slice().to_vec();
        fnv(q.into_iter().chain(self.k.slice().iter().copied()).map(Element::to_bits_u32))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every case's `run` (with the slowdown's extra pass when built with
    /// `--cfg rope_gate_slowdown`) leaves the outputs the plain call computes.
    #[test]
    fn run_computes_the_plain_call_bits() {
        let tier = tier_from_env().unwrap();
        for case in CASES {
            let Kind::Apply { tokens, q_heads, k_heads, start, table } = case.kind else { continue };
            if !matches!(case.dtype, Dtype::F32) {
                continue;
            }
            let rope = Rope::new(
                RopeConfig::new(case.head_dim, 10_000.0)
                    .with_rotary_dim(case.rotary_dim)
                    .with_layout(case.layout),
            )
            .and_then(|r| r.with_tier(tier))
            .unwrap();
            let cache = table.then(|| rope.build_cache(start as usize + tokens).unwrap());
            let shape = Shape { tokens, q_heads, k_heads, start, head_dim: case.head_dim };
            let mut plain = Call::<f32>::new(rope, cache, shape);
            plain.call();
            let mut run = case.prepare(tier).unwrap();
            run.run();
            assert_eq!(run.checksum(), plain.checksum(), "{}", case.name);
        }
    }
}
