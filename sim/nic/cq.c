/* Completion queues.
 *
 * A CQE is produced by the engines with nic_cqe_write(): a cqe_bytes DMA
 * write over PCIe; when it lands (posted writes land in issue order, and a
 * CQE waits for relaxed-ordered data writes issued before it - dma.c - so
 * it lands after the data it completes), nic_cq_push() appends it to the
 * ring the application polls, wakes processes blocked on this CQ and on
 * the host, and fires an armed completion notification.
 *
 * Notification (IBA 11.4.2.2, rdma-core ibv_req_notify_cq): arming asks
 * for one event at the next CQE - or, armed "solicited only", at the next
 * CQE of a message with the Solicited Event bit or the next error CQE.
 * The arm is consumed when the event fires.
 *
 * Overrun (IBA 11.6.3.1 "CQ Error", as mlx5 hardware does it): a CQE that
 * finds the ring full puts the CQ in error: the CQE and every later one
 * are dropped (counted), error_fn raises the affiliated asynchronous event
 * (IBV_EVENT_CQ_ERR in the verbs shim), and each QP whose send or receive
 * CQ it is goes to the error state ("local work queue catastrophic
 * error": it can no longer report completions), its fatal_fn raising
 * IBV_EVENT_QP_FATAL.  CQEs already in the ring can still be polled.
 *
 * Lifetime: a CQ destroyed while CQE writes are in flight stays allocated
 * (a zombie) until the last one lands, and then drops it. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "nic_priv.h"

struct nic_cq_priv {
    struct nic_cq cq;
    uint32_t inflight; /* CQE writes issued, not landed */
    bool dead;
    uint64_t cqes_written; /* CQE compression: position in the group of eight */
};

static struct nic_cq_priv *cq_priv(struct nic_cq *cq)
{
    return (struct nic_cq_priv *)(void *)((char *)cq - offsetof(struct nic_cq_priv, cq));
}

static void cq_free(struct nic_cq_priv *c)
{
    struct nic *nic = c->cq.nic;
    for (uint32_t i = 0; i < nic->n_cqs; i++)
        if (nic->cqs[i] == &c->cq) {
            nic->cqs[i] = nic->cqs[--nic->n_cqs];
            break;
        }
    free(c->cq.ring);
    free(c->cq.ring_ps);
    free(c);
}

struct nic_cq *nic_cq_create(struct nic *nic, uint32_t depth)
{
    if (depth == 0 || depth > nic->p.max_cqe) {
        errno = EINVAL;
        return NULL;
    }
    if (nic->n_live_cqs >= nic->p.max_cq) {
        errno = ENOMEM;
        return NULL;
    }
    if (nic->n_cqs == nic->cap_cqs) {
        uint32_t cap = nic->cap_cqs ? 2 * nic->cap_cqs : 8;
        struct nic_cq **n = realloc(nic->cqs, cap * sizeof(*n));
        if (!n) {
            errno = ENOMEM;
            return NULL;
        }
        nic->cqs = n;
        nic->cap_cqs = cap;
    }
    struct nic_cq_priv *c = calloc(1, sizeof(*c));
    if (!c) {
        errno = ENOMEM;
        return NULL;
    }
    c->cq.ring = calloc(depth, sizeof(*c->cq.ring));
    c->cq.ring_ps = calloc(depth, sizeof(*c->cq.ring_ps));
    if (!c->cq.ring || !c->cq.ring_ps) {
        free(c->cq.ring);
        free(c->cq.ring_ps);
        free(c);
        errno = ENOMEM;
        return NULL;
    }
    c->cq.nic = nic;
    c->cq.host = nic->host;
    c->cq.id = nic->next_cq_id++;
    c->cq.depth = depth;
    sim_waitq_init(&c->cq.wq, "ibv_poll_cq");
    nic->cqs[nic->n_cqs++] = &c->cq;
    nic->n_live_cqs++;
    return &c->cq;
}

int nic_cq_destroy(struct nic_cq *cq)
{
    if (!cq)
        return EINVAL;
    if (cq->n_qps)
        return EBUSY;
    struct nic_cq_priv *c = cq_priv(cq);
    c->dead = true;
    cq->nic->n_live_cqs--;
    cq->notify_fn = NULL;
    cq->error_fn = NULL;
    if (!c->inflight)
        cq_free(c);
    return 0;
}

int nic_cq_poll_ts(struct nic_cq *cq, int n, struct ibv_wc *wc, sim_time_t *ts)
{
    int got = 0;
    while (got < n && cq->cons != cq->prod) {
        if (ts)
            ts[got] = cq->ring_ps[cq->cons % cq->depth];
        wc[got++] = cq->ring[cq->cons % cq->depth];
        cq->cons++;
    }
    return got;
}

int nic_cq_poll(struct nic_cq *cq, int n, struct ibv_wc *wc)
{
    return nic_cq_poll_ts(cq, n, wc, NULL);
}

int nic_cq_resize(struct nic_cq *cq, uint32_t depth)
{
    uint64_t held = cq->prod - cq->cons;
    if (depth == 0 || depth > cq->nic->p.max_cqe || depth < held)
        return EINVAL;
    struct ibv_wc *ring = calloc(depth, sizeof(*ring));
    sim_time_t *ring_ps = calloc(depth, sizeof(*ring_ps));
    if (!ring || !ring_ps) {
        free(ring);
        free(ring_ps);
        return ENOMEM;
    }
    for (uint64_t i = 0; i < held; i++) {
        ring[i] = cq->ring[(cq->cons + i) % cq->depth];
        ring_ps[i] = cq->ring_ps[(cq->cons + i) % cq->depth];
    }
    free(cq->ring);
    free(cq->ring_ps);
    cq->ring = ring;
    cq->ring_ps = ring_ps;
    cq->depth = depth;
    cq->cons = 0;
    cq->prod = held;
    return 0;
}

static void cq_overrun(struct nic_cq *cq)
{
    struct nic *nic = cq->nic;
    cq->overflowed = true;
    if (cq->error_fn)
        cq->error_fn(nic->sim, cq->error_a, cq->error_b);
    /* table order: deterministic */
    for (uint32_t i = 0; i <= nic->qp_tbl_mask; i++) {
        struct nic_qp *qp = nic->qp_tbl[i];
        if (!qp || (qp->init.send_cq != cq && qp->init.recv_cq != cq) || qp->state == IBV_QPS_ERR ||
            qp->state == IBV_QPS_RESET)
            continue;
        nic_qp_to_error(qp);
        if (qp->fatal_fn)
            qp->fatal_fn(nic->sim, qp->fatal_a, qp->fatal_b);
    }
}

static void cq_push(struct nic_cq *cq, const struct ibv_wc *wc, bool solicited)
{
    struct sim *sim = cq->nic->sim;
    if (sim_trace_enabled(sim)) {
        struct trace_rec r = {.kind = TRACE_CQE,
                              .opcode = (uint8_t)wc->opcode,
                              .status = (uint16_t)wc->status,
                              .node = cq->nic->node_id,
                              .qpn = wc->qp_num,
                              .addr = wc->wr_id,
                              .len = wc->byte_len,
                              .where = "cqe"};
        sim_trace(sim, &r);
    }
    if (cq->overflowed || cq->prod - cq->cons >= cq->depth) {
        cq->cqes_dropped++;
        if (!cq->overflowed)
            cq_overrun(cq);
        return;
    }
    cq->ring[cq->prod % cq->depth] = *wc;
    cq->ring_ps[cq->prod % cq->depth] = sim_now(sim);
    cq->prod++;
    if (!sim_waitq_empty(&cq->wq))
        sim_waitq_wake_all(sim, &cq->wq);
    if (cq->host)
        host_cqe_landed(cq->host);
    if (cq->armed && (!cq->armed_solicited_only || solicited || wc->status != IBV_WC_SUCCESS)) {
        cq->armed = false;
        cq->armed_solicited_only = false;
        if (cq->notify_fn)
            cq->notify_fn(sim, cq->notify_a, cq->notify_b);
    }
}

void nic_cq_push(struct nic_cq *cq, const struct ibv_wc *wc)
{
    cq_push(cq, wc, false);
}

void nic_cq_arm(struct nic_cq *cq, bool solicited_only)
{
    /* an arm for "any CQE" is not narrowed by a later solicited-only arm */
    cq->armed_solicited_only =
        cq->armed ? cq->armed_solicited_only && solicited_only : solicited_only;
    cq->armed = true;
}

void nic_cq_set_error_notify(struct nic_cq *cq, sim_cb_fn fn, void *a, void *b)
{
    cq->error_fn = fn;
    cq->error_a = a;
    cq->error_b = b;
}

void nic_cq_set_notify(struct nic_cq *cq, sim_cb_fn fn, void *a, void *b)
{
    cq->notify_fn = fn;
    cq->notify_a = a;
    cq->notify_b = b;
}

/* ---------------------------------------------------------------- CQE writes */

static void cqe_visible(struct sim *sim, void *a, void *b)
{
    (void)b;
    struct nic_op *op = a;
    struct nic_cq_priv *c = cq_priv(op->cq);
    if (op->tr_t0 != SIM_TIME_NEVER && nic_tr(op->nic)) /* val: the send WQE's index + 1 */
        nic_trace_span(op->nic, TRK_CQE, op->tr_t0, sim_now(sim) - op->tr_t0,
                       &(struct trace_rec){.qpn = op->wc.qp_num,
                                           .unit = op->cq->id,
                                           .opcode = (uint8_t)op->wc.opcode,
                                           .status = (uint16_t)op->wc.status,
                                           .addr = op->wc.wr_id,
                                           .val = op->tr_from,
                                           .len = op->wc.byte_len,
                                           .where = "cqe"});
    c->inflight--;
    op->nic->cnt.cqes_written++;
    if (!c->dead)
        cq_push(&c->cq, &op->wc, op->solicited);
    else if (!c->inflight)
        cq_free(c);
    nic_op_free(op);
}

/* The CQE write reached visibility in PCIe order.  CQEs carry no Relaxed
 * Ordering attribute: one never passes an earlier relaxed data write
 * (dma.c), so it becomes visible after every byte it reports. */
static void cqe_landed(struct sim *sim, void *a, void *b)
{
    struct nic_op *op = a;
    if (!nic_dma_wait_relaxed(op->nic, cqe_visible, a, b))
        cqe_visible(sim, a, b);
}

static void cqe_write(struct nic *nic, struct nic_cq *cq, const struct ibv_wc *wc, bool solicited,
                      uint64_t wqe_ref)
{
    struct nic_op *op = nic_op_alloc(nic, NIC_OP_CQE, NULL);
    op->cq = cq;
    op->wc = *wc;
    op->solicited = solicited;
    if (nic_tr(nic)) {
        op->tr_t0 = sim_now(nic->sim);
        op->tr_from = wqe_ref;
    }
    struct nic_cq_priv *c = cq_priv(cq);
    c->inflight++;
    /* CQE compression (mlx5): after a full CQE, the next seven of the same
     * CQ go as 8 B mini-CQEs (the session's title CQE carries the rest).
     * Approximation: the NIC merges CQEs of a CQ written close together;
     * here every CQ's CQEs are taken in groups of eight. */
    uint32_t bytes = nic->p.cqe_bytes;
    if (nic->p.cqe_compression && c->cqes_written++ % NIC_CQE_MINI_PER_TITLE) {
        bytes = NIC_MINI_CQE_BYTES;
        nic->cnt.cqes_compressed++;
    }
    /* through the in-order translation unit (no MR segment): a CQE never
     * reaches PCIe before the data writes issued before it */
    nic_mem_write(nic, op, PCIE_K_CQE, bytes, cqe_landed, NULL);
}

void nic_cqe_write(struct nic *nic, struct nic_cq *cq, const struct ibv_wc *wc, bool solicited)
{
    cqe_write(nic, cq, wc, solicited, 0);
}

void nic_cqe_write_wqe(struct nic *nic, struct nic_cq *cq, const struct ibv_wc *wc,
                       uint64_t wqe_idx)
{
    cqe_write(nic, cq, wc, false, wqe_idx + 1);
}

void nic_cq_teardown(struct nic *nic)
{
    for (uint32_t i = 0; i < nic->n_cqs; i++) {
        struct nic_cq_priv *c = cq_priv(nic->cqs[i]);
        free(c->cq.ring);
        free(c->cq.ring_ps);
        free(c);
    }
    free(nic->cqs);
    nic->cqs = NULL;
    nic->n_cqs = 0;
}
