//! MRoPE and 2-D vision RoPE (issue 15): errors (nothing written), agreement with the 1-D
//! RoPE where the streams coincide, the position helpers.

use rope_kernels::{
    vision_position_ids, ApplyOptions, CosSinTable, Heads, HeadsMut, LongRopeParams, MRope, MRopeIndex,
    MRopeOptions, MRopeStyle, PairLayout, Rope, RopeConfig, RopeError, Scaling, View, VisionOptions,
    VisionRope, YarnParams, TOKEN_IMAGE, TOKEN_TEXT, TOKEN_VIDEO,
};

fn qwen2vl() -> MRope<'static> {
    MRope::new(RopeConfig::new(128, 1e6), [16, 24, 24], MRopeStyle::Sectioned).unwrap()
}

fn input(n: usize) -> Vec<f32> {
    (0..n).map(|i| ((i * 37 % 101) as f32 - 50.0) / 16.0).collect()
}

#[test]
fn construction_errors() {
    let c = RopeConfig::new(128, 1e6);
    for (section, style) in [
        ([16, 24, 23], MRopeStyle::Sectioned),
        ([16, 24, 25], MRopeStyle::Sectioned),
        ([usize::MAX, 24, 24], MRopeStyle::Sectioned),
        // Interleaved: 3 * h must be <= pairs + 1, 3 * w <= pairs.
        ([20, 22, 22], MRopeStyle::Interleaved),
        ([0, 21, 22], MRopeStyle::Interleaved),
    ] {
        assert_eq!(
            MRope::new(c.clone(), section, style).err(),
            Some(RopeError::InvalidMropeSection { mrope_section: section, pairs: 64 }),
            "{section:?} {style:?}"
        );
    }
    // Edge of the interleaved bounds: accepted.
    MRope::new(c.clone(), [22, 21, 21], MRopeStyle::Interleaved).unwrap();
    // Errors of the 1-D configuration come first.
    assert_eq!(
        MRope::new(RopeConfig::new(128, 1e6).with_rotary_dim(63), [16, 24, 24], MRopeStyle::Sectioned).err(),
        Some(RopeError::InvalidRotaryDim { rotary_dim: 63 })
    );
    // Every scaling combines (see `dynamic_scaling_matches_plain_rope`).
    MRope::new(c.clone().with_scaling(Scaling::Linear { factor: 2.0 }), [16, 24, 24], MRopeStyle::Sectioned)
        .unwrap();
    MRope::new(
        c.clone().with_scaling(Scaling::Yarn(YarnParams::new(4.0, 32768))),
        [16, 24, 24],
        MRopeStyle::Sectioned,
    )
    .unwrap();

    // Vision: rotary_dim a multiple of 4, no scaling.
    assert_eq!(
        VisionRope::new(RopeConfig::new(80, 1e4).with_rotary_dim(78)).err(),
        Some(RopeError::InvalidRotaryDim { rotary_dim: 78 })
    );
    assert_eq!(
        VisionRope::new(RopeConfig::new(80, 1e4).with_scaling(Scaling::Linear { factor: 2.0 })).err(),
        Some(RopeError::UnsupportedScaling { operation: "vision", scaling: "linear" })
    );
    let v = VisionRope::new(RopeConfig::new(80, 1e4)).unwrap();
    assert_eq!(v.axis_frequencies().pairs(), 20);
    assert_eq!(
        v.clone().with_hf_inv_freq(&[1.0; 40]).err(),
        Some(RopeError::InvFreqLength { expected: 20, len: 40 })
    );
    assert_eq!(
        v.with_hf_inv_freq(&[f32::NAN; 20]).err(),
        Some(RopeError::InvalidScalingParameter { name: "inv_freq" })
    );
    assert_eq!(
        qwen2vl().with_hf_inv_freq(&[1.0; 20]).err(),
        Some(RopeError::InvFreqLength { expected: 64, len: 20 })
    );
}

#[test]
fn call_errors_write_nothing() {
    let m = qwen2vl();
    let x = input(3 * 2 * 128);
    let (t, h, w) = ([0u32, 1, 2], [0u32, 1, 2], [0u32, 1]);
    let view = View::token_major(3, 2, 128);
    let mut y = x.clone();
    // A stream of the wrong length (w), on the fly.
    let e = m.apply(HeadsMut::new(&mut y, view), &MRopeOptions::ids([&t, &h, &w]));
    assert_eq!(e, Err(RopeError::PositionCountMismatch { tokens: 3, positions: 2 }));
    assert_eq!(y, x);
    // Views are checked before the streams.
    let e = m.apply(HeadsMut::new(&mut y[..100], view), &MRopeOptions::ids([&t, &h, &w]));
    assert!(matches!(e, Err(RopeError::BufferTooShort { .. })), "{e:?}");
    // A table of the wrong width, then one of too few rows (positions: token indices).
    let (cos, sin) = (vec![0.5f32; 3 * 32], vec![0.5f32; 3 * 32]);
    let narrow = CosSinTable::new(&cos, &sin, 32).unwrap();
    assert_eq!(
        m.apply(HeadsMut::new(&mut y, view), &MRopeOptions::table(narrow)),
        Err(RopeError::TableShape)
    );
    let (cos, sin) = (vec![0.5f32; 2 * 64], vec![0.5f32; 2 * 64]);
    let short = CosSinTable::new(&cos, &sin, 64).unwrap();
    assert_eq!(
        m.apply(HeadsMut::new(&mut y, view), &MRopeOptions::table(short)),
        Err(RopeError::PositionOutOfRange { position: 2, rows: 2 })
    );
    // Out of place, k with another token count.
    let mut out = vec![7.0f32; x.len()];
    let kx = input(2 * 128);
    let mut ko = vec![7.0f32; kx.len()];
    let e = m.apply_qk_into(
        Heads::new(&x, view),
        HeadsMut::new(&mut out, view),
        Some((
            Heads::new(&kx, View::token_major(2, 1, 128)),
            HeadsMut::new(&mut ko, View::token_major(2, 1, 128)),
        )),
        &MRopeOptions::ids([&t, &h, &t]),
    );
    assert!(matches!(e, Err(RopeError::ShapeMismatch { .. })), "{e:?}");
    assert!(out.iter().chain(&ko).all(|&v| v == 7.0));
    assert_eq!(y, x);

    // fill_table: streams of different lengths, slices of the wrong length; nothing written.
    let (mut c, mut s) = (vec![9.0f32; 3 * 64], vec![9.0f32; 3 * 64]);
    assert_eq!(
        m.fill_table([&t, &h, &w], &mut c, &mut s),
        Err(RopeError::PositionCountMismatch { tokens: 3, positions: 2 })
    );
    assert_eq!(m.fill_table([&t, &h, &t], &mut c[..100], &mut s[..100]), Err(RopeError::TableShape));
    assert!(c.iter().chain(&s).all(|&v| v == 9.0));

    // Vision: the same checks over two streams.
    let v = VisionRope::new(RopeConfig::new(80, 1e4)).unwrap();
    let vx = input(3 * 80);
    let mut vy = vx.clone();
    let e = v.apply(HeadsMut::new(&mut vy, View::token_major(3, 1, 80)), &VisionOptions::ids([&t, &w]));
    assert_eq!(e, Err(RopeError::PositionCountMismatch { tokens: 3, positions: 2 }));
    assert_eq!(vy, vx);
    // Zero tokens: Ok no-op once the arguments are consistent.
    v.apply(HeadsMut::new(&mut vy, View::token_major(0, 1, 80)), &VisionOptions::ids([&[], &[]])).unwrap();
}

/// Text tokens (t = h = w) rotate exactly as the 1-D RoPE, in both styles and modes.
#[test]
fn text_tokens_match_plain_rope() {
    let c = RopeConfig::new(128, 1e6);
    let pos = [0u32, 5, 17, 4095, 1 << 20, u32::MAX];
    let view = View::token_major(pos.len(), 3, 128);
    let x = input(pos.len() * 3 * 128);
    for style in [MRopeStyle::Sectioned, MRopeStyle::Interleaved] {
        let section = if style == MRopeStyle::Sectioned { [16, 24, 24] } else { [24, 20, 20] };
        for hf in [false, true] {
            let mut m = MRope::new(c.clone(), section, style).unwrap();
            let mut r = Rope::new(c.clone()).unwrap();
            if hf {
                let inv = r.frequencies().inv_freq_f32().to_vec();
                m = m.with_hf_inv_freq(&inv).unwrap();
                r = r.with_hf_inv_freq(&inv).unwrap();
            }
            let (mut a, mut b) = (x.clone(), x.clone());
            m.apply(HeadsMut::new(&mut a, view), &MRopeOptions::ids([&pos, &pos, &pos])).unwrap();
            r.apply(HeadsMut::new(&mut b, view), &ApplyOptions::ids(&pos)).unwrap();
            assert_eq!(a, b, "{style:?} hf {hf}");
            // The inverse undoes it (to rounding).
            m.apply(HeadsMut::new(&mut a, view), &MRopeOptions::ids([&pos, &pos, &pos]).inverse()).unwrap();
            assert!(a.iter().zip(&x).all(|(p, q)| (p - q).abs() < 1e-5));
        }
    }
}

/// A vision RoPE with h = w = p is a 1-D RoPE of the duplicated per-axis frequencies:
/// check one pair of each axis against libm.
#[test]
fn vision_pairs_use_their_axis() {
    for layout in [PairLayout::HalfSplit, PairLayout::Interleaved] {
        let v = VisionRope::new(RopeConfig::new(16, 100.0).with_layout(layout)).unwrap();
        let (h, w) = ([3u32], [11u32]);
        let mut cos = [0.0f32; 8];
        let mut sin = [0.0f32; 8];
        v.fill_table([&h, &w], &mut cos, &mut sin).unwrap();
        for j in 0..8 {
            let (p, k) = if j < 4 { (3.0, j) } else { (11.0, j - 4) };
            let inv = libm_pow(100.0, -2.0 * k as f64 / 8.0);
            assert!((f64::from(cos[j]) - (p * inv).cos()).abs() < 1e-7, "cos {j}");
            assert!((f64::from(sin[j]) - (p * inv).sin()).abs() < 1e-7, "sin {j}");
        }
    }
}

fn libm_pow(a: f64, b: f64) -> f64 {
    a.powf(b)
}

#[test]
fn stream_of_pair_follows_style() {
    let m = MRope::new(RopeConfig::new(128, 1e6), [24, 20, 20], MRopeStyle::Interleaved).unwrap();
    let s: Vec<usize> = (0..64).map(|j| m.stream_of_pair(j).unwrap()).collect();
    assert_eq!(&s[..6], &[0, 1, 2, 0, 1, 2]);
    assert_eq!(&s[57..], &[0, 1, 2, 0, 0, 0, 0]);
    assert_eq!(s.iter().filter(|&&x| x == 0).count(), 24);
    assert_eq!(m.stream_of_pair(64), None);
    assert_eq!(qwen2vl().stream_of_pair(15), Some(0));
    assert_eq!(qwen2vl().stream_of_pair(16), Some(1));
    assert_eq!(qwen2vl().stream_of_pair(40), Some(2));
}

#[test]
fn index_with_video_and_errors() {
    // text 2, video [2, 2, 4] (2 frames of 1x2 tokens), text 1; Qwen2.5-VL step 2 per frame.
    let types = [0, 0, 2, 2, 2, 2, 0];
    let video = [[2, 2, 4]];
    let idx = MRopeIndex {
        token_types: &types,
        video_grid_thw: &video,
        second_per_grid_ts: &[1.0],
        tokens_per_second: 2.0,
        spatial_merge_size: 2,
        start: 0,
        ..MRopeIndex::default()
    };
    let ([t, h, w], next) = idx.to_vecs().unwrap();
    assert_eq!(t, [0, 1, 2, 2, 4, 4, 5]);
    assert_eq!(h, [0, 1, 2, 2, 2, 2, 5]);
    assert_eq!(w, [0, 1, 2, 3, 2, 3, 5]);
    assert_eq!(next, 6);
    // Qwen2-VL (no step): t advances 1 per frame.
    let ([t, _, _], _) = MRopeIndex { second_per_grid_ts: &[], ..idx }.to_vecs().unwrap();
    assert_eq!(t, [0, 1, 2, 2, 3, 3, 4]);

    let layout = |i: MRopeIndex<'_>| {
        let (mut a, mut b, mut c) = ([9u32; 7], [9u32; 7], [9u32; 7]);
        let e = i.fill(&mut a, &mut b, &mut c);
        assert!(a.iter().chain(&b).chain(&c).all(|&v| v == 9), "written on error");
        e
    };
    let is_layout = |e: Result<u32, RopeError>| matches!(e, Err(RopeError::InvalidPositionLayout { .. }));
    assert!(is_layout(layout(MRopeIndex { video_grid_thw: &[], ..idx })));
    assert!(is_layout(layout(MRopeIndex {
        video_grid_thw: &[[2, 2, 6]],
        second_per_grid_ts: &[1.0],
        ..idx
    })));
    assert!(is_layout(layout(MRopeIndex { spatial_merge_size: 3, ..idx })));
    assert!(is_layout(layout(MRopeIndex { spatial_merge_size: 0, ..idx })));
    assert!(is_layout(layout(MRopeIndex { second_per_grid_ts: &[1.0, 2.0], ..idx })));
    assert!(is_layout(layout(MRopeIndex { second_per_grid_ts: &[f32::NAN], ..idx })));
    assert!(is_layout(layout(MRopeIndex { image_grid_thw: &[[1, 2, 2]], ..idx })));
    assert!(is_layout(layout(MRopeIndex { token_types: &[0, 0, 2, 2, 2, 2, 7], ..idx })));
    assert!(is_layout(layout(MRopeIndex { token_types: &[0, 0, 2, 2, 2, 1, 0], ..idx })));
    assert_eq!(layout(MRopeIndex { start: u32::MAX - 3, ..idx }), Err(RopeError::PositionOverflow));
    let (mut a, mut b, mut c) = ([0u32; 7], [0u32; 6], [0u32; 7]);
    assert_eq!(
        idx.fill(&mut a, &mut b, &mut c),
        Err(RopeError::PositionCountMismatch { tokens: 7, positions: 6 })
    );
    // Images: t constant; text resumes at the block's largest position + 1.
    let types = [TOKEN_TEXT, TOKEN_IMAGE, TOKEN_IMAGE, TOKEN_TEXT];
    let ([t, h, w], next) = MRopeIndex {
        token_types: &types,
        image_grid_thw: &[[1, 2, 4]],
        spatial_merge_size: 2,
        start: 10,
        ..MRopeIndex::default()
    }
    .to_vecs()
    .unwrap();
    assert_eq!((t, h, w, next), (vec![10, 11, 11, 13], vec![10, 11, 11, 13], vec![10, 11, 12, 13], 14));
    let _ = TOKEN_VIDEO;
}

#[test]
fn vision_positions_errors() {
    let (mut h, mut w) = ([7u32; 8], [7u32; 8]);
    assert!(matches!(
        vision_position_ids([1, 2, 3], 2, &mut h[..6], &mut w[..6]),
        Err(RopeError::InvalidPositionLayout { .. })
    ));
    assert_eq!(
        vision_position_ids([2, 2, 2], 2, &mut h[..7], &mut w),
        Err(RopeError::PositionCountMismatch { tokens: 8, positions: 7 })
    );
    assert!(h.iter().chain(&w).all(|&v| v == 7));
    assert_eq!(vision_position_ids([2, 2, 2], 2, &mut h, &mut w), Ok(8));
    assert_eq!(h, [0, 0, 1, 1, 0, 0, 1, 1]);
    assert_eq!(w, [0, 1, 0, 1, 0, 1, 0, 1]);
}

/// The borrowed-RoPE forms (`Rope::apply_mrope_qk`, `apply_vision_qk`: the C ABI's) give
/// the objects' bits, with computed and with caller f32 frequencies.
#[test]
fn rope_ref_forms_match_objects() {
    let pos = [vec![0u32, 3, 3, 9, 70_000], vec![0u32, 3, 4, 9, 12], vec![0u32, 3, 5, 9, 1 << 30]];
    let ids = [&pos[0][..], &pos[1][..], &pos[2][..]];
    let x = input(5 * 4 * 128);
    let view = View::token_major(5, 4, 128);
    for (section, style) in [([16, 24, 24], MRopeStyle::Sectioned), ([24, 20, 20], MRopeStyle::Interleaved)] {
        for hf in [false, true] {
            let c = RopeConfig::new(128, 1e6);
            let mut m = MRope::new(c.clone(), section, style).unwrap();
            let mut r = Rope::new(c).unwrap();
            if hf {
                let inv: Vec<f32> = r.frequencies().inv_freq_f32().iter().map(|f| f * 1.001).collect();
                m = m.with_hf_inv_freq(&inv).unwrap();
                r = r.with_hf_inv_freq(&inv).unwrap();
            }
            let (mut a, mut b) = (x.clone(), x.clone());
            m.apply(HeadsMut::new(&mut a, view), &MRopeOptions::ids(ids)).unwrap();
            r.as_ref()
                .apply_mrope_qk(HeadsMut::new(&mut b, view), None, section, style, &MRopeOptions::ids(ids))
                .unwrap();
            assert_eq!(a, b, "{style:?} hf {hf}");
            let (mut c1, mut s1, mut c2, mut s2) =
                (vec![0.0; 5 * 64], vec![0.0; 5 * 64], vec![0.0; 5 * 64], vec![0.0; 5 * 64]);
            m.fill_table(ids, &mut c1, &mut s1).unwrap();
            r.as_ref().fill_mrope_table(ids, section, style, &mut c2, &mut s2).unwrap();
            assert_eq!((c1, s1), (c2, s2));
        }
    }
    // Configuration errors of the borrowed form, before the views.
    let r = Rope::new(RopeConfig::new(128, 1e6)).unwrap();
    let mut y = x.clone();
    assert_eq!(
        r.as_ref().apply_mrope_qk(
            HeadsMut::new(&mut y[..3], view),
            None,
            [16, 24, 25],
            MRopeStyle::Sectioned,
            &MRopeOptions::ids(ids)
        ),
        Err(RopeError::InvalidMropeSection { mrope_section: [16, 24, 25], pairs: 64 })
    );
    assert_eq!(y, x);

    // Vision: HF's per-axis table k at 1-D index 2k.
    let vx = input(5 * 2 * 80);
    let vview = View::token_major(5, 2, 80);
    let vids = [&pos[0][..], &pos[1][..]];
    for hf in [false, true] {
        let c = RopeConfig::new(80, 1e4);
        let mut v = VisionRope::new(c.clone()).unwrap();
        let mut r = Rope::new(c).unwrap();
        if hf {
            let axis: Vec<f32> = v.axis_frequencies().inv_freq_f32().iter().map(|f| f * 0.999).collect();
            let full: Vec<f32> = (0..40).map(|i| axis[i / 2]).collect();
            v = v.with_hf_inv_freq(&axis).unwrap();
            r = r.with_hf_inv_freq(&full).unwrap();
        }
        let (mut a, mut b) = (vx.clone(), vx.clone());
        v.apply(HeadsMut::new(&mut a, vview), &VisionOptions::ids(vids)).unwrap();
        r.as_ref().apply_vision_qk(HeadsMut::new(&mut b, vview), None, &VisionOptions::ids(vids)).unwrap();
        assert_eq!(a, b, "vision hf {hf}");
    }
    let bad = Rope::new(RopeConfig::new(80, 1e4).with_rotary_dim(78)).unwrap();
    assert_eq!(
        bad.as_ref().apply_vision_qk(HeadsMut::new(&mut y, vview), None, &VisionOptions::ids(vids)),
        Err(RopeError::InvalidRotaryDim { rotary_dim: 78 })
    );
}

/// Llama 4's vision encoder (`Llama4VisionRotaryEmbedding` + `vision_apply_rotary_emb`) is
/// `VisionRope` with interleaved (complex) pairs and 1-based `[x, y]` streams: pair `j <
/// head_dim / 4` at `(x + 1) * f_j`, the rest at `(y + 1) * f_(j - head_dim / 4)`, `f_k =
/// theta^(-2k / (head_dim / 2))`; the CLS token (masked to the identity) is `[0, 0]`.
#[test]
fn llama4_vision_is_interleaved_vision_rope() {
    let (hd, theta) = (88usize, 10_000.0f64);
    let v = VisionRope::new(RopeConfig::new(hd, theta).with_layout(PairLayout::Interleaved)).unwrap();
    // Patches (x, y) = (3, 0), (0, 5), (31, 31), then CLS.
    let (xs, ys) = ([4u32, 1, 32, 0], [1u32, 6, 32, 0]);
    let x = input(4 * hd);
    let mut y = x.clone();
    v.apply(HeadsMut::new(&mut y, View::token_major(4, 1, hd)), &VisionOptions::ids([&xs, &ys])).unwrap();
    let q = hd / 4;
    for t in 0..4 {
        for j in 0..hd / 2 {
            let (p, k) = if j < q { (xs[t], j) } else { (ys[t], j - q) };
            let a = f64::from(p) * theta.powf(-2.0 * k as f64 / (hd / 2) as f64);
            let (x0, x1) = (f64::from(x[t * hd + 2 * j]), f64::from(x[t * hd + 2 * j + 1]));
            let want = [x0 * a.cos() - x1 * a.sin(), x1 * a.cos() + x0 * a.sin()];
            for (d, w) in want.iter().enumerate() {
                let got = f64::from(y[t * hd + 2 * j + d]);
                assert!((got - w).abs() < 2e-6, "token {t} pair {j}: {got} vs {w}");
            }
        }
    }
    assert_eq!(y[3 * hd..], x[3 * hd..], "CLS at [0, 0] is the identity");
}

/// Dynamic NTK (and LongRoPE) frequencies are those of the call's length, the largest
/// position over the three streams + 1: text tokens rotate as the 1-D RoPE does at the same
/// positions, on the fly, through a table and on a borrowed RoPE.
#[test]
fn dynamic_scaling_matches_plain_rope() {
    let long = LongRopeParams::new(&[1.0; 64], &[4.0; 64], 4096, 8.0).unwrap();
    for scaling in [Scaling::DynamicNtk { factor: 2.0, max_position_embeddings: 64 }, Scaling::LongRope(long)]
    {
        let c = RopeConfig::new(128, 1e6).with_scaling(scaling);
        let r = Rope::new(c.clone()).unwrap();
        for pos in [vec![0u32, 5, 17], vec![3u32, 100, 5000], vec![9000u32, 1, 2]] {
            let view = View::token_major(3, 2, 128);
            let x = input(3 * 2 * 128);
            let (mut want, mut y) = (x.clone(), x.clone());
            r.apply(HeadsMut::new(&mut want, view), &ApplyOptions::ids(&pos)).unwrap();
            for style in [MRopeStyle::Sectioned, MRopeStyle::Interleaved] {
                let section = if style == MRopeStyle::Sectioned { [16, 24, 24] } else { [24, 20, 20] };
                let m = MRope::new(c.clone(), section, style).unwrap();
                let ids = [&pos[..], &pos[..], &pos[..]];
                y.copy_from_slice(&x);
                m.apply(HeadsMut::new(&mut y, view), &MRopeOptions::ids(ids)).unwrap();
                assert_eq!(y, want, "{style:?} {pos:?}");
                let table = m.build_table(ids).unwrap();
                y.copy_from_slice(&x);
                m.apply(HeadsMut::new(&mut y, view), &MRopeOptions::table(table.table())).unwrap();
                assert_eq!(y, want, "{style:?} {pos:?} table");
                y.copy_from_slice(&x);
                r.as_ref()
                    .apply_mrope_qk(
                        HeadsMut::new(&mut y, view),
                        None,
                        section,
                        style,
                        &MRopeOptions::ids(ids),
                    )
                    .unwrap();
                assert_eq!(y, want, "{style:?} {pos:?} borrowed");
            }
        }
    }
}

/// Every pair of a filled row uses its own stream's position (the formula of `MRopeStyle`,
/// written out here) for many sections of both styles, and on-the-fly rows are the table's.
#[test]
fn rows_follow_the_section_formula() {
    let stream = |style: MRopeStyle, [st, sh, sw]: [usize; 3], j: usize| match style {
        MRopeStyle::Sectioned => usize::from(j >= st) + usize::from(j >= st + sh),
        MRopeStyle::Interleaved if j % 3 == 1 && j < 3 * sh => 1,
        MRopeStyle::Interleaved if j % 3 == 2 && j < 3 * sw => 2,
        MRopeStyle::Interleaved => 0,
    };
    let (t, h, w) = ([7u32, 1000], [300u32, 3], [55u32, 77_777]);
    for pairs in [8usize, 9, 21, 64] {
        let r = Rope::new(RopeConfig::new(2 * pairs, 1e4)).unwrap();
        let inv = r.frequencies().inv_freq().to_vec();
        for sh in 0..=(pairs + 1) / 3 {
            for sw in 0..=pairs / 3 {
                for style in [MRopeStyle::Sectioned, MRopeStyle::Interleaved] {
                    let section = [pairs - sh - sw, sh, sw];
                    let m = MRope::new(RopeConfig::new(2 * pairs, 1e4), section, style).unwrap();
                    let (mut cos, mut sin) = (vec![0.0f32; 2 * pairs], vec![0.0f32; 2 * pairs]);
                    m.fill_table([&t, &h, &w], &mut cos, &mut sin).unwrap();
                    for n in 0..2 {
                        let pos = [t[n], h[n], w[n]];
                        // The 1-D rows at each stream's position: every pair has their bits.
                        let one_d = pos.map(|p| {
                            let (mut c, mut s) = (vec![0.0f32; pairs], vec![0.0f32; pairs]);
                            r.fill_table(p, &mut c, &mut s).unwrap();
                            (c, s)
                        });
                        for j in 0..pairs {
                            let (c1, s1) = &one_d[stream(style, section, j)];
                            assert_eq!(
                                cos[n * pairs + j].to_bits(),
                                c1[j].to_bits(),
                                "{style:?} {section:?} {j}"
                            );
                            assert_eq!(
                                sin[n * pairs + j].to_bits(),
                                s1[j].to_bits(),
                                "{style:?} {section:?} {j}"
                            );
                            let a = f64::from(pos[stream(style, section, j)]) * inv[j];
                            let (c, s) = (cos[n * pairs + j], sin[n * pairs + j]);
                            assert!(
                                (f64::from(c) - a.cos()).abs() < 1e-6,
                                "{style:?} {section:?} token {n} pair {j}"
                            );
                            assert!(
                                (f64::from(s) - a.sin()).abs() < 1e-6,
                                "{style:?} {section:?} token {n} pair {j}"
                            );
                        }
                    }
                    // On the fly = the table, bit for bit.
                    let x = input(2 * 2 * pairs);
                    let view = View::token_major(2, 1, 2 * pairs);
                    let (mut a, mut b) = (x.clone(), x.clone());
                    m.apply(HeadsMut::new(&mut a, view), &MRopeOptions::ids([&t, &h, &w])).unwrap();
                    let table = CosSinTable::new(&cos, &sin, pairs).unwrap();
                    m.apply(HeadsMut::new(&mut b, view), &MRopeOptions::table(table)).unwrap();
                    assert_eq!(a, b, "{style:?} {section:?}");
                }
            }
        }
    }
}

/// Runs `fill` on canaried outputs; asserts nothing is written when it fails.
fn fill_or_untouched(idx: &MRopeIndex<'_>) -> Result<(Vec<u32>, u32), RopeError> {
    let n = idx.token_types.len();
    let (mut a, mut b, mut c) = (vec![9u32; n], vec![9u32; n], vec![9u32; n]);
    let r = idx.fill(&mut a, &mut b, &mut c);
    if r.is_err() {
        assert!(a.iter().chain(&b).chain(&c).all(|&v| v == 9), "written on error: {r:?}");
    }
    r.map(|next| (a, next))
}

#[test]
fn index_never_wraps_on_huge_steps() {
    // Review 15 finding 1: text token, then a video of 2 frames with a huge step.
    let types = [TOKEN_TEXT, TOKEN_VIDEO, TOKEN_VIDEO];
    let grids = [[2u32, 1, 1]];
    let idx = MRopeIndex {
        token_types: &types,
        video_grid_thw: &grids,
        second_per_grid_ts: &[1e30],
        tokens_per_second: 2.0,
        spatial_merge_size: 1,
        ..MRopeIndex::default()
    };
    assert_eq!(fill_or_untouched(&idx), Err(RopeError::PositionOverflow));
    // Products that overflow f32 to +inf, steps at the edge of u32, start at the edge.
    let cases: [(f32, f32, u32, Result<(), RopeError>); 7] = [
        (f32::MAX, 2.0, 0, Err(RopeError::PositionOverflow)),
        (f32::MAX, f32::MAX, 0, Err(RopeError::PositionOverflow)),
        (4_294_967_296.0, 1.0, 0, Err(RopeError::PositionOverflow)),
        (2_147_483_648.0, 1.0, 0, Ok(())),
        (2_147_483_648.0, 1.0, u32::MAX / 2, Err(RopeError::PositionOverflow)),
        (0.0, 2.0, u32::MAX - 2, Ok(())),
        (0.0, 2.0, u32::MAX - 1, Err(RopeError::PositionOverflow)),
    ];
    for (s, tps, start, want) in cases {
        let steps = [s];
        let i = MRopeIndex { second_per_grid_ts: &steps, tokens_per_second: tps, start, ..idx };
        assert_eq!(fill_or_untouched(&i).map(|_| ()), want, "s {s} tps {tps} start {start}");
    }
    // Bad steps and tokens_per_second are layout errors (NaN, inf, negative, 0 tps).
    for s in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, -1.0, -f32::MIN_POSITIVE] {
        let steps = [s];
        let i = MRopeIndex { second_per_grid_ts: &steps, ..idx };
        assert!(matches!(fill_or_untouched(&i), Err(RopeError::InvalidPositionLayout { .. })), "{s}");
    }
    for tps in [f32::NAN, f32::INFINITY, -2.0, 0.0] {
        let i = MRopeIndex { second_per_grid_ts: &[1.0], tokens_per_second: tps, ..idx };
        assert!(matches!(fill_or_untouched(&i), Err(RopeError::InvalidPositionLayout { .. })), "{tps}");
    }
    // Without steps, tokens_per_second is not read.
    let i = MRopeIndex { tokens_per_second: f32::NAN, ..MRopeIndex { second_per_grid_ts: &[], ..idx } };
    assert_eq!(fill_or_untouched(&i), Ok((vec![0, 1, 2], 3)));
    // A grid of u32::MAX frames cannot fit its tokens: a clean layout error, no huge walk.
    let big = [[u32::MAX, 1, 1]];
    let i = MRopeIndex { video_grid_thw: &big, ..idx };
    assert!(fill_or_untouched(&i).is_err());
    // Positions near u32::MAX in h/w: start + row.
    let types = [TOKEN_IMAGE; 4];
    let i = MRopeIndex {
        token_types: &types,
        image_grid_thw: &[[1, 2, 2]],
        spatial_merge_size: 1,
        start: u32::MAX - 2,
        ..MRopeIndex::default()
    };
    assert_eq!(fill_or_untouched(&i).map(|(_, n)| n), Ok(u32::MAX));
    let i = MRopeIndex { start: u32::MAX - 1, ..i };
    assert_eq!(fill_or_untouched(&i), Err(RopeError::PositionOverflow));
}

#[test]
fn video_t_follows_transformers_f32_arithmetic() {
    // Review 15 finding 9: fps 10.25, temporal_patch_size 2, tokens_per_second 2: frame 41
    // has t = trunc(f32(f32(41 * f32(2 / 10.25)) * 2)) = 15 in transformers 5.x (16 in reals).
    let s = 2.0f32 / 10.25;
    let types = [TOKEN_VIDEO; 42];
    let grids = [[42u32, 1, 1]];
    let idx = MRopeIndex {
        token_types: &types,
        video_grid_thw: &grids,
        second_per_grid_ts: &[s],
        tokens_per_second: 2.0,
        spatial_merge_size: 1,
        ..MRopeIndex::default()
    };
    let ([t, h, w], next) = idx.to_vecs().unwrap();
    assert_eq!(t[41], 15);
    assert_eq!(t[40], 15);
    assert_eq!(t[39], 15);
    assert_eq!(t[38], 14);
    assert!(h.iter().chain(&w).all(|&p| p == 0));
    assert_eq!(next, 16);
    // Every frame, as the f32 formula (not reassociated, not f64).
    for (f, &tf) in t.iter().enumerate() {
        assert_eq!(tf, ((f as f32 * s) * 2.0) as u32, "frame {f}");
    }
}

#[test]
fn rope_ref_vision_table_is_the_vision_table() {
    // Review 15 finding 4 (the C ABI's `rope_vision_fill_table` calls this): the per-axis
    // table of `VisionRope::fill_table`, not the MRoPE table of the same streams.
    let config = RopeConfig::new(80, 1e4);
    let vit = VisionRope::new(config.clone()).unwrap();
    let rope = Rope::new(config).unwrap();
    let (mut h, mut w) = ([0u32; 24], [0u32; 24]);
    vision_position_ids([1, 4, 6], 2, &mut h, &mut w).unwrap();
    let n = 24 * 40;
    let (mut c0, mut s0, mut c1, mut s1) = (vec![0.0; n], vec![0.0; n], vec![9.0; n], vec![9.0; n]);
    vit.fill_table([&h, &w], &mut c0, &mut s0).unwrap();
    rope.as_ref().fill_vision_table([&h, &w], &mut c1, &mut s1).unwrap();
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!((bits(&c0), bits(&s0)), (bits(&c1), bits(&s1)));
    let (mut c2, mut s2) = (vec![0.0; n], vec![0.0; n]);
    rope.as_ref()
        .fill_mrope_table([&h, &w, &w], [20, 20, 0], MRopeStyle::Sectioned, &mut c2, &mut s2)
        .unwrap();
    assert_ne!(bits(&c0), bits(&c2), "the MRoPE table differs from the vision table");
    // Errors write nothing: a short table, a scaled RoPE.
    let (mut c3, mut s3) = (vec![9.0; n - 1], vec![9.0; n - 1]);
    assert!(rope.as_ref().fill_vision_table([&h, &w], &mut c3, &mut s3).is_err());
    let scaled = Rope::new(RopeConfig::new(80, 1e4).with_scaling(Scaling::Linear { factor: 2.0 })).unwrap();
    assert!(matches!(
        scaled.as_ref().fill_vision_table([&h, &w], &mut c1[..], &mut s1[..]),
        Err(RopeError::UnsupportedScaling { .. })
    ));
    assert!(c3.iter().chain(&s3).all(|&v| v == 9.0));
    assert_eq!(bits(&c1), bits(&c0));
}
