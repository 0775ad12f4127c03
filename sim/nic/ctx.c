/* The QP-context cache and the processing units that wait on it
 * (docs/nic.md "Caches inside the RNIC").
 *
 * A QP's context (its state: PSNs, keys, queue addresses, the transport
 * state machine's variables) lives in host memory, in the ICM the driver
 * gives the NIC; the NIC keeps the recently used ones in an on-chip cache
 * (Husky, NSDI'23; CALIBRATION "QP context cache miss: one extra PCIe round
 * trip").  The engines need a QP's context at three points:
 *
 *   - a send doorbell is processed (to find the send queue: req.c),
 *   - the send engine starts a WQE (req.c),
 *   - a packet for the QP leaves the receive pipeline (nic.c).
 *
 * Each is one nic_ctx_access().  A hit costs nothing more.  A miss is a
 * PCIe read of nic.qpc_bytes (kind ctx_miss); further accesses to the same
 * QP wait on the same fetch (in order).  On the receive side the waiting
 * packet keeps its processing unit (nic.c), so misses take units away from
 * packet processing; in all, at most nic.pus fetches are in flight (more
 * queue FIFO).  This is the QP-count cliff: once the QPs in use exceed the
 * cache, every operation pays a PCIe
 * round trip, and the units bound how many of those overlap. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "nic_priv.h"

static void ctx_fetched(struct sim *sim, void *a, void *b)
{
    (void)sim;
    struct nic *nic = a;
    nic_cache_filled(&nic->qpc, (uint64_t)(uintptr_t)b);
}

static void ctx_fetch(struct nic_cache *c, uint64_t key, void *owner)
{
    (void)c;
    struct nic *nic = owner;
    nic->cnt.dma_reads++;
    if (nic->pcie)
        pcie_dma_read_k(nic->pcie, PCIE_K_CTX_MISS, 0, nic->p.qpc_bytes, ctx_fetched, nic,
                        (void *)(uintptr_t)key);
    else
        sim_call_in(nic->sim, 0, ctx_fetched, nic, (void *)(uintptr_t)key);
}

int nic_cache_configure(struct nic *nic, struct nic_cache *c, uint32_t ways)
{
    if (nic_cache_set_ways(c, ways))
        return ENOMEM;
    c->trace_node = nic->node_id; /* its track in traces */
    c->trace_id = (uint8_t)(c == &nic->qpc   ? TRC_QPC
                            : c == &nic->rdc ? TRC_RDC
                            : c == &nic->rdq ? TRC_RDQ
                            : c == &nic->mpt ? TRC_MPT
                            : c == &nic->rwq ? TRC_RWQE
                            : c == &nic->wqc ? TRC_WQE
                                             : TRC_MTT);
    if (nic->p.cache_replacement == NIC_CACHE_RANDOM) {
        char name[48];
        snprintf(name, sizeof(name), "nic%u.%s", nic->node_id, c->name);
        nic_cache_set_random(c, name);
    }
    return 0;
}

/* The requester's READ miss handler: a READ response or atomic ACK whose
 * state is not on chip waits, holding its processing unit: for its QP's
 * READ-response tracker (rdq), a PCIe read of the QP context
 * (nic.qpc_entry); for its READ's context (rdc), a PCIe read of nic.rd_ctx
 * bytes (the WQE) and then nic.rd_ctx_miss_proc in the handler.  With
 * nic.rd_ctx_max_misses 0 (ConnectX-5/6) every miss starts at once and
 * they overlap over the processing units (each cache bounds its own
 * fetches to nic.pus).  With rd_ctx_max_misses N > 0 (ConnectX-3, N = 1: a
 * slow path) the misses of both tables queue for one handler of N slots in
 * arrival order, so a response missing both waits for two handler turns
 * and a serialised handler stalls every unit behind it: the requester-side
 * READ collapse with QPs (docs/nic.md "READ and atomic engines"). */
struct nic_rd_miss {
    struct nic_rd_miss *next, *all; /* FIFO / free list; every record */
    struct nic_cache *c;            /* &nic->rdc or &nic->rdq */
    uint64_t key;
};

static void rdm_start(struct nic *nic, struct nic_rd_miss *m);

static void rdm_pump(struct nic *nic)
{
    while (nic->rdm_head && nic->rdm_busy < nic->p.rd_ctx_max_misses) {
        struct nic_rd_miss *m = nic->rdm_head;
        nic->rdm_head = m->next;
        if (!nic->rdm_head)
            nic->rdm_tail = NULL;
        rdm_start(nic, m);
    }
}

static void rdm_filled(struct sim *sim, void *a, void *b)
{
    (void)sim;
    struct nic *nic = a;
    struct nic_rd_miss *m = b;
    struct nic_cache *c = m->c;
    uint64_t key = m->key;
    m->next = nic->rdm_free;
    nic->rdm_free = m;
    if (nic->p.rd_ctx_max_misses) {
        nic->rdm_busy--;
        rdm_pump(nic);
    }
    nic_cache_filled(c, key);
}

static void rdm_fetched(struct sim *sim, void *a, void *b)
{
    struct nic *nic = a;
    const struct nic_rd_miss *m = b;
    if (nic->p.rd_ctx_miss_proc_ps && m->c == &nic->rdc)
        sim_call_in(sim, nic->p.rd_ctx_miss_proc_ps, rdm_filled, a, b);
    else
        rdm_filled(sim, a, b);
}

static void rdm_start(struct nic *nic, struct nic_rd_miss *m)
{
    if (nic->p.rd_ctx_max_misses)
        nic->rdm_busy++;
    nic->cnt.dma_reads++;
    if (nic->pcie)
        pcie_dma_read_k(nic->pcie, PCIE_K_CTX_MISS, 0,
                        m->c == &nic->rdq ? nic->p.qpc_bytes : nic->p.rd_ctx_bytes, rdm_fetched,
                        nic, m);
    else
        sim_call_in(nic->sim, 0, rdm_fetched, nic, m);
}

static void rd_fetch(struct nic_cache *c, uint64_t key, void *owner)
{
    struct nic *nic = owner;
    struct nic_rd_miss *m = nic->rdm_free;
    if (m) {
        nic->rdm_free = m->next;
    } else {
        m = malloc(sizeof(*m));
        if (!m) {
            fprintf(stderr, "rnicsim: out of memory (READ context miss)\n");
            abort();
        }
        m->all = nic->rdm_all;
        nic->rdm_all = m;
    }
    m->c = c;
    m->key = key;
    m->next = NULL;
    if (!nic->p.rd_ctx_max_misses || nic->rdm_busy < nic->p.rd_ctx_max_misses) {
        rdm_start(nic, m);
        return;
    }
    if (nic->rdm_tail)
        nic->rdm_tail->next = m;
    else
        nic->rdm_head = m;
    nic->rdm_tail = m;
}

/* Receive-WQE fetch: a SEND (or WRITE with immediate) consumes a receive
 * WQE, which lives in host memory in the QP's receive queue or in an SRQ.
 * The NIC holds WQEs fetched ahead for the receive queues it served
 * recently (a set-associative cache of nic.rwqe_cache_entries queues,
 * key = QPN, or bit 40 + SRQ number: all QPs of an SRQ share its WQEs);
 * a message finding none waits, holding its processing unit, for one PCIe
 * read of nic.rwqe_prefetch WQEs of nic.rwqe bytes.  So a receiver serving
 * many QPs fetches a receive WQE for most SENDs, and an SRQ keeps them on
 * chip however many QPs share it. */
static uint64_t rwq_key(const struct nic_qp *qp)
{
    return qp->srq ? (1ull << 40) | qp->srq->srqn : qp->qpn;
}

static struct nic_rq *rwq_of(struct nic_qp *qp)
{
    return qp->srq ? &qp->srq->rq : &qp->rq;
}

static void rwq_fetched(struct sim *sim, void *a, void *b)
{
    (void)sim;
    struct nic *nic = a;
    nic_cache_filled(&nic->rwq, (uint64_t)(uintptr_t)b);
}

static void rwq_fetch(struct nic_cache *c, uint64_t key, void *owner)
{
    (void)c;
    struct nic *nic = owner;
    uint32_t n = nic->p.rwqe_prefetch ? nic->p.rwqe_prefetch : 1;
    nic->cnt.dma_reads++;
    if (nic->pcie)
        pcie_dma_read_k(nic->pcie, PCIE_K_CTX_MISS, 0, n * nic->p.rwqe_bytes, rwq_fetched, nic,
                        (void *)(uintptr_t)key);
    else
        sim_call_in(nic->sim, 0, rwq_fetched, nic, (void *)(uintptr_t)key);
}

bool nic_rwqe_access(struct nic *nic, struct nic_qp *qp, sim_cb_fn fn, void *a, void *b)
{
    if (!nic->rwq.cap || qp->init.xrc == NIC_XRC_TGT)
        return true;
    struct nic_rq *rq = rwq_of(qp);
    uint64_t key = rwq_key(qp);
    if (nic_rq_empty(qp))
        return true;     /* nothing posted: the responder answers RNR / drops */
    if (!rq->prefetched) /* the ones held are used up: fetch the next */
        nic_cache_invalidate(&nic->rwq, key);
    if (nic_cache_access(&nic->rwq, key, fn, a, b)) {
        if (rq->prefetched)
            rq->prefetched--;
        return true;
    }
    /* the batch lands before fn runs: it holds rwqe_prefetch WQEs, this
     * message takes one (waiters merged on one fetch each take one) */
    rq->prefetched = nic->p.rwqe_prefetch > 1 ? nic->p.rwqe_prefetch - 1 : 0;
    return false;
}

/* The outstanding-WQE cache (SMART, ASPLOS'24: the RNIC caches the WQEs
 * of outstanding work requests; past its capacity they thrash and are
 * re-read from host memory).  The send engine inserts a WQE when it
 * starts it; the response that completes it (the ACK of its last PSN, a
 * READ's last response packet, an atomic ACK) needs it again to write the
 * CQE and place READ data.  A miss re-reads nic.wqe bytes over PCIe. */
static uint64_t wqc_key(uint32_t qpn, uint32_t psn)
{
    return ((uint64_t)qpn << 24) | (psn & 0xffffffu);
}

static void wqc_fetched(struct sim *sim, void *a, void *b)
{
    (void)sim;
    struct nic *nic = a;
    nic_cache_filled(&nic->wqc, (uint64_t)(uintptr_t)b);
}

static void wqc_fetch(struct nic_cache *c, uint64_t key, void *owner)
{
    (void)c;
    struct nic *nic = owner;
    nic->cnt.dma_reads++;
    if (nic->pcie)
        pcie_dma_read_k(nic->pcie, PCIE_K_CTX_MISS, 0, nic->p.wqe_bytes, wqc_fetched, nic,
                        (void *)(uintptr_t)key);
    else
        sim_call_in(nic->sim, 0, wqc_fetched, nic, (void *)(uintptr_t)key);
}

void nic_wqe_started(struct nic *nic, uint32_t qpn, uint32_t last_psn)
{
    if (nic->wqc.cap)
        nic_cache_insert(&nic->wqc, wqc_key(qpn, last_psn));
}

bool nic_wqe_access(struct nic *nic, uint32_t qpn, uint32_t psn, sim_cb_fn fn, void *a, void *b)
{
    uint64_t key = wqc_key(qpn, psn);
    if (!nic_cache_access(&nic->wqc, key, fn, a, b))
        return false;
    nic_cache_invalidate(&nic->wqc, key); /* completed: its slot is free */
    return true;
}

void nic_wqe_retire(struct nic *nic, uint32_t qpn, uint32_t psn)
{
    nic_cache_invalidate(&nic->wqc, wqc_key(qpn, psn));
}

int nic_ctx_init(struct nic *nic)
{
    uint32_t units = nic->p.pus ? nic->p.pus : 1;
    if (nic_cache_init(&nic->qpc, nic->sim, "qpc", nic->p.qpc_cache_entries, units, ctx_fetch,
                       nic) ||
        nic_cache_configure(nic, &nic->qpc, nic->p.qpc_ways) ||
        nic_cache_init(&nic->rdc, nic->sim, "rdc", nic->p.rd_ctx_entries, units, rd_fetch, nic) ||
        nic_cache_configure(nic, &nic->rdc, nic->p.rd_ctx_ways) ||
        nic_cache_init(&nic->rdq, nic->sim, "rdq",
                       nic->p.rd_ctx_per == NIC_RD_CTX_PER_READ ? nic->p.rd_qp_entries : 0, units,
                       rd_fetch, nic) ||
        nic_cache_configure(nic, &nic->rdq, 0) ||
        nic_cache_init(&nic->rwq, nic->sim, "rwqe", nic->p.rwqe_cache_entries, units, rwq_fetch,
                       nic) ||
        nic_cache_configure(nic, &nic->rwq, nic->p.rwqe_ways) ||
        nic_cache_init(&nic->wqc, nic->sim, "wqe", nic->p.wqe_cache_entries, units, wqc_fetch,
                       nic) ||
        nic_cache_configure(nic, &nic->wqc, nic->p.wqe_cache_ways))
        return ENOMEM;
    return 0;
}

void nic_ctx_fini(struct nic *nic)
{
    nic_cache_fini(&nic->qpc);
    nic_cache_fini(&nic->rdc);
    nic_cache_fini(&nic->rdq);
    for (struct nic_rd_miss *m = nic->rdm_all, *nx; m; m = nx) {
        nx = m->all;
        free(m);
    }
    nic->rdm_all = nic->rdm_head = nic->rdm_tail = nic->rdm_free = NULL;
    nic->rdm_busy = 0;
    nic_cache_fini(&nic->rwq);
    nic_cache_fini(&nic->wqc);
}

/* The key of a requester READ/atomic context: the QP, or the QP and the
 * READ's first PSN (24 bits) with nic.rd_ctx_per: read. */
static uint64_t rdc_key(const struct nic *nic, uint32_t qpn, uint32_t psn)
{
    if (nic->p.rd_ctx_per == NIC_RD_CTX_PER_READ)
        return ((uint64_t)qpn << 24) | (psn & 0xffffffu);
    return qpn;
}

/* The NIC creates both when it issues the READ: present, no fetch. */
void nic_rdctx_started(struct nic *nic, uint32_t qpn, uint32_t psn)
{
    nic_cache_insert(&nic->rdq, qpn);
    nic_cache_insert(&nic->rdc, rdc_key(nic, qpn, psn));
}

/* A response needs its QP's tracker first (rdq: only with contexts per
 * READ and nic.rd_qp_entries), then its READ's context (rdc). */
bool nic_rdqp_access(struct nic *nic, uint32_t qpn, sim_cb_fn fn, void *a, void *b)
{
    return nic_cache_access(&nic->rdq, qpn, fn, a, b);
}

bool nic_rdctx_access(struct nic *nic, uint32_t qpn, uint32_t psn, sim_cb_fn fn, void *a, void *b)
{
    uint64_t key = rdc_key(nic, qpn, psn);
    if (!nic_cache_access(&nic->rdc, key, fn, a, b))
        return false;
    if (nic->p.rd_ctx_per == NIC_RD_CTX_PER_READ) /* its response came: the READ retires */
        nic_cache_invalidate(&nic->rdc, key);
    return true;
}

void nic_rdctx_qp_idle(struct nic *nic, uint32_t qpn)
{
    nic_cache_invalidate(&nic->rdq, qpn);
}

void nic_rdctx_retire(struct nic *nic, uint32_t qpn, uint32_t psn)
{
    if (nic->p.rd_ctx_per == NIC_RD_CTX_PER_READ)
        nic_cache_invalidate(&nic->rdc, rdc_key(nic, qpn, psn));
}

static bool rdc_of_qp(uint64_t key, const void *arg)
{
    return (key >> 24) == *(const uint32_t *)arg;
}

bool nic_ctx_access(struct nic *nic, uint32_t qpn, sim_cb_fn fn, void *a, void *b)
{
    return nic_cache_access(&nic->qpc, qpn, fn, a, b);
}

void nic_ctx_forget(struct nic *nic, uint32_t qpn)
{
    nic_cache_invalidate(&nic->qpc, qpn);
    nic_cache_invalidate(&nic->rwq, qpn);
    if (nic->wqc.cap)
        nic_cache_invalidate_if(&nic->wqc, rdc_of_qp, &qpn);
    nic_cache_invalidate(&nic->rdq, qpn);
    if (nic->p.rd_ctx_per == NIC_RD_CTX_PER_READ)
        nic_cache_invalidate_if(&nic->rdc, rdc_of_qp, &qpn);
    else
        nic_cache_invalidate(&nic->rdc, qpn);
}
