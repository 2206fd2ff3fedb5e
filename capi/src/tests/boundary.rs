//! Hostile input at the boundary: buffers overlapping a handle's storage, random pointers,
//! counts and values for every entry point, and configuration arrays inside the storage
//! `rope_init` builds in; each is refused without a panic and writes nothing.

use core::ptr::{null, null_mut};
use std::vec;
use std::vec::Vec;

use super::*;

/// Issue 16: a buffer that overlaps the handle's own storage (a `rope_init` handle lives
/// in caller memory) is refused with `ROPE_OVERLAPPING_BUFFERS` by every call that takes
/// a handle and writes a buffer, and nothing is written; a buffer just outside is fine.
#[test]
fn buffers_overlapping_the_handle_are_refused() {
    const HD: usize = 64;
    const PAIRS: usize = HD / 2;
    let mut cfg = core::mem::MaybeUninit::<rope_config>::uninit();
    // SAFETY: writable storage of a whole `rope_config`.
    let s = unsafe { rope_config_init(cfg.as_mut_ptr(), size_of::<rope_config>(), HD, 10_000.0) };
    assert_eq!(s, ROPE_OK);
    // SAFETY: `rope_config_init` returned ROPE_OK, so it wrote every field.
    let cfg = unsafe { cfg.assume_init() };
    // The handle at byte `h0` of `mem`, with room on both sides for buffers that straddle
    // its first or last byte.
    assert!(rope_align() <= 8);
    // The handle's bytes: storage sized to the configuration (issue 13).
    let mut size = 0;
    // SAFETY: a valid `rope_config` and a writable size.
    assert_eq!(unsafe { rope_storage_size(&cfg, &mut size) }, ROPE_OK);
    assert!(size <= rope_size());
    let pad = 64;
    let mut mem = vec![0u64; pad + size.div_ceil(8) + pad];
    let base = mem.as_mut_ptr().cast::<u8>();
    let h0 = pad * 8;
    let mut h = null_mut();
    // SAFETY: `size` writable bytes, aligned to 8, at byte `h0` of `mem`.
    assert_eq!(unsafe { rope_init(base.wrapping_add(h0).cast(), size, &cfg, &mut h) }, ROPE_OK);
    let (mut q, mut k, mut f) = (vec![1.0f32; HD], vec![2.0f32; HD], vec![0.0f64; PAIRS]);
    // What the handle computes (its bytes include padding, which Rust may not read).
    let fingerprint = |h: *mut rope_t| {
        let (mut inv, mut af, mut c, mut s) = (vec![0f64; PAIRS], 0f64, vec![0f32; PAIRS], vec![0f32; PAIRS]);
        // SAFETY: a live handle; buffers of the stated lengths, outside the handle.
        let st = unsafe {
            (
                rope_frequencies(h, 0, inv.as_mut_ptr(), PAIRS, &mut af),
                rope_fill_table(h, 7, c.as_mut_ptr(), s.as_mut_ptr(), PAIRS),
            )
        };
        assert_eq!(st, (ROPE_OK, ROPE_OK), "the handle is no longer valid");
        (inv, af, c, s)
    };
    let want = fingerprint(h);
    // The words around the handle (initialized, unlike the handle's padding).
    let around = |m: &[u64]| [&m[..pad], &m[m.len() - pad..]].concat();
    // Each call writes one buffer of `bytes` bytes at `p`, its other buffers (`o`: f32 q
    // and k of `HD`, f64 of `PAIRS`) elsewhere.
    type Call = unsafe fn(*mut rope_t, *mut u8, [*mut u8; 3]) -> rope_status;
    let calls: [(&str, usize, Call); 10] = [
        // SAFETY: `h` a live handle, `p` and `o` buffers of the sizes used here (the caller).
        ("rope_pairs", 8, |h, p, _| unsafe { rope_pairs(h, p.cast()) }),
        // SAFETY: `h` a live handle, `p` and `o` buffers of the sizes used here (the caller).
        ("rope_frequencies inv_freq", 8 * PAIRS, |h, p, _| unsafe {
            rope_frequencies(h, 0, p.cast(), PAIRS, null_mut())
        }),
        // SAFETY: `h` a live handle, `p` and `o` buffers of the sizes used here (the caller).
        ("rope_frequencies attention_factor", 8, |h, p, o| unsafe {
            rope_frequencies(h, 0, o[2].cast(), PAIRS, p.cast())
        }),
        // SAFETY: `h` a live handle, `p` and `o` buffers of the sizes used here (the caller).
        ("rope_fill_table cos", 4 * PAIRS, |h, p, o| unsafe {
            rope_fill_table(h, 0, p.cast(), o[1].cast(), PAIRS)
        }),
        // SAFETY: `h` a live handle, `p` and `o` buffers of the sizes used here (the caller).
        ("rope_fill_table sin", 4 * PAIRS, |h, p, o| unsafe {
            rope_fill_table(h, 0, o[0].cast(), p.cast(), PAIRS)
        }),
        // SAFETY: `h` a live handle, `p` and `o` buffers of the sizes used here (the caller).
        ("rope_apply_f32 q", 4 * HD, |h, p, _| unsafe {
            rope_apply_f32(h, &raw_tensor(p, HD), null(), null())
        }),
        // SAFETY: `h` a live handle, `p` and `o` buffers of the sizes used here (the caller).
        ("rope_apply_f32 k", 4 * HD, |h, p, o| unsafe {
            rope_apply_f32(h, &raw_tensor(o[0], HD), &raw_tensor(p, HD), null())
        }),
        // SAFETY: `h` a live handle, `p` and `o` buffers of the sizes used here (the caller).
        ("rope_apply_bf16 q", 2 * HD, |h, p, _| unsafe {
            rope_apply_bf16(h, &raw_tensor(p, HD), null(), null())
        }),
        // SAFETY: `h` a live handle, `p` and `o` buffers of the sizes used here (the caller).
        ("rope_apply_into_f32 q_out", 4 * HD, |h, p, o| unsafe {
            rope_apply_into_f32(h, &raw_tensor(o[0], HD), &raw_tensor(p, HD), null(), null(), null())
        }),
        // SAFETY: `h` a live handle, `p` and `o` buffers of the sizes used here (the caller).
        ("rope_apply_into_f16 k_out", 2 * HD, |h, p, o| unsafe {
            let (i, io) = (raw_tensor(o[0], HD), raw_tensor(o[1], HD));
            rope_apply_into_f16(h, &i, &io, &i, &raw_tensor(p, HD), null())
        }),
    ];
    for (name, bytes, call) in calls {
        // (first byte, overlaps the handle): just before, over its first 8 bytes, inside,
        // over its last 8 bytes, just after.
        let starts = [
            (h0 - bytes, false),
            (h0 + 8 - bytes, true),
            (h0 + size / 16 * 8, true),
            (h0 + size - 8, true),
            (h0 + size, false),
        ];
        // Under Miri (slow) one overlapping start and one outside are enough for the
        // boundary's pointer code.
        let starts = starts.into_iter().enumerate().filter(|(i, _)| !cfg!(miri) || *i == 1 || *i == 4);
        for (_, (start, overlaps)) in starts {
            let before = around(&mem);
            let others = [q.as_mut_ptr().cast(), k.as_mut_ptr().cast(), f.as_mut_ptr().cast()];
            // SAFETY: `bytes` writable bytes at `start` of `mem`, aligned for the buffer's
            // type; the other buffers are live arrays; `h` a live handle.
            let s = unsafe { call(h, base.wrapping_add(start), others) };
            let status = if overlaps { ROPE_OVERLAPPING_BUFFERS } else { ROPE_OK };
            assert_eq!(s, status, "{name} at byte {start} (handle at {h0}..{})", h0 + size);
            assert!(fingerprint(h) == want, "{name} at byte {start}: the handle was written");
            if overlaps {
                assert!(around(&mem) == before, "{name} at byte {start}: a refused call wrote");
            }
        }
    }
    let mut pairs = 0;
    // SAFETY: a live handle and out-pointer.
    assert_eq!(unsafe { rope_pairs(h, &mut pairs) }, ROPE_OK);
    assert_eq!(pairs, PAIRS);
}

/// A tensor of `n` elements in one head at `p`.
fn raw_tensor(p: *mut u8, n: usize) -> rope_tensor {
    rope_tensor {
        data: p.cast(),
        len: n,
        view: rope_view { tokens: 1, heads: 1, token_stride: n, head_stride: n },
    }
}

/// A value from a pool of troublesome ones.
fn nasty_usize(rng: &mut TestRng) -> usize {
    rng.pick(&[0, 1, 2, 3, 7, 64, 65, 127, 128, 1 << 20, usize::MAX / 8, usize::MAX / 2, usize::MAX])
}

fn nasty_f64(rng: &mut TestRng) -> f64 {
    rng.pick(&[0.0, -1.0, 1.0, 0.5, 32.0, 1e300, f64::NAN, f64::INFINITY, -0.0, 1e-300])
}

#[test]
fn hostile_input_never_panics_and_failing_calls_write_nothing() {
    let mut rng = rng(0xBAD_C0FF_EE00_0003);
    let arrays: Vec<f64> = (0..600).map(|i| 1.0 + i as f64).collect();
    for _ in 0..cases(3000, 40) {
        let mut case = random_case(&mut rng);
        // Corrupt some fields of the configuration.
        for _ in 0..rng.below(3) {
            let c = &mut case.c;
            match rng.below(12) {
                0 => c.head_dim = nasty_usize(&mut rng),
                1 => c.rotary_dim = nasty_usize(&mut rng),
                2 => c.theta = nasty_f64(&mut rng),
                3 => c.layout = rng.below(4) as u32,
                4 => c.scaling.rope_type = rng.below(12) as u32,
                5 => c.scaling.factor = nasty_f64(&mut rng),
                6 => c.scaling.truncate = rng.below(3) as u8,
                7 => {
                    (c.scaling.long_factor, c.scaling.long_factor_len) =
                        (arrays.as_ptr(), nasty_usize(&mut rng).min(600))
                }
                8 => c.struct_size = nasty_usize(&mut rng),
                9 => (c.inv_freq, c.inv_freq_len) = (null(), nasty_usize(&mut rng)),
                10 => c.scaling.beta_slow = nasty_f64(&mut rng),
                _ => c.angle_mode = rng.below(3) as u32,
            }
        }
        // SAFETY: the config's arrays live in `case` and `arrays`.
        let valid = unsafe { rope_config_validate(&case.c) };
        assert_ne!(valid, ROPE_PANIC);
        let mut storage = vec![0x7777_7777_7777_7777u64; ROPE_STORAGE_SIZE / 8];
        let mut h = null_mut();
        // SAFETY: storage of ROPE_STORAGE_SIZE bytes aligned to 8.
        let s = unsafe { rope_init(storage.as_mut_ptr().cast(), ROPE_STORAGE_SIZE, &case.c, &mut h) };
        assert_eq!(s, valid, "rope_init and rope_config_validate disagree");
        if s != ROPE_OK {
            assert!(h.is_null() && storage.iter().all(|w| *w == 0x7777_7777_7777_7777), "failing init wrote");
            continue;
        }
        // Hostile views, lengths and options on a valid handle.
        let mut q = vec![1.0f32; 512];
        let mut k = vec![2.0f32; 512];
        let mut tq = tensor(&mut q, View::token_major(1, 1, 1));
        let mut tk = tensor(&mut k, View::token_major(1, 1, 1));
        for t in [&mut tq, &mut tk] {
            t.len = rng.pick(&[0, 1, 100, 512]);
            t.view = rope_view {
                tokens: nasty_usize(&mut rng),
                heads: nasty_usize(&mut rng),
                token_stride: nasty_usize(&mut rng),
                head_stride: nasty_usize(&mut rng),
            };
        }
        let ids = [0u32, 5, u32::MAX];
        let table = [0.5f32; 256];
        let mut o = opts();
        // Unknown enum values (2, 7) now and then, so most calls get past them.
        o.direction = rng.pick(&[0, 1, 0, 1, 0, 1, 0, 2]);
        o.position_mode = rng.pick(&[0, 1, 0, 1, 0, 1, 0, 7]);
        o.start = rng.pick(&[0, 1, u32::MAX]);
        (o.position_ids, o.position_ids_len) = (ids.as_ptr(), rng.below(4) as usize);
        o.cos_sin = rng.pick(&[0, 1, 0, 1, 0, 1, 0, 2]);
        (o.cos, o.sin, o.table_len) = (table.as_ptr(), table.as_ptr(), rng.pick(&[0, 1, 64, 256]));
        let (q0, k0) = (q.clone(), k.clone());
        // SAFETY: tensors over live buffers of the stated lengths (or shorter claims).
        let s = unsafe { rope_apply_f32(h, &tq, &tk, &o) };
        assert_ne!(s, ROPE_PANIC);
        if s != ROPE_OK {
            assert!(q == q0 && k == k0, "failing apply wrote ({})", cstr(rope_status_name(s)));
        }
        let mut out = vec![3.0f32; 512];
        let mut to = tensor(&mut out, View::token_major(1, 1, 1));
        to.view = tq.view;
        to.len = rng.pick(&[0, 512]);
        // SAFETY: as above.
        let s = unsafe { rope_apply_into_f32(h, &tq, &to, null(), null(), &o) };
        assert_ne!(s, ROPE_PANIC);
        if s != ROPE_OK {
            assert!(out.iter().all(|v| *v == 3.0), "failing apply_into wrote");
        }
        let mut freqs = [9.0f64; 300];
        // SAFETY: a buffer of the stated length at most.
        let s = unsafe {
            rope_frequencies(h, rng.next_u64(), freqs.as_mut_ptr(), rng.below(300) as usize, null_mut())
        };
        assert_ne!(s, ROPE_PANIC);
        if s != ROPE_OK {
            assert!(freqs.iter().all(|v| *v == 9.0));
        }
    }
}

/// `rope_init` refuses a configuration whose arrays (LongRoPE factors, the caller's f32
/// `inv_freq` table) lie inside the storage it is to build in, and writes nothing; a handle
/// already there keeps working (fresh-eyes review of issue 16/13: the tables were zeroed
/// before the arrays were read, so a failed call had written and an OK one computed
/// garbage). A configuration whose frequencies leave the accepted range only once computed
/// is refused before anything is written, too.
#[test]
fn rope_init_refuses_config_arrays_inside_its_storage() {
    const HD: usize = 64;
    const PAIRS: usize = HD / 2;
    let base_cfg = || {
        let mut cfg = core::mem::MaybeUninit::<rope_config>::uninit();
        // SAFETY: writable storage of a whole `rope_config`.
        let s = unsafe { rope_config_init(cfg.as_mut_ptr(), size_of::<rope_config>(), HD, 10_000.0) };
        assert_eq!(s, ROPE_OK);
        // SAFETY: `rope_config_init` returned ROPE_OK, so it wrote every field.
        unsafe { cfg.assume_init() }
    };
    let plain = base_cfg();
    let (mut storage, h) = init(&plain);
    let words = storage.len();
    let mut pairs = 0;
    // SAFETY: a live handle and out-pointer.
    assert_eq!(unsafe { rope_pairs(h, &mut pairs) }, ROPE_OK);

    // LongRoPE factors inside the storage, just past the fixed header: where the tables go.
    let mut longrope = base_cfg();
    longrope.scaling.rope_type = ROPE_SCALING_LONGROPE;
    longrope.scaling.original_max_position_embeddings = 4096;
    longrope.scaling.factor = 32.0;
    let at = size_of::<rope_t>().div_ceil(8);
    for v in &mut storage[at..at + 2 * PAIRS] {
        *v = 1.0f64.to_bits();
    }
    let p = storage.as_mut_ptr();
    longrope.scaling.short_factor = p.wrapping_add(at).cast::<f64>().cast_const();
    longrope.scaling.short_factor_len = PAIRS;
    longrope.scaling.long_factor = p.wrapping_add(at + PAIRS).cast::<f64>().cast_const();
    longrope.scaling.long_factor_len = PAIRS;
    // The bytes a refused call must leave alone: the tables and what follows them (the
    // header's padding is uninitialised, which Miri would not let us compare), and the
    // handle, checked by what it answers.
    let tables = |s: &[u64]| s[at..].to_vec();
    let before = tables(&storage);
    let mut out = null_mut();
    // SAFETY: writable storage of `words * 8` bytes; a live config; a writable out-pointer.
    let s = unsafe { rope_init(storage.as_mut_ptr().cast(), words * 8, &longrope, &mut out) };
    assert_eq!(s, ROPE_OVERLAPPING_BUFFERS);
    assert!(tables(&storage) == before && out.is_null(), "a refused rope_init wrote");

    // The caller's f32 table inside the storage.
    let mut table = base_cfg();
    table.angle_mode = ROPE_ANGLE_HF_COMPATIBLE;
    table.inv_freq = storage.as_ptr().wrapping_add(at).cast::<f32>();
    table.inv_freq_len = PAIRS;
    // SAFETY: as above.
    let s = unsafe { rope_init(storage.as_mut_ptr().cast(), words * 8, &table, &mut out) };
    assert_eq!(s, ROPE_OVERLAPPING_BUFFERS);
    assert!(tables(&storage) == before && out.is_null(), "a refused rope_init wrote");
    // SAFETY: the handle is still the one built above.
    assert_eq!(unsafe { rope_pairs(h, &mut pairs) }, ROPE_OK);

    // Valid parameters whose frequency leaves [0, 2^95] only once computed: refused before
    // anything is written.
    let mut tiny = base_cfg();
    tiny.scaling.rope_type = ROPE_SCALING_LINEAR;
    tiny.scaling.factor = 1e-30;
    // SAFETY: as above.
    let s = unsafe { rope_init(storage.as_mut_ptr().cast(), words * 8, &tiny, &mut out) };
    assert_eq!(s, ROPE_INVALID_SCALING_PARAMETER);
    assert!(tables(&storage) == before && out.is_null(), "a refused rope_init wrote");
    // SAFETY: the handle is still the one built above.
    assert_eq!(unsafe { rope_pairs(h, &mut pairs) }, ROPE_OK);
}
