/* Device memory: ibv_alloc_dm, ibv_free_dm, ibv_reg_dm_mr and the
 * ibv_memcpy_to_dm / ibv_memcpy_from_dm that verbs.h inlines through the
 * struct ibv_dm's function pointers (the NIC side is sim/nic/dm.c).
 *
 * libibverbs reaches alloc_dm, free_dm and reg_dm_mr through the extended
 * context (verbs_get_ctx_op): context.c sets them.  Errors follow rdma-core
 * (providers/mlx5/verbs.c mlx5_alloc_dm, mlx5_reg_dm_mr, mlx5_memcpy_to_dm):
 *   alloc_dm: comp_mask bits the provider does not know -> EINVAL; length
 *             0 -> EINVAL; more than the device memory left (nic.dm_size in
 *             all) -> ENOMEM; a NIC without device memory -> EOPNOTSUPP.
 *   reg_dm_mr: the MR is zero-based: IBV_ACCESS_ZERO_BASED is required
 *             (ibv_alloc_dm(3)) -> else EINVAL; [offset, offset+length)
 *             outside the allocation -> EINVAL.
 *   memcpy_to/from_dm: a range outside the allocation -> EFAULT.
 *   free_dm: MRs still registered on it -> EBUSY.
 *
 * CPU cost: the CPU reaches device memory through the NIC's BAR.  Stores are
 * posted (write-combining): copying to device memory is charged at the
 * host's memcpy rate.  Loads are uncached PCIe reads that wait for their
 * completion: copying from device memory is charged one PCIe read round
 * trip (SHIM_DM_MMIO_READ_PS) per 64 bytes. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "shim.h"

enum {
    SHIM_DM_MMIO_READ_BYTES = 64, /* one uncached load burst (a cache line) */
};
/* Estimate: a CPU load from a device BAR is a non-posted PCIe read: about
 * the DMA read latency the other way (CALIBRATION, PCIe: 64 B 546 ns). */
#define SHIM_DM_MMIO_READ_PS (550 * SIM_NS)

struct shim_dm {
    struct ibv_dm dm;
    struct shim_context *ctx;
    struct nic_dm *ndm;
};

static struct shim_dm *shim_dm(struct ibv_dm *dm)
{
    return shim_container_of(dm, struct shim_dm, dm);
}

static sim_time_t copy_ps(const struct shim_context *ctx, size_t length)
{
    uint64_t rate = ctx->host ? ctx->host->cpu.memcpy_bytes_per_s : 0;
    return rate ? sim_bytes_to_ps(length, rate * 8) : 0;
}

static int memcpy_to_dm(struct ibv_dm *dm, uint64_t dm_offset, const void *host_addr, size_t length)
{
    struct shim_dm *sdm = shim_dm(dm);
    if (dm_offset > sdm->ndm->length || length > sdm->ndm->length - dm_offset)
        return EFAULT;
    host_charge(copy_ps(sdm->ctx, length));
    memcpy(sdm->ndm->buf + dm_offset, host_addr, length);
    return 0;
}

static int memcpy_from_dm(void *host_addr, struct ibv_dm *dm, uint64_t dm_offset, size_t length)
{
    struct shim_dm *sdm = shim_dm(dm);
    if (dm_offset > sdm->ndm->length || length > sdm->ndm->length - dm_offset)
        return EFAULT;
    uint64_t loads = (length + SHIM_DM_MMIO_READ_BYTES - 1) / SHIM_DM_MMIO_READ_BYTES;
    host_charge((sim_time_t)loads * SHIM_DM_MMIO_READ_PS);
    memcpy(host_addr, sdm->ndm->buf + dm_offset, length);
    return 0;
}

struct ibv_dm *shim_alloc_dm(struct ibv_context *context, struct ibv_alloc_dm_attr *attr)
{
    shim_charge_control();
    if (!context || !attr || attr->comp_mask) {
        errno = EINVAL;
        return NULL;
    }
    struct shim_context *sctx = shim_ctx(context);
    struct shim_dm *sdm = calloc(1, sizeof(*sdm));
    if (!sdm) {
        errno = ENOMEM;
        return NULL;
    }
    sdm->ndm = nic_dm_alloc(sctx->nic, attr->length);
    if (!sdm->ndm) {
        int e = errno;
        free(sdm);
        errno = e;
        return NULL;
    }
    sdm->ctx = sctx;
    sdm->dm.context = context;
    sdm->dm.memcpy_to_dm = memcpy_to_dm;
    sdm->dm.memcpy_from_dm = memcpy_from_dm;
    sdm->dm.comp_mask = 0;
    sdm->dm.handle = (uint32_t)(uintptr_t)sdm->ndm->buf; /* an opaque id, like the kernel's */
    return &sdm->dm;
}

int shim_free_dm(struct ibv_dm *dm)
{
    shim_charge_control();
    if (!dm)
        return EINVAL;
    struct shim_dm *sdm = shim_dm(dm);
    int rc = nic_dm_free(sdm->ndm);
    if (rc)
        return rc;
    free(sdm);
    return 0;
}

struct ibv_mr *shim_reg_dm_mr(struct ibv_pd *pd, struct ibv_dm *dm, uint64_t dm_offset,
                              size_t length, unsigned int access)
{
    shim_charge_control();
    if (!pd || !dm || !(access & IBV_ACCESS_ZERO_BASED) || length == 0) {
        errno = EINVAL;
        return NULL;
    }
    if ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
        !(access & IBV_ACCESS_LOCAL_WRITE)) {
        errno = EINVAL;
        return NULL;
    }
    struct shim_pd *spd = shim_pd(pd);
    struct shim_dm *sdm = shim_dm(dm);
    struct shim_mr *smr = calloc(1, sizeof(*smr));
    if (!smr) {
        errno = ENOMEM;
        return NULL;
    }
    int nic_access = (int)(access & (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                                     IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC));
    smr->nmr = nic_mr_reg_dm(spd->npd, sdm->ndm, dm_offset, length, nic_access);
    if (!smr->nmr) {
        int e = errno ? errno : ENOMEM;
        free(smr);
        errno = e;
        return NULL;
    }
    smr->pd = spd;
    smr->mr.context = pd->context;
    smr->mr.pd = pd;
    smr->mr.addr = NULL; /* zero-based: work requests address it from 0 */
    smr->mr.length = length;
    smr->mr.handle = smr->nmr->lkey;
    smr->mr.lkey = smr->nmr->lkey;
    smr->mr.rkey = smr->nmr->rkey;
    spd->n_mrs++;
    return &smr->mr;
}
