/* Hierarchical route tables (topology.c, switch.c) against an independent
 * shortest-path computation.  The test rebuilds the graph from the link
 * names ("a->b") alone, and for every destination node a breadth-first
 * search backwards over the links that are up (nodes do not forward)
 * gives each switch its distance; the expected route set of a switch is
 * every up port one hop closer.  Every (switch, destination) pair must
 * match exactly, on star, leaf-spine (also oversubscribed), fat tree and
 * ring, intact and after switch-to-switch failures of both directions,
 * host failures and recoveries.  Then the routing state's size: linear in
 * hosts + cables (a leaf-spine twice as wide holds at most ~2x the bytes;
 * a per-destination index in every switch would be ~4x). */
#include <stdlib.h>

#include "sim/fabric/fabric.h"
#include "test.h"

struct graph {
    unsigned n_nodes, n_sw, nv, n_links;
    uint32_t *from, *to; /* per link: vertex (node id, or n_nodes + switch) */
    uint32_t *dist, *queue;
};

static uint32_t vertex_of(const struct topology *t, unsigned n_nodes, const char *name, size_t len)
{
    char buf[64];
    if (len >= sizeof(buf))
        return UINT32_MAX;
    memcpy(buf, name, len);
    buf[len] = 0;
    if (strncmp(buf, "node", 4) == 0)
        return (uint32_t)strtoul(buf + 4, NULL, 10);
    for (unsigned s = 0; s < topo_n_switches(t); s++)
        if (strcmp(switch_name(topo_switch(t, s)), buf) == 0)
            return n_nodes + s;
    return UINT32_MAX;
}

static void graph_build(struct graph *g, const struct topology *t, unsigned n_nodes)
{
    g->n_nodes = n_nodes;
    g->n_sw = topo_n_switches(t);
    g->nv = n_nodes + g->n_sw;
    g->n_links = topo_n_links(t);
    g->from = calloc(g->n_links, sizeof(*g->from));
    g->to = calloc(g->n_links, sizeof(*g->to));
    g->dist = calloc(g->nv, sizeof(*g->dist));
    g->queue = calloc(g->nv, sizeof(*g->queue));
    for (unsigned i = 0; i < g->n_links; i++) {
        const char *name = link_name(topo_link(t, i)), *arrow = strstr(name, "->");
        g->from[i] = vertex_of(t, n_nodes, name, (size_t)(arrow - name));
        g->to[i] = vertex_of(t, n_nodes, arrow + 2, strlen(arrow + 2));
    }
}

static void graph_free(struct graph *g)
{
    free(g->from);
    free(g->to);
    free(g->dist);
    free(g->queue);
}

/* Compare every switch's set for every destination with the search;
 * returns the number of mismatching (switch, destination) pairs. */
static unsigned check_routes(const struct topology *t, struct graph *g)
{
    unsigned bad = 0;
    for (uint32_t d = 0; d < g->n_nodes; d++) {
        for (unsigned v = 0; v < g->nv; v++)
            g->dist[v] = UINT32_MAX;
        unsigned head = 0, tail = 0;
        g->dist[d] = 0;
        g->queue[tail++] = d;
        while (head < tail) {
            uint32_t v = g->queue[head++];
            for (unsigned e = 0; e < g->n_links; e++) {
                uint32_t u = g->from[e];
                if (g->to[e] != v || u < g->n_nodes || g->dist[u] != UINT32_MAX ||
                    !link_is_up(topo_link(t, e)))
                    continue;
                g->dist[u] = g->dist[v] + 1;
                g->queue[tail++] = u;
            }
        }
        for (unsigned s = 0; s < g->n_sw; s++) {
            const struct fswitch *sw = topo_switch(t, s);
            uint32_t expect[256];
            unsigned ne = 0;
            uint32_t du = g->dist[g->n_nodes + s];
            for (unsigned p = 0; du != UINT32_MAX && p < switch_n_ports(sw); p++) {
                const struct link *l = switch_port(sw, p);
                unsigned e = link_trace_id(l);
                if (link_is_up(l) && g->dist[g->to[e]] != UINT32_MAX &&
                    g->dist[g->to[e]] + 1 == du && ne < 256)
                    expect[ne++] = p;
            }
            const uint32_t *ports;
            unsigned np = switch_route_ports(sw, d, &ports);
            bool same = np == ne;
            for (unsigned i = 0; same && i < np; i++)
                same = ports[i] == expect[i];
            if (!same && bad++ < 5)
                fprintf(stderr, "  %s -> node%u: %u ports, expected %u\n", switch_name(sw), d, np,
                        ne);
        }
    }
    return bad;
}

struct fixture {
    struct sim *sim;
    struct pkt_pool *pool;
    struct topology *t;
    struct graph g;
};

static bool fx_init(struct fixture *f, const struct topo_params *p)
{
    memset(f, 0, sizeof(*f));
    f->sim = sim_create(1);
    f->pool = pkt_pool_create();
    f->t = topo_create(f->sim, p, f->pool);
    CHECK(f->t != NULL);
    if (!f->t)
        return false;
    graph_build(&f->g, f->t, p->n_nodes);
    return true;
}

static void fx_fini(struct fixture *f)
{
    graph_free(&f->g);
    topo_destroy(f->t);
    pkt_pool_destroy(f->pool);
    sim_destroy(f->sim);
}

static void set_link(struct fixture *f, const char *name, bool up)
{
    struct link *l = topo_find_link(f->t, name);
    CHECK(l != NULL);
    if (l)
        topo_set_link_up(f->t, l, up);
}

/* Take the links down one after another (checking after each), then
 * bring them back in the same order (checking again). */
static void check_failures(struct fixture *f, const char *const *links, unsigned n,
                           const char *what)
{
    CHECK_EQ_U64(check_routes(f->t, &f->g), 0);
    for (unsigned i = 0; i < n; i++) {
        set_link(f, links[i], false);
        unsigned bad = check_routes(f->t, &f->g);
        if (bad)
            fprintf(stderr, "%s: after %s down\n", what, links[i]);
        CHECK_EQ_U64(bad, 0);
    }
    for (unsigned i = 0; i < n; i++) {
        set_link(f, links[i], true);
        CHECK_EQ_U64(check_routes(f->t, &f->g), 0);
    }
}

static void test_leaf_spine(void)
{
    struct topo_params p;
    fabric_leaf_spine(&p, 5, 3, 3);
    struct fixture f;
    if (!fx_init(&f, &p))
        return;
    /* a down-link (only rack 2 changes), an up-link (every rack but leaf
     * 1's), a leaf cut from every spine but one, a spine cut from a leaf in
     * both directions, a host */
    static const char *const links[] = {"spine1->leaf2", "leaf1->spine0", "leaf3->spine0",
                                        "leaf3->spine1", "spine2->leaf4", "leaf4->spine2",
                                        "leaf0->node1",  "spine0->leaf2", "spine2->leaf2"};
    check_failures(&f, links, sizeof(links) / sizeof(*links), "leaf-spine");
    /* leaf 2 unreachable from every spine: no route from anywhere else */
    const uint32_t *ports;
    CHECK_EQ_U64(switch_route_ports(topo_switch(f.t, 0), 7, &ports), 3); /* restored */
    fx_fini(&f);

    /* oversubscribed: 6 hosts per leaf over 2 spines */
    fabric_leaf_spine(&p, 3, 2, 6);
    if (!fx_init(&f, &p))
        return;
    static const char *const links2[] = {"spine0->leaf1", "leaf0->spine1", "spine1->leaf1"};
    check_failures(&f, links2, 3, "oversubscribed leaf-spine");
    fx_fini(&f);
}

static void test_fat_tree(void)
{
    struct topo_params p;
    fabric_defaults(&p);
    p.kind = TOPO_FAT_TREE;
    p.fat_tree_k = 6; /* 54 hosts, 18 edge, 18 agg, 9 core */
    p.n_nodes = 54;
    struct fixture f;
    if (!fx_init(&f, &p))
        return;
    /* agg 1 serves cores 3..5; core 4 reaches agg 1 + 3j of pod j.  An
     * up-link of a switch that keeps another needs no search; agg 11
     * losing all three (cores 6..8) must route other pods through a valley
     * (down to an edge, up another aggregation) */
    static const char *const links[] = {
        "agg1->core4", "core4->agg7",  "agg4->edge5",  "edge3->agg4", "edge8->node25",
        "core0->agg0", "core1->agg0",  "core2->agg0",  "agg0->edge0", "agg1->edge0",
        "agg2->edge0", "agg11->core6", "agg11->core7", "agg11->core8"};
    check_failures(&f, links, sizeof(links) / sizeof(*links), "fat tree");
    fx_fini(&f);
}

static void test_star_ring(void)
{
    struct topo_params p;
    fabric_defaults(&p);
    p.kind = TOPO_STAR;
    p.n_nodes = 9;
    struct fixture f;
    if (!fx_init(&f, &p))
        return;
    static const char *const star[] = {"sw0->node3", "node4->sw0"};
    check_failures(&f, star, 2, "star");
    const uint32_t *ports;
    set_link(&f, "sw0->node3", false);
    CHECK_EQ_U64(switch_route_ports(topo_switch(f.t, 0), 3, &ports), 0);
    fx_fini(&f);

    p.kind = TOPO_RING; /* not hierarchical: the search for every rack */
    p.n_nodes = 7;
    if (!fx_init(&f, &p))
        return;
    static const char *const ring[] = {"ring2->ring3", "ring5->ring4", "ring0->node0"};
    check_failures(&f, ring, 3, "ring");
    fx_fini(&f);
}

static size_t leaf_spine_bytes(unsigned leaves, unsigned spines, unsigned hpl)
{
    struct topo_params p;
    fabric_leaf_spine(&p, leaves, spines, hpl);
    struct sim *sim = sim_create(1);
    struct pkt_pool *pool = pkt_pool_create();
    struct topology *t = topo_create(sim, &p, pool);
    size_t b = t ? topo_route_table_bytes(t) : 0;
    topo_destroy(t);
    pkt_pool_destroy(pool);
    sim_destroy(sim);
    return b;
}

static void test_table_size(void)
{
    /* hosts and cables both x2 (and switches): bytes at most ~x2 */
    size_t a = leaf_spine_bytes(32, 16, 16), b = leaf_spine_bytes(64, 16, 16);
    fprintf(stderr, "route tables: 512 hosts %zu B, 1024 hosts %zu B\n", a, b);
    CHECK(a > 0 && b <= 2 * a + a / 8);
    /* hosts + cables = 4096 + 16384, ~50 B each: an entry per host at its
     * leaf and per rack at each spine, one single-port set per port, the
     * shared maps.  An index per destination in every switch (256 x 4096
     * x 8 B = 8 MiB) would be 6x the bound. */
    size_t c = leaf_spine_bytes(128, 128, 32);
    fprintf(stderr, "route tables: 4096 hosts, 128 x 128: %zu B\n", c);
    CHECK(c < 64 * (4096 + 16384));
}

int main(void)
{
    test_leaf_spine();
    test_fat_tree();
    test_star_ring();
    test_table_size();
    return test_summary();
}
