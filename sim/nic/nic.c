/* The RNIC device: its profile, the transmit engine that feeds the uplink,
 * the receive pipeline that dispatches packets to the responder (requests)
 * or the completer (responses), and the pooled contexts every operation
 * uses to cross PCIe.  docs/nic.md walks the whole model.
 *
 * Transmit engine.  Each QP has two packet sources (its requester and its
 * responder), each a staging ring of packets in PSN order.  A source with a
 * ready head packet is queued on the NIC's round-robin list.  The engine
 * takes one packet, spends tx_pkt_proc_ps on it (pipeline occupancy; the
 * next packet starts after it), then hands it to the uplink - but never
 * keeps more than NIC_TX_LINK_PKTS frames queued there: a finished packet
 * waits "in hand" until the link's idle hook says the queue drained (the
 * engine asks for it then: link_want_idle; without a packet in hand it
 * learns of idle transitions from link_idle_count).  So
 * the link is paced by its own serialisation and the NIC never floods it,
 * and packets that become ready later (ACKs) are not stuck behind a deep
 * queue.
 *
 *     source rings --(round robin)--> [building: tx_pkt_proc] --> [hand] --> uplink
 *                                                           ^ idle hook -----'
 *
 * Receive side.  Arriving frames queue for the nic.pus processing units; a
 * unit takes the next frame, gets its QP's context (ctx.c: a miss keeps the
 * unit for a PCIe read), spends rx_pkt_proc_ps on it, and hands it to
 * nic_resp_rx (requests) or nic_comp_rx (responses) of the QP named by its
 * BTH.  Frames of one QP leave the units in arrival order (equal work time;
 * a frame whose context is being fetched waits on the same fetch as the
 * earlier ones).  Unknown QPs, QPs in a state that
 * does not accept the packet, opcodes of another transport than the QP's
 * and invalid opcodes are dropped (rx_drops, and a TRACE_PKT_DROP record).
 *
 * UC/UD requests have no ACK: the WQE completes when its last packet is
 * handed to the uplink (tx_send). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nic_priv.h"
#include "ratelimit.h"

/* ---------------------------------------------------------------- profile */

void nic_params_default(struct nic_params *p)
{
    memset(p, 0, sizeof(*p));
    /* The identity a ConnectX-5 reports (ibv_devinfo: vendor_id 0x02c9,
     * vendor_part_id 4119 = PCI device 0x1017). */
    p->vendor_id = 0x02c9;
    p->vendor_part_id = 4119;
    /* ConnectX-5 product brief: 100 Gb/s per port (CALIBRATION.md, NICs). */
    p->port_rate_bps = 100000000000ull;
    /* IBA: largest IB path MTU 4096 (CALIBRATION.md, Transports: IB path MTU). */
    p->max_mtu = IBV_MTU_4096;
    /* Estimate: doorbell decode + QP context lookup, a few cycles of a
     * ~500 MHz NIC pipeline times its depth. */
    p->doorbell_proc_ps = 50 * SIM_NS;
    /* CALIBRATION.md, NICs "one QP ... with post lists of 128, ~7.5 M/s":
     * the send engine handles one QP's WQEs one after the other, so its per
     * WQE time sets the per-QP message rate: 1 / 7.5 M/s = 133 ns. */
    p->wqe_proc_ps = 133 * SIM_NS;
    /* ConnectX-5 product brief: up to 200 M msg/s per NIC -> 5 ns per packet
     * (CALIBRATION.md, NICs lists ConnectX-6 at 215 M msg/s). */
    p->tx_pkt_proc_ps = 5 * SIM_NS;
    /* Receive side: nic.pus processing units (below), each busy
     * rx_pkt_proc_ps per packet.  The same 200 M msg/s over 16 units:
     * 16 x 5 ns = 80 ns per packet per unit. */
    p->rx_pkt_proc_ps = 80 * SIM_NS;
    /* mlx5 PRM: one 64 B WQE basic block (control + remote address segment). */
    p->wqe_bytes = 64;
    /* mlx5 PRM: a data (scatter/gather) segment is 16 B. */
    p->wqe_sge_bytes = 16;
    /* mlx5 PRM: 64 B CQE, the mlx5 provider's default CQE size. */
    p->cqe_bytes = 64;
    /* Estimate: mlx5 on ConnectX-5 accepts perftest's inline defaults
     * (DEF_INLINE_WRITE 220, DEF_INLINE_SEND_RC_UC 236); 256 B covers both
     * and is what profiles/cx5-100g.yaml uses.  The real limit depends on
     * the WQE size the provider picks and is larger. */
    p->max_inline_bytes = 256;
    /* mlx5 BlueFlame: a single small WQE is written through the doorbell
     * register, so the NIC need not fetch it (rdma-core mlx5 provider). */
    p->blueflame = true;
    /* ibv_devinfo -v on ConnectX-5 (MT4119): max_qp_rd_atom 16, max_qp_wr
     * 32768, max_cqe 4194303, max_qp 262144, max_cq 16777216, max_mr 16777216. */
    p->max_qp_rd_atom = 16;
    p->max_qp_wr = 32768;
    /* Model limit NIC_MAX_SGE (nic.h); the device reports 30. */
    p->max_sge = NIC_MAX_SGE;
    p->max_cqe = 4194303;
    p->max_qp = 262144;
    p->max_cq = 16777216;
    p->max_mr = 16777216;
    /* ibv_devinfo -v on ConnectX-5 (MT4119): max_srq 8388608, max_srq_wr
     * 32767; max_srq_sge 31 there, the model's NIC_MAX_SGE here. */
    p->max_srq = 8388608;
    p->max_srq_wr = 32767;
    p->max_srq_sge = NIC_MAX_SGE;
    /* Estimate: the responder ACKs every message that asks (AckReq on the
     * last packet) and at least every 16 packets of a long one. */
    p->ack_every_pkts = 16;
    /* Estimate: one atomic ALU operation plus the ordering check; the PCIe
     * read-modify-write is modelled on top of it. */
    p->atomic_proc_ps = 50 * SIM_NS;
    /* InfiniBand / RoCE RC with strict DMA ordering: what ConnectX NICs do
     * by default (relaxed ordering is opt-in per MR). */
    p->transport = NIC_TRANSPORT_IB;
    p->dma_ordering = NIC_DMA_STRICT;
    p->link_layer = NIC_LINK_ETHERNET; /* RoCEv2, as ConnectX-5 Ethernet ports */
    /* Estimate: SRD retransmits "at microsecond granularity" with a timeout
     * tracking the datacenter RTT (Shalev et al., IEEE Micro 2020, gives no
     * number); 100 us is a few times a loaded RTT of a small fabric
     * (idle RTT here ~3 us), so queueing does not cause spurious resends. */
    p->srd_rto_ps = 100 * SIM_US;
    /* CALIBRATION.md, Transports "1RMA: fail-fast < 50 us" (Singhvi et al.,
     * SIGCOMM'20): an op not completed within 50 us fails. */
    p->onerma_timeout_ps = 50 * SIM_US;
    /* Estimate (docs/nic.md "DMA ordering"): with PCIe Relaxed Ordering the
     * root complex may hold one posted write - an LLC miss, a line owned
     * by another core or socket (CALIBRATION.md, PCIe: remote socket about
     * +100 ns) - while younger writes pass it.  Up to one more in-order
     * commit time (pcie write_latency, 200 ns) of extra delay per chunk. */
    p->dma_ro_max_delay_ps = 200 * SIM_NS;
    /* Estimate (docs/nic.md "IB adaptive routing"): the skew between
     * equal-cost paths that adaptive routing picks per packet is a few
     * packets of queueing; 1 us = 12.5 KB at 100 Gb/s, three 4 KiB frames.
     * NVIDIA publishes no number. */
    p->ar_max_delay_ps = 1 * SIM_US;
    /* Estimate: a hole is taken for a loss after 4x the reorder skew, so a
     * reordered packet is not NAKed unless the fabric adds > 3 us more. */
    p->ar_nak_delay_ps = 4 * SIM_US;
    /* Caches inside the RNIC (docs/nic.md "Caches inside the RNIC").  NVIDIA
     * publishes no sizes; these are estimates, compared with published QP
     * and working-set sweeps in docs/calibration.md.
     * Estimate: 16 processing units, so 16 context misses of ~0.55 us
     * overlap: ~29 M misses/s, the order of the many-QP READ rates reported
     * for ConnectX-6 (docs/calibration.md). */
    p->pus = 16;
    /* Estimate: the QP-count cliff of ConnectX-4/5-class NICs is reported
     * at a few hundred to a few thousand QPs (docs/calibration.md). */
    p->qpc_cache_entries = 1024;
    /* Estimate: mlx4's QP context (struct mlx4_qp_context, Linux
     * include/linux/mlx4/qp.h) is ~250 B; mlx5's QPC is of the same order. */
    p->qpc_bytes = 256;
    /* Estimate: a few hundred memory keys; mlx5 PRM: an mkey context is 64 B
     * (mlx5_ifc.h struct mlx5_ifc_mkc_bits). */
    p->mpt_cache_entries = 1024;
    p->mpt_bytes = 64;
    /* Estimate: 4096 translations = 16 MiB of 4 KiB pages (8 GiB of 2 MiB
     * pages); mlx5 PRM: one MTT entry is 8 B (struct mlx5_mtt). */
    p->mtt_cache_entries = 4096;
    p->mtt_bytes = 8;
    /* Estimate: as many translation fetches in flight as processing units. */
    p->xlate_max_misses = 16;
    /* Estimate: 8-way set-associative caches with random replacement inside
     * a set (NVIDIA publishes neither; large on-chip caches are rarely true
     * LRU).  With round-robin use of many QPs or pages this gives the
     * gradual decline of hit rate that published QP-count sweeps show,
     * where a fully associative LRU cache falls off a cliff
     * (docs/calibration.md; test_nic_cache). */
    p->qpc_ways = 8;
    p->mpt_ways = 8;
    p->mtt_ways = 8;
    p->cache_replacement = NIC_CACHE_RANDOM;
    /* Requester READ/atomic contexts (comp.c / nic.c; docs/nic.md "READ and
     * atomic engines"): an estimate from the ConnectX-6 QP-scaling comment
     * (32 threads: READ 83 Mops at 32 QPs, 55 at 64 - docs/validation.md
     * points qp-cx6-read-*): the drop between 32 and 64 QPs with READs
     * outstanding puts the on-chip state at a few tens of QPs; 48 entries,
     * 4-way.  A miss re-reads the READ's WQE (one 64 B basic block, mlx5
     * PRM).  Known limit: with misses that cheap the model's collapse starts
     * near 512 QPs, not 64. */
    p->rd_ctx_entries = 48;
    p->rd_ctx_ways = 4;
    p->rd_ctx_bytes = 64;
    /* per-QP READ-response trackers beside per-READ contexts: only
     * ConnectX-3 keeps both (cx3-fdr56; with rd_ctx_per: qp the contexts
     * are already per QP) */
    p->rd_qp_entries = 0;
    p->wqe_cache_ways = 8;
    p->rwqe_ways = 8;
    p->rwqe_prefetch = 8;
    p->rwqe_bytes = 16;
    p->tx_burst_pkts = 1;
    /* Responder READ engine (resp.c, readeng.c): fitted to the SMART
     * (ASPLOS'24) ConnectX-6 READ peak of 111 Mops (ae/raw-reference
     * fig4a.csv: 8 B READs, 48 threads x 24 in flight): 1 / 111 M = 9 ns
     * per READ request; ConnectX-5 scaled by the product briefs' message
     * rates (200 vs 215 M/s): 9.7 ns.  Estimate: no limit on READs in
     * service per NIC beyond max_dest_rd_atomic per QP (the device's
     * max_res_rd_atom, 4194304 on ConnectX-5, never binds). */
    p->rd_req_proc_ps = 9700;
    p->max_rd_resp = 0;
    /* Estimate: device memory as 4 banks, each busy dm_access per access
     * (so atomics on one counter in device memory are bounded by one bank,
     * and device memory has a bandwidth). */
    p->dm_banks = 4;
    /* Memory registration (mr.c, xlate.c).  Estimates: a firmware command
     * takes a few microseconds (mlx5 commands are mailbox round trips
     * through the NIC's firmware); one 4 KiB mailbox page carries 512
     * 8-byte translations (mlx5 PRM: MTT entries of 8 B).  Registration
     * writes the MR's translations through the NIC's caches and
     * deregistration invalidates the MR's own entries (Husky, NSDI'23:
     * control verbs evict other tenants' cached state). */
    p->cmd_proc_ps = 3 * SIM_US;
    p->mtt_per_cmd = 512;
    p->mr_write_allocate = true;
    p->dereg_flush = NIC_DEREG_FLUSH_MR;
    /* Linux default: registered memory on 4 KiB pages unless the program
     * uses hugetlbfs / THP (then set host.hugepages). */
    p->hugepages = false;
    /* CALIBRATION.md, NICs "device memory on ConnectX-5: 128 KiB usable"
     * (ibv_devinfo -v max_dm_size 131072 on mlx5 devices). */
    p->dm_bytes = 128 * 1024;
    /* Estimate: an on-chip SRAM access of a few NIC clock cycles; the
     * point is that it is ~25x less than a PCIe round trip (Taranov et al.
     * Fig. 8: moving the head to device memory saves one PCIe round trip). */
    p->dm_access_ps = 20 * SIM_NS;
    /* mlx5: CQE compression is off unless enabled (mlx5dv / ethtool
     * rx_cqe_compress). */
    p->cqe_compression = false;
    /* RIMA (Xue et al., aq.c).  Section 3.2: the TPT "is a small SRAM
     * table (say 1K entries)"; its lookup and add take "only 1-2 ns (as per
     * CACTI 6.0)": the upper end.  Section 5.2.1: allocating and pinning
     * 16 MB (kalloc + mlock) took 0.97 ms median, 1 ms p90 over 4000 runs;
     * the paper assumes 1 ms (Table 4 L). */
    p->rima_tpt_entries = 1024;
    p->rima_tpt_ps = 2 * SIM_NS;
    p->rima_alloc_ps = 1 * SIM_MS;
    /* DCQCN (Zhu et al., SIGCOMM 2015; docs/lossless.md): off unless a
     * scenario turns it on.  The paper's parameters: a QP sends at most
     * one CNP per N = 50 us; the rate-increase timer T and the alpha
     * timer K are 55 us; byte counter B = 10 MB; F = 5 fast-recovery
     * stages; additive increase R_AI = 40 Mb/s.  Hyper increase and the
     * floor, which the paper leaves to the implementation: R_HAI =
     * 10 x R_AI and a 100 Mb/s minimum rate, the ratio and floor of the
     * DCQCN model in HPCC's ns-3 simulator (RdmaHw RateAI 5 Mb/s, RateHAI
     * 50 Mb/s, MinRate 100 Mb/s).  CNPs on priority 6, the priority
     * NVIDIA's RoCE configuration gives them (DSCP 48). */
    p->dcqcn = false;
    p->cnp_interval_ps = 50 * SIM_US;
    p->dcqcn_timer_ps = 55 * SIM_US;
    p->dcqcn_byte_counter_bytes = 10 * 1000 * 1000;
    p->dcqcn_rai_bps = 40 * 1000 * 1000ull;
    p->dcqcn_rhai_bps = 400 * 1000 * 1000ull;
    p->dcqcn_min_rate_bps = 100 * 1000 * 1000ull;
    p->dcqcn_f = 5;
    p->cnp_prio = 6;
}

const char *const nic_transport_names[] = {"ib", "ib-ar", "efa-srd", "1rma", NULL};
const char *const nic_dma_ordering_names[] = {"strict", "relaxed", NULL};
const char *const nic_cache_replacement_names[] = {"random", "lru", NULL};
const char *const nic_dereg_flush_names[] = {"mr", "all", NULL};
const char *const nic_rd_ctx_per_names[] = {"qp", "read", NULL};
const char *const nic_link_layer_names[] = {"ethernet", "ib", NULL};

/* ---------------------------------------------------------------- op pool */

/* Ops come in slabs of 16: a NIC of the permutation holds 20-40 at once,
 * and slabs of 64 (40 KB) were a quarter of a host's memory. */
enum { NIC_OP_SLAB = 16 };

struct nic_op *nic_op_alloc(struct nic *nic, enum nic_op_kind kind, struct nic_qp *qp)
{
    if (!nic->op_free) {
        if (nic->n_op_slabs == nic->cap_op_slabs) {
            uint32_t cap = nic->cap_op_slabs ? 2 * nic->cap_op_slabs : 16;
            struct nic_op **s = realloc(nic->op_slabs, cap * sizeof(*s));
            if (!s)
                abort();
            nic->op_slabs = s;
            nic->cap_op_slabs = cap;
        }
        struct nic_op *slab = aligned_alloc(_Alignof(struct nic_op), NIC_OP_SLAB * sizeof(*slab));
        if (!slab)
            abort();
        memset(slab, 0, NIC_OP_SLAB * sizeof(*slab));
        nic->op_slabs[nic->n_op_slabs++] = slab;
        for (unsigned i = 0; i < NIC_OP_SLAB; i++) {
            slab[i].next = nic->op_free;
            nic->op_free = &slab[i];
        }
    }
    struct nic_op *op = nic->op_free;
    nic->op_free = op->next;
    op->next = NULL;
    op->nic = nic;
    op->qp = qp;
    op->kind = (uint8_t)kind;
    op->flag = false;
    op->v = 0;
    op->pkt = NULL;
    op->n_seg = 0;
    op->place_qp = NULL;
    op->mem_chain = NULL;
    op->cq = NULL;
    op->solicited = false;
    op->epoch = 0;
    op->tr_t0 = SIM_TIME_NEVER; /* set at issue when the NIC is traced */
    if (qp) {
        nic_qp_get(qp);
        op->epoch = kind == NIC_OP_REQ_PAYLOAD ? qp->eng->req_epoch : qp->eng->epoch;
    }
    return op;
}

void nic_op_free(struct nic_op *op)
{
    struct nic *nic = op->nic;
    struct nic_qp *qp = op->qp;
    op->qp = NULL;
    op->next = nic->op_free;
    nic->op_free = op;
    if (qp)
        nic_qp_put(qp);
}

bool nic_op_stale(const struct nic_op *op)
{
    const struct nic_qp_engine *e = op->qp->eng;
    if (e->dead)
        return true;
    return op->epoch != (op->kind == NIC_OP_REQ_PAYLOAD ? e->req_epoch : e->epoch);
}

void nic_copy_from_host(struct nic *nic, const struct nic_op *op, uint8_t *buf)
{
    if (nic->no_payload) /* `payload: none`: no bytes move */
        return;
    uint32_t off = 0;
    for (uint32_t i = 0; i < op->n_seg; i++) {
        const struct nic_seg *s = &op->seg[i];
        const struct nic_mr *mr = s->len ? nic_mr_lookup(nic, s->key) : NULL;
        if (mr)
            nic_host_read(mr, buf + off, s->host, s->len);
        off += s->len;
    }
}

void nic_copy_to_host(struct nic *nic, const struct nic_op *op, const uint8_t *buf)
{
    if (nic->no_payload)
        return;
    uint32_t off = 0;
    for (uint32_t i = 0; i < op->n_seg; i++) {
        const struct nic_seg *s = &op->seg[i];
        const struct nic_mr *mr = s->len ? nic_mr_lookup(nic, s->key) : NULL;
        if (mr) {
            nic_host_write(mr, s->host, buf + off, s->len);
            if (nic->host && !mr->dm) /* cache-line state (sim/host/mem.c) */
                host_dma_wrote(nic->host, s->host, s->len);
        }
        off += s->len;
    }
}

uint32_t nic_op_trace_qpn(const struct nic_op *op)
{
    if (op->kind == NIC_OP_CQE)
        return op->wc.qp_num;
    if (op->kind == NIC_OP_PLACE)
        return op->dma_qpn;
    return op->qp ? op->qp->qpn : 0;
}

uint32_t nic_op_trace_psn(const struct nic_op *op)
{
    if (op->kind == NIC_OP_PLACE)
        return op->dma_psn;
    return op->pkt ? op->pkt->psn : 0;
}

void nic_trace_dma_write(struct nic *nic, const struct nic_op *op, uint32_t qpn, const char *where)
{
    if (!sim_trace_enabled(nic->sim))
        return;
    for (uint32_t i = 0; i < op->n_seg; i++) {
        struct trace_rec r = {.kind = TRACE_DMA_WRITE,
                              .node = nic->node_id,
                              .qpn = qpn,
                              .addr = (uint64_t)(uintptr_t)op->seg[i].host,
                              .len = op->seg[i].len,
                              .where = where};
        sim_trace(nic->sim, &r);
    }
}

/* ---------------------------------------------------------------- staging rings */

void nic_stage_init(struct nic_stage *s)
{
    memset(s, 0, sizeof(*s));
}

void nic_stage_fini(struct nic_stage *s)
{
    free(s->e);
    memset(s, 0, sizeof(*s));
}

/* Room for one more entry: the ring starts small (most QPs never hold
 * more than a few packets) and doubles, up to NIC_STAGE_SLOTS. */
static void stage_grow(struct nic_stage *s)
{
    uint32_t n = s->tail - s->head;
    if (n < s->cap)
        return;
    uint32_t cap = s->cap ? 2 * s->cap : 8;
    struct nic_stage_ent *e = malloc(cap * sizeof(*e));
    if (!e)
        abort();
    for (uint32_t i = 0; i < n; i++)
        e[i] = *nic_stage_at(s, s->head + i);
    free(s->e);
    s->e = e;
    s->cap = cap;
    s->head = 0;
    s->tail = n;
}

void nic_stage_push(struct nic_stage *s, struct pkt *p, bool ready)
{
    stage_grow(s);
    struct nic_stage_ent *e = nic_stage_at(s, s->tail);
    e->pkt = p;
    e->pend = NULL;
    e->ready = ready;
    s->tail++;
    s->bytes += p->payload_len;
}

/* The bytes of a fetched payload enter the packet.  The copy is the
 * moment the NIC reads memory; reads of one source are copied in PSN
 * (address) order, so a READ response never returns a later byte older
 * than an earlier one (protocols read a bell and the bytes after it in one
 * READ).  The packet could have gone to the wire as its first completion
 * arrived, the rest streaming behind it: head_ps (link.c). */
static void payload_copy(struct nic *nic, struct nic_op *op)
{
    struct pkt *p = op->pkt;
    nic_copy_from_host(nic, op, p->payload);
    sim_time_t done = (sim_time_t)op->v; /* when its last completion came */
    sim_time_t span =
        (nic->pcie && !op->xl_dm) ? pcie_read_first_data_span_ps(nic->pcie, p->payload_len) : 0;
    p->head_ps = span < done ? done - span : 0;
    nic_op_free(op);
}

/* Entry i became ready: the fetched entries waiting behind it follow. */
static void stage_cascade(struct nic *nic, struct nic_stage *s, uint32_t i)
{
    for (uint32_t j = i + 1; j != s->tail; j++) {
        struct nic_stage_ent *e = nic_stage_at(s, j);
        if (e->ready)
            continue;
        if (!e->pend)
            break; /* still being fetched (or an atomic ACK): the rest wait for it */
        payload_copy(nic, e->pend);
        e->pend = NULL;
        e->ready = true;
    }
}

void nic_payload_fetched(struct sim *sim, void *a, void *b)
{
    struct nic_op *op = a;
    struct nic *nic = op->nic;
    struct pkt *p = op->pkt;
    if (nic_op_stale(op)) {
        pkt_free(nic->pool, p);
        nic_op_free(op);
        return;
    }
    struct nic_txsrc *src = b; /* valid: the QP still exists */
    struct nic_stage *s = src->stage;
    op->v = sim_now(sim);
    if (op->tr_t0 != SIM_TIME_NEVER && nic_tr(nic)) { /* the payload's DMA read */
        struct trace_rec r = {.where = src->kind == NIC_TXSRC_RESP ? "read response payload"
                                                                   : "payload"};
        nic_trace_pkt_fields(&r, p, true);
        nic_trace_span(nic, TRK_DMA_RD, op->tr_t0, op->v - op->tr_t0, &r);
    }
    uint32_t i = s->head;
    bool earlier_waiting = false;
    for (; i != s->tail && nic_stage_at(s, i)->pkt != p; i++)
        earlier_waiting = earlier_waiting || !nic_stage_at(s, i)->ready;
    if (i == s->tail) { /* cleared by an error or a rewind */
        pkt_free(nic->pool, p);
        nic_op_free(op);
        return;
    }
    struct nic_stage_ent *e = nic_stage_at(s, i);
    if (earlier_waiting) {
        e->pend = op;
        return;
    }
    payload_copy(nic, op);
    e->ready = true;
    stage_cascade(nic, s, i);
    nic_tx_src_ready(nic, src);
}

bool nic_stage_mark_ready(struct nic *nic, struct nic_stage *s, const struct pkt *p)
{
    for (uint32_t i = s->head; i != s->tail; i++) {
        struct nic_stage_ent *e = nic_stage_at(s, i);
        if (e->pkt == p) {
            e->ready = true;
            stage_cascade(nic, s, i);
            return true;
        }
    }
    return false;
}

void nic_stage_clear(struct nic *nic, struct nic_stage *s)
{
    for (uint32_t i = s->head; i != s->tail; i++) {
        struct nic_stage_ent *e = nic_stage_at(s, i);
        if (e->pend) { /* fetched, waiting: the packet and its op go */
            pkt_free(nic->pool, e->pkt);
            nic_op_free(e->pend);
            e->pend = NULL;
        } else if (e->ready) {
            pkt_free(nic->pool, e->pkt);
        }
        e->pkt = NULL;
    }
    s->head = s->tail = 0;
    s->bytes = 0;
}

/* ---------------------------------------------------------------- packets */

enum pkt_framing nic_framing(const struct nic *nic, bool grh)
{
    if (nic->p.link_layer != NIC_LINK_IB)
        return PKT_FRAMING_ROCEV2;
    return grh ? PKT_FRAMING_IB_GLOBAL : PKT_FRAMING_IB_LOCAL;
}

void nic_pkt_route_fields(const struct nic *nic, struct pkt *p, const struct ibv_ah_attr *ah)
{
    p->ib_sl = ah->sl & 0xf;
    p->grh_tclass = ah->grh.traffic_class;
    p->grh_flow_label = ah->grh.flow_label & 0xfffff;
    p->grh_hop_limit = ah->grh.hop_limit;
    /* priority: on Ethernet the class selector of the QP's DSCP
     * (traffic_class >> 2), as NICs map DSCP to an 802.1p priority by
     * default; on InfiniBand the virtual lane of the SL */
    if (nic->p.link_layer == NIC_LINK_IB)
        p->prio = nic_ib_sl_vl(p->ib_sl);
    else
        p->prio = (ah->grh.traffic_class >> 5) & 7;
}

void nic_pkt_address(const struct nic_qp *qp, struct pkt *p, uint8_t opcode, uint32_t psn,
                     uint32_t payload_len)
{
    p->src_node = qp->nic->node_id;
    p->dst_node = qp->dest_node;
    p->dest_qpn = qp->attr.dest_qp_num & NIC_PSN_MASK;
    p->src_qpn = qp->qpn;
    p->psn = psn & NIC_PSN_MASK;
    if (qp->init.xrc != NIC_XRC_NONE && nic_opcode_qp_type(opcode) == IBV_QPT_RC &&
        !nic_opcode_rima(opcode))
        opcode |= IB_OPCODE_XRC; /* XRC: RC's operation in the 0xa0 block (xrc.c) */
    p->opcode = opcode;
    pkt_payload_reserve(qp->nic->pool, p, payload_len); /* before payload_len: keeps its bytes */
    p->payload_len = payload_len;
    p->framing = nic_framing(qp->nic, qp->attr.ah_attr.is_global != 0);
    p->frame_bytes = nic_frame_bytes(p->framing, opcode, payload_len);
    p->ext_hdrs = nic_opcode(opcode)->mask & NIC_OPF_EXT_HDRS;
    p->udp_sport = qp->eng->udp_sport; /* switches hash the 5-tuple (ECMP) */
    nic_pkt_route_fields(qp->nic, p, &qp->attr.ah_attr);
    if (qp->nic->p.dcqcn)
        p->ecn = PKT_ECN_ECT0; /* ECN-capable: switches may mark it (dcqcn.c) */
}

/* ---------------------------------------------------------------- transmit engine */

static void tx_start(struct nic *nic);

static void tx_send(struct nic *nic, struct pkt *p)
{
    sim_time_t now = sim_now(nic->sim);
    p->t_sent_ps = now;
    /* cut-through: the engine's tx_pkt_proc on the header overlaps the
     * payload still streaming in from PCIe (nic_payload_fetched) */
    if (p->head_ps && p->head_ps + nic->p.tx_pkt_proc_ps < now)
        p->head_ps += nic->p.tx_pkt_proc_ps;
    else
        p->head_ps = 0;
    nic->cnt.pkts_tx++;
    nic->cnt.bytes_tx += p->frame_bytes;
    if (nic_opcode_rc_op(p->opcode) == IB_OPCODE_RC_ACKNOWLEDGE) {
        if ((p->aeth_syndrome & NIC_AETH_TYPE_MASK) == 0)
            nic->cnt.acks_tx++;
        else
            nic->cnt.naks_tx++;
    }
    nic_trace_pkt(nic, TRACE_PKT_TX, p, p->src_qpn, "nic tx");
    if (p->opcode & IB_OPCODE_TRANSPORT_MASK) {
        /* UC/UD request: the WQE completes once its last packet has left */
        struct nic_qp *qp = nic_qp_lookup(nic, p->src_qpn);
        if (qp && !nic_qp_reliable(qp))
            nic_comp_unreliable_tx(qp, p->psn);
    }
    if (!nic->uplink) {
        pkt_free(nic->pool, p);
        return;
    }
    nic->tx_link_pkts++;
    link_send(nic->uplink, p);
}

/* Take the next packet: control packets first, then the head of the next
 * source in round-robin order. */

/* What the per-QP rate limiter paces (ratelimit.c): the requester's
 * packets, and the READ response data the QP's responder sends (a limited
 * QP's outgoing data either way: zero-sided RDMA throttles a flow by its
 * producer's READ responses); ACKs are never held. */
static bool rl_paced(const struct nic_txsrc *src, const struct pkt *p)
{
    return src->kind == NIC_TXSRC_REQ || (src->kind == NIC_TXSRC_RESP && p->payload_len);
}

static struct pkt *tx_take(struct nic *nic)
{
    if (nic->ctrl_head) {
        struct pkt *p = nic->ctrl_head;
        nic->ctrl_head = p->next;
        if (!nic->ctrl_head)
            nic->ctrl_tail = NULL;
        p->next = NULL;
        return p;
    }
    struct nic_txsrc *src;
    while ((src = nic->txq_head) != NULL) {
        nic->txq_head = src->next;
        if (!nic->txq_head)
            nic->txq_tail = NULL;
        src->next = NULL;
        struct nic_qp *qp = src->qp;
        struct nic_stage *s = src->stage;
        if (qp->eng->dead || !nic_stage_head_ready(s) ||
            (qp->eng->rl && rl_paced(src, nic_stage_at(s, s->head)->pkt) && nic_rl_hold(qp, src))) {
            /* (a rate-limited QP's source is offered again when it may go) */
            src->burst = 0;
            src->queued = false;
            nic_qp_put(qp);
            continue;
        }
        struct nic_stage_ent *e = nic_stage_at(s, s->head);
        struct pkt *p = e->pkt;
        e->pkt = NULL;
        s->head++;
        s->bytes -= p->payload_len;
        bool more = nic_stage_head_ready(s);
        if (more && ++src->burst < nic->p.tx_burst_pkts) {
            /* its burst goes on: stays at the head (keeps its reference) */
            src->next = nic->txq_head;
            nic->txq_head = src;
            if (!nic->txq_tail)
                nic->txq_tail = src;
        } else if (more) { /* stays queued (keeps its reference), back of the line */
            src->burst = 0;
            if (nic->txq_tail)
                nic->txq_tail->next = src;
            else
                nic->txq_head = src;
            nic->txq_tail = src;
        } else {
            src->burst = 0;
            src->queued = false;
        }
        if (qp->eng->rl && rl_paced(src, p))
            nic_rl_on_tx(qp, p);
        if (src->kind == NIC_TXSRC_REQ)
            nic_req_on_tx(qp, p);
        else if (src->kind == NIC_TXSRC_RESP)
            nic_resp_on_tx(qp, p);
        else
            nic_pers_on_tx(qp, src, p);
        if (!more)
            nic_qp_put(qp);
        return p;
    }
    return NULL;
}

static void tx_start(struct nic *nic)
{
    if (nic->tx_building || nic->tx_hand || nic->tx_taking)
        return;
    nic->tx_taking = true;
    struct pkt *p = tx_take(nic);
    nic->tx_taking = false;
    if (!p)
        return;
    nic->tx_building = p;
    sim_schedule_in(nic->sim, &nic->tx_ev, nic->p.tx_pkt_proc_ps);
    if (nic_tr(nic)) {
        struct trace_rec r = {.where = "tx"};
        nic_trace_pkt_fields(&r, p, true);
        nic_trace_span(nic, TRK_TX, sim_now(nic->sim), nic->p.tx_pkt_proc_ps, &r);
    }
}

/* May the engine hand the uplink another frame?  It keeps at most
 * NIC_TX_LINK_PKTS there since the link was last idle. */
static bool uplink_room(struct nic *nic)
{
    if (!nic->uplink)
        return true;
    uint64_t idle = link_idle_count(nic->uplink);
    if (idle != nic->tx_idle_seen) { /* it went idle since: empty again */
        nic->tx_idle_seen = idle;
        nic->tx_link_pkts = 0;
    }
    return nic->tx_link_pkts < NIC_TX_LINK_PKTS;
}

static void tx_ev_fn(struct sim *sim, struct sim_event *ev)
{
    (void)sim;
    struct nic *nic = ev->ctx;
    struct pkt *p = nic->tx_building;
    nic->tx_building = NULL;
    if (uplink_room(nic) || !link_want_idle(nic->uplink))
        tx_send(nic, p);
    else
        nic->tx_hand = p; /* until the idle hook */
    tx_start(nic);
}

static void tx_link_idle(struct sim *sim, void *a, void *b)
{
    (void)sim;
    (void)b;
    struct nic *nic = a;
    nic->tx_link_pkts = 0;
    nic->tx_idle_seen = link_idle_count(nic->uplink);
    if (nic->tx_hand) {
        struct pkt *p = nic->tx_hand;
        nic->tx_hand = NULL;
        tx_send(nic, p);
    }
    tx_start(nic);
}

void nic_tx_src_ready(struct nic *nic, struct nic_txsrc *src)
{
    if (!src->queued) {
        src->queued = true;
        nic_qp_get(src->qp);
        src->next = NULL;
        if (nic->txq_tail)
            nic->txq_tail->next = src;
        else
            nic->txq_head = src;
        nic->txq_tail = src;
    }
    tx_start(nic);
}

void nic_tx_ctrl(struct nic *nic, struct pkt *p)
{
    p->next = NULL;
    if (nic->ctrl_tail)
        nic->ctrl_tail->next = p;
    else
        nic->ctrl_head = p;
    nic->ctrl_tail = p;
    tx_start(nic);
}

/* ---------------------------------------------------------------- receive pipeline */

static void rx_drop(struct nic *nic, struct pkt *p, const char *why)
{
    nic->cnt.rx_drops++;
    nic_trace_pkt(nic, TRACE_PKT_DROP, p, p->dest_qpn, why);
    pkt_free(nic->pool, p);
}

static void rx_process(struct nic *nic, struct pkt *p)
{
    nic->cnt.pkts_rx++;
    nic->cnt.bytes_rx += p->frame_bytes;
    nic_trace_pkt(nic, TRACE_PKT_RX, p, p->dest_qpn, "nic rx");
    if (p->opcode == NIC_OPCODE_CNP) { /* DCQCN reaction point (dcqcn.c) */
        nic_dcqcn_rp_cnp(nic, p);
        pkt_free(nic->pool, p);
        return;
    }
    const struct nic_opcode_info *info = nic_opcode(p->opcode);
    if (p->dest_qpn == NIC_MCAST_QPN && nic_opcode_qp_type(p->opcode) == IBV_QPT_UD) {
        nic_mcast_rx(nic, p); /* mcast.c: a copy per attached QP */
        return;
    }
    struct nic_qp *qp = info->name ? nic_qp_lookup(nic, p->dest_qpn) : NULL;
    if (!qp) {
        rx_drop(nic, p, info->name ? "nic: unknown QP" : "nic: invalid opcode");
        return;
    }
    if (nic_opcode_qp_type(p->opcode) != (int)qp->init.qp_type) {
        if (nic_opcode_personality(p->opcode) && nic_qp_pers(qp)) {
            nic_pers_rx(qp, p); /* EFA SRD / 1RMA: srd.c, onerma.c */
            return;
        }
        rx_drop(nic, p, "nic: opcode of another transport");
        return;
    }
    /* XRC (xrc.c): requests reach targets, responses initiators, and RC
     * opcodes neither */
    if (nic_opcode_xrc(p->opcode)
            ? qp->init.xrc != ((info->mask & NIC_OPF_REQ) ? NIC_XRC_TGT : NIC_XRC_INI)
            : qp->init.xrc != NIC_XRC_NONE) {
        rx_drop(nic, p, "nic: XRC opcode to a QP of another side or transport");
        return;
    }
    if (info->mask & NIC_OPF_REQ) {
        if (!nic_qp_can_receive(qp)) {
            rx_drop(nic, p, "nic: QP not receiving");
            return;
        }
        if (p->ecn == PKT_ECN_CE && nic->p.dcqcn) /* DCQCN notification point */
            nic_dcqcn_np_rx(qp, p);
        nic_resp_rx(qp, p);
        return;
    }
    if (info->mask & NIC_OPF_AETH) {
        if ((p->aeth_syndrome & NIC_AETH_TYPE_MASK) == 0)
            nic->cnt.acks_rx++;
        else
            nic->cnt.naks_rx++;
    }
    if (!nic_qp_can_send(qp)) {
        rx_drop(nic, p, "nic: QP not sending");
        return;
    }
    nic_comp_rx(qp, p);
}

/* The receive buffer (nic.rx_buffer): a packet holds its 64 B blocks
 * from its arrival until its processing unit is done with it (it has been
 * parsed and its placement handed to the DMA engine, dma.c); then the
 * blocks go back to the sender as credits (link_credit_return, IBA 7.9). */
static uint64_t rx_buf_need(const struct pkt *p)
{
    return ((uint64_t)p->frame_bytes + LINK_CREDIT_BLOCK_BYTES - 1) / LINK_CREDIT_BLOCK_BYTES *
           LINK_CREDIT_BLOCK_BYTES;
}

static void rx_buf_take(struct nic *nic, const struct pkt *p)
{
    if (!nic->rx_credit_link)
        return;
    uint64_t *b = &nic->rx_buf_bytes[p->prio];
    *b += rx_buf_need(p);
    if (*b > nic->cnt.rx_buf_max_bytes)
        nic->cnt.rx_buf_max_bytes = *b;
}

static void rx_buf_free(struct nic *nic, const struct pkt *p)
{
    if (!nic->rx_credit_link)
        return;
    uint64_t n = rx_buf_need(p), *b = &nic->rx_buf_bytes[p->prio];
    *b = *b > n ? *b - n : 0;
    link_credit_return(nic->rx_credit_link, p);
}

uint64_t nic_rx_buf_bytes(const struct nic *nic, unsigned prio)
{
    return prio < PKT_PRIOS ? nic->rx_buf_bytes[prio] : 0;
}

/* A processing unit finished a packet: dispatch it, take the next one. */
static void rx_unit_done(struct sim *sim, void *a, void *b)
{
    struct nic *nic = a;
    uint32_t units = nic->p.pus ? nic->p.pus : 1;
    if (nic->rx_units_busy == units)
        nic->rx_unit_free_ps = sim_now(sim);
    nic->rx_units_busy--;
    rx_buf_free(nic, b);
    rx_process(nic, b);
    nic_rx_pump(nic);
}

/* A context a unit waited for arrived (ctx.c): now the packet's work (no
 * cut-through: the unit starts on it now). */
static void rx_release_held(struct nic *nic, struct nic_qp *qp);

static void rx_unit_work(struct sim *sim, struct nic *nic, struct pkt *p)
{
    p->head_ps = 0;
    struct nic_qp *qp = nic_qp_lookup(nic, p->dest_qpn);
    if (qp)
        qp->eng->rx_done_ps = sim_now(sim) + nic->p.rx_pkt_proc_ps;
    sim_call_in(sim, nic->p.rx_pkt_proc_ps, rx_unit_done, nic, p);
    if (nic_tr(nic)) {
        struct trace_rec r = {.where = "rx (context fetched)"};
        nic_trace_pkt_fields(&r, p, false);
        nic_trace_span(nic, TRK_RX, sim_now(sim), nic->p.rx_pkt_proc_ps, &r);
    }
    if (qp) { /* the packets of the QP held behind this one go on */
        qp->eng->rx_waiting = false;
        rx_release_held(nic, qp);
    }
}

void nic_rx_qp_gone(struct nic *nic, struct nic_qp *qp)
{
    struct nic_qp_engine *e = qp->eng;
    e->rx_waiting = false;
    while (e->rx_hold_head) {
        struct pkt *p = e->rx_hold_head;
        e->rx_hold_head = p->next;
        p->next = NULL;
        sim_call_in(nic->sim, 0, rx_unit_done, nic, p);
    }
    e->rx_hold_tail = NULL;
}

/* A READ response or atomic ACK needs its QP's requester READ/atomic
 * context (docs/nic.md "READ and atomic engines"); with contexts per
 * outstanding READ (nic.rd_ctx_per: read), the first packet of each
 * response looks its READ up and the rest of that response follow it. */
static bool rx_needs_rdctx(const struct nic *nic, const struct pkt *p)
{
    uint32_t m = nic_opcode(p->opcode)->mask;
    if (!(m & (NIC_OPF_READ | NIC_OPF_ATOMIC_ACK)) || (m & NIC_OPF_REQ))
        return false;
    return nic->p.rd_ctx_per != NIC_RD_CTX_PER_READ || (m & (NIC_OPF_FIRST | NIC_OPF_ATOMIC_ACK));
}

/* A request that consumes a receive WQE (a SEND's first packet, a WRITE
 * with immediate's last) needs one on chip (ctx.c, nic.rwqe_*). */
static bool rx_rwqe_ready(struct nic *nic, struct pkt *p, sim_cb_fn fn)
{
    if (!nic->rwq.cap)
        return true;
    uint32_t m = nic_opcode(p->opcode)->mask;
    if (!(m & NIC_OPF_REQ) || !(m & NIC_OPF_RWR) ||
        !(m & ((m & NIC_OPF_SEND) ? NIC_OPF_FIRST : NIC_OPF_LAST)))
        return true;
    struct nic_qp *qp = nic_qp_lookup(nic, p->dest_qpn);
    return !qp || nic_rwqe_access(nic, qp, fn, nic, p);
}

/* A response that completes a WQE (an ACK, a READ response's last packet,
 * an atomic ACK) needs that WQE, in the NIC's cache of outstanding WQEs
 * (ctx.c, nic.wqe_cache_*); key: the QP and the PSN it acknowledges. */
static bool rx_needs_wqe(struct nic *nic, const struct pkt *p)
{
    if (!nic->wqc.cap)
        return false;
    uint32_t m = nic_opcode(p->opcode)->mask;
    if (!(m & NIC_OPF_RESP))
        return false;
    if (m & NIC_OPF_ATOMIC_ACK)
        return (p->aeth_syndrome & NIC_AETH_TYPE_MASK) == 0;
    if (m & NIC_OPF_READ)
        return (m & NIC_OPF_LAST) != 0;
    if (!(m & NIC_OPF_ACK) || (p->aeth_syndrome & NIC_AETH_TYPE_MASK) != 0)
        return false;
    /* an ACK: only a WQE that still needs its descriptor (a signalled one,
     * for its CQE) was kept (req.c); find the one whose last PSN it acks
     * among the QP's oldest outstanding ones */
    struct nic_qp *qp = nic_qp_lookup(nic, p->dest_qpn);
    if (!qp || !qp->sq)
        return false;
    for (uint64_t i = qp->sq_comp, n = 0; i < qp->eng->req_idx && n < 64; i++, n++) {
        const struct nic_send_wqe *w = nic_sq_wqe(qp, i);
        if (w->state != NIC_WQE_QUEUED && w->last_psn == p->psn)
            return w->signaled;
    }
    return false;
}

/* The stages a packet's processing unit may wait in before its work:
 * the QP context, the requester's per-QP READ-response tracker and
 * READ/atomic context, the outstanding WQE, the receive WQE.  Each either hits (true) or calls its
 * successor back. */
static void rx_after_rwqe(struct sim *sim, void *a, void *b)
{
    rx_unit_work(sim, a, b);
}

static void rx_after_wqc(struct sim *sim, void *a, void *b)
{
    struct pkt *p = b;
    nic_wqe_retire(a, p->dest_qpn, p->psn);
    if (rx_rwqe_ready(a, b, rx_after_rwqe))
        rx_unit_work(sim, a, b);
}

static bool rx_from_wqc(struct nic *nic, struct pkt *p)
{
    return (!rx_needs_wqe(nic, p) ||
            nic_wqe_access(nic, p->dest_qpn, p->psn, rx_after_wqc, nic, p)) &&
           rx_rwqe_ready(nic, p, rx_after_rwqe);
}

static void rx_after_rdc(struct sim *sim, void *a, void *b)
{
    struct pkt *p = b;
    nic_rdctx_retire(a, p->dest_qpn, p->psn);
    if (rx_from_wqc(a, b))
        rx_unit_work(sim, a, b);
}

static bool rx_from_rdc(struct nic *nic, struct pkt *p)
{
    return (!rx_needs_rdctx(nic, p) ||
            nic_rdctx_access(nic, p->dest_qpn, p->psn, rx_after_rdc, nic, p)) &&
           rx_from_wqc(nic, p);
}

static void rx_after_rdq(struct sim *sim, void *a, void *b)
{
    if (rx_from_rdc(a, b))
        rx_unit_work(sim, a, b);
}

static bool rx_from_rdq(struct nic *nic, struct pkt *p)
{
    return (!rx_needs_rdctx(nic, p) || nic_rdqp_access(nic, p->dest_qpn, rx_after_rdq, nic, p)) &&
           rx_from_rdc(nic, p);
}

static void rx_after_ctx(struct sim *sim, void *a, void *b)
{
    if (rx_from_rdq(a, b))
        rx_unit_work(sim, a, b);
}

/* When a unit taking packet p now could have started on it: cut-through,
 * once its headers had arrived (p->head_ps: its first bit) if a unit was
 * free then.  Returns the delay until the unit is done; p->head_ps becomes
 * the time its placement could start (dma.c). */
static sim_time_t rx_unit_time(struct nic *nic, struct pkt *p)
{
    sim_time_t now = sim_now(nic->sim);
    sim_time_t proc = nic->p.rx_pkt_proc_ps;
    sim_time_t start = now;
    if (p->head_ps && p->head_ps < now && nic->p.port_rate_bps) {
        uint32_t hdr = p->frame_bytes > p->payload_len ? p->frame_bytes - p->payload_len : 0;
        start = p->head_ps + sim_bytes_to_ps(hdr, nic->p.port_rate_bps);
        if (start < nic->rx_unit_free_ps)
            start = nic->rx_unit_free_ps;
        if (start > now)
            start = now;
    }
    sim_time_t done = start + proc > now ? start + proc : now;
    /* a QP's packets leave the units in arrival order, also behind one
     * whose unit waited for the QP's context (rx_after_ctx) */
    struct nic_qp *qp = nic_qp_lookup(nic, p->dest_qpn);
    if (qp) {
        if (done < qp->eng->rx_done_ps)
            done = qp->eng->rx_done_ps;
        qp->eng->rx_done_ps = done;
    }
    p->head_ps = start < now ? start + proc : 0;
    if (nic_tr(nic)) {
        struct trace_rec r = {.where = "rx"};
        nic_trace_pkt_fields(&r, p, false);
        nic_trace_span(nic, TRK_RX, start, done - start, &r);
    }
    return done - now;
}

/* Every wait stage from the first: true if p may start its work now. */
static bool rx_stages(struct nic *nic, struct pkt *p)
{
    return nic_ctx_access(nic, p->dest_qpn, rx_after_ctx, nic, p) && rx_from_rdq(nic, p);
}

/* The waiting packet of qp went on: its held ones follow in order, until
 * one of them has to wait in turn. */
static void rx_release_held(struct nic *nic, struct nic_qp *qp)
{
    struct nic_qp_engine *e = qp->eng;
    while (e->rx_hold_head && !e->rx_waiting) {
        struct pkt *p = e->rx_hold_head;
        e->rx_hold_head = p->next;
        if (!e->rx_hold_head)
            e->rx_hold_tail = NULL;
        p->next = NULL;
        p->head_ps = 0;
        if (rx_stages(nic, p))
            sim_call_in(nic->sim, rx_unit_time(nic, p), rx_unit_done, nic, p);
        else
            e->rx_waiting = true;
    }
}

/* A plain ACK (not a NAK, no READ data, no atomic result): it only says
 * every request up to its PSN is done. */
static bool rx_plain_ack(const struct pkt *p)
{
    uint32_t m = nic_opcode(p->opcode)->mask;
    return (m & NIC_OPF_ACK) && !(m & (NIC_OPF_ATOMIC_ACK | NIC_OPF_READ)) &&
           (p->aeth_syndrome & NIC_AETH_TYPE_MASK) == 0;
}

/* Hold p, which took a unit, behind its QP's waiting packet.  ACKs are
 * cumulative (IBA 9.7.5.1.1: an ACK acknowledges every request up to its
 * PSN), so a plain ACK arriving behind a held plain ACK of the same QP
 * makes that one redundant: the older one is received and dropped and its
 * unit freed, the newer one takes its place (unless the older one completes
 * a signalled WQE whose descriptor it must look up: the outstanding-WQE
 * cache entry would otherwise stay behind).  A QP whose context missed
 * then holds at most one ACK in a unit, not one per message - without
 * this, a requester writing over thousands of QPs stalls every unit behind
 * each ACK's context miss (docs/nic.md "Order of a QP's packets"). */
static void rx_hold(struct nic *nic, struct nic_qp *qp, struct pkt *p)
{
    struct nic_qp_engine *e = qp->eng;
    struct pkt *t = e->rx_hold_tail;
    if (t && rx_plain_ack(p) && rx_plain_ack(t) && t->opcode == p->opcode &&
        nic_psn_diff(p->psn, t->psn) >= 0 && !rx_needs_wqe(nic, t)) {
        /* the walk is short: every held packet keeps a unit, so a QP holds
         * at most nic.pus packets */
        struct pkt **pp = &e->rx_hold_head;
        while (*pp != t)
            pp = &(*pp)->next;
        *pp = p;
        e->rx_hold_tail = p;
        nic->cnt.pkts_rx++;
        nic->cnt.bytes_rx += t->frame_bytes;
        nic->cnt.acks_rx++;
        nic->cnt.acks_merged++;
        nic_trace_pkt(nic, TRACE_PKT_RX, t, t->dest_qpn, "nic rx (ACK merged into a later one)");
        rx_buf_free(nic, t);
        pkt_free(nic->pool, t);
        if (nic->rx_units_busy == (nic->p.pus ? nic->p.pus : 1))
            nic->rx_unit_free_ps = sim_now(nic->sim); /* as rx_unit_done */
        nic->rx_units_busy--;
        return;
    }
    if (t)
        t->next = p;
    else
        e->rx_hold_head = p;
    e->rx_hold_tail = p;
}

void nic_rx_pump(struct nic *nic)
{
    uint32_t units = nic->p.pus ? nic->p.pus : 1;
    while (nic->rx_head && nic->rx_units_busy < units) {
        struct pkt *p = nic->rx_head;
        nic->rx_head = p->next;
        if (!nic->rx_head)
            nic->rx_tail = NULL;
        p->next = NULL;
        nic->rx_units_busy++;
        nic->rx_stalled = false;
        struct nic_qp *qp = nic_qp_lookup(nic, p->dest_qpn);
        if (qp && qp->eng->rx_waiting) { /* behind an earlier packet of its QP */
            rx_hold(nic, qp, p);
        } else if (rx_stages(nic, p)) {
            sim_call_in(nic->sim, rx_unit_time(nic, p), rx_unit_done, nic, p);
        } else if (qp) {
            qp->eng->rx_waiting = true;
        }
    }
    if (nic->rx_head && !nic->rx_stalled) { /* every unit busy: packets wait */
        nic->rx_stalled = true;
        nic->cnt.rx_pu_stalls++;
    }
}

static void rx_enqueue(struct sim *sim, void *ctx, void *pkt)
{
    (void)sim;
    struct nic *nic = ctx;
    struct pkt *p = pkt;
    p->next = NULL;
    if (nic->rx_tail)
        nic->rx_tail->next = p;
    else
        nic->rx_head = p;
    nic->rx_tail = p;
    nic_rx_pump(nic);
}

static void rx_arrive(struct sim *sim, void *ctx, struct pkt *p)
{
    /* ib-ar: a request packet may come later by its path's skew (resp.c) */
    struct nic *nic = ctx;
    rx_buf_take(nic, p);
    sim_time_t skew = nic->p.transport == NIC_TRANSPORT_IB_AR ? nic_ar_skew_ps(nic, p) : 0;
    if (skew)
        sim_call_in(sim, skew, rx_enqueue, ctx, p);
    else
        rx_enqueue(sim, ctx, p);
}

/* ---------------------------------------------------------------- device */

struct nic *nic_create(struct sim *sim, struct host *host, uint32_t node_id,
                       const struct nic_params *p, struct pcie_link *pcie, struct pkt_pool *pool)
{
    if (!sim || !p || !pool || node_id >= 0xfffffeu) {
        errno = EINVAL;
        return NULL;
    }
    struct nic *nic = calloc(1, sizeof(*nic));
    if (!nic) {
        errno = ENOMEM;
        return NULL;
    }
    nic->sim = sim;
    nic->host = host;
    nic->node_id = node_id;
    nic->p = *p;
    nic->pcie = pcie;
    nic->pool = pool;
    nic->no_payload = !pkt_pool_carries_payload(pool);
    nic->next_pd_handle = 1;
    nic->next_cq_id = 1;
    /* QPNs 0 and 1 are the special QP0/QP1; start where mlx5 QPNs look real */
    nic->next_qpn = 0x100;
    nic->qp_tbl_mask = 63;
    nic->qp_tbl = calloc(nic->qp_tbl_mask + 1, sizeof(*nic->qp_tbl));
    if (!nic->qp_tbl) {
        free(nic);
        errno = ENOMEM;
        return NULL;
    }
    sim_event_init(&nic->tx_ev, tx_ev_fn, nic, "nic.tx");
    nic_rdeng_init(nic);
    if (nic_ctx_init(nic) || nic_xlate_init(nic)) {
        nic_ctx_fini(nic);
        nic_xlate_fini(nic);
        free(nic->qp_tbl);
        free(nic);
        errno = ENOMEM;
        return NULL;
    }
    return nic;
}

static void free_pkt_list(struct nic *nic, struct pkt *p)
{
    while (p) {
        struct pkt *n = p->next;
        pkt_free(nic->pool, p);
        p = n;
    }
}

void nic_destroy(struct nic *nic)
{
    if (!nic)
        return;
    sim_cancel(nic->sim, &nic->tx_ev);
    if (nic->uplink)
        link_set_idle_hook(nic->uplink, NULL, NULL, NULL);
    nic->txq_head = nic->txq_tail = NULL;
    nic_rdeng_teardown(nic);
    nic_qp_teardown(nic);
    nic_atomic_teardown(nic);
    nic_aq_teardown(nic);
    nic_cq_teardown(nic);
    nic_mr_teardown(nic);
    nic_dm_teardown(nic);
    free(nic->peer);
    free(nic->mcast);
    nic_ctx_fini(nic);
    nic_xlate_fini(nic);
    for (uint32_t i = 0; i < nic->n_pds; i++)
        free(nic->pds[i]);
    free(nic->pds);
    free_pkt_list(nic, nic->rx_head);
    free_pkt_list(nic, nic->ctrl_head);
    if (nic->tx_building)
        pkt_free(nic->pool, nic->tx_building);
    if (nic->tx_hand)
        pkt_free(nic->pool, nic->tx_hand);
    for (uint32_t i = 0; i < nic->n_op_slabs; i++)
        free(nic->op_slabs[i]);
    free(nic->op_slabs);
    free(nic);
}

void nic_attach_uplink(struct nic *nic, struct link *uplink)
{
    nic->uplink = uplink;
    if (uplink)
        link_set_idle_hook(uplink, tx_link_idle, nic, NULL);
    /* The receive buffer on an InfiniBand port: the link that delivers to
     * us (the cable's other direction) may only send what fits in it, per
     * VL (IBA 7.9).  A buffer holds at least one packet of the largest
     * MTU (IBA 7.9.4), so a smaller setting is raised to that. */
    if (nic->rx_credit_link)
        link_set_credits(nic->rx_credit_link, 0, 0);
    nic->rx_credit_link = NULL;
    if (uplink && nic->p.rx_buffer_bytes && nic->p.link_layer == NIC_LINK_IB && link_peer(uplink)) {
        uint64_t min = NIC_RX_BUF_MIN_BYTES;
        nic->rx_credit_link = link_peer(uplink);
        link_set_credits(nic->rx_credit_link, 0xff,
                         nic->p.rx_buffer_bytes > min ? nic->p.rx_buffer_bytes : min);
    }
}

struct fabric_sink nic_sink(struct nic *nic)
{
    return (struct fabric_sink){rx_arrive, nic};
}

const struct nic_params *nic_get_params(const struct nic *nic)
{
    return &nic->p;
}
const struct nic_counters *nic_get_counters(struct nic *nic)
{
    /* the caches count for themselves (cache.c); copy their totals in */
    struct nic_counters *c = &nic->cnt;
    c->qpc_hits = nic->qpc.c.hits;
    c->qpc_misses = nic->qpc.c.misses;
    c->qpc_evictions = nic->qpc.c.evictions;
    c->mpt_hits = nic->mpt.c.hits;
    c->mpt_misses = nic->mpt.c.misses;
    c->mtt_hits = nic->mtt.c.hits;
    c->mtt_misses = nic->mtt.c.misses;
    c->mtt_evictions = nic->mtt.c.evictions;
    c->rd_ctx_hits = nic->rdc.c.hits;
    c->rd_ctx_misses = nic->rdc.c.misses;
    c->rd_qp_hits = nic->rdq.c.hits;
    c->rd_qp_misses = nic->rdq.c.misses;
    c->wqe_cache_hits = nic->wqc.c.hits;
    c->wqe_cache_misses = nic->wqc.c.misses;
    c->rwqe_hits = nic->rwq.c.hits;
    c->rwqe_misses = nic->rwq.c.misses;
    return &nic->cnt;
}
void nic_note_wr_refused(struct nic *nic)
{
    nic->cnt.wr_refused++;
}
bool nic_payload_carried(const struct nic *nic)
{
    return !nic->no_payload;
}
uint32_t nic_node_id(const struct nic *nic)
{
    return nic->node_id;
}
struct host *nic_host(const struct nic *nic)
{
    return nic->host;
}

/* GID index 0 of node n: the IPv4-mapped RoCEv2 GID ::ffff:10.a.b.c with
 * a.b.c = n + 1 (10.0.0.(n+1) for the first 254 nodes). */
void nic_gid_of_node(uint32_t node_id, union ibv_gid *gid)
{
    uint32_t a = node_id + 1;
    memset(gid, 0, sizeof(*gid));
    gid->raw[10] = 0xff;
    gid->raw[11] = 0xff;
    gid->raw[12] = 10;
    gid->raw[13] = (uint8_t)(a >> 16);
    gid->raw[14] = (uint8_t)(a >> 8);
    gid->raw[15] = (uint8_t)a;
}

int64_t nic_node_from_gid(const union ibv_gid *gid)
{
    if (!gid)
        return -1;
    for (int i = 0; i < 10; i++)
        if (gid->raw[i])
            return -1;
    if (gid->raw[10] != 0xff || gid->raw[11] != 0xff || gid->raw[12] != 10)
        return -1;
    uint32_t a = ((uint32_t)gid->raw[13] << 16) | ((uint32_t)gid->raw[14] << 8) | gid->raw[15];
    if (a == 0 || a == 0xffffffu)
        return -1;
    return (int64_t)a - 1;
}
