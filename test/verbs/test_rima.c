/* RIMA append queues at the verbs level (include/rnicsim/rima.h,
 * sim/nic/aq.c, docs/rima.md):
 *
 *  - API: bad create / modify arguments -> EINVAL, the documented defaults
 *    (64 MiB region, 16 MiB chunks, watermark = 100 Gb/s x 1 ms), the AQ
 *    holds its CQ (EBUSY), TPT full (rima.tpt_entries 2) -> ENOMEM and a
 *    freed slot comes back under a new number, no RIMA -> EOPNOTSUPP;
 *  - basic: a 100 B and a 5000 B append: IBV_WC_RECV_APPEND with wr_id =
 *    offset, byte_len, qp_num, src_qp and the bytes; IBV_WC_APPEND;
 *  - errors: longer than the region -> IBV_WC_REM_INV_REQ_ERR, unknown AQ
 *    or an AQ of another PD -> IBV_WC_REM_ACCESS_ERR; UC/UD post -> EINVAL;
 *  - footprint: committed / allocated / freed / peaks of a small case
 *    against hand-computed values;
 *  - 4 senders x 60 appends of 1 B .. 12 KiB interleave; their offsets tile
 *    the region exactly (each message once, in tail order, in posting
 *    order per sender), every byte checked;
 *    the same with 5 % packet loss (retransmissions, duplicate first
 *    packets never append twice);
 *  - wrap-around and reset on empty; padding on a non-empty queue;
 *  - the ring never fills completely (a 0 B append, then 4096 + 4096 B into
 *    8 KiB: the second waits, nothing is overwritten); an empty queue
 *    restarts at 0 without padding (also when the chunks there must be
 *    committed again first: no livelock);
 *  - holes: the receiving QP fails mid-message -> an IBV_WC_WR_FLUSH_ERR
 *    receiver CQE with the offset and reserved length;
 *  - a stale head write from before a reset on empty is ignored;
 *  - one TPT slot cycled 600 times never repeats a queue number;
 *  - exhaustion: the head never moves, RNR NAKs, IBV_WC_RNR_RETRY_EXC_ERR
 *    after rnr_retry 2, earlier messages untouched;
 *  - background allocation: a line-rate burst with a reserve that covers
 *    line rate x alloc latency loses nothing (no RNR), committed memory
 *    grows one chunk per watermark IRQ; with 1 ms allocation the same
 *    burst meets RNR NAKs but still delivers everything;
 *  - TPT latency: an append's one-way latency is exactly rima.tpt_latency
 *    above the same append with a 0 ns TPT, and 2 ns + the 16 B header
 *    (2 x 1.28 ns at 100 Gb/s) above a SEND's;
 *  - message rate of 64 B appends from 1, 2, 4 sender QPs (printed). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rnicsim/rima.h>

#include "fixture.h"
#include "sim/nic/nic_priv.h" /* nic_aq_lookup, nic_aq_reserve: exact interleaving */
#include "test.h"

/* ---------------------------------------------------------------- helpers */

static int post_append(struct fx_rc *rc, uint32_t aqn, uint64_t wr_id, size_t off, uint32_t len,
                       unsigned flags)
{
    struct ibv_sge sge = {.addr = (uintptr_t)(rc->buf + off), .length = len, .lkey = rc->mr->lkey};
    struct ibv_send_wr wr = {
        .wr_id = wr_id, .sg_list = &sge, .num_sge = 1, .send_flags = flags | IBV_SEND_SIGNALED};
    ibv_wr_append(&wr, aqn);
    struct ibv_send_wr *bad = NULL;
    return ibv_post_send(rc->qp, &wr, &bad);
}

/* Payload byte i of message m of sender s: recognisable everywhere. */
static uint8_t pat(unsigned s, unsigned m, uint32_t i)
{
    return (uint8_t)(s * 71u + m * 13u + i * 7u + (i >> 8));
}

static void fill(uint8_t *p, unsigned s, unsigned m, uint32_t len)
{
    for (uint32_t i = 0; i < len; i++)
        p[i] = pat(s, m, i);
}

static bool intact(const uint8_t *p, unsigned s, unsigned m, uint32_t len)
{
    for (uint32_t i = 0; i < len; i++)
        if (p[i] != pat(s, m, i))
            return false;
    return true;
}

/* ---------------------------------------------------------------- basic */

struct basic_st {
    struct fx *fx;
    struct fx_rc srv, cl;
    bool recv_ok[2], send_ok[2];
};

static void basic_client(void *arg)
{
    struct basic_st *s = arg;
    CHECK(fx_rc_open(s->fx, &s->cl, NULL) == 0);
    CHECK(fx_rc_connect(&s->cl, "b/c", "b/s") == 0);
    uint32_t aqn = 0;
    fx_get(s->fx, "b/aqn", &aqn, sizeof(aqn));
    const uint32_t len[2] = {100, 5000};
    for (unsigned m = 0; m < 2; m++) {
        fill(s->cl.buf + 8192u * m, 0, m, len[m]);
        CHECK(post_append(&s->cl, aqn, 10 + m, 8192u * m, len[m], 0) == 0);
    }
    for (unsigned m = 0; m < 2; m++) {
        struct ibv_wc wc;
        CHECK(fx_poll_one(s->cl.scq, &wc) == 1);
        s->send_ok[m] =
            wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_APPEND && wc.wr_id == 10 + m;
    }
    fx_barrier(s->fx, "b/end", "client", "server");
    fx_rc_close(&s->cl);
}

static void basic_server(void *arg)
{
    struct basic_st *s = arg;
    CHECK(fx_rc_open(s->fx, &s->srv, NULL) == 0);
    struct ibv_aq_init_attr ia = {.cq = s->srv.rcq,
                                  .attr = {.region_bytes = 1 << 20, .chunk_bytes = 1 << 18}};
    struct ibv_aq *aq = ibv_create_aq(s->srv.pd, &ia);
    CHECK(aq != NULL);
    if (!aq)
        return;
    fx_put(s->fx, "b/aqn", &aq->aq_num, sizeof(aq->aq_num));
    CHECK(fx_rc_connect(&s->srv, "b/s", "b/c") == 0);
    const uint32_t len[2] = {100, 5000};
    uint64_t expect_off = 0;
    for (unsigned m = 0; m < 2; m++) {
        struct ibv_wc wc;
        CHECK(fx_poll_one(s->srv.rcq, &wc) == 1);
        s->recv_ok[m] = wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RECV_APPEND &&
                        wc.wr_id == expect_off && wc.byte_len == len[m] &&
                        wc.qp_num == s->srv.qp->qp_num && wc.src_qp == s->cl.qp->qp_num &&
                        intact(aq->buf + wc.wr_id, 0, m, len[m]);
        expect_off += len[m];
    }
    struct ibv_aq_attr qa;
    CHECK(ibv_query_aq(aq, &qa) == 0);
    CHECK_EQ_U64(qa.tail, 5100);
    CHECK_EQ_U64(qa.used_bytes, 5100);
    CHECK_EQ_U64(qa.messages, 2);
    CHECK_EQ_U64(qa.bytes, 5100);
    fx_barrier(s->fx, "b/end", "server", "client");
    CHECK(ibv_destroy_aq(aq) == 0);
    fx_rc_close(&s->srv);
}

static void test_basic(void)
{
    struct basic_st s = {.fx = fx_create(1, NULL)};
    CHECK(fx_run_pair(s.fx, "server", basic_server, "client", basic_client, &s) == SIM_RUN_DONE);
    for (unsigned m = 0; m < 2; m++) {
        CHECK(s.recv_ok[m]);
        CHECK(s.send_ok[m]);
    }
    fx_destroy(s.fx);
}

/* ---------------------------------------------------------------- a general run */

enum {
    R_MAX_SENDERS = 6,
    R_MAX_MSGS = 8192,
    R_SLOT_BYTES = 16384,
    R_SLOTS = 128
}; /* 128 x 16 KiB = the fixture's 2 MiB buffer */

struct r_cqe {
    uint64_t off;
    uint32_t len;
    uint16_t s, m;
    bool ok;
};

/* n_senders RC QPs (hosts 1..3) to one AQ on host 0.  Sender s posts
 * n_msgs appends of len_fn(s, m) bytes, at most `window` outstanding;
 * pingpong: message m > 0 waits for the server's "go" (after it consumed
 * m-1); consume: the server advances the head past each message. */
struct run {
    struct fx *fx;
    unsigned n_senders, n_msgs, window, n_expect;
    uint32_t (*len_fn)(unsigned s, unsigned m);
    struct ibv_aq_attr aqa;
    bool pingpong, consume;
    uint8_t rnr_retry, min_rnr_timer;
    double loss;                 /* random packet loss at every NIC's ingress */
    sim_time_t settle_ps;        /* server waits this long after the last CQE before the query */
    sim_time_t pp_sleep_ps;      /* pingpong: server waits this long before "go" (default 3 us) */
    sim_time_t consume_delay_ps; /* consume: wait this long after a CQE, then check and consume */
    sim_time_t deadline_ps;      /* server stops waiting for CQEs once past it (checked when a poll
                                    returns; a CQE that never comes ends the run in deadlock) */
    /* results */
    struct fx_rc srv, sq[R_MAX_SENDERS], cl[R_MAX_SENDERS];
    unsigned ids[R_MAX_SENDERS];
    struct r_cqe cqe[R_MAX_MSGS];
    unsigned n_cqe;
    bool cqe_fields_ok, all_intact_at_end, modify_ok;
    enum ibv_wc_status first_err[R_MAX_SENDERS];
    unsigned n_ok[R_MAX_SENDERS];
    struct ibv_aq_attr end;
    sim_time_t t_first_post, t_last_cqe;
};

static void r_sender(void *arg)
{
    unsigned *idp = arg;
    unsigned id = *idp;
    struct run *r = (struct run *)((char *)(idp - id) - offsetof(struct run, ids));
    struct fx_rc_opts o;
    fx_rc_default_opts(&o);
    o.rnr_retry = r->rnr_retry;
    o.max_send_wr = 128;
    o.cq_depth = 512;
    struct fx_rc *rc = &r->cl[id];
    char me[16], peer[16], key[32];
    snprintf(me, sizeof(me), "r/c%u", id);
    snprintf(peer, sizeof(peer), "r/s%u", id);
    CHECK(fx_rc_open(r->fx, rc, &o) == 0);
    CHECK(fx_rc_connect(rc, me, peer) == 0);
    uint32_t aqn = 0;
    fx_get(r->fx, "r/aqn", &aqn, sizeof(aqn));
    unsigned posted = 0, done = 0;
    r->first_err[id] = IBV_WC_SUCCESS;
    while (done < r->n_msgs) {
        while (posted < r->n_msgs && posted - done < r->window) {
            if (r->pingpong && posted) {
                snprintf(key, sizeof(key), "r/go/%u/%u", id, posted);
                fx_get(r->fx, key, NULL, 0);
            }
            uint32_t len = r->len_fn(id, posted);
            size_t off = (size_t)(posted % R_SLOTS) * R_SLOT_BYTES;
            fill(rc->buf + off, id, posted, len);
            if (!r->t_first_post || sim_now(r->fx->sim) < r->t_first_post)
                r->t_first_post = sim_now(r->fx->sim);
            CHECK(post_append(rc, aqn, posted, off, len, 0) == 0);
            posted++;
        }
        struct ibv_wc wc;
        CHECK(fx_poll_one(rc->scq, &wc) == 1);
        done++;
        if (wc.status != IBV_WC_SUCCESS) {
            r->first_err[id] = wc.status;
            break;
        }
        CHECK(wc.opcode == IBV_WC_APPEND && wc.wr_id == r->n_ok[id]);
        r->n_ok[id]++;
    }
    snprintf(key, sizeof(key), "r/end%u", id);
    fx_barrier(r->fx, key, me, "server");
    fx_rc_close(rc);
}

static void r_server(void *arg)
{
    struct run *r = arg;
    struct fx_rc_opts o;
    fx_rc_default_opts(&o);
    o.min_rnr_timer = r->min_rnr_timer;
    CHECK(fx_rc_open(r->fx, &r->srv, &o) == 0);
    struct ibv_cq *cq = ibv_create_cq(r->srv.ctx, 8192, NULL, NULL, 0);
    CHECK(cq != NULL);
    struct ibv_aq_init_attr ia = {.cq = cq, .attr = r->aqa};
    struct ibv_aq *aq = ibv_create_aq(r->srv.pd, &ia);
    CHECK(aq != NULL);
    if (!aq || !cq)
        return;
    fx_put(r->fx, "r/aqn", &aq->aq_num, sizeof(aq->aq_num));
    char me[16], peer[16], key[32];
    for (unsigned s = 0; s < r->n_senders; s++) {
        CHECK(fx_rc_open_shared(&r->sq[s], &r->srv, NULL) == 0);
        snprintf(me, sizeof(me), "r/s%u", s);
        snprintf(peer, sizeof(peer), "r/c%u", s);
        CHECK(fx_rc_connect(&r->sq[s], me, peer) == 0);
    }
    unsigned got[R_MAX_SENDERS] = {0};
    r->cqe_fields_ok = true;
    r->modify_ok = true;
    while (r->n_cqe < r->n_expect) {
        struct ibv_wc wc;
        int n;
        while ((n = ibv_poll_cq(cq, 1, &wc)) == 0 &&
               (!r->deadline_ps || sim_now(r->fx->sim) < r->deadline_ps))
            ;
        if (n == 0)
            break; /* deadline: r->n_cqe tells how far it got */
        CHECK(n == 1);
        r->t_last_cqe = sim_now(r->fx->sim);
        unsigned s = 0;
        while (s < r->n_senders && r->sq[s].qp->qp_num != wc.qp_num)
            s++;
        if (s == r->n_senders || wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_RECV_APPEND ||
            wc.src_qp != r->cl[s].qp->qp_num) {
            r->cqe_fields_ok = false;
            printf("bad CQE: status %d opcode %d src_qp 0x%x qp_num 0x%x (sender %u)\n",
                   (int)wc.status, (int)wc.opcode, wc.src_qp, wc.qp_num, s);
            break;
        }
        unsigned m = got[s]++;
        if (r->consume_delay_ps)
            sim_proc_sleep(r->consume_delay_ps);
        struct r_cqe *c = &r->cqe[r->n_cqe++];
        *c =
            (struct r_cqe){.off = wc.wr_id, .len = wc.byte_len, .s = (uint16_t)s, .m = (uint16_t)m};
        c->ok = wc.byte_len == r->len_fn(s, m) && wc.wr_id + wc.byte_len <= aq->region_bytes &&
                intact(aq->buf + wc.wr_id, s, m, wc.byte_len);
        if (r->consume) {
            struct ibv_aq_attr ma = {.head = wc.wr_id + wc.byte_len};
            if (ibv_modify_aq(aq, &ma, IBV_AQ_HEAD) != 0)
                r->modify_ok = false;
        }
        if (r->pingpong) {
            /* the head write reaches the NIC first */
            sim_proc_sleep(r->pp_sleep_ps ? r->pp_sleep_ps : 3 * SIM_US);
            snprintf(key, sizeof(key), "r/go/%u/%u", s, m + 1);
            fx_put(r->fx, key, NULL, 0);
        }
    }
    sim_proc_sleep(r->settle_ps ? r->settle_ps : 5 * SIM_US);
    CHECK(ibv_query_aq(aq, &r->end) == 0);
    r->all_intact_at_end = true;
    if (!r->consume)
        for (unsigned i = 0; i < r->n_cqe; i++)
            if (!intact(aq->buf + r->cqe[i].off, r->cqe[i].s, r->cqe[i].m, r->cqe[i].len))
                r->all_intact_at_end = false;
    for (unsigned s = 0; s < r->n_senders; s++) {
        snprintf(key, sizeof(key), "r/end%u", s);
        snprintf(peer, sizeof(peer), "r/c%u", s);
        fx_barrier(r->fx, key, "server", peer);
    }
    for (unsigned s = 0; s < r->n_senders; s++)
        fx_rc_close(&r->sq[s]);
    CHECK(ibv_destroy_aq(aq) == 0);
    CHECK(ibv_destroy_cq(cq) == 0);
    fx_rc_close(&r->srv);
}

static void run_go(struct run *r, uint64_t seed, const struct nic_params *np)
{
    if (!r->window)
        r->window = 1;
    if (!r->min_rnr_timer)
        r->min_rnr_timer = 1; /* 10 us (IBA Table 45) */
    if (!r->n_expect)
        r->n_expect = r->n_senders * r->n_msgs;
    r->fx = fx_create_n(seed, 4, np);
    if (r->loss > 0)
        fx_set_loss_all(r->fx, r->loss);
    fx_spawn(r->fx, 0, "server", r_server, r);
    for (unsigned s = 0; s < r->n_senders; s++) {
        char name[16];
        snprintf(name, sizeof(name), "c%u", s);
        r->ids[s] = s;
        fx_spawn(r->fx, 1 + s % 3, name, r_sender, &r->ids[s]);
    }
    CHECK(fx_run(r->fx) == SIM_RUN_DONE);
}

static int cmp_off(const void *a, const void *b)
{
    const struct r_cqe *x = a, *y = b;
    return x->off < y->off ? -1 : x->off > y->off;
}

/* ---------------------------------------------------------------- many senders */

static uint32_t mixed_len(unsigned s, unsigned m)
{
    static const uint32_t sizes[] = {1, 64, 4096, 3 * 4096 + 17, 200, 4097, 9000, 2};
    return sizes[(s * 3 + m) % 8] + (m % 5);
}

static void test_many_senders(double loss)
{
    static struct run r;
    memset(&r, 0, sizeof(r));
    r.loss = loss;
    r.n_senders = 4;
    r.n_msgs = 60;
    r.window = 16;
    r.len_fn = mixed_len;
    r.aqa = (struct ibv_aq_attr){.region_bytes = 4 << 20,
                                 .chunk_bytes = 1 << 20,
                                 .watermark_bytes = 1 << 20,
                                 .initial_chunks = 4};
    run_go(&r, 11, NULL);
    CHECK(r.cqe_fields_ok);
    CHECK_EQ_U64(r.n_cqe, 240);
    uint64_t total = 0;
    unsigned bad = 0, switches = 0, out_of_tail_order = 0;
    for (unsigned i = 0; i < r.n_cqe; i++) {
        total += r.cqe[i].len;
        bad += !r.cqe[i].ok;
        if (i && r.cqe[i].off < r.cqe[i - 1].off)
            out_of_tail_order++; /* a long message completing after a later short one */
    }
    CHECK_EQ_U64(bad, 0);
    CHECK(r.all_intact_at_end);
    /* the offsets tile [0, total) exactly: each message once, in tail order,
     * and per sender in posting order */
    static struct r_cqe sorted[R_MAX_MSGS];
    memcpy(sorted, r.cqe, r.n_cqe * sizeof(sorted[0]));
    qsort(sorted, r.n_cqe, sizeof(sorted[0]), cmp_off);
    uint64_t end = 0;
    int last_m[R_MAX_SENDERS] = {-1, -1, -1, -1, -1, -1};
    bool tiled = true, per_sender = true;
    for (unsigned i = 0; i < r.n_cqe; i++) {
        tiled &= sorted[i].off == end;
        end = sorted[i].off + sorted[i].len;
        per_sender &= (int)sorted[i].m == last_m[sorted[i].s] + 1;
        last_m[sorted[i].s] = sorted[i].m;
        switches += i && sorted[i].s != sorted[i - 1].s;
    }
    CHECK(tiled);
    CHECK(per_sender);
    CHECK_EQ_U64(end, total);
    CHECK(switches > (loss > 0 ? 20u : 100u)); /* really interleaved */
    /* completions come in order of last packets, not in tail order
     * (<rnicsim/rima.h>, docs/rima.md "Completions") */
    CHECK(out_of_tail_order > 0);
    uint64_t dropped = 0;
    for (unsigned n = 0; n < 4; n++)
        dropped += r.fx->dropped[n];
    if (loss > 0)
        CHECK(dropped > 10); /* packets (appends and ACKs) were lost and resent */
    CHECK_EQ_U64(r.end.tail, total);
    CHECK_EQ_U64(r.end.used_bytes, total);
    CHECK_EQ_U64(r.end.messages, 240);
    CHECK_EQ_U64(r.end.bytes, total);
    CHECK_EQ_U64(r.end.rnr_naks, 0);
    for (unsigned s = 0; s < 4; s++) {
        CHECK_EQ_U64(r.n_ok[s], 60);
        CHECK_EQ_U64(r.first_err[s], IBV_WC_SUCCESS);
    }
    printf("4 senders x 60 appends (1 B .. 12 KiB) to one AQ, %.0f%% loss (%" PRIu64
           " packets dropped): %" PRIu64
           " bytes tiled exactly, %u sender switches in tail order, %u CQEs after a later "
           "offset's\n",
           loss * 100, dropped, total, switches, out_of_tail_order);
    fx_destroy(r.fx);
}

/* ---------------------------------------------------------------- wrap-around, reset on empty */

static uint32_t len_10000(unsigned s, unsigned m)
{
    (void)s;
    (void)m;
    return 10000;
}

/* 64 KiB ring, consumer keeps up (head moved after each message): without
 * reset the 7th message (tail 60000, 60000 + 10000 > 65536) finds the
 * queue empty and restarts at offset 0 with no padding (the padding case,
 * a non-empty queue, is test_padding's); with
 * reset every message lands at 0. */
static void test_wrap(bool reset)
{
    static struct run r;
    memset(&r, 0, sizeof(r));
    r.n_senders = 1;
    r.n_msgs = 10;
    r.len_fn = len_10000;
    r.pingpong = true;
    r.consume = true;
    r.aqa = (struct ibv_aq_attr){.region_bytes = 64 << 10,
                                 .chunk_bytes = 16 << 10,
                                 .watermark_bytes = 16 << 10,
                                 .initial_chunks = 4,
                                 .flags = reset ? IBV_AQ_F_RESET_ON_EMPTY : 0};
    struct nic_params np;
    nic_params_default(&np);
    np.rima_alloc_ps = 2 * SIM_US; /* the reserve of 16 KiB covers 2 us at this rate */
    run_go(&r, 21, &np);
    CHECK(r.cqe_fields_ok && r.modify_ok);
    CHECK_EQ_U64(r.n_cqe, 10);
    bool offs_ok = true, data_ok = true;
    for (unsigned m = 0; m < r.n_cqe; m++) {
        /* hand computed: 0, 10000, .., 50000, then wrap: 0, 10000, 20000, 30000 */
        uint64_t want = reset ? 0 : (m < 6 ? 10000u * m : 10000u * (m - 6));
        offs_ok &= r.cqe[m].off == want;
        data_ok &= r.cqe[m].ok;
    }
    CHECK(offs_ok);
    CHECK(data_ok);
    CHECK_EQ_U64(r.end.used_bytes, 0);
    uint64_t want_end = reset ? 0 : 40000;
    CHECK_EQ_U64(r.end.head, want_end);
    CHECK_EQ_U64(r.end.tail, want_end);
    /* peak: one message (an empty queue restarts at 0 without padding) */
    uint64_t want_peak = 10000;
    CHECK_EQ_U64(r.end.peak_used_bytes, want_peak);
    CHECK_EQ_U64(r.end.rnr_naks, 0);
    fx_destroy(r.fx);
}

/* ---------------------------------------------------------------- exhaustion */

/* The head never moves: six 10000 B messages fit in 64 KiB, the 7th would
 * overtake the head (padding 5536 + 10000 > 5536 free): RNR NAKs, then
 * IBV_WC_RNR_RETRY_EXC_ERR after rnr_retry 2 retries; nothing of the
 * earlier messages is overwritten. */
static void test_exhaustion(void)
{
    static struct run r;
    memset(&r, 0, sizeof(r));
    r.n_senders = 1;
    r.n_msgs = 8;
    r.window = 8;
    r.n_expect = 6;
    r.rnr_retry = 2;
    r.settle_ps = 200 * SIM_US; /* the retries come 10 us apart */
    r.len_fn = len_10000;
    r.aqa = (struct ibv_aq_attr){.region_bytes = 64 << 10,
                                 .chunk_bytes = 16 << 10,
                                 .watermark_bytes = 16 << 10,
                                 .initial_chunks = 4};
    run_go(&r, 31, NULL);
    CHECK(r.cqe_fields_ok);
    CHECK_EQ_U64(r.n_cqe, 6);
    CHECK_EQ_U64(r.n_ok[0], 6);
    CHECK_EQ_U64(r.first_err[0], IBV_WC_RNR_RETRY_EXC_ERR);
    CHECK_EQ_U64(r.end.rnr_naks, 3); /* the first try + 2 retries */
    CHECK_EQ_U64(r.end.messages, 6);
    CHECK_EQ_U64(r.end.used_bytes, 60000);
    CHECK(r.all_intact_at_end);
    CHECK_EQ_U64(nic_get_counters(r.fx->nic[0])->rima_rnr_naks, 3);
    fx_destroy(r.fx);
}

/* ---------------------------------------------------------------- ring edge cases */

static uint32_t len_full(unsigned s, unsigned m)
{
    (void)s;
    static const uint32_t len[4] = {0, 4096, 4096, 4096};
    return len[m];
}

/* Never completely full: an 8 KiB ring of one chunk, a 0 B append (at 0,
 * the tail stays), then A and B of 4096 B each, then C of 4096 B.  B would
 * fill the ring exactly (head == tail with everything used), which a head
 * write of 0 (consuming the 0 B message) would read as "all consumed", and
 * C would overwrite A.  A message needs used + padding + len <= region - 1:
 * B waits (RNR) until A is consumed, lands at 4096, C at 0 after B; every
 * message is intact when it is consumed, 20 us after its CQE. */
static void test_never_full(void)
{
    static struct run r;
    memset(&r, 0, sizeof(r));
    r.n_senders = 1;
    r.n_msgs = 4;
    r.window = 4;
    r.len_fn = len_full;
    r.consume = true;
    r.consume_delay_ps = 20 * SIM_US;
    r.rnr_retry = 6;
    r.deadline_ps = 5 * SIM_MS;
    r.aqa = (struct ibv_aq_attr){.region_bytes = 8192, .chunk_bytes = 8192, .initial_chunks = 1};
    run_go(&r, 41, NULL);
    CHECK(r.cqe_fields_ok && r.modify_ok);
    CHECK_EQ_U64(r.n_cqe, 4);
    static const uint64_t want_off[4] = {0, 0, 4096, 0};
    for (unsigned m = 0; m < r.n_cqe; m++) {
        CHECK(r.cqe[m].ok);
        CHECK_EQ_U64(r.cqe[m].off, want_off[m]);
    }
    CHECK_EQ_U64(r.n_ok[0], 4);
    CHECK(r.end.rnr_naks > 0); /* B waited for room */
    CHECK_EQ_U64(r.end.used_bytes, 0);
    CHECK_EQ_U64(r.end.head, 4096);
    CHECK_EQ_U64(r.end.tail, 4096);
    fx_destroy(r.fx);
}

static uint32_t len_pad(unsigned s, unsigned m)
{
    (void)s;
    static const uint32_t len[3] = {6000, 6000, 5000};
    return len[m];
}

/* Padding on a non-empty queue: 16 KiB ring, 6000 B at 0 and at 6000; the
 * 5000 B message does not fit before the end (12000 + 5000 > 16384) and
 * waits (RNR) until the first one is consumed, then goes to offset 0 with
 * the 4384 B from the tail to the end as padding (used 6000 + 4384 + 5000
 * = 15384 <= 16383). */
static void test_padding(void)
{
    static struct run r;
    memset(&r, 0, sizeof(r));
    r.n_senders = 1;
    r.n_msgs = 3;
    r.window = 3;
    r.len_fn = len_pad;
    r.consume = true;
    r.consume_delay_ps = 20 * SIM_US;
    r.rnr_retry = 6;
    r.deadline_ps = 5 * SIM_MS;
    r.aqa = (struct ibv_aq_attr){.region_bytes = 16384, .chunk_bytes = 16384, .initial_chunks = 1};
    run_go(&r, 45, NULL);
    CHECK(r.cqe_fields_ok && r.modify_ok);
    CHECK_EQ_U64(r.n_cqe, 3);
    static const uint64_t want_off[3] = {0, 6000, 0};
    for (unsigned m = 0; m < r.n_cqe; m++) {
        CHECK(r.cqe[m].ok);
        CHECK_EQ_U64(r.cqe[m].off, want_off[m]);
    }
    CHECK(r.end.rnr_naks > 0);
    CHECK_EQ_U64(r.end.peak_used_bytes, 15384);
    CHECK_EQ_U64(r.end.used_bytes, 0);
    CHECK_EQ_U64(r.end.tail, 5000);
    fx_destroy(r.fx);
}

static uint32_t len_5000_6000(unsigned s, unsigned m)
{
    (void)s;
    return m % 2 ? 6000 : 5000;
}

/* An empty queue takes any message that fits the region: 5000 B, consumed,
 * then 6000 B (which does not fit between the tail 5000 and the end of
 * the 8 KiB region) restarts at offset 0 with no padding, and so on. */
static void test_empty_restart(void)
{
    static struct run r;
    memset(&r, 0, sizeof(r));
    r.n_senders = 1;
    r.n_msgs = 4;
    r.len_fn = len_5000_6000;
    r.pingpong = true;
    r.consume = true;
    r.rnr_retry = 3;
    r.deadline_ps = 5 * SIM_MS;
    r.aqa = (struct ibv_aq_attr){.region_bytes = 8192, .chunk_bytes = 8192, .initial_chunks = 1};
    run_go(&r, 43, NULL);
    CHECK(r.cqe_fields_ok && r.modify_ok);
    CHECK_EQ_U64(r.n_cqe, 4);
    CHECK_EQ_U64(r.n_ok[0], 4);
    for (unsigned m = 0; m < r.n_cqe; m++) {
        CHECK(r.cqe[m].ok);
        CHECK_EQ_U64(r.cqe[m].off, 0);
    }
    CHECK_EQ_U64(r.end.rnr_naks, 0);
    CHECK_EQ_U64(r.end.used_bytes, 0);
    CHECK_EQ_U64(r.end.peak_used_bytes, 6000); /* never any padding */
    fx_destroy(r.fx);
}

static uint32_t len_restart_alloc(unsigned s, unsigned m)
{
    (void)s;
    static const uint32_t len[3] = {6000, 6000, 12500};
    return len[m];
}

/* The restart at offset 0 needs chunks that are not committed any more (a
 * 16 KiB ring of 4 KiB chunks, 4 KiB watermark: after two 6000 B messages
 * are consumed the reserve sits around the tail 12000, chunks 0 and 1 are
 * freed).  The 12500 B message restarts at 0 and its refusal commits
 * exactly chunks 0 .. 2 one after the other (none freed again meanwhile:
 * no livelock); it is delivered at offset 0. */
static void test_empty_restart_alloc(void)
{
    static struct run r;
    memset(&r, 0, sizeof(r));
    r.n_senders = 1;
    r.n_msgs = 3;
    r.len_fn = len_restart_alloc;
    r.pingpong = true;
    r.consume = true;
    r.rnr_retry = 7; /* infinite: a livelock would hit the deadline */
    r.deadline_ps = 5 * SIM_MS;
    r.aqa = (struct ibv_aq_attr){
        .region_bytes = 16384, .chunk_bytes = 4096, .watermark_bytes = 4096, .initial_chunks = 4};
    struct nic_params np;
    nic_params_default(&np);
    np.rima_alloc_ps = 20 * SIM_US;
    run_go(&r, 47, &np);
    CHECK(r.cqe_fields_ok && r.modify_ok);
    CHECK_EQ_U64(r.n_cqe, 3);
    static const uint64_t want_off[3] = {0, 6000, 0};
    for (unsigned m = 0; m < r.n_cqe; m++) {
        CHECK(r.cqe[m].ok);
        CHECK_EQ_U64(r.cqe[m].off, want_off[m]);
    }
    CHECK_EQ_U64(r.end.used_bytes, 0);
    CHECK_EQ_U64(r.end.tail, 12500);
    fx_destroy(r.fx);
}

/* ---------------------------------------------------------------- holes */

struct hole_st {
    struct fx *fx;
    struct fx_rc srv, srv2, cl, cl2;
    bool flush_ok, next_ok, got_flush;
};

enum { HOLE_BIG = 1 << 20, HOLE_SMALL = 100 };

static void hole_client(void *arg)
{
    struct hole_st *s = arg;
    CHECK(fx_rc_open(s->fx, &s->cl, NULL) == 0);
    CHECK(fx_rc_open(s->fx, &s->cl2, NULL) == 0);
    CHECK(fx_rc_connect(&s->cl, "h/c1", "h/s1") == 0);
    CHECK(fx_rc_connect(&s->cl2, "h/c2", "h/s2") == 0);
    uint32_t aqn = 0;
    fx_get(s->fx, "h/aqn", &aqn, sizeof(aqn));
    fill(s->cl.buf, 0, 0, HOLE_BIG);
    CHECK(post_append(&s->cl, aqn, 1, 0, HOLE_BIG, 0) == 0);
    fx_get(s->fx, "h/go", NULL, 0);
    fill(s->cl2.buf, 1, 1, HOLE_SMALL);
    CHECK(post_append(&s->cl2, aqn, 2, 0, HOLE_SMALL, 0) == 0);
    struct ibv_wc wc;
    CHECK(fx_poll_one(s->cl2.scq, &wc) == 1);
    CHECK(wc.status == IBV_WC_SUCCESS && wc.wr_id == 2);
    /* the 1 MiB append is left to its retries (it never completes well:
     * its responder QP is in error) */
    fx_barrier(s->fx, "h/end", "client", "server");
    fx_rc_close(&s->cl2);
    fx_rc_close(&s->cl);
}

/* A 1 MiB append whose responder QP goes to error after the first packet
 * moved the tail: the AQ's CQ gets IBV_WC_WR_FLUSH_ERR with wr_id = the
 * offset (0) and byte_len = the reserved length, so the consumer can skip
 * the hole; the next message (another QP) lands behind it at 1 MiB. */
static void hole_server(void *arg)
{
    struct hole_st *s = arg;
    CHECK(fx_rc_open(s->fx, &s->srv, NULL) == 0);
    CHECK(fx_rc_open_shared(&s->srv2, &s->srv, NULL) == 0);
    struct ibv_cq *cq = ibv_create_cq(s->srv.ctx, 64, NULL, NULL, 0);
    struct ibv_aq_init_attr ia = {.cq = cq,
                                  .attr = {.region_bytes = 4 << 20, .chunk_bytes = 4 << 20}};
    struct ibv_aq *aq = cq ? ibv_create_aq(s->srv.pd, &ia) : NULL;
    CHECK(aq != NULL);
    if (!aq)
        return;
    fx_put(s->fx, "h/aqn", &aq->aq_num, sizeof(aq->aq_num));
    CHECK(fx_rc_connect(&s->srv, "h/s1", "h/c1") == 0);
    CHECK(fx_rc_connect(&s->srv2, "h/s2", "h/c2") == 0);
    struct ibv_aq_attr qa = {0};
    while (ibv_query_aq(aq, &qa) == 0 && qa.messages == 0)
        sim_proc_sleep(SIM_US);
    CHECK_EQ_U64(qa.tail, HOLE_BIG); /* the tail moved on the first packet */
    struct ibv_qp_attr err = {.qp_state = IBV_QPS_ERR};
    CHECK(ibv_modify_qp(s->srv.qp, &err, IBV_QP_STATE) == 0);
    /* (a CQE that never comes blocks the poll: the run ends in deadlock) */
    struct ibv_wc wc;
    s->got_flush = fx_poll_one(cq, &wc) == 1;
    s->flush_ok = s->got_flush && wc.status == IBV_WC_WR_FLUSH_ERR &&
                  wc.opcode == IBV_WC_RECV_APPEND && wc.wr_id == 0 && wc.byte_len == HOLE_BIG &&
                  wc.qp_num == s->srv.qp->qp_num;
    fx_put(s->fx, "h/go", NULL, 0);
    s->next_ok = fx_poll_one(cq, &wc) == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == HOLE_BIG &&
                 wc.byte_len == HOLE_SMALL && intact(aq->buf + wc.wr_id, 1, 1, HOLE_SMALL);
    /* the consumer skips the hole and the message: empty again */
    struct ibv_aq_attr ma = {.head = HOLE_BIG + HOLE_SMALL};
    CHECK(ibv_modify_aq(aq, &ma, IBV_AQ_HEAD) == 0);
    sim_proc_sleep(50 * SIM_US);
    CHECK(ibv_poll_cq(cq, 1, &wc) == 0); /* nothing more */
    fx_barrier(s->fx, "h/end", "server", "client");
    CHECK(ibv_destroy_aq(aq) == 0);
    fx_rc_close(&s->srv2);
    CHECK(ibv_destroy_cq(cq) == 0);
    fx_rc_close(&s->srv);
}

static void test_hole(void)
{
    static struct hole_st s;
    memset(&s, 0, sizeof(s));
    s.fx = fx_create(71, NULL);
    enum sim_run_result rr = fx_run_pair(s.fx, "server", hole_server, "client", hole_client, &s);
    if (rr != SIM_RUN_DONE)
        printf("hole run %d at %.3f us\n", (int)rr, (double)sim_now(s.fx->sim) / SIM_US);
    CHECK(rr == SIM_RUN_DONE);
    CHECK(s.got_flush);
    CHECK(s.flush_ok);
    CHECK(s.next_ok);
    fx_destroy(s.fx);
}

/* ---------------------------------------------------------------- stale head writes */

struct stale_st {
    struct fx *fx;
    struct fx_rc srv;
    bool interleaved;
    uint64_t used_after, ignored, off_b;
};

/* Reset on empty: a message of 4096 B at 0; the consumer writes head 4096
 * twice (both checked valid, both in flight).  The first empties the queue
 * and resets it to 0; an append of 8192 B (B) then takes offset 0; the
 * second write, stale, arrives: it was checked against the old lap and
 * would consume half of B.  It is ignored (reset epoch). */
static void stale_prog(void *arg)
{
    struct stale_st *s = arg;
    CHECK(fx_rc_open(s->fx, &s->srv, NULL) == 0);
    struct ibv_aq_init_attr ia = {.cq = s->srv.rcq,
                                  .attr = {.region_bytes = 65536,
                                           .chunk_bytes = 65536,
                                           .watermark_bytes = 4096,
                                           .flags = IBV_AQ_F_RESET_ON_EMPTY}};
    struct ibv_aq *aq = ibv_create_aq(s->srv.pd, &ia);
    CHECK(aq != NULL);
    if (!aq)
        return;
    struct nic *nic = s->fx->nic[0];
    struct nic_aq *naq = nic_aq_lookup(nic, aq->aq_num);
    uint64_t off = 0;
    CHECK(nic_aq_reserve(nic, aq->aq_num, naq->pd, 4096, &off) == NIC_AQ_OK);
    CHECK_EQ_U64(naq->tail, 4096);
    nic_aq_write_head(naq, 4096);
    sim_proc_sleep(1); /* 1 ps: the second write leaves after the first */
    nic_aq_write_head(naq, 4096);
    /* the first write arrives: the queue resets; then B comes in */
    sim_time_t until = sim_now(s->fx->sim) + 10 * SIM_US;
    while (naq->tail != 0 && sim_now(s->fx->sim) < until)
        sim_proc_sleep(1);
    s->interleaved = naq->tail == 0 && naq->head_updates_ignored == 0;
    CHECK(nic_aq_reserve(nic, aq->aq_num, naq->pd, 8192, &s->off_b) == NIC_AQ_OK);
    sim_proc_sleep(10 * SIM_US); /* the second write has arrived */
    s->used_after = naq->used_bytes;
    s->ignored = naq->head_updates_ignored;
    CHECK(ibv_destroy_aq(aq) == 0);
    fx_rc_close(&s->srv);
}

static void test_stale_head(void)
{
    static struct stale_st s;
    memset(&s, 0, sizeof(s));
    s.fx = fx_create(73, NULL);
    fx_spawn(s.fx, 0, "stale", stale_prog, &s);
    CHECK(fx_run(s.fx) == SIM_RUN_DONE);
    CHECK(s.interleaved); /* B really came between the two writes */
    CHECK_EQ_U64(s.off_b, 0);
    CHECK_EQ_U64(s.used_after, 8192); /* B untouched */
    CHECK_EQ_U64(s.ignored, 1);
    fx_destroy(s.fx);
}

/* ---------------------------------------------------------------- background allocation */

static uint32_t len_4000(unsigned s, unsigned m)
{
    (void)s;
    (void)m;
    return 4000;
}

/* A burst at line rate (2 senders, 4000 B appends, 128 outstanding each)
 * into an AQ that starts with 2 chunks of 256 KiB: the reserve (watermark
 * 512 KiB) covers line rate x rima.alloc_latency (12.5 GB/s x 20 us =
 * 250 KB), so background allocation keeps up: no RNR, nothing lost. */
static void test_watermark(sim_time_t alloc_ps, bool expect_rnr)
{
    static struct run r;
    memset(&r, 0, sizeof(r));
    struct nic_params np;
    nic_params_default(&np);
    np.rima_alloc_ps = alloc_ps;
    r.n_senders = 2;
    r.n_msgs = 800;
    r.window = 128;
    r.rnr_retry = 7; /* retry forever */
    r.len_fn = len_4000;
    r.aqa = (struct ibv_aq_attr){.region_bytes = 8 << 20,
                                 .chunk_bytes = 256 << 10,
                                 .watermark_bytes = 512 << 10,
                                 .initial_chunks = 2};
    run_go(&r, 41, &np);
    CHECK(r.cqe_fields_ok);
    CHECK_EQ_U64(r.n_cqe, 1600);
    unsigned bad = 0;
    for (unsigned i = 0; i < r.n_cqe; i++)
        bad += !r.cqe[i].ok;
    CHECK_EQ_U64(bad, 0);
    CHECK(r.all_intact_at_end);
    uint64_t used = 1600u * 4000u;
    CHECK_EQ_U64(r.end.used_bytes, used);
    uint64_t C = 256 << 10;
    CHECK_EQ_U64(r.end.committed_bytes, (2 + r.end.chunks_allocated - r.end.chunks_freed) * C);
    /* one chunk per interrupt (the last one may still be in flight) */
    CHECK(r.end.watermark_irqs - r.end.chunks_allocated <= 1);
    if (!expect_rnr) { /* committed kept ahead of the tail by the watermark
                        * (counting the chunk whose allocation is in flight) */
        CHECK(r.end.committed_bytes + (r.end.watermark_irqs - r.end.chunks_allocated) * C >=
              used + (512 << 10));
        CHECK(r.end.watermark_irqs >= (used + (512 << 10) - 2 * C + C - 1) / C);
    }
    CHECK_EQ_U64(r.end.chunks_freed, 0); /* the head never moved */
    double secs = (double)(r.t_last_cqe - r.t_first_post) / 1e12;
    double gbps = (double)used * 8 / secs / 1e9;
    if (expect_rnr)
        CHECK(r.end.rnr_naks > 0);
    else
        CHECK_EQ_U64(r.end.rnr_naks, 0);
    if (!expect_rnr)
        CHECK(gbps > 80); /* a burst at (near) line rate */
    printf("burst of 1600 x 4000 B at %.1f Gb/s, alloc latency %.0f us: committed %" PRIu64
           " KiB (peak %" PRIu64 " KiB), %" PRIu64 " watermark IRQs, %" PRIu64 " RNR NAKs\n",
           gbps, (double)alloc_ps / 1e6, r.end.committed_bytes >> 10,
           r.end.peak_committed_bytes >> 10, r.end.watermark_irqs, r.end.rnr_naks);
    fx_destroy(r.fx);
}

/* ---------------------------------------------------------------- footprint */

static uint32_t len_fp(unsigned s, unsigned m)
{
    (void)s;
    return m ? 20000 : 6000;
}

/* Hand-computed footprint (docs/rima.md "NIC model"): region 64 KiB,
 * chunks of 16 KiB, watermark 16 KiB, 1 initial chunk, allocation 10 us;
 * messages of 6000 and 20000 B, each consumed (head moved) before the
 * next, 30 us apart.
 *   create          c0                      reserve 16384 >= 16384
 *   6000 @ 0        tail 6000               reserve 10384 < W: IRQ 1 -> c1
 *   head 6000       empty; c0 holds the tail: kept
 *   +10 us          c0 c1 (allocated 1)     reserve 26768
 *   20000 @ 6000    tail 26000, used 20000  reserve 6768 < W: IRQ 2 -> c2
 *   head 26000      c0 lies past tail + W + one chunk (65536): freed
 *   +10 us          c1 c2 (allocated 2)     reserve 23152
 * committed 32 KiB = (1 + 2 - 1) x 16 KiB, peak 32 KiB, peak used 20000. */
static void test_footprint(void)
{
    static struct run r;
    memset(&r, 0, sizeof(r));
    struct nic_params np;
    nic_params_default(&np);
    np.rima_alloc_ps = 10 * SIM_US;
    r.n_senders = 1;
    r.n_msgs = 2;
    r.len_fn = len_fp;
    r.pingpong = true;
    r.consume = true;
    r.pp_sleep_ps = 30 * SIM_US;
    r.settle_ps = 30 * SIM_US;
    r.aqa = (struct ibv_aq_attr){.region_bytes = 64 << 10,
                                 .chunk_bytes = 16 << 10,
                                 .watermark_bytes = 16 << 10,
                                 .initial_chunks = 1};
    run_go(&r, 51, &np);
    CHECK(r.cqe_fields_ok && r.modify_ok);
    CHECK_EQ_U64(r.n_cqe, 2);
    CHECK(r.cqe[0].ok && r.cqe[1].ok);
    CHECK_EQ_U64(r.cqe[0].off, 0);
    CHECK_EQ_U64(r.cqe[1].off, 6000);
    CHECK_EQ_U64(r.end.head, 26000);
    CHECK_EQ_U64(r.end.tail, 26000);
    CHECK_EQ_U64(r.end.used_bytes, 0);
    CHECK_EQ_U64(r.end.messages, 2);
    CHECK_EQ_U64(r.end.bytes, 26000);
    CHECK_EQ_U64(r.end.watermark_irqs, 2);
    CHECK_EQ_U64(r.end.chunks_allocated, 2);
    CHECK_EQ_U64(r.end.chunks_freed, 1);
    CHECK_EQ_U64(r.end.committed_bytes, 32768);
    CHECK_EQ_U64(r.end.peak_committed_bytes, 32768);
    CHECK_EQ_U64(r.end.peak_used_bytes, 20000);
    CHECK_EQ_U64(r.end.initial_chunks, 1);
    CHECK_EQ_U64(r.end.rnr_naks, 0);
    fx_destroy(r.fx);
}

/* ---------------------------------------------------------------- API */

struct api_st {
    struct fx *fx;
    struct fx_rc srv;
    int tpt_enomem, tpt_again, no_rima;
};

static struct ibv_aq *mk_aq(struct fx_rc *rc, struct ibv_cq *cq, uint64_t region, uint64_t chunk,
                            uint64_t wm, uint32_t init, uint32_t flags)
{
    struct ibv_aq_init_attr ia = {.cq = cq,
                                  .attr = {.region_bytes = region,
                                           .chunk_bytes = chunk,
                                           .watermark_bytes = wm,
                                           .initial_chunks = init,
                                           .flags = flags}};
    errno = 0;
    return ibv_create_aq(rc->pd, &ia);
}

static void api_prog(void *arg)
{
    struct api_st *s = arg;
    CHECK(fx_rc_open(s->fx, &s->srv, NULL) == 0);
    struct ibv_cq *cq = s->srv.rcq;
    /* bad arguments: EINVAL */
    struct ibv_aq_init_attr ia = {.cq = NULL};
    errno = 0;
    CHECK(!ibv_create_aq(s->srv.pd, &ia) && errno == EINVAL);
    ia.cq = cq;
    errno = 0;
    CHECK(!ibv_create_aq(NULL, &ia) && errno == EINVAL);
    errno = 0;
    CHECK(!ibv_create_aq(s->srv.pd, NULL) && errno == EINVAL);
    CHECK(!mk_aq(&s->srv, cq, 65536 + 100, 0, 0, 0, 0) && errno == EINVAL);   /* not 4 KiB */
    CHECK(!mk_aq(&s->srv, cq, 65536, 131072, 4096, 0, 0) && errno == EINVAL); /* chunk > region */
    CHECK(!mk_aq(&s->srv, cq, 65536, 12288, 4096, 0, 0) && errno == EINVAL);  /* not a multiple */
    CHECK(!mk_aq(&s->srv, cq, 65536, 16384, 4096 + 1, 0, 0) && errno == EINVAL);
    CHECK(!mk_aq(&s->srv, cq, 65536, 16384, 131072, 0, 0) && errno == EINVAL); /* wm > region */
    CHECK(!mk_aq(&s->srv, cq, 65536, 16384, 4096, 5, 0) && errno == EINVAL);   /* 5 > 4 chunks */
    CHECK(!mk_aq(&s->srv, cq, 65536, 16384, 4096, 1, 1u << 5) && errno == EINVAL); /* flags */

    /* defaults: 64 MiB region, 16 MiB chunks, watermark = 100 Gb/s x 1 ms
     * rounded up to 4 KiB, one chunk committed */
    struct ibv_aq *aq = mk_aq(&s->srv, cq, 0, 0, 0, 0, 0);
    CHECK(aq != NULL);
    if (!aq)
        return;
    CHECK(aq->context == s->srv.ctx && aq->pd == s->srv.pd && aq->cq == cq && aq->buf);
    CHECK_EQ_U64(aq->region_bytes, 64u << 20);
    struct ibv_aq_attr qa;
    CHECK(ibv_query_aq(aq, &qa) == 0);
    CHECK_EQ_U64(qa.region_bytes, 64u << 20);
    CHECK_EQ_U64(qa.chunk_bytes, 16u << 20);
    CHECK_EQ_U64(qa.watermark_bytes, 12500992); /* 12.5e6 B -> 3052 pages */
    CHECK_EQ_U64(qa.initial_chunks, 1);
    CHECK_EQ_U64(qa.committed_bytes, 16u << 20);
    CHECK_EQ_U64(qa.head, 0);
    CHECK_EQ_U64(qa.tail, 0);
    CHECK_EQ_U64(qa.used_bytes, 0);
    CHECK_EQ_U64(qa.watermark_irqs, 0);
    CHECK_EQ_U64(qa.flags, 0);

    /* modify */
    struct ibv_aq_attr ma = {.head = 100};
    CHECK_EQ_U64(ibv_modify_aq(aq, &ma, IBV_AQ_HEAD), EINVAL); /* beyond the (empty) used part */
    ma.head = 0;
    CHECK_EQ_U64(ibv_modify_aq(aq, &ma, 1 << 6), EINVAL);
    CHECK_EQ_U64(ibv_modify_aq(NULL, &ma, IBV_AQ_HEAD), EINVAL);
    CHECK_EQ_U64(ibv_modify_aq(aq, NULL, IBV_AQ_HEAD), EINVAL);
    ma.flags = 2;
    CHECK_EQ_U64(ibv_modify_aq(aq, &ma, IBV_AQ_FLAGS), EINVAL);
    ma.watermark_bytes = 1000;
    CHECK_EQ_U64(ibv_modify_aq(aq, &ma, IBV_AQ_WATERMARK), EINVAL);
    ma = (struct ibv_aq_attr){.flags = IBV_AQ_F_RESET_ON_EMPTY, .watermark_bytes = 1 << 20};
    CHECK(ibv_modify_aq(aq, &ma, IBV_AQ_FLAGS | IBV_AQ_WATERMARK) == 0);
    CHECK(ibv_modify_aq(aq, &ma, IBV_AQ_HEAD) == 0); /* head 0 on an empty queue: no-op */
    CHECK(ibv_query_aq(aq, &qa) == 0);
    CHECK_EQ_U64(qa.flags, IBV_AQ_F_RESET_ON_EMPTY);
    CHECK_EQ_U64(qa.watermark_bytes, 1 << 20);
    CHECK_EQ_U64(ibv_query_aq(NULL, &qa), EINVAL);

    /* the AQ holds its CQ and PD */
    CHECK_EQ_U64(ibv_destroy_cq(cq), EBUSY);
    CHECK_EQ_U64(ibv_destroy_aq(NULL), EINVAL);
    CHECK(ibv_destroy_aq(aq) == 0);

    /* TPT full (rima.tpt_entries = 2): ENOMEM; a slot freed is usable
     * again, under a new number */
    struct ibv_aq *a1 = mk_aq(&s->srv, cq, 65536, 0, 4096, 0, 0);
    struct ibv_aq *a2 = mk_aq(&s->srv, cq, 65536, 0, 4096, 0, 0);
    CHECK(a1 && a2);
    struct ibv_aq *a3 = mk_aq(&s->srv, cq, 65536, 0, 4096, 0, 0);
    s->tpt_enomem = !a3 && errno == ENOMEM;
    uint32_t old = a1 ? a1->aq_num : 0;
    if (a1)
        CHECK(ibv_destroy_aq(a1) == 0);
    a3 = mk_aq(&s->srv, cq, 65536, 0, 4096, 0, 0);
    s->tpt_again = a3 && a3->aq_num != old;
    if (a3)
        CHECK(ibv_destroy_aq(a3) == 0);
    /* one slot created and destroyed 600 times: never the same number
     * again (an 8-bit generation came back after 255 cycles, and a stale
     * number - a late append, a middle packet, a head write - named the
     * new queue) */
    enum { CYCLES = 600 };
    static uint32_t nums[CYCLES];
    bool distinct = true;
    for (unsigned i = 0; i < CYCLES; i++) {
        struct ibv_aq *t = mk_aq(&s->srv, cq, 4096, 0, 0, 0, 0);
        CHECK(t != NULL);
        if (!t)
            break;
        nums[i] = t->aq_num;
        distinct &= nums[i] != old;
        for (unsigned j = 0; j < i; j++)
            distinct &= nums[j] != nums[i];
        CHECK(ibv_destroy_aq(t) == 0);
    }
    CHECK(distinct);
    if (a2)
        CHECK(ibv_destroy_aq(a2) == 0);
    fx_rc_close(&s->srv);
}

static void test_api(void)
{
    struct nic_params np;
    nic_params_default(&np);
    np.rima_tpt_entries = 2;
    struct api_st s = {.fx = fx_create(61, &np)};
    fx_spawn(s.fx, 0, "api", api_prog, &s);
    CHECK(fx_run(s.fx) == SIM_RUN_DONE);
    CHECK(s.tpt_enomem);
    CHECK(s.tpt_again);
    fx_destroy(s.fx);
}

static void norima_prog(void *arg)
{
    struct api_st *s = arg;
    CHECK(fx_rc_open(s->fx, &s->srv, NULL) == 0);
    s->no_rima = !mk_aq(&s->srv, s->srv.rcq, 0, 0, 0, 0, 0) && errno == EOPNOTSUPP;
    fx_rc_close(&s->srv);
}

static void test_no_rima(void)
{
    struct nic_params np;
    nic_params_default(&np);
    np.rima_tpt_entries = 0;
    struct api_st s = {.fx = fx_create(62, &np)};
    fx_spawn(s.fx, 0, "api", norima_prog, &s);
    CHECK(fx_run(s.fx) == SIM_RUN_DONE);
    CHECK(s.no_rima);
    fx_destroy(s.fx);
}

/* ---------------------------------------------------------------- error completions */

/* Sender QPs 0..2 each make one mistake (the responder NAKs and errors
 * its QP, so one QP each): longer than the region -> REM_INV_REQ_ERR; an
 * unknown AQ number -> REM_ACCESS_ERR; an AQ of another PD ->
 * REM_ACCESS_ERR.  UC and UD QPs refuse IBV_WR_APPEND at post (EINVAL). */
struct err_st {
    struct fx *fx;
    struct fx_rc srv, other, sq[3], cl[3], ucs, ucc, uds, udc;
    enum ibv_wc_status st[3];
    int uc_rc, ud_rc;
};

static void err_client(void *arg)
{
    struct err_st *s = arg;
    uint32_t aqn[2];
    fx_get(s->fx, "e/aqn", aqn, sizeof(aqn));
    const uint32_t target[3] = {aqn[0], aqn[0] ^ 0x80, aqn[1]};
    const uint32_t len[3] = {70000, 64, 64};
    for (unsigned i = 0; i < 3; i++) {
        char me[16], peer[16];
        snprintf(me, sizeof(me), "e/c%u", i);
        snprintf(peer, sizeof(peer), "e/s%u", i);
        CHECK(fx_rc_open(s->fx, &s->cl[i], NULL) == 0);
        CHECK(fx_rc_connect(&s->cl[i], me, peer) == 0);
        CHECK(post_append(&s->cl[i], target[i], i, 0, len[i], 0) == 0);
        struct ibv_wc wc;
        CHECK(fx_poll_one(s->cl[i].scq, &wc) == 1);
        s->st[i] = wc.status;
    }
    struct fx_rc_opts o;
    fx_rc_default_opts(&o);
    o.qp_type = IBV_QPT_UC;
    CHECK(fx_rc_open(s->fx, &s->ucc, &o) == 0);
    CHECK(fx_rc_connect(&s->ucc, "e/ucc", "e/ucs") == 0);
    s->uc_rc = post_append(&s->ucc, aqn[0], 9, 0, 64, 0);
    o.qp_type = IBV_QPT_UD;
    CHECK(fx_rc_open(s->fx, &s->udc, &o) == 0);
    CHECK(fx_rc_connect(&s->udc, "e/udc", "e/uds") == 0);
    s->ud_rc = post_append(&s->udc, aqn[0], 9, 0, 64, 0);
    fx_barrier(s->fx, "e/end", "client", "server");
    for (unsigned i = 0; i < 3; i++)
        fx_rc_close(&s->cl[i]);
    fx_rc_close(&s->ucc);
    fx_rc_close(&s->udc);
}

static void err_server(void *arg)
{
    struct err_st *s = arg;
    CHECK(fx_rc_open(s->fx, &s->srv, NULL) == 0);
    CHECK(fx_rc_open(s->fx, &s->other, NULL) == 0); /* its own PD */
    struct ibv_aq *a = mk_aq(&s->srv, s->srv.rcq, 65536, 16384, 4096, 4, 0);
    struct ibv_aq *b = mk_aq(&s->other, s->other.rcq, 65536, 16384, 4096, 4, 0);
    CHECK(a && b);
    if (!a || !b)
        return;
    uint32_t aqn[2] = {a->aq_num, b->aq_num};
    fx_put(s->fx, "e/aqn", aqn, sizeof(aqn));
    for (unsigned i = 0; i < 3; i++) {
        char me[16], peer[16];
        snprintf(me, sizeof(me), "e/s%u", i);
        snprintf(peer, sizeof(peer), "e/c%u", i);
        CHECK(fx_rc_open_shared(&s->sq[i], &s->srv, NULL) == 0);
        CHECK(fx_rc_connect(&s->sq[i], me, peer) == 0);
    }
    struct fx_rc_opts o;
    fx_rc_default_opts(&o);
    o.qp_type = IBV_QPT_UC;
    CHECK(fx_rc_open(s->fx, &s->ucs, &o) == 0);
    CHECK(fx_rc_connect(&s->ucs, "e/ucs", "e/ucc") == 0);
    o.qp_type = IBV_QPT_UD;
    CHECK(fx_rc_open(s->fx, &s->uds, &o) == 0);
    CHECK(fx_rc_connect(&s->uds, "e/uds", "e/udc") == 0);
    fx_barrier(s->fx, "e/end", "server", "client");
    struct ibv_aq_attr qa;
    CHECK(ibv_query_aq(a, &qa) == 0);
    CHECK_EQ_U64(qa.messages, 0);
    CHECK_EQ_U64(qa.used_bytes, 0);
    for (unsigned i = 0; i < 3; i++)
        fx_rc_close(&s->sq[i]);
    CHECK(ibv_destroy_aq(a) == 0);
    CHECK(ibv_destroy_aq(b) == 0);
    fx_rc_close(&s->ucs);
    fx_rc_close(&s->uds);
    fx_rc_close(&s->other);
    fx_rc_close(&s->srv);
}

static void test_errors(void)
{
    struct err_st s = {.fx = fx_create(71, NULL)};
    CHECK(fx_run_pair(s.fx, "server", err_server, "client", err_client, &s) == SIM_RUN_DONE);
    CHECK_EQ_U64(s.st[0], IBV_WC_REM_INV_REQ_ERR);
    CHECK_EQ_U64(s.st[1], IBV_WC_REM_ACCESS_ERR);
    CHECK_EQ_U64(s.st[2], IBV_WC_REM_ACCESS_ERR);
    CHECK_EQ_U64(s.uc_rc, EINVAL);
    CHECK_EQ_U64(s.ud_rc, EINVAL);
    fx_destroy(s.fx);
}

/* ---------------------------------------------------------------- TPT latency */

/* One-way latency, post -> receiver CQE visible (the CQ's notification
 * records the instant nic_cq_push makes it visible), of 20 SENDs then 20
 * appends of 64 B, one at a time on one RC connection. */
enum { LAT_N = 20 };
struct lat_st {
    struct fx *fx;
    struct fx_rc srv, cl;
    sim_time_t t_post[2 * LAT_N], t_cqe[2 * LAT_N];
    unsigned k;
    bool ok;
};

static void lat_cqe_visible(struct sim *sim, void *a, void *b)
{
    (void)b;
    struct lat_st *s = a;
    s->t_cqe[s->k] = sim_now(sim);
}

static void lat_client(void *arg)
{
    struct lat_st *s = arg;
    CHECK(fx_rc_open(s->fx, &s->cl, NULL) == 0);
    CHECK(fx_rc_connect(&s->cl, "l/c", "l/s") == 0);
    uint32_t aqn = 0;
    fx_get(s->fx, "l/aqn", &aqn, sizeof(aqn));
    for (unsigned k = 0; k < 2 * LAT_N; k++) {
        char key[16];
        snprintf(key, sizeof(key), "l/go%u", k);
        fx_get(s->fx, key, NULL, 0);
        s->t_post[k] = sim_now(s->fx->sim);
        if (k < LAT_N)
            CHECK(fx_post(&s->cl, IBV_WR_SEND, k, 0, 64, 0, IBV_SEND_SIGNALED) == 0);
        else
            CHECK(post_append(&s->cl, aqn, k, 0, 64, 0) == 0);
        struct ibv_wc wc;
        CHECK(fx_poll_one(s->cl.scq, &wc) == 1 && wc.status == IBV_WC_SUCCESS);
    }
    fx_barrier(s->fx, "l/end", "client", "server");
    fx_rc_close(&s->cl);
}

static void lat_server(void *arg)
{
    struct lat_st *s = arg;
    CHECK(fx_rc_open(s->fx, &s->srv, NULL) == 0);
    struct ibv_aq *aq = mk_aq(&s->srv, s->srv.rcq, 1 << 20, 1 << 18, 4096, 4, 0);
    CHECK(aq != NULL);
    if (!aq)
        return;
    fx_put(s->fx, "l/aqn", &aq->aq_num, sizeof(aq->aq_num));
    CHECK(fx_rc_connect(&s->srv, "l/s", "l/c") == 0);
    struct nic_cq *ncq = fx_nic_cq(s->srv.rcq);
    nic_cq_set_notify(ncq, lat_cqe_visible, s, NULL);
    s->ok = true;
    for (unsigned k = 0; k < 2 * LAT_N; k++) {
        if (k < LAT_N)
            CHECK(fx_post_recv(&s->srv, k, 0, 4096) == 0);
        s->k = k;
        nic_cq_arm(ncq, false);
        sim_proc_sleep(2 * SIM_US); /* everything idle again */
        char key[16];
        snprintf(key, sizeof(key), "l/go%u", k);
        fx_put(s->fx, key, NULL, 0);
        struct ibv_wc wc;
        CHECK(fx_poll_one(s->srv.rcq, &wc) == 1);
        s->ok &= wc.status == IBV_WC_SUCCESS &&
                 wc.opcode == (k < LAT_N ? IBV_WC_RECV : IBV_WC_RECV_APPEND) && wc.byte_len == 64;
    }
    fx_barrier(s->fx, "l/end", "server", "client");
    CHECK(ibv_destroy_aq(aq) == 0);
    fx_rc_close(&s->srv);
}

/* Mean one-way latency of SENDs (*send) and appends (*app), in ps. */
static void lat_run(sim_time_t tpt_ps, double *send, double *app)
{
    struct nic_params np;
    nic_params_default(&np);
    np.rima_tpt_ps = tpt_ps;
    static struct lat_st s;
    memset(&s, 0, sizeof(s));
    s.fx = fx_create(81, &np);
    CHECK(fx_run_pair(s.fx, "server", lat_server, "client", lat_client, &s) == SIM_RUN_DONE);
    CHECK(s.ok);
    /* the first of each kind warms the NIC's caches (QP context, MPT/MTT
     * of the receive buffer / of the AQ region): left out */
    *send = *app = 0;
    for (unsigned k = 0; k < 2 * LAT_N; k++)
        if (k % LAT_N)
            *(k < LAT_N ? send : app) += (double)(s.t_cqe[k] - s.t_post[k]) / (LAT_N - 1);
    fx_destroy(s.fx);
}

static void test_tpt_latency(void)
{
    double send0, app0, send2, app2, send100, app100;
    lat_run(0, &send0, &app0);
    lat_run(2 * SIM_NS, &send2, &app2);
    lat_run(100 * SIM_NS, &send100, &app100);
    /* the TPT step adds exactly its latency to an append */
    CHECK(app2 - app0 > 1990 && app2 - app0 < 2010);
    CHECK(app100 - app0 > 99990 && app100 - app0 < 100010);
    CHECK(send2 == send0 && send100 == send0);
    /* vs SEND: the TPT latency plus the 16 B header on two 100 Gb/s hops
     * (2 x 1.28 ns) */
    double d = app2 - send2;
    CHECK(d >= 2000 && d <= 2000 + 3000);
    printf("one-way latency 64 B (post -> receiver CQE): SEND %.2f ns, append %.2f ns "
           "(rima.tpt_latency 2 ns; +%.2f ns), append with 0 ns TPT %.2f ns, with 100 ns %.2f ns\n",
           send2 / 1e3, app2 / 1e3, d / 1e3, app0 / 1e3, app100 / 1e3);
}

/* ---------------------------------------------------------------- message rate */

static uint32_t len_64(unsigned s, unsigned m)
{
    (void)s;
    (void)m;
    return 64;
}

static void test_rate(unsigned n_senders)
{
    static struct run r;
    memset(&r, 0, sizeof(r));
    r.n_senders = n_senders;
    r.n_msgs = 2000;
    r.window = 64;
    r.len_fn = len_64;
    r.aqa = (struct ibv_aq_attr){.region_bytes = 16 << 20,
                                 .chunk_bytes = 4 << 20,
                                 .watermark_bytes = 4 << 20,
                                 .initial_chunks = 4};
    run_go(&r, 91, NULL);
    CHECK(r.cqe_fields_ok);
    CHECK_EQ_U64(r.n_cqe, n_senders * 2000u);
    CHECK_EQ_U64(r.end.rnr_naks, 0);
    double mps = (double)r.n_cqe / ((double)(r.t_last_cqe - r.t_first_post) / 1e12);
    CHECK(mps > 1e6);
    printf("64 B appends, %u sender QP(s) x 2000, 64 outstanding each: %.2f M msg/s into one AQ\n",
           n_senders, mps / 1e6);
    fx_destroy(r.fx);
}

int main(void)
{
    test_api();
    test_no_rima();
    test_basic();
    test_errors();
    test_footprint();
    test_many_senders(0);
    test_many_senders(0.05); /* go back N, duplicates: still each message once */
    test_wrap(false);
    test_wrap(true);
    test_exhaustion();
    test_never_full();
    test_padding();
    test_empty_restart();
    test_empty_restart_alloc();
    test_hole();
    test_stale_head();
    test_watermark(20 * SIM_US, false);
    test_watermark(1 * SIM_MS, true);
    test_tpt_latency();
    test_rate(1);
    test_rate(2);
    test_rate(4);
    return test_summary();
}
