/* Congestion notifications through the switch (Jasny et al. 4 and 6.2:
 * the switch propagates congestion information from the consumers to the
 * producers; the producer's NIC throttles). */

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
