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
 * others are dropped, as the kernel drops optional flags a device lacks.
 *
 * Cost (docs/nic.md "Memory registration"): a registration is a system
 * call (host.cpu.control_verb), pinning every page of the region
 * (host.cpu.mr_pin_page each) and NIC commands: one to create the key and
 * one per nic.mtt_per_cmd page translations written, executed one at a time
 * by the NIC's command interface (nic.cmd_proc each; the thread waits for
 * them, behind other threads' commands).  A deregistration unpins
 * (host.cpu.mr_unpin_page per page) and destroys the key (one command),
 * which invalidates the NIC's cached translations of it.  ibv_rereg_mr
 * does what it changes: a new translation is an unpin of the old pages, a
 * pin of the new ones and their translations; a PD or access change one
 * command. */
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

/* The time a registration step takes on the calling thread: pinning or
 * unpinning `pages` (CPU), then `cmds` NIC commands (waiting for them). */
static void mr_cost(struct nic *nic, uint64_t pages, bool pin, uint32_t cmds)
{
    struct host *h = host_of_current();
    if (!h)
        return;
    sim_time_t per = pin ? h->cpu.mr_pin_page_ps : h->cpu.mr_unpin_page_ps;
    if (pages && per)
        host_charge(pages * per);
    if (cmds && nic) {
        sim_time_t d = nic_cmd_delay(nic, cmds);
        if (d) { /* asleep in the kernel until the firmware answers */
            host_block_begin();
            sim_proc_sleep(d);
            host_block_end();
        }
    }
}

/* Commands to create a key and write the translations of `pages` pages. */
static uint32_t reg_cmds(const struct nic *nic, uint64_t pages)
{
    uint32_t per = nic_get_params(nic)->mtt_per_cmd;
    return 1 + (uint32_t)(per ? (pages + per - 1) / per : 0);
}

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
    struct nic *nic = spd->npd->nic;
    uint64_t pages = nic_mr_pages(nic, addr, length);
    mr_cost(nic, pages, true, reg_cmds(nic, pages));
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
    struct nic *nic = smr->nmr->nic;
    uint64_t pages = smr->nmr->dm ? 0 : nic_mr_pages_of(smr->nmr);
    mr_cost(nic, pages, false, 1);
    int rc = nic_mr_dereg(smr->nmr);
    if (rc)
        return rc;
    smr->pd->n_mrs--;
    free(smr);
    return 0;
}

/* rdma-core's ibv_rereg_mr: 0, or an enum ibv_rereg_mr_err_code with errno
 * set.  Bad input (unknown flags, CHANGE_TRANSLATION without an address or
 * length, access bits without CHANGE_ACCESS, bad access bits, a PD of
 * another device, a device-memory MR's translation) is
 * IBV_REREG_MR_ERR_INPUT with EINVAL and leaves the MR as it was. */
int ibv_rereg_mr(struct ibv_mr *mr, int flags, struct ibv_pd *pd, void *addr, size_t length,
                 int access)
{
    shim_charge_control();
    if (!mr || (flags & ~IBV_REREG_MR_FLAGS_SUPPORTED) ||
        ((flags & IBV_REREG_MR_CHANGE_TRANSLATION) && (!addr || !length)) ||
        (access && !(flags & IBV_REREG_MR_CHANGE_ACCESS)) ||
        ((flags & IBV_REREG_MR_CHANGE_PD) && (!pd || pd->context != mr->context))) {
        errno = EINVAL;
        return IBV_REREG_MR_ERR_INPUT;
    }
    unsigned acc = (unsigned)access;
    if ((flags & IBV_REREG_MR_CHANGE_ACCESS) &&
        ((acc & ~(unsigned)(SHIM_ACCESS_MANDATORY | IBV_ACCESS_OPTIONAL_RANGE)) ||
         ((acc & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
          !(acc & IBV_ACCESS_LOCAL_WRITE)) ||
         (acc & IBV_ACCESS_ON_DEMAND))) {
        errno = EINVAL;
        return IBV_REREG_MR_ERR_INPUT;
    }
    struct shim_mr *smr = shim_mr(mr);
    struct nic_mr *nmr = smr->nmr;
    struct nic *nic = nmr->nic;
    uint64_t iova = (uintptr_t)addr;
    if ((flags & IBV_REREG_MR_CHANGE_TRANSLATION) &&
        (nmr->dm || (uintptr_t)addr + length < (uintptr_t)addr)) {
        errno = EINVAL;
        return IBV_REREG_MR_ERR_INPUT;
    }
    /* the work: unpin / pin / translations for a new range, one command
     * for the change itself */
    uint32_t cmds = 1;
    if (flags & IBV_REREG_MR_CHANGE_TRANSLATION) {
        mr_cost(nic, nic_mr_pages_of(nmr), false, 0);
        uint64_t pages = nic_mr_pages(nic, addr, length);
        mr_cost(nic, pages, true, 0);
        cmds = reg_cmds(nic, pages);
    }
    mr_cost(nic, 0, true, cmds);
    struct shim_pd *npd = (flags & IBV_REREG_MR_CHANGE_PD) ? shim_pd(pd) : smr->pd;
    int nic_access = (int)(acc & (SHIM_ACCESS_MANDATORY | IBV_ACCESS_RELAXED_ORDERING));
    int rc = nic_mr_rereg(nmr, flags, npd->npd, addr, length, iova, nic_access);
    if (rc) {
        errno = rc;
        return IBV_REREG_MR_ERR_CMD;
    }
    if (flags & IBV_REREG_MR_CHANGE_PD) {
        smr->pd->n_mrs--;
        npd->n_mrs++;
        smr->pd = npd;
        mr->pd = pd;
    }
    if (flags & IBV_REREG_MR_CHANGE_TRANSLATION) {
        mr->addr = addr;
        mr->length = length;
    }
    return 0;
}
