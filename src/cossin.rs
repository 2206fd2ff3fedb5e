//! Sources of cos/sin rows: generated on the fly, a caller's table, or a cache.
//!
//! A row holds `rotary_dim / 2` values for one position `p`:
//! `cos[i] = attention_factor * cos(p * inv_freq[i])`, `sin[i] = attention_factor *
//! sin(p * inv_freq[i])`, each rounded once to f32.

use crate::config::AngleMode;
use crate::error::RopeError;
use crate::freq::FreqRef;
#[cfg(any(test, feature = "bench-internals"))]
use crate::freq::Frequencies;
use crate::kernels::sincos::{RowInputs, SinCos};

/// A table of cos/sin rows indexed by position, borrowed from the caller (no allocation).
///
/// Layout: row `p` (position `p`) is `cos[p * pairs .. (p + 1) * pairs]` and the same range
/// of `sin`, with `pairs = rotary_dim / 2`; valid positions are `0..rows()`. Row `p` holds
/// `attention_factor * cos(p * inv_freq[i])` for `i in 0..pairs` (not the HF duplicated
/// `[cos | cos]` layout of width `rotary_dim`). [`Rope::fill_table`](crate::Rope::fill_table)
/// fills such a table; so can the caller, e.g. with per-token rows (then call with
/// positions `0..tokens`).
#[derive(Clone, Copy, Debug)]
pub struct CosSinTable<'a> {
    cos: &'a [f32],
    sin: &'a [f32],
    pairs: usize,
}

impl<'a> CosSinTable<'a> {
    /// Wraps two slices of `rows * pairs` values.
    ///
    /// ```
    /// use rope_kernels::CosSinTable;
    ///
    /// // 2 positions of rotary_dim 4 (2 pairs), written by the caller.
    /// let cos = [1.0, 1.0, 0.5403023, 0.99995];
    /// let sin = [0.0, 0.0, 0.84147096, 0.0099998335];
    /// let table = CosSinTable::new(&cos, &sin, 2)?;
    /// assert_eq!(table.rows(), 2);
    /// assert_eq!(table.row(1)?, (&cos[2..], &sin[2..]));
    /// assert!(table.row(2).is_err());
    /// # Ok::<(), rope_kernels::RopeError>(())
    /// ```
    ///
    /// # Errors
    /// [`RopeError::TableShape`] if `pairs` is 0, the lengths differ, or are not a multiple
    /// of `pairs`.
    pub fn new(cos: &'a [f32], sin: &'a [f32], pairs: usize) -> Result<Self, RopeError> {
        if pairs == 0 || cos.len() != sin.len() || !cos.len().is_multiple_of(pairs) {
            return Err(RopeError::TableShape);
        }
        Ok(CosSinTable { cos, sin, pairs })
    }

    /// Values per row (`rotary_dim / 2`).
    pub fn pairs(&self) -> usize {
        self.pairs
    }

    /// Number of rows (positions `0..rows`).
    pub fn rows(&self) -> usize {
        self.cos.len() / self.pairs
    }

    /// The cos and sin rows of `position`.
    ///
    /// # Errors
    /// [`RopeError::PositionOutOfRange`].
    pub fn row(&self, position: u32) -> Result<(&'a [f32], &'a [f32]), RopeError> {
        let p = position as usize;
        if p >= self.rows() {
            return Err(RopeError::PositionOutOfRange { position, rows: self.rows() });
        }
        let r = p * self.pairs..(p + 1) * self.pairs;
        Ok((&self.cos[r.clone()], &self.sin[r]))
    }

    /// Unchecked-position row, for positions validated beforehand.
    #[inline(always)]
    pub(crate) fn row_in_range(&self, position: u32) -> (&'a [f32], &'a [f32]) {
        let start = position as usize * self.pairs;
        let r = start..start + self.pairs;
        (&self.cos[r.clone()], &self.sin[r])
    }

    /// The rows of positions `first .. first + n`, one after another, for positions
    /// validated beforehand.
    #[inline(always)]
    pub(crate) fn rows_in_range(&self, first: u32, n: usize) -> (&'a [f32], &'a [f32]) {
        let r = first as usize * self.pairs..(first as usize + n) * self.pairs;
        (&self.cos[r.clone()], &self.sin[r])
    }

    pub(crate) fn check_pairs(&self, pairs: usize) -> Result<(), RopeError> {
        if self.pairs != pairs {
            return Err(RopeError::TableShape);
        }
        Ok(())
    }
}

/// Fills one cos/sin row for `position` with the generator `gen` (the one of the tier in
/// use; see [`kernels::sincos`](crate::kernels::sincos) for the algorithm and its error
/// bound): `cos[i] = f32(attention_factor * cos(angle_i))`, the same for `sin`, with one
/// rounding to f32.
///
/// `Exact`: `angle_i` is the exact product of `position` and the f64 `inv_freq[i]`, reduced
/// exactly modulo 2π. `HfCompatible`: `angle_i = f32(position) * inv_freq_f32[i]` rounded in
/// f32 (as transformers forms it), then the same accurate reduction of that f32 angle.
#[inline]
pub(crate) fn fill_row(
    gen: SinCos,
    freqs: &FreqRef<'_>,
    mode: AngleMode,
    position: u32,
    cos: &mut [f32],
    sin: &mut [f32],
) {
    gen.fill(&RowInputs::new(freqs, mode), position, cos, sin);
}

/// The former generator, kept only as a test and benchmark reference: the angle
/// `position * inv_freq[i]` formed by one f64 multiplication (`HfCompatible`: the f32
/// product), cos and sin by `libm` in f64, times the attention factor in f64, rounded once to
/// f32. Above position 2^24 the f64 product itself is off by up to `2^-53 * angle`.
#[cfg(any(test, feature = "bench-internals"))]
pub(crate) fn fill_row_libm(
    freqs: &Frequencies,
    mode: AngleMode,
    position: u32,
    cos: &mut [f32],
    sin: &mut [f32],
) {
    let af = freqs.attention_factor();
    match mode {
        AngleMode::HfCompatible => {
            let p = position as f32;
            for (i, &f) in freqs.inv_freq_f32().iter().enumerate() {
                let angle = f64::from(p * f);
                cos[i] = (libm::cos(angle) * af) as f32;
                sin[i] = (libm::sin(angle) * af) as f32;
            }
        }
        _ => {
            let p = f64::from(position);
            for (i, &f) in freqs.inv_freq().iter().enumerate() {
                let angle = p * f;
                cos[i] = (libm::cos(angle) * af) as f32;
                sin[i] = (libm::sin(angle) * af) as f32;
            }
        }
    }
}

/// A precomputed cos/sin cache for positions `0..max_positions` (needs `alloc`).
///
/// Each of the two arrays starts on a 64-byte boundary (a cache line; one AVX-512 vector),
/// so with `rotary_dim / 2` a multiple of 16 every row is aligned and the kernels' row loads
/// never straddle two lines.
#[cfg(feature = "alloc")]
#[derive(Debug)]
pub struct RopeCache {
    cos: Aligned,
    sin: Aligned,
    pairs: usize,
}

/// `len` f32 starting at a 64-byte boundary inside an over-allocated `Vec`.
#[cfg(feature = "alloc")]
#[derive(Debug)]
struct Aligned {
    buf: alloc::vec::Vec<f32>,
    at: usize,
    len: usize,
}

#[cfg(feature = "alloc")]
impl Aligned {
    /// f32 per 64-byte line.
    const LINE: usize = 16;

    /// `len` zeros on a 64-byte boundary.
    ///
    /// # Errors
    /// [`RopeError::PositionOverflow`] if the size overflows the address space,
    /// [`RopeError::OutOfMemory`] if the allocator refuses it.
    fn zeroed(len: usize) -> Result<Self, RopeError> {
        let n = len.checked_add(Self::LINE - 1).ok_or(RopeError::PositionOverflow)?;
        let bytes = n
            .checked_mul(core::mem::size_of::<f32>())
            .filter(|&b| b <= isize::MAX as usize)
            .ok_or(RopeError::PositionOverflow)?;
        let mut buf = alloc::vec::Vec::new();
        buf.try_reserve_exact(n).map_err(|_| RopeError::OutOfMemory { bytes })?;
        buf.resize(n, 0.0f32);
        let at = Self::line_start(&buf);
        Ok(Aligned { buf, at, len })
    }

    /// The first index below `LINE` on a 64-byte line (f32 addresses are multiples of 4, so
    /// there is one; `LINE - 1` where `align_offset` declines to say, as Miri may).
    fn line_start(buf: &[f32]) -> usize {
        buf.as_ptr().align_offset(64).min(Self::LINE - 1)
    }

    fn get(&self) -> &[f32] {
        &self.buf[self.at..self.at + self.len]
    }

    fn get_mut(&mut self) -> &mut [f32] {
        &mut self.buf[self.at..self.at + self.len]
    }
}

#[cfg(feature = "alloc")]
impl Clone for Aligned {
    /// A copy with its own 64-byte alignment: the clone's buffer may start elsewhere within a
    /// line, so its contents move to the new boundary (the buffer has `LINE - 1` spare
    /// elements for that). Like any `Vec` clone, aborts if the allocation fails.
    fn clone(&self) -> Self {
        let mut buf = self.buf.clone();
        let at = Self::line_start(&buf);
        buf.copy_within(self.at..self.at + self.len, at);
        Aligned { buf, at, len: self.len }
    }
}

#[cfg(feature = "alloc")]
impl Clone for RopeCache {
    fn clone(&self) -> Self {
        RopeCache { cos: self.cos.clone(), sin: self.sin.clone(), pairs: self.pairs }
    }
}

#[cfg(feature = "alloc")]
impl RopeCache {
    /// A zeroed cache of `rows` rows of `pairs` (`pairs >= 1`).
    ///
    /// # Errors
    /// As [`Aligned::zeroed`].
    pub(crate) fn zeroed(rows: usize, pairs: usize) -> Result<Self, RopeError> {
        let n = rows.checked_mul(pairs).ok_or(RopeError::PositionOverflow)?;
        Ok(RopeCache { cos: Aligned::zeroed(n)?, sin: Aligned::zeroed(n)?, pairs })
    }

    /// Both arrays, to fill.
    pub(crate) fn arrays_mut(&mut self) -> (&mut [f32], &mut [f32]) {
        (self.cos.get_mut(), self.sin.get_mut())
    }

    /// The cache as a borrowed table, to pass as [`CosSin::Table`](crate::CosSin::Table).
    ///
    /// ```
    /// use rope_kernels::{Rope, RopeConfig};
    ///
    /// let rope = Rope::new(RopeConfig::new(8, 10_000.0))?;
    /// let cache = rope.build_cache(16)?;
    /// let (cos, sin) = cache.table().row(0)?;
    /// assert_eq!((cos, sin), (&[1.0f32; 4][..], &[0.0f32; 4][..]));
    /// # Ok::<(), rope_kernels::RopeError>(())
    /// ```
    pub fn table(&self) -> CosSinTable<'_> {
        CosSinTable { cos: self.cos.get(), sin: self.sin.get(), pairs: self.pairs }
    }

    /// Number of positions cached.
    pub fn rows(&self) -> usize {
        self.cos.len / self.pairs
    }
}

#[cfg(all(test, feature = "alloc"))]
mod tests {
    use crate::{Rope, RopeConfig};

    /// Rows of 64 pairs start on 64-byte lines (where the allocator allows it: Miri may
    /// refuse `align_offset`), and a clone is equal and aligned on its own.
    #[test]
    fn cache_rows_are_line_aligned_and_clones_equal() {
        let cache = Rope::new(RopeConfig::new(128, 10_000.0)).unwrap().build_cache(9).unwrap();
        let copy = cache.clone();
        for c in [&cache, &copy] {
            let t = c.table();
            assert_eq!(t.rows(), 9);
            for p in 0..9 {
                let (cos, sin) = t.row(p).unwrap();
                if !cfg!(miri) {
                    assert_eq!(cos.as_ptr() as usize % 64, 0);
                    assert_eq!(sin.as_ptr() as usize % 64, 0);
                }
                assert_eq!((cos, sin), cache.table().row(p).unwrap());
            }
        }
        // Position 3, pair 1: sin(3 * 10000^(-2/128)), within the generator's 3e-8.
        let want = libm::sin(3.0 * libm::pow(10_000.0, -2.0 / 128.0));
        assert!((f64::from(cache.table().row(3).unwrap().1[1]) - want).abs() < 6e-8);
    }
}
