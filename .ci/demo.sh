#!/usr/bin/env bash
# Runs the demo (README's main command) on its embedded default and on every config in
# tests/data/configs, each of which must run and pass its accuracy check (exit 0).
#
# Then on every config in ../shared/configs when present (newer model families, some of
# which the crate does not implement yet: multimodal RoPE, per-layer-type RoPE, nested
# text_config). Each must either run and pass (exit 0) or be refused with a one-line error
# (exit 2, "the config cannot be used"); a failed check (exit 1), a panic (101) or a crash
# fails the script. The refused ones are listed.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -p demo
demo=target/release/demo
"$demo"
shopt -s nullglob
for f in tests/data/configs/*.json; do
    echo "== $f"
    "$demo" --config "$f"
done
refused=()
for f in ../shared/configs/*.json; do
    echo "== $f"
    set +e
    "$demo" --config "$f"
    rc=$?
    set -e
    case $rc in
        0) ;;
        2) refused+=("$(basename "$f")") ;;
        *) echo "demo: $f exited with status $rc (a failure, not a refusal)" >&2; exit 1 ;;
    esac
done
if [ ${#refused[@]} -gt 0 ]; then
    echo "demo: refused with an error (not implemented yet): ${refused[*]}"
fi
