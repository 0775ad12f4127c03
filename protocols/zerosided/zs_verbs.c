/* Verbs set-up shared by the zero-sided programs (zs_verbs.h). */
#include "protocols/zerosided/zs_verbs.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "rnicsim/host.h"

#define ZV_PORT 1

int zv_open(struct zv_dev *d, const char *prog)
{
    memset(d, 0, sizeof(*d));
    int num = 0;
    struct ibv_device **list = ibv_get_device_list(&num);
    if (!list || num <= 0) {
        fprintf(stderr, "%s: no RDMA device\n", prog);
        if (list)
            ibv_free_device_list(list);
        return -1;
    }
    d->ctx = ibv_open_device(list[0]);
    ibv_free_device_list(list);
    if (!d->ctx || ibv_query_gid(d->ctx, ZV_PORT, 0, &d->gid) || !(d->pd = ibv_alloc_pd(d->ctx))) {
        fprintf(stderr, "%s: device set-up failed: %s\n", prog, strerror(errno));
        return -1;
    }
    return 0;
}

void zv_close(struct zv_dev *d)
{
    if (d->pd)
        ibv_dealloc_pd(d->pd);
    if (d->ctx)
        ibv_close_device(d->ctx);
    memset(d, 0, sizeof(*d));
}

struct ibv_qp *zv_qp(struct zv_dev *d, struct ibv_cq *scq, struct ibv_cq *rcq,
                     enum ibv_qp_type type, uint32_t send_wr, uint32_t recv_wr)
{
    struct ibv_qp_init_attr ia = {
        .send_cq = scq,
        .recv_cq = rcq,
        .cap = {.max_send_wr = send_wr,
                .max_recv_wr = recv_wr ? recv_wr : 1,
                .max_send_sge = 1,
                .max_recv_sge = 1,
                .max_inline_data = 64},
        .qp_type = type,
    };
    return ibv_create_qp(d->pd, &ia);
}

int zv_rc_up(struct ibv_qp *qp, const uint8_t gid[16], uint32_t dqpn, uint32_t rq_psn,
             uint32_t sq_psn, enum ibv_mtu mtu)
{
    struct ibv_qp_attr a;
    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_INIT;
    a.port_num = ZV_PORT;
    a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE |
                        IBV_ACCESS_REMOTE_ATOMIC;
    if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
        return -1;
    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = mtu;
    a.dest_qp_num = dqpn;
    a.rq_psn = rq_psn;
    a.max_dest_rd_atomic = 16;
    a.min_rnr_timer = 12;
    a.ah_attr.is_global = 1;
    memcpy(a.ah_attr.grh.dgid.raw, gid, 16);
    a.ah_attr.grh.hop_limit = 64;
    a.ah_attr.port_num = ZV_PORT;
    if (ibv_modify_qp(qp, &a,
                      IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                          IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
        return -1;
    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_RTS;
    a.timeout = 14;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.sq_psn = sq_psn;
    a.max_rd_atomic = 16;
    return ibv_modify_qp(qp, &a,
                         IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                             IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
}

int zv_ud_up(struct ibv_qp *qp, uint32_t qkey, uint32_t sq_psn)
{
    struct ibv_qp_attr a;
    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_INIT;
    a.port_num = ZV_PORT;
    a.qkey = qkey;
    if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY))
        return -1;
    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_RTR;
    if (ibv_modify_qp(qp, &a, IBV_QP_STATE))
        return -1;
    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_RTS;
    a.sq_psn = sq_psn;
    return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN);
}

void zv_ep_put(const char *key, const struct zv_dev *d, const struct ibv_qp *qp,
               const struct ibv_mr *mr, uint32_t psn)
{
    struct zv_ep ep;
    memset(&ep, 0, sizeof(ep));
    memcpy(ep.gid, d->gid.raw, 16);
    ep.qpn = qp ? qp->qp_num : 0;
    ep.psn = psn;
    if (mr) {
        ep.rkey = mr->rkey;
        ep.addr = (uint64_t)(uintptr_t)mr->addr;
        ep.len = mr->length;
    }
    host_oob_put(key, &ep, sizeof(ep));
}

int zv_ep_get(const char *key, struct zv_ep *ep)
{
    return host_oob_get(key, ep, sizeof(*ep));
}

int zv_wait(struct ibv_cq *cq, int n, const char *prog)
{
    struct ibv_wc wc[16];
    while (n > 0) {
        int k = ibv_poll_cq(cq, n < 16 ? n : 16, wc);
        if (k < 0)
            return -1;
        for (int i = 0; i < k; i++)
            if (wc[i].status != IBV_WC_SUCCESS) {
                fprintf(stderr, "%s: completion error: %s\n", prog,
                        ibv_wc_status_str(wc[i].status));
                return -1;
            }
        n -= k;
    }
    return 0;
}
