#!/usr/bin/env bash
# Taranov et al. Figures 8-10 on rnicsim (scenarios/taranov/fig8*, fig9*,
# fig10*; docs/taranov-eval-b.md), small versions of each, asserting the
# relations the paper reports (each can fail):
#   Fig. 8   shared ring, 1 client: head/tail counters in NIC device memory
#            give a lower ping-pong round trip AND a higher stream rate than
#            in host memory; every message checked (order_check clean);
#   Fig. 9a  shared ring, N clients: the cumulative rate grows with the
#            number of clients (2 > 1.6 x 1 client), and at 8 clients the
#            device-memory counter beats the host-memory one by > 1.5x (the
#            host-memory FETCH_AND_ADDs on one address serialise);
#   Fig. 9b  read rings, 4 readers: all 4 readers get every record, the
#            detached bell beats the inlined one, prefetching raises the
#            inlined one;
#   Fig. 10  read ring inlined: prefetching lowers the reader's READs per
#            record (< 1/4) and raises the stream rate (> 2x); a bigger
#            prefetch chunk raises it further.
# Args: rnicsim binary, source dir, scratch dir (test/scenario/lib.sh).
set -u
. "$(dirname "$0")/lib.sh"
sc="$src/scenarios/taranov"
cd "$scratch" || exit 1

# run NAME FILE ARGS...: run a scenario quietly, results in NAME.json
run() {
    local name=$1 file=$2
    shift 2
    timeout 60 "$bin" run "$file" -q -o "$name.json" "$@" >"$name.out" 2>"$name.err"
    rc=$?
    [ "$rc" -eq 0 ] || { echo "  $name: exit $rc"; tail -3 "$name.err"; }
}
# val NAME EXPR: a number from NAME.json; EXPR over t (tables) and h (host counters)
val() {
    $py - "$1.json" "$2" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
t = d["tables"]
h = {k: v["nic"] for k, v in d["counters"]["hosts"].items()}
clean = all(r["violations"] == 0 for r in t.get("order_check", [])) and "order_violation" not in t
print(eval(sys.argv[2]) if clean else "nan")
PY
}
# gt A B [FACTOR]: A > FACTOR * B (floats)
gt() { $py -c "import sys; a,b,f=map(float,sys.argv[1:4]); sys.exit(0 if a > f*b else 1)" "$1" "$2" "${3:-1}"; }

# ---------------------------------------------------------------- Figure 8
f8="$sc/fig8_shared_ring_dm.yaml"
for dm in 0 1; do
    run f8-pp-$dm "$f8" --set vars.mode=pingpong --set vars.messages=50 --set vars.dm=$dm
    run f8-st-$dm "$f8" --set vars.mode=stream --set vars.messages=400 --set vars.dm=$dm
done
rtt0=$(val f8-pp-0 't["taranov_pingpong"][0]["rtt_p50_us"]')
rtt1=$(val f8-pp-1 't["taranov_pingpong"][0]["rtt_p50_us"]')
st0=$(val f8-st-0 't["taranov_stream"][0]["msg_rate_mpps"] if t["order_check"][0]["messages_checked"] == 400 else 0')
st1=$(val f8-st-1 't["taranov_stream"][0]["msg_rate_mpps"] if t["order_check"][0]["messages_checked"] == 400 else 0')
echo "  fig8: RTT p50 host $rtt0 us, device $rtt1 us; rate host $st0, device $st1 M/s"
check "fig8: device-memory counters lower the shared ring's round trip (by > 0.5 us)" \
    'gt "$rtt0" "$(echo "$rtt1 + 0.5" | bc -l)"'
check "fig8: device-memory counters raise the shared ring's stream rate (> 1.1x)" 'gt "$st1" "$st0" 1.1'

# ---------------------------------------------------------------- Figure 9a
for n in 1 2 8; do
    for dm in 0 1; do
        run f9a-c$n-$dm "$sc/fig9a_shared_ring_c$n.yaml" --set vars.messages=200 --set vars.dm=$dm
    done
done
declare -A r9
for n in 1 2 8; do
    for dm in 0 1; do
        r9[$n$dm]=$(val f9a-c$n-$dm "t['taranov_stream'][0]['msg_rate_mpps'] if t['order_check'][0]['messages_checked'] == $n * 200 else 0")
    done
done
echo "  fig9a: host 1/2/8 clients ${r9[10]} ${r9[20]} ${r9[80]}; device ${r9[11]} ${r9[21]} ${r9[81]} M/s"
check "fig9a: cumulative rate grows with clients (2 > 1.6 x 1, host and device)" \
    'gt "${r9[20]}" "${r9[10]}" 1.6 && gt "${r9[21]}" "${r9[11]}" 1.6'
check "fig9a: 8 clients > 2 clients (device memory)" 'gt "${r9[81]}" "${r9[21]}" 2'
check "fig9a: 8 clients, device-memory head > 1.5x host-memory head" 'gt "${r9[81]}" "${r9[80]}" 1.5'

# ---------------------------------------------------------------- Figure 9b
for ch in detached inlined inlined_prefetch; do
    run f9b-$ch "$sc/fig9b_read_ring_$ch.yaml" --set vars.messages=200
done
cum() { val "$1" 'sum(r["msg_rate_mpps"] for r in t["taranov_stream"]) if [r["messages_checked"] for r in t["order_check"]] == [200] * 4 else 0'; }
b_det=$(cum f9b-detached)
b_inl=$(cum f9b-inlined)
b_pf=$(cum f9b-inlined_prefetch)
echo "  fig9b: 4 readers cumulative detached $b_det, inlined $b_inl, inlined+prefetch $b_pf M/s"
check "fig9b: every reader checked every record; detached > 2x inlined" 'gt "$b_det" "$b_inl" 2'
check "fig9b: prefetching raises the inlined read ring (> 2x)" 'gt "$b_pf" "$b_inl" 2'

# ---------------------------------------------------------------- Figure 10
for pf in off on; do
    run f10-$pf "$sc/fig10_read_ring_prefetch_$pf.yaml" --set vars.messages=500
done
run f10-on-256 "$sc/fig10_read_ring_prefetch_on.yaml" --set vars.messages=500 --set vars.maxsize=256
wr_off=$(val f10-off 'h["h1"]["wqes_completed"] / t["taranov_stream"][0]["messages"]')
wr_on=$(val f10-on 'h["h1"]["wqes_completed"] / t["taranov_stream"][0]["messages"]')
r_off=$(val f10-off 't["taranov_stream"][0]["msg_rate_mpps"]')
r_on=$(val f10-on 't["taranov_stream"][0]["msg_rate_mpps"]')
r_256=$(val f10-on-256 't["taranov_stream"][0]["msg_rate_mpps"]')
echo "  fig10: reader WRs/record off $wr_off, on $wr_on; rate off $r_off, on (4 KiB) $r_on, on (256 B) $r_256 M/s"
check "fig10: prefetching needs < 1/4 of the READs per record" 'gt "$wr_off" "$wr_on" 4'
check "fig10: no prefetch needs >= 2 READs per record (bell, then record)" 'gt "$wr_off" 1.99'
check "fig10: prefetching raises the rate (> 2x)" 'gt "$r_on" "$r_off" 2'
check "fig10: a 4 KiB prefetch chunk beats a 256 B one" 'gt "$r_on" "$r_256" 1.5'
finish
