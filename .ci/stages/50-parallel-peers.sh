#!/usr/bin/env bash
# Issue 9 checks, standalone (the lead wires it into .ci/run): the `rayon` feature's tests
# and a compile check of the peers comparison (candle-nn; its own workspace, never built by
# the root `cargo test`) so that it does not rot. The peers table needs a quiet machine and is not
# part of CI; the regression gates and their test-only slowdown are checked by 60-gate.sh.
set -euo pipefail
cd "$(dirname "$0")/../.."

# The rayon feature only adds `par_apply*` (src/rope/chunked/par.rs, no unit tests of its
# own), which tests/parallel.rs covers; the rest of the suite ran without it in the main test
# step, and .ci/run's clippy lints the workspace with it.
cargo test --features rayon --test parallel
# Compiled only (`cargo check`): a release build of candle and one pass of the comparison
# took about 4 minutes of CI; README's peers command runs it.
cargo check --manifest-path benches/peers/Cargo.toml
# The model-zoo table (issue 18): its printer's self-test (a rope row beating its roofline
# by more than 1.05x fails), then one tiny group through scripts/zoo.sh (the full run takes
# minutes and needs a quiet machine: not in CI).
python3 scripts/zoo-table.py --self-test
ZOO_TIERS=portable ZOO_FILTER=phi-2/decode/f32-bshd-in-cached ZOO_MEASURE_MS=50 scripts/zoo.sh > /dev/null
echo "parallel.sh: ok"
