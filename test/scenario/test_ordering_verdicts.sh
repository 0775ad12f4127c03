#!/usr/bin/env bash
# The checker's verdicts on the litmus protocols under relaxed DMA ordering
# and under the IB adaptive-routing personality (docs/ordering.md, table
# "Verdicts per transport"; the models: docs/nic.md "DMA ordering" and
# "IB adaptive routing"):
#  1. relaxed DMA (--set hardware.nic.dma_ordering=relaxed): last-byte
#     fails (the flag chunk lands before earlier chunks of its message),
#     flag fails (the bell's write passes the data's chunks: relaxed writes
#     may pass earlier writes, across messages too), imm and send pass (a
#     CQE never passes the data it reports) with DMA writes seen out of
#     order and no packet reordered;
#  2. ib-ar (--set hardware.nic.transport=ib-ar): last-byte fails (packets
#     of a message placed as they arrive), flag, imm and send pass
#     (messages still execute and complete in order) with packets seen out
#     of PSN order;
#  3. the negative controls (header-flag, flag-first) fail in both;
#  4. a relaxed violation replays from its reproduce command, and the same
#     command gives byte-identical JSON;
#  5. IB UC (litmus --qp=uc): on a lossless star last-byte, flag, imm and
#     send pass; with 1% link loss UC loses messages and each FAILs in
#     run 1 (seed 1): the receiver (--timeout-us) reports "message N never
#     arrived" (last-byte, imm, send) or sees flag's bell without its data,
#     instead of the run ending in a deadlock.
# Args: rnicsim binary, source dir, scratch dir (test/scenario/lib.sh).
set -u
. "$(dirname "$0")/lib.sh"
L="$src/scenarios/litmus"
RUNS=20

# verdict NAME PROTO SET -> runs check-order, leaves $scratch/NAME.{out,json}, echoes exit code
verdict() {
    timeout 300 "$bin" check-order "$L/$2.yaml" --runs $RUNS --set "$3" -o "$scratch/$1.json" \
        >"$scratch/$1.out" 2>"$scratch/$1.err"
    echo $?
}

# clean_json FILE PKTS DMA: clean, RUNS runs x 1000 messages; PKTS/DMA = "zero" or "some"
clean_json() {
    $py - "$1" "$2" "$3" "$RUNS" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
runs = int(sys.argv[4])
assert d['verdict'] == 'clean', d['verdict']
assert d['runs'] == runs and d['messages_checked'] == runs * 1000, (d['runs'], d['messages_checked'])
r = d['reorderings']
for key, want in (('pkts_out_of_order', sys.argv[2]), ('dma_out_of_order', sys.argv[3])):
    assert (r[key] > 0) == (want == 'some'), (key, r[key], want)
assert r['pkts_dropped'] == 0, r
PY
}

# violation_json FILE PROTO-NAME: found in run 1, seed 1, by the named receiver check
violation_json() {
    $py - "$1" "$2" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d['verdict'] == 'violation', d['verdict']
v = d['violation']
assert v['run'] == 1 and v['seed'] == 1, (v['run'], v['seed'])
assert ('VIOLATION: %s message' % sys.argv[2]) in v['line'], v['line']
assert v['trace'], 'no trace'
PY
}

# ---- 1. relaxed DMA ordering
R=hardware.nic.dma_ordering=relaxed
rc=$(verdict relaxed_last_byte last_byte $R)
check "relaxed last-byte: violation, exit 1 (got $rc)" "[ $rc -eq 1 ]"
check "relaxed last-byte: JSON violation in run 1" "violation_json '$scratch/relaxed_last_byte.json' last-byte"
# the flag was visible, the message's sequence number and length too, but
# some earlier bytes were not: the checksum is what fails
check "relaxed last-byte: the bytes, not the flag or header, were missing" "$py - '$scratch/relaxed_last_byte.json' <<'PY'
import json, sys
rep = json.load(open(sys.argv[1]))['violation']['report']
assert rep['check'] == 3 and rep['seq_got'] == rep['message'], rep
assert 0 < rep['bytes_as_sent'] < rep['size_bytes'], rep
assert rep['first_bad_byte'] > 0, rep
PY"
check "relaxed last-byte: the trace shows payload chunks landing out of address order" "$py - '$scratch/relaxed_last_byte.json' <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))['violation']['trace']
w = [r['addr_offset'] for r in t if r['kind'] == 'dma-write' and r['node'] == 1 and r['len'] == 256]
assert any(b < a for a, b in zip(w, w[1:])), w
PY"
rc=$(verdict relaxed_flag flag $R)
check "relaxed flag: violation, exit 1 (got $rc)" "[ $rc -eq 1 ]"
check "relaxed flag: JSON violation in run 1: the bell seen before all of the data" \
    "violation_json '$scratch/relaxed_flag.json' flag"
for p in imm send; do
    rc=$(verdict relaxed_$p $p $R)
    check "relaxed $p: clean, exit 0 (got $rc)" "[ $rc -eq 0 ]"
    check "relaxed $p: $RUNS runs, $((RUNS * 1000)) messages; DMA writes out of order, no packet" \
        "clean_json '$scratch/relaxed_$p.json' zero some"
done

# ---- 2. IB with adaptive routing
A=hardware.nic.transport=ib-ar
rc=$(verdict ar_last_byte last_byte $A)
check "ib-ar last-byte: violation, exit 1 (got $rc)" "[ $rc -eq 1 ]"
check "ib-ar last-byte: JSON violation in run 1" "violation_json '$scratch/ar_last_byte.json' last-byte"
for p in flag imm send; do
    rc=$(verdict ar_$p $p $A)
    check "ib-ar $p: clean, exit 0 (got $rc)" "[ $rc -eq 0 ]"
    check "ib-ar $p: $RUNS runs, $((RUNS * 1000)) messages; packets and placements out of order" \
        "clean_json '$scratch/ar_$p.json' some some"
done

# ---- 3. negative controls fail everywhere
for s in "relaxed $R" "ar $A"; do
    set -- $s
    for p in header_flag flag_first; do
        rc=$(verdict ${1}_$p $p $2)
        check "$1 $p: violation, exit 1 (got $rc)" "[ $rc -eq 1 ]"
    done
done

# ---- 4. reproduce and determinism
repro=$(sed -n 's/^  reproduce: //p' "$scratch/relaxed_last_byte.out")
check "relaxed last-byte: reproduce command printed" "[ -n '$repro' ]"
$repro >"$scratch/repro.out" 2>&1
rc=$?
check "relaxed last-byte: the reproduce command finds it again (exit $rc)" "[ $rc -eq 1 ]"
check "relaxed last-byte: same violation line on replay" \
    "[ \"\$(grep -m1 '^  violation:' '$scratch/repro.out')\" = \"\$(grep -m1 '^  violation:' '$scratch/relaxed_last_byte.out')\" ]"
verdict relaxed_last_byte_again last_byte $R >/dev/null
check "relaxed last-byte: same command, byte-identical JSON" \
    "cmp -s '$scratch/relaxed_last_byte.json' '$scratch/relaxed_last_byte_again.json'"
verdict ar_flag_again flag $A >/dev/null
check "ib-ar flag: same command, byte-identical JSON" \
    "cmp -s '$scratch/ar_flag.json' '$scratch/ar_flag_again.json'"

# Lossy, corrupting links (the fabric's own knobs, end to end): RC still
# delivers every litmus message exactly once and in order, while the fabric
# really dropped packets and RC really resent out of PSN order.
for p in last_byte flag; do
    "$bin" check-order "$src/scenarios/litmus/$p.yaml" --runs 3 --set topology.link.loss=1% \
        --set topology.link.corrupt=0.5% >"$scratch/lossy_$p.out" 2>&1
    rc=$?
    check "lossy links, $p: clean (exit $rc)" "[ $rc -eq 0 ]"
    check "lossy links, $p: 3000 messages checked" \
        "grep -q 'clean: 3 runs (seeds 1..3), 3000 messages checked' '$scratch/lossy_$p.out'"
    check "lossy links, $p: packets were dropped and resent out of order" \
        "grep -Eq 'reorderings observed: [1-9][0-9]* packets out of PSN order, .*\(([1-9][0-9]*) packets dropped\)' '$scratch/lossy_$p.out'"
done

# ---- 5. IB UC: lossless star passes; lossy links lose messages
uc() { # name protocol scenario [extra args...] -> echoes exit code
    local name=$1 proto=$2 file=$3
    shift 3
    local a="--protocol=$proto, --qp=uc, --timeout-us=200"
    timeout 300 "$bin" check-order "$L/$file.yaml" --runs 3 --set "programs.0.args=[--server, $a]" \
        --set "programs.1.args=[--client, $a]" "$@" >"$scratch/$name.out" 2>&1
    echo $?
}
for p in last-byte flag imm send; do
    f=${p//-/_}
    rc=$(uc uc_$f $p $f)
    check "uc star $p: clean, exit 0 (got $rc)" \
        "[ $rc -eq 0 ] && grep -q '^check-order: clean: 3 runs (seeds 1..3), 3000 messages checked' '$scratch/uc_$f.out'"
    rc=$(uc uc_lossy_$f $p $f --set topology.link.loss=1%)
    check "uc lossy $p: VIOLATION in run 1 (seed 1), exit 1 (got $rc)" \
        "[ $rc -eq 1 ] && grep -q '^check-order: VIOLATION in run 1 of 3 (seed 1' '$scratch/uc_lossy_$f.out'"
    check "uc lossy $p: no deadlock" "! grep -q deadlock '$scratch/uc_lossy_$f.out'"
done
for p in last-byte imm send; do
    check "uc lossy $p: the receiver reports the lost message" \
        "grep -Eq 'VIOLATION: $p message [0-9]+ .*bad arrival: message [0-9]+ never arrived \(nothing for 200 us\)' '$scratch/uc_lossy_${p//-/_}.out'"
done
check "uc lossy flag: the bell arrived without its data" \
    "grep -Eq 'VIOLATION: flag message [0-9]+ .*bad sequence number: sequence number is 0' '$scratch/uc_lossy_flag.out'"

finish
