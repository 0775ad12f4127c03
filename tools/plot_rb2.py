#!/usr/bin/env python3
"""Plots and tables of the RB² evaluation (docs/rb2.md) from `rnicsim sweep`
output directories (their sweep.csv).

  tools/plot_rb2.py fig5 F5_DIR RAW_DIR [-o fig5.png] [--table]
  tools/plot_rb2.py fig6 F6_DIR RAW_DIR [-o fig6.png] [--table]
  tools/plot_rb2.py fig3 F3_BW_DIR F3_PINGPONG_DIR [-o fig3.png] [--table]
  tools/plot_rb2.py fig7 F7_BW_DIR F7_PINGPONG_DIR [-o fig7.png] [--table]
  tools/plot_rb2.py table2 T2_DIR [T2_M8_DIR]                  (a table)
  tools/plot_rb2.py cases NF_DIR DB_DIR HTTP_DIR              (a table)

F5_DIR etc. are made by the commands in the scenarios' headers
(scenarios/rb2/*.yaml); each may be several directories joined by commas.  --table prints the numbers; -o writes a PNG."""
import argparse
import csv
import os
import sys


def rows(d):
    """The successful runs of a sweep directory, or of several joined by
    commas (one figure's points swept in parts, e.g. with more round trips
    at small sizes)."""
    out = []
    for part in d.split(","):
        with open(os.path.join(part, "sweep.csv")) as f:
            out += [r for r in csv.DictReader(f) if r.get("exit") == "0"]
    for r in out:  # a size set to one value is not a column of its sweep
        if not r.get("vars.size"):
            for k in ("rb2_bw.size_bytes", "rb2_pingpong.size_bytes"):
                if r.get(k):
                    r["vars.size"] = str(int(float(r[k])))
                    break
    return out


def num(r, k):
    v = r.get(k, "")
    return float(v) if v not in ("", None) else None


def series(rs, key, x, y, scale=1.0):
    out = {}
    for r in rs:
        v = num(r, y)
        if v is None:
            continue
        out.setdefault(r[key], []).append((float(r[x]), v * scale))
    return {k: sorted(v) for k, v in out.items()}


def plot(panels, out, title):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 3.8))
    if len(panels) == 1:
        axes = [axes]
    for ax, (ptitle, data, xlabel, ylabel, logx, logy) in zip(axes, panels):
        for name, pts in data.items():
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=name)
        if logx:
            ax.set_xscale("log", base=2)
        if logy:
            ax.set_yscale("log")
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.set_title(ptitle)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def table(data, xname):
    xs = sorted({p[0] for pts in data.values() for p in pts})
    names = list(data)
    print(xname.ljust(10) + "".join(n.rjust(14) for n in names))
    for x in xs:
        line = ("%g" % x).ljust(10)
        for n in names:
            v = dict(data[n]).get(x)
            line += ("%.3g" % v if v is not None else "-").rjust(14)
        print(line)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("what", choices=["fig3", "fig5", "fig6", "fig7", "table2", "cases"])
    ap.add_argument("dirs", nargs="+")
    ap.add_argument("-o", "--output")
    ap.add_argument("--table", action="store_true")
    a = ap.parse_args()
    d = a.dirs
    if a.what == "fig5":
        data = series(rows(d[0]), "vars.variant", "vars.size", "rb2_bw.gbps")
        if len(d) > 1:
            data["raw WRITE"] = series(rows(d[1]), "run", "vars.size", "write_bw.bw_gbps")
            data["raw WRITE"] = sorted(p for v in data["raw WRITE"].values() for p in v)
        panels = [("throughput", data, "message size (B)", "Gb/s", True, False)]
        title = "RB2 Fig. 5: throughput, one thread pair"
    elif a.what == "fig6":
        avg = series(rows(d[0]), "vars.variant", "vars.size", "rb2_pingpong.rtt_avg_us")
        p999 = series(rows(d[0]), "vars.variant", "vars.size", "rb2_pingpong.rtt_p999_us")
        if len(d) > 1:
            raw = rows(d[1])
            avg["raw WRITE"] = sorted(
                (float(r["vars.size"]), 2 * num(r, "write_lat.t_avg_us")) for r in raw)
            p999["raw WRITE"] = sorted(
                (float(r["vars.size"]), 2 * num(r, "write_lat.t_p999_us")) for r in raw)
        panels = [("average RTT", avg, "message size (B)", "us", True, True),
                  ("99.9th percentile RTT", p999, "message size (B)", "us", True, True)]
        data = {("avg " + k): v for k, v in avg.items()}
        data.update({("p99.9 " + k): v for k, v in p999.items()})
        title = "RB2 Fig. 6: ping-pong latency"
    elif a.what == "fig3":
        bw = rows(d[0])
        for r in bw:
            r["combo"] = r["vars.head"] + "+" + r["vars.tail"]
        thr = series(bw, "combo", "vars.size", "rb2_bw.gbps")
        panels = [("(a) throughput", thr, "message size (B)", "Gb/s", True, False)]
        data = {("Gb/s " + k): v for k, v in thr.items()}
        if len(d) > 1:
            pp = rows(d[1])
            for r in pp:
                r["combo"] = r["vars.head"] + "+" + r["vars.tail"]
            avg = series(pp, "combo", "vars.size", "rb2_pingpong.rtt_avg_us")
            p999 = series(pp, "combo", "vars.size", "rb2_pingpong.rtt_p999_us")
            panels += [("(b) average RTT", avg, "message size (B)", "us", True, True),
                       ("(c) 99.9th pct RTT", p999, "message size (B)", "us", True, True)]
            data.update({("avg " + k): v for k, v in avg.items()})
            data.update({("p99.9 " + k): v for k, v in p999.items()})
        title = "RB2 Fig. 3: pointer synchronisation (batching threshold 16)"
    elif a.what == "fig7":
        thr = series(rows(d[0]), "vars.variant", "vars.threads", "rb2_bw.gbps")
        panels = [("throughput, 64 B", thr, "thread pairs", "Gb/s", False, False)]
        data = {("Gb/s " + k): v for k, v in thr.items()}
        if len(d) > 1:
            p999 = series(rows(d[1]), "vars.variant", "vars.threads", "rb2_pingpong.rtt_p999_us")
            panels.append(("99.9th pct RTT, 64 B", p999, "thread pairs", "us", False, False))
            data.update({("p99.9 " + k): v for k, v in p999.items()})
        title = "RB2 Fig. 7: thread pairs"
    elif a.what == "table2":
        rs = rows(d[0])
        m8 = rows(d[1]) if len(d) > 1 else []
        for r in m8:
            r["vars.m"] = "M8 (+host.hugepages=false)"
        print("variant".ljust(28) + "thr 512B".rjust(10) + "thr 1MiB".rjust(10) +
              "RTT 512B".rjust(10) + "RTT 1MiB".rjust(10))
        by = {}
        for r in rs + m8:
            key = (r["vars.size"], r["vars.mode"])
            col = num(r, "rb2_bw.gbps") if r["vars.mode"] == "bw" else num(r, "rb2_pingpong.rtt_avg_us")
            by.setdefault(r["vars.m"], {})[key] = col
        for m, v in by.items():
            cells = [v.get(("512", "bw")), v.get(("1048576", "bw")), v.get(("512", "pingpong")),
                     v.get(("1048576", "pingpong"))]
            print(m.ljust(28) + "".join(("%.1f" % c if c is not None else "-").rjust(10) for c in cells))
        return 0
    else:  # cases
        print("variant".ljust(8) + "NF s/30M".rjust(10) + "DB s/3M".rjust(10) + "HTTP kQPS".rjust(11) +
              "HTTP p99.9".rjust(12))
        nf = {r["vars.variant"]: 30 / num(r, "rb2_bw.mmsgs") for r in rows(d[0])}
        db = {r["vars.variant"]: 3 / num(r, "rb2_rpc.mreq_s") for r in rows(d[1])}
        ht = {r["vars.variant"]: (num(r, "rb2_pingpong.qps") / 1e3, num(r, "rb2_pingpong.rtt_p999_us"))
              for r in rows(d[2])}
        for v in nf:
            print(v.ljust(8) + ("%.2f" % nf[v]).rjust(10) + ("%.2f" % db.get(v, 0)).rjust(10) +
                  ("%.0f" % ht.get(v, (0, 0))[0]).rjust(11) + ("%.2f" % ht.get(v, (0, 0))[1]).rjust(12))
        return 0
    if a.table or not a.output:
        table(data, "x")
    if a.output:
        plot(panels, a.output, title)
    return 0


if __name__ == "__main__":
    sys.exit(main())
