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

Writes bench/results/<date>-<host>.{json,md,png}.  Python 3 standard
library only; every wait is bounded, and only processes it started are
stopped.  Run as root (huge pages, network namespaces): make bench.
"""
import argparse
import datetime
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
QEMU = os.path.join(TOP, "build/obj/qemu-system-x86_64")
GUEST = os.path.join(TOP, "build/guest")
THP_DIR = None          # a tmpfs with huge=always, mounted by ThpMount
HUGETLB_2M = "/dev/hugepages"
HUGETLB_1G = "/dev/hugepages1G"
MIB = 1024 * 1024
BUCKETS = 24


class Skip(Exception):
    """A scenario that cannot run here, and why."""


def connect_unix(path, timeout):
    """A connected socket to @path, waiting up to @timeout s for it."""
    deadline = time.time() + timeout
    while True:
        sock = socket.socket(socket.AF_UNIX)
        try:
            sock.connect(path)
            return sock
        except OSError:
            sock.close()
            if time.time() > deadline:
                raise
            time.sleep(0.05)


class QMP:
    def __init__(self, path, timeout=30):
        self.sock = connect_unix(path, timeout)
        self.sock.settimeout(timeout)
        self.f = self.sock.makefile("rw")
        self.events = []
        json.loads(self.f.readline())
        self.cmd("qmp_capabilities")

    def cmd(self, name, **args):
        self.f.write(json.dumps({"execute": name, "arguments": args}) + "\n")
        self.f.flush()
        while True:
            line = self.f.readline()
            if not line:
                raise RuntimeError("QMP connection closed during " + name)
            r = json.loads(line)
            if "event" in r:
                self.events.append(r)
            elif "error" in r:
                raise RuntimeError("%s: %s" % (name, r["error"]["desc"]))
            else:
                return r["return"]

    def close(self):
        self.sock.close()


class Serial:
    """The guest's serial console: JSON lines in, lines out."""

    def __init__(self, path, timeout=30):
        self.sock = connect_unix(path, timeout)
        self.lines = []
        self.cond = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        buf = b""
        while True:
            try:
                data = self.sock.recv(65536)
            except OSError:
                data = b""
            if not data:
                return
            buf += data
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                m = re.search(rb"\{.*\}", line)
                if m:
                    try:
                        obj = json.loads(m.group(0))
                    except ValueError:
                        continue
                    with self.cond:
                        self.lines.append((time.time(), obj))
                        self.cond.notify_all()

    def wait(self, key, timeout, pred=lambda o: True):
        deadline = time.time() + timeout
        with self.cond:
            while True:
                for t, o in self.lines:
                    if key in o and pred(o):
                        return o
                left = deadline - time.time()
                if left <= 0:
                    raise TimeoutError("guest did not report %r" % key)
                self.cond.wait(left)

    def last(self, key, pred=lambda o: True):
        with self.cond:
            for t, o in reversed(self.lines):
                if key in o and pred(o):
                    return o
        return None

    def send(self, text):
        self.sock.sendall(text.encode())

    def close(self):
        self.sock.close()


def meminfo(key):
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def hugepages(size_kb, want=None):
    path = "/sys/kernel/mm/hugepages/hugepages-%dkB/" % size_kb
    if want is not None:
        with open(path + "nr_hugepages", "w") as f:
            f.write(str(want))
    with open(path + "nr_hugepages") as f:
        total = int(f.read())
    with open(path + "free_hugepages") as f:
        return total, int(f.read())


def fs_type(path):
    with open("/proc/mounts") as f:
        for line in f:
            dev, mnt, typ, opts = line.split()[:4]
            if mnt == path:
                return typ, opts
    return None, None


class ThpMount:
    """A tmpfs of @size_mb with huge=always for the THP scenarios, mounted
    for the run and removed afterwards."""

    def __init__(self, size_mb):
        self.size_mb, self.dir = size_mb, None

    def __enter__(self):
        global THP_DIR
        if not os.path.exists("/sys/kernel/mm/transparent_hugepage/"
                              "shmem_enabled"):
            return self
        self.dir = tempfile.mkdtemp(prefix="hgm-bench-thp-")
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", "huge=always,size=%dM"
                            % self.size_mb, "hgm-bench-thp", self.dir],
                           capture_output=True, text=True)
        if r.returncode:
            os.rmdir(self.dir)
            self.dir = None
            self.error = r.stderr.strip()
        THP_DIR = self.dir
        return self

    def __exit__(self, *exc):
        global THP_DIR
        if self.dir:
            subprocess.run(["umount", self.dir], capture_output=True)
            os.rmdir(self.dir)
        THP_DIR = None


def kernel_splits_hugetlb():
    """MADV_SPLIT (HugeTLB HGM) on a 2 MiB hugetlbfs mapping?"""
    import ctypes
    import mmap
    libc = ctypes.CDLL(None, use_errno=True)
    path = os.path.join(HUGETLB_2M, "hgm-bench-probe-%d" % os.getpid())
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError:
        return False
    os.unlink(path)
    try:
        os.ftruncate(fd, 2 * MIB)
        m = mmap.mmap(fd, 2 * MIB, mmap.MAP_SHARED)
    except (OSError, ValueError):
        os.close(fd)
        return False
    addr = ctypes.addressof(ctypes.c_char.from_buffer(m))
    ok = libc.madvise(ctypes.c_void_p(addr), ctypes.c_size_t(2 * MIB), 26) == 0
    del addr
    m.close()
    os.close(fd)
    return ok


class Scenario:
    def __init__(self, name, label, hgm, backing):
        self.name, self.label, self.hgm, self.backing = name, label, hgm, backing

    def memory(self, side, size_mb, tag):
        """The memory backend for @side, and the file it uses (or None)."""
        b = self.backing
        if b == "anon":
            return ("memory-backend-ram,id=mem0,size=%dM" % size_mb, None)
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
        if b == "thp" and not THP_DIR:
            raise Skip("cannot mount a tmpfs with huge=always (no shmem THP"
                       " in this kernel?)")
        if b == "hugetlb2m":
            typ, _ = fs_type(HUGETLB_2M)
            if typ != "hugetlbfs":
                raise Skip("no hugetlbfs at %s (make host-setup)" % HUGETLB_2M)
            if self.hgm and not kernel_splits_hugetlb():
                raise Skip("kernel without HugeTLB HGM: madvise(MADV_SPLIT)"
                           " fails on hugetlbfs")
        if b == "hugetlb1g":
            if size_mb % 1024:
                raise Skip("guest RAM is not a multiple of 1 GiB")


SCENARIOS = [
    Scenario("anon-4k", "anonymous 4 KiB", False, "anon"),
    Scenario("hugetlbfs-2m", "hugetlbfs 2 MiB", False, "hugetlb2m"),
    Scenario("thp", "tmpfs THP", False, "thp"),
    Scenario("thp-hgm", "tmpfs THP + HGM", True, "thp"),
    Scenario("hugetlbfs-2m-hgm", "hugetlbfs 2 MiB + HGM", True, "hugetlb2m"),
    Scenario("hugetlbfs-1g", "hugetlbfs 1 GiB", False, "hugetlb1g"),
]


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


class Net:
    """Where the destination listens: loopback, or a veth pair between two
    network namespaces with netem rate and delay on both ends."""

    def __init__(self, kind, rate, delay_us):
        self.kind, self.rate, self.delay_us = kind, rate, delay_us
        self.ns = []
        self.qdisc = None

    def __enter__(self):
        if self.kind == "loopback":
            self.src_prefix, self.dst_prefix, self.addr = [], [], "127.0.0.1"
            return self
        try:
            return self._setup()
        except Exception:
            self.__exit__()
            raise

    def _setup(self):
        tag = "hgmb%d" % os.getpid()
        self.ns = [tag + "s", tag + "d"]
        sh = lambda *a: subprocess.run(a, check=True, capture_output=True)
        for ns in self.ns:
            sh("ip", "netns", "add", ns)
        sh("ip", "link", "add", tag + "a", "netns", self.ns[0], "type", "veth",
           "peer", "name", tag + "b", "netns", self.ns[1])
        for ns, dev, ip in ((self.ns[0], tag + "a", "10.99.0.1"),
                            (self.ns[1], tag + "b", "10.99.0.2")):
            sh("ip", "-n", ns, "addr", "add", ip + "/24", "dev", dev)
            sh("ip", "-n", ns, "link", "set", dev, "up")
            sh("ip", "-n", ns, "link", "set", "lo", "up")
            tc = ["ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", dev,
                  "root"]
            if subprocess.run(tc + ["netem", "rate", self.rate, "delay",
                                    "%dus" % self.delay_us, "limit", "100000"],
                              capture_output=True).returncode == 0:
                self.qdisc = "netem"
            else:
                # No netem in this kernel: shape the rate only, with tbf
                sh(*(tc + ["tbf", "rate", self.rate, "burst", "4mb",
                           "latency", "50ms"]))
                self.qdisc = "tbf"
        self.src_prefix = ["ip", "netns", "exec", self.ns[0]]
        self.dst_prefix = ["ip", "netns", "exec", self.ns[1]]
        self.addr = "10.99.0.2"
        return self

    def __exit__(self, *exc):
        for ns in self.ns:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)

    def label(self):
        if self.kind == "loopback":
            return "loopback"
        if self.qdisc == "tbf":
            return "veth %s (tbf; no netem in this kernel, so no delay)" % (
                self.rate)
        return "veth %s, %d us each way" % (self.rate, self.delay_us)


def start_qemu(work, side, mem, args, accel, prefix, incoming):
    qmp = os.path.join(work, side + ".qmp")
    ser = os.path.join(work, side + ".serial")
    cmd = prefix + [QEMU, "-name", side, "-display", "none", "-nodefaults",
                    "-no-user-config", "-accel", accel, "-cpu", "max",
                    "-smp", str(args.vcpus), "-m", "%dM" % args.guest_mb,
                    "-object", mem, "-machine", "q35,memory-backend=mem0",
                    "-kernel", os.path.join(GUEST, "vmlinuz"),
                    "-initrd", os.path.join(GUEST, "initramfs.gz"),
                    "-append", "console=ttyS0 quiet panic=-1 hgmbench=%d,%s,%d,%d"
                    % (args.workload_mb, args.mode, args.vcpus, args.run_secs),
                    "-chardev", "socket,id=ser,path=%s,server=on,wait=off" % ser,
                    "-serial", "chardev:ser",
                    "-qmp", "unix:%s,server=on,wait=off" % qmp, "-no-reboot"]
    if incoming:
        cmd += ["-incoming", "defer"]
    log = open(os.path.join(work, side + ".log"), "w")
    p = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                         start_new_session=True)
    try:
        q = QMP(qmp)
        s = Serial(ser)
    except Exception:
        stop(p)
        raise
    return p, q, s


def stop(p):
    if p.poll() is None:
        os.killpg(p.pid, signal.SIGTERM)
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait(10)


def qemu_pid(p):
    """The QEMU process (under 'ip netns exec' it is the same process)."""
    return p.pid


def wait_status(q, states, timeout):
    deadline = time.time() + timeout
    while time.time() < deadline:
        info = q.cmd("query-migrate")
        if info.get("status") in states:
            return info
        time.sleep(0.05)
    raise TimeoutError("migration did not reach %s" % "/".join(states))


def run_one(sc, preempt, net, args, accel, tag):
    work = tempfile.mkdtemp(prefix="hgm-bench-")
    procs, files = [], []
    res = {"scenario": sc.name, "label": sc.label, "hgm": sc.hgm,
           "preempt": preempt, "network": net.label(), "accel": accel}
    try:
        smem, spath = sc.memory("src", args.guest_mb, tag)
        dmem, dpath = sc.memory("dst", args.guest_mb, tag)
        files = [f for f in (spath, dpath) if f]
        dp, dq, ds = start_qemu(work, "dst", dmem, args, accel, net.dst_prefix,
                                True)
        procs.append(dp)
        sp, sq, ss = start_qemu(work, "src", smem, args, accel, net.src_prefix,
                                False)
        procs.append(sp)
        for q, dst in ((sq, False), (dq, True)):
            caps = ["postcopy-ram"] + (["postcopy-ram-hgm"] if sc.hgm else []) \
                + (["postcopy-preempt"] if preempt else []) \
                + (["postcopy-blocktime"] if dst else [])
            q.cmd("migrate-set-capabilities", capabilities=[
                {"capability": c, "state": True} for c in caps])
        # Precopy slower than the guest dirties memory, so that it never
        # converges and postcopy does the rest; postcopy at the link speed
        sq.cmd("migrate-set-parameters", **{
            "max-bandwidth": args.precopy_bandwidth_mb * MIB,
            "max-postcopy-bandwidth": args.bandwidth_mb * MIB,
            "downtime-limit": 1})
        dq.cmd("migrate-incoming", uri="tcp:%s:0" % net.addr)
        port = dq.cmd("query-migrate")["socket-address"][0]["port"]
        ready = ss.wait("ready", 120)
        res["fill_s"] = ready["ready"]
        time.sleep(1)
        t0 = time.time()
        sq.cmd("migrate", uri="tcp:%s:%s" % (net.addr, port))
        time.sleep(args.precopy_secs)
        status = sq.cmd("query-migrate")["status"]
        if status != "active":
            raise RuntimeError("precopy is %s, not active, after %d s"
                               % (status, args.precopy_secs))
        # Arm the guest's switchover detection, then switch
        ss.send("\n")
        ss.wait("armed", 60)
        t_switch = time.time()
        sq.cmd("migrate-start-postcopy")
        info = wait_status(sq, ("completed", "failed"), args.timeout)
        t_done = time.time()
        if info["status"] != "completed":
            raise RuntimeError("migration failed: %s" % info.get("error-desc"))
        # Postcopy is over: the guest stops counting first touches
        ds.send("\n")
        t_close = time.time()
        dpid = qemu_pid(dp)
        res["huge_at_completion"] = huge_share(dpid, dpath, args.guest_mb)
        time.sleep(max(0, t_done + 1 - time.time()))
        res["huge_after_1s"] = huge_share(dpid, dpath, args.guest_mb)
        time.sleep(max(0, t_done + 5 - time.time()))
        res["huge_after_5s"] = huge_share(dpid, dpath, args.guest_mb)
        dinfo = wait_status(dq, ("completed",), 30)
        ram = info.get("ram", {})
        res.update({
            "total_time_ms": info.get("total-time"),
            "downtime_ms": info.get("downtime"),
            "precopy_s": round(t_switch - t0, 3),
            "postcopy_s": round(t_done - t_switch, 3),
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
                ds.send("\n")
        if closed is None:
            raise TimeoutError("guest did not report 'closed' in 90 s"
                               " (the line sent 3 times)")
        res["close_s"] = round([t for t, o in ds.lines if "closed" in o][0]
                               - t_close, 1)
        res["close_sent"] = attempt + 1
        epoch = closed["closed"]
        time.sleep(1.5)
        g = ds.last("t", lambda o: o["epoch"] == epoch)
        hist = g["hist_us_log2"]
        # Every vCPU thread of the workload still makes progress
        time.sleep(2)
        g2 = ds.last("t")
        res["stuck_threads"] = [i for i, (a, b) in enumerate(
            zip(g["per_thread"], g2["per_thread"])) if b <= a]
        res.update({
            "guest_epoch": g["epoch"],
            "first_touches": g["first_touches"],
            "corrupt": g["corrupt"],
            "stall_hist_us_log2": hist,
            "stall_p50_us": percentile(hist, 0.5),
            "stall_p99_us": percentile(hist, 0.99),
            "stall_max_us": g["max_us"],
        })
        res["ok"] = g["corrupt"] == 0 and not res["stuck_threads"]
    except Skip as e:
        res["skipped"] = str(e)
    except Exception as e:
        res["error"] = "%s: %s" % (type(e).__name__, e)
        res["ok"] = False
        # What each guest said last, and when: is it still running?
        for side, ser in (("src", locals().get("ss")),
                          ("dst", locals().get("ds"))):
            if ser:
                now = time.time()
                res[side + "_serial_tail"] = [
                    "%.1f s ago: %s" % (now - t, json.dumps(o)[:160])
                    for t, o in ser.lines[-3:]]
    finally:
        for p in procs:
            stop(p)
        for f in files:
            try:
                os.unlink(f)
            except OSError:
                pass
        if os.environ.get("HGM_BENCH_KEEP"):
            res["workdir"] = work
            for side, ser in (("src", locals().get("ss")),
                              ("dst", locals().get("ds"))):
                if ser:
                    with open(os.path.join(work, side + ".serial.txt"), "w") as f:
                        for t, o in ser.lines:
                            f.write("%.3f %s\n" % (t, json.dumps(o)))
        else:
            shutil.rmtree(work, ignore_errors=True)
    return res


def probe_accel(args):
    """KVM when it boots the guest, else TCG; and why."""
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        return "tcg,thread=multi", "no /dev/kvm"
    work = tempfile.mkdtemp(prefix="hgm-bench-probe-")
    p = None
    try:
        p, q, s = start_qemu(work, "probe", "memory-backend-ram,id=mem0,size=%dM"
                             % args.guest_mb, args, "kvm", [], False)
        s.wait("ready", 30)
        return "kvm", "KVM boots the guest"
    except Exception as e:
        with open(os.path.join(work, "probe.log")) as f:
            log = f.read().strip().splitlines()
        return "tcg,thread=multi", "KVM does not boot the guest here: %s" % (
            log[-1] if log else str(e) or type(e).__name__)
    finally:
        if p:
            stop(p)
        shutil.rmtree(work, ignore_errors=True)


def fmt(v, unit="", nd=0):
    if v is None:
        return "-"
    if isinstance(v, float):
        return ("%." + str(nd) + "f%s") % (v, unit)
    return "%s%s" % (v, unit)


def markdown(doc):
    out = ["Postcopy benchmark, %s on %s (%s, accelerator %s: %s)." % (
        doc["date"], doc["host"], doc["kernel"], doc["accel"],
        doc["accel_reason"]),
        "", "Guest %d MiB, workload %d MiB %s over %d vCPUs; precopy %d s at"
        " %d MiB/s (below the guest's dirty rate), then postcopy at up to %d"
        " MiB/s.  *Fault* columns: QEMU's latency of every page fault during"
        " postcopy, from the fault to the page in place (postcopy-fault-stats,"
        " local HGM resolutions included), with how many faults there were."
        "  *First touch* columns: latency of the first access to each 4 KiB"
        " page during postcopy, measured in the guest (most pages are there"
        " already when first touched).  Log2 buckets, percentiles"
        " interpolated inside a bucket." % (
            doc["guest_mb"], doc["workload_mb"], doc["mode"], doc["vcpus"],
            doc["precopy_secs"], doc["precopy_bandwidth_mb"],
            doc["bandwidth_mb"]), "",
        "| scenario | preempt | network | faults | fault p50 | fault p99 |"
        " first touch p50 / p99 / max | vCPU blocktime | postcopy | MiB/s |"
        " downtime | huge at end / 1 s / 5 s | corrupt |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in doc["results"]:
        if "skipped" in r or "error" in r:
            out.append("| %s | %s | %s | %s ||||||||||" % (
                r["label"], "on" if r["preempt"] else "off", r["network"],
                "not run: " + r["skipped"] if "skipped" in r
                else "failed: " + r["error"]))
            continue
        hs = "/".join(fmt(None if r.get(k) is None else 100 * r[k], "%")
                      for k in ("huge_at_completion", "huge_after_1s",
                                "huge_after_5s"))
        faults = r.get("qemu_faults") or {}
        nf = ", ".join("%d %s" % (n, k) for k, n in faults.items() if n) or "0"
        bt = (r.get("dst_stats") or {}).get("postcopy-vcpu-blocktime")
        out.append("| %s | %s | %s | %s | %s | %s | %s / %s / %s | %s | %s | %s"
                   " | %s | %s | %s |"
                   % (r["label"], "on" if r["preempt"] else "off", r["network"],
                      nf, fmt(r.get("qemu_fault_p50_us"), " µs", 0),
                      fmt(r.get("qemu_fault_p99_us"), " µs", 0),
                      fmt(r["stall_p50_us"], " µs", 1),
                      fmt(r["stall_p99_us"], " µs", 0),
                      fmt(r["stall_max_us"], " µs"),
                      "-" if bt is None else "/".join("%d" % b for b in bt)
                      + " ms",
                      fmt(r["postcopy_s"], " s", 2), fmt(r.get("postcopy_mbps")),
                      fmt(r["downtime_ms"], " ms"), hs, r["corrupt"]))
    return "\n".join(out) + "\n"


def plot(doc, png):
    """Fault latency CDF per scenario (log x axis), with gnuplot: one
    panel per network."""
    gp = shutil.which("gnuplot")
    if not gp:
        return "gnuplot not installed"
    work = tempfile.mkdtemp(prefix="hgm-bench-plot-")
    nets = []
    for r in doc["results"]:
        if r.get("qemu_fault_hist_us_log2") and r["network"] not in nets:
            nets.append(r["network"])
    panels = []
    for net in nets:
        plots = plot_panel(doc, net, work)
        panels.append("set title '%s'\nplot %s" % (net.replace("'", ""),
                                                   ", ".join(plots)))
    if not panels:
        return "nothing to plot"
    script = "\n".join([
        "set terminal pngcairo size 1400,%d" % (520 * len(panels))
        if "pngcairo" in subprocess.run([gp, "-e", "set terminal"],
                                        capture_output=True, text=True).stderr
        else "set terminal png size 1400,%d" % (520 * len(panels)),
        "set output '%s'" % png, "set multiplot layout %d,1" % len(panels),
        "set logscale x 2", "set format x '%g'", "set key noenhanced",
        "set xlabel 'page fault latency during postcopy (us, log2 buckets)'",
        "set ylabel 'share of faults'", "set key outside right",
        "set grid", "set yrange [0:1]"] + panels + ["unset multiplot"])
    subprocess.run([gp], input=script, text=True, check=True)
    shutil.rmtree(work, ignore_errors=True)
    return None


def plot_panel(doc, net, work):
    plots = []
    for i, r in enumerate(doc["results"]):
        hist = r.get("qemu_fault_hist_us_log2")
        if not hist or not sum(hist) or r["network"] != net:
            continue
        total, seen = sum(hist), 0
        path = os.path.join(work, "%d.dat" % i)
        with open(path, "w") as f:
            for b, n in enumerate(hist):
                seen += n
                f.write("%g %g\n" % (2 ** (b + 1), seen / total))
        title = "%s%s" % (r["label"], ", preempt" if r["preempt"] else "")
        plots.append("'%s' using 1:2 with linespoints lw 2 dt %d title '%s'" % (
            path, 1 if r["preempt"] else 2, title.replace("'", "")))
    return plots


def concurrency_test(args):
    """PASS/FAIL/SKIP lines as the project's tests/run-* print them."""
    sc = [s for s in SCENARIOS if s.name == "thp-hgm"][0]
    if os.geteuid() != 0:
        print("SKIP concurrency: needs root")
        return 0
    with ThpMount(2 * args.guest_mb + 64):
        return concurrency_rounds(args, sc)


def concurrency_rounds(args, sc):
    if not os.path.exists(os.path.join(GUEST, "vmlinuz")):
        print("FAIL concurrency: no guest (scripts/guest-build)")
        return 1
    try:
        sc.check(args.guest_mb)
    except Skip as e:
        print("SKIP concurrency: %s" % e)
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
                print("PASS %s: %d faults in QEMU, %d first touches in the"
                      " guest after the switchover, p99 %s us, no corruption,"
                      " all %d threads running; the guest answered in %s s%s"
                      % (name, faults, r["first_touches"],
                         fmt(r["stall_p99_us"]), args.vcpus, r["close_s"],
                         "" if r["close_sent"] == 1 else
                         ", after the line was sent %d times"
                         % r["close_sent"]), flush=True)
            else:
                failed += 1
                print("FAIL %s: %s" % (name, r.get("error") or
                                       "corrupt %s, stuck threads %s" % (
                                           r.get("corrupt"),
                                           r.get("stuck_threads"))),
                      flush=True)
                for side in ("src", "dst"):
                    for line in r.get(side + "_serial_tail", []):
                        print("      %s guest, %s" % (side, line), flush=True)
    return 1 if failed else 0


def main():
    # Stopped from outside: clean up (QEMUs, mounts, huge pages) all the same
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(143))
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
    args = ap.parse_args()
    if args.test_rounds:
        return concurrency_test(args)

    if os.geteuid() != 0:
        sys.exit("bench: run as root (huge pages, network namespaces)")
    for f in (QEMU, os.path.join(GUEST, "vmlinuz")):
        if not os.path.exists(f):
            sys.exit("bench: %s is missing (make build; scripts/guest-build)" % f)

    accel, why = probe_accel(args)
    print("bench: accelerator %s (%s)" % (accel.split(",")[0], why), flush=True)
    wanted = args.scenarios.split(",")
    scenarios = [s for s in SCENARIOS if s.name in wanted]
    results = []
    # Huge pages for the hugetlbfs scenarios, given back afterwards
    saved = {sz: hugepages(sz)[0] for sz in (2048, 1048576)
             if os.path.exists("/sys/kernel/mm/hugepages/hugepages-%dkB" % sz)}
    thp = ThpMount(2 * args.guest_mb + 64)
    thp.__enter__()
    try:
        need2m = 2 * args.guest_mb // 2
        if any(s.backing == "hugetlb2m" for s in scenarios):
            total, free = hugepages(2048)
            if free < need2m:
                hugepages(2048, total + need2m - free)
        runs = [(s, p == "on", n) for n in args.network.split(",")
                for s in scenarios for p in args.preempt.split(",")]
        for i, (sc, preempt, netkind) in enumerate(runs, 1):
            net = Net(netkind, args.rate, args.delay_us)
            line = "[%d/%d] %s, preempt %s, %s" % (
                i, len(runs), sc.label, "on" if preempt else "off", net.label())
            print(line + " ...", end="", flush=True)
            t = time.time()
            try:
                sc.check(args.guest_mb)
                if sc.backing == "hugetlb1g":
                    if fs_type(HUGETLB_1G)[0] != "hugetlbfs":
                        os.makedirs(HUGETLB_1G, exist_ok=True)
                        subprocess.run(["mount", "-t", "hugetlbfs", "-o",
                                        "pagesize=1G", "none", HUGETLB_1G],
                                       check=True)
                    total, free = hugepages(1048576)
                    need = 2 * args.guest_mb // 1024
                    if free < need:
                        hugepages(1048576, total + need - free)
                    if hugepages(1048576)[1] < need:
                        raise Skip("cannot reserve %d 1 GiB pages (memory too"
                                   " fragmented?)" % need)
                with net:
                    r = run_one(sc, preempt, net, args, accel,
                                "%d-%d" % (os.getpid(), i))
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
            results.append(r)
            if "skipped" in r:
                print(" not run: " + r["skipped"], flush=True)
            elif "error" in r:
                print(" FAILED: " + r["error"], flush=True)
            else:
                print(" faults p50 %s us, p99 %s us, postcopy %.2f s, huge %s"
                      " (%.0f s)"
                      % (fmt(r.get("qemu_fault_p50_us"), "", 0),
                         fmt(r.get("qemu_fault_p99_us")), r["postcopy_s"],
                         fmt(None if r["huge_after_1s"] is None
                             else 100 * r["huge_after_1s"], "%"),
                         time.time() - t), flush=True)
    finally:
        thp.__exit__()
        for sz, n in saved.items():
            try:
                hugepages(sz, n)
            except OSError:
                pass

    now = datetime.datetime.now()
    host = socket.gethostname().split(".")[0]
    doc = {"date": now.strftime("%Y-%m-%d %H:%M"), "host": host,
           "kernel": os.uname().release, "accel": accel.split(",")[0],
           "accel_reason": why, "guest_mb": args.guest_mb,
           "workload_mb": args.workload_mb, "mode": args.mode,
           "vcpus": args.vcpus, "precopy_secs": args.precopy_secs,
           "precopy_bandwidth_mb": args.precopy_bandwidth_mb,
           "bandwidth_mb": args.bandwidth_mb,
           "hgm_kernel": kernel_splits_hugetlb(), "results": results}
    os.makedirs(args.out, exist_ok=True)
    base = os.path.join(args.out, "%s-%s" % (now.strftime("%Y-%m-%d"), host))
    with open(base + ".json", "w") as f:
        json.dump(doc, f, indent=1)
    md = markdown(doc)
    with open(base + ".md", "w") as f:
        f.write(md)
    err = plot(doc, base + ".png")
    print(md)
    print("bench: wrote %s.json, .md%s" % (base, "" if err else ", .png"))
    if err:
        print("bench: no plot: " + err)
    return 1 if any(r.get("ok") is False for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
