/* The provider-shaped context: the legacy ops table that verbs.h's inline
 * data-path calls jump through, and the extended (verbs_context) entries.
 *
 * As in rdma-core, every op the provider does not implement answers
 * EOPNOTSUPP (or NULL with errno EOPNOTSUPP) instead of being NULL, except
 * the extended entries: those stay NULL so that verbs_get_ctx_op() returns
 * NULL and the inline wrappers (ibv_create_cq_ex, ibv_create_qp_ex, device
 * memory, flows, ...) take their documented fallback or EOPNOTSUPP path. */
#include <errno.h>

#include "shim.h"

/* ---------------------------------------------------------------- unsupported ops */

static struct ibv_mw *unsupported_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type)
{
    (void)pd;
    (void)type;
    host_note_call();
    errno = EOPNOTSUPP;
    return NULL;
}

static int unsupported_bind_mw(struct ibv_qp *qp, struct ibv_mw *mw, struct ibv_mw_bind *mw_bind)
{
    (void)qp;
    (void)mw;
    (void)mw_bind;
    host_note_call();
    return EOPNOTSUPP;
}

static int unsupported_dealloc_mw(struct ibv_mw *mw)
{
    (void)mw;
    host_note_call();
    return EOPNOTSUPP;
}

/* The `_compat_*` slots of the 1.0-era table have no callers in current
 * libibverbs; they get a harmless answer rather than NULL. */
static void *unsupported_compat(void)
{
    errno = EOPNOTSUPP;
    return NULL;
}

static int compat_query_device(struct ibv_context *context, struct ibv_device_attr *device_attr)
{
    return ibv_query_device(context, device_attr);
}

static int compat_query_port(struct ibv_context *context, uint8_t port_num,
                             struct _compat_ibv_port_attr *port_attr)
{
    return shim_query_port_ex(context, port_num, (struct ibv_port_attr *)(void *)port_attr,
                              offsetof(struct ibv_port_attr, port_cap_flags2));
}

/* ---------------------------------------------------------------- the table */

void shim_context_set_ops(struct shim_context *sctx)
{
    struct ibv_context_ops *ops = &sctx->vctx.context.ops;

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
    ops->poll_cq = shim_poll_cq;
    ops->req_notify_cq = shim_req_notify_cq;
    ops->_compat_cq_event = unsupported_compat;
    ops->_compat_resize_cq = unsupported_compat;
    ops->_compat_destroy_cq = unsupported_compat;
    ops->_compat_create_srq = unsupported_compat;
    ops->_compat_modify_srq = unsupported_compat;
    ops->_compat_query_srq = unsupported_compat;
    ops->_compat_destroy_srq = unsupported_compat;
    ops->post_srq_recv = shim_post_srq_recv; /* srq.c */
    ops->_compat_create_qp = unsupported_compat;
    ops->_compat_query_qp = unsupported_compat;
    ops->_compat_modify_qp = unsupported_compat;
    ops->_compat_destroy_qp = unsupported_compat;
    ops->post_send = shim_post_send;
    ops->post_recv = shim_post_recv;
    ops->_compat_create_ah = unsupported_compat;
    ops->_compat_destroy_ah = unsupported_compat;
    ops->_compat_attach_mcast = unsupported_compat;
    ops->_compat_detach_mcast = unsupported_compat;
    ops->_compat_async_event = unsupported_compat;

    /* Extended ops: only what is implemented.  Everything else (srq_ex,
     * xrcd, flows, counters, parent domains, WQs, ...) stays NULL on
     * purpose: see the file comment. */
    sctx->vctx.query_port = shim_query_port_ex;
    sctx->vctx.create_qp_ex = shim_create_qp_ex;       /* qp_ex.c */
    sctx->vctx.create_cq_ex = shim_create_cq_ex;       /* cq.c */
    sctx->vctx.query_device_ex = shim_query_device_ex; /* device.c */
    sctx->vctx.alloc_dm = shim_alloc_dm;               /* dm.c */
    sctx->vctx.free_dm = shim_free_dm;
    sctx->vctx.reg_dm_mr = shim_reg_dm_mr;
    sctx->vctx.modify_qp_rate_limit = shim_modify_qp_rate_limit; /* qp.c */
}
