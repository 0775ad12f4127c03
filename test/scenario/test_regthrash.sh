#!/usr/bin/env bash
# Memory registration cost and the registration-thrash attack (issue 11,
# docs/nic.md "Memory registration", scenarios/microbench/regthrash.yaml):
#  1. ibv_reg_mr costs per page: 16 MiB costs 14..18x what 1 MiB costs and
#     far more than 64 KiB; ibv_dereg_mr costs less than ibv_reg_mr; the
#     NIC executed commands (counter nic_cmds);
#  2. ibv_rereg_mr (--mode=rereg) runs and costs time; --copies=4 (one
#     buffer registered 4 times, as with 4 RNICs) costs 4x one copy;
#  3. the attack: with the attacker on the victim's host the victim's 64 B
#     READ rate drops by more than 4 % and the NIC counted invalidated and
#     missed translations; with hardware.nic.mr_write_allocate=false the
#     victim runs exactly as alone (the damage is the cache, not the
#     commands); with hardware.nic.dereg_flush=all it drops further;
#  4. deregistration unpins the pages an MR was registered with: an 8 MiB
#     host_alloc_huge buffer costs the same to deregister after host_free
#     as before it, and less than 8 MiB on 4 KiB pages
#     (test/scenario/programs/huge_dereg.c).
# Args: rnicsim binary, source dir, scratch dir (test/scenario/lib.sh).
set -u
. "$(dirname "$0")/lib.sh"
sc="$src/scenarios/microbench/regthrash.yaml"

run() { # NAME ARGS...: run the scenario with --set ARGS, JSON in $scratch/NAME.json
    local n=$1
    shift
    local sets=()
    for a in "$@"; do sets+=(--set "$a"); done
    timeout 120 "$bin" run "$sc" "${sets[@]}" -o "$scratch/$n.json" >"$scratch/$n.out" 2>&1
    local rc=$?
    check "$n: exit 0 (got $rc)" "[ $rc -eq 0 ]"
}

# ---- 1, 2: registration cost alone (no victim traffic worth the name)
for b in 64KiB 1MiB 16MiB; do
    run "reg-$b" vars.iters=10 vars.tcount=5 "vars.tbytes=$b"
done
run rereg vars.iters=10 vars.tcount=5 vars.tbytes=1MiB 'programs.2.args=[--bytes=1MiB, --count=5, --mode=rereg]'
run copies4 vars.iters=10 vars.tcount=5 vars.tbytes=1MiB 'programs.2.args=[--bytes=1MiB, --count=5, --copies=4]'
check "registration cost grows with the pages; dereg < reg; rereg costs; commands counted" "$py - '$scratch' <<'PY'
import json, sys
d = sys.argv[1]
def row(n):
    j = json.load(open(f'{d}/{n}.json'))
    return j['tables']['regthrash'][0], j['counters']['hosts']['h1']['nic']
r64, _ = row('reg-64KiB')
r1, _ = row('reg-1MiB')
r16, c16 = row('reg-16MiB')
rr, _ = row('rereg')
r4, c4 = row('copies4')
_, c1 = row('reg-1MiB')
print('1 MiB x 4 copies: reg %.2f us, dereg %.2f us; commands %d (one copy: %d)' % (
    r4['reg_us'], r4['dereg_us'], c4['nic_cmds'], c1['nic_cmds']))
assert r4['copies'] == 4 and r4['iterations'] == 5, r4
assert 3.8 < r4['reg_us'] / r1['reg_us'] < 4.2, (r1, r4)
assert 3.8 < r4['dereg_us'] / r1['dereg_us'] < 4.2, (r1, r4)
print('reg us: 64KiB %.2f  1MiB %.2f  16MiB %.2f; dereg 16MiB %.2f; rereg 1MiB %.2f' % (
    r64['reg_us'], r1['reg_us'], r16['reg_us'], r16['dereg_us'], rr['rereg_us']))
assert r64['iterations'] == 5 and r16['iterations'] == 5, (r64, r16)
assert 14 < r16['reg_us'] / r1['reg_us'] < 18, (r1, r16)
assert r1['reg_us'] > 4 * r64['reg_us'], (r64, r1)
assert 0 < r16['dereg_us'] < r16['reg_us'], r16
assert rr['iterations'] == 5 and rr['rereg_us'] > 0 and rr['reg_us'] == 0, rr
assert c16['nic_cmds'] >= 5 * 8, c16  # 4096 pages / 512 per command: 8 per registration
PY"

# ---- 3: the attack
run alone vars.tcount=0
run attack
run attack-no-wa hardware.nic.mr_write_allocate=false
run attack-flush-all hardware.nic.dereg_flush=all
check "the attacker hurts the victim through the translation caches" "$py - '$scratch' <<'PY'
import json, sys
d = sys.argv[1]
def get(n):
    j = json.load(open(f'{d}/{n}.json'))
    return j['tables']['microbench'][0]['mops'], j['counters']['hosts']['h1']['nic']
a, ca = get('alone')
x, cx = get('attack')
w, cw = get('attack-no-wa')
f, cf = get('attack-flush-all')
print('victim Mops: alone %.4f, attack %.4f, no write-allocate %.4f, flush all %.4f' % (a, x, w, f))
print('victim MTT misses: alone %d, attack %d; invalidated %d' % (ca['mtt_misses'], cx['mtt_misses'], cx['xlate_invalidated']))
assert x < 0.96 * a, (a, x)
assert cx['mtt_misses'] > 2 * ca['mtt_misses'] and cx['xlate_invalidated'] > 0, (ca, cx)
assert abs(w - a) < 0.002 * a, (a, w)
assert f < x, (x, f)
PY"
# ---- 4: the page size an MR was registered with, also after its memory is gone
cc="$(dirname "$bin")/rnicsim-cc"
if "$cc" -O2 -Wall -Wextra -Werror -o "$scratch/huge_dereg.so" "$src/test/scenario/programs/huge_dereg.c" \
    2>"$scratch/huge_dereg.cc"; then
    write_scenario huge_dereg <<'YAML'
name: huge_dereg
profile: cx5-100g
topology: {kind: star, hosts: 1, link: {rate: 100Gbps, delay: 10ns}}
programs:
  - {host: h0, program: ./huge_dereg.so}
YAML
    run_timeout=60 run_scenario huge_dereg
    rc=$?
    check "huge_dereg: exit 0 (got $rc)" "[ $rc -eq 0 ]"
    check "dereg of a huge-page MR: same cost after host_free, less than on 4 KiB pages" "$py - '$scratch/huge_dereg.json' <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))['tables']['huge_dereg'][0]
print(r)
assert 0 < r['dereg_huge_ns'] == r['dereg_huge_after_free_ns'] < r['dereg_small_pages_ns'], r
PY"
else
    bad "huge_dereg.c builds with rnicsim-cc"
    cat "$scratch/huge_dereg.cc"
fi
finish
