#!/usr/bin/env bash
# Regenerate every RB² result of docs/rb2.md in one command: the sweeps of
# scenarios/rb2/ (Figs. 3, 5, 6, 7, Table II, the three cases), the plots
# docs/rb2/fig{3,5,6,7}.png and the tables (printed).  Latency points up to
# 64 KiB run 10,000 round trips, so that a 99.9th percentile rests on 10
# samples; 256 KiB and 1 MiB run 2,000 (10,000 would take a minute each).
# Fig. 3's latency points up to 64 KiB run 100,000 (the paper 300,000):
# check 2 compares two p99.9s 0.1-0.2 us apart, and over 10,000 round
# trips the OS tick's phase moves one by ~0.3 us (docs/rb2.md, Fig. 3).
# 5-15 minutes of wall time on the shared two cores, by their load (docs/rb2.md "Set-up").
#   tools/rb2_eval.sh [OUTDIR]     (default rb2-out; the sweeps' CSVs go there)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
bin=${RNICSIM:-$here/build/rnicsim}
out=${1:-rb2-out}
py=/usr/bin/python3 # Debian's, with matplotlib
s="$here/scenarios/rb2"
sizes=64,256,1024,4096,16384,65536,262144,1048576
small=64,256,1024,4096,16384,65536 # latency: 10,000 round trips
large=262144,1048576               # latency: 2,000
v=rb2,farm,sd,l5
mkdir -p "$out"
sweep() { "$bin" sweep "$@" >"$out/sweep.log" 2>&1 || { tail -20 "$out/sweep.log"; exit 1; }; }
sweep "$s/fig5_throughput.yaml" --set vars.variant=$v --set vars.size=$sizes -o "$out/f5"
sweep "$s/raw_write.yaml" --set vars.size=$small --set vars.iters=10000 -o "$out/raw"
sweep "$s/raw_write.yaml" --set vars.size=$large --set vars.iters=2000 -o "$out/rawl"
sweep "$s/fig6_latency.yaml" --set vars.variant=$v --set vars.size=$small --set vars.iters=10000 -o "$out/f6"
sweep "$s/fig6_latency.yaml" --set vars.variant=$v --set vars.size=$large --set vars.iters=2000 -o "$out/f6l"
sweep "$s/fig3_pointer_sync.yaml" --set vars.head=push,pull --set vars.tail=wt,cq --set vars.size=$sizes -o "$out/f3"
sweep "$s/fig3_pointer_sync.yaml" --set vars.head=push,pull --set vars.tail=wt,cq --set vars.size=$small \
    --set vars.mode=pingpong --set vars.batching=0 --set vars.iters=100000 -o "$out/f3p"
sweep "$s/fig3_pointer_sync.yaml" --set vars.head=push,pull --set vars.tail=wt,cq --set vars.size=$large \
    --set vars.mode=pingpong --set vars.batching=0 --set vars.iters=2000 -o "$out/f3pl"
sweep "$s/table2_ablation.yaml" --set vars.m=M1,M2,M3,M4,M5,M6,M7,M8,M9 --set vars.size=512 \
    --set vars.mode=bw,pingpong --set vars.iters=10000 -o "$out/t2"
sweep "$s/table2_ablation.yaml" --set vars.m=M1,M2,M3,M4,M5,M6,M7,M8,M9 --set vars.size=1048576 \
    --set vars.mode=bw,pingpong --set vars.iters=2000 -o "$out/t2l"
sweep "$s/fig7_threads.yaml" --set vars.variant=$v --set vars.threads=1,2,4,8 -o "$out/f7"
sweep "$s/fig7_threads.yaml" --set vars.variant=$v --set vars.threads=1,2,4,8 --set vars.mode=pingpong \
    --set vars.batching=0 --set vars.messages=10000 -o "$out/f7p"
for c in nf db; do
    sweep "$s/case_$c.yaml" --set vars.variant=$v -o "$out/$c"
done
sweep "$s/case_http.yaml" --set vars.variant=$v --set vars.requests=10000 -o "$out/http"

p="$here/tools/plot_rb2.py"
mkdir -p "$here/docs/rb2"
echo "== Fig. 3";  $py "$p" fig3 "$out/f3" "$out/f3p,$out/f3pl" -o "$here/docs/rb2/fig3.png" --table
echo "== Fig. 5";  $py "$p" fig5 "$out/f5" "$out/raw,$out/rawl" -o "$here/docs/rb2/fig5.png" --table
echo "== Fig. 6";  $py "$p" fig6 "$out/f6,$out/f6l" "$out/raw,$out/rawl" -o "$here/docs/rb2/fig6.png" --table
echo "== Fig. 7";  $py "$p" fig7 "$out/f7" "$out/f7p" -o "$here/docs/rb2/fig7.png" --table
echo "== Table II"; $py "$p" table2 "$out/t2,$out/t2l"
echo "== Cases";   $py "$p" cases "$out/nf" "$out/db" "$out/http"
