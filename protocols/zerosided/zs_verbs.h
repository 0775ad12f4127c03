/* Verbs set-up shared by the zero-sided PUs and the baselines: the device,
 * RC / UD QPs brought to RTS towards a GID, and endpoint descriptions
 * exchanged out of band.  Only <infiniband/verbs.h> and <rnicsim/host.h>. */
#ifndef RNICSIM_ZS_VERBS_H
#define RNICSIM_ZS_VERBS_H

#include <infiniband/verbs.h>
#include <stdint.h>

struct zv_dev {
    struct ibv_context *ctx;
    struct ibv_pd *pd;
    union ibv_gid gid;
};

/* A remote buffer and the QP to reach it (exchanged out of band). */
struct zv_ep {
    uint8_t gid[16];
    uint32_t qpn, psn, rkey, pad;
    uint64_t addr, len;
};

int zv_open(struct zv_dev *d, const char *prog);
void zv_close(struct zv_dev *d);
/* An RC (or UD) QP on the given CQs; max_inline 64 B. */
struct ibv_qp *zv_qp(struct zv_dev *d, struct ibv_cq *scq, struct ibv_cq *rcq,
                     enum ibv_qp_type type, uint32_t send_wr, uint32_t recv_wr);
/* RESET -> INIT -> RTR -> RTS of an RC QP towards (gid, dqpn), 16
 * outstanding READs each way, the given PSNs and path MTU. */
int zv_rc_up(struct ibv_qp *qp, const uint8_t gid[16], uint32_t dqpn, uint32_t rq_psn,
             uint32_t sq_psn, enum ibv_mtu mtu);
/* UD QP to RTS with the Q_Key. */
int zv_ud_up(struct ibv_qp *qp, uint32_t qkey, uint32_t sq_psn);
/* Fill an endpoint description of (qp, mr) and put it under `key`. */
void zv_ep_put(const char *key, const struct zv_dev *d, const struct ibv_qp *qp,
               const struct ibv_mr *mr, uint32_t psn);
int zv_ep_get(const char *key, struct zv_ep *ep);
/* Poll `cq` until `n` completions arrived; -1 on an error completion. */
int zv_wait(struct ibv_cq *cq, int n, const char *prog);

#endif
