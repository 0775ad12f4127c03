/* The fabric: links (a serialising queue followed by a propagation pipe, kept
 * as separate blocks as in htsim) with random loss / corruption and
 * failures, output-queued switches with finite buffers and equal-cost
 * multipath routing (static, ECMP, per-packet spraying), the topologies
 * built from them (back-to-back, star, leaf-spine), and packet capture to
 * pcap files in RoCEv2 encoding (pcap.h).
 *
 * Anything that can receive packets is a `struct fabric_sink`: a NIC port or
 * a switch port.  docs/fabric.md describes the model. */
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
    /* Per-frame probabilities, 0..1 (0 = never, the default).  A lost frame
     * occupies the wire and vanishes in the cable; a corrupted frame
     * reaches the far end, fails its ICRC check there and is dropped.
     * Each frame draws from the link's own RNG stream (named after the
     * link), compared as integers against p * 2^64, so a seed gives the
     * same drops on every machine. */
    double loss_prob;
    double corrupt_prob;
};

/* ---------------------------------------------------------------- link */

/* One direction of a cable: queue (serialisation at rate_bps, drop-tail when
 * queue_bytes is exceeded) -> pipe (delay_ps) -> sink.  Packets are not
 * reordered.  One event per frame (its arrival), plus one at its end only
 * when something depends on that instant (link.c). */
struct link;
struct pcap_writer; /* pcap.h */

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
/* A sender that paces itself on the link (the NIC's transmit engine):
 * after link_want_idle(l), `fn` is called once, at the next transition to
 * idle (the last queued frame has left).  link_want_idle returns false, and
 * registers nothing, if the link is idle now.  link_idle_count counts every
 * transition to idle, asked for or not. */
void link_set_idle_hook(struct link *l, sim_cb_fn fn, void *a, void *b);
bool link_want_idle(struct link *l);
uint64_t link_idle_count(struct link *l);

struct link_counters {
    uint64_t pkts_sent, bytes_sent; /* left the serialiser (incl. later lost); wire bytes */
    /* every frame this link did not deliver, whatever the reason: */
    uint64_t pkts_dropped, bytes_dropped;
    /* ... of which: */
    uint64_t pkts_dropped_overflow; /* drop-tail: queue_bytes exceeded */
    uint64_t pkts_lost;             /* loss_prob: vanished in the cable */
    uint64_t pkts_corrupted;        /* corrupt_prob: failed the ICRC at the far end */
    uint64_t pkts_dropped_down;     /* sent into, queued on or in flight on a failed link */
    uint64_t max_queue_bytes;
    sim_time_t busy_ps;               /* time spent serialising */
    uint64_t ecn_marked;              /* frames marked CE on enqueue */
    uint64_t pfc_frames_sent;         /* PFC pause frames transmitted */
    uint64_t pfc_xoff_rx, pfc_xon_rx; /* pauses / resumes applied to this transmitter */
    /* Credit-based flow control (link_set_credits): */
    uint64_t credit_stalls;         /* times a frame waited for the receiver's credits */
    sim_time_t credit_wait_ps;      /* time the transmitter had frames but no credit for any */
    uint64_t max_credit_used_bytes; /* most receiver buffer held at once (64 B blocks x 64) */
};
/* (A due lazy end is processed first, so the counters are those of now.) */
const struct link_counters *link_get_counters(const struct link *l);
const char *link_name(const struct link *l);
const struct link_params *link_get_params(const struct link *l);
/* A frame that was queued leaves the queue: transmitted, or dropped (the
 * switch's PFC accounting, pfc.c, releases its bytes). */
typedef void (*link_deq_fn)(void *ctx, struct pkt *p);
void link_set_dequeue_hook(struct link *l, link_deq_fn fn, void *ctx);
/* Lazy ends (link.c): the end of a frame with nothing queued behind it is
 * processed, dequeue hook included, by whatever touches the link next, not
 * by an event at that instant.  The owner of a dequeue hook whose effect is
 * timed (a switch's PFC accounting) is asked first: `fn` returns false to
 * have an event at the frame's end after all; link_settle processes a
 * lazy end that is due by now, link_arm gives the pending end its event. */
typedef bool (*link_lazy_fn)(void *ctx, unsigned cookie, const struct pkt *p);
void link_set_lazy_hook(struct link *l, link_lazy_fn fn, void *ctx, unsigned cookie);
void link_settle(struct link *l);
void link_arm(struct link *l);
bool link_lazy_pending(const struct link *l);      /* a lazy end is pending */
sim_time_t link_pending_end(const struct link *l); /* ... at this time */
/* Priorities, PFC and ECN (link.c has the rules). */
void link_set_peer(struct link *l, struct link *peer); /* the other direction of the cable */
struct link *link_peer(const struct link *l);
/* Enqueue a MAC control frame (a PFC pause): first in line, never dropped. */
void link_send_ctrl(struct link *l, struct pkt *p);
/* Priorities (bit mask) that drop-tail never drops (lossless under PFC). */
void link_set_lossless(struct link *l, uint8_t prio_mask);
/* RED-style ECN marking per priority queue (NULL: off). */
struct link_ecn {
    uint64_t kmin_bytes, kmax_bytes;
    double pmax;
};
void link_set_ecn(struct link *l, const struct link_ecn *e);
uint64_t link_prio_queued_bytes(const struct link *l, unsigned prio);
bool link_prio_paused(const struct link *l, unsigned prio);

/* Credit-based link-level flow control (InfiniBand, IBA vol. 1 7.9): the
 * receiver at the far end has a buffer of `limit_bytes` per priority (VL)
 * in `prio_mask`, counted in 64-byte blocks; the transmitter starts a
 * frame of such a priority only while the blocks it has sent and not had
 * back, plus the frame's (ceil(frame_bytes / 64)), fit.  The receiver
 * gives a frame's blocks back with link_credit_return when it frees them
 * (the flow-control packet reaches the transmitter one cable delay
 * later).  Frames the link loses on the way return their blocks as they
 * would have arrived (IBA's resynchronisation of the credit counters).
 * limit_bytes 0 turns it off.  A transmitter waiting for credits is not
 * idle, as a paused one (link.c). */
#define LINK_CREDIT_BLOCK_BYTES 64
void link_set_credits(struct link *l, uint8_t prio_mask, uint64_t limit_bytes);
void link_credit_return(struct link *l, const struct pkt *p);
/* Bytes of the receiver's buffer the transmitter counts as held (sent,
 * credit not back yet) for `prio`. */
uint64_t link_credit_used_bytes(struct link *l, unsigned prio);
/* The receiver's buffer per credited priority (0: no credits). */
uint64_t link_credit_limit_bytes(const struct link *l);
/* Time frames waited for credit: link_counters.credit_wait_ps (stalls that
 * ended) plus a stall still open now (at the end of a run, say). */
sim_time_t link_credit_wait_ps(const struct link *l);

/* Change rate, delay, queue or probabilities (between runs or before the
 * first frame; a frame on the wire keeps its old timing).  -1 (EINVAL) on
 * rate 0 or a probability outside 0..1. */
int link_set_params(struct link *l, const struct link_params *p);

/* Failure: a link that goes down flushes its queue, loses what is in the
 * cable, and drops every frame sent into it until it comes back up (each
 * counted in pkts_dropped_down).  A frame being serialised when it fails
 * finishes its serialisation and is dropped, so a sender pacing itself on
 * the idle hook keeps running.  Switches skip down ports at once; the
 * topology recomputes routes (topo_set_link_up). */
void link_set_up(struct link *l, bool up);
bool link_is_up(const struct link *l);

/* Packet capture taps.  LINK_TAP_TX writes each frame when its last bit
 * leaves the serialiser (frames later lost in the cable are in it); RX
 * writes it when it reaches the far end (corrupted frames are written with
 * a wrong ICRC, lost ones are absent).  The writer is not owned. */
enum link_tap { LINK_TAP_TX, LINK_TAP_RX };
#define LINK_MAX_TAPS 4
int link_add_capture(struct link *l, struct pcap_writer *w, enum link_tap where);

/* Trace id written in TRACE_PKT_DROP records (trace_rec.node); the
 * topology sets it to the link's index (topo_link). */
void link_set_trace_id(struct link *l, uint32_t id);
uint32_t link_trace_id(const struct link *l);

/* ---------------------------------------------------------------- switch */

/* The IPv4 address of node n: 10.a.b.c with a.b.c = n + 1 (node 0 is
 * 10.0.0.1), the address in the NIC's GID and in captured frames. */
static inline uint32_t fabric_node_ipv4(uint32_t node)
{
    return (10u << 24) | ((node + 1) & 0xffffffu);
}
enum { FABRIC_IPPROTO_UDP = 17 };
/* The ECMP hash of a packet's RoCEv2 5-tuple (source/destination address,
 * UDP source port, destination port 4791, protocol) with `seed`. */
uint32_t fabric_ecmp_hash(uint32_t seed, const struct pkt *p);

/* How a switch picks one of the equal-cost egress ports of a destination
 * (only ports whose link is up are candidates). */
enum route_mode {
    ROUTE_ECMP,     /* hash of the RoCEv2 5-tuple, seeded per switch: a flow keeps one path */
    ROUTE_STATIC,   /* by destination: every flow to a node takes the same path */
    ROUTE_SPRAY,    /* per packet, uniformly at random (the switch's RNG stream) */
    ROUTE_SPRAY_RR, /* per packet, round robin per destination */
    ROUTE_MODE_COUNT
};
const char *route_mode_name(enum route_mode m); /* "ecmp", "static", "spray", "spray-rr" */

/* PFC at the switch's ingress ports (pfc.c). */
struct pfc_params {
    bool enabled;
    uint8_t prio_mask;       /* lossless priorities */
    uint64_t xoff_bytes;     /* per ingress port and priority: pause upstream at this */
    uint64_t xon_bytes;      /* ... and resume at or below this */
    uint64_t headroom_bytes; /* admitted above xoff before a drop; 0 = from the cable */
    uint16_t quanta;         /* pause time of an XOFF, in 512-bit-time quanta */
    /* InfiniBand: instead of XOFF / XON, each ingress port's buffer of
     * xoff_bytes per lossless priority (VL) is the feeding link's credit
     * limit (link_set_credits): the upstream sends only what fits, frames
     * return their credit when they leave the switch; no pause frames, no
     * headroom, no drop (pfc.c) */
    bool credits;
    /* Not a parameter: called with `on_xoff_ctx` whenever a port sends an
     * XOFF (the topology's deadlock detector arms itself on it). */
    void (*on_xoff)(void *ctx);
    void *on_xoff_ctx;
};

struct switch_params {
    sim_time_t latency_ps;      /* forwarding latency: first bit in -> first bit out (cut-through),
                                   last bit in -> first bit out (store-and-forward) */
    uint64_t port_buffer_bytes; /* per output queue */
    enum route_mode routing;    /* 0 = ECMP */
    bool store_and_forward;     /* false (default): cut-through after the header */
    struct pfc_params pfc;
    bool ecn; /* RED-style ECN marking at every egress queue */
    struct link_ecn ecn_red;
};

struct fswitch;

struct fswitch *switch_create(struct sim *sim, const char *name, const struct switch_params *p,
                              struct pkt_pool *pool);
void switch_destroy(struct fswitch *sw);
/* Add an egress port that sends on `out` (the switch owns nothing of it);
 * returns the port index. */
unsigned switch_add_port(struct fswitch *sw, struct link *out);
/* Where packets for `dst_node` leave: exactly this port (replaces the set). */
void switch_set_route(struct fswitch *sw, uint32_t dst_node, unsigned port);
/* Add an equal-cost port for `dst_node` (no-op if already there). */
void switch_add_route(struct fswitch *sw, uint32_t dst_node, unsigned port);
/* Route sets shared by destinations: a set of `n` ports (increasing) made
 * once, then given to any number of destinations (what the topology does:
 * one set per switch and destination rack). */
uint32_t switch_new_route_set(struct fswitch *sw, const uint32_t *ports, uint32_t n);
void switch_use_route_set(struct fswitch *sw, uint32_t dst_node, uint32_t set);
/* Hierarchical routes, as datacenter switches hold them (a prefix per
 * rack and per pod, a default up-route group): a lookup for a node takes
 * its host entry, else its rack's entry, else its pod's, else the default
 * set.  The maps are the topology's, shared by every switch and not
 * copied: rack_of_node[node] (SWITCH_NO_RACK: no route to the node
 * anywhere), pod_of_rack[rack] (NULL: no pod level). */
#define SWITCH_NO_RACK UINT32_MAX
void switch_set_prefix_map(struct fswitch *sw, const uint32_t *rack_of_node, uint32_t n_nodes,
                           const uint32_t *pod_of_rack);
void switch_route_rack(struct fswitch *sw, uint32_t rack, uint32_t set);
void switch_route_pod(struct fswitch *sw, uint32_t pod, uint32_t set);
void switch_route_default(struct fswitch *sw, uint32_t set);
/* Bytes the route table holds (entries, sets). */
size_t switch_route_table_bytes(const struct fswitch *sw);
/* Forget every route (all destinations, every level). */
void switch_clear_routes(struct fswitch *sw);
/* The equal-cost ports of `dst_node`, in increasing order; returns how many. */
unsigned switch_route_ports(const struct fswitch *sw, uint32_t dst_node, const uint32_t **ports);
unsigned switch_n_ports(const struct fswitch *sw);
struct link *switch_port(const struct fswitch *sw, unsigned port);
const char *switch_name(const struct fswitch *sw);
const struct switch_params *switch_get_params(const struct fswitch *sw);
/* The sink that ingress links connect to (an anonymous port: no PFC). */
struct fabric_sink switch_sink(struct fswitch *sw);
/* An ingress port fed by link `in` (its peer is where pauses go out). */
struct fabric_sink switch_ingress_sink(struct fswitch *sw, struct link *in);
/* Programmable data plane (sim/pswitch): every frame reaching the switch's
 * ingress goes to `hook` instead of the fixed forwarding pipeline; the
 * hook hands frames back with switch_forward (or drops them with
 * switch_drop).  A hook with rx NULL restores the fixed pipeline. */
void switch_set_ingress_hook(struct fswitch *sw, struct fabric_sink hook);
/* Route `p` by its dst_node and give it to the egress port's queue now, as
 * the fixed pipeline does when its latency has passed (drops counted as
 * there); the egress starts no earlier than now (no cut-through). */
void switch_forward(struct fswitch *sw, struct pkt *p);
/* A frame the hook consumes or drops leaves the switch: its ingress port's
 * PFC accounting lets its bytes go; then it is freed. */
void switch_drop(struct fswitch *sw, struct pkt *p);
/* Multicast forwarding on a tree (the topology computes it, topo_mcast_join):
 * a packet to PKT_MCAST_NODE | group is copied to every port of the
 * switch's entry for the group but the one back over the cable it came in
 * on (switch_set_back_port): to member hosts always (a member's own frames
 * come back to it, as on IB), to child switches with members below and up
 * to the parent if members are outside this switch's subtree.  A packet the
 * switch itself made (a programmable switch's, in_port 0) goes to every
 * port of the entry.  So on a tree every member gets each packet once, and
 * no copy goes back where it came from.  The entry also lists the tree's
 * other cables (to a child with no members below, up to a parent when every
 * member is below: SWITCH_MC_IN), on which frames come in but none go out;
 * a frame from another switch over a cable that is not in the entry (one
 * the old tree had in flight when the tree moved) is dropped and counted
 * (pkts_dropped_mcast_off_tree), as a bidirectional shared tree's
 * reverse-path check does (RFC 5015). */
enum switch_mc_kind { SWITCH_MC_HOST, SWITCH_MC_DOWN, SWITCH_MC_UP, SWITCH_MC_IN };
struct switch_mc_port {
    uint32_t port;
    enum switch_mc_kind kind;
};
/* Replace the group's entry (n 0: the switch drops the group's packets). */
void switch_mcast_set(struct fswitch *sw, uint32_t group, const struct switch_mc_port *ports,
                      uint32_t n);
/* The egress port back over the cable whose receiving link is `in` (the
 * topology's wiring; multicast never sends a frame back that way), and
 * whether that cable comes from another switch (multicast takes frames
 * from switches only over the tree's cables). */
#define SWITCH_NO_PORT UINT32_MAX
void switch_set_back_port(struct fswitch *sw, const struct link *in, uint32_t port,
                          bool from_switch);

struct switch_counters {
    uint64_t pkts_forwarded, pkts_dropped_no_route;
    uint64_t pkts_dropped_down;           /* a route exists but every port of it is down */
    uint64_t pfc_xoff_sent, pfc_xon_sent; /* pause / resume frames sent upstream */
    uint64_t pfc_headroom_drops;          /* lossless frames dropped: headroom exceeded */
    uint64_t pkts_dropped_mcast_off_tree; /* multicast from a switch off the group's tree */
};
const struct switch_counters *switch_get_counters(const struct fswitch *sw);

/* ---------------------------------------------------------------- topologies */

enum topo_kind { TOPO_BACK_TO_BACK, TOPO_STAR, TOPO_LEAF_SPINE, TOPO_FAT_TREE, TOPO_RING };

struct topo_params {
    enum topo_kind kind;
    unsigned n_nodes; /* NIC ports; back-to-back needs 2; leaf-spine: leaves * hosts_per_leaf;
                       * fat tree: k^3 / 4; ring: one per switch, at least 3 */
    struct link_params link; /* every cable (leaf-spine: host <-> leaf) */
    struct switch_params sw; /* every switch (star, leaf-spine) */
    /* leaf-spine: node i hangs off leaf i / hosts_per_leaf; every leaf has
     * a cable to every spine, so two hosts on different leaves have
     * n_spines equal-cost paths. */
    unsigned n_leaves, n_spines, hosts_per_leaf;
    /* fat tree (Al-Fares, Loukissas, Vahdat, SIGCOMM 2008), k even: k pods
     * of k/2 edge and k/2 aggregation switches, (k/2)^2 core switches,
     * k/2 hosts per edge switch; node i hangs off edge i / (k/2) */
    unsigned fat_tree_k;
    /* cables between switches (leaf <-> spine; fat tree: edge <-> agg and
     * agg <-> core); rate_bps 0 = same as `link` */
    struct link_params spine_link;
    /* After a link goes down or up, switches other than the one the link
     * leaves stop (resume) using paths through it this much later
     * (routing convergence); the switch at the failed port reacts at once. */
    sim_time_t reroute_delay_ps;
    /* Switch switch_node_at (any switch: the star's, a leaf or spine, an
     * edge, aggregation or core switch, a ring switch; topo_switch_index
     * names them) is a programmable switch with an address of its own,
     * node id n_nodes: every other switch has a host route to it along
     * the shortest paths over the links that are up. */
    bool switch_node;
    unsigned switch_node_at;
};

struct topology;

/* Defaults: star of 2 nodes, 100 Gb/s links with 5 ns of cable each way
 * side, a cut-through-class switch, ECMP (sources in topology.c). */
void fabric_defaults(struct topo_params *p);
/* The defaults on a leaf-spine of `leaves` x `hosts_per_leaf` hosts under
 * `spines` spines (n_nodes = leaves x hosts_per_leaf). */
void fabric_leaf_spine(struct topo_params *p, unsigned leaves, unsigned spines,
                       unsigned hosts_per_leaf);

/* The index of the switch called `name` ("sw0", "leaf<l>", "spine<s>",
 * "edge<e>", "agg<a>", "core<c>", "ring<i>") in a topology built from p,
 * or -1 if it has none of that name. */
int topo_switch_index(const struct topo_params *p, const char *name);

/* Build links (and the switch).  Node i's egress link is topo_uplink(t, i);
 * packets for node i are delivered to the sink given by topo_attach(). */
struct topology *topo_create(struct sim *sim, const struct topo_params *p, struct pkt_pool *pool);
void topo_destroy(struct topology *t);
void topo_attach(struct topology *t, uint32_t node, struct fabric_sink sink);
struct link *topo_uplink(struct topology *t, uint32_t node);
/* The link that delivers to node i (its NIC's receive side). */
struct link *topo_downlink(struct topology *t, uint32_t node);
/* For results: iterate all links and switches. */
unsigned topo_n_links(const struct topology *t);
struct link *topo_link(const struct topology *t, unsigned i);
unsigned topo_n_switches(const struct topology *t);
struct fswitch *topo_switch(const struct topology *t, unsigned i);
/* A link by name ("node0->sw0", "leaf1->spine0"), or NULL. */
struct link *topo_find_link(const struct topology *t, const char *name);

/* Take a link down / up now, and recompute every switch's routes over the
 * links that are up (shortest paths, all equal-cost ports kept) after
 * reroute_delay_ps. */
void topo_set_link_up(struct topology *t, struct link *l, bool up);
/* The same at absolute time at_ps (>= now); -1 (EINVAL) if `l` is not a
 * link of `t`.  Events are owned (and cancelled) by the topology. */
int topo_schedule_link_state(struct topology *t, struct link *l, sim_time_t at_ps, bool up);
/* Recompute routes now (normally automatic). */
void topo_recompute_routes(struct topology *t);
/* Bytes of routing state: every switch's table and the shared prefix maps. */
size_t topo_route_table_bytes(const struct topology *t);
/* Node `node` joins (leaves) multicast group `group` (IGMP / the IB subnet
 * manager's job): the group's tree is rebuilt (topology.c "multicast": one
 * shared tree per group from a root switch that reaches every member's
 * rack; on a ring, the ring cut opposite the root; on a star, the switch
 * copies to every member), and again whenever routes are recomputed.
 * A switch copies a group's frame to every branch of the tree but the
 * cable it came in on. */
int topo_mcast_join(struct topology *t, uint32_t group, uint32_t node, bool join);

/* PFC deadlock detection (topology.c; on when the switches run PFC): a
 * cycle of links between switches, each paused at the same priority with
 * frames of it queued, each leading into the switch the next one leaves,
 * none of which sent a data frame during a whole check interval
 * (TOPO_DEADLOCK_CHECK_PS).  The first one found, or NULL. */
#define TOPO_DEADLOCK_CHECK_PS (100 * SIM_US)
struct topo_deadlock {
    sim_time_t at_ps; /* when the check found it */
    unsigned prio;
    unsigned n_links;
    const unsigned *links; /* topo_link() indices, in the order of the cycle */
};
const struct topo_deadlock *topo_pfc_deadlock(const struct topology *t);

/* The first equal-cost path from node `src` to node `dst` (following each
 * switch's route set), for what an unloaded fabric gives a flow: the one-way
 * time of a packet that takes `wire_bytes` of link time (its frame and its
 * framing's per-packet gap, pkt_wire_bytes: cable delays, serialisation at
 * each link's rate, store and forward, switch latencies), the number of
 * links and the slowest link's rate.  -1 when there is no path. */
struct topo_path_info {
    unsigned links;
    sim_time_t one_way_ps; /* for wire_bytes */
    sim_time_t latency_ps; /* cable delays + switch latencies only */
    uint64_t min_rate_bps; /* the bottleneck of the path */
};
int topo_path(const struct topology *t, uint32_t src, uint32_t dst, uint32_t wire_bytes,
              struct topo_path_info *out);

/* Per destination node: frames delivered, and frames that arrived after a
 * frame of the same flow (source node, source QP, destination QP) that was
 * sent later (pkt.t_sent_ps) -- reordering by the fabric. */
struct topo_node_counters {
    uint64_t pkts_delivered, pkts_reordered;
};
const struct topo_node_counters *topo_node_counters(const struct topology *t, uint32_t node);

#endif /* RNICSIM_FABRIC_H */
