/* Event trace: a bounded ring of the most recent model events (packets on
 * the wire, drops, DMA writes landing in host memory, CQEs, polls), kept so
 * that a failure -- an ordering violation, a deadlock -- can be explained
 * by the events that led to it.  Off unless enabled; a disabled trace costs
 * one well-predicted branch per call site.
 *
 * Components call sim_trace() at the moment a thing happens; readers dump
 * the ring (oldest first) as text lines. */
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
                        len = bytes of its scatter/gather list */
    TRACE_KIND_COUNT
};

struct trace_rec {
    sim_time_t t_ps;
    uint8_t kind;   /* enum trace_kind */
    uint8_t opcode; /* IBA opcode for packets, ibv_wc_opcode for CQEs */
    uint16_t status;
    uint32_t node; /* NIC / host id, or link id for drops */
    uint32_t qpn;
    uint32_t psn;
    uint64_t addr;     /* DMA address (host virtual) */
    uint32_t len;      /* bytes */
    const char *where; /* static string: "link h0->sw0", "resp", ... */
};

/* Keep the last `capacity` records (0 disables and frees the ring). */
int sim_trace_enable(struct sim *sim, size_t capacity);
bool sim_trace_enabled(const struct sim *sim);
/* Append a record stamped with sim_now (t_ps is overwritten). */
void sim_trace(struct sim *sim, const struct trace_rec *r);
void sim_trace_note(struct sim *sim, uint32_t node, const char *static_text);
/* A TRACE_NOTE carrying `value` in addr (host_trace_mark). */
void sim_trace_mark(struct sim *sim, uint32_t node, const char *static_text, uint64_t value);
/* TRACE_POST opcodes of receive work requests (ibv_wr_opcode values are
 * below 0x20). */
#define TRACE_POST_RECV 0xffu     /* ibv_post_recv; qpn = the QP */
#define TRACE_POST_SRQ_RECV 0xfeu /* ibv_post_srq_recv; qpn = 0 (no QP) */
/* One TRACE_POST record (callers test sim_trace_enabled first, so a
 * disabled trace costs one branch per post call). */
void sim_trace_post(struct sim *sim, uint32_t node, uint32_t qpn, uint8_t opcode, uint32_t len);
/* Records held (<= capacity) and total ever appended. */
size_t sim_trace_count(const struct sim *sim);
uint64_t sim_trace_total(const struct sim *sim);
/* i-th oldest record held, 0 <= i < sim_trace_count. */
const struct trace_rec *sim_trace_get(const struct sim *sim, size_t i);
/* Print the last `max` records (all if 0), oldest first, one per line. */
void sim_trace_dump(const struct sim *sim, FILE *out, size_t max);
const char *sim_trace_kind_name(enum trace_kind k);

#endif
