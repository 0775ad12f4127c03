#!/usr/bin/env bash
# The 13 write-side channels of Taranov et al. (protocols/taranov, the
# taranov driver, scenarios/taranov/*.yaml) on IB RC (cx5-100g):
#   1. every channel: a stream of variable-size messages (24 B .. 9000 B,
#      multi-packet; 4 B for the bufferless channel) arrives intact, exactly
#      once, in order where the channel promises it, with correct sizes
#      (the receiver checks each one; order_check row, no violation);
#   2. wrap-around: the rings carry many times their size, the slot
#      channels many times their slot count;
#   3. N:1: send-shared, write-slot-reserve and both shared rings with 3
#      senders: 3 x N messages, none lost or duplicated; with a slow writer
#      (sender 0 reserves, then waits 20 us before its WRITE) nothing is
#      corrupted, and the run is measurably slower;
#   4. shared rings with head/tail in device memory (--dm);
#   5. ping-pong mode reports a round trip for one channel of each kind;
#   6. ordering: ring-inlined-nozero passes `rnicsim check-order` on IB RC
#      and FAILS it under relaxed DMA ordering and IB adaptive routing (it
#      needs in-order bytes and messages); ring-imm (needs nothing) passes
#      under relaxed DMA, shared-ring-imm under adaptive routing;
#      shared-ring-inlined (needs bytes) fails under relaxed DMA;
#   7. bad input: unknown channel, a second sender on a point-to-point
#      channel.
# Args: rnicsim binary, source dir, scratch dir (test/scenario/lib.sh).
set -u
. "$(dirname "$0")/lib.sh"
sc="$src/scenarios/taranov"
cd "$scratch" || exit 1

# run NAME FILE ARGS...: run a scenario (results in NAME.json); the run's
# exit status is in $rc
run() {
    local name=$1 file=$2
    shift 2
    timeout 120 "$bin" run "$file" -q -o "$name.json" "$@" >"$name.out" 2>"$name.err"
    rc=$?
}
# verdict NAME MESSAGES [MIN_BYTES]: exit 0, one clean order_check with
# MESSAGES messages (and at least MIN_BYTES bytes), no violation row
verdict() {
    $py - "$1.json" "$2" "${3:-0}" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
want, min_bytes = int(sys.argv[2]), float(sys.argv[3])
t = d.get("tables", {})
oc = t.get("order_check", [])
ok = (d["result"] == "done" and "order_violation" not in t and len(oc) == 1
      and oc[0]["messages_checked"] == want and oc[0]["violations"] == 0
      and oc[0]["bytes_checked"] >= min_bytes)
if not ok:
    print("result", d["result"], "tables", json.dumps(t)[:400])
sys.exit(0 if ok else 1)
PY
}
col() { # col NAME TABLE KEY: the first row's value
    $py -c "import json,sys; print(json.load(open(sys.argv[1]))['tables'][sys.argv[2]][0][sys.argv[3]])" "$1.json" "$2" "$3"
}

# 1 + 2: point-to-point channels, 300 messages of sizes 24..9000 B
# (average 2.4 KB: 720 KB through a 32 KiB ring = 22 laps; 300 messages
# through 16 slots = 18 laps)
for f in send_normal send_bufferless write_slot_detached write_slot_inlined write_slot_imm \
    ring_detached ring_imm ring_inlined_zero ring_inlined_nozero; do
    run "$f" "$sc/$f.yaml" --set vars.messages=300
    if [ "$f" = send_bufferless ]; then min=1200; else min=$((300 * 2000)); fi
    check "$f: 300 variable-size messages intact, exactly once, in order where promised (exit $rc)" \
        "[ $rc -eq 0 ] && verdict $f 300 $min"
done
# a ring smaller than one lap of the stream, with messages up to half of it
run ring_small "$sc/ring_inlined_nozero.yaml" --set vars.messages=200 --set vars.ring=8KiB \
    --set 'vars.sizes=24,100,1000,4000'
check "ring-inlined-nozero, 8 KiB ring, 4000-byte messages: 200 messages, > 30 laps" \
    "[ $rc -eq 0 ] && verdict ring_small 200 $((8192 * 30))"
run ring_zero_small "$sc/ring_inlined_zero.yaml" --set vars.messages=200 --set vars.ring=8KiB \
    --set 'vars.sizes=24,100,1000,4000'
check "ring-inlined-zero, 8 KiB ring: 200 messages, > 30 laps" \
    "[ $rc -eq 0 ] && verdict ring_zero_small 200 $((8192 * 30))"

# 3: N:1, 3 senders x 200 messages, plain and with a slow writer
for f in send_shared write_slot_reserve shared_ring_imm shared_ring_inlined; do
    run "$f" "$sc/$f.yaml" --set vars.messages=200
    check "$f: 3 senders x 200 messages, none lost or duplicated (exit $rc)" \
        "[ $rc -eq 0 ] && verdict $f 600 $((600 * 2000)) && [ \"\$(col $f order_check senders)\" = 3 ]"
done
for f in write_slot_reserve shared_ring_imm shared_ring_inlined; do
    run "${f}_slow" "$sc/$f.yaml" --set vars.messages=200 --set vars.slow_ns=20000
    check "$f: a slow writer (20 us between reserve and WRITE) corrupts nothing (exit $rc)" \
        "[ $rc -eq 0 ] && verdict ${f}_slow 600"
    check "$f: the slow writer slows the run (elapsed $(col "$f" taranov_stream elapsed_us) -> $(col "${f}_slow" taranov_stream elapsed_us) us)" \
        "$py -c 'import sys; sys.exit(0 if float(sys.argv[2]) > 1.5 * float(sys.argv[1]) else 1)' \
         \"\$(col $f taranov_stream elapsed_us)\" \"\$(col ${f}_slow taranov_stream elapsed_us)\""
done
# a small shared ring: the senders must READ the tail and wait for room
run sring_small "$sc/shared_ring_inlined.yaml" --set vars.messages=200 --set vars.ring=16KiB \
    --set 'vars.sizes=24,64,1000,4000'
check "shared-ring-inlined, 16 KiB ring, 3 senders: 600 messages, > 20 laps (exit $rc)" \
    "[ $rc -eq 0 ] && verdict sring_small 600 $((16384 * 20))"
run sring_imm_small "$sc/shared_ring_imm.yaml" --set vars.messages=200 --set vars.ring=16KiB \
    --set 'vars.sizes=24,64,1000,4000' --set vars.slow_ns=5000
check "shared-ring-imm, 16 KiB ring, slow writer: 600 messages (exit $rc)" \
    "[ $rc -eq 0 ] && verdict sring_imm_small 600 $((16384 * 20))"

# 4: device memory for head and tail (one sender, ping-pong: 3 HRT each way)
cat >dm.yaml <<EOF
name: taranov-dm
seed: 1
stop_time: 1s
profile: cx5-100g
vars: {ch: shared-ring-inlined, dm: "--dm"}
topology: {kind: star, hosts: 2, link: {rate: 100Gbps, delay: 10ns}, switch: {latency: 300ns, buffer: 1MiB}}
programs:
  - {host: h1, program: taranov, args: [--server, "--channel=\${ch}", --mode=pingpong, --sizes=64, --messages=50, "\${dm}"]}
  - {host: h0, program: taranov, args: [--client, "--channel=\${ch}", --mode=pingpong, --sizes=64, --messages=50, "\${dm}"]}
EOF
for ch in shared-ring-inlined shared-ring-imm; do
    run "dm_$ch" dm.yaml --set "vars.ch=$ch"
    rc_dm=$rc
    run "host_$ch" dm.yaml --set "vars.ch=$ch" --set vars.dm=--verbose
    check "$ch: head/tail in device memory works and is faster than in host memory ($(col "host_$ch" taranov_pingpong rtt_p50_us) -> $(col "dm_$ch" taranov_pingpong rtt_p50_us) us)" \
        "[ $rc_dm -eq 0 ] && [ $rc -eq 0 ] && verdict dm_$ch 50 && $py -c 'import sys; sys.exit(0 if float(sys.argv[1]) < float(sys.argv[2]) else 1)' \
         \"\$(col dm_$ch taranov_pingpong rtt_p50_us)\" \"\$(col host_$ch taranov_pingpong rtt_p50_us)\""
done

# 4b: blocking receive (completion channel) on the completion-based receivers
sed -e 's/--mode=pingpong, --sizes=64, --messages=50, "\${dm}"/--messages=200, --blocking/' dm.yaml >blocking.yaml
for ch in send-normal write-slot-imm ring-imm; do
    run "blk_$ch" blocking.yaml --set "vars.ch=$ch"
    check "$ch --blocking: 200 messages received through ibv_get_cq_event (exit $rc)" \
        "[ $rc -eq 0 ] && verdict blk_$ch 200"
done

# 5: ping-pong reports a round trip
for f in send_normal ring_inlined_nozero write_slot_imm; do
    run "pp_$f" "$sc/$f.yaml" --set vars.mode=pingpong --set vars.sizes=64,4096 --set vars.messages=20
    check "$f ping-pong: 2 sizes x 20 round trips checked, RTT > 1 us" \
        "[ $rc -eq 0 ] && verdict pp_$f 40 && $py -c 'import sys; sys.exit(0 if float(sys.argv[1]) > 1 else 1)' \"\$(col pp_$f taranov_pingpong rtt_p50_us)\""
done

# 6: ordering verdicts with rnicsim check-order
co() { # co NAME FILE ARGS...: exit status in $rc
    local name=$1 file=$2
    shift 2
    timeout 300 "$bin" check-order "$file" -o "$name.json" "$@" >"$name.out" 2>&1
    rc=$?
}
co nozero_strict "$sc/ring_inlined_nozero.yaml" --runs 3 --set vars.messages=300
check "ring-inlined-nozero passes check-order on IB RC, strict DMA (exit $rc)" "[ $rc -eq 0 ]"
co nozero_relaxed "$sc/ring_inlined_nozero.yaml" --runs 3 --set vars.messages=300 \
    --set hardware.nic.dma_ordering=relaxed
# relaxed DMA lets the bell land before the message: the receiver reads a
# torn message (VIOLATION, exit 1) or, misled by it, waits at a position
# where nothing will come (deadlock, exit 3) - which one depends on timing
check "ring-inlined-nozero FAILS check-order with relaxed DMA ordering (exit $rc)" \
    "{ [ $rc -eq 1 ] && grep -q VIOLATION nozero_relaxed.out; } || { [ $rc -eq 3 ] && grep -q 'deadlock' nozero_relaxed.out; }"
co nozero_ar "$sc/ring_inlined_nozero.yaml" --runs 5 --set vars.messages=300 \
    --set hardware.nic.transport=ib-ar
check "ring-inlined-nozero FAILS check-order with IB adaptive routing (exit $rc)" \
    "[ $rc -eq 1 ] && grep -q VIOLATION nozero_ar.out"
co imm_relaxed "$sc/ring_imm.yaml" --runs 3 --set vars.messages=300 \
    --set hardware.nic.dma_ordering=relaxed
check "ring-imm (needs nothing) passes check-order with relaxed DMA ordering (exit $rc)" \
    "[ $rc -eq 0 ]"

co sring_imm_ar "$sc/shared_ring_imm.yaml" --runs 2 --set vars.messages=150 \
    --set hardware.nic.transport=ib-ar
check "shared-ring-imm (needs nothing), 3 senders, passes check-order with IB adaptive routing (exit $rc)" \
    "[ $rc -eq 0 ]"
co sring_inl_relaxed "$sc/shared_ring_inlined.yaml" --runs 2 --set vars.messages=150 \
    --set hardware.nic.dma_ordering=relaxed
check "shared-ring-inlined (needs bytes) FAILS check-order with relaxed DMA ordering (exit $rc)" \
    "[ $rc -eq 1 ] && grep -q VIOLATION sring_inl_relaxed.out"

# 7: bad input
cat >bad.yaml <<'EOF'
name: taranov-bad
seed: 1
stop_time: 1s
profile: cx5-100g
vars: {a: --channel=no-such-channel}
topology: {kind: star, hosts: 2, link: {rate: 100Gbps, delay: 10ns}, switch: {latency: 300ns, buffer: 1MiB}}
programs:
  - {host: h1, program: taranov, args: [--server, "${a}"]}
EOF
run bad bad.yaml
check "unknown channel: the program fails with a clear message (exit $rc)" \
    "[ $rc -eq 1 ] && grep -q 'unknown or missing --channel=no-such-channel' bad.err"
sed 's/"${a}"]/--channel=ring-imm, --senders=2]/' bad.yaml >bad2.yaml
run bad2 bad2.yaml
check "a second sender on a point-to-point channel is refused (exit $rc)" \
    "[ $rc -eq 1 ] && grep -q 'one sender only' bad2.err"

finish
