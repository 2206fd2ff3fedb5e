#!/usr/bin/env bash
# Demonstrates both regression gates (issue 14) against the test-only slowdowns of
# the gate harness (tools/gate/bench/src/slowdown.rs; the library has no hook):
#   (a) the timing gate, same versus same (baseline HEAD, candidate the working tree,
#       unchanged), SAME_RUNS times, with a CPU hog (a bounded busy loop) started partway
#       through each run: must pass every time;
#   (b) both gates against the candidate built with `--cfg rope_gate_slowdown="5pct"`
#       (5% more rows rotated), SLOW_RUNS times each, and with `="2x"` once each: must fail
#       every time (the hog runs during the timing runs here too), and compute the same
#       output bits as the baseline in every case (the extra work goes to scratch);
#   (c) the instruction-count gate, same versus same, twice: its counts must be identical
#       from one run to the next (and pass).
#
#   scripts/gate-demo.sh            acceptance settings: 10 same-versus-same runs, 5 slowed
#                                   runs per gate (about 10 minutes on the development machine)
#   scripts/gate-demo.sh --short    CI settings: 2 and 1, fewer pairs (a few minutes)
#
# Needs valgrind and gungraun-runner (scripts/instr-gate.sh --install-tools installs them;
# so does this script with INSTALL_TOOLS=1). Run it from a clean checkout of a commit (the
# candidate is the working tree, the baseline HEAD). Every run's output is kept under
# target/gate/demo/; the summary at the end is what README quotes. Exit 1 if any
# expectation failed.
#
# Environment: SAME_RUNS, SLOW_RUNS, PAIRS, ROUNDS (passed to bench-gate.sh), HOG_SECONDS
# (default 5), BASELINE (default HEAD), INSTALL_TOOLS=1.
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ ${1:-} == --short ]]; then
    SAME_RUNS=${SAME_RUNS:-2}
    SLOW_RUNS=${SLOW_RUNS:-1}
    export PAIRS=${PAIRS:-16} ROUNDS=${ROUNDS:-2}
elif [[ $# -eq 0 ]]; then
    SAME_RUNS=${SAME_RUNS:-10}
    SLOW_RUNS=${SLOW_RUNS:-5}
    export PAIRS=${PAIRS:-30} ROUNDS=${ROUNDS:-3}
else
    echo "usage: scripts/gate-demo.sh [--short]" >&2
    exit 2
fi
HOG_SECONDS=${HOG_SECONDS:-5}
BASELINE=${BASELINE:-HEAD}
log=${GATE_TARGET_DIR:-target/gate}/demo
rm -rf "$log"
mkdir -p "$log"
slow5='--cfg rope_gate_slowdown="5pct"'
slow2='--cfg rope_gate_slowdown="2x"'
failures=0
summary=()

# The hog: a busy loop for HOG_SECONDS, started $1 seconds from now, on the last CPU when
# `taskset` can pin it there (the gate's samples then run on the other one).
hog() {
    local pin=()
    if command -v taskset > /dev/null && [[ $(nproc) -ge 2 ]]; then
        pin=(taskset -c "$(($(nproc) - 1))")
    fi
    (sleep "$1" && exec "${pin[@]}" timeout "$HOG_SECONDS" sh -c 'while :; do :; done') &
    hog_pid=$!
}

# Runs a gate; $1 = label, $2 = expected exit status, $3 = hog delay in seconds (or
# `none`), rest = the command. Records the outcome and a one-line digest of its table.
run_gate() {
    local label=$1 want=$2 delay=$3 rc
    shift 3
    hog_pid=
    [[ $delay != none ]] && hog "$delay"
    set +e
    "$@" > "$log/$label.txt" 2>&1
    rc=$?
    set -e
    if [[ -n $hog_pid ]]; then
        # The subshell (sleep, then the hog) ends within HOG_SECONDS; wait for it so the next
        # run starts without it.
        wait "$hog_pid" 2> /dev/null || true
    fi
    local digest ok=ok
    digest=$(digest "$log/$label.txt")
    if [[ $rc != "$want" ]]; then
        ok="UNEXPECTED (exit $rc, expected $want)"
        failures=$((failures + 1))
        tail -n 25 "$log/$label.txt" >&2
    elif [[ $label == time-* ]] && ! grep -q 'outputs: A and B compute the same bits' "$log/$label.txt"; then
        # The slowdowns only add work into scratch: the results must not change.
        ok="UNEXPECTED (A and B computed different bits)"
        failures=$((failures + 1))
    fi
    summary+=("$(printf '%-22s exit %s  %s  %s' "$label" "$rc" "$digest" "$ok")")
    echo "gate-demo: $label: exit $rc ($ok)" >&2
}

# One line from a gate's table: flagged count, range of the point changes, and the widest
# interval bound that matters (timing gate), or the range of the changes (count gate).
digest() {
    awk '
        /95% CI of B\/A/ { time = 1; next }
        / A instr / { instr = 1; next }
        time && /^[a-z_]+\/.* \[/ {
            n++; r = $5; sub(/%/, "", r); lo = $6; gsub(/[\[%,]/, "", lo); hi = $7; gsub(/[\]%]/, "", hi)
            if (n == 1 || r + 0 < rmin) rmin = r + 0; if (n == 1 || r + 0 > rmax) rmax = r + 0
            if (n == 1 || hi + 0 > himax) himax = hi + 0
            if ($8 == "REGRESSION") { f++; if (f == 1 || lo + 0 < flo) flo = lo + 0 }
        }
        instr && /^[a-z_0-9]+ +[0-9]+ +[0-9]+ / {
            n++; c = $4; sub(/%/, "", c); e = $7; sub(/%/, "", e)
            if (n == 1 || c + 0 < cmin) cmin = c + 0; if (n == 1 || c + 0 > cmax) cmax = c + 0
            if (n == 1 || e + 0 < emin) emin = e + 0; if (n == 1 || e + 0 > emax) emax = e + 0
            if ($NF == "REGRESSION" || $NF == "DIFFERENT") f++
        }
        /^bench-gate: [0-9]+ round/ { rounds = $2 }
        END {
            if (time) printf "%d/%d flagged, B/A %+.1f%%..%+.1f%%, highest CI bound %+.1f%%%s, %s round(s)", f, n, rmin, rmax, himax, (f ? sprintf(", lowest flagged lower bound %+.1f%%", flo) : ""), rounds
            else if (instr) printf "%d/%d flagged, instructions %+.2f%%..%+.2f%%, est. cycles %+.2f%%..%+.2f%%", f, n, cmin, cmax, emin, emax
            else printf "no table"
        }' "$1"
}

echo "gate-demo: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(nproc) CPUs; PAIRS=$PAIRS ROUNDS=$ROUNDS, hog ${HOG_SECONDS}s" >&2
install=()
[[ ${INSTALL_TOOLS:-0} == 1 ]] && install=(--install-tools)

# Builds first (and tools), so that the hog delays below fall in the sampling phase.
scripts/instr-gate.sh "${install[@]}" "$BASELINE" > "$log/instr-warmup.txt" 2>&1 || {
    cat "$log/instr-warmup.txt" >&2
    echo "gate-demo: the instruction-count gate does not run" >&2
    exit 1
}
for flags in "" "$slow5" "$slow2"; do
    CANDIDATE_RUSTFLAGS=$flags PAIRS=1 ROUNDS=1 CASES='^decode/f32/half_split$' \
        scripts/bench-gate.sh "$BASELINE" > /dev/null 2>&1 || true
done

start=$(date +%s)
# (a) same versus same under a hog that starts 1 to 3 s into the run (the sampling starts
# within a second and lasts about 6 s with 30 pairs: the load changes mid-run).
for ((i = 1; i <= SAME_RUNS; i++)); do
    run_gate "time-same-$i" 0 $((1 + i % 3)) scripts/bench-gate.sh "$BASELINE"
done
# (b) slowed candidates.
for ((i = 1; i <= SLOW_RUNS; i++)); do
    run_gate "time-5pct-$i" 1 $((1 + i % 3)) env CANDIDATE_RUSTFLAGS="$slow5" scripts/bench-gate.sh "$BASELINE"
done
run_gate "time-2x" 1 2 env CANDIDATE_RUSTFLAGS="$slow2" scripts/bench-gate.sh "$BASELINE"
for ((i = 1; i <= SLOW_RUNS; i++)); do
    run_gate "instr-5pct-$i" 1 none env CANDIDATE_RUSTFLAGS="$slow5" scripts/instr-gate.sh "$BASELINE"
done
run_gate "instr-2x" 1 none env CANDIDATE_RUSTFLAGS="$slow2" scripts/instr-gate.sh "$BASELINE"
# (c) same versus same, twice: both pass, and the counts of each side are identical.
out=${GATE_TARGET_DIR:-target/gate}/instr
for i in 1 2; do
    run_gate "instr-same-$i" 0 none scripts/instr-gate.sh "$BASELINE"
    cp "$out/A.json" "$log/instr-same-$i-A.json"
    cp "$out/B.json" "$log/instr-same-$i-B.json"
done
for side in A B; do
    run_gate "instr-repeat-$side" 0 none "$out/gate-stat" instr "$log/instr-same-1-$side.json" "$log/instr-same-2-$side.json" --exact
done

# Per case, over the runs of each kind: the range of the median B/A (time) or the change
# (counts), and how many runs flagged it.
per_case() {
    awk '
        function kind(f) { sub(/.*\//, "", f); sub(/-[0-9]+\.txt$|\.txt$/, "", f); return f }
        FNR == 1 { k = kind(FILENAME); runs[k]++ }
        k ~ /^time/ && /^[a-z_]+\/.* \[/ {
            c = $1; r = $5; sub(/%/, "", r); r += 0
            key = c SUBSEP k
            if (!(key in n) || r < lo[key]) lo[key] = r
            if (!(key in n) || r > hi[key]) hi[key] = r
            n[key]++; if ($8 == "REGRESSION") f[key]++
            if (!(c in seen)) { seen[c] = 1; order[++m] = c }
        }
        k ~ /^instr-(5pct|2x)/ && /^[a-z_0-9]+ +[0-9]+ +[0-9]+ / {
            c = $1; gsub(/_/, "/", c); sub(/\/half\/split$/, "/half_split", c); sub(/^on\/the\/fly/, "on_the_fly", c); sub(/^fill\/table/, "fill_table", c)
            key = c SUBSEP k; ir[key] = $4; cy[key] = $7; if ($NF == "REGRESSION") f[key]++
        }
        function t(c, k,   key) {
            key = c SUBSEP k
            if (!(key in n)) return "-"
            return sprintf(lo[key] == hi[key] ? "%+.1f%%" : "%+.1f..%+.1f%%", lo[key], hi[key]) (k == "time-same" ? "" : sprintf(" (%d/%d)", f[key], runs[k]))
        }
        END {
            printf "| case | time, same vs same (%d runs) | time, 5%% build (flagged) | time, 2x | instructions / est. cycles, 5%% build | 2x |\n", runs["time-same"]
            print "|---|---|---|---|---|---|"
            for (i = 1; i <= m; i++) {
                c = order[i]
                printf "| `%s` | %s | %s | %s | %s / %s | %s / %s |\n", c, t(c, "time-same"), t(c, "time-5pct"), t(c, "time-2x"), ir[c SUBSEP "instr-5pct"], cy[c SUBSEP "instr-5pct"], ir[c SUBSEP "instr-2x"], cy[c SUBSEP "instr-2x"]
            }
        }' "$log"/time-*.txt "$log"/instr-5pct-1.txt "$log"/instr-2x.txt
}

echo
echo "gate-demo: summary ($(($(date +%s) - start)) s; outputs in $log)"
printf '%s\n' "${summary[@]}"
echo
per_case
if [[ $failures -gt 0 ]]; then
    echo "gate-demo: FAIL: $failures run(s) did not end as expected"
    exit 1
fi
echo "gate-demo: ok: same-versus-same passed every time, every slowed build was flagged, counts repeat exactly"
