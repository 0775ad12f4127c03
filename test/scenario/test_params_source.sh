#!/usr/bin/env bash
# rnicsim params shows where every value comes from: the C default with its
# citation (no parameter without one), a profile's file:line with the
# comment on that line, a scenario's hardware: file:line, --set.
# Args: rnicsim binary, source dir, scratch dir (test/scenario/lib.sh).
set -u
. "$(dirname "$0")/lib.sh"

"$bin" params >"$scratch/def.txt" 2>&1
n=$(grep -c '^[a-z]' "$scratch/def.txt")
check "C defaults: every one of the $n parameters has a cited source (else: tools/param_defaults_gen.py)" \
    "[ \$(grep -c '^    from C default: ' '$scratch/def.txt') -eq $n ] && ! grep -q \"see the block's default\" '$scratch/def.txt'"
check "the wire rate's default cites the ConnectX-5 brief" \
    "grep -A1 '^nic.port_rate ' '$scratch/def.txt' | grep -q 'from C default: ConnectX-5 product brief'"

"$bin" params --profile cx5-100g >"$scratch/prof.txt" 2>&1
line=$(grep -n '^  nic.wqe_proc:' "$src/profiles/cx5-100g.yaml" | cut -d: -f1)
check "a profile's value: its file and line ($line) and that line's comment" \
    "grep -A1 '^nic.wqe_proc ' '$scratch/prof.txt' | grep -q 'profiles/cx5-100g.yaml:$line: nic.c default: one QP processes'"

cat >"$scratch/s.yaml" <<'YAML'
name: params-source
profile: cx5-100g
topology: {kind: back-to-back, hosts: 2, link: {rate: 100Gbps, delay: 10ns}}
hardware:
  nic: {tx_pkt_proc: 7ns}    # a faster pipeline
programs: [{host: h0, program: perftest, args: [--server]}]
YAML
"$bin" params "$scratch/s.yaml" --set hardware.pcie.lanes=8 >"$scratch/scn.txt" 2>&1
rc=$?
check "params FILE.yaml --set: exit 0 (got $rc)" "[ $rc -eq 0 ]"
check "a scenario's hardware: entry: its file, line and comment" \
    "grep -A1 '^nic.tx_pkt_proc ' '$scratch/scn.txt' | grep -q 's.yaml:5: a faster pipeline' && grep '^nic.tx_pkt_proc ' '$scratch/scn.txt' | grep -q ' 7ns '"
check "--set: named as the command line's" \
    "grep -A1 '^pcie.lanes ' '$scratch/scn.txt' | grep -q 'from --set hardware.pcie.lanes on the command line'"
check "the rest still from the profile" \
    "grep -A1 '^nic.rx_pkt_proc ' '$scratch/scn.txt' | grep -q 'cx5-100g.yaml:'"
"$bin" params --profile cx5-100g --set hardware.nic.cqe=32B >/dev/null 2>"$scratch/bad.err"
rc=$?
check "--set without a scenario: exit 2 with the usage (got $rc)" "[ $rc -eq 2 ] && grep -q 'FILE.yaml' '$scratch/bad.err'"
finish
