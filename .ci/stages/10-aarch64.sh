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
cargo test --target "$target"
# The tier suite again, uncaptured: the log shows which tiers ran and which were skipped.
log=$(mktemp)
cargo test --target "$target" --test tiers -- --nocapture --test-threads 1 2>&1 | tee "$log"
if ! grep -q "^neon: .* cases bit-identical to scalar" "$log"; then
    echo "aarch64: the NEON tier did not run" >&2
    exit 1
fi
# The cos/sin generator's tier test, uncaptured, likewise.
cargo test --target "$target" --lib sincos -- --nocapture --test-threads 1 2>&1 | tee "$log"
if ! grep -q "sincos: tier neon bit-identical" "$log"; then
    echo "aarch64: the NEON cos/sin generator did not run" >&2
    exit 1
fi
rm -f "$log"
echo "=== aarch64 (qemu-user): NEON tier ran; $((SECONDS - start)) s"
