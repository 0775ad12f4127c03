#!/usr/bin/env bash
# Deadlock detection: two programs each wait for an out-of-band key that
# nobody puts.  The run must exit 3, print "deadlock at <time>:" and name
# both blocked programs and what they wait for; the JSON says "deadlock".
# Args: rnicsim binary, source dir, scratch dir (test/scenario/lib.sh).
set -u
. "$(dirname "$0")/lib.sh"

timeout 60 "$bin" run "$src/scenarios/examples/deadlock.yaml" -o "$scratch/d.json" \
    >"$scratch/d.out" 2>"$scratch/d.err"
rc=$?
check "exit status 3 (got $rc)" "[ $rc -eq 3 ]"
check "stderr: 'deadlock at <time>:'" "grep -Eq '^deadlock at [0-9.]+ (ns|us|ms|s):' '$scratch/d.err'"
check "report names the server program on h1" "grep -q 'h1/perftest#0' '$scratch/d.err'"
check "report names the client program on h0" "grep -q 'h0/perftest#1' '$scratch/d.err'"
check "report says the server waits for alpha/client" \
    "grep 'h1/perftest#0' '$scratch/d.err' | grep -q 'host_oob_get(\"alpha/client\")'"
check "report says the client waits for beta/server" \
    "grep 'h0/perftest#1' '$scratch/d.err' | grep -q 'host_oob_get(\"beta/server\")'"
check "JSON: result deadlock, both programs unfinished" "$py - '$scratch/d.json' <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d['result'] == 'deadlock', d['result']
assert [p['finished'] for p in d['programs']] == [False, False]
assert [p['exit_code'] for p in d['programs']] == [None, None]
PY"

# A daemon that waits forever does not count as a deadlock.
timeout 60 "$bin" run "$src/scenarios/examples/deadlock.yaml" -o "$scratch/e.json" \
    --set programs.0.daemon=true --set programs.1.daemon=true >/dev/null 2>"$scratch/e.err"
rc=$?
check "both programs daemons: exit 0 (got $rc)" "[ $rc -eq 0 ]"
check "both programs daemons: no deadlock report" "! grep -q deadlock '$scratch/e.err'"

finish
