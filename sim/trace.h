/* Event trace: model events recorded at the moment they happen, for two
 * kinds of listeners.
 *
 *  - The ring: a bounded ring of the most recent records of the core group
 *    (packets at the NICs, drops, DMA writes landing in host memory, CQEs,
 *    polls, posts, notes), kept so that a failure -- an ordering violation,
 *    a deadlock -- can be explained by the events that led to it, and
 *    counted from (rnicsim table2).
 *  - A sink: a callback that receives every record of the groups it asks
 *    for as it is made (rnicsim run --timeline / --trace stream them to a
 *    file: tools/rnicsim/timeline.c).  Besides the core group it can ask
 *    for the spans of the host threads (verbs calls, parks), the NIC's
 *    engines, its caches, the PCIe directions and the fabric's links.
 *
 * Off unless enabled.  Every call site tests its group first with an
 * inline load of the simulator's first word (sim_trace_on), so a run
 * without a trace pays one load and one well-predicted branch per site. */
#ifndef RNICSIM_TRACE_H
#define RNICSIM_TRACE_H

#include <stdint.h>
#include <stdio.h>

#include "sim.h"

enum trace_kind {
    TRACE_PKT_TX,    /* NIC handed a packet to its uplink */
    TRACE_PKT_RX,    /* NIC received a packet from the fabric */
    TRACE_PKT_DROP,  /* a link / switch / NIC dropped a packet (loss, overflow, bad PSN) */
    TRACE_DMA_WRITE, /* bytes became visible in host memory */
    TRACE_DMA_READ,  /* the NIC read host memory */
    TRACE_CQE,       /* a CQE became visible */
    TRACE_POLL,      /* a program polled a CQ and got CQEs */
    TRACE_NOTE,      /* free text from a program or test driver; addr = a value
                        (host_trace_mark: a message number) */
    TRACE_POST,      /* a program posted a work request: node = host, qpn, opcode =
                        the ibv_wr_opcode (TRACE_POST_RECV / _SRQ_RECV for receives),
                        len = bytes of its scatter/gather list, val = the WQE's
                        index in the send queue (sends) */
    /* Sink-only kinds (never in the ring), on a track (enum trace_track): */
    TRACE_SPAN,    /* something occupied a unit from t0_ps for dur_ps (t0_ps may lie
                      before or after t_ps: the model computes some intervals ahead) */
    TRACE_INSTANT, /* a point event on a track at t0_ps */
    TRACE_COUNTER, /* a track's value changed to val at t0_ps (queue bytes) */
    TRACE_KIND_COUNT
};

/* Which listeners a record is for (a bit mask; sim_trace_on tests it). */
enum trace_group {
    TRACE_G_CORE = 1u << 0,   /* the kinds up to TRACE_POST: what the ring keeps */
    TRACE_G_HOST = 1u << 1,   /* host threads: verbs calls with their arguments, parks */
    TRACE_G_NIC = 1u << 2,    /* NIC engines: doorbell, WQE fetch, requester, responder,
                                 completer, TX/RX units, DMA, translation, atomics, READ engine */
    TRACE_G_CACHE = 1u << 3,  /* NIC caches: every lookup (hit / miss) and miss fetch */
    TRACE_G_PCIE = 1u << 4,   /* PCIe: TLPs of each direction, by kind */
    TRACE_G_FABRIC = 1u << 5, /* links: frames on the wire, queue bytes, PFC */
    TRACE_G_ALL = 0x3fu,
};

/* The unit a span / instant / counter belongs to.  Each is one track of a
 * timeline: per host thread, per NIC engine, per PCIe direction, per link. */
enum trace_track {
    TRK_THREAD,    /* a host thread: unit = its index on the host (host_thread.tl_index) */
    TRK_DOORBELL,  /* NIC: doorbell decode (doorbell_proc) */
    TRK_WQE_FETCH, /* NIC: DMA read of WQEs */
    TRK_REQ,       /* NIC requester / send engine: one WQE (wqe_proc) */
    TRK_TX,        /* NIC transmit engine: one packet (tx_pkt_proc) */
    TRK_RX,        /* NIC processing units: one received packet */
    TRK_RESP,      /* NIC responder: what a request packet did */
    TRK_COMP,      /* NIC completer: ACKs, NAKs, timeouts, go back N */
    TRK_DMA_RD,    /* NIC DMA reads of payload (requests, READ responses, atomics) */
    TRK_DMA_WR,    /* NIC placement writes (payload into host memory) */
    TRK_CQE,       /* NIC CQE writes */
    TRK_XLATE,     /* NIC translation unit: an operation waiting for MPT/MTT entries */
    TRK_ATOMIC,    /* NIC atomic unit */
    TRK_RDENG,     /* NIC responder READ engine */
    TRK_CACHE,     /* NIC cache: unit = enum trace_cache */
    TRK_PCIE_UP,   /* PCIe device -> root complex: MWr, MRd */
    TRK_PCIE_DOWN, /* PCIe root complex -> device: CplD, MMIO writes */
    TRK_LINK,      /* a fabric link (one direction of a cable; a switch's egress queue) */
    TRK_COUNT
};

enum trace_cache { TRC_QPC, TRC_RDC, TRC_MPT, TRC_MTT, TRC_RWQE, TRC_WQE, TRC_RDQ, TRC_COUNT };

/* Field use per kind (0 where not said):
 *
 *   PKT_TX / PKT_RX / PKT_DROP at a NIC  node = the NIC, qpn = its QP,
 *       psn, opcode, len = payload bytes, peer / peer_qpn = the other end
 *   PKT_DROP in the fabric  node = link id or the destination node, qpn =
 *       the destination QP
 *   SPAN / INSTANT / COUNTER  track; node = host / NIC id (link id for
 *       TRK_LINK); unit = thread index (TRK_THREAD), cache (TRK_CACHE) or,
 *       for TRK_LINK, the packet's destination node; where = what happened
 *       (a static string: the verbs call, "MWr", "hit", the link's name for
 *       TRK_LINK); the packet fields as for PKT_* where a packet is
 *       concerned; addr / val / len / status as each site documents. */
struct trace_rec {
    sim_time_t t_ps;   /* when recorded (sim_now; set by sim_trace) */
    sim_time_t t0_ps;  /* spans, instants, counters: start */
    sim_time_t dur_ps; /* spans: length */
    uint8_t kind;      /* enum trace_kind */
    uint8_t opcode;    /* IBA opcode for packets, ibv_wc_opcode for CQEs */
    uint16_t status;
    uint8_t track; /* enum trace_track */
    uint8_t flags; /* TRACE_F_* */
    uint32_t unit;
    uint32_t node; /* NIC / host id, or link id for drops */
    uint32_t qpn;
    uint32_t psn;
    uint32_t peer, peer_qpn;
    uint32_t len;      /* bytes */
    uint64_t addr;     /* DMA address (host virtual) */
    uint64_t val;      /* a second value (a WQE index, a count, queue bytes) */
    const char *where; /* static string: "link h0->sw", "resp", ... */
};

#define TRACE_F_MISS 1u  /* a cache lookup that missed */
#define TRACE_F_LAST 2u  /* a packet is the last of its message */
#define TRACE_F_RETRY 4u /* a packet sent again (go back N) */

/* Keep the last `capacity` records of the core group (0 disables and frees
 * the ring). */
int sim_trace_enable(struct sim *sim, size_t capacity);
/* True if someone listens to any of `groups` (inline: one load). */
static inline bool sim_trace_on(const struct sim *sim, uint32_t groups)
{
    return (sim_trace_groups(sim) & groups) != 0;
}
/* True if the core group is traced (the ring or a sink). */
static inline bool sim_trace_enabled(const struct sim *sim)
{
    return sim_trace_on(sim, TRACE_G_CORE);
}
/* A sink: fn(arg, r) for every record of `groups` (0 removes it).  It may
 * call sim_trace_set_sink itself (to stop: a size limit was reached). */
typedef void (*trace_sink_fn)(void *arg, const struct trace_rec *r);
void sim_trace_set_sink(struct sim *sim, uint32_t groups, trace_sink_fn fn, void *arg);
/* The group of a record kind (spans and instants by their track). */
uint32_t trace_rec_group(const struct trace_rec *r);

/* Append a record stamped with sim_now (t_ps is overwritten). */
void sim_trace(struct sim *sim, const struct trace_rec *r);
/* A span on a track: t0 .. t0 + dur. */
static inline void sim_trace_span(struct sim *sim, struct trace_rec *r, sim_time_t t0,
                                  sim_time_t dur)
{
    r->kind = TRACE_SPAN;
    r->t0_ps = t0;
    r->dur_ps = dur;
    sim_trace(sim, r);
}
void sim_trace_note(struct sim *sim, uint32_t node, const char *static_text);
/* A TRACE_NOTE carrying `value` in addr (host_trace_mark). */
void sim_trace_mark(struct sim *sim, uint32_t node, const char *static_text, uint64_t value);
/* TRACE_POST opcodes of receive work requests (ibv_wr_opcode values are
 * below 0x20). */
#define TRACE_POST_RECV 0xffu     /* ibv_post_recv; qpn = the QP */
#define TRACE_POST_SRQ_RECV 0xfeu /* ibv_post_srq_recv; qpn = 0 (no QP) */
/* One TRACE_POST record (callers test sim_trace_enabled first, so a
 * disabled trace costs one branch per post call); wqe_idx: the send
 * queue index of a send WR. */
void sim_trace_post(struct sim *sim, uint32_t node, uint32_t qpn, uint8_t opcode, uint32_t len,
                    uint64_t wqe_idx);
/* Records held (<= capacity) and total ever appended to the ring. */
size_t sim_trace_count(const struct sim *sim);
uint64_t sim_trace_total(const struct sim *sim);
/* i-th oldest record held, 0 <= i < sim_trace_count. */
const struct trace_rec *sim_trace_get(const struct sim *sim, size_t i);
/* Print the last `max` records (all if 0), oldest first, one per line. */
void sim_trace_dump(const struct sim *sim, FILE *out, size_t max);
/* One record as a line of text (no newline) into buf; what --trace prints. */
void sim_trace_format(const struct trace_rec *r, char *buf, size_t len);
const char *sim_trace_kind_name(enum trace_kind k);
/* "thread", "doorbell", "wqe fetch", ... */
const char *sim_trace_track_name(enum trace_track t);
/* "qpc", "rd ctx", "mpt", "mtt" */
const char *sim_trace_cache_name(enum trace_cache c);

#endif
