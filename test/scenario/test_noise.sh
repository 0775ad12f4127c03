#!/usr/bin/env bash
# Seeded jitter in whole runs (sim/noise.c, docs/noise.md): a perftest
# write/send latency run on the cx5-100g profile (poll-wakeup noise on by
# default)
#  1. has p99 > p50 and p99.9 >= p99 for both tests;
#  2. is byte-identical (JSON) run twice with the same seed, and differs
#     with another seed;
#  3. with --set hardware.host.cpu.wakeup_noise=none has p99 within 1 % of
#     p50 (no variation left) and the same median within 2 %.
# Args: rnicsim binary, source dir, scratch dir (test/scenario/lib.sh).
set -u
. "$(dirname "$0")/lib.sh"
s="$scratch/lat.yaml"
cat >"$s" <<'YAML'
name: noise-lat
seed: 1
stop_time: 10s
profile: cx5-100g
topology: {kind: back-to-back, hosts: 2, link: {rate: 100Gbps, delay: 2500ps}}
programs:
  - {host: h1, program: perftest, args: [--server, "--tests=write,send", --modes=lat, --sizes=8, --iters=2000]}
  - {host: h0, program: perftest, args: [--client, "--tests=write,send", --modes=lat, --sizes=8, --iters=2000]}
YAML
for n in a b; do timeout 60 "$bin" run "$s" -o "$scratch/$n.json" >/dev/null 2>&1; done
timeout 60 "$bin" run "$s" --seed 2 -o "$scratch/seed2.json" >/dev/null 2>&1
timeout 60 "$bin" run "$s" --set hardware.host.cpu.wakeup_noise=none -o "$scratch/off.json" >/dev/null 2>&1
check "same seed twice: identical JSON" "cmp -s '$scratch/a.json' '$scratch/b.json'"
check "noise on: p99 > p50, p99.9 >= p99; another seed other samples; off: flat" "$py - '$scratch' <<'PY'
import json, sys
d = sys.argv[1]
def lat(n):
    t = json.load(open(f'{d}/{n}.json'))['tables']
    return {k: t[k + '_lat'][0] for k in ('write', 'send')}
on, s2, off = lat('a'), lat('seed2'), lat('off')
for k in ('write', 'send'):
    r, o, q = on[k], off[k], s2[k]
    print(k, 'on p50 %.3f p99 %.3f p99.9 %.3f | off p50 %.3f p99 %.3f' % (
        r['t_p50_us'], r['t_p99_us'], r['t_p999_us'], o['t_p50_us'], o['t_p99_us']))
    assert r['t_p99_us'] > r['t_p50_us'] + 0.05 and r['t_p999_us'] >= r['t_p99_us'], r
    assert (q['t_avg_us'], q['t_max_us']) != (r['t_avg_us'], r['t_max_us']), (q, r)
    assert o['t_p99_us'] <= o['t_p50_us'] * 1.01, o
    assert abs(o['t_p50_us'] - r['t_p50_us']) < 0.02 * o['t_p50_us'], (o, r)
PY"
finish
