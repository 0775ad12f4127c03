/* Memory regions.  Registration hands the NIC (nic_mr_reg) the simulator
 * address where the bytes live and the IO virtual address it will be
 * given in work requests; the NIC owns translation and key checks.
 *
 * Argument checks follow the kernel (ib_check_mr_access, ib_uverbs_reg_mr):
 * unknown access bits -> EINVAL; REMOTE_WRITE or REMOTE_ATOMIC without
 * LOCAL_WRITE -> EINVAL; ON_DEMAND (no ODP in the model) -> EOPNOTSUPP;
 * address and IOVA with different offsets in their page -> EINVAL.  Bits in
 * the optional range are accepted; IBV_ACCESS_RELAXED_ORDERING reaches the
 * NIC (its placements into the MR may then land in any order, docs/nic.md
 * "DMA ordering", as mlx5 devices with relaxed_ordering_write do), the
 * others are dropped, as the kernel drops optional flags a device lacks. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "shim.h"

/* verbs.h turns these into inline dispatchers; define the real symbols. */
#undef ibv_reg_mr
#undef ibv_reg_mr_iova

enum {
    SHIM_MR_PAGE_BYTES = 4096,
    /* IBV_ACCESS_LOCAL_WRITE .. IBV_ACCESS_HUGETLB: the kernel's
     * IB_ACCESS_SUPPORTED without the optional range */
    SHIM_ACCESS_MANDATORY = (IBV_ACCESS_HUGETLB << 1) - 1,
};

static struct ibv_mr *reg_mr(struct ibv_pd *pd, void *addr, size_t length, uint64_t iova,
                             unsigned access)
{
    shim_charge_control();
    if (!pd) {
        errno = EINVAL;
        return NULL;
    }
    if (access & ~(unsigned)(SHIM_ACCESS_MANDATORY | IBV_ACCESS_OPTIONAL_RANGE)) {
        errno = EINVAL;
        return NULL;
    }
    if ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
        !(access & IBV_ACCESS_LOCAL_WRITE)) {
        errno = EINVAL;
        return NULL;
    }
    if (access & IBV_ACCESS_ON_DEMAND) {
        errno = EOPNOTSUPP;
        return NULL;
    }
    if (length == 0 || ((uintptr_t)addr % SHIM_MR_PAGE_BYTES) != (iova % SHIM_MR_PAGE_BYTES) ||
        (uintptr_t)addr + length < (uintptr_t)addr) {
        errno = EINVAL;
        return NULL;
    }
    if (!addr) {
        errno = EFAULT; /* pinning the pages would fail */
        return NULL;
    }
    struct shim_pd *spd = shim_pd(pd);
    struct shim_mr *smr = calloc(1, sizeof(*smr));
    if (!smr) {
        errno = ENOMEM;
        return NULL;
    }
    /* The mandatory bits and relaxed ordering reach the NIC (the other
     * optional ones are dropped). */
    int nic_access = (int)(access & (SHIM_ACCESS_MANDATORY | IBV_ACCESS_RELAXED_ORDERING));
    smr->nmr = nic_mr_reg(spd->npd, addr, length, iova, nic_access);
    if (!smr->nmr) {
        int e = errno ? errno : ENOMEM;
        free(smr);
        errno = e;
        return NULL;
    }
    smr->pd = spd;
    smr->mr.context = pd->context;
    smr->mr.pd = pd;
    smr->mr.addr = addr;
    smr->mr.length = length;
    smr->mr.handle = smr->nmr->lkey;
    smr->mr.lkey = smr->nmr->lkey;
    smr->mr.rkey = smr->nmr->rkey;
    spd->n_mrs++;
    return &smr->mr;
}

struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t length, int access)
{
    return reg_mr(pd, addr, length, (uintptr_t)addr, (unsigned)access);
}

struct ibv_mr *ibv_reg_mr_iova(struct ibv_pd *pd, void *addr, size_t length, uint64_t iova,
                               int access)
{
    return reg_mr(pd, addr, length, iova, (unsigned)access);
}

struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t length, uint64_t iova,
                                unsigned int access)
{
    return reg_mr(pd, addr, length, iova, access);
}

/* Returns 0, EINVAL for NULL, or the NIC's errno. */
int ibv_dereg_mr(struct ibv_mr *mr)
{
    shim_charge_control();
    if (!mr)
        return EINVAL;
    struct shim_mr *smr = shim_mr(mr);
    int rc = nic_mr_dereg(smr->nmr);
    if (rc)
        return rc;
    smr->pd->n_mrs--;
    free(smr);
    return 0;
}
