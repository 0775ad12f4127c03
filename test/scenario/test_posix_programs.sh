#!/usr/bin/env bash
# Simulated POSIX (posix/): a plain program built with rnicsim-cc --
# sockets between hosts by name, clock_gettime, usleep, pthreads (mutex,
# condition variable, join), getopt_long, atexit, exit() from a thread --
# gives the same answers in simulated time at every run, each program's
# output labelled with its host and instance.  Numbers checked: the TCP
# handshake and echo round trip follow host.mgmt.latency (25 us one way),
# usleep(250) takes 250 us (+ one system call), exit(7) in a thread ends
# its program with status 7 while the others finish.
# Args: rnicsim binary, source dir, scratch dir (test/scenario/lib.sh).
set -u
. "$(dirname "$0")/lib.sh"
cc="$(dirname "$bin")/rnicsim-cc"
mkdir -p "$scratch"
if "$cc" -O2 -Wall -Wextra -Werror -o "$scratch/posix_probe.so" "$src/test/scenario/programs/posix_probe.c" \
    2>"$scratch/cc.err"; then
    ok "rnicsim-cc builds posix_probe.c"
else
    bad "rnicsim-cc builds posix_probe.c"
    cat "$scratch/cc.err"
fi
check "the plug-in's libc calls are redirected (no real pthread_create, socket, clock_gettime)" \
    "nm -D '$scratch/posix_probe.so' | grep -q ' U __wrap_socket' && nm -D '$scratch/posix_probe.so' | grep -q ' U __wrap_clock_gettime' && ! nm -D '$scratch/posix_probe.so' | grep -q ' U pthread_create'"

# --keep-going: h1 exits 7 on purpose (exit() from a thread); the others run on
cat >"$scratch/probe.yaml" <<'YAML'
name: probe
profile: cx5-100g
topology: {kind: star, hosts: 3, link: {rate: 100Gbps, delay: 10ns}}
programs:
  - {host: h2, program: ./posix_probe.so, args: [--server, -p, "7000"]}
  - {host: h0, program: ./posix_probe.so, args: [--client, --port=7000, h2]}
  - {host: h1, program: ./posix_probe.so, args: [--exit-from-thread]}
YAML
(cd "$scratch" && timeout 60 "$bin" run probe.yaml --keep-going -o probe.json >probe.out 2>probe.err)
rc=$?
check "run exits 1: one program exited non-zero (got $rc)" "[ $rc -eq 1 ]"
out="$scratch/probe.out"
check "server echoed 5 messages, labelled [h2/posix_probe#0]" \
    "grep -q '^\[h2/posix_probe#0\] server: echoed 5 messages, then the client closed$' '$out'"
check "connect took one round trip: 2 x 25 us + serialisation + system calls (50..52 us)" \
    "grep -Eq '^\[h0/posix_probe#1\] client: connected after 5[01][0-9]{3} ns$' '$out'"
check "echo of 64 bytes: one round trip (50..52 us)" \
    "grep -Eq '^\[h0/posix_probe#1\] client: echo round trip 5[01][0-9]{3} ns$' '$out'"
check "usleep(250) took 250 us and a system call" \
    "grep -q '^\[h0/posix_probe#1\] client: usleep(250) took 250[0-9][0-9][0-9] ns$' '$out'"
check "pthread_join returned the thread's value" \
    "grep -q 'client: thread returned its argument + 1' '$out'"
check "atexit handler ran at the end of main" "grep -q 'client: atexit handler ran' '$out'"
check "exit(7) from a thread ended that program (main never resumed)" \
    "grep -q 'exiter: calling exit(7)' '$out' && ! grep -q 'main: not reached' '$out'"
check "JSON: exit codes 0, 0, 7" "$py - '$scratch/probe.json' <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert [p['exit_code'] for p in d['programs']] == [0, 0, 7], d['programs']
PY"
check "stderr names the failed program" \
    "grep -q \"program './posix_probe.so' on h1 (programs\[2\]) exited with status 7\" '$scratch/probe.err'"

# Deterministic: results and output identical at every run.
(cd "$scratch" && timeout 60 "$bin" run probe.yaml --keep-going -o probe2.json >probe2.out 2>/dev/null)
check "two runs: identical JSON" "cmp -s '$scratch/probe.json' '$scratch/probe2.json'"
check "two runs: identical program output" \
    "diff <(grep '^\[' '$scratch/probe.out') <(grep '^\[' '$scratch/probe2.out') >/dev/null"

# The management network's latency is a parameter (hardware: host.mgmt.latency).
(cd "$scratch" && timeout 60 "$bin" run probe.yaml --keep-going --set hardware.host.mgmt.latency=5us >lat.out 2>/dev/null)
check "host.mgmt.latency=5us: echo round trip ~10 us" \
    "grep -Eq 'client: echo round trip 1[01][0-9]{3} ns$' '$scratch/lat.out'"

# No listener: a real TCP stack refuses the connection (ECONNREFUSED).
cat >"$scratch/refused.yaml" <<'YAML'
name: refused
profile: cx5-100g
topology: {kind: star, hosts: 2, link: {rate: 100Gbps, delay: 10ns}}
programs:
  - {host: h0, program: ./posix_probe.so, args: [--client, h1]}
YAML
(cd "$scratch" && timeout 60 "$bin" run refused.yaml -q >refused.out 2>&1)
check "connect to a port nobody listens on: Connection refused" \
    "grep -q 'connect: Connection refused' '$scratch/refused.out'"

finish
