"""The results of a run: <out>/<date>-<host>.json (everything measured),
.md (a table) and .png (QEMU's fault latency CDF, drawn with gnuplot)."""
import json
import os
import shutil
import socket
import subprocess

from . import cputime


def fmt_us(us):
    """A latency in µs, ms or s, three significant digits at most."""
    if us >= 1e6:
        return "%.3g s" % (us / 1e6)
    if us >= 1e3:
        return "%.3g ms" % (us / 1e3)
    return "%.3g µs" % us


def fmt_s(s):
    """Seconds, or None, as fmt_us() writes them"""
    return "-" if s is None else fmt_us(1e6 * s)


def fmt(v, unit="", nd=0):
    if v is None:
        return "-"
    if isinstance(v, float):
        return ("%." + str(nd) + "f%s") % (v, unit)
    return "%s%s" % (v, unit)


def document(args, accel, accel_reason, hgm_kernel, results, now):
    """The run as the .json file has it."""
    return {"date": now.strftime("%Y-%m-%d %H:%M"),
            "host": socket.gethostname().split(".")[0],
            "kernel": os.uname().release, "accel": accel.split(",")[0],
            "accel_reason": accel_reason, "guest_mb": args.guest_mb,
            "workload_mb": args.workload_mb, "mode": args.mode,
            "vcpus": args.vcpus, "precopy_secs": args.precopy_secs,
            "precopy_bandwidth_mb": args.precopy_bandwidth_mb,
            "bandwidth_mb": args.bandwidth_mb,
            "hgm_kernel": hgm_kernel, "results": results}


def write(doc, out, now):
    """Write the .json, .md and .png of @doc into @out and say so; the
    markdown is printed too."""
    os.makedirs(out, exist_ok=True)
    base = os.path.join(out, "%s-%s%s" % (now.strftime("%Y-%m-%d"),
                                          doc["host"], "-nested"
                                          if doc.get("nested_on") else ""))
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
    return base


# QEMU's postcopy-latency-dist: 24 log2 buckets of µs, the last one open
LAST_BUCKET_US = 2 ** 23


def fmt_quantile(us):
    """A quantile of a latency histogram (µs); one that falls in the last,
    open-ended bucket is only known to be at least its lower bound."""
    if us is None:
        return "-"
    if us >= LAST_BUCKET_US:
        return "≥ %s (last bucket)" % fmt_us(LAST_BUCKET_US)
    return fmt_us(us)


def markdown(doc):
    out = ["Postcopy benchmark, %s on %s (%s, accelerator %s: %s)." % (
        doc["date"], doc["host"], doc["kernel"], doc["accel"],
        doc["accel_reason"]),
        "", "Guest %d MiB, workload %d MiB %s over %d vCPUs; precopy %d s at"
        " %d MiB/s (below the guest's dirty rate), then postcopy at up to %d"
        " MiB/s.  *Postcopy*: from the guest's start on the destination (its"
        " RESUME event) to the end of the migration.  *Fault* columns: QEMU's"
        " latency of every page fault during"
        " postcopy, from the fault to the page in place (postcopy-fault-stats,"
        " local HGM resolutions included), with how many faults there were."
        "  *First touch* columns: latency of the first access to each 4 KiB"
        " page during postcopy, measured in the guest (most pages are there"
        " already when first touched).  *Guest stall*: every access of"
        " the guest's workload during postcopy that took over 50 µs, summed"
        " over its vCPUs, and the slowest; what the guest as a whole"
        " waited (both guest columns count from the guest's stop on the"
        " source: what it did there after the command to switch is left"
        " out).  *Back to 90 %% speed*: seconds from the switchover until"
        " the guest's accesses per second (counted every 100 ms, averaged over"
        " half a second) stay at 90 %%"
        " or more of its speed in the last 2 s of precopy (the timeline in"
        " the plot).  *Stopped*: QEMU's downtime, and the time from the"
        " guest's stop on the source (its STOP event) to its start on the"
        " destination (RESUME), which the guest's own clock does not see:"
        " pages that loading the devices touches arrive in it, a whole"
        " huge page each without HGM.  Log2 buckets, percentiles"
        " interpolated inside a bucket." % (
            doc["guest_mb"], doc["workload_mb"], doc["mode"], doc["vcpus"],
            doc["precopy_secs"], doc["precopy_bandwidth_mb"],
            doc["bandwidth_mb"]), ""]
    t = doc.get("hugepages_touched")
    if t:
        out += ["Before the first run every free huge page was faulted in"
                " once and given back (%s): memory this machine's"
                " hypervisor has not backed yet is many times slower to"
                " touch the first time, which the first migration on"
                " hugetlbfs paid for before." % ", ".join(
                    "%d of %s in %.2f s" % (n, k.replace("2048K", "2 MiB")
                                            .replace("1048576K", "1 GiB"),
                                            secs)
                    for k, (n, secs) in sorted(t.items())), ""]
    w = doc.get("warmup")
    if w:
        out += ["A warm-up run, not counted, came first: %s, preempt %s%s"
                " (the first migration after the host is set up has been"
                " 3-7 times slower than the others)." % (
                    w["label"], "on" if w["preempt"] else "off",
                    ": postcopy %s s, guest stall %s ms" % (
                        fmt(w["postcopy_s"], "", 2),
                        fmt(w.get("guest_stall_ms")))
                    if "postcopy_s" in w else ""), ""]
    if doc.get("nested_on"):
        out += ["**Nested TCG**: both QEMUs of every migration ran under TCG"
                " inside a TCG guest of the kernel above, on %s.  Absolute"
                " figures are those of doubly emulated guests, many times"
                " slower than on hardware; compare the rows with each other."
                % doc["nested_on"], ""]
    out += [
        "| scenario | preempt | network | faults | fault p50 | fault p99 |"
        " first touch p50 / p99 / max | guest stall / worst | vCPU blocktime |"
        " postcopy | MiB/s | stopped: downtime / stop to resume |"
        " huge at end / 1 s / 5 s | corrupt |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in doc["results"]:
        label = r["label"] + (" [%s]" % r["build"] if r.get("build") else "")
        if "skipped" in r or "error" in r:
            out.append("| %s | %s | %s | %s |||||||||||" % (
                label, "on" if r["preempt"] else "off", r["network"],
                "not run: " + r["skipped"] if "skipped" in r
                else "failed: " + r["error"]))
            continue
        hs = "/".join(fmt(None if r.get(k) is None else 100 * r[k], "%")
                      for k in ("huge_at_completion", "huge_after_1s",
                                "huge_after_5s"))
        faults = r.get("qemu_faults") or {}
        means = r.get("qemu_fault_mean_us") or {}
        nf = ", ".join("%d %s%s" % (n, k, " (mean %s)" % fmt_us(means[k])
                                    if k in means else "")
                       for k, n in faults.items() if n) or "0"
        bt = (r.get("dst_stats") or {}).get("postcopy-vcpu-blocktime")
        stall = "-" if r.get("guest_stall_ms") is None else "%s / %s" % (
            fmt_us(1000 * r["guest_stall_ms"]),
            fmt_us(1000 * r["guest_worst_stall_ms"]))
        out.append("| %s | %s | %s | %s | %s | %s | %s / %s / %s | %s | %s"
                   " | %s | %s | %s | %s | %s |"
                   % (label, "on" if r["preempt"] else "off", r["network"],
                      nf, fmt_quantile(r.get("qemu_fault_p50_us")),
                      fmt_quantile(r.get("qemu_fault_p99_us")),
                      fmt_quantile(r["stall_p50_us"]),
                      fmt_quantile(r["stall_p99_us"]),
                      fmt_quantile(r["stall_max_us"]), stall,
                      "-" if bt is None else "/".join("%d" % b for b in bt)
                      + " ms",
                      fmt(r["postcopy_s"], " s", 2), fmt(r.get("postcopy_mbps")),
                      "%s / %s" % (fmt(r["downtime_ms"], " ms"),
                                   fmt_s(stop_to_resume(r))),
                      hs, r["corrupt"]))
    out += summary(doc["results"])
    out += sched_table(doc["results"])
    return "\n".join(out) + "\n"


def sched_table(results):
    """With HGM_BENCH_PERF=sched: where the destination's vCPUs spent
    postcopy, summed over them, and the CPU time of the migration's
    threads on both sides."""
    rs = [r for r in results if r.get("sched")]
    if not rs:
        return []
    out = ["", "Where the destination's vCPUs spent postcopy, summed over"
           " them, from the scheduler's events (HGM_BENCH_PERF=sched):"
           " running, blocked for a page (userfaultfd), runnable but"
           " waiting for a core, blocked on a futex (the BQL, a lock, a"
           " halted vCPU), anything else; the longest that a vCPU waited"
           " for a core at a time (a vCPU whose page arrived, or that was"
           " preempted, but found both cores busy); and the CPU time of"
           " the threads that move the memory.", "",
           "| scenario | preempt | postcopy | vCPUs ran | waited for pages |"
           " waited for a core | longest | futex | other |"
           " migration threads' CPU |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rs:
        sc = r["sched"]
        v = sc["dst_vcpus"]
        mig = ", ".join(
            "%s %s" % (name, fmt_us(1000 * ms))
            for side in ("src", "dst")
            for name, ms in sorted(sc.get(side + "_cpu_ms", {}).items())
            if name.startswith("mig/"))
        label = r["label"] + (" [%s]" % r["build"] if r.get("build") else "")
        longest = v.get("core_max")
        out.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            label, "on" if r["preempt"] else "off",
            fmt_us(1000 * sc["window_ms"]),
            *(fmt_us(1000 * v[k]) for k in ("run", "page", "core")),
            "" if longest is None else fmt_us(1000 * longest),
            *(fmt_us(1000 * v[k]) for k in ("futex", "other")), mig))
    return out


def median(values):
    values = sorted(v for v in values if v is not None)
    if not values:
        return None
    mid = len(values) // 2
    return values[mid] if len(values) % 2 else (values[mid - 1] +
                                                 values[mid]) / 2


def precopy_speed(tl):
    """The guest's accesses per second in the last 2 s of precopy, from
    its timeline @tl (the median of its intervals); None when the
    timeline holds too little of precopy to tell."""
    before = [v for x, v in tl or [] if x < -0.2]
    return median(before) if len(before) >= 3 else None


def stop_to_resume(r):
    """Seconds from the guest's stop on the source to its start on the
    destination, or None"""
    if r.get("switch_s") is None or r.get("ran_on_source_s") is None:
        return None
    return max(0, r["switch_s"] - r["ran_on_source_s"])


def summary(results):
    """With repeated runs or several builds: the median of each measure
    over the runs of one scenario, build, preempt setting and network,
    with its range, in the order they first ran."""
    groups = {}
    for r in results:
        if "skipped" in r or "error" in r:
            continue
        key = (r["label"], r.get("build", ""), r["preempt"], r["network"])
        groups.setdefault(key, []).append(r)
    if not any(len(g) > 1 for g in groups.values()) and \
            not any(k[1] for k in groups):
        return []

    def cell(rs, get, scale=1000):
        vals = [get(r) for r in rs]
        vals = [v for v in vals if v is not None]
        if not vals:
            return "-"
        m = fmt_us(median(vals) * scale)
        if len(vals) == 1:
            return m
        return "%s (%s-%s)" % (m, fmt_us(min(vals) * scale),
                               fmt_us(max(vals) * scale))

    def mean_by_request(r):
        means = r.get("qemu_fault_mean_us") or {}
        faults = r.get("qemu_faults") or {}
        for kind in ("page", "huge-page"):
            if faults.get(kind):
                return means[kind] / 1000
        return None

    def blocktime(r):
        bt = (r.get("dst_stats") or {}).get("postcopy-vcpu-blocktime")
        return None if bt is None else sum(bt)

    def cpu_cell(rs):
        # CPU on a core in postcopy besides the vCPUs, source / destination
        if not any(r.get("cpu_ms") for r in rs):
            return "-"
        return " / ".join(
            cell(rs, lambda r, side=side: cputime.split(
                (r.get("cpu_ms") or {}).get(side, {}))[1] or None)
            for side in ("src", "dst"))

    def stalled_share(r):
        # The guest's stall per second of postcopy and vCPU: near 1 when
        # its vCPUs waited through all of postcopy (it can pass 1 a
        # little: the guest's epoch ends after postcopy does)
        bt = (r.get("dst_stats") or {}).get("postcopy-vcpu-blocktime")
        if not bt or r.get("guest_stall_ms") is None or not r["postcopy_s"]:
            return None
        return r["guest_stall_ms"] / 1000 / r["postcopy_s"] / len(bt)

    def ratio_cell(rs, get):
        vals = [v for v in (get(r) for r in rs) if v is not None]
        if not vals:
            return "-"
        if min(vals) == max(vals):
            return "%.2f" % vals[0]
        return "%.2f (%.2f-%.2f)" % (median(vals), min(vals), max(vals))

    def hgm_stat(r, key):
        return ((r.get("dst_stats") or {}).get("postcopy-hgm") or {}).get(key)

    def per_huge_page(r):
        # Without HGM each request asks for a whole huge page
        hps = hgm_stat(r, "huge-pages-requested")
        if hgm_stat(r, "faults-requested") is None:
            return 1.0 if r.get("postcopy_requests") else None
        if hps is None:
            # From a QEMU without the count
            return None
        return hgm_stat(r, "faults-requested") / hps if hps else None

    def arrivals(rs):
        # How the pieces received in postcopy came (HGM), medians
        keys = ("pieces-requested", "pieces-prefetched", "pieces-bulk")
        vals = [median(hgm_stat(r, k) or 0 for r in rs) for k in keys]
        if not any(hgm_stat(r, keys[0]) is not None for r in rs):
            return "-"
        return " / ".join(fmt(v) for v in vals)

    out = ["", "Medians over the runs (range in brackets):", "",
           "| scenario | preempt | network | runs | stop to resume |"
           " postcopy | guest stall |"
           " stalled share | worst stall | back to 90 % speed |"
           " vCPU blocktime (sum) | fault p50 | mean fault by request |"
           " requests | requests per huge page |"
           " pieces requested / prefetched / bulk |"
           " QEMUs' CPU besides vCPUs, source / destination |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
           "---|"]
    for (label, build, preempt, net), rs in groups.items():
        out.append("| %s | %s | %s | %d | %s | %s | %s | %s | %s | %s | %s |"
                   " %s | %s | %s | %s | %s | %s |"
                   % (label + (" [%s]" % build if build else ""),
                      "on" if preempt else "off", net, len(rs),
                      cell(rs, stop_to_resume, 1e6),
                      cell(rs, lambda r: r["postcopy_s"], 1e6),
                      cell(rs, lambda r: r.get("guest_stall_ms")),
                      ratio_cell(rs, stalled_share),
                      cell(rs, lambda r: r.get("guest_worst_stall_ms")),
                      cell(rs, lambda r: r.get("full_speed_s"), 1e6),
                      cell(rs, blocktime),
                      cell(rs, lambda r: r.get("qemu_fault_p50_us"), 1),
                      cell(rs, mean_by_request),
                      fmt(median(r.get("postcopy_requests") for r in rs)),
                      ratio_cell(rs, per_huge_page), arrivals(rs),
                      cpu_cell(rs)))
    return out


# How each series is drawn, so that every line of a panel (one network)
# has a colour and a marker of its own, and a scenario looks the same in
# every panel: per scenario a pair of shades of one colour (light without
# preempt, dark with it) and a marker (gnuplot point type: open without
# preempt, filled with it, which is the next type); without preempt the
# line is dashed.
STYLES = {
    "anon-4k": ("#6baed6", "#08519c", 4),            # blue, square
    "hugetlbfs-2m": ("#fd8d3c", "#a63603", 6),       # orange, circle
    "thp": ("#74c476", "#006d2c", 8),                # green, triangle
    "thp-hgm": ("#fb6a4a", "#a50f15", 10),           # red, triangle down
    "hugetlbfs-2m-hgm": ("#9e9ac8", "#54278f", 12),  # purple, diamond
    "hugetlbfs-1g": ("#969696", "#252525", 14),      # grey, pentagon
    "hugetlbfs-1g-hgm": ("#f768a1", "#ae017e", 2),   # pink, cross
    "memfd-hgm": ("#bcbd22", "#17becf", 1),          # olive/cyan, plus
}


def variants(results):
    """For each result (by id), which of the builds and prefetch sizes of
    its scenario it ran with, 0 for the first: lines of one scenario that
    differ in those get dash patterns of their own."""
    seen, out = {}, {}
    for r in results:
        kinds = seen.setdefault((r["scenario"], r["preempt"]), [])
        kind = (r.get("build"), r.get("prefetch"))
        if kind not in kinds:
            kinds.append(kind)
        out[id(r)] = kinds.index(kind)
    return out


def style(r, points=True, variant=0):
    """gnuplot style of the line of result @r (with its points), the
    @variant-th build or prefetch size of its scenario."""
    light, dark, pt = STYLES.get(r["scenario"], ("#bcbd22", "#17becf", 2))
    # Without preempt wide and dashed, with it narrow and solid on top:
    # where two lines coincide, both stay visible
    return "lw %g lc rgb '%s'%s dt %d" % (
        1.5 if r["preempt"] else 4, dark if r["preempt"] else light,
        " pt %d ps 1.3" % (pt + (1 if r["preempt"] else 0)) if points else "",
        (1 if r["preempt"] else 2) + 2 * variant)


def time_label(us, micro):
    """@us µs as gnuplot's tic label: '10 µs', '1 ms', '1 s'."""
    for unit, scale in (("s", 1e6), ("ms", 1e3)):
        if us >= scale:
            return "%g %s" % (us / scale, unit)
    return "%g %s" % (us, micro)


def series_title(r, what):
    """The legend entry of result @r, with @what in brackets."""
    return ("%s%s%s (%s)" % (
        r["label"], " [%s]" % r["build"] if r.get("build") else "",
        ", preempt" if r["preempt"] else "", what)).replace("'", "")


def legends(rs, what, fmt):
    """gnuplot's title of each line of results @rs (by id): the first run
    of a scenario over a network names it in that network's panel, with
    @what of each of its runs in @fmt; a repeated run has none (and the
    same style)."""
    groups, out = {}, {}
    for r in rs:
        groups.setdefault((series_title(r, ""), r["network"]), []).append(r)
    for g in groups.values():
        out[id(g[0])] = "title '%s'" % series_title(
            g[0], fmt % ", ".join(what(r) for r in g))
        out.update((id(r), "notitle") for r in g[1:])
    return out


def timeline_panels(doc, first):
    """gnuplot data blocks (named from $t@first on) and panels of the
    guest's speed through the migration, one panel per network: its
    accesses per second relative to those of the last 2 s of precopy,
    one line per result.  (data, panels)"""
    data, panels, nets = [], [], {}
    var = variants(doc["results"])
    legend = legends(doc["results"],
                     lambda r: "%.2f" % r.get("postcopy_s", 0), "postcopy %s s")
    for r in doc["results"]:
        base = precopy_speed(r.get("timeline"))
        if not base:
            continue
        i = first + len(data) // 3
        data += ["$t%d << EOD" % i,
                 "\n".join("%g %g" % (x, v / base) for x, v in r["timeline"]),
                 "EOD"]
        nets.setdefault(r["network"], []).append(
            "$t%d using 1:2 with lines %s %s" % (
                i, style(r, False, var[id(r)]), legend[id(r)]))
    for net, plots in nets.items():
        panels.append("set title 'Guest speed, %s: accesses per 100 ms,"
                      " share of those in precopy' noenhanced"
                      "\nplot %s" % (net, ", ".join(plots)))
    return data, panels


def plot(doc, png):
    """Fault latency CDF per scenario (log x axis), and the guest's speed
    through the migration, with gnuplot: a panel of each per network.
    None, or why there is no plot."""
    gp = shutil.which("gnuplot")
    if not gp:
        return "gnuplot not installed"
    series = [r for r in doc["results"]
              if r.get("qemu_fault_hist_us_log2")
              and sum(r["qemu_fault_hist_us_log2"])]
    nets = []
    for r in series:
        if r["network"] not in nets:
            nets.append(r["network"])
    if not nets:
        return "nothing to plot"
    cairo = "pngcairo" in subprocess.run([gp, "-e", "set terminal"],
                                         capture_output=True, text=True).stderr
    micro = "µs" if cairo else "us"     # gd's png terminal lacks µ
    # Each point: the upper bound of a bucket (µs) and the share of the
    # faults up to there, from the first bucket with faults to the last.
    # QEMU's last bucket is open (at least LAST_BUCKET_US, no upper
    # bound): its faults are drawn at that lower bound, marked, and
    # labelled as such.  The x axis spans the buckets with faults.
    data, labels, xmin, xmax = [], [], None, 1
    for i, r in enumerate(series):
        hist = r["qemu_fault_hist_us_log2"]
        total, seen = sum(hist), 0
        first = next(b for b, n in enumerate(hist) if n)
        last = max(b for b, n in enumerate(hist) if n)
        open_last = last == len(hist) - 1
        data.append("$d%d << EOD" % i)
        for b in range(first, last + 1):
            seen += hist[b]
            x = LAST_BUCKET_US if b == len(hist) - 1 else 2 ** (b + 1)
            data.append("%g %g" % (x, seen / total))
        data.append("EOD")
        if open_last:
            labels.append("set label '%d ≥ %s' at %g,%g point pt 7 ps 2 "
                          "offset -12,-1 noenhanced" % (
                              hist[-1], time_label(LAST_BUCKET_US, micro),
                              LAST_BUCKET_US, 1.0))
        lo = 2 ** first if first else 1
        xmin = lo if xmin is None else min(xmin, lo)
        xmax = max(xmax, LAST_BUCKET_US if open_last else 2 ** (last + 1))
    tics = []
    t = 1
    while t <= xmax * 10:
        if xmin / 10 < t <= xmax * 10:
            tics.append('"%s" %g' % (time_label(t, micro), t))
        t *= 10
    panels, var = [], variants(series)
    legend = legends(series, lambda r: "%d" % sum(
        r["qemu_fault_hist_us_log2"]), "%s faults")
    for net in nets:
        plots = ["$d%d using 1:2 with linespoints %s %s" % (
            i, style(r, True, var[id(r)]), legend[id(r)])
            for i, r in enumerate(series) if r["network"] == net]
        title = ("Fault latency (QEMU), CDF, %s: guest %d MiB,"
                 " %d MiB %s on %d vCPUs, %s" % (
                     net, doc["guest_mb"], doc["workload_mb"], doc["mode"],
                     doc["vcpus"], doc["accel"]))
        panels.append("set title '%s' noenhanced\nplot %s" % (
            title.replace("'", ""), ", ".join(plots)))
    tdata, tpanels = timeline_panels(doc, len(series))
    if tpanels:
        # Linear axes from here on: seconds since the switchover
        tpanels[0] = "\n".join([
            "unset logscale x", "set xrange [-2:*]", "set xtics auto",
            "set yrange [0:2.5]", "unset label",
            "set xlabel 'seconds since the switchover (the start of"
            " postcopy)'",
            "set ylabel 'accesses per second, share of precopy'",
            tpanels[0]])
    panels += tpanels
    script = "\n".join(data + tdata + [
        "set encoding utf8",
        "set terminal %s size 1400,%d" % ("pngcairo" if cairo else "png",
                                          520 * len(panels)),
        "set output '%s'" % png, "set multiplot layout %d,1" % len(panels),
        "set logscale x 10", "set xrange [%g:%g]" % (xmin, xmax * 2),
        "set xtics (%s)" % ", ".join(tics), "set key noenhanced",
        "set xlabel 'page fault latency during postcopy (log2 buckets, each"
        " at its upper bound)'",
        "set ylabel 'share of faults'", "set key outside right",
        "set grid", "set yrange [0:1.05]"] + labels + panels +
        ["unset multiplot"])
    subprocess.run([gp], input=script, text=True, check=True)
    return None
