//! The AVX-512F tier's benchmark rooflines (feature `bench-internals`;
//! [`roofline`](crate::kernels::roofline)): its `#[target_feature]` entry points over the
//! shared x86-64 row walks ([`x86_64::roofline`](crate::kernels::x86_64::roofline)).

use core::arch::x86_64::*;

use crate::kernels::roofline::{Rows, TokenPart};
use crate::kernels::x86_64::roofline::*;

/// # Safety
/// As [`pass_in_place_tokens`](crate::kernels::roofline::pass_in_place_tokens), with AVX-512F.
#[target_feature(enable = "avx512f,avx2")]
pub(crate) unsafe fn tokens(parts: [TokenPart; 2], tokens: usize, zero: u64) {
    let z = _mm512_set1_epi64(zero as i64);
    // SAFETY: forwarded; as `avx2::roofline::tokens`, with AVX-512F.
    unsafe {
        tokens_with(parts, tokens, |p, r| {
            rows_with::<__m512i, 64>(
                p,
                r,
                zero,
                |q| _mm512_loadu_si512(q.cast()),
                |q, v| _mm512_storeu_si512(q.cast(), v),
                |v| _mm512_xor_si512(v, z),
            )
        })
    }
}

/// # Safety
/// As [`pass_in_place`](crate::kernels::roofline::pass_in_place), with AVX-512F.
#[target_feature(enable = "avx512f,avx2")]
pub(crate) unsafe fn pass(p: *mut u8, r: Rows, zero: u64) {
    // SAFETY: forwarded.
    unsafe { rows(p, r, zero) }
}

/// The AVX-512 row pass.
///
/// # Safety
/// As [`pass_in_place`](crate::kernels::roofline::pass_in_place) (merged rows), with AVX-512F.
#[inline]
#[target_feature(enable = "avx512f,avx2")]
unsafe fn rows(p: *mut u8, r: Rows, zero: u64) {
    let z = _mm512_set1_epi64(zero as i64);
    // SAFETY: forwarded; the closures run with AVX-512F (this function's features).
    unsafe {
        rows_with::<__m512i, 64>(
            p,
            r,
            zero,
            |q| _mm512_loadu_si512(q.cast()),
            |q, v| _mm512_storeu_si512(q.cast(), v),
            |v| _mm512_xor_si512(v, z),
        )
    }
}

/// # Safety
/// As [`copy`](crate::kernels::roofline::copy), with AVX-512F.
#[target_feature(enable = "avx512f,avx2")]
pub(crate) unsafe fn copy(src: *const u8, dst: *mut u8, r: Rows, streaming: bool) {
    // SAFETY (both closures): they are called with ranges inside the row.
    let plain = |s: *const u8, d: *mut u8, n: usize| unsafe {
        walk::<64>(
            n,
            |o| _mm512_storeu_si512(d.add(o).cast(), _mm512_loadu_si512(s.add(o).cast())),
            |o, w| small_copy(s.add(o), d.add(o), w),
        )
    };
    for i in 0..r.rows {
        prefetch_row(src, i, &r);
        // SAFETY: row i of both buffers is in bounds (caller).
        let (s, d) = unsafe { (src.add(i * r.stride), dst.add(i * r.stride)) };
        if streaming {
            // SAFETY: as above; `nt` gets 64-aligned destinations.
            unsafe {
                stream_row::<64>(s, d, r.row_bytes, |s, d| nt512(d, _mm512_loadu_si512(s.cast())), plain)
            };
        } else {
            plain(s, d, r.row_bytes);
        }
    }
    // Orders the streaming stores before any later access (Miri has no `sfence`; its
    // stores are never reordered anyway).
    #[cfg(not(miri))]
    if streaming {
        _mm_sfence();
    }
}
