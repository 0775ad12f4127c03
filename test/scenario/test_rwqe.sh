#!/usr/bin/env bash
# Receive-WQE fetch (docs/nic.md "Receive-WQE fetch", sim/nic/ctx.c):
# 64 B SENDs of 16 client threads (scenarios/microbench/qp_count.yaml).
#  1. off (the profiles' default, nic.rwqe_cache_entries 0): nothing counted;
#  2. on with 256 receive queues held: 64 QPs (4 per thread) mostly hit
#     (one fetch per nic.rwqe_prefetch SENDs), 1024 QPs mostly miss.
# Args: rnicsim binary, source dir, scratch dir (test/scenario/lib.sh).
set -u
. "$(dirname "$0")/lib.sh"
sc="$src/scenarios/microbench/qp_count.yaml"
run() { # NAME QPS ENTRIES
    timeout 120 "$bin" run "$sc" --set vars.test=send --set vars.iters=500 --set "vars.qps=$2" \
        --set "hardware.nic.rwqe_cache_entries=$3" -o "$scratch/$1.json" >"$scratch/$1.out" 2>&1
    local rc=$?
    check "$1: exit 0 (got $rc)" "[ $rc -eq 0 ]"
}
get() { # NAME COUNTER: the server's (h1) NIC counter
    $py -c "import json; print(json.load(open('$scratch/$1.json'))['counters']['hosts']['h1']['nic']['$2'])"
}
run off 4 0
run few 4 256
run many 64 256
check "off: no receive-WQE fetch counted" "[ $(get off rwqe_misses) -eq 0 ] && [ $(get off rwqe_hits) -eq 0 ]"
fh=$(get few rwqe_hits); fm=$(get few rwqe_misses)
mh=$(get many rwqe_hits); mm=$(get many rwqe_misses)
check "64 QPs: mostly hits ($fh hits, $fm misses)" "[ $fm -gt 0 ] && [ $fh -gt $((4 * fm)) ]"
check "1024 QPs: mostly misses ($mh hits, $mm misses)" "[ $mm -gt $((4 * mh)) ]"
finish
