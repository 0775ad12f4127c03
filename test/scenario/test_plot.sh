#!/usr/bin/env bash
# tools/plot_results.py, the quickstart's plot: a perftest results file
# becomes a PNG; a file without latency/bandwidth tables is refused with
# what a table needs and what the file holds instead.
# Args: rnicsim binary, source dir, scratch dir (test/scenario/lib.sh).
set -u
. "$(dirname "$0")/lib.sh"

"$bin" run "$src/scenarios/examples/small.yaml" -q -o "$scratch/small.json" >/dev/null 2>&1
"$py" "$src/tools/plot_results.py" "$scratch/small.json" -o "$scratch/small.png" >"$scratch/p.out" 2>&1
rc=$?
check "perftest results plot (got $rc)" \
    "[ $rc -eq 0 ] && head -c 8 '$scratch/small.png' | od -An -tx1 | grep -q '89 50 4e 47' && [ \$(stat -c %s '$scratch/small.png') -gt 10000 ]"

"$bin" run "$src/scenarios/microbench/msg_size.yaml" -q -o "$scratch/mb.json" >/dev/null 2>&1
"$py" "$src/tools/plot_results.py" "$scratch/mb.json" -o "$scratch/mb.png" >"$scratch/mb.out" 2>&1
rc=$?
check "no *_lat/*_bw tables: exit 1 (got $rc), no PNG" "[ $rc -eq 1 ] && [ ! -e '$scratch/mb.png' ]"
check "the refusal says what a table needs and lists the tables found" \
    "grep -q 'size_bytes and bw_gbps' '$scratch/mb.out' && grep -q 'microbench (clients, qps' '$scratch/mb.out'"
finish
