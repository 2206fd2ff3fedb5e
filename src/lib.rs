//! # rope-kernels
//!
//! SIMD kernels for Rotary Position Embedding (RoPE; Su et al. 2021, "RoFormer: Enhanced
//! Transformer with Rotary Position Embedding") and its sibling positional encodings, for
//! inference runtimes. `no_std`, no allocation on the hot path, runtime CPU dispatch, and
//! output that is bit-identical across every CPU tier.
//!
//! ```
//! use rope_kernels::{Apply, HeadsMut, Rope, RopeConfig, View};
//!
//! // Llama-2-7B: head_dim 128, theta 10000, GQA-free; 4 tokens of 32 heads.
//! let rope = Rope::new(RopeConfig::new(128, 10_000.0))?;
//! let mut q = vec![0.5f32; 4 * 32 * 128];
//! let view = View::bshd(4, 32, 128);
//! rope.apply(HeadsMut::new(&mut q, view), &Apply::start(0))?;
//! # Ok::<(), rope_kernels::RopeError>(())
//! ```
#![no_std]
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

#[cfg(feature = "alloc")]
extern crate alloc;
#[cfg(feature = "std")]
extern crate std;

mod config;
mod cossin;
pub mod dispatch;
mod element;
pub mod encodings;
mod error;
mod freq;
#[cfg(feature = "hf-config")]
pub mod hf_config;
mod kernels;
mod rope;
mod view;

pub use config::{AngleMode, Layout, RopeConfig, MAX_PAIRS, MAX_ROTARY_DIM};
pub use cossin::CosSinTable;
#[cfg(feature = "alloc")]
pub use cossin::RopeCache;
pub use dispatch::Tier;
pub use element::{DType, Element, CANONICAL_NAN_BF16, CANONICAL_NAN_F16, CANONICAL_NAN_F32};
pub use error::{Operand, RopeError};
pub use freq::{Frequencies, LongRopeParams, PairFactors, Scaling, YarnParams};
pub use half::{bf16, f16};
pub use rope::{
    Apply, CosSin, Direction, Heads, HeadsMut, Positions, PreparedCall, Rope, TokenChunk, TokenChunks,
};
pub use view::View;

/// The Rust examples of README.md, run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

/// Benchmark support, not part of the API: no stability promise.
#[doc(hidden)]
pub mod __bench {
    pub use crate::dispatch::bench_scale as scale;
    pub use crate::encodings::row_kernels::bench as encodings;
    pub use crate::kernels::sincos::bench as sincos;
}
