//! `Rope::par_apply*` (feature `rayon`): one call split by token ranges over rayon's pool.

use super::{PreparedCall, TokenChunk};
use crate::element::Element;
use crate::error::RopeError;
use crate::rope::{ApplyOptions, Heads, HeadsMut, Rope};

/// Smallest chunk handed to another rayon task, in elements (over q and k): 32 Ki elements
/// (128 KiB of f32) take some tens of microseconds even on the fastest tier, well above
/// what a rayon task costs (about a microsecond).
pub(super) const MIN_PAR_ELEMENTS: usize = 1 << 15;

/// Runs `call` over the current rayon pool: inline when it has fewer than two minimum-size
/// chunks of work (decode, short prefill) or the pool has one thread; otherwise split in
/// halves by `rayon::join` down to chunks of `max(min, tokens / (4 * threads))` tokens, so a
/// busy core does not hold up the call.
fn par_run<T: Element>(mut call: PreparedCall<'_, T>) {
    let threads = rayon::current_num_threads();
    let min_tokens = MIN_PAR_ELEMENTS.div_ceil(call.elements_per_token().max(1));
    let pending = call.pending();
    if threads < 2 || pending < 2 * min_tokens {
        call.run();
        return;
    }
    let grain = min_tokens.max(pending.div_ceil(4 * threads));
    split(call.whole(), grain);
}

fn split<T: Element>(chunk: TokenChunk<'_, T>, grain: usize) {
    if chunk.len() <= grain {
        chunk.run();
    } else {
        let half = chunk.len() / 2;
        let (a, b) = chunk.split_at(half);
        rayon::join(|| split(a, grain), || split(b, grain));
    }
}

impl Rope<'_> {
    /// [`Rope::apply_qk`] with the tokens split over rayon's current pool
    /// ([`rayon::current_num_threads`]; `ThreadPool::install` picks another). Output
    /// bit-identical to [`Rope::apply_qk`]. Calls with less than 64 Ki elements (q and k
    /// together; e.g. any decode step) run on the calling thread, as do calls in a pool of
    /// one thread. Dynamic frequency scaling is computed once for the call.
    ///
    /// ```
    /// use rope_kernels::{ApplyOptions, HeadsMut, Rope, RopeConfig, View};
    ///
    /// let rope = Rope::new(RopeConfig::new(128, 500_000.0))?;
    /// let mut q = vec![0.5f32; 512 * 32 * 128];
    /// let mut k = vec![0.5f32; 512 * 8 * 128];
    /// rope.par_apply_qk(
    ///     HeadsMut::new(&mut q, View::token_major(512, 32, 128)),
    ///     Some(HeadsMut::new(&mut k, View::token_major(512, 8, 128))),
    ///     &ApplyOptions::start(0),
    /// )?;
    /// # Ok::<(), rope_kernels::RopeError>(())
    /// ```
    ///
    /// # Errors
    /// Those of [`Rope::apply_qk`]; nothing is written.
    pub fn par_apply_qk<T: Element>(
        &self,
        q: HeadsMut<'_, T>,
        k: Option<HeadsMut<'_, T>>,
        opts: &ApplyOptions<'_>,
    ) -> Result<(), RopeError> {
        par_run(self.prepare_qk(q, k, opts)?);
        Ok(())
    }

    /// [`Rope::apply`] split over rayon's pool, as [`Rope::par_apply_qk`].
    ///
    /// # Errors
    /// Those of [`Rope::apply`]; nothing is written.
    pub fn par_apply<T: Element>(
        &self,
        x: HeadsMut<'_, T>,
        opts: &ApplyOptions<'_>,
    ) -> Result<(), RopeError> {
        par_run(self.prepare(x, opts)?);
        Ok(())
    }

    /// [`Rope::apply_qk_into`] split over rayon's pool, as [`Rope::par_apply_qk`].
    ///
    /// # Errors
    /// Those of [`Rope::apply_qk_into`]; nothing is written.
    pub fn par_apply_qk_into<T: Element>(
        &self,
        q: Heads<'_, T>,
        q_out: HeadsMut<'_, T>,
        k: Option<(Heads<'_, T>, HeadsMut<'_, T>)>,
        opts: &ApplyOptions<'_>,
    ) -> Result<(), RopeError> {
        par_run(self.prepare_qk_into(q, q_out, k, opts)?);
        Ok(())
    }

    /// [`Rope::apply_into`] split over rayon's pool, as [`Rope::par_apply_qk`].
    ///
    /// # Errors
    /// Those of [`Rope::apply_into`]; nothing is written.
    pub fn par_apply_into<T: Element>(
        &self,
        x: Heads<'_, T>,
        out: HeadsMut<'_, T>,
        opts: &ApplyOptions<'_>,
    ) -> Result<(), RopeError> {
        par_run(self.prepare_into(x, out, opts)?);
        Ok(())
    }
}
