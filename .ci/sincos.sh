#!/usr/bin/env bash
# The cos/sin generator (src/kernels/sincos): its unit tests natively, for aarch64 under
# qemu-user (the NEON generator really executed), under Miri at the build baseline and with
# AVX-512F enabled at compile time (the masked tails of the AVX-512 generator), and the
# accuracy table. Each tier run is checked in the log ("sincos: tier NAME bit-identical").
# Standalone: installs what it needs.
set -euo pipefail
cd "$(dirname "$0")/.."

expect() { # expect LOG TIER...: fails unless every TIER's bit-identity line is in LOG
    local log=$1
    shift
    for tier in "$@"; do
        grep -q "sincos: tier ${tier} bit-identical" "$log" || { echo "sincos: tier ${tier} did not run" >&2; exit 1; }
    done
}

log=$(mktemp)
trap 'rm -f "$log"' EXIT

echo "=== sincos: native"
cargo test --lib sincos -- --nocapture --test-threads 1 2>&1 | tee "$log"
expect "$log" portable
if grep -qw avx2 /proc/cpuinfo; then expect "$log" avx2; fi
if grep -qw avx512f /proc/cpuinfo; then expect "$log" avx512; fi

echo "=== sincos: aarch64 under qemu-user"
need=()
command -v aarch64-linux-gnu-gcc >/dev/null || need+=(gcc-aarch64-linux-gnu)
[ -e /usr/aarch64-linux-gnu/lib/libc.so.6 ] || need+=(libc6-dev-arm64-cross)
command -v qemu-aarch64 >/dev/null || need+=(qemu-user)
if [ ${#need[@]} -gt 0 ]; then
    apt-get update
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${need[@]}"
fi
rustup target list --installed | grep -qx aarch64-unknown-linux-gnu || rustup target add aarch64-unknown-linux-gnu
CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc \
CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER="qemu-aarch64 -L /usr/aarch64-linux-gnu" \
    cargo test --target aarch64-unknown-linux-gnu --lib sincos -- --nocapture --test-threads 1 2>&1 | tee "$log"
expect "$log" portable neon

echo "=== sincos: Miri (baseline, then +avx512f)"
if ! cargo +nightly miri --version >/dev/null 2>&1; then
    rustup toolchain install nightly --profile minimal --component miri,rust-src
fi
cargo +nightly miri setup
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target}/miri-runs"
cargo +nightly miri test --lib sincos -- --nocapture --test-threads 1 2>&1 | tee "$log"
expect "$log" portable
# +avx512bw only because wide 1.7.1 does not compile with avx512f alone; the generator
# uses AVX-512F instructions only.
RUSTFLAGS="-Ctarget-feature=+avx512f,+avx512bw" \
    cargo +nightly miri test --lib sincos -- --nocapture --test-threads 1 2>&1 | tee "$log"
expect "$log" portable avx2 avx512
unset CARGO_TARGET_DIR

echo "=== sincos: accuracy table"
cargo run --release --example accuracy
