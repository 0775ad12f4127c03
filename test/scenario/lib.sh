# Shared by the scenario tests (sourced, not run).  Each test is called by
# ctest as: bash test_X.sh <rnicsim binary> <source dir> <scratch dir>.
# Provides $bin $src $scratch $py, the PASS/FAIL counters and helpers:
#   ok NAME / bad NAME     record a result
#   check NAME 'COMMAND'   ok if the command (eval'ed) succeeds
#   finish                 print the counts; the test's exit status
#   write_scenario NAME    save the scenario on stdin as $scratch/NAME.yaml
#   run_scenario NAME ...  run it (below)
bin=${1:?rnicsim binary}
src=${2:?source dir}
scratch=${3:?scratch dir}
mkdir -p "$scratch"
export RNICSIM_PROFILES="$src/profiles"
py=/usr/bin/python3 # Debian's python3 with matplotlib, not a pyenv one
pass=0
fail=0
ok() { echo "PASS $1"; pass=$((pass + 1)); }
bad() { echo "FAIL $1"; fail=$((fail + 1)); }
check() { if eval "$2"; then ok "$1"; else bad "$1"; fi; }
finish() {
    echo "$pass passed, $fail failed"
    [ "$fail" -eq 0 ] && [ "$pass" -gt 0 ]
}
write_scenario() { cat >"$scratch/$1.yaml"; }
# run_scenario NAME [RNICSIM ARGS...]: run $scratch/NAME.yaml from $scratch,
# quiet, results in NAME.json, stdout / stderr in NAME.out / NAME.err, at
# most $run_timeout seconds (default 120: run_timeout=300 run_scenario ...);
# returns rnicsim's exit status (124 on the time limit).
run_scenario() {
    local name=$1
    shift
    (cd "$scratch" && timeout "${run_timeout:-120}" "$bin" run "$name.yaml" -q -o "$name.json" "$@" \
        >"$name.out" 2>"$name.err")
}
# The third-party sources the tests build (rdma-core's examples, perftest):
# $RNICSIM_THIRD_PARTY, else <source dir>/../shared/third_party, else
# /work/shared/third_party.  Prints the folder, or fails with a message.
third_party_dir() {
    local d
    for d in "${RNICSIM_THIRD_PARTY:-}" "$src/../shared/third_party" /work/shared/third_party; do
        if [ -n "$d" ] && [ -d "$d/rdma-core-v44.0-examples" ] && [ -d "$d/perftest-4.5-0.17/src" ]; then
            (cd "$d" && pwd)
            return 0
        fi
    done
    echo "third-party sources not found: set RNICSIM_THIRD_PARTY to the folder holding" \
        "rdma-core-v44.0-examples/ and perftest-4.5-0.17/" >&2
    return 1
}
