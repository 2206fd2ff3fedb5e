//! The same bits on every architecture (issue 16). Fixed inputs go through the Rust API
//! and the C ABI, and the output bits of each part are hashed to a constant computed on
//! x86-64 and checked in here; every target must reproduce them: x86-64 and aarch64
//! natively or under qemu-user (`.ci/stages/10-aarch64.sh`), big-endian s390x and riscv64
//! under qemu-user (`.ci/stages/15-foreign-arch.sh`). `tests/tiers/` compares the tiers
//! of one machine with each other; this file compares machines.
//!
//! The hash is FNV-1a (64 bits) over each value's bits in little-endian byte order, so it
//! is the same whatever the byte order of the machine computing it. Each part has its own
//! constant, so a mismatch names what differs. After a deliberate change of the results,
//! run `cargo test -p rope-kernels-workspace-tests --test cross_arch -- --nocapture` on x86-64 and copy the printed values.
//!
//! What this covers: f64 frequencies (every scaling family here), f32 cos/sin tables,
//! f32/f16/bf16 rotation in both layouts, both angle modes, forward and inverse, with
//! NaN, infinities, signed zeros and subnormals among the inputs, on every tier the
//! machine has (scalar and portable everywhere); the same rotations through the C ABI;
//! sinusoidal tables and adds, and ALiBi slopes.

use rope_kernels::dispatch::{available_tiers, Tier};
use rope_kernels::encodings::{alibi_slopes, Sinusoidal, SinusoidalLayout};
use rope_kernels::{
    bf16, f16, AngleMode, ApplyOptions, Element, HeadsMut, PairLayout, Positions, Rope, RopeConfig, Scaling,
    View, YarnParams,
};
use rope_kernels_capi as c;

const TOKENS: usize = 8;
const HEADS: usize = 3;
/// Small and large positions, up to the last `u32`.
const POSITIONS: [u32; TOKENS] = [0, 1, 17, 4095, 131_071, 1_000_003, u32::MAX - 1, u32::MAX];

/// Values the element types must carry through or produce the same way: NaN (two
/// payloads), infinities, signed zeros, subnormals of all three types, the largest finite
/// values of f16 and f32, and values that round differently in f16 and bf16.
const SPECIALS: [u32; 14] = [
    0x7FC0_0000, // NaN
    0xFF81_2345, // -NaN with a payload
    0x7F80_0000, // +inf
    0xFF80_0000, // -inf
    0x0000_0000, // +0
    0x8000_0000, // -0
    0x0000_0001, // smallest f32 subnormal
    0x8040_0000, // -f32 subnormal (also a bf16 subnormal)
    0x3380_0000, // 2^-24: smallest f16 subnormal
    0x477F_E000, // 65504: largest f16
    0x7F7F_FFFF, // largest f32
    0x3F80_8000, // 1 + 2^-8: a bf16 tie
    0x3F80_1000, // 1 + 2^-11: an f16 tie
    0x4049_0FDB, // pi
];

/// FNV-1a, 64 bits, fed little-endian bytes.
struct Fnv(u64);

impl Fnv {
    fn new() -> Self {
        Fnv(0xCBF2_9CE4_8422_2325)
    }
    fn bytes(&mut self, b: &[u8]) {
        for &x in b {
            self.0 = (self.0 ^ u64::from(x)).wrapping_mul(0x0000_0100_0000_01B3);
        }
    }
    fn u32(&mut self, v: u32) {
        self.bytes(&v.to_le_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.bytes(&v.to_le_bytes());
    }
    fn f32s(&mut self, v: &[f32]) {
        v.iter().for_each(|x| self.u32(x.to_bits()));
    }
    fn f64s(&mut self, v: &[f64]) {
        v.iter().for_each(|x| self.u64(x.to_bits()));
    }
    fn elements<T: Element>(&mut self, v: &[T]) {
        v.iter().for_each(|x| self.u32(x.to_bits_u32()));
    }
}

/// Deterministic f32 inputs: multiples of 2^-21 in [-4, 4) (exact in f32; splitmix64),
/// every 11th value one of [`SPECIALS`].
fn inputs(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed;
    (0..n)
        .map(|i| {
            s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = s;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^= z >> 31;
            if i % 11 == 5 {
                f32::from_bits(SPECIALS[(z % SPECIALS.len() as u64) as usize])
            } else {
                (z >> 40) as f32 / (1u64 << 21) as f32 - 4.0
            }
        })
        .collect()
}

/// The configurations: both layouts, partial rotary_dim, odd head_dim, both angle modes,
/// and the scaling families (Llama 3.1, YaRN, linear, NTK-alpha, dynamic NTK).
fn configs() -> Vec<RopeConfig> {
    let llama3 = Scaling::Llama3 {
        factor: 8.0,
        low_freq_factor: 1.0,
        high_freq_factor: 4.0,
        original_max_position_embeddings: 8192,
    };
    vec![
        RopeConfig::new(128, 500_000.0).with_scaling(llama3),
        RopeConfig::new(96, 10_000.0).with_rotary_dim(64).with_layout(PairLayout::Interleaved),
        RopeConfig::new(64, 10_000.0)
            .with_layout(PairLayout::Interleaved)
            .with_scaling(Scaling::Yarn(YarnParams::new(40.0, 4096).with_mscale(0.707, 0.707))),
        RopeConfig::new(80, 10_000.0)
            .with_rotary_dim(32)
            .with_angle_mode(AngleMode::HfCompatible)
            .with_scaling(Scaling::Linear { factor: 2.0 }),
        RopeConfig::new(7, 1_000_000.0).with_rotary_dim(4).with_scaling(Scaling::NtkAlpha { alpha: 1000.0 }),
        RopeConfig::new(32, 10_000.0)
            .with_layout(PairLayout::Interleaved)
            .with_angle_mode(AngleMode::HfCompatible)
            .with_scaling(Scaling::DynamicNtk { factor: 2.0, max_position_embeddings: 2048 }),
    ]
}

/// The expected hashes, computed on x86-64 (see the top of the file).
const FREQUENCIES: u64 = 0x73D8_4011_DB3F_85B5;
const TABLES: u64 = 0x3CFD_DBBE_0842_A79C;
const ROTATE_F32: u64 = 0x3292_22E4_903C_ECF9;
const ROTATE_F16: u64 = 0x3168_F63E_A20D_1A5D;
const ROTATE_BF16: u64 = 0x3867_B3F9_D44E_BF8E;
const ENCODINGS: u64 = 0x8856_9432_ABA7_5E2E;

/// Compares with the constant, printing the value for a deliberate update.
fn check(part: &str, got: u64, want: u64) {
    println!("{part}: {got:#018X}");
    assert_eq!(got, want, "{part}: hash {got:#018X}, expected {want:#018X} (computed on x86-64)");
}

#[test]
fn frequencies_are_the_same_bits() {
    let mut h = Fnv::new();
    for cfg in configs() {
        let rope = Rope::new(cfg).unwrap();
        let f = rope.frequencies();
        h.f64s(f.inv_freq());
        h.f32s(f.inv_freq_f32());
        h.f64s(&[f.attention_factor()]);
        // The sequence-length dependent ones (dynamic NTK) past their original length.
        let long = rope.frequencies_at(1 << 20).unwrap();
        h.f64s(long.inv_freq());
        h.f64s(&[long.attention_factor()]);
    }
    check("frequencies", h.0, FREQUENCIES);
}

#[test]
fn cos_sin_tables_are_the_same_bits() {
    let mut h = Fnv::new();
    for cfg in configs() {
        let pairs = cfg.pairs();
        let table_hash = |tier: Tier| {
            let rope = Rope::new(cfg.clone()).unwrap().with_tier(tier).unwrap();
            let mut t = Fnv::new();
            for start in [0, 4093, 1_000_000, u32::MAX - 2] {
                let (mut cos, mut sin) = (vec![0.0; 3 * pairs], vec![0.0; 3 * pairs]);
                rope.fill_table(start, &mut cos, &mut sin).unwrap();
                t.f32s(&cos);
                t.f32s(&sin);
            }
            t.0
        };
        let oracle = table_hash(Tier::Scalar);
        for tier in available_tiers() {
            assert_eq!(table_hash(tier), oracle, "cos/sin tables: tier {tier} differs from scalar");
        }
        h.u64(oracle);
    }
    check("cos/sin tables", h.0, TABLES);
}

/// Rotates fixed inputs forward and back with every config on `tier`; hashes both results.
fn rotate_hash<T: Element>(tier: Tier) -> u64 {
    let mut h = Fnv::new();
    for (n, cfg) in configs().into_iter().enumerate() {
        let hd = cfg.head_dim;
        let rope = Rope::new(cfg).unwrap().with_tier(tier).unwrap();
        let mut x: Vec<T> = inputs(TOKENS * HEADS * hd, n as u64).into_iter().map(T::from_f32).collect();
        let view = View::token_major(TOKENS, HEADS, hd);
        rope.apply(HeadsMut::new(&mut x, view), &ApplyOptions::ids(&POSITIONS)).unwrap();
        h.elements(&x);
        rope.apply(HeadsMut::new(&mut x, view), &ApplyOptions::ids(&POSITIONS).inverse()).unwrap();
        h.elements(&x);
    }
    h.0
}

fn rotate_all_tiers<T: Element>(part: &str, want: u64) {
    let oracle = rotate_hash::<T>(Tier::Scalar);
    for tier in available_tiers() {
        assert_eq!(rotate_hash::<T>(tier), oracle, "{part}: tier {tier} differs from scalar");
    }
    check(part, oracle, want);
}

#[test]
fn rotation_f32_is_the_same_bits() {
    rotate_all_tiers::<f32>("rotate f32", ROTATE_F32);
}

#[test]
fn rotation_f16_is_the_same_bits() {
    rotate_all_tiers::<f16>("rotate f16", ROTATE_F16);
}

#[test]
fn rotation_bf16_is_the_same_bits() {
    rotate_all_tiers::<bf16>("rotate bf16", ROTATE_BF16);
}

/// The C ABI's `rope_config` for `cfg` (only the configurations of [`configs`]).
fn c_config(cfg: &RopeConfig) -> c::rope_config {
    let mut cc = std::mem::MaybeUninit::<c::rope_config>::uninit();
    // SAFETY: `cc` is writable for a whole `rope_config`.
    let s =
        unsafe { c::rope_config_init(cc.as_mut_ptr(), size_of::<c::rope_config>(), cfg.head_dim, cfg.theta) };
    assert_eq!(s, c::ROPE_OK);
    // SAFETY: `rope_config_init` returned `ROPE_OK`, so it wrote the whole struct.
    let mut cc = unsafe { cc.assume_init() };
    cc.rotary_dim = cfg.rotary_dim;
    cc.layout = match cfg.layout {
        PairLayout::HalfSplit => c::ROPE_LAYOUT_HALF_SPLIT,
        _ => c::ROPE_LAYOUT_INTERLEAVED,
    };
    cc.angle_mode = match cfg.angle_mode {
        AngleMode::Exact => c::ROPE_ANGLE_EXACT,
        _ => c::ROPE_ANGLE_HF_COMPATIBLE,
    };
    let s = &mut cc.scaling;
    match cfg.scaling {
        Scaling::None => {}
        Scaling::Llama3 { factor, low_freq_factor, high_freq_factor, original_max_position_embeddings } => {
            s.rope_type = c::ROPE_SCALING_LLAMA3;
            (s.factor, s.low_freq_factor, s.high_freq_factor) = (factor, low_freq_factor, high_freq_factor);
            s.original_max_position_embeddings = original_max_position_embeddings;
        }
        Scaling::Yarn(_) => {
            s.rope_type = c::ROPE_SCALING_YARN;
            (s.factor, s.original_max_position_embeddings) = (40.0, 4096);
            (s.has_mscale, s.mscale, s.has_mscale_all_dim, s.mscale_all_dim) = (1, 0.707, 1, 0.707);
        }
        Scaling::Linear { factor } => (s.rope_type, s.factor) = (c::ROPE_SCALING_LINEAR, factor),
        Scaling::NtkAlpha { alpha } => (s.rope_type, s.alpha) = (c::ROPE_SCALING_NTK_ALPHA, alpha),
        Scaling::DynamicNtk { factor, max_position_embeddings } => {
            s.rope_type = c::ROPE_SCALING_DYNAMIC;
            (s.factor, s.max_position_embeddings) = (factor, max_position_embeddings);
        }
        _ => unreachable!("not in configs()"),
    }
    cc
}

type CApply = unsafe extern "C" fn(
    *const c::rope_t,
    *const c::rope_tensor,
    *const c::rope_tensor,
    *const c::rope_apply_opts,
) -> c::rope_status;

/// [`rotate_hash`] through the C ABI (`rope_new`, `rope_apply_*`, `rope_free`), with the
/// process-wide tier.
fn c_rotate_hash<T: Element>(apply: CApply) -> u64 {
    let mut h = Fnv::new();
    for (n, cfg) in configs().into_iter().enumerate() {
        let hd = cfg.head_dim;
        let cc = c_config(&cfg);
        let mut rope = std::ptr::null_mut();
        // SAFETY: `cc` is a valid `rope_config` without arrays; `rope` is writable.
        assert_eq!(unsafe { c::rope_new(&cc, &mut rope) }, c::ROPE_OK, "rope_new ({cfg:?})");
        let mut x: Vec<T> = inputs(TOKENS * HEADS * hd, n as u64).into_iter().map(T::from_f32).collect();
        for direction in [c::ROPE_FORWARD, c::ROPE_INVERSE] {
            let q = c::rope_tensor {
                data: x.as_mut_ptr().cast(),
                len: x.len(),
                view: c::rope_view {
                    tokens: TOKENS,
                    heads: HEADS,
                    token_stride: HEADS * hd,
                    head_stride: hd,
                },
            };
            let opts = c::rope_apply_opts {
                struct_size: size_of::<c::rope_apply_opts>(),
                direction,
                position_mode: c::ROPE_POSITIONS_IDS,
                start: 0,
                position_ids: POSITIONS.as_ptr(),
                position_ids_len: POSITIONS.len(),
                cos_sin: c::ROPE_COS_SIN_ON_THE_FLY,
                cos: std::ptr::null(),
                sin: std::ptr::null(),
                table_len: 0,
            };
            // SAFETY: a live handle; `q` describes `x` (T is the call's element type, a
            // `u16` pattern for the half types), no k, `opts` reads `POSITIONS`.
            assert_eq!(unsafe { apply(rope, &q, std::ptr::null(), &opts) }, c::ROPE_OK);
            h.elements(&x);
        }
        // SAFETY: the handle from `rope_new`, freed once.
        assert_eq!(unsafe { c::rope_free(rope) }, c::ROPE_OK);
    }
    h.0
}

#[test]
fn c_abi_rotation_is_the_same_bits() {
    check("C ABI rotate f32", c_rotate_hash::<f32>(c::rope_apply_f32), ROTATE_F32);
    check("C ABI rotate f16", c_rotate_hash::<f16>(c::rope_apply_f16), ROTATE_F16);
    check("C ABI rotate bf16", c_rotate_hash::<bf16>(c::rope_apply_bf16), ROTATE_BF16);
}

#[test]
fn encodings_are_the_same_bits() {
    let sinusoidal_hash = |tier: Tier| {
        let mut t = Fnv::new();
        for layout in [SinusoidalLayout::Interleaved, SinusoidalLayout::Concatenated] {
            let pe = Sinusoidal::with_base(77, layout, 500.0).unwrap().with_tier(tier).unwrap();
            let mut table = vec![0.0f32; 3 * 77];
            pe.fill_table(u32::MAX - 2, &mut table).unwrap();
            t.f32s(&table);
            let x: Vec<f32> = inputs(TOKENS * 77, 99);
            let mut xb: Vec<bf16> = x.iter().map(|&v| bf16::from_f32(v)).collect();
            let mut xf = x;
            pe.add_to(&mut xf, TOKENS, 77, Positions::Ids(&POSITIONS)).unwrap();
            pe.add_to(&mut xb, TOKENS, 77, Positions::Ids(&POSITIONS)).unwrap();
            t.f32s(&xf);
            t.elements(&xb);
        }
        t.0
    };
    let oracle = sinusoidal_hash(Tier::Scalar);
    for tier in available_tiers() {
        assert_eq!(sinusoidal_hash(tier), oracle, "sinusoidal: tier {tier} differs from scalar");
    }
    let mut h = Fnv::new();
    h.u64(oracle);
    for heads in [5, 8, 12] {
        let mut slopes = vec![0.0f32; heads];
        alibi_slopes(&mut slopes);
        h.f32s(&slopes);
    }
    check("encodings", h.0, ENCODINGS);
}

/// Which tiers this target has, and why: the cross-arch stage checks this line to know the
/// suite really ran there.
#[test]
fn tiers_of_this_target() {
    let tiers: Vec<Tier> = available_tiers().collect();
    let endian = if cfg!(target_endian = "little") { "little" } else { "big" };
    println!("target {} ({endian}-endian): tiers {tiers:?}", std::env::consts::ARCH);
    assert_eq!(tiers[..2], [Tier::Scalar, Tier::Portable]);
    if cfg!(target_arch = "x86_64") {
        assert!(tiers[2..].iter().all(|t| matches!(t, Tier::Avx2 | Tier::Avx512)));
    } else if cfg!(all(target_arch = "aarch64", target_endian = "little")) {
        assert_eq!(tiers[2..], [Tier::Neon]);
    } else {
        // Big-endian (s390x, powerpc64, aarch64_be) and every other ISA (riscv64): only the
        // tiers written without byte-order assumptions. NEON reads a bf16 pair as one
        // little-endian 32-bit word and is compiled out on aarch64_be; the portable tier
        // builds that word from the two elements (its `load_bf16_pairs`).
        assert_eq!(tiers.len(), 2, "{tiers:?}");
    }
}
