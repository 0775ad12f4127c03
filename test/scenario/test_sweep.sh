#!/usr/bin/env bash
# rnicsim sweep: a 2 x 2 sweep (a hardware parameter, pcie.lanes, and a
# scenario variable, the message size) with -j2: the CSV has a header and 4
# rows in run order with the values in the right rows, the PCIe-bound
# bandwidth drops with one lane, the output is byte-identical with -j1, a
# failing run still gets its row and makes sweep exit 1, bad input is exit 2
# before anything runs, and --plot writes a PNG (when matplotlib is there)
# or says it is skipped (when it is not).
# Args: rnicsim binary, source dir, scratch dir (test/scenario/lib.sh).
set -u
. "$(dirname "$0")/lib.sh"

cat >"$scratch/s.yaml" <<'YAML'
name: sweep-test
seed: 5
stop_time: 1s
vars:
  size: 4096
topology: {kind: back-to-back, hosts: 2, link: {rate: 100Gbps, delay: 10ns}}
programs:
  - {host: h1, program: perftest, args: [--server, --tests=write, --modes=bw, "--sizes=${size}", --bw-iters=64]}
  - {host: h0, program: perftest, args: [--client, --tests=write, --modes=bw, "--sizes=${size}", --bw-iters=64]}
YAML
cd "$scratch" || exit 1
rm -rf j1 j2 bad fail plot noplot

sweep() { timeout 120 "$bin" sweep s.yaml "$@"; }

sweep --set hardware.pcie.lanes=16,1 --set vars.size=4096,65536 -j2 -o j2 >j2.out 2>j2.err
rc=$?
check "sweep -j2 exits 0 (got $rc: $(head -c 300 j2.err))" "[ $rc -eq 0 ]"
check "sweep.csv: header + 4 rows" "[ \$(wc -l <j2/sweep.csv) -eq 5 ]"
check "one results file and log per run" "[ -s j2/run-0.json ] && [ -s j2/run-3.json ] && [ -f j2/run-3.log ] && [ ! -e j2/run-4.json ]"
check "CSV: swept keys, run order, values in the right rows, metrics, summed counters" "$py - j2/sweep.csv <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1], newline='')))
h = list(rows[0].keys())
assert h[:7] == ['hardware.pcie.lanes', 'vars.size', 'run', 'exit', 'result', 'sim_time_ps', 'events'], h
for c in ('write_bw.size_bytes', 'write_bw.bw_gbps', 'nic.doorbells', 'pcie.tlp_up', 'links.pkts_sent'):
    assert c in h, (c, h)
want = [('16', '4096'), ('16', '65536'), ('1', '4096'), ('1', '65536')]
got = [(r['hardware.pcie.lanes'], r['vars.size']) for r in rows]
assert got == want, got
for i, r in enumerate(rows):
    assert r['run'] == str(i) and r['exit'] == '0' and r['result'] == 'done', r
    # the variable reached the program: the table's size is the swept value
    assert float(r['write_bw.size_bytes']) == float(r['vars.size']), r
bw = {(r['hardware.pcie.lanes'], r['vars.size']): float(r['write_bw.bw_gbps']) for r in rows}
# Gen3 x1 (~7.9 Gb/s) caps the payload DMA reads far below the 100 Gb/s link
for size in ('4096', '65536'):
    assert bw[('1', size)] < 10 < 50 < bw[('16', size)], bw
# counters are summed over both hosts: 64 WRs posted + the connection set-up
assert all(int(r['nic.doorbells']) >= 64 for r in rows), rows
PY"
check "summary on stdout: a row per run and the counts line" \
    "grep -Eq '^1 +65536 +3 +0 +done' j2.out && grep -q '^4 runs, 0 failed' j2.out"

sweep --set hardware.pcie.lanes=16,1 --set vars.size=4096,65536 -j1 -o j1 >j1.out 2>/dev/null
check "-j1 gives a byte-identical CSV" "cmp -s j1/sweep.csv j2/sweep.csv"
check "-j1 gives the same summary (but for the directory name)" \
    "diff <(sed s/j1/DIR/ j1.out) <(sed s/j2/DIR/ j2.out) >/dev/null"

# A run that fails still gets a row, with empty metrics; sweep exits 1
# after writing everything and names it.  perftest refuses --bw-iters=0.
sed 's/--bw-iters=64/"--bw-iters=${n}"/g; s/^  size: 4096/  size: 4096\n  n: 64/' s.yaml >f.yaml
timeout 120 "$bin" sweep f.yaml --set vars.n=64,0 -j2 -o fail >fail.out 2>fail.err
rc=$?
check "a failing run: sweep exits 1 and names it (got $rc: $(cat fail.err))" \
    "[ $rc -eq 1 ] && grep -q 'run 1 (exit 1' fail.err"
check "the failing run has its row with empty metrics, the other its numbers" "$py - fail/sweep.csv <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1], newline='')))
assert len(rows) == 2, rows
assert rows[0]['vars.n'] == '64' and rows[0]['exit'] == '0' and float(rows[0]['write_bw.bw_gbps']) > 0, rows[0]
assert rows[1]['vars.n'] == '0' and rows[1]['exit'] == '1' and rows[1]['result'] == '' and rows[1]['write_bw.bw_gbps'] == '', rows[1]
PY"

# Bad input: exit 2 with a message, before anything runs.
sweep --set hardware.pcie.lane=16,1 -o bad >/dev/null 2>bad1.err
rc=$?
check "unknown key: exit 2, message names the key and suggests, nothing ran (got $rc)" \
    "[ $rc -eq 2 ] && grep -q \"^--set:1:15: unknown hardware parameter 'pcie.lane'.*did you mean 'pcie.lanes'\" bad1.err && [ ! -e bad ]"
rm -rf bad
sweep --set hardware.pcie.lanes=16,x -o bad >/dev/null 2>bad2.err
rc=$?
check "a bad value in the second combination: exit 2 naming the run, nothing ran (got $rc: $(cat bad2.err))" \
    "[ $rc -eq 2 ] && grep -q '^--set:1:21: ' bad2.err && grep -q 'run 1 (hardware.pcie.lanes=x)' bad2.err && [ ! -e bad ]"
rm -rf bad
sweep --set vars.sise=1,2 -o bad >/dev/null 2>bad3.err
check "unknown variable: exit 2" "[ \$? -eq 2 ] && grep -q \"unknown variable 'vars.sise'\" bad3.err && [ ! -e bad ]"
rm -rf bad
for args in "--set hardware.pcie.lanes" "--set hardware.pcie.lanes=1,,2" "-j 0" "--plot y=x" "--bogus"; do
    # shellcheck disable=SC2086
    sweep $args -o bad >/dev/null 2>badarg.err
    rc=$?
    check "bad syntax '$args': exit 2 with a message" "[ $rc -eq 2 ] && [ -s badarg.err ] && [ ! -e bad ]"
    rm -rf bad
done

# --plot
if $py -c 'import matplotlib' 2>/dev/null; then
    sweep --set hardware.pcie.lanes=16,1 --set vars.size=4096,65536 -j2 -o plot \
        --plot x=vars.size,y=write_bw.bw_gbps,series=hardware.pcie.lanes >plot.out 2>plot.err
    rc=$?
    check "--plot: exit 0 and a PNG (got $rc: $(cat plot.err))" \
        "[ $rc -eq 0 ] && [ -s plot/sweep.png ] && [ \"\$(head -c 4 plot/sweep.png | tail -c 3)\" = PNG ]"
else
    echo "SKIP --plot PNG: $py has no matplotlib"
fi
sweep --set vars.size=4096,65536 -o plot --plot x=vars.size,y=write_bw.bw_gbp >/dev/null 2>plotcol.err
rc=$?
check "--plot with an unknown column: exit 2 with a suggestion (got $rc)" \
    "[ $rc -eq 2 ] && grep -q \"did you mean 'write_bw.bw_gbps'\" plotcol.err"
# A python without matplotlib: the plot is skipped with a clear message.
nompl=$(command -v python3)
if [ -n "$nompl" ] && ! "$nompl" -c 'import matplotlib' 2>/dev/null; then
    RNICSIM_PYTHON=$nompl sweep --set vars.size=4096,65536 -o noplot \
        --plot x=vars.size,y=write_bw.bw_gbps >/dev/null 2>noplot.err
    rc=$?
    check "--plot without matplotlib: exit 0, says so, CSV written (got $rc: $(cat noplot.err))" \
        "[ $rc -eq 0 ] && grep -q 'has no matplotlib' noplot.err && [ -s noplot/sweep.csv ] && [ ! -e noplot/sweep.png ]"
fi

# Jobs for other machines: --emit-jobs writes commands instead of running,
# the commands run anywhere (here: one by one, as GNU parallel would), and
# --collect gives the same CSV as the local sweep of the same runs.
rm -rf em
sweep --set hardware.pcie.lanes=16,1 --set vars.size=4096,65536 --emit-jobs -o em >em.out 2>em.err
rc=$?
check "--emit-jobs exits 0, runs nothing, writes 4 jobs and a Slurm array (got $rc)" \
    "[ $rc -eq 0 ] && [ \$(wc -l <em/jobs.txt) -eq 4 ] && [ ! -e em/run-0.json ] && grep -q -- '--array=0-3' em/slurm.sh && grep -q 'parallel' em.out"
(cd / && sed -n 1,3p "$scratch/em/jobs.txt" | while IFS= read -r job; do bash -c "$job"; done)
timeout 60 "$bin" sweep --collect em >em-c1.out 2>em-c1.err
rc=$?
check "--collect with a run missing: exit 1, the run shown as not run (got $rc)" \
    "[ $rc -eq 1 ] && grep -q 'not run' em-c1.out && grep -q 'run 3 (not run: no em/run-3.exit)' em-c1.err"
(cd / && sed -n 4p "$scratch/em/jobs.txt" | bash)
timeout 60 "$bin" sweep --collect em --plot x=vars.size,y=write_bw.bw_gbps,series=hardware.pcie.lanes >em-c2.out 2>em-c2.err
rc=$?
check "--collect of every run: exit 0, CSV byte-identical to the local sweep's (got $rc)" \
    "[ $rc -eq 0 ] && cmp -s em/sweep.csv j2/sweep.csv"
check "--collect --plot: the summary shows the plotted columns only" \
    "head -1 em-c2.out | grep -q 'write_bw.bw_gbps' && ! head -1 em-c2.out | grep -q 'sim_time_ps'"
timeout 60 "$bin" sweep --collect em -j2 >/dev/null 2>em-c3.err
check "--collect with another option: exit 2" "[ \$? -eq 2 ] && grep -q 'takes only --plot' em-c3.err"
timeout 60 "$bin" sweep --collect nosuchdir >/dev/null 2>em-c4.err
check "--collect of a directory without sweep.args: exit 2 with the reason" "[ \$? -eq 2 ] && grep -q 'sweep.args' em-c4.err"

finish
