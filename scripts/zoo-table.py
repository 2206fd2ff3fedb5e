#!/usr/bin/env python3
"""Prints the model-zoo table from the criterion results of `cargo bench --bench zoo`.

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
at decode, the off16 decode row within 1.15x of the aligned one.

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


def load(root, median):
    """{(group, tier, kind): ns per iteration}, over the rounds `<kind>@<round>` of a kind:
    the fastest sample of any round, or (`median`) the median of the rounds' medians."""
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


def main(argv):
    args = [a for a in argv if not a.startswith("--")]
    root = args[0] if args else os.path.join("target", "criterion")
    r = load(root, "--median" in argv)
    rows, violations, misses = table(r)
    if not rows:
        print(f"no zoo results under {root}; run `cargo bench --bench zoo` first", file=sys.stderr)
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


def write_result(root, group, function, ns):
    d = os.path.join(root, *group.split("/"), *function.split("/"), "new")
    os.makedirs(d)
    with open(os.path.join(d, "benchmark.json"), "w") as f:
        json.dump({"group_id": group, "function_id": function}, f)
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
