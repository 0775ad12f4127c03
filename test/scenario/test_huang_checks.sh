#!/usr/bin/env bash
# The headline checks of the Huang & Ghandeharizadeh reproduction
# (docs/huang.md, spec section 3.8) that the model meets and that are cheap
# to run, through tools/plot_huang.py --checks --quick: the 28-node M:1
# configuration at S = 1 (28 QPs at the responder, R = 128, V = 365 B, a
# 1 ms window after 1 ms of warm-up) with the five protocols: READ is the
# best (check 1a) and the response verb changes little (1c); check 7 on
# two V points; check 6b; check 8a for SEND/SEND; a lossless star; no RNR NAK in M:M SEND/SEND;
# the BlueFlame lock option; and check 9
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
    check "checks.json has the sweep's wall time and command" "$py - '$scratch/out/checks.json' <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert set(d['wall_seconds']) == {'m1_S'}, d['wall_seconds']
assert all(c.startswith('rnicsim sweep scenarios/huang/') for c in d['commands'].values()), d['commands']
assert d['quick'] is True
PY"
    # check 7 (value size), its two Fig. 6 points: at 28 nodes, Q = 28,
    # S = 16, R = 4, 1:M bandwidth rises from V = 365 B to 4 KB for a READ, a
    # SEND-framed and a WRITE-framed protocol (the cheapest abstraction:
    # R = 4 keeps the round short).  The paper's claim is that bandwidth
    # increases; on InfiniBand framing (30 B less per packet than RoCEv2)
    # 1:M WRITE/WRITE at 365 B already runs at 44 of the link's 54.5 Gb/s,
    # so 4 KB can only add ~6 % (46.9): the bound is "rises", not "+10 %"
    # (with RoCE framing it was 36.8 -> 47.9)
    $bin sweep "$src/scenarios/huang/1m_V.yaml" --set vars.proto=read,send_send,write_write \
        --set vars.V=365,4096 --set vars.R=4 -j 2 -o "$scratch/v" >/dev/null 2>&1
    check "1:M V sweep runs" "[ $? -eq 0 ]"
    check "check 7: 1:M bandwidth rises with V (365 B -> 4 KB), every protocol run" "$py - '$scratch/v/sweep.csv' <<'PY'
import csv, sys
bw = {(r['vars.proto'], int(r['vars.V'])): float(r['huang.bw_gbps']) for r in csv.DictReader(open(sys.argv[1]))}
print(bw)
for p in ('read', 'send_send', 'write_write'):
    assert bw[(p, 4096)] > 1.02 * bw[(p, 365)], p
PY"
    # check 6b: 1:M READ collapses with the number of responding nodes (Q = 1:
    # 16 QPs, Q = 28: 448 QPs, S = 16, R = 128), the Q = 28 point warmed up
    # past its 77 ms round 1 (READ runs are cheap: few events a READ)
    timeout 600 $py "$src/tools/plot_huang.py" --checks --rnicsim "$bin" -j 2 \
        --only "1m_S~read,1m_nodes" --expect 6b -o "$scratch/out6" >"$scratch/checks6.md" 2>"$scratch/checks6.err"
    rc=$?
    cat "$scratch/checks6.md"
    check "check 6b holds: 1:M READ Q=1 >= 4x Q=28 (exit $rc)" "[ $rc -eq 0 ] && grep -q '^| 6b | .* | yes |\$' '$scratch/checks6.md'"
    check "no check-6b point warns that its window opens inside round 1" "! grep -q 'before the first round' '$scratch/checks6.err'"
    # check 8a at the scenarios' own windows (docs/huang.md "Check 8a: a
    # start-up transient"): 1:M S = 16 SEND/SEND at R = 128 is not below
    # R = 16.  The first write into each never-touched receive line is a
    # partial-line merge at memory latency; the backlog it leaves at the
    # requester's port drains some ms after round 1, so a window opening at
    # 12 ms read 24 Gb/s at R = 128 against 38 at R = 16 (the old default);
    # from 17 ms on it reads 37-41
    # (a 6 ms window: with the NICs' finite receive buffers and the star's
    # link credits the two points sit near the 5 % bound, 0.945 over 1 ms
    # and 0.953 over 6 ms: docs/huang_mechanisms.md section 9)
    $bin sweep "$src/scenarios/huang/1m_R.yaml" --set vars.proto=send_send --set vars.R=16,128 \
        --set vars.duration=6ms -j 2 -o "$scratch/r8a" >/dev/null 2>&1
    check "1:M R sweep (SEND/SEND, R=16,128) runs" "[ $? -eq 0 ]"
    check "check 8a: 1:M SEND/SEND at R=128 >= 0.95x R=16 at the scenario's warm-up" "$py - '$scratch/r8a/sweep.csv' <<'PY'
import csv, sys
bw = {int(r['vars.R']): float(r['huang.bw_gbps']) for r in csv.DictReader(open(sys.argv[1]))}
print(bw)
assert bw[128] >= 0.95 * bw[16], bw
PY"
    # a lossless star (docs/huang.md "A lossless star"): an incast of 8
    # responding nodes x 16 threads x R = 128 WRITE responses into the 1:M
    # requester (16 k responses, 7 MB, against the switch's 4 MiB) drops
    # nothing with the scenarios' PFC; on a drop-tail star the same run
    # drops 21,688 frames and falls to 3.5 Gb/s (QPs whose last responses
    # were lost wait for the 67 ms RC timeout)
    $bin run "$src/scenarios/huang/1m_S.yaml" --set vars.proto=write_write --set vars.S=16 \
        --set vars.Q=8 --set vars.R=128 --set vars.warmup=2ms --set vars.duration=200us \
        -o "$scratch/lossless.json" >/dev/null 2>&1
    check "1:M incast (Q=8, S=16) runs" "[ $? -eq 0 ]"
    check "the Huang star is lossless: no frame dropped, no NAK, round 1 inside the warm-up" "$py - '$scratch/lossless.json' <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
drops = sum(c.get('pkts_dropped', 0) for c in d['counters']['links'].values())
t = d['tables']['huang'][0]
print('dropped', drops, 'bw', t['bw_gbps'], 'round 1 (us)', t['round1_us'])
assert drops == 0, drops
assert sum(h['nic'].get('naks_tx', 0) for h in d['counters']['hosts'].values()) == 0
assert t['bw_gbps'] >= 30, t['bw_gbps']
assert 0 < t['round1_us'] < 2000, t['round1_us']
PY"
    # a receive is posted again before the message that used it is
    # answered, also when a poll made inside sq_room (a full send queue)
    # finds that message on the QP being posted to: M:M SEND/SEND on 16
    # nodes, S = 2, drew an RNR NAK and two dropped requests before
    # (protocols/huang/thread.c, docs/huang.md "Receives before answers")
    $bin run "$src/scenarios/huang/mm_S.yaml" --set vars.proto=send_send --set vars.N=16 \
        --set vars.S=2 --set vars.warmup=2ms --set vars.duration=500us \
        -o "$scratch/mm_rnr.json" >/dev/null 2>&1
    check "M:M SEND/SEND: no receiver-not-ready NAK, no dropped request" "[ $? -eq 0 ] && $py - '$scratch/mm_rnr.json' <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
n = [(h, c['nic']['naks_tx'], c['nic']['rx_drops']) for h, c in d['counters']['hosts'].items()
     if c['nic']['naks_tx'] or c['nic']['rx_drops']]
assert not n, n
assert d['tables']['huang'][0]['bw_gbps'] > 10, d['tables']['huang']
PY"
    # libmlx4's BlueFlame lock (host.cpu.bf_lock_context, docs/huang.md; every
    # QP locked as in rdma-core: bf_dedicated=0): the
    # inline requests of one process's 4 requesting threads (1:M, 4
    # responding nodes, R = 16) share one lock held for the doorbell drain
    # (379 ns) plus the lock line's move between cores (60 ns): at most
    # 1 / 439 ns = 2.28 M requests/s; without it each thread drains alone
    for l in false true; do
        $bin run "$src/scenarios/huang/1m_S.yaml" --set vars.proto=write_write --set vars.S=4 \
            --set vars.Q=4 --set vars.R=16 --set vars.warmup=500us --set vars.duration=1ms \
            --set hardware.host.cpu.bf_lock_context=$l --set hardware.host.cpu.bf_dedicated=0 \
            -o "$scratch/bf_$l.json" >/dev/null 2>&1
        check "1:M S=4 with bf_lock_context=$l runs" "[ $? -eq 0 ]"
    done
    check "the BlueFlame lock caps the node at 1 / (drain + c2c); without it 2x more" "$py - '$scratch/bf_false.json' '$scratch/bf_true.json' <<'PY'
import json, sys
off, on = (json.load(open(f))['tables']['huang'][0]['mops'] for f in sys.argv[1:3])
print('mops without lock', off, 'with', on)
# responses are counted by their post (docs/huang.md): a 1 ms window holds at
# most ceil(1 ms / 439 ns) = 2,278 posts of the lock's cadence, 0.001 Mops
# above 1 / 439 ns
assert 1.9 <= on <= 1e3 / 439 + 0.001, on
assert off >= 2 * on, (off, on)
PY"
    # the figure runner (tools/plot_huang.py, docs/huang.md "One command per
    # figure"): a figure's "~tag" sweep (R = 256, its own warm-up) adds its
    # points to the figure, --x runs part of a figure and keeps the rest, and
    # each figure records the commit it ran on.  M:M READ on 2 nodes, short
    # windows: a few seconds.
    fo="$scratch/fig"
    rm -rf "$fo" "$fo.err" # a previous run's PNG, results.json and report must not pass for this one's
    for x in 1,256 2; do
        $py "$src/tools/plot_huang.py" --only fig12a --x $x --protos read --set N=2 \
            --set warmup=100us --set duration=50us --rnicsim "$bin" -j 2 -o "$fo" >/dev/null 2>>"$fo.err"
        check "plot_huang.py --only fig12a --x $x runs" "[ $? -eq 0 ] && [ -s '$fo/fig12a.png' ]"
    done
    check "fig12a holds R = 1, 2 and the R = 256 sweep's point, with the commit it ran on" "$py - '$fo/results.json' <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
pts = d['points']['fig12a']
assert set(pts) == {'read/1', 'read/2', 'read/256'}, pts
assert all(v > 0 for v in pts.values()), pts
assert set(d['run_on']) == {'fig12a~read~x1,256', 'fig12a~256~read~x1,256', 'fig12a~read~x2'}, d['run_on']
assert all(r['commit'] and 'load_start' in r for r in d['run_on'].values()), d['run_on']
PY"
    # each point's rounds of its slowest requesting node in the window: R = 1
    # and 2 turn over dozens of times in 50 us, R = 256 (256 requests
    # outstanding, 0.5 rounds) not, and only it is reported
    check "fig12a records each point's window rounds and reports R = 256's few" "$py - '$fo/results.json' '$fo.err' <<'PY'
import json, sys
w = json.load(open(sys.argv[1]))['window_rounds']['fig12a']
assert set(w) == {'read/1', 'read/2', 'read/256'}, w
assert w['read/1'] >= 3 and w['read/2'] >= 3 and w['read/256'] < 3, w
err = open(sys.argv[2]).read()
low = [l for l in err.splitlines() if 'rounds in the window' in l]
assert len(low) == 1 and '256)' in low[0], low
PY"
    # --checks takes a check sweep a figure already ran (the same command but
    # -j, the same model) from results.json instead of running it again:
    # Fig. 12b's S = 1 run is check sweep mm_S
    $py "$src/tools/plot_huang.py" --only fig12b --x 1 --protos read --set N=2 \
        --set warmup=100us --set duration=50us --rnicsim "$bin" -j 2 -o "$fo" >/dev/null 2>"$fo.err2"
    $py "$src/tools/plot_huang.py" --checks --only mm_S --protos read --set N=2 \
        --set warmup=100us --set duration=50us --rnicsim "$bin" -j 1 -o "$fo" >/dev/null 2>"$fo.err3"
    # (a work tree with local changes to what runs, "+dirty", or outside git,
    # "unknown", never lends)
    if grep -q "+dirty\|on unknown" "$fo.err2"; then
        check "--checks does not reuse a run of a changed tree" "! grep -q 'from results.json' '$fo.err3'"
    else
        check "--checks reuses Fig. 12b's identical run" "grep -q \"mm_S: 1 points from results.json's fig12b\" '$fo.err3' && $py - '$fo' <<'PY'
import json, sys
f = json.load(open(sys.argv[1] + '/results.json'))
c = json.load(open(sys.argv[1] + '/checks.json'))
assert c['points']['mm_S'] == {'read/1': f['points']['fig12b']['read/1']}, (c['points'], f['points'])
assert c['run_on']['mm_S']['reused_from'].startswith('fig12b'), c['run_on']
PY"
        # another binary (here: the same one with a byte appended, which
        # still runs) never borrows the figure's points, whatever the source
        cp "$bin" "$scratch/rnicsim-other" && printf x >>"$scratch/rnicsim-other"
        $py "$src/tools/plot_huang.py" --checks --only mm_S --protos read --set N=2 \
            --set warmup=100us --set duration=50us --rnicsim "$scratch/rnicsim-other" -j 1 \
            -o "$fo" >/dev/null 2>"$fo.err3b"
        check "--checks does not reuse a run made by another binary" \
            "grep -q 'mm_S: 1 points, ' '$fo.err3b' && ! grep -q 'from results.json' '$fo.err3b'"
        # the same point run again with another window, by a run of another
        # tag (--x 1,2), replaces the point the matching command (tag
        # fig12b~read~x1, still recorded) produced: --checks must run it
        $py "$src/tools/plot_huang.py" --only fig12b --x 1,2 --protos read --set N=2 \
            --set warmup=100us --set duration=60us --rnicsim "$bin" -j 2 -o "$fo" >/dev/null 2>"$fo.err4"
        $py "$src/tools/plot_huang.py" --checks --only mm_S --protos read --set N=2 \
            --set warmup=100us --set duration=50us --rnicsim "$bin" -j 1 -o "$fo" >/dev/null 2>"$fo.err5"
        check "--checks does not lend a point a later run with other settings replaced" \
            "[ -s '$fo.err4' ] && ! grep -q 'from results.json' '$fo.err5' && $py - '$fo' <<'PY'
import json, sys
f = json.load(open(sys.argv[1] + '/results.json'))
c = json.load(open(sys.argv[1] + '/checks.json'))
assert f['point_run']['fig12b']['read/1'] == 'fig12b~read~x1,2', f['point_run']
assert 'duration=50us' in f['commands']['fig12b~read~x1'], f['commands']
assert 'reused_from' not in c['run_on']['mm_S'], c['run_on']
PY"
    fi
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
