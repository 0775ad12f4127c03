/* The pointer mirrors: the switch's copies of each producer's head and
 * each consumer's tail, which the PUs own.  Polling mode: a packet-generator
 * batch READs 4 bytes of every endpoint's control ring each poll interval
 * (one poll outstanding per endpoint); doorbell mode: the PU WRITEs the
 * pointer to the switch, which is that QP's responder and ACKs it. */

#include "protocols/zerosided/zs_dp_int.h"

void zs_ctl_rx(struct zs_dp *dp, struct ps_pass *x, struct pkt *p, const struct zs_conn_ent *ce)
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
        zs_clear_bth_flags(p);
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
void zs_poll_gen(struct zs_dp *dp, struct ps_pass *x, struct pkt *p, uint32_t e)
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
    zs_emit_read(dp, x, p, ep, true, (uint32_t)psn,
                 ep->base + (ep->producer ? ZS_HEAD_OFF : ZS_TAIL_OFF), 4);
}
