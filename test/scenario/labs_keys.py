#!/usr/bin/env python3
"""Check the answer keys of the labs (docs/labs/*.md) against rnicsim.

    labs_keys.py RNICSIM SRC_DIR SCRATCH [--print] [--only lab3,lab4] [--keys-only]

Every lab's "Answer key" section ends with a fenced block whose info string
is `keys`: one line per key, `NAME VALUE [TOLERANCE]` (tolerance `3%`, or
`0.01` absolute; none: exact).  This script runs the lab's commands - the
ones the lab tells students to run - computes every key by its name, and
compares.  A key in a lab without a computation here, or a computation
without a key in its lab, is an error too, so the documents and this check
cannot drift apart (--keys-only checks just that, running nothing).
--print shows the computed values (for writing a key).
Exit status 0 when every key matches.
"""
import glob
import json
import os
import re
import shutil
import subprocess
import sys

BIN, SRC, SCRATCH = (os.path.abspath(a) for a in sys.argv[1:4])  # commands run in SCRATCH
PRINT = "--print" in sys.argv
KEYS_ONLY = "--keys-only" in sys.argv  # only that keys and checks correspond (nothing runs)
ONLY = None
if "--only" in sys.argv:
    ONLY = sys.argv[sys.argv.index("--only") + 1].split(",")
PY = "/usr/bin/python3"
os.makedirs(SCRATCH, exist_ok=True)


def sh(args, cwd=SCRATCH, ok=(0,)):
    """Run a command in the scratch directory; (exit status, stdout)."""
    p = subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=300)
    if p.returncode not in ok:
        raise RuntimeError(f"{' '.join(args)}: exit {p.returncode}\n{p.stdout[-2000:]}{p.stderr[-2000:]}")
    return p.returncode, p.stdout


def scn(name):
    return os.path.join(SRC, "scenarios", "labs", name)


_cache = {}


def run_json(key, scenario, *sets, extra=()):
    """rnicsim run SCENARIO --set ... -o KEY.json: the results (cached)."""
    if key not in _cache:
        out = os.path.join(SCRATCH, key + ".json")
        args = [BIN, "run", scn(scenario), "-q", "-o", out]
        for s in sets:
            args += ["--set", s]
        sh(args + list(extra))
        _cache[key] = json.load(open(out))
    return _cache[key]


def table(res, name, col, row=0):
    return res["tables"][name][row][col]


def nic(res, host, counter):
    return res["counters"]["hosts"][host]["nic"][counter]


# ---------------------------------------------------------------- lab 1

def hello_flow():
    if "hello" not in _cache:
        d = os.path.join(SCRATCH, "lab1")
        os.makedirs(d, exist_ok=True)
        shutil.copy(scn("hello.yaml"), d)
        sh(["cc", "-shared", "-fPIC", "-I" + os.path.join(SRC, "include"),
            os.path.join(SRC, "docs", "examples", "hello_write.c"), "-o",
            os.path.join(d, "hello_write.so")])
        _, out = sh([BIN, "run", "hello.yaml", "--timeline", "hello.json"], cwd=d)
        assert 'received: "hello from h1"' in out, out
        _, flow = sh([PY, os.path.join(SRC, "tools", "timeline_check.py"),
                      os.path.join(d, "hello.json"), "--flow"])
        steps = [l.split(None, 5) for l in flow.splitlines() if l.startswith("  ")]
        doc = json.load(open(os.path.join(d, "hello.json")))
        _cache["hello"] = (steps, doc)
    return _cache["hello"]


def step_slice_ns(track_word, name_word):
    steps, _ = hello_flow()
    for s in steps:
        line = s[4] + " " + s[5]  # track and slice ("nic: dma read payload psn 0 [...]")
        if track_word in line and name_word in line:
            a, b = re.search(r"\[(\d+), (\d+)\] ns", s[5]).groups()
            return int(b) - int(a)
    raise RuntimeError(f"no step {track_word} {name_word}")


def hello_qpc_fetch_ns():
    _, doc = hello_flow()
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in doc["traceEvents"]
             if e["ph"] == "M" and e["name"] == "thread_name"}
    procs = {e["pid"]: e["args"]["name"] for e in doc["traceEvents"]
             if e["ph"] == "M" and e["name"] == "process_name"}
    for e in doc["traceEvents"]:
        if e["ph"] == "X" and procs[e["pid"]] == "h1" and "qp context fetch" in e["name"]:
            return round(e["dur"] * 1000)
    raise RuntimeError("no qp context fetch on h1")


# ---------------------------------------------------------------- lab 2

def lat(key, *sets):
    return table(run_json(key, "latency.yaml", *sets), "write_lat", "t_avg_us")


# ---------------------------------------------------------------- lab 4

def check_order(*sets):
    args = [BIN, "check-order", scn("ordering.yaml"), "--runs", "3"]
    for s in sets:
        args += ["--set", s]
    rc, _ = sh(args, ok=(0, 1))
    return rc


# ---------------------------------------------------------------- lab 6

def loss_run(lossy):
    key = "loss" if lossy else "noloss"
    if key not in _cache:
        d = os.path.join(SCRATCH, "lab6" + key)
        os.makedirs(d, exist_ok=True)
        args = [BIN, "run", scn("loss.yaml"), "-q", "-o", "res.json", "--timeline", "loss.json"]
        if not lossy:
            args += ["--set", "topology.links.0.loss=0"]
        sh(args, cwd=d)
        res = json.load(open(os.path.join(d, "res.json")))
        tl = json.load(open(os.path.join(d, "loss.json")))
        _cache[key] = (d, res, tl)
    return _cache[key]


def loss_instants(word):
    _, _, tl = loss_run(True)
    return sum(1 for e in tl["traceEvents"] if e["ph"] == "i" and e["name"].startswith(word))


def resent_psns():
    d, _, _ = loss_run(True)
    _, out = sh(["tshark", "-r", os.path.join(d, "out", "labs", "loss-h0.pcap"), "-T", "fields",
                 "-e", "ip.src", "-e", "infiniband.bth.psn"])
    seen, dup = set(), 0
    for line in out.splitlines():
        f = line.split()
        if len(f) == 2 and f[0] == "10.0.0.1":  # h0's own frames
            dup += f[1] in seen
            seen.add(f[1])
    return dup


# ---------------------------------------------------------------- lab 8

def table2_hrt():
    out = os.path.join(SCRATCH, "t2.json")
    sh([BIN, "table2", "--channels=ring-imm", "--quick", "--no-memory", "--no-order",
        "--json", out])
    return json.load(open(out))["channels"][0]["measured"]["hrt"]["mean"]


def channel_check_order():
    rc, _ = sh([BIN, "check-order", scn("channel.yaml"), "--runs", "2", "--set",
                "hardware.nic.dma_ordering=relaxed", "--set", "vars.messages=300"], ok=(0, 1))
    return rc


KEYS = {
    "lab1": {
        "hello_steps": lambda: len(hello_flow()[0]),
        "hello_post_to_poll_ns": lambda: int(hello_flow()[0][-1][1]) - int(hello_flow()[0][0][1]),
        "hello_payload_read_ns": lambda: step_slice_ns("dma read", "payload"),
        "hello_remote_write_ns": lambda: step_slice_ns("dma write", "resp: payload"),
        "hello_qpc_fetch_ns": hello_qpc_fetch_ns,
    },
    "lab2": {
        "lat_8b_us": lambda: lat("lat"),
        "lat_no_switch_delta_us": lambda: lat("lat") - lat("lat_sw0", "topology.switch.latency=0ns"),
        "lat_pcie_write_100ns_delta_us":
            lambda: lat("lat") - lat("lat_wl", "hardware.pcie.write_latency=100ns"),
        "lat_64b_no_inline_delta_us":
            lambda: lat("lat64_noinl", "vars.size=64", "vars.inline=0")
            - lat("lat64", "vars.size=64"),
    },
    "lab3": {
        "bw_mtu4096_gbps": lambda: table(run_json("bw4096", "bandwidth.yaml"), "write_bw", "bw_gbps"),
        "bw_mtu1024_gbps": lambda: table(run_json("bw1024", "bandwidth.yaml", "vars.mtu=1024"),
                                         "write_bw", "bw_gbps"),
        "bw_mtu256_gbps": lambda: table(run_json("bw256", "bandwidth.yaml", "vars.mtu=256"),
                                        "write_bw", "bw_gbps"),
        "rate_64b_inline_mpps":
            lambda: table(run_json("r64", "bandwidth.yaml", "vars.size=64"), "write_bw",
                          "msg_rate_mpps"),
        "rate_64b_no_inline_mpps":
            lambda: table(run_json("r64n", "bandwidth.yaml", "vars.size=64", "vars.inline=0"),
                          "write_bw", "msg_rate_mpps"),
        "post_list_1_mops": lambda: table(run_json("pl1", "post_list.yaml"), "microbench", "mops"),
        "post_list_32_mops": lambda: table(run_json("pl32", "post_list.yaml", "vars.post_list=32"),
                                           "microbench", "mops"),
    },
    "lab4": {
        "last_byte_strict_exit": lambda: check_order(),
        "last_byte_relaxed_exit": lambda: check_order("hardware.nic.dma_ordering=relaxed"),
        "last_byte_adaptive_routing_exit": lambda: check_order("hardware.nic.transport=ib-ar"),
        "imm_relaxed_exit":
            lambda: check_order("vars.protocol=imm", "hardware.nic.dma_ordering=relaxed"),
    },
    "lab5": {
        "qps_16_mops": lambda: table(run_json("q16", "qp_scaling.yaml"), "microbench", "mops"),
        "qps_1024_mops": lambda: table(run_json("q1024", "qp_scaling.yaml", "vars.qps=1024"),
                                       "microbench", "mops"),
        "qps_16_server_qpc_misses": lambda: nic(run_json("q16", "qp_scaling.yaml"), "h1",
                                                "qpc_misses"),
        "qps_1024_server_qpc_misses":
            lambda: nic(run_json("q1024", "qp_scaling.yaml", "vars.qps=1024"), "h1", "qpc_misses"),
    },
    "lab6": {
        "loss_bw_gbps": lambda: table(loss_run(True)[1], "write_bw", "bw_gbps"),
        "no_loss_bw_gbps": lambda: table(loss_run(False)[1], "write_bw", "bw_gbps"),
        "frames_lost": lambda: loss_run(True)[1]["counters"]["links"]["node0->sw0"]["pkts_lost"],
        "psn_sequence_naks": lambda: loss_instants("NAK: PSN sequence error"),
        "go_back_n": lambda: loss_instants("go back N"),
        "frames_resent": resent_psns,
    },
    "lab7": {
        "srq_total_gb": lambda: table(run_json("srq", "rima_vs_srq.yaml", "vars.bins=single"),
                                      "footprint", "srq_total_bytes") / 1e9,
        "rima_total_mb": lambda: table(run_json("rima", "rima_vs_srq.yaml", "vars.bins=rima"),
                                       "footprint", "rima_total_bytes") / 1e6,
        "rima_committed_mib": lambda: table(run_json("rima", "rima_vs_srq.yaml", "vars.bins=rima"),
                                            "footprint", "rima_committed_bytes") / 1048576,
    },
    "lab8": {
        "one_way_64b_us": lambda: table(run_json("ch", "channel.yaml", "vars.mode=pingpong",
                                                 "vars.sizes=64", "vars.messages=100"),
                                        "taranov_pingpong", "one_way_us"),
        "half_round_trips": table2_hrt,
        "relaxed_exit": channel_check_order,
    },
}


def doc_keys():
    """{lab: [(name, value, tolerance, file)]} from the labs' keys blocks."""
    found = {}
    for path in sorted(glob.glob(os.path.join(SRC, "docs", "labs", "[0-9]*.md"))):
        lab = "lab%d" % int(os.path.basename(path)[:2])
        text = open(path, encoding="utf-8").read()
        blocks = re.findall(r"```keys\n(.*?)```", text, re.S)
        if len(blocks) != 1:
            sys.exit(f"{path}: expected one ```keys block, found {len(blocks)}")
        for line in blocks[0].splitlines():
            f = line.split()
            if not f:
                continue
            tol = f[2] if len(f) > 2 else None
            found.setdefault(lab, []).append((f[0], f[1], tol, path))
    return found


def matches(actual, want, tol):
    try:
        w = float(want)
    except ValueError:
        return str(actual) == want
    if tol is None:
        return float(actual) == w
    t = abs(w) * float(tol[:-1]) / 100 if tol.endswith("%") else float(tol)
    return abs(float(actual) - w) <= t


def main():
    keys = doc_keys()
    bad = 0
    for lab in sorted(set(KEYS) | set(keys)):
        documented = {k[0]: k for k in keys.get(lab, [])}
        if KEYS_ONLY:
            for name in set(KEYS.get(lab, {})) ^ set(documented):
                print(f"FAIL {lab} {name}: in only one of the lab's keys block and labs_keys.py")
                bad += 1
            continue
        if ONLY and lab not in ONLY:
            continue
        for name in KEYS.get(lab, {}):
            if name not in documented:
                print(f"FAIL {lab} {name}: computed here but not in the lab's keys block")
                bad += 1
        for name, (k, want, tol, path) in documented.items():
            fn = KEYS.get(lab, {}).get(name)
            if not fn:
                print(f"FAIL {lab} {name}: in {os.path.basename(path)} but nothing checks it")
                bad += 1
                continue
            try:
                got = fn()
            except Exception as e:  # a failed command is a failed key
                print(f"FAIL {lab} {name}: {e}")
                bad += 1
                continue
            if isinstance(got, float):
                got = round(got, 4)
            ok = matches(got, want, tol)
            bad += not ok
            print(f"{'PASS' if ok else 'FAIL'} {lab} {name}: {got} (key {want}"
                  + (f" +-{tol}" if tol else "") + ")")
    if PRINT:
        return 0
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
