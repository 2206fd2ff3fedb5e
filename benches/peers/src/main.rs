//! rope-kernels side by side with its peers, in one process, on the shapes of the SIMD
//! issue (decode: 1 token, 32 q + 8 k heads; prefill: 512 tokens, 32 heads; long: 4096
//! tokens, 32 heads; head_dim 128, rotary_dim 128, theta 500000), f32 and bf16:
//!
//! - rope-kernels, single thread, cos/sin from a cached table (`Rope::build_cache`): in place,
//!   half-split on BSHD (`[t][h][d]`) and on BHSD (`[h][t][d]`), interleaved on BHSD, and out
//!   of place (`apply_into`) on BSHD; cos/sin generated on the fly (no table); and
//!   `par_apply` (feature `rayon`) on a pool of one thread per core.
//! - candle-nn 0.11 CPU `rotary_emb::rope` (half-split, x `(b, h, t, d)`, cos/sin `(t, d/2)`),
//!   `rope_i` (interleaved pairs, same shapes) and `rope_thd` (half-split, x `(b, t, h, d)`),
//!   each on one thread and on the same pool of one thread per core. They allocate and return
//!   a new tensor, as candle does.
//! - a straightforward scalar implementation of the Hugging Face formula
//!   `x * cos + rotate_half(x) * sin` with full-width `(t, d)` cos/sin rows
//!   (`emb = cat(freqs, freqs)`), written into a preallocated output: what a user writes by
//!   hand.
//! - the roofline: an in-place `x *= c` pass over a buffer of the same size and type, through
//!   the crate's vectorised load/convert/store path for the active tier.
//!
//! Single thread for candle: candle's CPU rope kernels parallelise with rayon `par_chunks`
//! on the *current* rayon pool, so they run inside `ThreadPool::install` of a pool built with
//! `num_threads(1)` (the 1-thread rows) or `num_threads(cores)` (the `×N threads` rows). The
//! global pool is never used. rope-kernels' single-thread rows call `Rope::apply*` on the
//! main thread, which never touches rayon.
//!
//! Before timing, the outputs of candle (all three functions, f32 and bf16) and of the
//! hand-written HF formula are checked against rope-kernels on the prefill shape: f32 within
//! one f32 rounding of each product and the sum, bf16 within bf16 rounding (candle computes
//! in bf16, each operation rounded).
//!
//! Run: `cargo run --release --manifest-path benches/peers/Cargo.toml` (both tables;
//! `-- table` or `-- scaling` for one). Env `PEERS_SAMPLES` (default 15): samples of ~10 ms
//! per row; the median is reported.

use std::hint::black_box;
use std::time::{Duration, Instant};

use candle_core::{DType, Device, Tensor};
use half::bf16;
use rope_kernels::{ApplyOptions, CosSinTable, Element, Heads, HeadsMut, PairLayout, Rope, RopeConfig, View};

const HEAD_DIM: usize = 128;
const PAIRS: usize = HEAD_DIM / 2;
const THETA: f64 = 500_000.0;
/// Positions of decode: one token at this position (a KV cache of this length).
const DECODE_POS: usize = 1000;
const CACHE_ROWS: usize = 4096 + 1;

#[derive(Clone, Copy)]
struct Shape {
    name: &'static str,
    tokens: usize,
    q_heads: usize,
    k_heads: usize,
    start: usize,
}

const SHAPES: [Shape; 3] = [
    Shape { name: "decode", tokens: 1, q_heads: 32, k_heads: 8, start: DECODE_POS },
    Shape { name: "prefill", tokens: 512, q_heads: 32, k_heads: 0, start: 0 },
    Shape { name: "long", tokens: 4096, q_heads: 32, k_heads: 0, start: 0 },
];

impl Shape {
    fn elements(&self) -> usize {
        self.tokens * (self.q_heads + self.k_heads) * HEAD_DIM
    }
}

/// The element types of the comparison.
trait Dt: Element + candle_core::WithDType {
    const NAME: &'static str;
    const CANDLE: DType;
}

impl Dt for f32 {
    const NAME: &'static str = "f32";
    const CANDLE: DType = DType::F32;
}

impl Dt for bf16 {
    const NAME: &'static str = "bf16";
    const CANDLE: DType = DType::BF16;
}

// ---------------------------------------------------------------------------------------
// Timing

fn samples() -> usize {
    std::env::var("PEERS_SAMPLES").ok().and_then(|s| s.parse().ok()).unwrap_or(15)
}

/// Median ns per call over `samples()` samples of ~10 ms each, after ~50 ms of warm-up.
fn time(mut f: impl FnMut()) -> f64 {
    let t0 = Instant::now();
    let mut n = 0u64;
    while n < 2 || t0.elapsed() < Duration::from_millis(50) {
        f();
        n += 1;
    }
    let per = t0.elapsed().as_secs_f64() / n as f64;
    let iters = ((0.010 / per) as u64).max(1);
    let mut v: Vec<f64> = (0..samples())
        .map(|_| {
            let t = Instant::now();
            for _ in 0..iters {
                f();
            }
            t.elapsed().as_nanos() as f64 / iters as f64
        })
        .collect();
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

// ---------------------------------------------------------------------------------------
// Peers

/// The roofline: `x *= c` in place through the crate's own vectorised load/convert/store
/// path for the active tier (`rope_kernels::__bench::scale`, the roofline of
/// `benches/rope.rs`), so the ratio compares code built for the same instructions. Callers
/// alternate `c` and `1 / c` so values stay put however many calls.
#[inline(never)]
fn scale<T: Element>(x: &mut [T], c: f32) {
    rope_kernels::__bench::scale(rope_kernels::dispatch::active_tier(), x, c)
        .expect("the active tier runs here");
}

/// Hugging Face `apply_rotary_pos_emb` written by hand: `out = x * cos + rotate_half(x) * sin`
/// over `[t][h][d]` (BSHD), with full-width cos/sin rows `[t][d]` (`cat(freqs, freqs)`), f32
/// arithmetic, one rounding to `T` per output.
fn hf_scalar<T: Element>(x: &[T], out: &mut [T], cos: &[f32], sin: &[f32], tokens: usize, heads: usize) {
    let d = HEAD_DIM;
    let half = d / 2;
    for t in 0..tokens {
        let (c, s) = (&cos[t * d..(t + 1) * d], &sin[t * d..(t + 1) * d]);
        for h in 0..heads {
            let base = (t * heads + h) * d;
            let (row, o) = (&x[base..base + d], &mut out[base..base + d]);
            for i in 0..d {
                let rot = if i < half { -row[i + half].to_f32() } else { row[i - half].to_f32() };
                o[i] = T::from_f32(row[i].to_f32() * c[i] + rot * s[i]);
            }
        }
    }
}

#[derive(Clone, Copy, PartialEq)]
enum CandleFn {
    Rope,
    RopeI,
    RopeThd,
}

impl CandleFn {
    fn name(self) -> &'static str {
        match self {
            CandleFn::Rope => "candle-nn rope",
            CandleFn::RopeI => "candle-nn rope_i",
            CandleFn::RopeThd => "candle-nn rope_thd",
        }
    }

    /// candle's layout for x.
    fn bhsd(self) -> bool {
        self != CandleFn::RopeThd
    }

    fn call(self, x: &Tensor, cos: &Tensor, sin: &Tensor) -> Tensor {
        let r = match self {
            CandleFn::Rope => candle_nn::rotary_emb::rope(x, cos, sin),
            CandleFn::RopeI => candle_nn::rotary_emb::rope_i(x, cos, sin),
            CandleFn::RopeThd => candle_nn::rotary_emb::rope_thd(x, cos, sin),
        };
        r.expect("candle rope")
    }
}

/// A candle tensor of `heads` heads, `(1, h, t, d)` or `(1, t, h, d)`.
fn candle_x<T: Dt>(data: &[T], tokens: usize, heads: usize, bhsd: bool) -> Tensor {
    let shape = if bhsd { (1, heads, tokens, HEAD_DIM) } else { (1, tokens, heads, HEAD_DIM) };
    Tensor::from_slice(data, shape, &Device::Cpu).unwrap()
}

// ---------------------------------------------------------------------------------------
// Rows of the table

struct Row {
    shape: &'static str,
    dtype: &'static str,
    what: String,
    ns: f64,
    elements: usize,
    /// Index of the rope-kernels row this peer is compared with.
    versus: Option<usize>,
}

struct Table {
    rows: Vec<Row>,
}

impl Table {
    fn push(&mut self, shape: &Shape, dtype: &'static str, what: impl Into<String>, ns: f64) -> usize {
        let what = what.into();
        eprintln!("  {:8} {:5} {:48} {:>14.0} ns", shape.name, dtype, what, ns);
        self.rows.push(Row { shape: shape.name, dtype, what, ns, elements: shape.elements(), versus: None });
        self.rows.len() - 1
    }

    fn print(&self) {
        println!();
        println!(
            "| shape | dtype | implementation | ns / call | Melem/s | × roofline | rope-kernels speed-up |"
        );
        println!("|---|---|---|---:|---:|---:|---:|");
        let mut roofline = f64::NAN;
        for r in &self.rows {
            let eps = r.elements as f64 / r.ns * 1e9;
            if r.what.starts_with("roofline") {
                roofline = eps;
            }
            let speedup = match r.versus {
                Some(i) => format!("{:.1}× (vs {})", r.ns / self.rows[i].ns, short(&self.rows[i].what)),
                None => String::new(),
            };
            println!(
                "| {} | {} | {} | {} | {:.0} | {:.2} | {} |",
                r.shape,
                r.dtype,
                r.what,
                group_digits(r.ns),
                eps / 1e6,
                eps / roofline,
                speedup
            );
        }
    }
}

fn short(what: &str) -> &str {
    what.strip_prefix("rope-kernels ").unwrap_or(what)
}

fn group_digits(ns: f64) -> String {
    let s = format!("{:.0}", ns);
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

// ---------------------------------------------------------------------------------------
// One dtype

struct Setup {
    /// half-split and interleaved objects.
    hs: Rope<'static>,
    il: Rope<'static>,
    cos: Vec<f32>,
    sin: Vec<f32>,
    pool1: rayon::ThreadPool,
    pooln: rayon::ThreadPool,
    cores: usize,
}

impl Setup {
    fn table(&self) -> CosSinTable<'_> {
        CosSinTable::new(&self.cos, &self.sin, PAIRS).unwrap()
    }

    /// candle's cos/sin `(t, d/2)` for the positions `start..start + tokens`, in `T`.
    fn candle_cs<T: Dt>(&self, start: usize, tokens: usize) -> (Tensor, Tensor) {
        let r = start * PAIRS..(start + tokens) * PAIRS;
        let mk = |v: &[f32]| {
            Tensor::from_slice(&v[r.clone()], (tokens, PAIRS), &Device::Cpu)
                .unwrap()
                .to_dtype(T::CANDLE)
                .unwrap()
        };
        (mk(&self.cos), mk(&self.sin))
    }

    /// Full-width HF rows `[t][d]` (`cat(freqs, freqs)`).
    fn hf_cs(&self, start: usize, tokens: usize) -> (Vec<f32>, Vec<f32>) {
        let full = |v: &[f32]| {
            let mut out = Vec::with_capacity(tokens * HEAD_DIM);
            for p in start..start + tokens {
                let row = &v[p * PAIRS..(p + 1) * PAIRS];
                out.extend_from_slice(row);
                out.extend_from_slice(row);
            }
            out
        };
        (full(&self.cos), full(&self.sin))
    }
}

fn data<T: Element>(n: usize, seed: u32) -> Vec<T> {
    // A fixed pseudo-random sequence in [-1, 1).
    let mut s = seed.wrapping_mul(2_654_435_761).max(1);
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            T::from_f32((s >> 8) as f32 / (1u32 << 23) as f32 - 1.0)
        })
        .collect()
}

/// Largest violation of `|a - b| <= tol(a)` over the elements, as a ratio (≤ 1 passes).
fn check<T: Element>(what: &str, ours: &[T], theirs: &[T], rel: f32) {
    assert_eq!(ours.len(), theirs.len(), "{what}: lengths");
    let mut worst = 0.0f32;
    let mut identical = 0usize;
    for (a, b) in ours.iter().zip(theirs) {
        let (a, b) = (a.to_f32(), b.to_f32());
        identical += usize::from(a.to_bits() == b.to_bits());
        // Inputs are in [-1, 1) and |cos|, |sin| <= 1: each output is at most 2 in size.
        let tol = rel * 2.0;
        worst = worst.max((a - b).abs() / tol);
    }
    let ok = worst <= 1.0;
    eprintln!(
        "  check {what}: {} ({} of {} elements bit-identical, worst error {:.3} of the bound)",
        if ok { "ok" } else { "MISMATCH" },
        identical,
        ours.len(),
        worst
    );
    assert!(ok, "{what}: outputs differ beyond rounding");
}

/// candle and the HF formula against rope-kernels on the prefill shape.
fn verify<T: Dt>(s: &Setup) {
    let (t, h) = (512, 32);
    let n = t * h * HEAD_DIM;
    let x: Vec<T> = data(n, 7);
    let opts = ApplyOptions::start(0).with_table(s.table());
    // f32: candle does the same products and sum as rope-kernels, each rounded once; bf16:
    // candle rounds each product and the sum to bf16 (3 roundings of 2^-8 relative, on
    // magnitudes up to 1), rope-kernels only the result.
    let rel = if T::NAME == "f32" { 2.0 * f32::EPSILON } else { 3.0 / 256.0 };
    for f in [CandleFn::Rope, CandleFn::RopeI, CandleFn::RopeThd] {
        let (rope, view) = match f {
            CandleFn::Rope => (&s.hs, View::head_major(t, h, HEAD_DIM)),
            CandleFn::RopeI => (&s.il, View::head_major(t, h, HEAD_DIM)),
            CandleFn::RopeThd => (&s.hs, View::token_major(t, h, HEAD_DIM)),
        };
        let mut ours = x.clone();
        rope.apply(HeadsMut::new(&mut ours, view), &opts).unwrap();
        let (cos, sin) = s.candle_cs::<T>(0, t);
        let y = f.call(&candle_x(&x, t, h, f.bhsd()), &cos, &sin);
        let theirs: Vec<T> = y.flatten_all().unwrap().to_vec1().unwrap();
        check(&format!("{} {}", f.name(), T::NAME), &ours, &theirs, rel);
    }
    let mut ours = x.clone();
    s.hs.apply(HeadsMut::new(&mut ours, View::token_major(t, h, HEAD_DIM)), &opts).unwrap();
    let (cos, sin) = s.hf_cs(0, t);
    let mut theirs = vec![T::default(); n];
    hf_scalar(&x, &mut theirs, &cos, &sin, t, h);
    // The HF formula in f32 is the same products and sum: only the final rounding to T.
    let rel = if T::NAME == "f32" { 2.0 * f32::EPSILON } else { 1.0 / 256.0 };
    check(&format!("HF formula (scalar) {}", T::NAME), &ours, &theirs, rel);
}

fn run_dtype<T: Dt>(s: &Setup, tab: &mut Table) {
    verify::<T>(s);
    for shape in SHAPES {
        let sh = &shape;
        let (t, qh, kh) = (shape.tokens, shape.q_heads, shape.k_heads);
        let dt = T::NAME;
        let opts = ApplyOptions::start(shape.start as u32).with_table(s.table());
        let fly = ApplyOptions::start(shape.start as u32);
        let mut q: Vec<T> = data(t * qh * HEAD_DIM, 1);
        let mut k: Vec<T> = data(t * kh * HEAD_DIM, 2);
        let (qs, ks) = (View::token_major(t, qh, HEAD_DIM), View::token_major(t, kh, HEAD_DIM));
        let (qb, kb) = (View::head_major(t, qh, HEAD_DIM), View::head_major(t, kh, HEAD_DIM));
        let kk = kh > 0;

        // Roofline: x *= c over a buffer of the same size.
        let mut y: Vec<T> = data(shape.elements(), 3);
        let mut flip = false;
        let ns = time(|| {
            flip = !flip;
            scale(black_box(&mut y), if flip { 0.75 } else { 1.0 / 0.75 })
        });
        tab.push(sh, dt, "roofline: in-place x *= c, 1 thread", ns);

        let mut apply = |rope: &Rope, qv: View, kv: View, o: &ApplyOptions<'_>| {
            time(|| {
                let k = kk.then(|| HeadsMut::new(&mut k, kv));
                rope.apply_qk(HeadsMut::new(&mut q, qv), k, black_box(o)).unwrap()
            })
        };
        let ours_bshd = tab.push(sh, dt, "rope-kernels half-split BSHD", apply(&s.hs, qs, ks, &opts));
        let ours_bhsd = tab.push(sh, dt, "rope-kernels half-split BHSD", apply(&s.hs, qb, kb, &opts));
        let ours_il = tab.push(sh, dt, "rope-kernels interleaved BHSD", apply(&s.il, qb, kb, &opts));
        tab.push(sh, dt, "rope-kernels half-split BSHD, cos/sin on the fly", apply(&s.hs, qs, ks, &fly));
        let (qi, ki) = (q.clone(), k.clone());
        let (mut qo, mut ko) = (vec![T::default(); qi.len()], vec![T::default(); ki.len()]);
        let ns = time(|| {
            let k = kk.then(|| (Heads::new(&ki, ks), HeadsMut::new(&mut ko, ks)));
            s.hs.apply_qk_into(Heads::new(&qi, qs), HeadsMut::new(&mut qo, qs), k, black_box(&opts)).unwrap()
        });
        tab.push(sh, dt, "rope-kernels half-split BSHD, out of place", ns);
        let ns = s.pooln.install(|| {
            time(|| {
                let k = kk.then(|| HeadsMut::new(&mut k, ks));
                s.hs.par_apply_qk(HeadsMut::new(&mut q, qs), k, black_box(&opts)).unwrap()
            })
        });
        let ours_par = tab.push(sh, dt, format!("rope-kernels par_apply BSHD, {} threads", s.cores), ns);

        // candle: q and k are two calls (decode); x and cos/sin are built outside the timing.
        for f in [CandleFn::Rope, CandleFn::RopeI, CandleFn::RopeThd] {
            let xq = candle_x(&q, t, qh, f.bhsd());
            let xk = kk.then(|| candle_x(&k, t, kh, f.bhsd()));
            let (cos, sin) = s.candle_cs::<T>(shape.start, t);
            let mut call = || {
                black_box(f.call(&xq, &cos, &sin));
                if let Some(xk) = &xk {
                    black_box(f.call(xk, &cos, &sin));
                }
            };
            let ns = s.pool1.install(|| time(&mut call));
            let i = tab.push(sh, dt, format!("{}, 1 thread", f.name()), ns);
            tab.rows[i].versus = Some(match f {
                CandleFn::Rope => ours_bhsd,
                CandleFn::RopeI => ours_il,
                CandleFn::RopeThd => ours_bshd,
            });
            let ns = s.pooln.install(|| time(&mut call));
            let i = tab.push(sh, dt, format!("{}, {} threads", f.name(), s.cores), ns);
            tab.rows[i].versus = Some(ours_par);
        }

        // The HF formula by hand, BSHD, out of place into a preallocated buffer.
        let (cos, sin) = s.hf_cs(shape.start, t);
        let (mut qo, mut ko) = (vec![T::default(); q.len()], vec![T::default(); k.len()]);
        let ns = time(|| {
            hf_scalar(black_box(&q), &mut qo, &cos, &sin, t, qh);
            if kk {
                hf_scalar(black_box(&k), &mut ko, &cos, &sin, t, kh);
            }
        });
        let i = tab.push(sh, dt, "HF formula, scalar by hand, 1 thread", ns);
        tab.rows[i].versus = Some(ours_bshd);
    }
}

// ---------------------------------------------------------------------------------------
// Parallel scaling: single thread against par_apply, samples interleaved

/// CPU time in clock ticks: (whole machine busy, whole machine total, this process), from
/// /proc (Linux; None elsewhere).
fn cpu_ticks() -> Option<(u64, u64, u64)> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let v: Vec<u64> =
        stat.lines().next()?.split_whitespace().skip(1).filter_map(|x| x.parse().ok()).collect();
    let total: u64 = v.iter().take(8).sum();
    let idle = v.get(3)? + v.get(4).copied().unwrap_or(0);
    let me = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name (which ends with ')'): utime and stime are 14th and 15th.
    let f: Vec<&str> = me.rsplit_once(')')?.1.split_whitespace().collect();
    let mine = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    Some((total - idle, total, mine))
}

/// Cores kept busy by other processes between two `cpu_ticks` readings.
fn other_load(a: Option<(u64, u64, u64)>, b: Option<(u64, u64, u64)>) -> String {
    let (Some(a), Some(b)) = (a, b) else { return "?".into() };
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    let total = (b.1 - a.1).max(1) as f64;
    let other = (b.0 - a.0) as f64 - (b.2 - a.2) as f64;
    format!("{:.2}", (cores * other / total).max(0.0))
}

/// Median ns per call of `a` and `b` and the median of the per-pair ratios `a / b`, with
/// their ~10 ms samples interleaved so that load from other processes hits both alike.
fn time_pair(mut a: impl FnMut(), mut b: impl FnMut()) -> (f64, f64, f64) {
    let per = |f: &mut dyn FnMut()| {
        let t0 = Instant::now();
        let mut n = 0u64;
        while n < 2 || t0.elapsed() < Duration::from_millis(50) {
            f();
            n += 1;
        }
        ((0.010 * n as f64 / t0.elapsed().as_secs_f64()) as u64).max(1)
    };
    let (na, nb) = (per(&mut a), per(&mut b));
    let sample = |f: &mut dyn FnMut(), n: u64| {
        let t = Instant::now();
        for _ in 0..n {
            f();
        }
        t.elapsed().as_nanos() as f64 / n as f64
    };
    let mut xs = Vec::new();
    for _ in 0..samples() + 6 {
        let x = sample(&mut a, na);
        let y = sample(&mut b, nb);
        xs.push((x, y, x / y));
    }
    let med = |mut v: Vec<f64>| {
        v.sort_by(|a, b| a.total_cmp(b));
        v[v.len() / 2]
    };
    (
        med(xs.iter().map(|x| x.0).collect()),
        med(xs.iter().map(|x| x.1).collect()),
        med(xs.iter().map(|x| x.2).collect()),
    )
}

fn scaling<T: Dt>(s: &Setup) {
    for shape in &SHAPES[1..] {
        let ticks = cpu_ticks();
        let t = shape.tokens;
        let v = View::token_major(t, shape.q_heads, HEAD_DIM);
        let opts = ApplyOptions::start(0).with_table(s.table());
        let mut x: Vec<T> = data(t * shape.q_heads * HEAD_DIM, 5);
        let mut x2 = x.clone();
        let (one, par, ratio) = time_pair(
            || s.hs.apply(HeadsMut::new(&mut x, v), black_box(&opts)).unwrap(),
            || s.pooln.install(|| s.hs.par_apply(HeadsMut::new(&mut x2, v), black_box(&opts)).unwrap()),
        );
        let mut y: Vec<T> = data(shape.elements(), 6);
        let mut y2 = y.clone();
        let (mut f1, mut f2) = (false, false);
        let (r_one, r_par, r_ratio) = time_pair(
            || {
                f1 = !f1;
                scale(black_box(&mut y), if f1 { 0.75 } else { 1.0 / 0.75 })
            },
            || {
                f2 = !f2;
                let c = if f2 { 0.75 } else { 1.0 / 0.75 };
                s.pooln.install(|| {
                    use rayon::prelude::*;
                    black_box(&mut y2).par_chunks_mut(16 * 1024).for_each(|ch| scale(ch, c))
                })
            },
        );
        println!(
            "| {} | {} | {} | {} | {:.2}× | {} | {} | {:.2}× | {} |",
            shape.name,
            T::NAME,
            group_digits(one),
            group_digits(par),
            ratio,
            group_digits(r_one),
            group_digits(r_par),
            r_ratio,
            other_load(ticks, cpu_ticks())
        );
    }
}

fn main() {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let hs = Rope::new(RopeConfig::new(HEAD_DIM, THETA)).unwrap();
    let il = Rope::new(RopeConfig::new(HEAD_DIM, THETA).with_layout(PairLayout::Interleaved)).unwrap();
    let (mut cos, mut sin) = (vec![0.0; CACHE_ROWS * PAIRS], vec![0.0; CACHE_ROWS * PAIRS]);
    hs.fill_table(0, &mut cos, &mut sin).unwrap();
    let setup = Setup {
        hs,
        il,
        cos,
        sin,
        pool1: rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap(),
        pooln: rayon::ThreadPoolBuilder::new().num_threads(cores).build().unwrap(),
        cores,
    };
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    eprintln!(
        "peers: {cpu}, {cores} cores; rope-kernels tier {} (available: {}); candle-core 0.11; {} samples per row",
        setup.hs.tier(),
        rope_kernels::dispatch::available_tiers().map(|t| t.name()).collect::<Vec<_>>().join(", "),
        samples()
    );
    // `peers` prints both tables; `peers table` or `peers scaling` only one.
    let only = std::env::args().nth(1);
    if only.as_deref() != Some("scaling") {
        let mut tab = Table { rows: Vec::new() };
        run_dtype::<f32>(&setup, &mut tab);
        run_dtype::<bf16>(&setup, &mut tab);
        println!(
            "\nrope-kernels tier: {}; {cpu}; {cores} cores; head_dim 128, theta 500000, cached cos/sin unless noted.",
            setup.hs.tier()
        );
        println!(
            "Speed-up: the peer's ns / the rope-kernels row named (same layout; threads against par_apply)."
        );
        tab.print();
    }
    if only.as_deref() != Some("table") {
        println!(
            "\nParallel scaling, BSHD half-split in place, cached cos/sin; single-thread and {cores}-thread \
             samples interleaved; last column: cores kept busy by other processes meanwhile.\n"
        );
        println!(
            "| shape | dtype | apply, 1 thread (ns) | par_apply, {cores} threads (ns) | speed-up | x *= c, 1 thread | \
             x *= c, {cores} threads | speed-up | other load |"
        );
        println!("|---|---|---:|---:|---:|---:|---:|---:|---:|");
        scaling::<f32>(&setup);
        scaling::<bf16>(&setup);
    }
}
