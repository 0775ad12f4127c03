/* Transport personalities (DESIGN.md "Transports"; docs/nic.md "Transport
 * personalities: EFA SRD and 1RMA"): what pers.c, srd.c and onerma.c
 * share.  Nothing but those three files includes this.
 *
 * A NIC whose nic_params.transport is NIC_TRANSPORT_EFA_SRD or
 * NIC_TRANSPORT_ONERMA carries out the work of its RC QPs with that
 * transport's semantics: an unmodified RC-API program (create an RC QP,
 * INIT/RTR/RTS, post, poll) runs over single-packet messages that may be
 * delivered and completed out of order.  The verbs shim refuses, at post
 * time, the opcodes and sizes the transport lacks (verbs_shim/post.c).
 *
 * What stays the IB model's: the doorbell, the WQE fetch over PCIe, the
 * send/receive queues, the CQs and the TX engine.  What is the
 * personality's: everything from "WQE fetched" on (srd.c / onerma.c
 * start WQEs, build packets, keep per-op timers, complete WQEs out of
 * order) and every packet with a personality opcode (opcode.h 0xc0..).
 *
 * Each QP gets one struct nic_pers (allocated on first use, freed with the
 * QP): two packet sources for the TX engine (requests, and responses /
 * ACKs), a table of the ops in flight indexed by sequence number, one
 * lazy timer for all of them, and the receiver's duplicate window (SRD). */
#ifndef RNICSIM_NIC_PERS_H
#define RNICSIM_NIC_PERS_H

#include "nic_priv.h"

/* Model constants (structure, not calibrated numbers; docs/nic.md). */
enum {
    /* ops in flight per QP, and the span of their sequence numbers (the
     * receiver's duplicate window is as wide) */
    NIC_PERS_WINDOW = 256,
    /* 1RMA: largest op (CALIBRATION.md, Transports "1RMA: ops <= 4 KiB") */
    NIC_ONERMA_MAX_OP_BYTES = 4096,
    /* 1RMA: bytes of ops in flight per QP, the solicitation window
     * (CALIBRATION.md, Transports "4 KiB of a 64 KiB solicitation window
     * per op") */
    NIC_ONERMA_WINDOW_BYTES = 64 * 1024,
};

/* State of one op in flight (struct nic_pers_op.state). */
enum nic_pop_state {
    NIC_POP_FREE,     /* slot unused */
    NIC_POP_STAGED,   /* packet built, not on the wire yet (no timer) */
    NIC_POP_SENT,     /* on the wire: SRD waits for the ACK / response (RTO);
                         1RMA for the response, the fetch or the ACK */
    NIC_POP_RNR_WAIT, /* SRD: the receiver had no receive posted; resend at deadline */
    NIC_POP_RESEND,   /* SRD: to be sent again as soon as the request ring has room */
};

struct nic_pers_op {
    uint64_t wqe_idx; /* send queue index of the WQE */
    uint32_t seq;     /* SRD sequence number / 1RMA op tag (BTH PSN) */
    uint8_t state;    /* enum nic_pop_state */
    uint8_t tries;    /* SRD: timeouts so far (against retry_cnt) */
    uint8_t rnr_tries;
    bool fetched;           /* 1RMA WRITE: the target asked for the data */
    uint32_t bytes;         /* 1RMA: solicitation-window bytes held */
    sim_time_t deadline_ps; /* SRD: resend; 1RMA: fail (SIM_TIME_NEVER: none) */
};

struct nic_pers {
    struct nic_qp *qp;
    bool tx_init, rx_init; /* sender / receiver state loaded from the QP attributes */
    bool running, again;   /* kick re-entrancy guard */
    bool resend_any;       /* SRD: some op waits in NIC_POP_RESEND */

    /* packet sources (kind NIC_TXSRC_PERS): requests in build order;
     * responses and ACKs in the order they became ready, with an overflow
     * list for when the ring is full */
    struct nic_stage req_stage, resp_stage;
    struct nic_txsrc req_src, resp_src;
    struct pkt *pend_head, *pend_tail;

    struct sim_rng rng;        /* path choice: a fresh flow hash per packet / op */
    struct sim_event eng_ev;   /* the send engine is busy (wqe_proc): start later */
    struct sim_event timer_ev; /* earliest op deadline (lazy: re-armed when early) */

    /* sender: ops in flight have sequence numbers [seq_lo, seq_next), at
     * most NIC_PERS_WINDOW apart; ops[seq % NIC_PERS_WINDOW] */
    uint32_t seq_next, seq_lo;
    uint32_t inflight;
    uint32_t window_bytes; /* 1RMA: solicitation window in use */
    sim_time_t busy_until; /* send engine occupied by the last WQE started */
    struct nic_pers_op ops[NIC_PERS_WINDOW];

    /* receiver (SRD): sequence numbers (rx_hi - NIC_PERS_WINDOW, rx_hi]
     * are tracked; rx_seen bit = delivered (or refused: rx_syn holds the
     * NAK a duplicate gets again); older ones are duplicates */
    uint32_t rx_hi;
    uint64_t rx_seen[NIC_PERS_WINDOW / 64];
    uint8_t rx_syn[NIC_PERS_WINDOW];
};

/* ---------------------------------------------------------------- pers.c */

/* The QP's personality state, allocated (and its sources set up) on first use. */
struct nic_pers *nic_pers_get(struct nic_qp *qp);
static inline enum nic_transport nic_pers_transport(const struct nic_qp *qp)
{
    return (enum nic_transport)qp->nic->p.transport;
}
static inline struct nic_pers_op *nic_pers_op(struct nic_pers *ps, uint32_t seq)
{
    return &ps->ops[seq % NIC_PERS_WINDOW];
}
/* The op holding `seq`, if it is in flight; else NULL (late, duplicate). */
struct nic_pers_op *nic_pers_find(struct nic_pers *ps, uint32_t seq);
/* Claim the slot of seq_next for WQE `idx` (the caller checked room). */
struct nic_pers_op *nic_pers_op_new(struct nic_pers *ps, uint64_t idx);
/* The op completes with `st`: CQE (if signalled or failed), the slot is
 * freed, finished WQEs leave the head of the send queue. */
void nic_pers_op_done(struct nic_pers *ps, struct nic_pers_op *op, enum ibv_wc_status st);
/* Room for another op: window span, and the send engine is not busy
 * (schedules eng_ev and returns false if it is). */
bool nic_pers_can_start(struct nic_pers *ps);
/* Next WQE to start, or NULL (none fetched, QP not sending). */
struct nic_send_wqe *nic_pers_next_wqe(struct nic_pers *ps);
/* A WQE that fails before it becomes an op (local checks): its CQE. */
void nic_pers_fail_wqe(struct nic_pers *ps, uint64_t idx, enum ibv_wc_status st);
/* lkey / PD / bounds checks of a WQE's SGEs (IBV_WC_SUCCESS or LOC_PROT_ERR). */
enum ibv_wc_status nic_pers_check_sges(struct nic_qp *qp, const struct nic_send_wqe *w, int access);
/* A packet addressed to `dst_node`/`dst_qpn` with a fresh random flow hash
 * and UDP source port (so ECMP spreads packets over paths). */
struct pkt *nic_pers_pkt(struct nic_pers *ps, uint8_t opcode, uint32_t psn, uint32_t payload_len,
                         uint32_t dst_node, uint32_t dst_qpn);
/* Queue a request packet (payload from `w` at offset 0 by DMA read, or
 * inline, or none when payload_len is 0). */
void nic_pers_send_req(struct nic_pers *ps, struct pkt *p, const struct nic_send_wqe *w);
/* Queue a ready response packet (ACK, NAK, data already in it). */
void nic_pers_send_resp(struct nic_pers *ps, struct pkt *p);
/* Read `len` bytes at `host` (MR `key`) into p's payload, then queue it as
 * a response (responses leave in the order their data arrive). */
void nic_pers_send_resp_dma(struct nic_pers *ps, struct pkt *p, uint8_t *host, uint32_t key,
                            uint32_t len);
/* DMA-write p's payload to the SGEs `sge` (ownership of p passes), trace
 * tagged `where`. */
void nic_pers_place_sges(struct nic_qp *qp, struct pkt *p, const struct nic_sge *sge,
                         uint32_t num_sge, const char *where);
/* DMA-write p's payload to one segment. */
void nic_pers_place(struct nic_qp *qp, struct pkt *p, uint8_t *host, uint32_t key,
                    const char *where);
/* Timer: make sure it fires no later than `t`. */
void nic_pers_timer_at(struct nic_pers *ps, sim_time_t t);
/* A personality NAK syndrome -> completion status (as EFA reports them). */
enum ibv_wc_status nic_pers_nak_status(uint8_t syndrome);
static inline bool nic_pers_nak(uint8_t syndrome)
{
    return (syndrome & NIC_AETH_TYPE_MASK) != 0;
}

/* ---------------------------------------------------------------- srd.c */

void nic_srd_kick(struct nic_pers *ps);
void nic_srd_rx(struct nic_pers *ps, struct pkt *p);
void nic_srd_on_tx(struct nic_pers *ps, const struct pkt *p);
void nic_srd_timer(struct nic_pers *ps);
void nic_srd_rx_init(struct nic_pers *ps);

/* ---------------------------------------------------------------- onerma.c */

void nic_onerma_kick(struct nic_pers *ps);
void nic_onerma_rx(struct nic_pers *ps, struct pkt *p);
void nic_onerma_timer(struct nic_pers *ps);

#endif /* RNICSIM_NIC_PERS_H */
