/* Switch and topologies: defaults, exact one-hop and two-hop delays,
 * routing of all-to-all traffic to the right sinks, no-route drops, incast
 * drop-tail at an egress port (queue never above the port buffer), the
 * back-to-back topology, iterators and late topo_attach. */
#include <stdlib.h>

#include "sim/fabric/fabric.h"
#include "test.h"

#define MAX_NODES 8

struct node_rx {
    uint32_t node;
    uint64_t n, wrong_dst;
    uint64_t from[MAX_NODES];
    sim_time_t first_t, last_t;
    uint64_t last_id_from[MAX_NODES];
    uint64_t out_of_order;
};

static void node_record(struct sim *sim, void *ctx, struct pkt *p)
{
    struct node_rx *r = ctx;
    if (p->dst_node != r->node)
        r->wrong_dst++;
    if (r->n == 0)
        r->first_t = sim_now(sim);
    r->last_t = sim_now(sim);
    r->n++;
    if (p->src_node < MAX_NODES) {
        if (r->from[p->src_node] && p->id <= r->last_id_from[p->src_node])
            r->out_of_order++;
        r->from[p->src_node]++;
        r->last_id_from[p->src_node] = p->id;
    }
}

static uint64_t next_id = 1;

static struct pkt *mk(struct pkt_pool *pool, uint32_t src, uint32_t dst, uint32_t frame_bytes)
{
    struct pkt *p = pkt_alloc(pool);
    p->src_node = src;
    p->dst_node = dst;
    p->frame_bytes = frame_bytes;
    p->id = next_id++;
    return p;
}

/* 1086 B on the wire at 100 Gb/s */
#define SER_1086_PS 86880

static void test_defaults(void)
{
    struct topo_params p;
    fabric_defaults(&p);
    CHECK(p.kind == TOPO_STAR);
    CHECK_EQ_U64(p.n_nodes, 2);
    CHECK_EQ_U64(p.link.rate_bps, 100000000000ull);
    CHECK_EQ_U64(p.link.delay_ps, 5 * SIM_NS);
    CHECK_EQ_U64(p.link.queue_bytes, 0);
    CHECK_EQ_U64(p.sw.latency_ps, 300 * SIM_NS);
    CHECK_EQ_U64(p.sw.port_buffer_bytes, 1u << 20);
    CHECK(p.sw.routing == ROUTE_ECMP);
    CHECK(p.link.loss_prob == 0.0 && p.link.corrupt_prob == 0.0);
    CHECK_EQ_U64(p.reroute_delay_ps, 0);
    CHECK_EQ_U64(p.n_leaves, 2);
    CHECK_EQ_U64(p.n_spines, 2);
    CHECK_EQ_U64(p.hosts_per_leaf, 1);
    CHECK_EQ_U64(p.spine_link.rate_bps, 0);
    CHECK_STR_CONTAINS(route_mode_name(ROUTE_SPRAY_RR), "spray-rr");
    CHECK_STR_CONTAINS(route_mode_name(ROUTE_MODE_COUNT), "?");
}

static void test_star_delay_and_iterators(void)
{
    struct sim *sim = sim_create(1);
    struct pkt_pool *pool = pkt_pool_create();
    struct topo_params p;
    fabric_defaults(&p);
    p.n_nodes = 3;
    struct topology *t = topo_create(sim, &p, pool);
    CHECK(t != NULL);
    CHECK_EQ_U64(topo_n_links(t), 6);
    CHECK_EQ_U64(topo_n_switches(t), 1);
    CHECK(topo_switch(t, 0) != NULL);
    CHECK(topo_switch(t, 1) == NULL);
    CHECK(topo_link(t, 6) == NULL);
    CHECK(topo_uplink(t, 3) == NULL);
    CHECK_STR_CONTAINS(link_name(topo_link(t, 0)), "node0->sw0");
    CHECK_STR_CONTAINS(link_name(topo_link(t, 5)), "sw0->node2");
    CHECK(topo_uplink(t, 1) == topo_link(t, 1));

    /* attach after create */
    struct node_rx rx[3] = {{.node = 0}, {.node = 1}, {.node = 2}};
    for (uint32_t i = 0; i < 3; i++)
        topo_attach(t, i, (struct fabric_sink){.rx = node_record, .ctx = &rx[i]});

    /* one frame node0 -> node1, cut-through (the default): its first bit
     * reaches the switch after the cable (5 ns), leaves 300 ns later, and
     * the egress link serialises it (its last bit arrived meanwhile):
     * cable + latency + egress serialisation + cable */
    link_send(topo_uplink(t, 0), mk(pool, 0, 1, 1066));
    sim_run(sim, SIM_TIME_NEVER);
    CHECK_EQ_U64(rx[1].n, 1);
    CHECK_EQ_U64(rx[1].first_t, 5000 + 300000 + SER_1086_PS + 5000);
    CHECK_EQ_U64(rx[0].n + rx[2].n, 0);
    CHECK_EQ_U64(switch_get_counters(topo_switch(t, 0))->pkts_forwarded, 1);

    /* a burst of 100 frames through the switch keeps line rate: the last
     * arrives 99 serialisation times after the first */
    sim_time_t t0 = sim_now(sim);
    for (unsigned k = 0; k < 100; k++)
        link_send(topo_uplink(t, 2), mk(pool, 2, 0, 1066));
    sim_run(sim, SIM_TIME_NEVER);
    CHECK_EQ_U64(rx[0].n, 100);
    CHECK_EQ_U64(rx[0].first_t - t0, SER_1086_PS + 2 * 5000 + 300000);
    CHECK_EQ_U64(rx[0].last_t - rx[0].first_t, 99 * SER_1086_PS);
    CHECK_EQ_U64(rx[0].out_of_order, 0);

    topo_destroy(t);
    pkt_pool_destroy(pool);
    sim_destroy(sim);
}

/* The store-and-forward option: a frame enters the pipeline when its last
 * bit has arrived, so one hop costs ingress serialisation + latency +
 * egress serialisation.  A switch with 0 latency is still store-and-forward
 * (the last bit), and cut-through never lets the egress finish before the
 * ingress last bit (a faster egress link is clamped). */
static void test_store_and_forward(void)
{
    struct sim *sim = sim_create(1);
    struct pkt_pool *pool = pkt_pool_create();
    struct topo_params p;
    fabric_defaults(&p);
    p.sw.store_and_forward = true;
    struct topology *t = topo_create(sim, &p, pool);
    struct node_rx rx[2] = {{.node = 0}, {.node = 1}};
    for (uint32_t i = 0; i < 2; i++)
        topo_attach(t, i, (struct fabric_sink){.rx = node_record, .ctx = &rx[i]});
    link_send(topo_uplink(t, 0), mk(pool, 0, 1, 1066));
    sim_run(sim, SIM_TIME_NEVER);
    CHECK_EQ_U64(rx[1].first_t, SER_1086_PS + 5000 + 300000 + SER_1086_PS + 5000);
    topo_destroy(t);
    pkt_pool_destroy(pool);
    sim_destroy(sim);

    /* cut-through, no switch latency, egress 4x faster than ingress: the
     * egress cannot finish before the last bit came in (clamp), so the
     * frame arrives one cable after its ingress last bit + one cable */
    sim = sim_create(1);
    pool = pkt_pool_create();
    fabric_defaults(&p);
    p.sw.latency_ps = 0;
    t = topo_create(sim, &p, pool);
    struct link_params fast = *link_get_params(topo_downlink(t, 1));
    fast.rate_bps *= 4;
    link_set_params(topo_downlink(t, 1), &fast);
    memset(rx, 0, sizeof(rx));
    rx[1].node = 1;
    topo_attach(t, 1, (struct fabric_sink){.rx = node_record, .ctx = &rx[1]});
    link_send(topo_uplink(t, 0), mk(pool, 0, 1, 1066));
    sim_run(sim, SIM_TIME_NEVER);
    CHECK_EQ_U64(rx[1].first_t, SER_1086_PS + 5000 + 5000);
    topo_destroy(t);
    pkt_pool_destroy(pool);
    sim_destroy(sim);
}

static void test_all_to_all_routing(void)
{
    struct sim *sim = sim_create(1);
    struct pkt_pool *pool = pkt_pool_create();
    struct topo_params p;
    fabric_defaults(&p);
    p.n_nodes = 5;
    struct topology *t = topo_create(sim, &p, pool);
    struct node_rx rx[5];
    memset(rx, 0, sizeof(rx));
    for (uint32_t i = 0; i < 5; i++) {
        rx[i].node = i;
        topo_attach(t, i, (struct fabric_sink){.rx = node_record, .ctx = &rx[i]});
    }
    /* node s sends (s + d + 1) frames of varying size to every d != s */
    uint64_t expect[5][5] = {{0}};
    for (uint32_t s = 0; s < 5; s++)
        for (uint32_t d = 0; d < 5; d++) {
            if (s == d)
                continue;
            for (uint32_t k = 0; k < s + d + 1; k++)
                link_send(topo_uplink(t, s), mk(pool, s, d, 64 + 100 * k));
            expect[d][s] = s + d + 1;
        }
    sim_run(sim, SIM_TIME_NEVER);
    uint64_t total = 0;
    for (uint32_t d = 0; d < 5; d++) {
        CHECK_EQ_U64(rx[d].wrong_dst, 0);
        CHECK_EQ_U64(rx[d].out_of_order, 0);
        for (uint32_t s = 0; s < 5; s++)
            CHECK_EQ_U64(rx[d].from[s], expect[d][s]);
        total += rx[d].n;
    }
    const struct switch_counters *c = switch_get_counters(topo_switch(t, 0));
    CHECK_EQ_U64(c->pkts_forwarded, total);
    CHECK_EQ_U64(c->pkts_dropped_no_route, 0);
    /* a frame for a node that does not exist: no route */
    struct pkt *stray = mk(pool, 0, 42, 100);
    link_send(topo_uplink(t, 0), stray);
    sim_run(sim, SIM_TIME_NEVER);
    CHECK_EQ_U64(c->pkts_dropped_no_route, 1);
    CHECK_EQ_U64(c->pkts_forwarded, total);

    topo_destroy(t);
    pkt_pool_destroy(pool);
    sim_destroy(sim);
}

static void test_incast(void)
{
    /* nodes 0 and 1 each burst 2000 frames (1086 B on the wire) to node 2.
     * The egress port gets 200 Gb/s for 100 Gb/s out: its 1 MiB buffer
     * (965 frames) fills and then drops about one frame per serialisation
     * time.  The uplinks are unbounded, so both bursts arrive at line rate:
     * delivered = 2000 (served during the burst) + ~965 (the full buffer
     * draining afterwards). */
    struct sim *sim = sim_create(1);
    struct pkt_pool *pool = pkt_pool_create();
    struct topo_params p;
    fabric_defaults(&p);
    p.n_nodes = 3;
    struct topology *t = topo_create(sim, &p, pool);
    struct node_rx rx[3];
    memset(rx, 0, sizeof(rx));
    for (uint32_t i = 0; i < 3; i++) {
        rx[i].node = i;
        topo_attach(t, i, (struct fabric_sink){.rx = node_record, .ctx = &rx[i]});
    }
    const unsigned n = 2000;
    for (unsigned k = 0; k < n; k++) {
        link_send(topo_uplink(t, 0), mk(pool, 0, 2, 1066));
        link_send(topo_uplink(t, 1), mk(pool, 1, 2, 1066));
    }
    sim_run(sim, SIM_TIME_NEVER);
    struct link *egress = topo_link(t, 5);
    CHECK_STR_CONTAINS(link_name(egress), "sw0->node2");
    const struct link_counters *c = link_get_counters(egress);
    uint64_t buffer_frames = (1u << 20) / 1086;
    printf("incast: delivered %llu, dropped %llu, max queue %llu B (buffer %u B)\n",
           (unsigned long long)rx[2].n, (unsigned long long)c->pkts_dropped,
           (unsigned long long)c->max_queue_bytes, 1u << 20);
    CHECK_EQ_U64(rx[2].n + c->pkts_dropped, 2 * n);
    CHECK_EQ_U64(rx[2].n, c->pkts_sent);
    CHECK(c->max_queue_bytes <= (1u << 20));
    CHECK(c->max_queue_bytes > (1u << 20) - 1086);
    CHECK(rx[2].n >= n + buffer_frames - 2 && rx[2].n <= n + buffer_frames + 2);
    CHECK_EQ_U64(c->bytes_dropped, c->pkts_dropped * 1086);
    CHECK_EQ_U64(rx[2].wrong_dst, 0);
    CHECK_EQ_U64(rx[2].out_of_order, 0);
    /* the switch forwarded what the egress accepted */
    CHECK_EQ_U64(switch_get_counters(topo_switch(t, 0))->pkts_forwarded, rx[2].n);
    /* the egress link never idled between its first and last frame */
    CHECK_EQ_U64(rx[2].last_t - rx[2].first_t, (rx[2].n - 1) * SER_1086_PS);
    /* uplinks are unbounded: no drop there */
    CHECK_EQ_U64(link_get_counters(topo_uplink(t, 0))->pkts_dropped, 0);
    topo_destroy(t);
    pkt_pool_destroy(pool);
    sim_destroy(sim);
}

static void test_switch_direct(void)
{
    /* a switch built by hand: route changes, no-route, zero latency */
    struct sim *sim = sim_create(1);
    struct pkt_pool *pool = pkt_pool_create();
    struct switch_params sp = {.latency_ps = 0, .port_buffer_bytes = 0};
    struct fswitch *sw = switch_create(sim, "s", &sp, pool);
    struct link_params lp = {.rate_bps = 10000000000ull, .delay_ps = 0, .queue_bytes = 0};
    struct link *a = link_create(sim, "s->a", &lp, pool), *b = link_create(sim, "s->b", &lp, pool);
    struct node_rx ra = {.node = 7}, rb = {.node = 7};
    link_connect(a, (struct fabric_sink){.rx = node_record, .ctx = &ra});
    link_connect(b, (struct fabric_sink){.rx = node_record, .ctx = &rb});
    CHECK_EQ_U64(switch_add_port(sw, a), 0);
    CHECK_EQ_U64(switch_add_port(sw, b), 1);
    struct fabric_sink in = switch_sink(sw);
    in.rx(sim, in.ctx, mk(pool, 0, 7, 100)); /* no route yet */
    switch_set_route(sw, 7, 0);
    in.rx(sim, in.ctx, mk(pool, 0, 7, 100));
    switch_set_route(sw, 7, 1);
    in.rx(sim, in.ctx, mk(pool, 0, 7, 100));
    switch_set_route(sw, 1000, 1); /* grows the table */
    in.rx(sim, in.ctx, mk(pool, 0, 1000, 100));
    sim_run(sim, SIM_TIME_NEVER);
    CHECK_EQ_U64(ra.n, 1);
    CHECK_EQ_U64(rb.n, 2);
    CHECK_EQ_U64(rb.wrong_dst, 1); /* the one for node 1000, recorded by a node-7 sink */
    /* 120 B at 10 Gb/s = 96 ns, no latency, no delay */
    CHECK_EQ_U64(ra.first_t, 96000);
    const struct switch_counters *c = switch_get_counters(sw);
    CHECK_EQ_U64(c->pkts_dropped_no_route, 1);
    CHECK_EQ_U64(c->pkts_forwarded, 3);
    /* frames inside the forwarding pipeline are freed by switch_destroy */
    sp.latency_ps = SIM_US;
    struct fswitch *slow = switch_create(sim, "slow", &sp, pool);
    switch_add_port(slow, a);
    switch_set_route(slow, 7, 0);
    in = switch_sink(slow);
    for (int k = 0; k < 40; k++)
        in.rx(sim, in.ctx, mk(pool, 0, 7, 100));
    switch_destroy(slow);
    CHECK_EQ_U64(sim_events_pending(sim), 0);
    switch_destroy(sw);
    link_destroy(a);
    link_destroy(b);
    pkt_pool_destroy(pool);
    sim_destroy(sim);
}

static void test_back_to_back(void)
{
    struct sim *sim = sim_create(1);
    struct pkt_pool *pool = pkt_pool_create();
    struct topo_params p;
    fabric_defaults(&p);
    p.kind = TOPO_BACK_TO_BACK;
    p.n_nodes = 3;
    CHECK(topo_create(sim, &p, pool) == NULL);
    p.n_nodes = 2;
    struct topology *t = topo_create(sim, &p, pool);
    CHECK(t != NULL);
    CHECK_EQ_U64(topo_n_links(t), 2);
    CHECK_EQ_U64(topo_n_switches(t), 0);
    CHECK_STR_CONTAINS(link_name(topo_uplink(t, 0)), "node0->node1");
    CHECK_STR_CONTAINS(link_name(topo_uplink(t, 1)), "node1->node0");
    struct node_rx rx[2] = {{.node = 0}, {.node = 1}};
    /* node 1 attached before any traffic, node 0 attached only later: frames
     * for node 0 sent before that are freed, the later ones delivered */
    topo_attach(t, 1, (struct fabric_sink){.rx = node_record, .ctx = &rx[1]});
    link_send(topo_uplink(t, 0), mk(pool, 0, 1, 1066));
    link_send(topo_uplink(t, 1), mk(pool, 1, 0, 1066));
    sim_run(sim, SIM_TIME_NEVER);
    CHECK_EQ_U64(rx[1].n, 1);
    CHECK_EQ_U64(rx[1].first_t, SER_1086_PS + 5000);
    CHECK_EQ_U64(rx[0].n, 0);
    topo_attach(t, 0, (struct fabric_sink){.rx = node_record, .ctx = &rx[0]});
    sim_time_t t0 = sim_now(sim);
    for (unsigned k = 0; k < 500; k++) {
        link_send(topo_uplink(t, 0), mk(pool, 0, 1, 1066));
        link_send(topo_uplink(t, 1), mk(pool, 1, 0, 64));
    }
    sim_run(sim, SIM_TIME_NEVER);
    CHECK_EQ_U64(rx[0].n, 500);
    CHECK_EQ_U64(rx[1].n, 501);
    /* full duplex at line rate: 500 x 1086 B take 500 x 86.88 ns */
    CHECK_EQ_U64(rx[1].last_t - t0, 500ull * SER_1086_PS + 5000);
    CHECK_EQ_U64(rx[0].last_t - t0, 500ull * 6720 + 5000); /* 84 B = 6.72 ns */
    CHECK_EQ_U64(rx[0].wrong_dst + rx[1].wrong_dst, 0);
    topo_destroy(t);
    pkt_pool_destroy(pool);
    sim_destroy(sim);
}

int main(void)
{
    test_defaults();
    test_star_delay_and_iterators();
    test_store_and_forward();
    test_all_to_all_routing();
    test_incast();
    test_switch_direct();
    test_back_to_back();
    return test_summary();
}
