"""The scenarios (guest RAM backing, with or without HGM), one migration in
a scenario and what is measured of it, and the whole list of runs."""
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time

from . import MIB, QEMU, cputime, sched
from .host import (HUGETLB_1G, HUGETLB_2M, THP_DIR, Net, fs_type, hugepages,
                   kernel_splits_hugetlb, thp_dir)
from .report import fmt, precopy_speed
from .vm import BenchVM, wait_status

BUCKETS = 24
SHMEM_ENABLED = "/sys/kernel/mm/transparent_hugepage/shmem_enabled"


class Skip(Exception):
    """A scenario that cannot run here, and why."""


class Scenario:
    def __init__(self, name, label, hgm, backing):
        self.name, self.label, self.hgm, self.backing = name, label, hgm, backing

    def memory(self, side, size_mb, tag):
        """The memory backend for @side, and the file it uses (or None)."""
        b = self.backing
        if b == "anon":
            return ("memory-backend-ram,id=mem0,size=%dM" % size_mb, None)
        if b == "memfd":
            spec = "memory-backend-memfd,id=mem0,size=%dM" % size_mb
            return (spec + (",hgm=on" if self.hgm else ""), None)
        if b == "thp":
            path = os.path.join(THP_DIR, "hgm-bench-%s-%s" % (tag, side))
            opts = "align=2M"
        elif b == "hugetlb2m":
            path = os.path.join(HUGETLB_2M, "hgm-bench-%s-%s" % (tag, side))
            opts = ""
        elif b == "hugetlb1g":
            path = os.path.join(HUGETLB_1G, "hgm-bench-%s-%s" % (tag, side))
            opts = ""
        spec = "memory-backend-file,id=mem0,size=%dM,mem-path=%s,share=on" % (
            size_mb, path)
        if opts:
            spec += "," + opts
        if self.hgm:
            spec += ",hgm=on"
        return spec, path

    def check(self, size_mb):
        """Raise Skip when this host cannot run the scenario."""
        b = self.backing
        if b == "memfd":
            with open(SHMEM_ENABLED) as f:
                mode = re.search(r"\[(\w+)\]", f.read()).group(1)
            if mode in ("never", "deny"):
                raise Skip("shmem THP is '%s' (%s): memfd memory gets no huge"
                           " pages (scripts/host-setup sets 'advise')"
                           % (mode, SHMEM_ENABLED))
        if b == "thp" and not thp_dir():
            raise Skip("no tmpfs with huge=always at %s (no shmem THP in this"
                       " kernel?)" % THP_DIR)
        if b == "hugetlb2m":
            typ, _ = fs_type(HUGETLB_2M)
            if typ != "hugetlbfs":
                raise Skip("no hugetlbfs at %s (scripts/host-setup)"
                           % HUGETLB_2M)
            if self.hgm and not kernel_splits_hugetlb():
                raise Skip("kernel without HugeTLB HGM: madvise(MADV_SPLIT)"
                           " fails on hugetlbfs")
        if b == "hugetlb1g":
            if self.hgm and not kernel_splits_hugetlb():
                raise Skip("kernel without HugeTLB HGM: madvise(MADV_SPLIT)"
                           " fails on hugetlbfs")
            if size_mb % 1024:
                raise Skip("guest RAM is not a multiple of 1 GiB")
            if fs_type(HUGETLB_1G)[0] != "hugetlbfs":
                raise Skip("no hugetlbfs with 1 GiB pages at %s"
                           " (scripts/host-setup --1g)" % HUGETLB_1G)
            need = pages_1g(size_mb)
            if hugepages(1048576)[1] < need:
                raise Skip("cannot reserve %d 1 GiB pages (memory too"
                           " fragmented?)" % need)


SCENARIOS = [
    Scenario("anon-4k", "anonymous 4 KiB", False, "anon"),
    Scenario("hugetlbfs-2m", "hugetlbfs 2 MiB", False, "hugetlb2m"),
    Scenario("thp", "tmpfs THP", False, "thp"),
    Scenario("thp-hgm", "tmpfs THP + HGM", True, "thp"),
    Scenario("hugetlbfs-2m-hgm", "hugetlbfs 2 MiB + HGM", True, "hugetlb2m"),
    Scenario("memfd-hgm", "memfd THP + HGM", True, "memfd"),
    Scenario("hugetlbfs-1g", "hugetlbfs 1 GiB", False, "hugetlb1g"),
    Scenario("hugetlbfs-1g-hgm", "hugetlbfs 1 GiB + HGM", True, "hugetlb1g"),
]


def pages_2m(scenarios, guest_mb):
    """Free 2 MiB pages @scenarios need: two guests."""
    return guest_mb if any(s.backing == "hugetlb2m" for s in scenarios) else 0


def pages_1g(guest_mb):
    """Free 1 GiB pages for two guests."""
    return 2 * guest_mb // 1024


def huge_share(pid, path, size_mb):
    """Share of the guest RAM mapping of @pid that is mapped huge."""
    want_kb = size_mb * 1024
    best = None
    cur = None
    with open("/proc/%d/smaps" % pid) as f:
        for line in f:
            if re.match(r"^[0-9a-f]+-[0-9a-f]+ ", line):
                if cur and cur["size"] == want_kb and (
                        path is None or path in cur["name"]):
                    best = cur if not best or cur["huge"] > best["huge"] else best
                cur = {"name": line.strip(), "size": 0, "huge": 0, "kps": 4}
            elif cur is not None:
                k, _, v = line.partition(":")
                v = v.split()
                if k == "Size":
                    cur["size"] = int(v[0])
                elif k == "KernelPageSize":
                    cur["kps"] = int(v[0])
                elif k in ("AnonHugePages", "ShmemPmdMapped", "FilePmdMapped",
                           "HugetlbPmdMapped"):
                    cur["huge"] += int(v[0])
                elif k in ("Shared_Hugetlb", "Private_Hugetlb"):
                    cur["huge"] += int(v[0])
    if cur and cur["size"] == want_kb and (path is None or path in cur["name"]):
        best = cur if not best or cur["huge"] > best["huge"] else best
    if not best:
        return None
    return min(1.0, best["huge"] / best["size"])


def percentile(hist, q):
    """The q-quantile (µs) of a log2 histogram: bucket b is [2^b, 2^(b+1))
    µs (bucket 0 below 2 µs), interpolated linearly inside the bucket."""
    total = sum(hist)
    if not total:
        return None
    rank = q * total
    seen = 0
    for b, n in enumerate(hist):
        if seen + n >= rank and n:
            lo = 0 if b == 0 else 2 ** b
            hi = 2 ** (b + 1)
            return lo + (hi - lo) * (rank - seen) / n
        seen += n
    return 2 ** BUCKETS


def perf_start(work, vms):
    """HGM_BENCH_PERF=1: record both QEMUs with perf (call graphs) through
    postcopy, into <work>/<side>.perf.data (the work directory is kept);
    HGM_BENCH_PERF=sched: the scheduler's events of the whole host, with
    call graphs, into <work>/sched.perf.data (what each thread waited for,
    and how long it waited for a core: hgmbench.sched).  The recorders,
    for perf_stop()."""
    mode = os.environ.get("HGM_BENCH_PERF")
    if not mode:
        return []
    if mode == "sched":
        out = os.path.join(work, "sched.perf.data")
        procs = [subprocess.Popen(
            ["perf", "sched", "record", "-a", "-g", "-k", "CLOCK_MONOTONIC",
             "-o", out],
            stdout=subprocess.DEVNULL, stderr=open(out + ".log", "w"))]
        time.sleep(1)
        return procs
    procs = []
    for side, vm in vms:
        out = os.path.join(work, side + ".perf.data")
        procs.append(subprocess.Popen(
            ["perf", "record", "-q", "-g", "-p", str(vm.get_pid()),
             "-o", out], stdout=subprocess.DEVNULL,
            stderr=open(out + ".log", "w")))
    time.sleep(1)       # perf is attached
    return procs


def perf_stop(procs):
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGINT)
    for p in procs:
        p.wait(60)


def event_at(vm, event, t_switch):
    """The time of @vm's first QMP @event after @t_switch (QEMU's, from the
    host's clock): RESUME on the destination, when the guest started
    running there; STOP on the source, when it stopped there."""
    for ev in vm.get_qmp_events(wait=False):
        ts = ev.get("timestamp", {})
        t = ts.get("seconds", 0) + ts.get("microseconds", 0) / 1e6
        if ev.get("event") == event and t >= t_switch:
            return t
    raise RuntimeError("QEMU (%s) reported no %s event" % (vm._name, event))


def timeline(serials, t_switch, t_end):
    """The guest's accesses per second through the migration, from the
    counts it reports ten times a second on the source's console, then on
    the destination's: [seconds since the switchover, accesses per second]
    at the middle of each interval, from 2 s before the switchover to
    @t_end.  A console may deliver the reports late and in bursts (a
    burst of reports a millisecond apart once made a rate 300 times the
    guest's), so the length of an interval is the guest's own, from the
    times it reports, and a report is placed at the host's time of it:
    its own time plus the shortest delay seen on its console (the guest's
    clock stops while it is paused, which that delay takes in)."""
    pts = []
    for s in serials:
        ticks = [(t, o) for t, o in s.lines if "accesses" in o and "tick" in o]
        if ticks:
            delay = min(t - o["tick"] for t, o in ticks)
            pts += [(o["tick"] + delay, o["tick"], o["accesses"])
                    for t, o in ticks]
    pts = sorted(p for p in pts if t_switch - 2 <= p[0] <= t_end)
    return [[round((h0 + h1) / 2 - t_switch, 3), round((a1 - a0) / (g1 - g0))]
            for (h0, g0, a0), (h1, g1, a1) in zip(pts, pts[1:]) if g1 > g0]


def full_speed(tl, share=0.9, span=5):
    """Seconds from the switchover until the guest runs at @share of its
    speed in the last 2 s of precopy for good, from its timeline @tl: the
    end of the last stretch of @span intervals (half a second, against
    the noise of single ones) whose mean is below that.  None without
    enough of precopy to tell its speed."""
    base = precopy_speed(tl)
    if not base:
        return None
    slow = [tl[i + span - 1][0] for i in range(len(tl) - span + 1)
            if tl[i + span - 1][0] >= 0 and
            sum(v for x, v in tl[i:i + span]) < share * base * span]
    return round(max(slow) + 0.05, 2) if slow else 0.0


def run_one(sc, preempt, net, args, accel, tag, binary=QEMU, stats=True,
            prefetch=None):
    """One migration in scenario @sc over @net (entered), both QEMUs from
    @binary, the destination with postcopy-blocktime (QEMU's fault
    statistics) when @stats, the source with x-postcopy-hgm-prefetch
    @prefetch unless None: start them, precopy for args.precopy_secs,
    switch to postcopy, wait for completion, and measure.  A dict of the measurements; 'ok' False and 'error' when
    something failed."""
    work = tempfile.mkdtemp(prefix="hgm-bench-")
    if os.environ.get("HGM_BENCH_TRACE"):
        # QEMU's traces have wall-clock times, perf the monotonic clock
        with open(os.path.join(work, "clock.json"), "w") as f:
            json.dump({"wall_minus_monotonic":
                       time.time() - time.monotonic()}, f)
    vms, files, perf = [], [], []
    src = dst = None
    res = {"scenario": sc.name, "label": sc.label, "hgm": sc.hgm,
           "preempt": preempt, "network": net.label(), "accel": accel}
    try:
        smem, spath = sc.memory("src", args.guest_mb, tag)
        dmem, dpath = sc.memory("dst", args.guest_mb, tag)
        files = [f for f in (spath, dpath) if f]
        dst = BenchVM(work, "dst", dmem, args, accel, net.dst_wrapper,
                      incoming=True, binary=binary)
        vms.append(dst)
        dst.start()
        src = BenchVM(work, "src", smem, args, accel, net.src_wrapper,
                      binary=binary)
        vms.append(src)
        src.start()
        ss, ds = src.serial, dst.serial
        for vm, is_dst in ((src, False), (dst, True)):
            caps = ["postcopy-ram"] + (["postcopy-ram-hgm"] if sc.hgm else []) \
                + (["postcopy-preempt"] if preempt else []) \
                + (["postcopy-blocktime"] if is_dst and stats else [])
            vm.cmd("migrate-set-capabilities", capabilities=[
                {"capability": c, "state": True} for c in caps])
        # Precopy slower than the guest dirties memory, so that it never
        # converges and postcopy does the rest; postcopy at the link speed
        src.cmd("migrate-set-parameters", args_dict={
            "max-bandwidth": args.precopy_bandwidth_mb * MIB,
            "max-postcopy-bandwidth": args.bandwidth_mb * MIB,
            "downtime-limit": 1})
        if prefetch is not None:
            src.cmd("migrate-set-parameters", args_dict={
                "x-postcopy-hgm-prefetch": prefetch})
            res["prefetch"] = prefetch
        dst.cmd("migrate-incoming", uri="tcp:%s:0" % net.addr)
        port = dst.cmd("query-migrate")["socket-address"][0]["port"]
        # The guest boots under TCG; nested in the HGM kernel's guest
        # (timeout 900) that takes minutes
        ready = ss.wait("ready", max(120, args.timeout // 2))
        res["fill_s"] = ready["ready"]
        time.sleep(1)
        t0 = time.time()
        src.cmd("migrate", uri="tcp:%s:%s" % (net.addr, port))
        time.sleep(args.precopy_secs)
        status = src.cmd("query-migrate")["status"]
        if status != "active":
            raise RuntimeError("precopy is %s, not active, after %d s"
                               % (status, args.precopy_secs))
        # Arm the guest's switchover detection, then switch
        ss.send("\n")
        armed = ss.wait("armed", 60)
        t_armed = [t for t, o in ss.lines if o is armed][0]
        perf = perf_start(work, (("src", src), ("dst", dst)))
        cpu = cputime.Sampler({"src": src.get_pid(),
                               "dst": dst.get_pid()}).start()
        t_switch, m_switch = time.time(), time.monotonic()
        src.cmd("migrate-start-postcopy")
        info = wait_status(src, ("completed", "failed"), args.timeout)
        t_done, m_done = time.time(), time.monotonic()
        cpu.stop()
        perf_stop(perf)
        perf = []
        if info["status"] != "completed":
            raise RuntimeError("migration failed: %s" % info.get("error-desc"))
        t_resume = event_at(dst, "RESUME", t_switch)
        # The guest's epoch counts from its cut: when it stopped on the
        # source, in the epoch's time (the guest's clock follows the host's
        # while it runs; the host read 'armed' a little after the guest
        # wrote it, so the cut is early by that much, a millisecond or so)
        t_stop = event_at(src, "STOP", t_switch)
        cut_us = max(0, round((t_stop - t_armed) * 1e6))
        res["epoch_cut_s"] = round(cut_us / 1e6, 3)
        res["ran_on_source_s"] = round(t_stop - t_switch, 3)
        # What each thread of the two QEMUs used on a core in postcopy
        res["cpu_ms"] = cpu.between(t_resume, t_done)
        # Postcopy is over: the guest stops counting first touches
        ds.send("%d\n" % cut_us)
        t_close = time.time()
        dpid = dst.get_pid()
        res["huge_at_completion"] = huge_share(dpid, dpath, args.guest_mb)
        time.sleep(max(0, t_done + 1 - time.time()))
        res["huge_after_1s"] = huge_share(dpid, dpath, args.guest_mb)
        time.sleep(max(0, t_done + 5 - time.time()))
        res["huge_after_5s"] = huge_share(dpid, dpath, args.guest_mb)
        dinfo = wait_status(dst, ("completed",), 30)
        ram = info.get("ram", {})
        res.update({
            "total_time_ms": info.get("total-time"),
            "downtime_ms": info.get("downtime"),
            "precopy_s": round(t_switch - t0, 3),
            # From the command until the guest runs on the destination
            # (the source acts on the command at the end of what it is
            # sending, then the downtime), and from then to the end
            "switch_s": round(t_resume - t_switch, 3),
            "postcopy_s": round(t_done - t_resume, 3),
            "postcopy_bytes": ram.get("postcopy-bytes"),
            "postcopy_requests": ram.get("postcopy-requests"),
            "ram_total_bytes": ram.get("total"),
            "dst_postcopy_blocktime_ms": dinfo.get("postcopy-blocktime"),
            "dst_stats": {k: v for k, v in dinfo.items()
                          if k.startswith("postcopy")},
        })
        # QEMU's own per fault latencies (postcopy-blocktime): all faults,
        # those resolved locally (HGM) included
        fstats = dinfo.get("postcopy-fault-stats")
        if fstats:
            fault_hist = [sum(x) for x in zip(*(f["latency-dist"]
                                                for f in fstats))]
            res.update({
                "qemu_faults": {f["resolution"]: f["faults"] for f in fstats},
                # mean latency of each kind (a local fault is one
                # UFFDIO_CONTINUE of a piece that is here)
                "qemu_fault_mean_us": {f["resolution"]: f["latency"] / 1000
                                       for f in fstats},
                "qemu_fault_hist_us_log2": fault_hist,
                "qemu_fault_p50_us": percentile(fault_hist, 0.5),
                "qemu_fault_p99_us": percentile(fault_hist, 0.99),
            })
        if res["postcopy_s"] > 0 and ram.get("postcopy-bytes"):
            res["postcopy_mbps"] = round(ram["postcopy-bytes"] / MIB /
                                         res["postcopy_s"], 1)
        # The guest's report of the postcopy epoch, once it is closed.
        # A guest that answers 'armed' instead had no open epoch: what it
        # wrote before the switchover is lost.  One that does not answer
        # gets the line again (and the time it took is reported).
        closed = None
        for attempt in range(3):
            try:
                closed = ds.wait("closed", 30)
                break
            except TimeoutError:
                if any("armed" in o for t, o in ds.lines):
                    raise RuntimeError(
                        "the destination's guest had no open epoch: its"
                        " memory from before the switchover is lost")
                ds.send("%d\n" % cut_us)
        if closed is None:
            raise TimeoutError("guest did not report 'closed' in 90 s"
                               " (the line sent 3 times)")
        res["close_s"] = round([t for t, o in ds.lines if "closed" in o][0]
                               - t_close, 1)
        res["close_sent"] = attempt + 1
        epoch = closed["closed"]
        time.sleep(1.5)
        g = ds.last("t", lambda o: o["epoch"] == epoch)
        if g.get("cut_us") != cut_us or g.get("stall_log_full"):
            raise RuntimeError("the guest's report is not cut at %d us: %s"
                               % (cut_us, json.dumps(g)[:200]))
        hist = g["hist_us_log2"]
        # Every vCPU thread of the workload still makes progress
        time.sleep(2)
        g2 = ds.last("t")
        res["stuck_threads"] = [i for i, (a, b) in enumerate(
            zip(g["per_thread"], g2["per_thread"])) if b <= a]
        res["timeline"] = timeline((ss, ds), t_resume, t_done + 4)
        res["full_speed_s"] = full_speed(res["timeline"])
        res.update({
            "guest_epoch": g["epoch"],
            "first_touches": g["first_touches"],
            "corrupt": g["corrupt"],
            "stall_hist_us_log2": hist,
            "stall_p50_us": percentile(hist, 0.5),
            "stall_p99_us": percentile(hist, 0.99),
            "stall_max_us": g["max_us"],
            # every access slower than the workload's STALL_US: what the
            # guest as a whole waited, and its longest wait
            "guest_stalls": g.get("stalls"),
            "guest_stall_ms": None if g.get("stall_us") is None
            else round(g["stall_us"] / 1000, 1),
            "guest_worst_stall_ms": None if g.get("stall_max_us") is None
            else round(g["stall_max_us"] / 1000, 1),
            # when, from the guest's stop on the source, the worst began
            "guest_worst_stall_at_ms": g.get("stall_max_at_ms"),
        })
        res["ok"] = g["corrupt"] == 0 and not res["stuck_threads"]
        # After the guest's epoch: reading the events takes seconds
        if os.environ.get("HGM_BENCH_PERF") == "sched":
            res["sched"] = sched.summary(
                os.path.join(work, "sched.perf.data"),
                {"src": src.get_pid(), "dst": dst.get_pid()},
                m_switch + t_resume - t_switch, m_done)
    except Skip as e:
        res["skipped"] = str(e)
    except Exception as e:
        res["error"] = "%s: %s" % (type(e).__name__, e)
        res["ok"] = False
        # What each guest said last, and when: is it still running?
        for side, vm in (("src", src), ("dst", dst)):
            if vm and vm.serial:
                now = time.time()
                res[side + "_serial_tail"] = [
                    "%.1f s ago: %s" % (now - t, json.dumps(o)[:160])
                    for t, o in [(t, o) for t, o in vm.serial.lines
                                 if "tick" not in o][-3:]]
    finally:
        perf_stop(perf)
        for vm in vms:
            vm.stop()
        for f in files:
            try:
                os.unlink(f)
            except OSError:
                pass
        if os.environ.get("HGM_BENCH_KEEP") or os.environ.get("HGM_BENCH_PERF"):
            res["workdir"] = work
            for side, vm in (("src", src), ("dst", dst)):
                if vm and vm.serial:
                    with open(os.path.join(work, side + ".serial.txt"), "w") as f:
                        for t, o in vm.serial.lines:
                            f.write("%.3f %s\n" % (t, json.dumps(o)))
        else:
            shutil.rmtree(work, ignore_errors=True)
    return res


def parse_size(text):
    """Bytes of a size such as 0, 4096, 64K or 2M"""
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    text = text.strip().upper()
    try:
        if text[-1:] in units:
            return int(text[:-1]) * units[text[-1]]
        return int(text)
    except ValueError:
        raise SystemExit("bench: --prefetch wants sizes such as 0, 64K or"
                         " 2M, not %r" % text)


def fmt_size(n):
    """64K, 2M: the inverse of parse_size for whole units"""
    for unit, size in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n % size == 0:
            return "%d%s" % (n // size, unit)
    return str(n)


def builds(args):
    """The QEMU builds to compare, [(name, binary)]: --builds NAME=PATH,...
    or the project's build, unnamed."""
    if not args.builds:
        return [("", QEMU)]
    out = []
    for b in args.builds.split(","):
        name, sep, path = b.partition("=")
        if not sep or not os.access(path, os.X_OK):
            raise SystemExit("bench: --builds wants NAME=PATH of a QEMU"
                             " binary, not %r" % b)
        out.append((name, os.path.abspath(path)))
    return out


def plan(scenarios, args):
    """The runs of @args: every scenario with every preempt setting over
    every network, with every build, statistics and prefetch setting,
    args.repeat times; the builds of one scenario one after the other, so
    that they see the host in the same state, and in turn first in each
    repeat, so that neither always runs after the other (a run leaves the
    host's memory and caches in a state the next one starts from)."""
    prefetch = [parse_size(x) for x in args.prefetch.split(",") if x]
    bs = builds(args)
    return [(s, p == "on", n, b, st == "on", pf, rep)
            for rep in range(args.repeat)
            for n in args.network.split(",") for s in scenarios
            for p in args.preempt.split(",")
            for b in bs[rep % len(bs):] + bs[:rep % len(bs)]
            for st in args.stats.split(",")
            for pf in (prefetch if s.hgm and prefetch else [None])]


def run_planned(run, args, accel, tag, rid):
    """One run of plan(), named @rid among them, after a line of progress
    that starts with @tag; its result."""
    sc, preempt, netkind, (bname, binary), stats, pf, rep = run
    net = Net(netkind, args.rate, args.delay_us)
    bname = ", ".join(x for x in (
        bname, "" if stats else "no stats",
        "" if pf is None else "prefetch %s" % (
            "off" if pf == 0 else fmt_size(pf))) if x)
    line = "%s %s%s, preempt %s, %s" % (
        tag, sc.label, " [%s]" % bname if bname else "",
        "on" if preempt else "off", net.label())
    print(line + " ...", end="", flush=True)
    t = time.time()
    try:
        sc.check(args.guest_mb)
        with net:
            r = run_one(sc, preempt, net, args, accel,
                        "%d-%s" % (os.getpid(), rid), binary, stats, pf)
            print(" [%s]" % net.label() if net.qdisc else "", end="",
                  flush=True)
    except Skip as e:
        r = {"scenario": sc.name, "label": sc.label, "hgm": sc.hgm,
             "preempt": preempt, "network": net.label(),
             "skipped": str(e)}
    except Exception as e:
        r = {"scenario": sc.name, "label": sc.label, "hgm": sc.hgm,
             "preempt": preempt, "network": net.label(),
             "error": "%s: %s" % (type(e).__name__, e), "ok": False}
    if bname:
        r["build"] = bname
    r["repeat"] = rep
    if "skipped" in r:
        print(" not run: " + r["skipped"], flush=True)
    elif "error" in r:
        print(" FAILED: " + r["error"], flush=True)
    else:
        print(" faults p50 %s us, p99 %s us, postcopy %.2f s, guest"
              " stall %s ms (worst %s ms), huge %s (%.0f s)"
              % (fmt(r.get("qemu_fault_p50_us"), "", 0),
                 fmt(r.get("qemu_fault_p99_us")), r["postcopy_s"],
                 fmt(r.get("guest_stall_ms")),
                 fmt(r.get("guest_worst_stall_ms")),
                 fmt(None if r["huge_after_1s"] is None
                     else 100 * r["huge_after_1s"], "%"),
                 time.time() - t), flush=True)
    return r


def run_all(scenarios, args, accel):
    """The runs of plan(), each with a line of progress; the list of their
    results, and the result of a warm-up run or None.  With --warmup the
    first run of the plan runs once more before them and does not count:
    the first migration after the host is set up was 3-4 times slower
    than the others (postcopy 1.1-1.7 s against 0.3-0.5 s, and the
    guest's stall with it), and it was always the same scenario's."""
    runs = plan(scenarios, args)
    warmup = None
    if args.warmup and runs:
        warmup = run_planned(runs[0], args, accel, "[warm-up]", "w")
    results = [run_planned(run, args, accel, "[%d/%d]" % (i, len(runs)),
                           str(i))
               for i, run in enumerate(runs, 1)]
    return results, warmup
