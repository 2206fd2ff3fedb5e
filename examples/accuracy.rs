//! Accuracy of the cos/sin rows and of rotated unit vectors, against an f64 reference, at
//! positions around 2^10 ... 2^31, for theta 1e4 and 5e5 (head_dim = rotary_dim = 128,
//! `HalfSplit`, f32).
//!
//! Run: `cargo run --release --example accuracy` (prints a markdown table).
//!
//! Methods:
//! - `exact`: this crate, `AngleMode::Exact` (on-the-fly generator).
//! - `hf`: this crate, `AngleMode::HfCompatible` with its own f32 `inv_freq` table: the angle
//!   is `f32(p) * inv_freq_f32` rounded in f32, as transformers forms it.
//! - `ggml`: ggml's CPU rope cache (`ggml_rope_cache_init` in `ggml-cpu/ops.cpp`):
//!   `theta_scale = powf(base, -2/n_dims)`, `theta = (float) p`, then per pair
//!   `cos = cosf(theta)`, `sin = sinf(theta)`, `theta *= theta_scale` in f32.
//!
//! The reference is `cos(p * inv_freq)` of the exact real product of the position and the
//! f64 `inv_freq` (error-free product, reduced modulo 2π in double-double), and for
//! rotated vectors the same rotation carried out in f64 on the same f32 input. Errors are
//! the max absolute error over 512 positions around each center and all 64 frequencies (for
//! vectors: over all 128 components of a unit vector).

use rope_kernels::{AngleMode, ApplyOptions, HeadsMut, Rope, RopeConfig, View};

const HEAD_DIM: usize = 128;
const PAIRS: usize = HEAD_DIM / 2;
const TWO_PI: [f64; 3] = [std::f64::consts::TAU, 2.4492935982947064e-16, -5.989539619436679e-33];

fn two_prod(a: f64, b: f64) -> (f64, f64) {
    let h = a * b;
    (h, a.mul_add(b, -h))
}

/// cos and sin of the exact product `p * f`, reduced modulo 2π with a three-part 2π.
fn reference(p: u32, f: f64) -> (f64, f64) {
    let (h, l) = two_prod(f64::from(p), f);
    let k = (h / TWO_PI[0]).round_ties_even();
    let (m0, e0) = two_prod(k, TWO_PI[0]);
    let (m1, e1) = two_prod(k, TWO_PI[1]);
    // h - m0 is exact (Sterbenz); the rest are small corrections.
    let r = (h - m0) + (((l - e0) - m1) - (e1 + k * TWO_PI[2]));
    (r.cos(), r.sin())
}

/// A fixed unit vector of f32 components.
fn unit_vector() -> Vec<f32> {
    let mut state = 0x2545_F491_4F6C_DD1Du64;
    let raw: Vec<f64> = (0..HEAD_DIM)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 11) as f64 / (1u64 << 53) as f64 - 0.5
        })
        .collect();
    let norm = raw.iter().map(|x| x * x).sum::<f64>().sqrt();
    raw.iter().map(|x| (x / norm) as f32).collect()
}

/// Max |error| of one row and of the vector rotated with it, against the reference.
#[derive(Default, Clone, Copy)]
struct Errors {
    cos: f64,
    sin: f64,
    vector: f64,
}

impl Errors {
    fn update(&mut self, p: u32, inv_freq: &[f64], cos: &[f32], sin: &[f32], x: &[f32], y: &[f32]) {
        for i in 0..PAIRS {
            let (c, s) = reference(p, inv_freq[i]);
            self.cos = self.cos.max((f64::from(cos[i]) - c).abs());
            self.sin = self.sin.max((f64::from(sin[i]) - s).abs());
            let (x0, x1) = (f64::from(x[i]), f64::from(x[i + PAIRS]));
            let (y0, y1) = (x0 * c - x1 * s, x1 * c + x0 * s);
            self.vector =
                self.vector.max((f64::from(y[i]) - y0).abs()).max((f64::from(y[i + PAIRS]) - y1).abs());
        }
    }
}

/// The crate's rows (from `fill_table`) and vectors (from `apply`, on the fly).
fn crate_errors(theta: f64, mode: AngleMode, positions: &[u32], x: &[f32]) -> Errors {
    let rope = Rope::new(RopeConfig::new(HEAD_DIM, theta).with_angle_mode(mode)).unwrap();
    let inv_freq = rope.frequencies().inv_freq().to_vec();
    let mut e = Errors::default();
    let (mut cos, mut sin) = ([0.0f32; PAIRS], [0.0f32; PAIRS]);
    for &p in positions {
        rope.fill_table(p, &mut cos, &mut sin).unwrap();
        let mut y = x.to_vec();
        rope.apply(HeadsMut::new(&mut y, View::token_major(1, 1, HEAD_DIM)), &ApplyOptions::start(p))
            .unwrap();
        e.update(p, &inv_freq, &cos, &sin, x, &y);
    }
    e
}

/// ggml's accumulated-theta rows, and vectors rotated with them in f32 (the same pair
/// formula as the crate: `y0 = x0 c - x1 s`, `y1 = x1 c + x0 s`).
fn ggml_errors(theta: f64, positions: &[u32], x: &[f32]) -> Errors {
    let rope = Rope::new(RopeConfig::new(HEAD_DIM, theta)).unwrap();
    let inv_freq = rope.frequencies().inv_freq().to_vec();
    let theta_scale = (theta as f32).powf(-2.0 / HEAD_DIM as f32);
    let mut e = Errors::default();
    let (mut cos, mut sin) = ([0.0f32; PAIRS], [0.0f32; PAIRS]);
    for &p in positions {
        let mut t = p as f32;
        for i in 0..PAIRS {
            cos[i] = t.cos();
            sin[i] = t.sin();
            t *= theta_scale;
        }
        let mut y = x.to_vec();
        for i in 0..PAIRS {
            let (x0, x1) = (x[i], x[i + PAIRS]);
            y[i] = (x0 * cos[i]) - (x1 * sin[i]);
            y[i + PAIRS] = (x1 * cos[i]) + (x0 * sin[i]);
        }
        e.update(p, &inv_freq, &cos, &sin, x, &y);
    }
    e
}

fn main() {
    let x = unit_vector();
    println!("| theta | positions | method | max abs err cos | max abs err sin | max abs err rotated unit vector |");
    println!("|---|---|---|---|---|---|");
    for theta in [1e4, 5e5] {
        for e in [10, 14, 17, 20, 24, 31] {
            let center = 1u64 << e;
            let positions: Vec<u32> = (center - 256..center + 256).map(|p| p as u32).collect();
            let rows = [
                ("exact", crate_errors(theta, AngleMode::Exact, &positions, &x)),
                ("hf", crate_errors(theta, AngleMode::HfCompatible, &positions, &x)),
                ("ggml", ggml_errors(theta, &positions, &x)),
            ];
            for (name, r) in rows {
                println!(
                    "| {theta:.0e} | 2^{e} ± 256 | {name} | {:.2e} | {:.2e} | {:.2e} |",
                    r.cos, r.sin, r.vector
                );
            }
        }
    }
}
