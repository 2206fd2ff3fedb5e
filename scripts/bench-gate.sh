#!/usr/bin/env bash
# Benchmark regression gate over a criterion bench target (issue 9).
#
#   scripts/bench-gate.sh save  BENCH [FILTER]   record the baseline
#   scripts/bench-gate.sh check BENCH [FILTER]   compare with it; exit 1 on a regression
#
# BENCH is a `cargo bench --bench` target (`rope`, `parallel`, ...); FILTER is criterion's
# benchmark-name filter (a regex; default: every benchmark of the target).
#
# The rule: a benchmark has regressed when criterion's 95% confidence interval of the change
# in its mean time lies entirely above +THRESHOLD, i.e. the interval's lower bound
# (`target/criterion/<group>/<bench>/change/estimates.json`, `mean.confidence_interval.
# lower_bound`) is > THRESHOLD in the check run and in each of RETRIES confirmation runs
# (made only when something was flagged). A slowdown that is only possible (interval
# straddling the threshold), small, or gone on the next run does not fail; one that is
# certain, large and repeatable does. Criterion's own
# verdict (its t-test at SIGNIFICANCE_LEVEL, and NOISE_THRESHOLD) is printed in its output but
# does not decide. Benchmarks missing from the baseline fail the check (criterion's strict
# `--baseline`), and so does a filter that matches no benchmark.
#
# Environment (defaults):
#   BASELINE=gate            criterion baseline name (target/criterion/**/<BASELINE>/)
#   THRESHOLD=0.10           relative slowdown that fails (0.10 = 10%)
#   NOISE_THRESHOLD=0.02     criterion --noise-threshold (its own "no change" band)
#   SIGNIFICANCE_LEVEL=0.05  criterion --significance-level
#   CONFIDENCE_LEVEL=0.95    criterion --confidence-level (the interval the rule reads)
#   RETRIES=2                further check runs a flagged benchmark must fail as well
#   WARM_UP_TIME=1 MEASUREMENT_TIME=3 SAMPLE_SIZE=30   criterion run length per benchmark
#   CARGO_ARGS=''            extra cargo flags, e.g. '--features rayon'
#   CARGO_TARGET_DIR, CRITERION_HOME   honoured (where criterion writes)
#
# Needs bash 4.4 or later (mapfile; empty arrays under `set -u`). Confirmation runs re-run
# the whole filter, not only the flagged benchmarks.
#
# Exit status: 0 pass (or baseline saved), 1 regression, 2 usage or run failure.
#
# A CI keeps the baseline of its main branch (target/criterion/**/<BASELINE>/, e.g. in a cache
# keyed by machine type), runs `save` after each merge and `check` on each change, on the
# same machine type with nothing else running.
set -euo pipefail

usage() {
    sed -n '2,8p' "$0" >&2
    exit 2
}

[[ $# -ge 2 && $# -le 3 ]] || usage
mode=$1
bench=$2
filter=${3:-}
case $mode in save | check) ;; *) usage ;; esac

BASELINE=${BASELINE:-gate}
THRESHOLD=${THRESHOLD:-0.10}
NOISE_THRESHOLD=${NOISE_THRESHOLD:-0.02}
SIGNIFICANCE_LEVEL=${SIGNIFICANCE_LEVEL:-0.05}
CONFIDENCE_LEVEL=${CONFIDENCE_LEVEL:-0.95}
WARM_UP_TIME=${WARM_UP_TIME:-1}
MEASUREMENT_TIME=${MEASUREMENT_TIME:-3}
SAMPLE_SIZE=${SAMPLE_SIZE:-30}
CARGO_ARGS=${CARGO_ARGS:-}
RETRIES=${RETRIES:-2}

is_number() { [[ $1 =~ ^[0-9]+([.][0-9]+)?([eE][-+]?[0-9]+)?$ ]]; }
for v in THRESHOLD NOISE_THRESHOLD SIGNIFICANCE_LEVEL CONFIDENCE_LEVEL WARM_UP_TIME MEASUREMENT_TIME; do
    is_number "${!v}" || { echo "bench-gate: $v='${!v}' is not a number (e.g. THRESHOLD=0.10 for 10%)" >&2; exit 2; }
done
for v in RETRIES SAMPLE_SIZE; do
    [[ ${!v} =~ ^[0-9]+$ ]] || { echo "bench-gate: $v='${!v}' is not a whole number" >&2; exit 2; }
done

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
target_dir=${CARGO_TARGET_DIR:-$root/target}
crit=${CRITERION_HOME:-$target_dir/criterion}

criterion_args=(
    --noplot
    --warm-up-time "$WARM_UP_TIME"
    --measurement-time "$MEASUREMENT_TIME"
    --sample-size "$SAMPLE_SIZE"
    --noise-threshold "$NOISE_THRESHOLD"
    --significance-level "$SIGNIFICANCE_LEVEL"
    --confidence-level "$CONFIDENCE_LEVEL"
)
if [[ $mode == save ]]; then
    criterion_args+=(--save-baseline "$BASELINE")
else
    criterion_args+=(--baseline "$BASELINE")
fi
[[ -n $filter ]] && criterion_args+=("$filter")

echo "bench-gate: $mode '$bench' filter='${filter}' baseline='$BASELINE' threshold=$THRESHOLD" >&2

# One criterion run of the benchmarks (save: records the baseline; check: compares with it).
run_criterion() {
    # A change/ directory left by an earlier run would be read as this run's: remove them
    # all (criterion rewrites the ones of the benchmarks it runs). Baselines are not touched.
    # Only a benchmark's own change/ (next to its new/): a group or benchmark that happens to
    # be called `change` is kept.
    if [[ -d $crit ]]; then
        local d
        while IFS= read -r d; do
            [[ -d $d/../new ]] && rm -rf "$d"
        done < <(find "$crit" -mindepth 2 -type d -name change)
    fi
    # shellcheck disable=SC2086 # CARGO_ARGS is a list of flags
    if ! cargo bench --bench "$bench" $CARGO_ARGS -- "${criterion_args[@]}"; then
        echo "bench-gate: the benchmark run failed (missing baseline? run 'save' first)" >&2
        exit 2
    fi
}

stamp=$(mktemp)
trap 'rm -f "$stamp"' EXIT
run_criterion
if [[ $mode == save ]]; then
    # Only the baselines this run wrote: a filter that matched nothing saved nothing.
    n=0
    [[ -d $crit ]] && n=$(find "$crit" -type f -path "*/$BASELINE/estimates.json" -newer "$stamp" | wc -l)
    if [[ $n -eq 0 ]]; then
        echo "bench-gate: no benchmark saved (does filter '$filter' match any benchmark of '$bench'?)" >&2
        exit 2
    fi
    echo "bench-gate: baseline '$BASELINE' saved for $n benchmarks under $crit" >&2
    exit 0
fi

# Reads the change estimates of the last run: prints one table row per benchmark and sets
# `flagged` to the names whose mean slowed down by more than THRESHOLD (lower bound of the
# confidence interval of the relative change of the mean).
num='-?[0-9.]+([eE][-+]?[0-9]+)?'
read_changes() {
    flagged=()
    files=()
    [[ -d $crit ]] && mapfile -t files < <(find "$crit" -type f -path '*/change/estimates.json' | sort)
    if [[ ${#files[@]} -eq 0 ]]; then
        echo "bench-gate: no benchmark compared (filter matched nothing?)" >&2
        exit 2
    fi
    printf '%-48s %9s %9s %9s  %s\n' benchmark 'lower' 'change' 'upper' verdict
    local f json mean lower upper point name verdict
    for f in "${files[@]}"; do
        json=$(tr -d ' \n' <"$f")
        # {"mean":{"confidence_interval":{"confidence_level":..,"lower_bound":..,
        #  "upper_bound":..},"point_estimate":..,"standard_error":..},"median":{...}}
        mean=$(grep -oE '"mean":\{"confidence_interval":\{[^}]*\},"point_estimate":'"$num" <<<"$json" || true)
        lower=$(grep -oE '"lower_bound":'"$num" <<<"$mean" | cut -d: -f2 || true)
        upper=$(grep -oE '"upper_bound":'"$num" <<<"$mean" | cut -d: -f2 || true)
        point=$(grep -oE '"point_estimate":'"$num" <<<"$mean" | cut -d: -f2 || true)
        if [[ -z $lower || -z $upper || -z $point ]]; then
            echo "bench-gate: cannot read $f" >&2
            exit 2
        fi
        name=${f#"$crit"/}
        name=${name%/change/estimates.json}
        verdict=$(awk -v lo="$lower" -v t="$THRESHOLD" 'BEGIN { print (lo > t) ? "REGRESSION" : "ok" }')
        [[ $verdict == REGRESSION ]] && flagged+=("$name")
        awk -v n="$name" -v lo="$lower" -v p="$point" -v hi="$upper" -v v="$verdict" \
            'BEGIN { printf "%-48s %+8.2f%% %+8.2f%% %+8.2f%%  %s\n", n, 100*lo, 100*p, 100*hi, v }'
    done
}

read_changes
total=${#files[@]}
# Confirmation: a slowdown counts only if every one of RETRIES further runs flags the same
# benchmark again. Drift on a shared machine (another tenant for a few seconds) rarely lasts
# through several runs; a real regression does.
confirmed=("${flagged[@]}")
round=0
while [[ ${#confirmed[@]} -gt 0 && $round -lt $RETRIES ]]; do
    round=$((round + 1))
    echo "bench-gate: ${#confirmed[@]} flagged; confirming (run $round of $RETRIES)" >&2
    run_criterion
    read_changes
    still=()
    for c in "${confirmed[@]}"; do
        for f in "${flagged[@]}"; do
            [[ $c == "$f" ]] && still+=("$c")
        done
    done
    confirmed=("${still[@]}")
done

pct=$(awk -v t="$THRESHOLD" 'BEGIN{print 100*t}')
if [[ ${#confirmed[@]} -gt 0 ]]; then
    echo "bench-gate: FAIL: ${#confirmed[@]} of $total benchmarks are slower than baseline '$BASELINE' by more than $pct% (lower bound of the ${CONFIDENCE_LEVEL} interval of the mean's change) in $((round + 1)) of $((round + 1)) runs: ${confirmed[*]}" >&2
    exit 1
fi
echo "bench-gate: PASS: $total benchmarks, none slower than baseline '$BASELINE' by more than $pct% (confirmed in every run)" >&2
