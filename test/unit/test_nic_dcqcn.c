/* DCQCN and the per-QP rate limiter (sim/nic/dcqcn.c, ratelimit.c),
 * against values computed by hand from the algorithm (dcqcn.c's comment):
 * line rate 100 Gb/s, alpha starts at 1, g = 1/256, T = K = 55 us, F = 5,
 * R_AI = 40 Mb/s.  Also: the notification point sends at most one CNP per
 * QP per 50 us, a WRITE under a rate limit takes its wire bytes at that
 * rate, and a limit of 0 removes it.  An idle throttled QP stops its
 * timers and catches up in closed form (dcqcn.c): the rates it reports
 * are those of the stepped timer, and the closed form equals stepping N
 * times field for field. */
#include <math.h>

#include "nic_harness.h"
#include "sim/nic/ratelimit.h"
#include "test.h"

#define GBPS 1000000000ull

static void inject_cnp(struct sim *sim, void *a, void *b)
{
    struct nh *h = a;
    struct nic_qp *qp = b;
    struct pkt *p = pkt_alloc(h->pool);
    p->opcode = 0x81;
    p->dest_qpn = qp->qpn;
    p->src_node = 1;
    p->dst_node = 0;
    p->frame_bytes = 78;
    struct fabric_sink s = nic_sink(h->nic[0]);
    s.rx(sim, s.ctx, p);
}

static void noop(struct sim *sim, void *a, void *b)
{
    (void)sim;
    (void)a;
    (void)b;
}

/* Run until `t`, the clock reaching it even when nothing else is due (an
 * idle throttled QP has no timer events: the state is read at t). */
static void run_to(struct nh *h, sim_time_t t)
{
    sim_call_in(h->sim, t - sim_now(h->sim), noop, NULL, NULL);
    sim_run(h->sim, t);
}

/* Step until the QP's rate changes (the CNP crossed the receive pipeline,
 * QP-context lookup included): the instant of the cut. */
static sim_time_t until_change(struct nh *h, struct nic_qp *qp)
{
    uint64_t r0 = nic_qp_rate_bps(qp);
    sim_time_t limit = sim_now(h->sim) + 10 * SIM_MS;
    while (nic_qp_rate_bps(qp) == r0 && sim_now(h->sim) < limit)
        sim_run(h->sim, sim_now(h->sim) + 1 * SIM_NS);
    return sim_now(h->sim);
}

static void test_rate_cuts_and_recovery(void)
{
    struct nic_params np;
    nic_params_default(&np);
    np.dcqcn = true;
    struct nh *h = nh_create(&np);
    struct nh_ep a, b;
    struct nh_conn c;
    nh_conn_default(&c);
    nh_ep_open(h, 0, &a, 4096, 16, 64);
    nh_ep_open(h, 1, &b, 4096, 16, 64);
    nh_ep_connect(&a, &b, &c);
    nh_ep_connect(&b, &a, &c);
    CHECK_EQ_U64(nic_qp_rate_bps(a.qp), 0); /* unthrottled */
    sim_call_in(h->sim, 10 * SIM_US, inject_cnp, h, a.qp);
    sim_time_t t0 = until_change(h, a.qp);
    /* cut: Rt = 100, Rc = 100 (1 - 1/2) = 50 Gb/s; alpha = (1-g) 1 + g = 1 */
    CHECK_EQ_U64(nic_qp_rate_bps(a.qp), 50 * GBPS);
    CHECK_EQ_U64(nic_get_counters(h->nic[0])->cnps_rx, 1);
    /* +55 us: alpha = 255/256; timer stage 1 < F: fast recovery to
     * (100 + 50) / 2 = 75; +110 us: (100 + 75) / 2 = 87.5 */
    run_to(h, t0 + 55 * SIM_US);
    CHECK_EQ_U64(nic_qp_rate_bps(a.qp), 75 * GBPS);
    run_to(h, t0 + 110 * SIM_US);
    CHECK_EQ_U64(nic_qp_rate_bps(a.qp), 87500000000ull);
    /* second CNP: alpha = (255/256)^2, Rc = 87.5 (1 - alpha/2), Rt = 87.5 */
    sim_call_in(h->sim, 1 * SIM_US, inject_cnp, h, a.qp);
    t0 = until_change(h, a.qp);
    double alpha = pow(255.0 / 256.0, 2);
    uint64_t rc = (uint64_t)llround(87.5e9 * (1.0 - alpha / 2.0));
    CHECK_EQ_U64(nic_qp_rate_bps(a.qp), rc);
    /* five fast-recovery stages halve the gap to Rt = 87.5 each time */
    uint64_t rt = 87500000000ull;
    for (int k = 1; k <= 5; k++) {
        run_to(h, t0 + (sim_time_t)k * 55 * SIM_US);
        rc = (rt + rc) / 2;
        CHECK_EQ_U64(nic_qp_rate_bps(a.qp), rc);
    }
    /* stage 6: additive increase, Rt += 40 Mb/s */
    run_to(h, t0 + 6 * 55 * SIM_US);
    rt += 40000000;
    rc = (rt + rc) / 2;
    CHECK_EQ_U64(nic_qp_rate_bps(a.qp), rc);
    printf("dcqcn: 50, 75, 87.5 Gb/s; second cut to %.3f, then %.3f Gb/s after 6 stages\n",
           87.5 * (1.0 - alpha / 2.0), (double)rc / 1e9);
    /* left alone it recovers to line rate: (100 - 87.5) Gb/s / R_AI = 313
     * more ticks, 17 ms, with no events (the timers stopped when it was
     * found idle) */
    uint64_t ev0 = sim_events_executed(h->sim);
    run_to(h, t0 + 200 * SIM_MS);
    CHECK(sim_events_executed(h->sim) - ev0 <= 2);
    CHECK_EQ_U64(nic_qp_rate_bps(a.qp), 0);
    /* a CNP then finds it unthrottled and cuts line rate by the alpha that
     * decayed once per tick until it recovered (stepped here by hand) */
    struct nic_dcqcn d = {.rc_bps = rc, .rt_bps = rt, .t_count = 6, .active = true};
    d.alpha = (1.0 - 1.0 / 256) * alpha + 1.0 / 256;
    for (int k = 0; k < 6; k++)
        d.alpha *= 1.0 - 1.0 / 256;
    uint64_t ticks = 0;
    while (nic_dcqcn_tick(&np, 100 * GBPS, &d))
        ticks++;
    sim_call_in(h->sim, 1 * SIM_US, inject_cnp, h, a.qp);
    until_change(h, a.qp);
    CHECK_EQ_U64(nic_qp_rate_bps(a.qp), (uint64_t)llround(100e9 * (1.0 - d.alpha / 2.0)));
    printf("dcqcn: idle recovery in %llu more ticks, no events; next cut to %.3f Gb/s\n",
           (unsigned long long)ticks + 1, (double)nic_qp_rate_bps(a.qp) / 1e9);
    nh_ep_close(&a);
    nh_ep_close(&b);
    nh_destroy(h);
}

/* Every request packet marked CE (a switch queue with kmin = kmax = 0 and
 * pmax 1): the receiver sends one CNP per 50 us, no more; the sender's
 * rate falls. */
static void test_cnp_pacing(void)
{
    struct nic_params np;
    nic_params_default(&np);
    np.dcqcn = true;
    struct nh *h = nh_create(&np);
    /* the switch's port to the receiver at 25 Gb/s: a queue builds, and
     * every frame that finds one is marked */
    struct link *down = topo_downlink(h->topo, 1);
    struct link_params slow = *link_get_params(down);
    slow.rate_bps = 25 * GBPS;
    link_set_params(down, &slow);
    struct link_ecn e = {.kmin_bytes = 0, .kmax_bytes = 1, .pmax = 1.0};
    link_set_ecn(down, &e);
    struct nh_ep a, b;
    struct nh_conn c;
    nh_conn_default(&c);
    c.mtu = IBV_MTU_4096;
    const uint32_t len = 4u << 20;
    nh_ep_open(h, 0, &a, len, 16, 64);
    nh_ep_open(h, 1, &b, len, 16, 64);
    nh_ep_connect(&a, &b, &c);
    nh_ep_connect(&b, &a, &c);
    sim_time_t t0 = sim_now(h->sim);
    CHECK(nh_post(&a, IBV_WR_RDMA_WRITE, 1, 0, len, &b, 0, IBV_SEND_SIGNALED) == 0);
    struct ibv_wc wc;
    while (nic_cq_poll(a.scq, 1, &wc) == 0 && sim_now(h->sim) < t0 + 100 * SIM_MS)
        nh_run_for(h, 10 * SIM_US);
    sim_time_t took = sim_now(h->sim) - t0;
    uint64_t cnps = nic_get_counters(h->nic[1])->cnps_tx;
    uint64_t bound = took / (50 * SIM_US) + 2;
    printf("dcqcn: 4 MiB WRITE with every packet marked: %llu CNPs in %.1f us (at most %llu)\n",
           (unsigned long long)cnps, (double)took / 1e6, (unsigned long long)bound);
    CHECK(wc.status == IBV_WC_SUCCESS);
    CHECK(cnps >= 2 && cnps <= bound);
    CHECK_EQ_U64(nic_get_counters(h->nic[0])->cnps_rx, cnps);
    /* the sender's rate was cut below the bottleneck's 25 Gb/s */
    CHECK(nic_qp_rate_bps(a.qp) > 0 && nic_qp_rate_bps(a.qp) < 25 * GBPS);
    nh_ep_close(&a);
    nh_ep_close(&b);
    nh_destroy(h);
}

/* ibv_modify_qp_rate_limit's NIC side: a 1 MiB WRITE paced at 10 Gb/s
 * takes its wire bytes / 10 Gb/s (within one packet's time). */
static void test_rate_limit(void)
{
    struct nh *h = nh_create(NULL);
    struct nh_ep a, b;
    struct nh_conn c;
    nh_conn_default(&c);
    c.mtu = IBV_MTU_4096;
    const uint32_t len = 1u << 20;
    nh_ep_open(h, 0, &a, len, 16, 64);
    nh_ep_open(h, 1, &b, len, 16, 64);
    nh_ep_connect(&a, &b, &c);
    nh_ep_connect(&b, &a, &c);
    CHECK(nic_qp_set_rate_limit(a.qp, 10 * GBPS) == 0);
    CHECK_EQ_U64(nic_qp_rate_bps(a.qp), 10 * GBPS);
    uint64_t tx0 = nic_get_counters(h->nic[0])->bytes_tx;
    sim_time_t t0 = sim_now(h->sim);
    CHECK(nh_post(&a, IBV_WR_RDMA_WRITE, 1, 0, len, &b, 0, IBV_SEND_SIGNALED) == 0);
    struct ibv_wc wc;
    while (nic_cq_poll(a.scq, 1, &wc) == 0)
        nh_run_for(h, 10 * SIM_US);
    uint64_t frames = nic_get_counters(h->nic[0])->pkts_tx; /* 256 data + none else */
    uint64_t wire = nic_get_counters(h->nic[0])->bytes_tx - tx0 + frames * 20;
    double want_us = (double)wire * 8 / 10e9 * 1e6, got_us = (double)(sim_now(h->sim) - t0) / 1e6;
    printf("rate limit 10 Gb/s: 1 MiB in %.1f us (wire time at 10 Gb/s %.1f us)\n", got_us,
           want_us);
    CHECK(got_us >= want_us - 0.5 && got_us <= want_us + 15); /* + latency and the ACK */
    CHECK(nic_qp_set_rate_limit(a.qp, 0) == 0);
    CHECK_EQ_U64(nic_qp_rate_bps(a.qp), 0);
    nh_ep_close(&a);
    nh_ep_close(&b);
    nh_destroy(h);
}

/* The closed form of an idle QP's recovery against stepping the timer N
 * times, field for field, from states in each stage: fast recovery,
 * additive (B <= F), hyper (B > F, with t below and above B), near the
 * minimum rate, and close to line rate. */
static void test_closed_form_equals_stepping(void)
{
    struct nic_params np;
    nic_params_default(&np);
    const uint64_t line = 100 * GBPS;
    struct nic_dcqcn starts[] = {
        {.rc_bps = 50 * GBPS, .rt_bps = 100 * GBPS, .alpha = 1.0, .active = true},
        {.rc_bps = 6 * GBPS, .rt_bps = 6250000000ull, .alpha = 0.3, .active = true, .t_count = 7},
        {.rc_bps = 3 * GBPS, .rt_bps = 9 * GBPS, .alpha = 0.5, .active = true, .bc_count = 9},
        {.rc_bps = 2 * GBPS,
         .rt_bps = 4 * GBPS,
         .alpha = 0.9,
         .active = true,
         .t_count = 12,
         .bc_count = 8},
        {.rc_bps = np.dcqcn_min_rate_bps,
         .rt_bps = np.dcqcn_min_rate_bps,
         .alpha = 1.0,
         .active = true},
        {.rc_bps = 99990000000ull, .rt_bps = line, .alpha = 0.01, .active = true, .t_count = 40},
        {.rc_bps = 1234567891ull,
         .rt_bps = 1234567891ull,
         .alpha = 0.7,
         .active = true,
         .t_count = 3,
         .bc_count = 2},
    };
    const uint64_t ns[] = {0, 1, 4, 5, 6, 7, 63, 64, 65, 100, 1000, 2349, 2350, 2351, 5000, 100000};
    int bad = 0;
    uint64_t worst_ticks = 0;
    for (size_t i = 0; i < sizeof(starts) / sizeof(starts[0]); i++)
        for (size_t j = 0; j < sizeof(ns) / sizeof(ns[0]); j++) {
            struct nic_dcqcn a = starts[i], b = starts[i];
            uint64_t stepped = 0;
            while (stepped < ns[j] && a.active) {
                nic_dcqcn_tick(&np, line, &a);
                stepped++;
            }
            uint64_t got = nic_dcqcn_ticks(&np, line, &b, ns[j]);
            if (stepped > worst_ticks)
                worst_ticks = stepped;
            if (got != stepped || a.rc_bps != b.rc_bps || a.rt_bps != b.rt_bps ||
                a.alpha != b.alpha || a.t_count != b.t_count || a.bc_count != b.bc_count ||
                a.increases != b.increases || a.active != b.active) {
                printf("closed form != stepping: start %zu, %llu ticks: rc %llu / %llu, "
                       "rt %llu / %llu, alpha %.17g / %.17g\n",
                       i, (unsigned long long)ns[j], (unsigned long long)a.rc_bps,
                       (unsigned long long)b.rc_bps, (unsigned long long)a.rt_bps,
                       (unsigned long long)b.rt_bps, a.alpha, b.alpha);
                bad++;
            }
        }
    CHECK_EQ_U64(bad, 0);
    /* the longest recovery stepped is the 6 -> 100 Gb/s one (~2,350 ticks) */
    CHECK(worst_ticks > 2000);
    printf("dcqcn: closed form = stepping for 7 states x 16 tick counts (up to %llu ticks)\n",
           (unsigned long long)worst_ticks);
}

int main(void)
{
    test_closed_form_equals_stepping();
    test_rate_cuts_and_recovery();
    test_cnp_pacing();
    test_rate_limit();
    return test_summary();
}
