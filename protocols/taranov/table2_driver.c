/* taranov_t2: the driver `rnicsim table2` runs every Taranov channel with
 * (docs/taranov-table2.md).  It uses only the public channel API
 * (channel.h) and marks message boundaries in the simulator's event trace
 * with host_trace_mark, so that the tool can count, per message, the half
 * round trips on the wire and the work requests each side posted.
 *
 *   taranov_t2 --channel=NAME --role=sender|receiver
 *              [--mode=measure|check|memory|capacity] [--max-msg=B]
 *              [--messages=M] [--sizes=64,4096,16384] [--id=I] [--peers=N]
 *              [--name=PREFIX] [--slots=S]
 *
 * --mode=measure (two hosts): one message at a time.  For message i the
 *   sender marks "t2-send" i, releases the receiver through host_oob (free
 *   in simulated time, no network traffic), calls chan_send and waits for
 *   chan_test_send; the receiver, released, calls chan_recv until the
 *   message is there, marks "t2-recv" i, checks it, calls chan_free, marks
 *   "t2-done" i and tells the sender through host_oob; the sender marks
 *   "t2-end" i and waits 20 us (acknowledgements the receiver posted
 *   while freeing drain before the next window).  So the wire traffic of message i lies in
 *   [t2-send i, t2-recv i] (delivery) and (t2-recv i, t2-done i]
 *   (freeing: acknowledgements, re-posted receives), and a polling
 *   receiver does not poll while no message is on its way.  The channel is
 *   opened with slots >= 2 M and a ring of >= 2 M maximal messages so that
 *   no flow-control traffic is needed during the M messages.
 * --mode=check: the ordering-checker contract of `rnicsim check-order`
 *   (tools/rnicsim/check_order.c): the sender streams M messages, the
 *   receiver checks every one (sequence number if the channel declares
 *   `ordered`, else exactly once; length; checksum) and reports a row of
 *   "order_check" (messages_checked), or on the first bad message one row
 *   of "order_violation", a stderr line with "VIOLATION", and exits 1; a
 *   message that does not arrive within 10 ms counts as lost (a
 *   violation, check 6).
 * --mode=memory: the hub of a 1:N / N:1 run with --peers=N: for N:1 the
 *   receiver (role receiver, on its own host) receives from N senders (one
 *   endpoint with senders=N for a shared channel, else N point-to-point
 *   endpoints "PREFIX.<i>"); for 1:N the sender sends to N receivers (one
 *   endpoint with receivers=N for a multi-reader channel, else N
 *   endpoints).  The leaf side runs with --mode=memory --peers=N --id=i.
 *   Each link carries --messages messages (checked); `rnicsim table2`
 *   reads the hub NIC's peak registered bytes afterwards.
 * --mode=capacity (two hosts, --slots=S --max-msg=B --ring-slots=K, small
 *   --sizes): see t2_capacity below.  --ring-slots=K sizes a ring for K
 *   messages of the largest size (default: --slots).
 *
 * Message format (every mode): [0,8) sequence number (1, 2, ...), [8,12)
 * length, [12,16) FNV-1a-32 checksum of the other bytes, then bytes from a
 * generator seeded by the sequence number.  Sizes below 16 are raised to
 * 16, except 4: a 4-byte integer (sender id << 24 | sequence number), for
 * the bufferless channel; sizes above the channel's limit are an error.
 *
 * Exit status: 0 ok, 1 an invalid message (check mode: a violation), 2
 * usage or channel error. */
#include "protocols/taranov/table2_driver.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rnicsim/host.h>

#include "protocols/common/rc_conn.h"
#include "protocols/taranov/channel.h"

#define T2_EXIT_OK 0
#define T2_EXIT_BAD 1
#define T2_EXIT_USAGE 2
#define T2_MAX_SIZES 16
#define T2_MAX_PEERS 64
#define T2_HDR_BYTES 16
/* A 4-byte message is an integer (send-bufferless carries exactly that):
 * the sender id in its top byte, the sequence number in the other 24 bits,
 * no checksum. */
#define T2_TINY_BYTES 4
/* Gap between two measured messages: several round trips of the 2-host
 * star (~2-3 us each with the cx5-100g profile), an estimate that lets an
 * acknowledgement posted while freeing a message complete first. */
#define T2_QUIET_NS 20000
/* Room per message in a ring beyond its payload (length word, bells,
 * alignment): an estimate above what the ring channels of Section 4.3
 * append (8 + 8 bytes, 8-aligned). */
#define T2_RING_SLACK_BYTES 64

enum t2_mode { T2_MEASURE, T2_CHECK, T2_MEMORY, T2_CAPACITY };

struct t2_opts {
    const struct chan_ops *ops;
    bool sender;
    enum t2_mode mode;
    uint32_t messages, id, peers, slots, ring_slots;
    uint32_t sizes[T2_MAX_SIZES];
    uint32_t nsizes, max_size;
    bool fanout_out; /* memory mode: 1:N (one sender, N receivers) instead of N:1 */
    char name[64];
};

/* ---------------------------------------------------------------- message format */

static uint32_t t2_fnv(uint32_t h, const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 16777619u;
    }
    return h;
}

static uint32_t t2_checksum(const uint8_t *m, uint32_t len)
{
    uint32_t h = t2_fnv(2166136261u, m, 12);
    return t2_fnv(h, m + T2_HDR_BYTES, len - T2_HDR_BYTES);
}

static void t2_fill(uint8_t *m, uint64_t seq, uint32_t len)
{
    if (len == T2_TINY_BYTES) { /* sender id in the top byte, then the number */
        uint32_t v = (uint32_t)(seq >> 32) << 24 | (uint32_t)(seq & 0xffffffu);
        memcpy(m, &v, 4);
        return;
    }
    memcpy(m, &seq, 8);
    memcpy(m + 8, &len, 4);
    uint64_t x = seq * 0x9e3779b97f4a7c15ull + 1;
    for (uint32_t i = T2_HDR_BYTES; i < len; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        m[i] = (uint8_t)x;
    }
    uint32_t c = t2_checksum(m, len);
    memcpy(m + 12, &c, 4);
}

/* 0 if message `m` of `len` bytes is valid; else a check number (1 length
 * too short, 2 length field, 3 checksum) and *seq = its sequence number. */
static int t2_verify(const uint8_t *m, size_t len, uint64_t *seq)
{
    *seq = 0;
    if (len == T2_TINY_BYTES) {
        uint32_t v;
        memcpy(&v, m, 4);
        *seq = (uint64_t)(v >> 24) << 32 | (v & 0xffffffu);
        return 0;
    }
    if (len < T2_HDR_BYTES)
        return 1;
    uint32_t l, c;
    memcpy(seq, m, 8);
    memcpy(&l, m + 8, 4);
    memcpy(&c, m + 12, 4);
    if (l != len)
        return 2;
    if (c != t2_checksum(m, (uint32_t)len))
        return 3;
    return 0;
}

static uint32_t t2_size(const struct t2_opts *o, uint64_t seq)
{
    uint32_t s = o->sizes[(seq - 1) % o->nsizes];
    return s < T2_HDR_BYTES && s != T2_TINY_BYTES ? T2_HDR_BYTES : s;
}

/* ---------------------------------------------------------------- options */

static int t2_usage(const char *why)
{
    fprintf(stderr,
            "taranov_t2: %s\n"
            "usage: taranov_t2 --channel=NAME --role=sender|receiver "
            "[--mode=measure|check|memory]\n"
            "                  [--messages=M] [--sizes=LIST] [--id=I] [--peers=N] "
            "[--name=PREFIX] [--slots=S] [--fanout=in|out] [--max-msg=B] [--ring-slots=K]\n",
            why);
    return T2_EXIT_USAGE;
}

static bool t2_u32(const char *v, uint32_t min, uint32_t max, uint32_t *out)
{
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    if (errno || end == v || *end || x < min || x > max)
        return false;
    *out = (uint32_t)x;
    return true;
}

static int t2_parse(int argc, char **argv, struct t2_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->messages = 16;
    o->peers = 1;
    o->sizes[0] = 64;
    o->nsizes = 1;
    snprintf(o->name, sizeof(o->name), "t2");
    bool role = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = strchr(a, '=');
        v = v ? v + 1 : "";
        if (!strncmp(a, "--channel=", 10)) {
            o->ops = chan_find(v);
            if (!o->ops)
                return t2_usage("unknown --channel");
        } else if (!strcmp(a, "--role=sender") || !strcmp(a, "--client")) {
            o->sender = true;
            role = true;
        } else if (!strcmp(a, "--role=receiver") || !strcmp(a, "--server")) {
            o->sender = false;
            role = true;
        } else if (!strcmp(a, "--mode=measure")) {
            o->mode = T2_MEASURE;
        } else if (!strcmp(a, "--mode=check")) {
            o->mode = T2_CHECK;
        } else if (!strcmp(a, "--mode=capacity")) {
            o->mode = T2_CAPACITY;
        } else if (!strncmp(a, "--ring-slots=", 13)) {
            if (!t2_u32(v, 1, 1u << 16, &o->ring_slots))
                return t2_usage("bad --ring-slots");
        } else if (!strncmp(a, "--max-msg=", 10)) {
            if (!t2_u32(v, 1, 1u << 24, &o->max_size))
                return t2_usage("bad --max-msg");
        } else if (!strcmp(a, "--mode=memory")) {
            o->mode = T2_MEMORY;
        } else if (!strcmp(a, "--fanout=in")) {
            o->fanout_out = false;
        } else if (!strcmp(a, "--fanout=out")) {
            o->fanout_out = true;
        } else if (!strncmp(a, "--messages=", 11)) {
            if (!t2_u32(v, 1, 1u << 20, &o->messages))
                return t2_usage("bad --messages");
        } else if (!strncmp(a, "--id=", 5)) {
            if (!t2_u32(v, 0, T2_MAX_PEERS - 1, &o->id))
                return t2_usage("bad --id");
        } else if (!strncmp(a, "--peers=", 8)) {
            if (!t2_u32(v, 1, T2_MAX_PEERS, &o->peers))
                return t2_usage("bad --peers");
        } else if (!strncmp(a, "--slots=", 8)) {
            if (!t2_u32(v, 1, 1u << 16, &o->slots))
                return t2_usage("bad --slots");
        } else if (!strncmp(a, "--name=", 7)) {
            if (!*v || strlen(v) >= sizeof(o->name) - 8)
                return t2_usage("bad --name");
            snprintf(o->name, sizeof(o->name), "%s", v);
        } else if (!strncmp(a, "--sizes=", 8)) {
            o->nsizes = 0;
            char buf[256];
            snprintf(buf, sizeof(buf), "%s", v);
            for (char *save = NULL, *t = strtok_r(buf, ",", &save); t;
                 t = strtok_r(NULL, ",", &save)) {
                if (o->nsizes == T2_MAX_SIZES || !t2_u32(t, 1, 1u << 24, &o->sizes[o->nsizes]))
                    return t2_usage("bad --sizes");
                o->nsizes++;
            }
            if (!o->nsizes)
                return t2_usage("empty --sizes");
        } else {
            return t2_usage("unknown option");
        }
    }
    if (!o->ops || !role)
        return t2_usage("--channel and --role are required");
    for (uint32_t i = 0; i < o->nsizes; i++) {
        uint32_t s =
            o->sizes[i] < T2_HDR_BYTES && o->sizes[i] != T2_TINY_BYTES ? T2_HDR_BYTES : o->sizes[i];
        if (s > o->max_size)
            o->max_size = s;
    }
    return 0;
}

/* ---------------------------------------------------------------- endpoints */

static uint64_t t2_ring_bytes(uint64_t msgs, uint32_t max_size)
{
    uint64_t b = msgs * ((uint64_t)max_size + T2_RING_SLACK_BYTES);
    return (b + 4095u) & ~(uint64_t)4095u;
}

/* Open one endpoint named `name` (kept alive by the caller). */
static int t2_open(const struct t2_opts *o, struct chan *c, const char *name, uint32_t senders,
                   uint32_t receivers, uint32_t id)
{
    /* measure: no flow control during the M messages (slots, ring >= 2 M);
     * check / memory: 16 slots (an estimate: small enough that flow control
     * runs in a check of a few hundred messages) */
    uint32_t slots = o->slots ? o->slots : o->mode == T2_MEASURE ? 2 * o->messages : 16;
    if (slots < 2)
        slots = 2;
    struct chan_config cfg = {
        .name = name,
        .role = o->sender ? CHAN_SENDER : CHAN_RECEIVER,
        .id = id,
        .senders = senders,
        .receivers = receivers,
        .max_msg_bytes = o->max_size,
        .slots = slots,
        .ring_bytes = (size_t)t2_ring_bytes(o->ring_slots ? o->ring_slots : slots, o->max_size),
    };
    int rc = chan_open(c, o->ops, &cfg);
    if (rc < 0)
        fprintf(stderr, "taranov_t2 %s: chan_open %s: %s (%s)\n", o->sender ? "sender" : "receiver",
                o->ops->name, c->err, strerror(-rc));
    return rc;
}

/* ---------------------------------------------------------------- sender / receiver */

/* Check mode: a receiver that gets nothing for this long reports the next
 * message as lost ("never arrived", check 6), as litmus --timeout-us does:
 * a ring whose bell an out-of-order write cleared waits forever otherwise.
 * 10 ms is far above a message's delivery time in these scenarios (~us)
 * and below the scenarios' 100 ms stop_time; an estimate (RC's 67 ms
 * retransmission timeout never fires here: the fabrics are lossless). */
#define T2_CHECK_TIMEOUT_NS 10000000ull

/* Waiting between two polls that found nothing.  Not host_relax(): a
 * channel's ibv_poll_cq charges its CPU time after looking at the CQ, and
 * a CQE that lands during that charge wakes nobody, so a host_relax() right
 * after it can park forever (seen with send-normal under relaxed DMA
 * ordering).  Instead the driver sleeps (host_compute) 100 ns, doubling up
 * to 5 us while nothing arrives: an estimate that keeps the added latency
 * small next to a 2-3 us round trip and the number of polls low in long
 * waits.  A channel that never delivers then ends at the scenario's
 * stop_time ("time limit") instead of as a deadlock. */
#define T2_SETTLE_NS 50000 /* measure mode: the receiver starts 50 us after "go" */
#define T2_POLL_MIN_NS 100
#define T2_POLL_MAX_NS 5000
static void t2_wait(uint64_t *backoff_ns)
{
    if (*backoff_ns < T2_POLL_MIN_NS)
        *backoff_ns = T2_POLL_MIN_NS;
    host_compute(*backoff_ns);
    if (*backoff_ns < T2_POLL_MAX_NS)
        *backoff_ns *= 2;
}

struct t2_rx {
    struct chan_region zc; /* zero-copy destination (recv_into channels without recv) */
    bool zc_ready;
};

/* Receive one message into *out (bytes) and *len; 0, or -errno. */
static int t2_recv_one(struct chan *c, struct t2_rx *rx, struct chan_region *r, bool *copied,
                       uint64_t timeout_ns)
{
    *copied = false;
    uint64_t backoff = 0, t0 = host_now_ns();
    for (;;) {
        int rc;
        if (c->ops->recv) {
            rc = chan_recv(c, r);
        } else {
            struct chan_region_option opt;
            rc = c->ops->can_recv ? c->ops->can_recv(c, &opt) : -ENOSYS;
            if (rc == 0) {
                if (!rx->zc_ready) {
                    rc = chan_alloc(c, c->cfg.max_msg_bytes, &rx->zc);
                    if (rc < 0)
                        return rc;
                    rx->zc_ready = true;
                }
                uint64_t h;
                rc = c->ops->recv_into(c, &opt, &rx->zc, &h);
                while (rc == 0 && (rc = c->ops->test_recv(c, h)) == CHAN_AGAIN)
                    t2_wait(&backoff);
                if (rc == 0) {
                    *r = rx->zc;
                    r->len = opt.len;
                    *copied = true;
                }
            }
        }
        if (rc == 0)
            return 0;
        if (rc < 0)
            return rc;
        if (timeout_ns && host_now_ns() - t0 > timeout_ns)
            return -ETIMEDOUT;
        t2_wait(&backoff);
    }
}

/* A send that must not wait for its completion (check mode streams). */
static int t2_send_stream(struct chan *c, const struct chan_region *r, uint64_t *h)
{
    int rc;
    uint64_t backoff = 0;
    while ((rc = chan_send(c, r, h)) == CHAN_AGAIN)
        t2_wait(&backoff);
    return rc;
}

static void t2_key(char *buf, size_t n, const struct chan *c, const char *what, uint64_t i)
{
    snprintf(buf, n, "%s/t2/%s/%" PRIu64, c->cfg.name, what, i);
}

static int t2_violation(const struct t2_opts *o, uint64_t msg, int check, uint64_t seq_got,
                        size_t len_got)
{
    static const char *const why[] = {"",
                                      "shorter than its header",
                                      "bad length field",
                                      "bad checksum",
                                      "wrong sequence number",
                                      "duplicate",
                                      "never arrived (nothing for 10 ms)"};
    fprintf(stderr,
            "taranov_t2 receiver: VIOLATION: %s message %" PRIu64 ": %s (seq %" PRIu64
            ", %zu bytes) (t=%" PRIu64 " ns)\n",
            o->ops->name, msg, why[check], seq_got, len_got, host_now_ns());
    struct host_kv kv[] = {{"message", (double)msg},
                           {"check", check},
                           {"seq_got", (double)seq_got},
                           {"len_got", (double)len_got},
                           {"t_ns", (double)host_now_ns()}};
    host_report("order_violation", kv, sizeof(kv) / sizeof(kv[0]));
    return T2_EXIT_BAD;
}

/* Sender of one endpoint: messages 1..M, one at a time with marks in
 * measure mode, else streamed.  Every message in flight has its own
 * buffer (M of them in measure mode, 2 x slots otherwise), so a channel
 * that completes sends only when the receiver acknowledges, lazily, never
 * stalls the loop on a buffer; the sender ends once the receiver says it
 * has every message (its memory stays registered until then: readers may
 * still be reading it). */
static int t2_sender(const struct t2_opts *o, struct chan *c)
{
    uint32_t nbuf =
        o->mode == T2_MEASURE || o->mode == T2_CAPACITY ? o->messages : 2 * c->cfg.slots;
    if (nbuf > o->messages)
        nbuf = o->messages;
    struct chan_region *bufs = calloc(nbuf, sizeof(*bufs));
    uint64_t *handles = calloc(nbuf, sizeof(*handles));
    bool *pending = calloc(nbuf, sizeof(*pending));
    uint32_t nalloc = 0;
    int rc = bufs && handles && pending ? 0 : -ENOMEM;
    bool oob_failed = false;
    for (; rc >= 0 && nalloc < nbuf; nalloc++)
        if ((rc = chan_alloc(c, o->max_size, &bufs[nalloc])) < 0)
            fprintf(stderr, "taranov_t2 sender: chan_alloc: %s\n", c->err);
    for (uint64_t i = 1; i <= o->messages && rc >= 0; i++) {
        uint32_t b = (uint32_t)((i - 1) % nbuf);
        if (pending[b]) { /* reuse a buffer once its send completed */
            uint64_t backoff = 0;
            while ((rc = chan_test_send(c, handles[b])) == CHAN_AGAIN)
                t2_wait(&backoff);
            pending[b] = false;
            if (rc < 0)
                break;
        }
        struct chan_region r = bufs[b];
        r.len = t2_size(o, i);
        t2_fill(r.addr, (uint64_t)c->cfg.id << 32 | i, (uint32_t)r.len);
        char key[160];
        if (o->mode == T2_MEASURE) {
            host_trace_mark("t2-send", i);
            t2_key(key, sizeof(key), c, "go", i);
            if (rc_conn_oob_put("taranov_t2 sender", key, &i, sizeof(i)) != 0) {
                rc = -EIO;
                oob_failed = true;
                break;
            }
        }
        rc = t2_send_stream(c, &r, &handles[b]);
        pending[b] = rc >= 0;
        if (rc >= 0 && o->mode == T2_MEASURE) {
            uint64_t got;
            t2_key(key, sizeof(key), c, "done", i);
            if (rc_conn_oob_get("taranov_t2 sender", key, &got, sizeof(got)) != 0) {
                rc = -EIO;
                oob_failed = true;
            }
            host_trace_mark("t2-end", i);
            /* let the receiver's acknowledgement traffic of message i
             * drain before message i + 1 opens its window */
            host_compute(T2_QUIET_NS);
        }
    }
    if (rc < 0 && !oob_failed) /* an out-of-band failure was named where it happened */
        fprintf(stderr, "taranov_t2 sender: %s: %s (%s)\n", o->ops->name, c->err, strerror(-rc));
    uint32_t readers = c->ops->features.multi_reader ? c->cfg.receivers : 1;
    for (uint32_t j = 0; j < readers && rc >= 0; j++) {
        char key[160];
        uint64_t got;
        t2_key(key, sizeof(key), c, "all", readers > 1 ? j : c->cfg.id);
        if (rc_conn_oob_get("taranov_t2 sender", key, &got, sizeof(got)) != 0)
            rc = -EIO;
    }
    for (uint32_t b = 0; b < nalloc; b++)
        chan_release(c, &bufs[b]);
    free(bufs);
    free(handles);
    free(pending);
    return rc < 0 ? T2_EXIT_USAGE : T2_EXIT_OK;
}

/* Receiver of `n` endpoints (n > 1: point-to-point N:1, endpoint e = sender
 * e) or of one endpoint with `senders` senders (a shared channel): M
 * messages from each sender. */
static int t2_receiver(const struct t2_opts *o, struct chan *cs, uint32_t n, uint32_t senders)
{
    uint64_t total = (uint64_t)o->messages * senders;
    uint64_t *next = calloc(senders, sizeof(uint64_t)); /* per sender: last seq taken */
    uint8_t *seen = calloc((size_t)senders * (o->messages + 1), 1);
    struct t2_rx *rx = calloc(n, sizeof(*rx));
    if (!next || !seen || !rx) {
        free(next);
        free(seen);
        free(rx);
        return T2_EXIT_USAGE;
    }
    int ret = T2_EXIT_OK;
    uint64_t lens_exact = 0;
    for (uint64_t k = 1; k <= total && ret == T2_EXIT_OK; k++) {
        uint32_t e = n > 1 ? (uint32_t)((k - 1) % n) : 0; /* endpoints in turn */
        struct chan *c = &cs[e];
        if (o->mode == T2_MEASURE) {
            char key[160];
            uint64_t got;
            t2_key(key, sizeof(key), c, "go", k);
            if (rc_conn_oob_get("taranov_t2 receiver", key, &got, sizeof(got)) != 0) {
                ret = T2_EXIT_USAGE;
                break;
            }
            /* let the sender get the message out first: a zero-copy send
             * may register its buffer (ibv_reg_mr costs tens of us), and a
             * receiver that polls meanwhile would count polls the protocol
             * needs only because the sender was slow */
            host_compute(T2_SETTLE_NS);
        }
        struct chan_region r;
        bool zc;
        int rc = t2_recv_one(c, &rx[e], &r, &zc, o->mode == T2_CHECK ? T2_CHECK_TIMEOUT_NS : 0);
        if (rc == -ETIMEDOUT) { /* a message lost for good: an ordering failure too */
            ret = t2_violation(o, k, 6, 0, 0);
            break;
        }
        if (rc < 0) {
            fprintf(stderr, "taranov_t2 receiver: %s: %s (%s)\n", o->ops->name, c->err,
                    strerror(-rc));
            ret = T2_EXIT_USAGE;
            break;
        }
        if (o->mode == T2_MEASURE)
            host_trace_mark("t2-recv", k);
        uint64_t seq;
        int bad = t2_verify(r.addr, r.len, &seq);
        uint32_t s = n > 1 ? e : (uint32_t)(seq >> 32);
        uint64_t lo = seq & 0xffffffffu;
        if (!bad && (s >= senders || lo == 0 || lo > o->messages))
            bad = 4;
        if (!bad && o->ops->features.ordered && lo != next[s] + 1)
            bad = 4;
        size_t idx = (size_t)s * (o->messages + 1) + (size_t)lo;
        if (!bad && seen[idx])
            bad = 5;
        if (bad) {
            ret = t2_violation(o, k, bad, seq, r.len);
            break;
        }
        if (r.len == t2_size(o, lo))
            lens_exact++;
        seen[idx] = 1;
        if (lo > next[s])
            next[s] = lo;
        if (!zc && (rc = chan_free(c, &r)) < 0) {
            fprintf(stderr, "taranov_t2 receiver: chan_free: %s\n", c->err);
            ret = T2_EXIT_USAGE;
            break;
        }
        if (o->mode == T2_MEASURE) {
            char key[160];
            host_trace_mark("t2-done", k);
            t2_key(key, sizeof(key), c, "done", k);
            if (rc_conn_oob_put("taranov_t2 receiver", key, &k, sizeof(k)) != 0)
                ret = T2_EXIT_USAGE;
        }
    }
    if (ret == T2_EXIT_OK) {
        struct host_kv kv[] = {{"messages_checked", (double)total},
                               {"lengths_exact", (double)lens_exact}};
        host_report("order_check", kv, sizeof(kv) / sizeof(kv[0]));
        /* release the senders (they keep their memory until then) */
        for (uint32_t e = 0; e < n; e++) {
            uint32_t from = cs[e].cfg.senders > 1 ? 0 : cs[e].cfg.id;
            uint32_t to = cs[e].cfg.senders > 1 ? cs[e].cfg.senders : cs[e].cfg.id + 1;
            for (uint32_t j = from; j < to; j++) {
                char key[160];
                t2_key(key, sizeof(key), &cs[e], "all", j);
                if (rc_conn_oob_put("taranov_t2 receiver", key, &total, sizeof(total)) != 0)
                    ret = T2_EXIT_USAGE;
            }
        }
    }
    for (uint32_t e = 0; e < n; e++)
        if (rx[e].zc_ready)
            chan_release(&cs[e], &rx[e].zc);
    free(next);
    free(seen);
    free(rx);
    return ret;
}

/* Capacity (--mode=capacity, the "variable size" column): the receiver
 * takes messages without freeing them until nothing more arrives for
 * 200 us (an estimate: ~100 round trips of the star; the first message may
 * take longer: the sender registers its buffers first), reports how many it
 * holds at once in a row of "capacity" (held, slots, max_msg_bytes), then
 * frees them and takes the rest.  `rnicsim table2` divides the receiver's
 * registered bytes by the number held: a channel that spends a slot or a
 * receive buffer of --max-msg bytes per message needs about that much per
 * small message; a ring (sized by --ring-slots) much less. */
#define T2_HOLD_TIMEOUT_NS 200000ull
#define T2_FIRST_TIMEOUT_NS 50000000ull /* the sender registers its buffers first */
static int t2_capacity(const struct t2_opts *o, struct chan *c)
{
    struct chan_region *held = calloc(o->messages, sizeof(*held));
    struct t2_rx rx = {0};
    if (!held)
        return T2_EXIT_USAGE;
    int ret = T2_EXIT_OK;
    uint32_t nheld = 0, taken = 0;
    while (nheld < o->messages && c->ops->recv) {
        bool zc;
        int rc = t2_recv_one(c, &rx, &held[nheld], &zc,
                             nheld ? T2_HOLD_TIMEOUT_NS : T2_FIRST_TIMEOUT_NS);
        if (rc == -ETIMEDOUT)
            break;
        uint64_t seq;
        if (rc < 0 || t2_verify(held[nheld].addr, held[nheld].len, &seq)) {
            fprintf(stderr, "taranov_t2 receiver: %s: capacity: %s\n", o->ops->name,
                    rc < 0 ? c->err : "a bad message");
            ret = T2_EXIT_BAD;
            break;
        }
        nheld++;
    }
    struct host_kv kv[] = {
        {"held", nheld}, {"slots", c->cfg.slots}, {"max_msg_bytes", (double)c->cfg.max_msg_bytes}};
    host_report("capacity", kv, sizeof(kv) / sizeof(kv[0]));
    for (uint32_t i = 0; i < nheld && ret == T2_EXIT_OK; i++)
        if (chan_free(c, &held[i]) < 0) {
            fprintf(stderr, "taranov_t2 receiver: chan_free: %s\n", c->err);
            ret = T2_EXIT_USAGE;
        }
    for (taken = nheld; taken < o->messages && ret == T2_EXIT_OK; taken++) {
        struct chan_region r;
        bool zc;
        int rc = t2_recv_one(c, &rx, &r, &zc, T2_CHECK_TIMEOUT_NS);
        if (rc < 0 || (!zc && chan_free(c, &r) < 0)) {
            fprintf(stderr, "taranov_t2 receiver: %s: %s\n", o->ops->name, c->err);
            ret = T2_EXIT_USAGE;
        }
    }
    if (ret == T2_EXIT_OK) {
        uint64_t total = o->messages;
        char key[160];
        t2_key(key, sizeof(key), c, "all", c->cfg.id);
        if (rc_conn_oob_put("taranov_t2 receiver", key, &total, sizeof(total)) != 0)
            ret = T2_EXIT_USAGE;
    }
    if (rx.zc_ready)
        chan_release(c, &rx.zc);
    free(held);
    return ret;
}

int taranov_t2_main(int argc, char **argv)
{
    struct t2_opts o;
    int rc = t2_parse(argc, argv, &o);
    if (rc)
        return rc;
    const struct chan_features *f = &o.ops->features;
    /* Endpoints of this program (file comment, --mode=memory): the hub of
     * N:1 (fan-in: receiver) or 1:N (fan-out: sender) opens one endpoint
     * per peer unless the channel shares one (shared / multi_reader). */
    uint32_t n = 1, senders = 1, receivers = 1, id = 0;
    bool shared_ep = false;
    if (o.mode == T2_MEMORY && o.peers > 1) {
        bool hub = o.fanout_out == o.sender;
        shared_ep = o.fanout_out ? f->multi_reader : f->shared;
        if (shared_ep) {
            if (o.fanout_out)
                receivers = o.peers;
            else
                senders = o.peers;
            id = hub ? 0 : o.id;
        } else if (hub) {
            n = o.peers;
        }
    }
    struct chan *cs = calloc(n, sizeof(*cs));
    char(*names)[96] = calloc(n, sizeof(*names));
    if (!cs || !names) {
        free(cs);
        free(names);
        return T2_EXIT_USAGE;
    }
    uint32_t opened = 0;
    int ret = T2_EXIT_OK;
    for (; opened < n; opened++) {
        if (o.mode == T2_MEMORY && o.peers > 1 && !shared_ep)
            snprintf(names[opened], sizeof(names[opened]), "%s.%u", o.name, n > 1 ? opened : o.id);
        else
            snprintf(names[opened], sizeof(names[opened]), "%s", o.name);
        if (t2_open(&o, &cs[opened], names[opened], senders, receivers, id) < 0) {
            ret = T2_EXIT_USAGE;
            break;
        }
    }
    if (ret == T2_EXIT_OK) {
        if (o.sender)
            for (uint32_t e = 0; e < n && ret == T2_EXIT_OK; e++)
                ret = t2_sender(&o, &cs[e]);
        else
            ret = o.mode == T2_CAPACITY ? t2_capacity(&o, &cs[0])
                                        : t2_receiver(&o, cs, n, n > 1 ? n : senders);
    }
    for (uint32_t e = 0; e < opened; e++)
        chan_close(&cs[e]);
    free(cs);
    free(names);
    return ret;
}
