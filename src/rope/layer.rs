//! One attention layer's RoPE in one call (issue 17): q, k (and v, passed through) as head
//! sets of one fused QKV buffer, rotated in place or read from it and written elsewhere in
//! another element type (f32, f16, bf16, ggml `q8_0`), to dense tensors or to KV-cache rows
//! addressed per token (vLLM `slot_mapping`, a paged `block_table`), for one sequence or a
//! ragged batch of several (FlashInfer `append_indptr`).
//!
//! The types here describe the call; [`RopeRef::apply_layer`](crate::RopeRef::apply_layer)
//! runs it, with every check made before anything is written.

use core::any::TypeId;
use core::marker::PhantomData;

use super::{Apply, CosSin, Direction, Positions, Rope, RopeRef, TokenParams};
use crate::element::Element;
use crate::error::{Operand, RopeError};
use crate::kernels::q8_0::{BlockQ8_0, CacheDType, CacheElement};
use crate::kernels::{self, ConvertArgs, RotateArgs};
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
    fn slot_row(&self, slot: usize) -> usize {
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
    /// One sequence: positions as in [`Apply`](crate::Apply) (`start + t`, or HF
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
/// cos/sin on the fly, forward.
#[derive(Clone, Copy, Debug, Default)]
pub struct LayerApply<'a> {
    /// The tokens' sequences and positions.
    pub batch: Batch<'a>,
    /// cos/sin source (a table is indexed by position).
    pub cos_sin: CosSin<'a>,
    /// Forward or inverse rotation (v is never rotated).
    pub direction: Direction,
}

impl<'a> LayerApply<'a> {
    /// Options for a batch.
    pub fn batch(batch: Batch<'a>) -> Self {
        LayerApply { batch, ..LayerApply::default() }
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

// ---- Validation (type-independent: one copy for every element-type combination) ----

/// Whether two head sets of one buffer, each validated for `tokens` tokens of `head_dim`
/// elements ([`HeadSet::validate`]), share an element. Exact, on the elements the sets
/// touch. First three `O(1)` tests that prove the sets apart (the usual layouts end here):
/// - their bounding ranges are apart (e.g. q and k as two tensors of one allocation);
/// - every row start of `a` is `a.offset` modulo `g`, of `b` `b.offset` modulo `g`, `g` the
///   gcd of the strides in use: if those residues are at least `head_dim` apart (on the
///   circle of `g`), no two rows meet (GPT-NeoX's `[heads][q, k, v]` interleaving);
/// - with one token stride `S` for both, each set lies within one interval per token
///   (`offset + t * S`, its per-token span long): if the two intervals are apart modulo `S`,
///   so are the sets (`[q heads | k heads | v heads]` rows);
///
/// then, when none applies, the exact search:
/// - with one token, or the same token stride `S`, row `(t1, h1)` of `a` meets row `(t2,
///   h2)` of `b` iff `|a.offset + h1 * a.head_stride - b.offset - h2 * b.head_stride + k *
///   S| < head_dim` for `k = t2 - t1`: for each head of the set with fewer heads, one
///   arithmetic progression per head of the other set (or per `k`, whichever are fewer);
/// - otherwise each row of the set with fewer rows is compared with the last row of the
///   other set that starts at or before its end, found in `O(1)` because that set's rows nest
///   (`O(tokens * heads)` of the smaller set).
pub(crate) fn sets_overlap(a: &HeadSet, b: &HeadSet, tokens: usize, head_dim: usize) -> bool {
    if tokens == 0 || a.heads == 0 || b.heads == 0 || head_dim == 0 {
        return false;
    }
    // Validated against one buffer (at most `isize::MAX` elements): every element index and
    // every difference of two fits in i64.
    let span = |s: &HeadSet| (tokens - 1) * s.token_stride + (s.heads - 1) * s.head_stride + head_dim;
    let (a_end, b_end) = (a.offset + span(a), b.offset + span(b));
    if a_end <= b.offset || b_end <= a.offset {
        return false;
    }
    if apart_by_residue(a, b, tokens, head_dim) {
        return false;
    }
    let per_token = |s: &HeadSet| (s.heads - 1) * s.head_stride + head_dim;
    if tokens > 1 && a.token_stride == b.token_stride {
        let st = a.token_stride;
        let (ra, rb) = (a.offset % st, b.offset % st);
        // Circular distances from a's interval start to b's, and back.
        let (ab, ba) = ((rb + st - ra) % st, (ra + st - rb) % st);
        if ab >= per_token(a) && ba >= per_token(b) {
            return false;
        }
    }
    let d = head_dim as i64;
    if tokens == 1 || a.token_stride == b.token_stride {
        let (a, b) = if a.heads <= b.heads { (a, b) } else { (b, a) };
        let (s, kmax) = if tokens == 1 { (0, 0) } else { (a.token_stride as i64, tokens as i64 - 1) };
        for h1 in 0..a.heads {
            let x = (a.offset + h1 * a.head_stride) as i64;
            let hit = if b.heads as i64 <= 2 * kmax + 1 {
                (0..b.heads).any(|h2| {
                    let y = (b.offset + h2 * b.head_stride) as i64;
                    progression_hits(y, s, -kmax, kmax, x - d, x + d)
                })
            } else {
                (-kmax..=kmax).any(|k| {
                    let y = b.offset as i64 + k * s;
                    progression_hits(y, b.head_stride as i64, 0, b.heads as i64 - 1, x - d, x + d)
                })
            };
            if hit {
                return true;
            }
        }
        return false;
    }
    let rows = |s: &HeadSet| tokens * s.heads;
    let (a, b) = if rows(a) <= rows(b) { (a, b) } else { (b, a) };
    for t in 0..tokens {
        for h in 0..a.heads {
            let x = a.offset + t * a.token_stride + h * a.head_stride;
            if let Some(y) = last_row_at_or_below(b, tokens, x + head_dim - 1) {
                if y + head_dim > x {
                    return true;
                }
            }
        }
    }
    false
}

/// Whether the row starts of `a` and `b` fall in residue classes modulo the gcd `g` of the
/// strides in use that are at least `head_dim` apart (then no two rows can meet).
fn apart_by_residue(a: &HeadSet, b: &HeadSet, tokens: usize, head_dim: usize) -> bool {
    let gcd = |mut x: usize, mut y: usize| {
        while y != 0 {
            (x, y) = (y, x % y);
        }
        x
    };
    let mut g = 0;
    for s in [a, b] {
        if s.heads > 1 {
            g = gcd(g, s.head_stride);
        }
        if tokens > 1 {
            g = gcd(g, s.token_stride);
        }
    }
    if g == 0 {
        // One row each: their bounding ranges (checked by the caller) are the rows.
        return false;
    }
    let r = (b.offset % g + g - a.offset % g) % g;
    r.min(g - r) >= head_dim
}

/// Whether some `y + k * step` with `k` in `k0..=k1` lies strictly between `lo` and `hi`.
#[inline]
fn progression_hits(y: i64, step: i64, k0: i64, k1: i64, lo: i64, hi: i64) -> bool {
    if k0 > k1 {
        return false;
    }
    if step == 0 {
        return lo < y && y < hi;
    }
    // The smallest k with y + k * step > lo.
    let k = ((lo - y).div_euclid(step) + 1).max(k0);
    k <= k1 && y + k * step < hi
}

/// The start of the last row of validated set `s` that starts at or before element `v`.
/// The rows nest (sorted by stride, each stride exceeds the extent inside it), so the outer
/// index is `(v - base) / outer_stride` clamped, then the same for the inner one.
fn last_row_at_or_below(s: &HeadSet, tokens: usize, v: usize) -> Option<usize> {
    if v < s.offset {
        return None;
    }
    let mut dims = [(tokens, s.token_stride), (s.heads, s.head_stride)];
    if dims[0].1 < dims[1].1 {
        dims.swap(0, 1);
    }
    let mut base = s.offset;
    for (count, stride) in dims {
        if count > 1 && stride > 0 {
            base += ((v - base) / stride).min(count - 1) * stride;
        }
    }
    Some(base)
}

/// Checks a batch against the call's `tokens`; returns the largest position (`None`
/// without tokens). Order: `indptr` (FlashInfer `append_indptr`: non-empty, from 0,
/// non-decreasing, ending at `tokens`), the per-sequence array's length, then positions
/// (`position_ids` count, `start + len - 1` overflow).
fn check_batch(batch: &Batch<'_>, tokens: usize) -> Result<Option<u32>, RopeError> {
    let indptr = match *batch {
        Batch::Single(positions) => return super::max_position(positions, tokens),
        Batch::Ragged { indptr, .. } | Batch::RaggedIds { indptr, .. } => indptr,
    };
    let Some((&last, _)) = indptr.split_last() else {
        return Err(RopeError::InvalidIndptr { reason: "indptr is empty (it has sequences + 1 entries)" });
    };
    if indptr[0] != 0 {
        return Err(RopeError::InvalidIndptr { reason: "indptr[0] is not 0" });
    }
    if indptr.windows(2).any(|w| w[1] < w[0]) {
        return Err(RopeError::InvalidIndptr { reason: "indptr decreases" });
    }
    if last as usize != tokens || u32::try_from(tokens).is_err() {
        return Err(RopeError::InvalidIndptr { reason: "indptr does not end at the call's token count" });
    }
    match *batch {
        Batch::Ragged { start, .. } => {
            if start.len() != indptr.len() - 1 {
                return Err(RopeError::InvalidIndptr {
                    reason: "start has other than indptr.len() - 1 entries",
                });
            }
            let mut max = None;
            for (w, &s) in indptr.windows(2).zip(start) {
                let n = (w[1] - w[0]) as usize;
                max = max.max(super::max_position(Positions::Start(s), n)?);
            }
            Ok(max)
        }
        Batch::RaggedIds { position_ids, .. } => super::max_position(Positions::Ids(position_ids), tokens),
        Batch::Single(_) => unreachable!("returned above"),
    }
}

/// The sequences of a validated batch: `(sequence, its tokens, their positions)`, where
/// `positions.get(j)` is the position of token `tokens.start + j`.
fn sequences<'b>(
    batch: &'b Batch<'b>,
    tokens: usize,
) -> impl Iterator<Item = (usize, core::ops::Range<usize>, Positions<'b>)> + 'b {
    let (indptr, single) = match *batch {
        Batch::Single(p) => (&[][..], Some(p)),
        Batch::Ragged { indptr, .. } | Batch::RaggedIds { indptr, .. } => (indptr, None),
    };
    let one = single.map(|p| (0, 0..tokens, p));
    let many = indptr.windows(2).enumerate().map(move |(i, w)| {
        let r = w[0] as usize..w[1] as usize;
        let p = match *batch {
            Batch::Ragged { start, .. } => Positions::Start(start[i]),
            Batch::RaggedIds { position_ids, .. } => Positions::Ids(&position_ids[r.clone()]),
            Batch::Single(p) => p,
        };
        (i, r, p)
    });
    one.into_iter().chain(many)
}

/// Every token of a validated batch in order: `(token, sequence, position)`.
fn token_walk<'b>(
    batch: &'b Batch<'b>,
    tokens: usize,
) -> impl Iterator<Item = (usize, usize, u32)> + Clone + 'b {
    let (indptr, single) = match *batch {
        Batch::Single(p) => (&[][..], Some(p)),
        Batch::Ragged { indptr, .. } | Batch::RaggedIds { indptr, .. } => (indptr, None),
    };
    let one = single.into_iter().flat_map(move |p| (0..tokens).map(move |t| (t, 0, p.get(t))));
    let many = indptr.windows(2).enumerate().flat_map(move |(i, w)| {
        (w[0] as usize..w[1] as usize).map(move |t| {
            let pos = match *batch {
                Batch::Ragged { start, .. } => start[i] + (t - w[0] as usize) as u32,
                Batch::RaggedIds { position_ids, .. } => position_ids[t],
                Batch::Single(p) => p.get(t),
            };
            (t, i, pos)
        })
    });
    one.chain(many)
}

/// The slot of token `t` (sequence `seq`, position `pos`) of a validated call; `None` for a
/// skipped token (`slot_mapping` -1). Cannot overflow: [`check_slots`] refused every
/// block-table slot that does not fit below `slots()`.
#[inline(always)]
fn slot_of(slots: &Slots<'_>, block_size: usize, t: usize, seq: usize, pos: u32) -> Option<usize> {
    match *slots {
        Slots::Mapping(m) => usize::try_from(m[t]).ok(),
        Slots::BlockTable { block_table, blocks_per_seq } => {
            let p = pos as usize;
            Some(block_table[seq * blocks_per_seq + p / block_size] as usize * block_size + p % block_size)
        }
        Slots::Positions => Some(pos as usize),
    }
}

/// Whether two slot sources are the same arrays (by address and length: comparing a long
/// block table's contents would cost more than checking it).
fn same_slots(a: &Slots<'_>, b: &Slots<'_>) -> bool {
    match (*a, *b) {
        (Slots::Mapping(x), Slots::Mapping(y)) => core::ptr::eq(x, y),
        (
            Slots::BlockTable { block_table: x, blocks_per_seq: n },
            Slots::BlockTable { block_table: y, blocks_per_seq: m },
        ) => core::ptr::eq(x, y) && n == m,
        (Slots::Positions, Slots::Positions) => true,
        _ => false,
    }
}

/// Checks the slots of a cache destination whose layout was validated: `slot_mapping`'s
/// length, a block table's `block_size` (`InvalidBlockSize`), then for each token in order
/// its block-table entry (`BlockTableTooShort`), the block (`BlockOutOfRange`) and the slot
/// (`SlotOutOfRange`, for a block table too: the slot of a layout of 0 heads may not fit a
/// `usize`); then that no two written tokens share a slot (`DuplicateSlot`).
///
/// Duplicates: one pass when the written slots strictly increase (prefill, `Slots::Positions`,
/// most `slot_mapping`s); for a block table, the blocks of the entries the call uses
/// ([`block_runs_disjoint`], `O(b log b)`, `b` about `tokens / block_size + sequences`);
/// otherwise the `(slot, token)` pairs sorted in scratch ([`first_duplicate`], `O(n log n)`;
/// a `Vec` with the `alloc` feature; without it a stack array of 64 entries, beyond which
/// each token is compared with the earlier ones, `O(n^2)`).
fn check_slots(
    slots: &Slots<'_>,
    layout: &CacheLayout,
    batch: &Batch<'_>,
    tokens: usize,
    operand: Operand,
) -> Result<(), RopeError> {
    let (bs, n) = (layout.block_size, layout.slots());
    if let Slots::Mapping(m) = *slots {
        if m.len() != tokens {
            return Err(RopeError::SlotMappingLength { operand, tokens, len: m.len() });
        }
    }
    if matches!(slots, Slots::BlockTable { .. }) && bs == 0 {
        return Err(RopeError::InvalidBlockSize { operand });
    }
    for (t, seq, pos) in token_walk(batch, tokens) {
        let slot: i64 = match *slots {
            Slots::Mapping(m) if m[t] == -1 => continue,
            Slots::Mapping(m) => m[t],
            Slots::BlockTable { block_table, blocks_per_seq } => {
                let e = pos as usize / bs;
                let short = RopeError::BlockTableTooShort { operand, sequence: seq, position: pos };
                let i = seq.checked_mul(blocks_per_seq).and_then(|i| i.checked_add(e)).ok_or(short)?;
                if e >= blocks_per_seq || i >= block_table.len() {
                    return Err(short);
                }
                let block = block_table[i];
                if block as usize >= layout.num_blocks {
                    return Err(RopeError::BlockOutOfRange {
                        operand,
                        token: t,
                        block,
                        num_blocks: layout.num_blocks,
                    });
                }
                // The slot is below `num_blocks * block_size`, which fits the address space
                // when the layout was validated against a buffer for some heads; for a set of
                // 0 heads the layout touches nothing and is not bounded, so the slot may not
                // fit a `usize`: it is then past `slots()` (saturated), and refused.
                let slot = u128::from(block) * bs as u128 + (pos as usize % bs) as u128;
                if slot >= n as u128 {
                    let slot = i64::try_from(slot).unwrap_or(i64::MAX);
                    return Err(RopeError::SlotOutOfRange { operand, token: t, slot, slots: n });
                }
                continue;
            }
            Slots::Positions => i64::from(pos),
        };
        if slot < 0 || slot as u64 >= n as u64 {
            return Err(RopeError::SlotOutOfRange { operand, token: t, slot, slots: n });
        }
    }
    let written =
        token_walk(batch, tokens).filter_map(|(t, seq, pos)| Some((t, slot_of(slots, bs, t, seq, pos)?)));
    let mut prev: Option<usize> = None;
    let increasing = written.clone().all(|(_, s)| {
        let up = prev.is_none_or(|p| s > p);
        prev = Some(s);
        up
    });
    if increasing {
        return Ok(());
    }
    if let Slots::BlockTable { block_table, blocks_per_seq } = *slots {
        if block_runs_disjoint(block_table, blocks_per_seq, bs, batch, tokens) {
            return Ok(());
        }
    }
    match first_duplicate(written) {
        Some((token, slot)) => Err(RopeError::DuplicateSlot { operand, token, slot }),
        None => Ok(()),
    }
}

/// Entries the stack scratch of the duplicate checks holds without the `alloc` feature.
#[cfg(not(feature = "alloc"))]
const STACK_SCRATCH: usize = 64;

/// Runs `f` on the items sorted, in scratch: a `Vec` with the `alloc` feature, otherwise a
/// stack array of [`STACK_SCRATCH`] entries (`None` when the items do not fit).
fn with_sorted<T: Ord + Copy + Default, R>(
    items: impl Iterator<Item = T>,
    f: impl FnOnce(&[T]) -> R,
) -> Option<R> {
    #[cfg(feature = "alloc")]
    {
        let mut v: alloc::vec::Vec<T> = items.collect();
        v.sort_unstable();
        Some(f(&v))
    }
    #[cfg(not(feature = "alloc"))]
    {
        let mut buf = [T::default(); STACK_SCRATCH];
        let mut n = 0;
        for x in items {
            *buf.get_mut(n)? = x;
            n += 1;
        }
        buf[..n].sort_unstable();
        Some(f(&buf[..n]))
    }
}

/// The first written token (in token order) whose slot an earlier token also writes, with
/// that slot. Sorting `(slot, token)` pairs, the answer is the smallest second token of a
/// group of equal slots (`O(n log n)`); when they do not fit the scratch ([`with_sorted`]:
/// only without `alloc`), each token is compared with the earlier ones (`O(n^2)`).
fn first_duplicate(written: impl Iterator<Item = (usize, usize)> + Clone) -> Option<(usize, usize)> {
    let sorted = with_sorted(written.clone().map(|(t, s)| (s, t)), |v| {
        v.windows(2).filter(|w| w[0].0 == w[1].0).map(|w| (w[1].1, w[1].0)).min()
    });
    if let Some(found) = sorted {
        return found;
    }
    written
        .clone()
        .enumerate()
        .find_map(|(i, (t, s))| written.clone().take(i).any(|(_, e)| e == s).then_some((t, s)))
}

/// Whether the rows a block table gives the tokens are proved distinct by their blocks: when
/// positions strictly increase within each sequence (always with [`Batch::Ragged`] and
/// positions from a start), the tokens of one sequence in one block-table entry form one run
/// whose in-block offsets lie in `lo..=hi`; two runs can share a row only if they name the same
/// block with intersecting offset ranges. The runs (at most `tokens / block_size + 2 *
/// sequences`) are sorted by (block, lo) and swept: `O(r log r)`. `false` (the exact check
/// decides) when positions do not increase within a sequence, two ranges of a block meet
/// (rows shared, or interleaved `position_ids`), or the runs do not fit the scratch.
fn block_runs_disjoint(
    block_table: &[u32],
    blocks_per_seq: usize,
    bs: usize,
    batch: &Batch<'_>,
    tokens: usize,
) -> bool {
    let mut walk = token_walk(batch, tokens).peekable();
    let mut monotonic = true;
    // Runs `(block, lo, hi)`: consecutive tokens of one sequence in one block-table entry.
    let runs = core::iter::from_fn(|| {
        let (_, seq, pos) = walk.next()?;
        let (e, lo) = (pos as usize / bs, pos as usize % bs);
        let mut last = pos;
        while let Some(&(_, s2, p2)) = walk.peek() {
            if s2 != seq || p2 as usize / bs != e {
                break;
            }
            monotonic &= p2 > last;
            last = p2;
            walk.next();
        }
        // Within a sequence the next run must start past this one.
        if let Some(&(_, s2, p2)) = walk.peek() {
            monotonic &= s2 != seq || p2 > last;
        }
        let block = block_table[seq * blocks_per_seq + e];
        Some((block, lo, last as usize % bs))
    });
    let disjoint = with_sorted(runs, |v| v.windows(2).all(|w| w[0].0 != w[1].0 || w[0].2 < w[1].1));
    // `monotonic` is final once `runs` is consumed (by `with_sorted`, whole or up to the
    // scratch; a partial walk gives `None`).
    disjoint == Some(true) && monotonic
}

// ---- The call: destinations with their element types erased ----

/// Where one of q, k, v goes after its types are erased (the typed writer knows them).
#[derive(Clone, Copy)]
enum Target<'s> {
    /// Nothing written (`Dest::Skip`; v `InPlace`).
    None,
    /// Rotated in place in the fused buffer.
    InPlace,
    /// A dense tensor (`dst` of the destination's type, view in its units).
    Rows { dst: *mut u8, len: usize, view: View },
    /// Cache rows (`dst` of the destination's type, `len` units).
    Cache { dst: *mut u8, len: usize, layout: CacheLayout, slots: Slots<'s> },
}

/// What a token's write reads besides the part: the token, its sequence and position, its
/// cos/sin row (empty for v), and the call's settings.
struct Step<'r> {
    t: usize,
    seq: usize,
    pos: u32,
    cos: &'r [f32],
    sin: &'r [f32],
    p: &'r TokenParams<'r>,
    prefetch: bool,
}

/// One of q, k, v of a call: its head set in the fused buffer `src` (of the input type), its
/// target, and the writer of its (input, output) types.
#[derive(Clone, Copy)]
struct Part<'s> {
    operand: Operand,
    set: HeadSet,
    src: *mut u8,
    to: Target<'s>,
    /// Units of the destination per head (`head_dim`, or `head_dim / 32` blocks).
    head_len: usize,
    /// The destination type is the input type.
    same_type: bool,
    /// The destination is `q8_0` (`ELEMENTS_PER_UNIT` 32).
    quant: bool,
    /// The destination is `Dest::InPlace` (for v too, where it writes nothing).
    in_place: bool,
    /// Writes token `step.t` of this part (types restored).
    write: unsafe fn(&Part<'s>, &Step<'_>),
}

/// A [`Dest`] with its element type erased: what [`RopeRef::apply_layer_erased`] takes.
/// Hidden: for the C ABI, which dispatches dtype tags at run time, so that it carries one
/// instance of the call per input type (and one [`ErasedDest::new`] per output type)
/// instead of one per combination of four types.
#[doc(hidden)]
pub struct ErasedDest<'a> {
    to: Target<'a>,
    units: usize,
    ty: TypeId,
    dtype: CacheDType,
    /// The destination's buffer stays borrowed (mutably) for `'a`.
    _data: PhantomData<&'a mut ()>,
}

impl<'a> ErasedDest<'a> {
    /// Erases `dest` (its buffer's pointer and length, its type's tag).
    pub fn new<O: CacheElement>(dest: Dest<'a, O>) -> Self {
        let to = match dest {
            Dest::Skip => Target::None,
            Dest::InPlace => Target::InPlace,
            Dest::Tensor { data, view } => {
                Target::Rows { dst: data.as_mut_ptr().cast(), len: data.len(), view }
            }
            Dest::Cache { data, layout, slots } => {
                Target::Cache { dst: data.as_mut_ptr().cast(), len: data.len(), layout, slots }
            }
        };
        ErasedDest {
            to,
            units: O::ELEMENTS_PER_UNIT,
            ty: TypeId::of::<O>(),
            dtype: O::CACHE_DTYPE,
            _data: PhantomData,
        }
    }
}

impl<'s> Part<'s> {
    /// Part `operand` of input type `I`: its set in the fused buffer `src`, its erased
    /// destination, and the writer of the (input, destination) types.
    fn new<I: Element>(
        operand: Operand,
        set: HeadSet,
        src: *mut I,
        dest: ErasedDest<'s>,
        head_dim: usize,
        rotated: bool,
    ) -> Self {
        let in_place = matches!(dest.to, Target::InPlace);
        let to = match dest.to {
            Target::InPlace if !rotated => Target::None,
            to => to,
        };
        // The tag comes from the sealed `CacheElement` of the erased type: the writer's `O`
        // is the destination buffer's type.
        type Write<'s> = unsafe fn(&Part<'s>, &Step<'_>);
        let write = match dest.dtype {
            CacheDType::F32 => write_token::<I, f32> as Write<'s>,
            CacheDType::F16 => write_token::<I, crate::f16> as Write<'s>,
            CacheDType::BF16 => write_token::<I, crate::bf16> as Write<'s>,
            CacheDType::Q8_0 => write_token::<I, BlockQ8_0> as Write<'s>,
        };
        Part {
            operand,
            set,
            src: src.cast(),
            to,
            head_len: head_dim / dest.units,
            same_type: TypeId::of::<I>() == dest.ty,
            quant: dest.units != 1,
            in_place,
            write,
        }
    }

    /// Whether the part reads its set (and so its set must fit and not overlap others).
    fn used(&self) -> bool {
        !matches!(self.to, Target::None)
    }

    /// Whether the part is run: used, with at least one head. A set of 0 heads passes its
    /// checks whatever its offset and strides (it touches no element), so it must form no
    /// pointer: it is dropped from the token loop.
    fn live(&self) -> bool {
        self.used() && self.set.heads > 0
    }
}

/// Writes token `s.t` of `part`: in place with the input type's rotate kernel (its fast
/// paths), otherwise with the convert kernel from `I` to `O`, to the token's tensor row or
/// cache slot (none for a skipped `slot_mapping` entry).
///
/// # Safety
/// `part` comes from [`Part::new`] with these `I`, `O`, for buffers still borrowed by the
/// call, has at least one head ([`Part::live`]: a set of 0 heads is not checked), and
/// passed [`RopeRef::check_layer`] for the call's tokens, batch and options
/// (`s.t` is one of its tokens, `s.seq`, `s.pos` its sequence and position); nothing else
/// touches the buffers; `s.p.kernels` comes from the dispatcher.
unsafe fn write_token<I: Element, O: CacheElement>(part: &Part<'_>, s: &Step<'_>) {
    let set = &part.set;
    let p = s.p;
    // SAFETY: token t's heads lie inside the fused buffer (validated set).
    let src = unsafe { part.src.cast::<I>().add(set.offset + s.t * set.token_stride) };
    let (dst, dst_head_stride) = match part.to {
        Target::None => return,
        Target::InPlace => {
            let args = RotateArgs {
                src,
                dst: src,
                heads: set.heads,
                src_head_stride: set.head_stride,
                dst_head_stride: set.head_stride,
                head_dim: p.head_dim,
                cos: s.cos,
                sin: s.sin,
                layout: p.layout,
                inverse: p.inverse,
                prefetch: s.prefetch && set.head_stride < set.token_stride,
            };
            // In place with the same strides; the set's rows overlap no other set's (checked);
            // `O` is `I` (checked), and the rotate kernel of `I` is the one the in-place
            // calls use.
            // SAFETY: the contract of `RotateFn` holds, as just said.
            unsafe { I::rotate_fn(p.kernels)(&args) };
            return;
        }
        Target::Rows { dst, view, .. } => {
            // SAFETY: token t of a view validated against the tensor's buffer.
            (unsafe { dst.cast::<O>().add(s.t * view.token_stride) }, view.head_stride)
        }
        Target::Cache { dst, layout, ref slots, .. } => {
            let Some(slot) = slot_of(slots, layout.block_size, s.t, s.seq, s.pos) else { return };
            // SAFETY: a slot below `layout.slots()` (checked) of a layout that fits the cache.
            (unsafe { dst.cast::<O>().add(layout.slot_row(slot)) }, layout.head_stride)
        }
    };
    let args = ConvertArgs {
        src,
        dst,
        heads: set.heads,
        src_head_stride: set.head_stride,
        dst_head_stride,
        head_dim: p.head_dim,
        cos: s.cos,
        sin: s.sin,
        layout: p.layout,
        inverse: p.inverse,
    };
    // The source (the fused buffer, `&mut [I]`) and the destination (another `&mut [O]`)
    // are different buffers; the destination rows of one token do not overlap (validated),
    // and no two tokens write one row (duplicate slots checked); q8_0 has head_dim % 32 == 0.
    // SAFETY: the contract of `ConvertFn` holds, as just said.
    unsafe { kernels::convert_fn::<I, O>(p.kernels)(&args) };
}

impl RopeRef<'_> {
    /// As [`Rope::apply_layer`](crate::Rope::apply_layer).
    ///
    /// # Errors
    /// See [`Rope::apply_layer`](crate::Rope::apply_layer).
    pub fn apply_layer<I: Element, Q: CacheElement, K: CacheElement, V: CacheElement>(
        &self,
        qkv: Qkv<'_, I>,
        q: Dest<'_, Q>,
        k: Dest<'_, K>,
        v: Dest<'_, V>,
        opts: &LayerApply<'_>,
    ) -> Result<(), RopeError> {
        self.apply_layer_erased(qkv, ErasedDest::new(q), ErasedDest::new(k), ErasedDest::new(v), opts)
    }

    /// [`RopeRef::apply_layer`] with the destinations' types erased ([`ErasedDest::new`]):
    /// one instance per input type. Hidden: for the C ABI.
    ///
    /// # Errors
    /// Those of [`Rope::apply_layer`](crate::Rope::apply_layer).
    #[doc(hidden)]
    pub fn apply_layer_erased<I: Element>(
        &self,
        qkv: Qkv<'_, I>,
        q: ErasedDest<'_>,
        k: ErasedDest<'_>,
        v: ErasedDest<'_>,
        opts: &LayerApply<'_>,
    ) -> Result<(), RopeError> {
        let hd = self.params.head_dim;
        let (src, len, tokens) = (qkv.data.as_mut_ptr(), qkv.data.len(), qkv.tokens);
        let [qs, ks, vs] = qkv.sets;
        let parts = [
            Part::new::<I>(Operand::Q, qs, src, q, hd, true),
            Part::new::<I>(Operand::K, ks, src, k, hd, true),
            Part::new::<I>(Operand::V, vs, src, v, hd, false),
        ];
        let Some(seq_len) = self.check_layer(len, tokens, &parts, opts)? else {
            return Ok(());
        };
        self.run_layer(tokens, &parts, opts, seq_len)
    }

    /// As [`Rope::apply_head_sets`](crate::Rope::apply_head_sets).
    ///
    /// # Errors
    /// See [`Rope::apply_head_sets`](crate::Rope::apply_head_sets).
    pub fn apply_head_sets<T: Element + CacheElement>(
        &self,
        buf: &mut [T],
        tokens: usize,
        q: HeadSet,
        k: Option<HeadSet>,
        opts: &Apply<'_>,
    ) -> Result<(), RopeError> {
        let sets = [q, k.unwrap_or_default(), HeadSet::default()];
        let k = if k.is_some() { Dest::<T>::InPlace } else { Dest::Skip };
        let layer = LayerApply {
            batch: Batch::Single(opts.positions),
            cos_sin: opts.cos_sin,
            direction: opts.direction,
        };
        self.apply_layer(Qkv::new(buf, tokens, sets), Dest::<T>::InPlace, k, Dest::<T>::Skip, &layer)
    }

    /// Every check of an attention-layer call, in the documented order (see
    /// [`Rope::apply_layer`](crate::Rope::apply_layer)); returns the call's length (largest
    /// position + 1), or `None` for an `Ok` no-op. Type-independent: one copy for every
    /// combination of element types.
    #[inline(never)]
    fn check_layer(
        &self,
        len: usize,
        tokens: usize,
        parts: &[Part<'_>; 3],
        opts: &LayerApply<'_>,
    ) -> Result<Option<u64>, RopeError> {
        let hd = self.params.head_dim;
        // 1. The sets in the fused buffer.
        for part in parts.iter().filter(|p| p.used()) {
            part.set.validate(tokens, hd, len, part.operand)?;
        }
        // 2. No two used sets share an element.
        for (i, j) in [(0, 1), (0, 2), (1, 2)] {
            let (a, b) = (&parts[i], &parts[j]);
            if a.used() && b.used() && sets_overlap(&a.set, &b.set, tokens, hd) {
                return Err(RopeError::OverlappingHeadSets { a: a.operand, b: b.operand });
            }
        }
        let out = |p: &Part<'_>| match p.operand {
            Operand::Q => Operand::QOut,
            Operand::K => Operand::KOut,
            _ => Operand::VOut,
        };
        for part in parts {
            let operand = out(part);
            // 3. In place keeps the input type (v too, where it writes nothing).
            if part.in_place && !part.same_type {
                return Err(RopeError::UnsupportedTypePair { operand });
            }
            // 4. q8_0 rows are whole blocks.
            if part.quant && part.used() && !hd.is_multiple_of(32) {
                return Err(RopeError::PartialQuantBlock { operand, head_dim: hd });
            }
            // 5. The destination's shape.
            match part.to {
                Target::Rows { len, view, .. } => {
                    view.validate(part.head_len, len, operand)?;
                    if view.tokens != tokens || view.heads != part.set.heads {
                        return Err(RopeError::ShapeMismatch { operand });
                    }
                }
                Target::Cache { len, layout, .. } => {
                    layout.validate(part.set.heads, part.head_len, len, operand)?
                }
                Target::None | Target::InPlace => {}
            }
        }
        // 6. The batch and its positions.
        let max_pos = check_batch(&opts.batch, tokens)?;
        // 7. Cache slots (k and v with one slot source share the check).
        let mut checked: Option<(&Slots<'_>, usize, usize)> = None;
        for part in parts {
            if let Target::Cache { layout, ref slots, .. } = part.to {
                let key = (slots, layout.num_blocks, layout.block_size);
                if checked.is_some_and(|c| same_slots(c.0, slots) && (c.1, c.2) == (key.1, key.2)) {
                    continue;
                }
                check_slots(slots, &layout, &opts.batch, tokens, out(part))?;
                checked = Some(key);
            }
        }
        // 8. The cos/sin table.
        super::check_table(self.pairs(), opts.cos_sin, max_pos)?;
        let Some(max_pos) = max_pos else { return Ok(None) };
        if !parts.iter().any(Part::live) {
            return Ok(None);
        }
        Ok(Some(u64::from(max_pos) + 1))
    }

    /// Runs a validated call: the one token loop ([`super::for_each_row`]) over each
    /// sequence, writing q, k (rotated) and v (converted) of every token.
    #[inline(never)]
    fn run_layer(
        &self,
        tokens: usize,
        parts: &[Part<'_>; 3],
        opts: &LayerApply<'_>,
        seq_len: u64,
    ) -> Result<(), RopeError> {
        let apply =
            Apply { positions: Positions::Start(0), cos_sin: opts.cos_sin, direction: opts.direction };
        let p = self.token_params(&apply, tokens);
        // Prefetch as the in-place calls do (`rotate_tokens`): when the rotated input of the
        // whole call exceeds the threshold.
        let heads: usize = parts[..2].iter().filter(|x| x.live()).map(|x| x.set.heads).sum();
        let row_bytes = 2 * p.pairs * core::mem::size_of::<f32>();
        let prefetch = heads.saturating_mul(row_bytes).saturating_mul(tokens) > kernels::PREFETCH_MIN_BYTES;
        // Parts with 0 heads are not run: their offsets and strides were not checked.
        let live: [Option<&Part<'_>>; 3] = core::array::from_fn(|i| Some(&parts[i]).filter(|x| x.live()));
        // Frequencies are computed (or fail) before the body runs: nothing is written on error.
        self.with_freqs(seq_len, opts.cos_sin, |freqs| {
            for (seq, range, positions) in sequences(&opts.batch, tokens) {
                let sp = TokenParams { positions, ..p };
                let base = range.start;
                super::for_each_row(&sp, freqs, 0..range.len(), &|j, cos, sin| {
                    let pos = positions.get(j);
                    for (i, part) in live.iter().enumerate() {
                        let Some(part) = part else { continue };
                        let (cos, sin) = if i < 2 { (cos, sin) } else { (&[][..], &[][..]) };
                        let step = Step { t: base + j, seq, pos, cos, sin, p: &sp, prefetch };
                        // Every part passed `check_layer` for this call's buffers, tokens, batch
                        // and options; `base + j` is token j of sequence `seq` at `pos`.
                        // SAFETY: the contract of `write_token`, as just said.
                        unsafe { (part.write)(part, &step) };
                    }
                });
            }
        })
    }
}

impl Rope {
    /// One attention layer's RoPE in one pass over the fused QKV projection output: q and k
    /// rotated (in place, or read and written elsewhere), v copied, each to its own
    /// destination and element type, for one sequence or a ragged batch.
    ///
    /// - `qkv`: the buffer `I` (f32, f16, bf16), its tokens and the `[q, k, v]` head sets in it
    ///   ([`HeadSet::qkv_rows`] for `[q | k | v]` rows, [`HeadSet::neox_qkv`] for GPT-NeoX's
    ///   per-head interleaving, or any offsets and strides);
    /// - `q`, `k`, `v`: a [`Dest`] each, of its own type `Q`, `K`, `V` (f32, f16, bf16,
    ///   [`BlockQ8_0`](crate::BlockQ8_0)): [`Dest::Skip`], [`Dest::InPlace`] (same type as
    ///   `I`; for v: left as is), a dense [`Dest::Tensor`], or KV-cache rows [`Dest::Cache`]
    ///   addressed by a vLLM `slot_mapping` (-1 skips a token), a paged `block_table`, or the
    ///   positions;
    /// - `opts`: the [`Batch`] (one sequence, or FlashInfer-style `indptr` with per-sequence
    ///   starts or per-token `position_ids`), cos/sin on the fly or from a table (indexed by
    ///   position), the direction.
    ///
    /// Every rotated value is computed as by [`Rope::apply_qk_into`] (math in f32, the same
    /// cos/sin rows, the same operation order) and rounded once to its destination type; v
    /// and the pass-through dimensions are converted (`O::from_f32(I::to_f32(x))`); a `q8_0`
    /// destination quantizes each block of 32 rotated values as ggml's
    /// `quantize_row_q8_0_ref`. Bit-identical on every tier.
    ///
    /// ```
    /// use rope_kernels::{bf16, Batch, CacheLayout, Dest, HeadSet, LayerApply, Qkv, Rope, RopeConfig, Slots};
    ///
    /// // Llama-3.1-8B shapes: 32 q heads, 8 kv heads, head_dim 128. Decode of 2 sequences at
    /// // positions 17 and 40, k and v appended to a paged bf16 cache (vLLM NHD, block_size 16).
    /// let rope = Rope::new(RopeConfig::new(128, 500_000.0))?;
    /// let (tokens, hd) = (2, 128);
    /// let mut qkv = vec![0.5f32; tokens * 48 * hd];
    /// let layout = CacheLayout::nhd(64, 16, 8, hd);
    /// let mut k_cache = vec![bf16::ZERO; 64 * 16 * 8 * hd];
    /// let mut v_cache = k_cache.clone();
    /// let block_table = [3, 7, 0, 0, 9, 4, 12, 0]; // 2 sequences x 4 blocks
    /// let slots = Slots::BlockTable { block_table: &block_table, blocks_per_seq: 4 };
    /// rope.apply_layer(
    ///     Qkv::new(&mut qkv, tokens, HeadSet::qkv_rows(32, 8, hd)),
    ///     Dest::<f32>::InPlace,
    ///     Dest::Cache { data: &mut k_cache, layout, slots },
    ///     Dest::Cache { data: &mut v_cache, layout, slots },
    ///     &LayerApply::batch(Batch::Ragged { indptr: &[0, 1, 2], start: &[17, 40] }),
    /// )?;
    /// // Sequence 0's token (position 17) went to block 7, slot 1; v is copied unrotated.
    /// let row = layout.row(7 * 16 + 1, 0);
    /// assert_eq!(v_cache[row].to_f32(), 0.5);
    /// // Sequence 1's (position 40) to block 12, slot 8.
    /// assert_eq!(v_cache[layout.row(12 * 16 + 8, 0)].to_f32(), 0.5);
    /// # Ok::<(), rope_kernels::RopeError>(())
    /// ```
    ///
    /// # Errors
    /// Nothing is written when any of these is returned; when several apply, the first in
    /// this order:
    /// 1. the sets that are used (q, k unless `Skip`; v when `Tensor` or `Cache`) against the
    ///    fused buffer, in q, k, v order: [`RopeError::OverlappingStrides`],
    ///    [`RopeError::StrideOverflow`], [`RopeError::BufferTooShort`] (operand `Q`, `K`,
    ///    `V`);
    /// 2. two used sets that share an element, decided exactly on the elements they touch:
    ///    [`RopeError::OverlappingHeadSets`] (pairs in the order q-k, q-v, k-v);
    /// 3. then per destination, in q, k, v order (operand `QOut`, `KOut`, `VOut`):
    ///    [`RopeError::UnsupportedTypePair`] for `InPlace` of another type than `I` (v
    ///    included, though v in place writes nothing);
    ///    [`RopeError::PartialQuantBlock`] for a `q8_0` destination with `head_dim % 32 != 0`;
    ///    the tensor's view or the cache's layout against its buffer
    ///    ([`RopeError::OverlappingStrides`], [`RopeError::StrideOverflow`],
    ///    [`RopeError::BufferTooShort`]) and [`RopeError::ShapeMismatch`] for a tensor view
    ///    whose tokens or heads differ from the set's;
    /// 4. the batch: [`RopeError::InvalidIndptr`] (ragged), then
    ///    [`RopeError::PositionCountMismatch`], [`RopeError::PositionOverflow`];
    /// 5. per cache destination, in q, k, v order: [`RopeError::SlotMappingLength`],
    ///    [`RopeError::InvalidBlockSize`] (a block table with `block_size` 0), then for
    ///    each token in order [`RopeError::BlockTableTooShort`],
    ///    [`RopeError::BlockOutOfRange`], [`RopeError::SlotOutOfRange`] (for a block table
    ///    too: with a set of 0 heads the layout is not bounded by a buffer, and a slot
    ///    `block * block_size + position % block_size` past `usize::MAX` is refused); then
    ///    [`RopeError::DuplicateSlot`] (a destination with the same slot array (same address
    ///    and length), `num_blocks` and `block_size` as the one before it is not checked again);
    /// 6. the cos/sin table: [`RopeError::TableShape`], [`RopeError::PositionOutOfRange`]
    ///    (the largest position of the batch);
    /// 7. the frequencies, for a call whose frequencies depend on its length (dynamic NTK
    ///    computes them for this call without a table): [`RopeError::InvalidScalingParameter`]
    ///    (those of [`Frequencies::new`](crate::Frequencies::new) at that length), as C's
    ///    `ROPE_INVALID_SCALING_PARAMETER`.
    ///
    /// Zero tokens, or zero heads in every used set, is an `Ok` no-op after these checks; a
    /// set of 0 heads is not run (its offset and strides touch nothing and are not checked).
    /// Dynamic NTK and LongRoPE use the frequencies of a call whose length is the batch's
    /// largest position + 1.
    ///
    /// # Cost of the duplicate-row check
    /// One pass when the written slots strictly increase (prefill into a contiguous cache,
    /// [`Slots::Positions`], most `slot_mapping`s). Otherwise, for a [`Slots::BlockTable`] with
    /// positions increasing within each sequence, only the block-table entries the call uses
    /// are compared (`O(b log b)`, `b` ≈ `tokens / block_size + sequences`: blocks in any
    /// order cost nothing extra); in the remaining cases the `(slot, token)` pairs are sorted
    /// in scratch, `O(n log n)`: a `Vec` with the `alloc` feature; **without `alloc`** a stack
    /// array of 64 entries, and beyond it each written token is compared with the earlier
    /// ones (`O(n²)`: a 512-token prefill through a non-increasing `slot_mapping` is ~131 000
    /// comparisons).
    ///
    /// # k and v in one buffer
    /// A cache that holds k and v in one allocation (FlashInfer's and vLLM-FlashInfer's
    /// `[num_blocks][2][block_size][kv_heads][head_dim]`) cannot be passed as two
    /// [`Dest::Cache`] (two `&mut` of one buffer; C refuses it as `ROPE_OVERLAPPING_BUFFERS`).
    /// Make two calls on the whole buffer, with a [`CacheLayout`] whose `block_stride` spans
    /// both halves: first q and k (k to the cache) with v [`Dest::Skip`], then q and k `Skip`
    /// and v to the cache at the v half (the slice starting `block_size * kv_heads *
    /// head_dim` elements in). v is never rotated, so the result is that of one call; the
    /// second costs the v copy only.
    pub fn apply_layer<I: Element, Q: CacheElement, K: CacheElement, V: CacheElement>(
        &self,
        qkv: Qkv<'_, I>,
        q: Dest<'_, Q>,
        k: Dest<'_, K>,
        v: Dest<'_, V>,
        opts: &LayerApply<'_>,
    ) -> Result<(), RopeError> {
        self.as_ref().apply_layer(qkv, q, k, v, opts)
    }

    /// Rotates q and (optionally) k in place as two head sets of one buffer (e.g. the q and k
    /// heads of a fused QKV buffer, which two `&mut` views cannot express): the in-place form
    /// of [`Rope::apply_layer`] (q and k `InPlace`, v skipped, one sequence).
    ///
    /// ```
    /// use rope_kernels::{Apply, HeadSet, Rope, RopeConfig};
    ///
    /// // GPT-NeoX-20B-like: 4 heads interleaved as [heads][q, k, v][head_dim].
    /// let rope = Rope::new(RopeConfig::new(64, 10_000.0))?;
    /// let mut qkv = vec![0.5f32; 3 * 4 * 3 * 64];
    /// let [q, k, _] = HeadSet::neox_qkv(4, 64);
    /// rope.apply_head_sets(&mut qkv, 3, q, Some(k), &Apply::start(10))?;
    /// # Ok::<(), rope_kernels::RopeError>(())
    /// ```
    ///
    /// # Errors
    /// Those of [`Rope::apply_layer`] for these arguments.
    pub fn apply_head_sets<T: Element + CacheElement>(
        &self,
        buf: &mut [T],
        tokens: usize,
        q: HeadSet,
        k: Option<HeadSet>,
        opts: &Apply<'_>,
    ) -> Result<(), RopeError> {
        self.as_ref().apply_head_sets(buf, tokens, q, k, opts)
    }
}
