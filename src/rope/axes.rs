//! RoPE whose pairs take their positions from several streams: the engine under
//! [`MRope`](crate::MRope) (three streams t, h, w) and [`VisionRope`](crate::VisionRope)
//! (two streams h, w).
//!
//! One rule covers both: the angle of token `n`, pair `j` is
//! `position_ids[stream[j]][n] * inv_freq[freq[j]]`. The per-token cos/sin row is built
//! with the tier's own row generator ([`SinCos`]) over contiguous runs of pairs that share a
//! stream: the frequency tables are stored permuted into stream order (identity for
//! sectioned MRoPE and vision RoPE, so the row is generated in place; a permutation for
//! interleaved MRoPE, scattered into the row afterwards). The generator's lanes are
//! independent of one another, so a run gives each pair the bits the full row would give
//! it at that position: every tier stays bit-identical to the scalar one. The rotation is
//! the 1-D path's kernel ([`RotateArgs`]) with the token's row.

use super::{Direction, LineRow, RopeView, RotateToken, Tensors, SMALL_PAIRS};
use crate::config::{AngleMode, MAX_PAIRS};
use crate::cossin::CosSinTable;
use crate::element::Element;
use crate::error::RopeError;
use crate::freq::FreqRef;
use crate::kernels::sincos::{RowInputs, SinCos};
use crate::kernels::{Kernels, RotateArgs};
use crate::PairLayout;

/// Where the cos/sin rows of a multi-stream call come from.
#[derive(Clone, Copy, Debug)]
pub enum AxisRows<'a, const N: usize> {
    /// Generated per token on the fly from the `N` position streams (`position_ids[s][n]`
    /// is stream `s` of token `n`; each stream has one entry per token).
    Ids([&'a [u32]; N]),
    /// Per-token rows of a caller table: row `n` is token `n` (filled by
    /// [`MRope::fill_table`](crate::MRope::fill_table) or
    /// [`VisionRope::fill_table`](crate::VisionRope::fill_table); `rows() >= tokens`).
    Table(CosSinTable<'a>),
}

/// Per-call options of a multi-stream RoPE: the rows and the direction. `N` is the number
/// of position streams: 3 for [`MRopeOptions`](crate::MRopeOptions), 2 for
/// [`VisionOptions`](crate::VisionOptions).
#[derive(Clone, Copy, Debug)]
pub struct AxisOptions<'a, const N: usize> {
    /// cos/sin source.
    pub rows: AxisRows<'a, N>,
    /// Forward or inverse rotation.
    pub direction: Direction,
}

/// The old name of [`AxisOptions`].
#[deprecated(since = "0.2.0", note = "renamed to `AxisOptions`")]
pub type AxisApply<'a, const N: usize> = AxisOptions<'a, N>;

impl<'a, const N: usize> AxisOptions<'a, N> {
    /// Options with the position streams of every token, rows on the fly, forward.
    pub fn ids(position_ids: [&'a [u32]; N]) -> Self {
        AxisOptions { rows: AxisRows::Ids(position_ids), direction: Direction::Forward }
    }

    /// Options with per-token rows of a caller table (row `n` for token `n`), forward.
    pub fn table(table: CosSinTable<'a>) -> Self {
        AxisOptions { rows: AxisRows::Table(table), direction: Direction::Forward }
    }

    /// Builder: inverse rotation.
    pub fn inverse(mut self) -> Self {
        self.direction = Direction::Inverse;
        self
    }
}

/// The frequency tables of a multi-stream RoPE, permuted into stream order: slot `k` holds
/// pair `perm[k]`'s frequency; stream `s` owns slots `start[s]..start[s] + count[s]`.
#[derive(Clone, Debug)]
pub(crate) struct AxisFreqs {
    pairs: usize,
    streams: usize,
    count: [usize; 3],
    /// Slot order is pair order (sectioned MRoPE, vision RoPE).
    identity: bool,
    perm: [u16; MAX_PAIRS],
    /// Leading pairs `0..3 * tri` are `(t_i, h_i, w_i)` = slots `(i, count[0] + i, count[0]
    /// + count[1] + i)` for `i < tri` (interleaved MRoPE): scattered as a 3-way interleave.
    tri: usize,
    /// The other slots, `(slot, pair)`, scattered one by one (`rest_len` of them).
    rest: [(u16, u16); MAX_PAIRS],
    rest_len: usize,
    /// The index into the base frequency tables of each slot.
    freq: [u16; MAX_PAIRS],
    turns_hi: [f64; MAX_PAIRS],
    turns_lo: [f64; MAX_PAIRS],
    inv_freq_f32: [f32; MAX_PAIRS],
    attention_factor: f64,
}

impl AxisFreqs {
    /// Tables for `pairs` pairs (`<= MAX_PAIRS`) where pair `j` uses stream `stream_of(j) <
    /// streams` and base frequency `freq_of(j) < base.pairs()`.
    pub(crate) fn new(
        pairs: usize,
        streams: usize,
        stream_of: impl Fn(usize) -> usize,
        freq_of: impl Fn(usize) -> usize,
        base: &FreqRef<'_>,
    ) -> Self {
        let mut a = AxisFreqs {
            pairs,
            streams,
            count: [0; 3],
            identity: true,
            perm: [0; MAX_PAIRS],
            tri: 0,
            rest: [(0, 0); MAX_PAIRS],
            rest_len: 0,
            freq: [0; MAX_PAIRS],
            turns_hi: [0.0; MAX_PAIRS],
            turns_lo: [0.0; MAX_PAIRS],
            inv_freq_f32: [0.0; MAX_PAIRS],
            attention_factor: base.attention_factor,
        };
        let mut k = 0;
        for s in 0..streams {
            for j in (0..pairs).filter(|&j| stream_of(j) == s) {
                a.perm[k] = j as u16;
                a.freq[k] = freq_of(j) as u16;
                a.identity &= j == k;
                k += 1;
                a.count[s] += 1;
            }
        }
        debug_assert_eq!(k, pairs);
        if streams == 3 && !a.identity {
            let mut slot_of = [0usize; MAX_PAIRS];
            for (k, &j) in a.perm[..pairs].iter().enumerate() {
                slot_of[usize::from(j)] = k;
            }
            let (c0, c1) = (a.count[0], a.count[0] + a.count[1]);
            let at = |j: usize, want: usize| j < pairs && slot_of[j] == want;
            while at(3 * a.tri, a.tri) && at(3 * a.tri + 1, c0 + a.tri) && at(3 * a.tri + 2, c1 + a.tri) {
                a.tri += 1;
            }
            for (k, &j) in a.perm[..pairs].iter().enumerate() {
                if usize::from(j) >= 3 * a.tri {
                    a.rest[a.rest_len] = (k as u16, j);
                    a.rest_len += 1;
                }
            }
        } else if !a.identity {
            for (k, &j) in a.perm[..pairs].iter().enumerate() {
                a.rest[k] = (k as u16, j);
            }
            a.rest_len = pairs;
        }
        a.set_base(base);
        a
    }

    /// Copies the base tables into slot order (again after a caller `inv_freq_f32`).
    pub(crate) fn set_base(&mut self, base: &FreqRef<'_>) {
        let (hi, lo, f32s) = (base.turns_hi, base.turns_lo, base.inv_freq_f32);
        for k in 0..self.pairs {
            let f = usize::from(self.freq[k]);
            (self.turns_hi[k], self.turns_lo[k], self.inv_freq_f32[k]) = (hi[f], lo[f], f32s[f]);
        }
        self.attention_factor = base.attention_factor;
    }

    /// Fills the slot-order row of one token whose stream positions are `pos[..streams]`
    /// into `cos`, `sin` (`pairs` long).
    #[inline(always)]
    fn fill_slots(&self, gen: SinCos, mode: AngleMode, pos: &[u32; 3], cos: &mut [f32], sin: &mut [f32]) {
        // One position for every stream (text tokens: t = h = w): one run over all slots
        // (lanes are independent, so the same bits as a run per stream).
        let streams = &pos[..self.streams];
        let one = streams.iter().all(|&p| p == streams[0]);
        let (runs, count) = if one { (1, [self.pairs, 0, 0]) } else { (self.streams, self.count) };
        let mut at = 0;
        for (&p, &n) in pos.iter().zip(&count).take(runs) {
            let r = at..at + n;
            let inputs = RowInputs {
                mode,
                turns_hi: &self.turns_hi[r.clone()],
                turns_lo: &self.turns_lo[r.clone()],
                inv_freq_f32: &self.inv_freq_f32[r.clone()],
                attention_factor: self.attention_factor,
            };
            gen.fill(&inputs, p, &mut cos[r.clone()], &mut sin[r.clone()]);
            at = r.end;
        }
    }

    /// Fills the row of one token (pair order) into `cos`, `sin` (`pairs` long); `buf_cos`,
    /// `buf_sin` (`pairs` long) hold the slot-order row when that order is not the pairs'.
    #[inline(always)]
    fn fill_row(
        &self,
        gen: SinCos,
        mode: AngleMode,
        pos: &[u32; 3],
        (buf_cos, buf_sin): (&mut [f32], &mut [f32]),
        cos: &mut [f32],
        sin: &mut [f32],
    ) {
        if self.identity {
            self.fill_slots(gen, mode, pos, cos, sin);
            return;
        }
        self.fill_slots(gen, mode, pos, buf_cos, buf_sin);
        let m = self.tri;
        if m > 0 {
            let (c0, c1) = (self.count[0], self.count[0] + self.count[1]);
            for (row, buf) in [(&mut *cos, &*buf_cos), (&mut *sin, &*buf_sin)] {
                let (t, h, w) = (&buf[..m], &buf[c0..c0 + m], &buf[c1..c1 + m]);
                for (((d, &a), &b), &c) in row[..3 * m].chunks_exact_mut(3).zip(t).zip(h).zip(w) {
                    d[0] = a;
                    d[1] = b;
                    d[2] = c;
                }
            }
        }
        for &(k, j) in &self.rest[..self.rest_len] {
            let (k, j) = (usize::from(k), usize::from(j));
            cos[j] = buf_cos[k];
            sin[j] = buf_sin[k];
        }
    }
}

/// Fills per-token rows: row `n` of `cos`, `sin` (`tokens * pairs` each, `tokens` the
/// length of every stream) is token `n` at `position_ids[..][n]`.
///
/// # Errors
/// [`RopeError::PositionCountMismatch`] if the streams differ in length (against the first),
/// [`RopeError::TableShape`] if `cos` or `sin` is not `tokens * pairs` long.
pub(crate) fn fill_table<const N: usize>(
    rope: &RopeView<'_>,
    axes: &AxisFreqs,
    position_ids: [&[u32]; N],
    cos: &mut [f32],
    sin: &mut [f32],
) -> Result<(), RopeError> {
    let tokens = position_ids[0].len();
    for s in position_ids {
        if s.len() != tokens {
            return Err(RopeError::PositionCountMismatch { tokens, positions: s.len() });
        }
    }
    let pairs = axes.pairs;
    if cos.len() != sin.len() || tokens.checked_mul(pairs) != Some(cos.len()) {
        return Err(RopeError::TableShape);
    }
    let gen = SinCos::of(rope.kernels());
    let mode = rope.params.angle_mode;
    let (mut bc, mut bs) = (LineRow([0.0f32; MAX_PAIRS]), LineRow([0.0f32; MAX_PAIRS]));
    for (n, (c, s)) in cos.chunks_exact_mut(pairs).zip(sin.chunks_exact_mut(pairs)).enumerate() {
        let pos = positions_of(&position_ids, n);
        axes.fill_row(gen, mode, &pos, (&mut bc.0[..pairs], &mut bs.0[..pairs]), c, s);
    }
    Ok(())
}

/// [`fill_table`] into a new 64-byte-aligned [`RopeCache`](crate::RopeCache) of `tokens` rows.
///
/// # Errors
/// Those of [`fill_table`] but the shape, [`RopeError::PositionOverflow`] and
/// [`RopeError::OutOfMemory`] (as `Rope::build_cache`).
#[cfg(feature = "alloc")]
pub(crate) fn build_table<const N: usize>(
    rope: &RopeView<'_>,
    axes: &AxisFreqs,
    position_ids: [&[u32]; N],
) -> Result<crate::RopeCache, RopeError> {
    let tokens = position_ids[0].len();
    for s in position_ids {
        if s.len() != tokens {
            return Err(RopeError::PositionCountMismatch { tokens, positions: s.len() });
        }
    }
    let mut cache = crate::RopeCache::zeroed(tokens, axes.pairs)?;
    let (cos, sin) = cache.arrays_mut();
    fill_table(rope, axes, position_ids, cos, sin)?;
    Ok(cache)
}

/// The length of a call over `position_ids`: its largest position (over every stream) + 1;
/// 0 without positions.
pub(crate) fn seq_len<const N: usize>(position_ids: &[&[u32]; N]) -> u64 {
    position_ids.iter().flat_map(|s| s.iter()).max().map_or(0, |&m| u64::from(m) + 1)
}

/// [`seq_len`] of a call's rows; 0 for a table (whose rows carry their own frequencies).
pub(crate) fn call_seq_len<const N: usize>(rows: &AxisRows<'_, N>) -> u64 {
    match rows {
        AxisRows::Ids(ids) => seq_len(ids),
        AxisRows::Table(_) => 0,
    }
}

/// The stream positions of token `n` (unused streams 0).
#[inline(always)]
fn positions_of<const N: usize>(ids: &[&[u32]; N], n: usize) -> [u32; 3] {
    let mut pos = [0u32; 3];
    for (p, s) in pos.iter_mut().zip(ids.iter()) {
        *p = s[n];
    }
    pos
}

/// What rotating any token of a validated multi-stream call reads, besides its tensors.
#[derive(Clone, Copy)]
struct CallParams<'f> {
    /// The frequencies in pair order, when they are the base set itself (MRoPE: pair `j`
    /// uses `inv_freq[j]`): a token whose streams share one position takes its row from them
    /// in one run, with the bits of the per-stream runs (lanes are independent).
    pair_order: Option<FreqRef<'f>>,
    kernels: &'static Kernels,
    mode: AngleMode,
    layout: PairLayout,
    inverse: bool,
    head_dim: usize,
    pairs: usize,
}

/// Validates the rows of a call of `tokens` tokens (after its views), then rotates every
/// token. Check order: the stream lengths (first stream first), or the table width and
/// then its rows against the tokens.
///
/// # Errors
/// [`RopeError::PositionCountMismatch`] for a stream whose length is not `tokens`;
/// [`RopeError::TableShape`] for a table whose rows are not `pairs` wide;
/// [`RopeError::PositionOutOfRange`] (`position` = the last token index) for a table of
/// fewer rows than tokens; [`RopeError::PositionOverflow`] for more than `2^32` tokens with
/// a table.
#[inline(always)]
pub(crate) fn run<T: Element, const N: usize>(
    rope: &RopeView<'_>,
    axes: &AxisFreqs,
    tokens: usize,
    tensors: &Tensors<T>,
    opts: &AxisOptions<'_, N>,
    pair_order: Option<FreqRef<'_>>,
) -> Result<(), RopeError> {
    match opts.rows {
        AxisRows::Ids(ids) => {
            for s in ids {
                if s.len() != tokens {
                    return Err(RopeError::PositionCountMismatch { tokens, positions: s.len() });
                }
            }
        }
        AxisRows::Table(table) => {
            table.check_pairs(axes.pairs)?;
            if tokens > 0 {
                let last = u32::try_from(tokens - 1).map_err(|_| RopeError::PositionOverflow)?;
                if table.rows() < tokens {
                    return Err(RopeError::PositionOutOfRange { position: last, rows: table.rows() });
                }
            }
        }
    }
    if tokens == 0 || tensors.iter().flatten().all(|t| t.heads == 0) {
        return Ok(());
    }
    let p = CallParams {
        pair_order,
        kernels: rope.kernels(),
        mode: rope.params.angle_mode,
        layout: rope.params.layout,
        inverse: opts.direction == Direction::Inverse,
        head_dim: rope.params.head_dim,
        pairs: axes.pairs,
    };
    // The tensors come from views validated against the buffers the caller's call borrows
    // (`qk_tensors`, `qk_into_tensors`), `tokens` long; the rows were just checked.
    // SAFETY: the contract of `rotate_all` holds, as just said.
    unsafe { rotate_all(&p, axes, tensors, tokens, opts.rows) };
    Ok(())
}

/// Rotates tokens `0..tokens` of every tensor, each token with its own row.
///
/// # Safety
/// Every tensor comes from views validated against buffers that stay borrowed while this
/// runs, `tokens` long; the rows passed [`run`]'s checks for `tokens`; `p.kernels` came from
/// the dispatcher.
#[inline(always)]
unsafe fn rotate_all<T: Element, const N: usize>(
    p: &CallParams<'_>,
    axes: &AxisFreqs,
    tensors: &Tensors<T>,
    tokens: usize,
    rows: AxisRows<'_, N>,
) {
    let rotate = T::rotate_fn(p.kernels);
    // The 1-D path's prefetch rule (`rotate_tokens`): whole call beyond the threshold, heads
    // of a token closer together than a head's consecutive tokens.
    let head_bytes = 2 * p.pairs * core::mem::size_of::<T>();
    let bytes = tensors
        .iter()
        .flatten()
        .fold(0usize, |b, x| b.saturating_add(x.heads.saturating_mul(head_bytes)))
        .saturating_mul(tokens);
    let large = bytes > crate::kernels::PREFETCH_MIN_BYTES;
    let rotate_token = |t: usize, cos: &[f32], sin: &[f32]| {
        for x in tensors.iter().flatten() {
            if x.heads == 0 {
                continue;
            }
            let args = RotateArgs {
                // SAFETY: t < tokens of a view validated against its buffer (contract above).
                src: unsafe { x.src.add(t * x.src_token_stride) },
                // SAFETY: as above, for the output view.
                dst: unsafe { x.dst.add(t * x.dst_token_stride) },
                heads: x.heads,
                src_head_stride: x.src_head_stride,
                dst_head_stride: x.dst_head_stride,
                head_dim: p.head_dim,
                cos,
                sin,
                layout: p.layout,
                inverse: p.inverse,
                prefetch: large && x.src_head_stride < x.src_token_stride,
            };
            // Validated views keep every head of token t in bounds and apart from other rows.
            // SAFETY: as above (contract of `rotate_all`); the dispatcher checked the CPU.
            unsafe { rotate(&args) };
        }
    };
    match rows {
        AxisRows::Table(table) => {
            for t in 0..tokens {
                // Checked: tokens <= rows and tokens - 1 fits in u32.
                let (cos, sin) = table.row_in_range(t as u32);
                rotate_token(t, cos, sin);
            }
        }
        AxisRows::Ids(ids) if p.pairs <= SMALL_PAIRS => {
            on_the_fly::<N, SMALL_PAIRS>(p, axes, &ids, tokens, &rotate_token)
        }
        AxisRows::Ids(ids) => on_the_fly_large::<N>(p, axes, &ids, tokens, &rotate_token),
    }
}

/// Generates the row of every token into buffers of `M >= pairs` entries and rotates it.
#[inline(always)]
fn on_the_fly<const N: usize, const M: usize>(
    p: &CallParams<'_>,
    axes: &AxisFreqs,
    ids: &[&[u32]; N],
    tokens: usize,
    rotate_token: &impl Fn(usize, &[f32], &[f32]),
) {
    let gen = SinCos::of(p.kernels);
    let (mut cos, mut sin) = (LineRow([0.0f32; M]), LineRow([0.0f32; M]));
    let (mut bc, mut bs) = (LineRow([0.0f32; M]), LineRow([0.0f32; M]));
    let n = p.pairs;
    for t in 0..tokens {
        let pos = positions_of(ids, t);
        let (c, s) = (&mut cos.0[..n], &mut sin.0[..n]);
        match p.pair_order {
            Some(f) if pos[..N].iter().all(|&x| x == pos[0]) => {
                gen.fill(&RowInputs::new(&f, p.mode), pos[0], c, s)
            }
            _ => axes.fill_row(gen, p.mode, &pos, (&mut bc.0[..n], &mut bs.0[..n]), c, s),
        }
        rotate_token(t, c, s);
    }
}

/// [`on_the_fly`] for rows of more than [`SMALL_PAIRS`] pairs, in its own frame.
#[inline(never)]
fn on_the_fly_large<const N: usize>(
    p: &CallParams<'_>,
    axes: &AxisFreqs,
    ids: &[&[u32]; N],
    tokens: usize,
    rotate_token: &RotateToken<'_>,
) {
    on_the_fly::<N, MAX_PAIRS>(p, axes, ids, tokens, &rotate_token);
}
