/* The fabric: links (a serialising queue followed by a propagation pipe, kept
 * as separate blocks as in htsim), output-queued switches with finite
 * buffers, and the topologies built from them (back-to-back, star).
 *
 * Anything that can receive packets is a `struct fabric_sink`: a NIC port or
 * a switch port. */
#ifndef RNICSIM_FABRIC_H
#define RNICSIM_FABRIC_H

#include <stdint.h>

#include "../pkt.h"
#include "../sim.h"

typedef void (*fabric_rx_fn)(struct sim *sim, void *ctx, struct pkt *pkt);

struct fabric_sink {
    fabric_rx_fn rx;
    void *ctx;
};

struct link_params {
    uint64_t rate_bps;    /* e.g. 100 Gb/s */
    sim_time_t delay_ps;  /* propagation delay (cable) */
    uint64_t queue_bytes; /* egress queue capacity; 0 = unbounded (NIC ports) */
};

/* ---------------------------------------------------------------- link */

/* One direction of a cable: queue (serialisation at rate_bps, drop-tail when
 * queue_bytes is exceeded) -> pipe (delay_ps) -> sink.  Packets are not
 * reordered. */
struct link;

struct link *link_create(struct sim *sim, const char *name, const struct link_params *p,
                         struct pkt_pool *pool);
void link_destroy(struct link *l);
void link_connect(struct link *l, struct fabric_sink sink);
/* Enqueue for transmission.  Returns false (and frees the packet) on
 * drop-tail overflow. */
bool link_send(struct link *l, struct pkt *p);
/* True when nothing is queued or being serialised. */
bool link_idle(const struct link *l);
/* Bytes queued, including the packet being serialised. */
uint64_t link_queued_bytes(const struct link *l);
/* Called (once per transition) when the queue drains, so a sender that
 * paces itself on the link (the NIC's transmit engine) can send more. */
void link_set_idle_hook(struct link *l, sim_cb_fn fn, void *a, void *b);

struct link_counters {
    uint64_t pkts_sent, bytes_sent; /* wire bytes incl. preamble/IFG */
    uint64_t pkts_dropped, bytes_dropped;
    uint64_t max_queue_bytes;
    sim_time_t busy_ps; /* time spent serialising */
};
const struct link_counters *link_get_counters(const struct link *l);
const char *link_name(const struct link *l);

/* ---------------------------------------------------------------- switch */

struct switch_params {
    sim_time_t latency_ps;      /* ingress-to-egress forwarding latency */
    uint64_t port_buffer_bytes; /* per output queue */
};

struct fswitch;

struct fswitch *switch_create(struct sim *sim, const char *name, const struct switch_params *p,
                              struct pkt_pool *pool);
void switch_destroy(struct fswitch *sw);
/* Add an egress port that sends on `out` (the switch owns nothing of it);
 * returns the port index. */
unsigned switch_add_port(struct fswitch *sw, struct link *out);
/* Where packets for `dst_node` leave. */
void switch_set_route(struct fswitch *sw, uint32_t dst_node, unsigned port);
/* The sink that ingress links connect to. */
struct fabric_sink switch_sink(struct fswitch *sw);

struct switch_counters {
    uint64_t pkts_forwarded, pkts_dropped_no_route;
};
const struct switch_counters *switch_get_counters(const struct fswitch *sw);

/* ---------------------------------------------------------------- topologies */

enum topo_kind { TOPO_BACK_TO_BACK, TOPO_STAR };

struct topo_params {
    enum topo_kind kind;
    unsigned n_nodes;        /* NIC ports; back-to-back needs 2 */
    struct link_params link; /* every cable */
    struct switch_params sw; /* star only */
};

struct topology;

/* Defaults: star of 2 nodes, 100 Gb/s links with 5 ns of cable each way
 * side, a cut-through-class switch (sources in topology.c). */
void fabric_defaults(struct topo_params *p);

/* Build links (and the switch).  Node i's egress link is topo_uplink(t, i);
 * packets for node i are delivered to the sink given by topo_attach(). */
struct topology *topo_create(struct sim *sim, const struct topo_params *p, struct pkt_pool *pool);
void topo_destroy(struct topology *t);
void topo_attach(struct topology *t, uint32_t node, struct fabric_sink sink);
struct link *topo_uplink(struct topology *t, uint32_t node);
/* For results: iterate all links and switches. */
unsigned topo_n_links(const struct topology *t);
struct link *topo_link(const struct topology *t, unsigned i);
unsigned topo_n_switches(const struct topology *t);
struct fswitch *topo_switch(const struct topology *t, unsigned i);

#endif /* RNICSIM_FABRIC_H */
