/* Topologies built from links and switches.
 *
 * back-to-back (2 nodes, no switch):
 *     node0 --"node0->node1"--> node1,   node1 --"node1->node0"--> node0
 *
 * star (n nodes, one switch "sw0"):
 *     node i --"node<i>->sw0"--> sw0 --port i: "sw0->node<i>"--> node i
 *
 * Links are numbered uplinks first (node order), then the switch's egress
 * links.  Every link that ends at a node delivers through a per-node
 * indirection slot, so topo_attach() may come before or after topo_create()
 * wiring; a frame for a node nobody attached is freed.  NIC uplinks use
 * topo_params.link.queue_bytes (0 = unbounded: the NIC paces itself on the idle hook); links
 * leaving a switch use the switch's port_buffer_bytes. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fabric.h"

struct topo_node {
    struct topology *t;
    uint32_t id;
    struct fabric_sink sink; /* set by topo_attach */
    struct link *uplink;
};

struct topology {
    struct sim *sim;
    struct topo_params p;
    struct pkt_pool *pool;
    struct topo_node *nodes;
    struct link **links;
    unsigned n_links;
    struct fswitch **switches;
    unsigned n_switches;
};

void fabric_defaults(struct topo_params *p)
{
    memset(p, 0, sizeof(*p));
    p->kind = TOPO_STAR;
    p->n_nodes = 2;
    /* ConnectX-5 product brief: 100 Gb/s port (CALIBRATION, NICs). */
    p->link.rate_bps = 100000000000ull;
    /* ~1 m of cable: signals travel at ~2/3 c in fibre and twinax copper,
     * about 5 ns per metre. */
    p->link.delay_ps = 5 * SIM_NS;
    /* NIC egress: unbounded, the NIC transmit engine paces itself. */
    p->link.queue_bytes = 0;
    /* Mellanox/NVIDIA Spectrum SN2700 datasheet (32x100GbE): 300 ns
     * port-to-port latency (cut-through); the model charges it after store
     * and forward, see docs/fabric.md. */
    p->sw.latency_ps = 300 * SIM_NS;
    /* Spectrum SN2700 datasheet: 16 MB fully shared packet buffer for 32
     * ports, 0.5 MB static share per port; with dynamic thresholds one
     * congested port can take a few times its share.  1 MiB (~84 us at
     * 100 Gb/s) is that order and matches the scenario default (docs/
     * scenarios.md, switch.buffer). */
    p->sw.port_buffer_bytes = 1024 * 1024;
}

/* Delivery through the indirection slot of the destination node. */
static void node_rx(struct sim *sim, void *ctx, struct pkt *pkt)
{
    struct topo_node *n = ctx;
    if (n->sink.rx) {
        n->sink.rx(sim, n->sink.ctx, pkt);
        return;
    }
    pkt_free(n->t->pool, pkt); /* nobody attached to this node */
}

static struct fabric_sink node_sink(struct topo_node *n)
{
    return (struct fabric_sink){.rx = node_rx, .ctx = n};
}

static struct link *add_link(struct topology *t, const char *name, const struct link_params *lp,
                             struct fabric_sink to)
{
    struct link *l = link_create(t->sim, name, lp, t->pool);
    if (!l)
        return NULL;
    link_connect(l, to);
    t->links[t->n_links++] = l;
    return l;
}

struct topology *topo_create(struct sim *sim, const struct topo_params *p, struct pkt_pool *pool)
{
    if (!sim || !p || p->n_nodes == 0 || p->link.rate_bps == 0 ||
        (p->kind == TOPO_BACK_TO_BACK && p->n_nodes != 2) ||
        (p->kind != TOPO_BACK_TO_BACK && p->kind != TOPO_STAR)) {
        errno = EINVAL;
        return NULL;
    }
    struct topology *t = calloc(1, sizeof(*t));
    if (!t)
        return NULL;
    t->sim = sim;
    t->p = *p;
    t->pool = pool;
    t->nodes = calloc(p->n_nodes, sizeof(*t->nodes));
    t->links = calloc(2 * (size_t)p->n_nodes, sizeof(*t->links));
    t->switches = calloc(1, sizeof(*t->switches));
    if (!t->nodes || !t->links || !t->switches)
        goto fail;
    for (uint32_t i = 0; i < p->n_nodes; i++) {
        t->nodes[i].t = t;
        t->nodes[i].id = i;
    }

    char name[64];
    if (p->kind == TOPO_BACK_TO_BACK) {
        for (uint32_t i = 0; i < 2; i++) {
            snprintf(name, sizeof(name), "node%u->node%u", i, 1 - i);
            t->nodes[i].uplink = add_link(t, name, &p->link, node_sink(&t->nodes[1 - i]));
            if (!t->nodes[i].uplink)
                goto fail;
        }
        return t;
    }

    /* star */
    struct fswitch *sw = switch_create(sim, "sw0", &p->sw, pool);
    if (!sw)
        goto fail;
    t->switches[t->n_switches++] = sw;
    for (uint32_t i = 0; i < p->n_nodes; i++) {
        snprintf(name, sizeof(name), "node%u->sw0", i);
        t->nodes[i].uplink = add_link(t, name, &p->link, switch_sink(sw));
        if (!t->nodes[i].uplink)
            goto fail;
    }
    struct link_params down = p->link;
    down.queue_bytes = p->sw.port_buffer_bytes;
    for (uint32_t i = 0; i < p->n_nodes; i++) {
        snprintf(name, sizeof(name), "sw0->node%u", i);
        struct link *l = add_link(t, name, &down, node_sink(&t->nodes[i]));
        if (!l)
            goto fail;
        switch_set_route(sw, i, switch_add_port(sw, l));
    }
    return t;

fail:
    topo_destroy(t);
    errno = ENOMEM;
    return NULL;
}

void topo_destroy(struct topology *t)
{
    if (!t)
        return;
    for (unsigned i = 0; i < t->n_links; i++)
        link_destroy(t->links[i]);
    for (unsigned i = 0; i < t->n_switches; i++)
        switch_destroy(t->switches[i]);
    free(t->links);
    free(t->switches);
    free(t->nodes);
    free(t);
}

void topo_attach(struct topology *t, uint32_t node, struct fabric_sink sink)
{
    if (node < t->p.n_nodes)
        t->nodes[node].sink = sink;
}

struct link *topo_uplink(struct topology *t, uint32_t node)
{
    return node < t->p.n_nodes ? t->nodes[node].uplink : NULL;
}

unsigned topo_n_links(const struct topology *t)
{
    return t->n_links;
}
struct link *topo_link(const struct topology *t, unsigned i)
{
    return i < t->n_links ? t->links[i] : NULL;
}
unsigned topo_n_switches(const struct topology *t)
{
    return t->n_switches;
}
struct fswitch *topo_switch(const struct topology *t, unsigned i)
{
    return i < t->n_switches ? t->switches[i] : NULL;
}
