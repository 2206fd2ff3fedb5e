#!/usr/bin/env bash
# Issue 14 checks: the regression gates (scripts/bench-gate.sh, scripts/instr-gate.sh) and
# their harness (tools/gate, its own workspace), from nothing: installs valgrind and
# gungraun-runner, lints and tests the harness, tests the harness's test-only slowdown
# (`--cfg rope_gate_slowdown`, tools/gate/bench/src/slowdown.rs) for unchanged output, then runs
# scripts/gate-demo.sh --short: same versus same under a CPU hog must pass, the 5% and 2×
# slowdowns must be flagged by both gates, instruction counts must repeat exactly.
# Needs a git checkout (the gates' baseline is HEAD).
set -euo pipefail
cd "$(dirname "$0")/../.."
export CARGO_TERM_COLOR=never
start=$(date +%s)
lap() { echo "60-gate.sh: $* (t+$(($(date +%s) - start)) s)"; }

rustup component add rustfmt clippy
if ! command -v valgrind > /dev/null; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq valgrind > /dev/null
fi
version=$(awk '/^name = "gungraun"$/ { getline; gsub(/[^0-9.]/, ""); print; exit }' tools/gate/Cargo.lock)
if [[ $(gungraun-runner --version 2> /dev/null | awk '{ print $2 }') != "$version" ]]; then
    # A debug build without debuginfo: about a third of the time of a release build (50
    # against 170 s here), and the runner only parses Callgrind's output.
    CARGO_PROFILE_DEV_DEBUG=0 cargo install --quiet --locked --debug --force gungraun-runner --version "$version"
fi
lap "tools installed (valgrind, gungraun-runner $version)"

for s in scripts/bench-gate.sh scripts/instr-gate.sh scripts/gate-common.sh scripts/gate-demo.sh; do
    bash -n "$s"
done
cargo fmt --manifest-path tools/gate/Cargo.toml --all -- --check
cargo clippy --quiet --manifest-path tools/gate/Cargo.toml --workspace --all-targets -- -D warnings
cargo test --quiet --manifest-path tools/gate/Cargo.toml -p rope-gate-stat
lap "harness linted and tested"

# The slowed harness computes the same bits (every row rotated again, into scratch).
RUSTFLAGS='--cfg rope_gate_slowdown="2x"' cargo test --quiet --manifest-path tools/gate/Cargo.toml -p rope-gate-bench --lib
lap "slowed build: same output"

scripts/gate-demo.sh --short
lap "ok"
