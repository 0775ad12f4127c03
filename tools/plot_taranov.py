#!/usr/bin/env python3
"""Figures 4-7 of Taranov et al., "Efficient RDMA Communication Protocols",
from rnicsim sweeps of scenarios/taranov/fig*.yaml (docs/taranov-eval.md).

  plot_taranov.py fig4 SWEEP.csv -o fig4.png        (fig4_copy.yaml)
  plot_taranov.py fig5 ONE.csv MULTI.csv -o fig5.png (fig5_one_hrt / fig5_multi_hrt)
  plot_taranov.py fig6 SWEEP_DIR -o fig6.png        (fig6_read_ring_cdf.yaml: run-*.json)
  plot_taranov.py fig7 SWEEP.csv -o fig7.png        (fig7_window.yaml)

Add --table to print the plotted numbers as a Markdown table instead of
(or as well as, with -o) plotting.  Run with /usr/bin/python3 (matplotlib)."""
import argparse
import csv
import glob
import json
import os
import sys


def rpc_rows(path):
    """One dict per (run, size): the swept vars plus the taranov_rpc columns."""
    out = []
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            if r.get("exit") != "0":
                print(f"{path}: run {r.get('run')} failed (exit {r.get('exit')}), left out",
                      file=sys.stderr)
                continue
            swept = {k[5:]: v for k, v in r.items() if k.startswith("vars.")}
            i = 0
            while r.get(f"taranov_rpc.size_bytes[{i}]") or (
                    i == 0 and r.get("taranov_rpc.size_bytes")):
                suffix = f"[{i}]" if f"taranov_rpc.size_bytes[{i}]" in r else ""
                row = dict(swept)
                for k, v in r.items():
                    if k.startswith("taranov_rpc.") and k.endswith(suffix):
                        row[k[len("taranov_rpc."):len(k) - len(suffix)]] = float(v)
                out.append(row)
                i += 1
                if not suffix:
                    break
    if not out:
        sys.exit(f"{path}: no taranov_rpc rows")
    return out


def plt_or_none(args):
    if not args.output:
        return None
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def save(plt, fig, path):
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    print(f"wrote {path} ({os.path.getsize(path)} bytes)")


def fig4(args):
    rows = rpc_rows(args.inputs[0])
    label = lambda r: "with copy" if float(r["store"]) > 0 else "zero-copy"
    lat_w = min(float(r["window"]) for r in rows)
    tput_w = max(float(r["window"]) for r in rows)
    if args.table:
        print("| size (B) | RTT p50 zero-copy (us) | RTT p50 copy (us) | p5-p95 copy (us) | "
              f"Mreq/s zero-copy (w={tput_w:g}) | Mreq/s copy |")
        print("|---|---|---|---|---|---|")
        sizes = sorted({r["size_bytes"] for r in rows})
        for s in sizes:
            get = lambda lab, w, col: next(r[col] for r in rows if r["size_bytes"] == s and
                                           label(r) == lab and float(r["window"]) == w)
            print(f"| {s:g} | {get('zero-copy', lat_w, 'rtt_p50_us'):.2f} | "
                  f"{get('with copy', lat_w, 'rtt_p50_us'):.2f} | "
                  f"{get('with copy', lat_w, 'rtt_p5_us'):.2f}-"
                  f"{get('with copy', lat_w, 'rtt_p95_us'):.2f} | "
                  f"{get('zero-copy', tput_w, 'mreq_s'):.3f} | "
                  f"{get('with copy', tput_w, 'mreq_s'):.3f} |")
    plt = plt_or_none(args)
    if not plt:
        return
    fig, (a, b) = plt.subplots(1, 2, figsize=(9, 3.4))
    for lab, style in (("zero-copy", "o-"), ("with copy", "s--")):
        rs = sorted((r for r in rows if label(r) == lab and float(r["window"]) == lat_w),
                    key=lambda r: r["size_bytes"])
        x = [r["size_bytes"] for r in rs]
        y = [r["rtt_p50_us"] for r in rs]
        err = [[r["rtt_p50_us"] - r["rtt_p5_us"] for r in rs],
               [r["rtt_p95_us"] - r["rtt_p50_us"] for r in rs]]
        a.errorbar(x, y, yerr=err, fmt=style, capsize=2, label=lab)
        rs = sorted((r for r in rows if label(r) == lab and float(r["window"]) == tput_w),
                    key=lambda r: r["size_bytes"])
        b.plot([r["size_bytes"] for r in rs], [r["mreq_s"] for r in rs], style, label=lab)
    a.set(xscale="log", xlabel="message size (B)", ylabel="round trip (us), p50 [p5, p95]",
          title=f"latency, {lat_w:g} outstanding")
    b.set(xscale="log", xlabel="message size (B)", ylabel="requests (M/s)",
          title=f"throughput, {tput_w:g} outstanding")
    for ax in (a, b):
        ax.grid(alpha=0.3)
        ax.legend()
    fig.suptitle("send/recv normal, both directions (Taranov Fig 4), rnicsim cx5-100g", fontsize=9)
    save(plt, fig, args.output)


def fig5(args):
    panels = [("one half round trip", rpc_rows(args.inputs[0])),
              ("several half round trips", rpc_rows(args.inputs[1]))]
    if args.table:
        sizes = sorted({r["size_bytes"] for _, rows in panels for r in rows})
        print("| channel | " + " | ".join(f"{s:g} B" for s in sizes) + " |")
        print("|---|" + "---|" * len(sizes))
        for _, rows in panels:
            for ch in dict.fromkeys(r["ch"] for r in rows):
                v = {r["size_bytes"]: r["rtt_p50_us"] for r in rows if r["ch"] == ch}
                print(f"| {ch} | " + " | ".join(f"{v[s]:.2f}" if s in v else "" for s in sizes)
                      + " |")
    plt = plt_or_none(args)
    if not plt:
        return
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6), sharey=True)
    marks = "os^vD<>p*h"
    for ax, (title, rows) in zip(axes, panels):
        for i, ch in enumerate(dict.fromkeys(r["ch"] for r in rows)):
            rs = sorted((r for r in rows if r["ch"] == ch), key=lambda r: r["size_bytes"])
            ax.plot([r["size_bytes"] for r in rs], [r["rtt_p50_us"] for r in rs],
                    marks[i % len(marks)] + "-", ms=4, label=ch)
        ax.set(xscale="log", xlabel="message size (B)", title=title)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    axes[0].set_ylabel("median round trip (us)")
    fig.suptitle("Taranov Fig 5: median round-trip latency, rnicsim cx5-100g", fontsize=9)
    save(plt, fig, args.output)


def fig6(args):
    runs = sorted(glob.glob(os.path.join(args.inputs[0], "run-*.json")),
                  key=lambda p: int(p.rsplit("-", 1)[1].split(".")[0]))
    if not runs:
        sys.exit(f"{args.inputs[0]}: no run-*.json")
    series = []
    for p in runs:
        d = json.load(open(p))
        cdf = d.get("tables", {}).get("taranov_rtt_cdf")
        if d.get("result") != "done" or not cdf:
            print(f"{p}: no taranov_rtt_cdf (result {d.get('result')}), left out", file=sys.stderr)
            continue
        for s in dict.fromkeys(r["size_bytes"] for r in cdf):
            pts = [(r["rtt_us"], r["pct"]) for r in cdf if r["size_bytes"] == s]
            series.append((d["vars"]["ch"], s, pts))
    if args.table:
        print("| channel | size (B) | p1 | p25 | p50 | p75 | p90 | p99 | max (us) |")
        print("|---|---|---|---|---|---|---|---|---|")
        for ch, s, pts in series:
            v = dict((p, x) for x, p in pts)
            print(f"| {ch} | {s:g} | " + " | ".join(f"{v[q]:.2f}" for q in (1, 25, 50, 75, 90,
                                                                             99, 100)) + " |")
    plt = plt_or_none(args)
    if not plt:
        return
    fig, ax = plt.subplots(figsize=(6, 3.6))
    chans = list(dict.fromkeys(ch for ch, _, _ in series))
    sizes = sorted({s for _, s, _ in series})
    styles = ["-", "--", ":", "-."]
    colors = ["tab:blue", "tab:red", "tab:green", "tab:purple"]
    lo = min(p[0] for _, _, pts in series for p in pts) * 0.95
    for ch, s, pts in series:
        x = [lo] + [p[0] for p in pts]
        y = [0.0] + [p[1] / 100.0 for p in pts]
        ax.step(x, y, where="post", ls=styles[chans.index(ch) % 4],
                color=colors[sizes.index(s) % 4], lw=2.2 if chans.index(ch) % 2 == 0 else 1.4,
                label=f"{ch}, {s:g} B")
    ax.set(xlabel="round trip (us)", ylabel="fraction of messages",
           title="Taranov Fig 6: read ring latency CDF, rnicsim cx5-100g")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    save(plt, fig, args.output)


def fig7(args):
    rows = rpc_rows(args.inputs[0])
    sizes = sorted({r["size_bytes"] for r in rows})
    chans = list(dict.fromkeys(r["ch"] for r in rows))
    windows = sorted({float(r["window"]) for r in rows})
    if args.table:
        for s in sizes:
            print(f"\n{s:g} B requests, Mreq/s:\n")
            print("| channel | " + " | ".join(f"w={w:g}" for w in windows) + " |")
            print("|---|" + "---|" * len(windows))
            for ch in chans:
                v = {float(r["window"]): r["mreq_s"] for r in rows
                     if r["ch"] == ch and r["size_bytes"] == s}
                print(f"| {ch} | " + " | ".join(f"{v[w]:.2f}" if w in v else "" for w in windows)
                      + " |")
    plt = plt_or_none(args)
    if not plt:
        return
    fig, axes = plt.subplots(1, len(sizes), figsize=(3.6 * len(sizes), 3.4), sharey=True)
    if len(sizes) == 1:
        axes = [axes]
    marks = "os^vD<>p"
    for ax, s in zip(axes, sizes):
        for i, ch in enumerate(chans):
            rs = sorted((r for r in rows if r["ch"] == ch and r["size_bytes"] == s),
                        key=lambda r: float(r["window"]))
            ax.plot([float(r["window"]) for r in rs], [r["mreq_s"] for r in rs],
                    marks[i % len(marks)] + "-", ms=4, label=ch)
        ax.set(xscale="log", xlabel="outstanding requests", title=f"{s:g} B requests")
        ax.set_xticks(windows)
        ax.set_xticklabels([f"{w:g}" for w in windows])
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("requests (M/s)")
    axes[0].legend(fontsize=7)
    fig.suptitle("Taranov Fig 7: throughput vs outstanding requests, rnicsim cx5-100g",
                 fontsize=9)
    save(plt, fig, args.output)


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("figure", choices=["fig4", "fig5", "fig6", "fig7"])
    p.add_argument("inputs", nargs="+")
    p.add_argument("-o", "--output")
    p.add_argument("--table", action="store_true", help="print the numbers (Markdown)")
    args = p.parse_args()
    need = 2 if args.figure == "fig5" else 1
    if len(args.inputs) != need:
        p.error(f"{args.figure} takes {need} input(s)")
    if not args.output and not args.table:
        p.error("give -o FILE.png and/or --table")
    {"fig4": fig4, "fig5": fig5, "fig6": fig6, "fig7": fig7}[args.figure](args)


if __name__ == "__main__":
    main()
