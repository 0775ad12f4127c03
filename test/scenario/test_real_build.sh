#!/usr/bin/env bash
# The real-hardware build: configure a separate build with
# -DRNICSIM_REAL_VERBS=ON, build real_perftest, real_rima_stream (the
# portable append-queue layer protocols/rima linked in), real_hello_write
# and real_hostbench (the host model's calls - CPUs, sockets, host_alloc,
# host_touch - on sysfs, pthread_setaffinity_np and mbind) against the
# system libibverbs with zero warnings, and check on this
# machine (no RDMA device) that they say "no RDMA device found" and exit 1
# (rima_stream: 2, its setup-error status).  The rima layer built that way
# references no append-queue verb, and answers RIMA_HW with EOPNOTSUPP.  Also checks
# the POSIX out-of-band board over TCP between two processes, and that the
# user-program example builds as a simulator plug-in (shared object).
# Args: rnicsim binary (unused), source dir, scratch dir.
set -u
. "$(dirname "$0")/lib.sh"
build="$scratch/build-real"

# 1. configure + build with warnings as errors, and no warning in the log
log="$scratch/build.log"
if cmake -S "$src" -B "$build" -DRNICSIM_REAL_VERBS=ON -DRNICSIM_WERROR=ON >"$log" 2>&1 &&
    cmake --build "$build" --target real_perftest real_rima_stream real_hello_write real_hostbench real_rb2 \
        -j2 >>"$log" 2>&1; then
    ok "configure and build real_perftest, real_rima_stream, real_hello_write, real_hostbench"
else
    bad "configure and build real_perftest, real_rima_stream, real_hello_write, real_hostbench"
    tail -40 "$log"
fi
check "build has zero warnings" "! grep -qi 'warning:' '$log'"

# 2. no device here: message and exit status 1 (both roles, and the example)
if [ -x "$build/real_perftest" ]; then
    out=$(RNICSIM_OOB_PORT=1 timeout 20 "$build/real_perftest" --client 127.0.0.1 2>&1)
    rc=$?
    check "real_perftest --client: 'no RDMA device found'" \
        "grep -q 'no RDMA device found' <<<\"\$out\""
    check "real_perftest --client: exit 1 (got $rc)" "[ $rc -eq 1 ]"
    out=$(RNICSIM_OOB_PORT=0 timeout 20 "$build/real_perftest" --server --tests=write 2>&1)
    rc=$?
    check "real_perftest --server: no device, exit 1 (got $rc)" \
        "[ $rc -eq 1 ] && grep -q 'no RDMA device found' <<<\"\$out\""
    out=$(timeout 20 "$build/real_perftest" --help 2>&1)
    rc=$?
    check "real_perftest --help: exit 0, lists options" \
        "[ $rc -eq 0 ] && grep -q -- '--tx-depth' <<<\"\$out\" && grep -q RNICSIM_OOB_SERVER <<<\"\$out\""
    timeout 20 "$build/real_perftest" --client --sizes=bogus 127.0.0.1 >/dev/null 2>&1
    rc=$?
    check "real_perftest bad --sizes: exit 1 (got $rc)" "[ $rc -eq 1 ]"
else
    bad "real_perftest was not built"
fi
if [ -x "$build/real_hostbench" ]; then
    # no RDMA device is needed for the threads test: the CPU calls on this
    # machine (pinning to CPU 0 twice: both run there)
    out=$(timeout 20 "$build/real_hostbench" --test=threads --cpus=0,0 --iters=10 --work=1000 2>&1)
    rc=$?
    check "real_hostbench --test=threads: pinned threads run (exit $rc)" \
        "[ $rc -eq 0 ] && grep -q '2 thread(s), 10 x 1000 ns' <<<\"\$out\""
    out=$(RNICSIM_OOB_PORT=0 timeout 20 "$build/real_hostbench" --server 2>&1)
    rc=$?
    check "real_hostbench --server: no device, exit 1 (got $rc)" \
        "[ $rc -eq 1 ] && grep -q 'no RDMA device found' <<<\"\$out\""
else
    bad "real_hostbench was not built"
fi
if [ -x "$build/real_rb2" ]; then
    # RB² and its rivals on real rdma-core: no device here, the set-up error
    out=$(RNICSIM_OOB_PORT=0 timeout 20 "$build/real_rb2" --server --variant=sd 2>&1)
    rc=$?
    check "real_rb2 --server: no device, exit 2 (got $rc)" \
        "[ $rc -eq 2 ] && grep -q 'no RDMA device found' <<<\"\$out\""
    timeout 20 "$build/real_rb2" --client --alpha=4 --beta=8 --tail=lenword 127.0.0.1 >/dev/null 2>&1
    rc=$?
    check "real_rb2: an impossible configuration is refused, exit 2 (got $rc)" "[ $rc -eq 2 ]"
else
    bad "real_rb2 was not built"
fi
if [ -x "$build/real_hello_write" ]; then
    out=$(RNICSIM_OOB_PORT=0 timeout 20 "$build/real_hello_write" --server 2>&1)
    rc=$?
    check "real_hello_write: no device, exit 1 (got $rc)" \
        "[ $rc -eq 1 ] && grep -q 'no RDMA device found' <<<\"\$out\""
fi

if [ -x "$build/real_rima_stream" ]; then
    out=$(RNICSIM_OOB_PORT=0 timeout 20 "$build/real_rima_stream" --server --mode=sw 2>&1)
    rc=$?
    check "real_rima_stream --server: no device, exit 2 (got $rc)" \
        "[ $rc -eq 2 ] && grep -q 'no RDMA device found' <<<\"\$out\""
    out=$(timeout 20 "$build/real_rima_stream" --help 2>&1)
    rc=$?
    check "real_rima_stream --help: exit 0, lists --mode" \
        "[ $rc -eq 0 ] && grep -q -- '--mode=hw|sw|auto' <<<\"\$out\""
    check "real_rima_stream references no append-queue verb" \
        "! nm '$build/real_rima_stream' | grep -q 'ibv_[a-z]*_aq'"
else
    bad "real_rima_stream was not built"
fi

# 2b. the rima layer against the system libibverbs: RIMA_HW -> EOPNOTSUPP
#     (nothing reaches a verb before that answer, so dummy objects will do)
cat >"$scratch/rima_real_check.c" <<'EOF'
#include <errno.h>
#include <stdio.h>
#include "protocols/rima/rima.h"
int main(void)
{
    struct ibv_pd dummy_pd;
    struct ibv_cq dummy_cq;
    struct ibv_qp dummy_qp;
    struct rima_aq_opts o = {.mode = RIMA_HW, .region_bytes = 1 << 20};
    errno = 0;
    if (rima_aq_create(&dummy_pd, &dummy_cq, &o) || errno != EOPNOTSUPP) { printf("aq: errno %d\n", errno); return 1; }
    struct rima_aq_remote r = {.mode = RIMA_HW, .aq_num = 1, .region_bytes = 1 << 20};
    errno = 0;
    if (rima_sender_create(&dummy_pd, &dummy_qp, &dummy_cq, &r, NULL) || errno != EOPNOTSUPP) { printf("sender: errno %d\n", errno); return 1; }
    o.region_bytes = 0;
    errno = 0;
    if (rima_aq_create(&dummy_pd, &dummy_cq, &o) || errno != EINVAL) { printf("region 0: errno %d\n", errno); return 1; }
    printf("rima real ok\n");
    return 0;
}
EOF
check "rima layer against the system libibverbs: RIMA_HW is EOPNOTSUPP" \
    "${CC:-cc} -std=c11 -D_GNU_SOURCE -DRNICSIM_REAL_VERBS=1 -Wall -Wextra -Wshadow -Werror -I'$src/include' -I'$src' '$scratch/rima_real_check.c' '$src/protocols/rima/rima.c' '$src/protocols/rima/rima_sw.c' '$src/tools/real/host_posix.c' -libverbs -lpthread -o '$scratch/rima_real_check' 2>'$scratch/rima_real.log' && '$scratch/rima_real_check' | grep -q 'rima real ok'"

# 2c. the Taranov channel driver (protocols/taranov): builds with zero
#     warnings, lists its channels, and without a device says so (exit 2)
tlog="$scratch/build_taranov.log"
if cmake --build "$build" --target real_taranov -j2 >"$tlog" 2>&1 && ! grep -qi 'warning:' "$tlog"; then
    ok "build real_taranov with zero warnings"
    out=$(timeout 20 "$build/real_taranov" --list 2>&1)
    check "real_taranov --list: all 20 channels" \
        "[ \$(grep -cE '^(send|write-slot|ring|shared-ring|read-slot|read-ring)-' <<<\"\$out\") -eq 20 ]"
    out=$(RNICSIM_OOB_PORT=0 timeout 20 "$build/real_taranov" --server --channel=ring-imm 2>&1)
    rc=$?
    check "real_taranov --server: no device, exit 2 (got $rc)" \
        "[ $rc -eq 2 ] && grep -q 'no RDMA device found' <<<\"\$out\""
else
    bad "build real_taranov with zero warnings"
    tail -40 "$tlog"
fi

# 2d. the Huang protocols driver (protocols/huang): builds with zero
#     warnings, the same options as in simulation, no device: set-up error
hlog="$scratch/build_huang.log"
if cmake --build "$build" --target real_huang -j2 >"$hlog" 2>&1 && ! grep -qi 'warning:' "$hlog"; then
    ok "build real_huang with zero warnings"
    check "real_huang --help lists the five protocols" \
        "timeout 20 '$build/real_huang' --help | grep -q 'send_send | send_write | write_send | write_write | read'"
    out=$(RNICSIM_OOB_PORT=0 timeout 20 "$build/real_huang" --node=0 --server 2>&1)
    rc=$?
    check "real_huang --server: no device, exit 1 (got $rc)" \
        "[ $rc -eq 1 ] && grep -q 'no RDMA device found' <<<\"\$out\""
else
    bad "build real_huang with zero warnings"
    tail -40 "$hlog"
fi

# 3. the example as a simulator plug-in: no libibverbs, warnings are errors
cc=${CC:-cc}
warn="-std=c11 -D_GNU_SOURCE -Wall -Wextra -Wpedantic -Wshadow -Wstrict-prototypes -Wcast-qual -Wformat=2 -Werror"
check "hello_write.c builds as a shared object" \
    "$cc $warn -shared -fPIC -I'$src/include' '$src/docs/examples/hello_write.c' -o '$scratch/hello_write.so' 2>'$scratch/so.log'"

# 4. out-of-band board over TCP: client started first, 40 lockstep rounds,
#    wrong-length get -> EMSGSIZE, threads, report format; host_alloc_huge
#    (2 MiB-aligned, zeroed, freed whole; length 0 refused)
cat >"$scratch/oob_check.c" <<'EOF'
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include "rnicsim/host.h"
static void set42(void *arg) { *(int *)arg = 42; }
int main(int argc, char **argv)
{
    int server = argc > 1 && strcmp(argv[1], "--server") == 0;
    const char *me = server ? "server" : "client", *peer = server ? "client" : "server";
    char key[64], val[32], want[32];
    for (int i = 0; i < 40; i++) {
        snprintf(key, sizeof key, "t/%d/%s", i, me);
        snprintf(val, sizeof val, "%d-%s", i * 7, me);
        if (host_oob_put(key, val, strlen(val) + 1)) { perror("put"); return 1; }
        snprintf(key, sizeof key, "t/%d/%s", i, peer);
        snprintf(want, sizeof want, "%d-%s", i * 7, peer);
        memset(val, 0, sizeof val);
        if (host_oob_get(key, val, strlen(want) + 1)) { perror("get"); return 1; }
        if (strcmp(val, want) != 0) { printf("round %d: got '%s' want '%s'\n", i, val, want); return 1; }
        if (i == 0 && (host_oob_get(key, val, 3) == 0 || errno != EMSGSIZE)) { printf("no EMSGSIZE\n"); return 1; }
    }
    int v = 0, h = host_thread_start(set42, &v);
    if (h < 0 || host_thread_join(h) != 0 || v != 42) { printf("thread failed\n"); return 1; }
    for (int k = 0; k < 3; k++) {
        unsigned char *hp = host_alloc_huge((size_t)3 << 20, HOST_SOCKET_LOCAL);
        if (!hp || ((unsigned long)hp & ((2ul << 20) - 1)) || hp[(3 << 20) - 1] != 0) { printf("host_alloc_huge failed\n"); return 1; }
        hp[0] = 1;
        host_free(hp, (size_t)3 << 20);
        /* freed whole: the 2 MiB-rounded mapping (4 MiB) is gone, its
         * first page and the page past the 3 MiB asked for */
        unsigned char vec[1];
        if (mincore(hp, 4096, vec) == 0 || errno != ENOMEM ||
            mincore(hp + ((size_t)3 << 20), 4096, vec) == 0 || errno != ENOMEM) { printf("host_free left the huge mapping\n"); return 1; }
    }
    if (host_alloc_huge(0, HOST_SOCKET_LOCAL) != NULL || errno != EINVAL) { printf("host_alloc_huge(0) not EINVAL\n"); return 1; }
    uint64_t t0 = host_now_ns();
    host_compute(200000);
    if (host_now_ns() - t0 < 200000) { printf("host_compute too short\n"); return 1; }
    struct host_kv kv[] = {{"size_bytes", 1048576}, {"bw_gbps", 12.5}};
    host_report("demo_bw", kv, 2);
    printf("%s oob ok\n", me);
    return 0;
}
EOF
if $cc $warn -I"$src/include" "$scratch/oob_check.c" "$src/tools/real/host_posix.c" \
    -lpthread -o "$scratch/oob_check" 2>"$scratch/oob_build.log"; then
    port=$((20000 + $$ % 20000))
    (RNICSIM_OOB_PORT=$port timeout 30 "$scratch/oob_check" --client 127.0.0.1 >"$scratch/oob_client.out" 2>&1
     echo $? >"$scratch/oob_client.rc") &
    sleep 0.3
    RNICSIM_OOB_PORT=$port timeout 30 "$scratch/oob_check" --server >"$scratch/oob_server.out" 2>&1
    src_rc=$?
    wait
    crc=$(cat "$scratch/oob_client.rc")
    check "oob over TCP: server exit 0 (got $src_rc)" "[ $src_rc -eq 0 ]"
    check "oob over TCP: client exit 0 (got $crc)" "[ $crc -eq 0 ] && grep -q 'client oob ok' '$scratch/oob_client.out'"
    check "host_report prints 'table: key=value'" \
        "grep -qx 'demo_bw: size_bytes=1048576 bw_gbps=12.5' '$scratch/oob_server.out'"
else
    bad "oob_check builds with host_posix.c"
    cat "$scratch/oob_build.log"
fi

finish
