#!/usr/bin/env bash
# Side-by-side timing gate (issue 14): is the working tree slower than a baseline revision?
#
#   scripts/bench-gate.sh [BASELINE_REV]          (default: HEAD)
#
# Builds the harness tools/gate twice, against the baseline revision (extracted with
# `git archive`) and against the working tree (the candidate), then times both in one run,
# alternating: for each pair and each case of tools/gate/bench/src/lib.rs, one sample of
# A (baseline) and one of B (candidate), back to back, in the order A B, then B A for the
# next pair. Load that drifts (other tenants, a CPU hog, frequency changes) hits both
# halves of a pair alike, so the ratio B/A of each pair cancels it; no saved baseline from
# another time is needed. Each pair runs fresh copies of both binaries (where their pages
# land in memory moved one case's time by 15%).
#
# The rule (tools/gate/stat/src/main.rs): per case, the median of the pair ratios B/A and
# its distribution-free 95% confidence interval (order statistics, as the sign test has
# them). A case regresses when the whole interval lies above 1 + MARGIN. A case whose
# interval is too wide to tell (it reaches 1 + THRESHOLD but not above 1 + MARGIN) gets
# PAIRS more pairs, up to ROUNDS rounds; still undecided then, it passes with a note.
# Exit 1 if any case regressed, 0 otherwise; the table of every case is printed either way.
#
# Environment (defaults):
#   THRESHOLD=0.05    the slowdown the gate must catch (5%)
#   MARGIN=THRESHOLD/2  flag when the CI's lower bound exceeds 1 + MARGIN
#   CONFIDENCE=0.95   the interval's confidence level
#   PAIRS=30          pairs per case per round
#   ROUNDS=3          rounds at most (rounds after the first: undecided cases only)
#   SAMPLE_US=300     one batch of calls lasts about this long (µs of CPU time); the calls
#                     per batch are calibrated once, on B, and used for both
#   BATCHES=15        batches per sample: a sample is the fastest batch's ns per call, in
#                     the thread's CPU time (tools/gate/bench/src/bin/gate-bench.rs)
#   CASES=.           extended regex: only cases whose name matches
#   ROPE_GATE_TIER    time this tier (scalar, portable, avx2, avx512, neon); default: the
#                     best this CPU has
#   CANDIDATE_RUSTFLAGS  extra RUSTFLAGS for the candidate build only (scripts/gate-demo.sh
#                     builds the test-only slowdowns this way)
#   GATE_RUSTFLAGS    RUSTFLAGS of both builds (default: every function on a 64-byte
#                     boundary, see scripts/gate-common.sh)
#   GATE_HARNESS=candidate  the working tree's tools/gate is built against both trees;
#                     `each`: each tree builds its own (if the harness's API use changed)
#   GATE_TARGET_DIR=target/gate   cargo target dir of every build; samples land in it
#
# Exit status: 0 pass, 1 regression, 2 usage, build or run failure. Needs bash 4.4, git,
# cargo. Run on a machine of the type your users run, nothing else needs to be quiet.
set -euo pipefail
gate_name=bench-gate
# shellcheck source=scripts/gate-common.sh
source "$(dirname "$0")/gate-common.sh"

[[ $# -le 1 ]] || gate_die "usage: scripts/bench-gate.sh [BASELINE_REV]"
[[ ${1:-} == -h || ${1:-} == --help ]] && { sed -n '2,40p' "$0"; exit 0; }

THRESHOLD=${THRESHOLD:-0.05}
CONFIDENCE=${CONFIDENCE:-0.95}
PAIRS=${PAIRS:-30}
ROUNDS=${ROUNDS:-3}
SAMPLE_US=${SAMPLE_US:-300}
BATCHES=${BATCHES:-15}
CASES=${CASES:-.}
for v in PAIRS ROUNDS SAMPLE_US BATCHES; do
    [[ ${!v} =~ ^[1-9][0-9]*$ ]] || gate_die "$v='${!v}' is not a whole number above 0"
done
is_number() { [[ $1 =~ ^[0-9]*[.]?[0-9]+$ ]]; }
is_number "$THRESHOLD" || gate_die "THRESHOLD='$THRESHOLD' is not a number (0.05 for 5%)"
MARGIN=${MARGIN:-$(awk -v t="$THRESHOLD" 'BEGIN { print t / 2 }')}
is_number "$MARGIN" || gate_die "MARGIN='$MARGIN' is not a number"
is_number "$CONFIDENCE" || gate_die "CONFIDENCE='$CONFIDENCE' is not a number"

gate_baseline_tree "${1:-HEAD}"
bin=$target_dir/bench-gate
mkdir -p "$bin"

build() { # side, rustflags, package, binary, destination
    gate_stage "$1"
    echo "$gate_name: building $4 from the $1${2:+ with RUSTFLAGS+=$2}" >&2
    RUSTFLAGS=$(gate_rustflags "$2") CARGO_TARGET_DIR=$target_dir \
        cargo build --quiet --release --target "$gate_host" --manifest-path "$stage_manifest" -p "$3" --bin "$4" ||
        gate_die "building $4 from the $1 failed"
    cp "$target_dir/$gate_host/release/$4" "$5" || gate_die "copying $4 to $5 failed"
}
gate_lock
build baseline "" rope-gate-bench gate-bench "$bin/A"
build candidate "$CANDIDATE_RUSTFLAGS" rope-gate-bench gate-bench "$bin/B"
build candidate "" rope-gate-stat gate-stat "$bin/gate-stat"
if cmp -s "$bin/A" "$bin/B"; then
    echo "$gate_name: A and B are the same executable, byte for byte" >&2
fi
A=$bin/A.run
B=$bin/B.run
# A new file with the contents of $1 at $2 (new pages in the page cache). Written beside
# and renamed: removing $2 and copying anew got back the pages of the copy before last
# (ext4 here), so placement alternated in step with the A B / B A order.
fresh() {
    { cp "$1" "$2.new" && mv -f "$2.new" "$2"; } || gate_die "copying $1 to $2 failed"
}
fresh "$bin/A" "$A"
fresh "$bin/B" "$B"

tier_a=$("$A" tier) || gate_die "baseline harness: no tier"
tier_b=$("$B" tier) || gate_die "candidate harness: no tier"
[[ $tier_a == "$tier_b" ]] || gate_die "baseline runs tier $tier_a, candidate $tier_b"
mapfile -t cases < <(comm -12 <("$A" list | sort) <("$B" list | sort) | grep -E -- "$CASES" || true)
# In the harness's order.
mapfile -t cases < <("$B" list | grep -Fx -f <(printf '%s\n' "${cases[@]}") || true)
[[ ${#cases[@]} -gt 0 ]] || gate_die "no case matches CASES='$CASES' (gate-bench list names them)"

echo "$gate_name: A = baseline $base_rev; B = working tree $(git describe --always --dirty 2> /dev/null || echo '?')${CANDIDATE_RUSTFLAGS:+ with RUSTFLAGS+=$CANDIDATE_RUSTFLAGS}; both built with RUSTFLAGS='$(gate_rustflags)'"
echo "$gate_name: machine: $(gate_machine); tier timed: $tier_b; ${#cases[@]} cases"
# Informative only (a change may mean to change results): do A and B compute the same bits?
differ=()
for c in "${cases[@]}"; do
    [[ $("$A" checksum "$c") == "$("$B" checksum "$c")" ]] || differ+=("$c")
done
if [[ ${#differ[@]} -eq 0 ]]; then
    echo "$gate_name: outputs: A and B compute the same bits in every case"
else
    echo "$gate_name: outputs: A and B differ in ${#differ[@]} case(s): ${differ[*]} (not judged here)"
fi

declare -A iters
for c in "${cases[@]}"; do
    iters[$c]=$("$B" calibrate "$c" "$SAMPLE_US") || gate_die "calibrating $c failed"
done

samples=$target_dir/bench-gate-samples.txt
: > "$samples"
start=$(date +%s)
todo=("${cases[@]}")
round=1
while :; do
    echo "$gate_name: round $round: $PAIRS pairs of ${#todo[@]} cases" >&2
    for ((i = 0; i < PAIRS; i++)); do
        # Fresh copies per pair: two copies of one file timed prefill/bf16/half_split 15%
        # apart, sample after sample (AVX-512, Zen 5), and with one copy per side for the
        # whole run same versus same flagged it (+13%, in CI and here). A new copy per pair
        # makes where its pages land one more per-pair disturbance, for A and B alike.
        fresh "$bin/A" "$A"
        fresh "$bin/B" "$B"
        for c in "${todo[@]}"; do
            if ((i % 2 == 0)); then
                a=$("$A" sample "$c" "${iters[$c]}" "$BATCHES") || gate_die "sample of $c (A) failed"
                b=$("$B" sample "$c" "${iters[$c]}" "$BATCHES") || gate_die "sample of $c (B) failed"
            else
                b=$("$B" sample "$c" "${iters[$c]}" "$BATCHES") || gate_die "sample of $c (B) failed"
                a=$("$A" sample "$c" "${iters[$c]}" "$BATCHES") || gate_die "sample of $c (A) failed"
            fi
            echo "$c $a $b" >> "$samples"
        done
    done
    stat_args=(--threshold "$THRESHOLD" --margin "$MARGIN" --confidence "$CONFIDENCE")
    mapfile -t todo < <("$bin/gate-stat" time "$samples" "${stat_args[@]}" --undecided) ||
        gate_die "gate-stat failed on $samples"
    [[ ${#todo[@]} -gt 0 && $round -lt $ROUNDS ]] || break
    round=$((round + 1))
done

echo "$gate_name: $round round(s), $(($(date +%s) - start)) s of sampling; samples in $samples"
set +e
"$bin/gate-stat" time "$samples" "${stat_args[@]}"
rc=$?
set -e
[[ $rc -le 1 ]] || gate_die "gate-stat failed on $samples"
exit $rc
