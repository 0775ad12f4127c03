/* Congestion notifications through the switch (Jasny et al. 4 and 6.2:
 * "the switch emits explicit congestion notifications whenever a link
 * becomes congested, similar to RoCEv2"; the producer's NIC throttles).
 *
 * The switch's own egress queues: the egress pass marks a data WRITE CE
 * when the queue it is about to join is deep (zs_ecn_mark; RED on the
 * enq_qdepth metadata, as a Tofino program marks from its egress
 * intrinsic metadata).  The consumer's NIC, a DCQCN notification point,
 * answers with a CNP to the WRITEs' requester, the switch, which relays it
 * to the producer (zs_cnp_relay) -- the same path as a mark made by any
 * other switch on the way to the consumer. */
#include "protocols/zerosided/zs_dp_int.h"

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
void zs_cnp_relay(struct zs_dp *dp, struct ps_pass *x, struct pkt *p, const struct zs_conn_ent *ce)
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

static bool data_write(const struct pkt *p)
{
    switch (p->opcode) {
    case IB_OPCODE_RC_RDMA_WRITE_FIRST:
    case IB_OPCODE_RC_RDMA_WRITE_MIDDLE:
    case IB_OPCODE_RC_RDMA_WRITE_LAST:
        return true;
    case IB_OPCODE_RC_RDMA_WRITE_ONLY: /* not a 4-byte pointer WRITE */
        return p->payload_len != 4;
    default:
        return false;
    }
}

/* Egress, a packet leaving for a consumer: a data WRITE of an ECN-capable
 * transport (ECT: the producer's NIC runs DCQCN) is marked CE with the RED
 * probability of the depth of the queue it joins: none up to kmin, rising
 * linearly to pmax at kmax, every one above (DCQCN's marking, Zhu et al.,
 * SIGCOMM 2015, on the instantaneous queue).  The draw is the Random
 * extern's; a Tofino program would look the probability up in a range
 * table on enq_qdepth instead of dividing. */
void zs_ecn_mark(struct zs_dp *dp, struct ps_pass *x, struct pkt *p)
{
    if (!dp->ecn_kmax_bytes || p->ecn == 0 || p->ecn == PKT_ECN_CE || !data_write(p))
        return;
    uint64_t q = ps_pass_meta(x)->enq_qdepth_bytes;
    if (q <= dp->ecn_kmin_bytes)
        return;
    if (q < dp->ecn_kmax_bytes) {
        uint64_t thr = (uint64_t)dp->ecn_pmax_ppm * (q - dp->ecn_kmin_bytes) /
                       (dp->ecn_kmax_bytes - dp->ecn_kmin_bytes);
        if (((ps_random(x) >> 32) * 1000000u >> 32) >= thr)
            return;
    }
    p->ecn = PKT_ECN_CE;
    dp->st.ecn_marked++;
}
