//! The head shapes every kernel works on: which dimensions pair up ([`PairLayout`]) and the
//! largest rotated part (the kernels' stack rows are sized by it). Re-exported at the crate
//! root (through `config`).

/// The largest supported `rotary_dim`. Per-call frequency and cos/sin rows live on the
/// stack in fixed arrays of `MAX_ROTARY_DIM / 2` entries, so nothing on the hot path
/// allocates. Real models use at most 256 (Gemma); 512 leaves room.
pub const MAX_ROTARY_DIM: usize = 512;

/// Largest number of rotated pairs, `MAX_ROTARY_DIM / 2`.
pub const MAX_PAIRS: usize = MAX_ROTARY_DIM / 2;

/// Which dimensions of a head form the rotated pairs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum PairLayout {
    /// Pairs `(i, i + rotary_dim / 2)`: GPT-NeoX, Llama, and Hugging Face `rotate_half`
    /// (`transformers/models/llama/modeling_llama.py`).
    #[default]
    HalfSplit,
    /// Pairs `(2i, 2i + 1)`: GPT-J (`rotate_every_two` in
    /// `transformers/models/gptj/modeling_gptj.py`), ggml `GGML_ROPE_TYPE_NORM`, and the
    /// rotary part of DeepSeek-V2.
    Interleaved,
}

/// The old name of [`PairLayout`].
#[deprecated(since = "0.2.0", note = "renamed to `PairLayout` (a pair layout, not a memory layout)")]
pub type Layout = PairLayout;
