/* The zero-sided switch program's register cells and register actions
 * (the read-modify-write each register array allows per pass): shared by
 * the data plane's steps (zs_dp_int.h lists their files) and defined in zs_regs.c. */
#ifndef RNICSIM_ZS_REGS_H
#define RNICSIM_ZS_REGS_H

#include <stdbool.h>
#include <stdint.h>

#include "protocols/zerosided/zs_dp.h"
#include "sim/nic/opcode.h"

#define PSN(x) ((uint32_t)(x)&NIC_PSN_MASK)

/* x_exp cells: state 0..7, expected PSN 8..31, first PSN 32..55, PEND 56
 * (the pointer WRITE at first - 1 is unacknowledged).  X_AWAIT: the READ's
 * data are all here, its tail WRITE's PSN is reserved; X_PTAIL: that WRITE
 * is sent; X_PTR (consumer): the head WRITE at exp is the last op sent. */
enum {
    X_IDLE = 0,
    X_READ,
    X_RECOVER,
    X_FAILED,
    X_AWAIT,
    X_DATA,
    X_CHEAD,
    X_FINAL,
    X_DONE,
    X_PTAIL,
    X_PTR
};
#define X_PEND (1ull << 56)

static inline uint64_t exp_cell(uint32_t state, uint32_t exp, uint32_t first)
{
    return (uint64_t)state | (uint64_t)PSN(exp) << 8 | (uint64_t)PSN(first) << 32;
}
static inline uint32_t exp_state(uint64_t c)
{
    return (uint32_t)(c & 0xff);
}
static inline uint32_t exp_psn(uint64_t c)
{
    return (uint32_t)(c >> 8) & NIC_PSN_MASK;
}
static inline uint32_t exp_first(uint64_t c)
{
    return (uint32_t)(c >> 32) & NIC_PSN_MASK;
}
static inline bool exp_pend(uint64_t c)
{
    return (c & X_PEND) != 0;
}
/* an ACK of psn covers the pending pointer WRITE (at first - 1) */
static inline uint64_t exp_ack_pend(uint64_t c, uint32_t psn)
{
    if (exp_pend(c) && nic_psn_diff(psn, exp_first(c) - 1) >= 0)
        c &= ~X_PEND;
    return c;
}

/* t_ack (replicate): ACK mask 0..31, expected PSN 32..55, state 56..63 */
static inline uint64_t ack_cell(uint32_t state, uint32_t exp, uint32_t mask)
{
    return (uint64_t)mask | (uint64_t)PSN(exp) << 32 | (uint64_t)state << 56;
}

/* t_phase: phase 0..7, time of the last progress (ns) 8..63 */
static inline uint64_t phase_cell(uint32_t ph, uint64_t ns)
{
    return (uint64_t)ph | ns << 8;
}

static inline uint64_t now_ns(const struct ps_pass *x)
{
    return ps_pass_now(x) / SIM_NS;
}

/* ---------------------------------------------------------------- register actions */

struct a_u64 {
    uint64_t v;
};

/* Producer lock (load balancing).  me = thread + 1. */
enum { LK_READ, LK_ACQUIRE, LK_RELEASE };
struct a_lock {
    uint32_t op, me;
};

/* Uplink slots of a producer node: the set of threads transferring out of
 * it (bit t).  Take one if the thread has it or fewer than cap are taken
 * (1 / 0); giving it back is idempotent, so the last READ response and the
 * release pass may both do it. */
struct a_slot {
    bool release;
    uint32_t cap, t;
};

/* A consumer's committed head (lanes, c_cmt).  COMMIT [s, e): only when
 * every transfer before s has committed (head == s): returns CM_OK, CM_WAIT
 * (an earlier transfer is not yet in) or CM_STALE (already committed: a
 * duplicate pass); FIN: a lane other than 0 has finished; LANE0: lane 0
 * asks whether the others have, and if so sets the end flag; READ. */
enum { CM_COMMIT, CM_FIN, CM_LANE0, CM_READ };
enum { CM_WAIT, CM_OK, CM_STALE };
struct a_cmt {
    uint32_t op, s, e, lanes;
};

/* The producer tail: write the committed value (release) and return it,
 * or just read. */
struct a_tail {
    bool write;
    uint32_t v;
};

/* The consumer head picks the batch and commits it: everything the
 * producer has (avail), what the consumer ring can take, the batch cap,
 * and neither ring wrapping inside one transfer. */
struct a_take {
    uint32_t avail, ctail, ccap, pend, max;
    uint32_t used_max; /* replicate: the largest head - tail over the consumers */
    bool repl;
};

/* What a producer data QP waits for.  Events: a READ response (psn, last
 * packet?), an ACK / NAK. */
enum {
    EV_RESP,
    EV_ACK,
    EV_NAK_SEQ,
    EV_NAK_FATAL,
    EV_REISSUE_READ,
    EV_READ_ISSUE,
    EV_PTAIL_SENT,
    EV_REISSUE_PTRS
};
enum {
    V_DROP,        /* stale or duplicate: drop silently */
    V_FWD,         /* a READ response to rewrite and forward */
    V_GAP,         /* a response is missing: re-issue */
    V_PROGRESS,    /* an ACK covering part of the data */
    V_ISSUE_CHEAD, /* the data are all ACKed: write the consumer head */
    V_ISSUE_PTAIL, /* the head WRITE is ACKed: write the producer tail */
    V_RELEASE,     /* the tail WRITE is ACKed: commit and free */
    V_REISSUE,     /* a NAK: do the phase's operation again */
    V_THREAD_DONE, /* the end-of-stream head WRITE is ACKed */
    V_FATAL,       /* an error NAK: the flow is broken */
};
struct a_ev {
    uint32_t ev, psn;
    bool last;
    uint32_t first, exp, state; /* EV_READ_ISSUE / setting a state */
    uint32_t bit;               /* replicate: this consumer's bit */
    uint32_t full;              /* replicate: every consumer's bits */
    bool after_read;            /* an explicit ACK past exp ends the READ state too */
};

/* Pointer timers t_pw (a thread's consumer head WRITE) and p_pw (a
 * producer's tail WRITE): armed 0, time of the last WRITE (ns) 17..63.
 * ARM / REARM (a WRITE sent): now; CHECK (timer): expired -> now again,
 * returns 1 << 16; DISARM; RESEND: if armed, now again and 1, else 0. */
enum { PW_ARM, PW_REARM, PW_CHECK, PW_DISARM, PW_RESEND };
struct a_pw {
    uint32_t op;
    uint64_t now, rto;
};

/* t_phase.  op SET: phase + now; PROGRESS: now if the phase is the one
 * given; CHECK (timer): expired phases get `now` and are returned with
 * bit 8 set. */
enum { PH_SET, PH_PROGRESS, PH_CHECK };
struct a_phase {
    uint32_t op, phase;
    uint64_t now, rto;
};

/* Poll READs on a control QP: next PSN 0..23, busy 24, sent (ns) 25..63. */
struct a_poll {
    bool issue;
    uint32_t psn;
    uint64_t now, rto;
};

/* Doorbells: the switch as responder on a control QP (expected PSN 0..23,
 * NAK sent 24). */
enum { DB_OK, DB_DUP, DB_NAK, DB_QUIET };

/* the actions (zs_regs.c) */
uint64_t zs_act_rr(uint64_t *cell, const void *arg);
uint64_t zs_act_alloc(uint64_t *cell, const void *arg);
uint64_t zs_act_or(uint64_t *cell, const void *arg);
uint64_t zs_act_lock(uint64_t *cell, const void *arg);
uint64_t zs_act_slot(uint64_t *cell, const void *arg);
uint64_t zs_act_cmt(uint64_t *cell, const void *arg);
uint64_t zs_xfer_word(uint32_t p, uint32_t n, uint32_t node, bool held, uint32_t slot, bool cheld);
uint32_t zs_xfer_slot(uint64_t xfer);
struct zs_br zs_release_br(uint32_t t, uint64_t xfer, uint32_t ptail);
uint64_t zs_act_tail(uint64_t *cell, const void *arg);
uint64_t zs_act_take(uint64_t *cell, const void *arg);
uint64_t zs_act_pexp(uint64_t *cell, const void *arg);
uint64_t zs_act_cexp(uint64_t *cell, const void *arg);
uint64_t zs_act_pw(uint64_t *cell, const void *arg);
uint64_t zs_act_tack(uint64_t *cell, const void *arg);
uint64_t zs_act_phase(uint64_t *cell, const void *arg);
uint64_t zs_act_poll(uint64_t *cell, const void *arg);
uint64_t zs_act_db(uint64_t *cell, const void *arg);

#endif
