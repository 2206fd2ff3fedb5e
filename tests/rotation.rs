//! Acceptance tests of issue 2 for the rotation itself: the kernel against an explicit
//! block-diagonal rotation-matrix product in f64, the algebraic properties of RoPE (norm,
//! relative position, composition, inverse), the element types, in-place and out-of-place
//! views (BSHD, BHSD, padded, fused QKV, GQA), positions, and the three cos/sin sources.
//!
//! Tolerances: every comparison with exact math uses the per-element bound of
//! `common::reference` (three f32 roundings, see `GAMMA_F32`, then one rounding to the
//! element type), aggregated with the triangle inequality where a property chains several
//! calls. Comparisons between two ways of computing the same thing are bit for bit.

mod common;

use common::*;
use rand::RngExt;
use rope_kernels::{
    bf16, f16, AngleMode, ApplyOptions, CosSinTable, Element, Heads, HeadsMut, PairLayout, Rope, RopeConfig,
    Scaling, View,
};

/// Configurations covering both layouts, full and partial rotary_dim, odd head_dim, a tiny
/// rotary part, several thetas (theta < 1 included) and linear scaling.
fn configs() -> Vec<RopeConfig> {
    let shapes: [(usize, usize, f64); 9] = [
        (2, 2, 10_000.0),
        (64, 64, 10_000.0),
        (80, 32, 10_000.0),    // phi-2
        (96, 24, 10_000.0),    // GPT-NeoX style 0.25
        (256, 64, 10_000.0),   // GPT-J
        (128, 128, 500_000.0), // Llama 3 theta
        (7, 4, 1_000_000.0),
        (130, 128, 10_000.0),
        (48, 48, 0.5),
    ];
    let mut v = Vec::new();
    for layout in [PairLayout::HalfSplit, PairLayout::Interleaved] {
        for (hd, rd, theta) in shapes {
            v.push(RopeConfig::new(hd, theta).with_rotary_dim(rd).with_layout(layout));
        }
        v.push(
            RopeConfig::new(128, 10_000.0).with_layout(layout).with_scaling(Scaling::Linear { factor: 4.0 }),
        );
    }
    v
}

fn opts(positions: &[u32], inverse: bool) -> ApplyOptions<'_> {
    let a = ApplyOptions::ids(positions);
    if inverse {
        a.inverse()
    } else {
        a
    }
}

/// Rotates `positions.len()` vectors of `head_dim` (one per token, one head) in place, each
/// at its own position.
fn run<T: Element>(rope: &Rope, x: &[T], positions: &[u32], inverse: bool) -> Vec<T> {
    let hd = rope.config().head_dim;
    let mut y = x.to_vec();
    let view = View::token_major(positions.len(), 1, hd);
    rope.apply(HeadsMut::new(&mut y, view), &opts(positions, inverse)).unwrap();
    y
}

/// The exact result and error bound for row `r` of `x` (rows of `head_dim`).
fn row_reference<T: TestElem>(rope: &Rope, x: &[T], r: usize, position: u32, inverse: bool) -> Reference {
    let cfg = rope.config();
    let hd = cfg.head_dim;
    reference(&rotation_matrix(rope, position, inverse), cfg.rotary_dim, &x[r * hd..(r + 1) * hd])
}

// ---------------------------------------------------------------------------------------
// 1. The kernel equals the f64 rotation-matrix product.

/// Checks every output of `rope.apply` on a `[tokens][heads][head_dim]` tensor against
/// `R_p x` computed as a full f64 matrix-vector product; pass-through dims bit for bit; for
/// f16/bf16, also that each rotated output is the f32 kernel's output on the widened input
/// rounded once (bits). Returns the largest error / bound seen.
fn check_matrix<T: TestElem>(seed: u64) -> f64 {
    let mut rng = rng(seed);
    let mut worst = 0.0f64;
    for cfg in configs() {
        let rope = Rope::new(cfg.clone()).unwrap();
        let (hd, rd) = (cfg.head_dim, cfg.rotary_dim);
        let (tokens, heads) = (7, 3);
        let mut positions: Vec<u32> = (0..tokens).map(|_| random_position(&mut rng)).collect();
        positions[0] = 0;
        positions[1] = u32::MAX;
        let view = View::token_major(tokens, heads, hd);
        let x: Vec<T> = random_vec(&mut rng, tokens * heads * hd);
        let x32: Vec<f32> = x.iter().map(|v| v.to_f32()).collect();
        for inverse in [false, true] {
            let mut y = x.clone();
            rope.apply(HeadsMut::new(&mut y, view), &opts(&positions, inverse)).unwrap();
            let mut y32 = x32.clone();
            rope.apply(HeadsMut::new(&mut y32, view), &opts(&positions, inverse)).unwrap();
            for (t, &p) in positions.iter().enumerate() {
                let m = rotation_matrix(&rope, p, inverse);
                for h in 0..heads {
                    let o = row_offset(&view, t, h);
                    let (xr, yr) = (&x[o..o + hd], &y[o..o + hd]);
                    let r = reference(&m, rd, xr);
                    for d in 0..hd {
                        let ctx = || format!("{} {cfg:?} p={p} inv={inverse} t={t} h={h} d={d}", T::NAME);
                        if d >= rd {
                            assert_eq!(yr[d].to_bits_u32(), xr[d].to_bits_u32(), "pass-through {}", ctx());
                            continue;
                        }
                        let err = (f64::from(yr[d].to_f32()) - r.y[d]).abs();
                        assert!(err <= r.bound[d], "err {err:e} > bound {:e}: {}", r.bound[d], ctx());
                        worst = worst.max(err / r.bound[d]);
                        assert_eq!(
                            yr[d].to_bits_u32(),
                            round_bits::<T>(y32[o + d]),
                            "not the f32 result rounded once: {}",
                            ctx()
                        );
                    }
                }
            }
        }
    }
    worst
}

#[test]
fn matrix_product_f32() {
    let worst = check_matrix::<f32>(0x5EED_0001);
    eprintln!("f32: largest |error| / bound = {worst:.3}");
}

#[test]
fn matrix_product_f16() {
    check_matrix::<f16>(0x5EED_0002);
}

#[test]
fn matrix_product_bf16() {
    check_matrix::<bf16>(0x5EED_0003);
}

/// The matrix check can fail: an f32 angle (HF's `f32(p) * f32(inv_freq)`) at a large
/// position is far outside the bound, while the exact mode at the same input is inside it.
#[test]
fn matrix_check_rejects_f32_angles() {
    let mut rng = rng(0x5EED_0004);
    let cfg = RopeConfig::new(64, 10_000.0);
    let exact = Rope::new(cfg.clone()).unwrap();
    let hf = Rope::new(cfg.with_angle_mode(AngleMode::HfCompatible)).unwrap();
    let x: Vec<f32> = random_vec(&mut rng, 64);
    let p = [1_000_003u32];
    let r = row_reference::<f32>(&exact, &x, 0, p[0], false);
    let outside =
        |y: &[f32]| y.iter().zip(&r.y).zip(&r.bound).any(|((a, b), e)| (f64::from(*a) - b).abs() > *e);
    assert!(!outside(&run(&exact, &x, &p, false)));
    assert!(outside(&run(&hf, &x, &p, false)));
}

// ---------------------------------------------------------------------------------------
// 2. Properties.

/// `| ||y|| - ||x|| | <= ||y - R x|| <= ||bound||` since `R` is orthogonal (attention factor
/// 1 for these configs); `1e-13 ||x||` covers the f64 evaluation of the norms.
fn check_norm<T: TestElem>(seed: u64) {
    let mut rng = rng(seed);
    for cfg in configs() {
        let rope = Rope::new(cfg.clone()).unwrap();
        let hd = cfg.head_dim;
        let n = 12;
        let positions: Vec<u32> = (0..n).map(|_| random_position(&mut rng)).collect();
        let x: Vec<T> = random_vec(&mut rng, n * hd);
        for inverse in [false, true] {
            let y = run(&rope, &x, &positions, inverse);
            for (r, &p) in positions.iter().enumerate() {
                let xn = norm(&to_f64(&x[r * hd..(r + 1) * hd]));
                let yn = norm(&to_f64(&y[r * hd..(r + 1) * hd]));
                let tol = norm(&row_reference(&rope, &x, r, p, inverse).bound) + 1e-13 * xn;
                assert!((yn - xn).abs() <= tol, "{} {cfg:?} p={p}: |{yn} - {xn}| > {tol:e}", T::NAME);
            }
        }
    }
}

#[test]
fn norm_preserved() {
    check_norm::<f32>(0x11);
    check_norm::<f16>(0x12);
    check_norm::<bf16>(0x13);
}

/// Positions below 2^24 keep the f64 rounding of the angles (at most 2^-52 (m + n) inv_freq
/// radians, ≤ 2^-27) below the f32 error; it is still added to the tolerance.
fn small_position(rng: &mut TestRng) -> u32 {
    random_position(rng) % (1 << 24)
}

/// `<R_m q, R_n k> = <R_{m-n} q, k>` (RoFormer eq. 16). For `m < n`, `R_{m-n}` is the inverse
/// rotation at `n - m`. Tolerance: `|<a + ea, b + eb> - <a, b>| <= ||ea|| ||b|| + ||a|| ||eb||
/// + ||ea|| ||eb||` for the left side, `||ez|| ||k||` for the right side, plus the angle
/// rounding `δ ||q|| ||k||` and the f64 dot products (`1e-13 ||q|| ||k||`).
fn check_relative<T: TestElem>(seed: u64) {
    let mut rng = rng(seed);
    for cfg in configs() {
        let rope = Rope::new(cfg.clone()).unwrap();
        let hd = cfg.head_dim;
        let fmax = rope.frequencies().inv_freq().iter().fold(0.0f64, |a, &b| a.max(b));
        let n_rows = 12;
        let m: Vec<u32> = (0..n_rows).map(|_| small_position(&mut rng)).collect();
        let n: Vec<u32> = (0..n_rows).map(|i| if i == 0 { m[0] } else { small_position(&mut rng) }).collect();
        let q: Vec<T> = random_vec(&mut rng, n_rows * hd);
        let k: Vec<T> = random_vec(&mut rng, n_rows * hd);
        let yq = run(&rope, &q, &m, false);
        let yk = run(&rope, &k, &n, false);
        // R_{m-n} q: forward at m - n, or inverse at n - m.
        let (fwd, inv): (Vec<usize>, Vec<usize>) = (0..n_rows).partition(|&i| m[i] >= n[i]);
        let mut z = q.clone();
        for (rows, inverse) in [(fwd, false), (inv, true)] {
            let d: Vec<u32> = rows.iter().map(|&i| m[i].abs_diff(n[i])).collect();
            let qs: Vec<T> = rows.iter().flat_map(|&i| q[i * hd..(i + 1) * hd].to_vec()).collect();
            let zs = run(&rope, &qs, &d, inverse);
            for (j, &i) in rows.iter().enumerate() {
                z[i * hd..(i + 1) * hd].copy_from_slice(&zs[j * hd..(j + 1) * hd]);
            }
        }
        for i in 0..n_rows {
            let row = |v: &[T]| to_f64(&v[i * hd..(i + 1) * hd]);
            let (qn, kn) = (norm(&row(&q)), norm(&row(&k)));
            let lhs = dot(&row(&yq), &row(&yk));
            let rhs = dot(&row(&z), &row(&k));
            let eq = norm(&row_reference(&rope, &q, i, m[i], false).bound);
            let ek = norm(&row_reference(&rope, &k, i, n[i], false).bound);
            let ez = norm(&row_reference(&rope, &q, i, m[i].abs_diff(n[i]), m[i] < n[i]).bound);
            let delta = 2f64.powi(-52) * (f64::from(m[i]) + f64::from(n[i])) * fmax;
            let tol = eq * kn + qn * ek + eq * ek + ez * kn + (delta + 1e-13) * qn * kn;
            assert!(
                (lhs - rhs).abs() <= tol,
                "{} {cfg:?} m={} n={}: |{lhs} - {rhs}| > {tol:e}",
                T::NAME,
                m[i],
                n[i]
            );
        }
    }
}

#[test]
fn relative_position() {
    check_relative::<f32>(0x21);
    check_relative::<f16>(0x22);
    check_relative::<bf16>(0x23);
}

/// `R_a (R_b x) = R_{a+b} x`. Tolerance: `||R_a e1 + e2|| + ||e3|| <= ||b1|| + ||b2|| + ||b3||`
/// (bounds of the three calls, the second on its actual input) plus the angle rounding
/// `2^-52 (a + b) inv_freq_max ||x||` and `1e-13 ||x||` for the f64 norms.
fn check_composition<T: TestElem>(seed: u64) {
    let mut rng = rng(seed);
    for cfg in configs() {
        let rope = Rope::new(cfg.clone()).unwrap();
        let hd = cfg.head_dim;
        let fmax = rope.frequencies().inv_freq().iter().fold(0.0f64, |a, &b| a.max(b));
        let n = 12;
        let a: Vec<u32> = (0..n).map(|_| small_position(&mut rng)).collect();
        let b: Vec<u32> = (0..n).map(|_| small_position(&mut rng)).collect();
        let ab: Vec<u32> = a.iter().zip(&b).map(|(a, b)| a + b).collect();
        let x: Vec<T> = random_vec(&mut rng, n * hd);
        for inverse in [false, true] {
            let y1 = run(&rope, &x, &b, inverse);
            let y2 = run(&rope, &y1, &a, inverse);
            let z = run(&rope, &x, &ab, inverse);
            for i in 0..n {
                let row = |v: &[T]| to_f64(&v[i * hd..(i + 1) * hd]);
                let diff: Vec<f64> = row(&y2).iter().zip(row(&z)).map(|(p, q)| p - q).collect();
                let b1 = norm(&row_reference(&rope, &x, i, b[i], inverse).bound);
                let b2 = norm(&row_reference(&rope, &y1, i, a[i], inverse).bound);
                let b3 = norm(&row_reference(&rope, &x, i, ab[i], inverse).bound);
                let xn = norm(&row(&x));
                let delta = 2f64.powi(-52) * f64::from(ab[i]) * fmax;
                let tol = b1 + b2 + b3 + (delta + 1e-13) * xn;
                assert!(
                    norm(&diff) <= tol,
                    "{} {cfg:?} a={} b={}: {} > {tol:e}",
                    T::NAME,
                    a[i],
                    b[i],
                    norm(&diff)
                );
                for d in cfg.rotary_dim..hd {
                    assert_eq!(y2[i * hd + d].to_bits_u32(), x[i * hd + d].to_bits_u32());
                }
            }
        }
    }
}

#[test]
fn composition() {
    check_composition::<f32>(0x31);
    check_composition::<f16>(0x32);
    check_composition::<bf16>(0x33);
}

/// `R_p^T (R_p x) = x`: `||z - x|| <= ||b1|| + ||b2||` (+ `1e-13 ||x||`), at any position
/// (the same f64 angle is used both ways, so large positions cost nothing here).
fn check_inverse<T: TestElem>(seed: u64) {
    let mut rng = rng(seed);
    for cfg in configs() {
        let rope = Rope::new(cfg.clone()).unwrap();
        let hd = cfg.head_dim;
        let n = 12;
        let p: Vec<u32> = (0..n).map(|_| random_position(&mut rng)).collect();
        let x: Vec<T> = random_vec(&mut rng, n * hd);
        let y = run(&rope, &x, &p, false);
        let z = run(&rope, &y, &p, true);
        for i in 0..n {
            let row = |v: &[T]| to_f64(&v[i * hd..(i + 1) * hd]);
            let diff: Vec<f64> = row(&z).iter().zip(row(&x)).map(|(a, b)| a - b).collect();
            let tol = norm(&row_reference(&rope, &x, i, p[i], false).bound)
                + norm(&row_reference(&rope, &y, i, p[i], true).bound)
                + 1e-13 * norm(&row(&x));
            assert!(norm(&diff) <= tol, "{} {cfg:?} p={}: {} > {tol:e}", T::NAME, p[i], norm(&diff));
            for d in cfg.rotary_dim..hd {
                assert_eq!(z[i * hd + d].to_bits_u32(), x[i * hd + d].to_bits_u32());
            }
        }
    }
}

#[test]
fn inverse_round_trip() {
    check_inverse::<f32>(0x41);
    check_inverse::<f16>(0x42);
    check_inverse::<bf16>(0x43);
}

// ---------------------------------------------------------------------------------------
// 3. Views: BSHD, BHSD, padded strides; in place and out of place.

fn views(tokens: usize, heads: usize, hd: usize) -> Vec<(&'static str, View)> {
    vec![
        ("bshd", View::token_major(tokens, heads, hd)),
        ("bhsd", View::head_major(tokens, heads, hd)),
        ("padded-bshd", View { tokens, heads, token_stride: heads * (hd + 3) + 5, head_stride: hd + 3 }),
        ("padded-bhsd", View { tokens, heads, token_stride: hd + 2, head_stride: tokens * (hd + 2) + 1 }),
    ]
}

fn extent(view: &View, hd: usize) -> usize {
    view.validate(hd, usize::MAX, rope_kernels::Operand::Q).unwrap()
}

/// Scatters `rows[t][h]` into a buffer for `view`; elements no row covers get `fill`.
fn scatter<T: Copy>(rows: &[Vec<Vec<T>>], view: &View, len: usize, fill: &[T]) -> Vec<T> {
    let mut buf = fill[..len].to_vec();
    for (t, r) in rows.iter().enumerate() {
        for (h, v) in r.iter().enumerate() {
            let o = row_offset(view, t, h);
            buf[o..o + v.len()].copy_from_slice(v);
        }
    }
    buf
}

fn gather<T: Copy>(buf: &[T], view: &View, hd: usize) -> Vec<Vec<Vec<T>>> {
    (0..view.tokens)
        .map(|t| {
            (0..view.heads)
                .map(|h| {
                    let o = row_offset(view, t, h);
                    buf[o..o + hd].to_vec()
                })
                .collect()
        })
        .collect()
}

/// Elements of `after` outside the view's rows have the bits of `before`.
fn assert_gaps_unchanged<T: Element>(before: &[T], after: &[T], view: &View, hd: usize, what: &str) {
    for (i, c) in coverage(view, hd, before.len()).iter().enumerate() {
        if c.is_none() {
            assert_eq!(before[i].to_bits_u32(), after[i].to_bits_u32(), "{what}: gap element {i} changed");
        }
    }
}

/// For every pair of views: in place on the input view; out of place from the input view
/// into the output view (pre-filled with NaN payloads and random values). Rows hold NaN
/// payloads in their pass-through dims, which must be left (in place) or copied (out of
/// place) bit for bit; gaps of every buffer must be untouched; all results bit-identical to
/// the in-place BSHD result, which is checked against the rotation matrix.
fn check_views<T: TestElem>(seed: u64, layout: PairLayout) {
    let mut rng = rng(seed);
    let (tokens, heads, hd, rd) = (5, 3, 20, 12);
    let rope = Rope::new(RopeConfig::new(hd, 10_000.0).with_rotary_dim(rd).with_layout(layout)).unwrap();
    let nans = nan_payloads::<T>();
    let positions: Vec<u32> = (0..tokens).map(|_| random_position(&mut rng)).collect();
    let rows: Vec<Vec<Vec<T>>> = (0..tokens)
        .map(|t| {
            (0..heads)
                .map(|h| {
                    let mut v: Vec<T> = random_vec(&mut rng, hd);
                    v[rd + (t + h) % (hd - rd)] = nans[(t + h) % nans.len()];
                    v
                })
                .collect()
        })
        .collect();
    let mut fill: Vec<T> = random_vec(&mut rng, 4096);
    for (i, v) in fill.iter_mut().enumerate().step_by(3) {
        *v = nans[i % nans.len()];
    }

    // The reference result: in place on BSHD, checked against the matrix.
    let bshd = View::token_major(tokens, heads, hd);
    let mut expected = scatter(&rows, &bshd, extent(&bshd, hd), &fill);
    rope.apply(HeadsMut::new(&mut expected, bshd), &ApplyOptions::ids(&positions)).unwrap();
    let expected = gather(&expected, &bshd, hd);
    for (t, &p) in positions.iter().enumerate() {
        let m = rotation_matrix(&rope, p, false);
        for h in 0..heads {
            let r = reference(&m, rd, &rows[t][h]);
            for d in 0..hd {
                let got = expected[t][h][d];
                if d < rd {
                    assert!((f64::from(got.to_f32()) - r.y[d]).abs() <= r.bound[d]);
                } else {
                    assert_eq!(got.to_bits_u32(), rows[t][h][d].to_bits_u32(), "pass-through in place");
                }
            }
        }
    }
    let expected_bits: Vec<Vec<Vec<u32>>> =
        expected.iter().map(|r| r.iter().map(|v| bits(v)).collect()).collect();

    for (in_name, vin) in views(tokens, heads, hd) {
        let len_in = extent(&vin, hd) + 4;
        let x = scatter(&rows, &vin, len_in, &fill);

        let mut y = x.clone();
        rope.apply(HeadsMut::new(&mut y, vin), &ApplyOptions::ids(&positions)).unwrap();
        assert_gaps_unchanged(&x, &y, &vin, hd, in_name);
        let got: Vec<Vec<Vec<u32>>> =
            gather(&y, &vin, hd).iter().map(|r| r.iter().map(|v| bits(v)).collect()).collect();
        assert_eq!(got, expected_bits, "{} in place {in_name}", T::NAME);

        for (out_name, vout) in views(tokens, heads, hd) {
            let len_out = extent(&vout, hd) + 3;
            let before: Vec<T> = fill[100..100 + len_out].to_vec();
            let mut out = before.clone();
            rope.apply_into(
                Heads::new(&x, vin),
                HeadsMut::new(&mut out, vout),
                &ApplyOptions::ids(&positions),
            )
            .unwrap();
            let what = format!("{} {in_name} -> {out_name}", T::NAME);
            assert_gaps_unchanged(&before, &out, &vout, hd, &what);
            let got: Vec<Vec<Vec<u32>>> =
                gather(&out, &vout, hd).iter().map(|r| r.iter().map(|v| bits(v)).collect()).collect();
            assert_eq!(got, expected_bits, "{what}");
        }
    }
}

#[test]
fn views_in_place_and_out_of_place() {
    for layout in [PairLayout::HalfSplit, PairLayout::Interleaved] {
        check_views::<f32>(0x51, layout);
        check_views::<f16>(0x52, layout);
        check_views::<bf16>(0x53, layout);
    }
}

/// A fused QKV projection output `[tokens][q_heads + 2 kv_heads][head_dim]`: q and k rotated
/// through strided views (two in-place calls; one in-place call over the adjacent q and k
/// heads; one out-of-place `apply_qk_into` reading both from the shared buffer). v untouched.
fn check_fused_qkv<T: TestElem>(seed: u64) {
    let mut rng = rng(seed);
    let (tokens, qh, kvh, hd, rd) = (6, 4, 2, 16, 8);
    let w = (qh + 2 * kvh) * hd;
    let rope = Rope::new(RopeConfig::new(hd, 10_000.0).with_rotary_dim(rd)).unwrap();
    let positions: Vec<u32> = (0..tokens).map(|_| random_position(&mut rng)).collect();
    let fused: Vec<T> = random_vec(&mut rng, tokens * w);
    let qv = View { tokens, heads: qh, token_stride: w, head_stride: hd };
    let kv = View { tokens, heads: kvh, token_stride: w, head_stride: hd };
    let qkv = View { tokens, heads: qh + kvh, token_stride: w, head_stride: hd };
    let opts = ApplyOptions::ids(&positions);

    // Expected: q and k copied into contiguous tensors and rotated there.
    let rot = |rows: Vec<Vec<Vec<T>>>, heads: usize| {
        let v = View::token_major(tokens, heads, hd);
        let mut b = scatter(&rows, &v, tokens * heads * hd, &vec![T::default(); tokens * heads * hd]);
        rope.apply(HeadsMut::new(&mut b, v), &opts).unwrap();
        b
    };
    let q_exp = rot(gather(&fused, &qv, hd), qh);
    let k_exp = rot(gather(&fused[qh * hd..], &kv, hd), kvh);
    let mut fused_exp = fused.clone();
    for t in 0..tokens {
        let o = t * w;
        fused_exp[o..o + qh * hd].copy_from_slice(&q_exp[t * qh * hd..(t + 1) * qh * hd]);
        fused_exp[o + qh * hd..o + (qh + kvh) * hd].copy_from_slice(&k_exp[t * kvh * hd..(t + 1) * kvh * hd]);
    }

    let mut two = fused.clone();
    rope.apply(HeadsMut::new(&mut two, qv), &opts).unwrap();
    rope.apply(HeadsMut::new(&mut two[qh * hd..], kv), &opts).unwrap();
    assert_eq!(bits(&two), bits(&fused_exp), "{} fused, two calls", T::NAME);

    let mut one = fused.clone();
    rope.apply(HeadsMut::new(&mut one, qkv), &opts).unwrap();
    assert_eq!(bits(&one), bits(&fused_exp), "{} fused, q and k as one tensor", T::NAME);

    let q_out_view = View::head_major(tokens, qh, hd);
    let mut q_out = vec![T::default(); tokens * qh * hd];
    let mut k_out = vec![T::default(); tokens * kvh * hd];
    rope.apply_qk_into(
        Heads::new(&fused, qv),
        HeadsMut::new(&mut q_out, q_out_view),
        Some((
            Heads::new(&fused[qh * hd..], kv),
            HeadsMut::new(&mut k_out, View::token_major(tokens, kvh, hd)),
        )),
        &opts,
    )
    .unwrap();
    let q_bshd =
        scatter(&gather(&q_out, &q_out_view, hd), &View::token_major(tokens, qh, hd), q_exp.len(), &q_exp);
    assert_eq!(bits(&q_bshd), bits(&q_exp), "{} fused out of place q", T::NAME);
    assert_eq!(bits(&k_out), bits(&k_exp), "{} fused out of place k", T::NAME);
}

#[test]
fn fused_qkv() {
    check_fused_qkv::<f32>(0x61);
    check_fused_qkv::<f16>(0x62);
    check_fused_qkv::<bf16>(0x63);
}

/// GQA: 8 q heads (BSHD) and 2 k heads (BHSD) in one call equal two separate calls, in place
/// and out of place.
fn check_gqa<T: TestElem>(seed: u64) {
    let mut rng = rng(seed);
    let (tokens, qh, kvh, hd) = (5, 8, 2, 32);
    for layout in [PairLayout::HalfSplit, PairLayout::Interleaved] {
        let rope = Rope::new(RopeConfig::new(hd, 500_000.0).with_layout(layout)).unwrap();
        let positions: Vec<u32> = (0..tokens).map(|_| random_position(&mut rng)).collect();
        let (qv, kv) = (View::token_major(tokens, qh, hd), View::head_major(tokens, kvh, hd));
        let q: Vec<T> = random_vec(&mut rng, tokens * qh * hd);
        let k: Vec<T> = random_vec(&mut rng, tokens * kvh * hd);
        for inverse in [false, true] {
            let o = opts(&positions, inverse);
            let (mut q1, mut k1) = (q.clone(), k.clone());
            rope.apply(HeadsMut::new(&mut q1, qv), &o).unwrap();
            rope.apply(HeadsMut::new(&mut k1, kv), &o).unwrap();

            let (mut q2, mut k2) = (q.clone(), k.clone());
            rope.apply_qk(HeadsMut::new(&mut q2, qv), Some(HeadsMut::new(&mut k2, kv)), &o).unwrap();
            assert_eq!((bits(&q2), bits(&k2)), (bits(&q1), bits(&k1)), "{} gqa in place", T::NAME);

            let (mut q3, mut k3) = (vec![T::default(); q.len()], vec![T::default(); k.len()]);
            rope.apply_qk_into(
                Heads::new(&q, qv),
                HeadsMut::new(&mut q3, qv),
                Some((Heads::new(&k, kv), HeadsMut::new(&mut k3, kv))),
                &o,
            )
            .unwrap();
            assert_eq!((bits(&q3), bits(&k3)), (bits(&q1), bits(&k1)), "{} gqa out of place", T::NAME);
        }
        // The k result is a real rotation (not, e.g., q's positions reused per head index).
        let mut k1 = k.clone();
        rope.apply(HeadsMut::new(&mut k1, kv), &ApplyOptions::ids(&positions)).unwrap();
        for (t, &p) in positions.iter().enumerate() {
            for h in 0..kvh {
                let off = row_offset(&kv, t, h);
                let r = reference(&rotation_matrix(&rope, p, false), hd, &k[off..off + hd]);
                for d in 0..hd {
                    assert!((f64::from(k1[off + d].to_f32()) - r.y[d]).abs() <= r.bound[d]);
                }
            }
        }
    }
}

#[test]
fn gqa_one_call() {
    check_gqa::<f32>(0x71);
    check_gqa::<f16>(0x72);
    check_gqa::<bf16>(0x73);
}

// ---------------------------------------------------------------------------------------
// 4. Positions and cos/sin sources.

/// `ApplyOptions::start(s)` equals `ApplyOptions::ids(s..s + n)` bit for bit, up to the last position
/// `u32::MAX`; shuffled, repeated `position_ids` rotate each token at its own id.
#[test]
fn position_ids_vs_start() {
    let mut rng = rng(0x81);
    let (tokens, heads, hd) = (9, 2, 24);
    for layout in [PairLayout::HalfSplit, PairLayout::Interleaved] {
        let rope = Rope::new(RopeConfig::new(hd, 10_000.0).with_rotary_dim(16).with_layout(layout)).unwrap();
        let view = View::token_major(tokens, heads, hd);
        let x: Vec<f32> = random_vec(&mut rng, tokens * heads * hd);
        for start in [0u32, 1, 4096, 1 << 31, u32::MAX - tokens as u32 + 1] {
            let ids: Vec<u32> = (0..tokens as u32).map(|t| start + t).collect();
            let (mut a, mut b) = (x.clone(), x.clone());
            rope.apply(HeadsMut::new(&mut a, view), &ApplyOptions::start(start)).unwrap();
            rope.apply(HeadsMut::new(&mut b, view), &ApplyOptions::ids(&ids)).unwrap();
            assert_eq!(bits(&a), bits(&b), "start {start}");
            assert_ne!(bits(&a), bits(&x));
        }
        let ids: Vec<u32> = vec![7, 3, 3, 0, u32::MAX, 100_000, 7, 1, 2];
        let mut a = x.clone();
        rope.apply(HeadsMut::new(&mut a, view), &ApplyOptions::ids(&ids)).unwrap();
        for (t, &p) in ids.iter().enumerate() {
            let w = heads * hd;
            let mut one = x[t * w..(t + 1) * w].to_vec();
            rope.apply(HeadsMut::new(&mut one, View::token_major(1, heads, hd)), &ApplyOptions::start(p))
                .unwrap();
            assert_eq!(bits(&one), bits(&a[t * w..(t + 1) * w]), "token {t} at {p}");
        }
    }
}

/// On the fly, a cache from `build_cache` (with `alloc`), and a caller table from `fill_table`
/// give the same bits, forward and inverse; a table filled from `start` serves positions `start + r` as rows
/// `r`. The table values are `fl32(cos(p * inv_freq))` (within one f32 rounding of f64 cos,
/// plus 2^-52 for the two f64 libraries).
fn check_sources<T: TestElem>(seed: u64) {
    let mut rng = rng(seed);
    let (tokens, heads, hd, rows) = (11, 3, 40, 300usize);
    for layout in [PairLayout::HalfSplit, PairLayout::Interleaved] {
        let rope = Rope::new(RopeConfig::new(hd, 10_000.0).with_rotary_dim(32).with_layout(layout)).unwrap();
        let pairs = rope.config().pairs();
        let view = View::head_major(tokens, heads, hd);
        let x: Vec<T> = random_vec(&mut rng, tokens * heads * hd);
        let mut positions: Vec<u32> = (0..tokens).map(|_| rng.random_range(0..rows as u32)).collect();
        positions[0] = rows as u32 - 1;

        let (mut cos, mut sin) = (vec![0.0f32; rows * pairs], vec![0.0f32; rows * pairs]);
        rope.fill_table(0, &mut cos, &mut sin).unwrap();
        let table = CosSinTable::new(&cos, &sin, pairs).unwrap();
        #[cfg_attr(not(feature = "alloc"), allow(unused_mut))]
        let mut sources = vec![("fill_table", table)];
        #[cfg(feature = "alloc")]
        let cache = rope.build_cache(rows).unwrap();
        #[cfg(feature = "alloc")]
        {
            assert_eq!(cache.rows(), rows);
            sources.push(("build_cache", cache.table()));
        }
        for p in [0u32, 1, 17, rows as u32 - 1] {
            let (c, s) = table.row(p).unwrap();
            for (name, t) in &sources {
                assert_eq!(t.row(p).unwrap(), (c, s), "{name}");
            }
            for i in 0..pairs {
                let (se, ce) = (f64::from(p) * rope.frequencies().inv_freq()[i]).sin_cos();
                assert!((f64::from(c[i]) - ce).abs() <= (U_F32 + 1e-15) * ce.abs(), "cos p={p} i={i}");
                assert!((f64::from(s[i]) - se).abs() <= (U_F32 + 1e-15) * se.abs(), "sin p={p} i={i}");
            }
        }

        for inverse in [false, true] {
            let o = opts(&positions, inverse);
            let mut fly = x.clone();
            rope.apply(HeadsMut::new(&mut fly, view), &o).unwrap();
            for (name, t) in &sources {
                let mut tabled = x.clone();
                rope.apply(HeadsMut::new(&mut tabled, view), &o.with_table(*t)).unwrap();
                assert_eq!(bits(&tabled), bits(&fly), "{} {name}", T::NAME);
            }
        }

        // Per-call rows: a table filled from `start`, used with positions 0..tokens.
        for start in [5u32, 1 << 30, u32::MAX - tokens as u32 + 1] {
            let (mut c, mut s) = (vec![0.0f32; tokens * pairs], vec![0.0f32; tokens * pairs]);
            rope.fill_table(start, &mut c, &mut s).unwrap();
            let t = CosSinTable::new(&c, &s, pairs).unwrap();
            let mut fly = x.clone();
            rope.apply(HeadsMut::new(&mut fly, view), &ApplyOptions::start(start)).unwrap();
            let mut tabled = x.clone();
            rope.apply(HeadsMut::new(&mut tabled, view), &ApplyOptions::start(0).with_table(t)).unwrap();
            assert_eq!(bits(&tabled), bits(&fly), "{} table from {start}", T::NAME);
        }
    }
}

#[test]
fn on_the_fly_vs_cache_vs_table() {
    check_sources::<f32>(0x91);
    check_sources::<f16>(0x92);
    check_sources::<bf16>(0x93);
}

// ---------------------------------------------------------------------------------------
// 5. NaN.

/// A NaN in a rotated pair makes both members of that pair the canonical NaN of the type (the
/// other pairs are unaffected); NaN payloads in pass-through dims stay (in place) or are
/// copied (out of place) bit for bit.
fn check_nan<T: TestElem>(seed: u64) {
    let mut rng = rng(seed);
    let (hd, rd) = (12, 8);
    let canonical = round_bits::<T>(f32::NAN);
    assert_eq!(rope_kernels::CANONICAL_NAN_F32, CANONICAL_NAN_F32);
    assert_eq!(rope_kernels::CANONICAL_NAN_F16, CANONICAL_NAN_F16);
    assert_eq!(rope_kernels::CANONICAL_NAN_BF16, CANONICAL_NAN_BF16);
    for layout in [PairLayout::HalfSplit, PairLayout::Interleaved] {
        let rope = Rope::new(RopeConfig::new(hd, 10_000.0).with_rotary_dim(rd).with_layout(layout)).unwrap();
        let nans = nan_payloads::<T>();
        let (a, b) = pairs(layout, rd)[1];
        let mut x: Vec<T> = random_vec(&mut rng, hd);
        x[a] = nans[0];
        x[rd] = nans[1];
        x[hd - 1] = nans[2];
        let clean: Vec<T> =
            x.iter().enumerate().map(|(i, v)| if i == a { T::default() } else { *v }).collect();
        let view = View::token_major(1, 1, hd);
        let mut y = x.clone();
        rope.apply(HeadsMut::new(&mut y, view), &ApplyOptions::start(3)).unwrap();
        let mut out = vec![T::default(); hd];
        rope.apply_into(Heads::new(&x, view), HeadsMut::new(&mut out, view), &ApplyOptions::start(3))
            .unwrap();
        let mut yc = clean.clone();
        rope.apply(HeadsMut::new(&mut yc, view), &ApplyOptions::start(3)).unwrap();
        for r in [&y, &out] {
            for d in 0..hd {
                let want = if d == a || d == b {
                    canonical
                } else if d >= rd {
                    x[d].to_bits_u32()
                } else {
                    yc[d].to_bits_u32()
                };
                assert_eq!(r[d].to_bits_u32(), want, "{} {layout:?} d={d}", T::NAME);
            }
        }
    }
}

#[test]
fn nan_canonical_and_payloads_kept() {
    check_nan::<f32>(0xA1);
    check_nan::<f16>(0xA2);
    check_nan::<bf16>(0xA3);
}
