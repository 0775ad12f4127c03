#!/usr/bin/env bash
# Transport personalities at the scenario level (docs/nic.md "Transport
# personalities: EFA SRD and 1RMA", docs/ordering.md "Verdicts per
# transport"): the litmus programs under `hardware.nic.transport`.
#
#  - efa-srd: the WRITE-based litmus cannot run: the post is refused with
#    the one-line message, check-order reports NOT RUNNABLE (exit 4) and
#    shows the message; 1rma refuses SEND the same way;
#  - 1rma with ops <= 4 KiB: last-byte and flag pass on a star; on a
#    leaf-spine (2x4, ECMP spreads 1RMA's independent ops) flag FAILs
#    (message reordering) while last-byte still passes (single-packet
#    messages, one DMA write each);
#  - efa-srd with SEND credits (litmus --credits=send) and single-packet
#    messages (--sizes=64,4096): `send`, whose receiver takes completions
#    in any order, passes on a star and on a leaf-spine (2x4) where SRD
#    sprays a QP's packets and messages complete in arrival order (packets
#    seen out of PSN order); `send-in-order` (takes completions in sequence:
#    needs in-order messages) FAILs there with a sequence-number violation
#    in run 1, seed 1, and passes on IB RC over the same leaf-spine with
#    per-packet spraying;
#  - a 1rma capture read back with tshark: the WRITE opcodes 0xe2..0xe5
#    (request, fetch, data, ACK) are dissected, and the four packets of
#    each WRITE carry its op tag as BTH PSN;
#  - `rnicsim params` lists nic.srd_rto and nic.onerma_timeout.
# Args: rnicsim binary, source dir, scratch dir (test/scenario/lib.sh).
set -u
. "$(dirname "$0")/lib.sh"

cd "$scratch" || exit 1
litmus="$src/scenarios/litmus"
leaf=(--set topology.kind=leaf-spine --set topology.leaves=2 --set topology.spines=4
      --set topology.hosts_per_leaf=1)

# ---- refusals
"$bin" check-order "$litmus/last_byte.yaml" --runs 2 --set hardware.nic.transport=efa-srd \
    >efa.out 2>&1
rc=$?
check "efa-srd last-byte: not runnable, exit 4 (got $rc)" "[ $rc -eq 4 ]"
check "efa-srd last-byte: the refusal line is shown" \
    "grep -qF 'rnicsim: efa-srd has no RDMA_WRITE (post_send on qp 0x100 refused, EINVAL)' efa.out"
check "efa-srd last-byte: reported as not runnable" \
    "grep -q '^check-order: NOT RUNNABLE: the transport refused 1 work request' efa.out"
"$bin" check-order "$litmus/send.yaml" --runs 2 --set hardware.nic.transport=1rma >rma_send.out 2>&1
rc=$?
check "1rma send: not runnable, exit 4 (got $rc)" "[ $rc -eq 4 ]"
check "1rma send: SEND refused" "grep -qF 'rnicsim: 1rma has no SEND' rma_send.out"

# ---- verdicts with ops <= 4 KiB
run_rma() { # name protocol scenario [extra args...]
    local name=$1 proto=$2 file=$3
    shift 3
    local s1="programs.0.args=[--server, --protocol=$proto, \"--sizes=64,4096\"]"
    local s2="programs.1.args=[--client, --protocol=$proto, \"--sizes=64,4096\"]"
    "$bin" check-order "$litmus/$file" --runs 3 --set hardware.nic.transport=1rma \
        --set "$s1" --set "$s2" "$@" >"$name.out" 2>&1
    echo $?
}
rc=$(run_rma star_flag flag flag.yaml)
check "1rma star flag: pass (got $rc)" "[ $rc -eq 0 ] && grep -q '^check-order: clean: 3 runs' star_flag.out"
rc=$(run_rma star_last last-byte last_byte.yaml)
check "1rma star last-byte: pass (got $rc)" "[ $rc -eq 0 ]"
rc=$(run_rma ls_flag flag flag.yaml "${leaf[@]}")
check "1rma leaf-spine flag: VIOLATION, exit 1 (got $rc)" \
    "[ $rc -eq 1 ] && grep -q '^check-order: VIOLATION in run 1 of 3 (seed 1' ls_flag.out"
check "1rma leaf-spine flag: the receiver found a flag message out of order" \
    "grep -q 'VIOLATION: flag message' ls_flag.out"
check "1rma leaf-spine flag: the trace shows 1RMA data packets (opcode 0xe4)" \
    "grep -q 'opcode 0xe4' ls_flag.out"
rc=$(run_rma ls_last last-byte last_byte.yaml "${leaf[@]}")
check "1rma leaf-spine last-byte: pass (got $rc)" "[ $rc -eq 0 ]"
check "1rma leaf-spine last-byte: DMA writes were reordered" \
    "grep -Eq 'reorderings observed: [0-9]+ packets out of PSN order, [1-9][0-9]* DMA writes out of order' ls_last.out"

# ---- efa-srd: SEND with SEND credits, single-packet messages
run_efa() { # name protocol scenario [extra args...]
    local name=$1 proto=$2 file=$3
    shift 3
    local a="--protocol=$proto, \"--sizes=64,4096\", --credits=send"
    "$bin" check-order "$litmus/$file" --runs 3 --set "programs.0.args=[--server, $a]" \
        --set "programs.1.args=[--client, $a]" "$@" >"$name.out" 2>&1
    echo $?
}
E=(--set hardware.nic.transport=efa-srd)
rc=$(run_efa efa_star_send send send.yaml "${E[@]}")
check "efa-srd star send (SEND credits): pass (got $rc)" \
    "[ $rc -eq 0 ] && grep -q '^check-order: clean: 3 runs (seeds 1..3), 3000 messages checked' efa_star_send.out"
rc=$(run_efa efa_ls_send send send.yaml "${E[@]}" "${leaf[@]}")
check "efa-srd leaf-spine send: pass (got $rc)" "[ $rc -eq 0 ]"
check "efa-srd leaf-spine send: SRD sprayed packets out of PSN order" \
    "grep -Eq 'reorderings observed: [1-9][0-9]* packets out of PSN order' efa_ls_send.out"
# (cut-through switches keep the sprayed paths close: the first seed whose
# reordering breaks the in-order receiver is 7)
rc=$(run_efa efa_ls_sio send-in-order send_in_order.yaml "${E[@]}" "${leaf[@]}" --runs 10)
check "efa-srd leaf-spine send-in-order: VIOLATION, exit 1 (got $rc)" \
    "[ $rc -eq 1 ] && grep -q '^check-order: VIOLATION in run [0-9]* of 10 (seed' efa_ls_sio.out"
check "efa-srd leaf-spine send-in-order: a later message completed first" \
    "grep -Eq 'VIOLATION: send-in-order message [0-9]+ .*bad sequence number: sequence number is [0-9]+, expected' efa_ls_sio.out"
check "efa-srd leaf-spine send-in-order: the trace shows SRD packets (opcode 0xc0)" \
    "grep -q 'opcode 0xc0' efa_ls_sio.out"
rc=$(run_efa rc_ls_sio send-in-order send_in_order.yaml "${leaf[@]}" --set topology.routing=spray)
check "IB RC leaf-spine (spray) send-in-order: pass (got $rc)" \
    "[ $rc -eq 0 ] && grep -Eq 'reorderings observed: [1-9][0-9]* packets out of PSN order' rc_ls_sio.out"

# ---- capture
if command -v tshark >/dev/null 2>&1; then
    rm -f rma.pcap
    "$bin" run "$litmus/flag.yaml" --set hardware.nic.transport=1rma \
        --set 'capture=[{host: h0, file: rma.pcap}]' \
        --set 'programs.0.args=[--server, --protocol=flag, "--sizes=64,4096", --messages=4]' \
        --set 'programs.1.args=[--client, --protocol=flag, "--sizes=64,4096", --messages=4]' \
        >cap.out 2>&1
    rc=$?
    check "1rma capture run: exit 0 (got $rc)" "[ $rc -eq 0 ]"
    tshark -r rma.pcap -T fields -e infiniband.bth.opcode -e infiniband.bth.psn -e ip.src \
        -e ip.dst >cap.txt 2>/dev/null
    for op in 226 227 228 229; do
        check "1rma capture: opcode $op present" "awk '\$1 == $op' cap.txt | grep -q ."
    done
    # per WRITE (initiator address + op tag): request and data from the
    # initiator, fetch and ACK to it - four packets at h0's port
    check "1rma capture: each WRITE tag has its four packets" \
        "awk '\$1 >= 226 && \$1 <= 229 { k = ((\$1 == 226 || \$1 == 228) ? \$3 : \$4) \" \" \$2; n[k]++ }
              END { c = 0; for (t in n) { c++; if (n[t] != 4) exit 1 }; exit c == 0 }' cap.txt"
else
    bad "tshark is not installed (tools/test.sh installs it: apt-get install tshark)"
fi

# ---- parameters
"$bin" params >params.txt 2>&1
check "params: nic.srd_rto 100us" "grep -Eq '^nic.srd_rto +time +100us' params.txt"
check "params: nic.onerma_timeout 50us" "grep -Eq '^nic.onerma_timeout +time +50us' params.txt"

finish
