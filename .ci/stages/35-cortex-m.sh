#!/usr/bin/env bash
# Cortex-M4F on an emulator (issue 13), from nothing: the real thumbv7em-none-eabihf static
# library (release, no_std) linked into bare-metal C programs for the Arm MPS2 AN386 board
# (embedded/cortex-m: vector table, linker script, newlib semihosting) and run under QEMU
# system emulation (`qemu-system-arm -M mps2-an386`, a Cortex-M4 with FPU):
#  1. embedded/cortex-m/board.c: rotation against known values, every error path of the
#     RoPE calls, caller tables, on-the-fly rows, f16/bf16, on the scalar and the portable
#     tier (bit-identical), then the painted-stack high-water marks of handle creation and
#     of one apply call; it fails when creation > 4096 B or apply > 2048 B (head_dim <= 128);
#  2. capi/examples/quickstart.c (the C quick start) unchanged;
#  3. the code size table: what librope_kernels.a contributes to the quick start, by part.
# Usage:
#   bash .ci/stages/35-cortex-m.sh                    # the checks
#   bash .ci/stages/35-cortex-m.sh --stack-hog-demo   # show that the stage fails on a
#                                                     # build with 8 KB more stack
set -euo pipefail
cd "$(dirname "$0")/../.."
demo=0
case "${1:-}" in
  --stack-hog-demo) demo=1 ;;
  "") ;;
  *) echo "usage: $0 [--stack-hog-demo]"; exit 2 ;;
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
link board embedded/cortex-m/board.c
status=0
run board | tee "$out/board.log" || status=$?
grep -q '^BOARD RESULT: PASS$' "$out/board.log" || status=${status/#0/1}

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
  echo "cortex-m: the board run FAILED (see the FAIL / OVER LIMIT lines above)"
  exit 1
fi
echo "cortex-m: all checks passed"
