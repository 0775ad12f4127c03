/* UD multicast (IBA 10.5 "Multicast"; ibv_attach_mcast): a UD QP attached
 * to a multicast group receives a copy of every UD packet sent to the group
 * (destination QP 0xFFFFFF, IBA 9.8.1), each consuming one of its posted
 * receives like a unicast SEND.  On RoCEv2 the group is named by an IPv4
 * multicast address in an IPv4-mapped GID (::ffff:224.0.0.0/4); the
 * sender's AH names the group, and the fabric's switches copy the packet
 * to the member nodes, which the NIC reports when it first attaches a QP
 * to a group and after its last detaches (what IGMP does on Ethernet).  A
 * sender attached to its own group gets its own packets back, as IB
 * multicast loops back. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "nic_priv.h"

int64_t nic_mcast_group_of_gid(const union ibv_gid *gid)
{
    if (!gid)
        return -1;
    for (int i = 0; i < 10; i++)
        if (gid->raw[i])
            return -1;
    if (gid->raw[10] != 0xff || gid->raw[11] != 0xff || (gid->raw[12] & 0xf0) != 0xe0)
        return -1;
    /* the 28 group bits of the IPv4 multicast address */
    return (int64_t)(((uint32_t)(gid->raw[12] & 0x0f) << 24) | ((uint32_t)gid->raw[13] << 16) |
                     ((uint32_t)gid->raw[14] << 8) | gid->raw[15]);
}

void nic_set_mcast_notify(struct nic *nic, nic_mcast_notify_fn fn, void *ctx)
{
    nic->mcast_notify = fn;
    nic->mcast_ctx = ctx;
}

static uint32_t members(const struct nic *nic, uint32_t group)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < nic->n_mcast; i++)
        n += nic->mcast[i].group == group;
    return n;
}

int nic_mcast_attach(struct nic_qp *qp, uint32_t group)
{
    struct nic *nic = qp->nic;
    if (qp->init.qp_type != IBV_QPT_UD || group & PKT_MCAST_NODE)
        return EINVAL;
    for (uint32_t i = 0; i < nic->n_mcast; i++)
        if (nic->mcast[i].group == group && nic->mcast[i].qpn == qp->qpn)
            return 0; /* attached already */
    if (nic->n_mcast == nic->cap_mcast) {
        uint32_t cap = nic->cap_mcast ? 2 * nic->cap_mcast : 8;
        struct nic_mcast_att *n = realloc(nic->mcast, cap * sizeof(*n));
        if (!n)
            return ENOMEM;
        nic->mcast = n;
        nic->cap_mcast = cap;
    }
    bool first = members(nic, group) == 0;
    if (first && nic->mcast_notify) {
        int rc = nic->mcast_notify(nic->mcast_ctx, nic->node_id, group, true);
        if (rc)
            return rc; /* the fabric cannot deliver the group here */
    }
    nic->mcast[nic->n_mcast++] = (struct nic_mcast_att){group, qp->qpn};
    return 0;
}

int nic_mcast_detach(struct nic_qp *qp, uint32_t group)
{
    struct nic *nic = qp->nic;
    for (uint32_t i = 0; i < nic->n_mcast; i++)
        if (nic->mcast[i].group == group && nic->mcast[i].qpn == qp->qpn) {
            nic->mcast[i] = nic->mcast[--nic->n_mcast];
            if (members(nic, group) == 0 && nic->mcast_notify)
                nic->mcast_notify(nic->mcast_ctx, nic->node_id, group, false);
            return 0;
        }
    return EINVAL;
}

void nic_mcast_qp_gone(struct nic_qp *qp)
{
    struct nic *nic = qp->nic;
    for (uint32_t i = 0; i < nic->n_mcast;) {
        if (nic->mcast[i].qpn == qp->qpn)
            nic_mcast_detach(qp, nic->mcast[i].group);
        else
            i++;
    }
}

void nic_mcast_rx(struct nic *nic, struct pkt *p)
{
    uint32_t group = p->dst_node & ~PKT_MCAST_NODE;
    struct nic_qp *last = NULL;
    for (uint32_t i = 0; i < nic->n_mcast; i++) {
        if (nic->mcast[i].group != group)
            continue;
        struct nic_qp *qp = nic_qp_lookup(nic, nic->mcast[i].qpn);
        if (!qp || !nic_qp_can_receive(qp))
            continue;
        if (last) { /* every member but the last gets a copy */
            nic_resp_rx(last, pkt_clone(nic->pool, p));
        }
        last = qp;
    }
    if (last) {
        nic_resp_rx(last, p);
        return;
    }
    nic->cnt.rx_drops++;
    nic_trace_pkt(nic, TRACE_PKT_DROP, p, p->dest_qpn, "nic: multicast group without a QP");
    pkt_free(nic->pool, p);
}
