//! One attention layer's RoPE in one call (issue 17): q, k (and v, passed through) as head
//! sets of one fused QKV buffer, rotated in place or read from it and written elsewhere in
//! another element type (f32, f16, bf16, ggml `q8_0`), to dense tensors or to KV-cache rows
//! addressed per token (vLLM `slot_mapping`, a paged `block_table`), for one sequence or a
//! ragged batch of several (FlashInfer `append_indptr`).
//!
//! The types here describe the call; [`Rope::apply_layer`](crate::Rope::apply_layer)
//! runs it, with every check made before anything is written.

mod apply;
mod overlap;
mod slots;
mod types;
mod writes;
#[allow(deprecated)]
pub use types::LayerApply;
pub use types::{Batch, CacheLayout, Dest, HeadSet, LayerOptions, Qkv, Slots};
#[doc(hidden)]
pub use writes::ErasedDest;
