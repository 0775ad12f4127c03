#!/usr/bin/env bash
# rnicsim as an installed tool: `cmake --install` into a scratch prefix,
# then, from an unrelated directory and without the source tree's help
# (RNICSIM_PROFILES unset): profiles and plot scripts are found next to
# the installed binary, a user program builds with pkg-config and with the
# CMake package and runs from the installed example scenario, the man page
# and docs/cli.md list every command of --help, and `cpack -G DEB` makes a
# package whose files run where they are unpacked.
# Args: rnicsim binary, source dir, scratch dir (test/scenario/lib.sh).
set -u
. "$(dirname "$0")/lib.sh"
unset RNICSIM_PROFILES
build=$(dirname "$bin")
prefix="$scratch/prefix"
rm -rf "$prefix" "$scratch/work" "$scratch/pkg" "$scratch/deb"
mkdir -p "$scratch/work"

cmake --install "$build" --prefix "$prefix" >"$scratch/install.log" 2>&1
rc=$?
check "cmake --install exits 0 (got $rc)" "[ $rc -eq 0 ]"
ibin="$prefix/bin/rnicsim"
check "installed: binary, profiles, plot scripts, headers, man page" \
    "[ -x '$ibin' ] && [ -f '$prefix/share/rnicsim/profiles/cx5-100g.yaml' ] && [ -f '$prefix/share/rnicsim/tools/plot_sweep.py' ] && [ -x '$prefix/share/rnicsim/tools/timeline_check.py' ] && [ -f '$prefix/include/rnicsim/host.h' ] && [ -f '$prefix/share/man/man1/rnicsim.1' ]"

# Profiles come from the installed share/rnicsim, not from the source tree.
(cd "$scratch/work" && "$ibin" params --profile cx5-100g >params.out 2>&1)
check "params finds the installed profile" \
    "head -1 '$scratch/work/params.out' | grep -q '$prefix/bin/../share/rnicsim/profiles/cx5-100g.yaml'"

# A scenario two folders deep (scenarios/rima/) run from elsewhere.
(cd "$scratch/work" && timeout 120 "$ibin" run "$prefix/share/rnicsim/scenarios/rima/stream_hw.yaml" \
    -q -o stream.json >stream.out 2>&1)
rc=$?
check "installed scenarios/rima/stream_hw.yaml runs from another directory (got $rc)" "[ $rc -eq 0 ]"

# A sweep from elsewhere finds the installed plot script.
(cd "$scratch/work" && timeout 120 "$ibin" sweep "$prefix/share/rnicsim/scenarios/microbench/qp_count.yaml" \
    --set vars.qps=1,2 -o sw --plot x=vars.qps,y=microbench.mops >sweep.out 2>&1)
rc=$?
check "installed sweep --plot writes a PNG (got $rc)" \
    "[ $rc -eq 0 ] && [ -s '$scratch/work/sw/sweep.png' ] && ! grep -q 'not found' '$scratch/work/sweep.out'"

# A user program, built with pkg-config, run from the installed example.
mkdir -p "$scratch/work/hello"
cp "$prefix/share/doc/rnicsim/examples/hello.yaml" "$prefix/share/doc/rnicsim/examples/hello_write.c" \
    "$scratch/work/hello/"
flags=$(PKG_CONFIG_PATH="$prefix/lib/pkgconfig:$prefix/lib/$(gcc -print-multiarch 2>/dev/null)/pkgconfig" \
    pkg-config --cflags --libs rnicsim 2>"$scratch/pc.err")
check "pkg-config knows rnicsim" "[ -n '$flags' ]"
(cd "$scratch/work/hello" && cc $flags -Wall -Wextra hello_write.c -o hello_write.so 2>cc.err &&
    timeout 60 "$ibin" run hello.yaml >run.out 2>&1)
rc=$?
check "pkg-config build of hello_write.c runs hello.yaml (got $rc)" \
    "[ $rc -eq 0 ] && grep -q 'server h0 received: \"hello from h1\"' '$scratch/work/hello/run.out'"

# The same with the CMake package.
mkdir -p "$scratch/work/cm"
cp "$scratch/work/hello/hello_write.c" "$scratch/work/hello/hello.yaml" "$scratch/work/cm/"
cat >"$scratch/work/cm/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.18)
project(hello C)
find_package(rnicsim REQUIRED)
rnicsim_add_program(hello_write hello_write.c)
CM
(cd "$scratch/work/cm" && cmake -S . -B b -DCMAKE_PREFIX_PATH="$prefix" >cm.log 2>&1 &&
    cmake --build b >>cm.log 2>&1 && cp b/hello_write.so . &&
    timeout 60 "$ibin" run hello.yaml >run.out 2>&1)
rc=$?
check "find_package(rnicsim) + rnicsim_add_program builds and runs (got $rc)" \
    "[ $rc -eq 0 ] && grep -q 'hello from h1' '$scratch/work/cm/run.out'"

# An unmodified POSIX program built with the installed rnicsim-cc.
mkdir -p "$scratch/work/cc"
cp "$src/test/scenario/programs/posix_probe.c" "$scratch/work/cc/"
cat >"$scratch/work/cc/probe.yaml" <<'YAML'
name: probe
profile: cx5-100g
topology: {kind: star, hosts: 2, link: {rate: 100Gbps, delay: 10ns}}
programs:
  - {host: h1, program: ./posix_probe.so, args: [--server]}
  - {host: h0, program: ./posix_probe.so, args: [--client, h1]}
YAML
(cd "$scratch/work/cc" && "$prefix/bin/rnicsim-cc" -O2 -o posix_probe.so posix_probe.c 2>cc.err &&
    timeout 60 "$ibin" run probe.yaml >run.out 2>&1)
rc=$?
check "installed rnicsim-cc builds a plain POSIX program that runs (got $rc)" \
    "[ $rc -eq 0 ] && grep -q 'server: echoed 5 messages' '$scratch/work/cc/run.out'"

# Every command of --help is in the man page and in docs/cli.md.
cmds=$("$ibin" --help | sed -n 's/^  rnicsim \([a-z][a-z0-9-]*\).*/\1/p' | sort -u)
check "--help lists commands" "[ \$(echo '$cmds' | wc -w) -ge 6 ]"
missing=""
for c in $cmds; do
    grep -q "^\.B rnicsim $c" "$prefix/share/man/man1/rnicsim.1" || missing="$missing man:$c"
    grep -q "rnicsim $c" "$src/docs/cli.md" || missing="$missing cli.md:$c"
done
check "man page and docs/cli.md list every command (missing:${missing:- none})" "[ -z '$missing' ]"
if command -v groff >/dev/null; then
    groff -man -Tutf8 -ww -z "$prefix/share/man/man1/rnicsim.1" >/dev/null 2>"$scratch/groff.err"
    check "man page renders without groff warnings" "[ ! -s '$scratch/groff.err' ]"
else
    echo "SKIP man page rendering (no groff)"
fi

# The Debian package: the right files and dependencies, and a tree that
# runs wherever it is unpacked (what apt installs into /usr).
(cd "$build" && cpack -G DEB -B "$scratch/pkg" >"$scratch/cpack.log" 2>&1)
deb=$(ls "$scratch"/pkg/rnicsim_*.deb 2>/dev/null | head -1)
check "cpack -G DEB makes rnicsim_*.deb" "[ -n '$deb' ]"
if [ -n "$deb" ]; then
    dpkg-deb -c "$deb" >"$scratch/deb.list"
    check "package: /usr/bin/rnicsim, profiles, pkg-config file" \
        "grep -q './usr/bin/rnicsim$' '$scratch/deb.list' && grep -q './usr/share/rnicsim/profiles/cx5-100g.yaml' '$scratch/deb.list' && grep -q 'pkgconfig/rnicsim.pc' '$scratch/deb.list'"
    check "package depends on libyaml" "dpkg-deb -f '$deb' Depends | grep -q libyaml"
    dpkg-deb -x "$deb" "$scratch/deb"
    (cd "$scratch/work" && "$scratch/deb/usr/bin/rnicsim" params --profile efa-srd >deb-params.out 2>&1)
    check "unpacked package finds its own profiles" \
        "head -1 '$scratch/work/deb-params.out' | grep -q '$scratch/deb/usr/bin/../share/rnicsim/profiles/efa-srd.yaml'"
fi
finish
