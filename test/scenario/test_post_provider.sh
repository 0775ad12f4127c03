#!/usr/bin/env bash
# The verbs provider's post path (host.cpu.provider, docs/host.md "Posting
# per provider", docs/huang_mechanisms.md).  One perftest client thread
# posts 64 B WRs one per ibv_post_send on cx3-fdr56 (libmlx4): only a single
# BlueFlame-eligible WR -- inline data, or a READ (libmlx4 commit 662a765) --
# is copied through the BlueFlame register and flushed
# (host.cpu.doorbell_gap, 379 ns: 2.64 M posts/s); with rdma-core's libmlx4
# (provider mlx4) a non-inline WRITE rings
# the uncached send doorbell (host.cpu.uc_doorbell_gap) and the NIC fetches
# its WQE over PCIe, so the thread posts faster and the NIC binds (one WQE
# per nic.wqe_proc, 7.5 M/s).  With provider mlx5 every post flushes, so
# inline or not makes no difference to the rate (the profiles of ConnectX-4
# and later; byte-identical to before the provider existed).  MLNX_OFED's
# libmlx4 (mlx4-ofed, cx3-fdr56's) BlueFlames any single WR that fits.
# Args: rnicsim binary, source dir, scratch dir (test/scenario/lib.sh).
set -u
. "$(dirname "$0")/lib.sh"
rm -f "$scratch"/*.json # a failed run leaves its -o file alone: never read an old one

run() { # name provider test inline [size]
    timeout 120 "$bin" run "$src/validation/scenarios/perftest.yaml" --quiet \
        --set profile=cx3-fdr56 --set hardware.host.cpu.provider=$2 --set vars.test=$3 \
        --set vars.mode=bw --set vars.size=${5:-64} --set vars.inline=$4 --set vars.iters=4000 \
        -o "$scratch/$1.json" >"$scratch/$1.out" 2>&1
    local rc=$?
    check "$1: exit 0 (got $rc)" "[ $rc -eq 0 ] || { tail -3 '$scratch/$1.out'; false; }"
}
run mlx4_write mlx4 write 0
run mlx4_write_inl mlx4 write 220
run mlx4_read mlx4 read 0
run mlx5_write mlx5 write 0
run ofed_write mlx4-ofed write 0
run mlx5_write_inl mlx5 write 220
# libmlx4's WQE size rule: an inline WRITE of 200 B is 16 units of 16 B (control,
# remote address, 4 inline segments that stop at 64 B boundaries) = the 256 B
# BlueFlame buffer; 220 B is 17 units and rings the plain doorbell
run mlx4_inl200 mlx4 write 220 200
run mlx4_inl220 mlx4 write 220 220

check "mlx4: non-inline WRITE posts > 2x inline (no flush) and its WQEs are fetched; inline and READ are BlueFlame at 2.64 M/s" \
    "$py - '$scratch' <<'PY'
import json, sys
def get(n):
    d = json.load(open(sys.argv[1] + '/' + n + '.json'))
    rate = next(iter(d['tables'].values()))[0]['msg_rate_mpps']
    return rate, d['counters']['hosts']['h0']['pcie']['tlps_wqe_fetch']
w, wf = get('mlx4_write'); wi, wif = get('mlx4_write_inl'); r, rf = get('mlx4_read')
m, mf = get('mlx5_write'); mi, mif = get('mlx5_write_inl')
print('mlx4 write %.3f (%d WQE fetches), inline %.3f (%d), read %.3f (%d); mlx5 write %.3f, inline %.3f'
      % (w, wf, wi, wif, r, rf, m, mi))
assert w > 2 * wi, (w, wi)
assert wf > 3000 and wif == 0 and rf == 0, (wf, wif, rf)
assert abs(wi - 2.64) < 0.05 and abs(r - 2.64) < 0.05, (wi, r)
assert abs(m - mi) < 0.02 * mi and abs(m - 2.64) < 0.05, (m, mi)
# MLNX_OFED's libmlx4 (prefer_bf on): a single non-inline WRITE is BlueFlamed too
o, of = get('ofed_write')
print('mlx4-ofed non-inline write %.3f (%d fetches)' % (o, of))
assert abs(o - 2.64) < 0.05 and of == 0, (o, of)
a, af = get('mlx4_inl200'); b, bf = get('mlx4_inl220')
print('mlx4 inline write 200 B %.3f (%d fetches), 220 B %.3f (%d)' % (a, af, b, bf))
assert abs(a - 2.64) < 0.05 and af == 0 and b > 2 * a and bf > 3000, (a, af, b, bf)
PY"
# The BlueFlame lock with dedicated registers (host.cpu.bf_dedicated): 1:M,
# 4 requesting threads x 4 QPs of one context, inline WRITE requests.  With
# every QP locked the node posts at most 1 / (drain + lock line move) =
# 1 / 439 ns; with 16 dedicated registers no post takes the lock, as without
# it (MLNX_OFED's libmlx4 gives a context's first 7 QPs their own register).
for d in 0 16; do
    timeout 120 "$bin" run "$src/scenarios/huang/1m_S.yaml" --quiet --set vars.proto=write_write \
        --set vars.S=4 --set vars.Q=4 --set vars.R=16 --set vars.warmup=500us --set vars.duration=1ms \
        --set hardware.host.cpu.bf_lock_context=true --set hardware.host.cpu.bf_dedicated=$d \
        -o "$scratch/dedic$d.json" >"$scratch/dedic$d.out" 2>&1
    rc=$?
    check "1:M S=4, lock on, bf_dedicated=$d: exit 0 (got $rc)" "[ $rc -eq 0 ]"
done
timeout 120 "$bin" run "$src/scenarios/huang/1m_S.yaml" --quiet --set vars.proto=write_write \
    --set vars.S=4 --set vars.Q=4 --set vars.R=16 --set vars.warmup=500us --set vars.duration=1ms \
    -o "$scratch/nolock.json" >"$scratch/nolock.out" 2>&1
rc=$?
check "1:M S=4, lock off: exit 0 (got $rc)" "[ $rc -eq 0 ]"
check "dedicated registers bypass the lock: 16 of them post as without the lock, none > 2x slower" \
    "$py - '$scratch' <<'PY'
import json, sys
m = lambda n: json.load(open(sys.argv[1] + '/' + n + '.json'))['tables']['huang'][0]['mops']
d0, d16, off = m('dedic0'), m('dedic16'), m('nolock')
print('mops: all locked %.3f, all dedicated %.3f, no lock %.3f' % (d0, d16, off))
assert d0 <= 1e3 / 439 + 0.001 and abs(d16 - off) <= 0.01 * off and off >= 2 * d0, (d0, d16, off)
PY"
finish
