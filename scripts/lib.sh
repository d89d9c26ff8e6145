# Shared helpers for the scripts; source it, do not run it.
# shellcheck shell=bash

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# The name messages start with: the script's, unless it set its own
prog=${prog:-$(basename "$0")}

say() { echo "$prog: $*"; }
die() { echo "$prog: error: $*" >&2; exit 1; }

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

# pack_initramfs ROOT OUT: the directory ROOT as a gzip'd newc cpio archive
# OUT (an initramfs), reproducibly: fixed times, owners and order.  The one
# packer of the bench guest (scripts/guest-build) and the HGM kernel's
# guest (tests/hgm-kernel/image.sh).
pack_initramfs() {
    local root=$1 out=$2
    command -v cpio >/dev/null || die "need cpio (make deps)"
    find "$root" -exec touch -h -d @0 {} +
    (cd "$root" && find . -print0 | LC_ALL=C sort -z |
        cpio --null -o -H newc -R 0:0 --reproducible --quiet) |
        gzip -n -6 >"$out.tmp" || die "packing $root into $out failed"
    mv "$out.tmp" "$out"
}
