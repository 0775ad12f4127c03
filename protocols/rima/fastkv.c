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
#include "protocols/rima/fastkv_priv.h"

#include "protocols/common/pages.h"

/* read-only facts of each transport (fastkv_priv.h), shared by all three files */
const struct fk_transport_info fk_transports[FK_TRANSPORT_COUNT] = {
    [FK_SRQ] = {"srq", false, false, 1},
    [FK_RIMA] = {"rima", true, false, 6},
    [FK_RIMA_SW] = {"rima-sw", true, false, 6},
    [FK_SPLIT_ALLOC] = {"split-alloc", false, true, 3},
    [FK_SPLIT_FAA] = {"split-faa", false, true, 4},
    [FK_SPLIT_PRESEND] = {"split-presend", false, true, 5},
};

/* ------------------------------------------------------------ helpers */

uint64_t fk_mix(uint64_t x)
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
void fk_fill(uint8_t *p, uint32_t len, uint64_t key, uint32_t version)
{
    uint64_t s = fk_mix(key * 0x9e3779b97f4a7c15ull + version);
    for (uint32_t i = 0; i < len; i += 8) {
        s = fk_mix(s + i);
        uint32_t n = len - i < 8 ? len - i : 8;
        memcpy(p + i, &s, n);
    }
}

/* First differing byte, or -1. */
int64_t fk_check(const uint8_t *p, uint32_t len, uint64_t key, uint32_t version)
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

uint32_t fk_fnv(const uint8_t *p, uint32_t len)
{
    uint32_t h = 2166136261u;
    for (uint32_t i = 0; i < len; i++)
        h = (h ^ p[i]) * 16777619u;
    return h;
}

uint32_t fk_key_server(uint64_t key, uint64_t servers)
{
    return (uint32_t)(fk_mix(key) % servers);
}

uint64_t fk_client_key(uint64_t client, uint64_t idx)
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

int fk_put(struct fk *f, const char *key, const void *buf, size_t len)
{
    return rc_conn_oob_put(f->prog, key, buf, len);
}

int fk_get(struct fk *f, const char *key, void *buf, size_t len)
{
    return rc_conn_oob_get(f->prog, key, buf, len);
}

bool fk_wc_ok(struct fk *f, const struct ibv_wc *wc)
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
void fk_idle(struct fk *f, bool progressed)
{
    if (progressed) {
        f->idle_ns = FK_IDLE_MIN_NS;
        return;
    }
    host_compute(f->idle_ns);
    f->idle_ns = f->idle_ns * 2 > f->o.idle_max_ns ? f->o.idle_max_ns : f->idle_ns * 2;
}

int fk_poll(struct ibv_cq *cq, int n, struct ibv_wc *wc)
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
uint64_t fk_srq_buffers(const struct fk_opts *o)
{
    if (o->footprint == 0)
        return o->clients * o->window;
    return o->footprint / o->max_msg;
}

/* Outstanding requests client c may have: its share of the system-wide cap
 * (= one server's buffers), at most --window. */
uint64_t fk_client_window(const struct fk_opts *o, uint64_t c)
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

struct ibv_cq *fk_cq(struct fk *f, uint64_t cqe)
{
    if (f->dev.max_cqe > 0 && cqe > (uint64_t)f->dev.max_cqe)
        cqe = (uint64_t)f->dev.max_cqe;
    struct ibv_cq *cq = ibv_create_cq(f->conn.ctx, (int)cqe, NULL, NULL, 0);
    if (!cq)
        fprintf(stderr, "%s: ibv_create_cq(%" PRIu64 "): %s\n", f->prog, cqe, strerror(errno));
    return cq;
}

/* A zeroed page-aligned buffer registered with `access`. */
int fk_alloc_mr(struct fk *f, uint64_t bytes, int access, uint8_t **buf, struct ibv_mr **mr)
{
    bytes = (bytes + PAGES_BYTES - 1) & ~(uint64_t)(PAGES_BYTES - 1);
    void *mem = pages_alloc((size_t)bytes);
    if (!mem) {
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

struct ibv_srq *fk_srq(struct fk *f, uint64_t wr)
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

int fk_post_recv(struct fk *f, struct ibv_srq *srq, uint8_t *base, uint64_t bytes, uint32_t lkey,
                 uint64_t i)
{
    struct ibv_sge sge = {
        .addr = (uintptr_t)(base + i * bytes), .length = (uint32_t)bytes, .lkey = lkey};
    struct ibv_recv_wr wr = {.wr_id = i, .sg_list = &sge, .num_sge = 1}, *bad = NULL;
    int err = ibv_post_srq_recv(srq, &wr, &bad);
    if (err)
        fprintf(stderr, "%s: ibv_post_srq_recv: %s\n", f->prog, strerror(err));
    return err ? 1 : 0;
}

struct ibv_qp *fk_qp(struct fk *f, struct ibv_cq *scq, struct ibv_cq *rcq, struct ibv_srq *srq,
                     uint32_t send_wr)
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
int fk_exchange_connect(struct fk *f, struct ibv_qp **qps, struct fk_conn_hdr *mine)
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
            host_free(s->grants[i].buf, fk_grant_map_bytes(s->grants[i].len));
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
