/* The AWS EFA SRD personality (Scalable Reliable Datagram: Shalev et al.,
 * "A Cloud-Optimized Transport Protocol for Elastic and Scalable HPC",
 * IEEE Micro 2020; Taranov et al. Section 2 and Table 1: SEND and READ,
 * out-of-order delivery, single-packet messages).  pers.h has the split
 * with the IB model; docs/nic.md "Transport personalities" the semantics.
 *
 * Sender, per op (one WQE = one message = one packet):
 *
 *   STAGED --TX--> SENT --ACK / READ response--> done (CQE, out of order)
 *     ^              |  \--NAK--> done with the NAK's status
 *     |              |  \--RNR NAK--> RNR_WAIT --RNR timer--+
 *     |              +--RTO (srd_rto_ps)--> RESEND ----------+
 *     +----------------------------------------------------+
 *
 *  - every packet, and every resend, gets a fresh flow hash and UDP source
 *    port from the QP's RNG stream, so ECMP sprays a QP over all paths;
 *  - a resend re-reads the payload from host memory (nothing is kept);
 *  - RTO expiries count against the QP's retry_cnt (retry_cnt + 1 sends,
 *    then IBV_WC_RETRY_EXC_ERR), RNR NAKs against rnr_retry (7 = forever,
 *    then IBV_WC_RNR_RETRY_EXC_ERR);
 *  - failed ops complete in error and the QP stays in RTS: SRD is a
 *    datagram service, there is no connection to break.
 *
 * Receiver, per request packet (no sequence check: any order is fine):
 *
 *  SEND    duplicate?  (window of NIC_PERS_WINDOW sequence numbers below
 *                       the highest seen; older = duplicate) -> the same
 *                       ACK / NAK again, nothing delivered
 *          no receive posted -> RNR NAK (min_rnr_timer), not delivered
 *          receive too small / bad lkey -> the receive completes in error
 *                       (LOC_LEN_ERR / LOC_PROT_ERR), NAK
 *          else the payload is placed by one DMA write into the next
 *                       posted receive, its CQE follows, ACK
 *  READ    rkey / access / length checked -> READ response (payload read
 *          from host memory) or NAK; executed again for a duplicate
 *
 * Receives are consumed in arrival order, so a program sees messages in
 * the order the fabric delivered them. */
#include <string.h>

#include "pers.h"

/* SRD request opcode of each verb the personality carries (0: none). */
static const uint8_t srd_req_opcode[] = {
    [IBV_WR_SEND] = NIC_OPCODE_SRD_SEND_ONLY,
    [IBV_WR_SEND_WITH_IMM] = NIC_OPCODE_SRD_SEND_ONLY_WITH_IMMEDIATE,
    [IBV_WR_RDMA_READ] = NIC_OPCODE_SRD_READ_REQUEST,
};

static uint8_t req_opcode(enum ibv_wr_opcode op)
{
    return (unsigned)op < sizeof(srd_req_opcode) ? srd_req_opcode[op] : 0;
}

/* Messages are single packets of at most the port MTU. */
static uint32_t srd_mtu_bytes(const struct nic_qp *qp)
{
    return nic_mtu_bytes(qp->nic->p.max_mtu);
}

static void drop(struct nic_qp *qp, struct pkt *p, const char *why)
{
    qp->nic->cnt.rx_drops++;
    nic_trace_pkt(qp->nic, TRACE_PKT_DROP, p, qp->qpn, why);
    pkt_free(qp->nic->pool, p);
}

/* ---------------------------------------------------------------- sender */

/* Build the request of `op` (first send and every resend) and queue it. */
static void transmit(struct nic_pers *ps, struct nic_pers_op *op)
{
    struct nic_qp *qp = ps->qp;
    const struct nic_send_wqe *w = nic_sq_wqe(qp, op->wqe_idx);
    bool read = w->opcode == IBV_WR_RDMA_READ;
    struct pkt *p = nic_pers_pkt(ps, req_opcode(w->opcode), op->seq, read ? 0 : w->length,
                                 qp->dest_node, qp->attr.dest_qp_num);
    if (read) {
        p->reth_va = w->remote_addr;
        p->reth_rkey = w->rkey;
        p->reth_dma_len = w->length;
    } else {
        p->imm_data = w->imm_data;
        p->se = (w->send_flags & IBV_SEND_SOLICITED) ? 1 : 0;
    }
    p->ack_req = 1;
    op->state = NIC_POP_STAGED;
    op->deadline_ps = SIM_TIME_NEVER;
    nic_pers_send_req(ps, p, read ? NULL : w);
}

static void resend_pending(struct nic_pers *ps)
{
    bool left = false;
    for (uint32_t s = ps->seq_lo; s != ps->seq_next; s = nic_psn_add(s, 1)) {
        struct nic_pers_op *op = nic_pers_op(ps, s);
        if (op->state != NIC_POP_RESEND)
            continue;
        if (nic_stage_full(&ps->req_stage, PKT_MAX_PAYLOAD_BYTES)) {
            left = true;
            break;
        }
        ps->qp->nic->cnt.srd_retransmits++;
        transmit(ps, op);
    }
    ps->resend_any = left;
}

/* Local checks of a new WQE; the shim refused what SRD lacks already. */
static enum ibv_wc_status check_wqe(struct nic_qp *qp, const struct nic_send_wqe *w)
{
    if (!req_opcode(w->opcode))
        return IBV_WC_LOC_QP_OP_ERR;
    if (w->length > srd_mtu_bytes(qp))
        return IBV_WC_LOC_LEN_ERR;
    return nic_pers_check_sges(qp, w, w->opcode == IBV_WR_RDMA_READ ? IBV_ACCESS_LOCAL_WRITE : 0);
}

void nic_srd_kick(struct nic_pers *ps)
{
    struct nic_qp *qp = ps->qp;
    struct nic_qp_engine *e = qp->eng;
    if (!nic_qp_can_send(qp))
        return;
    if (ps->resend_any)
        resend_pending(ps); /* resends go before new messages */
    for (;;) {
        const struct nic_send_wqe *w = nic_pers_next_wqe(ps);
        if (!w || !nic_pers_can_start(ps))
            return;
        uint64_t idx = e->req_idx++;
        qp->sq_next = e->req_idx;
        enum ibv_wc_status st = check_wqe(qp, w);
        if (st != IBV_WC_SUCCESS) {
            nic_pers_fail_wqe(ps, idx, st);
            continue;
        }
        transmit(ps, nic_pers_op_new(ps, idx));
    }
}

void nic_srd_on_tx(struct nic_pers *ps, const struct pkt *p)
{
    struct nic_pers_op *op = nic_pers_find(ps, p->psn);
    if (!op || op->state != NIC_POP_STAGED)
        return; /* an older copy, or the op completed meanwhile */
    op->state = NIC_POP_SENT;
    op->deadline_ps = sim_time_add(sim_now(ps->qp->nic->sim), ps->qp->nic->p.srd_rto_ps);
    nic_pers_timer_at(ps, op->deadline_ps);
}

void nic_srd_timer(struct nic_pers *ps)
{
    struct nic_qp *qp = ps->qp;
    sim_time_t now = sim_now(qp->nic->sim);
    for (uint32_t s = ps->seq_lo; s != ps->seq_next; s = nic_psn_add(s, 1)) {
        struct nic_pers_op *op = nic_pers_op(ps, s);
        if (op->state == NIC_POP_FREE || op->deadline_ps > now)
            continue;
        if (op->state == NIC_POP_SENT) { /* RTO: nothing came back */
            if (op->tries >= qp->attr.retry_cnt) {
                nic_pers_op_done(ps, op, IBV_WC_RETRY_EXC_ERR);
                continue;
            }
            op->tries++;
        }
        op->state = NIC_POP_RESEND; /* SENT after an RTO, or RNR_WAIT over */
        op->deadline_ps = SIM_TIME_NEVER;
        ps->resend_any = true;
    }
    if (ps->resend_any)
        nic_pers_kick(qp);
}

/* ---------------------------------------------------------------- receiver */

void nic_srd_rx_init(struct nic_pers *ps)
{
    ps->rx_hi = nic_psn_add(ps->qp->attr.rq_psn, NIC_PSN_MASK); /* rq_psn - 1 */
    memset(ps->rx_seen, 0, sizeof(ps->rx_seen));
    memset(ps->rx_syn, 0, sizeof(ps->rx_syn));
    ps->rx_init = true;
}

static bool rx_seen(const struct nic_pers *ps, uint32_t seq)
{
    uint32_t i = seq % NIC_PERS_WINDOW;
    return (ps->rx_seen[i / 64] >> (i % 64)) & 1u;
}

static void rx_mark(struct nic_pers *ps, uint32_t seq, uint8_t syndrome)
{
    uint32_t i = seq % NIC_PERS_WINDOW;
    ps->rx_seen[i / 64] |= (uint64_t)1 << (i % 64);
    ps->rx_syn[i] = syndrome;
}

/* The window moves up to `seq` (> rx_hi): the numbers entering it are unseen. */
static void rx_advance(struct nic_pers *ps, uint32_t seq)
{
    int32_t d = nic_psn_diff(seq, ps->rx_hi);
    if (d >= NIC_PERS_WINDOW) {
        memset(ps->rx_seen, 0, sizeof(ps->rx_seen));
    } else {
        for (uint32_t s = nic_psn_add(ps->rx_hi, 1);; s = nic_psn_add(s, 1)) {
            uint32_t i = s % NIC_PERS_WINDOW;
            ps->rx_seen[i / 64] &= ~((uint64_t)1 << (i % 64));
            if (s == seq)
                break;
        }
    }
    ps->rx_hi = seq;
}

/* ACK or NAK of request `req`, back to its sender. */
static void reply(struct nic_pers *ps, const struct pkt *req, uint8_t syndrome)
{
    struct pkt *a =
        nic_pers_pkt(ps, NIC_OPCODE_SRD_ACKNOWLEDGE, req->psn, 0, req->src_node, req->src_qpn);
    a->aeth_syndrome = syndrome;
    nic_pers_send_resp(ps, a);
}

static void rx_send(struct nic_pers *ps, struct pkt *p)
{
    struct nic_qp *qp = ps->qp;
    struct nic *nic = qp->nic;
    uint32_t seq = p->psn;
    int32_t d = nic_psn_diff(seq, ps->rx_hi);
    if (d <= -(int32_t)NIC_PERS_WINDOW || (d <= 0 && rx_seen(ps, seq))) {
        /* a resend of a message already taken (its ACK was lost or late) */
        nic->cnt.srd_duplicates++;
        reply(ps, p,
              d <= -(int32_t)NIC_PERS_WINDOW ? NIC_AETH_ACK : ps->rx_syn[seq % NIC_PERS_WINDOW]);
        drop(qp, p, "srd: duplicate");
        return;
    }
    if (d > 0)
        rx_advance(ps, seq);
    if (nic_rq_empty(qp)) {
        nic->cnt.srd_rnr_naks++;
        reply(ps, p, (uint8_t)(NIC_AETH_RNR_NAK | (qp->attr.min_rnr_timer & 0x1f)));
        drop(qp, p, "srd: RNR (no receive posted)");
        return;
    }
    const struct nic_recv_wqe *r = nic_rq_cur(qp);
    enum ibv_wc_status st = IBV_WC_SUCCESS;
    uint8_t syn = NIC_AETH_ACK;
    for (uint32_t i = 0; i < r->num_sge && st == IBV_WC_SUCCESS; i++) {
        const struct nic_sge *s = &r->sge[i];
        if (s->length && nic_mr_check(nic, s->lkey, nic_rq_pd(qp), s->addr, s->length,
                                      IBV_ACCESS_LOCAL_WRITE, NULL) != NIC_MR_OK) {
            st = IBV_WC_LOC_PROT_ERR;
            syn = NIC_AETH_NAK_REM_OP;
        }
    }
    if (st == IBV_WC_SUCCESS && p->payload_len > r->length) {
        st = IBV_WC_LOC_LEN_ERR;
        syn = NIC_AETH_NAK_INV_REQ; /* EFA: remote bad length -> REM_INV_REQ_ERR */
    }
    struct ibv_wc wc = {
        .wr_id = r->wr_id,
        .status = st,
        .opcode = IBV_WC_RECV,
        .vendor_err = nic_vendor_err(st),
        .byte_len = st == IBV_WC_SUCCESS ? p->payload_len : 0,
        .qp_num = qp->qpn,
        .src_qp = p->src_qpn,
    };
    if (st == IBV_WC_SUCCESS && (nic_opcode(p->opcode)->mask & NIC_OPF_IMMDT)) {
        wc.imm_data = p->imm_data;
        wc.wc_flags |= IBV_WC_WITH_IMM;
    }
    bool se = p->se;
    nic_rq_consume(qp);
    rx_mark(ps, seq, syn);
    reply(ps, p, syn);
    if (st == IBV_WC_SUCCESS)
        nic_pers_place_sges(qp, p, r->sge, r->num_sge, "srd: payload"); /* takes p */
    else
        drop(qp, p, "srd: receive buffer error");
    /* posted PCIe writes land in order: the CQE after the payload */
    nic_cqe_write(nic, qp->init.recv_cq, &wc, se);
}

static void rx_read(struct nic_pers *ps, struct pkt *p)
{
    struct nic_qp *qp = ps->qp;
    uint32_t len = p->reth_dma_len;
    uint8_t *host = NULL;
    uint8_t syn = NIC_AETH_ACK;
    if (len > srd_mtu_bytes(qp))
        syn = NIC_AETH_NAK_INV_REQ;
    else if (!(qp->attr.qp_access_flags & IBV_ACCESS_REMOTE_READ) ||
             (len && nic_mr_check(qp->nic, p->reth_rkey, qp->init.pd, p->reth_va, len,
                                  IBV_ACCESS_REMOTE_READ, &host) != NIC_MR_OK))
        syn = NIC_AETH_NAK_REM_ACC;
    if (syn != NIC_AETH_ACK) {
        reply(ps, p, syn);
        drop(qp, p, "srd: READ refused");
        return;
    }
    struct pkt *r =
        nic_pers_pkt(ps, NIC_OPCODE_SRD_READ_RESPONSE, p->psn, len, p->src_node, p->src_qpn);
    r->aeth_syndrome = NIC_AETH_ACK;
    uint32_t key = p->reth_rkey;
    pkt_free(qp->nic->pool, p);
    nic_pers_send_resp_dma(ps, r, host, key, len);
}

/* ---------------------------------------------------------------- sender: responses */

static void rx_read_resp(struct nic_pers *ps, struct pkt *p)
{
    struct nic_qp *qp = ps->qp;
    struct nic_pers_op *op = nic_pers_find(ps, p->psn);
    const struct nic_send_wqe *w = op ? nic_sq_wqe(qp, op->wqe_idx) : NULL;
    if (!w || w->opcode != IBV_WR_RDMA_READ) {
        drop(qp, p, "srd: response for no READ in flight");
        return;
    }
    if (p->payload_len != w->length) {
        pkt_free(qp->nic->pool, p);
        nic_pers_op_done(ps, op, IBV_WC_BAD_RESP_ERR);
        return;
    }
    nic_pers_place_sges(qp, p, w->sge, w->num_sge, "srd: read response");
    nic_pers_op_done(ps, op, IBV_WC_SUCCESS); /* its CQE lands after the data */
}

static void rx_ack(struct nic_pers *ps, struct pkt *p)
{
    struct nic_qp *qp = ps->qp;
    uint8_t syn = p->aeth_syndrome;
    struct nic_pers_op *op = nic_pers_find(ps, p->psn);
    pkt_free(qp->nic->pool, p);
    if (!op)
        return; /* late: the op completed (a duplicate's ACK) or failed */
    const struct nic_send_wqe *w = nic_sq_wqe(qp, op->wqe_idx);
    if (!nic_pers_nak(syn)) {
        if (w->opcode != IBV_WR_RDMA_READ) /* a READ completes with its data */
            nic_pers_op_done(ps, op, IBV_WC_SUCCESS);
        return;
    }
    if ((syn & NIC_AETH_TYPE_MASK) != NIC_AETH_RNR_NAK) {
        nic_pers_op_done(ps, op, nic_pers_nak_status(syn));
        return;
    }
    if (qp->attr.rnr_retry != 7) { /* 7 = retry forever (IBA 9.7.5.2.8) */
        if (op->rnr_tries >= qp->attr.rnr_retry) {
            nic_pers_op_done(ps, op, IBV_WC_RNR_RETRY_EXC_ERR);
            return;
        }
        op->rnr_tries++;
    }
    op->state = NIC_POP_RNR_WAIT;
    op->deadline_ps = sim_time_add(sim_now(qp->nic->sim), nic_rnr_timer_ps(syn & 0x1f));
    nic_pers_timer_at(ps, op->deadline_ps);
}

void nic_srd_rx(struct nic_pers *ps, struct pkt *p)
{
    switch (p->opcode) {
    case NIC_OPCODE_SRD_SEND_ONLY:
    case NIC_OPCODE_SRD_SEND_ONLY_WITH_IMMEDIATE:
        rx_send(ps, p);
        break;
    case NIC_OPCODE_SRD_READ_REQUEST:
        rx_read(ps, p);
        break;
    case NIC_OPCODE_SRD_READ_RESPONSE:
        rx_read_resp(ps, p);
        break;
    case NIC_OPCODE_SRD_ACKNOWLEDGE:
        rx_ack(ps, p);
        break;
    default:
        drop(ps->qp, p, "srd: unknown opcode");
        break;
    }
}
