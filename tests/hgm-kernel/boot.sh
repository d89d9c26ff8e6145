# Booting the HGM kernel's guest under TCG and reading what its init
# (tests/guest/init) says on the serial console, as test results.  Sourced
# by tests/hgm-kernel/run, which sets $qemu, $out, $image, $smp, $mem,
# $tests, $qtest_timeout, $logdir, $tlogdir and, for the bench,
# $bench_opts and $bench_mb.
# shellcheck shell=bash

now() { echo "$EPOCHREALTIME"; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.0f", b - a }'; }

part_pages() {
    case $1 in
    # 2 x 1 GiB for the 1 GiB qtests (two guests of 1 GiB), 200 x 2 MiB for
    # the 2 MiB ones (two guests of 150 MiB) and the selftests
    2M|shell) echo "hugepagesz=1G hugepages=2 hugepagesz=2M hugepages=200 default_hugepagesz=2M" ;;
    shell1G|1G) echo "hugepagesz=1G hugepages=2 hugepagesz=2M hugepages=200 default_hugepagesz=1G" ;;
    # two guests of the bench's size on each, for the scenarios one after
    # the other
    bench) echo "hugepagesz=1G hugepages=$(( (2 * bench_mb + 1023) / 1024 ))" \
                "hugepagesz=2M hugepages=$(( bench_mb + 8 )) default_hugepagesz=2M" ;;
    esac
}

# Guest RAM: the tests' 2 x 1 GiB + 200 x 2 MiB and room for the QEMUs;
# for the bench its huge pages (2 MiB and 1 GiB for two guests each) and
# room for two QEMUs' translation caches and Python
guest_mem() {
    if [ -n "$mem" ]; then
        echo "$mem"
    elif [ "$1" = bench ]; then
        echo "$(( (4 * bench_mb + 1023) / 1024 + 4 ))G"
    else
        echo 6G
    fi
}

qemu_cmd() {  # qemu_cmd PART EXTRA-APPEND
    local part=$1
    local append="console=ttyS0 panic=-1 oops=panic loglevel=5 $(part_pages "$part") $2"
    echo "$qemu" -accel tcg -M pc -cpu max -smp "$smp" -m "$(guest_mem "$part")" \
        -nodefaults -display none -no-reboot \
        -kernel "$out/bzImage" -initrd "$image" -append "'$append'"
}

# boot PART LIMIT: run the guest, print each result as it comes
declare -A started planned done_
order=()
kernel_release=
boot() {
    local part=$1 limit=$2 extra log line t0 t_up= name st s why cur= cur_t0= tlog=/dev/null
    local finished=0 elapsed rc json=0
    log=$logdir/hgm-kernel-$part.log
    extra="hgm.part=$part hgm.timeout=$qtest_timeout"
    [ "${HGM_KERNEL_QTEST_LOG:-}" = 1 ] && extra+=" hgm.qtest_log=1"
    [ -n "${HGM_KERNEL_QTEST_TRACE:-}" ] && extra+=" hgm.trace=$HGM_KERNEL_QTEST_TRACE"
    if [ "$part" = 2M ] && [ -n "$tests" ]; then
        extra+=" hgm.tests=$(echo "$tests" | paste -sd,)"
    fi
    [ "$part" = bench ] && extra+=" hgm.bench=$bench_opts"
    echo "== boot $part: HGM kernel under TCG, -smp $smp -m $(guest_mem "$part") (serial log: $log)"
    t0=$(now)
    exec 3>"$log"
    # shellcheck disable=SC2046
    while IFS= read -r line; do
        line=${line%$'\r'}
        printf '%s\n' "$line" >&3
        case $line in
        "hgm-check: up "*)
            t_up=$(now)
            kernel_release=$(echo "$line" | awk '{ print $5 }')
            echo "   kernel $kernel_release, init up after $(secs "$t0" "$t_up") s"
            ;;
        "hgm-check: plan "*)
            name=${line#hgm-check: plan }
            planned[$name]=$part
            order+=("$name")
            ;;
        "hgm-check: start "*)
            cur=${line#hgm-check: start }
            cur_t0=$(now)
            started[$cur]=1
            tlog=$tlogdir/${cur//\//_}.log
            : >"$tlog"
            ;;
        "hgm-check: result "*)
            read -r _ _ name st s why <<<"$line"
            done_[$name]=1
            s=$(secs "$cur_t0" "$(now)")
            case $st in
            PASS) result pass "$name [${s}s]" ;;
            SKIP) result skip "$name" "${why:-no reason given}" ;;
            *) result fail "$name" "${why:-no reason given}; ${s}s; see ${tlog#"$top"/}" ;;
            esac
            # the other tests of hugetlb-hgm share its output and log
            case $name in
            */hugetlb-hgm/hwpoison) cur= tlog=/dev/null ;;
            */hugetlb-hgm/*) ;;
            *) cur= tlog=/dev/null ;;
            esac
            ;;
        "hgm-check: done "*) finished=1 ;;
        "hgm-check: bench-json begin") json=1; : >"$out/bench.json.tmp" ;;
        "hgm-check: bench-json end") json=0; mv "$out/bench.json.tmp" "$out/bench.json" ;;
        *)
            if [ $json = 1 ]; then
                printf '%s\n' "$line" >>"$out/bench.json.tmp"
                continue
            fi
            [ -n "$cur" ] && printf '%s\n' "$line" >>"$tlog"
            # the bench's progress, as it comes
            [ "$part" = bench ] && case $line in
                "["[0-9]*/[0-9]*"] "*|"bench: "*) printf '   %s\n' "$line" ;;
                # the end of a progress line a kernel message cut in two
                " faults p50 "*|" not run: "*|" FAILED: "*) printf '   ...%s\n' "$line" ;;
            esac
            ;;
        esac
    done < <(eval timeout -k 10 "$limit" $(qemu_cmd "$part" "$extra") -serial stdio </dev/null 2>&1
             echo "check-hgm-kernel: QEMU exited with $?")
    exec 3>&-
    elapsed=$(secs "$t0" "$(now)")
    rc=$(sed -n 's/^check-hgm-kernel: QEMU exited with //p' "$log")
    part_secs[$part]=$elapsed
    # The boot itself: the guest got to the end, the kernel log is clean
    why=
    if [ $finished = 0 ]; then
        why="the guest did not finish (QEMU exit ${rc:-?} after ${elapsed} s, limit $limit s: hung, crashed or timed out)"
        if [ -n "$cur" ] && [ -z "${done_[$cur]:-}" ]; then
            result fail "$cur" "no result: the guest stopped while it ran; see ${tlog#"$top"/}"
            done_[$cur]=1
        fi
    fi
    for name in "${order[@]}"; do
        [ "${planned[$name]}" = "$part" ] || continue
        [ -n "${done_[$name]:-}" ] && continue
        result fail "$name" "not run: the guest stopped before it"
        done_[$name]=1
    done
    s=$(grep -E 'BUG:|Oops|WARNING:|Kernel panic|general protection|Call Trace:' "$log" | head -n1)
    [ -n "$s" ] && why="${why:+$why; }the kernel log has: $s"
    if [ -z "$why" ]; then
        result pass "boot $part: $kernel_release, the guest finished, kernel log clean [${elapsed}s]"
    else
        result fail "boot $part" "$why; see ${log#"$top"/}"
    fi
}
