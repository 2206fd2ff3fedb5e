# Shared by scripts/bench-gate.sh and scripts/instr-gate.sh (sourced, not run): builds the
# gate harness (tools/gate) against the baseline revision and against the working tree.
#
# Sets: root, target_dir, base_rev, base_tree, harness_base, harness_cand.
# Environment: GATE_TARGET_DIR (default target/gate: one cargo target dir for every build;
# cargo keys artifacts by source path and RUSTFLAGS, so the variants do not rebuild one
# another), GATE_HARNESS (candidate | each), CANDIDATE_RUSTFLAGS, GATE_RUSTFLAGS.
#
# GATE_RUSTFLAGS (default `-C llvm-args=-align-all-functions=6`) goes to both builds: every
# function starts on a 64-byte boundary, so a kernel whose code did not change keeps the
# placement of its loops. Without it, two builds of the same source from two directories
# (different symbol hashes, so a different function order) timed 3.5% apart on the
# development machine (prefill/f16/half_split, AVX-512), every run: the gate would have
# flagged code placement, not code. Set it empty to time the default layout.

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
target_dir=${GATE_TARGET_DIR:-$root/target/gate}
GATE_HARNESS=${GATE_HARNESS:-candidate}
CANDIDATE_RUSTFLAGS=${CANDIDATE_RUSTFLAGS:-}
GATE_RUSTFLAGS=${GATE_RUSTFLAGS--C llvm-args=-align-all-functions=6}
# Every build names the host as its target: RUSTFLAGS then reach only the code that runs,
# not build scripts and proc-macros, which the variants (baseline, candidate, slowed
# candidates) share instead of rebuilding them each.
gate_host=$(rustc -vV | sed -n 's/^host: //p')
[[ -n $gate_host ]] || gate_die "rustc -vV names no host"

# RUSTFLAGS of a build: the caller's, GATE_RUSTFLAGS, then $1 (the candidate's extra ones).
gate_rustflags() {
    local f="${RUSTFLAGS:-} $GATE_RUSTFLAGS ${1:-}"
    f=${f#"${f%%[![:space:]]*}"}
    echo "${f%"${f##*[![:space:]]}"}"
}

gate_die() {
    echo "$gate_name: $*" >&2
    exit 2
}

case $GATE_HARNESS in candidate | each) ;; *) gate_die "GATE_HARNESS='$GATE_HARNESS': expected 'candidate' or 'each'" ;; esac

# Resolves $1 to a commit and extracts it to $target_dir/trees/<sha> (once per commit: the
# path names the commit, so cargo never mistakes one revision's sources for another's);
# with GATE_HARNESS=candidate, the working tree's tools/gate replaces the revision's own, so
# both sides run the same benchmark code and only the library differs.
gate_baseline_tree() {
    local rev=$1 sha
    git rev-parse --is-inside-work-tree > /dev/null 2>&1 || gate_die "not in a git checkout: the baseline is a git revision"
    sha=$(git rev-parse --verify --quiet "$rev^{commit}") || gate_die "baseline '$rev' is not a commit of this repository (fetch it first, e.g. 'git fetch origin main')"
    base_rev=$sha
    base_tree=$target_dir/trees/$sha
    if [[ ! -f $base_tree/.extracted ]]; then
        rm -rf "$base_tree"
        mkdir -p "$base_tree"
        # The crate's own directory of that revision (it may be vendored inside a larger
        # repository: the prefix is its path there).
        local prefix
        prefix=$(git rev-parse --show-prefix)
        git -C "$(git rev-parse --show-toplevel)" archive "$sha:$prefix" | tar -x -C "$base_tree" || gate_die "git archive $sha:$prefix failed (is the crate at ${prefix:-the top} in that revision?)"
        touch "$base_tree/.extracted"
    fi
    if [[ $GATE_HARNESS == candidate ]]; then
        rm -rf "$base_tree/tools/gate"
        mkdir -p "$base_tree/tools"
        tar -C "$root/tools" --exclude=./gate/target --exclude=gate/target -cf - gate | tar -C "$base_tree/tools" -xf -
    elif [[ ! -f $base_tree/tools/gate/Cargo.toml ]]; then
        gate_die "GATE_HARNESS=each, but baseline $sha has no tools/gate (use GATE_HARNESS=candidate)"
    fi
    harness_base=$base_tree/tools/gate/Cargo.toml
    harness_cand=$root/tools/gate/Cargo.toml
}

# The machine, for the report.
gate_machine() {
    local cpu
    cpu=$(grep -m1 'model name' /proc/cpuinfo 2> /dev/null | cut -d: -f2- | sed 's/^ *//')
    echo "${cpu:-unknown CPU}, $(nproc 2> /dev/null || echo '?') logical CPUs"
}
