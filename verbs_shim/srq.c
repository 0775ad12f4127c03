/* Shared receive queues: ibv_create_srq, ibv_modify_srq, ibv_query_srq,
 * ibv_destroy_srq (exported functions, as libibverbs has them) and
 * ops.post_srq_recv (what the inline ibv_post_srq_recv calls).  The NIC
 * side is sim/nic/srq.c; QPs attach with ibv_qp_init_attr.srq (qp.c).
 *
 * Errno choices follow the mlx5 provider and kernel driver unless said:
 *   create   EINVAL: NULL pd/attr; max_wr > max_srq_wr or max_sge >
 *            max_srq_sge (mlx5_create_srq); max_wr == 0 (rxe's
 *            rxe_srq_chk_init; mlx5 would round it up).  ENOMEM: max_srq
 *            SRQs exist.  attr.srq_limit is ignored (the SRQ starts
 *            disarmed: "irrelevant for ibv_create_srq", ibv_create_srq(3);
 *            mlx5_ib_create_srq does not program it).  max_wr and max_sge
 *            are granted exactly as asked.
 *   modify   EINVAL: IBV_SRQ_MAX_WR (mlx5_ib_modify_srq: "We don't support
 *            resizing SRQs yet"), srq_limit > max_wr (mlx5: srq_limit >=
 *            msrq.max, the ring of max_wr + 1), mask bits other than
 *            IBV_SRQ_MAX_WR | IBV_SRQ_LIMIT, NULL arguments.
 *            IBV_SRQ_LIMIT with srq_limit L arms the limit event (0
 *            disarms).
 *   query    max_wr, max_sge as granted; srq_limit = the armed limit, 0
 *            once the event fired (rxe's srq->limit = 0).
 *   destroy  EBUSY while QPs use it (the kernel's usecnt check).
 *   post     EINVAL: num_sge > max_sge (mlx5_post_srq_recv), NULL list;
 *            ENOMEM: SRQ full.  *bad_wr at the first WR not posted.
 *
 * The limit event is queued on the context's async fd
 * (IBV_EVENT_SRQ_LIMIT_REACHED, element.srq) at the instant the NIC takes
 * the WQE that brings the count below the limit. */
#include <errno.h>
#include <stdlib.h>

#include "shim.h"
#include "sim/trace.h"

static void srq_limit_event(struct sim *sim, void *a, void *b)
{
    (void)sim;
    (void)b;
    struct shim_srq *ssrq = a;
    struct ibv_async_event ev = {
        .element.srq = &ssrq->srq,
        .event_type = IBV_EVENT_SRQ_LIMIT_REACHED,
    };
    shim_async_event_post(ssrq->ctx, &ev);
}

struct ibv_srq *ibv_create_srq(struct ibv_pd *pd, struct ibv_srq_init_attr *init)
{
    shim_charge_control();
    return shim_srq_create(pd, init, NULL, NULL);
}

struct ibv_srq *shim_srq_create(struct ibv_pd *pd, struct ibv_srq_init_attr *init,
                                struct shim_xrcd *xrcd, struct shim_cq *cq)
{
    if (!pd || !init) {
        errno = EINVAL;
        return NULL;
    }
    struct shim_pd *spd = shim_pd(pd);
    uint32_t max_wr, max_sge;
    nic_srq_caps(spd->ctx->nic, NULL, &max_wr, &max_sge);
    if (init->attr.max_wr == 0 || init->attr.max_wr > max_wr || init->attr.max_sge > max_sge) {
        errno = EINVAL;
        return NULL;
    }
    struct shim_srq *ssrq = calloc(1, sizeof(*ssrq));
    if (!ssrq) {
        errno = ENOMEM;
        return NULL;
    }
    ssrq->nsrq = xrcd ? nic_xrc_srq_create(spd->npd, xrcd->nxrcd, cq->ncq, init->attr.max_wr,
                                           init->attr.max_sge)
                      : nic_srq_create(spd->npd, init->attr.max_wr, init->attr.max_sge);
    if (!ssrq->nsrq) {
        int e = errno ? errno : ENOMEM;
        free(ssrq);
        errno = e;
        return NULL;
    }
    ssrq->ctx = spd->ctx;
    ssrq->pd = spd;
    ssrq->max_wr = init->attr.max_wr;
    ssrq->max_sge = init->attr.max_sge;
    nic_srq_set_limit_notify(ssrq->nsrq, srq_limit_event, ssrq, NULL);

    struct ibv_srq *srq = &ssrq->srq;
    srq->context = pd->context;
    srq->srq_context = init->srq_context;
    srq->pd = pd;
    srq->handle = ssrq->nsrq->srqn;
    pthread_mutex_init(&srq->mutex, NULL);
    pthread_cond_init(&srq->cond, NULL);
    srq->events_completed = 0;
    spd->n_srqs++;
    if (xrcd) {
        ssrq->cq = cq;
        cq->n_qps++; /* the CQ is in use (ibv_destroy_cq -> EBUSY) */
    }
    return srq;
}

int ibv_modify_srq(struct ibv_srq *srq, struct ibv_srq_attr *attr, int mask)
{
    shim_charge_control();
    if (!srq || !attr)
        return EINVAL;
    struct shim_srq *ssrq = shim_srq(srq);
    if (mask & ~(IBV_SRQ_MAX_WR | IBV_SRQ_LIMIT))
        return EINVAL;
    if (mask & IBV_SRQ_MAX_WR)
        return EINVAL; /* no resize, as mlx5 */
    if (mask & IBV_SRQ_LIMIT) {
        if (attr->srq_limit > ssrq->max_wr)
            return EINVAL;
        nic_srq_arm(ssrq->nsrq, attr->srq_limit);
    }
    return 0;
}

int ibv_query_srq(struct ibv_srq *srq, struct ibv_srq_attr *attr)
{
    shim_charge_control();
    if (!srq || !attr)
        return EINVAL;
    struct shim_srq *ssrq = shim_srq(srq);
    attr->max_wr = ssrq->max_wr;
    attr->max_sge = ssrq->max_sge;
    attr->srq_limit = ssrq->nsrq->limit;
    return 0;
}

int ibv_destroy_srq(struct ibv_srq *srq)
{
    shim_charge_control();
    if (!srq)
        return EINVAL;
    struct shim_srq *ssrq = shim_srq(srq);
    if (ssrq->n_qps)
        return EBUSY;
    int rc = nic_srq_destroy(ssrq->nsrq);
    if (rc)
        return rc;
    shim_async_drop(ssrq->ctx, srq);
    ssrq->pd->n_srqs--;
    if (ssrq->cq)
        ssrq->cq->n_qps--;
    pthread_cond_destroy(&srq->cond);
    pthread_mutex_destroy(&srq->mutex);
    free(ssrq);
    return 0;
}

/* ops.post_srq_recv.  Returns 0 or an errno with *bad_wr at the first WR
 * not posted: EINVAL (NULL SRQ or list, too many SGEs), ENOMEM (full).
 * Costs post_recv_ps per WR attempted, as ibv_post_recv. */
int shim_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad_wr)
{
    host_note_call();
    struct host *h = host_of_current();
    sim_time_t t0 = h ? sim_now(h->sim) : 0;
    int rc = (!srq || !wr) ? EINVAL : 0;
    unsigned attempted = 0;
    struct nic_recv_wqe wqe;
    struct ibv_recv_wr *head = wr;
    for (; !rc && wr; wr = wr->next) {
        attempted++;
        struct shim_srq *ssrq = shim_srq(srq);
        rc = shim_recv_wqe(wr, ssrq->max_sge, &wqe);
        if (!rc)
            rc = nic_srq_append(ssrq->nsrq, &wqe);
        if (rc)
            break;
    }
    if (rc && bad_wr)
        *bad_wr = wr;
    if (h && attempted)
        host_charge(sim_time_mul(attempted, h->cpu.post_recv_ps));
    if (h && sim_trace_on(h->sim, TRACE_G_HOST))
        host_trace_call(
            host_thread_current(), t0, sim_now(h->sim), "ibv_post_srq_recv",
            &(struct trace_rec){.val = attempted - (rc ? 1u : 0u), .status = (uint16_t)rc});
    if (h && srq && sim_trace_enabled(h->sim)) /* TRACE_POST (sim/trace.h) */
        for (const struct ibv_recv_wr *w = head; w && w != wr; w = w->next) {
            uint64_t n = 0;
            for (int i = 0; w->sg_list && i < w->num_sge; i++)
                n += w->sg_list[i].length;
            sim_trace_post(h->sim, h->id, 0, TRACE_POST_SRQ_RECV,
                           n > UINT32_MAX ? UINT32_MAX : (uint32_t)n, 0);
        }
    return rc;
}
