#!/usr/bin/env bash
# InfiniBand framing (docs/nic.md "Framing"): with nic.link_layer ib every
# packet is LRH 8 + BTH + headers + payload + ICRC 4 + VCRC 2 (no Ethernet,
# IPv4, UDP, no 64 B minimum) and costs its link 2 B of delimiters instead
# of Ethernet's 20 B of preamble and gap.  perftest (rc_conn) on an IB port
# addresses the peer by LID, so its packets carry no GRH.
#  1. RC SEND 32 KiB at MTU 256, back to back: every byte the NIC sends is
#     counted at its framing's size (RoCEv2: 318 B a packet, ACK 66; IB: 282,
#     ACK 30), and 128 packets of 36 B less each make the IB latency lower;
#  2. through a switch: the switch's egress link carries each packet at its
#     IB size plus the 2 B delimiters (RoCEv2: plus 20);
#  3. UD SEND 1 KiB on an IB port without a GRH: runs, 8+12+8+1024+6 B a packet.
# Args: rnicsim binary, source dir, scratch dir (test/scenario/lib.sh).
set -u
. "$(dirname "$0")/lib.sh"
run() { # NAME SCENARIO LINK_LAYER [--set ...]
    local name=$1 sc=$2 ll=$3
    shift 3
    timeout 120 "$bin" run "$src/validation/scenarios/$sc.yaml" --set vars.iters=30 \
        --set "hardware.nic.link_layer=$ll" "$@" -o "$scratch/$name.json" >"$scratch/$name.out" 2>&1
    local rc=$?
    check "$name: exit 0 (got $rc)" "[ $rc -eq 0 ]"
}
q() { # NAME PYTHON-EXPRESSION over d (the run's JSON) and n (h0's NIC counters)
    $py -c "import json; d = json.load(open('$scratch/$1.json')); n = d['counters']['hosts']['h0']['nic']; print($2)"
}
send32k=(--set vars.test=send --set vars.size=32768 --set vars.mtu=256 --set vars.inline=188)
run eth perftest ethernet "${send32k[@]}"
run ib perftest ib "${send32k[@]}"
for c in "eth 318 66" "ib 282 30"; do
    set -- $c
    check "$1: bytes sent = data packets x $2 + ACKs x $3" \
        "[ $(q "$1" "n['bytes_tx'] == (n['pkts_tx'] - n['acks_tx']) * $2 + n['acks_tx'] * $3") = True ]"
done
pe=$(q eth "int(1000 * d['tables']['send_lat'][0]['t_p50_us'])")
pi=$(q ib "int(1000 * d['tables']['send_lat'][0]['t_p50_us'])")
check "32 KiB SEND at MTU 256: IB p50 $pi ns at least 300 ns below RoCEv2's $pe ns" "[ $pi -lt $((pe - 300)) ]"

run eth_sw perftest_switch ethernet "${send32k[@]}"
run ib_sw perftest_switch ib "${send32k[@]}"
for c in "eth_sw 20" "ib_sw 2"; do
    set -- $c
    check "$1: the switch forwards h0's packets at their size + $2 B" \
        "[ $(q "$1" "d['counters']['links']['sw0->node1']['bytes_sent'] == n['bytes_tx'] + $2 * n['pkts_tx']") = True ]"
done

run ud perftest ib --set vars.test=send --set vars.size=1024 --set vars.mtu=4096 --set vars.conn=ud
check "UD on IB without a GRH: 1058 B a packet" \
    "[ $(q ud "n['pkts_tx'] > 30 and n['bytes_tx'] == 1058 * n['pkts_tx']") = True ]"
finish
