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
    pub(crate) fn merged(self) -> (Rows, Option<Rows>) {
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
    pub(crate) fn ahead(&self) -> usize {
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
        Tier::Avx2 => unsafe { crate::kernels::x86_64::avx2::roofline::pass(p, r, zero) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: forwarded; the tier proves AVX-512F.
        Tier::Avx512 => unsafe { crate::kernels::x86_64::avx512::roofline::pass(p, r, zero) },
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
        Tier::Avx2 => unsafe { crate::kernels::x86_64::avx2::roofline::tokens(parts, tokens, zero) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: forwarded; the tier proves AVX-512F.
        Tier::Avx512 => unsafe { crate::kernels::x86_64::avx512::roofline::tokens(parts, tokens, zero) },
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
        Tier::Avx2 => unsafe { crate::kernels::x86_64::avx2::roofline::copy(src, dst, r, streaming) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: forwarded; the tier proves AVX-512F.
        Tier::Avx512 => unsafe { crate::kernels::x86_64::avx512::roofline::copy(src, dst, r, streaming) },
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
