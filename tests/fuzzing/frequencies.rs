//! The `frequencies` target: random parameters of every [`Scaling`] method, including
//! out-of-domain, extreme and non-finite ones, through every entry point that computes
//! frequencies or cos/sin. Each must return finite values or an error, never panic, never
//! NaN:
//! - [`RopeConfig::validate`], [`Frequencies::new`] at a random `seq_len`, and
//!   [`Rope::new`] agree: `Rope::new` returns what `Frequencies::new` returns for the first
//!   call (and, for dynamic NTK and LongRoPE, for the longest one), and nothing succeeds on a
//!   configuration `validate` rejects;
//! - the errors are the documented ones (configuration and scaling errors);
//! - on success: `rotary_dim / 2` frequencies, every `inv_freq` finite and ≥ 0 and its f32
//!   rounding finite, an attention factor finite and > 0;
//! - a `Rope` that was built gives, at any position (0, 1, random, `u32::MAX`) and in both
//!   angle modes, finite cos/sin rows from `fill_table`, and rotates a small vector into finite
//!   values, or reports an error for the call length (the `seq_len`-dependent methods);
//! - a caller `inv_freq` table ([`Rope::with_hf_inv_freq`]) of arbitrary values is rejected
//!   or gives finite rows.

use rope_kernels::{
    AngleMode, ApplyOptions, Frequencies, HeadsMut, LongRopeParams, PairLayout, Rope, RopeConfig, RopeError,
    Scaling, View, YarnParams, MAX_PAIRS,
};

use super::input::{Input, Seed};

/// f64 values to draw from: typical, boundary, extreme and non-finite.
pub const WILD: [f64; 32] = [
    1.0,
    2.0,
    4.0,
    8.0,
    32.0,
    0.5,
    0.1,
    10_000.0,
    500_000.0,
    1e6,
    0.0,
    -0.0,
    -1.0,
    1.0 + f64::EPSILON,
    1.0 - f64::EPSILON / 2.0,
    f64::MIN_POSITIVE,
    5e-324, // smallest subnormal
    1e-310, // subnormal
    1e-300,
    1e-30,
    1e30,
    1e300,
    f64::MAX,
    f64::INFINITY,
    f64::NEG_INFINITY,
    f64::NAN,
    3.4e38, // about f32::MAX
    7.9e28, // about f32::MAX / 2^32
    4.2e298,
    1e-45,
    0.707,
    64.0,
];

/// u64 values to draw from (context lengths, `seq_len`).
pub const WILD_U64: [u64; 12] =
    [0, 1, 2, 4096, 8192, 131_072, 1 << 32, (1 << 32) + 1, u32::MAX as u64, u64::MAX, u64::MAX / 2, 3];

/// Reads an f64: a palette entry (`sel < 0xE0`) or the raw bits that follow.
fn f64_of(r: &mut Input<'_>) -> f64 {
    let sel = r.u8();
    let raw = r.u64();
    if sel < 0xE0 {
        WILD[usize::from(sel) % WILD.len()]
    } else {
        f64::from_bits(raw)
    }
}

fn u64_of(r: &mut Input<'_>) -> u64 {
    let sel = r.u8();
    let raw = r.u64();
    if sel < 0xE0 {
        WILD_U64[usize::from(sel) % WILD_U64.len()]
    } else {
        raw
    }
}

/// An array of per-pair factors: `pairs + delta` values (`delta` in -2..=2 for a `len` byte
/// >= 250, else 0), each `f64_of`, or all from one palette value when `uniform`.
fn array_of(r: &mut Input<'_>, pairs: usize) -> Vec<f64> {
    let len = r.u8();
    let n = if len >= 250 { (pairs as isize + isize::from(len) - 252).max(0) as usize } else { pairs };
    let n = n.min(MAX_PAIRS + 2);
    let uniform = r.bool();
    let first = f64_of(r);
    if uniform {
        return (0..n).map(|i| first * (1.0 + i as f64 / 8.0)).collect();
    }
    let mut v = vec![first];
    v.extend((1..n).map(|_| f64_of(r)));
    v.truncate(n);
    v
}

/// The configuration of one input (head_dim, rotary_dim, theta, layout, angle mode and the
/// scaling method with its parameters), then `seq_len`, a position, and a caller table flag.
pub struct FreqCase {
    pub config: RopeConfig,
    pub seq_len: u64,
    pub position: u32,
    /// Caller `inv_freq` values (`Rope::with_hf_inv_freq`), if any.
    pub hf_inv_freq: Option<Vec<f32>>,
}

pub fn read(bytes: &[u8]) -> FreqCase {
    let mut r = Input::new(bytes);
    let hd_raw = r.u16();
    let head_dim =
        if hd_raw >= 0xF000 { usize::from(hd_raw - 0xF000) } else { 1 + usize::from(hd_raw) % 160 };
    let rd_raw = r.u16();
    let rotary_dim = if rd_raw >= 0xF000 {
        usize::from(rd_raw - 0xF000)
    } else {
        2 * (1 + usize::from(rd_raw) % (head_dim / 2).max(1))
    };
    let pairs = rotary_dim / 2;
    let layout = if r.bool() { PairLayout::Interleaved } else { PairLayout::HalfSplit };
    let angle_mode = if r.bool() { AngleMode::HfCompatible } else { AngleMode::Exact };
    let theta = f64_of(&mut r);
    let method = r.u8() % 9;
    let scaling = match method {
        0 => Scaling::None,
        1 => Scaling::Linear { factor: f64_of(&mut r) },
        2 => Scaling::DynamicNtk { factor: f64_of(&mut r), max_position_embeddings: u64_of(&mut r) },
        3 => Scaling::NtkAlpha { alpha: f64_of(&mut r) },
        4 => {
            let mut p = YarnParams::new(f64_of(&mut r), u64_of(&mut r));
            p = p.with_beta(f64_of(&mut r), f64_of(&mut r)).with_truncate(r.bool());
            let flags = r.u8();
            let (m, mad, af) = (f64_of(&mut r), f64_of(&mut r), f64_of(&mut r));
            if flags & 1 != 0 {
                p.mscale = Some(m);
            }
            if flags & 2 != 0 {
                p.mscale_all_dim = Some(mad);
            }
            if flags & 4 != 0 {
                p.attention_factor = Some(af);
            }
            Scaling::Yarn(p)
        }
        5 => Scaling::Llama3 {
            factor: f64_of(&mut r),
            low_freq_factor: f64_of(&mut r),
            high_freq_factor: f64_of(&mut r),
            original_max_position_embeddings: u64_of(&mut r),
        },
        6 => {
            let short = array_of(&mut r, pairs);
            let long = array_of(&mut r, pairs);
            let (orig, factor, af) = (u64_of(&mut r), f64_of(&mut r), f64_of(&mut r));
            match LongRopeParams::new(&short, &long, orig, factor) {
                Ok(mut p) => {
                    if r.bool() {
                        p.attention_factor = Some(af);
                    }
                    Scaling::LongRope(p)
                }
                Err(e) => {
                    // Only arrays longer than MAX_PAIRS are rejected here.
                    assert!(short.len() > MAX_PAIRS || long.len() > MAX_PAIRS, "LongRopeParams::new: {e:?}");
                    Scaling::None
                }
            }
        }
        7 => Scaling::Proportional { factor: f64_of(&mut r), partial_rotary_factor: f64_of(&mut r) },
        _ => {
            let ff = array_of(&mut r, pairs);
            match Scaling::freq_factors(&ff) {
                Ok(s) => s,
                Err(e) => {
                    assert!(ff.len() > MAX_PAIRS, "Scaling::freq_factors: {e:?}");
                    Scaling::None
                }
            }
        }
    };
    let seq_len = u64_of(&mut r);
    let position = r.u32();
    let hf_inv_freq = if r.bool() {
        let n = pairs.min(MAX_PAIRS + 1);
        Some((0..n).map(|_| f64_of(&mut r) as f32).collect())
    } else {
        None
    };
    FreqCase {
        config: RopeConfig { head_dim, rotary_dim, layout, theta, scaling, angle_mode },
        seq_len,
        position,
        hf_inv_freq,
    }
}

/// The documented errors of configuration and frequency computation.
fn documented(e: &RopeError) -> bool {
    matches!(
        e,
        RopeError::ZeroHeadDim
            | RopeError::InvalidRotaryDim { .. }
            | RopeError::RotaryDimExceedsHeadDim { .. }
            | RopeError::RotaryDimTooLarge { .. }
            | RopeError::InvalidTheta
            | RopeError::InvalidScalingParameter { .. }
    )
}

fn check_frequencies(f: &Frequencies, cfg: &RopeConfig, what: &str) {
    assert_eq!(f.pairs(), cfg.rotary_dim / 2, "{what}: {cfg:?}");
    assert_eq!(f.inv_freq().len(), f.pairs(), "{what}: {cfg:?}");
    for (i, (&v, &v32)) in f.inv_freq().iter().zip(f.inv_freq_f32()).enumerate() {
        assert!(v.is_finite() && v >= 0.0, "{what}: inv_freq[{i}] = {v:e}: {cfg:?}");
        assert!(v32.is_finite() && v32 >= 0.0, "{what}: inv_freq_f32[{i}] = {v32:e}: {cfg:?}");
    }
    let af = f.attention_factor();
    assert!(af.is_finite() && af > 0.0, "{what}: attention_factor {af:e}: {cfg:?}");
}

/// Checks a built `Rope` at `positions`: rows finite, a rotation of small values finite.
fn check_rope(rope: &Rope, positions: &[u32], what: &str) {
    let cfg = rope.config();
    let pairs = cfg.rotary_dim / 2;
    let (mut c, mut s) = (vec![0.0f32; pairs], vec![0.0f32; pairs]);
    for &p in positions {
        match rope.fill_table(p, &mut c, &mut s) {
            Ok(()) => {
                for i in 0..pairs {
                    assert!(
                        c[i].is_finite() && s[i].is_finite(),
                        "{what}: position {p} pair {i}: cos {:e} sin {:e}: {cfg:?}",
                        c[i],
                        s[i]
                    );
                }
            }
            Err(e) => {
                assert!(
                    cfg.scaling.depends_on_seq_len() && documented(&e),
                    "{what}: fill_table({p}): {e:?}: {cfg:?}"
                )
            }
        }
        // |x| <= 1/4 and |cos|, |sin| <= attention_factor <= f32::MAX keep the result finite.
        let hd = cfg.head_dim.min(1024);
        if hd < cfg.head_dim {
            continue;
        }
        let mut x: Vec<f32> = (0..hd).map(|i| 0.25 * ((i % 7) as f32 / 7.0 - 0.5)).collect();
        match rope.apply(HeadsMut::new(&mut x, View::token_major(1, 1, hd)), &ApplyOptions::start(p)) {
            Ok(()) => assert!(
                x.iter().all(|v| v.is_finite()),
                "{what}: rotation at position {p} gave {:?}: {cfg:?}",
                x.iter().find(|v| !v.is_finite())
            ),
            Err(e) => {
                assert!(
                    cfg.scaling.depends_on_seq_len() && documented(&e),
                    "{what}: apply at {p}: {e:?}: {cfg:?}"
                )
            }
        }
    }
}

/// Runs one `frequencies` input. Returns whether a `Rope` was built.
pub fn check(bytes: &[u8]) -> bool {
    let case = read(bytes);
    let cfg = &case.config;
    let valid = cfg.validate();
    if let Err(e) = &valid {
        assert!(documented(e), "validate: {e:?}: {cfg:?}");
    }
    let scaling_ok = cfg.scaling.validate(cfg.rotary_dim);
    if let Err(e) = &scaling_ok {
        assert!(documented(e), "Scaling::validate: {e:?}: {cfg:?}");
    }
    let _ = (cfg.scaling.name(), cfg.scaling.depends_on_seq_len());
    if let Scaling::Yarn(p) = &cfg.scaling {
        let _ = (p.attention_factor(), p.correction_range(cfg.rotary_dim.max(1), cfg.theta));
    }
    if let Scaling::LongRope(p) = &cfg.scaling {
        let _ = p.attention_factor();
    }

    match Frequencies::new(cfg, case.seq_len) {
        Ok(f) => {
            assert!(valid.is_ok(), "Frequencies::new accepted an invalid config: {cfg:?}");
            check_frequencies(&f, cfg, &format!("Frequencies::new(seq_len {})", case.seq_len));
        }
        Err(e) => assert!(documented(&e), "Frequencies::new: {e:?}: {cfg:?}"),
    }
    // `Rope::new` = `Frequencies::new` of the first call and, for the length-dependent
    // methods, of the longest call.
    let mut want = Frequencies::new(cfg, 0).map(|_| ());
    if want.is_ok() && cfg.scaling.depends_on_seq_len() {
        want = Frequencies::new(cfg, 1 << 32).map(|_| ());
    }
    let rope = Rope::new(cfg.clone());
    assert_eq!(
        rope.as_ref().map(|_| ()).map_err(|e| *e),
        want,
        "Rope::new against Frequencies::new: {cfg:?}"
    );
    let Ok(rope) = rope else { return false };
    check_frequencies(&rope.frequencies(), cfg, "Rope::frequencies");
    match rope.frequencies_at(case.seq_len) {
        Ok(f) => check_frequencies(&f, cfg, "frequencies_at"),
        Err(e) => assert!(documented(&e), "frequencies_at({}): {e:?}: {cfg:?}", case.seq_len),
    }
    let positions = [0, 1, case.position, u32::MAX];
    check_rope(&rope, &positions, "Rope");
    // The other angle mode of the same configuration.
    let other = match cfg.angle_mode {
        AngleMode::HfCompatible => AngleMode::Exact,
        _ => AngleMode::HfCompatible,
    };
    let alt = Rope::new(cfg.clone().with_angle_mode(other)).expect("the angle mode does not affect validity");
    check_rope(&alt, &positions, "Rope (other angle mode)");

    if let Some(t) = &case.hf_inv_freq {
        match rope.clone().with_hf_inv_freq(t) {
            Ok(r) => {
                assert!(r.frequencies().has_caller_inv_freq_f32());
                check_rope(&r, &positions, "with_hf_inv_freq");
            }
            Err(e) => assert!(
                matches!(e, RopeError::InvFreqLength { .. } | RopeError::InvalidScalingParameter { .. }),
                "with_hf_inv_freq: {e:?}"
            ),
        }
    }
    true
}

/// Writes an input for a configuration that [`read`] decodes back: `head_dim`,
/// `rotary_dim`, `theta`, then `method` (0..9) and its parameters as raw values.
pub struct FreqSeed(pub Seed);

impl FreqSeed {
    pub fn new(
        head_dim: usize,
        rotary_dim: usize,
        interleaved: bool,
        hf: bool,
        theta: f64,
        method: u8,
    ) -> Self {
        let mut s = Seed::default();
        s.u16(0xF000 + head_dim as u16).u16(0xF000 + rotary_dim as u16).bool(interleaved).bool(hf);
        let mut f = FreqSeed(s);
        f.f64(theta);
        f.0.u8(method);
        f
    }

    /// A raw f64 (not from the palette).
    pub fn f64(&mut self, v: f64) -> &mut Self {
        self.0.u8(0xFF).u64(v.to_bits());
        self
    }

    pub fn u64(&mut self, v: u64) -> &mut Self {
        self.0.u8(0xFF).u64(v);
        self
    }

    pub fn bool(&mut self, v: bool) -> &mut Self {
        self.0.bool(v);
        self
    }

    pub fn u8(&mut self, v: u8) -> &mut Self {
        self.0.u8(v);
        self
    }

    /// A per-pair array of exactly these values.
    pub fn array(&mut self, v: &[f64]) -> &mut Self {
        self.0.u8(0).bool(false);
        for &x in v {
            self.f64(x);
        }
        self
    }

    /// `seq_len`, position, no caller table.
    pub fn finish(mut self, seq_len: u64, position: u32) -> Vec<u8> {
        self.u64(seq_len);
        self.0.u32(position).bool(false);
        self.0 .0
    }
}
