/* Shared receive queues (IBA 10.2.9; rdma-core ibv_create_srq): one ring
 * of receive WQEs that many QPs consume.
 *
 *   post      nic_srq_append: the CPU writes the WQE into the SRQ's ring
 *             in host memory (no doorbell, as for a QP's receive queue)
 *   take      a QP's responder needs a receive for a new message
 *             (resp.c / srd.c through nic_rq_cur): the head WQE is
 *             dequeued into the QP (qp->srq_wqe) and belongs to it until
 *             the receive completes - in success, in error, or flushed
 *             when that QP errors.  The SRQ's other WQEs are never
 *             flushed by a QP error.
 *   empty     a message that needs a receive finds none: RC NAKs it with
 *             RNR (the requester retries after its RNR timer), UC and UD
 *             drop it, EFA SRD NAKs it with RNR - exactly as with an empty
 *             receive queue of the QP's own.
 *   limit     armed with limit L > 0 (nic_srq_arm), the SRQ raises its
 *             limit event the first time a take leaves fewer than L WQEs
 *             posted, and disarms itself (limit = 0) - rxe's get_srq_wqe
 *             and the IBA's "SRQ Limit Reached" affiliated event.  Arming
 *             does not look at the current count: the event needs a take.
 *
 * Completions of an SRQ receive go to the receive CQ of the QP that took
 * it, with that QP's number in wc.qp_num.  The WQE's SGEs are checked
 * against the SRQ's PD.  SRQs are NIC objects with a number (srqn);
 * packets name one only in XRC (xrc.c: XRC SRQs have their own CQ and
 * are filled by the XRC target QPs of their domain). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "nic_priv.h"

void nic_srq_caps(const struct nic *nic, uint32_t *max_srq, uint32_t *max_wr, uint32_t *max_sge)
{
    const struct nic_params *p = &nic->p;
    uint32_t sge = p->max_srq_sge ? p->max_srq_sge : NIC_MAX_SGE;
    if (max_srq)
        *max_srq = p->max_srq ? p->max_srq : NIC_DEFAULT_MAX_SRQ;
    if (max_wr)
        *max_wr = p->max_srq_wr ? p->max_srq_wr : NIC_DEFAULT_MAX_SRQ_WR;
    if (max_sge)
        *max_sge = sge < NIC_MAX_SGE ? sge : NIC_MAX_SGE;
}

struct nic_srq *nic_srq_create(struct nic_pd *pd, uint32_t max_wr, uint32_t max_sge)
{
    if (!pd) {
        errno = EINVAL;
        return NULL;
    }
    struct nic *nic = pd->nic;
    uint32_t lim_srq, lim_wr, lim_sge;
    nic_srq_caps(nic, &lim_srq, &lim_wr, &lim_sge);
    if (max_wr == 0 || max_wr > lim_wr || max_sge > lim_sge) {
        errno = EINVAL;
        return NULL;
    }
    if (nic->n_srqs >= lim_srq) {
        errno = ENOMEM;
        return NULL;
    }
    if (nic->n_srqs == nic->cap_srqs) {
        uint32_t cap = nic->cap_srqs ? 2 * nic->cap_srqs : 8;
        struct nic_srq **t = realloc(nic->srqs, cap * sizeof(*t));
        if (!t) {
            errno = ENOMEM;
            return NULL;
        }
        nic->srqs = t;
        nic->cap_srqs = cap;
    }
    struct nic_srq *srq = calloc(1, sizeof(*srq));
    struct nic_recv_wqe *ring = calloc(max_wr, sizeof(*ring));
    if (!srq || !ring) {
        free(srq);
        free(ring);
        errno = ENOMEM;
        return NULL;
    }
    srq->nic = nic;
    /* 24-bit, as QPNs, from 1: an XRC send whose WR left remote_srqn 0
     * (never set) is then refused instead of landing in the first SRQ */
    srq->srqn = nic->next_srqn++ % NIC_PSN_MASK + 1;
    srq->pd = pd;
    srq->rq.ring = ring;
    srq->rq.depth = max_wr;
    srq->rq.cap = max_wr; /* allocated whole: one ring for many QPs */
    srq->max_sge = max_sge;
    pd->n_users++;
    nic->srqs[nic->n_srqs++] = srq;
    return srq;
}

static void srq_free(struct nic_srq *srq)
{
    free(srq->rq.ring);
    free(srq);
}

int nic_srq_destroy(struct nic_srq *srq)
{
    if (!srq)
        return EINVAL;
    if (srq->n_qps)
        return EBUSY;
    struct nic *nic = srq->nic;
    if (srq->xrcd) {
        int rc = nic_xrc_srq_gone(srq);
        if (rc)
            return rc;
    }
    for (uint32_t i = 0; i < nic->n_srqs; i++)
        if (nic->srqs[i] == srq) {
            nic->srqs[i] = nic->srqs[--nic->n_srqs];
            break;
        }
    srq->pd->n_users--;
    srq_free(srq);
    return 0;
}

void nic_srq_teardown(struct nic *nic)
{
    for (uint32_t i = 0; i < nic->n_srqs; i++)
        srq_free(nic->srqs[i]);
    free(nic->srqs);
    nic->srqs = NULL;
    nic->n_srqs = nic->cap_srqs = 0;
}

int nic_srq_append(struct nic_srq *srq, const struct nic_recv_wqe *wqe)
{
    if (!srq || !wqe)
        return EINVAL;
    if (nic_rq_count(&srq->rq) >= srq->rq.depth)
        return ENOMEM;
    *nic_rq_at(&srq->rq, srq->rq.tail) = *wqe;
    srq->rq.tail++;
    return 0;
}

void nic_srq_arm(struct nic_srq *srq, uint32_t limit)
{
    srq->limit = limit;
}

void nic_srq_set_limit_notify(struct nic_srq *srq, sim_cb_fn fn, void *a, void *b)
{
    srq->limit_fn = fn;
    srq->limit_a = a;
    srq->limit_b = b;
}

uint32_t nic_srq_count(const struct nic_srq *srq)
{
    return nic_rq_count(&srq->rq);
}

void nic_srq_take(struct nic_qp *qp)
{
    struct nic_srq *srq = qp->srq;
    qp->srq_wqe = *nic_rq_at(&srq->rq, srq->rq.head);
    qp->srq_held = true;
    srq->rq.head++;
    srq->taken++;
    if (srq->limit && nic_rq_count(&srq->rq) < srq->limit) {
        srq->limit = 0; /* disarmed: one event per arm */
        srq->events++;
        if (srq->limit_fn)
            srq->limit_fn(srq->nic->sim, srq->limit_a, srq->limit_b);
    }
}
