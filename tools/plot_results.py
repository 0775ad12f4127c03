#!/usr/bin/python3
"""Plot perftest-style results written by `rnicsim run`.

Input: one or more JSON files.  Each holds a results document
    {"scenario": "quickstart", "tables": {"write_lat": [{row}, ...],
                                          "write_bw":  [{row}, ...], ...}}
or a list of such documents, or a document whose "runs" is such a list.
Latency rows have size_bytes, t_p50_us, t_p99_us (t_min_us/t_avg_us/t_max_us
are ignored here); bandwidth rows have size_bytes and bw_gbps.  Tables whose
names end in "_lat" go to the latency panel, "_bw" to the bandwidth panel;
other tables are ignored.

Output: a PNG with a latency panel (median as a solid line, p99 dashed, same
colour) and a bandwidth panel, message size on a log2 axis labelled 2, 64,
1K, 64K, 1M.

    tools/plot_results.py results.json -o results.png
    tools/plot_results.py a.json b.json -o compare.png --title "IB vs RoCE"

Runs under Debian's python3-matplotlib (Agg backend, no display needed).
"""
import argparse
import json
import math
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, NullLocator  # noqa: E402


def size_label(value, _pos=None):
    """2 -> '2', 1024 -> '1K', 65536 -> '64K', 1048576 -> '1M'."""
    if value <= 0:
        return ""
    for unit, div in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if value >= div:
            q = value / div
            return ("%d%s" % (q, unit)) if q == int(q) else ("%g%s" % (q, unit))
    return "%d" % value if value == int(value) else "%g" % value


def documents(obj, where):
    """Yield every results document in a parsed JSON value."""
    if isinstance(obj, list):
        for i, item in enumerate(obj):
            yield from documents(item, "%s[%d]" % (where, i))
    elif isinstance(obj, dict):
        if isinstance(obj.get("runs"), list):
            parent = obj.get("scenario")
            for i, run in enumerate(obj["runs"]):
                if isinstance(run, dict) and parent and "scenario" not in run:
                    run = dict(run, scenario=parent)
                yield from documents(run, "%s.runs[%d]" % (where, i))
        elif isinstance(obj.get("tables"), dict):
            yield obj
        else:
            raise ValueError("%s: no \"tables\" object" % where)
    else:
        raise ValueError("%s: expected an object or a list" % where)


def series_from(doc, suffix, ykeys):
    """[(table, [(size, {key: value})...])] for tables ending in suffix."""
    out = []
    for name in sorted(doc["tables"]):
        if not name.endswith(suffix):
            continue
        rows = doc["tables"][name]
        if not isinstance(rows, list):
            continue
        points = []
        for row in rows:
            if not isinstance(row, dict) or "size_bytes" not in row:
                continue
            vals = {k: row.get(k) for k in ykeys}
            if vals[ykeys[0]] is None:
                continue
            points.append((float(row["size_bytes"]), vals))
        points.sort(key=lambda p: p[0])
        if points:
            out.append((name, points))
    return out


NEEDS = ("A latency table is named <test>_lat and its rows have size_bytes and "
         "t_p50_us (t_p99_us optional);\n"
         "a bandwidth table is named <test>_bw and its rows have size_bytes and bw_gbps.")


def found_tables(docs):
    """What the input holds instead: each table with its columns."""
    lines = []
    for doc in docs:
        for name in sorted(doc["tables"]):
            rows = doc["tables"][name]
            cols = []
            for row in rows if isinstance(rows, list) else []:
                for k in row if isinstance(row, dict) else []:
                    if k not in cols:
                        cols.append(k)
            lines.append("  %s: %s (%s)" % (doc.get("scenario", "?"), name,
                                            ", ".join(cols) or "no rows"))
    if not lines:
        return "The input has no tables at all (did the programs call host_report?)."
    return ("The input has these tables (for other shapes, sweep with "
            "`rnicsim sweep --plot` or plot the JSON yourself):\n" + "\n".join(lines))


def label_for(doc, table, multi):
    base = table.rsplit("_", 1)[0]
    if multi:
        tag = doc.get("label") or doc.get("scenario") or "?"
        return "%s %s" % (tag, base)
    return base


def size_axis(ax, sizes):
    """log2 x axis with one labelled tick per power of two (thinned)."""
    ax.set_xscale("log", base=2)
    lo = min(sizes)
    hi = max(sizes)
    e_lo = math.floor(math.log2(lo))
    e_hi = math.ceil(math.log2(hi))
    step = max(1, math.ceil((e_hi - e_lo + 1) / 11))
    ticks = [2.0 ** e for e in range(e_lo, e_hi + 1, step)]
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_major_formatter(FuncFormatter(size_label))
    if lo == hi:
        ax.set_xlim(lo / 2, hi * 2)
    else:
        ax.set_xlim(lo / 1.3, hi * 1.3)
    ax.set_xlabel("message size [bytes]")
    ax.grid(True, which="major", alpha=0.3)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("inputs", nargs="+", help="results JSON file(s)")
    ap.add_argument("-o", "--output", required=True, help="PNG to write")
    ap.add_argument("--title", help="figure title (default: the scenario names)")
    args = ap.parse_args(argv)

    docs = []
    for path in args.inputs:
        try:
            with open(path) as f:
                obj = json.load(f)
            docs.extend(documents(obj, path))
        except (OSError, ValueError) as e:
            print("plot_results: %s" % e, file=sys.stderr)
            return 1
    multi = len(docs) > 1

    lat = []  # (label, points)
    bw = []
    for doc in docs:
        for table, pts in series_from(doc, "_lat", ("t_p50_us", "t_p99_us")):
            lat.append((label_for(doc, table, multi), pts))
        for table, pts in series_from(doc, "_bw", ("bw_gbps",)):
            bw.append((label_for(doc, table, multi), pts))
    if not lat and not bw:
        print("plot_results: nothing to plot.\n" + NEEDS + "\n" + found_tables(docs),
              file=sys.stderr)
        return 1

    panels = [p for p in (("lat", lat), ("bw", bw)) if p[1]]
    fig, axes = plt.subplots(1, len(panels), figsize=(6.4 * len(panels), 4.8), squeeze=False)
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, (kind, series) in zip(axes[0], panels):
        sizes = []
        for i, (label, pts) in enumerate(series):
            c = colours[i % len(colours)]
            xs = [p[0] for p in pts]
            sizes.extend(xs)
            if kind == "lat":
                ax.plot(xs, [p[1]["t_p50_us"] for p in pts], "o-", color=c, ms=3.5,
                        label="%s p50" % label)
                p99 = [(x, p[1]["t_p99_us"]) for x, p in zip(xs, pts)
                       if p[1]["t_p99_us"] is not None]
                if p99:
                    ax.plot([a for a, _ in p99], [b for _, b in p99], "--", color=c,
                            lw=1.0, alpha=0.8, marker="x" if len(p99) == 1 else None,
                            ms=4, label="%s p99" % label)
            else:
                ax.plot(xs, [p[1]["bw_gbps"] for p in pts], "o-", color=c, ms=3.5, label=label)
        size_axis(ax, sizes)
        if kind == "lat":
            ax.set_yscale("log")
            # 1-2-5 ticks with plain numbers read better than bare decades
            ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
            ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _p: "%g" % v))
            ax.yaxis.set_minor_formatter(FuncFormatter(lambda v, _p: ""))
            ax.set_ylabel("latency [us]")
            ax.set_title("latency (solid p50, dashed p99)")
        else:
            ax.set_ylim(bottom=0)
            ax.set_ylabel("bandwidth [Gb/s]")
            ax.set_title("bandwidth")
        ax.legend(fontsize="small", ncol=2 if len(series) > 4 else 1)

    if args.title:
        title = args.title
    else:
        names = []
        for d in docs:
            n = str(d.get("scenario", "?"))
            if n not in names:
                names.append(n)
        title = ", ".join(names)
        seeds = sorted({d["seed"] for d in docs if isinstance(d.get("seed"), int)})
        if len(seeds) == 1:
            title += " (seed %d)" % seeds[0]
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(args.output, dpi=110)
    print("wrote %s" % args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
