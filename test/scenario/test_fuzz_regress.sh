#!/usr/bin/env bash
# The fuzzers' regression inputs (test/fuzz/regress/<target>/, one file per
# finding, named for it) and seeds, replayed through the fuzz targets built
# as plain programs (fuzz_replay_<target>, tools/fuzz/fuzz_input.c): each
# must be refused with a positioned error or load, build and run without a
# crash, a hang or (in the ASan build) a sanitizer report.
source "$(dirname "$0")/lib.sh"
dir=$(dirname "$bin")
for t in scenario set json; do
    replay="$dir/fuzz_replay_$t"
    inputs=()
    for d in "$src/test/fuzz/regress/$t" "$src/test/fuzz/seeds/$t"; do
        [ -d "$d" ] && while IFS= read -r f; do inputs+=("$f"); done < <(find "$d" -type f | sort)
    done
    [ ${#inputs[@]} -eq 0 ] && continue
    timeout 300 "$replay" "${inputs[@]}" >"$scratch/$t.out" 2>"$scratch/$t.err"
    rc=$?
    n=$(grep -c '^ok ' "$scratch/$t.out")
    check "$t: ${#inputs[@]} inputs replayed (exit $rc, $n ok)" "[ $rc -eq 0 ] && [ $n -eq ${#inputs[@]} ]"
    [ $rc -ne 0 ] && tail -5 "$scratch/$t.err"
done
finish
