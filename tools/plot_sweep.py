#!/usr/bin/python3
"""Plot a column of an `rnicsim sweep` CSV against another.

    plot_sweep.py DIR/sweep.csv --x KEY --y COLUMN [--series KEY] [-o OUT.png]

`rnicsim sweep --plot x=KEY,y=COLUMN[,series=KEY]` runs this with
/usr/bin/python3 (or $RNICSIM_PYTHON).  One line per value of the series
column (in order of first appearance), points sorted by x; rows with an
empty y (failed runs) are left out.  x values may carry a unit as a
scenario writes them (5ns, 100Gbps, 4KiB): all are converted to the
smallest unit among them, which labels the axis.  Non-numeric x values
(names such as ecmp) are placed evenly in order of first appearance.  The
x axis is logarithmic when its values span more than two decades.

Exit status: 0 written; 2 bad arguments, unknown column or nothing to
plot; 3 matplotlib cannot be imported (rnicsim sweep then skips the plot).
"""
import argparse
import csv
import re
import sys

# Unit families as the scenario parser knows them (sim/config/units.c):
# factor to the family's base unit.
UNITS = {
    "time": {"ps": 1, "ns": 1e3, "us": 1e6, "ms": 1e9, "s": 1e12},
    "rate": {"bps": 1, "Kbps": 1e3, "Mbps": 1e6, "Gbps": 1e9, "Tbps": 1e12},
    "size": {"B": 1, "KB": 1e3, "MB": 1e6, "GB": 1e9,
             "KiB": 1024, "MiB": 1024 ** 2, "GiB": 1024 ** 3},
}
NUM_UNIT = re.compile(r"^\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*([A-Za-z]*)\s*$")


def parse_with_unit(text):
    """(value, family, unit) or None if not a number with a known unit."""
    m = NUM_UNIT.match(text)
    if not m:
        return None
    value, unit = float(m.group(1)), m.group(2)
    if not unit:
        return value, None, None
    for family, table in UNITS.items():
        if unit in table:
            return value, family, unit
    return None


def x_values(texts):
    """Numbers for the x texts and an axis unit label, or None (categorical)."""
    parsed = [parse_with_unit(t) for t in texts]
    if any(p is None for p in parsed):
        return None, None
    families = {p[1] for p in parsed}
    if len(families) != 1:
        return None, None
    family = families.pop()
    if family is None:
        return [p[0] for p in parsed], None
    table = UNITS[family]
    unit = min({p[2] for p in parsed}, key=lambda u: table[u])
    return [p[0] * table[p[2]] / table[unit] for p in parsed], unit


def main():
    ap = argparse.ArgumentParser(description="plot an rnicsim sweep CSV")
    ap.add_argument("csv")
    ap.add_argument("--x", required=True)
    ap.add_argument("--y", required=True)
    ap.add_argument("--series")
    ap.add_argument("-o", "--output", default=None)
    a = ap.parse_args()
    out = a.output or re.sub(r"\.csv$", "", a.csv) + ".png"

    try:
        with open(a.csv, newline="") as f:
            rows = list(csv.DictReader(f))
            header = rows[0].keys() if rows else []
    except OSError as e:
        print(f"plot_sweep: {e}", file=sys.stderr)
        return 2
    for what, col in (("x", a.x), ("y", a.y), ("series", a.series)):
        if col is not None and col not in header:
            print(f"plot_sweep: no column '{col}' ({what}) in {a.csv}", file=sys.stderr)
            return 2
    rows = [r for r in rows if r[a.y] != ""]
    if not rows:
        print(f"plot_sweep: no row of {a.csv} has a value for '{a.y}'", file=sys.stderr)
        return 2
    try:
        ys = [float(r[a.y]) for r in rows]
    except ValueError:
        print(f"plot_sweep: column '{a.y}' is not numeric", file=sys.stderr)
        return 2

    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        print(f"plot_sweep: matplotlib is not available ({e})", file=sys.stderr)
        return 3

    xtexts = [r[a.x] for r in rows]
    xs, unit = x_values(xtexts)
    categories = None
    if xs is None:
        categories = list(dict.fromkeys(xtexts))
        xs = [categories.index(t) for t in xtexts]

    series = {}
    for r, x, y in zip(rows, xs, ys):
        key = r[a.series] if a.series else None
        series.setdefault(key, []).append((x, y))

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for key, pts in series.items():
        pts.sort()
        label = f"{a.series}={key}" if a.series else None
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=label)
    if categories is not None:
        ax.set_xticks(range(len(categories)))
        ax.set_xticklabels(categories)
    else:
        pos = [x for x in xs if x > 0]
        if pos and len(pos) == len(xs) and max(pos) / min(pos) > 100:
            ax.set_xscale("log")
    ax.set_xlabel(f"{a.x} [{unit}]" if unit else a.x)
    ax.set_ylabel(a.y)
    ax.grid(True, alpha=0.3)
    if a.series:
        ax.legend()
    fig.tight_layout()
    fig.savefig(out, dpi=100, metadata={"Software": None})
    return 0


if __name__ == "__main__":
    sys.exit(main())
