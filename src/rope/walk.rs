//! The one walk of every call: the checks after the views ([`RopeView::check_call`]), the
//! frequencies of the call, and the per-token loop that calls the kernels
//! ([`rotate_tokens`]).

use core::ops::Range;

use super::{ApplyOptions, CosSin, Direction, Heads, HeadsMut, Positions, RopeView};
use crate::config::{AngleMode, PairLayout, MAX_PAIRS};
use crate::cossin::{fill_row, CosSinTable};
use crate::element::Element;
use crate::error::{Operand, RopeError};
use crate::freq::{compute_inv_freq, FreqRef};
use crate::kernels::sincos::SinCos;
use crate::kernels::{Kernels, RotateArgs};
use crate::view::View;

impl<'r> RopeView<'r> {
    /// Validates positions and the cos/sin source ([`RopeView::check_call`]), then rotates every
    /// token ([`rotate_tokens`]).
    #[inline(always)]
    pub(super) fn run<T: Element>(
        &self,
        tokens: usize,
        tensors: &Tensors<T>,
        opts: &ApplyOptions<'_>,
    ) -> Result<(), RopeError> {
        let Some(seq_len) = self.check_call(tokens, tensors, opts)? else {
            return Ok(());
        };
        let p = self.token_params(opts, tokens);
        self.with_freqs(seq_len, opts.cos_sin, |freqs| {
            // The tensors come from views validated against the buffers this call borrows
            // (`apply_qk`, `apply_qk_into`), all `tokens` long; the call holds the only borrows
            // of those buffers; `check_call` passed the positions and cos/sin source for
            // `tokens` tokens; `kernels()` comes from the dispatcher.
            // SAFETY: the contract of `rotate_tokens` holds, as just said.
            unsafe { rotate_tokens(&p, freqs, tensors, 0..tokens) }
        })
    }

    /// Runs `body` with the frequencies of a validated call of length `seq_len` (largest
    /// position + 1) that writes: the object's own, or (dynamic NTK, LongRoPE) those computed
    /// for the call. A call with a cos/sin table never uses frequencies (issue 18: dynamic
    /// NTK and LongRoPE computed theirs even then), so it gets the object's own.
    ///
    /// Each path has a frame of its own (issue 13): the fixed one's row buffers are not on
    /// the stack while a per-call one runs with its frequencies.
    #[inline(always)]
    pub(super) fn with_freqs<F: FnOnce(&FreqRef<'_>)>(
        &self,
        seq_len: u64,
        cos_sin: CosSin<'_>,
        body: F,
    ) -> Result<(), RopeError> {
        if !self.per_call(seq_len) || matches!(cos_sin, CosSin::Table(_)) {
            return self.run_fixed(seq_len, cos_sin, body);
        }
        if self.pairs() <= SMALL_PAIRS {
            return self.run_dynamic::<F, SMALL_PAIRS>(seq_len, cos_sin, body);
        }
        self.run_dynamic::<F, MAX_PAIRS>(seq_len, cos_sin, body)
    }

    /// [`RopeView::with_freqs`] for frequencies stored in the object. Out of line on 32-bit
    /// targets (its own frame, for the microcontroller stack bound of issue 13); inlined on
    /// 64-bit ones, where the extra call measured +6-12% on decode (scripts/bench-gate.sh).
    #[cfg_attr(target_pointer_width = "64", inline(always))]
    #[cfg_attr(not(target_pointer_width = "64"), inline(never))]
    pub(super) fn run_fixed<F: FnOnce(&FreqRef<'_>)>(
        &self,
        seq_len: u64,
        cos_sin: CosSin<'_>,
        body: F,
    ) -> Result<(), RopeError> {
        self.run_with(seq_len, cos_sin, &mut FixedFreqs, body)
    }

    /// [`RopeView::with_freqs`] for frequencies that depend on the call's length (dynamic NTK,
    /// LongRoPE): out of line, so that only these calls carry the per-call
    /// [`Frequencies`](crate::Frequencies) on their stack.
    #[inline(never)]
    pub(super) fn run_dynamic<F: FnOnce(&FreqRef<'_>), const N: usize>(
        &self,
        seq_len: u64,
        cos_sin: CosSin<'_>,
        body: F,
    ) -> Result<(), RopeError> {
        let mut dynamic = CallFreqs::<N>::new();
        self.run_call(seq_len, cos_sin, &mut dynamic, body)
    }

    /// The body of [`RopeView::run_dynamic`], once for every slot size (less code: issue 13).
    #[inline(never)]
    pub(super) fn run_call<F: FnOnce(&FreqRef<'_>)>(
        &self,
        seq_len: u64,
        cos_sin: CosSin<'_>,
        dynamic: &mut dyn FreqSlot,
        body: F,
    ) -> Result<(), RopeError> {
        self.run_with(seq_len, cos_sin, dynamic, body)
    }

    #[inline(always)]
    pub(super) fn run_with<F: FnOnce(&FreqRef<'_>), D: FreqSlot + ?Sized>(
        &self,
        seq_len: u64,
        cos_sin: CosSin<'_>,
        dynamic: &mut D,
        body: F,
    ) -> Result<(), RopeError> {
        // `seq_len` is that of a call that passed its checks and writes. A call with a table
        // reads no frequencies.
        let freqs =
            if matches!(cos_sin, CosSin::Table(_)) { self.freqs } else { self.freqs_at(seq_len, dynamic)? };
        body(&freqs);
        Ok(())
    }

    /// Validates the views of an in-place call, in the documented order (the q view, the k
    /// view, k's token count against q's), and returns the call's token count and tensors.
    #[inline]
    pub(super) fn qk_tensors<T: Element>(
        &self,
        q: HeadsMut<'_, T>,
        k: Option<HeadsMut<'_, T>>,
    ) -> Result<(usize, Tensors<T>), RopeError> {
        let hd = self.params.head_dim;
        q.view.validate(hd, q.data.len(), Operand::Q)?;
        let qp = q.data.as_mut_ptr();
        let mut tensors = [Some(Tensor::new(qp, qp, q.view, q.view)), None];
        if let Some(k) = k {
            k.view.validate(hd, k.data.len(), Operand::K)?;
            if k.view.tokens != q.view.tokens {
                return Err(RopeError::ShapeMismatch { operand: Operand::K });
            }
            let kp = k.data.as_mut_ptr();
            tensors[1] = Some(Tensor::new(kp, kp, k.view, k.view));
        }
        Ok((q.view.tokens, tensors))
    }

    /// Validates the views of an out-of-place call, in the documented order (q, q's output,
    /// q against its output; the same for k; k's token count against q's), and returns the
    /// call's token count and tensors.
    #[inline]
    pub(super) fn qk_into_tensors<T: Element>(
        &self,
        q: Heads<'_, T>,
        q_out: HeadsMut<'_, T>,
        k: Option<(Heads<'_, T>, HeadsMut<'_, T>)>,
    ) -> Result<(usize, Tensors<T>), RopeError> {
        let hd = self.params.head_dim;
        let pair = |x: &Heads<'_, T>, o: HeadsMut<'_, T>, op_in: Operand, op_out: Operand| {
            x.view.validate(hd, x.data.len(), op_in)?;
            o.view.validate(hd, o.data.len(), op_out)?;
            if o.view.tokens != x.view.tokens || o.view.heads != x.view.heads {
                return Err(RopeError::ShapeMismatch { operand: op_out });
            }
            Ok(Tensor::new(x.data.as_ptr(), o.data.as_mut_ptr(), x.view, o.view))
        };
        let mut tensors = [Some(pair(&q, q_out, Operand::Q, Operand::QOut)?), None];
        if let Some((k, k_out)) = k {
            let t = pair(&k, k_out, Operand::K, Operand::KOut)?;
            if k.view.tokens != q.view.tokens {
                return Err(RopeError::ShapeMismatch { operand: Operand::K });
            }
            tensors[1] = Some(t);
        }
        Ok((q.view.tokens, tensors))
    }

    /// The checks of every call after its views, single or prepared (same errors, same
    /// order): the `position_ids` count or `start` overflow, then the table width, then the
    /// largest position against the table rows. For a call that writes (some token, some
    /// head) it then returns the call's length (largest position + 1), which picks its
    /// frequencies ([`RopeView::freqs_at`]); `None` for an `Ok` no-op.
    #[inline]
    pub(super) fn check_call<T>(
        &self,
        tokens: usize,
        tensors: &Tensors<T>,
        opts: &ApplyOptions<'_>,
    ) -> Result<Option<u64>, RopeError> {
        let max_pos = max_position(opts.positions, tokens)?;
        check_table(self.pairs(), opts.cos_sin, max_pos)?;
        let Some(max_pos) = max_pos else { return Ok(None) };
        if tensors.iter().flatten().all(|t| t.heads == 0) {
            return Ok(None);
        }
        Ok(Some(u64::from(max_pos) + 1))
    }

    /// The per-token settings of a call of `tokens` tokens with options `opts`.
    #[inline]
    pub(super) fn token_params<'o>(&self, opts: &ApplyOptions<'o>, tokens: usize) -> TokenParams<'o> {
        TokenParams {
            call_tokens: tokens,
            positions: opts.positions,
            cos_sin: opts.cos_sin,
            kernels: self.kernels(),
            layout: self.params.layout,
            mode: self.params.angle_mode,
            inverse: opts.direction == Direction::Inverse,
            head_dim: self.params.head_dim,
            pairs: self.pairs(),
        }
    }
}

/// The positions check of every call: the `position_ids` count against `tokens`, or `start`
/// overflow; returns the largest position (`None` without tokens).
#[inline]
pub(super) fn max_position(positions: Positions<'_>, tokens: usize) -> Result<Option<u32>, RopeError> {
    match positions {
        Positions::Ids(ids) => {
            if ids.len() != tokens {
                return Err(RopeError::PositionCountMismatch { tokens, positions: ids.len() });
            }
            Ok(ids.iter().copied().max())
        }
        Positions::Start(s) => {
            if tokens == 0 {
                return Ok(None);
            }
            let last = u32::try_from(tokens - 1).ok().and_then(|n| s.checked_add(n));
            Ok(Some(last.ok_or(RopeError::PositionOverflow)?))
        }
    }
}

/// The cos/sin check of every call: a table's width (`pairs`), then its rows against the
/// largest position.
#[inline]
pub(super) fn check_table(pairs: usize, cos_sin: CosSin<'_>, max_pos: Option<u32>) -> Result<(), RopeError> {
    if let CosSin::Table(table) = cos_sin {
        table.check_pairs(pairs)?;
        if let Some(m) = max_pos {
            if m as usize >= table.rows() {
                return Err(RopeError::PositionOutOfRange { position: m, rows: table.rows() });
            }
        }
    }
    Ok(())
}

/// Where [`RopeView::check_call`] puts the frequencies of a call that depend on its length.
pub(crate) trait FreqSlot {
    /// Computes the frequencies of a call of length `seq_len` into the slot.
    fn fill<'f>(&'f mut self, rope: &RopeView<'_>, seq_len: u64) -> Result<FreqRef<'f>, RopeError>;
}

/// The frequencies of one call computed for its length (dynamic NTK, LongRoPE without
/// precomputed long frequencies), for up to `N` pairs: the row generator's tables only
/// (20 bytes per pair; no f64 `inv_freq`, which is computed into `turns_hi` and reduced in
/// place).
#[derive(Debug)]
pub(crate) struct CallFreqs<const N: usize> {
    inv_freq_f32: [f32; N],
    turns_hi: [f64; N],
    turns_lo: [f64; N],
    pairs: usize,
    attention_factor: f64,
}

impl<const N: usize> CallFreqs<N> {
    pub(crate) fn new() -> Self {
        CallFreqs {
            inv_freq_f32: [0.0; N],
            turns_hi: [0.0; N],
            turns_lo: [0.0; N],
            pairs: 0,
            attention_factor: 1.0,
        }
    }

    /// The tables, borrowed (as filled by the last [`FreqSlot::fill`]).
    pub(crate) fn view(&self) -> FreqRef<'_> {
        let n = self.pairs;
        FreqRef {
            inv_freq: &[],
            inv_freq_f32: &self.inv_freq_f32[..n],
            turns_hi: &self.turns_hi[..n],
            turns_lo: &self.turns_lo[..n],
            attention_factor: self.attention_factor,
        }
    }
}

impl<const N: usize> FreqSlot for CallFreqs<N> {
    #[inline(never)]
    fn fill<'f>(&'f mut self, rope: &RopeView<'_>, seq_len: u64) -> Result<FreqRef<'f>, RopeError> {
        let n = rope.pairs();
        if n > N {
            // Callers size the slot by the pairs; never taken.
            return Err(RopeError::RotaryDimTooLarge { rotary_dim: 2 * n, max: 2 * N });
        }
        let inv = &mut self.turns_hi[..n];
        self.attention_factor = compute_inv_freq(&rope.params, seq_len, inv)?;
        if rope.caller_f32 {
            self.inv_freq_f32[..n].copy_from_slice(rope.freqs.inv_freq_f32);
        } else {
            for (o, v) in self.inv_freq_f32[..n].iter_mut().zip(inv.iter()) {
                *o = *v as f32;
            }
        }
        for (h, l) in self.turns_hi[..n].iter_mut().zip(self.turns_lo[..n].iter_mut()) {
            (*h, *l) = crate::kernels::sincos::turns(*h);
        }
        self.pairs = n;
        Ok(self.view())
    }
}

/// The slot of calls whose frequencies do not depend on their length: no storage, so
/// their stack carries no [`Frequencies`](crate::Frequencies) (issue 13). Never filled
/// ([`RopeView::run`] takes it only when `!depends_on_seq_len()`, where `check_call` returns
/// the object's own).
pub(super) struct FixedFreqs;

impl FreqSlot for FixedFreqs {
    fn fill<'f>(&'f mut self, _: &RopeView<'_>, _: u64) -> Result<FreqRef<'f>, RopeError> {
        Err(RopeError::InvalidScalingParameter { name: "seq_len" })
    }
}

/// One tensor of a call after its views were validated: raw pointers to its input and
/// output (the same in place) and their strides, in elements.
pub(super) struct Tensor<T> {
    pub(super) src: *const T,
    pub(super) dst: *mut T,
    pub(super) heads: usize,
    pub(super) src_token_stride: usize,
    pub(super) dst_token_stride: usize,
    pub(super) src_head_stride: usize,
    pub(super) dst_head_stride: usize,
}

impl<T> Clone for Tensor<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for Tensor<T> {}

impl<T> Tensor<T> {
    /// Whether the heads of a token lie farther apart than a head's tokens in the input or
    /// the output (`[heads][tokens][head_dim]`).
    #[inline(always)]
    pub(super) fn head_major(&self) -> bool {
        self.heads > 1
            && (self.src_head_stride > self.src_token_stride || self.dst_head_stride > self.dst_token_stride)
    }

    /// The kernel arguments for every head of token `t` with one cos/sin row; prefetching
    /// in `large` calls where the heads of a token lie closer together than its tokens.
    ///
    /// # Safety
    /// `t` is below the token count of the views this tensor was validated from.
    #[inline(always)]
    pub(super) unsafe fn token_args<'r>(
        &self,
        t: usize,
        p: &TokenParams<'_>,
        cos: &'r [f32],
        sin: &'r [f32],
        large: bool,
    ) -> RotateArgs<'r, T> {
        RotateArgs {
            // SAFETY: t < tokens of a validated view (caller), so the token's first head lies
            // inside the buffer.
            src: unsafe { self.src.add(t * self.src_token_stride) },
            // SAFETY: as above, for the output view.
            dst: unsafe { self.dst.add(t * self.dst_token_stride) },
            heads: self.heads,
            src_head_stride: self.src_head_stride,
            dst_head_stride: self.dst_head_stride,
            head_dim: p.head_dim,
            cos,
            sin,
            layout: p.layout,
            inverse: p.inverse,
            prefetch: large && self.src_head_stride < self.src_token_stride,
        }
    }

    /// Whether [`rotate_head_major`] walks this tensor head by head: head-major, and
    /// `HalfSplit` or out of place (`Interleaved` in place measured slower head by head).
    pub(super) fn walks_head_major(&self, layout: PairLayout) -> bool {
        self.head_major()
            && (layout == PairLayout::HalfSplit || !core::ptr::eq(self.src, self.dst.cast_const()))
    }

    #[inline(always)]
    pub(super) fn new(src: *const T, dst: *mut T, view_src: View, view_dst: View) -> Self {
        Tensor {
            src,
            dst,
            heads: view_src.heads,
            src_token_stride: view_src.token_stride,
            dst_token_stride: view_dst.token_stride,
            src_head_stride: view_src.head_stride,
            dst_head_stride: view_dst.head_stride,
        }
    }
}

/// The tensors of one call: q, then k if any.
pub(super) type Tensors<T> = [Option<Tensor<T>>; 2];

/// What rotating any token of a validated call reads, besides its tensors and frequencies.
#[derive(Clone, Copy)]
pub(super) struct TokenParams<'a> {
    /// Tokens of the whole call (a chunk may run fewer): sizes the prefetch decision.
    pub(super) call_tokens: usize,
    pub(super) positions: Positions<'a>,
    pub(super) cos_sin: CosSin<'a>,
    pub(super) kernels: &'static Kernels,
    pub(super) layout: PairLayout,
    pub(super) mode: AngleMode,
    pub(super) inverse: bool,
    pub(super) head_dim: usize,
    pub(super) pairs: usize,
}

/// A cos or sin row buffer of `N` entries on a 64-byte line (a cache line; one AVX-512
/// vector) on 64-bit targets; 16 bytes on smaller ones (microcontrollers have no cache
/// lines to respect, and a 64-byte realignment costs their stack: issue 13).
#[cfg_attr(target_pointer_width = "64", repr(C, align(64)))]
#[cfg_attr(not(target_pointer_width = "64"), repr(C, align(16)))]
pub(super) struct LineRow<const N: usize>(pub(super) [f32; N]);

/// Rows of up to this many pairs (head_dim 128) are generated in a buffer of this size;
/// larger ones in a [`MAX_PAIRS`] buffer in a frame of its own ([`on_the_fly_large`]), so
/// that small heads keep a small stack (issue 13).
pub(super) const SMALL_PAIRS: usize = 64;

/// Generates the cos/sin row of every token of `range` into buffers of `N` entries (`N >=
/// p.pairs`) and hands it to `rotate_token`.
#[inline(always)]
pub(super) fn on_the_fly<const N: usize>(
    p: &TokenParams<'_>,
    freqs: &FreqRef<'_>,
    range: Range<usize>,
    rotate_token: &impl Fn(usize, &[f32], &[f32]),
) {
    let gen = SinCos::of(p.kernels);
    // On 64-byte lines, like `RopeCache` rows: the kernels' row loads of every head then
    // never straddle two lines.
    let (mut cos_buf, mut sin_buf) = (LineRow([0.0; N]), LineRow([0.0; N]));
    for t in range {
        let pos = p.positions.get(t);
        let (cos, sin) = (&mut cos_buf.0[..p.pairs], &mut sin_buf.0[..p.pairs]);
        fill_row(gen, freqs, p.mode, pos, cos, sin);
        rotate_token(t, cos, sin);
    }
}

/// Rotates token `t` of every tensor of a call with one cos/sin row.
pub(super) type RotateToken<'a> = dyn Fn(usize, &[f32], &[f32]) + 'a;

/// [`on_the_fly`] for rows of more than [`SMALL_PAIRS`] pairs, in its own frame.
#[inline(never)]
pub(super) fn on_the_fly_large(
    p: &TokenParams<'_>,
    freqs: &FreqRef<'_>,
    range: Range<usize>,
    rotate_token: &RotateToken<'_>,
) {
    on_the_fly::<MAX_PAIRS>(p, freqs, range, &rotate_token);
}

/// Rotates tokens `range` of every tensor of a validated call: the one per-token loop of
/// the single calls ([`Rope::apply_qk_into`] and its siblings) and of the [`TokenChunk`]s of
/// a [`PreparedCall`], so that both give the same bits. Each token gets one cos/sin row
/// (from the table, or generated from `freqs`), shared by all its tensors.
///
/// # Safety
/// - every tensor comes from views validated against buffers that stay borrowed while this
///   runs (in place `src == dst`; out of place the input is a `&[T]` and the output a
///   distinct `&mut [T]`), and `range` lies within their token count;
/// - nothing else reads or writes the output rows, or writes the input rows, of the tokens
///   of `range` while this runs;
/// - the positions and cos/sin source of `p` passed [`RopeView::check_call`] for that token
///   count (so every position of `range` has a table row), and `p.kernels` came from the
///   dispatcher (the CPU has their features).
///
/// [`Rope::apply_qk_into`]: super::Rope::apply_qk_into
/// [`TokenChunk`]: super::TokenChunk
/// [`PreparedCall`]: super::PreparedCall
#[inline(always)]
pub(super) unsafe fn rotate_tokens<T: Element>(
    p: &TokenParams<'_>,
    freqs: &FreqRef<'_>,
    tensors: &Tensors<T>,
    range: Range<usize>,
) {
    let rotate = T::rotate_fn(p.kernels);
    let pairs = p.pairs;
    // Prefetch only in calls too large to be cache-resident (the whole call, not this chunk
    // of it; saturating: a hint only), and
    // only for tensors whose heads of one token lie closer together than one head's
    // consecutive tokens (`[t][h][d]`): there the kernel's look-ahead over the heads follows
    // memory order. In `[h][t][d]` each head is its own stream that the hardware prefetcher
    // already follows, and prefetching other heads' rows measured slower (prefill f32 on the
    // development machine: about 440 against 375 µs).
    let head_bytes = 2 * pairs * core::mem::size_of::<T>();
    let bytes = tensors
        .iter()
        .flatten()
        .fold(0usize, |b, x| b.saturating_add(x.heads.saturating_mul(head_bytes)))
        .saturating_mul(p.call_tokens);
    let large = bytes > crate::kernels::PREFETCH_MIN_BYTES;
    // Rotates token `t` of every tensor with one cos/sin row.
    let rotate_token = |t: usize, cos: &[f32], sin: &[f32]| {
        for x in tensors.iter().flatten() {
            if x.heads == 0 {
                continue;
            }
            // SAFETY: t < tokens of a view validated against its buffer (contract above).
            let args = unsafe { x.token_args(t, p, cos, sin, large) };
            // Validated views keep every head of token t in bounds and its rows apart from
            // other tokens'; in place src == dst, out of place `&[T]` and `&mut [T]` do not
            // overlap; nobody else touches these rows now.
            // SAFETY: as above (contract of `rotate_tokens`); the dispatcher checked the CPU
            // for `p.kernels`.
            unsafe { rotate(&args) };
        }
    };
    match (p.cos_sin, p.positions) {
        (CosSin::Table(table), Positions::Start(start))
            if range.len() > 1 && tensors.iter().flatten().any(|x| x.walks_head_major(p.layout)) =>
        {
            // SAFETY: forwarded (the same contract).
            unsafe { rotate_head_major(p, table, start, tensors, range, large) }
        }
        _ => for_each_row(p, freqs, range, &rotate_token),
    }
}

/// The one per-token loop of every call: hands each token `t` of `range` its cos/sin row
/// (position `p.positions.get(t)`: from the table, or generated from `freqs` into a row
/// buffer sized to the pairs) and calls `token(t, cos, sin)`. The caller has validated the
/// positions against the table.
#[inline(always)]
pub(super) fn for_each_row(
    p: &TokenParams<'_>,
    freqs: &FreqRef<'_>,
    range: Range<usize>,
    token: &impl Fn(usize, &[f32], &[f32]),
) {
    match p.cos_sin {
        CosSin::Table(table) => {
            for t in range {
                // Validated: every position of the call is below the table's rows.
                let (cos, sin) = table.row_in_range(p.positions.get(t));
                token(t, cos, sin);
            }
        }
        CosSin::OnTheFly if p.pairs <= SMALL_PAIRS => on_the_fly::<SMALL_PAIRS>(p, freqs, range, token),
        CosSin::OnTheFly => on_the_fly_large(p, freqs, range, &token),
    }
}

/// [`rotate_tokens`] with a table and consecutive positions, for calls with a tensor whose
/// heads lie farther apart than its tokens (`[heads][tokens][head_dim]`, BHSD; see
/// [`Tensor::walks_head_major`] for which): each such tensor is rotated head by head, one
/// kernel call ([`RotateRowsFn`](crate::kernels::RotateRowsFn)) per head over all of
/// `range` with each token's row, so that memory is walked as one stream (the head's rows,
/// beside the table's) instead of one stream per head, 2 MB apart at 4096 tokens. The other
/// tensors of the call go token by token. Each (token, head) row gets the operations of
/// the token-major loop, so the bits are the same.
///
/// Measured on the development machine (issue 18; AMD EPYC, single core, medians of two
/// alternated runs of `benches/zoo.rs`), token by token against head by head:
/// - Llama 3.1 long (4096 tokens) in place: AVX2 10.3 -> 5.2 ms, AVX-512 7.2 -> 4.9 ms; out
///   of place 12.7 -> 7.0 and 9.6 -> 6.4 ms; prefill (512 tokens) unchanged within noise;
/// - GPT-J (`Interleaved`, rotary_dim 64 of 256) out of place: long 17.0 -> 8.5 ms, prefill
///   1.7 -> 0.71 ms (AVX2); in place it was slower (long AVX-512 4.7 -> 9.9 ms: its rows
///   are expanded once per row instead of once per token), so it stays token by token;
/// - blocks of tokens (tables of 8 KB to 512 KB per block) instead of whole heads were
///   slower at long (Llama 3.1: 5.2-6.4 against 4.7-5.1 ms): every block restarts each
///   head's stream.
///
/// # Safety
/// The contract of [`rotate_tokens`]; the positions are `start + t`.
#[inline(never)]
pub(super) unsafe fn rotate_head_major<T: Element>(
    p: &TokenParams<'_>,
    table: CosSinTable<'_>,
    start: u32,
    tensors: &Tensors<T>,
    range: Range<usize>,
    large: bool,
) {
    let (rotate, rotate_rows) = (T::rotate_fn(p.kernels), T::rotate_rows_fn(p.kernels));
    // Validated: every position of the call (start + t, no overflow) has a table row.
    let (cos_rows, sin_rows) = table.rows_in_range(start + range.start as u32, range.len());
    let (c0, s0) = (&cos_rows[..p.pairs], &sin_rows[..p.pairs]);
    for x in tensors.iter().flatten().filter(|x| x.heads != 0) {
        if x.walks_head_major(p.layout) {
            for h in 0..x.heads {
                let o = range.start * x.src_token_stride + h * x.src_head_stride;
                let od = range.start * x.dst_token_stride + h * x.dst_head_stride;
                let args = RotateArgs {
                    // SAFETY: the tokens of `range` and head h of a view validated against its
                    // buffer (contract of `rotate_tokens`): the row lies inside the buffer.
                    src: unsafe { x.src.add(o) },
                    // SAFETY: as above, for the output view.
                    dst: unsafe { x.dst.add(od) },
                    heads: range.len(),
                    src_head_stride: x.src_token_stride,
                    dst_head_stride: x.dst_token_stride,
                    head_dim: p.head_dim,
                    cos: c0,
                    sin: s0,
                    layout: p.layout,
                    inverse: p.inverse,
                    prefetch: false,
                };
                // Head h at the tokens of `range`, each with its row; the rows of different
                // tokens of one head do not overlap (views are validated), so they are
                // `range.len()` disjoint "heads"; otherwise as in `rotate_tokens`.
                // SAFETY: as just said.
                unsafe { rotate_rows(&args, cos_rows, sin_rows) };
            }
        } else {
            for (i, t) in range.clone().enumerate() {
                let r = i * p.pairs..(i + 1) * p.pairs;
                // SAFETY: token t of a view validated against its buffer (contract of
                // `rotate_tokens`).
                let args = unsafe { x.token_args(t, p, &cos_rows[r.clone()], &sin_rows[r], large) };
                // SAFETY: every head of a validated token; as in `rotate_tokens`.
                unsafe { rotate(&args) };
            }
        }
    }
}
