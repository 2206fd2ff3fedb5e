#!/usr/bin/env bash
# Runs the demo (README's main command) on its embedded default and on every config in
# tests/data/configs (published and re-saved forms of the multimodal and per-layer-type
# models included), each of which must run and pass its accuracy check (exit 0).
#
# Then on every config in ../shared/configs when present: each must run and pass too. A
# refusal (exit 2, "the config cannot be used"), a failed check (exit 1), a panic (101) or a
# crash fails the script.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -p demo
demo=target/release/demo
"$demo"
shopt -s nullglob
for f in tests/data/configs/*.json ../shared/configs/*.json; do
    echo "== $f"
    set +e
    "$demo" --config "$f"
    rc=$?
    set -e
    case $rc in
        0) ;;
        2) echo "demo: $f was refused (exit 2); every config must load" >&2; exit 1 ;;
        *) echo "demo: $f exited with status $rc" >&2; exit 1 ;;
    esac
done
echo "demo: every config ran and passed its check"
