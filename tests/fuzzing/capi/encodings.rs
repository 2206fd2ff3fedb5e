//! The `capi` target's calls of the sibling encodings: `rope_sinusoidal_*`,
//! `rope_learned_add_*`, `rope_relative_*` with the T5 and DeBERTa-v2 bucket functions,
//! and `rope_alibi_*`, with the checks of [`super`]: random metadata (dimensions,
//! row strides, token counts, positions, grids, parameters, enum values) over real
//! canary-padded buffers, each call compared with the same call of
//! `rope_kernels::encodings`.

use std::mem::{align_of, size_of};

use rope_kernels::encodings::{
    add_alibi, alibi_slopes, alibi_slopes_with_bias_max, deberta_log_bucket_position,
    t5_relative_position_bucket, AlibiForm, LearnedElement, LearnedPositions, RelativeGrid,
    RelativePositions, Sinusoidal, SinusoidalLayout,
};
use rope_kernels::{bf16, f16, Positions, RopeError};
use rope_kernels_capi::{self as c, rope_status};

use super::super::diff::random_elem;
use super::super::input::{Input, Seed, SplitMix};
use super::config::WILD_DIMS;
use super::fields::{count, flag, raw, struct_size, EnumRaw, F64Raw, Field, StartRaw};
use super::memory::{pass, required, Arg, Region, Watch};
use super::rope::{ids, CElem};
use super::status::{status, Ctx};
use super::MAX_BUF;

raw! {
    /// A `u32` parameter: from [`U32S`] (`sel < 0xE0`) or `raw`.
    pub struct U32Raw {
        pub sel: u8,
        pub raw: u32,
    }
}

/// Typical and boundary values of the `u32` parameters (buckets, distances, spans).
pub const U32S: [u32; 18] = [
    0,
    1,
    2,
    3,
    4,
    8,
    16,
    32,
    64,
    128,
    256,
    512,
    1 << 30,
    (1 << 30) + 1,
    i32::MAX as u32,
    (i32::MAX as u32 - 1) / 2,
    (i32::MAX as u32 - 1) / 2 + 1,
    u32::MAX,
];

impl U32Raw {
    pub fn get(&self) -> u32 {
        if self.sel < 0xE0 {
            U32S[usize::from(self.sel) % U32S.len()]
        } else {
            self.raw
        }
    }

    pub fn exact(v: u32) -> Self {
        U32Raw { sel: 0xFF, raw: v }
    }
}

/// A small count (`v % m`) or, for `v >= 0xF0`, one of 0, 1, 2^16, 2^32, `usize::MAX`,
/// `usize::MAX / 2 + 1`.
fn small_or_wild(v: u8, m: u8) -> usize {
    if v < 0xF0 {
        usize::from(v % m)
    } else {
        [0, 1, 1 << 16, 1 << 32, usize::MAX, usize::MAX / 2 + 1][usize::from(v & 7) % 6]
    }
}

/// A row stride for rows of `row_len`: `row_len + s % 4` (`< 0xF0`), `row_len - 1 - (s & 3)`
/// (too small, `< 0xF8`), else 0, 1, 2^32, `usize::MAX`, `usize::MAX / 2 + 1`.
fn row_stride(s: u8, row_len: usize) -> usize {
    match s {
        0..=0xEF => row_len.wrapping_add(usize::from(s % 4)),
        0xF0..=0xF7 => row_len.wrapping_sub(1 + usize::from(s & 3)),
        _ => [0, 1, 1 << 32, usize::MAX, usize::MAX / 2 + 1][usize::from(s & 7) % 5],
    }
}

/// `(real, passed)` elements of a buffer holding `rows` rows of `row_len`, `stride` apart:
/// the extent, adjusted by `len` (`0xE0..0xE8` longer, `0xE8..0xF0` shorter, else passed as
/// [`count`]); a small buffer when the extent overflows or is too large to build.
fn rows_buffer(rows: usize, row_len: usize, stride: usize, len: u8, size: usize) -> (usize, usize) {
    let extent =
        if rows == 0 { Some(0) } else { (rows - 1).checked_mul(stride).and_then(|e| e.checked_add(row_len)) };
    match extent.filter(|&e| e <= MAX_BUF) {
        None => (usize::from(len % 64), usize::from(len % 64)),
        Some(e) => {
            let real = match len {
                0xE0..=0xE7 => e + usize::from(len & 7),
                0xE8..=0xEF => e.saturating_sub(1 + usize::from(len & 7)),
                _ => e,
            };
            (real, count(len, real, size))
        }
    }
}

/// A dimension: `1 + d % 160`, or [`WILD_DIMS`] for `d >= 0xFF00`.
fn dim(d: u16) -> usize {
    if d >= 0xFF00 {
        WILD_DIMS[usize::from(d & 0xFF) % WILD_DIMS.len()]
    } else {
        1 + usize::from(d) % 160
    }
}

// ---------------------------------------------------------------------------------------
// Positions of the absolute encodings.

raw! {
    /// A `rope_positions` and its ids.
    pub struct PosRaw {
        pub st: u8,
        pub mode: EnumRaw,
        pub start: StartRaw,
        pub ids: u8,
        /// The count: tokens (`< 0xF0`), `tokens + (l & 7) - 3` (`< 0xF8`), or a count no
        /// buffer has.
        pub ids_len: u8,
        /// As `OptsRaw::ids_sel`; for learned tables the ids are reduced modulo `rows + 1`
        /// unless `>= 0xF0`.
        pub ids_sel: u8,
    }
}

struct Pos {
    st: Region,
    ids: Arg<u32>,
    mode: u32,
    start: u32,
}

impl Pos {
    fn new(raw: &PosRaw, tokens: usize, modulo: Option<u32>, g: &mut SplitMix) -> Self {
        let n_ids = tokens.min(4096);
        let (real, n) = match raw.ids_len {
            l if l < 0xF0 => (n_ids, n_ids),
            l if l < 0xF8 => {
                let n = (n_ids + usize::from(l & 7)).saturating_sub(3);
                (n, n)
            }
            l => (n_ids, count(l, n_ids, 4)),
        };
        let mut values = ids(real, raw.ids_sel, false, g);
        if let Some(m) = modulo.filter(|_| raw.ids_sel < 0xF0) {
            values.iter_mut().for_each(|v| *v %= m);
        }
        let ids = Arg::new(&values, raw.ids, n);
        let (mode, start) = (raw.mode.get(2), raw.start.get(tokens));
        let value = c::rope_positions { mode, start, position_ids: ids.ptr(), position_ids_len: ids.len };
        let st = Region::with_struct(
            value,
            size_of::<c::rope_positions>(),
            pass(raw.st, align_of::<c::rope_positions>()),
        );
        Pos { st, ids, mode, start }
    }

    fn defects(&self, d: &mut Vec<rope_status>) {
        required(self.st.pass(), d);
        match self.mode {
            c::ROPE_POSITIONS_START => {}
            c::ROPE_POSITIONS_IDS => self.ids.defects(d),
            _ => d.push(c::ROPE_UNKNOWN_ENUM),
        }
    }

    fn rust<'a>(&self, ids: &'a [u32]) -> Positions<'a> {
        if self.mode == c::ROPE_POSITIONS_IDS {
            Positions::Ids(ids)
        } else {
            Positions::Start(self.start)
        }
    }
}

// ---------------------------------------------------------------------------------------
// Sinusoidal.

raw! {
    /// `rope_sinusoidal_fill_table_f32` or `rope_sinusoidal_add_{f32,f16,bf16}`.
    pub struct SinusoidalRaw {
        /// `variant % 4`: fill_table, add f32, f16, bf16.
        pub variant: u8,
        pub dim: u16,
        pub layout: EnumRaw,
        pub base: F64Raw,
        pub x: u8,
        pub len: u8,
        /// Rows: `tokens % 9` (fill_table) or as [`small_or_wild`].
        pub tokens: u8,
        pub stride: u8,
        pub pos: PosRaw,
        pub seed: u64,
        pub specials: u8,
    }
}

/// `rope_sinusoidal_add_*` for an element type.
type SinusoidalAdd<C> = unsafe extern "C" fn(
    usize,
    u32,
    f64,
    *mut C,
    usize,
    usize,
    usize,
    *const c::rope_positions,
) -> rope_status;

pub fn sinusoidal(ctx: &mut Ctx<'_>, raw: &SinusoidalRaw) {
    let dim = dim(raw.dim);
    let layout = raw.layout.get(2);
    let base = raw.base.get(&[c::ROPE_SINUSOIDAL_BASE, 10_000.0, 1e4, 500.0, 1.0]);
    let model = |d: &mut Vec<rope_status>| -> Option<Result<Sinusoidal, RopeError>> {
        let layout = match layout {
            c::ROPE_SINUSOIDAL_INTERLEAVED => SinusoidalLayout::Interleaved,
            c::ROPE_SINUSOIDAL_CONCATENATED => SinusoidalLayout::Concatenated,
            _ => {
                d.push(c::ROPE_UNKNOWN_ENUM);
                return None;
            }
        };
        Some(Sinusoidal::with_base(dim, layout, base))
    };
    match raw.variant % 4 {
        0 => {
            let rows = usize::from(raw.tokens % 9);
            let ragged = if (0xF0..0xF4).contains(&raw.len) { 1 + usize::from(raw.len & 3) } else { 0 };
            let real = rows.saturating_mul(dim).min(MAX_BUF) + ragged;
            let n = if raw.len < 0xF4 { real } else { count(raw.len, real, 4) };
            let out = Arg::new(&vec![f32::from_bits(0xA5A5_A5A5); real], raw.x, n);
            let start = raw.pos.start.get(rows);
            let mut d = Vec::new();
            let pe = model(&mut d);
            out.defects(&mut d);
            let rust = pe.map(|pe| {
                let mut v = out.passed();
                pe.and_then(|pe| pe.fill_table(start, &mut v)).map(|()| v)
            });
            let watch = Watch::new([&out.region]);
            // SAFETY: `out` NULL or `real` floats, `n <= real` or rejected.
            let s = unsafe { c::rope_sinusoidal_fill_table_f32(dim, layout, base, start, out.ptr(), n) };
            let ok = ctx.judge("rope_sinusoidal_fill_table_f32", s, &d, rust.as_ref().map(status));
            let written =
                if ok { vec![out.written(&rust.expect("oracle").expect("Ok"))] } else { Vec::new() };
            watch.verify(ctx, "rope_sinusoidal_fill_table_f32", ok, &written);
        }
        1 => sinusoidal_add::<f32>(
            ctx,
            raw,
            dim,
            layout,
            base,
            c::rope_sinusoidal_add_f32,
            "rope_sinusoidal_add_f32",
        ),
        2 => sinusoidal_add::<f16>(
            ctx,
            raw,
            dim,
            layout,
            base,
            c::rope_sinusoidal_add_f16,
            "rope_sinusoidal_add_f16",
        ),
        _ => sinusoidal_add::<bf16>(
            ctx,
            raw,
            dim,
            layout,
            base,
            c::rope_sinusoidal_add_bf16,
            "rope_sinusoidal_add_bf16",
        ),
    }
}

fn sinusoidal_add<T: CElem>(
    ctx: &mut Ctx<'_>,
    raw: &SinusoidalRaw,
    dim: usize,
    layout: u32,
    base: f64,
    f: SinusoidalAdd<T::C>,
    call: &'static str,
) {
    let mut g = SplitMix(raw.seed);
    let tokens = small_or_wild(raw.tokens, 9);
    let stride = row_stride(raw.stride, dim);
    let (real, n) = rows_buffer(tokens, dim, stride, raw.len, size_of::<T>());
    let x =
        Arg::new(&(0..real).map(|_| random_elem::<T>(&mut g, raw.specials)).collect::<Vec<T>>(), raw.x, n);
    let pos = Pos::new(&raw.pos, tokens, None, &mut g);
    let mut d = Vec::new();
    let pe = match layout {
        c::ROPE_SINUSOIDAL_INTERLEAVED => Some(SinusoidalLayout::Interleaved),
        c::ROPE_SINUSOIDAL_CONCATENATED => Some(SinusoidalLayout::Concatenated),
        _ => {
            d.push(c::ROPE_UNKNOWN_ENUM);
            None
        }
    }
    .map(|l| Sinusoidal::with_base(dim, l, base));
    x.defects(&mut d);
    pos.defects(&mut d);
    let ids = pos.ids.passed();
    let rust = pe.map(|pe| {
        let mut v = x.passed();
        pe.and_then(|pe| pe.add_to(&mut v, tokens, stride, pos.rust(&ids))).map(|()| v)
    });
    let watch = Watch::new([&x.region, &pos.st, &pos.ids.region]);
    // SAFETY: `x` NULL or `real` elements (`n <= real` or rejected); `pos` NULL or a real
    // struct whose ids are real.
    let s = unsafe { f(dim, layout, base, x.ptr().cast(), n, tokens, stride, pos.st.ptr()) };
    let ok = ctx.judge(call, s, &d, rust.as_ref().map(status));
    let written = if ok { vec![x.written(&rust.expect("oracle").expect("Ok"))] } else { Vec::new() };
    watch.verify(ctx, call, ok, &written);
}

// ---------------------------------------------------------------------------------------
// Learned.

raw! {
    /// `rope_learned_add_*`.
    pub struct LearnedRaw {
        /// `variant % 5`: f32, f16, bf16, f16 with an f32 table, bf16 with an f32 table.
        pub variant: u8,
        pub dim: u16,
        /// Table rows: `rows % 17`.
        pub rows: u8,
        pub table: u8,
        /// `0xE0..0xE4`: `1 + (l & 3)` more elements (ragged); else as [`count`].
        pub table_len: u8,
        pub x: u8,
        pub len: u8,
        pub tokens: u8,
        pub stride: u8,
        pub pos: PosRaw,
        pub seed: u64,
        pub specials: u8,
    }
}

/// `rope_learned_add_*` for a table of `P` and embeddings of `T` (C storage types).
type LearnedAdd<P, T> = unsafe extern "C" fn(
    *const P,
    usize,
    usize,
    *mut T,
    usize,
    usize,
    usize,
    *const c::rope_positions,
) -> rope_status;

pub fn learned(ctx: &mut Ctx<'_>, raw: &LearnedRaw) {
    match raw.variant % 5 {
        0 => learned_add::<f32, f32>(ctx, raw, c::rope_learned_add_f32, "rope_learned_add_f32"),
        1 => learned_add::<f16, f16>(ctx, raw, c::rope_learned_add_f16, "rope_learned_add_f16"),
        2 => learned_add::<bf16, bf16>(ctx, raw, c::rope_learned_add_bf16, "rope_learned_add_bf16"),
        3 => learned_add::<f16, f32>(
            ctx,
            raw,
            c::rope_learned_add_f16_table_f32,
            "rope_learned_add_f16_table_f32",
        ),
        _ => learned_add::<bf16, f32>(
            ctx,
            raw,
            c::rope_learned_add_bf16_table_f32,
            "rope_learned_add_bf16_table_f32",
        ),
    }
}

fn learned_add<T: CElem, P: CElem + LearnedElement<T>>(
    ctx: &mut Ctx<'_>,
    raw: &LearnedRaw,
    f: LearnedAdd<P::C, T::C>,
    call: &'static str,
) {
    let mut g = SplitMix(raw.seed);
    let dim = dim(raw.dim);
    let rows = usize::from(raw.rows % 17);
    let ragged = if (0xE0..0xE4).contains(&raw.table_len) { 1 + usize::from(raw.table_len & 3) } else { 0 };
    let t_real = rows.saturating_mul(dim).min(MAX_BUF) + ragged;
    let t_n = if ragged > 0 { t_real } else { count(raw.table_len, t_real, size_of::<P>()) };
    let table = Arg::new(
        &(0..t_real).map(|_| random_elem::<P>(&mut g, raw.specials)).collect::<Vec<P>>(),
        raw.table,
        t_n,
    );
    let tokens = small_or_wild(raw.tokens, 9);
    let stride = row_stride(raw.stride, dim);
    let (real, n) = rows_buffer(tokens, dim, stride, raw.len, size_of::<T>());
    let x =
        Arg::new(&(0..real).map(|_| random_elem::<T>(&mut g, raw.specials)).collect::<Vec<T>>(), raw.x, n);
    let pos = Pos::new(&raw.pos, tokens, Some(rows as u32 + 1), &mut g);
    let mut d = Vec::new();
    table.defects(&mut d);
    x.defects(&mut d);
    pos.defects(&mut d);
    let (tv, ids) = (table.passed(), pos.ids.passed());
    let rust = {
        let mut v = x.passed();
        LearnedPositions::new(&tv, dim)
            .and_then(|wpe| wpe.add_to(&mut v, tokens, stride, pos.rust(&ids)))
            .map(|()| v)
    };
    let watch = Watch::new([&table.region, &x.region, &pos.st, &pos.ids.region]);
    // SAFETY: `table` and `x` NULL or real buffers (counts at most real, or rejected); `pos`
    // NULL or a real struct whose ids are real.
    let s = unsafe { f(table.ptr().cast(), t_n, dim, x.ptr().cast(), n, tokens, stride, pos.st.ptr()) };
    let ok = ctx.judge(call, s, &d, Some(status(&rust)));
    let written = if ok { vec![x.written(&rust.expect("Ok"))] } else { Vec::new() };
    watch.verify(ctx, call, ok, &written);
}

// ---------------------------------------------------------------------------------------
// Relative positions.

raw! {
    /// A `rope_relative_grid`.
    pub struct GridRaw {
        pub st: u8,
        /// `q_len % 17` or wild ([`small_or_wild`]).
        pub q_len: u8,
        pub k_len: u8,
        pub q_off: StartRaw,
        pub k_off: StartRaw,
    }
}

struct Grid {
    st: Region,
    rust: RelativeGrid,
}

impl Grid {
    fn new(raw: &GridRaw) -> Self {
        let (q, k) = (small_or_wild(raw.q_len, 17), small_or_wild(raw.k_len, 17));
        let value = c::rope_relative_grid {
            query_len: q,
            key_len: k,
            q_offset: raw.q_off.get(q),
            k_offset: raw.k_off.get(k),
        };
        let st = Region::with_struct(
            value,
            size_of::<c::rope_relative_grid>(),
            pass(raw.st, align_of::<c::rope_relative_grid>()),
        );
        Grid { st, rust: RelativeGrid::new(q, k).with_offsets(value.q_offset, value.k_offset) }
    }
}

raw! {
    /// `rope_relative_validate`, `_index`, `_fill`, `rope_t5_relative_position_bucket` or
    /// `rope_deberta_log_bucket_position`.
    pub struct RelativeRaw {
        /// `variant % 5`, in that order.
        pub variant: u8,
        pub st: u8,
        pub size: u8,
        pub kind: EnumRaw,
        pub max_distance: U32Raw,
        pub att_span: U32Raw,
        pub bucket_size: U32Raw,
        pub max_position: U32Raw,
        pub num_buckets: U32Raw,
        /// `rope_relative_index`'s positions.
        pub q: u32,
        pub k: u32,
        pub grid: GridRaw,
        /// The output (`int32_t` index or matrix, `int64_t` bucket).
        pub out: u8,
        pub len: u8,
        /// The relative position of the bucket functions: `raw as i64 >> (raw >> 58)`.
        pub rel: u64,
        pub bidirectional: u8,
    }
}

pub fn relative(ctx: &mut Ctx<'_>, raw: &RelativeRaw) {
    let value = c::rope_relative {
        struct_size: struct_size(raw.size, size_of::<c::rope_relative>()),
        kind: raw.kind.get(6),
        max_distance: raw.max_distance.get(),
        att_span: raw.att_span.get(),
        bucket_size: raw.bucket_size.get(),
        max_position: raw.max_position.get(),
        num_buckets: raw.num_buckets.get(),
    };
    let st = Region::with_struct(value, value.struct_size, pass(raw.st, align_of::<c::rope_relative>()));
    let mut d = Vec::new();
    required(st.pass(), &mut d);
    if value.struct_size != size_of::<c::rope_relative>() {
        d.push(c::ROPE_UNSUPPORTED_STRUCT_SIZE);
    }
    let t5 = |bidirectional| RelativePositions::T5Bucket {
        bidirectional,
        num_buckets: value.num_buckets,
        max_distance: value.max_distance,
    };
    let scheme = match value.kind {
        c::ROPE_RELATIVE_CLIPPED => Some(RelativePositions::Clipped { max_distance: value.max_distance }),
        c::ROPE_RELATIVE_CLIPPED_INDEX => {
            Some(RelativePositions::ClippedIndex { max_distance: value.max_distance })
        }
        c::ROPE_RELATIVE_DEBERTA_INDEX => Some(RelativePositions::DebertaIndex { att_span: value.att_span }),
        c::ROPE_RELATIVE_DEBERTA_V2_LOG_BUCKET => Some(RelativePositions::DebertaV2LogBucket {
            bucket_size: value.bucket_size,
            max_position: value.max_position,
        }),
        c::ROPE_RELATIVE_T5_BIDIRECTIONAL => Some(t5(true)),
        c::ROPE_RELATIVE_T5_CAUSAL => Some(t5(false)),
        _ => None,
    };
    let rel = (raw.rel as i64) >> (raw.rel >> 58);
    match raw.variant % 5 {
        0 => {
            if scheme.is_none() {
                d.push(c::ROPE_UNKNOWN_ENUM);
            }
            let rust = scheme.map(|r| r.validate());
            let watch = Watch::new([&st]);
            // SAFETY: NULL or a real struct of at least `struct_size` bytes.
            let s = unsafe { c::rope_relative_validate(st.ptr()) };
            ctx.judge("rope_relative_validate", s, &d, rust.as_ref().map(status));
            watch.verify(ctx, "rope_relative_validate", false, &[]);
        }
        1 => {
            if scheme.is_none() {
                d.push(c::ROPE_UNKNOWN_ENUM);
            }
            let out = Arg::new(&[0xA5A5_A5A5u32 as i32], raw.out, 1);
            required(out.region.pass(), &mut d);
            let rust = scheme.map(|r| r.index(raw.q, raw.k));
            let watch = Watch::new([&st, &out.region]);
            // SAFETY: `st` as above; `out` NULL or a real int32_t.
            let s = unsafe { c::rope_relative_index(st.ptr(), raw.q, raw.k, out.ptr()) };
            let ok = ctx.judge("rope_relative_index", s, &d, rust.as_ref().map(status));
            let written =
                if ok { vec![out.written(&[rust.expect("oracle").expect("Ok")])] } else { Vec::new() };
            watch.verify(ctx, "rope_relative_index", ok, &written);
        }
        2 => {
            if scheme.is_none() {
                d.push(c::ROPE_UNKNOWN_ENUM);
            }
            let grid = Grid::new(&raw.grid);
            required(grid.st.pass(), &mut d);
            let g = grid.rust;
            let (real, n) = rows_buffer(g.query_len, g.key_len, g.key_len, raw.len, 4);
            let out = Arg::new(&vec![0xA5A5_A5A5u32 as i32; real], raw.out, n);
            out.defects(&mut d);
            let rust = scheme.map(|r| {
                let mut v = out.passed();
                r.fill(&mut v, g).map(|()| v)
            });
            let watch = Watch::new([&st, &grid.st, &out.region]);
            // SAFETY: `st`, `grid` NULL or real structs; `out` NULL or `real` int32_t
            // (`n <= real` or rejected).
            let s = unsafe { c::rope_relative_fill(st.ptr(), grid.st.ptr(), out.ptr(), n) };
            let ok = ctx.judge("rope_relative_fill", s, &d, rust.as_ref().map(status));
            let written =
                if ok { vec![out.written(&rust.expect("oracle").expect("Ok"))] } else { Vec::new() };
            watch.verify(ctx, "rope_relative_fill", ok, &written);
        }
        3 => {
            let mut d = Vec::new();
            let bidirectional = flag(raw.bidirectional);
            if bidirectional > 1 {
                d.push(c::ROPE_INVALID_ARGUMENT);
            }
            let out = Arg::new(&[0xA5A5_A5A5u32 as i32], raw.out, 1);
            required(out.region.pass(), &mut d);
            let rust =
                t5_relative_position_bucket(rel, bidirectional == 1, value.num_buckets, value.max_distance);
            let watch = Watch::new([&out.region]);
            // SAFETY: `out` NULL or a real int32_t.
            let s = unsafe {
                c::rope_t5_relative_position_bucket(
                    rel,
                    bidirectional,
                    value.num_buckets,
                    value.max_distance,
                    out.ptr(),
                )
            };
            let ok = ctx.judge("rope_t5_relative_position_bucket", s, &d, Some(status(&rust)));
            let written = if ok { vec![out.written(&[rust.expect("Ok")])] } else { Vec::new() };
            watch.verify(ctx, "rope_t5_relative_position_bucket", ok, &written);
        }
        _ => {
            let mut d = Vec::new();
            let out = Arg::new(&[0xA5A5_A5A5_A5A5_A5A5u64 as i64], raw.out, 1);
            required(out.region.pass(), &mut d);
            let rust = deberta_log_bucket_position(rel, value.bucket_size, value.max_position);
            let watch = Watch::new([&out.region]);
            // SAFETY: `out` NULL or a real int64_t.
            let s = unsafe {
                c::rope_deberta_log_bucket_position(rel, value.bucket_size, value.max_position, out.ptr())
            };
            let ok = ctx.judge("rope_deberta_log_bucket_position", s, &d, Some(status(&rust)));
            let written = if ok { vec![out.written(&[rust.expect("Ok")])] } else { Vec::new() };
            watch.verify(ctx, "rope_deberta_log_bucket_position", ok, &written);
        }
    }
}

// ---------------------------------------------------------------------------------------
// ALiBi.

raw! {
    /// `rope_alibi_slopes`, `rope_alibi_slopes_with_bias_max` or `rope_alibi_add_f32`.
    pub struct AlibiRaw {
        /// `variant % 3`, in that order.
        pub variant: u8,
        /// `heads % 17`.
        pub heads: u8,
        pub bias_max: F64Raw,
        pub slopes: u8,
        /// The slopes' count (the `heads` argument), as [`count`] of `heads`.
        pub slopes_len: u8,
        pub scores: u8,
        pub len: u8,
        pub stride: u8,
        pub grid: GridRaw,
        pub form: EnumRaw,
        pub seed: u64,
        /// Even: the real slopes; odd: random values with this chance in 256 of specials.
        pub specials: u8,
    }
}

pub fn alibi(ctx: &mut Ctx<'_>, raw: &AlibiRaw) {
    let heads = usize::from(raw.heads % 17);
    let n_slopes = count(raw.slopes_len, heads, 4);
    let mut g = SplitMix(raw.seed);
    match raw.variant % 3 {
        v @ (0 | 1) => {
            let out = Arg::new(&vec![f32::from_bits(0xA5A5_A5A5); heads], raw.slopes, n_slopes);
            let bias = raw.bias_max.get(&[8.0, 16.0, 4.0, 1.0, 0.5]);
            let mut d = Vec::new();
            out.defects(&mut d);
            let mut v_out = out.passed();
            let rust = if v == 0 {
                alibi_slopes(&mut v_out);
                Ok(())
            } else {
                alibi_slopes_with_bias_max(&mut v_out, bias)
            };
            let watch = Watch::new([&out.region]);
            let call = if v == 0 { "rope_alibi_slopes" } else { "rope_alibi_slopes_with_bias_max" };
            // SAFETY: `out` NULL or `heads` floats (`n_slopes <= heads` or rejected).
            let s = unsafe {
                if v == 0 {
                    c::rope_alibi_slopes(out.ptr(), n_slopes)
                } else {
                    c::rope_alibi_slopes_with_bias_max(out.ptr(), n_slopes, bias)
                }
            };
            let ok = ctx.judge(call, s, &d, Some(status(&rust)));
            let written = if ok { vec![out.written(&v_out)] } else { Vec::new() };
            watch.verify(ctx, call, ok, &written);
        }
        _ => {
            let mut slope_values = vec![0.0f32; heads];
            if raw.specials.is_multiple_of(2) {
                alibi_slopes(&mut slope_values);
            } else {
                slope_values.iter_mut().for_each(|s| *s = random_elem::<f32>(&mut g, raw.specials));
            }
            let slopes = Arg::new(&slope_values, raw.slopes, n_slopes);
            let grid = Grid::new(&raw.grid);
            let gr = grid.rust;
            let stride = row_stride(raw.stride, gr.key_len);
            let (real, n) = rows_buffer(heads.saturating_mul(gr.query_len), gr.key_len, stride, raw.len, 4);
            let scores = Arg::new(
                &(0..real).map(|_| random_elem::<f32>(&mut g, 16)).collect::<Vec<f32>>(),
                raw.scores,
                n,
            );
            let form = raw.form.get(2);
            let mut d = Vec::new();
            let rust_form = match form {
                c::ROPE_ALIBI_CAUSAL => Some(AlibiForm::Causal),
                c::ROPE_ALIBI_SYMMETRIC => Some(AlibiForm::Symmetric),
                _ => {
                    d.push(c::ROPE_UNKNOWN_ENUM);
                    None
                }
            };
            scores.defects(&mut d);
            required(grid.st.pass(), &mut d);
            slopes.defects(&mut d);
            let sv = slopes.passed();
            let rust = rust_form.map(|f| {
                let mut v = scores.passed();
                add_alibi(&mut v, stride, gr, &sv, f).map(|()| v)
            });
            let watch = Watch::new([&slopes.region, &grid.st, &scores.region]);
            // SAFETY: `scores` and `slopes` NULL or real buffers (counts at most real, or
            // rejected); `grid` NULL or a real struct.
            let s = unsafe {
                c::rope_alibi_add_f32(scores.ptr(), n, stride, grid.st.ptr(), slopes.ptr(), n_slopes, form)
            };
            let ok = ctx.judge("rope_alibi_add_f32", s, &d, rust.as_ref().map(status));
            let written =
                if ok { vec![scores.written(&rust.expect("oracle").expect("Ok"))] } else { Vec::new() };
            watch.verify(ctx, "rope_alibi_add_f32", ok, &written);
        }
    }
}
