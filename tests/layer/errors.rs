//! Errors: each variant, nothing written; empty calls; `apply_head_sets`.

use super::*;

pub(super) const HD: usize = 64;
pub(super) const TOKENS: usize = 3;

/// The buffers of the error tests: a fused f32 QKV `[3][4 + 2 + 2][64]` (random), a q
/// output tensor (f32), a bf16 k cache and a q8_0 v cache of 16 slots (canaries).
pub(super) struct Bufs {
    pub(super) qkv: Vec<f32>,
    pub(super) q: Vec<f32>,
    pub(super) k: Vec<bf16>,
    pub(super) v: Vec<BlockQ8_0>,
}

pub(super) fn bufs() -> Bufs {
    let mut rng = SmallRng::seed_from_u64(5);
    Bufs {
        qkv: (0..TOKENS * 8 * HD).map(|_| rng.random_range(-1.0..1.0)).collect(),
        q: vec![<f32 as Out>::canary(); TOKENS * 4 * HD],
        k: vec![<bf16 as Out>::canary(); 16 * 2 * HD],
        v: vec![<BlockQ8_0 as Out>::canary(); 16 * 2 * HD / 32],
    }
}

/// Runs `f` on fresh buffers; checks it returns `expected` and left every buffer as it was.
pub(super) fn expect_err(expected: RopeError, f: impl FnOnce(&Rope, &mut Bufs) -> Result<(), RopeError>) {
    let rope = Rope::new(RopeConfig::new(HD, 10_000.0)).unwrap();
    let mut b = bufs();
    let before = bufs();
    assert_eq!(f(&rope, &mut b), Err(expected));
    assert_eq!(in_bits(&b.qkv), in_bits(&before.qkv), "qkv written: {expected:?}");
    assert_eq!(keys(&b.q), keys(&before.q), "q written: {expected:?}");
    assert_eq!(keys(&b.k), keys(&before.k), "k written: {expected:?}");
    assert_eq!(keys(&b.v), keys(&before.v), "v written: {expected:?}");
}

/// The standard call on the error buffers, with k/v slots, q view and options given.
fn layer(
    rope: &Rope,
    b: &mut Bufs,
    sets: [HeadSet; 3],
    q_view: View,
    (k_layout, k_slots): (CacheLayout, Slots<'_>),
    (v_layout, v_slots): (CacheLayout, Slots<'_>),
    opts: &LayerOptions<'_>,
) -> Result<(), RopeError> {
    rope.apply_layer(
        Qkv::new(&mut b.qkv, TOKENS, sets),
        Dest::Tensor { data: &mut b.q, view: q_view },
        Dest::Cache { data: &mut b.k, layout: k_layout, slots: k_slots },
        Dest::Cache { data: &mut b.v, layout: v_layout, slots: v_slots },
        opts,
    )
}

pub(super) const SETS: [HeadSet; 3] = HeadSet::qkv_rows(4, 2, HD);
pub(super) const QV: View = View::token_major(TOKENS, 4, HD);
const KL: CacheLayout = CacheLayout::nhd(4, 4, 2, HD);
const VL: CacheLayout = CacheLayout::nhd(4, 4, 2, HD / 32);
const MAP: [i64; 3] = [5, 2, 9];

#[test]
fn a_good_call_writes() {
    let rope = Rope::new(RopeConfig::new(HD, 10_000.0)).unwrap();
    let mut b = bufs();
    let opts = LayerOptions::default();
    layer(&rope, &mut b, SETS, QV, (KL, Slots::Mapping(&MAP)), (VL, Slots::Mapping(&MAP)), &opts).unwrap();
    assert_ne!(keys(&b.k), keys(&bufs().k));
}

#[test]
fn errors_write_nothing() {
    let m = || (KL, Slots::Mapping(&MAP));
    let mv = || (VL, Slots::Mapping(&MAP));
    let d = LayerOptions::default();
    // 1. Sets against the buffer.
    let mut sets = SETS;
    sets[2].offset += 1;
    expect_err(
        RopeError::BufferTooShort { operand: Operand::V, needed: TOKENS * 8 * HD + 1, len: TOKENS * 8 * HD },
        |r, b| layer(r, b, sets, QV, m(), mv(), &d),
    );
    let mut sets = SETS;
    sets[1].head_stride = 10;
    expect_err(RopeError::OverlappingStrides { operand: Operand::K }, |r, b| {
        layer(r, b, sets, QV, m(), mv(), &d)
    });
    let mut sets = SETS;
    sets[0].token_stride = usize::MAX / 2;
    expect_err(RopeError::StrideOverflow { operand: Operand::Q }, |r, b| {
        layer(r, b, sets, QV, m(), mv(), &d)
    });
    // 2. Overlap: k over v (k's heads shifted by one head into v's).
    let mut sets = SETS;
    sets[1].offset += HD;
    expect_err(RopeError::OverlappingHeadSets { a: Operand::K, b: Operand::V }, |r, b| {
        layer(r, b, sets, QV, m(), mv(), &d)
    });
    let mut sets = SETS;
    sets[0].heads = 5;
    let qv5 = View::token_major(TOKENS, 5, HD);
    expect_err(RopeError::OverlappingHeadSets { a: Operand::Q, b: Operand::K }, |r, b| {
        layer(r, b, sets, qv5, m(), mv(), &d)
    });
    // 3. In place into another type; q8_0 with a partial block; destination shapes.
    expect_err(RopeError::UnsupportedTypePair { operand: Operand::QOut }, |r, b| {
        r.apply_layer(
            Qkv::new(&mut b.qkv, TOKENS, SETS),
            Dest::<f16>::InPlace,
            Dest::<f32>::Skip,
            Dest::<f32>::Skip,
            &d,
        )
    });
    expect_err(RopeError::PartialQuantBlock { operand: Operand::KOut, head_dim: 48 }, |_, b| {
        let rope = Rope::new(RopeConfig::new(48, 10_000.0)).unwrap();
        rope.apply_layer(
            Qkv::new(&mut b.qkv, TOKENS, HeadSet::qkv_rows(4, 2, 48)),
            Dest::<f32>::InPlace,
            Dest::Cache { data: &mut b.v, layout: CacheLayout::nhd(4, 4, 2, 1), slots: Slots::Mapping(&MAP) },
            Dest::<f32>::Skip,
            &d,
        )
    });
    let qv_short = View::token_major(TOKENS, 4, HD + 1);
    expect_err(
        RopeError::BufferTooShort { operand: Operand::QOut, needed: 3 * 4 * 65 - 1, len: 3 * 4 * 64 },
        |r, b| layer(r, b, SETS, qv_short, m(), mv(), &d),
    );
    expect_err(RopeError::ShapeMismatch { operand: Operand::QOut }, |r, b| {
        layer(r, b, SETS, View::token_major(2, 4, HD), m(), mv(), &d)
    });
    expect_err(RopeError::ShapeMismatch { operand: Operand::QOut }, |r, b| {
        layer(r, b, SETS, View::token_major(3, 3, HD), m(), mv(), &d)
    });
    let big = CacheLayout::nhd(5, 4, 2, HD);
    expect_err(
        RopeError::BufferTooShort { operand: Operand::KOut, needed: 5 * 4 * 2 * HD, len: 16 * 2 * HD },
        |r, b| layer(r, b, SETS, QV, (big, Slots::Mapping(&MAP)), mv(), &d),
    );
    let mut lap = KL;
    lap.slot_stride = HD;
    expect_err(RopeError::OverlappingStrides { operand: Operand::KOut }, |r, b| {
        layer(r, b, SETS, QV, (lap, Slots::Mapping(&MAP)), mv(), &d)
    });
    // 4. The batch.
    for (indptr, reason) in [
        (&[][..], "indptr is empty (it has sequences + 1 entries)"),
        (&[1, 3][..], "indptr[0] is not 0"),
        (&[0, 2, 1, 3][..], "indptr decreases"),
        (&[0, 2][..], "indptr does not end at the call's token count"),
    ] {
        let start = vec![0; indptr.len().saturating_sub(1)];
        let o = LayerOptions::batch(Batch::Ragged { indptr, start: &start });
        expect_err(RopeError::InvalidIndptr { reason }, |r, b| layer(r, b, SETS, QV, m(), mv(), &o));
    }
    let o = LayerOptions::batch(Batch::Ragged { indptr: &[0, 1, 3], start: &[0] });
    expect_err(
        RopeError::InvalidIndptr { reason: "start has other than indptr.len() - 1 entries" },
        |r, b| layer(r, b, SETS, QV, m(), mv(), &o),
    );
    let o = LayerOptions::batch(Batch::RaggedIds { indptr: &[0, 1, 3], position_ids: &[0, 1] });
    expect_err(RopeError::PositionCountMismatch { tokens: 3, positions: 2 }, |r, b| {
        layer(r, b, SETS, QV, m(), mv(), &o)
    });
    let o = LayerOptions::batch(Batch::Ragged { indptr: &[0, 1, 3], start: &[0, u32::MAX] });
    expect_err(RopeError::PositionOverflow, |r, b| layer(r, b, SETS, QV, m(), mv(), &o));
    let o = LayerOptions::batch(Batch::Single(Positions::Start(u32::MAX - 1)));
    expect_err(RopeError::PositionOverflow, |r, b| layer(r, b, SETS, QV, m(), mv(), &o));
    // 5. Slots.
    expect_err(RopeError::SlotMappingLength { operand: Operand::KOut, tokens: 3, len: 2 }, |r, b| {
        layer(r, b, SETS, QV, (KL, Slots::Mapping(&[1, 2])), mv(), &d)
    });
    expect_err(
        RopeError::SlotOutOfRange { operand: Operand::KOut, token: 1, slot: 16, slots: 16 },
        |r, b| layer(r, b, SETS, QV, (KL, Slots::Mapping(&[1, 16, 2])), mv(), &d),
    );
    expect_err(
        RopeError::SlotOutOfRange { operand: Operand::VOut, token: 2, slot: -2, slots: 16 },
        |r, b| layer(r, b, SETS, QV, m(), (VL, Slots::Mapping(&[1, 3, -2])), &d),
    );
    expect_err(RopeError::DuplicateSlot { operand: Operand::KOut, token: 2, slot: 5 }, |r, b| {
        layer(r, b, SETS, QV, (KL, Slots::Mapping(&[5, 1, 5])), mv(), &d)
    });
    expect_err(RopeError::DuplicateSlot { operand: Operand::VOut, token: 1, slot: 7 }, |r, b| {
        layer(r, b, SETS, QV, m(), (VL, Slots::Mapping(&[7, 7, -1])), &d)
    });
    // Skipped tokens never collide.
    let rope = Rope::new(RopeConfig::new(HD, 10_000.0)).unwrap();
    layer(&rope, &mut bufs(), SETS, QV, (KL, Slots::Mapping(&[-1, 4, -1])), mv(), &d).unwrap();
    let o = LayerOptions::batch(Batch::Single(Positions::Start(14)));
    expect_err(
        RopeError::SlotOutOfRange { operand: Operand::KOut, token: 2, slot: 16, slots: 16 },
        |r, b| layer(r, b, SETS, QV, (KL, Slots::Positions), mv(), &o),
    );
    // Two sequences of two blocks each; sequence 1's positions 7, 8 need its block 2.
    let bt = [0u32, 1, 2, 3];
    let o = LayerOptions::batch(Batch::Ragged { indptr: &[0, 1, 3], start: &[0, 7] });
    let slots = Slots::BlockTable { block_table: &bt, blocks_per_seq: 2 };
    expect_err(RopeError::BlockTableTooShort { operand: Operand::KOut, sequence: 1, position: 8 }, |r, b| {
        layer(r, b, SETS, QV, (KL, slots), mv(), &o)
    });
    // blocks_per_seq 3 but a table of 4 entries: position 7 of sequence 1 reads entry 3 + 1.
    let slots = Slots::BlockTable { block_table: &bt, blocks_per_seq: 3 };
    expect_err(RopeError::BlockTableTooShort { operand: Operand::KOut, sequence: 1, position: 7 }, |r, b| {
        layer(r, b, SETS, QV, (KL, slots), mv(), &o)
    });
    let bt = [0u32, 4, 2, 3];
    let slots = Slots::BlockTable { block_table: &bt, blocks_per_seq: 2 };
    let o = LayerOptions::batch(Batch::Ragged { indptr: &[0, 1, 3], start: &[4, 2] });
    expect_err(
        RopeError::BlockOutOfRange { operand: Operand::KOut, token: 0, block: 4, num_blocks: 4 },
        |r, b| layer(r, b, SETS, QV, (KL, slots), mv(), &o),
    );
    // Two sequences sharing a block: a duplicate found by the quadratic pass.
    let bt = [3u32, 1, 0, 3];
    let slots = Slots::BlockTable { block_table: &bt, blocks_per_seq: 2 };
    let o = LayerOptions::batch(Batch::Ragged { indptr: &[0, 1, 3], start: &[1, 5] });
    expect_err(RopeError::DuplicateSlot { operand: Operand::KOut, token: 1, slot: 13 }, |r, b| {
        layer(r, b, SETS, QV, (KL, slots), mv(), &o)
    });
    let zero = CacheLayout::nhd(0, 0, 2, HD);
    expect_err(RopeError::InvalidBlockSize { operand: Operand::KOut }, |r, b| {
        layer(r, b, SETS, QV, (zero, Slots::BlockTable { block_table: &[0], blocks_per_seq: 1 }), mv(), &d)
    });
    // 6. The table.
    let rope = Rope::new(RopeConfig::new(HD, 10_000.0)).unwrap();
    let (mut cos, mut sin) = (vec![0.0; 2 * 32], vec![0.0; 2 * 32]);
    rope.fill_table(0, &mut cos, &mut sin).unwrap();
    let o = LayerOptions::default().with_table(CosSinTable::new(&cos, &sin, 32).unwrap());
    expect_err(RopeError::PositionOutOfRange { position: 2, rows: 2 }, |r, b| {
        layer(r, b, SETS, QV, m(), mv(), &o)
    });
    let o = LayerOptions::default().with_table(CosSinTable::new(&cos, &sin, 16).unwrap());
    expect_err(RopeError::TableShape, |r, b| layer(r, b, SETS, QV, m(), mv(), &o));
}

/// Zero tokens is an `Ok` no-op; an empty ragged batch too.
#[test]
fn empty_calls() {
    let rope = Rope::new(RopeConfig::new(HD, 10_000.0)).unwrap();
    let mut b = bufs();
    rope.apply_layer(
        Qkv::new(&mut b.qkv, 0, SETS),
        Dest::<f32>::InPlace,
        Dest::Cache { data: &mut b.k, layout: KL, slots: Slots::Mapping(&[]) },
        Dest::<f32>::Skip,
        &LayerOptions::batch(Batch::Ragged { indptr: &[0, 0, 0], start: &[5, 6] }),
    )
    .unwrap();
    assert_eq!(in_bits(&b.qkv), in_bits(&bufs().qkv));
    assert_eq!(keys(&b.k), keys(&bufs().k));
}

/// `apply_head_sets` equals `apply_qk` on two separate tensors (the fused buffer split).
#[test]
fn head_sets_equal_apply_qk() {
    let rope = Rope::new(RopeConfig::new(HD, 500_000.0)).unwrap();
    let [q, k, _] = HeadSet::qkv_rows(4, 2, HD);
    let mut fused: Vec<f32> = bufs().qkv;
    let mut qt: Vec<f32> =
        (0..TOKENS).flat_map(|t| fused[t * 8 * HD..t * 8 * HD + 4 * HD].to_vec()).collect();
    let mut kt: Vec<f32> =
        (0..TOKENS).flat_map(|t| fused[t * 8 * HD + 4 * HD..t * 8 * HD + 6 * HD].to_vec()).collect();
    let opts = ApplyOptions::start(1000);
    rope.apply_head_sets(&mut fused, TOKENS, q, Some(k), &opts).unwrap();
    rope.apply_qk(
        HeadsMut::new(&mut qt, View::token_major(TOKENS, 4, HD)),
        Some(HeadsMut::new(&mut kt, View::token_major(TOKENS, 2, HD))),
        &opts,
    )
    .unwrap();
    for t in 0..TOKENS {
        assert_eq!(
            in_bits(&fused[t * 8 * HD..t * 8 * HD + 4 * HD]),
            in_bits(&qt[t * 4 * HD..(t + 1) * 4 * HD])
        );
        assert_eq!(
            in_bits(&fused[t * 8 * HD + 4 * HD..t * 8 * HD + 6 * HD]),
            in_bits(&kt[t * 2 * HD..(t + 1) * 2 * HD])
        );
    }
}
