#!/usr/bin/python3
"""Plots of an `rnicsim validate --doc` run.

    plot_validation.py VALIDATION.csv OUTDIR

`rnicsim validate --doc FILE.md` writes <doc dir>/validation/validation.csv
(id, category, plot, x, published, simulated, status, unit, xlabel; one row per
point) and runs this with /usr/bin/python3 (or $RNICSIM_PYTHON).  Writes
OUTDIR/ratios.png (simulated / published for every point, the +-15 % band
shaded, known limits hollow) and, for every `plot` group, OUTDIR/<plot>.png:
published (markers) and simulated (line) against the points' x.

Exit status: 0 written; 2 bad arguments or unreadable CSV; 3 matplotlib
cannot be imported (rnicsim validate then leaves the plots out).
"""
import csv
import sys


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return 3
    try:
        with open(sys.argv[1], newline="") as f:
            rows = list(csv.DictReader(f))
    except OSError as e:
        print(f"plot_validation.py: {e}", file=sys.stderr)
        return 2
    out = sys.argv[2]
    if not rows:
        print("plot_validation.py: no points to plot", file=sys.stderr)
        return 2

    # ratios of every point, grouped by category
    cats = []
    for r in rows:
        if r["category"] not in cats:
            cats.append(r["category"])
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    fig, ax = plt.subplots(figsize=(10, max(4, 0.22 * len(rows) + 1)))
    y = list(range(len(rows)))[::-1]
    ax.axvspan(0.85, 1.15, color="0.9", zorder=0)
    ax.axvline(1.0, color="0.5", lw=0.8)
    for yi, r in zip(y, rows):
        ratio = float(r["simulated"]) / float(r["published"])
        c = colours[cats.index(r["category"]) % len(colours)]
        limit = r["status"] == "limit"
        ax.plot([ratio], [yi], "o", ms=6, mfc="none" if limit else c, mec=c)
    ax.set_yticks(y)
    ax.set_yticklabels([r["id"] for r in rows], fontsize=7)
    ax.set_xscale("log")
    ax.set_xlabel("simulated / published (log; shaded: +-15 %; hollow: known limit)")
    handles = [plt.Line2D([], [], marker="o", ls="", color=colours[i % len(colours)], label=c)
               for i, c in enumerate(cats)]
    ax.legend(handles=handles, fontsize=7, loc="upper left", framealpha=0.9)
    fig.tight_layout()
    fig.savefig(f"{out}/ratios.png", dpi=110)
    plt.close(fig)

    groups = {}
    for r in rows:
        if r["plot"] and r["x"]:
            groups.setdefault(r["plot"], []).append(r)
    for name, pts in groups.items():
        pts.sort(key=lambda r: float(r["x"]))
        xs = [float(r["x"]) for r in pts]
        fig, ax = plt.subplots(figsize=(6, 4))
        ax.plot(xs, [float(r["published"]) for r in pts], "o", label="published")
        ax.plot(xs, [float(r["simulated"]) for r in pts], "-x", label="rnicsim")
        if max(xs) / max(min(xs), 1e-12) > 100:
            ax.set_xscale("log")
        ax.set_title(name, fontsize=9)
        ax.set_xlabel(pts[0].get("xlabel", ""))
        ax.set_ylabel(pts[0]["unit"])
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(f"{out}/{name}.png", dpi=110)
        plt.close(fig)
    return 0


if __name__ == "__main__":
    sys.exit(main())
