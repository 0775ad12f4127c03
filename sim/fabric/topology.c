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
 * fat tree, k even (k pods; pod p has edge switches "edge<e>" and
 * aggregation switches "agg<a>" numbered p*k/2 .. p*k/2 + k/2 - 1; core
 * switches "core<c>", c = j*k/2 + m, hang off aggregation switch j of
 * every pod; node i hangs off edge e = i / (k/2)):
 *     node i --"node<i>->edge<e>"--> edge e --"edge<e>->node<i>"--> node i
 *     edge e <--"edge<e>->agg<a>" / "agg<a>->edge<e>"--> agg a  (same pod)
 *     agg a <--"agg<a>->core<c>" / "core<c>->agg<a>"--> core c  (c / (k/2)
 *                                                       = a mod k/2)
 *   Links: node uplinks, edge->node (node order), edge->agg (edge major),
 *   agg->edge (agg major), agg->core (agg major), core->agg (core major);
 *   switches: edges, aggs, cores.  Edge ports: its hosts, then its pod's
 *   aggs; agg ports: its pod's edges, then its cores; core ports: pods
 *   0..k-1.  Two hosts in different pods have (k/2)^2 equal-cost paths.
 *
 * ring (n >= 3 switches "ring<i>", node i on ring i):
 *     node i --"node<i>->ring<i>"--> ring i --"ring<i>->node<i>"--> node i
 *     ring i --"ring<i>->ring<i+1>"--> ring i+1 --"ring<i+1>->ring<i>"--> ring i
 *   Links: node uplinks, ring->node, clockwise (ring<i>->ring<i+1>, i
 *   order), counter-clockwise (ring<i+1>->ring<i>, i order).  A fabric
 *   with cyclic buffer dependencies: flows two hops the same way round can
 *   deadlock under PFC (the detector below finds it).
 *
 * Links are numbered uplinks first (node order).  Every link that ends at a
 * node delivers through a per-node indirection slot, so topo_attach() may
 * come before or after topo_create() wiring; a frame for a node nobody
 * attached is freed.  NIC uplinks use topo_params.link.queue_bytes (0 =
 * unbounded: the NIC paces itself on the idle hook); links leaving a switch
 * use the switch's port_buffer_bytes.
 *
 * Routing is computed, not wired: every switch gets a hierarchical table
 * (host routes for its own hosts, an entry per rack or pod below it, a
 * default group of its up ports) from the wiring, and the racks a failed
 * switch-to-switch link can affect get shortest-path routes from a
 * breadth-first search backwards over the links that are up (see "routing"
 * below).  Nodes never forward.  Routes are recomputed reroute_delay_ps
 * after every link state change (topo_set_link_up). */
#include <errno.h>
#include <stdio.h>
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
    uint32_t *out_start, *out_edges; /* outgoing edges (CSR) */
    /* PFC deadlock detection: data frames each link had sent at the last
     * check, per link candidate flag and DFS state, the cycle found */
    struct sim_event dl_ev;
    uint64_t *dl_sent;
    uint8_t *dl_cand, *dl_color;
    uint32_t *dl_stack, *dl_iter;
    unsigned *dl_cycle;
    bool dl_found;
    struct topo_deadlock dl;
    uint8_t *up; /* per link, copied from the links at each recomputation */
    /* Hierarchical routing (topo_recompute_routes): racks are the switches
     * hosts hang off (switch index = rack id, they come first); pods group
     * racks (fat tree).  rack_home: by node, its rack from the wiring;
     * rack_of: the same, SWITCH_NO_RACK while its downlink is down (shared
     * with every switch); pod_of: by rack; per switch its level (0 racks,
     * 1 spines / aggregation, 2 cores) and the racks below it. */
    bool hierarchical;
    uint32_t n_racks;
    uint32_t *rack_home, *rack_of, *pod_of;
    uint8_t *level;
    uint32_t *below_lo, *below_hi;
    uint8_t *affected; /* by rack: routes must be searched (a failure) */
    /* UD multicast groups (topo_mcast_join): member nodes in join order */
    struct topo_mgroup *mgroups;
    uint32_t n_mgroups;
};

struct topo_mgroup {
    uint32_t id;
    uint32_t *nodes, n;
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

void fabric_leaf_spine(struct topo_params *p, unsigned leaves, unsigned spines,
                       unsigned hosts_per_leaf)
{
    fabric_defaults(p);
    p->kind = TOPO_LEAF_SPINE;
    p->n_leaves = leaves;
    p->n_spines = spines;
    p->hosts_per_leaf = hosts_per_leaf;
    p->n_nodes = leaves * hosts_per_leaf;
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
    case TOPO_FAT_TREE:
        return p->fat_tree_k >= 2 && p->fat_tree_k % 2 == 0 && p->fat_tree_k <= 64 &&
               (uint64_t)p->fat_tree_k * p->fat_tree_k * p->fat_tree_k / 4 == p->n_nodes &&
               (p->spine_link.rate_bps == 0 ||
                (p->spine_link.loss_prob >= 0.0 && p->spine_link.loss_prob <= 1.0 &&
                 p->spine_link.corrupt_prob >= 0.0 && p->spine_link.corrupt_prob <= 1.0));
    case TOPO_RING:
        return p->n_nodes >= 3;
    case TOPO_LEAF_SPINE:
        return p->n_leaves > 0 && p->n_spines > 0 && p->hosts_per_leaf > 0 &&
               (uint64_t)p->n_leaves * p->hosts_per_leaf == p->n_nodes &&
               (p->spine_link.rate_bps == 0 ||
                (p->spine_link.loss_prob >= 0.0 && p->spine_link.loss_prob <= 1.0 &&
                 p->spine_link.corrupt_prob >= 0.0 && p->spine_link.corrupt_prob <= 1.0));
    }
    return false;
}

static int add_switches(struct topology *t, const char *prefix, unsigned n)
{
    char name[64];
    for (unsigned i = 0; i < n; i++) {
        snprintf(name, sizeof(name), "%s%u", prefix, i);
        if (!(t->switches[t->n_switches++] = switch_create(t->sim, name, &t->p.sw, t->pool)))
            return -1;
    }
    return 0;
}

static int build_leaf_spine(struct topology *t)
{
    const struct topo_params *p = &t->p;
    char name[64];
    if (add_switches(t, "leaf", p->n_leaves) || add_switches(t, "spine", p->n_spines))
        return -1;
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

static int build_fat_tree(struct topology *t)
{
    const struct topo_params *p = &t->p;
    const unsigned h = p->fat_tree_k / 2; /* hosts per edge, edges and aggs per pod */
    const unsigned n_edge = p->fat_tree_k * h, n_agg = n_edge, n_core = h * h;
    const uint32_t edge0 = switch_vertex(t, 0), agg0 = edge0 + n_edge, core0 = agg0 + n_agg;
    char name[64];
    if (add_switches(t, "edge", n_edge) || add_switches(t, "agg", n_agg) ||
        add_switches(t, "core", n_core))
        return -1;
    struct link_params down = p->link;
    down.queue_bytes = p->sw.port_buffer_bytes;
    struct link_params fab = p->spine_link.rate_bps ? p->spine_link : p->link;
    fab.queue_bytes = p->sw.port_buffer_bytes;
    for (uint32_t i = 0; i < p->n_nodes; i++) {
        snprintf(name, sizeof(name), "node%u->edge%u", i, i / h);
        if (!add_link(t, name, &p->link, i, edge0 + i / h))
            return -1;
    }
    for (uint32_t i = 0; i < p->n_nodes; i++) {
        snprintf(name, sizeof(name), "edge%u->node%u", i / h, i);
        if (!add_link(t, name, &down, edge0 + i / h, i))
            return -1;
    }
    for (unsigned e = 0; e < n_edge; e++) /* to the aggs of its pod */
        for (unsigned j = 0; j < h; j++) {
            unsigned a = e / h * h + j;
            snprintf(name, sizeof(name), "edge%u->agg%u", e, a);
            if (!add_link(t, name, &fab, edge0 + e, agg0 + a))
                return -1;
        }
    for (unsigned a = 0; a < n_agg; a++)
        for (unsigned j = 0; j < h; j++) {
            unsigned e = a / h * h + j;
            snprintf(name, sizeof(name), "agg%u->edge%u", a, e);
            if (!add_link(t, name, &fab, agg0 + a, edge0 + e))
                return -1;
        }
    for (unsigned a = 0; a < n_agg; a++) /* agg j of a pod: cores j*h .. j*h + h - 1 */
        for (unsigned m = 0; m < h; m++) {
            unsigned c = a % h * h + m;
            snprintf(name, sizeof(name), "agg%u->core%u", a, c);
            if (!add_link(t, name, &fab, agg0 + a, core0 + c))
                return -1;
        }
    for (unsigned c = 0; c < n_core; c++) /* one agg in every pod */
        for (unsigned pod = 0; pod < p->fat_tree_k; pod++) {
            unsigned a = pod * h + c / h;
            snprintf(name, sizeof(name), "core%u->agg%u", c, a);
            if (!add_link(t, name, &fab, core0 + c, agg0 + a))
                return -1;
        }
    return 0;
}

static int build_ring(struct topology *t)
{
    const struct topo_params *p = &t->p;
    const uint32_t n = p->n_nodes, r0 = switch_vertex(t, 0);
    char name[64];
    if (add_switches(t, "ring", n))
        return -1;
    struct link_params down = p->link;
    down.queue_bytes = p->sw.port_buffer_bytes;
    for (uint32_t i = 0; i < n; i++) {
        snprintf(name, sizeof(name), "node%u->ring%u", i, i);
        if (!add_link(t, name, &p->link, i, r0 + i))
            return -1;
    }
    for (uint32_t i = 0; i < n; i++) {
        snprintf(name, sizeof(name), "ring%u->node%u", i, i);
        if (!add_link(t, name, &down, r0 + i, i))
            return -1;
    }
    for (int dir = 0; dir < 2; dir++)
        for (uint32_t i = 0; i < n; i++) {
            uint32_t a = dir ? (i + 1) % n : i, b = dir ? i : (i + 1) % n;
            snprintf(name, sizeof(name), "ring%u->ring%u", a, b);
            if (!add_link(t, name, &down, r0 + a, r0 + b))
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
    t->up = calloc(t->n_links ? t->n_links : 1, sizeof(*t->up));
    if (!t->dist || !t->queue || !t->in_start || !t->in_edges || !t->up)
        return -1;
    for (unsigned i = 0; i < t->n_links; i++)
        t->in_start[t->edges[i].to_v + 1]++;
    for (size_t v = 0; v < nv; v++)
        t->in_start[v + 1] += t->in_start[v];
    t->out_start = calloc(nv + 1, sizeof(*t->out_start));
    t->out_edges = calloc(t->n_links ? t->n_links : 1, sizeof(*t->out_edges));
    uint32_t *fill = calloc(nv, sizeof(*fill));
    if (!fill || !t->out_start || !t->out_edges) {
        free(fill);
        return -1;
    }
    for (unsigned i = 0; i < t->n_links; i++) {
        uint32_t v = t->edges[i].to_v;
        t->in_edges[t->in_start[v] + fill[v]++] = i;
        t->out_start[t->edges[i].from_v + 1]++;
    }
    for (size_t v = 0; v < nv; v++)
        t->out_start[v + 1] += t->out_start[v];
    memset(fill, 0, nv * sizeof(*fill));
    for (unsigned i = 0; i < t->n_links; i++) {
        uint32_t v = t->edges[i].from_v;
        t->out_edges[t->out_start[v] + fill[v]++] = i;
    }
    free(fill);
    return 0;
}

/* Each link's peer is the other direction of its cable (a PFC frame that
 * arrives on a link pauses its peer): the link from its far end back. */
static int pair_peers(struct topology *t)
{
    /* per vertex u: the first link into u from each v (in in_edges order),
     * then every link u -> v takes it: O(links), not O(links x degree)
     * (switch_set_back_port then scans the switch's ingresses: O(links x
     * ports), once per wiring) */
    size_t nv = (size_t)t->p.n_nodes + t->n_switches;
    uint32_t *first = malloc(nv * sizeof(*first)), *stamp = calloc(nv, sizeof(*stamp));
    if (!first || !stamp) {
        free(first);
        free(stamp);
        return -1;
    }
    for (uint32_t u = 0; u < nv; u++) {
        for (uint32_t k = t->in_start[u]; k < t->in_start[u + 1]; k++) {
            uint32_t r = t->in_edges[k], v = t->edges[r].from_v;
            if (stamp[v] != u + 1) {
                stamp[v] = u + 1;
                first[v] = r;
            }
        }
        for (uint32_t k = t->out_start[u]; k < t->out_start[u + 1]; k++) {
            uint32_t e = t->out_edges[k], v = t->edges[e].to_v;
            if (stamp[v] != u + 1)
                continue;
            link_set_peer(t->links[e], t->links[first[v]]);
            if (v >= t->p.n_nodes) /* multicast never sends back over the cable */
                switch_set_back_port(t->switches[v - t->p.n_nodes], t->links[e],
                                     t->edges[first[v]].port, u >= t->p.n_nodes);
        }
    }
    free(first);
    free(stamp);
    return 0;
}

/* Racks, pods and levels (docs/fabric.md "Route computation").  Every
 * node's rack is the switch its downlink leaves; leaf-spine, fat tree and
 * star are hierarchical (levels and the racks below each switch follow
 * from the wiring), a ring or back-to-back is not. */
static int build_hierarchy(struct topology *t)
{
    const struct topo_params *p = &t->p;
    uint32_t n = p->n_nodes;
    /* entry n: a programmable switch's own address (switch_node), in no
     * rack: every switch holds a host route to it (search_to with that node, in
     * topo_recompute_routes) */
    t->rack_home = calloc(n + 1, sizeof(*t->rack_home));
    t->rack_of = calloc(n + 1, sizeof(*t->rack_of));
    if (!t->rack_home || !t->rack_of)
        return -1;
    t->rack_home[n] = t->rack_of[n] = SWITCH_NO_RACK;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t a = t->edges[link_trace_id(t->nodes[i].downlink)].from_v;
        t->rack_home[i] = a >= n ? a - n : SWITCH_NO_RACK; /* back-to-back: none */
        if (a >= n && a - n + 1 > t->n_racks)
            t->n_racks = a - n + 1;
    }
    if (t->n_switches == 0)
        return 0;
    t->affected = calloc(t->n_racks ? t->n_racks : 1, 1);
    t->level = calloc(t->n_switches, 1);
    t->below_lo = calloc(t->n_switches, sizeof(*t->below_lo));
    t->below_hi = calloc(t->n_switches, sizeof(*t->below_hi));
    if (!t->affected || !t->level || !t->below_lo || !t->below_hi)
        return -1;
    for (unsigned s = 0; s < t->n_switches; s++) { /* racks: level 0, themselves below */
        t->below_lo[s] = s;
        t->below_hi[s] = s + 1;
    }
    if (p->kind == TOPO_STAR) {
        t->hierarchical = true;
    } else if (p->kind == TOPO_LEAF_SPINE) {
        t->hierarchical = true;
        for (unsigned s = p->n_leaves; s < t->n_switches; s++) {
            t->level[s] = 1;
            t->below_lo[s] = 0;
            t->below_hi[s] = p->n_leaves;
        }
    } else if (p->kind == TOPO_FAT_TREE) {
        const unsigned h = p->fat_tree_k / 2, n_edge = p->fat_tree_k * h;
        t->hierarchical = true;
        t->pod_of = calloc(n_edge, sizeof(*t->pod_of));
        if (!t->pod_of)
            return -1;
        for (unsigned e = 0; e < n_edge; e++)
            t->pod_of[e] = e / h;
        for (unsigned a = 0; a < n_edge; a++) { /* aggs: their pod's racks */
            t->level[n_edge + a] = 1;
            t->below_lo[n_edge + a] = a / h * h;
            t->below_hi[n_edge + a] = a / h * h + h;
        }
        for (unsigned c = 2 * n_edge; c < t->n_switches; c++) { /* cores: all */
            t->level[c] = 2;
            t->below_lo[c] = 0;
            t->below_hi[c] = n_edge;
        }
    }
    for (unsigned s = 0; s < t->n_switches; s++)
        switch_set_prefix_map(t->switches[s], t->rack_of, n, t->pod_of);
    return 0;
}

/* ---------------------------------------------------------------- PFC deadlock */

/* A deadlock is a cycle in the graph whose vertices are the links between
 * switches that are paused at priority c with frames of c queued and sent
 * no data frame since the previous check, an arc e -> f when f leaves the
 * switch e enters: every link of the cycle waits for the next one to
 * drain, which waits on the next... back to itself.  Checked every
 * TOPO_DEADLOCK_CHECK_PS while any link is paused with frames waiting,
 * armed by the switches' XOFFs; O(links) per check.  Checks stop at the
 * first deadlock found (it persists: nothing in it moves again). */

static uint64_t data_sent(const struct link *l)
{
    const struct link_counters *c = link_get_counters(l);
    return c->pkts_sent - c->pfc_frames_sent;
}

static void snapshot(struct topology *t)
{
    for (unsigned e = 0; e < t->n_links; e++)
        t->dl_sent[e] = data_sent(t->links[e]);
}

static void deadlock_arm(void *ctx)
{
    struct topology *t = ctx;
    if (t->dl_found || sim_event_pending(&t->dl_ev))
        return;
    if (!t->dl_sent) {
        size_t n = t->n_links ? t->n_links : 1;
        t->dl_sent = calloc(n, sizeof(*t->dl_sent));
        t->dl_cand = calloc(n, sizeof(*t->dl_cand));
        t->dl_color = calloc(n, sizeof(*t->dl_color));
        t->dl_stack = calloc(n, sizeof(*t->dl_stack));
        t->dl_iter = calloc(n, sizeof(*t->dl_iter));
        t->dl_cycle = calloc(n, sizeof(*t->dl_cycle));
        if (!t->dl_sent || !t->dl_cand || !t->dl_color || !t->dl_stack || !t->dl_iter ||
            !t->dl_cycle) {
            fprintf(stderr, "rnicsim: topology: out of memory for deadlock detection\n");
            abort();
        }
    }
    snapshot(t);
    sim_schedule_in(t->sim, &t->dl_ev, TOPO_DEADLOCK_CHECK_PS);
}

/* A cycle among the candidates (iterative DFS, colours 0 new, 1 on the
 * stack, 2 done); its length, the links in t->dl_cycle, or 0. */
static unsigned find_cycle(struct topology *t)
{
    uint32_t n = t->p.n_nodes;
    memset(t->dl_color, 0, t->n_links);
    for (unsigned s = 0; s < t->n_links; s++) {
        if (!t->dl_cand[s] || t->dl_color[s])
            continue;
        unsigned sp = 0;
        t->dl_stack[sp++] = s;
        t->dl_color[s] = 1;
        t->dl_iter[s] = t->out_start[t->edges[s].to_v];
        while (sp) {
            uint32_t e = t->dl_stack[sp - 1], v = t->edges[e].to_v;
            if (v < n || t->dl_iter[e] == t->out_start[v + 1]) {
                t->dl_color[e] = 2;
                sp--;
                continue;
            }
            uint32_t f = t->out_edges[t->dl_iter[e]++];
            if (!t->dl_cand[f] || t->dl_color[f] == 2)
                continue;
            if (t->dl_color[f] == 1) { /* back to the stack: f .. e is a cycle */
                unsigned k = sp;
                while (t->dl_stack[k - 1] != f)
                    k--;
                unsigned len = 0;
                for (unsigned i = k - 1; i < sp; i++)
                    t->dl_cycle[len++] = t->dl_stack[i];
                return len;
            }
            t->dl_color[f] = 1;
            t->dl_iter[f] = t->out_start[t->edges[f].to_v];
            t->dl_stack[sp++] = f;
        }
    }
    return 0;
}

static void deadlock_check_ev(struct sim *sim, struct sim_event *ev)
{
    struct topology *t = ev->ctx;
    uint32_t n = t->p.n_nodes;
    bool waiting = false;
    for (unsigned c = 0; c < PKT_PRIOS && !t->dl_found; c++) {
        if (!(t->p.sw.pfc.prio_mask & (1u << c)))
            continue;
        for (unsigned e = 0; e < t->n_links; e++) {
            const struct link *l = t->links[e];
            bool held = link_prio_paused(l, c) && link_prio_queued_bytes(l, c) > 0;
            waiting |= held;
            t->dl_cand[e] = held && t->edges[e].from_v >= n && t->edges[e].to_v >= n &&
                            data_sent(l) == t->dl_sent[e];
        }
        unsigned len = find_cycle(t);
        if (len) {
            t->dl_found = true;
            t->dl = (struct topo_deadlock){
                .at_ps = sim_now(sim), .prio = c, .n_links = len, .links = t->dl_cycle};
        }
    }
    if (t->dl_found || !waiting)
        return; /* re-armed by the next XOFF */
    snapshot(t);
    sim_schedule_in(sim, &t->dl_ev, TOPO_DEADLOCK_CHECK_PS);
}

const struct topo_deadlock *topo_pfc_deadlock(const struct topology *t)
{
    return t->dl_found ? &t->dl : NULL;
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
    sim_event_init(&t->dl_ev, deadlock_check_ev, t, "topo.pfc_deadlock");
    if (t->p.sw.pfc.enabled) {
        t->p.sw.pfc.on_xoff = deadlock_arm;
        t->p.sw.pfc.on_xoff_ctx = t;
    }
    unsigned n_sw = 0;
    size_t n_links = 2 * (size_t)p->n_nodes;
    if (p->kind == TOPO_STAR)
        n_sw = 1;
    if (p->kind == TOPO_LEAF_SPINE) {
        n_sw = p->n_leaves + p->n_spines;
        n_links += 2 * (size_t)p->n_leaves * p->n_spines;
    }
    if (p->kind == TOPO_RING) {
        n_sw = p->n_nodes;
        n_links += 2 * (size_t)p->n_nodes;
    }
    if (p->kind == TOPO_FAT_TREE) {
        size_t k = p->fat_tree_k;
        n_sw = (unsigned)(k * k + k * k / 4);
        n_links += 2 * (k * k / 2 * k / 2) * 2; /* edge<->agg, agg<->core */
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
        if (!(t->switches[t->n_switches++] = switch_create(sim, "sw0", &t->p.sw, pool)))
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
    case TOPO_FAT_TREE:
        if (build_fat_tree(t))
            goto fail;
        break;
    case TOPO_RING:
        if (build_ring(t))
            goto fail;
        break;
    }
    if (build_adjacency(t) || build_hierarchy(t) || pair_peers(t))
        goto fail;
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
    sim_cancel(t->sim, &t->dl_ev);
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
    free(t->up);
    for (uint32_t i = 0; i < t->n_mgroups; i++)
        free(t->mgroups[i].nodes);
    free(t->mgroups);
    free(t->rack_home);
    free(t->rack_of);
    free(t->pod_of);
    free(t->level);
    free(t->below_lo);
    free(t->below_hi);
    free(t->affected);
    free(t->out_start);
    free(t->out_edges);
    free(t->dl_sent);
    free(t->dl_cand);
    free(t->dl_color);
    free(t->dl_stack);
    free(t->dl_iter);
    free(t->dl_cycle);
    free(t->links);
    free(t->edges);
    free(t->switches);
    free(t->nodes);
    free(t);
}

/* ---------------------------------------------------------------- routing */

/* Routes, as datacenter switches hold them: per switch a table of
 * prefixes -- host routes for the hosts hanging off it, one entry per rack
 * or pod below it (down-routes), and a default group of its up ports (the
 * ECMP group towards every destination not below it).  For the
 * hierarchical kinds (star, leaf-spine, fat tree) the tables follow from
 * the wiring in one pass over the links: O(hosts + cables), and a switch
 * holds O(its ports) entries.  These are exactly the shortest-path routes
 * (in an up-down hierarchy every shortest path goes up, then down).
 *
 * Failures.  A link from a switch to a host that is down takes the host
 * out (rack_of = SWITCH_NO_RACK: no route anywhere, as no switch can reach
 * it); a down link leaves its ECMP group.  A switch-to-switch link that is
 * down can change shortest paths only towards the racks whose paths used
 * it (the racks below its far end for a down-link; every rack not below
 * its near end for an up-link): for those racks, and only those, routes
 * are computed by a breadth-first search backwards from the rack's switch
 * over the links that are up (a valley path if the hierarchy no longer
 * reaches it, no route if nothing does), written as rack entries, which
 * take precedence over pod and default entries.  Kinds that are not
 * hierarchical (ring) use that search for every rack: O(racks x cables). */

static void sort_ports(uint32_t *ports, unsigned np)
{
    for (unsigned i = 1; i < np; i++) /* insertion sort: small, nearly sorted */
        for (unsigned j = i; j > 0 && ports[j - 1] > ports[j]; j--) {
            uint32_t tmp = ports[j];
            ports[j] = ports[j - 1];
            ports[j - 1] = tmp;
        }
}

/* Shortest-path routes towards switch a at every other switch: as rack
 * entries (a's up hosts), or, with `node` != NO_VERTEX, as host routes to
 * that node (a programmable switch's own address, held by switch a);
 * `blackhole`: an explicit empty entry where a switch has none (it must
 * shadow a less specific default). */
static void search_to(struct topology *t, unsigned a, uint32_t node, uint32_t *ports,
                      bool blackhole)
{
    uint32_t n = t->p.n_nodes;
    size_t nv = (size_t)n + t->n_switches;
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
            if (u < n || t->dist[u] != NO_DIST || !t->up[e])
                continue; /* nodes do not forward */
            t->dist[u] = t->dist[v] + 1;
            t->queue[tail++] = u;
        }
    }
    for (unsigned s = 0; s < t->n_switches; s++) {
        uint32_t u = n + s;
        if (s == a)
            continue;
        unsigned np = 0;
        uint32_t k_end = t->dist[u] != NO_DIST ? t->out_start[u + 1] : t->out_start[u];
        for (uint32_t k = t->out_start[u]; k < k_end; k++) {
            uint32_t e = t->out_edges[k];
            uint32_t v = t->edges[e].to_v;
            if (t->up[e] && t->dist[v] != NO_DIST && t->dist[v] + 1 == t->dist[u])
                ports[np++] = t->edges[e].port;
        }
        struct fswitch *sw = t->switches[s];
        if (np)
            sort_ports(ports, np);
        if (!np && !blackhole)
            continue;
        uint32_t set = switch_new_route_set(sw, np ? ports : NULL, np);
        if (node != NO_VERTEX)
            switch_use_route_set(sw, node, set);
        else
            switch_route_rack(sw, a, set);
    }
}

/* The hierarchical tables from the wiring: host routes at each rack, a
 * down-route per rack or pod below, the up ports as the default group. */
static void build_tables(struct topology *t, uint32_t *ports)
{
    uint32_t n = t->p.n_nodes;
    for (unsigned s = 0; s < t->n_switches; s++) {
        struct fswitch *sw = t->switches[s];
        uint32_t u = n + s;
        unsigned nu = 0;
        for (uint32_t k = t->out_start[u]; k < t->out_start[u + 1]; k++) {
            uint32_t e = t->out_edges[k];
            uint32_t v = t->edges[e].to_v, port = t->edges[e].port;
            if (!t->up[e])
                continue;
            if (v < n) {
                switch_set_route(sw, v, port);
                continue;
            }
            unsigned c = v - n;
            if (t->level[c] > t->level[s]) {
                ports[nu++] = port;
                continue;
            }
            /* one down port per rack (leaf-spine spine, fat-tree agg) or
             * per pod (fat-tree core) in these wirings */
            uint32_t set = switch_new_route_set(sw, &port, 1);
            if (t->level[c] == 0)
                switch_route_rack(sw, c, set);
            else
                switch_route_pod(sw, t->pod_of[t->below_lo[c]], set);
        }
        if (nu) {
            sort_ports(ports, nu);
            switch_route_default(sw, switch_new_route_set(sw, ports, nu));
        }
    }
}

static void mark_racks(struct topology *t, uint32_t lo, uint32_t hi, bool inside)
{
    for (uint32_t r = 0; r < t->n_racks; r++)
        if ((r >= lo && r < hi) == inside)
            t->affected[r] = 1;
}

/* ---------------------------------------------------------------- multicast */

/* UD multicast on a tree.  A group's tree is rooted at one switch of the
 * top level (the star's switch, a spine, a core; on a ring, which has no
 * levels, any switch; the group id picks which, so groups spread over
 * them) and spans every switch reachable from it going down (on a ring:
 * both ways round, so the tree is the ring cut opposite the root) over
 * links that are up both ways, each switch hanging off the
 * first parent the breadth-first search meets (lowest port).  The root is
 * the first, from that pick on, that reaches every member's rack.  Each
 * switch of the tree gets an entry (switch_mcast_set): its member hosts,
 * its children with members below them, and its parent if members are
 * outside its subtree.  A packet then goes up the tree from its sender's
 * rack and down every branch with members, never back: every member gets
 * it once, and no frame loops.  Racks the tree misses (no such root)
 * drop the group's packets.  This is the shared tree of PIM-SM-style
 * datacenter multicast, and what a subnet manager builds for an
 * InfiniBand multicast group (a spanning tree per MLID, IBA 18.2.4.3). */
static void mcast_tree(struct topology *t, unsigned root, uint32_t *parent, uint32_t *down_e,
                       uint32_t *up_e)
{
    uint32_t n = t->p.n_nodes;
    for (unsigned s = 0; s < t->n_switches; s++)
        parent[s] = NO_VERTEX;
    size_t head = 0, tail = 0;
    parent[root] = root;
    t->queue[tail++] = root;
    while (head < tail) {
        uint32_t u = t->queue[head++];
        for (uint32_t k = t->out_start[n + u]; k < t->out_start[n + u + 1]; k++) {
            uint32_t e = t->out_edges[k], v = t->edges[e].to_v;
            /* a hierarchy: down only; a ring (no levels): either way round */
            if (v < n || parent[v - n] != NO_VERTEX ||
                (t->hierarchical && t->level[v - n] >= t->level[u]) || !link_is_up(t->links[e]))
                continue;
            uint32_t rev = NO_VERTEX; /* the cable's way back up */
            for (uint32_t j = t->out_start[v]; j < t->out_start[v + 1] && rev == NO_VERTEX; j++)
                if (t->edges[t->out_edges[j]].to_v == n + u)
                    rev = t->out_edges[j];
            if (rev == NO_VERTEX || !link_is_up(t->links[rev]))
                continue;
            parent[v - n] = u;
            down_e[v - n] = e;
            up_e[v - n] = rev;
            t->queue[tail++] = v - n;
        }
    }
}

static void mcast_build(struct topology *t, const struct topo_mgroup *g)
{
    uint32_t n = t->p.n_nodes, ns = t->n_switches;
    if (!ns)
        return;
    uint32_t *parent = calloc(ns, sizeof(*parent)), *down_e = calloc(ns, sizeof(*down_e));
    uint32_t *up_e = calloc(ns, sizeof(*up_e)), *cnt = calloc(ns, sizeof(*cnt));
    struct switch_mc_port *out = calloc(t->n_links + 1, sizeof(*out));
    if (!parent || !down_e || !up_e || !cnt || !out) {
        fprintf(stderr, "rnicsim: topology: out of memory building a multicast tree\n");
        abort();
    }
    uint8_t top = 0;
    unsigned n_top = 0;
    for (unsigned s = 0; s < ns; s++)
        top = t->level[s] > top ? t->level[s] : top;
    for (unsigned s = 0; s < ns; s++)
        n_top += t->level[s] == top;
    /* The root: the first top switch (from one picked by the group id)
     * whose tree reaches every rack with a host, so that a sender which is
     * not a member (a send-only UD sender) still reaches the group after a
     * link failure; failing that, one that reaches every member's rack. */
    bool ok = false;
    for (unsigned pass = 0; pass < 2 && !ok; pass++)
        for (unsigned i = 0; i < n_top && !ok; i++) {
            unsigned want = (g->id + i) % n_top, root = 0;
            for (unsigned s = 0, k = 0; s < ns; s++)
                if (t->level[s] == top && k++ == want)
                    root = s;
            mcast_tree(t, root, parent, down_e, up_e);
            ok = true;
            for (uint32_t j = 0; j < (pass ? g->n : n) && ok; j++) {
                /* a sender's rack as wired (its downlink may be down);
                 * a member's as reachable */
                uint32_t r = pass ? t->rack_of[g->nodes[j]] : t->rack_home[j];
                ok = r == SWITCH_NO_RACK || parent[r] != NO_VERTEX;
            }
            if (ok)
                parent[root] = NO_VERTEX - 1; /* the root: no parent, in the tree */
        }
    /* members by rack (their order kept), so each switch finds its own
     * without scanning the group: O(members + switches) */
    uint32_t *mstart = calloc(ns + 1, sizeof(*mstart));
    uint32_t *mlist = calloc(g->n ? g->n : 1, sizeof(*mlist));
    if (!mstart || !mlist) {
        fprintf(stderr, "rnicsim: topology: out of memory building a multicast tree\n");
        abort();
    }
    for (uint32_t j = 0; j < g->n; j++) {
        uint32_t r = t->rack_of[g->nodes[j]];
        if (r != SWITCH_NO_RACK && r < ns)
            mstart[r + 1]++;
    }
    for (unsigned s = 0; s < ns; s++)
        mstart[s + 1] += mstart[s];
    for (uint32_t j = 0, *fill = cnt; j < g->n; j++) { /* cnt as the cursor, reset below */
        uint32_t r = t->rack_of[g->nodes[j]];
        if (r != SWITCH_NO_RACK && r < ns)
            mlist[mstart[r] + fill[r]++] = g->nodes[j];
    }
    memset(cnt, 0, ns * sizeof(*cnt));
    uint32_t m = 0; /* members below each switch of the tree, and in all */
    for (uint32_t j = 0; ok && j < g->n; j++) {
        uint32_t r = t->rack_of[g->nodes[j]];
        if (r == SWITCH_NO_RACK)
            continue;
        m++;
        for (uint32_t s = r; s != NO_VERTEX - 1; s = parent[s])
            cnt[s]++;
    }
    for (unsigned s = 0; s < ns; s++) {
        uint32_t k = 0;
        if (!ok || parent[s] == NO_VERTEX) {
            switch_mcast_set(t->switches[s], g->id, NULL, 0);
            continue;
        }
        for (uint32_t j = mstart[s]; j < mstart[s + 1]; j++)
            out[k++] = (struct switch_mc_port){
                .port = t->edges[link_trace_id(t->nodes[mlist[j]].downlink)].port,
                .kind = SWITCH_MC_HOST};
        /* every cable of the tree at s: the ones with members beyond send,
         * the others only take frames in (a sender's rack without members,
         * a parent when every member is below) */
        for (uint32_t j = t->out_start[n + s]; j < t->out_start[n + s + 1]; j++) {
            uint32_t e = t->out_edges[j], v = t->edges[e].to_v;
            if (v >= n && parent[v - n] == s && down_e[v - n] == e)
                out[k++] = (struct switch_mc_port){
                    .port = t->edges[e].port, .kind = cnt[v - n] ? SWITCH_MC_DOWN : SWITCH_MC_IN};
        }
        if (parent[s] != NO_VERTEX - 1)
            out[k++] = (struct switch_mc_port){.port = t->edges[up_e[s]].port,
                                               .kind = cnt[s] < m ? SWITCH_MC_UP : SWITCH_MC_IN};
        switch_mcast_set(t->switches[s], g->id, out, k);
    }
    free(parent);
    free(down_e);
    free(up_e);
    free(cnt);
    free(out);
    free(mstart);
    free(mlist);
}

void topo_recompute_routes(struct topology *t)
{
    uint32_t n = t->p.n_nodes;
    for (unsigned s = 0; s < t->n_switches; s++)
        switch_clear_routes(t->switches[s]);
    if (t->n_switches == 0)
        return;
    /* link states from one byte array (the searches read each many times) */
    for (unsigned e = 0; e < t->n_links; e++)
        t->up[e] = link_is_up(t->links[e]);
    for (uint32_t d = 0; d < n; d++) {
        struct link *dl = t->nodes[d].downlink;
        bool up = dl && link_is_up(dl) && t->rack_home[d] != SWITCH_NO_RACK;
        t->rack_of[d] = up ? t->rack_home[d] : SWITCH_NO_RACK;
    }
    size_t n_ports = t->n_links > t->n_switches ? t->n_links : t->n_switches;
    uint32_t *ports = calloc(n_ports ? n_ports : 1, sizeof(*ports));
    uint8_t *search = calloc(t->n_racks ? t->n_racks : 1, 1);
    if (!ports || !search) {
        fprintf(stderr, "rnicsim: topology: out of memory computing routes\n");
        abort();
    }
    if (t->hierarchical) {
        build_tables(t, ports);
        memset(t->affected, 0, t->n_racks);
        /* up links still up, per switch: `ports` is free until the searches */
        uint32_t *n_up = ports;
        memset(n_up, 0, t->n_switches * sizeof(*n_up));
        for (unsigned e = 0; e < t->n_links; e++) {
            uint32_t u = t->edges[e].from_v, v = t->edges[e].to_v;
            if (t->up[e] && u >= n && v >= n && t->level[v - n] > t->level[u - n])
                n_up[u - n]++;
        }
        for (unsigned e = 0; e < t->n_links; e++) {
            uint32_t u = t->edges[e].from_v, v = t->edges[e].to_v;
            if (t->up[e] || u < n || v < n)
                continue; /* a host's uplink or downlink: rack_of covers it */
            u -= n;
            v -= n;
            if (t->level[v] < t->level[u])
                mark_racks(t, t->below_lo[v], t->below_hi[v], true);
            else if (!n_up[u])
                mark_racks(t, t->below_lo[u], t->below_hi[u], false);
            /* else: u keeps an up link.  Every up neighbour of a switch
             * reaches every rack not below it at the same distance in these
             * wirings (a leaf's spines; an edge's aggregations, which
             * reach the same pods; an aggregation's cores), so u's default
             * group without the port (build_tables) is the shortest-path
             * set, and paths from below u through u keep their length:
             * no search (it was one per rack, the cost of a full set-up) */
        }
        memcpy(search, t->affected, t->n_racks);
    } else {
        memset(search, 1, t->n_racks);
    }
    /* searches only for racks with a host to reach */
    uint8_t *reach = t->affected;
    memset(reach, 0, t->n_racks);
    for (uint32_t d = 0; d < n; d++)
        if (t->rack_of[d] != SWITCH_NO_RACK)
            reach[t->rack_of[d]] = 1;
    for (unsigned a = 0; a < t->n_racks; a++) {
        if (!search[a] || !reach[a])
            continue;
        search_to(t, a, NO_VERTEX, ports, t->hierarchical);
    }
    /* a programmable switch's own address: host routes along the shortest
     * paths to its switch (the one a searched rack gets; O(cables)) */
    if (t->p.switch_node && t->p.switch_node_at < t->n_switches)
        search_to(t, t->p.switch_node_at, n, ports, true);
    if (!t->hierarchical) /* at its rack, each node through its downlink */
        for (uint32_t d = 0; d < n; d++)
            if (t->rack_of[d] != SWITCH_NO_RACK)
                switch_set_route(t->switches[t->rack_of[d]], d,
                                 t->edges[link_trace_id(t->nodes[d].downlink)].port);
    free(ports);
    free(search);
    for (uint32_t i = 0; i < t->n_mgroups; i++) /* trees over the links now up */
        mcast_build(t, &t->mgroups[i]);
}

size_t topo_route_table_bytes(const struct topology *t)
{
    size_t b = (size_t)t->p.n_nodes * 2 * sizeof(uint32_t);
    for (unsigned s = 0; s < t->n_switches; s++)
        b += switch_route_table_bytes(t->switches[s]);
    return b;
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

int topo_switch_index(const struct topo_params *p, const char *name)
{
    static const struct {
        const char *prefix;
        enum topo_kind kind;
    } names[] = {{"sw", TOPO_STAR},       {"leaf", TOPO_LEAF_SPINE}, {"spine", TOPO_LEAF_SPINE},
                 {"edge", TOPO_FAT_TREE}, {"agg", TOPO_FAT_TREE},    {"core", TOPO_FAT_TREE},
                 {"ring", TOPO_RING}};
    for (size_t i = 0; name && i < sizeof(names) / sizeof(names[0]); i++) {
        size_t len = strlen(names[i].prefix);
        if (p->kind != names[i].kind || strncmp(name, names[i].prefix, len) != 0)
            continue;
        const char *d = name + len;
        char *end;
        if (*d < '0' || *d > '9' || (d[0] == '0' && d[1]))
            return -1; /* digits only, no leading zero */
        unsigned long k = strtoul(d, &end, 10);
        const unsigned long h = p->fat_tree_k / 2, n_edge = (unsigned long)p->fat_tree_k * h;
        unsigned long lo = 0, count = 0;
        switch (i) {
        case 0:
            count = 1;
            break;
        case 1:
            count = p->n_leaves;
            break;
        case 2:
            lo = p->n_leaves;
            count = p->n_spines;
            break;
        case 3:
            count = n_edge;
            break;
        case 4:
            lo = n_edge;
            count = n_edge;
            break;
        case 5:
            lo = 2 * n_edge;
            count = h * h;
            break;
        default:
            count = p->n_nodes;
            break;
        }
        return *end || k >= count ? -1 : (int)(lo + k);
    }
    return -1;
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

int topo_path(const struct topology *t, uint32_t src, uint32_t dst, uint32_t wire_bytes,
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
        out->one_way_ps += lp->delay_ps + sim_bytes_to_ps(wire_bytes, lp->rate_bps);
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
    group &= ~PKT_MCAST_NODE;
    struct topo_mgroup *g = NULL;
    for (uint32_t i = 0; i < t->n_mgroups && !g; i++)
        if (t->mgroups[i].id == group)
            g = &t->mgroups[i];
    if (!g) {
        if (!join)
            return 0;
        struct topo_mgroup *ng = realloc(t->mgroups, (t->n_mgroups + 1) * sizeof(*ng));
        if (!ng)
            return -1;
        t->mgroups = ng;
        g = &t->mgroups[t->n_mgroups++];
        *g = (struct topo_mgroup){.id = group};
    }
    uint32_t i = 0;
    while (i < g->n && g->nodes[i] != node)
        i++;
    if (join == (i < g->n))
        return 0; /* already in (out) */
    if (join) {
        uint32_t *nn = realloc(g->nodes, (g->n + 1) * sizeof(*nn));
        if (!nn)
            return -1;
        g->nodes = nn;
        g->nodes[g->n++] = node;
    } else {
        memmove(g->nodes + i, g->nodes + i + 1, (g->n - i - 1) * sizeof(*g->nodes));
        g->n--;
    }
    mcast_build(t, g);
    return 0;
}
