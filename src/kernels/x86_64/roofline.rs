//! The x86-64 part of the benchmark rooflines (feature `bench-internals`;
//! [`roofline`](crate::kernels::roofline)): the row walks, prefetches and stores both x86-64
//! tiers share, all `#[inline(always)]`, so that they inline into each tier's
//! `#[target_feature]` entry points (`avx2/roofline.rs`, `avx512/roofline.rs`).

use core::arch::x86_64::*;

use crate::kernels::roofline::{Rows, TokenPart};

/// Prefetches the lines of row `i + r.ahead()` of `p` (past the buffer near its end:
/// `prefetcht0` never faults), if `r.prefetch`.
#[inline(always)]
pub(crate) fn prefetch_row(p: *const u8, i: usize, r: &Rows) {
    prefetch_ahead(p, i, r, r.ahead());
}

/// [`prefetch_row`] with `r.ahead()` computed once by the caller (a division: per row, it
/// was a visible part of a pass over short rows).
#[inline(always)]
pub(crate) fn prefetch_ahead(p: *const u8, i: usize, r: &Rows, ahead: usize) {
    if !r.prefetch {
        return;
    }
    let q = p.wrapping_add(i.wrapping_add(ahead).wrapping_mul(r.stride));
    let mut o = 0;
    while o < r.row_bytes {
        // SAFETY: `prefetcht0` never faults, whatever the address; SSE is baseline.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(q.wrapping_add(o).cast()) };
        o += 64;
    }
}

/// One row of `n` bytes through `f(offset)` on `W`-byte vectors: whole vectors, then one
/// that ends at the row's end (overlapping), then for `n < W` the halves (16, 8, 4, 2, 1
/// bytes, each also overlapping); `g(offset, width)` handles those.
#[inline(always)]
pub(crate) fn walk<const W: usize>(n: usize, mut f: impl FnMut(usize), mut g: impl FnMut(usize, usize)) {
    if n == 0 {
        return;
    }
    if n >= W {
        let mut o = 0;
        while o + W <= n {
            f(o);
            o += W;
        }
        if o < n {
            f(n - W);
        }
        return;
    }
    let mut w = W / 2;
    while w > n {
        w /= 2;
    }
    // w <= n < 2 w: one chunk at 0, one ending at n.
    g(0, w);
    if w < n {
        g(n - w, w);
    }
}

/// One in-place row of `n` bytes on `W`-byte vectors `V`: every load of an overlapping
/// pair of accesses happens before either store (a load that partly overlaps a store
/// just made waits for it: no store forwarding), the same way the rotations order them.
///
/// # Safety
/// `row .. row + n` is valid for reads and writes; the CPU runs `ld`, `st`, `x`.
#[inline(always)]
pub(crate) unsafe fn xor_row<V: Copy, const W: usize>(
    row: *mut u8,
    n: usize,
    ld: &impl Fn(*const u8) -> V,
    st: &impl Fn(*mut u8, V),
    x: &impl Fn(V) -> V,
    zero: u64,
) {
    if n == 0 {
        return;
    }
    // SAFETY: every access below lies in `row .. row + n` (the caller's range).
    unsafe {
        if n.is_multiple_of(W) {
            // Whole vectors: nothing overlaps, so nothing is loaded ahead (an unused load
            // of the last vector first cost 1.2x on rows of 128 bytes 512 apart).
            let mut o = 0;
            while o < n {
                st(row.add(o), x(ld(row.add(o))));
                o += W;
            }
            return;
        }
        if n >= W {
            let last = ld(row.add(n - W));
            let mut o = 0;
            while o + W <= n {
                st(row.add(o), x(ld(row.add(o))));
                o += W;
            }
            st(row.add(n - W), x(last));
            return;
        }
        let mut w = W / 2;
        while w > n {
            w /= 2;
        }
        // w <= n < 2 w: a chunk at 0 and one ending at n, both loaded first.
        macro_rules! chunks {
            ($t:ty) => {{
                let (a, b) = (row.cast::<$t>(), row.add(n - w).cast::<$t>());
                let (va, vb) = (a.read_unaligned(), b.read_unaligned());
                a.write_unaligned(va ^ zero as $t);
                b.write_unaligned(vb ^ zero as $t);
            }};
        }
        match w {
            32 => {
                let z = _mm256_set1_epi64x(zero as i64);
                let (a, b) = (row.cast::<__m256i>(), row.add(n - 32).cast::<__m256i>());
                let (va, vb) = (_mm256_loadu_si256(a), _mm256_loadu_si256(b));
                _mm256_storeu_si256(a, _mm256_xor_si256(va, z));
                _mm256_storeu_si256(b, _mm256_xor_si256(vb, z));
            }
            16 => {
                let z = _mm_set1_epi64x(zero as i64);
                let (a, b) = (row.cast::<__m128i>(), row.add(n - 16).cast::<__m128i>());
                let (va, vb) = (_mm_loadu_si128(a), _mm_loadu_si128(b));
                _mm_storeu_si128(a, _mm_xor_si128(va, z));
                _mm_storeu_si128(b, _mm_xor_si128(vb, z));
            }
            8 => chunks!(u64),
            4 => chunks!(u32),
            2 => chunks!(u16),
            _ => chunks!(u8),
        }
    }
}

/// `w` bytes (1, 2, 4, 8, 16 or 32) copied from `s` to `d`.
///
/// # Safety
/// `s .. s + w` valid for reads, `d .. d + w` for writes; AVX2.
#[inline(always)]
pub(crate) unsafe fn small_copy(s: *const u8, d: *mut u8, w: usize) {
    // SAFETY: forwarded; every access is `w` bytes.
    unsafe {
        match w {
            32 => _mm256_storeu_si256(d.cast(), _mm256_loadu_si256(s.cast())),
            16 => _mm_storeu_si128(d.cast(), _mm_loadu_si128(s.cast())),
            8 => d.cast::<u64>().write_unaligned(s.cast::<u64>().read_unaligned()),
            4 => d.cast::<u32>().write_unaligned(s.cast::<u32>().read_unaligned()),
            2 => d.cast::<u16>().write_unaligned(s.cast::<u16>().read_unaligned()),
            _ => *d = *s,
        }
    }
}

/// The token loop of [`pass_in_place_tokens`](crate::kernels::roofline::pass_in_place_tokens) over a tier's row pass `f` (each
/// part's rows merged once, as [`pass_in_place`](crate::kernels::roofline::pass_in_place) merges them).
///
/// # Safety
/// As [`pass_in_place_tokens`](crate::kernels::roofline::pass_in_place_tokens); `f` is sound on any rows the caller's are.
#[inline(always)]
pub(crate) unsafe fn tokens_with(parts: [TokenPart; 2], tokens: usize, f: impl Fn(*mut u8, Rows)) {
    let merged = parts.map(|part| part.rows.merged());
    for t in 0..tokens {
        for (part, &(r, rest)) in parts.iter().zip(&merged) {
            // SAFETY: token t of the part is in bounds (caller); the rest lies at the end of
            // its single merged row.
            unsafe {
                let p = part.p.add(t * part.token_stride);
                f(p, r);
                if let Some(rest) = rest {
                    f(p.add(r.rows * r.stride), rest);
                }
            }
        }
    }
}

/// The in-place row pass on `W`-byte vectors: rows of 1-8, 12 or 16 whole vectors through
/// [`xor_fixed`] (the row's length known at compile time: unrolled, every load of a row
/// before its stores), any other through [`xor_row`]. The unrolled rows ran 1.3-1.5x
/// faster than the loop on rows of 128 bytes 512 apart (GPT-J f16 long, AVX2, Zen 3:
/// 2.9-3.2 against 2.0-2.2 ms for the same pass written out by hand), and rotations had
/// beaten the loop.
///
/// # Safety
/// As [`pass_in_place`](crate::kernels::roofline::pass_in_place) (merged rows); the CPU runs `ld`, `st`, `x`.
#[inline(always)]
pub(crate) unsafe fn rows_with<V: Copy, const W: usize>(
    p: *mut u8,
    r: Rows,
    zero: u64,
    ld: impl Fn(*const u8) -> V,
    st: impl Fn(*mut u8, V),
    x: impl Fn(V) -> V,
) {
    let ahead = r.ahead();
    macro_rules! fixed {
        ($($k:literal)*) => {
            if r.row_bytes.is_multiple_of(W) {
                match r.row_bytes / W {
                    $($k => {
                        for i in 0..r.rows {
                            if r.prefetch {
                                let q = p.wrapping_add(i.wrapping_add(ahead).wrapping_mul(r.stride));
                                for o in (0..$k * W).step_by(64) {
                                    // SAFETY: `prefetcht0` never faults; SSE is baseline.
                                    unsafe { _mm_prefetch::<_MM_HINT_T0>(q.wrapping_add(o).cast()) };
                                }
                            }
                            // SAFETY: row i (k whole vectors) is in bounds (caller).
                            unsafe { xor_fixed::<V, W, $k>(p.add(i * r.stride), &ld, &st, &x) };
                        }
                        return;
                    })*
                    _ => {}
                }
            }
        };
    }
    fixed!(1 2 3 4 5 6 7 8 12 16);
    for i in 0..r.rows {
        prefetch_ahead(p, i, &r, ahead);
        // SAFETY: row i is in bounds (caller); `xor_row` keeps every access inside it.
        unsafe { xor_row::<V, W>(p.add(i * r.stride), r.row_bytes, &ld, &st, &x, zero) };
    }
}

/// One in-place row of `K` whole `W`-byte vectors: all `K` loaded, then all stored.
///
/// # Safety
/// `row .. row + K * W` is valid for reads and writes; the CPU runs `ld`, `st`, `x`.
#[inline(always)]
pub(crate) unsafe fn xor_fixed<V: Copy, const W: usize, const K: usize>(
    row: *mut u8,
    ld: &impl Fn(*const u8) -> V,
    st: &impl Fn(*mut u8, V),
    x: &impl Fn(V) -> V,
) {
    // SAFETY: every access lies in `row .. row + K * W` (the caller's range).
    unsafe {
        let mut v = [ld(row); K];
        for (j, v) in v.iter_mut().enumerate().skip(1) {
            *v = ld(row.add(j * W));
        }
        for (j, v) in v.into_iter().enumerate() {
            st(row.add(j * W), x(v));
        }
    }
}

/// Streams `n` bytes from `s` to `d`: ordinary stores up to the first `W`-aligned byte
/// of `d` and for the last partial vector, non-temporal stores in between.
///
/// # Safety
/// `s .. s + n` valid for reads, `d .. d + n` for writes, not overlapping; AVX2.
#[inline(always)]
pub(crate) unsafe fn stream_row<const W: usize>(
    s: *const u8,
    d: *mut u8,
    n: usize,
    mut nt: impl FnMut(*const u8, *mut u8),
    mut plain: impl FnMut(*const u8, *mut u8, usize),
) {
    let lead = d.align_offset(W).min(n);
    if n < lead + W {
        plain(s, d, n);
        return;
    }
    if lead != 0 {
        plain(s, d, lead);
    }
    let mut o = lead;
    while o + W <= n {
        // SAFETY: o + W <= n; d + o is W-aligned.
        nt(unsafe { s.add(o) }, unsafe { d.add(o) });
        o += W;
    }
    if o < n {
        // SAFETY: o < n.
        plain(unsafe { s.add(o) }, unsafe { d.add(o) }, n - o);
    }
}

/// A non-temporal 32-byte store (an ordinary one under Miri, which cannot run the
/// inline assembly of `vmovntdq`).
///
/// # Safety
/// `d .. d + 32` is valid for writes and 32-byte aligned; AVX2.
#[inline(always)]
pub(crate) unsafe fn nt256(d: *mut u8, v: __m256i) {
    #[cfg(not(miri))]
    // SAFETY: forwarded from the caller.
    unsafe {
        _mm256_stream_si256(d.cast(), v)
    };
    #[cfg(miri)]
    // SAFETY: forwarded from the caller.
    unsafe {
        _mm256_storeu_si256(d.cast(), v)
    };
}

/// [`nt256`] for 64 bytes.
///
/// # Safety
/// `d .. d + 64` is valid for writes and 64-byte aligned; AVX-512F.
#[inline(always)]
pub(crate) unsafe fn nt512(d: *mut u8, v: __m512i) {
    #[cfg(not(miri))]
    // SAFETY: forwarded from the caller.
    unsafe {
        _mm512_stream_si512(d.cast(), v)
    };
    #[cfg(miri)]
    // SAFETY: forwarded from the caller.
    unsafe {
        _mm512_storeu_si512(d.cast(), v)
    };
}
