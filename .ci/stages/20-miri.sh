#!/usr/bin/env bash
# Runs the tier suite (tests/tiers/, reduced sizes under cfg(miri)) and the lib unit tests
# under Miri, three times: the build baseline (the portable tier; scalar is every case's
# oracle), with AVX2 + FMA + F16C enabled at compile time (the AVX2 tier), and with
# AVX-512F (the AVX-512 tier; see below for +avx512bw). Under Miri, CPU detection reports exactly the
# compile-time target features, so each run can execute the tier it enables; the log line
# "<tier>: N random ... cases bit-identical to scalar" shows that it did. Also the C ABI's
# unit tests once (`capi` below).
# Miri interprets on one thread, and CI has two cores: the runs go in two lanes at once
# (baseline, then the C ABI's; AVX2, then AVX-512), each run in its own target dir (cargo
# locks a target dir for the whole command) and with its own log, all printed at the end
# (also when a run fails or the stage stops early). In the lanes baseline, then AVX-512;
# AVX2, then the C ABI's, the four took 774 + 581 s and 662 + 308 s here (1355 s); in these
# lanes, in a full CI run on the same (slow) day, 810 + 324 s and 651 + 652 s (1303 s). The
# three tier runs cost about the same, so two lanes cannot go much below ~1200 s: a smaller
# Miri tier suite is the next cut.
set -euo pipefail
cd "$(dirname "$0")/../.."

# Install nightly with Miri only where it is missing (an installed nightly is kept as is).
if ! cargo +nightly miri --version >/dev/null 2>&1; then
    rustup toolchain install nightly --profile minimal --component miri,rust-src
fi
cargo +nightly miri setup

# Miri runs are independent of the native build: keep their artefacts apart.
miri_target="${CARGO_TARGET_DIR:-target}/miri-runs"
logs=$(mktemp -d)
trap 'cat "$logs"/* 2> /dev/null; rm -rf "$logs"' EXIT

# `logged NAME COMMAND...`: runs COMMAND with its output in $logs/NAME, after a header
# line and before its time; fails if COMMAND fails.
logged() {
    local name=$1 start=$SECONDS log=$logs/$1
    shift
    echo "=== miri: ${name}: started (log printed at the end)"
    { echo "=== miri: ${name} (RUSTFLAGS='${RUSTFLAGS-}')" && "$@" 2>&1; } > "$log" ||
        { echo "miri ${name}: failed" >> "$log"; return 1; }
    echo "=== miri: ${name}: $((SECONDS - start)) s" >> "$log"
}

# `suite NAME RUSTFLAGS TIERS`: the suite with the given flags, testing TIERS (against the
# scalar oracle, which every case runs); fails unless each of TIERS ran.
suite() {
    local name=$1 flags=$2 expect=$3 log=$logs/$1
    ROPE_TIERS="${expect// /,}" MIRIFLAGS="${MIRIFLAGS:-} -Zmiri-env-forward=ROPE_TIERS" RUSTFLAGS="${flags}" \
        CARGO_TARGET_DIR="$miri_target/$name" \
        logged "$name" cargo +nightly miri test -p rope-kernels --lib --test tiers -- --nocapture --test-threads 1 ||
        return 1
    for tier in $expect; do
        if ! grep -q "^${tier}: .* cases bit-identical to scalar" "$log"; then
            echo "miri ${name}: the ${tier} tier did not run" >> "$log"
            return 1
        fi
        # The lib tests include the cos/sin generator's tier test (scalar is its oracle).
        if [ "$tier" != scalar ] && ! grep -q "sincos: tier ${tier} bit-identical" "$log"; then
            echo "miri ${name}: the ${tier} cos/sin generator did not run" >> "$log"
            return 1
        fi
    done
    echo "=== miri: ${name}: tiers run: ${expect}" >> "$log"
}

# The C ABI's unit tests (capi/src/tests.rs, capi/src/encodings/tests.rs): every exported
# function turns C pointers and counts into slices, so Miri checks that boundary too
# (Stacked Borrows, alignment, bounds, hostile input). Fewer random cases under cfg(miri)
# (`tests::cases`); baseline flags only, the boundary code is the same for every tier.
# About 130 s.
capi() { RUSTFLAGS="" CARGO_TARGET_DIR="$miri_target/capi" logged capi cargo +nightly miri test -p rope-kernels-capi --lib; }

# The two lanes. A run that fails ends its lane; the stage fails once both lanes ended.
# The baseline tests the portable tier only: every case also runs the scalar oracle, so the
# scalar tier's code runs under Miri in each suite anyway (testing scalar against itself too
# made the baseline the stage's longest run: 937 s, against AVX2 606, AVX-512 514 and the C
# ABI 225 s, in the last full run here, with scalar and portable).
# +avx512bw only because wide 1.7.1 does not compile with avx512f alone (its i16x32 and
# i32x16 fall back to fields that do not exist then); the AVX-512 tier itself uses
# AVX-512F instructions only, and requires only AVX-512F at run time.
lane_baseline() { suite baseline "" "portable" && capi; }
lane_simd() {
    suite avx2 "-Ctarget-feature=+avx2,+fma,+f16c" "avx2" &&
        suite avx512 "-Ctarget-feature=+avx512f,+avx512bw" "avx512"
}
start=$SECONDS
lane_baseline & p1=$!
lane_simd & p2=$!
rc=0
wait "$p1" || rc=1
wait "$p2" || rc=1
cat "$logs"/*
rm -rf "$logs"
trap - EXIT
echo "=== miri: both lanes ended after $((SECONDS - start)) s$([ "$rc" = 0 ] || echo ': FAILED')"
exit "$rc"
