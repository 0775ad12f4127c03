#!/usr/bin/env python3
"""Lossy zero-sided runs over many seeds: does any hang or break exactly-once?

    /usr/bin/python3 tools/zs_seeds.py [--rnicsim build/rnicsim] [--seeds 1-20]
                                       [--only shuffle,pipe2,...] [--timeout 300]

Runs, one at a time (the machine is shared), the flows of
test/scenario/test_zerosided.sh item 2 (2 producers, 2 consumers on a star)
under heavy random loss, for every seed:

    shuffle   N:M shuffle, 64 B items, loss 1e-2 (one uplink slot per node:
              the run that hung at seed 2 when slots came free before p_exp's
              verdict)
    lanes2    the same with --lanes=2
    pipe2     the same with --pipeline=2
    lb        load balancing, 64 B items, loss 3e-3
    repl      replication, 1 KiB items, loss 1e-3

A run passes when it exits 0 within the timeout (a hang runs to the scenario's
stop time, 1 s simulated, and fails), every consumer's order check saw items
and no order violation, no fatal NAK, no slot bit left set, and frames were
really lost.  Prints one line per run and a summary; exits 1 if any failed.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

# the flows test_zerosided.sh runs (items 2, 2b-2h)
FLOWS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scenarios", "zero-sided",
                     "lossy-flows.yaml")

CASES = {
    "shuffle": ["vars.mode=shuffle", "vars.item=64", "topology.link.loss=1e-2"],
    "lanes2": ["vars.mode=shuffle", "vars.item=64", "vars.lanes=2", "topology.link.loss=1e-2"],
    "pipe2": ["vars.mode=shuffle", "vars.item=64", "vars.pipe=2", "topology.link.loss=1e-2"],
    "lb": ["vars.mode=lb", "vars.item=64", "topology.link.loss=3e-3"],
    "repl": ["vars.mode=replicate", "vars.item=1024", "topology.link.loss=1e-3"],
}


def seeds(spec):
    out = []
    for part in spec.split(","):
        lo, _, hi = part.partition("-")
        out += range(int(lo), int(hi or lo) + 1)
    return out


def check(path):
    d = json.load(open(path))
    t = d["tables"]
    if "order_violation" in t:
        return "order violation"
    oc = t.get("order_check") or []
    if not oc or any(r["messages_checked"] <= 0 for r in oc):
        return "a consumer checked no item"
    sw = t["zs_switch"][0]
    if sw["fatal_naks"] or sw["slots_left"]:
        return "fatal NAKs %d, slots left %d" % (sw["fatal_naks"], sw["slots_left"])
    lost = sum(lk["pkts_lost"] for lk in d["counters"]["links"].values())
    if lost == 0:
        return "no frame lost"
    return None, sum(r["messages_checked"] for r in oc), lost, sw


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rnicsim", default="build/rnicsim")
    ap.add_argument("--seeds", default="1-10")
    ap.add_argument("--only", default=",".join(CASES))
    ap.add_argument("--timeout", type=float, default=300)
    a = ap.parse_args()
    bad = 0
    with tempfile.TemporaryDirectory() as tmp:
        yml = FLOWS
        for case in a.only.split(","):
            for s in seeds(a.seeds):
                out = os.path.join(tmp, "%s-%d.json" % (case, s))
                cmd = [a.rnicsim, "run", yml, "-o", out, "--quiet", "--set", "seed=%d" % s]
                for kv in CASES[case]:
                    cmd += ["--set", kv]
                try:
                    rc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                        timeout=a.timeout).returncode
                except subprocess.TimeoutExpired:
                    rc = "timeout"
                r = check(out) if rc == 0 and os.path.exists(out) else "exit %s" % rc
                if isinstance(r, tuple):
                    _, items, lost, sw = r
                    print("%-8s seed %3d  ok    %6d items, %4d frames lost, %3d READ re-issues, "
                          "%3d timeouts, node_reads_max %d, cons_reads_max %d" % (
                              case, s, items, lost, sw["reissues_read"], sw["timeouts"],
                              sw["node_reads_max"], sw["cons_reads_max"]), flush=True)
                else:
                    bad += 1
                    print("%-8s seed %3d  FAIL  %s" % (case, s, r), flush=True)
    print("%d failed" % bad)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
