//! The configuration (`rope_config`, field by field, with its arrays) and the handle
//! (`rope_init` in caller storage or `rope_new`, `rope_pairs`, `rope_free`) of a `capi`
//! case, with the harness's model of each: the defects the ABI must find and the Rust
//! `Rope` of the same values.

use std::mem::{align_of, size_of};
use std::ptr;

use rope_kernels::dispatch;
use rope_kernels::{
    AngleMode, LongRopeParams, PairLayout, Rope, RopeConfig, RopeError, Scaling, YarnParams, MAX_PAIRS,
};
use rope_kernels_capi::{self as c, rope_status};

use super::super::frequencies::WILD;
use super::super::input::{Input, Seed, SplitMix};
use super::fields::{flag, raw, struct_size, EnumRaw, F64Raw, Field, U64Raw};
use super::memory::{bytes_of, pass, required, Arg, Pass, Region, Watch};
use super::status::{status, Ctx};

/// Typical values of the configuration fields.
pub const THETAS: [f64; 9] = [10_000.0, 500_000.0, 1_000_000.0, 150_000.0, 160.0, 2.0, 0.5, 1e9, 10_000.0];
pub const FACTORS: [f64; 10] = [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 40.0, 0.5, 1.5, 1.25];
pub const CONTEXTS: [u64; 7] = [4096, 2048, 8192, 32_768, 131_072, 1, 0];

raw! {
    /// A double array of the scaling (`short_factor`, `long_factor`, `freq_factors`) or the
    /// f32 `inv_freq` table.
    pub struct ArrayRaw {
        /// How the pointer is passed.
        pub ptr: u8,
        /// The count: the field's default (`< 0xE0`: `rotary_dim / 2`, 0 for `inv_freq`),
        /// `rotary_dim / 2 - 8 + (len & 15)` (`< 0xF0`), `MAX_PAIRS + 1 + (len & 7)` (`< 0xF8`),
        /// or a count no buffer has.
        pub len: u8,
        /// `fill % 4`: `first * (1 + i / 8)`, typical values, [`WILD`] values, random bits.
        pub fill: u8,
        pub first: F64Raw,
    }
}

impl ArrayRaw {
    /// `(count passed, real elements)`.
    fn counts(&self, default: usize, pairs: usize) -> (usize, usize) {
        let n = match self.len {
            l if l < 0xE0 => default,
            l if l < 0xF0 => (pairs + usize::from(l & 0xF)).saturating_sub(8),
            l if l < 0xF8 => MAX_PAIRS + 1 + usize::from(l & 7),
            l => [usize::MAX, usize::MAX / 8 + 1, isize::MAX as usize, MAX_PAIRS * 1024][usize::from(l & 3)],
        };
        (n, if n > MAX_PAIRS + 8 { pairs } else { n })
    }

    fn values(&self, n: usize, typical: &[f64]) -> Vec<f64> {
        let first = self.first.get(typical);
        let mut g = SplitMix(self.first.raw ^ u64::from(self.fill));
        (0..n)
            .map(|i| match (self.fill % 4, i) {
                (0, _) => first * (1.0 + i as f64 / 8.0),
                (_, 0) => first,
                (1, _) => typical[g.below(typical.len() as u64) as usize],
                (2, _) => WILD[g.below(WILD.len() as u64) as usize],
                _ => f64::from_bits(g.next()),
            })
            .collect()
    }
}

raw! {
    /// A `rope_config`, field by field, and how it is passed.
    pub struct ConfigRaw {
        /// `struct_size` ([`struct_size`]).
        pub size: u8,
        /// How the pointer is passed ([`pass`]).
        pub ptr: u8,
        /// `2 + h % 159`; `2 + h % 511` for `0x8000..0xFF00`; a value of [`WILD_DIMS`] above.
        pub head_dim: u16,
        /// `2 * (1 + r % min(head_dim / 2, 256))`; `256 + 2 * (r - 0xFE00)` for
        /// `0xFE00..0xFF00`; `r - 0xFF00` (odd, 0, ...) above.
        pub rotary_dim: u16,
        pub layout: EnumRaw,
        pub angle_mode: EnumRaw,
        pub theta: F64Raw,
        pub rope_type: EnumRaw,
        pub truncate: u8,
        pub has_mscale: u8,
        pub has_mscale_all_dim: u8,
        pub has_attention_factor: u8,
        pub factor: F64Raw,
        pub max_position_embeddings: U64Raw,
        pub original_max_position_embeddings: U64Raw,
        pub alpha: F64Raw,
        pub beta_fast: F64Raw,
        pub beta_slow: F64Raw,
        pub mscale: F64Raw,
        pub mscale_all_dim: F64Raw,
        pub attention_factor: F64Raw,
        pub low_freq_factor: F64Raw,
        pub high_freq_factor: F64Raw,
        pub partial_rotary_factor: F64Raw,
        pub short_factor: ArrayRaw,
        pub long_factor: ArrayRaw,
        pub freq_factors: ArrayRaw,
        pub inv_freq: ArrayRaw,
    }
}

/// Head dimensions beyond the typical: 0, odd, past `MAX_ROTARY_DIM`, huge.
pub const WILD_DIMS: [usize; 12] =
    [0, 1, 2, 3, 512, 513, 1024, 1 << 20, 1 << 32, usize::MAX, usize::MAX / 2, isize::MAX as usize + 1];

impl ConfigRaw {
    pub fn head_dim(&self) -> usize {
        match self.head_dim {
            h @ 0xFF00.. => WILD_DIMS[usize::from(h & 0xFF) % WILD_DIMS.len()],
            h @ 0x8000.. => 2 + usize::from(h) % 511,
            h => 2 + usize::from(h) % 159,
        }
    }

    pub fn rotary_dim(&self) -> usize {
        let r = self.rotary_dim;
        match r {
            0xFF00.. => usize::from(r - 0xFF00),
            0xFE00.. => 256 + 2 * usize::from(r - 0xFE00),
            _ => 2 * (1 + usize::from(r) % (self.head_dim() / 2).clamp(1, MAX_PAIRS)),
        }
    }

    /// The raw field value that decodes to `head_dim` (typical range or a wild value).
    pub fn head_dim_raw(head_dim: usize) -> u16 {
        match WILD_DIMS.iter().position(|&d| d == head_dim) {
            _ if (2..=160).contains(&head_dim) => (head_dim - 2) as u16,
            // 0x8000 % 511 == 64.
            _ if (2..=512).contains(&head_dim) => 0x8000 + ((head_dim - 2 + 511 - 64) % 511) as u16,
            Some(i) => 0xFF00 + i as u16,
            None => panic!("head_dim {head_dim} has no encoding"),
        }
    }

    /// The raw field value that decodes to an even `rotary_dim` of `1..=min(head_dim, 512)`.
    pub fn rotary_dim_raw(rotary_dim: usize) -> u16 {
        (rotary_dim / 2 - 1) as u16
    }
}

/// The C configuration of a case, its arrays, and the harness's model of it.
pub struct Config {
    pub region: Region,
    pub value: c::rope_config,
    arrays: Vec<Arg<f64>>,
    inv_freq: Arg<f32>,
    /// The boundary defects `rope_config_validate` must find.
    pub defects: Vec<rope_status>,
    /// The Rust API's `Rope` of the same values.
    pub rust: Result<Rope<'static>, RopeError>,
}

impl Config {
    pub fn new(raw: &ConfigRaw) -> Self {
        let (hd, rd) = (raw.head_dim(), raw.rotary_dim());
        let pairs = (rd / 2).min(MAX_PAIRS + 8);
        let array = |a: &ArrayRaw, typical: &[f64]| {
            let (n, real) = a.counts(pairs, pairs);
            Arg::new(&a.values(real, typical), a.ptr, n)
        };
        let arrays = vec![
            array(&raw.short_factor, &[1.0, 1.05, 1.5, 2.0, 0.5, 1.0]),
            array(&raw.long_factor, &FACTORS),
            array(&raw.freq_factors, &[1.0, 4.0, 8.0, 32.0, 0.5]),
        ];
        let inv_freq = {
            let a = &raw.inv_freq;
            let (n, real) = a.counts(0, pairs);
            let v: Vec<f32> = if a.fill.is_multiple_of(4) {
                (0..real).map(|i| 10_000f64.powf(-2.0 * i as f64 / (2 * real) as f64) as f32).collect()
            } else {
                a.values(real, &[1.0, 0.5, 1e-4]).iter().map(|&x| x as f32).collect()
            };
            Arg::new(&v, a.ptr, n)
        };
        let f = |v: &F64Raw, typical: &[f64]| v.get(typical);
        let value = c::rope_config {
            struct_size: struct_size(raw.size, size_of::<c::rope_config>()),
            head_dim: hd,
            rotary_dim: rd,
            layout: raw.layout.get(2),
            angle_mode: raw.angle_mode.get(2),
            theta: f(&raw.theta, &THETAS),
            scaling: c::rope_scaling {
                rope_type: raw.rope_type.get(9),
                truncate: flag(raw.truncate ^ 1),
                has_mscale: flag(raw.has_mscale),
                has_mscale_all_dim: flag(raw.has_mscale_all_dim),
                has_attention_factor: flag(raw.has_attention_factor),
                factor: f(&raw.factor, &FACTORS),
                max_position_embeddings: raw.max_position_embeddings.get(&CONTEXTS),
                original_max_position_embeddings: raw.original_max_position_embeddings.get(&CONTEXTS),
                alpha: f(&raw.alpha, &[1.0, 2.0, 1000.0, 0.5]),
                beta_fast: f(&raw.beta_fast, &[32.0, 64.0, 4.0]),
                beta_slow: f(&raw.beta_slow, &[1.0, 2.0, 0.5]),
                mscale: f(&raw.mscale, &[1.0, 0.707, 0.0]),
                mscale_all_dim: f(&raw.mscale_all_dim, &[0.707, 1.0, 0.0]),
                attention_factor: f(&raw.attention_factor, &[1.0, 0.1, 2.0]),
                low_freq_factor: f(&raw.low_freq_factor, &[1.0, 0.5, 2.0]),
                high_freq_factor: f(&raw.high_freq_factor, &[4.0, 8.0, 1.0]),
                partial_rotary_factor: f(&raw.partial_rotary_factor, &[1.0, 0.5, 0.25, 0.75]),
                short_factor: arrays[0].ptr(),
                short_factor_len: arrays[0].len,
                long_factor: arrays[1].ptr(),
                long_factor_len: arrays[1].len,
                freq_factors: arrays[2].ptr(),
                freq_factors_len: arrays[2].len,
            },
            inv_freq: inv_freq.ptr(),
            inv_freq_len: inv_freq.len,
        };
        let region =
            Region::with_struct(value, value.struct_size, pass(raw.ptr, align_of::<c::rope_config>()));
        let mut cfg = Config {
            region,
            value,
            arrays,
            inv_freq,
            defects: Vec::new(),
            rust: Err(RopeError::ZeroHeadDim),
        };
        cfg.model();
        cfg
    }

    /// What `rope_config_validate` must find, in the order of the ABI's checks (the order
    /// matters only for the Rust errors; any defect may be reported).
    fn model(&mut self) {
        let v = &self.value;
        let s = &v.scaling;
        let d = &mut self.defects;
        required(self.region.pass(), d);
        if v.struct_size != size_of::<c::rope_config>() {
            d.push(c::ROPE_UNSUPPORTED_STRUCT_SIZE);
        }
        if v.layout > 1 || v.angle_mode > 1 || s.rope_type > 8 {
            d.push(c::ROPE_UNKNOWN_ENUM);
        }
        if v.inv_freq_len <= MAX_PAIRS {
            self.inv_freq.defects(d);
        }
        let flags: &[u8] = match s.rope_type {
            c::ROPE_SCALING_YARN => &[s.truncate, s.has_mscale, s.has_mscale_all_dim, s.has_attention_factor],
            c::ROPE_SCALING_LONGROPE => &[s.has_attention_factor],
            _ => &[],
        };
        if flags.iter().any(|&f| f > 1) {
            d.push(c::ROPE_INVALID_ARGUMENT);
        }
        let used: &[usize] = match s.rope_type {
            c::ROPE_SCALING_LONGROPE => &[0, 1],
            c::ROPE_SCALING_FREQ_FACTORS => &[2],
            _ => &[],
        };
        for &i in used {
            if self.arrays[i].len <= MAX_PAIRS {
                self.arrays[i].defects(d);
            }
        }

        let opt = |has: u8, x: f64| (has == 1).then_some(x);
        let arr = |i: usize, name: &'static str| -> Result<Vec<f64>, RopeError> {
            let a = &self.arrays[i];
            if a.len > MAX_PAIRS {
                Err(RopeError::InvalidScalingParameter { name })
            } else {
                Ok(a.passed())
            }
        };
        let scaling: Result<Scaling, RopeError> = match s.rope_type {
            c::ROPE_SCALING_LINEAR => Ok(Scaling::Linear { factor: s.factor }),
            c::ROPE_SCALING_DYNAMIC => Ok(Scaling::DynamicNtk {
                factor: s.factor,
                max_position_embeddings: s.max_position_embeddings,
            }),
            c::ROPE_SCALING_NTK_ALPHA => Ok(Scaling::NtkAlpha { alpha: s.alpha }),
            c::ROPE_SCALING_YARN => {
                let mut p = YarnParams::new(s.factor, s.original_max_position_embeddings)
                    .with_beta(s.beta_fast, s.beta_slow)
                    .with_truncate(s.truncate == 1);
                p.mscale = opt(s.has_mscale, s.mscale);
                p.mscale_all_dim = opt(s.has_mscale_all_dim, s.mscale_all_dim);
                p.attention_factor = opt(s.has_attention_factor, s.attention_factor);
                Ok(Scaling::Yarn(p))
            }
            c::ROPE_SCALING_LLAMA3 => Ok(Scaling::Llama3 {
                factor: s.factor,
                low_freq_factor: s.low_freq_factor,
                high_freq_factor: s.high_freq_factor,
                original_max_position_embeddings: s.original_max_position_embeddings,
            }),
            c::ROPE_SCALING_LONGROPE => arr(0, "short_factor").and_then(|short| {
                let long = arr(1, "long_factor")?;
                let mut p = LongRopeParams::new(&short, &long, s.original_max_position_embeddings, s.factor)?;
                p.attention_factor = opt(s.has_attention_factor, s.attention_factor);
                Ok(Scaling::LongRope(p))
            }),
            c::ROPE_SCALING_PROPORTIONAL => {
                Ok(Scaling::Proportional { factor: s.factor, partial_rotary_factor: s.partial_rotary_factor })
            }
            c::ROPE_SCALING_FREQ_FACTORS => arr(2, "freq_factors").and_then(|f| Scaling::freq_factors(&f)),
            _ => Ok(Scaling::None),
        };
        let config = |scaling| RopeConfig {
            head_dim: v.head_dim,
            rotary_dim: v.rotary_dim,
            layout: if v.layout == c::ROPE_LAYOUT_INTERLEAVED {
                PairLayout::Interleaved
            } else {
                PairLayout::HalfSplit
            },
            theta: v.theta,
            scaling,
            angle_mode: if v.angle_mode == c::ROPE_ANGLE_HF_COMPATIBLE {
                AngleMode::HfCompatible
            } else {
                AngleMode::Exact
            },
        };
        self.rust = scaling.and_then(|sc| Rope::new(config(sc))).and_then(|rope| match v.inv_freq_len {
            0 => Ok(rope),
            n if n > MAX_PAIRS => Err(RopeError::InvFreqLength { expected: rope.config().pairs(), len: n }),
            _ => rope.with_hf_inv_freq(&self.inv_freq.passed()),
        });
    }

    /// Every region of the configuration (struct and arrays).
    pub fn regions(&self) -> impl Iterator<Item = &Region> {
        std::iter::once(&self.region)
            .chain(self.arrays.iter().map(|a| &a.region))
            .chain([&self.inv_freq.region])
    }
}

raw! {
    /// The handle: made by `rope_init` in caller storage or by `rope_new`.
    pub struct HandleRaw {
        /// `kind & 3 == 3`: `rope_new`; else `rope_init`.
        pub kind: u8,
        /// How the storage pointer is passed.
        pub storage: u8,
        /// The storage size: `rope_size()` (`< 0xC0`), `+ (size & 31)` (`< 0xE0`),
        /// `rope_size() - 1 - (size & 15)` (`< 0xF0`), or 0.
        pub size: u8,
        /// The out-parameter: `out % 16` as [`pass`], except 15: inside the storage.
        pub out: u8,
        /// `0xFA` with `rope_new` of a valid configuration: inject an allocation failure.
        pub fault: u8,
        /// How the handle is passed to `rope_free` at the end (as [`pass`]).
        pub free: u8,
    }
}

/// The handle of a case.
pub struct Handle {
    /// `rope_init`'s storage.
    storage: Option<Region>,
    /// A live handle and the Rust `Rope` of its configuration.
    pub live: Option<(*mut c::rope_t, Rope<'static>)>,
    heap: bool,
    /// What calls get when there is no live handle: storage holding canary bytes.
    dead: Region,
}

/// The size and alignment of `rope_t`.
fn rope_layout() -> (usize, usize) {
    (c::rope_size(), c::rope_align())
}

impl Handle {
    pub fn make(ctx: &mut Ctx<'_>, raw: &HandleRaw, cfg: &Config) -> Self {
        let (size, align) = rope_layout();
        let dead = Region::new(size, Pass::Real);
        assert!(size <= c::ROPE_STORAGE_SIZE && align <= c::ROPE_STORAGE_ALIGN && align > 1);
        let rust_status = Some(status(&cfg.rust));

        // rope_config_validate first: the same checks as rope_init's configuration part.
        let watch = Watch::new(cfg.regions());
        // SAFETY: NULL or a real `rope_config` whose arrays are readable for their counts (or
        // have counts the ABI rejects before reading).
        let s = unsafe { c::rope_config_validate(cfg.region.ptr()) };
        ctx.judge("rope_config_validate", s, &cfg.defects, rust_status);
        watch.verify(ctx, "rope_config_validate", false, &[]);

        let heap = raw.kind & 3 == 3;
        let mut slot = Region::new(size_of::<*mut c::rope_t>(), pass(raw.out, align_of::<*mut c::rope_t>()));
        let mut defects = cfg.defects.clone();
        let (storage, out): (Option<Region>, *mut *mut c::rope_t) = if heap {
            required(slot.pass(), &mut defects);
            (None, slot.ptr())
        } else {
            // Storage sized to the configuration (issue 13): `rope_storage_size` of a valid
            // one; an invalid one fails on its configuration whatever the size past the
            // fixed header.
            let size = if cfg.rust.is_ok() && cfg.defects.is_empty() {
                let mut need = 0;
                // SAFETY: a real `rope_config` whose arrays are readable for their counts.
                let s = unsafe { c::rope_storage_size(cfg.region.ptr(), &mut need) };
                assert_eq!(s, c::ROPE_OK, "rope_storage_size of a valid configuration");
                assert!(need <= size, "rope_storage_size {need} > rope_size() {size}");
                need
            } else {
                size
            };
            let bytes = match raw.size {
                s if s < 0xC0 => size,
                s if s < 0xE0 => size + usize::from(s & 31),
                s if s < 0xF0 => size - 1 - usize::from(s & 15),
                _ => 0,
            };
            let st = Region::new(bytes, pass(raw.storage, align));
            required(st.pass(), &mut defects);
            let inside = raw.out % 16 == 15 && bytes >= 16 && st.pass() != Pass::Null;
            let out = if inside {
                // SAFETY: 8 bytes into a payload of at least 16.
                let p = unsafe { st.addr().add(8) };
                if !(p as usize).is_multiple_of(align_of::<*mut c::rope_t>()) {
                    defects.push(c::ROPE_MISALIGNED_POINTER);
                }
                defects.push(c::ROPE_OVERLAPPING_BUFFERS);
                slot = Region::new(0, Pass::Real);
                p.cast()
            } else {
                required(slot.pass(), &mut defects);
                slot.ptr()
            };
            if bytes < size {
                defects.push(c::ROPE_BUFFER_TOO_SMALL);
            }
            (Some(st), out)
        };

        let mut regions: Vec<&Region> = cfg.regions().collect();
        regions.push(&slot);
        regions.extend(storage.as_ref());
        let watch = Watch::new(regions);
        let valid = defects.is_empty() && cfg.rust.is_ok();
        let (s, call) = if heap {
            let oom = raw.fault == 0xFA && valid;
            if oom {
                assert_eq!(c::rope_test_fault(c::ROPE_TEST_FAULT_ALLOC), c::ROPE_OK);
                defects.push(c::ROPE_OUT_OF_MEMORY);
            }
            // SAFETY: `cfg` as for rope_config_validate; `out` NULL or a writable slot.
            (unsafe { c::rope_new(cfg.region.ptr(), out) }, "rope_new")
        } else {
            let st = storage.as_ref().expect("storage");
            // SAFETY: `storage` NULL or writable for `bytes` bytes; `out` NULL, a slot, or
            // inside the storage; `cfg` as above.
            (unsafe { c::rope_init(st.ptr(), st.bytes(), cfg.region.ptr(), out) }, "rope_init")
        };
        let ok = ctx.judge(call, s, &defects, rust_status);
        let mut live = None;
        if ok {
            // SAFETY: `out` is a real, aligned slot (no defect) that the call wrote.
            let h = unsafe { out.read() };
            let mut written = vec![(&slot, bytes_of(&[h as usize]))];
            if let Some(st) = &storage {
                assert_eq!(h, st.ptr(), "rope_init: *out is not the storage\n{}", ctx.describe());
                // The storage's payload is the handle's to change: verify its canaries only.
                let mut now: Vec<u8> = (0..st.bytes()).map(|i| st.get::<u8>(i)).collect();
                now.truncate(size);
                written.push((st, now));
            }
            watch.verify(ctx, call, true, &written);
            live = Some((h, cfg.rust.clone().expect("valid configuration")));
        } else {
            watch.verify(ctx, call, false, &[]);
        }
        let handle = Handle { storage, live, heap, dead };
        handle.check_pairs(ctx);
        handle
    }

    /// `rope_pairs` of the live handle.
    pub fn check_pairs(&self, ctx: &mut Ctx<'_>) {
        let Some((h, rope)) = &self.live else { return };
        let mut pairs = usize::MAX;
        // SAFETY: a live handle; a writable usize.
        let s = unsafe { c::rope_pairs(*h, &mut pairs) };
        ctx.judge("rope_pairs", s, &[], Some(c::ROPE_OK));
        assert_eq!(pairs, rope.config().pairs(), "rope_pairs\n{}", ctx.describe());
    }

    /// The handle pointer for a call (one input byte, as [`pass`]) and its defects.
    pub fn pointer(&self, p: u8, d: &mut Vec<rope_status>) -> *const c::rope_t {
        let (_, align) = rope_layout();
        let base = self.live.as_ref().map_or(self.dead.addr(), |(h, _)| h.cast());
        match pass(p, align) {
            Pass::Null => {
                d.push(c::ROPE_NULL_POINTER);
                ptr::null()
            }
            Pass::Misaligned(k) => {
                d.push(c::ROPE_MISALIGNED_POINTER);
                // SAFETY: k < align <= 16 bytes into a storage of rope_size() > 16 bytes.
                unsafe { base.add(k) }.cast()
            }
            Pass::Real => {
                if self.live.is_none() {
                    d.push(c::ROPE_INVALID_HANDLE);
                }
                base.cast()
            }
        }
    }

    /// The Rust `Rope` of the live handle, on the tier in use.
    pub fn rope(&self) -> Option<Rope<'_>> {
        let (_, r) = self.live.as_ref()?;
        Some(r.clone().with_tier(dispatch::active_tier()).expect("the active tier is available"))
    }

    /// `rotary_dim / 2` of the live handle (else of the raw configuration, for sizes).
    pub fn pairs(&self, cfg: &Config) -> usize {
        self.live.as_ref().map_or((cfg.value.rotary_dim / 2).clamp(1, MAX_PAIRS), |(_, r)| r.config().pairs())
    }

    /// Memory every call may reach but none may change: the storage.
    pub fn regions(&self) -> impl Iterator<Item = &Region> {
        self.storage.iter().chain([&self.dead])
    }

    /// `rope_free`, passed as the byte `p` says, then (for a live heap handle not freed
    /// by that) with the real pointer.
    pub fn free(self, ctx: &mut Ctx<'_>, p: u8) {
        let (_, align) = rope_layout();
        let live_heap = self.heap && self.live.is_some();
        let base: *mut u8 = self.live.as_ref().map_or(self.dead.addr(), |(h, _)| h.cast());
        let mut d = Vec::new();
        let handle: *mut u8 = match pass(p, align) {
            Pass::Null => ptr::null_mut(),
            Pass::Misaligned(k) => {
                d.push(c::ROPE_MISALIGNED_POINTER);
                // SAFETY: k < align <= 16 bytes into rope_size() > 16 bytes.
                unsafe { base.add(k) }
            }
            Pass::Real => {
                if !live_heap {
                    // Storage from rope_init, or no handle at all.
                    d.push(c::ROPE_INVALID_HANDLE);
                }
                base
            }
        };
        let watch = Watch::new(self.regions());
        // SAFETY: NULL, a live heap handle, or a pointer into real memory of rope_size()
        // readable bytes (storage, dead storage, or a misaligned pointer, rejected).
        let s = unsafe { c::rope_free(handle.cast()) };
        let freed = ctx.judge("rope_free", s, &d, Some(c::ROPE_OK)) && !handle.is_null();
        watch.verify(ctx, "rope_free", false, &[]);
        if live_heap && !freed {
            let (h, _) = self.live.as_ref().expect("live");
            // SAFETY: a live heap handle, not freed yet.
            let s = unsafe { c::rope_free(*h) };
            ctx.judge("rope_free", s, &[], Some(c::ROPE_OK));
        }
    }
}
