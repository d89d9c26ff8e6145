#!/usr/bin/env python3
"""Postcopy benchmark: HGM against today's postcopy, side by side.

For each scenario (guest RAM backing, with or without postcopy-preempt,
over loopback or a veth pair with netem), start a destination and a
source QEMU running the benchmark guest (build/guest: Debian kernel,
busybox, bench/workload.c), run precopy for a while, switch to postcopy,
wait for completion and collect: the guest's first-touch stall histogram
after the switchover, QEMU's statistics, total time, downtime, postcopy
duration, bytes sent after the switchover, and the share of guest RAM
mapped huge on the destination at completion, 1 s and 5 s later.

Writes bench/results/<date>-<host>.{json,md,png}.  The parts are in
bench/hgmbench/: host preparation (huge pages and the THP tmpfs from
scripts/host-setup, undone afterwards; network namespaces), the QEMUs
(QEMU's own python package from build/qemu/python), the scenarios and
the report.  Every wait is bounded, and only processes it started are
stopped.  Run as root (huge pages, network namespaces): make bench.
"""
import argparse
import datetime
import os
import signal
import sys

from hgmbench import GUEST, QEMU, TOP, concurrency, report
from hgmbench.host import HostSetup, kernel_splits_hugetlb
from hgmbench.scenarios import SCENARIOS, pages_1g, pages_2m, run_all
from hgmbench.vm import probe_accel


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scenarios", default=",".join(s.name for s in SCENARIOS))
    ap.add_argument("--preempt", default="off,on")
    ap.add_argument("--network", default="loopback,netem")
    ap.add_argument("--rate", default="10gbit")
    ap.add_argument("--bandwidth-mb", type=int, default=1192,
                    help="max-postcopy-bandwidth, MiB/s (default 10 Gbit/s)")
    ap.add_argument("--precopy-bandwidth-mb", type=int, default=64,
                    help="max-bandwidth during precopy, MiB/s: below the"
                    " guest's dirty rate, so that postcopy has work")
    ap.add_argument("--delay-us", type=int, default=50)
    ap.add_argument("--guest-mb", type=int, default=1024)
    ap.add_argument("--workload-mb", type=int, default=512)
    ap.add_argument("--vcpus", type=int, default=2)
    ap.add_argument("--mode", default="random", choices=("random", "seq", "hot"))
    ap.add_argument("--precopy-secs", type=int, default=4)
    ap.add_argument("--run-secs", type=int, default=600)
    ap.add_argument("--timeout", type=int, default=300)
    ap.add_argument("--out", default=os.path.join(TOP, "bench/results"))
    ap.add_argument("--test-rounds", type=int, default=0,
                    help="concurrency test instead of the benchmark:"
                    " postcopy with HGM this many times, with and without"
                    " preempt, vCPUs faulting on neighbouring 4 KiB pieces")
    return ap.parse_args()


def main():
    # Stopped from outside: clean up (QEMUs, mounts, huge pages) all the same
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(143))
    args = parse_args()
    if args.test_rounds:
        return concurrency.run(args)

    if os.geteuid() != 0:
        sys.exit("bench: run as root (huge pages, network namespaces)")
    for f in (QEMU, os.path.join(GUEST, "vmlinuz")):
        if not os.path.exists(f):
            sys.exit("bench: %s is missing (make build; scripts/guest-build)" % f)

    accel, why = probe_accel(args)
    print("bench: accelerator %s (%s)" % (accel.split(",")[0], why), flush=True)
    wanted = args.scenarios.split(",")
    scenarios = [s for s in SCENARIOS if s.name in wanted]
    # Huge pages and the THP tmpfs, given back afterwards
    n1g = 0
    if any(s.backing == "hugetlb1g" for s in scenarios) \
            and args.guest_mb % 1024 == 0:
        n1g = pages_1g(args.guest_mb)
    with HostSetup(args.guest_mb, pages_2m(scenarios, args.guest_mb), n1g):
        results = run_all(scenarios, args, accel)
        hgm_kernel = kernel_splits_hugetlb()

    now = datetime.datetime.now()
    doc = report.document(args, accel, why, hgm_kernel, results, now)
    report.write(doc, args.out, now)
    return 1 if any(r.get("ok") is False for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
