#!/usr/bin/env bash
# The portable append-queue layer (protocols/rima, docs/rima-portable.md)
# through rima_stream: 3 senders, mixed sizes, one queue on h0.
#  1. SW mode (FETCH_AND_ADD + WRITE_WITH_IMM): every message checked
#     (6000), zero violations, per-sender counts, and the run is
#     deterministic (same hashes and latencies twice).
#  2. SW flow control: an 8 KiB region with --hold=3 (random-order
#     consumption): the senders must wait for the head (flow_waits > 0,
#     abandoned wrap reservations > 0) and still deliver everything intact.
#  3. HW mode (IBV_WR_APPEND) and the key property: the software fallback
#     produces the same received byte stream as the hardware verb for the
#     same workload (per-sender 64-bit hashes, message and byte counts),
#     with a roomy region and with a 16 KiB region + out-of-order
#     consumption (HW: RNR NAKs; SW: head READs).
#  4. Negative controls: a client with other --messages is refused (exit 2);
#     --mode=bogus and --sizes below the header are usage errors.
set -u
. "$(dirname "$0")/lib.sh"
scn="$src/scenarios/rima"

run() { # out.json scenario [--set ...]
    local out=$1 f=$2
    shift 2
    "$bin" run "$f" -o "$out" "$@" >"$out.log" 2>&1
}

# field TABLE KEY [row]: a value from the results JSON
field() {
    $py -c "import json,sys; d=json.load(open(sys.argv[1])); print(d['tables'][sys.argv[2]][int(sys.argv[4])][sys.argv[3]])" "$@" 2>/dev/null
}

# per-sender fingerprint: sorted "sender messages bytes hash_hi hash_lo"
fingerprint() {
    $py -c "
import json,sys
d=json.load(open(sys.argv[1]))
rows=sorted(d['tables']['rima_stream_rx'], key=lambda r: r['sender'])
print(';'.join('%d %d %d %d %d' % (r['sender'], r['messages'], r['bytes'], r['hash_hi'], r['hash_lo']) for r in rows))
" "$1" 2>/dev/null
}

# 1. SW mode
sw="$scratch/sw.json"
run "$sw" "$scn/stream_sw.yaml"
rc=$?
check "sw: run exit 0 (got $rc)" "[ $rc -eq 0 ]"
check "sw: mode 2 (software)" "[ \"\$(field $sw rima_stream mode 0)\" = 2 ]"
check "sw: 6000 messages checked" "[ \"\$(field $sw rima_stream messages_checked 0)\" = 6000 ]"
check "sw: zero violations" "[ \"\$(field $sw rima_stream violations 0)\" = 0 ]"
check "sw: every message consumed" "[ \"\$(field $sw rima_stream consumed 0)\" = 6000 ]"
check "sw: 3 senders x 2000 messages received" \
    "$py -c \"import json; d=json.load(open('$sw')); r=d['tables']['rima_stream_rx']; assert len(r)==3 and all(x['messages']==2000 for x in r)\""
check "sw: senders used FETCH_AND_ADD (faa >= 2000 each)" \
    "$py -c \"import json; d=json.load(open('$sw')); a=d['tables']['rima_append']; assert len(a)==3 and all(x['faa']>=2000 and x['mode']==2 for x in a)\""
check "sw: latency p99 >= p50 > 0" \
    "$py -c \"import json; r=json.load(open('$sw'))['tables']['rima_stream'][0]; assert r['t_p99_us']>=r['t_p50_us']>0\""
sw2="$scratch/sw2.json"
run "$sw2" "$scn/stream_sw.yaml"
check "sw: deterministic (same tables twice)" \
    "$py -c \"import json; a=json.load(open('$sw'))['tables']; b=json.load(open('$sw2'))['tables']; assert a==b\""

# 2. SW flow control in a small region
fc="$scratch/sw_small.json"
run "$fc" "$scn/stream_sw.yaml" --set vars.region=8KiB --set vars.hold=3 --set vars.messages=500
rc=$?
check "sw 8KiB: run exit 0 (got $rc)" "[ $rc -eq 0 ]"
check "sw 8KiB: 1500 messages checked, zero violations" \
    "[ \"\$(field $fc rima_stream messages_checked 0)\" = 1500 ] && [ \"\$(field $fc rima_stream violations 0)\" = 0 ]"
check "sw 8KiB: senders waited for the head (flow_waits, head_reads > 0)" \
    "$py -c \"import json; a=json.load(open('$fc'))['tables']['rima_append']; assert all(x['flow_waits']>0 and x['head_reads']>0 for x in a)\""
check "sw 8KiB: wrap reservations abandoned and padded" \
    "$py -c \"import json; d=json.load(open('$fc'))['tables']; assert all(x['dead_reservations']>0 for x in d['rima_append']) and d['rima_stream'][0]['pad_bytes']>0\""
check "sw 8KiB: never more pending than the region" \
    "$py -c \"import json; r=json.load(open('$fc'))['tables']['rima_stream'][0]; assert 0 < r['peak_pending_bytes'] <= 8192\""
fc_big="$scratch/sw_big500.json"
run "$fc_big" "$scn/stream_sw.yaml" --set vars.messages=500
check "sw 8KiB: same received streams as with a 1 MiB region" \
    "[ -n \"\$(fingerprint $fc)\" ] && [ \"\$(fingerprint $fc)\" = \"\$(fingerprint $fc_big)\" ]"

# 3. HW mode, and SW == HW
hw="$scratch/hw.json"
run "$hw" "$scn/stream_hw.yaml"
rc=$?
check "hw: run exit 0 (got $rc)" "[ $rc -eq 0 ]"
check "hw: mode 1 (hardware), 6000 checked, zero violations" \
    "[ \"\$(field $hw rima_stream mode 0)\" = 1 ] && [ \"\$(field $hw rima_stream messages_checked 0)\" = 6000 ] && [ \"\$(field $hw rima_stream violations 0)\" = 0 ]"
check "hw: no FETCH_AND_ADD used" \
    "$py -c \"import json; a=json.load(open('$hw'))['tables']['rima_append']; assert all(x['faa']==0 and x['mode']==1 for x in a)\""
echo "sw fingerprint: $(fingerprint "$sw")"
echo "hw fingerprint: $(fingerprint "$hw")"
check "sw fallback == hw verb: same per-sender received byte streams (hash, messages, bytes)" \
    "[ -n \"\$(fingerprint $sw)\" ] && [ \"\$(fingerprint $sw)\" = \"\$(fingerprint $hw)\" ]"
check "hw: lower append latency than sw (p50)" \
    "$py -c \"import json; h=json.load(open('$hw'))['tables']['rima_stream'][0]; s=json.load(open('$sw'))['tables']['rima_stream'][0]; assert h['t_p50_us'] < s['t_p50_us']\""
hws="$scratch/hw_small.json"
sws="$scratch/sw_small16.json"
run "$hws" "$scn/stream_hw.yaml" --set vars.region=16KiB --set vars.hold=8 --set vars.messages=300
run "$sws" "$scn/stream_sw.yaml" --set vars.region=16KiB --set vars.hold=8 --set vars.messages=300
check "16KiB + hold 8: hw and sw each check 900 messages, zero violations" \
    "[ \"\$(field $hws rima_stream messages_checked 0)\" = 900 ] && [ \"\$(field $sws rima_stream messages_checked 0)\" = 900 ] && [ \"\$(field $hws rima_stream violations 0)\" = 0 ] && [ \"\$(field $sws rima_stream violations 0)\" = 0 ]"
check "16KiB + hold 8: sw == hw received streams" \
    "[ -n \"\$(fingerprint $hws)\" ] && [ \"\$(fingerprint $hws)\" = \"\$(fingerprint $sws)\" ]"
check "16KiB: a different seed gives different streams (the hash sees the bytes)" \
    "run '$scratch/seed2.json' '$scn/stream_sw.yaml' --set vars.region=16KiB --set vars.messages=300 --set 'programs.0.args=[--server,--mode=sw,--senders=3,--messages=300,--max-size=4096,--region=16KiB,--seed=2]' --set 'programs.1.args=[--client,--id=0,--senders=3,--messages=300,--max-size=4096,--seed=2]' --set 'programs.2.args=[--client,--id=1,--senders=3,--messages=300,--max-size=4096,--seed=2]' --set 'programs.3.args=[--client,--id=2,--senders=3,--messages=300,--max-size=4096,--seed=2]' && [ \"\$(field $scratch/seed2.json rima_stream messages_checked 0)\" = 900 ] && [ \"\$(fingerprint $scratch/seed2.json)\" != \"\$(fingerprint $sws)\" ]"

# 4. negative controls
bad="$scratch/bad.json"
run "$bad" "$scn/stream_sw.yaml" --set 'programs.3.args=[--client,--id=2,--senders=3,--messages=7]' --set stop_time=50ms
rc=$?
check "mismatched --messages: run fails (got $rc)" "[ $rc -ne 0 ]"
check "mismatched --messages: 'runs other options' reported" "grep -q 'other options' '$bad.log'"
run "$bad" "$scn/stream_sw.yaml" --set 'programs.0.args=[--server,--mode=bogus]' --set stop_time=50ms
check "--mode=bogus: bad value reported" "grep -q \"bad value for --mode: 'bogus'\" '$bad.log'"
run "$bad" "$scn/stream_sw.yaml" --set 'programs.1.args=[--client,--sizes=8]' --set stop_time=50ms
check "--sizes=8 (below the 16-byte header): bad value reported" "grep -q \"bad value for --sizes: '8'\" '$bad.log'"
run "$bad" "$scn/stream_sw.yaml" --set 'programs.0.args=[--server,--mode=sw,--senders=3,--messages=2000,--max-size=4096,--region=0]' --set stop_time=50ms
check "--region=0: refused" "grep -q \"bad value for --region\" '$bad.log'"
run "$bad" "$scn/stream_sw.yaml" --set 'programs.0.args=[--server,--mode=hw,--senders=3,--messages=2000,--max-size=4096,--region=12345]' --set stop_time=50ms
check "hw --region=12345 (not 4 KiB multiple): rima_aq_create EINVAL reported" "grep -q 'rima_aq_create(hw, region 12345): Invalid argument' '$bad.log'"

finish
