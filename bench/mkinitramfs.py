#!/usr/bin/env python3
"""Write a gzip'd newc cpio initramfs from (archive path, host file or
text, mode) entries: the benchmark guest's busybox, workload and init.
Deterministic: fixed owners and times, sorted entries."""
import gzip
import os
import sys


def entry(name, data, mode, ino):
    name_b = name.encode() + b"\0"
    hdr = "070701" + "".join("%08x" % v for v in (
        ino, mode, 0, 0, 1, 0, len(data), 0, 0, 0, 0, len(name_b), 0))
    out = hdr.encode() + name_b
    out += b"\0" * (-len(out) % 4)
    out += data + b"\0" * (-len(data) % 4)
    return out


def main():
    out, busybox, workload, init = sys.argv[1:5]
    files = {
        "bin": (b"", 0o040755),
        "dev": (b"", 0o040755),
        "proc": (b"", 0o040755),
        "sys": (b"", 0o040755),
        "bin/busybox": (open(busybox, "rb").read(), 0o100755),
        "workload": (open(workload, "rb").read(), 0o100755),
        "init": (open(init, "rb").read(), 0o100755),
    }
    blob = b""
    for ino, name in enumerate(sorted(files), 1):
        data, mode = files[name]
        blob += entry(name, data, mode, ino)
    blob += entry("TRAILER!!!", b"", 0, 0)
    blob += b"\0" * (-len(blob) % 512)
    with open(out + ".tmp", "wb") as f:
        f.write(gzip.compress(blob, mtime=0))
    os.replace(out + ".tmp", out)


if __name__ == "__main__":
    main()
