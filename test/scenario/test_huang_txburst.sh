#!/usr/bin/env bash
# The transmit arbitration quantum (nic.tx_burst_pkts, docs/nic.md
# "Transmit arbitration"), end to end on a small Huang M:1 run: 4
# requesting nodes x 4 threads (one QP each) x R = 64 WRITE requests into a
# responder whose QP-context cache is made smaller than its 16 QPs (8
# entries), over InfiniBand credits with small buffers (16 KiB in the
# responder NIC, 8 KiB switch ingress buffers), so the backlog reaches the
# requesters: their uplinks wait for credit, and each requesting NIC has
# packets of all 4 of its QPs ready:
#  - tx_burst_pkts 1 (every profile's value): one packet per QP in turn, so
#    the responder sees its 16 QPs interleaved and misses its context on
#    most packets;
#  - tx_burst_pkts 16: a QP sends up to 16 packets before the next one, the
#    switch interleaves only the 4 requesting nodes, and the responder
#    misses on far fewer packets and serves more.
# Also: 1 is the default (the same result, field for field, as leaving the
# parameter out), and 0 is refused with a located error.
# Args: rnicsim binary, source dir, scratch dir (test/scenario/lib.sh).
set -u
. "$(dirname "$0")/lib.sh"

run() { # NAME [more --set]
    local name=$1
    shift
    (cd "$scratch" && timeout 120 "$bin" run "$src/scenarios/huang/m1_R.yaml" -q -o "$name.json" \
        --set vars.proto=write_send --set vars.P=4 --set vars.S=4 --set vars.R=64 \
        --set vars.warmup=1ms --set vars.duration=1ms \
        --set hardware.nic.qpc_cache_entries=8 --set hardware.nic.rx_buffer=16KiB \
        --set topology.pfc.xoff=8KiB "$@" >"$name.out" 2>"$name.err")
}

run dflt
check "the run without the parameter completes" "[ $? -eq 0 ]"
run b1 --set hardware.nic.tx_burst_pkts=1
check "tx_burst_pkts 1 completes" "[ $? -eq 0 ]"
run b16 --set hardware.nic.tx_burst_pkts=16
check "tx_burst_pkts 16 completes" "[ $? -eq 0 ]"

check "1 is the default: the same result as leaving it out" "$py - '$scratch/dflt.json' '$scratch/b1.json' <<'PY'
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:3])
assert a['tables'] == b['tables'], 'tables differ'
assert a['counters'] == b['counters'], 'counters differ'
assert a['sim_time_ps'] == b['sim_time_ps']
PY"

check "bursts of one QP: the responder misses its QP context less and serves more" "$py - '$scratch/b1.json' '$scratch/b16.json' <<'PY'
import json, sys
r = []
for f in sys.argv[1:3]:
    d = json.load(open(f))
    nic = d['counters']['hosts']['h0']['nic']
    h = d['tables']['huang'][0]
    oc = d['tables']['order_check'][0]
    assert oc['violations'] == 0 and oc['messages_checked'] > 0, oc
    r.append((nic['qpc_misses'] / nic['pkts_rx'], h['bw_gbps']))
print('misses per received packet, Gb/s: burst 1', r[0], 'burst 16', r[1])
assert r[0][0] > 0.3, r          # interleaved: many packets miss
assert r[1][0] < 0.5 * r[0][0], r  # trains of one QP: at most half as many
assert r[1][1] > 1.2 * r[0][1], r
PY"

(cd "$scratch" && timeout 60 "$bin" run "$src/scenarios/huang/m1_R.yaml" -q -o zero.json \
    --set vars.P=2 --set vars.S=1 --set hardware.nic.tx_burst_pkts=0 >zero.out 2>zero.err)
rc=$?
check "tx_burst_pkts 0 is refused with a located error (exit $rc)" \
    "[ $rc -ne 0 ] && grep -q 'tx_burst_pkts' '$scratch/zero.err' && grep -q ':1:' '$scratch/zero.err'"
finish
