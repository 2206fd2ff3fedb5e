//! Test-only: a deliberately slowed call, so that the regression gates
//! (`scripts/bench-gate.sh` in time, `scripts/instr-gate.sh` in instructions) can be shown
//! to catch a slowdown. The library carries no hook for it: the harness adds the work.
//!
//! Compiled only with `--cfg rope_gate_slowdown="2x"` or `--cfg rope_gate_slowdown="5pct"`
//! in `RUSTFLAGS` (as `scripts/gate-demo.sh` sets it through `CANDIDATE_RUSTFLAGS`, so only
//! the candidate side is slowed). It is a `cfg`, not a Cargo feature, so no
//! `--all-features` build switches it on.
//!
//! Before its real call, every `apply_qk` case rotates a share of the (token, head) rows of
//! its q and k a second time, with the same `Rope` (so the same tier) and cos/sin source,
//! into a scratch buffer that is then discarded: the outputs are unchanged. Per tensor, of
//! the `rows = tokens * heads` rows of the call:
//! - `"2x"`: every row (about twice the work);
//! - `"5pct"`: `round(rows / 20)` rows (5% more rows; none for a tensor of fewer than 10
//!   rows): decode of 32 q and 8 k heads, 2 of the 40 rows; 64 tokens of 8 heads, 26 of 512.
//!
//! The extra rows are the first ones in (token, head) order, rotated in `apply_into` calls
//! of up to [`GROUP`] heads of one token.

use rope_kernels::{Apply, CosSinTable, Element, Heads, HeadsMut, Rope, View};

/// Heads per call of the extra pass (its scratch holds this many heads).
pub(crate) const GROUP: usize = 8;

/// How many of a tensor's `rows` rows the pass rotates again.
fn extra_rows(rows: usize) -> usize {
    if cfg!(rope_gate_slowdown = "2x") {
        rows
    } else {
        rows.saturating_add(10) / 20
    }
}

/// Rotates the first `extra_rows(tokens * heads)` rows of the dense BSHD tensor `x`
/// (`[tokens][heads][head_dim]`, positions from `start`) into `scratch` (`GROUP * head_dim`
/// elements), with `rope` and the cos/sin `table` of the real call.
pub(crate) fn extra_pass<T: Element>(
    rope: &Rope,
    x: &[T],
    [tokens, heads, head_dim]: [usize; 3],
    start: u32,
    table: Option<CosSinTable<'_>>,
    scratch: &mut [T],
) {
    let mut extra = extra_rows(tokens.saturating_mul(heads));
    for t in 0..tokens {
        let mut h = 0;
        while h < heads && extra > 0 {
            let n = GROUP.min(heads - h).min(extra);
            let at = (t * heads + h) * head_dim;
            let mut opts = Apply::start(start + t as u32);
            if let Some(c) = table {
                opts = opts.with_table(c);
            }
            let src = Heads::new(&x[at..at + n * head_dim], View::bshd(1, n, head_dim));
            let dst = HeadsMut::new(&mut scratch[..n * head_dim], View::bshd(1, n, head_dim));
            rope.apply_into(src, dst, &opts).expect("the extra pass's call is valid");
            h += n;
            extra -= n;
        }
        if extra == 0 {
            break;
        }
    }
    std::hint::black_box(scratch);
}
