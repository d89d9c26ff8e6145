"""The postcopy benchmark, in parts (bench/run.py is the entry point):

  host.py         what the host provides: huge pages and the THP tmpfs
                  (from scripts/host-setup), network namespaces with a veth
                  pair, and probes of what the kernel can do
  vm.py           a QEMU running the benchmark guest, with QEMU's own
                  python package (qemu.machine, qemu.qmp) from build/qemu,
                  and the guest's serial console
  scenarios.py    the scenarios; one migration and its measurements
  concurrency.py  the concurrency test (tests/run-concurrency)
  report.py       the results as json, markdown and a plot
"""
import os

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))))
QEMU = os.path.join(TOP, "build/obj/qemu-system-x86_64")
GUEST = os.path.join(TOP, "build/guest")
MIB = 1024 * 1024
