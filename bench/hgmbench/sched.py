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
# Not a kind: the longest single stretch runnable without a core
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


def timelines(data):
    """{(pid, thread name): [(start, end, kind)]}: what every thread did
    when, in monotonic seconds, from perf.data file @data.  Each of perf
    sched timehist's lines is a thread leaving its core: it ran for 'run
    time' before, and was off its core for 'wait time' before that, the
    last 'sch delay' of which runnable ('core').  The time off the core
    is what the thread went to sleep for when it last left its core (the
    state and call chain of its previous line, blocked_on()); when it
    was preempted (runnable), all of it is waiting for a core."""
    out = subprocess.run(
        ["perf", "sched", "timehist", "-i", data, "--state",
         "--max-stack", "8"],
        capture_output=True, text=True, check=True).stdout
    last = {}
    spans = collections.defaultdict(list)
    for line in out.splitlines():
        m = LINE.match(line)
        if not m:
            continue
        t, _, name, tid, pid, wait, sch, run, state, stack = m.groups()
        t, wait, sch, run = (float(t), float(wait) / 1e3, float(sch) / 1e3,
                             float(run) / 1e3)
        thread = spans[(pid, name.strip())]
        on = t - run
        if tid in last:
            prev_state, prev_stack = last[tid]
            off = on - wait
            if prev_state == "R":
                thread.append((off, on, "core"))
            else:
                thread.append((off, on - sch, blocked_on(prev_stack)))
                thread.append((on - sch, on, "core"))
        thread.append((on, t, "run"))
        last[tid] = (state, stack)
    return spans


def time_in(spans, t0, t1):
    """{kind: seconds} of @spans (of timelines()) between @t0 and @t1, and
    under LONGEST the longest single wait for a core"""
    acc = dict.fromkeys(KINDS, 0.0)
    acc[LONGEST] = 0.0
    for a, b, kind in spans:
        d = clip(a, b, t0, t1)
        acc[kind] += d
        if kind == "core":
            acc[LONGEST] = max(acc[LONGEST], d)
    return acc


def thread_times(spans, pid, t0, t1):
    """{thread name: {kind: ms}} for the threads of process @pid between
    monotonic times @t0 and @t1, from timelines() @spans"""
    return {name: {k: round(v * 1e3, 1)
                   for k, v in time_in(s, t0, t1).items()}
            for (p, name), s in spans.items() if p == str(pid)}


def summary(data, pids, t0, t1):
    """What the benchmark keeps of a run: for the destination (@pids
    {'src': pid, 'dst': pid}) the time of its vCPUs by kind, summed over
    them, the longest that one of them waited for a core at a time, and
    for both sides the CPU time of every thread that ran."""
    res = {"window_ms": round((t1 - t0) * 1e3, 1)}
    spans = timelines(data)
    for side, pid in pids.items():
        times = thread_times(spans, pid, t0, t1)
        if side == "dst":
            vcpus = [k for n, k in times.items() if n.startswith("CPU ")]
            res["dst_vcpus"] = {kind: round(sum(k[kind] for k in vcpus), 1)
                                for kind in KINDS}
            res["dst_vcpus"][LONGEST] = max((k[LONGEST] for k in vcpus),
                                            default=0.0)
        res[side + "_cpu_ms"] = {n: k["run"] for n, k in times.items()
                                 if k["run"] >= 1}
    return res
