/* Per-QP rate limiter and DCQCN (ratelimit.c, dcqcn.c): the NIC's packet
 * pacing block.  Internal to sim/nic/; the TX engine (nic.c) asks it before
 * it takes a requester packet of a QP and tells it what it took.
 *
 * A QP's send rate is the smaller of the user's limit
 * (IBV_QP_RATE_LIMIT / ibv_modify_qp_rate_limit) and the rate its
 * congestion control allows (DCQCN's current rate Rc); 0 = line rate.
 * Pacing: a packet may start at next_ps; taking it moves next_ps on by its
 * wire time at that rate.  A held QP's source is offered again by one
 * timer event at next_ps -- no polling.
 *
 * Another congestion control (HPCC, Swift, Timely) plugs in the same way
 * DCQCN does: it keeps its own state next to `dcqcn` below, reacts to
 * what the NIC sees (CNPs and CE marks here; ACK timestamps or INT
 * records for delay- or telemetry-based ones, from comp.c's ACK path),
 * and sets cc_rate_bps (and, for window-based ones, a limit on bytes in
 * flight checked in nic_rl_hold).  docs/lossless.md says more. */
#ifndef RNICSIM_NIC_RATELIMIT_H
#define RNICSIM_NIC_RATELIMIT_H

#include "nic_priv.h"

/* DCQCN reaction point state of a QP (dcqcn.c). */
struct nic_dcqcn {
    uint64_t rc_bps, rt_bps; /* current and target rate */
    double alpha;
    uint32_t t_count, bc_count; /* timer and byte-counter stages since the last cut */
    uint64_t bytes;             /* sent since the last byte-counter stage */
    bool active;                /* rate-limited: timers running (or dormant) */
    /* An idle throttled QP stops its timers (dormant) and catches up in
     * closed form when it next sends, is cut, or is asked its rate: the
     * ticks that would have fired at next_tick_ps + k T, k >= 0. */
    bool dormant;
    bool tx_since_tick;      /* bytes sent since the last timer tick */
    sim_time_t next_tick_ps; /* dormant: the first tick not yet applied */
    struct sim_event alpha_ev, incr_ev;
    uint64_t cuts, increases;  /* counters for tests and results */
    sim_time_t last_cnp_tx_ps; /* notification point: when this QP last sent a CNP */
    bool cnp_sent;
};

struct nic_rl {
    struct nic_qp *qp;
    uint64_t limit_bps;   /* user limit (0: none) */
    uint64_t cc_rate_bps; /* congestion control's rate (0: none) */
    sim_time_t next_ps;   /* the next packet may start then */
    struct sim_event ev;  /* re-offer the held source */
    struct nic_txsrc *held;
    struct nic_dcqcn dcqcn;
};

/* ratelimit.c */
struct nic_rl *nic_rl_of(struct nic_qp *qp); /* allocated on first use */
void nic_rl_free(struct nic_qp *qp);
/* Effective rate (0: unlimited). */
uint64_t nic_rl_rate(const struct nic_rl *rl);
/* The TX engine would take a requester packet of `qp` from `src` now:
 * true if it must wait (the source is offered again when it may go). */
bool nic_rl_hold(struct nic_qp *qp, struct nic_txsrc *src);
/* It took `p`: pace the next one. */
void nic_rl_on_tx(struct nic_qp *qp, const struct pkt *p);
/* Congestion control changed its rate (0 = unthrottled). */
void nic_rl_set_cc_rate(struct nic_rl *rl, uint64_t rate_bps);

/* dcqcn.c */
void nic_dcqcn_init(struct nic_rl *rl);
enum { NIC_OPCODE_CNP = 0x81, NIC_CNP_RESERVED_BYTES = 16 };
/* A request packet marked CE arrived for `qp` (notification point). */
void nic_dcqcn_np_rx(struct nic_qp *qp, const struct pkt *p);
/* A CNP arrived (reaction point). */
void nic_dcqcn_rp_cnp(struct nic *nic, const struct pkt *p);
/* Bytes the QP just sent (the byte counter). */
void nic_dcqcn_on_tx(struct nic_qp *qp, uint32_t wire_bytes);
void nic_dcqcn_stop(struct nic_rl *rl);
/* Bring a dormant QP's DCQCN state up to now (ticks at times <= now);
 * re-arms its timers if it is still throttled. */
void nic_dcqcn_wake(struct nic_rl *rl);
/* Its rate now (0: unthrottled) without changing it: what nic_dcqcn_wake
 * would leave. */
uint64_t nic_dcqcn_rate_now(const struct nic_rl *rl);

/* The arithmetic of the timer (exposed for the unit test that checks the
 * closed form against stepping): `line_bps` the line rate.  One tick
 * (alpha decay, then a timer-stage increase); returns false once the QP is
 * back at line rate (d->active cleared). */
bool nic_dcqcn_tick(const struct nic_params *p, uint64_t line_bps, struct nic_dcqcn *d);
/* `n` ticks in closed form (stops early when back at line rate); returns
 * the ticks applied.  Equal, field for field, to n nic_dcqcn_tick calls. */
uint64_t nic_dcqcn_ticks(const struct nic_params *p, uint64_t line_bps, struct nic_dcqcn *d,
                         uint64_t n);

#endif
