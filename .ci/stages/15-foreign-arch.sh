#!/usr/bin/env bash
# Runs the suite on a big-endian target (s390x) and on riscv64 under qemu-user, so that the
# scalar and portable tiers, the f16/bf16 paths and the C ABI are checked on another byte
# order and another ISA (issue 16). The linkers and runners are set in .cargo/config.toml.
# Installs what it needs: the cross gcc and libc of each target, qemu-user, the rustup
# targets.
#
# What runs: on s390x the lib unit tests, every integration test of the crate but two
# (below), the C ABI's unit tests and the C program (capi/tests/c_program.rs) built with the
# cross gcc and run under qemu, against the static and the shared library; on riscv64 the
# lib unit tests and the tier suite (tests/tiers/). On both,
# workspace-tests/tests/cross_arch.rs checks output bits against hashes computed on x86-64, and asserts
# which tiers the target has (scalar and portable only: NEON reads a bf16 pair as one
# little-endian word and exists only on little-endian aarch64).
# Left out, and why:
# - tests/unsafe_audit.rs reads the sources (nothing of the target);
# - the sanitized builds of the C program: AddressSanitizer cannot reserve its shadow
#   memory under qemu-user (the x86-64 test step of .ci/run runs them);
# - two accuracy statistics of the cos/sin generator against f64 libm (about 70 s under
#   qemu): they measure the same bits that workspace-tests/tests/cross_arch.rs proves equal to x86-64's.
#
# Built with opt-level 1 (debug assertions and overflow checks stay on) and line tables
# only: compiling costs a little more than at opt-level 0, running under qemu about 6 times
# less (riscv64: 51 s + 10 s against 42 s + 94 s).
set -euo pipefail
cd "$(dirname "$0")/../.."

start=$SECONDS
# target, gcc/qemu prefix, Debian package of the cross libc.
targets=(
    "s390x-unknown-linux-gnu s390x libc6-dev-s390x-cross"
    "riscv64gc-unknown-linux-gnu riscv64 libc6-dev-riscv64-cross"
)

need=()
command -v qemu-s390x >/dev/null && command -v qemu-riscv64 >/dev/null || need+=(qemu-user)
for t in "${targets[@]}"; do
    read -r _ arch libc <<<"$t"
    command -v "$arch-linux-gnu-gcc" >/dev/null || need+=("gcc-$arch-linux-gnu")
    [ -e "/usr/$arch-linux-gnu/lib/libc.so.6" ] || need+=("$libc")
done
if [ ${#need[@]} -gt 0 ]; then
    apt-get update
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${need[@]}"
fi
for t in "${targets[@]}"; do
    read -r target _ <<<"$t"
    rustup target list --installed | grep -qx "$target" || rustup target add "$target"
done
echo "=== foreign-arch: tools ready; $((SECONDS - start)) s"

# Every integration test of the crate except those named above.
tests=()
# (a test is tests/NAME.rs or tests/NAME/main.rs, as cargo finds them)
for f in tests/*.rs tests/*/main.rs; do
    name=$(basename "${f%/main.rs}" .rs)
    case $name in unsafe_audit) ;; *) tests+=(--test "$name") ;; esac
done

log=$(mktemp)
for t in "${targets[@]}"; do
    read -r target arch _ <<<"$t"
    t0=$SECONDS
    # The target through the environment, not `--target`: the C program test runs
    # `cargo build -p rope-kernels-capi` itself, which must build the same target and profile.
    export CARGO_BUILD_TARGET=$target CARGO_PROFILE_DEV_OPT_LEVEL=1 CARGO_PROFILE_DEV_DEBUG=line-tables-only
    # One cargo command for the packages, so the crate is compiled once for the target
    # (three commands compiled it three times, with three feature sets). The C ABI's unit
    # tests and C program on s390x only: riscv64 is little-endian LP64 like x86-64, where
    # they run natively, and cross_arch.rs checks the C ABI's bits on both targets (the C
    # ABI's unit tests cost riscv64 ~100 s of compiling).
    # riscv64 runs the tier suite (every kernel of the scalar and portable tiers, every dtype,
    # against the scalar oracle) with the lib tests and cross_arch.rs, not the other
    # integration tests: those check the API's logic (errors, loaders, goldens, views), which
    # s390x, aarch64 and x86-64 all run; on riscv64 they cost ~180 s of compiling.
    if [ "$arch" = s390x ]; then
        suite=(-p rope-kernels-capi "${tests[@]}" --test c_program)
    else
        suite=(--test tiers)
    fi
    CC="$arch-linux-gnu-gcc" ROPE_CAPI_RUNNER="qemu-$arch -L /usr/$arch-linux-gnu" \
        ROPE_CAPI_REQUIRE_CC=1 ROPE_CAPI_NO_SANITIZERS=1 \
        cargo test -p rope-kernels -p rope-kernels-workspace-tests --lib "${suite[@]}" \
        --test cross_arch -- --nocapture \
        --skip accuracy_check_fails_on_naive_f32_angle --skip exact_mode_accuracy 2>&1 | tee "$log"
    if [ "$arch" = s390x ]; then
        for want in "^test_capi_static: passed" "^test_capi_shared: passed"; do
            grep -q "$want" "$log" || { echo "$target: the C program did not run ($want)" >&2; exit 1; }
        done
    fi
    grep -q "target $arch (.*): tiers \[Scalar, Portable\]$" "$log" || {
        echo "$target: workspace-tests/tests/cross_arch.rs did not report the scalar and portable tiers" >&2
        exit 1
    }
    unset CARGO_BUILD_TARGET CARGO_PROFILE_DEV_OPT_LEVEL CARGO_PROFILE_DEV_DEBUG
    echo "=== foreign-arch: $target under qemu-user passed; $((SECONDS - t0)) s"
done
rm -f "$log"
echo "=== foreign-arch (s390x big-endian, riscv64): $((SECONDS - start)) s"
