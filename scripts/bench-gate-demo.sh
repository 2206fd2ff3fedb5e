#!/usr/bin/env bash
# Demonstrates scripts/bench-gate.sh (issue 9): a baseline from this commit, a check of the
# same build (must pass), a check of the build with the test-only slowed kernel (feature
# `__slow-kernel-for-gate-demo`, about twice the work; must fail). About a minute on the
# development machine, including the confirmation runs of the failing check.
#
#   scripts/bench-gate-demo.sh [BENCH] [FILTER]     (default: parallel 'prefill/.*/single')
#
# Run it on a quiet machine: load from other processes during the check shows as a slowdown.
set -euo pipefail
cd "$(dirname "$0")/.."
bench=${1:-parallel}
filter=${2:-prefill/.*/single}
export BASELINE=gate-demo

CARGO_ARGS='--features rayon' scripts/bench-gate.sh save "$bench" "$filter"

echo "== same build: the gate must pass"
CARGO_ARGS='--features rayon' scripts/bench-gate.sh check "$bench" "$filter"

echo "== slowed kernel: the gate must fail"
set +e
CARGO_ARGS='--features rayon,__slow-kernel-for-gate-demo' scripts/bench-gate.sh check "$bench" "$filter"
rc=$?
set -e
if [[ $rc -ne 1 ]]; then
    echo "bench-gate-demo: the slowed build was not flagged (exit $rc)" >&2
    exit 1
fi
echo "bench-gate-demo: ok (same build passed, slowed build failed)"
