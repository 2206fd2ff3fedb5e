//! # rope-kernels
//!
//! SIMD kernels for Rotary Position Embedding (RoPE; Su et al. 2021, "RoFormer: Enhanced
//! Transformer with Rotary Position Embedding") and its sibling positional encodings, for
//! inference runtimes. `no_std`, no allocation on the hot path, runtime CPU dispatch, and
//! output that is bit-identical across every CPU tier.
//!
//! ```
//! use rope_kernels::{ApplyOptions, HeadsMut, Rope, RopeConfig, View};
//!
//! // Llama-2-7B: head_dim 128, theta 10000, GQA-free; 4 tokens of 32 heads.
//! let rope = Rope::new(RopeConfig::new(128, 10_000.0))?;
//! let mut q = vec![0.5f32; 4 * 32 * 128];
//! let view = View::token_major(4, 32, 128);
//! rope.apply(HeadsMut::new(&mut q, view), &ApplyOptions::start(0))?;
//! # Ok::<(), rope_kernels::RopeError>(())
//! ```
//!
//! # Which entry point for which job
//!
//! Tensors are `[tokens][heads][head_dim]` with strides in elements ([`View`]: BSHD, BHSD,
//! rows of a fused QKV buffer); element types are `f32`, [`f16`](struct@f16) and [`bf16`](struct@bf16) (math in
//! f32, one rounding per stored element). Positions are token indices: a start offset
//! ([`ApplyOptions::start`]) or one `position_ids` entry per token ([`ApplyOptions::ids`]).
//!
//! | job | call |
//! |---|---|
//! | configure once per model | [`RopeConfig`] (+ [`Scaling`], [`PairLayout`], [`AngleMode`]) → [`Rope::new`]; from a Hugging Face `config.json`: `hf_config::ModelConfig` (feature `hf-config`) |
//! | rotate q (or k) in place | [`Rope::apply`] |
//! | rotate q and k of one step in one call (GQA: different head counts) | [`Rope::apply_qk`] |
//! | read one buffer, write the rotated heads to another (ggml / ONNX Runtime form) | [`Rope::apply_into`], [`Rope::apply_qk_into`] |
//! | per-head QK norm (Qwen3, Gemma 3 before RoPE; Llama 4 after) and RoPE in one pass | [`Rope::apply_qk_norm`], [`Rope::apply_qk_norm_into`] with a [`QkNorm`]; the norm alone: [`Rope::norm_qk`] |
//! | one attention layer: q, k (and v) as head sets of the fused QKV buffer, rotated in place or into other types (f32, f16, bf16, ggml `q8_0`), k/v appended to KV-cache rows (`slot_mapping`, paged `block_table`), ragged batches | [`Rope::apply_layer`] with [`Qkv`], [`HeadSet`], [`Dest`], [`CacheLayout`], [`Slots`], [`LayerOptions`], [`Batch`]; q and k in place only: [`Rope::apply_head_sets`] |
//! | validate once, then run in token chunks, e.g. on your own thread pool | [`Rope::prepare`], [`Rope::prepare_qk`], [`Rope::prepare_into`], [`Rope::prepare_qk_into`] → [`PreparedCall`] → [`TokenChunk`] (`Send`) |
//! | split a call over rayon's pool | `Rope::par_apply*` (feature `rayon`) |
//! | build in caller memory sized to the model, no large value on the stack (microcontrollers) | [`RopeParams`] → [`Rope::new_in`] into slices of [`Rope::table_lens`] elements: a `Rope<'a>` borrowing them, with every method of [`Rope`] |
//! | cos/sin from a table instead of on the fly | a caller buffer: [`Rope::fill_table`] + [`CosSinTable`] (no allocation); a cache: `Rope::build_cache` → `RopeCache` (feature `alloc`); pass it with [`ApplyOptions::with_table`] |
//! | the frequencies themselves (`inv_freq`, `attention_factor`) | [`Rope::frequencies`], [`Frequencies::new`]; HF's own f32 `inv_freq`: [`Rope::with_hf_inv_freq`] |
//! | multimodal RoPE: Qwen2-VL / Qwen2.5-VL (sectioned) and Qwen3-VL (interleaved) MRoPE, the ViT's 2-D RoPE | [`MRope`], [`VisionRope`] with [`MRopeOptions`] / [`VisionOptions`]; positions: [`MRopeIndex`], [`vision_position_ids`]; on any [`Rope`]: [`Rope::apply_mrope_qk`], [`Rope::apply_vision_qk`] |
//! | sinusoidal, learned absolute, relative buckets, ALiBi | [`encodings`] |
//! | choose or cap the CPU tier | [`dispatch`] (process-wide), [`Rope::with_tier`] (one handle) |
//! | from C | the `rope-kernels-capi` package: `librope_kernels.a`/`.so` and `include/rope_kernels.h` (see README) |
//!
//! Every invalid argument is a specific [`RopeError`]; a call that fails has written
//! nothing.
//!
//! # Feature flags
//!
//! | feature | default | what it adds |
//! |---|---|---|
//! | `std` | yes | `std::error::Error` impls; implies `alloc` |
//! | `alloc` | via `std` | `RopeCache` (`Rope::build_cache`) and the `_vec` helpers of [`encodings`] |
//! | `hf-config` | yes | `hf_config`: load a `config.json` (implies `std`, adds `serde_json`) |
//! | `rayon` | no | `Rope::par_apply*` over rayon's pool (implies `std`) |
//! | `bench-internals` | no | benchmark support (rooflines, per-tier kernel calls), no stability promise |
//!
//! With `default-features = false` the crate is `no_std` without allocation; it builds for
//! `thumbv7em-none-eabihf` and `aarch64-unknown-none`.
#![no_std]
#![cfg_attr(docsrs, feature(doc_cfg))]
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]
// Without `alloc` the owning constructors (`Rope::new`, `MRope::new`, `VisionRope::new`,
// `with_hf_inv_freq`) do not exist, and the docs' links to them dangle: every other link is
// the same in the default build, which checks them all.
#![cfg_attr(not(feature = "alloc"), allow(rustdoc::broken_intra_doc_links))]

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

#[allow(deprecated)]
pub use config::Layout;
pub use config::{AngleMode, PairLayout, RopeConfig, RopeParams, MAX_PAIRS, MAX_ROTARY_DIM};
pub use cossin::CosSinTable;
#[cfg(feature = "alloc")]
pub use cossin::RopeCache;
pub use error::{Operand, RopeError};
pub use freq::{Frequencies, LongRopeParams, LongRopeRef, PairFactors, Scaling, ScalingRef, YarnParams};
pub use half::{bf16, f16};
pub use kernels::element::{DType, Element, CANONICAL_NAN_BF16, CANONICAL_NAN_F16, CANONICAL_NAN_F32};
#[doc(hidden)]
pub use kernels::q8_0::CacheDType;
pub use kernels::q8_0::{quantize_row_q8_0, BlockQ8_0, CacheElement, QK8_0};
pub use kernels::tier::Tier;
#[doc(hidden)]
pub use rope::ErasedDest;
#[allow(deprecated)]
pub use rope::RopeRef;
#[doc(hidden)]
pub use rope::RopeState;
pub use rope::{
    vision_position_ids, AxisOptions, AxisRows, MRope, MRopeIndex, MRopeOptions, MRopeStyle, VisionOptions,
    VisionRope, TOKEN_IMAGE, TOKEN_TEXT, TOKEN_VIDEO,
};
#[allow(deprecated)]
pub use rope::{Apply, AxisApply, LayerApply, MRopeApply, VisionApply};
pub use rope::{
    ApplyOptions, CosSin, Direction, Heads, HeadsMut, Positions, PreparedCall, QkNorm, Rope, TokenChunk,
    TokenChunks, WeightOffset,
};
pub use rope::{Batch, CacheLayout, Dest, HeadSet, LayerOptions, Qkv, Slots};
pub use view::View;

/// The Rust examples of README.md, run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

/// Benchmark support (feature `bench-internals`), not part of the API: no stability
/// promise.
#[cfg(feature = "bench-internals")]
#[doc(hidden)]
#[path = "bench/mod.rs"]
pub mod __bench;
