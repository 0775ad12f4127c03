#!/usr/bin/python3
"""Plots of the RIMA performance study (docs/rima-perf.md) from the
sweep.csv files of `rnicsim sweep`:

  plot_rima_perf.py table5 out/t5/sweep.csv -o docs/rima/fastkv_table5.png
      FastKV per-client throughput of srq (footprint-priority) and rima vs
      the number of servers, and srq normalised to rima (Table 5).
  plot_rima_perf.py table6 out/t6/sweep.csv -o docs/rima/largemsg_latency.png
      latency p50/p96/p99/p99.9 of large (> 1 KiB) and all requests, and the
      receive footprint per transport (Table 6 rows 3-5 vs RIMA).
  plot_rima_perf.py tpt out/tpt/sweep.csv -o docs/rima/tpt_latency.png
      mean request latency of SEND and append vs rima.tpt_latency.

Also prints the numbers it plots (the tables of docs/rima-perf.md).
Run with /usr/bin/python3 (matplotlib)."""
import argparse
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def rows(path):
    with open(path, newline="") as f:
        out = [r for r in csv.DictReader(f)]
    bad = [r for r in out if r.get("exit") not in ("0", None)]
    if bad:
        sys.exit(f"{path}: {len(bad)} failed run(s), e.g. run {bad[0].get('run')}")
    return out


def num(r, k):
    v = r.get(k, "")
    if v == "":
        sys.exit(f"column {k} missing (is this the right sweep?)")
    return float(v)


def table5(path, out):
    rs = rows(path)
    by = {}
    for r in rs:
        n = int(r["vars.n"])
        t = r["vars.transport"]
        feas = num(r, "fastkv.feasible")
        by[(t, n)] = num(r, "fastkv.mrps") / num(r, "fastkv.clients") if feas else 0.0
    ns = sorted({n for (_, n) in by})
    fig, (a, b) = plt.subplots(1, 2, figsize=(9, 3.4))
    for t, m in (("srq", "o-"), ("rima", "s-")):
        a.plot(ns, [by.get((t, n), 0) for n in ns], m, label=f"FastKV-{'RDMA (SRQ)' if t == 'srq' else 'RIMA'}")
    a.set_xscale("log", base=2)
    a.set_xlabel("servers = clients")
    a.set_ylabel("per-client throughput (Mreq/s)")
    a.set_title("fixed 16 MiB footprint per server")
    a.legend()
    norm = [100 * by[("srq", n)] / by[("rima", n)] for n in ns]
    b.plot(ns, norm, "o-", label="rnicsim (n / 16 of the paper's scale)")
    paper_n = [4, 8, 16]  # the paper's 64, 128, 256 servers, scaled by 1/16
    b.plot(paper_n, [21, 11, 5.2], "x--", label="paper Table 5 (64/128/256)")
    b.set_xscale("log", base=2)
    b.set_xlabel("servers = clients")
    b.set_ylabel("SRQ throughput / RIMA (%)")
    b.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=90)
    print("n  srq_mreq_per_client  rima_mreq_per_client  srq/rima_%")
    for n, v in zip(ns, norm):
        print(f"{n:<3}{by[('srq', n)]:<21.3f}{by[('rima', n)]:<22.3f}{v:.1f}")


def table6(path, out):
    rs = rows(path)
    order = ["split-alloc", "split-faa", "split-presend", "rima", "rima-sw"]
    rs = sorted(rs, key=lambda r: order.index(r["vars.transport"]) if r["vars.transport"] in order else 99)
    names = [r["vars.transport"] for r in rs]
    fig, (a, b, c) = plt.subplots(1, 3, figsize=(12, 3.6))
    pcts = [("p50", "_p50_us"), ("p96", "_p96_us"), ("p99", "_p99_us"), ("p99.9", "_p999_us")]
    x = range(len(rs))
    w = 0.2
    for ax, pre, title in ((a, "fastkv.large", "large (> 1 KiB) requests"), (b, "fastkv.lat", "all requests")):
        for i, (lab, suf) in enumerate(pcts):
            ax.bar([k + (i - 1.5) * w for k in x], [num(r, pre + suf) for r in rs], w, label=lab)
        ax.set_yscale("log")
        ax.set_xticks(list(x))
        ax.set_xticklabels(names, rotation=20, fontsize=8)
        ax.set_ylabel("latency (us)")
        ax.set_title(title)
    a.legend(fontsize=8)
    c.bar(list(x), [num(r, "fastkv.footprint_bytes") / 2**20 for r in rs], 0.6)
    c.set_xticks(list(x))
    c.set_xticklabels(names, rotation=20, fontsize=8)
    c.set_ylabel("receive footprint per server (MiB)")
    c.set_title("footprint")
    fig.tight_layout()
    fig.savefig(out, dpi=80)
    print("transport      large_p50 large_p96 large_p99 large_p99.9 | all_p50 all_p96 all_p99 all_p99.9 | footprint_MiB mreq/s")
    for r in rs:
        print(f"{r['vars.transport']:<15}" + " ".join(f"{num(r, 'fastkv.large' + s):9.1f}" for _, s in pcts)
              + " | " + " ".join(f"{num(r, 'fastkv.lat' + s):7.1f}" for _, s in pcts)
              + f" | {num(r, 'fastkv.footprint_bytes') / 2**20:10.3f} {num(r, 'fastkv.mrps'):.3f}")


def tpt(path, out):
    rs = rows(path)

    def ns(v):
        v = v.strip()
        for suf, mul in (("ns", 1), ("us", 1e3), ("ps", 1e-3)):
            if v.endswith(suf):
                return float(v[: -len(suf)]) * mul
        return float(v)

    by = {}
    for r in rs:
        by[(r["vars.transport"], ns(r["hardware.rima.tpt_latency"]))] = num(r, "fastkv.lat_avg_us") * 1e3
    xs = sorted({x for (_, x) in by})
    fig, ax = plt.subplots(figsize=(5, 3.4))
    for t, m, lab in (("srq", "o-", "SEND (SRQ)"), ("rima", "s-", "append (RIMA)")):
        ax.plot(xs, [by[(t, x)] for x in xs], m, label=lab)
    ax.set_xscale("symlog", linthresh=1)
    ax.set_xlabel("rima.tpt_latency (ns)")
    ax.set_ylabel("mean request latency (ns)")
    ax.set_title("TPT lookup cost, window 1, 96-B requests")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out, dpi=90)
    print("tpt_ns  send_ns   append_ns  append-send_ns")
    for x in xs:
        print(f"{x:<8g}{by[('srq', x)]:<10.1f}{by[('rima', x)]:<11.1f}{by[('rima', x)] - by[('srq', x)]:.1f}")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("what", choices=["table5", "table6", "tpt"])
    p.add_argument("csv")
    p.add_argument("-o", "--output", required=True)
    a = p.parse_args()
    {"table5": table5, "table6": table6, "tpt": tpt}[a.what](a.csv, a.output)


if __name__ == "__main__":
    main()
