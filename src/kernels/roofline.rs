//! Memory rooflines for the benchmarks (issue 18): the fastest pass a tier can make over the
//! bytes a rotation touches, as an upper bound for the rotation's speed.
//!
//! Both passes walk `rows` rows of `row_bytes` bytes, `stride` bytes apart (the rotated part
//! of every head, or the whole heads out of place), with the tier's widest integer vectors:
//!
//! - [`pass_in_place`]: every byte read and written back unchanged (`x ^= zero`, where the
//!   caller passes an opaque zero so that the compiler cannot drop the store);
//! - [`copy`]: every byte copied to a destination of the same shape, with ordinary stores or
//!   (`streaming`) non-temporal ones that skip the read for ownership of the destination.
//!
//! A row that does not fill a whole vector ends with a vector that overlaps the previous
//! one (rewriting bytes with the same values), and rows shorter than a vector take halves
//! of it, so no row pays for a scalar tail. Rows that follow each other without a gap are
//! walked as one. [`pass_in_place_tokens`] is [`pass_in_place`] over several tensors token by
//! token in one call (a BSHD rotation's own order: q's heads of a token, then k's), so that
//! no per-token call overhead is charged to the roofline. No rounding or conversion is done: the f16/bf16 conversion roofline is
//! the tier's `scale` kernel ([`super::ScaleFn`]).

use crate::kernels::tier::Tier;

/// The shape of a roofline pass: `rows` rows of `row_bytes` bytes, `stride` bytes apart.
#[derive(Clone, Copy)]
pub(crate) struct Rows {
    pub rows: usize,
    pub stride: usize,
    pub row_bytes: usize,
    /// Prefetch the rows [`PREFETCH_BYTES`] ahead, as the rotations do for large calls
    /// (x86-64 tiers; a benchmark takes the faster of the passes with and without).
    pub prefetch: bool,
}

/// How far ahead a prefetching pass reads: the rotations' distance (4 KB).
const PREFETCH_BYTES: usize = 4096;

impl Rows {
    /// Rows that follow one another without a gap, merged into one; with `prefetch`, into
    /// [`PREFETCH_BYTES`]-byte rows (so that the per-row prefetch runs ahead) and the rest
    /// (the second value, at the first's end).
    fn merged(self) -> (Rows, Option<Rows>) {
        if self.stride != self.row_bytes || self.rows == 0 {
            return (self, None);
        }
        let n = self.row_bytes * self.rows;
        if !self.prefetch || n <= PREFETCH_BYTES {
            return (Rows { rows: 1, stride: n, row_bytes: n, ..self }, None);
        }
        let whole =
            Rows { rows: n / PREFETCH_BYTES, stride: PREFETCH_BYTES, row_bytes: PREFETCH_BYTES, ..self };
        let rest = n % PREFETCH_BYTES;
        (whole, (rest != 0).then_some(Rows { rows: 1, stride: rest, row_bytes: rest, ..self }))
    }

    /// Rows ahead that the prefetch of row `i` covers: at least [`PREFETCH_BYTES`] of them.
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    fn ahead(&self) -> usize {
        PREFETCH_BYTES.div_ceil(self.row_bytes.max(1))
    }
}

/// Reads and rewrites every byte of `r` at `p` (`x ^= zero`; `zero` must be 0).
///
/// # Safety
/// Every row `p + i * stride .. + row_bytes` (`i < rows`) is valid for reads and writes; the
/// CPU supports `tier`.
pub(crate) unsafe fn pass_in_place(tier: Tier, p: *mut u8, r: Rows, zero: u64) {
    let (r, rest) = r.merged();
    if let Some(rest) = rest {
        // SAFETY: the rest lies at the end of the caller's single merged row.
        unsafe { pass_in_place(tier, p.add(r.rows * r.stride), rest, zero) };
    }
    match tier {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: forwarded; the tier proves AVX2.
        Tier::Avx2 => unsafe { x86::pass_avx2(p, r, zero) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: forwarded; the tier proves AVX-512F.
        Tier::Avx512 => unsafe { x86::pass_avx512(p, r, zero) },
        // SAFETY: forwarded.
        _ => unsafe { pass_words(p, r, zero) },
    }
}

/// One tensor of a token-by-token pass ([`pass_in_place_tokens`]): per token, the rows of
/// `rows` from `p + t * token_stride` (bytes).
#[derive(Clone, Copy)]
pub(crate) struct TokenPart {
    pub p: *mut u8,
    pub token_stride: usize,
    pub rows: Rows,
}

/// [`pass_in_place`] of every part's rows, token by token: token 0 of each part in turn, then
/// token 1, and so on, in one call.
///
/// # Safety
/// For every part and every `t < tokens`, every row of `rows` at `p + t * token_stride` is
/// valid for reads and writes; the CPU supports `tier`.
pub(crate) unsafe fn pass_in_place_tokens(tier: Tier, parts: [TokenPart; 2], tokens: usize, zero: u64) {
    match tier {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: forwarded; the tier proves AVX2.
        Tier::Avx2 => unsafe { x86::tokens_avx2(parts, tokens, zero) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: forwarded; the tier proves AVX-512F.
        Tier::Avx512 => unsafe { x86::tokens_avx512(parts, tokens, zero) },
        _ => {
            for t in 0..tokens {
                for part in &parts {
                    // SAFETY: token t of the part is in bounds (caller).
                    unsafe { pass_in_place(tier, part.p.add(t * part.token_stride), part.rows, zero) };
                }
            }
        }
    }
}

/// Copies every row of `r` from `src` to `dst` (same shape), with streaming stores if asked
/// and the tier has them.
///
/// # Safety
/// Every row of `r` at `src` is valid for reads and at `dst` for writes; they do not overlap;
/// the CPU supports `tier`.
// Without x86-64 no tier has streaming stores: `streaming` is then only passed along.
#[cfg_attr(not(target_arch = "x86_64"), allow(clippy::only_used_in_recursion))]
pub(crate) unsafe fn copy(tier: Tier, src: *const u8, dst: *mut u8, r: Rows, streaming: bool) {
    let (r, rest) = r.merged();
    if let Some(rest) = rest {
        let o = r.rows * r.stride;
        // SAFETY: the rest lies at the end of the caller's single merged row.
        unsafe { copy(tier, src.add(o), dst.add(o), rest, streaming) };
    }
    match tier {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: forwarded; the tier proves AVX2.
        Tier::Avx2 => unsafe { x86::copy_avx2(src, dst, r, streaming) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: forwarded; the tier proves AVX-512F.
        Tier::Avx512 => unsafe { x86::copy_avx512(src, dst, r, streaming) },
        _ => {
            for i in 0..r.rows {
                // SAFETY: row i of both buffers is in bounds and they do not overlap.
                unsafe {
                    core::ptr::copy_nonoverlapping(src.add(i * r.stride), dst.add(i * r.stride), r.row_bytes)
                };
            }
        }
    }
}

/// The portable pass: 8-byte words (the compiler vectorises the loop for the baseline), the
/// last bytes one by one.
///
/// # Safety
/// As [`pass_in_place`].
unsafe fn pass_words(p: *mut u8, r: Rows, zero: u64) {
    for i in 0..r.rows {
        // SAFETY: row i is in bounds (caller).
        let row = unsafe { p.add(i * r.stride) };
        let words = r.row_bytes / 8;
        for w in 0..words {
            // SAFETY: w * 8 + 8 <= row_bytes.
            unsafe {
                let q = row.add(8 * w).cast::<u64>();
                q.write_unaligned(q.read_unaligned() ^ zero);
            }
        }
        for b in 8 * words..r.row_bytes {
            // SAFETY: b < row_bytes.
            unsafe { *row.add(b) ^= zero as u8 };
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use core::arch::x86_64::*;

    use super::{Rows, TokenPart};

    /// Prefetches the lines of row `i + r.ahead()` of `p` (past the buffer near its end:
    /// `prefetcht0` never faults), if `r.prefetch`.
    #[inline(always)]
    fn prefetch_row(p: *const u8, i: usize, r: &Rows) {
        prefetch_ahead(p, i, r, r.ahead());
    }

    /// [`prefetch_row`] with `r.ahead()` computed once by the caller (a division: per row, it
    /// was a visible part of a pass over short rows).
    #[inline(always)]
    fn prefetch_ahead(p: *const u8, i: usize, r: &Rows, ahead: usize) {
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
    fn walk<const W: usize>(n: usize, mut f: impl FnMut(usize), mut g: impl FnMut(usize, usize)) {
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
    unsafe fn xor_row<V: Copy, const W: usize>(
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
    unsafe fn small_copy(s: *const u8, d: *mut u8, w: usize) {
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

    /// # Safety
    /// As [`super::pass_in_place`], with AVX2.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn pass_avx2(p: *mut u8, r: Rows, zero: u64) {
        // SAFETY: forwarded.
        unsafe { rows_avx2(p, r, zero) }
    }

    /// # Safety
    /// As [`super::pass_in_place_tokens`], with AVX2.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn tokens_avx2(parts: [TokenPart; 2], tokens: usize, zero: u64) {
        let z = _mm256_set1_epi64x(zero as i64);
        // SAFETY: forwarded; the closures run with AVX2 (this function's features), and the
        // row pass is inlined into the token loop (a call per token and tensor cost ~0.3 ms
        // of 3 on GPT-J f16 long).
        unsafe {
            tokens_with(parts, tokens, |p, r| {
                rows_with::<__m256i, 32>(
                    p,
                    r,
                    zero,
                    |q| _mm256_loadu_si256(q.cast()),
                    |q, v| _mm256_storeu_si256(q.cast(), v),
                    |v| _mm256_xor_si256(v, z),
                )
            })
        }
    }

    /// # Safety
    /// As [`super::pass_in_place_tokens`], with AVX-512F.
    #[target_feature(enable = "avx512f,avx2")]
    pub(super) unsafe fn tokens_avx512(parts: [TokenPart; 2], tokens: usize, zero: u64) {
        let z = _mm512_set1_epi64(zero as i64);
        // SAFETY: forwarded; as `tokens_avx2`, with AVX-512F.
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

    /// The token loop of [`super::pass_in_place_tokens`] over a tier's row pass `f` (each
    /// part's rows merged once, as [`super::pass_in_place`] merges them).
    ///
    /// # Safety
    /// As [`super::pass_in_place_tokens`]; `f` is sound on any rows the caller's are.
    #[inline(always)]
    unsafe fn tokens_with(parts: [TokenPart; 2], tokens: usize, f: impl Fn(*mut u8, Rows)) {
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

    /// The AVX2 row pass.
    ///
    /// # Safety
    /// As [`super::pass_in_place`] (merged rows), with AVX2.
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn rows_avx2(p: *mut u8, r: Rows, zero: u64) {
        let z = _mm256_set1_epi64x(zero as i64);
        // SAFETY: forwarded; the closures run with AVX2 (this function's features).
        unsafe {
            rows_with::<__m256i, 32>(
                p,
                r,
                zero,
                |q| _mm256_loadu_si256(q.cast()),
                |q, v| _mm256_storeu_si256(q.cast(), v),
                |v| _mm256_xor_si256(v, z),
            )
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
    /// As [`super::pass_in_place`] (merged rows); the CPU runs `ld`, `st`, `x`.
    #[inline(always)]
    unsafe fn rows_with<V: Copy, const W: usize>(
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
    unsafe fn xor_fixed<V: Copy, const W: usize, const K: usize>(
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

    /// # Safety
    /// As [`super::pass_in_place`], with AVX-512F.
    #[target_feature(enable = "avx512f,avx2")]
    pub(super) unsafe fn pass_avx512(p: *mut u8, r: Rows, zero: u64) {
        // SAFETY: forwarded.
        unsafe { rows_avx512(p, r, zero) }
    }

    /// The AVX-512 row pass.
    ///
    /// # Safety
    /// As [`super::pass_in_place`] (merged rows), with AVX-512F.
    #[inline]
    #[target_feature(enable = "avx512f,avx2")]
    unsafe fn rows_avx512(p: *mut u8, r: Rows, zero: u64) {
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

    /// Streams `n` bytes from `s` to `d`: ordinary stores up to the first `W`-aligned byte
    /// of `d` and for the last partial vector, non-temporal stores in between.
    ///
    /// # Safety
    /// `s .. s + n` valid for reads, `d .. d + n` for writes, not overlapping; AVX2.
    #[inline(always)]
    unsafe fn stream_row<const W: usize>(
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
    unsafe fn nt256(d: *mut u8, v: __m256i) {
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
    unsafe fn nt512(d: *mut u8, v: __m512i) {
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

    /// # Safety
    /// As [`super::copy`], with AVX2.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn copy_avx2(src: *const u8, dst: *mut u8, r: Rows, streaming: bool) {
        // SAFETY (both closures): they are called with ranges inside the row.
        let plain = |s: *const u8, d: *mut u8, n: usize| unsafe {
            walk::<32>(
                n,
                |o| _mm256_storeu_si256(d.add(o).cast(), _mm256_loadu_si256(s.add(o).cast())),
                |o, w| small_copy(s.add(o), d.add(o), w),
            )
        };
        for i in 0..r.rows {
            prefetch_row(src, i, &r);
            // SAFETY: row i of both buffers is in bounds (caller).
            let (s, d) = unsafe { (src.add(i * r.stride), dst.add(i * r.stride)) };
            if streaming {
                // SAFETY: as above; `nt` gets 32-aligned destinations.
                unsafe {
                    stream_row::<32>(s, d, r.row_bytes, |s, d| nt256(d, _mm256_loadu_si256(s.cast())), plain)
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

    /// # Safety
    /// As [`super::copy`], with AVX-512F.
    #[target_feature(enable = "avx512f,avx2")]
    pub(super) unsafe fn copy_avx512(src: *const u8, dst: *mut u8, r: Rows, streaming: bool) {
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
}
