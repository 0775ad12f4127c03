#!/usr/bin/env bash
# Install what rnicsim needs on Debian 12 (when root) and build it.
#
#   tools/setup.sh [--asan] [--test] [--build-dir DIR]
#
# Packages and why each one (docs/dependencies.md has the longer story):
#   cmake, gcc, make      the build (CMake is what C projects of this kind use)
#   libibverbs-dev        the real <infiniband/verbs.h>: the shim implements it,
#                         protocol code builds against it unchanged
#   libyaml-dev           scenario files (libyaml: the C YAML parser Debian ships,
#                         reports line/column for every node)
#   python3-matplotlib    plots of results (run with /usr/bin/python3)
#   libev-dev             emulation mode's daemon rnicsimd (emu/): the event loop
#                         that waits on the clients' sockets and doorbells
# and, for the tests only (--test; tools/test.sh), not for the quickstart:
#   tshark                test/scenario/test_pcap.sh reads packet captures back
#                         with Wireshark's dissectors
#   pkgconf               test/scenario/test_install.sh builds a user program
#                         against the installed rnicsim with pkg-config
#   librdmacm-dev,        test/scenario/test_third_party_perftest.sh builds
#   libibumad-dev         perftest 4.5 unmodified: its sources include
#                         <rdma/rdma_cma.h> and <infiniband/umad.h> and link
#                         -libumad
#   ibverbs-utils, perftest   test/scenario/test_emulation.sh runs Debian's own
#                         ibv_rc_pingpong, ibv_devinfo, ib_write_bw ... unmodified
#                         over rnicsimd (the acceptance of emulation mode)
# When not root, it prints the apt-get command to run and stops.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
build_dir="$here/build"
sanitize=OFF
build_type=Release
with_tests=false
while [ $# -gt 0 ]; do
    case "$1" in
    --asan) sanitize=ON; build_type=Debug; build_dir="$here/build-asan" ;;
    --test) with_tests=true ;;
    --build-dir) build_dir="$2"; shift ;;
    *) echo "setup.sh: unknown option '$1'" >&2; exit 2 ;;
    esac
    shift
done

packages=(cmake gcc make libc6-dev libibverbs-dev libyaml-dev python3-matplotlib libev-dev)
if [ "$with_tests" = true ]; then
    packages+=(tshark pkgconf librdmacm-dev libibumad-dev ibverbs-utils perftest)
fi
missing=()
for p in "${packages[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing+=("$p")
    fi
done
if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" -eq 0 ]; then
        echo "[setup] installing: ${missing[*]}"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq
        apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    else
        echo "rnicsim needs these Debian packages, which are not installed:" >&2
        echo "    sudo apt-get install -y ${missing[*]}" >&2
        echo "Run that, then run this command again." >&2
        exit 1
    fi
fi

echo "[setup] configuring $build_dir ($build_type, sanitizers $sanitize)"
cmake -S "$here" -B "$build_dir" -DCMAKE_BUILD_TYPE="$build_type" -DRNICSIM_WERROR=ON \
    -DRNICSIM_SANITIZE="$sanitize" >/dev/null
# The first build takes about a minute on two cores: show how far it is
# (one updating line on a terminal, a line per 20 % otherwise).  Compiler
# messages go to stderr and are not filtered.
echo "[setup] building"
tty=0
[ -t 1 ] && tty=1
set +e
cmake --build "$build_dir" -j"$(nproc)" -- --no-print-directory |
    awk -v tty="$tty" '
        match($0, /^\[ *[0-9]+%\]/) {
            pct = substr($0, RSTART + 1, RLENGTH - 2) + 0
            if (tty) { printf "\r[setup] building %3d%%", pct; fflush() }
            else if (pct >= next_pct) { printf "[setup] building %d%%\n", pct; fflush(); next_pct = pct - pct % 20 + 20 }
        }
        END { if (tty) printf "\r\033[K" }'
status=${PIPESTATUS[0]}
set -e
if [ "$status" -ne 0 ]; then
    echo "[setup] build failed (status $status); the compiler's messages are above" >&2
    exit "$status"
fi
echo "[setup] built $build_dir/rnicsim"
