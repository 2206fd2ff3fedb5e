#!/usr/bin/env python3
"""Prints the model-zoo table from the criterion results of `cargo bench --features bench-internals --bench zoo`.

Reads target/criterion/**/new/{benchmark,sample}.json (or the directory given), groups
`<model>/<shape>/<variant>` with functions `<tier>/{rope,roof*,conv}@<round>` (see
benches/zoo.rs; the rounds of a kind are measured in turn with the other kinds, and a
function without `@` is one round). Time per iteration: criterion's fastest sample over
the rounds (on a shared machine preemption inflates the others), `--median` for the
median of the rounds' criterion medians.

For each rope row: rope time, roofline time (the fastest `roof*`: ordinary or streaming
stores, with or without software prefetch, in place also token by token), the ratio
roofline / rope (1.0 = at the memory limit), the issue-18 target and ok/MISS; for f16/bf16
also the ratio against the conversion roofline (`conv`). Then the relative targets: dynamic
NTK / LongRoPE rows within 1.15x of their `-default` twin, on the fly within 1.3x of cached
at decode, the off16 decode row within 1.15x of the aligned one. Then the rotary_dim sweep
(`rd-sweep/...`): time per rotated element (criterion's throughput) within 1.25x of the
nearest rotary_dim whose pairs fill whole vectors, and no SIMD tier slower than `portable`.

Exit status 1 if any rope row beats its roofline by more than 1.05x (the roofline is then
not an upper bound, so it is wrong) or if no row was found; target misses are listed but do
not fail unless `--strict`. `--self-test` checks that rule on made-up results.

Usage: python3 scripts/zoo-table.py [--median] [--strict] [CRITERION_DIR]
"""

import glob
import json
import os
import statistics
import sys
import tempfile

ROOF_LIMIT = 1.05


ELEMENTS = {}
"""{group: criterion throughput in elements}, filled by `load` (the sweep's per-element times)."""


def load(root, median):
    """{(group, tier, kind): ns per iteration}, over the rounds `<kind>@<round>` of a kind:
    the fastest sample of any round, or (`median`) the median of the rounds' medians."""
    ELEMENTS.clear()
    rounds = {}
    for bench in glob.glob(os.path.join(root, "**", "new", "benchmark.json"), recursive=True):
        with open(bench) as f:
            b = json.load(f)
        parts = b["group_id"].split("/")
        fparts = (b.get("function_id") or "").split("/")
        if len(parts) != 3 or len(fparts) != 2:
            continue
        d = os.path.dirname(bench)
        if median:
            with open(os.path.join(d, "estimates.json")) as f:
                ns = json.load(f)["median"]["point_estimate"]
        else:
            with open(os.path.join(d, "sample.json")) as f:
                s = json.load(f)
            ns = min(t / n for t, n in zip(s["times"], s["iters"]))
        elements = (b.get("throughput") or {}).get("Elements")
        if elements:
            ELEMENTS[b["group_id"]] = elements
        kind = fparts[1].split("@")[0]
        rounds.setdefault((b["group_id"], fparts[0], kind), []).append(ns)
    return {k: statistics.median(v) if median else min(v) for k, v in rounds.items()}


def fmt(ns):
    if ns >= 1e6:
        return f"{ns / 1e6:.2f} ms"
    if ns >= 1e3:
        return f"{ns / 1e3:.2f} µs"
    return f"{ns:.0f} ns"


def target(shape, dtype):
    """(target ratio, which roofline) for a row."""
    if dtype == "f32":
        return (0.6, "bytes") if shape == "decode" else (0.85, "bytes")
    return (0.85, "bytes") if shape == "long" else (0.85, "conv")


def table(r):
    """Prints the table; returns (rows, roofline violations, target misses)."""
    rows = sorted({(g, t) for (g, t, k) in r if k == "rope"})
    violations, misses = [], []
    print("| model | shape | variant | tier | rope | roofline | roof/rope | conv/rope | target | |")
    print("|---|---|---|---|---:|---:|---:|---:|---:|---|")
    for g, t in rows:
        model, shape, variant = g.split("/")
        dtype = variant.split("-")[0]
        rope = r[(g, t, "rope")]
        roofs = [v for (g2, t2, k), v in r.items() if g2 == g and t2 == t and k.startswith("roof")]
        if not roofs:
            continue
        roof = min(roofs)
        conv = r.get((g, t, "conv"))
        ratio = roof / rope
        cratio = conv / rope if conv else None
        need, which = target(shape, dtype)
        got = cratio if which == "conv" and cratio is not None else ratio
        ok = got >= need
        if ratio > ROOF_LIMIT:
            violations.append(f"{g} {t}: rope {fmt(rope)} beats its roofline {fmt(roof)} ({ratio:.2f}x)")
        if not ok:
            misses.append(f"{g} {t}: {got:.2f}x {which} roofline (target {need}x)")
        c = f"{cratio:.2f}" if cratio is not None else ""
        print(f"| {model} | {shape} | {variant} | {t} | {fmt(rope)} | {fmt(roof)} | {ratio:.2f} | {c} "
              f"| {need} {which} | {'ok' if ok else 'MISS'} |")
    print()
    print("Relative targets:")
    for g, t in rows:
        model, shape, variant = g.split("/")
        pairs = []
        if variant.endswith("-default"):
            pairs.append((variant[: -len("-default")], variant, 1.15, "scaled / default scaling"))
        if shape == "decode" and "-fly" in variant:
            pairs.append((variant, variant.replace("-fly", "-cached"), 1.3, "fly / cached"))
        if "-off16" in variant:
            pairs.append((variant, variant.replace("-off16", ""), 1.15, "off16 / aligned"))
        for num, den, limit, what in pairs:
            a, b = r.get((f"{model}/{shape}/{num}", t, "rope")), r.get((f"{model}/{shape}/{den}", t, "rope"))
            if a is None or b is None:
                continue
            ok = a / b <= limit
            line = f"{model}/{shape} {num} vs {den} {t}: {what} {a / b:.2f}x (target <= {limit}x)"
            print(f"- {'ok  ' if ok else 'MISS'} {line}")
            if not ok:
                misses.append(line)
    return rows, violations, misses


LANES = {"portable": 4, "neon": 4, "avx2": 8, "avx512": 16}
SWEEP_LIMIT = 1.25


def whole(rd, layout, lanes):
    """Whether the pairs of rotary_dim `rd` fill whole vectors of `lanes` f32: each half of a
    `HalfSplit` head (rd / 2 elements), or the `rd` elements of an `Interleaved` one."""
    return (rd // 2 if layout == "half" else rd) % lanes == 0


def sweep(r):
    """The rotary_dim sweep (`rd-sweep/...` groups, benches/zoo.rs `sweep`): per tier and
    layout, time per rotated element against the nearest whole-vector rotary_dim (a tie:
    the faster of the two, the stricter test), and every SIMD tier against the portable tier
    on the same shape. Returns the misses."""
    rows = {}
    for (g, t, k), ns in r.items():
        parts = g.split("/")
        if parts[0] != "rd-sweep" or k != "rope" or g not in ELEMENTS:
            continue
        layout, rd = parts[2].split("-")[-2], int(parts[2].split("-rd")[-1])
        rows[(parts[1], layout, t, rd)] = (ns, ns / ELEMENTS[g])
    misses = []
    if not rows:
        return misses
    print()
    print("rotary_dim sweep (decode, 64 q + 64 k heads of head_dim 64, f32 in place; "
          "ns per call, ns per rotated element; ref = nearest whole-vector rotary_dim):")
    print()
    print("| shape | layout | tier | rotary_dim | ns/call | ns/element | ref | ratio | vs portable | |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---|")
    for (shape, layout, t, rd) in sorted(rows):
        ns, pe = rows[(shape, layout, t, rd)]
        lanes = LANES.get(t, 4)
        ref, ratio = "", None
        if not whole(rd, layout, lanes):
            cands = [c for c in range(2, 2 * max(rows_rd(rows)) + 2, 2) if whole(c, layout, lanes)]
            if cands:
                d = min(abs(c - rd) for c in cands)
                near = [c for c in cands if abs(c - rd) == d and (shape, layout, t, c) in rows]
                if near:
                    best = min(near, key=lambda c: rows[(shape, layout, t, c)][1])
                    ref, ratio = str(best), pe / rows[(shape, layout, t, best)][1]
        port = rows.get((shape, layout, "portable", rd))
        vs = port[0] / ns if port and t != "portable" else None
        ok = (ratio is None or ratio <= SWEEP_LIMIT) and (vs is None or vs >= 1.0)
        if t != "portable" and not ok:
            what = []
            if ratio is not None and ratio > SWEEP_LIMIT:
                what.append(f"{ratio:.2f}x the time per element of rotary_dim {ref} (target <= {SWEEP_LIMIT}x)")
            if vs is not None and vs < 1.0:
                what.append(f"slower than the portable tier ({ns:.0f} against {port[0]:.0f} ns)")
            misses.append(f"rd-sweep/{shape} {layout} rotary_dim {rd} {t}: " + "; ".join(what))
        rs = f"{ratio:.2f}" if ratio is not None else ""
        vss = f"{vs:.2f}x" if vs is not None else ""
        mark = "" if t == "portable" else ("ok" if ok else "MISS")
        print(f"| {shape} | {layout} | {t} | {rd} | {ns:.0f} | {pe:.3f} | {ref} | {rs} | {vss} | {mark} |")
    return misses


def rows_rd(rows):
    return [rd for (_, _, _, rd) in rows]


def main(argv):
    args = [a for a in argv if not a.startswith("--")]
    root = args[0] if args else os.path.join("target", "criterion")
    r = load(root, "--median" in argv)
    rows, violations, misses = table(r)
    misses += sweep(r)
    if not rows:
        print(f"no zoo results under {root}; run `cargo bench --features bench-internals --bench zoo` first", file=sys.stderr)
        return 1
    print(f"\n{len(misses)} target(s) missed" if misses else "\nall targets met")
    for m in misses:
        print(f"- MISS {m}")
    if violations:
        print(f"\nFAIL: {len(violations)} rope row(s) beat their roofline by more than {ROOF_LIMIT}x "
              "(the roofline is not an upper bound):", file=sys.stderr)
        for v in violations:
            print(f"- {v}", file=sys.stderr)
        return 1
    return 1 if misses and "--strict" in argv else 0


def write_result(root, group, function, ns, elements=None):
    d = os.path.join(root, *group.split("/"), *function.split("/"), "new")
    os.makedirs(d)
    with open(os.path.join(d, "benchmark.json"), "w") as f:
        b = {"group_id": group, "function_id": function}
        if elements:
            b["throughput"] = {"Elements": elements}
        json.dump(b, f)
    with open(os.path.join(d, "sample.json"), "w") as f:
        json.dump({"times": [ns * 10, ns * 11], "iters": [10, 10]}, f)
    with open(os.path.join(d, "estimates.json"), "w") as f:
        json.dump({"median": {"point_estimate": ns}}, f)


def self_test():
    """A row 1.04x faster than its roofline passes; 1.10x fails; no results fail."""
    devnull = open(os.devnull, "w")
    for rope_ns, want in [(100.0, 0), (96.5, 0), (90.0, 1)]:
        with tempfile.TemporaryDirectory() as root:
            write_result(root, "m/prefill/f32-bshd-in-cached", "avx2/rope", rope_ns)
            write_result(root, "m/prefill/f32-bshd-in-cached", "avx2/roof@0", 100.0)
            write_result(root, "m/prefill/f32-bshd-in-cached", "avx2/roof@1", 130.0)
            write_result(root, "m/prefill/f32-bshd-out-cached", "avx2/rope", 200.0)
            write_result(root, "m/prefill/f32-bshd-out-cached", "avx2/roof", 250.0)
            write_result(root, "m/prefill/f32-bshd-out-cached", "avx2/roof_nt", 150.0)
            out, err = sys.stdout, sys.stderr
            sys.stdout = sys.stderr = devnull
            try:
                got = main([root])
            finally:
                sys.stdout, sys.stderr = out, err
            assert got == want, f"rope {rope_ns} ns against a 100 ns roofline: exit {got}, want {want}"
    # The out-of-place row's roofline is the faster copy (150 ns): a rope at 140 ns fails.
    with tempfile.TemporaryDirectory() as root:
        write_result(root, "m/long/f32-bshd-out-cached", "avx2/rope", 140.0)
        write_result(root, "m/long/f32-bshd-out-cached", "avx2/roof", 250.0)
        write_result(root, "m/long/f32-bshd-out-cached", "avx2/roof_nt", 150.0)
        out, err = sys.stdout, sys.stderr
        sys.stdout = sys.stderr = devnull
        try:
            got = main([root])
        finally:
            sys.stdout, sys.stderr = out, err
        assert got == 1, "a rope row faster than the streaming copy must fail"
    # The sweep: rotary_dim 24 at 1.2x the time per element of 32 passes, 24 at 1.4x fails
    # (--strict), and so does an avx2 row slower than the portable tier.
    for rd24_ns, port_ns, want in [(90.0, 500.0, 0), (105.0, 500.0, 1), (90.0, 80.0, 1)]:
        with tempfile.TemporaryDirectory() as root:
            write_result(root, "m/prefill/f32-bshd-in-cached", "avx2/rope", 100.0)
            write_result(root, "m/prefill/f32-bshd-in-cached", "avx2/roof", 100.0)
            for rd, ns in [(16, 70.0), (24, rd24_ns), (32, 100.0)]:
                g = f"rd-sweep/decode/f32-bshd-in-cached-half-rd{rd:02}"
                write_result(root, g, "avx2/rope", ns, elements=rd * 100)
                write_result(root, g, "portable/rope", port_ns, elements=rd * 100)
            out, err = sys.stdout, sys.stderr
            sys.stdout = sys.stderr = devnull
            try:
                got = main([root, "--strict"])
            finally:
                sys.stdout, sys.stderr = out, err
            assert got == want, f"sweep rd 24 at {rd24_ns} ns, portable {port_ns} ns: exit {got}, want {want}"
    with tempfile.TemporaryDirectory() as root:
        out, err = sys.stdout, sys.stderr
        sys.stdout = sys.stderr = devnull
        try:
            assert main([root]) == 1, "no results must fail"
        finally:
            sys.stdout, sys.stderr = out, err
    print("zoo-table.py self-test: ok")
    return 0


if __name__ == "__main__":
    sys.exit(self_test() if "--self-test" in sys.argv[1:] else main(sys.argv[1:]))
