/* Address translation (the NIC TLB) and the NIC's accesses to host and
 * device memory (docs/nic.md "Caches inside the RNIC").
 *
 * Every DMA the NIC makes into an MR - payload reads for requests and READ
 * responses, placements, atomics - names memory by key and address.  Before
 * the DMA can be issued the NIC needs the key's memory protection entry
 * (MPT: the MR's bounds, access rights, page size, where its page table
 * is) and, for every page the access touches, the page's translation (MTT
 * entry).  Both are cached on the NIC (CALIBRATION "MTT/MPT translation
 * caches: two levels, miss = PCIe read"; RIMA Section 3.2 "the NIC TLB").
 * A miss reads the entry over PCIe (kind xlate_miss): nic.mpt_bytes, or for
 * the MTT a line of NIC_MTT_LINE consecutive entries (8 x nic.mtt_bytes =
 * one 64 B cache line, so a sequential walk misses once per 8 pages); at
 * most nic.xlate_max_misses fetches are in flight.
 *
 * Pages are 4 KiB, or 2 MiB when the host's memory is on huge pages
 * (nic.hugepages: true, which `host.hugepages` sets): the same working set
 * then needs 512 times fewer MTT entries.  An MTT line is named by the MR
 * key (index and generation, so a deregistered MR's entries simply age out)
 * and the index within the MR of its first page / NIC_MTT_LINE.
 *
 * One in-order unit.  Operations enter a FIFO in the order the engines
 * issue them, all their lookups are made at once (misses of later
 * operations overlap with earlier ones), and they leave - to PCIe - in
 * FIFO order when their entries are all present.  So DMA writes stay in
 * issue order (a CQE, which has no MR segment, still leaves after the data
 * it reports), and a read never passes an earlier write, exactly as
 * without translation.  An operation that finds the FIFO empty and hits
 * everywhere goes straight through in the same call: no event is added.
 *
 * Device memory (ibv_alloc_dm, dm.c): an operation whose segments are all
 * in device memory needs no translation and no PCIe; the data are read or
 * written after nic.dm_access.  Peer memory (peer.c): an operation whose
 * segments are all in one peer device's memory is timed on that device's
 * link instead of the host link. */
#include "nic_priv.h"

/* ---------------------------------------------------------------- caches */

static void xl_fetched(struct sim *sim, void *a, void *b)
{
    (void)sim;
    struct nic_cache *c = a;
    nic_cache_filled(c, (uint64_t)(uintptr_t)b);
}

static void xl_fetch(struct nic_cache *c, uint64_t key, void *owner)
{
    struct nic *nic = owner;
    uint32_t bytes = c == &nic->mpt ? nic->p.mpt_bytes : NIC_MTT_LINE * nic->p.mtt_bytes;
    nic->cnt.dma_reads++;
    nic_pcie_trace_ctx(nic, NULL);
    if (nic->pcie)
        pcie_dma_read_k(nic->pcie, PCIE_K_XLATE_MISS, 0, bytes, xl_fetched, c,
                        (void *)(uintptr_t)key);
    else
        sim_call_in(nic->sim, 0, xl_fetched, c, (void *)(uintptr_t)key);
}

int nic_xlate_init(struct nic *nic)
{
    uint32_t mm = nic->p.xlate_max_misses ? nic->p.xlate_max_misses : 1;
    if (nic_cache_init(&nic->mpt, nic->sim, "mpt", nic->p.mpt_cache_entries, mm, xl_fetch, nic) ||
        nic_cache_configure(nic, &nic->mpt, nic->p.mpt_ways))
        return ENOMEM;
    /* the MTT cache holds lines of NIC_MTT_LINE entries (a 64 B read) */
    uint32_t lines =
        (uint32_t)(((uint64_t)nic->p.mtt_cache_entries + NIC_MTT_LINE - 1) / NIC_MTT_LINE);
    if (nic_cache_init(&nic->mtt, nic->sim, "mtt", lines, mm, xl_fetch, nic) ||
        nic_cache_configure(nic, &nic->mtt, nic->p.mtt_ways)) {
        nic_cache_fini(&nic->mpt);
        return ENOMEM;
    }
    return 0;
}

void nic_xlate_fini(struct nic *nic)
{
    nic_cache_fini(&nic->mpt);
    nic_cache_fini(&nic->mtt);
}

/* ---------------------------------------------------------------- the in-order unit */

/* Trace: an operation that waited for translations (its own misses or an
 * earlier operation's) from its issue until now. */
static __attribute__((noinline, cold)) void xl_trace(struct nic *nic, const struct nic_op *op)
{
    sim_time_t now = sim_now(nic->sim);
    if (op->tr_t0 == SIM_TIME_NEVER || op->tr_t0 >= now)
        return;
    nic_trace_span(nic, TRK_XLATE, op->tr_t0, now - op->tr_t0,
                   &(struct trace_rec){.qpn = nic_op_trace_qpn(op),
                                       .psn = nic_op_trace_psn(op),
                                       .where = "wait for translation"});
}

static void xl_pump(struct nic *nic)
{
    if (nic->xl_pumping)
        return; /* a go() that issued more work: the outer loop continues */
    nic->xl_pumping = true;
    while (nic->xl_head && nic->xl_head->xl_pending == 0) {
        struct nic_op *op = nic->xl_head;
        nic->xl_head = op->xl_next;
        if (!nic->xl_head)
            nic->xl_tail = NULL;
        op->xl_next = NULL;
        if (nic_tr(nic))
            xl_trace(nic, op);
        op->xl_go(op);
    }
    nic->xl_pumping = false;
}

static void xl_entry_ready(struct sim *sim, void *a, void *b)
{
    (void)sim;
    (void)b;
    struct nic_op *op = a;
    op->xl_pending--;
    xl_pump(op->nic);
}

static void xl_lookup(struct nic_cache *c, uint64_t key, struct nic_op *op)
{
    if (!nic_cache_access(c, key, xl_entry_ready, op, NULL))
        op->xl_pending++;
}

void nic_xlate(struct nic *nic, struct nic_op *op, void (*go)(struct nic_op *op))
{
    op->xl_go = go;
    op->xl_pending = 0;
    op->xl_next = NULL;
    bool all_dm = op->n_seg > 0;
    op->xl_peer = NULL;
    bool all_peer = op->n_seg > 0;
    for (uint32_t i = 0; i < op->n_seg; i++) {
        const struct nic_seg *s = &op->seg[i];
        struct nic_mr *mr = s->len ? nic_mr_lookup(nic, s->key) : NULL;
        if (!mr) { /* empty, or deregistered meanwhile: the copy skips it */
            all_dm = false;
            all_peer = false;
            continue;
        }
        if (!mr->peer || (op->xl_peer && op->xl_peer != mr->peer))
            all_peer = false;
        else
            op->xl_peer = mr->peer;
        if (mr->dm)
            continue;
        all_dm = false;
        xl_lookup(&nic->mpt, s->key >> 8, op);
        /* pages counted on the MR's deterministic wire addresses (mr.c),
         * not on where the process happens to be mapped */
        uint64_t wire =
            mr->wire_base + (uint64_t)((const char *)s->host - (const char *)mr->host_addr);
        uint64_t base = mr->wire_base >> mr->page_shift;
        uint64_t first = (wire >> mr->page_shift) - base;
        uint64_t last = ((wire + s->len - 1) >> mr->page_shift) - base;
        for (uint64_t ln = first / NIC_MTT_LINE; ln <= last / NIC_MTT_LINE; ln++)
            xl_lookup(&nic->mtt, (uint64_t)s->key << 32 | (ln & 0xffffffffu), op);
    }
    op->xl_dm = all_dm;
    if (!all_peer)
        op->xl_peer = NULL;
    if (op->xl_pending || nic->xl_head)
        nic->cnt.xlate_waits++;
    if (nic->xl_tail)
        nic->xl_tail->xl_next = op;
    else
        nic->xl_head = op;
    nic->xl_tail = op;
    xl_pump(nic);
}

/* ---------------------------------------------------------------- registration */

static bool mtt_of_key(uint64_t line, const void *arg)
{
    return (line >> 32) == *(const uint32_t *)arg;
}

void nic_xlate_forget_mr(struct nic *nic, const struct nic_mr *mr)
{
    if (nic->p.dereg_flush == NIC_DEREG_FLUSH_ALL) {
        nic->cnt.xlate_invalidated += nic_cache_invalidate_if(&nic->mpt, NULL, NULL);
        nic->cnt.xlate_invalidated += nic_cache_invalidate_if(&nic->mtt, NULL, NULL);
        return;
    }
    uint32_t key = mr->lkey;
    if (nic_cache_contains(&nic->mpt, key >> 8)) {
        nic_cache_invalidate(&nic->mpt, key >> 8);
        nic->cnt.xlate_invalidated++;
    }
    nic->cnt.xlate_invalidated += nic_cache_invalidate_if(&nic->mtt, mtt_of_key, &key);
}

void nic_xlate_learn_mr(struct nic *nic, const struct nic_mr *mr)
{
    if (!nic->p.mr_write_allocate || mr->dm)
        return;
    nic_cache_insert(&nic->mpt, mr->lkey >> 8);
    uint64_t pages = nic_mr_pages_of(mr);
    uint64_t lines = (pages + NIC_MTT_LINE - 1) / NIC_MTT_LINE;
    if (lines > nic->mtt.cap)
        lines = nic->mtt.cap; /* the last ones written would evict the first */
    for (uint64_t ln = 0; ln < lines; ln++)
        nic_cache_insert(&nic->mtt, (uint64_t)mr->lkey << 32 | (ln & 0xffffffffu));
}

/* ---------------------------------------------------------------- memory access */

static void mem_read_issue(struct sim *sim, void *a, void *b)
{
    (void)sim;
    (void)b;
    struct nic_op *op = a;
    nic_pcie_trace_ctx(op->nic, op); /* the context is the next PCIe operation's */
    pcie_dma_read_chain_k(op->nic->pcie, op->mem_kind, 0, op->mem_bytes, op->mem_chain,
                          op->mem_done, op, op->mem_b);
}

/* A write to the other socket's memory: one more link to cross after
 * PCIe, which later ordered writes and reads may not pass (dma.c). */
static void mem_write_numa(struct sim *sim, void *a, void *b)
{
    (void)b;
    struct nic_op *op = a;
    struct nic *nic = op->nic;
    sim_time_t now = sim_now(sim);
    sim_time_t t = now + nic_dma_numa_delay(nic, op, 0, (uint32_t)op->mem_bytes, true);
    if (nic->dma.horizon_ps > t)
        t = nic->dma.horizon_ps; /* not before the writes issued before it */
    nic->dma.horizon_ps = t;
    sim_call_in(sim, t - now, op->mem_done, op, op->mem_b);
}

static void mem_go(struct nic_op *op)
{
    struct nic *nic = op->nic;
    if (op->xl_dm) {
        nic->cnt.dm_accesses++;
        sim_call_in(nic->sim, nic_dm_access_delay(nic, op), op->mem_done, op, op->mem_b);
        return;
    }
    if (op->mem_write)
        nic->cnt.dma_writes++;
    else
        nic->cnt.dma_reads++;
    /* peer memory: peer-to-peer over the device's own link (peer.c) */
    struct pcie_link *link = op->xl_peer ? op->xl_peer : nic->pcie;
    /* host memory on the other socket than the NIC (host.numa.*): a read
     * waits for the link both ways before its completions can come back */
    bool remote = !op->xl_peer && nic->pcie && nic_dma_numa_remote(nic, op);
    sim_time_t numa = remote && !op->mem_write
                          ? nic_dma_numa_delay(nic, op, 0, (uint32_t)op->mem_bytes, false)
                          : 0;
    if (link && !numa && sim_trace_on(nic->sim, TRACE_G_PCIE)) /* the QP and PSN of its TLPs */
        pcie_trace_ctx(link, nic_op_trace_qpn(op), nic_op_trace_psn(op));
    if (!link)
        op->mem_done(nic->sim, op, op->mem_b);
    else if (op->mem_write && remote)
        pcie_dma_write_k(link, op->mem_kind, 0, op->mem_bytes, mem_write_numa, op, NULL);
    else if (op->mem_write)
        pcie_dma_write_k(link, op->mem_kind, 0, op->mem_bytes, op->mem_done, op, op->mem_b);
    else if (numa)
        sim_call_in(nic->sim, numa, mem_read_issue, op, NULL);
    else
        pcie_dma_read_chain_k(link, op->mem_kind, 0, op->mem_bytes, op->mem_chain, op->mem_done, op,
                              op->mem_b);
}

static void mem_access(struct nic *nic, struct nic_op *op, bool write, unsigned kind,
                       uint64_t bytes, sim_cb_fn done, void *b)
{
    op->mem_write = write;
    op->mem_kind = (uint8_t)kind;
    op->mem_bytes = bytes;
    op->mem_done = done;
    op->mem_b = b;
    if (write)
        op->mem_chain = NULL;
    nic_xlate(nic, op, mem_go);
}

void nic_mem_read(struct nic *nic, struct nic_op *op, unsigned kind, uint64_t bytes, sim_cb_fn done,
                  void *b)
{
    mem_access(nic, op, false, kind, bytes, done, b);
}

void nic_mem_write(struct nic *nic, struct nic_op *op, unsigned kind, uint64_t bytes,
                   sim_cb_fn done, void *b)
{
    mem_access(nic, op, true, kind, bytes, done, b);
}
