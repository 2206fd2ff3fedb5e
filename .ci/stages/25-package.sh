#!/usr/bin/env bash
# The published crate passes its own tests (issue 16): `cargo package` builds the `.crate`
# (and verifies that it compiles on its own), then the crate's test suite runs from the
# unpacked `.crate`, outside this workspace, so a test that needs a file or a dependency
# the package does not ship fails here. Also: the docs build without broken links with and
# without default features. (`--all-features` compiles: .ci/run's clippy; the one internal
# feature, `bench-internals`, only adds benchmark support.)
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
start=$SECONDS

echo "=== package: cargo package -p rope-kernels"
cargo package -p rope-kernels
version=$(cargo pkgid -p rope-kernels | sed 's/.*[@#]//')
crate="target/package/rope-kernels-$version.crate"
test -s "$crate"
echo "package: $(tar tzf "$crate" | wc -l) files in $crate"

# A fixed directory outside the workspace: the test binaries embed its path
# (CARGO_MANIFEST_DIR), and cargo may reuse them on a second run.
work="${TMPDIR:-/tmp}/rope-kernels-package-check"
rm -rf "$work"
mkdir -p "$work"
tar xzf "$crate" -C "$work"
echo "=== package: cargo test in the unpacked crate"
# The workspace's own target dir, so the dependencies built by the test step are reused
# (the packaged crate has another path, hence other artefacts of its own; in a target dir of
# its own every dependency was compiled again). `bench-internals` by hand: in the workspace
# the tests get it from the package's dev-dependency on itself, which a published manifest
# drops (a path dependency without a version).
(cd "$work/rope-kernels-$version" && CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}" cargo test --features bench-internals)

echo "=== package: docs without broken links (default and no default features)"
RUSTDOCFLAGS="-D warnings" cargo doc -p rope-kernels --no-deps
RUSTDOCFLAGS="-D warnings" cargo doc -p rope-kernels --no-deps --no-default-features
echo "=== package: passed; $((SECONDS - start)) s"
