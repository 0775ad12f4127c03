/* Leaf-spine topology and multipath routing: the wiring and equal-cost
 * route sets, all-to-all delivery to the right hosts under every routing
 * mode, ECMP keeping a flow on one path while spreading flows, static
 * routing by destination, per-packet spraying using every spine and
 * reordering packets at the receiver (counted here and by the topology),
 * round-robin spraying, per-seed determinism, and link failures: local
 * (the leaf skips its dead uplink), remote with a routing-convergence
 * delay (the spine drops until the leaves reroute), recovery, and a host
 * cut off with no alternative path. */
#include <math.h>
#include <stdlib.h>

#include "sim/fabric/fabric.h"
#include "test.h"

#define MAX_NODES 256
#define FRAME 1066 /* 1086 B on the wire: 86.88 ns at 100 Gb/s */
#define SER_PS 86880

struct node_rx {
    uint32_t node;
    uint64_t n, wrong_dst, reordered;
    uint64_t from[MAX_NODES];
    sim_time_t max_seq[MAX_NODES]; /* per source: highest t_sent_ps seen */
};

static void node_record(struct sim *sim, void *ctx, struct pkt *p)
{
    (void)sim;
    struct node_rx *r = ctx;
    r->n++;
    if (p->dst_node != r->node)
        r->wrong_dst++;
    if (p->src_node < MAX_NODES) {
        r->from[p->src_node]++;
        if (p->t_sent_ps < r->max_seq[p->src_node])
            r->reordered++;
        else
            r->max_seq[p->src_node] = p->t_sent_ps;
    }
}

struct fab {
    struct sim *sim;
    struct pkt_pool *pool;
    struct topology *t;
    struct node_rx rx[MAX_NODES];
    uint64_t seq;
};

static void fab_init(struct fab *f, uint64_t seed, unsigned leaves, unsigned spines, unsigned hpl,
                     enum route_mode mode, sim_time_t reroute_ps)
{
    memset(f, 0, sizeof(*f));
    f->sim = sim_create(seed);
    f->pool = pkt_pool_create();
    struct topo_params p;
    fabric_leaf_spine(&p, leaves, spines, hpl);
    p.sw.routing = mode;
    p.reroute_delay_ps = reroute_ps;
    f->t = topo_create(f->sim, &p, f->pool);
    for (uint32_t i = 0; f->t && i < p.n_nodes; i++) {
        f->rx[i].node = i;
        topo_attach(f->t, i, (struct fabric_sink){.rx = node_record, .ctx = &f->rx[i]});
    }
}

static void fab_fini(struct fab *f)
{
    topo_destroy(f->t);
    pkt_pool_destroy(f->pool);
    sim_destroy(f->sim);
}

/* One frame of flow `flow` (its QPNs and hash), stamped with a global
 * sequence number in t_sent_ps (the order it was sent in). */
static void send1(struct fab *f, uint32_t src, uint32_t dst, uint32_t flow)
{
    struct pkt *p = pkt_alloc(f->pool);
    p->src_node = src;
    p->dst_node = dst;
    p->frame_bytes = FRAME;
    p->src_qpn = p->dest_qpn = flow & 0xffffffu;
    p->udp_sport = (uint16_t)(0xc000u | (flow & 0x3fffu)); /* the flow's ECMP entropy */
    p->t_sent_ps = ++f->seq;
    link_send(topo_uplink(f->t, src), p);
}

static uint64_t sent_on(struct fab *f, const char *name)
{
    struct link *l = topo_find_link(f->t, name);
    CHECK(l != NULL);
    return l ? link_get_counters(l)->pkts_sent : 0;
}

static uint64_t all_link_drops(struct fab *f)
{
    uint64_t d = 0;
    for (unsigned i = 0; i < topo_n_links(f->t); i++)
        d += link_get_counters(topo_link(f->t, i))->pkts_dropped;
    for (unsigned i = 0; i < topo_n_switches(f->t); i++) {
        const struct switch_counters *c = switch_get_counters(topo_switch(f->t, i));
        d += c->pkts_dropped_no_route + c->pkts_dropped_down;
    }
    return d;
}

static void test_shape(void)
{
    struct fab f;
    fab_init(&f, 1, 2, 4, 2, ROUTE_ECMP, 0);
    CHECK(f.t != NULL);
    CHECK_EQ_U64(topo_n_links(f.t), 4 + 4 + 2 * 2 * 4);
    CHECK_EQ_U64(topo_n_switches(f.t), 6);
    CHECK_STR_CONTAINS(link_name(topo_link(f.t, 0)), "node0->leaf0");
    CHECK_STR_CONTAINS(link_name(topo_link(f.t, 3)), "node3->leaf1");
    CHECK_STR_CONTAINS(link_name(topo_link(f.t, 4)), "leaf0->node0");
    CHECK_STR_CONTAINS(link_name(topo_link(f.t, 8)), "leaf0->spine0");
    CHECK_STR_CONTAINS(link_name(topo_link(f.t, 15)), "leaf1->spine3");
    CHECK_STR_CONTAINS(link_name(topo_link(f.t, 16)), "spine0->leaf0");
    CHECK_STR_CONTAINS(link_name(topo_link(f.t, 23)), "spine3->leaf1");
    CHECK(topo_uplink(f.t, 2) == topo_link(f.t, 2));
    CHECK_STR_CONTAINS(link_name(topo_downlink(f.t, 2)), "leaf1->node2");
    CHECK_STR_CONTAINS(switch_name(topo_switch(f.t, 0)), "leaf0");
    CHECK_STR_CONTAINS(switch_name(topo_switch(f.t, 5)), "spine3");
    CHECK(topo_find_link(f.t, "leaf1->spine2") == topo_link(f.t, 14));
    CHECK(topo_find_link(f.t, "leaf2->spine0") == NULL);
    /* leaf0: hosts 0, 1 on ports 0, 1; spines on ports 2..5 */
    struct fswitch *leaf0 = topo_switch(f.t, 0), *spine3 = topo_switch(f.t, 5);
    const uint32_t *ports;
    CHECK_EQ_U64(switch_n_ports(leaf0), 6);
    CHECK_EQ_U64(switch_route_ports(leaf0, 2, &ports), 4);
    for (unsigned k = 0; k < 4; k++) {
        char name[32];
        snprintf(name, sizeof(name), "leaf0->spine%u", k);
        CHECK_STR_CONTAINS(link_name(switch_port(leaf0, ports[k])), name);
    }
    CHECK_EQ_U64(switch_route_ports(leaf0, 1, &ports), 1);
    CHECK_STR_CONTAINS(link_name(switch_port(leaf0, ports[0])), "leaf0->node1");
    CHECK_EQ_U64(switch_route_ports(spine3, 0, &ports), 1);
    CHECK_STR_CONTAINS(link_name(switch_port(spine3, ports[0])), "spine3->leaf0");
    CHECK_EQ_U64(switch_route_ports(spine3, 3, &ports), 1);
    CHECK_STR_CONTAINS(link_name(switch_port(spine3, ports[0])), "spine3->leaf1");
    CHECK_EQ_U64(switch_route_ports(leaf0, 9, &ports), 0);
    fab_fini(&f);

    /* bad shapes */
    struct sim *sim = sim_create(1);
    struct pkt_pool *pool = pkt_pool_create();
    struct topo_params p;
    fabric_leaf_spine(&p, 2, 2, 2);
    p.n_nodes = 3; /* != 2 x 2 */
    CHECK(topo_create(sim, &p, pool) == NULL);
    p.n_nodes = 4;
    p.n_spines = 0;
    CHECK(topo_create(sim, &p, pool) == NULL);
    p.n_spines = 2;
    p.spine_link.rate_bps = 400000000000ull;
    p.spine_link.loss_prob = 3.0;
    CHECK(topo_create(sim, &p, pool) == NULL);
    p.spine_link.loss_prob = 0.0;
    struct topology *t = topo_create(sim, &p, pool);
    CHECK(t != NULL);
    CHECK_EQ_U64(link_get_params(topo_find_link(t, "spine1->leaf0"))->rate_bps, 400000000000ull);
    CHECK_EQ_U64(link_get_params(topo_find_link(t, "spine1->leaf0"))->queue_bytes, 1u << 20);
    CHECK_EQ_U64(link_get_params(topo_find_link(t, "node0->leaf0"))->rate_bps, 100000000000ull);
    CHECK_EQ_U64(link_get_params(topo_find_link(t, "node0->leaf0"))->queue_bytes, 0);
    topo_destroy(t);
    pkt_pool_destroy(pool);
    sim_destroy(sim);
}

static void test_all_to_all(void)
{
    for (int m = 0; m < ROUTE_MODE_COUNT; m++) {
        struct fab f;
        fab_init(&f, 3, 3, 2, 2, (enum route_mode)m, 0);
        const uint32_t n = 6, per = 30;
        for (uint32_t k = 0; k < per; k++)
            for (uint32_t s = 0; s < n; s++)
                for (uint32_t d = 0; d < n; d++)
                    if (s != d)
                        send1(&f, s, d, s * 100 + d);
        sim_run(f.sim, SIM_TIME_NEVER);
        uint64_t total = 0, wrong = 0, reordered = 0;
        for (uint32_t d = 0; d < n; d++) {
            CHECK_EQ_U64(f.rx[d].n, (n - 1) * per);
            for (uint32_t s = 0; s < n; s++)
                CHECK_EQ_U64(f.rx[d].from[s], s == d ? 0 : per);
            CHECK_EQ_U64(topo_node_counters(f.t, d)->pkts_delivered, (n - 1) * per);
            total += f.rx[d].n;
            wrong += f.rx[d].wrong_dst;
            reordered += f.rx[d].reordered;
        }
        CHECK_EQ_U64(total, n * (n - 1) * per);
        CHECK_EQ_U64(wrong, 0);
        CHECK_EQ_U64(all_link_drops(&f), 0);
        /* one path per flow: never reordered */
        if (m == ROUTE_ECMP || m == ROUTE_STATIC)
            CHECK_EQ_U64(reordered, 0);
        printf("all-to-all %-8s: %" PRIu64 " frames delivered, %" PRIu64 " reordered\n",
               route_mode_name((enum route_mode)m), total, reordered);
        fab_fini(&f);
    }
}

/* Which leaf0->spine link a flow node0 -> node1 takes (-1: none or several). */
static int flow_spine(struct fab *f, unsigned spines, uint32_t flow, unsigned frames)
{
    uint64_t before[8], hit = 0;
    int which = -1;
    char name[32];
    for (unsigned k = 0; k < spines; k++) {
        snprintf(name, sizeof(name), "leaf0->spine%u", k);
        before[k] = sent_on(f, name);
    }
    for (unsigned i = 0; i < frames; i++)
        send1(f, 0, 1, flow);
    sim_run(f->sim, SIM_TIME_NEVER);
    for (unsigned k = 0; k < spines; k++) {
        snprintf(name, sizeof(name), "leaf0->spine%u", k);
        uint64_t d = sent_on(f, name) - before[k];
        if (d) {
            hit++;
            which = d == frames ? (int)k : -1;
        }
    }
    return hit == 1 ? which : -1;
}

static void test_ecmp(void)
{
    struct fab f;
    fab_init(&f, 1, 2, 4, 1, ROUTE_ECMP, 0);
    unsigned per_spine[4] = {0};
    int first[64];
    for (uint32_t flow = 0; flow < 64; flow++) {
        int s = flow_spine(&f, 4, flow + 1, 20);
        CHECK(s >= 0); /* every frame of the flow on one spine */
        first[flow] = s;
        if (s >= 0)
            per_spine[s]++;
    }
    for (unsigned k = 0; k < 4; k++)
        CHECK(per_spine[k] >= 6 && per_spine[k] <= 28); /* 64 flows spread over 4 spines */
    printf("ecmp: 64 flows per spine %u %u %u %u\n", per_spine[0], per_spine[1], per_spine[2],
           per_spine[3]);
    /* stable: the same flows later take the same paths */
    for (uint32_t flow = 0; flow < 64; flow += 7)
        CHECK(flow_spine(&f, 4, flow + 1, 5) == first[flow]);
    CHECK_EQ_U64(f.rx[1].n, 64 * 20 + 10 * 5);
    CHECK_EQ_U64(f.rx[1].reordered, 0);
    fab_fini(&f);
}

/* The issue this guards against: every host's first QP has the same QPN
 * pair and so the same UDP source port; a hash without the IP addresses
 * sent every such flow of a leaf to one spine.  With the 5-tuple each of
 * 4 leaves spreads its 64 flows (one per host, all with the same source
 * port) over its 8 uplinks like balls into bins: mean 8, sd 2.6 per
 * uplink; every uplink gets between 1 and 18 (mean +- 4 sd; an empty bin
 * has probability (7/8)^64 = 2e-4). */
static void test_ecmp_5tuple(void)
{
    struct fab f;
    fab_init(&f, 3, 4, 8, 64, ROUTE_ECMP, 0);
    for (uint32_t i = 0; i < 256; i++)
        send1(&f, i, (i + 64) % 256, 1); /* the same source port for all */
    sim_run(f.sim, SIM_TIME_NEVER);
    unsigned lo = 64, hi = 0;
    for (unsigned l = 0; l < 4; l++)
        for (unsigned k = 0; k < 8; k++) {
            char name[32];
            snprintf(name, sizeof(name), "leaf%u->spine%u", l, k);
            unsigned n = (unsigned)sent_on(&f, name);
            lo = n < lo ? n : lo;
            hi = n > hi ? n : hi;
        }
    printf("ecmp 5-tuple: 64 flows per leaf (one source port) over 8 uplinks: %u..%u per uplink\n",
           lo, hi);
    CHECK(lo >= 1 && hi <= 18);
    for (uint32_t i = 0; i < 256; i++)
        CHECK_EQ_U64(f.rx[i].n, 1);
    fab_fini(&f);
}

/* InfiniBand packets are forwarded by DLID, whatever their flow: on a
 * leaf-spine with 4 spines 160 flows (40 from each of 4 hosts, each its
 * own UDP source port) to node 5 all cross spine 1, those to node 6 spine
 * 2 (DLID - 1 mod 4: the LIDs dealt round robin over leaf0's equal-cost
 * uplinks); the same flows as RoCEv2 packets spread by their 5-tuple over
 * every spine. */
static void ib_flows(struct fab *f, uint32_t dst, bool ib)
{
    for (uint32_t src = 0; src < 4; src++)
        for (uint32_t flow = 1; flow <= 40; flow++) {
            struct pkt *p = pkt_alloc(f->pool);
            p->src_node = src;
            p->dst_node = dst;
            p->frame_bytes = FRAME;
            p->src_qpn = p->dest_qpn = flow;
            p->udp_sport = (uint16_t)(0xc000u | (src * 64 + flow));
            p->framing = ib ? PKT_FRAMING_IB_LOCAL : PKT_FRAMING_ROCEV2;
            p->t_sent_ps = ++f->seq;
            link_send(topo_uplink(f->t, src), p);
        }
    sim_run(f->sim, SIM_TIME_NEVER);
}

static void spines_to_leaf1(struct fab *f, uint64_t per[4])
{
    for (unsigned k = 0; k < 4; k++) {
        char name[32];
        snprintf(name, sizeof(name), "spine%u->leaf1", k);
        per[k] = sent_on(f, name);
    }
}

static void test_ib_dlid(void)
{
    struct fab f;
    fab_init(&f, 1, 2, 4, 4, ROUTE_ECMP, 0);
    uint64_t a[4], b[4], c[4];
    ib_flows(&f, 5, true);
    spines_to_leaf1(&f, a);
    ib_flows(&f, 6, true);
    spines_to_leaf1(&f, b);
    CHECK_EQ_U64(f.rx[5].reordered + f.rx[6].reordered, 0); /* one path per destination */
    ib_flows(&f, 5, false);
    spines_to_leaf1(&f, c);
    /* each destination's 160 frames on exactly one spine, whatever the flow */
    unsigned one_a = 0, one_b = 0;
    for (unsigned k = 0; k < 4; k++) {
        CHECK(a[k] == 0 || a[k] == 160);
        CHECK(b[k] - a[k] == 0 || b[k] - a[k] == 160);
        one_a += a[k] == 160;
        one_b += b[k] - a[k] == 160;
    }
    CHECK_EQ_U64(one_a, 1);
    CHECK_EQ_U64(one_b, 1);
    unsigned used = 0;
    for (unsigned k = 0; k < 4; k++)
        used += c[k] > b[k];
    CHECK_EQ_U64(used, 4); /* RoCEv2: 160 flows hashed over all 4 spines */
    CHECK_EQ_U64(f.rx[5].n, 320);
    CHECK_EQ_U64(f.rx[6].n, 160);
    printf("ib dlid: one spine per destination; roce to node 5 per spine %llu %llu "
           "%llu %llu\n",
           (unsigned long long)(c[0] - b[0]), (unsigned long long)(c[1] - b[1]),
           (unsigned long long)(c[2] - b[2]), (unsigned long long)(c[3] - b[3]));
    fab_fini(&f);
}

static void test_static(void)
{
    struct fab f;
    fab_init(&f, 1, 2, 4, 2, ROUTE_STATIC, 0);
    /* many flows to node 2 and to node 3: by destination only.  leaf0's
     * route set for a node on leaf1 is ports 2..5 (spines 0..3); static
     * takes ports[dst % 4]: spine 2 for node 2, spine 3 for node 3. */
    for (uint32_t flow = 1; flow <= 40; flow++) {
        for (int k = 0; k < 5; k++) {
            send1(&f, 0, 2, flow);
            send1(&f, 1, 3, 1000 + flow);
        }
    }
    sim_run(f.sim, SIM_TIME_NEVER);
    CHECK_EQ_U64(sent_on(&f, "leaf0->spine2"), 200);
    CHECK_EQ_U64(sent_on(&f, "leaf0->spine3"), 200);
    CHECK_EQ_U64(sent_on(&f, "leaf0->spine0") + sent_on(&f, "leaf0->spine1"), 0);
    CHECK_EQ_U64(f.rx[2].n, 200);
    CHECK_EQ_U64(f.rx[3].n, 200);
    fab_fini(&f);
}

struct spray_result {
    uint64_t per_spine[4], reordered, topo_reordered, delivered, drops;
};

/* Two hosts of leaf0 each send one flow to a host of leaf1, back to back:
 * their frames collide at the leaf's uplinks. */
static struct spray_result run_spray(uint64_t seed, enum route_mode mode, unsigned frames)
{
    struct fab f;
    fab_init(&f, seed, 2, 4, 2, mode, 0);
    for (unsigned i = 0; i < frames; i++) {
        send1(&f, 0, 2, 1);
        send1(&f, 1, 3, 2);
    }
    sim_run(f.sim, SIM_TIME_NEVER);
    struct spray_result r = {0};
    char name[32];
    for (unsigned k = 0; k < 4; k++) {
        snprintf(name, sizeof(name), "leaf0->spine%u", k);
        r.per_spine[k] = sent_on(&f, name);
    }
    r.reordered = f.rx[2].reordered + f.rx[3].reordered;
    r.topo_reordered =
        topo_node_counters(f.t, 2)->pkts_reordered + topo_node_counters(f.t, 3)->pkts_reordered;
    r.delivered = f.rx[2].n + f.rx[3].n;
    r.drops = all_link_drops(&f);
    CHECK_EQ_U64(f.rx[2].wrong_dst + f.rx[3].wrong_dst, 0);
    fab_fini(&f);
    return r;
}

static void test_spray(void)
{
    const unsigned frames = 4000;
    struct spray_result r = run_spray(11, ROUTE_SPRAY, frames);
    CHECK_EQ_U64(r.delivered, 2 * frames);
    CHECK_EQ_U64(r.drops, 0);
    double sd = sqrt(2.0 * frames * 0.25 * 0.75);
    for (unsigned k = 0; k < 4; k++)
        CHECK(fabs((double)r.per_spine[k] - 2.0 * frames / 4) <= 5 * sd);
    CHECK(r.reordered > 0); /* different queue occupancies on the spines */
    CHECK_EQ_U64(r.topo_reordered, r.reordered);
    printf("spray: per spine %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 ", %" PRIu64
           " of %u frames reordered\n",
           r.per_spine[0], r.per_spine[1], r.per_spine[2], r.per_spine[3], r.reordered, 2 * frames);
    /* deterministic per seed; another seed sprays differently */
    struct spray_result again = run_spray(11, ROUTE_SPRAY, frames);
    struct spray_result other = run_spray(12, ROUTE_SPRAY, frames);
    CHECK(memcmp(&again, &r, sizeof(r)) == 0);
    CHECK(memcmp(other.per_spine, r.per_spine, sizeof(r.per_spine)) != 0);

    /* the same traffic with ECMP: one path per flow, nothing reordered.
     * Whether the two flows collide depends on the switches' hash seeds
     * (drawn from the scenario seed): when both hash onto one spine, its
     * 100 Gb/s uplink takes 200 Gb/s and overflows its 1 MiB buffer (an
     * ECMP collision); when they do not, nothing is dropped.  About one
     * seed in four collides: both cases show up in 24 seeds. */
    unsigned collided = 0, apart = 0;
    for (uint64_t seed = 11; seed < 35; seed++) {
        struct spray_result e = run_spray(seed, ROUTE_ECMP, frames);
        CHECK_EQ_U64(e.delivered + e.drops, 2 * frames);
        CHECK_EQ_U64(e.per_spine[0] + e.per_spine[1] + e.per_spine[2] + e.per_spine[3],
                     e.delivered);
        CHECK_EQ_U64(e.reordered, 0);
        CHECK_EQ_U64(e.topo_reordered, 0);
        unsigned used = 0;
        for (unsigned k = 0; k < 4; k++)
            used += e.per_spine[k] > 0;
        if (used == 1) {
            collided++;
            CHECK(e.drops > 0);
        } else {
            apart++;
            CHECK_EQ_U64(used, 2);
            CHECK_EQ_U64(e.drops, 0);
        }
    }
    printf("ecmp, 2 flows over 4 spines: %u of 24 seeds collide\n", collided);
    CHECK(collided > 0 && apart > 0);
    /* round robin: exactly a quarter of each flow per spine */
    struct spray_result rr = run_spray(11, ROUTE_SPRAY_RR, frames);
    for (unsigned k = 0; k < 4; k++)
        CHECK_EQ_U64(rr.per_spine[k], 2 * frames / 4);
    CHECK_EQ_U64(rr.delivered, 2 * frames);
    CHECK_EQ_U64(rr.drops, 0);
    CHECK_EQ_U64(rr.topo_reordered, rr.reordered);
}

/* Frames of flow 1 node0 -> node1 at line rate for `n` frames. */
static void burst(struct fab *f, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        send1(f, 0, 1, 1);
}

static void test_failure_local(void)
{
    struct fab f;
    fab_init(&f, 1, 2, 4, 1, ROUTE_ECMP, 0);
    int x = flow_spine(&f, 4, 1, 10);
    CHECK(x >= 0);
    if (x < 0) {
        fab_fini(&f);
        return;
    }
    char xup[32], xdown[32];
    snprintf(xup, sizeof(xup), "leaf0->spine%d", x);
    snprintf(xdown, sizeof(xdown), "spine%d->leaf1", x);
    struct link *lx = topo_find_link(f.t, xup);
    uint64_t x0 = sent_on(&f, xup);
    sim_time_t t0 = sim_now(f.sim);
    /* 1000 frames take 86.88 us to leave node0; the flow's uplink fails
     * at +20 us and comes back at +60 us */
    burst(&f, 1000);
    CHECK(topo_schedule_link_state(f.t, lx, t0 + 20 * SIM_US, false) == 0);
    CHECK(topo_schedule_link_state(f.t, lx, t0 + 60 * SIM_US, true) == 0);
    sim_run(f.sim, t0 + 40 * SIM_US);
    CHECK(!link_is_up(lx));
    CHECK(topo_schedule_link_state(f.t, lx, t0, true) == -1); /* in the past */
    const uint32_t *ports;
    CHECK_EQ_U64(switch_route_ports(topo_switch(f.t, 0), 1, &ports), 3); /* rerouted */
    sim_run(f.sim, SIM_TIME_NEVER);
    CHECK(link_is_up(lx));
    CHECK_EQ_U64(switch_route_ports(topo_switch(f.t, 0), 1, &ports), 4);
    const struct link_counters *c = link_get_counters(lx);
    /* only what was queued on, on the wire of or in the cable of the dead
     * link is lost: at most one frame each */
    CHECK(c->pkts_dropped_down >= 1 && c->pkts_dropped_down <= 3);
    CHECK_EQ_U64(f.rx[1].n + c->pkts_dropped_down, 10 + 1000);
    CHECK_EQ_U64(all_link_drops(&f), c->pkts_dropped_down);
    /* 40 us on another spine (~460 frames), the rest on x */
    uint64_t other = 0;
    for (int k = 0; k < 4; k++) {
        char name[32];
        snprintf(name, sizeof(name), "leaf0->spine%d", k);
        if (k != x)
            other += sent_on(&f, name);
    }
    CHECK(other >= 455 && other <= 465);
    CHECK(sent_on(&f, xup) - x0 + other >= 1000 - 3);
    CHECK(sent_on(&f, xdown) > 500);
    printf("local failure: %" PRIu64 " lost on %s, %" PRIu64 " rerouted\n", c->pkts_dropped_down,
           xup, other);
    fab_fini(&f);
}

static void test_failure_remote(void)
{
    struct fab f;
    fab_init(&f, 1, 2, 4, 1, ROUTE_ECMP, 10 * SIM_US);
    int x = flow_spine(&f, 4, 1, 10);
    CHECK(x >= 0);
    if (x < 0) {
        fab_fini(&f);
        return;
    }
    char xdown[32];
    snprintf(xdown, sizeof(xdown), "spine%d->leaf1", x);
    struct link *lx = topo_find_link(f.t, xdown);
    struct fswitch *spine = topo_switch(f.t, 2 + (unsigned)x);
    sim_time_t t0 = sim_now(f.sim);
    burst(&f, 1000);
    CHECK(topo_schedule_link_state(f.t, lx, t0 + 20 * SIM_US, false) == 0);
    CHECK(topo_schedule_link_state(f.t, lx, t0 + 50 * SIM_US, true) == 0);
    /* leaf0 learns of the remote failure only 10 us later: until then the
     * spine has no usable port for node 1 and drops */
    sim_run(f.sim, t0 + 25 * SIM_US);
    const uint32_t *ports;
    CHECK_EQ_U64(switch_route_ports(topo_switch(f.t, 0), 1, &ports), 4);
    sim_run(f.sim, t0 + 35 * SIM_US);
    CHECK_EQ_U64(switch_route_ports(topo_switch(f.t, 0), 1, &ports), 3);
    sim_run(f.sim, SIM_TIME_NEVER);
    CHECK_EQ_U64(switch_route_ports(topo_switch(f.t, 0), 1, &ports), 4); /* back after 60 us */
    uint64_t sw_drops = switch_get_counters(spine)->pkts_dropped_down;
    uint64_t link_drops = link_get_counters(lx)->pkts_dropped_down;
    /* 10 us of frames at 86.88 ns each: 115 */
    CHECK(sw_drops >= 112 && sw_drops <= 117);
    CHECK(link_drops <= 3);
    CHECK_EQ_U64(f.rx[1].n + sw_drops + link_drops, 10 + 1000);
    CHECK_EQ_U64(all_link_drops(&f), sw_drops + link_drops);
    printf("remote failure, 10 us to reroute: %" PRIu64 " dropped at the spine, %" PRIu64
           " on the link\n",
           sw_drops, link_drops);
    fab_fini(&f);
}

static void test_failure_no_path(void)
{
    struct sim *sim = sim_create(1);
    struct pkt_pool *pool = pkt_pool_create();
    struct topo_params p;
    fabric_defaults(&p);
    p.n_nodes = 3;
    struct topology *t = topo_create(sim, &p, pool);
    struct node_rx rx[3] = {{.node = 0}, {.node = 1}, {.node = 2}};
    for (uint32_t i = 0; i < 3; i++)
        topo_attach(t, i, (struct fabric_sink){.rx = node_record, .ctx = &rx[i]});
    struct link *cut = topo_find_link(t, "sw0->node1");
    topo_set_link_up(t, cut, false);
    const uint32_t *ports;
    CHECK_EQ_U64(switch_route_ports(topo_switch(t, 0), 1, &ports), 0);
    for (int k = 0; k < 10; k++) {
        struct pkt *a = pkt_alloc(pool), *b = pkt_alloc(pool);
        a->src_node = b->src_node = 0;
        a->dst_node = 1;
        b->dst_node = 2;
        a->frame_bytes = b->frame_bytes = FRAME;
        link_send(topo_uplink(t, 0), a);
        link_send(topo_uplink(t, 0), b);
    }
    sim_run(sim, SIM_TIME_NEVER);
    CHECK_EQ_U64(rx[1].n, 0);
    CHECK_EQ_U64(rx[2].n, 10);
    CHECK_EQ_U64(switch_get_counters(topo_switch(t, 0))->pkts_dropped_no_route, 10);
    topo_set_link_up(t, cut, true);
    CHECK_EQ_U64(switch_route_ports(topo_switch(t, 0), 1, &ports), 1);
    struct pkt *a = pkt_alloc(pool);
    a->dst_node = 1;
    a->frame_bytes = FRAME;
    link_send(topo_uplink(t, 0), a);
    sim_run(sim, SIM_TIME_NEVER);
    CHECK_EQ_U64(rx[1].n, 1);
    /* a failed NIC uplink: everything sent is dropped there */
    topo_set_link_up(t, topo_uplink(t, 2), false);
    for (int k = 0; k < 5; k++) {
        struct pkt *q = pkt_alloc(pool);
        q->src_node = 2;
        q->dst_node = 0;
        q->frame_bytes = FRAME;
        link_send(topo_uplink(t, 2), q);
    }
    sim_run(sim, SIM_TIME_NEVER);
    CHECK_EQ_U64(rx[0].n, 0);
    CHECK_EQ_U64(link_get_counters(topo_uplink(t, 2))->pkts_dropped_down, 5);
    CHECK(topo_schedule_link_state(t, NULL, sim_now(sim), true) == -1);
    topo_destroy(t);
    pkt_pool_destroy(pool);
    sim_destroy(sim);
}

/* Oversubscription: 4 hosts per leaf over S spines is 4:S.  Each host of
 * leaf 0 sends 50 frames to its peer on leaf 1 (static routing: one spine
 * per destination).  With 4 spines every flow has its own spine and all
 * are done after ~50 frame times; with 1 spine (4:1) the leaf's only
 * uplink carries 200 frames, 4x as long. */
static sim_time_t oversub_run(unsigned spines)
{
    struct fab f;
    fab_init(&f, 1, 2, spines, 4, ROUTE_STATIC, 0);
    for (uint32_t k = 0; k < 50; k++)
        for (uint32_t i = 0; i < 4; i++)
            send1(&f, i, 4 + i, i);
    sim_run(f.sim, SIM_TIME_NEVER);
    for (uint32_t i = 0; i < 4; i++)
        CHECK_EQ_U64(f.rx[4 + i].n, 50);
    sim_time_t t = sim_now(f.sim);
    fab_fini(&f);
    return t;
}

static void test_oversubscription(void)
{
    sim_time_t full = oversub_run(4), over = oversub_run(1);
    /* 4 cables, 3 switches (latency, store and forward), + 50 (200) frames */
    sim_time_t fixed = 4 * 5 * SIM_NS + 3 * 300 * SIM_NS + 3 * SER_PS;
    printf("oversubscription: 4:4 done at %.3f us, 4:1 at %.3f us\n", full / 1e6, over / 1e6);
    CHECK(full >= 50 * SER_PS && full <= fixed + 51 * SER_PS);
    CHECK(over >= 200 * SER_PS && over <= fixed + 201 * SER_PS);
}

/* A k = 4 fat tree: 16 hosts, 4 pods of 2 edge + 2 agg switches, 4 cores.
 * Paths of 2 links (same edge), 4 (same pod) and 6 (another pod); every
 * frame of an all-to-all delivered to the right host under ECMP, none
 * reordered; flows from one host to another pod spread over both of its
 * edge's aggs and all 4 cores (64 flows into 4 cores: mean 16, sd 3.5,
 * each gets 4..28); with agg0->core0 down the same all-to-all still
 * arrives whole: routes avoid it, nothing is sent into it. */
static void test_fat_tree(void)
{
    struct sim *sim = sim_create(5);
    struct pkt_pool *pool = pkt_pool_create();
    struct topo_params p;
    fabric_defaults(&p);
    p.kind = TOPO_FAT_TREE;
    p.fat_tree_k = 4;
    p.n_nodes = 15;
    CHECK(topo_create(sim, &p, pool) == NULL); /* hosts must be k^3 / 4 */
    p.fat_tree_k = 3;
    p.n_nodes = 6;
    CHECK(topo_create(sim, &p, pool) == NULL); /* k must be even */
    p.fat_tree_k = 4;
    p.n_nodes = 16;
    struct fab f;
    memset(&f, 0, sizeof(f));
    f.sim = sim;
    f.pool = pool;
    f.t = topo_create(sim, &p, pool);
    CHECK(f.t != NULL);
    if (!f.t)
        return;
    for (uint32_t i = 0; i < 16; i++) {
        f.rx[i].node = i;
        topo_attach(f.t, i, (struct fabric_sink){.rx = node_record, .ctx = &f.rx[i]});
    }
    CHECK_EQ_U64(topo_n_links(f.t), 2 * 16 + 2 * 16 + 2 * 16); /* host, edge-agg, agg-core */
    CHECK_EQ_U64(topo_n_switches(f.t), 8 + 8 + 4);
    CHECK_STR_CONTAINS(link_name(topo_link(f.t, 0)), "node0->edge0");
    CHECK(topo_find_link(f.t, "agg5->core2") != NULL); /* agg 1 of pod 2: cores 2, 3 */
    CHECK(topo_find_link(f.t, "agg5->core0") == NULL);
    CHECK(topo_find_link(f.t, "core3->agg7") != NULL); /* pod 3's agg 1 */
    CHECK(topo_find_link(f.t, "edge3->agg2") != NULL); /* pod 1 */
    CHECK(topo_find_link(f.t, "edge3->agg0") == NULL);
    struct topo_path_info pi;
    const uint32_t dsts[3] = {1, 2, 4};
    const unsigned hops[3] = {2, 4, 6};
    for (int i = 0; i < 3; i++) {
        CHECK(topo_path(f.t, 0, dsts[i], FRAME + PKT_ETH_PREAMBLE_IFG_BYTES, &pi) == 0);
        CHECK_EQ_U64(pi.links, hops[i]);
        CHECK_EQ_U64(pi.latency_ps, hops[i] * p.link.delay_ps + (hops[i] - 1) * p.sw.latency_ps);
    }
    for (int round = 0; round < 2; round++) {
        for (uint32_t s = 0; s < 16; s++)
            for (uint32_t d = 0; d < 16; d++)
                for (uint32_t k = 0; s != d && k < 10; k++)
                    send1(&f, s, d, s * 100 + d);
        sim_run(sim, SIM_TIME_NEVER);
        for (uint32_t d = 0; d < 16; d++) {
            CHECK_EQ_U64(f.rx[d].n, 15 * 10 * (round + 1));
            CHECK_EQ_U64(f.rx[d].wrong_dst, 0);
            CHECK_EQ_U64(f.rx[d].reordered, 0);
        }
        CHECK_EQ_U64(all_link_drops(&f), 0);
        if (round == 0) {
            /* 64 flows node0 -> node4: both aggs of edge0, all cores */
            uint64_t agg[2], core[4];
            char name[32];
            for (unsigned a = 0; a < 2; a++) {
                snprintf(name, sizeof(name), "edge0->agg%u", a);
                agg[a] = sent_on(&f, name);
            }
            for (unsigned c = 0; c < 4; c++) {
                snprintf(name, sizeof(name), "core%u->agg%u", c, 2 + c / 2);
                core[c] = sent_on(&f, name);
            }
            for (uint32_t flow = 0; flow < 64; flow++)
                send1(&f, 0, 4, 1000 + flow);
            sim_run(sim, SIM_TIME_NEVER);
            for (unsigned a = 0; a < 2; a++) {
                snprintf(name, sizeof(name), "edge0->agg%u", a);
                agg[a] = sent_on(&f, name) - agg[a];
                CHECK(agg[a] >= 16 && agg[a] <= 48);
            }
            for (unsigned c = 0; c < 4; c++) {
                snprintf(name, sizeof(name), "core%u->agg%u", c, 2 + c / 2);
                core[c] = sent_on(&f, name) - core[c];
                CHECK(core[c] >= 4 && core[c] <= 28);
            }
            printf("fat tree k=4: 64 flows over aggs %" PRIu64 " %" PRIu64 ", cores %" PRIu64
                   " %" PRIu64 " %" PRIu64 " %" PRIu64 "\n",
                   agg[0], agg[1], core[0], core[1], core[2], core[3]);
            f.rx[4].n -= 64;
            topo_set_link_up(f.t, topo_find_link(f.t, "agg0->core0"), false);
        }
    }
    CHECK_EQ_U64(link_get_counters(topo_find_link(f.t, "agg0->core0"))->pkts_dropped, 0);
    topo_set_link_up(f.t, topo_find_link(f.t, "agg0->core0"), true);
    sim_run(sim, SIM_TIME_NEVER);
    /* InfiniBand all-to-all (one frame per pair, by DLID): each tier picks
     * its port by its own hash of the DLID, so every aggregation-to-core
     * link carries traffic (the DLID modulo the fan-out at every tier
     * would leave cores 1 and 2 idle) */
    uint64_t before[16];
    for (unsigned a = 0; a < 8; a++)
        for (unsigned c = 0; c < 2; c++) {
            char name[32];
            snprintf(name, sizeof(name), "agg%u->core%u", a, (a % 2) * 2 + c);
            before[a * 2 + c] = sent_on(&f, name);
        }
    for (uint32_t s = 0; s < 16; s++)
        for (uint32_t d = 0; d < 16; d++) {
            if (s == d)
                continue;
            struct pkt *q = pkt_alloc(pool);
            q->src_node = s;
            q->dst_node = d;
            q->frame_bytes = FRAME;
            q->src_qpn = q->dest_qpn = 7;
            q->framing = PKT_FRAMING_IB_LOCAL;
            q->t_sent_ps = ++f.seq;
            link_send(topo_uplink(f.t, s), q);
        }
    sim_run(sim, SIM_TIME_NEVER);
    unsigned idle = 0;
    for (unsigned a = 0; a < 8; a++)
        for (unsigned c = 0; c < 2; c++) {
            char name[32];
            snprintf(name, sizeof(name), "agg%u->core%u", a, (a % 2) * 2 + c);
            idle += sent_on(&f, name) == before[a * 2 + c];
        }
    CHECK_EQ_U64(idle, 0);
    topo_destroy(f.t);
    pkt_pool_destroy(pool);
    sim_destroy(sim);
}

int main(void)
{
    test_shape();
    test_all_to_all();
    test_ecmp();
    test_ecmp_5tuple();
    test_ib_dlid();
    test_static();
    test_spray();
    test_failure_local();
    test_failure_remote();
    test_failure_no_path();
    test_oversubscription();
    test_fat_tree();
    return test_summary();
}
