/* The responder: request packets in, data placed, receive completions and
 * response packets (ACK/NAK, read responses, atomic ACKs) out (rxe_resp.c
 * is the model).
 *
 * Per request packet, a dispatcher over these states (enum resp_state):
 *
 *   CHECK_PSN ----> CHECK_OP_SEQ -> CHECK_RESOURCE -> CHECK_ACCESS -> EXECUTE
 *     |  |                |               |                |            |
 *     |  +-> DUPLICATE    +---------------+--> ERR_FATAL <-+      COMPLETE (last packet)
 *     +----> ERR_SEQ                      +--> ERR_RNR                  |
 *                                                            ACKNOWLEDGE -> DONE
 *
 *  CHECK_PSN     PSN == expected: go on.  Ahead (a gap): one PSN sequence
 *                error NAK per gap, packet dropped (IBA 9.7.5.1.3; the
 *                requester goes back N).  Behind: DUPLICATE.
 *  DUPLICATE     SEND/WRITE: re-ACK the last PSN; READ: executed again
 *                (reads are idempotent); atomic: the saved reply is resent
 *                (IBA 9.7.5.1.2; last NIC_ATOMIC_HISTORY kept).
 *  CHECK_OP_SEQ  FIRST/ONLY only between messages, MIDDLE/LAST only inside
 *                one of the same kind; the QP must allow the remote
 *                operation (qp_access_flags) -> else fatal.
 *  CHECK_RESOURCE a SEND (first packet) or WRITE with immediate (last
 *                packet) needs a posted receive: none -> RNR NAK with the
 *                QP's min_rnr_timer (the packet is dropped, the requester
 *                retries); READ/atomic beyond max_dest_rd_atomic -> fatal.
 *  CHECK_ACCESS  receive buffer: SGE keys (IBV_WC_LOC_PROT_ERR) and length
 *                (IBV_WC_LOC_LEN_ERR) - both complete the receive in error;
 *                WRITE/READ/atomic: rkey, PD, bounds, MR access (remote
 *                access NAK), atomic address 8-byte aligned (invalid
 *                request NAK), WRITE lengths add up to the RETH length.
 *  EXECUTE       SEND/WRITE payload: one DMA write into host memory (the
 *                memcpy happens when it lands); READ/atomic: a work item
 *                for the response stager.
 *  COMPLETE      last packet of a SEND / WRITE-with-immediate: receive CQE
 *                (byte_len, imm, src_qp, SE for solicited notification).
 *  ACKNOWLEDGE   ACK when the packet asks (AckReq, set on the last packet
 *                of every message) or every ack_every_pkts packets.
 *  ERR_FATAL     class A/C errors (IBA 9.9.3): NAK (invalid request /
 *                remote access / remote operational), the QP enters ERR
 *                (flushing its receives).
 *
 * Responses leave in PSN order through a work FIFO: ACK/NAK items,
 * READ items (each response packet fetched by its own DMA read, through the
 * same staging ring as the requester) and atomic items.  A new ACK merges
 * into an ACK still waiting in the FIFO or in the ring (ACK coalescing).
 *
 * Atomic unit: one per NIC, every atomic in arrival order: DMA read of the
 * 8 bytes, atomic_proc_ps, DMA write of the result, then the next one -
 * the PCIe read-modify-write of host-memory atomics (CALIBRATION.md, NICs:
 * "contended atomics ... much slower on host memory"). */
#include <string.h>

#include "nic_priv.h"

enum resp_state {
    RESP_CHECK_PSN,
    RESP_CHECK_QKEY,
    RESP_DUPLICATE,
    RESP_CHECK_OP_SEQ,
    RESP_CHECK_RESOURCE,
    RESP_CHECK_ACCESS,
    RESP_EXECUTE,
    RESP_COMPLETE,
    RESP_ACKNOWLEDGE,
    RESP_ERR_SEQ,
    RESP_ERR_RNR,
    RESP_ERR_RECV,
    RESP_ERR_FATAL,
    RESP_DROP,
    RESP_DONE,
};

/* One request packet being processed. */
struct resp_ctx {
    struct pkt *p;
    uint32_t mask;
    uint8_t nak;                 /* ERR_FATAL: AETH NAK syndrome */
    enum ibv_wc_status recv_err; /* ERR_FATAL: completes the receive WQE in error */
    bool owned;                  /* the packet went to a DMA write */
    uint8_t *host;               /* READ/atomic target */
    const char *why;             /* DROP: reason, for the trace */
};

static void resp_stage_run(struct nic_qp *qp);

/* ---------------------------------------------------------------- work FIFO */

static uint32_t work_count(const struct nic_qp_engine *e)
{
    return e->work_tail - e->work_head;
}

static struct nic_resp_work *work_push(struct nic_qp_engine *e)
{
    if (work_count(e) >= NIC_RESP_WORK_SLOTS)
        return NULL;
    struct nic_resp_work *w = &e->work[e->work_tail % NIC_RESP_WORK_SLOTS];
    memset(w, 0, sizeof(*w));
    e->work_tail++;
    return w;
}

/* Queue an ACK or NAK for `psn`.  Plain ACKs coalesce. */
static void queue_ack(struct nic_qp *qp, uint8_t syndrome, uint32_t psn)
{
    struct nic_qp_engine *e = qp->eng;
    if (syndrome == NIC_AETH_ACK) {
        if (work_count(e)) {
            struct nic_resp_work *t = &e->work[(e->work_tail - 1) % NIC_RESP_WORK_SLOTS];
            if (t->kind == NIC_RW_ACK && t->syndrome == NIC_AETH_ACK) {
                t->psn = psn;
                t->msn = e->msn;
                return;
            }
        } else {
            struct nic_stage_ent *t = nic_stage_tail_ent(&e->resp_stage);
            if (t && t->ready && t->pkt->opcode == IB_OPCODE_RC_ACKNOWLEDGE &&
                t->pkt->aeth_syndrome == NIC_AETH_ACK) {
                t->pkt->psn = psn;
                t->pkt->aeth_msn = e->msn;
                return;
            }
        }
    }
    struct nic_resp_work *w = work_push(e);
    if (!w)
        return; /* FIFO full: the requester's timer recovers */
    w->kind = NIC_RW_ACK;
    w->syndrome = syndrome;
    w->psn = psn;
    w->msn = e->msn;
    resp_stage_run(qp);
}

static struct pkt *ack_pkt(struct nic_qp *qp, uint8_t syndrome, uint32_t psn, uint32_t msn)
{
    struct pkt *p = pkt_alloc(qp->nic->pool);
    nic_pkt_address(qp, p, IB_OPCODE_RC_ACKNOWLEDGE, psn, 0);
    p->aeth_syndrome = syndrome;
    p->aeth_msn = msn & NIC_PSN_MASK;
    return p;
}

/* ---------------------------------------------------------------- response stager */

static void atomic_submit(struct nic *nic, struct nic_op *op);

/* Turn work items into packets while the staging ring has room. */
static void resp_stage_fill(struct nic_qp *qp)
{
    struct nic *nic = qp->nic;
    struct nic_qp_engine *e = qp->eng;
    struct nic_stage *s = &e->resp_stage;
    uint32_t mtu = e->mtu_bytes;
    while (work_count(e)) {
        struct nic_resp_work *w = &e->work[e->work_head % NIC_RESP_WORK_SLOTS];
        switch ((enum nic_resp_work_kind)w->kind) {
        case NIC_RW_ACK:
            if (nic_stage_full(s, 0))
                return;
            nic_stage_push(s, ack_pkt(qp, w->syndrome, w->psn, w->msn), true);
            break;
        case NIC_RW_READ:
            while (w->done_pkts < w->npkts) {
                uint32_t off = w->done_pkts * mtu;
                uint32_t plen = w->len > off ? w->len - off : 0;
                if (plen > mtu)
                    plen = mtu;
                if (nic_stage_full(s, plen))
                    return;
                uint32_t pos = nic_pkt_pos(w->done_pkts, w->npkts);
                uint8_t opcode = nic_read_resp_opcode(pos);
                struct pkt *p = pkt_alloc(nic->pool);
                nic_pkt_address(qp, p, opcode, nic_psn_add(w->psn, w->done_pkts), plen);
                if (nic_opcode(opcode)->mask & NIC_OPF_AETH) {
                    p->aeth_syndrome = NIC_AETH_ACK;
                    p->aeth_msn = w->msn & NIC_PSN_MASK;
                }
                w->done_pkts++;
                if (!plen) {
                    nic_stage_push(s, p, true);
                    continue;
                }
                struct nic_op *op = nic_op_alloc(nic, NIC_OP_RESP_PAYLOAD, qp);
                op->pkt = p;
                op->n_seg = 1;
                op->seg[0] = (struct nic_seg){w->host + off, w->key, plen};
                nic_stage_push(s, p, false);
                nic->cnt.dma_reads++;
                if (nic->pcie)
                    pcie_dma_read(nic->pcie, plen, nic_payload_fetched, op, &qp->eng->resp_src);
                else
                    nic_payload_fetched(nic->sim, op, &qp->eng->resp_src);
            }
            if (!w->dup && e->rd_resp_outstanding)
                e->rd_resp_outstanding--;
            break;
        case NIC_RW_ATOMIC: {
            if (nic_stage_full(s, 0))
                return;
            struct pkt *p = pkt_alloc(nic->pool);
            nic_pkt_address(qp, p, IB_OPCODE_RC_ATOMIC_ACKNOWLEDGE, w->psn, 0);
            p->aeth_syndrome = NIC_AETH_ACK;
            p->aeth_msn = w->msn & NIC_PSN_MASK;
            nic_stage_push(s, p, false);
            struct nic_op *op = nic_op_alloc(nic, NIC_OP_ATOMIC, qp);
            op->pkt = p;
            op->n_seg = 1;
            op->seg[0] = (struct nic_seg){w->host, w->key, 8};
            op->atomic_opcode = w->atomic_opcode;
            op->swap_add = w->swap_add;
            op->compare = w->compare;
            if (e->rd_resp_outstanding)
                e->rd_resp_outstanding--;
            atomic_submit(nic, op);
            break;
        }
        case NIC_RW_ATOMIC_REPLAY: {
            if (nic_stage_full(s, 0))
                return;
            struct pkt *p = pkt_alloc(nic->pool);
            nic_pkt_address(qp, p, IB_OPCODE_RC_ATOMIC_ACKNOWLEDGE, w->psn, 0);
            p->aeth_syndrome = NIC_AETH_ACK;
            p->aeth_msn = w->msn & NIC_PSN_MASK;
            p->atomic_orig = w->orig;
            nic_stage_push(s, p, true);
            break;
        }
        }
        e->work_head++;
    }
}

static void resp_stage_run(struct nic_qp *qp)
{
    struct nic_qp_engine *e = qp->eng;
    resp_stage_fill(qp);
    struct nic_stage *s = &e->resp_stage;
    if (s->head != s->tail && s->e[s->head % NIC_STAGE_SLOTS].ready)
        nic_tx_src_ready(qp->nic, &e->resp_src);
}

void nic_resp_on_tx(struct nic_qp *qp, const struct pkt *p)
{
    (void)p;
    if (work_count(qp->eng))
        resp_stage_run(qp); /* may stage a ready ACK: queue the source again */
}

/* ---------------------------------------------------------------- atomic unit */

static void atomic_start(struct nic *nic);

static void atomic_finish(struct nic *nic, struct nic_op *op)
{
    struct pkt *p = op->pkt;
    if (nic_op_stale(op) || !nic_stage_mark_ready(&op->qp->eng->resp_stage, p))
        pkt_free(nic->pool, p);
    else
        nic_tx_src_ready(nic, &op->qp->eng->resp_src);
    nic_op_free(op);
    nic->atom_busy = false;
    atomic_start(nic);
}

static void atomic_write_done(struct sim *sim, void *a, void *b)
{
    (void)sim;
    (void)b;
    struct nic_op *op = a;
    nic_copy_to_host(op->nic, op, op->data8);
    nic_trace_dma_write(op->nic, op, op->qp->qpn, "resp: atomic result");
    if (op->nic->host)
        host_dma_landed(op->nic->host);
    atomic_finish(op->nic, op);
}

static void atomic_exec_done(struct sim *sim, void *a, void *b)
{
    (void)b;
    struct nic_op *op = a;
    struct nic *nic = op->nic;
    if (!op->flag) { /* compare failed: nothing to write back */
        atomic_finish(nic, op);
        return;
    }
    nic->cnt.dma_writes++;
    if (nic->pcie)
        pcie_dma_write(nic->pcie, 8, atomic_write_done, op, NULL);
    else
        atomic_write_done(sim, op, NULL);
}

static void atomic_read_done(struct sim *sim, void *a, void *b)
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
    sim_call_in(sim, nic->p.atomic_proc_ps, atomic_exec_done, op, NULL);
}

static void atomic_start(struct nic *nic)
{
    if (nic->atom_busy || !nic->atom_head)
        return;
    struct nic_op *op = nic->atom_head;
    nic->atom_head = op->next;
    if (!nic->atom_head)
        nic->atom_tail = NULL;
    op->next = NULL;
    nic->atom_busy = true;
    nic->cnt.dma_reads++;
    if (nic->pcie)
        pcie_dma_read(nic->pcie, 8, atomic_read_done, op, NULL);
    else
        atomic_read_done(nic->sim, op, NULL);
}

static void atomic_submit(struct nic *nic, struct nic_op *op)
{
    op->next = NULL;
    if (nic->atom_tail)
        nic->atom_tail->next = op;
    else
        nic->atom_head = op;
    nic->atom_tail = op;
    atomic_start(nic);
}

void nic_atomic_teardown(struct nic *nic)
{
    nic->atom_head = nic->atom_tail = NULL; /* ops and packets go with their pools */
    nic->atom_busy = false;
}

/* ---------------------------------------------------------------- request handlers */

static enum resp_state fatal(struct resp_ctx *c, uint8_t nak, enum ibv_wc_status recv_err)
{
    c->nak = nak;
    c->recv_err = recv_err;
    return RESP_ERR_FATAL;
}

static enum resp_state drop(struct resp_ctx *c, const char *why)
{
    c->why = why;
    return RESP_DROP;
}

/* UC: give up the message in progress (a receive it was filling stays
 * posted: the next SEND overwrites it) and drop packets until the next
 * FIRST/ONLY. */
static void uc_abandon(struct nic_qp *qp)
{
    struct nic_qp_engine *e = qp->eng;
    if (e->resp_msg || !e->uc_drop)
        qp->nic->cnt.uc_msg_drops++;
    e->resp_msg = 0;
    e->resp_off = 0;
    e->uc_drop = true;
}

/* A UC/UD message that cannot be delivered is dropped silently (IBA 9.9:
 * unreliable services have no NAKs); UC drops the rest of it too. */
static enum resp_state drop_msg(struct nic_qp *qp, struct resp_ctx *c, const char *why)
{
    if (qp->init.qp_type == IBV_QPT_UC)
        uc_abandon(qp);
    return drop(c, why);
}

static enum resp_state check_psn(struct nic_qp *qp, struct resp_ctx *c)
{
    struct nic_qp_engine *e = qp->eng;
    int32_t d = nic_psn_diff(c->p->psn, e->epsn);
    switch (qp->init.qp_type) {
    case IBV_QPT_UD:
        return RESP_CHECK_QKEY; /* UD responders ignore the PSN (IBA 9.7.2) */
    case IBV_QPT_UC:
        /* a gap loses the message in progress; the next FIRST/ONLY,
         * whatever its PSN, starts afresh (IBA 9.7.? UC; rxe check_psn) */
        if (d != 0 || e->uc_drop) {
            if (c->mask & NIC_OPF_FIRST) {
                if (e->resp_msg)
                    uc_abandon(qp);
                e->uc_drop = false;
                e->epsn = c->p->psn;
                return RESP_CHECK_OP_SEQ;
            }
            if (!e->uc_drop)
                uc_abandon(qp);
            return drop(c, "resp: UC PSN gap, message lost");
        }
        return RESP_CHECK_OP_SEQ;
    default:
        break;
    }
    if (d > 0)
        return RESP_ERR_SEQ;
    if (d < 0)
        return RESP_DUPLICATE;
    e->nak_sent = false;
    return RESP_CHECK_OP_SEQ;
}

/* UD: the DETH Q_Key must be the QP's (IBA 10.2.4; the rule that a WR
 * Q_Key with the high bit set takes the QP's is applied by the sender;
 * privileged Q_Keys are not modelled). */
static enum resp_state check_qkey(struct nic_qp *qp, struct resp_ctx *c)
{
    if (c->p->deth_qkey != qp->attr.qkey) {
        qp->nic->cnt.qkey_drops++;
        return drop(c, "resp: UD Q_Key mismatch");
    }
    return RESP_CHECK_OP_SEQ;
}

static int remote_access_needed(uint32_t mask)
{
    if (mask & NIC_OPF_WRITE)
        return IBV_ACCESS_REMOTE_WRITE;
    if (mask & NIC_OPF_READ)
        return IBV_ACCESS_REMOTE_READ;
    if (mask & NIC_OPF_ATOMIC)
        return IBV_ACCESS_REMOTE_ATOMIC;
    return 0;
}

static enum resp_state check_op_seq(struct nic_qp *qp, struct resp_ctx *c)
{
    struct nic_qp_engine *e = qp->eng;
    uint32_t m = c->mask;
    bool rc = nic_qp_reliable(qp);
    bool bad = e->resp_msg ? (!(m & e->resp_msg) || !(m & (NIC_OPF_MIDDLE | NIC_OPF_LAST)) ||
                              (m & NIC_OPF_FIRST))
                           : !(m & NIC_OPF_FIRST);
    if (bad)
        return rc ? fatal(c, NIC_AETH_NAK_INV_REQ, IBV_WC_SUCCESS)
                  : drop_msg(qp, c, "resp: opcode out of sequence");
    int need = remote_access_needed(m);
    if (need && !((int)qp->attr.qp_access_flags & need))
        return rc ? fatal(c, NIC_AETH_NAK_REM_ACC, IBV_WC_SUCCESS)
                  : drop_msg(qp, c, "resp: remote access not enabled on the QP");
    return RESP_CHECK_RESOURCE;
}

static bool needs_recv_wqe(uint32_t m)
{
    return ((m & NIC_OPF_SEND) && (m & NIC_OPF_FIRST)) ||
           ((m & NIC_OPF_WRITE) && (m & NIC_OPF_IMMDT));
}

static enum resp_state check_resource(struct nic_qp *qp, struct resp_ctx *c)
{
    struct nic_qp_engine *e = qp->eng;
    if (needs_recv_wqe(c->mask) && qp->rq_head == qp->rq_tail) {
        if (nic_qp_reliable(qp))
            return RESP_ERR_RNR;
        if (qp->init.qp_type == IBV_QPT_UD)
            qp->nic->cnt.ud_no_recv++;
        return drop_msg(qp, c, "resp: no receive posted");
    }
    if (c->mask & (NIC_OPF_READ | NIC_OPF_ATOMIC)) {
        uint32_t max = qp->attr.max_dest_rd_atomic ? qp->attr.max_dest_rd_atomic : 1;
        if (e->rd_resp_outstanding >= max)
            return fatal(c, NIC_AETH_NAK_INV_REQ, IBV_WC_SUCCESS);
        if (work_count(e) >= NIC_RESP_WORK_SLOTS - 1)
            return drop(c, "resp: work queue full"); /* not taken: the requester resends */
    }
    return RESP_CHECK_ACCESS;
}

static enum nic_mr_status remote_check(struct nic_qp *qp, uint32_t key, uint64_t va, uint64_t len,
                                       int access, uint8_t **host)
{
    return nic_mr_check(qp->nic, key, qp->init.pd, va, len, access, host);
}

/* Bytes in front of a SEND's payload in the receive buffer: the GRH slot
 * of a UD receive. */
static uint32_t recv_prefix(const struct nic_qp *qp)
{
    return qp->init.qp_type == IBV_QPT_UD ? NIC_GRH_BYTES : 0;
}

/* A receive buffer problem: RC NAKs and errors the QP (class C); UC/UD
 * complete the receive in error and go on (class D, as rxe does). */
static enum resp_state recv_error(struct nic_qp *qp, struct resp_ctx *c, uint8_t nak,
                                  enum ibv_wc_status st)
{
    if (nic_qp_reliable(qp))
        return fatal(c, nak, st);
    c->recv_err = st;
    return RESP_ERR_RECV;
}

static enum resp_state check_access(struct nic_qp *qp, struct resp_ctx *c)
{
    struct nic_qp_engine *e = qp->eng;
    struct pkt *p = c->p;
    uint32_t m = c->mask;
    bool rc = nic_qp_reliable(qp);
    if (m & NIC_OPF_SEND) {
        const struct nic_recv_wqe *r = nic_rq_wqe(qp, qp->rq_head);
        if (m & NIC_OPF_FIRST) {
            e->resp_off = 0;
            for (uint32_t i = 0; i < r->num_sge; i++) {
                const struct nic_sge *s = &r->sge[i];
                if (s->length && nic_mr_check(qp->nic, s->lkey, qp->init.pd, s->addr, s->length,
                                              IBV_ACCESS_LOCAL_WRITE, NULL) != NIC_MR_OK)
                    return recv_error(qp, c, NIC_AETH_NAK_REM_OP, IBV_WC_LOC_PROT_ERR);
            }
        }
        if ((uint64_t)recv_prefix(qp) + e->resp_off + p->payload_len > r->length)
            return recv_error(qp, c, NIC_AETH_NAK_INV_REQ, IBV_WC_LOC_LEN_ERR);
        return RESP_EXECUTE;
    }
    if (m & NIC_OPF_WRITE) {
        if (m & NIC_OPF_FIRST) {
            e->resp_off = 0;
            e->resp_len = p->reth_dma_len;
            e->resp_key = p->reth_rkey;
            e->resp_host = NULL;
            if (p->reth_dma_len &&
                remote_check(qp, p->reth_rkey, p->reth_va, p->reth_dma_len, IBV_ACCESS_REMOTE_WRITE,
                             &e->resp_host) != NIC_MR_OK)
                return rc ? fatal(c, NIC_AETH_NAK_REM_ACC, IBV_WC_SUCCESS)
                          : drop_msg(qp, c, "resp: UC WRITE R_Key violation");
        }
        uint64_t end = (uint64_t)e->resp_off + p->payload_len;
        if (end > e->resp_len || ((m & NIC_OPF_LAST) && end != e->resp_len))
            return rc ? fatal(c, NIC_AETH_NAK_INV_REQ, IBV_WC_SUCCESS)
                      : drop_msg(qp, c, "resp: UC WRITE length mismatch");
        return RESP_EXECUTE;
    }
    if (m & NIC_OPF_READ) {
        if (p->reth_dma_len > NIC_MAX_MSG_BYTES)
            return fatal(c, NIC_AETH_NAK_INV_REQ, IBV_WC_SUCCESS);
        c->host = NULL;
        if (p->reth_dma_len && remote_check(qp, p->reth_rkey, p->reth_va, p->reth_dma_len,
                                            IBV_ACCESS_REMOTE_READ, &c->host) != NIC_MR_OK)
            return fatal(c, NIC_AETH_NAK_REM_ACC, IBV_WC_SUCCESS);
        return RESP_EXECUTE;
    }
    /* atomic (IBA 9.4.5: the address must be 8-byte aligned) */
    if (p->atomic_va & 7u)
        return fatal(c, NIC_AETH_NAK_INV_REQ, IBV_WC_SUCCESS);
    if (remote_check(qp, p->atomic_rkey, p->atomic_va, 8, IBV_ACCESS_REMOTE_ATOMIC, &c->host) !=
        NIC_MR_OK)
        return fatal(c, NIC_AETH_NAK_REM_ACC, IBV_WC_SUCCESS);
    return RESP_EXECUTE;
}

static void place_done(struct sim *sim, void *a, void *b)
{
    (void)sim;
    (void)b;
    struct nic_op *op = a;
    struct nic *nic = op->nic;
    nic_copy_to_host(nic, op, op->pkt ? op->pkt->payload : op->grh);
    nic_trace_dma_write(nic, op, op->pkt ? op->pkt->dest_qpn : (uint32_t)op->v,
                        op->pkt ? "resp: payload" : "resp: UD GRH");
    if (nic->host)
        host_dma_landed(nic->host);
    if (op->pkt)
        pkt_free(nic->pool, op->pkt);
    nic_op_free(op);
}

static void enqueue_read(struct nic_qp *qp, uint32_t psn, uint32_t key, uint8_t *host, uint32_t len,
                         bool dup)
{
    struct nic_qp_engine *e = qp->eng;
    struct nic_resp_work *w = work_push(e);
    if (!w)
        return;
    w->kind = NIC_RW_READ;
    w->dup = dup;
    w->psn = psn;
    w->msn = e->msn;
    w->key = key;
    w->host = host;
    w->len = len;
    w->npkts = len ? (len + e->mtu_bytes - 1) / e->mtu_bytes : 1;
    if (!dup)
        e->rd_resp_outstanding++;
    resp_stage_run(qp);
}

/* Remember an accepted atomic for duplicates (IBA 9.7.5.1.2: the responder
 * keeps the results of its last max_dest_rd_atomic atomics and replays
 * them; a duplicate never executes again). */
static void atomic_remember(struct nic_qp *qp, uint32_t psn)
{
    struct nic_qp_engine *e = qp->eng;
    uint32_t n = qp->attr.max_dest_rd_atomic ? qp->attr.max_dest_rd_atomic : 1;
    if (n > NIC_ATOMIC_HISTORY)
        n = NIC_ATOMIC_HISTORY;
    struct nic_atomic_hist *h = &e->atomic_hist[e->atomic_hist_next++ % n];
    h->valid = true;
    h->pending = true;
    h->psn = psn;
    h->orig = 0;
}

/* The GRH a UD receive finds in its first 40 bytes.  Our port is RoCEv2
 * over IPv4 (IPv4-mapped GIDs): like mlx5, the NIC writes the IPv4 header
 * in the last 20 bytes of the slot and leaves the first 20 zero (the
 * kernel's union rdma_network_hdr { struct ib_grh ibgrh; struct { u8
 * reserved[20]; struct iphdr roce4grh; }; }), which ibv_init_ah_from_wc
 * recognises by version 4 and a valid header checksum. */
static void build_grh(const struct nic *nic, const struct pkt *p, uint8_t *g)
{
    memset(g, 0, NIC_GRH_BYTES);
    uint8_t *ip = g + 20;
    union ibv_gid sg, dg;
    nic_gid_of_node(p->src_node, &sg);
    nic_gid_of_node(nic->node_id, &dg);
    uint32_t total = p->frame_bytes - PKT_ETH_HDR_BYTES - PKT_ETH_FCS_BYTES;
    if (p->frame_bytes < PKT_ETH_HDR_BYTES + PKT_ETH_FCS_BYTES + PKT_IPV4_HDR_BYTES)
        total = PKT_IPV4_HDR_BYTES;
    ip[0] = 0x45; /* version 4, IHL 5 */
    ip[1] = 0;    /* DSCP/ECN = traffic class 0 */
    ip[2] = (uint8_t)(total >> 8);
    ip[3] = (uint8_t)total;
    ip[6] = 0x40; /* DF */
    ip[8] = 64;   /* TTL: the AH's hop limit is not carried; 64 as the kernel's default */
    ip[9] = 17;   /* UDP */
    memcpy(ip + 12, sg.raw + 12, 4);
    memcpy(ip + 16, dg.raw + 12, 4);
    uint32_t sum = 0;
    for (unsigned i = 0; i < 20; i += 2)
        sum += (uint32_t)ip[i] << 8 | ip[i + 1];
    while (sum >> 16)
        sum = (sum & 0xffff) + (sum >> 16);
    uint16_t csum = (uint16_t)~sum;
    ip[10] = (uint8_t)(csum >> 8);
    ip[11] = (uint8_t)csum;
}

static enum resp_state execute(struct nic_qp *qp, struct resp_ctx *c)
{
    struct nic *nic = qp->nic;
    struct nic_qp_engine *e = qp->eng;
    struct pkt *p = c->p;
    uint32_t m = c->mask;
    if (m & NIC_OPF_READ) {
        e->msn++;
        enqueue_read(qp, p->psn, p->reth_rkey, c->host, p->reth_dma_len, false);
        e->epsn = nic_psn_add(
            e->epsn, p->reth_dma_len ? (p->reth_dma_len + e->mtu_bytes - 1) / e->mtu_bytes : 1);
        e->pkts_since_ack = 0;
        return RESP_DONE;
    }
    if (m & NIC_OPF_ATOMIC) {
        e->msn++;
        struct nic_resp_work *w = work_push(e);
        if (w) {
            w->kind = NIC_RW_ATOMIC;
            w->psn = p->psn;
            w->msn = e->msn;
            w->key = p->atomic_rkey;
            w->host = c->host;
            w->atomic_opcode = p->opcode;
            w->swap_add = p->atomic_swap_add;
            w->compare = p->atomic_compare;
            e->rd_resp_outstanding++;
            atomic_remember(qp, p->psn);
            resp_stage_run(qp);
        }
        e->epsn = nic_psn_add(e->epsn, 1);
        e->pkts_since_ack = 0;
        return RESP_DONE;
    }
    /* SEND / WRITE payload */
    uint32_t prefix = (m & NIC_OPF_SEND) ? recv_prefix(qp) : 0;
    if (prefix) { /* UD: the GRH first, then the payload behind it */
        const struct nic_recv_wqe *r = nic_rq_wqe(qp, qp->rq_head);
        struct nic_op *op = nic_op_alloc(nic, NIC_OP_PLACE, NULL);
        op->v = qp->qpn;
        build_grh(nic, p, op->grh);
        nic_sges_to_segs(nic, r->sge, r->num_sge, 0, prefix, op);
        nic->cnt.dma_writes++;
        if (nic->pcie)
            pcie_dma_write(nic->pcie, prefix, place_done, op, NULL);
        else
            place_done(nic->sim, op, NULL);
    }
    if (p->payload_len) {
        struct nic_op *op = nic_op_alloc(nic, NIC_OP_PLACE, NULL);
        op->pkt = p;
        if (m & NIC_OPF_SEND) {
            const struct nic_recv_wqe *r = nic_rq_wqe(qp, qp->rq_head);
            nic_sges_to_segs(nic, r->sge, r->num_sge, prefix + e->resp_off, p->payload_len, op);
        } else {
            op->n_seg = 1;
            op->seg[0] = (struct nic_seg){e->resp_host + e->resp_off, e->resp_key, p->payload_len};
        }
        c->owned = true;
        nic->cnt.dma_writes++;
        if (nic->pcie)
            pcie_dma_write(nic->pcie, p->payload_len, place_done, op, NULL);
        else
            place_done(nic->sim, op, NULL);
    }
    e->resp_off += p->payload_len;
    e->epsn = nic_psn_add(e->epsn, 1);
    if (m & NIC_OPF_LAST) {
        e->resp_msg = 0;
        return RESP_COMPLETE;
    }
    e->resp_msg = (m & NIC_OPF_SEND) ? NIC_OPF_SEND : NIC_OPF_WRITE;
    return RESP_ACKNOWLEDGE;
}

static enum resp_state complete(struct nic_qp *qp, struct resp_ctx *c)
{
    struct nic_qp_engine *e = qp->eng;
    struct pkt *p = c->p;
    uint32_t m = c->mask;
    e->msn++;
    if (m & NIC_OPF_RWR) {
        const struct nic_recv_wqe *r = nic_rq_wqe(qp, qp->rq_head);
        bool send = (m & NIC_OPF_SEND) != 0;
        bool ud = qp->init.qp_type == IBV_QPT_UD;
        struct ibv_wc wc = {
            .wr_id = r->wr_id,
            .status = IBV_WC_SUCCESS,
            .opcode = send ? IBV_WC_RECV : IBV_WC_RECV_RDMA_WITH_IMM,
            .byte_len = send ? recv_prefix(qp) + e->resp_off : e->resp_len,
            .qp_num = qp->qpn,
            .src_qp = ud ? p->src_qpn : qp->attr.dest_qp_num,
            .wc_flags = ud ? IBV_WC_GRH : 0,
        };
        if (m & NIC_OPF_IMMDT) {
            wc.imm_data = p->imm_data;
            wc.wc_flags |= IBV_WC_WITH_IMM;
        }
        qp->rq_head++;
        nic_cqe_write(qp->nic, qp->init.recv_cq, &wc, p->se);
    }
    e->resp_off = 0;
    return RESP_ACKNOWLEDGE;
}

static enum resp_state acknowledge(struct nic_qp *qp, struct resp_ctx *c)
{
    struct nic_qp_engine *e = qp->eng;
    if (!nic_qp_reliable(qp))
        return RESP_DONE; /* UC/UD: no ACKs */
    e->pkts_since_ack++;
    uint32_t every = qp->nic->p.ack_every_pkts ? qp->nic->p.ack_every_pkts : 1;
    if (c->p->ack_req || e->pkts_since_ack >= every) {
        e->pkts_since_ack = 0;
        queue_ack(qp, NIC_AETH_ACK, c->p->psn);
    }
    return RESP_DONE;
}

/* A request the responder has already executed (PSN behind the expected
 * one: the requester went back N, or an ACK was lost).  Nothing is placed
 * again and no receive is consumed again (IBA 9.7.5.1.2). */
static enum resp_state duplicate(struct nic_qp *qp, struct resp_ctx *c)
{
    struct nic_qp_engine *e = qp->eng;
    struct pkt *p = c->p;
    if (c->mask & NIC_OPF_READ) { /* reads are idempotent: executed again */
        uint8_t *host = NULL;
        if (p->reth_dma_len && remote_check(qp, p->reth_rkey, p->reth_va, p->reth_dma_len,
                                            IBV_ACCESS_REMOTE_READ, &host) != NIC_MR_OK)
            return drop(c, "resp: duplicate READ out of bounds");
        enqueue_read(qp, p->psn, p->reth_rkey, host, p->reth_dma_len, true);
        return RESP_DONE;
    }
    if (c->mask & NIC_OPF_ATOMIC) { /* replayed from the saved result, never re-executed */
        for (unsigned i = 0; i < NIC_ATOMIC_HISTORY; i++) {
            const struct nic_atomic_hist *h = &e->atomic_hist[i];
            if (h->valid && h->psn == p->psn) {
                if (h->pending)
                    return drop(c, "resp: duplicate atomic still executing");
                struct nic_resp_work *w = work_push(e);
                if (w) {
                    w->kind = NIC_RW_ATOMIC_REPLAY;
                    w->psn = p->psn;
                    w->msn = e->msn;
                    w->orig = h->orig;
                    resp_stage_run(qp);
                }
                return RESP_DONE;
            }
        }
        return drop(c, "resp: duplicate atomic not in the history");
    }
    queue_ack(qp, NIC_AETH_ACK, nic_psn_add(e->epsn, NIC_PSN_MASK)); /* epsn - 1 */
    return RESP_DONE;
}

static enum resp_state err_seq(struct nic_qp *qp, struct resp_ctx *c)
{
    struct nic_qp_engine *e = qp->eng;
    if (!e->nak_sent) {
        e->nak_sent = true;
        queue_ack(qp, NIC_AETH_NAK_PSN_SEQ, e->epsn);
    }
    return drop(c, "resp: PSN sequence error");
}

static enum resp_state err_rnr(struct nic_qp *qp, struct resp_ctx *c)
{
    struct nic_qp_engine *e = qp->eng;
    e->nak_sent = true; /* drop what follows until the retry arrives */
    queue_ack(qp, (uint8_t)(NIC_AETH_RNR_NAK | (qp->attr.min_rnr_timer & 0x1f)), c->p->psn);
    c->why = "resp: RNR (no receive posted)";
    return RESP_DROP;
}

static void recv_error_cqe(struct nic_qp *qp, enum ibv_wc_status st)
{
    struct ibv_wc wc = {
        .wr_id = nic_rq_wqe(qp, qp->rq_head)->wr_id,
        .status = st,
        .opcode = IBV_WC_RECV,
        .vendor_err = nic_vendor_err(st),
        .qp_num = qp->qpn,
        .src_qp = qp->attr.dest_qp_num,
    };
    qp->rq_head++;
    nic_cqe_write(qp->nic, qp->init.recv_cq, &wc, false);
}

/* UC/UD receive error: the receive completes in error, the message is
 * dropped, the QP goes on. */
static enum resp_state err_recv(struct nic_qp *qp, struct resp_ctx *c)
{
    if (qp->rq_head != qp->rq_tail)
        recv_error_cqe(qp, c->recv_err);
    return drop_msg(qp, c, "resp: receive buffer error");
}

static enum resp_state err_fatal(struct nic_qp *qp, struct resp_ctx *c)
{
    struct nic_qp_engine *e = qp->eng;
    if (c->recv_err != IBV_WC_SUCCESS && qp->rq_head != qp->rq_tail)
        recv_error_cqe(qp, c->recv_err);
    /* the NAK leaves even though the QP is about to enter ERR */
    nic_tx_ctrl(qp->nic, ack_pkt(qp, c->nak, e->epsn, e->msn));
    nic_qp_to_error(qp);
    return RESP_DONE;
}

static enum resp_state do_drop(struct nic_qp *qp, struct resp_ctx *c)
{
    qp->nic->cnt.rx_drops++;
    nic_trace_pkt(qp->nic, TRACE_PKT_DROP, c->p, qp->qpn, c->why);
    return RESP_DONE;
}

void nic_resp_rx(struct nic_qp *qp, struct pkt *p)
{
    struct resp_ctx c = {.p = p, .mask = nic_opcode(p->opcode)->mask};
    enum resp_state st = RESP_CHECK_PSN;
    while (st != RESP_DONE) {
        switch (st) {
        case RESP_CHECK_PSN:
            st = check_psn(qp, &c);
            break;
        case RESP_CHECK_QKEY:
            st = check_qkey(qp, &c);
            break;
        case RESP_DUPLICATE:
            st = duplicate(qp, &c);
            break;
        case RESP_CHECK_OP_SEQ:
            st = check_op_seq(qp, &c);
            break;
        case RESP_CHECK_RESOURCE:
            st = check_resource(qp, &c);
            break;
        case RESP_CHECK_ACCESS:
            st = check_access(qp, &c);
            break;
        case RESP_EXECUTE:
            st = execute(qp, &c);
            break;
        case RESP_COMPLETE:
            st = complete(qp, &c);
            break;
        case RESP_ACKNOWLEDGE:
            st = acknowledge(qp, &c);
            break;
        case RESP_ERR_SEQ:
            st = err_seq(qp, &c);
            break;
        case RESP_ERR_RNR:
            st = err_rnr(qp, &c);
            break;
        case RESP_ERR_RECV:
            st = err_recv(qp, &c);
            break;
        case RESP_ERR_FATAL:
            st = err_fatal(qp, &c);
            break;
        case RESP_DROP:
            st = do_drop(qp, &c);
            break;
        case RESP_DONE:
            break;
        }
    }
    if (!c.owned)
        pkt_free(qp->nic->pool, p);
}

/* ---------------------------------------------------------------- life cycle */

void nic_resp_init(struct nic_qp *qp)
{
    struct nic_qp_engine *e = qp->eng;
    if (!e->resp_src.qp) {
        e->resp_src.qp = qp;
        e->resp_src.stage = &e->resp_stage;
        e->resp_src.kind = NIC_TXSRC_RESP;
        nic_stage_init(&e->resp_stage);
    }
    e->epsn = e->msn = 0;
    e->nak_sent = false;
    e->uc_drop = false;
    e->resp_msg = 0;
    e->resp_off = e->resp_len = e->resp_key = 0;
    e->resp_host = NULL;
    e->pkts_since_ack = 0;
    e->rd_resp_outstanding = 0;
    e->work_head = e->work_tail = 0;
    memset(e->atomic_hist, 0, sizeof(e->atomic_hist));
    e->atomic_hist_next = 0;
}

void nic_resp_stop(struct nic_qp *qp)
{
    struct nic_qp_engine *e = qp->eng;
    nic_stage_clear(qp->nic, &e->resp_stage);
    e->work_head = e->work_tail = 0;
    e->resp_msg = 0;
    e->resp_off = 0;
    e->rd_resp_outstanding = 0;
}
