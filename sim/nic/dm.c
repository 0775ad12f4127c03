/* Device memory: the NIC's on-chip memory that programs allocate with
 * ibv_alloc_dm and register with ibv_reg_dm_mr (docs/nic.md "Device
 * memory").  RDMA READ, WRITE and atomics on an MR in device memory are
 * served inside the NIC (xlate.c, dma.c, atomic.c: nic.dm_access per
 * access, no PCIe, no translation); the CPU reaches it through the BAR
 * (verbs_shim/dm.c charges the MMIO).
 *
 * Size: nic.dm_bytes in all (ConnectX-5: 128 KiB usable, CALIBRATION
 * "device memory"); an allocation past what is left fails with ENOMEM, as
 * mlx5's alloc_dm does when the device's MEMIC area is exhausted.
 * Allocations are rounded up to NIC_DM_ALIGN bytes (mlx5 allocates MEMIC in
 * 64 B units, MLX5_MEMIC_BASE_ALIGN). */
#include <errno.h>
#include <stdlib.h>

#include "nic_priv.h"

enum { NIC_DM_ALIGN = 64 };

struct nic_dm *nic_dm_alloc(struct nic *nic, uint64_t length)
{
    if (!nic->p.dm_bytes) {
        errno = EOPNOTSUPP;
        return NULL;
    }
    if (!length) {
        errno = EINVAL;
        return NULL;
    }
    uint64_t rounded = (length + NIC_DM_ALIGN - 1) / NIC_DM_ALIGN * NIC_DM_ALIGN;
    if (rounded < length || rounded > nic->p.dm_bytes - nic->dm_used_bytes) {
        errno = ENOMEM;
        return NULL;
    }
    if (nic->n_dms == nic->cap_dms) {
        uint32_t cap = nic->cap_dms ? 2 * nic->cap_dms : 8;
        struct nic_dm **n = realloc(nic->dms, cap * sizeof(*n));
        if (!n) {
            errno = ENOMEM;
            return NULL;
        }
        nic->dms = n;
        nic->cap_dms = cap;
    }
    struct nic_dm *dm = calloc(1, sizeof(*dm));
    uint8_t *buf = calloc(1, rounded); /* device memory reads as zero when allocated */
    if (!dm || !buf) {
        free(dm);
        free(buf);
        errno = ENOMEM;
        return NULL;
    }
    dm->nic = nic;
    dm->buf = buf;
    dm->length = length;
    dm->rounded = rounded;
    nic->dms[nic->n_dms++] = dm;
    nic->dm_used_bytes += rounded;
    return dm;
}

int nic_dm_free(struct nic_dm *dm)
{
    if (!dm)
        return EINVAL;
    if (dm->n_mrs)
        return EBUSY;
    struct nic *nic = dm->nic;
    for (uint32_t i = 0; i < nic->n_dms; i++)
        if (nic->dms[i] == dm) {
            nic->dms[i] = nic->dms[--nic->n_dms];
            break;
        }
    nic->dm_used_bytes -= dm->rounded;
    free(dm->buf);
    free(dm);
    return 0;
}

/* Device memory banks: an access occupies the bank of its address (64 B
 * interleave) for nic.dm_access; accesses to a busy bank wait.  This is
 * device memory's bandwidth (banks x 64 B / dm_access) and what serialises
 * atomics on one counter in it. */
sim_time_t nic_dm_access_delay(struct nic *nic, const struct nic_op *op)
{
    sim_time_t t = nic->p.dm_access_ps;
    uint32_t banks = nic->p.dm_banks;
    if (!banks || !op->n_seg)
        return t;
    if (!nic->dm_bank_free_ps) {
        nic->dm_bank_free_ps = calloc(banks, sizeof(*nic->dm_bank_free_ps));
        if (!nic->dm_bank_free_ps)
            abort();
    }
    const struct nic_mr *mr = nic_mr_lookup(nic, op->seg[0].key);
    uint64_t off = mr && mr->dm ? (uint64_t)(op->seg[0].host - mr->dm->buf) : 0;
    uint32_t b = (uint32_t)((off / 64) % banks);
    sim_time_t now = sim_now(nic->sim);
    sim_time_t start = nic->dm_bank_free_ps[b] > now ? nic->dm_bank_free_ps[b] : now;
    nic->dm_bank_free_ps[b] = start + t;
    return start + t - now;
}

void nic_dm_teardown(struct nic *nic)
{
    free(nic->dm_bank_free_ps);
    nic->dm_bank_free_ps = NULL;
    for (uint32_t i = 0; i < nic->n_dms; i++) {
        free(nic->dms[i]->buf);
        free(nic->dms[i]);
    }
    free(nic->dms);
    nic->dms = NULL;
    nic->n_dms = nic->cap_dms = 0;
    nic->dm_used_bytes = 0;
}
