#!/usr/bin/env bash
# Issue 14's findings at the command line (docs/robustness.md), each one a
# check that failed before its fix:
#  1. capture [{all: ""}]: refused at its position (before: read past the
#     string, wrote into /, exit 0); a capture file that is a directory or
#     under a file, and -o into a missing directory, likewise, before the run;
#  2. a cache size above 2^32 / 2^31: out of range at its position (before:
#     an endless loop / an 8 GiB table at world build);
#  3. times near 2^64 ps: out of range at their position (before: "event
#     scheduled in the past" or a silent wrap); a duration at its maximum
#     (1 h) runs to the time limit instead;
#  4. pcie.dllp_overhead_permil 1000: positioned (before: exit 5 unpositioned);
#     check-order --vary twice: refused (before: one list dropped); a capture
#     that cannot be written: exit 5 (before: 0); a scenario file of 17 MiB
#     and /dev/zero: refused; --wall-limit ends a run that would take long;
#  5. pcap files are byte-identical across runs (before: the RETH carried
#     process addresses).
source "$(dirname "$0")/lib.sh"
cd "$scratch"

base() { # base NAME EXTRA-YAML: a 2-host star running a short perftest
    cat >"$1.yaml" <<EOF
name: $1
stop_time: 10ms
profile: cx5-100g
topology: {kind: star, hosts: 2, link: {rate: 100Gbps, delay: 10ns}}
$2
programs:
  - {host: h1, program: perftest, args: [--server, --tests=write, --modes=lat, --sizes=64, --iters=4]}
  - {host: h0, program: perftest, args: [--client, --tests=write, --modes=lat, --sizes=64, --iters=4]}
EOF
}
# expect NAME STATUS STDERR-PREFIX [rnicsim run arguments...]
expect() {
    local name=$1 want=$2 prefix=$3
    shift 3
    timeout 60 "$bin" run -q "$@" >"$name.out" 2>"$name.err"
    local rc=$?
    local first
    first=$(head -1 "$name.err")
    if [ "$rc" -eq "$want" ] && { [ -z "$prefix" ] || [ "${first#"$prefix"}" != "$first" ]; }; then
        ok "$name"
    else
        bad "$name: rc=$rc (want $want), stderr '$first', expected prefix '$prefix'"
    fi
}

# 1. paths
base cap_all_empty 'capture: [{all: ""}]'
expect cap_all_empty 2 "cap_all_empty.yaml:5:17: 'capture[0].all': empty path" cap_all_empty.yaml
check "capture all '': nothing written to /" "[ ! -e /node0-to-sw0.pcap ]"
base cap_dir "capture: [{host: h0, file: $scratch}]"
expect cap_dir 2 "cap_dir.yaml:5:28: 'capture[0].file': '$scratch' is a directory, not a file" cap_dir.yaml
: >plainfile
base cap_under_file 'capture: [{host: h0, file: plainfile/x.pcap}]'
expect cap_under_file 2 "cap_under_file.yaml:5:28: 'capture[0].file': 'plainfile/x.pcap': Not a directory" cap_under_file.yaml
base ok_run ''
expect out_missing_dir 2 "rnicsim run: -o: cannot create 'no/dir/r.json': directory 'no/dir' does not exist" ok_run.yaml -o no/dir/r.json
check "-o refused before the run: nothing simulated" "! grep -q perftest out_missing_dir.out"

# 2. sizes
base qpc_huge 'hardware: {nic.qpc_cache_entries: 3300000000}'
expect qpc_huge 2 "qpc_huge.yaml:5:35: 'nic.qpc_cache_entries': 3300000000 is out of range (expected 0..1048576)" qpc_huge.yaml
expect mpt_2g 2 "--set:1:32: 'nic.mpt_cache_entries': 2147483649 is out of range (expected 0..1048576)" ok_run.yaml --set hardware.nic.mpt_cache_entries=2147483649
expect qpc_max_runs 0 "" ok_run.yaml --set hardware.nic.qpc_cache_entries=1048576

# 3. times
expect delay_max 2 "--set:1:21: 'topology.link.delay': 18446744073709551615ps is out of range (expected 0..3600s)" ok_run.yaml --set topology.link.delay=18446744073709551615ps
expect sw_latency_max 2 "--set:1:25: 'topology.switch.latency': 18446744073709551615ps is out of range (expected 0..3600s)" ok_run.yaml --set topology.switch.latency=18446744073709551615ps
expect tx_pkt_proc_max 2 "--set:1:26: 'nic.tx_pkt_proc': 18446744073709551615ps is out of range (expected 0..3600s)" ok_run.yaml --set hardware.nic.tx_pkt_proc=18446744073709551615ps
expect write_latency_max 2 "--set:1:29: 'pcie.write_latency': 18446744073709551615ps is out of range (expected 0..3600s)" ok_run.yaml --set hardware.pcie.write_latency=18446744073709551615ps
expect stop_time_max 2 "--set:1:11: 'stop_time': 18446744073709551615ps is out of range (expected 0..1152921504606846976ps)" ok_run.yaml --set stop_time=18446744073709551615ps
# the longest durations allowed, with the latest stop_time: the clock
# saturates instead of wrapping; the run ends as the model says (here RC
# gives up on hour-long round trips and the programs wait: a deadlock,
# exit 3, hours of simulated time later), never with an abort
timeout 60 "$bin" run -q ok_run.yaml -o tmax.json --set stop_time=1152921504606846976ps \
    --set hardware.pcie.write_latency=3600s --set topology.link.delay=3600s \
    --set topology.switch.latency=3600s --set hardware.nic.tx_pkt_proc=3600s >tmax.out 2>tmax.err
rc=$?
check "durations at 1 h: an outcome (exit 3 or 4, got $rc) hours later, no abort" \
    "[ $rc -eq 3 -o $rc -eq 4 ] && ! grep -q 'past' tmax.err && $py -c 'import json,sys; assert json.load(open(\"tmax.json\"))[\"sim_time_ps\"] >= 3600 * 10**12'"

# 4. the rest
expect dllp 2 "--set:1:36: 'pcie.dllp_overhead_permil': 1000 is out of range (expected 0..999)" ok_run.yaml --set hardware.pcie.dllp_overhead_permil=1000
timeout 60 "$bin" check-order "$src/scenarios/litmus/flag_after_data.yaml" --runs 1 \
    --vary hardware.nic.dma_ordering=strict --vary hardware.nic.dma_ordering=relaxed >co.out 2>co.err
rc=$?
check "check-order: a repeated --vary key is refused (exit 2, got $rc)" \
    "[ $rc -eq 2 ] && grep -q -- '--vary hardware.nic.dma_ordering given twice' co.err"
base cap_full 'capture: [{host: h0, file: /dev/full}]'
timeout 60 "$bin" run -q cap_full.yaml >cap_full.out 2>cap_full.err
rc=$?
check "a capture that cannot be written: exit 5 (got $rc) and a message" \
    "[ $rc -eq 5 ] && grep -q \"rnicsim: capture: error writing '/dev/full'\" cap_full.err"
{ cat ok_run.yaml; head -c $((17 << 20)) /dev/zero | tr '\0' '#'; } >huge.yaml
expect huge_file 2 "huge.yaml:1:1: file larger than 16 MiB: not a scenario" huge.yaml
expect dev_zero 2 "/dev/zero:1:1: file larger than 16 MiB: not a scenario" /dev/zero
# a run that cannot finish soon (20 M small WRITEs) ends at the wall limit
base slow ""
timeout 60 "$bin" run -q slow.yaml --wall-limit 0.5 -o slow.json --set stop_time=1000s \
    --set 'programs.0.args=[--server, --tests=write, --modes=bw, --sizes=64, --bw-iters=20000000]' \
    --set 'programs.1.args=[--client, --tests=write, --modes=bw, --sizes=64, --bw-iters=20000000]' \
    >slow.out 2>slow.err
rc=$?
check "--wall-limit 0.5: exit 4 (got $rc), result wall-limit, named on stderr" \
    "[ $rc -eq 4 ] && grep -q 'wall-limit 0.5 s reached' slow.err && grep -q '\"result\": \"wall-limit\"' slow.json"
expect bad_wall_limit 2 "rnicsim run: bad --wall-limit 'x'" ok_run.yaml --wall-limit x

# 5. pcap determinism: WRITE, READ and atomics carry RETH / AtomicETH
cat >pc.yaml <<'EOF'
name: pcap-det
profile: cx5-100g
topology: {kind: star, hosts: 2, link: {rate: 100Gbps, delay: 10ns}}
capture: [{host: h0, file: pc/h0.pcap}]
programs:
  - {host: h1, program: perftest, args: [--server, "--tests=write,read,atomic", --modes=lat, "--sizes=64,8192", --iters=8, --warmup=2]}
  - {host: h0, program: perftest, args: [--client, "--tests=write,read,atomic", --modes=lat, "--sizes=64,8192", --iters=8, --warmup=2]}
EOF
timeout 60 "$bin" run -q pc.yaml >/dev/null 2>&1 && cp pc/h0.pcap pc1.pcap
timeout 60 "$bin" run -q pc.yaml >/dev/null 2>&1 && cp pc/h0.pcap pc2.pcap
check "pcap: two runs give byte-identical files" "[ -s pc1.pcap ] && cmp -s pc1.pcap pc2.pcap"
check "pcap: RETH addresses are the MR's wire addresses (0x1_0000_0000 up)" \
    "tshark -r pc1.pcap -T fields -e infiniband.reth.va 2>/dev/null | grep -q '^0x0000000100000000$'"
finish
