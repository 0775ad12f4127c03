/* XRC verbs (the NIC side is sim/nic/xrc.c): the verbs_context entries
 * open_xrcd, close_xrcd, create_srq_ex, get_srq_num that verbs.h's inline
 * ibv_open_xrcd, ibv_close_xrcd, ibv_create_srq_ex and ibv_get_srq_num
 * call, and the XRC target QP that ibv_create_qp_ex makes with
 * IBV_QP_INIT_ATTR_XRCD (qp_ex.c -> qp.c -> here).
 *
 * Errno choices follow libibverbs' ibv_cmd_open_xrcd, the kernel's
 * uverbs handlers and the mlx5 provider:
 *   open_xrcd      comp_mask bits past IBV_XRCD_INIT_ATTR_RESERVED:
 *                  EOPNOTSUPP; FD or OFLAGS missing from comp_mask: EINVAL
 *                  (ibv_cmd_open_xrcd); oflags other than O_CREAT/O_EXCL:
 *                  EINVAL.  fd -1 opens a new domain.  A file's fd names
 *                  the device's domain of that file (st_dev, st_ino): a
 *                  bad fd EBADF, none yet without O_CREAT EAGAIN, one
 *                  already with O_EXCL EINVAL (ib_uverbs_open_xrcd).
 *   close_xrcd     a handle of a file's domain with others open: 0; else
 *                  EBUSY while XRC SRQs or target QPs use it (the
 *                  kernel's usecnt).
 *   create_srq_ex  no TYPE or IBV_SRQT_BASIC: ibv_create_srq with the PD.
 *                  IBV_SRQT_XRC: needs PD, XRCD and CQ in comp_mask, all
 *                  of this context, else EINVAL; limits as ibv_create_srq.
 *                  IBV_SRQT_TM (tag matching): EOPNOTSUPP, not modelled.
 *                  Unknown comp_mask bits: EOPNOTSUPP.
 *   get_srq_num    0 and the SRQ number for any SRQ (mlx5_get_srq_num). */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "shim.h"

static struct ibv_xrcd *shim_open_xrcd(struct ibv_context *context, struct ibv_xrcd_init_attr *attr)
{
    shim_charge_control();
    if (!context || !attr) {
        errno = EINVAL;
        return NULL;
    }
    if (attr->comp_mask >= IBV_XRCD_INIT_ATTR_RESERVED) {
        errno = EOPNOTSUPP;
        return NULL;
    }
    if (!(attr->comp_mask & IBV_XRCD_INIT_ATTR_FD) ||
        !(attr->comp_mask & IBV_XRCD_INIT_ATTR_OFLAGS) || (attr->oflags & ~(O_CREAT | O_EXCL))) {
        errno = EINVAL;
        return NULL;
    }
    struct stat st = {0};
    if (attr->fd != -1 && fstat(attr->fd, &st) != 0) {
        errno = EBADF;
        return NULL;
    }
    struct shim_context *sctx = shim_ctx(context);
    struct shim_xrcd *sx = calloc(1, sizeof(*sx));
    if (!sx) {
        errno = ENOMEM;
        return NULL;
    }
    sx->nxrcd = nic_xrcd_open(sctx->nic, attr->fd != -1, (uint64_t)st.st_dev, (uint64_t)st.st_ino,
                              (attr->oflags & O_CREAT) != 0, (attr->oflags & O_EXCL) != 0);
    if (!sx->nxrcd) {
        int e = errno ? errno : ENOMEM;
        free(sx);
        errno = e;
        return NULL;
    }
    sx->ctx = sctx;
    sx->xrcd.context = context;
    return &sx->xrcd;
}

static int shim_close_xrcd(struct ibv_xrcd *xrcd)
{
    shim_charge_control();
    if (!xrcd)
        return EINVAL;
    struct shim_xrcd *sx = shim_xrcd(xrcd);
    int rc = nic_xrcd_close(sx->nxrcd); /* the NIC counts the domain's users */
    if (rc)
        return rc;
    free(sx);
    return 0;
}

static struct ibv_srq *create_xrc_srq(struct ibv_context *context,
                                      struct ibv_srq_init_attr_ex *attr)
{
    const uint32_t need = IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ;
    if ((attr->comp_mask & need) != need || !attr->pd || !attr->xrcd || !attr->cq ||
        attr->pd->context != context || attr->xrcd->context != context ||
        attr->cq->context != context) {
        errno = EINVAL;
        return NULL;
    }
    struct ibv_srq_init_attr basic = {.srq_context = attr->srq_context, .attr = attr->attr};
    struct ibv_srq *srq =
        shim_srq_create(attr->pd, &basic, shim_xrcd(attr->xrcd), shim_cq(attr->cq));
    if (srq)
        attr->attr = basic.attr;
    return srq;
}

static struct ibv_srq *shim_create_srq_ex(struct ibv_context *context,
                                          struct ibv_srq_init_attr_ex *attr)
{
    if (!context || !attr) {
        errno = EINVAL;
        return NULL;
    }
    if (attr->comp_mask >= IBV_SRQ_INIT_ATTR_RESERVED) {
        errno = EOPNOTSUPP;
        return NULL;
    }
    if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE) || attr->srq_type == IBV_SRQT_BASIC) {
        if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_PD) || !attr->pd ||
            attr->pd->context != context) {
            errno = EINVAL;
            return NULL;
        }
        return ibv_create_srq(attr->pd, (struct ibv_srq_init_attr *)(void *)attr);
    }
    switch (attr->srq_type) {
    case IBV_SRQT_XRC:
        shim_charge_control();
        return create_xrc_srq(context, attr);
    case IBV_SRQT_TM:
        errno = EOPNOTSUPP;
        return NULL;
    default:
        errno = EINVAL;
        return NULL;
    }
}

static int shim_get_srq_num(struct ibv_srq *srq, uint32_t *srq_num)
{
    host_note_call();
    if (!srq || !srq_num)
        return EINVAL;
    *srq_num = shim_srq(srq)->nsrq->srqn;
    return 0;
}

struct shim_qp *shim_qp_create_xrc_tgt(struct shim_xrcd *sx, struct ibv_qp_init_attr *init)
{
    struct shim_qp *sqp = calloc(1, sizeof(*sqp));
    if (!sqp) {
        errno = ENOMEM;
        return NULL;
    }
    sqp->ctx = sx->ctx;
    struct nic_qp_init ninit = {
        .qp_type = IBV_QPT_RC,
        .xrc = NIC_XRC_TGT,
        .xrcd = sx->nxrcd,
    };
    sqp->nqp = nic_qp_create(sx->ctx->nic, &ninit);
    if (!sqp->nqp) {
        int e = errno ? errno : ENOMEM;
        free(sqp);
        errno = e;
        return NULL;
    }
    memset(&init->cap, 0, sizeof(init->cap)); /* no send or receive queue */
    nic_qp_set_fatal_notify(sqp->nqp, shim_qp_fatal, sqp, NULL);
    struct ibv_qp *qp = &sqp->qp;
    qp->context = sx->xrcd.context;
    qp->qp_context = init->qp_context;
    qp->handle = sqp->nqp->qpn;
    qp->qp_num = sqp->nqp->qpn;
    qp->state = IBV_QPS_RESET;
    qp->qp_type = IBV_QPT_XRC_RECV;
    pthread_mutex_init(&qp->mutex, NULL);
    pthread_cond_init(&qp->cond, NULL);
    return sqp;
}

void shim_xrc_ops(struct shim_context *sctx)
{
    sctx->vctx.open_xrcd = shim_open_xrcd;
    sctx->vctx.close_xrcd = shim_close_xrcd;
    sctx->vctx.create_srq_ex = shim_create_srq_ex;
    sctx->vctx.get_srq_num = shim_get_srq_num;
}
