/* The zero-sided switch program's register actions: each is the one
 * read-modify-write a pass may make on a register array (zs_regs.h). */
#include "protocols/zerosided/zs_regs.h"

uint64_t zs_act_rr(uint64_t *cell, const void *arg)
{
    const uint32_t *n = arg; /* n[0] = slots, n[1] = advance? */
    uint64_t j = *cell % n[0];
    if (n[1])
        *cell = (j + 1) % n[0];
    return j;
}

uint64_t zs_act_alloc(uint64_t *cell, const void *arg)
{
    uint32_t old = PSN(*cell);
    *cell = PSN(old + *(const uint32_t *)arg);
    return old;
}

uint64_t zs_act_or(uint64_t *cell, const void *arg)
{
    *cell |= ((const struct a_u64 *)arg)->v;
    return *cell;
}
uint64_t zs_act_lock(uint64_t *cell, const void *arg)
{
    const struct a_lock *a = arg;
    switch (a->op) {
    case LK_ACQUIRE:
        if (*cell == 0 || *cell == a->me) {
            *cell = a->me;
            return 1;
        }
        return 0;
    case LK_RELEASE:
        if (*cell == a->me)
            *cell = 0;
        return 1;
    default:
        return *cell;
    }
}
uint64_t zs_act_slot(uint64_t *cell, const void *arg)
{
    const struct a_slot *a = arg;
    uint64_t bit = 1ull << (a->t % 64);
    if (a->release) {
        *cell &= ~bit;
        return 1;
    }
    if (*cell & bit)
        return 1;
    if ((uint32_t)__builtin_popcountll(*cell) >= a->cap)
        return 0;
    *cell |= bit;
    return 1;
}

uint64_t zs_act_cmt(uint64_t *cell, const void *arg)
{
    const struct a_cmt *a = arg;
    uint32_t head = (uint32_t)*cell & ZS_PTR_MASK;
    uint64_t fin = (*cell >> ZS_CMT_FIN_SHIFT) & 0xff;
    switch (a->op) {
    case CM_COMMIT: {
        if (head == (a->s & ZS_PTR_MASK)) {
            *cell = (*cell & ~(uint64_t)ZS_PTR_MASK) | (a->e & ZS_PTR_MASK);
            return CM_OK;
        }
        /* the head is past s: the transfer starting at s (this one) is in */
        uint32_t ahead = (head - a->s) & ZS_PTR_MASK;
        return ahead < (1u << 30) ? CM_STALE : CM_WAIT;
    }
    case CM_FIN:
        *cell = (*cell & 0xffffffffull) | (fin + 1) << ZS_CMT_FIN_SHIFT;
        return *cell;
    case CM_LANE0:
        if (fin + 1 >= a->lanes)
            *cell |= ZS_DONE_BIT;
        return *cell;
    default:
        return *cell;
    }
}

/* t_xfer: producer | items << 16 | node << 48 (6 bits) | consumer stream
 * slot held << 55 | uplink slot held << 56 | source slot << 57 */
uint64_t zs_xfer_word(uint32_t p, uint32_t n, uint32_t node, bool held, uint32_t slot, bool cheld)
{
    return (uint64_t)p | (uint64_t)n << 16 | (uint64_t)(node % ZS_SLOT_NODES) << 48 |
           (uint64_t)cheld << 55 | (uint64_t)held << 56 | (uint64_t)(slot & 0x7f) << 57;
}
uint32_t zs_xfer_slot(uint64_t xfer)
{
    return (uint32_t)(xfer >> 57);
}

/* The RELEASE pass after transfer word xfer (ptail: the tail to commit).
 * A transfer of items (not the give-back of an empty attempt) has sent its
 * producer tail WRITE by then. */
struct zs_br zs_release_br(uint32_t t, uint64_t xfer, uint32_t ptail)
{
    uint32_t n = (uint32_t)(xfer >> 16);
    return (struct zs_br){.type = ZS_BR_RELEASE,
                          .phase = (uint8_t)(((xfer >> 56) & 1 ? ZS_BRF_SLOT : 0) |
                                             (n ? ZS_BRF_PTAIL : 0) |
                                             ((xfer >> 55) & 1 ? ZS_BRF_CSLOT : 0)),
                          .t = (uint16_t)t,
                          .p = (uint16_t)(xfer & 0xffff),
                          .v = ptail,
                          .j = (uint16_t)((xfer >> 48) & (ZS_SLOT_NODES - 1))};
}
uint64_t zs_act_tail(uint64_t *cell, const void *arg)
{
    const struct a_tail *a = arg;
    if (a->write)
        *cell = a->v;
    return *cell;
}
uint64_t zs_act_take(uint64_t *cell, const void *arg)
{
    const struct a_take *a = arg;
    uint32_t chead = (uint32_t)*cell & ZS_PTR_MASK;
    uint32_t used = (chead - a->ctail) & ZS_PTR_MASK;
    if (a->repl && a->used_max > used)
        used = a->used_max; /* the fullest consumer of the group */
    uint32_t space = used >= a->ccap ? 0 : a->ccap - used;
    uint32_t cend = a->ccap - chead % a->ccap;
    uint32_t n = a->avail;
    if (space < n)
        n = space;
    if (a->max < n)
        n = a->max;
    if (a->pend < n)
        n = a->pend;
    if (cend < n)
        n = cend;
    *cell = (chead + n) & ZS_PTR_MASK;
    return (uint64_t)chead | (uint64_t)n << 32;
}

uint64_t zs_act_pexp(uint64_t *cell, const void *arg)
{
    const struct a_ev *a = arg;
    uint32_t st = exp_state(*cell), exp = exp_psn(*cell), first = exp_first(*cell);
    uint64_t pend = *cell & X_PEND;
    switch (a->ev) {
    case EV_READ_ISSUE: /* behind the last transfer's tail WRITE, if not yet ACKed */
        *cell =
            exp_cell(X_READ, a->first, a->first) | (st == X_AWAIT || st == X_PTAIL ? X_PEND : 0);
        return V_DROP;
    case EV_REISSUE_READ:
        *cell = exp_cell(X_RECOVER, first, first) | pend;
        return first | (pend ? 1ull << 32 : 0);
    case EV_PTAIL_SENT: /* the tail WRITE at a->exp is out (unless already ACKed) */
        if (st != X_IDLE)
            *cell = exp_cell(X_PTAIL, a->exp, a->exp);
        return V_DROP;
    case EV_RESP: {
        if (st != X_READ && st != X_RECOVER)
            return V_DROP;
        int32_t d = nic_psn_diff(a->psn, exp);
        if (d < 0)
            return V_DROP;
        if (d > 0) {
            if (st == X_RECOVER)
                return V_DROP; /* the old READ's responses: wait for the new first */
            *cell = exp_cell(X_FAILED, exp, first) | pend;
            return V_GAP;
        }
        /* the expected one (it also acknowledges the WRITE before it): the
         * READ's tail WRITE PSN comes after its last */
        *cell = a->last ? exp_cell(X_AWAIT, exp + 1, first) : exp_cell(X_READ, exp + 1, first);
        return V_FWD;
    }
    case EV_ACK:
        *cell = exp_ack_pend(*cell, a->psn);
        /* replication sends the tail WRITE only once the consumers ACKed
         * all the data, so an ACK past exp also ends a READ whose recovery
         * was still under way (a re-issue after the data had all arrived) */
        if (nic_psn_diff(a->psn, exp) >= 0 &&
            (st == X_AWAIT || st == X_PTAIL ||
             (a->after_read && (st == X_READ || st == X_RECOVER || st == X_FAILED)))) {
            *cell = exp_cell(X_IDLE, a->psn + 1, first);
            return V_RELEASE;
        }
        return V_DROP;
    case EV_NAK_SEQ:
        if (st == X_AWAIT || st == X_PTAIL)
            return V_REISSUE | (uint64_t)ZS_PH_PTAIL << 8;
        if (st == X_READ || st == X_FAILED)
            return V_REISSUE | (uint64_t)ZS_PH_READ << 8;
        return V_DROP;
    case EV_REISSUE_PTRS:
        /* the tail WRITE to send again, if it is out unacknowledged (1);
         * X_AWAIT: its PSN is reserved and the data ACK's pass may already
         * have armed its timer, with the egress that marks it X_PTAIL still
         * to come (2: keep the timer armed) */
        return st == X_PTAIL ? 1 | (uint64_t)exp << 8 : st == X_AWAIT ? 2 : 0;
    default:
        return V_FATAL;
    }
}

/* A sequence NAK from a consumer (one data QP's c_exp, or a replication
 * group's t_ack): the phase whose operation to send again -- the data (the
 * READ; the caller marks the cell FAILED), the head WRITE (state head_st:
 * X_PTR in c_exp, X_CHEAD in t_ack) or the end-of-stream WRITE -- or drop. */
static uint64_t cons_nak(uint32_t st, uint32_t head_st)
{
    uint32_t ph = st == X_DATA    ? ZS_PH_READ
                  : st == head_st ? ZS_PH_CHEAD
                  : st == X_FINAL ? ZS_PH_FINAL
                                  : ZS_PH_OFF;
    return ph != ZS_PH_OFF ? V_REISSUE | (uint64_t)ph << 8 : V_DROP;
}

uint64_t zs_act_cexp(uint64_t *cell, const void *arg)
{
    const struct a_ev *a = arg;
    uint32_t st = exp_state(*cell), exp = exp_psn(*cell), first = exp_first(*cell);
    switch (a->ev) {
    case EV_READ_ISSUE: /* set: state, expected PSN, first PSN; behind an unACKed head WRITE? */
        *cell = exp_cell(a->state, a->exp, a->first) | (st == X_PTR ? X_PEND : 0);
        return V_DROP;
    case EV_REISSUE_READ:
        if (st == X_FAILED)
            *cell = exp_cell(X_DATA, exp, first) | (*cell & X_PEND);
        return *cell;
    case EV_REISSUE_PTRS: /* the head WRITE to send again, if it is the last op out */
        return st == X_PTR ? 1 | (uint64_t)exp << 8 : 0;
    case EV_ACK:
        *cell = exp_ack_pend(*cell, a->psn);
        if (nic_psn_diff(a->psn, exp) < 0)
            return st == X_DATA ? V_PROGRESS : V_DROP;
        switch (st) {
        case X_DATA: /* the data are placed: the head WRITE goes out right after */
            *cell = exp_cell(X_PTR, exp + 1, first);
            return V_ISSUE_CHEAD | (uint64_t)PSN(exp + 1) << 8;
        case X_PTR:
            *cell = exp_cell(X_IDLE, exp + 1, first);
            return V_DROP;
        case X_FINAL:
            *cell = exp_cell(X_DONE, exp + 1, first);
            return V_THREAD_DONE;
        default:
            return V_DROP;
        }
    case EV_NAK_SEQ:
        if (st == X_DATA)
            *cell = exp_cell(X_FAILED, exp, first) | (*cell & X_PEND);
        return cons_nak(st, X_PTR);
    default:
        return V_FATAL;
    }
}
uint64_t zs_act_pw(uint64_t *cell, const void *arg)
{
    const struct a_pw *a = arg;
    switch (a->op) {
    case PW_ARM:
    case PW_REARM:
        *cell = 1 | a->now << 17;
        return 0;
    case PW_DISARM:
        *cell = 0;
        return 0;
    case PW_RESEND:
        if (!(*cell & 1))
            return 0;
        *cell = 1 | a->now << 17;
        return 1;
    default:
        if (!(*cell & 1) || a->now - (*cell >> 17) < a->rto)
            return 0;
        *cell = 1 | a->now << 17;
        return 1u << 16;
    }
}

/* replicate: one ACK mask over the group */
uint64_t zs_act_tack(uint64_t *cell, const void *arg)
{
    const struct a_ev *a = arg;
    uint32_t mask = (uint32_t)*cell, exp = (uint32_t)(*cell >> 32) & NIC_PSN_MASK;
    uint32_t st = (uint32_t)(*cell >> 56);
    switch (a->ev) {
    case EV_READ_ISSUE:
        *cell = ack_cell(a->state, a->exp, 0);
        return V_DROP;
    case EV_REISSUE_READ:
        if (st == X_FAILED || st == X_DATA)
            *cell = ack_cell(X_DATA, exp, 0);
        return *cell;
    case EV_ACK:
        if (nic_psn_diff(a->psn, exp) < 0)
            return st == X_DATA ? V_PROGRESS : V_DROP;
        if (st != X_DATA && st != X_CHEAD && st != X_FINAL)
            return V_DROP;
        mask |= a->bit;
        if (mask != a->full) {
            *cell = ack_cell(st, exp, mask);
            return V_PROGRESS;
        }
        *cell = ack_cell(st == X_DATA ? X_CHEAD : st == X_CHEAD ? X_IDLE : X_DONE, exp + 1, 0);
        if (st == X_DATA)
            return V_ISSUE_CHEAD | (uint64_t)PSN(exp + 1) << 8;
        return st == X_CHEAD ? V_ISSUE_PTAIL : V_THREAD_DONE;
    case EV_NAK_SEQ:
        if (st == X_DATA)
            *cell = ack_cell(X_FAILED, exp, 0);
        return cons_nak(st, X_CHEAD);
    default:
        return V_FATAL;
    }
}
uint64_t zs_act_phase(uint64_t *cell, const void *arg)
{
    const struct a_phase *a = arg;
    uint32_t ph = (uint32_t)(*cell & 0xff);
    uint64_t since = *cell >> 8;
    switch (a->op) {
    case PH_SET:
        *cell = phase_cell(a->phase, a->now);
        return ph;
    case PH_PROGRESS:
        if (ph == a->phase)
            *cell = phase_cell(ph, a->now);
        return ph;
    default:
        if (ph == ZS_PH_OFF || ph == ZS_PH_DONE || a->now - since < a->rto)
            return ph;
        *cell = phase_cell(ph, a->now);
        return ph | 0x100u;
    }
}
uint64_t zs_act_poll(uint64_t *cell, const void *arg)
{
    const struct a_poll *a = arg;
    uint32_t next = PSN(*cell);
    bool busy = (*cell >> 24) & 1;
    uint64_t sent = *cell >> 25;
    if (a->issue) {
        if (busy && a->now - sent < a->rto)
            return UINT64_MAX;                      /* still waiting for the last one */
        uint32_t psn = busy ? PSN(next - 1) : next; /* a lost poll goes again, same PSN */
        *cell = (uint64_t)PSN(psn + 1) | 1ull << 24 | a->now << 25;
        return psn;
    }
    if (busy && a->psn == PSN(next - 1)) {
        *cell = next;
        return 1;
    }
    return 0;
}
uint64_t zs_act_db(uint64_t *cell, const void *arg)
{
    uint32_t psn = *(const uint32_t *)arg;
    uint32_t epsn = PSN(*cell);
    bool nak_sent = (*cell >> 24) & 1;
    int32_t d = nic_psn_diff(psn, epsn);
    if (d == 0) {
        *cell = PSN(epsn + 1);
        return DB_OK | (uint64_t)psn << 8;
    }
    if (d < 0)
        return DB_DUP | (uint64_t)PSN(epsn - 1) << 8;
    if (nak_sent)
        return DB_QUIET;
    *cell |= 1ull << 24;
    return DB_NAK | (uint64_t)epsn << 8;
}
