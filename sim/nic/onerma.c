/* The Google 1RMA personality (Singhvi et al., "1RMA: Re-envisioning
 * Remote Memory Access for Multi-tenant Datacenters", SIGCOMM'20;
 * Taranov et al. Section 2 and Table 1: READ, WRITE carried out as a
 * request to read, out of order, single packet; CALIBRATION.md
 * "Transports", 1RMA row).  pers.h has the split with the IB model;
 * docs/nic.md "Transport personalities" the semantics.
 *
 * Connection-free: the QP's address vector and destination QPN only say
 * where an op goes; there are no PSN sequences, no ACK state per
 * connection, and the target answers whoever asked (the source node and
 * QPN of the request).  Each op is one request and one response of at
 * most 4 KiB, tagged (BTH PSN) with a per-QP op number:
 *
 *   READ    initiator --READ_REQUEST (RETH)--> target
 *           initiator <--READ_RESPONSE (data)-- target          1 round trip
 *   WRITE   initiator --WRITE_REQUEST (RETH)--> target           request to read
 *           initiator <--FETCH_REQUEST--------- target           the target pulls
 *           initiator --FETCH_RESPONSE (data, RETH)--> target    placed by DMA
 *           initiator <--WRITE_ACKNOWLEDGE----- target           2 round trips
 *
 * The target keeps no state between FETCH_REQUEST and FETCH_RESPONSE (the
 * data packet carries the RETH again).  Ops are independent: each gets
 * its own flow hash, and completes when its last packet arrives, in any
 * order.
 *
 * Initiator, per op:  SENT --response / WRITE ACK--> done
 *                      |  \--NAK--> done with the NAK's status
 *                      +--onerma_timeout_ps after issue--> done with
 *                         IBV_WC_RESP_TIMEOUT_ERR (fail-fast: no
 *                         retransmission; a FETCH_REQUEST for a failed op
 *                         is ignored, so no data move after the failure)
 *
 * Fail-fast leaves the QP in RTS (there is no connection to break): later
 * ops run normally.  At most NIC_ONERMA_WINDOW_BYTES of ops are in flight
 * per QP (the solicitation window); ops beyond it wait in the send queue. */
#include "pers.h"

/* The status of an op that did not complete in time.  "Response timeout"
 * says exactly what happened: no retry was made (IBV_WC_RETRY_EXC_ERR
 * would claim retries); mlx5 never reports it, so it cannot be confused
 * with an IB error. */
#define ONERMA_FAIL_STATUS IBV_WC_RESP_TIMEOUT_ERR

/* 1RMA request opcode of each verb (0: none; the shim refuses the rest). */
static const uint8_t onerma_req_opcode[] = {
    [IBV_WR_RDMA_WRITE] = NIC_OPCODE_ONERMA_WRITE_REQUEST,
    [IBV_WR_RDMA_READ] = NIC_OPCODE_ONERMA_READ_REQUEST,
};

static uint8_t req_opcode(enum ibv_wr_opcode op)
{
    return (unsigned)op < sizeof(onerma_req_opcode) ? onerma_req_opcode[op] : 0;
}

static void drop(struct nic_qp *qp, struct pkt *p, const char *why)
{
    qp->nic->cnt.rx_drops++;
    nic_trace_pkt(qp->nic, TRACE_PKT_DROP, p, qp->qpn, why);
    pkt_free(qp->nic->pool, p);
}

/* ---------------------------------------------------------------- initiator */

static enum ibv_wc_status check_wqe(struct nic_qp *qp, const struct nic_send_wqe *w)
{
    if (!req_opcode(w->opcode))
        return IBV_WC_LOC_QP_OP_ERR;
    if (w->length > NIC_ONERMA_MAX_OP_BYTES)
        return IBV_WC_LOC_LEN_ERR;
    return nic_pers_check_sges(qp, w, w->opcode == IBV_WR_RDMA_READ ? IBV_ACCESS_LOCAL_WRITE : 0);
}

void nic_onerma_kick(struct nic_pers *ps)
{
    struct nic_qp *qp = ps->qp;
    struct nic_qp_engine *e = qp->eng;
    if (!nic_qp_can_send(qp))
        return;
    for (;;) {
        const struct nic_send_wqe *w = nic_pers_next_wqe(ps);
        if (!w)
            return;
        if (ps->inflight && ps->window_bytes + w->length > NIC_ONERMA_WINDOW_BYTES)
            return; /* solicitation window full: a completion kicks again */
        if (!nic_pers_can_start(ps))
            return;
        uint64_t idx = e->req_idx++;
        qp->sq_next = e->req_idx;
        enum ibv_wc_status st = check_wqe(qp, w);
        if (st != IBV_WC_SUCCESS) {
            nic_pers_fail_wqe(ps, idx, st);
            continue;
        }
        struct nic_pers_op *op = nic_pers_op_new(ps, idx);
        op->bytes = w->length;
        ps->window_bytes += w->length;
        op->state = NIC_POP_SENT;
        op->deadline_ps = sim_time_add(sim_now(qp->nic->sim), qp->nic->p.onerma_timeout_ps);
        nic_pers_timer_at(ps, op->deadline_ps);
        struct pkt *p = nic_pers_pkt(ps, req_opcode(w->opcode), op->seq, 0, qp->dest_node,
                                     qp->attr.dest_qp_num);
        p->reth_va = w->remote_addr;
        p->reth_rkey = w->rkey;
        p->reth_dma_len = w->length;
        p->ack_req = 1;
        nic_pers_send_req(ps, p, NULL);
    }
}

void nic_onerma_timer(struct nic_pers *ps)
{
    sim_time_t now = sim_now(ps->qp->nic->sim);
    for (uint32_t s = ps->seq_lo; s != ps->seq_next; s = nic_psn_add(s, 1)) {
        struct nic_pers_op *op = nic_pers_op(ps, s);
        if (op->state == NIC_POP_FREE || op->deadline_ps > now)
            continue;
        ps->qp->nic->cnt.onerma_timeouts++;
        nic_pers_op_done(ps, op, ONERMA_FAIL_STATUS);
    }
}

/* The op a response names, if it is still in flight and of kind `wr`. */
static struct nic_pers_op *op_of(struct nic_pers *ps, const struct pkt *p, enum ibv_wr_opcode wr)
{
    struct nic_pers_op *op = nic_pers_find(ps, p->psn);
    if (!op || nic_sq_wqe(ps->qp, op->wqe_idx)->opcode != wr)
        return NULL;
    return op;
}

/* The target asks for the data of a WRITE: send it, with the RETH again. */
static void rx_fetch_request(struct nic_pers *ps, struct pkt *p)
{
    struct nic_qp *qp = ps->qp;
    struct nic_pers_op *op = op_of(ps, p, IBV_WR_RDMA_WRITE);
    if (!op || op->fetched) {
        drop(qp, p, "1rma: fetch for no WRITE in flight (failed or done)");
        return;
    }
    op->fetched = true;
    const struct nic_send_wqe *w = nic_sq_wqe(qp, op->wqe_idx);
    struct pkt *d = nic_pers_pkt(ps, NIC_OPCODE_ONERMA_FETCH_RESPONSE, op->seq, w->length,
                                 p->src_node, p->src_qpn);
    d->reth_va = w->remote_addr;
    d->reth_rkey = w->rkey;
    d->reth_dma_len = w->length;
    pkt_free(qp->nic->pool, p);
    nic_pers_send_req(ps, d, w); /* payload read from host memory now */
}

static void rx_read_response(struct nic_pers *ps, struct pkt *p)
{
    struct nic_qp *qp = ps->qp;
    struct nic_pers_op *op = op_of(ps, p, IBV_WR_RDMA_READ);
    if (!op) {
        drop(qp, p, "1rma: response for no READ in flight (failed or done)");
        return;
    }
    const struct nic_send_wqe *w = nic_sq_wqe(qp, op->wqe_idx);
    enum ibv_wc_status st = IBV_WC_SUCCESS;
    if (nic_pers_nak(p->aeth_syndrome))
        st = nic_pers_nak_status(p->aeth_syndrome);
    else if (p->payload_len != w->length)
        st = IBV_WC_BAD_RESP_ERR;
    if (st == IBV_WC_SUCCESS)
        nic_pers_place_sges(qp, p, w->sge, w->num_sge, "1rma: read response"); /* takes p */
    else
        pkt_free(qp->nic->pool, p);
    nic_pers_op_done(ps, op, st); /* its CQE lands after the data */
}

static void rx_write_ack(struct nic_pers *ps, struct pkt *p)
{
    struct nic_qp *qp = ps->qp;
    struct nic_pers_op *op = op_of(ps, p, IBV_WR_RDMA_WRITE);
    uint8_t syn = p->aeth_syndrome;
    if (!op) {
        drop(qp, p, "1rma: ACK for no WRITE in flight (failed or done)");
        return;
    }
    pkt_free(qp->nic->pool, p);
    nic_pers_op_done(ps, op, nic_pers_nak(syn) ? nic_pers_nak_status(syn) : IBV_WC_SUCCESS);
}

/* ---------------------------------------------------------------- target */

/* Access to [reth_va, +reth_dma_len) under the request's rkey: an AETH
 * syndrome (ACK = allowed; *host = where the bytes are). */
static uint8_t target_check(struct nic_qp *qp, const struct pkt *p, int access, uint8_t **host)
{
    uint32_t len = p->reth_dma_len;
    *host = NULL;
    if (len > NIC_ONERMA_MAX_OP_BYTES)
        return NIC_AETH_NAK_INV_REQ;
    if (!(qp->attr.qp_access_flags & (unsigned)access))
        return NIC_AETH_NAK_REM_ACC;
    if (len && nic_mr_check(qp->nic, p->reth_rkey, qp->init.pd, p->reth_va, len, access, host) !=
                   NIC_MR_OK)
        return NIC_AETH_NAK_REM_ACC;
    return NIC_AETH_ACK;
}

/* A packet back to the sender of `req` (connection-free: its source). */
static struct pkt *answer(struct nic_pers *ps, const struct pkt *req, uint8_t opcode, uint32_t len)
{
    return nic_pers_pkt(ps, opcode, req->psn, len, req->src_node, req->src_qpn);
}

static void rx_read_request(struct nic_pers *ps, struct pkt *p)
{
    uint8_t *host;
    uint8_t syn = target_check(ps->qp, p, IBV_ACCESS_REMOTE_READ, &host);
    uint32_t len = syn == NIC_AETH_ACK ? p->reth_dma_len : 0;
    uint32_t key = p->reth_rkey;
    struct pkt *r = answer(ps, p, NIC_OPCODE_ONERMA_READ_RESPONSE, len);
    r->aeth_syndrome = syn;
    pkt_free(ps->qp->nic->pool, p);
    nic_pers_send_resp_dma(ps, r, host, key, len);
}

static void rx_write_request(struct nic_pers *ps, struct pkt *p)
{
    uint8_t *host;
    uint8_t syn = target_check(ps->qp, p, IBV_ACCESS_REMOTE_WRITE, &host);
    struct pkt *r;
    if (syn == NIC_AETH_ACK) { /* pull the data: the write becomes a read */
        r = answer(ps, p, NIC_OPCODE_ONERMA_FETCH_REQUEST, 0);
    } else {
        r = answer(ps, p, NIC_OPCODE_ONERMA_WRITE_ACKNOWLEDGE, 0);
        r->aeth_syndrome = syn;
    }
    pkt_free(ps->qp->nic->pool, p);
    nic_pers_send_resp(ps, r);
}

static void rx_fetch_response(struct nic_pers *ps, struct pkt *p)
{
    struct nic_qp *qp = ps->qp;
    uint8_t *host;
    uint8_t syn = target_check(qp, p, IBV_ACCESS_REMOTE_WRITE, &host);
    if (syn == NIC_AETH_ACK && p->payload_len != p->reth_dma_len)
        syn = NIC_AETH_NAK_INV_REQ;
    struct pkt *a = answer(ps, p, NIC_OPCODE_ONERMA_WRITE_ACKNOWLEDGE, 0);
    a->aeth_syndrome = syn;
    if (syn == NIC_AETH_ACK)
        nic_pers_place(qp, p, host, p->reth_rkey, "1rma: write data"); /* takes p */
    else
        drop(qp, p, "1rma: write data refused");
    nic_pers_send_resp(ps, a);
}

void nic_onerma_rx(struct nic_pers *ps, struct pkt *p)
{
    switch (p->opcode) {
    case NIC_OPCODE_ONERMA_READ_REQUEST:
        rx_read_request(ps, p);
        break;
    case NIC_OPCODE_ONERMA_WRITE_REQUEST:
        rx_write_request(ps, p);
        break;
    case NIC_OPCODE_ONERMA_FETCH_RESPONSE:
        rx_fetch_response(ps, p);
        break;
    case NIC_OPCODE_ONERMA_FETCH_REQUEST:
        rx_fetch_request(ps, p);
        break;
    case NIC_OPCODE_ONERMA_READ_RESPONSE:
        rx_read_response(ps, p);
        break;
    case NIC_OPCODE_ONERMA_WRITE_ACKNOWLEDGE:
        rx_write_ack(ps, p);
        break;
    default:
        drop(ps->qp, p, "1rma: unknown opcode");
        break;
    }
}
