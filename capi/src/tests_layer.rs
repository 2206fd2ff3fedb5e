//! `rope_apply_layer` from Rust (issue 17): the Rust API's bytes for typed combinations of
//! input and output dtypes, destinations and batches; refused calls write nothing. Small
//! enough for Miri (`.ci/stages/20-miri.sh` runs this crate's unit tests), which checks the
//! boundary's raw slices (the typed views of `void *` buffers, q8_0 blocks included).

use core::ffi::c_void;
use core::mem::size_of;
use core::ptr::{null, null_mut};
use std::vec;
use std::vec::Vec;

use rope_kernels::{
    bf16, f16, Batch, BlockQ8_0, CacheElement, CacheLayout, Dest, Element, HeadSet, LayerOptions, Positions,
    Qkv, Rope, RopeConfig, Slots, View,
};

use crate::tests::{cases, rng, Draw, TestRng};
use crate::*;
use rand::Rng as _;

const HD: usize = 32;
const HQ: usize = 2;
const HKV: usize = 1;

/// An element type with its dtype tag.
trait Tag: Copy + 'static {
    const TAG: rope_dtype;
    fn random(rng: &mut TestRng) -> Self;
}
impl Tag for f32 {
    const TAG: rope_dtype = ROPE_DTYPE_F32;
    fn random(rng: &mut TestRng) -> Self {
        rng.unit()
    }
}
impl Tag for f16 {
    const TAG: rope_dtype = ROPE_DTYPE_F16;
    fn random(rng: &mut TestRng) -> Self {
        f16::from_f32(rng.unit())
    }
}
impl Tag for bf16 {
    const TAG: rope_dtype = ROPE_DTYPE_BF16;
    fn random(rng: &mut TestRng) -> Self {
        bf16::from_f32(rng.unit())
    }
}
impl Tag for BlockQ8_0 {
    const TAG: rope_dtype = ROPE_DTYPE_Q8_0;
    fn random(rng: &mut TestRng) -> Self {
        BlockQ8_0 { d: f16::from_bits(rng.next_u64() as u16), qs: [rng.next_u64() as i8; 32] }
    }
}

/// One destination of a case: its form, and the buffer it writes.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Form {
    Skip,
    InPlace,
    Tensor,
    /// Cache by `slot_mapping` (with a -1), by a paged block table, or by position.
    Mapping,
    Paged,
    Positions,
}

/// The slots of the cache forms: 4 blocks of 4.
const NB: usize = 4;
const BS: usize = 4;

struct Out<O> {
    form: Form,
    data: Vec<O>,
    view: View,
    layout: CacheLayout,
}

impl<O: Tag> Out<O> {
    fn new(form: Form, tokens: usize, heads: usize, rng: &mut TestRng) -> Self {
        let hl = if O::TAG == ROPE_DTYPE_Q8_0 { HD / 32 } else { HD };
        let view = View::token_major(tokens, heads, hl);
        let layout = if rng.below(2) == 0 {
            CacheLayout::nhd(NB, BS, heads, hl)
        } else {
            CacheLayout::hnd(NB, BS, heads, hl)
        };
        let n = match form {
            Form::Tensor => tokens * heads * hl,
            Form::Mapping | Form::Paged | Form::Positions => NB * BS * heads * hl,
            _ => 0,
        };
        Out { form, data: (0..n).map(|_| O::random(rng)).collect(), view, layout }
    }

    fn rust<'a>(&'a mut self, slots: Slots<'a>) -> Dest<'a, O> {
        match self.form {
            Form::Skip => Dest::Skip,
            Form::InPlace => Dest::InPlace,
            Form::Tensor => Dest::Tensor { data: &mut self.data, view: self.view },
            _ => Dest::Cache { data: &mut self.data, layout: self.layout, slots },
        }
    }

    fn c(&mut self, mapping: &[i64], table: &[u32], bps: usize) -> rope_dest {
        let kind = match self.form {
            Form::Skip => ROPE_DEST_SKIP,
            Form::InPlace => ROPE_DEST_IN_PLACE,
            Form::Tensor => ROPE_DEST_TENSOR,
            _ => ROPE_DEST_CACHE,
        };
        let l = self.layout;
        let slots = match self.form {
            Form::Paged => ROPE_SLOTS_BLOCK_TABLE,
            Form::Positions => ROPE_SLOTS_POSITIONS,
            _ => ROPE_SLOTS_MAPPING,
        };
        rope_dest {
            kind,
            dtype: O::TAG,
            data: self.data.as_mut_ptr().cast::<c_void>(),
            len: self.data.len(),
            view: rope_view {
                tokens: self.view.tokens,
                heads: self.view.heads,
                token_stride: self.view.token_stride,
                head_stride: self.view.head_stride,
            },
            cache: rope_cache_layout {
                num_blocks: l.num_blocks,
                block_size: l.block_size,
                block_stride: l.block_stride,
                slot_stride: l.slot_stride,
                head_stride: l.head_stride,
            },
            slots,
            slot_mapping: mapping.as_ptr(),
            slot_mapping_len: mapping.len(),
            block_table: table.as_ptr(),
            block_table_len: table.len(),
            blocks_per_seq: bps,
        }
    }
}

/// Bytes of plain values (no padding: f32, f16, bf16, `BlockQ8_0`).
fn bytes<T>(v: &[T]) -> Vec<u8> {
    // SAFETY: the element types here have no padding; the slice is initialized.
    unsafe { core::slice::from_raw_parts(v.as_ptr().cast::<u8>(), core::mem::size_of_val(v)) }.to_vec()
}

/// One random case of `I` in, `Q`, `K`, `V` out: the C call against the Rust call on
/// copies, bit for bit (status and every buffer).
fn case<I: Element + Tag, Q: CacheElement + Tag, K: CacheElement + Tag, V: CacheElement + Tag>(
    rope: &Rope,
    handle: *const rope_t,
    forms: [Form; 3],
    rng: &mut TestRng,
) -> bool {
    let tokens = 1 + rng.below(3) as usize;
    let ragged = forms.contains(&Form::Paged) || rng.below(2) == 0;
    let sets = if rng.below(2) == 0 { HeadSet::qkv_rows(HQ, HKV, HD) } else { HeadSet::neox_qkv(HQ, HD) };
    let heads = [sets[0].heads, sets[1].heads, sets[2].heads];
    let row = sets[0].token_stride;
    let mut qkv: Vec<I> = (0..tokens * row).map(|_| I::random(rng)).collect();
    let mut q = Out::<Q>::new(forms[0], tokens, heads[0], rng);
    let mut k = Out::<K>::new(forms[1], tokens, heads[1], rng);
    let mut v = Out::<V>::new(forms[2], tokens, heads[2], rng);
    // Two sequences when ragged: tokens 0..1 and 1..tokens.
    let indptr = [0, 1, tokens as u32];
    let start = [rng.below(5) as u32, 6 + rng.below(5) as u32];
    let positions: Vec<u32> = (0..tokens)
        .map(|t| {
            if ragged {
                if t == 0 {
                    start[0]
                } else {
                    start[1] + t as u32 - 1
                }
            } else {
                3 + t as u32
            }
        })
        .collect();
    // Distinct slots (a -1 for the first token); sequence 0 in blocks 3, 1, sequence 1 in 2, 0.
    let mapping: Vec<i64> = (0..tokens).map(|t| if t == 0 { -1 } else { (5 * t) as i64 % 16 }).collect();
    let (table, bps) = ([3u32, 1, 0, 0, 0, 2, 0, 0], 4);
    let batch = if ragged {
        Batch::Ragged { indptr: &indptr, start: &start }
    } else {
        Batch::Single(Positions::Start(3))
    };
    let opts = LayerOptions::batch(batch);

    // The Rust call on copies.
    let slots = |f: Form| match f {
        Form::Paged => Slots::BlockTable { block_table: &table, blocks_per_seq: bps },
        Form::Positions => Slots::Positions,
        _ => Slots::Mapping(&mapping),
    };
    let mut x = qkv.clone();
    let want = {
        let mut q2 = Out { form: q.form, data: q.data.clone(), view: q.view, layout: q.layout };
        let mut k2 = Out { form: k.form, data: k.data.clone(), view: k.view, layout: k.layout };
        let mut v2 = Out { form: v.form, data: v.data.clone(), view: v.view, layout: v.layout };
        let r = rope.apply_layer(
            Qkv::new(&mut x, tokens, sets),
            q2.rust(slots(q.form)),
            k2.rust(slots(k.form)),
            v2.rust(slots(v.form)),
            &opts,
        );
        (r, q2.data, k2.data, v2.data)
    };

    // The C call.
    let c_set = |s: HeadSet| rope_head_set {
        offset: s.offset,
        heads: s.heads,
        token_stride: s.token_stride,
        head_stride: s.head_stride,
    };
    let args = rope_layer_args {
        struct_size: size_of::<rope_layer_args>(),
        qkv_dtype: <I as Tag>::TAG,
        qkv: qkv.as_mut_ptr().cast(),
        qkv_len: qkv.len(),
        tokens,
        q_set: c_set(sets[0]),
        k_set: c_set(sets[1]),
        v_set: c_set(sets[2]),
        q: q.c(&mapping, &table, bps),
        k: k.c(&mapping, &table, bps),
        v: v.c(&mapping, &table, bps),
        batch: if ragged { ROPE_BATCH_RAGGED } else { ROPE_BATCH_SINGLE },
        position_mode: ROPE_POSITIONS_START,
        start: 3,
        position_ids: null(),
        position_ids_len: 0,
        indptr: indptr.as_ptr(),
        indptr_len: 3,
        seq_start: start.as_ptr(),
        seq_start_len: 2,
        cos_sin: ROPE_COS_SIN_ON_THE_FLY,
        cos: null(),
        sin: null(),
        table_len: 0,
        direction: ROPE_FORWARD,
    };
    let (q0, k0, v0, x0) = (bytes(&q.data), bytes(&k.data), bytes(&v.data), bytes(&qkv));
    // SAFETY: a live handle; every buffer of `args` is a live Vec of its count.
    let s = unsafe { rope_apply_layer(handle, &args) };
    let what = (<I as Tag>::TAG, Q::TAG, K::TAG, V::TAG, forms, tokens, ragged, &positions);
    match want {
        (Ok(()), wq, wk, wv) => {
            assert_eq!(s, ROPE_OK, "{what:?}");
            assert_eq!(bytes(&qkv), bytes(&x), "qkv {what:?}");
            assert_eq!(bytes(&q.data), bytes(&wq), "q {what:?}");
            assert_eq!(bytes(&k.data), bytes(&wk), "k {what:?}");
            assert_eq!(bytes(&v.data), bytes(&wv), "v {what:?}");
            true
        }
        (Err(e), ..) => {
            assert_eq!(s, status::from_error(e), "{what:?}: {e:?}");
            assert_eq!((bytes(&q.data), bytes(&k.data), bytes(&v.data), bytes(&qkv)), (q0, k0, v0, x0));
            false
        }
    }
}

fn handle(rope_cfg: &RopeConfig) -> (*mut rope_t, Rope<'static>) {
    let mut c = core::mem::MaybeUninit::<rope_config>::uninit();
    // SAFETY: writable storage of a whole `rope_config`.
    assert_eq!(unsafe { rope_config_init(c.as_mut_ptr(), size_of::<rope_config>(), HD, 10_000.0) }, ROPE_OK);
    // SAFETY: initialized by `rope_config_init`.
    let c = unsafe { c.assume_init() };
    let mut h = null_mut();
    // SAFETY: valid configuration and out-pointer.
    assert_eq!(unsafe { rope_new(&c, &mut h) }, ROPE_OK);
    (h, Rope::new(rope_cfg.clone()).unwrap())
}

#[test]
fn layer_matches_the_rust_api() {
    let (h, rope) = handle(&RopeConfig::new(HD, 10_000.0));
    let mut rng = rng(0x1A7E_5017);
    use Form::*;
    let pick = |rng: &mut TestRng, in_place: bool| {
        let all = [Skip, Tensor, Mapping, Paged, Positions, InPlace];
        all[rng.below(if in_place { 6 } else { 5 }) as usize]
    };
    let (mut ok, n) = (0, cases(24, 3));
    for _ in 0..n {
        let f = |rng: &mut TestRng| [pick(rng, false), pick(rng, false), pick(rng, false)];
        let [a, b, c] = f(&mut rng);
        ok += usize::from(case::<f32, f32, bf16, BlockQ8_0>(&rope, h, [a, b, c], &mut rng));
        ok +=
            usize::from(case::<bf16, bf16, BlockQ8_0, f16>(&rope, h, [pick(&mut rng, true), b, c], &mut rng));
        ok += usize::from(case::<f16, BlockQ8_0, f16, f32>(&rope, h, [a, pick(&mut rng, true), c], &mut rng));
        assert!(case::<f32, f16, f32, bf16>(&rope, h, [Tensor, InPlace, Paged], &mut rng));
    }
    // Errors come only from the random forms (e.g. a tensor of another shape): rare.
    assert!(ok >= 2 * n, "{ok} of {} random cases succeeded", 3 * n);
    // SAFETY: made by rope_new, not used after.
    assert_eq!(unsafe { rope_free(h) }, ROPE_OK);
}

#[test]
fn layer_refusals_write_nothing() {
    let (h, _) = handle(&RopeConfig::new(HD, 10_000.0));
    let tokens = 2;
    let [qs, ks, vs] = HeadSet::qkv_rows(HQ, HKV, HD);
    let mut qkv = vec![0.5f32; tokens * qs.token_stride];
    let mut kc = vec![BlockQ8_0::default(); NB * BS];
    let mut vc = vec![bf16::ZERO; NB * BS * HD];
    let mapping = [3i64, 7];
    let set = |s: HeadSet| rope_head_set {
        offset: s.offset,
        heads: s.heads,
        token_stride: s.token_stride,
        head_stride: s.head_stride,
    };
    let cache = |dtype, data: *mut c_void, len, hl| rope_dest {
        kind: ROPE_DEST_CACHE,
        dtype,
        data,
        len,
        view: rope_view { tokens: 0, heads: 0, token_stride: 0, head_stride: 0 },
        cache: rope_cache_layout {
            num_blocks: NB,
            block_size: BS,
            block_stride: BS * hl,
            slot_stride: hl,
            head_stride: hl,
        },
        slots: ROPE_SLOTS_MAPPING,
        slot_mapping: mapping.as_ptr(),
        slot_mapping_len: 2,
        block_table: null(),
        block_table_len: 0,
        blocks_per_seq: 0,
    };
    let base = rope_layer_args {
        struct_size: size_of::<rope_layer_args>(),
        qkv_dtype: ROPE_DTYPE_F32,
        qkv: qkv.as_mut_ptr().cast(),
        qkv_len: qkv.len(),
        tokens,
        q_set: set(qs),
        k_set: set(ks),
        v_set: set(vs),
        q: rope_dest { kind: ROPE_DEST_IN_PLACE, ..cache(ROPE_DTYPE_F32, null_mut(), 0, HD) },
        k: cache(ROPE_DTYPE_Q8_0, kc.as_mut_ptr().cast(), kc.len(), 1),
        v: cache(ROPE_DTYPE_BF16, vc.as_mut_ptr().cast(), vc.len(), HD),
        batch: ROPE_BATCH_SINGLE,
        position_mode: ROPE_POSITIONS_START,
        start: 0,
        position_ids: null(),
        position_ids_len: 0,
        indptr: null(),
        indptr_len: 0,
        seq_start: null(),
        seq_start_len: 0,
        cos_sin: ROPE_COS_SIN_ON_THE_FLY,
        cos: null(),
        sin: null(),
        table_len: 0,
        direction: ROPE_FORWARD,
    };
    let snapshot = |qkv: &[f32], kc: &[BlockQ8_0], vc: &[bf16]| (bytes(qkv), bytes(kc), bytes(vc));
    let before = snapshot(&qkv, &kc, &vc);
    let (kp, vp) = (kc.as_mut_ptr(), vc.as_mut_ptr());
    let (dup, short_indptr) = ([3i64, 3], [0u32, 1]);
    let bad: [(rope_layer_args, rope_status); 9] = [
        (rope_layer_args { struct_size: 8, ..base }, ROPE_UNSUPPORTED_STRUCT_SIZE),
        (rope_layer_args { qkv_dtype: ROPE_DTYPE_Q8_0, ..base }, ROPE_UNSUPPORTED_TYPE_PAIR),
        (rope_layer_args { k: rope_dest { dtype: 4, ..base.k }, ..base }, ROPE_UNKNOWN_ENUM),
        (rope_layer_args { v: rope_dest { data: kp.cast(), ..base.v }, ..base }, ROPE_OVERLAPPING_BUFFERS),
        // One byte into the v cache (never dereferenced).
        (
            rope_layer_args {
                v: rope_dest { data: vp.cast::<u8>().wrapping_add(1).cast(), ..base.v },
                ..base
            },
            ROPE_MISALIGNED_POINTER,
        ),
        (rope_layer_args { k_set: set(qs), ..base }, ROPE_OVERLAPPING_HEAD_SETS),
        (
            rope_layer_args { k: rope_dest { slot_mapping_len: 1, ..base.k }, ..base },
            ROPE_SLOT_MAPPING_LENGTH,
        ),
        (
            rope_layer_args { v: rope_dest { slot_mapping: dup.as_ptr(), ..base.v }, ..base },
            ROPE_DUPLICATE_SLOT,
        ),
        (
            rope_layer_args {
                batch: ROPE_BATCH_RAGGED,
                indptr: short_indptr.as_ptr(),
                indptr_len: 2,
                ..base
            },
            ROPE_INVALID_INDPTR,
        ),
    ];
    for (i, (a, want)) in bad.iter().enumerate() {
        // SAFETY: a live handle; every pointer is NULL, a live buffer of its count, or refused.
        let s = unsafe { rope_apply_layer(h, a) };
        assert_eq!(s, *want, "case {i}");
        assert!(snapshot(&qkv, &kc, &vc) == before, "case {i} wrote");
    }
    // Review fixes: v IN_PLACE must have qkv's dtype (as Rust's `Dest::InPlace`).
    let v_in_place = rope_layer_args { v: rope_dest { kind: ROPE_DEST_IN_PLACE, ..base.v }, ..base };
    // SAFETY: a live handle; v in place names no buffer.
    assert_eq!(unsafe { rope_apply_layer(h, &v_in_place) }, ROPE_UNSUPPORTED_TYPE_PAIR);
    assert!(snapshot(&qkv, &kc, &vc) == before, "v in place wrote");
    // Sets of 0 heads with absurd strides (k in place, v into the cache with a huge block
    // stride): not run, no pointer formed, no panic; q alone is rotated, as with k and v
    // skipped.
    let zero = rope_head_set { offset: usize::MAX / 8, heads: 0, token_stride: usize::MAX, head_stride: 0 };
    let huge = rope_cache_layout { block_stride: usize::MAX, ..base.v.cache };
    let zero_heads = rope_layer_args {
        k_set: zero,
        v_set: zero,
        k: rope_dest { kind: ROPE_DEST_IN_PLACE, dtype: ROPE_DTYPE_F32, ..base.k },
        v: rope_dest { cache: huge, ..base.v },
        ..base
    };
    let mut qkv2 = qkv.clone();
    let q_only = rope_layer_args {
        qkv: qkv2.as_mut_ptr().cast(),
        k: rope_dest { kind: ROPE_DEST_SKIP, ..base.k },
        v: rope_dest { kind: ROPE_DEST_SKIP, ..base.v },
        ..base
    };
    // SAFETY: a live handle; live buffers of their counts (a 0-head set touches nothing).
    assert_eq!(unsafe { rope_apply_layer(h, &zero_heads) }, ROPE_OK);
    // SAFETY: as above, on the copy.
    assert_eq!(unsafe { rope_apply_layer(h, &q_only) }, ROPE_OK);
    assert_eq!(bytes(&qkv), bytes(&qkv2));
    assert!(bytes(&vc) == before.2, "0-head v wrote");
    // The valid base call on live buffers, from the original qkv.
    let mut qkv = vec![0.5f32; tokens * qs.token_stride];
    let base = rope_layer_args { qkv: qkv.as_mut_ptr().cast(), ..base };
    // SAFETY: the valid base call on live buffers.
    assert_eq!(unsafe { rope_apply_layer(h, &base) }, ROPE_OK);
    assert!(snapshot(&qkv, &kc, &vc) != before);
    // SAFETY: NULL args, then a live handle's free.
    assert_eq!(unsafe { rope_apply_layer(h, null()) }, ROPE_NULL_POINTER);
    // SAFETY: made by rope_new, not used after.
    assert_eq!(unsafe { rope_free(h) }, ROPE_OK);
}

/// A k set of 0 heads into a paged cache whose layout no buffer bounds: a block-table slot
/// `block * block_size + position % block_size` past `SIZE_MAX` is
/// `ROPE_SLOT_OUT_OF_RANGE` (in a debug build too: not an overflow caught as `ROPE_PANIC`),
/// nothing written; a slot that fits is `ROPE_OK`, q alone rotated.
#[test]
fn layer_zero_head_block_table_slot_past_size_max() {
    let (h, _) = handle(&RopeConfig::new(HD, 10_000.0));
    let [qs, ..] = HeadSet::qkv_rows(HQ, HKV, HD);
    let zero = rope_head_set { offset: 0, heads: 0, token_stride: 0, head_stride: 0 };
    let set = rope_head_set {
        offset: qs.offset,
        heads: qs.heads,
        token_stride: qs.token_stride,
        head_stride: qs.head_stride,
    };
    let fresh = || -> Vec<f32> { (0..qs.token_stride).map(|i| (i % 13) as f32 * 0.125 - 0.75).collect() };
    let mut kc = vec![f32::from_bits(0xDEAD_BEEF); 4];
    let canaries = bytes(&kc);
    // 8 blocks of 2^(bits - 2) slots: the slot count saturates at `SIZE_MAX`.
    let cache = rope_cache_layout {
        num_blocks: 8,
        block_size: 1 << (usize::BITS - 2),
        block_stride: 0,
        slot_stride: 0,
        head_stride: 0,
    };
    let none = rope_dest {
        kind: ROPE_DEST_SKIP,
        dtype: ROPE_DTYPE_F32,
        data: null_mut(),
        len: 0,
        view: rope_view { tokens: 0, heads: 0, token_stride: 0, head_stride: 0 },
        cache,
        slots: ROPE_SLOTS_MAPPING,
        slot_mapping: null(),
        slot_mapping_len: 0,
        block_table: null(),
        block_table_len: 0,
        blocks_per_seq: 0,
    };
    let run = |block: u32, qkv: &mut [f32], kc: &mut [f32], k_on: bool| {
        let table = [block];
        let args = rope_layer_args {
            struct_size: size_of::<rope_layer_args>(),
            qkv_dtype: ROPE_DTYPE_F32,
            qkv: qkv.as_mut_ptr().cast(),
            qkv_len: qkv.len(),
            tokens: 1,
            q_set: set,
            k_set: zero,
            v_set: zero,
            q: rope_dest { kind: ROPE_DEST_IN_PLACE, ..none },
            k: rope_dest {
                kind: if k_on { ROPE_DEST_CACHE } else { ROPE_DEST_SKIP },
                data: kc.as_mut_ptr().cast(),
                len: kc.len(),
                slots: ROPE_SLOTS_BLOCK_TABLE,
                block_table: table.as_ptr(),
                block_table_len: 1,
                blocks_per_seq: 1,
                ..none
            },
            v: none,
            batch: ROPE_BATCH_SINGLE,
            position_mode: ROPE_POSITIONS_START,
            start: 5,
            position_ids: null(),
            position_ids_len: 0,
            indptr: null(),
            indptr_len: 0,
            seq_start: null(),
            seq_start_len: 0,
            cos_sin: ROPE_COS_SIN_ON_THE_FLY,
            cos: null(),
            sin: null(),
            table_len: 0,
            direction: ROPE_FORWARD,
        };
        // SAFETY: a live handle; every pointer is NULL with a count of 0 or a live buffer of
        // its count (a 0-head set touches nothing).
        unsafe { rope_apply_layer(h, &args) }
    };
    // 4 (or 7) * 2^(bits - 2) + 5 is past `SIZE_MAX`.
    for block in [4u32, 7] {
        let mut qkv = fresh();
        assert_eq!(run(block, &mut qkv, &mut kc, true), ROPE_SLOT_OUT_OF_RANGE, "block {block}");
        assert_eq!(bytes(&qkv), bytes(&fresh()), "qkv written, block {block}");
        assert!(bytes(&kc) == canaries, "cache written, block {block}");
    }
    // 3 * 2^(bits - 2) + 5 fits: q alone rotated, as with k skipped.
    let (mut qkv, mut want) = (fresh(), fresh());
    assert_eq!(run(3, &mut qkv, &mut kc, true), ROPE_OK);
    assert_eq!(run(3, &mut want, &mut kc, false), ROPE_OK);
    assert_eq!(bytes(&qkv), bytes(&want));
    assert_ne!(bytes(&qkv), bytes(&fresh()));
    assert!(bytes(&kc) == canaries, "0-head k wrote");
    // SAFETY: made by rope_new, not used after.
    assert_eq!(unsafe { rope_free(h) }, ROPE_OK);
}
