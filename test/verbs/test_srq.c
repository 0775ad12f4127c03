/* Shared receive queues at the verbs level:
 *
 *  - API: device limits (max_srq, max_srq_wr, max_srq_sge); create /
 *    modify / query / destroy with bad arguments (EINVAL: max_wr 0 or
 *    above the device limit, max_sge above it, resize, limit > max_wr,
 *    unknown mask bits, an SRQ of another context); post beyond the
 *    capacity (ENOMEM) and too many SGEs (EINVAL) with *bad_wr; a QP on
 *    an SRQ reports no receive queue and ibv_post_recv on it is ENOMEM;
 *    destroy with a QP attached is EBUSY;
 *  - sharing: 6 client QPs on 3 hosts send 120 SENDs (some of 2 packets)
 *    to 6 server QPs sharing one SRQ of 32 WQEs, reposted as they
 *    complete: every message arrives exactly once, intact, in order per
 *    QP, with the receiving QP's number in wc.qp_num;
 *  - limit: armed at 4 with 10 posted, no event after 6 messages, one
 *    IBV_EVENT_SRQ_LIMIT_REACHED (element.srq) on the async fd after the
 *    7th, srq_limit reads 0, none after the 8th; re-armed at 2, one more
 *    after the 9th;
 *  - a QP error flushes nothing of the SRQ: the other QP still receives
 *    into the WQEs posted before;
 *  - RNR: an empty SRQ NAKs SENDs with RNR; receives posted later take
 *    them (rnr_retry 7); with rnr_retry 2 the SEND fails with
 *    IBV_WC_RNR_RETRY_EXC_ERR after 3 NAKs;
 *  - UD QPs on an SRQ: datagrams with their GRH slot. */
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>

#include "fixture.h"
#include "test.h"

/* ---------------------------------------------------------------- helpers */

static int post_srq(struct ibv_srq *srq, struct fx_rc *rc, uint64_t wr_id, size_t off, uint32_t len)
{
    struct ibv_sge sge = {.addr = (uintptr_t)(rc->buf + off), .length = len, .lkey = rc->mr->lkey};
    struct ibv_recv_wr wr = {.wr_id = wr_id, .sg_list = &sge, .num_sge = 1}, *bad = NULL;
    return ibv_post_srq_recv(srq, &wr, &bad);
}

static bool async_ready(struct ibv_context *ctx)
{
    struct pollfd pfd = {.fd = ctx->async_fd, .events = POLLIN};
    return poll(&pfd, 1, 0) == 1 && (pfd.revents & POLLIN);
}

static struct ibv_srq *make_srq(struct fx_rc *rc, uint32_t max_wr, uint32_t max_sge)
{
    struct ibv_srq_init_attr ia = {.attr = {.max_wr = max_wr, .max_sge = max_sge}};
    return ibv_create_srq(rc->pd, &ia);
}

/* ---------------------------------------------------------------- API */

struct api_st {
    struct fx *fx;
    struct fx_rc srv, q;
};

static void api_prog(void *arg)
{
    struct api_st *s = arg;
    CHECK(fx_rc_open(s->fx, &s->srv, NULL) == 0);
    struct ibv_device_attr da;
    CHECK(ibv_query_device(s->srv.ctx, &da) == 0);
    CHECK_EQ_U64(da.max_srq, 8388608);
    CHECK_EQ_U64(da.max_srq_wr, 32767);
    CHECK_EQ_U64(da.max_srq_sge, NIC_MAX_SGE);

    /* bad creation arguments */
    struct ibv_srq_init_attr ia = {.attr = {.max_wr = 0, .max_sge = 1}};
    errno = 0;
    CHECK(!ibv_create_srq(s->srv.pd, &ia) && errno == EINVAL);
    ia.attr.max_wr = (uint32_t)da.max_srq_wr + 1;
    errno = 0;
    CHECK(!ibv_create_srq(s->srv.pd, &ia) && errno == EINVAL);
    ia.attr.max_wr = 4;
    ia.attr.max_sge = (uint32_t)da.max_srq_sge + 1;
    errno = 0;
    CHECK(!ibv_create_srq(s->srv.pd, &ia) && errno == EINVAL);
    errno = 0;
    CHECK(!ibv_create_srq(NULL, &ia) && errno == EINVAL);

    /* create: srq_limit is ignored (starts disarmed) */
    ia = (struct ibv_srq_init_attr){.srq_context = s,
                                    .attr = {.max_wr = 4, .max_sge = 2, .srq_limit = 3}};
    struct ibv_srq *srq = ibv_create_srq(s->srv.pd, &ia);
    CHECK(srq != NULL);
    if (!srq)
        return;
    CHECK(srq->context == s->srv.ctx && srq->pd == s->srv.pd && srq->srq_context == s);
    CHECK_EQ_U64(ia.attr.max_wr, 4);
    CHECK_EQ_U64(ia.attr.max_sge, 2);
    struct ibv_srq_attr qa;
    CHECK(ibv_query_srq(srq, &qa) == 0);
    CHECK_EQ_U64(qa.max_wr, 4);
    CHECK_EQ_U64(qa.max_sge, 2);
    CHECK_EQ_U64(qa.srq_limit, 0);

    /* modify */
    struct ibv_srq_attr ma = {.max_wr = 8, .srq_limit = 5};
    CHECK_EQ_U64(ibv_modify_srq(srq, &ma, IBV_SRQ_MAX_WR), EINVAL); /* no resize (mlx5) */
    CHECK_EQ_U64(ibv_modify_srq(srq, &ma, IBV_SRQ_LIMIT), EINVAL);  /* 5 > max_wr 4 */
    CHECK_EQ_U64(ibv_modify_srq(srq, &ma, 1 << 5), EINVAL);
    CHECK_EQ_U64(ibv_modify_srq(NULL, &ma, IBV_SRQ_LIMIT), EINVAL);
    ma.srq_limit = 4;
    CHECK(ibv_modify_srq(srq, &ma, IBV_SRQ_LIMIT) == 0);
    CHECK(ibv_query_srq(srq, &qa) == 0);
    CHECK_EQ_U64(qa.srq_limit, 4);
    ma.srq_limit = 0;
    CHECK(ibv_modify_srq(srq, &ma, IBV_SRQ_LIMIT) == 0);
    CHECK(ibv_query_srq(srq, &qa) == 0);
    CHECK_EQ_U64(qa.srq_limit, 0);

    /* post: too many SGEs, beyond the capacity */
    struct ibv_sge sg[3];
    for (int i = 0; i < 3; i++)
        sg[i] = (struct ibv_sge){(uintptr_t)s->srv.buf + 64u * (unsigned)i, 64, s->srv.mr->lkey};
    struct ibv_recv_wr w3 = {.wr_id = 99, .sg_list = sg, .num_sge = 3}, *bad = NULL;
    CHECK_EQ_U64(ibv_post_srq_recv(srq, &w3, &bad), EINVAL);
    CHECK(bad == &w3);
    struct ibv_recv_wr w[5];
    for (int i = 0; i < 5; i++)
        w[i] = (struct ibv_recv_wr){
            .wr_id = (uint64_t)i, .sg_list = sg, .num_sge = 1, .next = i < 4 ? &w[i + 1] : NULL};
    bad = NULL;
    CHECK_EQ_U64(ibv_post_srq_recv(srq, w, &bad), ENOMEM);
    CHECK(bad == &w[4]);
    w[4].next = NULL;
    bad = NULL;
    CHECK_EQ_U64(ibv_post_srq_recv(srq, &w[4], &bad), ENOMEM);
    CHECK(bad == &w[4]);

    /* a QP on the SRQ: no receive queue of its own */
    CHECK(fx_rc_open_shared(&s->q, &s->srv, srq) == 0);
    struct ibv_qp_attr qpa;
    struct ibv_qp_init_attr qia;
    CHECK(ibv_query_qp(s->q.qp, &qpa, IBV_QP_CAP, &qia) == 0);
    CHECK(qia.srq == srq && s->q.qp->srq == srq);
    CHECK_EQ_U64(qia.cap.max_recv_wr, 0);
    CHECK_EQ_U64(qia.cap.max_recv_sge, 0);
    CHECK(fx_rc_to_init(&s->q) == 0);
    struct ibv_recv_wr rw = {.wr_id = 7, .sg_list = sg, .num_sge = 1};
    bad = NULL;
    CHECK_EQ_U64(ibv_post_recv(s->q.qp, &rw, &bad), ENOMEM); /* as mlx5 */
    CHECK(bad == &rw);

    /* an SRQ of another context */
    struct ibv_device **list = ibv_get_device_list(NULL);
    struct ibv_context *ctx2 = ibv_open_device(list[0]);
    ibv_free_device_list(list);
    struct ibv_pd *pd2 = ibv_alloc_pd(ctx2);
    struct ibv_srq_init_attr ia2 = {.attr = {.max_wr = 2, .max_sge = 1}};
    struct ibv_srq *srq2 = ibv_create_srq(pd2, &ia2);
    CHECK(srq2 != NULL);
    struct ibv_qp_init_attr bad_ia = {.send_cq = s->srv.scq,
                                      .recv_cq = s->srv.rcq,
                                      .srq = srq2,
                                      .cap = {.max_send_wr = 4, .max_send_sge = 1},
                                      .qp_type = IBV_QPT_RC};
    errno = 0;
    CHECK(!ibv_create_qp(s->srv.pd, &bad_ia) && errno == EINVAL);
    CHECK_EQ_U64(ibv_dealloc_pd(pd2), EBUSY); /* the SRQ uses it */
    CHECK(ibv_destroy_srq(srq2) == 0);
    CHECK(ibv_dealloc_pd(pd2) == 0);
    CHECK(ibv_close_device(ctx2) == 0);

    /* destroy: busy while a QP uses it */
    CHECK_EQ_U64(ibv_destroy_srq(srq), EBUSY);
    fx_rc_close(&s->q);
    CHECK(ibv_destroy_srq(srq) == 0);
    CHECK_EQ_U64(ibv_destroy_srq(NULL), EINVAL);

    /* ibv_create_srq_ex with a basic SRQ takes the ibv_create_srq path */
    struct ibv_srq_init_attr_ex iax = {.attr = {.max_wr = 8, .max_sge = 1},
                                       .comp_mask = IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_TYPE,
                                       .srq_type = IBV_SRQT_BASIC,
                                       .pd = s->srv.pd};
    struct ibv_srq *sx = ibv_create_srq_ex(s->srv.ctx, &iax);
    CHECK(sx != NULL);
    if (sx)
        CHECK(ibv_destroy_srq(sx) == 0);
    fx_rc_close(&s->srv);
}

static void test_api(void)
{
    struct api_st s = {.fx = fx_create(1, NULL)};
    fx_spawn(s.fx, 0, "api", api_prog, &s);
    CHECK(fx_run(s.fx) == SIM_RUN_DONE);
    fx_destroy(s.fx);
}

/* ---------------------------------------------------------------- many QPs, one SRQ */

enum { SH_CLIENTS = 6, SH_MSGS = 20, SH_SLOTS = 32, SH_SLOT_BYTES = 8192 };

struct sh_st {
    struct fx *fx;
    struct fx_rc srv, sq[SH_CLIENTS], cl[SH_CLIENTS];
    unsigned ids[SH_CLIENTS];
    unsigned got[SH_CLIENTS][SH_MSGS];
    unsigned received, bad_data, bad_qpn, out_of_order, bad_len;
    unsigned next_seq[SH_CLIENTS];
    unsigned send_ok[SH_CLIENTS];
};

static uint32_t sh_len(unsigned c, unsigned m)
{
    return 64 + (m * 997u + c * 131u) % 7000u; /* up to ~7 KiB: two packets at 4 KiB MTU */
}

static uint8_t sh_byte(unsigned c, unsigned m, uint32_t i)
{
    return (uint8_t)(c * 31u + m * 7u + i * 13u + 1u);
}

static struct sh_st *g_sh;

static void sh_client(void *arg)
{
    struct sh_st *s = g_sh;
    unsigned c = *(unsigned *)arg;
    struct fx_rc *rc = &s->cl[c];
    CHECK(fx_rc_open(s->fx, rc, NULL) == 0);
    char me[32], peer[32];
    snprintf(me, sizeof(me), "sh/c%u", c);
    snprintf(peer, sizeof(peer), "sh/s%u", c);
    CHECK(fx_rc_connect(rc, me, peer) == 0);
    /* all at once: the messages of the six QPs interleave at the server */
    for (unsigned m = 0; m < SH_MSGS; m++) {
        uint32_t len = sh_len(c, m);
        size_t off = (size_t)m * SH_SLOT_BYTES;
        rc->buf[off] = (uint8_t)c;
        rc->buf[off + 1] = (uint8_t)m;
        for (uint32_t i = 2; i < len; i++)
            rc->buf[off + i] = sh_byte(c, m, i);
        CHECK(fx_post(rc, IBV_WR_SEND, m, off, len, 0, IBV_SEND_SIGNALED) == 0);
    }
    for (unsigned m = 0; m < SH_MSGS; m++) {
        struct ibv_wc wc;
        CHECK(fx_poll_one(rc->scq, &wc) == 1);
        if (wc.status == IBV_WC_SUCCESS && wc.wr_id == m)
            s->send_ok[c]++;
    }
    snprintf(me, sizeof(me), "sh/done%u", c);
    fx_barrier(s->fx, "sh/end", me, "server");
    fx_rc_close(rc);
}

static void sh_server(void *arg)
{
    (void)arg;
    struct sh_st *s = g_sh;
    CHECK(fx_rc_open(s->fx, &s->srv, NULL) == 0);
    struct ibv_srq *srq = make_srq(&s->srv, SH_SLOTS, 1);
    CHECK(srq != NULL);
    for (unsigned i = 0; i < SH_SLOTS; i++)
        CHECK(post_srq(srq, &s->srv, i, (size_t)i * SH_SLOT_BYTES, SH_SLOT_BYTES) == 0);
    uint32_t qpn_of[SH_CLIENTS];
    for (unsigned c = 0; c < SH_CLIENTS; c++) {
        CHECK(fx_rc_open_shared(&s->sq[c], &s->srv, srq) == 0);
        qpn_of[c] = s->sq[c].qp->qp_num;
        char me[32], peer[32];
        snprintf(me, sizeof(me), "sh/s%u", c);
        snprintf(peer, sizeof(peer), "sh/c%u", c);
        CHECK(fx_rc_connect(&s->sq[c], me, peer) == 0);
    }
    while (s->received < SH_CLIENTS * SH_MSGS) {
        struct ibv_wc wc;
        if (fx_poll_one(s->srv.rcq, &wc) != 1 || wc.status != IBV_WC_SUCCESS) {
            CHECK(0);
            break;
        }
        s->received++;
        unsigned qc = SH_CLIENTS;
        for (unsigned c = 0; c < SH_CLIENTS; c++)
            if (qpn_of[c] == wc.qp_num)
                qc = c;
        const uint8_t *b = s->srv.buf + wc.wr_id * SH_SLOT_BYTES;
        unsigned c = b[0], m = b[1];
        if (qc == SH_CLIENTS || c != qc) {
            s->bad_qpn++;
        } else if (m >= SH_MSGS) {
            s->bad_data++;
        } else {
            s->got[c][m]++;
            if (m != s->next_seq[c])
                s->out_of_order++;
            s->next_seq[c] = m + 1;
            if (wc.byte_len != sh_len(c, m))
                s->bad_len++;
            for (uint32_t i = 2; i < sh_len(c, m); i++)
                if (b[i] != sh_byte(c, m, i)) {
                    s->bad_data++;
                    break;
                }
        }
        CHECK(post_srq(srq, &s->srv, wc.wr_id, (size_t)wc.wr_id * SH_SLOT_BYTES, SH_SLOT_BYTES) ==
              0);
    }
    for (unsigned c = 0; c < SH_CLIENTS; c++) {
        char peer[32];
        snprintf(peer, sizeof(peer), "sh/done%u", c);
        fx_barrier(s->fx, "sh/end", "server", peer);
    }
    for (unsigned c = 0; c < SH_CLIENTS; c++)
        fx_rc_close(&s->sq[c]);
    CHECK(ibv_destroy_srq(srq) == 0);
    fx_rc_close(&s->srv);
}

static void test_shared(void)
{
    static struct sh_st s;
    memset(&s, 0, sizeof(s));
    g_sh = &s;
    s.fx = fx_create_n(2, 4, NULL);
    fx_spawn(s.fx, 0, "server", sh_server, NULL);
    for (unsigned c = 0; c < SH_CLIENTS; c++) {
        s.ids[c] = c;
        char name[16];
        snprintf(name, sizeof(name), "client%u", c);
        fx_spawn(s.fx, 1 + c % 3, name, sh_client, &s.ids[c]);
    }
    CHECK(fx_run(s.fx) == SIM_RUN_DONE);
    CHECK_EQ_U64(s.received, SH_CLIENTS * SH_MSGS);
    for (unsigned c = 0; c < SH_CLIENTS; c++) {
        CHECK_EQ_U64(s.send_ok[c], SH_MSGS);
        for (unsigned m = 0; m < SH_MSGS; m++)
            CHECK_EQ_U64(s.got[c][m], 1);
    }
    CHECK_EQ_U64(s.bad_qpn, 0);
    CHECK_EQ_U64(s.bad_data, 0);
    CHECK_EQ_U64(s.bad_len, 0);
    CHECK_EQ_U64(s.out_of_order, 0);
    printf("shared: %u SENDs from %u QPs on 3 hosts through one SRQ of %u (%" PRIu64
           " RNR NAKs while it ran dry)\n",
           s.received, SH_CLIENTS, SH_SLOTS, nic_get_counters(s.fx->nic[0])->naks_tx);
    fx_destroy(s.fx);
}

/* ---------------------------------------------------------------- limit event, QP error */

struct lim_st {
    struct fx *fx;
    struct fx_rc srv, qa, qb, ca, cb;
    bool ev_early, ev_after7, ev_ok, limit_zero, ev_after8, ev_after_rearm, ev2_ok, ev_end;
    uint64_t wr_ids[9];
    unsigned n_recv;
    bool flushed_nothing, b_got_next;
};

static void lim_client(void *arg)
{
    struct lim_st *s = arg;
    CHECK(fx_rc_open(s->fx, &s->ca, NULL) == 0);
    CHECK(fx_rc_connect(&s->ca, "lim/ca", "lim/qa") == 0);
    CHECK(fx_rc_open_shared(&s->cb, &s->ca, NULL) == 0);
    CHECK(fx_rc_connect(&s->cb, "lim/cb", "lim/qb") == 0);
    struct ibv_wc wc;
    /* 6, then one at a time on the server's word */
    for (unsigned m = 0; m < 9; m++) {
        if (m >= 6) {
            char key[16];
            snprintf(key, sizeof(key), "lim/go%u", m);
            fx_get(s->fx, key, NULL, 0);
        }
        CHECK(fx_post(&s->ca, IBV_WR_SEND, m, 0, 100, 0, IBV_SEND_SIGNALED) == 0);
        CHECK(fx_poll_one(s->ca.scq, &wc) == 1 && wc.status == IBV_WC_SUCCESS);
    }
    /* after the server errored QP A: one SEND on B */
    fx_get(s->fx, "lim/goB", NULL, 0);
    CHECK(fx_post(&s->cb, IBV_WR_SEND, 100, 0, 100, 0, IBV_SEND_SIGNALED) == 0);
    CHECK(fx_poll_one(s->cb.scq, &wc) == 1 && wc.status == IBV_WC_SUCCESS);
    fx_barrier(s->fx, "lim/end", "client", "server");
    fx_rc_close(&s->cb);
    fx_rc_close(&s->ca);
}

static void lim_server(void *arg)
{
    struct lim_st *s = arg;
    CHECK(fx_rc_open(s->fx, &s->srv, NULL) == 0);
    struct ibv_srq *srq = make_srq(&s->srv, 16, 1);
    CHECK(srq != NULL);
    for (unsigned i = 0; i < 10; i++)
        CHECK(post_srq(srq, &s->srv, 1000 + i, 256u * i, 256) == 0);
    struct ibv_srq_attr a = {.srq_limit = 4};
    CHECK(ibv_modify_srq(srq, &a, IBV_SRQ_LIMIT) == 0);
    CHECK(fx_rc_open_shared(&s->qa, &s->srv, srq) == 0);
    CHECK(fx_rc_connect(&s->qa, "lim/qa", "lim/ca") == 0);
    CHECK(fx_rc_open_shared(&s->qb, &s->srv, srq) == 0);
    CHECK(fx_rc_connect(&s->qb, "lim/qb", "lim/cb") == 0);
    struct ibv_wc wc;
    struct ibv_srq_attr qa;
    for (unsigned m = 0; m < 9; m++) {
        CHECK(fx_poll_one(s->srv.rcq, &wc) == 1 && wc.status == IBV_WC_SUCCESS);
        CHECK_EQ_U64(wc.qp_num, s->qa.qp->qp_num);
        s->wr_ids[m] = wc.wr_id;
        s->n_recv++;
        bool ev = async_ready(s->srv.ctx);
        if (m < 6 && ev)
            s->ev_early = true;
        if (m == 6) { /* 7th taken: 3 left < 4 */
            s->ev_after7 = ev;
            struct ibv_async_event e;
            if (ev && ibv_get_async_event(s->srv.ctx, &e) == 0) {
                s->ev_ok = e.event_type == IBV_EVENT_SRQ_LIMIT_REACHED && e.element.srq == srq;
                ibv_ack_async_event(&e);
            }
            CHECK(ibv_query_srq(srq, &qa) == 0);
            s->limit_zero = qa.srq_limit == 0;
        }
        if (m == 7) { /* 2 left: disarmed, no event; re-arm at 2 */
            s->ev_after8 = ev;
            a.srq_limit = 2;
            CHECK(ibv_modify_srq(srq, &a, IBV_SRQ_LIMIT) == 0);
            s->ev_after_rearm = async_ready(s->srv.ctx);
        }
        if (m == 8) { /* 1 left < 2 */
            struct ibv_async_event e;
            if (ev && ibv_get_async_event(s->srv.ctx, &e) == 0) {
                s->ev2_ok = e.event_type == IBV_EVENT_SRQ_LIMIT_REACHED && e.element.srq == srq;
                ibv_ack_async_event(&e);
            }
            CHECK_EQ_U64(srq->events_completed, 2);
        }
        if (m >= 5 && m < 8) {
            char key[16];
            snprintf(key, sizeof(key), "lim/go%u", m + 1);
            fx_put(s->fx, key, NULL, 0);
        }
    }
    /* QP A to ERR: the SRQ's last WQE is not flushed, B receives into it */
    struct ibv_qp_attr qpa = {.qp_state = IBV_QPS_ERR};
    CHECK(ibv_modify_qp(s->qa.qp, &qpa, IBV_QP_STATE) == 0);
    s->flushed_nothing = ibv_poll_cq(s->srv.rcq, 1, &wc) == 0;
    fx_put(s->fx, "lim/goB", NULL, 0);
    CHECK(fx_poll_one(s->srv.rcq, &wc) == 1);
    s->b_got_next = wc.status == IBV_WC_SUCCESS && wc.wr_id == 1009 &&
                    wc.qp_num == s->qb.qp->qp_num && wc.byte_len == 100;
    s->ev_end = async_ready(s->srv.ctx);
    fx_barrier(s->fx, "lim/end", "server", "client");
    fx_rc_close(&s->qa);
    fx_rc_close(&s->qb);
    CHECK(ibv_destroy_srq(srq) == 0);
    fx_rc_close(&s->srv);
}

static void test_limit(void)
{
    struct lim_st s = {.fx = fx_create(3, NULL)};
    CHECK(fx_run_pair(s.fx, "server", lim_server, "client", lim_client, &s) == SIM_RUN_DONE);
    CHECK_EQ_U64(s.n_recv, 9);
    for (unsigned m = 0; m < 9; m++)
        CHECK_EQ_U64(s.wr_ids[m], 1000 + m); /* SRQ order */
    CHECK(!s.ev_early);
    CHECK(s.ev_after7);
    CHECK(s.ev_ok);
    CHECK(s.limit_zero);
    CHECK(!s.ev_after8);
    CHECK(!s.ev_after_rearm);
    CHECK(s.ev2_ok);
    CHECK(s.flushed_nothing);
    CHECK(s.b_got_next);
    CHECK(!s.ev_end);
    fx_destroy(s.fx);
}

/* ---------------------------------------------------------------- RNR on an empty SRQ */

struct rnr_st {
    struct fx *fx;
    struct fx_rc srv, q, cl;
    uint8_t rnr_retry;
    sim_time_t post_after_ps; /* 0: never */
    enum ibv_wc_status st[3];
    unsigned n_send, n_recv;
    bool data_ok;
};

static void rnr_client(void *arg)
{
    struct rnr_st *s = arg;
    struct fx_rc_opts o;
    fx_rc_default_opts(&o);
    o.rnr_retry = s->rnr_retry;
    CHECK(fx_rc_open(s->fx, &s->cl, &o) == 0);
    CHECK(fx_rc_connect(&s->cl, "rnr/c", "rnr/s") == 0);
    for (unsigned m = 0; m < 3; m++) {
        memset(s->cl.buf + 4096u * m, (int)(0x40 + m), 3000);
        CHECK(fx_post(&s->cl, IBV_WR_SEND, m, 4096u * m, 3000, 0, IBV_SEND_SIGNALED) == 0);
    }
    for (unsigned m = 0; m < 3; m++) {
        struct ibv_wc wc;
        CHECK(fx_poll_one(s->cl.scq, &wc) == 1);
        s->st[s->n_send++] = wc.status;
        if (wc.status != IBV_WC_SUCCESS)
            break;
    }
    fx_barrier(s->fx, "rnr/end", "client", "server");
    fx_rc_close(&s->cl);
}

static void rnr_server(void *arg)
{
    struct rnr_st *s = arg;
    struct fx_rc_opts o;
    fx_rc_default_opts(&o);
    o.min_rnr_timer = 1; /* 10 us (IBA Table 45) */
    CHECK(fx_rc_open(s->fx, &s->srv, &o) == 0);
    struct ibv_srq *srq = make_srq(&s->srv, 8, 1);
    CHECK(srq != NULL);
    CHECK(fx_rc_open_shared(&s->q, &s->srv, srq) == 0);
    CHECK(fx_rc_connect(&s->q, "rnr/s", "rnr/c") == 0);
    if (s->post_after_ps) {
        sim_proc_sleep(s->post_after_ps);
        for (unsigned i = 0; i < 3; i++)
            CHECK(post_srq(srq, &s->srv, i, 4096u * i, 4096) == 0);
        s->data_ok = true;
        for (unsigned i = 0; i < 3; i++) {
            struct ibv_wc wc;
            CHECK(fx_poll_one(s->srv.rcq, &wc) == 1);
            if (wc.status != IBV_WC_SUCCESS || wc.wr_id != i || wc.byte_len != 3000 ||
                wc.qp_num != s->q.qp->qp_num || s->srv.buf[4096u * i] != 0x40 + i ||
                s->srv.buf[4096u * i + 2999] != 0x40 + i)
                s->data_ok = false;
            s->n_recv++;
        }
    }
    fx_barrier(s->fx, "rnr/end", "server", "client");
    fx_rc_close(&s->q);
    CHECK(ibv_destroy_srq(srq) == 0);
    fx_rc_close(&s->srv);
}

static void test_rnr(uint8_t rnr_retry, sim_time_t post_after_ps)
{
    struct rnr_st s = {
        .fx = fx_create(4, NULL), .rnr_retry = rnr_retry, .post_after_ps = post_after_ps};
    CHECK(fx_run_pair(s.fx, "server", rnr_server, "client", rnr_client, &s) == SIM_RUN_DONE);
    uint64_t naks = nic_get_counters(s.fx->nic[0])->naks_tx;
    if (post_after_ps) {
        CHECK_EQ_U64(s.n_send, 3);
        for (unsigned i = 0; i < 3; i++)
            CHECK_EQ_U64(s.st[i], IBV_WC_SUCCESS);
        CHECK_EQ_U64(s.n_recv, 3);
        CHECK(s.data_ok);
        CHECK(naks >= 3); /* ~one RNR NAK per 10 us until the receives appear */
        printf("RNR on an empty SRQ (rnr_retry %u): %" PRIu64 " RNR NAKs, then received\n",
               rnr_retry, naks);
    } else {
        CHECK_EQ_U64(s.n_send, 1);
        CHECK_EQ_U64(s.st[0], IBV_WC_RNR_RETRY_EXC_ERR);
        CHECK_EQ_U64(naks, rnr_retry + 1u);
    }
    fx_destroy(s.fx);
}

/* ---------------------------------------------------------------- UD on an SRQ */

struct ud_st {
    struct fx *fx;
    struct fx_rc srv, q, cl;
    unsigned n_recv;
    bool ok;
};

static void ud_client(void *arg)
{
    struct ud_st *s = arg;
    struct fx_rc_opts o;
    fx_rc_default_opts(&o);
    o.qp_type = IBV_QPT_UD;
    CHECK(fx_rc_open(s->fx, &s->cl, &o) == 0);
    CHECK(fx_rc_connect(&s->cl, "ud/c", "ud/s") == 0);
    for (unsigned m = 0; m < 2; m++) {
        memset(s->cl.buf, (int)(0x70 + m), 500);
        CHECK(fx_post(&s->cl, IBV_WR_SEND, m, 0, 500, 0, IBV_SEND_SIGNALED) == 0);
        struct ibv_wc wc;
        CHECK(fx_poll_one(s->cl.scq, &wc) == 1 && wc.status == IBV_WC_SUCCESS);
    }
    fx_barrier(s->fx, "ud/end", "client", "server");
    fx_rc_close(&s->cl);
}

static void ud_server(void *arg)
{
    struct ud_st *s = arg;
    struct fx_rc_opts o;
    fx_rc_default_opts(&o);
    o.qp_type = IBV_QPT_UD;
    CHECK(fx_rc_open(s->fx, &s->srv, &o) == 0);
    struct ibv_srq *srq = make_srq(&s->srv, 4, 1);
    CHECK(srq != NULL);
    for (unsigned i = 0; i < 2; i++)
        CHECK(post_srq(srq, &s->srv, i, 1024u * i, 1024) == 0);
    CHECK(fx_rc_open_shared(&s->q, &s->srv, srq) == 0);
    CHECK(fx_rc_connect(&s->q, "ud/s", "ud/c") == 0);
    s->ok = true;
    for (unsigned i = 0; i < 2; i++) {
        struct ibv_wc wc;
        CHECK(fx_poll_one(s->srv.rcq, &wc) == 1);
        if (wc.status != IBV_WC_SUCCESS || wc.wr_id != i || wc.byte_len != 540 ||
            !(wc.wc_flags & IBV_WC_GRH) || wc.qp_num != s->q.qp->qp_num ||
            wc.src_qp != s->cl.local.qpn || s->srv.buf[1024u * i + 40] != 0x70 + i ||
            s->srv.buf[1024u * i + 20] != 0x45)
            s->ok = false;
        s->n_recv++;
    }
    fx_barrier(s->fx, "ud/end", "server", "client");
    fx_rc_close(&s->q);
    CHECK(ibv_destroy_srq(srq) == 0);
    fx_rc_close(&s->srv);
}

static void test_ud(void)
{
    struct ud_st s = {.fx = fx_create(5, NULL)};
    CHECK(fx_run_pair(s.fx, "server", ud_server, "client", ud_client, &s) == SIM_RUN_DONE);
    CHECK_EQ_U64(s.n_recv, 2);
    CHECK(s.ok);
    fx_destroy(s.fx);
}

int main(void)
{
    test_api();
    test_shared();
    test_limit();
    test_rnr(7, 35 * SIM_US);
    test_rnr(2, 0);
    test_ud();
    return test_summary();
}
