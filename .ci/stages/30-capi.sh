#!/usr/bin/env bash
# C ABI checks (issues 6 and 16), from nothing:
#  1. include/rope_kernels.h equals a fresh cbindgen output (pinned version) and compiles
#     as C99 and C++ (also with ROPE_CAPI_TESTING, the test hook's declarations);
#  2. the no_std static library builds for thumbv7em-none-eabihf (the acceptance command)
#     and a bare-metal C program (Cortex-M4F, newlib) links it;
#  3. (not here: the C test programs, capi/tests/c_program.rs, against the static and the
#     shared test library, plain and under AddressSanitizer + UBSan, and test_stale.c against
#     the release library, run in .ci/run's test step, compiler and sanitizers required);
#  4. the release library: SONAME librope_kernels.so.0, no test hook exported;
#  5. the README "C quick start" lines, verbatim, and their output;
#  6. scripts/install-capi.sh into a temporary prefix, then a CMake project
#     (find_package(RopeKernels), capi/pkg/consumer) and a pkg-config build against it.
# ROPE_CAPI_ARM_LINK=0 skips the Cortex-M link (it installs gcc-arm-none-eabi, ~95 MB).
set -euo pipefail
cd "$(dirname "$0")/../.."
CBINDGEN_VERSION=0.29.4
ARM_LINK=${ROPE_CAPI_ARM_LINK:-1}
step() { printf '\n=== capi: %s (t+%ss)\n' "$*" "$SECONDS"; }

step "tools"
need_apt=()
command -v cc >/dev/null || need_apt+=(gcc libc6-dev)
command -v c++ >/dev/null || need_apt+=(g++)
command -v cmake >/dev/null || need_apt+=(cmake)
command -v pkg-config >/dev/null || need_apt+=(pkg-config)
command -v readelf >/dev/null && command -v nm >/dev/null || need_apt+=(binutils)
if [ "$ARM_LINK" = 1 ] && ! command -v arm-none-eabi-gcc >/dev/null; then
    need_apt+=(gcc-arm-none-eabi libnewlib-arm-none-eabi)
fi
if [ ${#need_apt[@]} -gt 0 ]; then
    apt-get update
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y --no-install-recommends "${need_apt[@]}"
fi
rustup target add thumbv7em-none-eabihf
if [ "$(cbindgen --version 2>/dev/null || true)" != "cbindgen $CBINDGEN_VERSION" ]; then
    # A debug build without debuginfo (as 60-gate.sh installs gungraun-runner): it compiles
    # in about a third of the time of a release build, and parses this one crate.
    CARGO_PROFILE_DEV_DEBUG=0 cargo install --debug cbindgen --version "$CBINDGEN_VERSION" --locked
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
cc -std=c99 -Wall -Wextra -Werror -pedantic -DROPE_CAPI_TESTING -Iinclude -c "$tmp/h.c" -o "$tmp/h.o"

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

step "release library: SONAME, no test hook"
cargo build --release -p rope-kernels-capi
readelf -d target/release/librope_kernels.so | grep -F 'Library soname: [librope_kernels.so.0]'
if nm -D --defined-only target/release/librope_kernels.so | grep rope_test_fault ||
    nm --defined-only target/release/librope_kernels.a 2>/dev/null | grep rope_test_fault; then
    echo "the release library exports the test hook rope_test_fault"
    exit 1
fi

# Runs a quick start build and compares its output with capi/examples/quickstart.expected,
# which README shows.
expected=capi/examples/quickstart.expected
grep -qxF "$(cat "$expected")" README.md || { echo "README.md does not show $expected"; exit 1; }
check_output() {
    "$@" >"$tmp/out.txt"
    diff -u "$expected" "$tmp/out.txt" || { echo "$*: unexpected output"; exit 1; }
    echo "$*: $(cat "$tmp/out.txt")"
}

step "README C quick start, verbatim"
cargo build --release -p rope-kernels-capi
mkdir -p target/quickstart
cc -std=c11 -Iinclude capi/examples/quickstart.c target/release/librope_kernels.a \
    -lgcc_s -lutil -lrt -lpthread -lm -ldl -lc -o target/quickstart/quickstart
check_output target/quickstart/quickstart
scripts/install-capi.sh target/capi
export PKG_CONFIG_PATH="$PWD/target/capi/lib/pkgconfig"
cc -std=c11 capi/examples/quickstart.c $(pkg-config --cflags --libs rope_kernels) \
    -Wl,-rpath,"$PWD/target/capi/lib" -o target/quickstart/quickstart_shared
check_output target/quickstart/quickstart_shared
unset PKG_CONFIG_PATH

step "install into a fresh prefix; CMake and pkg-config consumers"
prefix="$tmp/prefix"
bash scripts/install-capi.sh "$prefix"
for f in include/rope_kernels.h lib/librope_kernels.a lib/librope_kernels.so.0.1.0 \
    lib/pkgconfig/rope_kernels.pc lib/cmake/RopeKernels/RopeKernelsConfig.cmake \
    lib/cmake/RopeKernels/RopeKernelsConfigVersion.cmake; do
    test -f "$prefix/$f" || { echo "not installed: $f"; exit 1; }
done
test "$(readlink "$prefix/lib/librope_kernels.so")" = librope_kernels.so.0
test "$(readlink "$prefix/lib/librope_kernels.so.0")" = librope_kernels.so.0.1.0
cmake -S capi/pkg/consumer -B "$tmp/cmake" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release
cmake --build "$tmp/cmake"
check_output "$tmp/cmake/quickstart_shared"
check_output "$tmp/cmake/quickstart_static"
readelf -d "$tmp/cmake/quickstart_shared" | grep -F 'Shared library: [librope_kernels.so.0]'
if readelf -d "$tmp/cmake/quickstart_static" | grep -F librope_kernels; then
    echo "quickstart_static links the shared library"
    exit 1
fi
# A version the package does not satisfy is refused.
mkdir -p "$tmp/cmake-too-new"
printf 'cmake_minimum_required(VERSION 3.13)\nproject(p C)\nfind_package(RopeKernels 0.2 REQUIRED)\n' \
    >"$tmp/cmake-too-new/CMakeLists.txt"
if cmake -S "$tmp/cmake-too-new" -B "$tmp/cmake-too-new/build" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null 2>&1; then
    echo "find_package(RopeKernels 0.2) accepted version 0.1.0"
    exit 1
fi
PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --modversion rope_kernels
cc -std=c11 capi/examples/quickstart.c $(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --cflags --libs rope_kernels) \
    -Wl,-rpath,"$prefix/lib" -o "$tmp/quickstart_pc"
check_output "$tmp/quickstart_pc"

step "C ABI checks passed"
