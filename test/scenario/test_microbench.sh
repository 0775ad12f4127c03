#!/usr/bin/env bash
# The microbench program (protocols/microbench, docs/microbench.md):
#  1. write, read, send, faa (and cas) with 1 and 64 QPs per client and 2
#     clients on a star: exit 0, one aggregate row in "microbench" with
#     ops = iters x clients and plausible numbers, one "microbench_client"
#     row per client, and the server's verification line;
#  2. the walk of a large working set and doorbell batching: a post list
#     of 16 is faster than 1 (fewer doorbells and CQEs per WR);
#  3. bad input: an unknown --test, --post-list above --outstanding and
#     server/client option mismatch give a clear message and program exit
#     status 2 (the run: program-failed, 1), never a deadlock;
#  4. --target=dm: either it runs (device memory in the model) or it fails
#     cleanly with the errno of ibv_alloc_dm / ibv_reg_dm_mr (exit 1);
#  5. the scenarios in scenarios/microbench/ parse once `vars` exist
#     (skipped when the scenario schema has no `vars` yet);
#  6. real_microbench builds against the system libibverbs without warnings
#     and says "no RDMA device found" here;
#  7. --rounds=1 waits for a round's completions before the next round
#     (fewer READs outstanding: fewer outstanding-WQE cache misses);
#  8. a post list signals only its last WR (one CQE per list).
# Args: rnicsim binary, source dir, scratch dir (test/scenario/lib.sh).
set -u
. "$(dirname "$0")/lib.sh"

# scenario FILE TEST QPS CLIENTS "EXTRA ARGS (comma separated, quoted)" [SERVER_EXTRA]
scenario() {
    local f=$1 test=$2 qps=$3 k=$4 extra=$5 sextra=${6:-$5}
    {
        echo "name: mb-$test-$qps"
        echo "seed: 1"
        echo "stop_time: 5s"
        echo "profile: cx5-100g"
        echo "topology: {kind: star, hosts: $((k + 1)), link: {rate: 100Gbps, delay: 10ns}}"
        echo "programs:"
        echo "  - {host: h0, program: microbench, args: [--server, --test=$test, --qps=$qps, --clients=$k$sextra]}"
        for ((i = 0; i < k; i++)); do
            echo "  - {host: h$((i + 1)), program: microbench, args: [--client, --id=$i, --test=$test, --qps=$qps, --clients=$k$extra]}"
        done
    } >"$f"
}

# ---- 1. every test, 1 and 64 QPs, 2 clients
iters=300
for test in write read send faa cas; do
    for qps in 1 64; do
        [ "$test" = cas ] && [ "$qps" = 64 ] && continue
        n="$scratch/$test-$qps"
        scenario "$n.yaml" $test $qps 2 ", --iters=$iters, --warmup=64, --outstanding=32, --working-set=64KiB"
        timeout 300 "$bin" run "$n.yaml" -o "$n.json" >"$n.out" 2>"$n.err"
        rc=$?
        check "$test qps=$qps: exit 0 (got $rc)" "[ $rc -eq 0 ]"
        check "$test qps=$qps: one aggregate row, ops = $iters x 2, plausible numbers" "$py - '$n.json' $test $qps $iters <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
test, qps, iters = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
rows = d['tables']['microbench']
assert len(rows) == 1, rows
r = rows[0]
size = 8 if test in ('faa', 'cas') else 64
assert r['ops'] == iters * 2 and r['clients'] == 2 and r['qps'] == qps, r
assert r['size_bytes'] == size and r['post_list'] == 1 and r['outstanding'] == 32, r
assert r['target_dm'] == 0 and r['working_set_bytes'] == 65536, r
assert 0.01 < r['mops'] < 1000 and r['gbps'] > 0 and 0.1 < r['avg_lat_us'] < 10000, r
assert abs(r['gbps'] - r['mops'] * size * 8 / 1000) < 1e-6 * r['gbps'], r
assert abs(r['mops'] - r['ops'] / r['span_us']) < 1e-6 * r['mops'], r
cl = sorted(d['tables']['microbench_client'], key=lambda x: x['id'])
assert [c['id'] for c in cl] == [0, 1] and all(c['ops'] == iters for c in cl), cl
# the aggregate window covers both clients: at most the sum of their rates
assert r['mops'] <= sum(c['mops'] for c in cl) * 1.0001, (r, cl)
PY"
    done
done
check "write: the server verified sampled regions of both clients" \
    "grep -q 'written regions verified' '$scratch/write-64.out'"
check "send: every receive counted, a sample verified" \
    "grep -q 'microbench server: $(((iters + 64) * 2)) receives' '$scratch/send-64.out'"
check "faa: the counter equals 2 x (warmup + iters)" \
    "grep -q 'faa counter $(((iters + 64) * 2)) verified' '$scratch/faa-64.out'"
check "cas: the counter equals the clients' successes" "$py - '$scratch/cas-1.json' '$scratch/cas-1.out' <<'PY'
import json, re, sys
d = json.load(open(sys.argv[1]))
n = sum(c['cas_successes'] for c in d['tables']['microbench_client'])
m = re.search(r'cas counter (\d+) verified', open(sys.argv[2]).read())
assert m and int(m.group(1)) == n and 0 < n < 2 * 364, (m and m.group(0), n)
PY"

# ---- 2. large random working set, and doorbell batching
n="$scratch/ws"
scenario "$n.yaml" read 4 1 ", --iters=2000, --working-set=16MiB, --access=random, --outstanding=64"
timeout 300 "$bin" run "$n.yaml" -o "$n.json" >"$n.out" 2>"$n.err"
check "read over a 16 MiB random working set: exit 0" "[ $? -eq 0 ]"
for p in 1 16; do
    n="$scratch/pl$p"
    scenario "$n.yaml" write 1 1 ", --iters=4000, --outstanding=64, --post-list=$p, --signal-every=$p"
    timeout 300 "$bin" run "$n.yaml" -o "$n.json" >"$n.out" 2>"$n.err"
    check "post list $p: exit 0" "[ $? -eq 0 ]"
done
check "post list 16 has a higher message rate than 1" "$py - '$scratch/pl1.json' '$scratch/pl16.json' <<'PY'
import json, sys
a, b = (json.load(open(f))['tables']['microbench'][0] for f in sys.argv[1:])
assert b['post_list'] == 16 and b['mops'] > 1.5 * a['mops'], (a['mops'], b['mops'])
PY"

# ---- 3. bad input: clear message, program exit 2, run exit 1 (not a deadlock)
bad_case() { # NAME EXPECTED-STDERR CLIENT-EXTRA [SERVER-EXTRA]
    local n="$scratch/bad-$1"
    scenario "$n.yaml" write 1 1 "$3" "${4:-$3}"
    timeout 300 "$bin" run "$n.yaml" -o "$n.json" >"$n.out" 2>"$n.err"
    local rc=$?
    check "bad $1: run exit 1 (got $rc)" "[ $rc -eq 1 ]"
    check "bad $1: message '$2'" "grep -qF -- \"$2\" '$n.err'"
    check "bad $1: a program exited with status 2" "$py - '$n.json' <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d['result'] == 'program-failed', d['result']
assert 2 in [p['exit_code'] for p in d['programs']], d['programs']
PY"
}
bad_case test "bad value for --test: 'bogus' (write|read|send|faa|cas)" ", --test=bogus"
bad_case post-list "--post-list=8 exceeds --outstanding=4" ", --post-list=8, --outstanding=4"
bad_case mismatch "were given different options" ", --iters=100" ", --iters=200"
bad_case id "--id=5 is not below --clients=1" ", --id=5"

# ---- 4. device memory: runs, or fails cleanly with the errno
n="$scratch/dm"
scenario "$n.yaml" faa 2 2 ", --target=dm, --iters=200"
timeout 300 "$bin" run "$n.yaml" -o "$n.json" >"$n.out" 2>"$n.err"
rc=$?
if [ $rc -eq 0 ]; then
    check "dm: target_dm=1 and the counter verified" \
        "grep -q 'faa counter 432 verified' '$n.out' && $py -c \"import json; r=json.load(open('$n.json'))['tables']['microbench'][0]; assert r['target_dm'] == 1, r\""
else
    check "dm: not supported here: exit 1 (got $rc), not a deadlock" "[ $rc -eq 1 ]"
    check "dm: the failing verb and its errno are named" \
        "grep -Eq 'ibv_(alloc_dm|reg_dm_mr|memcpy_to_dm)\\(.*\\(errno [0-9]+\\)|ibv_memcpy_to_dm: ' '$n.err'"
    check "dm: the clients stop on the server's failure" \
        "[ \$(grep -c 'the server failed to set up' '$n.err') -eq 2 ]"
fi

# ---- 5. the committed scenarios (they use `vars`, see docs/microbench.md)
for f in "$src"/scenarios/microbench/*.yaml; do
    b=$(basename "$f" .yaml)
    if "$bin" run "$f" -o "$scratch/sc-$b.json" >"$scratch/sc-$b.out" 2>"$scratch/sc-$b.err"; then
        ok "scenario $b runs"
    elif grep -q "unknown key 'vars'" "$scratch/sc-$b.err"; then
        echo "SKIP scenario $b: this tree has no scenario vars yet"
    else
        bad "scenario $b runs"
    fi
done

# ---- 7. --rounds: every WR of a round completes before the next round.  32
# clients x 16 ConnectX-6 QPs, 32 64 B READs per QP in a burst (the
# qp-cx6-read-512 set-up, shorter): without rounds the QPs' bursts overlap
# and keep ~8k READs outstanding, which thrash the 1536-entry outstanding-WQE
# cache; in rounds a thread's QPs finish one after another and most READs
# find their WQE (measured: 0.31 misses a READ and 83 Mops in rounds, 0.76
# and 50 Mops without).  Also: --rounds takes only 0 or 1.
q="$src/validation/scenarios/qp_scaling.yaml"
for r in 0 1; do
    timeout 300 "$bin" run "$q" --quiet --set vars.test=read --set vars.qpc=16 --set vars.out=512 \
        --set vars.burst=32 --set vars.rounds=$r --set vars.warmup=512 --set vars.iters=1024 \
        --set hardware.host.cpu.doorbell_gap=260ns --set hardware.host.cores=36 \
        -o "$scratch/rounds$r.json" >"$scratch/rounds$r.out" 2>&1
    rc=$?
    check "rounds=$r: exit 0 (got $rc)" "[ $rc -eq 0 ]"
done
check "rounds=1 keeps a round's READs: < half the WQE-cache misses, > 1.3x the rate of rounds=0" \
    "$py - '$scratch/rounds0.json' '$scratch/rounds1.json' <<'PY'
import json, sys
def get(f):
    d = json.load(open(f))
    m = d['tables']['microbench'][0]
    return m['mops'], d['counters']['hosts']['h0']['nic']['wqe_cache_misses'] / m['ops']
(r0, m0), (r1, m1) = get(sys.argv[1]), get(sys.argv[2])
print('rounds=0: %.1f Mops, %.3f misses/READ; rounds=1: %.1f Mops, %.3f' % (r0, m0, r1, m1))
assert m1 < 0.5 * m0 and r1 > 1.3 * r0
PY"
n="$scratch/rounds-bad"
scenario "$n.yaml" read 1 1 ", --rounds=2"
timeout 300 "$bin" run "$n.yaml" -o "$n.json" >"$n.out" 2>"$n.err"
rc=$?
check "--rounds=2: rejected (run exit 1, got $rc) with the option named" \
    "[ $rc -eq 1 ] && grep -q 'rounds' '$n.err'"

# ---- 8. a post list signals only its last WR (with --signal-every = the
# list): with the window full, every WR of a list used to be signalled
# (2064 WRs in lists of 8 wrote 1942 CQEs; now 258)
n="$scratch/pl-signal"
scenario "$n.yaml" write 1 1 ", --iters=2000, --warmup=64, --outstanding=64, --post-list=8, --signal-every=8"
timeout 300 "$bin" run "$n.yaml" -o "$n.json" >"$n.out" 2>"$n.err"
rc=$?
check "post list 8: exit 0 (got $rc), about one CQE per list (ops / 8), not one per WR" \
    "[ $rc -eq 0 ] && $py - '$n.json' <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
cqes = d['counters']['hosts']['h1']['nic']['cqes_written']
print('CQEs written by the client NIC for 2064 WRs:', cqes)
assert 2064 / 8 <= cqes <= 2064 / 8 + 16, cqes
PY"

# ---- 6. the real-hardware build
build="$scratch/build-real"
log="$scratch/real.log"
if cmake -S "$src" -B "$build" -DRNICSIM_REAL_VERBS=ON -DRNICSIM_WERROR=ON >"$log" 2>&1 &&
    cmake --build "$build" --target real_microbench -j2 >>"$log" 2>&1; then
    ok "configure and build real_microbench"
    check "real_microbench: zero warnings" "! grep -qi 'warning:' '$log'"
    out=$(RNICSIM_OOB_PORT=0 timeout 20 "$build/real_microbench" --server 2>&1)
    rc=$?
    check "real_microbench --server: 'no RDMA device found', exit 1 (got $rc)" \
        "[ $rc -eq 1 ] && grep -q 'no RDMA device found' <<<\"\$out\""
    timeout 20 "$build/real_microbench" --client --test=bogus 127.0.0.1 >/dev/null 2>&1
    rc=$?
    check "real_microbench bad --test: exit 2 (got $rc)" "[ $rc -eq 2 ]"
else
    bad "configure and build real_microbench"
    tail -30 "$log"
fi
finish
