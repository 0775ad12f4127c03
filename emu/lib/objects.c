/* Control verbs of the drop-in library: each is one call to rnicsimd,
 * where the verbs shim makes the object on the client's host with its
 * checks and errnos (emu/daemon/client.c).  What a program can get wrong
 * without the daemon seeing it (a NULL object, objects of two contexts)
 * is answered here the way the shim answers it. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "emu/lib/client.h"

#undef ibv_reg_mr
#undef ibv_reg_mr_iova

static struct cl_context *ctx_of(struct ibv_context *c)
{
    return cl_ctx(c);
}

/* ---------------------------------------------------------------- PD */

struct ibv_pd *ibv_alloc_pd(struct ibv_context *context)
{
    if (!context) {
        errno = EINVAL;
        return NULL;
    }
    struct emu_req q = {.op = EMU_OP_ALLOC_PD};
    struct emu_rep r;
    int rc = cl_call(ctx_of(context), &q, &r, NULL, 0, NULL);
    if (rc) {
        errno = rc;
        return NULL;
    }
    struct cl_pd *pd = calloc(1, sizeof(*pd));
    if (!pd) {
        errno = ENOMEM;
        return NULL;
    }
    pd->handle = r.handle;
    pd->pd.context = context;
    pd->pd.handle = r.handle;
    return &pd->pd;
}

static int destroy_call(struct ibv_context *context, enum emu_op op, uint32_t handle)
{
    struct emu_req q = {.op = op, .handle = handle};
    struct emu_rep r;
    return cl_call(ctx_of(context), &q, &r, NULL, 0, NULL);
}

int ibv_dealloc_pd(struct ibv_pd *pd)
{
    if (!pd)
        return EINVAL;
    struct cl_pd *p = cl_container_of(pd, struct cl_pd, pd);
    int rc = destroy_call(pd->context, EMU_OP_DEALLOC_PD, p->handle);
    if (!rc)
        free(p);
    return rc;
}

/* ---------------------------------------------------------------- MR */

struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t length, uint64_t iova,
                                unsigned int access)
{
    if (!pd) {
        errno = EINVAL;
        return NULL;
    }
    struct emu_req q = {.op = EMU_OP_REG_MR,
                        .handle = cl_container_of(pd, struct cl_pd, pd)->handle};
    q.u.reg_mr.addr = (uintptr_t)addr;
    q.u.reg_mr.length = length;
    q.u.reg_mr.iova = iova;
    q.u.reg_mr.access = access;
    struct emu_rep r;
    int rc = cl_call(ctx_of(pd->context), &q, &r, NULL, 0, NULL);
    if (rc) {
        errno = rc;
        return NULL;
    }
    struct cl_mr *mr = calloc(1, sizeof(*mr));
    if (!mr) {
        errno = ENOMEM;
        return NULL;
    }
    mr->handle = r.handle;
    mr->mr.context = pd->context;
    mr->mr.pd = pd;
    mr->mr.addr = addr;
    mr->mr.length = length;
    mr->mr.handle = r.handle;
    mr->mr.lkey = r.u.mr.lkey;
    mr->mr.rkey = r.u.mr.rkey;
    return &mr->mr;
}

struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t length, int access)
{
    return ibv_reg_mr_iova2(pd, addr, length, (uintptr_t)addr, (unsigned)access);
}

struct ibv_mr *ibv_reg_mr_iova(struct ibv_pd *pd, void *addr, size_t length, uint64_t iova,
                               int access)
{
    return ibv_reg_mr_iova2(pd, addr, length, iova, (unsigned)access);
}

int ibv_dereg_mr(struct ibv_mr *mr)
{
    if (!mr)
        return EINVAL;
    struct cl_mr *m = cl_container_of(mr, struct cl_mr, mr);
    int rc = destroy_call(mr->context, EMU_OP_DEREG_MR, m->handle);
    if (!rc)
        free(m);
    return rc;
}

/* ---------------------------------------------------------------- completion channels */

struct ibv_comp_channel *ibv_create_comp_channel(struct ibv_context *context)
{
    if (!context) {
        errno = EINVAL;
        return NULL;
    }
    struct emu_req q = {.op = EMU_OP_CREATE_CHANNEL};
    struct emu_rep r;
    int fd, nfds = 0;
    int rc = cl_call(ctx_of(context), &q, &r, &fd, 1, &nfds);
    if (!rc && nfds != 1)
        rc = EPROTO;
    if (rc) {
        errno = rc;
        return NULL;
    }
    struct cl_channel *ch = calloc(1, sizeof(*ch));
    if (!ch) {
        close(fd);
        errno = ENOMEM;
        return NULL;
    }
    ch->handle = r.handle;
    ch->ch.context = context;
    ch->ch.fd = fd; /* the pipe the daemon writes events to: pollable */
    ch->ch.refcnt = 0;
    return &ch->ch;
}

int ibv_destroy_comp_channel(struct ibv_comp_channel *channel)
{
    if (!channel)
        return EINVAL;
    if (channel->refcnt)
        return EBUSY;
    struct cl_channel *ch = cl_container_of(channel, struct cl_channel, ch);
    int rc = destroy_call(channel->context, EMU_OP_DESTROY_CHANNEL, ch->handle);
    if (rc)
        return rc;
    close(channel->fd);
    free(ch);
    return 0;
}

/* ---------------------------------------------------------------- CQ */

struct ibv_cq *ibv_create_cq(struct ibv_context *context, int cqe, void *cq_context,
                             struct ibv_comp_channel *channel, int comp_vector)
{
    if (!context || (channel && channel->context != context)) {
        errno = EINVAL;
        return NULL;
    }
    struct cl_cq *cq = calloc(1, sizeof(*cq));
    if (!cq) {
        errno = ENOMEM;
        return NULL;
    }
    struct emu_req q = {.op = EMU_OP_CREATE_CQ};
    q.u.create_cq.channel = channel ? cl_container_of(channel, struct cl_channel, ch)->handle : 0;
    q.u.create_cq.comp_vector = (uint32_t)comp_vector;
    q.u.create_cq.cqe = cqe;
    q.u.create_cq.cookie = (uintptr_t)&cq->cq;
    struct emu_rep r;
    int fd, nfds = 0;
    int rc = cl_call(ctx_of(context), &q, &r, &fd, 1, &nfds);
    if (!rc && nfds != 1)
        rc = EPROTO;
    if (rc) {
        free(cq);
        errno = rc;
        return NULL;
    }
    cq->handle = r.handle;
    cq->depth = r.u.cq.depth;
    cq->shm_bytes = emu_cq_shm_bytes(cq->depth);
    cq->shm = cl_map(fd, cq->shm_bytes);
    if (!cq->shm) {
        int e = errno;
        destroy_call(context, EMU_OP_DESTROY_CQ, cq->handle);
        free(cq);
        errno = e;
        return NULL;
    }
    pthread_spin_init(&cq->lock, PTHREAD_PROCESS_PRIVATE);
    cq->cq.context = context;
    cq->cq.channel = channel;
    cq->cq.cq_context = cq_context;
    cq->cq.handle = r.handle;
    cq->cq.cqe = cqe;
    pthread_mutex_init(&cq->cq.mutex, NULL);
    pthread_cond_init(&cq->cq.cond, NULL);
    if (channel)
        channel->refcnt++;
    return &cq->cq;
}

/* As rdma-core: once the daemon has destroyed it, wait until every event
 * ibv_get_cq_event delivered has been acknowledged. */
int ibv_destroy_cq(struct ibv_cq *cq)
{
    if (!cq)
        return EINVAL;
    struct cl_cq *c = cl_container_of(cq, struct cl_cq, cq);
    int rc = destroy_call(cq->context, EMU_OP_DESTROY_CQ, c->handle);
    if (rc)
        return rc;
    if (cq->channel)
        cq->channel->refcnt--;
    pthread_mutex_lock(&cq->mutex);
    while (cq->comp_events_completed != c->events_delivered)
        pthread_cond_wait(&cq->cond, &cq->mutex);
    pthread_mutex_unlock(&cq->mutex);
    munmap(c->shm, c->shm_bytes);
    pthread_spin_destroy(&c->lock);
    pthread_cond_destroy(&cq->cond);
    pthread_mutex_destroy(&cq->mutex);
    free(c);
    return 0;
}

/* ---------------------------------------------------------------- SRQ */

struct ibv_srq *ibv_create_srq(struct ibv_pd *pd, struct ibv_srq_init_attr *init)
{
    if (!pd || !init) {
        errno = EINVAL;
        return NULL;
    }
    struct cl_srq *s = calloc(1, sizeof(*s));
    if (!s) {
        errno = ENOMEM;
        return NULL;
    }
    struct emu_req q = {.op = EMU_OP_CREATE_SRQ,
                        .handle = cl_container_of(pd, struct cl_pd, pd)->handle};
    q.u.srq.attr = init->attr;
    q.u.srq.cookie = (uintptr_t)&s->ssrq.srq;
    struct emu_rep r;
    int fd, nfds = 0;
    int rc = cl_call(ctx_of(pd->context), &q, &r, &fd, 1, &nfds);
    if (!rc && nfds != 1)
        rc = EPROTO;
    if (rc) {
        free(s);
        errno = rc;
        return NULL;
    }
    s->handle = r.handle;
    s->depth = r.u.srq_created.depth;
    s->ssrq.max_wr = r.u.srq_created.depth;
    s->ssrq.max_sge = r.u.srq_created.max_sge;
    s->shm_bytes = emu_srq_shm_bytes(s->depth);
    s->shm = cl_map(fd, s->shm_bytes);
    if (!s->shm) {
        int e = errno;
        destroy_call(pd->context, EMU_OP_DESTROY_SRQ, s->handle);
        free(s);
        errno = e;
        return NULL;
    }
    pthread_spin_init(&s->lock, PTHREAD_PROCESS_PRIVATE);
    struct ibv_srq *srq = &s->ssrq.srq;
    srq->context = pd->context;
    srq->srq_context = init->srq_context;
    srq->pd = pd;
    srq->handle = r.u.srq_created.srqn;
    pthread_mutex_init(&srq->mutex, NULL);
    pthread_cond_init(&srq->cond, NULL);
    return srq;
}

int ibv_modify_srq(struct ibv_srq *srq, struct ibv_srq_attr *attr, int mask)
{
    if (!srq || !attr)
        return EINVAL;
    struct cl_srq *s = cl_container_of(srq, struct cl_srq, ssrq.srq);
    struct emu_req q = {.op = EMU_OP_MODIFY_SRQ, .handle = s->handle};
    q.u.srq.attr = *attr;
    q.u.srq.mask = mask;
    struct emu_rep r;
    return cl_call(ctx_of(srq->context), &q, &r, NULL, 0, NULL);
}

int ibv_query_srq(struct ibv_srq *srq, struct ibv_srq_attr *attr)
{
    if (!srq || !attr)
        return EINVAL;
    struct cl_srq *s = cl_container_of(srq, struct cl_srq, ssrq.srq);
    struct emu_req q = {.op = EMU_OP_QUERY_SRQ, .handle = s->handle};
    struct emu_rep r;
    int rc = cl_call(ctx_of(srq->context), &q, &r, NULL, 0, NULL);
    if (!rc)
        *attr = r.u.srq;
    return rc;
}

int ibv_destroy_srq(struct ibv_srq *srq)
{
    if (!srq)
        return EINVAL;
    struct cl_srq *s = cl_container_of(srq, struct cl_srq, ssrq.srq);
    int rc = destroy_call(srq->context, EMU_OP_DESTROY_SRQ, s->handle);
    if (rc)
        return rc;
    munmap(s->shm, s->shm_bytes);
    pthread_spin_destroy(&s->lock);
    pthread_cond_destroy(&srq->cond);
    pthread_mutex_destroy(&srq->mutex);
    free(s);
    return 0;
}

/* ---------------------------------------------------------------- QP */

struct ibv_qp *ibv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *init)
{
    if (!pd || !init || !init->send_cq || !init->recv_cq || init->send_cq->context != pd->context ||
        init->recv_cq->context != pd->context || (init->srq && init->srq->context != pd->context)) {
        errno = EINVAL;
        return NULL;
    }
    struct cl_context *ctx = ctx_of(pd->context);
    struct emu_req q = {.op = EMU_OP_CREATE_QP,
                        .handle = cl_container_of(pd, struct cl_pd, pd)->handle};
    q.u.create_qp.send_cq = cl_container_of(init->send_cq, struct cl_cq, cq)->handle;
    q.u.create_qp.recv_cq = cl_container_of(init->recv_cq, struct cl_cq, cq)->handle;
    struct cl_srq *srq = init->srq ? cl_container_of(init->srq, struct cl_srq, ssrq.srq) : NULL;
    q.u.create_qp.srq = srq ? srq->handle : 0;
    q.u.create_qp.qp_type = (uint32_t)init->qp_type;
    q.u.create_qp.sq_sig_all = init->sq_sig_all != 0;
    q.u.create_qp.cap = init->cap;
    struct emu_rep r;
    int fd, nfds = 0;
    int rc = cl_call(ctx, &q, &r, &fd, 1, &nfds);
    if (!rc && nfds != 1)
        rc = EPROTO;
    if (rc) {
        errno = rc;
        return NULL;
    }
    struct cl_qp *qp = calloc(1, sizeof(*qp));
    size_t bytes = emu_qp_shm_bytes(r.u.qp.sq_depth, r.u.qp.rq_depth);
    struct emu_qp_shm *shm = qp ? cl_map(fd, bytes) : NULL;
    if (!qp || !shm) {
        if (!qp)
            close(fd);
        destroy_call(pd->context, EMU_OP_DESTROY_QP, r.handle);
        free(qp);
        errno = ENOMEM;
        return NULL;
    }
    qp->handle = r.handle;
    qp->shm = shm;
    qp->shm_bytes = bytes;
    pthread_spin_init(&qp->sq_lock, PTHREAD_PROCESS_PRIVATE);
    pthread_spin_init(&qp->rq_lock, PTHREAD_PROCESS_PRIVATE);
    /* what post.c reads */
    qp->nqp.nic = &ctx->nic;
    qp->nqp.qpn = r.u.qp.qpn;
    qp->nqp.state = IBV_QPS_RESET;
    qp->nqp.sq_depth = r.u.qp.sq_depth;
    qp->nqp.rq.depth = r.u.qp.rq_depth;
    struct shim_qp *sqp = &qp->sqp;
    sqp->nqp = &qp->nqp;
    sqp->cap = r.u.qp.cap;
    sqp->sq_sig_all = init->sq_sig_all != 0;
    sqp->srq = srq ? &srq->ssrq : NULL;
    init->cap = r.u.qp.cap;
    struct ibv_qp *pub = &sqp->qp;
    pub->context = pd->context;
    pub->qp_context = init->qp_context;
    pub->pd = pd;
    pub->send_cq = init->send_cq;
    pub->recv_cq = init->recv_cq;
    pub->srq = init->srq;
    pub->handle = r.handle;
    pub->qp_num = r.u.qp.qpn;
    pub->state = IBV_QPS_RESET;
    pub->qp_type = init->qp_type;
    pthread_mutex_init(&pub->mutex, NULL);
    pthread_cond_init(&pub->cond, NULL);
    return pub;
}

static struct cl_qp *cl_qp_of(struct ibv_qp *qp)
{
    return cl_container_of(qp, struct cl_qp, sqp.qp);
}

int ibv_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int attr_mask)
{
    if (!qp || !attr)
        return EINVAL;
    struct cl_qp *c = cl_qp_of(qp);
    struct emu_req q = {.op = EMU_OP_MODIFY_QP, .handle = c->handle};
    q.u.modify_qp.attr = *attr;
    q.u.modify_qp.mask = attr_mask;
    struct emu_rep r;
    int rc = cl_call(ctx_of(qp->context), &q, &r, NULL, 0, NULL);
    if (rc)
        return rc;
    if (attr_mask & IBV_QP_STATE) {
        qp->state = attr->qp_state;
        c->nqp.state = attr->qp_state;
        if (attr->qp_state == IBV_QPS_RESET) { /* the rings start again at 0 */
            c->sq_tail = c->rq_tail = 0;
            c->nqp.attr.qkey = 0;
        }
    }
    if (attr_mask & IBV_QP_QKEY)
        c->nqp.attr.qkey = attr->qkey;
    return 0;
}

int ibv_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int attr_mask,
                 struct ibv_qp_init_attr *init_attr)
{
    if (!qp || !attr || !init_attr)
        return EINVAL;
    struct cl_qp *c = cl_qp_of(qp);
    struct emu_req q = {.op = EMU_OP_QUERY_QP, .handle = c->handle};
    q.u.modify_qp.mask = attr_mask;
    struct emu_rep r;
    int rc = cl_call(ctx_of(qp->context), &q, &r, NULL, 0, NULL);
    if (rc)
        return rc;
    *attr = r.u.query_qp.attr;
    memset(init_attr, 0, sizeof(*init_attr));
    init_attr->qp_context = qp->qp_context;
    init_attr->send_cq = qp->send_cq;
    init_attr->recv_cq = qp->recv_cq;
    init_attr->srq = qp->srq;
    init_attr->cap = r.u.query_qp.init.cap;
    init_attr->qp_type = qp->qp_type;
    init_attr->sq_sig_all = r.u.query_qp.init.sq_sig_all;
    qp->state = attr->qp_state;
    return 0;
}

int ibv_destroy_qp(struct ibv_qp *qp)
{
    if (!qp)
        return EINVAL;
    struct cl_qp *c = cl_qp_of(qp);
    int rc = destroy_call(qp->context, EMU_OP_DESTROY_QP, c->handle);
    if (rc)
        return rc;
    munmap(c->shm, c->shm_bytes);
    pthread_spin_destroy(&c->sq_lock);
    pthread_spin_destroy(&c->rq_lock);
    pthread_cond_destroy(&qp->cond);
    pthread_mutex_destroy(&qp->mutex);
    free(c);
    return 0;
}

/* ---------------------------------------------------------------- AH */

struct ibv_ah *ibv_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr)
{
    if (!pd || !attr) {
        errno = EINVAL;
        return NULL;
    }
    struct emu_req q = {.op = EMU_OP_CREATE_AH,
                        .handle = cl_container_of(pd, struct cl_pd, pd)->handle};
    q.u.ah = *attr;
    struct emu_rep r;
    int rc = cl_call(ctx_of(pd->context), &q, &r, NULL, 0, NULL);
    if (rc) {
        errno = rc;
        return NULL;
    }
    struct cl_ah *ah = calloc(1, sizeof(*ah));
    if (!ah) {
        errno = ENOMEM;
        return NULL;
    }
    ah->handle = r.handle;
    ah->sah.attr = *attr;
    ah->sah.node = r.u.ah.node;
    ah->sah.ah.context = pd->context;
    ah->sah.ah.pd = pd;
    ah->sah.ah.handle = r.handle;
    return &ah->sah.ah;
}

int ibv_destroy_ah(struct ibv_ah *ah)
{
    if (!ah)
        return EINVAL;
    struct cl_ah *a = cl_container_of(ah, struct cl_ah, sah.ah);
    int rc = destroy_call(ah->context, EMU_OP_DESTROY_AH, a->handle);
    if (!rc)
        free(a);
    return rc;
}

/* The GRH slot of the receive is in this process: its 40 bytes go to the
 * daemon, where the shim's ibv_init_ah_from_wc reads them. */
int ibv_init_ah_from_wc(struct ibv_context *context, uint8_t port_num, struct ibv_wc *wc,
                        struct ibv_grh *grh, struct ibv_ah_attr *ah_attr)
{
    if (!context || !wc || !grh || !ah_attr) {
        errno = EINVAL;
        return -1;
    }
    struct emu_req q = {.op = EMU_OP_INIT_AH_FROM_WC};
    q.u.ah_from_wc.wc = *wc;
    memcpy(q.u.ah_from_wc.grh, grh, sizeof(q.u.ah_from_wc.grh));
    q.u.ah_from_wc.port = port_num;
    struct emu_rep r;
    int rc = cl_call(ctx_of(context), &q, &r, NULL, 0, NULL);
    if (rc) {
        errno = rc;
        return -1;
    }
    *ah_attr = r.u.ah_attr;
    return 0;
}

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
