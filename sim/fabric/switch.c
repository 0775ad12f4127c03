/* Output-queued switch.
 *
 *   ingress links -> switch_sink -> [forwarding pipeline: latency_ps]
 *                 -> route table (dst_node -> equal-cost ports)
 *                 -> pick one (routing mode) -> link_send(port link)
 *
 * Route selection among the equal-cost ports of the destination whose
 * link is up (a down port is skipped at once, as hardware does on loss of
 * signal):
 *   ecmp      h = fmix32(flow_hash ^ salt), salt = FNV-1a of the switch
 *             name (so that two tiers do not hash alike); port h mod n, or
 *             if that one is down, the (h mod n_up)-th up port -- flows on
 *             healthy ports do not move (resilient hashing)
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
 * The model is store-and-forward: a frame enters the pipeline when its last
 * bit has arrived (docs/fabric.md discusses the cut-through difference). */
#include <stdlib.h>
#include <string.h>

#include "../trace.h"
#include "fabric.h"

#define SWITCH_NO_PORT UINT32_MAX

/* The equal-cost egress ports of one destination, in increasing order. */
struct route {
    uint32_t *ports;
    uint32_t n, cap;
    uint32_t rr; /* spray-rr position */
};

struct fwd_slot {
    sim_time_t ready_ps;
    struct pkt *pkt;
};

struct fswitch {
    struct sim *sim;
    char *name;
    struct switch_params p;
    struct pkt_pool *pool;

    struct link **ports;
    unsigned n_ports, ports_cap;

    struct route *route; /* by dst_node */
    size_t n_route;
    uint32_t salt;      /* ECMP hash salt */
    struct sim_rng rng; /* spray */

    struct fwd_slot *fwd; /* forwarding pipeline ring */
    size_t fwd_cap, fwd_head, fwd_n;
    struct sim_event fwd_ev;

    struct switch_counters c;
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
    uint32_t h = 2166136261u; /* FNV-1a 32 */
    for (const char *c = sw->name; *c; c++)
        h = (h ^ (unsigned char)*c) * 16777619u;
    sw->salt = h;
    char stream[96];
    snprintf(stream, sizeof(stream), "%s.spray", sw->name);
    sim_rng_stream(sim, &sw->rng, stream);
    sim_event_init(&sw->fwd_ev, fwd_ready, sw, "switch.fwd");
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
    for (size_t i = 0; i < sw->n_route; i++)
        free(sw->route[i].ports);
    free(sw->route);
    free(sw->ports);
    free(sw->name);
    free(sw);
}

unsigned switch_add_port(struct fswitch *sw, struct link *out)
{
    if (sw->n_ports == sw->ports_cap) {
        sw->ports_cap = sw->ports_cap ? 2 * sw->ports_cap : 8;
        sw->ports = xrealloc(sw->ports, sw->ports_cap * sizeof(*sw->ports));
    }
    sw->ports[sw->n_ports] = out;
    return sw->n_ports++;
}

static struct route *route_of(struct fswitch *sw, uint32_t dst_node)
{
    if (dst_node >= sw->n_route) {
        size_t n = sw->n_route ? sw->n_route : 8;
        while (n <= dst_node)
            n *= 2;
        sw->route = xrealloc(sw->route, n * sizeof(*sw->route));
        memset(sw->route + sw->n_route, 0, (n - sw->n_route) * sizeof(*sw->route));
        sw->n_route = n;
    }
    return &sw->route[dst_node];
}

void switch_set_route(struct fswitch *sw, uint32_t dst_node, unsigned port)
{
    route_of(sw, dst_node)->n = 0;
    switch_add_route(sw, dst_node, port);
}

void switch_add_route(struct fswitch *sw, uint32_t dst_node, unsigned port)
{
    struct route *r = route_of(sw, dst_node);
    uint32_t i = 0;
    while (i < r->n && r->ports[i] < port)
        i++;
    if (i < r->n && r->ports[i] == port)
        return;
    if (r->n == r->cap) {
        r->cap = r->cap ? 2 * r->cap : 2;
        r->ports = xrealloc(r->ports, r->cap * sizeof(*r->ports));
    }
    memmove(r->ports + i + 1, r->ports + i, (r->n - i) * sizeof(*r->ports));
    r->ports[i] = port;
    r->n++;
}

void switch_clear_routes(struct fswitch *sw)
{
    for (size_t i = 0; i < sw->n_route; i++)
        sw->route[i].n = 0;
}

unsigned switch_route_ports(const struct fswitch *sw, uint32_t dst_node, const uint32_t **ports)
{
    if (dst_node >= sw->n_route) {
        *ports = NULL;
        return 0;
    }
    *ports = sw->route[dst_node].ports;
    return sw->route[dst_node].n;
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

/* One port of the route for `p`, or SWITCH_NO_PORT if all are down. */
static uint32_t pick_port(struct fswitch *sw, struct route *r, const struct pkt *p)
{
    if (r->n == 1)
        return port_up(sw, r->ports[0]) ? r->ports[0] : SWITCH_NO_PORT;
    uint32_t n_up = 0;
    for (uint32_t i = 0; i < r->n; i++)
        n_up += port_up(sw, r->ports[i]);
    if (n_up == 0)
        return SWITCH_NO_PORT;
    uint32_t h;
    switch (sw->p.routing) {
    case ROUTE_SPRAY:
        return nth_up(sw, r, (uint32_t)sim_rng_below(&sw->rng, n_up));
    case ROUTE_SPRAY_RR:
        for (uint32_t i = 0; i < r->n; i++) {
            uint32_t port = r->ports[r->rr++ % r->n];
            if (port_up(sw, port))
                return port;
        }
        return SWITCH_NO_PORT; /* not reached: n_up > 0 */
    case ROUTE_STATIC:
        h = p->dst_node;
        break;
    case ROUTE_ECMP:
    case ROUTE_MODE_COUNT:
    default:
        h = fmix32(p->flow_hash ^ sw->salt);
        break;
    }
    uint32_t port = r->ports[h % r->n];
    return port_up(sw, port) ? port : nth_up(sw, r, h % n_up);
}

static void trace_drop(struct fswitch *sw, const struct pkt *p, const char *where)
{
    if (sim_trace_enabled(sw->sim))
        sim_trace(sw->sim, &(struct trace_rec){.kind = TRACE_PKT_DROP,
                                               .opcode = p->opcode,
                                               .node = p->dst_node,
                                               .qpn = p->dest_qpn,
                                               .psn = p->psn,
                                               .len = p->payload_len,
                                               .where = where});
}

/* Route lookup and hand-off to the egress queue. */
static void forward(struct fswitch *sw, struct pkt *p)
{
    struct route *r = p->dst_node < sw->n_route ? &sw->route[p->dst_node] : NULL;
    if (!r || r->n == 0) {
        sw->c.pkts_dropped_no_route++;
        trace_drop(sw, p, "switch: no route");
        pkt_free(sw->pool, p);
        return;
    }
    uint32_t port = pick_port(sw, r, p);
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

/* A frame has fully arrived on an ingress port. */
static void switch_rx(struct sim *sim, void *ctx, struct pkt *p)
{
    struct fswitch *sw = ctx;
    if (sw->p.latency_ps == 0) {
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
    sim_time_t ready = sim_time_add(sim_now(sim), sw->p.latency_ps);
    sw->fwd[(sw->fwd_head + sw->fwd_n) % sw->fwd_cap] = (struct fwd_slot){ready, p};
    sw->fwd_n++;
    if (!sim_event_pending(&sw->fwd_ev))
        sim_schedule_at(sim, &sw->fwd_ev, ready);
}

struct fabric_sink switch_sink(struct fswitch *sw)
{
    return (struct fabric_sink){.rx = switch_rx, .ctx = sw};
}
