#!/usr/bin/env bash
# The figures of docs/emulation.md "Measured": round trip of a 2-byte
# ping-pong and message rates of Debian's binaries over `rnicsim emulate`,
# each run REPS times (median printed), and the daemon's pacing report.
#   tools/emu_measure.sh [BUILD_DIR] [REPS]
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$here/build}
reps=${2:-3}
work=$(mktemp -d)
trap 'kill $dpid 2>/dev/null || true; rm -rf "$work"' EXIT
export RNICSIM_SOCKET="$work/sock/rnicsimd.sock" LD_LIBRARY_PATH="$build/emu"
"$build/rnicsim" emulate "$here/scenarios/emulation/pair.yaml" >"$work/daemon.log" 2>&1 &
dpid=$!
for _ in $(seq 100); do [ -S "$RNICSIM_SOCKET" ] && break; sleep 0.1; done
port=20000
run() { # run PROGRAM ARGS...: server on h0, client on h1; the client's output
    port=$((port + 1))
    RNICSIM_HOST=h0 "$@" -p "$port" >/dev/null 2>&1 &
    local s=$!
    sleep 0.3
    RNICSIM_HOST=h1 "$@" -p "$port" localhost 2>&1
    wait "$s"
}
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
measure() { # measure LABEL AWK-EXTRACT PROGRAM ARGS...
    local label=$1 extract=$2
    shift 2
    local v
    v=$(for _ in $(seq "$reps"); do run "$@" | awk "$extract"; done | median)
    printf '%-58s %s\n' "$label ($*)" "$v"
}
measure "rc_pingpong 2 B, polling: round trip [us]" '/usec\/iter/ {print $(NF-1)}' \
    ibv_rc_pingpong -s 2 -n 5000
measure "rc_pingpong 2 B, -e events: round trip [us]" '/usec\/iter/ {print $(NF-1)}' \
    ibv_rc_pingpong -e -s 2 -n 5000
measure "ib_write_lat 2 B: typical one-way (RTT/2) [us]" '$1 == 2 && NF >= 9 {print $5}' \
    ib_write_lat -s 2 -n 5000
measure "ib_send_lat 2 B: typical one-way (RTT/2) [us]" '$1 == 2 && NF >= 9 {print $5}' \
    ib_send_lat -s 2 -n 5000
measure "ib_write_bw 2 B: message rate [M msg/s]" '$1 == 2 && NF == 5 {print $5}' \
    ib_write_bw -s 2 -n 100000
measure "ib_send_bw 2 B: message rate [M msg/s]" '$1 == 2 && NF == 5 {print $5}' \
    ib_send_bw -s 2 -n 100000
measure "ib_write_bw 64 KiB: bandwidth [MB/s]" '$1 == 65536 && NF == 5 {print $4}' \
    ib_write_bw -s 65536 -n 2000
kill -INT "$dpid"
wait "$dpid" || true
grep "rnicsimd: pacing" "$work/daemon.log"
