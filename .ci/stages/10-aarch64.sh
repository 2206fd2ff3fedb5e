#!/usr/bin/env bash
# Cross-tests the crate for aarch64-unknown-linux-gnu under qemu-user, so the NEON tier is
# really executed (the linker and runner are set in .cargo/config.toml). Installs what it
# needs: the cross gcc and libc, qemu-user, and the rustup target.
set -euo pipefail
cd "$(dirname "$0")/../.."

need=()
command -v aarch64-linux-gnu-gcc >/dev/null || need+=(gcc-aarch64-linux-gnu)
[ -e /usr/aarch64-linux-gnu/lib/libc.so.6 ] || need+=(libc6-dev-arm64-cross)
command -v qemu-aarch64 >/dev/null || need+=(qemu-user)
if [ ${#need[@]} -gt 0 ]; then
    apt-get update
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${need[@]}"
fi
if ! rustup target list --installed | grep -qx aarch64-unknown-linux-gnu; then
    rustup target add aarch64-unknown-linux-gnu
fi

target=aarch64-unknown-linux-gnu
start=$SECONDS
# One run of every test, uncaptured, so the log shows which tiers ran and which were skipped
# (the tier suite and the cos/sin generator's tier test print one line per tier; println!
# writes whole lines, so parallel tests do not cut them). Running the tier suite a second
# time with one thread cost ~4 min of qemu.
# Built with opt-level 1 (debug assertions and overflow checks stay on) and line tables
# only, as in 15-foreign-arch.sh: the stage (build included) went from 686 s to 383 s.
# Not run here, to keep CI inside its time: the C ABI's unit tests and C program tests
# (capi/, ~100 s of compiling and ~180 s under qemu with the programs' two extra library
# builds; the C ABI is glue over the same Rust calls for every tier: they run natively in
# .ci/run and under qemu on big-endian s390x in 15-foreign-arch.sh, and
# workspace-tests/tests/cross_arch.rs checks the C ABI's bits here) and the doc tests
# (examples of the API, no tier code of their own; native in .ci/run).
log=$(mktemp)
export CARGO_PROFILE_DEV_OPT_LEVEL=1 CARGO_PROFILE_DEV_DEBUG=line-tables-only
cargo test --target "$target" -p rope-kernels -p demo -p rope-kernels-workspace-tests --tests -- --nocapture 2>&1 |
    tee "$log"
if ! grep -q "^neon: .* cases bit-identical to scalar" "$log"; then
    echo "aarch64: the NEON tier did not run" >&2
    exit 1
fi
if ! grep -q "sincos: tier neon bit-identical" "$log"; then
    echo "aarch64: the NEON cos/sin generator did not run" >&2
    exit 1
fi
rm -f "$log"
echo "=== aarch64 (qemu-user): NEON tier ran; $((SECONDS - start)) s"
