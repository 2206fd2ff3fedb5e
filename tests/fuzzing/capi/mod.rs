//! The `capi` target: the C entry points of `rope-kernels-capi`, called from Rust with
//! random metadata over real buffers.
//!
//! A [`CapiCase`] is a configuration (a `rope_config` filled field by field: `struct_size`
//! sometimes wrong, enum fields from their values or any `u32`, parameters from typical,
//! extreme and non-finite values, `truncate` and the `has_` flags sometimes out of range,
//! the LongRoPE, `freq_factors` and `inv_freq` arrays of right, wrong, too large or
//! unrepresentable lengths), a handle (`rope_init` into caller storage of the right, a
//! larger or a too small size, or `rope_new`, sometimes with an allocation failure
//! injected), and up to [`MAX_OPS`] calls: `rope_frequencies`, `rope_fill_table`,
//! `rope_apply_*` and `rope_apply_into_*` for f32, f16 and bf16 (q alone or q and k, views
//! from BSHD to strides that overflow, positions ids or a start, cos/sin on the fly or from
//! a table), the tier functions, the sibling encodings ([`encodings`]), and the
//! attention-layer call `rope_apply_layer` ([`layer`]: head sets of one fused buffer, a
//! dtype per output, q8_0 rows, cache slots, ragged batches).
//!
//! Memory: every pointer the harness passes is NULL (only where the input asks), or points
//! into a real allocation ([`Region`]) with canary bytes on both sides; "misaligned" is a
//! buffer placed 1 to `align - 1` bytes past an aligned address of its allocation. A count
//! is the real element count, a smaller one (the rest stays canary), or one whose byte size
//! exceeds `PTRDIFF_MAX` (the ABI must reject it before touching anything). So the target
//! tests the ABI's own checks, never the allocator.
//!
//! For each call the harness lists the boundary defects of the arguments the call reads (a
//! NULL or misaligned required pointer, a count too large, a wrong `struct_size`, an
//! unknown enum value, a flag other than 0 or 1, overlapping buffers, no live handle) and
//! makes the same call through the safe Rust API, on copies of the buffers and on the tier
//! in use. Then ([`Ctx::judge`](status::Ctx::judge), [`Watch::verify`](memory::Watch::verify)):
//! - the status is one of the header's, `rope_status_str` and `rope_status_name` of it are
//!   non-empty, and it is not `ROPE_PANIC` (under libFuzzer a panic aborts: a crash either
//!   way, so nothing unwinds or aborts across the boundary unnoticed);
//! - without defects the status is the Rust API's (`ROPE_OK` or its error's code); with
//!   any, the call fails, with the status of one of them (or the Rust API's error, which the
//!   ABI may meet first);
//! - on a failure every byte of every allocation the call could reach is unchanged:
//!   buffers, structs, canaries, the handle's storage;
//! - on `ROPE_OK` the written buffers hold the Rust API's output bit for bit up to their
//!   passed count, and every other byte is unchanged.
//!
//! Files: [`fields`] (the input decoding), [`memory`] (regions, buffer arguments, the
//! watch over them), [`status`] (statuses and the judgement of a call), [`config`]
//! (`rope_config` and the handle), [`rope`] (frequencies, tables, tiers, apply),
//! [`encodings`], and [`seeds`] (the committed corpus).

use std::ptr;
use std::sync::Mutex;

use rope_kernels::{bf16, f16};
use rope_kernels_capi::{self as c, rope_status};

use super::input::{Input, Seed};

pub mod config;
pub mod encodings;
pub mod fields;
pub mod layer;
pub mod memory;
pub mod rope;
pub mod seeds;
pub mod status;

use config::{Config, ConfigRaw, Handle, HandleRaw};
use encodings::{AlibiRaw, LearnedRaw, RelativeRaw, SinusoidalRaw};
use fields::Field;
use layer::LayerRaw;
use rope::{ApplyRaw, FillRaw, FreqRaw, TierRaw};
use status::Ctx;

/// Calls per case at most.
pub const MAX_OPS: usize = 6;

/// Largest element count of a harness buffer (larger views get a small buffer instead).
pub const MAX_BUF: usize = 1 << 16;

/// One call of a case: a tag byte (`% 10`: 1 to 8 in the order below, else `Apply`), then
/// its fields.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    Apply(ApplyRaw),
    Frequencies(FreqRaw),
    FillTable(FillRaw),
    Tier(TierRaw),
    Sinusoidal(SinusoidalRaw),
    Learned(LearnedRaw),
    Relative(RelativeRaw),
    Alibi(AlibiRaw),
    Layer(LayerRaw),
}

impl Field for Op {
    fn read(r: &mut Input<'_>) -> Self {
        match r.u8() % 10 {
            1 => Op::Frequencies(Field::read(r)),
            2 => Op::FillTable(Field::read(r)),
            3 => Op::Tier(Field::read(r)),
            4 => Op::Sinusoidal(Field::read(r)),
            5 => Op::Learned(Field::read(r)),
            6 => Op::Relative(Field::read(r)),
            7 => Op::Alibi(Field::read(r)),
            8 => Op::Layer(Field::read(r)),
            _ => Op::Apply(Field::read(r)),
        }
    }

    fn write(&self, s: &mut Seed) {
        match self {
            Op::Apply(x) => x.write(s.u8(0)),
            Op::Frequencies(x) => x.write(s.u8(1)),
            Op::FillTable(x) => x.write(s.u8(2)),
            Op::Tier(x) => x.write(s.u8(3)),
            Op::Sinusoidal(x) => x.write(s.u8(4)),
            Op::Learned(x) => x.write(s.u8(5)),
            Op::Relative(x) => x.write(s.u8(6)),
            Op::Alibi(x) => x.write(s.u8(7)),
            Op::Layer(x) => x.write(s.u8(8)),
        }
    }
}

/// One fuzz input: a configuration, a handle, then up to [`MAX_OPS`] calls (as many as
/// the input holds).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct CapiCase {
    pub config: ConfigRaw,
    pub handle: HandleRaw,
    pub ops: Vec<Op>,
}

impl CapiCase {
    pub fn read(bytes: &[u8]) -> Self {
        let mut r = Input::new(bytes);
        let config = ConfigRaw::read(&mut r);
        let handle = HandleRaw::read(&mut r);
        let mut ops = Vec::new();
        while !r.rest().is_empty() && ops.len() < MAX_OPS {
            ops.push(Op::read(&mut r));
        }
        CapiCase { config, handle, ops }
    }

    pub fn write(&self) -> Vec<u8> {
        let mut s = Seed::default();
        self.config.write(&mut s);
        self.handle.write(&mut s);
        for op in &self.ops {
            op.write(&mut s);
        }
        s.0
    }
}

/// The C functions are process-wide (the tier) and the tests run checks on several
/// threads: one case at a time.
static LOCK: Mutex<()> = Mutex::new(());

/// Runs a `capi` input; panics with a description of the case on any violation. Returns
/// the `(call, status)` of every call.
pub fn check(bytes: &[u8]) -> Vec<(&'static str, rope_status)> {
    let _one = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let case = CapiCase::read(bytes);
    let mut ctx = Ctx::new(&case);
    let cfg = Config::new(&case.config);
    let handle = Handle::make(&mut ctx, &case.handle, &cfg);
    for op in &case.ops {
        match op {
            Op::Apply(a) => match a.dtype % 3 {
                0 => rope::apply::<f32>(&mut ctx, &cfg, &handle, a),
                1 => rope::apply::<f16>(&mut ctx, &cfg, &handle, a),
                _ => rope::apply::<bf16>(&mut ctx, &cfg, &handle, a),
            },
            Op::Frequencies(f) => rope::frequencies(&mut ctx, &cfg, &handle, f),
            Op::FillTable(f) => rope::fill_table(&mut ctx, &cfg, &handle, f),
            Op::Tier(t) => rope::tier(&mut ctx, t),
            Op::Sinusoidal(x) => encodings::sinusoidal(&mut ctx, x),
            Op::Learned(x) => encodings::learned(&mut ctx, x),
            Op::Relative(x) => encodings::relative(&mut ctx, x),
            Op::Alibi(x) => encodings::alibi(&mut ctx, x),
            Op::Layer(x) => layer::layer(&mut ctx, &cfg, &handle, x),
        }
        handle.check_pairs(&mut ctx);
    }
    handle.free(&mut ctx, case.handle.free);
    // SAFETY: NULL is allowed (no out-parameter).
    assert_eq!(unsafe { c::rope_tier_reset(ptr::null_mut()) }, c::ROPE_OK);
    ctx.calls
}
