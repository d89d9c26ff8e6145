# postcopy-ram-hgm: a QEMU 10.2 patch series and the tooling around it.
# 'make' builds, 'make check' tests; see README.md.

SHELL := /bin/bash
TOP := $(abspath .)

# Where the pinned QEMU source package is cached (see scripts/get-source).
ifeq ($(origin QEMU_SOURCE_CACHE),undefined)
QEMU_SOURCE_CACHE := $(if $(wildcard $(TOP)/../shared/qemu-source/SHA256SUMS),$(abspath $(TOP)/../shared/qemu-source),$(HOME)/.cache/qemu-hgm/source)
endif
export QEMU_SOURCE_CACHE QEMU_SRC

.PHONY: all deps need-deps tree export build check check-series host-setup \
        soak bench demo guest check-libvirt hgm-kernel check-hgm-kernel clean \
        distclean help

all: build

help:
	@echo "make               install what is missing (root), get the source, make build/qemu, build"
	@echo "make check         build, then checkpatch + QEMU's postcopy qtests + the project's tests"
	@echo "make tree          (re)create build/qemu: 'upstream' + one commit per patch"
	@echo "make export        write the commits after 'upstream' into patches/"
	@echo "make check-series  build after each patch of the series (bisectability)"
	@echo "make check-libvirt  migrate with virsh between two libvirtd instances (root)"
	@echo "make soak          20 back-to-back postcopy migrations with HGM (HGM_SOAK_ROUNDS)"
	@echo "make bench         the benchmark: HGM against today's postcopy (root; BENCH_ARGS)"
	@echo "make bench NESTED=1  the hugetlbfs scenarios inside a TCG guest of the HGM kernel"
	@echo "make demo          a short side by side on a fresh machine, in one command (root)"
	@echo "make host-setup    reserve huge pages, mount hugetlbfs and a THP tmpfs (root)"
	@echo "make deps          install the build dependencies (root)"
	@echo "make hgm-kernel    Linux 6.3.8 + HugeTLB HGM series, its selftests (build/hgm-kernel; kernel/README.md)"
	@echo "make check-hgm-kernel  the hugetlbfs HGM tests inside a TCG guest of that kernel"

deps:
	@scripts/deps

need-deps:
	@scripts/deps --check >/dev/null || scripts/deps

tree: need-deps
	@scripts/tree

export:
	@scripts/export

build: tree
	@scripts/build

check: build
	@tests/check

check-libvirt: build guest
	@tests/run-libvirt

soak: build
	@tests/soak

guest: need-deps
	@scripts/guest-build

# NESTED=1: inside a TCG guest of the HGM kernel (make hgm-kernel)
bench: build guest $(if $(NESTED),hgm-kernel)
	@python3 bench/run.py $(if $(NESTED),--nested) $(BENCH_ARGS)

# The benchmark prepares the host itself and undoes what it changed
demo: build guest
	@python3 bench/run.py --scenarios hugetlbfs-2m,thp,thp-hgm --preempt on \
	    --network loopback --guest-mb 512 --workload-mb 256 --precopy-secs 3 \
	    --out $(TOP)/build/demo

check-series: need-deps
	@tests/check-series

host-setup:
	@scripts/host-setup

hgm-kernel:
	@scripts/hgm-kernel

check-hgm-kernel: build hgm-kernel
	@tests/hgm-kernel/run

clean:
	rm -rf build/obj build/obj.configure.log build/series-obj

distclean:
	@scripts/tree --check-clean
	rm -rf build
