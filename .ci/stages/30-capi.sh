#!/usr/bin/env bash
# C ABI checks (issue 6), from nothing:
#  1. include/rope_kernels.h equals a fresh cbindgen output (pinned version) and compiles
#     as C99 and C++;
#  2. the no_std static library builds for thumbv7em-none-eabihf (the acceptance command)
#     and a bare-metal C program (Cortex-M4F, newlib) links it;
#  3. capi/tests/test_capi.c against the static and the shared library, plain and under
#     AddressSanitizer + UBSan (cargo test, with the compiler and sanitizers required);
#  4. the README "C quick start" lines, verbatim.
# ROPE_CAPI_ARM_LINK=0 skips the Cortex-M link (it installs gcc-arm-none-eabi, ~95 MB).
set -euo pipefail
cd "$(dirname "$0")/../.."
CBINDGEN_VERSION=0.29.4
ARM_LINK=${ROPE_CAPI_ARM_LINK:-1}
step() { printf '\n=== capi: %s\n' "$*"; }

step "tools"
need_apt=()
command -v cc >/dev/null || need_apt+=(gcc libc6-dev)
command -v c++ >/dev/null || need_apt+=(g++)
if command -v cc >/dev/null && ! echo 'int main(void){return 0;}' |
    cc -fsanitize=address,undefined -x c - -o /tmp/rope_capi_probe 2>/dev/null; then
    need_apt+=(libasan8 libubsan1)
fi
if [ "$ARM_LINK" = 1 ] && ! command -v arm-none-eabi-gcc >/dev/null; then
    need_apt+=(gcc-arm-none-eabi libnewlib-arm-none-eabi)
fi
if [ ${#need_apt[@]} -gt 0 ]; then
    apt-get update
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${need_apt[@]}"
fi
rustup target add thumbv7em-none-eabihf
if [ "$(cbindgen --version 2>/dev/null || true)" != "cbindgen $CBINDGEN_VERSION" ]; then
    cargo install cbindgen --version "$CBINDGEN_VERSION" --locked
fi

step "header is up to date (cbindgen $CBINDGEN_VERSION)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cbindgen --config capi/cbindgen.toml --crate rope-kernels-capi --output "$tmp/rope_kernels.h" 2>"$tmp/cbindgen.log" ||
    { cat "$tmp/cbindgen.log"; exit 1; }
if ! diff -u include/rope_kernels.h "$tmp/rope_kernels.h"; then
    echo "include/rope_kernels.h differs from a fresh cbindgen run; regenerate it with:"
    echo "  cbindgen --config capi/cbindgen.toml --crate rope-kernels-capi --output include/rope_kernels.h"
    exit 1
fi
printf '#include "rope_kernels.h"\n' >"$tmp/h.c"
cc -std=c99 -Wall -Wextra -Werror -pedantic -Iinclude -c "$tmp/h.c" -o "$tmp/h.o"
c++ -std=c++11 -Wall -Wextra -Werror -pedantic -Iinclude -x c++ -c "$tmp/h.c" -o "$tmp/hpp.o"

step "no_std static library for thumbv7em-none-eabihf"
cargo build -p rope-kernels-capi --no-default-features --features panic-handler --target thumbv7em-none-eabihf
test -s target/thumbv7em-none-eabihf/debug/librope_kernels.a
if [ "$ARM_LINK" = 1 ]; then
    cargo build --release -p rope-kernels-capi --no-default-features --features panic-handler --target thumbv7em-none-eabihf
    arm-none-eabi-gcc -mcpu=cortex-m4 -mthumb -mfloat-abi=hard -mfpu=fpv4-sp-d16 -std=c11 -Wall -Wextra \
        -Werror -Iinclude capi/examples/quickstart.c \
        target/thumbv7em-none-eabihf/release/librope_kernels.a --specs=nosys.specs -o "$tmp/quickstart.elf"
    arm-none-eabi-size "$tmp/quickstart.elf"
fi

step "C test program: static and shared, plain and ASan+UBSan"
ROPE_CAPI_REQUIRE_CC=1 ROPE_CAPI_REQUIRE_SANITIZERS=1 \
    cargo test -p rope-kernels-capi --test c_program -- --nocapture

step "README C quick start, verbatim"
cargo build --release -p rope-kernels-capi
cc -std=c11 -Iinclude capi/examples/quickstart.c target/release/librope_kernels.a \
    -lgcc_s -lutil -lrt -lpthread -lm -ldl -lc -o quickstart
./quickstart
cc -std=c11 -Iinclude capi/examples/quickstart.c -Ltarget/release -lrope_kernels \
    -Wl,-rpath,"$PWD/target/release" -o quickstart_shared
./quickstart_shared
rm -f quickstart quickstart_shared

step "C ABI checks passed"
