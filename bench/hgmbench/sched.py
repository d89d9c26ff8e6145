"""Where a QEMU's threads spent a stretch of time, from the scheduler's
events of the whole host (HGM_BENCH_PERF=sched: `perf sched record -a
-g`, on CLOCK_MONOTONIC, the clock of time.monotonic()).

For the destination's vCPU threads through postcopy this separates what
the guest's accesses wait for: the vCPU ran, waited for a page (blocked
in userfaultfd), waited for a core (runnable, but the host's cores were
busy), or was blocked on a futex (the BQL, another lock, or a halted
vCPU).  The guest's own stall figure cannot tell these apart."""

import collections
import re
import subprocess

LINE = re.compile(r"\s*([\d.]+)\s+\[(\d+)\]\s+(.*?)\[(\d+)/(\d+)\]\s+"
                  r"([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+(\S)\s*(.*)")

KINDS = ("run", "page", "core", "futex", "other")
# Not a kind: a thread's longest single stretch runnable without a core
LONGEST = "core_max"


def blocked_on(stack):
    """What a thread that went to sleep with kernel call chain @stack
    (innermost first) waits for."""
    if "handle_userfault" in stack:
        return "page"
    if "futex" in stack:
        return "futex"
    return "other"


def clip(a, b, t0, t1):
    return max(0.0, min(b, t1) - max(a, t0))


def thread_times(data, pid, t0, t1):
    """{thread name: {kind: ms}} for the threads of process @pid between
    monotonic times @t0 and @t1, from perf.data file @data.  Each of
    perf sched timehist's lines is a thread leaving its core: it ran for
    'run time' before, and was off its core for 'wait time' before that,
    the last 'sch delay' of which runnable.  The time off the core is
    what the thread went to sleep for when it last left its core (the
    state and call chain of its previous line): runnable (preempted),
    then all of it is waiting for a core.  LONGEST: the longest single
    such wait for a core."""
    out = subprocess.run(
        ["perf", "sched", "timehist", "-i", data, "--state",
         "--max-stack", "8"],
        capture_output=True, text=True, check=True).stdout
    last = {}
    times = collections.defaultdict(
        lambda: dict.fromkeys(KINDS + (LONGEST,), 0.0))
    for line in out.splitlines():
        m = LINE.match(line)
        if not m or m.group(5) != str(pid):
            continue
        t, _, name, tid, _, wait, sch, run, state, stack = m.groups()
        t, wait, sch, run = (float(t), float(wait) / 1e3, float(sch) / 1e3,
                             float(run) / 1e3)
        name = name.strip()
        acc = times[name]
        on = t - run
        acc["run"] += clip(on, t, t0, t1) * 1e3
        if tid in last:
            prev_state, prev_stack = last[tid]
            off = on - wait
            if prev_state == "R":
                core = clip(off, on, t0, t1) * 1e3
            else:
                acc[blocked_on(prev_stack)] += clip(off, on - sch,
                                                    t0, t1) * 1e3
                core = clip(on - sch, on, t0, t1) * 1e3
            acc["core"] += core
            acc[LONGEST] = max(acc[LONGEST], core)
        last[tid] = (state, stack)
    return {n: {k: round(v, 1) for k, v in kinds.items()}
            for n, kinds in times.items()}


def summary(data, pids, t0, t1):
    """What the benchmark keeps of a run: for the destination (@pids
    {'src': pid, 'dst': pid}) the time of its vCPUs by kind, summed over
    them, the longest that one of them waited for a core at a time, and
    for both sides the CPU time of every thread that ran."""
    res = {"window_ms": round((t1 - t0) * 1e3, 1)}
    for side, pid in pids.items():
        times = thread_times(data, pid, t0, t1)
        if side == "dst":
            vcpus = [k for n, k in times.items() if n.startswith("CPU ")]
            res["dst_vcpus"] = {kind: round(sum(k[kind] for k in vcpus), 1)
                                for kind in KINDS}
            res["dst_vcpus"][LONGEST] = max((k[LONGEST] for k in vcpus),
                                            default=0.0)
        res[side + "_cpu_ms"] = {n: k["run"] for n, k in times.items()
                                 if k["run"] >= 1}
    return res
