/* Steps 3-5, the switch as RC requester of its data QPs: the consumers'
 * ACKs and NAKs (c_exp, or t_ack over a replication group) and the
 * producers' (p_exp) decide what goes next -- the consumer's head WRITE,
 * the producer's tail WRITE and the thread's release at once (a pointer
 * group), the in-order commit of a lane's transfer (COMMIT passes), the
 * end of a stream, or the re-issue of a lost operation (zs_recovery.c). */

#include "protocols/zerosided/zs_dp_int.h"

static uint32_t ack_event(const struct pkt *p)
{
    switch (p->aeth_syndrome & NIC_AETH_TYPE_MASK) {
    case 0x00:
        return EV_ACK;
    case 0x20: /* RNR: nothing of ours needs a receive; treat as a lost op */
        return EV_NAK_SEQ;
    default:
        return (p->aeth_syndrome & 0x1f) == 0 ? EV_NAK_SEQ : EV_NAK_FATAL;
    }
}

/* The consumer has the data (and, with lanes, every earlier transfer is
 * committed): its head WRITE (at PSN hpsn; UINT32_MAX: the one reserved
 * after the data, t_psn + t_off), the producer's tail WRITE and the
 * thread's release (then its next transfer) at once. */
static void send_ptrs(struct zs_dp *dp, struct ps_pass *x, struct pkt *p, uint32_t t,
                      const struct zs_thr_ent *th, uint32_t hpsn)
{
    uint64_t xfer = ps_reg_read(x, dp->t_xfer, t);
    uint64_t ptrs = ps_reg_read(x, dp->t_ptrs, t);
    uint32_t off = hpsn == UINT32_MAX ? (uint32_t)ps_reg_read(x, dp->t_off, t) : 0;
    uint32_t ppsn = (uint32_t)ps_reg_read(x, dp->t_psn, t);
    if (hpsn == UINT32_MAX)
        hpsn = PSN(ppsn + off);
    zs_set_phase(dp, x, t, ZS_PH_RELEASE);
    struct a_pw pw = {.op = PW_ARM, .now = now_ns(x)};
    ps_reg_exec(x, dp->t_pw, t, zs_act_pw, &pw);
    ps_reg_exec(x, dp->p_pw, (uint32_t)xfer & 0xffff, zs_act_pw, &pw);
    const struct zs_ep_ent *c = ps_table_apply(x, dp->cons, t);
    if (!c) {
        ps_drop(x);
        return;
    }
    zs_build_ptr_write(dp, p, c, hpsn, ZS_HEAD_OFF, (uint32_t)ptrs);
    struct zs_br nb = zs_release_br(t, xfer, (uint32_t)(ptrs >> 32));
    nb.keep = ZS_K_CHEAD | ZS_K_PTAIL | ZS_K_RECIRC;
    nb.wpsn = ppsn;
    nb.wval = (uint32_t)(ptrs >> 32);
    zs_ptr_group(x, th, t, zs_xfer_slot(xfer), &nb);
}

/* Lanes: commit the transfer [b.ptail, b.v) into the consumer's head once
 * the transfers reserved before it are in (another lane's may be
 * slower); until then the packet recirculates. */
void zs_commit_pass(struct zs_dp *dp, struct ps_pass *x, struct pkt *p, struct zs_br b,
                    const struct zs_thr_ent *th)
{
    uint32_t t = b.t;
    struct a_cmt cm = {.op = CM_COMMIT, .s = b.ptail, .e = b.v};
    uint64_t r = ps_reg_exec(x, dp->c_cmt, th->c, zs_act_cmt, &cm);
    if (r == CM_STALE) { /* a restarted copy of a commit already made */
        ps_drop(x);
        return;
    }
    if (r == CM_WAIT) {
        dp->st.commit_waits++;
        struct a_phase pa = {.op = PH_PROGRESS, .phase = ZS_PH_COMMIT, .now = now_ns(x)};
        ps_reg_exec(x, dp->t_phase, t, zs_act_phase, &pa);
        zs_recirc_as(x, p, &b);
        return;
    }
    send_ptrs(dp, x, p, t, th, UINT32_MAX);
}

/* Lanes: a lane other than 0 has finished; lane 0 ends the stream. */
void zs_fin_pass(struct zs_dp *dp, struct ps_pass *x, struct pkt *p, struct zs_br b,
                 const struct zs_thr_ent *th)
{
    struct a_cmt cm = {.op = CM_FIN};
    (void)p;
    ps_reg_exec(x, dp->c_cmt, th->c, zs_act_cmt, &cm);
    zs_set_phase(dp, x, b.t, ZS_PH_DONE);
    dp->st.threads_done++;
    zs_report(dp, x, 1, b.t, 0);
    ps_drop(x);
}

/* an ACK / NAK on a consumer data QP */
void zs_cons_ack(struct zs_dp *dp, struct ps_pass *x, struct pkt *p, const struct zs_conn_ent *ce)
{
    if (p->opcode != IB_OPCODE_RC_ACKNOWLEDGE) {
        dp->st.stray++;
        ps_drop(x);
        return;
    }
    uint32_t t = ce->t, ev_kind = ack_event(p);
    const struct zs_thr_ent *th = ps_table_apply(x, dp->thr, t);
    if (!th) {
        ps_drop(x);
        return;
    }
    struct a_ev ev = {.ev = ev_kind, .psn = p->psn};
    uint64_t v;
    if (dp->mode == ZS_REPLICATE) {
        ev.bit = 1u << ce->rid;
        ev.full = th->n_cons >= 32 ? UINT32_MAX : (1u << th->n_cons) - 1;
        v = ps_reg_exec(x, dp->t_ack, t, zs_act_tack, &ev);
    } else {
        v = ps_reg_exec(x, dp->c_exp, ce->idx, zs_act_cexp, &ev);
    }
    if (ev_kind != EV_ACK)
        dp->st.naks_rx++;
    switch ((uint32_t)(v & 0xff)) {
    case V_PROGRESS: {
        struct a_phase pa = {.op = PH_PROGRESS, .phase = ZS_PH_READ, .now = now_ns(x)};
        ps_reg_exec(x, dp->t_phase, t, zs_act_phase, &pa);
        ps_drop(x);
        return;
    }
    case V_ISSUE_CHEAD: {
        uint32_t psn = (uint32_t)(v >> 8);
        if (dp->mode == ZS_REPLICATE) {
            uint32_t chead_new = (uint32_t)ps_reg_read(x, dp->t_ptrs, t);
            zs_set_phase(dp, x, t, ZS_PH_CHEAD);
            zs_emit_mcast_head_write(dp, x, p, t, th, psn, chead_new);
            return;
        }
        if (th->lanes > 1) {
            /* another lane's earlier transfer may still be in flight: the
             * consumer's head moves in order (commit pass, stage 5) */
            uint64_t xfer = ps_reg_read(x, dp->t_xfer, t);
            uint32_t e = (uint32_t)ps_reg_read(x, dp->t_ptrs, t);
            zs_set_phase(dp, x, t, ZS_PH_COMMIT);
            /* c_exp says PTR from now on, but the head WRITE at its PSN
             * leaves only after the commit: the pointer timer, still armed
             * from the lane's last head WRITE (this ACK covers it), must not
             * send one first (with an older value at that PSN, the real
             * WRITE would be a duplicate the consumer's NIC drops, and the
             * consumer would never see its head move) */
            struct a_pw pw = {.op = PW_DISARM};
            ps_reg_exec(x, dp->t_pw, t, zs_act_pw, &pw);
            struct zs_br nb = {.type = ZS_BR_COMMIT,
                               .t = (uint16_t)t,
                               .v = e,
                               .ptail = (e - (uint32_t)(xfer >> 16)) & ZS_PTR_MASK};
            zs_recirc_as(x, p, &nb);
            return;
        }
        send_ptrs(dp, x, p, t, th, psn);
        return;
    }
    case V_ISSUE_PTAIL: {
        uint32_t pidx = (uint32_t)ps_reg_read(x, dp->t_xfer, t) & 0xffff;
        uint32_t ptail_new = (uint32_t)(ps_reg_read(x, dp->t_ptrs, t) >> 32);
        uint32_t psn = (uint32_t)ps_reg_read(x, dp->t_psn, t);
        zs_set_phase(dp, x, t, ZS_PH_PTAIL);
        const struct zs_ep_ent *pe = ps_table_apply(x, dp->prod, pidx);
        if (!pe) {
            ps_drop(x);
            return;
        }
        zs_emit_ptr_write(dp, x, p, pe, psn, ZS_TAIL_OFF, ptail_new);
        return;
    }
    case V_REISSUE: {
        uint32_t pidx = (uint32_t)ps_reg_read(x, dp->t_xfer, t) & 0xffff;
        struct zs_br nb = {.type = ZS_BR_REISSUE,
                           .phase = (uint8_t)(v >> 8),
                           .t = (uint16_t)t,
                           .p = (uint16_t)pidx};
        zs_recirc_as(x, p, &nb);
        return;
    }
    case V_THREAD_DONE:
        zs_set_phase(dp, x, t, ZS_PH_DONE);
        dp->st.threads_done++;
        zs_report(dp, x, 1, t, 0);
        ps_drop(x);
        return;
    case V_FATAL:
        dp->st.fatal_naks++;
        zs_report(dp, x, 2, t, p->aeth_syndrome);
        ps_drop(x);
        return;
    default:
        ps_drop(x);
        return;
    }
}

/* an ACK / NAK on a producer data QP (the tail WRITE's) */
void zs_prod_ack(struct zs_dp *dp, struct ps_pass *x, struct pkt *p, const struct zs_conn_ent *ce)
{
    uint32_t t = zs_owner_of(dp, x, ce), ev_kind = ack_event(p);
    struct a_ev ev = {.ev = ev_kind, .psn = p->psn, .after_read = dp->mode == ZS_REPLICATE};
    uint64_t v = ps_reg_exec(x, dp->p_exp, ce->idx, zs_act_pexp, &ev);
    if (ev_kind != EV_ACK)
        dp->st.naks_rx++;
    if (t == ZS_NO_THREAD) {
        ps_drop(x);
        return;
    }
    switch ((uint32_t)(v & 0xff)) {
    case V_RELEASE: {
        if (dp->mode != ZS_REPLICATE) { /* released at the data ACK already */
            ps_drop(x);
            return;
        }
        uint64_t xfer = ps_reg_read(x, dp->t_xfer, t);
        uint32_t ptail_new = (uint32_t)(ps_reg_read(x, dp->t_ptrs, t) >> 32);
        zs_set_phase(dp, x, t, ZS_PH_RELEASE);
        struct zs_br nb = zs_release_br(t, xfer, ptail_new);
        nb.p = ce->idx;
        zs_recirc_as(x, p, &nb); /* step 5: the ACK becomes the thread's packet */
        return;
    }
    case V_REISSUE: {
        struct zs_br nb = {
            .type = ZS_BR_REISSUE, .phase = (uint8_t)(v >> 8), .t = (uint16_t)t, .p = ce->idx};
        zs_recirc_as(x, p, &nb);
        return;
    }
    case V_FATAL:
        dp->st.fatal_naks++;
        zs_report(dp, x, 2, t, p->aeth_syndrome);
        ps_drop(x);
        return;
    default:
        ps_drop(x);
        return;
    }
}
