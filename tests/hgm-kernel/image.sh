# The image of the HGM kernel's guest (tests/hgm-kernel/run): an initramfs
# with busybox, tests/guest/init, the kernel series' selftests and, but for
# the 'selftests' variant, the QEMU series' tests.  Sourced by
# tests/hgm-kernel/run, which sets $out, $obj, $variant and $image.
# shellcheck shell=bash

# Bump when the way the image is made changes (its inputs are hashed)
recipe=2

# Files of the image, one 'DEST SRC' a line (symbolic links are copied as
# the files they point to).
bins=(qemu-system-x86_64 qemu-img tests/qtest/migration-test tests/unit/test-hgm)

image_files() {
    local b f d lib dir
    echo "/init $top/tests/guest/init"
    echo "/lib/hgm/tap.sh $top/tests/lib/tap.sh"
    echo "/bin/busybox $busybox"
    for f in hugetlb-hgm userfaultfd; do
        echo "/selftests/$f $out/selftests/$f"
    done
    # the kernel series' selftests only: no QEMU, nothing else
    [ "$variant" = selftests ] && return
    for b in "${bins[@]}"; do
        echo "/usr/local/bin/$(basename "$b") $obj/$b"
    done
    # Shared libraries where ldd finds them, and the dynamic loader at the
    # path the binaries name (PT_INTERP)
    for b in "${bins[@]}"; do
        echo "$obj/$b"
    done >"$out/$variant-initramfs.elf"
    [ $variant = bench ] && bench_files
    while read -r b; do
        ldd "$b" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }'
    done <"$out/$variant-initramfs.elf" | LC_ALL=C sort -u | while read -r lib; do
        echo "$lib $lib"
    done
    # Firmware: the directories of 'qemu -L help', without build/obj's
    # qemu-bundle prefix (QEMU in /usr/local/bin, its configured bindir,
    # looks there).
    while read -r dir; do
        dir=${dir#"$obj/qemu-bundle"}
        d=$dir
        [ -d "$obj/qemu-bundle$dir" ] && d=$obj/qemu-bundle$dir
        [ -d "$d" ] || continue
        (cd -P "$d" && find . \( -type f -o -type l \) -print | LC_ALL=C sort) |
            while read -r f; do
                echo "$dir/${f#./} $(cd -P "$d" && pwd)/${f#./}"
            done
    done < <("$obj/qemu-system-x86_64" -L help)
}

# What the benchmark adds: Debian's Python (its standard library without
# tests, GUI and build files), bench/ (with tests/lib/results.py, the
# result lines of its concurrency test) and QEMU's python package where
# bench/run.py looks for them (/bench, /tests/lib, /build/qemu/python),
# and the bench guest (/build/guest); Python's extension modules go to
# the list of ELF files whose libraries the image needs.
# (/build/obj/qemu-system-x86_64 is a link to the QEMU in /usr/local/bin,
# made in build_image.)
bench_files() {
    local py lib f
    py=$(readlink -f /usr/bin/python3)
    [ -x "$py" ] || die "no /usr/bin/python3 (Debian's python3 package)"
    lib=$("$py" -c 'import sysconfig; print(sysconfig.get_path("stdlib"))')
    echo "/usr/bin/python3 $py"
    echo "$py" >>"$out/$variant-initramfs.elf"
    (cd "$lib" && find . \( -name test -o -name tests -o -name idlelib \
        -o -name tkinter -o -name turtledemo -o -name lib2to3 \
        -o -name ensurepip -o -name pydoc_data -o -name 'config-3*' \
        -o -name site-packages -o -name dist-packages -o -name '_test*.so' \
        -o -name 'xx*.so' -o -name '_ctypes_test*' -o -name '*.opt-?.pyc' \
        -o -name '_tkinter*' \) -prune -o \( -type f -o -type l \) -print |
        LC_ALL=C sort) | while read -r f; do
        f=$lib/${f#./}
        echo "$f $f"
        case $f in *.so) echo "$f" >>"$out/$variant-initramfs.elf" ;; esac
    done
    (cd "$top" && find bench/run.py bench/hgmbench tests/lib/results.py -name '*.py' |
        LC_ALL=C sort) |
        while read -r f; do echo "/$f $top/$f"; done
    (cd "$top/build/qemu/python" && find qemu -name '*.py' | LC_ALL=C sort) |
        while read -r f; do echo "/build/qemu/python/$f $top/build/qemu/python/$f"; done
    for f in vmlinuz initramfs.gz; do
        [ -f "$top/build/guest/$f" ] || die "no build/guest/$f: run 'make guest'"
        echo "/build/guest/$f $top/build/guest/$f"
    done
}

# The key of the image: recipe, tools, each file's place and contents
image_key() {
    {
        echo "recipe $recipe"
        strip --version | head -n1
        gzip --version | head -n1
        cpio --version | head -n1
        while read -r dest src; do
            echo "$dest $(sha256sum <"$src" | cut -c1-64)"
        done <"$out/$variant-initramfs.files"
    } | sha256sum | cut -c1-64
}

build_image() {
    local key root t0 dest src
    busybox=$(command -v busybox || true)
    if [ -z "$busybox" ] || readelf -l "$busybox" | grep -q INTERP; then
        die "need a static busybox (apt-get install busybox-static)"
    fi
    if [ "$variant" != selftests ]; then
        for f in "${bins[@]}"; do
            [ -x "$obj/$f" ] || die "no $obj/$f: run 'make build' (or ninja -C build/obj $f)"
        done
    fi
    for f in bzImage selftests/hugetlb-hgm selftests/userfaultfd; do
        [ -f "$out/$f" ] || die "no $out/$f: run 'make hgm-kernel'"
    done
    mkdir -p "$out"
    image_files >"$out/$variant-initramfs.files" || die "listing the image's files failed"
    key=$(image_key)
    if [ -f "$image" ] && [ "$(cat "$out/stamp.$variant-initramfs" 2>/dev/null)" = "$key" ]; then
        say "image is up to date ($image)"
        return
    fi
    t0=$(now)
    say "building the image $image"
    root=$out/$variant-initramfs.d
    rm -rf "$root"
    mkdir -p "$root"/{bin,dev,proc,sys,tmp,root,selftests}
    while read -r dest src; do
        mkdir -p "$root$(dirname "$dest")"
        cp -L "$src" "$root$dest" || die "cannot copy $src"
    done <"$out/$variant-initramfs.files"
    chmod 755 "$root/init"
    # No debug info in the guest (no debugger there): a third of the size
    if [ "$variant" != selftests ]; then
        for f in "${bins[@]}"; do
            strip --strip-debug "$root/usr/local/bin/$(basename "$f")"
        done
    fi
    mkdir -p "$root/etc"
    printf 'root:x:0:0:root:/root:/bin/sh\n' >"$root/etc/passwd"
    printf 'root:x:0:\n' >"$root/etc/group"
    printf '127.0.0.1 localhost hgm-guest\n::1 localhost\n' >"$root/etc/hosts"
    if [ $variant = bench ]; then
        mkdir -p "$root/build/obj"
        ln -s /usr/local/bin/qemu-system-x86_64 "$root/build/obj/qemu-system-x86_64"
    fi
    # The image's libraries are enough: QEMU starts in it
    if [ "$(id -u)" = 0 ] && [ "$variant" != selftests ]; then
        chroot "$root" /usr/local/bin/qemu-system-x86_64 --version >/dev/null &&
        chroot "$root" /usr/local/bin/qemu-img --version >/dev/null &&
        chroot "$root" /usr/local/bin/test-hgm -l >/dev/null ||
            die "the binaries do not run from the image's root ($root)"
        if [ $variant = bench ]; then
            chroot "$root" /usr/bin/python3 -c 'import asyncio, ctypes, json, ssl' ||
                die "Python does not run from the image's root ($root)"
        fi
    fi
    pack_initramfs "$root" "$image"
    (cd "$root" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum) >"$out/$variant-initramfs.manifest"
    rm -rf "$root"
    echo "$key" >"$out/stamp.$variant-initramfs"
    say "image: $(du -h "$image" | cut -f1) in $(secs "$t0" "$(now)") s"
}
