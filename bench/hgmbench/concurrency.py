"""The concurrency test (tests/run-concurrency, bench/run.py --test-rounds
N): postcopy with HGM on THP memory, N times with and without preempt,
while the guest's vCPUs walk neighbouring 4 KiB pieces of the same huge
pages.  Prints its results as every test of tests/ does
(tests/lib/results.py)."""
import os
import sys

from . import GUEST, TOP
from .host import HostSetup, Net
from .report import fmt
from .scenarios import SCENARIOS, Skip, run_one
from .vm import probe_accel

sys.path.insert(0, os.path.join(TOP, "tests/lib"))
from results import result  # noqa: E402  (tests/lib is not a package)


def run(args):
    """The test; its exit status."""
    sc = [s for s in SCENARIOS if s.name == "thp-hgm"][0]
    if os.geteuid() != 0:
        result("skip", "concurrency", "needs root")
        return 0
    with HostSetup(args.guest_mb):
        return rounds(args, sc)


def rounds(args, sc):
    if not os.path.exists(os.path.join(GUEST, "vmlinuz")):
        result("fail", "concurrency", "no guest (scripts/guest-build)")
        return 1
    try:
        sc.check(args.guest_mb)
    except Skip as e:
        result("skip", "concurrency", str(e))
        return 0
    accel, why = probe_accel(args)
    failed = 0
    for i in range(1, args.test_rounds + 1):
        for preempt in (False, True):
            name = "concurrency round %d%s (%d vCPUs, %s, %s)" % (
                i, ", preempt" if preempt else "", args.vcpus, args.mode,
                accel.split(",")[0])
            with Net("loopback", None, 0) as net:
                r = run_one(sc, preempt, net, args, accel,
                            "t%d-%d" % (os.getpid(), i))
            faults = sum((r.get("qemu_faults") or {}).values())
            if r.get("ok") and not faults:
                r["ok"], r["error"] = False, "no page fault during postcopy"
            if r.get("ok"):
                result("pass", "%s: %d faults in QEMU, %d first touches in"
                       " the guest after the switchover, p99 %s us, no"
                       " corruption, all %d threads running; the guest"
                       " answered in %s s%s"
                       % (name, faults, r["first_touches"],
                          fmt(r["stall_p99_us"]), args.vcpus, r["close_s"],
                          "" if r["close_sent"] == 1 else
                          ", after the line was sent %d times"
                          % r["close_sent"]))
            else:
                failed += 1
                result("fail", name, r.get("error") or
                       "corrupt %s, stuck threads %s" % (
                           r.get("corrupt"), r.get("stuck_threads")))
                for side in ("src", "dst"):
                    for line in r.get(side + "_serial_tail", []):
                        print("      %s guest, %s" % (side, line), flush=True)
    return 1 if failed else 0
