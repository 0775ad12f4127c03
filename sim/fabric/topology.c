/* Topologies built from links and switches, their routing, and failures.
 *
 * back-to-back (2 nodes, no switch):
 *     node0 --"node0->node1"--> node1,   node1 --"node1->node0"--> node0
 *
 * star (n nodes, one switch "sw0"):
 *     node i --"node<i>->sw0"--> sw0 --port i: "sw0->node<i>"--> node i
 *
 * leaf-spine (L leaves "leaf<l>", S spines "spine<s>", H hosts per leaf;
 * node i hangs off leaf i / H):
 *     node i --"node<i>->leaf<l>"--> leaf l --"leaf<l>->node<i>"--> node i
 *     leaf l --"leaf<l>->spine<s>"--> spine s --"spine<s>->leaf<l>"--> leaf l
 *   Links are numbered: node uplinks (node order), leaf->node links (node
 *   order), leaf->spine (leaf major), spine->leaf (spine major); switches:
 *   leaves, then spines.  Leaf ports: its hosts first, then spines 0..S-1;
 *   spine ports: leaves 0..L-1.
 *
 * Links are numbered uplinks first (node order).  Every link that ends at a
 * node delivers through a per-node indirection slot, so topo_attach() may
 * come before or after topo_create() wiring; a frame for a node nobody
 * attached is freed.  NIC uplinks use topo_params.link.queue_bytes (0 =
 * unbounded: the NIC paces itself on the idle hook); links leaving a switch
 * use the switch's port_buffer_bytes.
 *
 * Routing is computed, not wired: the topology is a graph (vertices = nodes
 * then switches, edges = links), and for every destination node a
 * breadth-first search backwards over the links that are up gives each
 * switch its distance; a switch's route set for that destination is every
 * up egress port that leads one hop closer (all equal-cost paths).  Nodes
 * never forward.  Routes are recomputed reroute_delay_ps after every link
 * state change (topo_set_link_up). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fabric.h"

#define NO_VERTEX UINT32_MAX
#define NO_DIST UINT32_MAX

/* Per destination node: the latest send time seen per flow, for the
 * reordering counter (open addressing, grown at 1/2 load). */
struct flow_slot {
    uint64_t key;
    sim_time_t max_sent_ps;
    bool used;
};

struct topo_node {
    struct topology *t;
    uint32_t id;
    struct fabric_sink sink; /* set by topo_attach */
    struct link *uplink, *downlink;
    struct flow_slot *flows;
    size_t flows_cap, flows_n;
    struct topo_node_counters c;
};

struct topo_edge {
    uint32_t from_v, to_v; /* vertices: node id, or n_nodes + switch index */
    uint32_t port;         /* egress port index when from_v is a switch */
};

/* A scheduled link state change, or a pending route recomputation. */
struct topo_change {
    struct topo_change *next;
    struct topology *t;
    struct link *l;
    bool up;
    struct sim_event ev;
};

struct topology {
    struct sim *sim;
    struct topo_params p;
    struct pkt_pool *pool;
    struct topo_node *nodes;
    struct link **links;
    struct topo_edge *edges;
    unsigned n_links, cap_links;
    struct fswitch **switches;
    unsigned n_switches;
    struct topo_change *changes;
    /* routing scratch: per vertex distance, BFS queue, incoming edges (CSR) */
    uint32_t *dist, *queue, *in_start, *in_edges;
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
    /* Loss and corruption: 0, an ideal fabric.  IEEE 802.3 sets a bit error
     * ratio objective of 1e-12 for its 100 Gb/s PHYs, i.e. about 3e-8 per
     * 4 KiB frame: nothing a run of this size would see.  Set them to study
     * recovery. */
    p->link.loss_prob = 0.0;
    p->link.corrupt_prob = 0.0;
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
    /* ECMP: the standard forwarding of Clos data-centre fabrics (RFC 7938,
     * "Use of BGP for Routing in Large-Scale Data Centers", section 6,
     * "ECMP Considerations"). */
    p->sw.routing = ROUTE_ECMP;
    /* Leaf-spine shape when chosen: 2 leaves x 2 spines, 1 host per leaf --
     * the smallest fabric with two equal-cost paths between two hosts. */
    p->n_leaves = 2;
    p->n_spines = 2;
    p->hosts_per_leaf = 1;
    p->spine_link.rate_bps = 0; /* same as link */
    /* Routing convergence: 0, idealised (routes move the instant a link
     * changes state).  Real fabrics take milliseconds (BFD, RFC 5880:
     * three missed detection intervals) to seconds (the BGP hold timer,
     * RFC 4271) to route around a remote failure. */
    p->reroute_delay_ps = 0;
}

/* ---------------------------------------------------------------- delivery */

static uint64_t flow_key(const struct pkt *p)
{
    return ((uint64_t)p->src_node << 48) ^ ((uint64_t)(p->src_qpn & 0xffffffu) << 24) ^
           (p->dest_qpn & 0xffffffu);
}

static struct flow_slot *flow_find(struct topo_node *n, uint64_t key)
{
    if (2 * (n->flows_n + 1) > n->flows_cap) {
        size_t cap = n->flows_cap ? 2 * n->flows_cap : 16;
        struct flow_slot *nf = calloc(cap, sizeof(*nf));
        if (!nf) {
            fprintf(stderr, "rnicsim: topology: out of memory\n");
            abort();
        }
        for (size_t i = 0; i < n->flows_cap; i++) {
            if (!n->flows[i].used)
                continue;
            size_t j = (size_t)(n->flows[i].key * 0x9e3779b97f4a7c15ull) & (cap - 1);
            while (nf[j].used)
                j = (j + 1) & (cap - 1);
            nf[j] = n->flows[i];
        }
        free(n->flows);
        n->flows = nf;
        n->flows_cap = cap;
    }
    size_t j = (size_t)(key * 0x9e3779b97f4a7c15ull) & (n->flows_cap - 1);
    while (n->flows[j].used && n->flows[j].key != key)
        j = (j + 1) & (n->flows_cap - 1);
    if (!n->flows[j].used) {
        n->flows[j] = (struct flow_slot){.key = key, .max_sent_ps = 0, .used = true};
        n->flows_n++;
    }
    return &n->flows[j];
}

/* Delivery through the indirection slot of the destination node. */
static void node_rx(struct sim *sim, void *ctx, struct pkt *pkt)
{
    struct topo_node *n = ctx;
    n->c.pkts_delivered++;
    struct flow_slot *f = flow_find(n, flow_key(pkt));
    if (pkt->t_sent_ps < f->max_sent_ps)
        n->c.pkts_reordered++;
    else
        f->max_sent_ps = pkt->t_sent_ps;
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

/* ---------------------------------------------------------------- building */

static uint32_t switch_vertex(const struct topology *t, unsigned sw)
{
    return t->p.n_nodes + sw;
}

/* A link from vertex `from` to vertex `to`: connected to the node slot or
 * the switch ingress, and added as a port of the switch it leaves. */
static struct link *add_link(struct topology *t, const char *name, const struct link_params *lp,
                             uint32_t from, uint32_t to)
{
    if (t->n_links == t->cap_links)
        return NULL;
    struct link *l = link_create(t->sim, name, lp, t->pool);
    if (!l)
        return NULL;
    uint32_t n = t->p.n_nodes;
    link_connect(l,
                 to < n ? node_sink(&t->nodes[to]) : switch_ingress_sink(t->switches[to - n], l));
    link_set_trace_id(l, t->n_links);
    struct topo_edge e = {.from_v = from, .to_v = to, .port = 0};
    if (from >= n)
        e.port = switch_add_port(t->switches[from - n], l);
    if (to < n)
        t->nodes[to].downlink = l;
    if (from < n)
        t->nodes[from].uplink = l;
    t->edges[t->n_links] = e;
    t->links[t->n_links++] = l;
    return l;
}

static bool params_ok(const struct topo_params *p)
{
    if (p->n_nodes == 0 || p->link.rate_bps == 0 || !(p->link.loss_prob >= 0.0) ||
        !(p->link.loss_prob <= 1.0) || !(p->link.corrupt_prob >= 0.0) ||
        !(p->link.corrupt_prob <= 1.0) || (unsigned)p->sw.routing >= ROUTE_MODE_COUNT)
        return false;
    switch (p->kind) {
    case TOPO_BACK_TO_BACK:
        return p->n_nodes == 2;
    case TOPO_STAR:
        return true;
    case TOPO_LEAF_SPINE:
        return p->n_leaves > 0 && p->n_spines > 0 && p->hosts_per_leaf > 0 &&
               (uint64_t)p->n_leaves * p->hosts_per_leaf == p->n_nodes &&
               (p->spine_link.rate_bps == 0 ||
                (p->spine_link.loss_prob >= 0.0 && p->spine_link.loss_prob <= 1.0 &&
                 p->spine_link.corrupt_prob >= 0.0 && p->spine_link.corrupt_prob <= 1.0));
    }
    return false;
}

static int build_leaf_spine(struct topology *t)
{
    const struct topo_params *p = &t->p;
    char name[64];
    for (unsigned l = 0; l < p->n_leaves; l++) {
        snprintf(name, sizeof(name), "leaf%u", l);
        if (!(t->switches[t->n_switches++] = switch_create(t->sim, name, &p->sw, t->pool)))
            return -1;
    }
    for (unsigned s = 0; s < p->n_spines; s++) {
        snprintf(name, sizeof(name), "spine%u", s);
        if (!(t->switches[t->n_switches++] = switch_create(t->sim, name, &p->sw, t->pool)))
            return -1;
    }
    struct link_params down = p->link;
    down.queue_bytes = p->sw.port_buffer_bytes;
    struct link_params fab = p->spine_link.rate_bps ? p->spine_link : p->link;
    fab.queue_bytes = p->sw.port_buffer_bytes;
    for (uint32_t i = 0; i < p->n_nodes; i++) {
        unsigned l = i / p->hosts_per_leaf;
        snprintf(name, sizeof(name), "node%u->leaf%u", i, l);
        if (!add_link(t, name, &p->link, i, switch_vertex(t, l)))
            return -1;
    }
    for (uint32_t i = 0; i < p->n_nodes; i++) {
        unsigned l = i / p->hosts_per_leaf;
        snprintf(name, sizeof(name), "leaf%u->node%u", l, i);
        if (!add_link(t, name, &down, switch_vertex(t, l), i))
            return -1;
    }
    for (unsigned l = 0; l < p->n_leaves; l++)
        for (unsigned s = 0; s < p->n_spines; s++) {
            snprintf(name, sizeof(name), "leaf%u->spine%u", l, s);
            if (!add_link(t, name, &fab, switch_vertex(t, l), switch_vertex(t, p->n_leaves + s)))
                return -1;
        }
    for (unsigned s = 0; s < p->n_spines; s++)
        for (unsigned l = 0; l < p->n_leaves; l++) {
            snprintf(name, sizeof(name), "spine%u->leaf%u", s, l);
            if (!add_link(t, name, &fab, switch_vertex(t, p->n_leaves + s), switch_vertex(t, l)))
                return -1;
        }
    return 0;
}

/* Incoming-edge lists (CSR) for the backwards BFS. */
static int build_adjacency(struct topology *t)
{
    size_t nv = (size_t)t->p.n_nodes + t->n_switches;
    t->dist = calloc(nv, sizeof(*t->dist));
    t->queue = calloc(nv, sizeof(*t->queue));
    t->in_start = calloc(nv + 1, sizeof(*t->in_start));
    t->in_edges = calloc(t->n_links ? t->n_links : 1, sizeof(*t->in_edges));
    if (!t->dist || !t->queue || !t->in_start || !t->in_edges)
        return -1;
    for (unsigned i = 0; i < t->n_links; i++)
        t->in_start[t->edges[i].to_v + 1]++;
    for (size_t v = 0; v < nv; v++)
        t->in_start[v + 1] += t->in_start[v];
    uint32_t *fill = calloc(nv, sizeof(*fill));
    if (!fill)
        return -1;
    for (unsigned i = 0; i < t->n_links; i++) {
        uint32_t v = t->edges[i].to_v;
        t->in_edges[t->in_start[v] + fill[v]++] = i;
    }
    free(fill);
    return 0;
}

/* Each link's peer is the other direction of its cable (a PFC frame that
 * arrives on a link pauses its peer): the link from its far end back. */
static void pair_peers(struct topology *t)
{
    for (unsigned e = 0; e < t->n_links; e++) {
        uint32_t u = t->edges[e].from_v, v = t->edges[e].to_v;
        for (uint32_t k = t->in_start[u]; k < t->in_start[u + 1]; k++) {
            uint32_t r = t->in_edges[k];
            if (t->edges[r].from_v == v) {
                link_set_peer(t->links[e], t->links[r]);
                break;
            }
        }
    }
}

struct topology *topo_create(struct sim *sim, const struct topo_params *p, struct pkt_pool *pool)
{
    if (!sim || !p || !params_ok(p)) {
        errno = EINVAL;
        return NULL;
    }
    struct topology *t = calloc(1, sizeof(*t));
    if (!t)
        return NULL;
    t->sim = sim;
    t->p = *p;
    t->pool = pool;
    unsigned n_sw = 0;
    size_t n_links = 2 * (size_t)p->n_nodes;
    if (p->kind == TOPO_STAR)
        n_sw = 1;
    if (p->kind == TOPO_LEAF_SPINE) {
        n_sw = p->n_leaves + p->n_spines;
        n_links += 2 * (size_t)p->n_leaves * p->n_spines;
    }
    t->cap_links = (unsigned)n_links;
    t->nodes = calloc(p->n_nodes, sizeof(*t->nodes));
    t->links = calloc(n_links, sizeof(*t->links));
    t->edges = calloc(n_links, sizeof(*t->edges));
    t->switches = calloc(n_sw ? n_sw : 1, sizeof(*t->switches));
    if (!t->nodes || !t->links || !t->edges || !t->switches)
        goto fail;
    for (uint32_t i = 0; i < p->n_nodes; i++) {
        t->nodes[i].t = t;
        t->nodes[i].id = i;
    }

    char name[64];
    switch (p->kind) {
    case TOPO_BACK_TO_BACK:
        for (uint32_t i = 0; i < 2; i++) {
            snprintf(name, sizeof(name), "node%u->node%u", i, 1 - i);
            if (!add_link(t, name, &p->link, i, 1 - i))
                goto fail;
        }
        break;
    case TOPO_STAR: {
        if (!(t->switches[t->n_switches++] = switch_create(sim, "sw0", &p->sw, pool)))
            goto fail;
        for (uint32_t i = 0; i < p->n_nodes; i++) {
            snprintf(name, sizeof(name), "node%u->sw0", i);
            if (!add_link(t, name, &p->link, i, switch_vertex(t, 0)))
                goto fail;
        }
        struct link_params down = p->link;
        down.queue_bytes = p->sw.port_buffer_bytes;
        for (uint32_t i = 0; i < p->n_nodes; i++) {
            snprintf(name, sizeof(name), "sw0->node%u", i);
            if (!add_link(t, name, &down, switch_vertex(t, 0), i))
                goto fail;
        }
        break;
    }
    case TOPO_LEAF_SPINE:
        if (build_leaf_spine(t))
            goto fail;
        break;
    }
    if (build_adjacency(t))
        goto fail;
    pair_peers(t);
    topo_recompute_routes(t);
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
    for (struct topo_change *c = t->changes, *next; c; c = next) {
        next = c->next;
        sim_cancel(t->sim, &c->ev);
        free(c);
    }
    for (unsigned i = 0; i < t->n_links; i++)
        link_destroy(t->links[i]);
    for (unsigned i = 0; i < t->n_switches; i++)
        switch_destroy(t->switches[i]);
    for (uint32_t i = 0; t->nodes && i < t->p.n_nodes; i++)
        free(t->nodes[i].flows);
    free(t->dist);
    free(t->queue);
    free(t->in_start);
    free(t->in_edges);
    free(t->links);
    free(t->edges);
    free(t->switches);
    free(t->nodes);
    free(t);
}

/* ---------------------------------------------------------------- routing */

/* Routes by destination rack.  A node is reached only through the switch
 * its downlink leaves (its attachment switch A: nodes do not forward), so
 * the shortest paths towards every node behind A are the same everywhere
 * but at A itself.  One breadth-first search backwards from A over the
 * links that are up gives every switch its distance; a switch's route set
 * for A's nodes is every up egress port one hop closer, made once and
 * shared by all of them (switch_new_route_set); A routes each node to its
 * downlink.  A node whose downlink is down has no route anywhere.  Cost:
 * one search per rack, then one index per switch and node. */
void topo_recompute_routes(struct topology *t)
{
    uint32_t n = t->p.n_nodes;
    size_t nv = (size_t)n + t->n_switches;
    for (unsigned s = 0; s < t->n_switches; s++)
        switch_clear_routes(t->switches[s]);
    if (t->n_switches == 0)
        return;
    /* nodes grouped by attachment switch, in node order */
    uint32_t *first = calloc(t->n_switches, sizeof(*first)); /* node + 1 */
    uint32_t *next = calloc(n, sizeof(*next));               /* node + 1 */
    uint32_t *last = calloc(t->n_switches, sizeof(*last));
    uint32_t *ports = calloc(t->n_links ? t->n_links : 1, sizeof(*ports));
    uint32_t *sets = calloc(t->n_switches, sizeof(*sets));
    if (!first || !next || !last || !ports || !sets) {
        fprintf(stderr, "rnicsim: topology: out of memory computing routes\n");
        abort();
    }
    for (uint32_t d = 0; d < n; d++) {
        struct link *dl = t->nodes[d].downlink;
        if (!dl || !link_is_up(dl))
            continue;
        uint32_t a = t->edges[link_trace_id(dl)].from_v;
        if (a < n)
            continue; /* back-to-back: no switch */
        a -= n;
        if (last[a])
            next[last[a] - 1] = d + 1;
        else
            first[a] = d + 1;
        last[a] = d + 1;
    }
    for (unsigned a = 0; a < t->n_switches; a++) {
        if (!first[a])
            continue;
        for (size_t v = 0; v < nv; v++)
            t->dist[v] = NO_DIST;
        size_t head = 0, tail = 0;
        t->dist[n + a] = 1;
        t->queue[tail++] = n + a;
        while (head < tail) {
            uint32_t v = t->queue[head++];
            for (uint32_t k = t->in_start[v]; k < t->in_start[v + 1]; k++) {
                uint32_t e = t->in_edges[k];
                uint32_t u = t->edges[e].from_v;
                if (u < n || t->dist[u] != NO_DIST || !link_is_up(t->links[e]))
                    continue; /* nodes do not forward */
                t->dist[u] = t->dist[v] + 1;
                t->queue[tail++] = u;
            }
        }
        /* every other switch's set towards rack a: its up ports one hop
         * closer (edges are in port order per switch) */
        for (unsigned s = 0; s < t->n_switches; s++)
            sets[s] = UINT32_MAX;
        unsigned e = 0;
        while (e < t->n_links) {
            uint32_t u = t->edges[e].from_v;
            unsigned np = 0, e0 = e;
            for (; e < t->n_links && t->edges[e].from_v == u; e++) {
                const struct topo_edge *ed = &t->edges[e];
                if (u < n || u == n + a || t->dist[u] == NO_DIST || t->dist[ed->to_v] == NO_DIST ||
                    t->dist[ed->to_v] + 1 != t->dist[u] || !link_is_up(t->links[e]))
                    continue;
                ports[np++] = ed->port;
            }
            if (np && u >= n) {
                /* ports of a switch may come from several runs of edges:
                 * merge with what an earlier run found */
                struct fswitch *sw = t->switches[u - n];
                if (sets[u - n] != UINT32_MAX) {
                    const uint32_t *old;
                    unsigned no = switch_route_ports(sw, first[a] - 1, &old);
                    for (unsigned k = 0; k < no; k++)
                        ports[np++] = old[k];
                }
                for (unsigned i = 1; i < np; i++) /* insertion sort: sets are small */
                    for (unsigned j = i; j > 0 && ports[j - 1] > ports[j]; j--) {
                        uint32_t tmp = ports[j];
                        ports[j] = ports[j - 1];
                        ports[j - 1] = tmp;
                    }
                sets[u - n] = switch_new_route_set(sw, ports, np);
                for (uint32_t d = first[a]; d; d = next[d - 1])
                    switch_use_route_set(sw, d - 1, sets[u - n]);
            }
            if (e == e0)
                e++;
        }
        /* rack a itself: each node through its downlink */
        for (uint32_t d = first[a]; d; d = next[d - 1])
            switch_set_route(t->switches[a], d - 1,
                             t->edges[link_trace_id(t->nodes[d - 1].downlink)].port);
    }
    free(first);
    free(next);
    free(last);
    free(ports);
    free(sets);
}

static void reroute_ev(struct sim *sim, struct sim_event *ev)
{
    (void)sim;
    struct topo_change *c = ev->ctx;
    topo_recompute_routes(c->t);
}

static struct topo_change *new_change(struct topology *t, struct link *l, bool up, sim_event_fn fn)
{
    struct topo_change *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    c->t = t;
    c->l = l;
    c->up = up;
    sim_event_init(&c->ev, fn, c, "topo.link_state");
    c->next = t->changes;
    t->changes = c;
    return c;
}

void topo_set_link_up(struct topology *t, struct link *l, bool up)
{
    link_set_up(l, up);
    if (t->p.reroute_delay_ps == 0) {
        topo_recompute_routes(t);
        return;
    }
    struct topo_change *c = new_change(t, l, up, reroute_ev);
    if (!c) {
        topo_recompute_routes(t); /* out of memory: converge at once */
        return;
    }
    sim_schedule_in(t->sim, &c->ev, t->p.reroute_delay_ps);
}

static void change_ev(struct sim *sim, struct sim_event *ev)
{
    (void)sim;
    struct topo_change *c = ev->ctx;
    topo_set_link_up(c->t, c->l, c->up);
}

int topo_schedule_link_state(struct topology *t, struct link *l, sim_time_t at_ps, bool up)
{
    bool mine = false;
    for (unsigned i = 0; i < t->n_links && !mine; i++)
        mine = t->links[i] == l;
    if (!mine || at_ps < sim_now(t->sim)) {
        errno = EINVAL;
        return -1;
    }
    struct topo_change *c = new_change(t, l, up, change_ev);
    if (!c)
        return -1;
    sim_schedule_at(t->sim, &c->ev, at_ps);
    return 0;
}

/* ---------------------------------------------------------------- access */

void topo_attach(struct topology *t, uint32_t node, struct fabric_sink sink)
{
    if (node < t->p.n_nodes)
        t->nodes[node].sink = sink;
}

struct link *topo_uplink(struct topology *t, uint32_t node)
{
    return node < t->p.n_nodes ? t->nodes[node].uplink : NULL;
}

struct link *topo_downlink(struct topology *t, uint32_t node)
{
    return node < t->p.n_nodes ? t->nodes[node].downlink : NULL;
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

struct link *topo_find_link(const struct topology *t, const char *name)
{
    for (unsigned i = 0; name && i < t->n_links; i++)
        if (strcmp(link_name(t->links[i]), name) == 0)
            return t->links[i];
    return NULL;
}

int topo_path(const struct topology *t, uint32_t src, uint32_t dst, uint32_t frame_bytes,
              struct topo_path_info *out)
{
    memset(out, 0, sizeof(*out));
    if (src >= t->p.n_nodes || dst >= t->p.n_nodes || src == dst)
        return -1;
    out->min_rate_bps = UINT64_MAX;
    uint32_t n = t->p.n_nodes;
    /* node src's uplink, then switch to switch (a link's trace id is its
     * index in t->links) */
    if (!t->nodes[src].uplink)
        return -1;
    unsigned e = link_trace_id(t->nodes[src].uplink);
    for (unsigned guard = 0; e < t->n_links && guard <= t->n_links; guard++) {
        const struct link_params *lp = link_get_params(t->links[e]);
        out->links++;
        out->latency_ps += lp->delay_ps;
        out->one_way_ps +=
            lp->delay_ps + sim_bytes_to_ps(frame_bytes + PKT_ETH_PREAMBLE_IFG_BYTES, lp->rate_bps);
        if (lp->rate_bps < out->min_rate_bps)
            out->min_rate_bps = lp->rate_bps;
        uint32_t v = t->edges[e].to_v;
        if (v == dst)
            return 0;
        if (v < n)
            return -1; /* reached another node */
        const struct fswitch *sw = t->switches[v - n];
        const uint32_t *ports;
        if (switch_route_ports(sw, dst, &ports) == 0)
            return -1;
        out->latency_ps += switch_get_params(sw)->latency_ps;
        out->one_way_ps += switch_get_params(sw)->latency_ps;
        e = link_trace_id(switch_port(sw, ports[0])); /* = its index in t->links */
    }
    return -1;
}

const struct topo_node_counters *topo_node_counters(const struct topology *t, uint32_t node)
{
    return node < t->p.n_nodes ? &t->nodes[node].c : NULL;
}

int topo_mcast_join(struct topology *t, uint32_t group, uint32_t node, bool join)
{
    if (t->p.kind == TOPO_LEAF_SPINE) {
        errno = ENOTSUP;
        return -1;
    }
    for (unsigned i = 0; i < t->n_switches; i++)
        switch_mcast_join(t->switches[i], group & ~PKT_MCAST_NODE, node, join);
    return 0;
}
