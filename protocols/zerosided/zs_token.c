/* Step 1 of a pairs / shuffle / load-balancing transfer: the thread's
 * TOKEN (or RELEASE) pass.  It picks a source slot (round robin), reads the
 * mirrors, takes what the mode needs (the producer's lock, an uplink slot of
 * the producer's node, the consumer's stream slot), picks the batch
 * n = min(available, free space, max batch, distance to either ring's end),
 * reserves PSNs on both data QPs and becomes the RDMA READ to the producer;
 * or, at the end of every source, the end-of-stream head WRITE. */

#include "protocols/zerosided/zs_dp_int.h"

/* Stages 7-10 and the READ, once the batch is picked (pairs, shuffle, lb). */
static void issue_transfer(struct zs_dp *dp, struct ps_pass *x, struct pkt *p, uint32_t t,
                           const struct zs_thr_ent *th, const struct zs_src_ent *src, uint32_t j,
                           uint32_t chead, uint32_t ptail, uint32_t n, bool held, bool cheld)
{
    uint32_t item = src->ep.item_bytes;
    uint64_t bytes = (uint64_t)n * item;
    uint32_t np = zs_npkts(dp, bytes);
    uint32_t res = np + 1; /* the data and, right after it, the pointer WRITE */
    uint32_t pfirst = (uint32_t)ps_reg_exec(x, dp->p_next, src->p, zs_act_alloc, &res);
    uint32_t cfirst = (uint32_t)ps_reg_exec(x, dp->c_next, t, zs_act_alloc, &res);
    struct a_ev pe = {.ev = EV_READ_ISSUE, .first = pfirst};
    ps_reg_exec(x, dp->p_exp, src->p, zs_act_pexp, &pe);
    struct a_ev ce = {
        .ev = EV_READ_ISSUE, .state = X_DATA, .exp = cfirst + np - 1, .first = cfirst};
    ps_reg_exec(x, dp->c_exp, t, zs_act_cexp, &ce);
    ps_reg_write(x, dp->t_xfer, t, zs_xfer_word(src->p, n, src->ep.node, held, j, cheld));
    ps_reg_write(x, dp->t_ptrs, t,
                 (uint64_t)((chead + n) & ZS_PTR_MASK) | (uint64_t)((ptail + n) & ZS_PTR_MASK)
                                                             << 32);
    ps_reg_write(x, dp->t_cva, t,
                 th->cbase + ZS_HDR_BYTES + (uint64_t)(chead % th->capacity) * th->item_bytes);
    ps_reg_write(x, dp->t_off, t, PSN(cfirst - pfirst));
    ps_reg_write(x, dp->t_psn, t, PSN(pfirst + np));
    zs_set_phase(dp, x, t, ZS_PH_READ);
    dp->st.transfers++;
    dp->st.items += n;
    dp->st.bytes += bytes;
    zs_c_reads_add(dp, x, th->c, 1);
    zs_n_reads_add(dp, src->ep.node, 1);
    zs_emit_read(dp, x, p, &src->ep, false, pfirst,
                 src->ep.base + ZS_HDR_BYTES + (uint64_t)(ptail % src->ep.capacity) * item,
                 (uint32_t)bytes);
}

/* The end of a thread's stream: its consumer's head with the end flag. */
void zs_issue_final(struct zs_dp *dp, struct ps_pass *x, struct pkt *p, uint32_t t,
                    const struct zs_thr_ent *th, uint32_t chead)
{
    uint32_t one = 1;
    if (dp->mode == ZS_REPLICATE) {
        uint32_t psn = (uint32_t)ps_reg_exec(x, dp->t_cnext, t, zs_act_alloc, &one);
        struct a_ev ae = {.ev = EV_READ_ISSUE, .state = X_FINAL, .exp = psn};
        ps_reg_exec(x, dp->t_ack, t, zs_act_tack, &ae);
        ps_reg_write(x, dp->t_ptrs, t, chead | ZS_DONE_BIT);
        zs_set_phase(dp, x, t, ZS_PH_FINAL);
        zs_emit_mcast_head_write(dp, x, p, t, th, psn, chead | ZS_DONE_BIT);
        return;
    }
    uint32_t psn = (uint32_t)ps_reg_exec(x, dp->c_next, t, zs_act_alloc, &one);
    struct a_ev ce = {.ev = EV_READ_ISSUE, .state = X_FINAL, .exp = psn, .first = psn};
    ps_reg_exec(x, dp->c_exp, t, zs_act_cexp, &ce);
    zs_set_phase(dp, x, t, ZS_PH_FINAL);
    const struct zs_ep_ent *ce_ep = ps_table_apply(x, dp->cons, t);
    if (!ce_ep) {
        ps_drop(x);
        return;
    }
    zs_emit_ptr_write(dp, x, p, ce_ep, psn, ZS_HEAD_OFF, chead | ZS_DONE_BIT);
}

/* A TOKEN or RELEASE pass of a pairs / shuffle / lb thread. */
void zs_token_pass(struct zs_dp *dp, struct ps_pass *x, struct pkt *p, struct zs_br b,
                   const struct zs_thr_ent *th)
{
    uint32_t t = b.t;
    bool release = b.type == ZS_BR_RELEASE;
    uint32_t flags = (uint32_t)ps_reg_read(x, dp->t_flags, t);
    /* a release pass that cannot also be the next attempt (the next slot
     * is another producer) must not consume the round-robin slot */
    uint32_t rr[2] = {th->n_src, !release || th->n_src == 1};
    uint32_t j = (uint32_t)ps_reg_exec(x, dp->t_rr, t, zs_act_rr, rr);
    const struct zs_src_ent *src = ps_table_apply(x, dp->src, (uint64_t)t << 16 | j);
    if (!src) {
        ps_drop(x);
        return;
    }
    /* a release after a transfer also records that the transfer's tail
     * WRITE is out (p_exp), which a pass that goes on to the next READ
     * could not do for another producer: such a release is a pass of its
     * own */
    bool combined = release && src->p == b.p && !(b.phase & (ZS_BRF_PTAIL | ZS_BRF_CSLOT));
    if (release && !combined) {
        /* commit the tail of the producer we were using, free it, then try
         * (ZS_NO_PROD: an attempt that gave up before owning the producer) */
        struct a_tail at = {.write = true, .v = b.v};
        if (b.p != ZS_NO_PROD)
            ps_reg_exec(x, dp->p_tail, b.p, zs_act_tail, &at);
        if (zs_locks(dp) && b.p != ZS_NO_PROD) {
            struct a_lock lk = {.op = LK_RELEASE, .me = t + 1};
            ps_reg_exec(x, dp->p_lock, b.p, zs_act_lock, &lk);
        }
        if (b.phase & ZS_BRF_SLOT) {
            struct a_slot sl = {.release = true, .t = t};
            ps_reg_exec(x, dp->n_busy, b.j, zs_act_slot, &sl);
        }
        if (b.phase & ZS_BRF_CSLOT) {
            struct a_slot sl = {.release = true, .t = th->lane};
            ps_reg_exec(x, dp->c_busy, th->c, zs_act_slot, &sl);
        }
        if (b.phase & ZS_BRF_PTAIL) {
            struct a_ev ev = {.ev = EV_PTAIL_SENT, .exp = b.wpsn};
            ps_reg_exec(x, dp->p_exp, b.p, zs_act_pexp, &ev);
        }
        zs_set_phase(dp, x, t, ZS_PH_IDLE);
        struct zs_br nb = {.type = ZS_BR_TOKEN, .t = (uint16_t)t};
        zs_recirc_as(x, p, &nb);
        return;
    }
    uint32_t phead = (uint32_t)ps_reg_read(x, dp->p_head, src->p);
    struct a_tail at = {.write = combined, .v = b.v};
    uint32_t ptail = (uint32_t)ps_reg_exec(x, dp->p_tail, src->p, zs_act_tail, &at);
    uint32_t ctail = (uint32_t)ps_reg_read(x, dp->c_tail, th->c) & ZS_PTR_MASK;
    uint32_t avail = ((phead & ZS_PTR_MASK) - ptail) & ZS_PTR_MASK;
    bool pdone = (phead & ZS_DONE_BIT) && avail == 0;
    bool stop = (flags & ZS_TF_STOP) != 0;
    /* pipeline: one of the consumer's lanes at a time has its READ
     * streaming; the others wait for their ACKs (or for their turn), so the
     * next READ into the consumer leaves as soon as the last one's
     * responses have passed, not after its ACK */
    bool cheld = false;
    if (th->stream && avail && !stop) {
        struct a_slot sl = {.cap = th->stream, .t = th->lane};
        cheld = ps_reg_exec(x, dp->c_busy, th->c, zs_act_slot, &sl) != 0;
        if (!cheld)
            dp->st.stream_busy++;
    }
    bool go = !th->stream || cheld;
    bool owned = true;
    if (zs_locks(dp)) {
        /* take the producer only if it has something (or keep it after our
         * own release); give it back if this pass ends up with nothing */
        struct a_lock lk = {.op = (avail && !stop && go) ? LK_ACQUIRE
                                                         : (combined ? LK_RELEASE : LK_READ),
                            .me = t + 1};
        uint64_t r = ps_reg_exec(x, dp->p_lock, src->p, zs_act_lock, &lk);
        owned = lk.op == LK_ACQUIRE ? r == 1 : false;
        if (lk.op == LK_ACQUIRE && !owned)
            dp->st.lock_busy++;
    }
    /* an uplink slot of the producer's node (a transfer holds it until its
     * release): consumers do not crowd onto one producer node's link */
    bool held = false;
    if (th->slots && avail && owned && !stop && go) {
        struct a_slot sl = {.cap = th->slots, .t = t};
        held = ps_reg_exec(x, dp->n_busy, src->ep.node % ZS_SLOT_NODES, zs_act_slot, &sl) != 0;
        if (!held)
            dp->st.slot_busy++;
    } else if (combined && (b.phase & ZS_BRF_SLOT)) {
        /* a combined release of a give-back that held the slot, and this
         * attempt does not take it again (nothing to move, or stopped): the
         * slot must come free here, or it stays the thread's for good.
         * Unreachable today -- a release pass is combined only when the
         * thread has one source (the round robin's next slot is the one
         * just given back), and uplink slots exist only with several --
         * kept so that no configuration can leak a slot */
        struct a_slot sl = {.release = true, .t = t};
        ps_reg_exec(x, dp->n_busy, b.j, zs_act_slot, &sl);
    }
    /* lanes: lane 0 ends the consumer's stream once the other lanes have
     * finished (then every transfer is committed) */
    uint64_t cmt = 0;
    if (th->lanes > 1 && th->lane == 0) {
        struct a_cmt cm = {.op = CM_LANE0, .lanes = th->lanes};
        cmt = ps_reg_exec(x, dp->c_cmt, th->c, zs_act_cmt, &cm);
    }
    struct a_take tk = {.avail = owned && go && !stop && (held || !th->slots) ? avail : 0,
                        .ctail = ctail,
                        .ccap = th->capacity,
                        .pend = src->ep.capacity - ptail % src->ep.capacity,
                        .max = th->max_batch};
    uint64_t r = ps_reg_exec(x, dp->c_head, th->c, zs_act_take, &tk);
    uint32_t chead = (uint32_t)r, n = (uint32_t)(r >> 32);
    struct a_u64 bit = {.v = pdone ? 1ull << j : 0};
    uint64_t done = ps_reg_exec(x, dp->t_done, t, zs_act_or, &bit);
    if (n > 0) {
        issue_transfer(dp, x, p, t, th, src, j, chead, ptail, n, held, cheld);
        return;
    }
    if ((done & th->all_done) == th->all_done || stop) {
        if (th->lanes <= 1) {
            zs_issue_final(dp, x, p, t, th, chead);
            return;
        }
        if (th->lane != 0) { /* this lane is through: count it (stage 5 again) */
            struct zs_br nb = {.type = ZS_BR_FIN, .t = (uint16_t)t};
            zs_set_phase(dp, x, t, ZS_PH_IDLE);
            zs_recirc_as(x, p, &nb);
            return;
        }
        if (cmt & ZS_DONE_BIT) {
            zs_issue_final(dp, x, p, t, th, (uint32_t)cmt & ZS_PTR_MASK);
            return;
        }
    }
    dp->st.tokens_idle++;
    if ((zs_locks(dp) && owned && go && avail && !stop) || held || cheld) {
        /* took the producer (or a slot), but the consumer is full: give
         * them back (t_xfer / t_ptrs let a timer redo this release) */
        /* a pipeline lane that took the consumer's stream slot but not the
         * producer (another lane of the consumer holds it) must not write
         * the producer's tail: that lane moves it */
        uint32_t gp = zs_locks(dp) && !owned ? ZS_NO_PROD : src->p;
        uint64_t xw = zs_xfer_word(gp, 0, src->ep.node, held, j, cheld);
        ps_reg_write(x, dp->t_xfer, t, xw);
        ps_reg_write(x, dp->t_ptrs, t, (uint64_t)chead | (uint64_t)ptail << 32);
        struct zs_br nb = zs_release_br(t, xw, ptail);
        zs_set_phase(dp, x, t, ZS_PH_RELEASE);
        zs_recirc_as(x, p, &nb);
        return;
    }
    zs_set_phase(dp, x, t, ZS_PH_IDLE);
    struct zs_br nb = {.type = ZS_BR_TOKEN, .t = (uint16_t)t};
    zs_recirc_as(x, p, &nb);
}
