#!/usr/bin/env bash
# A user program as a shared object: compile docs/examples/hello_write.c
# with `cc -shared -fPIC -I<src>/include`, place it on two hosts (the path
# relative to the scenario file), run, and check the message arrived and
# the run is recorded.  Also: a shared object without `main` is refused.
# Args: rnicsim binary, source dir, scratch dir (test/scenario/lib.sh).
set -u
. "$(dirname "$0")/lib.sh"
mkdir -p "$scratch/progs" "$scratch/scn"

if cc -shared -fPIC -Wall -Wextra -I"$src/include" "$src/docs/examples/hello_write.c" \
    -o "$scratch/progs/hello_write.so" 2>"$scratch/cc.err"; then
    ok "hello_write.c compiles as a shared object"
else
    bad "hello_write.c compiles as a shared object"
    cat "$scratch/cc.err"
fi

cat >"$scratch/scn/hello.yaml" <<'YAML'
name: hello
profile: cx5-100g
topology:
  kind: star
  hosts: 3
  link: {rate: 100Gbps, delay: 10ns}
programs:
  - {host: h2, program: ../progs/hello_write.so, args: [--server]}
  - {host: h0, program: ../progs/hello_write.so, args: [--client]}
YAML

(cd "$scratch" && timeout 60 "$bin" run scn/hello.yaml -o hello.json) >"$scratch/hello.out" 2>"$scratch/hello.err"
rc=$?
check "run exits 0 (got $rc)" "[ $rc -eq 0 ]"
check "server on h2 printed the client's message" \
    "grep -q 'server h2 received: \"hello from h0\"' '$scratch/hello.out'"
check "client saw a successful completion" "grep -q 'client: write success' '$scratch/hello.out'"
check "JSON: done, both exit 0, program path as written, packets crossed the switch" "$py - '$scratch/hello.json' <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d['result'] == 'done', d['result']
assert [p['exit_code'] for p in d['programs']] == [0, 0]
assert [p['host'] for p in d['programs']] == ['h2', 'h0']
assert d['programs'][0]['program'] == '../progs/hello_write.so'
assert d['counters']['hosts']['h0']['nic']['pkts_tx'] >= 1
assert d['counters']['hosts']['h1']['nic']['pkts_tx'] == 0
assert sum(s['pkts_forwarded'] for s in d['counters']['switches'].values()) >= 2
PY"
check "stderr is empty" "[ ! -s '$scratch/hello.err' ] || { cat '$scratch/hello.err'; false; }"

# Two runs of the shared object are identical too.
(cd "$scratch" && timeout 60 "$bin" run scn/hello.yaml -o hello2.json --quiet) >/dev/null 2>&1
check "user program run is deterministic" "cmp -s '$scratch/hello.json' '$scratch/hello2.json'"

# An object without main() is refused before anything runs.
echo 'int not_main(void) { return 0; }' >"$scratch/progs/nomain.c"
cc -shared -fPIC "$scratch/progs/nomain.c" -o "$scratch/progs/nomain.so"
sed 's#\.\./progs/hello_write\.so#../progs/nomain.so#' "$scratch/scn/hello.yaml" >"$scratch/scn/nomain.yaml"
(cd "$scratch" && timeout 60 "$bin" run scn/nomain.yaml) >/dev/null 2>"$scratch/nomain.err"
rc=$?
check "object without main: exit 2 (got $rc)" "[ $rc -eq 2 ]"
check "object without main: positioned message" \
    "grep -q \"^scn/nomain.yaml:8:25: program '../progs/nomain.so': .* has no exported function 'main'\" '$scratch/nomain.err'"

finish
