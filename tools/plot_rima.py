#!/usr/bin/python3
"""Plots of the RIMA memory-footprint study (docs/rima-footprint.md).

One function per figure of Xue et al., "Network Interface Architecture for
Remote Indirect Memory Access (RIMA) in Datacenters" (TACO 2020), Section 5.1:

  plot_rima.py fig3 SWEEP_DIR    -o fig3.png   (sweep of fig3_epochs.yaml over vars.bins)
  plot_rima.py fig4 SWEEP.csv    -o fig4.png   (sweep of fig4_equispaced.yaml over vars.queues)
  plot_rima.py fig5 SWEEP.csv    -o fig5.png   (sweep of fig5_slab.yaml over vars.bins)
  plot_rima.py fig6 SWEEP_DIR    -o fig6.png   (sweep of fig6_reserve.yaml over vars.bins)
  plot_rima.py fig7 SWEEP.csv    -o fig7.png   (sweep of fig7_scaled.yaml over vars.scale, vars.bins)

Values are per process (one server thread) unless --processes=N is given:
the paper's Figures 5-7 are for a 32-process server (reserve pools and active
buffers x 32).  Sizes are printed in decimal GB / MB as the paper does.
"""
import argparse
import csv
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def col(row, name):
    """A single-row table column of a sweep.csv row ('table.key' or 'table.key[0]')."""
    for k in (name, name + "[0]"):
        if k in row and row[k] != "":
            return float(row[k])
    raise KeyError(name)


def save(fig, out):
    fig.tight_layout()
    fig.savefig(out, dpi=80)
    plt.close(fig)
    print(f"wrote {out} ({os.path.getsize(out) // 1024} KiB)")


def fig3(sweep_dir, out, processes):
    """Active buffer (dashed) and total footprint (solid) per epoch: single SRQ vs RIMA."""
    rows = read_csv(os.path.join(sweep_dir, "sweep.csv"))
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    styles = {"single": ("black", "SRQ (1 MiB buffers)"), "rima": ("#d6278a", "RIMA (append queue)")}
    for row in rows:
        bins = row["vars.bins"]
        if bins not in styles:
            continue
        res = json.load(open(os.path.join(sweep_dir, f"run-{row['run']}.json")))
        ep = res["tables"]["footprint_epoch"]
        x = [e["epoch"] for e in ep]
        pre = "srq" if bins == "single" else "rima"
        color, label = styles[bins]
        # an epoch that ends with nothing outstanding has no point on a log axis
        act = [e[f"{pre}_active_bytes"] * processes or float("nan") for e in ep]
        tot = [e[f"{pre}_total_bytes"] * processes for e in ep]
        ax.plot(x, tot, color=color, label=f"{label}: total")
        ax.plot(x, act, color=color, ls="--", label=f"{label}: active")
        if bins == "rima":
            com = [e["rima_committed_bytes"] * processes for e in ep]
            ax.plot(x, com, color=color, ls=":", label="RIMA: AQ committed (hardware)")
    ax.set_yscale("log")
    ax.set_xlabel("epoch (2048 messages)")
    ax.set_ylabel("bytes" + (f" ({processes} processes)" if processes > 1 else " per process"))
    ax.set_title("Fig. 3: single SRQ vs RIMA (memcached sizes to 1 MiB)")
    ax.legend(fontsize=6, loc="lower left", ncol=2)
    ax.set_ylim(bottom=10)
    ax.grid(True, which="major", alpha=0.3)
    save(fig, out)


def fig4(csv_path, out, processes):
    """Total footprint vs number of equi-spaced SRQs (the U shape)."""
    rows = sorted(read_csv(csv_path), key=lambda r: int(r["vars.queues"]))
    q = [int(r["vars.queues"]) for r in rows]
    tot = [col(r, "footprint.srq_total_bytes") * processes / 1e9 for r in rows]
    act = [col(r, "footprint.srq_active_bytes") * processes / 1e9 for r in rows]
    rima = [col(r, "footprint.rima_total_bytes") * processes / 1e9 for r in rows]
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    ax.plot(q, tot, "o-", color="black", label="equi-spaced SRQs: total")
    ax.plot(q, act, "s--", color="gray", label="equi-spaced SRQs: active (measured)")
    ax.plot(q, rima, ":", color="#d6278a", label="RIMA: total (same stream)")
    i = tot.index(min(tot))
    ax.annotate(f"min {tot[i]:.2f} GB at {q[i]}", (q[i], tot[i]), textcoords="offset points",
                xytext=(-30, 20), fontsize=8, arrowprops={"arrowstyle": "->"})
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("number of SRQs (equal sub-ranges of 1 B .. 1 MiB)")
    ax.set_ylabel("GB" + (f" ({processes} processes)" if processes > 1 else " per process"))
    ax.set_title("Fig. 4: distribution-oblivious multi-SRQ")
    ax.legend(fontsize=7)
    ax.grid(True, which="major", alpha=0.3)
    save(fig, out)


def _bars_label(b):
    if b == "rima":
        return "RIMA"
    kind, n = b.split(":")
    return n + ("b" if kind == "slab-bytes" else "")


def _bin_key(b):
    if b == "rima":
        return (2, 0)
    kind, n = b.split(":")
    return (1 if kind == "slab-bytes" else 0, int(n))


def fig5(csv_path, out, processes):
    """Steady-state footprint of slab-aware SRQs (1..M) and RIMA, sizes to 16 KiB."""
    rows = sorted(read_csv(csv_path), key=lambda r: _bin_key(r["vars.bins"]))
    labels, act, res = [], [], []
    for r in rows:
        pre = "rima" if r["vars.bins"] == "rima" else "srq"
        labels.append(_bars_label(r["vars.bins"]))
        act.append(col(r, f"footprint.{pre}_active_bytes") * processes / 1e6)
        res.append(col(r, f"footprint.{pre}_reserve_bytes") * processes / 1e6)
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    x = range(len(labels))
    ax.bar(x, res, color="#4c72b0", label="reserve pool (Table 4)")
    ax.bar(x, act, bottom=res, color="#dd8452", label="active buffer (measured)")
    for i, (a, r) in enumerate(zip(act, res)):
        ax.text(i, (a + r) * 1.1, f"{a + r:.0f}", ha="center", fontsize=6)
    ax.set_xticks(list(x))
    ax.set_xticklabels(labels)
    ax.set_yscale("log")
    ax.set_ylim(bottom=min(a + r for a, r in zip(act, res)) / 3)
    ax.set_xlabel("number of slab-aware SRQs / RIMA")
    ax.set_ylabel("MB" + (f" ({processes} processes)" if processes > 1 else " per process"))
    ax.set_title("Fig. 5: distribution-aware multi-SRQ vs RIMA (sizes to 16 KiB)")
    ax.legend(fontsize=7)
    save(fig, out)


def fig6(sweep_dir, out, processes):
    """Analytic reserve pool vs number of slab-aware SRQs, full distribution
    (a sweep of fig6_reserve.yaml over vars.bins = slab, slab-bytes)."""
    rows = read_csv(os.path.join(sweep_dir, "sweep.csv"))
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    names = {"slab": ("black", "SRQs, classes merged by messages"),
             "slab-bytes": ("#4c72b0", "SRQs, classes merged by bytes")}
    rima = None
    for k, row in enumerate(rows):
        res = json.load(open(os.path.join(sweep_dir, f"run-{row['run']}.json")))
        model = res["tables"]["footprint_model"]
        q = [r["queues"] for r in model]
        srq = [r["srq_reserve_bytes"] * processes / 1e9 for r in model]
        rima = [r["rima_reserve_bytes"] * processes / 1e9 for r in model]
        color, label = names.get(row["vars.bins"], ("gray", row["vars.bins"]))
        ax.plot(q, srq, "o-", ms=3, color=color, label=label)
        i = srq.index(min(srq))
        ax.annotate(f"min {srq[i]:.2f} GB at {q[i]}", (q[i], srq[i]), textcoords="offset points",
                    xytext=(-90, 40 + 25 * k), fontsize=8, color=color,
                    arrowprops={"arrowstyle": "->", "color": color})
    if rima:
        ax.plot(q, rima, "--", color="#d6278a", label="RIMA")
    ax.set_yscale("log")
    ax.set_xlabel("number of SRQs (memcached slab classes merged)")
    ax.set_ylabel("reserve pool, GB" + (f" ({processes} processes)" if processes > 1 else ""))
    ax.set_title("Fig. 6: reserve pool, all sizes (to 1 MiB), analytic")
    ax.legend(fontsize=7)
    ax.grid(True, which="major", alpha=0.3)
    save(fig, out)


def fig7(csv_path, out, processes):
    """Total footprint per configuration for the distribution scaled 0.5x, 1x, 2x."""
    rows = read_csv(csv_path)
    scales = sorted({float(r["vars.scale"]) for r in rows})
    bins = sorted({r["vars.bins"] for r in rows}, key=_bin_key)
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    w = 0.8 / len(scales)
    colors = ["#55a868", "#4c72b0", "#c44e52"]
    for k, s in enumerate(scales):
        ys = []
        for b in bins:
            r = next(r for r in rows if float(r["vars.scale"]) == s and r["vars.bins"] == b)
            pre = "rima" if b == "rima" else "srq"
            ys.append(col(r, f"footprint.{pre}_total_bytes") * processes / 1e6)
        ax.bar([i + (k - (len(scales) - 1) / 2) * w for i in range(len(bins))], ys, w,
               color=colors[k % 3], label=f"{s:g}x")
    ax.set_ylim(bottom=2)
    ax.set_xticks(range(len(bins)))
    ax.set_xticklabels([_bars_label(b) for b in bins])
    ax.set_yscale("log")
    ax.set_xlabel("number of slab-aware SRQs / RIMA")
    ax.set_ylabel("total MB" + (f" ({processes} processes)" if processes > 1 else " per process"))
    ax.set_title("Fig. 7: sensitivity to message sizes (16 KiB cut, scaled)")
    ax.legend(fontsize=7, title="sizes")
    save(fig, out)


FIGS = {"fig3": fig3, "fig4": fig4, "fig5": fig5, "fig6": fig6, "fig7": fig7}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("figure", choices=sorted(FIGS))
    ap.add_argument("input", help="sweep directory (fig3, fig6) or sweep.csv (fig4, fig5, fig7)")
    ap.add_argument("-o", "--output", required=True)
    ap.add_argument("--processes", type=int, default=1,
                    help="multiply by the number of server processes (the paper: 32 for Figs. 5-7)")
    a = ap.parse_args()
    try:
        FIGS[a.figure](a.input, a.output, a.processes)
    except (OSError, KeyError, ValueError, StopIteration) as e:
        sys.exit(f"plot_rima.py {a.figure}: cannot read {a.input}: {e!r}")


if __name__ == "__main__":
    main()
