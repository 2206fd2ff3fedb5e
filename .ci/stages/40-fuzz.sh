#!/usr/bin/env bash
# Fuzzing stage of CI: runs every cargo-fuzz target of fuzz/ for a fixed time from the
# committed seed corpus, fails on any crash, and prints the executions of each target (from
# libFuzzer's final statistics) for the README.
#
#   bash .ci/stages/40-fuzz.sh                      # every target, FUZZ_SECONDS (default 30) each
#   bash .ci/stages/40-fuzz.sh diff_f32 frequencies # some targets
#   bash .ci/stages/40-fuzz.sh --broken-tier-demo   # show that diff_f32 catches a broken tier
#
# Installs what it needs: a nightly toolchain if there is none (cargo-fuzz passes -Z
# sanitizer flags; without a reachable nightly, stable with RUSTC_BOOTSTRAP=1 is used), and
# `cargo install cargo-fuzz --locked` (a debug build). The targets run with AddressSanitizer
# (cargo-fuzz's default) and debug assertions (overflow checks). New inputs go to a scratch
# corpus, so fuzz/corpus/ stays the committed seeds; crash inputs are written to
# fuzz/artifacts/.
set -euo pipefail
cd "$(dirname "$0")/../.."
export CARGO_TERM_COLOR=never

# 30 s in CI (the committed seeds are replayed first, then new inputs); the README table ran 60 s.
SECONDS_PER_TARGET=${FUZZ_SECONDS:-30}
ALL_TARGETS=(diff_f32 diff_half frequencies config_json capi)

demo=0
targets=()
for a in "$@"; do
  case "$a" in
    --broken-tier-demo) demo=1 ;;
    *) targets+=("$a") ;;
  esac
done
[ ${#targets[@]} -gt 0 ] || targets=("${ALL_TARGETS[@]}")

# --- toolchain and cargo-fuzz -------------------------------------------------------------
toolchain=()
if rustup run nightly rustc --version >/dev/null 2>&1; then
  toolchain=(+nightly)
elif timeout 300 rustup toolchain install nightly --profile minimal >/dev/null 2>&1; then
  toolchain=(+nightly)
else
  echo "fuzz: no nightly toolchain could be installed; using $(rustc --version) with RUSTC_BOOTSTRAP=1"
  export RUSTC_BOOTSTRAP=1
fi
echo "fuzz: toolchain $(rustc "${toolchain[@]}" --version)"
if ! cargo fuzz --version >/dev/null 2>&1; then
  # A debug build without debuginfo: it only drives cargo (built in a third of the time).
  CARGO_PROFILE_DEV_DEBUG=0 cargo install --debug cargo-fuzz --locked
fi
echo "fuzz: $(cargo fuzz --version)"

fuzz_flags=(--debug-assertions)

# Runs one target; prints "executions seconds" of libFuzzer's final statistics.
# $1 target, $2 log file, $3 scratch corpus, then extra cargo-fuzz args, "--", libFuzzer args.
run_target() {
  local t=$1 log=$2 scratch=$3
  shift 3
  mkdir -p "$scratch" "fuzz/artifacts/$t"
  set +e
  cargo "${toolchain[@]}" fuzz run "${fuzz_flags[@]}" "$t" "$@" >"$log" 2>&1
  local rc=$?
  set -e
  return $rc
}

executions() { sed -n 's/^stat::number_of_executed_units: *//p' "$1" | tail -1; }

logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT

if [ $demo = 1 ]; then
  # diff_f32 with the portable tier's output corrupted by the harness as a tail bug would
  # (the tail pair ignores the direction; tests/fuzzing/diff/broken_tier.rs), from an empty
  # corpus (no seed shows it the bug) and a fixed libFuzzer seed. Succeeds only if the
  # fuzzer reports the mismatch in time. The corruption is switched on by a cfg flag
  # (cargo-fuzz appends RUSTFLAGS to its own).
  export RUSTFLAGS="${RUSTFLAGS:-} --cfg rope_broken_tier_demo"
  echo "=== broken-tier demo: diff_f32 with --cfg rope_broken_tier_demo, empty corpus, ${SECONDS_PER_TARGET}s"
  cargo "${toolchain[@]}" fuzz build "${fuzz_flags[@]}" diff_f32
  start=$(date +%s%N)
  if run_target diff_f32 "$logs/demo.log" "$logs/demo-corpus" "$logs/demo-corpus" \
    -- -seed=1 -max_total_time="$SECONDS_PER_TARGET" -print_final_stats=1 \
    -artifact_prefix="fuzz/artifacts/diff_f32/demo-"; then
    tail -20 "$logs/demo.log"
    echo "broken-tier demo: the mutant was NOT caught in ${SECONDS_PER_TARGET}s"
    exit 1
  fi
  end=$(date +%s%N)
  grep -A3 'panicked' "$logs/demo.log" | head -4 || true
  if ! grep -q 'vs scalar' "$logs/demo.log"; then
    tail -30 "$logs/demo.log"
    echo "broken-tier demo: the run failed, but not on the tier comparison"
    exit 1
  fi
  ms=$(((end - start) / 1000000))
  printf 'broken-tier demo: caught after %s executions, %d.%03d s (including start-up)\n' \
    "$(executions "$logs/demo.log")" $((ms / 1000)) $((ms % 1000))
  exit 0
fi

# --- the fuzzing run ----------------------------------------------------------------------
echo "=== building fuzz targets"
cargo "${toolchain[@]}" fuzz build "${fuzz_flags[@]}"

# The targets run FUZZ_JOBS at a time (default: one per CPU; libFuzzer runs one process on
# one thread), each for its SECONDS_PER_TARGET; their logs are read in order afterwards.
jobs_max=${FUZZ_JOBS:-$(nproc)}
fuzz_one() {
  local t=$1
  if run_target "$t" "$logs/$t.log" "$logs/corpus-$t" "$logs/corpus-$t" "fuzz/corpus/$t" \
    -- -max_total_time="$SECONDS_PER_TARGET" -timeout=10 -print_final_stats=1 \
    -artifact_prefix="fuzz/artifacts/$t/"; then
    echo ok > "$logs/$t.status"
  else
    echo CRASH > "$logs/$t.status"
  fi
}
for t in "${targets[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs_max" ]; do wait -n || true; done
  echo "=== fuzz $t: ${SECONDS_PER_TARGET}s from fuzz/corpus/$t ($(ls "fuzz/corpus/$t" | wc -l) seeds)"
  fuzz_one "$t" &
done
wait

failed=()
summary=()
for t in "${targets[@]}"; do
  status=$(cat "$logs/$t.status" 2>/dev/null || echo CRASH)
  if [ "$status" != ok ]; then
    failed+=("$t")
    grep -v '^#' "$logs/$t.log" | tail -40
  fi
  execs=$(executions "$logs/$t.log")
  secs=$(sed -n 's/^Done [0-9]* runs in \([0-9]*\) second.*/\1/p' "$logs/$t.log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$logs/$t.log" | tail -1)
  added=$(sed -n 's/^stat::new_units_added: *//p' "$logs/$t.log" | tail -1)
  summary+=("$(printf '%-12s %-6s %8s s %12s %10s/s %8s' "$t" "$status" "${secs:-?}" "${execs:-?}" "${rate:-?}" "${added:-?}")")
  echo "fuzz $t: $status, ${execs:-?} executions in ${secs:-?} s"
done

echo
echo "=== fuzz summary ($(rustc "${toolchain[@]}" --version), ASan, debug assertions)"
printf '%-12s %-6s %10s %12s %12s %8s\n' target status time executions rate new
printf '%s\n' "${summary[@]}"
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: crashes in ${failed[*]} (inputs in fuzz/artifacts/)"
  exit 1
fi
echo "fuzz: no crash"
