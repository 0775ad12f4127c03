/* Queue pairs: creation with capability checks, the state machine with the
 * kernel's attribute-mask rules, attribute value checks, query, destroy.
 *
 * State diagram of an RC QP (IBA 10.3.1; the kernel's qp_state_table in
 * drivers/infiniband/core/verbs.c, checked by ib_modify_qp_is_ok):
 *
 *   RESET -> INIT -> RTR -> RTS <-> SQD          any state -> RESET, ERR
 *     ^                       ^                  SQE -> RTS
 *     +-- RESET, INIT->INIT, RTS->RTS, SQD->SQD (attribute changes)
 *
 * Each allowed transition has a set of required and a set of optional
 * attribute-mask bits (table below).  A mask missing a required bit, or
 * with a bit that is neither required nor optional (IBV_QP_STATE aside),
 * is EINVAL; so is IBV_QP_CUR_STATE outside RTR/RTS/SQD/SQE or naming a
 * state the QP is not in.  Value checks follow rxe/mlx5 (port 1, P_Key
 * index 0, path MTU <= port max MTU, RDMA-read depths <= device limits,
 * 5-bit timeouts, 3-bit retry counts, a global AV whose DGID the fabric
 * knows, no alternate path on RoCE).  Moving to ERR flushes every
 * outstanding WR (nic_qp_to_error).
 *
 * RC, UC and UD are implemented, each with its rows of the kernel's table
 * (UC: no RDMA-read/atomic depths, retry counts or RNR timer; UD: no path
 * at all, a Q_Key at RESET->INIT and only SQ_PSN at RTR->RTS).  Raw packet
 * and XRC QPs are refused with EOPNOTSUPP (valid types the model lacks),
 * other type values with EINVAL. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "shim.h"

enum { SHIM_N_QP_STATES = IBV_QPS_ERR + 1 };

struct qp_transition {
    bool valid;
    int req; /* required attribute-mask bits (besides IBV_QP_STATE) */
    int opt; /* optional ones */
};

/* RC rows of the kernel's qp_state_table (drivers/infiniband/core/verbs.c;
 * the same facts, our enums). */
static const struct qp_transition rc_transitions[SHIM_N_QP_STATES][SHIM_N_QP_STATES] = {
    [IBV_QPS_RESET] =
        {
            [IBV_QPS_RESET] = {.valid = true},
            [IBV_QPS_ERR] = {.valid = true},
            [IBV_QPS_INIT] = {.valid = true,
                              .req = IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS},
        },
    [IBV_QPS_INIT] =
        {
            [IBV_QPS_RESET] = {.valid = true},
            [IBV_QPS_ERR] = {.valid = true},
            [IBV_QPS_INIT] = {.valid = true,
                              .opt = IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS},
            [IBV_QPS_RTR] = {.valid = true,
                             .req = IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                    IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER,
                             .opt = IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX},
        },
    [IBV_QPS_RTR] =
        {
            [IBV_QPS_RESET] = {.valid = true},
            [IBV_QPS_ERR] = {.valid = true},
            [IBV_QPS_RTS] = {.valid = true,
                             .req = IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                                    IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC,
                             .opt = IBV_QP_CUR_STATE | IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS |
                                    IBV_QP_MIN_RNR_TIMER | IBV_QP_PATH_MIG_STATE},
        },
    [IBV_QPS_RTS] =
        {
            [IBV_QPS_RESET] = {.valid = true},
            [IBV_QPS_ERR] = {.valid = true},
            [IBV_QPS_RTS] = {.valid = true,
                             .opt = IBV_QP_CUR_STATE | IBV_QP_ACCESS_FLAGS | IBV_QP_ALT_PATH |
                                    IBV_QP_PATH_MIG_STATE | IBV_QP_MIN_RNR_TIMER},
            [IBV_QPS_SQD] = {.valid = true, .opt = IBV_QP_EN_SQD_ASYNC_NOTIFY},
        },
    [IBV_QPS_SQD] =
        {
            [IBV_QPS_RESET] = {.valid = true},
            [IBV_QPS_ERR] = {.valid = true},
            [IBV_QPS_RTS] = {.valid = true,
                             .opt = IBV_QP_CUR_STATE | IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS |
                                    IBV_QP_MIN_RNR_TIMER | IBV_QP_PATH_MIG_STATE},
            [IBV_QPS_SQD] = {.valid = true,
                             .opt = IBV_QP_PORT | IBV_QP_AV | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                                    IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC |
                                    IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_ALT_PATH |
                                    IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX | IBV_QP_MIN_RNR_TIMER |
                                    IBV_QP_PATH_MIG_STATE},
        },
    [IBV_QPS_SQE] =
        {
            [IBV_QPS_RESET] = {.valid = true},
            [IBV_QPS_ERR] = {.valid = true},
            [IBV_QPS_RTS] = {.valid = true}, /* no RC optional attributes */
        },
    [IBV_QPS_ERR] =
        {
            [IBV_QPS_RESET] = {.valid = true},
            [IBV_QPS_ERR] = {.valid = true},
        },
};

/* UC rows of the kernel's qp_state_table. */
static const struct qp_transition uc_transitions[SHIM_N_QP_STATES][SHIM_N_QP_STATES] = {
    [IBV_QPS_RESET] =
        {
            [IBV_QPS_RESET] = {.valid = true},
            [IBV_QPS_ERR] = {.valid = true},
            [IBV_QPS_INIT] = {.valid = true,
                              .req = IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS},
        },
    [IBV_QPS_INIT] =
        {
            [IBV_QPS_RESET] = {.valid = true},
            [IBV_QPS_ERR] = {.valid = true},
            [IBV_QPS_INIT] = {.valid = true,
                              .opt = IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS},
            [IBV_QPS_RTR] = {.valid = true,
                             .req = IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN,
                             .opt = IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX},
        },
    [IBV_QPS_RTR] =
        {
            [IBV_QPS_RESET] = {.valid = true},
            [IBV_QPS_ERR] = {.valid = true},
            [IBV_QPS_RTS] = {.valid = true,
                             .req = IBV_QP_SQ_PSN,
                             .opt = IBV_QP_CUR_STATE | IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS |
                                    IBV_QP_PATH_MIG_STATE},
        },
    [IBV_QPS_RTS] =
        {
            [IBV_QPS_RESET] = {.valid = true},
            [IBV_QPS_ERR] = {.valid = true},
            [IBV_QPS_RTS] = {.valid = true,
                             .opt = IBV_QP_CUR_STATE | IBV_QP_ACCESS_FLAGS | IBV_QP_ALT_PATH |
                                    IBV_QP_PATH_MIG_STATE},
            [IBV_QPS_SQD] = {.valid = true, .opt = IBV_QP_EN_SQD_ASYNC_NOTIFY},
        },
    [IBV_QPS_SQD] =
        {
            [IBV_QPS_RESET] = {.valid = true},
            [IBV_QPS_ERR] = {.valid = true},
            [IBV_QPS_RTS] = {.valid = true,
                             .opt = IBV_QP_CUR_STATE | IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS |
                                    IBV_QP_PATH_MIG_STATE},
            [IBV_QPS_SQD] = {.valid = true,
                             .opt = IBV_QP_AV | IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS |
                                    IBV_QP_PKEY_INDEX | IBV_QP_PATH_MIG_STATE},
        },
    [IBV_QPS_SQE] =
        {
            [IBV_QPS_RESET] = {.valid = true},
            [IBV_QPS_ERR] = {.valid = true},
            [IBV_QPS_RTS] = {.valid = true, .opt = IBV_QP_CUR_STATE | IBV_QP_ACCESS_FLAGS},
        },
    [IBV_QPS_ERR] =
        {
            [IBV_QPS_RESET] = {.valid = true},
            [IBV_QPS_ERR] = {.valid = true},
        },
};

/* UD rows of the kernel's qp_state_table: no path, no PSN check, a Q_Key. */
static const struct qp_transition ud_transitions[SHIM_N_QP_STATES][SHIM_N_QP_STATES] = {
    [IBV_QPS_RESET] =
        {
            [IBV_QPS_RESET] = {.valid = true},
            [IBV_QPS_ERR] = {.valid = true},
            [IBV_QPS_INIT] = {.valid = true, .req = IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY},
        },
    [IBV_QPS_INIT] =
        {
            [IBV_QPS_RESET] = {.valid = true},
            [IBV_QPS_ERR] = {.valid = true},
            [IBV_QPS_INIT] = {.valid = true, .opt = IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY},
            [IBV_QPS_RTR] = {.valid = true, .opt = IBV_QP_PKEY_INDEX | IBV_QP_QKEY},
        },
    [IBV_QPS_RTR] =
        {
            [IBV_QPS_RESET] = {.valid = true},
            [IBV_QPS_ERR] = {.valid = true},
            [IBV_QPS_RTS] = {.valid = true,
                             .req = IBV_QP_SQ_PSN,
                             .opt = IBV_QP_CUR_STATE | IBV_QP_QKEY},
        },
    [IBV_QPS_RTS] =
        {
            [IBV_QPS_RESET] = {.valid = true},
            [IBV_QPS_ERR] = {.valid = true},
            [IBV_QPS_RTS] = {.valid = true, .opt = IBV_QP_CUR_STATE | IBV_QP_QKEY},
            [IBV_QPS_SQD] = {.valid = true, .opt = IBV_QP_EN_SQD_ASYNC_NOTIFY},
        },
    [IBV_QPS_SQD] =
        {
            [IBV_QPS_RESET] = {.valid = true},
            [IBV_QPS_ERR] = {.valid = true},
            [IBV_QPS_RTS] = {.valid = true, .opt = IBV_QP_CUR_STATE | IBV_QP_QKEY},
            [IBV_QPS_SQD] = {.valid = true, .opt = IBV_QP_PKEY_INDEX | IBV_QP_QKEY},
        },
    [IBV_QPS_SQE] =
        {
            [IBV_QPS_RESET] = {.valid = true},
            [IBV_QPS_ERR] = {.valid = true},
            [IBV_QPS_RTS] = {.valid = true, .opt = IBV_QP_CUR_STATE | IBV_QP_QKEY},
        },
    [IBV_QPS_ERR] =
        {
            [IBV_QPS_RESET] = {.valid = true},
            [IBV_QPS_ERR] = {.valid = true},
        },
};

/* The XRC rows that differ from RC's (drivers/infiniband/core/verbs.c
 * qp_state_table, IB_QPT_XRC_INI and IB_QPT_XRC_TGT); only the named
 * transition of each is read. */
static const struct qp_transition xrc_ini_transitions[SHIM_N_QP_STATES][SHIM_N_QP_STATES] = {
    [IBV_QPS_INIT] =
        {
            [IBV_QPS_RTR] = {.valid = true,
                             .req = IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN,
                             .opt = IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX},
        },
};
static const struct qp_transition xrc_tgt_transitions[SHIM_N_QP_STATES][SHIM_N_QP_STATES] = {
    [IBV_QPS_RTR] =
        {
            [IBV_QPS_RTS] = {.valid = true,
                             .req = IBV_QP_TIMEOUT | IBV_QP_SQ_PSN,
                             .opt = IBV_QP_CUR_STATE | IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS |
                                    IBV_QP_MIN_RNR_TIMER | IBV_QP_PATH_MIG_STATE},
        },
};

/* Mask bits above the last one the uverbs ABI knows are EOPNOTSUPP. */
#define SHIM_QP_ATTR_KNOWN ((IBV_QP_RATE_LIMIT << 1) - 1)

bool shim_modify_qp_is_ok(enum ibv_qp_state cur, enum ibv_qp_state next, enum ibv_qp_type type,
                          int mask)
{
    if ((unsigned)cur >= SHIM_N_QP_STATES || (unsigned)next >= SHIM_N_QP_STATES)
        return false;
    const struct qp_transition(*table)[SHIM_N_QP_STATES];
    switch (type) {
    case IBV_QPT_RC:
        table = rc_transitions;
        break;
    case IBV_QPT_XRC_SEND:
    case IBV_QPT_XRC_RECV:
        table = rc_transitions;
        /* the kernel's XRC_INI / XRC_TGT rows are RC's but for two: the
         * initiator's INIT->RTR has no responder attributes, the target's
         * RTR->RTS no requester ones */
        if (type == IBV_QPT_XRC_SEND && cur == IBV_QPS_INIT && next == IBV_QPS_RTR)
            table = xrc_ini_transitions;
        if (type == IBV_QPT_XRC_RECV && cur == IBV_QPS_RTR && next == IBV_QPS_RTS)
            table = xrc_tgt_transitions;
        break;
    case IBV_QPT_UC:
        table = uc_transitions;
        break;
    case IBV_QPT_UD:
        table = ud_transitions;
        break;
    default:
        return false;
    }
    if ((mask & IBV_QP_CUR_STATE) && cur != IBV_QPS_RTR && cur != IBV_QPS_RTS &&
        cur != IBV_QPS_SQD && cur != IBV_QPS_SQE)
        return false;
    const struct qp_transition *t = &table[cur][next];
    if (!t->valid)
        return false;
    if ((mask & t->req) != t->req)
        return false;
    if (mask & ~(t->req | t->opt | IBV_QP_STATE))
        return false;
    return true;
}

/* ---------------------------------------------------------------- create / destroy */

static int check_qp_type(enum ibv_qp_type type)
{
    switch (type) {
    case IBV_QPT_RC:
    case IBV_QPT_UC:
    case IBV_QPT_UD:
    case IBV_QPT_XRC_SEND:
    case IBV_QPT_XRC_RECV:
        return 0;
    case IBV_QPT_RAW_PACKET:
    case IBV_QPT_DRIVER:
        return EOPNOTSUPP;
    }
    return EINVAL;
}

/* Returns the QP in RESET (init_attr->cap updated to what was granted:
 * the requested depths and SGE counts, max_inline_data = the device's
 * inline limit; with an SRQ max_recv_wr = max_recv_sge = 0, the QP has no
 * receive queue of its own), or NULL with errno: EINVAL for NULL
 * pd/attr/CQs, CQs or an SRQ of another context, or capabilities above
 * the device limits;
 * EOPNOTSUPP for QP types the model lacks (raw packet, driver); the NIC's
 * errno otherwise.  XRC (sim/nic/xrc.c): an XRC_SEND QP needs a PD and a
 * send CQ, ignores recv_cq and SRQ (mlx5 gives it no receive side); an
 * XRC_RECV QP has only its domain: PD, CQs and SRQ are ignored, and it
 * accepts no work requests (its messages land in XRC SRQs). */
/* NIC callback: the QP went to error with its overrun CQ (sim/nic/cq.c):
 * IBV_EVENT_QP_FATAL, as mlx5 reports a local work queue catastrophic
 * error. */
void shim_qp_fatal(struct sim *sim, void *a, void *b)
{
    (void)sim;
    (void)b;
    struct shim_qp *sqp = a;
    sqp->qp.state = IBV_QPS_ERR;
    struct ibv_async_event ev = {.element.qp = &sqp->qp, .event_type = IBV_EVENT_QP_FATAL};
    shim_async_event_post(sqp->ctx, &ev);
}

struct shim_qp *shim_qp_create(struct ibv_context *ctx, struct ibv_pd *pd,
                               struct ibv_qp_init_attr *init, struct ibv_xrcd *xrcd)
{
    bool tgt = init && init->qp_type == IBV_QPT_XRC_RECV;
    bool ini = init && init->qp_type == IBV_QPT_XRC_SEND;
    if (tgt) {
        if (!xrcd || !ctx || xrcd->context != ctx) {
            errno = EINVAL;
            return NULL;
        }
        return shim_qp_create_xrc_tgt(shim_xrcd(xrcd), init);
    }
    if (!pd || !init || !init->send_cq || (!ini && !init->recv_cq) ||
        init->send_cq->context != pd->context ||
        (!ini && (init->recv_cq->context != pd->context ||
                  (init->srq && init->srq->context != pd->context)))) {
        errno = EINVAL;
        return NULL;
    }
    int rc = check_qp_type(init->qp_type);
    if (rc) {
        errno = rc;
        return NULL;
    }
    struct shim_pd *spd = shim_pd(pd);
    const struct nic_params *p = nic_get_params(spd->ctx->nic);
    uint32_t max_sge = p->max_sge < NIC_MAX_SGE ? p->max_sge : NIC_MAX_SGE;
    uint32_t max_inline =
        p->max_inline_bytes < NIC_MAX_INLINE_BYTES ? p->max_inline_bytes : NIC_MAX_INLINE_BYTES;
    const struct ibv_qp_cap *c = &init->cap;
    if (c->max_send_wr > p->max_qp_wr || c->max_recv_wr > p->max_qp_wr ||
        c->max_send_sge > max_sge || c->max_recv_sge > max_sge || c->max_inline_data > max_inline) {
        errno = EINVAL;
        return NULL;
    }
    struct shim_qp *sqp = calloc(1, sizeof(*sqp));
    if (!sqp) {
        errno = ENOMEM;
        return NULL;
    }
    sqp->cap = *c;
    sqp->cap.max_inline_data = max_inline;
    if (ini) { /* no receive side */
        sqp->cap.max_recv_wr = 0;
        sqp->cap.max_recv_sge = 0;
    } else if (init->srq) {
        sqp->srq = shim_srq(init->srq);
        sqp->cap.max_recv_wr = 0;
        sqp->cap.max_recv_sge = 0;
    }
    sqp->sq_sig_all = init->sq_sig_all != 0;
    sqp->ctx = spd->ctx;
    sqp->pd = spd;
    sqp->send_cq = shim_cq(init->send_cq);
    sqp->recv_cq = ini ? NULL : shim_cq(init->recv_cq);

    struct nic_qp_init ninit = {
        .qp_type = ini ? IBV_QPT_RC : init->qp_type,
        .xrc = ini ? NIC_XRC_INI : NIC_XRC_NONE,
        .pd = spd->npd,
        .send_cq = sqp->send_cq->ncq,
        .recv_cq = sqp->recv_cq ? sqp->recv_cq->ncq : NULL,
        .srq = sqp->srq ? sqp->srq->nsrq : NULL,
        .cap = sqp->cap,
        .sq_sig_all = sqp->sq_sig_all,
    };
    sqp->nqp = nic_qp_create(spd->ctx->nic, &ninit);
    if (!sqp->nqp) {
        int e = errno ? errno : ENOMEM;
        free(sqp);
        errno = e;
        return NULL;
    }
    init->cap = sqp->cap;
    nic_qp_set_fatal_notify(sqp->nqp, shim_qp_fatal, sqp, NULL);

    struct ibv_qp *qp = &sqp->qp;
    qp->context = pd->context;
    qp->qp_context = init->qp_context;
    qp->pd = pd;
    qp->send_cq = init->send_cq;
    qp->recv_cq = ini ? NULL : init->recv_cq;
    qp->srq = sqp->srq ? init->srq : NULL;
    qp->handle = sqp->nqp->qpn;
    qp->qp_num = sqp->nqp->qpn;
    qp->state = IBV_QPS_RESET;
    qp->qp_type = init->qp_type;
    pthread_mutex_init(&qp->mutex, NULL);
    pthread_cond_init(&qp->cond, NULL);
    qp->events_completed = 0;

    /* MLNX_OFED's libmlx4 (mlx4_exp_create_qp) gives the first QPs of a
     * context a dedicated BlueFlame register while any is free */
    const struct host *h = spd->ctx->host;
    if (h && init->qp_type != IBV_QPT_XRC_RECV && spd->ctx->bf_dedic_used < h->cpu.bf_dedicated) {
        sqp->bf_dedicated = true;
        spd->ctx->bf_dedic_used++;
    }
    spd->n_qps++;
    sqp->send_cq->n_qps++;
    if (sqp->recv_cq)
        sqp->recv_cq->n_qps++;
    if (sqp->srq)
        sqp->srq->n_qps++;
    return sqp;
}

struct ibv_qp *ibv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *init)
{
    shim_charge_control();
    struct shim_qp *sqp = shim_qp_create(NULL, pd, init, NULL);
    return sqp ? &sqp->qp : NULL;
}

/* Returns 0, EINVAL for NULL, or the NIC's errno. */
int ibv_destroy_qp(struct ibv_qp *qp)
{
    shim_charge_control();
    if (!qp)
        return EINVAL;
    struct shim_qp *sqp = shim_qp(qp);
    nic_qp_set_fatal_notify(sqp->nqp, NULL, NULL, NULL);
    int rc = nic_qp_destroy(sqp->nqp);
    if (rc) {
        nic_qp_set_fatal_notify(sqp->nqp, shim_qp_fatal, sqp, NULL);
        return rc;
    }
    shim_async_drop(sqp->ctx, qp);
    if (sqp->bf_dedicated) /* the register is free again (mlx4_destroy_qp) */
        sqp->ctx->bf_dedic_used--;
    if (sqp->pd)
        sqp->pd->n_qps--;
    if (sqp->send_cq)
        sqp->send_cq->n_qps--;
    if (sqp->recv_cq)
        sqp->recv_cq->n_qps--;
    if (sqp->srq)
        sqp->srq->n_qps--;

    pthread_cond_destroy(&qp->cond);
    pthread_mutex_destroy(&qp->mutex);
    shim_wr_batch_free(sqp);
    free(sqp);
    return 0;
}

/* ---------------------------------------------------------------- modify */

/* The AV of a connected QP: port 1 and a destination a node answers to
 * (on a RoCE port a GRH with GID index 0 and the node's GID; on an IB
 * port that, or the node's LID). */
static bool av_ok(const struct nic *nic, const struct ibv_ah_attr *ah)
{
    return ah->port_num == SHIM_PORT_NUM && shim_av_node(nic, ah) >= 0;
}

/* Value checks of the attributes named in `mask`; 0 or EINVAL. */
static int check_attr_values(const struct shim_qp *sqp, const struct ibv_qp_attr *a, int mask)
{
    const struct nic_params *p = nic_get_params(sqp->ctx->nic);
    if ((mask & IBV_QP_PORT) && a->port_num != SHIM_PORT_NUM)
        return EINVAL;
    if ((mask & IBV_QP_PKEY_INDEX) && a->pkey_index >= SHIM_PKEY_TBL_LEN)
        return EINVAL;
    if ((mask & IBV_QP_PATH_MTU) && (a->path_mtu < IBV_MTU_256 || a->path_mtu > p->max_mtu))
        return EINVAL;
    if ((mask & IBV_QP_MAX_QP_RD_ATOMIC) && a->max_rd_atomic > p->max_qp_rd_atom)
        return EINVAL;
    if ((mask & IBV_QP_MAX_DEST_RD_ATOMIC) && a->max_dest_rd_atomic > p->max_qp_rd_atom)
        return EINVAL;
    if ((mask & IBV_QP_TIMEOUT) && a->timeout > 31)
        return EINVAL;
    if ((mask & IBV_QP_MIN_RNR_TIMER) && a->min_rnr_timer > 31)
        return EINVAL;
    if ((mask & IBV_QP_RETRY_CNT) && a->retry_cnt > 7)
        return EINVAL;
    if ((mask & IBV_QP_RNR_RETRY) && a->rnr_retry > 7)
        return EINVAL;
    if ((mask & IBV_QP_AV) && !av_ok(sqp->ctx->nic, &a->ah_attr))
        return EINVAL;
    /* The kernel bans alternate paths (APM) on RoCE ports. */
    if (mask & IBV_QP_ALT_PATH)
        return EINVAL;
    if ((mask & IBV_QP_PATH_MIG_STATE) && a->path_mig_state > IBV_MIG_ARMED)
        return EINVAL;
    return 0;
}

/* Returns 0 or an errno value (EINVAL: NULL arguments, a transition or
 * mask the kernel refuses, a bad attribute value; EOPNOTSUPP: mask bits
 * the uverbs ABI does not know).  PSNs are masked to 24 bits as the kernel
 * does. */
int ibv_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int attr_mask)
{
    shim_charge_control();
    if (!qp || !attr)
        return EINVAL;
    if (attr_mask & ~SHIM_QP_ATTR_KNOWN)
        return EOPNOTSUPP;
    struct shim_qp *sqp = shim_qp(qp);
    enum ibv_qp_state actual = sqp->nqp->state;
    if ((attr_mask & IBV_QP_STATE) && (unsigned)attr->qp_state >= SHIM_N_QP_STATES)
        return EINVAL;
    if (attr_mask & IBV_QP_CUR_STATE) {
        if ((unsigned)attr->cur_qp_state >= SHIM_N_QP_STATES || attr->cur_qp_state != actual)
            return EINVAL;
    }
    enum ibv_qp_state next = (attr_mask & IBV_QP_STATE) ? attr->qp_state : actual;
    if (!shim_modify_qp_is_ok(actual, next, qp->qp_type, attr_mask))
        return EINVAL;
    int rc = check_attr_values(sqp, attr, attr_mask);
    if (rc)
        return rc;

    if (next == IBV_QPS_ERR) {
        nic_qp_to_error(sqp->nqp);
    } else {
        struct ibv_qp_attr a = *attr;
        a.qp_state = next;
        a.rq_psn &= 0xffffff;
        a.sq_psn &= 0xffffff;
        rc = nic_qp_modify(sqp->nqp, &a, attr_mask | IBV_QP_STATE);
        if (rc)
            return rc;
    }
    qp->state = next;
    return 0;
}

/* ibv_modify_qp_rate_limit: packet pacing of one QP (mlx5 offers it as
 * per-QP packet pacing) at rate_limit kbit/s; 0 removes the limit.
 * max_burst_sz and typical_pkt_sz are accepted: the NIC paces packet by
 * packet (sim/nic/ratelimit.c), so there is no burst to size.  EINVAL for
 * NULL arguments, a comp_mask bit the provider does not know, or a QP in
 * RESET (rdma-core: the QP must be at least INIT for a modify). */
int shim_modify_qp_rate_limit(struct ibv_qp *qp, struct ibv_qp_rate_limit_attr *attr)
{
    shim_charge_control();
    if (!qp || !attr || attr->comp_mask)
        return EINVAL;
    struct shim_qp *sqp = shim_qp(qp);
    if (sqp->nqp->state == IBV_QPS_RESET)
        return EINVAL;
    sqp->nqp->attr.rate_limit = attr->rate_limit;
    return nic_qp_set_rate_limit(sqp->nqp, (uint64_t)attr->rate_limit * 1000);
}

/* ---------------------------------------------------------------- query */

/* Returns 0 with every attribute filled (whatever attr_mask asks, as
 * providers do) and the creation attributes, or EINVAL for NULL. */
int ibv_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int attr_mask,
                 struct ibv_qp_init_attr *init_attr)
{
    (void)attr_mask;
    shim_charge_control();
    if (!qp || !attr || !init_attr)
        return EINVAL;
    struct shim_qp *sqp = shim_qp(qp);
    *attr = sqp->nqp->attr;
    attr->qp_state = sqp->nqp->state;
    attr->cur_qp_state = sqp->nqp->state;
    attr->cap = sqp->cap;
    attr->sq_draining = 0;
    memset(init_attr, 0, sizeof(*init_attr));
    init_attr->qp_context = qp->qp_context;
    init_attr->send_cq = qp->send_cq;
    init_attr->recv_cq = qp->recv_cq;
    init_attr->srq = qp->srq;
    init_attr->cap = sqp->cap;
    init_attr->qp_type = qp->qp_type;
    init_attr->sq_sig_all = sqp->sq_sig_all;
    qp->state = attr->qp_state;
    return 0;
}
