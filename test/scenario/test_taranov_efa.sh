#!/usr/bin/env bash
# The Taranov Send/Recv channels on the AWS EFA SRD personality (profile
# efa-srd: SEND/RECV and READ, no WRITE, reliable but out-of-order
# delivery, 32 B of inline data).  The channels return credits with SEND
# into receives the sender keeps posted (protocols/taranov/family_send.c,
# chan_ack SEND mode in channel.c), so:
#   1. send-normal (1 sender) and send-shared (3 senders, one SRQ) run a
#      checked stream (sizes 24 B .. 4 KiB, single packets) on efa-srd on a
#      2x4 leaf-spine, where SRD sprays packets over the spines: every
#      message arrives exactly once with its bytes, and many arrive out of
#      order (so credits do too); send-bufferless likewise;
#   2. a channel that WRITEs (ring-imm: WRITE_WITH_IMM) is still refused
#      on efa-srd (the run fails; the check above can fail);
#   3. `rnicsim table2` reports send-normal, send-shared and
#      send-bufferless "pass" on EFA SRD, with the paper's counts on IB RC
#      unchanged (1 HRT, 1 request at the sender, 0 at the receiver) and no
#      WRITE among their declared opcodes.
# Args: rnicsim binary, source dir, scratch dir (test/scenario/lib.sh).
set -u
. "$(dirname "$0")/lib.sh"
sc="$src/scenarios/taranov"
cd "$scratch" || exit 1

efa=(--set profile=efa-srd --set vars.sizes=24,64,200,1024,4096 --set vars.messages=400
    --set topology.kind=leaf-spine --set topology.leaves=2 --set topology.spines=4)

# run NAME FILE ARGS...: run a scenario (results in NAME.json); exit status in $rc
run() {
    local name=$1 file=$2
    shift 2
    timeout 120 "$bin" run "$file" -q -o "$name.json" "$@" >"$name.out" 2>"$name.err"
    rc=$?
}
# verdict NAME MESSAGES [OOO]: done on efa-srd, one clean order_check of
# MESSAGES messages, none corrupt, and (OOO = 1, the default) at least 10%
# of them out of order (OOO = 0 for the bufferless channel: its 0-byte
# SENDs are so short that no spine queues them and they arrive in order)
verdict() {
    $py - "$1.json" "$2" "${3:-1}" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
want, ooo = int(sys.argv[2]), int(sys.argv[3])
t = d.get("tables", {})
oc = t.get("order_check", [])
ok = (d["result"] == "done" and d["params"]["nic.transport"] == "efa-srd"
      and "order_violation" not in t and len(oc) == 1
      and oc[0]["messages_checked"] == want and oc[0]["violations"] == 0
      and oc[0]["messages_out_of_order"] >= ooo * (want // 10))
if not ok:
    print("result", d["result"], "tables", json.dumps(t)[:400])
sys.exit(0 if ok else 1)
PY
}

run sn "$sc/send_normal.yaml" "${efa[@]}" --set topology.hosts_per_leaf=1
check "send-normal: checked stream on efa-srd (leaf-spine)" "[ $rc -eq 0 ] && verdict sn 400"
run ss "$sc/send_shared.yaml" "${efa[@]}" --set topology.hosts_per_leaf=2
check "send-shared: 3 senders, checked stream on efa-srd (leaf-spine)" "[ $rc -eq 0 ] && verdict ss 1200"
run sb "$sc/send_bufferless.yaml" "${efa[@]}" --set topology.hosts_per_leaf=1
check "send-bufferless: checked stream on efa-srd (leaf-spine)" "[ $rc -eq 0 ] && verdict sb 400 0"

run ri "$sc/ring_imm.yaml" --set profile=efa-srd --set vars.sizes=64,1024 --set vars.messages=50
check "ring-imm (WRITE_WITH_IMM) is refused on efa-srd" \
    "[ $rc -ne 0 ] && grep -q 'efa-srd has no RDMA_WRITE_WITH_IMM' ri.err"

check "table2 (send/recv channels) runs" \
    "'$bin' table2 --quick --no-memory --channels=send-normal,send-shared,send-bufferless --json t2.json >t2.md 2>t2.err"
cat t2.err
check "table2: send/recv channels pass on EFA SRD, paper counts on IB RC, no WRITE declared" \
    "$py - t2.json <<'PY'
import json, sys
d = {c['name']: c for c in json.load(open(sys.argv[1]))['channels']}
bad = []
for name in ('send-normal', 'send-shared', 'send-bufferless'):
    c = d[name]
    m = c['measured']
    got = (m['hrt']['min'], m['hrt']['max'], m['requests_send']['min'], m['requests_recv']['max'])
    if not m['ok'] or got != (1, 1, 1, 0):
        bad.append((name, 'counts', got))
    v = {t: c['transports'][t]['verdict'] for t in ('efa', 'ib_rc')}
    if v != {'efa': 'pass', 'ib_rc': 'pass'}:
        bad.append((name, v))
    if c['declared']['opcodes'] & 3:  # bit 0 WRITE, bit 1 WRITE_WITH_IMM
        bad.append((name, 'opcodes', c['declared']['opcodes']))
assert not bad, bad
PY"

finish
