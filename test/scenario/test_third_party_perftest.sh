#!/usr/bin/env bash
# perftest 4.5's ib_write_bw, ib_write_lat, ib_read_lat, ib_send_bw,
# ib_read_bw, ib_send_lat, ib_atomic_lat and ib_atomic_bw,
# compiled unmodified with rnicsim-cc (a stand-in for the config.h its
# configure writes: test/third_party/perftest/config.h) and run between two
# simulated hosts with their default flags.  Each must print its usual
# table, with numbers that agree with the built-in perftest program on the
# same scenario and the same parameters (sizes, iterations, TX depth, CQ
# moderation, inline size): within 2 %.  These programs read the clock
# with rdtsc and get_cpu_mhz() (emulated: posix/guard.c), exchange their
# parameters over their own TCP code, and ib_write_lat waits for the
# peer's write by spinning on memory (parked: posix/guard.c).
# Args: rnicsim binary, source dir, scratch dir (test/scenario/lib.sh).
set -u
. "$(dirname "$0")/lib.sh"
cc="$(dirname "$bin")/rnicsim-cc"
tp=$(third_party_dir) || { bad "third-party sources found"; finish; exit 1; }
pt="$tp/perftest-4.5-0.17/src"
mkdir -p "$scratch"
# The sanitizer build: perftest's own leaks are its own (not freed at exit).
export ASAN_OPTIONS="${ASAN_OPTIONS:-}${ASAN_OPTIONS:+:}detect_leaks=0"

# perftest's build: CFLAGS="-g -Wall -D_GNU_SOURCE -O3" (configure.ac),
# libperftest.a + one main per program, -lm -libumad.
flags=(-g -D_GNU_SOURCE -O3 -DHAVE_CONFIG_H -I "$src/test/third_party/perftest" -I "$pt")
built=true
progs="write_bw write_lat read_lat send_bw read_bw send_lat atomic_lat atomic_bw"
for f in get_clock perftest_communication perftest_parameters perftest_resources perftest_counters \
    raw_ethernet_resources multicast_resources $progs; do
    "$cc" -c "${flags[@]}" -o "$scratch/$f.o" "$pt/$f.c" 2>>"$scratch/cc.err" || built=false
done
lib=(get_clock.o perftest_communication.o perftest_parameters.o perftest_resources.o
    perftest_counters.o raw_ethernet_resources.o)
for t in $progs; do
    extra=()
    case $t in send_*) extra=(multicast_resources.o) ;; esac
    (cd "$scratch" && "$cc" -o "ib_$t.so" "$t.o" "${extra[@]}" "${lib[@]}" -lm -libumad) \
        2>>"$scratch/cc.err" || built=false
done
if $built; then ok "perftest sources build unmodified (8 programs)"; else
    bad "perftest sources build unmodified"
    grep -i error "$scratch/cc.err" | head
fi
# rnicsim-cc's assembler (tools/rnicsim-as/as) turned every rdtsc of
# get_cycles() into a call of the simulator's trampoline: the programs read
# simulated time even where the kernel does not trap the instruction (a
# hypervisor may ignore PR_SET_TSC; they printed "inf" latencies there)
if [ "$(uname -m)" = x86_64 ]; then
    tramp=0 raw=0
    for o in "$scratch"/*.o; do
        tramp=$((tramp + $(objdump -dr "$o" | grep -c 'rnicsim_tramp_rdtsc')))
        raw=$((raw + $(objdump -d "$o" | grep -cw 'rdtscp\?')))
    done
    check "perftest's rdtsc compiled into calls of the TSC trampoline ($tramp calls, $raw rdtsc left)" \
        "[ $tramp -ge 40 ] && [ $raw -eq 0 ]"
fi

# scenario NAME "PROGRAM ARGS ON h0" "PROGRAM ARGS ON h1"
scenario() {
    write_scenario "$1" <<YAML
name: $1
profile: cx5-100g
stop_time: 100s
topology: {kind: star, hosts: 2, link: {rate: 100Gbps, delay: 10ns}}
programs:
  - {host: h0, $2}
  - {host: h1, $3}
YAML
    run_timeout=300 run_scenario "$1"
    echo $?
}
# the client's (h1) result line of a perftest table: " <bytes> <iters> ..."
# (row NAME SIZE [PROGRAM]: the program is ib_NAME unless given)
row() { grep "^\[h1/ib_${3:-$1}#1\]  *$2 " "$scratch/$1.out" | head -1 | sed 's/^\[[^]]*\]//'; }
builtin() { # NAME TABLE KEY: the built-in's first row value
    $py - "$scratch/$1.json" "$2" "$3" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print(d['tables'][sys.argv[2]][0][sys.argv[3]])
PY
}
# builtin NAME ARG...: the built-in perftest program with these arguments,
# --server on h0 and --client on h1 (prints the exit status)
builtin_run() {
    local name=$1 a
    shift
    a=$(printf ', %s' "$@")
    scenario "$name" "program: perftest, args: [--server$a]" "program: perftest, args: [--client$a]"
}
mbs_gbps() { awk -v m="$1" 'BEGIN { printf "%.3f", m * 1048576 * 8 / 1e9 }'; } # perftest's MB/s
agree() { awk -v a="$1" -v b="$2" 'BEGIN { d = (a - b) / b; if (d < 0) d = -d; exit !(a != "" && b != "" && d <= 0.02) }'; }

# --- ib_write_lat: 2-byte WRITE ping-pong, 1000 iterations, inline 220
rc=$(scenario write_lat 'program: ./ib_write_lat.so' 'program: ./ib_write_lat.so, args: [h0]')
check "ib_write_lat: both sides exit 0 (got $rc)" "[ $rc -eq 0 ]"
check "ib_write_lat prints its table (ibv_wr* API on, inline 220)" \
    "grep -q 'RDMA_Write Latency Test' '$scratch/write_lat.out' && grep -q 't_typical\[usec\]' '$scratch/write_lat.out' && grep -q 'ibv_wr\* API     : ON' '$scratch/write_lat.out' && grep -q 'Max inline data : 220\[B\]' '$scratch/write_lat.out'"
r=$(row write_lat 2)
typ=$(echo "$r" | awk '{print $5}')
rc=$(builtin_run write_lat_b --tests=write --modes=lat --sizes=2 --iters=1000 --inline=220)
b=$(builtin write_lat_b write_lat t_p50_us)
check "ib_write_lat t_typical $typ us agrees with the built-in's p50 $b us" "agree '$typ' '$b'"

# --- ib_read_lat: 2-byte READ, 1000 iterations
rc=$(scenario read_lat 'program: ./ib_read_lat.so' 'program: ./ib_read_lat.so, args: [h0]')
check "ib_read_lat: both sides exit 0 (got $rc)" "[ $rc -eq 0 ] && grep -q 'RDMA_Read Latency Test' '$scratch/read_lat.out'"
typ=$(row read_lat 2 | awk '{print $5}')
rc=$(builtin_run read_lat_b --tests=read --modes=lat --sizes=2 --iters=1000)
b=$(builtin read_lat_b read_lat t_p50_us)
check "ib_read_lat t_typical $typ us agrees with the built-in's p50 $b us" "agree '$typ' '$b'"

# --- ib_write_bw: 64 KiB WRITEs, 5000 iterations, TX depth 128, CQ moderation 1
rc=$(scenario write_bw 'program: ./ib_write_bw.so' 'program: ./ib_write_bw.so, args: [h0]')
check "ib_write_bw: both sides exit 0 (got $rc)" "[ $rc -eq 0 ] && grep -q 'RDMA_Write BW Test' '$scratch/write_bw.out'"
r=$(row write_bw 65536)
mbs=$(echo "$r" | awk '{print $4}')
mpps=$(echo "$r" | awk '{print $5}')
rc=$(builtin_run write_bw_b --tests=write --modes=bw --sizes=65536 --bw-iters=5000 --cq-mod=1 --tx-depth=128)
b=$(builtin write_bw_b write_bw bw_gbps)
bm=$(builtin write_bw_b write_bw msg_rate_mpps)
gbps=$(mbs_gbps "$mbs")
check "ib_write_bw $mbs MB/s = $gbps Gb/s agrees with the built-in's $b Gb/s" "agree '$gbps' '$b'"
check "ib_write_bw message rate $mpps Mpps agrees with the built-in's $bm" "agree '$mpps' '$bm'"

# --- ib_send_bw: 64 KiB SENDs, 1000 iterations
rc=$(scenario send_bw 'program: ./ib_send_bw.so' 'program: ./ib_send_bw.so, args: [h0]')
check "ib_send_bw: both sides exit 0 (got $rc)" "[ $rc -eq 0 ] && grep -q 'Send BW Test' '$scratch/send_bw.out'"
mbs=$(row send_bw 65536 | awk '{print $4}')
rc=$(builtin_run send_bw_b --tests=send --modes=bw --sizes=65536 --bw-iters=1000 --cq-mod=1 --tx-depth=128)
b=$(builtin send_bw_b send_bw bw_gbps)
gbps=$(mbs_gbps "$mbs")
check "ib_send_bw $mbs MB/s = $gbps Gb/s agrees with the built-in's $b Gb/s" "agree '$gbps' '$b'"

# --- ib_read_bw: 64 KiB READs, 1000 iterations, 16 outstanding (the device's max_qp_rd_atom)
rc=$(scenario read_bw 'program: ./ib_read_bw.so' 'program: ./ib_read_bw.so, args: [h0]')
check "ib_read_bw: both sides exit 0 (got $rc)" "[ $rc -eq 0 ] && grep -q 'RDMA_Read BW Test' '$scratch/read_bw.out' && grep -q 'Outstand reads  : 16' '$scratch/read_bw.out'"
mbs=$(row read_bw 65536 | awk '{print $4}')
rc=$(builtin_run read_bw_b --tests=read --modes=bw --sizes=65536 --bw-iters=1000 --cq-mod=1 --tx-depth=128)
b=$(builtin read_bw_b read_bw bw_gbps)
gbps=$(mbs_gbps "$mbs")
check "ib_read_bw $mbs MB/s = $gbps Gb/s agrees with the built-in's $b Gb/s" "agree '$gbps' '$b'"

# --- ib_send_lat: 2-byte SEND ping-pong, 200 iterations, inline 236.  It
# posts the next SEND as soon as a message arrives; receives are topped up
# off that path (the built-in reposted first and read 7 % slow until it did
# the same)
rc=$(scenario send_lat 'program: ./ib_send_lat.so, args: [-n, "200"]' 'program: ./ib_send_lat.so, args: [-n, "200", h0]')
check "ib_send_lat: both sides exit 0 (got $rc)" "[ $rc -eq 0 ] && grep -q 'Send Latency Test' '$scratch/send_lat.out'"
typ=$(row send_lat 2 | awk '{print $5}')
rc=$(builtin_run send_lat_b --tests=send --modes=lat --sizes=2 --iters=200)
b=$(builtin send_lat_b send_lat t_p50_us)
check "ib_send_lat t_typical $typ us agrees with the built-in's p50 $b us" "agree '$typ' '$b'"

# --- ib_send_lat -c UD: the same over UD (address handle, Q_Key, a GRH in
# front of every receive; inline 188), against the built-in's --conn=UD
rc=$(scenario send_lat_ud 'program: ./ib_send_lat.so, args: [-c, UD, -n, "200"]' 'program: ./ib_send_lat.so, args: [-c, UD, -n, "200", h0]')
check "ib_send_lat -c UD: both sides exit 0 (got $rc)" "[ $rc -eq 0 ] && grep -q 'Connection type : UD' '$scratch/send_lat_ud.out'"
typ=$(row send_lat_ud 2 send_lat | awk '{print $5}')
rc=$(builtin_run send_lat_ud_b --tests=send --modes=lat --sizes=2 --iters=200 --conn=UD)
b=$(builtin send_lat_ud_b send_lat t_p50_us)
check "ib_send_lat -c UD t_typical $typ us agrees with the built-in's --conn=UD p50 $b us" "agree '$typ' '$b'"

# --- ib_atomic_lat: one FETCH_AND_ADD at a time, 200 iterations
rc=$(scenario atomic_lat 'program: ./ib_atomic_lat.so, args: [-n, "200"]' 'program: ./ib_atomic_lat.so, args: [-n, "200", h0]')
check "ib_atomic_lat: both sides exit 0 (got $rc)" "[ $rc -eq 0 ] && grep -q 'Atomic FETCH_AND_ADD Latency Test' '$scratch/atomic_lat.out'"
typ=$(row atomic_lat 8 | awk '{print $5}')
rc=$(builtin_run atomic_lat_b --tests=atomic --modes=lat --iters=200)
b=$(builtin atomic_lat_b atomic_lat t_p50_us)
check "ib_atomic_lat t_typical $typ us agrees with the built-in's p50 $b us" "agree '$typ' '$b'"

# --- ib_atomic_bw: perftest moves each FETCH_AND_ADD to the next cache line
# of its buffer; the built-in adds to one counter (so it can check every
# returned value), which the NIC's atomic unit serialises: perftest's rate
# is the higher one, at most 16 (max_rd_atomic) per round trip
rc=$(scenario atomic_bw 'program: ./ib_atomic_bw.so' 'program: ./ib_atomic_bw.so, args: [h0]')
check "ib_atomic_bw: both sides exit 0 (got $rc)" "[ $rc -eq 0 ] && grep -q 'Atomic FETCH_AND_ADD BW Test' '$scratch/atomic_bw.out'"
mpps=$(row atomic_bw 8 | awk '{print $5}')
rc=$(builtin_run atomic_bw_b --tests=atomic --modes=bw --bw-iters=1000)
bm=$(builtin atomic_bw_b atomic_bw msg_rate_mpps)
check "ib_atomic_bw $mpps Mpps: above the built-in's single-counter $bm, below 16 per atomic round trip ($typ us)" \
    "awk -v a='$mpps' -v b='$bm' -v l='$typ' 'BEGIN { exit !(a != \"\" && a > b && a <= 16 / l) }'"

# usual flags: sizes, iterations, more QPs
rc=$(scenario write_bw_q 'program: ./ib_write_bw.so, args: [-s, "4096", -n, "2000", -q, "2"]' \
    'program: ./ib_write_bw.so, args: [-s, "4096", -n, "2000", -q, "2", h0]')
check "ib_write_bw -s 4096 -n 2000 -q 2 exits 0 and reports 4000 4096-byte WRITEs (got $rc)" \
    "[ $rc -eq 0 ] && grep -q '^\[h1/ib_write_bw#1\]  *4096 *4000 ' '$scratch/write_bw_q.out'"

finish
