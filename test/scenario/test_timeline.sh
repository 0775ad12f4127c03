#!/usr/bin/env bash
# rnicsim run --timeline / --trace (docs/timeline.md): the file is valid
# trace-event JSON (tools/timeline_check.py: phases, fields, metadata,
# nesting per thread, flow events bound to slices in time order); a WRITE's
# flow has every step in order (post, doorbell, send engine, payload DMA
# read, TX engine, both links, remote RX unit, remote DMA write, the ACK's
# TX, links and RX, CQE write, poll); a READ's flow goes through the
# remote READ engine and comes back as a response, an atomic's through the
# remote atomic unit; same seed, same bytes;
# the host / QP / window filters and the size bound; bad filters and an
# unwritable file are exit 2; time-sliced threads show their waits for a CPU;
# --trace prints the same events as text.
# Args: rnicsim binary, source dir, scratch dir (test/scenario/lib.sh).
set -u
. "$(dirname "$0")/lib.sh"
chk="$py $src/tools/timeline_check.py"

cat >"$scratch/tl.yaml" <<'YAML'
name: timeline-test
seed: 3
stop_time: 5ms
profile: cx5-100g
topology:
  kind: star
  hosts: 2
  link: {rate: 100Gbps, delay: 10ns}
  switch: {latency: 300ns, buffer: 1MiB}
programs:
  - {host: h1, program: perftest, args: [--server, "--tests=write,read,atomic", --modes=bw, --sizes=65536, --bw-iters=4, --tx-depth=2]}
  - {host: h0, program: perftest, args: [--client, "--tests=write,read,atomic", --modes=bw, --sizes=65536, --bw-iters=4, --tx-depth=2]}
YAML

run() { # run NAME ARGS...: the timeline run, stdout / stderr kept
    local name=$1
    shift
    (cd "$scratch" && timeout 120 "$bin" run tl.yaml -q "$@") >"$scratch/$name.out" 2>"$scratch/$name.err"
}

run full --timeline full.json
rc=$?
check "run with --timeline exits 0 (got $rc)" "[ $rc -eq 0 ]"
check "the file is valid trace-event JSON (timeline_check)" \
    "$chk '$scratch/full.json' --tracks >'$scratch/full.check' 2>&1 || { cat '$scratch/full.check'; false; }"
check "it has a track per thread, NIC engine, cache, PCIe direction and link" "$py - '$scratch/full.json' <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
names = {e['args']['name'] for e in d['traceEvents'] if e['ph'] == 'M' and e['name'] == 'thread_name'}
need = ['h0/perftest#1', 'h1/perftest#0', 'nic: doorbell', 'nic: requester', 'nic: tx engine',
        'nic: rx units', 'nic: dma read', 'nic: dma write', 'nic: cqe write', 'nic: read engine',
        'nic: atomics',
        'nic cache: qp context', 'nic cache: mtt', 'pcie up (MWr, MRd)', 'pcie down (CplD, MMIO)',
        'node0->sw0', 'sw0->node1', 'node1->sw0', 'sw0->node0']
missing = [n for n in need if n not in names]
assert not missing, missing
# slices with arguments: a PCIe TLP names its kind and counts, a link frame its PSN
x = [e for e in d['traceEvents'] if e['ph'] == 'X']
assert any(e['name'].startswith('MWr payload_wr') and e['args']['tlps'] >= 1 for e in x)
assert any(e['name'].startswith('CplD payload_rd') for e in x)
assert any(e['name'].startswith('RDMA_WRITE_FIRST') and 'psn' in e['args'] for e in x)
assert any(e['ph'] == 'C' for e in d['traceEvents'])      # queue bytes of the links
assert any(e['ph'] == 'i' and 'hit' in e['name'] for e in d['traceEvents'])  # cache lookups
assert d['otherData']['truncated'] is False
PY"

# one 64 KiB WRITE, followed from the post to the poll of its CQE
$chk "$scratch/full.json" --flow-of RDMA_WRITE >"$scratch/write.flow" 2>&1
check "a WRITE is followed to the poll of its completion" "grep -q '^flow' '$scratch/write.flow'"
check "the WRITE's flow has every step in order" "$py - '$scratch/write.flow' <<'PY'
import sys
lines = [l.split(None, 5) for l in open(sys.argv[1]) if l.startswith('  ')]
steps = [(int(l[1]), l[3], l[4], l[5]) for l in lines]   # time, host, track, slice
t = [s[0] for s in steps]
assert t == sorted(t), 'not in time order'
want = [('h0', 'h0/perftest#1', 'ibv_post_send'), ('h0', 'nic:', 'doorbell'),
        ('h0', 'nic:', 'wqe'), ('h0', 'nic:', 'payload'), ('h0', 'nic:', 'RDMA_WRITE_LAST'),
        ('fabric', 'node0->sw0', 'RDMA_WRITE_LAST'), ('fabric', 'sw0->node1', 'RDMA_WRITE_LAST'),
        ('h1', 'nic:', 'RDMA_WRITE_LAST'), ('h1', 'nic:', 'resp: payload'),
        ('h1', 'nic:', 'ACKNOWLEDGE'), ('fabric', 'node1->sw0', 'ACKNOWLEDGE'),
        ('fabric', 'sw0->node0', 'ACKNOWLEDGE'), ('h0', 'nic:', 'ACKNOWLEDGE'),
        ('h0', 'nic:', 'CQE RDMA_WRITE'), ('h0', 'h0/perftest#1', 'ibv_poll_cq')]
i = 0
for s in steps:
    if i < len(want) and s[1] == want[i][0] and s[2].startswith(want[i][1]) and want[i][2] in s[3]:
        i += 1
assert i == len(want), 'missing step %r in %r' % (want[i], steps)
assert lines[0][0] == 's' and lines[-1][0] == 'f'
PY"
$chk "$scratch/full.json" --flow-of RDMA_READ >"$scratch/read.flow" 2>&1
check "a READ's flow crosses the remote READ engine and comes back as responses" \
    "grep -q 'READ_REQUEST' '$scratch/read.flow' && grep -q 'h1 *nic: read engine' '$scratch/read.flow' && grep -q 'READ_RESPONSE_LAST' '$scratch/read.flow' && grep -q 'comp: response data' '$scratch/read.flow' && grep -q 'CQE RDMA_READ' '$scratch/read.flow'"
$chk "$scratch/full.json" --flow-of ATOMIC >"$scratch/atomic.flow" 2>&1
check "an atomic's flow crosses the remote atomic unit and comes back as its ACK" \
    "grep -q 'h1 *nic: atomics' '$scratch/atomic.flow' && grep -q 'ATOMIC_ACKNOWLEDGE' '$scratch/atomic.flow' && grep -q 'CQE FETCH_ADD' '$scratch/atomic.flow'"

# determinism
run again --timeline again.json
check "same seed, same bytes" "cmp -s '$scratch/full.json' '$scratch/again.json'"

# filters
run hosts --timeline hosts.json --timeline-hosts h1
check "--timeline-hosts h1: no track of h0, links kept for h1's packets" "$py - '$scratch/hosts.json' <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
procs = {e['args']['name'] for e in d['traceEvents'] if e['ph'] == 'M' and e['name'] == 'process_name'}
assert procs == {'h1', 'fabric'}, procs
PY"
run qps --timeline qps.json --timeline-qps h1:0x100 --timeline-window 42us:60us
check "--timeline-qps and --timeline-window keep only that QP and that window" "$py - '$scratch/qps.json' '$scratch/full.json' <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
full = json.load(open(sys.argv[2]))
x = [e for e in d['traceEvents'] if e['ph'] == 'X']
assert x, 'nothing kept'
for e in x:
    assert e['ts'] + e['dur'] >= 42 - 0.001 and e['ts'] <= 60 + 0.001, e
    a = e['args']
    if 'qp' in a:
        assert a['qp'] == '0x100', e
assert len(x) < len([e for e in full['traceEvents'] if e['ph'] == 'X']) / 2
PY"
check "filtered files are valid" "$chk '$scratch/hosts.json' >/dev/null && $chk '$scratch/qps.json' >/dev/null"

# the size bound
run cut --timeline cut.json --timeline-max 64KiB
rc=$?
check "a run that hits the size bound still succeeds (got $rc)" "[ $rc -eq 0 ]"
check "the file stays below the bound and is valid, marked truncated" \
    "[ \$(stat -c %s '$scratch/cut.json') -le 65536 ] && $chk '$scratch/cut.json' | grep -q truncated"
check "stderr says where it was cut and how to narrow it" \
    "grep -q 'reached its size bound (64 MiB\|reached its size bound' '$scratch/cut.err' && grep -q -- '--timeline-window' '$scratch/cut.err'"

# bad filters: exit 2, nothing run
run badhost --timeline bad.json --timeline-hosts h7
rc=$?
check "--timeline-hosts h7 on 2 hosts: exit 2 with the hosts there are" \
    "[ $rc -eq 2 ] && grep -q \"unknown host 'h7' (the scenario has h0..h1)\" '$scratch/badhost.err'"
run badwin --timeline bad.json --timeline-window 5us:1us
rc=$?
check "--timeline-window that ends before it starts: exit 2" \
    "[ $rc -eq 2 ] && grep -q 'ends before it starts' '$scratch/badwin.err'"
run badqp --timeline bad.json --timeline-qps zz
rc=$?
check "--timeline-qps zz: exit 2" "[ $rc -eq 2 ] && grep -q 'not a QP number' '$scratch/badqp.err'"
run badpath --timeline no-such-dir/x.json
rc=$?
check "--timeline into a missing directory: exit 2 before the run" \
    "[ $rc -eq 2 ] && grep -q \"^rnicsim run: --timeline: cannot create 'no-such-dir/x.json'\" '$scratch/badpath.err'"

# the host model's CPUs: two threads time-sliced on one CPU wait for it
(cd "$scratch" && timeout 120 "$bin" run "$src/scenarios/host/threads.yaml" -q --set vars.cpus=0,0 \
    --set vars.iters=14000 --timeline slices.json) >"$scratch/slices.out" 2>&1
check "threads sharing a CPU: their waits for it are slices of their tracks" "$py - '$scratch/slices.json' <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
w = [e for e in d['traceEvents'] if e['ph'] == 'X' and e['name'].startswith('runnable, waiting for CPU 0')]
slices = [e for e in w if e['dur'] >= 1000]  # whole time slices (ms; dur in us)
assert len({e['tid'] for e in slices}) == 2, w
PY"

# --trace: the same events as text
run text --trace --timeline-window 42us:45us
check "--trace prints spans of the NIC engines, links and threads as text" \
    "grep -q '^\[trace\] .* h0 tx engine' '$scratch/text.out' && grep -q '^\[trace\] .* link node0->sw0' '$scratch/text.out'"

finish
