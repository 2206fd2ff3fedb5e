//! The batch and the cache slots of a call: their checks (type-independent: one copy for
//! every element-type combination) and the walks over a validated batch.

use super::{Batch, CacheLayout, Slots};
use crate::error::{Operand, RopeError};
use crate::rope::Positions;

/// without tokens). Order: `indptr` (FlashInfer `append_indptr`: non-empty, from 0,
/// non-decreasing, ending at `tokens`), the per-sequence array's length, then positions
/// (`position_ids` count, `start + len - 1` overflow).
pub(super) fn check_batch(batch: &Batch<'_>, tokens: usize) -> Result<Option<u32>, RopeError> {
    let indptr = match *batch {
        Batch::Single(positions) => return crate::rope::max_position(positions, tokens),
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
                max = max.max(crate::rope::max_position(Positions::Start(s), n)?);
            }
            Ok(max)
        }
        Batch::RaggedIds { position_ids, .. } => {
            crate::rope::max_position(Positions::Ids(position_ids), tokens)
        }
        Batch::Single(_) => unreachable!("returned above"),
    }
}

/// The sequences of a validated batch: `(sequence, its tokens, their positions)`, where
/// `positions.get(j)` is the position of token `tokens.start + j`.
pub(super) fn sequences<'b>(
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
pub(super) fn token_walk<'b>(
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
pub(super) fn slot_of(slots: &Slots<'_>, block_size: usize, t: usize, seq: usize, pos: u32) -> Option<usize> {
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
pub(super) fn same_slots(a: &Slots<'_>, b: &Slots<'_>) -> bool {
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
pub(super) fn check_slots(
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
