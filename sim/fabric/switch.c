/* Output-queued switch.
 *
 *   ingress links -> switch_sink -> [forwarding pipeline: latency_ps]
 *                 -> route table (dst_node -> equal-cost ports)
 *                 -> pick one (routing mode) -> link_send(port link)
 *
 * Route selection among the equal-cost ports of the destination whose
 * link is up (a down port is skipped at once, as hardware does on loss of
 * signal):
 *   ecmp      h = hash of the RoCEv2 5-tuple (source and destination IPv4
 *             address, UDP source port, destination port 4791, protocol
 *             17) with the switch's own seed (drawn from the scenario seed
 *             and the switch name, so that two tiers or two switches of a
 *             tier do not hash alike: no polarisation); port h mod n, or
 *             if that one is down, the (h mod n_up)-th up port -- flows on
 *             healthy ports do not move (resilient hashing)
 *             On an InfiniBand fabric (packets in IB framing) ecmp is
 *             what a subnet manager's linear forwarding table does: the
 *             same with h = DLID - 1 (= dst_node), one path per
 *             destination LID, the LIDs dealt round robin over the
 *             equal-cost ports in LID order (as OpenSM's default min-hop
 *             engine balances them)
 *   static    the same with h = dst_node: one path per destination
 *   spray     an up port uniformly at random per packet (RNG stream
 *             "<switch name>.spray")
 *   spray-rr  the next up port per destination, round robin
 *
 * The egress queues are the port links themselves (link.c): their
 * `queue_bytes` is the per-port buffer (topology.c sets it to
 * port_buffer_bytes), so drop-tail happens in link_send and is counted on
 * the egress link.  The forwarding pipeline is a FIFO of (ready time, pkt)
 * with one intrusive event, as the latency is the same for every packet.
 *
 * Cut-through (the default, docs/fabric.md "Cut-through"): the pipeline
 * starts on a frame's head (pkt.head_ps, the arrival of its first bit), so
 * its head leaves latency_ps later and the egress link, if idle, starts
 * serialising then - before the last bit is in; the egress never finishes
 * before the last bit arrived (link.c).  With store_and_forward the
 * pipeline starts when the last bit has arrived, as a store-and-forward
 * switch does.  The FIFO keeps arrival order: a frame is never ready
 * before the one ahead of it. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "../trace.h"
#include "fabric.h"
#include "pfc.h"

#define SWITCH_NO_PORT UINT32_MAX

/* A set of equal-cost egress ports, in increasing order.  Destinations
 * share sets: every host behind one leaf has the same set at a spine, so
 * the table is an index per destination into a few distinct sets (what a
 * switch's LPM table with one prefix per rack amounts to), and lookups
 * touch one small array. */
struct route {
    uint32_t *ports;
    uint32_t n;
};

/* One level of the route table: entries for keys lo .. lo + n - 1 (host
 * ids, racks or pods), a set index + 1 each, 0 = no entry.  A switch holds
 * only the range it needs (a leaf its own hosts, a spine every rack, an
 * aggregation switch its pod's racks, a core every pod). */
struct rtab {
    uint32_t lo, n, cap;
    uint32_t *e;
};

struct fwd_slot {
    sim_time_t ready_ps;
    struct pkt *pkt;
};

struct switch_in;

struct lazy_end {
    sim_time_t end_ps;
    uint32_t port;
};

struct fswitch {
    struct sim *sim;
    char *name;
    struct switch_params p;
    struct pkt_pool *pool;

    struct link **ports;
    unsigned n_ports, ports_cap;

    /* Hierarchical route table (most specific first): host entries, rack
     * entries, pod entries, the default group; each entry is a set index
     * + 1 (0 = no entry here, look further).  Racks and pods come from the
     * topology's shared maps (switch_set_prefix_map). */
    struct rtab hosts, racks, pods;
    uint32_t default_set;    /* set index + 1, 0 = none */
    const uint32_t *rack_of; /* by node: its rack, SWITCH_NO_RACK = unreachable */
    uint32_t map_nodes;
    const uint32_t *pod_of; /* by rack: its pod, NULL = no pods */
    uint32_t *rr;           /* by dst_node: spray-rr position (spray-rr only) */
    size_t n_rr;
    struct route *sets;
    uint32_t n_sets, cap_sets;
    uint32_t *single; /* by port: the set {port} + 1, 0 = none yet */
    uint32_t cap_single;
    uint32_t ecmp_seed; /* per-switch ECMP hash seed */
    struct sim_rng rng; /* spray */

    struct pfc_port **in; /* ingress ports (switch_ingress_sink); in_port = index + 1 */
    struct switch_in **in_ctx;
    unsigned n_in, cap_in;

    /* With PFC: egress ports whose frame on the wire has a lazy end
     * (link.c), with that end; settled before a frame is admitted, so the
     * ingress counters are what they would be with an event at each end */
    struct lazy_end *lazy;
    uint32_t n_lazy, cap_lazy;
    uint32_t *lazy_at; /* by port: its entry in `lazy` + 1, 0 = none */
    uint32_t cap_lazy_at;
    sim_time_t lazy_min; /* no lazy end is due before this */

    struct fwd_slot *fwd; /* forwarding pipeline ring */
    size_t fwd_cap, fwd_head, fwd_n;
    struct sim_event fwd_ev;

    struct switch_counters c;
    struct fabric_sink hook;     /* programmable data plane (switch_set_ingress_hook) */
    struct mcast_group *mgroups; /* multicast membership (switch_mcast_join) */
    uint32_t n_mgroups;
};

/* One ingress port's sink context. */
struct switch_in {
    struct fswitch *sw;
    uint16_t port;         /* index + 1 */
    const struct link *in; /* the link it receives from */
    uint32_t back;         /* the egress port back over the same cable, or
                            * SWITCH_NO_PORT (switch_set_back_port) */
    bool from_switch;      /* the cable comes from another switch */
};

struct mcast_group {
    uint32_t id;
    struct switch_mc_port *ports; /* switch_mcast_set */
    uint32_t n;
};

static void *xrealloc(void *p, size_t bytes)
{
    void *np = realloc(p, bytes);
    if (!np) {
        fprintf(stderr, "rnicsim: switch: out of memory\n");
        abort();
    }
    return np;
}

static void fwd_ready(struct sim *sim, struct sim_event *ev);

struct fswitch *switch_create(struct sim *sim, const char *name, const struct switch_params *p,
                              struct pkt_pool *pool)
{
    if (!sim || !p)
        return NULL;
    struct fswitch *sw = calloc(1, sizeof(*sw));
    if (!sw)
        return NULL;
    sw->name = strdup(name ? name : "switch");
    if (!sw->name) {
        free(sw);
        return NULL;
    }
    sw->sim = sim;
    sw->p = *p;
    sw->pool = pool;
    char stream[96];
    snprintf(stream, sizeof(stream), "%s.ecmp", sw->name);
    struct sim_rng seed_rng;
    sim_rng_stream(sim, &seed_rng, stream);
    sw->ecmp_seed = (uint32_t)sim_rng_u64(&seed_rng);
    snprintf(stream, sizeof(stream), "%s.spray", sw->name);
    sim_rng_stream(sim, &sw->rng, stream);
    sim_event_init(&sw->fwd_ev, fwd_ready, sw, "switch.fwd");
    sw->lazy_min = SIM_TIME_NEVER;
    return sw;
}

const char *route_mode_name(enum route_mode m)
{
    static const char *const names[ROUTE_MODE_COUNT] = {
        [ROUTE_ECMP] = "ecmp",
        [ROUTE_STATIC] = "static",
        [ROUTE_SPRAY] = "spray",
        [ROUTE_SPRAY_RR] = "spray-rr",
    };
    return (unsigned)m < ROUTE_MODE_COUNT ? names[m] : "?";
}

void switch_destroy(struct fswitch *sw)
{
    if (!sw)
        return;
    sim_cancel(sw->sim, &sw->fwd_ev);
    for (size_t i = 0; i < sw->fwd_n; i++)
        pkt_free(sw->pool, sw->fwd[(sw->fwd_head + i) % sw->fwd_cap].pkt);
    free(sw->fwd);
    for (unsigned i = 0; i < sw->n_in; i++) {
        pfc_port_destroy(sw->in[i]);
        free(sw->in_ctx[i]);
    }
    free(sw->in);
    free(sw->in_ctx);
    for (uint32_t i = 0; i < sw->n_sets; i++)
        free(sw->sets[i].ports);
    free(sw->sets);
    free(sw->hosts.e);
    free(sw->racks.e);
    free(sw->pods.e);
    free(sw->rr);
    free(sw->single);
    free(sw->lazy);
    free(sw->lazy_at);
    for (uint32_t i = 0; i < sw->n_mgroups; i++)
        free(sw->mgroups[i].ports);
    free(sw->mgroups);
    free(sw->ports);
    free(sw->name);
    free(sw);
}

/* An egress frame left its queue: the ingress port that admitted it lets
 * its bytes go (PFC). */
static void egress_dequeued(void *ctx, struct pkt *p)
{
    struct fswitch *sw = ctx;
    if (p->in_port && p->in_port <= sw->n_in)
        pfc_release(sw->in[p->in_port - 1], p);
}

/* A frame on egress `port` would have a lazy end (link.c).  Its ingress
 * port's bytes are released at that end: if that port has paused its
 * upstream the release may resume it, so the end gets its event; else the
 * port is noted, and settled before the next admission. */
static bool egress_lazy(void *ctx, unsigned port, const struct pkt *p)
{
    struct fswitch *sw = ctx;
    if (p->in_port && p->in_port <= sw->n_in &&
        (pfc_port_timed(sw->in[p->in_port - 1]) & (1u << p->prio)))
        return false;
    sim_time_t end = link_pending_end(sw->ports[port]);
    if (sw->lazy_at[port]) {
        sw->lazy[sw->lazy_at[port] - 1].end_ps = end;
    } else {
        if (sw->n_lazy == sw->cap_lazy) {
            sw->cap_lazy = sw->cap_lazy ? 2 * sw->cap_lazy : 8;
            sw->lazy = xrealloc(sw->lazy, sw->cap_lazy * sizeof(*sw->lazy));
        }
        sw->lazy[sw->n_lazy++] = (struct lazy_end){end, port};
        sw->lazy_at[port] = sw->n_lazy;
    }
    if (end < sw->lazy_min)
        sw->lazy_min = end;
    return true;
}

static void lazy_remove(struct fswitch *sw, uint32_t i)
{
    sw->lazy_at[sw->lazy[i].port] = 0;
    if (i + 1 < sw->n_lazy) {
        sw->lazy[i] = sw->lazy[sw->n_lazy - 1];
        sw->lazy_at[sw->lazy[i].port] = i + 1;
    }
    sw->n_lazy--;
}

/* Process the lazy ends due by now (their bytes leave the ingress counts). */
static void settle_lazy(struct fswitch *sw)
{
    sim_time_t now = sim_now(sw->sim);
    if (now < sw->lazy_min)
        return;
    sim_time_t min = SIM_TIME_NEVER;
    for (uint32_t i = 0; i < sw->n_lazy;) {
        if (sw->lazy[i].end_ps <= now) {
            struct link *l = sw->ports[sw->lazy[i].port];
            link_settle(l);
            if (!link_lazy_pending(l)) {
                lazy_remove(sw, i);
                continue;
            }
            sw->lazy[i].end_ps = link_pending_end(l); /* a later frame's */
        }
        if (sw->lazy[i].end_ps < min)
            min = sw->lazy[i].end_ps;
        i++;
    }
    sw->lazy_min = min;
}

/* An ingress port has just paused its upstream: every lazy end gets its
 * event, so that releases happen at their instants (and resume on time). */
static void arm_lazy(struct fswitch *sw)
{
    for (uint32_t i = 0; i < sw->n_lazy; i++) {
        link_arm(sw->ports[sw->lazy[i].port]);
        sw->lazy_at[sw->lazy[i].port] = 0;
    }
    sw->n_lazy = 0;
    sw->lazy_min = SIM_TIME_NEVER;
}

unsigned switch_add_port(struct fswitch *sw, struct link *out)
{
    if (sw->p.pfc.enabled) {
        link_set_lossless(out, sw->p.pfc.prio_mask);
        link_set_dequeue_hook(out, egress_dequeued, sw);
        link_set_lazy_hook(out, egress_lazy, sw, sw->n_ports);
        if (sw->n_ports >= sw->cap_lazy_at) {
            uint32_t cap = sw->cap_lazy_at ? 2 * sw->cap_lazy_at : 8;
            sw->lazy_at = xrealloc(sw->lazy_at, cap * sizeof(*sw->lazy_at));
            memset(sw->lazy_at + sw->cap_lazy_at, 0,
                   (cap - sw->cap_lazy_at) * sizeof(*sw->lazy_at));
            sw->cap_lazy_at = cap;
        }
    }
    if (sw->p.ecn)
        link_set_ecn(out, &sw->p.ecn_red);
    if (sw->n_ports == sw->ports_cap) {
        sw->ports_cap = sw->ports_cap ? 2 * sw->ports_cap : 8;
        sw->ports = xrealloc(sw->ports, sw->ports_cap * sizeof(*sw->ports));
    }
    sw->ports[sw->n_ports] = out;
    return sw->n_ports++;
}

/* The set holding `ports` (n of them, increasing): a new one each call,
 * except single-port sets, which are made once per port, and a set equal
 * to the one made just before (a leaf's set towards every remote rack is
 * all its up spine ports: one set, not one per rack -- 256 leaves x 256
 * spines made 64 MiB of identical sets). */
uint32_t switch_new_route_set(struct fswitch *sw, const uint32_t *ports, uint32_t n)
{
    if (n == 1 && ports[0] < sw->cap_single && sw->single[ports[0]])
        return sw->single[ports[0]] - 1;
    if (n > 1 && sw->n_sets > 1 && sw->sets[sw->n_sets - 1].n == n &&
        !memcmp(sw->sets[sw->n_sets - 1].ports, ports, n * sizeof(*ports)))
        return sw->n_sets - 1;
    if (sw->n_sets == sw->cap_sets) {
        sw->cap_sets = sw->cap_sets ? 2 * sw->cap_sets : 16;
        sw->sets = xrealloc(sw->sets, sw->cap_sets * sizeof(*sw->sets));
    }
    if (sw->n_sets == 0) /* set 0: empty, "no route" */
        sw->sets[sw->n_sets++] = (struct route){NULL, 0};
    struct route *r = &sw->sets[sw->n_sets];
    r->n = n;
    r->ports = n ? xrealloc(NULL, n * sizeof(*r->ports)) : NULL;
    if (n)
        memcpy(r->ports, ports, n * sizeof(*ports));
    uint32_t idx = sw->n_sets++;
    if (n == 1) {
        if (ports[0] >= sw->cap_single) {
            uint32_t cap = sw->cap_single ? sw->cap_single : 8;
            while (cap <= ports[0])
                cap *= 2;
            sw->single = xrealloc(sw->single, cap * sizeof(*sw->single));
            memset(sw->single + sw->cap_single, 0, (cap - sw->cap_single) * sizeof(*sw->single));
            sw->cap_single = cap;
        }
        sw->single[ports[0]] = idx + 1;
    }
    return idx;
}

static uint32_t rtab_get(const struct rtab *t, uint32_t key)
{
    uint32_t i = key - t->lo; /* wraps for key < lo */
    return i < t->n ? t->e[i] : 0;
}

static void rtab_reserve(struct rtab *t, uint32_t n)
{
    if (n <= t->cap)
        return;
    uint32_t cap = t->cap ? t->cap : 4;
    while (cap < n)
        cap = cap > UINT32_MAX / 2 ? n : 2 * cap;
    t->e = xrealloc(t->e, (size_t)cap * sizeof(*t->e));
    t->cap = cap;
}

/* Entries grow to cover `key`, keys set in increasing order (what the
 * topology does) in amortised O(1). */
static void rtab_set(struct rtab *t, uint32_t key, uint32_t v)
{
    if (t->n == 0) {
        t->lo = key;
    } else if (key < t->lo) {
        uint32_t add = t->lo - key;
        rtab_reserve(t, t->n + add);
        memmove(t->e + add, t->e, (size_t)t->n * sizeof(*t->e));
        memset(t->e, 0, (size_t)add * sizeof(*t->e));
        t->n += add;
        t->lo = key;
    }
    if (key - t->lo >= t->n) {
        uint32_t n = key - t->lo + 1;
        rtab_reserve(t, n);
        memset(t->e + t->n, 0, ((size_t)n - t->n) * sizeof(*t->e));
        t->n = n;
    }
    t->e[key - t->lo] = v;
}

static void rtab_clear(struct rtab *t)
{
    if (t->n)
        memset(t->e, 0, (size_t)t->n * sizeof(*t->e));
}

static uint32_t entry(const struct fswitch *sw, uint32_t set)
{
    return set < sw->n_sets ? set + 1 : 1; /* an unknown set: the empty one */
}

void switch_set_prefix_map(struct fswitch *sw, const uint32_t *rack_of_node, uint32_t n_nodes,
                           const uint32_t *pod_of_rack)
{
    sw->rack_of = rack_of_node;
    sw->map_nodes = rack_of_node ? n_nodes : 0;
    sw->pod_of = pod_of_rack;
}

void switch_use_route_set(struct fswitch *sw, uint32_t dst_node, uint32_t set)
{
    rtab_set(&sw->hosts, dst_node, entry(sw, set));
}

void switch_route_rack(struct fswitch *sw, uint32_t rack, uint32_t set)
{
    rtab_set(&sw->racks, rack, entry(sw, set));
}

void switch_route_pod(struct fswitch *sw, uint32_t pod, uint32_t set)
{
    rtab_set(&sw->pods, pod, entry(sw, set));
}

void switch_route_default(struct fswitch *sw, uint32_t set)
{
    sw->default_set = entry(sw, set);
}

/* The set for dst_node (longest prefix first: host, rack, pod, default),
 * or NULL: no route. */
static const struct route *lookup(const struct fswitch *sw, uint32_t node)
{
    uint32_t e = rtab_get(&sw->hosts, node);
    if (!e && node < sw->map_nodes) {
        uint32_t rack = sw->rack_of[node];
        if (rack != SWITCH_NO_RACK) {
            e = rtab_get(&sw->racks, rack);
            if (!e && sw->pod_of)
                e = rtab_get(&sw->pods, sw->pod_of[rack]);
            if (!e)
                e = sw->default_set;
        }
    }
    return e ? &sw->sets[e - 1] : NULL;
}

void switch_set_route(struct fswitch *sw, uint32_t dst_node, unsigned port)
{
    uint32_t pt = port;
    switch_use_route_set(sw, dst_node, switch_new_route_set(sw, &pt, 1));
}

void switch_add_route(struct fswitch *sw, uint32_t dst_node, unsigned port)
{
    const struct route *cur = rtab_get(&sw->hosts, dst_node) ? lookup(sw, dst_node) : NULL;
    uint32_t n = cur ? cur->n : 0, tmp[64], *ports = n < 64 ? tmp : xrealloc(NULL, (n + 1) * 4);
    uint32_t k = 0, i = 0;
    for (; i < n && cur->ports[i] < port; i++)
        ports[k++] = cur->ports[i];
    if (i < n && cur->ports[i] == port) {
        if (ports != tmp)
            free(ports);
        return;
    }
    ports[k++] = port;
    for (; i < n; i++)
        ports[k++] = cur->ports[i];
    switch_use_route_set(sw, dst_node, switch_new_route_set(sw, ports, k));
    if (ports != tmp)
        free(ports);
}

void switch_clear_routes(struct fswitch *sw)
{
    rtab_clear(&sw->hosts);
    rtab_clear(&sw->racks);
    rtab_clear(&sw->pods);
    sw->default_set = 0;
    for (uint32_t i = 0; i < sw->n_sets; i++)
        free(sw->sets[i].ports);
    sw->n_sets = 0;
    if (sw->cap_single)
        memset(sw->single, 0, sw->cap_single * sizeof(*sw->single));
}

unsigned switch_route_ports(const struct fswitch *sw, uint32_t dst_node, const uint32_t **ports)
{
    const struct route *r = lookup(sw, dst_node);
    *ports = r ? r->ports : NULL;
    return r ? r->n : 0;
}

size_t switch_route_table_bytes(const struct fswitch *sw)
{
    size_t b = ((size_t)sw->hosts.cap + sw->racks.cap + sw->pods.cap) * sizeof(uint32_t) +
               (size_t)sw->cap_sets * sizeof(struct route) + sw->cap_single * sizeof(uint32_t) +
               sw->n_rr * sizeof(uint32_t);
    for (uint32_t i = 0; i < sw->n_sets; i++)
        b += sw->sets[i].n * sizeof(uint32_t);
    return b;
}

unsigned switch_n_ports(const struct fswitch *sw)
{
    return sw->n_ports;
}
struct link *switch_port(const struct fswitch *sw, unsigned port)
{
    return port < sw->n_ports ? sw->ports[port] : NULL;
}
const char *switch_name(const struct fswitch *sw)
{
    return sw->name;
}
const struct switch_params *switch_get_params(const struct fswitch *sw)
{
    return &sw->p;
}

const struct switch_counters *switch_get_counters(const struct fswitch *sw)
{
    return &sw->c;
}

/* MurmurHash3's 32-bit finaliser: every input bit affects every output bit. */
static uint32_t fmix32(uint32_t h)
{
    h ^= h >> 16;
    h *= 0x85ebca6bu;
    h ^= h >> 13;
    h *= 0xc2b2ae35u;
    h ^= h >> 16;
    return h;
}

static uint32_t rotl32(uint32_t x, int r)
{
    return (x << r) | (x >> (32 - r));
}

/* One 32-bit block of MurmurHash3_x86_32. */
static uint32_t murmur_block(uint32_t h, uint32_t k)
{
    k *= 0xcc9e2d51u;
    k = rotl32(k, 15);
    k *= 0x1b873593u;
    h ^= k;
    h = rotl32(h, 13);
    return h * 5 + 0xe6546b64u;
}

uint32_t fabric_ecmp_hash(uint32_t seed, const struct pkt *p)
{
    /* The 13 bytes switches hash for RoCEv2 (IPv4 source and destination,
     * UDP source and destination port, IP protocol), as MurmurHash3_x86_32
     * with the switch's seed.  Switch ASICs use CRC-based hash functions
     * with a configurable seed (e.g. Broadcom's "RTAG7"); what matters for
     * the model is that the result is uniform and differs per seed. */
    uint32_t h = seed;
    h = murmur_block(h, fabric_node_ipv4(p->src_node));
    h = murmur_block(h, fabric_node_ipv4(p->dst_node));
    h = murmur_block(h, ((uint32_t)p->udp_sport << 16) | PKT_ROCEV2_UDP_PORT);
    h = murmur_block(h, FABRIC_IPPROTO_UDP);
    return fmix32(h ^ 13u);
}

static bool port_up(const struct fswitch *sw, uint32_t port)
{
    return port < sw->n_ports && link_is_up(sw->ports[port]);
}

/* The k-th (0-based) up port of r, k < n_up. */
static uint32_t nth_up(const struct fswitch *sw, const struct route *r, uint32_t k)
{
    for (uint32_t i = 0; i < r->n; i++)
        if (port_up(sw, r->ports[i]) && k-- == 0)
            return r->ports[i];
    return SWITCH_NO_PORT;
}

static uint32_t count_up(const struct fswitch *sw, const struct route *r)
{
    uint32_t n_up = 0;
    for (uint32_t i = 0; i < r->n; i++)
        n_up += port_up(sw, r->ports[i]);
    return n_up;
}

/* One port of the route for `p`, or SWITCH_NO_PORT if all are down.  ECMP
 * and static look at the other ports' state only when the hashed one is
 * down (the common case costs one hash and one link). */
static uint32_t pick_port(struct fswitch *sw, const struct route *r, const struct pkt *p,
                          uint32_t node)
{
    if (r->n == 1)
        return port_up(sw, r->ports[0]) ? r->ports[0] : SWITCH_NO_PORT;
    uint32_t h, n_up;
    switch (sw->p.routing) {
    case ROUTE_SPRAY:
        n_up = count_up(sw, r);
        return n_up ? nth_up(sw, r, (uint32_t)sim_rng_below(&sw->rng, n_up)) : SWITCH_NO_PORT;
    case ROUTE_SPRAY_RR:
        if (node >= sw->n_rr) { /* positions only for destinations seen */
            size_t n = sw->n_rr ? sw->n_rr : 8;
            while (n <= node)
                n *= 2;
            sw->rr = xrealloc(sw->rr, n * sizeof(*sw->rr));
            memset(sw->rr + sw->n_rr, 0, (n - sw->n_rr) * sizeof(*sw->rr));
            sw->n_rr = n;
        }
        for (uint32_t i = 0; i < r->n; i++) {
            uint32_t port = r->ports[sw->rr[node]++ % r->n];
            if (port_up(sw, port))
                return port;
        }
        return SWITCH_NO_PORT;
    case ROUTE_STATIC:
        h = node;
        break;
    case ROUTE_ECMP:
    case ROUTE_MODE_COUNT:
    default:
        /* an InfiniBand packet has no 5-tuple: IB switches forward by
         * DLID through the linear forwarding table the subnet manager
         * wrote, one port per DLID (LMC 0: one LID per port).  The table's
         * entry is a hash of the DLID with the switch's own seed, so each
         * tier of a fat tree chooses independently of the tier below (the
         * DLID itself, modulo the fan-out, would pick with the same low
         * bits at every tier and leave half the cores of a k = 4 fat tree
         * idle) */
        h = p->framing == PKT_FRAMING_ROCEV2 ? fabric_ecmp_hash(sw->ecmp_seed, p)
                                             : fmix32(sw->ecmp_seed ^ (node + 1u));
        break;
    }
    uint32_t port = r->ports[h % r->n];
    if (port_up(sw, port))
        return port;
    n_up = count_up(sw, r);
    return n_up ? nth_up(sw, r, h % n_up) : SWITCH_NO_PORT;
}

static void trace_drop(struct fswitch *sw, const struct pkt *p, const char *where)
{
    if (p->in_port && p->in_port <= sw->n_in) /* it leaves the switch here */
        pfc_release(sw->in[p->in_port - 1], p);
    if (sim_trace_enabled(sw->sim))
        sim_trace(sw->sim,
                  &(struct trace_rec){.kind = TRACE_PKT_DROP,
                                      .track = TRK_COUNT, /* a switch: no track of its own */
                                      .peer = p->src_node,
                                      .peer_qpn = p->src_qpn,
                                      .opcode = p->opcode,
                                      .node = p->dst_node,
                                      .qpn = p->dest_qpn,
                                      .psn = p->psn,
                                      .len = p->payload_len,
                                      .where = where});
}

/* Route lookup towards `node` and hand-off to the egress queue. */
static void forward_node(struct fswitch *sw, struct pkt *p, uint32_t node)
{
    const struct route *r = lookup(sw, node);
    if (!r || r->n == 0) {
        sw->c.pkts_dropped_no_route++;
        trace_drop(sw, p, "switch: no route");
        pkt_free(sw->pool, p);
        return;
    }
    uint32_t port = pick_port(sw, r, p, node);
    if (port == SWITCH_NO_PORT) {
        sw->c.pkts_dropped_down++;
        trace_drop(sw, p, "switch: every port of the route is down");
        pkt_free(sw->pool, p);
        return;
    }
    /* An egress overflow is counted by the port link (pkts_dropped). */
    if (link_send(sw->ports[port], p))
        sw->c.pkts_forwarded++;
}

/* Whether a group's packet leaves on port m: to a member host always (a
 * member's own frames come back to it, as on IB), to a switch of the tree
 * unless it came from there (`back`: the port back over the cable it came
 * in on; SWITCH_NO_PORT: it did not come in on a port -- the switch's own
 * program made it -- so every branch); never on a tree cable that only
 * brings frames in (SWITCH_MC_IN). */
static bool mc_sends(const struct switch_mc_port *m, uint32_t back)
{
    return m->kind == SWITCH_MC_HOST || (m->kind != SWITCH_MC_IN && m->port != back);
}

/* Whether a frame that came in over the cable whose way back is `back`
 * may enter the group's tree here: from a host, from the switch itself,
 * or over a cable of the tree.  A frame from another switch over a cable
 * that is not (any more) on the tree is one the old tree had in flight
 * when a failure or a membership change moved it: the new tree reaches
 * every member without it, so copying it to every branch would give the
 * members it had already reached a second copy.  It is dropped: the
 * reverse-path check of a bidirectional shared tree (BIDIR-PIM, RFC 5015:
 * a router forwards a group's packet only if it arrived on an interface
 * of the tree, its RPF interface or one it is the designated forwarder
 * on). */
static bool mc_takes(const struct mcast_group *g, const struct switch_in *in)
{
    if (!in || !in->from_switch)
        return true;
    for (uint32_t i = 0; g && i < g->n; i++)
        if (g->ports[i].kind != SWITCH_MC_HOST && g->ports[i].port == in->back)
            return true;
    return false;
}

/* A multicast packet: a copy to every port of the group's tree entry but
 * the one it came from (fabric.h, switch_mcast_set; the original to the
 * last); dst_node keeps naming the group, which the NICs look up. */
static void forward_mcast(struct fswitch *sw, struct pkt *p)
{
    const struct mcast_group *g = NULL;
    for (uint32_t i = 0; i < sw->n_mgroups && !g; i++)
        if (sw->mgroups[i].id == (p->dst_node & ~PKT_MCAST_NODE))
            g = &sw->mgroups[i];
    /* Where it came from decides where it does not go back to: on a tree
     * every member then gets it once (a sender whose downlink is down
     * too: its frames come in on its uplink like anyone's) */
    const struct switch_in *in =
        p->in_port && p->in_port <= sw->n_in ? sw->in_ctx[p->in_port - 1] : NULL;
    uint32_t back = in ? in->back : SWITCH_NO_PORT;
    if (g && !mc_takes(g, in)) {
        sw->c.pkts_dropped_mcast_off_tree++;
        trace_drop(sw, p, "switch: multicast frame from a cable off the group's tree");
        pkt_free(sw->pool, p);
        return;
    }
    uint32_t n = 0;
    for (uint32_t i = 0; g && i < g->n; i++)
        n += mc_sends(&g->ports[i], back);
    if (n == 0) {
        sw->c.pkts_dropped_no_route++;
        trace_drop(sw, p, "switch: multicast group without members");
        pkt_free(sw->pool, p);
        return;
    }
    for (uint32_t i = 0, k = 0; k < n; i++) {
        const struct switch_mc_port *m = &g->ports[i];
        if (!mc_sends(m, back))
            continue;
        struct pkt *c = ++k < n ? pkt_clone(sw->pool, p) : p;
        if (!port_up(sw, m->port)) {
            sw->c.pkts_dropped_down++;
            trace_drop(sw, c, "switch: the multicast tree's port is down");
            pkt_free(sw->pool, c);
        } else if (link_send(sw->ports[m->port], c)) {
            sw->c.pkts_forwarded++;
        }
    }
}

/* Route lookup and hand-off to the egress queue. */
static void forward(struct fswitch *sw, struct pkt *p)
{
    if (pkt_node_is_mcast(p->dst_node))
        forward_mcast(sw, p);
    else
        forward_node(sw, p, p->dst_node);
}

static void fwd_ready(struct sim *sim, struct sim_event *ev)
{
    struct fswitch *sw = ev->ctx;
    struct pkt *p = sw->fwd[sw->fwd_head].pkt;
    sw->fwd_head = (sw->fwd_head + 1) % sw->fwd_cap;
    sw->fwd_n--;
    if (sw->fwd_n)
        sim_schedule_at(sim, &sw->fwd_ev, sw->fwd[sw->fwd_head].ready_ps);
    forward(sw, p);
}

static void switch_rx(struct sim *sim, void *ctx, struct pkt *p);

static void switch_rx_port(struct sim *sim, void *ctx, struct pkt *p)
{
    struct switch_in *in = ctx;
    struct fswitch *sw = in->sw;
    p->in_port = in->port;
    if (sw->p.pfc.enabled) {
        struct pfc_port *pt = sw->in[in->port - 1];
        settle_lazy(sw);
        uint8_t paused = pfc_port_paused(pt);
        bool ok = pfc_admit(pt, p);
        if (pfc_port_paused(pt) & ~paused)
            arm_lazy(sw);
        if (!ok) {
            p->in_port = 0; /* not admitted: nothing to release */
            if (sim_trace_enabled(sw->sim))
                trace_drop(sw, p, "switch: PFC headroom exceeded");
            pkt_free(sw->pool, p);
            return;
        }
    }
    switch_rx(sim, sw, p);
}

struct fabric_sink switch_ingress_sink(struct fswitch *sw, struct link *in)
{
    if (sw->n_in == sw->cap_in) {
        sw->cap_in = sw->cap_in ? 2 * sw->cap_in : 8;
        sw->in = xrealloc(sw->in, sw->cap_in * sizeof(*sw->in));
        sw->in_ctx = xrealloc(sw->in_ctx, sw->cap_in * sizeof(*sw->in_ctx));
    }
    struct pfc_port *pt = pfc_port_create(sw->sim, sw->pool, in, &sw->p.pfc, &sw->c);
    struct switch_in *ctx = calloc(1, sizeof(*ctx));
    if (!pt || !ctx) {
        fprintf(stderr, "rnicsim: switch: out of memory\n");
        abort();
    }
    ctx->sw = sw;
    ctx->port = (uint16_t)(sw->n_in + 1);
    ctx->in = in;
    ctx->back = SWITCH_NO_PORT;
    sw->in[sw->n_in] = pt;
    sw->in_ctx[sw->n_in] = ctx;
    sw->n_in++;
    return (struct fabric_sink){.rx = switch_rx_port, .ctx = ctx};
}

/* A frame has fully arrived on an ingress port (its first bit came at
 * p->head_ps). */
static void switch_rx(struct sim *sim, void *ctx, struct pkt *p)
{
    struct fswitch *sw = ctx;
    if (sw->hook.rx) { /* a programmable data plane (sim/pswitch) */
        sw->hook.rx(sim, sw->hook.ctx, p);
        return;
    }
    sim_time_t now = sim_now(sim);
    sim_time_t in = (!sw->p.store_and_forward && p->head_ps && p->head_ps < now) ? p->head_ps : now;
    sim_time_t ready = in + sw->p.latency_ps;
    if (sw->fwd_n && ready < sw->fwd[(sw->fwd_head + sw->fwd_n - 1) % sw->fwd_cap].ready_ps)
        ready = sw->fwd[(sw->fwd_head + sw->fwd_n - 1) % sw->fwd_cap].ready_ps;
    p->head_ps = ready; /* the egress may start on the head then (link.c) */
    if (ready <= now && !sw->fwd_n) {
        forward(sw, p);
        return;
    }
    if (sw->fwd_n == sw->fwd_cap) {
        size_t cap = sw->fwd_cap ? 2 * sw->fwd_cap : 16;
        struct fwd_slot *nf = xrealloc(NULL, cap * sizeof(*nf));
        for (size_t i = 0; i < sw->fwd_n; i++)
            nf[i] = sw->fwd[(sw->fwd_head + i) % sw->fwd_cap];
        free(sw->fwd);
        sw->fwd = nf;
        sw->fwd_cap = cap;
        sw->fwd_head = 0;
    }
    sw->fwd[(sw->fwd_head + sw->fwd_n) % sw->fwd_cap] = (struct fwd_slot){ready, p};
    sw->fwd_n++;
    if (!sim_event_pending(&sw->fwd_ev))
        sim_schedule_at(sim, &sw->fwd_ev, ready);
}

void switch_set_back_port(struct fswitch *sw, const struct link *in, uint32_t port,
                          bool from_switch)
{
    for (unsigned i = 0; i < sw->n_in; i++)
        if (sw->in_ctx[i]->in == in) {
            sw->in_ctx[i]->back = port;
            sw->in_ctx[i]->from_switch = from_switch;
        }
}

struct fabric_sink switch_sink(struct fswitch *sw)
{
    return (struct fabric_sink){.rx = switch_rx, .ctx = sw};
}

void switch_set_ingress_hook(struct fswitch *sw, struct fabric_sink hook)
{
    sw->hook = hook;
}

void switch_forward(struct fswitch *sw, struct pkt *p)
{
    p->head_ps = 0; /* the hook held the whole frame: its egress is store-and-forward */
    forward(sw, p);
}

void switch_drop(struct fswitch *sw, struct pkt *p)
{
    if (p->in_port && p->in_port <= sw->n_in)
        pfc_release(sw->in[p->in_port - 1], p);
    pkt_free(sw->pool, p);
}

void switch_mcast_set(struct fswitch *sw, uint32_t group, const struct switch_mc_port *ports,
                      uint32_t n)
{
    struct mcast_group *g = NULL;
    for (uint32_t i = 0; i < sw->n_mgroups && !g; i++)
        if (sw->mgroups[i].id == group)
            g = &sw->mgroups[i];
    if (!g) {
        if (!n)
            return;
        sw->mgroups = xrealloc(sw->mgroups, (sw->n_mgroups + 1) * sizeof(*sw->mgroups));
        g = &sw->mgroups[sw->n_mgroups++];
        memset(g, 0, sizeof(*g));
        g->id = group;
    }
    g->ports = n ? xrealloc(g->ports, n * sizeof(*g->ports)) : (free(g->ports), NULL);
    if (n)
        memcpy(g->ports, ports, n * sizeof(*ports));
    g->n = n;
}
