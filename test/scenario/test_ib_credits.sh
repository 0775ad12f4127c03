#!/usr/bin/env bash
# The NIC's finite receive buffer on an InfiniBand port (nic.rx_buffer,
# link credits: docs/fabric.md "Credit-based flow control"), end to end: a
# Huang M:1 run (4 requesting nodes x 2 threads x R = 64 WRITE requests)
# whose responder NIC is made slower than its link (nic.rx_pkt_proc 2 us:
# 4 M packets/s against ~13 M the link brings).  With a 16 KiB buffer the
# buffer fills to exactly its size and never past it, the switch port to
# the responder waits for credits and holds the backlog instead, nothing
# is dropped, every message is verified, and the rate is the NIC's, the
# same as with an unbounded buffer.  Also: a small setting is raised to
# one 4 KiB-MTU packet; an Ethernet port with a buffer is a clear error.
# Args: rnicsim binary, source dir, scratch dir (test/scenario/lib.sh).
set -u
. "$(dirname "$0")/lib.sh"

run() { # NAME BUFFER [more --set]
    local name=$1 b=$2
    shift 2
    (cd "$scratch" && timeout 120 "$bin" run "$src/scenarios/huang/m1_R.yaml" -q -o "$name.json" \
        --set vars.proto=write_send --set vars.P=4 --set vars.S=2 --set vars.R=64 \
        --set vars.warmup=1ms --set vars.duration=1ms --set hardware.nic.rx_pkt_proc=2us \
        --set hardware.nic.rx_buffer="$b" "$@" >"$name.out" 2>"$name.err")
}

run buf 16KiB
check "a run with a 16 KiB receive buffer completes" "[ $? -eq 0 ]"
run nobuf 0
check "the same run with an unbounded buffer completes" "[ $? -eq 0 ]"
run tiny 1B
check "a 1 B buffer (raised to one 4 KiB-MTU packet) completes" "[ $? -eq 0 ]"

check "the buffer fills to its size and never past it; the link waits for credits; nothing lost" "$py - '$scratch/buf.json' '$scratch/nobuf.json' '$scratch/tiny.json' <<'PY'
import json, sys
b, n, t = (json.load(open(f)) for f in sys.argv[1:4])
cb, cn, ct = b['counters'], n['counters'], t['counters']
l = cb['links']['sw0->node0']
nic = cb['hosts']['h0']['nic']
print('buffer', nic['rx_buf_max_bytes'], 'link', {k: l[k] for k in l if 'credit' in k or k == 'max_queue_bytes'})
assert l['credit_limit_bytes'] == 16384, l
assert nic['rx_buf_max_bytes'] == 16384, nic['rx_buf_max_bytes']        # filled, not past
assert l['max_credit_used_bytes'] == 16384, l
assert l['credit_stalls'] > 100 and l['credit_wait_ps'] > 0, l           # it stopped and resumed
# the backlog moved from the NIC into the switch port (lossless priority 0)
assert l['max_queue_bytes'] > 10 * cn['links']['sw0->node0']['max_queue_bytes'], l
for c in (cb, ct):
    assert all(v['pkts_dropped'] == 0 for v in c['links'].values())
    assert all(v['pfc_headroom_drops'] == 0 for v in c['switches'].values())
# every message verified, none torn, the same rate: the NIC is the bound either way
for d in (b, t):
    oc, on = d['tables']['order_check'][0], n['tables']['order_check'][0]
    assert oc['violations'] == 0 and oc['messages_checked'] == on['messages_checked'], (oc, on)
    assert abs(d['tables']['huang'][0]['bw_gbps'] / n['tables']['huang'][0]['bw_gbps'] - 1) < 0.02
# unbounded: no credit keys, no buffer counter
assert 'credit_limit_bytes' not in cn['links']['sw0->node0']
assert 'rx_buf_max_bytes' not in cn['hosts']['h0']['nic']
tl = ct['links']['sw0->node0']
assert tl['credit_limit_bytes'] == 4224 and ct['hosts']['h0']['nic']['rx_buf_max_bytes'] <= 4224, tl
PY"

(cd "$scratch" && timeout 60 "$bin" run "$src/scenarios/huang/m1_R.yaml" -q -o eth.json \
    --set vars.P=2 --set vars.S=1 --set hardware.nic.link_layer=ethernet \
    --set hardware.nic.rx_buffer=64KiB >eth.out 2>eth.err)
rc=$?
check "an Ethernet port with a receive buffer is refused (exit $rc)" \
    "[ $rc -eq 2 ] && grep -q \"^--set:1:[0-9]*: 'nic.rx_buffer': a bounded receive buffer is modelled on InfiniBand ports only\" '$scratch/eth.err'"
finish
