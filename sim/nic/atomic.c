/* The atomic unit: RDMA FETCH_AND_ADD and COMPARE_AND_SWAP at the responder
 * (docs/nic.md "Atomics").
 *
 * An atomic is a read-modify-write of 8 bytes: read the original (a DMA
 * read over PCIe for host memory; for device memory an access to its bank,
 * dm.c), compute in the unit's ALU (nic.atomic_proc, one operation at a
 * time for the whole NIC: the unit is a shared resource), write the result
 * back (a posted DMA write, or a bank access), and the ACK carrying the
 * original may leave once the write is visible.  A compare that fails
 * writes the original back: CAS and FAA cost the same, as on hardware.
 *
 * Atomics on the same address are serialised.  In host memory the next one
 * may start as soon as the previous one's write is issued: PCIe does not
 * let its read pass that posted write (pcie.c), so it reads the new value;
 * contention therefore costs one PCIe read round trip + the ALU per
 * operation.  In device memory it costs two bank accesses + the ALU.
 * Atomics on different addresses overlap (up to the ALU).
 *
 * The waiting ops are one FIFO; when an address frees, the first op waiting
 * for it starts (so atomics on one address run in arrival order). */
#include <stdlib.h>
#include <string.h>

#include "nic_priv.h"

static void atomic_start_ready(struct nic *nic);

static bool addr_busy(const struct nic *nic, const uint8_t *addr)
{
    for (uint32_t i = 0; i < nic->n_atom_busy; i++)
        if (nic->atom_busy[i] == addr)
            return true;
    return false;
}

static void addr_take(struct nic *nic, uint8_t *addr)
{
    if (nic->n_atom_busy == nic->cap_atom_busy) {
        uint32_t cap = nic->cap_atom_busy ? 2 * nic->cap_atom_busy : 8;
        uint8_t **n = realloc(nic->atom_busy, cap * sizeof(*n));
        if (!n)
            abort();
        nic->atom_busy = n;
        nic->cap_atom_busy = cap;
    }
    nic->atom_busy[nic->n_atom_busy++] = addr;
}

static void addr_release(struct nic *nic, const uint8_t *addr)
{
    for (uint32_t i = 0; i < nic->n_atom_busy; i++)
        if (nic->atom_busy[i] == addr) {
            nic->atom_busy[i] = nic->atom_busy[--nic->n_atom_busy];
            return;
        }
}

/* The next atomic on op's address may start (op->v: released already). */
static void atomic_release(struct nic *nic, struct nic_op *op)
{
    if (op->v)
        return;
    op->v = 1;
    addr_release(nic, op->seg[0].host);
    atomic_start_ready(nic);
}

static void atomic_finish(struct nic *nic, struct nic_op *op)
{
    struct pkt *p = op->pkt;
    if (nic_op_stale(op) || !nic_stage_mark_ready(nic, &op->qp->eng->resp_stage, p))
        pkt_free(nic->pool, p);
    else
        nic_tx_src_ready(nic, &op->qp->eng->resp_src);
    atomic_release(nic, op);
    nic_op_free(op);
}

static void atomic_write_visible(struct sim *sim, void *a, void *b)
{
    (void)b;
    struct nic_op *op = a;
    nic_copy_to_host(op->nic, op, op->data8);
    nic_trace_dma_write(op->nic, op, op->qp->qpn, "resp: atomic result");
    if (op->tr_t0 != SIM_TIME_NEVER && nic_tr(op->nic)) /* read, ALU, write: the whole atomic */
        nic_trace_span(op->nic, TRK_ATOMIC, op->tr_t0, sim_now(sim) - op->tr_t0,
                       &(struct trace_rec){.qpn = op->qp->qpn,
                                           .psn = op->pkt->psn,
                                           .opcode = op->atomic_opcode,
                                           .status = op->flag,
                                           .where = op->atomic_opcode == IB_OPCODE_RC_COMPARE_SWAP
                                                        ? "compare and swap"
                                                        : "fetch and add"});
    if (op->nic->host)
        host_dma_landed(op->nic->host);
    atomic_finish(op->nic, op);
}

/* The result write is strict (no Relaxed Ordering): it never passes an
 * earlier relaxed data write (dma.c). */
static void atomic_write_done(struct sim *sim, void *a, void *b)
{
    struct nic_op *op = a;
    if (!op->xl_dm && nic_dma_wait_relaxed(op->nic, atomic_write_visible, a, b))
        return;
    atomic_write_visible(sim, a, b);
}

static void atomic_exec_done(struct sim *sim, void *a, void *b)
{
    (void)sim;
    (void)b;
    struct nic_op *op = a;
    struct nic *nic = op->nic;
    /* a failed compare writes the original back: the same cost as a FAA */
    bool dm = op->xl_dm;
    nic_mem_write(nic, op, PCIE_K_ATOMIC, 8, atomic_write_done, NULL);
    /* host memory: the write is issued; the next atomic's read cannot pass
     * it (PCIe ordering), so the address is free for it now */
    if (!dm)
        atomic_release(nic, op);
}

static void atomic_read_data(struct sim *sim, void *a, void *b)
{
    (void)b;
    struct nic_op *op = a;
    struct nic *nic = op->nic;
    if (nic_op_stale(op)) {
        atomic_finish(nic, op);
        return;
    }
    uint64_t orig = 0, val;
    nic_copy_from_host(nic, op, (uint8_t *)&orig);
    if (op->atomic_opcode == IB_OPCODE_RC_COMPARE_SWAP) {
        op->flag = orig == op->compare;
        val = op->flag ? op->swap_add : orig;
    } else {
        op->flag = true;
        val = orig + op->swap_add;
    }
    memcpy(op->data8, &val, 8);
    op->pkt->atomic_orig = orig;
    struct nic_qp_engine *e = op->qp->eng;
    for (unsigned i = 0; i < NIC_ATOMIC_HISTORY; i++) {
        struct nic_atomic_hist *h = &e->atomic_hist[i];
        if (h->valid && h->pending && h->psn == op->pkt->psn) {
            h->pending = false;
            h->orig = orig;
            break;
        }
    }
    /* the NIC's one ALU: operations on any address take turns */
    sim_time_t now = sim_now(sim);
    sim_time_t start = nic->atom_alu_free_ps > now ? nic->atom_alu_free_ps : now;
    nic->atom_alu_free_ps = start + nic->p.atomic_proc_ps;
    sim_call_in(sim, nic->atom_alu_free_ps - now, atomic_exec_done, op, NULL);
}

/* A DMA read does not pass an earlier posted write, relaxed ones included
 * (dma.c): the original value includes every write placed before it. */
static void atomic_read_done(struct sim *sim, void *a, void *b)
{
    struct nic_op *op = a;
    if (!op->xl_dm && nic_dma_wait_relaxed(op->nic, atomic_read_data, a, b))
        return;
    atomic_read_data(sim, a, b);
}

/* Start every waiting op whose address is free, in FIFO order. */
static void atomic_start_ready(struct nic *nic)
{
    struct nic_op **link = &nic->atom_head, *prev = NULL;
    while (*link) {
        struct nic_op *op = *link;
        if (addr_busy(nic, op->seg[0].host)) {
            prev = op;
            link = &op->next;
            continue;
        }
        *link = op->next;
        if (nic->atom_tail == op)
            nic->atom_tail = prev;
        op->next = NULL;
        op->v = 0; /* holds its address */
        addr_take(nic, op->seg[0].host);
        if (nic_tr(nic))
            op->tr_t0 = sim_now(nic->sim);
        nic_mem_read(nic, op, PCIE_K_ATOMIC, 8, atomic_read_done, NULL);
    }
}

void nic_atomic_submit(struct nic *nic, struct nic_op *op)
{
    op->next = NULL;
    if (addr_busy(nic, op->seg[0].host))
        nic->cnt.atomic_waits++;
    if (nic->atom_tail)
        nic->atom_tail->next = op;
    else
        nic->atom_head = op;
    nic->atom_tail = op;
    atomic_start_ready(nic);
}

void nic_atomic_teardown(struct nic *nic)
{
    nic->atom_head = nic->atom_tail = NULL; /* ops and packets go with their pools */
    free(nic->atom_busy);
    nic->atom_busy = NULL;
    nic->n_atom_busy = nic->cap_atom_busy = 0;
}
