//! One call split by token ranges, for a runtime's own thread pool (issue 9).
//!
//! [`Rope::prepare_qk`] (and its siblings) validates a call exactly as [`Rope::apply_qk`]
//! does, computes the call's frequencies once, and returns a [`PreparedCall`]. The call then
//! hands out [`TokenChunk`]s, each covering a range of tokens that no other chunk covers;
//! a chunk is `Send` and rotates its tokens when run, on whichever thread runs it. Running
//! every chunk gives output bit-identical to the single call: each token is rotated by the
//! same kernel with the same cos/sin row, and tokens do not interact.
//!
//! Why chunks of one call may run at the same time: a validated [`View`] never lets two
//! (token, head) rows share an element (see [`View::validate`]), so two disjoint token
//! ranges of one tensor touch disjoint elements; q and k (and their outputs) come from
//! distinct `&mut` slices; out of place, the inputs are `&[T]` (only read) and cannot
//! overlap the `&mut [T]` outputs. The call keeps those borrows for its whole lifetime, and
//! hands out each token at most once, so while chunks exist nothing else can reach the
//! buffers and no two chunks reach the same element.
//!
//! [`View`]: crate::View
//! [`View::validate`]: crate::View::validate

use core::marker::PhantomData;
use core::ops::Range;

use super::{
    rotate_tokens, ApplyOptions, CallFreqs, FreqSlot, Heads, HeadsMut, Rope, RopeView, Tensors, TokenParams,
};
use crate::config::MAX_PAIRS;
use crate::element::Element;
use crate::error::RopeError;
use crate::freq::FreqRef;

#[cfg(feature = "rayon")]
mod par;

/// The frequencies of one call: the object's own, or those computed for this call's length
/// (dynamic NTK, LongRoPE) once, before any chunk runs.
// The call's own frequencies (~7 KiB) stay inline: no allocation (no_std), and a prepared
// call lives on the caller's stack for the length of one call, as a single call's do.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
enum CallFrequencies<'a> {
    Object(FreqRef<'a>),
    Call(CallFreqs<MAX_PAIRS>),
}

/// What every chunk of a call reads: never written after preparation.
struct Shared<'a> {
    freqs: CallFrequencies<'a>,
    params: TokenParams<'a>,
}

// `TokenChunk`s on several threads share one `&Shared`: it must stay `Sync` (the `Send`
// impls below rely on it).
const _: () = {
    const fn assert_sync<S: Sync>() {}
    assert_sync::<Shared<'static>>();
};

impl Shared<'_> {
    fn freqs(&self) -> FreqRef<'_> {
        match &self.freqs {
            CallFrequencies::Object(f) => *f,
            CallFrequencies::Call(f) => f.view(),
        }
    }
}

/// A validated call whose tokens can be rotated in disjoint chunks, on any threads.
///
/// Built by [`Rope::prepare_qk`], [`Rope::prepare_qk_into`], [`Rope::prepare`] and
/// [`Rope::prepare_into`], which return the same errors as the matching `apply` methods and
/// write nothing. Once built, nothing can fail: [`PreparedCall::run`] rotates every token
/// still pending; [`PreparedCall::chunks`], [`PreparedCall::parts`] and
/// [`PreparedCall::whole`] hand out the pending tokens as [`TokenChunk`]s instead. Each
/// token is handed out at most once in the life of the call, so running every chunk (in any
/// order, on any threads) rotates every token exactly once, with output bit-identical to
/// the single-threaded `apply` call.
///
/// A call that is dropped with tokens pending leaves them as they were (in place) or
/// unwritten (out of place). Dynamic frequency scaling (dynamic NTK, LongRoPE) is computed
/// once here, from the largest position of the whole call, not per chunk.
///
/// ```
/// use rope_kernels::{ApplyOptions, HeadsMut, Rope, RopeConfig, View};
///
/// // Llama-3-8B prefill of 64 tokens, q (32 heads) and k (8 heads), on 2 scoped threads.
/// let rope = Rope::new(RopeConfig::new(128, 500_000.0))?;
/// let (tokens, hd) = (64, 128);
/// let mut q = vec![0.5f32; tokens * 32 * hd];
/// let mut k = vec![0.25f32; tokens * 8 * hd];
/// let (mut q1, mut k1) = (q.clone(), k.clone());
///
/// let mut call = rope.prepare_qk(
///     HeadsMut::new(&mut q, View::token_major(tokens, 32, hd)),
///     Some(HeadsMut::new(&mut k, View::token_major(tokens, 8, hd))),
///     &ApplyOptions::start(100),
/// )?;
/// std::thread::scope(|s| {
///     for chunk in call.parts(2) {
///         s.spawn(move || chunk.run());
///     }
/// });
/// drop(call);
///
/// // The same as one single-threaded call, bit for bit.
/// rope.apply_qk(
///     HeadsMut::new(&mut q1, View::token_major(tokens, 32, hd)),
///     Some(HeadsMut::new(&mut k1, View::token_major(tokens, 8, hd))),
///     &ApplyOptions::start(100),
/// )?;
/// assert!(q.iter().zip(&q1).all(|(a, b)| a.to_bits() == b.to_bits()));
/// assert!(k.iter().zip(&k1).all(|(a, b)| a.to_bits() == b.to_bits()));
/// # Ok::<(), rope_kernels::RopeError>(())
/// ```
#[must_use = "a prepared call writes nothing until it, or its chunks, run"]
pub struct PreparedCall<'a, T: Element> {
    shared: Shared<'a>,
    tensors: Tensors<T>,
    /// Tokens not handed out yet: `next..tokens`.
    next: usize,
    /// Tokens to rotate (0 when the call writes nothing).
    tokens: usize,
    /// The call holds the borrows of its buffers (`&mut` outputs, `&` inputs).
    _buffers: PhantomData<&'a mut [T]>,
}

// A `PreparedCall` stands for `&'a mut [T]` borrows of its outputs and `&'a [T]` borrows of
// its inputs (its raw pointers come from such borrows, kept alive through `'a`), plus
// shared read-only data (`Shared`, asserted `Sync` above).
// SAFETY: moving those borrows to another thread is sound because `T: Element` is `Send + Sync`.
unsafe impl<T: Element> Send for PreparedCall<'_, T> {}

impl<T: Element> core::fmt::Debug for PreparedCall<'_, T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("PreparedCall")
            .field("tokens", &self.tokens)
            .field("pending", &(self.next..self.tokens))
            .field("elements_per_token", &self.elements_per_token())
            .finish_non_exhaustive()
    }
}

impl<'a, T: Element> PreparedCall<'a, T> {
    /// Tokens this call rotates: the token count of its tensors, or 0 when it writes nothing
    /// (zero tokens, or zero heads in every tensor).
    pub fn tokens(&self) -> usize {
        self.tokens
    }

    /// Tokens not handed out yet (by [`chunks`](Self::chunks), [`parts`](Self::parts) or
    /// [`whole`](Self::whole)).
    pub fn pending(&self) -> usize {
        self.tokens - self.next
    }

    /// Elements rotated (or copied) per token over all the call's tensors:
    /// `(q_heads + k_heads) * head_dim`. A runtime sizes its chunks with it: below some tens
    /// of thousands of elements a chunk costs less than handing it to another thread.
    pub fn elements_per_token(&self) -> usize {
        self.tensors.iter().flatten().map(|t| t.heads * self.shared.params.head_dim).sum()
    }

    /// Rotates every pending token on this thread.
    pub fn run(mut self) {
        self.whole().run();
    }

    /// All pending tokens as one chunk (empty when none is pending), to split further with
    /// [`TokenChunk::split_at`] (fork-join pools).
    pub fn whole(&mut self) -> TokenChunk<'_, T> {
        let range = self.next..self.tokens;
        self.next = self.tokens;
        TokenChunk { shared: &self.shared, tensors: self.tensors, range, _buffers: PhantomData }
    }

    /// The pending tokens as consecutive chunks of at most `max_tokens` tokens each (0 counts
    /// as 1), of nearly equal sizes (they differ by at most one token).
    pub fn chunks(&mut self, max_tokens: usize) -> TokenChunks<'_, T> {
        let parts = self.pending().div_ceil(max_tokens.max(1));
        self.parts(parts)
    }

    /// The pending tokens as `min(parts, pending)` consecutive chunks (`parts` of 0 counts as
    /// 1) of nearly equal sizes (they differ by at most one token); e.g. one per thread.
    pub fn parts(&mut self, parts: usize) -> TokenChunks<'_, T> {
        TokenChunks {
            shared: &self.shared,
            tensors: self.tensors,
            next: &mut self.next,
            end: self.tokens,
            parts: parts.max(1),
        }
    }
}

/// Iterator over the chunks of [`PreparedCall::chunks`] and [`PreparedCall::parts`]. A chunk
/// that is taken from it is handed out for good, even if the iterator is dropped early; the
/// tokens it has not handed out stay pending in the call.
#[must_use = "iterators are lazy: the chunks are handed out as they are taken"]
pub struct TokenChunks<'c, T: Element> {
    shared: &'c Shared<'c>,
    tensors: Tensors<T>,
    next: &'c mut usize,
    end: usize,
    /// Chunks still to hand out (the pending tokens split evenly among them).
    parts: usize,
}

impl<'c, T: Element> Iterator for TokenChunks<'c, T> {
    type Item = TokenChunk<'c, T>;

    fn next(&mut self) -> Option<TokenChunk<'c, T>> {
        let pending = self.end - *self.next;
        if pending == 0 || self.parts == 0 {
            return None;
        }
        let len = pending.div_ceil(self.parts);
        let start = *self.next;
        *self.next = start + len;
        self.parts -= 1;
        Some(TokenChunk {
            shared: self.shared,
            tensors: self.tensors,
            range: start..start + len,
            _buffers: PhantomData,
        })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.parts.min(self.end - *self.next);
        (n, Some(n))
    }
}

impl<T: Element> ExactSizeIterator for TokenChunks<'_, T> {}

impl<T: Element> core::fmt::Debug for TokenChunks<'_, T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("TokenChunks")
            .field("pending", &(*self.next..self.end))
            .field("parts", &self.parts)
            .finish()
    }
}

/// The tokens `range()` of a [`PreparedCall`], to rotate on any thread with
/// [`TokenChunk::run`]. No other chunk of the call covers these tokens.
#[must_use = "a chunk writes nothing until it runs"]
pub struct TokenChunk<'c, T: Element> {
    shared: &'c Shared<'c>,
    tensors: Tensors<T>,
    range: Range<usize>,
    /// The chunk has exclusive use of its tokens' rows for `'c`.
    _buffers: PhantomData<&'c mut [T]>,
}

// A chunk is the exclusive right to the output rows (and the right to read the input rows)
// of its token range, which no other chunk of the call has (module docs), plus
// `&'c Shared`, read-only data asserted `Sync` above.
// SAFETY: sending that right to another thread is sound because `T: Element` is `Send + Sync`.
unsafe impl<T: Element> Send for TokenChunk<'_, T> {}

impl<T: Element> core::fmt::Debug for TokenChunk<'_, T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("TokenChunk").field("range", &self.range).finish_non_exhaustive()
    }
}

impl<'c, T: Element> TokenChunk<'c, T> {
    /// The tokens of this chunk (indices into the call's tensors and positions).
    pub fn range(&self) -> Range<usize> {
        self.range.clone()
    }

    /// Number of tokens.
    pub fn len(&self) -> usize {
        self.range.len()
    }

    /// True when the chunk has no token.
    pub fn is_empty(&self) -> bool {
        self.range.is_empty()
    }

    /// Splits into the first `mid` tokens and the rest (`mid` is clamped to
    /// [`len`](Self::len); either part may be empty).
    pub fn split_at(self, mid: usize) -> (TokenChunk<'c, T>, TokenChunk<'c, T>) {
        let mid = self.range.start + mid.min(self.len());
        let head = TokenChunk {
            shared: self.shared,
            tensors: self.tensors,
            range: self.range.start..mid,
            _buffers: PhantomData,
        };
        let tail = TokenChunk {
            shared: self.shared,
            tensors: self.tensors,
            range: mid..self.range.end,
            _buffers: PhantomData,
        };
        (head, tail)
    }

    /// Rotates the chunk's tokens (in place, or into the outputs) on this thread.
    pub fn run(self) {
        let s = self.shared;
        // The call validated its views against buffers it borrows for `'c`, and its positions
        // and cos/sin source (`Rope::check_call`); `self.range` lies within its tokens and no
        // other chunk covers it, and a token's rows share no element with other tokens'
        // (module docs), so nothing else touches them now; the kernels came from the
        // dispatcher.
        // SAFETY: the contract of `rotate_tokens` holds, as just said.
        unsafe { rotate_tokens(&s.params, &s.freqs(), &self.tensors, self.range) };
    }
}

impl Rope<'_> {
    /// Validates an in-place call on q and (optionally) k, as [`Rope::apply_qk`] would, and
    /// returns it split-able by token ranges (see [`PreparedCall`]).
    ///
    /// # Errors
    /// Exactly those of [`Rope::apply_qk`], in the same order; nothing is written.
    pub fn prepare_qk<'a, T: Element>(
        &'a self,
        q: HeadsMut<'a, T>,
        k: Option<HeadsMut<'a, T>>,
        opts: &ApplyOptions<'a>,
    ) -> Result<PreparedCall<'a, T>, RopeError> {
        let r = self.view();
        let (tokens, tensors) = r.qk_tensors(q, k)?;
        r.prepare_call(tokens, tensors, opts)
    }

    /// [`Rope::prepare_qk`] without k: one tensor in place, as [`Rope::apply`].
    ///
    /// # Errors
    /// Those of [`Rope::apply`].
    pub fn prepare<'a, T: Element>(
        &'a self,
        x: HeadsMut<'a, T>,
        opts: &ApplyOptions<'a>,
    ) -> Result<PreparedCall<'a, T>, RopeError> {
        self.prepare_qk(x, None, opts)
    }

    /// Validates an out-of-place call on q and (optionally) k, as [`Rope::apply_qk_into`]
    /// would, and returns it split-able by token ranges (see [`PreparedCall`]).
    ///
    /// # Errors
    /// Exactly those of [`Rope::apply_qk_into`], in the same order; nothing is written.
    pub fn prepare_qk_into<'a, T: Element>(
        &'a self,
        q: Heads<'a, T>,
        q_out: HeadsMut<'a, T>,
        k: Option<(Heads<'a, T>, HeadsMut<'a, T>)>,
        opts: &ApplyOptions<'a>,
    ) -> Result<PreparedCall<'a, T>, RopeError> {
        let r = self.view();
        let (tokens, tensors) = r.qk_into_tensors(q, q_out, k)?;
        r.prepare_call(tokens, tensors, opts)
    }

    /// [`Rope::prepare_qk_into`] without k: one tensor out of place, as [`Rope::apply_into`].
    ///
    /// # Errors
    /// Those of [`Rope::apply_into`].
    pub fn prepare_into<'a, T: Element>(
        &'a self,
        x: Heads<'a, T>,
        out: HeadsMut<'a, T>,
        opts: &ApplyOptions<'a>,
    ) -> Result<PreparedCall<'a, T>, RopeError> {
        self.prepare_qk_into(x, out, None, opts)
    }
}

impl<'r> RopeView<'r> {
    /// The checks of a single call after its views ([`RopeView::check_call`]: same errors, same
    /// order), and the call's frequencies.
    fn prepare_call<'a, T: Element>(
        &self,
        tokens: usize,
        tensors: Tensors<T>,
        opts: &ApplyOptions<'a>,
    ) -> Result<PreparedCall<'a, T>, RopeError>
    where
        'r: 'a,
    {
        let seq_len = self.check_call(tokens, &tensors, opts)?;
        let writes = seq_len.is_some();
        let freqs = match seq_len {
            Some(seq_len) if self.per_call(seq_len) => {
                let mut call = CallFreqs::new();
                call.fill(self, seq_len)?;
                CallFrequencies::Call(call)
            }
            Some(seq_len) => CallFrequencies::Object(self.set_at(seq_len)),
            None => CallFrequencies::Object(self.freqs),
        };
        Ok(PreparedCall {
            shared: Shared { freqs, params: self.token_params(opts, tokens) },
            tensors,
            next: 0,
            tokens: if writes { tokens } else { 0 },
            _buffers: PhantomData,
        })
    }
}
