//! The options of a call ([`ApplyOptions`]: positions, cos/sin source, direction) and the strided
//! tensors it takes ([`Heads`], [`HeadsMut`]).

use crate::cossin::CosSinTable;
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
    pub(super) fn get(&self, t: usize) -> u32 {
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
    /// Rows of a caller table or a `RopeCache` (feature `alloc`), indexed by position.
    Table(CosSinTable<'a>),
}

/// Per-call options. `Default`: positions from 0, cos/sin on the fly, forward. `Copy`, 64
/// bytes on 64-bit targets.
#[derive(Clone, Copy, Debug, Default)]
pub struct ApplyOptions<'a> {
    /// Token positions.
    pub positions: Positions<'a>,
    /// cos/sin source.
    pub cos_sin: CosSin<'a>,
    /// Forward or inverse rotation.
    pub direction: Direction,
}

/// The old name of [`ApplyOptions`].
#[deprecated(since = "0.2.0", note = "renamed to `ApplyOptions`")]
pub type Apply<'a> = ApplyOptions<'a>;

impl<'a> ApplyOptions<'a> {
    /// Options with explicit `position_ids`.
    pub fn ids(position_ids: &'a [u32]) -> Self {
        ApplyOptions { positions: Positions::Ids(position_ids), ..ApplyOptions::default() }
    }

    /// Options with positions `start..start + tokens`.
    pub fn start(start: u32) -> Self {
        ApplyOptions { positions: Positions::Start(start), ..ApplyOptions::default() }
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
