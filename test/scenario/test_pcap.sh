#!/usr/bin/env bash
# Packet capture read back with tshark, and the fabric keys that shape what
# a capture shows (leaf-spine, routing, loss, failures).
#
#  - a WRITE / READ / SEND / atomic latency run with 64 B and 4 KiB messages
#    at a 1 KiB MTU, captured at h0's port: tshark dissects every frame as
#    RoCEv2 (InfiniBand over UDP 4791); the expected opcodes are there; per
#    QP the request PSNs advance by exactly one per packet (a READ request
#    by its response packets), each READ response carries the PSNs of its
#    request in FIRST/MIDDLE/LAST order, each atomic ACK the PSN of its
#    request, ACK PSNs and MSNs never go back;
#  - every frame's IPv4 checksum (tshark's check) and ICRC (recomputed here
#    with Python's zlib CRC-32 per IBA Annex A17) are valid;
#  - a single-link capture holds exactly h0's transmissions; `all:` writes
#    one file per link, the same bytes for the same tap; two runs give
#    byte-identical files;
#  - the leaf-spine example: spraying reorders at the receiver, ECMP does
#    not, loss and the link failure are counted, results are deterministic;
#  - bad fabric keys are positioned errors.
# tshark is a test dependency (tools/setup.sh installs it for tools/test.sh):
# when it is missing the test FAILS.
# Args: rnicsim binary, source dir, scratch dir (test/scenario/lib.sh).
set -u
. "$(dirname "$0")/lib.sh"

if ! command -v tshark >/dev/null 2>&1; then
    bad "tshark is not installed (tools/test.sh installs it: apt-get install tshark)"
    finish
    exit 1
fi

cd "$scratch" || exit 1
rm -rf run1 run2
args='"--tests=write,read,send,atomic", --modes=lat, "--sizes=64,4096", --iters=4, --warmup=1, --mtu=1024'
cat >pcap.yaml <<YAML
name: pcap
seed: 3
stop_time: 1s
profile: cx5-100g
topology: {kind: star, hosts: 2, link: {rate: 100Gbps, delay: 10ns}}
capture:
  - {host: h0, file: out/h0.pcap}
  - {link: "h0->sw0", file: out/up.pcap}
  - {all: out/all}
programs:
  - {host: h1, program: perftest, args: [--server, $args]}
  - {host: h0, program: perftest, args: [--client, $args]}
YAML
for run in run1 run2; do
    mkdir -p $run
    (cd $run && "$bin" run ../pcap.yaml -o r.json --quiet >out.txt 2>err.txt)
    rc=$?
    check "$run: capture scenario exits 0 (got $rc)" "[ $rc -eq 0 ]"
done
check "capture files written" "[ -s run1/out/h0.pcap ] && [ -s run1/out/up.pcap ]"
check "all: one file per link" \
    "[ \$(ls run1/out/all | wc -l) -eq 4 ] && [ -s run1/out/all/node0-to-sw0.pcap ] && [ -s run1/out/all/sw0-to-node1.pcap ]"
# Two runs capture the same frames at the same instants; only the RETH /
# AtomicETH virtual addresses (the simulator process's own buffer
# addresses, which ASLR moves) and the ICRC over them may differ.
same_fields=(-T fields -e frame.time_epoch -e frame.len -e ip.src -e ip.dst -e udp.srcport
    -e infiniband.bth.opcode -e infiniband.bth.destqp -e infiniband.bth.psn -e infiniband.reth.r_key
    -e infiniband.reth.dmalen -e infiniband.aeth.syndrome -e infiniband.aeth.msn
    -e infiniband.atomicacketh.origremdt -e data.data)
dump() { tshark -r "$1" "${same_fields[@]}" 2>/dev/null | md5sum; }
check "two runs: the same frames at the same times (all but virtual addresses)" \
    "[ \"\$(dump run1/out/h0.pcap)\" = \"\$(dump run2/out/h0.pcap)\" ] && [ \"\$(dump run1/out/all/sw0-to-node0.pcap)\" = \"\$(dump run2/out/all/sw0-to-node0.pcap)\" ] && [ \$(tshark -r run1/out/h0.pcap 2>/dev/null | wc -l) -gt 100 ]"
check "two runs: byte-identical JSON" "cmp -s run1/r.json run2/r.json"
check "the same tap point gives the same bytes (link h0->sw0 == all/node0-to-sw0)" \
    "cmp -s run1/out/up.pcap run1/out/all/node0-to-sw0.pcap"

fields=(-e frame.number -e ip.src -e udp.dstport -e infiniband.bth.opcode -e infiniband.bth.destqp
    -e infiniband.bth.psn -e infiniband.bth.padcnt -e infiniband.reth.dmalen -e infiniband.aeth.msn
    -e ip.checksum.status -e frame.protocols)
tshark -r run1/out/h0.pcap -o ip.check_checksum:TRUE -T fields -E separator=/t "${fields[@]}" \
    >h0.tsv 2>tshark.err
rc=$?
check "tshark reads the capture (rc $rc)" "[ $rc -eq 0 ] && [ -s h0.tsv ]"
tshark -r run1/out/up.pcap -T fields -e ip.src -e ip.dst >up.tsv 2>>tshark.err

# seq.py MODE FRAMES.tsv UP.tsv: the transport as tshark dissected it --
# opcodes, PSN sequences, READ responses, atomic and plain ACKs -- for a
# RoCEv2 capture (MODE roce: Ethernet/IPv4/UDP 4791) or an InfiniBand one
# (MODE ib: ERF records, LRH without a GRH, LID = node + 1).
cat >seq.py <<'PY'
import sys
MTU = 1024
mode = sys.argv[1]
rows = [l.rstrip('\n').split('\t') for l in open(sys.argv[2])]
assert len(rows) > 100, len(rows)
def num(s):
    return int(s, 0) if s else None
frames = []
for r in rows:
    if mode == 'roce':
        no, src, dport, op, qp, psn, pad, dmalen, msn, ipok, protos = r
        assert dport == '4791', r
        assert ipok == '1', ('bad IPv4 checksum', r)
    else:
        no, src, lnh, op, qp, psn, pad, dmalen, msn, pktlen, flen, protos = r
        assert protos.startswith('erf:infiniband'), ('not an ERF InfiniBand record', r)
        assert int(lnh, 0) == 2, ('a GRH where the address vector has none', r)
        assert int(pktlen) * 4 + 2 == int(flen), ('LRH PktLen', r)
        src = {'1': '10.0.0.1', '2': '10.0.0.2'}[src]  # SLID = node + 1
    assert 'infiniband' in protos, ('not dissected as InfiniBand', r)
    frames.append(dict(no=int(no), src=src, op=int(op), qp=num(qp), psn=int(psn),
                       pad=int(pad), dmalen=num(dmalen), msn=num(msn)))
ops = {f['op'] for f in frames}
want = {0x00: 'SEND FIRST', 0x01: 'SEND MIDDLE', 0x02: 'SEND LAST', 0x04: 'SEND ONLY',
        0x06: 'WRITE FIRST', 0x07: 'WRITE MIDDLE', 0x08: 'WRITE LAST', 0x0a: 'WRITE ONLY',
        0x0c: 'READ REQUEST', 0x0d: 'READ RESPONSE FIRST', 0x0e: 'READ RESPONSE MIDDLE',
        0x0f: 'READ RESPONSE LAST', 0x10: 'READ RESPONSE ONLY', 0x11: 'ACKNOWLEDGE',
        0x12: 'ATOMIC ACKNOWLEDGE', 0x14: 'FETCH_ADD'}
missing = [n for o, n in want.items() if o not in ops]
assert not missing, ('opcodes missing', missing)
REQ = set(range(0x00, 0x0d)) | {0x13, 0x14}
M = 1 << 24
last_req = {}   # (src, qp) -> (psn, advance)
reads = {}      # (src, qp) of the requester -> {psn: packets}
atomics = {}
acks = {}
nreq = 0
for f in frames:
    key = (f['src'], f['qp'])
    if f['op'] in REQ:
        nreq += 1
        adv = 1
        if f['op'] == 0x0c:
            adv = max(1, -(-f['dmalen'] // MTU))
            reads.setdefault(key, {})[f['psn']] = adv
        if f['op'] in (0x13, 0x14):
            atomics.setdefault(key, set()).add(f['psn'])
        if key in last_req:
            p, a = last_req[key]
            assert f['psn'] == (p + a) % M, ('request PSN not consecutive', f, p, a)
        last_req[key] = (f['psn'], adv)
        if f['op'] in (0x00, 0x01, 0x06, 0x07):
            assert f['pad'] == 0, f   # FIRST / MIDDLE are full MTUs
    elif f['op'] == 0x11:
        prev = acks.get(key)
        if prev:
            assert (f['psn'] - prev[0]) % M < M // 2 and f['msn'] >= prev[1], ('ACK went back', f, prev)
        acks[key] = (f['psn'], f['msn'])
# responses go to the requester: match them with the requests of the
# other side (same QP numbers here: both NICs start at 0x100)
other = {'10.0.0.1': '10.0.0.2', '10.0.0.2': '10.0.0.1'}
seen_read = 0
for f in frames:
    if f['op'] in (0x0d, 0x0e, 0x0f, 0x10):
        req = reads.get((other[f['src']], f['qp']), {})
        start = [p for p, n in req.items() if (f['psn'] - p) % M < n]
        assert len(start) == 1, ('READ response PSN matches no request', f)
        n, i = req[start[0]], (f['psn'] - start[0]) % M
        expect = 0x10 if n == 1 else (0x0d if i == 0 else (0x0f if i == n - 1 else 0x0e))
        assert f['op'] == expect, ('READ response opcode out of place', f, n, i)
        seen_read += 1
    if f['op'] == 0x12:
        assert f['psn'] in atomics.get((other[f['src']], f['qp']), set()), ('atomic ACK PSN', f)
assert seen_read == sum(n for r in reads.values() for n in r.values()), seen_read
# the single-link capture: exactly h0's transmissions
up = [l.split() for l in open(sys.argv[3])]
h0, h1 = ('10.0.0.1', '10.0.0.2') if mode == 'roce' else ('1', '2')
assert up and all(s == h0 and d == h1 for s, d in up)
assert len(up) == sum(1 for f in frames if f['src'] == '10.0.0.1'), (len(up),)
print('%d frames, %d requests, %d READ response packets, opcodes %s' % (
    len(frames), nreq, seen_read, sorted(hex(o) for o in ops)))
PY
check "tshark: opcodes, PSNs, MSNs and checksums as RoCEv2 requires" "$py seq.py roce h0.tsv up.tsv"

check "ICRC of every frame is the IBA Annex A17 CRC (zlib), IPv4 length exact" "$py - run1/out/h0.pcap run1/out/all/sw0-to-node1.pcap <<'PY'
import struct, sys, zlib
for path in sys.argv[1:]:
    data = open(path, 'rb').read()
    magic, vmaj, vmin, _, _, snap, link = struct.unpack('<IHHiIII', data[:24])
    assert magic == 0xa1b23c4d and (vmaj, vmin) == (2, 4) and link == 1, (magic, link)
    off, n, last_t = 24, 0, 0
    while off < len(data):
        sec, nsec, incl, orig = struct.unpack('<IIII', data[off:off + 16])
        fr = data[off + 16:off + 16 + incl]
        off += 16 + incl
        t = sec * 10**9 + nsec
        assert incl == orig and nsec < 10**9 and t >= last_t, (n, t, last_t)
        last_t = t
        iplen = struct.unpack('!H', fr[16:18])[0]
        end = 14 + iplen
        assert end <= len(fr) and (len(fr) == end or len(fr) == 60), (n, iplen, len(fr))
        ps = bytearray(fr[14:54])
        ps[1] = ps[8] = 0xff; ps[10:12] = b'\xff\xff'; ps[26:28] = b'\xff\xff'; ps[32] = 0xff
        crc = zlib.crc32(b'\xff' * 8 + bytes(ps) + fr[54:end - 4]) & 0xffffffff
        assert struct.pack('<I', crc) == fr[end - 4:end], ('bad ICRC', path, n)
        n += 1
    assert n > 10, n
PY"

check "captured frame sizes are the simulated ones (link counters: frame + FCS 4 + preamble/IFG 20)" "$py - run1/out/up.pcap run1/r.json <<'PY'
import json, struct, sys
data = open(sys.argv[1], 'rb').read()
off, n, total = 24, 0, 0
while off < len(data):
    incl = struct.unpack('<I', data[off + 8:off + 12])[0]
    total += incl + 4 + 20
    off += 16 + incl
    n += 1
c = json.load(open(sys.argv[2]))['counters']['links']['node0->sw0']
assert (n, total) == (c['pkts_sent'], c['bytes_sent']), ((n, total), c)
PY"

# ---------------------------------------------------------------- InfiniBand
# The same run on InfiniBand ports: what the wire carries is LRH / BTH ...
# ICRC / VCRC, written as ERF INFINIBAND records (pcap.h: Wireshark reads
# no LINKTYPE_INFINIBAND); tshark dissects the LRH, the transport matches
# the RoCE run's checks, both CRCs are recomputed here, the sizes are the
# link counters'.  Then the traffic generator's QPs (a GRH, SL 3, traffic
# class 96, hop limit 64) on a 2:1 incast with PFC: GRH fields as set,
# pause frames (no IB form) left out of the files and only they.
rm -rf ib && mkdir -p ib
(cd ib && "$bin" run ../pcap.yaml -o r.json --quiet --set hardware.nic.link_layer=ib >out.txt 2>err.txt)
rc=$?
check "InfiniBand: capture scenario exits 0 (got $rc)" "[ $rc -eq 0 ]"
cat >grh.yaml <<'YAML'
name: pcap-ib-grh
seed: 3
stop_time: 1s
hardware: {nic: {link_layer: ib}}
topology: {kind: star, hosts: 3, link: {rate: 100Gbps, delay: 10ns}, pfc: {}}
traffic: {pattern: incast, senders: 2, receiver: h0, size: 512KiB}
capture:
  - {host: h0, file: out/h0.pcap}
  - {all: out/all}
YAML
rm -rf ibg && mkdir -p ibg
(cd ibg && "$bin" run ../grh.yaml -o r.json --quiet >out.txt 2>err.txt)
rc=$?
check "InfiniBand with GRHs (traffic generator, PFC): exits 0 (got $rc)" "[ $rc -eq 0 ]"
ibfields=(-e frame.number -e infiniband.lrh.slid -e infiniband.lrh.lnh -e infiniband.bth.opcode
    -e infiniband.bth.destqp -e infiniband.bth.psn -e infiniband.bth.padcnt -e infiniband.reth.dmalen
    -e infiniband.aeth.msn -e infiniband.lrh.pktlen -e frame.len -e frame.protocols)
tshark -r ib/out/h0.pcap -T fields -E separator=/t "${ibfields[@]}" >ibh0.tsv 2>tshark.err
tshark -r ib/out/up.pcap -T fields -e infiniband.lrh.slid -e infiniband.lrh.dlid >ibup.tsv 2>>tshark.err
check "tshark on InfiniBand (ERF): LRH without GRH, opcodes, PSNs and MSNs as on RoCE" \
    "$py seq.py ib ibh0.tsv ibup.tsv"
tshark -r ibg/out/h0.pcap -T fields -E separator=/t -e infiniband.lrh.vl -e infiniband.lrh.sl \
    -e infiniband.lrh.lnh -e infiniband.lrh.slid -e infiniband.lrh.dlid -e infiniband.grh.ipver \
    -e infiniband.grh.tclass -e infiniband.grh.flowlabel -e infiniband.grh.hoplmt \
    -e infiniband.grh.nxthdr -e infiniband.grh.paylen -e infiniband.grh.sgid -e infiniband.grh.dgid \
    -e infiniband.bth.opcode -e frame.len >ibg.tsv 2>>tshark.err
check "tshark on InfiniBand GRHs: VL 3 = SL 3, LNH 3, TClass 96, HopLmt 64, GIDs, PayLen" "$py - ibg.tsv <<'PY'
import sys
rows = [l.rstrip('\n').split('\t') for l in open(sys.argv[1])]
assert len(rows) > 100, len(rows)
ops = set()
for r in rows:
    vl, sl, lnh, slid, dlid, ipver, tclass, flow, hop, nxt, paylen, sgid, dgid, op, flen = r
    assert (int(vl, 0), int(sl), int(lnh, 0)) == (3, 3, 3), r
    assert (int(ipver), int(tclass), int(flow, 0), int(hop), int(nxt, 0)) == (6, 96, 0, 64, 0x1b), r
    assert int(paylen) == int(flen) - 8 - 40 - 2, r
    assert sgid == '::ffff:10.0.0.%d' % int(slid) and dgid == '::ffff:10.0.0.%d' % int(dlid), r
    assert '1' in (slid, dlid), r
    ops.add(int(op))
assert {0x06, 0x08, 0x11} <= ops, ops
PY"
check "InfiniBand files: ERF records, LRH PktLen, ICRC and VCRC, sizes and counts = link counters less PFC" \
    "$py - ib/r.json ibg/r.json ib/out ibg/out ibg/out/all <<'PY'
import glob, json, struct, sys, zlib
def vcrc(b):
    c = 0xffff
    for x in b:
        c ^= x
        for _ in range(8):
            c = (c >> 1) ^ 0xd008 if c & 1 else c >> 1
    return c ^ 0xffff
def frames(path):
    data = open(path, 'rb').read()
    magic, vmaj, vmin, _, _, snap, link = struct.unpack('<IHHiIII', data[:24])
    assert magic == 0xa1b23c4d and link == 197, (path, link)   # LINKTYPE_ERF
    off, out = 24, []
    while off < len(data):
        sec, nsec, incl, orig = struct.unpack('<IIII', data[off:off + 16])
        rec = data[off + 16:off + 16 + incl]
        off += 16 + incl
        frac, esec, typ, flags, rlen, lctr, wlen = struct.unpack('<IIBB', rec[:10]) + struct.unpack('!HHH', rec[10:16])
        assert (typ, flags, rlen, wlen) == (21, 4, incl, incl - 16), (path, typ, flags, rlen, wlen)
        assert esec == sec and abs(frac * 10**9 / 2**32 - nsec) < 1, (path, sec, nsec, frac)
        out.append(rec[16:])
    return out
n = 0
for path in sorted(glob.glob(sys.argv[3] + '/*.pcap') + glob.glob(sys.argv[4] + '/*.pcap') + glob.glob(sys.argv[5] + '/*.pcap')):
    for fr in frames(path):
        lnh = fr[1] & 3
        assert lnh in (2, 3) and fr[0] & 0x0f == 0, (path, fr[:8].hex())
        assert struct.unpack('!H', fr[4:6])[0] & 0x7ff == (len(fr) - 2) // 4 and len(fr) % 4 == 2
        bth = 8 if lnh == 2 else 48
        if lnh == 2:
            ps = bytes([fr[0] | 0xf0]) + fr[1:8]
        else:
            g = bytearray(fr[8:48])
            g[0] |= 0x0f; g[1:4] = b'\xff\xff\xff'; g[7] = 0xff
            assert struct.unpack('!H', fr[12:14])[0] == len(fr) - 50
            ps = b'\xff' * 8 + bytes(g)
        b = bytearray(fr[bth:bth + 12]); b[4] = 0xff
        crc = zlib.crc32(ps + bytes(b) + fr[bth + 12:-6]) & 0xffffffff
        assert struct.pack('<I', crc) == fr[-6:-2], ('bad ICRC', path)
        assert struct.pack('<H', vcrc(fr[:-2])) == fr[-2:], ('bad VCRC', path)
        n += 1
assert n > 1000, n
# every link's file against its counters: IB frames LRH .. VCRC + 2 bytes
# of delimiters; PFC frames (64 B + preamble/IFG 20) are not written
r = json.load(open(sys.argv[2]))['counters']['links']
pfc = 0
for name, c in r.items():
    fs = frames(sys.argv[5] + '/' + name.replace('->', '-to-') + '.pcap')
    pfc += c['pfc_frames_sent']
    assert len(fs) == c['pkts_sent'] - c['pfc_frames_sent'], (name, len(fs), c)
    assert sum(len(f) + 2 for f in fs) == c['bytes_sent'] - 84 * c['pfc_frames_sent'], (name, c)
assert pfc > 0, 'the incast sent no pause frame: nothing left out'
up = frames(sys.argv[3] + '/up.pcap')
c = json.load(open(sys.argv[1]))['counters']['links']['node0->sw0']
assert (len(up), sum(len(f) + 2 for f in up)) == (c['pkts_sent'], c['bytes_sent']), c
print('%d IB frames checked, %d pause frames left out' % (n, pfc))
PY"

# ---------------------------------------------------------------- leaf-spine
ls="$src/scenarios/examples/leaf-spine.yaml"
# (the failure window must fall in the traffic: the programs' setup, memory
# registration included, takes the first ~250 us; with 20 us of routing
# convergence leaf0 keeps spraying onto spine1, which drops what it cannot
# forward, so the failure shows whether or not a frame was in the cable)
small=(--set topology.failures.0.at=300us --set topology.failures.0.recover_at=500us
    --set topology.reroute_delay=20us)
for run in ls1 ls2; do
    rm -rf $run && mkdir -p $run
    (cd $run && "$bin" run "$ls" -o r.json --quiet "${small[@]}" >out.txt 2>err.txt)
    rc=$?
    check "$run: leaf-spine example exits 0 (got $rc)" "[ $rc -eq 0 ]"
done
check "leaf-spine: byte-identical JSON, the same captured frames across runs" \
    "cmp -s ls1/r.json ls2/r.json && [ \"\$(dump ls1/out/leaf-spine/h2.pcap)\" = \"\$(dump ls2/out/leaf-spine/h2.pcap)\" ]"
rm -rf ecmp && mkdir -p ecmp
# (without the failure: moving flows back to the recovered spine reorders)
(cd ecmp && "$bin" run "$ls" -o r.json --quiet --set topology.routing=ecmp \
    --set topology.link.loss=0 --set 'topology.failures=[]' >out.txt 2>err.txt)
rc=$?
check "leaf-spine with ECMP and no loss exits 0 (got $rc)" "[ $rc -eq 0 ]"
check "leaf-spine JSON: spraying reorders, ECMP does not; loss and failure counted" "$py - ls1/r.json ecmp/r.json <<'PY'
import json, sys
s, e = (json.load(open(p)) for p in sys.argv[1:])
t = s['topology']
assert t['kind'] == 'leaf-spine' and t['leaves'] == 2 and t['spines'] == 2 and t['hosts_per_leaf'] == 2
assert t['routing'] == 'spray' and t['link.loss'] == 0.001 and e['topology']['routing'] == 'ecmp'
assert e['topology']['failures'] == [] and e['topology']['link.loss'] == 0
assert t['failures'] == [{'link': 'spine1<->leaf1', 'at': 300000000, 'recover_at': 500000000}], t['failures']
L = s['counters']['links']
assert set(s['counters']['switches']) == {'leaf0', 'leaf1', 'spine0', 'spine1'}
assert 'leaf0->spine1' in L and 'spine1->leaf1' in L and 'node2->leaf1' in L
reord = lambda d: sum(h['fabric']['pkts_reordered'] for h in d['counters']['hosts'].values())
assert reord(s) > 0, 'spraying over two spines must reorder'
assert reord(e) == 0, reord(e)
assert sum(l['pkts_lost'] for l in L.values()) > 0
assert sum(l['pkts_lost'] for l in e['counters']['links'].values()) == 0
for d in (s, e):
    for n, l in d['counters']['links'].items():
        assert l['pkts_dropped'] == (l['pkts_dropped_overflow'] + l['pkts_lost'] + l['pkts_corrupted']
                                     + l['pkts_dropped_down']), n
# spraying used both spines from leaf0 (ECMP may put both flows on one)
assert L['leaf0->spine0']['pkts_sent'] > 1000 and L['leaf0->spine1']['pkts_sent'] > 1000
# the failure: spine1<->leaf1 was down from 300 to 500 us (frames in its
# cable lost, and spine1 dropping what leaf0 sent it before converging)
S = s['counters']['switches']
assert (L['spine1->leaf1']['pkts_dropped_down'] + L['leaf1->spine1']['pkts_dropped_down'] +
        S['spine1']['pkts_dropped_down']) >= 1
assert all(p['exit_code'] == 0 for p in s['programs'] + e['programs'])
print('reordered: spray %d, ecmp %d' % (reord(s), reord(e)))
PY"

# ---------------------------------------------------------------- bad fabric keys
# bad_case NAME EXPECTED-TEXT SED-FILTER [rnicsim args]: the capture
# scenario edited by the filter must fail with exit 2 and the text.
bad_case() {
    local name=$1 want=$2 filter=$3
    shift 3
    sed -e "$filter" pcap.yaml | write_scenario "$name"
    run_scenario "$name" "$@"
    local rc=$?
    local first
    first=$(head -n 1 "$scratch/$name.err")
    if [ $rc -eq 2 ] && [ "${first#*"$want"}" != "$first" ]; then
        ok "$name: exit 2, '$first'"
    else
        bad "$name: rc=$rc, stderr '$first', expected '$want'"
    fi
}
bad_case unknown_link "unknown_link.yaml:5:88: unknown link 'h0->sw1' (did you mean 'h0->sw0'?)" \
    's/delay: 10ns}}/delay: 10ns}, failures: [{link: "h0->sw1", at: 1us}]}/'
bad_case bad_prob "--set:1:20: bad probability '150%': more than 1 (100%)" '' \
    --set topology.link.loss=150%
bad_case bad_prob_text "--set:1:23: bad probability 'lots'" '' --set topology.link.corrupt=lots
bad_case bad_routing "bad value 'spary' for 'topology.routing'" '' --set topology.routing=spary
bad_case recover_early "'topology.failures[0].recover_at' must be later than 'at'" \
    's/delay: 10ns}}/delay: 10ns}, failures: [{link: "sw0<->h1", at: 5us, recover_at: 5us}]}/'
bad_case capture_two "capture[0]': give exactly one of 'link', 'host' or 'all'" \
    's/- {host: h0, file/- {host: h0, all: x, file/'
bad_case capture_host "capture_host.yaml:7:12: unknown host 'h7' (the topology has hosts h0..h1)" \
    's/host: h0, file/host: h7, file/'
bad_case b2b_routing "'topology.routing': a back-to-back topology has no switch" \
    's/kind: star/kind: back-to-back, routing: spray/'
finish
