/* XRC, the eXtended Reliable Connected transport (IBA Annex A14; rdma-core
 * ibv_open_xrcd(3), ibv_create_srq_ex(3) with IBV_SRQT_XRC).
 *
 *   domain     nic_xrcd: a number and a use count.  XRC SRQs and XRC
 *              target QPs belong to one; close is EBUSY while they live.
 *              Opened through a file, a domain is the one every open of
 *              that file on this device finds (the kernel's xrcd table
 *              keyed by inode), closed when its last handle closes.
 *   XRC SRQ    an SRQ (srq.c) with a domain and a CQ of its own: a
 *              receive completes to srq->cq whichever target QP took the
 *              WQE, with that QP's number in wc.qp_num (resp.c through
 *              nic_qp_recv_cq).
 *   initiator  (NIC_XRC_INI) an RC QP to the engines without a receive
 *              side.  nic_pkt_address turns its opcodes into XRC ones
 *              (RC | 0xa0), the requester puts the WQE's remote SRQ number
 *              into the XRCETH of every request packet.
 *   target     (NIC_XRC_TGT) an RC QP to the engines without send or
 *              receive queue.  At each message's first packet the
 *              responder binds it to the SRQ the XRCETH names
 *              (nic_xrc_tgt_bind): that SRQ gives the receive WQE and the
 *              PD that SGEs and R_Keys are checked against.  An SRQ number
 *              that is not a live XRC SRQ of the target's domain is an
 *              invalid request: NAK-Invalid Request, the target QP goes to
 *              error, the initiator's WQE completes with
 *              IBV_WC_REM_INV_REQ_ERR (resp.c's class-C rule).
 *   rx         nic.c checks that an XRC opcode reaches an XRC QP of the
 *              right side (requests a target, responses an initiator) and
 *              that RC opcodes never reach one. */
#include <errno.h>
#include <stdlib.h>

#include "nic_priv.h"

/* XRC domain numbers are 24 bits wide (the mlx5 PRM's xrcd field). */
enum { NIC_MAX_XRCDS = 1u << 24 };

struct nic_xrcd *nic_xrcd_open(struct nic *nic, bool shared, uint64_t dev, uint64_t ino,
                               bool create, bool excl)
{
    if (!nic) {
        errno = EINVAL;
        return NULL;
    }
    for (uint32_t i = 0; shared && i < nic->n_xrcds; i++) {
        struct nic_xrcd *x = nic->xrcds[i];
        if (x->shared && x->file_dev == dev && x->file_ino == ino) {
            if (excl) {
                errno = EINVAL;
                return NULL;
            }
            x->opens++;
            return x;
        }
    }
    if (shared && !create) {
        errno = EAGAIN;
        return NULL;
    }
    if (nic->n_xrcds >= NIC_MAX_XRCDS) {
        errno = ENOMEM;
        return NULL;
    }
    if (nic->n_xrcds == nic->cap_xrcds) {
        uint32_t cap = nic->cap_xrcds ? 2 * nic->cap_xrcds : 4;
        struct nic_xrcd **t = realloc(nic->xrcds, cap * sizeof(*t));
        if (!t) {
            errno = ENOMEM;
            return NULL;
        }
        nic->xrcds = t;
        nic->cap_xrcds = cap;
    }
    struct nic_xrcd *x = calloc(1, sizeof(*x));
    if (!x) {
        errno = ENOMEM;
        return NULL;
    }
    x->nic = nic;
    x->xrcdn = nic->next_xrcdn++ & NIC_PSN_MASK;
    x->shared = shared;
    x->file_dev = dev;
    x->file_ino = ino;
    x->opens = 1;
    nic->xrcds[nic->n_xrcds++] = x;
    return x;
}

int nic_xrcd_close(struct nic_xrcd *xrcd)
{
    if (!xrcd)
        return EINVAL;
    if (xrcd->opens > 1) { /* another handle keeps the shared domain */
        xrcd->opens--;
        return 0;
    }
    if (xrcd->n_users)
        return EBUSY;
    struct nic *nic = xrcd->nic;
    for (uint32_t i = 0; i < nic->n_xrcds; i++)
        if (nic->xrcds[i] == xrcd) {
            nic->xrcds[i] = nic->xrcds[--nic->n_xrcds];
            break;
        }
    free(xrcd);
    return 0;
}

void nic_xrcd_teardown(struct nic *nic)
{
    for (uint32_t i = 0; i < nic->n_xrcds; i++)
        free(nic->xrcds[i]);
    free(nic->xrcds);
    nic->xrcds = NULL;
    nic->n_xrcds = nic->cap_xrcds = 0;
}

struct nic_srq *nic_xrc_srq_create(struct nic_pd *pd, struct nic_xrcd *xrcd, struct nic_cq *cq,
                                   uint32_t max_wr, uint32_t max_sge)
{
    if (!pd || !xrcd || !cq || xrcd->nic != pd->nic || cq->nic != pd->nic) {
        errno = EINVAL;
        return NULL;
    }
    struct nic_srq *srq = nic_srq_create(pd, max_wr, max_sge);
    if (!srq)
        return NULL;
    srq->xrcd = xrcd;
    srq->cq = cq;
    xrcd->n_users++;
    cq->n_qps++;
    return srq;
}

struct nic_srq *nic_xrc_srq_find(const struct nic_xrcd *xrcd, uint32_t srqn)
{
    const struct nic *nic = xrcd->nic;
    /* linear: a NIC holds few XRC SRQs next to its QPs; a table keyed by
     * number is the change to make when scenarios use thousands */
    for (uint32_t i = 0; i < nic->n_srqs; i++) {
        struct nic_srq *s = nic->srqs[i];
        if (s->srqn == (srqn & NIC_PSN_MASK))
            return s->xrcd == xrcd ? s : NULL;
    }
    return NULL;
}

/* An XRC SRQ goes (srq.c): EBUSY while a target QP is in the middle of
 * a message with one of its WQEs (its completion would have no CQ);
 * else its CQ and domain lose a user and the target QPs that last
 * delivered into it forget it. */
int nic_xrc_srq_gone(struct nic_srq *srq)
{
    struct nic *nic = srq->nic;
    for (uint32_t i = 0; i <= nic->qp_tbl_mask; i++) {
        const struct nic_qp *qp = nic->qp_tbl[i];
        if (qp && qp->srq == srq && qp->srq_held)
            return EBUSY;
    }
    srq->xrcd->n_users--;
    srq->cq->n_qps--;
    for (uint32_t i = 0; i <= nic->qp_tbl_mask; i++) {
        struct nic_qp *qp = nic->qp_tbl[i];
        if (qp && qp->srq == srq) {
            qp->srq = NULL;
        }
    }
    return 0;
}

bool nic_xrc_tgt_bind(struct nic_qp *qp, uint32_t srqn)
{
    struct nic_srq *srq = nic_xrc_srq_find(qp->init.xrcd, srqn);
    if (!srq)
        return false;
    if (!qp->srq_held)
        qp->srq = srq;
    return qp->srq == srq;
}
