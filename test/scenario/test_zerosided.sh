#!/usr/bin/env bash
# The programmable switch (docs/pswitch.md) and zero-sided RDMA
# (docs/zero-sided.md, check 1 of its headline checks):
#  1. the example switch program ps_count counts, in the switch's registers,
#     exactly the packets each host's NIC sent;
#  2. every flow -- 1:1 pairs, N:M shuffle, load balancing, replication --
#     under random loss on every link (1e-3): each item arrives exactly once
#     (replication: at every consumer, in one global order), the PUs post no
#     verbs (their NICs fetched no WQE and rang no doorbell), no QP error
#     (no fatal NAK), no NAK storm (the PU NICs' NAKs <= frames lost), and
#     the loss was real (frames lost, operations re-issued);
#  3. doorbell mode posts verbs (the counter above can fail);
#  4. `rnicsim check-order` runs a zero-sided flow (clean, every item);
#  5. a capture at the consumer: what the switch sends are valid RoCEv2 RC
#     WRITE FIRST / MIDDLE / LAST / ONLY frames (tshark), consecutive PSNs,
#     RETH on FIRST / ONLY, the IBA ICRC (recomputed with zlib);
#  2i. congestion control: the switch relays the consumer NIC's CNPs to the
#     producers of the data (incast through ECN-marking queues, DCQCN NICs);
#  6. UD multicast (ibv_attach_mcast): the DFI-like replication baseline
#     delivers every tuple to 3 receivers, ordered with the sequencer.
# Args: rnicsim binary, source dir, scratch dir (test/scenario/lib.sh).
set -u
. "$(dirname "$0")/lib.sh"
Z="$src/scenarios/zero-sided"
cd "$scratch" || exit 1
jget() { $py -c 'import json,sys
d=json.load(open(sys.argv[1]))
for k in sys.argv[2].split("."):
    d=d[int(k)] if isinstance(d,list) else d[k]
print(d)' "$1" "$2" 2>/dev/null; }

# ---- 1. ps_count
cat >count.yaml <<'YAML'
name: ps-count
seed: 1
stop_time: 1s
profile: cx5-100g
topology:
  kind: star
  hosts: 3
  link: {rate: 100Gbps, delay: 10ns}
  switch: {programmable: true}
programs:
  - {host: sw0, program: ps_count, args: [--hosts=3, --for=2ms]}
  - {host: h1, program: perftest, args: [--server, --tests=write, --modes=bw, --sizes=4096, --iters=50]}
  - {host: h0, program: perftest, args: [--client, --tests=write, --modes=bw, --sizes=4096, --iters=50]}
YAML
"$bin" run count.yaml -o count.json --quiet >count.out 2>&1
rc=$?
check "ps_count: run exits 0 (got $rc)" "[ $rc -eq 0 ]"
check "ps_count: the switch's registers hold each NIC's packets, h2 sent nothing" "$py - count.json <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
rows = {(int(r['src']), int(r['dst'])): r for r in d['tables']['ps_count']}
h = d['counters']['hosts']
assert set(rows) == {(0, 1), (1, 0)}, rows
assert rows[(0, 1)]['pkts'] == h['h0']['nic']['pkts_tx'] > 200, (rows, h['h0']['nic']['pkts_tx'])
# (h1's first packets may pass before the control plane installed (1, 0):
# entries take 10 us of control-plane time each)
assert h['h1']['nic']['pkts_tx'] - 64 < rows[(1, 0)]['pkts'] <= h['h1']['nic']['pkts_tx'], rows
# 4 KiB WRITE ONLY frames: 4096 + 74 headers (RETH too) and ICRC + 4 FCS; a few small ones
assert 4000 * rows[(0, 1)]['pkts'] < rows[(0, 1)]['bytes'] <= 4174 * rows[(0, 1)]['pkts'], rows
assert rows[(1, 0)]['bytes'] == 66 * rows[(1, 0)]['pkts'], rows  # ACKs
ps = d['counters']['pswitch']
assert ps['ingress_passes'] == h['h0']['nic']['pkts_tx'] + h['h1']['nic']['pkts_tx'], ps
PY"

# ---- 2. every flow under loss
lossy() { # NAME FILE.yaml [--set ...]: a lossy run and the checks of item 2
    local n=$1
    shift
    "$bin" run "$@" -o "$n.json" --quiet >"$n.out" 2>&1
    local rc=$?
    check "$n: run exits 0 under loss (got $rc)" "[ $rc -eq 0 ] || { tail -5 $n.out; false; }"
    check "$n: every item once, no verbs from the PUs, no QP error, no NAK storm, loss recovered" \
        "$py - $n.json <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
t = d['tables']
assert 'order_violation' not in t, t.get('order_violation')
oc = t['order_check']
assert oc and all(r['messages_checked'] > 0 for r in oc), oc
sw = t['zs_switch'][0]
assert sw['fatal_naks'] == 0 and sw['threads_done'] > 0, sw
assert sw['slots_left'] == 0, ('slot bits left set', sw)
lost = sum(l['pkts_lost'] for l in d['counters']['links'].values())
assert lost > 0, 'no frame was lost: the test tests nothing'
assert sw['reissues_read'] + sw['reissues_ptr'] + sw['timeouts'] > 0, sw
naks = 0
for name, h in d['counters']['hosts'].items():
    nic = h['nic']
    assert nic['doorbells'] == 0 and nic['wqes_fetched'] == 0, (name, nic)
    naks += nic['naks_tx']
assert naks <= lost, ('NAK storm', naks, lost)
print('%d items checked, %d frames lost, %d NAKs, %d READ re-issues' % (
    sum(r['messages_checked'] for r in oc), lost, naks, sw['reissues_read']))
PY"
}
lossy pairs "$Z/pairs.yaml" --set topology.link.loss=1e-3 --set vars.items=3000
cp "$Z/lossy-flows.yaml" flows.yaml
for m in shuffle lb replicate; do
    lossy "$m" flows.yaml --set vars.mode=$m
done

# ---- 2b. overlapped pointer WRITEs under heavy loss.  A transfer's head and
# tail WRITEs are in flight together with the next READ on the same QPs;
# with batches of four 64-byte items and loss 1e-2 some of them are lost with
# an operation behind them.  The responder then NAKs that operation and waits
# for the lost PSN, so the switch must send the pointer WRITE again ahead of
# the re-issued operation (ptr_ahead).  Without that the flow hangs.  In
# load balancing a thread moves between producers, so a lost last tail WRITE
# to a producer it has left needs that producer's own timer (this run hung
# with one timer per thread).
for m in pairs shuffle lb; do
    case $m in
    pairs) lossy "overlap-$m" "$Z/pairs.yaml" --set topology.link.loss=1e-2 \
        --set vars.items=6000 --set vars.item=64 --set vars.batch=4 ;;
    shuffle) lossy "overlap-$m" flows.yaml --set vars.mode=$m --set topology.link.loss=1e-2 \
        --set vars.item=64 ;;
    lb) lossy "overlap-$m" flows.yaml --set vars.mode=$m --set topology.link.loss=3e-3 \
        --set vars.item=64 ;;
    esac
    check "overlap-$m: pointer WRITEs were re-sent ahead of a re-issued operation" \
        "$py - overlap-$m.json <<'PY'
import json, sys
sw = json.load(open(sys.argv[1]))['tables']['zs_switch'][0]
assert sw['ptr_ahead'] > 0, sw
PY"
done
# ---- 2c. two transfers in flight per consumer (--lanes=2): each consumer
# ring has two data QPs, one switch thread each, pulling from different
# producers at once.  The consumer's head must still move in order: a lane
# whose data are in waits (commit pass) until the transfer reserved before
# its own is committed.  Committing out of order exposes items that are not
# there yet (order violations, then a hang): checked by disabling the wait.
lossy lanes flows.yaml --set vars.mode=shuffle --set vars.lanes=2 \
    --set topology.link.loss=1e-2 --set vars.item=64
check "lanes: a lane waited for an earlier transfer's commit, all 4 threads ended" \
    "$py - lanes.json <<'PY'
import json, sys
sw = json.load(open(sys.argv[1]))['tables']['zs_switch'][0]
assert sw['lanes'] == 2 and sw['commit_waits'] > 0 and sw['threads_done'] == 4, sw
PY"
# ---- 2e. the pipeline (--pipeline=2): two lanes per consumer, but only one
# READ streams into a consumer at a time (the stream slot c_busy), so its
# next READ leaves when the last one's responses have passed instead of
# after its ACK.  Lossless, a consumer never has two READs on their way
# (plain lanes: two); under loss 1e-2 every item once.  Seeds 2 and 13 hung
# before two fixes this needed: a lane that took the stream slot but not its
# producer (the other lane held it) wrote that producer's tail back on its
# give-back (order violations without loss), and a head-WRITE timer pass
# that raced a lane's commit put an older head at the real WRITE's PSN (the
# consumer's NIC dropped the real one as a duplicate; checked by disabling
# each fix).
for a in pipe lanes; do
    "$bin" run flows.yaml --set vars.mode=shuffle --set vars.$a=2 --set topology.link.loss=0 \
        --set vars.item=64 -o "one-$a.json" --quiet >"one-$a.out" 2>&1
done
check "pipeline: at most one READ on its way to a consumer (plain lanes: two), stream slot used" \
    "$py - one-pipe.json one-lanes.json <<'PY'
import json, sys
p, l = (json.load(open(f))['tables']['zs_switch'][0] for f in sys.argv[1:3])
assert p['pipeline'] == 2 and p['lanes'] == 2 and p['stream_busy'] > 0, p
assert p['cons_reads_max'] == 1 and l['cons_reads_max'] == 2, (p['cons_reads_max'], l['cons_reads_max'])
PY"
for seed in 2 13; do
    lossy "pipe-$seed" flows.yaml --set vars.mode=shuffle --set vars.pipe=2 \
        --set topology.link.loss=1e-2 --set vars.item=64 --set seed=$seed
done
# ---- 2g. slots come free only after p_exp's verdict on a READ's last
# response (a SLOTREL pass): under loss a last response that follows a lost
# one (the READ is re-issued) or duplicates an older READ's must not free
# the consumer's stream slot or the producer node's uplink slot.  Freed
# before the verdict (as they were), the pipeline runs above had two READs
# on their way into one consumer (cons_reads_max 2) and the shuffle below
# two out of one producer node with one slot (node_reads_max 2; seed 2 hung
# outright).  No slot bit may be left set at the end (slots_left).
lossy slots-2 flows.yaml --set vars.mode=shuffle --set topology.link.loss=1e-2 \
    --set vars.item=64 --set seed=2
check "slots: one READ per consumer (pipeline) / per node (one slot) under loss, none left set" \
    "$py - pipe-2.json pipe-13.json slots-2.json <<'PY'
import json, sys
p2, p13, s = (json.load(open(f))['tables']['zs_switch'][0] for f in sys.argv[1:4])
for p in (p2, p13):
    assert p['cons_reads_max'] == 1 and p['slot_releases'] > 0 and p['slots_left'] == 0, p
assert s['node_reads_max'] == 1 and s['slot_busy'] > 0 and s['slots_left'] == 0, s
PY"
# ---- 2h. a producer's tail-WRITE timer stays armed while the data are in
# (p_exp AWAIT): a timer pass that fired on an older, ACKed tail WRITE and
# ran between the data ACK's pass (which arms the timer for the new tail
# WRITE) and that WRITE's egress (which marks it sent) disarmed it; the
# WRITE was then lost and never sent again, and the producer waited on a
# ring it saw full.  Seed 40 hung so (tools/zs_seeds.py found it: 1 of 300
# seeds; lanes 2, seed 218, too).
lossy ptail-40 flows.yaml --set vars.mode=shuffle --set topology.link.loss=1e-2 \
    --set vars.item=64 --set seed=40
# ---- 2i. congestion control through the switch (Jasny et al. 4 and 6.2):
# two producer nodes into two consumers on one node, DCQCN NICs, 512 KiB
# port buffers, and no ECN marking in the fabric: the congested queue is
# the switch's own egress to the consumer node, which the switch program
# reads in its egress pipeline (enq_qdepth) to mark the WRITEs CE.  The
# consumer NIC's CNPs (to the switch's QP, the WRITEs' requester) must
# reach the producers' NICs through the switch (a CNP the switch does not
# relay is a stray there and the producers get none), and the incast then
# drops nothing.  Without the switch's marking (--ecn=off: the switch
# before it read its queue depth) no CNP is sent at all and the incast
# drops frames, as it does without DCQCN.
"$bin" run "$Z/incast-cc.yaml" -o cc.json --quiet >cc.out 2>&1
rc1=$?
"$bin" run "$Z/incast-cc.yaml" -o nocc.json --quiet --set hardware.nic.dcqcn=false >nocc.out 2>&1
rc2=$?
"$bin" run "$Z/incast-cc.yaml" -o noecn.json --quiet --set vars.ecn=off >noecn.out 2>&1
rc3=$?
check "incast-cc: the three runs exit 0 (got $rc1, $rc2, $rc3)" \
    "[ $rc1 -eq 0 ] && [ $rc2 -eq 0 ] && [ $rc3 -eq 0 ]"
check "incast-cc: the switch marks from its queue depth, the consumer's CNPs reach both producers through it; no drop with them, drops without" \
    "$py - cc.json nocc.json noecn.json <<'PY'
import json, sys
d, n, e = (json.load(open(f)) for f in sys.argv[1:4])
for r in (d, n, e):
    t = r['tables']
    assert 'order_violation' not in t, t.get('order_violation')
    assert [x['messages_checked'] for x in t['order_check']] == [256, 256], t['order_check']
sw, h = d['tables']['zs_switch'][0], d['counters']['hosts']
assert sw['stray'] == 0 and sw['cnps_dropped'] == 0, sw
assert sw.get('ecn_marked', 0) > 0, ('the switch marked nothing', sw)
assert sw['cnps_relayed'] == h['h2']['nic']['cnps_tx'] > 0, (sw['cnps_relayed'], h['h2']['nic'])
assert h['h0']['nic']['cnps_rx'] > 0 and h['h1']['nic']['cnps_rx'] > 0, (h['h0']['nic'], h['h1']['nic'])
assert h['h0']['nic']['cnps_rx'] + h['h1']['nic']['cnps_rx'] == sw['cnps_relayed']
L = d['counters']['links']
assert sum(v.get('ecn_marked', 0) for v in L.values()) == 0, 'a fabric queue marked: not the switch program'
down = L['sw0->node2']
ndown, edown = n['counters']['links']['sw0->node2'], e['counters']['links']['sw0->node2']
assert down['pkts_dropped'] == 0, down
assert ndown['pkts_dropped'] > 0, ('no incast: nothing dropped without DCQCN', ndown)
esw = e['tables']['zs_switch'][0]
assert esw['cnps_relayed'] == 0 and edown['pkts_dropped'] > 0, (esw, edown)
print('%d WRITEs marked, %d CNPs relayed, bottleneck queue %d B (without the marking %d B, %d frames dropped; without DCQCN %d frames dropped)' % (
    sw['ecn_marked'], sw['cnps_relayed'], down['max_queue_bytes'], edown['max_queue_bytes'],
    edown['pkts_dropped'], ndown['pkts_dropped']))
PY"

# ---- 2d. the programmable switch as leaf 0 of a leaf-spine (2 leaves x 2
# spines): producers h0 (leaf0) and h2 (leaf1), consumers h1 (leaf0) and h3
# (leaf1).  Every other switch holds a host route to the switch's own
# address (towards leaf 0), so h2 and h3 reach it across the spines; its
# replication engine's copies to h3 leave through them too.  Without that
# route the PUs on leaf1 never reach the switch and the run hangs.
sed -e 's/^  kind: star$/  kind: leaf-spine\n  leaves: 2\n  spines: 2\n  hosts_per_leaf: 2/' \
    -e '/^  hosts: 4$/d' -e 's/host: h1, program: zs_pu, args: \[--flow=t, --role=producer/host: hP, program: zs_pu, args: [--flow=t, --role=producer/' \
    -e 's/host: h2, program: zs_pu, args: \[--flow=t, --role=consumer/host: h1, program: zs_pu, args: [--flow=t, --role=consumer/' \
    -e 's/host: hP,/host: h2,/' flows.yaml >leafspine.yaml
for m in shuffle replicate; do
    lossy "ls-$m" leafspine.yaml --set vars.mode=$m
    check "ls-$m: the flow crossed the spines both ways" "$py - ls-$m.json <<'PY'
import json, sys
L = json.load(open(sys.argv[1]))['counters']['links']
up = sum(v['pkts_sent'] for k, v in L.items() if k.startswith('leaf1->spine'))
down = sum(v['pkts_sent'] for k, v in L.items() if k.startswith('spine') and k.endswith('->leaf1'))
assert up > 1000 and down > 1000, (up, down)
PY"
done
# ---- 2f. the programmable switch anywhere: on leaf1 and on spine1 of a
# 3-leaf x 2-spine leaf-spine, PUs on leaves 0 and 2 only (h0, h5 produce;
# h1, h4 consume), none under leaf1.  Every other switch holds a host route
# to the switch's address along the shortest paths to wherever it sits: on
# leaf1, everything that enters leaf1 is the switch's own traffic (with the
# switch on leaf0 nothing would); on spine1, a spine sees all of it.
# A name that is not a switch of the topology is refused with its place.
sed -e 's/^  kind: star$/  kind: leaf-spine\n  leaves: 3\n  spines: 2\n  hosts_per_leaf: 2/' \
    -e '/^  hosts: 4$/d' \
    -e 's/host: h1, program: zs_pu, args: \[--flow=t, --role=producer/host: h5, program: zs_pu, args: [--flow=t, --role=producer/' \
    -e 's/host: h3, program: zs_pu, args: \[--flow=t, --role=consumer/host: h4, program: zs_pu, args: [--flow=t, --role=consumer/' \
    -e 's/host: h2, program: zs_pu, args: \[--flow=t, --role=consumer/host: h1, program: zs_pu, args: [--flow=t, --role=consumer/' \
    flows.yaml >ls3.yaml
for at in leaf1 spine1; do
    lossy "at-$at" ls3.yaml --set vars.mode=shuffle --set topology.switch.programmable=$at
    check "at-$at: the switch's own traffic went to $at" "$py - at-$at.json $at <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
L, at = d['counters']['links'], sys.argv[2]
into = sum(v['pkts_sent'] for k, v in L.items() if k.endswith('->' + at))
assert into > 2000, into
if at == 'leaf1':  # no PU under leaf1: its hosts' cables stay idle
    assert sum(v['pkts_sent'] for k, v in L.items() if k.startswith('leaf1->h')) == 0, L
if at == 'spine1':  # every PU frame to the switch crosses spine1, none spine0
    assert sum(v['pkts_sent'] for k, v in L.items() if k.startswith('spine0->')) < 50, L
PY"
done
"$bin" run ls3.yaml --set topology.switch.programmable=spine2 -o /dev/null >bad-at.out 2>&1
rc=$?
check "a switch the topology lacks: exit 2, the error names the choices" \
    "[ $rc -eq 2 ] && grep -q \"programmable': expected true, false or the name of a switch of this topology (leaf0..leaf2 or spine0..spine1), got 'spine2'\" bad-at.out"
check "replicate: both consumers saw one global order" "$py - replicate.json <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
c = d['tables']['zs_consumer']
assert len(c) == 2 and c[0]['items'] == c[1]['items'] == 2 * 1024, c
PY"
check "lb: the consumers together got every item once (consumer 0's union check)" \
    "[ \"\$(jget lb.json tables.zs_consumer.0.items)\" != '' ]"

# ---- 3. doorbell mode does post verbs
sed 's/\[--flow=f, /[--flow=f, --doorbell, /' "$Z/pairs.yaml" >doorbell.yaml
"$bin" run doorbell.yaml --set vars.items=500 -o doorbell.json --quiet >doorbell.out 2>&1
rc=$?
check "doorbell mode: exit 0 (got $rc)" "[ $rc -eq 0 ] || { tail -5 doorbell.out; false; }"
check "doorbell mode: the PUs' NICs rang doorbells, the switch got them" "$py - doorbell.json <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
h = d['counters']['hosts']
assert h['h0']['nic']['doorbells'] > 0 and h['h1']['nic']['doorbells'] > 0, h
assert d['tables']['zs_switch'][0]['doorbells_rx'] > 0
assert d['tables']['zs_switch'][0]['polls_tx'] == 0
PY"

# ---- 4. check-order
timeout 300 "$bin" check-order "$Z/pairs.yaml" --runs 2 --set topology.link.loss=1e-3 \
    -o co.json >co.out 2>&1
rc=$?
check "check-order on a zero-sided flow: clean, exit 0 (got $rc)" "[ $rc -eq 0 ]"
check "check-order: 2 runs x 2000 items" \
    "grep -q '^check-order: clean: 2 runs (seeds 1..2), 4000 messages checked, no violation' co.out"

# ---- 5. capture: the rewritten frames are RoCEv2
if command -v tshark >/dev/null 2>&1; then
    cp "$Z/pairs.yaml" cap.yaml
    printf 'capture:\n  - {link: "sw0->h1", file: cap/c.pcap}\n' >>cap.yaml
    "$bin" run cap.yaml --set vars.items=300 --set vars.batch=16 -o cap.json --quiet >cap.out 2>&1
    rc=$?
    check "capture run exits 0 (got $rc)" "[ $rc -eq 0 ] && [ -s cap/c.pcap ]"
    tshark -r cap/c.pcap -T fields -E separator=/t -e ip.src -e udp.dstport \
        -e infiniband.bth.opcode -e infiniband.bth.destqp -e infiniband.bth.psn \
        -e infiniband.reth.dmalen -e infiniband.aeth.syndrome -e frame.protocols \
        >cap.tsv 2>tshark.err
    check "tshark dissects the switch's frames as RC WRITEs with consecutive PSNs" "$py - cap.tsv <<'PY'
import sys
rows = [l.rstrip('\n').split('\t') for l in open(sys.argv[1])]
assert len(rows) > 300, len(rows)
psn = {}
ops = set()
for src, port, op, qp, p, dmalen, aeth, protos in rows:
    assert src == '10.0.0.3' and port == '4791' and 'infiniband' in protos, (src, port, protos)
    op = int(op)
    ops.add(op)
    assert op in (6, 7, 8, 10, 12), op  # WRITE FIRST/MIDDLE/LAST/ONLY, poll READs
    assert not aeth, 'AETH left on a rewritten frame'
    assert (dmalen != '') == (op in (6, 10, 12)), (op, dmalen)  # RETH on FIRST / ONLY / READ
    p = int(p)
    if qp in psn:
        assert p == (psn[qp] + 1) % (1 << 24) or op == 12, ('PSN', qp, psn[qp], p)
    psn[qp] = p
assert {6, 7, 8, 10} <= ops, ops
PY"
    check "every captured frame's ICRC is the IBA CRC (zlib)" "$py - cap/c.pcap <<'PY'
import struct, sys, zlib
data = open(sys.argv[1], 'rb').read()
off, n = 24, 0
while off < len(data):
    incl = struct.unpack('<I', data[off + 8:off + 12])[0]
    fr = data[off + 16:off + 16 + incl]
    off += 16 + incl
    end = 14 + struct.unpack('!H', fr[16:18])[0]
    ps = bytearray(fr[14:54])
    ps[1] = ps[8] = 0xff; ps[10:12] = b'\xff\xff'; ps[26:28] = b'\xff\xff'; ps[32] = 0xff
    crc = zlib.crc32(b'\xff' * 8 + bytes(ps) + fr[54:end - 4]) & 0xffffffff
    assert struct.pack('<I', crc) == fr[end - 4:end], ('bad ICRC', n)
    n += 1
assert n > 300, n
PY"
else
    bad "tshark is not installed (tools/test.sh installs it)"
fi

# ---- 6. UD multicast: DFI-like replication, with the sequencer
"$bin" run "$Z/fig12-dfi.yaml" --set vars.targets=3 --set vars.order=--ordered --set vars.bytes=1MiB \
    -o dfi.json --quiet >dfi.out 2>&1
rc=$?
check "UD multicast replication: exit 0 (got $rc)" "[ $rc -eq 0 ] || { tail -5 dfi.out; false; }"
check "UD multicast: every receiver got every tuple, in the sequencer's order" "$py - dfi.json <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
t = d['tables']
assert 'order_violation' not in t
oc = t['order_check']
assert len(oc) == 3 and len({r['messages_checked'] for r in oc}) == 1 and oc[0]['messages_checked'] > 1000, oc
PY"

# ---- 6b. UD multicast on two-tier fabrics and a ring: the same replication
# with the source and one receiver under one leaf (edge), the others under
# other leaves (pods); on a ring of 4, each host on its own ring switch.
# The fabric forwards the group on a tree (docs/fabric.md "Multicast";
# on a ring, the ring cut opposite the tree's root): every receiver gets
# every tuple once, in the sequencer's order, so all receivers' NICs take
# in the same number of frames; no frame crosses a switch-to-switch cable
# twice.
sed -e 's/^  kind: star$/  kind: leaf-spine\n  leaves: 3\n  spines: 2\n  hosts_per_leaf: 2/' \
    -e '/^  hosts: 4$/d' -e 's/host: h2, program/host: h3, program/' \
    -e 's/host: h3, program: zs_dfirepl, args: \[--flow=r, --role=target, --index=2/host: h5, program: zs_dfirepl, args: [--flow=r, --role=target, --index=2/' \
    "$Z/fig12-dfi.yaml" >dfi-ls.yaml
sed -e 's/^  kind: leaf-spine$/  kind: fat-tree\n  k: 4/' -e '/^  leaves: 3$/d' -e '/^  spines: 2$/d' \
    -e '/^  hosts_per_leaf: 2$/d' -e 's/host: h3, program/host: h9, program/' \
    -e 's/host: h5, program/host: h14, program/' dfi-ls.yaml >dfi-ft.yaml
sed -e 's/^  kind: star$/  kind: ring/' "$Z/fig12-dfi.yaml" >dfi-ring.yaml
for f in ls ft ring; do
    "$bin" run dfi-$f.yaml --set vars.order=--ordered --set vars.bytes=1MiB -o dfi-$f.json \
        --quiet >dfi-$f.out 2>&1
    rc=$?
    check "UD multicast on $f: exit 0 (got $rc)" "[ $rc -eq 0 ] || { tail -5 dfi-$f.out; false; }"
    check "UD multicast on $f: each receiver every tuple once, in order; one copy per cable" \
        "$py - dfi-$f.json <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
t = d['tables']
assert 'order_violation' not in t
oc = t['order_check']
assert len(oc) == 3 and {r['messages_checked'] for r in oc} == {16384}, oc
H = d['counters']['hosts']
rx = [h['nic']['pkts_rx'] for n, h in H.items() if h['nic']['pkts_tx'] and n != 'h0']
assert len(rx) == 3, rx
L = d['counters']['links']
# the sequencer (h1) multicasts every tuple: its frames reach the other
# two receivers' racks, so the busiest cable between switches carries
# about that many frames, not a multiple
inner = [v['pkts_sent'] for k, v in L.items() if not k.startswith('node') and '->node' not in k]
assert max(inner) <= max(rx) + 20, (max(inner), rx)
PY"
done

finish
