//! Fused QK-norm + RoPE (issue 15): the Qwen3 golden case, the fused op against a norm pass
//! followed by a RoPE pass (bit for bit, on the scalar tier), the norm against an oracle
//! written here from the documented order, and the errors.

use std::path::PathBuf;

mod support;

use rand::RngExt;
use rope_kernels::{
    bf16, f16, ApplyOptions, CosSinTable, Element, Heads, HeadsMut, Operand, PairLayout, QkNorm, Rope,
    RopeConfig, RopeError, Tier, View, WeightOffset,
};
use serde_json::Value;
use support::elem::bits;
use support::rng::{rng, TestRng};

fn golden() -> Value {
    let path: PathBuf =
        [env!("CARGO_MANIFEST_DIR"), "tests", "data", "golden", "mm", "qwen3_qknorm_rope.json"]
            .iter()
            .collect();
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

fn f64s(v: &Value, k: &str) -> Vec<f64> {
    v[k].as_array().unwrap_or_else(|| panic!("{k}")).iter().map(|x| x.as_f64().unwrap()).collect()
}

fn max_diff(a: &[f32], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).map(|(x, y)| (f64::from(*x) - y).abs()).fold(0.0, f64::max)
}

/// Qwen3-8B's q norm + RoPE on 2 heads at positions up to 40959 (transformers 5.24,
/// `Qwen3RMSNorm` then `apply_rotary_pos_emb`): within 7e-7 (README's claim) of the f64
/// `out_exact` (Exact angles) and of HF's f32 `out_hf` (HfCompatible with HF's `inv_freq`);
/// the norm alone within 7e-7 of `normed_exact` and `normed_hf`. Measured: 5.4e-7, 4.8e-7,
/// 6.7e-7, 4.8e-7 (normed_exact, normed_hf, out_exact, out_hf).
#[test]
fn golden_qwen3_qknorm_rope() {
    let v = golden();
    let hd = v["head_dim"].as_u64().unwrap() as usize;
    let heads = v["heads"].as_u64().unwrap() as usize;
    assert_eq!(v["layout"], "half");
    let theta = v["params"]["rope_theta"].as_f64().unwrap();
    let eps = v["qk_norm"]["eps"].as_f64().unwrap() as f32;
    let weight: Vec<f32> = f64s(&v["qk_norm"], "weight").iter().map(|&w| w as f32).collect();
    let positions: Vec<u32> = f64s(&v, "positions").iter().map(|&p| p as u32).collect();
    let x: Vec<f32> = f64s(&v, "x").iter().map(|&x| x as f32).collect();
    let view = View::token_major(positions.len(), heads, hd);
    let norm = QkNorm::qwen3(&weight, &weight, eps);

    let exact = Rope::new(RopeConfig::new(hd, theta)).unwrap();
    let mut normed = x.clone();
    exact.norm_qk(HeadsMut::new(&mut normed, view), None, &norm).unwrap();
    let e_norm = max_diff(&normed, &f64s(&v, "normed_exact"));
    let e_norm_hf = max_diff(&normed, &f64s(&v, "normed_hf"));
    let mut y = x.clone();
    exact.apply_qk_norm(HeadsMut::new(&mut y, view), None, &norm, &ApplyOptions::ids(&positions)).unwrap();
    let e_exact = max_diff(&y, &f64s(&v, "out_exact"));

    let hf_inv: Vec<f32> = f64s(&v, "hf_inv_freq").iter().map(|&f| f as f32).collect();
    let hf = Rope::new(RopeConfig::new(hd, theta)).unwrap().with_hf_inv_freq(&hf_inv).unwrap();
    let mut yh = x.clone();
    hf.apply_qk_norm(HeadsMut::new(&mut yh, view), None, &norm, &ApplyOptions::ids(&positions)).unwrap();
    let e_hf = max_diff(&yh, &f64s(&v, "out_hf"));
    eprintln!("qwen3 qknorm: normed_exact {e_norm:.3e}, normed_hf {e_norm_hf:.3e}, out_exact {e_exact:.3e}, out_hf {e_hf:.3e}");
    assert!(e_norm <= 7e-7, "normed_exact {e_norm:e}");
    assert!(e_norm_hf <= 7e-7, "normed_hf {e_norm_hf:e}");
    assert!(e_exact <= 7e-7, "out_exact {e_exact:e}");
    assert!(e_hf <= 7e-7, "out_hf {e_hf:e}");

    // The check discriminates: without the weight, or with Gemma's 1 + weight, it fails.
    let ones = vec![1.0f32; hd];
    for wrong in [QkNorm::qwen3(&ones, &ones, eps), QkNorm::gemma3(&weight, &weight, eps)] {
        let mut yw = x.clone();
        exact
            .apply_qk_norm(HeadsMut::new(&mut yw, view), None, &wrong, &ApplyOptions::ids(&positions))
            .unwrap();
        assert!(max_diff(&yw, &f64s(&v, "out_exact")) > 1e-3, "{wrong:?} not detected");
    }
}

/// The norm as documented (16 partial sums, pairwise tree, `1 / sqrt(mean + eps)`, the
/// per-form element formula), written independently of the crate.
fn oracle_norm<T: Element>(head: &mut [T], w: &[f32], eps: f32, form: &str) {
    let mut acc = [0.0f32; 16];
    for (i, x) in head.iter().enumerate() {
        let x = x.to_f32();
        acc[i % 16] += x * x;
    }
    for w in [8, 4, 2, 1] {
        for j in 0..w {
            acc[j] += acc[j + w];
        }
    }
    let inv = 1.0 / (acc[0] / head.len() as f32 + eps).sqrt();
    for (i, x) in head.iter_mut().enumerate() {
        let n = x.to_f32() * inv;
        *x = match form {
            "qwen3" => T::from_f32(w[i] * T::from_f32(n).to_f32()),
            "gemma" => T::from_f32(n * (1.0 + w[i])),
            _ => T::from_f32(n),
        };
    }
}

fn rand_vec<T: Element>(rng: &mut TestRng, n: usize) -> Vec<T> {
    (0..n).map(|_| T::from_f32(rng.random_range(-4.0f32..4.0))).collect()
}

/// For the three forms, f32/f16/bf16, both layouts, partial rotary_dim, GQA, in place and out
/// of place, on the fly and from a table: the fused op on the scalar tier equals `norm_qk`
/// followed by `apply_qk` (Qwen3, Gemma) or `apply_qk` followed by `norm_qk` (Llama 4),
/// bit for bit; and `norm_qk` equals the oracle above.
fn reference_suite<T: Element>(seed: u64) {
    let mut rng = rng(seed);
    for case in 0..60 {
        let pairs = rng.random_range(1..=40);
        let rd = 2 * pairs;
        let hd = rd + if rng.random_bool(0.5) { 0 } else { rng.random_range(1..20) };
        let layout = if rng.random_bool(0.5) { PairLayout::HalfSplit } else { PairLayout::Interleaved };
        let rope = Rope::new(RopeConfig::new(hd, 10_000.0).with_rotary_dim(rd).with_layout(layout))
            .unwrap()
            .with_tier(Tier::Scalar)
            .unwrap();
        let (tokens, qh, kh) = (rng.random_range(1..4), rng.random_range(1..6), rng.random_range(1..3));
        let (qv, kv) = (View::token_major(tokens, qh, hd), View::head_major(tokens, kh, hd));
        let q: Vec<T> = rand_vec(&mut rng, tokens * qh * hd);
        let k: Vec<T> = rand_vec(&mut rng, tokens * kh * hd);
        let qw: Vec<f32> = (0..hd).map(|_| rng.random_range(-2.0f32..2.0)).collect();
        let kw: Vec<f32> = (0..hd).map(|_| rng.random_range(-2.0f32..2.0)).collect();
        let eps = [1e-6f32, 1e-5, 0.0][case % 3];
        let positions: Vec<u32> = (0..tokens).map(|_| rng.random_range(0..5000)).collect();
        let (mut cos, mut sin) = (vec![0.0; 5000 * pairs], vec![0.0; 5000 * pairs]);
        rope.fill_table(0, &mut cos, &mut sin).unwrap();
        let table = CosSinTable::new(&cos, &sin, pairs).unwrap();
        let opts = if rng.random_bool(0.5) {
            ApplyOptions::ids(&positions)
        } else {
            ApplyOptions::ids(&positions).with_table(table)
        };
        let opts = if rng.random_bool(0.3) { opts.inverse() } else { opts };
        for (form, norm) in [
            ("qwen3", QkNorm::qwen3(&qw, &kw, eps)),
            ("gemma", QkNorm::gemma3(&qw, &kw, eps)),
            ("llama4", QkNorm::llama4(eps)),
        ] {
            let what = format!("case {case} {form} hd {hd} rd {rd} {layout:?}");
            // The norm alone against the oracle.
            let (mut nq, mut nk) = (q.clone(), k.clone());
            rope.norm_qk(HeadsMut::new(&mut nq, qv), Some(HeadsMut::new(&mut nk, kv)), &norm).unwrap();
            let (mut oq, mut ok) = (q.clone(), k.clone());
            for head in oq.chunks_mut(hd) {
                oracle_norm(head, &qw, eps, form);
            }
            for head in ok.chunks_mut(hd) {
                oracle_norm(head, &kw, eps, form);
            }
            assert_eq!(bits(&nq), bits(&oq), "{what}: norm q");
            assert_eq!(bits(&nk), bits(&ok), "{what}: norm k");

            // Two passes.
            let (mut rq, mut rk) = (q.clone(), k.clone());
            if form == "llama4" {
                rope.apply_qk(HeadsMut::new(&mut rq, qv), Some(HeadsMut::new(&mut rk, kv)), &opts).unwrap();
                rope.norm_qk(HeadsMut::new(&mut rq, qv), Some(HeadsMut::new(&mut rk, kv)), &norm).unwrap();
            } else {
                rope.norm_qk(HeadsMut::new(&mut rq, qv), Some(HeadsMut::new(&mut rk, kv)), &norm).unwrap();
                rope.apply_qk(HeadsMut::new(&mut rq, qv), Some(HeadsMut::new(&mut rk, kv)), &opts).unwrap();
            }
            // Fused, in place.
            let (mut fq, mut fk) = (q.clone(), k.clone());
            rope.apply_qk_norm(HeadsMut::new(&mut fq, qv), Some(HeadsMut::new(&mut fk, kv)), &norm, &opts)
                .unwrap();
            assert_eq!(bits(&fq), bits(&rq), "{what}: fused q");
            assert_eq!(bits(&fk), bits(&rk), "{what}: fused k");
            // Fused, out of place (outputs BHSD / BSHD).
            let (oqv, okv) = (View::head_major(tokens, qh, hd), View::token_major(tokens, kh, hd));
            let (mut uq, mut uk) = (vec![T::default(); q.len()], vec![T::default(); k.len()]);
            rope.apply_qk_norm_into(
                Heads::new(&q, qv),
                HeadsMut::new(&mut uq, oqv),
                Some((Heads::new(&k, kv), HeadsMut::new(&mut uk, okv))),
                &norm,
                &opts,
            )
            .unwrap();
            for t in 0..tokens {
                for h in 0..qh {
                    let (a, b) = (
                        t * qv.token_stride + h * qv.head_stride,
                        t * oqv.token_stride + h * oqv.head_stride,
                    );
                    assert_eq!(bits(&uq[b..b + hd]), bits(&rq[a..a + hd]), "{what}: into q t{t} h{h}");
                }
                for h in 0..kh {
                    let (a, b) = (
                        t * kv.token_stride + h * kv.head_stride,
                        t * okv.token_stride + h * okv.head_stride,
                    );
                    assert_eq!(bits(&uk[b..b + hd]), bits(&rk[a..a + hd]), "{what}: into k t{t} h{h}");
                }
            }
        }
    }
}

#[test]
fn fused_equals_two_scalar_passes_f32() {
    reference_suite::<f32>(1);
}

#[test]
fn fused_equals_two_scalar_passes_f16() {
    reference_suite::<f16>(2);
}

#[test]
fn fused_equals_two_scalar_passes_bf16() {
    reference_suite::<bf16>(3);
}

/// Qwen3's HF semantics for bf16: `x * inv_rms` is rounded to bf16 before the weight
/// multiply (`weight * hidden_states.to(input_dtype)`), which differs from one rounding of
/// `weight * x * inv_rms` on some elements.
#[test]
fn qwen3_rounds_before_the_weight() {
    let rope = Rope::new(RopeConfig::new(64, 10_000.0)).unwrap();
    let x: Vec<bf16> = (0..64).map(|i| bf16::from_f32(0.3 + i as f32 * 0.17)).collect();
    let w: Vec<f32> = (0..64).map(|i| bf16::from_f32(0.8 + i as f32 * 0.013).to_f32()).collect();
    let mut y = x.clone();
    rope.norm_qk(HeadsMut::new(&mut y, View::token_major(1, 1, 64)), None, &QkNorm::qwen3(&w, &w, 1e-6))
        .unwrap();
    let mut want = x.clone();
    oracle_norm(&mut want, &w, 1e-6, "qwen3");
    assert_eq!(bits(&y), bits(&want));
    let mut once: Vec<f32> = x.iter().map(|v| v.to_f32()).collect();
    oracle_norm(&mut once, &w, 1e-6, "plain");
    let once: Vec<bf16> = once.iter().zip(&w).map(|(n, w)| bf16::from_f32(n * w)).collect();
    assert_ne!(bits(&y), bits(&once), "the inner rounding is observable on this input");
}

#[test]
fn errors_write_nothing() {
    let rope = Rope::new(RopeConfig::new(8, 10_000.0)).unwrap();
    let w = [1.0f32; 8];
    let short = [1.0f32; 7];
    let x0 = [0.5f32; 2 * 8];
    let cases: [(QkNorm<'_>, bool, RopeError); 6] = [
        (
            QkNorm::qwen3(&short, &w, 1e-6),
            false,
            RopeError::NormWeightLength { operand: Operand::Q, expected: 8, len: 7 },
        ),
        (
            QkNorm::qwen3(&w, &short, 1e-6),
            true,
            RopeError::NormWeightLength { operand: Operand::K, expected: 8, len: 7 },
        ),
        (QkNorm::gemma3(&w, &w, f32::NAN), false, RopeError::InvalidNormEps),
        (
            QkNorm::Rms { q_weight: &w, k_weight: &w, eps: -1e-6, offset: WeightOffset::Zero },
            false,
            RopeError::InvalidNormEps,
        ),
        (QkNorm::llama4(f32::INFINITY), false, RopeError::InvalidNormEps),
        (QkNorm::llama4(-0.5), true, RopeError::InvalidNormEps),
    ];
    for (norm, with_k, err) in cases {
        let (mut q, mut k) = (x0, x0);
        let kk = with_k.then(|| HeadsMut::new(&mut k[..], View::token_major(2, 1, 8)));
        let got = rope.apply_qk_norm(
            HeadsMut::new(&mut q, View::token_major(2, 1, 8)),
            kk,
            &norm,
            &ApplyOptions::start(0),
        );
        assert_eq!(got, Err(err), "{norm:?}");
        assert_eq!(q, x0);
        assert_eq!(k, x0);
        let kk = with_k.then(|| HeadsMut::new(&mut k[..], View::token_major(2, 1, 8)));
        assert_eq!(rope.norm_qk(HeadsMut::new(&mut q, View::token_major(2, 1, 8)), kk, &norm), Err(err));
        assert_eq!(q, x0);
        let mut out = [0.0f32; 16];
        let got = rope.apply_qk_norm_into(
            Heads::new(&x0, View::token_major(2, 1, 8)),
            HeadsMut::new(&mut out, View::token_major(2, 1, 8)),
            None,
            &norm,
            &ApplyOptions::start(0),
        );
        if !with_k {
            assert_eq!(got, Err(err));
            assert_eq!(out, [0.0; 16]);
        }
    }
    // The k weight is not checked without k; view errors come first, position errors after.
    let mut q = x0;
    let norm = QkNorm::qwen3(&w, &short, 1e-6);
    assert_eq!(
        rope.apply_qk_norm(
            HeadsMut::new(&mut q, View::token_major(2, 1, 8)),
            None,
            &norm,
            &ApplyOptions::start(0)
        ),
        Ok(())
    );
    let bad = QkNorm::qwen3(&short, &w, 1e-6);
    assert!(matches!(
        rope.apply_qk_norm(
            HeadsMut::new(&mut q, View::token_major(3, 1, 8)),
            None,
            &bad,
            &ApplyOptions::start(0)
        ),
        Err(RopeError::BufferTooShort { .. })
    ));
    let ok = QkNorm::qwen3(&w, &w, 1e-6);
    assert_eq!(
        rope.apply_qk_norm(
            HeadsMut::new(&mut q, View::token_major(2, 1, 8)),
            None,
            &ok,
            &ApplyOptions::ids(&[1])
        ),
        Err(RopeError::PositionCountMismatch { tokens: 2, positions: 1 })
    );
}
