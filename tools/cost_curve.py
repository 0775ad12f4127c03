#!/usr/bin/python3
"""The cost curve of docs/performance.md: CPU time and peak RSS of whole
`rnicsim run`s against hosts and against QPs per host.

    tools/cost_curve.py [--rnicsim BUILD/rnicsim] [--reps N] [--out DIR] [--quick]

Three series, each point the median of N runs (default 3) of one child
process (CPU = user + system from wait4, peak RSS = its ru_maxrss):

  setup   the permutation leaf-spine (16 hosts per leaf, 16 spines) with a
          4 KiB flow per host: building the fabric, NICs and routes, then
          tearing down; hosts 256 .. 4096
  hosts   the same fabric, 256 KiB per host (total traffic grows with
          hosts, traffic per host fixed); hosts 64 .. 4096
  qps     128 hosts x 1 MiB split over 1 .. 64 QPs per host (the same
          total traffic over more, smaller flows)

Writes DIR/cost_curve.csv (series, hosts, qps_per_host, bytes_per_host,
events, cpu_s, peak_rss_mb, cpu_us_per_host, rss_kb_per_host) and, when
matplotlib imports, DIR/cost_curve.png.  DIR defaults to docs/performance
of the source tree.  --quick: one run per point and the smaller points
only (a check that the script works, not a measurement).
Exit status: 0 written, 1 a run failed, 2 bad arguments.
"""
import argparse
import csv
import os
import re
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SCENARIO = os.path.join(ROOT, "scenarios", "fabric", "permutation.yaml")


def run_wait4(argv):
    """CPU seconds (user + system), peak RSS (MB) and events of one run."""
    pid = os.fork()
    if pid == 0:
        fd = os.open("/tmp/cost_curve.%d.out" % os.getpid(), os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.execv(argv[0], argv)
    _, status, ru = os.wait4(pid, 0)
    path = "/tmp/cost_curve.%d.out" % pid
    with open(path) as f:
        text = f.read()
    os.unlink(path)
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError("%s: exit %d\n%s" % (" ".join(argv), os.waitstatus_to_exitcode(status), text))
    m = re.search(r"simulated [^,]+, (\d+) events", text)
    events = int(m.group(1)) if m else 0
    return ru.ru_utime + ru.ru_stime, ru.ru_maxrss / 1024.0, events


def shape(hosts):
    return ["topology.leaves=%d" % max(1, hosts // 16), "topology.spines=16",
            "topology.hosts_per_leaf=%d" % min(16, hosts)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rnicsim", default=os.path.join(ROOT, "build", "rnicsim"))
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "performance"))
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    if a.reps < 1 or not os.access(a.rnicsim, os.X_OK):
        print("cost_curve.py: need --reps >= 1 and an executable --rnicsim", file=sys.stderr)
        return 2
    reps = 1 if a.quick else a.reps
    hosts = [64, 128, 256] if a.quick else [64, 128, 256, 512, 1024, 2048, 4096]
    qps = [1, 4] if a.quick else [1, 2, 4, 8, 16, 32, 64]
    points = []
    for h in [x for x in hosts if x >= 256]:
        points.append(("setup", h, 1, 4096, shape(h) + ["traffic.size=4KiB"]))
    for h in hosts:
        points.append(("hosts", h, 1, 256 << 10, shape(h) + ["traffic.size=256KiB"]))
    for q in qps:
        points.append(("qps", 128, q, 1 << 20, shape(128) + ["traffic.size=1MiB",
                                                            "traffic.qps_per_host=%d" % q]))
    rows = []
    for series, h, q, size, sets in points:
        cpu, rss, ev = [], [], 0
        for _ in range(reps):  # runs of one point back to back, points in order
            try:
                c, r, ev = run_wait4([a.rnicsim, "run", SCENARIO] +
                                     [x for s in sets for x in ("--set", s)])
            except RuntimeError as e:
                print("cost_curve.py: %s" % e, file=sys.stderr)
                return 1
            cpu.append(c)
            rss.append(r)
        c, r = statistics.median(cpu), statistics.median(rss)
        rows.append({"series": series, "hosts": h, "qps_per_host": q, "bytes_per_host": size,
                     "events": ev, "cpu_s": "%.3f" % c, "peak_rss_mb": "%.1f" % r,
                     "cpu_us_per_host": "%.1f" % (c * 1e6 / h),
                     "rss_kb_per_host": "%.1f" % (r * 1024 / h)})
        print("%-6s hosts %5d qps %3d: %8d events, CPU %.3f s, peak RSS %.1f MB" %
              (series, h, q, ev, c, r), flush=True)
    os.makedirs(a.out, exist_ok=True)
    path = os.path.join(a.out, "cost_curve.csv")
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
        w.writeheader()
        w.writerows(rows)
    print("wrote", path)
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("cost_curve.py: matplotlib not importable, no plot", file=sys.stderr)
        return 0
    fig, ax = plt.subplots(1, 3, figsize=(15, 4.5))
    for series, label in (("setup", "set-up (4 KiB per host)"), ("hosts", "256 KiB per host")):
        pts = [r for r in rows if r["series"] == series]
        x = [r["hosts"] for r in pts]
        ax[0].plot(x, [float(r["cpu_s"]) for r in pts], "o-", label=label)
        ax[1].plot(x, [float(r["peak_rss_mb"]) for r in pts], "o-", label=label)
        if series == "hosts" and pts:  # the line through the smallest point, x hosts
            k = float(pts[0]["cpu_s"]) / pts[0]["hosts"]
            ax[0].plot(x, [k * h for h in x], ":", color="grey", label="linear from 64 hosts")
    for i, what in ((0, "CPU time [s]"), (1, "peak RSS [MB]")):
        ax[i].set_xscale("log", base=2)
        ax[i].set_yscale("log")
        ax[i].set_xlabel("hosts (leaf-spine, 16 per leaf, 16 spines)")
        ax[i].set_ylabel(what)
        ax[i].grid(True, which="both", alpha=0.3)
        ax[i].legend()
    pts = [r for r in rows if r["series"] == "qps"]
    x = [r["qps_per_host"] for r in pts]
    ax[2].plot(x, [float(r["cpu_s"]) for r in pts], "o-", label="CPU [s]")
    ax2 = ax[2].twinx()
    ax2.plot(x, [float(r["peak_rss_mb"]) for r in pts], "s--", color="tab:red", label="peak RSS [MB]")
    ax[2].set_xscale("log", base=2)
    ax[2].set_xlabel("QPs per host (128 hosts x 1 MiB in total per host)")
    ax[2].set_ylabel("CPU time [s]")
    ax2.set_ylabel("peak RSS [MB]")
    ax[2].grid(True, alpha=0.3)
    ax[2].legend(loc="upper left")
    ax2.legend(loc="lower right")
    fig.suptitle("rnicsim cost: medians of %d runs (tools/cost_curve.py)" % reps)
    fig.tight_layout()
    png = os.path.join(a.out, "cost_curve.png")
    fig.savefig(png, dpi=90)
    print("wrote", png)
    return 0


if __name__ == "__main__":
    sys.exit(main())
