/* taranov: the driver of the uni-directional channels of Taranov et al.
 * (protocols/taranov/channel.h, docs/taranov.md).
 *
 *   taranov --channel=NAME --server|--client [--id=I --senders=N]
 *           [--messages=N] [--sizes=LIST] [--max-size=B] [--slots=N]
 *           [--ring-bytes=B] [--dm] [--prefetch] [--zero-copy] [--blocking]
 *           [--mode=stream|pingpong|rpc] [--window=N] [--slow-writer-ns=N]
 *           [--back-channel=NAME] [--resp-size=B] [--copy-store=B] [--cdf]
 *           [--mtu=B] [--name=P] [--list] [--verbose]
 *
 * --server is the channel's receiver, --client a sender (sender --id of
 * --senders for the N:1 channels).  1:N read rings: every reader is a
 * --server --id=I --receivers=N, the sender a --client --receivers=N; every
 * reader checks every message and puts its verdict under
 * "<name>/done/<I>", the sender exits with the worst.  Every side takes
 * the same options.
 *
 * rpc (Figures 4 and 7): request / response with --window requests
 * outstanding, optional copy of each request into a log-structured store
 * on the server (--copy-store), responses through --back-channel; see
 * rpc_client below.
 *
 * stream: each sender sends --messages messages; message i (seq = i + 1)
 * of sender s has size sizes[(i + s) mod n] and carries
 *   [0,4) seq  [4,8) length  [8,12) sender  [12,16) checksum (FNV-1a-32 over
 *   everything but [12,24))  [16,24) send time (ns)  [24,len) body
 * (a pseudo-random body seeded by sender and seq).  The bufferless channel
 * carries 4-byte messages: seq (20 bits), sender (4 bits), an 8-bit hash.
 * The receiver checks every message: intact (length, checksum, body),
 * exactly once (a bitmap per sender), and in order per sender when the
 * channel declares features.ordered.  It reports "order_check"
 * (messages_checked, bytes_checked, violations, messages_out_of_order) and
 * "taranov_stream" (throughput and one-way latency from the send time
 * stamp: the simulator's clock is global); on the first bad message an
 * "order_violation" row and a stderr line with VIOLATION, exit status 1
 * (the contract of `rnicsim check-order`, tools/rnicsim/check_order.c).
 *
 * pingpong (Section 6: point-to-point channels duplicated, one per
 * direction): the client sends a message through "<name>/fwd", the server
 * checks it and sends it back through "<name>/back"; the client checks the
 * echo and reports "taranov_pingpong" per size (round trip and half of it).
 *
 * Exit status: 0 ok, 1 a message failed its check, 2 usage, set-up or
 * transport error.  Only verbs and host_* (protocols/README.md). */
#include "protocols/taranov/taranov.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rnicsim/host.h>

#include "protocols/common/pages.h"
#include "protocols/common/rc_conn.h"
#include "protocols/taranov/channel.h"

enum { TR_MAX_SIZES = 16, TR_HDR = 24, TR_NAME_MAX = 96 };
enum tr_exit { TR_OK = 0, TR_VIOLATION = 1, TR_ERROR = 2 };
enum tr_mode { TR_STREAM, TR_PINGPONG, TR_RPC };

struct tr_opts {
    const struct chan_ops *ops, *back_ops; /* back_ops: pingpong / rpc reverse channel */
    bool server, client, list, verbose, dm, prefetch, zero_copy, blocking, cdf, batch;
    enum tr_mode mode;
    uint64_t id, senders, receivers, messages, max_size, slots, ring_bytes, window, slow_ns, mtu;
    uint64_t resp_size;  /* rpc: response bytes, 0 = the request's size */
    uint64_t copy_store; /* rpc server: log-structured store bytes, 0 = zero-copy */
    uint64_t back_max;   /* largest message of the reverse channel */
    uint64_t sizes[TR_MAX_SIZES];
    size_t n_sizes;
    char name[TR_NAME_MAX];
};

/* ---------------------------------------------------------------- messages */

static uint32_t fnv(uint32_t h, const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 16777619u;
    }
    return h;
}
static uint32_t msg_checksum(const uint8_t *m, size_t len)
{
    uint32_t h = fnv(2166136261u, m, 12);
    return len > TR_HDR ? fnv(h, m + TR_HDR, len - TR_HDR) : h;
}
static uint64_t body_seed(uint32_t sender, uint32_t seq)
{
    return ((uint64_t)sender << 32 | seq) * 0x9e3779b97f4a7c15ull + 1;
}
static void put32(uint8_t *p, uint32_t v)
{
    memcpy(p, &v, 4);
}
static uint32_t get32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}
static uint8_t hash8(uint32_t v)
{
    return (uint8_t)((v * 2654435761u) >> 24);
}

static bool tiny(const struct tr_opts *o)
{
    return o->max_size < TR_HDR;
}

static void msg_fill(uint8_t *m, size_t len, uint32_t sender, uint32_t seq)
{
    if (len < TR_HDR) { /* the bufferless channel's 4-byte message */
        uint32_t v = (seq & 0xfffffu) | (sender & 0xfu) << 20;
        put32(m, v | (uint32_t)hash8(v) << 24);
        return;
    }
    put32(m, seq);
    put32(m + 4, (uint32_t)len);
    put32(m + 8, sender);
    uint64_t x = body_seed(sender, seq);
    for (size_t i = TR_HDR; i < len; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        m[i] = (uint8_t)x;
    }
    put32(m + 12, msg_checksum(m, len));
}
static void msg_stamp(uint8_t *m, size_t len)
{
    if (len >= TR_HDR) {
        uint64_t t = host_now_ns();
        memcpy(m + 16, &t, 8);
    }
}

/* What the receiver found; check = 0 when the message is valid. */
enum tr_check {
    TRC_OK,
    TRC_SEQ = 1,
    TRC_LENGTH = 2,
    TRC_CHECKSUM = 3,
    TRC_SENDER = 4,
    TRC_DUPLICATE = 5,
    TRC_ORDER = 6,
    TRC_BODY = 7,
    TRC_FRAMING = 8, /* the channel found its bell / length words corrupt */
};
static const char *const tr_check_name[] = {"ok",     "sequence number", "length", "checksum",
                                            "sender", "duplicate",       "order",  "body",
                                            "framing"};

struct tr_msg {
    uint32_t seq, sender, len_field, sum_stored, sum_computed;
    uint64_t t_send;
    size_t first_bad;
};

static enum tr_check msg_check(const struct tr_opts *o, const uint8_t *m, size_t len,
                               struct tr_msg *g)
{
    memset(g, 0, sizeof(*g));
    if (tiny(o)) {
        uint32_t v = get32(m), low = v & 0xffffffu;
        g->seq = v & 0xfffffu;
        g->sender = (v >> 20) & 0xfu;
        g->len_field = 4;
        g->sum_stored = v >> 24;
        g->sum_computed = hash8(low);
        if (len != 4)
            return TRC_LENGTH;
        if (g->sum_stored != g->sum_computed)
            return TRC_CHECKSUM;
        if (g->sender >= o->senders)
            return TRC_SENDER;
        if (g->seq == 0 || g->seq > o->messages)
            return TRC_SEQ;
        return TRC_OK;
    }
    if (len < TR_HDR)
        return TRC_LENGTH;
    g->seq = get32(m);
    g->len_field = get32(m + 4);
    g->sender = get32(m + 8);
    g->sum_stored = get32(m + 12);
    memcpy(&g->t_send, m + 16, 8);
    g->sum_computed = msg_checksum(m, len);
    if (g->len_field != len)
        return TRC_LENGTH;
    if (g->sum_stored != g->sum_computed) {
        uint64_t x = body_seed(g->sender, g->seq);
        g->first_bad = len;
        for (size_t i = TR_HDR; i < len; i++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            if (m[i] != (uint8_t)x) {
                g->first_bad = i;
                break;
            }
        }
        return g->first_bad < len ? TRC_BODY : TRC_CHECKSUM;
    }
    if (g->sender >= o->senders)
        return TRC_SENDER;
    if (g->seq == 0 || g->seq > o->messages)
        return TRC_SEQ;
    return TRC_OK;
}

/* ---------------------------------------------------------------- options */

static bool parse_sizes(const char *s, struct tr_opts *o)
{
    char buf[256];
    if (strlen(s) >= sizeof(buf))
        return false;
    snprintf(buf, sizeof(buf), "%s", s);
    o->n_sizes = 0;
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (o->n_sizes == TR_MAX_SIZES ||
            !rc_conn_parse_uint(t, 1, 1u << 30, &o->sizes[o->n_sizes]))
            return false;
        o->n_sizes++;
    }
    return o->n_sizes > 0;
}

static void usage(const char *prog)
{
    printf("usage: %s --channel=NAME --server|--client [options]\n"
           "  --channel=NAME      one of --list\n"
           "  --server | --client receiver | sender\n"
           "  --id=I --senders=N  this sender's index, number of senders (N:1 channels)\n"
           "  --receivers=N       readers (1:N read rings)\n"
           "  --messages=N        per sender (stream) or per size (pingpong), default 1000\n"
           "  --sizes=LIST        message sizes, default 24,64,256,1024,4096 (>= 24; the\n"
           "                      bufferless channel sends 4-byte messages)\n"
           "  --max-size=B        largest message / slot size (default: the largest size)\n"
           "  --slots=N           slots / receive buffers / outstanding messages, default 16\n"
           "  --ring-bytes=B      ring size (multiple of 4 KiB), default 64 KiB\n"
           "  --dm[=0|1]          shared rings: head and tail in NIC device memory\n"
           "  --prefetch --zero-copy --blocking   channel options (channel.h)\n"
           "  --mode=stream|pingpong|rpc          default stream\n"
           "  --window=N          stream: messages a sender keeps in flight; rpc: requests\n"
           "                      outstanding (sent, response not yet received); default --slots\n"
           "  --back-channel=NAME pingpong/rpc: channel of the responses (default --channel)\n"
           "  --resp-size=B       rpc: response size (default: the request's size)\n"
           "  --copy-store=B      rpc server: copy every request into a log-structured store\n"
           "                      of B bytes (wrapping) before responding (Fig 4 \"with copy\")\n"
           "  --cdf               rpc: also report 100 round-trip percentiles per size\n"
           "  --batch             rpc: one response for all requests the server finds\n"
           "                      waiting (it carries their count; the client retires\n"
           "                      that many of its oldest requests)\n"
           "  --slow-writer-ns=N  shared channels: delay each WRITE after reserving\n"
           "  --mtu=B --name=P --verbose --list\n",
           prog);
}

enum {
    OPT_CHANNEL = 256,
    OPT_SERVER,
    OPT_CLIENT,
    OPT_ID,
    OPT_SENDERS,
    OPT_RECEIVERS,
    OPT_MESSAGES,
    OPT_SIZES,
    OPT_MAX_SIZE,
    OPT_SLOTS,
    OPT_RING,
    OPT_DM,
    OPT_PREFETCH,
    OPT_ZERO_COPY,
    OPT_BLOCKING,
    OPT_MODE,
    OPT_WINDOW,
    OPT_SLOW,
    OPT_MTU,
    OPT_NAME,
    OPT_LIST,
    OPT_VERBOSE,
    OPT_HELP,
    OPT_BACK,
    OPT_RESP,
    OPT_COPY,
    OPT_CDF,
    OPT_BATCH,
};

/* 0 ok, 1 usage printed (exit 0), -1 error (exit 2). */
static int parse(int argc, char **argv, struct tr_opts *o)
{
    static const struct option lo[] = {
        {"channel", required_argument, NULL, OPT_CHANNEL},
        {"server", no_argument, NULL, OPT_SERVER},
        {"client", no_argument, NULL, OPT_CLIENT},
        {"id", required_argument, NULL, OPT_ID},
        {"senders", required_argument, NULL, OPT_SENDERS},
        {"receivers", required_argument, NULL, OPT_RECEIVERS},
        {"messages", required_argument, NULL, OPT_MESSAGES},
        {"sizes", required_argument, NULL, OPT_SIZES},
        {"max-size", required_argument, NULL, OPT_MAX_SIZE},
        {"slots", required_argument, NULL, OPT_SLOTS},
        {"ring-bytes", required_argument, NULL, OPT_RING},
        {"dm", optional_argument, NULL, OPT_DM},
        {"prefetch", no_argument, NULL, OPT_PREFETCH},
        {"zero-copy", no_argument, NULL, OPT_ZERO_COPY},
        {"blocking", no_argument, NULL, OPT_BLOCKING},
        {"mode", required_argument, NULL, OPT_MODE},
        {"window", required_argument, NULL, OPT_WINDOW},
        {"slow-writer-ns", required_argument, NULL, OPT_SLOW},
        {"mtu", required_argument, NULL, OPT_MTU},
        {"name", required_argument, NULL, OPT_NAME},
        {"list", no_argument, NULL, OPT_LIST},
        {"verbose", no_argument, NULL, OPT_VERBOSE},
        {"help", no_argument, NULL, OPT_HELP},
        {"back-channel", required_argument, NULL, OPT_BACK},
        {"resp-size", required_argument, NULL, OPT_RESP},
        {"copy-store", required_argument, NULL, OPT_COPY},
        {"cdf", no_argument, NULL, OPT_CDF},
        {"batch", no_argument, NULL, OPT_BATCH},
        {NULL, 0, NULL, 0},
    };
    const char *prog = argc > 0 && argv[0] ? argv[0] : "taranov";
    memset(o, 0, sizeof(*o));
    snprintf(o->name, sizeof(o->name), "taranov");
    o->senders = 1;
    o->receivers = 1;
    o->messages = 1000;                    /* estimate: many laps of a 64 KiB ring */
    parse_sizes("24,64,256,1024,4096", o); /* header-only .. one 4 KiB MTU packet */
    o->slots = 16;                         /* the paper's 16 outstanding messages (Section 6.3) */
    o->ring_bytes = 64 * 1024;
    optind = 0;
    opterr = 1;
    const char *chname = NULL, *backname = NULL;
    for (;;) {
        int c = getopt_long(argc, argv, "", lo, NULL);
        if (c == -1)
            break;
        bool ok = true;
        switch (c) {
        case OPT_CHANNEL:
            chname = optarg;
            break;
        case OPT_SERVER:
            o->server = true;
            break;
        case OPT_CLIENT:
            o->client = true;
            break;
        case OPT_ID:
            ok = rc_conn_parse_uint(optarg, 0, 15, &o->id);
            break;
        case OPT_SENDERS:
            ok = rc_conn_parse_uint(optarg, 1, 16, &o->senders);
            break;
        case OPT_RECEIVERS:
            ok = rc_conn_parse_uint(optarg, 1, 16, &o->receivers);
            break;
        case OPT_MESSAGES:
            ok = rc_conn_parse_uint(optarg, 1, 0xfffff, &o->messages);
            break;
        case OPT_SIZES:
            ok = parse_sizes(optarg, o);
            break;
        case OPT_MAX_SIZE:
            ok = rc_conn_parse_uint(optarg, 4, 1u << 30, &o->max_size);
            break;
        case OPT_SLOTS:
            ok = rc_conn_parse_uint(optarg, 1, 4096, &o->slots);
            break;
        case OPT_RING:
            ok = rc_conn_parse_uint(optarg, 4096, 1ull << 34, &o->ring_bytes) &&
                 o->ring_bytes % 4096 == 0;
            break;
        case OPT_DM: /* --dm, --dm=1|yes, --dm=0|no */
            ok = !optarg || strcmp(optarg, "1") == 0 || strcmp(optarg, "yes") == 0 ||
                 strcmp(optarg, "0") == 0 || strcmp(optarg, "no") == 0;
            o->dm = !optarg || strcmp(optarg, "1") == 0 || strcmp(optarg, "yes") == 0;
            break;
        case OPT_PREFETCH:
            o->prefetch = true;
            break;
        case OPT_ZERO_COPY:
            o->zero_copy = true;
            break;
        case OPT_BLOCKING:
            o->blocking = true;
            break;
        case OPT_MODE:
            ok = strcmp(optarg, "stream") == 0 || strcmp(optarg, "pingpong") == 0 ||
                 strcmp(optarg, "rpc") == 0;
            o->mode = strcmp(optarg, "pingpong") == 0 ? TR_PINGPONG
                      : strcmp(optarg, "rpc") == 0    ? TR_RPC
                                                      : TR_STREAM;
            break;
        case OPT_WINDOW:
            ok = rc_conn_parse_uint(optarg, 1, 4096, &o->window);
            break;
        case OPT_SLOW:
            ok = rc_conn_parse_uint(optarg, 0, 1000000000ull, &o->slow_ns);
            break;
        case OPT_MTU:
            ok = rc_conn_parse_uint(optarg, 256, 4096, &o->mtu);
            break;
        case OPT_NAME:
            ok = optarg[0] && strlen(optarg) + 16 < sizeof(o->name);
            if (ok)
                snprintf(o->name, sizeof(o->name), "%s", optarg);
            break;
        case OPT_LIST:
            o->list = true;
            break;
        case OPT_VERBOSE:
            o->verbose = true;
            break;
        case OPT_HELP:
            usage(prog);
            return 1;
        case OPT_BACK:
            backname = optarg;
            break;
        case OPT_RESP:
            ok = rc_conn_parse_uint(optarg, 4, 1u << 30, &o->resp_size);
            break;
        case OPT_COPY:
            ok = rc_conn_parse_uint(optarg, 0, 1ull << 34, &o->copy_store); /* 0: zero-copy */
            break;
        case OPT_CDF:
            o->cdf = true;
            break;
        case OPT_BATCH:
            o->batch = true;
            break;
        default:
            fprintf(stderr, "%s: unknown option (see --help)\n", prog);
            return -1;
        }
        if (!ok) {
            fprintf(stderr, "%s: bad value '%s' for --%s\n", prog, optarg ? optarg : "",
                    lo[c - OPT_CHANNEL].name);
            return -1;
        }
    }
    if (o->list)
        return 0;
    if (optind < argc && !(optind == argc - 1)) {
        fprintf(stderr, "%s: unexpected argument '%s'\n", prog, argv[optind]);
        return -1;
    }
    if (o->server == o->client) {
        fprintf(stderr, "%s: give exactly one of --server, --client\n", prog);
        return -1;
    }
    if (!chname || !(o->ops = chan_find(chname))) {
        fprintf(stderr, "%s: unknown or missing --channel%s%s (see --list)\n", prog,
                chname ? "=" : "", chname ? chname : "");
        return -1;
    }
    /* --id names a sender (N:1) or, on a --server of a 1:N channel, a reader */
    bool reader_id = o->server && o->receivers > 1;
    uint64_t ids = reader_id ? o->receivers : o->senders;
    if (o->id >= ids) {
        fprintf(stderr, "%s: --id=%" PRIu64 " must be < --%s=%" PRIu64 "\n", prog, o->id,
                reader_id ? "receivers" : "senders", ids);
        return -1;
    }
    if (o->mode != TR_STREAM && (o->senders > 1 || o->receivers > 1)) {
        fprintf(stderr, "%s: %s runs one sender and one receiver\n", prog,
                o->mode == TR_RPC ? "rpc" : "pingpong");
        return -1;
    }
    o->back_ops = o->ops;
    if (backname && !(o->back_ops = chan_find(backname))) {
        fprintf(stderr, "%s: unknown --back-channel=%s (see --list)\n", prog, backname);
        return -1;
    }
    if ((o->copy_store || o->resp_size || o->cdf || o->batch) && o->mode != TR_RPC) {
        fprintf(stderr, "%s: --copy-store, --resp-size, --cdf and --batch need --mode=rpc\n", prog);
        return -1;
    }
    if (o->senders > 1 && !o->ops->features.shared) {
        fprintf(stderr, "%s: %s: one sender only (not an N:1 channel)\n", prog, o->ops->name);
        return -1;
    }
    if (o->receivers > 1 && !o->ops->features.multi_reader) {
        fprintf(stderr, "%s: %s: one receiver only (not a 1:N channel)\n", prog, o->ops->name);
        return -1;
    }
    bool bufferless = strcmp(o->ops->name, "send-bufferless") == 0;
    if (bufferless) { /* the immediate is the message */
        o->n_sizes = 1;
        o->sizes[0] = 4;
        o->max_size = 4;
    } else {
        uint64_t mx = 0;
        for (size_t i = 0; i < o->n_sizes; i++) {
            if (o->sizes[i] < TR_HDR) {
                fprintf(stderr, "%s: sizes must be >= %d (the message header)\n", prog, TR_HDR);
                return -1;
            }
            if (o->sizes[i] > mx)
                mx = o->sizes[i];
        }
        if (o->max_size == 0)
            o->max_size = mx;
        if (mx > o->max_size) {
            fprintf(stderr, "%s: size %" PRIu64 " > --max-size=%" PRIu64 "\n", prog, mx,
                    o->max_size);
            return -1;
        }
    }
    if (o->window == 0)
        o->window = o->slots;
    bool back_tiny = strcmp(o->back_ops->name, "send-bufferless") == 0;
    if (back_tiny != bufferless) {
        fprintf(stderr,
                "%s: send-bufferless carries 4-byte messages only: use it for both "
                "directions or neither\n",
                prog);
        return -1;
    }
    if (o->batch && bufferless) {
        fprintf(stderr, "%s: --batch: 4-byte messages have no room for the count\n", prog);
        return -1;
    }
    if (bufferless)
        o->resp_size = 0;
    else if (o->resp_size && o->resp_size < TR_HDR) {
        fprintf(stderr, "%s: --resp-size must be >= %d (the message header)\n", prog, TR_HDR);
        return -1;
    }
    o->back_max = o->resp_size ? o->resp_size : o->max_size;
    if (o->copy_store && o->copy_store < o->max_size) {
        fprintf(stderr, "%s: --copy-store must hold the largest message\n", prog);
        return -1;
    }
    return 0;
}

static void list_channels(void)
{
    static const char *const need[] = {"nothing", "messages", "bytes", "messages+bytes"};
    printf("%-22s %-12s %-8s %-5s %-5s %-5s %-5s %-6s %-15s %s\n", "channel", "family", "section",
           "zc-s", "zc-r", "var", "block", "N:1", "in-order need", "ordered");
    for (const struct chan_ops *const *p = chan_registry; *p; p++) {
        const struct chan_features *f = &(*p)->features;
        printf("%-22s %-12s %-8s %-5s %-5s %-5s %-5s %-6s %-15s %s\n", (*p)->name, (*p)->family,
               (*p)->paper_section, f->zero_copy_send ? "yes" : "no",
               f->zero_copy_recv ? "yes" : "no", f->variable_size ? "yes" : "no",
               f->blocking_recv ? "yes" : "no", f->shared ? "yes" : "no", need[f->in_order],
               f->ordered ? "yes" : "no");
    }
}

/* ---------------------------------------------------------------- run state */

struct tr {
    struct tr_opts o;
    const char *prog;
    struct chan ch, back; /* back: pingpong's reverse channel */
    struct chan_region pool;
    struct chan *pool_owner; /* the channel pool was allocated on */
    uint64_t *handles;
    /* receiver */
    uint8_t **seen;     /* per sender: bitmap of seqs */
    uint32_t *expected; /* per sender: next seq (ordered channels) */
    uint64_t checked, bytes, out_of_order, t_first, t_last;
    double *lat_ns;
    size_t n_lat;
};

static void cfg_of(const struct tr *t, struct chan_config *cfg, const char *name,
                   enum chan_role role, const struct chan_ops *ops, uint64_t max)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->name = name;
    cfg->role = role;
    cfg->id = (uint32_t)t->o.id;
    cfg->senders = (uint32_t)t->o.senders;
    cfg->receivers = (uint32_t)t->o.receivers;
    cfg->max_msg_bytes = max;
    cfg->slots = (uint32_t)t->o.slots;
    cfg->ring_bytes = t->o.ring_bytes;
    cfg->device_memory = t->o.dm;
    cfg->prefetch = t->o.prefetch;
    cfg->zero_copy = t->o.zero_copy;
    cfg->blocking = t->o.blocking && ops->features.blocking_recv;
    cfg->mtu_bytes = (uint32_t)t->o.mtu;
    cfg->reserve_delay_ns = t->o.slow_ns;
}

/* Open `c`; the reverse channel of pingpong / rpc (suffix "/back") is
 * --back-channel with messages up to back_max. */
static int open_chan(struct tr *t, struct chan *c, const char *suffix, enum chan_role role)
{
    char name[TR_NAME_MAX + 16];
    snprintf(name, sizeof(name), "%s%s", t->o.name, suffix);
    bool back = strcmp(suffix, "/back") == 0;
    const struct chan_ops *ops = back ? t->o.back_ops : t->o.ops;
    struct chan_config cfg;
    cfg_of(t, &cfg, name, role, ops, back ? t->o.back_max : t->o.max_size);
    int rc = chan_open(c, ops, &cfg);
    if (rc < 0) {
        if (rc == -ENODEV)
            printf("no RDMA device found\n"); /* as perftest says it */
        fprintf(stderr, "%s: %s %s: %s\n", t->prog, ops->name,
                role == CHAN_SENDER ? "sender" : "receiver", c->err);
        return -1;
    }
    return 0;
}

/* Both sides must run with the same options: each sender publishes a hash
 * of them, the receiver compares. */
static int check_opts(struct tr *t)
{
    uint64_t w[] = {t->o.max_size,  t->o.slots,   t->o.ring_bytes, t->o.senders,
                    t->o.messages,  t->o.dm,      t->o.mode,       t->o.receivers,
                    t->o.resp_size, t->o.n_sizes, t->o.window,     (uint64_t)(uintptr_t)0};
    uint32_t h = rc_conn_hash_words(w, sizeof(w) / sizeof(w[0]) - 1);
    h ^= fnv(2166136261u, (const uint8_t *)t->o.ops->name, strlen(t->o.ops->name));
    h = fnv(h, (const uint8_t *)t->o.back_ops->name, strlen(t->o.back_ops->name));
    h = fnv(h, (const uint8_t *)t->o.sizes, t->o.n_sizes * sizeof(t->o.sizes[0]));
    char key[TR_NAME_MAX + 32];
    if (t->o.client) {
        snprintf(key, sizeof(key), "%s/opts/s%" PRIu64, t->o.name, t->o.id);
        return rc_conn_oob_put(t->prog, key, &h, sizeof(h));
    }
    for (uint64_t i = 0; i < t->o.senders; i++) {
        uint32_t theirs = 0;
        snprintf(key, sizeof(key), "%s/opts/s%" PRIu64, t->o.name, i);
        if (rc_conn_oob_get(t->prog, key, &theirs, sizeof(theirs)) != 0)
            return -1;
        if (theirs != h) {
            fprintf(stderr, "%s: sender %" PRIu64 " runs with other options than the receiver\n",
                    t->prog, i);
            return -1;
        }
    }
    return 0;
}

/* The receivers' verdicts for the senders: "<name>/done/<reader>" = exit
 * status (one key per reader of a 1:N channel; reader 0 otherwise).  A put
 * that fails is named on stderr; the senders then count the verdict as
 * TR_ERROR (get_done). */
static void put_done(struct tr *t, uint32_t status)
{
    char key[TR_NAME_MAX + 32];
    uint64_t reader = t->o.receivers > 1 ? t->o.id : 0;
    snprintf(key, sizeof(key), "%s/done/%" PRIu64, t->o.name, reader);
    (void)rc_conn_oob_put(t->prog, key, &status, sizeof(status));
}
/* The worst verdict of all readers (TR_OK < TR_VIOLATION < TR_ERROR). */
static int get_done(struct tr *t)
{
    int worst = TR_OK;
    for (uint64_t r = 0; r < t->o.receivers; r++) {
        char key[TR_NAME_MAX + 32];
        uint32_t status = TR_ERROR;
        snprintf(key, sizeof(key), "%s/done/%" PRIu64, t->o.name, r);
        if (rc_conn_oob_get(t->prog, key, &status, sizeof(status)) != 0)
            status = TR_ERROR;
        if ((int)status > worst)
            worst = (int)status;
    }
    return worst;
}

static int violation(struct tr *t, enum tr_check k, const struct tr_msg *g, size_t len,
                     const char *what)
{
    fprintf(stderr,
            "%s server: VIOLATION: %s %s message %" PRIu64 " (%zu bytes): bad %s: seq %u "
            "sender %u length field %u checksum %08x computed %08x first bad byte %zu\n",
            t->prog, t->o.ops->name, what, t->checked + 1, len, tr_check_name[k], g->seq, g->sender,
            g->len_field, g->sum_stored, g->sum_computed, g->first_bad);
    struct host_kv kv[] = {
        {"message", (double)(t->checked + 1)},
        {"size_bytes", (double)len},
        {"check", (double)k},
        {"seq_got", (double)g->seq},
        {"sender_got", (double)g->sender},
        {"len_got", (double)g->len_field},
        {"checksum_stored", (double)g->sum_stored},
        {"checksum_computed", (double)g->sum_computed},
        {"first_bad_byte", (double)g->first_bad},
        {"t_ns", (double)host_now_ns()},
    };
    host_report("order_violation", kv, sizeof(kv) / sizeof(kv[0]));
    return TR_VIOLATION;
}

/* Check one received message; 0 or TR_VIOLATION. */
static int check_one(struct tr *t, const uint8_t *m, size_t len, const char *what)
{
    struct tr_msg g;
    enum tr_check k = msg_check(&t->o, m, len, &g);
    if (k != TRC_OK)
        return violation(t, k, &g, len, what);
    uint8_t *bits = t->seen[g.sender];
    if (bits[g.seq / 8] & (1u << (g.seq % 8)))
        return violation(t, TRC_DUPLICATE, &g, len, what);
    bits[g.seq / 8] |= (uint8_t)(1u << (g.seq % 8));
    if (g.seq != t->expected[g.sender]) {
        if (t->o.ops->features.ordered)
            return violation(t, TRC_ORDER, &g, len, what);
        t->out_of_order++;
    }
    if (g.seq >= t->expected[g.sender])
        t->expected[g.sender] = g.seq + 1;
    uint64_t now = host_now_ns();
    if (t->checked == 0)
        t->t_first = now;
    t->t_last = now;
    if (g.t_send && now >= g.t_send && t->lat_ns)
        t->lat_ns[t->n_lat++] = (double)(now - g.t_send);
    t->checked++;
    t->bytes += len;
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}
static double pct(const double *v, size_t n, double p)
{
    if (n == 0)
        return 0;
    size_t k = (size_t)(p * (double)n + 0.999999);
    if (k == 0)
        k = 1;
    return v[(k > n ? n : k) - 1];
}

static uint64_t size_of(const struct tr *t, uint64_t i)
{
    return t->o.sizes[(i + t->o.id) % t->o.n_sizes];
}

static int recv_one(struct tr *t, struct chan *c, struct chan_region *r)
{
    for (;;) {
        int rc = chan_recv(c, r);
        if (rc == 0)
            return 0;
        if (rc == -EBADMSG)
            return rc;
        if (rc < 0) {
            fprintf(stderr, "%s: %s receive: %s\n", t->prog, t->o.ops->name, c->err);
            return -1;
        }
        chan_relax(c);
    }
}

static int send_one(struct tr *t, struct chan *c, struct chan_region *r, uint64_t *h)
{
    if (!(t->o.batch && t->o.server)) /* a batched response carries its count there */
        msg_stamp(r->addr, r->len);   /* once: the latency includes waiting for room */
    for (;;) {
        int rc = chan_send(c, r, h);
        if (rc == 0)
            return 0;
        if (rc < 0) {
            fprintf(stderr, "%s: %s send: %s\n", t->prog, t->o.ops->name, c->err);
            return -1;
        }
        chan_relax(c);
    }
}

static int wait_send(struct tr *t, struct chan *c, uint64_t h)
{
    for (;;) {
        int rc = chan_test_send(c, h);
        if (rc == 0)
            return 0;
        if (rc < 0) {
            fprintf(stderr, "%s: %s send completion: %s\n", t->prog, t->o.ops->name, c->err);
            return -1;
        }
        chan_relax(c);
    }
}

/* ---------------------------------------------------------------- stream */

static int stream_sender(struct tr *t)
{
    uint64_t w = t->o.window, max = t->o.max_size;
    if (chan_alloc(&t->ch, w * max, &t->pool) < 0) {
        fprintf(stderr, "%s: %s\n", t->prog, t->ch.err);
        return TR_ERROR;
    }
    t->pool_owner = &t->ch;
    t->handles = calloc(w, sizeof(*t->handles));
    if (!t->handles)
        return TR_ERROR;
    for (uint64_t i = 0; i < t->o.messages; i++) {
        uint64_t b = i % w;
        if (i >= w && wait_send(t, &t->ch, t->handles[b]) < 0)
            return TR_ERROR;
        struct chan_region r = t->pool;
        r.addr = (uint8_t *)t->pool.addr + b * max;
        r.len = size_of(t, i);
        msg_fill(r.addr, r.len, (uint32_t)t->o.id, (uint32_t)(i + 1));
        if (send_one(t, &t->ch, &r, &t->handles[b]) < 0)
            return TR_ERROR;
    }
    for (uint64_t i = 0; i < w && i < t->o.messages; i++)
        if (wait_send(t, &t->ch, t->handles[i]) < 0)
            return TR_ERROR;
    int st = get_done(t);
    if (t->o.verbose)
        fprintf(stderr, "%s client %" PRIu64 ": sent %" PRIu64 ", receiver says %d\n", t->prog,
                t->o.id, t->o.messages, st);
    return st;
}

static int stream_receiver(struct tr *t)
{
    uint64_t total = t->o.messages * t->o.senders;
    t->lat_ns = calloc(total, sizeof(double));
    if (!t->lat_ns)
        return TR_ERROR;
    while (t->checked < total) {
        struct chan_region r;
        int rc = recv_one(t, &t->ch, &r);
        if (rc == -EBADMSG) {
            struct tr_msg g = {0};
            fprintf(stderr, "%s server: %s\n", t->prog, t->ch.err);
            put_done(t, TR_VIOLATION);
            return violation(t, TRC_FRAMING, &g, 0, "stream");
        }
        if (rc < 0) {
            put_done(t, TR_ERROR);
            return TR_ERROR;
        }
        if (check_one(t, r.addr, r.len, "stream") != 0) {
            put_done(t, TR_VIOLATION);
            return TR_VIOLATION;
        }
        if (chan_free(&t->ch, &r) < 0) {
            fprintf(stderr, "%s: %s free: %s\n", t->prog, t->o.ops->name, t->ch.err);
            put_done(t, TR_ERROR);
            return TR_ERROR;
        }
    }
    /* every seq of every sender exactly once: the bitmaps are full */
    for (uint64_t s = 0; s < t->o.senders; s++)
        for (uint64_t q = 1; q <= t->o.messages; q++)
            if (!(t->seen[s][q / 8] & (1u << (q % 8)))) {
                struct tr_msg g = {.seq = (uint32_t)q, .sender = (uint32_t)s};
                put_done(t, TR_VIOLATION);
                return violation(t, TRC_SEQ, &g, 0, "missing");
            }
    struct host_kv kv[] = {
        {"messages_checked", (double)t->checked},
        {"bytes_checked", (double)t->bytes},
        {"violations", 0},
        {"messages_out_of_order", (double)t->out_of_order},
        {"senders", (double)t->o.senders},
        {"reader", (double)(t->o.receivers > 1 ? t->o.id : 0)}, /* 1:N: which reader */
    };
    host_report("order_check", kv, sizeof(kv) / sizeof(kv[0]));
    qsort(t->lat_ns, t->n_lat, sizeof(double), cmp_double);
    double avg = 0;
    for (size_t i = 0; i < t->n_lat; i++)
        avg += t->lat_ns[i];
    avg = t->n_lat ? avg / (double)t->n_lat : 0;
    double el = (double)(t->t_last - t->t_first);
    struct host_kv sk[] = {
        {"messages", (double)t->checked},
        {"bytes", (double)t->bytes},
        {"elapsed_us", el / 1000.0},
        {"msg_rate_mpps", el > 0 ? (double)(t->checked - 1) * 1000.0 / el : 0},
        {"gbps", el > 0 ? (double)t->bytes * 8.0 / el : 0},
        {"lat_avg_us", avg / 1000.0},
        {"lat_p50_us", pct(t->lat_ns, t->n_lat, 0.5) / 1000.0},
        {"lat_p99_us", pct(t->lat_ns, t->n_lat, 0.99) / 1000.0},
    };
    host_report("taranov_stream", sk, sizeof(sk) / sizeof(sk[0]));
    if (t->o.verbose)
        fprintf(stderr, "%s server: %" PRIu64 " messages checked, %" PRIu64 " out of order\n",
                t->prog, t->checked, t->out_of_order);
    put_done(t, TR_OK);
    return TR_OK;
}

/* ---------------------------------------------------------------- pingpong */

static int pingpong_client(struct tr *t)
{
    uint64_t max = t->o.max_size, n = t->o.messages;
    if (chan_alloc(&t->ch, max, &t->pool) < 0) {
        fprintf(stderr, "%s: %s\n", t->prog, t->ch.err);
        return TR_ERROR;
    }
    t->pool_owner = &t->ch;
    double *rtt = t->lat_ns = calloc(n, sizeof(double)); /* freed by taranov_main */
    if (!rtt)
        return TR_ERROR;
    struct tr_opts all = t->o; /* seqs run over all sizes */
    all.messages = n * t->o.n_sizes;
    uint32_t seq = 0;
    for (size_t si = 0; si < t->o.n_sizes; si++) {
        size_t len = t->o.sizes[si];
        for (uint64_t i = 0; i < n; i++) {
            struct chan_region r = t->pool, got;
            r.len = len;
            seq++;
            msg_fill(r.addr, len, 0, seq);
            uint64_t h, t0 = host_now_ns();
            if (send_one(t, &t->ch, &r, &h) < 0 || recv_one(t, &t->back, &got) < 0)
                return TR_ERROR;
            uint64_t t1 = host_now_ns();
            struct tr_msg g;
            if (got.len != len || msg_check(&all, got.addr, got.len, &g) != TRC_OK ||
                g.seq != seq) {
                fprintf(stderr, "%s client: VIOLATION: echo of message %u is wrong\n", t->prog,
                        seq);
                return TR_VIOLATION;
            }
            if (chan_free(&t->back, &got) < 0 || wait_send(t, &t->ch, h) < 0)
                return TR_ERROR;
            rtt[i] = (double)(t1 - t0);
        }
        qsort(rtt, n, sizeof(double), cmp_double);
        double avg = 0;
        for (uint64_t i = 0; i < n; i++)
            avg += rtt[i];
        avg /= (double)n;
        struct host_kv kv[] = {
            {"size_bytes", (double)len},
            {"iters", (double)n},
            {"rtt_avg_us", avg / 1000.0},
            {"rtt_p50_us", pct(rtt, n, 0.5) / 1000.0},
            {"rtt_p99_us", pct(rtt, n, 0.99) / 1000.0},
            {"one_way_us", pct(rtt, n, 0.5) / 2000.0},
        };
        host_report("taranov_pingpong", kv, sizeof(kv) / sizeof(kv[0]));
    }
    return get_done(t);
}

static int pingpong_server(struct tr *t)
{
    uint64_t total = t->o.messages * t->o.n_sizes;
    if (chan_alloc(&t->back, t->o.max_size, &t->pool) < 0) {
        fprintf(stderr, "%s: %s\n", t->prog, t->back.err);
        return TR_ERROR;
    }
    t->pool_owner = &t->back;
    t->o.messages = total; /* seqs run over all sizes */
    for (uint64_t i = 0; i < total; i++) {
        struct chan_region r, s = t->pool;
        uint64_t h;
        if (recv_one(t, &t->ch, &r) < 0)
            return TR_ERROR;
        if (check_one(t, r.addr, r.len, "pingpong") != 0) {
            put_done(t, TR_VIOLATION);
            return TR_VIOLATION;
        }
        s.len = r.len;
        host_memcpy(s.addr, r.addr, r.len);
        if (chan_free(&t->ch, &r) < 0 || send_one(t, &t->back, &s, &h) < 0 ||
            wait_send(t, &t->back, h) < 0)
            return TR_ERROR;
    }
    struct host_kv kv[] = {
        {"messages_checked", (double)t->checked},
        {"bytes_checked", (double)t->bytes},
        {"violations", 0},
        {"messages_out_of_order", (double)t->out_of_order},
        {"senders", 1},
    };
    host_report("order_check", kv, sizeof(kv) / sizeof(kv[0]));
    put_done(t, TR_OK);
    return TR_OK;
}

/* ---------------------------------------------------------------- rpc */

/* rpc (Figures 4 and 7): the client keeps up to --window requests
 * outstanding (sent through "<name>/fwd", response not yet received
 * through "<name>/back"); the server checks each request, copies it into a
 * log-structured store when --copy-store is given (Fig 4 "with copy": a
 * host_memcpy into a wrapping log, charged at the host's memcpy rate),
 * frees it and answers with a response of --resp-size bytes (default the
 * request's size) carrying the request's seq.  The response is generated,
 * not copied from the request, so the zero-copy server touches the request
 * only to check it.  The client reports per size "taranov_rpc": requests
 * per second, request Gbit/s and round-trip percentiles (send time stamp
 * of the request to the arrival of its response), and with --cdf 100
 * percentiles per size in "taranov_rtt_cdf". */

static uint32_t msg_seq(const struct tr_opts *o, const uint8_t *m)
{
    return tiny(o) ? get32(m) & 0xfffffu : get32(m);
}

static int rpc_report(struct tr *t, uint64_t len, uint64_t n, double *rtt, uint64_t t0, uint64_t t1)
{
    qsort(rtt, n, sizeof(double), cmp_double);
    double avg = 0;
    for (uint64_t i = 0; i < n; i++)
        avg += rtt[i];
    avg /= (double)n;
    double el = (double)(t1 - t0);
    struct host_kv kv[] = {
        {"size_bytes", (double)len},
        {"resp_bytes", (double)(t->o.resp_size ? t->o.resp_size : len)},
        {"window", (double)t->o.window},
        {"iters", (double)n},
        {"copy", t->o.copy_store ? 1.0 : 0.0},
        {"elapsed_us", el / 1000.0},
        {"mreq_s", el > 0 ? (double)n / el * 1000.0 : 0},
        {"gbps", el > 0 ? (double)(n * len) * 8.0 / el : 0},
        {"rtt_avg_us", avg / 1000.0},
        {"rtt_p5_us", pct(rtt, n, 0.05) / 1000.0},
        {"rtt_p50_us", pct(rtt, n, 0.5) / 1000.0},
        {"rtt_p95_us", pct(rtt, n, 0.95) / 1000.0},
        {"rtt_p99_us", pct(rtt, n, 0.99) / 1000.0},
    };
    host_report("taranov_rpc", kv, sizeof(kv) / sizeof(kv[0]));
    if (t->o.cdf)
        for (int q = 1; q <= 100; q++) {
            struct host_kv c[] = {
                {"size_bytes", (double)len},
                {"pct", (double)q},
                {"rtt_us", pct(rtt, n, q / 100.0) / 1000.0},
            };
            host_report("taranov_rtt_cdf", c, sizeof(c) / sizeof(c[0]));
        }
    return 0;
}

static int rpc_client(struct tr *t)
{
    uint64_t w = t->o.window, max = t->o.max_size, n = t->o.messages;
    if (chan_alloc(&t->ch, w * max, &t->pool) < 0) {
        fprintf(stderr, "%s: %s\n", t->prog, t->ch.err);
        return TR_ERROR;
    }
    t->pool_owner = &t->ch;
    t->handles = calloc(w, sizeof(*t->handles));
    double *rtt = t->lat_ns = calloc(n, sizeof(double)); /* freed by taranov_main */
    uint64_t *t_send = calloc(n, sizeof(uint64_t));
    if (!t->handles || !rtt || !t_send) {
        free(t_send);
        return TR_ERROR;
    }
    struct tr_opts all = t->o; /* seqs run over all sizes */
    all.messages = n * t->o.n_sizes;
    uint8_t *seen = t->seen[0];
    int st = TR_OK;
    uint32_t base = 0; /* seq of the first request of this size, minus 1 */
    for (size_t si = 0; si < t->o.n_sizes && st == TR_OK; si++, base += (uint32_t)n) {
        size_t len = t->o.sizes[si];
        size_t resp = t->o.resp_size ? t->o.resp_size : len;
        uint64_t sent = 0, got = 0, t0 = host_now_ns(), t1 = t0;
        bool filled = false; /* request `sent` is in its buffer, not yet accepted */
        while (got < n && st == TR_OK) {
            bool progress = false;
            if (sent < n && sent - got < w) {
                uint64_t b = sent % w;
                struct chan_region r = t->pool;
                r.addr = (uint8_t *)t->pool.addr + b * max;
                r.len = len;
                int rc = 0;
                if (!filled && sent >= w) /* the buffer's previous request went out */
                    rc = chan_test_send(&t->ch, t->handles[b]);
                if (rc == 0 && !filled) {
                    msg_fill(r.addr, len, 0, base + (uint32_t)sent + 1);
                    msg_stamp(r.addr, len);
                    t_send[sent] = host_now_ns(); /* waiting for room counts */
                    filled = true;
                }
                if (rc == 0)
                    rc = chan_send(&t->ch, &r, &t->handles[b]);
                if (rc < 0) {
                    fprintf(stderr, "%s: %s send: %s\n", t->prog, t->o.ops->name, t->ch.err);
                    st = TR_ERROR;
                    break;
                }
                if (rc == 0) {
                    filled = false;
                    sent++;
                    progress = true;
                }
            }
            struct chan_region g;
            int rc = chan_recv(&t->back, &g);
            if (rc < 0) {
                fprintf(stderr, "%s: %s receive: %s\n", t->prog, t->o.back_ops->name, t->back.err);
                st = TR_ERROR;
                break;
            }
            if (rc == 0) {
                struct tr_msg m;
                uint32_t seq = 0;
                bool ok = g.len == resp && msg_check(&all, g.addr, g.len, &m) == TRC_OK;
                uint64_t k = 1; /* requests this response answers */
                if (ok && t->o.batch)
                    memcpy(&k, (const uint8_t *)g.addr + 16, 8);
                if (ok) {
                    seq = m.seq;
                    ok = seq > base && seq <= base + sent && k >= 1 && k <= sent - got &&
                         (t->o.batch || !(seen[seq / 8] & (1u << (seq % 8))));
                }
                if (!ok) {
                    fprintf(stderr,
                            "%s client: VIOLATION: response %" PRIu64 " of size %zu is wrong "
                            "(length %zu, seq %u)\n",
                            t->prog, got + 1, len, g.len, seq);
                    st = TR_VIOLATION;
                    break;
                }
                t1 = host_now_ns();
                if (!t->o.batch) { /* one response per request, in any order */
                    seen[seq / 8] |= (uint8_t)(1u << (seq % 8));
                    rtt[got++] = (double)(t1 - t_send[seq - base - 1]);
                } else { /* retire the k oldest (the server checked exactly-once) */
                    for (uint64_t q = 0; q < k; q++, got++)
                        rtt[got] = (double)(t1 - t_send[got]);
                }
                if (chan_free(&t->back, &g) < 0) {
                    fprintf(stderr, "%s: %s free: %s\n", t->prog, t->o.back_ops->name, t->back.err);
                    st = TR_ERROR;
                    break;
                }
                progress = true;
            }
            if (!progress)
                host_relax();
        }
        if (st == TR_OK)
            rpc_report(t, len, n, rtt, t0, t1);
    }
    for (uint64_t i = 0; st == TR_OK && i < w && i < n; i++)
        if (wait_send(t, &t->ch, t->handles[i]) < 0)
            st = TR_ERROR;
    free(t_send);
    int done = get_done(t);
    return st != TR_OK ? st : done;
}

static int rpc_server(struct tr *t)
{
    uint64_t total = t->o.messages * t->o.n_sizes, p = t->o.window, bmax = t->o.back_max;
    if (chan_alloc(&t->back, p * bmax, &t->pool) < 0) {
        fprintf(stderr, "%s: %s\n", t->prog, t->back.err);
        return TR_ERROR;
    }
    t->pool_owner = &t->back;
    t->handles = calloc(p, sizeof(*t->handles));
    /* page aligned: host_memcpy charges the lines at their place in the page */
    uint8_t *store = t->o.copy_store ? pages_zalloc(t->o.copy_store) : NULL;
    if (!t->handles || (t->o.copy_store && !store)) {
        free(store);
        return TR_ERROR;
    }
    uint64_t store_off = 0, copied = 0;
    t->o.messages = total; /* seqs run over all sizes */
    int st = TR_OK;
    uint64_t i = 0, resps = 0;
    while (i < total && st == TR_OK) {
        struct chan_region r;
        int rc = recv_one(t, &t->ch, &r);
        uint32_t seq = 0;
        size_t resp = 0;
        uint64_t batched = 0;
        /* with --batch, every request already waiting joins this response */
        for (; rc == 0 && st == TR_OK; rc = t->o.batch && i < total ? chan_recv(&t->ch, &r) : 1) {
            if (check_one(t, r.addr, r.len, "rpc") != 0) {
                st = TR_VIOLATION;
                break;
            }
            seq = msg_seq(&t->o, r.addr);
            resp = t->o.resp_size ? t->o.resp_size : r.len;
            if (store) { /* append to the log; wrap to its start when it is full */
                if (store_off + r.len > t->o.copy_store)
                    store_off = 0;
                host_memcpy(store + store_off, r.addr, r.len);
                store_off += r.len;
                copied += r.len;
            }
            if (chan_free(&t->ch, &r) < 0) {
                fprintf(stderr, "%s: %s free: %s\n", t->prog, t->o.ops->name, t->ch.err);
                st = TR_ERROR;
                break;
            }
            i++;
            batched++;
        }
        if (rc < 0 && st == TR_OK) {
            if (rc != -EBADMSG && rc != -1) /* recv_one (-1) has said why */
                fprintf(stderr, "%s: %s receive: %s\n", t->prog, t->o.ops->name, t->ch.err);
            st = rc == -EBADMSG ? TR_VIOLATION : TR_ERROR;
        }
        if (st != TR_OK)
            break;
        /* Simulator: the batch ended with an empty receive poll, and many
         * channels' chan_send polls their send CQ before posting; two empty
         * polls with no other call in between look like a spin to the verbs
         * shim (verbs_shim/cq.c), which parks the thread before the response
         * is out.  Any host_* call in between marks real work; reading the
         * clock is free and changes nothing on real hardware. */
        if (t->o.batch)
            (void)host_now_ns();
        uint64_t b = resps % p;
        if (resps++ >= p && wait_send(t, &t->back, t->handles[b]) < 0) {
            st = TR_ERROR;
            break;
        }
        struct chan_region s = t->pool;
        s.addr = (uint8_t *)t->pool.addr + b * bmax;
        s.len = resp;
        msg_fill(s.addr, resp, 0, seq);
        if (t->o.batch) /* [16,24) is outside the checksum: the count */
            memcpy((uint8_t *)s.addr + 16, &batched, 8);
        if (send_one(t, &t->back, &s, &t->handles[b]) < 0)
            st = TR_ERROR;
    }
    for (uint64_t k = 0; st == TR_OK && k < p && k < resps; k++)
        if (wait_send(t, &t->back, t->handles[k]) < 0)
            st = TR_ERROR;
    free(store);
    if (st == TR_OK) {
        struct host_kv kv[] = {
            {"messages_checked", (double)t->checked},
            {"bytes_checked", (double)t->bytes},
            {"violations", 0},
            {"messages_out_of_order", (double)t->out_of_order},
            {"senders", 1},
            {"bytes_copied", (double)copied},
            {"responses", (double)resps},
        };
        host_report("order_check", kv, sizeof(kv) / sizeof(kv[0]));
    }
    put_done(t, (uint32_t)st);
    return st;
}

/* ---------------------------------------------------------------- main */

int taranov_main(int argc, char **argv)
{
    struct tr *t = calloc(1, sizeof(*t));
    if (!t)
        return TR_ERROR;
    t->prog = argc > 0 && argv[0] ? argv[0] : "taranov";
    int p = parse(argc, argv, &t->o);
    if (p != 0 || t->o.list) {
        if (p == 0)
            list_channels();
        free(t);
        return p < 0 ? TR_ERROR : TR_OK;
    }
    int st = TR_ERROR;
    uint64_t msgs = t->o.messages * (t->o.mode != TR_STREAM ? t->o.n_sizes : 1);
    t->seen = calloc(t->o.senders, sizeof(*t->seen));
    t->expected = calloc(t->o.senders, sizeof(*t->expected));
    if (!t->seen || !t->expected)
        goto out;
    for (uint64_t s = 0; s < t->o.senders; s++) {
        t->expected[s] = 1;
        if (!(t->seen[s] = calloc(msgs / 8 + 1, 1)))
            goto out;
    }
    bool pp = t->o.mode != TR_STREAM; /* two channels, one per direction */
    if (t->o.client) {
        if (open_chan(t, &t->ch, pp ? "/fwd" : "", CHAN_SENDER) < 0 ||
            (pp && open_chan(t, &t->back, "/back", CHAN_RECEIVER) < 0) || check_opts(t) < 0)
            goto out;
        st = t->o.mode == TR_RPC ? rpc_client(t) : pp ? pingpong_client(t) : stream_sender(t);
    } else {
        if (open_chan(t, &t->ch, pp ? "/fwd" : "", CHAN_RECEIVER) < 0 ||
            (pp && open_chan(t, &t->back, "/back", CHAN_SENDER) < 0) || check_opts(t) < 0)
            goto out;
        st = t->o.mode == TR_RPC ? rpc_server(t) : pp ? pingpong_server(t) : stream_receiver(t);
    }
out:
    if (t->pool_owner)
        chan_release(t->pool_owner, &t->pool);
    chan_close(&t->back);
    chan_close(&t->ch);
    for (uint64_t s = 0; t->seen && s < t->o.senders; s++)
        free(t->seen[s]);
    free(t->seen);
    free(t->expected);
    free(t->handles);
    free(t->lat_ns);
    free(t);
    return st;
}
