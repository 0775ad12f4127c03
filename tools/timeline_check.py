#!/usr/bin/env python3
"""Check and read an rnicsim timeline (rnicsim run --timeline FILE.json).

    timeline_check.py FILE.json                 check it; print a summary
    timeline_check.py FILE.json --flow [N]      ... and the steps of the Nth work
                                                request followed to its poll (default 1)
    timeline_check.py FILE.json --flow-of OP    ... of the first one whose requester
                                                slice names OP (RDMA_WRITE, RDMA_READ, ...)
    timeline_check.py FILE.json --tracks        ... and every track with its slice count
    timeline_check.py FILE.json --durations     ... and, per track, the time its slices
                                                of the followed work request took

It checks what a trace-event viewer (Perfetto, chrome://tracing) needs: a
JSON object with a traceEvents list; every event with a known phase and the
fields that phase requires; metadata naming every process and thread used;
on each thread, complete slices ("X") properly nested (none overlaps another
partly); every flow event ("s", "t", "f") inside a slice of its thread, the
events of a flow in time order, starting with "s".  Exit status 0 when the
file is valid, 1 with the first problem on stderr when it is not.

Times in the file are microseconds; the steps are printed in nanoseconds.
"""
import argparse
import json
import sys

PHASES = {"X", "i", "C", "M", "s", "t", "f"}


def fail(msg):
    print(f"timeline_check: {msg}", file=sys.stderr)
    sys.exit(1)


def ns(us):
    return round(us * 1000)


def load(path):
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        fail(f"{path}: not JSON: {e}")
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        fail(f"{path}: not a trace-event object (no traceEvents list)")
    return doc


def check(doc):
    evs = doc["traceEvents"]
    pnames, tnames = {}, {}
    slices = {}  # (pid, tid) -> [(start_ns, end_ns, name)]
    flows = {}  # id -> [(ts_ns, ph, pid, tid, order)]
    for k, e in enumerate(evs):
        where = f"event {k}"
        if not isinstance(e, dict):
            fail(f"{where}: not an object")
        ph = e.get("ph")
        if ph not in PHASES:
            fail(f"{where}: unknown phase {ph!r}")
        for field in ("pid", "tid"):
            if not isinstance(e.get(field), int):
                fail(f"{where} ({ph}): no integer {field}")
        if ph == "M":
            if e.get("name") not in ("process_name", "thread_name", "process_sort_index",
                                     "thread_sort_index"):
                fail(f"{where}: unknown metadata {e.get('name')!r}")
            if e["name"] == "process_name":
                pnames[e["pid"]] = e["args"]["name"]
            elif e["name"] == "thread_name":
                tnames[(e["pid"], e["tid"])] = e["args"]["name"]
            continue
        if not isinstance(e.get("ts"), (int, float)) or e["ts"] < 0:
            fail(f"{where} ({ph}): no time stamp")
        if e["pid"] not in pnames or (e["pid"], e["tid"]) not in tnames:
            fail(f"{where} ({ph}): thread {e['pid']}/{e['tid']} used before its metadata")
        if ph in ("X", "i", "C") and not isinstance(e.get("name"), str):
            fail(f"{where} ({ph}): no name")
        if ph == "X":
            if not isinstance(e.get("dur"), (int, float)) or e["dur"] < 0:
                fail(f"{where}: complete event without a duration")
            slices.setdefault((e["pid"], e["tid"]), []).append(
                (ns(e["ts"]), ns(e["ts"] + e["dur"]), e["name"]))
        elif ph == "i":
            if e.get("s") not in ("t", "p", "g"):
                fail(f"{where}: instant without a scope")
        elif ph == "C":
            if not isinstance(e.get("args"), dict) or not all(
                    isinstance(v, (int, float)) for v in e["args"].values()):
                fail(f"{where}: counter without numeric args")
        else:  # flow
            if not isinstance(e.get("id"), int) or e.get("cat") != "wr":
                fail(f"{where}: flow event without an id / category")
            flows.setdefault(e["id"], []).append((ns(e["ts"]), ph, e["pid"], e["tid"], k))
    # nesting: sort by (start, -end); a slice must end before the enclosing one does
    for key, sl in slices.items():
        sl.sort(key=lambda s: (s[0], -s[1]))
        stack = []
        for s in sl:
            while stack and stack[-1][1] <= s[0]:
                stack.pop()
            if stack and s[1] > stack[-1][1]:
                fail(f"thread {tnames[key]!r}: slices {stack[-1][2]!r} "
                     f"[{stack[-1][0]}, {stack[-1][1]}] ns and {s[2]!r} [{s[0]}, {s[1]}] ns "
                     f"overlap without nesting")
            stack.append(s)
    # flows: in time order, each bound to a slice of its thread
    bound = {}
    for fid, fe in flows.items():
        fe.sort(key=lambda x: (x[0], x[4]))
        if fe[0][1] != "s":
            continue  # started before a time window: viewers begin it at its first step
        for i, (t, ph, pid, tid, _) in enumerate(fe):
            if ph == "s" and i:
                fail(f"flow {fid}: a second start")
            if ph == "f" and i != len(fe) - 1:
                fail(f"flow {fid}: events after its end")
            sl = [s for s in slices.get((pid, tid), []) if s[0] <= t < max(s[1], s[0] + 1)]
            if not sl:
                fail(f"flow {fid}: event at {t} ns binds to no slice of {tnames[(pid, tid)]!r}")
            inner = max(sl, key=lambda s: s[0])
            bound.setdefault(fid, []).append(
                (t, ph, pnames[pid], tnames[(pid, tid)], inner[2], inner[0], inner[1]))
    return pnames, tnames, slices, bound


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("file")
    ap.add_argument("--flow", type=int, nargs="?", const=1)
    ap.add_argument("--flow-of")
    ap.add_argument("--tracks", action="store_true")
    ap.add_argument("--durations", action="store_true")
    a = ap.parse_args()
    doc = load(a.file)
    pnames, tnames, slices, bound = check(doc)
    complete = [fid for fid in sorted(bound) if bound[fid][-1][1] == "f"]
    n_slices = sum(len(s) for s in slices.values())
    other = doc.get("otherData", {})
    print(f"valid: {len(doc['traceEvents'])} events, {n_slices} slices on {len(tnames)} tracks, "
          f"{len(bound)} work requests followed, {len(complete)} to their poll"
          + (", truncated" if other.get("truncated") else ""))
    if a.tracks:
        for key in sorted(tnames):
            print(f"  {pnames[key[0]]:8} {tnames[key]:32} {len(slices.get(key, []))} slices")
    pick = None
    if a.flow_of:
        for fid in complete:
            if any(a.flow_of in step[4] for step in bound[fid] if "requester" in step[3]):
                pick = fid
                break
        if pick is None:
            fail(f"no work request with a requester slice naming {a.flow_of} reaches its poll")
    elif a.flow is not None or a.durations:
        n = a.flow or 1
        if len(complete) < n:
            fail(f"only {len(complete)} work requests reach their poll")
        pick = complete[n - 1]
    if pick is not None:
        steps = bound[pick]
        print(f"flow {pick}: {len(steps)} steps, {steps[-1][0] - steps[0][0]} ns "
              f"from {steps[0][4]} to {steps[-1][4]}")
        for t, ph, proc, track, name, s0, s1 in steps:
            print(f"  {ph} {t:12d} ns  {proc:6} {track:28} {name}  [{s0}, {s1}] ns")
        if a.durations:
            per = {}
            for t, ph, proc, track, name, s0, s1 in steps:
                k = f"{proc} {track}"
                per[k] = per.get(k, 0) + (s1 - s0)
            print("time in the followed work request's slices, per track (ns):")
            for k, v in per.items():
                print(f"  {k:36} {v}")


if __name__ == "__main__":
    main()
