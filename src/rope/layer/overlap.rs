//! Whether two head sets of one buffer share an element (type-independent: one copy for
//! every element-type combination).

use super::HeadSet;

/// Whether two head sets of one buffer, each validated for `tokens` tokens of `head_dim`
/// elements ([`HeadSet::validate`]), share an element. Exact, on the elements the sets
/// touch. First three `O(1)` tests that prove the sets apart (the usual layouts end here):
/// - their bounding ranges are apart (e.g. q and k as two tensors of one allocation);
/// - every row start of `a` is `a.offset` modulo `g`, of `b` `b.offset` modulo `g`, `g` the
///   gcd of the strides in use: if those residues are at least `head_dim` apart (on the
///   circle of `g`), no two rows meet (GPT-NeoX's `[heads][q, k, v]` interleaving);
/// - with one token stride `S` for both, each set lies within one interval per token
///   (`offset + t * S`, its per-token span long): if the two intervals are apart modulo `S`,
///   so are the sets (`[q heads | k heads | v heads]` rows);
///
/// then, when none applies, the exact search:
/// - with one token, or the same token stride `S`, row `(t1, h1)` of `a` meets row `(t2,
///   h2)` of `b` iff `|a.offset + h1 * a.head_stride - b.offset - h2 * b.head_stride + k *
///   S| < head_dim` for `k = t2 - t1`: for each head of the set with fewer heads, one
///   arithmetic progression per head of the other set (or per `k`, whichever are fewer);
/// - otherwise each row of the set with fewer rows is compared with the last row of the
///   other set that starts at or before its end, found in `O(1)` because that set's rows nest
///   (`O(tokens * heads)` of the smaller set).
pub(crate) fn sets_overlap(a: &HeadSet, b: &HeadSet, tokens: usize, head_dim: usize) -> bool {
    if tokens == 0 || a.heads == 0 || b.heads == 0 || head_dim == 0 {
        return false;
    }
    // Validated against one buffer (at most `isize::MAX` elements): every element index and
    // every difference of two fits in i64.
    let span = |s: &HeadSet| (tokens - 1) * s.token_stride + (s.heads - 1) * s.head_stride + head_dim;
    let (a_end, b_end) = (a.offset + span(a), b.offset + span(b));
    if a_end <= b.offset || b_end <= a.offset {
        return false;
    }
    if apart_by_residue(a, b, tokens, head_dim) {
        return false;
    }
    let per_token = |s: &HeadSet| (s.heads - 1) * s.head_stride + head_dim;
    if tokens > 1 && a.token_stride == b.token_stride {
        let st = a.token_stride;
        let (ra, rb) = (a.offset % st, b.offset % st);
        // Circular distances from a's interval start to b's, and back.
        let (ab, ba) = ((rb + st - ra) % st, (ra + st - rb) % st);
        if ab >= per_token(a) && ba >= per_token(b) {
            return false;
        }
    }
    let d = head_dim as i64;
    if tokens == 1 || a.token_stride == b.token_stride {
        let (a, b) = if a.heads <= b.heads { (a, b) } else { (b, a) };
        let (s, kmax) = if tokens == 1 { (0, 0) } else { (a.token_stride as i64, tokens as i64 - 1) };
        for h1 in 0..a.heads {
            let x = (a.offset + h1 * a.head_stride) as i64;
            let hit = if b.heads as i64 <= 2 * kmax + 1 {
                (0..b.heads).any(|h2| {
                    let y = (b.offset + h2 * b.head_stride) as i64;
                    progression_hits(y, s, -kmax, kmax, x - d, x + d)
                })
            } else {
                (-kmax..=kmax).any(|k| {
                    let y = b.offset as i64 + k * s;
                    progression_hits(y, b.head_stride as i64, 0, b.heads as i64 - 1, x - d, x + d)
                })
            };
            if hit {
                return true;
            }
        }
        return false;
    }
    let rows = |s: &HeadSet| tokens * s.heads;
    let (a, b) = if rows(a) <= rows(b) { (a, b) } else { (b, a) };
    for t in 0..tokens {
        for h in 0..a.heads {
            let x = a.offset + t * a.token_stride + h * a.head_stride;
            if let Some(y) = last_row_at_or_below(b, tokens, x + head_dim - 1) {
                if y + head_dim > x {
                    return true;
                }
            }
        }
    }
    false
}

/// Whether the row starts of `a` and `b` fall in residue classes modulo the gcd `g` of the
/// strides in use that are at least `head_dim` apart (then no two rows can meet).
fn apart_by_residue(a: &HeadSet, b: &HeadSet, tokens: usize, head_dim: usize) -> bool {
    let gcd = |mut x: usize, mut y: usize| {
        while y != 0 {
            (x, y) = (y, x % y);
        }
        x
    };
    let mut g = 0;
    for s in [a, b] {
        if s.heads > 1 {
            g = gcd(g, s.head_stride);
        }
        if tokens > 1 {
            g = gcd(g, s.token_stride);
        }
    }
    if g == 0 {
        // One row each: their bounding ranges (checked by the caller) are the rows.
        return false;
    }
    let r = (b.offset % g + g - a.offset % g) % g;
    r.min(g - r) >= head_dim
}

/// Whether some `y + k * step` with `k` in `k0..=k1` lies strictly between `lo` and `hi`.
#[inline]
fn progression_hits(y: i64, step: i64, k0: i64, k1: i64, lo: i64, hi: i64) -> bool {
    if k0 > k1 {
        return false;
    }
    if step == 0 {
        return lo < y && y < hi;
    }
    // The smallest k with y + k * step > lo.
    let k = ((lo - y).div_euclid(step) + 1).max(k0);
    k <= k1 && y + k * step < hi
}

/// The start of the last row of validated set `s` that starts at or before element `v`.
/// The rows nest (sorted by stride, each stride exceeds the extent inside it), so the outer
/// index is `(v - base) / outer_stride` clamped, then the same for the inner one.
fn last_row_at_or_below(s: &HeadSet, tokens: usize, v: usize) -> Option<usize> {
    if v < s.offset {
        return None;
    }
    let mut dims = [(tokens, s.token_stride), (s.heads, s.head_stride)];
    if dims[0].1 < dims[1].1 {
        dims.swap(0, 1);
    }
    let mut base = s.offset;
    for (count, stride) in dims {
        if count > 1 && stride > 0 {
            base += ((v - base) / stride).min(count - 1) * stride;
        }
    }
    Some(base)
}
