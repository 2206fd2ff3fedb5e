#!/usr/bin/env python3
"""Turns the criterion results of `cargo bench --features bench-internals --bench rope` into the README table.

Reads target/criterion/**/new/{benchmark,sample}.json (or the directory given as the first
argument), and prints one markdown row per (shape, dtype, layout, tier): the rotate
kernel's and the same tier's roofline (every byte read and written back,
`__bench::roofline_in_place`) throughput in elements per second and
their ratio. The time per iteration is that of criterion's fastest sample (each sample is
many iterations; `--median` uses criterion's median estimate instead): on a machine shared
with other work, preemption inflates most samples by different amounts, and the fastest
sample is the one that measures the code rather than the neighbours. Then it checks the issue's targets for the SIMD
tiers: f32 rope >= 0.9x roofline on prefill and long, >= 0.7x on decode; bf16 elements/s
>= the f32 figure on prefill and long.

Exits 1 if a rope row beats its roofline by more than 1.05x (issue 18: the roofline
is an upper bound).

Usage: cargo bench --features bench-internals --bench rope && python3 scripts/bench-table.py [--median] [CRITERION_DIR]
"""

import glob
import json
import os
import sys

SHAPES = ["decode", "prefill", "long"]
DTYPES = ["f32", "bf16"]
LAYOUTS = ["half_split", "interleaved"]
TIERS = ["scalar", "portable", "neon", "avx2", "avx512"]
SIMD = {"neon", "avx2", "avx512"}


def load(root, median):
    """{(shape, dtype, layout, tier, kind): elements per second}"""
    out = {}
    for bench in glob.glob(os.path.join(root, "**", "new", "benchmark.json"), recursive=True):
        with open(bench) as f:
            b = json.load(f)
        parts = b["group_id"].split("/")
        fparts = (b.get("function_id") or "").split("/")
        if len(parts) != 3 or len(fparts) != 2 or "Elements" not in (b.get("throughput") or {}):
            continue
        if median:
            with open(os.path.join(os.path.dirname(bench), "estimates.json")) as f:
                ns = json.load(f)["median"]["point_estimate"]
        else:
            with open(os.path.join(os.path.dirname(bench), "sample.json")) as f:
                sample = json.load(f)
            ns = min(t / n for t, n in zip(sample["times"], sample["iters"]))
        out[(*parts, *fparts)] = b["throughput"]["Elements"] / (ns * 1e-9)
    # The roofline is the faster of the passes without and with software prefetch.
    for k in [k for k in out if k[4] == "roofline_pf"]:
        plain = (*k[:4], "roofline")
        out[plain] = max(out.get(plain, 0.0), out.pop(k))
    return out


def fmt(v):
    return f"{v / 1e9:.2f}" if v >= 1e9 else f"{v / 1e9:.3f}"


def main():
    args = [a for a in sys.argv[1:] if a != "--median"]
    median = "--median" in sys.argv[1:]
    root = args[0] if args else os.path.join("target", "criterion")
    r = load(root, median)
    if not r:
        sys.exit(f"no rope benchmark results under {root}; run `cargo bench --features bench-internals --bench rope` first")
    print(f"Time per iteration: criterion's {'median' if median else 'fastest sample'}.")
    print()
    print("| shape | dtype | layout | tier | rope (Gelem/s) | roofline (Gelem/s) | rope / roofline |")
    print("|---|---|---|---|---:|---:|---:|")
    for s in SHAPES:
        for d in DTYPES:
            for l in LAYOUTS:
                for t in TIERS:
                    rope, roof = r.get((s, d, l, t, "rope")), r.get((s, d, l, t, "roofline"))
                    if rope is None or roof is None:
                        continue
                    print(f"| {s} | {d} | {l} | {t} | {fmt(rope)} | {fmt(roof)} | {rope / roof:.2f} |")

    print()
    print("Targets (SIMD tiers):")
    misses = 0
    for t in TIERS:
        if t not in SIMD:
            continue
        for s in SHAPES:
            for l in LAYOUTS:
                f = (r.get((s, "f32", l, t, "rope")), r.get((s, "f32", l, t, "roofline")))
                if None in f:
                    continue
                need = 0.7 if s == "decode" else 0.9
                ok = f[0] / f[1] >= need
                misses += not ok
                print(f"- {'ok  ' if ok else 'MISS'} {t} {s} f32 {l}: {f[0] / f[1]:.2f}x roofline (target {need}x)")
                b = r.get((s, "bf16", l, t, "rope"))
                if s != "decode" and b is not None:
                    ok = b >= f[0]
                    misses += not ok
                    print(f"- {'ok  ' if ok else 'MISS'} {t} {s} bf16 {l}: {b / f[0]:.2f}x the f32 elements/s (target 1.0x)")
    print(f"\n{misses} target(s) missed" if misses else "\nall targets met")
    # The roofline is an upper bound (issue 18): a rope row beating it by more than the noise
    # means the roofline is wrong.
    bad = [k for k, v in r.items() if k[4] == "rope" and (*k[:4], "roofline") in r and v / r[(*k[:4], "roofline")] > 1.05]
    for k in bad:
        print(f"FAIL: {'/'.join(k[:4])} rope beats its roofline by more than 1.05x", file=sys.stderr)
    if bad:
        sys.exit(1)


if __name__ == "__main__":
    main()
