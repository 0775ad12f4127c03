/* The "IB with adaptive routing" transport personality (nic.transport =
 * ib-ar; sim/nic/resp.c, docs/nic.md "IB adaptive routing") at the verbs
 * level, on an unmodified RC program:
 *
 *  - a stream of 16 KiB WRITE_WITH_IMMs (four packets each): the packets
 *    arrive out of order and are placed as they come (counters), no
 *    sequence NAK, nothing sent twice; yet every WR completes in order at
 *    both ends, every byte is right, and every receive CQE is visible only
 *    after its data; the last byte of a message - a polled flag - is seen
 *    before earlier bytes of it (the receiver's memory is watched at every
 *    DMA landing); with the plain IB transport none of that happens;
 *  - multi-packet SENDs land in their receives in order;
 *  - a READ and a FETCH_ADD behind a WRITE see the written bytes (messages
 *    still execute in order);
 *  - under 1% random loss every message arrives exactly once, in order,
 *    intact (holes recovered by sequence NAK / go back N);
 *  - the same seed gives the same run. */
#include <arpa/inet.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "fixture.h"
#include "test.h"

enum {
    MSG = 16384, /* four 4 KiB packets */
    N_MAX = 256,
    OUTSTANDING = 48,
    OFF_RW = 6u << 20,
};

static uint8_t pat(uint32_t seq, uint32_t i)
{
    return (uint8_t)((seq * 131u + i * 7u + (i >> 8)) % 255u + 1u); /* never 0 */
}

static void fill(uint8_t *p, uint32_t seq, uint32_t len)
{
    for (uint32_t i = 0; i < len; i++)
        p[i] = pat(seq, i);
}

static uint32_t missing(const uint8_t *p, uint32_t seq, uint32_t len)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < len; i++)
        n += p[i] != pat(seq, i);
    return n;
}

/* ---------------------------------------------------------------- the observer */

/* Message k lives at base + k * MSG with pattern k + 1; its last byte is
 * the flag.  At every landing: flags that just appeared (and whether the
 * bytes before them were all there), and receive CQEs that just appeared
 * (and whether their message was complete). */
struct obs {
    struct sim *sim;
    uint8_t *base;
    uint32_t n, next;
    bool seen[N_MAX];
    uint32_t flags_seen, flag_early;
    struct nic_cq *cq;
    uint64_t cq_seen;
    uint32_t cqe_checked, cqe_early;
};

static void observe(void *arg)
{
    struct obs *o = arg;
    for (uint32_t k = o->next; k < o->n && k < o->next + 8; k++) {
        const uint8_t *m = o->base + (size_t)k * MSG;
        if (o->seen[k] || m[MSG - 1] != pat(k + 1, MSG - 1))
            continue;
        o->seen[k] = true;
        o->flags_seen++;
        o->flag_early += missing(m, k + 1, MSG - 1) != 0;
    }
    while (o->next < o->n && o->seen[o->next])
        o->next++;
    while (o->cq && o->cq_seen < o->cq->prod) {
        const struct ibv_wc *wc = &o->cq->ring[o->cq_seen++ % o->cq->depth];
        if (wc->status != IBV_WC_SUCCESS)
            continue;
        uint32_t k = (uint32_t)wc->wr_id; /* receive i holds message i */
        o->cqe_checked++;
        o->cqe_early += missing(o->base + (size_t)k * MSG, k + 1, MSG) != 0;
    }
}

/* ---------------------------------------------------------------- streams */

struct run {
    struct fx *fx;
    struct fx_rc c, s;
    struct fx_watch w;
    struct obs o;
    uint32_t n;
    bool use_send;
    bool late_recv; /* the receiver posts its receives 30 us after the sender starts */
    uint8_t timeout;
    uint32_t send_in_order, recv_in_order, data_ok, dup_or_bad;
    sim_time_t t_end;
};

static struct fx_rc_opts ar_opts(const struct run *r)
{
    struct fx_rc_opts o;
    fx_rc_default_opts(&o);
    o.buf_bytes = 8u << 20;
    o.max_send_wr = 64;
    o.max_recv_wr = N_MAX;
    o.cq_depth = 2 * N_MAX;
    o.max_rd_atomic = 4;
    if (r->timeout)
        o.timeout = r->timeout;
    return o;
}

static void post_msg(struct run *r, uint32_t k)
{
    struct fx_rc *rc = &r->c;
    size_t off = (size_t)k * MSG;
    struct ibv_sge sge = {.addr = (uintptr_t)(rc->buf + off), .length = MSG, .lkey = rc->mr->lkey};
    struct ibv_send_wr wr = {.wr_id = k,
                             .sg_list = &sge,
                             .num_sge = 1,
                             .opcode = r->use_send ? IBV_WR_SEND : IBV_WR_RDMA_WRITE_WITH_IMM,
                             .send_flags = IBV_SEND_SIGNALED,
                             .imm_data = htonl(k)};
    wr.wr.rdma.remote_addr = rc->remote.addr + off;
    wr.wr.rdma.rkey = rc->remote.rkey;
    struct ibv_send_wr *bad = NULL;
    CHECK(ibv_post_send(rc->qp, &wr, &bad) == 0);
}

static void client(void *arg)
{
    struct run *r = arg;
    struct fx_rc *rc = &r->c;
    struct fx_rc_opts o = ar_opts(r);
    CHECK(fx_rc_open(r->fx, rc, &o) == 0);
    CHECK(fx_rc_connect(rc, "ar/c", "ar/s") == 0);
    for (uint32_t k = 0; k < r->n; k++)
        fill(rc->buf + (size_t)k * MSG, k + 1, MSG);
    fx_barrier(r->fx, "ar/ready", "c", "s");
    uint32_t posted = 0, done = 0;
    struct ibv_wc wc;
    while (done < r->n) {
        if (posted < r->n && posted - done < OUTSTANDING) {
            post_msg(r, posted++);
            continue;
        }
        CHECK(fx_poll_one(rc->scq, &wc) == 1);
        r->send_in_order += wc.status == IBV_WC_SUCCESS && wc.wr_id == done;
        done++;
    }
    fx_barrier(r->fx, "ar/end", "c", "s");
}

static void server(void *arg)
{
    struct run *r = arg;
    struct fx_rc *rc = &r->s;
    struct fx_rc_opts o = ar_opts(r);
    CHECK(fx_rc_open(r->fx, rc, &o) == 0);
    CHECK(fx_rc_connect(rc, "ar/s", "ar/c") == 0);
    if (!r->late_recv)
        for (uint32_t k = 0; k < r->n; k++) /* SEND k lands at k * MSG */
            CHECK(fx_post_recv(rc, k, (size_t)k * MSG, MSG) == 0);
    r->o.sim = r->fx->sim;
    r->o.base = rc->buf;
    r->o.n = r->n;
    r->o.cq = fx_nic_cq(rc->rcq);
    fx_watch_start(r->fx, &r->w, 1, observe, &r->o);
    fx_barrier(r->fx, "ar/ready", "s", "c");
    if (r->late_recv) {
        sim_proc_sleep(30 * SIM_US);
        for (uint32_t k = 0; k < r->n; k++)
            CHECK(fx_post_recv(rc, k, (size_t)k * MSG, MSG) == 0);
    }
    for (uint32_t k = 0; k < r->n; k++) {
        struct ibv_wc wc;
        CHECK(fx_poll_one(rc->rcq, &wc) == 1);
        bool ok = wc.status == IBV_WC_SUCCESS && wc.wr_id == k && wc.byte_len == MSG;
        if (!r->use_send)
            ok = ok && wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM && ntohl(wc.imm_data) == k;
        else
            ok = ok && wc.opcode == IBV_WC_RECV;
        r->recv_in_order += ok;
    }
    fx_watch_stop(&r->w);
    for (uint32_t k = 0; k < r->n; k++)
        r->data_ok += missing(rc->buf + (size_t)k * MSG, k + 1, MSG) == 0;
    struct ibv_wc extra;
    r->dup_or_bad = (uint32_t)ibv_poll_cq(rc->rcq, 1, &extra); /* nothing delivered twice */
    r->t_end = sim_now(r->fx->sim);
    fx_barrier(r->fx, "ar/end", "s", "c");
}

/* spray: a 2-leaf, 4-spine leaf-spine fabric (25 Gb/s spine links) with
 * per-packet spraying and no NIC-made skew (ar_max_delay 0): the fabric
 * alone reorders. */
static void run_on(struct run *r, uint64_t seed, uint32_t transport, uint32_t n, bool use_send,
                   double loss, uint8_t timeout, bool spray)
{
    memset(r, 0, sizeof(*r));
    struct nic_params np;
    nic_params_default(&np);
    np.transport = transport;
    if (spray)
        np.ar_max_delay_ps = 0;
    r->fx = fx_create(seed, &np);
    if (spray) {
        struct topo_params tp;
        fabric_leaf_spine(&tp, 2, 4, 1);
        tp.sw.routing = ROUTE_SPRAY;
        /* 4 x 25 Gb/s spine links: packets queue there, so sprayed ones
         * overtake each other */
        tp.spine_link = tp.link;
        tp.spine_link.rate_bps = 25000000000ull;
        CHECK(fx_use_topology(r->fx, &tp) == 0);
    }
    r->n = n;
    r->use_send = use_send;
    r->timeout = timeout;
    fx_set_loss_all(r->fx, loss);
    enum sim_run_result rr = fx_run_pair(r->fx, "c", client, "s", server, r);
    CHECK_EQ_U64(rr, SIM_RUN_DONE);
    CHECK_EQ_U64(r->send_in_order, n);
    CHECK_EQ_U64(r->recv_in_order, n);
    CHECK_EQ_U64(r->data_ok, n);
    CHECK_EQ_U64(r->dup_or_bad, 0);
    CHECK_EQ_U64(r->o.flags_seen, n);
    CHECK_EQ_U64(r->o.cqe_checked, n);
    CHECK_EQ_U64(r->o.cqe_early, 0); /* a CQE never before its data */
}

static void run(struct run *r, uint64_t seed, uint32_t transport, uint32_t n, bool use_send,
                double loss, uint8_t timeout)
{
    run_on(r, seed, transport, n, use_send, loss, timeout, false);
}

static void test_write_stream(void)
{
    struct run r;
    run(&r, 1, NIC_TRANSPORT_IB_AR, 128, false, 0.0, 0);
    const struct nic_counters *s = nic_get_counters(r.fx->nic[1]);
    const struct nic_counters *c = nic_get_counters(r.fx->nic[0]);
    printf("ib-ar WRITE: %" PRIu64 " of %u packets arrived ahead of a missing one, %" PRIu64
           " placed at once; %u of %u last-byte flags visible before earlier bytes\n",
           s->ar_ooo_pkts, 128 * 4, s->ar_ooo_placed, r.o.flag_early, 128);
    CHECK(s->ar_ooo_pkts > 0);
    CHECK(s->ar_ooo_placed > 0 && s->ar_ooo_placed <= s->ar_ooo_pkts);
    CHECK(r.o.flag_early > 0); /* a polled last byte set before earlier bytes landed */
    /* reordering is not loss: no NAK, no go back N, every packet sent once */
    CHECK_EQ_U64(s->naks_tx, 0);
    CHECK_EQ_U64(s->ar_gap_naks, 0);
    CHECK_EQ_U64(s->ar_dup_drops + s->ar_window_drops + s->rx_drops, 0);
    CHECK_EQ_U64(c->pkts_tx, 128 * 4);
    fx_destroy(r.fx);
}

/* The same stream over plain IB: packets in order, nothing early. */
static void test_write_stream_ib(void)
{
    struct run r;
    run(&r, 1, NIC_TRANSPORT_IB, 128, false, 0.0, 0);
    const struct nic_counters *s = nic_get_counters(r.fx->nic[1]);
    CHECK_EQ_U64(s->ar_ooo_pkts, 0);
    CHECK_EQ_U64(r.o.flag_early, 0);
    fx_destroy(r.fx);
}

/* Spraying on a leaf-spine: plain IB drops what comes early and goes back
 * N; ib-ar places it and never NAKs. */
static void test_spray(void)
{
    struct run ib, ar;
    run_on(&ib, 6, NIC_TRANSPORT_IB, 128, false, 0.0, 0, true);
    run_on(&ar, 6, NIC_TRANSPORT_IB_AR, 128, false, 0.0, 0, true);
    const struct nic_counters *si = nic_get_counters(ib.fx->nic[1]);
    const struct nic_counters *sa = nic_get_counters(ar.fx->nic[1]);
    printf("leaf-spine spraying: IB %" PRIu64 " sequence NAKs, %" PRIu64
           " packets sent; ib-ar %" PRIu64 " packets ahead, %" PRIu64 " NAKs, %" PRIu64
           " packets sent\n",
           si->naks_tx, nic_get_counters(ib.fx->nic[0])->pkts_tx, sa->ar_ooo_pkts, sa->naks_tx,
           nic_get_counters(ar.fx->nic[0])->pkts_tx);
    CHECK(si->naks_tx > 0); /* RC: out of sequence = go back N */
    CHECK_EQ_U64(ib.o.flag_early, 0);
    CHECK(sa->ar_ooo_pkts > 0);
    CHECK_EQ_U64(sa->naks_tx, 0);
    CHECK_EQ_U64(nic_get_counters(ar.fx->nic[0])->pkts_tx, 128 * 4);
    fx_destroy(ib.fx);
    fx_destroy(ar.fx);
}

static void test_send_stream(void)
{
    struct run r;
    run(&r, 2, NIC_TRANSPORT_IB_AR, 128, true, 0.0, 0);
    const struct nic_counters *s = nic_get_counters(r.fx->nic[1]);
    printf("ib-ar SEND: %" PRIu64 " packets ahead, %" PRIu64 " placed at once\n", s->ar_ooo_pkts,
           s->ar_ooo_placed);
    CHECK(s->ar_ooo_placed > 0);
    CHECK_EQ_U64(s->naks_tx, 0);
    fx_destroy(r.fx);
}

/* No receive posted yet: the first SEND is refused with an RNR NAK while
 * later packets wait in the window; the requester resends after the RNR
 * timer (min_rnr_timer 12: 0.64 ms), copies of held packets are dropped. */
static void test_rnr(void)
{
    struct run r;
    memset(&r, 0, sizeof(r));
    struct nic_params np;
    nic_params_default(&np);
    np.transport = NIC_TRANSPORT_IB_AR;
    r.fx = fx_create(8, &np);
    r.n = 32;
    r.use_send = true;
    r.late_recv = true;
    CHECK_EQ_U64(fx_run_pair(r.fx, "c", client, "s", server, &r), SIM_RUN_DONE);
    CHECK_EQ_U64(r.send_in_order, 32);
    CHECK_EQ_U64(r.recv_in_order, 32);
    CHECK_EQ_U64(r.data_ok, 32);
    CHECK_EQ_U64(r.o.cqe_early, 0);
    const struct nic_counters *s = nic_get_counters(r.fx->nic[1]);
    CHECK(s->naks_tx > 0); /* RNR NAKs */
    fx_destroy(r.fx);
}

/* 1% loss: holes are recovered (sequence NAK after ar_nak_delay, go back
 * N, copies of held packets dropped); local ACK timeout 4.096 us * 2^10. */
static void test_loss(void)
{
    struct run r;
    run(&r, 3, NIC_TRANSPORT_IB_AR, N_MAX, false, 0.01, 10);
    const struct nic_counters *s = nic_get_counters(r.fx->nic[1]);
    printf("ib-ar 1%% loss: %" PRIu64 " + %" PRIu64 " packets dropped, %" PRIu64
           " hole NAKs, %" PRIu64 " held copies dropped, %" PRIu64 " packets ahead\n",
           r.fx->dropped[0], r.fx->dropped[1], s->ar_gap_naks, s->ar_dup_drops, s->ar_ooo_pkts);
    CHECK(r.fx->dropped[1] > 0);
    CHECK(s->ar_gap_naks > 0);
    fx_destroy(r.fx);
}

static void test_determinism(void)
{
    struct run a, b;
    run(&a, 9, NIC_TRANSPORT_IB_AR, 64, false, 0.0, 0);
    run(&b, 9, NIC_TRANSPORT_IB_AR, 64, false, 0.0, 0);
    CHECK_EQ_U64(a.t_end, b.t_end);
    CHECK_EQ_U64(a.o.flag_early, b.o.flag_early);
    CHECK_EQ_U64(nic_get_counters(a.fx->nic[1])->ar_ooo_placed,
                 nic_get_counters(b.fx->nic[1])->ar_ooo_placed);
    fx_destroy(a.fx);
    fx_destroy(b.fx);
}

/* ---------------------------------------------------------------- READ / atomic */

struct rw {
    struct fx *fx;
    struct fx_rc c, s;
    bool read_ok, faa_ok, cas_ok;
};

static void rw_client(void *arg)
{
    struct rw *r = arg;
    struct fx_rc *rc = &r->c;
    struct run dummy = {0};
    struct fx_rc_opts o = ar_opts(&dummy);
    CHECK(fx_rc_open(r->fx, rc, &o) == 0);
    CHECK(fx_rc_connect(rc, "rw/c", "rw/s") == 0);
    fill(rc->buf, 77, 4 * MSG);
    uint64_t v = 1000;
    memcpy(rc->buf + 4 * MSG, &v, 8);
    /* 64 KiB WRITE, then without waiting: READ it back, FETCH_ADD and
     * COMPARE_SWAP on a word the WRITE (16 packets) wrote last */
    CHECK(fx_post(rc, IBV_WR_RDMA_WRITE, 1, 0, 4 * MSG + 8, OFF_RW, 0) == 0);
    CHECK(fx_post(rc, IBV_WR_RDMA_READ, 2, OFF_RW, 4 * MSG + 8, OFF_RW, IBV_SEND_SIGNALED) == 0);
    for (uint64_t id = 3; id <= 4; id++) { /* FETCH_ADD 5, then COMPARE_SWAP 1005 -> 42 */
        struct ibv_sge sge = {.addr = (uintptr_t)(rc->buf + OFF_RW + 4 * MSG + 64 * (id - 2)),
                              .length = 8,
                              .lkey = rc->mr->lkey};
        struct ibv_send_wr wr = {.wr_id = id,
                                 .sg_list = &sge,
                                 .num_sge = 1,
                                 .opcode = id == 3 ? IBV_WR_ATOMIC_FETCH_AND_ADD
                                                   : IBV_WR_ATOMIC_CMP_AND_SWP,
                                 .send_flags = IBV_SEND_SIGNALED};
        wr.wr.atomic.remote_addr = rc->remote.addr + OFF_RW + 4 * MSG;
        wr.wr.atomic.rkey = rc->remote.rkey;
        wr.wr.atomic.compare_add = id == 3 ? 5 : 1005;
        wr.wr.atomic.swap = 42;
        struct ibv_send_wr *bad = NULL;
        CHECK(ibv_post_send(rc->qp, &wr, &bad) == 0);
    }
    struct ibv_wc wc;
    for (uint64_t id = 2; id <= 4; id++) {
        CHECK(fx_poll_one(rc->scq, &wc) == 1);
        CHECK_EQ_U64(wc.wr_id, id);
        CHECK_EQ_U64(wc.status, IBV_WC_SUCCESS);
    }
    uint64_t orig_faa, orig_cas;
    memcpy(&orig_faa, rc->buf + OFF_RW + 4 * MSG + 64, 8);
    memcpy(&orig_cas, rc->buf + OFF_RW + 4 * MSG + 128, 8);
    r->read_ok = missing(rc->buf + OFF_RW, 77, 4 * MSG) == 0;
    r->faa_ok = orig_faa == 1000;
    r->cas_ok = orig_cas == 1005;
    fx_barrier(r->fx, "rw/end", "c", "s");
}

static void rw_server(void *arg)
{
    struct rw *r = arg;
    struct run dummy = {0};
    struct fx_rc_opts o = ar_opts(&dummy);
    CHECK(fx_rc_open(r->fx, &r->s, &o) == 0);
    CHECK(fx_rc_connect(&r->s, "rw/s", "rw/c") == 0);
    fx_barrier(r->fx, "rw/end", "s", "c");
    uint64_t v;
    memcpy(&v, r->s.buf + OFF_RW + 4 * MSG, 8);
    CHECK_EQ_U64(v, 42); /* 1000 + 5, then swapped */
}

static void test_read_atomic(void)
{
    struct rw r;
    memset(&r, 0, sizeof(r));
    struct nic_params np;
    nic_params_default(&np);
    np.transport = NIC_TRANSPORT_IB_AR;
    r.fx = fx_create(5, &np);
    CHECK_EQ_U64(fx_run_pair(r.fx, "c", rw_client, "s", rw_server, &r), SIM_RUN_DONE);
    CHECK(r.read_ok);
    CHECK(r.faa_ok);
    CHECK(r.cas_ok);
    CHECK(nic_get_counters(r.fx->nic[1])->ar_ooo_pkts > 0);
    fx_destroy(r.fx);
}

int main(void)
{
    test_write_stream();
    test_write_stream_ib();
    test_spray();
    test_send_stream();
    test_read_atomic();
    test_rnr();
    test_loss();
    test_determinism();
    return test_summary();
}
