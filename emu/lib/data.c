/* The data path of the drop-in library: posting into shared rings,
 * polling the shared CQ ring, arming, completion and async events.
 *
 * ibv_post_send / ibv_post_recv are the verbs shim's shim_post_send /
 * shim_post_recv (verbs_shim/post.c, built into this library): the same
 * checks, errnos and WQE building as in simulation.  They reach "the NIC"
 * through the functions below, which here mean: write the WQE into the
 * QP's ring in shared memory (a slot is free once the NIC completed the
 * WQE that used it, as the daemon publishes), publish the producer index,
 * and for sends ring the doorbell (an eventfd write: the MMIO write of
 * this world).  Receive rings have no doorbell, as on hardware: the daemon
 * looks at them whenever the model runs. */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "emu/lib/client.h"

/* ---------------------------------------------------------------- the NIC, as post.c sees it */

const char *const nic_transport_names[] = {"ib", "ib-ar", "efa-srd", "1rma", NULL};

const struct nic_params *nic_get_params(const struct nic *nic)
{
    return &nic->p;
}

/* The daemon keeps the count (nic counters in the results). */
void nic_note_wr_refused(struct nic *nic)
{
    struct emu_req q = {.op = EMU_OP_WR_REFUSED};
    cl_call(nic->ctx, &q, NULL, NULL, 0, NULL);
}

static void doorbell(struct cl_context *ctx)
{
    uint64_t one = 1;
    ssize_t n = write(ctx->db_fd, &one, sizeof(one));
    (void)n; /* an eventfd write of 1 fails only at 2^64-2 pending */
}

int nic_sq_append(struct nic_qp *nqp, const struct nic_send_wqe *wqe)
{
    struct cl_qp *qp = cl_container_of(nqp, struct cl_qp, nqp);
    uint64_t comp = atomic_load_explicit(&qp->shm->sq_comp, memory_order_acquire);
    if (qp->sq_tail - comp >= nqp->sq_depth)
        return ENOMEM;
    struct emu_send_wqe *e = &emu_qp_sq(qp->shm)[qp->sq_tail % nqp->sq_depth];
    struct nic_send_wqe *w = &e->w;
    /* the inline bytes only as far as they are used */
    memcpy(w, wqe, offsetof(struct nic_send_wqe, inline_data));
    if (wqe->send_flags & IBV_SEND_INLINE)
        memcpy(e->inline_bytes, wqe->inline_data,
               wqe->length < NIC_MAX_INLINE_BYTES ? wqe->length : NIC_MAX_INLINE_BYTES);
    w->inline_data = NULL; /* the daemon points it at its copy of inline_bytes */
    w->inline_cap = 0;
    w->signaled = wqe->signaled; /* after the inline bytes in the struct */
    qp->sq_tail++;
    return 0;
}

void nic_sq_doorbell(struct nic_qp *nqp)
{
    struct cl_qp *qp = cl_container_of(nqp, struct cl_qp, nqp);
    atomic_store_explicit(&qp->shm->sq_tail, qp->sq_tail, memory_order_release);
    doorbell(nqp->nic->ctx);
}

/* The provider's BlueFlame decision (verbs_shim/post.c) needs a simulated
 * host; an emulated process has none, so the daemon's NIC decides. */
void nic_sq_ring(struct nic_qp *nqp, bool wqe_with_doorbell)
{
    (void)wqe_with_doorbell;
    nic_sq_doorbell(nqp);
}

int nic_rq_append(struct nic_qp *nqp, const struct nic_recv_wqe *wqe)
{
    struct cl_qp *qp = cl_container_of(nqp, struct cl_qp, nqp);
    if (qp->sqp.srq || !nqp->rq.depth)
        return ENOMEM;
    uint64_t head = atomic_load_explicit(&qp->shm->rq_head, memory_order_acquire);
    if (qp->rq_tail - head >= nqp->rq.depth)
        return ENOMEM;
    emu_qp_rq(qp->shm)[qp->rq_tail % nqp->rq.depth] = *wqe;
    qp->rq_tail++;
    atomic_store_explicit(&qp->shm->rq_tail, qp->rq_tail, memory_order_release);
    return 0;
}

/* ---------------------------------------------------------------- posting */

static struct cl_qp *qp_of(struct ibv_qp *qp)
{
    return cl_container_of(qp, struct cl_qp, sqp.qp);
}

/* The NIC's QP state as the daemon published it (ERR after a failure). */
static void refresh_state(struct cl_qp *qp)
{
    qp->nqp.state = (enum ibv_qp_state)atomic_load_explicit(&qp->shm->state, memory_order_acquire);
}

static int cl_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr, struct ibv_send_wr **bad_wr)
{
    struct cl_qp *qp = qp_of(ibqp);
    pthread_spin_lock(&qp->sq_lock);
    refresh_state(qp);
    int rc = shim_post_send(ibqp, wr, bad_wr);
    pthread_spin_unlock(&qp->sq_lock);
    return rc;
}

static int cl_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad_wr)
{
    struct cl_qp *qp = qp_of(ibqp);
    pthread_spin_lock(&qp->rq_lock);
    refresh_state(qp);
    int rc = shim_post_recv(ibqp, wr, bad_wr);
    pthread_spin_unlock(&qp->rq_lock);
    return rc;
}

/* As the shim's srq.c: EINVAL for too many SGEs or a NULL list, ENOMEM
 * when full; *bad_wr at the first WR not posted. */
static int cl_post_srq_recv(struct ibv_srq *ibsrq, struct ibv_recv_wr *wr,
                            struct ibv_recv_wr **bad_wr)
{
    if (!ibsrq || !wr) {
        if (bad_wr)
            *bad_wr = wr;
        return EINVAL;
    }
    struct cl_srq *s = cl_container_of(ibsrq, struct cl_srq, ssrq.srq);
    int rc = 0;
    struct nic_recv_wqe wqe;
    pthread_spin_lock(&s->lock);
    for (; wr; wr = wr->next) {
        rc = shim_recv_wqe(wr, s->ssrq.max_sge, &wqe);
        uint64_t head = atomic_load_explicit(&s->shm->head, memory_order_acquire);
        if (!rc && s->tail - head >= s->depth)
            rc = ENOMEM;
        if (rc)
            break;
        emu_srq_ring(s->shm)[s->tail % s->depth] = wqe;
        s->tail++;
    }
    atomic_store_explicit(&s->shm->tail, s->tail, memory_order_release);
    pthread_spin_unlock(&s->lock);
    if (rc && bad_wr)
        *bad_wr = wr;
    return rc;
}

/* ---------------------------------------------------------------- completions */

static int cl_poll_cq(struct ibv_cq *ibcq, int num_entries, struct ibv_wc *wc)
{
    struct cl_cq *cq = cl_container_of(ibcq, struct cl_cq, cq);
    if (num_entries > 0 && !wc)
        return -1;
    pthread_spin_lock(&cq->lock);
    uint64_t prod = atomic_load_explicit(&cq->shm->prod, memory_order_acquire);
    int n = 0;
    while (n < num_entries && cq->cons != prod) {
        wc[n++] = cq->shm->ring[cq->cons % cq->depth];
        cq->cons++;
    }
    if (n)
        atomic_store_explicit(&cq->shm->cons, cq->cons, memory_order_release);
    pthread_spin_unlock(&cq->lock);
    /* An empty poll gives up the CPU: here the "NIC" is a process
     * (rnicsimd) that needs a CPU to make the CQE this loop waits for, and
     * programs that spin on a CQ would otherwise take it from the daemon
     * whenever there are fewer cores than spinning processes. */
    if (n == 0)
        sched_yield();
    return n;
}

/* One word in the CQ's shared page: the daemon takes it at the doorbell.
 * An arm not yet taken is merged, as the NIC merges arms: an arm for any
 * CQE is not narrowed by a later solicited-only one. */
static int cl_req_notify_cq(struct ibv_cq *ibcq, int solicited_only)
{
    struct cl_cq *cq = cl_container_of(ibcq, struct cl_cq, cq);
    uint64_t seen = atomic_load_explicit(&cq->shm->prod, memory_order_acquire);
    uint64_t old = atomic_load_explicit(&cq->shm->arm, memory_order_acquire), want;
    do {
        bool sol = solicited_only != 0;
        uint64_t from = seen;
        if (old & EMU_ARM_VALID) {
            sol = sol && (old & EMU_ARM_SOLICITED);
            from = old >> 2;
        }
        want = from << 2 | (sol ? EMU_ARM_SOLICITED : 0) | EMU_ARM_VALID;
    } while (!atomic_compare_exchange_weak_explicit(&cq->shm->arm, &old, want, memory_order_acq_rel,
                                                    memory_order_acquire));
    doorbell(cl_ctx(ibcq->context));
    return 0;
}

/* Blocks in read(2) on the channel's pipe, like the kernel's event file
 * (a non-blocking fd gives -1 / EAGAIN when nothing is queued). */
int ibv_get_cq_event(struct ibv_comp_channel *channel, struct ibv_cq **cq, void **cq_context)
{
    if (!channel || !cq || !cq_context) {
        errno = EINVAL;
        return -1;
    }
    struct emu_comp_event ev;
    ssize_t n;
    do
        n = read(channel->fd, &ev, sizeof(ev));
    while (n < 0 && errno == EINTR);
    if (n != (ssize_t)sizeof(ev)) {
        if (n >= 0)
            errno = EIO; /* the daemon went away */
        return -1;
    }
    struct ibv_cq *c = (struct ibv_cq *)(uintptr_t)ev.cookie;
    struct cl_cq *cc = cl_container_of(c, struct cl_cq, cq);
    pthread_mutex_lock(&c->mutex);
    cc->events_delivered++;
    pthread_mutex_unlock(&c->mutex);
    *cq = c;
    *cq_context = c->cq_context;
    return 0;
}

void ibv_ack_cq_events(struct ibv_cq *cq, unsigned int nevents)
{
    if (!cq)
        return;
    pthread_mutex_lock(&cq->mutex);
    cq->comp_events_completed += nevents;
    pthread_cond_signal(&cq->cond);
    pthread_mutex_unlock(&cq->mutex);
}

int ibv_get_async_event(struct ibv_context *context, struct ibv_async_event *event)
{
    if (!context || !event) {
        errno = EINVAL;
        return -1;
    }
    struct emu_async_event ev;
    ssize_t n;
    do
        n = read(context->async_fd, &ev, sizeof(ev));
    while (n < 0 && errno == EINTR);
    if (n != (ssize_t)sizeof(ev)) {
        if (n >= 0)
            errno = EIO;
        return -1;
    }
    memset(event, 0, sizeof(*event));
    event->event_type = (enum ibv_event_type)ev.type;
    if (ev.type == IBV_EVENT_SRQ_LIMIT_REACHED)
        event->element.srq = (struct ibv_srq *)(uintptr_t)ev.cookie;
    return 0;
}

void ibv_ack_async_event(struct ibv_async_event *event)
{
    if (event && event->event_type == IBV_EVENT_SRQ_LIMIT_REACHED && event->element.srq) {
        struct ibv_srq *srq = event->element.srq;
        pthread_mutex_lock(&srq->mutex);
        srq->events_completed++;
        pthread_cond_signal(&srq->cond);
        pthread_mutex_unlock(&srq->mutex);
    }
}

/* ---------------------------------------------------------------- the ops table */

static struct ibv_mw *unsupported_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type)
{
    (void)pd;
    (void)type;
    errno = EOPNOTSUPP;
    return NULL;
}

static int unsupported_bind_mw(struct ibv_qp *qp, struct ibv_mw *mw, struct ibv_mw_bind *mw_bind)
{
    (void)qp;
    (void)mw;
    (void)mw_bind;
    return EOPNOTSUPP;
}

static int unsupported_dealloc_mw(struct ibv_mw *mw)
{
    (void)mw;
    return EOPNOTSUPP;
}

static void *unsupported_compat(void)
{
    errno = EOPNOTSUPP;
    return NULL;
}

static int compat_query_device(struct ibv_context *context, struct ibv_device_attr *attr)
{
    return ibv_query_device(context, attr);
}

static int compat_query_port(struct ibv_context *context, uint8_t port_num,
                             struct _compat_ibv_port_attr *port_attr)
{
    return cl_query_port_ex(context, port_num, (struct ibv_port_attr *)(void *)port_attr,
                            offsetof(struct ibv_port_attr, port_cap_flags2));
}

/* The same shape as the shim's context.c: the five data-path ops always
 * set, memory windows EOPNOTSUPP, the 1.0-era slots harmless; of the
 * extended ops only query_port and query_device_ex (the inline wrappers
 * of the others fall back or answer EOPNOTSUPP). */
void cl_context_set_ops(struct cl_context *ctx)
{
    struct ibv_context_ops *ops = &ctx->vctx.context.ops;
    ops->_compat_query_device = compat_query_device;
    ops->_compat_query_port = compat_query_port;
    ops->_compat_alloc_pd = unsupported_compat;
    ops->_compat_dealloc_pd = unsupported_compat;
    ops->_compat_reg_mr = unsupported_compat;
    ops->_compat_rereg_mr = unsupported_compat;
    ops->_compat_dereg_mr = unsupported_compat;
    ops->alloc_mw = unsupported_alloc_mw;
    ops->bind_mw = unsupported_bind_mw;
    ops->dealloc_mw = unsupported_dealloc_mw;
    ops->_compat_create_cq = unsupported_compat;
    ops->poll_cq = cl_poll_cq;
    ops->req_notify_cq = cl_req_notify_cq;
    ops->_compat_cq_event = unsupported_compat;
    ops->_compat_resize_cq = unsupported_compat;
    ops->_compat_destroy_cq = unsupported_compat;
    ops->_compat_create_srq = unsupported_compat;
    ops->_compat_modify_srq = unsupported_compat;
    ops->_compat_query_srq = unsupported_compat;
    ops->_compat_destroy_srq = unsupported_compat;
    ops->post_srq_recv = cl_post_srq_recv;
    ops->_compat_create_qp = unsupported_compat;
    ops->_compat_query_qp = unsupported_compat;
    ops->_compat_modify_qp = unsupported_compat;
    ops->_compat_destroy_qp = unsupported_compat;
    ops->post_send = cl_post_send;
    ops->post_recv = cl_post_recv;
    ops->_compat_create_ah = unsupported_compat;
    ops->_compat_destroy_ah = unsupported_compat;
    ops->_compat_attach_mcast = unsupported_compat;
    ops->_compat_detach_mcast = unsupported_compat;
    ops->_compat_async_event = unsupported_compat;
    ctx->vctx.query_port = cl_query_port_ex;
    ctx->vctx.query_device_ex = cl_query_device_ex;
}
