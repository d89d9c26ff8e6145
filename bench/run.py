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

--nested runs the same benchmark inside a TCG guest of the kernel with
the HugeTLB HGM series (make hgm-kernel), both QEMUs of each migration
in there, so that hugetlbfs with HGM can be measured against hugetlbfs
without it on the same kernel (tests/hgm-kernel/run --bench boots it
and brings the results back); make bench NESTED=1.
"""
import argparse
import contextlib
import datetime
import json
import os
import signal
import sys

from hgmbench import GUEST, QEMU, TOP, concurrency, report
from hgmbench.host import HostSetup, kernel_splits_hugetlb, touch_hugepages
from hgmbench.scenarios import SCENARIOS, pages_1g, pages_2m, plan, run_all
from hgmbench.vm import probe_accel


# Nested (both QEMUs under TCG inside a TCG guest): hugetlbfs with and
# without HGM, 2 MiB and 1 GiB pages; small enough for doubly emulated
# guests (one vCPU, a smaller working set filled more slowly, so precopy
# gets less time), and a TCG translation cache of 256 MiB (the default
# would take an eighth of the guest's RAM for each of the two QEMUs)
NESTED_DEFAULTS = {
    "scenarios": "hugetlbfs-2m,hugetlbfs-2m-hgm,hugetlbfs-1g,hugetlbfs-1g-hgm",
    "network": "loopback", "vcpus": 1, "workload_mb": 256,
    "precopy_bandwidth_mb": 16, "accel": "tcg,thread=multi,tb-size=256",
    "timeout": 900,
}
HOST_DEFAULTS = {
    "scenarios": ",".join(s.name for s in SCENARIOS),
    "network": "loopback,netem", "vcpus": 2, "workload_mb": 512,
    "precopy_bandwidth_mb": 64, "accel": None, "timeout": 300,
}


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nested", action="store_true",
                    help="inside a TCG guest of the HGM kernel (defaults:"
                    " %s)" % ", ".join("%s %s" % (k, v) for k, v
                                       in NESTED_DEFAULTS.items()))
    ap.add_argument("--scenarios")
    ap.add_argument("--preempt", default="off,on")
    ap.add_argument("--network")
    ap.add_argument("--rate", default="10gbit")
    ap.add_argument("--bandwidth-mb", type=int, default=1192,
                    help="max-postcopy-bandwidth, MiB/s (default 10 Gbit/s)")
    ap.add_argument("--precopy-bandwidth-mb", type=int,
                    help="max-bandwidth during precopy, MiB/s: below the"
                    " guest's dirty rate, so that postcopy has work")
    ap.add_argument("--delay-us", type=int, default=50)
    ap.add_argument("--guest-mb", type=int, default=1024)
    ap.add_argument("--workload-mb", type=int)
    ap.add_argument("--vcpus", type=int)
    ap.add_argument("--mode", default="random", choices=("random", "seq", "hot"))
    ap.add_argument("--precopy-secs", type=int, default=4)
    ap.add_argument("--run-secs", type=int, default=600)
    ap.add_argument("--timeout", type=int)
    ap.add_argument("--accel",
                    help="QEMU's -accel for the guests (default: KVM when it"
                    " boots the guest, else TCG)")
    ap.add_argument("--host-ready", action="store_true",
                    help="huge pages and hugetlbfs are there already (the"
                    " nested guest): no scripts/host-setup")
    ap.add_argument("--out", default=os.path.join(TOP, "bench/results"))
    ap.add_argument("--report", metavar="JSON",
                    help="only write the report of the results in JSON (of"
                    " a nested run: with --nested-on)")
    ap.add_argument("--nested-on", metavar="TEXT",
                    help="what the nested guest ran on, for the report")
    ap.add_argument("--builds", metavar="NAME=PATH,...",
                    help="compare these QEMU binaries (builds of the"
                    " series), each in every scenario, one after the other")
    ap.add_argument("--stats", default="on",
                    help="QEMU's fault statistics (postcopy-blocktime) on"
                    " the destination: on, off, or on,off to measure what"
                    " they cost (default on)")
    ap.add_argument("--prefetch", default="",
                    help="HGM scenarios: x-postcopy-hgm-prefetch on the"
                    " source, a comma list of sizes (0 = off, 64K, 2M, ...)"
                    " to run each; QEMU's default when not given")
    ap.add_argument("--repeat", type=int, default=1,
                    help="run everything this many times")
    ap.add_argument("--warmup", type=int, choices=(0, 1), default=1,
                    help="first a migration that does not count, of the"
                    " first run (default 1; 0: none)")
    ap.add_argument("--test-rounds", type=int, default=0,
                    help="concurrency test instead of the benchmark:"
                    " postcopy with HGM this many times, with and without"
                    " preempt, vCPUs faulting on neighbouring 4 KiB pieces")
    args = ap.parse_args()
    for k, v in (NESTED_DEFAULTS if args.nested else HOST_DEFAULTS).items():
        if getattr(args, k) is None:
            setattr(args, k, v)
    return args


def nested(args):
    """Run this benchmark with @args inside the HGM kernel's guest."""
    if args.builds:
        sys.exit("bench: --builds is not for --nested (the guest has one"
                 " QEMU, build/obj's)")
    opts = []
    for k in list(NESTED_DEFAULTS) + ["preempt", "rate", "bandwidth_mb",
                                      "delay_us", "guest_mb", "mode",
                                      "precopy_secs", "run_secs", "stats",
                                      "prefetch", "repeat", "warmup"]:
        if getattr(args, k) not in (None, ""):
            opts += ["--" + k.replace("_", "-"), str(getattr(args, k))]
    if any(":" in o or " " in o for o in opts):
        sys.exit("bench: no ':' or space in the options of --nested")
    # At most --timeout (and 5 minutes to start) for each run
    wanted = args.scenarios.split(",")
    runs = plan([s for s in SCENARIOS if s.name in wanted], args)
    limit = (len(runs) + args.warmup) * (args.timeout + 300)
    # It boots the guest, runs this there with --host-ready, and writes
    # the report of what comes back with --report
    os.execv(os.path.join(TOP, "tests/hgm-kernel/run"),
             ["tests/hgm-kernel/run", "--bench", ":".join(opts), args.out,
              str(args.guest_mb), str(limit)])


def report_only(args):
    with open(args.report) as f:
        doc = json.load(f)
    if args.nested_on:
        doc["nested_on"] = args.nested_on
    now = datetime.datetime.strptime(doc["date"], "%Y-%m-%d %H:%M")
    report.write(doc, args.out, now)
    return 1 if any(r.get("ok") is False for r in doc["results"]) else 0


def main():
    # Stopped from outside: clean up (QEMUs, mounts, huge pages) all the same
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(143))
    args = parse_args()
    if args.report:
        return report_only(args)
    if args.nested:
        return nested(args)
    if args.test_rounds:
        return concurrency.run(args)

    if os.geteuid() != 0:
        sys.exit("bench: run as root (huge pages, network namespaces)")
    for f in (QEMU, os.path.join(GUEST, "vmlinuz")):
        if not os.path.exists(f):
            sys.exit("bench: %s is missing (make build; scripts/guest-build)" % f)

    if args.accel:
        accel, why = args.accel, "--accel"
    else:
        accel, why = probe_accel(args)
    print("bench: accelerator %s (%s)" % (accel.split(",")[0], why), flush=True)
    wanted = args.scenarios.split(",")
    scenarios = [s for s in SCENARIOS if s.name in wanted]
    # Huge pages and the THP tmpfs, given back afterwards
    n1g = 0
    if any(s.backing == "hugetlb1g" for s in scenarios) \
            and args.guest_mb % 1024 == 0:
        n1g = pages_1g(args.guest_mb)
    setup = contextlib.nullcontext() if args.host_ready else HostSetup(
        args.guest_mb, pages_2m(scenarios, args.guest_mb), n1g)
    with setup:
        touched = touch_hugepages()
        results, warmup = run_all(scenarios, args, accel)
        hgm_kernel = kernel_splits_hugetlb()

    now = datetime.datetime.now()
    doc = report.document(args, accel, why, hgm_kernel, results, now)
    if warmup:
        doc["warmup"] = warmup
    if touched:
        doc["hugepages_touched"] = touched
    report.write(doc, args.out, now)
    return 1 if any(r.get("ok") is False for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
