//! The benchmark rooflines (`__bench::roofline_in_place`, `__bench::roofline_in_place_tokens`,
//! `__bench::roofline_copy`, issue 18) on every tier: every row length from 0 to 70 bf16 (past two 64-byte vectors), at every
//! start offset, leaves the data unchanged (in place) or copies exactly the rows (out of
//! place), touching nothing else; bad shapes are errors.

use rope_kernels::__bench::{roofline_copy, roofline_in_place, roofline_in_place_tokens, RooflineRows};
use rope_kernels::dispatch::available_tiers;
use rope_kernels::{bf16, Operand, RopeError};

#[test]
fn rooflines_touch_exactly_their_rows() {
    for tier in available_tiers() {
        // Under Miri the lengths around each vector width only, and rows of 4 and of 16 whole
        // AVX2 vectors (the unrolled fixed-length passes; 2 and 8 AVX-512 ones); natively
        // every length to 70 and every fixed length up to 16 AVX-512 vectors (512 bf16).
        let lens: Vec<usize> = if cfg!(miri) {
            vec![0, 1, 2, 3, 15, 16, 17, 31, 32, 33, 47, 64, 256]
        } else {
            (0..=70).chain([80, 96, 112, 128, 160, 192, 224, 256, 384, 512, 513]).collect()
        };
        for &row_len in &lens {
            for (off, prefetch) in [(0usize, false), (1, true), (3, false), (16, true)] {
                let (rows, stride) = (3, row_len + 5);
                let r = RooflineRows { rows, stride, row_len, prefetch };
                let n = off + rows * stride + 7;
                let src: Vec<bf16> = (0..n).map(|i| bf16::from_bits((i * 7 + 1) as u16)).collect();
                let mut x = src.clone();
                roofline_in_place(tier, &mut x[off..], r, 0).unwrap();
                assert_eq!(x, src, "{tier} in place, row_len {row_len}, offset {off}");
                for streaming in [false, true] {
                    let mut d = vec![bf16::from_bits(0xA5); n];
                    roofline_copy(tier, &src[off..], &mut d[off..], r, streaming).unwrap();
                    for (i, (&a, &b)) in d.iter().zip(&src).enumerate() {
                        let inside = i >= off && (i - off) % stride < row_len && (i - off) / stride < rows;
                        assert_eq!(
                            a,
                            if inside { b } else { bf16::from_bits(0xA5) },
                            "{tier} copy {streaming} {row_len} {off} @{i}"
                        );
                    }
                }
            }
        }
        // Dense rows (merged into one pass; with prefetch, into 4 KB rows and a rest) of f32.
        for prefetch in [false, true] {
            let n = 33 * 125;
            let src: Vec<f32> = (0..n).map(|i| i as f32).collect();
            let mut d = vec![0.0f32; n];
            let r = RooflineRows { rows: 33, stride: 125, row_len: 125, prefetch };
            roofline_copy(tier, &src, &mut d, r, true).unwrap();
            assert_eq!(d, src);
            let mut x = src.clone();
            roofline_in_place(tier, &mut x, r, 0).unwrap();
            assert_eq!(x, src);
        }
    }
}

#[test]
fn roofline_shapes_are_checked() {
    let tier = available_tiers().last().unwrap();
    let mut x = [0.0f32; 64];
    let r = RooflineRows { rows: 2, stride: 32, row_len: 33, prefetch: false };
    assert_eq!(
        roofline_in_place(tier, &mut x, r, 0),
        Err(RopeError::OverlappingStrides { operand: Operand::Q })
    );
    let r = RooflineRows { rows: 3, stride: 32, row_len: 8, prefetch: false };
    assert_eq!(
        roofline_in_place(tier, &mut x, r, 0),
        Err(RopeError::BufferTooShort { operand: Operand::Q, needed: 72, len: 64 })
    );
    let r = RooflineRows { rows: 2, stride: usize::MAX, row_len: 8, prefetch: false };
    assert_eq!(roofline_in_place(tier, &mut x, r, 0), Err(RopeError::StrideOverflow { operand: Operand::Q }));
    let r = RooflineRows { rows: 2, stride: 32, row_len: 8, prefetch: false };
    assert!(roofline_in_place(tier, &mut x, r, 1).is_err());
    let src = [0.0f32; 64];
    let mut short = [0.0f32; 39];
    assert_eq!(
        roofline_copy(tier, &src, &mut short, r, false),
        Err(RopeError::BufferTooShort { operand: Operand::QOut, needed: 40, len: 39 })
    );
}

#[test]
fn token_rooflines_leave_both_tensors_unchanged() {
    for tier in available_tiers() {
        // Partial rows (rotary part of each head), dense rows (merged, with a 4 KB rest), and
        // under Miri a small shape only.
        let shapes: &[(usize, usize, usize, usize)] =
            if cfg!(miri) { &[(3, 2, 5, 2)] } else { &[(3, 4, 24, 96), (5, 3, 128, 128), (7, 1, 20, 80)] };
        for &(tokens, heads, row_len, stride) in shapes {
            for prefetch in [false, true] {
                let qr = RooflineRows { rows: 2 * heads, stride, row_len, prefetch };
                let kr = RooflineRows { rows: heads, stride, row_len, prefetch };
                let q0: Vec<f32> = (0..tokens * 2 * heads * stride + 3).map(|i| i as f32).collect();
                let k0: Vec<f32> = (0..tokens * heads * stride + 1).map(|i| -(i as f32)).collect();
                let (mut q, mut k) = (q0.clone(), k0.clone());
                roofline_in_place_tokens(tier, &mut q, qr, &mut k, kr, tokens, 0).unwrap();
                assert_eq!((q, k), (q0, k0), "{tier} {tokens} {heads} {row_len} {stride} {prefetch}");
            }
        }
    }
}

#[test]
fn token_roofline_shapes_are_checked() {
    let tier = available_tiers().last().unwrap();
    let (mut q, mut k) = ([0.0f32; 64], [0.0f32; 32]);
    let r = RooflineRows { rows: 2, stride: 16, row_len: 8, prefetch: false };
    // Two tokens of q fit (64 elements), two of k do not (needs 56 of 32).
    assert_eq!(
        roofline_in_place_tokens(tier, &mut q, r, &mut k, r, 2, 0),
        Err(RopeError::BufferTooShort { operand: Operand::K, needed: 56, len: 32 })
    );
    assert_eq!(
        roofline_in_place_tokens(tier, &mut q, r, &mut k, r, 3, 0),
        Err(RopeError::BufferTooShort { operand: Operand::Q, needed: 88, len: 64 })
    );
    assert_eq!(
        roofline_in_place_tokens(tier, &mut q, r, &mut k, r, usize::MAX, 0),
        Err(RopeError::StrideOverflow { operand: Operand::Q })
    );
    let wide = RooflineRows { rows: 2, stride: 8, row_len: 9, prefetch: false };
    assert_eq!(
        roofline_in_place_tokens(tier, &mut q, wide, &mut k, r, 1, 0),
        Err(RopeError::OverlappingStrides { operand: Operand::Q })
    );
    assert!(roofline_in_place_tokens(tier, &mut q, r, &mut k, r, 1, 1).is_err());
    // No tokens: nothing to touch, nothing refused.
    roofline_in_place_tokens(tier, &mut q, r, &mut k, r, 0, 0).unwrap();
}
