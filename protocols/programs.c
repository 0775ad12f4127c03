/* The registry of built-in programs: protocol drivers compiled into the
 * rnicsim command, looked up by the name a scenario gives (programs.h). */
#include "protocols/programs.h"

#include <stddef.h>
#include <string.h>

#include "protocols/huang/huang.h"
#include "protocols/hostbench/hostbench.h"
#include "protocols/litmus/litmus.h"
#include "protocols/microbench/microbench.h"
#include "protocols/microbench/regthrash.h"
#include "protocols/perftest/perftest.h"
#include "protocols/rb2/rb2_bench.h"
#include "protocols/rima/fastkv.h"
#include "protocols/rima/rima_stream.h"
#include "protocols/rima/footprint.h"
#include "protocols/taranov/taranov.h"
#include "protocols/taranov/table2_driver.h"
#include "protocols/pswitch_demo/ps_count.h"
#include "protocols/zerosided/zs_switch.h"

const struct program_def protocol_programs[] = {
    {"perftest", perftest_main,
     "perftest-style WRITE/READ/SEND/atomic latency and bandwidth (--server | --client)"},
    {"litmus", litmus_main,
     "ordering litmus protocols: every message checked (--server | --client, --protocol=P)"},
    {"microbench", microbench_main,
     "hardware microbenchmarks: size, QP count, MR working set, atomics, doorbell batching "
     "(--server | --client --id=I)"},
    {"regthrash", regthrash_main,
     "memory registration cost / thrash: ibv_reg_mr + ibv_dereg_mr (or ibv_rereg_mr) in a loop"},
    {"rima_stream", rima_stream_main,
     "append queue stream: N senders, every message checked (--server | --client --id=I, "
     "--mode=hw|sw)"},
    {"footprint", footprint_main,
     "RIMA memory-footprint study: SRQ bins vs RIMA over a memcached stream (--server | --client "
     "--id=I | --model)"},
    {"taranov", taranov_main,
     "Taranov et al. channels: checked message stream or ping-pong (--channel=NAME, --list)"},
    {"taranov_t2", taranov_t2_main,
     "Taranov channels, one at a time with trace marks, for rnicsim table2 (--channel=NAME "
     "--role=sender|receiver --mode=measure|check|memory)"},
    {"fastkv", fastkv_main,
     "FastKV key-value cache: srq (footprint-priority) | rima | rima-sw | split-* requests, "
     "verified GET/SET (--server | --client --id=I)"},
    {"largemsg", largemsg_main,
     "Table 6 large-message alternatives: fastkv with every request a memcached-size SET "
     "(--transport=split-alloc|split-faa|split-presend|rima)"},
    {"huang", huang_main,
     "Huang & Ghandeharizadeh: 5 RC request/response protocols over M:1, 1:M, M:M (--node=I "
     "--abstraction=m1|1m|mm --protocol=P)"},
    {"hostbench", hostbench_main,
     "the host model end to end: threads on hyper-threads / shared CPUs (--test=threads), a "
     "write-twice ping-pong reading each message (--server | --client)"},
    {"rb2", rb2_main,
     "RB2 distributed ring buffer and its rivals (FaRM, SocksDirect, L5): checked streams, "
     "ping-pong, rpc (--server | --client, --variant=rb2|farm|sd|l5)"},
    {"ps_count", ps_count_main,
     "programmable-switch example: counts packets and bytes per host pair in the switch's "
     "registers (host sw0; --hosts --for)"},
    {"zs_switch", zs_switch_main,
     "zero-sided RDMA switch program: control plane on the programmable switch's CPU (host sw0; "
     "--flow --mode --producers --consumers)"},
    {"zs_pu", zs_pu_main,
     "zero-sided RDMA processing unit: producer / consumer / echo rings, no verbs on the data path "
     "(--flow --role --index)"},
    {"zs_cpudrv", zs_cpudrv_main,
     "zero-sided baseline: CPU cores post one WRITE per item of GPU kernels' rings (--flows "
     "--cores)"},
    {"zs_nvshmem", zs_nvshmem_main,
     "zero-sided baseline: NVSHMEM-like GPU-initiated PUTs between nodes (--nodes --index)"},
    {"zs_cpushuffle", zs_cpushuffle_main,
     "zero-sided baselines: CPU shuffle with DFI, MPI all-to-all or Spark-UCX (--system "
     "--workers --index)"},
    {"zs_dfirepl", zs_dfirepl_main,
     "zero-sided baseline: DFI-like replication over UD multicast, optionally globally ordered "
     "(--role=source|target)"},
    {NULL, NULL, NULL},
};

/* Linear search: the table is short and looked up once per program. */
const struct program_def *program_find(const char *name)
{
    if (!name)
        return NULL;
    for (const struct program_def *p = protocol_programs; p->name; p++)
        if (strcmp(p->name, name) == 0)
            return p;
    return NULL;
}
