/* RC retries at the verbs level:
 *
 *  - retry exhaustion: with every packet to the peer lost (100% loss), or
 *    with the peer's QP gone, the oldest WR completes with
 *    IBV_WC_RETRY_EXC_ERR after (retry_cnt + 1) local ACK timeouts of
 *    4.096 us * 2^timeout each, every later WR with IBV_WC_WR_FLUSH_ERR,
 *    and the QP is in ERR;
 *  - RNR: a SEND that finds no receive is NAKed (RNR, the responder's
 *    min_rnr_timer) and retried; posted later, the receive gets it;
 *    rnr_retry 0 fails at the first RNR NAK with IBV_WC_RNR_RETRY_EXC_ERR,
 *    rnr_retry 2 after three NAKs, rnr_retry 7 never gives up. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "fixture.h"
#include "test.h"

enum { RETRY_CNT = 2, TIMEOUT = 5 }; /* 4.096 us * 32 = 131 us */

static sim_time_t timeout_ps(unsigned t)
{
    return (sim_time_t)4096 * SIM_NS << t;
}

struct st {
    struct fx *fx;
    struct fx_rc client, server;
    struct fx_rc_opts copts, sopts;
    /* scenario knobs */
    bool lose_all, peer_gone;
    sim_time_t post_recv_after_ps; /* 0: never */
    /* observations */
    struct ibv_wc wc[3];
    int n_wc;
    sim_time_t elapsed_ps;
    enum ibv_qp_state final_state;
    uint64_t recv_wr_id;
    uint32_t recv_len;
    bool recv_ok, bytes_ok, post_in_err_flushed;
};

static void client(void *arg)
{
    struct st *s = arg;
    struct fx_rc *rc = &s->client;
    CHECK(fx_rc_open(s->fx, rc, &s->copts) == 0);
    CHECK(fx_rc_connect(rc, "rt/client", "rt/server") == 0);
    fx_barrier(s->fx, "rt/ready", "client", "server");
    if (s->lose_all)
        fx_set_loss(s->fx, 1, 1.0); /* the peer hears nothing any more */
    for (unsigned i = 0; i < 3000; i++)
        rc->buf[i] = (uint8_t)(i * 7 + 1);
    sim_time_t t0 = sim_now(s->fx->sim);
    /* RNR and peer-gone runs start with a SEND (it needs a receive), the
     * 100%-loss run with a WRITE; two WRITEs follow */
    enum ibv_wr_opcode first = s->lose_all ? IBV_WR_RDMA_WRITE : IBV_WR_SEND;
    CHECK(fx_post(rc, first, 1, 0, 3000, 0, IBV_SEND_SIGNALED) == 0);
    CHECK(fx_post(rc, IBV_WR_RDMA_WRITE, 2, 0, 64, 4096, 0) == 0); /* unsignalled */
    CHECK(fx_post(rc, IBV_WR_RDMA_WRITE, 3, 0, 64, 8192, IBV_SEND_SIGNALED) == 0);
    for (s->n_wc = 0; s->n_wc < 3; s->n_wc++) {
        if (fx_poll_one(rc->scq, &s->wc[s->n_wc]) != 1)
            break;
        if (s->wc[0].status == IBV_WC_SUCCESS && s->n_wc == 1)
            break; /* success: WR 2 is unsignalled, WR 3 completes next */
        if (s->n_wc == 0)
            s->elapsed_ps = sim_now(s->fx->sim) - t0;
    }
    struct ibv_qp_attr qa;
    struct ibv_qp_init_attr qia;
    CHECK(ibv_query_qp(rc->qp, &qa, IBV_QP_STATE, &qia) == 0);
    s->final_state = qa.qp_state;
    if (qa.qp_state == IBV_QPS_ERR) {
        /* a WR posted in ERR is accepted and flushed */
        struct ibv_wc wc;
        CHECK(fx_post(rc, IBV_WR_RDMA_WRITE, 4, 0, 8, 0, IBV_SEND_SIGNALED) == 0);
        s->post_in_err_flushed =
            fx_poll_one(rc->scq, &wc) == 1 && wc.wr_id == 4 && wc.status == IBV_WC_WR_FLUSH_ERR;
    }
    fx_barrier(s->fx, "rt/end", "client", "server");
}

static void server(void *arg)
{
    struct st *s = arg;
    struct fx_rc *rc = &s->server;
    CHECK(fx_rc_open(s->fx, rc, &s->sopts) == 0);
    CHECK(fx_rc_connect(rc, "rt/server", "rt/client") == 0);
    if (s->peer_gone) {
        CHECK(ibv_destroy_qp(rc->qp) == 0);
        rc->qp = NULL;
    }
    fx_barrier(s->fx, "rt/ready", "server", "client");
    if (s->post_recv_after_ps) {
        sim_proc_sleep(s->post_recv_after_ps);
        CHECK(fx_post_recv(rc, 77, 65536, 4096) == 0);
        struct ibv_wc wc;
        if (fx_poll_one(rc->rcq, &wc) == 1) {
            s->recv_ok = wc.status == IBV_WC_SUCCESS;
            s->recv_wr_id = wc.wr_id;
            s->recv_len = wc.byte_len;
            bool same = true;
            for (unsigned i = 0; i < 3000; i++)
                same &= rc->buf[65536 + i] == (uint8_t)(i * 7 + 1);
            s->bytes_ok = same;
        }
    }
    fx_barrier(s->fx, "rt/end", "server", "client");
}

static void setup(struct st *s, uint64_t seed)
{
    memset(s, 0, sizeof(*s));
    s->fx = fx_create(seed, NULL);
    fx_rc_default_opts(&s->copts);
    s->copts.timeout = TIMEOUT;
    s->copts.retry_cnt = RETRY_CNT;
    s->sopts = s->copts;
    s->sopts.min_rnr_timer = 1; /* IBA Table 45: 0.01 ms */
}

static void run(struct st *s)
{
    CHECK(fx_run_pair(s->fx, "client", client, "server", server, s) == SIM_RUN_DONE);
}

/* The three completions of a failed QP: `first` then two flushes, QP in ERR. */
static void expect_failed(struct st *s, enum ibv_wc_status first)
{
    CHECK_EQ_U64(s->n_wc, 3);
    CHECK_EQ_U64(s->wc[0].wr_id, 1);
    CHECK_EQ_U64(s->wc[0].status, first);
    CHECK_EQ_U64(s->wc[1].wr_id, 2); /* unsignalled, but flushed WRs always complete */
    CHECK_EQ_U64(s->wc[1].status, IBV_WC_WR_FLUSH_ERR);
    CHECK_EQ_U64(s->wc[2].wr_id, 3);
    CHECK_EQ_U64(s->wc[2].status, IBV_WC_WR_FLUSH_ERR);
    CHECK_EQ_U64(s->final_state, IBV_QPS_ERR);
    CHECK(s->post_in_err_flushed);
}

static void test_retry_exhausted_loss(void)
{
    struct st s;
    setup(&s, 1);
    s.lose_all = true;
    run(&s);
    expect_failed(&s, IBV_WC_RETRY_EXC_ERR);
    CHECK_EQ_U64(s.wc[0].vendor_err, 0x15); /* mlx5 syndrome: transport retry exceeded */
    /* retry_cnt + 1 timeouts, each restarted by the retransmission */
    CHECK(s.elapsed_ps >= (RETRY_CNT + 1) * timeout_ps(TIMEOUT));
    CHECK(s.elapsed_ps < (RETRY_CNT + 2) * timeout_ps(TIMEOUT));
    /* every transmission of the three WRITEs was lost: 3 packets per round
     * (3000 B at 4 KiB MTU is one packet), 1 + retry_cnt rounds */
    CHECK_EQ_U64(s.fx->dropped[1], 3 * (RETRY_CNT + 1));
    printf("100%% loss: RETRY_EXC_ERR after %.1f us (timeout %.1f us, retry_cnt %u)\n",
           sim_ps_to_ns(s.elapsed_ps) / 1e3, sim_ps_to_ns(timeout_ps(TIMEOUT)) / 1e3, RETRY_CNT);
    fx_destroy(s.fx);
}

static void test_retry_exhausted_peer_gone(void)
{
    struct st s;
    setup(&s, 2);
    s.peer_gone = true;
    run(&s);
    expect_failed(&s, IBV_WC_RETRY_EXC_ERR);
    CHECK(s.elapsed_ps >= (RETRY_CNT + 1) * timeout_ps(TIMEOUT));
    /* the server NIC dropped them: no such QP */
    CHECK(nic_get_counters(s.fx->nic[1])->rx_drops >= 3 * (RETRY_CNT + 1));
    CHECK_EQ_U64(s.fx->dropped[1], 0);
    fx_destroy(s.fx);
}

static void test_rnr_then_posted(uint8_t rnr_retry)
{
    struct st s;
    setup(&s, 3);
    s.copts.rnr_retry = rnr_retry;
    s.post_recv_after_ps = 35 * SIM_US; /* after about three 10 us RNR waits */
    run(&s);
    CHECK(s.n_wc >= 1);
    CHECK_EQ_U64(s.wc[0].wr_id, 1);
    CHECK_EQ_U64(s.wc[0].status, IBV_WC_SUCCESS);
    CHECK_EQ_U64(s.wc[1].wr_id, 3);
    CHECK_EQ_U64(s.wc[1].status, IBV_WC_SUCCESS);
    CHECK(s.elapsed_ps > 35 * SIM_US);
    CHECK(s.recv_ok);
    CHECK_EQ_U64(s.recv_wr_id, 77);
    CHECK_EQ_U64(s.recv_len, 3000);
    CHECK(s.bytes_ok);
    CHECK_EQ_U64(s.final_state, IBV_QPS_RTS);
    uint64_t naks = nic_get_counters(s.fx->nic[1])->naks_tx;
    CHECK(naks >= 3 && naks <= 4); /* one RNR NAK per 10 us wait */
    CHECK_EQ_U64(nic_get_counters(s.fx->nic[0])->naks_rx, naks);
    printf("RNR (rnr_retry %u): completed after %.1f us, %" PRIu64 " RNR NAKs\n", rnr_retry,
           sim_ps_to_ns(s.elapsed_ps) / 1e3, naks);
    fx_destroy(s.fx);
}

static void test_rnr_exhausted(uint8_t rnr_retry)
{
    struct st s;
    setup(&s, 4);
    s.copts.rnr_retry = rnr_retry;
    run(&s);
    expect_failed(&s, IBV_WC_RNR_RETRY_EXC_ERR);
    CHECK_EQ_U64(s.wc[0].vendor_err, 0x16);
    /* rnr_retry retries: rnr_retry + 1 NAKs and rnr_retry waits of 10 us */
    CHECK_EQ_U64(nic_get_counters(s.fx->nic[1])->naks_tx, rnr_retry + 1u);
    CHECK(s.elapsed_ps >= rnr_retry * 10 * SIM_US);
    CHECK(s.elapsed_ps < (rnr_retry + 1u) * 10 * SIM_US + 10 * SIM_US);
    fx_destroy(s.fx);
}

int main(void)
{
    test_retry_exhausted_loss();
    test_retry_exhausted_peer_gone();
    test_rnr_then_posted(7);
    test_rnr_then_posted(5);
    test_rnr_exhausted(0);
    test_rnr_exhausted(2);
    return test_summary();
}
