#!/usr/bin/env bash
# Determinism: the same scenario and seed give a byte-identical results
# file; another seed still runs; the JSON holds no wall-clock values.
# Args: rnicsim binary, source dir, scratch dir (test/scenario/lib.sh).
set -u
. "$(dirname "$0")/lib.sh"
scn="$src/scenarios/examples/small.yaml"

"$bin" run "$scn" -o "$scratch/a.json" --quiet >"$scratch/a.out" 2>"$scratch/a.err"
rc=$?
check "first run exits 0 (got $rc)" "[ $rc -eq 0 ]"
"$bin" run "$scn" -o "$scratch/b.json" --quiet >"$scratch/b.out" 2>"$scratch/b.err"
rc=$?
check "second run exits 0 (got $rc)" "[ $rc -eq 0 ]"
check "same seed: byte-identical JSON" "cmp -s '$scratch/a.json' '$scratch/b.json'"
check "same seed: identical program output" "cmp -s '$scratch/a.out' '$scratch/b.out'"

# The document has the promised shape and real content.
check "JSON: result done, seed 7, write tables with rows, no wall-clock keys" "$py - '$scratch/a.json' <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d['rnicsim'] == '0.1' and d['scenario'] == 'small' and d['seed'] == 7, d.get('seed')
assert d['result'] == 'done', d['result']
assert d['sim_time_ps'] > 0 and d['events'] > 0
assert [r['size_bytes'] for r in d['tables']['write_lat']] == [64, 4096, 65536]
assert [r['size_bytes'] for r in d['tables']['write_bw']] == [64, 4096, 65536]
assert all(p['exit_code'] == 0 for p in d['programs'])
assert d['params']['pcie.lanes'] == 16 and d['params']['nic.tx_pkt_proc'] > 0
h0 = d['counters']['hosts']['h0']
assert h0['nic']['pkts_tx'] > 0 and h0['pcie']['tlp_up'] > 0
text = open(sys.argv[1]).read()
assert 'wall' not in text and 'per_s' not in text
PY"
# Latencies are whole nanoseconds (halved) in microseconds: each is written
# in the shortest form that reads back, a few digits, never a product's
# rounding noise (1.3194780000000002).
check "JSON: latencies written in their short decimal form" "$py - '$scratch/a.json' <<'PY'
import re, sys
text = open(sys.argv[1]).read()
vals = re.findall(r'\"t_[a-z0-9]+_us\": ([0-9.e+-]+)', text)
assert len(vals) >= 15, len(vals)
long = [v for v in vals if len(v.replace('.', '').lstrip('0')) > 10]
assert not long, long
PY"

# Another seed: still runs, the seed is recorded.
"$bin" run "$scn" -o "$scratch/c.json" --seed 12345 --quiet >/dev/null 2>"$scratch/c.err"
rc=$?
check "--seed 12345 exits 0 (got $rc)" "[ $rc -eq 0 ]"
check "--seed 12345 recorded in the JSON" \
    "$py -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d[\"seed\"]==12345 and d[\"result\"]==\"done\"' '$scratch/c.json'"

# The summary names the scenario and the results tables; --tables prints
# their contents, which the program's own output does not repeat otherwise.
"$bin" run "$scn" >"$scratch/d.out" 2>&1
rc=$?
check "summary run exits 0 (got $rc)" "[ $rc -eq 0 ]"
check "summary: scenario line, events/s and the tables named once" \
    "grep -q '== small: done' '$scratch/d.out' && grep -q 'events/s' '$scratch/d.out' && grep -q '^results tables: .*write_bw (' '$scratch/d.out' && ! grep -q '^write_bw' '$scratch/d.out'"
"$bin" run "$scn" --tables >"$scratch/e.out" 2>&1
check "--tables prints each table's contents" "grep -q '^write_bw' '$scratch/e.out' && grep -q 'Gb/s' '$scratch/e.out'"


# Address-space layout: results must not depend on where the process was
# loaded.  Randomisation moves the heap and mappings by whole 4 KiB pages
# and the stack by less, so a model keyed by process addresses (which
# 2 MiB pages a buffer spans, which lines it shares) can differ between two
# runs of one seed.  A huge-page scenario with host-model memory traffic,
# run without randomisation (when the kernel allows it) and with two
# differently sized environments, gives one results file.  The third run
# also has glibc put every block of 4 KiB or more in a mapping of its own
# and pad its heap: the zero-sided programs' copy buffers were malloc'd
# (16 bytes into a page under glibc, page aligned under ASan) and gave
# another end time under another allocator (6,768,212,517 against
# 6,768,130,928 ps) until they came from protocols/common/pages.c.
alloc_tunables="glibc.malloc.mmap_threshold=4096:glibc.malloc.top_pad=1048576"
lay="$src/scenarios/zero-sided/fig09-base.yaml"
norand=""
if setarch "$(uname -m)" -R true 2>/dev/null; then norand="setarch $(uname -m) -R"; fi
$norand "$bin" run "$lay" -o "$scratch/l0.json" --quiet >/dev/null 2>"$scratch/l0.err"
rc0=$?
RNICSIM_TEST_PAD=$(printf '%01000d' 0) "$bin" run "$lay" -o "$scratch/l1.json" --quiet >/dev/null 2>"$scratch/l1.err"
rc1=$?
RNICSIM_TEST_PAD=$(printf '%03000d' 0) GLIBC_TUNABLES=$alloc_tunables "$bin" run "$lay" -o "$scratch/l2.json" --quiet >/dev/null 2>"$scratch/l2.err"
rc2=$?
check "layout runs exit 0 (got $rc0 $rc1 $rc2)" "[ $rc0 -eq 0 ] && [ $rc1 -eq 0 ] && [ $rc2 -eq 0 ]"
check "same seed, other address-space layouts: byte-identical JSON" \
    "cmp -s '$scratch/l0.json' '$scratch/l1.json' && cmp -s '$scratch/l0.json' '$scratch/l2.json'"

# Heap layout: how the scenario's path and the output's are spelled changes
# the length of strings the simulator allocates before the programs start,
# and so where a program's malloc'd blocks fall inside their pages; the
# allocator itself (glibc's thresholds, ASan's) changes where blocks and
# mappings go, and whether memory given back comes back at the same
# address.  Buffers the host model or the NIC touches are page aligned
# (protocols/common/pages.c), and a buffer
# given back between messages comes from host_alloc (fastkv's split-alloc
# grants), whose pages the host model forgets at host_free.  Before,
# RIMA's footprint runs gave other line, page and MTT counts, hence
# another end time, for a longer path, and table6_largemsg another end
# time under ASan (a grant's munmap'd pages stayed warm when glibc mapped
# the next one at the same address).  Each scenario runs three ways: as
# is, spelled another way, and with glibc placing every block of 4 KiB or
# more in its own mapping and padding its heap (no effect under ASan,
# whose allocator is another layout again).
long="$scratch/a_much_longer_directory_name_for_the_second_spelling_of_the_same_run"
mkdir -p "$long"
for s in rima/fig5_slab rima/table6_largemsg labs/channel; do
    name=$(basename "$s")
    "$bin" run "$src/scenarios/$s.yaml" -o "$scratch/h_$name.json" --quiet >/dev/null 2>&1
    r0=$?
    "$bin" run "$src/scenarios/./rima/../$s.yaml" --quiet -o "$long/$name.json" >/dev/null 2>&1
    r1=$?
    GLIBC_TUNABLES=$alloc_tunables "$bin" run "$src/scenarios/$s.yaml" -o "$scratch/t_$name.json" \
        --quiet >/dev/null 2>&1
    r2=$?
    check "$s: the same results however its paths are spelled and the allocator places blocks (exit $r0 $r1 $r2)" "[ $r0 -eq 0 ] && [ $r1 -eq 0 ] && [ $r2 -eq 0 ] && $py - '$scratch/h_$name.json' '$long/$name.json' '$scratch/t_$name.json' <<'PY'
import json, sys
a, b, c = (json.load(open(f)) for f in sys.argv[1:4])
for k in ('sim_time_ps', 'events', 'tables', 'counters', 'programs'):
    assert a[k] == b[k], ('path spelling', k)
    assert a[k] == c[k], ('allocator', k)
PY"
done
finish
