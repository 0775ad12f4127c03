#!/usr/bin/env bash
# FastKV and the large-message alternatives (protocols/rima/fastkv.c,
# docs/rima-perf.md), small runs of scenarios/rima/*.yaml:
#  1. every transport verifies its values: exit 0, the "requests verified"
#     line, hits > 0; a server that corrupts every 5th stored value
#     (--inject-corruption) is caught by its client's GET check (both exit
#     2); a client run with other options is refused with a message;
#  2. srq footprint-priority (Table 5, scaled 1/16): per-server footprint =
#     the cap exactly, the clients' outstanding requests together never
#     exceed footprint / max-msg, throughput falls as servers grow (1 -> 8)
#     while RIMA's grows; n = 32 is reported infeasible;
#  3. Table 6: row-3 (split-alloc) large-request p99 >= the 1-ms allocation
#     while RIMA's is microseconds; row 4 pays an extra round trip; row-5
#     footprint = clients x slot exactly; an open loop runs at its rate;
#  4. TPT: at rima.tpt_latency = 200 ns the mean append latency is above
#     that at 0 ns by about 200 ns; SEND latency does not move.
# Args: rnicsim binary, source dir, scratch dir (test/scenario/lib.sh).
set -u
. "$(dirname "$0")/lib.sh"
t5="$src/scenarios/rima/table5_fastkv.yaml"
t6="$src/scenarios/rima/table6_largemsg.yaml"
tpt="$src/scenarios/rima/tpt_latency.yaml"

# field FILE.json COLUMN -> the value of the "fastkv" row
field() { "$py" -c "import json,sys; print(json.load(open(sys.argv[1]))['tables']['fastkv'][0][sys.argv[2]])" "$1" "$2"; }

# ---- 1. every transport, 2 servers x 2 clients, values verified
for t in srq rima rima-sw split-alloc split-faa split-presend; do
    o="$scratch/t-$t"
    timeout 120 "$bin" run "$t5" -q -o "$o.json" --set vars.n=2 --set vars.transport=$t \
        --set vars.requests=300 >"$o.out" 2>"$o.err"
    rc=$?
    check "$t: exit 0 (got $rc)" "[ $rc -eq 0 ]"
    check "$t: 2 x 300 requests verified" "grep -q '$t, 2 servers, 2 clients: 600 requests verified' '$o.out'"
    check "$t: GET hits returned the stored values" "[ \"\$(field '$o.json' hits)\" != 0 ]"
done
cat >"$scratch/mismatch.yaml" <<'Y'
name: mismatch
seed: 1
stop_time: 1s
profile: cx5-100g
topology: {kind: star, hosts: 2, link: {rate: 100Gbps, delay: 10ns}}
programs:
  - {host: h0, program: fastkv, args: [--server, --requests=100]}
  - {host: h1, program: fastkv, args: [--client, --requests=200]}
Y
timeout 60 "$bin" run "$scratch/mismatch.yaml" -q -o "$scratch/mm.json" >"$scratch/mm.out" 2>&1
rc=$?
check "options mismatch: the run fails (got $rc)" "[ $rc -ne 0 ]"
check "options mismatch: a clear message" "grep -q 'runs with other options' '$scratch/mm.out'"
sed 's/--requests=100/--requests=200/; s/\]}$/, --inject-corruption=5]}/' "$scratch/mismatch.yaml" >"$scratch/inject.yaml"
timeout 60 "$bin" run "$scratch/inject.yaml" --keep-going -q -o "$scratch/inj.json" >"$scratch/inj.out" 2>&1
rc=$?
check "a corrupted stored value: the GET is caught (run fails, got $rc)" \
    "[ $rc -ne 0 ] && grep -q 'VERIFY FAILED: GET key' '$scratch/inj.out' && ! grep -q 'requests verified' '$scratch/inj.out'"
check "a corrupted stored value: client and server exit 2" "[ \$(grep -c 'exited with status 2' '$scratch/inj.out') -eq 2 ]"
sed 's/--requests=[0-9]*/--requests=300, --rate=200000/' "$scratch/mismatch.yaml" >"$scratch/open.yaml"
timeout 60 "$bin" run "$scratch/open.yaml" -q -o "$scratch/open.json" >"$scratch/open.out" 2>&1
check "open loop at 200 k req/s: verified, throughput within 15 % of the rate" \
    "grep -q '300 requests verified' '$scratch/open.out' && $py -c \"import json; r = json.load(open('$scratch/open.json'))['tables']['fastkv'][0]; assert 0.17 < r['mrps'] < 0.23 and r['rate_per_client'] == 200000, r\""
timeout 60 "$bin" run "$t5" -q -o "$scratch/bad.json" --set vars.transport=srqq >"$scratch/bad.out" 2>&1
check "unknown transport: the run fails with a hint" "grep -q \"bad value for --transport: 'srqq'\" '$scratch/bad.out'"

# ---- 2. Table 5: footprint cap holds, srq falls with n, rima does not
for n in 1 8; do
    for t in srq rima; do
        timeout 120 "$bin" run "$t5" -q -o "$scratch/t5-$t-$n.json" --set vars.n=$n \
            --set vars.transport=$t --set vars.requests=400 >/dev/null 2>&1
        check "table5 $t n=$n: exit 0" "[ $? -eq 0 ]"
    done
done
check "table5: srq footprint = the cap, outstanding within footprint / max-msg" "$py - '$scratch' <<'PY'
import json, sys
for n in (1, 8):
    r = json.load(open(f'{sys.argv[1]}/t5-srq-{n}.json'))['tables']['fastkv'][0]
    cap = r['footprint_cap_bytes'] // r['max_msg_bytes']
    assert r['footprint_bytes'] == r['footprint_cap_bytes'] == 16 << 20, r
    assert r['cap_outstanding'] == cap == 16, r
    assert r['window_sum'] == min(16 * n, cap) and r['peak_inflight_sum'] <= cap, r
    assert r['peak_inflight_sum'] == r['window_sum'], r  # the cap is what limits
    q = json.load(open(f'{sys.argv[1]}/t5-rima-{n}.json'))['tables']['fastkv'][0]
    assert q['footprint_bytes'] <= r['footprint_cap_bytes'], q
PY"
check "table5: per-client srq throughput falls 1 -> 8 servers (>4x), rima's stays (>0.7x)" "$py - '$scratch' <<'PY'
import json, sys
def pc(t, n):
    r = json.load(open(f'{sys.argv[1]}/t5-{t}-{n}.json'))['tables']['fastkv'][0]
    return r['mrps'] / r['clients']
s1, s8, r1, r8 = pc('srq', 1), pc('srq', 8), pc('rima', 1), pc('rima', 8)
assert s8 * 4 < s1, (s1, s8)
assert r8 > 0.7 * r1, (r1, r8)
assert r8 > 4 * s8, (r8, s8)
PY"
timeout 60 "$bin" run "$t5" -q -o "$scratch/t5-inf.json" --set vars.n=8 --set vars.footprint=4MiB \
    >"$scratch/inf.out" 2>&1
check "table5: 8 clients sharing 4 buffers is reported infeasible (exit 0)" \
    "[ \$? -eq 0 ] && [ \"\$(field '$scratch/t5-inf.json' feasible)\" = 0 ] && grep -q infeasible '$scratch/inf.out'"

# ---- 3. Table 6 rows 3 and 5 vs RIMA
for t in split-alloc split-faa split-presend rima; do
    timeout 120 "$bin" run "$t6" -q -o "$scratch/t6-$t.json" --set vars.transport=$t \
        --set vars.clients=4 --set vars.requests=500 >"$scratch/t6-$t.out" 2>&1
    check "table6 $t: exit 0" "[ $? -eq 0 ]"
done
check "table6: row-3 large p99 >= 1 ms allocation, RIMA's large p99 < 100 us" "$py - '$scratch' <<'PY'
import json, sys
a = json.load(open(f'{sys.argv[1]}/t6-split-alloc.json'))['tables']['fastkv'][0]
r = json.load(open(f'{sys.argv[1]}/t6-rima.json'))['tables']['fastkv'][0]
assert a['large'] > 10 and r['large'] > 10, (a, r)
assert a['large_p99_us'] >= 1000 and a['large_p50_us'] >= 1000, a
assert a['allocs'] >= a['large'], a  # one allocation per large message (warmup ones too)
assert r['large_p99_us'] < 100, r
assert a['lat_p50_us'] < 100, a  # small messages do not pay it
PY"
check "table6: row-4 (remote FAA first) large p50 above RIMA's by >= 1 us, ring = footprint" "$py - '$scratch' <<'PY'
import json, sys
f = json.load(open(f'{sys.argv[1]}/t6-split-faa.json'))['tables']['fastkv'][0]
r = json.load(open(f'{sys.argv[1]}/t6-rima.json'))['tables']['fastkv'][0]
assert f['large_p50_us'] >= r['large_p50_us'] + 1, (f['large_p50_us'], r['large_p50_us'])
assert f['footprint_large_bytes'] == 16 << 20, f
PY"
check "table6: row-5 footprint = clients x 1-MiB slot exactly" "$py - '$scratch' <<'PY'
import json, sys
p = json.load(open(f'{sys.argv[1]}/t6-split-presend.json'))['tables']['fastkv'][0]
assert p['footprint_large_bytes'] == 4 * (1 << 20), p
assert p['footprint_small_bytes'] == 4 * 4 * 1024, p
assert p['footprint_bytes'] == p['footprint_large_bytes'] + p['footprint_small_bytes'], p
PY"

# ---- 4. TPT latency: append pays it, SEND does not
for t in srq rima; do
    for l in 0ns 200ns; do
        timeout 60 "$bin" run "$tpt" -q -o "$scratch/tpt-$t-$l.json" --set vars.transport=$t \
            --set vars.requests=200 --set hardware.rima.tpt_latency=$l >/dev/null 2>&1
        check "tpt $t $l: exit 0" "[ $? -eq 0 ]"
    done
done
check "tpt: +200 ns TPT adds 150..250 ns to the mean append latency, 0 to SEND" "$py - '$scratch' <<'PY'
import json, sys
def avg(t, l):
    return json.load(open(f'{sys.argv[1]}/tpt-{t}-{l}.json'))['tables']['fastkv'][0]['lat_avg_us']
d_rima = (avg('rima', '200ns') - avg('rima', '0ns')) * 1000
d_srq = (avg('srq', '200ns') - avg('srq', '0ns')) * 1000
assert 150 <= d_rima <= 250, d_rima
assert abs(d_srq) < 1, d_srq
PY"
finish
