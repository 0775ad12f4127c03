/* footprint: the memory-footprint study of the RIMA paper (Xue,
 * Vijaykumar, Thottethodi, TACO 2020, Sections 4.1 and 5.1, Figures 3-7).
 *
 * One --server receives a stream of messages from --clients=K client
 * programs (--client --id=0..K-1).  Sizes come from --dist (default the
 * memcached distribution of Figure 2, workload.h), optionally truncated
 * (--max-size) and scaled (--scale); each client paces its messages with
 * --arrival (Poisson, or bursts at the line rate) at --rate/K messages/s.
 *
 * Receive queues (--bins): "single" (one SRQ, buffers of the largest
 * size), "equi:M" (M SRQs over equal sub-ranges of [1, max]) or "slab:M"
 * (memcached's 42 slab classes merged into M bins of balanced probability).
 * A QP has exactly one SRQ (ibv_qp_init_attr.srq), so each client connects
 * one RC QP per SRQ (K x M QPs at the server) and sends a message on the QP
 * of the bin its size falls in (SEND_WITH_IMM; the immediate carries the
 * client and a per-QP sequence number).  The server's SRQ b has buffers of
 * the bin's largest size.
 *
 * The server drains its CQ into a FIFO and processes one message at a time
 * in arrival order: copies it out with host_memcpy (W = the memcpy cost, as
 * the paper's measurement), checks it, reposts the buffer.  The number of
 * messages in the FIFO just before a message is processed is the number
 * outstanding (received, not yet consumed: lambda x W of Table 4).  Every
 * --epoch=2048 processed messages (the paper's epoch) it reports, at that
 * instant:
 *   SRQ  active = sum over bins of outstanding_b x buf_b (real buffers held)
 *   RIMA active = sum of the outstanding messages' actual sizes (what an
 *                 append queue holds for the same stream)
 *   reserve pools from footprint_model.h (msgrate(lo) x L x buf per bin;
 *   line rate x L for RIMA; --line-rate, --alloc-latency, --small-rate).
 * The RIMA numbers come from the same SRQ run; the hardware append queue
 * (include/rnicsim/rima.h) is not used yet (see docs/rima-footprint.md).
 *
 * --model: no traffic; the analytic reserve pools of slab:1..--queues (or
 * equi:1..) bins for the distribution, one row each (Figure 6).
 *
 * Tables (host_report):
 *   footprint_epoch  one row per epoch (see fp_report_epoch)
 *   footprint        one row: steady-state means over the epochs after
 *                    --warmup-epochs
 *   footprint_bins   one row per bin: range, buffer, probability, messages,
 *                    mean outstanding, reserve
 *   footprint_model  (--model) one row per number of queues
 *
 * Verification: the server checks every message: the QP it came on belongs
 * to the SRQ whose range holds byte_len, the sequence number per QP, and
 * the first and last byte of the client's pattern; a mismatch prints
 * "VERIFY FAILED" and the server exits 2.
 *
 * Out of band (prefix --name): "<name>/client/<i>" (options hash, LID,
 * GID, the M QPNs), "<name>/server/<i>" (status, LID, GID, the server's M
 * QPNs for client i), "<name>/go" (the server's status once every client
 * is connected: the clients start sending then).
 *
 * No globals: several instances run as coroutines in one simulator
 * process.  getopt's globals are used only while parsing. */
#include "protocols/rima/footprint.h"

#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <infiniband/verbs.h>
#include <inttypes.h>
#include <math.h>
#include <rnicsim/host.h>
#include <rnicsim/rima.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "protocols/common/pages.h"
#include "protocols/common/rc_conn.h"
#include "protocols/rima/footprint_model.h"
#include "protocols/rima/workload.h"

#define FP_KEY_MAX 160
#define FP_MAX_QUEUES 1024
#define FP_MAX_CLIENTS 256
#define FP_SEQ_BITS 24
#define FP_POLL_BATCH 64

enum fp_bins_kind { FP_BINS_SINGLE, FP_BINS_EQUI, FP_BINS_SLAB, FP_BINS_SLAB_BYTES, FP_BINS_RIMA };

struct fp_opts {
    enum rc_conn_role role;
    bool model;
    uint64_t id, clients;
    char name[RC_CONN_NAME_MAX];
    char dist[512];
    uint64_t max_size; /* truncation, 0 = none */
    double scale;
    enum fp_bins_kind bins;
    uint64_t queues;
    uint64_t messages; /* per client */
    uint64_t epoch;
    uint64_t warmup_epochs;
    double rate;      /* total messages / s over all clients */
    uint64_t burst;   /* 0 = Poisson, else bursts of this many */
    double line_rate; /* bits / s, for the model and bursts */
    double alloc_latency_s;
    double small_rate;
    uint64_t srq_depth;
    uint64_t sq_depth;
    uint64_t seed;
    uint64_t mtu;
    uint64_t aq_region, aq_chunk, aq_initial, aq_head_batch;
};

struct fp_qpmap {
    uint32_t qpn;
    uint32_t client, bin;
};

struct fp_item {
    uint32_t bin, slot, len, client;
    uint64_t off; /* rima: offset in the append queue */
};

struct fp_extent {
    uint64_t off, len;
};

struct fp {
    const char *prog;
    struct fp_opts o;
    struct wl_size_dist dist;
    struct wl_bin *bins;
    size_t nbins;
    struct fp_model model;
    struct rc_conn conn;
    struct ibv_device_attr dev;
    struct ibv_cq *cq;
    struct ibv_qp **qps; /* server: client-major K x M; client: M */
    uint32_t nqps;
    /* server */
    struct ibv_srq **srqs;
    uint8_t **srq_buf;
    struct ibv_mr **srq_mr;
    uint32_t *srq_depth;
    uint32_t *free_bufs; /* posted, not yet filled (per SRQ) */
    struct fp_qpmap *qpmap;
    uint32_t *expect_seq; /* per server QP */
    struct fp_item *ring;
    size_t ring_cap, ring_head, ring_count;
    uint64_t *out_bin;   /* outstanding per bin now */
    uint64_t out_bytes;  /* outstanding actual bytes now */
    uint64_t *bin_msgs;  /* processed per bin */
    double *bin_out_sum; /* sum over processed messages of out_bin */
    uint8_t *app;        /* where messages are copied to */
    uint64_t starved;    /* drains that found an SRQ with no free buffer */
    /* server, --bins=rima: the append queue */
    struct ibv_aq *aq;
    uint64_t aq_head;        /* software head (offset) */
    uint64_t head_unwritten; /* head moves not yet written to the NIC */
    struct fp_extent *done;  /* processed, not yet released (by offset) */
    size_t ndone, done_cap;
    struct wl_size_dist *replica; /* per client: the sizes it will send */
    /* client */
    uint32_t aq_num;
    struct ibv_mr *pat_mr;
    uint8_t *pattern;
    uint32_t *inflight, *seq;
    uint64_t inflight_total, cq_cap;
    int access;
};

/* ------------------------------------------------------------ helpers */

static uint8_t fp_pattern(uint32_t client, uint32_t off)
{
    return (uint8_t)(off * 131u + client * 29u + 7u);
}

static void fp_usage(const char *prog)
{
    fprintf(stderr,
            "usage: %s --server|--client --id=I | --model\n"
            "  [--clients=K] [--name=N] [--dist=memcached|fixed:S|uniform:LO:HI|list:S:W,...]\n"
            "  [--max-size=S] [--scale=F] [--bins=single|equi:M|slab:M|slab-bytes:M|rima] "
            "[--messages=N]\n"
            "  [--epoch=2048] [--warmup-epochs=E] [--rate=MSGS_PER_S] [--burst=K]\n"
            "  [--line-rate=56Gbps] [--alloc-latency-us=1000] [--small-rate=137e6]\n"
            "  [--srq-depth=D] [--sq-depth=D] [--seed=S] [--mtu=B] [--queues=M (--model)]\n"
            "  [--aq-region=1GiB] [--aq-chunk=8MiB] [--aq-initial-chunks=2]\n"
            "  [--aq-head-batch=32]\n",
            prog);
}

static bool fp_parse_double(const char *s, double min, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || errno || !isfinite(v))
        return false;
    /* decimal suffixes: K, M, G, optionally followed by "bps" (rates) */
    if (strcasecmp(end, "G") == 0 || strcasecmp(end, "Gbps") == 0)
        v *= 1e9;
    else if (strcasecmp(end, "M") == 0 || strcasecmp(end, "Mbps") == 0)
        v *= 1e6;
    else if (strcasecmp(end, "K") == 0 || strcasecmp(end, "Kbps") == 0)
        v *= 1e3;
    else if (*end && strcasecmp(end, "bps") != 0)
        return false;
    if (v < min)
        return false;
    *out = v;
    return true;
}

enum {
    OPT_SERVER = 256,
    OPT_CLIENT,
    OPT_MODEL,
    OPT_ID,
    OPT_CLIENTS,
    OPT_NAME,
    OPT_DIST,
    OPT_MAX_SIZE,
    OPT_SCALE,
    OPT_BINS,
    OPT_QUEUES,
    OPT_MESSAGES,
    OPT_EPOCH,
    OPT_WARMUP,
    OPT_RATE,
    OPT_BURST,
    OPT_LINE_RATE,
    OPT_ALLOC,
    OPT_SMALL_RATE,
    OPT_SRQ_DEPTH,
    OPT_SQ_DEPTH,
    OPT_SEED,
    OPT_MTU,
    OPT_AQ_REGION,
    OPT_AQ_CHUNK,
    OPT_AQ_INITIAL,
    OPT_AQ_HEAD_BATCH,
    OPT_HELP,
};

static int fp_parse_args(int argc, char **argv, struct fp_opts *o)
{
    static const struct option longopts[] = {
        {"server", no_argument, NULL, OPT_SERVER},
        {"client", no_argument, NULL, OPT_CLIENT},
        {"model", no_argument, NULL, OPT_MODEL},
        {"id", required_argument, NULL, OPT_ID},
        {"clients", required_argument, NULL, OPT_CLIENTS},
        {"name", required_argument, NULL, OPT_NAME},
        {"dist", required_argument, NULL, OPT_DIST},
        {"max-size", required_argument, NULL, OPT_MAX_SIZE},
        {"scale", required_argument, NULL, OPT_SCALE},
        {"bins", required_argument, NULL, OPT_BINS},
        {"queues", required_argument, NULL, OPT_QUEUES},
        {"messages", required_argument, NULL, OPT_MESSAGES},
        {"epoch", required_argument, NULL, OPT_EPOCH},
        {"warmup-epochs", required_argument, NULL, OPT_WARMUP},
        {"rate", required_argument, NULL, OPT_RATE},
        {"burst", required_argument, NULL, OPT_BURST},
        {"line-rate", required_argument, NULL, OPT_LINE_RATE},
        {"alloc-latency-us", required_argument, NULL, OPT_ALLOC},
        {"small-rate", required_argument, NULL, OPT_SMALL_RATE},
        {"srq-depth", required_argument, NULL, OPT_SRQ_DEPTH},
        {"sq-depth", required_argument, NULL, OPT_SQ_DEPTH},
        {"seed", required_argument, NULL, OPT_SEED},
        {"mtu", required_argument, NULL, OPT_MTU},
        {"aq-region", required_argument, NULL, OPT_AQ_REGION},
        {"aq-chunk", required_argument, NULL, OPT_AQ_CHUNK},
        {"aq-initial-chunks", required_argument, NULL, OPT_AQ_INITIAL},
        {"aq-head-batch", required_argument, NULL, OPT_AQ_HEAD_BATCH},
        {"help", no_argument, NULL, OPT_HELP},
        {NULL, 0, NULL, 0},
    };
    const char *prog = argc > 0 && argv[0] ? argv[0] : "footprint";
    bool have_id = false;
    double d;
    memset(o, 0, sizeof(*o));
    snprintf(o->name, sizeof(o->name), "footprint");
    snprintf(o->dist, sizeof(o->dist), "memcached"); /* Figure 2 */
    o->clients = 1;
    o->scale = 1.0;
    o->bins = FP_BINS_SINGLE;
    o->queues = 1;
    o->messages = 20000;
    o->epoch = 2048;           /* Section 5.1.1: "every 2,048 messages, called epochs" */
    o->warmup_epochs = 0;      /* 0 = the first half of the epochs */
    o->rate = 2e6;             /* estimate: below one server thread's capacity (docs) */
    o->line_rate = 56e9;       /* Table 4: 56 Gb/s (ConnectX-3 FDR) */
    o->alloc_latency_s = 1e-3; /* Section 5.2.1: 1 ms */
    o->small_rate = 137e6;     /* Section 4.1: 137 M msg/s at 8 B [23] */
    o->srq_depth = 512;        /* estimate: > the outstanding messages at the default rate */
    o->sq_depth = 128;         /* perftest's tx-depth */
    o->seed = 1;
    /* the append queue: a 1 GiB virtual region (reserved, not committed:
     * Section 3.2 "virtual address reservations have little cost") so that
     * a run never wraps; 8 MiB chunks = the reserve pool of 56 Gb/s x 1 ms
     * (7 MB) rounded up, as 3.2.1 sizes an allocation ("a chunk as large as
     * the active buffer and reserve pool together"); two committed at
     * create so the first watermark crossing does not stall. */
    o->aq_region = 1ull << 30;
    o->aq_chunk = 8ull << 20;
    o->aq_initial = 2;
    /* estimate: a head write is an MMIO (300 ns of host.cpu.post_send); one
     * per 32 messages costs < 10 ns each and holds < 32 x 231 B back */
    o->aq_head_batch = 32;

    optind = 0; /* GNU getopt: full re-initialisation for each instance */
    opterr = 0;
    for (;;) {
        int c = getopt_long(argc, argv, "", longopts, NULL);
        if (c == -1)
            break;
        const char *a = optarg;
        bool ok = true;
        switch (c) {
        case OPT_SERVER:
            o->role = RC_CONN_ROLE_SERVER;
            break;
        case OPT_CLIENT:
            o->role = RC_CONN_ROLE_CLIENT;
            break;
        case OPT_MODEL:
            o->model = true;
            break;
        case OPT_ID:
            ok = rc_conn_parse_uint(a, 0, FP_MAX_CLIENTS - 1, &o->id);
            have_id = true;
            break;
        case OPT_CLIENTS:
            ok = rc_conn_parse_uint(a, 1, FP_MAX_CLIENTS, &o->clients);
            break;
        case OPT_NAME:
            ok = strlen(a) < sizeof(o->name);
            if (ok)
                snprintf(o->name, sizeof(o->name), "%s", a);
            break;
        case OPT_DIST:
            ok = strlen(a) < sizeof(o->dist);
            if (ok)
                snprintf(o->dist, sizeof(o->dist), "%s", a);
            break;
        case OPT_MAX_SIZE:
            ok = rc_conn_parse_uint(a, 0, UINT32_MAX, &o->max_size); /* 0 = none */
            break;
        case OPT_SCALE:
            ok = fp_parse_double(a, 1e-6, &o->scale) && o->scale <= 1e6;
            break;
        case OPT_BINS:
            if (strcmp(a, "single") == 0) {
                o->bins = FP_BINS_SINGLE;
                o->queues = 1;
            } else if (strncmp(a, "equi:", 5) == 0) {
                o->bins = FP_BINS_EQUI;
                ok = rc_conn_parse_uint(a + 5, 1, FP_MAX_QUEUES, &o->queues);
            } else if (strcmp(a, "rima") == 0) {
                o->bins = FP_BINS_RIMA;
                o->queues = 1;
            } else if (strncmp(a, "slab-bytes:", 11) == 0) {
                o->bins = FP_BINS_SLAB_BYTES;
                ok = rc_conn_parse_uint(a + 11, 1, WL_SLAB_MAX_CLASSES, &o->queues);
            } else if (strncmp(a, "slab:", 5) == 0) {
                o->bins = FP_BINS_SLAB;
                ok = rc_conn_parse_uint(a + 5, 1, WL_SLAB_MAX_CLASSES, &o->queues);
            } else {
                ok = false;
            }
            break;
        case OPT_QUEUES:
            ok = rc_conn_parse_uint(a, 1, FP_MAX_QUEUES, &o->queues);
            break;
        case OPT_MESSAGES:
            ok = rc_conn_parse_uint(a, 1, 1ull << 32, &o->messages);
            break;
        case OPT_EPOCH:
            ok = rc_conn_parse_uint(a, 1, 1ull << 32, &o->epoch);
            break;
        case OPT_WARMUP:
            ok = rc_conn_parse_uint(a, 0, 1ull << 32, &o->warmup_epochs);
            break;
        case OPT_RATE:
            ok = fp_parse_double(a, 1.0, &o->rate);
            break;
        case OPT_BURST:
            ok = rc_conn_parse_uint(a, 0, 1u << 20, &o->burst);
            break;
        case OPT_LINE_RATE:
            ok = fp_parse_double(a, 1e6, &o->line_rate);
            break;
        case OPT_ALLOC:
            ok = fp_parse_double(a, 0.0, &d);
            o->alloc_latency_s = d * 1e-6;
            break;
        case OPT_SMALL_RATE:
            ok = fp_parse_double(a, 1.0, &o->small_rate);
            break;
        case OPT_SRQ_DEPTH:
            ok = rc_conn_parse_uint(a, 1, 1u << 20, &o->srq_depth);
            break;
        case OPT_SQ_DEPTH:
            ok = rc_conn_parse_uint(a, 1, 1u << 16, &o->sq_depth);
            break;
        case OPT_SEED:
            ok = rc_conn_parse_uint(a, 0, UINT64_MAX, &o->seed);
            break;
        case OPT_MTU:
            ok = rc_conn_parse_uint(a, 256, 4096, &o->mtu);
            break;
        case OPT_AQ_REGION:
            ok = rc_conn_parse_size(a, &o->aq_region) && o->aq_region >= 4096 &&
                 o->aq_region % 4096 == 0;
            break;
        case OPT_AQ_CHUNK:
            ok = rc_conn_parse_size(a, &o->aq_chunk) && o->aq_chunk >= 4096 &&
                 o->aq_chunk % 4096 == 0;
            break;
        case OPT_AQ_INITIAL:
            ok = rc_conn_parse_uint(a, 1, 1u << 20, &o->aq_initial);
            break;
        case OPT_AQ_HEAD_BATCH:
            ok = rc_conn_parse_uint(a, 1, 1u << 20, &o->aq_head_batch);
            break;
        case OPT_HELP:
            fp_usage(prog);
            return 1;
        default:
            fprintf(stderr, "%s: unknown option '%s'\n", prog, argv[optind - 1]);
            fp_usage(prog);
            return 2;
        }
        if (!ok) {
            fprintf(stderr, "%s: bad value '%s' for --%s\n", prog, a ? a : "",
                    longopts[c - OPT_SERVER].name);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "%s: unexpected argument '%s'\n", prog, argv[optind]);
        return 2;
    }
    if (!o->model && o->role == RC_CONN_ROLE_NONE) {
        fprintf(stderr, "%s: give --server, --client --id=I or --model\n", prog);
        return 2;
    }
    if (o->role == RC_CONN_ROLE_CLIENT && (!have_id || o->id >= o->clients)) {
        fprintf(stderr, "%s: a client needs --id=0..%" PRIu64 "\n", prog, o->clients - 1);
        return 2;
    }
    if (o->aq_region % o->aq_chunk || o->aq_initial > o->aq_region / o->aq_chunk) {
        fprintf(stderr,
                "%s: --aq-region must be a multiple of --aq-chunk and hold the initial "
                "chunks\n",
                prog);
        return 2;
    }
    if (o->burst && o->rate / (double)o->clients >= o->line_rate / 8.0) {
        fprintf(stderr, "%s: --rate too high for bursts at --line-rate\n", prog);
        return 2;
    }
    return 0;
}

static uint32_t fp_opts_hash(const struct fp_opts *o)
{
    uint64_t w[16] = {o->clients,
                      o->max_size,
                      (uint64_t)(o->scale * 1e6),
                      o->bins,
                      o->queues,
                      o->messages,
                      (uint64_t)o->rate,
                      o->burst,
                      o->seed,
                      o->mtu,
                      o->sq_depth};
    uint64_t h = 1469598103934665603ull;
    for (const char *p = o->dist; *p; p++)
        h = (h ^ (uint8_t)*p) * 1099511628211ull;
    w[11] = h;
    return rc_conn_hash_words(w, 12);
}

/* The distribution and the bins, the same on every side. */
static int fp_setup_bins(struct fp *fp, uint64_t queues)
{
    char err[256];
    if (wl_dist_parse(&fp->dist, fp->o.dist, fp->o.seed * 1000003u + fp->o.id, err, sizeof err)) {
        fprintf(stderr, "%s: --dist: %s\n", fp->prog, err);
        return 2;
    }
    wl_dist_set_transform(&fp->dist, fp->o.scale, (uint32_t)fp->o.max_size);
    free(fp->bins);
    fp->bins = calloc(queues, sizeof *fp->bins);
    if (!fp->bins)
        return 1;
    switch (fp->o.bins) {
    case FP_BINS_SINGLE:
    case FP_BINS_RIMA: /* one queue; the bin only gives the range */
        fp->nbins = wl_bins_equispaced(&fp->dist, 1, fp->bins, 1);
        break;
    case FP_BINS_EQUI:
        fp->nbins = wl_bins_equispaced(&fp->dist, queues, fp->bins, queues);
        break;
    case FP_BINS_SLAB:
        fp->nbins = wl_bins_slab(&fp->dist, queues, fp->bins, queues);
        break;
    case FP_BINS_SLAB_BYTES:
        fp->nbins = wl_bins_slab_balanced(&fp->dist, queues, WL_BALANCE_BYTES, fp->bins, queues);
        break;
    }
    if (fp->nbins == 0) {
        fprintf(stderr, "%s: cannot make %" PRIu64 " bins of this distribution\n", fp->prog,
                queues);
        return 2;
    }
    fp_model_default(&fp->model, fp->o.line_rate, wl_dist_max(&fp->dist));
    fp->model.alloc_latency_s = fp->o.alloc_latency_s;
    fp->model.small_msgrate_ps = fp->o.small_rate;
    return 0;
}

/* ------------------------------------------------------------ --model */

static int fp_model_main(struct fp *fp)
{
    uint64_t maxq = fp->o.queues;
    for (uint64_t q = 1; q <= maxq; q++) {
        int rc = fp_setup_bins(fp, q);
        if (rc)
            return rc;
        if (fp->o.bins == FP_BINS_SINGLE && q > 1)
            break;
        double srq = fp_srq_reserve_total_bytes(&fp->model, fp->bins, fp->nbins);
        double largest = 0;
        for (size_t b = 0; b < fp->nbins; b++)
            largest = fmax(largest, fp_srq_reserve_bytes(&fp->model, fp->bins[b].lo_bytes,
                                                         fp->bins[b].buf_bytes));
        struct host_kv kv[] = {
            {"queues", (double)fp->nbins},
            {"srq_reserve_bytes", srq},
            {"rima_reserve_bytes", fp_rima_reserve_bytes(&fp->model)},
            {"largest_bin_reserve_bytes", largest},
            {"max_size_bytes", wl_dist_max(&fp->dist)},
            {"mean_size_bytes", wl_dist_mean(&fp->dist)},
        };
        host_report("footprint_model", kv, sizeof kv / sizeof kv[0]);
    }
    return 0;
}

/* ------------------------------------------------------------ connection */

static uint32_t fp_psn(uint32_t qpn, enum rc_conn_role role)
{
    return (qpn * 2654435761u + (uint32_t)role) & 0xffffffu;
}

static int fp_open(struct fp *fp, uint32_t cqe)
{
    struct rc_conn *c = &fp->conn;
    rc_conn_init(c, fp->prog, fp->o.role, fp->o.name);
    if (rc_conn_open_device(c) || rc_conn_query(c, &fp->dev, (uint32_t)fp->o.mtu))
        return 1;
    c->pd = ibv_alloc_pd(c->ctx);
    if (!c->pd) {
        fprintf(stderr, "%s: ibv_alloc_pd: %s\n", fp->prog, strerror(errno));
        return 1;
    }
    if (fp->dev.max_cqe > 0 && cqe > (uint32_t)fp->dev.max_cqe)
        cqe = (uint32_t)fp->dev.max_cqe;
    fp->cq_cap = cqe;
    fp->cq = ibv_create_cq(c->ctx, (int)cqe, NULL, NULL, 0);
    if (!fp->cq) {
        fprintf(stderr, "%s: ibv_create_cq(%u): %s\n", fp->prog, cqe, strerror(errno));
        return 1;
    }
    fp->access = IBV_ACCESS_LOCAL_WRITE;
    return 0;
}

static struct ibv_qp *fp_create_qp(struct fp *fp, struct ibv_srq *srq, uint32_t send_wr)
{
    struct ibv_qp_init_attr ia = {
        .send_cq = fp->cq,
        .recv_cq = fp->cq,
        .srq = srq,
        .cap = {.max_send_wr = send_wr,
                .max_recv_wr = srq ? 0 : 1,
                .max_send_sge = 1,
                .max_recv_sge = 1},
        .qp_type = IBV_QPT_RC,
    };
    struct ibv_qp *qp = ibv_create_qp(fp->conn.pd, &ia);
    if (!qp)
        fprintf(stderr, "%s: ibv_create_qp: %s\n", fp->prog, strerror(errno));
    return qp;
}

/* Connection blob: hash u32 @0, status u8 @4, lid u16 @6, gid[16] @8,
 * AQ number u32 @24 (server, rima), M x qpn u32 @28. */
static size_t fp_blob_bytes(const struct fp *fp)
{
    return 28 + 4 * fp->nbins;
}

static void fp_blob_put(const struct fp *fp, uint8_t *w, struct ibv_qp **qps, int status)
{
    rc_conn_put_le(w, fp_opts_hash(&fp->o), 4);
    w[4] = (uint8_t)status;
    rc_conn_put_le(w + 6, fp->conn.port.lid, 2);
    memcpy(w + 8, fp->conn.gid.raw, 16);
    rc_conn_put_le(w + 24, fp->aq ? fp->aq->aq_num : 0, 4);
    for (size_t b = 0; b < fp->nbins; b++)
        rc_conn_put_le(w + 28 + 4 * b, qps && qps[b] ? qps[b]->qp_num : 0, 4);
}

/* Connect qps[0..M) to the peer's QPNs in blob w. */
static int fp_connect(struct fp *fp, struct ibv_qp **qps, const uint8_t *w,
                      enum rc_conn_role peer_role)
{
    struct rc_conn *c = &fp->conn;
    memcpy(c->peer.gid, w + 8, 16);
    c->peer.lid = (uint16_t)rc_conn_get_le(w + 6, 2);
    int rc = 0;
    for (size_t b = 0; b < fp->nbins && rc == 0; b++) {
        c->qp = qps[b];
        c->local.psn = fp_psn(qps[b]->qp_num, fp->o.role);
        c->peer.qpn = (uint32_t)rc_conn_get_le(w + 28 + 4 * b, 4);
        c->peer.psn = fp_psn(c->peer.qpn, peer_role);
        rc = rc_conn_connect(c, fp->access, 1) ? 1 : 0;
    }
    c->qp = NULL;
    return rc;
}

/* 0, or 1 after naming the failure on stderr (the caller's exit status). */
static int fp_oob_put(struct fp *fp, const char *key, const void *buf, size_t len)
{
    return rc_conn_oob_put(fp->prog, key, buf, len) != 0;
}

static int fp_oob_get(struct fp *fp, const char *key, void *buf, size_t len)
{
    return rc_conn_oob_get(fp->prog, key, buf, len) != 0;
}

/* ------------------------------------------------------------ server */

static int fp_cmp_qpmap(const void *a, const void *b)
{
    const struct fp_qpmap *x = a, *y = b;
    return (x->qpn > y->qpn) - (x->qpn < y->qpn);
}

static const struct fp_qpmap *fp_find_qp(const struct fp *fp, uint32_t qpn)
{
    struct fp_qpmap key = {qpn, 0, 0};
    return bsearch(&key, fp->qpmap, fp->nqps, sizeof key, fp_cmp_qpmap);
}

static int fp_post_srq(struct fp *fp, uint32_t b, uint32_t slot)
{
    struct ibv_sge sge = {
        (uint64_t)(uintptr_t)(fp->srq_buf[b] + (size_t)slot * fp->bins[b].buf_bytes),
        fp->bins[b].buf_bytes, fp->srq_mr[b]->lkey};
    struct ibv_recv_wr wr = {.wr_id = ((uint64_t)b << 32) | slot, .sg_list = &sge, .num_sge = 1};
    struct ibv_recv_wr *bad;
    int rc = ibv_post_srq_recv(fp->srqs[b], &wr, &bad);
    if (rc) {
        fprintf(stderr, "%s: ibv_post_srq_recv (SRQ %u): %s\n", fp->prog, b, strerror(rc));
        return 1;
    }
    fp->free_bufs[b]++;
    return 0;
}

/* SRQ b gets enough buffers for its share of --srq-depth with a 4x margin
 * plus 64 (at most --srq-depth): buffers are virtual memory the
 * footprint does not count, only the outstanding ones are. */
static uint32_t fp_bin_depth(const struct fp *fp, size_t b)
{
    double want = ceil(4.0 * fp->bins[b].prob * (double)fp->o.srq_depth) + 64;
    if (want > (double)fp->o.srq_depth)
        want = (double)fp->o.srq_depth;
    if (fp->dev.max_srq_wr > 0 && want > fp->dev.max_srq_wr)
        want = fp->dev.max_srq_wr;
    return (uint32_t)want;
}

/* --bins=rima: one append queue, K QPs without receives, a FIFO that
 * grows, and a replica of every client's size stream (one QP per client
 * keeps its order, so every length is checked exactly). */
static int fp_server_setup_aq(struct fp *fp)
{
    size_t K = fp->o.clients;
    char err[128];
    fp->ring_cap = 4096;
    if (fp_open(fp, 65536))
        return 1;
    struct ibv_aq_init_attr ia = {.cq = fp->cq,
                                  .attr = {.region_bytes = fp->o.aq_region,
                                           .chunk_bytes = fp->o.aq_chunk,
                                           .initial_chunks = (uint32_t)fp->o.aq_initial}};
    fp->aq = ibv_create_aq(fp->conn.pd, &ia);
    if (!fp->aq) {
        fprintf(stderr, "%s: ibv_create_aq: %s\n", fp->prog, strerror(errno));
        return 1;
    }
    fp->app = pages_alloc(wl_dist_max(&fp->dist));
    fp->ring = calloc(fp->ring_cap, sizeof *fp->ring);
    fp->done_cap = 4096;
    fp->done = calloc(fp->done_cap, sizeof *fp->done);
    fp->replica = calloc(K, sizeof *fp->replica);
    fp->nqps = (uint32_t)K;
    fp->qps = calloc(K, sizeof *fp->qps);
    fp->qpmap = calloc(K, sizeof *fp->qpmap);
    fp->expect_seq = calloc(K, sizeof *fp->expect_seq);
    fp->out_bin = calloc(1, sizeof *fp->out_bin);
    fp->bin_msgs = calloc(1, sizeof *fp->bin_msgs);
    fp->bin_out_sum = calloc(1, sizeof *fp->bin_out_sum);
    fp->srq_depth = calloc(1, sizeof *fp->srq_depth);
    if (!fp->app || !fp->ring || !fp->done || !fp->replica || !fp->qps || !fp->qpmap ||
        !fp->expect_seq || !fp->out_bin || !fp->bin_msgs || !fp->bin_out_sum || !fp->srq_depth)
        return 1;
    for (size_t i = 0; i < K; i++) {
        if (wl_dist_parse(&fp->replica[i], fp->o.dist, fp->o.seed * 1000003u + i, err, sizeof err))
            return 2;
        wl_dist_set_transform(&fp->replica[i], fp->o.scale, (uint32_t)fp->o.max_size);
        if (!(fp->qps[i] = fp_create_qp(fp, NULL, 1)))
            return 1;
        fp->qpmap[i] = (struct fp_qpmap){fp->qps[i]->qp_num, (uint32_t)i, 0};
    }
    return 0;
}

static int fp_server_setup(struct fp *fp)
{
    if (fp->o.bins == FP_BINS_RIMA)
        return fp_server_setup_aq(fp);
    size_t M = fp->nbins, K = fp->o.clients;
    uint64_t total_bufs = 0;
    fp->srqs = calloc(M, sizeof *fp->srqs);
    fp->srq_buf = calloc(M, sizeof *fp->srq_buf);
    fp->srq_mr = calloc(M, sizeof *fp->srq_mr);
    fp->srq_depth = calloc(M, sizeof *fp->srq_depth);
    fp->free_bufs = calloc(M, sizeof *fp->free_bufs);
    fp->out_bin = calloc(M, sizeof *fp->out_bin);
    fp->bin_msgs = calloc(M, sizeof *fp->bin_msgs);
    fp->bin_out_sum = calloc(M, sizeof *fp->bin_out_sum);
    if (!fp->srqs || !fp->srq_buf || !fp->srq_mr || !fp->srq_depth || !fp->free_bufs ||
        !fp->out_bin || !fp->bin_msgs || !fp->bin_out_sum)
        return 1;
    for (size_t b = 0; b < M; b++)
        total_bufs += fp->srq_depth[b] = fp_bin_depth(fp, b);
    if (fp_open(fp, (uint32_t)(total_bufs + 64)))
        return 1;
    uint32_t maxbuf = 0;
    for (size_t b = 0; b < M; b++) {
        struct ibv_srq_init_attr sa = {.attr = {.max_wr = fp->srq_depth[b], .max_sge = 1}};
        fp->srqs[b] = ibv_create_srq(fp->conn.pd, &sa);
        if (!fp->srqs[b]) {
            fprintf(stderr, "%s: ibv_create_srq #%zu (%u WRs): %s\n", fp->prog, b, fp->srq_depth[b],
                    strerror(errno));
            return 1;
        }
        size_t bytes = (size_t)fp->srq_depth[b] * fp->bins[b].buf_bytes;
        /* only the bytes messages land in become resident */
        fp->srq_buf[b] = pages_map(bytes); /* mostly never written: never backed */
        if (!fp->srq_buf[b]) {
            fprintf(stderr, "%s: no memory for SRQ %zu (%zu bytes)\n", fp->prog, b, bytes);
            return 1;
        }
        fp->srq_mr[b] = ibv_reg_mr(fp->conn.pd, fp->srq_buf[b], bytes, IBV_ACCESS_LOCAL_WRITE);
        if (!fp->srq_mr[b]) {
            fprintf(stderr, "%s: ibv_reg_mr (SRQ %zu): %s\n", fp->prog, b, strerror(errno));
            return 1;
        }
        for (uint32_t s = 0; s < fp->srq_depth[b]; s++)
            if (fp_post_srq(fp, (uint32_t)b, s))
                return 1;
        if (fp->bins[b].buf_bytes > maxbuf)
            maxbuf = fp->bins[b].buf_bytes;
    }
    fp->app = pages_alloc(maxbuf);
    fp->ring_cap = total_bufs;
    fp->ring = calloc(fp->ring_cap, sizeof *fp->ring);
    fp->nqps = (uint32_t)(K * M);
    fp->qps = calloc(fp->nqps, sizeof *fp->qps);
    fp->qpmap = calloc(fp->nqps, sizeof *fp->qpmap);
    fp->expect_seq = calloc(fp->nqps, sizeof *fp->expect_seq);
    if (!fp->app || !fp->ring || !fp->qps || !fp->qpmap || !fp->expect_seq)
        return 1;
    for (size_t i = 0; i < K; i++)
        for (size_t b = 0; b < M; b++) {
            struct ibv_qp *qp = fp_create_qp(fp, fp->srqs[b], 1);
            if (!qp)
                return 1;
            fp->qps[i * M + b] = qp;
            fp->qpmap[i * M + b] = (struct fp_qpmap){qp->qp_num, (uint32_t)i, (uint32_t)b};
        }
    return 0;
}

static int fp_server_exchange(struct fp *fp, int status)
{
    size_t M = fp->nbins, len = fp_blob_bytes(fp);
    uint8_t *w = malloc(len), *cw = malloc(len);
    char key[FP_KEY_MAX];
    int rc = 0;
    if (!w || !cw) {
        free(w);
        free(cw);
        return 1;
    }
    for (uint64_t i = 0; i < fp->o.clients; i++) {
        snprintf(key, sizeof key, "%s/client/%" PRIu64, fp->o.name, i);
        if (fp_oob_get(fp, key, cw, len)) {
            rc = 1;
            break;
        }
        int st = status;
        if (!st && (uint32_t)rc_conn_get_le(cw, 4) != fp_opts_hash(&fp->o)) {
            fprintf(stderr, "%s: client %" PRIu64 " was given different options\n", fp->prog, i);
            st = 2;
        }
        if (!st && cw[4])
            st = cw[4];
        if (!st)
            st = fp_connect(fp, fp->qps + i * M, cw, RC_CONN_ROLE_CLIENT);
        fp_blob_put(fp, w, fp->qps ? fp->qps + i * M : NULL, st);
        snprintf(key, sizeof key, "%s/server/%" PRIu64, fp->o.name, i);
        if (fp_oob_put(fp, key, w, len)) {
            rc = 1;
            break;
        }
        if (st && !rc)
            rc = st;
    }
    free(w);
    free(cw);
    if (rc == 0 && fp->qpmap)
        qsort(fp->qpmap, fp->nqps, sizeof *fp->qpmap, fp_cmp_qpmap);
    return rc;
}

/* One append completion into the FIFO (the FIFO grows: an append queue
 * has no buffer count to bound it). */
static int fp_drain_append(struct fp *fp, const struct ibv_wc *wc)
{
    if (wc->status != IBV_WC_SUCCESS || wc->opcode != IBV_WC_RECV_APPEND) {
        fprintf(stderr, "%s: completion %s (opcode %d)\n", fp->prog, ibv_wc_status_str(wc->status),
                (int)wc->opcode);
        return 1;
    }
    const struct fp_qpmap *q = fp_find_qp(fp, wc->qp_num);
    if (!q) {
        fprintf(stderr, "VERIFY FAILED: %s: append on unknown QP %u\n", fp->prog, wc->qp_num);
        return 2;
    }
    uint32_t want = wl_dist_sample(&fp->replica[q->client]);
    uint64_t off = wc->wr_id;
    if (wc->byte_len != want || off + wc->byte_len > fp->aq->region_bytes) {
        fprintf(stderr,
                "VERIFY FAILED: %s: client %u message %u: %u bytes at offset %" PRIu64
                ", expected %u bytes\n",
                fp->prog, q->client, fp->expect_seq[q->client], wc->byte_len, off, want);
        return 2;
    }
    if (off < fp->aq_head) {
        fprintf(stderr, "%s: the append queue wrapped; give a larger --aq-region\n", fp->prog);
        return 1;
    }
    fp->expect_seq[q->client]++;
    if (fp->ring_count == fp->ring_cap) {
        struct fp_item *r = calloc(fp->ring_cap * 2, sizeof *r);
        if (!r)
            return 1;
        for (size_t i = 0; i < fp->ring_count; i++)
            r[i] = fp->ring[(fp->ring_head + i) % fp->ring_cap];
        free(fp->ring);
        fp->ring = r;
        fp->ring_head = 0;
        fp->ring_cap *= 2;
    }
    fp->ring[(fp->ring_head + fp->ring_count++) % fp->ring_cap] =
        (struct fp_item){0, 0, wc->byte_len, q->client, off};
    fp->out_bin[0]++;
    fp->out_bytes += wc->byte_len;
    return 0;
}

/* A processed message's space goes back in queue order: the head moves over
 * every processed extent that starts at it (a message placed earlier whose
 * completion has not come yet holds the head back). */
static int fp_release(struct fp *fp, uint64_t off, uint64_t len)
{
    if (fp->ndone == fp->done_cap) {
        struct fp_extent *d = realloc(fp->done, 2 * fp->done_cap * sizeof *d);
        if (!d)
            return 1;
        fp->done = d;
        fp->done_cap *= 2;
    }
    fp->done[fp->ndone++] = (struct fp_extent){off, len};
    uint64_t head = fp->aq_head;
    for (bool moved = true; moved;) {
        moved = false;
        for (size_t i = 0; i < fp->ndone; i++)
            if (fp->done[i].off == head) {
                head += fp->done[i].len;
                fp->done[i] = fp->done[--fp->ndone];
                moved = true;
                break;
            }
    }
    if (head == fp->aq_head)
        return 0;
    fp->aq_head = head;
    /* one head write (an MMIO, host.cpu.post_send) per --aq-head-batch
     * messages, and whenever the FIFO is empty */
    if (++fp->head_unwritten < fp->o.aq_head_batch && fp->ring_count)
        return 0;
    fp->head_unwritten = 0;
    struct ibv_aq_attr a = {.head = head};
    if (ibv_modify_aq(fp->aq, &a, IBV_AQ_HEAD)) {
        fprintf(stderr, "%s: ibv_modify_aq(head %" PRIu64 "): %s\n", fp->prog, head,
                strerror(errno));
        return 1;
    }
    return 0;
}

/* Move every completion into the FIFO. */
static int fp_drain(struct fp *fp)
{
    struct ibv_wc wc[FP_POLL_BATCH];
    for (;;) {
        int n = ibv_poll_cq(fp->cq, FP_POLL_BATCH, wc);
        if (n < 0) {
            fprintf(stderr, "%s: ibv_poll_cq failed\n", fp->prog);
            return 1;
        }
        for (int k = 0; k < n; k++) {
            if (fp->aq) {
                int rc = fp_drain_append(fp, &wc[k]);
                if (rc)
                    return rc;
                continue;
            }
            if (wc[k].status != IBV_WC_SUCCESS || wc[k].opcode != IBV_WC_RECV) {
                fprintf(stderr, "%s: completion %s (opcode %d)\n", fp->prog,
                        ibv_wc_status_str(wc[k].status), (int)wc[k].opcode);
                return 1;
            }
            uint32_t b = (uint32_t)(wc[k].wr_id >> 32), slot = (uint32_t)wc[k].wr_id;
            const struct fp_qpmap *q = fp_find_qp(fp, wc[k].qp_num);
            uint32_t len = wc[k].byte_len;
            if (!q || b >= fp->nbins || q->bin != b || len < fp->bins[b].lo_bytes ||
                len > fp->bins[b].hi_bytes || !(wc[k].wc_flags & IBV_WC_WITH_IMM)) {
                fprintf(stderr,
                        "VERIFY FAILED: %s: message of %u bytes on QP %u in SRQ %u (range "
                        "%u..%u)\n",
                        fp->prog, len, wc[k].qp_num, b, b < fp->nbins ? fp->bins[b].lo_bytes : 0,
                        b < fp->nbins ? fp->bins[b].hi_bytes : 0);
                return 2;
            }
            uint32_t imm = ntohl(wc[k].imm_data);
            size_t qi = (size_t)q->client * fp->nbins + b;
            uint32_t want = fp->expect_seq[qi]++ & ((1u << FP_SEQ_BITS) - 1);
            if (imm >> FP_SEQ_BITS != q->client || (imm & ((1u << FP_SEQ_BITS) - 1)) != want) {
                fprintf(stderr,
                        "VERIFY FAILED: %s: client %u bin %u: immediate %08x, expected "
                        "sequence %u\n",
                        fp->prog, q->client, b, imm, want);
                return 2;
            }
            if (fp->ring_count == fp->ring_cap) {
                fprintf(stderr, "%s: FIFO overflow (more completions than buffers)\n", fp->prog);
                return 1;
            }
            fp->ring[(fp->ring_head + fp->ring_count++) % fp->ring_cap] =
                (struct fp_item){b, slot, len, q->client, 0};
            fp->out_bin[b]++;
            fp->out_bytes += len;
            if (fp->free_bufs[b]-- == 1)
                fp->starved++;
        }
        if (n < FP_POLL_BATCH)
            return 0;
    }
}

struct fp_epoch_acc {
    uint64_t epochs, steady;
    double out_sum, srq_active_sum, rima_active_sum, rate_sum, mean_out_sum;
    double rima_sw_sum, committed_sum;
};

static double fp_srq_active_now(const struct fp *fp)
{
    double a = 0;
    for (size_t b = 0; b < fp->nbins; b++)
        a += (double)fp->out_bin[b] * fp->bins[b].buf_bytes;
    return a;
}

static int fp_server_run(struct fp *fp)
{
    uint64_t total = fp->o.clients * fp->o.messages, done = 0, bytes = 0;
    uint64_t nepochs = total / fp->o.epoch;
    uint64_t warm = fp->o.warmup_epochs ? fp->o.warmup_epochs : nepochs / 2;
    double srq_reserve = fp_srq_reserve_total_bytes(&fp->model, fp->bins, fp->nbins);
    double rima_reserve = fp_rima_reserve_bytes(&fp->model);
    struct fp_epoch_acc acc = {0};
    double epoch_out_sum = 0;
    uint64_t t_epoch = 0, t_first = 0;
    while (done < total) {
        int rc = fp_drain(fp);
        if (rc)
            return rc;
        if (fp->ring_count == 0)
            continue; /* ibv_poll_cq is the spin */
        if (!t_first)
            t_epoch = t_first = host_now_ns();
        struct fp_item it = fp->ring[fp->ring_head];
        /* outstanding including this one (it holds its buffer) */
        epoch_out_sum += (double)fp->ring_count;
        for (size_t b = 0; b < fp->nbins; b++)
            fp->bin_out_sum[b] += (double)fp->out_bin[b];
        const uint8_t *src =
            fp->aq ? fp->aq->buf + it.off
                   : fp->srq_buf[it.bin] + (size_t)it.slot * fp->bins[it.bin].buf_bytes;
        host_memcpy(fp->app, src, it.len);
        if (fp->app[0] != fp_pattern(it.client, 0) ||
            fp->app[it.len - 1] != fp_pattern(it.client, it.len - 1)) {
            fprintf(stderr, "VERIFY FAILED: %s: client %u, %u bytes: data do not match\n", fp->prog,
                    it.client, it.len);
            return 2;
        }
        fp->ring_head = (fp->ring_head + 1) % fp->ring_cap;
        fp->ring_count--;
        fp->out_bin[it.bin]--;
        fp->out_bytes -= it.len;
        fp->bin_msgs[it.bin]++;
        bytes += it.len;
        if (fp->aq ? fp_release(fp, it.off, it.len) : fp_post_srq(fp, it.bin, it.slot))
            return 1;
        done++;
        if (done % fp->o.epoch == 0) {
            /* the footprint at the epoch's end: what is held now (drain
             * first so that arrived messages count) */
            if ((rc = fp_drain(fp)))
                return rc;
            uint64_t now = host_now_ns();
            double out = (double)fp->ring_count;
            double srq_active = fp_srq_active_now(fp);
            /* RIMA: the append queue's own count when this run uses one,
             * else the actual bytes of the outstanding messages */
            double rima_sw = (double)fp->out_bytes, rima_active = rima_sw, committed = 0;
            if (fp->aq) {
                struct ibv_aq_attr qa;
                if (ibv_query_aq(fp->aq, &qa)) {
                    fprintf(stderr, "%s: ibv_query_aq: %s\n", fp->prog, strerror(errno));
                    return 1;
                }
                rima_active = (double)qa.used_bytes;
                committed = (double)qa.committed_bytes;
            }
            double rate = now > t_epoch ? (double)fp->o.epoch * 1e3 / (double)(now - t_epoch) : 0;
            struct host_kv kv[] = {
                {"epoch", (double)acc.epochs},
                {"t_us", (double)(now - t_first) / 1e3},
                {"outstanding_msgs", out},
                {"outstanding_mean_msgs", epoch_out_sum / (double)fp->o.epoch},
                {"srq_active_bytes", srq_active},
                {"srq_reserve_bytes", srq_reserve},
                {"srq_total_bytes", srq_active + srq_reserve},
                {"rima_active_bytes", rima_active},
                {"rima_reserve_bytes", rima_reserve},
                {"rima_total_bytes", rima_active + rima_reserve},
                {"rima_active_sw_bytes", rima_sw},
                {"rima_committed_bytes", committed},
                {"aq", fp->aq ? 1.0 : 0.0},
                {"msg_rate_mps", rate},
            };
            host_report("footprint_epoch", kv, sizeof kv / sizeof kv[0]);
            if (acc.epochs >= warm) {
                acc.steady++;
                acc.out_sum += out;
                acc.mean_out_sum += epoch_out_sum / (double)fp->o.epoch;
                acc.srq_active_sum += srq_active;
                acc.rima_active_sum += rima_active;
                acc.rima_sw_sum += rima_sw;
                acc.committed_sum += committed;
                acc.rate_sum += rate;
            }
            acc.epochs++;
            epoch_out_sum = 0;
            t_epoch = now;
        }
    }
    double ns = acc.steady ? (double)acc.steady : 1.0;
    double out_mean = acc.mean_out_sum / ns;
    struct ibv_aq_attr qa = {0};
    if (fp->aq && ibv_query_aq(fp->aq, &qa)) {
        fprintf(stderr, "%s: ibv_query_aq: %s\n", fp->prog, strerror(errno));
        return 1;
    }
    struct host_kv kv[] = {
        {"queues", (double)fp->nbins},
        {"clients", (double)fp->o.clients},
        {"messages", (double)done},
        {"epochs", (double)acc.epochs},
        {"steady_epochs", (double)acc.steady},
        {"mean_size_bytes", done ? (double)bytes / (double)done : 0},
        {"max_size_bytes", wl_dist_max(&fp->dist)},
        {"outstanding_msgs", acc.out_sum / ns},
        {"outstanding_mean_msgs", out_mean},
        {"srq_active_bytes", acc.srq_active_sum / ns},
        {"srq_active_model_bytes", fp_srq_active_model_bytes(fp->bins, fp->nbins, out_mean)},
        {"srq_reserve_bytes", srq_reserve},
        {"srq_total_bytes", acc.srq_active_sum / ns + srq_reserve},
        {"rima_active_bytes", acc.rima_active_sum / ns},
        {"rima_reserve_bytes", rima_reserve},
        {"rima_total_bytes", acc.rima_active_sum / ns + rima_reserve},
        {"rima_active_sw_bytes", acc.rima_sw_sum / ns},
        {"rima_committed_bytes", acc.committed_sum / ns},
        {"aq", fp->aq ? 1.0 : 0.0},
        {"aq_peak_used_bytes", (double)qa.peak_used_bytes},
        {"aq_peak_committed_bytes", (double)qa.peak_committed_bytes},
        {"aq_watermark_irqs", (double)qa.watermark_irqs},
        {"aq_chunks_allocated", (double)qa.chunks_allocated},
        {"aq_rnr_naks", (double)qa.rnr_naks},
        {"msg_rate_mps", acc.rate_sum / ns},
        {"line_rate_gbps", fp->o.line_rate / 1e9},
        {"srq_starved", (double)fp->starved},
    };
    host_report("footprint", kv, sizeof kv / sizeof kv[0]);
    for (size_t b = 0; b < fp->nbins; b++) {
        struct host_kv bk[] = {
            {"bin", (double)b},
            {"lo_bytes", fp->bins[b].lo_bytes},
            {"hi_bytes", fp->bins[b].hi_bytes},
            {"buf_bytes", fp->bins[b].buf_bytes},
            {"prob", fp->bins[b].prob},
            {"messages", (double)fp->bin_msgs[b]},
            {"outstanding_mean_msgs", done ? fp->bin_out_sum[b] / (double)done : 0},
            {"reserve_bytes",
             fp_srq_reserve_bytes(&fp->model, fp->bins[b].lo_bytes, fp->bins[b].buf_bytes)},
            {"srq_depth", fp->srq_depth[b]},
        };
        host_report("footprint_bins", bk, sizeof bk / sizeof bk[0]);
    }
    return 0;
}

static int fp_server_main(struct fp *fp)
{
    int rc = fp_server_setup(fp);
    int st = fp_server_exchange(fp, rc);
    /* start: every client is connected (the stream does not queue up
     * behind the server's connection setup) */
    char key[FP_KEY_MAX];
    uint8_t go = (uint8_t)(rc ? rc : st);
    snprintf(key, sizeof key, "%s/go", fp->o.name);
    if (fp_oob_put(fp, key, &go, 1))
        return 1;
    if (rc || st)
        return rc ? rc : st;
    return fp_server_run(fp);
}

/* ------------------------------------------------------------ client */

static int fp_client_poll(struct fp *fp)
{
    struct ibv_wc wc[FP_POLL_BATCH];
    int n = ibv_poll_cq(fp->cq, FP_POLL_BATCH, wc);
    if (n < 0) {
        fprintf(stderr, "%s: ibv_poll_cq failed\n", fp->prog);
        return -1;
    }
    for (int k = 0; k < n; k++) {
        if (wc[k].status != IBV_WC_SUCCESS) {
            fprintf(stderr, "%s: send completion %s\n", fp->prog, ibv_wc_status_str(wc[k].status));
            return -1;
        }
        fp->inflight[wc[k].wr_id]--;
        fp->inflight_total--;
    }
    return n;
}

static int fp_client_main(struct fp *fp)
{
    size_t M = fp->nbins, len = fp_blob_bytes(fp);
    uint32_t maxsz = wl_dist_max(&fp->dist);
    int st = fp_open(fp, (uint32_t)(M * fp->o.sq_depth + 16));
    fp->nqps = (uint32_t)M;
    fp->qps = calloc(M, sizeof *fp->qps);
    fp->inflight = calloc(M, sizeof *fp->inflight);
    fp->seq = calloc(M, sizeof *fp->seq);
    fp->pattern = pages_alloc(maxsz);
    if (!fp->qps || !fp->inflight || !fp->seq || !fp->pattern)
        return 1;
    for (uint32_t j = 0; j < maxsz; j++)
        fp->pattern[j] = fp_pattern((uint32_t)fp->o.id, j);
    if (!st) {
        fp->pat_mr = ibv_reg_mr(fp->conn.pd, fp->pattern, maxsz, IBV_ACCESS_LOCAL_WRITE);
        if (!fp->pat_mr) {
            fprintf(stderr, "%s: ibv_reg_mr: %s\n", fp->prog, strerror(errno));
            st = 1;
        }
    }
    for (size_t b = 0; b < M && !st; b++)
        if (!(fp->qps[b] = fp_create_qp(fp, NULL, (uint32_t)fp->o.sq_depth)))
            st = 1;
    uint8_t *w = malloc(len);
    if (!w)
        return 1;
    char key[FP_KEY_MAX];
    fp_blob_put(fp, w, st ? NULL : fp->qps, st);
    snprintf(key, sizeof key, "%s/client/%" PRIu64, fp->o.name, fp->o.id);
    if (fp_oob_put(fp, key, w, len)) {
        free(w);
        return 1;
    }
    snprintf(key, sizeof key, "%s/server/%" PRIu64, fp->o.name, fp->o.id);
    if (fp_oob_get(fp, key, w, len)) {
        free(w);
        return 1;
    }
    if (!st && w[4]) {
        fprintf(stderr, "%s: the server failed to set up (status %d)\n", fp->prog, w[4]);
        st = w[4];
    }
    fp->aq_num = (uint32_t)rc_conn_get_le(w + 24, 4);
    if (!st)
        st = fp_connect(fp, fp->qps, w, RC_CONN_ROLE_SERVER);
    free(w);
    uint8_t go = 0;
    snprintf(key, sizeof key, "%s/go", fp->o.name);
    if (fp_oob_get(fp, key, &go, 1))
        return 1;
    if (st || go) {
        if (go && !st)
            fprintf(stderr, "%s: the server failed to set up (status %d)\n", fp->prog, go);
        return st ? st : go;
    }

    /* the stream: sizes and arrival gaps from this client's seeds */
    struct wl_arrival arr;
    double rate = fp->o.rate / (double)fp->o.clients;
    uint64_t aseed = fp->o.seed * 7919u + fp->o.id + 1;
    int ar = fp->o.burst ? wl_arrival_bursty(&arr, rate, fp->o.line_rate, (uint32_t)fp->o.burst,
                                             wl_dist_mean(&fp->dist), aseed)
                         : wl_arrival_poisson(&arr, rate, aseed);
    if (ar) {
        fprintf(stderr, "%s: bad arrival parameters\n", fp->prog);
        return 2;
    }
    double t_next = (double)host_now_ns();
    for (uint64_t k = 0; k < fp->o.messages; k++) {
        uint32_t size = wl_dist_sample(&fp->dist);
        size_t b = wl_bin_of(fp->bins, M, size);
        t_next += wl_arrival_next_gap_ns(&arr, size);
        for (;;) {
            if (fp_client_poll(fp) < 0)
                return 1;
            double now = (double)host_now_ns();
            /* room on the QP and in the CQ (every send is signaled) */
            bool room = fp->inflight[b] < fp->o.sq_depth && fp->inflight_total < fp->cq_cap;
            if (room && now >= t_next)
                break;
            if (room)
                host_compute((uint64_t)ceil(t_next - now));
        }
        struct ibv_sge sge = {(uint64_t)(uintptr_t)fp->pattern, size, fp->pat_mr->lkey};
        struct ibv_send_wr wr = {
            .wr_id = b,
            .sg_list = &sge,
            .num_sge = 1,
            .opcode = IBV_WR_SEND_WITH_IMM,
            .send_flags = IBV_SEND_SIGNALED,
            .imm_data = htonl(((uint32_t)fp->o.id << FP_SEQ_BITS) |
                              (fp->seq[b]++ & ((1u << FP_SEQ_BITS) - 1))),
        };
        if (fp->o.bins == FP_BINS_RIMA)
            ibv_wr_append(&wr, fp->aq_num);
        struct ibv_send_wr *bad;
        int rc = ibv_post_send(fp->qps[b], &wr, &bad);
        if (rc) {
            fprintf(stderr, "%s: ibv_post_send: %s\n", fp->prog, strerror(rc));
            return 1;
        }
        fp->inflight[b]++;
        fp->inflight_total++;
    }
    while (fp->inflight_total)
        if (fp_client_poll(fp) < 0)
            return 1;
    return 0;
}

/* ------------------------------------------------------------ main */

static void fp_close(struct fp *fp)
{
    for (uint32_t i = 0; fp->qps && i < fp->nqps; i++)
        if (fp->qps[i])
            ibv_destroy_qp(fp->qps[i]);
    for (size_t b = 0; fp->srqs && b < fp->nbins; b++) {
        if (fp->srq_mr && fp->srq_mr[b])
            ibv_dereg_mr(fp->srq_mr[b]);
        if (fp->srqs[b])
            ibv_destroy_srq(fp->srqs[b]);
        if (fp->srq_buf && fp->srq_buf[b])
            pages_unmap(fp->srq_buf[b], (size_t)fp->srq_depth[b] * fp->bins[b].buf_bytes);
    }
    if (fp->pat_mr)
        ibv_dereg_mr(fp->pat_mr);
    if (fp->aq)
        ibv_destroy_aq(fp->aq);
    if (fp->cq)
        ibv_destroy_cq(fp->cq);
    rc_conn_close(&fp->conn);
    free(fp->qps);
    free(fp->srqs);
    free(fp->srq_buf);
    free(fp->srq_mr);
    free(fp->srq_depth);
    free(fp->free_bufs);
    free(fp->qpmap);
    free(fp->expect_seq);
    free(fp->ring);
    free(fp->out_bin);
    free(fp->bin_msgs);
    free(fp->bin_out_sum);
    free(fp->app);
    free(fp->pattern);
    free(fp->inflight);
    free(fp->seq);
    free(fp->bins);
    free(fp->done);
    free(fp->replica);
}

int footprint_main(int argc, char **argv)
{
    struct fp *fp = calloc(1, sizeof *fp);
    if (!fp)
        return 1;
    fp->prog = argc > 0 && argv[0] ? argv[0] : "footprint";
    int rc = fp_parse_args(argc, argv, &fp->o);
    if (rc) {
        free(fp);
        return rc == 1 ? 0 : rc;
    }
    if (fp->o.model) {
        rc = fp_model_main(fp);
    } else {
        rc = fp_setup_bins(fp, fp->o.queues);
        if (!rc)
            rc = fp->o.role == RC_CONN_ROLE_SERVER ? fp_server_main(fp) : fp_client_main(fp);
    }
    fp_close(fp);
    free(fp);
    return rc;
}
