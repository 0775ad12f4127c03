/* The extended QP: ibv_create_qp_ex (verbs_context.create_qp_ex),
 * ibv_qp_to_qp_ex and the ibv_wr_* work-request builders.
 *
 * rdma-core's newer send API builds work requests through function
 * pointers in struct ibv_qp_ex: ibv_wr_start opens a batch, each
 * ibv_wr_<opcode> begins a WR (taking qpx->wr_id and qpx->wr_flags),
 * ibv_wr_set_sge / _sge_list / _inline_data / _inline_data_list /
 * _ud_addr complete it, ibv_wr_complete posts the batch with one doorbell
 * and ibv_wr_abort drops it.  Here a batch is a list of ordinary send WRs
 * that ibv_wr_complete hands to the same checks and NIC queue as
 * ibv_post_send (post.c), all or nothing as in mlx5: an error recorded by
 * a builder (too many SGEs, an opcode the QP was not created for) or found
 * by the checks is returned by ibv_wr_complete and nothing of the batch is
 * posted.  Inline data is copied when it is set (the caller may reuse its
 * buffer at once, as with mlx5).  CPU time: as ibv_post_send of the same
 * list.
 *
 * ibv_create_qp_ex takes IBV_QP_INIT_ATTR_PD and
 * IBV_QP_INIT_ATTR_SEND_OPS_FLAGS (create_flags must be 0).  The opcodes
 * of the send API are those of the QP type (RC: SEND, SEND_WITH_IMM,
 * RDMA_WRITE, RDMA_WRITE_WITH_IMM, RDMA_READ, the two atomics; UC: no READ
 * or atomics; UD: SEND and SEND_WITH_IMM); asking for another one
 * (LOCAL_INV, BIND_MW, SEND_WITH_INV, TSO, ATOMIC_WRITE, or READ on UC) is
 * EOPNOTSUPP, what mlx5 answers.  ibv_qp_to_qp_ex returns NULL for a QP
 * made by ibv_create_qp or without send_ops_flags (libibverbs: no
 * VERBS_QP_EX). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "shim.h"

enum {
    SHIM_QP_EX_OPS_RC = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM |
                        IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM |
                        IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |
                        IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD,
    SHIM_QP_EX_OPS_UC = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM |
                        IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM,
    SHIM_QP_EX_OPS_UD = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM,
};

static struct shim_qp *shim_qpx(struct ibv_qp_ex *qpx)
{
    return shim_container_of(qpx, struct shim_qp, qpx);
}

/* ---------------------------------------------------------------- the batch */

static void batch_error(struct shim_wr_batch *b, int err)
{
    if (!b->err)
        b->err = err;
}

static void wr_start(struct ibv_qp_ex *qpx)
{
    struct shim_wr_batch *b = &shim_qpx(qpx)->batch;
    b->n = 0;
    b->inline_len = 0;
    b->err = 0;
    b->open = true;
}

static void wr_abort(struct ibv_qp_ex *qpx)
{
    struct shim_wr_batch *b = &shim_qpx(qpx)->batch;
    b->n = 0;
    b->inline_len = 0;
    b->err = 0;
    b->open = false;
}

/* Begin a WR of `opcode` (which the QP must have been created for). */
static struct ibv_send_wr *wr_begin(struct ibv_qp_ex *qpx, enum ibv_wr_opcode opcode,
                                    uint64_t ops_flag)
{
    struct shim_qp *sqp = shim_qpx(qpx);
    struct shim_wr_batch *b = &sqp->batch;
    if (!b->open) {
        batch_error(b, EINVAL); /* no ibv_wr_start */
        return NULL;
    }
    if (!(sqp->send_ops_flags & ops_flag)) {
        batch_error(b, EOPNOTSUPP);
        return NULL;
    }
    if (b->n == b->cap) {
        unsigned cap = b->cap ? 2 * b->cap : 8;
        struct shim_wr_ent *n = realloc(b->ents, cap * sizeof(*n));
        if (!n) {
            batch_error(b, ENOMEM);
            return NULL;
        }
        b->ents = n;
        b->cap = cap;
    }
    struct shim_wr_ent *e = &b->ents[b->n++];
    memset(&e->wr, 0, sizeof(e->wr));
    e->wr.wr_id = qpx->wr_id;
    e->wr.send_flags = qpx->wr_flags;
    e->wr.opcode = opcode;
    e->inline_off = SIZE_MAX;
    return &e->wr;
}

/* The WR the set_* calls complete (the last one begun). */
static struct shim_wr_ent *wr_last(struct ibv_qp_ex *qpx)
{
    struct shim_wr_batch *b = &shim_qpx(qpx)->batch;
    if (!b->open || !b->n) {
        batch_error(b, EINVAL);
        return NULL;
    }
    return &b->ents[b->n - 1];
}

static int wr_complete(struct ibv_qp_ex *qpx)
{
    struct shim_qp *sqp = shim_qpx(qpx);
    struct shim_wr_batch *b = &sqp->batch;
    int rc = b->open ? b->err : EINVAL;
    b->open = false;
    if (rc || !b->n) {
        b->n = 0;
        return rc;
    }
    /* link the list; point the SGEs (and inline copies) where they live now */
    for (unsigned i = 0; i < b->n; i++) {
        struct shim_wr_ent *e = &b->ents[i];
        e->wr.next = i + 1 < b->n ? &b->ents[i + 1].wr : NULL;
        e->wr.sg_list = e->sge;
        if (e->inline_off != SIZE_MAX) {
            size_t off = e->inline_off;
            for (int k = 0; k < e->wr.num_sge; k++) {
                e->sge[k].addr = (uintptr_t)(b->inline_buf + off);
                off += e->sge[k].length;
            }
        }
    }
    rc = shim_post_send_batch(sqp, &b->ents[0].wr);
    b->n = 0;
    return rc;
}

/* ---------------------------------------------------------------- opcodes */

static void wr_send(struct ibv_qp_ex *qpx)
{
    wr_begin(qpx, IBV_WR_SEND, IBV_QP_EX_WITH_SEND);
}

static void wr_send_imm(struct ibv_qp_ex *qpx, __be32 imm)
{
    struct ibv_send_wr *w = wr_begin(qpx, IBV_WR_SEND_WITH_IMM, IBV_QP_EX_WITH_SEND_WITH_IMM);
    if (w)
        w->imm_data = imm;
}

static void wr_rdma_write(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t addr)
{
    struct ibv_send_wr *w = wr_begin(qpx, IBV_WR_RDMA_WRITE, IBV_QP_EX_WITH_RDMA_WRITE);
    if (w) {
        w->wr.rdma.rkey = rkey;
        w->wr.rdma.remote_addr = addr;
    }
}

static void wr_rdma_write_imm(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t addr, __be32 imm)
{
    struct ibv_send_wr *w =
        wr_begin(qpx, IBV_WR_RDMA_WRITE_WITH_IMM, IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM);
    if (w) {
        w->wr.rdma.rkey = rkey;
        w->wr.rdma.remote_addr = addr;
        w->imm_data = imm;
    }
}

static void wr_rdma_read(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t addr)
{
    struct ibv_send_wr *w = wr_begin(qpx, IBV_WR_RDMA_READ, IBV_QP_EX_WITH_RDMA_READ);
    if (w) {
        w->wr.rdma.rkey = rkey;
        w->wr.rdma.remote_addr = addr;
    }
}

static void wr_atomic_cmp_swp(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t addr, uint64_t compare,
                              uint64_t swap)
{
    struct ibv_send_wr *w =
        wr_begin(qpx, IBV_WR_ATOMIC_CMP_AND_SWP, IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP);
    if (w) {
        w->wr.atomic.rkey = rkey;
        w->wr.atomic.remote_addr = addr;
        w->wr.atomic.compare_add = compare;
        w->wr.atomic.swap = swap;
    }
}

static void wr_atomic_fetch_add(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t addr, uint64_t add)
{
    struct ibv_send_wr *w =
        wr_begin(qpx, IBV_WR_ATOMIC_FETCH_AND_ADD, IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD);
    if (w) {
        w->wr.atomic.rkey = rkey;
        w->wr.atomic.remote_addr = addr;
        w->wr.atomic.compare_add = add;
    }
}

/* Opcodes the model lacks: refused at creation, and an error for a
 * program that calls the pointer anyway. */
static void wr_bind_mw(struct ibv_qp_ex *qpx, struct ibv_mw *mw, uint32_t rkey,
                       const struct ibv_mw_bind_info *info)
{
    (void)mw;
    (void)rkey;
    (void)info;
    batch_error(&shim_qpx(qpx)->batch, EOPNOTSUPP);
}

static void wr_local_inv(struct ibv_qp_ex *qpx, uint32_t rkey)
{
    (void)rkey;
    batch_error(&shim_qpx(qpx)->batch, EOPNOTSUPP);
}

static void wr_send_tso(struct ibv_qp_ex *qpx, void *hdr, uint16_t hdr_sz, uint16_t mss)
{
    (void)hdr;
    (void)hdr_sz;
    (void)mss;
    batch_error(&shim_qpx(qpx)->batch, EOPNOTSUPP);
}

static void wr_atomic_write(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t addr, const void *wr)
{
    (void)rkey;
    (void)addr;
    (void)wr;
    batch_error(&shim_qpx(qpx)->batch, EOPNOTSUPP);
}

/* ---------------------------------------------------------------- data and address */

static void wr_set_sge(struct ibv_qp_ex *qpx, uint32_t lkey, uint64_t addr, uint32_t length)
{
    struct shim_wr_ent *e = wr_last(qpx);
    if (!e)
        return;
    e->sge[0] = (struct ibv_sge){.addr = addr, .length = length, .lkey = lkey};
    e->wr.num_sge = 1;
    e->inline_off = SIZE_MAX;
}

static void wr_set_sge_list(struct ibv_qp_ex *qpx, size_t n, const struct ibv_sge *sg)
{
    struct shim_wr_ent *e = wr_last(qpx);
    if (!e)
        return;
    struct shim_qp *sqp = shim_qpx(qpx);
    if (n > sqp->cap.max_send_sge || n > NIC_MAX_SGE || (n && !sg)) {
        batch_error(&sqp->batch, EINVAL);
        return;
    }
    memcpy(e->sge, sg, n * sizeof(*sg));
    e->wr.num_sge = (int)n;
    e->inline_off = SIZE_MAX;
}

static void wr_set_inline_data_list(struct ibv_qp_ex *qpx, size_t n,
                                    const struct ibv_data_buf *bufs)
{
    struct shim_wr_ent *e = wr_last(qpx);
    if (!e)
        return;
    struct shim_qp *sqp = shim_qpx(qpx);
    struct shim_wr_batch *b = &sqp->batch;
    size_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += bufs[i].length;
    if (n > NIC_MAX_SGE || total > sqp->cap.max_inline_data) {
        batch_error(b, ENOMEM); /* mlx5_send_wr_set_inline_data: more than max_inline_data */
        return;
    }
    if (b->inline_len + total > b->inline_cap) {
        size_t cap = b->inline_cap ? b->inline_cap : 1024;
        while (cap < b->inline_len + total)
            cap *= 2;
        char *nb = realloc(b->inline_buf, cap);
        if (!nb) {
            batch_error(b, ENOMEM);
            return;
        }
        b->inline_buf = nb;
        b->inline_cap = cap;
    }
    e->inline_off = b->inline_len;
    for (size_t i = 0; i < n; i++) {
        if (bufs[i].length)
            memcpy(b->inline_buf + b->inline_len, bufs[i].addr, bufs[i].length);
        e->sge[i] = (struct ibv_sge){.length = (uint32_t)bufs[i].length};
        b->inline_len += bufs[i].length;
    }
    e->wr.num_sge = (int)n;
    e->wr.send_flags |= IBV_SEND_INLINE;
}

static void wr_set_inline_data(struct ibv_qp_ex *qpx, void *addr, size_t length)
{
    struct ibv_data_buf one = {.addr = addr, .length = length};
    wr_set_inline_data_list(qpx, 1, &one);
}

static void wr_set_ud_addr(struct ibv_qp_ex *qpx, struct ibv_ah *ah, uint32_t qpn, uint32_t qkey)
{
    struct shim_wr_ent *e = wr_last(qpx);
    if (!e)
        return;
    e->wr.wr.ud.ah = ah;
    e->wr.wr.ud.remote_qpn = qpn;
    e->wr.wr.ud.remote_qkey = qkey;
}

static void wr_set_xrc_srqn(struct ibv_qp_ex *qpx, uint32_t srqn)
{
    struct shim_wr_ent *e = wr_last(qpx);
    if (e)
        e->wr.qp_type.xrc.remote_srqn = srqn;
}

void shim_wr_batch_free(struct shim_qp *sqp)
{
    free(sqp->batch.ents);
    free(sqp->batch.inline_buf);
    memset(&sqp->batch, 0, sizeof(sqp->batch));
}

/* ---------------------------------------------------------------- creation */

static uint64_t ops_of_type(enum ibv_qp_type t)
{
    switch (t) {
    case IBV_QPT_RC:
        return SHIM_QP_EX_OPS_RC;
    case IBV_QPT_UC:
        return SHIM_QP_EX_OPS_UC;
    case IBV_QPT_UD:
        return SHIM_QP_EX_OPS_UD;
    default:
        return 0;
    }
}

static void set_wr_ops(struct ibv_qp_ex *x)
{
    x->wr_start = wr_start;
    x->wr_complete = wr_complete;
    x->wr_abort = wr_abort;
    x->wr_send = wr_send;
    x->wr_send_imm = wr_send_imm;
    x->wr_rdma_write = wr_rdma_write;
    x->wr_rdma_write_imm = wr_rdma_write_imm;
    x->wr_rdma_read = wr_rdma_read;
    x->wr_atomic_cmp_swp = wr_atomic_cmp_swp;
    x->wr_atomic_fetch_add = wr_atomic_fetch_add;
    x->wr_bind_mw = wr_bind_mw;
    x->wr_local_inv = wr_local_inv;
    x->wr_send_inv = wr_local_inv;
    x->wr_send_tso = wr_send_tso;
    x->wr_atomic_write = wr_atomic_write;
    x->wr_set_sge = wr_set_sge;
    x->wr_set_sge_list = wr_set_sge_list;
    x->wr_set_inline_data = wr_set_inline_data;
    x->wr_set_inline_data_list = wr_set_inline_data_list;
    x->wr_set_ud_addr = wr_set_ud_addr;
    x->wr_set_xrc_srqn = wr_set_xrc_srqn;
}

/* Returns the QP, or NULL with errno: EINVAL (no PD), EOPNOTSUPP (comp_mask
 * bits or create_flags the model lacks, send_ops_flags outside the QP
 * type's opcodes), or what ibv_create_qp answers. */
struct ibv_qp *shim_create_qp_ex(struct ibv_context *context, struct ibv_qp_init_attr_ex *attr)
{
    shim_charge_control();
    if (!context || !attr) {
        errno = EINVAL;
        return NULL;
    }
    const uint32_t known =
        IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS | IBV_QP_INIT_ATTR_CREATE_FLAGS;
    if ((attr->comp_mask & ~known) ||
        ((attr->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) && attr->create_flags)) {
        errno = EOPNOTSUPP;
        return NULL;
    }
    if (!(attr->comp_mask & IBV_QP_INIT_ATTR_PD) || !attr->pd || attr->pd->context != context) {
        errno = EINVAL;
        return NULL;
    }
    uint64_t ops = (attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) ? attr->send_ops_flags : 0;
    if (ops & ~ops_of_type(attr->qp_type)) {
        errno =
            ops_of_type(attr->qp_type) || attr->qp_type == IBV_QPT_XRC_SEND ? EOPNOTSUPP : EINVAL;
        return NULL;
    }
    /* ibv_qp_init_attr_ex starts with the fields of ibv_qp_init_attr */
    struct shim_qp *sqp = shim_qp_create(attr->pd, (struct ibv_qp_init_attr *)(void *)attr);
    if (!sqp)
        return NULL;
    if (attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) {
        sqp->is_ex = true;
        sqp->send_ops_flags = ops;
        set_wr_ops(&sqp->qpx);
    }
    return &sqp->qp;
}

struct ibv_qp_ex *ibv_qp_to_qp_ex(struct ibv_qp *qp)
{
    host_note_call();
    if (!qp)
        return NULL;
    struct shim_qp *sqp = shim_qp(qp);
    return sqp->is_ex ? &sqp->qpx : NULL;
}
