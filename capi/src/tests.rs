//! Rust-side tests of the exported functions: the C ABI gives the Rust API's results bit
//! for bit on random configurations and tensors, every status has a name, hostile input
//! never panics and a failing call writes nothing. (`tests/c_program.rs` drives the same
//! ABI from C.)

use core::ffi::CStr;
use core::ptr::{null, null_mut};
use std::vec;
use std::vec::Vec;

use rope_kernels::dispatch::ALL_TIERS;
use rope_kernels::{
    bf16, f16, AngleMode, ApplyOptions, CosSinTable, Element, Heads, HeadsMut, LongRopeParams, Operand,
    PairLayout, Rope, RopeConfig, RopeError, Scaling, View, YarnParams,
};

use crate::*;
use rand::Rng as _;

/// The workspace's test support (`tests/support/`): the seeded generator.
#[path = "../../tests/support/mod.rs"]
pub(crate) mod support;

pub(crate) use support::rng::{rng, Draw, TestRng};

mod boundary;

/// The number of random cases of a test: `native`, or `miri` under Miri. Miri interprets
/// every step (thousands of times slower); there the tests look for undefined behaviour
/// at the boundary (Stacked Borrows, alignment, out-of-bounds reads and writes), which a
/// few dozen cases of each call reach, not for every outcome of every call.
pub(crate) const fn cases(native: usize, miri: usize) -> usize {
    if cfg!(miri) {
        miri
    } else {
        native
    }
}

pub(crate) fn cstr(p: *const core::ffi::c_char) -> &'static str {
    // SAFETY: the library returns static NUL-terminated strings.
    unsafe { CStr::from_ptr(p) }.to_str().unwrap()
}

#[test]
fn statuses_are_unique_named_and_described() {
    let mut prev = -1;
    for s in ALL_STATUSES {
        assert!(s > prev, "ALL_STATUSES not strictly increasing at {s}");
        prev = s;
        let (name, msg) = describe(s).expect("every status is described");
        assert!(name.starts_with("ROPE_") && name.ends_with('\0') && msg.ends_with('\0'));
        assert_eq!(cstr(rope_status_name(s)), &name[..name.len() - 1]);
        assert_eq!(cstr(rope_status_str(s)), &msg[..msg.len() - 1]);
    }
    for v in -100..300 {
        if !ALL_STATUSES.contains(&v) {
            assert!(describe(v).is_none());
            assert_eq!(cstr(rope_status_str(v)), "unknown rope_status");
            assert_eq!(cstr(rope_status_name(v)), "ROPE_UNKNOWN_STATUS");
        }
    }
    assert_eq!(cstr(rope_status_name(ROPE_PANIC)), "ROPE_PANIC");
    assert_eq!(cstr(rope_status_name(i32::MIN)), "ROPE_UNKNOWN_STATUS");
}

#[test]
fn every_rope_error_kind_has_its_status() {
    let q = Operand::Q;
    let cases = [
        (RopeError::ZeroHeadDim, ROPE_ZERO_HEAD_DIM),
        (RopeError::InvalidRotaryDim { rotary_dim: 3 }, ROPE_INVALID_ROTARY_DIM),
        (RopeError::RotaryDimExceedsHeadDim { rotary_dim: 4, head_dim: 2 }, ROPE_ROTARY_DIM_EXCEEDS_HEAD_DIM),
        (RopeError::RotaryDimTooLarge { rotary_dim: 1024, max: 512 }, ROPE_ROTARY_DIM_TOO_LARGE),
        (RopeError::InvalidTheta, ROPE_INVALID_THETA),
        (RopeError::InvalidScalingParameter { name: "factor" }, ROPE_INVALID_SCALING_PARAMETER),
        (RopeError::InvFreqLength { expected: 2, len: 1 }, ROPE_INV_FREQ_LENGTH),
        (RopeError::OverlappingStrides { operand: q }, ROPE_OVERLAPPING_STRIDES),
        (RopeError::StrideOverflow { operand: q }, ROPE_STRIDE_OVERFLOW),
        (RopeError::BufferTooShort { operand: q, needed: 2, len: 1 }, ROPE_BUFFER_TOO_SMALL),
        (RopeError::ShapeMismatch { operand: q }, ROPE_SHAPE_MISMATCH),
        (RopeError::PositionCountMismatch { tokens: 2, positions: 1 }, ROPE_POSITION_COUNT_MISMATCH),
        (RopeError::PositionOverflow, ROPE_POSITION_OVERFLOW),
        (RopeError::OutOfMemory { bytes: 1 << 40 }, ROPE_OUT_OF_MEMORY),
        (RopeError::PositionOutOfRange { position: 3, rows: 2 }, ROPE_POSITION_OUT_OF_RANGE),
        (RopeError::TableShape, ROPE_TABLE_SHAPE),
        (RopeError::TierUnavailable, ROPE_TIER_UNAVAILABLE),
        (
            RopeError::InvalidEncodingParameter { name: "dim", requirement: "must be > 0" },
            ROPE_INVALID_ENCODING_PARAMETER,
        ),
        (
            RopeError::EncodingBufferTooShort { buffer: "x", needed: 2, len: 1 },
            ROPE_ENCODING_BUFFER_TOO_SHORT,
        ),
        (RopeError::RowStrideTooSmall { buffer: "x", row_stride: 1, row_len: 2 }, ROPE_ROW_STRIDE_TOO_SMALL),
        (RopeError::EncodingSizeOverflow { buffer: "x" }, ROPE_ENCODING_SIZE_OVERFLOW),
        (RopeError::RaggedTable { len: 3, row_len: 2 }, ROPE_RAGGED_TABLE),
        (RopeError::BeyondTrainedLength { position: 2, max_positions: 2 }, ROPE_BEYOND_TRAINED_LENGTH),
        (RopeError::RelativeIndexOverflow { relative_position: -5 }, ROPE_RELATIVE_INDEX_OVERFLOW),
        (RopeError::InvalidMropeSection { mrope_section: [1, 2, 3], pairs: 4 }, ROPE_INVALID_MROPE_SECTION),
        (RopeError::UnsupportedScaling { operation: "mrope", scaling: "dynamic" }, ROPE_UNSUPPORTED_SCALING),
        (RopeError::InvalidPositionLayout { reason: "x" }, ROPE_INVALID_POSITION_LAYOUT),
        (RopeError::NormWeightLength { operand: q, expected: 2, len: 1 }, ROPE_NORM_WEIGHT_LENGTH),
        (RopeError::InvalidNormEps, ROPE_INVALID_NORM_EPS),
        (RopeError::OverlappingHeadSets { a: q, b: Operand::K }, ROPE_OVERLAPPING_HEAD_SETS),
        (RopeError::UnsupportedTypePair { operand: Operand::QOut }, ROPE_UNSUPPORTED_TYPE_PAIR),
        (RopeError::PartialQuantBlock { operand: Operand::KOut, head_dim: 48 }, ROPE_PARTIAL_QUANT_BLOCK),
        (RopeError::InvalidIndptr { reason: "x" }, ROPE_INVALID_INDPTR),
        (
            RopeError::SlotMappingLength { operand: Operand::KOut, tokens: 2, len: 1 },
            ROPE_SLOT_MAPPING_LENGTH,
        ),
        (
            RopeError::SlotOutOfRange { operand: Operand::KOut, token: 0, slot: -2, slots: 4 },
            ROPE_SLOT_OUT_OF_RANGE,
        ),
        (
            RopeError::BlockOutOfRange { operand: Operand::VOut, token: 0, block: 9, num_blocks: 4 },
            ROPE_BLOCK_OUT_OF_RANGE,
        ),
        (
            RopeError::BlockTableTooShort { operand: Operand::KOut, sequence: 1, position: 40 },
            ROPE_BLOCK_TABLE_TOO_SHORT,
        ),
        (RopeError::DuplicateSlot { operand: Operand::KOut, token: 1, slot: 3 }, ROPE_DUPLICATE_SLOT),
        (RopeError::InvalidBlockSize { operand: Operand::VOut }, ROPE_INVALID_BLOCK_SIZE),
    ];
    for (e, s) in cases {
        assert_eq!(status::from_error(e), s, "{e:?}");
    }
    // Each kind has its own status.
    for (i, (_, a)) in cases.iter().enumerate() {
        assert!(cases[i + 1..].iter().all(|(_, b)| a != b), "status {a} shared");
    }
    assert!(cstr(rope_status_str(ROPE_BEYOND_TRAINED_LENGTH))
        .contains("cannot extrapolate beyond its trained length"));
}

#[test]
fn tier_constants_are_the_rust_tiers() {
    let consts = [ROPE_TIER_SCALAR, ROPE_TIER_PORTABLE, ROPE_TIER_NEON, ROPE_TIER_AVX2, ROPE_TIER_AVX512];
    assert_eq!(ALL_TIERS.len(), consts.len(), "a tier was added: give it a ROPE_TIER_* constant");
    for (t, c) in ALL_TIERS.into_iter().zip(consts) {
        assert_eq!(t as u32, c);
        assert_eq!(cstr(rope_tier_name(c)), t.name());
    }
    assert_eq!(cstr(rope_tier_name(0)), "unknown");
    let mut mask = 0;
    // SAFETY: a valid out-pointer.
    assert_eq!(unsafe { rope_tiers_available(&mut mask) }, ROPE_OK);
    let rust_mask = rope_kernels::dispatch::available_tiers().fold(0, |m, t| m | 1 << t as u32);
    assert_eq!(mask, rust_mask);
}

/// A configuration as both the C struct and the Rust value, with the arrays the C struct
/// points to.
struct Case {
    c: rope_config,
    rust: RopeConfig,
    _arrays: [Vec<f64>; 3],
}

fn random_case(rng: &mut TestRng) -> Case {
    let head_dim = 2 * (1 + rng.below(40) as usize) + rng.below(2) as usize;
    let rotary_dim = 2 * (1 + rng.below((head_dim / 2) as u64) as usize);
    let pairs = rotary_dim / 2;
    let theta = rng.pick(&[10_000.0, 500_000.0, 1_000_000.0, 1.5]);
    let mut c = core::mem::MaybeUninit::<rope_config>::uninit();
    // SAFETY: writable storage of a whole `rope_config`.
    let s = unsafe { rope_config_init(c.as_mut_ptr(), size_of::<rope_config>(), head_dim, theta) };
    assert_eq!(s, ROPE_OK);
    // SAFETY: `rope_config_init` returned ROPE_OK, so it wrote every field.
    let mut c = unsafe { c.assume_init() };
    c.rotary_dim = rotary_dim;
    let layout = rng.pick(&[PairLayout::HalfSplit, PairLayout::Interleaved]);
    c.layout = if layout == PairLayout::HalfSplit { ROPE_LAYOUT_HALF_SPLIT } else { ROPE_LAYOUT_INTERLEAVED };
    let hf = rng.below(2) == 1;
    c.angle_mode = if hf { ROPE_ANGLE_HF_COMPATIBLE } else { ROPE_ANGLE_EXACT };
    let factors =
        |rng: &mut TestRng| (0..pairs).map(|_| 1.0 + rng.below(64) as f64 / 8.0).collect::<Vec<f64>>();
    let (a0, a1, a2) = (factors(rng), factors(rng), factors(rng));
    let s = &mut c.scaling;
    let factor = rng.pick(&[0.5, 1.0, 4.0, 8.0, 32.0]);
    let orig = rng.pick(&[4u64, 64, 4096, 8192]);
    let scaling = match rng.below(9) as u32 {
        ROPE_SCALING_LINEAR => {
            (s.rope_type, s.factor) = (ROPE_SCALING_LINEAR, factor);
            Scaling::Linear { factor }
        }
        ROPE_SCALING_DYNAMIC if rotary_dim > 2 => {
            (s.rope_type, s.factor, s.max_position_embeddings) = (ROPE_SCALING_DYNAMIC, factor, orig);
            Scaling::DynamicNtk { factor, max_position_embeddings: orig }
        }
        ROPE_SCALING_NTK_ALPHA if rotary_dim > 2 => {
            (s.rope_type, s.alpha) = (ROPE_SCALING_NTK_ALPHA, factor);
            Scaling::NtkAlpha { alpha: factor }
        }
        ROPE_SCALING_YARN if theta != 1.5 => {
            (s.rope_type, s.factor, s.original_max_position_embeddings) = (ROPE_SCALING_YARN, factor, orig);
            let mut p = YarnParams::new(factor, orig).with_beta(16.0, 2.0);
            (s.beta_fast, s.beta_slow) = (16.0, 2.0);
            if rng.below(2) == 1 {
                (s.has_mscale, s.mscale, s.has_mscale_all_dim, s.mscale_all_dim) = (1, 0.707, 1, 0.5);
                p = p.with_mscale(0.707, 0.5);
            }
            if rng.below(2) == 1 {
                (s.has_attention_factor, s.attention_factor) = (1, 1.25);
                p = p.with_attention_factor(1.25);
            }
            if rng.below(2) == 1 {
                s.truncate = 0;
                p = p.with_truncate(false);
            }
            Scaling::Yarn(p)
        }
        ROPE_SCALING_LLAMA3 => {
            (s.rope_type, s.factor, s.original_max_position_embeddings) = (ROPE_SCALING_LLAMA3, factor, orig);
            (s.low_freq_factor, s.high_freq_factor) = (1.0, 4.0);
            Scaling::Llama3 {
                factor,
                low_freq_factor: 1.0,
                high_freq_factor: 4.0,
                original_max_position_embeddings: orig,
            }
        }
        ROPE_SCALING_LONGROPE => {
            s.rope_type = ROPE_SCALING_LONGROPE;
            (s.factor, s.original_max_position_embeddings) = (factor + 1.0, orig);
            (s.short_factor, s.short_factor_len) = (a0.as_ptr(), pairs);
            (s.long_factor, s.long_factor_len) = (a1.as_ptr(), pairs);
            let mut p = LongRopeParams::new(&a0, &a1, orig, factor + 1.0).unwrap();
            if rng.below(2) == 1 {
                (s.has_attention_factor, s.attention_factor) = (1, 1.1);
                p = p.with_attention_factor(1.1);
            }
            Scaling::LongRope(p)
        }
        ROPE_SCALING_PROPORTIONAL => {
            (s.rope_type, s.factor, s.partial_rotary_factor) = (ROPE_SCALING_PROPORTIONAL, factor, 0.25);
            Scaling::Proportional { factor, partial_rotary_factor: 0.25 }
        }
        ROPE_SCALING_FREQ_FACTORS => {
            (s.rope_type, s.freq_factors, s.freq_factors_len) =
                (ROPE_SCALING_FREQ_FACTORS, a2.as_ptr(), pairs);
            Scaling::freq_factors(&a2).unwrap()
        }
        _ => Scaling::None,
    };
    let rust = RopeConfig::new(head_dim, theta)
        .with_rotary_dim(rotary_dim)
        .with_layout(layout)
        .with_angle_mode(if hf { AngleMode::HfCompatible } else { AngleMode::Exact })
        .with_scaling(scaling);
    Case { c, rust, _arrays: [a0, a1, a2] }
}

/// A handle in a `Vec<u64>` (8-aligned) through `rope_init`.
fn init(cfg: &rope_config) -> (Vec<u64>, *mut rope_t) {
    let mut storage = vec![0u64; rope_size().div_ceil(8)];
    let mut h = null_mut();
    // SAFETY: storage of `rope_size()` bytes, aligned to 8 = `rope_align()`.
    let s = unsafe { rope_init(storage.as_mut_ptr().cast(), storage.len() * 8, cfg, &mut h) };
    assert_eq!(s, ROPE_OK, "{}", cstr(rope_status_str(s)));
    (storage, h)
}

fn tensor<T>(data: &mut [T], view: View) -> rope_tensor {
    rope_tensor {
        data: data.as_mut_ptr().cast(),
        len: data.len(),
        view: rope_view {
            tokens: view.tokens,
            heads: view.heads,
            token_stride: view.token_stride,
            head_stride: view.head_stride,
        },
    }
}

fn opts() -> rope_apply_opts {
    rope_apply_opts {
        struct_size: size_of::<rope_apply_opts>(),
        direction: ROPE_FORWARD,
        position_mode: ROPE_POSITIONS_START,
        start: 0,
        position_ids: null(),
        position_ids_len: 0,
        cos_sin: ROPE_COS_SIN_ON_THE_FLY,
        cos: null(),
        sin: null(),
        table_len: 0,
    }
}

/// A random view of `tokens x heads` rows of `head_dim` and the buffer length it needs.
fn random_view(rng: &mut TestRng, tokens: usize, heads: usize, head_dim: usize) -> (View, usize) {
    let pad = rng.below(3) as usize;
    let view = match rng.below(2) {
        0 => View { tokens, heads, token_stride: heads * (head_dim + pad), head_stride: head_dim + pad },
        _ => View { tokens, heads, token_stride: head_dim + pad, head_stride: tokens * (head_dim + pad) },
    };
    let len = if tokens == 0 || heads == 0 {
        rng.below(2) as usize
    } else {
        (tokens - 1) * view.token_stride + (heads - 1) * view.head_stride + head_dim + pad
    };
    (view, len)
}

type ApplyFn = unsafe extern "C" fn(
    *const rope_t,
    *const rope_tensor,
    *const rope_tensor,
    *const rope_apply_opts,
) -> rope_status;
type IntoFn = unsafe extern "C" fn(
    *const rope_t,
    *const rope_tensor,
    *const rope_tensor,
    *const rope_tensor,
    *const rope_tensor,
    *const rope_apply_opts,
) -> rope_status;

/// One random call through the C ABI and through the Rust API; the outputs must match
/// bit for bit.
fn compare_one<T: Element>(
    rng: &mut TestRng,
    case: &Case,
    from: fn(f32) -> T,
    c_apply: ApplyFn,
    c_into: IntoFn,
) {
    let rope = Rope::new(case.rust.clone()).unwrap();
    let (_storage, h) = init(&case.c);
    let hd = case.rust.head_dim;
    let pairs = case.rust.pairs();
    let tokens = rng.below(4) as usize;
    let (q_heads, k_heads) = (rng.below(4) as usize, rng.below(3) as usize);
    let (qv, qlen) = random_view(rng, tokens, q_heads, hd);
    let (kv, klen) = random_view(rng, tokens, k_heads, hd);
    let q_in: Vec<T> = (0..qlen).map(|_| from(rng.unit())).collect();
    let k_in: Vec<T> = (0..klen).map(|_| from(rng.unit())).collect();
    // Under Miri only small positions: a cos/sin table up to position 3000 (filled twice)
    // takes it minutes.
    let (id_pool, start_pool): (&[u32], &[u32]) =
        if cfg!(miri) { (&[0, 1, 7, 63], &[0, 3, 9]) } else { (&[0, 1, 7, 63, 700, 3000], &[0, 3, 900]) };
    let ids: Vec<u32> = (0..tokens).map(|_| rng.pick(id_pool)).collect();
    let start = rng.pick(start_pool);

    let mut o = opts();
    let mut apply = ApplyOptions::start(start);
    if rng.below(2) == 1 {
        (o.position_mode, o.position_ids, o.position_ids_len) = (ROPE_POSITIONS_IDS, ids.as_ptr(), ids.len());
        apply = ApplyOptions::ids(&ids);
    } else {
        o.start = start;
    }
    if rng.below(2) == 1 {
        o.direction = ROPE_INVERSE;
        apply = apply.inverse();
    }
    // A table covering every position of the call (or one row short), filled through the
    // C ABI and checked against the Rust `fill_table`.
    let max_pos = if o.position_mode == ROPE_POSITIONS_IDS {
        ids.iter().copied().max().unwrap_or(0) as usize
    } else {
        start as usize + tokens
    };
    let rows = max_pos + 1 - rng.below(2) as usize;
    let (mut cos, mut sin) = (vec![0f32; rows * pairs], vec![0f32; rows * pairs]);
    let use_table = rng.below(3) == 0;
    if use_table {
        // SAFETY: a live handle and two buffers of `rows * pairs` floats.
        let s = unsafe { rope_fill_table(h, 0, cos.as_mut_ptr(), sin.as_mut_ptr(), cos.len()) };
        assert_eq!(s, ROPE_OK);
        let (mut rc, mut rs) = (vec![0f32; rows * pairs], vec![0f32; rows * pairs]);
        rope.fill_table(0, &mut rc, &mut rs).unwrap();
        assert!(rc.iter().zip(&cos).all(|(a, b)| a.to_bits() == b.to_bits()), "fill_table cos");
        assert!(rs.iter().zip(&sin).all(|(a, b)| a.to_bits() == b.to_bits()), "fill_table sin");
        (o.cos_sin, o.cos, o.sin, o.table_len) = (ROPE_COS_SIN_TABLE, cos.as_ptr(), sin.as_ptr(), cos.len());
        apply = apply.with_table(CosSinTable::new(&cos, &sin, pairs).unwrap());
    }
    let with_k = rng.below(3) != 0;
    let bits = |v: &[T]| v.iter().map(|x| x.to_bits_u32()).collect::<Vec<_>>();

    if rng.below(2) == 0 {
        let (mut q_c, mut k_c, mut q_r, mut k_r) = (q_in.clone(), k_in.clone(), q_in.clone(), k_in.clone());
        let (tq, tk) = (tensor(&mut q_c, qv), tensor(&mut k_c, kv));
        let kp: *const rope_tensor = if with_k { &tk } else { null() };
        // SAFETY: live handle, tensors over owned buffers, options over live arrays.
        let s = unsafe { c_apply(h, &tq, kp, &o) };
        let k = with_k.then(|| HeadsMut::new(&mut k_r[..], kv));
        let r = rope.apply_qk(HeadsMut::new(&mut q_r, qv), k, &apply);
        assert_eq!(s, r.map_or_else(status::from_error, |_| ROPE_OK), "{:?}", case.rust);
        assert_eq!(bits(&q_c), bits(&q_r));
        assert_eq!(bits(&k_c), bits(&k_r));
    } else {
        let (mut q_src, mut k_src) = (q_in.clone(), k_in.clone());
        let (qov, qolen) = random_view(rng, tokens, qv.heads, hd);
        let (kov, kolen) = random_view(rng, tokens, kv.heads, hd);
        let (mut qo_c, mut ko_c) = (vec![from(9.0); qolen], vec![from(9.0); kolen]);
        let (mut qo_r, mut ko_r) = (qo_c.clone(), ko_c.clone());
        let (tq, tk) = (tensor(&mut q_src, qv), tensor(&mut k_src, kv));
        let (tqo, tko) = (tensor(&mut qo_c, qov), tensor(&mut ko_c, kov));
        let (kp, kop): (*const rope_tensor, *const rope_tensor) =
            if with_k { (&tk, &tko) } else { (null(), null()) };
        // SAFETY: as above.
        let s = unsafe { c_into(h, &tq, &tqo, kp, kop, &o) };
        let k = with_k.then(|| (Heads::new(&k_in[..], kv), HeadsMut::new(&mut ko_r[..], kov)));
        let r = rope.apply_qk_into(Heads::new(&q_in, qv), HeadsMut::new(&mut qo_r, qov), k, &apply);
        assert_eq!(s, r.map_or_else(status::from_error, |_| ROPE_OK), "{:?}", case.rust);
        assert_eq!(bits(&qo_c), bits(&qo_r));
        assert_eq!(bits(&ko_c), bits(&ko_r));
    }
}

#[test]
fn abi_matches_the_rust_api_on_random_calls() {
    let mut rng = rng(0x5EED_1234_ABCD_0001);
    for i in 0..cases(300, 30) {
        let case = random_case(&mut rng);
        match i % 3 {
            0 => compare_one::<f32>(&mut rng, &case, |v| v, rope_apply_f32, rope_apply_into_f32),
            1 => compare_one::<f16>(&mut rng, &case, f16::from_f32, rope_apply_f16, rope_apply_into_f16),
            _ => compare_one::<bf16>(&mut rng, &case, bf16::from_f32, rope_apply_bf16, rope_apply_into_bf16),
        }
    }
}

#[test]
fn frequencies_match_the_rust_api_for_every_scaling() {
    let mut rng = rng(0xF00D_0000_0000_0002);
    let mut kinds = [0u32; 9];
    for _ in 0..cases(400, 40) {
        let case = random_case(&mut rng);
        kinds[case.c.scaling.rope_type as usize] += 1;
        let rope = Rope::new(case.rust.clone()).unwrap();
        let (_storage, h) = init(&case.c);
        for seq_len in [0u64, 1, 5, 4096, 8193, 1 << 20] {
            let mut inv = vec![-1.0f64; case.rust.pairs() + 1];
            let mut af = -1.0;
            // SAFETY: live handle, an array longer than needed, a valid out-pointer.
            let s = unsafe { rope_frequencies(h, seq_len, inv.as_mut_ptr(), inv.len(), &mut af) };
            match rope.frequencies_at(seq_len) {
                Ok(f) => {
                    assert_eq!(s, ROPE_OK);
                    assert_eq!(&inv[..f.pairs()], f.inv_freq());
                    assert_eq!(inv[f.pairs()], -1.0, "wrote past rotary_dim / 2");
                    assert_eq!(af.to_bits(), f.attention_factor().to_bits());
                }
                Err(e) => {
                    assert_eq!(s, status::from_error(e));
                    assert!(inv.iter().all(|v| *v == -1.0) && af == -1.0, "a failing call wrote");
                }
            }
        }
    }
    assert!(kinds.iter().all(|n| *n > 0), "some scaling type never drawn: {kinds:?}");
}

#[test]
fn caller_inv_freq_table_is_used_verbatim() {
    let mut rng = rng(7);
    let mut case = random_case(&mut rng);
    let table: Vec<f32> = (0..case.rust.pairs()).map(|i| 0.5 / (i + 1) as f32).collect();
    (case.c.inv_freq, case.c.inv_freq_len) = (table.as_ptr(), table.len());
    let rope = Rope::new(case.rust.clone()).unwrap().with_hf_inv_freq(&table).unwrap();
    let (_storage, h) = init(&case.c);
    let pairs = case.rust.pairs();
    let (mut c1, mut s1, mut c2, mut s2) =
        (vec![0f32; 9 * pairs], vec![0f32; 9 * pairs], vec![0f32; 9 * pairs], vec![0f32; 9 * pairs]);
    // SAFETY: live handle and buffers of the given length.
    assert_eq!(unsafe { rope_fill_table(h, 1000, c1.as_mut_ptr(), s1.as_mut_ptr(), c1.len()) }, ROPE_OK);
    rope.fill_table(1000, &mut c2, &mut s2).unwrap();
    assert_eq!(c1, c2);
    assert_eq!(s1, s2);
    let plain = Rope::new(case.rust.clone().with_angle_mode(AngleMode::Exact)).unwrap();
    plain.fill_table(1000, &mut c2, &mut s2).unwrap();
    assert_ne!(c1, c2, "the table made no difference");
}

#[test]
fn handles_in_storage_and_on_the_heap() {
    let mut rng = rng(11);
    let case = random_case(&mut rng);
    let (mut storage, h) = init(&case.c);
    assert_eq!(h.cast::<u64>(), storage.as_mut_ptr());
    // SAFETY: every call gets a live handle, a live config, live out-pointers or NULL.
    unsafe {
        assert_eq!(rope_free(h), ROPE_INVALID_HANDLE, "caller storage is not freed");
        let mut pairs = 0;
        if cfg!(feature = "std") {
            let mut heap = null_mut();
            assert_eq!(rope_new(&case.c, &mut heap), ROPE_OK);
            assert_eq!(rope_pairs(heap, &mut pairs), ROPE_OK);
            assert_eq!(pairs, case.rust.pairs());
            assert_eq!(rope_free(heap), ROPE_OK);
            assert_eq!(rope_test_fault(ROPE_TEST_FAULT_ALLOC), ROPE_OK);
        }
        assert_eq!(rope_free(null_mut()), ROPE_OK);
        let mut none = null_mut();
        assert_eq!(rope_new(&case.c, &mut none), ROPE_OUT_OF_MEMORY, "fault injected, or no std");
        assert!(none.is_null());
        // Caught with std; without std the hook refuses to panic (nothing could catch it).
        let want = if cfg!(feature = "std") { ROPE_PANIC } else { ROPE_INVALID_ARGUMENT };
        assert_eq!(rope_test_fault(ROPE_TEST_FAULT_PANIC), want);
        assert_eq!(rope_test_fault(99), ROPE_UNKNOWN_ENUM);
        storage.fill(0);
        assert_eq!(rope_pairs(h, &mut pairs), ROPE_INVALID_HANDLE, "zeroed storage");
    }
}

/// Issue 15: `rope_mrope_apply_*`, `rope_vision_apply_f32` and `rope_mrope_fill_table` give
/// the Rust API's bits (on the fly and through a table); a failing call writes nothing.
#[test]
fn mrope_and_vision_match_the_rust_api() {
    use rope_kernels::{MRope, MRopeOptions, MRopeStyle, VisionOptions, VisionRope};
    let (tokens, heads, hd) = (3usize, 2usize, 16usize);
    let ids = [[0u32, 5, 5], [0u32, 6, 7], [0u32, 9, 1 << 20]];
    let mut rng = rng(15);
    let x: Vec<f32> = (0..tokens * heads * hd).map(|_| rng.unit()).collect();
    let view = View::token_major(tokens, heads, hd);
    let mut cfg = core::mem::MaybeUninit::<rope_config>::uninit();
    // SAFETY: writable for `sizeof(rope_config)`.
    assert_eq!(unsafe { rope_config_init(cfg.as_mut_ptr(), size_of::<rope_config>(), hd, 1e4) }, ROPE_OK);
    // SAFETY: initialised by `rope_config_init`.
    let cfg = unsafe { cfg.assume_init() };
    let (_storage, h) = init(&cfg);
    let mopts = |interleaved: u8, section: [u32; 3]| rope_mrope_opts {
        struct_size: size_of::<rope_mrope_opts>(),
        direction: ROPE_FORWARD,
        interleaved,
        mrope_section: section,
        position_ids: [ids[0].as_ptr(), ids[1].as_ptr(), ids[2].as_ptr()],
        positions_len: tokens,
        cos_sin: ROPE_COS_SIN_ON_THE_FLY,
        cos: null(),
        sin: null(),
        table_len: 0,
    };
    for (interleaved, section, style) in
        [(0u8, [2u32, 3, 3], MRopeStyle::Sectioned), (1, [4, 2, 2], MRopeStyle::Interleaved)]
    {
        let m = MRope::new(RopeConfig::new(hd, 1e4), section.map(|s| s as usize), style).unwrap();
        let mut want = x.clone();
        m.apply(HeadsMut::new(&mut want, view), &MRopeOptions::ids([&ids[0], &ids[1], &ids[2]])).unwrap();
        let mut got = x.clone();
        let o = mopts(interleaved, section);
        // SAFETY: a live handle, buffers valid for their counts.
        assert_eq!(unsafe { rope_mrope_apply_f32(h, &tensor(&mut got, view), null(), &o) }, ROPE_OK);
        assert_eq!(got, want);
        let (mut cos, mut sin) = (vec![0.0f32; tokens * hd / 2], vec![0.0f32; tokens * hd / 2]);
        // SAFETY: as above.
        let s = unsafe { rope_mrope_fill_table(h, &o, cos.as_mut_ptr(), sin.as_mut_ptr(), cos.len()) };
        assert_eq!(s, ROPE_OK);
        let ot = rope_mrope_opts {
            cos_sin: ROPE_COS_SIN_TABLE,
            cos: cos.as_ptr(),
            sin: sin.as_ptr(),
            table_len: cos.len(),
            ..o
        };
        let mut got = x.clone();
        // SAFETY: as above.
        assert_eq!(unsafe { rope_mrope_apply_f32(h, &tensor(&mut got, view), null(), &ot) }, ROPE_OK);
        assert_eq!(got, want);
        // A wrong section: the status, nothing written.
        let bad = mopts(interleaved, [section[0] + 1, section[1], section[2]]);
        let mut got = x.clone();
        // SAFETY: as above.
        let s = unsafe { rope_mrope_apply_f32(h, &tensor(&mut got, view), null(), &bad) };
        assert_eq!(s, ROPE_INVALID_MROPE_SECTION);
        assert_eq!(got, x);
    }
    let v = VisionRope::new(RopeConfig::new(hd, 1e4)).unwrap();
    let mut want = x.clone();
    v.apply(HeadsMut::new(&mut want, view), &VisionOptions::ids([&ids[0], &ids[1]])).unwrap();
    let mut got = x.clone();
    let o = mopts(0, [0, 0, 0]);
    // SAFETY: as above.
    assert_eq!(unsafe { rope_vision_apply_f32(h, &tensor(&mut got, view), null(), &o) }, ROPE_OK);
    assert_eq!(got, want);
    // SAFETY: NULL options are refused before anything is read.
    let s = unsafe { rope_vision_apply_f32(h, &tensor(&mut got, view), null(), null()) };
    assert_eq!(s, ROPE_NULL_POINTER);
}

/// Issue 15: `rope_apply_qk_norm[_into]_*` give the Rust API's bits for the three forms
/// (f32 and bf16, GQA k), and their errors write nothing. Small enough for Miri.
#[test]
fn qk_norm_matches_the_rust_api() {
    use rope_kernels::QkNorm;
    let (hd, rd, tokens, qh, kh) = (24usize, 16usize, 2usize, 3usize, 1usize);
    let mut cfg = core::mem::MaybeUninit::<rope_config>::uninit();
    // SAFETY: `cfg` is writable for `size_of::<rope_config>()` bytes.
    let s = unsafe { rope_config_init(cfg.as_mut_ptr(), size_of::<rope_config>(), hd, 10_000.0) };
    assert_eq!(s, ROPE_OK);
    // SAFETY: `rope_config_init` returned ROPE_OK, so it wrote every field.
    let mut cfg = unsafe { cfg.assume_init() };
    cfg.rotary_dim = rd;
    let (_storage, h) = init(&cfg);
    let rope = Rope::new(RopeConfig::new(hd, 10_000.0).with_rotary_dim(rd)).unwrap();
    let mut rng = rng(0x0A4B_0015);
    let q0: Vec<f32> = (0..tokens * qh * hd).map(|_| rng.unit()).collect();
    let k0: Vec<f32> = (0..tokens * kh * hd).map(|_| rng.unit()).collect();
    let qw: Vec<f32> = (0..hd).map(|_| 1.0 + rng.unit() / 4.0).collect();
    let kw: Vec<f32> = (0..hd).map(|_| rng.unit() / 4.0).collect();
    let (qv, kv) = (View::token_major(tokens, qh, hd), View::token_major(tokens, kh, hd));
    for kind in [ROPE_QK_NORM_RMS, ROPE_QK_NORM_RMS_ONE_PLUS, ROPE_QK_NORM_L2_AFTER] {
        let c_norm = rope_qk_norm {
            struct_size: size_of::<rope_qk_norm>(),
            kind,
            eps: 1e-6,
            q_weight: qw.as_ptr(),
            q_weight_len: hd,
            k_weight: kw.as_ptr(),
            k_weight_len: hd,
        };
        let norm = match kind {
            ROPE_QK_NORM_RMS => QkNorm::qwen3(&qw, &kw, 1e-6),
            ROPE_QK_NORM_RMS_ONE_PLUS => QkNorm::gemma3(&qw, &kw, 1e-6),
            _ => QkNorm::llama4(1e-6),
        };
        let o = opts();
        // f32 in place.
        let (mut q, mut k) = (q0.clone(), k0.clone());
        let (tq, tk) = (tensor(&mut q, qv), tensor(&mut k, kv));
        // SAFETY: a live handle; tensors over live, disjoint buffers; weights readable.
        let s = unsafe { rope_apply_qk_norm_f32(h, &tq, &tk, &c_norm, &o) };
        assert_eq!(s, ROPE_OK, "{}", cstr(rope_status_name(s)));
        let (mut rq, mut rk) = (q0.clone(), k0.clone());
        rope.apply_qk_norm(
            HeadsMut::new(&mut rq, qv),
            Some(HeadsMut::new(&mut rk, kv)),
            &norm,
            &ApplyOptions::default(),
        )
        .unwrap();
        assert_eq!(
            q.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
            rq.iter().map(|x| x.to_bits()).collect::<Vec<_>>()
        );
        assert_eq!(
            k.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
            rk.iter().map(|x| x.to_bits()).collect::<Vec<_>>()
        );
        // bf16 out of place.
        let (mut qb, mut kb): (Vec<bf16>, Vec<bf16>) = (
            q0.iter().map(|&x| bf16::from_f32(x)).collect(),
            k0.iter().map(|&x| bf16::from_f32(x)).collect(),
        );
        let (mut qo, mut ko) = (vec![bf16::ZERO; qb.len()], vec![bf16::ZERO; kb.len()]);
        let (tq, tk, tqo, tko) =
            (tensor(&mut qb, qv), tensor(&mut kb, kv), tensor(&mut qo, qv), tensor(&mut ko, kv));
        // SAFETY: as above.
        let s = unsafe { rope_apply_qk_norm_into_bf16(h, &tq, &tqo, &tk, &tko, &c_norm, &o) };
        assert_eq!(s, ROPE_OK, "{}", cstr(rope_status_name(s)));
        let (mut rqo, mut rko) = (vec![bf16::ZERO; qb.len()], vec![bf16::ZERO; kb.len()]);
        rope.apply_qk_norm_into(
            Heads::new(&qb, qv),
            HeadsMut::new(&mut rqo, qv),
            Some((Heads::new(&kb, kv), HeadsMut::new(&mut rko, kv))),
            &norm,
            &ApplyOptions::default(),
        )
        .unwrap();
        assert!(qo == rqo && ko == rko, "bf16 into differs from the Rust API");
    }
    // Errors write nothing: a short weight, a bad eps, an unknown kind, a weight inside q.
    let mut q = q0.clone();
    let tq = tensor(&mut q, qv);
    let base = rope_qk_norm {
        struct_size: size_of::<rope_qk_norm>(),
        kind: ROPE_QK_NORM_RMS,
        eps: 1e-6,
        q_weight: qw.as_ptr(),
        q_weight_len: hd,
        k_weight: kw.as_ptr(),
        k_weight_len: hd,
    };
    let aliased = q.as_ptr();
    for (n, want) in [
        (rope_qk_norm { q_weight_len: hd - 1, ..base }, ROPE_NORM_WEIGHT_LENGTH),
        (rope_qk_norm { eps: f32::NAN, ..base }, ROPE_INVALID_NORM_EPS),
        (rope_qk_norm { kind: 9, ..base }, ROPE_UNKNOWN_ENUM),
        (rope_qk_norm { q_weight: aliased, ..base }, ROPE_OVERLAPPING_BUFFERS),
        (rope_qk_norm { struct_size: 1, ..base }, ROPE_UNSUPPORTED_STRUCT_SIZE),
    ] {
        // SAFETY: as above (the aliased weight is readable: it is q itself).
        let s = unsafe { rope_apply_qk_norm_f32(h, &tq, null(), &n, null()) };
        assert_eq!(s, want, "{}", cstr(rope_status_name(s)));
        assert_eq!(q, q0);
    }
    // SAFETY: as above; a NULL norm is refused.
    assert_eq!(unsafe { rope_apply_qk_norm_f32(h, &tq, null(), null(), null()) }, ROPE_NULL_POINTER);
}
