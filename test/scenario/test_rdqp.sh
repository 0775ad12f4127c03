#!/usr/bin/env bash
# The ConnectX-3 requester's per-QP READ-response trackers (docs/nic.md
# "READ and atomic engines", sim/nic/ctx.c, nic.rd_qp_entries): Huang's
# 1:M READ with one READ outstanding per QP (scenarios/huang/1m_S.yaml,
# R=1; a 1 ms window after 1 ms of warm-up where the requester collapses,
# 0.3 ms after 0.3 ms where it runs fast), the requester is h0.
#  1. 16 threads x 28 QPs = 448 QPs with a READ outstanding, more than the
#     64 trackers: nearly every response misses its QP's tracker and the
#     one-at-a-time miss handler binds (Huang Fig. 10a: 4.2 Gb/s);
#  2. the same without trackers (nic.rd_qp_entries=0, the per-READ
#     contexts alone, which hold all 448 READs): no collapse, > 4x faster;
#  3. 1 thread x 28 QPs: all 28 trackers stay on chip (cold misses only);
#  4. cx5-100g (contexts per QP, no trackers): nothing counted.
# Args: rnicsim binary, source dir, scratch dir (test/scenario/lib.sh).
set -u
. "$(dirname "$0")/lib.sh"
sc="$src/scenarios/huang/1m_S.yaml"
run() { # NAME S WINDOW [--set ...]
    local name=$1 s=$2 win=$3
    shift 3
    timeout 120 "$bin" run "$sc" --set vars.R=1 --set "vars.S=$s" --set "vars.warmup=$win" \
        --set "vars.duration=$win" "$@" -o "$scratch/$name.json" >"$scratch/$name.out" 2>&1
    local rc=$?
    check "$name: exit 0 (got $rc)" "[ $rc -eq 0 ]"
}
nic() { # NAME COUNTER: the requester's (h0) NIC counter
    $py -c "import json; print(json.load(open('$scratch/$1.json'))['counters']['hosts']['h0']['nic']['$2'])"
}
bw() { # NAME: Gb/s x 1000, an integer
    $py -c "import json; print(int(1000 * json.load(open('$scratch/$1.json'))['tables']['huang'][0]['bw_gbps']))"
}
run many 16 1ms
run none 16 300us --set hardware.nic.rd_qp_entries=0
run few 1 1ms
run cx5 16 300us --set profile=cx5-100g
mh=$(nic many rd_qp_hits)
mm=$(nic many rd_qp_misses)
check "448 QPs: responses miss their QP's tracker ($mh hits, $mm misses)" "[ $mm -gt $((8 * mh)) ]"
bm=$(bw many)
bn=$(bw none)
check "448 QPs: collapse to < 7 Gb/s ($bm Mb/s), Huang Fig. 10a 4.2" "[ $bm -lt 7000 ] && [ $bm -gt 2000 ]"
check "no trackers: > 4x faster ($bn Mb/s against $bm)" "[ $bn -gt $((4 * bm)) ]"
check "no trackers: none counted" "[ $(nic none rd_qp_misses) -eq 0 ] && [ $(nic none rd_qp_hits) -eq 0 ]"
fm=$(nic few rd_qp_misses)
check "28 QPs: the trackers stay on chip ($fm misses, $(nic few rd_qp_hits) hits)" \
    "[ $fm -le 28 ] && [ $(nic few rd_qp_hits) -gt 1000 ]"
check "cx5-100g: contexts per QP, no trackers" "[ $(nic cx5 rd_qp_misses) -eq 0 ] && [ $(nic cx5 rd_qp_hits) -eq 0 ]"
finish
