#!/usr/bin/env bash
# rnicsim validate (tools/rnicsim/validate.c, validation/points.yaml,
# docs/validation.md):
#  1. the quick points: exit 0, one line per quick point with published,
#     simulated, ratio and a verdict, nothing outside its tolerance;
#  2. --only one point and --doc: the page, its CSV (and plots when
#     matplotlib is there) are written and name the point and its source;
#  3. a point whose published value the model misses (a copy of a point
#     with the value doubled): exit 1, verdict OUT; the same with a
#     `limit:` reason: exit 0, verdict limit;
#  4. bad input: an unknown key gives file:line:col and exit 2; an unknown
#     --only id exit 2.
# Args: rnicsim binary, source dir, scratch dir (test/scenario/lib.sh).
set -u
. "$(dirname "$0")/lib.sh"
srcdir=$(cd "$src" && pwd)
pts="$srcdir/validation/points.yaml"

# ---- 1. quick points
timeout 300 "$bin" validate --points "$pts" -o "$scratch/q" >"$scratch/q.out" 2>"$scratch/q.err"
rc=$?
check "quick: exit 0 (got $rc)" "[ $rc -eq 0 ]"
nquick=$($py -c "
import re,sys
t=open('$pts').read()
print(len(re.findall(r'^    quick: true', t, re.M)))")
nlines=$(grep -cE ' (ok|limit)( \(fitted\))?$' "$scratch/q.out")
check "quick: one verdict line per quick point ($nquick, got $nlines)" "[ $nquick -gt 5 ] && [ $nlines -eq $nquick ]"
check "quick: nothing OUT or in error" "! grep -qE '  (OUT|error)(:|\$)' '$scratch/q.out'"

# ---- 2. --only and --doc
timeout 120 "$bin" validate --points "$pts" --only rate-cx5-write-2b-doorbell -o "$scratch/o" \
    --doc "$scratch/doc/validation.md" >"$scratch/o.out" 2>&1
rc=$?
check "--only --doc: exit 0 (got $rc), the page names the point and its source" \
    "[ $rc -eq 0 ] && grep -q 'rate-cx5-write-2b-doorbell' '$scratch/doc/validation.md' && grep -q 'perftest issue 132' '$scratch/doc/validation.md' && [ -s '$scratch/doc/validation/validation.csv' ]"
if $py -c 'import matplotlib' 2>/dev/null; then
    check "--doc: ratios.png written" "[ -s '$scratch/doc/validation/ratios.png' ]"
fi

# ---- 3. a missed point fails; a known limit does not
mk() { # NAME PUBLISHED [LIMIT]
    {
        echo "points:"
        echo "  - id: miss"
        echo "    category: msg-rate"
        echo "    hardware: test"
        echo "    source: test"
        echo "    scenario: $srcdir/validation/scenarios/perftest.yaml"
        echo "    set: [vars.test=write, vars.mode=bw, vars.size=2]"
        echo "    metric: write_bw.msg_rate_mpps"
        echo "    published: $2"
        [ -n "${3:-}" ] && echo "    limit: \"$3\""
    } >"$scratch/$1.yaml"
}
mk miss 5.28
timeout 120 "$bin" validate --points "$scratch/miss.yaml" --full -o "$scratch/m" >"$scratch/m.out" 2>&1
rc=$?
check "a point 2x off: exit 1 (got $rc), verdict OUT, ratio ~0.5" \
    "[ $rc -eq 1 ] && grep -qE '^miss .* 0\.50[0-9] +15% +OUT' '$scratch/m.out'"
mk lim 5.28 "a test limit"
timeout 120 "$bin" validate --points "$scratch/lim.yaml" --full -o "$scratch/l" >"$scratch/l.out" 2>&1
rc=$?
check "the same as a known limit: exit 0 (got $rc), verdict limit" \
    "[ $rc -eq 0 ] && grep -qE '^miss .* limit' '$scratch/l.out'"

# ---- 4. bad input
sed 's/    metric:/    metrc:/' "$scratch/miss.yaml" >"$scratch/bad.yaml"
timeout 30 "$bin" validate --points "$scratch/bad.yaml" -o "$scratch/b" >"$scratch/b.out" 2>&1
rc=$?
check "unknown key: exit 2 (got $rc), file:line:col" \
    "[ $rc -eq 2 ] && grep -qE 'bad.yaml:[0-9]+:[0-9]+: ' '$scratch/b.out'"
timeout 30 "$bin" validate --points "$pts" --only no-such-point -o "$scratch/n" >"$scratch/n.out" 2>&1
rc=$?
check "--only no-such-point: exit 2 (got $rc)" "[ $rc -eq 2 ]"
finish
