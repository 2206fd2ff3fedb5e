//! The attention-layer call: its checks in the documented order and its run
//! ([`Rope::apply_layer`]).

use super::overlap::sets_overlap;
use super::slots::{check_batch, check_slots, same_slots, sequences};
use super::writes::{ErasedDest, Part, Step, Target};
use super::{Batch, Dest, HeadSet, LayerOptions, Qkv, Slots};
use crate::element::Element;
use crate::error::{Operand, RopeError};
use crate::kernels::{self, q8_0::CacheElement};
use crate::rope::{ApplyOptions, Positions, Rope, RopeView, TokenParams};

impl RopeView<'_> {
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
        opts: &LayerOptions<'_>,
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
        crate::rope::check_table(self.pairs(), opts.cos_sin, max_pos)?;
        let Some(max_pos) = max_pos else { return Ok(None) };
        if !parts.iter().any(Part::live) {
            return Ok(None);
        }
        Ok(Some(u64::from(max_pos) + 1))
    }

    /// Runs a validated call: the one token loop ([`crate::rope::for_each_row`]) over each
    /// sequence, writing q, k (rotated) and v (converted) of every token.
    #[inline(never)]
    fn run_layer(
        &self,
        tokens: usize,
        parts: &[Part<'_>; 3],
        opts: &LayerOptions<'_>,
        seq_len: u64,
    ) -> Result<(), RopeError> {
        let apply =
            ApplyOptions { positions: Positions::Start(0), cos_sin: opts.cos_sin, direction: opts.direction };
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
                crate::rope::for_each_row(&sp, freqs, 0..range.len(), &|j, cos, sin| {
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

impl Rope<'_> {
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
    /// use rope_kernels::{bf16, Batch, CacheLayout, Dest, HeadSet, LayerOptions, Qkv, Rope, RopeConfig, Slots};
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
    ///     &LayerOptions::batch(Batch::Ragged { indptr: &[0, 1, 2], start: &[17, 40] }),
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
    ///
    /// [`CacheLayout`]: super::CacheLayout
    pub fn apply_layer<I: Element, Q: CacheElement, K: CacheElement, V: CacheElement>(
        &self,
        qkv: Qkv<'_, I>,
        q: Dest<'_, Q>,
        k: Dest<'_, K>,
        v: Dest<'_, V>,
        opts: &LayerOptions<'_>,
    ) -> Result<(), RopeError> {
        self.apply_layer_erased(qkv, ErasedDest::new(q), ErasedDest::new(k), ErasedDest::new(v), opts)
    }

    /// [`Rope::apply_layer`] with the destinations' types erased ([`ErasedDest::new`]):
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
        opts: &LayerOptions<'_>,
    ) -> Result<(), RopeError> {
        let r = self.view();
        let hd = r.params.head_dim;
        let (src, len, tokens) = (qkv.data.as_mut_ptr(), qkv.data.len(), qkv.tokens);
        let [qs, ks, vs] = qkv.sets;
        let parts = [
            Part::new::<I>(Operand::Q, qs, src, q, hd, true),
            Part::new::<I>(Operand::K, ks, src, k, hd, true),
            Part::new::<I>(Operand::V, vs, src, v, hd, false),
        ];
        let Some(seq_len) = r.check_layer(len, tokens, &parts, opts)? else {
            return Ok(());
        };
        r.run_layer(tokens, &parts, opts, seq_len)
    }

    /// Rotates q and (optionally) k in place as two head sets of one buffer (e.g. the q and k
    /// heads of a fused QKV buffer, which two `&mut` views cannot express): the in-place form
    /// of [`Rope::apply_layer`] (q and k `InPlace`, v skipped, one sequence).
    ///
    /// ```
    /// use rope_kernels::{ApplyOptions, HeadSet, Rope, RopeConfig};
    ///
    /// // GPT-NeoX-20B-like: 4 heads interleaved as [heads][q, k, v][head_dim].
    /// let rope = Rope::new(RopeConfig::new(64, 10_000.0))?;
    /// let mut qkv = vec![0.5f32; 3 * 4 * 3 * 64];
    /// let [q, k, _] = HeadSet::neox_qkv(4, 64);
    /// rope.apply_head_sets(&mut qkv, 3, q, Some(k), &ApplyOptions::start(10))?;
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
        opts: &ApplyOptions<'_>,
    ) -> Result<(), RopeError> {
        let sets = [q, k.unwrap_or_default(), HeadSet::default()];
        let k = if k.is_some() { Dest::<T>::InPlace } else { Dest::Skip };
        let layer = LayerOptions {
            batch: Batch::Single(opts.positions),
            cos_sin: opts.cos_sin,
            direction: opts.direction,
        };
        self.apply_layer(Qkv::new(buf, tokens, sets), Dest::<T>::InPlace, k, Dest::<T>::Skip, &layer)
    }
}
