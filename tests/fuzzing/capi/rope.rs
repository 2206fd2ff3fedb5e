//! The RoPE calls of a `capi` case: `rope_frequencies`, `rope_fill_table`, the tier
//! functions, and `rope_apply_*` / `rope_apply_into_*` for f32, f16 and bf16.

use std::ffi::CStr;
use std::mem::{align_of, size_of};
use std::ptr::{self, addr_of_mut};

use rope_kernels::dispatch;
use rope_kernels::{
    bf16, f16, ApplyOptions, CosSin, CosSinTable, Direction, Heads, HeadsMut, Positions, RopeError, Tier,
    View,
};
use rope_kernels_capi::{self as c, rope_status};

use super::super::diff::{extent, random_elem};
use super::super::elem::TestElem;
use super::super::input::{Input, Seed, SplitMix};
use super::config::{Config, Handle};
use super::fields::{count, raw, struct_size, EnumRaw, Field, StartRaw, U64Raw};
use super::memory::{pass, required, Arg, Pass, Plain, Region, Watch};
use super::status::{status, Ctx};
use super::MAX_BUF;

raw! {
    /// `rope_frequencies(handle, seq_len, inv_freq, len, attention_factor)`.
    pub struct FreqRaw {
        pub handle: u8,
        pub seq_len: U64Raw,
        pub out: u8,
        /// `rotary_dim / 2` (`< 0xE0`), `rotary_dim / 2 - 8 + (len & 15)` (`< 0xF0`), 0
        /// (`< 0xF8`), or a count no buffer has.
        pub len: u8,
        /// How `attention_factor` is passed (NULL: not wanted).
        pub af: u8,
    }
}

pub fn frequencies(ctx: &mut Ctx<'_>, cfg: &Config, handle: &Handle, raw: &FreqRaw) {
    let pairs = handle.pairs(cfg);
    let mut d = Vec::new();
    let h = handle.pointer(raw.handle, &mut d);
    let seq_len = raw.seq_len.get(&[0, 1, 4096, 1 << 20, 1 << 32, 8192, 131_072]);
    let (n, real) = match raw.len {
        l if l < 0xE0 => (pairs, pairs),
        l if l < 0xF0 => {
            let n = (pairs + usize::from(l & 0xF)).saturating_sub(8);
            (n, n)
        }
        l if l < 0xF8 => (0, 0),
        l => (count(l, pairs, 8), pairs),
    };
    let out = Arg::new(&vec![f64::from_bits(0xA5A5_A5A5_A5A5_A5A5); real], raw.out, n);
    out.defects(&mut d);
    if n < pairs {
        d.push(c::ROPE_BUFFER_TOO_SMALL);
    }
    let af = Arg::new(&[0.0f64], raw.af, 1);
    if matches!(af.region.pass(), Pass::Misaligned(_)) {
        d.push(c::ROPE_MISALIGNED_POINTER);
    }
    let rust = handle.rope().map(|r| r.frequencies_at(seq_len));
    let watch = Watch::new(handle.regions().chain([&out.region, &af.region]));
    // SAFETY: the handle pointer points to real memory of rope_size() bytes (or is NULL);
    // `out` is NULL or holds `n` doubles (or `n` is rejected); `af` NULL or one double.
    let s = unsafe { c::rope_frequencies(h, seq_len, out.ptr(), out.len, af.ptr()) };
    let ok = ctx.judge("rope_frequencies", s, &d, rust.as_ref().map(status));
    let mut written = Vec::new();
    if ok {
        let f = rust.expect("oracle").expect("Ok");
        written.push(out.written(f.inv_freq()));
        if af.region.pass() == Pass::Real {
            written.push(af.written(&[f.attention_factor()]));
        }
    }
    watch.verify(ctx, "rope_frequencies", ok, &written);
}

raw! {
    /// `rope_fill_table(handle, start, cos, sin, len)`.
    pub struct FillRaw {
        pub handle: u8,
        pub start: StartRaw,
        pub cos: u8,
        pub sin: u8,
        /// `rows % 9` rows.
        pub rows: u8,
        /// `0xF0..0xF4`: `1 + (len & 3)` more elements (a ragged table); else as [`count`].
        pub len: u8,
        /// `alias & 1`: `sin` is `cos`.
        pub alias: u8,
    }
}

pub fn fill_table(ctx: &mut Ctx<'_>, cfg: &Config, handle: &Handle, raw: &FillRaw) {
    let pairs = handle.pairs(cfg);
    let rows = usize::from(raw.rows % 9);
    let real = rows * pairs + if (0xF0..0xF4).contains(&raw.len) { 1 + usize::from(raw.len & 3) } else { 0 };
    let n = if raw.len < 0xF4 { real } else { count(raw.len, real, 4) };
    let start = raw.start.get(rows);
    let junk = vec![f32::from_bits(0xA5A5_A5A5); real];
    let cos = Arg::new(&junk, raw.cos, n);
    let sin = Arg::new(&junk, raw.sin, n);
    let alias = raw.alias & 1 == 1;
    let sin_arg = if alias { &cos } else { &sin };
    let mut d = Vec::new();
    let h = handle.pointer(raw.handle, &mut d);
    cos.defects(&mut d);
    sin_arg.defects(&mut d);
    if alias && n > 0 {
        d.push(c::ROPE_OVERLAPPING_BUFFERS);
    }
    let rust = handle.rope().filter(|_| !alias || n == 0).map(|r| {
        let (mut c, mut s) = (cos.passed(), sin_arg.passed());
        r.fill_table(start, &mut c, &mut s).map(|()| (c, s))
    });
    let watch = Watch::new(handle.regions().chain([&cos.region, &sin.region]));
    // SAFETY: real buffers of `real` floats each (or NULL), `n <= real` or rejected.
    let s = unsafe { c::rope_fill_table(h, start, cos.ptr(), sin_arg.ptr(), n) };
    let ok = ctx.judge("rope_fill_table", s, &d, rust.as_ref().map(status));
    let mut written = Vec::new();
    if ok {
        let (c, s) = rust.expect("oracle").expect("Ok");
        written.push(cos.written(&c));
        written.push(sin_arg.written(&s));
    }
    watch.verify(ctx, "rope_fill_table", ok, &written);
}

raw! {
    /// `op % 5`: `rope_tiers_available`, `rope_tier_active`, `rope_tier_force`,
    /// `rope_tier_cap`, `rope_tier_reset`; `tier` (0 is no tier); how the out-parameter is
    /// passed.
    pub struct TierRaw {
        pub op: u8,
        pub tier: EnumRaw,
        pub out: u8,
    }
}

pub fn tier(ctx: &mut Ctx<'_>, raw: &TierRaw) {
    let value = raw.tier.get(6);
    let known = dispatch::ALL_TIERS.into_iter().find(|t| *t as u32 == value);
    // SAFETY: a static NUL-terminated string for any value.
    let name = unsafe { CStr::from_ptr(c::rope_tier_name(value)) };
    assert_eq!(name.to_str().ok(), Some(known.map_or("unknown", Tier::name)), "rope_tier_name({value})");

    let best_upto = |cap: Option<Tier>| {
        dispatch::available_tiers().filter(|t| cap.is_none_or(|m| *t <= m)).last().expect("scalar")
    };
    let before = dispatch::active_tier();
    let out = Arg::new(&[0xA5A5_A5A5u32], raw.out, 1);
    let misaligned = matches!(out.region.pass(), Pass::Misaligned(_));
    let mut d = Vec::new();
    let p = out.ptr();
    let watch = Watch::new([&out.region]);
    // What the call writes to `*out` and the tier in use after it, if it succeeds.
    let (call, s, value_out, after): (&'static str, rope_status, Option<u32>, Tier) = match raw.op % 5 {
        0 => {
            required(out.region.pass(), &mut d);
            let mask = dispatch::available_tiers().fold(0u32, |m, t| m | 1 << (t as u32));
            // SAFETY: NULL or a real u32 (misaligned ones are rejected).
            ("rope_tiers_available", unsafe { c::rope_tiers_available(p) }, Some(mask), before)
        }
        1 => {
            required(out.region.pass(), &mut d);
            // SAFETY: as above.
            ("rope_tier_active", unsafe { c::rope_tier_active(p) }, Some(before as u32), before)
        }
        2 => {
            match known {
                None => d.push(c::ROPE_UNKNOWN_ENUM),
                Some(t) if !t.is_available() => d.push(c::ROPE_TIER_UNAVAILABLE),
                Some(_) => {}
            }
            let after = known.filter(|t| t.is_available()).unwrap_or(before);
            ("rope_tier_force", c::rope_tier_force(value), None, after)
        }
        3 => {
            if known.is_none() {
                d.push(c::ROPE_UNKNOWN_ENUM);
            }
            if misaligned {
                d.push(c::ROPE_MISALIGNED_POINTER);
            }
            let t = best_upto(known);
            // SAFETY: as above (NULL allowed).
            ("rope_tier_cap", unsafe { c::rope_tier_cap(value, p) }, Some(t as u32), t)
        }
        _ => {
            if misaligned {
                d.push(c::ROPE_MISALIGNED_POINTER);
            }
            let t = best_upto(None);
            // SAFETY: as above (NULL allowed).
            ("rope_tier_reset", unsafe { c::rope_tier_reset(p) }, Some(t as u32), t)
        }
    };
    let ok = ctx.judge(call, s, &d, Some(c::ROPE_OK));
    let written: Vec<_> = match value_out {
        Some(v) if ok && out.region.pass() == Pass::Real => vec![out.written(&[v])],
        _ => Vec::new(),
    };
    watch.verify(ctx, call, ok, &written);
    let after = if ok { after } else { before };
    assert_eq!(dispatch::active_tier(), after, "{call}: the tier in use\n{}", ctx.describe());
}

/// `rope_apply_{f32,f16,bf16}`.
pub type ApplyFn = unsafe extern "C" fn(
    *const c::rope_t,
    *const c::rope_tensor,
    *const c::rope_tensor,
    *const c::rope_apply_opts,
) -> rope_status;

/// `rope_apply_into_{f32,f16,bf16}`.
pub type ApplyIntoFn = unsafe extern "C" fn(
    *const c::rope_t,
    *const c::rope_tensor,
    *const c::rope_tensor,
    *const c::rope_tensor,
    *const c::rope_tensor,
    *const c::rope_apply_opts,
) -> rope_status;

/// An element type of the C entry points, with its storage type and apply functions.
pub trait CElem: TestElem + Plain {
    /// The C storage type (`float`, `uint16_t`).
    type C: Plain;
    const APPLY: ApplyFn;
    const APPLY_INTO: ApplyIntoFn;
    const CALLS: [&'static str; 2];
}

impl CElem for f32 {
    type C = f32;
    const APPLY: ApplyFn = c::rope_apply_f32;
    const APPLY_INTO: ApplyIntoFn = c::rope_apply_into_f32;
    const CALLS: [&'static str; 2] = ["rope_apply_f32", "rope_apply_into_f32"];
}

impl CElem for f16 {
    type C = u16;
    const APPLY: ApplyFn = c::rope_apply_f16;
    const APPLY_INTO: ApplyIntoFn = c::rope_apply_into_f16;
    const CALLS: [&'static str; 2] = ["rope_apply_f16", "rope_apply_into_f16"];
}

impl CElem for bf16 {
    type C = u16;
    const APPLY: ApplyFn = c::rope_apply_bf16;
    const APPLY_INTO: ApplyIntoFn = c::rope_apply_into_bf16;
    const CALLS: [&'static str; 2] = ["rope_apply_bf16", "rope_apply_into_bf16"];
}

raw! {
    /// One tensor argument: its `rope_tensor` struct, buffer and view.
    pub struct TensorRaw {
        /// How the struct pointer is passed (never NULL for k and k_out: their NULL means
        /// absent, chosen by [`ApplyRaw::k`]).
        pub st: u8,
        /// How the data pointer is passed.
        pub data: u8,
        /// The buffer: `extent + (len & 7)` (`0xE0..0xE8`), `extent - 1 - (len & 7)`
        /// (`0xE8..0xF0`), or `extent` passed as [`count`] says.
        pub len: u8,
        /// `view % 6`: BSHD, BHSD, padded (`a`, `b`), fused QKV (`a` other heads), strides
        /// from `wild` (< 1024), or every field from the wild palettes.
        pub view: u8,
        /// q: `tokens % 9`; the others: q's (k's) unless `>= 0xF8`, then `tokens & 7`.
        pub tokens: u8,
        /// q: `heads % 7`, k: `heads % 5`; outputs: their input's, one more if `>= 0xF8`.
        pub heads: u8,
        pub a: u8,
        pub b: u8,
        pub wild: u64,
    }
}

/// Counts beyond the typical: empty, small, huge, overflowing.
const WILD_COUNTS: [usize; 14] = [
    0,
    1,
    2,
    3,
    5,
    8,
    1 << 16,
    1 << 31,
    1 << 32,
    (1 << 32) + 1,
    usize::MAX,
    usize::MAX / 2 + 1,
    isize::MAX as usize / 2 + 1,
    1 << 62,
];

fn wild_stride(b: u8, hd: usize) -> usize {
    let v = [
        0,
        1,
        2,
        hd.wrapping_sub(1),
        hd,
        hd.wrapping_add(1),
        hd.wrapping_mul(2),
        hd.wrapping_mul(3),
        1 << 20,
        1 << 32,
        usize::MAX,
        usize::MAX / 2 + 1,
        usize::MAX - hd.wrapping_sub(2),
        isize::MAX as usize / 4 + 1,
        1 << 62,
        usize::MAX / 3,
    ];
    v[usize::from(b) % v.len()]
}

impl TensorRaw {
    fn view(&self, tokens: usize, heads: usize, hd: usize) -> View {
        let (a, b) = (usize::from(self.a % 4), usize::from(self.b % 8));
        let w = self.wild.to_le_bytes();
        let v = |token_stride, head_stride| View { tokens, heads, token_stride, head_stride };
        match self.view % 6 {
            0 => v(heads.wrapping_mul(hd), hd),
            1 => v(hd, tokens.wrapping_mul(hd)),
            2 => v(heads.wrapping_mul(hd.wrapping_add(a)).wrapping_add(b), hd.wrapping_add(a)),
            3 => v(heads.wrapping_add(a).wrapping_mul(hd), hd),
            4 => v(
                usize::from(u16::from_le_bytes([w[0], w[1]]) % 1024),
                usize::from(u16::from_le_bytes([w[2], w[3]]) % 1024),
            ),
            _ => View {
                tokens: WILD_COUNTS[usize::from(w[0]) % WILD_COUNTS.len()],
                heads: WILD_COUNTS[usize::from(w[1]) % WILD_COUNTS.len()],
                token_stride: wild_stride(w[2], hd),
                head_stride: wild_stride(w[3], hd),
            },
        }
    }
}

/// A tensor argument.
struct Tensor<T> {
    st: Region,
    data: Arg<T>,
    view: View,
}

impl<T: CElem> Tensor<T> {
    /// The tensor of `raw` with `tokens` and `heads` (unless its view is wild).
    fn new(raw: &TensorRaw, tokens: usize, heads: usize, hd: usize, g: &mut SplitMix, specials: u8) -> Self {
        let view = raw.view(tokens, heads, hd);
        let (real, n) = match extent(&view, hd).filter(|&e| e <= MAX_BUF) {
            None => (usize::from(raw.a % 64), usize::from(raw.a % 64)),
            Some(e) => {
                let real = match raw.len {
                    0xE0..=0xE7 => e + usize::from(raw.len & 7),
                    0xE8..=0xEF => e.saturating_sub(1 + usize::from(raw.len & 7)),
                    _ => e,
                };
                (real, count(raw.len, real, size_of::<T>()))
            }
        };
        let values: Vec<T> = (0..real).map(|_| random_elem::<T>(g, specials)).collect();
        let data = Arg::new(&values, raw.data, n);
        let st = Self::st_for(&data, view, pass(raw.st, align_of::<c::rope_tensor>()));
        Tensor { st, data, view }
    }

    /// A `rope_tensor` struct in its own region, for `data`.
    fn st_for(data: &Arg<T>, view: View, pass: Pass) -> Region {
        let value = c::rope_tensor {
            data: data.ptr().cast(),
            len: data.len,
            view: c::rope_view {
                tokens: view.tokens,
                heads: view.heads,
                token_stride: view.token_stride,
                head_stride: view.head_stride,
            },
        };
        Region::with_struct(value, size_of::<c::rope_tensor>(), pass)
    }

    fn defects(&self, d: &mut Vec<rope_status>) {
        required(self.st.pass(), d);
        self.data.defects(d);
    }
}

raw! {
    /// A `rope_apply_opts` and the buffers it points to.
    pub struct OptsRaw {
        /// How the struct pointer is passed (NULL: the defaults).
        pub ptr: u8,
        pub size: u8,
        pub direction: EnumRaw,
        pub position_mode: EnumRaw,
        /// `start` (in table mode modulo 256, unless the overflow choice).
        pub start: StartRaw,
        pub ids: u8,
        /// The count: tokens (`< 0xF0`), `tokens + (l & 7) - 3` (`< 0xF8`), or a count no
        /// buffer has.
        pub ids_len: u8,
        /// `ids_sel % 5`: ids below 16, below 4096, any, near `u32::MAX`, each its own;
        /// `>= 0xF0`: not reduced modulo 256 in table mode.
        pub ids_sel: u8,
        pub cos_sin: EnumRaw,
        pub cos: u8,
        pub sin: u8,
        /// Table rows: needed + `rows % 4` (`< 0xF0`), one to eight too few (`< 0xF8`),
        /// needed plus a ragged `1 + (rows & 3)` elements.
        pub rows: u8,
        /// The count passed for both tables, as [`count`].
        pub table_len: u8,
    }
}

/// Largest number of position ids and table rows the harness builds.
const MAX_IDS: usize = 4096;
const MAX_ROWS: usize = 512;

/// Position ids: `n` values, `sel % 5` picking the range (see [`OptsRaw::ids_sel`]).
pub fn ids(n: usize, sel: u8, reduce: bool, g: &mut SplitMix) -> Vec<u32> {
    (0..n)
        .map(|_| {
            let r = g.next();
            let mode = if sel % 5 == 4 { r >> 61 } else { u64::from(sel % 5) };
            let p = match mode % 4 {
                0 => (r % 16) as u32,
                1 => (r % 4096) as u32,
                2 => (r >> 32) as u32,
                _ => u32::MAX - (r % 16) as u32,
            };
            if reduce {
                p % 256
            } else {
                p
            }
        })
        .collect()
}

/// The options of an apply call: the struct, the ids and tables, and their Rust model.
struct Opts {
    st: Region,
    ids: Arg<u32>,
    cos: Arg<f32>,
    sin: Arg<f32>,
    value: c::rope_apply_opts,
    null: bool,
}

impl Opts {
    fn new(raw: &OptsRaw, tokens: usize, pairs: usize, g: &mut SplitMix, specials: u8) -> Self {
        let table = raw.cos_sin.get(2) == c::ROPE_COS_SIN_TABLE;
        let reduce = table && raw.ids_sel < 0xF0;
        let n_ids = tokens.min(MAX_IDS);
        let (n_real, n) = match raw.ids_len {
            l if l < 0xF0 => (n_ids, n_ids),
            l if l < 0xF8 => {
                let n = (n_ids + usize::from(l & 7)).saturating_sub(3);
                (n, n)
            }
            l => (n_ids, count(l, n_ids, 4)),
        };
        let id_values = ids(n_real, raw.ids_sel, reduce, g);
        let ids = Arg::new(&id_values, raw.ids, n);
        let mut start = raw.start.get(tokens);
        if table && !raw.start.near_end() {
            start %= 256;
        }
        let max_pos: Option<u64> = if raw.position_mode.get(2) == c::ROPE_POSITIONS_IDS {
            id_values.iter().map(|&p| u64::from(p)).max()
        } else {
            (tokens > 0).then(|| u64::from(start).saturating_add(tokens as u64 - 1))
        };
        let need = max_pos.map_or(0, |m| usize::try_from(m).map_or(usize::MAX, |m| m.saturating_add(1)));
        let (rows, extra) = match raw.rows {
            _ if need > MAX_ROWS => (usize::from(raw.rows % 8), 0),
            r if r < 0xF0 => (need + usize::from(r % 4), 0),
            r if r < 0xF8 => (need.saturating_sub(1 + usize::from(r & 7)), 0),
            r => (need, 1 + usize::from(r & 3)),
        };
        let real = rows * pairs + extra;
        let t = count(raw.table_len, real, 4);
        let table_values =
            |g: &mut SplitMix| -> Vec<f32> { (0..real).map(|_| random_elem::<f32>(g, specials)).collect() };
        let cos = Arg::new(&table_values(g), raw.cos, t);
        let sin = Arg::new(&table_values(g), raw.sin, t);
        let value = c::rope_apply_opts {
            struct_size: struct_size(raw.size, size_of::<c::rope_apply_opts>()),
            direction: raw.direction.get(2),
            position_mode: raw.position_mode.get(2),
            start,
            position_ids: ids.ptr(),
            position_ids_len: ids.len,
            cos_sin: raw.cos_sin.get(2),
            cos: cos.ptr(),
            sin: sin.ptr(),
            table_len: cos.len,
        };
        let pass = pass(raw.ptr, align_of::<c::rope_apply_opts>());
        let st = Region::new(value.struct_size.max(size_of::<c::rope_apply_opts>()), pass);
        let mut opts = Opts { st, ids, cos, sin, value, null: pass == Pass::Null };
        opts.write_struct();
        opts
    }

    /// Writes the struct field by field over zeros (it has padding, which must be bytes
    /// the harness can compare).
    fn write_struct(&mut self) {
        self.st.zero();
        let p = self.st.addr().cast::<c::rope_apply_opts>();
        let v = self.value;
        // SAFETY: the payload holds a whole `rope_apply_opts`; each field is written unaligned
        // through a raw place (no reference to the possibly misaligned struct).
        unsafe {
            addr_of_mut!((*p).struct_size).write_unaligned(v.struct_size);
            addr_of_mut!((*p).direction).write_unaligned(v.direction);
            addr_of_mut!((*p).position_mode).write_unaligned(v.position_mode);
            addr_of_mut!((*p).start).write_unaligned(v.start);
            addr_of_mut!((*p).position_ids).write_unaligned(v.position_ids);
            addr_of_mut!((*p).position_ids_len).write_unaligned(v.position_ids_len);
            addr_of_mut!((*p).cos_sin).write_unaligned(v.cos_sin);
            addr_of_mut!((*p).cos).write_unaligned(v.cos);
            addr_of_mut!((*p).sin).write_unaligned(v.sin);
            addr_of_mut!((*p).table_len).write_unaligned(v.table_len);
        }
    }

    fn defects(&self, d: &mut Vec<rope_status>) {
        if self.null {
            return;
        }
        let v = &self.value;
        required(self.st.pass(), d);
        if v.struct_size != size_of::<c::rope_apply_opts>() {
            d.push(c::ROPE_UNSUPPORTED_STRUCT_SIZE);
        }
        if v.direction > 1 || v.position_mode > 1 || v.cos_sin > 1 {
            d.push(c::ROPE_UNKNOWN_ENUM);
        }
        if v.position_mode == c::ROPE_POSITIONS_IDS {
            self.ids.defects(d);
        }
        if v.cos_sin == c::ROPE_COS_SIN_TABLE {
            self.cos.defects(d);
            self.sin.defects(d);
        }
    }

    /// The Rust options (with `ids`, `cos`, `sin` the passed elements), or the error of the
    /// table.
    fn rust<'a>(
        &self,
        ids: &'a [u32],
        cos: &'a [f32],
        sin: &'a [f32],
        pairs: usize,
    ) -> Result<ApplyOptions<'a>, RopeError> {
        if self.null {
            return Ok(ApplyOptions::default());
        }
        let v = &self.value;
        let positions = if v.position_mode == c::ROPE_POSITIONS_IDS {
            Positions::Ids(ids)
        } else {
            Positions::Start(v.start)
        };
        let direction = if v.direction == c::ROPE_INVERSE { Direction::Inverse } else { Direction::Forward };
        let cos_sin = if v.cos_sin == c::ROPE_COS_SIN_TABLE {
            CosSin::Table(CosSinTable::new(cos, sin, pairs)?)
        } else {
            CosSin::OnTheFly
        };
        Ok(ApplyOptions { positions, cos_sin, direction })
    }

    fn regions(&self) -> [&Region; 4] {
        [&self.st, &self.ids.region, &self.cos.region, &self.sin.region]
    }
}

raw! {
    /// `rope_apply_{f32,f16,bf16}` or `rope_apply_into_*`.
    pub struct ApplyRaw {
        /// `dtype % 3`: f32, f16, bf16.
        pub dtype: u8,
        /// `mode & 1`: out of place; `mode & 2`: aliased buffers (k's data is q's in place,
        /// q_out's is q's out of place).
        pub mode: u8,
        /// `k % 4 == 0`: q only; `>= 0xF0` out of place: exactly one of k and k_out NULL.
        pub k: u8,
        pub handle: u8,
        pub q: TensorRaw,
        pub k_t: TensorRaw,
        pub q_out: TensorRaw,
        pub k_out: TensorRaw,
        pub opts: OptsRaw,
        pub seed: u64,
        /// Chance in 256 that an element is a special value.
        pub specials: u8,
    }
}

pub fn apply<T: CElem>(ctx: &mut Ctx<'_>, cfg: &Config, handle: &Handle, raw: &ApplyRaw) {
    let pairs = handle.pairs(cfg);
    let hd = handle.live.as_ref().map_or(cfg.value.head_dim, |(_, r)| r.config().head_dim);
    let into = raw.mode & 1 == 1;
    let alias = raw.mode & 2 == 2;
    let with_k = !raw.k.is_multiple_of(4);
    let one_null = into && raw.k >= 0xF0;
    let mut g = SplitMix(raw.seed);
    let sp = raw.specials;

    let (tokens, q_heads) = (usize::from(raw.q.tokens % 9), usize::from(raw.q.heads % 7));
    let q = Tensor::<T>::new(&raw.q, tokens, q_heads, hd, &mut g, sp);
    let own = |t: &TensorRaw, inherited: usize| {
        if t.tokens >= 0xF8 {
            usize::from(t.tokens & 7)
        } else {
            inherited
        }
    };
    let more = |t: &TensorRaw, heads: usize| heads.wrapping_add(usize::from(t.heads >= 0xF8));
    let k_tokens = own(&raw.k_t, q.view.tokens);
    let mut k_raw = raw.k_t;
    k_raw.st = if pass(k_raw.st, 8) == Pass::Null { 0 } else { k_raw.st };
    let k = Tensor::<T>::new(&k_raw, k_tokens, usize::from(raw.k_t.heads % 5), hd, &mut g, sp);
    let q_out = Tensor::<T>::new(
        &raw.q_out,
        own(&raw.q_out, q.view.tokens),
        more(&raw.q_out, q.view.heads),
        hd,
        &mut g,
        sp,
    );
    let mut ko_raw = raw.k_out;
    ko_raw.st = if pass(ko_raw.st, 8) == Pass::Null { 0 } else { ko_raw.st };
    let k_out = Tensor::<T>::new(
        &ko_raw,
        own(&raw.k_out, k.view.tokens),
        more(&raw.k_out, k.view.heads),
        hd,
        &mut g,
        sp,
    );
    let opts = Opts::new(&raw.opts, q.view.tokens, pairs, &mut g, sp);

    // Aliasing: the written tensor (q_out out of place, k in place) is given q's buffer.
    let aliased = alias && (into || with_k);
    let alias_st = aliased.then(|| {
        let dst = if into { &q_out } else { &k };
        Tensor::<T>::st_for(&q.data, dst.view, dst.st.pass())
    });

    // The struct pointers of the call and the defects of what they point to.
    let mut d = Vec::new();
    let h = handle.pointer(raw.handle, &mut d);
    q.defects(&mut d);
    opts.defects(&mut d);
    let written_st = |t: &Tensor<T>, d: &mut Vec<rope_status>| -> *const c::rope_tensor {
        match &alias_st {
            Some(st) => {
                required(st.pass(), d);
                if q.data.len > 0 {
                    d.push(c::ROPE_OVERLAPPING_BUFFERS);
                }
                st.ptr()
            }
            None => {
                t.defects(d);
                t.st.ptr()
            }
        }
    };
    let (q_out_st, k_st, ko_st): (*const c::rope_tensor, *const c::rope_tensor, *const c::rope_tensor) =
        if into {
            let qo = written_st(&q_out, &mut d);
            let (mut ks, mut kos): (*const c::rope_tensor, *const c::rope_tensor) =
                (ptr::null(), ptr::null());
            if with_k {
                k.defects(&mut d);
                k_out.defects(&mut d);
                (ks, kos) = (k.st.ptr(), k_out.st.ptr());
                if one_null {
                    d.push(c::ROPE_NULL_POINTER);
                    if raw.k & 1 == 0 {
                        ks = ptr::null();
                    } else {
                        kos = ptr::null();
                    }
                }
            }
            (qo, ks, kos)
        } else {
            let ks = if with_k { written_st(&k, &mut d) } else { ptr::null() };
            (ptr::null(), ks, ptr::null())
        };

    // The Rust API on copies of the passed elements; `None` when it cannot be formed (no
    // live handle, aliased non-empty buffers: a defect either way).
    let (id_v, cos_v, sin_v) = (opts.ids.passed(), opts.cos.passed(), opts.sin.passed());
    let rust_k = with_k && !one_null;
    type Out<T> = Result<(Vec<T>, Option<Vec<T>>), RopeError>;
    let rust: Option<Out<T>> = handle.rope().and_then(|rope| {
        // The table is checked (a Rust error) before the buffers' overlap (a defect).
        let o = match opts.rust(&id_v, &cos_v, &sin_v, pairs) {
            Ok(o) => o,
            Err(e) => return Some(Err(e)),
        };
        if aliased && q.data.len > 0 {
            return None;
        }
        // The written tensor's elements (q's, empty, when aliased).
        let data = |t: &Tensor<T>| if aliased { q.data.passed() } else { t.data.passed() };
        let mut qv = q.data.passed();
        Some(if into {
            let mut qo = data(&q_out);
            let kv = k.data.passed();
            let mut ko = k_out.data.passed();
            let kk = rust_k.then(|| (Heads::new(&kv, k.view), HeadsMut::new(&mut ko, k_out.view)));
            rope.apply_qk_into(Heads::new(&qv, q.view), HeadsMut::new(&mut qo, q_out.view), kk, &o)
                .map(|()| (qo, rust_k.then_some(ko)))
        } else {
            let mut kv = data(&k);
            let kk = rust_k.then(|| HeadsMut::new(&mut kv, k.view));
            rope.apply_qk(HeadsMut::new(&mut qv, q.view), kk, &o).map(|()| (qv, rust_k.then_some(kv)))
        })
    });

    let mut regions: Vec<&Region> = handle.regions().collect();
    regions.extend([&q.st, &q.data.region, &k.st, &k.data.region, &q_out.st, &q_out.data.region]);
    regions.extend([&k_out.st, &k_out.data.region]);
    regions.extend(opts.regions());
    regions.extend(alias_st.as_ref());
    let watch = Watch::new(regions);
    let opts_p: *const c::rope_apply_opts = opts.st.ptr();
    let call = T::CALLS[usize::from(into)];
    // SAFETY: every pointer is NULL or points to a real struct or buffer of the harness;
    // counts are the real ones, smaller, or rejected (byte size past PTRDIFF_MAX).
    let s = unsafe {
        if into {
            T::APPLY_INTO(h, q.st.ptr(), q_out_st, k_st, ko_st, opts_p)
        } else {
            T::APPLY(h, q.st.ptr(), k_st, opts_p)
        }
    };
    let ok = ctx.judge(call, s, &d, rust.as_ref().map(status));
    let mut written = Vec::new();
    if ok {
        let (qv, kv) = rust.expect("oracle").expect("Ok");
        let (qa, ka) = if into { (&q_out.data, &k_out.data) } else { (&q.data, &k.data) };
        written.push(qa.written(&qv));
        if let Some(kv) = kv {
            written.push(ka.written(&kv));
        }
    }
    watch.verify(ctx, call, ok, &written);
}
