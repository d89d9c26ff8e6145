"""CPU time of the QEMUs' threads through postcopy, from
/proc/<pid>/task/<tid>/schedstat (nanoseconds on a core), sampled in the
background, without perf.  On this host the vCPUs and the threads that
move the memory share two cores, so what the migration costs in CPU is
time the guest may wait for a core."""
import os
import threading
import time

PERIOD = 0.01


def thread_times(pid):
    """{tid: (thread name, seconds on a core)} of process @pid."""
    out = {}
    base = "/proc/%d/task" % pid
    try:
        tids = os.listdir(base)
    except OSError:
        return out
    for tid in tids:
        try:
            with open(os.path.join(base, tid, "comm")) as f:
                name = f.read().strip()
            with open(os.path.join(base, tid, "schedstat")) as f:
                ns = int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            continue        # the thread ended meanwhile
        out[tid] = (name, ns / 1e9)
    return out


class Sampler:
    """Samples the threads of the processes {side: pid} every PERIOD
    seconds from start() to stop(); between() gives what the threads of
    each name used in an interval."""

    def __init__(self, pids):
        self.pids = pids
        self.samples = []
        self.done = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self):
        # A thread that ended (the migration threads end with the
        # migration) keeps the time of its last sample
        seen = {side: {} for side in self.pids}
        while not self.done.is_set():
            sample = {}
            for side, pid in self.pids.items():
                seen[side].update(thread_times(pid))
                names = {}
                for name, sec in seen[side].values():
                    names[name] = names.get(name, 0) + sec
                sample[side] = names
            self.samples.append((time.time(), sample))
            self.done.wait(PERIOD)

    def start(self):
        self.thread.start()
        return self

    def stop(self):
        self.done.set()
        self.thread.join(10)

    def at(self, t):
        """The last sample taken at or before @t."""
        best = self.samples[0][1] if self.samples else {}
        for ts, s in self.samples:
            if ts > t:
                break
            best = s
        return best

    def between(self, t0, t1):
        """{side: {thread name: ms}} used from @t0 to @t1."""
        a, b = self.at(t0), self.at(t1)
        out = {}
        for side, names in b.items():
            before = a.get(side, {})
            out[side] = {n: round(1000 * (v - before.get(n, 0)), 1)
                         for n, v in names.items()
                         if v - before.get(n, 0) > 0}
        return out


def split(cpu_ms):
    """(vCPUs, everything else) in ms, of one side of between()."""
    vcpus = sum(v for n, v in cpu_ms.items() if n.startswith("CPU "))
    return vcpus, sum(cpu_ms.values()) - vcpus
