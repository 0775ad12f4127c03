/* Protection domains.  A PD is a NIC object (nic_pd) plus the use counts
 * the kernel keeps: ibv_dealloc_pd answers EBUSY while MRs, QPs or AHs
 * still refer to it. */
#include <errno.h>
#include <stdlib.h>

#include "shim.h"

/* Returns the PD, or NULL with errno (EINVAL for a NULL context, ENOMEM,
 * or the NIC's errno when its PD table is full). */
struct ibv_pd *ibv_alloc_pd(struct ibv_context *context)
{
    shim_charge_control();
    if (!context) {
        errno = EINVAL;
        return NULL;
    }
    struct shim_context *sctx = shim_ctx(context);
    struct shim_pd *spd = calloc(1, sizeof(*spd));
    if (!spd) {
        errno = ENOMEM;
        return NULL;
    }
    spd->npd = nic_pd_alloc(sctx->nic);
    if (!spd->npd) {
        int e = errno ? errno : ENOMEM;
        free(spd);
        errno = e;
        return NULL;
    }
    spd->ctx = sctx;
    spd->pd.context = context;
    spd->pd.handle = spd->npd->handle;
    sctx->n_pds++;
    return &spd->pd;
}

/* Returns 0, EINVAL (NULL) or EBUSY (MRs, QPs, AHs or SRQs still use it). */
int ibv_dealloc_pd(struct ibv_pd *pd)
{
    shim_charge_control();
    if (!pd)
        return EINVAL;
    struct shim_pd *spd = shim_pd(pd);
    if (spd->n_mrs || spd->n_qps || spd->n_ahs || spd->n_srqs)
        return EBUSY;
    int rc = nic_pd_free(spd->npd);
    if (rc)
        return rc;
    spd->ctx->n_pds--;
    free(spd);
    return 0;
}
