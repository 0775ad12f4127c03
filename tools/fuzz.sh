#!/usr/bin/env bash
# Fuzz what rnicsim reads from users with libFuzzer (clang), under ASan and
# UBSan (docs/robustness.md "Fuzzing").
#
#   tools/fuzz.sh [--time SECONDS] [--target scenario|set|json|all] [--smoke]
#
# Targets (tools/fuzz/fuzz_input.c): scenario (scenario files: load, then a
# bounded run), set (--set assignments on a fixed scenario), json (the JSON
# reader of `rnicsim sweep`).  --time is the total, shared by the targets
# (scenario 50 %, set 30 %, json 20 %); the default is 3600 s, the hour the
# documentation asks for.  --smoke is about a minute in all (what .ci/run
# does).  One fuzzing process at a time, at nice 19.
#
# Seeds: scenarios/ and profiles/ (scenario), test/fuzz/seeds/<target>/, and
# the regression inputs test/fuzz/regress/<target>/.  The corpus grows in
# build-fuzz/corpus/<target> and is kept between runs; an input that makes
# a target fail is written to build-fuzz/findings/ and the script exits 1.
# Each finding becomes a fix plus a file in test/fuzz/regress/<target>/,
# which the test suite replays (test/scenario/test_fuzz_regress.sh).
#
# Packages (Debian 12): clang and libclang-rt-14-dev (libFuzzer's runtime),
# installed when missing and run as root.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
total=3600
targets=(scenario set json)
while [ $# -gt 0 ]; do
    case "$1" in
    --time) total="$2"; shift ;;
    --target) [ "$2" = all ] || targets=("$2"); shift ;;
    --smoke) total=60 ;;
    *) echo "fuzz.sh: unknown option '$1'" >&2; exit 2 ;;
    esac
    shift
done

packages=(clang libclang-rt-14-dev cmake make libibverbs-dev libyaml-dev)
missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "fuzz.sh needs: sudo apt-get install -y ${missing[*]}" >&2
        exit 1
    fi
    echo "[fuzz] installing: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

bd="$here/build-fuzz"
echo "[fuzz] building $bd (clang, libFuzzer, ASan + UBSan)"
CC=clang cmake -S "$here" -B "$bd" -DRNICSIM_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g" >/dev/null
nice -n 19 cmake --build "$bd" -j2 --target "${targets[@]/#/fuzz_}" -- --no-print-directory >/dev/null

# A dictionary: scenario keys, units, and every hardware parameter of the
# table (so parameters added later are in it without editing this script).
dict="$bd/scenario.dict"
{
    cat "$here/test/fuzz/scenario.dict"
    grep -o '"\(nic\|pcie\|host\|rima\|fabric\)\.[a-z0-9_.]*"' "$here/tools/rnicsim/params.c" |
        sort -u | sed 's/^/kw_param=/'
} >"$dict"

# findings of this run only (a fixed one lives on in test/fuzz/regress/)
rm -rf "$bd/findings"
mkdir -p "$bd/findings"
share() { # seconds for target $1
    local pct
    case "$1" in scenario) pct=50 ;; set) pct=30 ;; json) pct=20 ;; esac
    if [ ${#targets[@]} -eq 1 ]; then echo "$total"; else echo $((total * pct / 100)); fi
}
# Sanitizer reports go to files (the targets silence the programs' own
# output during a run, stderr included); a finding prints them.
rm -rf "$bd/sanitizer"
mkdir -p "$bd/sanitizer"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1:log_path=$bd/sanitizer/asan}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1:log_path=$bd/sanitizer/ubsan}
status=0
summary=()
for t in "${targets[@]}"; do
    corpus="$bd/corpus/$t"
    mkdir -p "$corpus"
    seeds=("$here/test/fuzz/regress/$t")
    [ -d "$here/test/fuzz/seeds/$t" ] && seeds+=("$here/test/fuzz/seeds/$t")
    if [ "$t" = scenario ]; then
        seeds+=("$bd/seed-scenarios")
        rm -rf "$bd/seed-scenarios"
        mkdir -p "$bd/seed-scenarios"
        find "$here/scenarios" "$here/profiles" -name '*.yaml' | while read -r f; do
            cp "$f" "$bd/seed-scenarios/$(echo "${f#"$here"/}" | tr / _)"
        done
    fi
    secs=$(share "$t")
    log="$bd/fuzz-$t.log"
    echo "[fuzz] $t: ${secs} s (log $log)"
    rc=0
    # Sessions of at most a minute, one after the other, each resuming from
    # the corpus: a run's abandoned programs keep their memory (they are
    # stopped mid-flight, like killed processes), which must not pile up
    # for an hour in one process.  One fuzzing process at a time.
    : >"$log"
    execs=0
    end=$((SECONDS + secs))
    while [ "$SECONDS" -lt "$end" ]; do
        chunk=$((end - SECONDS))
        [ "$chunk" -gt 60 ] && chunk=60
        # -timeout: an input that runs 60 s (a unit takes well under a
        # second alone; nice 19 on a loaded machine stretches it)
        (cd "$bd" && nice -n 19 "./fuzz_$t" -max_total_time="$chunk" -timeout=60 \
            -rss_limit_mb=8192 -malloc_limit_mb=8192 -max_len=8192 -dict="$dict" \
            -artifact_prefix="$bd/findings/$t-" -print_final_stats=1 \
            "$corpus" "${seeds[@]}") >>"$log" 2>&1 || rc=$?
        k=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | tail -1 | grep -o '[0-9]*$' || echo 0)
        execs=$((execs + k))
        [ "$rc" -ne 0 ] && break
    done
    # a report (not a warning such as a refused huge allocation) is a finding
    if grep -lqE 'ERROR: |runtime error' "$bd/sanitizer"/* 2>/dev/null; then
        [ "$rc" -eq 0 ] && rc=1
        cat "$bd/sanitizer"/* >>"$log"
    fi
    rm -f "$bd/sanitizer"/*
    n=$(find "$corpus" -type f | wc -l)
    # slow-unit-* are libFuzzer's notes of the slowest input, not failures
    found=$(find "$bd/findings" -name "$t-*" ! -name "$t-slow-unit-*" -type f | wc -l)
    summary+=("$t: $execs executions in ${secs} s, corpus $n inputs, findings $found (exit $rc)")
    if [ "$rc" -ne 0 ]; then
        status=1
        grep -E "ERROR|fuzz finding|Test unit written|SUMMARY" "$log" | head -20 >&2 || true
    fi
done
printf '[fuzz] %s\n' "${summary[@]}"
exit $status
