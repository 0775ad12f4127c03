/* rb2: the evaluation driver of RB² and its rival DRBs (docs/rb2.md).
 *
 *   rb2 --server | --client [--variant=rb2|farm|sd|l5] [--mode=bw|pingpong|rpc|example]
 *       [--size=B] [--resp-size=B] [--slots=N] [--messages=N] [--warmup=N]
 *       [--bytes=V [--max-messages=N]] [--threads=T] [--window=W]
 *       [--head=push|pull|active|pullfull] [--tail=wt|cq|pollmsg|lenword]
 *       [--alpha=A] [--beta=B] [--gamma=G] [--elastic=text|as_printed|off|block]
 *       [--batching=0|1] [--zero-copy=0|1] [--cache-friendly=0|1]
 *       [--hugepages=0|1] [--numa=0|1] [--sync-send=0|1] [--ablation=M1..M9]
 *       [--inline=N] [--post=list|each] [--zero-read=0|1] [--copy-in-ps=N] [--sw-ns=N]
 *       [--div-ns=N]
 *       [--name=P]
 *       [server-host]
 *
 * --variant picks a row of the paper's Table I (the presets below); the
 * other switches then change one design choice of it.  --bytes sends a
 * volume instead of a count in a stream (bw): max(64, V / size) messages,
 * at most --max-messages; ping-pong and rpc ignore it (--messages).  --size is the
 * message as the ring holds it: the 8-byte DRB header + payload; a ring has
 * --slots messages of --size (128: the paper's "128 times the message
 * size").  --batching=0 is RB²'s latency mode (α = β = 1); --gamma stays.
 * --ablation=Mk is a row of the paper's Table II: M1 the full RB², M2
 * without any batching (α = β = γ = 1), M3 without sync-ahead (β = α), M4
 * without the elastic threshold, M5 without lazy push (γ = 1), M6 without
 * zero copy, M7 without the cache-friendly structure, M8 without huge
 * pages (the rings on 4 KiB pages: the NIC's page table and the cores'
 * TLBs), M9 on the wrong socket.
 *
 * bw (the client sends --messages to the server): the receiver checks
 * every message (sequence number, length, every payload word) and
 * reports "rb2_bw": size_bytes, threads, messages, elapsed_us (barrier to
 * the last message, slowest pair), gbps (message bytes), mmsgs,
 * lat_p50_us / lat_p999_us (one way, the send time the sender stamped
 * into the message: simulated time is one clock) and "order_check".
 * pingpong: --warmup + --messages round trips, request --size, response
 * --resp-size (default --size), each published at once (Flush);
 * client table "rb2_pingpong": rtt_avg_us, rtt_p50_us, rtt_p99_us,
 * rtt_p999_us, rtt_max_us.  rpc: the client keeps --window requests
 * outstanding (YCSB-C: 16 B requests, 128 B responses), publishing when
 * its window is full or no response is there; the server answers every
 * request and publishes when it finds no more; client table "rb2_rpc":
 * requests, elapsed_us, mreq_s, rtt_p50_us, rtt_p999_us.
 * Each of T thread pairs has its own DRB and QP and runs on its own core
 * (rb2_numa_cpu: the NIC's socket, or the other one with --numa=0).
 * The sender's table "rb2_tx": writes (data WRITEs), tail_syncs, deferred
 * (elastic), head_syncs (receiver), pulls, full_waits, copied_bytes.
 * A bad message: "VIOLATION" on stderr, an "order_violation" row, exit 1
 * (the rnicsim check-order contract).  Exit 2: usage or set-up error. */
#include "protocols/rb2/rb2_bench.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocols/common/pages.h"
#include "protocols/rb2/rb2.h"
#include "rnicsim/host.h"

#define RB2B_MAX_THREADS 16
#define RB2B_GOLDEN 0x9e3779b97f4a7c15ull

enum rb2b_mode { RB2B_BW, RB2B_PINGPONG, RB2B_RPC, RB2B_EXAMPLE };

struct rb2b_opts {
    bool server;
    enum rb2b_mode mode;
    const char *variant, *name, *ablation;
    uint64_t size, resp_size, slots, messages, warmup, threads, window, bytes, max_messages;
    struct rb2_config cfg; /* the variant's, then the switches */
};

/* One thread pair's side. */
struct rb2b_pair {
    const struct rb2b_opts *o;
    const char *prog;
    int index, rc;
    char name[RC_CONN_NAME_MAX];
    struct rb2 rb;
    uint64_t elapsed_ns, checked, bytes;
    uint64_t *lat;  /* samples (ns) */
    uint8_t *rxbuf; /* the application's buffer rb2_read copies into (no zero copy) */
    uint32_t rxcap;
    uint64_t nlat;
    uint64_t expect; /* next sequence number */
    /* the first violation */
    char why[160];
};

/* ------------------------------------------------------------ options */

static int rb2b_variant(struct rb2b_opts *o, const char *v)
{
    struct rb2_config *c = &o->cfg;
    uint32_t slot = (uint32_t)((o->size + 63) / 64 * 64);
    rb2_config_default(c, slot, (uint32_t)o->slots);
    o->variant = v;
    if (!strcmp(v, "rb2"))
        return 0;
    /* the rivals: back-to-back (8-byte units), the ring 128 messages,
     * lazy push of the head every γ = 32 (as RB²: the paper gives no
     * threshold of theirs), no zero copy, no cache-friendly structure */
    c->unit_bytes = 8;
    c->units = (uint32_t)(o->slots * ((o->size + 7) / 8));
    c->zero_copy = false;
    c->cache_friendly = false;
    c->hugepages = false;
    c->alpha = c->beta = 1;
    c->elastic = RB2_ELASTIC_OFF;
    if (!strcmp(v, "farm")) { /* receiver only, data then length word, huge pages */
        c->sender_ring = false;
        c->tail = RB2_TAIL_LEN_WORD;
        c->hugepages = true;
    } else if (!strcmp(v, "sd")) { /* WRITE_WITH_IMM + poll CQ, <= 10 in flight */
        c->tail = RB2_TAIL_POLL_CQ;
        c->max_inflight = 10;
    } else if (!strcmp(v, "l5")) {
        /* L5 as its open source runs by default (L5RDMA,
         * datastructures/VirtualRDMARingBuffer.h, the paper's reference
         * [34]), no batching: send() posts ONE WRITE of length word,
         * payload and a validity trailer the receiver polls (poll message;
         * sendParanoid, write twice, is "unused by default": --tail=wt
         * --post=each is Table I's reading), inline when it fits
         * (maxInlineSize 512 in rdma/QueuePair.hpp; the library's cap is
         * 220), one post per WR; the head pulled by a READ only when the
         * sender finds the ring full (waitUntilSendFree); every message
         * zeroed by the receiver after it was read (receive: std::fill);
         * the copy in a loop of one-byte stores (send(data, length):
         * std::copy into volatile uint8_t *, see rb2_copy_in): 1.25
         * cycles a byte at the testbed's 2.3 GHz (Xeon Gold 5118); no
         * division: its ring's size is a power of two and positions are
         * masked (`bitmask`), lengths are bytes */
        c->tail = RB2_TAIL_POLL_MSG;
        c->div_ns = 0;
        c->inline_bytes = RB2_MAX_INLINE;
        c->head = RB2_HEAD_PULL_FULL;
        c->zero_read = true;
        c->copy_in_ps_per_byte = 543;
    } else {
        return -1;
    }
    return 0;
}

static bool rb2b_bool(const char *s, bool *out)
{
    if (!strcmp(s, "1") || !strcmp(s, "on") || !strcmp(s, "true"))
        *out = true;
    else if (!strcmp(s, "0") || !strcmp(s, "off") || !strcmp(s, "false"))
        *out = false;
    else
        return false;
    return true;
}

static int rb2b_usage(const char *prog, const char *bad)
{
    if (bad)
        fprintf(stderr, "%s: bad option '%s'\n", prog, bad);
    printf(
        "usage: %s --server | --client [--variant=rb2|farm|sd|l5] "
        "[--mode=bw|pingpong|rpc|example]\n"
        "   [--size=B] [--resp-size=B] [--slots=N] [--messages=N] [--bytes=V] [--max-messages=N]\n"
        "   [--warmup=N] [--threads=T]\n"
        "   [--window=W] [--head=push|pull|active|pullfull] [--tail=wt|cq|pollmsg|lenword]\n"
        "   [--alpha=A] [--beta=B] [--gamma=G] [--elastic=text|as_printed|off|block] "
        "[--batching=0|1]\n"
        "   [--zero-copy=0|1] [--cache-friendly=0|1] [--hugepages=0|1] [--numa=0|1]\n"
        "   [--sync-send=0|1] [--ablation=M1..M9]\n"
        "   [--inline=N] [--post=list|each] [--zero-read=0|1] [--copy-in-ps=N] [--sw-ns=N]\n"
        "   [--div-ns=N]\n"
        "   [--name=P]\n"
        "   [server-host]\n",
        prog);
    return bad ? 2 : 1;
}

/* 0 ok, 1 help, 2 bad.  Two passes: the size and variant first, then
 * the switches that change the variant's configuration. */
static int rb2b_parse(int argc, char **argv, struct rb2b_opts *o)
{
    *o = (struct rb2b_opts){.size = 64,
                            .slots = 128,
                            .messages = 20000,
                            .warmup = 100,
                            .threads = 1,
                            .window = 16,
                            .name = "rb2"};
    const char *variant = "rb2";
    bool have_role = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help"))
            return rb2b_usage(argv[0], NULL);
        if (!strcmp(a, "--server") || !strcmp(a, "--client")) {
            o->server = a[2] == 's';
            have_role = true;
        } else if (!strncmp(a, "--size=", 7)) {
            if (!rc_conn_parse_uint(a + 7, 16, 64ull << 20, &o->size))
                return rb2b_usage(argv[0], a);
        } else if (!strncmp(a, "--slots=", 8)) {
            if (!rc_conn_parse_uint(a + 8, 4, 1u << 20, &o->slots))
                return rb2b_usage(argv[0], a);
        } else if (!strncmp(a, "--variant=", 10)) {
            variant = a + 10;
        }
    }
    if (!have_role)
        return rb2b_usage(argv[0], "(need --server or --client)");
    if (rb2b_variant(o, variant))
        return rb2b_usage(argv[0], variant);
    struct rb2_config *c = &o->cfg;
    o->resp_size = o->size;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        uint64_t v;
        bool b;
        if (!strcmp(a, "--server") || !strcmp(a, "--client") || !strncmp(a, "--size=", 7) ||
            !strncmp(a, "--slots=", 8) || !strncmp(a, "--variant=", 10))
            continue;
        if (!strcmp(a, "--mode=bw"))
            o->mode = RB2B_BW;
        else if (!strcmp(a, "--mode=pingpong"))
            o->mode = RB2B_PINGPONG;
        else if (!strcmp(a, "--mode=rpc"))
            o->mode = RB2B_RPC;
        else if (!strcmp(a, "--mode=example"))
            o->mode = RB2B_EXAMPLE;
        else if (!strncmp(a, "--resp-size=", 12) && rc_conn_parse_uint(a + 12, 16, 64ull << 20, &v))
            o->resp_size = v;
        else if (!strncmp(a, "--messages=", 11) && rc_conn_parse_uint(a + 11, 1, 1ull << 32, &v))
            o->messages = v;
        else if (!strncmp(a, "--bytes=", 8) && rc_conn_parse_size(a + 8, &v) && v)
            o->bytes = v;
        else if (!strncmp(a, "--max-messages=", 15) &&
                 rc_conn_parse_uint(a + 15, 1, 1ull << 32, &v))
            o->max_messages = v;
        else if (!strncmp(a, "--warmup=", 9) && rc_conn_parse_uint(a + 9, 0, 1u << 24, &v))
            o->warmup = v;
        else if (!strncmp(a, "--threads=", 10) &&
                 rc_conn_parse_uint(a + 10, 1, RB2B_MAX_THREADS, &v))
            o->threads = v;
        else if (!strncmp(a, "--window=", 9) && rc_conn_parse_uint(a + 9, 1, 4096, &v))
            o->window = v;
        else if (!strncmp(a, "--ablation=M", 12) && rc_conn_parse_uint(a + 12, 1, 9, &v)) {
            /* Table II: M1 full RB², M2-M9 one optimisation off */
            static const char *const what[] = {
                "",          "",          "all batching",   "sync-ahead", "elastic",
                "lazy push", "zero copy", "cache-friendly", "huge pages", "NUMA-aware"};
            o->ablation = what[v];
            if (v == 2) {
                c->alpha = c->beta = c->gamma = 1;
                c->elastic = RB2_ELASTIC_OFF;
            } else if (v == 3) {
                c->beta = c->alpha;
            } else if (v == 4) {
                c->elastic = RB2_ELASTIC_OFF;
            } else if (v == 5) {
                c->gamma = 1;
            } else if (v == 6) {
                c->zero_copy = false;
            } else if (v == 7) {
                c->cache_friendly = false;
            } else if (v == 8) {
                c->hugepages = false;
            } else if (v == 9) {
                c->numa_aware = false;
            }
        } else if (!strcmp(a, "--head=push"))
            c->head = RB2_HEAD_LAZY_PUSH;
        else if (!strcmp(a, "--head=pull"))
            c->head = RB2_HEAD_LAZY_PULL;
        else if (!strcmp(a, "--head=active"))
            c->head = RB2_HEAD_ACTIVE_PUSH;
        else if (!strcmp(a, "--head=pullfull"))
            c->head = RB2_HEAD_PULL_FULL;
        else if (!strncmp(a, "--zero-read=", 12) && rb2b_bool(a + 12, &b))
            c->zero_read = b;
        else if (!strcmp(a, "--tail=wt"))
            c->tail = RB2_TAIL_WRITE_TWICE;
        else if (!strcmp(a, "--tail=cq"))
            c->tail = RB2_TAIL_POLL_CQ;
        else if (!strcmp(a, "--tail=pollmsg"))
            c->tail = RB2_TAIL_POLL_MSG;
        else if (!strcmp(a, "--tail=lenword"))
            c->tail = RB2_TAIL_LEN_WORD;
        else if (!strncmp(a, "--alpha=", 8) && rc_conn_parse_uint(a + 8, 1, 1u << 20, &v))
            c->alpha = (uint32_t)v;
        else if (!strncmp(a, "--beta=", 7) && rc_conn_parse_uint(a + 7, 1, 1u << 20, &v))
            c->beta = (uint32_t)v;
        else if (!strncmp(a, "--gamma=", 8) && rc_conn_parse_uint(a + 8, 1, 1u << 20, &v))
            c->gamma = (uint32_t)v;
        else if (!strcmp(a, "--elastic=text"))
            c->elastic = RB2_ELASTIC_TEXT;
        else if (!strcmp(a, "--elastic=as_printed"))
            c->elastic = RB2_ELASTIC_AS_PRINTED;
        else if (!strcmp(a, "--elastic=off"))
            c->elastic = RB2_ELASTIC_OFF;
        else if (!strcmp(a, "--elastic=block"))
            c->elastic = RB2_ELASTIC_BLOCK;
        else if (!strncmp(a, "--batching=", 11) && rb2b_bool(a + 11, &b)) {
            if (!b)
                c->alpha = c->beta = 1;
        } else if (!strncmp(a, "--zero-copy=", 12) && rb2b_bool(a + 12, &b))
            c->zero_copy = b;
        else if (!strncmp(a, "--cache-friendly=", 17) && rb2b_bool(a + 17, &b))
            c->cache_friendly = b;
        else if (!strncmp(a, "--hugepages=", 12) && rb2b_bool(a + 12, &b))
            c->hugepages = b;
        else if (!strncmp(a, "--sync-send=", 12) && rb2b_bool(a + 12, &b))
            c->sync_send = b;
        else if (!strncmp(a, "--numa=", 7) && rb2b_bool(a + 7, &b))
            c->numa_aware = b;
        else if (!strcmp(a, "--post=list") || !strcmp(a, "--post=each"))
            c->post_each = a[7] == 'e';
        else if (!strncmp(a, "--inline=", 9) && rc_conn_parse_uint(a + 9, 0, 220, &v))
            c->inline_bytes = (uint32_t)v;
        else if (!strncmp(a, "--copy-in-ps=", 13) && rc_conn_parse_uint(a + 13, 0, 100000, &v))
            c->copy_in_ps_per_byte = (uint32_t)v;
        else if (!strncmp(a, "--sw-ns=", 8) && rc_conn_parse_uint(a + 8, 0, 1000000, &v))
            c->sw_ns = (uint32_t)v;
        else if (!strncmp(a, "--div-ns=", 9) && rc_conn_parse_uint(a + 9, 0, 1000000, &v))
            c->div_ns = (uint32_t)v;
        else if (!strncmp(a, "--name=", 7) && a[7] && strlen(a + 7) < RC_CONN_NAME_MAX - 8)
            o->name = a + 7;
        else if (a[0] == '-')
            return rb2b_usage(argv[0], a);
        /* a lone word: the server host on real hardware */
    }
    if (o->size < RB2_HDR_BYTES + 16 || o->resp_size < RB2_HDR_BYTES + 16) {
        fprintf(stderr, "%s: --size and --resp-size must be at least 24 bytes\n", argv[0]);
        return 2;
    }
    if (o->mode == RB2B_EXAMPLE) { /* the paper's Fig. 4: N 8, α 4, β 2, γ 2 */
        c->units = 8;
        c->alpha = 4;
        c->beta = 2;
        c->gamma = 2;
        c->elastic = RB2_ELASTIC_OFF;
    }
    /* a volume: at least 64 messages, at most --max-messages; a stream's
     * only (ping-pong and rpc count --messages round trips / requests) */
    if (o->bytes && o->mode == RB2B_BW) {
        o->messages = o->bytes / o->size < 64 ? 64 : o->bytes / o->size;
        if (o->max_messages && o->messages > o->max_messages)
            o->messages = o->max_messages;
    }
    if (c->beta > c->alpha)
        c->beta = c->alpha;
    const char *why = rb2_config_check(c);
    if (why) {
        fprintf(stderr, "%s: %s\n", argv[0], why);
        return 2;
    }
    return 0;
}

/* ------------------------------------------------------------ messages */

/* Payload of message `seq`: seq, send time, then word k = seq·φ + k (and
 * bytes of the next such word at an odd tail). */
struct rb2b_fill {
    uint64_t seq, t_ns;
};

static uint64_t rb2b_word(uint64_t seq, uint64_t k)
{
    return seq * RB2B_GOLDEN + k;
}

static void rb2b_fill_fn(void *arg, uint8_t *p, uint32_t len)
{
    const struct rb2b_fill *f = arg;
    rc_conn_put_le(p, f->seq, 8);
    rc_conn_put_le(p + 8, f->t_ns, 8);
    uint32_t k = 2;
    for (; (k + 1) * 8 <= len; k++) {
        uint64_t w = rb2b_word(f->seq, k);
        memcpy(p + k * 8, &w, 8);
    }
    uint64_t w = rb2b_word(f->seq, k);
    memcpy(p + k * 8, &w, len - k * 8);
}

struct rb2b_check {
    struct rb2b_pair *pr;
    uint32_t want_len;
    uint64_t seq, t_ns;
};

static int rb2b_consume(void *arg, const uint8_t *p, uint32_t len)
{
    struct rb2b_check *ck = arg;
    /* the application reads the sequence number (the rest of the check
     * is the simulator's, not the application's: not charged) */
    host_touch(p, 16);
    uint64_t seq = rc_conn_get_le(p, 8);
    ck->t_ns = rc_conn_get_le(p + 8, 8);
    ck->seq = seq;
    if (len != ck->want_len || seq != ck->pr->expect) {
        snprintf(ck->pr->why, sizeof(ck->pr->why),
                 "message %" PRIu64 ": sequence number %" PRIu64 ", length %" PRIu32
                 " (expected %" PRIu32 ")",
                 ck->pr->expect, seq, len, ck->want_len);
        return 1;
    }
    uint32_t k = 2;
    for (; (k + 1) * 8 <= len; k++) {
        uint64_t w;
        memcpy(&w, p + k * 8, 8);
        if (w != rb2b_word(seq, k))
            goto bad;
    }
    {
        uint64_t w = rb2b_word(seq, k), g = 0;
        memcpy(&g, p + k * 8, len - k * 8);
        if (memcmp(&g, &w, len - k * 8))
            goto bad;
    }
    ck->pr->expect++;
    return 0;
bad:
    snprintf(ck->pr->why, sizeof(ck->pr->why),
             "message %" PRIu64 ": payload word %" PRIu32 " of %" PRIu32 " bytes is not as sent",
             seq, k, len);
    return 1;
}

/* Write message `seq` (payload of `len`), retrying while the ring is full. */
static int rb2b_send(struct rb2b_pair *pr, uint64_t seq, uint32_t len, uint8_t *scratch)
{
    struct rb2b_fill f = {.seq = seq, .t_ns = host_now_ns()};
    for (;;) {
        int r;
        if (pr->rb.cfg.zero_copy) {
            r = rb2_write_zc(&pr->rb, len, rb2b_fill_fn, &f);
        } else {
            rb2b_fill_fn(&f, scratch, len); /* the application's own buffer */
            r = rb2_write(&pr->rb, scratch, len);
        }
        if (r == RB2_OK)
            return 0;
        if (r < 0)
            return -1;
        rb2_idle(&pr->rb);
    }
}

/* Read the next message (checked); 1 got one, 0 empty, -1 failure or a
 * bad message (pr->why says which). */
static int rb2b_recv(struct rb2b_pair *pr, uint32_t want_len, uint64_t *t_sent)
{
    struct rb2b_check ck = {.pr = pr, .want_len = want_len};
    int r;
    if (pr->rb.cfg.zero_copy) {
        r = rb2_read_zc(&pr->rb, rb2b_consume, &ck);
    } else { /* the copying API: into the application's buffer, then checked there */
        if (pr->rxcap < want_len) {
            free(pr->rxbuf);
            pr->rxbuf = pages_alloc(want_len);
            pr->rxcap = pr->rxbuf ? want_len : 0;
            if (!pr->rxbuf)
                return -1;
        }
        uint32_t len = 0;
        r = rb2_read(&pr->rb, pr->rxbuf, pr->rxcap, &len);
        if (r == RB2_OK && rb2b_consume(&ck, pr->rxbuf, len))
            return -1;
    }
    if (r == RB2_EMPTY)
        return 0;
    if (r < 0)
        return -1;
    pr->checked++;
    pr->bytes += want_len + RB2_HDR_BYTES;
    if (t_sent)
        *t_sent = ck.t_ns;
    return 1;
}

static int rb2b_violation(struct rb2b_pair *pr)
{
    if (!pr->why[0] && !pr->rb.violation)
        return 2; /* a transport error, reported by the library */
    if (pr->why[0])
        fprintf(stderr, "%s %s: VIOLATION: %s\n", pr->prog, pr->o->server ? "server" : "client",
                pr->why);
    struct host_kv kv[] = {{"message", (double)pr->expect},
                           {"pair", (double)pr->index},
                           {"t_ns", (double)host_now_ns()}};
    host_report("order_violation", kv, 3);
    return 1;
}

/* ------------------------------------------------------------ modes */

static int rb2b_bw(struct rb2b_pair *pr)
{
    const struct rb2b_opts *o = pr->o;
    uint32_t len = (uint32_t)(o->size - RB2_HDR_BYTES);
    uint64_t t0 = host_now_ns();
    if (!o->server) {
        uint8_t *scratch = pages_alloc(len);
        if (!scratch)
            return 2;
        int rc = 0;
        for (uint64_t i = 0; i < o->messages && !rc; i++)
            rc = rb2b_send(pr, i + 1, len, scratch);
        free(scratch);
        if (rc || rb2_flush(&pr->rb) || rb2_drain(&pr->rb))
            return 2;
        pr->elapsed_ns = host_now_ns() - t0;
        return 0;
    }
    pr->expect = 1;
    pr->lat = malloc(o->messages * sizeof(uint64_t));
    if (!pr->lat)
        return 2;
    while (pr->checked < o->messages) {
        uint64_t ts;
        int r = rb2b_recv(pr, len, &ts);
        if (r < 0)
            return rb2b_violation(pr);
        if (r == 0) {
            rb2_idle(&pr->rb);
            continue;
        }
        pr->lat[pr->nlat++] = host_now_ns() - ts;
    }
    pr->elapsed_ns = host_now_ns() - t0;
    return 0;
}

static int rb2b_pingpong(struct rb2b_pair *pr)
{
    const struct rb2b_opts *o = pr->o;
    uint32_t req = (uint32_t)(o->size - RB2_HDR_BYTES),
             resp = (uint32_t)(o->resp_size - RB2_HDR_BYTES);
    uint32_t in = o->server ? req : resp, out = o->server ? resp : req;
    uint64_t total = o->warmup + o->messages;
    uint8_t *scratch = pages_alloc(out > in ? out : in);
    if (!scratch)
        return 2;
    pr->lat = malloc(o->messages * sizeof(uint64_t));
    if (!pr->lat) {
        free(scratch);
        return 2;
    }
    pr->expect = 1;
    int rc = 0;
    uint64_t t_start = host_now_ns();
    for (uint64_t i = 0; i < total && !rc; i++) {
        uint64_t t0 = host_now_ns();
        if (!o->server && (rb2b_send(pr, i + 1, out, scratch) || rb2_flush(&pr->rb))) {
            rc = 2;
            break;
        }
        int r;
        while ((r = rb2b_recv(pr, in, NULL)) == 0)
            rb2_idle(&pr->rb);
        if (r < 0) {
            rc = rb2b_violation(pr);
            break;
        }
        if (o->server && (rb2b_send(pr, i + 1, out, scratch) || rb2_flush(&pr->rb)))
            rc = 2;
        if (!o->server && i >= o->warmup)
            pr->lat[pr->nlat++] = host_now_ns() - t0;
    }
    pr->elapsed_ns = host_now_ns() - t_start;
    free(scratch);
    if (!rc && rb2_drain(&pr->rb))
        rc = 2;
    return rc;
}

/* Client: up to --window requests outstanding; server: answer each. */
static int rb2b_rpc(struct rb2b_pair *pr)
{
    const struct rb2b_opts *o = pr->o;
    uint32_t req = (uint32_t)(o->size - RB2_HDR_BYTES),
             resp = (uint32_t)(o->resp_size - RB2_HDR_BYTES);
    uint32_t in = o->server ? req : resp, out = o->server ? resp : req;
    uint64_t total = o->messages;
    uint8_t *scratch = pages_alloc(out > in ? out : in);
    pr->lat = malloc(total * sizeof(uint64_t));
    if (!scratch || !pr->lat) {
        free(scratch);
        return 2;
    }
    pr->expect = 1;
    uint64_t t0 = host_now_ns(), sent = 0;
    int rc = 0;
    if (!o->server) {
        while (pr->checked < total && !rc) {
            bool moved = false;
            while (sent < total && sent - pr->checked < o->window) {
                if (rb2b_send(pr, sent + 1, out, scratch)) {
                    rc = 2;
                    break;
                }
                sent++;
                moved = true;
            }
            uint64_t ts;
            int r;
            while ((r = rb2b_recv(pr, in, &ts)) == 1) {
                pr->lat[pr->nlat++] =
                    host_now_ns() - ts; /* the response carries the request's time */
                moved = true;
            }
            if (r < 0) {
                rc = rb2b_violation(pr);
                break;
            }
            if (!moved) { /* nothing to do: publish, then wait */
                if (rb2_flush(&pr->rb)) {
                    rc = 2;
                    break;
                }
                rb2_idle(&pr->rb);
            }
        }
    } else {
        while (pr->checked < total && !rc) {
            uint64_t ts;
            int r = rb2b_recv(pr, in, &ts);
            if (r < 0) {
                rc = rb2b_violation(pr);
                break;
            }
            if (r == 0) {
                if (rb2_flush(&pr->rb)) {
                    rc = 2;
                    break;
                }
                rb2_idle(&pr->rb);
                continue;
            }
            struct rb2b_fill f = {.seq = pr->checked, .t_ns = ts};
            for (;;) { /* the response echoes the request's send time */
                int w;
                if (pr->rb.cfg.zero_copy) {
                    w = rb2_write_zc(&pr->rb, out, rb2b_fill_fn, &f);
                } else {
                    rb2b_fill_fn(&f, scratch, out);
                    w = rb2_write(&pr->rb, scratch, out);
                }
                if (w == RB2_OK)
                    break;
                if (w < 0) {
                    rc = 2;
                    break;
                }
                rb2_flush(&pr->rb);
                rb2_idle(&pr->rb);
            }
        }
        if (!rc && rb2_flush(&pr->rb))
            rc = 2;
    }
    pr->elapsed_ns = host_now_ns() - t0;
    free(scratch);
    if (!rc && rb2_drain(&pr->rb))
        rc = 2;
    return rc;
}

/* ------------------------------------------------------------ Fig. 4 */

/* The worked example of the paper (Fig. 4, as the build spec reconstructs
 * it): N = 8, α = 4, β = 2, γ = 2.  Three messages written and flushed,
 * one read, one more written: state (a); then write one (a -> b: two
 * slots transmitted ahead of the pointer), read two (b -> c: the first
 * read pushes the head, the second only advances it), write two (c -> d:
 * two slots sent, local_tail advanced by four, synced_tail = esc_tail =
 * tail).  Each side checks its pointers after every step; the receiver
 * then reads and checks the four messages it was given.  Table
 * "rb2_example": steps_checked, mismatches. */
struct rb2b_ex {
    struct rb2b_pair *pr;
    int checked, bad;
};

static void rb2b_ex_expect(struct rb2b_ex *ex, const char *step, const char *what, uint64_t got,
                           uint64_t want)
{
    ex->checked++;
    if (got == want)
        return;
    ex->bad++;
    fprintf(stderr, "%s: example %s: %s is %" PRIu64 ", expected %" PRIu64 "\n", ex->pr->prog, step,
            what, got, want);
}

static int rb2b_example(struct rb2b_pair *pr)
{
    const struct rb2b_opts *o = pr->o;
    struct rb2 *rb = &pr->rb;
    struct rc_conn *c = &rb->conn;
    uint32_t len = (uint32_t)(o->size - RB2_HDR_BYTES);
    uint8_t *scratch = pages_alloc(len);
    struct rb2b_ex ex = {.pr = pr};
    struct rb2_state st;
    int rc = 0;
    if (!scratch)
        return 2;
    pr->expect = 1;
    if (!o->server) {
        uint64_t w0;
        for (uint64_t i = 1; i <= 3 && !rc; i++)
            rc = rb2b_send(pr, i, len, scratch);
        if (rc || rb2_flush(rb))
            goto fail;
        rc_conn_barrier(c, 0, 1); /* 1: the receiver reads one */
        rc_conn_barrier(c, 0, 1); /* 2 */
        if (rb2b_send(pr, 4, len, scratch))
            goto fail;
        rb2_get_state(rb, &st); /* (a) */
        rb2b_ex_expect(&ex, "(a)", "tail", st.tail, 4);
        rb2b_ex_expect(&ex, "(a)", "synced_tail", st.synced_tail, 3);
        rb2b_ex_expect(&ex, "(a)", "esc_tail", st.esc_tail, 3);
        rb2b_ex_expect(&ex, "(a)", "local_head", st.local_head, 0);
        w0 = rb->writes_posted;
        if (rb2b_send(pr, 5, len, scratch))
            goto fail;
        rb2_get_state(rb, &st); /* (b) */
        rb2b_ex_expect(&ex, "(a)->(b)", "tail", st.tail, 5);
        rb2b_ex_expect(&ex, "(a)->(b)", "esc_tail", st.esc_tail, 5);
        rb2b_ex_expect(&ex, "(a)->(b)", "synced_tail", st.synced_tail, 3);
        rb2b_ex_expect(&ex, "(a)->(b)", "data WRITEs", rb->writes_posted - w0, 1);
        rb2b_ex_expect(&ex, "(a)->(b)", "slots in it", st.last_tx_units, 2);
        rc_conn_barrier(c, 0, 1); /* 3: the receiver sees (b), reads two */
        rc_conn_barrier(c, 0, 1); /* 4 */
        while (rb2_get_state(rb, &st), st.local_head != 2 && st.local_head < 8)
            host_relax();
        rb2b_ex_expect(&ex, "(b)->(c)", "local_head", st.local_head, 2);
        w0 = rb->writes_posted;
        uint64_t s0 = rb->tail_syncs;
        if (rb2b_send(pr, 6, len, scratch))
            goto fail;
        rb2_get_state(rb, &st);
        rb2b_ex_expect(&ex, "(c)", "tail after one write", st.tail, 6);
        rb2b_ex_expect(&ex, "(c)", "WRITEs after one write", rb->writes_posted - w0, 0);
        if (rb2b_send(pr, 7, len, scratch))
            goto fail;
        rb2_get_state(rb, &st); /* (d) */
        rb2b_ex_expect(&ex, "(c)->(d)", "tail", st.tail, 7);
        rb2b_ex_expect(&ex, "(c)->(d)", "synced_tail", st.synced_tail, 7);
        rb2b_ex_expect(&ex, "(c)->(d)", "esc_tail", st.esc_tail, 7);
        rb2b_ex_expect(&ex, "(c)->(d)", "data WRITEs", rb->writes_posted - w0, 1);
        rb2b_ex_expect(&ex, "(c)->(d)", "slots in it", st.last_tx_units, 2);
        rb2b_ex_expect(&ex, "(c)->(d)", "tail WRITEs", rb->tail_syncs - s0, 1);
        rc_conn_barrier(c, 0, 1); /* 5: the receiver sees (d) */
    } else {
        rc_conn_barrier(c, 0, 1); /* 1 */
        int r;
        while ((r = rb2b_recv(pr, len, NULL)) == 0)
            rb2_idle(rb);
        if (r < 0)
            goto fail;
        rc_conn_barrier(c, 0, 1); /* 2: the sender writes (a), (b) */
        rc_conn_barrier(c, 0, 1); /* 3 */
        rb2_get_state(rb, &st);   /* (b): slots 3-4 there, local_tail still 3 */
        rb2b_ex_expect(&ex, "(b)", "head", st.head, 1);
        rb2b_ex_expect(&ex, "(b)", "synced_head", st.synced_head, 0);
        rb2b_ex_expect(&ex, "(b)", "local_tail", st.local_tail, 3);
        uint64_t h0 = rb->head_syncs;
        for (int k = 0; k < 2; k++) {
            while ((r = rb2b_recv(pr, len, NULL)) == 0)
                rb2_idle(rb);
            if (r < 0)
                goto fail;
            rb2_get_state(rb, &st);
            rb2b_ex_expect(&ex, k ? "(c) 2nd read" : "(c) 1st read", "head", st.head,
                           (uint64_t)(2 + k));
            rb2b_ex_expect(&ex, k ? "(c) 2nd read" : "(c) 1st read", "synced_head", st.synced_head,
                           2);
            rb2b_ex_expect(&ex, k ? "(c) 2nd read" : "(c) 1st read", "head pushes",
                           rb->head_syncs - h0, 1);
        }
        rc_conn_barrier(c, 0, 1); /* 4: the sender writes (d) */
        rc_conn_barrier(c, 0, 1); /* 5 */
        while (rb2_get_state(rb, &st), st.local_tail != 7 && st.local_tail < 8)
            host_relax();
        rb2b_ex_expect(&ex, "(c)->(d)", "local_tail (3 + 4)", st.local_tail, 7);
        for (int k = 0; k < 4; k++) { /* messages 4..7, each checked */
            while ((r = rb2b_recv(pr, len, NULL)) == 0)
                rb2_idle(rb);
            if (r < 0)
                goto fail;
        }
        rb2b_ex_expect(&ex, "(d)", "messages read", pr->checked, 7);
    }
    free(scratch);
    struct host_kv kv[] = {{"steps_checked", (double)ex.checked}, {"mismatches", (double)ex.bad}};
    host_report("rb2_example", kv, 2);
    printf("%s: Fig. 4 example (%s): %d checks, %d mismatches\n", pr->prog,
           o->server ? "receiver" : "sender", ex.checked, ex.bad);
    return ex.bad ? 1 : 0;
fail:
    free(scratch);
    return pr->why[0] ? rb2b_violation(pr) : 2;
}

/* ------------------------------------------------------------ pairs */

static void rb2b_pair_run(void *arg)
{
    struct rb2b_pair *pr = arg;
    const struct rb2b_opts *o = pr->o;
    int cpu = rb2_numa_cpu(&o->cfg, pr->index);
    if (cpu >= 0 && host_pin_cpu(cpu)) {
        fprintf(stderr, "%s: host_pin_cpu(%d): %s\n", pr->prog, cpu, strerror(errno));
        pr->rc = 2;
        return;
    }
    bool one_way = o->mode == RB2B_BW || o->mode == RB2B_EXAMPLE;
    bool tx = !o->server || !one_way, rx = o->server || !one_way;
    if (rb2_open(&pr->rb, pr->prog, pr->name, o->server, &o->cfg, tx, rx)) {
        pr->rc = 2;
        rb2_close(&pr->rb);
        return;
    }
    if (rc_conn_barrier(&pr->rb.conn, 0, 1)) {
        pr->rc = 2;
        rb2_close(&pr->rb);
        return;
    }
    int rc = o->mode == RB2B_BW         ? rb2b_bw(pr)
             : o->mode == RB2B_PINGPONG ? rb2b_pingpong(pr)
             : o->mode == RB2B_EXAMPLE  ? rb2b_example(pr)
                                        : rb2b_rpc(pr);
    /* the end: both sides learn the worse status (after a violation the
     * program ends at once: rnicsim check-order stops the run there) */
    int peer = rc == 1 ? 0 : rc_conn_barrier(&pr->rb.conn, rc, 2);
    pr->rc = rc ? rc : peer;
    rb2_close(&pr->rb);
}

static int rb2b_cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static double rb2b_pct_us(const uint64_t *s, uint64_t n, double p)
{
    if (!n)
        return 0;
    uint64_t k = (uint64_t)((p / 100.0) * (double)n + 0.999999);
    return (double)s[(k ? k : 1) - 1] / 1e3;
}

int rb2_main(int argc, char **argv)
{
    const char *prog = argv[0];
    struct rb2b_opts o;
    int prc = rb2b_parse(argc, argv, &o);
    if (prc)
        return prc == 1 ? 0 : 2;
    struct rb2b_pair *pr = calloc(o.threads, sizeof(*pr));
    int *handle = calloc(o.threads, sizeof(int));
    if (!pr || !handle) {
        free(pr);
        free(handle);
        return 2;
    }
    for (uint64_t t = 0; t < o.threads; t++) {
        pr[t].o = &o;
        pr[t].prog = prog;
        pr[t].index = (int)t;
        snprintf(pr[t].name, sizeof(pr[t].name), "%s/t%" PRIu64, o.name, t);
    }
    for (uint64_t t = 1; t < o.threads; t++)
        if ((handle[t] = host_thread_start(rb2b_pair_run, &pr[t])) < 0) {
            fprintf(stderr, "%s: host_thread_start: %s\n", prog, strerror(errno));
            return 2;
        }
    rb2b_pair_run(&pr[0]);
    for (uint64_t t = 1; t < o.threads; t++)
        host_thread_join(handle[t]);
    int rc = 0;
    uint64_t slowest = 0, checked = 0, bytes = 0, nlat = 0;
    struct rb2 sum = {0};
    for (uint64_t t = 0; t < o.threads; t++) {
        if (pr[t].rc > rc)
            rc = pr[t].rc;
        slowest = pr[t].elapsed_ns > slowest ? pr[t].elapsed_ns : slowest;
        checked += pr[t].checked;
        bytes += pr[t].bytes;
        nlat += pr[t].nlat;
        sum.writes_posted += pr[t].rb.writes_posted;
        sum.tail_syncs += pr[t].rb.tail_syncs;
        sum.tail_syncs_deferred += pr[t].rb.tail_syncs_deferred;
        sum.head_syncs += pr[t].rb.head_syncs;
        sum.pulls += pr[t].rb.pulls;
        sum.full_waits += pr[t].rb.full_waits;
        sum.bytes_copied += pr[t].rb.bytes_copied;
    }
    uint64_t *lat = calloc(nlat ? nlat : 1, sizeof(uint64_t)), n = 0;
    double lat_sum = 0;
    for (uint64_t t = 0; t < o.threads && lat; t++)
        for (uint64_t i = 0; i < pr[t].nlat; i++) {
            lat[n++] = pr[t].lat[i];
            lat_sum += (double)pr[t].lat[i];
        }
    if (lat)
        qsort(lat, (size_t)n, sizeof(uint64_t), rb2b_cmp);
    if (!rc && lat) {
        struct host_kv stat[] = {
            {"threads", (double)o.threads},         {"writes", (double)sum.writes_posted},
            {"tail_syncs", (double)sum.tail_syncs}, {"deferred", (double)sum.tail_syncs_deferred},
            {"head_syncs", (double)sum.head_syncs}, {"pulls", (double)sum.pulls},
            {"full_waits", (double)sum.full_waits}, {"copied_bytes", (double)sum.bytes_copied}};
        host_report(o.server ? "rb2_rx" : "rb2_tx", stat, sizeof(stat) / sizeof(stat[0]));
        double us = (double)slowest / 1e3;
        if (o.mode == RB2B_BW && o.server) {
            struct host_kv kv[] = {{"size_bytes", (double)o.size},
                                   {"threads", (double)o.threads},
                                   {"messages", (double)checked},
                                   {"elapsed_us", us},
                                   {"gbps", (double)bytes * 8 / (us * 1e3)},
                                   {"mmsgs", (double)checked / us},
                                   {"lat_avg_us", n ? lat_sum / (double)n / 1e3 : 0},
                                   {"lat_p50_us", rb2b_pct_us(lat, n, 50)},
                                   {"lat_p999_us", rb2b_pct_us(lat, n, 99.9)}};
            host_report("rb2_bw", kv, sizeof(kv) / sizeof(kv[0]));
            printf("%s: %s %" PRIu64 " B x %" PRIu64 " (%" PRIu64
                   " pairs): %.2f Gb/s, %.3f Mmsg/s\n",
                   prog, o.variant, o.size, checked, o.threads, kv[4].value, kv[5].value);
        } else if (o.mode == RB2B_PINGPONG && !o.server) {
            struct host_kv kv[] = {{"size_bytes", (double)o.size},
                                   {"resp_bytes", (double)o.resp_size},
                                   {"threads", (double)o.threads},
                                   {"iters", (double)n},
                                   {"rtt_avg_us", n ? lat_sum / (double)n / 1e3 : 0},
                                   {"rtt_p50_us", rb2b_pct_us(lat, n, 50)},
                                   {"rtt_p99_us", rb2b_pct_us(lat, n, 99)},
                                   {"rtt_p999_us", rb2b_pct_us(lat, n, 99.9)},
                                   {"rtt_max_us", n ? (double)lat[n - 1] / 1e3 : 0},
                                   {"qps", n ? (double)n * 1e9 / lat_sum * (double)o.threads : 0}};
            host_report("rb2_pingpong", kv, sizeof(kv) / sizeof(kv[0]));
            printf("%s: %s ping-pong %" PRIu64 "/%" PRIu64 " B: avg %.3f us, p99.9 %.3f us\n", prog,
                   o.variant, o.size, o.resp_size, kv[4].value, kv[7].value);
        } else if (o.mode == RB2B_RPC && !o.server) {
            struct host_kv kv[] = {{"size_bytes", (double)o.size},
                                   {"resp_bytes", (double)o.resp_size},
                                   {"threads", (double)o.threads},
                                   {"window", (double)o.window},
                                   {"requests", (double)checked},
                                   {"elapsed_us", us},
                                   {"mreq_s", (double)checked / us},
                                   {"rtt_p50_us", rb2b_pct_us(lat, n, 50)},
                                   {"rtt_p999_us", rb2b_pct_us(lat, n, 99.9)}};
            host_report("rb2_rpc", kv, sizeof(kv) / sizeof(kv[0]));
            printf("%s: %s rpc %" PRIu64 " requests: %.3f Mreq/s\n", prog, o.variant, checked,
                   kv[6].value);
        }
        if (o.server) {
            struct host_kv kv[] = {{"messages_checked", (double)checked},
                                   {"bytes_checked", (double)bytes},
                                   {"violations", 0}};
            host_report("order_check", kv, 3);
        }
    }
    free(lat);
    for (uint64_t t = 0; t < o.threads; t++) {
        free(pr[t].lat);
        free(pr[t].rxbuf);
    }
    free(pr);
    free(handle);
    return rc;
}
