/* Output-queued switch.
 *
 *   ingress links -> switch_sink -> [forwarding pipeline: latency_ps]
 *                 -> route table (dst_node -> port) -> link_send(port link)
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

#include "fabric.h"

#define SWITCH_NO_ROUTE UINT32_MAX

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

    uint32_t *route; /* port by dst_node; SWITCH_NO_ROUTE if none */
    size_t n_route;

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
    sim_event_init(&sw->fwd_ev, fwd_ready, sw, "switch.fwd");
    return sw;
}

void switch_destroy(struct fswitch *sw)
{
    if (!sw)
        return;
    sim_cancel(sw->sim, &sw->fwd_ev);
    for (size_t i = 0; i < sw->fwd_n; i++)
        pkt_free(sw->pool, sw->fwd[(sw->fwd_head + i) % sw->fwd_cap].pkt);
    free(sw->fwd);
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

void switch_set_route(struct fswitch *sw, uint32_t dst_node, unsigned port)
{
    if (dst_node >= sw->n_route) {
        size_t n = sw->n_route ? sw->n_route : 8;
        while (n <= dst_node)
            n *= 2;
        sw->route = xrealloc(sw->route, n * sizeof(*sw->route));
        for (size_t i = sw->n_route; i < n; i++)
            sw->route[i] = SWITCH_NO_ROUTE;
        sw->n_route = n;
    }
    sw->route[dst_node] = port;
}

const struct switch_counters *switch_get_counters(const struct fswitch *sw)
{
    return &sw->c;
}

/* Route lookup and hand-off to the egress queue. */
static void forward(struct fswitch *sw, struct pkt *p)
{
    uint32_t port = p->dst_node < sw->n_route ? sw->route[p->dst_node] : SWITCH_NO_ROUTE;
    if (port == SWITCH_NO_ROUTE || port >= sw->n_ports) {
        sw->c.pkts_dropped_no_route++;
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
    sim_time_t ready = sim_now(sim) + sw->p.latency_ps;
    sw->fwd[(sw->fwd_head + sw->fwd_n) % sw->fwd_cap] = (struct fwd_slot){ready, p};
    sw->fwd_n++;
    if (!sim_event_pending(&sw->fwd_ev))
        sim_schedule_at(sim, &sw->fwd_ev, ready);
}

struct fabric_sink switch_sink(struct fswitch *sw)
{
    return (struct fabric_sink){.rx = switch_rx, .ctx = sw};
}
