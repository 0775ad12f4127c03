/* The completer: what comes back for the requester's packets - ACKs, NAKs,
 * read responses, atomic ACKs - turned into completions (rxe_comp.c is the
 * model).
 *
 * Per response packet (nic_comp_rx), by opcode:
 *
 *   ACKNOWLEDGE, syndrome ACK   every PSN up to the ACK's is acknowledged
 *                               (coalesced ACKs cover many packets)
 *   ACKNOWLEDGE, RNR NAK        PSNs before it acknowledged; wait the RNR
 *                               timer of the NAK, resend from its PSN;
 *                               rnr_retry times (7 = forever), then
 *                               IBV_WC_RNR_RETRY_EXC_ERR
 *   ACKNOWLEDGE, PSN seq. NAK   go back N from its PSN (counts against retry_cnt)
 *   ACKNOWLEDGE, other NAK      the WQE fails: invalid request ->
 *                               IBV_WC_REM_INV_REQ_ERR, remote access ->
 *                               IBV_WC_REM_ACCESS_ERR, remote operational ->
 *                               IBV_WC_REM_OP_ERR
 *   READ_RESPONSE_*             in PSN order: payload placed by a DMA write
 *                               into the READ's local SGEs; the last one
 *                               completes the READ
 *   ATOMIC_ACKNOWLEDGE          original value DMA-written to the local SGE
 *
 * Any response also acknowledges every PSN before its own (IBA 9.7.5.1.3).
 *
 * UC/UD have no responses: nic_comp_unreliable_tx completes a WQE when its
 * last packet leaves the NIC, and a failed UC/UD WQE puts the QP in SQE
 * (send queue flushed, receives go on) instead of ERR.
 *
 * Completion order (nic_comp_advance): WQEs complete strictly in posting
 * order from sq_comp: a SEND/WRITE when its last PSN is acknowledged, a
 * READ/atomic when its data placement is issued (the CQE write is issued
 * after it, and a CQE never passes an earlier data write, relaxed or
 * not - dma.c - so the CQE is visible after the data).  Signalled WQEs
 * get a CQE; a failed WQE always gets one, then the QP moves to ERR and
 * flushes the rest.
 *
 * Local ACK timeout (IBA 9.7.6.1.3): while a transmitted PSN is not
 * acknowledged a timer of 4.096 us * 2^timeout runs (timeout 0 = never),
 * restarted on every progress.  On expiry the requester goes back to the
 * oldest unacknowledged PSN; after retry_cnt expiries without progress the
 * oldest WQE completes with IBV_WC_RETRY_EXC_ERR.  The timer is lazy: its
 * deadline moves forward without touching the event queue, and the event
 * re-arms itself when it fires early. */
#include <string.h>

#include <rnicsim/rima.h>

#include "nic_priv.h"

enum ibv_wc_opcode nic_wc_opcode(enum ibv_wr_opcode op)
{
    if ((unsigned)op == (unsigned)IBV_WR_APPEND)
        return IBV_WC_APPEND;
    switch (op) {
    case IBV_WR_RDMA_WRITE:
    case IBV_WR_RDMA_WRITE_WITH_IMM:
        return IBV_WC_RDMA_WRITE;
    case IBV_WR_RDMA_READ:
        return IBV_WC_RDMA_READ;
    case IBV_WR_ATOMIC_CMP_AND_SWP:
        return IBV_WC_COMP_SWAP;
    case IBV_WR_ATOMIC_FETCH_AND_ADD:
        return IBV_WC_FETCH_ADD;
    default:
        return IBV_WC_SEND;
    }
}

/* mlx5 CQE error syndromes (mlx5 PRM, rdma-core mlx5dv.h MLX5_CQE_SYNDROME_*),
 * reported as vendor_err the way the mlx5 provider does. */
uint32_t nic_vendor_err(enum ibv_wc_status st)
{
    switch (st) {
    case IBV_WC_LOC_LEN_ERR:
        return 0x01;
    case IBV_WC_LOC_QP_OP_ERR:
        return 0x02;
    case IBV_WC_LOC_PROT_ERR:
        return 0x04;
    case IBV_WC_WR_FLUSH_ERR:
        return 0x05;
    case IBV_WC_BAD_RESP_ERR:
        return 0x10;
    case IBV_WC_LOC_ACCESS_ERR:
        return 0x11;
    case IBV_WC_REM_INV_REQ_ERR:
        return 0x12;
    case IBV_WC_REM_ACCESS_ERR:
        return 0x13;
    case IBV_WC_REM_OP_ERR:
        return 0x14;
    case IBV_WC_RETRY_EXC_ERR:
        return 0x15;
    case IBV_WC_RNR_RETRY_EXC_ERR:
        return 0x16;
    default:
        return 0;
    }
}

/* ---------------------------------------------------------------- timer */

static sim_time_t ack_timeout_ps(const struct nic_qp *qp)
{
    if (!qp->attr.timeout)
        return SIM_TIME_NEVER;
    return (sim_time_t)4096 * SIM_NS << qp->attr.timeout; /* IBA 9.7.6.1.3 */
}

static bool outstanding(const struct nic_qp_engine *e)
{
    return nic_psn_diff(e->tx_psn_hi, e->comp_psn) >= 0;
}

static void timer_arm(struct nic_qp *qp, sim_time_t deadline)
{
    struct nic_qp_engine *e = qp->eng;
    e->timer_deadline = deadline;
    if (deadline != SIM_TIME_NEVER &&
        (!sim_event_pending(&e->timer_ev) || e->timer_ev.time > deadline))
        sim_schedule_at(qp->nic->sim, &e->timer_ev, deadline);
}

void nic_comp_on_tx(struct nic_qp *qp)
{
    struct nic_qp_engine *e = qp->eng;
    if (!nic_qp_reliable(qp))
        return; /* UC/UD: nothing to wait for */
    if (e->timer_deadline == SIM_TIME_NEVER) {
        sim_time_t t = ack_timeout_ps(qp);
        if (t != SIM_TIME_NEVER)
            timer_arm(qp, sim_time_add(sim_now(qp->nic->sim), t));
    }
}

/* Every PSN before `upto` is acknowledged. */
static void ack_upto(struct nic_qp *qp, uint32_t upto)
{
    struct nic_qp_engine *e = qp->eng;
    if (nic_psn_diff(upto, e->comp_psn) <= 0)
        return;
    e->comp_psn = upto;
    e->gap_pending = false;
    e->retry_left = qp->attr.retry_cnt;
    e->rnr_left = qp->attr.rnr_retry;
    sim_time_t t = ack_timeout_ps(qp);
    if (outstanding(e) && t != SIM_TIME_NEVER)
        e->timer_deadline = sim_time_add(sim_now(qp->nic->sim), t); /* lazy: the event catches up */
    else
        e->timer_deadline = SIM_TIME_NEVER;
}

static void timer_ev_fn(struct sim *sim, struct sim_event *ev)
{
    struct nic_qp *qp = ev->ctx;
    struct nic_qp_engine *e = qp->eng;
    if (e->timer_deadline == SIM_TIME_NEVER || !nic_qp_can_send(qp))
        return;
    if (e->timer_deadline > sim_now(sim)) {
        sim_schedule_at(sim, &e->timer_ev, e->timer_deadline);
        return;
    }
    e->timer_deadline = SIM_TIME_NEVER;
    if (!outstanding(e))
        return;
    if (nic_tr(qp->nic))
        nic_trace_instant(qp->nic, TRK_COMP,
                          &(struct trace_rec){.qpn = qp->qpn,
                                              .psn = e->comp_psn,
                                              .val = e->retry_left,
                                              .where = "local ACK timeout"});
    if (e->retry_left == 0) {
        nic_comp_fail_wqe(qp, qp->sq_comp, IBV_WC_RETRY_EXC_ERR);
        return;
    }
    e->retry_left--;
    e->gap_pending = false;
    nic_req_rewind(qp, e->comp_psn);
    nic_req_kick(qp);
}

/* ---------------------------------------------------------------- completion */

static void write_send_cqe(struct nic_qp *qp, const struct nic_send_wqe *w, enum ibv_wc_status st)
{
    uint64_t idx = qp->sq_comp; /* w is the WQE at the head of the send queue */
    struct ibv_wc wc = {
        .wr_id = w->wr_id,
        .status = st,
        .opcode = nic_wc_opcode(w->opcode),
        .vendor_err = nic_vendor_err(st),
        .byte_len = w->length,
        .qp_num = qp->qpn,
    };
    nic_cqe_write_wqe(qp->nic, qp->init.send_cq, &wc, idx);
}

void nic_comp_advance(struct nic_qp *qp)
{
    struct nic_qp_engine *e = qp->eng;
    while (qp->sq_comp < qp->sq_tail) {
        /* w is not used after its CQE is written: a consumer woken by the
         * CQE may post, and a post may grow the ring and move the slot */
        struct nic_send_wqe *w = nic_sq_wqe(qp, qp->sq_comp);
        if (w->state == NIC_WQE_ERROR) {
            w->state = NIC_WQE_DONE;
            if (nic_wqe_is_rd_atomic(w))
                e->rd_posted--;
            write_send_cqe(qp, w, e->err_status);
            qp->sq_comp++;
            qp->nic->cnt.wqes_completed++;
            if (nic_qp_reliable(qp))
                nic_qp_to_error(qp); /* flushes everything behind it */
            else
                nic_qp_to_sqe(qp); /* UC/UD: the send queue only (IBA 10.3.1) */
            return;
        }
        if (w->state != NIC_WQE_DONE) {
            if (qp->sq_comp >= e->req_idx || w->state != NIC_WQE_SENT || nic_wqe_is_rd_atomic(w) ||
                nic_psn_diff(w->last_psn, e->comp_psn) >= 0)
                break;
            w->state = NIC_WQE_DONE;
        }
        if (nic_wqe_is_rd_atomic(w))
            e->rd_posted--;
        if (w->signaled)
            write_send_cqe(qp, w, IBV_WC_SUCCESS);
        qp->sq_comp++;
        qp->nic->cnt.wqes_completed++;
    }
    if (qp->sq_next < qp->sq_comp)
        qp->sq_next = qp->sq_comp;
}

void nic_comp_unreliable_tx(struct nic_qp *qp, uint32_t psn)
{
    struct nic_qp_engine *e = qp->eng;
    if (!nic_qp_can_send(qp) || nic_psn_diff(psn, e->comp_psn) < 0 ||
        nic_psn_diff(psn, e->next_psn) >= 0)
        return; /* stale: sent before a reset or a send-queue error */
    e->comp_psn = nic_psn_add(psn, 1);
    nic_comp_advance(qp);
}

void nic_comp_fail_wqe(struct nic_qp *qp, uint64_t idx, enum ibv_wc_status status)
{
    if (idx >= qp->sq_tail)
        return;
    struct nic_send_wqe *w = nic_sq_wqe(qp, idx);
    struct nic_qp_engine *e = qp->eng;
    w->state = NIC_WQE_ERROR;
    e->err_status = status;
    sim_cancel(qp->nic->sim, &e->req_ev);
    if (e->req_idx > idx) { /* stop building at the failed WQE */
        e->req_idx = idx;
        e->req_pkt = 0;
    }
    e->req_state = NIC_REQ_STOPPED;
    nic_comp_advance(qp);
}

/* ---------------------------------------------------------------- response packets */

/* DMA-write `len` bytes (from op->pkt or op->data8) to the op's segments,
 * with the NIC's / the MR's DMA ordering (dma.c). */
static void place(struct nic *nic, struct nic_qp *qp, struct nic_op *op, uint32_t len, uint32_t psn)
{
    nic_dma_place(nic, op, op->pkt ? op->pkt->payload : op->data8, len, qp->qpn, psn,
                  "comp: response data");
}

/* Go back to `psn` for a response that did not come (once per gap). */
static void resend_from(struct nic_qp *qp, uint32_t psn)
{
    struct nic_qp_engine *e = qp->eng;
    if (e->gap_pending && e->gap_psn == psn)
        return;
    e->gap_pending = true;
    e->gap_psn = psn;
    nic_req_rewind(qp, psn);
    nic_req_kick(qp);
}

/* A WQE whose PSNs are assigned and not yet completed: being built, built,
 * or to be resent after a go-back-N (whose earlier requests may still be
 * answered). */
static bool wqe_in_flight(const struct nic_send_wqe *w)
{
    return w->state == NIC_WQE_STARTED || w->state == NIC_WQE_SENT || w->state == NIC_WQE_RETRY;
}

/* The head WQE, if it is a READ/atomic whose request went out. */
static struct nic_send_wqe *head_rd_atomic(struct nic_qp *qp)
{
    if (qp->sq_comp >= qp->sq_tail)
        return NULL;
    struct nic_send_wqe *w = nic_sq_wqe(qp, qp->sq_comp);
    return wqe_in_flight(w) && nic_wqe_is_rd_atomic(w) ? w : NULL;
}

/* The PSN of the first READ response / atomic ACK still missing: that of
 * the oldest READ/atomic whose request went out.  An ACK or NAK implies
 * that every request before it arrived, but it can acknowledge nothing
 * from this PSN on: the response data itself has to come (IBA 9.7.5.1.3). */
static bool first_missing_response(struct nic_qp *qp, uint32_t *psn)
{
    struct nic_qp_engine *e = qp->eng;
    if (!e->rd_posted)
        return false; /* the common case: no READ/atomic in the queue */
    for (uint64_t i = qp->sq_comp; i < qp->sq_tail; i++) {
        const struct nic_send_wqe *r = nic_sq_wqe(qp, i);
        if (r->state == NIC_WQE_QUEUED)
            break; /* never sent, nor anything after it */
        if (wqe_in_flight(r) && nic_wqe_is_rd_atomic(r)) {
            *psn = nic_psn_add(r->first_psn, i == qp->sq_comp ? e->comp_rd_pkt : 0);
            return true;
        }
    }
    return false;
}

/* Acknowledge every PSN before `upto`, but not past a missing response.
 * Returns true (and the missing PSN) when an ACK/NAK reached beyond it:
 * the response was lost, an "implied NAK". */
static bool ack_capped(struct nic_qp *qp, uint32_t upto, uint32_t *missing)
{
    uint32_t miss = 0;
    bool gap = first_missing_response(qp, &miss) && nic_psn_diff(upto, miss) > 0;
    ack_upto(qp, gap ? miss : upto);
    nic_comp_advance(qp);
    *missing = miss;
    return gap;
}

static void comp_ack(struct nic_qp *qp, struct pkt *p)
{
    struct nic_qp_engine *e = qp->eng;
    uint8_t syn = p->aeth_syndrome;
    uint32_t psn = p->psn;
    uint32_t miss = 0;
    if ((syn & NIC_AETH_TYPE_MASK) == 0) { /* ACK */
        if (nic_psn_diff(psn, e->tx_psn_hi) > 0)
            return; /* acknowledges something never sent: ignore */
        /* an ACK beyond an unanswered READ/atomic means its response was
         * lost (IBA 9.7.5.1.3 "implied NAK"): resend from there */
        if (ack_capped(qp, nic_psn_add(psn, 1), &miss) && nic_qp_can_send(qp))
            resend_from(qp, miss);
        return;
    }
    if (nic_psn_diff(psn, nic_psn_add(e->tx_psn_hi, 1)) > 0)
        return;
    bool gap = ack_capped(qp, psn, &miss);
    if (!nic_qp_can_send(qp))
        return;
    uint32_t from = gap ? miss : psn; /* resend the lost response too */
    if ((syn & NIC_AETH_TYPE_MASK) == NIC_AETH_RNR_NAK) {
        if (qp->attr.rnr_retry != 7) { /* 7 = retry forever (IBA 9.7.5.2.8) */
            if (e->rnr_left == 0) {
                nic_comp_fail_wqe(qp, qp->sq_comp, IBV_WC_RNR_RETRY_EXC_ERR);
                return;
            }
            e->rnr_left--;
        }
        nic_req_rewind(qp, from);
        e->req_state = NIC_REQ_WAIT_RNR;
        e->timer_deadline = SIM_TIME_NEVER;
        sim_schedule_in(qp->nic->sim, &e->rnr_ev, nic_rnr_timer_ps(syn & 0x1f));
        return;
    }
    switch (syn) {
    case NIC_AETH_NAK_PSN_SEQ:
        if (e->retry_left == 0) {
            nic_comp_fail_wqe(qp, qp->sq_comp, IBV_WC_RETRY_EXC_ERR);
            return;
        }
        e->retry_left--;
        e->gap_pending = gap;
        e->gap_psn = miss;
        nic_req_rewind(qp, from);
        nic_req_kick(qp);
        return;
    case NIC_AETH_NAK_INV_REQ:
        nic_comp_fail_wqe(qp, qp->sq_comp, IBV_WC_REM_INV_REQ_ERR);
        return;
    case NIC_AETH_NAK_REM_ACC:
        nic_comp_fail_wqe(qp, qp->sq_comp, IBV_WC_REM_ACCESS_ERR);
        return;
    case NIC_AETH_NAK_INV_RD:
        nic_comp_fail_wqe(qp, qp->sq_comp, IBV_WC_REM_INV_RD_REQ_ERR);
        return;
    default: /* remote operational error and reserved codes */
        nic_comp_fail_wqe(qp, qp->sq_comp, IBV_WC_REM_OP_ERR);
        return;
    }
}

/* Check a READ response / atomic ACK against the head WQE.  Returns the
 * WQE if `p` is the packet expected next, else NULL (p dropped by caller;
 * a gap makes the requester go back to the missing PSN). */
static struct nic_send_wqe *expect_response(struct nic_qp *qp, const struct pkt *p, bool atomic)
{
    struct nic_qp_engine *e = qp->eng;
    if (nic_psn_diff(p->psn, e->comp_psn) < 0)
        return NULL; /* duplicate */
    /* a response acknowledges the requests before its READ/atomic, not
     * missing responses of that READ: stop at the oldest unanswered one */
    uint32_t miss;
    ack_capped(qp, p->psn, &miss);
    if (!nic_qp_can_send(qp))
        return NULL;
    struct nic_send_wqe *w = head_rd_atomic(qp);
    if (!w || (w->opcode == IBV_WR_RDMA_READ) == atomic)
        return NULL;
    uint32_t expect = nic_psn_add(w->first_psn, e->comp_rd_pkt);
    int32_t d = nic_psn_diff(p->psn, expect);
    if (d > 0) /* a response went missing: go back to it */
        resend_from(qp, expect);
    return d == 0 ? w : NULL;
}

static void rd_atomic_done(struct nic_qp *qp, struct nic_send_wqe *w)
{
    struct nic_qp_engine *e = qp->eng;
    bool counted = w->state != NIC_WQE_RETRY; /* a rewind already gave its credit back */
    w->state = NIC_WQE_DONE;
    e->comp_rd_pkt = 0;
    if (counted && e->rd_outstanding)
        e->rd_outstanding--;
    /* also when a rewind had already given the credit back: the QP's
     * tracker must not stay on chip after its last READ */
    if (!e->rd_outstanding)
        nic_rdctx_qp_idle(qp->nic, qp->qpn);
    nic_comp_advance(qp);
    if (nic_qp_can_send(qp))
        nic_req_kick(qp); /* a READ/atomic credit came back */
}

/* Returns true if it took ownership of p. */
static bool comp_read_resp(struct nic_qp *qp, struct pkt *p)
{
    struct nic *nic = qp->nic;
    struct nic_qp_engine *e = qp->eng;
    struct nic_send_wqe *w = expect_response(qp, p, false);
    if (!w)
        return false;
    uint32_t mtu = e->mtu_bytes;
    uint32_t n = nic_wqe_npkts(w, mtu);
    uint32_t k = e->comp_rd_pkt;
    uint32_t off = k * mtu;
    uint32_t want = w->length > off ? w->length - off : 0;
    if (want > mtu)
        want = mtu;
    /* a READ asked again from packet k is answered by a new response
     * sequence (FIRST/ONLY at k): check the length and where it ends */
    bool last = (nic_opcode(p->opcode)->mask & NIC_OPF_LAST) != 0;
    if (p->payload_len != want || last != (k + 1 == n)) {
        nic_comp_fail_wqe(qp, qp->sq_comp, IBV_WC_BAD_RESP_ERR);
        return false;
    }
    bool owned = false;
    if (want) {
        struct nic_op *op = nic_op_alloc(nic, NIC_OP_PLACE, NULL);
        op->pkt = p;
        nic_sges_to_segs(nic, w->sge, w->num_sge, off, want, op);
        place(nic, qp, op, want, p->psn);
        owned = true;
    }
    e->comp_rd_pkt++;
    ack_upto(qp, nic_psn_add(p->psn, 1));
    if (e->comp_rd_pkt == n)
        rd_atomic_done(qp, w);
    return owned;
}

static void comp_atomic_ack(struct nic_qp *qp, struct pkt *p)
{
    struct nic *nic = qp->nic;
    struct nic_send_wqe *w = expect_response(qp, p, true);
    if (!w)
        return;
    struct nic_op *op = nic_op_alloc(nic, NIC_OP_PLACE, NULL);
    memcpy(op->data8, &p->atomic_orig, 8); /* host byte order, as mlx5 returns it */
    nic_sges_to_segs(nic, w->sge, w->num_sge, 0, 8, op);
    place(nic, qp, op, 8, p->psn);
    ack_upto(qp, nic_psn_add(p->psn, 1));
    rd_atomic_done(qp, w);
}

void nic_comp_rx(struct nic_qp *qp, struct pkt *p)
{
    uint32_t mask = nic_opcode(p->opcode)->mask;
    bool owned = false;
    if (mask & NIC_OPF_ACK)
        comp_ack(qp, p);
    else if (mask & NIC_OPF_READ)
        owned = comp_read_resp(qp, p);
    else if (mask & NIC_OPF_ATOMIC_ACK)
        comp_atomic_ack(qp, p);
    if (!owned)
        pkt_free(qp->nic->pool, p);
}

/* ---------------------------------------------------------------- life cycle */

void nic_comp_init(struct nic_qp *qp)
{
    struct nic_qp_engine *e = qp->eng;
    if (!e->timer_ev.fn)
        sim_event_init(&e->timer_ev, timer_ev_fn, qp, "nic.ack_timer");
    e->timer_deadline = SIM_TIME_NEVER;
    e->comp_rd_pkt = 0;
    e->comp_psn = e->next_psn = 0;
    e->tx_psn_hi = NIC_PSN_MASK;
    e->retry_left = e->rnr_left = 0;
    e->gap_pending = false;
}

void nic_comp_stop(struct nic_qp *qp)
{
    struct nic_qp_engine *e = qp->eng;
    sim_cancel(qp->nic->sim, &e->timer_ev);
    e->timer_deadline = SIM_TIME_NEVER;
    e->comp_rd_pkt = 0;
}
