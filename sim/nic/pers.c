/* Transport personalities: what the EFA SRD engine (srd.c) and the 1RMA
 * engine (onerma.c) share (pers.h describes the split with the IB model).
 *
 * Hooks from the IB engines (nic_priv.h):
 *   nic_pers_kick    req.c: WQEs were fetched / the QP went to RTS
 *   nic_pers_rx      nic.c: a packet with a personality opcode (0xc0..)
 *   nic_pers_on_tx   nic.c: the TX engine took one of our packets
 *   nic_pers_stop    qp.c:  RESET / ERR / destroy
 *   nic_pers_free    qp.c:  the QP's memory goes
 *
 * Out-of-order completion and the send queue.  The send queue is a ring
 * [sq_comp, sq_tail): an op that completes before older ones gets its CQE
 * at once and its WQE is marked DONE; sq_comp moves over the DONE prefix.
 * A completed WQE's slot is free at once, in any order, as the EFA
 * provider frees it (rdma-core providers/efa: a send slot is a count,
 * wqe_posted - wqe_completed against the queue size, and the WQE's index
 * goes back to a free pool when its completion is taken): when a post
 * finds the ring full, nic_pers_sq_reclaim squeezes the DONE WQEs out of
 * [sq_comp, req_idx) (only started WQEs can be DONE) and renumbers the
 * ops that refer to the WQEs it moved.  1RMA has no public provider; it
 * frees the same way.  (EFA counts a slot busy until the program polls
 * the CQE; here it is free when the CQE is written, as the IB model frees
 * its in-order slots.)  When the QP stops, the DONE WQEs are squeezed out
 * the same way so that the flush of a QP entering ERR reports exactly the
 * WQEs that did not complete, in posting order.
 *
 * Sequence numbers (SRD) / op tags (1RMA) start at the QP's sq_psn and
 * travel in the BTH PSN; ops in flight span at most NIC_PERS_WINDOW of
 * them, so a late response always finds a slot that either is its op or
 * says "not in flight" (the slot's seq differs). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pers.h"

/* ---------------------------------------------------------------- state */

static void eng_ev_fn(struct sim *sim, struct sim_event *ev);
static void timer_ev_fn(struct sim *sim, struct sim_event *ev);

struct nic_pers *nic_pers_get(struct nic_qp *qp)
{
    struct nic_qp_engine *e = qp->eng;
    if (e->pers)
        return e->pers;
    struct nic_pers *ps = calloc(1, sizeof(*ps));
    if (!ps)
        abort();
    ps->qp = qp;
    nic_stage_init(&ps->req_stage);
    nic_stage_init(&ps->resp_stage);
    ps->req_src = (struct nic_txsrc){.qp = qp, .stage = &ps->req_stage, .kind = NIC_TXSRC_PERS};
    ps->resp_src = (struct nic_txsrc){.qp = qp, .stage = &ps->resp_stage, .kind = NIC_TXSRC_PERS};
    char name[64];
    snprintf(name, sizeof(name), "nic%u.qp%u.paths", qp->nic->node_id, qp->qpn);
    sim_rng_stream(qp->nic->sim, &ps->rng, name);
    sim_event_init(&ps->eng_ev, eng_ev_fn, qp, "nic.pers.engine");
    sim_event_init(&ps->timer_ev, timer_ev_fn, qp, "nic.pers.timer");
    for (unsigned i = 0; i < NIC_PERS_WINDOW; i++)
        ps->ops[i].deadline_ps = SIM_TIME_NEVER;
    e->pers = ps;
    return ps;
}

void nic_pers_free(struct nic_qp *qp)
{
    if (qp->eng->pers) {
        nic_stage_fini(&qp->eng->pers->req_stage);
        nic_stage_fini(&qp->eng->pers->resp_stage);
    }
    free(qp->eng->pers);
    qp->eng->pers = NULL;
}

static void free_pkt_list(struct nic *nic, struct pkt *p)
{
    while (p) {
        struct pkt *n = p->next;
        pkt_free(nic->pool, p);
        p = n;
    }
}

void nic_pers_stop(struct nic_qp *qp)
{
    struct nic_pers *ps = qp->eng->pers;
    struct nic *nic = qp->nic;
    sim_cancel(nic->sim, &ps->eng_ev);
    sim_cancel(nic->sim, &ps->timer_ev);
    nic_stage_clear(nic, &ps->req_stage);
    nic_stage_clear(nic, &ps->resp_stage);
    free_pkt_list(nic, ps->pend_head);
    ps->pend_head = ps->pend_tail = NULL;
    for (unsigned i = 0; i < NIC_PERS_WINDOW; i++) {
        ps->ops[i].state = NIC_POP_FREE;
        ps->ops[i].deadline_ps = SIM_TIME_NEVER;
    }
    ps->inflight = 0;
    ps->window_bytes = 0;
    ps->busy_until = 0;
    ps->tx_init = ps->rx_init = false;
    ps->resend_any = false;
    /* squeeze the WQEs that completed out of order out of the queue,
     * keeping the others in posting order at its tail */
    uint64_t w = qp->sq_tail;
    for (uint64_t i = qp->sq_tail; i-- > qp->sq_comp;) {
        struct nic_send_wqe *q = nic_sq_wqe(qp, i);
        if (q->state == NIC_WQE_DONE)
            continue;
        w--;
        if (w != i)
            nic_sq_move(nic_sq_wqe(qp, w), q);
    }
    qp->sq_comp = w;
    if (qp->sq_next < w)
        qp->sq_next = w;
}

bool nic_pers_sq_reclaim(struct nic_qp *qp)
{
    struct nic_pers *ps = qp->eng->pers;
    if (!ps)
        return false;
    uint64_t lim = qp->eng->req_idx < qp->sq_tail ? qp->eng->req_idx : qp->sq_tail;
    uint64_t w = lim;
    for (uint64_t i = lim; i-- > qp->sq_comp;) {
        struct nic_send_wqe *q = nic_sq_wqe(qp, i);
        if (q->state == NIC_WQE_DONE)
            continue;
        w--;
        if (w == i)
            continue;
        nic_sq_move(nic_sq_wqe(qp, w), q);
        for (unsigned k = 0; k < NIC_PERS_WINDOW; k++)
            if (ps->ops[k].state != NIC_POP_FREE && ps->ops[k].wqe_idx == i)
                ps->ops[k].wqe_idx = w;
    }
    if (w == qp->sq_comp)
        return false;
    qp->sq_comp = w;
    if (qp->sq_next < w)
        qp->sq_next = w;
    return true;
}

/* ---------------------------------------------------------------- the send side */

static void tx_init(struct nic_pers *ps)
{
    ps->seq_next = ps->seq_lo = ps->qp->attr.sq_psn & NIC_PSN_MASK;
    ps->inflight = 0;
    ps->window_bytes = 0;
    ps->tx_init = true;
}

void nic_pers_kick(struct nic_qp *qp)
{
    struct nic_pers *ps = nic_pers_get(qp);
    if (qp->eng->dead)
        return;
    if (ps->running) {
        ps->again = true;
        return;
    }
    if (!ps->tx_init) {
        if (!nic_qp_can_send(qp))
            return;
        tx_init(ps);
    }
    ps->running = true;
    do {
        ps->again = false;
        if (nic_pers_transport(qp) == NIC_TRANSPORT_EFA_SRD)
            nic_srd_kick(ps);
        else
            nic_onerma_kick(ps);
    } while (ps->again && !qp->eng->dead && ps->tx_init);
    ps->running = false;
}

static void eng_ev_fn(struct sim *sim, struct sim_event *ev)
{
    (void)sim;
    nic_pers_kick(ev->ctx);
}

struct nic_send_wqe *nic_pers_next_wqe(struct nic_pers *ps)
{
    struct nic_qp *qp = ps->qp;
    struct nic_qp_engine *e = qp->eng;
    if (!nic_qp_can_send(qp) || qp->state == IBV_QPS_SQD || e->req_idx >= e->fetched)
        return NULL; /* nothing fetched; SQD starts no new WQE */
    return nic_sq_wqe(qp, e->req_idx);
}

bool nic_pers_can_start(struct nic_pers *ps)
{
    struct nic_qp *qp = ps->qp;
    if (ps->inflight && nic_psn_diff(ps->seq_next, ps->seq_lo) >= NIC_PERS_WINDOW)
        return false; /* the span of sequence numbers in flight is full */
    if (nic_stage_full(&ps->req_stage, PKT_MAX_PAYLOAD_BYTES))
        return false; /* nic_pers_on_tx kicks again */
    sim_time_t now = sim_now(qp->nic->sim);
    if (now < ps->busy_until) { /* the send engine is on the previous WQE (wqe_proc) */
        if (!sim_event_pending(&ps->eng_ev))
            sim_schedule_at(qp->nic->sim, &ps->eng_ev, ps->busy_until);
        return false;
    }
    return true;
}

struct nic_pers_op *nic_pers_op_new(struct nic_pers *ps, uint64_t idx)
{
    struct nic_qp *qp = ps->qp;
    struct nic_pers_op *op = nic_pers_op(ps, ps->seq_next);
    memset(op, 0, sizeof(*op));
    op->wqe_idx = idx;
    op->seq = ps->seq_next;
    op->state = NIC_POP_STAGED;
    op->deadline_ps = SIM_TIME_NEVER;
    ps->seq_next = nic_psn_add(ps->seq_next, 1);
    ps->inflight++;
    ps->busy_until = sim_time_add(sim_now(qp->nic->sim), qp->nic->p.wqe_proc_ps);
    nic_sq_wqe(qp, idx)->state = NIC_WQE_STARTED;
    nic_sq_wqe(qp, idx)->first_psn = nic_sq_wqe(qp, idx)->last_psn = op->seq;
    return op;
}

struct nic_pers_op *nic_pers_find(struct nic_pers *ps, uint32_t seq)
{
    if (!ps->tx_init || !ps->inflight || nic_psn_diff(seq, ps->seq_lo) < 0 ||
        nic_psn_diff(seq, ps->seq_next) >= 0)
        return NULL;
    struct nic_pers_op *op = nic_pers_op(ps, seq);
    return op->state != NIC_POP_FREE && op->seq == seq ? op : NULL;
}

/* WQE `idx` completes with `st`: a CQE if signalled or failed, marked
 * DONE, and the send queue's DONE prefix retired. */
static void complete_wqe(struct nic_qp *qp, uint64_t idx, enum ibv_wc_status st)
{
    struct nic_send_wqe *w = nic_sq_wqe(qp, idx);
    if (st != IBV_WC_SUCCESS || w->signaled) {
        struct ibv_wc wc = {
            .wr_id = w->wr_id,
            .status = st,
            .opcode = nic_wc_opcode(w->opcode),
            .vendor_err = nic_vendor_err(st),
            .byte_len = w->length,
            .qp_num = qp->qpn,
        };
        nic_cqe_write(qp->nic, qp->init.send_cq, &wc, false);
    }
    w->state = NIC_WQE_DONE;
    qp->nic->cnt.wqes_completed++;
    while (qp->sq_comp < qp->sq_tail && nic_sq_wqe(qp, qp->sq_comp)->state == NIC_WQE_DONE)
        qp->sq_comp++;
    if (qp->sq_next < qp->sq_comp)
        qp->sq_next = qp->sq_comp;
}

void nic_pers_op_done(struct nic_pers *ps, struct nic_pers_op *op, enum ibv_wc_status st)
{
    struct nic_qp *qp = ps->qp;
    uint64_t idx = op->wqe_idx;
    op->state = NIC_POP_FREE;
    op->deadline_ps = SIM_TIME_NEVER;
    ps->window_bytes -= op->bytes;
    ps->inflight--;
    while (ps->seq_lo != ps->seq_next && nic_pers_op(ps, ps->seq_lo)->state == NIC_POP_FREE)
        ps->seq_lo = nic_psn_add(ps->seq_lo, 1);
    complete_wqe(qp, idx, st);
    nic_pers_kick(qp); /* room for another op */
}

/* A WQE that fails before it becomes an op (local checks). */
void nic_pers_fail_wqe(struct nic_pers *ps, uint64_t idx, enum ibv_wc_status st)
{
    nic_sq_wqe(ps->qp, idx)->state = NIC_WQE_STARTED;
    complete_wqe(ps->qp, idx, st);
}

enum ibv_wc_status nic_pers_check_sges(struct nic_qp *qp, const struct nic_send_wqe *w, int access)
{
    if (w->send_flags & IBV_SEND_INLINE)
        return IBV_WC_SUCCESS;
    for (uint32_t i = 0; i < w->num_sge; i++) {
        const struct nic_sge *s = &w->sge[i];
        if (s->length && nic_mr_check(qp->nic, s->lkey, qp->init.pd, s->addr, s->length, access,
                                      NULL) != NIC_MR_OK)
            return IBV_WC_LOC_PROT_ERR;
    }
    return IBV_WC_SUCCESS;
}

/* ---------------------------------------------------------------- packets */

struct pkt *nic_pers_pkt(struct nic_pers *ps, uint8_t opcode, uint32_t psn, uint32_t payload_len,
                         uint32_t dst_node, uint32_t dst_qpn)
{
    struct nic_qp *qp = ps->qp;
    struct pkt *p = pkt_alloc(qp->nic->pool);
    nic_pkt_address(qp, p, opcode, psn, payload_len);
    p->dst_node = dst_node;
    p->dest_qpn = dst_qpn & NIC_PSN_MASK;
    /* per-packet path choice: ECMP hashes the UDP source port with the
     * addresses, so a fresh port per packet sprays a QP's packets over
     * every equal-cost path (SRD); the RoCEv2 source port range
     * 0xc000..0xffff as the kernel uses */
    uint64_t r = sim_rng_u64(&ps->rng);
    p->udp_sport = (uint16_t)(0xc000u | (r & 0x3fffu));
    return p;
}

static void offer(struct nic *nic, struct nic_txsrc *src)
{
    struct nic_stage *s = src->stage;
    if (nic_stage_head_ready(s))
        nic_tx_src_ready(nic, src);
}

void nic_pers_send_req(struct nic_pers *ps, struct pkt *p, const struct nic_send_wqe *w)
{
    struct nic_qp *qp = ps->qp;
    struct nic *nic = qp->nic;
    uint32_t len = p->payload_len;
    if (!len || !w) {
        nic_stage_push(&ps->req_stage, p, true);
    } else if (w->send_flags & IBV_SEND_INLINE) {
        if (!nic->no_payload)
            memcpy(p->payload, w->inline_data, len);
        nic_stage_push(&ps->req_stage, p, true);
    } else {
        /* the payload is read from host memory by its own DMA read, each
         * time the packet is (re)built */
        struct nic_op *op = nic_op_alloc(nic, NIC_OP_REQ_PAYLOAD, qp);
        op->pkt = p;
        nic_sges_to_segs(nic, w->sge, w->num_sge, 0, len, op);
        nic_stage_push(&ps->req_stage, p, false);
        nic_mem_read(nic, op, PCIE_K_PAYLOAD_RD, len, nic_payload_fetched, &ps->req_src);
        return;
    }
    offer(nic, &ps->req_src);
}

void nic_pers_send_resp(struct nic_pers *ps, struct pkt *p)
{
    struct nic *nic = ps->qp->nic;
    if (ps->pend_head || nic_stage_full(&ps->resp_stage, p->payload_len)) {
        p->next = NULL;
        if (ps->pend_tail)
            ps->pend_tail->next = p;
        else
            ps->pend_head = p;
        ps->pend_tail = p;
        return;
    }
    nic_stage_push(&ps->resp_stage, p, true);
    offer(nic, &ps->resp_src);
}

static void resp_fetched(struct sim *sim, void *a, void *b)
{
    (void)sim;
    (void)b;
    struct nic_op *op = a;
    struct nic *nic = op->nic;
    if (nic_op_stale(op)) {
        pkt_free(nic->pool, op->pkt);
    } else {
        nic_copy_from_host(nic, op, op->pkt->payload);
        nic_pers_send_resp(op->qp->eng->pers, op->pkt);
    }
    nic_op_free(op);
}

/* A DMA read does not pass an earlier (relaxed) posted write (dma.c): a
 * READ after a WRITE returns the written bytes. */
static void resp_read_done(struct sim *sim, void *a, void *b)
{
    struct nic_op *op = a;
    if (!nic_dma_wait_relaxed(op->nic, resp_fetched, a, b))
        resp_fetched(sim, a, b);
}

void nic_pers_send_resp_dma(struct nic_pers *ps, struct pkt *p, uint8_t *host, uint32_t key,
                            uint32_t len)
{
    struct nic_qp *qp = ps->qp;
    struct nic *nic = qp->nic;
    if (!len) {
        nic_pers_send_resp(ps, p);
        return;
    }
    struct nic_op *op = nic_op_alloc(nic, NIC_OP_RESP_PAYLOAD, qp);
    op->pkt = p;
    op->n_seg = 1;
    op->seg[0] = (struct nic_seg){host, key, len};
    nic_mem_read(nic, op, PCIE_K_PAYLOAD_RD, len, resp_read_done, NULL);
}

/* Placement goes through the DMA ordering model (dma.c): strict or
 * relaxed as the NIC / the MRs say, the bytes copied when they become
 * visible; the packet and the op are freed there.  Tagged with the
 * sequence number / op tag as PSN. */
static void place_op(struct nic_qp *qp, struct nic_op *op, const char *where)
{
    nic_dma_place(qp->nic, op, op->pkt->payload, op->pkt->payload_len, qp->qpn, op->pkt->psn,
                  where);
}

void nic_pers_place_sges(struct nic_qp *qp, struct pkt *p, const struct nic_sge *sge,
                         uint32_t num_sge, const char *where)
{
    if (!p->payload_len) {
        pkt_free(qp->nic->pool, p);
        return;
    }
    struct nic_op *op = nic_op_alloc(qp->nic, NIC_OP_PLACE, NULL);
    op->pkt = p;
    nic_sges_to_segs(qp->nic, sge, num_sge, 0, p->payload_len, op);
    place_op(qp, op, where);
}

void nic_pers_place(struct nic_qp *qp, struct pkt *p, uint8_t *host, uint32_t key,
                    const char *where)
{
    if (!p->payload_len) {
        pkt_free(qp->nic->pool, p);
        return;
    }
    struct nic_op *op = nic_op_alloc(qp->nic, NIC_OP_PLACE, NULL);
    op->pkt = p;
    op->n_seg = 1;
    op->seg[0] = (struct nic_seg){host, key, p->payload_len};
    place_op(qp, op, where);
}

void nic_pers_on_tx(struct nic_qp *qp, struct nic_txsrc *src, const struct pkt *p)
{
    struct nic_pers *ps = qp->eng->pers;
    struct nic *nic = qp->nic;
    if (src == &ps->resp_src) {
        const struct nic_opcode_info *info = nic_opcode(p->opcode);
        if (info->mask & NIC_OPF_ACK) {
            if (nic_pers_nak(p->aeth_syndrome))
                nic->cnt.naks_tx++;
            else
                nic->cnt.acks_tx++;
        }
        while (ps->pend_head && !nic_stage_full(&ps->resp_stage, ps->pend_head->payload_len)) {
            struct pkt *q = ps->pend_head;
            ps->pend_head = q->next;
            if (!ps->pend_head)
                ps->pend_tail = NULL;
            q->next = NULL;
            nic_stage_push(&ps->resp_stage, q, true);
        }
        offer(nic, &ps->resp_src);
        return;
    }
    if (nic_pers_transport(qp) == NIC_TRANSPORT_EFA_SRD)
        nic_srd_on_tx(ps, p);
    nic_pers_kick(qp); /* room in the request ring */
}

/* ---------------------------------------------------------------- timer */

void nic_pers_timer_at(struct nic_pers *ps, sim_time_t t)
{
    struct sim_event *ev = &ps->timer_ev;
    if (t == SIM_TIME_NEVER)
        return;
    if (!sim_event_pending(ev) || ev->time > t)
        sim_schedule_at(ps->qp->nic->sim, ev, t);
}

/* Expired ops go to the engine's timer function; then the timer is set
 * for the earliest deadline left (lazy: deadlines that moved later since
 * it was armed only cost an early wake-up). */
static void timer_ev_fn(struct sim *sim, struct sim_event *ev)
{
    struct nic_qp *qp = ev->ctx;
    struct nic_pers *ps = qp->eng->pers;
    if (!ps->tx_init)
        return;
    if (nic_pers_transport(qp) == NIC_TRANSPORT_EFA_SRD)
        nic_srd_timer(ps);
    else
        nic_onerma_timer(ps);
    if (!ps->tx_init)
        return;
    sim_time_t next = SIM_TIME_NEVER, now = sim_now(sim);
    for (uint32_t s = ps->seq_lo; s != ps->seq_next; s = nic_psn_add(s, 1)) {
        const struct nic_pers_op *op = nic_pers_op(ps, s);
        if (op->state != NIC_POP_FREE && op->deadline_ps < next)
            next = op->deadline_ps;
    }
    if (next != SIM_TIME_NEVER)
        nic_pers_timer_at(ps, next > now ? next : now);
}

/* ---------------------------------------------------------------- receive */

enum ibv_wc_status nic_pers_nak_status(uint8_t syndrome)
{
    /* the statuses the EFA provider reports for the remote errors
     * (rdma-core providers/efa/verbs.c to_ibv_status): bad length ->
     * REM_INV_REQ, RNR -> RNR_RETRY_EXC; access -> REM_ACCESS as IB */
    if ((syndrome & NIC_AETH_TYPE_MASK) == NIC_AETH_RNR_NAK)
        return IBV_WC_RNR_RETRY_EXC_ERR;
    switch (syndrome) {
    case NIC_AETH_NAK_INV_REQ:
        return IBV_WC_REM_INV_REQ_ERR;
    case NIC_AETH_NAK_REM_ACC:
        return IBV_WC_REM_ACCESS_ERR;
    default:
        return IBV_WC_REM_OP_ERR;
    }
}

void nic_pers_rx(struct nic_qp *qp, struct pkt *p)
{
    struct nic_pers *ps = nic_pers_get(qp);
    struct nic *nic = qp->nic;
    const struct nic_opcode_info *info = nic_opcode(p->opcode);
    bool srd = nic_pers_transport(qp) == NIC_TRANSPORT_EFA_SRD;
    const char *why = NULL;
    if (srd != (p->opcode < NIC_OPCODE_ONERMA_READ_REQUEST))
        why = "nic: packet of the other personality";
    else if ((info->mask & NIC_OPF_REQ) ? !nic_qp_can_receive(qp) : !nic_qp_can_send(qp))
        why = (info->mask & NIC_OPF_REQ) ? "nic: QP not receiving" : "nic: QP not sending";
    if (why) {
        nic->cnt.rx_drops++;
        nic_trace_pkt(nic, TRACE_PKT_DROP, p, qp->qpn, why);
        pkt_free(nic->pool, p);
        return;
    }
    if ((info->mask & NIC_OPF_ACK) && (info->mask & NIC_OPF_RESP)) {
        if (nic_pers_nak(p->aeth_syndrome))
            nic->cnt.naks_rx++;
        else
            nic->cnt.acks_rx++;
    }
    if (srd) {
        if (!ps->rx_init)
            nic_srd_rx_init(ps);
        nic_srd_rx(ps, p);
    } else {
        nic_onerma_rx(ps, p);
    }
}
