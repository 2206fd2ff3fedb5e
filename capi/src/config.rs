//! `rope_config`: the plain C description of a RoPE configuration, and its conversion to
//! a validated [`RopeConfig`].

use core::ptr::NonNull;

use rope_kernels::{
    AngleMode, LongRopeRef, PairLayout, Rope, RopeError, RopeParams, ScalingRef, YarnParams, MAX_PAIRS,
};

use crate::boundary::{flag, guard, read_versioned, required, rust, Buf, R};
use crate::status::*;

/// Pair layout (`rope_config.layout`).
pub type rope_layout = u32;
/// Pairs `(i, i + rotary_dim / 2)`: GPT-NeoX, Llama, Hugging Face `rotate_half`.
pub const ROPE_LAYOUT_HALF_SPLIT: rope_layout = 0;
/// Pairs `(2i, 2i + 1)`: GPT-J, ggml `GGML_ROPE_TYPE_NORM`, DeepSeek-V2's rotary part.
pub const ROPE_LAYOUT_INTERLEAVED: rope_layout = 1;

/// How the angle `position * inv_freq` is formed (`rope_config.angle_mode`).
pub type rope_angle_mode = u32;
/// From the f64 `inv_freq`: accurate at every position.
pub const ROPE_ANGLE_EXACT: rope_angle_mode = 0;
/// `(float)position * inv_freq_f32` rounded in f32, as Hugging Face transformers forms it.
pub const ROPE_ANGLE_HF_COMPATIBLE: rope_angle_mode = 1;

/// Frequency scaling method (`rope_scaling.rope_type`). The formulas and their sources
/// are documented on the Rust enum `rope_kernels::Scaling`.
pub type rope_scaling_type = u32;
/// No scaling (HF `"default"`). Parameters: none.
pub const ROPE_SCALING_NONE: rope_scaling_type = 0;
/// Linear position interpolation (HF `"linear"`). Parameters: `factor`.
pub const ROPE_SCALING_LINEAR: rope_scaling_type = 1;
/// Dynamic NTK (HF `"dynamic"`), recomputed per call from its length. Parameters:
/// `factor`, `max_position_embeddings`.
pub const ROPE_SCALING_DYNAMIC: rope_scaling_type = 2;
/// Static NTK-aware scaling by `alpha` (HunYuan). Parameters: `alpha`.
pub const ROPE_SCALING_NTK_ALPHA: rope_scaling_type = 3;
/// YaRN (HF `"yarn"`). Parameters: `factor`, `original_max_position_embeddings`,
/// `beta_fast`, `beta_slow`, `truncate`, and the optional `mscale`, `mscale_all_dim`,
/// `attention_factor` (each with its `has_` flag).
pub const ROPE_SCALING_YARN: rope_scaling_type = 4;
/// Llama 3.1 (HF `"llama3"`). Parameters: `factor`, `low_freq_factor`,
/// `high_freq_factor`, `original_max_position_embeddings`.
pub const ROPE_SCALING_LLAMA3: rope_scaling_type = 5;
/// LongRoPE (HF `"longrope"`). Parameters: `short_factor`, `long_factor` (arrays of
/// `rotary_dim / 2`), `original_max_position_embeddings`, `factor`, optional
/// `attention_factor`.
pub const ROPE_SCALING_LONGROPE: rope_scaling_type = 6;
/// Proportional RoPE (Gemma; HF `"proportional"`). Parameters: `factor`,
/// `partial_rotary_factor`.
pub const ROPE_SCALING_PROPORTIONAL: rope_scaling_type = 7;
/// Per-pair frequency divisors (ggml `freq_factors`). Parameters: `freq_factors` (array
/// of `rotary_dim / 2`).
pub const ROPE_SCALING_FREQ_FACTORS: rope_scaling_type = 8;

/// Scaling method and parameters. Only the fields of `rope_type` are read (see each
/// `ROPE_SCALING_*`); the others, pointers included, are ignored. Optional parameters have
/// a `has_` flag (0 absent, 1 present; any other value is `ROPE_INVALID_ARGUMENT`): NaN
/// never means "absent", it is `ROPE_INVALID_SCALING_PARAMETER`. Arrays are a pointer and
/// an element count (`double`s), copied by `rope_init`/`rope_new`: they need not outlive
/// the call; a count of 0 allows a NULL pointer (and then fails the length check).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct rope_scaling {
    /// The method, a `ROPE_SCALING_*` value.
    pub rope_type: rope_scaling_type,
    /// YaRN: round the correction range outwards to whole dimensions (1, the default; 0
    /// for gpt-oss).
    pub truncate: u8,
    /// YaRN: `mscale` is set.
    pub has_mscale: u8,
    /// YaRN: `mscale_all_dim` is set.
    pub has_mscale_all_dim: u8,
    /// YaRN, LongRoPE: `attention_factor` is set (else it is derived).
    pub has_attention_factor: u8,
    /// Context extension factor (HF `factor`): linear, dynamic, YaRN, Llama 3, LongRoPE,
    /// proportional. Finite and > 0.
    pub factor: f64,
    /// Dynamic NTK: HF `max_position_embeddings`, > 0.
    pub max_position_embeddings: u64,
    /// YaRN, Llama 3, LongRoPE: the pretraining context length, > 0.
    pub original_max_position_embeddings: u64,
    /// NTK alpha: finite and > 0.
    pub alpha: f64,
    /// YaRN `beta_fast` (default 32), finite, > `beta_slow`.
    pub beta_fast: f64,
    /// YaRN `beta_slow` (default 1), finite and > 0.
    pub beta_slow: f64,
    /// YaRN (DeepSeek) `mscale`, when `has_mscale`.
    pub mscale: f64,
    /// YaRN (DeepSeek) `mscale_all_dim`, when `has_mscale_all_dim`.
    pub mscale_all_dim: f64,
    /// YaRN, LongRoPE: explicit attention factor, when `has_attention_factor`.
    pub attention_factor: f64,
    /// Llama 3 `low_freq_factor` (default 1), finite, > 0, ≤ `high_freq_factor`.
    pub low_freq_factor: f64,
    /// Llama 3 `high_freq_factor` (default 4), finite.
    pub high_freq_factor: f64,
    /// Proportional: share of the pairs that rotate, in (0, 1] (default 1).
    pub partial_rotary_factor: f64,
    /// LongRoPE: `short_factor`, `short_factor_len` values.
    pub short_factor: *const f64,
    /// Number of values at `short_factor`.
    pub short_factor_len: usize,
    /// LongRoPE: `long_factor`, `long_factor_len` values.
    pub long_factor: *const f64,
    /// Number of values at `long_factor`.
    pub long_factor_len: usize,
    /// ggml freq_factors: `freq_factors_len` values.
    pub freq_factors: *const f64,
    /// Number of values at `freq_factors`.
    pub freq_factors_len: usize,
}

/// A RoPE configuration. Fill it with `rope_config_init`, then set the fields. Versioned:
/// `struct_size` must be `sizeof(rope_config)` as the caller compiled it (set by
/// `rope_config_init`), so later versions can append fields.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct rope_config {
    /// `sizeof(rope_config)`.
    pub struct_size: usize,
    /// Elements per head; dimensions `rotary_dim..head_dim` pass through.
    pub head_dim: usize,
    /// Rotated dimensions: even, `0 < rotary_dim <= head_dim`, `<= 512`.
    pub rotary_dim: usize,
    /// A `ROPE_LAYOUT_*` value.
    pub layout: rope_layout,
    /// A `ROPE_ANGLE_*` value.
    pub angle_mode: rope_angle_mode,
    /// The base of `inv_freq[i] = theta^(-2i / rotary_dim)` (HF `rope_theta`); finite, > 0.
    pub theta: f64,
    /// Frequency scaling.
    pub scaling: rope_scaling,
    /// Optional: the caller's f32 `inv_freq` table (e.g. exported from transformers),
    /// `rotary_dim / 2` values, finite and >= 0. When `inv_freq_len > 0` the handle uses
    /// it verbatim and the angle mode becomes `ROPE_ANGLE_HF_COMPATIBLE`. Copied.
    pub inv_freq: *const f32,
    /// Number of values at `inv_freq`; 0: no table (the pointer is ignored).
    pub inv_freq_len: usize,
}

/// The array `(p, len)` of a scaling parameter `name`, checked (any pointer when `len` is
/// 0) and borrowed for the call; too long for any `rotary_dim` is the Rust crate's error.
///
/// # Safety
/// A checked `p` is readable for `len` doubles that nobody writes during the call.
unsafe fn doubles<'a>(p: *const f64, len: usize, name: &'static str) -> R<&'a [f64]> {
    if len > MAX_PAIRS {
        // The Rust crate's answer, given before any slice of that length exists.
        return Err(from_error(RopeError::InvalidScalingParameter { name }));
    }
    let buf = Buf::new(p, len)?;
    // SAFETY: checked by `Buf::new`; readable and unchanged during the call (the contract
    // of `rope_scaling`); copied before the call returns.
    Ok(unsafe { buf.slice() })
}

/// The Rust scaling of a `rope_scaling`.
///
/// # Safety
/// The arrays of `rope_type` are readable for their counts (the contract of `rope_scaling`).
unsafe fn scaling<'a>(s: &rope_scaling) -> R<ScalingRef<'a>> {
    let opt = |has: u8, v: f64| flag(has).map(|h| h.then_some(v));
    Ok(match s.rope_type {
        ROPE_SCALING_NONE => ScalingRef::None,
        ROPE_SCALING_LINEAR => ScalingRef::Linear { factor: s.factor },
        ROPE_SCALING_DYNAMIC => {
            ScalingRef::DynamicNtk { factor: s.factor, max_position_embeddings: s.max_position_embeddings }
        }
        ROPE_SCALING_NTK_ALPHA => ScalingRef::NtkAlpha { alpha: s.alpha },
        ROPE_SCALING_YARN => {
            let mut p = YarnParams::new(s.factor, s.original_max_position_embeddings)
                .with_beta(s.beta_fast, s.beta_slow)
                .with_truncate(flag(s.truncate)?);
            p.mscale = opt(s.has_mscale, s.mscale)?;
            p.mscale_all_dim = opt(s.has_mscale_all_dim, s.mscale_all_dim)?;
            p.attention_factor = opt(s.has_attention_factor, s.attention_factor)?;
            ScalingRef::Yarn(p)
        }
        ROPE_SCALING_LLAMA3 => ScalingRef::Llama3 {
            factor: s.factor,
            low_freq_factor: s.low_freq_factor,
            high_freq_factor: s.high_freq_factor,
            original_max_position_embeddings: s.original_max_position_embeddings,
        },
        ROPE_SCALING_LONGROPE => {
            // SAFETY: this function's contract.
            let short = unsafe { doubles(s.short_factor, s.short_factor_len, "short_factor") }?;
            // SAFETY: this function's contract.
            let long = unsafe { doubles(s.long_factor, s.long_factor_len, "long_factor") }?;
            let attention_factor = opt(s.has_attention_factor, s.attention_factor)?;
            ScalingRef::LongRope(LongRopeRef::new(
                short,
                long,
                s.original_max_position_embeddings,
                s.factor,
                attention_factor,
            ))
        }
        ROPE_SCALING_PROPORTIONAL => {
            ScalingRef::Proportional { factor: s.factor, partial_rotary_factor: s.partial_rotary_factor }
        }
        ROPE_SCALING_FREQ_FACTORS => {
            // SAFETY: this function's contract.
            ScalingRef::FreqFactors(unsafe { doubles(s.freq_factors, s.freq_factors_len, "freq_factors") }?)
        }
        _ => return Err(ROPE_UNKNOWN_ENUM),
    })
}

/// Reads the configuration a `rope_config` describes (boundary checks first: struct size,
/// enums, flags, array pointers), its arrays borrowed for the call, and hands it with the
/// caller f32 `inv_freq` table (if any) to `body`. Nothing is copied: `rope_init` computes
/// the frequencies straight into the handle storage (issue 13).
///
/// # Safety
/// `cfg` as documented on `rope_config`: NULL, or readable for `struct_size` bytes, with
/// arrays readable for their counts and unchanged during the call.
pub(crate) unsafe fn with_params<T>(
    cfg: *const rope_config,
    body: impl FnOnce(&RopeParams<'_>, Option<&[f32]>) -> R<T>,
) -> R<T> {
    // SAFETY: the caller's contract; every field of `rope_config` accepts any bits.
    let c = unsafe { read_versioned(cfg) }?;
    let layout = match c.layout {
        ROPE_LAYOUT_HALF_SPLIT => PairLayout::HalfSplit,
        ROPE_LAYOUT_INTERLEAVED => PairLayout::Interleaved,
        _ => return Err(ROPE_UNKNOWN_ENUM),
    };
    let angle_mode = match c.angle_mode {
        ROPE_ANGLE_EXACT => AngleMode::Exact,
        ROPE_ANGLE_HF_COMPATIBLE => AngleMode::HfCompatible,
        _ => return Err(ROPE_UNKNOWN_ENUM),
    };
    let inv_freq = if c.inv_freq_len > MAX_PAIRS {
        // What `with_hf_inv_freq` answers, without making a slice of that length.
        None
    } else {
        let buf = Buf::new(c.inv_freq, c.inv_freq_len)?;
        // SAFETY: checked by `Buf::new`; readable and unchanged during the call (the contract).
        Some(unsafe { buf.slice() })
    };
    let mut params = RopeParams::new(c.head_dim, c.theta);
    params.rotary_dim = c.rotary_dim;
    params.layout = layout;
    params.angle_mode = angle_mode;
    // SAFETY: the caller's contract covers the arrays.
    params.scaling = unsafe { scaling(&c.scaling) }?;
    match inv_freq {
        None => {
            // The configuration's own errors first, as `Rope::new` then `with_hf_inv_freq`.
            rust(params.validate())?;
            let pairs = params.pairs();
            rust(Rope::check_in(&params, None))?;
            Err(from_error(RopeError::InvFreqLength { expected: pairs, len: c.inv_freq_len }))
        }
        Some([]) => body(&params, None),
        Some(table) => body(&params, Some(table)),
    }
}

/// The defaults written by `rope_config_init` (besides `head_dim`, `theta`).
fn defaults(head_dim: usize, theta: f64) -> rope_config {
    rope_config {
        struct_size: core::mem::size_of::<rope_config>(),
        head_dim,
        rotary_dim: head_dim,
        layout: ROPE_LAYOUT_HALF_SPLIT,
        angle_mode: ROPE_ANGLE_EXACT,
        theta,
        scaling: rope_scaling {
            rope_type: ROPE_SCALING_NONE,
            truncate: 1,
            has_mscale: 0,
            has_mscale_all_dim: 0,
            has_attention_factor: 0,
            factor: 1.0,
            max_position_embeddings: 0,
            original_max_position_embeddings: 0,
            alpha: 1.0,
            beta_fast: 32.0,
            beta_slow: 1.0,
            mscale: 1.0,
            mscale_all_dim: 0.0,
            attention_factor: 1.0,
            low_freq_factor: 1.0,
            high_freq_factor: 4.0,
            partial_rotary_factor: 1.0,
            short_factor: core::ptr::null(),
            short_factor_len: 0,
            long_factor: core::ptr::null(),
            long_factor_len: 0,
            freq_factors: core::ptr::null(),
            freq_factors_len: 0,
        },
        inv_freq: core::ptr::null(),
        inv_freq_len: 0,
    }
}

/// Fills `*cfg` like the Rust `RopeConfig::new(head_dim, theta)`: `rotary_dim = head_dim`,
/// `ROPE_LAYOUT_HALF_SPLIT`, `ROPE_ANGLE_EXACT`, `ROPE_SCALING_NONE`, no `inv_freq` table;
/// the scaling parameters get their usual defaults (`factor` 1, `alpha` 1, `beta_fast` 32,
/// `beta_slow` 1, `truncate` 1, `low_freq_factor` 1, `high_freq_factor` 4,
/// `partial_rotary_factor` 1, every `has_` flag 0, every array NULL with count 0).
/// Nothing is validated here (`rope_config_validate` does that).
///
/// `struct_size` is `sizeof(rope_config)` as the caller compiled it.
///
/// Errors: `ROPE_NULL_POINTER`, `ROPE_MISALIGNED_POINTER` (`cfg`),
/// `ROPE_UNSUPPORTED_STRUCT_SIZE`.
///
/// # Safety
/// `cfg` is NULL or writable for `struct_size` bytes.
#[no_mangle]
pub unsafe extern "C" fn rope_config_init(
    cfg: *mut rope_config,
    struct_size: usize,
    head_dim: usize,
    theta: f64,
) -> rope_status {
    guard(|| {
        let p: NonNull<rope_config> = required(cfg)?;
        if struct_size != core::mem::size_of::<rope_config>() {
            return Err(ROPE_UNSUPPORTED_STRUCT_SIZE);
        }
        // SAFETY: non-NULL, aligned, writable for a whole `rope_config` (the contract and
        // `struct_size`).
        unsafe { p.as_ptr().write(defaults(head_dim, theta)) };
        Ok(())
    })
}

/// Checks a configuration as `rope_init` would, without a handle: the boundary (struct
/// size, enums, flags, array pointers) and every rule of the Rust crate, including the
/// frequencies (e.g. YaRN with `theta == 1`).
///
/// Errors: `ROPE_NULL_POINTER`, `ROPE_MISALIGNED_POINTER`, `ROPE_UNSUPPORTED_STRUCT_SIZE`,
/// `ROPE_UNKNOWN_ENUM`, `ROPE_INVALID_ARGUMENT`, and the configuration errors 1..=7.
///
/// # Safety
/// `cfg` is NULL or a readable `rope_config` whose arrays are readable for their counts.
#[no_mangle]
pub unsafe extern "C" fn rope_config_validate(cfg: *const rope_config) -> rope_status {
    // SAFETY: the caller's contract, passed on.
    guard(|| unsafe { with_params(cfg, |p, t| rust(Rope::check_in(p, t)).map(drop)) })
}
