/* rima_stream: a stream of mixed-size messages from N senders into one
 * append queue, every message checked exactly once (protocols/README.md,
 * section rima_stream; docs/rima-portable.md).
 *
 * The server (receiver) creates one append queue with the portable layer
 * (protocols/rima/rima.h; --mode=hw|sw|auto), one RC QP per sender, and
 * exports the queue out of band under "<name>/aq".  Client --id=I is sender
 * I: it appends --messages messages; message seq (1, 2, ...) has a length
 * drawn by a per-sender RNG seeded by (--seed, I) -- uniform over --sizes,
 * or over [16, --max-size] -- and holds
 *
 *   [0,4)   sender id   u32 little-endian
 *   [4,8)   seq         u32
 *   [8,12)  length      u32
 *   [12,16) checksum    FNV-1a-32 over [0,12) and [16,len)
 *   [16,len) body       pseudo-random bytes seeded by (seed, sender, seq)
 *
 * so the server can regenerate every message.  The server polls the queue,
 * and checks each message: known sender, on that sender's QP, the next
 * sequence number of that sender (appends of one sender arrive in order),
 * the length the sender's RNG gives, the checksum, and every body byte.  It
 * then consumes it: at once, or (--hold=K) keeps up to K messages and
 * consumes a random one when K are held or nothing new arrived, which
 * exercises out-of-order consumption.  Per sender it hashes the received
 * bytes (FNV-1a-64, in that sender's order): the same workload gives the
 * same hashes in hardware and software mode.
 *
 * Results (host_report):
 *   server  rima_stream     mode (1 hw, 2 sw), senders, messages_checked,
 *                           bytes_checked, violations, duration_us,
 *                           msg_rate_mps, t_p50_us, t_p99_us (append
 *                           latency over all senders, from the clients'
 *                           samples), region_bytes, pad_bytes,
 *                           peak_pending_bytes, footprint_bytes
 *           rima_stream_rx  one row per sender: sender, messages, bytes,
 *                           hash_hi, hash_lo (the 64-bit hash in halves,
 *                           exact as doubles)
 *           rima_violation  the first bad message (sender, seq_got,
 *                           seq_want, len_got, len_want, check: 1 sender /
 *                           2 sequence / 3 length / 4 checksum / 5 body)
 *   client  rima_append     sender, mode, messages, bytes, t_p50_us,
 *                           t_p99_us, t_avg_us, t_max_us (post -> sender
 *                           completion), faa, head_reads,
 *                           dead_reservations, flow_waits
 *
 * Exit status: 0 all valid, 1 violation, 2 usage / setup / transport error.
 * No globals (several instances run as coroutines in one process). */
#include "protocols/rima/rima_stream.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocols/common/rc_conn.h"
#include "protocols/rima/rima.h"
#include "rnicsim/host.h"

#define RS_EXIT_VIOLATION 1
#define RS_EXIT_ERROR 2
#define RS_HDR_BYTES 16
#define RS_MIN_SIZE RS_HDR_BYTES
#define RS_MAX_SIZES 16
#define RS_MAX_SENDERS 256
#define RS_POLL_BATCH 32
#define RS_MAX_RD_ATOMIC 16 /* estimate: ConnectX-5 max_qp_rd_atom is 16 */

struct rs_opts {
    enum rc_conn_role role;
    char name[RC_CONN_NAME_MAX - 8];
    enum rima_mode mode;
    uint64_t id, senders, messages, window, region_bytes, seed, hold, max_size, mtu_bytes;
    uint64_t sizes[RS_MAX_SIZES];
    uint32_t nsizes;
};

/* ------------------------------------------------------------ message content */

static uint64_t rs_splitmix(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t rs_size_seed(const struct rs_opts *o, uint32_t sender)
{
    return o->seed * 0x100000001b3ull ^ ((uint64_t)sender + 1) * 0x9e3779b97f4a7c15ull;
}

static uint32_t rs_next_size(const struct rs_opts *o, uint64_t *rng)
{
    uint64_t r = rs_splitmix(rng);
    if (o->nsizes)
        return (uint32_t)o->sizes[r % o->nsizes];
    return (uint32_t)(RS_MIN_SIZE + r % (o->max_size - RS_MIN_SIZE + 1));
}

static uint32_t rs_fnv32(uint32_t h, const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 16777619u;
    return h;
}

static uint64_t rs_fnv64(uint64_t h, const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

static void rs_fill(const struct rs_opts *o, uint8_t *buf, uint32_t sender, uint32_t seq,
                    uint32_t len)
{
    uint64_t x = o->seed ^ ((uint64_t)sender << 40) ^ ((uint64_t)seq * 0xff51afd7ed558ccdull);
    for (uint32_t i = RS_HDR_BYTES; i < len; i += 8) {
        uint64_t r = rs_splitmix(&x);
        for (uint32_t k = 0; k < 8 && i + k < len; k++)
            buf[i + k] = (uint8_t)(r >> (8 * k));
    }
    rc_conn_put_le(buf + 0, sender, 4);
    rc_conn_put_le(buf + 4, seq, 4);
    rc_conn_put_le(buf + 8, len, 4);
    uint32_t c = rs_fnv32(2166136261u, buf, 12);
    c = rs_fnv32(c, buf + RS_HDR_BYTES, len - RS_HDR_BYTES);
    rc_conn_put_le(buf + 12, c, 4);
}

/* ------------------------------------------------------------ options */

enum {
    OPT_SERVER = 256,
    OPT_CLIENT,
    OPT_ID,
    OPT_SENDERS,
    OPT_MESSAGES,
    OPT_SIZES,
    OPT_MAX_SIZE,
    OPT_MODE,
    OPT_WINDOW,
    OPT_REGION,
    OPT_SEED,
    OPT_HOLD,
    OPT_MTU,
    OPT_NAME,
    OPT_HELP
};

static void rs_usage(const char *prog)
{
    printf("usage: %s --server|--client [options] [server-host]\n"
           "  --mode=hw|sw|auto   queue implementation (server; default auto: hw if the\n"
           "                      device has append queues, else sw)\n"
           "  --senders=N         senders the server expects (default 1)\n"
           "  --id=I              this client's sender id, 0..N-1 (default 0)\n"
           "  --messages=M        messages per sender (default 1000)\n"
           "  --sizes=A,B,..      sizes drawn uniformly from this list (>= %d each), or\n"
           "  --max-size=S        sizes uniform in [%d, S] (default 4096)\n"
           "  --window=W          appends in flight per sender (default 16)\n"
           "  --region=BYTES      queue region (server; default 1MiB)\n"
           "  --hold=K            server keeps K messages and consumes them in random\n"
           "                      order (default 0: consume at once)\n"
           "  --seed=S            workload seed (default 1)\n"
           "  --mtu=BYTES         path MTU (default: the port's)\n"
           "  --name=NAME         out-of-band key prefix (default rima_stream)\n",
           prog, RS_MIN_SIZE, RS_MIN_SIZE);
}

static bool rs_parse_sizes(const char *s, struct rs_opts *o)
{
    char tmp[256];
    if (strlen(s) >= sizeof(tmp))
        return false;
    snprintf(tmp, sizeof(tmp), "%s", s);
    o->nsizes = 0;
    char *save = NULL;
    for (char *t = strtok_r(tmp, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        uint64_t v;
        if (o->nsizes == RS_MAX_SIZES || !rc_conn_parse_size(t, &v) || v < RS_MIN_SIZE ||
            v > (1u << 30))
            return false;
        o->sizes[o->nsizes++] = v;
    }
    return o->nsizes > 0;
}

static int rs_parse_args(int argc, char **argv, struct rs_opts *o)
{
    static const struct option longopts[] = {
        {"server", no_argument, NULL, OPT_SERVER},
        {"client", no_argument, NULL, OPT_CLIENT},
        {"id", required_argument, NULL, OPT_ID},
        {"senders", required_argument, NULL, OPT_SENDERS},
        {"messages", required_argument, NULL, OPT_MESSAGES},
        {"sizes", required_argument, NULL, OPT_SIZES},
        {"max-size", required_argument, NULL, OPT_MAX_SIZE},
        {"mode", required_argument, NULL, OPT_MODE},
        {"window", required_argument, NULL, OPT_WINDOW},
        {"region", required_argument, NULL, OPT_REGION},
        {"seed", required_argument, NULL, OPT_SEED},
        {"hold", required_argument, NULL, OPT_HOLD},
        {"mtu", required_argument, NULL, OPT_MTU},
        {"name", required_argument, NULL, OPT_NAME},
        {"help", no_argument, NULL, OPT_HELP},
        {NULL, 0, NULL, 0},
    };
    const char *prog = argc > 0 && argv[0] ? argv[0] : "rima_stream";
    memset(o, 0, sizeof(*o));
    snprintf(o->name, sizeof(o->name), "rima_stream");
    o->mode = RIMA_AUTO;
    o->senders = 1;
    o->messages = 1000; /* estimate: many laps of the default region */
    o->max_size = 4096; /* one 4 KiB MTU packet at most */
    o->window = 16;     /* estimate: enough to keep a 100 Gb/s link busy at 4 KiB */
    o->region_bytes = 1 << 20;
    o->seed = 1;
    optind = 0; /* GNU getopt: full re-initialisation for each instance */
    opterr = 1;
    for (;;) {
        int c = getopt_long(argc, argv, "", longopts, NULL);
        if (c == -1)
            break;
        bool ok = true;
        uint64_t v = 0;
        switch (c) {
        case OPT_SERVER:
            o->role = RC_CONN_ROLE_SERVER;
            break;
        case OPT_CLIENT:
            o->role = RC_CONN_ROLE_CLIENT;
            break;
        case OPT_ID:
            ok = rc_conn_parse_uint(optarg, 0, RS_MAX_SENDERS - 1, &o->id);
            break;
        case OPT_SENDERS:
            ok = rc_conn_parse_uint(optarg, 1, RS_MAX_SENDERS, &o->senders);
            break;
        case OPT_MESSAGES:
            ok = rc_conn_parse_uint(optarg, 1, 10000000, &o->messages);
            break;
        case OPT_SIZES:
            ok = rs_parse_sizes(optarg, o);
            break;
        case OPT_MAX_SIZE:
            ok = rc_conn_parse_size(optarg, &o->max_size) && o->max_size >= RS_MIN_SIZE &&
                 o->max_size <= (1u << 30);
            o->nsizes = 0;
            break;
        case OPT_MODE:
            ok = strcmp(optarg, "hw") == 0 || strcmp(optarg, "sw") == 0 ||
                 strcmp(optarg, "auto") == 0;
            o->mode = strcmp(optarg, "hw") == 0   ? RIMA_HW
                      : strcmp(optarg, "sw") == 0 ? RIMA_SW
                                                  : RIMA_AUTO;
            break;
        case OPT_WINDOW:
            ok = rc_conn_parse_uint(optarg, 1, 1024, &o->window);
            break;
        case OPT_REGION:
            ok = rc_conn_parse_size(optarg, &o->region_bytes) && o->region_bytes > 0;
            break;
        case OPT_SEED:
            ok = rc_conn_parse_uint(optarg, 0, UINT64_MAX, &o->seed);
            break;
        case OPT_HOLD:
            ok = rc_conn_parse_uint(optarg, 0, 65536, &o->hold);
            break;
        case OPT_MTU:
            ok = rc_conn_parse_uint(optarg, 256, 4096, &v) && (v & (v - 1)) == 0;
            o->mtu_bytes = v;
            break;
        case OPT_NAME:
            ok = optarg[0] != '\0' && strlen(optarg) < sizeof(o->name);
            if (ok)
                snprintf(o->name, sizeof(o->name), "%s", optarg);
            break;
        case OPT_HELP:
            rs_usage(prog);
            return -1;
        default:
            fprintf(stderr, "%s: try --help\n", prog);
            return RS_EXIT_ERROR;
        }
        if (!ok) {
            fprintf(stderr, "%s: bad value for --%s: '%s'\n", prog, longopts[c - OPT_SERVER].name,
                    optarg ? optarg : "");
            return RS_EXIT_ERROR;
        }
    }
    if (argc - optind > 1) {
        fprintf(stderr, "%s: unexpected argument '%s'\n", prog, argv[optind + 1]);
        return RS_EXIT_ERROR;
    }
    if (o->role == RC_CONN_ROLE_NONE) {
        fprintf(stderr, "%s: give --server or --client (try --help)\n", prog);
        return RS_EXIT_ERROR;
    }
    if (o->role == RC_CONN_ROLE_CLIENT && o->id >= o->senders && o->senders > 1) {
        fprintf(stderr, "%s: --id=%" PRIu64 " not below --senders=%" PRIu64 "\n", prog, o->id,
                o->senders);
        return RS_EXIT_ERROR;
    }
    return 0;
}

static uint32_t rs_opts_hash(const struct rs_opts *o)
{
    uint64_t w[4 + RS_MAX_SIZES] = {o->messages, o->seed, o->nsizes ? 0 : o->max_size, o->nsizes};
    for (uint32_t i = 0; i < o->nsizes; i++)
        w[4 + i] = o->sizes[i];
    return rc_conn_hash_words(w, 4 + o->nsizes);
}

static uint64_t rs_largest(const struct rs_opts *o)
{
    uint64_t m = o->nsizes ? 0 : o->max_size;
    for (uint32_t i = 0; i < o->nsizes; i++)
        m = o->sizes[i] > m ? o->sizes[i] : m;
    return m;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* nearest rank over sorted samples */
static double rs_pct_us(const uint32_t *sorted, size_t n, double p)
{
    if (!n)
        return 0;
    size_t k = (size_t)(p / 100.0 * (double)n + 0.999999);
    k = k < 1 ? 1 : (k > n ? n : k);
    return sorted[k - 1] / 1000.0;
}

/* ------------------------------------------------------------ server */

struct rs_rx {
    uint32_t qp_num;
    uint64_t size_rng;
    uint32_t next_seq;
    uint64_t messages, bytes, hash;
};

struct rs_server {
    const struct rs_opts *o;
    const char *prog;
    struct rc_conn base;
    struct rc_conn *pairs;
    char (*names)[RC_CONN_NAME_MAX];
    struct ibv_cq *aq_cq;
    struct rima_aq *aq;
    struct rs_rx *rx;
    uint8_t *expect;
    struct rima_msg *held;
    uint64_t nheld, rng, violations, checked, checked_bytes;
    bool reported_violation;
};

static void rs_violation(struct rs_server *S, uint32_t sender, uint32_t seq_got, uint32_t seq_want,
                         uint32_t len_got, uint32_t len_want, int check)
{
    S->violations++;
    if (S->reported_violation)
        return;
    S->reported_violation = true;
    fprintf(stderr, "%s server: VIOLATION: sender %u seq %u (want %u) len %u (want %u) check %d\n",
            S->prog, sender, seq_got, seq_want, len_got, len_want, check);
    struct host_kv kv[] = {{"sender", sender},   {"seq_got", seq_got},   {"seq_want", seq_want},
                           {"len_got", len_got}, {"len_want", len_want}, {"check", check}};
    host_report("rima_violation", kv, sizeof(kv) / sizeof(kv[0]));
}

static void rs_check(struct rs_server *S, const struct rima_msg *m)
{
    const struct rs_opts *o = S->o;
    uint32_t qp_sender = UINT32_MAX;
    for (uint32_t i = 0; i < o->senders; i++)
        if (S->rx[i].qp_num == m->qp_num)
            qp_sender = i;
    uint32_t sender = m->len >= RS_HDR_BYTES ? (uint32_t)rc_conn_get_le(m->addr, 4) : UINT32_MAX;
    uint32_t seq = m->len >= RS_HDR_BYTES ? (uint32_t)rc_conn_get_le(m->addr + 4, 4) : 0;
    if (qp_sender == UINT32_MAX || sender != qp_sender) {
        rs_violation(S, sender, seq, 0, m->len, 0, 1);
        return;
    }
    struct rs_rx *r = &S->rx[sender];
    uint32_t want_len = rs_next_size(o, &r->size_rng);
    uint32_t want_seq = ++r->next_seq;
    if (seq != want_seq) {
        rs_violation(S, sender, seq, want_seq, m->len, want_len, 2);
        return;
    }
    if (m->len != want_len || rc_conn_get_le(m->addr + 8, 4) != want_len) {
        rs_violation(S, sender, seq, want_seq, m->len, want_len, 3);
        return;
    }
    uint32_t c = rs_fnv32(2166136261u, m->addr, 12);
    c = rs_fnv32(c, m->addr + RS_HDR_BYTES, m->len - RS_HDR_BYTES);
    if (c != rc_conn_get_le(m->addr + 12, 4)) {
        rs_violation(S, sender, seq, want_seq, m->len, want_len, 4);
        return;
    }
    rs_fill(o, S->expect, sender, seq, want_len);
    if (memcmp(S->expect, m->addr, want_len) != 0) {
        rs_violation(S, sender, seq, want_seq, m->len, want_len, 5);
        return;
    }
    r->messages++;
    r->bytes += m->len;
    r->hash = rs_fnv64(r->hash, m->addr, m->len);
    S->checked++;
    S->checked_bytes += m->len;
}

static int rs_consume(struct rs_server *S, const struct rima_msg *m)
{
    int err = rima_aq_consume(S->aq, m);
    if (err)
        fprintf(stderr, "%s server: rima_aq_consume: %s\n", S->prog, strerror(err));
    return err;
}

/* --hold: consume one held message chosen at random. */
static int rs_release_one(struct rs_server *S)
{
    uint64_t k = rs_splitmix(&S->rng) % S->nheld;
    int err = rs_consume(S, &S->held[k]);
    S->held[k] = S->held[--S->nheld];
    return err;
}

static int rs_server_setup(struct rs_server *S)
{
    const struct rs_opts *o = S->o;
    struct ibv_device_attr dev;
    if (rc_conn_open_device(&S->base) || rc_conn_query(&S->base, &dev, (uint32_t)o->mtu_bytes) ||
        rc_conn_alloc_buf(&S->base, 4096) || rc_conn_create_pd_mr(&S->base, IBV_ACCESS_LOCAL_WRITE))
        return -1;
    uint64_t inflight = o->senders * o->window;
    int cqe = (int)(2 * inflight + 64);
    S->aq_cq = ibv_create_cq(S->base.ctx, 4 * cqe, NULL, NULL, 0);
    S->base.scq = ibv_create_cq(S->base.ctx, 16, NULL, NULL, 0);
    if (!S->aq_cq || !S->base.scq) {
        fprintf(stderr, "%s server: ibv_create_cq: %s\n", S->prog, strerror(errno));
        return -1;
    }
    struct rima_aq_opts ao = {.mode = o->mode,
                              .region_bytes = o->region_bytes,
                              .recv_depth = (uint32_t)(2 * inflight + 64)};
    S->aq = rima_aq_create(S->base.pd, S->aq_cq, &ao);
    if (!S->aq) {
        fprintf(stderr, "%s server: rima_aq_create(%s, region %" PRIu64 "): %s\n", S->prog,
                o->mode == RIMA_HW   ? "hw"
                : o->mode == RIMA_SW ? "sw"
                                     : "auto",
                o->region_bytes, strerror(errno));
        return -1;
    }
    uint8_t rd_atomic =
        (uint8_t)(dev.max_qp_rd_atom < RS_MAX_RD_ATOMIC ? dev.max_qp_rd_atom : RS_MAX_RD_ATOMIC);
    for (uint32_t i = 0; i < o->senders; i++) {
        struct rc_conn *c = &S->pairs[i];
        snprintf(S->names[i], RC_CONN_NAME_MAX, "%s/%u", o->name, i);
        rc_conn_init(c, S->prog, RC_CONN_ROLE_SERVER, S->names[i]);
        c->ctx = S->base.ctx;
        c->pd = S->base.pd;
        c->mr = S->base.mr;
        c->buf = S->base.buf;
        c->buf_bytes = S->base.buf_bytes;
        c->port = S->base.port;
        c->gid = S->base.gid;
        c->mtu = S->base.mtu;
        struct ibv_qp_init_attr ia;
        memset(&ia, 0, sizeof(ia));
        ia.send_cq = S->base.scq;
        ia.recv_cq = S->base.scq;
        ia.cap.max_send_wr = 1;
        ia.cap.max_recv_wr = 1;
        ia.cap.max_send_sge = 1;
        ia.cap.max_recv_sge = 1;
        ia.qp_type = IBV_QPT_RC;
        rima_aq_qp_init_attr(S->aq, &ia);
        c->qp = ibv_create_qp(c->pd, &ia);
        if (!c->qp) {
            fprintf(stderr, "%s server: ibv_create_qp: %s\n", S->prog, strerror(errno));
            return -1;
        }
        S->rx[i].qp_num = c->qp->qp_num;
        S->rx[i].size_rng = rs_size_seed(o, i);
        S->rx[i].hash = 0xcbf29ce484222325ull;
        if (rc_conn_exchange(c, rs_opts_hash(o), 1))
            return -1;
        if (c->peer.opts_hash != rs_opts_hash(o)) {
            fprintf(stderr, "%s server: sender %u runs other options (--messages/--sizes/--seed)\n",
                    S->prog, i);
            return -1;
        }
        if (rc_conn_connect(c, RIMA_QP_ACCESS, rd_atomic))
            return -1;
    }
    struct rima_aq_remote rem;
    uint8_t wire[RIMA_REMOTE_BYTES];
    char key[RC_CONN_KEY_MAX];
    rima_aq_export(S->aq, &rem);
    rima_remote_encode(&rem, wire);
    snprintf(key, sizeof(key), "%s/aq", o->name);
    if (host_oob_put(key, wire, sizeof(wire))) {
        fprintf(stderr, "%s server: out-of-band put %s: %s\n", S->prog, key, strerror(errno));
        return -1;
    }
    return 0;
}

static int rs_server_run(struct rs_server *S)
{
    const struct rs_opts *o = S->o;
    for (uint32_t i = 0; i < o->senders; i++)
        if (rc_conn_barrier(&S->pairs[i], 0, -1) != 0)
            return RS_EXIT_ERROR;
    uint64_t total = o->senders * o->messages, got = 0;
    uint64_t t0 = host_now_ns();
    struct rima_msg msgs[RS_POLL_BATCH];
    while (got < total) {
        int n = rima_poll_aq(S->aq, RS_POLL_BATCH, msgs);
        if (n < 0) {
            fprintf(stderr, "%s server: rima_poll_aq: %s\n", S->prog, strerror(errno));
            return RS_EXIT_ERROR;
        }
        for (int i = 0; i < n; i++) {
            rs_check(S, &msgs[i]);
            got++;
            if (o->hold) {
                if (S->nheld == o->hold && rs_release_one(S))
                    return RS_EXIT_ERROR;
                S->held[S->nheld++] = msgs[i];
            } else if (rs_consume(S, &msgs[i])) {
                return RS_EXIT_ERROR;
            }
        }
        if (n == 0 && S->nheld && rs_release_one(S))
            return RS_EXIT_ERROR;
    }
    uint64_t dt = host_now_ns() - t0;
    while (S->nheld)
        if (rs_release_one(S))
            return RS_EXIT_ERROR;
    /* the clients' latency samples */
    size_t nlat = (size_t)total;
    uint32_t *lat = malloc(nlat * sizeof(uint32_t));
    uint8_t *wire = malloc(o->messages * 4);
    if (!lat || !wire) {
        free(lat);
        free(wire);
        return RS_EXIT_ERROR;
    }
    char key[RC_CONN_KEY_MAX];
    for (uint32_t i = 0; i < o->senders; i++) {
        snprintf(key, sizeof(key), "%s/lat/%u", o->name, i);
        if (host_oob_get(key, wire, o->messages * 4)) {
            fprintf(stderr, "%s server: out-of-band get %s: %s\n", S->prog, key, strerror(errno));
            free(lat);
            free(wire);
            return RS_EXIT_ERROR;
        }
        for (uint64_t k = 0; k < o->messages; k++)
            lat[i * o->messages + k] = (uint32_t)rc_conn_get_le(wire + 4 * k, 4);
    }
    free(wire);
    qsort(lat, nlat, sizeof(uint32_t), cmp_u32);
    struct rima_aq_stats st;
    rima_aq_query(S->aq, &st);
    for (uint32_t i = 0; i < o->senders; i++) {
        struct rs_rx *r = &S->rx[i];
        struct host_kv kv[] = {{"sender", i},
                               {"messages", (double)r->messages},
                               {"bytes", (double)r->bytes},
                               {"hash_hi", (double)(r->hash >> 32)},
                               {"hash_lo", (double)(r->hash & 0xffffffffu)}};
        host_report("rima_stream_rx", kv, sizeof(kv) / sizeof(kv[0]));
    }
    struct host_kv kv[] = {
        {"mode", st.mode},
        {"senders", (double)o->senders},
        {"messages_checked", (double)S->checked},
        {"bytes_checked", (double)S->checked_bytes},
        {"violations", (double)S->violations},
        {"duration_us", (double)dt / 1e3},
        {"msg_rate_mps", dt ? (double)total * 1e3 / (double)dt : 0},
        {"t_p50_us", rs_pct_us(lat, nlat, 50)},
        {"t_p99_us", rs_pct_us(lat, nlat, 99)},
        {"region_bytes", (double)st.region_bytes},
        {"pad_bytes", (double)st.pad_bytes},
        {"peak_pending_bytes", (double)st.peak_pending_bytes},
        {"footprint_bytes", (double)st.footprint_bytes},
        {"consumed", (double)st.consumed},
        {"rnr_naks", (double)st.rnr_naks},
    };
    free(lat);
    host_report("rima_stream", kv, sizeof(kv) / sizeof(kv[0]));
    int status = S->violations ? RS_EXIT_VIOLATION : 0;
    for (uint32_t i = 0; i < o->senders; i++)
        rc_conn_barrier(&S->pairs[i], status, -1);
    return status;
}

static int rs_server(const struct rs_opts *o, const char *prog)
{
    struct rs_server S;
    memset(&S, 0, sizeof(S));
    S.o = o;
    S.prog = prog;
    S.rng = o->seed ^ 0x5bd1e995u;
    rc_conn_init(&S.base, prog, RC_CONN_ROLE_SERVER, o->name);
    S.pairs = calloc(o->senders, sizeof(*S.pairs));
    S.names = calloc(o->senders, sizeof(*S.names));
    S.rx = calloc(o->senders, sizeof(*S.rx));
    S.expect = malloc(rs_largest(o));
    S.held = calloc(o->hold ? o->hold : 1, sizeof(*S.held));
    int rc = RS_EXIT_ERROR;
    if (S.pairs && S.names && S.rx && S.expect && S.held && rs_server_setup(&S) == 0)
        rc = rs_server_run(&S);
    for (uint32_t i = 0; S.pairs && i < o->senders; i++)
        if (S.pairs[i].qp)
            ibv_destroy_qp(S.pairs[i].qp);
    if (S.aq)
        rima_aq_destroy(S.aq);
    if (S.aq_cq)
        ibv_destroy_cq(S.aq_cq);
    rc_conn_close(&S.base);
    free(S.pairs);
    free(S.names);
    free(S.rx);
    free(S.expect);
    free(S.held);
    return rc;
}

/* ------------------------------------------------------------ client */

static int rs_client_run(const struct rs_opts *o, const char *prog, struct rc_conn *c,
                         struct rima_sender *s, uint32_t *lat)
{
    uint32_t sender = (uint32_t)o->id;
    uint64_t max = rs_largest(o), rng = rs_size_seed(o, sender);
    uint64_t *t_post = calloc(o->window, sizeof(uint64_t));
    if (!t_post)
        return RS_EXIT_ERROR;
    if (rc_conn_barrier(c, 0, -1) != 0) {
        free(t_post);
        return RS_EXIT_ERROR;
    }
    uint64_t posted = 0, done = 0, bytes = 0;
    struct rima_send_wc wc[RS_POLL_BATCH];
    int rc = 0;
    while (done < o->messages && rc == 0) {
        while (posted < o->messages && posted - done < o->window) {
            uint32_t slot = (uint32_t)(posted % o->window);
            uint8_t *buf = c->buf + (size_t)slot * max;
            uint32_t len = rs_next_size(o, &rng);
            rs_fill(o, buf, sender, (uint32_t)posted + 1, len);
            struct ibv_sge sge = {
                .addr = (uint64_t)(uintptr_t)buf, .length = len, .lkey = c->mr->lkey};
            t_post[slot] = host_now_ns();
            int err = rima_post_append(s, posted, &sge, 1, IBV_SEND_SIGNALED);
            if (err) {
                fprintf(stderr, "%s client %u: rima_post_append: %s\n", prog, sender,
                        strerror(err));
                rc = RS_EXIT_ERROR;
                break;
            }
            bytes += len;
            posted++;
        }
        int n = rima_poll_sender(s, RS_POLL_BATCH, wc);
        if (n < 0) {
            fprintf(stderr, "%s client %u: rima_poll_sender: %s\n", prog, sender, strerror(errno));
            rc = RS_EXIT_ERROR;
        }
        for (int i = 0; i < n && rc == 0; i++) {
            if (wc[i].status != IBV_WC_SUCCESS || wc[i].wr_id != done) {
                fprintf(stderr, "%s client %u: append %" PRIu64 ": %s\n", prog, sender, wc[i].wr_id,
                        ibv_wc_status_str(wc[i].status));
                rc = RS_EXIT_ERROR;
                break;
            }
            uint64_t d = host_now_ns() - t_post[done % o->window];
            lat[done] = d > UINT32_MAX ? UINT32_MAX : (uint32_t)d;
            done++;
        }
    }
    free(t_post);
    if (rc)
        return rc;
    uint32_t *sorted = malloc(o->messages * sizeof(uint32_t));
    if (!sorted)
        return RS_EXIT_ERROR;
    memcpy(sorted, lat, o->messages * sizeof(uint32_t));
    qsort(sorted, o->messages, sizeof(uint32_t), cmp_u32);
    double sum = 0;
    for (uint64_t i = 0; i < o->messages; i++)
        sum += sorted[i];
    struct rima_sender_stats st;
    rima_sender_query(s, &st);
    struct host_kv kv[] = {
        {"sender", sender},
        {"mode", o->mode},
        {"messages", (double)o->messages},
        {"bytes", (double)bytes},
        {"t_p50_us", rs_pct_us(sorted, o->messages, 50)},
        {"t_p99_us", rs_pct_us(sorted, o->messages, 99)},
        {"t_avg_us", sum / (double)o->messages / 1e3},
        {"t_max_us", sorted[o->messages - 1] / 1e3},
        {"faa", (double)st.faa},
        {"head_reads", (double)st.head_reads},
        {"dead_reservations", (double)st.dead_reservations},
        {"flow_waits", (double)st.flow_waits},
    };
    free(sorted);
    host_report("rima_append", kv, sizeof(kv) / sizeof(kv[0]));
    return 0;
}

static int rs_client(struct rs_opts *o, const char *prog)
{
    char name[RC_CONN_NAME_MAX];
    snprintf(name, sizeof(name), "%s/%" PRIu64, o->name, o->id);
    struct rc_conn c;
    rc_conn_init(&c, prog, RC_CONN_ROLE_CLIENT, name);
    struct ibv_device_attr dev;
    uint32_t sq_depth = (uint32_t)(2 * o->window + 2);
    struct rima_sender *s = NULL;
    uint32_t *lat = calloc(o->messages, sizeof(uint32_t));
    uint8_t *wire = malloc(o->messages * 4);
    int rc = RS_EXIT_ERROR;
    if (!lat || !wire)
        goto out;
    if (rc_conn_open_device(&c) || rc_conn_query(&c, &dev, (uint32_t)o->mtu_bytes) ||
        rc_conn_alloc_buf(&c, (size_t)(o->window * rs_largest(o))) ||
        rc_conn_create_pd_mr(&c, IBV_ACCESS_LOCAL_WRITE) || rc_conn_create_cqs(&c, sq_depth, 1) ||
        rc_conn_create_qp(&c, sq_depth, 1, 0, NULL) || rc_conn_exchange(&c, rs_opts_hash(o), 1))
        goto out;
    uint8_t rd_atomic =
        (uint8_t)(dev.max_qp_rd_atom < RS_MAX_RD_ATOMIC ? dev.max_qp_rd_atom : RS_MAX_RD_ATOMIC);
    if (c.peer.opts_hash != rs_opts_hash(o)) {
        fprintf(stderr, "%s client: the server runs other options (--messages/--sizes/--seed)\n",
                prog);
        goto out;
    }
    if (rc_conn_connect(&c, RIMA_QP_ACCESS, rd_atomic))
        goto out;
    uint8_t aqw[RIMA_REMOTE_BYTES];
    char key[RC_CONN_KEY_MAX];
    struct rima_aq_remote rem;
    snprintf(key, sizeof(key), "%s/aq", o->name);
    if (host_oob_get(key, aqw, sizeof(aqw)) || rima_remote_decode(aqw, &rem)) {
        fprintf(stderr, "%s client: queue descriptor %s: %s\n", prog, key, strerror(errno));
        goto out;
    }
    o->mode = rem.mode;
    struct rima_sender_opts so = {.window = (uint32_t)o->window, .sq_depth = sq_depth};
    s = rima_sender_create(c.pd, c.qp, c.scq, &rem, &so);
    if (!s) {
        fprintf(stderr, "%s client: rima_sender_create: %s\n", prog, strerror(errno));
        goto out;
    }
    rc = rs_client_run(o, prog, &c, s, lat);
    if (rc == 0) {
        for (uint64_t k = 0; k < o->messages; k++)
            rc_conn_put_le(wire + 4 * k, lat[k], 4);
        snprintf(key, sizeof(key), "%s/lat/%" PRIu64, o->name, o->id);
        if (host_oob_put(key, wire, o->messages * 4))
            rc = RS_EXIT_ERROR;
    }
    if (rc == 0)
        rc = rc_conn_barrier(&c, 0, RS_EXIT_ERROR);
out:
    if (s)
        rima_sender_destroy(s);
    rc_conn_close(&c);
    free(lat);
    free(wire);
    return rc;
}

int rima_stream_main(int argc, char **argv)
{
    struct rs_opts o;
    const char *prog = argc > 0 && argv[0] ? argv[0] : "rima_stream";
    int rc = rs_parse_args(argc, argv, &o);
    if (rc)
        return rc < 0 ? 0 : rc;
    return o.role == RC_CONN_ROLE_SERVER ? rs_server(&o, prog) : rs_client(&o, prog);
}
