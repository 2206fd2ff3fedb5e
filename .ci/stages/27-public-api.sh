#!/usr/bin/env bash
# The public Rust API is a reviewed snapshot: `api/rope-kernels.txt` is what
# `cargo public-api` (a well-kept tool that lists every public item from rustdoc's JSON)
# prints for the crate with its default features and `rayon` (every public feature;
# `bench-internals` is not API). Any change to the API shows in this diff: regenerate the
# snapshot with the same command and commit it with the change.
#
#   bash .ci/stages/27-public-api.sh           # check
#   bash .ci/stages/27-public-api.sh --bless   # rewrite api/rope-kernels.txt
#
# Installs what it needs: a nightly toolchain (rustdoc JSON) if there is none, and
# `cargo install cargo-public-api --locked` (a debug build) where missing.
set -euo pipefail
cd "$(dirname "$0")/../.."
start=$SECONDS
version=0.52.0
rustup run nightly rustc --version >/dev/null 2>&1 || rustup toolchain install nightly --profile minimal
if ! cargo public-api --version 2>/dev/null | grep -qF "$version"; then
  cargo install cargo-public-api --version "$version" --locked --debug
fi
out=target/public-api.txt
mkdir -p target
cargo public-api -p rope-kernels --features rayon -sss >"$out"
if [ "${1:-}" = --bless ]; then
  cp "$out" api/rope-kernels.txt
  echo "public-api: api/rope-kernels.txt rewritten ($(wc -l <"$out") lines)"
  exit 0
fi
if ! diff -u api/rope-kernels.txt "$out"; then
  echo "public-api: the public API differs from api/rope-kernels.txt (above); if intended,"
  echo "run 'bash .ci/stages/27-public-api.sh --bless' and commit the snapshot."
  exit 1
fi
echo "public-api: unchanged ($(grep -c . api/rope-kernels.txt) items); $((SECONDS - start)) s"
