//! The attention-layer call of a `capi` case: `rope_apply_layer` (issue 17) with random head
//! sets of one fused buffer, dtype tags for the input and each of q, k, v, destinations
//! (skip, in place, tensor, cache rows by `slot_mapping`, `block_table` or position),
//! single and ragged batches, position ids, cos/sin tables, and aliased buffers.
//!
//! Every buffer is bytes of its dtype in a canaried [`Region`]; the Rust API runs on copies
//! (typed with the same dispatch as the C side), and [`Ctx::judge`] / [`Watch::verify`] check
//! the status and every byte as for the other calls. The C side makes every boundary check
//! before the Rust crate's first one, so the harness forms the Rust call only when the
//! arguments have no boundary defect.

use std::mem::size_of;
use std::ptr::{self, addr_of_mut};

use rope_kernels::{
    bf16, f16, Batch, BlockQ8_0, CacheElement, CacheLayout, CosSin, CosSinTable, Dest, Direction, Element,
    HeadSet, LayerOptions, Positions, Qkv, Rope, RopeError, Slots, View,
};
use rope_kernels_capi::{self as c, rope_status};

use super::super::diff::{extent, random_elem};
use super::super::input::{Input, Seed, SplitMix};
use super::config::{Config, Handle};
use super::fields::{count, raw, struct_size, EnumRaw, Field, StartRaw};
use super::memory::{bytes_of, pass, required, Pass, Plain, Region, Watch};
use super::status::{status, Ctx};
use super::MAX_BUF;

raw! {
    /// One `rope_dest` of a layer call.
    pub struct DestRaw {
        /// `get(4)`: skip, in place, tensor, cache (or any `u32`).
        pub kind: EnumRaw,
        /// `get(4)`: f32, f16, bf16, q8_0 (or any `u32`).
        pub dtype: EnumRaw,
        /// How `data` is passed.
        pub data: u8,
        /// The count: the extent (`< 0xE0`), `extent + (len & 7)` (`< 0xE8`), `extent - 1 -
        /// (len & 7)` (`< 0xF0`), or the extent as [`count`] says.
        pub len: u8,
        /// Tensor: `shape % 5` BSHD, padded heads, one head more than the set, BHSD, one token
        /// less. Cache: `shape % 3` NHD, HND, contiguous; `0xFF`: then `block_size` 0.
        pub shape: u8,
        /// Cache: `1 + blocks % 4` blocks of `1 + (blocks >> 2) % 8` slots.
        pub blocks: u8,
        /// `get(3)`: slot_mapping, block_table, positions (or any `u32`).
        pub slots: EnumRaw,
        /// How the slot array is passed.
        pub arr: u8,
        /// Slot values (`sel % 6`): increasing, random (duplicates), increasing with -1s, a
        /// duplicate, one out of range, wild. Block tables (`sel % 4`): random, rotated,
        /// reversed block numbers, or random with one entry past `num_blocks`.
        pub sel: u8,
        /// The array's count: its length (`< 0xE8`), one to four fewer or more (`< 0xF0`), or
        /// as [`count`].
        pub arr_len: u8,
        /// `blocks_per_seq`: the positions' need plus `bps % 3` (`< 0xF0`), else one fewer.
        pub bps: u8,
    }
}

raw! {
    /// `rope_apply_layer(handle, args)`.
    pub struct LayerRaw {
        pub handle: u8,
        /// How the args pointer is passed, and its `struct_size` (as [`struct_size`]).
        pub st: u8,
        pub size: u8,
        /// `< 0xE0`: `% 3` (f32, f16, bf16); `< 0xF0`: q8_0; else `raw` (any `u32`).
        pub qkv_dtype: u8,
        pub qkv_dtype_raw: u32,
        pub qkv: u8,
        /// As [`DestRaw::len`].
        pub qkv_len: u8,
        /// `tokens % 9`; `heads % 5` q heads and `(heads >> 4) % 3` kv heads.
        pub tokens: u8,
        pub heads: u8,
        /// `sets % 5`: qkv rows, GPT-NeoX, padded rows, random offsets (overlaps), k = q.
        pub sets: u8,
        pub q: DestRaw,
        pub k: DestRaw,
        pub v: DestRaw,
        /// `get(2)`: single, ragged (or any `u32`); positions from starts or ids.
        pub batch: EnumRaw,
        pub position_mode: EnumRaw,
        /// Single: the start (`% 24` unless `start.sel >= 0xF0`).
        pub start: StartRaw,
        pub ids: u8,
        /// As [`DestRaw::arr_len`].
        pub ids_len: u8,
        /// Positions below 24 (`< 0xF0`) or any `u32`.
        pub ids_sel: u8,
        /// `1 + seqs % 4` sequences.
        pub seqs: u8,
        pub indptr: u8,
        /// `>= 0xF0`: a broken indptr (`& 3`: past the tokens, not from 0, decreasing, empty).
        pub indptr_sel: u8,
        pub seq_start: u8,
        /// As [`DestRaw::arr_len`], for `seq_start`.
        pub seq_start_len: u8,
        pub cos_sin: EnumRaw,
        pub cos: u8,
        pub sin: u8,
        /// Table rows: needed + `rows % 4` (`< 0xF0`), one to eight too few (`< 0xF8`), needed
        /// plus a ragged `1 + (rows & 3)` elements.
        pub rows: u8,
        pub direction: EnumRaw,
        /// `alias % 6`: 4: v's data is k's; 5: q's data is qkv's; else none.
        pub alias: u8,
        pub seed: u64,
        pub specials: u8,
    }
}

/// `(size, align)` of an element of a known dtype.
fn layout_of(dtype: u32) -> (usize, usize) {
    match dtype {
        c::ROPE_DTYPE_F32 => (4, 4),
        c::ROPE_DTYPE_F16 | c::ROPE_DTYPE_BF16 => (2, 2),
        _ => (size_of::<c::rope_block_q8_0>(), 2),
    }
}

/// A buffer of one dtype: `real` elements of `size` bytes in a [`Region`], passed with
/// count `len`.
pub struct Bytes {
    pub region: Region,
    size: usize,
    real: usize,
    pub len: usize,
}

impl Bytes {
    fn new(bytes: &[u8], (size, align): (usize, usize), p: u8, len: usize) -> Self {
        Self::with_pass(bytes, size, pass(p, align), len)
    }

    fn with_pass(bytes: &[u8], size: usize, pass: Pass, len: usize) -> Self {
        let mut region = Region::new(bytes.len(), pass);
        for (i, b) in bytes.iter().enumerate() {
            region.put(i, *b);
        }
        Bytes { region, size, real: bytes.len() / size, len }
    }

    fn ptr<T>(&self) -> *mut T {
        self.region.ptr()
    }

    /// The bytes of the elements the callee may touch.
    fn passed(&self) -> Vec<u8> {
        (0..self.len.min(self.real) * self.size).map(|i| self.region.get::<u8>(i)).collect()
    }

    fn defects(&self, d: &mut Vec<rope_status>) {
        if self.len == 0 {
            return;
        }
        required(self.region.pass(), d);
        if self.len.checked_mul(self.size).is_none_or(|b| b > isize::MAX as usize) {
            d.push(c::ROPE_INVALID_ARGUMENT);
        }
    }
}

/// `real` and the count passed for a buffer of `extent` elements of `size` bytes, from a
/// `len` byte as [`DestRaw::len`]; extents past [`MAX_BUF`] get a small buffer.
fn sized(extent: Option<usize>, len: u8, size: usize, small: u8) -> (usize, usize) {
    match extent.filter(|&e| e <= MAX_BUF) {
        None => (usize::from(small % 64), usize::from(small % 64)),
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

/// The length of an array of `n` values and its count, from an `arr_len` byte.
fn array_len(n: usize, sel: u8, size: usize) -> (usize, usize) {
    match sel {
        s if s < 0xE8 => (n, n),
        s if s < 0xF0 => {
            let m = if s & 4 == 0 {
                n.saturating_sub(1 + usize::from(s & 3))
            } else {
                n + 1 + usize::from(s & 3)
            };
            (m, m)
        }
        s => (n, count(s, n, size)),
    }
}

fn random_bytes(n: usize, g: &mut SplitMix) -> Vec<u8> {
    (0..n).map(|_| g.next() as u8).collect()
}

/// Random elements of an input dtype (f32, f16, bf16), as bytes.
fn input_bytes(dtype: u32, n: usize, g: &mut SplitMix, specials: u8) -> Vec<u8> {
    let mut out = Vec::with_capacity(n * 4);
    for _ in 0..n {
        match dtype {
            c::ROPE_DTYPE_F32 => out.extend_from_slice(&random_elem::<f32>(g, specials).to_ne_bytes()),
            c::ROPE_DTYPE_F16 => {
                out.extend_from_slice(&random_elem::<f16>(g, specials).to_bits().to_ne_bytes())
            }
            _ => out.extend_from_slice(&random_elem::<bf16>(g, specials).to_bits().to_ne_bytes()),
        }
    }
    out
}

/// The head sets `[q, k, v]` of `raw.sets`, the heads per token, and the row length.
fn head_sets(raw: &LayerRaw, hd: usize, g: &mut SplitMix) -> [HeadSet; 3] {
    let (qh, kvh) = (usize::from(raw.heads % 5), usize::from((raw.heads >> 4) % 3));
    match raw.sets % 5 {
        0 => HeadSet::qkv_rows(qh, kvh, hd),
        1 => HeadSet::neox_qkv(qh, hd),
        2 => {
            let pad = 1 + (g.below(8) as usize);
            let mut s = HeadSet::qkv_rows(qh, kvh, hd + pad);
            for set in &mut s {
                set.token_stride += pad;
            }
            s
        }
        3 => {
            let row = (qh + 2 * kvh) * hd + 1;
            let set = |heads: usize, g: &mut SplitMix| HeadSet {
                offset: g.below(row as u64) as usize,
                heads,
                token_stride: row + g.below(4) as usize,
                head_stride: hd + g.below(3) as usize,
            };
            [set(qh, g), set(kvh, g), set(kvh, g)]
        }
        _ => {
            let [q, _, v] = HeadSet::qkv_rows(qh, kvh, hd);
            [q, HeadSet { heads: kvh.min(qh), ..q }, v]
        }
    }
}

/// A destination: the C struct's values, its buffers, and its Rust form.
struct DestArg {
    value: c::rope_dest,
    data: Bytes,
    arr: Bytes,
    view: View,
    layout: CacheLayout,
    /// `data` points into another buffer's memory (an alias; passed as a real pointer).
    alias: bool,
}

/// What a destination needs of the call: tokens, the set, units per head, the sequences'
/// positions (`(sequence, position)` per token).
struct Need<'a> {
    tokens: usize,
    set: HeadSet,
    head_len: usize,
    seqs: usize,
    at: &'a [(usize, u64)],
}

impl DestArg {
    fn new(raw: &DestRaw, dtype: u32, need: &Need<'_>, g: &mut SplitMix) -> Self {
        let kind = raw.kind.get(4);
        let (size, align) = layout_of(if dtype <= 3 { dtype } else { 0 });
        let hl = need.head_len;
        let (heads, tokens) = (need.set.heads, need.tokens);
        let mut view = View::token_major(tokens, heads, hl);
        let nb = 1 + usize::from(raw.blocks % 4);
        let bs = 1 + usize::from((raw.blocks >> 2) % 8);
        let mut layout = CacheLayout::nhd(nb, bs, heads, hl);
        let ext = match kind {
            c::ROPE_DEST_TENSOR => {
                let pad = 1 + usize::from(raw.blocks % 3);
                view = match raw.shape % 5 {
                    0 => view,
                    1 => View { token_stride: heads * (hl + pad) + pad, head_stride: hl + pad, ..view },
                    2 => View::token_major(tokens, heads + 1, hl),
                    3 => View::head_major(tokens, heads, hl),
                    _ => View::token_major(tokens.saturating_sub(1), heads, hl),
                };
                extent(&view, hl)
            }
            c::ROPE_DEST_CACHE => {
                layout = match raw.shape % 3 {
                    0 => layout,
                    1 => CacheLayout::hnd(nb, bs, heads, hl),
                    _ => CacheLayout::contiguous(nb * bs, heads, hl),
                };
                Some(nb * bs * heads * hl)
            }
            _ => Some(0),
        };
        let (real, n) = sized(ext, raw.len, size, raw.blocks);
        let data = Bytes::new(&random_bytes(real * size, g), (size, align), raw.data, n);

        let slots = layout.slots();
        let slots_kind = raw.slots.get(3);
        let arr = match slots_kind {
            c::ROPE_SLOTS_MAPPING => {
                let (m, cnt) = array_len(tokens, raw.arr_len, 8);
                let base = g.below(slots as u64) as i64;
                let mut mapping: Vec<i64> = (0..m)
                    .map(|t| {
                        let t = t as i64;
                        match raw.sel % 6 {
                            0 => (base + t) % slots as i64,
                            1 => g.below(slots as u64) as i64,
                            2 if g.below(3) == 0 => -1,
                            2 => (base + t) % slots as i64,
                            5 => g.next() as i64 % (2 * slots as i64 + 2) - 2,
                            _ => (base + t) % slots as i64,
                        }
                    })
                    .collect();
                if let (3, Some(&first)) = (raw.sel % 6, mapping.first()) {
                    let last = mapping.len() - 1;
                    mapping[last] = first;
                }
                if let (4, Some(x)) = (raw.sel % 6, mapping.last_mut()) {
                    *x = if raw.sel & 8 == 0 { slots as i64 } else { -2 };
                }
                Bytes::new(&bytes_of(&mapping), (8, 8), raw.arr, cnt)
            }
            c::ROPE_SLOTS_BLOCK_TABLE => {
                let most = need.at.iter().map(|&(_, p)| p / bs as u64 + 1).max().unwrap_or(0);
                let bps = match most {
                    m if m > 64 => usize::from(raw.bps % 8),
                    m if raw.bps < 0xF0 => m as usize + usize::from(raw.bps % 3),
                    m => (m as usize).saturating_sub(1),
                };
                let (m, cnt) = array_len(need.seqs * bps, raw.arr_len, 4);
                let base = g.below(nb as u64) as usize;
                let mut table: Vec<u32> = (0..m)
                    .map(|i| match raw.sel % 4 {
                        1 => ((base + i) % nb) as u32,
                        2 => (nb - 1 - (base + i) % nb) as u32,
                        _ => g.below(nb as u64) as u32,
                    })
                    .collect();
                if raw.sel % 4 == 3 && m > 0 {
                    let i = g.below(m as u64) as usize;
                    table[i] = nb as u32 + (raw.sel >> 4) as u32;
                }
                let b = Bytes::new(&bytes_of(&table), (4, 4), raw.arr, cnt);
                return DestArg::finish(raw, kind, dtype, data, b, view, layout, bps);
            }
            _ => Bytes::new(&[], (1, 1), 0, 0),
        };
        DestArg::finish(raw, kind, dtype, data, arr, view, layout, 0)
    }

    #[allow(clippy::too_many_arguments)]
    fn finish(
        raw: &DestRaw,
        kind: u32,
        dtype: u32,
        data: Bytes,
        arr: Bytes,
        view: View,
        layout: CacheLayout,
        bps: usize,
    ) -> Self {
        let mut layout = layout;
        if raw.shape == 0xFF {
            // A layout without slots (`ROPE_INVALID_BLOCK_SIZE` under a block table).
            layout.block_size = 0;
        }
        let slots = raw.slots.get(3);
        let value = c::rope_dest {
            kind,
            dtype,
            data: data.ptr(),
            len: data.len,
            view: c::rope_view {
                tokens: view.tokens,
                heads: view.heads,
                token_stride: view.token_stride,
                head_stride: view.head_stride,
            },
            cache: c::rope_cache_layout {
                num_blocks: layout.num_blocks,
                block_size: layout.block_size,
                block_stride: layout.block_stride,
                slot_stride: layout.slot_stride,
                head_stride: layout.head_stride,
            },
            slots,
            slot_mapping: if slots == c::ROPE_SLOTS_MAPPING { arr.ptr() } else { ptr::null() },
            slot_mapping_len: if slots == c::ROPE_SLOTS_MAPPING { arr.len } else { 0 },
            block_table: if slots == c::ROPE_SLOTS_BLOCK_TABLE { arr.ptr() } else { ptr::null() },
            block_table_len: if slots == c::ROPE_SLOTS_BLOCK_TABLE { arr.len } else { 0 },
            blocks_per_seq: bps,
        };
        DestArg { value, data, arr, view, layout, alias: false }
    }

    /// Whether it writes `data`.
    fn writes(&self) -> bool {
        matches!(self.value.kind, c::ROPE_DEST_TENSOR | c::ROPE_DEST_CACHE)
    }

    /// The boundary defects of the destination (`qkv_dtype` a known input dtype or not).
    fn defects(&self, qkv_dtype: u32, d: &mut Vec<rope_status>) {
        let v = &self.value;
        match v.kind {
            c::ROPE_DEST_SKIP => return,
            k if k > 3 => return d.push(c::ROPE_UNKNOWN_ENUM),
            _ if v.dtype > 3 => return d.push(c::ROPE_UNKNOWN_ENUM),
            c::ROPE_DEST_IN_PLACE => {
                if v.dtype != qkv_dtype {
                    d.push(c::ROPE_UNSUPPORTED_TYPE_PAIR);
                }
                return;
            }
            _ => {}
        }
        if self.alias {
            // A real, 16-aligned pointer: only the count can be wrong.
            let bytes = self.data.len.checked_mul(self.data.size);
            if self.data.len > 0 && bytes.is_none_or(|b| b > isize::MAX as usize) {
                d.push(c::ROPE_INVALID_ARGUMENT);
            }
        } else {
            self.data.defects(d);
        }
        if v.kind == c::ROPE_DEST_CACHE {
            match v.slots {
                c::ROPE_SLOTS_MAPPING | c::ROPE_SLOTS_BLOCK_TABLE => self.arr.defects(d),
                c::ROPE_SLOTS_POSITIONS => {}
                _ => d.push(c::ROPE_UNKNOWN_ENUM),
            }
        }
    }

    /// The dtype the C side instantiates it with (the input's for skip and in place).
    fn out_dtype(&self, qkv_dtype: u32) -> u32 {
        if self.writes() {
            self.value.dtype
        } else {
            qkv_dtype
        }
    }

    /// The Rust destination's untyped parts.
    fn rust<'a>(&self, mapping: &'a [i64], table: &'a [u32]) -> RustDest<'a> {
        let slots = match self.value.slots {
            c::ROPE_SLOTS_MAPPING => Slots::Mapping(mapping),
            c::ROPE_SLOTS_BLOCK_TABLE => {
                Slots::BlockTable { block_table: table, blocks_per_seq: self.value.blocks_per_seq }
            }
            _ => Slots::Positions,
        };
        RustDest {
            kind: self.value.kind,
            bytes: self.data.passed(),
            view: self.view,
            layout: self.layout,
            slots,
        }
    }
}

/// A destination of the Rust call, its buffer as bytes.
struct RustDest<'a> {
    kind: u32,
    bytes: Vec<u8>,
    view: View,
    layout: CacheLayout,
    slots: Slots<'a>,
}

/// Plain values from bytes (unaligned reads).
fn from_bytes<T: Plain>(b: &[u8]) -> Vec<T> {
    (0..b.len() / size_of::<T>())
        // SAFETY: inside `b`; unaligned reads; any bits are a valid `T: Plain`.
        .map(|i| unsafe { b.as_ptr().cast::<T>().add(i).read_unaligned() })
        .collect()
}

impl Plain for BlockQ8_0 {}

/// The Rust call on typed copies; returns the buffers' bytes after it.
fn typed<I: Element + Plain, Q: CacheElement + Plain, K: CacheElement + Plain, V: CacheElement + Plain>(
    rope: &Rope,
    qkv: &[u8],
    tokens: usize,
    sets: [HeadSet; 3],
    dests: [RustDest<'_>; 3],
    opts: &LayerOptions<'_>,
) -> Result<[Vec<u8>; 4], RopeError> {
    fn dest<'a, O: Plain>(d: &'a RustDest<'a>, buf: &'a mut [O]) -> Dest<'a, O> {
        match d.kind {
            c::ROPE_DEST_SKIP => Dest::Skip,
            c::ROPE_DEST_IN_PLACE => Dest::InPlace,
            c::ROPE_DEST_TENSOR => Dest::Tensor { data: buf, view: d.view },
            _ => Dest::Cache { data: buf, layout: d.layout, slots: d.slots },
        }
    }
    let mut x: Vec<I> = from_bytes(qkv);
    let (mut q, mut k, mut v): (Vec<Q>, Vec<K>, Vec<V>) =
        (from_bytes(&dests[0].bytes), from_bytes(&dests[1].bytes), from_bytes(&dests[2].bytes));
    rope.apply_layer(
        Qkv::new(&mut x, tokens, sets),
        dest(&dests[0], &mut q),
        dest(&dests[1], &mut k),
        dest(&dests[2], &mut v),
        opts,
    )?;
    Ok([bytes_of(&x), bytes_of(&q), bytes_of(&k), bytes_of(&v)])
}

/// Runs `$body` with `$T` the element type of the output dtype `$tag` (a known one).
macro_rules! by_dtype {
    ($tag:expr, $T:ident => $body:expr) => {
        match $tag {
            c::ROPE_DTYPE_F32 => {
                type $T = f32;
                $body
            }
            c::ROPE_DTYPE_F16 => {
                type $T = f16;
                $body
            }
            c::ROPE_DTYPE_BF16 => {
                type $T = bf16;
                $body
            }
            _ => {
                type $T = BlockQ8_0;
                $body
            }
        }
    };
}

/// The Rust call with the element types of `dt` (`[qkv, q, k, v]`, known dtypes).
fn oracle(
    rope: &Rope,
    dt: [u32; 4],
    qkv: &[u8],
    tokens: usize,
    sets: [HeadSet; 3],
    dests: [RustDest<'_>; 3],
    opts: &LayerOptions<'_>,
) -> Result<[Vec<u8>; 4], RopeError> {
    fn q<I: Element + Plain>(
        r: &Rope,
        dt: [u32; 4],
        x: &[u8],
        t: usize,
        s: [HeadSet; 3],
        d: [RustDest<'_>; 3],
        o: &LayerOptions<'_>,
    ) -> Result<[Vec<u8>; 4], RopeError> {
        by_dtype!(dt[1], Q => by_dtype!(dt[2], K => by_dtype!(dt[3], V => typed::<I, Q, K, V>(r, x, t, s, d, o))))
    }
    match dt[0] {
        c::ROPE_DTYPE_F32 => q::<f32>(rope, dt, qkv, tokens, sets, dests, opts),
        c::ROPE_DTYPE_F16 => q::<f16>(rope, dt, qkv, tokens, sets, dests, opts),
        _ => q::<bf16>(rope, dt, qkv, tokens, sets, dests, opts),
    }
}

/// Writes `v` over a zeroed `rope_layer_args` in `st` field by field (its padding stays
/// zero bytes the harness can compare).
fn write_args(st: &mut Region, v: &c::rope_layer_args) {
    st.zero();
    let p = st.addr().cast::<c::rope_layer_args>();
    /// # Safety
    /// `p` points to a writable (possibly misaligned) `rope_dest`.
    unsafe fn dest(p: *mut c::rope_dest, d: &c::rope_dest) {
        // SAFETY: the caller's contract; unaligned writes through raw places.
        unsafe {
            addr_of_mut!((*p).kind).write_unaligned(d.kind);
            addr_of_mut!((*p).dtype).write_unaligned(d.dtype);
            addr_of_mut!((*p).data).write_unaligned(d.data);
            addr_of_mut!((*p).len).write_unaligned(d.len);
            addr_of_mut!((*p).view).write_unaligned(d.view);
            addr_of_mut!((*p).cache).write_unaligned(d.cache);
            addr_of_mut!((*p).slots).write_unaligned(d.slots);
            addr_of_mut!((*p).slot_mapping).write_unaligned(d.slot_mapping);
            addr_of_mut!((*p).slot_mapping_len).write_unaligned(d.slot_mapping_len);
            addr_of_mut!((*p).block_table).write_unaligned(d.block_table);
            addr_of_mut!((*p).block_table_len).write_unaligned(d.block_table_len);
            addr_of_mut!((*p).blocks_per_seq).write_unaligned(d.blocks_per_seq);
        }
    }
    // SAFETY: the payload holds a whole `rope_layer_args`; each field is written unaligned
    // through a raw place (`rope_view` and `rope_cache_layout` have no padding).
    unsafe {
        addr_of_mut!((*p).struct_size).write_unaligned(v.struct_size);
        addr_of_mut!((*p).qkv_dtype).write_unaligned(v.qkv_dtype);
        addr_of_mut!((*p).qkv).write_unaligned(v.qkv);
        addr_of_mut!((*p).qkv_len).write_unaligned(v.qkv_len);
        addr_of_mut!((*p).tokens).write_unaligned(v.tokens);
        addr_of_mut!((*p).q_set).write_unaligned(v.q_set);
        addr_of_mut!((*p).k_set).write_unaligned(v.k_set);
        addr_of_mut!((*p).v_set).write_unaligned(v.v_set);
        dest(addr_of_mut!((*p).q), &v.q);
        dest(addr_of_mut!((*p).k), &v.k);
        dest(addr_of_mut!((*p).v), &v.v);
        addr_of_mut!((*p).batch).write_unaligned(v.batch);
        addr_of_mut!((*p).position_mode).write_unaligned(v.position_mode);
        addr_of_mut!((*p).start).write_unaligned(v.start);
        addr_of_mut!((*p).position_ids).write_unaligned(v.position_ids);
        addr_of_mut!((*p).position_ids_len).write_unaligned(v.position_ids_len);
        addr_of_mut!((*p).indptr).write_unaligned(v.indptr);
        addr_of_mut!((*p).indptr_len).write_unaligned(v.indptr_len);
        addr_of_mut!((*p).seq_start).write_unaligned(v.seq_start);
        addr_of_mut!((*p).seq_start_len).write_unaligned(v.seq_start_len);
        addr_of_mut!((*p).cos_sin).write_unaligned(v.cos_sin);
        addr_of_mut!((*p).cos).write_unaligned(v.cos);
        addr_of_mut!((*p).sin).write_unaligned(v.sin);
        addr_of_mut!((*p).table_len).write_unaligned(v.table_len);
        addr_of_mut!((*p).direction).write_unaligned(v.direction);
    }
}

/// Largest table the harness builds, in rows.
const MAX_ROWS: usize = 512;

pub fn layer(ctx: &mut Ctx<'_>, cfg: &Config, handle: &Handle, raw: &LayerRaw) {
    let pairs = handle.pairs(cfg);
    let hd = handle.live.as_ref().map_or(cfg.value.head_dim, |(_, r)| r.config().head_dim).min(1024);
    let mut g = SplitMix(raw.seed);
    let sp = raw.specials;
    let qkv_dtype = match raw.qkv_dtype {
        s if s < 0xE0 => u32::from(s % 3),
        s if s < 0xF0 => c::ROPE_DTYPE_Q8_0,
        _ => raw.qkv_dtype_raw,
    };
    let in_dtype = if qkv_dtype < 3 { qkv_dtype } else { c::ROPE_DTYPE_F32 };
    let tokens = usize::from(raw.tokens % 9);

    // The batch: sequences, indptr, positions.
    let batch = raw.batch.get(2);
    let mode = raw.position_mode.get(2);
    let ragged = batch == c::ROPE_BATCH_RAGGED;
    let seqs = if ragged { 1 + usize::from(raw.seqs % 4) } else { 1 };
    let mut cuts: Vec<u32> = (1..seqs).map(|_| g.below(tokens as u64 + 1) as u32).collect();
    cuts.sort_unstable();
    let mut indptr: Vec<u32> = [0].into_iter().chain(cuts).chain([tokens as u32]).collect();
    if raw.indptr_sel >= 0xF0 {
        match raw.indptr_sel & 3 {
            0 => *indptr.last_mut().expect("2 entries") += 1,
            1 => indptr[0] = 1,
            2 if indptr.len() > 2 && indptr[1] > 0 => indptr.swap(0, 1),
            _ => indptr.clear(),
        }
    }
    let small = |g: &mut SplitMix| g.below(24) as u32;
    let (n_start, start_cnt) = array_len(seqs, raw.seq_start_len, 4);
    let starts: Vec<u32> = (0..n_start).map(|_| small(&mut g)).collect();
    let (n_ids, ids_cnt) = array_len(tokens, raw.ids_len, 4);
    let ids: Vec<u32> =
        (0..n_ids).map(|_| if raw.ids_sel < 0xF0 { small(&mut g) } else { g.next() as u32 }).collect();
    let mut start = raw.start.get(tokens);
    if raw.start.sel < 0xF0 {
        start %= 24;
    }
    // (sequence, position) of every token, as far as the batch is well formed (for sizes).
    let at: Vec<(usize, u64)> = (0..tokens)
        .map(|t| {
            let seq = indptr.iter().rposition(|&p| p as usize <= t).unwrap_or(0).min(seqs - 1);
            let pos = match (ragged, mode) {
                (_, c::ROPE_POSITIONS_IDS) => ids.get(t).map_or(0, |&p| u64::from(p)),
                (false, _) => u64::from(start) + t as u64,
                (true, _) => {
                    let first = indptr.get(seq).map_or(0, |&p| p as usize);
                    starts.get(seq).map_or(0, |&s| u64::from(s)) + t.saturating_sub(first) as u64
                }
            };
            (seq, pos)
        })
        .collect();

    // The fused buffer and its sets.
    let sets = head_sets(raw, hd, &mut g);
    let set_end = |s: &HeadSet| extent(&s.view(tokens), hd).map(|e| if e == 0 { 0 } else { s.offset + e });
    let ext = sets.iter().map(set_end).try_fold(0usize, |m, e| e.map(|e| m.max(e)));
    let (size, _) = layout_of(in_dtype);
    let (real, n) = sized(ext.map(|e| e.max(1)), raw.qkv_len, size, raw.heads);
    let qkv = Bytes::new(&input_bytes(in_dtype, real, &mut g, sp), layout_of(in_dtype), raw.qkv, n);

    // The destinations.
    let dests: Vec<DestArg> = [(&raw.q, sets[0]), (&raw.k, sets[1]), (&raw.v, sets[2])]
        .into_iter()
        .map(|(d, set)| {
            let dtype = d.dtype.get(4);
            let head_len = if dtype == c::ROPE_DTYPE_Q8_0 { (hd / 32).max(1) } else { hd };
            DestArg::new(d, dtype, &Need { tokens, set, head_len, seqs, at: &at }, &mut g)
        })
        .collect();
    let [qd, kd, vd] = <[DestArg; 3]>::try_from(dests).ok().expect("3 destinations");
    let mut dests = [qd, kd, vd];

    // Aliases: one destination's data in another buffer's memory.
    let alias = match raw.alias % 6 {
        4 if dests[1].writes() && dests[1].data.region.pass() == Pass::Real => Some((2, dests[1].data.ptr())),
        5 if qkv.region.pass() == Pass::Real => Some((0, qkv.ptr())),
        _ => None,
    };
    if let Some((i, p)) = alias {
        dests[i].value.data = p;
        dests[i].alias = true;
    }

    // cos/sin.
    let cos_sin = raw.cos_sin.get(2);
    let need = at.iter().map(|&(_, p)| p + 1).max().unwrap_or(0);
    let (rows, extra) = match raw.rows {
        _ if need > MAX_ROWS as u64 => (usize::from(raw.rows % 8), 0),
        r if r < 0xF0 => (need as usize + usize::from(r % 4), 0),
        r if r < 0xF8 => ((need as usize).saturating_sub(1 + usize::from(r & 7)), 0),
        r => (need as usize, 1 + usize::from(r & 3)),
    };
    let t_real = rows * pairs + extra;
    let table_values =
        |g: &mut SplitMix| -> Vec<f32> { (0..t_real).map(|_| random_elem::<f32>(g, sp)).collect() };
    let cos = Bytes::new(&bytes_of(&table_values(&mut g)), (4, 4), raw.cos, t_real);
    let sin = Bytes::new(&bytes_of(&table_values(&mut g)), (4, 4), raw.sin, t_real);
    let ids_b = Bytes::new(&bytes_of(&ids), (4, 4), raw.ids, ids_cnt);
    let indptr_b = Bytes::new(&bytes_of(&indptr), (4, 4), raw.indptr, indptr.len());
    let starts_b = Bytes::new(&bytes_of(&starts), (4, 4), raw.seq_start, start_cnt);

    let value = c::rope_layer_args {
        struct_size: struct_size(raw.size, size_of::<c::rope_layer_args>()),
        qkv_dtype,
        qkv: qkv.ptr(),
        qkv_len: qkv.len,
        tokens,
        q_set: c_set(&sets[0]),
        k_set: c_set(&sets[1]),
        v_set: c_set(&sets[2]),
        q: dests[0].value,
        k: dests[1].value,
        v: dests[2].value,
        batch,
        position_mode: mode,
        start,
        position_ids: ids_b.ptr(),
        position_ids_len: ids_b.len,
        indptr: indptr_b.ptr(),
        indptr_len: indptr_b.len,
        seq_start: starts_b.ptr(),
        seq_start_len: starts_b.len,
        cos_sin,
        cos: cos.ptr(),
        sin: sin.ptr(),
        table_len: cos.len,
        direction: raw.direction.get(2),
    };
    let args_pass = pass(raw.st, std::mem::align_of::<c::rope_layer_args>());
    let mut st = Region::new(value.struct_size.max(size_of::<c::rope_layer_args>()), args_pass);
    write_args(&mut st, &value);

    // The boundary defects, in no particular order.
    let mut d = Vec::new();
    let h = handle.pointer(raw.handle, &mut d);
    required(args_pass, &mut d);
    if value.struct_size != size_of::<c::rope_layer_args>() {
        d.push(c::ROPE_UNSUPPORTED_STRUCT_SIZE);
    }
    match qkv_dtype {
        c::ROPE_DTYPE_Q8_0 => d.push(c::ROPE_UNSUPPORTED_TYPE_PAIR),
        t if t > 3 => d.push(c::ROPE_UNKNOWN_ENUM),
        _ => {}
    }
    for x in &dests {
        x.defects(qkv_dtype, &mut d);
    }
    if value.direction > 1 || batch > 1 || mode > 1 || cos_sin > 1 {
        d.push(c::ROPE_UNKNOWN_ENUM);
    }
    if mode == c::ROPE_POSITIONS_IDS {
        ids_b.defects(&mut d);
    }
    if ragged {
        indptr_b.defects(&mut d);
        if mode == c::ROPE_POSITIONS_START {
            starts_b.defects(&mut d);
        }
    }
    if cos_sin == c::ROPE_COS_SIN_TABLE {
        cos.defects(&mut d);
        sin.defects(&mut d);
    }
    qkv.defects(&mut d);
    // An alias overlaps when the aliased destination writes (a tensor or a cache: C counts
    // no bytes for skip or in place) and both buffers are non-empty (its own count, the
    // other's bytes).
    let aliased = alias.is_some_and(|(i, _)| {
        let other = if i == 2 { &dests[1].data } else { &qkv };
        dests[i].writes() && dests[i].data.len > 0 && other.len > 0
    });
    if aliased {
        d.push(c::ROPE_OVERLAPPING_BUFFERS);
    }

    // The Rust API, formed only without defects.
    let (ids_v, indptr_v, starts_v) = (ids_b.passed(), indptr_b.passed(), starts_b.passed());
    let (ids_v, indptr_v, starts_v): (Vec<u32>, Vec<u32>, Vec<u32>) =
        (from_bytes(&ids_v), from_bytes(&indptr_v), from_bytes(&starts_v));
    let (cos_v, sin_v): (Vec<f32>, Vec<f32>) = (from_bytes(&cos.passed()), from_bytes(&sin.passed()));
    let maps: Vec<(Vec<i64>, Vec<u32>)> =
        dests.iter().map(|x| (from_bytes(&x.arr.passed()), from_bytes(&x.arr.passed()))).collect();
    let rust = handle.rope().filter(|_| d.is_empty()).map(|rope| {
        let batch = match (ragged, mode) {
            (false, c::ROPE_POSITIONS_START) => Batch::Single(Positions::Start(start)),
            (false, _) => Batch::Single(Positions::Ids(&ids_v)),
            (true, c::ROPE_POSITIONS_START) => Batch::Ragged { indptr: &indptr_v, start: &starts_v },
            (true, _) => Batch::RaggedIds { indptr: &indptr_v, position_ids: &ids_v },
        };
        let direction =
            if value.direction == c::ROPE_INVERSE { Direction::Inverse } else { Direction::Forward };
        let cos_sin = if cos_sin == c::ROPE_COS_SIN_TABLE {
            CosSin::Table(CosSinTable::new(&cos_v, &sin_v, pairs)?)
        } else {
            CosSin::OnTheFly
        };
        let opts = LayerOptions { batch, cos_sin, direction };
        let rd = [0, 1, 2].map(|i| dests[i].rust(&maps[i].0, &maps[i].1));
        let dt = [
            in_dtype,
            dests[0].out_dtype(in_dtype),
            dests[1].out_dtype(in_dtype),
            dests[2].out_dtype(in_dtype),
        ];
        oracle(&rope, dt, &qkv.passed(), tokens, sets, rd, &opts)
    });

    let mut regions: Vec<&Region> = handle.regions().collect();
    regions.extend([
        &st,
        &qkv.region,
        &cos.region,
        &sin.region,
        &ids_b.region,
        &indptr_b.region,
        &starts_b.region,
    ]);
    for x in &dests {
        regions.extend([&x.data.region, &x.arr.region]);
    }
    let watch = Watch::new(regions);
    // SAFETY: every pointer is NULL or points into a real region of the harness; counts are
    // the real ones, smaller, or rejected (byte size past PTRDIFF_MAX); aliases are refused.
    let s = unsafe { c::rope_apply_layer(h, st.ptr()) };
    let ok = ctx.judge("rope_apply_layer", s, &d, rust.as_ref().map(status));
    let mut written = Vec::new();
    if ok {
        let [x, q, k, v] = rust.expect("oracle").expect("Ok");
        written.push((&qkv.region, x));
        for (dest, bytes) in dests.iter().zip([q, k, v]) {
            if dest.writes() {
                written.push((&dest.data.region, bytes));
            }
        }
    }
    watch.verify(ctx, "rope_apply_layer", ok, &written);
}

fn c_set(s: &HeadSet) -> c::rope_head_set {
    c::rope_head_set {
        offset: s.offset,
        heads: s.heads,
        token_stride: s.token_stride,
        head_stride: s.head_stride,
    }
}
