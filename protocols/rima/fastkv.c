/* fastkv: a FastKV-like key-value cache (Xue, Vijaykumar, Thottethodi,
 * "Network Interface Architecture for Remote Indirect Memory Access (RIMA)
 * in Datacenters", TACO 2020, Section 4.1 "FastKV", Section 5.2, Tables 5
 * and 6).
 *
 * --servers=S server programs (--server --id=0..S-1) hold a hash table of
 * items; --clients=C client programs (--client --id=0..C-1) each connect one
 * RC QP to every server and issue GET/SET requests: a closed loop with
 * --window=W outstanding requests, or an open loop of Poisson arrivals at
 * --rate requests/s (still at most W outstanding; a request that has
 * arrived waits for a window slot and its latency counts from its arrival).
 * Values have the memcached sizes of Figure 2 (protocols/rima/workload.h,
 * truncated so that header + value fit one --max-msg message).  Programs
 * with an id >= --servers / --clients exit 0 at once, so one scenario with
 * N server and N client programs sweeps 1..N with vars.
 *
 * Request transports (--transport):
 *   srq          SEND into one SRQ of --max-msg buffers per server, in the
 *                paper's footprint-priority mode (Section 5.2.1, Table 5):
 *                a server's receive buffers stay within --footprint, so it
 *                has cap = footprint / max-msg buffers (256 MB / 1 MB = 256),
 *                and since any client may send to any server, the requests
 *                outstanding in the whole system must stay within cap (all
 *                of them could go to one server): client c may have
 *                cap / C outstanding (the first cap mod C clients one more).
 *                A client left with none cannot run: the configuration is
 *                "infeasible" (reported, exit 0), as Table 5 beyond 256
 *                servers.  --footprint=0: no cap (C x W buffers per server).
 *   rima         appends into one append queue per server through the
 *                portable RIMA layer (protocols/rima/rima.h) in hardware
 *                mode; footprint = the queue's peak committed bytes.
 *   rima-sw      the same through the layer's software emulation (remote
 *                FETCH_AND_ADD on the tail word, then WRITE_WITH_IMM).
 *   split-alloc, split-faa, split-presend
 *                Table 6 rows 3-5: requests of <= --small-max bytes go
 *                through an SRQ of --small-max buffers (C x W of them);
 *                larger SETs go by
 *     alloc      (row 3) rendezvous with on-demand allocation: the client
 *                SENDs a small request-to-send, an allocator thread of the
 *                server spends --alloc-ns (1 ms, Section 5.2.1) in
 *                host_compute, allocates and registers exactly the message
 *                size and the server replies with address and rkey; the
 *                client WRITE_WITH_IMMs the message there;
 *     faa        (row 4) a remote FETCH_AND_ADD on the tail word of a
 *                shared --shared-bytes receive ring (the atomic goes over
 *                the server's PCIe), then WRITE_WITH_IMM at the returned
 *                offset;
 *     presend    (row 5) a pre-allocated --max-msg slot per sender at
 *                every server (footprint = clients x slot exactly), one
 *                large message per sender and server in flight.
 *
 * Responses go back by SEND into receives the client posts in its own SRQ
 * (W buffers of --max-msg): a client knows how many responses it awaits
 * (one per outstanding request), so its receive memory is bounded by its
 * window whatever the transport - the footprint problem the paper studies
 * is the server's, which must accept requests from any number of senders.
 * Using the same response path for every transport isolates the request
 * path being compared.
 *
 * Verification: a value is a pattern of (key, version); the server checks
 * every SET's checksum on arrival, the client checks every GET hit byte by
 * byte against the version it last stored (keys are per client, at most one
 * request per key in flight) and a miss against "never stored / evicted".
 * A mismatch prints "VERIFY FAILED", the client exits 2 and tells every
 * server (done word), which also exits 2.
 *
 * Results (server 0 aggregates what the others publish out of band): table
 * "fastkv", one row per run: requests, throughput (Mreq/s, Gbps of
 * payload), latency p50/p96/p99/p99.9 of all requests and of large SETs
 * (value > --small-max), footprint (peak receive memory of the largest server, and the sum),
 * peak outstanding requests, feasible.  "fastkv_server" and
 * "fastkv_client" rows per program.
 *
 * No globals: several instances run as coroutines in one process; getopt's
 * globals are used only while parsing. */
#include "protocols/rima/fastkv.h"

#include <errno.h>
#include <getopt.h>
#include <infiniband/verbs.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocols/common/rc_conn.h"
#include "protocols/rima/rima.h"
#include "protocols/rima/workload.h"
#include "rnicsim/host.h"

#define FK_KEY_MAX (RC_CONN_NAME_MAX + 64)
#define FK_POLL_BATCH 32
#define FK_HDR_SLOT_BYTES 64 /* one response header in the server's ring */
#define FK_ALIGN 64u         /* faa ring allocations: one cache line */
#define FK_IMM_KIND_SHIFT 30 /* imm = kind << 30 | index */
#define FK_IMM_INDEX_MASK ((1u << FK_IMM_KIND_SHIFT) - 1)
#define FK_SLAB_MIN_SHIFT 6  /* store classes 64 B .. 2^FK_SLAB_MAX_SHIFT */
#define FK_SLAB_MAX_SHIFT 21 /* 2 MiB: holds the largest 1 MiB value */
#define FK_MAX_PEERS 1024    /* servers, clients (estimate: far above a run) */
#define FK_MAX_ALLOC_THREADS 4096
#define FK_WORDS_PER_CLIENT 2 /* server control: done word, spare */

enum fk_transport {
    FK_SRQ,
    FK_RIMA,
    FK_RIMA_SW,
    FK_SPLIT_ALLOC,
    FK_SPLIT_FAA,
    FK_SPLIT_PRESEND,
    FK_TRANSPORT_COUNT
};

/* Per-transport facts. */
struct fk_transport_info {
    const char *name;
    bool rima;  /* requests are appends */
    bool split; /* small via SRQ of small-max buffers, large another way */
    int table6_row;
};
static const struct fk_transport_info fk_transports[FK_TRANSPORT_COUNT] = {
    [FK_SRQ] = {"srq", false, false, 1},
    [FK_RIMA] = {"rima", true, false, 6},
    [FK_RIMA_SW] = {"rima-sw", true, false, 6},
    [FK_SPLIT_ALLOC] = {"split-alloc", false, true, 3},
    [FK_SPLIT_FAA] = {"split-faa", false, true, 4},
    [FK_SPLIT_PRESEND] = {"split-presend", false, true, 5},
};

/* Wire formats (host byte order: both ends are the same program). */
enum fk_op { FK_OP_GET = 1, FK_OP_SET = 2, FK_OP_RTS = 3 };
enum fk_status {
    FK_ST_HIT = 1,
    FK_ST_MISS,
    FK_ST_STORED,
    FK_ST_NOT_STORED, /* the store is full: the key is gone (a cache evicts) */
    FK_ST_GRANT,      /* split-alloc: the buffer is ready */
    FK_ST_ERROR,      /* the SET arrived corrupted */
};
enum fk_imm_kind { FK_IMM_ALLOC = 1, FK_IMM_FAA = 2, FK_IMM_PRESEND = 3 };

struct fk_req {
    uint32_t op, client, slot, value_len;
    uint64_t key;
    uint32_t checksum, pad;
};
struct fk_resp {
    uint32_t status, slot, value_len, checksum;
    uint64_t key;
    uint64_t addr; /* GRANT: where to write */
    uint32_t rkey, grant;
};
#define FK_REQ_BYTES ((uint32_t)sizeof(struct fk_req))
#define FK_RESP_BYTES ((uint32_t)sizeof(struct fk_resp))

/* Connection data.  Server: gid, lid, qpn per client, rkey+addr of its
 * control words, ring / slots MR, aq number.  Client: gid, lid, qpn per
 * server. */
struct fk_conn_hdr {
    uint8_t gid[16];
    uint16_t lid, failed;
    uint32_t n, opts_hash;
    uint32_t ctrl_rkey, big_rkey, aq_num;
    uint64_t ctrl_addr, big_addr, big_bytes;
    uint8_t rima_remote[64]; /* what the RIMA layer's sender needs */
};

/* What a program publishes at the end (server 0 aggregates). */
struct fk_client_result {
    uint64_t requests, start_ns, end_ns, bytes, large, sets, gets, hits, failed, peak_inflight,
        window, faa_retries;
};
struct fk_server_result {
    uint64_t requests, footprint_bytes, peak_outstanding, posted_bytes, large_bytes_peak,
        small_bytes, failed, allocs, faa_wasted;
};

struct fk_opts {
    enum rc_conn_role role;
    char name[RC_CONN_NAME_MAX];
    enum fk_transport transport;
    uint64_t servers, clients, id;
    uint64_t window, requests, warmup, keys;
    double get_ratio, rate;
    char dist[128];
    uint64_t max_msg, small_max, footprint, store_bytes, shared_bytes;
    uint64_t alloc_ns, alloc_threads, seed, mtu_bytes, aq_region_bytes, idle_max_ns;
    uint64_t inject_every; /* test: the server corrupts every N-th stored value */
    bool verbose;
};

/* ------------------------------------------------------------ server parts */

struct fk_item {
    uint64_t key; /* 0 = empty (keys are never 0: client id + 1 in the top) */
    uint64_t off; /* in the arena */
    uint32_t len, checksum;
    uint8_t cls;
    bool used;
};

/* One allocator thread of split-alloc (Table 6 row 3). */
enum fk_alloc_state { FK_ALLOC_IDLE, FK_ALLOC_JOB, FK_ALLOC_DONE, FK_ALLOC_EXIT };
struct fk_grant {
    uint32_t client, slot, len;
    void *buf;
    struct ibv_mr *mr;
    bool busy;
};
struct fk_allocator {
    struct fk_server *srv;
    _Atomic int state;
    uint32_t grant;
    uint64_t alloc_ns;
    int handle;
    bool failed;
};

struct fk_server {
    struct ibv_qp **qps; /* one per client */
    struct ibv_srq *srq; /* srq / split: the request SRQ */
    uint8_t *rbuf;       /* receive buffers: nbufs x buf_bytes */
    struct ibv_mr *rbuf_mr;
    uint64_t nbufs, buf_bytes;
    uint64_t *ctrl; /* done words, then the faa tail word */
    struct ibv_mr *ctrl_mr;
    uint8_t *big; /* faa ring or presend slots */
    struct ibv_mr *big_mr;
    uint64_t big_bytes;
    uint8_t *arena; /* the store: values, registered (GET replies SEND from it) */
    struct ibv_mr *arena_mr;
    uint64_t arena_bytes, arena_top;
    uint64_t free_head[FK_SLAB_MAX_SHIFT + 1]; /* free chunk lists (offset + 1) */
    struct fk_item *table;
    uint64_t table_cap, items;
    uint8_t *hdrs; /* response headers: nhdr x FK_HDR_SLOT_BYTES */
    struct ibv_mr *hdrs_mr;
    uint32_t *hdr_free;
    uint64_t nhdr, hdr_top;
    struct fk_grant *grants;
    uint64_t ngrants;
    struct fk_allocator *alloc;
    uint32_t *alloc_queue; /* grants waiting for an allocator thread */
    uint64_t aq_head, aq_tail;
    struct rima_aq *aq;
    uint64_t aq_peak_footprint, aq_samples;
    uint64_t injected; /* SETs counted for --inject-corruption */
    uint64_t outstanding, peak_outstanding;
    uint64_t large_bytes, large_bytes_peak;
    struct fk_server_result res;
};

/* ------------------------------------------------------------ client parts */

struct fk_key {
    uint32_t version; /* 0: absent (never stored, or evicted) */
    uint32_t len;
    bool inflight;
};

enum fk_phase { FK_FREE, FK_WAIT_FAA, FK_WAIT_GRANT, FK_WAIT_RESP };

struct fk_slot {
    enum fk_phase phase;
    uint32_t key_idx, server, len, version;
    enum fk_op op;
    bool large, timed;
    uint64_t t0_ns;
    uint64_t faa_result;
};

struct fk_client {
    struct ibv_qp **qps; /* one per server */
    struct ibv_srq *srq; /* response receives */
    uint8_t *sbuf;       /* requests: W x max_msg, then W x 8 B of FAA results */
    uint8_t *rbuf;       /* responses: W x max_msg */
    struct ibv_mr *sbuf_mr, *rbuf_mr;
    struct fk_slot *slots;
    struct fk_key *keys;
    uint64_t win;       /* outstanding requests allowed (srq: the footprint-priority share) */
    bool *presend_busy; /* split-presend: my slot at each server */
    uint64_t *srv_ctrl_addr, *srv_big_addr;
    uint32_t *srv_ctrl_rkey, *srv_big_rkey;
    uint64_t *srv_big_bytes;
    struct rima_sender **snd; /* rima: one sender per server (owns scqs[s]) */
    struct ibv_cq **scqs;
    struct wl_size_dist dist;
    struct wl_arrival arrival;
    struct wl_rng rng;
    uint64_t next_arrival_ns;
    bool have_next;
    uint32_t next_key;
    bool next_get;
    uint32_t next_len;
    uint64_t issued, completed, inflight, total;
    uint64_t *lat_all, *lat_large;
    uint64_t n_all, n_large;
    struct fk_client_result res;
};

struct fk {
    struct fk_opts o;
    const char *prog;
    struct rc_conn conn;
    struct ibv_device_attr dev;
    struct ibv_cq *cq;  /* receive completions */
    struct ibv_cq *scq; /* send completions (server; client srq/split) */
    int access;
    uint8_t rd_atomic;
    uint32_t npeers;
    struct fk_conn_hdr *peer; /* per peer */
    struct fk_server s;
    struct fk_client c;
    uint64_t idle_ns; /* current idle step (fk_idle) */
    bool infeasible;
    int status;
};

/* ------------------------------------------------------------ helpers */

static uint64_t fk_mix(uint64_t x)
{
    /* splitmix64 finaliser */
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return x;
}

/* Value bytes of (key, version). */
static void fk_fill(uint8_t *p, uint32_t len, uint64_t key, uint32_t version)
{
    uint64_t s = fk_mix(key * 0x9e3779b97f4a7c15ull + version);
    for (uint32_t i = 0; i < len; i += 8) {
        s = fk_mix(s + i);
        uint32_t n = len - i < 8 ? len - i : 8;
        memcpy(p + i, &s, n);
    }
}

/* First differing byte, or -1. */
static int64_t fk_check(const uint8_t *p, uint32_t len, uint64_t key, uint32_t version)
{
    uint64_t s = fk_mix(key * 0x9e3779b97f4a7c15ull + version);
    for (uint32_t i = 0; i < len; i += 8) {
        s = fk_mix(s + i);
        uint32_t n = len - i < 8 ? len - i : 8;
        if (memcmp(p + i, &s, n) != 0)
            for (uint32_t k = 0; k < n; k++)
                if (p[i + k] != ((const uint8_t *)&s)[k])
                    return (int64_t)(i + k);
    }
    return -1;
}

static uint32_t fk_fnv(const uint8_t *p, uint32_t len)
{
    uint32_t h = 2166136261u;
    for (uint32_t i = 0; i < len; i++)
        h = (h ^ p[i]) * 16777619u;
    return h;
}

static uint32_t fk_key_server(uint64_t key, uint64_t servers)
{
    return (uint32_t)(fk_mix(key) % servers);
}

static uint64_t fk_client_key(uint64_t client, uint64_t idx)
{
    return (client + 1) << 32 | idx;
}

static int fk_cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Nearest-rank percentile of a sorted array (0 when empty). */
static double fk_pct(const uint64_t *v, uint64_t n, double p)
{
    if (n == 0)
        return 0;
    uint64_t r = (uint64_t)(p / 100.0 * (double)n + 0.999999999);
    if (r < 1)
        r = 1;
    if (r > n)
        r = n;
    return (double)v[r - 1];
}

static int fk_put(struct fk *f, const char *key, const void *buf, size_t len)
{
    if (host_oob_put(key, buf, len) != 0) {
        fprintf(stderr, "%s: out-of-band put %s failed: %s\n", f->prog, key, strerror(errno));
        return -1;
    }
    return 0;
}

static int fk_get(struct fk *f, const char *key, void *buf, size_t len)
{
    if (host_oob_get(key, buf, len) != 0) {
        fprintf(stderr, "%s: out-of-band get %s failed: %s\n", f->prog, key, strerror(errno));
        return -1;
    }
    return 0;
}

static bool fk_wc_ok(struct fk *f, const struct ibv_wc *wc)
{
    if (wc->status == IBV_WC_SUCCESS)
        return true;
    fprintf(stderr, "%s: completion error on QP %u: %s (%d), wr_id %" PRIu64 "\n", f->prog,
            wc->qp_num, ibv_wc_status_str(wc->status), (int)wc->status, wc->wr_id);
    return false;
}

/* Waiting.  A program here watches several CQs (and the server its done
 * words), so it cannot block in one ibv_poll_cq (which parks until the next
 * change, and would miss a change that landed while another poll was being
 * charged).  Every poll is preceded by host_now_ns() (so no poll parks) and
 * an idle pass spends an exponentially growing step of host time, from
 * FK_IDLE_MIN_NS up to --idle-max-ns, reset by any progress: the detection
 * delay after a quiet period is at most one step, and a long wait (the 1-ms
 * allocation) costs about one event per step. */
#define FK_IDLE_MIN_NS 10 /* estimate: a poll loop iteration of a real CPU */
static void fk_idle(struct fk *f, bool progressed)
{
    if (progressed) {
        f->idle_ns = FK_IDLE_MIN_NS;
        return;
    }
    host_compute(f->idle_ns);
    f->idle_ns = f->idle_ns * 2 > f->o.idle_max_ns ? f->o.idle_max_ns : f->idle_ns * 2;
}

static int fk_poll(struct ibv_cq *cq, int n, struct ibv_wc *wc)
{
    (void)host_now_ns(); /* another call: this poll never parks (fk_idle) */
    return ibv_poll_cq(cq, n, wc);
}

/* ------------------------------------------------------------ options */

static void fk_usage(const char *prog)
{
    printf(
        "usage: %s --server --id=S | --client --id=C [options]\n"
        "  --servers=S --clients=C  active programs (ids beyond them exit 0 at once)\n"
        "  --transport=T        srq|rima|rima-sw|split-alloc|split-faa|split-presend (srq)\n"
        "  --window=W           outstanding requests per client (16)\n"
        "  --requests=N         timed requests per client (2000); --warmup=N untimed (100)\n"
        "  --rate=R             open loop: Poisson arrivals, R requests/s per client (0: closed)\n"
        "  --get-ratio=P        fraction of GETs (0.9)\n"
        "  --keys=K             keys per client (1024, at least 2 x window)\n"
        "  --dist=D             value sizes: memcached|fixed:N|uniform:LO:HI|list:... (memcached)\n"
        "  --max-msg=B          largest message = SRQ buffer of srq (1MiB)\n"
        "  --footprint=B        srq: receive memory of all servers (256MiB; 0 = no cap)\n"
        "  --small-max=B        split: SRQ buffer size, larger SETs go the large way (1KiB)\n"
        "  --alloc-ns=T         split-alloc: allocation latency (1000000)\n"
        "  --alloc-threads=N    split-alloc: allocator threads per server (0 = clients x window)\n"
        "  --shared-bytes=B     split-faa: shared receive ring per server (16MiB)\n"
        "  --store=B            server store arena (64MiB)\n"
        "  --aq-region=B        rima: append queue region (256MiB)\n"
        "  --idle-max-ns=T      longest idle step between polls (1000; see the source)\n"
        "  --inject-corruption=N  server: flip a bit of every N-th stored value (a test\n"
        "                       that GETs are verified: the client must fail)\n"
        "  --seed=N --mtu=B --name=X --verbose\n"
        "exit status: 0 ok (also: reported infeasible), 1 setup or transport error,\n"
        "             2 usage error or a value not verified\n",
        prog);
}

enum {
    OPT_SERVER = 256,
    OPT_CLIENT,
    OPT_NAME,
    OPT_SERVERS,
    OPT_CLIENTS,
    OPT_ID,
    OPT_TRANSPORT,
    OPT_WINDOW,
    OPT_REQUESTS,
    OPT_WARMUP,
    OPT_RATE,
    OPT_GET_RATIO,
    OPT_KEYS,
    OPT_DIST,
    OPT_MAX_MSG,
    OPT_FOOTPRINT,
    OPT_SMALL_MAX,
    OPT_ALLOC_NS,
    OPT_ALLOC_THREADS,
    OPT_SHARED_BYTES,
    OPT_STORE,
    OPT_AQ_REGION,
    OPT_SEED,
    OPT_MTU,
    OPT_VERBOSE,
    OPT_IDLE_MAX,
    OPT_INJECT,
    OPT_HELP
};

static bool fk_parse_double(const char *s, double lo, double hi, double *out)
{
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end != '\0' || !(v >= lo && v <= hi))
        return false;
    *out = v;
    return true;
}

/* Returns 0 to run, 2 on a usage error, -1 after --help. */
static int fk_parse_args(int argc, char **argv, struct fk_opts *o, bool largemsg)
{
    static const struct option longopts[] = {
        {"server", no_argument, NULL, OPT_SERVER},
        {"client", no_argument, NULL, OPT_CLIENT},
        {"name", required_argument, NULL, OPT_NAME},
        {"servers", required_argument, NULL, OPT_SERVERS},
        {"clients", required_argument, NULL, OPT_CLIENTS},
        {"id", required_argument, NULL, OPT_ID},
        {"transport", required_argument, NULL, OPT_TRANSPORT},
        {"window", required_argument, NULL, OPT_WINDOW},
        {"requests", required_argument, NULL, OPT_REQUESTS},
        {"warmup", required_argument, NULL, OPT_WARMUP},
        {"rate", required_argument, NULL, OPT_RATE},
        {"get-ratio", required_argument, NULL, OPT_GET_RATIO},
        {"keys", required_argument, NULL, OPT_KEYS},
        {"dist", required_argument, NULL, OPT_DIST},
        {"max-msg", required_argument, NULL, OPT_MAX_MSG},
        {"footprint", required_argument, NULL, OPT_FOOTPRINT},
        {"small-max", required_argument, NULL, OPT_SMALL_MAX},
        {"alloc-ns", required_argument, NULL, OPT_ALLOC_NS},
        {"alloc-threads", required_argument, NULL, OPT_ALLOC_THREADS},
        {"shared-bytes", required_argument, NULL, OPT_SHARED_BYTES},
        {"store", required_argument, NULL, OPT_STORE},
        {"aq-region", required_argument, NULL, OPT_AQ_REGION},
        {"seed", required_argument, NULL, OPT_SEED},
        {"mtu", required_argument, NULL, OPT_MTU},
        {"verbose", no_argument, NULL, OPT_VERBOSE},
        {"idle-max-ns", required_argument, NULL, OPT_IDLE_MAX},
        {"inject-corruption", required_argument, NULL, OPT_INJECT},
        {"help", no_argument, NULL, OPT_HELP},
        {NULL, 0, NULL, 0},
    };
    const char *prog = argc > 0 && argv[0] ? argv[0] : "fastkv";
    bool have_id = false;
    memset(o, 0, sizeof(*o));
    snprintf(o->name, sizeof(o->name), "%s", largemsg ? "largemsg" : "fastkv");
    o->transport = largemsg ? FK_SPLIT_ALLOC : FK_SRQ;
    o->servers = 1;
    o->clients = 1;
    o->window = 16;                      /* estimate: enough to keep one client's NIC busy */
    o->requests = 2000;                  /* estimate: p99 from 2000 x clients samples */
    o->warmup = 100;                     /* estimate: fills the store before timing */
    o->keys = 1024;                      /* estimate: a small hot set per client */
    o->get_ratio = largemsg ? 0.0 : 0.9; /* estimate: a read-mostly cache; largemsg: every
                                            request carries a value (a message) */
    snprintf(o->dist, sizeof(o->dist), "memcached"); /* Figure 2 */
    o->max_msg = 1u << 20;                           /* Section 5.2.1: 1-MB maximum message */
    o->footprint = 256u << 20;                       /* Section 5.2.1: 256-MB footprint */
    o->small_max = 1024;             /* Section 5.2.1: the 1-KB cutoff (95.6th percentile) */
    o->alloc_ns = 1000000;           /* Section 5.2.1: 1-ms allocate-and-map latency */
    o->alloc_threads = 0;            /* 0 = clients x window: no allocation waits for another, each
                                        costs its latency only (the paper's 1 ms per message) */
    o->shared_bytes = 16u << 20;     /* estimate: the paper's example is 100 MB, scaled */
    o->store_bytes = 64u << 20;      /* estimate: holds the keys of the runs here */
    o->aq_region_bytes = 256u << 20; /* the 256-MB footprint of Table 5 as the region */
    o->seed = 1;
    o->idle_max_ns = 1000; /* estimate: the longest idle step; see fk_idle */

    optind = 0;
    opterr = 1;
    for (;;) {
        bool ok = true;
        int c = getopt_long(argc, argv, "", longopts, NULL);
        if (c == -1)
            break;
        switch (c) {
        case OPT_SERVER:
            o->role = RC_CONN_ROLE_SERVER;
            break;
        case OPT_CLIENT:
            o->role = RC_CONN_ROLE_CLIENT;
            break;
        case OPT_NAME:
            ok = optarg[0] != '\0' && strlen(optarg) < sizeof(o->name) - 24;
            if (ok)
                snprintf(o->name, sizeof(o->name), "%s", optarg);
            break;
        case OPT_SERVERS:
            ok = rc_conn_parse_uint(optarg, 1, FK_MAX_PEERS, &o->servers);
            break;
        case OPT_CLIENTS:
            ok = rc_conn_parse_uint(optarg, 1, FK_MAX_PEERS, &o->clients);
            break;
        case OPT_ID:
            ok = rc_conn_parse_uint(optarg, 0, FK_MAX_PEERS - 1, &o->id);
            have_id = true;
            break;
        case OPT_TRANSPORT:
            ok = false;
            for (int t = 0; t < FK_TRANSPORT_COUNT; t++)
                if (strcmp(optarg, fk_transports[t].name) == 0) {
                    o->transport = (enum fk_transport)t;
                    ok = true;
                }
            break;
        case OPT_WINDOW:
            ok = rc_conn_parse_uint(optarg, 1, 4096, &o->window);
            break;
        case OPT_REQUESTS:
            ok = rc_conn_parse_uint(optarg, 1, 1ull << 24, &o->requests);
            break;
        case OPT_WARMUP:
            ok = rc_conn_parse_uint(optarg, 0, 1ull << 24, &o->warmup);
            break;
        case OPT_RATE:
            ok = fk_parse_double(optarg, 0, 1e10, &o->rate);
            break;
        case OPT_GET_RATIO:
            ok = fk_parse_double(optarg, 0, 1, &o->get_ratio);
            break;
        case OPT_KEYS:
            ok = rc_conn_parse_uint(optarg, 2, 1u << 24, &o->keys);
            break;
        case OPT_DIST:
            ok = strlen(optarg) < sizeof(o->dist);
            if (ok)
                snprintf(o->dist, sizeof(o->dist), "%s", optarg);
            break;
        case OPT_MAX_MSG:
            ok = rc_conn_parse_uint(optarg, 256, 1u << 30, &o->max_msg);
            break;
        case OPT_FOOTPRINT:
            ok = rc_conn_parse_uint(optarg, 0, 1ull << 40, &o->footprint);
            break;
        case OPT_SMALL_MAX:
            ok = rc_conn_parse_uint(optarg, 64, 1u << 20, &o->small_max);
            break;
        case OPT_ALLOC_NS:
            ok = rc_conn_parse_uint(optarg, 0, 10000000000ull, &o->alloc_ns);
            break;
        case OPT_ALLOC_THREADS:
            ok = rc_conn_parse_uint(optarg, 0, FK_MAX_ALLOC_THREADS, &o->alloc_threads);
            break;
        case OPT_SHARED_BYTES:
            ok = rc_conn_parse_uint(optarg, 4096, 1ull << 36, &o->shared_bytes);
            break;
        case OPT_STORE:
            ok = rc_conn_parse_uint(optarg, 1u << 16, 1ull << 36, &o->store_bytes);
            break;
        case OPT_AQ_REGION:
            ok = rc_conn_parse_uint(optarg, 1u << 16, 1ull << 40, &o->aq_region_bytes);
            break;
        case OPT_SEED:
            ok = rc_conn_parse_uint(optarg, 0, UINT64_MAX, &o->seed);
            break;
        case OPT_MTU: {
            uint64_t m = 0;
            ok = rc_conn_parse_uint(optarg, 256, 4096, &m) && (m & (m - 1)) == 0;
            o->mtu_bytes = m;
            break;
        }
        case OPT_VERBOSE:
            o->verbose = true;
            break;
        case OPT_INJECT:
            ok = rc_conn_parse_uint(optarg, 1, UINT64_MAX, &o->inject_every);
            break;
        case OPT_IDLE_MAX:
            ok = rc_conn_parse_uint(optarg, 1, 1000000, &o->idle_max_ns);
            break;
        case OPT_HELP:
            fk_usage(prog);
            return -1;
        default:
            fprintf(stderr, "%s: unknown option (try --help)\n", prog);
            return 2;
        }
        if (!ok) {
            const char *hint =
                c == OPT_TRANSPORT ? " (srq|rima|rima-sw|split-alloc|split-faa|split-presend)" : "";
            fprintf(stderr, "%s: bad value for --%s: '%s'%s\n", prog, longopts[c - OPT_SERVER].name,
                    optarg ? optarg : "", hint);
            return 2;
        }
    }
    if (argc - optind > 1) {
        fprintf(stderr, "%s: unexpected argument '%s'\n", prog, argv[optind + 1]);
        return 2;
    }
    if (o->role == RC_CONN_ROLE_NONE) {
        fprintf(stderr, "%s: give --server or --client (try --help)\n", prog);
        return 2;
    }
    if (!have_id && (o->role == RC_CONN_ROLE_SERVER ? o->servers : o->clients) > 1) {
        fprintf(stderr, "%s: give --id (several %ss)\n", prog,
                o->role == RC_CONN_ROLE_SERVER ? "server" : "client");
        return 2;
    }
    if (o->keys < 2 * o->window) {
        fprintf(stderr, "%s: --keys=%" PRIu64 " must be at least 2 x --window=%" PRIu64 "\n", prog,
                o->keys, o->window);
        return 2;
    }
    if (o->small_max <= FK_REQ_BYTES || o->small_max >= o->max_msg) {
        fprintf(stderr, "%s: --small-max must be above the %u-byte header and below --max-msg\n",
                prog, FK_REQ_BYTES);
        return 2;
    }
    if (o->alloc_threads == 0)
        o->alloc_threads = o->clients * o->window > FK_MAX_ALLOC_THREADS ? FK_MAX_ALLOC_THREADS
                                                                         : o->clients * o->window;
    if (o->shared_bytes < o->max_msg) {
        fprintf(stderr, "%s: --shared-bytes must hold one --max-msg message\n", prog);
        return 2;
    }
    return 0;
}

static uint32_t fk_opts_hash(const struct fk_opts *o)
{
    uint64_t words[] = {o->transport,      o->servers,
                        o->clients,        o->window,
                        o->requests,       o->warmup,
                        o->keys,           (uint64_t)(o->get_ratio * 1e6),
                        (uint64_t)o->rate, fk_mix(o->dist[0] | (uint64_t)strlen(o->dist) << 8),
                        o->max_msg,        o->small_max,
                        o->footprint,      o->alloc_ns,
                        o->shared_bytes,   o->mtu_bytes};
    return rc_conn_hash_words(words, sizeof(words) / sizeof(words[0]));
}

/* ------------------------------------------------------------ footprint-priority mode */

/* Receive buffers of every server (srq): footprint / max_msg; no cap: C x W. */
static uint64_t fk_srq_buffers(const struct fk_opts *o)
{
    if (o->footprint == 0)
        return o->clients * o->window;
    return o->footprint / o->max_msg;
}

/* Outstanding requests client c may have: its share of the system-wide cap
 * (= one server's buffers), at most --window. */
static uint64_t fk_client_window(const struct fk_opts *o, uint64_t c)
{
    if (o->transport != FK_SRQ || o->footprint == 0)
        return o->window;
    uint64_t cap = fk_srq_buffers(o);
    uint64_t w = cap / o->clients + (c < cap % o->clients ? 1 : 0);
    return w < o->window ? w : o->window;
}

/* Infeasible (Table 5 beyond 256 servers): a client whose share of the
 * cap is zero cannot issue anything. */
static bool fk_infeasible(const struct fk_opts *o)
{
    if (o->transport != FK_SRQ || o->footprint == 0)
        return false;
    uint64_t cap = o->footprint / o->max_msg;
    return cap < o->clients;
}

/* ------------------------------------------------------------ resources */

static int fk_open(struct fk *f)
{
    struct rc_conn *c = &f->conn;
    if (rc_conn_open_device(c))
        return 1;
    if (rc_conn_query(c, &f->dev, (uint32_t)f->o.mtu_bytes))
        return 1;
    uint32_t rd = f->dev.max_qp_rd_atom > 0 ? (uint32_t)f->dev.max_qp_rd_atom : 1;
    f->rd_atomic = (uint8_t)(rd > 255 ? 255 : rd);
    if (f->o.transport == FK_SPLIT_FAA && f->dev.atomic_cap == IBV_ATOMIC_NONE) {
        fprintf(stderr, "%s: split-faa needs atomics, the device has none\n", f->prog);
        return 1;
    }
    f->access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                (f->dev.atomic_cap != IBV_ATOMIC_NONE ? IBV_ACCESS_REMOTE_ATOMIC : 0);
    c->pd = ibv_alloc_pd(c->ctx);
    if (!c->pd) {
        fprintf(stderr, "%s: ibv_alloc_pd: %s\n", f->prog, strerror(errno));
        return 1;
    }
    return 0;
}

static struct ibv_cq *fk_cq(struct fk *f, uint64_t cqe)
{
    if (f->dev.max_cqe > 0 && cqe > (uint64_t)f->dev.max_cqe)
        cqe = (uint64_t)f->dev.max_cqe;
    struct ibv_cq *cq = ibv_create_cq(f->conn.ctx, (int)cqe, NULL, NULL, 0);
    if (!cq)
        fprintf(stderr, "%s: ibv_create_cq(%" PRIu64 "): %s\n", f->prog, cqe, strerror(errno));
    return cq;
}

/* A zeroed page-aligned buffer registered with `access`. */
static int fk_alloc_mr(struct fk *f, uint64_t bytes, int access, uint8_t **buf, struct ibv_mr **mr)
{
    void *mem = NULL;
    bytes = (bytes + 4095) & ~(uint64_t)4095;
    if (posix_memalign(&mem, 4096, (size_t)bytes) != 0) {
        fprintf(stderr, "%s: cannot allocate %" PRIu64 " bytes\n", f->prog, bytes);
        return 1;
    }
    /* Zero only small buffers: the large ones (message slots, arena,
     * receive buffers) are written before they are read, and not touching
     * them keeps the simulator from faulting in memory nobody uses. */
    if (bytes <= (1u << 20))
        memset(mem, 0, (size_t)bytes);
    *buf = mem;
    *mr = ibv_reg_mr(f->conn.pd, mem, (size_t)bytes, access);
    if (!*mr) {
        fprintf(stderr, "%s: ibv_reg_mr(%" PRIu64 " bytes): %s\n", f->prog, bytes, strerror(errno));
        return 1;
    }
    return 0;
}

static void fk_free_mr(uint8_t *buf, struct ibv_mr *mr)
{
    if (mr)
        ibv_dereg_mr(mr);
    free(buf);
}

static struct ibv_srq *fk_srq(struct fk *f, uint64_t wr)
{
    if (f->dev.max_srq_wr > 0 && wr > (uint64_t)f->dev.max_srq_wr) {
        fprintf(stderr, "%s: an SRQ of %" PRIu64 " receives exceeds the device's max_srq_wr %d\n",
                f->prog, wr, f->dev.max_srq_wr);
        return NULL;
    }
    struct ibv_srq_init_attr a = {.attr = {.max_wr = (uint32_t)wr, .max_sge = 1}};
    struct ibv_srq *srq = ibv_create_srq(f->conn.pd, &a);
    if (!srq)
        fprintf(stderr, "%s: ibv_create_srq(%" PRIu64 "): %s\n", f->prog, wr, strerror(errno));
    return srq;
}

static int fk_post_recv(struct fk *f, struct ibv_srq *srq, uint8_t *base, uint64_t bytes,
                        uint32_t lkey, uint64_t i)
{
    struct ibv_sge sge = {
        .addr = (uintptr_t)(base + i * bytes), .length = (uint32_t)bytes, .lkey = lkey};
    struct ibv_recv_wr wr = {.wr_id = i, .sg_list = &sge, .num_sge = 1}, *bad = NULL;
    int err = ibv_post_srq_recv(srq, &wr, &bad);
    if (err)
        fprintf(stderr, "%s: ibv_post_srq_recv: %s\n", f->prog, strerror(err));
    return err ? 1 : 0;
}

static struct ibv_qp *fk_qp(struct fk *f, struct ibv_cq *scq, struct ibv_cq *rcq,
                            struct ibv_srq *srq, uint32_t send_wr)
{
    struct ibv_qp_init_attr ia = {
        .send_cq = scq,
        .recv_cq = rcq,
        .srq = srq,
        .cap = {.max_send_wr = send_wr,
                .max_recv_wr = srq ? 0 : 1,
                .max_send_sge = 2,
                .max_recv_sge = 1},
        .qp_type = IBV_QPT_RC,
    };
    if (f->o.role == RC_CONN_ROLE_SERVER && f->s.aq)
        rima_aq_qp_init_attr(f->s.aq, &ia);
    struct ibv_qp *qp = ibv_create_qp(f->conn.pd, &ia);
    if (!qp)
        fprintf(stderr, "%s: ibv_create_qp: %s\n", f->prog, strerror(errno));
    return qp;
}

static uint32_t fk_psn(uint32_t qpn, enum rc_conn_role role)
{
    return (qpn * 2654435761u + (uint32_t)role) & 0xffffffu;
}

/* Publish this program's connection data; fetch every peer's; connect
 * qps[i] to peer i. */
static int fk_exchange_connect(struct fk *f, struct ibv_qp **qps, struct fk_conn_hdr *mine)
{
    char key[FK_KEY_MAX];
    bool server = f->o.role == RC_CONN_ROLE_SERVER;
    size_t len = sizeof(struct fk_conn_hdr) + f->npeers * sizeof(uint32_t);
    uint8_t *wire = calloc(1, len);
    f->peer = calloc(f->npeers, sizeof(*f->peer));
    if (!wire || !f->peer) {
        free(wire);
        return 1;
    }
    memcpy(mine->gid, f->conn.gid.raw, 16);
    mine->lid = f->conn.port.lid;
    mine->n = f->npeers;
    mine->opts_hash = fk_opts_hash(&f->o);
    memcpy(wire, mine, sizeof(*mine));
    for (uint32_t i = 0; i < f->npeers; i++) {
        uint32_t q = qps[i]->qp_num;
        memcpy(wire + sizeof(*mine) + i * 4, &q, 4);
    }
    snprintf(key, sizeof(key), "%s/%c%" PRIu64, f->o.name, server ? 's' : 'c', f->o.id);
    int rc = fk_put(f, key, wire, len);
    size_t plen = sizeof(struct fk_conn_hdr) + (server ? f->o.servers : f->o.clients) * 4;
    uint8_t *pw = calloc(1, plen);
    for (uint32_t i = 0; rc == 0 && i < f->npeers; i++) {
        snprintf(key, sizeof(key), "%s/%c%u", f->o.name, server ? 'c' : 's', i);
        if (!pw || fk_get(f, key, pw, plen)) {
            rc = 1;
            break;
        }
        memcpy(&f->peer[i], pw, sizeof(f->peer[i]));
        if (f->peer[i].opts_hash != mine->opts_hash) {
            fprintf(stderr, "%s: %s %u runs with other options (hash %08x, mine %08x)\n", f->prog,
                    server ? "client" : "server", i, f->peer[i].opts_hash, mine->opts_hash);
            rc = 2;
            break;
        }
        uint32_t q = 0;
        memcpy(&q, pw + sizeof(struct fk_conn_hdr) + f->o.id * 4, 4);
        struct rc_conn *c = &f->conn;
        memcpy(c->peer.gid, f->peer[i].gid, 16);
        c->peer.lid = f->peer[i].lid;
        c->qp = qps[i];
        c->local.psn = fk_psn(qps[i]->qp_num, f->o.role);
        c->peer.qpn = q;
        c->peer.psn = fk_psn(q, server ? RC_CONN_ROLE_CLIENT : RC_CONN_ROLE_SERVER);
        if (rc_conn_connect(c, f->access, f->rd_atomic))
            rc = 1;
        c->qp = NULL;
    }
    free(pw);
    free(wire);
    return rc;
}

/* ------------------------------------------------------------ server: store */

static unsigned fk_class(uint32_t len)
{
    unsigned c = FK_SLAB_MIN_SHIFT;
    while ((1ull << c) < len)
        c++;
    return c;
}

/* A chunk of class cls from its free list or the bump pointer; false when
 * the arena is full. */
static bool fk_chunk_alloc(struct fk_server *s, unsigned cls, uint64_t *off)
{
    if (s->free_head[cls]) {
        *off = s->free_head[cls] - 1;
        memcpy(&s->free_head[cls], s->arena + *off, 8);
        return true;
    }
    uint64_t size = 1ull << cls;
    if (s->arena_top + size > s->arena_bytes)
        return false;
    *off = s->arena_top;
    s->arena_top += size;
    return true;
}

static void fk_chunk_free(struct fk_server *s, unsigned cls, uint64_t off)
{
    memcpy(s->arena + off, &s->free_head[cls], 8);
    s->free_head[cls] = off + 1;
}

static struct fk_item *fk_lookup(struct fk_server *s, uint64_t key, bool insert)
{
    uint64_t mask = s->table_cap - 1;
    struct fk_item *tomb = NULL;
    for (uint64_t i = fk_mix(key) & mask, n = 0; n < s->table_cap; i = (i + 1) & mask, n++) {
        struct fk_item *it = &s->table[i];
        if (it->key == key && it->used)
            return it;
        if (it->key == 0) /* never used: the key is absent */
            return insert ? (tomb ? tomb : it) : NULL;
        if (!it->used && !tomb)
            tomb = it;
    }
    return insert ? tomb : NULL;
}

/* ------------------------------------------------------------ server: requests */

/* Send a response to `client`: header + optional value from the arena.
 * The header slot is freed on the send completion (wr_id = its index). */
static int fk_respond(struct fk *f, uint32_t client, const struct fk_resp *r, uint64_t val_off,
                      uint32_t val_len)
{
    struct fk_server *s = &f->s;
    if (s->hdr_top == 0) {
        fprintf(stderr, "%s: out of response headers\n", f->prog);
        return 1;
    }
    uint32_t h = s->hdr_free[--s->hdr_top];
    memcpy(s->hdrs + (uint64_t)h * FK_HDR_SLOT_BYTES, r, sizeof(*r));
    struct ibv_sge sge[2] = {
        {.addr = (uintptr_t)(s->hdrs + (uint64_t)h * FK_HDR_SLOT_BYTES),
         .length = FK_RESP_BYTES,
         .lkey = s->hdrs_mr->lkey},
        {.addr = (uintptr_t)(s->arena + val_off), .length = val_len, .lkey = s->arena_mr->lkey},
    };
    struct ibv_send_wr wr = {.wr_id = h,
                             .sg_list = sge,
                             .num_sge = val_len ? 2 : 1,
                             .opcode = IBV_WR_SEND,
                             .send_flags = IBV_SEND_SIGNALED},
                       *bad = NULL;
    int err = ibv_post_send(s->qps[client], &wr, &bad);
    if (err) {
        fprintf(stderr, "%s: ibv_post_send (response): %s\n", f->prog, strerror(err));
        return 1;
    }
    return 0;
}

/* One request message p[0..len) (already counted as outstanding).  The
 * caller releases the receive buffer after this returns; GET values are
 * sent from the arena, SET values are copied into it. */
static int fk_serve(struct fk *f, const uint8_t *p, uint32_t len)
{
    struct fk_server *s = &f->s;
    struct fk_req q;
    if (len < FK_REQ_BYTES) {
        fprintf(stderr, "%s: VERIFY FAILED: a %u-byte request (header %u)\n", f->prog, len,
                FK_REQ_BYTES);
        return 2;
    }
    memcpy(&q, p, sizeof(q));
    if (q.client >= f->o.clients || q.slot >= f->o.window ||
        (q.op == FK_OP_SET && q.value_len != len - FK_REQ_BYTES) ||
        (q.op != FK_OP_SET && q.op != FK_OP_GET && q.op != FK_OP_RTS) ||
        q.key >> 32 != (uint64_t)q.client + 1 || fk_key_server(q.key, f->o.servers) != f->o.id) {
        fprintf(stderr,
                "%s: VERIFY FAILED: malformed request (op %u client %u slot %u len %u/%u key "
                "%#" PRIx64 ")\n",
                f->prog, q.op, q.client, q.slot, q.value_len, len, q.key);
        return 2;
    }
    s->res.requests++;
    struct fk_resp r = {.slot = q.slot, .key = q.key};
    if (q.op == FK_OP_GET) {
        struct fk_item *it = fk_lookup(s, q.key, false);
        if (!it) {
            r.status = FK_ST_MISS;
            return fk_respond(f, q.client, &r, 0, 0);
        }
        r.status = FK_ST_HIT;
        r.value_len = it->len;
        r.checksum = it->checksum;
        return fk_respond(f, q.client, &r, it->off, it->len);
    }
    if (q.op == FK_OP_RTS) { /* split-alloc: wait for a buffer (fk_alloc_*) */
        uint64_t g = 0;
        while (g < s->ngrants && s->grants[g].busy)
            g++;
        if (g == s->ngrants || q.value_len + FK_REQ_BYTES > f->o.max_msg) {
            fprintf(stderr, "%s: bad request-to-send (grants %" PRIu64 ", len %u)\n", f->prog,
                    s->ngrants, q.value_len);
            return 2;
        }
        s->grants[g] = (struct fk_grant){
            .client = q.client, .slot = q.slot, .len = q.value_len + FK_REQ_BYTES, .busy = true};
        s->alloc_queue[s->aq_tail++ % s->ngrants] = (uint32_t)g;
        s->res.requests--; /* counted when the message itself arrives */
        return 0;
    }
    /* SET */
    const uint8_t *v = p + FK_REQ_BYTES;
    uint32_t sum = fk_fnv(v, q.value_len);
    if (sum != q.checksum) {
        fprintf(stderr,
                "%s: VERIFY FAILED: SET of key %#" PRIx64 " (%u bytes) arrived with checksum "
                "%08x, sent %08x\n",
                f->prog, q.key, q.value_len, sum, q.checksum);
        r.status = FK_ST_ERROR;
        f->status = 2;
        return fk_respond(f, q.client, &r, 0, 0);
    }
    struct fk_item *it = fk_lookup(s, q.key, true);
    if (!it) {
        fprintf(stderr, "%s: hash table full\n", f->prog);
        return 1;
    }
    if (it->used) {
        fk_chunk_free(s, it->cls, it->off);
        it->used = false;
        s->items--;
    }
    unsigned cls = fk_class(q.value_len ? q.value_len : 1);
    uint64_t off = 0;
    if (cls > FK_SLAB_MAX_SHIFT || !fk_chunk_alloc(s, cls, &off)) {
        r.status = FK_ST_NOT_STORED; /* the old value is gone too */
        it->key = it->key ? it->key : 1;
        return fk_respond(f, q.client, &r, 0, 0);
    }
    host_memcpy(s->arena + off, v, q.value_len); /* the memcpy cost W of Table 4 */
    if (f->o.inject_every && q.value_len && ++s->injected % f->o.inject_every == 0)
        s->arena[off + q.value_len / 2] ^= 0x10; /* after the checksum was taken */
    *it = (struct fk_item){.key = q.key,
                           .off = off,
                           .len = q.value_len,
                           .checksum = sum,
                           .cls = (uint8_t)cls,
                           .used = true};
    s->items++;
    r.status = FK_ST_STORED;
    return fk_respond(f, q.client, &r, 0, 0);
}

/* ------------------------------------------------------------ server: allocator threads */

/* Table 6 row 3: an allocation takes --alloc-ns of host time before the
 * buffer exists (Section 5.2.1: kalloc + mlock, 0.97 ms median, 1 ms used),
 * then the exact size is allocated and registered. */
static void fk_allocator_thread(void *arg)
{
    struct fk_allocator *a = arg;
    struct fk_server *s = a->srv;
    for (;;) {
        int st;
        while ((st = atomic_load(&a->state)) != FK_ALLOC_JOB && st != FK_ALLOC_EXIT)
            host_relax();
        if (st == FK_ALLOC_EXIT)
            return;
        struct fk_grant *g = &s->grants[a->grant];
        host_compute(a->alloc_ns);
        void *mem = NULL;
        uint64_t bytes = ((uint64_t)g->len + 63) & ~(uint64_t)63;
        if (posix_memalign(&mem, 64, (size_t)bytes) == 0) {
            g->buf = mem;
            g->mr = ibv_reg_mr(s->arena_mr->pd, mem, (size_t)bytes,
                               IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
        }
        a->failed = !g->mr;
        atomic_store(&a->state, FK_ALLOC_DONE);
    }
}

/* Hand queued grants to idle allocators; send GRANTs for finished ones. */
static int fk_alloc_progress(struct fk *f, bool *progressed)
{
    struct fk_server *s = &f->s;
    for (uint64_t i = 0; i < f->o.alloc_threads; i++) {
        struct fk_allocator *a = &s->alloc[i];
        int st = atomic_load(&a->state);
        if (st == FK_ALLOC_DONE) {
            struct fk_grant *g = &s->grants[a->grant];
            if (a->failed) {
                fprintf(stderr, "%s: on-demand allocation of %u bytes failed\n", f->prog, g->len);
                return 1;
            }
            s->large_bytes += ((uint64_t)g->len + 63) & ~(uint64_t)63;
            if (s->large_bytes > s->large_bytes_peak)
                s->large_bytes_peak = s->large_bytes;
            s->res.allocs++;
            struct fk_resp r = {.status = FK_ST_GRANT,
                                .slot = g->slot,
                                .addr = (uintptr_t)g->buf,
                                .rkey = g->mr->rkey,
                                .grant = a->grant};
            atomic_store(&a->state, FK_ALLOC_IDLE);
            st = FK_ALLOC_IDLE;
            *progressed = true;
            if (fk_respond(f, g->client, &r, 0, 0))
                return 1;
        }
        if (st == FK_ALLOC_IDLE && s->aq_head != s->aq_tail) {
            a->grant = s->alloc_queue[s->aq_head++ % s->ngrants];
            atomic_store(&a->state, FK_ALLOC_JOB);
            *progressed = true;
        }
    }
    return 0;
}

/* ------------------------------------------------------------ server: setup and loop */

static int fk_server_setup(struct fk *f)
{
    struct fk_server *s = &f->s;
    const struct fk_opts *o = &f->o;
    enum fk_transport t = o->transport;
    uint64_t C = o->clients, W = o->window;
    f->npeers = (uint32_t)C;
    int ra = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
    if (!fk_transports[t].rima) {
        s->nbufs = t == FK_SRQ ? fk_srq_buffers(o) : C * W;
        s->buf_bytes = t == FK_SRQ ? o->max_msg : o->small_max;
    }
    f->cq = fk_cq(f, s->nbufs + C * (W + 4) + 64);
    f->scq = fk_cq(f, C * (2 * W + 4) + 64);
    if (!f->cq || !f->scq)
        return 1;
    if (fk_transports[t].rima) {
        struct rima_aq_opts ao = {.mode = t == FK_RIMA ? RIMA_HW : RIMA_SW,
                                  .region_bytes = o->aq_region_bytes,
                                  .recv_depth = (uint32_t)(C * W + 16)};
        s->aq = rima_aq_create(f->conn.pd, f->cq, &ao);
        if (!s->aq) {
            fprintf(stderr, "%s: rima_aq_create(%s, %" PRIu64 " bytes): %s\n", f->prog,
                    t == FK_RIMA ? "hw" : "sw", o->aq_region_bytes, strerror(errno));
            return 1;
        }
    } else {
        s->srq = fk_srq(f, s->nbufs);
        if (!s->srq || fk_alloc_mr(f, s->nbufs * s->buf_bytes, ra, &s->rbuf, &s->rbuf_mr))
            return 1;
        for (uint64_t i = 0; i < s->nbufs; i++)
            if (fk_post_recv(f, s->srq, s->rbuf, s->buf_bytes, s->rbuf_mr->lkey, i))
                return 1;
    }
    if (fk_alloc_mr(f, (C * FK_WORDS_PER_CLIENT + 8) * 8, f->access, (uint8_t **)&s->ctrl,
                    &s->ctrl_mr))
        return 1;
    if (t == FK_SPLIT_FAA || t == FK_SPLIT_PRESEND) {
        s->big_bytes = t == FK_SPLIT_FAA ? o->shared_bytes : C * o->max_msg;
        if (fk_alloc_mr(f, s->big_bytes, ra, &s->big, &s->big_mr))
            return 1;
    }
    s->arena_bytes = o->store_bytes;
    if (fk_alloc_mr(f, s->arena_bytes, IBV_ACCESS_LOCAL_WRITE, &s->arena, &s->arena_mr))
        return 1;
    s->table_cap = 64;
    while (s->table_cap < 2 * C * o->keys)
        s->table_cap <<= 1;
    s->table = calloc(s->table_cap, sizeof(*s->table));
    s->nhdr = C * (W + 1) + 16;
    s->hdr_free = calloc(s->nhdr, sizeof(*s->hdr_free));
    if (!s->table || !s->hdr_free ||
        fk_alloc_mr(f, s->nhdr * FK_HDR_SLOT_BYTES, IBV_ACCESS_LOCAL_WRITE, &s->hdrs, &s->hdrs_mr))
        return 1;
    for (uint64_t i = 0; i < s->nhdr; i++)
        s->hdr_free[s->hdr_top++] = (uint32_t)(s->nhdr - 1 - i);
    if (t == FK_SPLIT_ALLOC) {
        s->ngrants = C * W;
        s->grants = calloc(s->ngrants, sizeof(*s->grants));
        s->alloc_queue = calloc(s->ngrants, sizeof(*s->alloc_queue));
        s->alloc = calloc(o->alloc_threads, sizeof(*s->alloc));
        if (!s->grants || !s->alloc_queue || !s->alloc)
            return 1;
        for (uint64_t i = 0; i < o->alloc_threads; i++) {
            s->alloc[i].srv = s;
            s->alloc[i].alloc_ns = o->alloc_ns;
            atomic_init(&s->alloc[i].state, FK_ALLOC_IDLE);
            s->alloc[i].handle = host_thread_start(fk_allocator_thread, &s->alloc[i]);
            if (s->alloc[i].handle < 0) {
                fprintf(stderr, "%s: host_thread_start: %s\n", f->prog, strerror(errno));
                return 1;
            }
        }
    }
    s->qps = calloc(C, sizeof(*s->qps));
    if (!s->qps)
        return 1;
    for (uint64_t i = 0; i < C; i++)
        if (!(s->qps[i] = fk_qp(f, f->scq, f->cq, s->srq, (uint32_t)(2 * W + 4))))
            return 1;
    struct fk_conn_hdr mine = {.ctrl_rkey = s->ctrl_mr->rkey,
                               .ctrl_addr = (uintptr_t)s->ctrl,
                               .big_rkey = s->big_mr ? s->big_mr->rkey : 0,
                               .big_addr = (uintptr_t)s->big,
                               .big_bytes = s->big_bytes};
    if (s->aq) {
        struct rima_aq_remote rem;
        if (rima_aq_export(s->aq, &rem)) {
            fprintf(stderr, "%s: rima_aq_export: %s\n", f->prog, strerror(errno));
            return 1;
        }
        rima_remote_encode(&rem, mine.rima_remote);
    }
    int rc = fk_exchange_connect(f, s->qps, &mine);
    if (rc)
        return rc;
    char key[FK_KEY_MAX];
    snprintf(key, sizeof(key), "%s/ready/s%" PRIu64, o->name, o->id);
    uint8_t one = 1;
    return fk_put(f, key, &one, 1);
}

/* Footprint of this server's receive memory (Section 5.1: what holds
 * incoming messages). */
static void fk_server_footprint(struct fk *f)
{
    struct fk_server *s = &f->s;
    s->res.small_bytes = s->nbufs * s->buf_bytes;
    s->res.posted_bytes = s->res.small_bytes;
    switch (f->o.transport) {
    case FK_SPLIT_ALLOC:
        s->res.large_bytes_peak = s->large_bytes_peak;
        break;
    case FK_SPLIT_FAA:
    case FK_SPLIT_PRESEND:
        s->res.large_bytes_peak = s->big_bytes;
        break;
    case FK_RIMA:
    case FK_RIMA_SW:
        s->res.large_bytes_peak = s->aq_peak_footprint;
        break;
    default:
        break;
    }
    s->res.footprint_bytes = s->res.small_bytes + s->res.large_bytes_peak;
    s->res.peak_outstanding = s->peak_outstanding;
}

static void fk_outstanding(struct fk_server *s, int delta)
{
    s->outstanding = (uint64_t)((int64_t)s->outstanding + delta);
    if (s->outstanding > s->peak_outstanding)
        s->peak_outstanding = s->outstanding;
}

/* A receive completion of the request SRQ (srq / split). */
static int fk_server_recv(struct fk *f, const struct ibv_wc *wc)
{
    struct fk_server *s = &f->s;
    uint64_t b = wc->wr_id;
    int rc = 0;
    if (wc->opcode == IBV_WC_RECV) {
        fk_outstanding(s, +1);
        rc = fk_serve(f, s->rbuf + b * s->buf_bytes, wc->byte_len);
        const struct fk_req *q = (const void *)(s->rbuf + b * s->buf_bytes);
        if (rc == 0 && q->op != FK_OP_RTS)
            fk_outstanding(s, -1);
    } else if (wc->opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
        uint32_t imm = (uint32_t)wc->imm_data;
        uint32_t kind = imm >> FK_IMM_KIND_SHIFT, idx = imm & FK_IMM_INDEX_MASK;
        const uint8_t *p = NULL;
        struct fk_grant *g = NULL;
        if (kind == FK_IMM_ALLOC && f->o.transport == FK_SPLIT_ALLOC && idx < s->ngrants &&
            s->grants[idx].busy && s->grants[idx].len == wc->byte_len) {
            g = &s->grants[idx];
            p = g->buf;
        } else if (kind == FK_IMM_FAA && f->o.transport == FK_SPLIT_FAA &&
                   (uint64_t)idx * FK_ALIGN + wc->byte_len <= s->big_bytes) {
            p = s->big + (uint64_t)idx * FK_ALIGN;
            fk_outstanding(s, +1);
        } else if (kind == FK_IMM_PRESEND && f->o.transport == FK_SPLIT_PRESEND &&
                   idx < f->o.clients && wc->byte_len <= f->o.max_msg) {
            p = s->big + (uint64_t)idx * f->o.max_msg;
            fk_outstanding(s, +1);
        } else {
            fprintf(stderr, "%s: VERIFY FAILED: unexpected immediate %#x (%u bytes)\n", f->prog,
                    imm, wc->byte_len);
            return 2;
        }
        rc = fk_serve(f, p, wc->byte_len);
        fk_outstanding(s, -1);
        if (g) {
            ibv_dereg_mr(g->mr);
            free(g->buf);
            s->large_bytes -= ((uint64_t)g->len + 63) & ~(uint64_t)63;
            *g = (struct fk_grant){0};
        }
    } else {
        fprintf(stderr, "%s: unexpected receive opcode %d\n", f->prog, (int)wc->opcode);
        return 1;
    }
    if (rc)
        return rc;
    return fk_post_recv(f, s->srq, s->rbuf, s->buf_bytes, s->rbuf_mr->lkey, b);
}

/* Peak of the append queue's footprint (HW: committed chunks; SW: the
 * region, control page and receive WQEs). */
static void fk_aq_sample(struct fk_server *s)
{
    struct rima_aq_stats st;
    if (s->aq && rima_aq_query(s->aq, &st) == 0 && st.footprint_bytes > s->aq_peak_footprint)
        s->aq_peak_footprint = st.footprint_bytes;
}

static int fk_server_loop(struct fk *f)
{
    struct fk_server *s = &f->s;
    struct ibv_wc wc[FK_POLL_BATCH];
    struct rima_msg msg[FK_POLL_BATCH];
    volatile uint64_t *done = s->ctrl;
    for (;;) {
        bool progressed = false;
        if (s->aq) {
            (void)host_now_ns(); /* no park inside (fk_idle) */
            int n = rima_poll_aq(s->aq, FK_POLL_BATCH, msg);
            if (n < 0) {
                fprintf(stderr, "%s: rima_poll_aq: %s\n", f->prog, strerror(errno));
                return 1;
            }
            for (int i = 0; i < n; i++) {
                fk_outstanding(s, +1);
                int rc = fk_serve(f, msg[i].addr, msg[i].len);
                fk_outstanding(s, -1);
                if (rc)
                    return rc;
                int err = rima_aq_consume(s->aq, &msg[i]);
                if (err) {
                    fprintf(stderr, "%s: rima_aq_consume: %s\n", f->prog, strerror(err));
                    return 1;
                }
            }
            if (n > 0) {
                /* ibv_query_aq is a control-path verb (costs host time):
                 * sample the committed bytes every 64th busy poll and at
                 * the end (fk_aq_sample). */
                if (s->aq_samples++ % 64 == 0)
                    fk_aq_sample(s);
                progressed = true;
            }
        } else {
            int n = fk_poll(f->cq, FK_POLL_BATCH, wc);
            if (n < 0) {
                fprintf(stderr, "%s: ibv_poll_cq failed\n", f->prog);
                return 1;
            }
            for (int i = 0; i < n; i++) {
                if (!fk_wc_ok(f, &wc[i]))
                    return 1;
                int rc = fk_server_recv(f, &wc[i]);
                if (rc)
                    return rc;
            }
            progressed |= n > 0;
        }
        int n = fk_poll(f->scq, FK_POLL_BATCH, wc);
        for (int i = 0; i < n; i++) {
            if (!fk_wc_ok(f, &wc[i]))
                return 1;
            s->hdr_free[s->hdr_top++] = (uint32_t)wc[i].wr_id;
        }
        progressed |= n > 0;
        if (s->alloc && fk_alloc_progress(f, &progressed))
            return 1;
        if (!progressed) {
            uint64_t c = 0;
            while (c < f->o.clients && done[c * FK_WORDS_PER_CLIENT])
                c++;
            if (c == f->o.clients && s->hdr_top == s->nhdr && s->outstanding == 0)
                break;
        }
        fk_idle(f, progressed);
    }
    fk_aq_sample(s);
    for (uint64_t c = 0; c < f->o.clients; c++) {
        uint64_t st = done[c * FK_WORDS_PER_CLIENT] - 1;
        if (st > (uint64_t)f->status)
            f->status = (int)st;
    }
    return 0;
}

/* ------------------------------------------------------------ client */

enum fk_wr_kind { FK_WR_SEND = 1, FK_WR_FAA, FK_WR_WRITE, FK_WR_DONE };
#define FK_WR(kind, slot) ((uint64_t)(kind) << 32 | (slot))

static uint64_t fk_slot_bytes(const struct fk *f)
{
    return f->o.max_msg;
}
static uint64_t fk_rslot_bytes(const struct fk *f)
{
    return f->o.max_msg + 64;
}

static int fk_client_setup(struct fk *f)
{
    struct fk_client *c = &f->c;
    const struct fk_opts *o = &f->o;
    uint64_t S = o->servers, W = o->window;
    bool rima = fk_transports[o->transport].rima;
    f->npeers = (uint32_t)S;
    f->cq = fk_cq(f, 2 * W + 16);
    if (!f->cq)
        return 1;
    c->qps = calloc(S, sizeof(*c->qps));
    c->scqs = calloc(S, sizeof(*c->scqs));
    c->snd = calloc(S, sizeof(*c->snd));
    c->presend_busy = calloc(S, sizeof(*c->presend_busy));
    c->slots = calloc(W, sizeof(*c->slots));
    c->keys = calloc(o->keys, sizeof(*c->keys));
    c->total = o->warmup + o->requests;
    c->lat_all = calloc(o->requests, sizeof(uint64_t));
    c->lat_large = calloc(o->requests, sizeof(uint64_t));
    if (!c->qps || !c->scqs || !c->snd || !c->presend_busy || !c->slots || !c->keys ||
        !c->lat_all || !c->lat_large)
        return 1;
    c->win = fk_client_window(o, o->id);
    c->res.window = c->win;
    if (!rima && !(f->scq = fk_cq(f, S * (2 * W + 4) + 16)))
        return 1;
    int la = IBV_ACCESS_LOCAL_WRITE;
    if (fk_alloc_mr(f, W * fk_slot_bytes(f) + W * 8, la, &c->sbuf, &c->sbuf_mr) ||
        fk_alloc_mr(f, W * fk_rslot_bytes(f), la, &c->rbuf, &c->rbuf_mr))
        return 1;
    c->srq = fk_srq(f, W);
    if (!c->srq)
        return 1;
    for (uint64_t i = 0; i < W; i++)
        if (fk_post_recv(f, c->srq, c->rbuf, fk_rslot_bytes(f), c->rbuf_mr->lkey, i))
            return 1;
    for (uint64_t s = 0; s < S; s++) {
        if (rima && !(c->scqs[s] = fk_cq(f, 2 * W + 8)))
            return 1;
        if (!(c->qps[s] =
                  fk_qp(f, rima ? c->scqs[s] : f->scq, f->cq, c->srq, (uint32_t)(2 * W + 4))))
            return 1;
    }
    struct fk_conn_hdr mine = {0};
    int rc = fk_exchange_connect(f, c->qps, &mine);
    if (rc)
        return rc;
    if (rima)
        for (uint64_t s = 0; s < S; s++) {
            struct rima_aq_remote rem;
            if (rima_remote_decode(f->peer[s].rima_remote, &rem)) {
                fprintf(stderr, "%s: server %" PRIu64 " sent a bad RIMA descriptor\n", f->prog, s);
                return 1;
            }
            struct rima_sender_opts so = {.window = (uint32_t)W, .sq_depth = (uint32_t)(2 * W + 4)};
            c->snd[s] = rima_sender_create(f->conn.pd, c->qps[s], c->scqs[s], &rem, &so);
            if (!c->snd[s]) {
                fprintf(stderr, "%s: rima_sender_create: %s\n", f->prog, strerror(errno));
                return 1;
            }
        }
    char key[FK_KEY_MAX];
    for (uint64_t s = 0; s < S; s++) {
        uint8_t one = 0;
        snprintf(key, sizeof(key), "%s/ready/s%" PRIu64, o->name, s);
        if (fk_get(f, key, &one, 1))
            return 1;
    }
    /* Workload: sizes of Figure 2 truncated to one message, Poisson
     * arrivals, keys: all seeded by (seed, client id). */
    char err[160];
    uint64_t seed = fk_mix(o->seed * 0x100000001b3ull + o->id);
    if (wl_dist_parse(&c->dist, o->dist, seed, err, sizeof(err))) {
        fprintf(stderr, "%s: --dist=%s: %s\n", f->prog, o->dist, err);
        return 2;
    }
    wl_dist_set_transform(&c->dist, 1.0, (uint32_t)(o->max_msg - FK_REQ_BYTES));
    if (o->rate > 0 && wl_arrival_poisson(&c->arrival, o->rate, seed ^ 0xa5a5a5a5ull)) {
        fprintf(stderr, "%s: bad --rate\n", f->prog);
        return 2;
    }
    wl_rng_seed(&c->rng, seed ^ 0x5bd1e995ull);
    return 0;
}

/* Draw the next request: a key of this client not in flight, GET or SET,
 * value size. */
static void fk_draw(struct fk *f)
{
    struct fk_client *c = &f->c;
    const struct fk_opts *o = &f->o;
    uint32_t k = (uint32_t)(wl_rng_next(&c->rng) % o->keys);
    while (c->keys[k].inflight) /* at most window keys are: terminates */
        k = (uint32_t)((k + 1) % o->keys);
    c->next_key = k;
    c->next_get = wl_rng_unit(&c->rng) <= o->get_ratio && o->get_ratio > 0;
    c->next_len = c->next_get ? 0 : wl_dist_sample(&c->dist);
    if (o->rate > 0) {
        double gap = wl_arrival_next_gap_ns(&c->arrival, c->next_len + FK_REQ_BYTES);
        c->next_arrival_ns =
            (c->issued == 0 ? host_now_ns() : c->next_arrival_ns) + (uint64_t)(gap + 0.5);
    }
    c->have_next = true;
}

static int fk_post(struct fk *f, struct ibv_qp *qp, struct ibv_send_wr *wr)
{
    struct ibv_send_wr *bad = NULL;
    int err = ibv_post_send(qp, wr, &bad);
    if (err)
        fprintf(stderr, "%s: ibv_post_send: %s\n", f->prog, strerror(err));
    return err ? 1 : 0;
}

/* The whole request of slot j (header + value) to server s by
 * WRITE_WITH_IMM at raddr. */
static int fk_write_imm(struct fk *f, uint32_t j, uint32_t s, uint64_t raddr, uint32_t rkey,
                        uint32_t imm)
{
    struct fk_client *c = &f->c;
    struct ibv_sge sge = {.addr = (uintptr_t)(c->sbuf + j * fk_slot_bytes(f)),
                          .length = FK_REQ_BYTES + c->slots[j].len,
                          .lkey = c->sbuf_mr->lkey};
    struct ibv_send_wr wr = {.wr_id = FK_WR(FK_WR_WRITE, j),
                             .sg_list = &sge,
                             .num_sge = 1,
                             .opcode = IBV_WR_RDMA_WRITE_WITH_IMM,
                             .send_flags = IBV_SEND_SIGNALED,
                             .imm_data = (__be32)imm};
    wr.wr.rdma.remote_addr = raddr;
    wr.wr.rdma.rkey = rkey;
    c->slots[j].phase = FK_WAIT_RESP;
    return fk_post(f, c->qps[s], &wr);
}

static int fk_faa(struct fk *f, uint32_t j, uint32_t s)
{
    struct fk_client *c = &f->c;
    uint64_t add =
        ((uint64_t)FK_REQ_BYTES + c->slots[j].len + FK_ALIGN - 1) & ~(uint64_t)(FK_ALIGN - 1);
    struct ibv_sge sge = {.addr = (uintptr_t)(c->sbuf + f->o.window * fk_slot_bytes(f) + j * 8),
                          .length = 8,
                          .lkey = c->sbuf_mr->lkey};
    struct ibv_send_wr wr = {.wr_id = FK_WR(FK_WR_FAA, j),
                             .sg_list = &sge,
                             .num_sge = 1,
                             .opcode = IBV_WR_ATOMIC_FETCH_AND_ADD,
                             .send_flags = IBV_SEND_SIGNALED};
    wr.wr.atomic.remote_addr = f->peer[s].ctrl_addr + f->o.clients * FK_WORDS_PER_CLIENT * 8;
    wr.wr.atomic.rkey = f->peer[s].ctrl_rkey;
    wr.wr.atomic.compare_add = add;
    c->slots[j].phase = FK_WAIT_FAA;
    return fk_post(f, c->qps[s], &wr);
}

/* Try to issue the drawn request; false (nothing done) when its server has
 * no free presend slot or the client no free window slot. */
static int fk_issue(struct fk *f, bool *issued)
{
    struct fk_client *c = &f->c;
    const struct fk_opts *o = &f->o;
    enum fk_transport t = o->transport;
    uint64_t key = fk_client_key(o->id, c->next_key);
    uint32_t s = fk_key_server(key, o->servers);
    uint32_t msg = FK_REQ_BYTES + c->next_len;
    bool large = !c->next_get && msg > o->small_max;
    *issued = false;
    if (c->inflight >= c->win || (t == FK_SPLIT_PRESEND && large && c->presend_busy[s]))
        return 0;
    /* A response can overtake the completion of its append: the layer's
     * window (W) counts appends not yet completed, so wait for it too. */
    if (fk_transports[t].rima && rima_sender_outstanding(c->snd[s]) >= o->window)
        return 0;
    uint32_t j = 0;
    while (j < o->window && c->slots[j].phase != FK_FREE)
        j++;
    if (j == o->window)
        return 0;
    struct fk_key *k = &c->keys[c->next_key];
    struct fk_slot *sl = &c->slots[j];
    *sl = (struct fk_slot){.phase = FK_WAIT_RESP,
                           .key_idx = c->next_key,
                           .server = s,
                           .len = c->next_len,
                           .version = c->next_get ? k->version : k->version + 1,
                           .op = c->next_get ? FK_OP_GET : FK_OP_SET,
                           .large = large,
                           .timed = c->issued >= o->warmup,
                           .t0_ns = o->rate > 0 ? c->next_arrival_ns : host_now_ns()};
    uint8_t *p = c->sbuf + j * fk_slot_bytes(f);
    struct fk_req q = {
        .op = sl->op, .client = (uint32_t)o->id, .slot = j, .value_len = sl->len, .key = key};
    if (!c->next_get) {
        fk_fill(p + FK_REQ_BYTES, sl->len, key, sl->version);
        q.checksum = fk_fnv(p + FK_REQ_BYTES, sl->len);
    }
    bool rts = large && t == FK_SPLIT_ALLOC;
    if (rts)
        q.op = FK_OP_RTS;
    memcpy(p, &q, sizeof(q)); /* RTS: the header alone asks for a buffer (GRANT: SET) */
    k->inflight = true;
    c->issued++;
    c->inflight++;
    if (c->inflight > c->res.peak_inflight)
        c->res.peak_inflight = c->inflight;
    c->have_next = false;
    *issued = true;
    if (fk_transports[t].rima) {
        struct ibv_sge sge = {.addr = (uintptr_t)p, .length = msg, .lkey = c->sbuf_mr->lkey};
        int err = rima_post_append(c->snd[s], j, &sge, 1, IBV_SEND_SIGNALED);
        if (err)
            fprintf(stderr, "%s: rima_post_append: %s\n", f->prog, strerror(err));
        return err ? 1 : 0;
    }
    if (large && t == FK_SPLIT_FAA)
        return fk_faa(f, j, s);
    if (large && t == FK_SPLIT_PRESEND) {
        c->presend_busy[s] = true;
        return fk_write_imm(f, j, s, f->peer[s].big_addr + o->id * o->max_msg, f->peer[s].big_rkey,
                            (uint32_t)FK_IMM_PRESEND << FK_IMM_KIND_SHIFT | (uint32_t)o->id);
    }
    if (rts)
        sl->phase = FK_WAIT_GRANT;
    struct ibv_sge sge = {
        .addr = (uintptr_t)p, .length = rts ? FK_REQ_BYTES : msg, .lkey = c->sbuf_mr->lkey};
    struct ibv_send_wr wr = {.wr_id = FK_WR(FK_WR_SEND, j),
                             .sg_list = &sge,
                             .num_sge = 1,
                             .opcode = IBV_WR_SEND,
                             .send_flags = IBV_SEND_SIGNALED};
    return fk_post(f, c->qps[s], &wr);
}

static int fk_fail(struct fk *f)
{
    f->status = 2;
    f->c.res.failed = 1;
    return 0;
}

/* A response in receive buffer r. */
static int fk_client_resp(struct fk *f, const struct ibv_wc *wc)
{
    struct fk_client *c = &f->c;
    const struct fk_opts *o = &f->o;
    uint64_t r = wc->wr_id;
    const uint8_t *p = c->rbuf + r * fk_rslot_bytes(f);
    struct fk_resp rs;
    memcpy(&rs, p, sizeof(rs));
    if (wc->byte_len < FK_RESP_BYTES || rs.slot >= o->window ||
        c->slots[rs.slot].phase == FK_FREE) {
        fprintf(stderr, "%s: VERIFY FAILED: bad response (%u bytes, slot %u)\n", f->prog,
                wc->byte_len, rs.slot);
        return 2;
    }
    uint32_t j = rs.slot;
    struct fk_slot *sl = &c->slots[j];
    struct fk_key *k = &c->keys[sl->key_idx];
    uint64_t key = fk_client_key(o->id, sl->key_idx);
    int rc = fk_post_recv(f, c->srq, c->rbuf, fk_rslot_bytes(f), c->rbuf_mr->lkey, r);
    if (rc)
        return rc;
    if (rs.status == FK_ST_GRANT) {
        if (sl->phase != FK_WAIT_GRANT) {
            fprintf(stderr, "%s: VERIFY FAILED: unexpected GRANT for slot %u\n", f->prog, j);
            return 2;
        }
        struct fk_req q;
        uint8_t *sp = c->sbuf + j * fk_slot_bytes(f);
        memcpy(&q, sp, sizeof(q));
        q.op = FK_OP_SET;
        memcpy(sp, &q, sizeof(q));
        return fk_write_imm(f, j, sl->server, rs.addr, rs.rkey,
                            (uint32_t)FK_IMM_ALLOC << FK_IMM_KIND_SHIFT | rs.grant);
    }
    if (rs.key != key) {
        fprintf(stderr, "%s: VERIFY FAILED: response for key %#" PRIx64 ", asked %#" PRIx64 "\n",
                f->prog, rs.key, key);
        fk_fail(f); /* the slot is retired all the same, below */
    }
    switch (rs.key != key ? 0u : rs.status) {
    case FK_ST_HIT: {
        int64_t bad = -1;
        if (sl->op != FK_OP_GET || k->version == 0 || rs.value_len != k->len ||
            wc->byte_len != FK_RESP_BYTES + k->len ||
            (bad = fk_check(p + FK_RESP_BYTES, k->len, key, k->version)) >= 0 ||
            fk_fnv(p + FK_RESP_BYTES, k->len) != rs.checksum) {
            fprintf(stderr,
                    "%s: VERIFY FAILED: GET key %#" PRIx64 " returned %u bytes (stored %u, "
                    "version %u), first bad byte %" PRId64 "\n",
                    f->prog, key, rs.value_len, k->len, k->version, bad);
            fk_fail(f); /* retire the slot all the same */
            break;
        }
        c->res.hits++;
        c->res.bytes += k->len;
        break;
    }
    case FK_ST_MISS:
        if (sl->op != FK_OP_GET || k->version != 0) {
            fprintf(stderr, "%s: VERIFY FAILED: GET key %#" PRIx64 " missed, version %u stored\n",
                    f->prog, key, k->version);
            fk_fail(f); /* retire the slot all the same */
            break;
        }
        break;
    case FK_ST_STORED:
    case FK_ST_NOT_STORED:
        if (sl->op != FK_OP_SET) {
            fk_fail(f);
            break;
        }
        k->version = rs.status == FK_ST_STORED ? sl->version : 0;
        k->len = sl->len;
        c->res.bytes += sl->len;
        break;
    case 0: /* wrong key, reported above */
        break;
    default:
        fprintf(stderr, "%s: VERIFY FAILED: the server reports status %u for key %#" PRIx64 "\n",
                f->prog, rs.status, key);
        fk_fail(f); /* retire the slot all the same */
        break;
    }
    uint64_t now = host_now_ns();
    if (sl->timed) {
        uint64_t lat = now - sl->t0_ns;
        if (c->res.requests == 0 || sl->t0_ns < c->res.start_ns)
            c->res.start_ns = sl->t0_ns;
        c->res.end_ns = now;
        c->res.requests++;
        c->lat_all[c->n_all++] = lat;
        if (sl->large)
            c->lat_large[c->n_large++] = lat;
        c->res.large += sl->large;
        c->res.sets += sl->op == FK_OP_SET;
        c->res.gets += sl->op == FK_OP_GET;
    }
    if (sl->large && o->transport == FK_SPLIT_PRESEND)
        c->presend_busy[sl->server] = false;
    k->inflight = false;
    sl->phase = FK_FREE;
    c->inflight--;
    c->completed++;
    return 0;
}

/* Send completions (srq / split): FAA results start the WRITE. */
static int fk_client_scq(struct fk *f, bool *progressed)
{
    struct fk_client *c = &f->c;
    struct ibv_wc wc[FK_POLL_BATCH];
    int n = fk_poll(f->scq, FK_POLL_BATCH, wc);
    for (int i = 0; i < n; i++) {
        if (!fk_wc_ok(f, &wc[i]))
            return 1;
        *progressed = true;
        if (wc[i].wr_id >> 32 != FK_WR_FAA)
            continue;
        uint32_t j = (uint32_t)wc[i].wr_id;
        struct fk_slot *sl = &c->slots[j];
        uint64_t old = 0;
        memcpy(&old, c->sbuf + f->o.window * fk_slot_bytes(f) + j * 8, 8);
        uint64_t ring = f->peer[sl->server].big_bytes, off = old % ring;
        if (off + FK_REQ_BYTES + sl->len > ring) { /* would straddle the end: skip it */
            c->res.faa_retries++;
            if (fk_faa(f, j, sl->server))
                return 1;
            continue;
        }
        if (fk_write_imm(f, j, sl->server, f->peer[sl->server].big_addr + off,
                         f->peer[sl->server].big_rkey,
                         (uint32_t)FK_IMM_FAA << FK_IMM_KIND_SHIFT | (uint32_t)(off / FK_ALIGN)))
            return 1;
    }
    return n < 0 ? 1 : 0;
}

static int fk_client_loop(struct fk *f)
{
    struct fk_client *c = &f->c;
    const struct fk_opts *o = &f->o;
    struct ibv_wc wc[FK_POLL_BATCH];
    struct rima_send_wc swc[FK_POLL_BATCH];
    bool rima = fk_transports[o->transport].rima;
    while (c->completed < c->total || c->inflight) {
        bool progressed = false;
        while (f->status == 0 && c->issued < c->total) {
            if (!c->have_next)
                fk_draw(f);
            if (o->rate > 0 && c->next_arrival_ns > host_now_ns())
                break;
            bool issued = false;
            if (fk_issue(f, &issued))
                return 1;
            if (!issued)
                break;
            progressed = true;
        }
        if (f->status && c->inflight == 0)
            break;
        int n = fk_poll(f->cq, FK_POLL_BATCH, wc);
        if (n < 0)
            return 1;
        for (int i = 0; i < n; i++) {
            if (!fk_wc_ok(f, &wc[i]))
                return 1;
            int rc = fk_client_resp(f, &wc[i]);
            if (rc)
                return rc;
        }
        progressed |= n > 0;
        if (rima) {
            for (uint64_t s = 0; s < o->servers; s++) {
                (void)host_now_ns(); /* no park inside (fk_idle) */
                int m = rima_poll_sender(c->snd[s], FK_POLL_BATCH, swc);
                if (m < 0) {
                    fprintf(stderr, "%s: rima_poll_sender: %s\n", f->prog, strerror(errno));
                    return 1;
                }
                for (int i = 0; i < m; i++)
                    if (swc[i].status != IBV_WC_SUCCESS) {
                        fprintf(stderr, "%s: append failed: %s\n", f->prog,
                                ibv_wc_status_str(swc[i].status));
                        return 1;
                    }
                progressed |= m > 0;
            }
        } else if (fk_client_scq(f, &progressed)) {
            return 1;
        }
        if (!progressed && o->rate > 0 && c->inflight == 0 && c->have_next &&
            c->issued < c->total) {
            uint64_t now = host_now_ns(); /* nothing to wait for but the next arrival */
            if (c->next_arrival_ns > now)
                host_compute(c->next_arrival_ns - now);
            continue;
        }
        if (!progressed && o->rate > 0 && c->have_next && c->issued < c->total) {
            uint64_t now = host_now_ns(); /* do not sleep past the next arrival */
            if (c->next_arrival_ns > now && c->next_arrival_ns - now < f->idle_ns)
                f->idle_ns = c->next_arrival_ns - now;
        }
        fk_idle(f, progressed);
    }
    return 0;
}

/* Tell every server this client is done (status + 1 in its done word). */
static int fk_client_done(struct fk *f)
{
    struct fk_client *c = &f->c;
    uint64_t word = (uint64_t)f->status + 1;
    uint8_t *src = c->sbuf + f->o.window * fk_slot_bytes(f); /* FAA results area, now idle */
    memcpy(src, &word, 8);
    for (uint64_t s = 0; s < f->o.servers; s++) {
        struct ibv_sge sge = {.addr = (uintptr_t)src, .length = 8, .lkey = c->sbuf_mr->lkey};
        struct ibv_send_wr wr = {.wr_id = FK_WR(FK_WR_DONE, 0),
                                 .sg_list = &sge,
                                 .num_sge = 1,
                                 .opcode = IBV_WR_RDMA_WRITE,
                                 .send_flags = IBV_SEND_SIGNALED};
        wr.wr.rdma.remote_addr = f->peer[s].ctrl_addr + f->o.id * FK_WORDS_PER_CLIENT * 8;
        wr.wr.rdma.rkey = f->peer[s].ctrl_rkey;
        struct ibv_cq *cq = c->scqs[s] ? c->scqs[s] : f->scq;
        if (fk_post(f, c->qps[s], &wr))
            return 1;
        for (;;) { /* wait for this WRITE (earlier completions were consumed) */
            struct ibv_wc wc;
            int n = ibv_poll_cq(cq, 1, &wc); /* the only CQ watched here: may park */
            if (n < 0 || (n == 1 && !fk_wc_ok(f, &wc)))
                return 1;
            if (n == 1 && wc.wr_id == FK_WR(FK_WR_DONE, 0))
                break;
        }
    }
    return 0;
}

/* Wait until the RIMA layer has no append of ours in flight. */
static int fk_client_drain(struct fk *f)
{
    struct rima_send_wc swc[FK_POLL_BATCH];
    for (uint64_t s = 0; s < f->o.servers; s++)
        while (f->c.snd[s] && rima_sender_outstanding(f->c.snd[s]) > 0) {
            (void)host_now_ns();
            int m = rima_poll_sender(f->c.snd[s], FK_POLL_BATCH, swc);
            if (m < 0)
                return 1;
            fk_idle(f, m > 0);
        }
    return 0;
}

/* ------------------------------------------------------------ results */

static void fk_report_row(struct fk *f, const struct fk_client_result *cr, uint64_t nclients,
                          uint64_t *lat, uint64_t nlat, uint64_t *latl, uint64_t nlatl,
                          const struct fk_server_result *sr, uint64_t nservers, bool feasible)
{
    const struct fk_opts *o = &f->o;
    uint64_t start = UINT64_MAX, end = 0, req = 0, bytes = 0, large = 0, sets = 0, gets = 0,
             hits = 0, peak_inflight = 0, window = 0, retries = 0;
    for (uint64_t i = 0; i < nclients; i++) {
        if (cr[i].requests && cr[i].start_ns < start)
            start = cr[i].start_ns;
        end = cr[i].end_ns > end ? cr[i].end_ns : end;
        req += cr[i].requests;
        bytes += cr[i].bytes;
        large += cr[i].large;
        sets += cr[i].sets;
        gets += cr[i].gets;
        hits += cr[i].hits;
        peak_inflight += cr[i].peak_inflight;
        window += cr[i].window;
        retries += cr[i].faa_retries;
    }
    /* Footprints per server (the paper's unit: one receiving process), the
     * largest over the servers; and the sum. */
    uint64_t fp = 0, fpl = 0, fps = 0, fpt = 0, peak_out = 0, allocs = 0;
    for (uint64_t i = 0; i < nservers; i++) {
        fp = sr[i].footprint_bytes > fp ? sr[i].footprint_bytes : fp;
        fpl = sr[i].large_bytes_peak > fpl ? sr[i].large_bytes_peak : fpl;
        fps = sr[i].small_bytes > fps ? sr[i].small_bytes : fps;
        fpt += sr[i].footprint_bytes;
        peak_out += sr[i].peak_outstanding;
        allocs += sr[i].allocs;
    }
    qsort(lat, nlat, sizeof(*lat), fk_cmp_u64);
    uint64_t lat_sum = 0;
    for (uint64_t i = 0; i < nlat; i++)
        lat_sum += lat[i];
    qsort(latl, nlatl, sizeof(*latl), fk_cmp_u64);
    double span_us = req && end > start ? (double)(end - start) / 1e3 : 0;
    uint64_t cap = o->transport == FK_SRQ && o->footprint ? o->footprint / o->max_msg : 0;
    struct host_kv kv[] = {
        {"servers", (double)o->servers},
        {"clients", (double)o->clients},
        {"window", (double)o->window},
        {"rate_per_client", o->rate},
        {"transport", (double)o->transport},
        {"table6_row", (double)fk_transports[o->transport].table6_row},
        {"feasible", feasible},
        {"requests", (double)req},
        {"sets", (double)sets},
        {"gets", (double)gets},
        {"hits", (double)hits},
        {"large", (double)large},
        {"span_us", span_us},
        {"mrps", span_us > 0 ? (double)req / span_us : 0},
        {"gbps", span_us > 0 ? (double)bytes * 8 / span_us / 1e3 : 0},
        {"lat_avg_us", nlat ? (double)lat_sum / (double)nlat / 1e3 : 0},
        {"lat_p50_us", fk_pct(lat, nlat, 50) / 1e3},
        {"lat_p96_us", fk_pct(lat, nlat, 96) / 1e3},
        {"lat_p99_us", fk_pct(lat, nlat, 99) / 1e3},
        {"lat_p999_us", fk_pct(lat, nlat, 99.9) / 1e3},
        {"lat_max_us", nlat ? (double)lat[nlat - 1] / 1e3 : 0},
        {"large_p50_us", fk_pct(latl, nlatl, 50) / 1e3},
        {"large_p96_us", fk_pct(latl, nlatl, 96) / 1e3},
        {"large_p99_us", fk_pct(latl, nlatl, 99) / 1e3},
        {"large_p999_us", fk_pct(latl, nlatl, 99.9) / 1e3},
        {"footprint_bytes", (double)fp},
        {"footprint_small_bytes", (double)fps},
        {"footprint_large_bytes", (double)fpl},
        {"footprint_total_bytes", (double)fpt},
        {"footprint_cap_bytes", (double)o->footprint},
        {"max_msg_bytes", (double)o->max_msg},
        {"cap_outstanding", (double)cap},
        {"window_sum", (double)window},
        {"peak_inflight_sum", (double)peak_inflight},
        {"server_peak_outstanding_sum", (double)peak_out},
        {"allocs", (double)allocs},
        {"faa_retries", (double)retries},
    };
    host_report("fastkv", kv, sizeof(kv) / sizeof(kv[0]));
    if (feasible && f->status == 0)
        printf("%s: %s, %" PRIu64 " servers, %" PRIu64 " clients: %" PRIu64
               " requests verified, %.3f Mreq/s, p50 %.2f us, p96 %.2f us, p99 %.2f us, "
               "footprint %.1f MiB per server\n",
               f->prog, fk_transports[o->transport].name, o->servers, o->clients, req,
               span_us > 0 ? (double)req / span_us : 0, fk_pct(lat, nlat, 50) / 1e3,
               fk_pct(lat, nlat, 96) / 1e3, fk_pct(lat, nlat, 99) / 1e3, (double)fp / (1 << 20));
}

/* Server 0 collects every client's and server's numbers and reports the
 * run's row; everyone then waits for "<name>/end" before tearing down. */
static int fk_results(struct fk *f)
{
    char key[FK_KEY_MAX];
    const struct fk_opts *o = &f->o;
    bool server = o->role == RC_CONN_ROLE_SERVER;
    if (server) {
        fk_server_footprint(f);
        f->s.res.failed = (uint64_t)f->status;
        struct fk_server_result *r = &f->s.res;
        struct host_kv kv[] = {
            {"id", (double)o->id},
            {"requests", (double)r->requests},
            {"footprint_bytes", (double)r->footprint_bytes},
            {"small_bytes", (double)r->small_bytes},
            {"large_bytes_peak", (double)r->large_bytes_peak},
            {"peak_outstanding", (double)r->peak_outstanding},
            {"allocs", (double)r->allocs},
            {"items", (double)f->s.items},
        };
        host_report("fastkv_server", kv, sizeof(kv) / sizeof(kv[0]));
        snprintf(key, sizeof(key), "%s/srv/s%" PRIu64, o->name, o->id);
        if (fk_put(f, key, r, sizeof(*r)))
            return 1;
    } else {
        struct fk_client_result *r = &f->c.res;
        snprintf(key, sizeof(key), "%s/res/c%" PRIu64, o->name, o->id);
        if (fk_put(f, key, r, sizeof(*r)))
            return 1;
        snprintf(key, sizeof(key), "%s/lat/c%" PRIu64, o->name, o->id);
        if (f->c.n_all && fk_put(f, key, f->c.lat_all, f->c.n_all * 8))
            return 1;
        snprintf(key, sizeof(key), "%s/latl/c%" PRIu64, o->name, o->id);
        if (f->c.n_large && fk_put(f, key, f->c.lat_large, f->c.n_large * 8))
            return 1;
        double span = r->requests ? (double)(r->end_ns - r->start_ns) / 1e3 : 0;
        struct host_kv kv[] = {
            {"id", (double)o->id},
            {"requests", (double)r->requests},
            {"mrps", span > 0 ? (double)r->requests / span : 0},
            {"window", (double)r->window},
            {"peak_inflight", (double)r->peak_inflight},
            {"large", (double)r->large},
            {"failed", (double)r->failed},
        };
        host_report("fastkv_client", kv, sizeof(kv) / sizeof(kv[0]));
    }
    int rc = 0;
    if (server && o->id == 0) {
        struct fk_client_result *cr = calloc(o->clients, sizeof(*cr));
        struct fk_server_result *sr = calloc(o->servers, sizeof(*sr));
        uint64_t nlat = 0, nlatl = 0;
        for (uint64_t i = 0; cr && sr && i < o->clients && rc == 0; i++) {
            snprintf(key, sizeof(key), "%s/res/c%" PRIu64, o->name, i);
            rc = fk_get(f, key, &cr[i], sizeof(cr[i]));
            nlat += cr[i].requests;
            nlatl += cr[i].large;
        }
        for (uint64_t i = 0; cr && sr && i < o->servers && rc == 0; i++) {
            snprintf(key, sizeof(key), "%s/srv/s%" PRIu64, o->name, i);
            rc = fk_get(f, key, &sr[i], sizeof(sr[i]));
            if (sr[i].failed > (uint64_t)f->status)
                f->status = (int)sr[i].failed;
        }
        uint64_t *lat = calloc(nlat + 1, 8), *latl = calloc(nlatl + 1, 8);
        uint64_t a = 0, b = 0;
        for (uint64_t i = 0; lat && latl && i < o->clients && rc == 0; i++) {
            if (cr[i].failed)
                f->status = 2;
            snprintf(key, sizeof(key), "%s/lat/c%" PRIu64, o->name, i);
            if (cr[i].requests)
                rc = fk_get(f, key, lat + a, cr[i].requests * 8);
            snprintf(key, sizeof(key), "%s/latl/c%" PRIu64, o->name, i);
            if (rc == 0 && cr[i].large)
                rc = fk_get(f, key, latl + b, cr[i].large * 8);
            a += cr[i].requests;
            b += cr[i].large;
        }
        if (!cr || !sr || !lat || !latl)
            rc = 1;
        if (rc == 0)
            fk_report_row(f, cr, o->clients, lat, nlat, latl, nlatl, sr, o->servers, true);
        free(cr);
        free(sr);
        free(lat);
        free(latl);
        uint8_t st = (uint8_t)(rc ? 1 : f->status);
        snprintf(key, sizeof(key), "%s/end", o->name);
        if (fk_put(f, key, &st, 1))
            rc = 1;
        return rc;
    }
    uint8_t st = 0;
    snprintf(key, sizeof(key), "%s/end", o->name);
    if (fk_get(f, key, &st, 1))
        return 1;
    if (server && st > f->status)
        f->status = st;
    return 0;
}

static void fk_close(struct fk *f)
{
    struct fk_server *s = &f->s;
    struct fk_client *c = &f->c;
    if (s->alloc) {
        for (uint64_t i = 0; i < f->o.alloc_threads; i++)
            if (s->alloc[i].handle >= 0 && s->alloc[i].srv) {
                atomic_store(&s->alloc[i].state, FK_ALLOC_EXIT);
                host_compute(1); /* lets the parked allocator see it (wakes host_relax) */
                host_thread_join(s->alloc[i].handle);
            }
        free(s->alloc);
    }
    for (uint64_t i = 0; s->grants && i < s->ngrants; i++)
        if (s->grants[i].mr) {
            ibv_dereg_mr(s->grants[i].mr);
            free(s->grants[i].buf);
        }
    for (uint32_t i = 0; s->qps && i < f->npeers; i++)
        if (s->qps[i])
            ibv_destroy_qp(s->qps[i]);
    for (uint32_t i = 0; c->snd && i < f->npeers; i++)
        if (c->snd[i])
            rima_sender_destroy(c->snd[i]);
    for (uint32_t i = 0; c->qps && i < f->npeers; i++)
        if (c->qps[i])
            ibv_destroy_qp(c->qps[i]);
    for (uint32_t i = 0; c->scqs && i < f->npeers; i++)
        if (c->scqs[i])
            ibv_destroy_cq(c->scqs[i]);
    if (s->aq)
        rima_aq_destroy(s->aq);
    if (s->srq)
        ibv_destroy_srq(s->srq);
    if (c->srq)
        ibv_destroy_srq(c->srq);
    fk_free_mr(s->rbuf, s->rbuf_mr);
    fk_free_mr((uint8_t *)s->ctrl, s->ctrl_mr);
    fk_free_mr(s->big, s->big_mr);
    fk_free_mr(s->arena, s->arena_mr);
    fk_free_mr(s->hdrs, s->hdrs_mr);
    fk_free_mr(c->sbuf, c->sbuf_mr);
    fk_free_mr(c->rbuf, c->rbuf_mr);
    if (f->cq)
        ibv_destroy_cq(f->cq);
    if (f->scq)
        ibv_destroy_cq(f->scq);
    free(s->qps);
    free(s->table);
    free(s->hdr_free);
    free(s->grants);
    free(s->alloc_queue);
    free(c->qps);
    free(c->scqs);
    free(c->snd);
    free(c->presend_busy);
    free(c->slots);
    free(c->keys);
    free(c->lat_all);
    free(c->lat_large);
    free(f->peer);
    f->conn.qp = NULL;
    rc_conn_close(&f->conn);
}

/* ------------------------------------------------------------ main */

int fastkv_run(int argc, char **argv, bool largemsg)
{
    struct fk *f = calloc(1, sizeof(*f));
    if (!f)
        return 1;
    f->prog = argc > 0 && argv[0] ? argv[0] : (largemsg ? "largemsg" : "fastkv");
    int rc = fk_parse_args(argc, argv, &f->o, largemsg);
    if (rc) {
        free(f);
        return rc < 0 ? 0 : rc;
    }
    const struct fk_opts *o = &f->o;
    bool server = o->role == RC_CONN_ROLE_SERVER;
    if (o->id >= (server ? o->servers : o->clients)) { /* idle beyond the active count */
        free(f);
        return 0;
    }
    if (fk_infeasible(o)) {
        /* Table 5: "infeasible" - report it, nothing to run. */
        if (server && o->id == 0) {
            uint64_t z = 0;
            fk_report_row(f, NULL, 0, &z, 0, &z, 0, NULL, 0, false);
            printf("%s: srq footprint-priority: %" PRIu64 " buffers of %" PRIu64
                   " bytes cannot serve %" PRIu64 " servers and %" PRIu64 " clients: infeasible\n",
                   f->prog, o->footprint / o->max_msg, o->max_msg, o->servers, o->clients);
        }
        free(f);
        return 0;
    }
    f->idle_ns = FK_IDLE_MIN_NS;
    rc_conn_init(&f->conn, f->prog, o->role, o->name);
    rc = fk_open(f);
    if (rc == 0)
        rc = server ? fk_server_setup(f) : fk_client_setup(f);
    if (rc == 0)
        rc = server ? fk_server_loop(f) : fk_client_loop(f);
    if (rc == 0 && !server && fk_transports[o->transport].rima)
        rc = fk_client_drain(f);
    if (rc == 0 && !server)
        rc = fk_client_done(f);
    if (rc == 0)
        rc = fk_results(f);
    if (rc == 0)
        rc = f->status;
    else if (rc == 2 && !server && f->c.qps) /* tell the servers, do not leave them waiting */
        fk_client_done(f);
    fk_close(f);
    free(f);
    return rc;
}

int fastkv_main(int argc, char **argv)
{
    return fastkv_run(argc, argv, false);
}
