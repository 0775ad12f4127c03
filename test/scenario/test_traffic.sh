#!/usr/bin/env bash
# The built-in traffic generator through the rnicsim command: FCT output
# (summary table, JSON "traffic" object with per-bucket percentiles, the
# flows CSV), a permutation with PFC that drops nothing, a data-checked run
# with payloads, determinism, and the refusals of payload: none (a data
# check, programs) and of bad traffic keys with file:line:col.
. "$(dirname "$0")/lib.sh"

cat > "$scratch/perm.yaml" <<Y
name: tperm
payload: none
topology:
  kind: leaf-spine
  leaves: 4
  spines: 4
  hosts_per_leaf: 4
  link: {rate: 100Gbps, delay: 1us}
  pfc: {}
traffic: {pattern: permutation, size: 256KiB, qps_per_host: 2, flows_file: $scratch/flows.csv}
Y
"$bin" run "$scratch/perm.yaml" -o "$scratch/perm.json" > "$scratch/perm.out" 2>&1
check "permutation runs" "[ \$? -eq 0 ] || grep -q 'done' '$scratch/perm.out'"
check "summary table" "grep -q 'FCT p50' '$scratch/perm.out' && grep -q 'data check: off (payload: none' '$scratch/perm.out'"
"$py" - "$scratch/perm.json" "$scratch/flows.csv" <<'PY' && ok "json and csv" || bad "json and csv"
import json, sys, csv
d = json.load(open(sys.argv[1]))
t = d["traffic"]
assert t["pattern"] == "permutation" and t["flows"] == 32 and t["unfinished"] == 0, t
assert t["qps"] == 64, t["qps"]
allb = [b for b in t["buckets"] if b["sizes"] == "all"][0]
assert allb["flows"] == 32 and 0 < allb["fct_p50_ps"] <= allb["fct_p95_ps"] <= allb["fct_p99_ps"]
assert allb["slowdown_p50"] >= 1.0
drops = sum(l["pkts_dropped"] for l in d["counters"]["links"].values())
assert drops == 0, drops
rows = list(csv.DictReader(open(sys.argv[2])))
assert len(rows) == 32 and all(r["status"] == "done" for r in rows)
assert all(int(r["size_bytes"]) == 131072 for r in rows)
assert sorted(int(r["src"]) for r in rows) == sorted(list(range(16)) * 2)
PY
"$bin" run "$scratch/perm.yaml" -o "$scratch/perm2.json" -q > /dev/null 2>&1
check "deterministic" "cmp -s '$scratch/perm.json' '$scratch/perm2.json'"

# with payloads and the data check
sed -e 's/payload: none/payload: carried/' -e 's/size: 256KiB,/size: 64KiB, verify: true,/' \
    "$scratch/perm.yaml" > "$scratch/verify.yaml"
"$bin" run "$scratch/verify.yaml" -o "$scratch/verify.json" > "$scratch/verify.out" 2>&1
check "verify: every flow checked" "grep -q 'data check: 32 flows verified, 0 with wrong bytes' '$scratch/verify.out'"

# the same over a k = 4 fat tree (16 hosts, 3 tiers): bytes checked, nothing dropped
sed -e '/^  leaves:/d' -e '/^  spines:/d' -e 's/^  hosts_per_leaf: 4/  k: 4/' \
    -e 's/kind: leaf-spine/kind: fat-tree/' "$scratch/verify.yaml" > "$scratch/ft.yaml"
"$bin" run "$scratch/ft.yaml" -o "$scratch/ft.json" > "$scratch/ft.out" 2>&1
check "fat tree: every flow checked" "grep -q 'data check: 32 flows verified, 0 with wrong bytes' '$scratch/ft.out'"
"$py" - "$scratch/ft.json" <<'PY' && ok "fat tree json" || bad "fat tree json"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["topology"]["kind"] == "fat-tree" and d["topology"]["k"] == 4 and d["topology"]["hosts"] == 16
assert d["traffic"]["unfinished"] == 0
assert sum(l["pkts_dropped"] for l in d["counters"]["links"].values()) == 0
core = [n for n in d["counters"]["links"] if n.startswith("core")]
assert len(core) == 16 and sum(d["counters"]["links"][n]["pkts_sent"] for n in core) > 0, core
PY

# PFC deadlock: the ring scenario deadlocks (flows unfinished at stop_time,
# exit 4) and the detector names the clockwise cycle; the leaf-spine
# permutation above paused links under PFC but reports none
"$bin" run "$src/scenarios/fabric/pfc-deadlock.yaml" -o "$scratch/dl.json" > "$scratch/dl.out" 2>&1
rc=$?
check "deadlock: time limit, flows unfinished" "[ $rc -eq 4 ] && grep -q '160 unfinished' '$scratch/dl.out'"
check "deadlock: summary line" "grep -q 'PFC deadlock at .*priority 3, a cycle of 5 paused links: ring0->ring1 ring1->ring2' '$scratch/dl.out'"
"$py" - "$scratch/dl.json" "$scratch/perm.json" <<'PY' && ok "deadlock json" || bad "deadlock json"
import json, sys
d = json.load(open(sys.argv[1]))["counters"]["pfc_deadlock"]
assert d["prio"] == 3 and 100e6 < d["at_ps"] < 5e9, d
assert d["links"] == ["ring%d->ring%d" % (i, (i + 1) % 5) for i in range(5)], d
p = json.load(open(sys.argv[2]))["counters"]
assert "pfc_deadlock" not in p
PY

# refusals
sed -e 's/size: 256KiB,/size: 64KiB, verify: true,/' "$scratch/perm.yaml" > "$scratch/bad1.yaml"
out=$("$bin" run "$scratch/bad1.yaml" 2>&1); rc=$?
check "payload none refuses verify" "[ $rc -eq 2 ] && echo '$out' | grep -q 'bad1.yaml:10:[0-9]*:.*verify.*payload: none'"
cat > "$scratch/bad2.yaml" <<Y
name: b2
payload: none
topology: {kind: star, hosts: 2, link: {rate: 100Gbps}}
programs:
  - {host: h0, program: perftest, args: [--server]}
Y
out=$("$bin" run "$scratch/bad2.yaml" 2>&1); rc=$?
check "payload none refuses programs" "[ $rc -eq 2 ] && echo '$out' | grep -q 'bad2.yaml:5:.*payload: none.*data checks'"
cat > "$scratch/bad3.yaml" <<Y
name: b3
topology: {kind: star, hosts: 4, link: {rate: 100Gbps}}
traffic: {pattern: incast, size: 1KiB, senders: 4}
Y
out=$("$bin" run "$scratch/bad3.yaml" 2>&1); rc=$?
check "incast senders bounded" "[ $rc -eq 2 ] && echo '$out' | grep -q 'bad3.yaml:3:.*senders.*1..3'"
cat > "$scratch/bad4.yaml" <<Y
name: b4
topology: {kind: star, hosts: 4, link: {rate: 100Gbps}}
traffic: {pattern: poisson, sizes: web-search}
Y
out=$("$bin" run "$scratch/bad4.yaml" 2>&1); rc=$?
check "poisson needs a load" "[ $rc -eq 2 ] && echo '$out' | grep -q 'bad4.yaml:3:.*poisson pattern needs'"
finish
