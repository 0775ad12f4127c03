#!/usr/bin/env bash
# The shape of the quickstart results (reduced iteration counts): latency
# grows with message size, 1 MiB WRITE bandwidth is close to (but not above)
# the 100 Gb/s line rate, READ and SEND are equally sane.
# Args: rnicsim binary, source dir, scratch dir (test/scenario/lib.sh).
set -u
. "$(dirname "$0")/lib.sh"

args='"--tests=write,read,send", "--modes=lat,bw", "--sizes=2:1048576", --iters=100, --bw-bytes=16MiB'
timeout 600 "$bin" run "$src/scenarios/quickstart.yaml" -o "$scratch/q.json" --quiet \
    --set "programs.0.args=[--server, $args]" --set "programs.1.args=[--client, $args]" \
    >"$scratch/q.out" 2>"$scratch/q.err"
rc=$?
if [ $rc -eq 0 ]; then ok "reduced quickstart exits 0"; else
    bad "reduced quickstart exits 0 (got $rc)"
    tail -20 "$scratch/q.err"
fi

# Each check prints PASS/FAIL lines itself; the exit status counts failures.
$py - "$scratch/q.json" >"$scratch/checks.txt" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
t = d["tables"]
fails = 0
def check(name, cond, detail=""):
    global fails
    print(("PASS " if cond else "FAIL ") + name + ("" if cond else "  [" + detail + "]"))
    fails += 0 if cond else 1

sizes = [2 ** k for k in range(1, 21)]
for test in ("write", "read", "send"):
    lat = t.get(test + "_lat", [])
    bw = t.get(test + "_bw", [])
    check(f"{test}_lat has every size 2 B .. 1 MiB", [r["size_bytes"] for r in lat] == sizes,
          str([r["size_bytes"] for r in lat]))
    check(f"{test}_bw has every size 2 B .. 1 MiB", [r["size_bytes"] for r in bw] == sizes,
          str([r["size_bytes"] for r in bw]))
    if len(lat) != len(sizes) or len(bw) != len(sizes):
        continue
    p50 = [r["t_p50_us"] for r in lat]
    # flat up to the inline / one-packet sizes on hardware too: with the
    # seeded poll-wakeup noise (docs/noise.md) neighbouring medians may
    # differ by a few ns either way, so "never falls" allows 20 ns
    check(f"{test} latency p50 never falls with size (20 ns of noise allowed)",
          all(b >= a - 0.020 for a, b in zip(p50, p50[1:])),
          " ".join(f"{v:.3f}" for v in p50))
    check(f"{test} latency p50 grows strictly from 4 KiB up", all(b > a for a, b in zip(p50[11:], p50[12:])),
          " ".join(f"{v:.3f}" for v in p50[11:]))
    check(f"{test} latency p50(1 MiB) > p50(2 B) + 80 us (1 MiB at 100 Gb/s is 84 us)",
          p50[-1] > p50[0] + 80, f"{p50[0]:.3f} -> {p50[-1]:.3f}")
    check(f"{test} small-message p50 between 0.5 and 5 us", 0.5 <= p50[0] <= 5.0, f"{p50[0]:.3f}")
    check(f"{test} p99 >= p50 everywhere", all(r["t_p99_us"] >= r["t_p50_us"] for r in lat))
    g = [r["bw_gbps"] for r in bw]
    check(f"{test} bandwidth at 1 MiB within 85..100 Gb/s", 85.0 <= g[-1] <= 100.0, f"{g[-1]:.2f}")
    check(f"{test} bandwidth never above 100 Gb/s", max(g) <= 100.0, f"{max(g):.2f}")
    check(f"{test} bandwidth at 64 KiB >= 4x the 64 B one", g[15] >= 4 * g[5], f"{g[5]:.2f} {g[15]:.2f}")
w = [r["t_p50_us"] for r in t.get("write_lat", [])]
r_ = [r["t_p50_us"] for r in t.get("read_lat", [])]
if w and r_:
    check("small READ (full round trip) slower than small WRITE (half round trip)", r_[0] > w[0],
          f"read {r_[0]:.3f} write {w[0]:.3f}")
sys.exit(1 if fails else 0)
PY
cat "$scratch/checks.txt"
pass=$((pass + $(grep -c '^PASS' "$scratch/checks.txt")))
fail=$((fail + $(grep -c '^FAIL' "$scratch/checks.txt")))
[ -s "$scratch/checks.txt" ] || { bad "JSON checks did not run"; }

finish
