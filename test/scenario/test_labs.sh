#!/usr/bin/env bash
# Every answer key of the labs (docs/labs/*.md): test/scenario/labs_keys.py
# runs each lab's commands (its scenario under scenarios/labs/) and compares
# what rnicsim gives with every value of the lab's `keys` block; a key
# nothing checks, or a check whose key is missing, fails too.
# Args: rnicsim binary, source dir, scratch dir (test/scenario/lib.sh).
#
# Under ASan (ten times slower and more) only labs 1, 7 and 8 run, and the
# rest is checked for keys without computations or computations without keys.
set -u
. "$(dirname "$0")/lib.sh"
labs=()
if ldd "$bin" 2>/dev/null | grep -q libasan; then
    labs=(--only lab1,lab7,lab8)
    kout=$("$py" "$src/test/scenario/labs_keys.py" "$bin" "$src" "$scratch" --keys-only 2>&1)
    krc=$?
    echo "$kout"
    check "ASan build: every lab's keys and their checks correspond (got $krc)" "[ $krc -eq 0 ]"
fi
out=$("$py" "$src/test/scenario/labs_keys.py" "$bin" "$src" "$scratch" "${labs[@]}" 2>&1)
rc=$?
echo "$out"
check "labs_keys.py exits 0 (got $rc)" "[ $rc -eq 0 ]"
n=$(grep -c '^PASS lab' <<<"$out")
want=8
[ ${#labs[@]} -gt 0 ] && want=3
check "every lab run has checked keys ($n keys)" \
    "[ \$(grep -o '^PASS lab[0-9]' <<<\"\$out\" | sort -u | wc -l) -eq $want ]"
check "the lab scenarios all load (rnicsim run --set stop_time=1ns: exit 0 or 4)" '(
    for f in "$src"/scenarios/labs/*.yaml; do
        [ "$(basename "$f")" = hello.yaml ] && continue
        (cd "$scratch" && "$bin" run "$f" -q --set stop_time=1ns >/dev/null 2>&1)
        r=$?; [ $r -eq 0 ] || [ $r -eq 4 ] || { echo "$f: exit $r"; exit 1; }
    done)'
finish
