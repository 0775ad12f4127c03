/* Address handles: the path of a UD send.  On a RoCE port the GRH is
 * mandatory and the destination GID must name a node of the fabric; the
 * AH keeps the node it resolves to (the "ARP" a real provider does at
 * create time), so each UD WR costs no lookup.
 *
 * ibv_init_ah_from_wc / ibv_create_ah_from_wc build the reply path from a
 * UD receive, as rdma-core's verbs.c does: the sender's LID (wc->slid), SL
 * and path bits always; with IBV_WC_GRH the GRH too — on a RoCEv2/IPv4 port
 * the 40-byte slot holds the IPv4 header in its last 20 bytes (see
 * sim/nic/resp.c build_grh), an IB GRH (IPv6 version 6) is read as such.
 * A RoCE port needs the GRH; an InfiniBand port (nic.link_layer ib) does
 * not: a receive without one gives a LID-routed AH. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "shim.h"

/* Returns the AH, or NULL with errno EINVAL (NULL pd/attr, no GRH, bad
 * port or GID index, unknown destination GID) or ENOMEM. */
struct ibv_ah *ibv_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr)
{
    shim_charge_control();
    if (!pd || !attr) {
        errno = EINVAL;
        return NULL;
    }
    struct shim_pd *spd = shim_pd(pd);
    int64_t node = shim_av_node(spd->ctx->nic, attr);
    /* a multicast group's GID (UD multicast, mcast.c) */
    int64_t group = attr->is_global ? nic_mcast_group_of_gid(&attr->grh.dgid) : -1;
    if (group >= 0)
        node = (int64_t)(PKT_MCAST_NODE | (uint32_t)group);
    if (attr->port_num != SHIM_PORT_NUM || node < 0) {
        errno = EINVAL;
        return NULL;
    }
    struct shim_ah *sah = calloc(1, sizeof(*sah));
    if (!sah) {
        errno = ENOMEM;
        return NULL;
    }
    sah->pd = spd;
    sah->attr = *attr;
    sah->node = (uint32_t)node;
    sah->ah.context = pd->context;
    sah->ah.pd = pd;
    sah->ah.handle = ++spd->ctx->next_ah_handle;
    spd->n_ahs++;
    return &sah->ah;
}

int ibv_destroy_ah(struct ibv_ah *ah)
{
    shim_charge_control();
    if (!ah)
        return EINVAL;
    struct shim_ah *sah = shim_ah(ah);
    sah->pd->n_ahs--;
    free(sah);
    return 0;
}

enum { GRH_IPV4_OFF = 20 }; /* the IPv4 header sits in bytes 20..39 of the slot */

static uint16_t ipv4_csum(const uint8_t *h)
{
    uint32_t sum = 0;
    for (unsigned i = 0; i < 20; i += 2)
        sum += (uint32_t)h[i] << 8 | h[i + 1];
    while (sum >> 16)
        sum = (sum & 0xffff) + (sum >> 16);
    return (uint16_t)~sum;
}

/* Returns 0 with ah_attr filled from a UD receive (the sender's LID, SL
 * and path bits; with a GRH the sender's GID as DGID, our GID index 0, hop
 * limit / traffic class from the header), or -1 with errno: EINVAL for
 * NULL arguments, a bad port or, on a RoCE port, a completion without
 * IBV_WC_GRH; EPROTONOSUPPORT for a slot that holds neither an IPv4 header
 * nor an IB GRH. */
int ibv_init_ah_from_wc(struct ibv_context *context, uint8_t port_num, struct ibv_wc *wc,
                        struct ibv_grh *grh, struct ibv_ah_attr *ah_attr)
{
    host_note_call();
    if (!context || !wc || !ah_attr || port_num != SHIM_PORT_NUM) {
        errno = EINVAL;
        return -1;
    }
    bool ib = nic_get_params(shim_ctx(context)->nic)->link_layer == NIC_LINK_IB;
    bool has_grh = (wc->wc_flags & IBV_WC_GRH) != 0;
    if ((!has_grh && !ib) || (has_grh && !grh)) {
        errno = EINVAL;
        return -1;
    }
    memset(ah_attr, 0, sizeof(*ah_attr));
    ah_attr->port_num = port_num;
    ah_attr->sl = wc->sl;
    ah_attr->dlid = wc->slid;
    ah_attr->src_path_bits = wc->dlid_path_bits;
    if (!has_grh) /* InfiniBand, same subnet: routed by LID */
        return 0;
    ah_attr->is_global = 1;
    ah_attr->grh.sgid_index = 0;
    const uint8_t *raw = (const uint8_t *)grh;
    const uint8_t *ip = raw + GRH_IPV4_OFF;
    uint32_t vtf = ntohl(grh->version_tclass_flow);
    if ((vtf >> 28) != 6 && (ip[0] >> 4) == 4 && (ip[0] & 0xf) == 5 &&
        ipv4_csum(ip) == 0) { /* a header with its checksum sums to 0 */
        union ibv_gid *g = &ah_attr->grh.dgid;
        memset(g, 0, sizeof(*g));
        g->raw[10] = g->raw[11] = 0xff;
        memcpy(g->raw + 12, ip + 12, 4); /* the sender's address */
        ah_attr->grh.hop_limit = ip[8];
        ah_attr->grh.traffic_class = ip[1];
        return 0;
    }
    if ((vtf >> 28) == 6) {
        ah_attr->grh.dgid = grh->sgid;
        ah_attr->grh.flow_label = vtf & 0xfffff;
        ah_attr->grh.hop_limit = 0xff; /* rdma-core: the reply may cross routers */
        ah_attr->grh.traffic_class = (uint8_t)((vtf >> 20) & 0xff);
        return 0;
    }
    errno = EPROTONOSUPPORT;
    return -1;
}

/* Returns an AH back to the sender of a UD receive, or NULL with errno
 * (those of ibv_init_ah_from_wc and ibv_create_ah). */
struct ibv_ah *ibv_create_ah_from_wc(struct ibv_pd *pd, struct ibv_wc *wc, struct ibv_grh *grh,
                                     uint8_t port_num)
{
    struct ibv_ah_attr attr;
    if (!pd) {
        errno = EINVAL;
        return NULL;
    }
    if (ibv_init_ah_from_wc(pd->context, port_num, wc, grh, &attr))
        return NULL;
    return ibv_create_ah(pd, &attr);
}
