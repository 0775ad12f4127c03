#!/usr/bin/env bash
# The headline checks of the Huang & Ghandeharizadeh reproduction
# (docs/huang.md, spec section 3.8) that the model meets and that are cheap
# to run, through tools/plot_huang.py --checks --quick: the 28-node M:1
# configuration at S = 1 (28 QPs at the responder, R = 128, V = 365 B, a
# 1 ms window after 1 ms of warm-up) with the five protocols: READ is the
# best (check 1a) and the response verb changes little (1c); and check 9
# (marker framing vs DMA order) with rnicsim check-order.  The S = 16 runs
# take minutes each (docs/huang.md has them).  Every number is simulated
# time, so the verdicts are deterministic.
# Args: rnicsim binary, source dir, scratch dir (test/scenario/lib.sh).
set -u
. "$(dirname "$0")/lib.sh"

if ldd "$bin" 2>/dev/null | grep -q libasan; then
    # under ASan (about 10x slower) only the check-order runs below: the same
    # program and NIC code paths, a tenth of the simulated time
    echo "ASan build: the bandwidth checks run in the plain build only"
else
    timeout 900 $py "$src/tools/plot_huang.py" --checks --quick --rnicsim "$bin" -j 2 \
        --only m1_S --expect 1a-S1,1c-S1 -o "$scratch/out" >"$scratch/checks.md" 2>"$scratch/checks.err"
    rc=$?
    cat "$scratch/checks.md"
    check "plot_huang.py --checks exits 0 (got $rc)" "[ $rc -eq 0 ] || { tail -5 '$scratch/checks.err'; false; }"
    for n in 1a-S1 1c-S1; do
        check "check $n holds" "grep -q '^| $n | .* | yes |\$' '$scratch/checks.md'"
    done
    check "results.json has the sweep's wall time and command" "$py - '$scratch/out/results.json' <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert set(d['wall_seconds']) == {'m1_S'}, d['wall_seconds']
assert all(c.startswith('rnicsim sweep scenarios/huang/') for c in d['commands'].values()), d['commands']
assert d['quick'] is True
PY"
fi
# check 9: the marker framing is clean under strict DMA order and torn under
# relaxed order for a WRITE-framed protocol, never for SEND/SEND (the CQE
# comes after the data)
$bin check-order "$src/scenarios/huang/order.yaml" --runs 2 >"$scratch/co_strict.txt" 2>&1
check "check-order: write_write clean under strict DMA order" "[ $? -eq 0 ] && grep -q '^check-order: clean' '$scratch/co_strict.txt'"
$bin check-order "$src/scenarios/huang/order.yaml" --set hardware.nic.dma_ordering=relaxed --runs 3 >"$scratch/co_relaxed.txt" 2>&1
check "check-order: write_write torn under relaxed DMA order" "[ $? -eq 1 ] && grep -q '^check-order: VIOLATION' '$scratch/co_relaxed.txt'"
$bin check-order "$src/scenarios/huang/order.yaml" --set vars.proto=send_send --set hardware.nic.dma_ordering=relaxed --runs 2 >"$scratch/co_send.txt" 2>&1
check "check-order: send_send clean under relaxed DMA order" "[ $? -eq 0 ] && grep -q 'DMA writes out of order' '$scratch/co_send.txt'"
finish
