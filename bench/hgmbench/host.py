"""What the host provides for a run: huge pages, hugetlbfs and the THP
tmpfs (prepared by scripts/host-setup and given back afterwards), network
namespaces with a veth pair between them, and probes of the kernel."""
import ctypes
import mmap
import os
import shutil
import subprocess
import tempfile
import time

from . import MIB, TOP

HOST_SETUP = os.path.join(TOP, "scripts/host-setup")
HUGETLB_2M = "/dev/hugepages"
HUGETLB_1G = "/dev/hugepages1G"
# The tmpfs with huge=always for THP-backed guest RAM: host-setup's
THP_DIR = os.environ.get("HGM_THP_DIR", "/mnt/thp")


class HostSetup:
    """scripts/host-setup for one run, as a context manager: free 2 MiB and
    1 GiB huge pages, hugetlbfs, and room on the THP tmpfs for two guests of
    @mem_mb MiB.  Its changes are recorded in a state file of this run's
    own and undone on exit; what was there before (say from 'make
    host-setup') stays."""

    def __init__(self, mem_mb, hugepages_2m=0, hugepages_1g=0):
        self.env = {"HGM_TEST_MEM_MB": str(mem_mb),
                    "HGM_HUGEPAGES_2M": str(hugepages_2m),
                    "HGM_HUGEPAGES_1G": str(hugepages_1g),
                    "HGM_THP_DIR": THP_DIR}
        self.dir = None

    def __enter__(self):
        self.dir = tempfile.mkdtemp(prefix="hgm-host-setup-")
        self.env["HGM_HOST_SETUP_STATE"] = os.path.join(self.dir, "state")
        try:
            self._run()
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc):
        if self.dir is None:
            return
        try:
            if os.path.exists(self.env["HGM_HOST_SETUP_STATE"]):
                self._run("--undo")
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None

    def _run(self, *opts):
        r = subprocess.run([HOST_SETUP] + list(opts),
                           env=dict(os.environ, **self.env),
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, timeout=300)
        print(r.stdout, end="", flush=True)
        if r.returncode:
            raise RuntimeError("scripts/host-setup %s exited %d"
                               % (" ".join(opts), r.returncode))


def hugepages(size_kb):
    """(total, free) huge pages of @size_kb KiB; (0, 0) without that pool."""
    path = "/sys/kernel/mm/hugepages/hugepages-%dkB/" % size_kb
    try:
        with open(path + "nr_hugepages") as f:
            total = int(f.read())
        with open(path + "free_hugepages") as f:
            return total, int(f.read())
    except FileNotFoundError:
        return 0, 0


def touch_hugepages():
    """Fault in every free page of the hugetlbfs pools mounted at HUGETLB_2M
    and HUGETLB_1G, and give them back: {pool: (pages, seconds)}.

    This machine is itself a VM, and memory that its hypervisor has not
    backed yet is many times slower to touch the first time: here 1040
    2 MiB pages just reserved took 2.3 s to fault in (fallocate), 0.18 s
    the next time.  A migration that gets such pages pays for that in its
    postcopy (hugetlbfs 2 MiB: 3.2 s against 0.46 s for the same run
    after), so without this the first scenario on hugetlbfs of every run
    would measure the machine and not QEMU.  The pool keeps the pages, so
    the guests get pages touched here."""
    touched = {}
    for mnt, size_kb in ((HUGETLB_2M, 2048), (HUGETLB_1G, 1048576)):
        typ, opts = fs_type(mnt)
        free = hugepages(size_kb)[1]
        pagesize = "pagesize=%s" % ("2M" if size_kb == 2048 else "1024M")
        if typ != "hugetlbfs" or not free or pagesize not in opts.split(","):
            continue
        path = os.path.join(mnt, "hgm-bench-touch-%d" % os.getpid())
        start = time.monotonic()
        fd = -1
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
            os.unlink(path)
            os.posix_fallocate(fd, 0, free * size_kb * 1024)
        except OSError as e:
            print("bench: could not touch the %d KiB huge pages at %s: %s"
                  % (size_kb, mnt, e), flush=True)
            continue
        finally:
            if fd >= 0:
                os.close(fd)
        secs = time.monotonic() - start
        print("bench: touched %d free %d KiB huge pages in %.2f s"
              % (free, size_kb, secs), flush=True)
        touched["%dK" % size_kb] = (free, round(secs, 3))
    return touched


def fs_type(path):
    """Type and options of what is mounted at @path (the topmost mount)."""
    found = None, None
    with open("/proc/mounts") as f:
        for line in f:
            dev, mnt, typ, opts = line.split()[:4]
            if mnt == path:
                found = typ, opts
    return found


def thp_dir():
    """THP_DIR when a tmpfs with huge=always is mounted there, else None."""
    typ, opts = fs_type(THP_DIR)
    if typ == "tmpfs" and "huge=always" in opts.split(","):
        return THP_DIR
    return None


def kernel_splits_hugetlb():
    """MADV_SPLIT (HugeTLB HGM) on a 2 MiB hugetlbfs mapping?"""
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


class Net:
    """Where the destination listens, as a context manager: loopback, or a
    veth pair between two network namespaces with netem rate and delay on
    both ends (tbf and rate only where the kernel has no netem).  The
    source and destination QEMUs run under src_wrapper and dst_wrapper
    (commands that enter their namespace) and connect to addr."""

    def __init__(self, kind, rate, delay_us):
        self.kind, self.rate, self.delay_us = kind, rate, delay_us
        self.ns = []
        self.qdisc = None

    def __enter__(self):
        if self.kind == "loopback":
            self.src_wrapper, self.dst_wrapper = [], []
            self.addr = "127.0.0.1"
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
        # 'ip netns exec' execs the command: QEMU keeps its pid
        self.src_wrapper = ["ip", "netns", "exec", self.ns[0]]
        self.dst_wrapper = ["ip", "netns", "exec", self.ns[1]]
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
        if self.qdisc is None:
            # Not set up (a scenario that did not run): what it would
            # have been is not known before trying netem
            return "veth %s" % self.rate
        return "veth %s, %d us each way" % (self.rate, self.delay_us)
