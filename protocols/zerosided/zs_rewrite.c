/* Step 2: every RDMA READ RESPONSE from a producer becomes an RDMA WRITE
 * to the consumer (opcode, AETH out, RETH in on FIRST / ONLY, PSN + the
 * transfer's offset, address and key; the payload untouched, nothing
 * buffered), or a multicast to the group's consumers (replication).  The
 * producer data QP's expectation (p_exp) checks the PSN order: a gap
 * re-issues the READ, a duplicate is dropped.  After the READ's last
 * response the uplink slot and the consumer's stream slot come free
 * (a SLOTREL pass). */
#include <string.h>

#include "protocols/zerosided/zs_dp_int.h"

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
uint32_t zs_owner_of(struct zs_dp *dp, struct ps_pass *x, const struct zs_conn_ent *ce)
{
    if (!zs_locks(dp))
        return ce->t;
    struct a_lock lk = {.op = LK_READ};
    uint64_t me = ps_reg_exec(x, dp->p_lock, ce->idx, zs_act_lock, &lk);
    return me ? (uint32_t)me - 1 : ZS_NO_THREAD;
}

void zs_data_resp(struct zs_dp *dp, struct ps_pass *x, struct pkt *p, const struct zs_conn_ent *ce)
{
    int wop = ps_roce_resp_to_write(p->opcode);
    if (wop < 0) { /* an ACK or NAK on a producer data QP: the tail WRITE's */
        dp->st.stray++;
        ps_drop(x);
        return;
    }
    uint32_t t = zs_owner_of(dp, x, ce);
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
        zs_recirc_as(x, p, &nb);
        return;
    }
    uint64_t xfer = ps_reg_read(x, dp->t_xfer, t);
    uint64_t cva = ps_reg_read(x, dp->t_cva, t);
    if (resp_last(p->opcode) && dp->mode != ZS_REPLICATE) {
        zs_c_reads_add(dp, x, t % dp->nc, -1);
        zs_n_reads_add(dp, ce->pu_node, -1);
    }
    uint32_t off = (uint32_t)ps_reg_read(x, dp->t_off, t);
    struct a_phase pa = {.op = PH_PROGRESS, .phase = ZS_PH_READ, .now = now_ns(x)};
    ps_reg_exec(x, dp->t_phase, t, zs_act_phase, &pa);
    uint32_t n = (uint32_t)(xfer >> 16);
    bool first = resp_first(p->opcode), last = resp_last(p->opcode);
    zs_clear_bth_flags(p);
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
void zs_slotrel_pass(struct zs_dp *dp, struct ps_pass *x, struct zs_br b,
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
