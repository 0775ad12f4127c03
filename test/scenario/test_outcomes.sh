#!/usr/bin/env bash
# Run outcomes other than success and deadlock: a program that fails
# (exit 1, named on stderr) and a run cut by stop_time (exit 4).  The JSON
# is written in both cases and names the outcome.
# Args: rnicsim binary, source dir, scratch dir (test/scenario/lib.sh).
set -u
. "$(dirname "$0")/lib.sh"
scn="$src/scenarios/examples/small.yaml"
result() { $py -c 'import json,sys; print(json.load(open(sys.argv[1]))["result"])' "$1" 2>/dev/null; }

# perftest refuses bad options with status 1, so both programs fail; with
# --keep-going both run to their end and both are named.
timeout 60 "$bin" run "$scn" --keep-going -o "$scratch/f.json" \
    --set 'programs.1.args=[--client, --sizes=bogus]' \
    --set 'programs.0.args=[--server, --sizes=bogus]' >/dev/null 2>"$scratch/f.err"
rc=$?
check "failing program: exit 1 (got $rc)" "[ $rc -eq 1 ]"
check "failing program: named on stderr" \
    "grep -q \"program 'perftest' on h0 (programs\\[1\\]) exited with status 1\" '$scratch/f.err'"
check "failing program: JSON result program-failed" "[ \"\$(result '$scratch/f.json')\" = program-failed ]"
# Without --keep-going (the default) the run stops at the first failure:
# the server fails at once, the client never starts.
timeout 60 "$bin" run "$scn" -o "$scratch/ff.json" --set 'programs.0.args=[--server, --sizes=bogus]' \
    >/dev/null 2>"$scratch/ff.err"
rc=$?
check "fail-fast: exit 1 (got $rc)" "[ $rc -eq 1 ]"
check "fail-fast: the failed program, its status and the stop are named" \
    "grep -q \"program 'perftest' on h1 (programs\\[0\\]) exited with status 1 at 0.000 ns\" '$scratch/ff.err' && grep -q 'the run was stopped at 0.000 ns, when h1/perftest#0 failed' '$scratch/ff.err' && grep -q 'h0/perftest#1' '$scratch/ff.err'"
check "fail-fast: the client never finished (JSON)" "$py - '$scratch/ff.json' <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d['result'] == 'program-failed'
assert d['programs'][1]['finished'] is False and d['programs'][1]['exit_code'] is None
PY"

# stop_time far too short for the workload.
timeout 60 "$bin" run "$scn" -o "$scratch/t.json" --set stop_time=2us >/dev/null 2>"$scratch/t.err"
rc=$?
check "time limit: exit 4 (got $rc)" "[ $rc -eq 4 ]"
check "time limit: stderr says so" "grep -q 'stop_time 2.000 us reached' '$scratch/t.err'"
check "time limit: suggests a longer stop_time that parses" \
    "grep -q 'add --set stop_time=4.000us' '$scratch/t.err' && timeout 60 '$bin' run '$scn' --set stop_time=4.000us -q >/dev/null 2>&1; [ \$? -eq 4 ]"
check "time limit: JSON result time-limit, sim_time <= 2 us" "$py - '$scratch/t.json' <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d['result'] == 'time-limit', d['result']
assert d['sim_time_ps'] <= 2000000, d['sim_time_ps']
PY"

# Unwritable output: refused before anything runs (exit 2).
timeout 60 "$bin" run "$scn" -o "$scratch/no/such/dir/x.json" --quiet >/dev/null 2>"$scratch/w.err"
rc=$?
check "unwritable -o: exit 2 (got $rc) with a message" "[ $rc -eq 2 ] && grep -q \"rnicsim run: -o: cannot create '$scratch/no/such/dir/x.json': directory '$scratch/no/such/dir' does not exist\" '$scratch/w.err'"

finish
