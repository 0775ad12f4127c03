/* The packets the zero-sided data plane builds in its pipeline: an RDMA
 * READ request to a PU, a 4-byte pointer WRITE (ingress or, for a pointer
 * group's producer copy, egress), the replicated head WRITE, a pointer
 * group multicast, a switch-thread packet sent to the recirculation port,
 * and digests to the control plane.  Every RoCE field is set here;
 * sim/pswitch/roce.c recomputes lengths and the ICRC. */
#include <string.h>

#include "protocols/zerosided/zs_dp_int.h"

void zs_recirc_as(struct ps_pass *x, struct pkt *p, const struct zs_br *b)
{
    struct ps_meta *m = ps_pass_meta(x);
    memcpy(m->bridge, b, sizeof(*b));
    m->bridge_bytes = ZS_BR_WIRE_BYTES;
    /* a switch-thread packet carries no payload */
    p->payload_len = 0;
    p->frame_bytes = 64;
    ps_recirc(x);
}

void zs_clear_bth_flags(struct pkt *p)
{
    p->se = 0;
    p->migreq = 0;
    p->ack_req = 0;
    p->ar_ctx = 0;
}

/* RDMA READ request (switch -> PU). */
void zs_emit_read(struct zs_dp *dp, struct ps_pass *x, struct pkt *p, const struct zs_ep_ent *ep,
                  bool ctl, uint32_t psn, uint64_t va, uint32_t len)
{
    zs_clear_bth_flags(p);
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
void zs_build_ptr_write(struct zs_dp *dp, struct pkt *p, const struct zs_ep_ent *ep, uint32_t psn,
                        uint32_t off, uint32_t value)
{
    zs_clear_bth_flags(p);
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

void zs_emit_ptr_write(struct zs_dp *dp, struct ps_pass *x, struct pkt *p,
                       const struct zs_ep_ent *ep, uint32_t psn, uint32_t off, uint32_t value)
{
    zs_build_ptr_write(dp, p, ep, psn, off, value);
    ps_fwd(x, ep->node);
}

/* Send this pass's packet to thread t's pointer group for source slot j,
 * keeping the copies in b.keep: the consumer's (the packet as built in
 * ingress), the producer's (a tail WRITE of b.wval at PSN b.wpsn, built in
 * egress) and the recirculating one (carrying b). */
void zs_ptr_group(struct ps_pass *x, const struct zs_thr_ent *th, uint32_t t, uint32_t j,
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
void zs_emit_mcast_head_write(struct zs_dp *dp, struct ps_pass *x, struct pkt *p, uint32_t t,
                              const struct zs_thr_ent *th, uint32_t psn, uint32_t value)
{
    struct zs_br b = {.type = ZS_BR_SCAN, .t = (uint16_t)t, .v = value};
    memcpy(ps_pass_meta(x)->bridge, &b, sizeof(b));
    uint8_t le[4];
    zs_store_le32(le, value);
    zs_clear_bth_flags(p);
    p->payload_len = 0;
    ps_roce_set_opcode(p, IB_OPCODE_RC_RDMA_WRITE_ONLY);
    ps_roce_set_inline(dp->ps, p, le, 4);
    ps_roce_address(dp->ps, p, dp->sw_node, 0, 0, psn);
    p->reth_va = ZS_HEAD_OFF; /* + each consumer's base in egress */
    p->reth_dma_len = 4;
    p->ack_req = 1;
    ps_mcast(x, th->group);
}

void zs_report(struct zs_dp *dp, struct ps_pass *x, uint32_t what, uint32_t t, uint32_t a)
{
    uint32_t d[3] = {what, t, a};
    (void)dp;
    ps_digest(x, d, sizeof(d));
}
