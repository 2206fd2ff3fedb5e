#!/usr/bin/env bash
# Cortex-M4F on an emulator (issue 13), from nothing: the real thumbv7em-none-eabihf static
# library (release, no_std) linked into bare-metal C programs for the Arm MPS2 AN386 board
# (embedded/cortex-m: vector table, linker script, newlib semihosting) and run under QEMU
# system emulation (`qemu-system-arm -M mps2-an386`, a Cortex-M4 with FPU):
#  1. embedded/cortex-m/board.c: rotation against known values, every error path of the
#     RoPE calls, caller tables, on-the-fly rows, f16/bf16, on the scalar and the portable
#     tier (bit-identical), then the painted-stack high-water marks of handle creation and
#     of one apply call; it fails when creation > 4096 B or apply > 2048 B (head_dim <= 128);
#     then (embedded/cortex-m/stack.c) the table `STACK <function> <bytes> B  limit ...` of
#     every C entry point of include/rope_kernels.h, each called once with valid arguments
#     (one token, 4 q + 2 k heads, head_dim 128 Llama 3 and head_dim 64), against the
#     target limits 2048 B per call and 4096 B for rope_apply_layer: printed ("within" /
#     "OVER (target, not enforced yet)"), not enforced unless ROPE_STACK_ENFORCE_ALL=1;
#     the stage fails when a function the header declares has no row (rope_test_fault, a
#     hook of ROPE_CAPI_TESTING builds, aside) and prints "stack: N of M entry points";
#  2. capi/examples/quickstart.c (the C quick start) unchanged;
#  3. the code size table: what librope_kernels.a contributes to the quick start, by part.
# Usage:
#   bash .ci/stages/35-cortex-m.sh                    # the checks
#   bash .ci/stages/35-cortex-m.sh --stack-hog-demo   # show that the stage fails on a
#                                                     # build with 8 KB more stack
#   ROPE_STACK_ENFORCE_ALL=1 bash .ci/stages/35-cortex-m.sh
#                      # also fail on every entry point over its target limit in the table
#                      # (default 0: the table's limits are printed, not enforced; the
#                      # creation/apply limits of step 1 are enforced either way)
set -euo pipefail
cd "$(dirname "$0")/../.."
demo=0
case "${1:-}" in
  --stack-hog-demo) demo=1 ;;
  "") ;;
  *) echo "usage: $0 [--stack-hog-demo]"; exit 2 ;;
esac
enforce_all=${ROPE_STACK_ENFORCE_ALL:-0}
case "$enforce_all" in
  0 | 1) ;;
  *) echo "ROPE_STACK_ENFORCE_ALL must be 0 or 1, not '$enforce_all'"; exit 2 ;;
esac
step() { printf '\n=== cortex-m: %s\n' "$*"; }
start=$(date +%s)

step "tools"
need_apt=()
command -v qemu-system-arm >/dev/null || need_apt+=(qemu-system-arm)
command -v arm-none-eabi-gcc >/dev/null || need_apt+=(gcc-arm-none-eabi binutils-arm-none-eabi)
[ -e /usr/lib/arm-none-eabi/newlib/thumb/v7e-m+fp/hard/librdimon.a ] || need_apt+=(libnewlib-arm-none-eabi)
if [ ${#need_apt[@]} -gt 0 ]; then
  apt-get update
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${need_apt[@]}"
fi
rustup target add thumbv7em-none-eabihf
qemu-system-arm --version | head -1

target_dir=target
if [ "$demo" = 1 ]; then
  # Its own target dir: the demo cfg must not leave its library where the real one lives.
  export RUSTFLAGS="${RUSTFLAGS:-} --cfg rope_stack_hog_demo"
  target_dir=target/stack-hog-demo
  echo "stack-hog demo: librope_kernels.a built with --cfg rope_stack_hog_demo; this run must FAIL"
fi

step "librope_kernels.a for thumbv7em-none-eabihf (release, no_std)"
cargo build --release -p rope-kernels-capi --no-default-features --features panic-handler \
  --target thumbv7em-none-eabihf --target-dir "$target_dir"
lib=$target_dir/thumbv7em-none-eabihf/release/librope_kernels.a

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
cflags=(-mcpu=cortex-m4 -mthumb -mfloat-abi=hard -mfpu=fpv4-sp-d16 -std=gnu11 -O2 -Wall -Wextra -Werror
  -ffunction-sections -fdata-sections -Iinclude)
ldflags=(-T embedded/cortex-m/mps2-an386.ld --specs=rdimon.specs -nostartfiles -Wl,--gc-sections
  -Wl,--no-warn-rwx-segments -Wl,--no-warn-execstack)
link() { # link NAME SOURCES...
  local name=$1
  shift
  arm-none-eabi-gcc "${cflags[@]}" embedded/cortex-m/startup.c "$@" "$lib" "${ldflags[@]}" \
    -Wl,-Map="$out/$name.map" -lm -o "$out/$name.elf"
}
run() { # run NAME: the ELF on the emulated board; its semihosting exit status
  timeout 300 qemu-system-arm -M mps2-an386 -nographic -monitor none -serial none \
    -semihosting-config enable=on,target=native -kernel "$out/$1.elf"
}

step "board tests and stack high-water marks (qemu-system-arm -M mps2-an386)"
link board embedded/cortex-m/board.c embedded/cortex-m/stack.c -DROPE_STACK_ENFORCE_ALL="$enforce_all"
status=0
run board | tee "$out/board.log" || status=$?
grep -q '^BOARD RESULT: PASS$' "$out/board.log" || status=${status/#0/1}

step "stack table: a row for every function of include/rope_kernels.h"
# The header's function declarations (cbindgen writes each from column 0: `rope_status
# rope_apply_f32(`, `const char *rope_version(`), against the `STACK rope_*` rows.
declared=$(sed -nE 's/^[a-z][a-z0-9_ ]*[ *](rope_[a-z0-9_]+)\(.*/\1/p' include/rope_kernels.h | sort -u)
expected=$(grep -vx rope_test_fault <<<"$declared" || true)
measured=$(awk '$1 == "STACK" && $2 ~ /^rope_/ { print $2 }' "$out/board.log" | sort -u)
missing=$(comm -23 <(echo "$expected") <(echo "$measured"))
unknown=$(comm -13 <(echo "$declared") <(echo "$measured"))
n_declared=$(grep -c . <<<"$declared" || true)
n_measured=$(comm -12 <(echo "$expected") <(echo "$measured") | grep -c . || true)
n_over=$(grep -c '^STACK rope_.*  OVER' "$out/board.log" || true)
echo "stack: $n_measured of $n_declared entry points of include/rope_kernels.h measured" \
  "(rope_test_fault: a hook of ROPE_CAPI_TESTING builds, not measured)"
if [ "$enforce_all" = 1 ]; then
  echo "stack: $n_over rows over their target limit (enforced: ROPE_STACK_ENFORCE_ALL=1)"
else
  echo "stack: $n_over rows over their target limit (not enforced; ROPE_STACK_ENFORCE_ALL=1 enforces them)"
fi
if [ "$n_declared" -lt 2 ] || [ -n "$missing" ] || [ -n "$unknown" ]; then
  [ "$n_declared" -ge 2 ] || echo "stack: FAIL: no function declarations found in include/rope_kernels.h"
  for f in $missing; do
    echo "stack: FAIL: $f is declared in include/rope_kernels.h but not measured (embedded/cortex-m/stack.c)"
  done
  for f in $unknown; do echo "stack: FAIL: $f is measured but not declared in include/rope_kernels.h"; done
  status=${status/#0/1}
fi

step "C quick start (capi/examples/quickstart.c)"
link quickstart capi/examples/quickstart.c
run quickstart | tee "$out/quickstart.log"
grep -q '^rope_kernels .*: q\[token 0\]\[head 0\]\[0\] = ' "$out/quickstart.log"

step "code size: what librope_kernels.a contributes to the quick start (--gc-sections)"
arm-none-eabi-size "$out/quickstart.elf"
bash embedded/cortex-m/size-table.sh "$out/quickstart.map" | tee "$out/size.txt"
# Issue 13's target for this f32-only program is 40 KB of the library's code and constants.
# Not met yet (every dtype, encoding and benchmark kernel of the scalar and portable tiers
# is reachable from the one `Kernels` table); printed, not enforced.
code=$(awk '$1 == "TOTAL" { print $4 }' "$out/size.txt")
if [ "$code" -le 40960 ]; then
  echo "code size: $code B of librope_kernels.a in the quick start (target 40960 B: met)"
else
  echo "code size: $code B of librope_kernels.a in the quick start (target 40960 B: NOT MET, not enforced)"
fi

echo
echo "cortex-m stage: $(( $(date +%s) - start ))s"
if [ "$status" != 0 ]; then
  echo "cortex-m: FAILED (see the FAIL / OVER LIMIT lines above)"
  exit 1
fi
echo "cortex-m: all checks passed"
