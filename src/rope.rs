//! The [`Rope`] object and its apply entry points.

use crate::config::{AngleMode, Layout, RopeConfig, MAX_PAIRS};
use crate::cossin::{fill_row, CosSinTable};
use crate::dispatch::{self, Tier};
use crate::element::Element;
use crate::error::{Operand, RopeError};
use crate::freq::Frequencies;
use crate::kernels::{Kernels, RotateArgs};
use crate::view::View;

/// Rotation direction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Direction {
    /// `R_p x`: rotate by `+position * inv_freq`.
    #[default]
    Forward,
    /// `R_p^T x = R_{-p} x`: undoes `Forward` at the same positions.
    Inverse,
}

/// The position of each token of a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Positions<'a> {
    /// One position per token (HF `position_ids` of one sequence).
    Ids(&'a [u32]),
    /// Token `t` is at position `start + t` (a KV-cache offset).
    Start(u32),
}

impl Default for Positions<'_> {
    fn default() -> Self {
        Positions::Start(0)
    }
}

impl Positions<'_> {
    #[inline(always)]
    fn get(&self, t: usize) -> u32 {
        match *self {
            Positions::Ids(ids) => ids[t],
            // Validated: start + t fits in u32.
            Positions::Start(s) => s + t as u32,
        }
    }
}

/// Where cos/sin come from.
#[derive(Clone, Copy, Debug, Default)]
pub enum CosSin<'a> {
    /// Generated per token on the fly from the frequencies (no table, no allocation).
    #[default]
    OnTheFly,
    /// Rows of a caller table or a [`RopeCache`](crate::RopeCache), indexed by position.
    Table(CosSinTable<'a>),
}

/// Per-call options. `Default`: positions from 0, cos/sin on the fly, forward.
#[derive(Clone, Copy, Debug, Default)]
pub struct Apply<'a> {
    /// Token positions.
    pub positions: Positions<'a>,
    /// cos/sin source.
    pub cos_sin: CosSin<'a>,
    /// Forward or inverse rotation.
    pub direction: Direction,
}

impl<'a> Apply<'a> {
    /// Options with explicit `position_ids`.
    pub fn ids(position_ids: &'a [u32]) -> Self {
        Apply { positions: Positions::Ids(position_ids), ..Apply::default() }
    }

    /// Options with positions `start..start + tokens`.
    pub fn start(start: u32) -> Self {
        Apply { positions: Positions::Start(start), ..Apply::default() }
    }

    /// Builder: use a cos/sin table.
    pub fn with_table(mut self, table: CosSinTable<'a>) -> Self {
        self.cos_sin = CosSin::Table(table);
        self
    }

    /// Builder: inverse rotation.
    pub fn inverse(mut self) -> Self {
        self.direction = Direction::Inverse;
        self
    }
}

/// A read-only strided tensor: a buffer and its [`View`].
#[derive(Clone, Copy, Debug)]
pub struct Heads<'a, T> {
    /// The elements; the view must fit inside.
    pub data: &'a [T],
    /// Shape and strides.
    pub view: View,
}

/// A mutable strided tensor: a buffer and its [`View`].
#[derive(Debug)]
pub struct HeadsMut<'a, T> {
    /// The elements; the view must fit inside.
    pub data: &'a mut [T],
    /// Shape and strides.
    pub view: View,
}

impl<'a, T> Heads<'a, T> {
    /// Pairs a buffer with a view.
    pub fn new(data: &'a [T], view: View) -> Self {
        Heads { data, view }
    }
}

impl<'a, T> HeadsMut<'a, T> {
    /// Pairs a buffer with a view.
    pub fn new(data: &'a mut [T], view: View) -> Self {
        HeadsMut { data, view }
    }
}

/// One tensor of a call after validation: raw pointers and strides.
struct Job<T> {
    src: *const T,
    dst: *mut T,
    view_src: View,
    view_dst: View,
}

/// A validated RoPE configuration with its frequencies, ready to apply.
///
/// All apply methods take tensors shaped `[tokens][heads][head_dim]` through a [`View`]
/// (strides in elements), rotate dimensions `0..rotary_dim` of every head and leave (or,
/// out of place, copy) the rest. q and k of one call share positions and cos/sin rows but
/// may have their own head counts and strides (GQA/MQA). Zero tokens or heads is an `Ok`
/// no-op. A call that returns an error has written nothing.
#[derive(Clone, Debug)]
pub struct Rope {
    config: RopeConfig,
    freqs: Frequencies,
    tier: Option<Tier>,
}

impl Rope {
    /// Validates `config` and computes its frequencies.
    ///
    /// # Errors
    /// Any error of [`RopeConfig::validate`].
    pub fn new(config: RopeConfig) -> Result<Self, RopeError> {
        let freqs = Frequencies::new(&config, 0)?;
        Ok(Rope { config, freqs, tier: None })
    }

    /// Pins this object to `tier` instead of the process-wide dispatcher.
    ///
    /// # Errors
    /// [`RopeError::TierUnavailable`] if this build or CPU lacks the tier.
    pub fn with_tier(mut self, tier: Tier) -> Result<Self, RopeError> {
        if !tier.is_available() {
            return Err(RopeError::TierUnavailable);
        }
        self.tier = Some(tier);
        Ok(self)
    }

    /// The configuration.
    pub fn config(&self) -> &RopeConfig {
        &self.config
    }

    /// The frequencies used when they do not depend on the sequence length.
    pub fn frequencies(&self) -> &Frequencies {
        &self.freqs
    }

    /// The tier this object's calls run on.
    pub fn tier(&self) -> Tier {
        self.kernels().tier
    }

    #[inline]
    fn kernels(&self) -> &'static Kernels {
        match self.tier {
            Some(t) => dispatch::kernels_for(t).unwrap_or_else(dispatch::active_kernels),
            None => dispatch::active_kernels(),
        }
    }

    /// Fills a caller table with the rows of positions `start..start + rows`
    /// (`cos.len() == sin.len() == rows * rotary_dim / 2`), with the same values the
    /// on-the-fly path uses. Row `r` is position `start + r`.
    ///
    /// # Errors
    /// [`RopeError::TableShape`] for mismatched lengths, [`RopeError::PositionOverflow`]
    /// if `start + rows - 1` exceeds `u32::MAX`.
    pub fn fill_table(&self, start: u32, cos: &mut [f32], sin: &mut [f32]) -> Result<(), RopeError> {
        let pairs = self.config.pairs();
        if cos.len() != sin.len() || cos.len() % pairs != 0 {
            return Err(RopeError::TableShape);
        }
        let rows = cos.len() / pairs;
        if rows > 0 && u64::from(start) + rows as u64 - 1 > u64::from(u32::MAX) {
            return Err(RopeError::PositionOverflow);
        }
        for (r, (c, s)) in cos.chunks_exact_mut(pairs).zip(sin.chunks_exact_mut(pairs)).enumerate() {
            fill_row(&self.freqs, self.config.angle_mode, start + r as u32, c, s);
        }
        Ok(())
    }

    /// Builds a cache of positions `0..max_positions`.
    ///
    /// # Errors
    /// [`RopeError::PositionOverflow`] if `max_positions > 2^32`.
    #[cfg(feature = "alloc")]
    pub fn build_cache(&self, max_positions: usize) -> Result<crate::RopeCache, RopeError> {
        let pairs = self.config.pairs();
        let n = max_positions.checked_mul(pairs).ok_or(RopeError::PositionOverflow)?;
        let mut cos = alloc::vec![0.0f32; n];
        let mut sin = alloc::vec![0.0f32; n];
        self.fill_table(0, &mut cos, &mut sin)?;
        Ok(crate::RopeCache::from_parts(cos, sin, pairs))
    }

    /// Rotates one tensor in place.
    ///
    /// # Errors
    /// See [`Rope::apply_qk_into`].
    pub fn apply<T: Element>(&self, x: HeadsMut<'_, T>, opts: &Apply<'_>) -> Result<(), RopeError> {
        self.apply_qk(x, None, opts)
    }

    /// Rotates q and (optionally) k in place at the same positions.
    ///
    /// # Errors
    /// See [`Rope::apply_qk_into`].
    pub fn apply_qk<T: Element>(
        &self,
        q: HeadsMut<'_, T>,
        k: Option<HeadsMut<'_, T>>,
        opts: &Apply<'_>,
    ) -> Result<(), RopeError> {
        let hd = self.config.head_dim;
        q.view.validate(hd, q.data.len(), Operand::Q)?;
        let qp = q.data.as_mut_ptr();
        let mut jobs = [Some(Job { src: qp, dst: qp, view_src: q.view, view_dst: q.view }), None];
        if let Some(k) = k {
            k.view.validate(hd, k.data.len(), Operand::K)?;
            if k.view.tokens != q.view.tokens {
                return Err(RopeError::ShapeMismatch { operand: Operand::K });
            }
            let kp = k.data.as_mut_ptr();
            jobs[1] = Some(Job { src: kp, dst: kp, view_src: k.view, view_dst: k.view });
        }
        self.run(q.view.tokens, &jobs, opts)
    }

    /// Rotates one tensor out of place (`out` may have its own strides; same shape).
    ///
    /// # Errors
    /// See [`Rope::apply_qk_into`].
    pub fn apply_into<T: Element>(
        &self,
        x: Heads<'_, T>,
        out: HeadsMut<'_, T>,
        opts: &Apply<'_>,
    ) -> Result<(), RopeError> {
        self.apply_qk_into(x, out, None, opts)
    }

    /// Rotates q and (optionally) k out of place at the same positions. Outputs may have
    /// their own strides but the shapes of their inputs; pass-through dimensions are copied.
    ///
    /// # Errors
    /// Nothing is written when any of these is returned:
    /// - [`RopeError::OverlappingStrides`], [`RopeError::StrideOverflow`],
    ///   [`RopeError::BufferTooShort`] for a view that does not fit its buffer;
    /// - [`RopeError::ShapeMismatch`] if k has another token count than q, or an output
    ///   another shape than its input;
    /// - [`RopeError::PositionCountMismatch`], [`RopeError::PositionOverflow`] for
    ///   positions that do not match the tokens;
    /// - [`RopeError::TableShape`], [`RopeError::PositionOutOfRange`] for a cos/sin table
    ///   of the wrong width or too few rows.
    pub fn apply_qk_into<T: Element>(
        &self,
        q: Heads<'_, T>,
        q_out: HeadsMut<'_, T>,
        k: Option<(Heads<'_, T>, HeadsMut<'_, T>)>,
        opts: &Apply<'_>,
    ) -> Result<(), RopeError> {
        let hd = self.config.head_dim;
        let pair = |x: &Heads<'_, T>, o: &mut HeadsMut<'_, T>, op_in: Operand, op_out: Operand| {
            x.view.validate(hd, x.data.len(), op_in)?;
            o.view.validate(hd, o.data.len(), op_out)?;
            if o.view.tokens != x.view.tokens || o.view.heads != x.view.heads {
                return Err(RopeError::ShapeMismatch { operand: op_out });
            }
            Ok(Job { src: x.data.as_ptr(), dst: o.data.as_mut_ptr(), view_src: x.view, view_dst: o.view })
        };
        let mut q_out = q_out;
        let mut jobs = [Some(pair(&q, &mut q_out, Operand::Q, Operand::QOut)?), None];
        if let Some((k, mut k_out)) = k {
            let job = pair(&k, &mut k_out, Operand::K, Operand::KOut)?;
            if k.view.tokens != q.view.tokens {
                return Err(RopeError::ShapeMismatch { operand: Operand::K });
            }
            jobs[1] = Some(job);
        }
        self.run(q.view.tokens, &jobs, opts)
    }

    /// Validates positions and the cos/sin source, then rotates every token.
    fn run<T: Element>(
        &self,
        tokens: usize,
        jobs: &[Option<Job<T>>; 2],
        opts: &Apply<'_>,
    ) -> Result<(), RopeError> {
        let pairs = self.config.pairs();
        // Positions: count, overflow, and the largest one (for tables and seq_len).
        let max_pos: Option<u32> = match opts.positions {
            Positions::Ids(ids) => {
                if ids.len() != tokens {
                    return Err(RopeError::PositionCountMismatch { tokens, positions: ids.len() });
                }
                ids.iter().copied().max()
            }
            Positions::Start(s) => {
                if tokens == 0 {
                    None
                } else {
                    let last = u64::from(s) + tokens as u64 - 1;
                    Some(u32::try_from(last).map_err(|_| RopeError::PositionOverflow)?)
                }
            }
        };
        if let CosSin::Table(table) = opts.cos_sin {
            table.check_pairs(pairs)?;
            if let Some(m) = max_pos {
                if m as usize >= table.rows() {
                    return Err(RopeError::PositionOutOfRange { position: m, rows: table.rows() });
                }
            }
        }
        let Some(max_pos) = max_pos else { return Ok(()) };
        if jobs.iter().flatten().all(|j| j.view_src.is_empty()) {
            return Ok(());
        }

        let seq_len = u64::from(max_pos) + 1;
        let dynamic;
        let freqs = if self.config.scaling.depends_on_seq_len() {
            dynamic = Frequencies::new(&self.config, seq_len)?;
            &dynamic
        } else {
            &self.freqs
        };

        let kernels = self.kernels();
        let rotate = T::rotate_fn(kernels);
        let layout: Layout = self.config.layout;
        let inverse = opts.direction == Direction::Inverse;
        let head_dim = self.config.head_dim;
        // Rotates token `t` of every tensor with one cos/sin row.
        let rotate_token = |t: usize, cos: &[f32], sin: &[f32]| {
            for job in jobs.iter().flatten() {
                if job.view_src.heads == 0 {
                    continue;
                }
                let args = RotateArgs {
                    // SAFETY: t < tokens and the views were validated against their buffers,
                    // so the token's first head lies inside each buffer.
                    src: unsafe { job.src.add(t * job.view_src.token_stride) },
                    // SAFETY: as above for the destination view.
                    dst: unsafe { job.dst.add(t * job.view_dst.token_stride) },
                    heads: job.view_src.heads,
                    src_head_stride: job.view_src.head_stride,
                    dst_head_stride: job.view_dst.head_stride,
                    head_dim,
                    cos,
                    sin,
                    layout,
                    inverse,
                };
                // SAFETY: validated views keep every head of this token in bounds and
                // non-overlapping; in place, src == dst with equal strides; out of place,
                // the buffers come from a `&[T]` and a `&mut [T]`, which cannot overlap.
                // `kernels` came from the dispatcher, which checked the CPU.
                unsafe { rotate(&args) };
            }
        };

        match opts.cos_sin {
            CosSin::Table(table) => {
                for t in 0..tokens {
                    let (cos, sin) = table.row_in_range(opts.positions.get(t));
                    rotate_token(t, cos, sin);
                }
            }
            CosSin::OnTheFly => {
                let mode: AngleMode = self.config.angle_mode;
                let mut cos_buf = [0.0f32; MAX_PAIRS];
                let mut sin_buf = [0.0f32; MAX_PAIRS];
                for t in 0..tokens {
                    let pos = opts.positions.get(t);
                    fill_row(freqs, mode, pos, &mut cos_buf[..pairs], &mut sin_buf[..pairs]);
                    rotate_token(t, &cos_buf[..pairs], &sin_buf[..pairs]);
                }
            }
        }
        Ok(())
    }
}
