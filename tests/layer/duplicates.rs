//! The duplicate-row rule against brute force.

use super::*;

/// The duplicate-row rule (a `Vec`-sorted or block-run check when slots do not increase)
/// against brute force (the first token, in order, whose slot an earlier token writes), on
/// random slot mappings and block tables (shuffled, shared and repeated blocks) over single,
/// ragged and `position_ids` batches.
#[test]
fn duplicate_slots_match_brute_force() {
    let rope = Rope::new(RopeConfig::new(64, 10_000.0)).unwrap();
    let mut rng = SmallRng::seed_from_u64(17);
    let [q, k, _] = HeadSet::qkv_rows(1, 1, 64);
    for case in 0..if cfg!(miri) { 20 } else { 3000 } {
        let tokens = rng.random_range(1..=24usize);
        let (num_blocks, bs) = (rng.random_range(1..=12usize), rng.random_range(1..=5usize));
        let layout = CacheLayout::nhd(num_blocks, bs, 1, 64);
        let n = num_blocks * bs;
        let seqs = rng.random_range(1..=4usize);
        let mut cuts: Vec<u32> = (0..seqs - 1).map(|_| rng.random_range(0..=tokens as u32)).collect();
        cuts.sort_unstable();
        let indptr: Vec<u32> = [0].into_iter().chain(cuts).chain([tokens as u32]).collect();
        let bps = rng.random_range(1..=6usize);
        let cap = (bps * bs) as u32;
        let start: Vec<u32> =
            indptr.windows(2).map(|w| rng.random_range(0..=cap - (w[1] - w[0]).min(cap))).collect();
        // Positions per token: from starts, or explicit ids (often increasing, sometimes not).
        let sorted_ids = rng.random_bool(0.5);
        let ids: Vec<u32> = indptr
            .windows(2)
            .flat_map(|w| {
                let mut v: Vec<u32> = (w[0]..w[1]).map(|_| rng.random_range(0..cap)).collect();
                if sorted_ids {
                    v.sort_unstable();
                    v.dedup();
                    while v.len() < (w[1] - w[0]) as usize {
                        v.push(cap - 1);
                    }
                }
                v
            })
            .collect();
        let batch = match case % 3 {
            0 => Batch::Ragged { indptr: &indptr, start: &start },
            1 => Batch::RaggedIds { indptr: &indptr, position_ids: &ids },
            _ => Batch::Single(Positions::Ids(&ids)),
        };
        let table: Vec<u32> = if rng.random_bool(0.5) {
            (0..seqs * bps).map(|_| rng.random_range(0..num_blocks as u32)).collect()
        } else {
            // A permutation (distinct blocks), as a block allocator hands out, when it fits.
            let mut t: Vec<u32> =
                (0..(seqs * bps).max(num_blocks) as u32).map(|b| b % num_blocks as u32).collect();
            for i in (1..t.len()).rev() {
                t.swap(i, rng.random_range(0..=i));
            }
            t
        };
        let mapping: Vec<i64> = (0..tokens)
            .map(|t| match rng.random_range(0..10) {
                0 => -1,
                1..=3 => rng.random_range(-1..n as i64),
                _ => ((t * 7 + rng.random_range(0..3)) % n) as i64,
            })
            .collect();
        let walk = walk(&batch, tokens);
        for slots in
            [Slots::Mapping(&mapping), Slots::BlockTable { block_table: &table, blocks_per_seq: bps }]
        {
            if matches!(slots, Slots::BlockTable { .. }) && walk.iter().any(|w| w.2 >= cap) {
                continue; // BlockTableTooShort, tested elsewhere
            }
            let slot_of = |&(t, seq, pos): &(usize, usize, u32)| -> Option<i64> {
                match slots {
                    Slots::Mapping(m) => Some(m[t]).filter(|&s| s >= 0),
                    Slots::BlockTable { .. } => {
                        let p = pos as usize;
                        Some((table[seq * bps + p / bs] as usize * bs + p % bs) as i64)
                    }
                    Slots::Positions => unreachable!(),
                }
            };
            let mut seen = std::collections::HashSet::new();
            let want = walk
                .iter()
                .find_map(|w| {
                    let s = slot_of(w)?;
                    (!seen.insert(s)).then_some(RopeError::DuplicateSlot {
                        operand: Operand::KOut,
                        token: w.0,
                        slot: s as usize,
                    })
                })
                .map_or(Ok(()), Err);
            let mut qkv = vec![0.5f32; tokens * 3 * 64];
            let mut cache = vec![0.0f32; n * 64];
            let got = rope.apply_layer(
                Qkv::new(&mut qkv, tokens, [q, k, HeadSet::default()]),
                Dest::<f32>::Skip,
                Dest::Cache { data: &mut cache, layout, slots },
                Dest::<f32>::Skip,
                &LayerOptions::batch(batch),
            );
            assert_eq!(got, want, "case {case}: {batch:?} {slots:?} block_size {bs}");
        }
    }
}

/// More written tokens than the stack scratch of a build without `alloc` holds (64): the
/// sorted check (with `alloc`) and the quadratic fallback (without) find the same first
/// duplicate.
#[test]
fn duplicate_slots_past_the_stack_scratch() {
    let rope = Rope::new(RopeConfig::new(64, 10_000.0)).unwrap();
    let [q, k, _] = HeadSet::qkv_rows(1, 1, 64);
    let tokens = if cfg!(miri) { 70 } else { 300 };
    let layout = CacheLayout::contiguous(2 * tokens, 1, 64);
    let mut mapping: Vec<i64> = (0..tokens as i64).rev().map(|t| 2 * t).collect();
    for dup in [None, Some((tokens - 5, 7))] {
        if let Some((t, from)) = dup {
            mapping[t] = mapping[from];
        }
        let mut qkv = vec![0.5f32; tokens * 3 * 64];
        let mut cache = vec![0.0f32; 2 * tokens * 64];
        let got = rope.apply_layer(
            Qkv::new(&mut qkv, tokens, [q, k, HeadSet::default()]),
            Dest::<f32>::Skip,
            Dest::Cache { data: &mut cache, layout, slots: Slots::Mapping(&mapping) },
            Dest::<f32>::Skip,
            &LayerOptions::default(),
        );
        let want = dup.map_or(Ok(()), |(t, from)| {
            Err(RopeError::DuplicateSlot { operand: Operand::KOut, token: t, slot: mapping[from] as usize })
        });
        assert_eq!(got, want);
    }
}
