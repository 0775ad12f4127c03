#!/usr/bin/env bash
# Scenario variables: vars: with ${name} in program host/program/args, $$
# as a literal $, --set vars.NAME overrides, the effective values in the
# results JSON, and the errors: an undefined ${x} at the arg's
# file:line:col, a --set of a variable the file does not define.
# Args: rnicsim binary, source dir, scratch dir (test/scenario/lib.sh).
set -u
. "$(dirname "$0")/lib.sh"

cat >"$scratch/v.yaml" <<'YAML'
name: vars
seed: 3
stop_time: 1s
vars:
  size: 64
  iters: 10
  srv: h1
topology: {kind: back-to-back, hosts: 2, link: {rate: 100Gbps, delay: 10ns}}
programs:
  - {host: "${srv}", program: perftest, args: [--server, --tests=write, --modes=lat, "--sizes=${size}", "--iters=${iters}", "--name=p$$q"]}
  - {host: h0, program: perftest, args: [--client, --tests=write, --modes=lat, "--sizes=${size}", "--iters=${iters}", "--name=p$$q"]}
YAML
cd "$scratch" || exit 1

timeout 30 "$bin" run v.yaml -q -o v.json --set vars.size=4096 >v.out 2>v.err
rc=$?
check "run with vars and --set vars.size=4096 exits 0 (got $rc)" "[ $rc -eq 0 ]"
check "results: vars recorded with the override, args expanded, \$\$ -> \$" "$py - v.json <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d['vars'] == {'size': '4096', 'iters': '10', 'srv': 'h1'}, d['vars']
p = d['programs']
assert p[0]['host'] == 'h1', p[0]
assert p[0]['args'] == ['--server', '--tests=write', '--modes=lat', '--sizes=4096', '--iters=10', '--name=p\$q'], p[0]['args']
rows = d['tables']['write_lat']
assert len(rows) == 1 and rows[0]['size_bytes'] == 4096 and rows[0]['iters'] == 10, rows
PY"

timeout 30 "$bin" run v.yaml -q -o v0.json >/dev/null 2>&1
check "without --set the file's value is used (size 64)" \
    "$py -c 'import json,sys; d=json.load(open(\"v0.json\")); assert d[\"tables\"][\"write_lat\"][0][\"size_bytes\"] == 64 and d[\"vars\"][\"size\"] == \"64\"'"

# An undefined variable: error at the arg (line 10, the column of the item).
sed 's/{iters}/{itres}/' v.yaml >u.yaml
timeout 30 "$bin" run u.yaml -q >u.out 2>u.err
rc=$?
col=$(awk 'NR==10 { print index($0, "\"--iters=${itres}\"") }' u.yaml)
check "undefined \${itres}: exit 2 at u.yaml:10:$col with a suggestion (got $rc: $(head -c 200 u.err))" \
    "[ $rc -eq 2 ] && grep -qF \"u.yaml:10:$col: 'programs[0].args[4]': undefined variable '\\\${itres}' (did you mean 'iters'?)\" u.err"
check "undefined variable: nothing ran (no output)" "[ ! -s u.out ]"

timeout 30 "$bin" run v.yaml -q --set vars.sise=1 >/dev/null 2>s.err
rc=$?
check "--set of an undefined variable: exit 2, positioned, with a suggestion" \
    "[ $rc -eq 2 ] && grep -qF -- \"--set:1:6: unknown variable 'vars.sise' (did you mean 'size'?)\" s.err"

sed '/^vars:/,/^  srv:/d; s/\${srv}/h1/; s/\${size}/64/g; s/\${iters}/10/g' v.yaml >n.yaml
timeout 30 "$bin" run n.yaml -q --set vars.size=1 >/dev/null 2>n.err
rc=$?
check "--set vars.X on a file without vars: exit 2 (got $rc: $(cat n.err))" \
    "[ $rc -eq 2 ] && grep -q \"unknown variable 'vars.size'\" n.err"

sed 's/"--iters=${iters}"/"--iters=${iters"/' v.yaml >t.yaml
timeout 30 "$bin" run t.yaml -q >/dev/null 2>t.err
rc=$?
check "unterminated \${: exit 2 at t.yaml:10 (got $rc: $(cat t.err))" \
    "[ $rc -eq 2 ] && grep -q \"^t.yaml:10:[0-9]*: .*unterminated\" t.err"

printf 'vars: {1x: 2}\n' | cat - n.yaml >b.yaml
timeout 30 "$bin" run b.yaml -q >/dev/null 2>b.err
rc=$?
check "bad variable name: exit 2 at b.yaml:1:8" "[ $rc -eq 2 ] && grep -q \"^b.yaml:1:8: bad variable name '1x'\" b.err"

finish
