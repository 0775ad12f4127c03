/* perftest-style latency and bandwidth driver over one queue pair (RC by
 * default; --conn=UC or UD as perftest's -c).
 *
 * What it measures, and how (the method of linux-rdma/perftest, rewritten):
 *   write lat   ping-pong of RDMA WRITEs; each side spins on the last byte of
 *               its receive region for the iteration's sequence byte, then
 *               writes back.  Sample = round trip / 2.
 *   read lat    the client issues one READ at a time and polls the send CQ.
 *               Sample = full round trip.
 *   send lat    ping-pong of SEND/RECV with pre-posted receives; both sides
 *               poll the receive CQ.  Sample = round trip / 2.
 *   atomic lat  one FETCH_AND_ADD at a time.  Sample = full round trip.
 *   *_bw        the client keeps up to tx-depth WRs outstanding (the NIC
 *               holds READs and atomics to max_rd_atomic on the wire), signals every cq-mod-th WR
 *               and times from the first post to the last completion.  For
 *               SEND the server pre-posts rx-depth receives, reposts them as
 *               they complete and finishes when it has received everything.
 *
 * Every message carries a known pattern and the receiving side checks it at
 * the end of each size (write/send: receiver's buffer; read: the client's
 * copy; atomic: the returned values and the final counter), so a model that
 * drops, reorders or corrupts data fails the run (exit code 2) instead of
 * just producing numbers.
 *
 * Both programs of a pair run the same option list; the client sends a hash
 * of the options that shape the run and the server refuses a mismatch.  They
 * exchange QP number, PSN, LID, GID, rkey, address and buffer size through
 * host_oob_put/get ("<name>/server", "<name>/client") and move in lockstep
 * through out-of-band barriers ("<name>/sync/<k>/<role>") that also carry
 * each side's status, so a failure on one side stops both.  Only the client
 * reports results (host_report tables "<test>_lat" and "<test>_bw").
 *
 * No globals: several instances run as coroutines in one simulator process.
 * getopt's globals are used only while parsing, before any blocking call. */
#include "protocols/perftest/perftest.h"

#include <errno.h>
#include <getopt.h>
#include <infiniband/verbs.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "protocols/common/rc_conn.h"
#include "rnicsim/host.h"

#define PT_MAX_SIZES 64
/* The largest message size: 1 GiB, the port's max_msg_sz on mlx5 (and on
 * rnicsim's device); also keeps the buffer arithmetic (2 x size + 64)
 * far from overflowing. */
#define PT_MAX_MSG_BYTES ((uint64_t)1 << 30)
#define PT_POLL_BATCH 16

enum pt_test { PT_WRITE, PT_READ, PT_SEND, PT_ATOMIC, PT_TEST_COUNT };
enum pt_mode { PT_LAT, PT_BW, PT_MODE_COUNT };
static const char *const pt_mode_names[] = {[PT_LAT] = "lat", [PT_BW] = "bw"};

/* Per-test facts.  Inline defaults are perftest's (DEF_INLINE_WRITE 220,
 * DEF_INLINE_SEND_RC_UC 236); READ and atomics cannot be inlined.  Atomics
 * always move 8 bytes.  lat_scale turns a round trip into the reported
 * latency: ping-pong tests report half of it, READ/atomic the whole. */
struct pt_test_info {
    const char *name;  /* as in --tests and the table names */
    const char *title; /* human header */
    enum ibv_wr_opcode opcode;
    uint32_t default_inline_bytes;
    uint32_t fixed_size_bytes; /* 0 = use --sizes */
    double lat_scale;
};
static const struct pt_test_info pt_tests[PT_TEST_COUNT] = {
    [PT_WRITE] = {.name = "write",
                  .title = "RDMA_Write",
                  .opcode = IBV_WR_RDMA_WRITE,
                  .default_inline_bytes = 220,
                  .lat_scale = 0.5},
    [PT_READ] = {.name = "read",
                 .title = "RDMA_Read",
                 .opcode = IBV_WR_RDMA_READ,
                 .lat_scale = 1.0},
    [PT_SEND] = {.name = "send",
                 .title = "Send",
                 .opcode = IBV_WR_SEND,
                 .default_inline_bytes = 236,
                 .lat_scale = 0.5},
    [PT_ATOMIC] = {.name = "atomic",
                   .title = "Atomic FETCH_AND_ADD",
                   .opcode = IBV_WR_ATOMIC_FETCH_AND_ADD,
                   .fixed_size_bytes = 8,
                   .lat_scale = 1.0},
};

struct pt_opts {
    enum rc_conn_role role;
    char name[RC_CONN_NAME_MAX];
    bool tests[PT_TEST_COUNT];
    bool modes[PT_MODE_COUNT];
    uint64_t sizes[PT_MAX_SIZES];
    unsigned nsizes;
    uint64_t iters;    /* latency iterations */
    uint64_t bw_bytes; /* bandwidth: iters = clamp(bw_bytes/size, 32, 5000) */
    uint64_t bw_iters; /* 0 = derive from bw_bytes */
    uint32_t tx_depth, rx_depth, cq_mod;
    uint32_t mtu_bytes; /* 0 = port's active MTU */
    long inline_bytes;  /* -1 = per-test default */
    uint64_t warmup;
    enum ibv_qp_type qp_type; /* --conn: RC (default), UC or UD */
};

/* Flow control of one run's send queue: WR k (1-based) is signaled when k is
 * a multiple of cq_mod or the last of the run; its wr_id is k, so a
 * completion says "everything up to k is done". */
struct pt_sender {
    uint64_t posted, completed, total;
    uint64_t limit, cq_mod;
};

struct pt {
    struct pt_opts o;
    const char *prog;
    struct rc_conn conn; /* device, PD, MR, CQs, QP, buffer, peer info */
    struct ibv_device_attr dev;
    size_t max_size, rx_off, atom_off;
    size_t grh_bytes; /* UD: the 40-byte GRH a receive gets before the payload */
    uint32_t max_inline_bytes, max_rd_atomic, rx_depth, rq_posted;
    bool atomic_ok;
};

/* ------------------------------------------------------------ option parsing */

static void pt_usage(const char *prog)
{
    printf("usage: %s --server | --client [options] [server-host]\n"
           "  --name=PAIR        out-of-band key prefix (default perftest)\n"
           "  --tests=LIST       write,read,send,atomic (default all; run in that order)\n"
           "  --modes=LIST       lat,bw (default both)\n"
           "  --sizes=A:B|LIST   powers of two A..B, or a list like 64,4KiB,1MiB (at most 1GiB)\n"
           "                     (default 2:65536; atomics always use 8 bytes)\n"
           "  --iters=N          latency iterations per size (default 1000)\n"
           "  --bw-bytes=B       bandwidth iters = clamp(B/size, 32, 5000) (default 64MiB)\n"
           "  --bw-iters=N       fixed bandwidth iterations instead\n"
           "  --tx-depth=N       send queue depth / outstanding WRs (default 128)\n"
           "  --rx-depth=N       receive queue depth (default 512)\n"
           "  --cq-mod=N         signal every N-th send (default 64)\n"
           "  --mtu=BYTES        256..4096 (default: the port's active MTU)\n"
           "  --inline=N         inline sends up to N bytes (default 220 write, 236 send)\n"
           "  --warmup=N         untimed iterations before each size (default 16)\n"
           "  --conn=RC|UC|UD    transport (default RC); UC: write and send; UD: send only,\n"
           "                     at most one MTU a message (larger sizes are skipped)\n"
           "exit status: 0 ok, 1 error, 2 data verification failed\n",
           prog);
}

/* "A:B" = A, 2A, 4A ... <= B; otherwise a comma list of sizes. */
static bool pt_parse_sizes(const char *s, struct pt_opts *o)
{
    char tmp[256];
    if (strlen(s) >= sizeof(tmp))
        return false;
    strcpy(tmp, s);
    o->nsizes = 0;
    char *colon = strchr(tmp, ':');
    if (colon) {
        uint64_t from, to;
        *colon = '\0';
        if (!rc_conn_parse_size(tmp, &from) || !rc_conn_parse_size(colon + 1, &to) || from == 0 ||
            to < from || to > PT_MAX_MSG_BYTES)
            return false;
        for (uint64_t v = from; v <= to; v *= 2) {
            if (o->nsizes == PT_MAX_SIZES)
                return false;
            o->sizes[o->nsizes++] = v;
            if (v > UINT64_MAX / 2)
                break;
        }
        return true;
    }
    char *save = NULL;
    for (char *tok = strtok_r(tmp, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        uint64_t v;
        if (o->nsizes == PT_MAX_SIZES || !rc_conn_parse_size(tok, &v) || v == 0 ||
            v > PT_MAX_MSG_BYTES)
            return false;
        o->sizes[o->nsizes++] = v;
    }
    return o->nsizes > 0;
}

/* Comma list of names from `names` (count n) into flags; false on unknown. */
static bool pt_parse_list(const char *s, const char *const *names, size_t n, bool *flags)
{
    char tmp[128];
    if (strlen(s) >= sizeof(tmp))
        return false;
    strcpy(tmp, s);
    memset(flags, 0, n * sizeof(*flags));
    bool any = false;
    char *save = NULL;
    for (char *tok = strtok_r(tmp, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        size_t i;
        for (i = 0; i < n; i++)
            if (strcmp(tok, names[i]) == 0)
                break;
        if (i == n)
            return false;
        flags[i] = any = true;
    }
    return any;
}

enum {
    OPT_SERVER = 256,
    OPT_CLIENT,
    OPT_NAME,
    OPT_TESTS,
    OPT_MODES,
    OPT_SIZES,
    OPT_ITERS,
    OPT_BW_BYTES,
    OPT_BW_ITERS,
    OPT_TX_DEPTH,
    OPT_RX_DEPTH,
    OPT_CQ_MOD,
    OPT_MTU,
    OPT_INLINE,
    OPT_WARMUP,
    OPT_CONN,
    OPT_HELP
};

/* Parse argv completely (no verbs or host_* call happens before this
 * returns).  Returns 0 to run, 1 on a usage error, -1 after --help. */
static int pt_parse_args(int argc, char **argv, struct pt_opts *o)
{
    static const struct option longopts[] = {
        {"server", no_argument, NULL, OPT_SERVER},
        {"client", no_argument, NULL, OPT_CLIENT},
        {"name", required_argument, NULL, OPT_NAME},
        {"tests", required_argument, NULL, OPT_TESTS},
        {"modes", required_argument, NULL, OPT_MODES},
        {"sizes", required_argument, NULL, OPT_SIZES},
        {"iters", required_argument, NULL, OPT_ITERS},
        {"bw-bytes", required_argument, NULL, OPT_BW_BYTES},
        {"bw-iters", required_argument, NULL, OPT_BW_ITERS},
        {"tx-depth", required_argument, NULL, OPT_TX_DEPTH},
        {"rx-depth", required_argument, NULL, OPT_RX_DEPTH},
        {"cq-mod", required_argument, NULL, OPT_CQ_MOD},
        {"mtu", required_argument, NULL, OPT_MTU},
        {"inline", required_argument, NULL, OPT_INLINE},
        {"warmup", required_argument, NULL, OPT_WARMUP},
        {"conn", required_argument, NULL, OPT_CONN},
        {"help", no_argument, NULL, OPT_HELP},
        {NULL, 0, NULL, 0},
    };
    const char *test_names[PT_TEST_COUNT];
    for (int t = 0; t < PT_TEST_COUNT; t++)
        test_names[t] = pt_tests[t].name;
    const char *prog = argc > 0 && argv[0] ? argv[0] : "perftest";

    memset(o, 0, sizeof(*o));
    snprintf(o->name, sizeof(o->name), "perftest");
    for (int t = 0; t < PT_TEST_COUNT; t++)
        o->tests[t] = true;
    o->modes[PT_LAT] = o->modes[PT_BW] = true;
    pt_parse_sizes("2:65536", o);
    o->iters = 1000;           /* perftest's default for latency tests */
    o->bw_bytes = 64ull << 20; /* estimate: >= 64 messages of 1 MiB */
    o->tx_depth = 128;         /* perftest DEF_TX_BW */
    o->rx_depth = 512;         /* perftest DEF_RX_SEND */
    o->cq_mod = 64;            /* perftest DEF_CQ_MOD */
    o->inline_bytes = -1;
    o->warmup = 16; /* estimate: fills QP/MTT caches before timing */
    o->qp_type = IBV_QPT_RC;

    optind = 0; /* GNU getopt: full re-initialisation for each instance */
    opterr = 1;
    for (;;) {
        uint64_t v = 0;
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
            ok = optarg[0] != '\0' && strlen(optarg) < sizeof(o->name);
            if (ok)
                snprintf(o->name, sizeof(o->name), "%s", optarg);
            break;
        case OPT_TESTS:
            ok = pt_parse_list(optarg, test_names, PT_TEST_COUNT, o->tests);
            break;
        case OPT_MODES:
            ok = pt_parse_list(optarg, pt_mode_names, PT_MODE_COUNT, o->modes);
            break;
        case OPT_SIZES:
            ok = pt_parse_sizes(optarg, o);
            break;
        case OPT_ITERS:
            ok = rc_conn_parse_uint(optarg, 1, 1u << 30, &o->iters);
            break;
        case OPT_BW_BYTES:
            ok = rc_conn_parse_uint(optarg, 1, UINT64_MAX, &o->bw_bytes);
            break;
        case OPT_BW_ITERS:
            ok = rc_conn_parse_uint(optarg, 1, 1u << 30, &o->bw_iters);
            break;
        case OPT_TX_DEPTH:
            ok = rc_conn_parse_uint(optarg, 1, 1u << 16, &v);
            o->tx_depth = (uint32_t)v;
            break;
        case OPT_RX_DEPTH:
            ok = rc_conn_parse_uint(optarg, 1, 1u << 16, &v);
            o->rx_depth = (uint32_t)v;
            break;
        case OPT_CQ_MOD:
            ok = rc_conn_parse_uint(optarg, 1, 1u << 16, &v);
            o->cq_mod = (uint32_t)v;
            break;
        case OPT_MTU:
            ok = rc_conn_parse_uint(optarg, 256, 4096, &v) && (v & (v - 1)) == 0;
            o->mtu_bytes = (uint32_t)v;
            break;
        case OPT_INLINE:
            ok = rc_conn_parse_uint(optarg, 0, 1u << 16, &v);
            o->inline_bytes = (long)v;
            break;
        case OPT_WARMUP:
            ok = rc_conn_parse_uint(optarg, 0, 1u << 30, &o->warmup);
            break;
        case OPT_CONN:
            ok = true;
            if (strcasecmp(optarg, "rc") == 0)
                o->qp_type = IBV_QPT_RC;
            else if (strcasecmp(optarg, "uc") == 0)
                o->qp_type = IBV_QPT_UC;
            else if (strcasecmp(optarg, "ud") == 0)
                o->qp_type = IBV_QPT_UD;
            else
                ok = false;
            break;
        case OPT_HELP:
            pt_usage(prog);
            return -1;
        default:
            fprintf(stderr, "%s: try --help\n", prog);
            return 1;
        }
        if (!ok) {
            fprintf(stderr, "%s: bad value for --%s: '%s'\n", prog, longopts[c - OPT_SERVER].name,
                    optarg ? optarg : "");
            return 1;
        }
    }
    /* At most one positional argument: the server host on real hardware
     * (consumed by the out-of-band layer, tools/real/host_posix.c). */
    if (argc - optind > 1) {
        fprintf(stderr, "%s: unexpected argument '%s'\n", prog, argv[optind + 1]);
        return 1;
    }
    if (o->role == RC_CONN_ROLE_NONE) {
        fprintf(stderr, "%s: give --server or --client (try --help)\n", prog);
        return 1;
    }
    /* What each transport carries (IB spec 1.4, 9.8.1: UC has no RDMA READ
     * or atomics, UD has SEND only). */
    bool unsupported = o->qp_type != IBV_QPT_RC && (o->tests[PT_READ] || o->tests[PT_ATOMIC]);
    if (o->qp_type == IBV_QPT_UD && o->tests[PT_WRITE])
        unsupported = true;
    if (unsupported) {
        fprintf(stderr, "%s: --conn=%s carries %s only: give --tests=%s\n", prog,
                o->qp_type == IBV_QPT_UD ? "UD" : "UC",
                o->qp_type == IBV_QPT_UD ? "SEND" : "WRITE and SEND",
                o->qp_type == IBV_QPT_UD ? "send" : "write,send");
        return 1;
    }
    return 0;
}

/* FNV-1a over the options both sides must agree on. */
static uint32_t pt_opts_hash(const struct pt_opts *o)
{
    uint64_t words[PT_MAX_SIZES + 16];
    size_t n = 0;
    for (int t = 0; t < PT_TEST_COUNT; t++)
        words[n++] = o->tests[t];
    for (int m = 0; m < PT_MODE_COUNT; m++)
        words[n++] = o->modes[m];
    words[n++] = o->iters;
    words[n++] = o->bw_bytes;
    words[n++] = o->bw_iters;
    words[n++] = o->warmup;
    words[n++] = o->nsizes;
    words[n++] = (uint64_t)o->qp_type;
    for (unsigned i = 0; i < o->nsizes; i++)
        words[n++] = o->sizes[i];
    return rc_conn_hash_words(words, n);
}

/* ------------------------------------------------------------ resources */

static uint32_t pt_mtu_bytes(enum ibv_mtu m)
{
    return 128u << (int)m; /* IBV_MTU_256 == 1 */
}

static uint32_t pt_inline_for(const struct pt *pt, enum pt_test t)
{
    if (t == PT_READ || t == PT_ATOMIC)
        return 0;
    if (pt->o.inline_bytes >= 0)
        return (uint32_t)pt->o.inline_bytes;
    if (t == PT_SEND && pt->o.qp_type == IBV_QPT_UD)
        return 188; /* perftest's DEF_INLINE_SEND_UD */
    return pt_tests[t].default_inline_bytes;
}

static size_t pt_largest_size(const struct pt_opts *o)
{
    uint64_t m = 8;
    for (unsigned i = 0; i < o->nsizes; i++)
        if (o->sizes[i] > m)
            m = o->sizes[i];
    return (size_t)m;
}

/* Local and remote access of the buffer and the QP (atomics when the
 * device has them). */
static int pt_access(const struct pt *pt)
{
    return IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
           (pt->atomic_ok ? IBV_ACCESS_REMOTE_ATOMIC : 0);
}

/* Open the first device, query it, allocate PD, buffer, MR, CQs and the RC
 * QP (state RESET).  Prints the reason and returns 1 on failure. */
static int pt_open(struct pt *pt)
{
    struct rc_conn *c = &pt->conn;
    if (rc_conn_open_device(c))
        return 1;
    printf("%s %s: device %s on %s\n", pt->prog, rc_conn_role_name(pt->o.role), c->dev_name,
           host_name());
    if (rc_conn_query(c, &pt->dev, pt->o.mtu_bytes))
        return 1;
    if (c->port.state != IBV_PORT_ACTIVE)
        fprintf(stderr, "%s: warning: port %d is not ACTIVE\n", pt->prog, RC_CONN_PORT);
    pt->max_rd_atomic = pt->dev.max_qp_rd_atom > 0 ? (uint32_t)pt->dev.max_qp_rd_atom : 1;
    if (pt->dev.max_qp_init_rd_atom > 0 &&
        (uint32_t)pt->dev.max_qp_init_rd_atom < pt->max_rd_atomic)
        pt->max_rd_atomic = (uint32_t)pt->dev.max_qp_init_rd_atom;
    pt->atomic_ok = pt->dev.atomic_cap != IBV_ATOMIC_NONE;
    if (pt->dev.max_qp_wr > 0 && pt->o.tx_depth > (uint32_t)pt->dev.max_qp_wr)
        pt->o.tx_depth = (uint32_t)pt->dev.max_qp_wr;
    pt->rx_depth = pt->o.rx_depth;
    if (pt->dev.max_qp_wr > 0 && pt->rx_depth > (uint32_t)pt->dev.max_qp_wr)
        pt->rx_depth = (uint32_t)pt->dev.max_qp_wr;

    /* Buffer: [0, max) send source / READ target area, [rx_off, rx_off+max)
     * where the peer writes and receives land, then 64 bytes for atomics
     * (counter at +0, fetched values at +8). */
    pt->max_size = pt_largest_size(&pt->o);
    pt->grh_bytes = pt->o.qp_type == IBV_QPT_UD ? 40 : 0; /* IB spec 1.4, 8.3: GRH */
    pt->rx_off = (pt->max_size + 63) & ~(size_t)63;
    pt->atom_off = pt->rx_off + ((pt->max_size + pt->grh_bytes + 63) & ~(size_t)63);
    if (rc_conn_alloc_buf(c, pt->atom_off + 64) || rc_conn_create_pd_mr(c, pt_access(pt)) ||
        rc_conn_create_cqs(c, pt->o.tx_depth, pt->rx_depth))
        return 1;

    uint32_t want_inline = 0;
    for (int t = 0; t < PT_TEST_COUNT; t++)
        if (pt->o.tests[t] && pt_inline_for(pt, (enum pt_test)t) > want_inline)
            want_inline = pt_inline_for(pt, (enum pt_test)t);
    if (rc_conn_create_qp(c, pt->o.tx_depth, pt->rx_depth, want_inline, &pt->max_inline_bytes))
        return 1;
    return 0;
}

/* Exchange connection data with the peer and connect the QP
 * (RESET -> INIT -> RTR -> RTS). */
static int pt_exchange(struct pt *pt)
{
    struct rc_conn *c = &pt->conn;
    if (rc_conn_exchange(c, pt_opts_hash(&pt->o), pt->atomic_ok))
        return 1;
    if (c->peer.opts_hash != c->local.opts_hash) {
        fprintf(stderr, "%s: server and client were given different test options\n", pt->prog);
        return 1;
    }
    if (c->peer.buf_bytes != c->buf_bytes) {
        fprintf(stderr, "%s: peer buffer is %" PRIu64 " bytes, expected %zu\n", pt->prog,
                c->peer.buf_bytes, c->buf_bytes);
        return 1;
    }
    pt->atomic_ok = pt->atomic_ok && c->peer.atomic_ok;
    uint8_t rd_atomic = (uint8_t)(pt->max_rd_atomic > 255 ? 255 : pt->max_rd_atomic);
    return rc_conn_connect(c, pt_access(pt), rd_atomic) ? 1 : 0;
}

/* ------------------------------------------------------------ data path */

static int pt_wc_check(const struct pt *pt, const struct ibv_wc *wc, const char *what)
{
    if (wc->status == IBV_WC_SUCCESS)
        return 0;
    fprintf(stderr, "%s: %s completion failed: %s (status %d, vendor 0x%x)\n", pt->prog, what,
            ibv_wc_status_str(wc->status), (int)wc->status, wc->vendor_err);
    return 1;
}

/* Wait for at least one send completion; advance s->completed. */
static int pt_poll_send(struct pt *pt, struct pt_sender *s)
{
    struct ibv_wc wc[PT_POLL_BATCH];
    int n;
    do {
        n = ibv_poll_cq(pt->conn.scq, PT_POLL_BATCH, wc);
    } while (n == 0);
    if (n < 0) {
        fprintf(stderr, "%s: ibv_poll_cq failed\n", pt->prog);
        return 1;
    }
    for (int i = 0; i < n; i++) {
        if (pt_wc_check(pt, &wc[i], "send"))
            return 1;
        if (wc[i].wr_id > s->completed)
            s->completed = wc[i].wr_id;
    }
    return 0;
}

static void pt_sender_init(struct pt_sender *s, uint64_t total, uint64_t limit, uint64_t cq_mod)
{
    memset(s, 0, sizeof(*s));
    s->total = total;
    s->limit = limit ? limit : 1;
    /* A signaled WR must come before the queue is full, and half the
     * window keeps the pipe busy while we wait for it. */
    uint64_t max_mod = s->limit > 1 ? s->limit / 2 : 1;
    s->cq_mod = cq_mod < 1 ? 1 : (cq_mod > max_mod ? max_mod : cq_mod);
}

/* Post one WR under the run's flow control (blocks while `limit` WRs are
 * outstanding).  Sets wr_id and the signaled flag. */
static int pt_post(struct pt *pt, struct pt_sender *s, struct ibv_send_wr *wr)
{
    while (s->posted - s->completed >= s->limit)
        if (pt_poll_send(pt, s))
            return 1;
    uint64_t k = s->posted + 1;
    wr->wr_id = k;
    wr->send_flags &= ~(unsigned)IBV_SEND_SIGNALED;
    if (k % s->cq_mod == 0 || k == s->total)
        wr->send_flags |= IBV_SEND_SIGNALED;
    struct ibv_send_wr *bad = NULL;
    int err = ibv_post_send(pt->conn.qp, wr, &bad);
    if (err) {
        fprintf(stderr, "%s: ibv_post_send: %s\n", pt->prog, strerror(err));
        return 1;
    }
    s->posted = k;
    return 0;
}

static int pt_drain(struct pt *pt, struct pt_sender *s)
{
    while (s->completed < s->posted)
        if (pt_poll_send(pt, s))
            return 1;
    return 0;
}

/* Top the receive queue up to rx_depth; every receive covers the whole rx
 * region so it fits any size. */
static int pt_post_recvs(struct pt *pt)
{
    while (pt->rq_posted < pt->rx_depth) {
        struct ibv_sge sge = {.addr = (uint64_t)(uintptr_t)(pt->conn.buf + pt->rx_off),
                              .length = (uint32_t)(pt->max_size + pt->grh_bytes),
                              .lkey = pt->conn.mr->lkey};
        struct ibv_recv_wr wr = {.wr_id = 0, .sg_list = &sge, .num_sge = 1}, *bad = NULL;
        int err = ibv_post_recv(pt->conn.qp, &wr, &bad);
        if (err) {
            fprintf(stderr, "%s: ibv_post_recv: %s\n", pt->prog, strerror(err));
            return 1;
        }
        pt->rq_posted++;
    }
    return 0;
}

/* Wait for >= 1 receive completion, check each is `size` bytes, and, if
 * `repost`, post as many receives again.  Adds the count to *received. */
static int pt_poll_recv(struct pt *pt, uint64_t size, uint64_t *received, bool repost)
{
    struct ibv_wc wc[PT_POLL_BATCH];
    int n;
    do {
        n = ibv_poll_cq(pt->conn.rcq, PT_POLL_BATCH, wc);
    } while (n == 0);
    if (n < 0) {
        fprintf(stderr, "%s: ibv_poll_cq failed\n", pt->prog);
        return 1;
    }
    for (int i = 0; i < n; i++) {
        if (pt_wc_check(pt, &wc[i], "receive"))
            return 1;
        if (wc[i].byte_len != size + pt->grh_bytes) {
            fprintf(stderr, "%s: VERIFY FAILED: received %u bytes, expected %" PRIu64 "\n",
                    pt->prog, wc[i].byte_len, size + pt->grh_bytes);
            return 2;
        }
    }
    pt->rq_posted -= (uint32_t)n;
    *received += (uint64_t)n;
    return repost ? pt_post_recvs(pt) : 0;
}

/* Pattern byte j of the message a `writer` sends in (test, mode, size #si). */
static uint8_t pt_pattern(enum pt_test t, enum pt_mode m, unsigned si, enum rc_conn_role writer,
                          size_t j)
{
    uint32_t salt = ((uint32_t)t * 2u + (uint32_t)m) * 131u + si * 17u + (uint32_t)writer * 101u;
    return (uint8_t)(j * 31u + salt);
}

static void pt_fill(uint8_t *p, size_t size, enum pt_test t, enum pt_mode m, unsigned si,
                    enum rc_conn_role writer)
{
    for (size_t j = 0; j < size; j++)
        p[j] = pt_pattern(t, m, si, writer, j);
}

/* Check p[0..size) against the writer's pattern; if last_byte >= 0 the last
 * byte must equal it instead (latency sequence byte).  Returns 0 or 2. */
static int pt_verify(const struct pt *pt, const volatile uint8_t *p, size_t size, enum pt_test t,
                     enum pt_mode m, unsigned si, enum rc_conn_role writer, int last_byte)
{
    for (size_t j = 0; j < size; j++) {
        uint8_t want = pt_pattern(t, m, si, writer, j);
        if (last_byte >= 0 && j == size - 1)
            want = (uint8_t)last_byte;
        if (p[j] != want) {
            fprintf(stderr,
                    "%s: VERIFY FAILED: %s %s size %zu: byte %zu is 0x%02x, expected 0x%02x\n",
                    pt->prog, pt_tests[t].name, pt_mode_names[m], size, j, p[j], want);
            return 2;
        }
    }
    return 0;
}

/* Sequence byte of latency iteration i (never equal to the previous one). */
static uint8_t pt_seq(uint64_t i)
{
    return (uint8_t)(i + 1);
}

/* One size of one test: what both sides need. */
struct pt_run {
    enum pt_test test;
    enum pt_mode mode;
    unsigned size_index;
    uint64_t size;
    uint64_t iters;       /* timed iterations */
    uint64_t *samples_ns; /* latency: round trip per timed iteration */
    uint64_t elapsed_ns;  /* bandwidth: first post to last completion */
};

static void pt_wr_init(struct pt *pt, const struct pt_run *r, struct ibv_sge *sge,
                       struct ibv_send_wr *wr)
{
    memset(sge, 0, sizeof(*sge));
    memset(wr, 0, sizeof(*wr));
    sge->lkey = pt->conn.mr->lkey;
    sge->length = (uint32_t)r->size;
    wr->sg_list = sge;
    wr->num_sge = 1;
    wr->opcode = pt_tests[r->test].opcode;
    switch (r->test) {
    case PT_WRITE:
        sge->addr = (uint64_t)(uintptr_t)pt->conn.buf;
        wr->wr.rdma.remote_addr = pt->conn.peer.addr + pt->rx_off;
        wr->wr.rdma.rkey = pt->conn.peer.rkey;
        break;
    case PT_READ:
        sge->addr = (uint64_t)(uintptr_t)(pt->conn.buf + pt->rx_off);
        wr->wr.rdma.remote_addr = pt->conn.peer.addr;
        wr->wr.rdma.rkey = pt->conn.peer.rkey;
        break;
    case PT_SEND:
        sge->addr = (uint64_t)(uintptr_t)pt->conn.buf;
        if (pt->o.qp_type == IBV_QPT_UD) {
            wr->wr.ud.ah = pt->conn.ah;
            wr->wr.ud.remote_qpn = pt->conn.peer.qpn;
            wr->wr.ud.remote_qkey = RC_CONN_UD_QKEY;
        }
        break;
    case PT_ATOMIC:
        sge->addr = (uint64_t)(uintptr_t)(pt->conn.buf + pt->atom_off + 8);
        sge->length = 8;
        wr->wr.atomic.remote_addr = pt->conn.peer.addr + pt->atom_off;
        wr->wr.atomic.rkey = pt->conn.peer.rkey;
        wr->wr.atomic.compare_add = 1;
        break;
    case PT_TEST_COUNT:
        break;
    }
    if (r->size <= pt_inline_for(pt, r->test) && r->size <= pt->max_inline_bytes)
        wr->send_flags = IBV_SEND_INLINE;
}

/* Ping-pong over RDMA WRITE (both sides) or SEND/RECV. */
static int pt_run_pingpong(struct pt *pt, struct pt_run *r)
{
    bool client = pt->o.role == RC_CONN_ROLE_CLIENT;
    uint64_t total = pt->o.warmup + r->iters;
    size_t last = (size_t)r->size - 1;
    const volatile uint8_t *poll_byte = pt->conn.buf + pt->rx_off + last;
    struct ibv_sge sge;
    struct ibv_send_wr wr;
    struct pt_sender s;
    uint64_t received = 0;
    int rc;
    pt_wr_init(pt, r, &sge, &wr);
    pt_sender_init(&s, total, pt->o.tx_depth, pt->o.cq_mod);
    /* perftest posts the next SEND as soon as a message arrives and tops
     * the receive queue up off that path (its rx depth covers the run); with
     * a single receive the repost has to come first, or the peer's answer
     * could find none (RNR) */
    bool repost_first = pt->rx_depth < 2;

    for (uint64_t i = 0; i < total; i++) {
        uint8_t seq = pt_seq(i);
        uint64_t t0 = host_now_ns();
        if (!client) { /* the server answers what arrives */
            if (r->test == PT_SEND) {
                while (received <= i)
                    if ((rc = pt_poll_recv(pt, r->size, &received, repost_first)) != 0)
                        return rc;
            } else {
                while (*poll_byte != seq)
                    host_relax();
            }
        }
        pt->conn.buf[last] = seq;
        if ((rc = pt_post(pt, &s, &wr)) != 0)
            return rc;
        if (r->test == PT_SEND && (rc = pt_post_recvs(pt)) != 0)
            return rc;
        if (client) {
            if (r->test == PT_SEND) {
                while (received <= i)
                    if ((rc = pt_poll_recv(pt, r->size, &received, repost_first)) != 0)
                        return rc;
            } else {
                while (*poll_byte != seq)
                    host_relax();
            }
            uint64_t t1 = host_now_ns();
            if (i >= pt->o.warmup)
                r->samples_ns[i - pt->o.warmup] = t1 - t0;
        }
    }
    if ((rc = pt_drain(pt, &s)) != 0)
        return rc;
    /* Each side checks the last message it received from the peer. */
    enum rc_conn_role peer = client ? RC_CONN_ROLE_SERVER : RC_CONN_ROLE_CLIENT;
    size_t at = r->test == PT_SEND ? pt->grh_bytes : 0; /* UD: after the GRH */
    return pt_verify(pt, pt->conn.buf + pt->rx_off + at, (size_t)r->size, r->test, r->mode,
                     r->size_index, peer, pt_seq(total - 1));
}

/* READ or FETCH_AND_ADD latency: one outstanding operation (client only). */
static int pt_run_rd_lat(struct pt *pt, struct pt_run *r)
{
    uint64_t total = pt->o.warmup + r->iters;
    volatile uint64_t *fetched = (volatile uint64_t *)(void *)(pt->conn.buf + pt->atom_off + 8);
    struct ibv_sge sge;
    struct ibv_send_wr wr;
    struct pt_sender s;
    int rc;
    pt_wr_init(pt, r, &sge, &wr);
    pt_sender_init(&s, total, 1, 1);
    for (uint64_t i = 0; i < total; i++) {
        uint64_t t0 = host_now_ns();
        if ((rc = pt_post(pt, &s, &wr)) != 0 || (rc = pt_drain(pt, &s)) != 0)
            return rc;
        uint64_t t1 = host_now_ns();
        if (i >= pt->o.warmup)
            r->samples_ns[i - pt->o.warmup] = t1 - t0;
        if (r->test == PT_ATOMIC && *fetched != i) {
            fprintf(stderr, "%s: VERIFY FAILED: FETCH_AND_ADD #%" PRIu64 " returned %" PRIu64 "\n",
                    pt->prog, i, (uint64_t)*fetched);
            return 2;
        }
    }
    return 0;
}

/* Client side of every bandwidth test: a window of outstanding WRs. */
static int pt_run_bw_client(struct pt *pt, struct pt_run *r)
{
    /* tx-depth WRs in the send queue, as perftest keeps them: the NIC
     * itself holds READs and atomics to the QP's max_rd_atomic on the wire
     * (a window of max_rd_atomic here would add a completion's round trip
     * to the host each time it ran dry) */
    uint64_t limit = pt->o.tx_depth;
    struct ibv_sge sge;
    struct ibv_send_wr wr;
    struct pt_sender s;
    int rc;
    pt_wr_init(pt, r, &sge, &wr);
    if (pt->o.warmup) {
        pt_sender_init(&s, pt->o.warmup, limit, pt->o.cq_mod);
        for (uint64_t i = 0; i < pt->o.warmup; i++)
            if ((rc = pt_post(pt, &s, &wr)) != 0)
                return rc;
        if ((rc = pt_drain(pt, &s)) != 0)
            return rc;
    }
    pt_sender_init(&s, r->iters, limit, pt->o.cq_mod);
    uint64_t t0 = host_now_ns();
    for (uint64_t i = 0; i < r->iters; i++)
        if ((rc = pt_post(pt, &s, &wr)) != 0)
            return rc;
    if ((rc = pt_drain(pt, &s)) != 0)
        return rc;
    r->elapsed_ns = host_now_ns() - t0;
    if (r->test == PT_ATOMIC) { /* responses land in order: the last wins */
        uint64_t want = pt->o.warmup + r->iters - 1;
        uint64_t got;
        memcpy(&got, pt->conn.buf + pt->atom_off + 8, 8);
        if (got != want) {
            fprintf(stderr,
                    "%s: VERIFY FAILED: last FETCH_AND_ADD returned %" PRIu64 ", expected %" PRIu64
                    "\n",
                    pt->prog, got, want);
            return 2;
        }
    }
    return 0;
}

/* Run one size of one (test, mode) on this side and check what arrived. */
static int pt_run_side(struct pt *pt, struct pt_run *r)
{
    bool client = pt->o.role == RC_CONN_ROLE_CLIENT;
    enum rc_conn_role peer = client ? RC_CONN_ROLE_SERVER : RC_CONN_ROLE_CLIENT;
    if (r->mode == PT_LAT) {
        if (r->test == PT_WRITE || r->test == PT_SEND)
            return pt_run_pingpong(pt, r);
        return client ? pt_run_rd_lat(pt, r) : 0;
    }
    if (client) {
        int rc = pt_run_bw_client(pt, r);
        if (rc == 0 && r->test == PT_READ)
            rc = pt_verify(pt, pt->conn.buf + pt->rx_off, (size_t)r->size, r->test, r->mode,
                           r->size_index, peer, -1);
        return rc;
    }
    if (r->test == PT_SEND) { /* the server receives everything */
        uint64_t received = 0, total = pt->o.warmup + r->iters;
        while (received < total) {
            int rc = pt_poll_recv(pt, r->size, &received, true);
            if (rc)
                return rc;
        }
    }
    return 0;
}

/* Checks the server can only make after the client finished (barrier). */
static int pt_verify_after(struct pt *pt, const struct pt_run *r)
{
    if (pt->o.role != RC_CONN_ROLE_SERVER)
        return 0;
    if (r->test == PT_ATOMIC) { /* every FETCH_AND_ADD added one */
        uint64_t want = pt->o.warmup + r->iters, got;
        memcpy(&got, pt->conn.buf + pt->atom_off, 8);
        if (got != want) {
            fprintf(stderr,
                    "%s: VERIFY FAILED: atomic %s counter is %" PRIu64 ", expected %" PRIu64 "\n",
                    pt->prog, pt_mode_names[r->mode], got, want);
            return 2;
        }
        return 0;
    }
    if (r->mode == PT_BW && (r->test == PT_WRITE || r->test == PT_SEND))
        return pt_verify(pt, pt->conn.buf + pt->rx_off + (r->test == PT_SEND ? pt->grh_bytes : 0),
                         (size_t)r->size, r->test, r->mode, r->size_index, RC_CONN_ROLE_CLIENT, -1);
    return 0;
}

/* Prepare buffers for one run (before the start barrier). */
static int pt_prepare(struct pt *pt, const struct pt_run *r)
{
    enum rc_conn_role me = pt->o.role;
    memset(pt->conn.buf + pt->rx_off, 0, pt->max_size + pt->grh_bytes);
    memset(pt->conn.buf + pt->atom_off, 0, 64);
    pt_fill(pt->conn.buf, (size_t)r->size, r->test, r->mode, r->size_index, me);
    if (r->test == PT_SEND)
        return pt_post_recvs(pt);
    return 0;
}

/* ------------------------------------------------------------ results */

static int pt_cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Nearest-rank percentile of sorted v[0..n). */
/* Nearest rank of the per-mille `pm` (500 = median, 999 = p99.9). */
static uint64_t pt_percentile(const uint64_t *v, uint64_t n, unsigned pm)
{
    uint64_t rank = (pm * n + 999) / 1000;
    if (rank < 1)
        rank = 1;
    return v[rank - 1];
}

static void pt_print_header(const struct pt *pt, enum pt_test t, enum pt_mode m)
{
    printf("\n %s %s test (%s)  mtu %u  tx-depth %u  cq-mod %u  inline %u\n", pt_tests[t].title,
           m == PT_LAT ? "Latency" : "BW", pt->o.name, pt_mtu_bytes(pt->conn.mtu), pt->o.tx_depth,
           pt->o.cq_mod,
           pt_inline_for(pt, t) < pt->max_inline_bytes ? pt_inline_for(pt, t)
                                                       : pt->max_inline_bytes);
    if (m == PT_LAT)
        printf(" %10s %12s %11s %11s %11s %11s %11s\n", "#bytes", "#iterations", "t_min[us]",
               "t_avg[us]", "t_p50[us]", "t_p99[us]", "t_max[us]");
    else
        printf(" %10s %12s %14s %16s\n", "#bytes", "#iterations", "BW avg[Gb/s]", "MsgRate[Mpps]");
}

static void pt_report(struct pt_run *r)
{
    char table[32];
    snprintf(table, sizeof(table), "%s_%s", pt_tests[r->test].name, pt_mode_names[r->mode]);
    if (r->mode == PT_LAT) {
        /* ns round trip -> us: multiply by lat_scale (0.5 or 1, exact) and
         * divide last, so a value is the double nearest its decimal
         * (1.319478, not 1.3194780000000002 as a product with 0.0005 gives) */
        double scale = pt_tests[r->test].lat_scale;
        uint64_t n = r->iters, sum = 0;
        qsort(r->samples_ns, (size_t)n, sizeof(uint64_t), pt_cmp_u64);
        for (uint64_t i = 0; i < n; i++)
            sum += r->samples_ns[i];
        double mn = (double)r->samples_ns[0] * scale / 1e3;
        double mx = (double)r->samples_ns[n - 1] * scale / 1e3;
        double avg = (double)sum * scale / ((double)n * 1e3);
        double p50 = (double)pt_percentile(r->samples_ns, n, 500) * scale / 1e3;
        double p99 = (double)pt_percentile(r->samples_ns, n, 990) * scale / 1e3;
        double p999 = (double)pt_percentile(r->samples_ns, n, 999) * scale / 1e3;
        struct host_kv kv[] = {
            {"size_bytes", (double)r->size},
            {"iters", (double)n},
            {"t_min_us", mn},
            {"t_avg_us", avg},
            {"t_p50_us", p50},
            {"t_p99_us", p99},
            {"t_p999_us", p999},
            {"t_max_us", mx},
        };
        host_report(table, kv, sizeof(kv) / sizeof(kv[0]));
        printf(" %10" PRIu64 " %12" PRIu64 " %11.3f %11.3f %11.3f %11.3f %11.3f\n", r->size, n, mn,
               avg, p50, p99, mx);
    } else {
        double ns = r->elapsed_ns ? (double)r->elapsed_ns : 1.0;
        double gbps = (double)r->size * (double)r->iters * 8.0 / ns;
        double mpps = (double)r->iters * 1e3 / ns;
        struct host_kv kv[] = {
            {"size_bytes", (double)r->size},
            {"iters", (double)r->iters},
            {"bw_gbps", gbps},
            {"msg_rate_mpps", mpps},
        };
        host_report(table, kv, sizeof(kv) / sizeof(kv[0]));
        printf(" %10" PRIu64 " %12" PRIu64 " %14.3f %16.4f\n", r->size, r->iters, gbps, mpps);
    }
}

static uint64_t pt_bw_iters(const struct pt_opts *o, uint64_t size)
{
    if (o->bw_iters)
        return o->bw_iters;
    uint64_t it = o->bw_bytes / size;
    return it < 32 ? 32 : (it > 5000 ? 5000 : it);
}

/* Every size of one (test, mode), in lockstep with the peer. */
static int pt_run_test(struct pt *pt, enum pt_test t, enum pt_mode m)
{
    bool client = pt->o.role == RC_CONN_ROLE_CLIENT;
    uint64_t fixed[1] = {pt_tests[t].fixed_size_bytes};
    const uint64_t *sizes = fixed[0] ? fixed : pt->o.sizes;
    unsigned nsizes = fixed[0] ? 1 : pt->o.nsizes;
    if (client)
        pt_print_header(pt, t, m);
    for (unsigned si = 0; si < nsizes; si++) {
        struct pt_run r = {.test = t, .mode = m, .size_index = si, .size = sizes[si]};
        r.iters = m == PT_LAT ? pt->o.iters : pt_bw_iters(&pt->o, r.size);
        if (r.size > pt->conn.port.max_msg_sz && pt->conn.port.max_msg_sz) {
            if (client)
                printf(" %10" PRIu64 "  skipped: larger than the port's max message\n", r.size);
            continue;
        }
        if (pt->o.qp_type == IBV_QPT_UD && r.size > pt_mtu_bytes(pt->conn.mtu)) {
            if (client) /* a UD message is one packet (perftest refuses these sizes) */
                printf(" %10" PRIu64 "  skipped: larger than the MTU (UD)\n", r.size);
            continue;
        }
        int rc = pt_prepare(pt, &r);
        int peer_rc = rc_conn_barrier(&pt->conn, rc, 1);
        if (rc == 0 && peer_rc == 0 && m == PT_LAT && client) {
            r.samples_ns = calloc((size_t)r.iters, sizeof(uint64_t));
            if (!r.samples_ns) {
                fprintf(stderr, "%s: out of memory\n", pt->prog);
                rc = 1;
            }
        }
        if (rc == 0 && peer_rc == 0)
            rc = pt_run_side(pt, &r);
        peer_rc = peer_rc ? peer_rc : rc_conn_barrier(&pt->conn, rc, 1);
        if (rc == 0 && peer_rc == 0) {
            rc = pt_verify_after(pt, &r);
            peer_rc = rc_conn_barrier(&pt->conn, rc, 1);
        }
        if (rc == 0 && peer_rc == 0 && client)
            pt_report(&r);
        free(r.samples_ns);
        if (rc || peer_rc) {
            if (peer_rc && !rc)
                fprintf(stderr, "%s: the %s failed (%s %s, %" PRIu64 " bytes)\n", pt->prog,
                        rc_conn_peer_role_name(pt->o.role), pt_tests[t].name, pt_mode_names[m],
                        r.size);
            return rc > peer_rc ? rc : peer_rc;
        }
    }
    return 0;
}

int perftest_main(int argc, char **argv)
{
    struct pt *pt = calloc(1, sizeof(*pt));
    if (!pt)
        return 1;
    int rc = pt_parse_args(argc, argv, &pt->o);
    if (rc) {
        free(pt);
        return rc < 0 ? 0 : rc;
    }
    pt->prog = argc > 0 && argv[0] ? argv[0] : "perftest";
    rc_conn_init(&pt->conn, pt->prog, pt->o.role, pt->o.name);
    pt->conn.qp_type = pt->o.qp_type;

    rc = pt_open(pt);
    if (rc == 0)
        rc = pt_exchange(pt);
    if (rc == 0) {
        int peer_rc = rc_conn_barrier(&pt->conn, 0, 1); /* both QPs are in RTS */
        rc = peer_rc ? 1 : 0;
    }
    for (int t = 0; rc == 0 && t < PT_TEST_COUNT; t++) {
        if (!pt->o.tests[t])
            continue;
        if (t == PT_ATOMIC && !pt->atomic_ok) {
            if (pt->o.role == RC_CONN_ROLE_CLIENT)
                printf("\n atomic: not supported by the device, skipped\n");
            continue;
        }
        for (int m = 0; rc == 0 && m < PT_MODE_COUNT; m++)
            if (pt->o.modes[m])
                rc = pt_run_test(pt, (enum pt_test)t, (enum pt_mode)m);
    }
    if (rc == 0) {
        rc = rc_conn_barrier(&pt->conn, 0, 1) ? 1 : 0; /* peer done before we tear down */
        printf("%s %s: done\n", pt->prog, rc_conn_role_name(pt->o.role));
    }
    rc_conn_close(&pt->conn);
    free(pt);
    return rc;
}
