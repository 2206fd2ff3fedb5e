//! The case of a differential check and its byte encoding: the configuration, the tensors
//! and views, the positions and the cos/sin source, read from fuzz input by [`DiffCase::read`]
//! and written back as a seed.

use rope_kernels::{AngleMode, LongRopeParams, PairLayout, RopeConfig, Scaling, View, YarnParams};

use super::super::input::{Input, Seed};

/// Thetas to draw from: real models, theta < 1, and 1 (which YaRN rejects).
pub const THETAS: [f64; 10] = [10_000.0, 500_000.0, 1_000_000.0, 150_000.0, 0.5, 2.0, 1.0, 1e-3, 1e9, 160.0];
/// Factors to draw from (scaling factors, alphas); 0 and -1 are invalid.
pub const FACTORS: [f64; 16] =
    [1.0, 2.0, 4.0, 8.0, 0.5, 32.0, 1.5, 16.0, 1e-3, 64.0, 0.0, -1.0, 1e6, 0.25, 3.0, 40.0];

/// The configuration part of a case.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigSpec {
    /// `head_dim`: `1 + hd % 96`, or `1 + hd % 600` when `hd >= 0xF000`.
    pub hd: u16,
    /// `rotary_dim = 2 * (1 + rd % (head_dim / 2))`, or the raw `rd - 0xFF00` (possibly odd,
    /// 0 or too large) when `rd >= 0xFF00`.
    pub rd: u16,
    pub interleaved: bool,
    pub hf_angles: bool,
    pub theta: u8,
    /// `scaling % 9` picks the method; `p1..p3` its parameters; `orig` a context length.
    pub scaling: u8,
    pub p1: u8,
    pub p2: u8,
    pub p3: u8,
    pub orig: u16,
}

impl ConfigSpec {
    pub(super) fn read(r: &mut Input<'_>) -> Self {
        ConfigSpec {
            hd: r.u16(),
            rd: r.u16(),
            interleaved: r.bool(),
            hf_angles: r.bool(),
            theta: r.u8(),
            scaling: r.u8(),
            p1: r.u8(),
            p2: r.u8(),
            p3: r.u8(),
            orig: r.u16(),
        }
    }

    pub(super) fn write(&self, s: &mut Seed) {
        s.u16(self.hd).u16(self.rd).bool(self.interleaved).bool(self.hf_angles).u8(self.theta);
        s.u8(self.scaling).u8(self.p1).u8(self.p2).u8(self.p3).u16(self.orig);
    }

    /// The spec of a configuration (scaling: `scaling`, `p1..p3`, `orig` as given).
    pub fn new(head_dim: usize, rotary_dim: usize, layout: PairLayout, theta_index: u8) -> Self {
        let hd = if head_dim <= 96 {
            (head_dim - 1) as u16
        } else {
            // The smallest value >= 0xF000 that is head_dim - 1 modulo 600.
            let base = 0xF000usize;
            (base + (head_dim - 1 + 600 - base % 600) % 600) as u16
        };
        ConfigSpec {
            hd,
            rd: (rotary_dim / 2 - 1) as u16,
            interleaved: layout == PairLayout::Interleaved,
            hf_angles: false,
            theta: theta_index,
            scaling: 0,
            p1: 0,
            p2: 0,
            p3: 0,
            orig: 4096,
        }
    }

    pub fn head_dim(&self) -> usize {
        if self.hd >= 0xF000 {
            1 + usize::from(self.hd) % 600
        } else {
            1 + usize::from(self.hd) % 96
        }
    }

    pub fn rotary_dim(&self) -> usize {
        if self.rd >= 0xFF00 {
            usize::from(self.rd - 0xFF00)
        } else {
            2 * (1 + usize::from(self.rd) % (self.head_dim() / 2).max(1))
        }
    }

    /// The configuration. Scaling constructors that fail (e.g. LongRoPE arrays longer than
    /// `MAX_PAIRS`) fall back to no scaling; out-of-domain parameters are kept, for
    /// `Rope::new` to reject.
    pub fn config(&self) -> RopeConfig {
        let (hd, rd) = (self.head_dim(), self.rotary_dim());
        let pairs = rd / 2;
        let f = |b: u8| FACTORS[usize::from(b) % FACTORS.len()];
        let orig = u64::from(self.orig);
        let scaling = match self.scaling % 9 {
            0 => Scaling::None,
            1 => Scaling::Linear { factor: f(self.p1) },
            2 => Scaling::DynamicNtk { factor: f(self.p1), max_position_embeddings: orig },
            3 => Scaling::NtkAlpha { alpha: f(self.p1) },
            4 => {
                let mut p = YarnParams::new(f(self.p1), orig)
                    .with_beta(
                        [32.0, 64.0, 4.0, 1.0][usize::from(self.p2) % 4],
                        [1.0, 2.0, 0.5][usize::from(self.p2 / 4) % 3],
                    )
                    .with_truncate(self.p3 & 1 == 0);
                if self.p3 & 2 != 0 {
                    p = p.with_mscale(f(self.p3 >> 2), [1.0, 0.707, 0.0][usize::from(self.p3 >> 6) % 3]);
                }
                if self.p3 & 0x30 == 0x30 {
                    p = p.with_attention_factor(f(self.p2));
                }
                Scaling::Yarn(p)
            }
            5 => Scaling::Llama3 {
                factor: f(self.p1),
                low_freq_factor: [1.0, 0.5, 2.0, 4.0][usize::from(self.p2) % 4],
                high_freq_factor: [4.0, 8.0, 1.0, 2.0][usize::from(self.p3) % 4],
                original_max_position_embeddings: orig,
            },
            6 => {
                let short: Vec<f64> =
                    (0..pairs).map(|i| 1.0 + ((i * usize::from(self.p1)) % 7) as f64 / 4.0).collect();
                let long: Vec<f64> = (0..pairs).map(|i| 1.0 + i as f64 * f(self.p2).abs()).collect();
                match LongRopeParams::new(&short, &long, orig, f(self.p3)) {
                    Ok(p) => Scaling::LongRope(p),
                    Err(_) => Scaling::None,
                }
            }
            7 => Scaling::Proportional {
                factor: f(self.p1),
                partial_rotary_factor: [1.0, 0.5, 0.25, 0.75, 0.1][usize::from(self.p2) % 5],
            },
            _ => {
                let ff: Vec<f64> =
                    (0..pairs).map(|i| 1.0 + ((i * usize::from(self.p1)) % 13) as f64 * 0.5).collect();
                Scaling::freq_factors(&ff).unwrap_or(Scaling::None)
            }
        };
        RopeConfig {
            head_dim: hd,
            rotary_dim: rd,
            layout: if self.interleaved { PairLayout::Interleaved } else { PairLayout::HalfSplit },
            theta: THETAS[usize::from(self.theta) % THETAS.len()],
            scaling,
            angle_mode: if self.hf_angles { AngleMode::HfCompatible } else { AngleMode::Exact },
        }
    }
}

/// How one tensor is laid out in its buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TensorSpec {
    /// `kind % 5`: 0 BSHD, 1 BHSD, 2 padded (BSHD-like if `s1` is even, else BHSD-like:
    /// `a % 4` extra elements per row, `b % 8` per outer step), 3 one tensor of a fused QKV
    /// row (`a % 4` more heads of other tensors per token), 4 arbitrary strides
    /// `(s1 % 1024, s2 % 1024)` (token, head).
    pub kind: u8,
    pub a: u8,
    pub b: u8,
    pub s1: u16,
    pub s2: u16,
    /// `len >= 248`: the buffer is `len - 251` elements longer than the view (-3..=4,
    /// negative: too short); otherwise exactly the view.
    pub len: u8,
    /// Canary elements before (`front % 8`) and after (`back % 8`) the buffer.
    pub front: u8,
    pub back: u8,
}

impl TensorSpec {
    pub const BSHD: TensorSpec = TensorSpec { kind: 0, a: 0, b: 0, s1: 0, s2: 0, len: 0, front: 3, back: 5 };
    pub const BHSD: TensorSpec = TensorSpec { kind: 1, ..TensorSpec::BSHD };

    /// Padded rows: `a` extra per row, `b` extra per outer step.
    pub const fn padded(a: u8, b: u8, bhsd: bool) -> Self {
        TensorSpec { kind: 2, a, b, s1: bhsd as u16, ..TensorSpec::BSHD }
    }

    /// One tensor of a fused projection with `others` heads of other tensors per token.
    pub const fn fused(others: u8) -> Self {
        TensorSpec { kind: 3, a: others, ..TensorSpec::BSHD }
    }

    pub(super) fn read(r: &mut Input<'_>) -> Self {
        TensorSpec {
            kind: r.u8(),
            a: r.u8(),
            b: r.u8(),
            s1: r.u16(),
            s2: r.u16(),
            len: r.u8(),
            front: r.u8(),
            back: r.u8(),
        }
    }

    pub(super) fn write(&self, s: &mut Seed) {
        s.u8(self.kind)
            .u8(self.a)
            .u8(self.b)
            .u16(self.s1)
            .u16(self.s2)
            .u8(self.len)
            .u8(self.front)
            .u8(self.back);
    }

    pub(super) fn view(&self, tokens: usize, heads: usize, hd: usize) -> View {
        let (a, b) = (usize::from(self.a % 4), usize::from(self.b % 8));
        match self.kind % 5 {
            0 => View::token_major(tokens, heads, hd),
            1 => View::head_major(tokens, heads, hd),
            2 if self.s1.is_multiple_of(2) => {
                View { tokens, heads, token_stride: heads * (hd + a) + b, head_stride: hd + a }
            }
            2 => View { tokens, heads, token_stride: hd + a, head_stride: tokens * (hd + a) + b },
            3 => View { tokens, heads, token_stride: (heads + a) * hd, head_stride: hd },
            _ => View {
                tokens,
                heads,
                token_stride: usize::from(self.s1 % 1024),
                head_stride: usize::from(self.s2 % 1024),
            },
        }
    }

    pub(super) fn len_delta(&self) -> isize {
        if self.len >= 248 {
            isize::from(self.len) - 251
        } else {
            0
        }
    }

    /// Whether the harness knows the view is valid (a standard layout with a long enough
    /// buffer).
    pub(super) fn known_valid(&self) -> bool {
        self.kind % 5 != 4 && self.len_delta() >= 0
    }
}

/// Positions of the call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PosSpec {
    /// `ApplyOptions::start`: `sel % 6` picks 0, `raw % 256`, `2^24 + raw % 256`, `2^31 + raw`,
    /// `u32::MAX - tokens + 1 + raw % 4` (past 0: overflow), or `raw`.
    Start { sel: u8, raw: u32 },
    /// `ApplyOptions::ids`: `count_delta >= 250` adds `count_delta - 252` ids (a count mismatch);
    /// each id `(sel, raw)`: `sel % 5` picks `raw % 16`, `raw % 4096`, `raw`,
    /// `u32::MAX - raw % 16`, or the previous id.
    Ids { count_delta: u8, ids: Vec<(u8, u32)> },
}

/// Where cos/sin come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SourceSpec {
    /// `sel % 4`: on the fly, `fill_table` from `base`, `build_cache`, or caller values.
    pub sel: u8,
    /// `rows >= 252`: the table has one row too few; `rows == 251`: rows of the wrong width;
    /// otherwise `rows % 4` spare rows.
    pub rows: u8,
    /// First position of a `fill_table` table (`u32::MAX - rows + 1 + ...` overflows).
    pub base: u32,
}

/// One fuzz case of the differential check.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DiffCase {
    pub config: ConfigSpec,
    /// `tokens % 9`.
    pub tokens: u8,
    /// `q_heads % 7`.
    pub q_heads: u8,
    /// `k % 6`: 0 no k; else `k % 6 - 1` kv heads (0..=4).
    pub k: u8,
    /// `>= 250`: k has `k_tokens - 252` more tokens than q (a shape mismatch).
    pub k_tokens: u8,
    pub out_of_place: bool,
    /// `>= 252`: the outputs have one head more than their inputs (a shape mismatch).
    pub out_heads: u8,
    pub q: TensorSpec,
    pub k_spec: TensorSpec,
    pub q_out: TensorSpec,
    pub k_out: TensorSpec,
    pub positions: PosSpec,
    pub source: SourceSpec,
    pub inverse: bool,
    pub data_seed: u64,
    /// Chance in 256 that an element is a special value.
    pub specials: u8,
    /// Element bits (little endian) written over q, then k, then the outputs.
    pub raw: Vec<u8>,
}

impl DiffCase {
    pub fn read(bytes: &[u8]) -> Self {
        let mut r = Input::new(bytes);
        let config = ConfigSpec::read(&mut r);
        let tokens = r.u8();
        let q_heads = r.u8();
        let k = r.u8();
        let k_tokens = r.u8();
        let out_of_place = r.bool();
        let out_heads = r.u8();
        let (q, k_spec, q_out, k_out) = (
            TensorSpec::read(&mut r),
            TensorSpec::read(&mut r),
            TensorSpec::read(&mut r),
            TensorSpec::read(&mut r),
        );
        let positions = if r.bool() {
            let count_delta = r.u8();
            let n = (usize::from(tokens % 9) as isize + count_delta_of(count_delta)).max(0) as usize;
            PosSpec::Ids { count_delta, ids: (0..n).map(|_| (r.u8(), r.u32())).collect() }
        } else {
            PosSpec::Start { sel: r.u8(), raw: r.u32() }
        };
        let source = SourceSpec { sel: r.u8(), rows: r.u8(), base: r.u32() };
        let inverse = r.bool();
        let data_seed = r.u64();
        let specials = r.u8();
        let raw = r.rest().to_vec();
        DiffCase {
            config,
            tokens,
            q_heads,
            k,
            k_tokens,
            out_of_place,
            out_heads,
            q,
            k_spec,
            q_out,
            k_out,
            positions,
            source,
            inverse,
            data_seed,
            specials,
            raw,
        }
    }

    pub fn write(&self) -> Vec<u8> {
        let mut s = Seed::default();
        self.config.write(&mut s);
        s.u8(self.tokens)
            .u8(self.q_heads)
            .u8(self.k)
            .u8(self.k_tokens)
            .bool(self.out_of_place)
            .u8(self.out_heads);
        for t in [&self.q, &self.k_spec, &self.q_out, &self.k_out] {
            t.write(&mut s);
        }
        match &self.positions {
            PosSpec::Ids { count_delta, ids } => {
                s.bool(true).u8(*count_delta);
                for &(sel, raw) in ids {
                    s.u8(sel).u32(raw);
                }
            }
            PosSpec::Start { sel, raw } => {
                s.bool(false).u8(*sel).u32(*raw);
            }
        }
        s.u8(self.source.sel).u8(self.source.rows).u32(self.source.base);
        s.bool(self.inverse).u64(self.data_seed).u8(self.specials).bytes(&self.raw);
        s.0
    }

    /// A valid case: `tokens` tokens of `q_heads` heads (and `kv_heads` k heads), BSHD q,
    /// BHSD k, on-the-fly cos/sin, positions from `start`.
    pub fn simple(config: ConfigSpec, tokens: u8, q_heads: u8, kv_heads: Option<u8>, start: u32) -> Self {
        DiffCase {
            config,
            tokens,
            q_heads,
            k: kv_heads.map_or(0, |h| h + 1),
            k_tokens: 0,
            out_of_place: false,
            out_heads: 0,
            q: TensorSpec::BSHD,
            k_spec: TensorSpec::BHSD,
            q_out: TensorSpec::BHSD,
            k_out: TensorSpec::BSHD,
            positions: PosSpec::Start { sel: 5, raw: start },
            source: SourceSpec { sel: 0, rows: 0, base: 0 },
            inverse: false,
            data_seed: 0x5EED,
            specials: 8,
            raw: Vec::new(),
        }
    }
}

pub(super) fn count_delta_of(b: u8) -> isize {
    if b >= 250 {
        isize::from(b) - 252
    } else {
        0
    }
}
