#!/usr/bin/python3
"""Taranov et al., "Efficient RDMA Communication Protocols", Figures 8-10 on rnicsim.

Runs the sweeps (rnicsim sweep over scenarios/taranov/fig8*, fig9*, fig10*),
prints the numbers as markdown tables (docs/taranov-eval-b.md quotes them)
and draws docs/taranov/fig8.png, fig9.png, fig10.png.

    /usr/bin/python3 tools/plot_taranov_b.py [--rnicsim build/rnicsim] [--out docs/taranov]
        [--work /tmp/taranov-b] [--only 8,9,10] [-j 2]

Figure 8:  shared ring (inlined bell), 1 client, head/tail in host vs device
           memory: round-trip latency (ping-pong) and stream rate vs size.
Figure 9:  (a) cumulative rate of the shared ring with 1, 2, 4, 8 clients,
           counters in host vs device memory; (b) read rings with 4 readers
           when scenarios/taranov/fig9b_*.yaml exist (needs the driver's 1:N).
Figure 10: read ring (inlined bell), prefetch on / off: latency and rate vs
           record size, READs per record, and the prefetch size sweep.
"""
import argparse
import csv
import glob
import json
import os
import subprocess
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCN = os.path.join(ROOT, "scenarios", "taranov")

FIG8_SIZES = [24, 64, 256, 1024, 4096]
FIG9_CLIENTS = [1, 2, 4, 8]
FIG10_SIZES = [24, 64, 256, 1024, 4096]
FIG10_CHUNKS = [64, 256, 1024, 4096, 8192]


def sweep(args, scenario, sets, tag):
    """rnicsim sweep; returns a list of (row dict, results json) per run."""
    out = os.path.join(args.work, tag)
    cmd = [args.rnicsim, "sweep", scenario, "-o", out, "-j", str(args.jobs)]
    for s in sets:
        cmd += ["--set", s]
    print("$ " + " ".join(os.path.relpath(c, ROOT) if c.startswith(ROOT) else c for c in cmd),
          file=sys.stderr)
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        sys.exit("sweep failed (%d): %s\n%s" % (r.returncode, " ".join(cmd), r.stderr + r.stdout))
    rows = []
    with open(os.path.join(out, "sweep.csv")) as f:
        for row in csv.DictReader(f):
            with open(os.path.join(out, "run-%s.json" % row["run"])) as j:
                rows.append((row, json.load(j)))
    for row, _ in rows:
        if row["exit"] != "0" or row["result"] != "done":
            sys.exit("run %s of %s: exit %s, %s" % (row["run"], tag, row["exit"], row["result"]))
    return rows


def f(row, key):
    return float(row[key])


def nic(js, host, key):
    return js["counters"]["hosts"][host]["nic"][key]


def md_table(head, rows):
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for r in rows:
        print("| " + " | ".join(str(x) for x in r) + " |")
    print()


def fig8(args):
    scn = os.path.join(SCN, "fig8_shared_ring_dm.yaml")
    sizes = ",".join(str(s) for s in FIG8_SIZES)
    lat = sweep(args, scn, ["vars.dm=0,1", "vars.size=" + sizes, "vars.mode=pingpong",
                            "vars.messages=200"], "fig8-lat")
    thr = sweep(args, scn, ["vars.dm=0,1", "vars.size=" + sizes, "vars.mode=stream",
                            "vars.messages=2000"], "fig8-thr")
    res = {}
    for row, _ in lat:
        res.setdefault((row["vars.dm"], int(row["vars.size"])), {})["rtt"] = f(
            row, "taranov_pingpong.rtt_p50_us")
    for row, _ in thr:
        d = res.setdefault((row["vars.dm"], int(row["vars.size"])), {})
        d["mpps"] = f(row, "taranov_stream.msg_rate_mpps")
        d["gbps"] = f(row, "taranov_stream.gbps")
    print("### Figure 8 (shared ring inlined, 1 client)\n")
    md_table(["size (B)", "RTT p50 host (us)", "RTT p50 device (us)", "saved (us)",
              "rate host (M/s)", "rate device (M/s)", "device / host"],
             [(s, "%.2f" % res[("0", s)]["rtt"], "%.2f" % res[("1", s)]["rtt"],
               "%.2f" % (res[("0", s)]["rtt"] - res[("1", s)]["rtt"]),
               "%.3f" % res[("0", s)]["mpps"], "%.3f" % res[("1", s)]["mpps"],
               "%.2f" % (res[("1", s)]["mpps"] / res[("0", s)]["mpps"])) for s in FIG8_SIZES])
    fig, ax = plt.subplots(1, 2, figsize=(8, 3.2))
    for dm, lab, m in (("0", "head+tail in host memory", "o-"), ("1", "head+tail in device memory", "s-")):
        ax[0].plot(FIG8_SIZES, [res[(dm, s)]["rtt"] for s in FIG8_SIZES], m, label=lab)
        ax[1].plot(FIG8_SIZES, [res[(dm, s)]["mpps"] for s in FIG8_SIZES], m, label=lab)
    ax[0].set_ylabel("round-trip latency p50 (us)")
    ax[1].set_ylabel("throughput (M msg/s)")
    for a in ax:
        a.set_xscale("log", base=2)
        a.set_xlabel("message size (B)")
        a.grid(alpha=0.3)
        a.set_ylim(bottom=0)
    ax[0].legend(fontsize=8)
    fig.suptitle("Fig. 8: shared ring (inlined bell), 1 client, cx5-100g (rnicsim)", fontsize=10)
    fig.tight_layout()
    fig.savefig(os.path.join(args.out, "fig8.png"), dpi=90)
    plt.close(fig)


def fig9(args):
    res = {}
    for n in FIG9_CLIENTS:
        rows = sweep(args, os.path.join(SCN, "fig9a_shared_ring_c%d.yaml" % n),
                     ["vars.dm=0,1", "vars.size=64,1024"], "fig9a-c%d" % n)
        for row, _ in rows:
            res[(n, row["vars.dm"], int(row["vars.size"]))] = (
                f(row, "taranov_stream.msg_rate_mpps"), f(row, "taranov_stream.gbps"))
    print("### Figure 9a (shared ring inlined, N clients, cumulative at the receiver)\n")
    md_table(["clients", "64 B host (M/s)", "64 B device (M/s)", "device / host",
              "1 KiB host (Gb/s)", "1 KiB device (Gb/s)"],
             [(n, "%.2f" % res[(n, "0", 64)][0], "%.2f" % res[(n, "1", 64)][0],
               "%.2f" % (res[(n, "1", 64)][0] / res[(n, "0", 64)][0]),
               "%.1f" % res[(n, "0", 1024)][1], "%.1f" % res[(n, "1", 1024)][1])
              for n in FIG9_CLIENTS])
    b_files = sorted(glob.glob(os.path.join(SCN, "fig9b_*.yaml")))
    bres = {}
    for fb in b_files:
        name = os.path.basename(fb)[len("fig9b_"):-len(".yaml")]
        rows = sweep(args, fb, ["vars.size=64,1024"], "fig9b-" + name)
        for row, js in rows:
            readers = js["tables"]["taranov_stream"]  # one row per reader
            if len(readers) != 4:
                sys.exit("%s: %d reader rows, expected 4" % (fb, len(readers)))
            # cumulative: the sum of what each reader received per second
            bres[(name, int(row["vars.size"]))] = (sum(r["msg_rate_mpps"] for r in readers),
                                                   sum(r["gbps"] for r in readers))
    if bres:
        print("### Figure 9b (read rings, 4 readers, cumulative)\n")
        names = sorted({k[0] for k in bres})
        md_table(["channel", "64 B (M/s)", "1 KiB (M/s)", "1 KiB (Gb/s)"],
                 [(n, "%.2f" % bres[(n, 64)][0], "%.2f" % bres[(n, 1024)][0],
                   "%.2f" % bres[(n, 1024)][1]) for n in names])
    fig, ax = plt.subplots(1, 2 if bres else 1, figsize=(8 if bres else 4.5, 3.2), squeeze=False)
    a = ax[0][0]
    for dm, lab, m in (("0", "head in host memory", "o-"), ("1", "head in device memory", "s-")):
        a.plot(FIG9_CLIENTS, [res[(n, dm, 64)][0] for n in FIG9_CLIENTS], m, label=lab)
    a.set_xlabel("clients")
    a.set_ylabel("cumulative throughput (M msg/s), 64 B")
    a.set_xticks(FIG9_CLIENTS)
    a.set_ylim(bottom=0)
    a.grid(alpha=0.3)
    a.legend(fontsize=8)
    a.set_title("(a) shared ring inlined, N:1", fontsize=9)
    if bres:
        a = ax[0][1]
        names = sorted({k[0] for k in bres})
        w = 0.4
        a.bar([i - w / 2 for i in range(len(names))], [bres[(n, 64)][0] for n in names], w,
              label="64 B")
        a.bar([i + w / 2 for i in range(len(names))], [bres[(n, 1024)][0] for n in names], w,
              label="1 KiB")
        a.set_yscale("log")
        a.legend(fontsize=8)
        a.set_xticks(range(len(names)))
        a.set_xticklabels([n.replace("read_ring_", "").replace("_", "\n") for n in names], fontsize=7)
        a.set_ylabel("cumulative throughput (M msg/s)")
        a.set_title("(b) read rings, 4 readers", fontsize=9)
        a.grid(alpha=0.3, axis="y")
    fig.suptitle("Fig. 9: cumulative throughput, cx5-100g (rnicsim)", fontsize=10)
    fig.tight_layout()
    fig.savefig(os.path.join(args.out, "fig9.png"), dpi=90)
    plt.close(fig)


def fig10(args):
    sizes = ",".join(str(s) for s in FIG10_SIZES)
    res = {}
    for pf in ("off", "on"):
        scn = os.path.join(SCN, "fig10_read_ring_prefetch_%s.yaml" % pf)
        for row, _ in sweep(args, scn, ["vars.size=" + sizes, "vars.mode=pingpong",
                                        "vars.messages=200"], "fig10-lat-" + pf):
            res.setdefault((pf, int(row["vars.size"])), {})["rtt"] = f(
                row, "taranov_pingpong.rtt_p50_us")
        for row, js in sweep(args, scn, ["vars.size=" + sizes, "vars.mode=stream",
                                         "vars.messages=2000"], "fig10-thr-" + pf):
            d = res.setdefault((pf, int(row["vars.size"])), {})
            d["mpps"] = f(row, "taranov_stream.msg_rate_mpps")
            d["gbps"] = f(row, "taranov_stream.gbps")
            # the reader (h1) posts the READs and its tail write-backs
            d["wr_per_msg"] = nic(js, "h1", "wqes_completed") / float(row["taranov_stream.messages"])
    chunks = ",".join(str(c) for c in FIG10_CHUNKS)
    cres = {}
    scn = os.path.join(SCN, "fig10_read_ring_prefetch_on.yaml")
    for row, js in sweep(args, scn, ["vars.maxsize=" + chunks, "vars.mode=stream",
                                     "vars.messages=2000"], "fig10-chunk-thr"):
        cres.setdefault(int(row["vars.maxsize"]), {})["mpps"] = f(row, "taranov_stream.msg_rate_mpps")
        cres[int(row["vars.maxsize"])]["wr_per_msg"] = nic(js, "h1", "wqes_completed") / float(
            row["taranov_stream.messages"])
    for row, _ in sweep(args, scn, ["vars.maxsize=" + chunks, "vars.mode=pingpong",
                                    "vars.messages=200"], "fig10-chunk-lat"):
        cres[int(row["vars.maxsize"])]["rtt"] = f(row, "taranov_pingpong.rtt_p50_us")
    print("### Figure 10 (read ring inlined, prefetch off / on; chunk 4096 B)\n")
    md_table(["size (B)", "RTT p50 off (us)", "RTT p50 on (us)", "rate off (M/s)", "rate on (M/s)",
              "Gb/s off", "Gb/s on", "reader WRs/msg off", "reader WRs/msg on"],
             [(s, "%.2f" % res[("off", s)]["rtt"], "%.2f" % res[("on", s)]["rtt"],
               "%.3f" % res[("off", s)]["mpps"], "%.3f" % res[("on", s)]["mpps"],
               "%.2f" % res[("off", s)]["gbps"], "%.2f" % res[("on", s)]["gbps"],
               "%.2f" % res[("off", s)]["wr_per_msg"], "%.2f" % res[("on", s)]["wr_per_msg"])
              for s in FIG10_SIZES])
    print("### Figure 10, prefetch size (64 B records, prefetch on)\n")
    md_table(["prefetch chunk (B)", "RTT p50 (us)", "rate (M/s)", "reader WRs/msg"],
             [(c, "%.2f" % cres[c]["rtt"], "%.3f" % cres[c]["mpps"], "%.3f" % cres[c]["wr_per_msg"])
              for c in FIG10_CHUNKS])
    fig, ax = plt.subplots(1, 3, figsize=(11, 3.2))
    for pf, lab, m in (("off", "no prefetch", "o-"), ("on", "prefetch 4 KiB", "s-")):
        ax[0].plot(FIG10_SIZES, [res[(pf, s)]["rtt"] for s in FIG10_SIZES], m, label=lab)
        ax[1].plot(FIG10_SIZES, [res[(pf, s)]["gbps"] for s in FIG10_SIZES], m, label=lab)
    ax[0].set_ylabel("round-trip latency p50 (us)")
    ax[1].set_ylabel("throughput (Gb/s)")
    ax[1].set_yscale("log")
    for a in ax[:2]:
        a.set_xscale("log", base=2)
        a.set_xlabel("record size (B)")
        a.grid(alpha=0.3)
    ax[0].set_ylim(bottom=0)
    ax[0].legend(fontsize=8)
    a = ax[2]
    a.plot(FIG10_CHUNKS, [cres[c]["mpps"] for c in FIG10_CHUNKS], "s-", label="rate (M msg/s)")
    a.set_xscale("log", base=2)
    a.set_xlabel("prefetch chunk (B), 64 B records")
    a.set_ylabel("throughput (M msg/s)")
    a.grid(alpha=0.3)
    a2 = a.twinx()
    a2.plot(FIG10_CHUNKS, [cres[c]["rtt"] for c in FIG10_CHUNKS], "^--", color="C3",
            label="RTT p50 (us)")
    a2.set_ylabel("round-trip latency p50 (us)", color="C3")
    a2.set_ylim(bottom=0)
    a.set_ylim(bottom=0)
    fig.suptitle("Fig. 10: read ring (inlined bell) prefetching, cx5-100g (rnicsim)", fontsize=10)
    fig.tight_layout()
    fig.savefig(os.path.join(args.out, "fig10.png"), dpi=90)
    plt.close(fig)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--rnicsim", default=os.path.join(ROOT, "build", "rnicsim"))
    p.add_argument("--out", default=os.path.join(ROOT, "docs", "taranov"))
    p.add_argument("--work", default="/tmp/taranov-b")
    p.add_argument("--only", default="8,9,10")
    p.add_argument("-j", "--jobs", type=int, default=2)
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    os.makedirs(args.work, exist_ok=True)
    only = {int(x) for x in args.only.split(",")}
    if 8 in only:
        fig8(args)
    if 9 in only:
        fig9(args)
    if 10 in only:
        fig10(args)


if __name__ == "__main__":
    main()
