#!/usr/bin/env bash
# Runs the demo on its embedded default and on every config in tests/data/configs (and
# ../shared/configs when present); fails if any run exits non-zero (issue 2 and 4
# acceptance: `cargo run --release --example demo -- --config F` exits 0 for each).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --example demo
demo=target/release/examples/demo
"$demo"
shopt -s nullglob
for f in tests/data/configs/*.json ../shared/configs/*.json; do
    echo "== $f"
    "$demo" --config "$f"
done
