/* huang: the driver of the Huang & Ghandeharizadeh protocols (huang.h,
 * docs/huang.md).  One program per node: `huang --node=I` with the same
 * other options on every node of the run.
 *
 *   1. set up: the node's threads (layout.c), for each a CQ, one buffer
 *      (the buffer arrays of its QPs: R request slots of L + 6 bytes, then
 *      R response slots of V + 6 bytes) registered as one MR, and its QPs;
 *   2. out of band: every node puts "<name>/node/<i>" (options hash, LID,
 *      GID, status); a barrier; then for every peer it shares links with,
 *      "<name>/conn/<i>/<peer>": QPN, buffer-array address and rkey of each
 *      of those links, in the canonical link order both sides compute;
 *      it connects its QPs, posts the receives the protocol needs, and a
 *      second barrier starts the run;
 *   3. run: the threads (thread.c) for --warmup then --duration (each node
 *      on its own clock), requesters then drain what is outstanding;
 *   4. results: every requesting node puts "<name>/result/<i>"; once a
 *      third barrier says every requester has drained, the responders stop;
 *      node 0 reports one row of table "huang" (bw_gbps: value bytes per
 *      second, aggregate for M:1 and 1:M, average per node for M:M, as the
 *      paper reports) and one row of "order_check".
 *
 * Barriers are a star through node 0 ("<name>/sync/<k>/<i>" ->
 * "<name>/sync/<k>/all") carrying each node's status, so a failure
 * anywhere stops every node.  On real hardware node 0 runs with --server
 * (it keeps the out-of-band board) and the others with --client HOST.
 *
 * No globals: many instances run as coroutines in one simulator process;
 * getopt's globals are used only while parsing, before any blocking call. */
#include "protocols/huang/huang.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>

#include "protocols/huang/hg.h"
#include "rnicsim/host.h"

#define HG_NODE_INFO_BYTES 32 /* hash@0 lid@4 status@6 gid@16 */
#define HG_CONN_BYTES 16      /* per link: qpn@0 rkey@4 addr@8 */
#define HG_RESULT_WORDS 12
#define HG_WINDOW_POLLS_MIN 4 /* fewer polls of a thread in the window: a warning */
#define HG_RESULT_SUMMED 8    /* words 0..7 add up over nodes; 8 duration, 9 max, 10 min, 11 max */

/* ------------------------------------------------------------ options */

static void hg_usage(const char *prog)
{
    printf("usage: %s --node=I [options] [--server | --client HOST]\n"
           "  --abstraction=A   m1 (P requesting nodes, one responding) | 1m (one requesting,\n"
           "                    Q responding) | mm (N nodes request from each other); default m1\n"
           "  --protocol=X      send_send | send_write | write_send | write_write | read\n"
           "                    (request verb / response verb; default write_write)\n"
           "  --node=I          this program's node: 0 is the one side of m1 / 1m\n"
           "  --P=P --Q=Q --N=N requesting nodes (m1), responding nodes (1m), nodes (mm);\n"
           "                    defaults 28, 28, 28 (the paper's cluster)\n"
           "  --S=S             requesting threads per node (default 1; mm: 2S threads a node)\n"
           "  --R=R             pending requests per QP (default 128)\n"
           "  --L=BYTES         request (key) size (default 36)\n"
           "  --V=BYTES         value size (default 365)\n"
           "  --warmup=TIME     untimed start (default 200us; ns, us, ms, s)\n"
           "  --duration=TIME   measured window (default 1ms)\n"
           "  --resp-threads=T  m1 responding threads (default: the paper's, 14 for S=1 P=28,\n"
           "                    else 16)\n"
           "  --post-list=on|off  re-issue the requests a turn finds on a QP with one post\n"
           "                    (default off: one post per message, as the paper; docs/huang.md)\n"
           "  --mtu=BYTES       256..4096 (default: the port's active MTU)\n"
           "  --name=X          out-of-band key prefix (default huang)\n"
           "  --server, --client HOST   real hardware: node 0 serves the out-of-band board\n"
           "exit status: 0 ok, 1 set-up, transport error or a torn/wrong message, 2 usage error\n",
           prog);
}

enum {
    OPT_ABS = 256,
    OPT_PROTO,
    OPT_NODE,
    OPT_P,
    OPT_Q,
    OPT_N,
    OPT_S,
    OPT_R,
    OPT_L,
    OPT_V,
    OPT_WARMUP,
    OPT_DURATION,
    OPT_RESP_THREADS,
    OPT_POST_LIST,
    OPT_MTU,
    OPT_NAME,
    OPT_SERVER,
    OPT_CLIENT,
    OPT_HELP
};

/* "200us", "1ms", "2s", "500ns" (a plain number is ns). */
static bool parse_time_ns(const char *s, uint64_t *out)
{
    static const struct {
        const char *unit;
        uint64_t ns;
    } units[] = {{"", 1}, {"ns", 1}, {"us", 1000}, {"ms", 1000000}, {"s", 1000000000}};
    char *end;
    if (!s || *s < '0' || *s > '9')
        return false;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno)
        return false;
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
        if (strcasecmp(end, units[i].unit) == 0) {
            if (v > UINT64_MAX / units[i].ns / 4)
                return false;
            *out = v * units[i].ns;
            return true;
        }
    return false;
}

static bool parse_name(const char *s, const char *const *names, int n, int *out)
{
    for (int i = 0; i < n; i++)
        if (names[i] && strcmp(s, names[i]) == 0) {
            *out = i;
            return true;
        }
    return false;
}

static bool check_opts(const char *prog, struct hg_opts *o, bool have_node)
{
    if (!have_node) {
        fprintf(stderr, "%s: give --node=I (try --help)\n", prog);
        return false;
    }
    if (o->abs == HG_MM && o->N < 2) {
        fprintf(stderr, "%s: --abstraction=mm needs --N of at least 2\n", prog);
        return false;
    }
    uint32_t threads = o->abs == HG_MM ? 2 * o->S : o->S;
    if (threads > HG_MAX_THREADS) {
        fprintf(stderr, "%s: %" PRIu32 " threads per node, at most %d\n", prog, threads,
                HG_MAX_THREADS);
        return false;
    }
    if (o->abs == HG_M1 && o->resp_threads > HG_MAX_THREADS) {
        fprintf(stderr, "%s: --resp-threads=%" PRIu32 ", at most %d\n", prog, o->resp_threads,
                HG_MAX_THREADS);
        return false;
    }
    if (o->abs == HG_M1 && o->resp_threads > o->P * o->S) {
        fprintf(stderr,
                "%s: --resp-threads=%" PRIu32 " exceeds the %" PRIu32
                " QPs of the responder (P x S)\n",
                prog, o->resp_threads, o->P * o->S);
        return false;
    }
    if (!o->duration_ns) {
        fprintf(stderr, "%s: --duration must be positive\n", prog);
        return false;
    }
    if (o->oob_role == 1 && o->node != 0) {
        fprintf(stderr, "%s: --server is node 0's (it keeps the out-of-band board)\n", prog);
        return false;
    }
    return true;
}

/* Returns 0 to run, 2 on a usage error, -1 after --help. */
static int parse_args(int argc, char **argv, struct hg_opts *o)
{
    static const struct option longopts[] = {
        {"abstraction", required_argument, NULL, OPT_ABS},
        {"protocol", required_argument, NULL, OPT_PROTO},
        {"node", required_argument, NULL, OPT_NODE},
        {"P", required_argument, NULL, OPT_P},
        {"Q", required_argument, NULL, OPT_Q},
        {"N", required_argument, NULL, OPT_N},
        {"S", required_argument, NULL, OPT_S},
        {"R", required_argument, NULL, OPT_R},
        {"L", required_argument, NULL, OPT_L},
        {"V", required_argument, NULL, OPT_V},
        {"warmup", required_argument, NULL, OPT_WARMUP},
        {"duration", required_argument, NULL, OPT_DURATION},
        {"resp-threads", required_argument, NULL, OPT_RESP_THREADS},
        {"post-list", required_argument, NULL, OPT_POST_LIST},
        {"mtu", required_argument, NULL, OPT_MTU},
        {"name", required_argument, NULL, OPT_NAME},
        {"server", no_argument, NULL, OPT_SERVER},
        {"client", no_argument, NULL, OPT_CLIENT},
        {"help", no_argument, NULL, OPT_HELP},
        {NULL, 0, NULL, 0},
    };
    const char *proto_names[HG_PROTO_COUNT];
    for (int i = 0; i < HG_PROTO_COUNT; i++)
        proto_names[i] = hg_protos[i].name;
    static const char *const abs_alias[HG_ABS_COUNT] = {"M:1", "1:M", "M:M"};
    static const char *const on_off[2] = {"off", "on"};
    const char *prog = argc > 0 && argv[0] ? argv[0] : "huang";
    bool have_node = false;

    memset(o, 0, sizeof(*o));
    snprintf(o->name, sizeof(o->name), "huang");
    o->abs = HG_M1;
    o->proto = HG_WRITE_WRITE;
    o->P = o->Q = o->N = 28; /* Huang Section IV: 28 requesting / responding nodes */
    o->S = 1;
    o->R = 128;               /* Huang Fig. 8b, 8c, 10b, 10c, 12b, 12c: R = 128 */
    o->L = 36;                /* Huang Section IV: Facebook's mean key size */
    o->V = 365;               /* ... and mean value size (Atikoglu et al.) */
    o->warmup_ns = 200000;    /* estimate: pipelines full, caches warm (docs/huang.md) */
    o->duration_ns = 1000000; /* spec 3.7: a 1-2 ms window instead of three runs */
    o->post_list = false;     /* the paper posts each request (response) by itself */

    optind = 0;
    opterr = 1;
    for (;;) {
        int c = getopt_long(argc, argv, "", longopts, NULL);
        if (c == -1)
            break;
        bool ok = true;
        int v = 0;
        uint64_t u = 0;
        switch (c) {
        case OPT_ABS:
            ok = parse_name(optarg, hg_abs_names, HG_ABS_COUNT, &v) ||
                 parse_name(optarg, abs_alias, HG_ABS_COUNT, &v);
            o->abs = (enum hg_abs)v;
            break;
        case OPT_PROTO:
            ok = parse_name(optarg, proto_names, HG_PROTO_COUNT, &v);
            o->proto = (enum hg_proto)v;
            break;
        case OPT_NODE:
            ok = rc_conn_parse_uint(optarg, 0, HG_MAX_NODES - 1, &u);
            o->node = (uint32_t)u;
            have_node = true;
            break;
        case OPT_P:
        case OPT_Q:
            ok = rc_conn_parse_uint(optarg, 1, HG_MAX_NODES - 1, &u);
            *(c == OPT_P ? &o->P : &o->Q) = (uint32_t)u;
            break;
        case OPT_N:
            ok = rc_conn_parse_uint(optarg, 2, HG_MAX_NODES, &u);
            o->N = (uint32_t)u;
            break;
        case OPT_S:
            ok = rc_conn_parse_uint(optarg, 1, HG_MAX_THREADS, &u);
            o->S = (uint32_t)u;
            break;
        case OPT_R:
            ok = rc_conn_parse_uint(optarg, 1, HG_MAX_R, &u);
            o->R = (uint32_t)u;
            break;
        case OPT_L:
            ok = rc_conn_parse_uint(optarg, HG_MIN_L, 1u << 20, &u);
            o->L = (uint32_t)u;
            break;
        case OPT_V:
            ok = rc_conn_parse_uint(optarg, HG_MIN_V, HG_MAX_V, &u);
            o->V = (uint32_t)u;
            break;
        case OPT_WARMUP:
            ok = parse_time_ns(optarg, &o->warmup_ns);
            break;
        case OPT_DURATION:
            ok = parse_time_ns(optarg, &o->duration_ns);
            break;
        case OPT_RESP_THREADS:
            ok = rc_conn_parse_uint(optarg, 1, HG_MAX_THREADS, &u);
            o->resp_threads = (uint32_t)u;
            break;
        case OPT_POST_LIST:
            ok = parse_name(optarg, on_off, 2, &v);
            o->post_list = v == 1;
            break;
        case OPT_MTU:
            ok = rc_conn_parse_uint(optarg, 256, 4096, &u) && (u & (u - 1)) == 0;
            o->mtu_bytes = (uint32_t)u;
            break;
        case OPT_NAME:
            ok = optarg[0] != '\0' && strlen(optarg) < sizeof(o->name) - 32;
            if (ok)
                snprintf(o->name, sizeof(o->name), "%s", optarg);
            break;
        case OPT_SERVER:
            o->oob_role = 1;
            break;
        case OPT_CLIENT:
            o->oob_role = 2;
            break;
        case OPT_HELP:
            hg_usage(prog);
            return -1;
        default:
            fprintf(stderr, "%s: unknown option (try --help)\n", prog);
            return 2;
        }
        if (!ok) {
            const char *hint = "";
            if (c == OPT_ABS)
                hint = " (m1, 1m or mm)";
            else if (c == OPT_PROTO)
                hint = " (send_send, send_write, write_send, write_write or read)";
            else if (c == OPT_POST_LIST)
                hint = " (on or off)";
            else if (c == OPT_WARMUP || c == OPT_DURATION)
                hint = " (a time: 500ns, 200us, 1ms, 2s)";
            else if (c == OPT_MTU)
                hint = " (256, 512, 1024, 2048 or 4096)";
            fprintf(stderr, "%s: bad value for --%s: '%s'%s\n", prog, longopts[c - OPT_ABS].name,
                    optarg ? optarg : "", hint);
            return 2;
        }
    }
    /* One positional argument at most: the board's host on real hardware. */
    if (argc - optind > (o->oob_role == 2 ? 1 : 0)) {
        fprintf(stderr, "%s: unexpected argument '%s'\n", prog, argv[optind]);
        return 2;
    }
    return check_opts(prog, o, have_node) ? 0 : 2;
}

static uint32_t opts_hash(const struct hg_opts *o)
{
    uint64_t w[] = {o->abs,       o->proto,       o->P,         o->Q,        o->N,
                    o->S,         o->R,           o->L,         o->V,        o->resp_threads,
                    o->warmup_ns, o->duration_ns, o->post_list, o->mtu_bytes};
    return rc_conn_hash_words(w, sizeof(w) / sizeof(w[0]));
}

/* ------------------------------------------------------------ out of band */

static int oob_put(struct hg *hg, const char *key, const void *buf, size_t len)
{
    return rc_conn_oob_put(hg->prog, key, buf, len);
}

static int oob_get(struct hg *hg, const char *key, void *buf, size_t len)
{
    return rc_conn_oob_get(hg->prog, key, buf, len);
}

/* Star barrier through node 0 that also carries statuses: returns the
 * largest status of the run (1 when the exchange itself failed). */
static int barrier(struct hg *hg, int status)
{
    return rc_conn_star_barrier(hg->prog, hg->o.name, hg->sync_seq++, hg->o.node == 0, 1,
                                hg->nodes - 1, hg->o.node, status);
}

/* ------------------------------------------------------------ set-up */

static uint32_t psn_of(uint32_t qpn)
{
    return (qpn * 2654435761u + 1u) & 0xffffffu; /* as rc_conn: deterministic 24-bit PSN */
}

/* The node's threads and which links each owns. */
static int plan(struct hg *hg)
{
    const struct hg_opts *o = &hg->o;
    uint32_t req, resp, resp_base;
    hg_node_threads(o, o->node, &req, &resp, &resp_base);
    hg->nlinks = hg_links(o, NULL);
    hg->links = calloc(hg->nlinks ? hg->nlinks : 1, sizeof(*hg->links));
    hg->nthreads = req + resp;
    hg->threads = calloc(hg->nthreads ? hg->nthreads : 1, sizeof(*hg->threads));
    if (!hg->links || !hg->threads) {
        fprintf(stderr, "%s: out of memory\n", hg->prog);
        return 1;
    }
    hg_links(o, hg->links);
    for (uint32_t i = 0; i < hg->nthreads; i++) {
        struct hg_thread *t = &hg->threads[i];
        t->hg = hg;
        t->requesting = i < req;
        t->idx = t->requesting ? i : resp_base + (i - req);
        t->handle = -1;
    }
    /* count, then fill each thread's QPs in link order */
    for (int pass = 0; pass < 2; pass++) {
        for (uint32_t i = 0; i < hg->nthreads; i++)
            hg->threads[i].nqps = 0;
        for (uint64_t l = 0; l < hg->nlinks; l++) {
            const struct hg_link *k = &hg->links[l];
            for (uint32_t i = 0; i < hg->nthreads; i++) {
                struct hg_thread *t = &hg->threads[i];
                bool mine = t->requesting ? (k->req_node == o->node && k->req_thread == t->idx)
                                          : (k->resp_node == o->node && k->resp_thread == t->idx);
                if (!mine)
                    continue;
                if (pass == 1) {
                    struct hg_qp *q = &t->qps[t->nqps];
                    q->link = (uint32_t)l;
                    q->peer_node = t->requesting ? k->resp_node : k->req_node;
                }
                t->nqps++;
            }
        }
        if (pass == 0)
            for (uint32_t i = 0; i < hg->nthreads; i++) {
                struct hg_thread *t = &hg->threads[i];
                t->qps = calloc(t->nqps ? t->nqps : 1, sizeof(*t->qps));
                if (!t->qps) {
                    fprintf(stderr, "%s: out of memory\n", hg->prog);
                    return 1;
                }
            }
    }
    return 0;
}

static int open_device(struct hg *hg)
{
    struct rc_conn *c = &hg->conn;
    if (rc_conn_open_device(c)) {
        hg->no_device = true;
        return 1;
    }
    if (rc_conn_query(c, &hg->dev, hg->o.mtu_bytes))
        return 1;
    uint32_t rd = hg->dev.max_qp_rd_atom > 0 ? (uint32_t)hg->dev.max_qp_rd_atom : 1;
    if (hg->dev.max_qp_init_rd_atom > 0 && (uint32_t)hg->dev.max_qp_init_rd_atom < rd)
        rd = (uint32_t)hg->dev.max_qp_init_rd_atom;
    hg->rd_atomic = (uint8_t)(rd > 255 ? 255 : rd);
    hg->access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
    uint64_t qps = 0;
    for (uint32_t i = 0; i < hg->nthreads; i++)
        qps += hg->threads[i].nqps;
    if (hg->dev.max_qp > 0 && qps > (uint64_t)hg->dev.max_qp) {
        fprintf(stderr, "%s: %" PRIu64 " QPs exceed the device's max_qp %d\n", hg->prog, qps,
                hg->dev.max_qp);
        return 1;
    }
    if (hg->dev.max_qp_wr > 0 && 2 * (uint64_t)hg->o.R > (uint64_t)hg->dev.max_qp_wr) {
        fprintf(stderr, "%s: a send queue of 2R = %" PRIu64 " exceeds the device's max_qp_wr %d\n",
                hg->prog, 2 * (uint64_t)hg->o.R, hg->dev.max_qp_wr);
        return 1;
    }
    c->pd = ibv_alloc_pd(c->ctx);
    if (!c->pd) {
        fprintf(stderr, "%s: ibv_alloc_pd: %s\n", hg->prog, strerror(errno));
        return 1;
    }
    return 0;
}

static int setup_thread(struct hg *hg, struct hg_thread *t)
{
    const struct hg_opts *o = &hg->o;
    const struct hg_proto_info *p = &hg_protos[o->proto];
    uint32_t R = o->R;
    bool recvs = t->requesting ? p->resp == HG_SEND : p->req == HG_SEND;
    bool read = o->proto == HG_READ;
    t->sq_depth = read ? R : 2 * R;
    t->sig_every = R;
    t->buf_bytes = (size_t)t->nqps * hg->region_bytes;
    if (t->buf_bytes) {
        /* mmap: page aligned and zero, and pages never written stay unallocated */
        void *m =
            mmap(NULL, t->buf_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED) {
            fprintf(stderr, "%s: cannot map %zu bytes of buffer arrays\n", hg->prog, t->buf_bytes);
            t->buf_bytes = 0;
            return 1;
        }
        t->buf = m;
        t->mr = ibv_reg_mr(hg->conn.pd, t->buf, t->buf_bytes, hg->access);
        if (!t->mr) {
            fprintf(stderr, "%s: ibv_reg_mr(%zu bytes): %s\n", hg->prog, t->buf_bytes,
                    strerror(errno));
            return 1;
        }
    }
    uint64_t cqe = (uint64_t)t->nqps * (2 * (uint64_t)R + 2) + 1;
    if (hg->dev.max_cqe > 0 && cqe > (uint64_t)hg->dev.max_cqe) {
        fprintf(stderr, "%s: a CQ of %" PRIu64 " entries exceeds the device's max_cqe %d\n",
                hg->prog, cqe, hg->dev.max_cqe);
        return 1;
    }
    t->cq = ibv_create_cq(hg->conn.ctx, (int)cqe, NULL, NULL, 0);
    t->wr = calloc(R, sizeof(*t->wr));
    t->sge = calloc(R, sizeof(*t->sge));
    t->rwr = calloc(R, sizeof(*t->rwr));
    t->rsge = calloc(R, sizeof(*t->rsge));
    t->dirty = calloc(t->nqps ? t->nqps : 1, sizeof(*t->dirty));
    if (!t->cq || !t->wr || !t->sge || !t->rwr || !t->rsge || !t->dirty) {
        fprintf(stderr, "%s: ibv_create_cq(%" PRIu64 ") or out of memory: %s\n", hg->prog, cqe,
                strerror(errno));
        return 1;
    }
    uint32_t want_inline = t->requesting && !read ? hg_req_slot_bytes(o) : 0;
    for (uint32_t qi = 0; qi < t->nqps; qi++) {
        struct hg_qp *q = &t->qps[qi];
        q->region = t->buf + (size_t)qi * hg->region_bytes;
        q->rkey = t->mr->rkey;
        q->uses = calloc(R, sizeof(*q->uses));
        q->pend = calloc(R, sizeof(*q->pend));
        q->issue_ns = t->requesting ? malloc(R * sizeof(*q->issue_ns)) : NULL;
        if (!q->uses || !q->pend || (t->requesting && !q->issue_ns)) {
            fprintf(stderr, "%s: out of memory\n", hg->prog);
            return 1;
        }
        for (uint32_t s = 0; t->requesting && s < R; s++)
            q->issue_ns[s] = UINT64_MAX;
        struct ibv_qp_init_attr ia = {
            .send_cq = t->cq,
            .recv_cq = t->cq,
            .cap = {.max_send_wr = t->sq_depth,
                    .max_recv_wr = recvs ? R : 1,
                    .max_send_sge = 1,
                    .max_recv_sge = 1,
                    .max_inline_data = want_inline},
            .qp_type = IBV_QPT_RC,
        };
        q->qp = ibv_create_qp(hg->conn.pd, &ia);
        if (!q->qp && want_inline) { /* the device inlines less: post requests from the slot */
            ia.cap.max_inline_data = 0;
            q->qp = ibv_create_qp(hg->conn.pd, &ia);
        }
        if (!q->qp) {
            fprintf(stderr, "%s: ibv_create_qp #%" PRIu32 " of thread %" PRIu32 ": %s\n", hg->prog,
                    qi, t->idx, strerror(errno));
            return 1;
        }
        if (t->requesting && (qi == 0 || ia.cap.max_inline_data < hg->max_inline))
            hg->max_inline = ia.cap.max_inline_data;
    }
    if (!t->requesting)
        hg_prepare_values(t);
    return 0;
}

static int setup(struct hg *hg)
{
    const struct hg_opts *o = &hg->o;
    uint64_t region = (uint64_t)o->R * (hg_req_slot_bytes(o) + hg_resp_slot_bytes(o));
    region = (region + 63) & ~(uint64_t)63;
    if (region > UINT32_MAX) {
        fprintf(stderr, "%s: R x (L + V + 12) = %" PRIu64 " bytes per QP is too large\n", hg->prog,
                region);
        return 2;
    }
    hg->region_bytes = (uint32_t)region;
    int rc = plan(hg);
    if (rc == 0)
        rc = open_device(hg);
    hg->max_inline = UINT32_MAX;
    for (uint32_t i = 0; rc == 0 && i < hg->nthreads; i++)
        rc = setup_thread(hg, &hg->threads[i]);
    if (hg->max_inline == UINT32_MAX)
        hg->max_inline = 0;
    return rc;
}

/* ------------------------------------------------------------ connect */

static struct hg_qp *qp_of_link(struct hg *hg, uint64_t l)
{
    const struct hg_link *k = &hg->links[l];
    for (uint32_t i = 0; i < hg->nthreads; i++) {
        struct hg_thread *t = &hg->threads[i];
        bool mine = t->requesting ? (k->req_node == hg->o.node && k->req_thread == t->idx)
                                  : (k->resp_node == hg->o.node && k->resp_thread == t->idx);
        if (!mine)
            continue;
        for (uint32_t qi = 0; qi < t->nqps; qi++)
            if (t->qps[qi].link == l)
                return &t->qps[qi];
    }
    return NULL;
}

static bool link_between(const struct hg_link *k, uint32_t a, uint32_t b)
{
    return (k->req_node == a && k->resp_node == b) || (k->req_node == b && k->resp_node == a);
}

/* Put this node's half of every link with `peer`. */
static int put_conn(struct hg *hg, uint32_t peer, struct hg_qp **map, uint32_t n)
{
    char key[HG_KEY_MAX];
    uint8_t *w = calloc(n ? n : 1, HG_CONN_BYTES);
    if (!w)
        return 1;
    for (uint32_t i = 0; i < n; i++) {
        uint8_t *e = w + (size_t)i * HG_CONN_BYTES;
        rc_conn_put_le(e, map[i]->qp->qp_num, 4);
        rc_conn_put_le(e + 4, map[i]->rkey, 4);
        rc_conn_put_le(e + 8, (uint64_t)(uintptr_t)map[i]->region, 8);
    }
    snprintf(key, sizeof(key), "%s/conn/%" PRIu32 "/%" PRIu32, hg->o.name, hg->o.node, peer);
    int rc = oob_put(hg, key, w, (size_t)n * HG_CONN_BYTES) ? 1 : 0;
    free(w);
    return rc;
}

static int connect_qp(struct hg *hg, struct hg_qp *q, const uint8_t gid[16], uint16_t lid)
{
    struct rc_conn *c = &hg->conn;
    memcpy(c->peer.gid, gid, 16);
    c->peer.lid = lid;
    c->qp = q->qp;
    c->local.psn = psn_of(q->qp->qp_num);
    c->peer.qpn = q->peer_qpn;
    c->peer.psn = psn_of(q->peer_qpn);
    int rc = rc_conn_connect(c, hg->access, hg->rd_atomic) ? 1 : 0;
    c->qp = NULL; /* ours, not rc_conn_close's */
    return rc;
}

/* Exchange with every peer and connect every QP. */
static int exchange(struct hg *hg)
{
    char key[HG_KEY_MAX];
    uint32_t me = hg->o.node;
    struct hg_qp **map = calloc(hg->nlinks ? hg->nlinks : 1, sizeof(*map));
    if (!map)
        return 1;
    int rc = 0;
    /* my halves first (every peer can then fetch them), then theirs */
    for (int pass = 0; pass < 2 && rc == 0; pass++)
        for (uint32_t peer = 0; peer < hg->nodes && rc == 0; peer++) {
            if (peer == me)
                continue;
            uint32_t n = 0;
            for (uint64_t l = 0; l < hg->nlinks; l++)
                if (link_between(&hg->links[l], me, peer))
                    map[n++] = qp_of_link(hg, l);
            if (n == 0)
                continue;
            if (pass == 0) {
                rc = put_conn(hg, peer, map, n);
                continue;
            }
            uint8_t info[HG_NODE_INFO_BYTES];
            snprintf(key, sizeof(key), "%s/node/%" PRIu32, hg->o.name, peer);
            if (oob_get(hg, key, info, sizeof(info))) {
                rc = 1;
                break;
            }
            uint8_t *w = malloc((size_t)n * HG_CONN_BYTES);
            snprintf(key, sizeof(key), "%s/conn/%" PRIu32 "/%" PRIu32, hg->o.name, peer, me);
            if (!w || oob_get(hg, key, w, (size_t)n * HG_CONN_BYTES)) {
                free(w);
                rc = 1;
                break;
            }
            for (uint32_t i = 0; i < n && rc == 0; i++) {
                const uint8_t *e = w + (size_t)i * HG_CONN_BYTES;
                map[i]->peer_qpn = (uint32_t)rc_conn_get_le(e, 4);
                map[i]->peer_rkey = (uint32_t)rc_conn_get_le(e + 4, 4);
                map[i]->peer_addr = rc_conn_get_le(e + 8, 8);
                rc = connect_qp(hg, map[i], info + 16, (uint16_t)rc_conn_get_le(info + 4, 2));
            }
            free(w);
        }
    free(map);
    return rc;
}

/* Node info: published even after a failed set-up, so the peers stop. */
static int put_node_info(struct hg *hg, int status)
{
    char key[HG_KEY_MAX];
    uint8_t w[HG_NODE_INFO_BYTES] = {0};
    rc_conn_put_le(w, opts_hash(&hg->o), 4);
    rc_conn_put_le(w + 4, hg->conn.port.lid, 2);
    w[6] = (uint8_t)status;
    memcpy(w + 16, hg->conn.gid.raw, 16);
    snprintf(key, sizeof(key), "%s/node/%" PRIu32, hg->o.name, hg->o.node);
    return oob_put(hg, key, w, sizeof(w)) ? 1 : 0;
}

/* Every node agrees on the options (node 0 checks each, the barrier tells). */
static int check_peers(struct hg *hg)
{
    char key[HG_KEY_MAX];
    if (hg->o.node != 0)
        return 0;
    for (uint32_t i = 1; i < hg->nodes; i++) {
        uint8_t w[HG_NODE_INFO_BYTES];
        snprintf(key, sizeof(key), "%s/node/%" PRIu32, hg->o.name, i);
        if (oob_get(hg, key, w, sizeof(w)))
            return 1;
        if (w[6] == 0 && (uint32_t)rc_conn_get_le(w, 4) != opts_hash(&hg->o)) {
            fprintf(stderr, "%s: node %" PRIu32 " was given different options\n", hg->prog, i);
            return 2;
        }
    }
    return 0;
}

static int post_recvs(struct hg *hg)
{
    const struct hg_proto_info *p = &hg_protos[hg->o.proto];
    for (uint32_t i = 0; i < hg->nthreads; i++) {
        struct hg_thread *t = &hg->threads[i];
        bool recvs = t->requesting ? p->resp == HG_SEND : p->req == HG_SEND;
        for (uint32_t qi = 0; recvs && qi < t->nqps; qi++)
            if (hg_post_initial_recvs(t, &t->qps[qi], !t->requesting))
                return 1;
    }
    return 0;
}

/* ------------------------------------------------------------ run and results */

static int run_threads(struct hg *hg)
{
    bool responders = hg->o.proto != HG_READ; /* READ: the responder's CPU does nothing */
    int rc = 0;
    for (uint32_t i = 0; i < hg->nthreads && rc == 0; i++) {
        struct hg_thread *t = &hg->threads[i];
        if (!t->requesting && !responders)
            continue;
        t->handle = host_thread_start(t->requesting ? hg_requester_run : hg_responder_run, t);
        if (t->handle < 0) {
            fprintf(stderr, "%s: host_thread_start: %s\n", hg->prog, strerror(errno));
            rc = 1;
        }
    }
    for (uint32_t i = 0; i < hg->nthreads; i++) {
        struct hg_thread *t = &hg->threads[i];
        if (t->requesting && t->handle >= 0) {
            host_thread_join(t->handle);
            t->handle = -1;
            rc = t->rc > rc ? t->rc : rc;
        }
    }
    return rc;
}

static void stop_responders(struct hg *hg)
{
    atomic_store(&hg->stop, true);
    host_compute(0); /* in the simulator: wakes the parked responders */
    for (uint32_t i = 0; i < hg->nthreads; i++) {
        struct hg_thread *t = &hg->threads[i];
        if (t->handle >= 0) {
            host_thread_join(t->handle);
            t->handle = -1;
        }
    }
}

/* responses (to the requests posted in the window, hg.h), lat_sum, lat_n,
 * checked, bytes_checked, served, scans, slots_scanned, duration, the
 * longest gap between two polls of a requesting thread in the window (ns),
 * the fewest polls a requesting thread made in it */
static void node_result(const struct hg *hg, uint64_t r[HG_RESULT_WORDS])
{
    memset(r, 0, HG_RESULT_WORDS * sizeof(r[0]));
    r[10] = UINT64_MAX;
    for (uint32_t i = 0; i < hg->nthreads; i++) {
        const struct hg_thread *t = &hg->threads[i];
        if (t->requesting) {
            r[0] += t->responses;
            r[1] += t->lat_sum_ns;
            r[2] += t->lat_n;
            r[9] = t->obs_gap_max_ns > r[9] ? t->obs_gap_max_ns : r[9];
            r[10] = t->obs_counted < r[10] ? t->obs_counted : r[10];
            r[11] = t->round1_ns > r[11] ? t->round1_ns : r[11];
        } else {
            r[5] += t->responses;
        }
        r[3] += t->checked;
        r[4] += t->bytes_checked;
        r[6] += t->scans;
        r[7] += t->slots_scanned;
    }
    r[8] = hg->o.duration_ns;
    if (r[10] == UINT64_MAX)
        r[10] = 0;
}

static int report(struct hg *hg)
{
    const struct hg_opts *o = &hg->o;
    uint64_t tot[HG_RESULT_WORDS] = {0};
    tot[10] = UINT64_MAX;
    double node_min = 0, node_max = 0;
    uint32_t req_nodes = 0;
    for (uint32_t i = 0; i < hg->nodes; i++) {
        uint64_t r[HG_RESULT_WORDS];
        if (i == 0) {
            node_result(hg, r);
        } else {
            char key[HG_KEY_MAX];
            uint8_t w[HG_RESULT_WORDS * 8];
            snprintf(key, sizeof(key), "%s/result/%" PRIu32, o->name, i);
            if (oob_get(hg, key, w, sizeof(w)))
                return 1;
            for (int j = 0; j < HG_RESULT_WORDS; j++)
                r[j] = rc_conn_get_le(w + 8 * j, 8);
        }
        uint32_t req, resp, base;
        hg_node_threads(o, i, &req, &resp, &base);
        if (req) {
            double g = (double)r[0] * o->V * 8.0 / (double)o->duration_ns;
            node_min = req_nodes == 0 || g < node_min ? g : node_min;
            node_max = g > node_max ? g : node_max;
            req_nodes++;
        }
        for (int j = 0; j < HG_RESULT_SUMMED; j++)
            tot[j] += r[j];
        if (req) {
            tot[9] = r[9] > tot[9] ? r[9] : tot[9];
            tot[10] = r[10] < tot[10] ? r[10] : tot[10];
            tot[11] = r[11] > tot[11] ? r[11] : tot[11];
        }
    }
    if (tot[10] == UINT64_MAX)
        tot[10] = 0;
    /* A window that holds fewer than a few turns of some requesting thread
     * has not seen its cycle of finding and re-posting (hg.h): say so. */
    if (tot[10] < HG_WINDOW_POLLS_MIN)
        fprintf(stderr,
                "%s: warning: a requesting thread polled only %" PRIu64
                " times in the window (longest gap %.1f us): lengthen --duration\n",
                hg->prog, tot[10], (double)tot[9] / 1e3);
    /* The window opened before some requesting thread had found one round
     * of responses (R x its QPs): it measures the start-up burst, in which
     * the requests sit in the order they were first posted (hg.h round1_ns).
     * UINT64_MAX: a thread never found a whole round, not even draining. */
    if (tot[11] == UINT64_MAX)
        fprintf(stderr,
                "%s: warning: a requesting thread never found a whole round of responses "
                "(R x its QPs): the window measured the start-up burst\n",
                hg->prog);
    else if (tot[11] > o->warmup_ns)
        fprintf(stderr,
                "%s: warning: the window opens at %.3f ms, before the first round of requests "
                "was answered (%.3f ms): lengthen --warmup\n",
                hg->prog, (double)o->warmup_ns / 1e6, (double)tot[11] / 1e6);
    double total_gbps = (double)tot[0] * o->V * 8.0 / (double)o->duration_ns;
    double bw = o->abs == HG_MM ? total_gbps / o->N : total_gbps;
    double lat = tot[2] ? (double)tot[1] / (double)tot[2] / 1e3 : 0.0;
    struct host_kv kv[] = {
        {"abstraction", (double)o->abs},
        {"protocol", (double)o->proto},
        {"P", o->abs == HG_M1 ? (double)o->P : 1.0},
        {"Q", o->abs == HG_1M ? (double)o->Q : 1.0},
        {"N", (double)hg->nodes},
        {"S", (double)o->S},
        {"R", (double)o->R},
        {"L", (double)o->L},
        {"V", (double)o->V},
        {"qps_max_node", (double)hg_max_qps_per_node(o)},
        {"responses", (double)tot[0]},
        {"mops", (double)tot[0] * 1e3 / (double)o->duration_ns},
        {"bw_gbps", bw},
        {"total_gbps", total_gbps},
        {"node_min_gbps", node_min},
        {"node_max_gbps", node_max},
        {"avg_lat_us", lat},
        {"scans", (double)tot[6]},
        {"slots_scanned", (double)tot[7]},
        {"duration_us", (double)o->duration_ns / 1e3},
        {"poll_gap_max_us", (double)tot[9] / 1e3},
        {"window_polls_min", (double)tot[10]},
        {"round1_us", tot[11] == UINT64_MAX ? -1.0 : (double)tot[11] / 1e3},
    };
    host_report("huang", kv, sizeof(kv) / sizeof(kv[0]));
    struct host_kv ck[] = {
        {"messages_checked", (double)tot[3]},
        {"bytes_checked", (double)tot[4]},
        {"violations", 0.0},
    };
    host_report("order_check", ck, sizeof(ck) / sizeof(ck[0]));
    printf("%s: %s %s, %" PRIu32 " nodes, S=%" PRIu32 " R=%" PRIu32 " V=%" PRIu32
           ": %.3f Gb/s%s (%.3f Mops, avg latency %.2f us, %" PRIu64 " messages checked)\n",
           hg->prog, hg_abs_names[o->abs], hg_protos[o->proto].name, hg->nodes, o->S, o->R, o->V,
           bw, o->abs == HG_MM ? " per node" : "", (double)tot[0] * 1e3 / (double)o->duration_ns,
           lat, tot[3]);
    return 0;
}

static void close_all(struct hg *hg)
{
    for (uint32_t i = 0; hg->threads && i < hg->nthreads; i++) {
        struct hg_thread *t = &hg->threads[i];
        for (uint32_t qi = 0; t->qps && qi < t->nqps; qi++) {
            struct hg_qp *q = &t->qps[qi];
            if (q->qp)
                ibv_destroy_qp(q->qp);
            free(q->uses);
            free(q->pend);
            free(q->issue_ns);
        }
        if (t->cq)
            ibv_destroy_cq(t->cq);
        if (t->mr)
            ibv_dereg_mr(t->mr);
        if (t->buf)
            munmap(t->buf, t->buf_bytes);
        free(t->qps);
        free(t->wr);
        free(t->sge);
        free(t->rwr);
        free(t->rsge);
        free(t->dirty);
    }
    free(hg->threads);
    free(hg->links);
    rc_conn_close(&hg->conn); /* PD and device */
}

static int node_main(struct hg *hg)
{
    char key[HG_KEY_MAX];
    int rc = setup(hg);
    if (rc && hg->no_device)
        return rc; /* real hardware without a device: nothing can run */
    if (put_node_info(hg, rc))
        return 1;
    int all = barrier(hg, rc ? rc : check_peers(hg)); /* 1: every node set up */
    if (all)
        return rc ? rc : all;
    rc = exchange(hg);
    if (rc == 0)
        rc = post_recvs(hg);
    all = barrier(hg, rc); /* 2: every QP connected, receives posted */
    if (all)
        return rc ? rc : all;
    hg->start_ns = host_now_ns();
    rc = run_threads(hg);
    uint64_t r[HG_RESULT_WORDS];
    node_result(hg, r);
    if (hg->o.node != 0) {
        uint8_t w[HG_RESULT_WORDS * 8];
        for (int j = 0; j < HG_RESULT_WORDS; j++)
            rc_conn_put_le(w + 8 * j, r[j], 8);
        snprintf(key, sizeof(key), "%s/result/%" PRIu32, hg->o.name, hg->o.node);
        if (oob_put(hg, key, w, sizeof(w)))
            rc = 1;
    }
    all = barrier(hg, rc); /* 3: every requester drained */
    stop_responders(hg);
    for (uint32_t i = 0; i < hg->nthreads; i++)
        rc = hg->threads[i].rc > rc ? hg->threads[i].rc : rc;
    if (rc || all)
        return rc ? rc : all;
    if (hg->o.node == 0)
        rc = report(hg);
    all = barrier(hg, rc); /* 4: reported */
    return rc ? rc : all;
}

int huang_main(int argc, char **argv)
{
    struct hg *hg = calloc(1, sizeof(*hg));
    if (!hg)
        return 1;
    int rc = parse_args(argc, argv, &hg->o);
    if (rc) {
        free(hg);
        return rc < 0 ? 0 : rc;
    }
    hg->prog = argc > 0 && argv[0] ? argv[0] : "huang";
    atomic_init(&hg->stop, false);
    hg->nodes = hg_nodes(&hg->o);
    if (hg->o.node >= hg->nodes) {
        printf("%s: node %" PRIu32 " takes no part (%s uses nodes 0..%" PRIu32 ")\n", hg->prog,
               hg->o.node, hg_abs_names[hg->o.abs], hg->nodes - 1);
        free(hg);
        return 0;
    }
    rc_conn_init(&hg->conn, hg->prog, hg->o.node == 0 ? RC_CONN_ROLE_SERVER : RC_CONN_ROLE_CLIENT,
                 hg->o.name);
    rc = node_main(hg);
    close_all(hg);
    free(hg);
    return rc;
}
