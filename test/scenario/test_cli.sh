#!/usr/bin/env bash
# The other subcommands: params (table of every hardware parameter, with a
# profile's values), programs, help/version, usage errors, and a short bench.
# Args: rnicsim binary, source dir, scratch dir (test/scenario/lib.sh).
set -u
. "$(dirname "$0")/lib.sh"

"$bin" params --profile cx5-100g >"$scratch/params.txt" 2>&1
rc=$?
check "params --profile cx5-100g exits 0 (got $rc)" "[ $rc -eq 0 ]"
check "params: PCIe Gen3 x16 in the profile" \
    "grep -Eq '^pcie.gen +count +3 ' '$scratch/params.txt' && grep -Eq '^pcie.lanes +count +16 ' '$scratch/params.txt'"
check "params: host.cpu.post_send is a time" "grep -Eq '^host.cpu.post_send +time +[0-9]+(ps|ns|us)' '$scratch/params.txt'"
"$bin" params --markdown >"$scratch/params.md" 2>&1
check "params --markdown: one table row per parameter (>= 30)" \
    "[ \$(grep -c '^| \`' '$scratch/params.md') -ge 30 ]"
"$bin" params --profile cx5-10g >/dev/null 2>"$scratch/badprof.err"
rc=$?
check "params with an unknown profile: exit 2 with a suggestion" \
    "[ $rc -eq 2 ] && grep -q \"did you mean 'cx5-100g'\" '$scratch/badprof.err'"

# Every profile parameter is a known key (the profile loads strictly) and
# every parameter of the table is set by the profile file, with a comment.
# The same for every shipped profile, and each one loads.
for prof in cx5-100g cx3-fdr56 cx6-200g efa-srd 1rma; do
    for key in $(awk '/^\| `/ {gsub(/`/, "", $2); print $2}' "$scratch/params.md"); do
        grep -q "^  $key: .*# " "$src/profiles/$prof.yaml" || bad "profile $prof lacks a cited value for $key"
    done
    check "profile $prof loads" "'$bin' params --profile $prof >/dev/null"
done
ok "profiles set every parameter with a comment (missing ones are listed above)"

"$bin" programs >"$scratch/programs.txt"
check "programs lists perftest" "grep -q '^  perftest ' '$scratch/programs.txt'"
"$bin" --help >/dev/null
check "--help exits 0" "[ $? -eq 0 ]"
"$bin" --version | grep -q '^rnicsim 0.1'
check "--version prints 0.1" "[ $? -eq 0 ]"
"$bin" frobnicate >/dev/null 2>&1
check "unknown command exits 2" "[ $? -eq 2 ]"
"$bin" run >/dev/null 2>&1
check "run without a file exits 2" "[ $? -eq 2 ]"
"$bin" run "$src/scenarios/examples/small.yaml" --bogus >/dev/null 2>&1
check "run with an unknown option exits 2" "[ $? -eq 2 ]"
"$bin" run "$scratch/does-not-exist.yaml" >/dev/null 2>"$scratch/nofile.err"
rc=$?
check "missing scenario file: exit 2 with the file name" \
    "[ $rc -eq 2 ] && grep -q 'does-not-exist.yaml' '$scratch/nofile.err'"

# the quick ones (the permutations take seconds, minutes under ASan: one
# small check of their columns follows)
timeout 300 "$bin" bench --reps 1 --only hold,write --json "$scratch/bench.json" >"$scratch/bench.txt" 2>&1
rc=$?
check "bench --reps 1 exits 0 (got $rc)" "[ $rc -eq 0 ]"
check "bench JSON: three benchmarks with positive rates, streams sent packets" "/usr/bin/python3 - '$scratch/bench.json' <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
b = d['benchmarks']
assert len(b) == 3, b
assert all(x['events_per_s'] > 0 and x['wall_s'] > 0 for x in b), b
assert b[1]['sim_pkts'] > 0 and b[2]['sim_pkts'] > 0, b
PY"
cat "$scratch/bench.txt"
out=$("$bin" bench --reps 1 --only nothing-matches 2>&1); rc=$?
check "bench --only with no match prints only the header" "[ $rc -eq 0 ] && [ \$(echo \"$out\" | wc -l) -eq 1 ]"

finish
