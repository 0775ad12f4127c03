/* The requester: from the send doorbell to request packets in the staging
 * ring (rxe_req.c is the model).
 *
 * Doorbell and WQE fetch.  ibv_post_send appends WQEs to the send queue in
 * host memory and rings one doorbell (nic_sq_doorbell): an MMIO write over
 * PCIe, 8 bytes - or, with BlueFlame, when the doorbell covers a single WQE
 * of at most NIC_BF_MAX_BYTES, the WQE itself (64 B-rounded), which then
 * needs no fetch.  doorbell_proc_ps after the MMIO lands the NIC issues one
 * DMA read for every WQE the doorbell covers (wqe_bytes + num_sge *
 * wqe_sge_bytes each, inline data instead of SGEs for inline WQEs); when it
 * completes those WQEs are "fetched" and the requester may start them.  A
 * doorbell that reaches a QP in ERR flushes the new WQEs.
 *
 * Requester state machine (one per QP, enum nic_req_state):
 *
 *     IDLE --kick--> NEXT_WQE ------------------------> SEGMENT --+--> NEXT_WQE
 *       ^               |  |                             |   ^     |
 *       +-- nothing ----+  +--> WQE_PROC --req_ev--+     v   |     +--> STOPPED
 *           fetched / SQD  |   (engine busy)       |  WAIT_SPACE       (local error:
 *                          +--> WAIT_RD_ATOMIC     |  (ring full)       the completer
 *                               (max_rd_atomic,    +--> NEXT_WQE         finishes)
 *                                fence)
 *     WAIT_RNR: RNR back-off after an RNR NAK (completer); rnr_ev -> NEXT_WQE
 *     WAIT_CTX: the QP context missed in the QP-context cache (ctx.c); its
 *               arrival kicks -> NEXT_WQE
 *
 *  NEXT_WQE   takes WQE req_idx if it is fetched; READ/atomics wait while
 *             max_rd_atomic of them are outstanding (and a fenced WQE waits
 *             for all of them).  The send engine works on one WQE of a QP
 *             at a time for wqe_proc_ps (occupancy, overlapped with the
 *             payload DMA: it limits one QP's message rate, it is not added
 *             to the latency); a WQE that finds it busy waits in WQE_PROC.
 *             Taking a new WQE: local checks (every SGE's lkey, PD, bounds,
 *             LOCAL_WRITE for READ/atomic targets: failure =
 *             IBV_WC_LOC_PROT_ERR; message longer than 1 GiB =
 *             IBV_WC_LOC_LEN_ERR), PSNs assigned (one per packet; a READ
 *             takes one per response packet).
 *  SEGMENT    builds the packets of the WQE at path_mtu into the staging
 *             ring: opcode from the table (FIRST/MIDDLE/LAST/ONLY, +IMM),
 *             RETH on the first WRITE packet, AckReq and SE on the last;
 *             each packet's payload is fetched by its own DMA read (the
 *             SGE pieces it covers), so a long message streams: at most
 *             NIC_STAGE_SLOTS packets / NIC_STAGE_MAX_BYTES of payload are
 *             between DMA read and wire.  Inline payload is copied from
 *             the WQE, no DMA.
 *
 * UC and UD use the same machine without responses: packets carry no
 * AckReq, the completer finishes a WQE when its last packet leaves, and
 * nothing is ever resent.  A UD WQE longer than the path MTU (the port's
 * active MTU) completes with IBV_WC_LOC_LEN_ERR and sends nothing; a UD
 * packet takes its destination node, QPN and Q_Key from the WQE (the AH).
 *
 * Go back N (nic_req_rewind, called by the completer on a timeout, a PSN
 * sequence NAK, an RNR NAK or a missing read response): every WQE from the
 * one holding the PSN on is marked RETRY, the staging ring is dropped
 * (in-flight payload reads are ignored: req_epoch), and building restarts
 * at that PSN - mid-message for SEND/WRITE, with a shortened READ request
 * for a partly answered READ. */
#include <string.h>

#include "nic_priv.h"

static void req_run(struct nic_qp *qp);
static enum nic_req_state req_start_wqe(struct nic_qp *qp);

bool nic_wqe_is_rd_atomic(const struct nic_send_wqe *w)
{
    return w->opcode == IBV_WR_RDMA_READ || w->opcode == IBV_WR_ATOMIC_CMP_AND_SWP ||
           w->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD;
}

static bool wqe_is_atomic(const struct nic_send_wqe *w)
{
    return w->opcode == IBV_WR_ATOMIC_CMP_AND_SWP || w->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD;
}

/* PSNs a WQE uses: packets of a SEND/WRITE, response packets of a READ. */
uint32_t nic_wqe_npkts(const struct nic_send_wqe *w, uint32_t mtu)
{
    if (wqe_is_atomic(w))
        return 1;
    return w->length ? (uint32_t)(((uint64_t)w->length + mtu - 1) / mtu) : 1;
}

static uint32_t wqe_fetch_bytes(const struct nic_params *p, const struct nic_send_wqe *w)
{
    if (w->send_flags & IBV_SEND_INLINE)
        return p->wqe_bytes + ((w->length + 15u) & ~15u);
    return p->wqe_bytes + w->num_sge * p->wqe_sge_bytes;
}

bool nic_sges_to_segs(struct nic *nic, const struct nic_sge *sge, uint32_t num_sge, uint32_t off,
                      uint32_t len, struct nic_op *op)
{
    uint32_t i = 0;
    while (i < num_sge && off >= sge[i].length) {
        off -= sge[i].length;
        i++;
    }
    op->n_seg = 0;
    for (; len && i < num_sge; i++, off = 0) {
        uint32_t take = sge[i].length - off;
        if (take > len)
            take = len;
        if (!take)
            continue;
        struct nic_mr *mr = nic_mr_lookup(nic, sge[i].lkey);
        if (!mr)
            return false;
        struct nic_seg *s = &op->seg[op->n_seg++];
        s->host = mr->host_addr + (sge[i].addr - mr->iova) + off;
        s->key = sge[i].lkey;
        s->len = take;
        len -= take;
    }
    return len == 0;
}

/* ---------------------------------------------------------------- doorbell and WQE fetch */

static void fetch_done(struct sim *sim, void *a, void *b)
{
    (void)sim;
    (void)b;
    struct nic_op *op = a;
    struct nic_qp *qp = op->qp;
    if (op->tr_t0 != SIM_TIME_NEVER && nic_tr(op->nic)) /* WQEs [tr_from, v) fetched */
        nic_trace_span(op->nic, TRK_WQE_FETCH, op->tr_t0, sim_now(op->nic->sim) - op->tr_t0,
                       &(struct trace_rec){.qpn = qp->qpn,
                                           .addr = op->tr_from,
                                           .val = op->v,
                                           .len = (uint32_t)op->mem_bytes,
                                           .where = "wqe fetch"});
    if (!nic_op_stale(op)) {
        struct nic_qp_engine *e = qp->eng;
        if (op->v > e->fetched) {
            op->nic->cnt.wqes_fetched += op->v - e->fetched;
            e->fetched = op->v;
        }
        req_run(qp);
    }
    nic_op_free(op);
}

static void db_process(struct sim *sim, void *a, void *b)
{
    (void)sim;
    (void)b;
    struct nic_op *op = a;
    struct nic_qp *qp = op->qp;
    struct nic *nic = op->nic;
    if (nic_op_stale(op)) {
        nic_op_free(op);
        return;
    }
    if (qp->state == IBV_QPS_ERR || qp->state == IBV_QPS_SQE) {
        nic_qp_flush_sq(qp);
        nic_op_free(op);
        return;
    }
    struct nic_qp_engine *e = qp->eng;
    if (op->v <= e->fetch_issued) {
        nic_op_free(op);
        return;
    }
    /* the send queue's address is in the QP context (ctx.c) */
    if (!nic_ctx_access(nic, qp->qpn, db_process, op, NULL))
        return;
    if (op->flag && op->v == e->fetch_issued + 1 && e->fetched == e->fetch_issued) {
        /* BlueFlame: the WQE came with the doorbell */
        e->fetch_issued = e->fetched = op->v;
        nic->cnt.wqes_fetched++;
        nic_op_free(op);
        req_run(qp);
        return;
    }
    uint64_t bytes = 0;
    for (uint64_t i = e->fetch_issued; i < op->v; i++)
        bytes += wqe_fetch_bytes(&nic->p, nic_sq_wqe(qp, i));
    if (nic_tr(nic)) {
        op->tr_t0 = sim_now(sim);
        op->tr_from = e->fetch_issued;
        op->mem_bytes = bytes;
    }
    e->fetch_issued = op->v;
    op->kind = NIC_OP_FETCH;
    nic->cnt.dma_reads++;
    nic_pcie_trace_ctx(nic, op);
    if (nic->pcie)
        pcie_dma_read_k(nic->pcie, PCIE_K_WQE_FETCH, 0, bytes, fetch_done, op, NULL);
    else
        fetch_done(nic->sim, op, NULL);
}

static void db_arrived(struct sim *sim, void *a, void *b)
{
    (void)b;
    struct nic_op *op = a;
    op->nic->cnt.doorbells++;
    if (nic_tr(op->nic)) /* WQEs [tr_from, v); status 1: BlueFlame (the WQE came with it) */
        nic_trace_span(
            op->nic, TRK_DOORBELL, sim_now(sim), op->nic->p.doorbell_proc_ps,
            &(struct trace_rec){.qpn = op->qp->qpn,
                                .addr = op->tr_from,
                                .val = op->v,
                                .status = op->flag,
                                .where = op->flag ? "doorbell (BlueFlame)" : "doorbell"});
    if (nic_op_stale(op)) {
        nic_op_free(op);
        return;
    }
    sim_call_in(sim, op->nic->p.doorbell_proc_ps, db_process, op, NULL);
}

static void db_cross_socket(struct sim *sim, void *a, void *b)
{
    (void)sim;
    struct nic_op *op = a;
    nic_pcie_trace_ctx(op->nic, op); /* the context is the next PCIe operation's */
    pcie_mmio_write_k(op->nic->pcie, PCIE_K_DOORBELL, (uint64_t)(uintptr_t)b, db_arrived, op, NULL);
}

void nic_sq_doorbell(struct nic_qp *qp)
{
    struct nic *nic = qp->nic;
    uint64_t n = qp->sq_tail - qp->sq_db;
    if (!n)
        return;
    uint32_t sz = wqe_fetch_bytes(&nic->p, nic_sq_wqe(qp, qp->sq_tail - 1));
    nic_sq_ring(qp, sz <= NIC_BF_MAX_BYTES);
}

void nic_sq_ring(struct nic_qp *qp, bool wqe_with_doorbell)
{
    struct nic *nic = qp->nic;
    uint64_t n = qp->sq_tail - qp->sq_db;
    if (!n)
        return;
    uint32_t sz = wqe_fetch_bytes(&nic->p, nic_sq_wqe(qp, qp->sq_tail - 1));
    /* the provider sized the WQE in its own format (libmlx4's fits the
     * BlueFlame buffer); the store carries at most that buffer */
    bool bf = nic->p.blueflame && wqe_with_doorbell && n == 1;
    if (bf && sz > NIC_BF_MAX_BYTES)
        sz = NIC_BF_MAX_BYTES;
    struct nic_op *op = nic_op_alloc(nic, NIC_OP_DOORBELL, qp);
    op->v = qp->sq_tail;
    op->flag = bf;
    op->tr_from = qp->sq_db;
    qp->sq_db = qp->sq_tail;
    uint64_t bytes = bf ? (sz + 63u) & ~63u : 8;
    /* a thread on another socket: the store crosses the socket link first */
    sim_time_t hop = nic->host ? host_mmio_numa_delay(nic->host) : 0;
    if (nic->pcie && hop)
        sim_call_in(nic->sim, hop, db_cross_socket, op, (void *)(uintptr_t)bytes);
    else if (nic->pcie) {
        nic_pcie_trace_ctx(nic, op);
        pcie_mmio_write_k(nic->pcie, PCIE_K_DOORBELL, bytes, db_arrived, op, NULL);
    } else {
        db_arrived(nic->sim, op, NULL);
    }
}

/* ---------------------------------------------------------------- packets */

/* Packet k of SEND/WRITE WQE w into the staging ring. */
static void build_send_write(struct nic_qp *qp, struct nic_send_wqe *w, uint32_t k, uint32_t n)
{
    struct nic *nic = qp->nic;
    struct nic_qp_engine *e = qp->eng;
    uint32_t mtu = e->mtu_bytes;
    uint32_t off = k * mtu;
    uint32_t plen = w->length > off ? w->length - off : 0;
    if (plen > mtu)
        plen = mtu;
    uint32_t pos = nic_pkt_pos(k, n);
    uint8_t opcode = (uint8_t)nic_req_opcode_qpt(qp->init.qp_type, w->opcode, pos);
    uint32_t mask = nic_opcode(opcode)->mask;
    struct pkt *p = pkt_alloc(nic->pool);
    nic_pkt_address(qp, p, opcode, nic_psn_add(w->first_psn, k), plen);
    if (mask & NIC_OPF_DETH) { /* UD: the destination comes with the WQE (its AH) */
        p->dst_node = w->ud_node;
        p->dest_qpn = w->ud_qpn;
        p->deth_qkey = w->ud_qkey;
        p->udp_sport = nic_roce_udp_sport(qp->qpn, w->ud_qpn);
        p->framing = nic_framing(nic, w->ud_grh);
        p->frame_bytes = nic_frame_bytes(p->framing, p->opcode, plen);
    }
    if (mask & NIC_OPF_RETH) {
        p->reth_va = w->remote_addr;
        p->reth_rkey = w->rkey;
        p->reth_dma_len = w->length;
    }
    if (mask & NIC_OPF_IMMDT)
        p->imm_data = w->imm_data;
    p->xrc_srqn = w->xrc_srqn;                     /* in the XRCETH of an XRC initiator's packet */
    if (nic->p.transport == NIC_TRANSPORT_IB_AR) { /* placement context (resp.c, ib-ar) */
        p->ar_ctx = 1;
        p->ar_msg_psn = w->first_psn;
        if (mask & NIC_OPF_WRITE) {
            p->reth_va = w->remote_addr;
            p->reth_rkey = w->rkey;
            p->reth_dma_len = w->length;
        }
    }
    if (pos & NIC_OPF_LAST) {
        p->ack_req = nic_qp_reliable(qp); /* UC/UD: nothing answers */
        p->se = (w->send_flags & IBV_SEND_SOLICITED) ? 1 : 0;
    }
    if (!plen) {
        nic_stage_push(&e->req_stage, p, true);
    } else if (w->send_flags & IBV_SEND_INLINE) {
        if (!nic->no_payload)
            memcpy(p->payload, w->inline_data + off, plen);
        nic_stage_push(&e->req_stage, p, true);
    } else {
        struct nic_op *op = nic_op_alloc(nic, NIC_OP_REQ_PAYLOAD, qp);
        op->pkt = p;
        nic_sges_to_segs(nic, w->sge, w->num_sge, off, plen, op);
        /* the packets of one 4 KiB piece of the message are one host
         * fetch stream (docs/nic.md "Payload fetch"), whatever the MTU */
        op->mem_chain = nic_fetch_chain(e->req_fetch_chain, &e->req_fetch_cur,
                                        off % NIC_FETCH_STREAM_BYTES == 0 || k == 0);
        if (nic_tr(nic))
            op->tr_t0 = sim_now(nic->sim);
        nic_stage_push(&e->req_stage, p, false);
        nic_mem_read(nic, op, PCIE_K_PAYLOAD_RD, plen, nic_payload_fetched, &qp->eng->req_src);
    }
}

/* The READ request (from response packet k on) or the atomic request. */
static void build_rd_atomic(struct nic_qp *qp, struct nic_send_wqe *w, uint32_t k)
{
    struct nic *nic = qp->nic;
    struct nic_qp_engine *e = qp->eng;
    struct pkt *p = pkt_alloc(nic->pool);
    if (w->opcode == IBV_WR_RDMA_READ) {
        uint32_t off = k * e->mtu_bytes;
        nic_pkt_address(qp, p, IB_OPCODE_RC_RDMA_READ_REQUEST, nic_psn_add(w->first_psn, k), 0);
        p->reth_va = w->remote_addr + off;
        p->reth_rkey = w->rkey;
        p->reth_dma_len = w->length > off ? w->length - off : 0;
    } else {
        bool cas = w->opcode == IBV_WR_ATOMIC_CMP_AND_SWP;
        nic_pkt_address(qp, p, cas ? IB_OPCODE_RC_COMPARE_SWAP : IB_OPCODE_RC_FETCH_ADD,
                        w->first_psn, 0);
        p->atomic_va = w->remote_addr;
        p->atomic_rkey = w->rkey;
        p->atomic_swap_add = cas ? w->swap : w->compare_add;
        p->atomic_compare = cas ? w->compare_add : 0;
    }
    p->xrc_srqn = w->xrc_srqn;
    p->ack_req = 1;
    nic_stage_push(&e->req_stage, p, true);
}

/* ---------------------------------------------------------------- state handlers */

/* Local checks of a new WQE (rxe: the lkey checks happen as the payload is
 * copied; mlx5 reports them as a local protection error). */
static enum ibv_wc_status check_wqe(struct nic_qp *qp, const struct nic_send_wqe *w)
{
    if (w->length > NIC_MAX_MSG_BYTES)
        return IBV_WC_LOC_LEN_ERR;
    /* UD: one packet per message.  The mlx5 provider posts an oversize UD
     * WR without complaint (providers/mlx5/qp.c _mlx5_post_send: the
     * IBV_QPT_UD case only writes the datagram segment); the device then
     * completes it in error: local length error, no packet emitted.  (rxe
     * instead follows IBA C10-93.1.1 and fakes a successful send.) */
    if (qp->init.qp_type == IBV_QPT_UD && w->length > qp->eng->mtu_bytes)
        return IBV_WC_LOC_LEN_ERR;
    if (w->send_flags & IBV_SEND_INLINE)
        return IBV_WC_SUCCESS;
    int access = nic_wqe_is_rd_atomic(w) ? IBV_ACCESS_LOCAL_WRITE : 0;
    for (uint32_t i = 0; i < w->num_sge; i++) {
        const struct nic_sge *s = &w->sge[i];
        if (s->length && nic_mr_check(qp->nic, s->lkey, qp->init.pd, s->addr, s->length, access,
                                      NULL) != NIC_MR_OK)
            return IBV_WC_LOC_PROT_ERR;
    }
    return IBV_WC_SUCCESS;
}

/* The QP context the send engine waited for arrived (ctx.c). */
static void req_ctx_ready(struct sim *sim, void *a, void *b)
{
    (void)sim;
    (void)b;
    struct nic_qp *qp = a;
    if (!qp->eng->dead)
        req_run(qp);
    nic_qp_put(qp);
}

static enum nic_req_state req_next_wqe(struct nic_qp *qp)
{
    struct nic_qp_engine *e = qp->eng;
    if (!nic_qp_can_send(qp) || e->req_idx >= e->fetched)
        return NIC_REQ_IDLE;
    struct nic_send_wqe *w = nic_sq_wqe(qp, e->req_idx);
    if (w->state == NIC_WQE_ERROR)
        return NIC_REQ_STOPPED;
    if (w->state == NIC_WQE_DONE) { /* completed by a late ACK while being resent */
        e->req_idx++;
        e->req_pkt = 0;
        qp->sq_next = e->req_idx;
        return NIC_REQ_NEXT_WQE;
    }
    if (qp->state == IBV_QPS_SQD && w->state == NIC_WQE_QUEUED)
        return NIC_REQ_IDLE; /* drained: no new WQE starts in SQD */
    uint32_t max_rd = qp->attr.max_rd_atomic ? qp->attr.max_rd_atomic : 1; /* mlx5: log2 0 = 1 */
    if ((nic_wqe_is_rd_atomic(w) && e->rd_outstanding >= max_rd) ||
        ((w->send_flags & IBV_SEND_FENCE) && e->rd_outstanding))
        return NIC_REQ_WAIT_RD_ATOMIC;
    sim_time_t now = sim_now(qp->nic->sim);
    if (now < e->req_busy_until) { /* the send engine is still on the previous WQE */
        sim_schedule_at(qp->nic->sim, &e->req_ev, e->req_busy_until);
        return NIC_REQ_WQE_PROC;
    }
    nic_qp_get(qp); /* held by the context fetch if it misses */
    if (!nic_ctx_access(qp->nic, qp->qpn, req_ctx_ready, qp, NULL))
        return NIC_REQ_WAIT_CTX;
    nic_qp_put(qp);
    e->req_busy_until = sim_time_add(now, qp->nic->p.wqe_proc_ps);
    return req_start_wqe(qp);
}

/* The send engine takes WQE req_idx: checks and PSNs of a new WQE, or
 * resume a retried one. */
static enum nic_req_state req_start_wqe(struct nic_qp *qp)
{
    struct nic_qp_engine *e = qp->eng;
    if (!nic_qp_can_send(qp) || e->req_idx >= e->fetched)
        return NIC_REQ_IDLE;
    struct nic_send_wqe *w = nic_sq_wqe(qp, e->req_idx);
    if (w->state == NIC_WQE_QUEUED) {
        enum ibv_wc_status st = check_wqe(qp, w);
        if (st != IBV_WC_SUCCESS) {
            nic_comp_fail_wqe(qp, e->req_idx, st);
            return NIC_REQ_STOPPED;
        }
        uint32_t n = nic_wqe_npkts(w, e->mtu_bytes);
        w->first_psn = e->next_psn;
        w->last_psn = nic_psn_add(e->next_psn, n - 1);
        e->next_psn = nic_psn_add(e->next_psn, n);
        e->req_pkt = 0;
        if (w->signaled || nic_wqe_is_rd_atomic(w)) /* kept until its completion needs it */
            nic_wqe_started(qp->nic, qp->qpn, w->last_psn);
    }
    if (nic_tr(qp->nic)) /* the send engine on this WQE: its PSNs [psn, val] */
        nic_trace_span(
            qp->nic, TRK_REQ, sim_now(qp->nic->sim), qp->nic->p.wqe_proc_ps,
            &(struct trace_rec){.qpn = qp->qpn,
                                .addr = e->req_idx,
                                .psn = w->first_psn,
                                .val = w->last_psn,
                                .opcode = (uint8_t)w->opcode,
                                .len = w->length,
                                .flags = w->state == NIC_WQE_RETRY ? TRACE_F_RETRY : 0,
                                .where = w->state == NIC_WQE_RETRY ? "wqe (again)" : "wqe"});
    w->state = NIC_WQE_STARTED;
    if (nic_wqe_is_rd_atomic(w)) {
        e->rd_outstanding++;
        nic_rdctx_started(qp->nic, qp->qpn, w->first_psn); /* response state, on chip */
    }
    return NIC_REQ_SEGMENT;
}

static void req_offer(struct nic_qp *qp)
{
    struct nic_stage *s = &qp->eng->req_stage;
    if (nic_stage_head_ready(s))
        nic_tx_src_ready(qp->nic, &qp->eng->req_src);
}

static enum nic_req_state req_segment(struct nic_qp *qp)
{
    struct nic_qp_engine *e = qp->eng;
    if (!nic_qp_can_send(qp))
        return NIC_REQ_IDLE;
    struct nic_send_wqe *w = nic_sq_wqe(qp, e->req_idx);
    if (w->state == NIC_WQE_DONE) { /* its responses came while it waited for room */
        e->req_idx++;
        e->req_pkt = 0;
        qp->sq_next = e->req_idx;
        return NIC_REQ_NEXT_WQE;
    }
    if (nic_wqe_is_rd_atomic(w)) {
        if (nic_stage_full(&e->req_stage, 0)) {
            req_offer(qp);
            return NIC_REQ_WAIT_SPACE;
        }
        build_rd_atomic(qp, w, wqe_is_atomic(w) ? 0 : e->req_pkt);
    } else {
        uint32_t n = nic_wqe_npkts(w, e->mtu_bytes);
        while (e->req_pkt < n) {
            uint32_t off = e->req_pkt * e->mtu_bytes;
            uint32_t plen = w->length > off ? w->length - off : 0;
            if (plen > e->mtu_bytes)
                plen = e->mtu_bytes;
            if (nic_stage_full(&e->req_stage, plen)) {
                req_offer(qp);
                return NIC_REQ_WAIT_SPACE;
            }
            build_send_write(qp, w, e->req_pkt, n);
            e->req_pkt++;
        }
    }
    w->state = NIC_WQE_SENT;
    e->req_idx++;
    e->req_pkt = 0;
    qp->sq_next = e->req_idx;
    if (!nic_qp_reliable(qp))
        nic_comp_advance(qp); /* its packets may have left already */
    req_offer(qp);
    return NIC_REQ_NEXT_WQE;
}

/* ---------------------------------------------------------------- dispatcher */

static void req_dispatch(struct nic_qp *qp)
{
    struct nic_qp_engine *e = qp->eng;
    /* a kick wakes the parking states that wait for something external */
    switch (e->req_state) {
    case NIC_REQ_IDLE:
    case NIC_REQ_WAIT_RD_ATOMIC:
    case NIC_REQ_WAIT_CTX:
        e->req_state = NIC_REQ_NEXT_WQE;
        break;
    case NIC_REQ_WAIT_SPACE:
        e->req_state = NIC_REQ_SEGMENT;
        break;
    default:
        break;
    }
    for (;;) {
        enum nic_req_state next;
        switch (e->req_state) {
        case NIC_REQ_NEXT_WQE:
            next = req_next_wqe(qp);
            break;
        case NIC_REQ_SEGMENT:
            next = req_segment(qp);
            break;
        default: /* IDLE, WQE_PROC, WAIT_*, STOPPED: wait for an event */
            return;
        }
        if (e->req_state == NIC_REQ_STOPPED || e->dead)
            return; /* a nested error stopped the requester */
        e->req_state = next;
    }
}

static void req_run(struct nic_qp *qp)
{
    struct nic_qp_engine *e = qp->eng;
    if (e->dead)
        return;
    if (nic_qp_pers(qp)) { /* EFA SRD / 1RMA personality: srd.c, onerma.c */
        nic_pers_kick(qp);
        return;
    }
    if (e->req_running) {
        e->req_again = true;
        return;
    }
    e->req_running = true;
    do {
        e->req_again = false;
        req_dispatch(qp);
    } while (e->req_again && !e->dead);
    e->req_running = false;
}

void nic_req_kick(struct nic_qp *qp)
{
    req_run(qp);
}

static void req_ev_fn(struct sim *sim, struct sim_event *ev)
{
    (void)sim;
    struct nic_qp *qp = ev->ctx;
    if (qp->eng->req_state == NIC_REQ_WQE_PROC) {
        qp->eng->req_state = NIC_REQ_NEXT_WQE;
        req_run(qp);
    }
}

static void rnr_ev_fn(struct sim *sim, struct sim_event *ev)
{
    (void)sim;
    struct nic_qp *qp = ev->ctx;
    if (qp->eng->req_state == NIC_REQ_WAIT_RNR) {
        qp->eng->req_state = NIC_REQ_NEXT_WQE;
        req_run(qp);
    }
}

/* ---------------------------------------------------------------- hooks for the other engines */

void nic_req_init(struct nic_qp *qp)
{
    struct nic_qp_engine *e = qp->eng;
    if (!e->req_src.qp) {
        sim_event_init(&e->req_ev, req_ev_fn, qp, "nic.req");
        sim_event_init(&e->rnr_ev, rnr_ev_fn, qp, "nic.rnr");
        e->req_src.qp = qp;
        e->req_src.stage = &e->req_stage;
        e->req_src.kind = NIC_TXSRC_REQ;
        nic_stage_init(&e->req_stage);
    }
    e->req_state = NIC_REQ_IDLE;
    e->fetch_issued = e->fetched = e->req_idx = qp->sq_comp;
    e->req_pkt = 0;
    e->rd_outstanding = 0;
    nic_rdctx_qp_idle(qp->nic, qp->qpn); /* a reset QP has no READ tracker */
    e->req_busy_until = 0;
}

void nic_req_stop(struct nic_qp *qp)
{
    struct nic_qp_engine *e = qp->eng;
    sim_cancel(qp->nic->sim, &e->req_ev);
    sim_cancel(qp->nic->sim, &e->rnr_ev);
    nic_stage_clear(qp->nic, &e->req_stage);
    e->req_state = NIC_REQ_STOPPED;
}

void nic_req_on_tx(struct nic_qp *qp, const struct pkt *p)
{
    struct nic_qp_engine *e = qp->eng;
    uint32_t hi = p->psn;
    if (nic_opcode_rc_op(p->opcode) == IB_OPCODE_RC_RDMA_READ_REQUEST &&
        p->reth_dma_len > e->mtu_bytes)
        hi = nic_psn_add(hi, (p->reth_dma_len + e->mtu_bytes - 1) / e->mtu_bytes - 1);
    if (nic_psn_diff(hi, e->tx_psn_hi) > 0)
        e->tx_psn_hi = hi;
    nic_comp_on_tx(qp);
    if (e->req_state == NIC_REQ_WAIT_SPACE)
        req_run(qp);
}

void nic_req_rewind(struct nic_qp *qp, uint32_t psn)
{
    struct nic_qp_engine *e = qp->eng;
    uint64_t end = e->req_idx;
    if (end < qp->sq_tail && nic_sq_wqe(qp, end)->state == NIC_WQE_STARTED)
        end++;
    uint64_t i = qp->sq_comp;
    while (i < end && nic_psn_diff(psn, nic_sq_wqe(qp, i)->last_psn) > 0)
        i++;
    if (i >= end)
        return; /* nothing sent at or after that PSN */
    for (uint64_t j = i; j < end; j++) {
        struct nic_send_wqe *w = nic_sq_wqe(qp, j);
        if (w->state == NIC_WQE_STARTED || w->state == NIC_WQE_SENT) {
            if (nic_wqe_is_rd_atomic(w))
                e->rd_outstanding--;
            w->state = NIC_WQE_RETRY;
        }
    }
    struct nic_send_wqe *w = nic_sq_wqe(qp, i);
    int32_t k = nic_psn_diff(psn, w->first_psn);
    e->req_idx = i;
    e->req_pkt = (k > 0 && !wqe_is_atomic(w)) ? (uint32_t)k : 0;
    qp->sq_next = i;
    e->req_epoch++;
    sim_cancel(qp->nic->sim, &e->req_ev);
    nic_stage_clear(qp->nic, &e->req_stage);
    e->tx_psn_hi = nic_psn_add(nic_psn_add(w->first_psn, e->req_pkt), NIC_PSN_MASK);
    e->req_state = NIC_REQ_NEXT_WQE;
    if (nic_tr(qp->nic)) /* go back N: resend from psn (WQE index addr) */
        nic_trace_instant(
            qp->nic, TRK_COMP,
            &(struct trace_rec){.qpn = qp->qpn, .psn = psn, .addr = i, .where = "go back N"});
}
