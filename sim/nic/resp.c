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
 *  EXECUTE       SEND/WRITE payload: one placement write into host memory
 *                (dma.c: strict, or relaxed chunks; the memcpy happens
 *                when it lands); READ/atomic: a work item for the
 *                response stager.  With ib-ar a packet may have been
 *                placed already when it arrived ahead of its turn (see
 *                "IB adaptive routing" below).
 *  COMPLETE      last packet of a SEND / WRITE-with-immediate: receive CQE
 *                (byte_len, imm, src_qp, SE for solicited notification).
 *
 * RIMA appends (aq.c, docs/rima.md): at CHECK_RESOURCE an append's first
 * packet waits rima.tpt_latency for the tail pointer table (aq_tpt_fn;
 * the QP's later packets queue behind it in arrival order); CHECK_ACCESS
 * then reserves room at the AQ's tail (nic_aq_reserve: no room -> RNR NAK,
 * longer than the region -> invalid request NAK, unknown AQ or another PD
 * -> remote access NAK); EXECUTE places each packet at the offset + its
 * position; COMPLETE writes one IBV_WC_RECV_APPEND CQE (wr_id = offset) to
 * the AQ's CQ.  No receive WQE is consumed.
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
 * Atomics are carried out by the NIC's atomic unit (atomic.c); their ACK
 * waits in the staging ring, not ready, until the unit has the original. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <rnicsim/rima.h>

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
    bool placed;                 /* ib-ar: its payload was placed when it arrived */
    uint8_t *host;               /* READ/atomic target */
    bool tpt_done;               /* append first packet: the TPT step is behind it */
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
    if (work_count(e) == e->work_cap) { /* full: double the ring (items keep their index) */
        uint32_t cap = e->work_cap ? 2 * e->work_cap : 4;
        struct nic_resp_work *nw = malloc(cap * sizeof(*nw));
        if (!nw) {
            fprintf(stderr, "rnicsim: out of memory for a responder work queue\n");
            abort();
        }
        for (uint32_t i = e->work_head; i != e->work_tail; i++)
            nw[i & (cap - 1)] = *nic_resp_work_at(e, i);
        free(e->work);
        e->work = nw;
        e->work_cap = cap;
    }
    struct nic_resp_work *w = nic_resp_work_at(e, e->work_tail);
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
            struct nic_resp_work *t = nic_resp_work_at(e, e->work_tail - 1);
            if (t->kind == NIC_RW_ACK && t->syndrome == NIC_AETH_ACK &&
                t->place_need == e->place_issued) {
                t->psn = psn;
                t->msn = e->msn;
                return;
            }
        } else {
            struct nic_stage_ent *t = nic_stage_tail_ent(&e->resp_stage);
            /* not while placements wait for translation: the merged ACK
             * would leave before their data */
            if (t && t->ready && e->place_landed == e->place_issued &&
                nic_opcode_rc_op(t->pkt->opcode) == IB_OPCODE_RC_ACKNOWLEDGE &&
                t->pkt->aeth_syndrome == NIC_AETH_ACK) {
                t->pkt->psn = psn;
                t->pkt->aeth_msn = e->msn;
                return;
            }
        }
    }
    if (syndrome != NIC_AETH_ACK && nic_tr(qp->nic)) /* a NAK: what and from which PSN */
        nic_trace_instant(
            qp->nic, TRK_RESP,
            &(struct trace_rec){.qpn = qp->qpn,
                                .psn = psn,
                                .status = syndrome,
                                .peer = qp->dest_node,
                                .peer_qpn = qp->attr.dest_qp_num,
                                .where =
                                    (syndrome & NIC_AETH_TYPE_MASK) == NIC_AETH_RNR_NAK ? "RNR NAK"
                                    : syndrome == NIC_AETH_NAK_PSN_SEQ ? "NAK: PSN sequence error"
                                                                       : "NAK"});
    struct nic_resp_work *w = work_push(e);
    if (!w)
        return; /* FIFO full: the requester's timer recovers */
    w->kind = NIC_RW_ACK;
    w->syndrome = syndrome;
    w->psn = psn;
    w->msn = e->msn;
    /* an ACK never leaves before the data it acknowledges are visible in
     * this host's memory (dma.c counts the QP's placements) */
    w->place_need = e->place_issued;
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

/* A READ response packet's data arrived from host memory.  A DMA read does
 * not pass an earlier posted write, relaxed ones included (dma.c): a READ
 * after a WRITE returns the written bytes. */
static void read_fetched(struct sim *sim, void *a, void *b)
{
    struct nic_op *op = a;
    if (!nic_dma_wait_relaxed(op->nic, nic_payload_fetched, a, b))
        nic_payload_fetched(sim, a, b);
}

/* Turn work items into packets while the staging ring has room. */
static void resp_stage_fill(struct nic_qp *qp)
{
    struct nic *nic = qp->nic;
    struct nic_qp_engine *e = qp->eng;
    struct nic_stage *s = &e->resp_stage;
    uint32_t mtu = e->mtu_bytes;
    while (work_count(e)) {
        struct nic_resp_work *w = nic_resp_work_at(e, e->work_head);
        switch ((enum nic_resp_work_kind)w->kind) {
        case NIC_RW_ACK:
            if (nic_stage_full(s, 0) || e->place_landed < w->place_need)
                return; /* its data are not all visible yet: nic_resp_placed() resumes */
            nic_stage_push(s, ack_pkt(qp, w->syndrome, w->psn, w->msn), true);
            break;
        case NIC_RW_READ:
            if (w->eng_wait)
                return; /* still in the READ engine (readeng.c): nic_resp_kick resumes */
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
                /* one host fetch stream per 4 KiB of the READ (docs/nic.md) */
                op->mem_chain =
                    nic_fetch_chain(e->resp_fetch_chain, &e->resp_fetch_cur,
                                    off % NIC_FETCH_STREAM_BYTES == 0 || w->done_pkts == 1);
                if (nic_tr(nic))
                    op->tr_t0 = sim_now(nic->sim);
                nic_stage_push(s, p, false);
                nic_mem_read(nic, op, PCIE_K_PAYLOAD_RD, plen, read_fetched, &qp->eng->resp_src);
            }
            if (!w->dup && e->rd_resp_outstanding)
                e->rd_resp_outstanding--;
            if (w->eng_counted) {
                w->eng_counted = false;
                nic_rdeng_done(nic);
            }
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
            nic_atomic_submit(nic, op);
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

static void resp_run(struct nic_qp *qp, struct resp_ctx *cp, enum resp_state st);
static void resp_drain_held(struct nic_qp *qp);

/* A slot of the work FIFO is free again: the waiting READ / atomic goes on
 * from the resource check, then the packets that queued behind it. */
static void resp_work_resume(struct nic_qp *qp)
{
    struct nic_qp_engine *e = qp->eng;
    struct pkt *p = e->work_wait;
    if (!p || e->dead || work_count(e) >= NIC_RESP_WORK_SLOTS - 1)
        return;
    e->work_wait = NULL;
    if (!nic_qp_can_receive(qp)) {
        pkt_free(qp->nic->pool, p);
        return;
    }
    struct resp_ctx c = {.p = p, .mask = nic_opcode(p->opcode)->mask};
    resp_run(qp, &c, RESP_CHECK_RESOURCE);
    resp_drain_held(qp);
}

static void resp_stage_run(struct nic_qp *qp)
{
    struct nic_qp_engine *e = qp->eng;
    resp_stage_fill(qp);
    if (e->work_wait)
        resp_work_resume(qp);
    struct nic_stage *s = &e->resp_stage;
    if (nic_stage_head_ready(s))
        nic_tx_src_ready(qp->nic, &e->resp_src);
}

void nic_resp_kick(struct nic_qp *qp)
{
    if (!qp->eng->dead)
        resp_stage_run(qp);
}

void nic_resp_placed(struct nic_qp *qp)
{
    struct nic_qp_engine *e = qp->eng;
    if (!work_count(e))
        return;
    const struct nic_resp_work *w = nic_resp_work_at(e, e->work_head);
    if (w->kind == NIC_RW_ACK && w->place_need <= e->place_landed)
        resp_stage_run(qp); /* the head ACK was waiting for this one */
}

void nic_resp_on_tx(struct nic_qp *qp, const struct pkt *p)
{
    (void)p;
    if (work_count(qp->eng))
        resp_stage_run(qp); /* may stage a ready ACK: queue the source again */
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
    /* XRC target: the message goes to the SRQ its XRCETH names, which must
     * be an XRC SRQ of the QP's domain (xrc.c) */
    if (qp->init.xrc == NIC_XRC_TGT && (m & NIC_OPF_FIRST) &&
        !nic_xrc_tgt_bind(qp, c->p->xrc_srqn)) {
        qp->nic->cnt.xrc_bad_srqn++;
        return fatal(c, NIC_AETH_NAK_INV_REQ, IBV_WC_SUCCESS);
    }
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
    if ((c->mask & NIC_OPF_APPEND) && (c->mask & NIC_OPF_FIRST) && !c->tpt_done &&
        qp->nic->p.rima_tpt_ps) {
        /* RIMA: the TPT lookup + add takes rima_tpt_ps; the packet (and
         * the QP's later ones, nic_resp_rx) wait for it (aq_tpt_fn) */
        e->aq_wait = c->p;
        c->owned = true;
        sim_schedule_at(qp->nic->sim, &e->aq_ev, nic_aq_tpt_done_ps(qp->nic));
        return RESP_DONE;
    }
    if (needs_recv_wqe(c->mask) && nic_rq_empty(qp)) {
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
        if (work_count(e) >= NIC_RESP_WORK_SLOTS - 1) {
            /* the FIFO is full of ACKs waiting for their placements: the
             * request waits on chip for a slot (resp_work_resume) and the
             * QP's later packets behind it, as a lossless link's receiver
             * holds what it cannot take yet (InfiniBand credits, PFC)
             * rather than dropping it for the requester's timeout */
            e->work_wait = c->p;
            qp->nic->cnt.resp_work_waits++;
            c->owned = true;
            return RESP_DONE;
        }
    }
    return RESP_CHECK_ACCESS;
}

static enum nic_mr_status remote_check(struct nic_qp *qp, uint32_t key, uint64_t va, uint64_t len,
                                       int access, uint8_t **host)
{
    /* an XRC target has no PD: the message's SRQ gives it (xrc.c) */
    const struct nic_pd *pd = qp->init.xrc == NIC_XRC_TGT ? nic_rq_pd(qp) : qp->init.pd;
    return nic_mr_check(qp->nic, key, pd, va, len, access, host);
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

/* RIMA append: the first packet takes room at the AQ's tail (aq.c); every
 * packet must stay inside the message the first one announced. */
static enum resp_state check_append(struct nic_qp *qp, struct resp_ctx *c)
{
    struct nic_qp_engine *e = qp->eng;
    struct pkt *p = c->p;
    if (c->mask & NIC_OPF_FIRST) {
        e->resp_off = 0;
        e->resp_len = p->reth_dma_len;
        e->resp_aqn = p->reth_rkey;
        switch (
            nic_aq_reserve(qp->nic, p->reth_rkey, qp->init.pd, p->reth_dma_len, &e->resp_aq_off)) {
        case NIC_AQ_OK:
            e->resp_aq_serial = nic_aq_lookup(qp->nic, p->reth_rkey)->serial;
            e->resp_aq_open = true;
            break;
        case NIC_AQ_NO_QUEUE:
            return fatal(c, NIC_AETH_NAK_REM_ACC, IBV_WC_SUCCESS);
        case NIC_AQ_TOO_BIG:
            return fatal(c, NIC_AETH_NAK_INV_REQ, IBV_WC_SUCCESS);
        case NIC_AQ_NO_ROOM:
            return RESP_ERR_RNR;
        }
    }
    /* every packet: the very queue the first packet reserved in (a number
     * alone could name a later queue of the same slot), and a placement
     * inside its region - never a write outside it */
    const struct nic_aq *aq = nic_aq_lookup(qp->nic, e->resp_aqn);
    if (!aq || aq->serial != e->resp_aq_serial)
        return fatal(c, NIC_AETH_NAK_REM_ACC, IBV_WC_SUCCESS); /* destroyed meanwhile */
    uint64_t end = (uint64_t)e->resp_off + p->payload_len;
    if (end > e->resp_len || ((c->mask & NIC_OPF_LAST) && end != e->resp_len))
        return fatal(c, NIC_AETH_NAK_INV_REQ, IBV_WC_SUCCESS);
    if (e->resp_aq_off > aq->region_bytes || end > aq->region_bytes - e->resp_aq_off)
        return fatal(c, NIC_AETH_NAK_REM_ACC, IBV_WC_SUCCESS);
    return RESP_EXECUTE;
}

static enum resp_state check_access(struct nic_qp *qp, struct resp_ctx *c)
{
    struct nic_qp_engine *e = qp->eng;
    struct pkt *p = c->p;
    uint32_t m = c->mask;
    bool rc = nic_qp_reliable(qp);
    if (m & NIC_OPF_APPEND)
        return check_append(qp, c);
    if (m & NIC_OPF_SEND) {
        const struct nic_recv_wqe *r = nic_rq_cur(qp);
        if (m & NIC_OPF_FIRST) {
            e->resp_off = 0;
            for (uint32_t i = 0; i < r->num_sge; i++) {
                const struct nic_sge *s = &r->sge[i];
                if (s->length && nic_mr_check(qp->nic, s->lkey, nic_rq_pd(qp), s->addr, s->length,
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
    /* the NIC's READ engine takes the request first (readeng.c) */
    if (qp->nic->p.rd_req_proc_ps || qp->nic->p.max_rd_resp) {
        w->eng_wait = true;
        nic_rdeng_submit(qp, e->work_tail - 1);
    }
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

/* The GRH a UD receive finds in its first 40 bytes.  On a RoCEv2 port
 * (IPv4-mapped GIDs), like mlx5, the NIC writes the IPv4 header in the last
 * 20 bytes of the slot and leaves the first 20 zero (the kernel's union
 * rdma_network_hdr { struct ib_grh ibgrh; struct { u8 reserved[20]; struct
 * iphdr roce4grh; }; }), which ibv_init_ah_from_wc recognises by version 4
 * and a valid header checksum.  On an InfiniBand port the packet's own GRH
 * if it carried one (IBA 8.3: IPVer 6, PayLen from the BTH through the ICRC,
 * NxtHdr 0x1B, HopLmt, SGID, DGID; as Linux ib_ud_header_init builds it); a
 * packet without one leaves the 40 bytes zero and its completion without
 * IBV_WC_GRH (ibv_poll_cq(3): "GRH is present"). */
static void build_grh(const struct nic *nic, const struct pkt *p, uint8_t *g)
{
    memset(g, 0, NIC_GRH_BYTES);
    if (p->framing == PKT_FRAMING_IB_LOCAL)
        return;
    union ibv_gid sg, dg;
    nic_gid_of_node(p->src_node, &sg);
    nic_gid_of_node(nic->node_id, &dg);
    if (p->framing == PKT_FRAMING_IB_GLOBAL) {
        uint32_t paylen = p->frame_bytes - PKT_IB_LRH_BYTES - PKT_IB_GRH_BYTES - PKT_IB_VCRC_BYTES;
        /* IPVer 6, TClass, FlowLabel: the sender's address vector's */
        uint32_t w0 = (6u << 28) | ((uint32_t)p->grh_tclass << 20) | p->grh_flow_label;
        g[0] = (uint8_t)(w0 >> 24);
        g[1] = (uint8_t)(w0 >> 16);
        g[2] = (uint8_t)(w0 >> 8);
        g[3] = (uint8_t)w0;
        g[4] = (uint8_t)(paylen >> 8);
        g[5] = (uint8_t)paylen;
        g[6] = 0x1b;             /* NxtHdr: IBA transport */
        g[7] = p->grh_hop_limit; /* HopLmt as sent (no router on the way decrements it) */
        memcpy(g + 8, sg.raw, 16);
        memcpy(g + 24, dg.raw, 16);
        return;
    }
    uint8_t *ip = g + 20;
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
            w->atomic_opcode = nic_opcode_rc_op(p->opcode);
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
    if (m & NIC_OPF_FIRST)
        e->ar.msg_psn = p->psn; /* ib-ar: the message now in progress */
    /* UD: the GRH in front of the payload.  It is written after the
     * payload: issued first it would take the PCIe link from now on and
     * hold the payload behind it, which lost its cut-through (the UD 4 KiB
     * SEND latency was 250 ns above RC's); software sees neither before the
     * CQE, which follows both. */
    struct nic_op *grh_op = NULL;
    if (prefix) {
        const struct nic_recv_wqe *r = nic_rq_cur(qp);
        grh_op = nic_op_alloc(nic, NIC_OP_PLACE, NULL);
        build_grh(nic, p, grh_op->grh);
        nic_sges_to_segs(nic, r->sge, r->num_sge, 0, prefix, grh_op);
    }
    if (p->payload_len && !c->placed) { /* ib-ar: placed already when it arrived */
        struct nic_op *op = nic_op_alloc(nic, NIC_OP_PLACE, NULL);
        op->pkt = p;
        if (m & NIC_OPF_SEND) {
            const struct nic_recv_wqe *r = nic_rq_cur(qp);
            nic_sges_to_segs(nic, r->sge, r->num_sge, prefix + e->resp_off, p->payload_len, op);
        } else if (m & NIC_OPF_APPEND) { /* at the offset the TPT gave the message */
            const struct nic_aq *aq = nic_aq_lookup(nic, e->resp_aqn);
            op->n_seg = 1;
            op->seg[0] = (struct nic_seg){aq->buf + e->resp_aq_off + e->resp_off, aq->mr->lkey,
                                          p->payload_len};
        } else {
            op->n_seg = 1;
            op->seg[0] = (struct nic_seg){e->resp_host + e->resp_off, e->resp_key, p->payload_len};
        }
        c->owned = true;
        /* PSN in the trace (check-order counts placements out of PSN order);
         * none for UD, whose PSNs come from many senders */
        nic_dma_place(nic, op, p->payload, p->payload_len, qp->qpn,
                      qp->init.qp_type == IBV_QPT_UD ? 0 : p->psn, "resp: payload");
    }
    if (grh_op)
        nic_dma_place(nic, grh_op, grh_op->grh, prefix, qp->qpn, 0, "resp: UD GRH");
    e->resp_off += p->payload_len;
    e->epsn = nic_psn_add(e->epsn, 1);
    if (m & NIC_OPF_LAST) {
        e->resp_msg = 0;
        return RESP_COMPLETE;
    }
    e->resp_msg = (m & NIC_OPF_SEND)     ? NIC_OPF_SEND
                  : (m & NIC_OPF_APPEND) ? NIC_OPF_APPEND
                                         : NIC_OPF_WRITE;
    return RESP_ACKNOWLEDGE;
}

static enum resp_state complete(struct nic_qp *qp, struct resp_ctx *c)
{
    struct nic_qp_engine *e = qp->eng;
    struct pkt *p = c->p;
    uint32_t m = c->mask;
    e->msn++;
    if (m & NIC_OPF_APPEND) { /* RIMA: one CQE per message on the AQ's CQ */
        const struct nic_aq *aq = nic_aq_lookup(qp->nic, e->resp_aqn);
        e->resp_aq_open = false;
        struct ibv_wc wc = {
            .wr_id = e->resp_aq_off,
            .status = IBV_WC_SUCCESS,
            .opcode = IBV_WC_RECV_APPEND,
            .byte_len = e->resp_len,
            .qp_num = qp->qpn,
            .src_qp = qp->attr.dest_qp_num,
        };
        nic_cqe_write(qp->nic, aq->cq, &wc, p->se);
    } else if (m & NIC_OPF_RWR) {
        const struct nic_recv_wqe *r = nic_rq_cur(qp);
        bool send = (m & NIC_OPF_SEND) != 0;
        bool ud = qp->init.qp_type == IBV_QPT_UD;
        struct ibv_wc wc = {
            .wr_id = r->wr_id,
            .status = IBV_WC_SUCCESS,
            .opcode = send ? IBV_WC_RECV : IBV_WC_RECV_RDMA_WITH_IMM,
            .byte_len = send ? recv_prefix(qp) + e->resp_off : e->resp_len,
            .qp_num = qp->qpn,
            .src_qp = ud ? p->src_qpn : qp->attr.dest_qp_num,
            .wc_flags = ud && p->framing != PKT_FRAMING_IB_LOCAL ? IBV_WC_GRH : 0,
            /* an InfiniBand packet's source LID (nic.h: LID = node + 1) */
            .slid = p->framing != PKT_FRAMING_ROCEV2 ? (uint16_t)(p->src_node + 1) : 0,
        };
        if (m & NIC_OPF_IMMDT) {
            wc.imm_data = p->imm_data;
            wc.wc_flags |= IBV_WC_WITH_IMM;
        }
        struct nic_cq *cq = nic_qp_recv_cq(qp); /* before consume: an XRC SRQ's CQ */
        nic_rq_consume(qp);
        nic_cqe_write(qp->nic, cq, &wc, p->se);
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
        .wr_id = nic_rq_cur(qp)->wr_id,
        .status = st,
        .opcode = IBV_WC_RECV,
        .vendor_err = nic_vendor_err(st),
        .qp_num = qp->qpn,
        .src_qp = qp->attr.dest_qp_num,
    };
    struct nic_cq *cq = nic_qp_recv_cq(qp);
    nic_rq_consume(qp);
    nic_cqe_write(qp->nic, cq, &wc, false);
}

/* UC/UD receive error: the receive completes in error, the message is
 * dropped, the QP goes on. */
static enum resp_state err_recv(struct nic_qp *qp, struct resp_ctx *c)
{
    if (!nic_rq_empty(qp))
        recv_error_cqe(qp, c->recv_err);
    return drop_msg(qp, c, "resp: receive buffer error");
}

static enum resp_state err_fatal(struct nic_qp *qp, struct resp_ctx *c)
{
    struct nic_qp_engine *e = qp->eng;
    if (c->recv_err != IBV_WC_SUCCESS && !nic_rq_empty(qp))
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

/* One request packet through the responder's checks, in PSN order, from
 * state `st` on. */
static void resp_run(struct nic_qp *qp, struct resp_ctx *cp, enum resp_state st)
{
    struct resp_ctx c = *cp;
    struct pkt *p = c.p;
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

static void resp_process(struct nic_qp *qp, struct pkt *p, bool placed)
{
    struct resp_ctx c = {.p = p, .mask = nic_opcode(p->opcode)->mask, .placed = placed};
    resp_run(qp, &c, RESP_CHECK_PSN);
}

/* ---------------------------------------------------------------- IB adaptive routing */

/* nic.transport: ib-ar (docs/nic.md "IB adaptive routing").  RC semantics -
 * reliable; messages executed, completed and ACKed in PSN order - but the
 * packets of a message may arrive out of order: per-packet spraying in the
 * fabric, and the NIC's own stand-in for adaptive-routing path skew: each
 * arriving RC request packet enters the receive pipeline after a delay
 * drawn uniformly from [0, ar_max_delay_ps] (nic_ar_skew_ps, called by
 * nic.c; stream "nic<N>.ar"), so it arrives as if by a longer path.
 * The responder does not go back N for them (NVIDIA's "out-of-order data
 * placement", ConnectX-5 and later, RC QPs):
 *
 *  - a packet ahead of the expected PSN, within NIC_AR_WINDOW, is kept in
 *    the reorder window, one slot per PSN (a second copy is dropped);
 *  - if it belongs to the message in progress - every ib-ar request packet
 *    carries the first PSN of its message (pkt.ar_msg_psn) and every ib-ar
 *    WRITE packet the message's RETH, the placement context an
 *    out-of-order responder needs - and what its placement needs checks
 *    out (WRITE: QP access, rkey, bounds; SEND: a posted receive, its
 *    SGEs, the length), its payload is placed at once at offset (PSN -
 *    first PSN) * MTU: the bytes of a message land out of order, a last
 *    byte can land before earlier ones; a header-only copy waits;
 *  - packets of later messages wait whole in the window;
 *  - whenever the expected PSN is there, it and the held packets after it
 *    go through the normal state machine in PSN order (checks, receive
 *    CQE, ACK) without a second DMA for those placed early: a message
 *    completes and is ACKed once all its packets are in, and its CQE is
 *    written after all its placement writes were issued;
 *  - a hole that outlives ar_nak_delay_ps is a loss: one PSN sequence NAK
 *    (the requester goes back N; copies of held packets are dropped), the
 *    local ACK timeout stays the last resort. */

static bool ar_qp(const struct nic_qp *qp)
{
    return qp->nic->p.transport == NIC_TRANSPORT_IB_AR && qp->init.qp_type == IBV_QPT_RC;
}

static bool ar_is_placed(const struct nic_ar_window *w, uint32_t i)
{
    return (w->placed[i / 64] >> (i % 64)) & 1u;
}

static void ar_mark_placed(struct nic_ar_window *w, uint32_t i, bool on)
{
    if (on)
        w->placed[i / 64] |= 1ull << (i % 64);
    else
        w->placed[i / 64] &= ~(1ull << (i % 64));
}

/* The QP's reorder window, allocated when it first holds a packet. */
static struct nic_ar_window *ar_window(struct nic_qp *qp)
{
    struct nic_ar *a = &qp->eng->ar;
    if (!a->win) {
        a->win = calloc(1, sizeof(*a->win));
        if (!a->win) {
            fprintf(stderr, "rnicsim: out of memory for an ib-ar reorder window\n");
            abort();
        }
    }
    return a->win;
}

static void ar_drop(struct nic_qp *qp, struct pkt *p, const char *why)
{
    qp->nic->cnt.rx_drops++;
    nic_trace_pkt(qp->nic, TRACE_PKT_DROP, p, qp->qpn, why);
    pkt_free(qp->nic->pool, p);
}

/* Free every held packet (QP stops, resets or errors). */
static void ar_clear(struct nic_qp *qp)
{
    struct nic_ar *a = &qp->eng->ar;
    struct nic_ar_window *w = a->win;
    for (uint32_t i = 0; w && a->held && i < NIC_AR_WINDOW; i++)
        if (w->slot[i]) {
            pkt_free(qp->nic->pool, w->slot[i]);
            w->slot[i] = NULL;
            a->held--;
        }
    a->held = 0;
    if (w)
        memset(w->placed, 0, sizeof(w->placed));
    sim_cancel(qp->nic->sim, &a->gap_ev);
}

/* While packets wait behind a hole, check it every ar_nak_delay_ps. */
static void ar_gap_arm(struct nic_qp *qp)
{
    struct nic_ar *a = &qp->eng->ar;
    sim_time_t t = qp->nic->p.ar_nak_delay_ps;
    if (!a->held || !t || sim_event_pending(&a->gap_ev))
        return;
    a->gap_epsn = qp->eng->epsn;
    sim_schedule_in(qp->nic->sim, &a->gap_ev, t);
}

static void ar_gap_fn(struct sim *sim, struct sim_event *ev)
{
    (void)sim;
    struct nic_qp *qp = ev->ctx;
    struct nic_qp_engine *e = qp->eng;
    struct nic_ar *a = &e->ar;
    if (!a->held || !nic_qp_can_receive(qp))
        return;
    if (e->epsn == a->gap_epsn && !e->nak_sent) { /* the same hole a whole period: lost */
        e->nak_sent = true;
        qp->nic->cnt.ar_gap_naks++;
        queue_ack(qp, NIC_AETH_NAK_PSN_SEQ, e->epsn);
    }
    ar_gap_arm(qp);
}

/* Place packet p (ahead of the expected PSN) now if it belongs to the
 * message in progress and its placement checks out; returns the
 * header-only copy to hold, or NULL (then p itself waits). */
static struct pkt *ar_place_early(struct nic_qp *qp, struct pkt *p)
{
    struct nic *nic = qp->nic;
    struct nic_qp_engine *e = qp->eng;
    uint32_t m = nic_opcode(p->opcode)->mask;
    if (!(m & (NIC_OPF_SEND | NIC_OPF_WRITE)) || !p->payload_len)
        return NULL;
    uint32_t cur = e->resp_msg ? e->ar.msg_psn : e->epsn;
    if (!p->ar_ctx || p->ar_msg_psn != cur)
        return NULL; /* a later message (it waits its turn), or no context */
    uint64_t off = (uint64_t)nic_psn_diff(p->psn, cur) * e->mtu_bytes;
    uint32_t len = p->payload_len;
    struct nic_op *op;
    if (m & NIC_OPF_SEND) {
        if (nic_rq_empty(qp))
            return NULL;
        const struct nic_recv_wqe *r = nic_rq_cur(qp);
        if (off + len > r->length)
            return NULL;
        for (uint32_t i = 0; i < r->num_sge; i++) {
            const struct nic_sge *sg = &r->sge[i];
            if (sg->length && nic_mr_check(nic, sg->lkey, nic_rq_pd(qp), sg->addr, sg->length,
                                           IBV_ACCESS_LOCAL_WRITE, NULL) != NIC_MR_OK)
                return NULL;
        }
        op = nic_op_alloc(nic, NIC_OP_PLACE, NULL);
        nic_sges_to_segs(nic, r->sge, r->num_sge, (uint32_t)off, len, op);
    } else {
        uint8_t *host = NULL;
        if (!((int)qp->attr.qp_access_flags & IBV_ACCESS_REMOTE_WRITE) ||
            off + len > p->reth_dma_len ||
            remote_check(qp, p->reth_rkey, p->reth_va + off, len, IBV_ACCESS_REMOTE_WRITE, &host) !=
                NIC_MR_OK)
            return NULL;
        op = nic_op_alloc(nic, NIC_OP_PLACE, NULL);
        op->n_seg = 1;
        op->seg[0] = (struct nic_seg){host, p->reth_rkey, len};
    }
    struct pkt *h = pkt_alloc(nic->pool);
    memcpy(h, p, offsetof(struct pkt, payload));
    h->next = NULL;
    op->pkt = p;
    nic_dma_place(nic, op, p->payload, len, qp->qpn, p->psn, "resp: payload (ib-ar, early)");
    return h;
}

/* Process the expected packet's held successors, in PSN order. */
static void ar_drain(struct nic_qp *qp)
{
    struct nic_qp_engine *e = qp->eng;
    struct nic_ar *a = &e->ar;
    while (a->held && nic_qp_can_receive(qp) && !e->aq_wait) {
        struct nic_ar_window *w = a->win; /* held > 0: allocated */
        uint32_t i = e->epsn % NIC_AR_WINDOW;
        struct pkt *h = w->slot[i];
        if (!h || h->psn != e->epsn)
            break;
        w->slot[i] = NULL;
        a->held--;
        bool placed = ar_is_placed(w, i);
        ar_mark_placed(w, i, false);
        resp_process(qp, h, placed); /* dropped (RNR, ...): the slot stays empty */
    }
    if (a->held)
        ar_gap_arm(qp);
}

static void ar_rx(struct nic_qp *qp, struct pkt *p)
{
    struct nic *nic = qp->nic;
    struct nic_qp_engine *e = qp->eng;
    struct nic_ar *a = &e->ar;
    int32_t d = nic_psn_diff(p->psn, e->epsn);
    if (d <= 0) { /* the expected packet (then its held successors), or a duplicate */
        resp_process(qp, p, false);
        ar_drain(qp);
        return;
    }
    if (d >= NIC_AR_WINDOW) {
        nic->cnt.ar_window_drops++;
        ar_drop(qp, p, "resp: ib-ar packet beyond the reorder window");
        return;
    }
    uint32_t i = p->psn % NIC_AR_WINDOW;
    struct nic_ar_window *w = ar_window(qp);
    if (w->slot[i] && w->slot[i]->psn == p->psn) {
        nic->cnt.ar_dup_drops++;
        ar_drop(qp, p, "resp: ib-ar copy of a held packet");
        return;
    }
    if (w->slot[i]) { /* left behind by an earlier window position: stale */
        pkt_free(nic->pool, w->slot[i]);
        a->held--;
    }
    nic->cnt.ar_ooo_pkts++;
    struct pkt *h = ar_place_early(qp, p);
    if (h)
        nic->cnt.ar_ooo_placed++;
    w->slot[i] = h ? h : p;
    ar_mark_placed(w, i, h != NULL);
    a->held++;
    ar_gap_arm(qp);
}

sim_time_t nic_ar_skew_ps(struct nic *nic, const struct pkt *p)
{
    if (nic->p.transport != NIC_TRANSPORT_IB_AR || !nic->p.ar_max_delay_ps ||
        nic_opcode_qp_type(p->opcode) != IBV_QPT_RC || !(nic_opcode(p->opcode)->mask & NIC_OPF_REQ))
        return 0;
    return (sim_time_t)sim_rng_below(nic_dma_ar_rng(nic), sim_time_add(nic->p.ar_max_delay_ps, 1));
}

static void resp_rx_now(struct nic_qp *qp, struct pkt *p)
{
    if (ar_qp(qp))
        ar_rx(qp, p);
    else
        resp_process(qp, p, false);
}

void nic_resp_rx(struct nic_qp *qp, struct pkt *p)
{
    struct nic_qp_engine *e = qp->eng;
    if (e->aq_wait || e->work_wait) { /* a packet waits (the TPT, a work slot): keep order */
        p->next = NULL;
        if (e->aq_held_tail)
            e->aq_held_tail->next = p;
        else
            e->aq_held_head = p;
        e->aq_held_tail = p;
        return;
    }
    resp_rx_now(qp, p);
}

/* ---------------------------------------------------------------- RIMA TPT step */

/* The TPT answered for the waiting append's first packet: it goes on from
 * the access check (where the tail is advanced), then the packets that
 * queued behind it, in arrival order. */
static void aq_tpt_fn(struct sim *sim, struct sim_event *ev)
{
    (void)sim;
    struct nic_qp *qp = ev->ctx;
    struct nic_qp_engine *e = qp->eng;
    struct pkt *p = e->aq_wait;
    e->aq_wait = NULL;
    if (!p)
        return;
    struct resp_ctx c = {.p = p, .mask = nic_opcode(p->opcode)->mask, .tpt_done = true};
    resp_run(qp, &c, RESP_CHECK_ACCESS);
    resp_drain_held(qp);
}

/* The packets held behind a waiting one (aq_wait, work_wait), in arrival
 * order, until one has to wait again. */
static void resp_drain_held(struct nic_qp *qp)
{
    struct nic_qp_engine *e = qp->eng;
    if (ar_qp(qp))
        ar_drain(qp);
    while (!e->aq_wait && !e->work_wait && e->aq_held_head) {
        struct pkt *h = e->aq_held_head;
        e->aq_held_head = h->next;
        if (!e->aq_held_head)
            e->aq_held_tail = NULL;
        h->next = NULL;
        if (nic_qp_can_receive(qp))
            resp_rx_now(qp, h);
        else
            pkt_free(qp->nic->pool, h);
    }
}

/* An append whose tail moved but whose last packet never came (the QP goes
 * to error or reset, or is destroyed): its bytes would be a hole the
 * consumer waits on forever.  Announce it with a receiver CQE of status
 * IBV_WC_WR_FLUSH_ERR, wr_id = the offset, byte_len = the reserved length
 * (include/rnicsim/rima.h), so the consumer can skip it. */
static void aq_flush_open(struct nic_qp *qp)
{
    struct nic_qp_engine *e = qp->eng;
    if (!e->resp_aq_open)
        return;
    e->resp_aq_open = false;
    const struct nic_aq *aq = nic_aq_lookup(qp->nic, e->resp_aqn);
    if (!aq || aq->serial != e->resp_aq_serial)
        return; /* the queue is gone: nobody to tell */
    struct ibv_wc wc = {
        .wr_id = e->resp_aq_off,
        .status = IBV_WC_WR_FLUSH_ERR,
        .opcode = IBV_WC_RECV_APPEND,
        .byte_len = (uint32_t)e->resp_len,
        .qp_num = qp->qpn,
        .src_qp = qp->attr.dest_qp_num,
    };
    nic_cqe_write(qp->nic, aq->cq, &wc, false);
}

static void aq_clear(struct nic_qp *qp)
{
    struct nic_qp_engine *e = qp->eng;
    aq_flush_open(qp);
    sim_cancel(qp->nic->sim, &e->aq_ev);
    if (e->aq_wait)
        pkt_free(qp->nic->pool, e->aq_wait);
    e->aq_wait = NULL;
    if (e->work_wait)
        pkt_free(qp->nic->pool, e->work_wait);
    e->work_wait = NULL;
    while (e->aq_held_head) {
        struct pkt *h = e->aq_held_head;
        e->aq_held_head = h->next;
        pkt_free(qp->nic->pool, h);
    }
    e->aq_held_tail = NULL;
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
    if (!e->ar.gap_ev.fn)
        sim_event_init(&e->ar.gap_ev, ar_gap_fn, qp, "nic.ar_gap");
    if (!e->aq_ev.fn)
        sim_event_init(&e->aq_ev, aq_tpt_fn, qp, "nic.aq_tpt");
    e->resp_aqn = 0;
    e->resp_aq_off = 0;
    e->resp_aq_serial = 0;
    e->resp_aq_open = false;
    e->ar.msg_psn = 0;
}

void nic_resp_stop(struct nic_qp *qp)
{
    struct nic_qp_engine *e = qp->eng;
    for (uint32_t i = e->work_head; i != e->work_tail; i++) {
        struct nic_resp_work *w = nic_resp_work_at(e, i);
        if (w->eng_counted) { /* READs in service that will not finish */
            w->eng_counted = false;
            nic_rdeng_done(qp->nic);
        }
    }
    nic_stage_clear(qp->nic, &e->resp_stage);
    e->work_head = e->work_tail = 0;
    e->resp_msg = 0;
    e->resp_off = 0;
    e->rd_resp_outstanding = 0;
    ar_clear(qp);
    aq_clear(qp);
}
