/* Queue pairs: the QP context as the NIC keeps it, the QPN table, state
 * changes and flushing.
 *
 * The shim has already validated transitions and attribute masks
 * (verbs_shim/qp.c); here every attribute named by the mask is recorded in
 * qp->attr (so ibv_query_qp reports it) and the engines are set up for the
 * new state:
 *
 *   RESET   everything cleared: queues emptied without completions, PSN
 *           state and timers gone, in-flight results will be ignored
 *   INIT    receives may be posted (and are held)
 *   RTR     responder on: expected PSN = rq_psn, dest_node from the AV
 *   RTS     requester on: next PSN = sq_psn, retry counters loaded
 *   SQD     the requester starts no new WQE (the current one finishes)
 *   SQE     UC/UD after a send error: requester stopped, send WRs
 *           flushed, receives go on; SQE -> RTS restarts the requester
 *   ERR     nic_qp_to_error: engines stop, every outstanding WR flushed
 *
 * UC and UD QPs use the same context: UD has no AV, path MTU or
 * destination QPN (each WR's AH names the destination) and sends at the
 * port's active MTU; its Q_Key (IBV_QP_QKEY) checks arriving DETHs.
 *
 * QPN table: open addressing on qpn & mask with the QPN chosen so that its
 * slot is free, hence lookup is one probe.  QPNs are handed out in
 * increasing order (24-bit, wrapping, skipping 0 and 1) and are not reused
 * until the counter wraps, so a late packet for a destroyed QP finds no QP.
 *
 * Lifetime: operations in flight (DMA, doorbells, queued TX sources) hold
 * a reference; a destroyed QP leaves the table at once and is freed when
 * its last reference is dropped. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "nic_priv.h"
#include "ratelimit.h"

/* ---------------------------------------------------------------- references */

/* The QP's memory, its engine's staging rings included. */
static void qp_free_mem(struct nic_qp *qp)
{
    nic_pers_free(qp);
    nic_rl_free(qp);
    nic_stage_fini(&qp->eng->req_stage);
    nic_stage_fini(&qp->eng->resp_stage);
    for (uint32_t i = 0; qp->sq && i < qp->sq_cap; i++)
        free(qp->sq[i].inline_data);
    free(qp->eng->ar.win);
    free(qp->eng->work);
    free(qp->sq);
    free(qp->rq.ring);
    free(qp->eng);
    free(qp);
}

static void qp_free(struct nic_qp *qp)
{
    struct nic *nic = qp->nic;
    for (uint32_t i = 0; i < nic->n_zombie_qps; i++)
        if (nic->zombie_qps[i] == qp) {
            nic->zombie_qps[i] = nic->zombie_qps[--nic->n_zombie_qps];
            break;
        }
    qp_free_mem(qp);
}

void nic_qp_get(struct nic_qp *qp)
{
    qp->eng->refs++;
}

void nic_qp_put(struct nic_qp *qp)
{
    if (--qp->eng->refs == 0 && qp->eng->dead)
        qp_free(qp);
}

/* ---------------------------------------------------------------- QPN table */

static void tbl_insert(struct nic *nic, struct nic_qp *qp)
{
    nic->qp_tbl[qp->qpn & nic->qp_tbl_mask] = qp;
    nic->n_qps++;
}

static int tbl_grow(struct nic *nic)
{
    uint32_t size = (nic->qp_tbl_mask + 1) * 2;
    struct nic_qp **t = calloc(size, sizeof(*t));
    if (!t)
        return ENOMEM;
    /* two live QPNs may now want one slot: keep doubling until they don't */
    for (;;) {
        bool clash = false;
        for (uint32_t i = 0; i <= nic->qp_tbl_mask && !clash; i++) {
            struct nic_qp *q = nic->qp_tbl[i];
            if (!q)
                continue;
            if (t[q->qpn & (size - 1)])
                clash = true;
            else
                t[q->qpn & (size - 1)] = q;
        }
        if (!clash)
            break;
        free(t);
        size *= 2;
        if (size > (1u << 24))
            return ENOMEM;
        t = calloc(size, sizeof(*t));
        if (!t)
            return ENOMEM;
    }
    free(nic->qp_tbl);
    nic->qp_tbl = t;
    nic->qp_tbl_mask = size - 1;
    return 0;
}

static uint32_t next_qpn(struct nic *nic)
{
    uint32_t q = nic->next_qpn;
    nic->next_qpn = (nic->next_qpn + 1) & NIC_PSN_MASK;
    if (nic->next_qpn < 2)
        nic->next_qpn = 2;
    return q;
}

static int alloc_qpn(struct nic *nic, uint32_t *qpn)
{
    if ((nic->n_qps + 1) * 2 > nic->qp_tbl_mask + 1) {
        int rc = tbl_grow(nic);
        if (rc)
            return rc;
    }
    for (uint32_t tries = 0; tries <= NIC_PSN_MASK; tries++) {
        uint32_t q = next_qpn(nic);
        if (q < 2 || q == NIC_PSN_MASK)
            continue;
        if (!nic->qp_tbl[q & nic->qp_tbl_mask]) {
            *qpn = q;
            return 0;
        }
    }
    return ENOMEM;
}

struct nic_qp *nic_qp_lookup(struct nic *nic, uint32_t qpn)
{
    struct nic_qp *qp = nic->qp_tbl[qpn & nic->qp_tbl_mask];
    return qp && qp->qpn == qpn ? qp : NULL;
}

/* ---------------------------------------------------------------- create / destroy */

/* Work queue rings.  A ring holds WQE idx in slot idx % cap, cap slots of
 * the block allocated for the whole depth (max_send_wr / max_recv_wr, as
 * ever the limit posting hits with ENOMEM).  cap starts at
 * NIC_WQ_FIRST_SLOTS (the depth if smaller; 1 for a depth of 0, which
 * posts nothing) and doubles, up to the depth, when a WQE is posted to a
 * full ring.  The block is malloc'd, not calloc'd, and only the first cap
 * slots are ever written: the pages beyond them cost address space, not
 * memory, so a QP whose program keeps R WRs outstanding costs about R
 * slots (376 B a send, 280 B a receive), not the depth it asked for
 * (docs/performance.md "What a QP costs").  The block stays the size it
 * was, so the heap, and with it the programs' malloc'd buffers, which the
 * host model sees by address (sim/host/mem.c), are laid out as before. */
enum { NIC_WQ_FIRST_SLOTS = 8, NIC_WQ_SLOT_MAX_BYTES = 512 };
_Static_assert(sizeof(struct nic_send_wqe) <= NIC_WQ_SLOT_MAX_BYTES &&
                   sizeof(struct nic_recv_wqe) <= NIC_WQ_SLOT_MAX_BYTES,
               "a WQE slot fits the swap buffer of wq_rotate");

static uint32_t wq_first_cap(uint32_t depth)
{
    return depth == 0 ? 1 : depth < NIC_WQ_FIRST_SLOTS ? depth : NIC_WQ_FIRST_SLOTS;
}

static void wq_reverse(char *r, size_t slot, uint32_t from, uint32_t to)
{
    unsigned char tmp[NIC_WQ_SLOT_MAX_BYTES];
    while (from + 1 < to) {
        to--;
        memcpy(tmp, r + (size_t)from * slot, slot);
        memcpy(r + (size_t)from * slot, r + (size_t)to * slot, slot);
        memcpy(r + (size_t)to * slot, tmp, slot);
        from++;
    }
}

/* Slots [0, n) of r rotated so that slot k moves to (k + by) % n. */
static void wq_rotate(char *r, size_t slot, uint32_t n, uint32_t by)
{
    by %= n;
    if (!by)
        return;
    wq_reverse(r, slot, 0, n);
    wq_reverse(r, slot, 0, by);
    wq_reverse(r, slot, by, n);
}

/* Grow the full ring r (cap slots, holding WQEs [head, head + cap)) to the
 * next size, in place: every slot holds a posted WQE, which keeps its
 * index (slot idx % new cap) and moves whole (a send slot's inline buffer
 * with it); the new slots start zeroed.  Returns the new cap. */
static uint32_t wq_grow(char *r, size_t slot, uint32_t cap, uint32_t depth, uint64_t head)
{
    uint32_t n = cap > depth / 2 ? depth : 2 * cap;
    /* oldest first from slot 0, then the rest of the n slots empty ... */
    wq_rotate(r, slot, cap, cap - (uint32_t)(head % cap));
    memset(r + (size_t)cap * slot, 0, (size_t)(n - cap) * slot);
    /* ... then the oldest to slot head % n */
    wq_rotate(r, slot, n, (uint32_t)(head % n));
    return n;
}

/* Path MTU before INIT->RTR sets one; UD has no path MTU attribute and
 * sends at the port's active MTU (= max_mtu here). */
static uint32_t qp_default_mtu(const struct nic_qp *qp)
{
    return qp->init.qp_type == IBV_QPT_UD ? nic_mtu_bytes(qp->nic->p.max_mtu) : 256u;
}

struct nic_qp *nic_qp_create(struct nic *nic, const struct nic_qp_init *init)
{
    /* an XRC initiator has no receive CQ; a target no PD and no CQs (its
     * SRQ of the moment gives both) but a domain */
    bool tgt = init && init->xrc == NIC_XRC_TGT;
    if (!nic || !init ||
        (tgt ? !init->xrcd || init->srq
             : !init->pd || !init->send_cq || (!init->recv_cq && init->xrc != NIC_XRC_INI))) {
        errno = EINVAL;
        return NULL;
    }
    if (nic->n_qps >= nic->p.max_qp) {
        errno = ENOMEM;
        return NULL;
    }
    struct nic_qp *qp = calloc(1, sizeof(*qp));
    struct nic_qp_engine *e = calloc(1, sizeof(*e));
    uint32_t sq_depth = init->cap.max_send_wr ? init->cap.max_send_wr : 1;
    /* a QP with an SRQ has no receive ring of its own */
    uint32_t rq_depth = init->srq ? 0 : init->cap.max_recv_wr ? init->cap.max_recv_wr : 1;
    /* blocks for the whole depth, of which the first cap slots are used
     * (wq_grow) */
    uint32_t sq_cap = wq_first_cap(init->cap.max_send_wr);
    uint32_t rq_cap = rq_depth ? wq_first_cap(init->cap.max_recv_wr) : 0;
    struct nic_send_wqe *sq = malloc(sq_depth * sizeof(*sq));
    struct nic_recv_wqe *rq = rq_depth ? malloc(rq_depth * sizeof(*rq)) : NULL;
    if (sq)
        memset(sq, 0, sq_cap * sizeof(*sq));
    if (rq)
        memset(rq, 0, rq_cap * sizeof(*rq));
    uint32_t qpn = 0;
    int rc = (qp && e && sq && (rq || !rq_depth)) ? alloc_qpn(nic, &qpn) : ENOMEM;
    if (rc) {
        free(qp);
        free(e);
        free(sq);
        free(rq);
        errno = rc;
        return NULL;
    }
    qp->nic = nic;
    qp->qpn = qpn;
    qp->init = *init;
    qp->state = IBV_QPS_RESET;
    qp->attr.qp_state = IBV_QPS_RESET;
    qp->attr.cap = init->cap;
    qp->sq = sq;
    qp->sq_depth = init->cap.max_send_wr;
    qp->sq_cap = sq_cap;
    qp->rq.ring = rq;
    qp->rq.depth = init->srq ? 0 : init->cap.max_recv_wr;
    qp->rq.cap = rq_cap;
    qp->srq = init->srq;
    qp->eng = e;
    e->qp = qp;
    e->refs = 1;
    e->mtu_bytes = qp_default_mtu(qp);
    e->timer_deadline = SIM_TIME_NEVER;
    nic_req_init(qp);
    nic_resp_init(qp);
    nic_comp_init(qp);
    tbl_insert(nic, qp);
    if (init->pd)
        init->pd->n_users++;
    if (init->send_cq)
        init->send_cq->n_qps++;
    if (init->recv_cq)
        init->recv_cq->n_qps++;
    if (init->xrcd)
        init->xrcd->n_users++;
    if (init->srq)
        init->srq->n_qps++;
    return qp;
}

/* Stop every engine and drop what is staged; results in flight will be
 * ignored (epoch). */
static void qp_quiesce(struct nic_qp *qp)
{
    struct nic_qp_engine *e = qp->eng;
    e->epoch++;
    e->req_epoch++;
    nic_req_stop(qp);
    nic_comp_stop(qp);
    nic_resp_stop(qp);
    if (e->pers)
        nic_pers_stop(qp);
}

int nic_qp_destroy(struct nic_qp *qp)
{
    if (!qp)
        return EINVAL;
    struct nic *nic = qp->nic;
    struct nic_qp_engine *e = qp->eng;
    qp_quiesce(qp);
    e->dead = true;
    nic_mcast_qp_gone(qp);
    nic->qp_tbl[qp->qpn & nic->qp_tbl_mask] = NULL;
    nic_rx_qp_gone(nic, qp);
    nic_ctx_forget(nic, qp->qpn);
    nic->n_qps--;
    if (qp->init.pd)
        qp->init.pd->n_users--;
    if (qp->init.send_cq)
        qp->init.send_cq->n_qps--;
    if (qp->init.recv_cq)
        qp->init.recv_cq->n_qps--;
    if (qp->init.xrcd)
        qp->init.xrcd->n_users--;
    if (qp->srq) {
        if (qp->init.xrc != NIC_XRC_TGT) /* a target's SRQ is per message */
            qp->srq->n_qps--;
        qp->srq = NULL; /* a WQE it held is dropped with it */
        qp->srq_held = false;
    }
    if (e->refs > 1) {
        if (nic->n_zombie_qps == nic->cap_zombie_qps) {
            uint32_t cap = nic->cap_zombie_qps ? 2 * nic->cap_zombie_qps : 8;
            struct nic_qp **z = realloc(nic->zombie_qps, cap * sizeof(*z));
            if (!z)
                abort();
            nic->zombie_qps = z;
            nic->cap_zombie_qps = cap;
        }
        nic->zombie_qps[nic->n_zombie_qps++] = qp;
    }
    nic_qp_put(qp);
    return 0;
}

void nic_qp_teardown(struct nic *nic)
{
    for (uint32_t i = 0; i <= nic->qp_tbl_mask; i++) {
        struct nic_qp *qp = nic->qp_tbl[i];
        if (!qp)
            continue;
        qp->eng->resp_aq_open = false; /* the NIC goes: no flush CQE (resp.c) */
        qp_quiesce(qp);
        qp_free_mem(qp);
    }
    for (uint32_t i = 0; i < nic->n_zombie_qps; i++) {
        struct nic_qp *qp = nic->zombie_qps[i];
        qp_free_mem(qp);
    }
    nic_srq_teardown(nic);
    nic_xrcd_teardown(nic);
    free(nic->zombie_qps);
    free(nic->qp_tbl);
    nic->zombie_qps = NULL;
    nic->qp_tbl = NULL;
    nic->n_zombie_qps = 0;
}

/* ---------------------------------------------------------------- modify */

/* Copy every attribute named in `mask` (the fields of struct ibv_qp_attr
 * that each IBV_QP_* bit selects, as the kernel's ib_modify_qp). */
static void record_attrs(struct nic_qp *qp, const struct ibv_qp_attr *a, int mask)
{
    struct ibv_qp_attr *q = &qp->attr;
    if (mask & IBV_QP_STATE)
        q->qp_state = a->qp_state;
    if (mask & IBV_QP_CUR_STATE)
        q->cur_qp_state = a->cur_qp_state;
    if (mask & IBV_QP_EN_SQD_ASYNC_NOTIFY)
        q->en_sqd_async_notify = a->en_sqd_async_notify;
    if (mask & IBV_QP_ACCESS_FLAGS)
        q->qp_access_flags = a->qp_access_flags;
    if (mask & IBV_QP_PKEY_INDEX)
        q->pkey_index = a->pkey_index;
    if (mask & IBV_QP_PORT)
        q->port_num = a->port_num;
    if (mask & IBV_QP_QKEY)
        q->qkey = a->qkey;
    if (mask & IBV_QP_AV)
        q->ah_attr = a->ah_attr;
    if (mask & IBV_QP_PATH_MTU)
        q->path_mtu = a->path_mtu;
    if (mask & IBV_QP_TIMEOUT)
        q->timeout = a->timeout;
    if (mask & IBV_QP_RETRY_CNT)
        q->retry_cnt = a->retry_cnt;
    if (mask & IBV_QP_RNR_RETRY)
        q->rnr_retry = a->rnr_retry;
    if (mask & IBV_QP_RQ_PSN)
        q->rq_psn = a->rq_psn & NIC_PSN_MASK;
    if (mask & IBV_QP_MAX_QP_RD_ATOMIC)
        q->max_rd_atomic = a->max_rd_atomic;
    if (mask & IBV_QP_ALT_PATH) {
        q->alt_ah_attr = a->alt_ah_attr;
        q->alt_pkey_index = a->alt_pkey_index;
        q->alt_port_num = a->alt_port_num;
        q->alt_timeout = a->alt_timeout;
    }
    if (mask & IBV_QP_MIN_RNR_TIMER)
        q->min_rnr_timer = a->min_rnr_timer;
    if (mask & IBV_QP_SQ_PSN)
        q->sq_psn = a->sq_psn & NIC_PSN_MASK;
    if (mask & IBV_QP_MAX_DEST_RD_ATOMIC)
        q->max_dest_rd_atomic = a->max_dest_rd_atomic;
    if (mask & IBV_QP_PATH_MIG_STATE)
        q->path_mig_state = a->path_mig_state;
    if (mask & IBV_QP_CAP)
        q->cap = a->cap;
    if (mask & IBV_QP_DEST_QPN)
        q->dest_qp_num = a->dest_qp_num & NIC_PSN_MASK;
    if (mask & IBV_QP_RATE_LIMIT)
        q->rate_limit = a->rate_limit;
}

/* The kernel's rdma_calc_flow_label + rdma_get_udp_sport: the RoCEv2 UDP
 * source port of a connection, from its two QPNs (0xC000..0xFFFF). */
uint16_t nic_roce_udp_sport(uint32_t lqpn, uint32_t rqpn)
{
    uint64_t v = (uint64_t)lqpn * rqpn;
    v ^= v >> 20;
    v ^= v >> 40;
    uint32_t fl = (uint32_t)(v & 0xfffff);
    return (uint16_t)(((fl & 0x3fff) ^ ((fl & 0xfc000) >> 14)) | 0xc000);
}

/* Back to RESET: empty queues (no completions), fresh engines. */
static void qp_reset(struct nic_qp *qp)
{
    struct nic_qp_engine *e = qp->eng;
    qp_quiesce(qp);
    qp->sq_comp = qp->sq_next = qp->sq_db = qp->sq_tail = 0;
    e->rd_posted = 0;
    qp->rq.head = qp->rq.tail = 0;
    qp->srq_held = false; /* a WQE taken from the SRQ is lost, as in rxe */
    for (uint32_t i = 0; i < qp->sq_cap; i++)
        qp->sq[i].state = NIC_WQE_QUEUED;
    struct ibv_qp_cap cap = qp->attr.cap;
    memset(&qp->attr, 0, sizeof(qp->attr));
    qp->attr.cap = cap;
    qp->dest_node = 0;
    e->mtu_bytes = qp_default_mtu(qp);
    nic_req_init(qp);
    nic_resp_init(qp);
    nic_comp_init(qp);
}

int nic_qp_modify(struct nic_qp *qp, const struct ibv_qp_attr *attr, int attr_mask)
{
    if (!qp || !attr)
        return EINVAL;
    struct nic_qp_engine *e = qp->eng;
    enum ibv_qp_state cur = qp->state;
    enum ibv_qp_state next = (attr_mask & IBV_QP_STATE) ? attr->qp_state : cur;
    if (next == IBV_QPS_ERR) {
        record_attrs(qp, attr, attr_mask & ~IBV_QP_STATE);
        nic_qp_to_error(qp);
        return 0;
    }
    if (next == IBV_QPS_RESET) {
        qp_reset(qp);
        qp->state = IBV_QPS_RESET;
        qp->attr.qp_state = IBV_QPS_RESET;
        return 0;
    }
    record_attrs(qp, attr, attr_mask);
    if (attr_mask & IBV_QP_AV) {
        const struct ibv_ah_attr *ah = &qp->attr.ah_attr;
        int64_t node = ah->is_global ? nic_node_from_gid(&ah->grh.dgid) : (int64_t)ah->dlid - 1;
        qp->dest_node = node >= 0 ? (uint32_t)node : 0;
    }
    if (attr_mask & IBV_QP_PATH_MTU)
        e->mtu_bytes = nic_mtu_bytes(qp->attr.path_mtu);
    if (attr_mask & (IBV_QP_DEST_QPN | IBV_QP_AV))
        e->udp_sport = nic_roce_udp_sport(qp->qpn, qp->attr.dest_qp_num);
    if (attr_mask & IBV_QP_RQ_PSN) {
        e->epsn = qp->attr.rq_psn;
        e->nak_sent = false;
    }
    if (attr_mask & IBV_QP_SQ_PSN) {
        e->next_psn = qp->attr.sq_psn;
        e->comp_psn = qp->attr.sq_psn;
        e->tx_psn_hi = nic_psn_add(qp->attr.sq_psn, NIC_PSN_MASK); /* sq_psn - 1 */
    }
    if (attr_mask & IBV_QP_RATE_LIMIT) /* kb/s, as the verb takes it */
        nic_qp_set_rate_limit(qp, (uint64_t)qp->attr.rate_limit * 1000);
    if (attr_mask & IBV_QP_RETRY_CNT)
        e->retry_left = qp->attr.retry_cnt;
    if (attr_mask & IBV_QP_RNR_RETRY)
        e->rnr_left = qp->attr.rnr_retry;
    qp->state = next;
    qp->attr.qp_state = next;
    if (next == IBV_QPS_RTS && cur == IBV_QPS_SQE) {
        /* UC/UD recovering from a send error: the SQ was flushed, the
         * requester starts afresh at the next WR (PSNs continue) */
        nic_req_init(qp);
        e->comp_psn = e->next_psn;
        e->tx_psn_hi = nic_psn_add(e->next_psn, NIC_PSN_MASK);
    }
    if (next == IBV_QPS_RTS && (cur == IBV_QPS_RTR || cur == IBV_QPS_SQD || cur == IBV_QPS_SQE))
        nic_req_kick(qp);
    return 0;
}

/* ---------------------------------------------------------------- queues */

static bool qp_type_supported(enum ibv_qp_type t)
{
    return t == IBV_QPT_RC || t == IBV_QPT_UC || t == IBV_QPT_UD;
}

int nic_sq_append(struct nic_qp *qp, const struct nic_send_wqe *wqe)
{
    if (!qp_type_supported(qp->init.qp_type))
        return EOPNOTSUPP;
    /* EFA SRD / 1RMA complete out of order; their slots are free at
     * completion, whatever the order (pers.c) */
    if (qp->sq_tail - qp->sq_comp >= qp->sq_depth && !(nic_qp_pers(qp) && nic_pers_sq_reclaim(qp)))
        return ENOMEM;
    if (qp->sq_tail - qp->sq_comp >= qp->sq_cap)
        qp->sq_cap =
            wq_grow((char *)qp->sq, sizeof(*qp->sq), qp->sq_cap, qp->sq_depth, qp->sq_comp);
    struct nic_send_wqe *w = nic_sq_wqe(qp, qp->sq_tail);
    /* the inline bytes go to the slot's own buffer, grown to fit */
    if (wqe->send_flags & IBV_SEND_INLINE) {
        uint32_t n = wqe->length < NIC_MAX_INLINE_BYTES ? wqe->length : NIC_MAX_INLINE_BYTES;
        if (n > w->inline_cap) {
            uint8_t *buf = realloc(w->inline_data, n);
            if (!buf)
                return ENOMEM;
            w->inline_data = buf;
            w->inline_cap = n;
        }
        if (n)
            memcpy(w->inline_data, wqe->inline_data, n);
    }
    memcpy(w, wqe, offsetof(struct nic_send_wqe, inline_data));
    w->signaled = wqe->signaled;
    w->first_psn = w->last_psn = 0;
    w->state = NIC_WQE_QUEUED;
    if (nic_wqe_is_rd_atomic(w))
        qp->eng->rd_posted++;
    qp->sq_tail++;
    return 0;
}

int nic_rq_append(struct nic_qp *qp, const struct nic_recv_wqe *wqe)
{
    if (!qp_type_supported(qp->init.qp_type))
        return EOPNOTSUPP;
    if (qp->srq || nic_rq_count(&qp->rq) >= qp->rq.depth)
        return ENOMEM;
    if (nic_rq_count(&qp->rq) >= qp->rq.cap)
        qp->rq.cap = wq_grow((char *)qp->rq.ring, sizeof(*qp->rq.ring), qp->rq.cap, qp->rq.depth,
                             qp->rq.head);
    *nic_rq_at(&qp->rq, qp->rq.tail) = *wqe;
    qp->rq.tail++;
    if (qp->state == IBV_QPS_ERR)
        nic_qp_flush_rq(qp); /* a receive posted in ERR completes flushed */
    return 0;
}

/* ---------------------------------------------------------------- error and flush */

void nic_qp_flush_sq(struct nic_qp *qp)
{
    struct nic *nic = qp->nic;
    for (uint64_t i = qp->sq_comp; i < qp->sq_tail; i++) {
        struct nic_send_wqe *w = nic_sq_wqe(qp, i);
        struct ibv_wc wc = {
            .wr_id = w->wr_id,
            .status = IBV_WC_WR_FLUSH_ERR,
            .opcode = nic_wc_opcode(w->opcode),
            .vendor_err = nic_vendor_err(IBV_WC_WR_FLUSH_ERR),
            .qp_num = qp->qpn,
        };
        w->state = NIC_WQE_DONE;
        nic_cqe_write(nic, qp->init.send_cq, &wc, false);
        nic->cnt.wqes_completed++;
    }
    qp->sq_comp = qp->sq_next = qp->sq_tail;
    qp->eng->rd_posted = 0;
    if (qp->sq_db < qp->sq_tail)
        qp->sq_db = qp->sq_tail;
    qp->eng->fetch_issued = qp->eng->fetched = qp->eng->req_idx = qp->sq_tail;
    qp->eng->req_pkt = 0;
}

static void flush_recv(struct nic_qp *qp, uint64_t wr_id)
{
    struct ibv_wc wc = {
        .wr_id = wr_id,
        .status = IBV_WC_WR_FLUSH_ERR,
        .opcode = IBV_WC_RECV,
        .vendor_err = nic_vendor_err(IBV_WC_WR_FLUSH_ERR),
        .qp_num = qp->qpn,
    };
    nic_cqe_write(qp->nic, nic_qp_recv_cq(qp), &wc, false);
}

/* With an SRQ only the WQE this QP took for its message in progress is
 * flushed: the WQEs still in the SRQ belong to no QP and stay for the
 * others (rxe's flush_recv_queue does not touch an SRQ either). */
void nic_qp_flush_rq(struct nic_qp *qp)
{
    if (qp->srq) {
        if (qp->srq_held)
            flush_recv(qp, qp->srq_wqe.wr_id);
        qp->srq_held = false;
        return;
    }
    for (uint64_t i = qp->rq.head; i < qp->rq.tail; i++)
        flush_recv(qp, nic_rq_at(&qp->rq, i)->wr_id);
    qp->rq.head = qp->rq.tail;
}

void nic_qp_to_sqe(struct nic_qp *qp)
{
    if (!qp || qp->eng->dead)
        return;
    struct nic_qp_engine *e = qp->eng;
    e->req_epoch++; /* payload reads in flight are dropped */
    nic_req_stop(qp);
    sim_cancel(qp->nic->sim, &e->timer_ev);
    e->timer_deadline = SIM_TIME_NEVER;
    qp->state = IBV_QPS_SQE;
    qp->attr.qp_state = IBV_QPS_SQE;
    nic_qp_flush_sq(qp);
}

void nic_qp_set_fatal_notify(struct nic_qp *qp, sim_cb_fn fn, void *a, void *b)
{
    qp->fatal_fn = fn;
    qp->fatal_a = a;
    qp->fatal_b = b;
}

void nic_qp_to_error(struct nic_qp *qp)
{
    if (!qp || qp->eng->dead)
        return;
    qp_quiesce(qp);
    qp->state = IBV_QPS_ERR;
    qp->attr.qp_state = IBV_QPS_ERR;
    nic_qp_flush_sq(qp);
    nic_qp_flush_rq(qp);
}
