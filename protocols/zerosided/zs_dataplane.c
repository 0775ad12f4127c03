/* The zero-sided switch program's data plane (Jasny et al., Section 4-6;
 * build spec 2.3-2.4): the switch is the only RDMA requester.  Per
 * transfer of thread t (one per consumer; replication: one per group):
 *
 *   1 TOKEN    the thread's packet picks a source (round robin), reads the
 *              mirrors, picks the batch n = min(available, free space,
 *              max batch, distance to either ring's end), reserves PSNs on
 *              both data QPs and becomes an RDMA READ to the producer
 *   2 rewrite  each READ RESPONSE becomes an RDMA WRITE to the consumer:
 *              opcode, AETH out, RETH in (first / only), PSN + offset,
 *              addresses; payload untouched, nothing buffered
 *   3 ACK      the consumer's ACK of the data is multicast to the thread's
 *              pointer group: one copy is the WRITE of the consumer's head,
 *              one the WRITE of the producer's tail, one recirculates as
 *   4 RELEASE  commit the tail, free the producer (load balancing), and try
 *              again (step 1) at once
 *
 * so the pointer WRITEs of one transfer are in flight together with the
 * next transfer (replication keeps the spec's sequence: head WRITE, its
 * ACK, tail WRITE, its ACK, release).  On each data QP the PSNs stay in
 * the order the operations are sent: a transfer reserves its data PSNs and
 * right after them its pointer WRITE's, and the pointer WRITE leaves the
 * switch before the next READ is issued.  The switch's producer tail
 * register is the committed read position (only items the consumer has
 * ACKed); its head and tail WRITEs only ever carry committed values.  Polls (a 4-byte READ of the
 * producer head / consumer tail on the endpoint's control QP, one packet-generator batch every poll
 * interval) or doorbells (the PU's 4-byte WRITE, ACKed by the switch)
 * update the mirrors.
 *
 * Reliability, the switch as an RC requester: each data QP has its PSN
 * allocator (x_next) and its expectation (x_exp: what it waits for, from
 * which PSN).  READ responses must arrive in PSN order: a gap, a NAK from
 * the consumer, or a timeout (a timer batch looks at each thread's phase
 * and the time of its last progress) re-issues the operation of the
 * current phase with the same PSNs: the READ again (the producer executes
 * a duplicate READ again; the rewritten WRITEs map to the same consumer
 * PSNs through the same offset, so the consumer drops what it has and
 * places the rest), or a pointer WRITE again (a duplicate is re-ACKed).
 * While a re-issued READ is pending, responses of the old one are dropped
 * (RECOVER) until the first one of the new READ arrives.
 *
 * Two operations outstanding on one QP: x_exp's PEND bit says the pointer
 * WRITE at PSN first - 1 is not yet acknowledged (an ACK at or past it, or
 * on the producer QP the first READ response, clears it).  Go-back-N: a
 * responder that lost it NAKs the next operation, so every re-issue of a
 * READ (or of the end-of-stream WRITE) while PEND is set first sends the
 * pointer WRITE again with its PSN and the committed value -- a multicast
 * to the pointer group keeping that copy and a recirculating one that
 * goes on with the re-issue.  A pointer WRITE with nothing behind it is
 * covered by a pointer timer: the thread's (t_pw) for its consumer head
 * WRITE, the producer's (p_pw) for its tail WRITE.
 *
 * Pipeline (--pipeline=W, shuffle): a consumer has W lanes (data QPs,
 * threads, commits in order as with --lanes) but only one of them has its
 * READ streaming at a time (c_busy, taken in the token pass, given back
 * when the READ's last response passes): the consumer's next READ leaves
 * then, while the last transfer's lane still waits for its ACK.
 *
 * Every register array lives in one stage and is touched at most once per
 * pass, in stage order (zs_dp.h has the plan); where a step needs an
 * earlier stage again, the packet recirculates. */
#include <stdio.h>
#include <string.h>

#include "protocols/zerosided/zs_dp.h"
#include "protocols/zerosided/zs_regs.h"
#include "sim/nic/opcode.h"

/* ---------------------------------------------------------------- packet builders */

static void recirc_as(struct ps_pass *x, struct pkt *p, const struct zs_br *b)
{
    struct ps_meta *m = ps_pass_meta(x);
    memcpy(m->bridge, b, sizeof(*b));
    m->bridge_bytes = ZS_BR_WIRE_BYTES;
    /* a switch-thread packet carries no payload */
    p->payload_len = 0;
    p->frame_bytes = 64;
    ps_recirc(x);
}

static void clear_bth_flags(struct pkt *p)
{
    p->se = 0;
    p->migreq = 0;
    p->ack_req = 0;
    p->ar_ctx = 0;
}

/* RDMA READ request (switch -> PU). */
static void emit_read(struct zs_dp *dp, struct ps_pass *x, struct pkt *p,
                      const struct zs_ep_ent *ep, bool ctl, uint32_t psn, uint64_t va, uint32_t len)
{
    clear_bth_flags(p);
    p->payload_len = 0;
    ps_roce_set_opcode(p, IB_OPCODE_RC_RDMA_READ_REQUEST);
    ps_roce_address(dp->ps, p, ep->node, ctl ? ep->pu_ctl_qpn : ep->pu_data_qpn,
                    ctl ? ep->sw_ctl_qpn : ep->sw_data_qpn, psn);
    p->reth_va = va;
    p->reth_rkey = ep->rkey;
    p->reth_dma_len = len;
    p->ack_req = 1;
    ps_fwd(x, ep->node);
}

/* RDMA WRITE ONLY of a 4-byte pointer (switch -> PU, data QP): the
 * headers (ingress or egress), then (ingress) the port. */
static void build_ptr_write(struct zs_dp *dp, struct pkt *p, const struct zs_ep_ent *ep,
                            uint32_t psn, uint32_t off, uint32_t value)
{
    clear_bth_flags(p);
    uint8_t le[4];
    zs_store_le32(le, value);
    p->payload_len = 0;
    ps_roce_set_opcode(p, IB_OPCODE_RC_RDMA_WRITE_ONLY);
    ps_roce_set_inline(dp->ps, p, le, 4);
    ps_roce_address(dp->ps, p, ep->node, ep->pu_data_qpn, ep->sw_data_qpn, psn);
    p->reth_va = ep->base + off;
    p->reth_rkey = ep->rkey;
    p->reth_dma_len = 4;
    p->ack_req = 1;
}
static void emit_ptr_write(struct zs_dp *dp, struct ps_pass *x, struct pkt *p,
                           const struct zs_ep_ent *ep, uint32_t psn, uint32_t off, uint32_t value)
{
    build_ptr_write(dp, p, ep, psn, off, value);
    ps_fwd(x, ep->node);
}

/* Send this pass's packet to thread t's pointer group for source slot j,
 * keeping the copies in b.keep: the consumer's (the packet as built in
 * ingress), the producer's (a tail WRITE of b.wval at PSN b.wpsn, built in
 * egress) and the recirculating one (carrying b). */
static void ptr_group(struct ps_pass *x, const struct zs_thr_ent *th, uint32_t t, uint32_t j,
                      const struct zs_br *b)
{
    struct ps_meta *m = ps_pass_meta(x);
    memcpy(m->bridge, b, sizeof(*b));
    m->bridge_bytes = ZS_BR_WIRE_BYTES;
    ps_mcast(x, ZS_GRP_PTR(t, j, th->n_src));
}

/* Replication: the 4-byte head WRITE to every consumer of thread t's group
 * (one multicast packet; the egress pass gives each copy its consumer's
 * QPN, PSN offset, address and rkey, table mcc). */
static void emit_mcast_head_write(struct zs_dp *dp, struct ps_pass *x, struct pkt *p, uint32_t t,
                                  const struct zs_thr_ent *th, uint32_t psn, uint32_t value)
{
    struct zs_br b = {.type = ZS_BR_SCAN, .t = (uint16_t)t, .v = value};
    memcpy(ps_pass_meta(x)->bridge, &b, sizeof(b));
    uint8_t le[4];
    zs_store_le32(le, value);
    clear_bth_flags(p);
    p->payload_len = 0;
    ps_roce_set_opcode(p, IB_OPCODE_RC_RDMA_WRITE_ONLY);
    ps_roce_set_inline(dp->ps, p, le, 4);
    ps_roce_address(dp->ps, p, dp->sw_node, 0, 0, psn);
    p->reth_va = ZS_HEAD_OFF; /* + each consumer's base in egress */
    p->reth_dma_len = 4;
    p->ack_req = 1;
    ps_mcast(x, th->group);
}

/* Producers are locked to one thread at a time: load balancing, and a
 * shuffle whose consumers have several lanes (threads) each. */
static bool locks(const struct zs_dp *dp)
{
    return dp->mode == ZS_LB || dp->lanes > 1;
}

static uint32_t npkts(const struct zs_dp *dp, uint64_t bytes)
{
    return bytes ? (uint32_t)((bytes + dp->mtu_bytes - 1) / dp->mtu_bytes) : 1;
}

static void set_phase(struct zs_dp *dp, struct ps_pass *x, uint32_t t, uint32_t phase)
{
    struct a_phase a = {.op = PH_SET, .phase = phase, .now = now_ns(x)};
    ps_reg_exec(x, dp->t_phase, t, zs_act_phase, &a);
    if (dp->ph_at_ns && t < dp->nt && dp->ph_cur[t] != phase) { /* measurement, not state */
        dp->st.phase_ns[dp->ph_cur[t]] += a.now - dp->ph_at_ns[t];
        dp->ph_at_ns[t] = a.now;
        dp->ph_cur[t] = (uint8_t)phase;
    }
}

/* Measurement only (not switch state): consumer c has one READ more (+1)
 * or less (-1) on its way: from the request to its last response. */
static void c_reads_add(struct zs_dp *dp, const struct ps_pass *x, uint32_t c, int d)
{
    if (!dp->c_reads || c >= dp->nc)
        return;
    uint64_t now = now_ns(x);
    if (dp->c_at_ns[c]) {
        if (dp->c_reads[c])
            dp->st.c_read_ns += now - dp->c_at_ns[c];
        else
            dp->st.c_noread_ns += now - dp->c_at_ns[c];
    }
    dp->c_at_ns[c] = now;
    if (d > 0) {
        if (++dp->c_reads[c] > dp->st.c_reads_max)
            dp->st.c_reads_max = dp->c_reads[c];
    } else if (dp->c_reads[c]) {
        dp->c_reads[c]--;
    }
}

/* Measurement only: producer node slot k has one READ more (+1) or less
 * (-1) on its way out (request to last response in order). */
static void n_reads_add(struct zs_dp *dp, uint32_t k, int d)
{
    if (!dp->n_reads)
        return;
    k %= ZS_SLOT_NODES;
    if (d > 0 && ++dp->n_reads[k] > dp->st.n_reads_max)
        dp->st.n_reads_max = dp->n_reads[k];
    else if (d < 0 && dp->n_reads[k])
        dp->n_reads[k]--;
}

/* ---------------------------------------------------------------- step 1: the token */

/* Stages 7-10 and the READ, once the batch is picked (pairs, shuffle, lb). */
static void issue_transfer(struct zs_dp *dp, struct ps_pass *x, struct pkt *p, uint32_t t,
                           const struct zs_thr_ent *th, const struct zs_src_ent *src, uint32_t j,
                           uint32_t chead, uint32_t ptail, uint32_t n, bool held, bool cheld)
{
    uint32_t item = src->ep.item_bytes;
    uint64_t bytes = (uint64_t)n * item;
    uint32_t np = npkts(dp, bytes);
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
    set_phase(dp, x, t, ZS_PH_READ);
    dp->st.transfers++;
    dp->st.items += n;
    dp->st.bytes += bytes;
    c_reads_add(dp, x, th->c, 1);
    n_reads_add(dp, src->ep.node, 1);
    emit_read(dp, x, p, &src->ep, false, pfirst,
              src->ep.base + ZS_HDR_BYTES + (uint64_t)(ptail % src->ep.capacity) * item,
              (uint32_t)bytes);
}

/* The end of a thread's stream: its consumer's head with the end flag. */
static void issue_final(struct zs_dp *dp, struct ps_pass *x, struct pkt *p, uint32_t t,
                        const struct zs_thr_ent *th, uint32_t chead)
{
    uint32_t one = 1;
    if (dp->mode == ZS_REPLICATE) {
        uint32_t psn = (uint32_t)ps_reg_exec(x, dp->t_cnext, t, zs_act_alloc, &one);
        struct a_ev ae = {.ev = EV_READ_ISSUE, .state = X_FINAL, .exp = psn};
        ps_reg_exec(x, dp->t_ack, t, zs_act_tack, &ae);
        ps_reg_write(x, dp->t_ptrs, t, chead | ZS_DONE_BIT);
        set_phase(dp, x, t, ZS_PH_FINAL);
        emit_mcast_head_write(dp, x, p, t, th, psn, chead | ZS_DONE_BIT);
        return;
    }
    uint32_t psn = (uint32_t)ps_reg_exec(x, dp->c_next, t, zs_act_alloc, &one);
    struct a_ev ce = {.ev = EV_READ_ISSUE, .state = X_FINAL, .exp = psn, .first = psn};
    ps_reg_exec(x, dp->c_exp, t, zs_act_cexp, &ce);
    set_phase(dp, x, t, ZS_PH_FINAL);
    const struct zs_ep_ent *ce_ep = ps_table_apply(x, dp->cons, t);
    if (!ce_ep) {
        ps_drop(x);
        return;
    }
    emit_ptr_write(dp, x, p, ce_ep, psn, ZS_HEAD_OFF, chead | ZS_DONE_BIT);
}

/* A TOKEN or RELEASE pass of a pairs / shuffle / lb thread. */
static void token_pass(struct zs_dp *dp, struct ps_pass *x, struct pkt *p, struct zs_br b,
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
        if (locks(dp) && b.p != ZS_NO_PROD) {
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
        set_phase(dp, x, t, ZS_PH_IDLE);
        struct zs_br nb = {.type = ZS_BR_TOKEN, .t = (uint16_t)t};
        recirc_as(x, p, &nb);
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
    if (locks(dp)) {
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
            issue_final(dp, x, p, t, th, chead);
            return;
        }
        if (th->lane != 0) { /* this lane is through: count it (stage 5 again) */
            struct zs_br nb = {.type = ZS_BR_FIN, .t = (uint16_t)t};
            set_phase(dp, x, t, ZS_PH_IDLE);
            recirc_as(x, p, &nb);
            return;
        }
        if (cmt & ZS_DONE_BIT) {
            issue_final(dp, x, p, t, th, (uint32_t)cmt & ZS_PTR_MASK);
            return;
        }
    }
    dp->st.tokens_idle++;
    if ((locks(dp) && owned && go && avail && !stop) || held || cheld) {
        /* took the producer (or a slot), but the consumer is full: give
         * them back (t_xfer / t_ptrs let a timer redo this release) */
        /* a pipeline lane that took the consumer's stream slot but not the
         * producer (another lane of the consumer holds it) must not write
         * the producer's tail: that lane moves it */
        uint32_t gp = locks(dp) && !owned ? ZS_NO_PROD : src->p;
        uint64_t xw = zs_xfer_word(gp, 0, src->ep.node, held, j, cheld);
        ps_reg_write(x, dp->t_xfer, t, xw);
        ps_reg_write(x, dp->t_ptrs, t, (uint64_t)chead | (uint64_t)ptail << 32);
        struct zs_br nb = zs_release_br(t, xw, ptail);
        set_phase(dp, x, t, ZS_PH_RELEASE);
        recirc_as(x, p, &nb);
        return;
    }
    set_phase(dp, x, t, ZS_PH_IDLE);
    struct zs_br nb = {.type = ZS_BR_TOKEN, .t = (uint16_t)t};
    recirc_as(x, p, &nb);
}

/* replicate: pass 0 picks the source and reads consumer 0; pass i reads
 * consumer i (a packet reaches one entry of an array per pass, so the
 * minimum free space over M consumers takes M passes); the last one picks
 * the batch and issues the READ.  Every consumer of the group has the same
 * head (the same items, in the same order), kept once in t_chead. */
static void scan_pass(struct zs_dp *dp, struct ps_pass *x, struct pkt *p, struct zs_br b,
                      const struct zs_thr_ent *th)
{
    uint32_t t = b.t;
    bool first = b.type != ZS_BR_SCAN;
    uint32_t flags = 0;
    bool pdone = false;
    if (b.type == ZS_BR_RELEASE) { /* commit the tail, then scan afresh */
        struct a_tail at = {.write = true, .v = b.v};
        ps_reg_exec(x, dp->p_tail, b.p, zs_act_tail, &at);
        set_phase(dp, x, t, ZS_PH_IDLE);
        struct zs_br nb = {.type = ZS_BR_TOKEN, .t = (uint16_t)t};
        recirc_as(x, p, &nb);
        return;
    }
    if (first) {
        flags = (uint32_t)ps_reg_read(x, dp->t_flags, t);
        uint32_t rr[2] = {th->n_src, 1};
        b.j = (uint16_t)ps_reg_exec(x, dp->t_rr, t, zs_act_rr, rr);
        b.i = 0;
    }
    dp->st.scans++;
    const struct zs_src_ent *src = ps_table_apply(x, dp->src, (uint64_t)t << 16 | b.j);
    const uint16_t *c = ps_table_apply(x, dp->mc, (uint64_t)t << 16 | b.i);
    if (!src || !c) {
        ps_drop(x);
        return;
    }
    if (first) {
        uint32_t phead = (uint32_t)ps_reg_read(x, dp->p_head, src->p);
        b.ptail = (uint32_t)ps_reg_read(x, dp->p_tail, src->p);
        b.avail = ((phead & ZS_PTR_MASK) - b.ptail) & ZS_PTR_MASK;
        pdone = (phead & ZS_DONE_BIT) && b.avail == 0;
        if (flags & ZS_TF_STOP)
            b.avail = 0;
        b.p = src->p;
        b.v = 0;
    }
    uint32_t ctail = (uint32_t)ps_reg_read(x, dp->c_tail, *c) & ZS_PTR_MASK;
    bool last = b.i + 1u >= th->n_cons || b.avail == 0;
    struct a_take tk = {.avail = last ? b.avail : 0,
                        .ctail = ctail,
                        .ccap = th->capacity,
                        .pend = src->ep.capacity - b.ptail % src->ep.capacity,
                        .max = th->max_batch,
                        .used_max = b.v,
                        .repl = true};
    uint64_t r = ps_reg_exec(x, dp->t_chead, t, zs_act_take, &tk); /* n = 0 unless last */
    uint32_t chead = (uint32_t)r, n = (uint32_t)(r >> 32);
    struct a_u64 bit = {.v = pdone ? 1ull << b.j : 0};
    uint64_t done = ps_reg_exec(x, dp->t_done, t, zs_act_or, &bit);
    if (!last) {
        uint32_t used = (chead - ctail) & ZS_PTR_MASK;
        if (used > b.v)
            b.v = used;
        b.type = ZS_BR_SCAN;
        b.i++;
        set_phase(dp, x, t, ZS_PH_IDLE);
        recirc_as(x, p, &b);
        return;
    }
    if (n == 0) {
        if ((done & th->all_done) == th->all_done || (flags & ZS_TF_STOP)) {
            issue_final(dp, x, p, t, th, chead);
            return;
        }
        dp->st.tokens_idle++;
        set_phase(dp, x, t, ZS_PH_IDLE);
        struct zs_br nb = {.type = ZS_BR_TOKEN, .t = (uint16_t)t};
        recirc_as(x, p, &nb);
        return;
    }
    uint32_t item = src->ep.item_bytes;
    uint64_t bytes = (uint64_t)n * item;
    uint32_t np = npkts(dp, bytes);
    uint32_t res = np + 1;
    uint32_t pfirst = (uint32_t)ps_reg_exec(x, dp->p_next, src->p, zs_act_alloc, &res);
    uint32_t cfirst = (uint32_t)ps_reg_exec(x, dp->t_cnext, t, zs_act_alloc, &res);
    struct a_ev pe = {.ev = EV_READ_ISSUE, .first = pfirst};
    ps_reg_exec(x, dp->p_exp, src->p, zs_act_pexp, &pe);
    struct a_ev ae = {.ev = EV_READ_ISSUE, .state = X_DATA, .exp = cfirst + np - 1};
    ps_reg_exec(x, dp->t_ack, t, zs_act_tack, &ae);
    ps_reg_write(x, dp->t_xfer, t, (uint64_t)src->p | (uint64_t)n << 16);
    ps_reg_write(x, dp->t_ptrs, t,
                 (uint64_t)((chead + n) & ZS_PTR_MASK) | (uint64_t)((b.ptail + n) & ZS_PTR_MASK)
                                                             << 32);
    ps_reg_write(x, dp->t_cva, t, ZS_HDR_BYTES + (uint64_t)(chead % th->capacity) * th->item_bytes);
    ps_reg_write(x, dp->t_off, t, PSN(cfirst - pfirst));
    ps_reg_write(x, dp->t_psn, t, PSN(pfirst + np));
    set_phase(dp, x, t, ZS_PH_READ);
    dp->st.transfers++;
    dp->st.items += n;
    dp->st.bytes += bytes;
    emit_read(dp, x, p, &src->ep, false, pfirst,
              src->ep.base + ZS_HDR_BYTES + (uint64_t)(b.ptail % src->ep.capacity) * item,
              (uint32_t)bytes);
}

/* ---------------------------------------------------------------- step 2: READ responses */

static bool resp_last(uint8_t op)
{
    return op == IB_OPCODE_RC_RDMA_READ_RESPONSE_LAST || op == IB_OPCODE_RC_RDMA_READ_RESPONSE_ONLY;
}
static bool resp_first(uint8_t op)
{
    return op == IB_OPCODE_RC_RDMA_READ_RESPONSE_FIRST ||
           op == IB_OPCODE_RC_RDMA_READ_RESPONSE_ONLY;
}

/* The thread transferring from producer p: fixed, or (load balancing) the
 * lock holder.  ZS_NO_THREAD if none. */
static uint32_t owner_of(struct zs_dp *dp, struct ps_pass *x, const struct zs_conn_ent *ce)
{
    if (!locks(dp))
        return ce->t;
    struct a_lock lk = {.op = LK_READ};
    uint64_t me = ps_reg_exec(x, dp->p_lock, ce->idx, zs_act_lock, &lk);
    return me ? (uint32_t)me - 1 : ZS_NO_THREAD;
}

static void data_resp(struct zs_dp *dp, struct ps_pass *x, struct pkt *p,
                      const struct zs_conn_ent *ce)
{
    int wop = ps_roce_resp_to_write(p->opcode);
    if (wop < 0) { /* an ACK or NAK on a producer data QP: the tail WRITE's */
        dp->st.stray++;
        ps_drop(x);
        return;
    }
    uint32_t t = owner_of(dp, x, ce);
    const struct zs_thr_ent *th = NULL;
    if (dp->mode == ZS_REPLICATE)
        th = ps_table_apply(x, dp->thr, t);
    if (t == ZS_NO_THREAD || (dp->mode == ZS_REPLICATE && !th)) {
        dp->st.stray++;
        ps_drop(x);
        return;
    }
    struct a_ev ev = {.ev = EV_RESP, .psn = p->psn, .last = resp_last(p->opcode)};
    uint64_t v = ps_reg_exec(x, dp->p_exp, ce->idx, zs_act_pexp, &ev);
    if (v == V_DROP) {
        dp->st.resp_dups++;
        ps_drop(x);
        return;
    }
    if (v == V_GAP) { /* a response was lost: the READ again */
        dp->st.resp_gaps++;
        struct zs_br nb = {
            .type = ZS_BR_REISSUE, .phase = ZS_PH_READ, .t = (uint16_t)t, .p = ce->idx};
        recirc_as(x, p, &nb);
        return;
    }
    uint64_t xfer = ps_reg_read(x, dp->t_xfer, t);
    uint64_t cva = ps_reg_read(x, dp->t_cva, t);
    if (resp_last(p->opcode) && dp->mode != ZS_REPLICATE) {
        c_reads_add(dp, x, t % dp->nc, -1);
        n_reads_add(dp, ce->pu_node, -1);
    }
    uint32_t off = (uint32_t)ps_reg_read(x, dp->t_off, t);
    struct a_phase pa = {.op = PH_PROGRESS, .phase = ZS_PH_READ, .now = now_ns(x)};
    ps_reg_exec(x, dp->t_phase, t, zs_act_phase, &pa);
    uint32_t n = (uint32_t)(xfer >> 16);
    bool first = resp_first(p->opcode), last = resp_last(p->opcode);
    clear_bth_flags(p);
    ps_roce_set_opcode(p, (uint8_t)wop); /* AETH out; RETH in on FIRST / ONLY */
    p->ack_req = last;
    uint32_t psn = PSN(p->psn + off);
    if (dp->mode == ZS_REPLICATE) {
        /* one copy per consumer: the egress writes each one's address */
        if (first) {
            p->reth_va = cva; /* ring offset; + the consumer's base in egress */
            p->reth_dma_len = n * th->item_bytes;
        }
        p->psn = psn;
        struct zs_br b = {.type = ZS_BR_SCAN, .t = (uint16_t)t};
        memcpy(ps_pass_meta(x)->bridge, &b, sizeof(b));
        p->src_node = dp->sw_node;
        ps_mcast(x, th->group);
        return;
    }
    const struct zs_ep_ent *c = ps_table_apply(x, dp->cons, t);
    if (!c) {
        ps_drop(x);
        return;
    }
    if (first) {
        p->reth_va = cva;
        p->reth_rkey = c->rkey;
        p->reth_dma_len = n * c->item_bytes;
    }
    ps_roce_address(dp->ps, p, c->node, c->pu_data_qpn, c->sw_data_qpn, psn);
    bool held = (xfer >> 56) & 1, cheld = (xfer >> 55) & 1;
    if (last && (held || cheld)) {
        /* The READ's last response, in order (p_exp's verdict above): its
         * uplink slot and the consumer's stream slot are free now.  Both
         * arrays sit in stage 5, before p_exp (stage 8), so this pass
         * cannot release them after the verdict: the thread's pointer
         * group sends the WRITE to the consumer and a copy (truncated in
         * egress) around for a SLOTREL pass.  A lost copy (recirculation
         * buffer full) only delays the release to the transfer's RELEASE
         * pass, which gives the slots back too (ZS_BRF_SLOT / CSLOT).  The
         * copy is in the recirculation FIFO ahead of every later pass of
         * this thread (they follow the consumer's ACK of this WRITE), so
         * it never clears a slot the thread has taken again. */
        struct zs_br b = {.type = ZS_BR_SLOTREL,
                          .phase = (uint8_t)((held ? ZS_BRF_SLOT : 0) | (cheld ? ZS_BRF_CSLOT : 0)),
                          .t = (uint16_t)t,
                          .j = (uint16_t)((xfer >> 48) & (ZS_SLOT_NODES - 1)),
                          .keep = ZS_K_CHEAD | ZS_K_RECIRC};
        struct ps_meta *m = ps_pass_meta(x);
        memcpy(m->bridge, &b, sizeof(b));
        m->bridge_bytes = ZS_BR_WIRE_BYTES;
        ps_mcast(x, ZS_GRP_PTR(t, zs_xfer_slot(xfer), dp->n_src));
        return;
    }
    ps_fwd(x, c->node);
}

/* A SLOTREL pass (data_resp): give back the slots the transfer held. */
static void slotrel_pass(struct zs_dp *dp, struct ps_pass *x, struct zs_br b,
                         const struct zs_thr_ent *th)
{
    dp->st.slot_releases++;
    if (b.phase & ZS_BRF_SLOT) {
        struct a_slot sl = {.release = true, .t = b.t};
        ps_reg_exec(x, dp->n_busy, b.j, zs_act_slot, &sl);
    }
    if (b.phase & ZS_BRF_CSLOT) { /* thread l * M + c: lane l */
        struct a_slot cs = {.release = true, .t = th->lane};
        ps_reg_exec(x, dp->c_busy, th->c, zs_act_slot, &cs);
    }
    ps_drop(x);
}

/* ---------------------------------------------------------------- steps 3-5: ACKs */

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

static void report(struct zs_dp *dp, struct ps_pass *x, uint32_t what, uint32_t t, uint32_t a)
{
    uint32_t d[3] = {what, t, a};
    (void)dp;
    ps_digest(x, d, sizeof(d));
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
    set_phase(dp, x, t, ZS_PH_RELEASE);
    struct a_pw pw = {.op = PW_ARM, .now = now_ns(x)};
    ps_reg_exec(x, dp->t_pw, t, zs_act_pw, &pw);
    ps_reg_exec(x, dp->p_pw, (uint32_t)xfer & 0xffff, zs_act_pw, &pw);
    const struct zs_ep_ent *c = ps_table_apply(x, dp->cons, t);
    if (!c) {
        ps_drop(x);
        return;
    }
    build_ptr_write(dp, p, c, hpsn, ZS_HEAD_OFF, (uint32_t)ptrs);
    struct zs_br nb = zs_release_br(t, xfer, (uint32_t)(ptrs >> 32));
    nb.keep = ZS_K_CHEAD | ZS_K_PTAIL | ZS_K_RECIRC;
    nb.wpsn = ppsn;
    nb.wval = (uint32_t)(ptrs >> 32);
    ptr_group(x, th, t, zs_xfer_slot(xfer), &nb);
}

/* Lanes: commit the transfer [b.ptail, b.v) into the consumer's head once
 * the transfers reserved before it are in (another lane's may be
 * slower); until then the packet recirculates. */
static void commit_pass(struct zs_dp *dp, struct ps_pass *x, struct pkt *p, struct zs_br b,
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
        recirc_as(x, p, &b);
        return;
    }
    send_ptrs(dp, x, p, t, th, UINT32_MAX);
}

/* Lanes: a lane other than 0 has finished; lane 0 ends the stream. */
static void fin_pass(struct zs_dp *dp, struct ps_pass *x, struct pkt *p, struct zs_br b,
                     const struct zs_thr_ent *th)
{
    struct a_cmt cm = {.op = CM_FIN};
    (void)p;
    ps_reg_exec(x, dp->c_cmt, th->c, zs_act_cmt, &cm);
    set_phase(dp, x, b.t, ZS_PH_DONE);
    dp->st.threads_done++;
    report(dp, x, 1, b.t, 0);
    ps_drop(x);
}

/* an ACK / NAK on a consumer data QP */
/* Congestion control (Jasny et al. 4 and 6.2: the switch propagates
 * congestion information from the consumers to the producers; the
 * producer's NIC throttles).  A consumer NIC that gets CE-marked WRITEs
 * (an ECN-marking switch queue, topology `switch.ecn`) answers, as a DCQCN
 * notification point, with a CNP to the WRITEs' requester: the switch's
 * data QP of that consumer.  The switch sends it on to the source of the
 * data, the producer whose READ responses it rewrote into those WRITEs
 * (the thread's transfer, t_xfer), addressed from the switch's QP of that
 * producer to the producer's data QP, whose responder then paces its READ
 * responses at its DCQCN rate (sim/nic/ratelimit.c, dcqcn.c).  The
 * producer's NIC reacts as to any CNP: the same DCQCN reaction point. */
static void cnp_relay(struct zs_dp *dp, struct ps_pass *x, struct pkt *p,
                      const struct zs_conn_ent *ce)
{
    uint32_t pidx = (uint32_t)ps_reg_read(x, dp->t_xfer, ce->t) & 0xffff; /* stage 9 */
    const struct zs_ep_ent *pe =
        pidx == ZS_NO_PROD ? NULL : ps_table_apply(x, dp->prod, pidx); /* stage 11 */
    if (!pe) { /* the thread has not read from any producer yet */
        dp->st.cnps_dropped++;
        ps_drop(x);
        return;
    }
    ps_roce_address(dp->ps, p, pe->node, pe->pu_data_qpn, pe->sw_data_qpn, 0);
    dp->st.cnps_relayed++;
    ps_fwd(x, pe->node);
}

static void cons_ack(struct zs_dp *dp, struct ps_pass *x, struct pkt *p,
                     const struct zs_conn_ent *ce)
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
            set_phase(dp, x, t, ZS_PH_CHEAD);
            emit_mcast_head_write(dp, x, p, t, th, psn, chead_new);
            return;
        }
        if (th->lanes > 1) {
            /* another lane's earlier transfer may still be in flight: the
             * consumer's head moves in order (commit pass, stage 5) */
            uint64_t xfer = ps_reg_read(x, dp->t_xfer, t);
            uint32_t e = (uint32_t)ps_reg_read(x, dp->t_ptrs, t);
            set_phase(dp, x, t, ZS_PH_COMMIT);
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
            recirc_as(x, p, &nb);
            return;
        }
        send_ptrs(dp, x, p, t, th, psn);
        return;
    }
    case V_ISSUE_PTAIL: {
        uint32_t pidx = (uint32_t)ps_reg_read(x, dp->t_xfer, t) & 0xffff;
        uint32_t ptail_new = (uint32_t)(ps_reg_read(x, dp->t_ptrs, t) >> 32);
        uint32_t psn = (uint32_t)ps_reg_read(x, dp->t_psn, t);
        set_phase(dp, x, t, ZS_PH_PTAIL);
        const struct zs_ep_ent *pe = ps_table_apply(x, dp->prod, pidx);
        if (!pe) {
            ps_drop(x);
            return;
        }
        emit_ptr_write(dp, x, p, pe, psn, ZS_TAIL_OFF, ptail_new);
        return;
    }
    case V_REISSUE: {
        uint32_t pidx = (uint32_t)ps_reg_read(x, dp->t_xfer, t) & 0xffff;
        struct zs_br nb = {.type = ZS_BR_REISSUE,
                           .phase = (uint8_t)(v >> 8),
                           .t = (uint16_t)t,
                           .p = (uint16_t)pidx};
        recirc_as(x, p, &nb);
        return;
    }
    case V_THREAD_DONE:
        set_phase(dp, x, t, ZS_PH_DONE);
        dp->st.threads_done++;
        report(dp, x, 1, t, 0);
        ps_drop(x);
        return;
    case V_FATAL:
        dp->st.fatal_naks++;
        report(dp, x, 2, t, p->aeth_syndrome);
        ps_drop(x);
        return;
    default:
        ps_drop(x);
        return;
    }
}

/* an ACK / NAK on a producer data QP (the tail WRITE's) */
static void prod_ack(struct zs_dp *dp, struct ps_pass *x, struct pkt *p,
                     const struct zs_conn_ent *ce)
{
    uint32_t t = owner_of(dp, x, ce), ev_kind = ack_event(p);
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
        set_phase(dp, x, t, ZS_PH_RELEASE);
        struct zs_br nb = zs_release_br(t, xfer, ptail_new);
        nb.p = ce->idx;
        recirc_as(x, p, &nb); /* step 5: the ACK becomes the thread's packet */
        return;
    }
    case V_REISSUE: {
        struct zs_br nb = {
            .type = ZS_BR_REISSUE, .phase = (uint8_t)(v >> 8), .t = (uint16_t)t, .p = ce->idx};
        recirc_as(x, p, &nb);
        return;
    }
    case V_FATAL:
        dp->st.fatal_naks++;
        report(dp, x, 2, t, p->aeth_syndrome);
        ps_drop(x);
        return;
    default:
        ps_drop(x);
        return;
    }
}

/* ---------------------------------------------------------------- mirrors: polls and doorbells */

static void ctl_rx(struct zs_dp *dp, struct ps_pass *x, struct pkt *p, const struct zs_conn_ent *ce)
{
    bool prod = ce->kind == ZS_C_PCTL;
    struct ps_reg *mirror = prod ? dp->p_head : dp->c_tail;
    if (p->opcode == IB_OPCODE_RC_RDMA_READ_RESPONSE_ONLY) { /* a poll's answer */
        struct a_poll a = {.issue = false, .psn = p->psn};
        uint64_t ok = ps_reg_exec(x, prod ? dp->p_ctl : dp->c_ctl, ce->idx, zs_act_poll, &a);
        if (ok && p->payload_len == 4) {
            dp->st.polls_rx++;
            ps_reg_write(x, mirror, ce->idx, zs_load_le32(p->payload));
        }
        ps_drop(x);
        return;
    }
    if (p->opcode == IB_OPCODE_RC_RDMA_WRITE_ONLY && p->payload_len == 4) { /* a doorbell */
        uint32_t psn = p->psn;
        uint64_t r = ps_reg_exec(x, prod ? dp->p_db : dp->c_db, ce->idx, zs_act_db, &psn);
        uint32_t verdict = (uint32_t)(r & 0xff), apsn = (uint32_t)(r >> 8);
        dp->st.doorbells_rx++;
        if (verdict == DB_OK)
            ps_reg_write(x, mirror, ce->idx, zs_load_le32(p->payload));
        if (verdict == DB_QUIET) {
            ps_drop(x);
            return;
        }
        if (verdict == DB_NAK)
            dp->st.doorbell_naks++;
        /* the switch is this QP's responder: the WRITE becomes its ACK */
        clear_bth_flags(p);
        p->payload_len = 0;
        ps_roce_set_opcode(p, IB_OPCODE_RC_ACKNOWLEDGE);
        p->aeth_syndrome = verdict == DB_NAK ? NIC_AETH_NAK_PSN_SEQ : NIC_AETH_ACK;
        p->aeth_msn = apsn;
        ps_roce_address(dp->ps, p, ce->pu_node, ce->pu_qpn, p->dest_qpn, apsn);
        ps_fwd(x, ce->pu_node);
        return;
    }
    dp->st.stray++;
    ps_drop(x);
}

/* A poll batch packet for endpoint e: READ 4 bytes of the pointer the PU
 * owns, unless the last poll of it is still unanswered. */
static void poll_gen(struct zs_dp *dp, struct ps_pass *x, struct pkt *p, uint32_t e)
{
    const struct zs_ep_ent *ep = ps_table_apply(x, dp->ep, e);
    if (!ep) {
        ps_drop(x);
        return;
    }
    struct a_poll a = {.issue = true, .now = now_ns(x), .rto = dp->poll_rto_ns};
    uint64_t psn = ps_reg_exec(x, ep->producer ? dp->p_ctl : dp->c_ctl, ep->idx, zs_act_poll, &a);
    if (psn == UINT64_MAX) {
        ps_drop(x);
        return;
    }
    dp->st.polls_tx++;
    emit_read(dp, x, p, ep, true, (uint32_t)psn,
              ep->base + (ep->producer ? ZS_HEAD_OFF : ZS_TAIL_OFF), 4);
}

/* ---------------------------------------------------------------- timeouts and re-issue */

/* A timer batch packet for thread t: if its phase made no progress for
 * rto, it becomes the packet that does the phase's work again. */
static void tick(struct zs_dp *dp, struct ps_pass *x, struct pkt *p, uint32_t i)
{
    /* timer packet i: thread i's phase and head WRITE, producer i's tail
     * WRITE (the batch has max(threads, producers) packets) */
    const struct zs_thr_ent *th = ps_table_apply(x, dp->thr, i);
    struct zs_br nb = {.t = 0};
    uint64_t now = now_ns(x);
    if (th) {
        uint32_t t = i;
        uint64_t xfer = ps_reg_read(x, dp->t_xfer, t);
        uint64_t ptrs = ps_reg_read(x, dp->t_ptrs, t);
        struct a_phase a = {.op = PH_CHECK, .now = now, .rto = dp->rto_ns};
        uint32_t r = (uint32_t)ps_reg_exec(x, dp->t_phase, t, zs_act_phase, &a);
        nb = (struct zs_br){.t = (uint16_t)t, .p = (uint16_t)(xfer & 0xffff)};
        if (r & 0x100u) {
            uint32_t ph = r & 0xff;
            switch (ph) {
            case ZS_PH_IDLE: /* the thread's packet was lost (recirculation drop) */
                dp->st.token_restarts++;
                nb.type = ZS_BR_TOKEN;
                break;
            case ZS_PH_COMMIT: /* the commit pass's packet was lost */
                dp->st.token_restarts++;
                nb.type = ZS_BR_COMMIT;
                nb.v = (uint32_t)ptrs;
                nb.ptail = ((uint32_t)ptrs - (uint32_t)(xfer >> 16)) & ZS_PTR_MASK;
                break;
            case ZS_PH_RELEASE:
                dp->st.token_restarts++;
                nb = zs_release_br(t, xfer, (uint32_t)(ptrs >> 32));
                nb.wpsn = (uint32_t)ps_reg_read(x, dp->t_psn, t);
                break;
            default:
                dp->st.timeouts++;
                nb.type = ZS_BR_REISSUE;
                nb.phase = (uint8_t)ph;
                break;
            }
            recirc_as(x, p, &nb);
            return;
        }
        struct a_pw pw = {.op = PW_CHECK, .now = now, .rto = dp->rto_ns};
        if (ps_reg_exec(x, dp->t_pw, t, zs_act_pw, &pw)) {
            nb.type = ZS_BR_REISSUE;
            nb.phase = ZS_RE_PTRS;
            recirc_as(x, p, &nb);
            return;
        }
    }
    if (i < dp->np) {
        struct a_pw pw = {.op = PW_CHECK, .now = now, .rto = dp->rto_ns};
        if (ps_reg_exec(x, dp->p_pw, i, zs_act_pw, &pw)) {
            nb = (struct zs_br){
                .type = ZS_BR_REISSUE, .phase = ZS_RE_PPTR, .t = 0, .p = (uint16_t)i};
            recirc_as(x, p, &nb);
            return;
        }
    }
    ps_drop(x);
}

/* Pointer WRITEs whose timer expired (pairs, shuffle, lb): the consumer's
 * head WRITE if it is the last operation out on its QP (ZS_RE_PTRS, thread
 * b.t), or producer b.p's tail WRITE if it is out unacknowledged
 * (ZS_RE_PPTR); the timer stays armed while it is.  (A pointer WRITE with
 * a READ behind it is the READ's re-issue's business.) */
static void reissue_ptrs(struct zs_dp *dp, struct ps_pass *x, struct pkt *p, struct zs_br b,
                         const struct zs_thr_ent *th)
{
    struct a_ev ev = {.ev = EV_REISSUE_PTRS};
    struct a_pw arm = {.op = PW_REARM, .now = now_ns(x)};
    if (b.phase == ZS_RE_PTRS) {
        uint32_t t = b.t;
        /* lanes: the committed head (another lane may have moved it on
         * since; it never goes back) */
        uint64_t cmt = th->lanes > 1 ? ps_reg_read(x, dp->c_cmt, th->c) : 0;
        uint64_t cw = ps_reg_exec(x, dp->c_exp, t, zs_act_cexp, &ev);
        uint32_t chead = (uint32_t)ps_reg_read(x, dp->t_ptrs, t);
        if (th->lanes > 1)
            chead = (uint32_t)cmt;
        /* only if the timer is still armed: a data ACK may have come
         * between the timer's pass and this one (lanes: disarmed until the
         * commit sends the WRITE at that PSN) */
        arm.op = cw & 1 ? PW_RESEND : PW_DISARM;
        if (!ps_reg_exec(x, dp->t_pw, t, zs_act_pw, &arm))
            cw = 0;
        const struct zs_ep_ent *ep = cw & 1 ? ps_table_apply(x, dp->cons, t) : NULL;
        if (!ep) {
            ps_drop(x);
            return;
        }
        dp->st.timeouts++;
        dp->st.reissues_ptr++;
        emit_ptr_write(dp, x, p, ep, (uint32_t)(cw >> 8), ZS_HEAD_OFF, chead);
        return;
    }
    struct a_tail rd = {.write = false};
    uint32_t ptail = (uint32_t)ps_reg_exec(x, dp->p_tail, b.p, zs_act_tail, &rd);
    uint64_t pw = ps_reg_exec(x, dp->p_exp, b.p, zs_act_pexp, &ev);
    /* Not PTAIL: the timer fired on an older tail WRITE, since ACKed.  It
     * is disarmed -- unless the data are in (AWAIT): then the transfer's
     * own tail WRITE may have armed it in a pass between the timer's and
     * this one and be on its way to egress, where it becomes PTAIL.
     * Disarming then left that WRITE uncovered: lost, it was never sent
     * again and the producer, its ring full as it saw it, waited forever
     * (tools/zs_seeds.py: shuffle at loss 1e-2, seed 40, hung). */
    arm.op = pw & 3 ? PW_REARM : PW_DISARM;
    ps_reg_exec(x, dp->p_pw, b.p, zs_act_pw, &arm);
    const struct zs_ep_ent *ep = pw & 1 ? ps_table_apply(x, dp->prod, b.p) : NULL;
    if (!ep) {
        ps_drop(x);
        return;
    }
    dp->st.timeouts++;
    dp->st.reissues_ptr++;
    emit_ptr_write(dp, x, p, ep, (uint32_t)(pw >> 8), ZS_TAIL_OFF, ptail);
}

static void reissue(struct zs_dp *dp, struct ps_pass *x, struct pkt *p, struct zs_br b,
                    const struct zs_thr_ent *th)
{
    uint32_t t = b.t;
    bool repl = dp->mode == ZS_REPLICATE;
    struct a_ev ev = {.ev = EV_REISSUE_READ};
    switch (b.phase) {
    case ZS_RE_PTRS:
    case ZS_RE_PPTR:
        reissue_ptrs(dp, x, p, b, th);
        return;
    case ZS_PH_READ:
        if (b.i == 0) {
            /* pass A: only while the consumer side still waits for the data
             * (a reissue must not undo a transfer that went on meanwhile) */
            uint64_t cmt = !repl && th->lanes > 1 ? ps_reg_read(x, dp->c_cmt, th->c) : 0;
            uint64_t c = repl ? ps_reg_exec(x, dp->t_ack, t, zs_act_tack, &ev)
                              : ps_reg_exec(x, dp->c_exp, t, zs_act_cexp, &ev);
            uint32_t st = repl ? (uint32_t)(c >> 56) : exp_state(c);
            if (st != X_DATA) {
                ps_drop(x);
                return;
            }
            b.i = 1;
            if (!repl && exp_pend(c)) {
                /* the head WRITE before the data first, with its PSN and the
                 * head before this transfer */
                uint64_t xfer = ps_reg_read(x, dp->t_xfer, t);
                uint32_t head = ((uint32_t)ps_reg_read(x, dp->t_ptrs, t) - (uint32_t)(xfer >> 16)) &
                                ZS_PTR_MASK;
                if (th->lanes > 1)
                    head = (uint32_t)cmt;
                const struct zs_ep_ent *c_ep = ps_table_apply(x, dp->cons, t);
                if (!c_ep) {
                    ps_drop(x);
                    return;
                }
                dp->st.reissues_ptr++;
                dp->st.ptr_ahead++;
                build_ptr_write(dp, p, c_ep, exp_first(c) - 1, ZS_HEAD_OFF, head);
                b.keep = ZS_K_CHEAD | ZS_K_RECIRC;
                ptr_group(x, th, t, zs_xfer_slot(xfer), &b);
                return;
            }
            recirc_as(x, p, &b);
            return;
        }
        {
            /* pass B (and C after a re-sent tail WRITE): the READ again */
            struct a_tail rd = {.write = false};
            uint32_t ptail = (uint32_t)ps_reg_exec(x, dp->p_tail, b.p, zs_act_tail, &rd);
            uint64_t r = ps_reg_exec(x, dp->p_exp, b.p, zs_act_pexp, &ev);
            uint32_t first = (uint32_t)r & NIC_PSN_MASK;
            uint64_t xfer = ps_reg_read(x, dp->t_xfer, t);
            uint32_t n = (uint32_t)(xfer >> 16);
            set_phase(dp, x, t, ZS_PH_READ);
            if (!repl && (r >> 32) && b.i == 1) {
                /* the producer's tail WRITE before the READ first */
                dp->st.reissues_ptr++;
                dp->st.ptr_ahead++;
                struct a_pw arm = {.op = PW_ARM, .now = now_ns(x)};
                ps_reg_exec(x, dp->p_pw, b.p, zs_act_pw, &arm);
                b.i = 2;
                b.keep = ZS_K_PTAIL | ZS_K_RECIRC;
                b.wpsn = PSN(first - 1);
                b.wval = ptail;
                ptr_group(x, th, t, zs_xfer_slot(xfer), &b);
                return;
            }
            const struct zs_ep_ent *pe = ps_table_apply(x, dp->prod, b.p);
            if (!pe || n == 0) {
                ps_drop(x);
                return;
            }
            dp->st.reissues_read++;
            emit_read(dp, x, p, pe, false, first,
                      pe->base + ZS_HDR_BYTES + (uint64_t)(ptail % pe->capacity) * pe->item_bytes,
                      n * pe->item_bytes);
            return;
        }
    case ZS_PH_CHEAD:
    case ZS_PH_FINAL: {
        uint32_t value = 0;
        uint64_t cmt = !repl && th->lanes > 1 ? ps_reg_read(x, dp->c_cmt, th->c) : 0;
        if (b.phase == ZS_PH_FINAL) {
            struct a_tail rd = {.write = false};
            value = (uint32_t)(repl ? ps_reg_read(x, dp->t_chead, t)
                                    : ps_reg_exec(x, dp->c_head, th->c, zs_act_tail, &rd)) |
                    ZS_DONE_BIT;
        }
        uint64_t c = repl ? ps_reg_read(x, dp->t_ack, t) : ps_reg_read(x, dp->c_exp, t);
        uint32_t st = repl ? (uint32_t)(c >> 56) : exp_state(c);
        uint32_t psn = repl ? (uint32_t)(c >> 32) & NIC_PSN_MASK : exp_psn(c);
        uint64_t xfer = ps_reg_read(x, dp->t_xfer, t);
        if (b.phase == ZS_PH_CHEAD)
            value = (uint32_t)ps_reg_read(x, dp->t_ptrs, t);
        if (b.phase == ZS_PH_CHEAD && th->lanes > 1)
            value = (uint32_t)cmt; /* what is committed now, end flag included */
        uint32_t want = b.phase == ZS_PH_FINAL ? X_FINAL : repl ? X_CHEAD : X_PTR;
        if (st != want) {
            ps_drop(x); /* acknowledged meanwhile */
            return;
        }
        dp->st.reissues_ptr++;
        if (repl) {
            set_phase(dp, x, t, b.phase);
            emit_mcast_head_write(dp, x, p, t, th, psn, value);
            return;
        }
        if (b.phase == ZS_PH_CHEAD) { /* the thread has gone on: only the timer */
            struct a_pw arm = {.op = PW_REARM, .now = now_ns(x)};
            ps_reg_exec(x, dp->t_pw, t, zs_act_pw, &arm);
        } else {
            set_phase(dp, x, t, b.phase);
        }
        const struct zs_ep_ent *c_ep = ps_table_apply(x, dp->cons, t);
        if (!c_ep) {
            ps_drop(x);
            return;
        }
        if (b.phase == ZS_PH_FINAL && exp_pend(c) && b.i == 0) {
            /* the head WRITE before it first (go-back-N) */
            dp->st.ptr_ahead++;
            build_ptr_write(dp, p, c_ep, exp_first(c) - 1, ZS_HEAD_OFF, value & ZS_PTR_MASK);
            b.i = 2;
            b.keep = ZS_K_CHEAD | ZS_K_RECIRC;
            ptr_group(x, th, t, zs_xfer_slot(xfer), &b);
            return;
        }
        emit_ptr_write(dp, x, p, c_ep, psn, ZS_HEAD_OFF, value);
        return;
    }
    case ZS_PH_PTAIL: {
        /* replicate: the transfer's new tail; otherwise the committed one
         * (the thread may have gone on), and only once it was sent */
        struct a_tail rd = {.write = false};
        uint32_t committed = (uint32_t)ps_reg_exec(x, dp->p_tail, b.p, zs_act_tail, &rd);
        uint64_t c = ps_reg_read(x, dp->p_exp, b.p);
        uint32_t ptail_new = repl ? (uint32_t)(ps_reg_read(x, dp->t_ptrs, t) >> 32) : committed;
        uint32_t psn = exp_psn(c);
        if (repl ? exp_state(c) == X_IDLE : exp_state(c) != X_PTAIL) {
            ps_drop(x);
            return;
        }
        if (repl) {
            psn = (uint32_t)ps_reg_read(x, dp->t_psn, t); /* the tail WRITE's, in any state */
            set_phase(dp, x, t, ZS_PH_PTAIL);
        } else {
            struct a_pw arm = {.op = PW_ARM, .now = now_ns(x)};
            ps_reg_exec(x, dp->p_pw, b.p, zs_act_pw, &arm);
        }
        const struct zs_ep_ent *pe = ps_table_apply(x, dp->prod, b.p);
        if (!pe) {
            ps_drop(x);
            return;
        }
        dp->st.reissues_ptr++;
        emit_ptr_write(dp, x, p, pe, psn, ZS_TAIL_OFF, ptail_new);
        return;
    }
    default:
        ps_drop(x);
        return;
    }
}

/* ---------------------------------------------------------------- the pipelines */

static void zs_ingress(struct ps_pass *x, struct pkt *p, void *prog)
{
    struct zs_dp *dp = prog;
    struct ps_meta *m = ps_pass_meta(x);
    if (m->ingress_port == PS_PORT_PKTGEN) {
        if (m->pktgen_app == ZS_APP_POLL) {
            poll_gen(dp, x, p, m->pktgen_pkt);
            return;
        }
        if (m->pktgen_app == ZS_APP_TICK) {
            tick(dp, x, p, m->pktgen_pkt);
            return;
        }
        /* ZS_APP_START: thread pktgen_pkt's first packet */
        struct zs_br b = {.type = ZS_BR_TOKEN, .t = (uint16_t)m->pktgen_pkt};
        memcpy(m->bridge, &b, sizeof(b));
        m->bridge_bytes = ZS_BR_WIRE_BYTES;
    }
    if (m->ingress_port == PS_PORT_PKTGEN || m->ingress_port == PS_PORT_RECIRC ||
        m->ingress_port == PS_PORT_CPU) {
        struct zs_br b;
        memcpy(&b, m->bridge, sizeof(b));
        const struct zs_thr_ent *th = ps_table_apply(x, dp->thr, b.t);
        if (!th) {
            ps_drop(x);
            return;
        }
        switch (b.type) {
        case ZS_BR_TOKEN:
        case ZS_BR_RELEASE:
        case ZS_BR_SCAN:
            if (dp->mode == ZS_REPLICATE)
                scan_pass(dp, x, p, b, th);
            else
                token_pass(dp, x, p, b, th);
            return;
        case ZS_BR_REISSUE:
            reissue(dp, x, p, b, th);
            return;
        case ZS_BR_COMMIT:
            commit_pass(dp, x, p, b, th);
            return;
        case ZS_BR_FIN:
            fin_pass(dp, x, p, b, th);
            return;
        case ZS_BR_SLOTREL:
            slotrel_pass(dp, x, b, th);
            return;
        default:
            ps_drop(x);
            return;
        }
    }
    if (p->dst_node != dp->sw_node) { /* ordinary traffic between hosts */
        ps_fwd(x, p->dst_node);
        return;
    }
    const struct zs_conn_ent *ce = ps_table_apply(x, dp->conn, p->dest_qpn);
    if (!ce) {
        dp->st.stray++;
        ps_drop(x);
        return;
    }
    switch (ce->kind) {
    case ZS_C_PDATA:
        if (p->opcode == IB_OPCODE_RC_ACKNOWLEDGE)
            prod_ack(dp, x, p, ce);
        else
            data_resp(dp, x, p, ce);
        return;
    case ZS_C_CDATA:
        if (p->opcode == PS_ROCE_OPCODE_CNP)
            cnp_relay(dp, x, p, ce);
        else
            cons_ack(dp, x, p, ce);
        return;
    default:
        ctl_rx(dp, x, p, ce);
        return;
    }
}

/* A copy made for a pointer group: keep it or not; the producer's becomes
 * its tail WRITE, the recirculating one a switch-thread packet. */
static void ptr_copy(struct zs_dp *dp, struct ps_pass *x, struct pkt *p, const struct zs_br *b,
                     uint32_t rid)
{
    uint32_t k = rid == ZS_RID_CHEAD ? ZS_K_CHEAD : rid == ZS_RID_PTAIL ? ZS_K_PTAIL : ZS_K_RECIRC;
    if (!(b->keep & k)) {
        ps_drop(x);
        return;
    }
    if (rid == ZS_RID_PTAIL) {
        const struct zs_ep_ent *pe = ps_table_apply(x, dp->eprod, b->p);
        if (!pe) {
            ps_drop(x);
            return;
        }
        build_ptr_write(dp, p, pe, b->wpsn, ZS_TAIL_OFF, b->wval);
    } else if (rid == ZS_RID_RECIRC) {
        p->payload_len = 0;
        p->frame_bytes = 64;
    }
}

/* Replicas (rid = consumer index + 1): each copy gets its consumer's QP,
 * address and key.  Pointer groups: ptr_copy. */
static void zs_egress(struct ps_pass *x, struct pkt *p, void *prog)
{
    struct zs_dp *dp = prog;
    struct ps_meta *m = ps_pass_meta(x);
    if (m->rid == 0)
        return;
    const struct zs_br *b = (const struct zs_br *)(const void *)m->bridge;
    if (m->rid >= ZS_RID_CHEAD) {
        ptr_copy(dp, x, p, b, m->rid);
        return;
    }
    const struct zs_ep_ent *c = ps_table_apply(x, dp->mcc, (uint64_t)b->t << 16 | (m->rid - 1));
    if (!c) {
        ps_drop(x);
        return;
    }
    ps_roce_address(dp->ps, p, c->node, c->pu_data_qpn, c->sw_data_qpn, p->psn);
    if (p->ext_hdrs & PKT_EXT_RETH) {
        p->reth_va += c->base;
        p->reth_rkey = c->rkey;
    }
}

static const struct ps_dataplane zs_dataplane = {"zerosided", zs_ingress, zs_egress};

/* ---------------------------------------------------------------- declarations */

#define REG(field, name, stage, n, bits)                                                           \
    do {                                                                                           \
        if (!(dp->field = ps_reg_declare(ps, name, PS_INGRESS, stage, n, bits)))                   \
            return -1;                                                                             \
    } while (0)
#define TBL(field, name, g, stage, n, type)                                                        \
    do {                                                                                           \
        if (!(dp->field = ps_table_declare(ps, name, g, stage, n, sizeof(type))))                  \
            return -1;                                                                             \
    } while (0)

int zs_dp_install(struct zs_dp *dp)
{
    struct pswitch *ps = dp->ps;
    uint32_t np = dp->np ? dp->np : 1, nc = dp->nc ? dp->nc : 1, nt = dp->nt ? dp->nt : 1;
    uint32_t ne = np + nc;
    uint32_t ncq = nt > nc ? nt : nc; /* consumer data QPs: one per thread (lanes) */
    TBL(conn, "conn", PS_INGRESS, 0, 2 * ne + ncq - nc, struct zs_conn_ent);
    TBL(ep, "ep", PS_INGRESS, 0, ne, struct zs_ep_ent);
    TBL(thr, "thr", PS_INGRESS, 1, nt, struct zs_thr_ent);
    REG(p_ctl, "p_ctl", 1, np, 64);
    REG(c_ctl, "c_ctl", 1, nc, 64);
    REG(p_db, "p_db", 1, np, 32);
    REG(c_db, "c_db", 1, nc, 32);
    REG(t_rr, "t_rr", 2, nt, 16);
    REG(t_flags, "t_flags", 2, nt, 8);
    TBL(src, "src", PS_INGRESS, 3, nt * np, struct zs_src_ent);
    TBL(mc, "mc", PS_INGRESS, 3, nt * nc, uint16_t);
    REG(p_head, "p_head", 4, np, 32);
    REG(p_tail, "p_tail", 4, np, 32);
    REG(c_tail, "c_tail", 4, nc, 32);
    REG(p_lock, "p_lock", 5, np, 16);
    REG(n_busy, "n_busy", 5, ZS_SLOT_NODES, 64);
    if (dp->lanes > 1)
        REG(c_cmt, "c_cmt", 5, nc, 40);
    if (dp->stream)
        REG(c_busy, "c_busy", 5, nc, ZS_MAX_LANES);
    REG(c_head, "c_head", 6, nc, 32);
    REG(t_done, "t_done", 6, nt, 64);
    REG(t_chead, "t_chead", 6, nt, 32);
    REG(p_next, "p_next", 7, np, 24);
    REG(c_next, "c_next", 7, ncq, 24);
    REG(t_cnext, "t_cnext", 7, nt, 24);
    REG(p_exp, "p_exp", 8, np, 57);
    REG(c_exp, "c_exp", 8, ncq, 57);
    REG(t_ack, "t_ack", 8, nt, 64);
    REG(t_xfer, "t_xfer", 9, nt, 64);
    REG(t_ptrs, "t_ptrs", 9, nt, 64);
    REG(t_cva, "t_cva", 9, nt, 64);
    REG(t_off, "t_off", 9, nt, 24);
    REG(t_psn, "t_psn", 10, nt, 24);
    REG(t_phase, "t_phase", 10, nt, 64);
    REG(t_pw, "t_pw", 10, nt, 64);
    REG(p_pw, "p_pw", 10, np, 64);
    TBL(cons, "cons", PS_INGRESS, 11, nt, struct zs_ep_ent);
    TBL(prod, "prod", PS_INGRESS, 11, np, struct zs_ep_ent);
    TBL(mcc, "mcc", PS_EGRESS, 0, nt * nc, struct zs_ep_ent);
    TBL(eprod, "eprod", PS_EGRESS, 0, np, struct zs_ep_ent);
    return ps_load(ps, &zs_dataplane, dp);
}
