#!/usr/bin/env bash
# Builds rope-kernels' C library (release) and installs what a C or C++ project needs to
# find and link it, on Linux:
#
#   scripts/install-capi.sh PREFIX          (e.g. /usr/local, or $HOME/.local)
#
#   PREFIX/include/rope_kernels.h
#   PREFIX/lib/librope_kernels.a
#   PREFIX/lib/librope_kernels.so.0.1.0    (SONAME librope_kernels.so.0)
#   PREFIX/lib/librope_kernels.so.0 -> librope_kernels.so.0.1.0
#   PREFIX/lib/librope_kernels.so   -> librope_kernels.so.0
#   PREFIX/lib/pkgconfig/rope_kernels.pc
#   PREFIX/lib/cmake/RopeKernels/RopeKernelsConfig.cmake, RopeKernelsConfigVersion.cmake
#
# LIBDIR=lib64 (or lib/x86_64-linux-gnu) changes `lib`; DESTDIR=/stage installs under
# /stage/PREFIX with the files still pointing to PREFIX (for packagers). Needs cargo; the
# templates are capi/pkg/*.in.
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: $0 PREFIX" >&2; exit 2; }
case "$1" in
/*) prefix=${1%/} ;;
*) prefix=$(pwd)/${1%/} ;;
esac
cd "$(dirname "$0")/.."
libdir_rel=${LIBDIR:-lib}
libdir_rel=${libdir_rel%/}
case "$libdir_rel" in /* | *..*) echo "LIBDIR must be relative to PREFIX: $libdir_rel" >&2; exit 2 ;; esac
dest=${DESTDIR:-}${prefix}

version=$(sed -n 's/^version = "\(.*\)"/\1/p' capi/Cargo.toml | head -n 1)
major=${version%%.*}
minor=${version#*.}
minor=${minor%%.*}
soname=librope_kernels.so.0
# `cargo rustc -p rope-kernels-capi --release -- --print native-static-libs` on Linux;
# also in capi/tests/c_program.rs (NATIVE_LIBS).
native_libs="-lgcc_s -lutil -lrt -lpthread -lm -ldl -lc"
pointer_bytes=$(($(rustc --print cfg | sed -n 's/^target_pointer_width="\(.*\)"/\1/p') / 8))
# From PREFIX/LIBDIR/cmake/RopeKernels back to PREFIX.
up=$(printf '%s/cmake/RopeKernels' "$libdir_rel" | tr '/' '\n' | sed 's/.*/../' | paste -sd/ -)

cargo build --release -p rope-kernels-capi
lib=target/release
if command -v readelf >/dev/null && ! readelf -d "$lib/librope_kernels.so" | grep -qF "[$soname]"; then
    echo "$lib/librope_kernels.so: its SONAME is not $soname (capi/build.rs)" >&2
    exit 1
fi

fill() { # template -> file
    sed -e "s|@PREFIX@|$prefix|g" -e "s|@LIBDIR@|$prefix/$libdir_rel|g" -e "s|@LIBDIR_REL@|$libdir_rel|g" \
        -e "s|@PREFIX_FROM_HERE@|$up|g" -e "s|@VERSION@|$version|g" -e "s|@VERSION_MAJOR@|$major|g" \
        -e "s|@VERSION_MINOR@|$minor|g" -e "s|@SONAME@|$soname|g" -e "s|@SIZEOF_VOID_P@|$pointer_bytes|g" \
        -e "s|@NATIVE_LIBS@|$native_libs|g" -e "s|@NATIVE_LIBS_CMAKE@|$(echo "$native_libs" | sed 's/-l//g; s/ /;/g')|g" \
        "$1" >"$2"
}

install -d "$dest/include" "$dest/$libdir_rel/pkgconfig" "$dest/$libdir_rel/cmake/RopeKernels"
install -m 644 include/rope_kernels.h "$dest/include/"
install -m 644 "$lib/librope_kernels.a" "$dest/$libdir_rel/"
install -m 755 "$lib/librope_kernels.so" "$dest/$libdir_rel/librope_kernels.so.$version"
ln -sfn "librope_kernels.so.$version" "$dest/$libdir_rel/$soname"
ln -sfn "$soname" "$dest/$libdir_rel/librope_kernels.so"
fill capi/pkg/rope_kernels.pc.in "$dest/$libdir_rel/pkgconfig/rope_kernels.pc"
fill capi/pkg/RopeKernelsConfig.cmake.in "$dest/$libdir_rel/cmake/RopeKernels/RopeKernelsConfig.cmake"
fill capi/pkg/RopeKernelsConfigVersion.cmake.in "$dest/$libdir_rel/cmake/RopeKernels/RopeKernelsConfigVersion.cmake"
if grep -rq '@[A-Z_]*@' "$dest/$libdir_rel/pkgconfig/rope_kernels.pc" "$dest/$libdir_rel/cmake/RopeKernels"; then
    echo "an @...@ value was left unfilled" >&2
    exit 1
fi
echo "installed rope_kernels $version into ${DESTDIR:+$DESTDIR}$prefix"
