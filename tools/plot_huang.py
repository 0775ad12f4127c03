#!/usr/bin/python3
"""Huang & Ghandeharizadeh, the five RC request/response protocols
(docs/huang.md): run the figure sweeps of scenarios/huang/ (one `rnicsim
sweep` each), plot them next to the paper's numbers and evaluate the
headline checks of the reproduction.

  tools/plot_huang.py [-o docs/huang] [-j 2] [--only fig8a,fig10a]
  tools/plot_huang.py --checks [--quick]   (the check points only; exit 1 if a
                                            check that should hold fails)

Figures 8-13 are the sweeps; figures 3-6 are ratios of points of those
sweeps, as in the paper (3: the highest bandwidth of each protocol in any
sweep at V = 365 B and 28 nodes; 4: S = 8 over S = 1; 5: 28 nodes over 4;
6: V = 4 KB over 365 B).  Writes figNN.png, results.json (every number, the
checks, each sweep's command and wall time) and prints the checks as a
Markdown table.  --quick shortens every run's window (50 us warm-up, 50 us
measured) for tests."""
import argparse
import csv
import hashlib
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(HERE)
PROTOS = ["send_send", "send_write", "write_send", "write_write", "read"]
LINE_GBPS = 56.0
ABS = {"m1": "M:1", "1m": "1:M", "mm": "M:M"}

# figure -> (scenario, x var, values, extra --set lists[, protocols, fixed
# vars]).  "figNN~tag" sweeps add their points to figure figNN: points
# whose first round of R x QPs requests lasts longer than the scenario's
# warm-up get their own (round 1 grows with R: R = 256 doubles R = 128's;
# 1:M READ at S = 16 takes 77 ms at R = 128, docs/huang.md "The window
# matters"); a point whose window still opens inside round 1 is reported.
VS = [365, 1024, 2048, 4096, 8192, 16384, 32768, 65536]
SWEEPS = {
    # M:1 with link credits (sixth session): a round of R x 448 requests
    # lasts 0.75 ms at R = 16, 5 ms at 64, 11 ms at 128, 23 ms at 256
    # (14-28 Gb/s); every window holds 3 rounds and opens past round 1
    "fig8a": ("m1_R", "R", [1, 2, 4, 8, 16], {}, PROTOS, {"duration": "3ms"}),
    "fig8a~32": ("m1_R", "R", [32], {}, PROTOS, {"duration": "5ms"}),
    "fig8a~64": ("m1_R", "R", [64], {}, PROTOS, {"duration": "15ms"}),
    "fig8a~128": ("m1_R", "R", [128], {}, PROTOS, {"warmup": "15ms", "duration": "35ms"}),
    "fig8a~256": ("m1_R", "R", [256], {}, PROTOS, {"warmup": "30ms", "duration": "70ms"}),
    "fig8b": ("m1_S", "S", [1, 2, 4, 8, 16], {}),
    # M:1 vs P: a round of R x S requests per requesting node grows with P
    # (the one responder serves them all; main 99ed2fe, the 2 ms window:
    # 1.5 / 0.7 / 0.2-0.4 rounds at P = 8 / 16 / 28), so from P = 8 each P
    # has a window of ROUNDS_MIN rounds or more
    "fig8c": ("m1_nodes", "P", [1, 2, 4], {}),
    "fig8c~8": ("m1_nodes", "P", [8], {}, PROTOS, {"duration": "5ms"}),
    "fig8c~16": ("m1_nodes", "P", [16], {}, PROTOS, {"duration": "10ms"}),
    "fig8c~28": ("m1_nodes", "P", [28], {}, PROTOS, {"duration": "32ms"}),
    "fig9": ("m1_V", "V", VS, {"R": [4]}),
    "fig10a": ("1m_R", "R", [1, 2, 4, 8, 16, 32, 64, 128], {}, PROTOS[:4]),
    "fig10a~256": ("1m_R", "R", [256], {}, PROTOS[:4], {"warmup": "40ms"}),
    # 1:M READ's first round: 94.6 ms at R = 128 with the NIC's finite receive
    # buffer (77 ms without; ~0.74 ms per unit of R; the other warm-ups are
    # scaled from the R = 128 one, and the run warns if one falls short)
    "fig10a~read": ("1m_R", "R", [1, 2, 4, 8, 16, 32], {}, ["read"], {"warmup": "30ms"}),
    "fig10a~read64": ("1m_R", "R", [64], {}, ["read"], {"warmup": "55ms"}),
    "fig10a~read128": ("1m_R", "R", [128], {}, ["read"], {"warmup": "110ms"}),
    "fig10a~read256": ("1m_R", "R", [256], {}, ["read"], {"warmup": "220ms"}),
    "fig10b": ("1m_S", "S", [1, 2, 4, 8, 16], {}),
    "fig10c": ("1m_nodes", "Q", [1, 2, 4, 8, 16, 28], {}),
    "fig11": ("1m_V", "V", VS, {"R": [4]}),
    "fig12a": ("mm_R", "R", [1, 2, 4, 8, 16, 32, 64, 128], {}),
    "fig12a~256": ("mm_R", "R", [256], {}, PROTOS, {"warmup": "10ms"}),
    # M:M vs S: each S past its round 1 (R x S x 27 requests a node; measured
    # on main 0a0dc96: S = 1, 2 2.7-4.0 ms; S = 4 5.0-6.8 ms, READ 13.8;
    # S = 8 7.7-10.7 ms, READ 40.7) and a window of at least ROUNDS_MIN
    # rounds of the slowest node (S = 1 WRITE/WRITE: a round of 1.5 ms, one
    # thread turn; READ at S = 8: 40 ms, 2 Gb/s a node)
    "fig12b": ("mm_S", "S", [1], {}, PROTOS, {"warmup": "5ms", "duration": "6ms"}),
    "fig12b~2": ("mm_S", "S", [2], {}, PROTOS, {"warmup": "6ms", "duration": "10ms"}),
    "fig12b~4": ("mm_S", "S", [4], {}, PROTOS[:4], {"warmup": "10ms", "duration": "20ms"}),
    "fig12b~4read": ("mm_S", "S", [4], {}, ["read"], {"warmup": "18ms", "duration": "40ms"}),
    "fig12b~8read": ("mm_S", "S", [8], {}, ["read"], {"warmup": "70ms", "duration": "125ms"}),
    "fig12b~8": ("mm_S", "S", [8], {}, PROTOS[:4], {"warmup": "14ms", "duration": "30ms"}),
    "fig12c": ("mm_nodes", "N", [2, 4, 8, 16, 28], {}),
    "fig13": ("mm_V", "V", VS, {"R": [4]}),
}


def v_round_ms(ab, V, R=128):
    """The first round of a V sweep point at R: R x QPs values of V + 6
    bytes through the one 54.5 Gb/s link that bounds the abstraction (M:1:
    the responder's 448 QPs at S = 16; 1:M: the requester's 448; M:M: a
    node's 27 at S = 1), in ms, times what else the round waits on: M:M
    2.5 (measured at R = 128: 5.2 ms at 4 KiB, 7.2-8.2 ms at 8 KiB, about
    twice the link time; 1.25x left those points inside round 1); M:1 and
    1:M 1.5 (measured at R = 4 and 64 KiB, WRITE/WRITE, main 31ef8f8:
    19.3 and 20.9 ms against 17.2 ms of link time)."""
    qps = {"m1": 448, "1m": 448, "mm": 27}[ab]
    return {"mm": 2.5}.get(ab, 1.5) * R * qps * (V + 6) * 8 / 54.5e9 * 1e3


# The V sweeps (Figs. 9, 11, 13; R = 4 and 128): a point whose first round
# (v_round_ms) is longer than the scenario's warm-up gets a sweep of its
# own, warmed up past it: R = 4 beyond 8 KiB in M:1 and 1:M; at R = 128
# every V, from the R sweeps' warm-up at 365 B (1:M READ: its 90 ms) to
# 0.7 s at 64 KiB in M:1 and 1:M.  The buffers are (V + 6) x R x QPs bytes
# per node: at R = 128 and 64 KiB 3.7 GB on the M:1 responder and on the
# 1:M requester, 226 MB on each of the 28 M:M nodes (docs/huang.md "Run
# times").
for _fig, _scen, _ab, _w4, _w128 in (("fig9", "m1_V", "m1", 4, 10), ("fig11", "1m_V", "1m", 4, 20),
                                     ("fig13", "mm_V", "mm", 2, 5)):
    _own = []
    for _r, _wd in ((4, _w4), (128, _w128)):
        for _v in VS:
            _w = int(v_round_ms(_ab, _v, _r)) + 1
            if _r == 4 and _w <= _wd:
                continue  # in the figure's own sweep, at the scenario's warm-up
            _w = max(_w, _wd)
            if _ab == "1m":  # READ's first round is the slowest here (77 ms at R = 128)
                SWEEPS[f"{_fig}~{_r}v{_v}"] = (_scen, "V", [_v], {"R": [_r]}, PROTOS[:4],
                                               {"warmup": f"{_w}ms"})
                SWEEPS[f"{_fig}~{_r}v{_v}read"] = (_scen, "V", [_v], {"R": [_r]}, ["read"],
                                                   {"warmup": f"{max(_w, 90 if _r == 128 else 4)}ms"})
            else:
                SWEEPS[f"{_fig}~{_r}v{_v}"] = (_scen, "V", [_v], {"R": [_r]}, PROTOS,
                                               {"warmup": f"{_w}ms"})
            if _r == 4:
                _own.append(_v)
    SWEEPS[_fig] = (_scen, "V", [v for v in VS if v not in _own], {"R": [4]})

# the points the headline checks (spec 3.8) need, as sweeps; --quick:
# the cheap ones (S = 1 and the READs, a few seconds each), for tests.
# Each point's warm-up covers its first round of R x QPs requests (the
# program's round1_us, docs/huang.md "The window matters"; measured on
# 2026-11-26 with the lossless star): M:1 S = 16 5-8 ms; 1:M S = 16
# 5.5-10.6 ms, its READ 77 ms; M:M S = 1, 2 2.7-4.0 ms, S = 8 READ 32 ms.
# Round 1 is not the whole start-up at 1:M S = 16: the first write into each
# never-touched receive line is a partial-line merge at memory latency, the
# backlog it builds at the requester's port drains for some ms more (SEND
# responses at R = 128: 24.1 Gb/s in a window at 12 ms, 28.6 at 15, 37.4 at
# 17, 40.8 at 20, 37.6 at 25; the merges stop at 13 ms; docs/huang.md
# "Check 8a: a start-up transient"), so its non-READ points open at 20 ms.
# Each window holds ROUNDS_MIN rounds of its slowest requesting node or
# more (measured on 13a4d6c with the scenarios' 1-2 ms windows: M:1 S = 16
# 0.2-0.4 rounds, 1:M S = 16 0.5, 1:M R = 64 1.0, M:M N = 16 1.1-1.3), but
# 1:M READ at S = 16 and M:M READ at S = 8 (a round of ~100 and ~40 ms).
# "name~tag" sweeps add their points to sweep "name".
CHECK_SWEEPS = {
    "m1_S": ("m1_S", "S", [1], {}),
    "m1_S~16": ("m1_S", "S", [16], {}, PROTOS, {"warmup": "25ms", "duration": "32ms"}),
    "1m_S": ("1m_S", "S", [1], {}, PROTOS, {"duration": "6ms"}),
    "1m_S~16": ("1m_S", "S", [16], {}, PROTOS[:4], {"warmup": "20ms", "duration": "16ms"}),
    "1m_S~read": ("1m_S", "S", [16], {}, ["read"], {"warmup": "110ms"}),
    # M:M S = 1 and 2 with Fig. 12b's windows (the same runs: at least 3
    # rounds of every node), and READ at S = 8 (mm_S8, last) past its round 1
    # (40.7 ms; 56.8 ms with link credits, sixth session: 45 ms then opened
    # inside it; 35 ms until the fifth session) with a 1 ms
    # window (1,927 polls of each thread; 0.03 of its 40 ms round: Fig. 12b's
    # full window of 3 rounds is 125 ms, 6 minutes more): a figure that ran
    # the same command already lends its points (fig12b~8read --set
    # duration=1ms)
    "mm_S": ("mm_S", "S", [1], {}, PROTOS, {"warmup": "5ms", "duration": "6ms"}),
    "mm_S~2": ("mm_S", "S", [2], {}, PROTOS, {"warmup": "6ms", "duration": "10ms"}),
    # checks 6 and 8 (the points at 28 nodes, R = 128 are those above)
    "m1_nodes": ("m1_nodes", "P", [8, 28], {}, ["read"], {"warmup": "8ms", "duration": "16ms"}),
    "1m_nodes": ("1m_nodes", "Q", [1], {}, ["read"]),
    "mm_nodes": ("mm_nodes", "N", [4, 8, 16], {}, PROTOS, {"warmup": "5ms", "duration": "4ms"}),
    "1m_R": ("1m_R", "R", [16, 64], {}, PROTOS[:4], {"warmup": "20ms", "duration": "12ms"}),
    "mm_R": ("mm_R", "R", [2, 4, 8, 16, 32, 64], {}, ["read"], {"warmup": "5ms", "duration": "3ms"}),
    "mm_S8": ("mm_S", "S", [8], {}, ["read"], {"warmup": "70ms", "duration": "1ms"}),
}
QUICK_SWEEPS = {
    "m1_S": ("m1_S", "S", [1], {}, PROTOS, {"warmup": "1ms", "duration": "1ms"}),
}

# The summary figures 3-6 alone: only the two points of each ratio, per
# abstraction ("--summary"; Fig. 3 is then the best of these points, not of
# every sweep).  Windows: one round of the R x QPs requests outstanding
# first (docs/huang.md "The window matters"); M:M at S = 8 is not run
# (12,096 QPs: minutes a point), Fig. 4's M:M ratio is S = 2 over S = 1.
SUMMARY_SWEEPS = {
    "fig4_m1": ("m1_S", "S", [1, 8], {}),
    "fig4_1m": ("1m_S", "S", [1, 8], {}),
    "fig4_mm": ("mm_S", "S", [1, 2], {}),
    "fig5_m1": ("m1_nodes", "P", [4, 28], {}),
    "fig5_1m": ("1m_nodes", "Q", [4, 28], {}),
    "fig5_mm": ("mm_nodes", "N", [4, 28], {}),
    "fig6_m1": ("m1_V", "V", [365, 4096], {}, PROTOS, {"R": 4}),
    "fig6_1m": ("1m_V", "V", [365, 4096], {}, PROTOS, {"R": 4}),
    "fig6_mm": ("mm_V", "V", [365, 4096], {}, PROTOS, {"R": 4}),
}
# The paper's summary numbers (spec 3.5): Fig. 3 best per abstraction, Fig. 6 READ
PAPER_SUMMARY = {
    "fig3": {("m1", "read"): 42, ("1m", "write_write"): 14},
    "fig6": {("m1", "read"): 50 / 35, ("1m", "read"): 16 / 2, ("mm", "read"): 20 / 10},
}

# The paper's numbers from its text (spec 3.5), per figure: (protocol, x) -> Gb/s
PAPER = {
    "fig8a": {("read", 16): 43, ("write_send", 128): 28, ("write_write", 128): 28,
              ("send_send", 256): 24, ("send_write", 256): 22},
    "fig8b": {("read", 1): 40, ("write_send", 1): 33, ("write_write", 1): 33},
    "fig8c": {("read", 28): 36, ("write_write", 28): 30, ("write_send", 28): 30,
              ("send_send", 4): 28, ("send_send", 28): 19, ("read", 1): 20},
    "fig10a": {("read", 1): 4.2, ("read", 16): 2, ("write_write", 256): 14,
               ("send_send", 256): 11},
    "fig10b": {("write_write", 16): 13.8, ("send_send", 16): 11, ("read", 1): 11,
               ("read", 16): 2},
    "fig10c": {("read", 1): 17, ("read", 28): 2, ("write_write", 28): 16, ("send_send", 28): 15},
    "fig12a": {("read", 8): 13.5, ("read", 32): 10, ("send_send", 64): 9, ("write_write", 8): 7},
    "fig12b": {("read", 1): 10, ("read", 8): 1, ("write_write", 2): 11},
}


def sweep_cmd(binary, scen_dir, out, spec, jobs):
    """The `rnicsim sweep` command of a sweep spec, and how results.json
    shows it (rnicsim for the binary, paths relative, OUT for -o)."""
    scen, x, xs, extra = spec[:4]
    protos = spec[4] if len(spec) > 4 else PROTOS
    fixed = spec[5] if len(spec) > 5 else {}
    cmd = [binary, "sweep", os.path.join(scen_dir, scen + ".yaml"),
           "--set", "vars.proto=" + ",".join(protos),
           "--set", f"vars.{x}=" + ",".join(map(str, xs))]
    for k, vals in extra.items():
        cmd += ["--set", f"vars.{k}=" + ",".join(map(str, vals))]
    for k, val in fixed.items():
        cmd += ["--set", f"vars.{k}={val}"]
    cmd += ["-j", str(jobs), "-o", out]
    shown = ["rnicsim"] + [c if c != binary else "rnicsim" for c in cmd[1:]]
    shown = [os.path.relpath(c, SRC) if c.startswith(SRC + "/") else c for c in shown]
    shown[-1] = "OUT"  # the -o directory: a temporary one, not worth recording
    return cmd, " ".join(shown)


def same_model(commit):
    """True when the tree at `commit` (a run_on label: 'abc1234 (main ...)')
    simulates what this work tree does: no difference between
    the two outside docs/, test/ and this script (git diff of the commit
    against the work tree)."""
    rev = commit.split()[0] if commit else ""
    if not rev or rev.endswith("+dirty"):
        return False
    where = ["--", ".", ":(exclude)docs", ":(exclude)test", ":(exclude)tools/plot_huang.py"]
    try:
        p = subprocess.run(["git", "-C", SRC, "diff", "--quiet", rev, *where],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        # an untracked source file is built too (CMake globs sim/*.c)
        u = subprocess.run(["git", "-C", SRC, "ls-files", "--others", "--exclude-standard",
                            *where], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    except OSError:
        return False
    return p.returncode == 0 and u.returncode == 0 and not u.stdout.strip()


def reuse_figure_run(figs, binary, scen_dir, spec):
    """A check sweep that a figure already ran with the same command (but
    -j) on the same model: its points from results.json, as run_sweep
    returns them (wall 0), or None.  Deterministic runs: the same bytes.
    Only points that run produced count (results.json's point_run names
    each point's run; a later run of the figure with other --set values
    replaces some), and only when it produced every point of the sweep."""
    want = re.sub(r" -j \d+ ", " ", sweep_cmd(binary, scen_dir, "OUT", spec, 1)[1])
    for tag, c in figs.get("commands", {}).items():
        if re.sub(r" -j \d+ ", " ", c) != want:
            continue
        ron = figs.get("run_on", {}).get(tag, {})
        if not same_model(ron.get("commit", "")) or ron.get("binary_sha256") != binary_id(binary):
            continue
        f = tag.split("~")[0]
        protos = spec[4] if len(spec) > 4 else PROTOS
        dims = [spec[2]] + list(spec[3].values())  # x, then the extra dimensions in order

        def keep(k):
            parts = k.split("/")
            return (parts[0] in protos and len(parts) == 1 + len(dims)
                    and all(int(v) in vals for v, vals in zip(parts[1:], dims))
                    and figs.get("point_run", {}).get(f, {}).get(k) == tag)
        parse = lambda d: {(k.split("/")[0],) + tuple(int(x) for x in k.split("/")[1:]): v
                           for k, v in d.items() if keep(k)}
        got = [parse(figs.get(n, {}).get(f, {})) for n in
               ("points", "round1_us", "run_wall_s", "window_rounds")]
        want_n = len(protos) * math.prod(len(v) for v in dims)
        if len(got[0]) == want_n:
            return got[0], 0.0, c, got[1], got[2], got[3], tag
    return None


def run_sweep(binary, scen_dir, out, spec, jobs):
    scen, x, xs, extra = spec[:4]
    protos = spec[4] if len(spec) > 4 else PROTOS
    fixed = spec[5] if len(spec) > 5 else {}
    cmd, shown = sweep_cmd(binary, scen_dir, out, spec, jobs)
    t0 = time.monotonic()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wall = time.monotonic() - t0
    rows = []
    path = os.path.join(out, "sweep.csv")
    if os.path.exists(path):
        with open(path) as f:
            rows = list(csv.DictReader(f))
    if p.returncode != 0:
        print(f"{scen}: {' '.join(cmd[1:])} exited {p.returncode}:\n{p.stderr[-600:]}",
              file=sys.stderr)
    pts, rounds, walls, nrounds = {}, {}, {}, {}
    scen_warm = scen_warmup(scen_dir, scen)
    for r in rows:
        if r.get("exit") != "0" or not r.get("huang.bw_gbps"):
            continue
        # a one-value assignment has no column of its own
        col = lambda k, vals: r.get(f"vars.{k}", str(vals[0]) if len(vals) == 1 else None)
        key = (col("proto", protos), int(col(x, xs))) + tuple(int(col(k, v))
                                                          for k, v in extra.items())
        pts[key] = float(r["huang.bw_gbps"])
        # the run's own wall time (its log's last line: "... wall 12.5 s")
        try:
            with open(os.path.join(out, f"run-{r['run']}.log")) as f:
                m = re.search(r"wall ([0-9.]+) s", f.read())
            if m:
                walls[key] = float(m.group(1))
        except (OSError, KeyError):
            pass
        # the window must open after the first round of R x QPs requests
        # (docs/huang.md "The window matters"): the program's round1_us
        r1 = r.get("huang.round1_us")
        if r1 not in (None, ""):
            rounds[key] = float(r1)
            warn_round1(scen, key, float(r1), r.get("vars.warmup") or fixed.get("warmup")
                        or scen_warm)
        # how many turns the window held for the busiest requesting thread
        # (docs/huang.md "The window"): fewer than 4 polls is a warning
        polls = r.get("huang.window_polls_min")
        if polls not in (None, "") and float(polls) < 4:
            print(f"{scen} {key}: a requesting thread polled only {float(polls):.0f} times in "
                  f"the window (longest gap {float(r.get('huang.poll_gap_max_us') or 0):.0f} us)",
                  file=sys.stderr)
        # how many rounds (R x its QPs responses) the slowest requesting node
        # completed in the window, from the run's own row: fewer than
        # ROUNDS_MIN is reported (the window saw too little of each thread's
        # cycle of finding and re-posting a round)
        nr = window_rounds(r)
        if nr is not None:
            nrounds[key] = round(nr, 2)
            warn_rounds(scen, key, nr)
    return pts, wall, shown, rounds, walls, nrounds


def scen_warmup(scen_dir, scen):
    """The scenario's own warm-up, for points that do not set one."""
    with open(os.path.join(scen_dir, scen + ".yaml")) as f:
        m = re.search(r"\bwarmup: *([0-9.]+[mun]?s)\b", f.read())
    return m.group(1) if m else None


def binary_id(binary):
    """The rnicsim binary's identity: the SHA-256 of its bytes.  A reused
    figure run must have been made by the same binary (a --rnicsim from
    another tree, or a build older than the tree, gives other numbers
    whatever the source says); a rebuild that changes nothing keeps it."""
    h = hashlib.sha256()
    with open(binary, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def warn_round1(scen, key, r1_us, warm):
    """The window must open after the first round of R x QPs requests
    (docs/huang.md "The window matters"): the program's round1_us against
    the point's warm-up."""
    if r1_us < 0 or (warm and r1_us > to_us(warm)):
        print(f"{scen} {key}: the window opens before the first round was answered "
              f"(round 1: {r1_us:.0f} us, warm-up {warm})", file=sys.stderr)


def warn_rounds(scen, key, nr):
    """Fewer than ROUNDS_MIN rounds of the slowest requesting node in the window."""
    if nr < ROUNDS_MIN:
        print(f"{scen} {key}: the slowest requesting node completed only {nr:.1f} "
              f"rounds in the window (fewer than {ROUNDS_MIN}; lengthen its duration)",
              file=sys.stderr)


# A point's window must hold at least this many rounds of its slowest
# requesting node (window_rounds)
ROUNDS_MIN = 3


def window_rounds(r):
    """Rounds the slowest requesting node completed in the window, from a
    sweep row's huang columns: node_min_gbps x duration in value bytes,
    over the requests that node had outstanding (R x its requesting QPs:
    M:1 S, 1:M Q x S, M:M S x (N - 1); protocols/huang/layout.c)."""
    try:
        g = lambda k: float(r["huang." + k])
        ab, S, R, V = int(g("abstraction")), g("S"), g("R"), g("V")
        qps = {0: S, 1: g("Q") * S, 2: S * (g("N") - 1)}[ab]
        return g("node_min_gbps") * 1e9 * g("duration_us") * 1e-6 / (8 * V) / (R * qps)
    except (KeyError, ValueError, TypeError):
        return None


def run_label():
    """What a figure was run on: the source tree's commit (git describe,
    '+dirty' with local changes) and the machine's load averages."""
    try:
        git = lambda *args: subprocess.run(["git", "-C", SRC, *args], stdout=subprocess.PIPE,
                                           stderr=subprocess.DEVNULL, text=True).stdout.strip()
        rev = git("describe", "--always", "--abbrev=7")
        # changes outside docs/ (the figures themselves live there) and
        # test/ (not what a figure runs) mark it
        if rev and git("status", "--porcelain", "--untracked-files=no", "--", ".",
                       ":(exclude)docs", ":(exclude)test"):
            rev += "+dirty"
    except OSError:
        rev = ""
    rev = rev or "unknown"
    try:  # the main commit under it (a helper branch is main plus its own commits)
        base = subprocess.run(["git", "-C", SRC, "merge-base", "HEAD", "main"],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              text=True).stdout.strip()[:7]
    except OSError:
        base = ""
    return f"{rev} (main {base})" if base and not rev.startswith(base) else rev


def to_us(t):
    """'4ms' -> 4000.0 (the scenario's time units)."""
    for suf, f in (("ns", 1e-3), ("us", 1.0), ("ms", 1e3), ("s", 1e6)):
        if t.endswith(suf):
            return float(t[:-len(suf)]) * f
    return float(t) * 1e-3


def checks(r):
    """Spec 3.8 checks 1-5 from the check sweeps (those that ran).
    -> [(n, what, value, holds)]"""
    out = []
    g = lambda sw, s: ({p: r[sw].get((p, s)) for p in PROTOS}
                       if sw in r and all((p, s) in r[sw] for p in PROTOS) else None)
    m1, m1s1, o1, o1s1 = g("m1_S", 16), g("m1_S", 1), g("1m_S", 16), g("1m_S", 1)
    mm = {s: g("mm_S", s) for s in (1, 2)}
    fmt = lambda d: ", ".join(f"{p} {d[p]:.1f}" for p in PROTOS)
    best = lambda d: max(d, key=d.get)
    for d, tag in ((m1, "S16"), (m1s1, "S1")):
        if not d:
            continue
        out.append((f"1a-{tag}", f"M:1 {tag}: READ highest", fmt(d), best(d) == "read"))
        wr = min(d["write_send"], d["write_write"])
        sr = max(d["send_send"], d["send_write"])
        out.append((f"1b-{tag}", f"M:1 {tag}: WRITE-request > SEND-request",
                    f"{wr:.1f} vs {sr:.1f}", wr > sr))
        dv = max(abs(d["send_send"] / d["send_write"] - 1),
                 abs(d["write_send"] / d["write_write"] - 1))
        out.append((f"1c-{tag}", f"M:1 {tag}: response verb changes bw < 15 %",
                    f"{dv * 100:.0f} %", dv < 0.15))
    if o1:
        bo = max(o1.values())
        out.append(("2a", "1:M default: READ <= 0.3x best", f"{o1['read']:.1f} / {bo:.1f}",
                    o1["read"] <= 0.3 * bo))
        wresp = min(o1["send_write"], o1["write_write"])
        sresp = max(o1["send_send"], o1["write_send"])
        out.append(("2b", "1:M: WRITE-response >= 1.1x SEND-response",
                    f"{wresp:.1f} vs {sresp:.1f}", wresp >= 1.1 * sresp))
        d = max(abs(o1["send_send"] / o1["write_send"] - 1),
                abs(o1["send_write"] / o1["write_write"] - 1))
        out.append(("2c", "1:M: request verb changes bw < 10 %", f"{d * 100:.0f} %", d < 0.10))
    if mm[1]:
        out.append(("3a", "M:M S=1: READ best", fmt(mm[1]), best(mm[1]) == "read"))
    if mm[2]:
        out.append(("3b", "M:M S=2: READ not best", fmt(mm[2]), best(mm[2]) != "read"))
    if m1 and m1s1 and o1 and o1s1:
        bm1 = max(max(m1.values()), max(m1s1.values()))
        b1m = max(max(o1.values()), max(o1s1.values()))
        out.append(("4", "best M:1 >= 2.5x best 1:M", f"{bm1:.1f} / {b1m:.1f} = {bm1 / b1m:.2f}",
                    bm1 >= 2.5 * b1m))
    if m1 and m1s1:
        worse = [p for p in PROTOS if m1[p] > m1s1[p]]
        out.append(("5a", "M:1: bw(S=16) <= bw(S=1), every protocol",
                    "all" if not worse else "not: " + ", ".join(worse), not worse))
    r1 = r.get("1m_S", {})
    if ("read", 1) in r1 and ("read", 16) in r1:
        out.append(("5b", "1:M READ: S=1 >= 4x S=16", f"{r1[('read', 1)]:.1f} / "
                    f"{r1[('read', 16)]:.1f}", r1[("read", 1)] >= 4 * r1[("read", 16)]))
    r8 = r.get("mm_S8", {})
    if mm[1] and ("read", 8) in r8:
        out.append(("5c", "M:M READ: S=1 >= 4x S=8", f"{mm[1]['read']:.1f} / {r8[('read', 8)]:.1f}",
                    mm[1]["read"] >= 4 * r8[("read", 8)]))
    # 6: horizontal (the 28-node points are those of the S sweeps)
    mn, on, nn = r.get("m1_nodes", {}), r.get("1m_nodes", {}), r.get("mm_nodes", {})
    if ("read", 8) in mn and ("read", 28) in mn:
        a, b = mn[("read", 28)], mn[("read", 8)]
        out.append(("6a", "M:1 READ: P=28 within 15 % of P=8", f"{a:.1f} / {b:.1f}",
                    abs(a / b - 1) <= 0.15))
    if ("read", 1) in on and ("read", 16) in r1:
        a, b = on[("read", 1)], r1[("read", 16)]
        out.append(("6b", "1:M READ: Q=1 >= 4x Q=28", f"{a:.1f} / {b:.1f}", a >= 4 * b))
    if nn and mm[1]:
        ns = sorted({k[1] for k in nn}) + [28]
        bad = []
        for p in PROTOS:
            v = [nn.get((p, n)) for n in ns[:-1]] + [mm[1][p]]
            if None in v or v[-1] >= v[0] or any(b > a * 1.05 for a, b in zip(v, v[1:])):
                bad.append(p)
        out.append(("6c", f"M:M S=1: per-node bw falls with N ({ns}), every protocol",
                    "all" if not bad else "not: " + ", ".join(bad), not bad))
    # 8: pending requests (R = 128 from the S sweeps)
    rr, mr = r.get("1m_R", {}), r.get("mm_R", {})
    if rr and o1:
        rs = sorted({k[1] for k in rr}) + [128]
        col = lambda p: [o1[p] if x == 128 else rr.get((p, x), 0) for x in rs]
        bad = [p for p in PROTOS[:4]
               if any(y < x * 0.95 for x, y in zip(col(p), col(p)[1:]))]
        out.append(("8a", f"1:M S=16: non-READ bw non-decreasing in R ({rs}, 5 %)",
                    "all" if not bad else "not: " + ", ".join(bad), not bad))
    if mr and mm[1]:
        v = {**{k[1]: b for k, b in mr.items() if k[0] == "read"}, 128: mm[1]["read"]}
        pk = max(v, key=v.get)
        out.append(("8b", "M:M S=1 READ peaks at R <= 16, then declines",
                    ", ".join(f"R={x}: {v[x]:.1f}" for x in sorted(v)),
                    pk <= 16 and v[max(v)] < 0.95 * v[pk]))
    return out


def plot(fig, spec, pts, outdir, label=""):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    scen, x, xs, extra = spec
    xs = sorted(set(xs) | {k[1] for k in pts})  # with the figure's "~tag" sweeps' points
    panels = [()] if not extra else sorted({k[2:] for k in pts} | {(v,) for v in list(extra.values())[0]})
    fig_, axes = plt.subplots(1, len(panels), figsize=(5.5 * len(panels), 4), squeeze=False)
    for ax, pan in zip(axes[0], panels):
        for p in PROTOS:
            xv = [xx for xx in xs if (p, xx) + pan in pts]
            ax.plot(xv, [pts[(p, xx) + pan] for xx in xv], marker="o", label=p)
        for (p, xx), gb in PAPER.get(fig, {}).items():
            ax.plot([xx], [gb], marker="x", color="k", linestyle="none")
        ax.axhline(LINE_GBPS, color="r", linewidth=0.8)
        ax.set_xscale("log", base=2)
        ax.set_xlabel(x)
        ax.set_ylabel("bandwidth, Gb/s" + (" per node" if scen.startswith("mm") else ""))
        t = f"{fig} ({ABS[scen[:2]]})" + (f", {list(extra)[0]}={pan[0]}" if pan else "")
        ax.set_title(t + ("; x = paper" if PAPER.get(fig) else "; the paper gives no numbers"))
        ax.legend(fontsize=7)
    if label:
        fig_.text(0.995, 0.005, label, ha="right", va="bottom", fontsize=6, color="grey")
    fig_.tight_layout()
    fig_.savefig(os.path.join(outdir, fig + ".png"), dpi=90)
    plt.close(fig_)


def best(res, figs):
    """Fig. 3: each protocol's highest bandwidth in the given V = 365 B sweeps."""
    out = {}
    for f in figs:
        for k, v in res.get(f, {}).items():
            out[k[0]] = max(out.get(k[0], 0), v)
    return out


def ratios(res):
    """Figures 4-6 from the sweeps: {fig: {abs: {proto: ratio}}}."""
    def r(fig, a, b, pan=()):
        d = res.get(fig)
        if not d:
            return None
        return {p: round(d[(p, a) + pan] / d[(p, b) + pan], 3)
                for p in PROTOS if (p, a) + pan in d and (p, b) + pan in d and d[(p, b) + pan]}
    return {
        "fig3": {ab: best(res, figs) for ab, figs in (("m1", ["fig8a", "fig8b", "fig8c"]),
                                                      ("1m", ["fig10a", "fig10b", "fig10c"]),
                                                      ("mm", ["fig12a", "fig12b", "fig12c"]))},
        "fig4": {"m1": r("fig8b", 8, 1), "1m": r("fig10b", 8, 1), "mm": r("fig12b", 8, 1)},
        "fig5": {"m1": r("fig8c", 28, 4), "1m": r("fig10c", 28, 4), "mm": r("fig12c", 28, 4)},
        "fig6": {"m1": r("fig9", 4096, 365, (4,)), "1m": r("fig11", 4096, 365, (4,)),
                 "mm": r("fig13", 4096, 365, (4,))},
    }


def summary(res):
    """Figures 3-6 from the --summary points: {fig: {abs: {proto: value}}}."""
    def r(fig, a, b):
        d = res.get(fig, {})
        return {p: round(d[(p, a)] / d[(p, b)], 3)
                for p in PROTOS if (p, a) in d and (p, b) in d and d[(p, b)]}
    out = {"fig3": {}, "fig4": {}, "fig5": {}, "fig6": {}}
    for ab in ABS:
        pts = {}
        for f in ("fig4_" + ab, "fig5_" + ab, "fig6_" + ab):
            for k, v in res.get(f, {}).items():
                # 365 B and 28 nodes only (Fig. 3's points)
                if (f.startswith("fig6") and k[1] != 365) or (f.startswith("fig5") and k[1] != 28):
                    continue
                pts[k[0]] = max(pts.get(k[0], 0), v)
        out["fig3"][ab] = pts
        s1 = res.get("fig4_" + ab, {})
        hi = max([k[1] for k in s1] or [8])
        out["fig4"][ab] = r("fig4_" + ab, hi, 1)
        out["fig5"][ab] = r("fig5_" + ab, 28, 4)
        if ab == "mm" and out["fig5"][ab]:  # the paper's M:M ratio is of total bandwidth
            out["fig5"][ab] = {p: round(v * 28 / 4, 3) for p, v in out["fig5"][ab].items()}
        out["fig6"][ab] = r("fig6_" + ab, 4096, 365)
    return out


def plot_summary(sm, outdir):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    titles = {"fig3": "Fig. 3: highest bandwidth, Gb/s (M:M per node)",
              "fig4": "Fig. 4: bw(S=8) / bw(S=1) (M:M: S=2 / S=1)",
              "fig5": "Fig. 5: bw(28 nodes) / bw(4 nodes) (M:M: total; ideal 7)",
              "fig6": "Fig. 6: bw(V=4 KB) / bw(V=365 B), R=4"}
    for fig, title in titles.items():
        f, ax = plt.subplots(figsize=(7, 3.6))
        w = 0.16
        for i, p in enumerate(PROTOS):
            xs = [j + (i - 2) * w for j in range(len(ABS))]
            ax.bar(xs, [sm[fig].get(ab, {}).get(p, 0) or 0 for ab in ABS], w, label=p)
        for (ab, p), v in PAPER_SUMMARY.get(fig, {}).items():
            j = list(ABS).index(ab)
            ax.plot([j + (PROTOS.index(p) - 2) * w], [v], marker="x", color="k",
                    linestyle="none", markersize=9)
        if fig == "fig3":
            ax.axhline(LINE_GBPS, color="r", linewidth=0.8)
        else:
            ax.axhline(1.0, color="grey", linewidth=0.8)
        ax.set_xticks(range(len(ABS)))
        ax.set_xticklabels([ABS[a] for a in ABS])
        marks = "; x = paper" if PAPER_SUMMARY.get(fig) else "; the paper's text gives no numbers"
        ax.set_title(title + marks, fontsize=9)
        ax.legend(fontsize=7)
        f.tight_layout()
        f.savefig(os.path.join(outdir, fig + ".png"), dpi=90)
        plt.close(f)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-o", "--output", default=os.path.join(SRC, "docs", "huang"))
    ap.add_argument("-j", "--jobs", type=int, default=2)
    ap.add_argument("--only", help="comma list of figures (fig8a,...)")
    ap.add_argument("--quick", action="store_true", help="with --checks: the cheap points only")
    ap.add_argument("--checks", action="store_true", help="the check points only, no plots; "
                    "exit 1 if a check named by --expect fails")
    ap.add_argument("--expect", default="", help="comma list of checks that must hold")
    ap.add_argument("--summary", action="store_true",
                    help="figures 3-6 only, from the two points of each ratio")
    ap.add_argument("--abs", default="m1,1m,mm", help="with --summary: the abstractions to run")
    ap.add_argument("--set", action="append", default=[], metavar="VAR=VALUE",
                    help="a scenario variable for every run (e.g. duration=1ms: shorter "
                    "windows, say so next to the figure)")
    ap.add_argument("--protos", default=None, help="comma list of protocols to run (default: "
                    "the sweep's; e.g. the four non-READ ones while the READ model moves)")
    ap.add_argument("--x", default=None, help="comma list of x values to run (part of a "
                    "figure: the points at other x stay as they are in results.json)")
    ap.add_argument("--skip", default="", help="comma list of sweeps not to run (e.g. "
                    "fig13~128v65536: a point this machine has no memory or time for)")
    ap.add_argument("--rnicsim", default=None)
    ap.add_argument("--scenarios", default=os.path.join(SRC, "scenarios", "huang"))
    a = ap.parse_args()
    binary = a.rnicsim or next((b for b in [os.path.join(SRC, "build", "rnicsim")]
                                if os.path.exists(b)), shutil.which("rnicsim"))
    if not binary:
        sys.exit("plot_huang.py: no rnicsim binary (--rnicsim)")
    os.makedirs(a.output, exist_ok=True)
    sweeps = (QUICK_SWEEPS if a.quick else CHECK_SWEEPS) if a.checks else SWEEPS
    if a.summary:
        keep = a.abs.split(",")
        sweeps = {k: v for k, v in SUMMARY_SWEEPS.items() if k.split("_")[1] in keep}
    if a.set:
        extra = dict(x.split("=", 1) for x in a.set)
        sweeps = {k: tuple(v[:4]) + ((v[4] if len(v) > 4 else PROTOS),
                                     {**(v[5] if len(v) > 5 else {}), **extra})
                  for k, v in sweeps.items()}
    if a.only:
        only = a.only.split(",")
        # a figure's name takes its "figNN~tag" sweeps along
        sweeps = {k: v for k, v in sweeps.items()
                  if k in only or (not a.checks and k.split("~")[0] in only)}
    if a.x:
        xw = [int(v) for v in a.x.split(",")]
        sweeps = {k: v[:2] + ([x for x in v[2] if x in xw],) + tuple(v[3:])
                  for k, v in sweeps.items()}
        sweeps = {k: v for k, v in sweeps.items() if v[2]}
    if a.skip:
        sweeps = {k: v for k, v in sweeps.items() if k not in a.skip.split(",")}
    if a.protos:
        want = a.protos.split(",")
        sweeps = {k: tuple(v[:4]) + ([p for p in (v[4] if len(v) > 4 else PROTOS) if p in want],)
                  + tuple(v[5:]) for k, v in sweeps.items()}
        sweeps = {k: v for k, v in sweeps.items() if v[4]}

    # A figure run for some protocols or x values only (--protos, --x) adds
    # its points to the figure's others in results.json (e.g. the READ
    # points with their own, longer warm-up); its wall time and command are
    # kept under "fig~protos~xVALUES".
    partial = bool(a.protos or a.x) and not a.checks and not a.summary
    # Any figure run keeps the figure's points it does not run (its plot
    # shows them all; results.json keeps each point's own run, point_run).
    keep_old = not a.checks and not a.summary
    kept = {}
    rpath = os.path.join(a.output, "results.json")
    if keep_old and os.path.exists(rpath):
        with open(rpath) as f:
            prev = json.load(f)
        parse = lambda d: {(k.split("/")[0],) + tuple(int(x) for x in k.split("/")[1:]): v
                           for k, v in d.items()}
        kept = {f: (parse(prev.get("points", {}).get(f, {})),
                    parse(prev.get("round1_us", {}).get(f, {})))
                for f in {k.split("~")[0] for k in sweeps}}
    path = os.path.join(a.output, "summary.json" if a.summary else
                        "checks.json" if a.checks else "results.json")
    old = {}
    # one file per mode; figures (or check sweeps, --only) run separately add to it
    if os.path.exists(path) and (not a.checks or a.only):
        with open(path) as f:
            old = json.load(f)
    key_s = lambda k: f"{k[0]}/" + "/".join(map(str, k[1:]))

    def collect():
        out = {"quick": a.quick, "wall_seconds": wall, "commands": cmds, "run_on": runon,
               "points": {f: {key_s(k): v for k, v in d.items()} for f, d in res.items()},
               "round1_us": {f: {key_s(k): v for k, v in d.items()} for f, d in rounds.items()},
               "run_wall_s": {f: {key_s(k): v for k, v in d.items()} for f, d in runwall.items()},
               # rounds of the slowest requesting node in each point's window
               "window_rounds": {f: {key_s(k): v for k, v in d.items()}
                                 for f, d in winrounds.items()},
               # the run (a "commands" / "run_on" tag) each point came from
               "point_run": {f: {key_s(k): v for k, v in d.items()} for f, d in ptag.items()}}
        for k in ("wall_seconds", "commands", "run_on"):
            out[k] = {**old.get(k, {}), **out[k]}
        # per point: a figure's points not run this time stay (a sweep of a
        # figure run alone, --x, --protos, --skip), each with its own run
        for k in ("points", "round1_us", "run_wall_s", "window_rounds", "point_run"):
            mine = out[k]
            out[k] = {f: dict(d) for f, d in old.get(k, {}).items()}
            for f, d in mine.items():
                out[k].setdefault(f, {}).update(d)
        if not a.checks and not a.summary:  # the ratio figures from every point so far
            out["ratios"] = ratios({f: {(k.split("/")[0],) + tuple(int(x) for x in k.split("/")[1:]): v
                                        for k, v in d.items()} for f, d in out["points"].items()})
        return out

    def save(out):
        with open(path + ".tmp", "w") as f:
            json.dump(out, f, indent=1, sort_keys=True)
        os.replace(path + ".tmp", path)

    res, wall, cmds, rounds, runon, runwall, winrounds = {}, {}, {}, {}, {}, {}, {}
    ptag = {}  # figure -> point -> the run tag that produced it
    figs = {}  # the figures' results.json, for --checks to reuse identical runs
    fpath = os.path.join(a.output, "results.json")
    rev = run_label()
    bin_id = binary_id(binary)
    with tempfile.TemporaryDirectory() as tmp:
        for fig, spec in sweeps.items():
            load0 = os.getloadavg()[0]
            t_start = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
            # --checks: a sweep a figure already ran, same command and model,
            # is taken from results.json (its commit recorded), not run again
            if a.checks and not a.quick and os.path.exists(fpath):  # read again: a figure
                with open(fpath) as f:                               # run may have added to it
                    figs = json.load(f)
            got = reuse_figure_run(figs, binary, a.scenarios, spec) if a.checks else None
            if got:
                pts, w, c, r1, rw, nr, ftag = got
                print(f"{fig}: {len(pts)} points from results.json's {ftag} "
                      f"(same command, same model, {figs['run_on'][ftag]['commit']})",
                      file=sys.stderr)
                wall[fig], cmds[fig] = w, c
                runon[fig] = {**figs["run_on"][ftag], "reused_from": ftag}
                # the warnings its figure run printed, again for the check
                warm = (spec[5] if len(spec) > 5 else {}).get("warmup") or \
                    scen_warmup(a.scenarios, spec[0])
                for k in sorted(pts):
                    if k in r1:
                        warn_round1(spec[0], k, r1[k], warm)
                    if k in nr:
                        warn_rounds(spec[0], k, nr[k])
                res.setdefault(fig, {}).update(pts)
                ptag.setdefault(fig, {}).update({k: fig for k in pts})
                rounds.setdefault(fig, {}).update(r1)
                runwall.setdefault(fig, {}).update(rw)
                winrounds.setdefault(fig, {}).update(nr)
                save(collect())
                continue
            pts, w, c, r1, rw, nr = run_sweep(binary, a.scenarios, os.path.join(tmp, fig), spec,
                                          a.jobs)
            load1 = os.getloadavg()[0]
            print(f"{fig}: {len(pts)} points, {w:.0f} s (load {load0:.1f} -> {load1:.1f}, "
                  f"on {rev})", file=sys.stderr)
            tag = fig + ("~" + a.protos if a.protos and partial else "") + \
                ("~x" + a.x if a.x and partial else "")
            wall[tag], cmds[tag] = w, c
            # what it ran on: the commit, when, the 1-minute load average
            # at its start and end (2 cores shared with other jobs)
            runon[tag] = {"commit": rev, "binary_sha256": bin_id, "started": t_start,
                          "jobs": a.jobs,
                          "load_start": round(load0, 1), "load_end": round(load1, 1)}
            # "figNN~tag" sweeps (points with their own warm-up) add to figNN
            base = fig if a.checks else fig.split("~")[0]
            new_keys = list(pts)
            if keep_old:
                # what this run measured replaces, the rest of the figure stays
                old_pts, old_r1 = kept.pop(base, ({}, {}))
                pts = {**old_pts, **pts}
                r1 = {**old_r1, **r1}
            ptag.setdefault(base, {}).update({k: tag for k in new_keys})
            res.setdefault(base, {}).update(pts)
            rounds.setdefault(base, {}).update(r1)
            runwall.setdefault(base, {}).update(rw)
            winrounds.setdefault(base, {}).update(nr)
            if not a.checks and not a.summary and base in SWEEPS:
                mins = sum(v for k, v in wall.items() if k.split("~")[0] == base) / 60
                plot(base, SWEEPS[base][:4], res[base], a.output,
                     f"rnicsim {rev}, {t_start}, {mins:.0f} min at -j {a.jobs}, "
                     f"load {load0:.0f}-{load1:.0f}")
                save(collect())  # after each sweep: a long figure run keeps what it ran
            elif a.checks:
                save(collect())  # the check points so far (--only adds the rest later)
    out = collect()
    rc = 0
    if a.checks:
        merged = {}
        for f, d in out["points"].items():
            for k, v in d.items():
                key = (k.split("/")[0],) + tuple(int(x) for x in k.split("/")[1:])
                merged.setdefault(f.split("~")[0], {})[key] = v
        cs = checks(merged)
        out["checks"] = [{"check": n, "what": w, "value": v, "holds": h} for n, w, v, h in cs]
        print("| check | what | simulated | holds |\n|---|---|---|---|")
        for n, w, v, h in cs:
            print(f"| {n} | {w} | {v} | {'yes' if h else 'no'} |")
        want = [x for x in a.expect.split(",") if x]
        got = {str(n): h for n, _, _, h in cs}
        for x in want:
            if not got.get(x):
                print(f"plot_huang.py: check {x} does not hold", file=sys.stderr)
                rc = 1
    if a.summary:
        allres = {f: {(k.split("/")[0], int(k.split("/")[1])): v for k, v in d.items()}
                  for f, d in out["points"].items()}
        out["summary"] = summary(allres)
        plot_summary(out["summary"], a.output)
    save(out)
    return rc


if __name__ == "__main__":
    sys.exit(main())
