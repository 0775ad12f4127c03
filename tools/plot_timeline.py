#!/usr/bin/env python3
"""Draw the tracks of an rnicsim timeline (rnicsim run --timeline FILE.json)
as a picture, without a trace viewer.

    plot_timeline.py FILE.json -o out.png [--flow N] [--from US --to US]
                     [--tracks REGEX]

One row per track that has a slice in the window (hosts first, then the
fabric), slices as bars coloured by the unit they belong to, the steps of
one followed work request (--flow N, default the first one that reaches its
poll) joined by arrows, as a trace viewer's flow arrows are.  The window
defaults to that work request's span with a margin.  This is a static
drawing of the same data Perfetto or chrome://tracing show interactively.
"""
import argparse
import json
import re
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

COLORS = [
    ("perftest|litmus|/|thread", "#4c72b0"),
    ("doorbell|wqe fetch|requester", "#dd8452"),
    ("tx engine|rx units", "#55a868"),
    ("dma|cqe", "#c44e52"),
    ("cache|translation", "#8172b3"),
    ("pcie", "#937860"),
    ("->", "#da8bc3"),
]


def color(track):
    for pat, c in COLORS:
        if re.search(pat, track):
            return c
    return "#8c8c8c"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("file")
    ap.add_argument("-o", "--output", required=True)
    ap.add_argument("--flow", type=int, default=1)
    ap.add_argument("--from", dest="t0", type=float)
    ap.add_argument("--to", dest="t1", type=float)
    ap.add_argument("--tracks", help="only tracks whose name matches this regular expression")
    a = ap.parse_args()
    doc = json.load(open(a.file, encoding="utf-8"))
    ev = doc["traceEvents"]
    pname, tname, tsort = {}, {}, {}
    for e in ev:
        if e["ph"] == "M":
            key = (e["pid"], e["tid"])
            if e["name"] == "process_name":
                pname[e["pid"]] = e["args"]["name"]
            elif e["name"] == "thread_name":
                tname[key] = e["args"]["name"]
            elif e["name"] == "thread_sort_index":
                tsort[key] = e["args"]["sort_index"]
    flows = {}
    for e in ev:
        if e["ph"] in "stf":
            flows.setdefault(e["id"], []).append(e)
    done = [fid for fid in sorted(flows) if any(x["ph"] == "f" for x in flows[fid])]
    steps = []
    if done:
        fid = done[min(a.flow, len(done)) - 1]
        steps = sorted(flows[fid], key=lambda x: x["ts"])
    t0 = a.t0 if a.t0 is not None else (steps[0]["ts"] - 0.15 if steps else 0.0)
    t1 = a.t1 if a.t1 is not None else (steps[-1]["ts"] + 0.25 if steps else t0 + 5.0)
    sl = [e for e in ev if e["ph"] == "X" and e["ts"] < t1 and e["ts"] + e["dur"] > t0]
    rows = sorted({(e["pid"], e["tid"]) for e in sl} | {(s["pid"], s["tid"]) for s in steps},
                  key=lambda k: (k[0], tsort.get(k, 0), k[1]))
    if a.tracks:
        rows = [k for k in rows if re.search(a.tracks, tname[k])]
    if not rows:
        sys.exit("plot_timeline: nothing in that window")
    y = {k: i for i, k in enumerate(rows)}
    fig, ax = plt.subplots(figsize=(14, 0.36 * len(rows) + 1.4))
    for e in sl:
        k = (e["pid"], e["tid"])
        if k not in y:
            continue
        s, d = max(e["ts"], t0), min(e["ts"] + e["dur"], t1) - max(e["ts"], t0)
        ax.barh(y[k], max(d, (t1 - t0) / 2000), left=s, height=0.7,
                color=color(tname[k]), edgecolor="black", linewidth=0.3)
        if d > (t1 - t0) / 14:
            ax.text(s + d / 2, y[k], e["name"][:28], ha="center", va="center", fontsize=6.5)
    pts = [(s["ts"], y[(s["pid"], s["tid"])]) for s in steps if (s["pid"], s["tid"]) in y]
    for (xa, ya), (xb, yb) in zip(pts, pts[1:]):
        ax.annotate("", xy=(xb, yb), xytext=(xa, ya),
                    arrowprops=dict(arrowstyle="->", color="black", lw=0.8))
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([f"{pname[k[0]]}: {tname[k]}" for k in rows], fontsize=7.5)
    ax.invert_yaxis()
    ax.set_xlim(t0, t1)
    ax.set_xlabel("simulated time (us)")
    title = "rnicsim timeline: " + doc.get("otherData", {}).get("run", a.file)
    if steps:
        title += f" - work request {steps[0]['id']} followed from ibv_post_send to ibv_poll_cq " \
                 f"({(steps[-1]['ts'] - steps[0]['ts']) * 1000:.0f} ns)"
    ax.set_title(title, fontsize=9)
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    fig.savefig(a.output, dpi=110)
    print(f"{a.output}: {len(rows)} tracks, {t0:.3f} .. {t1:.3f} us")


if __name__ == "__main__":
    main()
