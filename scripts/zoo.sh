#!/usr/bin/env bash
# The model-zoo benchmark (issue 18, benches/zoo.rs) and its table (scripts/zoo-table.py).
# Fails if any rope row beats its roofline by more than 1.05x (the roofline would then be no
# upper bound). Environment: ZOO_FILTER (comma-separated substrings of the group names),
# ZOO_TIERS (comma-separated tier names; default the SIMD tiers of this CPU), ZOO_MEASURE_MS
# (criterion's measurement time per benchmark, default 200). Extra arguments go to the table
# printer (--median, --strict). A full run takes about 40 minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=target/zoo-criterion
rm -rf "$dir"
log=$(mktemp)
if ! CRITERION_HOME="$dir" cargo bench --quiet --features bench-internals --bench zoo > "$log" 2>&1; then
    cat "$log" >&2
    exit 1
fi
rm -f "$log"
python3 scripts/zoo-table.py "$@" "$dir"
