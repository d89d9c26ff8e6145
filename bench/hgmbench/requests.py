#!/usr/bin/env python3
"""Where the time of each page request of a benchmark run went.

Run the benchmark with the request's trace events on both QEMUs and the
work directory kept, optionally with the scheduler's events too:

    HGM_BENCH_KEEP=1 HGM_BENCH_TRACE=$(bench/hgmbench/requests.py events) \\
        [HGM_BENCH_PERF=sched] bench/run.py ...
    python3 bench/hgmbench/requests.py /tmp/hgm-bench-XXXX

Each request of the destination (its fault thread asking for a page) is
followed through the source (the return path thread queues it, the page
goes out: with preempt, `postcopy_preempt_send_host_page` on the return
path thread) back to the destination (the fault's page request resolved).
Phases: fault -> queued on the source (the destination's fault thread
writing the request, the return path carrying it, the source's return
path thread reading it), queued -> sent, sent -> resolved (the preempt
channel carrying the page, the destination's preempt thread placing it).
With the scheduler's events, the time of the threads that each phase
waits for, by state (hgmbench.sched): running, runnable but waiting for
a core, asleep (for data), on a futex.

The traces carry wall-clock times and perf the monotonic clock: the
benchmark writes their difference into the work directory (clock.json)."""

import bisect
import collections
import datetime
import json
import os
import re
import statistics
import sys

if __package__:
    from .sched import time_in, timelines
else:
    sys.path.insert(0, os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))))
    from hgmbench.sched import time_in, timelines

EVENTS = ["postcopy_ram_fault_thread_request", "postcopy_page_req_del",
          "ram_save_queue_pages", "postcopy_preempt_send_host_page"]


def trace(path):
    """[(wall-clock seconds, event, rest of the line)] of a QEMU trace
    written with -msg timestamp=on"""
    out = []
    with open(path) as f:
        for line in f:
            parts = line.split(None, 2)
            if len(parts) < 2 or not parts[0].endswith("Z"):
                continue
            t = datetime.datetime.strptime(
                parts[0], "%Y-%m-%dT%H:%M:%S.%fZ").replace(
                    tzinfo=datetime.timezone.utc).timestamp()
            out.append((t, parts[1], parts[2] if len(parts) > 2 else ""))
    return out


def requests(work):
    """[{'offset', 'fault', 'queued', 'sent', 'resolved'}] (wall-clock
    seconds; None where the trace has no such event) of every request
    that was resolved"""
    base, open_, done = None, {}, []
    for t, ev, rest in trace(os.path.join(work, "dst.trace")):
        if ev == "postcopy_ram_fault_thread_request":
            hva = int(re.search(r"HVA=0x([0-9a-f]+)", rest).group(1), 16)
            off = int(re.search(r"offset=0x([0-9a-f]+)", rest).group(1), 16)
            base = (hva & ~0xfff) - off
            # Both vCPUs may fault on a piece: the first request counts
            open_.setdefault(off, {"offset": off, "fault": t})
        elif ev == "postcopy_page_req_del" and base is not None:
            addr = int(re.search(r"req 0x([0-9a-f]+)", rest).group(1), 16)
            r = open_.pop(addr - base, None)
            if r:
                r["resolved"] = t
                done.append(r)
    queued, sent = collections.defaultdict(list), collections.defaultdict(list)
    for t, ev, rest in trace(os.path.join(work, "src.trace")):
        if ev == "ram_save_queue_pages":
            off = int(re.search(r"start: 0x([0-9a-f]+)", rest).group(1), 16)
            queued[off].append(t)
        elif ev == "postcopy_preempt_send_host_page":
            # The offset in target pages
            sent[int(rest.split()[-1], 16) << 12].append(t)

    def first(times, after):
        i = bisect.bisect_left(times, after)
        return times[i] if i < len(times) else None

    for r in done:
        # None when the page came before the source read the request (on
        # the main channel, or behind another request)
        r["queued"] = first(queued[r["offset"]], r["fault"])
        if r["queued"] is not None and r["queued"] > r["resolved"]:
            r["queued"] = None
        r["sent"] = r["queued"] and first(sent[r["offset"]], r["queued"])
        if r["sent"] is not None and r["sent"] > r["resolved"]:
            r["sent"] = None
    return done


PHASES = [("fault -> queued on the source", "fault", "queued",
           ["mig/dst/fault", "mig/src/return"]),
          ("queued -> sent", "queued", "sent", []),
          ("sent -> resolved", "sent", "resolved", ["mig/dst/preempt"])]
STATES = [("run", "running"), ("core", "waiting for a core"),
          ("other", "asleep or in D"), ("futex", "on a futex")]


def ms(seconds):
    return "%.1f ms" % (seconds * 1e3)


def us(seconds):
    return "%.0f us" % (seconds * 1e6)


def report(work, slow_us=500):
    """Markdown: the phases of all requests and of those slower than
    @slow_us, and with sched.perf.data in @work where the threads were"""
    reqs = requests(work)
    if not reqs:
        return "No resolved requests in the traces of %s\n" % work
    sched, offset = None, 0.0
    data = os.path.join(work, "sched.perf.data")
    if os.path.exists(data):
        sched = collections.defaultdict(list)
        for (_, name), spans in timelines(data).items():
            sched[name] += spans
        for spans in sched.values():
            spans.sort()
        starts = {name: [a for a, _, _ in spans]
                  for name, spans in sched.items()}
        with open(os.path.join(work, "clock.json")) as f:
            offset = json.load(f)["wall_minus_monotonic"]
    total = [r["resolved"] - r["fault"] for r in reqs]
    out = ["%d requests, fault to resolved: mean %s, median %s, max %s" % (
        len(reqs), us(statistics.mean(total)), us(statistics.median(total)),
        us(max(total))), ""]
    out += ["%d of them resolved before the source read them (the page"
            " was on its way already)" % sum(r["queued"] is None
                                             for r in reqs), ""]
    head = "| requests | phase | n | mean | median | max | sum |"
    if sched:
        head += " threads: " + ", ".join(n for _, n in STATES) + " |"
    out += [head, "|" + "---|" * (head.count("|") - 1)]
    for label, sel in (("all", reqs), ("slower than %d us" % slow_us,
                                       [r for r in reqs if r["resolved"] -
                                        r["fault"] > slow_us / 1e6])):
        for name, a, b, threads in PHASES:
            rs = [r for r in sel if r[a] is not None and r[b] is not None]
            if not rs:
                continue
            d = [r[b] - r[a] for r in rs]
            row = "| %s (%d) | %s | %d | %s | %s | %s | %s |" % (
                label, len(sel), name, len(rs), us(statistics.mean(d)),
                us(statistics.median(d)), us(max(d)), ms(sum(d)))
            if sched:
                cells = []
                for thread in threads:
                    acc = collections.Counter()
                    for r in rs:
                        t0, t1 = r[a] - offset, r[b] - offset
                        # Only the spans around the phase: a thread's
                        # spans follow one another
                        st = starts.get(thread, [])
                        i = max(bisect.bisect_right(st, t0) - 1, 0)
                        j = bisect.bisect_left(st, t1)
                        acc.update(time_in(sched[thread][i:j], t0, t1))
                    cells.append("%s: %s" % (thread, ", ".join(
                        ms(acc[k]) for k, _ in STATES)))
                row += " %s |" % "; ".join(cells)
            out.append(row)
    return "\n".join(out) + "\n"


def main():
    if sys.argv[1:] == ["events"]:
        print(",".join(EVENTS))
        return 0
    if len(sys.argv) != 2:
        sys.exit("usage: %s WORKDIR | events" % sys.argv[0])
    sys.stdout.write(report(sys.argv[1]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
