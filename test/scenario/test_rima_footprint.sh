#!/usr/bin/env bash
# The RIMA footprint study (protocols/rima/footprint.c, docs/rima-footprint.md)
# on small runs of the scenarios in scenarios/rima/:
#  1. fig3 single SRQ: in every epoch row the SRQ active buffer is exactly
#     the outstanding messages x 1 MiB of the same run and the reserve pool
#     137e6 x 1 ms x 1 MiB; the messages all arrive (verified by the server);
#  2. fig3 RIMA (hardware append queue): RIMA's footprint is far below the
#     single SRQ's, the AQ committed physical memory (> 0, chunk multiples)
#     and its used bytes are at least the outstanding bytes counted by the
#     server; the same scenario run twice gives identical tables;
#  3. fig4 equi-spaced sweep (1, 16, 200, 300 SRQs): the total footprint is
#     U-shaped (the minimum is in the interior);
#  4. fig6 model: 42 rows, one SRQ = 143.65 GB, an interior minimum;
#  5. bad input: unknown --bins, and a non-numeric --rate, exit 2 with a
#     message (the run: program-failed).
# Args: rnicsim binary, source dir, scratch dir (test/scenario/lib.sh).
set -u
. "$(dirname "$0")/lib.sh"
sc="$src/scenarios/rima"

# ---- 1 + 2. fig3, single SRQ and RIMA, 8 epochs
for b in single rima; do
    "$bin" run "$sc/fig3_epochs.yaml" --set vars.bins=$b --set vars.msgs=2048 \
        -o "$scratch/f3_$b.json" >"$scratch/f3_$b.log" 2>&1
    check "fig3 $b: exit 0" "[ $? -eq 0 ]"
done
for b in single rima; do
    "$bin" run "$sc/fig3_epochs.yaml" --set vars.bins=$b --set vars.msgs=2048 \
        -o "$scratch/f3_${b}2.json" >/dev/null 2>&1
done
check "fig3 deterministic (single)" "cmp -s <($py -c 'import json,sys;print(json.dumps(json.load(open(sys.argv[1]))[\"tables\"]))' $scratch/f3_single.json) <($py -c 'import json,sys;print(json.dumps(json.load(open(sys.argv[1]))[\"tables\"]))' $scratch/f3_single2.json)"
check "fig3 deterministic (rima)" "cmp -s <($py -c 'import json,sys;print(json.dumps(json.load(open(sys.argv[1]))[\"tables\"]))' $scratch/f3_rima.json) <($py -c 'import json,sys;print(json.dumps(json.load(open(sys.argv[1]))[\"tables\"]))' $scratch/f3_rima2.json)"

check "fig3 single: active = outstanding x 1 MiB, reserve = 137e6 x 1 ms x 1 MiB" "$py - $scratch/f3_single.json <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))['tables']
ep = r['footprint_epoch']
assert len(ep) == 4 * 2048 // 2048, len(ep)
nonzero = 0
for e in ep:
    assert e['srq_active_bytes'] == e['outstanding_msgs'] * 1048576, e
    assert e['srq_reserve_bytes'] == 137e6 * 1e-3 * 1048576, e
    assert e['srq_total_bytes'] == e['srq_active_bytes'] + e['srq_reserve_bytes'], e
    assert e['aq'] == 0
    nonzero += e['outstanding_msgs'] > 0
assert nonzero > 0, 'no epoch ever had a message outstanding'
f = r['footprint'][0]
assert f['messages'] == 4 * 2048, f
assert 3.0 < f['msg_rate_mps'] < 4.5, f          # 4 M msg/s offered
assert 200 < f['mean_size_bytes'] < 260, f       # memcached, mean 231 B
assert f['srq_starved'] == 0, f
PY"

check "fig3 rima: AQ footprint << single SRQ, committed memory, used >= outstanding" "$py - $scratch/f3_rima.json $scratch/f3_single.json <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))['tables']
s = json.load(open(sys.argv[2]))['tables']['footprint'][0]
f = r['footprint'][0]
assert f['aq'] == 1, f
assert f['messages'] == 4 * 2048, f
assert f['rima_total_bytes'] < s['srq_total_bytes'] / 1000, (f, s)
assert f['rima_reserve_bytes'] == 56e9 / 8 * 1e-3, f
assert f['aq_rnr_naks'] == 0, f
chunk = 8 << 20
assert f['aq_peak_committed_bytes'] >= 2 * chunk and f['aq_peak_committed_bytes'] % chunk == 0, f
for e in r['footprint_epoch']:
    assert e['rima_committed_bytes'] > 0 and e['rima_committed_bytes'] % chunk == 0, e
    assert e['rima_active_bytes'] >= e['rima_active_sw_bytes'], e
    assert e['rima_total_bytes'] == e['rima_active_bytes'] + e['rima_reserve_bytes'], e
PY"

# ---- 3. fig4, U shape
rm -rf "$scratch/f4"
"$bin" sweep "$sc/fig4_equispaced.yaml" --set vars.queues=1,16,200,300 --set vars.msgs=1024 \
    -j2 -o "$scratch/f4" >"$scratch/f4.log" 2>&1
check "fig4 sweep: exit 0" "[ -s $scratch/f4/sweep.csv ] && ! grep -q failed, $scratch/f4/sweep.csv"
check "fig4: U-shaped total footprint (minimum in the interior)" "$py - $scratch/f4/sweep.csv <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
t = {int(r['vars.queues']): float(r['footprint.srq_total_bytes']) for r in rows}
assert sorted(t) == [1, 16, 200, 300], t
q = min(t, key=t.get)
assert q not in (1, 300), t
assert t[1] > t[16] > t[200] < t[300], t
PY"

# ---- 4. fig6, analytic
"$bin" run "$sc/fig6_reserve.yaml" -o "$scratch/f6.json" >/dev/null 2>&1
check "fig6: 42 rows, single SRQ 143.65 GB, interior minimum" "$py - $scratch/f6.json <<'PY'
import json, sys
rows = json.load(open(sys.argv[1]))['tables']['footprint_model']
assert [r['queues'] for r in rows] == list(range(1, 43)), rows
v = [r['srq_reserve_bytes'] for r in rows]
assert abs(v[0] - 143654912000) < 1, v[0]
m = v.index(min(v))
assert 0 < m < 41, m
assert all(r['rima_reserve_bytes'] == 7e6 for r in rows)
PY"

# ---- 5. bad input
"$bin" run "$sc/fig3_epochs.yaml" --set vars.bins=nonsense -o "$scratch/bad.json" >"$scratch/bad.log" 2>&1
check "bad --bins: run fails" "[ $? -ne 0 ]"
check "bad --bins: message" "grep -q \"bad value 'nonsense' for --bins\" $scratch/bad.log"
check "bad --bins: exit status 2" "grep -q 'exited with status 2' $scratch/bad.log"
"$bin" run "$sc/fig3_epochs.yaml" --set vars.rate=fast -o "$scratch/bad2.json" >"$scratch/bad2.log" 2>&1
check "bad --rate: message" "grep -q \"bad value 'fast' for --rate\" $scratch/bad2.log"

finish
