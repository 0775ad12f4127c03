/* The RNIC engines driven through sim/nic/nic.h (no verbs shim): loss
 * recovery (PSN sequence NAK + go back N, lost ACK + local ACK timeout,
 * retry exhaustion, lost read response), RNR NAK retry and exhaustion, ACK
 * coalescing, the atomic unit's serialisation, the max_rd_atomic limit,
 * solicited notification, CQ overflow, flushing, multi-SGE gather/scatter,
 * the QPN table and the MR checks.  Expected numbers are derived in the
 * comments from the parameters, not read back from the model. */
#include <stdio.h>
#include <string.h>

#include "nic_harness.h"
#include "sim/nic/opcode.h"
#include "test.h"

static int poll1(struct nic_cq *cq, struct ibv_wc *wc)
{
    return nic_cq_poll(cq, 1, wc);
}

static sim_time_t ack_timeout_ps(uint8_t t)
{
    return (sim_time_t)4096 * SIM_NS << t;
}

struct pair {
    struct nh *h;
    struct nh_ep a, b; /* a on node 0 (requester), b on node 1 */
};

static void pair_open(struct pair *p, const struct nh_conn *c, size_t bytes)
{
    p->h = nh_create(NULL);
    nh_ep_open(p->h, 0, &p->a, bytes, 256, 1024);
    nh_ep_open(p->h, 1, &p->b, bytes, 256, 1024);
    nh_ep_connect(&p->a, &p->b, c);
    nh_ep_connect(&p->b, &p->a, c);
}

static void pair_close(struct pair *p)
{
    nh_ep_close(&p->a);
    nh_ep_close(&p->b);
    nh_destroy(p->h);
}

/* One data packet lost: the responder NAKs once (PSN sequence error), the
 * requester goes back to it, the message lands intact. */
static void test_seq_nak_go_back_n(void)
{
    struct nh_conn c;
    nh_conn_default(&c);
    struct pair p;
    pair_open(&p, &c, 1 << 20);
    enum { LEN = 16 * 1024 }; /* 16 packets at MTU 1024, PSNs wrap at 0x1000000 */
    nh_fill(p.a.buf, LEN, 1);
    p.h->drop_node = 1;
    p.h->drop_opcode = IB_OPCODE_RC_RDMA_WRITE_MIDDLE;
    p.h->drop_psn = (c.psn + 4) & 0xffffff;
    p.h->drop_left = 1;
    CHECK(nh_post(&p.a, IBV_WR_RDMA_WRITE, 1, 0, LEN, &p.b, 4096, IBV_SEND_SIGNALED) == 0);
    nh_run_for(p.h, 100 * SIM_US);
    struct ibv_wc wc;
    CHECK(poll1(p.a.scq, &wc) == 1);
    CHECK_EQ_U64(wc.status, IBV_WC_SUCCESS);
    CHECK_EQ_U64(wc.wr_id, 1);
    CHECK(memcmp(p.b.buf + 4096, p.a.buf, LEN) == 0);
    CHECK_EQ_U64(p.h->dropped, 1);
    const struct nic_counters *ca = nic_get_counters(p.h->nic[0]);
    const struct nic_counters *cb = nic_get_counters(p.h->nic[1]);
    CHECK_EQ_U64(cb->naks_tx, 1); /* one NAK per gap */
    CHECK_EQ_U64(ca->naks_rx, 1);
    /* packets from 4 on sent again: more than 16 data packets (how many of
     * 5..15 had left when the NAK came back depends on the timing) */
    CHECK(ca->pkts_tx > 16 + 1);
    CHECK(cb->rx_drops >= 1);
    CHECK(poll1(p.a.scq, &wc) == 0);
    pair_close(&p);
}

/* The only ACK is lost: after the local ACK timeout the requester resends,
 * the responder sees a duplicate and ACKs again. */
static void test_lost_ack_timeout(void)
{
    struct nh_conn c;
    nh_conn_default(&c);
    c.timeout = 8; /* 4.096 us * 256 = 1048.576 us */
    struct pair p;
    pair_open(&p, &c, 1 << 16);
    p.h->drop_node = 0;
    p.h->drop_opcode = IB_OPCODE_RC_ACKNOWLEDGE;
    p.h->drop_left = 1;
    nh_fill(p.a.buf, 64, 2);
    sim_time_t t0 = sim_now(p.h->sim);
    CHECK(nh_post(&p.a, IBV_WR_RDMA_WRITE, 7, 0, 64, &p.b, 0, IBV_SEND_SIGNALED) == 0);
    struct ibv_wc wc;
    nh_run_for(p.h, ack_timeout_ps(8) - 10 * SIM_US);
    CHECK(poll1(p.a.scq, &wc) == 0); /* not before the timeout */
    nh_run_for(p.h, 20 * SIM_US);
    CHECK(poll1(p.a.scq, &wc) == 1);
    CHECK_EQ_U64(wc.status, IBV_WC_SUCCESS);
    CHECK(sim_now(p.h->sim) - t0 >= ack_timeout_ps(8));
    CHECK(memcmp(p.b.buf, p.a.buf, 64) == 0);
    CHECK_EQ_U64(nic_get_counters(p.h->nic[1])->acks_tx, 2);
    pair_close(&p);
}

/* Nothing reaches the responder: retry_cnt resends, then RETRY_EXC_ERR on
 * the WQE, the QP in ERR and the WQE behind it flushed. */
static void test_retry_exceeded(void)
{
    struct nh_conn c;
    nh_conn_default(&c);
    c.timeout = 4; /* 65.536 us */
    c.retry_cnt = 2;
    struct pair p;
    pair_open(&p, &c, 1 << 16);
    p.h->drop_node = 1;
    p.h->drop_left = 1000;
    CHECK(nh_post(&p.a, IBV_WR_RDMA_WRITE, 1, 0, 64, &p.b, 0, 0) == 0); /* unsignalled */
    CHECK(nh_post(&p.a, IBV_WR_RDMA_WRITE, 2, 64, 64, &p.b, 64, IBV_SEND_SIGNALED) == 0);
    struct ibv_wc wc;
    /* 1 + retry_cnt transmissions, each waited out: 3 * 65.536 = 196.6 us */
    nh_run_for(p.h, 3 * ack_timeout_ps(4) - 5 * SIM_US);
    CHECK(poll1(p.a.scq, &wc) == 0);
    nh_run_for(p.h, 20 * SIM_US);
    CHECK(poll1(p.a.scq, &wc) == 1);
    CHECK_EQ_U64(wc.wr_id, 1); /* errors complete even unsignalled WRs */
    CHECK_EQ_U64(wc.status, IBV_WC_RETRY_EXC_ERR);
    CHECK(poll1(p.a.scq, &wc) == 1);
    CHECK_EQ_U64(wc.wr_id, 2);
    CHECK_EQ_U64(wc.status, IBV_WC_WR_FLUSH_ERR);
    CHECK_EQ_U64(p.a.qp->state, IBV_QPS_ERR);
    CHECK_EQ_U64(p.h->dropped, 2 * 3); /* both WRs, three times */
    pair_close(&p);
}

/* SEND without a posted receive: RNR NAK, retried after the RNR timer;
 * with rnr_retry 1 the second RNR NAK ends it (RNR_RETRY_EXC_ERR). */
static void test_rnr_exhausted(void)
{
    struct nh_conn c;
    nh_conn_default(&c);
    c.rnr_retry = 1;
    c.min_rnr_timer = 1; /* 10 us */
    struct pair p;
    pair_open(&p, &c, 1 << 16);
    CHECK(nh_post(&p.a, IBV_WR_SEND, 3, 0, 100, NULL, 0, IBV_SEND_SIGNALED) == 0);
    struct ibv_wc wc;
    nh_run_for(p.h, 9 * SIM_US);
    CHECK(poll1(p.a.scq, &wc) == 0); /* still waiting out the first RNR timer */
    nh_run_for(p.h, 100 * SIM_US);
    CHECK(poll1(p.a.scq, &wc) == 1);
    CHECK_EQ_U64(wc.status, IBV_WC_RNR_RETRY_EXC_ERR);
    CHECK_EQ_U64(nic_get_counters(p.h->nic[1])->naks_tx, 2);
    pair_close(&p);
}

static void post_recv_cb(struct sim *sim, void *a, void *b)
{
    (void)sim;
    (void)b;
    struct nh_ep *e = a;
    CHECK(nh_post_recv(e, 99, 8192, 4096) == 0);
}

/* rnr_retry 7 retries forever: the receive posted 35 us later is used by
 * the fourth attempt (10 us RNR timer). */
static void test_rnr_infinite(void)
{
    struct nh_conn c;
    nh_conn_default(&c);
    c.rnr_retry = 7;
    c.min_rnr_timer = 1;
    struct pair p;
    pair_open(&p, &c, 1 << 16);
    nh_fill(p.a.buf, 3000, 3);
    sim_time_t t0 = sim_now(p.h->sim);
    CHECK(nh_post(&p.a, IBV_WR_SEND, 4, 0, 3000, NULL, 0, IBV_SEND_SIGNALED) == 0);
    sim_call_in(p.h->sim, 35 * SIM_US, post_recv_cb, &p.b, NULL);
    nh_run_for(p.h, 200 * SIM_US);
    struct ibv_wc wc;
    CHECK(poll1(p.a.scq, &wc) == 1);
    CHECK_EQ_U64(wc.status, IBV_WC_SUCCESS);
    CHECK(poll1(p.b.rcq, &wc) == 1);
    CHECK_EQ_U64(wc.status, IBV_WC_SUCCESS);
    CHECK_EQ_U64(wc.wr_id, 99);
    CHECK_EQ_U64(wc.byte_len, 3000);
    CHECK_EQ_U64(wc.src_qp, p.a.qp->qpn);
    CHECK(memcmp(p.b.buf + 8192, p.a.buf, 3000) == 0);
    CHECK(sim_now(p.h->sim) - t0 > 35 * SIM_US);
    uint64_t naks = nic_get_counters(p.h->nic[1])->naks_tx;
    CHECK(naks >= 3 && naks <= 4);
    pair_close(&p);
}

/* A READ of 8 packets loses its 4th response: the requester asks again
 * from there and the data are complete. */
static void test_read_lost_response(void)
{
    struct nh_conn c;
    nh_conn_default(&c);
    struct pair p;
    pair_open(&p, &c, 1 << 16);
    nh_fill(p.b.buf + 16384, 8192, 4);
    p.h->drop_node = 0;
    p.h->drop_psn = (c.psn + 3) & 0xffffff;
    p.h->drop_left = 1;
    CHECK(nh_post(&p.a, IBV_WR_RDMA_READ, 5, 0, 8192, &p.b, 16384, IBV_SEND_SIGNALED) == 0);
    nh_run_for(p.h, 100 * SIM_US);
    struct ibv_wc wc;
    CHECK(poll1(p.a.scq, &wc) == 1);
    CHECK_EQ_U64(wc.status, IBV_WC_SUCCESS);
    CHECK_EQ_U64(wc.opcode, IBV_WC_RDMA_READ);
    CHECK_EQ_U64(wc.byte_len, 8192);
    CHECK(memcmp(p.a.buf, p.b.buf + 16384, 8192) == 0);
    CHECK_EQ_U64(p.h->dropped, 1);
    pair_close(&p);
}

/* 64 packets of one WRITE: an ACK every ack_every_pkts (16) packets, the
 * last one coinciding with the AckReq of the last packet: 4 ACKs. */
static void test_ack_coalescing(void)
{
    struct nh_conn c;
    nh_conn_default(&c);
    struct pair p;
    pair_open(&p, &c, 1 << 17);
    CHECK(nh_post(&p.a, IBV_WR_RDMA_WRITE, 1, 0, 64 * 1024, &p.b, 0, IBV_SEND_SIGNALED) == 0);
    nh_run_for(p.h, 100 * SIM_US);
    struct ibv_wc wc;
    CHECK(poll1(p.a.scq, &wc) == 1);
    CHECK_EQ_U64(wc.status, IBV_WC_SUCCESS);
    CHECK_EQ_U64(nic_get_counters(p.h->nic[1])->acks_tx, 64 / 16);
    CHECK_EQ_U64(nic_get_counters(p.h->nic[0])->pkts_tx, 64);
    pair_close(&p);
}

/* 16 FETCH_ADDs of 1 on one address: each returns the previous count, and
 * the atomic unit runs them one at a time (DMA read + atomic_proc + DMA
 * write each). */
static void test_atomics(void)
{
    struct nh_conn c;
    nh_conn_default(&c);
    c.max_rd_atomic = 16;
    struct pair p;
    pair_open(&p, &c, 1 << 16);
    uint64_t v = 1000;
    memcpy(p.b.buf + 64, &v, 8);
    sim_time_t t0 = sim_now(p.h->sim);
    for (unsigned i = 0; i < 16; i++) {
        struct nic_send_wqe w;
        memset(&w, 0, offsetof(struct nic_send_wqe, inline_data));
        w.wr_id = i;
        w.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
        w.num_sge = 1;
        w.sge[0] = (struct nic_sge){(uintptr_t)(p.a.buf + 8 * i), 8, p.a.mr->lkey};
        w.length = 8;
        w.remote_addr = (uintptr_t)(p.b.buf + 64);
        w.rkey = p.b.mr->rkey;
        w.compare_add = 1;
        w.signaled = true;
        CHECK(nic_sq_append(p.a.qp, &w) == 0);
    }
    nic_sq_doorbell(p.a.qp);
    nh_run_for(p.h, 200 * SIM_US);
    struct ibv_wc wc[16];
    CHECK_EQ_U64(nic_cq_poll(p.a.scq, 16, wc), 16);
    sim_time_t last = 0;
    for (unsigned i = 0; i < 16; i++) {
        CHECK_EQ_U64(wc[i].status, IBV_WC_SUCCESS);
        CHECK_EQ_U64(wc[i].wr_id, i);
        CHECK_EQ_U64(wc[i].opcode, IBV_WC_FETCH_ADD);
        uint64_t old;
        memcpy(&old, p.a.buf + 8 * i, 8);
        CHECK_EQ_U64(old, 1000 + i);
    }
    memcpy(&v, p.b.buf + 64, 8);
    CHECK_EQ_U64(v, 1016);
    (void)last;
    /* misaligned: invalid request NAK -> REM_INV_REQ_ERR */
    CHECK(nh_post(&p.a, IBV_WR_ATOMIC_FETCH_AND_ADD, 77, 0, 8, &p.b, 65, IBV_SEND_SIGNALED) == 0);
    nh_run_for(p.h, 50 * SIM_US);
    CHECK(poll1(p.a.scq, wc) == 1);
    CHECK_EQ_U64(wc[0].status, IBV_WC_REM_INV_REQ_ERR);
    (void)t0;
    pair_close(&p);
}

/* The atomic unit (atomic.c) serialises atomics on one address - each a
 * whole PCIe read-modify-write (read latency + atomic_proc + write
 * latency) at the responder - and overlaps atomics on different addresses. */
static sim_time_t sixteen_atomics(bool same_address)
{
    struct nh_conn c;
    nh_conn_default(&c);
    c.max_rd_atomic = 16;
    struct pair p;
    pair_open(&p, &c, 1 << 16);
    sim_time_t t0 = sim_now(p.h->sim);
    for (unsigned i = 0; i < 16; i++) {
        struct nic_send_wqe w;
        memset(&w, 0, offsetof(struct nic_send_wqe, inline_data));
        w.wr_id = i;
        w.num_sge = 1;
        w.sge[0] = (struct nic_sge){(uintptr_t)(p.a.buf + 8 * i), 8, p.a.mr->lkey};
        w.length = 8;
        w.rkey = p.b.mr->rkey;
        if (same_address) {
            w.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
            w.remote_addr = (uintptr_t)p.b.buf;
            w.compare_add = i + 1;
        } else {
            w.opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
            w.remote_addr = (uintptr_t)(p.b.buf + 8 * i);
            w.compare_add = 0;
            w.swap = i + 1;
        }
        w.signaled = i == 15;
        CHECK(nic_sq_append(p.a.qp, &w) == 0);
    }
    nic_sq_doorbell(p.a.qp);
    struct ibv_wc wc;
    while (poll1(p.a.scq, &wc) == 0)
        nh_run_for(p.h, 1 * SIM_US);
    sim_time_t dt = sim_now(p.h->sim) - t0;
    CHECK_EQ_U64(wc.status, IBV_WC_SUCCESS);
    if (same_address) {
        uint64_t v, orig_sum = 0;
        memcpy(&v, p.b.buf, 8);
        CHECK_EQ_U64(v, 16 * 17 / 2);
        /* each FAA returned the sum of the earlier ones: 0, 1, 3, 6, ... */
        for (unsigned i = 0; i < 16; i++) {
            uint64_t o;
            memcpy(&o, p.a.buf + 8 * i, 8);
            orig_sum += o;
        }
        CHECK_EQ_U64(orig_sum, 680); /* sum over i of i(i+1)/2, i = 0..15 = 15*16*17/6 */
    } else {
        for (unsigned i = 0; i < 16; i++) {
            uint64_t v;
            memcpy(&v, p.b.buf + 8 * i, 8);
            CHECK_EQ_U64(v, i + 1);
        }
    }
    pair_close(&p);
    return dt;
}

static void test_atomic_unit_time(void)
{
    struct nic_params np;
    nic_params_default(&np);
    struct pcie_params pp;
    pcie_params_default(&pp);
    sim_time_t rmw = pp.read_latency_ps + np.atomic_proc_ps + pp.write_latency_ps;
    sim_time_t same = sixteen_atomics(true), diff = sixteen_atomics(false);
    CHECK(same >= 16 * rmw);
    CHECK(diff < same / 2); /* overlapped (the send engine issues one per wqe_proc) */
    printf("16 FAA on one address: %.2f us; 16 CAS on different addresses: %.2f us\n",
           sim_ps_to_us(same), sim_ps_to_us(diff));
}

/* Four small READs: with max_rd_atomic 1 they go one round trip after the
 * other; with 4 they overlap. */
static sim_time_t four_reads(uint8_t max_rd)
{
    struct nh_conn c;
    nh_conn_default(&c);
    c.max_rd_atomic = max_rd;
    struct pair p;
    pair_open(&p, &c, 1 << 16);
    /* warm the QP-context and translation caches of both NICs first */
    struct ibv_wc wc;
    CHECK(nh_append(&p.a, IBV_WR_RDMA_READ, 99, 0, 64, &p.b, 0, IBV_SEND_SIGNALED) == 0);
    nic_sq_doorbell(p.a.qp);
    while (poll1(p.a.scq, &wc) == 0)
        nh_run_for(p.h, 100 * SIM_NS);
    sim_time_t t0 = sim_now(p.h->sim);
    for (unsigned i = 0; i < 4; i++)
        CHECK(nh_append(&p.a, IBV_WR_RDMA_READ, i, 64 * i, 64, &p.b, 64 * i,
                        i == 3 ? IBV_SEND_SIGNALED : 0) == 0);
    nic_sq_doorbell(p.a.qp);
    while (poll1(p.a.scq, &wc) == 0)
        nh_run_for(p.h, 100 * SIM_NS);
    CHECK_EQ_U64(wc.wr_id, 3);
    sim_time_t dt = sim_now(p.h->sim) - t0;
    pair_close(&p);
    return dt;
}

static void test_rd_atomic_limit(void)
{
    sim_time_t t1 = four_reads(1), t4 = four_reads(4);
    printf("4 READs of 64 B: max_rd_atomic 1: %.2f us, 4: %.2f us\n", sim_ps_to_us(t1),
           sim_ps_to_us(t4));
    CHECK(t1 > 2 * t4);
}

static unsigned notify_count;
static void count_notify(struct sim *sim, void *a, void *b)
{
    (void)sim;
    (void)a;
    (void)b;
    notify_count++;
}

/* Solicited-only arm: a SEND without SE completes without an event; one
 * with IBV_SEND_SOLICITED fires it, once. */
static void test_solicited_notify(void)
{
    struct nh_conn c;
    nh_conn_default(&c);
    struct pair p;
    pair_open(&p, &c, 1 << 16);
    nic_cq_set_notify(p.b.rcq, count_notify, NULL, NULL);
    notify_count = 0;
    for (unsigned i = 0; i < 3; i++)
        CHECK(nh_post_recv(&p.b, i, 1024 * i, 1024) == 0);
    nic_cq_arm(p.b.rcq, true);
    CHECK(nh_post(&p.a, IBV_WR_SEND, 1, 0, 10, NULL, 0, 0) == 0);
    nh_run_for(p.h, 20 * SIM_US);
    struct ibv_wc wc;
    CHECK(poll1(p.b.rcq, &wc) == 1);
    CHECK_EQ_U64(notify_count, 0);
    CHECK(nh_post(&p.a, IBV_WR_SEND, 2, 0, 10, NULL, 0, IBV_SEND_SOLICITED) == 0);
    CHECK(nh_post(&p.a, IBV_WR_SEND, 3, 0, 10, NULL, 0, IBV_SEND_SOLICITED) == 0);
    nh_run_for(p.h, 20 * SIM_US);
    CHECK_EQ_U64(notify_count, 1); /* one per arm */
    struct ibv_wc wcs[4];
    CHECK_EQ_U64(nic_cq_poll(p.b.rcq, 4, wcs), 2);
    pair_close(&p);
}

/* A CQ of 2 entries and 3 signalled WRs: 2 CQEs and the overflow flag. */
static void test_cq_overflow(void)
{
    struct nh *h = nh_create(NULL);
    struct nh_ep a, b;
    nh_ep_open(h, 0, &a, 1 << 16, 16, 2);
    nh_ep_open(h, 1, &b, 1 << 16, 16, 2);
    struct nh_conn c;
    nh_conn_default(&c);
    nh_ep_connect(&a, &b, &c);
    nh_ep_connect(&b, &a, &c);
    for (unsigned i = 0; i < 3; i++)
        CHECK(nh_post(&a, IBV_WR_RDMA_WRITE, i, 0, 8, &b, 0, IBV_SEND_SIGNALED) == 0);
    nh_run_for(h, 50 * SIM_US);
    struct ibv_wc wc[4];
    CHECK_EQ_U64(nic_cq_poll(a.scq, 4, wc), 2);
    CHECK(a.scq->overflowed);
    nh_ep_close(&a);
    nh_ep_close(&b);
    nh_destroy(h);
}

/* Moving to ERR flushes posted receives in order; a receive posted in ERR
 * is flushed too. */
static void test_flush_recv(void)
{
    struct nh_conn c;
    nh_conn_default(&c);
    struct pair p;
    pair_open(&p, &c, 1 << 16);
    for (unsigned i = 0; i < 3; i++)
        CHECK(nh_post_recv(&p.b, 10 + i, 0, 64) == 0);
    nic_qp_to_error(p.b.qp);
    CHECK(nh_post_recv(&p.b, 13, 0, 64) == 0);
    nh_run_for(p.h, 10 * SIM_US);
    struct ibv_wc wc;
    for (unsigned i = 0; i < 4; i++) {
        CHECK(poll1(p.b.rcq, &wc) == 1);
        CHECK_EQ_U64(wc.wr_id, 10 + i);
        CHECK_EQ_U64(wc.status, IBV_WC_WR_FLUSH_ERR);
        CHECK_EQ_U64(wc.qp_num, p.b.qp->qpn);
    }
    CHECK(poll1(p.b.rcq, &wc) == 0);
    pair_close(&p);
}

/* A SEND gathered from 3 SGEs into a receive of 2 SGEs, MTU 256 so that
 * packets straddle SGE boundaries on both sides. */
static void test_multi_sge(void)
{
    struct nh_conn c;
    nh_conn_default(&c);
    c.mtu = IBV_MTU_256;
    struct pair p;
    pair_open(&p, &c, 1 << 16);
    nh_fill(p.a.buf, 4096, 9);
    struct nic_send_wqe w;
    memset(&w, 0, offsetof(struct nic_send_wqe, inline_data));
    w.wr_id = 1;
    w.opcode = IBV_WR_SEND;
    w.num_sge = 3;
    w.sge[0] = (struct nic_sge){(uintptr_t)(p.a.buf + 0), 300, p.a.mr->lkey};
    w.sge[1] = (struct nic_sge){(uintptr_t)(p.a.buf + 1000), 100, p.a.mr->lkey};
    w.sge[2] = (struct nic_sge){(uintptr_t)(p.a.buf + 2000), 500, p.a.mr->lkey};
    w.length = 900;
    w.signaled = true;
    struct nic_recv_wqe r;
    memset(&r, 0, sizeof(r));
    r.wr_id = 2;
    r.num_sge = 2;
    r.sge[0] = (struct nic_sge){(uintptr_t)(p.b.buf + 8192), 333, p.b.mr->lkey};
    r.sge[1] = (struct nic_sge){(uintptr_t)(p.b.buf + 12288), 1000, p.b.mr->lkey};
    r.length = 1333;
    CHECK(nic_rq_append(p.b.qp, &r) == 0);
    CHECK(nic_sq_append(p.a.qp, &w) == 0);
    nic_sq_doorbell(p.a.qp);
    nh_run_for(p.h, 50 * SIM_US);
    struct ibv_wc wc;
    CHECK(poll1(p.b.rcq, &wc) == 1);
    CHECK_EQ_U64(wc.byte_len, 900);
    uint8_t want[900], got[900];
    memcpy(want, p.a.buf, 300);
    memcpy(want + 300, p.a.buf + 1000, 100);
    memcpy(want + 400, p.a.buf + 2000, 500);
    memcpy(got, p.b.buf + 8192, 333);
    memcpy(got + 333, p.b.buf + 12288, 900 - 333);
    CHECK(memcmp(want, got, 900) == 0);
    CHECK_EQ_U64(p.b.buf[12288 + 900 - 333], 0);             /* nothing beyond */
    CHECK_EQ_U64(nic_get_counters(p.h->nic[0])->pkts_tx, 4); /* ceil(900 / 256) */
    pair_close(&p);
}

/* QPN table: lookups find live QPs only. */
static void test_qpn_table(void)
{
    struct nh *h = nh_create(NULL);
    struct nh_ep e;
    nh_ep_open(h, 0, &e, 4096, 4, 16);
    enum { N = 300 };
    struct nic_qp *qps[N];
    struct nic_qp_init init = {.qp_type = IBV_QPT_RC,
                               .pd = e.pd,
                               .send_cq = e.scq,
                               .recv_cq = e.rcq,
                               .cap = {.max_send_wr = 2, .max_recv_wr = 2}};
    for (unsigned i = 0; i < N; i++) {
        qps[i] = nic_qp_create(h->nic[0], &init);
        CHECK(qps[i] != NULL);
    }
    unsigned found = 0, distinct = 1;
    for (unsigned i = 0; i < N; i++) {
        found += nic_qp_lookup(h->nic[0], qps[i]->qpn) == qps[i];
        if (i)
            distinct += qps[i]->qpn != qps[i - 1]->qpn;
    }
    CHECK_EQ_U64(found, N);
    CHECK_EQ_U64(distinct, N);
    CHECK_EQ_U64(e.scq->n_qps, N + 1);
    CHECK_EQ_U64(nic_cq_destroy(e.scq), EBUSY);
    CHECK_EQ_U64(nic_pd_free(e.pd), EBUSY);
    uint32_t gone = qps[8]->qpn;
    for (unsigned i = 0; i < N; i += 2)
        CHECK(nic_qp_destroy(qps[i]) == 0);
    CHECK(nic_qp_lookup(h->nic[0], gone) == NULL);
    CHECK(nic_qp_lookup(h->nic[0], qps[9]->qpn) == qps[9]);
    for (unsigned i = 1; i < N; i += 2)
        CHECK(nic_qp_destroy(qps[i]) == 0);
    CHECK(nic_qp_lookup(h->nic[0], 0) == NULL);
    CHECK(nic_qp_lookup(h->nic[0], 1) == NULL);
    nh_ep_close(&e);
    nh_destroy(h);
}

/* MR table: keys, bounds, PD, access; a deregistered key is dead and its
 * slot's next MR gets a different key. */
static void test_mr_checks(void)
{
    struct nh *h = nh_create(NULL);
    struct nic *nic = h->nic[0];
    static uint8_t mem[8192];
    struct nic_pd *pd = nic_pd_alloc(nic), *pd2 = nic_pd_alloc(nic);
    struct nic_mr *mr =
        nic_mr_reg(pd, mem, 4096, 0x10000, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
    CHECK(mr && mr->lkey == mr->rkey);
    CHECK_EQ_U64(pd->n_users, 1);
    /* exercised through a QP: a READ whose local buffer lies outside the MR
     * fails with LOC_PROT_ERR before anything is sent */
    struct nh_ep a, b;
    nh_ep_open(h, 0, &a, 1 << 16, 8, 16);
    nh_ep_open(h, 1, &b, 1 << 16, 8, 16);
    struct nh_conn c;
    nh_conn_default(&c);
    nh_ep_connect(&a, &b, &c);
    nh_ep_connect(&b, &a, &c);
    CHECK(nh_post(&a, IBV_WR_RDMA_READ, 1, (1 << 16) - 8, 64, &b, 0, IBV_SEND_SIGNALED) == 0);
    nh_run_for(h, 20 * SIM_US);
    struct ibv_wc wc;
    CHECK(poll1(a.scq, &wc) == 1);
    CHECK_EQ_U64(wc.status, IBV_WC_LOC_PROT_ERR);
    CHECK_EQ_U64(nic_get_counters(nic)->pkts_tx, 0);
    /* dereg / re-reg */
    uint32_t old = mr->lkey;
    CHECK(nic_mr_dereg(mr) == 0);
    CHECK_EQ_U64(pd->n_users, 0);
    struct nic_mr *mr2 = nic_mr_reg(pd2, mem, 8192, (uintptr_t)mem, IBV_ACCESS_LOCAL_WRITE);
    CHECK(mr2 && mr2->lkey != old);
    CHECK(nic_mr_dereg(mr2) == 0);
    CHECK(nic_pd_free(pd) == 0);
    CHECK(nic_pd_free(pd2) == 0);
    nh_ep_close(&a);
    nh_ep_close(&b);
    nh_destroy(h);
}

/* Remote errors: a READ from an MR without REMOTE_READ -> REM_ACCESS_ERR
 * at the requester, both QPs in ERR. */
static void test_remote_access_read(void)
{
    struct nh_conn c;
    nh_conn_default(&c);
    struct pair p;
    pair_open(&p, &c, 1 << 16);
    struct nic_mr *ro =
        nic_mr_reg(p.b.pd, p.b.buf, 4096, (uintptr_t)p.b.buf, IBV_ACCESS_LOCAL_WRITE);
    struct nic_send_wqe w;
    memset(&w, 0, offsetof(struct nic_send_wqe, inline_data));
    w.wr_id = 1;
    w.opcode = IBV_WR_RDMA_READ;
    w.num_sge = 1;
    w.sge[0] = (struct nic_sge){(uintptr_t)p.a.buf, 64, p.a.mr->lkey};
    w.length = 64;
    w.remote_addr = (uintptr_t)p.b.buf;
    w.rkey = ro->rkey;
    w.signaled = true;
    CHECK(nic_sq_append(p.a.qp, &w) == 0);
    nic_sq_doorbell(p.a.qp);
    nh_run_for(p.h, 20 * SIM_US);
    struct ibv_wc wc;
    CHECK(poll1(p.a.scq, &wc) == 1);
    CHECK_EQ_U64(wc.status, IBV_WC_REM_ACCESS_ERR);
    CHECK_EQ_U64(p.a.qp->state, IBV_QPS_ERR);
    CHECK_EQ_U64(p.b.qp->state, IBV_QPS_ERR);
    nic_mr_dereg(ro);
    pair_close(&p);
}

/* A WRITE's ACK queued behind a 128-packet READ response at the responder:
 * it leaves right after the last response packet, the WRITE completes in
 * order after the READ, well before any timeout. */
static void test_ack_behind_read(void)
{
    struct nh_conn c;
    nh_conn_default(&c);
    struct pair p;
    pair_open(&p, &c, 1 << 18);
    nh_fill(p.b.buf, 128 * 1024, 6);
    sim_time_t t0 = sim_now(p.h->sim);
    CHECK(nh_append(&p.a, IBV_WR_RDMA_READ, 1, 0, 128 * 1024, &p.b, 0, IBV_SEND_SIGNALED) == 0);
    CHECK(nh_append(&p.a, IBV_WR_RDMA_WRITE, 2, 0, 64, &p.b, 200000, IBV_SEND_SIGNALED) == 0);
    nic_sq_doorbell(p.a.qp);
    struct ibv_wc wc;
    unsigned got = 0;
    while (got < 2 && sim_now(p.h->sim) - t0 < 100 * SIM_US) {
        nh_run_for(p.h, 100 * SIM_NS);
        while (poll1(p.a.scq, &wc) == 1) {
            CHECK_EQ_U64(wc.status, IBV_WC_SUCCESS);
            CHECK_EQ_U64(wc.wr_id, got + 1);
            got++;
        }
    }
    CHECK_EQ_U64(got, 2);
    /* 128 KiB at MTU 1024 is ~11 us on the wire; the responder fetches
     * it as 4 KiB host streams (pcie.read_fetch_rate), which with cold
     * caches and one READ in flight takes ~22 us in all - far from the
     * ~67 ms local ACK timeout */
    CHECK(sim_now(p.h->sim) - t0 < 30 * SIM_US);
    CHECK(memcmp(p.a.buf, p.b.buf, 128 * 1024) == 0);
    pair_close(&p);
}

/* Two FETCH_ADDs (+5, +7 on 100); the first one's ATOMIC ACKNOWLEDGE is
 * lost.  The second's ACK reaches beyond it (an implied NAK), so the
 * requester resends the first; the responder must not execute it again
 * but replay the saved original value (IBA 9.7.5.1.2): both complete with
 * the right old values and the target is 112, each add applied once. */
static void test_atomic_ack_lost_replayed(void)
{
    struct nh_conn c;
    nh_conn_default(&c);
    c.max_rd_atomic = 2;
    struct pair p;
    pair_open(&p, &c, 1 << 16);
    uint64_t v = 100;
    memcpy(p.b.buf + 64, &v, 8);
    p.h->drop_node = 0;
    p.h->drop_opcode = IB_OPCODE_RC_ATOMIC_ACKNOWLEDGE;
    p.h->drop_left = 1;
    for (unsigned i = 0; i < 2; i++) {
        struct nic_send_wqe w;
        memset(&w, 0, offsetof(struct nic_send_wqe, inline_data));
        w.wr_id = 1 + i;
        w.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
        w.num_sge = 1;
        w.sge[0] = (struct nic_sge){(uintptr_t)(p.a.buf + 8 * i), 8, p.a.mr->lkey};
        w.length = 8;
        w.signaled = true;
        w.remote_addr = (uintptr_t)(p.b.buf + 64);
        w.rkey = p.b.mr->rkey;
        w.compare_add = i ? 7 : 5;
        CHECK(nic_sq_append(p.a.qp, &w) == 0);
    }
    nic_sq_doorbell(p.a.qp);
    nh_run_for(p.h, 200 * SIM_US);
    struct ibv_wc wc[2];
    CHECK_EQ_U64(nic_cq_poll(p.a.scq, 2, wc), 2);
    CHECK_EQ_U64(wc[0].wr_id, 1);
    CHECK_EQ_U64(wc[0].status, IBV_WC_SUCCESS);
    CHECK_EQ_U64(wc[1].wr_id, 2);
    CHECK_EQ_U64(wc[1].status, IBV_WC_SUCCESS);
    uint64_t old0, old1;
    memcpy(&old0, p.a.buf, 8);
    memcpy(&old1, p.a.buf + 8, 8);
    CHECK_EQ_U64(old0, 100);
    CHECK_EQ_U64(old1, 105);
    memcpy(&v, p.b.buf + 64, 8);
    CHECK_EQ_U64(v, 112);
    CHECK_EQ_U64(p.h->dropped, 1);
    /* the requester sent more atomic requests than it had WRs: a resend */
    CHECK(nic_get_counters(p.h->nic[0])->pkts_tx > 2);
    /* and the responder executed two (two 8-byte reads, two writes back) */
    pair_close(&p);
}

/* A READ whose only response packet is lost, followed by a WRITE: the
 * WRITE's ACK acknowledges everything before it except the READ data, so
 * the requester resends the READ at once (no timeout) and both complete
 * in order. */
static void test_read_response_lost_implied_nak(void)
{
    struct nh_conn c;
    nh_conn_default(&c);
    c.max_rd_atomic = 1;
    struct pair p;
    pair_open(&p, &c, 1 << 16);
    nh_fill(p.b.buf + 4096, 512, 9);
    p.h->drop_node = 0;
    p.h->drop_opcode = IB_OPCODE_RC_RDMA_READ_RESPONSE_ONLY;
    p.h->drop_left = 1;
    sim_time_t t0 = sim_now(p.h->sim);
    CHECK(nh_append(&p.a, IBV_WR_RDMA_READ, 1, 0, 512, &p.b, 4096, IBV_SEND_SIGNALED) == 0);
    CHECK(nh_append(&p.a, IBV_WR_RDMA_WRITE, 2, 1024, 64, &p.b, 8192, IBV_SEND_SIGNALED) == 0);
    nic_sq_doorbell(p.a.qp);
    struct ibv_wc wc;
    unsigned got = 0;
    while (got < 2 && sim_now(p.h->sim) - t0 < 100 * SIM_US) {
        nh_run_for(p.h, 100 * SIM_NS);
        while (poll1(p.a.scq, &wc) == 1) {
            CHECK_EQ_U64(wc.status, IBV_WC_SUCCESS);
            CHECK_EQ_U64(wc.wr_id, got + 1);
            got++;
        }
    }
    CHECK_EQ_U64(got, 2);
    CHECK(sim_now(p.h->sim) - t0 < ack_timeout_ps(c.timeout)); /* not the timer */
    CHECK(memcmp(p.a.buf, p.b.buf + 4096, 512) == 0);
    CHECK_EQ_U64(p.h->dropped, 1);
    pair_close(&p);
}

int main(void)
{
    test_seq_nak_go_back_n();
    test_lost_ack_timeout();
    test_retry_exceeded();
    test_rnr_exhausted();
    test_rnr_infinite();
    test_read_lost_response();
    test_ack_coalescing();
    test_atomics();
    test_atomic_unit_time();
    test_rd_atomic_limit();
    test_solicited_notify();
    test_cq_overflow();
    test_flush_recv();
    test_multi_sge();
    test_qpn_table();
    test_mr_checks();
    test_remote_access_read();
    test_ack_behind_read();
    test_atomic_ack_lost_replayed();
    test_read_response_lost_implied_nak();
    return test_summary();
}
