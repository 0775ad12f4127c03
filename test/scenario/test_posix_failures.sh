#!/usr/bin/env bash
# Foreign programs fail loudly (posix/guard.c, fd.c, tcp.c, prog.c): each
# way test/scenario/programs/crash.c can go wrong, with the message the run
# must print and its exit status.
#   segv      "crashed at simulated time ...: SIGSEGV", the frame crash_here at
#             crash.c, output printed before the crash, status 1
#   abort     the assert's own message (labelled), SIGABRT, frame main, status 1
#   overflow  SIGSEGV + "this looks like a stack overflow", the recursion
#             shown once with a repeat count, status 1
#   spin      (--watchdog 1) "has run for 1 s of real time without entering
#             the simulator", the loop's line, what to do, status 1
#   wait      a loop on memory nothing writes: parked, the run ends as a
#             deadlock naming the loop's line, status 3
#   refuse    fork, connect to 8.8.8.8, getaddrinfo of a real name, read of
#             an empty pipe: each refused with a message naming the program,
#             the program sees the errno and goes on, status 0
# Args: rnicsim binary, source dir, scratch dir (test/scenario/lib.sh).
set -u
. "$(dirname "$0")/lib.sh"
cc="$(dirname "$bin")/rnicsim-cc"
mkdir -p "$scratch"
"$cc" -O1 -Wall -o "$scratch/crash.so" "$src/test/scenario/programs/crash.c" 2>"$scratch/cc.err" ||
    { bad "rnicsim-cc builds crash.c"; cat "$scratch/cc.err"; }

run_case() { # name [rnicsim options...]
    local name=$1
    shift
    write_scenario "$name" <<YAML
name: $name
profile: cx5-100g
topology: {kind: star, hosts: 2, link: {rate: 100Gbps, delay: 10ns}}
programs:
  - {host: h0, program: ./crash.so, args: [$name]}
YAML
    run_timeout=60 run_scenario "$name" "$@"
    echo $?
}

rc=$(run_case segv)
e="$scratch/segv.err"
check "segv: exit status 1 (got $rc)" "[ $rc -eq 1 ]"
check "segv: names program, host, simulated time, signal" \
    "grep -q '^rnicsim: program h0/crash#0 (./crash.so) on host h0 crashed at simulated time [0-9.]* [num]*s: SIGSEGV, invalid memory access at address (nil)' '$e'"
check "segv: backtrace down to the faulting line" \
    "grep -q '#0  ./crash.so+0x[0-9a-f]*  crash_here at .*crash.c:[0-9]*' '$e' && grep -q 'main at .*crash.c' '$e'"
check "segv: what the program printed before is there" \
    "grep -q '^\[h0/crash#0\] segv: before the failure$' '$scratch/segv.out'"

rc=$(run_case abort)
e="$scratch/abort.err"
check "abort: exit status 1 (got $rc)" "[ $rc -eq 1 ]"
check "abort: the assert's message, as the program's" \
    "grep -q \"^\[h0/crash#0\] crash.so: .*crash.c:[0-9]*: main: Assertion \\\`flag == 1' failed.\" '$e'"
check "abort: SIGABRT reported with the frame of main" \
    "grep -q 'crashed at simulated time .*: SIGABRT, abort() was called' '$e' && grep -q 'crash.so+0x[0-9a-f]*  main at .*crash.c' '$e'"

rc=$(run_case overflow)
e="$scratch/overflow.err"
check "overflow: exit status 1 (got $rc)" "[ $rc -eq 1 ]"
check "overflow: SIGSEGV with the stack-overflow hint" \
    "grep -q ': SIGSEGV, ' '$e' && grep -q 'this looks like a stack overflow: give the program a larger stack' '$e'"
check "overflow: the recursion shown once with a repeat count" \
    "grep -q 'recurse at .*crash.c' '$e' && grep -q '\.\.\. the frame above [0-9]* more times' '$e' && [ \$(grep -c recurse '$e') -le 3 ]"

rc=$(run_case spin --watchdog 1)
e="$scratch/spin.err"
check "spin: exit status 1 (got $rc)" "[ $rc -eq 1 ]"
check "spin: the watchdog names the program and where it spins" \
    "grep -q '^rnicsim: program h0/crash#0 on host h0 has run for [0-9]* s of real time without entering the simulator' '$e' && grep -q 'spin_here at .*crash.c:[0-9]*' '$e'"
check "spin: says what to do" \
    "grep -q 'must call something that lets simulated time pass' '$e' && grep -q 'rnicsim run --watchdog SECONDS' '$e'"

rc=$(run_case wait)
e="$scratch/wait.err"
check "wait: a deadlock, exit status 3 (got $rc)" "[ $rc -eq 3 ]"
check "wait: the loop is named with its source line" \
    "grep -q '^  h0/crash#0: spinning at crash.so+0x[0-9a-f]* without calls into rnicsim' '$e' && grep -q 'rnicsim: h0/crash#0 spins at ./crash.so+0x[0-9a-f]*: wait_here at .*crash.c:[0-9]*.*nothing will write' '$e'"

rc=$(run_case refuse)
e="$scratch/refuse.err"
check "refuse: the program goes on and exits 0 (got $rc)" "[ $rc -eq 0 ]"
check "refuse: fork" \
    "grep -q '^rnicsim: h0/crash#0: fork() refused: a simulated program cannot start real processes' '$e'"
check "refuse: a real address" \
    "grep -q '^rnicsim: h0/crash#0: connect(8.8.8.8:53) refused: not an address of a simulated host' '$e'"
check "refuse: a name there is no DNS for" \
    "grep -q '^rnicsim: h0/crash#0: getaddrinfo(\"www.example.com\"): not a host of this scenario' '$e'"
check "refuse: a read that would block the simulator" \
    "grep -q '^rnicsim: h0/crash#0: read() on fd [0-9]* (a pipe) would block the whole simulator' '$e'"
check "refuse: the program saw the errnos it expected" \
    "grep -q '^\[h0/crash#0\] refusals as expected$' '$scratch/refuse.out'"

finish
