/* UD multicast trees (topology.c "multicast", switch.c forward_mcast) and
 * a programmable switch's own address placed on any switch.
 *
 * Multicast: on a leaf-spine and a fat tree, groups whose members sit
 * under different leaves / edges / pods; every host sends frames to the
 * group.  Every member gets each frame exactly once (a sender that is a
 * member too, as on a star), a non-member none, no link carries a frame
 * twice (no loops: the simulation drains), and only the tree's links carry
 * them.  After the tree's link to a member's leaf fails, the rebuilt tree
 * delivers exactly once again; a member whose downlink fails still reaches
 * every other member; a frame a switch makes itself reaches every member
 * once; members that leave stop receiving.  A frame the old tree has in
 * flight when a failure moves the tree arrives over a cable that is no
 * longer on it and is dropped there, so no member gets it twice.  On a ring the tree is the ring
 * cut opposite its root, rebuilt the other way round when a cable fails.
 *
 * Placement: with switch_node set on a spine, a fat-tree core or an edge,
 * every other switch's route to the switch's node id leads there along the
 * shortest paths (checked against a walk of the routes), and a frame sent
 * to it from every host arrives at that switch (counted by an ingress hook,
 * as sim/pswitch attaches itself). */
#include <errno.h>
#include <stdlib.h>

#include "sim/fabric/fabric.h"
#include "test.h"

#define MAX_NODES 64
#define FRAME 200

struct rx {
    uint64_t n;
    uint64_t from[MAX_NODES];
};

static void record(struct sim *sim, void *ctx, struct pkt *p)
{
    (void)sim;
    struct rx *r = ctx;
    r->n++;
    if (p->src_node < MAX_NODES)
        r->from[p->src_node]++;
}

struct fab {
    struct sim *sim;
    struct pkt_pool *pool;
    struct topology *t;
    struct rx rx[MAX_NODES];
    unsigned n;
};

static bool fab_init(struct fab *f, const struct topo_params *p)
{
    memset(f, 0, sizeof(*f));
    f->sim = sim_create(3);
    f->pool = pkt_pool_create();
    f->t = topo_create(f->sim, p, f->pool);
    f->n = p->n_nodes;
    CHECK(f->t != NULL);
    for (uint32_t i = 0; f->t && i < f->n; i++)
        topo_attach(f->t, i, (struct fabric_sink){.rx = record, .ctx = &f->rx[i]});
    return f->t != NULL;
}

static void fab_fini(struct fab *f)
{
    topo_destroy(f->t);
    pkt_pool_destroy(f->pool);
    sim_destroy(f->sim);
}

static void send_to(struct fab *f, uint32_t src, uint32_t dst, uint32_t flow)
{
    struct pkt *p = pkt_alloc(f->pool);
    p->src_node = src;
    p->dst_node = dst;
    p->frame_bytes = FRAME;
    p->src_qpn = p->dest_qpn = flow;
    p->udp_sport = (uint16_t)(0xc000u | (flow & 0x3fffu));
    link_send(topo_uplink(f->t, src), p);
}

static uint64_t link_sent(const struct fab *f, unsigned i)
{
    return link_get_counters(topo_link(f->t, i))->pkts_sent;
}

/* Every host sends `k` frames to group g; members (mask) must get each
 * exactly once, others none, and no link may carry more frames than were
 * sent (a frame crosses a link at most once).  Returns the frames that
 * crossed switch-to-switch links. */
static uint64_t mc_round(struct fab *f, uint32_t g, const bool *member, unsigned k)
{
    struct rx before[MAX_NODES];
    memcpy(before, f->rx, sizeof(before));
    uint64_t *l0 = calloc(topo_n_links(f->t), sizeof(*l0));
    for (unsigned i = 0; i < topo_n_links(f->t); i++)
        l0[i] = link_sent(f, i);
    for (uint32_t s = 0; s < f->n; s++)
        for (unsigned j = 0; j < k; j++)
            send_to(f, s, PKT_MCAST_NODE | g, s * 100 + j);
    /* a loop would never drain: 1 ms is ample for these few frames */
    CHECK(sim_run(f->sim, sim_now(f->sim) + 1000 * SIM_US) == SIM_RUN_DONE);
    for (uint32_t d = 0; d < f->n; d++)
        for (uint32_t s = 0; s < f->n; s++)
            CHECK_EQ_U64(f->rx[d].from[s] - before[d].from[s], member[d] ? k : 0);
    uint64_t inner = 0;
    for (unsigned i = 0; i < topo_n_links(f->t); i++) {
        uint64_t sent = link_sent(f, i) - l0[i];
        CHECK(sent <= (uint64_t)f->n * k); /* each frame at most once per link */
        const char *name = link_name(topo_link(f->t, i));
        if (strncmp(name, "node", 4) != 0 && !strstr(name, "->node"))
            inner += sent;
    }
    free(l0);
    return inner;
}

/* A 4-leaf x 3-spine leaf-spine, 2 hosts a leaf (h0 h1 | h2 h3 | h4 h5 |
 * h6 h7), and group 5 with members on leaves 0, 1, 2 and none on leaf 3. */
static bool ls_group(struct fab *f, uint32_t g, bool *member)
{
    struct topo_params p;
    fabric_leaf_spine(&p, 4, 3, 2);
    if (!fab_init(f, &p))
        return false;
    const uint32_t m[] = {1, 2, 3, 5};
    for (unsigned i = 0; i < 4; i++) {
        CHECK(topo_mcast_join(f->t, g, m[i], true) == 0);
        member[m[i]] = true;
    }
    return true;
}

static void test_leaf_spine(void)
{
    struct fab f;
    const uint32_t g = 5;
    bool member[MAX_NODES] = {0};
    if (!ls_group(&f, g, member))
        return;
    CHECK(topo_mcast_join(f.t, g, 2, true) == 0); /* joining twice: once */
    uint64_t inner = mc_round(&f, g, member, 3);
    /* on the tree (one spine, 4 leaves): up from each of 4 leaves, down to
     * the 3 member leaves but the sender's; 24 frames: 6 senders per leaf
     * pattern -- just bound it: far fewer than flooding every cable */
    CHECK(inner > 0 && inner <= 24 * 4);
    /* only one spine carries the group */
    unsigned spines_used = 0;
    for (unsigned s = 0; s < 3; s++) {
        char name[32];
        uint64_t n = 0;
        for (unsigned l = 0; l < 4; l++) {
            snprintf(name, sizeof(name), "spine%u->leaf%u", s, l);
            n += link_get_counters(topo_find_link(f.t, name))->pkts_sent;
        }
        spines_used += n > 0;
    }
    CHECK_EQ_U64(spines_used, 1);
    /* fail the root spine's cable to leaf 1: the tree moves to another
     * spine (or another root), still exactly once */
    char name[32];
    unsigned root = 0;
    for (unsigned s = 0; s < 3; s++) {
        snprintf(name, sizeof(name), "spine%u->leaf1", s);
        if (link_get_counters(topo_find_link(f.t, name))->pkts_sent)
            root = s;
    }
    snprintf(name, sizeof(name), "spine%u->leaf1", root);
    topo_set_link_up(f.t, topo_find_link(f.t, name), false);
    mc_round(&f, g, member, 2);
    snprintf(name, sizeof(name), "spine%u->leaf1", root);
    CHECK_EQ_U64(link_get_counters(topo_find_link(f.t, name))->pkts_dropped, 0);
    /* members leave */
    CHECK(topo_mcast_join(f.t, g, 2, false) == 0);
    CHECK(topo_mcast_join(f.t, g, 5, false) == 0);
    member[2] = member[5] = false;
    mc_round(&f, g, member, 2);
    fab_fini(&f);
}

/* A sender that is not a member (a send-only UD sender) on a rack with no
 * members: when the root spine's cable to that rack fails, the tree moves
 * to a root that still reaches it, so its frames keep reaching every
 * member (a tree that only reached the members' racks dropped them). */
static void test_nonmember_rack(void)
{
    struct fab f;
    const uint32_t g = 5;
    bool member[MAX_NODES] = {0};
    if (!ls_group(&f, g, member))
        return;
    mc_round(&f, g, member, 1);
    unsigned root = 3;
    for (unsigned s = 0; s < 3; s++) {
        char name[32];
        snprintf(name, sizeof(name), "spine%u->leaf1", s);
        if (link_get_counters(topo_find_link(f.t, name))->pkts_sent)
            root = s;
    }
    CHECK(root < 3);
    char name[32];
    snprintf(name, sizeof(name), "spine%u->leaf3", root);
    topo_set_link_up(f.t, topo_find_link(f.t, name), false);
    snprintf(name, sizeof(name), "leaf3->spine%u", root);
    topo_set_link_up(f.t, topo_find_link(f.t, name), false);
    mc_round(&f, g, member, 2); /* h6, h7 on leaf 3 still reach every member once */
    fab_fini(&f);
}

/* A member whose downlink fails keeps sending: its frames still come up
 * from its rack (the wiring's rack, not the unicast map's "unreachable")
 * and reach every other member once, on every leaf; it gets none.  Before,
 * the switch judged such a sender as having no rack and kept its frames on
 * its own leaf. */
static void test_sender_downlink_down(void)
{
    struct fab f;
    const uint32_t g = 5;
    bool member[MAX_NODES] = {0};
    if (!ls_group(&f, g, member))
        return;
    topo_set_link_up(f.t, topo_find_link(f.t, "leaf1->node3"), false);
    member[3] = false; /* it cannot receive: mc_round expects nothing there */
    mc_round(&f, g, member, 2);
    CHECK_EQ_U64(f.rx[5].from[3], 2); /* h5 on leaf 2 got h3's frames */
    CHECK_EQ_U64(f.rx[1].from[3], 2); /* and h1 on leaf 0 */
    fab_fini(&f);
}

/* A frame a switch makes itself (a programmable switch's program: it came
 * in on no port) goes to every branch of the group's tree there, up
 * included: from leaf 0 each member on leaves 0, 1 and 2 gets it once.
 * Judged by the source's rack, as before, it went only down (h1 alone). */
static void test_switch_origin(void)
{
    struct fab f;
    const uint32_t g = 5;
    bool member[MAX_NODES] = {0};
    if (!ls_group(&f, g, member))
        return;
    struct topo_params p;
    fabric_leaf_spine(&p, 4, 3, 2);
    int leaf0 = topo_switch_index(&p, "leaf0");
    CHECK(leaf0 >= 0);
    if (leaf0 < 0) {
        fab_fini(&f);
        return;
    }
    for (unsigned j = 0; j < 3; j++) {
        struct pkt *q = pkt_alloc(f.pool);
        q->src_node = f.n; /* the switch's own node id */
        q->dst_node = PKT_MCAST_NODE | g;
        q->frame_bytes = FRAME;
        q->src_qpn = q->dest_qpn = 900 + j;
        switch_forward(topo_switch(f.t, (unsigned)leaf0), q);
    }
    CHECK(sim_run(f.sim, sim_now(f.sim) + 1000 * SIM_US) == SIM_RUN_DONE);
    for (uint32_t d = 0; d < f.n; d++)
        CHECK_EQ_U64(f.rx[d].n, member[d] ? 3 : 0);
    fab_fini(&f);
}

/* A frame in flight on the old tree when a failure moves the tree: h0's
 * frame is on the root spine's cables down to leaves 1 and 2 when the
 * root's cable to leaf 3 fails (leaf 3 has hosts, so the root moves to
 * another spine).  The copies arrive at leaves 1 and 2 over cables that
 * are no longer on the tree and are dropped there (counted).  Copied to
 * every branch instead, as before, they went up to the new root and down
 * again: h1 (on h0's leaf, served directly) and the members on leaves 1
 * and 2 each got the frame twice. */
static void test_in_flight_when_the_tree_moves(void)
{
    struct topo_params p;
    fabric_leaf_spine(&p, 4, 3, 2);
    p.spine_link.delay_ps = 2 * SIM_US; /* long enough to catch a frame on the cable */
    struct fab f;
    if (!fab_init(&f, &p))
        return;
    const uint32_t g = 5, m[] = {1, 2, 3, 5};
    bool member[MAX_NODES] = {0};
    for (unsigned i = 0; i < 4; i++) {
        CHECK(topo_mcast_join(f.t, g, m[i], true) == 0);
        member[m[i]] = true;
    }
    mc_round(&f, g, member, 1);
    unsigned root = 3;
    char name[32];
    for (unsigned s = 0; s < 3; s++) {
        snprintf(name, sizeof(name), "spine%u->leaf2", s);
        if (link_get_counters(topo_find_link(f.t, name))->pkts_sent)
            root = s;
    }
    CHECK(root < 3);
    if (root == 3) {
        fab_fini(&f);
        return;
    }
    snprintf(name, sizeof(name), "spine%u->leaf2", root);
    const struct link *down2 = topo_find_link(f.t, name);
    uint64_t sent0 = link_get_counters(down2)->pkts_sent;
    struct rx before[MAX_NODES];
    memcpy(before, f.rx, sizeof(before));
    send_to(&f, 0, PKT_MCAST_NODE | g, 4242);
    while (link_get_counters(down2)->pkts_sent == sent0 && sim_now(f.sim) < 100 * SIM_US)
        sim_run(f.sim, sim_now(f.sim) + 100 * SIM_NS);
    CHECK_EQ_U64(link_get_counters(down2)->pkts_sent, sent0 + 1); /* on its way to leaf 2 */
    snprintf(name, sizeof(name), "spine%u->leaf3", root);
    topo_set_link_up(f.t, topo_find_link(f.t, name), false);
    snprintf(name, sizeof(name), "leaf3->spine%u", root);
    topo_set_link_up(f.t, topo_find_link(f.t, name), false);
    CHECK(sim_run(f.sim, sim_now(f.sim) + 1000 * SIM_US) == SIM_RUN_DONE);
    for (uint32_t d = 0; d < f.n; d++)
        CHECK(f.rx[d].from[0] - before[d].from[0] <= (member[d] ? 1u : 0u));
    CHECK_EQ_U64(f.rx[1].from[0] - before[1].from[0], 1); /* h0's leaf: before the move */
    uint64_t off = 0;
    for (unsigned s = 0; s < topo_n_switches(f.t); s++)
        off += switch_get_counters(topo_switch(f.t, s))->pkts_dropped_mcast_off_tree;
    CHECK_EQ_U64(off, 2);       /* the copies to leaves 1 and 2 */
    mc_round(&f, g, member, 2); /* and exactly once on the new tree */
    fab_fini(&f);
}

static void test_fat_tree(void)
{
    struct topo_params p;
    fabric_defaults(&p);
    p.kind = TOPO_FAT_TREE;
    p.fat_tree_k = 4;
    p.n_nodes = 16; /* edge e: hosts 2e, 2e+1; pod = e / 2 */
    struct fab f;
    if (!fab_init(&f, &p))
        return;
    bool member[MAX_NODES] = {0};
    const uint32_t m[] = {0, 1, 3, 9, 14}; /* pods 0 (two edges), 2, 3 */
    for (unsigned i = 0; i < 5; i++) {
        CHECK(topo_mcast_join(f.t, 2, m[i], true) == 0);
        member[m[i]] = true;
    }
    mc_round(&f, 2, member, 2);
    /* a second group rooted elsewhere, alongside */
    bool m2[MAX_NODES] = {0};
    m2[4] = m2[15] = true;
    CHECK(topo_mcast_join(f.t, 3, 4, true) == 0);
    CHECK(topo_mcast_join(f.t, 3, 15, true) == 0);
    mc_round(&f, 3, m2, 2);
    mc_round(&f, 2, member, 1);
    /* every member in one pod (edges 0 and 1): the pod's aggregation
     * switches have the whole group below, so frames from the other pods'
     * senders come down over a tree cable that sends nothing up */
    bool m3[MAX_NODES] = {0};
    m3[0] = m3[2] = true;
    CHECK(topo_mcast_join(f.t, 6, 0, true) == 0);
    CHECK(topo_mcast_join(f.t, 6, 2, true) == 0);
    mc_round(&f, 6, m3, 2);
    fab_fini(&f);
}

static void test_star_and_ring(void)
{
    struct topo_params p;
    fabric_defaults(&p);
    p.n_nodes = 4;
    struct fab f;
    if (!fab_init(&f, &p))
        return;
    bool member[MAX_NODES] = {0};
    member[0] = member[2] = true;
    CHECK(topo_mcast_join(f.t, 1, 0, true) == 0);
    CHECK(topo_mcast_join(f.t, 1, 2, true) == 0);
    mc_round(&f, 1, member, 2); /* the sender, a member, gets its own copy */
    fab_fini(&f);
    /* a ring of 6: the tree is the ring cut opposite its root; every
     * member once, no cable twice (mc_round), also after a ring cable
     * fails (the tree is rebuilt round the other way) and after a second
     * group joins with another root */
    fabric_defaults(&p);
    p.kind = TOPO_RING;
    p.n_nodes = 6;
    if (!fab_init(&f, &p))
        return;
    bool rm[MAX_NODES] = {0};
    const uint32_t rmem[] = {0, 2, 3, 5};
    for (unsigned i = 0; i < 4; i++) {
        CHECK(topo_mcast_join(f.t, 1, rmem[i], true) == 0);
        rm[rmem[i]] = true;
    }
    uint64_t inner = mc_round(&f, 1, rm, 2);
    CHECK(inner > 0 && inner <= 6 * 2 * 5); /* a tree of 5 cables, each at most once a frame */
    topo_set_link_up(f.t, topo_find_link(f.t, "ring1->ring2"), false);
    topo_set_link_up(f.t, topo_find_link(f.t, "ring2->ring1"), false);
    mc_round(&f, 1, rm, 2);
    bool rm2[MAX_NODES] = {0};
    CHECK(topo_mcast_join(f.t, 4, 1, true) == 0);
    CHECK(topo_mcast_join(f.t, 4, 4, true) == 0);
    rm2[1] = rm2[4] = true;
    mc_round(&f, 4, rm2, 1);
    mc_round(&f, 1, rm, 1);
    fab_fini(&f);
}

/* ---------------------------------------------------------------- placement */

static unsigned hook_n;
static void hook_rx(struct sim *sim, void *ctx, struct pkt *p)
{
    (void)sim;
    struct fab *f = ctx;
    hook_n++;
    pkt_free(f->pool, p);
}

static void check_placement(struct topo_params *p, const char *at_name, unsigned hops_max)
{
    int at = topo_switch_index(p, at_name);
    CHECK(at >= 0);
    if (at < 0)
        return;
    p->switch_node = true;
    p->switch_node_at = (unsigned)at;
    struct fab f;
    if (!fab_init(&f, p))
        return;
    struct fswitch *target = topo_switch(f.t, (unsigned)at);
    CHECK_STR_CONTAINS(switch_name(target), at_name);
    /* every other switch: every route port towards the node leads, hop by
     * hop along first ports, to the target within hops_max (the diameter
     * between switches: shortest paths, no loop) */
    for (unsigned s = 0; s < topo_n_switches(f.t); s++) {
        if (s == (unsigned)at)
            continue;
        const struct fswitch *sw = topo_switch(f.t, s);
        const uint32_t *ports;
        unsigned np = switch_route_ports(sw, p->n_nodes, &ports);
        CHECK(np > 0);
        for (unsigned i = 0; i < np; i++) {
            const struct fswitch *cur = sw;
            uint32_t port = ports[i];
            unsigned hops = 0;
            while (hops++ < hops_max) {
                const char *name = link_name(switch_port(cur, port));
                const char *to = strstr(name, "->") + 2;
                const struct fswitch *next = NULL;
                for (unsigned k = 0; k < topo_n_switches(f.t) && !next; k++)
                    if (strcmp(switch_name(topo_switch(f.t, k)), to) == 0)
                        next = topo_switch(f.t, k);
                CHECK(next != NULL); /* never to a host */
                if (!next || next == target)
                    break;
                const uint32_t *np2;
                CHECK(switch_route_ports(next, p->n_nodes, &np2) > 0);
                cur = next;
                port = np2[0];
            }
            CHECK(hops <= hops_max);
        }
    }
    hook_n = 0;
    switch_set_ingress_hook(target, (struct fabric_sink){.rx = hook_rx, .ctx = &f});
    for (uint32_t s = 0; s < f.n; s++)
        send_to(&f, s, p->n_nodes, s);
    sim_run(f.sim, SIM_TIME_NEVER);
    CHECK_EQ_U64(hook_n, f.n);
    fab_fini(&f);
}

static void test_placement(void)
{
    struct topo_params p;
    fabric_leaf_spine(&p, 3, 2, 2);
    check_placement(&p, "spine1", 2); /* spine0: via a leaf */
    fabric_leaf_spine(&p, 3, 2, 2);
    check_placement(&p, "leaf2", 2);
    CHECK(topo_switch_index(&p, "leaf3") == -1 && topo_switch_index(&p, "spine2") == -1);
    CHECK(topo_switch_index(&p, "leaf01") == -1 && topo_switch_index(&p, "core0") == -1);
    CHECK(topo_switch_index(&p, "spine0") == 3);
    fabric_defaults(&p);
    p.kind = TOPO_FAT_TREE;
    p.fat_tree_k = 4;
    p.n_nodes = 16;
    check_placement(&p, "core3", 4); /* core0: agg, edge, agg */
    check_placement(&p, "edge5", 4);
    check_placement(&p, "agg2", 4);
    fabric_defaults(&p);
    p.kind = TOPO_RING;
    p.n_nodes = 5;
    check_placement(&p, "ring3", 2);
}

int main(void)
{
    test_leaf_spine();
    test_nonmember_rack();
    test_sender_downlink_down();
    test_switch_origin();
    test_in_flight_when_the_tree_moves();
    test_fat_tree();
    test_star_and_ring();
    test_placement();
    return test_summary();
}
