#!/usr/bin/env bash
# Set up, build and run the whole test suite (unit, verbs, scenario tiers).
#   tools/test.sh          normal build (build/)
#   tools/test.sh --asan   AddressSanitizer + UBSan build (build-asan/)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build_dir="$here/build"
args=()
if [ "${1:-}" = "--asan" ]; then
    build_dir="$here/build-asan"
    args=(--asan)
    export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
    export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
    # debug build: check the event queue's invariants after every event
    export RNICSIM_CHECK_EVQ=${RNICSIM_CHECK_EVQ:-1}
fi
"$here/tools/setup.sh" --test "${args[@]}"
ctest --test-dir "$build_dir" --output-on-failure -j2
