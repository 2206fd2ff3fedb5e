#!/usr/bin/env bash
# Instruction-count gate (issue 14): does the working tree execute more instructions than a
# baseline revision?
#
#   scripts/instr-gate.sh [--install-tools] [BASELINE_REV]      (default: HEAD)
#
# Builds the gungraun suite tools/gate/bench/benches/instr.rs against the baseline revision
# (extracted with `git archive`; the working tree's tools/gate is used for both, so only
# the library differs) and against the working tree, runs each under Valgrind's Callgrind
# and compares, per benchmark, the instructions executed (Ir) and Callgrind's estimated
# cycles (from its cache simulation: L1, LL and RAM hits weighted 1, 5 and 35). Counts are
# deterministic: no noise, one run each, any machine load.
#
# The tier: Valgrind does not emulate AVX-512, so the counts are of the AVX2 tier, pinned
# in the suite (NEON on aarch64). On an AVX-512 machine the timing gate
# (scripts/bench-gate.sh) covers the AVX-512 tier.
#
# Exit 1 if any benchmark's instructions or estimated cycles grew by more than THRESHOLD;
# 0 otherwise (fewer instructions never fail); the table of every benchmark either way.
#
# Environment (defaults):
#   THRESHOLD=0.02    relative growth that fails (2%)
#   EXACT=0           1: fail on any difference at all (the determinism check)
#   CANDIDATE_RUSTFLAGS, GATE_RUSTFLAGS, GATE_HARNESS, GATE_TARGET_DIR
#                     as for scripts/bench-gate.sh
#   GUNGRAUN_RUNNER   the runner binary, if not `gungraun-runner` on PATH
#
# Needs valgrind and gungraun-runner of the same version as the gungraun library
# (tools/gate/Cargo.lock); `--install-tools` installs both if missing (apt-get, as root;
# `cargo install --debug`, about a minute).
#
# Exit status: 0 pass, 1 regression, 2 usage, tool, build or run failure.
set -euo pipefail
gate_name=instr-gate
# shellcheck source=scripts/gate-common.sh
source "$(dirname "$0")/gate-common.sh"

install=0
if [[ ${1:-} == --install-tools ]]; then
    install=1
    shift
fi
[[ ${1:-} == -h || ${1:-} == --help ]] && { sed -n '2,31p' "$0"; exit 0; }
[[ $# -le 1 ]] || gate_die "usage: scripts/instr-gate.sh [--install-tools] [BASELINE_REV]"
THRESHOLD=${THRESHOLD:-0.02}
EXACT=${EXACT:-0}
[[ $THRESHOLD =~ ^[0-9]*[.]?[0-9]+$ ]] || gate_die "THRESHOLD='$THRESHOLD' is not a number (0.02 for 2%)"
[[ $EXACT == 0 || $EXACT == 1 ]] || gate_die "EXACT='$EXACT': expected 0 or 1"

# ---- tools ----
version=$(awk '/^name = "gungraun"$/ { getline; gsub(/[^0-9.]/, ""); print; exit }' tools/gate/Cargo.lock)
[[ -n $version ]] || gate_die "no gungraun version in tools/gate/Cargo.lock"
runner=${GUNGRAUN_RUNNER:-gungraun-runner}
runner_version() { "$runner" --version 2> /dev/null | awk '{ print $2 }'; }
if ! command -v valgrind > /dev/null; then
    if [[ $install == 1 ]] && command -v apt-get > /dev/null; then
        echo "$gate_name: installing valgrind" >&2
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq valgrind > /dev/null ||
            gate_die "apt-get install valgrind failed"
    else
        gate_die "valgrind not found: install it (Debian/Ubuntu: apt-get install valgrind), or pass --install-tools"
    fi
fi
if [[ $(runner_version) != "$version" ]]; then
    if [[ $install == 1 && -z ${GUNGRAUN_RUNNER:-} ]]; then
        echo "$gate_name: installing gungraun-runner $version (cargo install --debug)" >&2
        CARGO_PROFILE_DEV_DEBUG=0 cargo install --quiet --locked --debug --force gungraun-runner --version "$version" ||
            gate_die "cargo install gungraun-runner $version failed"
    else
        gate_die "gungraun-runner $version needed (found: '$(runner_version)'): cargo install --locked gungraun-runner --version $version, or pass --install-tools"
    fi
fi
export GUNGRAUN_RUNNER=$(command -v "$runner")

# ---- builds and runs ----
gate_baseline_tree "${1:-HEAD}"
out=$target_dir/instr
mkdir -p "$out"

gate_lock

count() { # side, rustflags, name
    gate_stage "$1"
    echo "$gate_name: counting $3 (the $1)${2:+ with RUSTFLAGS+=$2}" >&2
    rm -rf "$out/home-$3"
    RUSTFLAGS=$(gate_rustflags "$2") CARGO_TARGET_DIR=$target_dir GUNGRAUN_HOME=$out/home-$3 \
        cargo bench --quiet --target "$gate_host" --manifest-path "$stage_manifest" -p rope-gate-bench --bench instr -- --output-format=json \
        > "$out/$3.json" 2> "$out/$3.log" || {
        tail -n 30 "$out/$3.log" >&2
        gate_die "the $3 suite failed (log: $out/$3.log)"
    }
}
count baseline "" A
count candidate "$CANDIDATE_RUSTFLAGS" B
echo "$gate_name: building gate-stat" >&2
RUSTFLAGS=$(gate_rustflags) CARGO_TARGET_DIR=$target_dir \
    cargo build --quiet --release --target "$gate_host" --manifest-path "$stage_manifest" -p rope-gate-stat --bin gate-stat ||
    gate_die "building gate-stat failed"
cp "$target_dir/$gate_host/release/gate-stat" "$out/gate-stat"
want=$(grep -oE '^ *(case|tail)\("[^"]+"' tools/gate/bench/src/lib.rs | sed -E 's/.*"(.*)"/\1/; s/\//_/g' | sort)
have=$(grep -oE '"id": *"[^"]+"' "$out/B.json" | sed -E 's/.*"([^"]+)"$/\1/' | sort)
[[ $want == "$have" ]] || gate_die "tools/gate/bench/benches/instr.rs does not bench exactly the cases of tools/gate/bench/src/lib.rs: $(comm -3 <(echo "$want") <(echo "$have") | tr -d '\t' | tr '\n' ' ')"

echo "$gate_name: A = baseline $base_rev; B = working tree $(git describe --always --dirty 2> /dev/null || echo '?')${CANDIDATE_RUSTFLAGS:+ with RUSTFLAGS+=$CANDIDATE_RUSTFLAGS}; both built with RUSTFLAGS='$(gate_rustflags)'"
echo "$gate_name: machine: $(gate_machine); $(valgrind --version), gungraun $version; tier counted: avx2 on x86-64 (Valgrind has no AVX-512)"
stat_args=(--threshold "$THRESHOLD")
[[ $EXACT == 1 ]] && stat_args+=(--exact)
set +e
"$out/gate-stat" instr "$out/A.json" "$out/B.json" "${stat_args[@]}"
rc=$?
set -e
[[ $rc -le 1 ]] || gate_die "gate-stat failed on $out/A.json, $out/B.json"
exit $rc
