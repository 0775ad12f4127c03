/* The microbenchmark's parts shared by its files: the tests' facts, the
 * options (microbench_opts.c: parsing, checks, the hash every program of a
 * run must agree on) and their limits.  microbench.c is the benchmark
 * (resources, the client's and the server's phases, verification,
 * results).  Private to protocols/microbench/. */
#ifndef RNICSIM_PROTOCOLS_MICROBENCH_PRIV_H
#define RNICSIM_PROTOCOLS_MICROBENCH_PRIV_H

#include <infiniband/verbs.h>
#include <stdbool.h>
#include <stdint.h>

#include "protocols/common/rc_conn.h"

#define MB_MIN_STRIDE 64u           /* seq stride = max(size, one cache line) */
#define MB_MAX_QPS_TOTAL (1u << 20) /* estimate: far above any NIC's QP cache */

enum mb_test { MB_WRITE, MB_READ, MB_SEND, MB_FAA, MB_CAS, MB_TEST_COUNT };
enum mb_access { MB_SEQ, MB_RANDOM, MB_ACCESS_COUNT };
enum mb_target { MB_HOST, MB_DM, MB_TARGET_COUNT };

/* Per-test facts.  Inline limit 220 = perftest's DEF_INLINE_WRITE (and
 * what a ConnectX-5 grants); READ and atomics cannot be inlined. */
struct mb_test_info {
    const char *name;
    enum ibv_wr_opcode opcode;
    bool atomic;      /* 8 bytes on one counter, --size ignored */
    bool can_inline;  /* --inline allowed */
    bool remote_addr; /* the WR names a remote address (not SEND) */
};
/* The tests' facts (microbench_opts.c): indexed by enum mb_test. */
extern const struct mb_test_info mb_tests[MB_TEST_COUNT];
extern const char *const mb_target_names[MB_TARGET_COUNT];

/* The options of one program (microbench_opts.c parses them). */
struct mb_opts {
    enum rc_conn_role role;
    char name[RC_CONN_NAME_MAX];
    enum mb_test test;
    uint64_t clients, id, qps;
    uint64_t size;        /* bytes per operation (8 for atomics) */
    uint64_t depth;       /* max_send_wr per QP; 0 = auto */
    uint64_t outstanding; /* WRs in flight per client */
    uint64_t post_list;   /* WRs per ibv_post_send */
    uint64_t burst;       /* posts to one QP before the next QP */
    bool rounds;          /* wait for every WR of a round before the next */
    uint64_t iters, warmup;
    uint64_t working_set; /* server target bytes; 0 = one stride */
    enum mb_access access;
    enum mb_target target;
    uint64_t signal_every;
    bool inline_data;
    uint64_t mtu_bytes; /* 0 = the port's active MTU */
};

/* Parse argv completely (no verbs or host_* call happens before this
 * returns).  Returns 0 to run, 2 on a usage error, -1 after --help. */
int mb_parse_args(int argc, char **argv, struct mb_opts *o);
/* FNV-1a over the options every program of the run must agree on. */
uint32_t mb_opts_hash(const struct mb_opts *o);

#endif /* RNICSIM_PROTOCOLS_MICROBENCH_PRIV_H */
