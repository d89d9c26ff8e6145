# Shared helpers for the scripts; source it, do not run it.
# shellcheck shell=bash

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# The name messages start with: the script's, unless it set its own
prog=${prog:-$(basename "$0")}

say() { echo "$prog: $*"; }
die() { echo "$prog: error: $*" >&2; exit 1; }

# Test results, one format for every test script: 'PASS  NAME',
# 'FAIL  NAME (REASON)', 'SKIP  NAME (REASON)', counted for summary()
pass=0 fail=0 skip=0
result() {  # result pass|fail|skip NAME [REASON]
    local r=$1 name=$2 why=${3:-}
    case $r in
    pass) pass=$((pass + 1)); printf 'PASS  %s\n' "$name" ;;
    fail) fail=$((fail + 1)); printf 'FAIL  %s%s\n' "$name" "${why:+ ($why)}" ;;
    skip) skip=$((skip + 1)); printf 'SKIP  %s%s\n' "$name" "${why:+ ($why)}" ;;
    esac
}

# The closing line of a test script, which .ci/run sums
summary() {
    echo "$pass passed, $fail failed, $skip skipped"
}
tree=$top/build/qemu
patches=$top/patches
# What build/qemu was last made from or exported to: a copy of the series.
applied=$tree/.git/hgm-applied

# git without the user's or the system's configuration, so that exported
# patches do not depend on who runs the export.
qgit() {
    GIT_CONFIG_GLOBAL=/dev/null GIT_CONFIG_NOSYSTEM=1 git -C "$tree" "$@"
}

# Write the commits after 'upstream' as patches into DIR (created) and a
# quilt series file.  Deterministic: no commit hashes, no signature, no
# numbering in subjects, fixed abbreviation.
export_to() {
    local dir=$1
    mkdir -p "$dir"
    qgit format-patch --quiet --zero-commit --no-signature --no-numbered \
        --abbrev=12 --no-cover-letter --no-thread --no-base \
        -o "$dir" upstream..HEAD >/dev/null
    (cd "$dir" && ls -1 -- *.patch 2>/dev/null || true) > "$dir/series"
}

# Print the sha256 of every .patch file in the given directories.
patch_hashes() {
    local d
    for d in "$@"; do
        [ -d "$d" ] || continue
        find "$d" -maxdepth 1 -name '*.patch' -type f -print0 |
            xargs -0 -r sha256sum | cut -d' ' -f1
    done | sort -u
}

# True when every patch in DIR is also in one of the other directories.
all_known() {
    local dir=$1; shift
    local known
    known=$(patch_hashes "$@")
    # comm -23: hashes in $dir that are not known
    [ -z "$(comm -23 <(patch_hashes "$dir") <(printf '%s\n' "$known" | sed '/^$/d'))" ]
}

# Same content in the two series directories (series file and patches)?
same_series() {
    diff -r -q -x '.*' -x README "$1" "$2" >/dev/null 2>&1
}

tree_dirty() {
    [ -n "$(qgit status --porcelain 2>/dev/null | head -n1)" ]
}

remember_series() {
    rm -rf "$applied"
    mkdir -p "$applied"
    [ -d "$patches" ] || return 0
    cp "$patches"/series "$applied"/ 2>/dev/null || true
    find "$patches" -maxdepth 1 -name '*.patch' -exec cp {} "$applied"/ \;
}

series_len() {
    local n
    n=$(grep -c . "$1" 2>/dev/null) || true
    echo "${n:-0}"
}
