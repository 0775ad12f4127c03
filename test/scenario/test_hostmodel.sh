#!/usr/bin/env bash
# The host model end to end (sim/host/, docs/host.md), through the
# hostbench program and scenarios/host/, every value by hand from the
# cx5-100g host (L1 2 ns, LLC 26 ns, memory 90 ns, the other socket's
# memory 150 ns and caches 120 ns, 10 misses overlapped, DDIO; socket link
# 50 ns; HT share 0.65; CFS turns of 12 ms for two threads):
#  1. CPUs: two threads computing 20000 x 1 us take 1000 ns per iteration
#     on two cores, 1538 on the two hyper-threads of one core, 2000 on one
#     CPU (time slices, counted in the host counters);
#  2. cache lines: the receiver reads a 128 B NIC-written message in 26 ns
#     (two LLC misses overlapped) and advances its own head line in 2 ns:
#     28; with the head next to the word the NIC writes (false sharing)
#     the head misses too: 52; 1024 B aligned 16 lines (41.6 + 2), 32 B
#     off 17 lines (44.2 + 2); without DDIO memory: 92;
#  3. NUMA: rings on the socket away from the NIC: 150 + 2 and the round
#     trip 50 ns (one DMA hop) + 124 ns longer; the server thread on the
#     other socket: 120 + 2, and the round trip longer by the doorbell hop
#     and the remote wakeup (50 + 94) plus 94;
#  4. OS noise (os-tick-250hz): the median stays, the maximum grows by a
#     tick (5 us); the same seed twice gives the same bytes, another seed
#     another tail;
#  5. bad input: a CPU or socket the host lacks, a NIC socket past the
#     sockets, a wakeup distribution as OS noise: file:line:col errors.
# Args: rnicsim binary, source dir, scratch dir (test/scenario/lib.sh).
set -u
. "$(dirname "$0")/lib.sh"
pp="$src/scenarios/host/pingpong.yaml"
th="$src/scenarios/host/threads.yaml"

# run NAME SCENARIO [--set ...]: results in $scratch/NAME.json
run() {
    local name=$1 scn=$2
    shift 2
    timeout 120 "$bin" run "$scn" "$@" -o "$scratch/$name.json" >"$scratch/$name.log" 2>&1 ||
        bad "run $name (see $scratch/$name.log)"
}
# val NAME TABLE COLUMN
val() {
    $py -c "import json,sys; print(json.load(open(sys.argv[1]))['tables'][sys.argv[2]][0][sys.argv[3]])" \
        "$scratch/$1.json" "$2" "$3"
}
host() { # host counter: NAME HOST KEY
    $py -c "import json,sys; print(json.load(open(sys.argv[1]))['counters']['hosts'][sys.argv[2]]['host'][sys.argv[3]])" \
        "$scratch/$1.json" "$2" "$3"
}
near() { # near A B TOL: |A - B| <= TOL
    $py -c "import sys; a,b,t=map(float,sys.argv[1:]); sys.exit(0 if abs(a-b)<=t else 1)" "$1" "$2" "$3"
}

# ---- 1. CPUs
run cores "$th" --set vars.cpus=0,1
run ht "$th" --set vars.cpus=0,24
run slice "$th" --set vars.cpus=0,0
c=$(val cores hostbench_threads per_iter_ns)
h=$(val ht hostbench_threads per_iter_ns)
s=$(val slice hostbench_threads per_iter_ns)
check "two cores: 1000 ns per iteration (got $c)" "near $c 1000 1"
check "two hyper-threads of one core: 1000 / 0.65 = 1538.5 (got $h)" "near $h 1538.5 1"
check "one CPU, time-sliced: 2000 (got $s)" "near $s 2000 2"
check "time slices counted (slice_waits > 0, ctx_switches >= 3)" \
    "[ \$(host slice h0 slice_waits) -gt 0 ] && [ \$(host slice h0 ctx_switches) -ge 3 ]"
check "hyper-threads: the shared work counted" "[ \$(host ht h0 ht_shared_ps) -ge 40000000000 ]"

# ---- 2. cache lines
run base "$pp"
run packed "$pp" --set vars.layout=packed
run big "$pp" --set vars.size=1024
run unal "$pp" --set vars.size=1024 --set vars.offset=32
run noddio "$pp" --set hardware.host.mem.ddio=false
check "NIC-written 128 B + own head: 28 ns (got $(val base hostbench_server read_ns))" \
    "near \$(val base hostbench_server read_ns) 28 0.01"
check "false sharing (head next to the NIC's tail word): 52 ns (got $(val packed hostbench_server read_ns))" \
    "near \$(val packed hostbench_server read_ns) 52 0.01"
check "1024 B aligned: 16 lines, 43.6 ns" \
    "near \$(val big hostbench_server lines) 16 0 && near \$(val big hostbench_server read_ns) 43.6 0.01"
# (the average: the first pass over the ring meets its cold lines, whose
# partial DMA writes the root complex merges from memory, and shifts a few
# polls: 46.19)
check "1024 B unaligned (offset 32): 17 lines, 46.2 ns" \
    "near \$(val unal hostbench_server lines) 17 0 && near \$(val unal hostbench_server read_ns) 46.2 0.03"
check "without DDIO: memory, 92 ns" "near \$(val noddio hostbench_server read_ns) 92 0.01"
check "the server's lines: 2 NIC-written misses per message (2050 messages)" \
    "[ \$(host base h1 lines_dma_miss) -eq 4100 ]"

# ---- 3. NUMA
run rsock "$pp" --set vars.sock=1
run rcpu "$pp" --set vars.cpu=12
b=$(val base hostbench_rtt t_p50_us)
check "rings on the other socket: 152 ns per message" "near \$(val rsock hostbench_server read_ns) 152 0.01"
# + 150 ns: the 8 B tail WRITE covers its line partly, and the root complex
# merges it with the line from the other socket's memory (no DDIO there)
check "... round trip + 50 ns hop + 124 ns reading + 150 ns merging the tail word (p50 $b -> $(val rsock hostbench_rtt t_p50_us))" \
    "near \$(val rsock hostbench_rtt t_p50_us) \$($py -c 'print($b + 0.324)') 0.01"
check "... the NIC's DMA to the other socket counted" "[ \$(host rsock h1 dma_remote) -gt 4000 ]"
check "server thread on the other socket: 122 ns per message" \
    "near \$(val rcpu hostbench_server read_ns) 122 0.01"
check "... round trip + 50 (doorbell) + 94 (wakeup) + 94 (reading) ns (p50 $(val rcpu hostbench_rtt t_p50_us))" \
    "near \$(val rcpu hostbench_rtt t_p50_us) \$($py -c 'print($b + 0.238)') 0.003"

# ---- 4. OS noise
run tick "$pp" --set hardware.host.os.noise=os-tick-250hz
run tick2 "$pp" --set hardware.host.os.noise=os-tick-250hz
run tick3 "$pp" --set hardware.host.os.noise=os-tick-250hz --seed 9
check "ticks: median unchanged (within 1 %)" \
    "near \$(val tick hostbench_rtt t_p50_us) $b \$($py -c 'print($b * 0.01)')"
# a tick stalls a CPU 5 us; the round trip that meets one waits for the
# part of it that remains (two CPUs: at most two ticks).  How much remains
# depends on where in the tick it lands: 3.9 us without PCIe completion
# noise, 2.0 us with it (pcie.read_noise moves the round trips' phase), so
# the bound is "a visible part", 0.5 us
check "ticks: the maximum grows by part of a tick ($(val base hostbench_rtt t_max_us) -> $(val tick hostbench_rtt t_max_us) us)" \
    "$py -c 'import sys; d = $(val tick hostbench_rtt t_max_us) - $(val base hostbench_rtt t_max_us); sys.exit(0 if 0.5 <= d <= 10.1 else 1)'"
check "ticks: the OS took CPU time (os_stalls_ps > 0)" "[ \$(host tick h1 os_stalls_ps) -gt 0 ]"
check "ticks: same seed, byte-identical results" "cmp -s '$scratch/tick.json' '$scratch/tick2.json'"
check "ticks: another seed, another run" "! cmp -s '$scratch/tick.json' '$scratch/tick3.json'"

# ---- 5. bad input
bad_run() { # NAME EXPECTED-REGEX SCENARIO [args]
    local name=$1 re=$2 scn=$3
    shift 3
    "$bin" run "$scn" "$@" >"$scratch/$name.out" 2>&1
    local rc=$?
    check "$name: exit 2 with '$re'" "[ $rc -eq 2 ] && grep -Eq \"$re\" '$scratch/$name.out'"
}
cat >"$scratch/badcpu.yaml" <<'YAML'
name: badcpu
profile: cx5-100g
topology: {kind: back-to-back, hosts: 2, link: {rate: 100Gbps, delay: 10ns}}
programs:
  - {host: h0, program: hostbench, args: [--test=threads], cpus: [3, 48]}
YAML
bad_run "cpus: a CPU the host lacks" "badcpu.yaml:5:[0-9]+: .*CPU 48, but the host has CPUs 0..47" "$scratch/badcpu.yaml"
sed 's/cpus: \[3, 48\]/socket: 2/' "$scratch/badcpu.yaml" >"$scratch/badsock.yaml"
bad_run "socket: a socket the host lacks" "badsock.yaml:5:[0-9]+: .*socket.*2, but the host has sockets 0..1" "$scratch/badsock.yaml"
sed 's/cpus: \[3, 48\]/cpus: [13], socket: 0/' "$scratch/badcpu.yaml" >"$scratch/badboth.yaml"
bad_run "cpus: a CPU off the socket of the program" "CPU 13 is on socket 1, not on socket 0" "$scratch/badboth.yaml"
bad_run "host.nic_socket past host.sockets" "host.nic_socket: 2, but the host has sockets 0..1" \
    "$pp" --set hardware.host.nic_socket=2
bad_run "host.os.noise: a wakeup distribution" "host.os.noise: 'poll-wakeup' is not an interruption source" \
    "$pp" --set hardware.host.os.noise=poll-wakeup
bad_run "host.threads_per_core: 3" "expected one of 1, 2" "$pp" --set hardware.host.threads_per_core=3
bad_run "pcie.read_noise: an interruption source" "pcie.read_noise: 'os-tick-250hz' is an interruption source" \
    "$pp" --set hardware.pcie.read_noise=os-tick-250hz
finish
