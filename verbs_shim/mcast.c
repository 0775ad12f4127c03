/* ibv_attach_mcast / ibv_detach_mcast: a UD QP joins or leaves a multicast
 * group named by its GID (sim/nic/mcast.c).  rdma-core's errno rules: a QP
 * that is not UD or a GID that is not a multicast one -> EINVAL. */
#include <errno.h>

#include "shim.h"

int ibv_attach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid)
{
    (void)lid; /* RoCE: the GID names the group */
    shim_charge_control();
    int64_t group = nic_mcast_group_of_gid(gid);
    if (!qp || group < 0 || qp->qp_type != IBV_QPT_UD)
        return EINVAL;
    return nic_mcast_attach(shim_qp(qp)->nqp, (uint32_t)group);
}

int ibv_detach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid)
{
    (void)lid;
    shim_charge_control();
    int64_t group = nic_mcast_group_of_gid(gid);
    if (!qp || group < 0 || qp->qp_type != IBV_QPT_UD)
        return EINVAL;
    return nic_mcast_detach(shim_qp(qp)->nqp, (uint32_t)group);
}
