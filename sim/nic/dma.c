/* The DMA ordering model: when the bytes the NIC writes into host memory
 * become visible to the host's CPUs (DESIGN.md "RNIC": DMA ordering model;
 * docs/nic.md "DMA ordering").
 *
 * Every payload placement - the responder's SEND/WRITE data and UD GRH,
 * the completer's READ response data and atomic original values - goes
 * through nic_dma_place().  Memory is real memory: the bytes of a piece
 * are memcpy'd at the simulated instant the piece becomes visible, then
 * host_dma_landed() wakes the host's pollers, so a program that polls
 * memory sees exactly what has landed.
 *
 * The rule is PCIe's (Base Specification, "Transaction Ordering", row
 * Posted Request / column Posted Request): a posted write whose Relaxed
 * Ordering attribute is set may pass any earlier posted write; one without
 * it may not.  And no read passes a posted write (row Read Request), RO or
 * not.
 *
 *  STRICT  (nic.dma_ordering: strict, the default): one pcie_dma_write per
 *          placement; posted writes are visible in issue order (pcie.c), so
 *          a message's bytes land in address order, messages land in the
 *          order they are placed, and a CQE after its data.
 *  RELAXED (nic.dma_ordering: relaxed, or every MR the placement touches
 *          was registered with IBV_ACCESS_RELAXED_ORDERING - mlx5 sets the
 *          RO attribute on data writes to such MRs): the placement is cut
 *          into MPS-sized chunks, one MWr TLP each, serialised on the link
 *          as before; chunk i becomes visible at its in-order time plus d_i,
 *          d_i uniform on [0, dma_ro_max_delay_ps] (integer picoseconds,
 *          NIC stream "nic<N>.dma").  So chunks of one message, and chunks
 *          of different messages and QPs, land in any order whose
 *          inversions span at most dma_ro_max_delay_ps.
 *  Strict writes - every CQE, atomic results, placements into strict MRs -
 *          carry no RO attribute: one that reaches visibility before an
 *          earlier relaxed chunk waits for it (`horizon_ps`, the latest
 *          visibility time of a relaxed chunk issued so far; writes reach
 *          the PCIe level in issue order, so at that instant the horizon
 *          covers exactly the earlier chunks).  Hence a CQE is never
 *          visible before the data it reports, in either mode.
 *  Reads   the responder's READ and atomic DMA reads wait the same way, so
 *          a READ after a relaxed WRITE returns the written bytes.
 *
 * Cost: nothing in strict mode beyond one comparison per strict write;
 * relaxed placements take two events per chunk instead of one per packet. */
#include <stdio.h>
#include <string.h>

#include "nic_priv.h"

static void dma_rng_init(struct nic *nic)
{
    if (nic->dma.rng_ready)
        return;
    char name[32];
    snprintf(name, sizeof(name), "nic%u.dma", nic->node_id);
    sim_rng_stream(nic->sim, &nic->dma.rng, name);
    snprintf(name, sizeof(name), "nic%u.ar", nic->node_id);
    sim_rng_stream(nic->sim, &nic->dma.ar_rng, name);
    nic->dma.rng_ready = true;
}

struct sim_rng *nic_dma_ar_rng(struct nic *nic)
{
    dma_rng_init(nic);
    return &nic->dma.ar_rng;
}

/* A chunk is one MWr TLP: the link's max payload size. */
static uint32_t dma_chunk_bytes(const struct nic *nic)
{
    uint32_t mps = nic->pcie ? pcie_link_mps_bytes(nic->pcie) : 0;
    return mps ? mps : 256; /* no PCIe link (unit tests): the default MPS */
}

/* Relaxed if the NIC says so, or every MR the placement writes is an RO MR. */
static bool dma_relaxed(struct nic *nic, const struct nic_op *op)
{
    if (nic->p.dma_ordering == NIC_DMA_RELAXED)
        return true;
    if (!nic->dma.ro_mrs || !op->n_seg)
        return false;
    for (uint32_t i = 0; i < op->n_seg; i++) {
        const struct nic_mr *mr = nic_mr_lookup(nic, op->seg[i].key);
        if (!mr || !(mr->access & IBV_ACCESS_RELAXED_ORDERING))
            return false;
    }
    return true;
}

/* Bytes [off, off + len) of the placement become visible: copy them into
 * the segments that hold them (skipping an MR deregistered meanwhile), one
 * trace record per segment piece. */
static void dma_copy(struct nic *nic, const struct nic_op *op, uint32_t off, uint32_t len)
{
    bool trace = sim_trace_enabled(nic->sim);
    uint32_t pos = 0; /* offset of segment i in the placement */
    for (uint32_t i = 0; i < op->n_seg && len; i++) {
        const struct nic_seg *s = &op->seg[i];
        uint32_t end = pos + s->len;
        if (off < end) {
            uint32_t in = off - pos;
            uint32_t n = s->len - in < len ? s->len - in : len;
            /* `payload: none`: no bytes move (pkt.h) */
            const struct nic_mr *mr = nic->no_payload ? NULL : nic_mr_lookup(nic, s->key);
            if (mr) {
                nic_host_write(mr, s->host + in, op->dma_src + off, n);
                if (nic->host && !mr->dm) /* cache-line state (sim/host/mem.c) */
                    host_dma_wrote(nic->host, s->host + in, n);
            }
            if (trace) {
                struct trace_rec r = {.kind = TRACE_DMA_WRITE,
                                      .node = nic->node_id,
                                      .qpn = op->dma_qpn,
                                      .psn = op->dma_psn,
                                      .addr = (uint64_t)(uintptr_t)(s->host + in),
                                      .len = n,
                                      .where = op->dma_where};
                sim_trace(nic->sim, &r);
            }
            off += n;
            len -= n;
        }
        pos = end;
    }
    if (nic->host)
        host_dma_landed(nic->host);
}

static void dma_free(struct nic *nic, struct nic_op *op)
{
    /* landed: the QP's ACKs held back for it may go (resp.c) */
    struct nic_qp *qp = op->place_qp;
    if (qp) {
        op->place_qp = NULL;
        qp->eng->place_landed++;
        if (!qp->eng->dead)
            nic_resp_placed(qp);
        nic_qp_put(qp);
    }
    if (op->pkt)
        pkt_free(nic->pool, op->pkt);
    nic_op_free(op);
}

bool nic_dma_wait_relaxed(struct nic *nic, sim_cb_fn fn, void *a, void *b)
{
    sim_time_t now = sim_now(nic->sim);
    if (nic->dma.horizon_ps <= now)
        return false;
    nic->cnt.dma_strict_waits++;
    sim_call_in(nic->sim, nic->dma.horizon_ps - now, fn, a, b);
    return true;
}

/* ---------------------------------------------------------------- strict */

/* Trace: bytes [off, off + len) of the placement became visible. */
static void dma_trace_land(struct nic *nic, const struct nic_op *op, uint32_t off, uint32_t len)
{
    if (op->tr_t0 == SIM_TIME_NEVER || !nic_tr(nic))
        return;
    nic_trace_span(nic, TRK_DMA_WR, op->tr_t0, sim_now(nic->sim) - op->tr_t0,
                   &(struct trace_rec){.qpn = op->dma_qpn,
                                       .psn = op->dma_psn,
                                       .addr = off,
                                       .len = len,
                                       .val = op->dma_len,
                                       .where = op->dma_where});
}

static void dma_strict_land(struct sim *sim, void *a, void *b)
{
    (void)sim;
    (void)b;
    struct nic_op *op = a;
    dma_trace_land(op->nic, op, 0, op->dma_len);
    dma_copy(op->nic, op, 0, op->dma_len);
    dma_free(op->nic, op);
}

/* Memory on the other socket than the NIC is one inter-socket link
 * further (host.numa.*): the write lands after it, never before the
 * writes issued before it (their visibility is the horizon), and the
 * writes and reads after it may not pass it (it becomes the horizon). */
static void dma_strict_visible(struct sim *sim, void *a, void *b)
{
    struct nic_op *op = a;
    struct nic *nic = op->nic;
    sim_time_t extra =
        nic->host && nic->host->mem ? nic_dma_numa_delay(nic, op, 0, op->dma_len, true) : 0;
    if (!extra) {
        if (!nic_dma_wait_relaxed(nic, dma_strict_land, a, b))
            dma_strict_land(sim, a, b);
        return;
    }
    sim_time_t now = sim_now(sim), t = now + extra;
    if (nic->dma.horizon_ps > t)
        t = nic->dma.horizon_ps;
    nic->dma.horizon_ps = t;
    sim_call_in(sim, t - now, dma_strict_land, a, b);
}

bool nic_dma_numa_remote(const struct nic *nic, const struct nic_op *op)
{
    for (uint32_t i = 0; nic->host && nic->host->mem && i < op->n_seg; i++)
        if (op->seg[i].len && host_mem_is_remote(nic->host, op->seg[i].host))
            return true;
    return false;
}

sim_time_t nic_dma_numa_delay(struct nic *nic, const struct nic_op *op, uint32_t off, uint32_t len,
                              bool write)
{
    struct host *h = nic->host;
    if (!h || !h->mem || !len)
        return 0; /* no program of the host placed memory: all on the NIC's socket */
    sim_time_t worst = 0;
    uint32_t pos = 0; /* offset of segment i in the operation */
    for (uint32_t i = 0; i < op->n_seg && len; i++) {
        const struct nic_seg *s = &op->seg[i];
        uint32_t end = pos + s->len;
        if (off < end) {
            uint32_t in = off - pos;
            uint32_t n = s->len - in < len ? s->len - in : len;
            sim_time_t d = host_dma_numa_delay(h, s->host + in, n, write);
            if (d > worst)
                worst = d;
            off += n;
            len -= n;
        }
        pos = end;
    }
    return worst;
}

/* ---------------------------------------------------------------- relaxed */

/* Chunk b of the op becomes visible. */
static void dma_ro_land(struct sim *sim, void *a, void *b)
{
    (void)sim;
    struct nic_op *op = a;
    struct nic *nic = op->nic;
    uint32_t i = (uint32_t)(uintptr_t)b;
    uint32_t mps = dma_chunk_bytes(nic);
    uint32_t off = i * mps;
    uint32_t len = op->dma_len - off < mps ? op->dma_len - off : mps;
    uint64_t seq = op->dma_seq0 + i;
    if (seq + 1 < nic->dma.landed_hi)
        nic->cnt.dma_ro_overtaken++; /* a chunk issued after it is already visible */
    else
        nic->dma.landed_hi = seq + 1;
    dma_trace_land(nic, op, off, len);
    dma_copy(nic, op, off, len);
    if (--op->dma_left == 0)
        dma_free(nic, op);
}

/* Chunk b reached the point where an in-order write would be visible:
 * the root complex may still hold it for d (RO lets younger writes pass). */
static void dma_ro_visible(struct sim *sim, void *a, void *b)
{
    struct nic_op *op = a;
    struct nic *nic = op->nic;
    dma_rng_init(nic);
    sim_time_t max = nic->p.dma_ro_max_delay_ps;
    sim_time_t d = max ? (sim_time_t)sim_rng_below(&nic->dma.rng, (uint64_t)max + 1) : 0;
    uint32_t mps = dma_chunk_bytes(nic), off = (uint32_t)(uintptr_t)b * mps;
    d = sim_time_add(d, nic_dma_numa_delay(
                            nic, op, off, op->dma_len - off < mps ? op->dma_len - off : mps, true));
    sim_time_t t = sim_time_add(sim_now(sim), d);
    if (t > nic->dma.horizon_ps)
        nic->dma.horizon_ps = t;
    if (d)
        sim_call_in(sim, d, dma_ro_land, a, b);
    else
        dma_ro_land(sim, a, b);
}

/* ---------------------------------------------------------------- entry */

static void dma_place_go(struct nic_op *op);

void nic_dma_place(struct nic *nic, struct nic_op *op, const uint8_t *src, uint32_t len,
                   uint32_t qpn, uint32_t psn, const char *where)
{
    op->dma_src = src;
    op->dma_len = len;
    /* cut-through: a packet's payload could be placed from its head on */
    op->dma_head_ps = op->pkt ? op->pkt->head_ps : 0;
    op->dma_qpn = qpn;
    op->dma_psn = psn;
    op->dma_where = where;
    if (nic_tr(nic))
        op->tr_t0 = sim_now(nic->sim);
    if (!len) {
        dma_free(nic, op);
        return;
    }
    /* the QP's ACKs wait until this has landed (resp.c queue_ack) */
    struct nic_qp *qp = qpn ? nic_qp_lookup(nic, qpn) : NULL;
    if (qp) {
        nic_qp_get(qp);
        qp->eng->place_issued++;
        op->place_qp = qp;
    }
    nic_xlate(nic, op, dma_place_go); /* NIC TLB, in issue order (xlate.c) */
}

/* The root complex's merge time for the lines the placement covers only
 * partly (host.h, host_dma_rmw_ps): the ends of each segment. */
static sim_time_t dma_rmw_ps(struct nic *nic, const struct nic_op *op)
{
    sim_time_t t = 0;
    if (!nic->host)
        return 0;
    for (uint32_t i = 0; i < op->n_seg; i++)
        t += host_dma_rmw_ps(nic->host, op->seg[i].host, op->seg[i].len);
    return t;
}

/* Translated: the write leaves for host memory (or device memory). */
static void dma_place_go(struct nic_op *op)
{
    struct nic *nic = op->nic;
    uint32_t len = op->dma_len;
    if (op->xl_dm) { /* device memory: no PCIe, no host ordering to keep */
        nic->cnt.dm_accesses++;
        sim_call_in(nic->sim, nic_dm_access_delay(nic, op), dma_strict_land, op, NULL);
        return;
    }
    nic->cnt.dma_writes++;
    nic_pcie_trace_ctx(nic, op);
    if (!dma_relaxed(nic, op)) {
        if (nic->pcie)
            pcie_dma_write_rmw_ct_k(nic->pcie, PCIE_K_PAYLOAD_WR, 0, len, op->dma_head_ps,
                                    dma_rmw_ps(nic, op), dma_strict_visible, op, NULL);
        else
            dma_strict_visible(nic->sim, op, NULL);
        return;
    }
    uint32_t mps = dma_chunk_bytes(nic);
    uint32_t n = (len + mps - 1) / mps;
    sim_time_t rmw_ps = nic->pcie ? dma_rmw_ps(nic, op) : 0; /* held by the last chunk */
    op->dma_left = n;
    op->dma_seq0 = nic->dma.next_seq;
    nic->dma.next_seq += n;
    nic->cnt.dma_ro_chunks += n;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t clen = len - i * mps < mps ? len - i * mps : mps;
        nic_pcie_trace_ctx(nic, op);
        if (nic->pcie)
            pcie_dma_write_rmw_ct_k(nic->pcie, PCIE_K_PAYLOAD_WR, PCIE_F_RELAXED, clen,
                                    op->dma_head_ps, i + 1 == n ? rmw_ps : 0, dma_ro_visible, op,
                                    (void *)(uintptr_t)i);
        else
            dma_ro_visible(nic->sim, op, (void *)(uintptr_t)i);
    }
}
