#!/usr/bin/env bash
# rnicsim check-order and the litmus protocols (docs/ordering.md):
#  1. IB RC in order (star): last-byte, flag, imm, send are clean; the
#     counts (runs x messages) are the scenario's, nothing was reordered;
#  2. the deliberately broken protocols fail for real: flag-first (bell
#     before data) and header-flag (polls the header of a multi-packet
#     message) -- exit 1, the seed, the reproduce command, the violation
#     line, and a trace that ends where the receiver looked, showing the
#     bell landed before the data / the first packet before the rest;
#  3. determinism: the same command gives byte-identical output and JSON,
#     and the printed reproduce command replays a violation found in a later
#     run of a --vary matrix with the same trace;
#  4. receivers that need nothing accept reordered messages (--swap-pairs);
#  5. bad input (exit 2) and runs without a verdict (exit 3);
#  6. with per-packet spraying on a leaf-spine fabric (when the scenario
#     schema has it): RC still passes, and the checker counts real
#     reorderings, none with ECMP;
#  7. the litmus source builds against the system libibverbs (real hardware).
# Args: rnicsim binary, source dir, scratch dir (test/scenario/lib.sh).
set -u
. "$(dirname "$0")/lib.sh"
L="$src/scenarios/litmus"
jget() { $py -c 'import json,sys
d=json.load(open(sys.argv[1]))
for k in sys.argv[2].split("."):
    d=d[int(k)] if isinstance(d,list) else d[k]
print(d)' "$1" "$2" 2>/dev/null; }

# ---- 1. the correct protocols on IB RC: clean, every message counted
for p in last_byte flag imm send; do
    timeout 300 "$bin" check-order "$L/$p.yaml" --runs 3 -o "$scratch/$p.json" \
        >"$scratch/$p.out" 2>"$scratch/$p.err"
    rc=$?
    check "RC $p: clean, exit 0 (got $rc)" "[ $rc -eq 0 ]"
    # 3 runs x the litmus default of 1000 messages; in order: 0 reorderings
    check "RC $p: JSON clean, 3 runs, 3000 messages, 0 reordered, 0 dropped" "$py - '$scratch/$p.json' <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d['command'] == 'check-order' and d['verdict'] == 'clean', d['verdict']
assert d['runs'] == 3 and d['first_seed'] == 1, (d['runs'], d['first_seed'])
assert d['messages_checked'] == 3000, d['messages_checked']
r = d['reorderings']
assert r['pkts_out_of_order'] == 0 and r['dma_out_of_order'] == 0 and r['pkts_dropped'] == 0, r
assert 'violation' not in d
PY"
    check "RC $p: summary line" \
        "grep -q '^check-order: clean: 3 runs (seeds 1..3), 3000 messages checked, no violation' '$scratch/$p.out'"
done

# ---- 2. the broken protocols: a real violation, found in run 1
ff="$scratch/ff"
timeout 120 "$bin" check-order "$L/flag_first.yaml" --runs 5 -o "$ff.json" >"$ff.out" 2>"$ff.err"
rc=$?
check "flag-first: violation, exit 1 (got $rc)" "[ $rc -eq 1 ]"
check "flag-first: run and seed named" "grep -q '^check-order: VIOLATION in run 1 of 5 (seed 1)' '$ff.out'"
# (message 1, 64 B, is the first to pass: its bell and data leave the NIC's
# translation unit together after the cold misses and land 5 ns apart; the
# 4 KiB message 2 lands a PCIe serialisation time after its bell)
check "flag-first: the receiver's verdict line (message 2 seen without its data)" \
    "grep -q '^  violation: litmus server: VIOLATION: flag-first message 2 (slot 1, 4096 bytes): bad sequence number: sequence number is 0, expected 2' '$ff.out'"
check "flag-first: the exact reproduce command" \
    "grep -qF 'reproduce: $bin check-order $L/flag_first.yaml --runs 1 --seed 1' '$ff.out'"
check "flag-first: a trace section" "grep -q '^  trace: the last [0-9]* of [0-9]* events up to the violation' '$ff.out'"
# The story in the trace: the 8-byte bell was placed, the 64-byte message
# was not (its WRITE was posted after the bell's, so it lands after).
# (the 4 KiB data is still being fetched from the sender's memory - the
# host returns a read at pcie.read_fetch_rate - when the inline bell lands)
check "flag-first: JSON trace ends at the violation: bell (8 B) placed, data (4 KiB) not yet" "$py - '$ff.json' <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d['verdict'] == 'violation', d['verdict']
v = d['violation']
assert v['seed'] == 1 and v['run'] == 1 and v['program'] == 'h1/litmus#0', v
rep = v['report']
assert rep['message'] == 2 and rep['check'] == 1 and rep['seq_got'] == 0 and rep['len_got'] == 0, rep
assert rep['bytes_as_sent'] < 4096, rep
t = v['trace']
assert t, 'empty trace'
cut = (rep['t_ns'] + 1) * 1000
assert all(r['t_ps'] < cut for r in t), 'trace goes past the violation'
writes = [r for r in t if r['kind'] == 'dma-write' and r['node'] == 1]
assert any(r['len'] == 8 for r in writes), 'no bell write in the trace'
assert not any(r['len'] == 4096 for r in writes), 'the data had landed'
assert any(r['kind'] == 'post' and r['node'] == 0 and r['len'] == 4096 for r in t), 'data WRITE not posted'
assert v['reproduce'].endswith('check-order ' + d['file'] + ' --runs 1 --seed 1'), v['reproduce']
PY"

hf="$scratch/hf"
timeout 120 "$bin" check-order "$L/header_flag.yaml" --runs 2 -o "$hf.json" >"$hf.out" 2>"$hf.err"
rc=$?
check "header-flag: violation, exit 1 (got $rc)" "[ $rc -eq 1 ]"
# sizes 64,4096,16384 in turn and a 4096-byte MTU (cx5-100g): message 3 is
# the first multi-packet one; its header sits in the first packet, so the
# first byte not yet placed is byte 4096.
check "header-flag: message 3, checksum, first bad byte 4096 (the second packet)" "$py - '$hf.json' <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
rep = d['violation']['report']
assert rep['message'] == 3 and rep['size_bytes'] == 16384, rep
assert rep['check'] == 3 and rep['first_bad_byte'] == 4096, rep
assert 4096 <= rep['bytes_as_sent'] < 16384, rep
w = [r for r in d['violation']['trace'] if r['kind'] == 'dma-write' and r['node'] == 1]
assert w and w[-1]['len'] == 4096, w[-1:]
PY"

# plain `rnicsim run` of a broken protocol: both sides stop cleanly (the
# receiver tells the sender), no deadlock
timeout 60 "$bin" run "$L/flag_first.yaml" -q >"$scratch/run_ff.out" 2>"$scratch/run_ff.err"
rc=$?
check "run flag-first: exit 1 (got $rc), VIOLATION line, no deadlock" \
    "[ $rc -eq 1 ] && grep -q 'litmus server: VIOLATION' '$scratch/run_ff.err' && ! grep -q deadlock '$scratch/run_ff.err'"

# ---- 3. determinism
timeout 120 "$bin" check-order "$L/flag_first.yaml" --runs 5 -o "$ff.2.json" >"$ff.2.out" 2>&1
check "same command twice: identical output" "cmp -s '$ff.out' '$ff.2.out'"
check "same command twice: identical JSON" "cmp -s '$ff.json' '$ff.2.json'"
# A violation in a later run: header-flag with 4096-byte messages passes
# with a 4096 MTU (one packet each) and fails with 1024 (four packets).
hdr=(--set 'programs.0.args=[--server, --protocol=header-flag, --sizes=4096]'
    --set 'programs.1.args=[--client, --protocol=header-flag, --sizes=4096]')
timeout 120 "$bin" check-order "$L/header_flag.yaml" --runs 3 "${hdr[@]}" \
    --vary hardware.nic.max_mtu=4096,1024 --trace-lines 30 -o "$scratch/vary.json" \
    >"$scratch/vary.out" 2>&1
rc=$?
check "--vary: violation in run 2 of 6 (seed 1, max_mtu 1024), exit 1 (got $rc)" \
    "[ $rc -eq 1 ] && grep -q '^check-order: VIOLATION in run 2 of 6 (seed 1, --set hardware.nic.max_mtu=1024)' '$scratch/vary.out'"
# which packet the reader catches missing depends on when its poll sees the
# header (seeded poll-wakeup noise, docs/noise.md): a packet boundary after
# the first packet
check "--vary: first bad byte at a 1 KiB packet boundary after the first packet" \
    "fb=\$(jget '$scratch/vary.json' violation.report.first_bad_byte); [ \$((fb % 1024)) = 0 ] && [ \$fb -ge 1024 ] && [ \$fb -le 3072 ]"
repro=$(sed -n 's/^  reproduce: //p' "$scratch/vary.out")
check "--vary: reproduce command names the configuration" \
    "grep -qF -- '--seed 1' <<<\"\$repro\" && grep -qF -- '--set hardware.nic.max_mtu=1024' <<<\"\$repro\""
eval "timeout 120 $repro" >"$scratch/repro.out" 2>&1
rc=$?
check "reproduce: exit 1 (got $rc), run 1 of 1 (seed 1)" \
    "[ $rc -eq 1 ] && grep -q '^check-order: VIOLATION in run 1 of 1 (seed 1)' '$scratch/repro.out'"
check "reproduce: the same violation line and the same trace" \
    "cmp -s <(sed -n '/^  violation:/p;/^  trace:/,\$p' '$scratch/vary.out') <(sed -n '/^  violation:/p;/^  trace:/,\$p' '$scratch/repro.out')"

# ---- 4. completion-based receivers take reordered messages
for p in imm send last_byte flag; do
    proto=${p/_/-}
    timeout 60 "$bin" run "$L/$p.yaml" -q -o "$scratch/swap_$p.json" \
        --set "programs.0.args=[--server, --protocol=$proto]" \
        --set "programs.1.args=[--client, --protocol=$proto, --swap-pairs]" >/dev/null 2>&1
    rc=$?
    want=0
    case $p in imm | send) want=500 ;; esac # 1000 messages posted 2,1,4,3,...
    check "--swap-pairs $p: exit 0 (got $rc), 1000 checked, $want completions out of order" \
        "[ $rc -eq 0 ] && [ \"\$(jget '$scratch/swap_$p.json' tables.order_check.0.messages_checked)\" = 1000 ] && [ \"\$(jget '$scratch/swap_$p.json' tables.order_check.0.messages_out_of_order)\" = $want ]"
done

# ---- 5. bad input and runs without a verdict
"$bin" check-order >/dev/null 2>&1
check "no scenario: exit 2" "[ $? -eq 2 ]"
"$bin" check-order "$L/flag.yaml" --runs 0 >/dev/null 2>&1
check "--runs 0: exit 2" "[ $? -eq 2 ]"
"$bin" check-order "$L/flag.yaml" --vary novalues >/dev/null 2>&1
check "--vary without values: exit 2" "[ $? -eq 2 ]"
"$bin" check-order "$L/flag.yaml" --set topology.link.rat=1Gbps >/dev/null 2>"$scratch/bad.err"
rc=$?
check "unknown --set key: exit 2 (got $rc), positioned error" "[ $rc -eq 2 ] && grep -q '^--set:1:' '$scratch/bad.err'"
"$bin" check-order "$L/flag.yaml" --vary 'topology.link.rate=100Gbps,100Gbs' >/dev/null 2>"$scratch/bad2.err"
rc=$?
check "a bad --vary value is found before any run: exit 2 (got $rc)" "[ $rc -eq 2 ] && grep -q 'Gbs' '$scratch/bad2.err'"
timeout 60 "$bin" check-order "$src/scenarios/examples/small.yaml" --runs 1 >/dev/null 2>"$scratch/noc.err"
rc=$?
check "programs that check nothing (perftest): exit 2 (got $rc)" \
    "[ $rc -eq 2 ] && grep -q \"no program reported an 'order_check' table\" '$scratch/noc.err'"
timeout 60 "$bin" check-order "$src/scenarios/examples/deadlock.yaml" --runs 2 >"$scratch/dl.out" 2>&1
rc=$?
check "deadlocked run: exit 3 (got $rc), named, blocked programs listed" \
    "[ $rc -eq 3 ] && grep -q \"run 1 (seed 1) ended 'deadlock'\" '$scratch/dl.out' && grep -q 'host_oob_get' '$scratch/dl.out'"
"$bin" programs | grep -q '^ *litmus'
check "rnicsim programs lists litmus" "[ $? -eq 0 ]"

# ---- 6. per-packet spraying on a leaf-spine fabric
ls=(--set topology.kind=leaf-spine --set topology.leaves=2 --set topology.spines=4
    --set topology.hosts_per_leaf=1)
if "$bin" run "$L/last_byte.yaml" -q "${ls[@]}" --set topology.routing=spray --set stop_time=1ns \
    >/dev/null 2>"$scratch/ls_probe.err" || ! grep -q '^--set:' "$scratch/ls_probe.err"; then
    timeout 300 "$bin" check-order "$L/last_byte.yaml" --runs 2 "${ls[@]}" \
        --vary topology.routing=ecmp,spray -o "$scratch/spray.json" >"$scratch/spray.out" 2>&1
    rc=$?
    check "leaf-spine: RC last-byte clean under ECMP and spraying, exit 0 (got $rc)" "[ $rc -eq 0 ]"
    check "leaf-spine: ECMP reorders nothing; spraying reorders packets (go-back-N drops them)" "$py - '$scratch/spray.json' <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
ecmp, spray = d['configurations']
assert ecmp['sets'][-1] == 'topology.routing=ecmp' and spray['sets'][-1] == 'topology.routing=spray'
assert ecmp['runs'] == 2 and spray['runs'] == 2
assert ecmp['messages_checked'] == 2000 and spray['messages_checked'] == 2000
assert ecmp['pkts_out_of_order'] == 0 and ecmp['pkts_dropped'] == 0, ecmp
assert spray['pkts_out_of_order'] > 0 and spray['pkts_dropped'] > 0, spray
assert spray['trace_records_lost'] == 0, spray
PY"
    timeout 120 "$bin" check-order "$L/flag_first.yaml" --runs 2 "${ls[@]}" \
        --set topology.routing=spray >/dev/null 2>&1
    rc=$?
    check "leaf-spine spraying: flag-first still caught, exit 1 (got $rc)" "[ $rc -eq 1 ]"
else
    echo "SKIP leaf-spine spraying (this build's scenarios have no leaf-spine topology)"
fi

# ---- 7. the same source against the system libibverbs (real hardware)
cc=${CC:-cc}
warn="-std=c11 -D_GNU_SOURCE -Wall -Wextra -Wpedantic -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wcast-qual -Wformat=2 -Wundef -Wdouble-promotion -Werror"
if $cc $warn -I"$src" -I"$src/include" -DRNICSIM_REAL_VERBS=1 -DRNICSIM_REAL_PROGRAM=litmus \
    -include "$src/protocols/litmus/litmus.h" "$src/tools/real/real_main.c" \
    "$src/protocols/litmus/litmus.c" "$src/protocols/common/rc_conn.c" "$src/protocols/common/parse.c" "$src/protocols/common/pages.c" \
    "$src/tools/real/host_posix.c" -libverbs -lpthread \
    -o "$scratch/real_litmus" 2>"$scratch/real.log"; then
    ok "litmus builds against the system libibverbs with zero warnings"
    out=$(RNICSIM_OOB_PORT=0 timeout 20 "$scratch/real_litmus" --server 2>&1)
    rc=$?
    check "real_litmus without a device: 'no RDMA device found', exit 2 (got $rc)" \
        "[ $rc -eq 2 ] && grep -q 'no RDMA device found' <<<\"\$out\""
else
    bad "litmus builds against the system libibverbs with zero warnings"
    cat "$scratch/real.log"
fi

finish
