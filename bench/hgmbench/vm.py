"""QEMUs running the benchmark guest, driven with QEMU's own python package
from the source tree (build/qemu/python: qemu.machine.QEMUMachine and the
synchronous QMP client qemu.qmp.legacy.QEMUMonitorProtocol), and the
guest's serial console, on which the workload reports in JSON lines."""
import json
import os
import re
import shutil
import sys
import tempfile
import threading
import time

from . import GUEST, QEMU, TOP

QEMU_PYTHON = os.path.join(TOP, "build/qemu/python")
if not os.path.isdir(os.path.join(QEMU_PYTHON, "qemu")):
    raise ImportError("QEMU's python package is not at %s (make tree)"
                      % QEMU_PYTHON)
sys.path.insert(0, QEMU_PYTHON)
# pylint: disable=wrong-import-position
from qemu.machine import QEMUMachine  # noqa: E402
from qemu.machine.machine import AbnormalShutdown, VMLaunchFailure  # noqa: E402
from qemu.qmp import ConnectError  # noqa: E402
from qemu.qmp.legacy import QEMUMonitorProtocol  # noqa: E402

QMP_TIMEOUT = 30        # s, for any QMP command


def qmp_connect(path, timeout=QMP_TIMEOUT):
    """A QMP connection to the unix socket @path, waiting up to @timeout s
    for QEMU to create it; its commands time out after @timeout s.  Used by
    tests/run-libvirt, from python inline in that shell script."""
    deadline = time.time() + timeout
    while True:
        qmp = QEMUMonitorProtocol(path)
        try:
            qmp.connect()
        except ConnectError:
            if time.time() > deadline:
                raise
            time.sleep(0.05)
            continue
        qmp.settimeout(timeout)
        return qmp


class Serial:
    """The guest's serial console, read on a thread of its own: the JSON
    objects in its lines, each with the time it arrived; lines out."""

    def __init__(self, sock):
        self.sock = sock
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
        """The first object with @key (and @pred), waiting up to @timeout s."""
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


class BenchVM(QEMUMachine):
    """QEMU running the benchmark guest on one side (@side) of a migration.

    QEMUMachine passes QEMU its QMP monitor and serial console as socket
    pairs, so they work the same inside a network namespace (@wrapper, the
    command that enters it), writes QEMU's output to <work>/<side>.log and
    stops QEMU with 'quit', killing it when that does not work.  This adds
    the guest's command line, a timeout on QMP commands, a session of its
    own for QEMU and the console read line by line (self.serial, once
    started).  cmd() runs a QMP command and returns its result."""

    def __init__(self, work, side, mem, args, accel, wrapper=(),
                 incoming=False, binary=QEMU):
        qemu_args = [
            "-name", side + ",debug-threads=on", "-nodefaults", "-no-user-config",
            "-accel", accel, "-cpu", "max", "-smp", str(args.vcpus),
            "-m", "%dM" % args.guest_mb,
            "-object", mem, "-machine", "q35,memory-backend=mem0",
            "-kernel", os.path.join(GUEST, "vmlinuz"),
            "-initrd", os.path.join(GUEST, "initramfs.gz"),
            "-append", "console=ttyS0 quiet panic=-1 hgmbench=%d,%s,%d,%d"
            % (args.workload_mb, args.mode, args.vcpus, args.run_secs),
            "-no-reboot"]
        if incoming:
            qemu_args += ["-incoming", "defer"]
        # HGM_BENCH_TRACE=PATTERN,...: these QEMU trace events, with their
        # times, into <work>/<side>.trace (HGM_BENCH_KEEP=1 keeps it)
        for pattern in filter(None, os.environ.get("HGM_BENCH_TRACE",
                                                   "").split(",")):
            qemu_args += ["-trace", "enable=" + pattern]
        if os.environ.get("HGM_BENCH_TRACE"):
            qemu_args += ["-msg", "timestamp=on",
                          "-D", os.path.join(work, side + ".trace")]
        # setsid: QEMU in a session of its own, so that a ^C on the
        # terminal reaches only the benchmark, which then stops QEMU.  (The
        # child of Popen never leads a process group, so setsid execs
        # QEMU without forking: QEMU keeps the pid QEMUMachine knows.)
        super().__init__(binary, args=qemu_args,
                         wrapper=["setsid"] + list(wrapper), name=side,
                         log_dir=work)
        self.set_console()
        self.serial = None

    # QEMUMachine offers no public way to set its QMP connection's
    # timeout, nor to name the machine in a message: its subclasses
    # (QEMUQtestMachine upstream) use _post_launch(), _qmp and _name too.
    def _post_launch(self):
        super()._post_launch()
        self._qmp.settimeout(QMP_TIMEOUT)

    def start(self):
        """Launch QEMU; a QEMU that does not start raises RuntimeError with
        the last line it printed."""
        try:
            self.launch()
        except VMLaunchFailure as e:
            out = (e.output or "").strip().splitlines()
            raise RuntimeError("QEMU (%s) did not start%s: %s" % (
                self._name, "" if e.exitcode is None
                else ", exit %d" % e.exitcode,
                out[-1] if out else e.__cause__)) from None
        self.serial = Serial(self.console_socket)
        return self

    def stop(self):
        """Stop QEMU: 'quit', and SIGKILL after 10 s."""
        try:
            self.shutdown(timeout=10)
        except AbnormalShutdown:
            pass        # killed instead


def wait_status(vm, states, timeout):
    """query-migrate on @vm, once it is in one of @states."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        info = vm.cmd("query-migrate")
        if info.get("status") in states:
            return info
        time.sleep(0.05)
    raise TimeoutError("migration did not reach %s" % "/".join(states))


def probe_accel(args):
    """KVM when it boots the guest, else TCG; and why."""
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        return "tcg,thread=multi", "no /dev/kvm"
    work = tempfile.mkdtemp(prefix="hgm-bench-probe-")
    vm = BenchVM(work, "probe", "memory-backend-ram,id=mem0,size=%dM"
                 % args.guest_mb, args, "kvm")
    try:
        vm.start()
        vm.serial.wait("ready", 30)
        return "kvm", "KVM boots the guest"
    except Exception as e:
        vm.stop()
        log = (vm.get_log() or "").strip().splitlines()
        return "tcg,thread=multi", "KVM does not boot the guest here: %s" % (
            log[-1] if log else str(e) or type(e).__name__)
    finally:
        vm.stop()
        shutil.rmtree(work, ignore_errors=True)
