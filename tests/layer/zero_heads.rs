//! Review fixes: sets of 0 heads (no pointer formed, no overflow), v in place of another
//! type.

use super::errors::{bufs, expect_err, HD, QV, SETS, TOKENS};
use super::*;

/// A used set of 0 heads passes its checks whatever its offset and strides (it touches no
/// element); the call must then form no pointer for it (Miri: no out-of-bounds offset), not
/// panic, and give the result of the same call with that part skipped.
fn zero_heads_case(
    tokens: usize,
    k: HeadSet,
    v: HeadSet,
    mut run: impl FnMut(&Rope, &mut [f32], [HeadSet; 3]) -> Result<(), RopeError>,
) {
    let rope = Rope::new(RopeConfig::new(64, 10_000.0)).unwrap();
    let q = HeadSet { offset: 0, heads: 1, token_stride: 64, head_stride: 64 };
    let fresh = || -> Vec<f32> { (0..tokens * 64).map(|i| (i % 17) as f32 * 0.1 - 0.8).collect() };
    let mut got = fresh();
    run(&rope, &mut got, [q, k, v]).unwrap();
    let mut want = fresh();
    rope.apply_head_sets(&mut want, tokens, q, None, &ApplyOptions::start(0)).unwrap();
    assert_eq!(in_bits(&got), in_bits(&want));
}

#[test]
fn zero_head_k_in_place_huge_token_stride() {
    let k = HeadSet { offset: 0, heads: 0, token_stride: usize::MAX, head_stride: 0 };
    zero_heads_case(3, k, HeadSet::default(), |r, qkv, sets| {
        r.apply_layer(
            Qkv::new(qkv, 3, sets),
            Dest::<f32>::InPlace,
            Dest::<f32>::InPlace,
            Dest::<f32>::Skip,
            &LayerOptions::default(),
        )
    });
}

#[test]
fn zero_head_k_in_place_offset_past_buffer() {
    let k = HeadSet { offset: usize::MAX / 8, heads: 0, token_stride: 0, head_stride: 0 };
    zero_heads_case(1, k, HeadSet::default(), |r, qkv, sets| {
        r.apply_layer(
            Qkv::new(qkv, 1, sets),
            Dest::<f32>::InPlace,
            Dest::<f32>::InPlace,
            Dest::<f32>::Skip,
            &LayerOptions::default(),
        )
    });
}

#[test]
fn zero_head_v_cache_huge_block_stride() {
    let v = HeadSet { offset: usize::MAX, heads: 0, token_stride: usize::MAX, head_stride: 0 };
    let layout = CacheLayout {
        num_blocks: 8,
        block_size: 1,
        block_stride: usize::MAX,
        slot_stride: 0,
        head_stride: 0,
    };
    let mut cache = vec![<bf16 as Out>::canary(); 4];
    zero_heads_case(3, HeadSet::default(), v, |r, qkv, sets| {
        r.apply_layer(
            Qkv::new(qkv, 3, sets),
            Dest::<f32>::InPlace,
            Dest::<f32>::Skip,
            Dest::Cache { data: &mut cache, layout, slots: Slots::Positions },
            &LayerOptions::default(),
        )
    });
    assert_eq!(keys(&cache), keys(&[<bf16 as Out>::canary(); 4]));
}

#[test]
fn zero_head_v_tensor_huge_token_stride() {
    let v = HeadSet { offset: 0, heads: 0, token_stride: 0, head_stride: 0 };
    let view = View { tokens: 3, heads: 0, token_stride: usize::MAX, head_stride: 0 };
    let mut out = vec![<f32 as Out>::canary(); 4];
    zero_heads_case(3, HeadSet::default(), v, |r, qkv, sets| {
        r.apply_layer(
            Qkv::new(qkv, 3, sets),
            Dest::<f32>::InPlace,
            Dest::<f32>::Skip,
            Dest::Tensor { data: &mut out, view },
            &LayerOptions::default(),
        )
    });
    assert_eq!(keys(&out), keys(&[<f32 as Out>::canary(); 4]));
}

/// A k set of 0 heads into a paged cache whose layout no buffer bounds (it touches no
/// element): a block-table slot `block * block_size + position % block_size` past
/// `usize::MAX` is `SlotOutOfRange` (not an overflow panic in a debug build, nor a wrapped
/// slot in a release one), nothing written; a slot that fits is an `Ok` call that rotates q
/// alone.
#[test]
fn zero_head_k_block_table_slot_past_usize() {
    let half = 1usize << (usize::BITS - 2);
    // 8 blocks of 2^(bits - 2) slots: `slots()` saturates at `usize::MAX`.
    let layout =
        CacheLayout { num_blocks: 8, block_size: half, block_stride: 0, slot_stride: 0, head_stride: 0 };
    let k = HeadSet { offset: 0, heads: 0, token_stride: 64, head_stride: 64 };
    let call = |block: u32, qkv: &mut [f32], cache: &mut [f32]| {
        let rope = Rope::new(RopeConfig::new(64, 10_000.0)).unwrap();
        let q = HeadSet { offset: 0, heads: 1, token_stride: 64, head_stride: 64 };
        let table = [block];
        rope.apply_layer(
            Qkv::new(qkv, 1, [q, k, HeadSet::default()]),
            Dest::<f32>::InPlace,
            Dest::Cache {
                data: cache,
                layout,
                slots: Slots::BlockTable { block_table: &table, blocks_per_seq: 1 },
            },
            Dest::<f32>::Skip,
            &LayerOptions::batch(Batch::Single(Positions::Start(5))),
        )
    };
    let fresh = || -> Vec<f32> { (0..64).map(|i| (i % 17) as f32 * 0.1 - 0.8).collect() };
    let canaries = vec![<f32 as Out>::canary(); 4];
    for block in [4u32, 7] {
        // 4 * 2^(bits - 2) + 5 = 2^bits + 5: past `usize::MAX` (and past `i64::MAX`).
        let (mut qkv, mut cache) = (fresh(), canaries.clone());
        let want =
            RopeError::SlotOutOfRange { operand: Operand::KOut, token: 0, slot: i64::MAX, slots: usize::MAX };
        assert_eq!(call(block, &mut qkv, &mut cache), Err(want), "block {block}");
        assert_eq!(in_bits(&qkv), in_bits(&fresh()), "qkv written, block {block}");
        assert_eq!(keys(&cache), keys(&canaries), "cache written, block {block}");
    }
    // 3 * 2^(bits - 2) + 5 fits: the call runs (q rotated, the 0-head k writes nothing).
    let (mut qkv, mut cache) = (fresh(), canaries.clone());
    call(3, &mut qkv, &mut cache).unwrap();
    let mut want = fresh();
    let rope = Rope::new(RopeConfig::new(64, 10_000.0)).unwrap();
    let q = HeadSet { offset: 0, heads: 1, token_stride: 64, head_stride: 64 };
    rope.apply_head_sets(&mut want, 1, q, None, &ApplyOptions::start(5)).unwrap();
    assert_eq!(in_bits(&qkv), in_bits(&want));
    assert_eq!(keys(&cache), keys(&canaries));
}

/// `Dest::InPlace` of another type than the buffer's is refused for v too (as C's
/// `ROPE_DEST_IN_PLACE`), though v in place writes nothing; of the same type it is a no-op.
#[test]
fn v_in_place_needs_the_input_type() {
    let [q, _, v] = SETS;
    expect_err(RopeError::UnsupportedTypePair { operand: Operand::VOut }, |r, b| {
        r.apply_layer(
            Qkv::new(&mut b.qkv, TOKENS, [q, HeadSet::default(), v]),
            Dest::Tensor { data: &mut b.q, view: QV },
            Dest::<f32>::Skip,
            Dest::<bf16>::InPlace,
            &LayerOptions::default(),
        )
    });
    let rope = Rope::new(RopeConfig::new(HD, 10_000.0)).unwrap();
    let mut b = bufs();
    rope.apply_layer(
        Qkv::new(&mut b.qkv, TOKENS, [q, HeadSet::default(), v]),
        Dest::<f32>::Skip,
        Dest::<f32>::Skip,
        Dest::<f32>::InPlace,
        &LayerOptions::default(),
    )
    .unwrap();
    assert_eq!(in_bits(&b.qkv), in_bits(&bufs().qkv));
}
