//! The encodings' C functions against the Rust API, bit for bit and status for status, on
//! random calls; hostile input never panics and a failing call writes nothing.

use core::mem::size_of;
use core::ptr::{null, null_mut};
use std::vec;
use std::vec::Vec;

use rope_kernels::encodings::{
    add_alibi, alibi_slopes, alibi_slopes_with_bias_max, deberta_log_bucket_position,
    t5_relative_position_bucket, AlibiForm, LearnedElement, LearnedPositions, RelativeGrid,
    RelativePositions, Sinusoidal, SinusoidalLayout,
};
use rope_kernels::{bf16, f16, Element, Positions, RopeError};

use crate::tests::support::elem::bits;
use crate::tests::{cases, cstr, rng, Draw, TestRng};
use crate::*;

fn status_of<T>(r: &Result<T, RopeError>) -> rope_status {
    r.as_ref().map_or_else(|e| status::from_error(*e), |_| ROPE_OK)
}

/// Positions for `tokens` rows as the C struct and the Rust value (borrowing `ids`).
fn positions_for<'a>(
    rng: &mut TestRng,
    tokens: usize,
    ids: &'a mut Vec<u32>,
    pool: &[u32],
) -> (rope_positions, Positions<'a>) {
    if rng.below(2) == 0 {
        let start = rng.pick(pool);
        let c =
            rope_positions { mode: ROPE_POSITIONS_START, start, position_ids: null(), position_ids_len: 0 };
        return (c, Positions::Start(start));
    }
    // Now and then one id too many or too few.
    let n = match rng.below(8) {
        0 => tokens + 1,
        1 => tokens.saturating_sub(1),
        _ => tokens,
    };
    *ids = (0..n).map(|_| rng.pick(pool)).collect();
    let c = rope_positions {
        mode: ROPE_POSITIONS_IDS,
        start: 0,
        position_ids: ids.as_ptr(),
        position_ids_len: n,
    };
    (c, Positions::Ids(ids))
}

/// `(tokens, row_stride, x_len)` for rows of `dim`: usually fitting, sometimes a stride
/// below `dim` or a buffer one element short.
fn rows_for(rng: &mut TestRng, dim: usize) -> (usize, usize, usize) {
    let tokens = rng.below(5) as usize;
    let row_stride = match rng.below(8) {
        0 => dim.saturating_sub(1),
        _ => dim + rng.below(3) as usize,
    };
    let needed = if tokens == 0 { 0 } else { (tokens - 1) * row_stride + dim };
    let x_len = if rng.below(8) == 0 { needed.saturating_sub(1) } else { needed + rng.below(2) as usize };
    (tokens, row_stride, x_len)
}

type SinAdd<C> =
    unsafe extern "C" fn(usize, u32, f64, *mut C, usize, usize, usize, *const rope_positions) -> rope_status;

fn sinusoidal_case<T: Element, C>(rng: &mut TestRng, from: fn(f32) -> T, c_add: SinAdd<C>) -> rope_status {
    let dim = rng.pick(&[1usize, 2, 3, 5, 8, 64, 65, 77, 130]);
    let layout = rng.pick(&[ROPE_SINUSOIDAL_INTERLEAVED, ROPE_SINUSOIDAL_CONCATENATED]);
    let rust_layout = if layout == ROPE_SINUSOIDAL_INTERLEAVED {
        SinusoidalLayout::Interleaved
    } else {
        SinusoidalLayout::Concatenated
    };
    let base = rng.pick(&[ROPE_SINUSOIDAL_BASE, 500.0, 1.5, 1.0, 0.0]);
    let pe = Sinusoidal::with_base(dim, rust_layout, base);

    // The table.
    let start = rng.pick(&[0u32, 7, 70_000, u32::MAX - 2]);
    let rows = rng.below(5) as usize;
    let len = rows * dim + usize::from(rng.below(6) == 0);
    let (mut c_out, mut r_out) = (vec![-7.0f32; len], vec![-7.0f32; len]);
    // SAFETY: a buffer of `len` floats.
    let s = unsafe { rope_sinusoidal_fill_table_f32(dim, layout, base, start, c_out.as_mut_ptr(), len) };
    let r = pe.and_then(|pe| pe.fill_table(start, &mut r_out));
    assert_eq!(s, status_of(&r), "fill dim {dim} base {base} start {start} len {len}");
    assert_eq!(bits(&c_out), bits(&r_out));

    // The fused add.
    let (tokens, row_stride, x_len) = rows_for(rng, dim);
    let mut ids = Vec::new();
    let (cp, rp) = positions_for(rng, tokens, &mut ids, &[0, 1, 2, 1000, 65_535, 4_000_000_000, u32::MAX]);
    let x: Vec<T> = (0..x_len).map(|_| from(rng.unit() * 4.0)).collect();
    let (mut c_x, mut r_x) = (x.clone(), x);
    // SAFETY: a buffer of `x_len` elements, positions over live ids.
    let s = unsafe { c_add(dim, layout, base, c_x.as_mut_ptr().cast(), x_len, tokens, row_stride, &cp) };
    let r = pe.and_then(|pe| pe.add_to(&mut r_x, tokens, row_stride, rp));
    assert_eq!(s, status_of(&r), "add dim {dim} tokens {tokens} stride {row_stride} len {x_len}");
    assert_eq!(bits(&c_x), bits(&r_x));
    s
}

type LearnedAdd<CP, CX> = unsafe extern "C" fn(
    *const CP,
    usize,
    usize,
    *mut CX,
    usize,
    usize,
    usize,
    *const rope_positions,
) -> rope_status;

fn learned_case<T: Element, P: LearnedElement<T>, CP, CX>(
    rng: &mut TestRng,
    from_t: fn(f32) -> T,
    from_p: fn(f32) -> P,
    c_add: LearnedAdd<CP, CX>,
) -> rope_status {
    let dim = rng.pick(&[0usize, 1, 3, 16, 33]);
    let max_positions = rng.below(12) as usize;
    let table_len = max_positions * dim + usize::from(rng.below(8) == 0);
    let table: Vec<P> = (0..table_len).map(|_| from_p(rng.unit())).collect();
    let (tokens, row_stride, x_len) = rows_for(rng, dim);
    let pool: Vec<u32> = (0..=max_positions as u32).collect();
    let mut ids = Vec::new();
    let (cp, rp) = positions_for(rng, tokens, &mut ids, &pool);
    let x: Vec<T> = (0..x_len).map(|_| from_t(rng.unit() * 8.0)).collect();
    let (mut c_x, mut r_x) = (x.clone(), x);
    // SAFETY: buffers of the stated lengths, positions over live ids.
    let s = unsafe {
        c_add(table.as_ptr().cast(), table_len, dim, c_x.as_mut_ptr().cast(), x_len, tokens, row_stride, &cp)
    };
    let r = LearnedPositions::new(&table, dim).and_then(|w| w.add_to(&mut r_x, tokens, row_stride, rp));
    assert_eq!(s, status_of(&r), "learned dim {dim} rows {max_positions} tokens {tokens}");
    assert_eq!(bits(&c_x), bits(&r_x));
    s
}

/// A random scheme (including bad parameters and unknown kinds) as the C struct and, for
/// known kinds, the Rust value.
fn random_relative(rng: &mut TestRng) -> (rope_relative, Option<RelativePositions>) {
    let c = rope_relative {
        struct_size: size_of::<rope_relative>(),
        kind: rng.below(7) as u32,
        max_distance: rng.pick(&[0, 1, 3, 8, 128, 1000, i32::MAX as u32, u32::MAX]),
        att_span: rng.pick(&[0, 1, 4, 256, 1 << 30, (1 << 30) + 1]),
        bucket_size: rng.pick(&[0, 1, 2, 8, 256, 1 << 21]),
        max_position: rng.pick(&[0, 2, 5, 32, 512, (1 << 20) + 1025]),
        num_buckets: rng.pick(&[0, 1, 2, 3, 4, 32, 320, i32::MAX as u32, u32::MAX]),
    };
    let t5 = |bidirectional| RelativePositions::T5Bucket {
        bidirectional,
        num_buckets: c.num_buckets,
        max_distance: c.max_distance,
    };
    let r = match c.kind {
        ROPE_RELATIVE_CLIPPED => Some(RelativePositions::Clipped { max_distance: c.max_distance }),
        ROPE_RELATIVE_CLIPPED_INDEX => Some(RelativePositions::ClippedIndex { max_distance: c.max_distance }),
        ROPE_RELATIVE_DEBERTA_INDEX => Some(RelativePositions::DebertaIndex { att_span: c.att_span }),
        ROPE_RELATIVE_DEBERTA_V2_LOG_BUCKET => Some(RelativePositions::DebertaV2LogBucket {
            bucket_size: c.bucket_size,
            max_position: c.max_position,
        }),
        ROPE_RELATIVE_T5_BIDIRECTIONAL => Some(t5(true)),
        ROPE_RELATIVE_T5_CAUSAL => Some(t5(false)),
        _ => None,
    };
    (c, r)
}

fn random_grid(rng: &mut TestRng) -> (rope_relative_grid, RelativeGrid) {
    let offsets = [0u32, 3, 1000, u32::MAX - 4, u32::MAX];
    let c = rope_relative_grid {
        query_len: rng.below(6) as usize,
        key_len: rng.below(10) as usize,
        q_offset: rng.pick(&offsets),
        k_offset: rng.pick(&offsets),
    };
    let r = RelativeGrid::new(c.query_len, c.key_len).with_offsets(c.q_offset, c.k_offset);
    (c, r)
}

fn relative_case(rng: &mut TestRng) -> rope_status {
    let (params, rust) = random_relative(rng);
    let (cg, rg) = random_grid(rng);
    let len = (cg.query_len * cg.key_len).saturating_sub(usize::from(rng.below(8) == 0));
    let mut out = vec![-99i32; len];
    // SAFETY: live structs and a buffer of `len` values.
    let s = unsafe { rope_relative_fill(&params, &cg, out.as_mut_ptr(), len) };
    // SAFETY: a live struct.
    let v = unsafe { rope_relative_validate(&params) };
    let (qp, kp) = (rng.pick(&[0u32, 5, 1000, u32::MAX]), rng.pick(&[0u32, 7, 999, u32::MAX]));
    let mut index = -99;
    // SAFETY: a live struct and out-parameter.
    let si = unsafe { rope_relative_index(&params, qp, kp, &mut index) };
    let Some(rust) = rust else {
        assert_eq!([s, v, si], [ROPE_UNKNOWN_ENUM; 3]);
        assert!(out.iter().all(|v| *v == -99) && index == -99);
        return s;
    };
    let mut expected = vec![-99i32; len];
    let r = rust.fill(&mut expected, rg);
    assert_eq!(s, status_of(&r), "{rust:?} {rg:?}");
    assert_eq!(out, expected, "{rust:?} {rg:?}");
    assert_eq!(v, status_of(&rust.validate()));
    let r = rust.index(qp, kp);
    assert_eq!(si, status_of(&r));
    assert_eq!(index, r.unwrap_or(-99));
    s
}

fn scalar_bucket_case(rng: &mut TestRng) {
    let rel = rng.pick(&[
        i64::MIN,
        -(1 << 40),
        -1000,
        -129,
        -128,
        -9,
        -8,
        -1,
        0,
        1,
        8,
        9,
        127,
        128,
        1000,
        i64::MAX,
    ]);
    let bidirectional = rng.below(3) as u8;
    let (nb, md) = (rng.pick(&[0u32, 2, 4, 32, 320, u32::MAX]), rng.pick(&[0u32, 1, 8, 128, 4096]));
    let mut b = -99;
    // SAFETY: a live out-parameter.
    let s = unsafe { rope_t5_relative_position_bucket(rel, bidirectional, nb, md, &mut b) };
    if bidirectional > 1 {
        assert_eq!((s, b), (ROPE_INVALID_ARGUMENT, -99));
    } else {
        let r = t5_relative_position_bucket(rel, bidirectional == 1, nb, md);
        assert_eq!((s, b), (status_of(&r), r.unwrap_or(-99)), "t5 {rel} {bidirectional} {nb} {md}");
    }
    let (bs, mp) =
        (rng.pick(&[0u32, 1, 2, 8, 256, 1 << 21]), rng.pick(&[0u32, 5, 32, 512, (1 << 20) + 1025]));
    let mut d = -99;
    // SAFETY: a live out-parameter.
    let s = unsafe { rope_deberta_log_bucket_position(rel, bs, mp, &mut d) };
    let r = deberta_log_bucket_position(rel, bs, mp);
    assert_eq!((s, d), (status_of(&r), r.unwrap_or(-99)), "deberta {rel} {bs} {mp}");
}

fn alibi_case(rng: &mut TestRng) -> rope_status {
    let heads = rng.below(14) as usize;
    let (mut c, mut r) = (vec![-1.0f32; heads], vec![-1.0f32; heads]);
    // SAFETY: a buffer of `heads` floats.
    assert_eq!(unsafe { rope_alibi_slopes(c.as_mut_ptr(), heads) }, ROPE_OK);
    alibi_slopes(&mut r);
    assert_eq!(bits(&c), bits(&r));
    let max = rng.pick(&[8.0, 16.0, 0.5, 0.0, -1.0, f64::NAN, f64::INFINITY]);
    let (mut c, mut r) = (vec![-1.0f32; heads], vec![-1.0f32; heads]);
    // SAFETY: as above.
    let s = unsafe { rope_alibi_slopes_with_bias_max(c.as_mut_ptr(), heads, max) };
    assert_eq!(s, status_of(&alibi_slopes_with_bias_max(&mut r, max)));
    assert_eq!(bits(&c), bits(&r));

    let heads = rng.below(4) as usize;
    let mut slopes = vec![0.0f32; heads];
    alibi_slopes(&mut slopes);
    if heads > 0 && rng.below(8) == 0 {
        slopes[rng.below(heads as u64) as usize] = rng.pick(&[f32::NAN, f32::INFINITY]);
    }
    let (cg, rg) = random_grid(rng);
    let rows = heads * cg.query_len;
    let row_stride = match rng.below(8) {
        0 => cg.key_len.saturating_sub(1),
        _ => cg.key_len + rng.below(3) as usize,
    };
    let needed = if rows == 0 || cg.key_len == 0 { 0 } else { (rows - 1) * row_stride + cg.key_len };
    let len = if rng.below(8) == 0 { needed.saturating_sub(1) } else { needed + rng.below(2) as usize };
    let scores: Vec<f32> = (0..len).map(|_| rng.unit() * 10.0).collect();
    let (mut c_s, mut r_s) = (scores.clone(), scores);
    let form = rng.pick(&[ROPE_ALIBI_CAUSAL, ROPE_ALIBI_SYMMETRIC]);
    let rust_form = if form == ROPE_ALIBI_CAUSAL { AlibiForm::Causal } else { AlibiForm::Symmetric };
    let (scores_ptr, slopes_ptr) = (c_s.as_mut_ptr(), slopes.as_ptr());
    // SAFETY: buffers of the stated lengths and a live grid.
    let s = unsafe { rope_alibi_add_f32(scores_ptr, len, row_stride, &cg, slopes_ptr, heads, form) };
    let r = add_alibi(&mut r_s, row_stride, rg, &slopes, rust_form);
    assert_eq!(s, status_of(&r), "alibi {heads} {rg:?} stride {row_stride} len {len}");
    assert_eq!(bits(&c_s), bits(&r_s));
    s
}

#[test]
fn encodings_match_the_rust_api_on_random_calls() {
    // Under Miri only 90 calls run (15 per family): this seed gives each family a success and
    // at least three error statuses there as well (the check below).
    let mut rng = rng(0xE4C0_D105_0000_000A);
    // Statuses seen per function family: each must have succeeded and failed.
    let mut seen = [[false; 80]; 4];
    for i in 0..cases(2400, 90) {
        let (family, s) = match i % 6 {
            0 => (0, sinusoidal_case::<f32, f32>(&mut rng, |v| v, rope_sinusoidal_add_f32)),
            1 => (0, sinusoidal_case::<f16, u16>(&mut rng, f16::from_f32, rope_sinusoidal_add_f16)),
            2 => (0, sinusoidal_case::<bf16, u16>(&mut rng, bf16::from_f32, rope_sinusoidal_add_bf16)),
            3 => (1, learned(&mut rng, i / 6)),
            4 => {
                scalar_bucket_case(&mut rng);
                (2, relative_case(&mut rng))
            }
            _ => (3, alibi_case(&mut rng)),
        };
        seen[family][s as usize] = true;
    }
    for (family, s) in seen.iter().enumerate() {
        let errors = s.iter().skip(1).filter(|v| **v).count();
        assert!(s[ROPE_OK as usize] && errors >= 3, "family {family}: too few outcomes {s:?}");
    }
}

fn learned(rng: &mut TestRng, i: usize) -> rope_status {
    let (f16f, bf16f, id) = (f16::from_f32, bf16::from_f32, |v| v);
    match i % 5 {
        0 => learned_case::<f32, f32, f32, f32>(rng, id, id, rope_learned_add_f32),
        1 => learned_case::<f16, f16, u16, u16>(rng, f16f, f16f, rope_learned_add_f16),
        2 => learned_case::<bf16, bf16, u16, u16>(rng, bf16f, bf16f, rope_learned_add_bf16),
        3 => learned_case::<f16, f32, f32, u16>(rng, f16f, id, rope_learned_add_f16_table_f32),
        _ => learned_case::<bf16, f32, f32, u16>(rng, bf16f, id, rope_learned_add_bf16_table_f32),
    }
}

#[test]
fn issue_8_reference_values_through_the_abi() {
    let mut pe = [0.0f32; 10];
    // SAFETY: a buffer of 10 floats: positions 0 and 1 of width 5.
    let s = unsafe {
        rope_sinusoidal_fill_table_f32(
            5,
            ROPE_SINUSOIDAL_INTERLEAVED,
            ROPE_SINUSOIDAL_BASE,
            0,
            pe.as_mut_ptr(),
            10,
        )
    };
    assert_eq!(s, ROPE_OK);
    let want = [0.841471f32, 0.540302, 0.025116, 0.999685, 0.000631];
    for (g, w) in pe[5..].iter().zip(want) {
        assert!((g - w).abs() <= 5e-7, "{g} vs {w}");
    }
    assert_eq!(&pe[..5], &[0.0, 1.0, 0.0, 1.0, 0.0]);
    let mut b = 0;
    // SAFETY: a live out-parameter.
    assert_eq!(unsafe { rope_t5_relative_position_bucket(1000, 1, 32, 128, &mut b) }, ROPE_OK);
    assert_eq!(b, 31);
    let mut s8 = [0.0f32; 8];
    // SAFETY: a buffer of 8 floats.
    assert_eq!(unsafe { rope_alibi_slopes(s8.as_mut_ptr(), 8) }, ROPE_OK);
    // 2^-1 .. 2^-8, written out: Miri gives `powi` a random error of a few ulp.
    assert_eq!(s8, [0.5, 0.25, 0.125, 0.0625, 0.031_25, 0.015_625, 0.007_812_5, 0.003_906_25]);
}

// ---------------------------------------------------------------- hostile input

/// A pointer for `T` into the buffer of `words` `u64`s at `base`, and an element count
/// that never claims more than the buffer holds from there: NULL (with any count),
/// aligned, or misaligned by a byte.
///
/// Takes the buffer as a raw pointer, not `&mut [u64]`: every pointer of a case must come
/// from one raw pointer per buffer, as a C caller's would. Reborrowing the buffer as
/// `&mut` for each pointer would invalidate the ones made before it (Stacked Borrows), so
/// the library's reads through them would be undefined behaviour under Miri.
fn nasty_buf<T>(rng: &mut TestRng, (base, words): (*mut u64, usize)) -> (*mut T, usize) {
    let bytes = words * 8;
    let off = match rng.below(8) {
        0 => return (null_mut(), rng.pick(&[0, 1, 5])),
        1 => 1,
        _ => 0,
    };
    let cap = (bytes - off) / size_of::<T>();
    let len = rng.pick(&[0, 1, 2, 3, 7, 16, 64, cap]).min(cap);
    (base.cast::<u8>().wrapping_add(off).cast(), len)
}

fn nasty_usize(rng: &mut TestRng) -> usize {
    rng.pick(&[0, 1, 2, 3, 7, 16, 64, 65, 1 << 20, usize::MAX / 8, usize::MAX / 2, usize::MAX])
}

fn nasty_f64(rng: &mut TestRng) -> f64 {
    rng.pick(&[10_000.0, 1.0, 0.5, 0.0, -1.0, 1e300, f64::NAN, f64::INFINITY, -0.0, 1e-300])
}

#[test]
fn hostile_encoding_input_never_panics_and_failing_calls_write_nothing() {
    let mut rng = rng(0xBAD_E4C0_D105_0009);
    // [failed, succeeded] per call: both must occur.
    let mut outcomes = [[0u32; 2]; 16];
    for i in 0..cases(6400, 320) {
        // Two buffers of 512 bytes: `a` is written, `b` read (or written by the slopes
        // and relative calls); ids, tables and slopes sometimes point into `a`.
        let mut a: Vec<u64> = (0..64).map(|k| 0x3F80_0000_3F80_0000 ^ k).collect();
        let mut b: Vec<u64> = (0..64).map(|k| 0x4000_0000_0001_0002 + k).collect();
        let (a0, b0) = (a.clone(), b.clone());
        // `Vec::as_mut_ptr` makes no reference: `a` and `b` are only read (compared)
        // again after the call, so these pointers stay valid for it.
        let (a_raw, b_raw) = ((a.as_mut_ptr(), a.len()), (b.as_mut_ptr(), b.len()));
        let ids_in_a = rng.below(6) == 0;
        let (ids_p, ids_n) = nasty_buf::<u32>(&mut rng, if ids_in_a { a_raw } else { b_raw });
        let pos = rope_positions {
            mode: rng.pick(&[0, 1, 0, 1, 2]),
            start: rng.pick(&[0, 1, u32::MAX - 1, u32::MAX]),
            position_ids: ids_p,
            position_ids_len: ids_n,
        };
        let pos_p: *const rope_positions = if rng.below(10) == 0 { null() } else { &pos };
        let enum_v = rng.pick(&[0u32, 1, 0, 1, 2, u32::MAX]);
        let (tokens, stride, dim) = (nasty_usize(&mut rng), nasty_usize(&mut rng), nasty_usize(&mut rng));
        let (af, an) = nasty_buf::<f32>(&mut rng, a_raw);
        let (ah, ahn) = nasty_buf::<u16>(&mut rng, a_raw);
        let table_in = if rng.below(6) == 0 { a_raw } else { b_raw };
        let (tf, tn) = nasty_buf::<f32>(&mut rng, table_in);
        let (th, thn) = nasty_buf::<u16>(&mut rng, b_raw);
        let (bi, bin) = nasty_buf::<i32>(&mut rng, b_raw);
        let (bf, bfn) = nasty_buf::<f32>(&mut rng, b_raw);
        let (mut rel, _) = random_relative(&mut rng);
        if rng.below(10) == 0 {
            rel.struct_size = nasty_usize(&mut rng);
        }
        let (mut grid, _) = random_grid(&mut rng);
        if rng.below(2) == 0 {
            (grid.query_len, grid.key_len) = (nasty_usize(&mut rng), nasty_usize(&mut rng));
        }
        let grid_p: *const rope_relative_grid = if rng.below(10) == 0 { null() } else { &grid };
        let rel_p: *const rope_relative = if rng.below(10) == 0 { null() } else { &rel };
        let f = nasty_f64(&mut rng);

        let call = i % 16;
        // SAFETY: every pointer is NULL or inside `a`/`b` with a count that fits.
        let s = unsafe {
            match call {
                0 => rope_sinusoidal_fill_table_f32(dim % 200, enum_v, f, pos.start, af, an),
                1 => rope_sinusoidal_add_f32(dim, enum_v, f, af, an, tokens, stride, pos_p),
                2 => rope_sinusoidal_add_f16(dim % 80, enum_v, f, ah, ahn, tokens, stride, pos_p),
                3 => rope_sinusoidal_add_bf16(dim, enum_v, f, ah, ahn, tokens % 9, stride, pos_p),
                4 => rope_learned_add_f32(tf, tn, dim, af, an, tokens, stride, pos_p),
                5 => rope_learned_add_f16(th, thn, dim % 9, ah, ahn, tokens % 9, stride % 20, pos_p),
                6 => rope_learned_add_bf16(th, thn, dim, ah, ahn, tokens, stride, pos_p),
                7 => rope_learned_add_f16_table_f32(tf, tn, dim % 5, ah, ahn, tokens % 5, stride, pos_p),
                8 => rope_learned_add_bf16_table_f32(tf, tn, dim, ah, ahn, tokens, stride % 9, pos_p),
                9 => rope_relative_fill(rel_p, grid_p, bi, bin),
                10 => rope_relative_index(rel_p, pos.start, grid.q_offset, bi),
                11 => rope_relative_validate(rel_p),
                12 => rope_alibi_slopes_with_bias_max(bf, bfn, f),
                13 => rope_alibi_slopes(bf, bfn),
                14 => rope_alibi_add_f32(
                    af,
                    an,
                    stride,
                    grid_p,
                    if ids_in_a { tf } else { bf },
                    bfn.min(4),
                    enum_v,
                ),
                _ if tokens % 2 == 0 => rope_t5_relative_position_bucket(
                    tokens as i64,
                    enum_v as u8,
                    grid.q_offset,
                    grid.k_offset,
                    bi,
                ),
                _ => rope_deberta_log_bucket_position(stride as i64, grid.q_offset, grid.k_offset, bi.cast()),
            }
        };
        assert_ne!(s, ROPE_PANIC, "call {call} panicked");
        assert!(describe(s).is_some(), "call {call} returned an unknown status {s}");
        if s != ROPE_OK {
            assert!(a == a0 && b == b0, "failing call {call} wrote ({})", cstr(rope_status_name(s)));
        }
        outcomes[call][usize::from(s == ROPE_OK)] += 1;
    }
    // Under Miri (20 cases per call) some calls never get past their checks; there the
    // test is about undefined behaviour, natively also about reaching both outcomes.
    for (call, o) in outcomes.iter().enumerate().filter(|_| !cfg!(miri)) {
        assert!(o[0] > 0 && o[1] > 0, "call {call}: {o:?} [failed, succeeded]");
    }
}

#[test]
fn overlapping_buffers_are_refused_before_any_write() {
    let mut x = [1.0f32; 32];
    let p = x.as_mut_ptr();
    let ids = rope_positions {
        mode: ROPE_POSITIONS_IDS,
        start: 0,
        position_ids: p.wrapping_add(8).cast(),
        position_ids_len: 2,
    };
    // SAFETY: every pointer is inside `x` with a count that fits.
    unsafe {
        assert_eq!(rope_sinusoidal_add_f32(4, 0, 1e4, p, 16, 2, 4, &ids), ROPE_OVERLAPPING_BUFFERS);
        assert_eq!(
            rope_learned_add_f32(p.wrapping_add(16), 16, 4, p, 17, 2, 4, &ids),
            ROPE_OVERLAPPING_BUFFERS
        );
        let start = rope_positions {
            mode: ROPE_POSITIONS_START,
            start: 0,
            position_ids: null(),
            position_ids_len: 0,
        };
        assert_eq!(
            rope_learned_add_f32(p.wrapping_add(15), 8, 4, p, 16, 2, 4, &start),
            ROPE_OVERLAPPING_BUFFERS
        );
        // Adjacent, not overlapping: fine.
        assert_eq!(rope_learned_add_f32(p.wrapping_add(16), 16, 4, p, 16, 2, 4, &start), ROPE_OK);
        let g = rope_relative_grid { query_len: 1, key_len: 2, q_offset: 0, k_offset: 0 };
        assert_eq!(rope_alibi_add_f32(p, 2, 2, &g, p.wrapping_add(1), 1, 0), ROPE_OVERLAPPING_BUFFERS);
    }
    assert_eq!(&x[..16], &[2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]);
}
