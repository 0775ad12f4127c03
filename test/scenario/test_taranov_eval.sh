#!/usr/bin/env bash
# Taranov et al. Section 6 (Figures 4-7) through the taranov driver's rpc
# mode (scenarios/taranov/fig*.yaml, docs/taranov-eval.md), small versions:
#   1. Fig 4: copying each request into the log store costs round-trip time
#      that grows with the size (16 KiB: > 1.5 us more, 64 B: < 0.2 us more)
#      and throughput at 16 outstanding; the server reports the bytes it
#      copied (all of them with the store, none without);
#   2. Fig 5: the one-HRT channels (send-normal, ring-inlined-nozero) are
#      faster than the multi-HRT ones (shared-ring-imm, read-ring-inlined)
#      at 64 B; ring-detached (two WRITEs) is slower than ring-inlined-nozero;
#      the read ring jumps for large messages (8 KiB > 64 B + 2 us);
#   3. Fig 6: the read ring's CDF rows: 100 per size, non-decreasing, the
#      4 KiB distribution right of the 64 B one;
#   4. Fig 7: throughput grows with outstanding requests (4 > 2.5 x 1,
#      16 > 4) then saturates (64 < 1.15 x 16); --batch answers with fewer
#      responses than requests; ring-inlined-zero is slower than
#      ring-inlined-nozero at 4 KiB (zeroing);
#   5. 1:N read rings through the driver: 3 readers each check every
#      message; reader ids >= --receivers are refused;
#   6. ping-pong with several sizes (a regression: the client checked the
#      echo's seq against the per-size count, "echo of message 21 is wrong");
#   7. bad input: rpc options without --mode=rpc, a bad --back-channel.
# Args: rnicsim binary, source dir, scratch dir (test/scenario/lib.sh).
set -u
. "$(dirname "$0")/lib.sh"
sc="$src/scenarios/taranov"
cd "$scratch" || exit 1

run() { # run NAME FILE ARGS...: results in NAME.json, exit status in $rc
    local name=$1 file=$2
    shift 2
    timeout 120 "$bin" run "$file" -q -o "$name.json" "$@" >"$name.out" 2>"$name.err"
    rc=$?
}
rpc() { # rpc NAME SIZE COLUMN: taranov_rpc's COLUMN for SIZE
    $py - "$1.json" "$2" "$3" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
rows = [r for r in d["tables"]["taranov_rpc"] if r["size_bytes"] == float(sys.argv[2])]
print(rows[0][sys.argv[3]])
PY
}
oc() { # oc NAME COLUMN: the first order_check row's COLUMN
    $py -c "import json,sys; print(json.load(open(sys.argv[1]))['tables']['order_check'][0][sys.argv[2]])" "$1.json" "$2"
}
lt() { $py -c "import sys; sys.exit(0 if float(sys.argv[1]) < float(sys.argv[2]) else 1)" "$1" "$2"; }
gt() { lt "$2" "$1"; }
expr_() { $py -c "print($1)"; }

# 1: Fig 4, 200 requests of 64 B and 16 KiB, one and 16 outstanding
for store in 0 67108864; do
    for w in 1 16; do
        run "f4_${store}_$w" "$sc/fig4_copy.yaml" --set vars.messages=200 --set vars.sizes=64,16384 \
            --set vars.store=$store --set vars.window=$w
        check "fig4 store=$store window=$w runs clean (exit $rc)" \
            "[ $rc -eq 0 ] && [ \"\$(oc f4_${store}_$w messages_checked)\" = 400 ]"
    done
done
z=$(rpc f4_0_1 16384 rtt_p50_us) c=$(rpc f4_67108864_1 16384 rtt_p50_us)
check "fig4: 16 KiB copy round trip $c us > zero-copy $z us + 1.5 us" "gt $c $(expr_ "$z + 1.5")"
z=$(rpc f4_0_1 64 rtt_p50_us) c=$(rpc f4_67108864_1 64 rtt_p50_us)
check "fig4: 64 B copy round trip $c us < zero-copy $z us + 0.2 us (and >= it)" \
    "lt $c $(expr_ "$z + 0.2") && ! lt $c $z"
z=$(rpc f4_0_16 16384 mreq_s) c=$(rpc f4_67108864_16 16384 mreq_s)
check "fig4: 16 KiB throughput zero-copy $z > copy $c Mreq/s (x1.3)" "gt $z $(expr_ "$c * 1.3")"
check "fig4: the copy server copied every request byte, the zero-copy one none" \
    "[ \"\$(oc f4_67108864_1 bytes_copied)\" = $((200 * 64 + 200 * 16384)) ] && [ \"\$(oc f4_0_1 bytes_copied)\" = 0 ]"

# 2: Fig 5 at 64 B and 8 KiB
for ch in send-normal ring-inlined-nozero ring-detached; do
    run "f5_$ch" "$sc/fig5_one_hrt.yaml" --set vars.messages=100 --set vars.sizes=64,8192 --set vars.ch=$ch
    check "fig5 $ch (exit $rc)" "[ $rc -eq 0 ]"
done
for ch in shared-ring-imm read-ring-inlined; do
    run "f5_$ch" "$sc/fig5_multi_hrt.yaml" --set vars.messages=100 --set vars.sizes=64,8192 --set vars.ch=$ch
    check "fig5 $ch (exit $rc)" "[ $rc -eq 0 ]"
done
one=$($py -c "print(max($(rpc f5_send-normal 64 rtt_p50_us), $(rpc f5_ring-inlined-nozero 64 rtt_p50_us)))")
multi=$($py -c "print(min($(rpc f5_shared-ring-imm 64 rtt_p50_us), $(rpc f5_read-ring-inlined 64 rtt_p50_us)))")
check "fig5: one-HRT channels (slowest $one us) faster than multi-HRT ones (fastest $multi us) at 64 B" \
    "lt $one $multi"
check "fig5: ring-detached slower than ring-inlined-nozero at 64 B (two WRITEs)" \
    "gt $(rpc f5_ring-detached 64 rtt_p50_us) $(expr_ "$(rpc f5_ring-inlined-nozero 64 rtt_p50_us) + 0.3")"
check "fig5: read ring 8 KiB round trip > 64 B + 2 us" \
    "gt $(rpc f5_read-ring-inlined 8192 rtt_p50_us) $(expr_ "$(rpc f5_read-ring-inlined 64 rtt_p50_us) + 2")"

# 3: Fig 6
run f6 "$sc/fig6_read_ring_cdf.yaml" --set vars.messages=300
check "fig6: CDF rows (100 per size, non-decreasing; 4 KiB right of 64 B) (exit $rc)" \
    "[ $rc -eq 0 ] && $py - f6.json <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))['tables']['taranov_rtt_cdf']
by = {}
for r in c:
    by.setdefault(r['size_bytes'], []).append((r['pct'], r['rtt_us']))
ok = sorted(by) == [64, 4096] and all(len(v) == 100 for v in by.values())
ok = ok and all(all(a[1] <= b[1] for a, b in zip(v, v[1:])) for v in by.values())
ok = ok and by[4096][49][1] > by[64][49][1] + 1
sys.exit(0 if ok else 1)
PY"

# 4: Fig 7, ring-inlined-nozero, 64 B and 4 KiB, windows 1 4 16 64
for w in 1 4 16 64; do
    run "f7_$w" "$sc/fig7_window.yaml" --set vars.messages=300 --set vars.sizes=64,4096 --set vars.window=$w
    check "fig7 window=$w (exit $rc)" "[ $rc -eq 0 ]"
done
t1=$(rpc f7_1 64 mreq_s) t4=$(rpc f7_4 64 mreq_s) t16=$(rpc f7_16 64 mreq_s) t64=$(rpc f7_64 64 mreq_s)
check "fig7: throughput grows with outstanding requests ($t1 -> $t4 -> $t16 Mreq/s)" \
    "gt $t4 $(expr_ "2.5 * $t1") && gt $t16 $(expr_ "1.2 * $t4")"
check "fig7: and saturates (64 outstanding: $t64 < 1.15 x $t16)" "lt $t64 $(expr_ "1.15 * $t16")"
check "fig7: --batch answered 600 requests with fewer responses ($(oc f7_16 responses))" \
    "[ \"\$(oc f7_16 messages_checked)\" = 600 ] && lt $(oc f7_16 responses) 600"
run f7_zero "$sc/fig7_window.yaml" --set vars.messages=300 --set vars.sizes=64,4096 --set vars.window=16 \
    --set vars.ch=ring-inlined-zero
check "fig7: ring-inlined-zero slower than -nozero at 4 KiB (exit $rc)" \
    "[ $rc -eq 0 ] && lt $(rpc f7_zero 4096 mreq_s) $(expr_ "0.8 * $(rpc f7_16 4096 mreq_s)")"

# 5: 1:N read rings through the driver
cat >r1n.yaml <<'EOF'
name: taranov-read-ring-1n
seed: 1
stop_time: 2s
profile: cx5-100g
vars: {ch: read-ring-inlined, last: 2}
topology: {kind: star, hosts: 4, link: {rate: 100Gbps, delay: 10ns}, switch: {latency: 300ns, buffer: 1MiB}}
programs:
  - {host: h1, program: taranov, args: [--server, --id=0, --receivers=3, "--channel=${ch}", --messages=300, "--sizes=24,200,4096", --ring-bytes=16KiB]}
  - {host: h2, program: taranov, args: [--server, --id=1, --receivers=3, "--channel=${ch}", --messages=300, "--sizes=24,200,4096", --ring-bytes=16KiB]}
  - {host: h3, program: taranov, args: [--server, "--id=${last}", --receivers=3, "--channel=${ch}", --messages=300, "--sizes=24,200,4096", --ring-bytes=16KiB]}
  - {host: h0, program: taranov, args: [--client, --receivers=3, "--channel=${ch}", --messages=300, "--sizes=24,200,4096", --ring-bytes=16KiB]}
EOF
for ch in read-ring-inlined read-ring-detached read-ring-notify; do
    run "r1n_$ch" r1n.yaml --set vars.ch=$ch
    check "1:N $ch: 3 readers each checked all 300 messages (exit $rc)" \
        "[ $rc -eq 0 ] && $py - r1n_$ch.json <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))['tables']
oc = t.get('order_check', [])
sys.exit(0 if 'order_violation' not in t and len(oc) == 3 and
         sorted(r['reader'] for r in oc) == [0, 1, 2] and
         all(r['messages_checked'] == 300 and r['violations'] == 0 for r in oc) else 1)
PY"
done
run r1n_bad r1n.yaml --set vars.last=3
check "1:N: reader --id=3 of --receivers=3 refused (exit $rc)" \
    "[ $rc -ne 0 ] && grep -q 'must be < --receivers=3' r1n_bad.err"

# 6: ping-pong, six sizes
run pp "$sc/ring_detached.yaml" --set vars.mode=pingpong --set vars.messages=20
n=$($py -c "import json; print(len(json.load(open('pp.json'))['tables'].get('taranov_pingpong', [])))" 2>/dev/null)
check "pingpong with 6 sizes: every echo right, $n sizes reported (exit $rc)" "[ $rc -eq 0 ] && [ \"$n\" = 6 ]"

# 7: bad input
cat >bad.yaml <<'EOF'
name: bad
seed: 1
stop_time: 1s
profile: cx5-100g
vars: {extra: --copy-store=4096, mode: stream}
topology: {kind: star, hosts: 2, link: {rate: 100Gbps, delay: 10ns}, switch: {latency: 300ns, buffer: 1MiB}}
programs:
  - {host: h1, program: taranov, args: [--server, --channel=send-normal, "--mode=${mode}", "${extra}"]}
  - {host: h0, program: taranov, args: [--client, --channel=send-normal, "--mode=${mode}", "${extra}"]}
EOF
run bad1 bad.yaml
check "--copy-store without --mode=rpc: usage error (exit $rc)" \
    "[ $rc -ne 0 ] && grep -q 'need --mode=rpc' bad1.err"
run bad2 bad.yaml --set vars.extra=--back-channel=nope --set vars.mode=rpc
check "unknown --back-channel: usage error (exit $rc)" \
    "[ $rc -ne 0 ] && grep -q 'unknown --back-channel=nope' bad2.err"

# write-slot-reserve's sender polls two CQs (send, grant) and then posts:
# the verbs shim's spin heuristic once parked it there before the post
# (deadlock at the first request with an inlined-bell back channel).
rs_args="--channel=write-slot-reserve,--back-channel=write-slot-inlined,--mode=rpc,--window=4,--messages=100,--sizes=64"
check "rpc write-slot-reserve with an inlined-bell back channel completes" \
    "'$bin' run '$src/scenarios/taranov/fig7_window.yaml' --set 'programs.0.args=[--server,$rs_args]' --set 'programs.1.args=[--client,$rs_args]' -o rs.json >rs.out 2>&1"

finish
