#!/usr/bin/env bash
# rdma-core v44's libibverbs/examples, compiled unmodified with rnicsim-cc
# (stand-ins for rdma-core's internal config.h, ccan/minmax.h,
# util/compiler.h and infiniband/driver.h in test/third_party/rdma-core/)
# and run between two simulated hosts with their usual flags.  Each
# pingpong exchanges its QP numbers over its own TCP code (port 18515) on
# the simulated management network and must finish with status 0 on both
# sides, printing its usual lines; the numbers are checked against what the
# model gives (a 4 KiB RC ping-pong round trip of ~5 us on the cx5-100g
# profile) and across both sides.
# Args: rnicsim binary, source dir, scratch dir (test/scenario/lib.sh).
set -u
. "$(dirname "$0")/lib.sh"
cc="$(dirname "$bin")/rnicsim-cc"
tp=$(third_party_dir) || { bad "third-party sources found"; finish; exit 1; }
ex="$tp/rdma-core-v44.0-examples"
mkdir -p "$scratch"
# The sanitizer build: these programs' own leaks are theirs (not freed at exit).
export ASAN_OPTIONS="${ASAN_OPTIONS:-}${ASAN_OPTIONS:+:}detect_leaks=0"

for p in rc uc ud srq xsrq; do
    if "$cc" -O2 -Wall -I "$src/test/third_party/rdma-core" -I "$ex" -o "$scratch/${p}_pingpong.so" \
        "$ex/${p}_pingpong.c" "$ex/pingpong.c" 2>"$scratch/cc_$p.err"; then
        ok "${p}_pingpong.c builds unmodified"
    else
        bad "${p}_pingpong.c builds unmodified"
        cat "$scratch/cc_$p.err"
    fi
done
if "$cc" -O2 -Wall -I "$src/test/third_party/rdma-core" -I "$ex" -o "$scratch/devinfo.so" \
    "$ex/devinfo.c" 2>"$scratch/cc_devinfo.err"; then
    ok "devinfo.c builds unmodified"
else
    bad "devinfo.c builds unmodified"
    cat "$scratch/cc_devinfo.err"
fi

# pair NAME PROGRAM "SERVER ARGS" "CLIENT ARGS": run a server on h0 and a
# client on h1 (the client's last argument: h0); prints the exit status.
pair() {
    local name=$1 prog=$2 sargs=$3 cargs=$4
    write_scenario "$name" <<YAML
name: $name
profile: cx5-100g
hardware: {nic.link_layer: ${link_layer:-ethernet}}
topology: {kind: star, hosts: 2, link: {rate: 100Gbps, delay: 10ns}}
programs:
  - {host: h0, program: ./$prog.so, args: [$sargs]}
  - {host: h1, program: ./$prog.so, args: [$cargs]}
YAML
    run_scenario "$name"
    echo $?
}
# usec/iter printed by side N (0 server, 1 client) of a run
usec() { sed -n "s/^\[h$2\/[a-z_]*#$2\] [0-9]* iters in [0-9.]* seconds = \([0-9.]*\) usec\/iter$/\1/p" "$scratch/$1.out"; }
between() { awk -v v="$1" -v lo="$2" -v hi="$3" 'BEGIN { exit !(v != "" && v >= lo && v <= hi) }'; }

rc=$(pair rc rc_pingpong '-g, "0"' '-g, "0", h0')
check "rc_pingpong -g 0: both sides exit 0 (got $rc)" "[ $rc -eq 0 ]"
check "rc_pingpong prints its addresses: QPN, PSN, the RoCE GID of each host" \
    "grep -q '^\[h0/rc_pingpong#0\]   local address:  LID 0x0000, QPN 0x[0-9a-f]*, PSN 0x[0-9a-f]*, GID ::ffff:10.0.0.1$' '$scratch/rc.out' && grep -q '^\[h1/rc_pingpong#1\]   remote address: LID 0x0000, QPN 0x[0-9a-f]*, PSN 0x[0-9a-f]*, GID ::ffff:10.0.0.1$' '$scratch/rc.out'"
check "rc_pingpong: 8192000 bytes and 1000 iters on both sides" \
    "[ \$(grep -c '8192000 bytes in' '$scratch/rc.out') -eq 2 ] && [ \$(grep -c '1000 iters in' '$scratch/rc.out') -eq 2 ]"
s=$(usec rc 0)
c=$(usec rc 1)
check "rc_pingpong 4 KiB round trip 4.5..6 us (server $s, client $c)" \
    "between '$s' 4.5 6 && between '$c' 4.5 6"

rc=$(pair rc_plain rc_pingpong '' 'h0')
check "rc_pingpong without -g fails as on real RoCE: no GRH for the RoCE port (got $rc)" \
    "[ $rc -eq 1 ] && grep -q 'Failed to modify QP to RTR' '$scratch/rc_plain.out' '$scratch/rc_plain.err'"

# An InfiniBand port (nic.link_layer ib): the usual flags, no -g; QPs
# addressed by LID as on an IB fabric.
rc=$(link_layer=ib pair rc_ib rc_pingpong '' 'h0')
check "rc_pingpong on an InfiniBand port, no -g: exits 0 with LIDs, same round trip (got $rc)" \
    "[ $rc -eq 0 ] && grep -q '^\[h1/rc_pingpong#1\]   local address:  LID 0x0002, QPN 0x[0-9a-f]*, PSN 0x[0-9a-f]*, GID ::$' '$scratch/rc_ib.out' && between '$(usec rc_ib 1)' 4.5 6"
rc=$(link_layer=ib pair ud_ib ud_pingpong '' 'h0')
check "ud_pingpong on an InfiniBand port, no -g (AH by LID): exits 0 (got $rc)" \
    "[ $rc -eq 0 ] && [ \$(grep -c '1000 iters in' '$scratch/ud_ib.out') -eq 2 ]"
# with -g 0 on the InfiniBand port the AH is global: the packets carry a GRH
# and the receive buffer gets the IB GRH (docs/nic.md "Framing")
rc=$(link_layer=ib pair ud_ibg ud_pingpong '-g, "0"' '-g, "0", h0')
check "ud_pingpong -g 0 on an InfiniBand port (GRH on the wire): exits 0 (got $rc)" \
    "[ $rc -eq 0 ] && [ \$(grep -c '1000 iters in' '$scratch/ud_ibg.out') -eq 2 ]"

rc=$(pair rc_e rc_pingpong '-g, "0", -e' '-g, "0", -e, h0')
ce=$(usec rc_e 1)
check "rc_pingpong -e (completion events) exits 0 and is slower than polling ($ce > $c us)" \
    "[ $rc -eq 0 ] && awk 'BEGIN { exit !($ce > $c) }'"

rc=$(pair rc_big rc_pingpong '-g, "0", -s, "65536", -n, "100", -m, "2048", -r, "64"' \
    '-g, "0", -s, "65536", -n, "100", -m, "2048", -r, "64", h0')
check "rc_pingpong -s 65536 -n 100 -m 2048 -r 64 exits 0 (got $rc)" \
    "[ $rc -eq 0 ] && grep -q '^\[h1/rc_pingpong#1\] 13107200 bytes in ' '$scratch/rc_big.out'"

rc=$(pair rc_n rc_pingpong '-g, "0", -N' '-g, "0", -N, h0')
check "rc_pingpong -N (ibv_wr_* API) exits 0 with the numbers of ibv_post_send (got $rc)" \
    "[ $rc -eq 0 ] && [ '$(usec rc_n 1)' = '$c' ]"

rc=$(pair rc_t rc_pingpong '-g, "0", -t' '-g, "0", -t, h0')
check "rc_pingpong -t (completion timestamps, ibv_create_cq_ex) exits 0 (got $rc)" "[ $rc -eq 0 ]"
avg=$(sed -n 's/^\[h1\/rc_pingpong#1\] Average receive completion clock cycles = \([0-9.]*\)$/\1/p' "$scratch/rc_t.out")
check "rc_pingpong -t: receive completions ~one round trip apart at 1 GHz ($avg cycles, $c us)" \
    "awk 'BEGIN { d = $avg / 1000 - $c; exit !(d < 0.1 && d > -0.1) }'"

rc=$(pair rc_j rc_pingpong '-g, "0", -j, -c' '-g, "0", -j, -c, h0')
check "rc_pingpong -j -c (device memory, data checked) exits 0 without 'invalid data' (got $rc)" \
    "[ $rc -eq 0 ] && ! grep -q 'invalid data' '$scratch/rc_j.out'"

rc=$(pair uc uc_pingpong '-g, "0", -e, -s, "1024", -n, "200"' '-g, "0", -e, -s, "1024", -n, "200", h0')
check "uc_pingpong -g 0 -e -s 1024 -n 200 exits 0 (got $rc)" \
    "[ $rc -eq 0 ] && [ \$(grep -c '200 iters in' '$scratch/uc.out') -eq 2 ]"

rc=$(pair ud ud_pingpong '-g, "0", -s, "1024", -r, "100"' '-g, "0", -s, "1024", -r, "100", h0')
check "ud_pingpong -g 0 -s 1024 -r 100 exits 0 (got $rc)" \
    "[ $rc -eq 0 ] && [ \$(grep -c '1000 iters in' '$scratch/ud.out') -eq 2 ]"

rc=$(pair srq srq_pingpong '-g, "0", -q, "4", -n, "200", -e' '-g, "0", -q, "4", -n, "200", -e, h0')
check "srq_pingpong -g 0 -q 4 -n 200 -e exits 0 (got $rc)" \
    "[ $rc -eq 0 ] && [ \$(grep -c '200 iters in' '$scratch/srq.out') -eq 2 ]"

# XRC (sim/nic/xrc.c): each side's XRC_SEND QP sends into the peer's XRC
# SRQ through the peer's XRC_RECV QP; each prints its local and remote
# QPNs and SRQ number, then "success".
rc=$(pair xsrq xsrq_pingpong '-g, "0"' '-g, "0", h0')
x="$scratch/xsrq.out"
srqn0=$(sed -n 's/^\[h0\/xsrq_pingpong#0\]    local: .*SRQN \([0-9a-f]*\),.*/\1/p' "$x")
check "xsrq_pingpong -g 0: both sides exit 0 and print success (got $rc)" \
    "[ $rc -eq 0 ] && [ \$(grep -c '^\[h[01]/xsrq_pingpong#[01]\] success$' '$x') -eq 2 ]"
check "xsrq_pingpong: the client learns the server's XRC SRQ number ($srqn0) and QPNs" \
    "[ -n '$srqn0' ] && [ '$srqn0' != 000000 ] && grep -q '^\[h1/xsrq_pingpong#1\]   remote: LID 0000, QPN RECV [0-9a-f]* SEND [0-9a-f]*, PSN [0-9a-f]*, SRQN $srqn0, GID ::ffff:10.0.0.1$' '$x'"

# -e (completion events), -n, -s past the MTU (-m 1024): five-packet XRC
# SENDs, captured at h0.  Debian 12's tshark names the XRC opcodes but
# does not dissect the XRCETH, so its 4 bytes after the BTH (reserved 0,
# the 24-bit SRQ number of the receiving side) are read from the frames.
write_scenario xsrq_e <<'YAML'
name: xsrq_e
profile: cx5-100g
topology: {kind: star, hosts: 2, link: {rate: 100Gbps, delay: 10ns}}
capture:
  - {host: h0, file: xsrq_e.pcap}
programs:
  - {host: h0, program: ./xsrq_pingpong.so, args: [-g, "0", -e, -n, "50", -s, "5000", -m, "1024"]}
  - {host: h1, program: ./xsrq_pingpong.so, args: [-g, "0", -e, -n, "50", -s, "5000", -m, "1024", h0]}
YAML
run_scenario xsrq_e
rc=$?
x="$scratch/xsrq_e.out"
check "xsrq_pingpong -g 0 -e -n 50 -s 5000 -m 1024: both sides exit 0 and print success (got $rc)" \
    "[ $rc -eq 0 ] && [ \$(grep -c 'success$' '$x') -eq 2 ]"
srq_h0=$(sed -n 's/^\[h0\/xsrq_pingpong#0\]    local: .*SRQN \([0-9a-f]*\),.*/\1/p' "$x")
srq_h1=$(sed -n 's/^\[h1\/xsrq_pingpong#1\]    local: .*SRQN \([0-9a-f]*\),.*/\1/p' "$x")
if command -v tshark >/dev/null 2>&1; then
    tshark -r "$scratch/xsrq_e.pcap" -T fields -e ip.src -e infiniband.bth.opcode -e frame.len \
        >"$scratch/xsrq_e.tsv" 2>/dev/null
    check "xsrq pcap: tshark reads XRC SEND FIRST/MIDDLE/LAST (160-162) and XRC ACK (177) frames only" \
        "[ -s '$scratch/xsrq_e.tsv' ] && ! cut -f2 '$scratch/xsrq_e.tsv' | grep -qv '^\(160\|161\|162\|177\)$'"
    check "xsrq pcap: 1 KiB SEND packets of 1086 bytes (BTH + 4-byte XRCETH + payload + ICRC)" \
        "awk '\$2 == 160 || \$2 == 161 { if (\$3 != 1086) bad = 1; n++ } END { exit bad || n < 400 }' '$scratch/xsrq_e.tsv'"
else
    bad "tshark is not installed (tools/test.sh installs it: apt-get install tshark)"
fi
check "xsrq pcap: every request's XRCETH names the receiver's SRQ (h0 -> $srq_h1, h1 -> $srq_h0)" \
    "$py - '$scratch/xsrq_e.pcap' '$srq_h0' '$srq_h1' <<'PY'
import struct, sys
data = open(sys.argv[1], 'rb').read()
want = {'10.0.0.1': sys.argv[3], '10.0.0.2': sys.argv[2]}
off, n = 24, 0
while off < len(data):
    incl = struct.unpack('<I', data[off + 8:off + 12])[0]
    f = data[off + 16:off + 16 + incl]
    off += 16 + incl
    src = '.'.join(str(b) for b in f[26:30])
    if 0xa0 <= f[42] <= 0xa5:  # XRC SENDs carry the XRCETH right after the BTH
        assert f[54:58].hex() == '00' + want[src], (src, f[54:58].hex())
        n += 1
assert n > 400, n
PY"

write_scenario devinfo <<'YAML'
name: devinfo
profile: cx5-100g
topology: {kind: star, hosts: 2, link: {rate: 100Gbps, delay: 10ns}}
programs:
  - {host: h0, program: ./devinfo.so}
  - {host: h1, program: ./devinfo.so, args: [-v, -d, rnicsim0, -i, "1"]}
  - {host: h1, program: ./devinfo.so, args: [-l]}
YAML
run_timeout=60 run_scenario devinfo
rc=$?
d="$scratch/devinfo.out"
check "devinfo, devinfo -v -d rnicsim0 -i 1, devinfo -l exit 0 (got $rc)" "[ $rc -eq 0 ]"
check "devinfo: the device as the profile describes it (ConnectX-5 identity, RoCE port)" \
    "grep -q '^\[h0/devinfo#0\] hca_id:	rnicsim0$' '$d' && grep -q 'vendor_part_id:			4119' '$d' && grep -q 'link_layer:		Ethernet' '$d' && grep -q 'active_mtu:		4096 (5)' '$d'"
check "devinfo -v: GID of host h1, RoCE v2, and the completion timestamp clock" \
    "grep -q 'GID\[  0\]:		::ffff:10.0.0.2, RoCE v2' '$d' && grep -q 'hca_core_clock:			1000000kHZ' '$d'"
check "devinfo -l: 1 HCA found: rnicsim0" \
    "grep -q '^\[h1/devinfo#2\] 1 HCA found:$' '$d' && grep -q '^\[h1/devinfo#2\] 	rnicsim0$' '$d'"

# Deterministic: the PSNs (lrand48 seeded with getpid() * time()) and
# every number are the same at every run.
pair rc2 rc_pingpong '-g, "0"' '-g, "0", h0' >/dev/null
check "rc_pingpong twice: identical output" "cmp -s '$scratch/rc.out' '$scratch/rc2.out'"

finish
