/* PFC and ECN (link.c, pfc.c): a pause frame stops the priority it names
 * on the other direction of the cable for exactly its quanta and a resume
 * restarts it; a 2:1 incast through a switch with PFC loses nothing and
 * pauses / resumes its senders (without PFC the same traffic drops); the
 * RED marking probability against queue depth; and a ring of three
 * switches whose cyclic buffer dependency deadlocks under PFC. */
#include <math.h>
#include <stdlib.h>

#include "sim/fabric/fabric.h"
#include "test.h"

#define FRAME 1086u /* wire bytes 1106: 88.48 ns at 100 Gb/s */

struct rec {
    uint64_t n, ce;
    sim_time_t last_t;
    sim_time_t t[4096];
};

static void rec_rx(struct sim *sim, void *ctx, struct pkt *p)
{
    struct rec *r = ctx;
    if (r->n < 4096)
        r->t[r->n] = sim_now(sim);
    r->n++;
    r->ce += p->ecn == PKT_ECN_CE;
    r->last_t = sim_now(sim);
}

static struct pkt *frame(struct pkt_pool *pool, uint32_t src, uint32_t dst, uint8_t prio)
{
    struct pkt *p = pkt_alloc(pool);
    p->src_node = src;
    p->dst_node = dst;
    p->frame_bytes = FRAME;
    p->prio = prio;
    p->udp_sport = 0xc000;
    return p;
}

static void free_rx(struct sim *sim, void *ctx, struct pkt *p)
{
    rec_rx(sim, ctx, p);
}

/* A pause of q quanta on priority 3 reaching A stops A->B's priority-3
 * frames for q x 512 bit times; priority 0 keeps going; a resume (q = 0)
 * ends it at once. */
static void test_pause_resume(void)
{
    struct sim *sim = sim_create(1);
    struct pkt_pool *pool = pkt_pool_create();
    struct link_params lp = {.rate_bps = 100000000000ull, .delay_ps = 0};
    struct link *ab = link_create(sim, "a->b", &lp, pool),
                *ba = link_create(sim, "b->a", &lp, pool);
    link_set_peer(ab, ba);
    link_set_peer(ba, ab);
    struct rec *rb = calloc(1, sizeof(*rb)), *ra = calloc(1, sizeof(*ra));
    link_connect(ab, (struct fabric_sink){.rx = free_rx, .ctx = rb});
    link_connect(ba, (struct fabric_sink){.rx = free_rx, .ctx = ra});
    /* the pause leaves b at t = 0 (64 B + 20 = 6.72 ns on the wire) */
    struct pkt *pf = pkt_alloc(pool);
    pf->kind = PKT_PFC;
    pf->frame_bytes = PKT_PFC_FRAME_BYTES;
    pf->pfc_enable = 1u << 3;
    pf->pfc_quanta[3] = 1000; /* 1000 x 512 bits = 5.12 us at 100 Gb/s */
    link_send_ctrl(ba, pf);
    sim_run(sim, 7 * SIM_NS); /* it arrived at 6.72 ns */
    CHECK_EQ_U64(ra->n, 0);   /* consumed by the port, not delivered */
    CHECK_EQ_U64(link_get_counters(ab)->pfc_xoff_rx, 1);
    CHECK(link_prio_paused(ab, 3));
    for (int i = 0; i < 3; i++)
        link_send(ab, frame(pool, 0, 1, 3));
    link_send(ab, frame(pool, 0, 1, 0));
    sim_run(sim, SIM_TIME_NEVER);
    /* priority 0 went at once (6.72 ns + 88.48 ns); the three others after
     * the pause: 6.72 ns + 5120 ns, then back to back */
    CHECK_EQ_U64(rb->n, 4);
    CHECK_EQ_U64(rb->t[0], 6720 + 88480);
    CHECK_EQ_U64(rb->t[1], 6720 + 5120000 + 88480);
    CHECK_EQ_U64(rb->t[3], 6720 + 5120000 + 3 * 88480);
    /* a resume ends a long pause early */
    pf = pkt_alloc(pool);
    pf->kind = PKT_PFC;
    pf->frame_bytes = PKT_PFC_FRAME_BYTES;
    pf->pfc_enable = 1u << 3;
    pf->pfc_quanta[3] = 65535;
    link_send_ctrl(ba, pf);
    sim_time_t t0 = sim_now(sim);
    sim_run(sim, t0 + 10 * SIM_NS);
    link_send(ab, frame(pool, 0, 1, 3));
    sim_run(sim, t0 + 1 * SIM_US);
    CHECK_EQ_U64(rb->n, 4); /* held */
    pf = pkt_alloc(pool);
    pf->kind = PKT_PFC;
    pf->frame_bytes = PKT_PFC_FRAME_BYTES;
    pf->pfc_enable = 1u << 3; /* quanta 0: resume */
    link_send_ctrl(ba, pf);
    sim_run(sim, SIM_TIME_NEVER);
    CHECK_EQ_U64(rb->n, 5);
    CHECK_EQ_U64(rb->last_t, t0 + 1 * SIM_US + 6720 + 88480);
    CHECK_EQ_U64(link_get_counters(ab)->pfc_xon_rx, 1);
    CHECK_EQ_U64(link_get_counters(ba)->pfc_frames_sent, 3);
    link_destroy(ab);
    link_destroy(ba);
    pkt_pool_destroy(pool);
    sim_destroy(sim);
    free(ra);
    free(rb);
}

struct incast_result {
    uint64_t delivered, drops, xoff, xon, headroom_drops, pfc_rx, max_q;
};

/* node0 and node1 send `n` frames each at line rate to node2 through one
 * switch with a 64 KiB port buffer. */
static struct incast_result run_incast(bool pfc, unsigned n)
{
    struct sim *sim = sim_create(1);
    struct pkt_pool *pool = pkt_pool_create();
    struct topo_params tp;
    fabric_defaults(&tp);
    tp.n_nodes = 3;
    tp.sw.port_buffer_bytes = 64 * 1024;
    if (pfc) {
        tp.sw.pfc.enabled = true;
        tp.sw.pfc.prio_mask = 1u << 3;
        tp.sw.pfc.xoff_bytes = 20000;
        tp.sw.pfc.xon_bytes = 15000;
        tp.sw.pfc.quanta = 65535;
    }
    struct topology *t = topo_create(sim, &tp, pool);
    struct rec *r = calloc(1, sizeof(*r));
    topo_attach(t, 2, (struct fabric_sink){.rx = free_rx, .ctx = r});
    for (unsigned i = 0; i < n; i++) {
        link_send(topo_uplink(t, 0), frame(pool, 0, 2, 3));
        link_send(topo_uplink(t, 1), frame(pool, 1, 2, 3));
    }
    sim_run(sim, SIM_TIME_NEVER);
    struct incast_result res = {.delivered = r->n};
    for (unsigned i = 0; i < topo_n_links(t); i++)
        res.drops += link_get_counters(topo_link(t, i))->pkts_dropped;
    const struct switch_counters *c = switch_get_counters(topo_switch(t, 0));
    res.xoff = c->pfc_xoff_sent;
    res.xon = c->pfc_xon_sent;
    res.headroom_drops = c->pfc_headroom_drops;
    res.pfc_rx = link_get_counters(topo_uplink(t, 0))->pfc_xoff_rx;
    res.max_q = link_get_counters(topo_downlink(t, 2))->max_queue_bytes;
    topo_destroy(t);
    pkt_pool_destroy(pool);
    sim_destroy(sim);
    free(r);
    return res;
}

static void test_pfc_incast(void)
{
    struct incast_result lossy = run_incast(false, 2000);
    struct incast_result pfc = run_incast(true, 2000);
    printf("2:1 incast, 4000 frames: no PFC %llu dropped; PFC %llu dropped, %llu XOFF / %llu XON "
           "sent, egress peak %llu B\n",
           (unsigned long long)lossy.drops, (unsigned long long)pfc.drops,
           (unsigned long long)pfc.xoff, (unsigned long long)pfc.xon,
           (unsigned long long)pfc.max_q);
    CHECK(lossy.drops > 0);
    CHECK_EQ_U64(lossy.delivered + lossy.drops, 4000);
    CHECK_EQ_U64(pfc.drops, 0);
    CHECK_EQ_U64(pfc.headroom_drops, 0);
    CHECK_EQ_U64(pfc.delivered, 4000);
    CHECK(pfc.xoff > 0 && pfc.xon == pfc.xoff); /* every pause ended by a resume */
    CHECK(pfc.pfc_rx > 0);                      /* the senders' transmitters obeyed */
}

/* RED on the instantaneous queue: frames enqueued at depth q are marked
 * with probability 0 (q <= kmin), pmax (q - kmin)/(kmax - kmin) between,
 * 1 above kmax.  Counted per depth band over many fills. */
static void test_ecn_thresholds(void)
{
    struct sim *sim = sim_create(5);
    struct pkt_pool *pool = pkt_pool_create();
    struct link_params lp = {.rate_bps = 100000000000ull, .delay_ps = 0};
    struct link *l = link_create(sim, "ecn", &lp, pool);
    struct link_ecn e = {.kmin_bytes = 10 * 1106, .kmax_bytes = 50 * 1106, .pmax = 0.2};
    link_set_ecn(l, &e);
    struct rec *r = calloc(1, sizeof(*r));
    link_connect(l, (struct fabric_sink){.rx = free_rx, .ctx = r});
    uint64_t marked[3] = {0}, total[3] = {0};
    double expect_mid = 0;
    for (int round = 0; round < 400; round++) {
        for (int k = 0; k < 60; k++) { /* enqueue 60 frames at once: depth k-1 frames + tx */
            uint64_t q = link_prio_queued_bytes(l, 0);
            struct pkt *p = frame(pool, 0, 1, 0);
            p->ecn = PKT_ECN_ECT0;
            uint64_t before = r->ce;
            (void)before;
            link_send(l, p);
            int band = q <= e.kmin_bytes ? 0 : q < e.kmax_bytes ? 1 : 2;
            total[band]++;
            if (band == 1 && round == 0)
                expect_mid +=
                    e.pmax * (double)(q - e.kmin_bytes) / (double)(e.kmax_bytes - e.kmin_bytes);
            marked[band] += p->ecn == PKT_ECN_CE;
        }
        sim_run(sim, SIM_TIME_NEVER);
    }
    double p_mid = (double)marked[1] / (double)total[1];
    double want = expect_mid / (double)(total[1] / 400);
    double sd = sqrt(want * (1 - want) / (double)total[1]);
    printf("ECN: below kmin %llu/%llu marked, between %.4f (expected %.4f), above kmax %llu/%llu\n",
           (unsigned long long)marked[0], (unsigned long long)total[0], p_mid, want,
           (unsigned long long)marked[2], (unsigned long long)total[2]);
    CHECK_EQ_U64(marked[0], 0);
    CHECK_EQ_U64(marked[2], total[2]);
    CHECK(fabs(p_mid - want) <= 5 * sd);
    CHECK_EQ_U64(link_get_counters(l)->ecn_marked, marked[1] + marked[2]);
    CHECK_EQ_U64(r->ce, marked[1] + marked[2]);
    link_destroy(l);
    pkt_pool_destroy(pool);
    sim_destroy(sim);
    free(r);
}

/* Three switches in a ring, each with one host; every flow goes two hops
 * clockwise (a -> c via B, b -> a via C, c -> b via A), so each ring link
 * carries two flows and its buffer waits on the next one's: a cyclic
 * buffer dependency.  Under PFC the ring pauses itself and stops for
 * good: frames stay queued on paused links and nothing is delivered any
 * more, while the switches keep refreshing their pauses (so events go on:
 * a PFC deadlock is a run that makes no progress, not an empty queue). */
static void test_pfc_deadlock(void)
{
    struct sim *sim = sim_create(1);
    struct pkt_pool *pool = pkt_pool_create();
    struct switch_params sp = {.latency_ps = 0, .port_buffer_bytes = 1 << 20};
    sp.pfc.enabled = true;
    sp.pfc.prio_mask = 1u << 3;
    sp.pfc.xoff_bytes = 20000;
    sp.pfc.xon_bytes = 15000;
    sp.pfc.quanta = 65535;
    struct link_params lp = {.rate_bps = 100000000000ull, .delay_ps = 1000000};
    struct fswitch *sw[3];
    struct link *up[3], *down[3], *cw[3], *ccw[3];
    struct rec *r[3];
    char name[32];
    for (int i = 0; i < 3; i++) {
        snprintf(name, sizeof(name), "s%d", i);
        sw[i] = switch_create(sim, name, &sp, pool);
        r[i] = calloc(1, sizeof(*r[i]));
    }
    for (int i = 0; i < 3; i++) {
        int j = (i + 1) % 3;
        snprintf(name, sizeof(name), "h%d->s%d", i, i);
        up[i] = link_create(sim, name, &lp, pool);
        snprintf(name, sizeof(name), "s%d->h%d", i, i);
        down[i] = link_create(sim, name, &lp, pool);
        snprintf(name, sizeof(name), "s%d->s%d", i, j);
        cw[i] = link_create(sim, name, &lp, pool);
        snprintf(name, sizeof(name), "s%d->s%d", j, i);
        ccw[i] = link_create(sim, name, &lp, pool);
        link_set_peer(up[i], down[i]);
        link_set_peer(down[i], up[i]);
        link_set_peer(cw[i], ccw[i]);
        link_set_peer(ccw[i], cw[i]);
    }
    for (int i = 0; i < 3; i++) {
        int j = (i + 1) % 3;
        unsigned p_host = switch_add_port(sw[i], down[i]);
        unsigned p_cw = switch_add_port(sw[i], cw[i]);
        switch_add_port(sw[j], ccw[i]);
        link_connect(down[i], (struct fabric_sink){.rx = free_rx, .ctx = r[i]});
        link_connect(up[i], switch_ingress_sink(sw[i], up[i]));
        link_connect(cw[i], switch_ingress_sink(sw[j], cw[i]));
        link_connect(ccw[i], switch_ingress_sink(sw[i], ccw[i]));
        switch_set_route(sw[i], (uint32_t)i, p_host);
        for (int d = 0; d < 3; d++)
            if (d != i)
                switch_set_route(sw[i], (uint32_t)d, p_cw); /* always clockwise */
    }
    const unsigned n = 3000;
    for (unsigned k = 0; k < n; k++)
        for (int i = 0; i < 3; i++)
            link_send(up[i], frame(pool, (uint32_t)i, (uint32_t)((i + 2) % 3), 3));
    sim_run(sim, 5 * SIM_MS);
    uint64_t at5 = r[0]->n + r[1]->n + r[2]->n;
    enum sim_run_result res = sim_run(sim, 20 * SIM_MS);
    uint64_t delivered = r[0]->n + r[1]->n + r[2]->n, stuck = 0, paused = 0, drops = 0;
    for (int i = 0; i < 3; i++) {
        stuck += link_queued_bytes(cw[i]) + link_queued_bytes(up[i]);
        paused += link_prio_paused(cw[i], 3);
        drops += switch_get_counters(sw[i])->pfc_headroom_drops;
    }
    printf("PFC deadlock ring: %llu of %u frames delivered, %llu B stuck, %llu ring links paused\n",
           (unsigned long long)delivered, 3 * n, (unsigned long long)stuck,
           (unsigned long long)paused);
    CHECK(res == SIM_RUN_TIME_LIMIT); /* pause refreshes go on */
    CHECK_EQ_U64(delivered, at5);     /* no progress in 15 ms */
    CHECK(delivered < 3 * n);         /* frames never arrive */
    CHECK(stuck > 0);
    CHECK_EQ_U64(paused, 3); /* every ring link paused by the next switch */
    CHECK_EQ_U64(drops, 0);  /* lossless to the end */
    for (int i = 0; i < 3; i++) {
        link_destroy(up[i]);
        link_destroy(down[i]);
        link_destroy(cw[i]);
        link_destroy(ccw[i]);
        switch_destroy(sw[i]);
        free(r[i]);
    }
    pkt_pool_destroy(pool);
    sim_destroy(sim);
}

/* The topology's deadlock detector.  A ring of 5 switches (kind ring),
 * every host sending to the host two switches clockwise (the unique
 * shortest path): the cyclic buffer dependency of the hand-built ring
 * above, through the generic routes.  It deadlocks, and the detector names
 * the cycle: the 5 clockwise ring links, priority 3, found within a few
 * check intervals.  A leaf-spine incast pauses links between switches too
 * (the spines' links into the receiver's leaf, the leaves' uplinks) but
 * has no cycle and keeps draining: no deadlock reported. */
static struct topology *pfc_topo(struct sim *sim, struct pkt_pool *pool, enum topo_kind kind,
                                 unsigned nodes)
{
    struct topo_params tp;
    fabric_defaults(&tp);
    tp.kind = kind;
    tp.n_nodes = nodes;
    if (kind == TOPO_LEAF_SPINE) {
        tp.n_leaves = 2;
        tp.n_spines = 2;
        tp.hosts_per_leaf = nodes / 2;
    }
    tp.link.delay_ps = SIM_US;
    tp.sw.latency_ps = 0;
    tp.sw.pfc.enabled = true;
    tp.sw.pfc.prio_mask = 1u << 3;
    tp.sw.pfc.xoff_bytes = 20000;
    tp.sw.pfc.xon_bytes = 15000;
    tp.sw.pfc.quanta = 65535;
    return topo_create(sim, &tp, pool);
}

static void test_deadlock_detector(void)
{
    struct sim *sim = sim_create(1);
    struct pkt_pool *pool = pkt_pool_create();
    struct topo_params bad;
    fabric_defaults(&bad);
    bad.kind = TOPO_RING;
    bad.n_nodes = 2;
    CHECK(topo_create(sim, &bad, pool) == NULL); /* a ring has at least 3 switches */
    struct topology *t = pfc_topo(sim, pool, TOPO_RING, 5);
    CHECK(t != NULL);
    struct rec *r = calloc(5, sizeof(*r));
    for (uint32_t i = 0; i < 5; i++)
        topo_attach(t, i, (struct fabric_sink){.rx = free_rx, .ctx = &r[i]});
    for (unsigned k = 0; k < 3000; k++)
        for (uint32_t i = 0; i < 5; i++)
            link_send(topo_uplink(t, i), frame(pool, i, (i + 2) % 5, 3));
    CHECK(topo_pfc_deadlock(t) == NULL);
    sim_run(sim, 5 * SIM_MS);
    uint64_t at5 = 0, at10 = 0;
    for (int i = 0; i < 5; i++)
        at5 += r[i].n;
    sim_run(sim, 10 * SIM_MS);
    for (int i = 0; i < 5; i++)
        at10 += r[i].n;
    const struct topo_deadlock *d = topo_pfc_deadlock(t);
    CHECK(d != NULL);
    CHECK_EQ_U64(at5, at10); /* it is one: nothing moves */
    CHECK(at10 < 5 * 3000);
    if (d) {
        CHECK_EQ_U64(d->prio, 3);
        CHECK_EQ_U64(d->n_links, 5);
        CHECK(d->at_ps > TOPO_DEADLOCK_CHECK_PS && d->at_ps <= 5 * SIM_MS);
        unsigned seen = 0;
        for (unsigned i = 0; i < d->n_links; i++) {
            const char *a = link_name(topo_link(t, d->links[i]));
            const char *b = link_name(topo_link(t, d->links[(i + 1) % d->n_links]));
            unsigned x, y, x2, y2;
            CHECK(sscanf(a, "ring%u->ring%u", &x, &y) == 2 && y == (x + 1) % 5);
            CHECK(sscanf(b, "ring%u->ring%u", &x2, &y2) == 2 && x2 == y); /* a leads into b */
            seen |= 1u << x;
        }
        CHECK_EQ_U64(seen, 0x1f);
        printf("deadlock detector: ring of 5 stuck after %llu of 15000 frames, cycle of %u links "
               "found at %.1f us, %s first\n",
               (unsigned long long)at10, d->n_links, d->at_ps / 1e6,
               link_name(topo_link(t, d->links[0])));
    }
    topo_destroy(t);
    free(r);

    /* leaf-spine, 3 hosts of leaf 0 and 1 of leaf 1 into host 4 (leaf 1) */
    t = pfc_topo(sim, pool, TOPO_LEAF_SPINE, 8);
    r = calloc(8, sizeof(*r));
    for (uint32_t i = 0; i < 8; i++)
        topo_attach(t, i, (struct fabric_sink){.rx = free_rx, .ctx = &r[i]});
    const uint32_t src[4] = {0, 1, 2, 5};
    for (unsigned k = 0; k < 3000; k++)
        for (int i = 0; i < 4; i++) {
            struct pkt *p = frame(pool, src[i], 4, 3);
            p->udp_sport = (uint16_t)(0xc000 + i);
            link_send(topo_uplink(t, src[i]), p);
        }
    sim_run(sim, sim_now(sim) + 20 * SIM_MS);
    uint64_t xoff_rx = 0;
    for (unsigned i = 0; i < topo_n_links(t); i++) {
        const char *nm = link_name(topo_link(t, i));
        if (strncmp(nm, "spine", 5) == 0 || strstr(nm, "->spine"))
            xoff_rx += link_get_counters(topo_link(t, i))->pfc_xoff_rx;
    }
    CHECK(xoff_rx > 0); /* switch-to-switch links were paused */
    CHECK_EQ_U64(r[4].n, 4 * 3000);
    CHECK(topo_pfc_deadlock(t) == NULL);
    printf("deadlock detector: leaf-spine 4:1 incast, %llu pauses between switches, no deadlock\n",
           (unsigned long long)xoff_rx);
    topo_destroy(t);
    free(r);
    pkt_pool_destroy(pool);
    sim_destroy(sim);
}

int main(void)
{
    test_pause_resume();
    test_pfc_incast();
    test_ecn_thresholds();
    test_pfc_deadlock();
    test_deadlock_detector();
    return test_summary();
}
