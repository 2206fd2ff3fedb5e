//! The overlap rule of head sets against brute force.

use super::*;

/// Whether two sets share an element, by marking every element of one.
fn brute_overlap(a: &HeadSet, b: &HeadSet, tokens: usize, hd: usize, len: usize) -> bool {
    let mut mark = vec![false; len];
    let rows = |s: HeadSet| {
        (0..tokens)
            .flat_map(move |t| (0..s.heads).map(move |h| s.offset + t * s.token_stride + h * s.head_stride))
    };
    for r in rows(*a) {
        mark[r..r + hd].iter_mut().for_each(|m| *m = true);
    }
    rows(*b).any(|r| mark[r..r + hd].iter().any(|&m| m))
}

/// The set fits `len` elements and its rows nest (what the call checks before overlap).
fn fits(s: &HeadSet, tokens: usize, hd: usize, len: usize) -> bool {
    match s.view(tokens).validate(hd, usize::MAX, Operand::Q) {
        Ok(0) => true,
        Ok(n) => s.offset + n <= len,
        Err(_) => false,
    }
}

#[test]
fn overlap_rule_matches_brute_force() {
    let mut rng = SmallRng::seed_from_u64(17);
    let (mut hits, mut misses) = (0, 0);
    let ropes: Vec<Rope> =
        [2, 4, 6].iter().map(|&hd| Rope::new(RopeConfig::new(hd, 10_000.0)).unwrap()).collect();
    let cases = if cfg!(miri) { 200 } else { 40_000 };
    for n in 0..cases {
        let rope = &ropes[n % 3];
        let hd = rope.config().head_dim;
        let tokens = rng.random_range(1..5);
        let len = 160;
        let set = |rng: &mut SmallRng, ts: Option<usize>| HeadSet {
            offset: rng.random_range(0..40),
            heads: rng.random_range(0..4),
            token_stride: ts.unwrap_or_else(|| rng.random_range(0..30)),
            head_stride: rng.random_range(0..16),
        };
        let a = set(&mut rng, None);
        // Half the cases share the token stride (the rows of one fused buffer).
        let b = set(&mut rng, if n % 2 == 0 { Some(a.token_stride) } else { None });
        if !fits(&a, tokens, hd, len) || !fits(&b, tokens, hd, len) {
            continue;
        }
        let expect = brute_overlap(&a, &b, tokens, hd, len);
        let mut buf = vec![1.0f32; len];
        let r = rope.apply_head_sets(&mut buf, tokens, a, Some(b), &ApplyOptions::start(3));
        let what = format!("a {a:?} b {b:?} tokens {tokens} hd {hd}");
        if expect {
            hits += 1;
            assert_eq!(r, Err(RopeError::OverlappingHeadSets { a: Operand::Q, b: Operand::K }), "{what}");
            assert!(buf.iter().all(|&x| x == 1.0), "written on error: {what}");
        } else {
            misses += 1;
            assert_eq!(r, Ok(()), "{what}");
        }
        // v (read) against k (in place): the pair k-v.
        let mut buf = vec![1.0f32; len];
        let mut out = vec![0.0f32; tokens * b.heads.max(1) * hd];
        let view = View::token_major(tokens, b.heads, hd);
        let r = rope.apply_layer(
            Qkv::new(&mut buf, tokens, [HeadSet::default(), a, b]),
            Dest::<f32>::Skip,
            Dest::<f32>::InPlace,
            Dest::Tensor { data: &mut out, view },
            &LayerOptions::default(),
        );
        if expect {
            assert_eq!(r, Err(RopeError::OverlappingHeadSets { a: Operand::K, b: Operand::V }), "{what}");
        } else {
            assert_eq!(r, Ok(()), "{what}");
        }
    }
    assert!(hits > cases / 20 && misses > cases / 20, "hits {hits} misses {misses}");
}
