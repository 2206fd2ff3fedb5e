# Shared by scripts/bench-gate.sh and scripts/instr-gate.sh (sourced, not run): builds the
# gate harness (tools/gate) against the baseline revision and against the working tree.
#
# Sets: root, target_dir, base_rev, base_tree, stage, stage_manifest.
# Environment: GATE_TARGET_DIR (default target/gate: one cargo target dir for every build),
# GATE_HARNESS (candidate | each), CANDIDATE_RUSTFLAGS, GATE_RUSTFLAGS.
#
# Both sides are built from one directory, $target_dir/stage: gate_stage makes it hold the
# files of one side (copying only the files that differ, so cargo rebuilds only what
# changed), then cargo builds it. Cargo derives symbol hashes (-C metadata) from a path
# dependency's path, and the link order of the functions follows them: built from two
# directories, the same source gave two layouts, and same versus same timed 6.5%
# (prefill/f32/interleaved, CI) and -9.7% (prefill/f16/interleaved, here) apart, every run:
# the gate flagged code placement, not code. From one directory, the same source gives the
# same executable, byte for byte; a change moves only the code it touches and what the
# linker places after it.
#
# GATE_RUSTFLAGS (default `-C llvm-args=-align-all-functions=6`) goes to both builds: every
# function starts on a 64-byte boundary, so a kernel whose code did not change keeps the
# alignment of its loops when a change elsewhere moves it. Set it empty to time the default
# layout.

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
target_dir=${GATE_TARGET_DIR:-$root/target/gate}
mkdir -p "$target_dir"
target_dir=$(cd "$target_dir" && pwd)
stage=$target_dir/stage
stage_manifest=$stage/tools/gate/Cargo.toml
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
}

# One gate at a time per target dir: the stage holds one side at a time.
gate_lock() {
    exec {gate_lock_fd}> "$target_dir/.lock"
    flock -n "$gate_lock_fd" || gate_die "another gate is running on $target_dir (GATE_TARGET_DIR): wait for it, or give this one another GATE_TARGET_DIR"
}

# Makes $stage hold exactly the files of one side: $1 = baseline (the extracted revision)
# or candidate (the working tree's files that git tracks or does not ignore). A file whose
# contents differ is copied, with a new mtime, so cargo's freshness check (mtimes) rebuilds
# what it feeds; an unchanged file keeps its mtime; a file the side lacks is removed.
gate_stage() {
    local side=$1 src want have
    case $side in
        baseline) src=$base_tree ;;
        candidate) src=$root ;;
        *) gate_die "gate_stage: side '$side'" ;;
    esac
    mkdir -p "$stage"
    want=$target_dir/stage-want.sums
    have=$target_dir/stage-have.sums
    (
        cd "$src" || exit 1
        if [[ $side == candidate ]]; then
            git ls-files -z -c -o --exclude-standard
        else
            find . -type f ! -path ./.extracted -printf '%P\0'
        fi | while IFS= read -r -d '' f; do [[ -f $f ]] && printf '%s\0' "$f"; done |
            xargs -0 -r sha256sum -- | LC_ALL=C sort
    ) > "$want" || gate_die "listing the $side files in $src failed"
    (cd "$stage" && find . -type f -printf '%P\0' | xargs -0 -r sha256sum -- | LC_ALL=C sort) > "$have" ||
        gate_die "listing the files of $stage failed"
    local f
    # Paths in the stage that the side lacks: removed. Files of the side that the stage lacks
    # or holds with other contents: copied.
    while IFS= read -r f; do
        rm -f "$stage/$f"
    done < <(LC_ALL=C comm -13 <(cut -c 67- "$want" | LC_ALL=C sort) <(cut -c 67- "$have" | LC_ALL=C sort))
    while IFS= read -r f; do
        mkdir -p "$stage/$(dirname "$f")" && cp "$src/$f" "$stage/$f" || gate_die "copying $src/$f to the stage failed"
    done < <(LC_ALL=C comm -23 "$want" "$have" | cut -c 67-)
    echo "$gate_name: stage holds the $side ($(wc -l < "$want") files)" >&2
}

# The machine, for the report.
gate_machine() {
    local cpu
    cpu=$(grep -m1 'model name' /proc/cpuinfo 2> /dev/null | cut -d: -f2- | sed 's/^ *//')
    echo "${cpu:-unknown CPU}, $(nproc 2> /dev/null || echo '?') logical CPUs"
}
