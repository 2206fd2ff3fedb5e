//! The types that describe an attention-layer call: the head sets of the fused buffer
//! ([`HeadSet`]), the cache addressing ([`CacheLayout`], [`Slots`]), the destinations
//! ([`Dest`]), the batch ([`Batch`]), the input ([`Qkv`]) and the options ([`LayerOptions`]).

use crate::error::{Operand, RopeError};
use crate::rope::{CosSin, Direction, Positions};
use crate::view::View;

/// A set of heads inside one buffer (the fused QKV projection output): head `h` of token `t`
/// starts at element `offset + t * token_stride + h * head_stride` and holds `head_dim`
/// contiguous elements. Offsets and strides are in elements of the buffer.
///
/// Within a set, rows must not share elements (the nesting rule of [`View`]); different sets
/// of one call must not share elements either, which is decided exactly on the elements the
/// sets touch, not by address range ([`RopeError::OverlappingHeadSets`]).
///
/// ```
/// use rope_kernels::HeadSet;
///
/// // Llama-3.1-8B's `qkv_proj` output row of one token: [32 q heads | 8 k | 8 v] x 128.
/// let [q, k, v] = HeadSet::qkv_rows(32, 8, 128);
/// assert_eq!((q.offset, k.offset, v.offset), (0, 32 * 128, 40 * 128));
/// assert_eq!(k.token_stride, 48 * 128);
/// // GPT-NeoX `query_key_value` viewed as [heads][3][head_dim]: q, k, v interleave per head.
/// let [q, k, _] = HeadSet::neox_qkv(8, 64);
/// assert_eq!((q.head_stride, k.offset), (3 * 64, 64));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct HeadSet {
    /// Element of head 0 of token 0.
    pub offset: usize,
    /// Number of heads (`num_attention_heads` for q, `num_key_value_heads` for k and v).
    pub heads: usize,
    /// Elements between token `t` and token `t + 1` of one head.
    pub token_stride: usize,
    /// Elements between head `h` and head `h + 1` of one token.
    pub head_stride: usize,
}

impl HeadSet {
    /// The `[q heads | k heads | v heads]` rows of a fused projection
    /// `[tokens][q_heads + 2 * kv_heads][head_dim]` (Llama `qkv_proj`, vLLM
    /// `QKVParallelLinear`, llama.cpp's fused `wqkv`): `[q, k, v]`.
    pub const fn qkv_rows(q_heads: usize, kv_heads: usize, head_dim: usize) -> [HeadSet; 3] {
        // Saturating: an absurd shape gives a set that no buffer fits (an error), not a panic.
        let token_stride = q_heads.saturating_add(kv_heads.saturating_mul(2)).saturating_mul(head_dim);
        let (head_stride, k) = (head_dim, q_heads.saturating_mul(head_dim));
        let v = k.saturating_add(kv_heads.saturating_mul(head_dim));
        [
            HeadSet { offset: 0, heads: q_heads, token_stride, head_stride },
            HeadSet { offset: k, heads: kv_heads, token_stride, head_stride },
            HeadSet { offset: v, heads: kv_heads, token_stride, head_stride },
        ]
    }

    /// GPT-NeoX's `query_key_value` output viewed as `[tokens][heads][3][head_dim]`
    /// (transformers `GPTNeoXAttention`: `qkv.view(..., heads, 3 * head_size)`, then q, k, v
    /// are the three `head_size` thirds of each head): `[q, k, v]`.
    pub const fn neox_qkv(heads: usize, head_dim: usize) -> [HeadSet; 3] {
        let head_stride = head_dim.saturating_mul(3);
        let token_stride = heads.saturating_mul(head_stride);
        [
            HeadSet { offset: 0, heads, token_stride, head_stride },
            HeadSet { offset: head_dim, heads, token_stride, head_stride },
            HeadSet { offset: head_dim.saturating_mul(2), heads, token_stride, head_stride },
        ]
    }

    /// The set's [`View`] of `tokens` tokens (without the offset).
    pub const fn view(&self, tokens: usize) -> View {
        View { tokens, heads: self.heads, token_stride: self.token_stride, head_stride: self.head_stride }
    }

    /// Checks that `tokens` tokens of the set fit a buffer of `len` elements with rows of
    /// `head_dim` that do not share elements; returns the end of the set (one past its last
    /// element; 0 for an empty set).
    pub(crate) fn validate(
        &self,
        tokens: usize,
        head_dim: usize,
        len: usize,
        operand: Operand,
    ) -> Result<usize, RopeError> {
        let span = self.view(tokens).validate(head_dim, usize::MAX, operand)?;
        if span == 0 {
            return Ok(0);
        }
        let end = self.offset.checked_add(span).ok_or(RopeError::StrideOverflow { operand })?;
        if end > len {
            return Err(RopeError::BufferTooShort { operand, needed: end, len });
        }
        Ok(end)
    }
}

/// How a KV cache addresses its rows: slot `s`, head `h` starts at element
/// `(s / block_size) * block_stride + (s % block_size) * slot_stride + h * head_stride` and
/// holds one head row (`head_dim` elements, or `head_dim / 32` blocks for a
/// [`BlockQ8_0`](crate::BlockQ8_0) cache). The cache has `num_blocks * block_size` slots.
/// Strides are in elements of the cache (blocks for `q8_0`); rows must not share elements.
///
/// ```
/// use rope_kernels::CacheLayout;
///
/// // vLLM's flash layout [num_blocks][block_size][kv_heads][head_dim]: slot 37, head 2.
/// let nhd = CacheLayout::nhd(64, 16, 8, 128);
/// assert_eq!(nhd.row(37, 2), 2 * (16 * 8 * 128) + 5 * (8 * 128) + 2 * 128);
/// // [num_blocks][kv_heads][block_size][head_dim] (HND).
/// let hnd = CacheLayout::hnd(64, 16, 8, 128);
/// assert_eq!(hnd.row(37, 2), 2 * (8 * 16 * 128) + 2 * (16 * 128) + 5 * 128);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct CacheLayout {
    /// Blocks (pages) in the cache.
    pub num_blocks: usize,
    /// Slots (tokens) per block (vLLM `block_size`); a contiguous cache has one block.
    pub block_size: usize,
    /// Elements between block `b` and block `b + 1`.
    pub block_stride: usize,
    /// Elements between slot `i` and slot `i + 1` of one block.
    pub slot_stride: usize,
    /// Elements between head `h` and head `h + 1` of one slot.
    pub head_stride: usize,
}

impl CacheLayout {
    /// vLLM's flash layout `[num_blocks][block_size][kv_heads][head_len]`
    /// (`reshape_and_cache_flash`, NHD); `head_len` is `head_dim` (`head_dim / 32` blocks for
    /// a `q8_0` cache).
    pub const fn nhd(num_blocks: usize, block_size: usize, kv_heads: usize, head_len: usize) -> Self {
        // Saturating: an absurd shape gives a layout that no buffer fits (an error), not a panic.
        let slot_stride = kv_heads.saturating_mul(head_len);
        CacheLayout {
            num_blocks,
            block_size,
            block_stride: block_size.saturating_mul(slot_stride),
            slot_stride,
            head_stride: head_len,
        }
    }

    /// `[num_blocks][kv_heads][block_size][head_len]` (HND: each head's slots of a block are
    /// contiguous, as FlashInfer's `HND` paged layout).
    pub const fn hnd(num_blocks: usize, block_size: usize, kv_heads: usize, head_len: usize) -> Self {
        let head_stride = block_size.saturating_mul(head_len);
        CacheLayout {
            num_blocks,
            block_size,
            block_stride: kv_heads.saturating_mul(head_stride),
            slot_stride: head_len,
            head_stride,
        }
    }

    /// One contiguous cache `[slots][kv_heads][head_len]` (one block of `slots` slots), as
    /// llama.cpp's per-layer cache rows (ggml `set_rows` into `[kv_size][n_embd_k_gqa]`).
    pub const fn contiguous(slots: usize, kv_heads: usize, head_len: usize) -> Self {
        Self::nhd(1, slots, kv_heads, head_len)
    }

    /// Slots in the cache, `num_blocks * block_size` (saturating).
    pub const fn slots(&self) -> usize {
        self.num_blocks.saturating_mul(self.block_size)
    }

    /// The first element of slot `slot`, head `head`: `(slot / block_size) * block_stride +
    /// (slot % block_size) * slot_stride + head * head_stride` (saturating). A layout with
    /// `block_size` 0 has no slot (its [`slots`](Self::slots) is 0, a call refuses every
    /// token, [`RopeError::InvalidBlockSize`] under a block table); `row` then returns 0
    /// rather than divide by zero.
    pub const fn row(&self, slot: usize, head: usize) -> usize {
        if self.block_size == 0 {
            return 0;
        }
        (slot / self.block_size)
            .saturating_mul(self.block_stride)
            .saturating_add((slot % self.block_size).saturating_mul(self.slot_stride))
            .saturating_add(head.saturating_mul(self.head_stride))
    }

    /// [`CacheLayout::row`] of a slot below [`slots`](Self::slots) of a layout validated
    /// against its buffer (cannot overflow there), head 0.
    #[inline(always)]
    pub(super) fn slot_row(&self, slot: usize) -> usize {
        (slot / self.block_size) * self.block_stride + (slot % self.block_size) * self.slot_stride
    }

    /// Checks the layout for `heads` heads of `head_len` units against a buffer of `len`
    /// units: rows nest (do not share elements) and fit.
    pub(crate) fn validate(
        &self,
        heads: usize,
        head_len: usize,
        len: usize,
        operand: Operand,
    ) -> Result<(), RopeError> {
        let dims = [
            (self.num_blocks, self.block_stride),
            (self.block_size, self.slot_stride),
            (heads, self.head_stride),
        ];
        crate::view::validate_lattice(dims, head_len, len, operand).map(|_| ())
    }
}

/// Which cache slot each token of a call goes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Slots<'a> {
    /// vLLM's `slot_mapping` (`reshape_and_cache_flash`; ggml `set_rows` row indices): token
    /// `t` goes to slot `slot_mapping[t]`; `-1` skips the token (vLLM's padding). One entry per
    /// token of the call.
    Mapping(&'a [i64]),
    /// A paged cache (vLLM `block_table`, FlashInfer `kv_indices`): token at position `p` of
    /// sequence `i` of the batch goes to block `b = block_table[i * blocks_per_seq + p /
    /// block_size]`, slot `b * block_size + p % block_size`. `block_table` holds
    /// `blocks_per_seq` entries per sequence (row-major `[sequences][blocks_per_seq]`); a
    /// [`Batch::Single`] call is sequence 0.
    ///
    /// Rows are picked by the token's **position**: a caller whose `position_ids` are not
    /// cache positions (left padding, MRoPE's 3-D positions, positions shifted by a prompt
    /// offset) should pass the rows itself with [`Slots::Mapping`]. A layout with
    /// `block_size` 0 is [`RopeError::InvalidBlockSize`].
    BlockTable {
        /// Block numbers, `[sequences][blocks_per_seq]`.
        block_table: &'a [u32],
        /// Entries per sequence (the table's row length).
        blocks_per_seq: usize,
    },
    /// Slot = the token's position: one sequence in its own contiguous cache (llama.cpp's
    /// per-sequence cache rows; [`CacheLayout::contiguous`]).
    Positions,
}

/// Where a call writes one of q, k, v. `O` is the destination's element type: `f32`,
/// [`f16`](struct@crate::f16), [`bf16`](struct@crate::bf16) or [`BlockQ8_0`](crate::BlockQ8_0)
/// (`q8_0` rows: counts and strides in blocks of 32 values).
///
/// With [`Dest::Skip`] and [`Dest::InPlace`] the type cannot be inferred; name it:
/// `Dest::<f32>::InPlace`.
#[derive(Debug)]
pub enum Dest<'a, O> {
    /// Not written (and, for q and k, not rotated).
    Skip,
    /// Rotated in place in the fused buffer (q, k); for v (never rotated) v is left where it
    /// is, as [`Dest::Skip`]. For every part, `O` must be the buffer's element type
    /// ([`RopeError::UnsupportedTypePair`] otherwise, v included), as C's `ROPE_DEST_IN_PLACE`.
    InPlace,
    /// A dense tensor `[tokens][heads][head_len]` through a [`View`] in units of `O`
    /// (`tokens` and `heads` those of the set; `head_len` = `head_dim`, or `head_dim / 32`
    /// blocks for `q8_0`).
    Tensor {
        /// The elements; the view must fit inside.
        data: &'a mut [O],
        /// Shape and strides, in units of `O`.
        view: View,
    },
    /// KV-cache rows: token `t` goes to the slot [`Slots`] gives it, its heads to the rows
    /// [`CacheLayout`] addresses (as vLLM `reshape_and_cache_flash` writes k and v).
    ///
    /// k and v caches are two buffers: a cache holding both in one allocation (FlashInfer
    /// `[num_blocks][2][block_size][kv_heads][head_dim]`) takes two calls, k then v (see
    /// [`Rope::apply_layer`](crate::Rope::apply_layer), "k and v in one buffer").
    Cache {
        /// The whole cache of this layer (k or v), in units of `O`.
        data: &'a mut [O],
        /// How slots and heads map to elements.
        layout: CacheLayout,
        /// Which slot each token goes to.
        slots: Slots<'a>,
    },
}

/// The tokens of a call and their positions (token indices in their sequence).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Batch<'a> {
    /// One sequence: positions as in [`ApplyOptions`](crate::ApplyOptions) (`start + t`, or HF
    /// `position_ids`, one per token).
    Single(Positions<'a>),
    /// Several sequences one after another: sequence `i` owns tokens `indptr[i] ..
    /// indptr[i + 1]` (FlashInfer `append_indptr`: `sequences + 1` entries, from 0 to the
    /// call's token count, non-decreasing), token `indptr[i] + j` at position `start[i] + j`
    /// (the sequence's KV-cache length before this step; `sequences` entries).
    Ragged {
        /// Token offsets of the sequences, `sequences + 1` entries.
        indptr: &'a [u32],
        /// Position of each sequence's first token of the call, `sequences` entries.
        start: &'a [u32],
    },
    /// As [`Batch::Ragged`], with explicit per-token `position_ids` (one per token of the
    /// call) instead of per-sequence starts.
    RaggedIds {
        /// Token offsets of the sequences, `sequences + 1` entries.
        indptr: &'a [u32],
        /// Position of every token of the call.
        position_ids: &'a [u32],
    },
}

impl Default for Batch<'_> {
    fn default() -> Self {
        Batch::Single(Positions::Start(0))
    }
}

/// The fused input of an attention-layer call: the buffer, its token count and the head sets
/// of q, k and v in it.
#[derive(Debug)]
pub struct Qkv<'a, I> {
    /// The fused QKV projection output (rotated in place where a destination is
    /// [`Dest::InPlace`]; otherwise only read).
    pub data: &'a mut [I],
    /// Tokens in the buffer (the call's tokens).
    pub tokens: usize,
    /// The head sets `[q, k, v]` (e.g. [`HeadSet::qkv_rows`], [`HeadSet::neox_qkv`]).
    pub sets: [HeadSet; 3],
}

impl<'a, I> Qkv<'a, I> {
    /// Pairs a buffer of `tokens` tokens with its `[q, k, v]` head sets.
    pub fn new(data: &'a mut [I], tokens: usize, sets: [HeadSet; 3]) -> Self {
        Qkv { data, tokens, sets }
    }
}

/// Per-call options of an attention-layer call. `Default`: one sequence at positions from 0,
/// cos/sin on the fly, forward. `Copy`, 88 bytes on 64-bit targets.
#[derive(Clone, Copy, Debug, Default)]
pub struct LayerOptions<'a> {
    /// The tokens' sequences and positions.
    pub batch: Batch<'a>,
    /// cos/sin source (a table is indexed by position).
    pub cos_sin: CosSin<'a>,
    /// Forward or inverse rotation (v is never rotated).
    pub direction: Direction,
}

/// The old name of [`LayerOptions`].
#[deprecated(since = "0.2.0", note = "renamed to `LayerOptions`")]
pub type LayerApply<'a> = LayerOptions<'a>;

impl<'a> LayerOptions<'a> {
    /// Options for a batch.
    pub fn batch(batch: Batch<'a>) -> Self {
        LayerOptions { batch, ..LayerOptions::default() }
    }

    /// Builder: use a cos/sin table (rows indexed by position).
    pub fn with_table(mut self, table: crate::CosSinTable<'a>) -> Self {
        self.cos_sin = CosSin::Table(table);
        self
    }

    /// Builder: inverse rotation.
    pub fn inverse(mut self) -> Self {
        self.direction = Direction::Inverse;
        self
    }
}
