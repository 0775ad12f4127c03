/* Address handles.  RC QPs carry their path in the QP context, so an AH is
 * only the validated attributes for now (UD, which uses them, comes later).
 * On a RoCE port the GRH is mandatory and the destination GID must name a
 * node of the fabric. */
#include <errno.h>
#include <stdlib.h>

#include "shim.h"

/* Returns the AH, or NULL with errno EINVAL (NULL pd/attr, no GRH, bad
 * port or GID index, unknown destination GID) or ENOMEM. */
struct ibv_ah *ibv_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr)
{
    shim_charge_control();
    if (!pd || !attr) {
        errno = EINVAL;
        return NULL;
    }
    if (!attr->is_global || attr->port_num != SHIM_PORT_NUM ||
        attr->grh.sgid_index >= SHIM_GID_TBL_LEN || nic_node_from_gid(&attr->grh.dgid) < 0) {
        errno = EINVAL;
        return NULL;
    }
    struct shim_pd *spd = shim_pd(pd);
    struct shim_ah *sah = calloc(1, sizeof(*sah));
    if (!sah) {
        errno = ENOMEM;
        return NULL;
    }
    sah->pd = spd;
    sah->attr = *attr;
    sah->ah.context = pd->context;
    sah->ah.pd = pd;
    sah->ah.handle = ++spd->ctx->next_ah_handle;
    spd->n_ahs++;
    return &sah->ah;
}

int ibv_destroy_ah(struct ibv_ah *ah)
{
    shim_charge_control();
    if (!ah)
        return EINVAL;
    struct shim_ah *sah = shim_ah(ah);
    sah->pd->n_ahs--;
    free(sah);
    return 0;
}
