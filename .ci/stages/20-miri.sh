#!/usr/bin/env bash
# Runs the tier suite (tests/tiers.rs, reduced sizes under cfg(miri)) and the lib unit tests
# under Miri, three times: the build baseline (scalar + portable tiers), with AVX2 + FMA +
# F16C enabled at compile time (adds the AVX2 tier), and with AVX-512F (adds the AVX-512
# tier; see below for +avx512bw). Under Miri, CPU detection reports exactly the
# compile-time target features, so each run can execute the tier it enables; the log line
# "<tier>: N random ... cases bit-identical to scalar" shows that it did. Then the C ABI's
# unit tests once (see the end).
set -euo pipefail
cd "$(dirname "$0")/../.."

# Install nightly with Miri only where it is missing (an installed nightly is kept as is).
if ! cargo +nightly miri --version >/dev/null 2>&1; then
    rustup toolchain install nightly --profile minimal --component miri,rust-src
fi
cargo +nightly miri setup

# Miri runs are independent of the native build: keep their artefacts apart.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target}/miri-runs"

# `run NAME RUSTFLAGS TIERS`: the suite with the given flags, testing TIERS (against the
# scalar oracle, which every case runs); fails unless each of TIERS ran.
run() {
    local name=$1 flags=$2 expect=$3
    echo "=== miri: ${name} (RUSTFLAGS='${flags}')"
    local start=$SECONDS log
    log=$(mktemp)
    ROPE_TIERS="${expect// /,}" MIRIFLAGS="${MIRIFLAGS:-} -Zmiri-env-forward=ROPE_TIERS" RUSTFLAGS="${flags}" \
        cargo +nightly miri test -p rope-kernels --lib --test tiers -- --nocapture --test-threads 1 2>&1 | tee "$log"
    for tier in $expect; do
        if ! grep -q "^${tier}: .* cases bit-identical to scalar" "$log"; then
            echo "miri ${name}: the ${tier} tier did not run" >&2
            exit 1
        fi
        # The lib tests include the cos/sin generator's tier test (scalar is its oracle).
        if [ "$tier" != scalar ] && ! grep -q "sincos: tier ${tier} bit-identical" "$log"; then
            echo "miri ${name}: the ${tier} cos/sin generator did not run" >&2
            exit 1
        fi
    done
    echo "=== miri: ${name}: tiers run: ${expect}; $((SECONDS - start)) s"
    rm -f "$log"
}

run baseline "" "scalar portable"
run avx2 "-Ctarget-feature=+avx2,+fma,+f16c" "avx2"
# +avx512bw only because wide 1.7.1 does not compile with avx512f alone (its i16x32 and
# i32x16 fall back to fields that do not exist then); the AVX-512 tier itself uses
# AVX-512F instructions only, and requires only AVX-512F at run time.
run avx512 "-Ctarget-feature=+avx512f,+avx512bw" "avx512"

# The C ABI's unit tests (capi/src/tests.rs, capi/src/encodings/tests.rs): every exported
# function turns C pointers and counts into slices, so Miri checks that boundary too
# (Stacked Borrows, alignment, bounds, hostile input). Fewer random cases under cfg(miri)
# (`tests::cases`); baseline flags only, the boundary code is the same for every tier.
# About 20 s to build and 90 s to run on 2 cores.
echo "=== miri: capi (RUSTFLAGS='')"
start=$SECONDS
RUSTFLAGS="" cargo +nightly miri test -p rope-kernels-capi --lib
echo "=== miri: capi: $((SECONDS - start)) s"
