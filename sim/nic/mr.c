/* Protection domains and memory regions: the NIC's memory protection table
 * (mlx5's MPT; its on-NIC cache and the page translations are xlate.c).
 *
 * Keys.  An MR gets one key used as both lkey and rkey (mlx5 does the
 * same): key = index << 8 | generation, where `index` is its slot in the
 * table and `generation` counts the registrations of that slot, so a key
 * of a deregistered MR does not name the slot's next MR.  Lookup is O(1):
 * the slot of key >> 8, then the exact key compared.
 *
 * Checks (IBA 10.6.3, rxe's mr_check_range / lookup_mr): the key names a
 * valid MR, the MR belongs to the QP's PD, [va, va+len) lies inside
 * [iova, iova+length), and the MR grants the access needed (remote write /
 * read / atomic for a responder, local write for placement into local
 * buffers).  Zero-length accesses pass without a key check (IBA C9-88 ...
 * a zero-length RDMA does not validate the R_Key).
 *
 * IBV_ACCESS_RELAXED_ORDERING (passed through by the verbs shim) is kept in
 * `access`: placements into such an MR are written with PCIe Relaxed
 * Ordering (dma.c), whatever the NIC's dma_ordering says. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "nic_priv.h"

/* ---------------------------------------------------------------- PD */

struct nic_pd *nic_pd_alloc(struct nic *nic)
{
    if (nic->n_pds == nic->cap_pds) {
        uint32_t cap = nic->cap_pds ? 2 * nic->cap_pds : 8;
        struct nic_pd **n = realloc(nic->pds, cap * sizeof(*n));
        if (!n) {
            errno = ENOMEM;
            return NULL;
        }
        nic->pds = n;
        nic->cap_pds = cap;
    }
    struct nic_pd *pd = calloc(1, sizeof(*pd));
    if (!pd) {
        errno = ENOMEM;
        return NULL;
    }
    pd->nic = nic;
    pd->handle = nic->next_pd_handle++;
    nic->pds[nic->n_pds++] = pd;
    return pd;
}

int nic_pd_free(struct nic_pd *pd)
{
    if (!pd)
        return EINVAL;
    if (pd->n_users)
        return EBUSY;
    struct nic *nic = pd->nic;
    for (uint32_t i = 0; i < nic->n_pds; i++)
        if (nic->pds[i] == pd) {
            nic->pds[i] = nic->pds[--nic->n_pds];
            break;
        }
    free(pd);
    return 0;
}

/* ---------------------------------------------------------------- command interface */

/* The driver creates, changes and destroys MRs through the NIC's command
 * interface (mlx5: firmware commands through a mailbox), which executes
 * one command at a time for nic.cmd_proc: registrations of different
 * threads and processes of a host queue behind each other. */
sim_time_t nic_cmd_delay(struct nic *nic, uint32_t n)
{
    sim_time_t now = sim_now(nic->sim);
    sim_time_t start = nic->cmd_free_ps > now ? nic->cmd_free_ps : now;
    nic->cmd_free_ps = start + (sim_time_t)n * nic->p.cmd_proc_ps;
    nic->cnt.nic_cmds += n;
    return nic->cmd_free_ps - now;
}

/* The page size of memory [addr, addr + length): 2 MiB when the host puts
 * all memory on huge pages (nic.hugepages, from host.hugepages) or the
 * whole range is one huge-page buffer of the host (host_alloc_huge), else
 * 4 KiB (the kernel gives an MR the largest page size all its pages
 * have). */
static unsigned mr_page_shift(const struct nic *nic, const void *addr, uint64_t length)
{
    return nic->p.hugepages || host_mem_huge(nic->host, addr, length) ? NIC_HUGE_PAGE_SHIFT
                                                                      : NIC_PAGE_SHIFT;
}

/* Pages of 1 << shift bytes that [addr, addr + length) spans. */
static uint64_t pages_of(const void *addr, uint64_t length, unsigned shift)
{
    if (!length)
        return 0;
    /* Counted on the buffer's offset in its 4 KiB page, placed at the
     * start of a page of the MR's size (as nic_mr_reg places its wire
     * address): address-space randomisation moves whole 4 KiB pages, so
     * counting huge pages on the process address would make the
     * registration cost depend on where the process was loaded. */
    uint64_t a = (uint64_t)(uintptr_t)addr & (((uint64_t)1 << NIC_PAGE_SHIFT) - 1);
    return ((a + length - 1) >> shift) - (a >> shift) + 1;
}

uint64_t nic_mr_pages(const struct nic *nic, const void *addr, uint64_t length)
{
    return pages_of(addr, length, mr_page_shift(nic, addr, length));
}

uint64_t nic_mr_pages_of(const struct nic_mr *mr)
{
    return pages_of(mr->host_addr, mr->length, mr->page_shift);
}

/* ---------------------------------------------------------------- MR */

/* Where the MR's memory is as the wire and the NIC's page table see it:
 * its wire address and the peer device it lives on, if any.  At
 * registration, and again when ibv_rereg_mr gives it new memory (new
 * pages, perhaps of another size, perhaps on a GPU). */
static void mr_place(struct nic *nic, struct nic_mr *mr)
{
    uint64_t iova = mr->iova, length = mr->length;
    if (iova == (uint64_t)(uintptr_t)mr->host_addr) { /* at its process address: a wire address */
        if (!nic->wire_va_next)
            nic->wire_va_next = NIC_WIRE_VA_BASE;
        /* Same offset in its 4 KiB page as the process address (stable
         * under address-space randomisation, which moves whole pages);
         * the start of a page of the MR's size, as a huge-page buffer is
         * (xlate.c counts the MR's pages on these addresses, so that which
         * pages a buffer spans does not depend on where the process was
         * loaded). */
        uint64_t page = (uint64_t)1 << mr->page_shift, small = (uint64_t)1 << NIC_PAGE_SHIFT;
        uint64_t start = (nic->wire_va_next + page - 1) & ~(page - 1);
        mr->wire_base = start + (iova & (small - 1));
        nic->wire_va_next = ((mr->wire_base + length + page - 1) & ~(page - 1)) + page; /* guard */
    } else {
        mr->wire_base = iova;
    }
    mr->peer = nic_peer_link_of(nic, mr->host_addr, length);
}

struct nic_mr *nic_mr_reg(struct nic_pd *pd, void *addr, uint64_t length, uint64_t iova, int access)
{
    if (!pd || (!addr && length)) {
        errno = EINVAL;
        return NULL;
    }
    struct nic *nic = pd->nic;
    if (nic->n_mrs >= nic->p.max_mr) {
        errno = ENOMEM;
        return NULL;
    }
    /* find a free slot (slot 0 unused, so no key is 0x00..00) */
    uint32_t idx = 0;
    for (uint32_t i = nic->mr_next_free_hint; i < nic->mr_cap; i++)
        if (i && !nic->mr_tbl[i]) {
            idx = i;
            break;
        }
    if (!idx) {
        uint32_t cap = nic->mr_cap ? 2 * nic->mr_cap : 64;
        if (cap > (1u << 24)) {
            errno = ENOMEM;
            return NULL;
        }
        struct nic_mr **t = realloc(nic->mr_tbl, cap * sizeof(*t));
        if (!t) {
            errno = ENOMEM;
            return NULL;
        }
        nic->mr_tbl = t;
        uint8_t *g = realloc(nic->mr_gen, cap);
        if (!g) {
            errno = ENOMEM;
            return NULL;
        }
        nic->mr_gen = g;
        memset(t + nic->mr_cap, 0, (cap - nic->mr_cap) * sizeof(*t));
        memset(g + nic->mr_cap, 0, cap - nic->mr_cap);
        idx = nic->mr_cap ? nic->mr_cap : 1;
        nic->mr_cap = cap;
    }
    struct nic_mr *mr = calloc(1, sizeof(*mr));
    if (!mr) {
        errno = ENOMEM;
        return NULL;
    }
    nic->mr_gen[idx]++;
    mr->nic = nic;
    mr->pd = pd;
    mr->host_addr = addr;
    mr->iova = iova;
    mr->length = length;
    mr->lkey = mr->rkey = (idx << 8) | nic->mr_gen[idx];
    mr->access = access;
    mr->valid = true;
    /* the page size the kernel hands the NIC's page table (xlate.c) */
    mr->page_shift = (uint8_t)mr_page_shift(nic, addr, length);
    mr_place(nic, mr);
    nic->mr_tbl[idx] = mr;
    nic->mr_next_free_hint = idx + 1;
    nic->n_mrs++;
    nic->cnt.mr_bytes += length;
    if (nic->cnt.mr_bytes > nic->cnt.mr_bytes_peak)
        nic->cnt.mr_bytes_peak = nic->cnt.mr_bytes;
    if (access & IBV_ACCESS_RELAXED_ORDERING)
        nic->dma.ro_mrs++; /* dma.c: placements into it may be relaxed */
    pd->n_users++;
    nic_xlate_learn_mr(nic, mr); /* its translations were just written */
    return mr;
}

int nic_mr_dereg(struct nic_mr *mr)
{
    if (!mr)
        return EINVAL;
    struct nic *nic = mr->nic;
    uint32_t idx = mr->lkey >> 8;
    nic_xlate_forget_mr(nic, mr); /* cached translations of the key go */
    if (idx < nic->mr_cap && nic->mr_tbl[idx] == mr) {
        nic->mr_tbl[idx] = NULL;
        if (idx < nic->mr_next_free_hint)
            nic->mr_next_free_hint = idx;
    }
    nic->n_mrs--;
    nic->cnt.mr_bytes -= mr->length;
    if (mr->dm)
        mr->dm->n_mrs--;
    if (mr->access & IBV_ACCESS_RELAXED_ORDERING)
        nic->dma.ro_mrs--;
    mr->pd->n_users--;
    mr->valid = false;
    free(mr);
    return 0;
}

int nic_mr_rereg(struct nic_mr *mr, int flags, struct nic_pd *pd, void *addr, uint64_t length,
                 uint64_t iova, int access)
{
    if (!mr || !mr->valid)
        return EINVAL;
    struct nic *nic = mr->nic;
    if ((flags & IBV_REREG_MR_CHANGE_PD) && (!pd || pd->nic != nic))
        return EINVAL;
    if ((flags & IBV_REREG_MR_CHANGE_TRANSLATION) && (mr->dm || (!addr && length)))
        return EINVAL;
    nic_xlate_forget_mr(nic, mr);
    if (flags & IBV_REREG_MR_CHANGE_PD) {
        mr->pd->n_users--;
        mr->pd = pd;
        pd->n_users++;
    }
    if (flags & IBV_REREG_MR_CHANGE_TRANSLATION) {
        nic->cnt.mr_bytes -= mr->length;
        mr->host_addr = addr;
        mr->iova = iova;
        mr->length = length;
        mr->page_shift = (uint8_t)mr_page_shift(nic, addr, length); /* the new memory's pages */
        mr_place(nic, mr);
        nic->cnt.mr_bytes += length;
        if (nic->cnt.mr_bytes > nic->cnt.mr_bytes_peak)
            nic->cnt.mr_bytes_peak = nic->cnt.mr_bytes;
    }
    if (flags & IBV_REREG_MR_CHANGE_ACCESS) {
        if (mr->access & IBV_ACCESS_RELAXED_ORDERING)
            nic->dma.ro_mrs--;
        mr->access = access;
        if (access & IBV_ACCESS_RELAXED_ORDERING)
            nic->dma.ro_mrs++;
    }
    nic_xlate_learn_mr(nic, mr);
    return 0;
}

struct nic_mr *nic_mr_reg_dm(struct nic_pd *pd, struct nic_dm *dm, uint64_t offset, uint64_t length,
                             int access)
{
    if (!pd || !dm || pd->nic != dm->nic || offset > dm->length || length > dm->length - offset) {
        errno = EINVAL;
        return NULL;
    }
    /* zero-based: the MR's addresses are offsets from its start */
    struct nic_mr *mr = nic_mr_reg(pd, dm->buf + offset, length, 0, access);
    if (!mr)
        return NULL;
    mr->dm = dm;
    dm->n_mrs++;
    nic_xlate_forget_mr(pd->nic, mr); /* device memory needs no translations */
    return mr;
}

struct nic_mr *nic_mr_lookup(struct nic *nic, uint32_t key)
{
    uint32_t idx = key >> 8;
    if (idx >= nic->mr_cap)
        return NULL;
    struct nic_mr *mr = nic->mr_tbl[idx];
    return mr && mr->lkey == key && mr->valid ? mr : NULL;
}

bool nic_wire_va(struct nic *nic, uint32_t rkey, uint64_t va, uint64_t *wire_va)
{
    struct nic_mr *mr = nic_mr_lookup(nic, rkey);
    if (!mr)
        return false;
    *wire_va = mr->wire_base + (va - mr->iova); /* modulo 2^64: also outside the MR */
    return true;
}

enum nic_mr_status nic_mr_check(struct nic *nic, uint32_t key, const struct nic_pd *pd, uint64_t va,
                                uint64_t len, int access, uint8_t **host)
{
    struct nic_mr *mr = nic_mr_lookup(nic, key);
    if (!mr)
        return NIC_MR_BAD_KEY;
    if (mr->pd != pd)
        return NIC_MR_BAD_PD;
    if (va < mr->iova || len > mr->length || va - mr->iova > mr->length - len)
        return NIC_MR_BOUNDS;
    if ((mr->access & access) != access)
        return NIC_MR_ACCESS;
    if (host)
        *host = mr->host_addr + (va - mr->iova);
    return NIC_MR_OK;
}

void nic_mr_teardown(struct nic *nic)
{
    for (uint32_t i = 0; i < nic->mr_cap; i++)
        free(nic->mr_tbl[i]);
    free(nic->mr_tbl);
    free(nic->mr_gen);
    nic->mr_tbl = NULL;
    nic->mr_gen = NULL;
    nic->mr_cap = 0;
}
