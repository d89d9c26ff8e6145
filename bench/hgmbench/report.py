"""The results of a run: <out>/<date>-<host>.json (everything measured),
.md (a table) and .png (QEMU's fault latency CDF, drawn with gnuplot)."""
import json
import os
import shutil
import socket
import subprocess
import tempfile


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
    base = os.path.join(out, "%s-%s" % (now.strftime("%Y-%m-%d"),
                                        doc["host"]))
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
