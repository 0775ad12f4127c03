/* The data path of the Huang protocols: what a requesting and a responding
 * thread do (Section III and IV; docs/huang.md).
 *
 * Requesting thread: keeps R requests outstanding on each of its QPs; a
 * request for slot i is issued again as soon as the response for slot i is
 * there.  It polls its CQ continuously and, when responses come by WRITE,
 * scans every response slot of every QP for the markers.  Each request
 * is posted by itself (one ibv_post_send, one doorbell), as the paper's;
 * --post-list=on re-issues the requests one turn finds on a QP with one
 * post instead.
 *
 *   request by SEND   inline SEND of the L-byte request into a receive the
 *                     responder posted (its request slots, used cyclically)
 *   request by WRITE  inline WRITE of the framed request (L + 6 bytes) into
 *                     request slot i of the responder's buffer array
 *   READ              RDMA READ of the V-byte value in response slot i of
 *                     the responder (signalled; the completion is the
 *                     response)
 *
 * Responding thread: polls its CQ (receive completions of SEND requests,
 * the selectively signalled completions of its responses) and, when
 * requests come by WRITE, scans every request slot; for each request it
 * checks it, zeroes a framed one, writes the response header into its
 * response slot i (the value body is already there: the "lookup" costs
 * nothing, spec 3.2) and posts the response:
 *
 *   response by SEND  SEND of the V bytes into a receive the requester
 *                     posted (its response slots, used cyclically)
 *   response by WRITE WRITE of the framed value (V + 6 bytes) into
 *                     response slot i of the requester
 *
 * Every framed message is taken only when both markers are there, then its
 * whole payload is checked; a message whose final marker is visible before
 * its payload is a torn read: the thread reports an "order_violation" row
 * (the contract with `rnicsim check-order`, docs/ordering.md) and fails.
 *
 * Send WRs other than READs are signalled every sig_every WRs; a send
 * queue holds sq_depth = 2R, so the selectively signalled WRs never fill
 * it while at most R requests (responses) per QP are outstanding. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#if !defined(RNICSIM_REAL_VERBS) && defined(__linux__)
#include <sys/mman.h>
#endif

#include "protocols/huang/hg.h"
#include "rnicsim/host.h"

/* wr_id: kind (2 bits) | QP index of the thread (22 bits) | value (40 bits) */
enum hg_wr_kind { HG_WR_SQ, HG_WR_READ, HG_WR_RECV };
#define HG_WR_QP_SHIFT 40
#define HG_WR_KIND_SHIFT 62
#define HG_WR_VAL_MASK ((1ull << HG_WR_QP_SHIFT) - 1)

static uint64_t wr_id(enum hg_wr_kind k, uint32_t q, uint64_t v)
{
    return (uint64_t)k << HG_WR_KIND_SHIFT | (uint64_t)q << HG_WR_QP_SHIFT | (v & HG_WR_VAL_MASK);
}

static uint8_t *req_slot(const struct hg *hg, const struct hg_qp *q, uint32_t i)
{
    return q->region + (size_t)i * hg_req_slot_bytes(&hg->o);
}

static size_t resp_off(const struct hg *hg, uint32_t i)
{
    return (size_t)hg->o.R * hg_req_slot_bytes(&hg->o) + (size_t)i * hg_resp_slot_bytes(&hg->o);
}

static uint8_t *resp_slot(const struct hg *hg, const struct hg_qp *q, uint32_t i)
{
    return q->region + resp_off(hg, i);
}

/* Zero a consumed framed message (the protocol's B + 6 bytes).  In the
 * simulator the whole pages inside a large message are given back to the
 * kernel instead (they read back as zeros): the 64 KiB points would
 * otherwise keep gigabytes of landed values resident. */
static void hg_zero(uint8_t *p, size_t n)
{
#if !defined(RNICSIM_REAL_VERBS) && defined(__linux__)
    const uintptr_t page = 4096;
    uintptr_t a = ((uintptr_t)p + page - 1) & ~(page - 1);
    uintptr_t b = ((uintptr_t)p + n) & ~(page - 1);
    if (b > a && b - a >= 4 * page) {
        memset(p, 0, (size_t)(a - (uintptr_t)p));
        memset((void *)b, 0, (size_t)((uintptr_t)p + n - b));
        if (madvise((void *)a, (size_t)(b - a), MADV_DONTNEED) == 0)
            return;
        memset((void *)a, 0, (size_t)(b - a));
        return;
    }
#endif
    memset(p, 0, n);
}

/* The thread's memory accesses of this turn (the host model's per-line
 * costs), charged as one computation at the end of the turn: a pass over
 * thousands of slots stays one event.  On real hardware the accesses
 * themselves were the cost. */
static void touch(struct hg_thread *t, const void *p, size_t len, size_t stride, size_t count,
                  bool write)
{
#ifndef RNICSIM_REAL_VERBS
    host_touch_add(&t->touch, p, len, stride, count, write);
#else
    (void)t, (void)p, (void)len, (void)stride, (void)count, (void)write;
#endif
}

static void touch_charge(struct hg_thread *t)
{
#ifndef RNICSIM_REAL_VERBS
    host_touch_charge(&t->touch);
#else
    (void)t;
#endif
}

static void mark_dirty(struct hg_thread *t, uint32_t qi)
{
    struct hg_qp *q = &t->qps[qi];
    if (!q->dirty) {
        q->dirty = true;
        t->dirty[(t->dhead + t->ndirty++) % t->nqps] = qi;
    }
}

/* Add slot s to q's pending ring. */
static void pend_push(struct hg_thread *t, struct hg_qp *q, uint32_t s)
{
    uint32_t R = t->hg->o.R;
    q->pend[(q->phead + q->npend++) % R] = s;
}

/* A torn or wrong message: one line on stderr, one order_violation row. */
static int violation(struct hg_thread *t, const struct hg_qp *q, uint32_t slot, bool request,
                     uint32_t bad, const char *why)
{
    struct hg *hg = t->hg;
    uint64_t now = host_now_ns();
    fprintf(stderr,
            "%s node %" PRIu32 ": VIOLATION: %s %s on link %" PRIu32 " slot %" PRIu32
            " (thread %" PRIu32 "): %s (t=%" PRIu64 " ns)\n",
            hg->prog, hg->o.node, hg_protos[hg->o.proto].name, request ? "request" : "response",
            q->link, slot, t->idx, why, now);
    struct host_kv kv[] = {
        {"node", (double)hg->o.node},
        {"thread", (double)t->idx},
        {"link", (double)q->link},
        {"slot", (double)slot},
        {"request", request ? 1.0 : 0.0},
        {"first_bad_byte", bad ? (double)(bad - 1) : -1.0},
        {"t_ns", (double)now},
    };
    host_report("order_violation", kv, sizeof(kv) / sizeof(kv[0]));
    hg->violation = true;
    return 1;
}

static int wc_ok(struct hg_thread *t, const struct ibv_wc *wc)
{
    if (wc->status == IBV_WC_SUCCESS)
        return 0;
    fprintf(stderr,
            "%s node %" PRIu32 " thread %" PRIu32
            ": completion failed on QP 0x%x: %s (status %d)\n",
            t->hg->prog, t->hg->o.node, t->idx, wc->qp_num, ibv_wc_status_str(wc->status),
            (int)wc->status);
    return 1;
}

static int poll_once(struct hg_thread *t, uint32_t *found, int *polled);
static int repost_recvs(struct hg_thread *t, struct hg_qp *q, bool requests);

/* Whether this thread's QPs take SENDs into posted receives (and repost
 * them): a requester when responses are SENDs, a responder when requests
 * are. */
static bool takes_sends(const struct hg_thread *t)
{
    const struct hg_proto_info *p = &hg_protos[t->hg->o.proto];
    return t->requesting ? p->resp == HG_SEND : p->req == HG_SEND;
}

/* Make room for n more WRs in q's send queue: the selectively signalled
 * completion that retires them may still be in the CQ.  A poll here can
 * find a message on q itself, whose request or response the caller then
 * posts in the same loop: the receive that message used is posted again
 * first, or the peer's answer to it could arrive at a QP with no receive
 * (an RNR NAK and a wait of min_rnr_timer; seen on M:M SEND/SEND with a
 * full send queue). */
static int sq_room(struct hg_thread *t, struct hg_qp *q, uint32_t n)
{
    bool polled_any = false;
    while (q->sq_posted + n - q->sq_done > t->sq_depth) {
        uint32_t found = 0;
        int polled = 0;
        int rc = poll_once(t, &found, &polled);
        if (rc)
            return rc;
        polled_any = true;
    }
    if (polled_any && q->nrecv && takes_sends(t) && !t->stopping)
        return repost_recvs(t, q, !t->requesting);
    return 0;
}

static int post_send(struct hg_thread *t, struct hg_qp *q, uint32_t n)
{
    struct ibv_send_wr *bad = NULL;
    int err = ibv_post_send(q->qp, t->wr, &bad);
    if (err) {
        fprintf(stderr,
                "%s node %" PRIu32 ": ibv_post_send (link %" PRIu32 ", %" PRIu32 " WRs): %s\n",
                t->hg->prog, t->hg->o.node, q->link, n, strerror(err));
        return 1;
    }
    return 0;
}

/* Post q->nrecv receives again: the cyclic buffers after the ones posted. */
static int repost_recvs(struct hg_thread *t, struct hg_qp *q, bool requests)
{
    struct hg *hg = t->hg;
    uint32_t R = hg->o.R, qi = (uint32_t)(q - t->qps);
    while (q->nrecv) {
        uint32_t n = q->nrecv < R ? q->nrecv : R;
        for (uint32_t j = 0; j < n; j++) {
            uint32_t b = q->rq_next;
            q->rq_next = (b + 1) % R;
            t->rsge[j] = (struct ibv_sge){
                .addr = (uint64_t)(uintptr_t)(requests ? req_slot(hg, q, b) : resp_slot(hg, q, b)),
                .length = requests ? hg_req_slot_bytes(&hg->o) : hg_resp_slot_bytes(&hg->o),
                .lkey = t->mr->lkey};
            t->rwr[j] = (struct ibv_recv_wr){.wr_id = wr_id(HG_WR_RECV, qi, b),
                                             .sg_list = &t->rsge[j],
                                             .num_sge = 1,
                                             .next = j + 1 < n ? &t->rwr[j + 1] : NULL};
        }
        struct ibv_recv_wr *bad = NULL;
        int err = ibv_post_recv(q->qp, t->rwr, &bad);
        if (err) {
            fprintf(stderr, "%s node %" PRIu32 ": ibv_post_recv (link %" PRIu32 "): %s\n", hg->prog,
                    hg->o.node, q->link, strerror(err));
            return 1;
        }
        q->nrecv -= n;
    }
    return 0;
}

int hg_post_initial_recvs(struct hg_thread *t, struct hg_qp *q, bool requests)
{
    q->nrecv = t->hg->o.R;
    return repost_recvs(t, q, requests);
}

void hg_prepare_values(struct hg_thread *t)
{
    struct hg *hg = t->hg;
    for (uint32_t qi = 0; qi < t->nqps; qi++)
        for (uint32_t i = 0; i < hg->o.R; i++) {
            uint8_t *v = resp_slot(hg, &t->qps[qi], i) + 5;
            hg_fill_value_body(v, hg->o.V);
            if (hg->o.proto == HG_READ) /* the value is all there is: tag 0 */
                hg_put_hdr(v, 0, t->qps[qi].link, i);
        }
}

/* ------------------------------------------------------------ requester */

/* A requester's poll at the current time: its time (latencies) and, in
 * the window, the count and spacing of polls (how many turns the window
 * held; hg.h). */
static void observe(struct hg_thread *t)
{
    uint64_t now = host_now_ns();
    t->obs_ns = now;
    if (now < t->t0_ns || now >= t->t1_ns)
        return;
    if (t->obs_prev_ns != UINT64_MAX && now - t->obs_prev_ns > t->obs_gap_max_ns)
        t->obs_gap_max_ns = now - t->obs_prev_ns;
    t->obs_prev_ns = now;
    t->obs_counted++;
}

/* The response for slot s of QP qi is there (payload p). */
static int requester_got(struct hg_thread *t, uint32_t qi, uint32_t s, const uint8_t *p)
{
    struct hg *hg = t->hg;
    struct hg_qp *q = &t->qps[qi];
    char why[200];
    if (s >= hg->o.R || q->issue_ns[s] == UINT64_MAX) {
        snprintf(why, sizeof(why),
                 "a response for slot %" PRIu32 ", which has no request outstanding", s);
        return violation(t, q, s, false, 0, why);
    }
    uint64_t tag = hg->o.proto == HG_READ ? 0 : hg_tag(q->uses[s] - 1, s, hg->o.R);
    touch(t, p, hg->o.V, 0, 1, false);
    uint32_t bad = hg_check_value(p, hg->o.V, tag, q->link, s, why, sizeof(why));
    if (bad)
        return violation(t, q, s, false, bad, why);
    t->checked++;
    t->bytes_checked += hg->o.V;
    if (t->round1_ns == UINT64_MAX && t->checked >= (uint64_t)hg->o.R * t->nqps)
        t->round1_ns = t->obs_ns - hg->start_ns;
    if (q->issue_ns[s] >= t->t0_ns && q->issue_ns[s] < t->t1_ns) {
        t->responses++;
        t->lat_sum_ns += t->obs_ns - q->issue_ns[s];
        t->lat_n++;
    }
    q->issue_ns[s] = UINT64_MAX;
    q->outstanding--;
    if (!t->stopping) {
        pend_push(t, q, s);
        mark_dirty(t, qi);
    }
    return 0;
}

/* Build and post the requests of q->pend (one list, or one by one). */
static int issue(struct hg_thread *t, uint32_t qi)
{
    struct hg *hg = t->hg;
    const struct hg_opts *o = &hg->o;
    struct hg_qp *q = &t->qps[qi];
    enum hg_verb verb = hg_protos[o->proto].req;
    uint32_t rs = hg_req_slot_bytes(o);
    while (q->npend) {
        uint32_t n = o->post_list ? q->npend : 1;
        if (sq_room(t, q, n))
            return 1;
        for (uint32_t j = 0; j < n; j++) {
            uint32_t s = q->pend[(q->phead + j) % o->R];
            uint64_t tag = hg_tag(q->uses[s]++, s, o->R);
            struct ibv_send_wr *w = &t->wr[j];
            struct ibv_sge *g = &t->sge[j];
            memset(w, 0, sizeof(*w));
            w->sg_list = g;
            w->num_sge = 1;
            w->next = j + 1 < n ? &t->wr[j + 1] : NULL;
            g->lkey = t->mr->lkey;
            uint64_t seq = ++q->sq_posted;
            if (verb == HG_RDMA_READ) {
                g->addr = (uint64_t)(uintptr_t)(resp_slot(hg, q, s) + 5);
                g->length = o->V;
                w->opcode = IBV_WR_RDMA_READ;
                w->send_flags = IBV_SEND_SIGNALED;
                w->wr.rdma.remote_addr = q->peer_addr + resp_off(hg, s) + 5;
                w->wr.rdma.rkey = q->peer_rkey;
                w->wr_id = wr_id(HG_WR_READ, qi, s);
            } else {
                uint8_t *m = req_slot(hg, q, s);
                uint32_t len;
                if (verb == HG_WRITE) {
                    hg_fill_request(m + 5, o->L, tag, q->link, s);
                    hg_frame_set(m, o->L);
                    len = rs;
                    touch(t, m, rs, 0, 1, true);
                    w->opcode = IBV_WR_RDMA_WRITE;
                    w->wr.rdma.remote_addr = q->peer_addr + (uint64_t)s * rs;
                    w->wr.rdma.rkey = q->peer_rkey;
                } else {
                    hg_fill_request(m, o->L, tag, q->link, s);
                    len = o->L;
                    touch(t, m, o->L, 0, 1, true);
                    w->opcode = IBV_WR_SEND;
                }
                g->addr = (uint64_t)(uintptr_t)m;
                g->length = len;
                w->send_flags = (len <= hg->max_inline ? IBV_SEND_INLINE : 0) |
                                (seq % t->sig_every == 0 ? IBV_SEND_SIGNALED : 0);
                w->wr_id = wr_id(HG_WR_SQ, qi, seq);
            }
            q->issue_ns[s] = host_now_ns();
            q->outstanding++;
        }
        q->phead = (q->phead + n) % o->R;
        q->npend -= n;
        if (post_send(t, q, n))
            return 1;
    }
    return 0;
}

/* WRITE responses: every response slot of every QP. */
static int requester_scan(struct hg_thread *t, uint32_t *found)
{
    struct hg *hg = t->hg;
    uint32_t V = hg->o.V, R = hg->o.R;
    char why[200];
    uint64_t slots = 0;
    t->scans++;
    for (uint32_t qi = 0; qi < t->nqps; qi++) {
        struct hg_qp *q = &t->qps[qi];
        if (!q->outstanding)
            continue;
        slots += R;
        touch(t, resp_slot(hg, q, 0) + 4, 1, hg_resp_slot_bytes(&hg->o), R, false);
        for (uint32_t s = 0; s < R; s++) {
            uint8_t *m = resp_slot(hg, q, s);
            if (m[4] != HG_MARKER)
                continue;
            enum hg_frame_state st = hg_frame_poll(m, V);
            if (st == HG_FRAME_PARTIAL)
                continue;
            if (st == HG_FRAME_BAD_LEN) {
                snprintf(why, sizeof(why),
                         "first marker there but the length field is not %" PRIu32, V);
                return violation(t, q, s, false, 1, why);
            }
            touch(t, m, 5, 0, 1, false); /* the length field */
            int rc = requester_got(t, qi, s, m + 5);
            if (rc)
                return rc;
            hg_zero(m, hg_resp_slot_bytes(&hg->o));
            touch(t, m, hg_resp_slot_bytes(&hg->o), 0, 1, true);
            (*found)++;
        }
    }
    t->slots_scanned += slots;
    return 0;
}

static int requester_wc(struct hg_thread *t, const struct ibv_wc *wc, uint32_t *found)
{
    struct hg *hg = t->hg;
    enum hg_wr_kind kind = (enum hg_wr_kind)(wc->wr_id >> HG_WR_KIND_SHIFT);
    uint32_t qi = (uint32_t)(wc->wr_id >> HG_WR_QP_SHIFT) & ((1u << 22) - 1);
    uint64_t v = wc->wr_id & HG_WR_VAL_MASK;
    struct hg_qp *q = &t->qps[qi];
    switch (kind) {
    case HG_WR_SQ:
        q->sq_done = v;
        return 0;
    case HG_WR_READ:
        q->sq_done++;
        (*found)++;
        return requester_got(t, qi, (uint32_t)v, resp_slot(hg, q, (uint32_t)v) + 5);
    case HG_WR_RECV:
        break;
    }
    const uint8_t *p = resp_slot(hg, q, (uint32_t)v);
    uint64_t tag;
    uint32_t link, s;
    hg_get_hdr(p, &tag, &link, &s);
    if (wc->byte_len != hg->o.V) {
        char why[96];
        snprintf(why, sizeof(why), "received %" PRIu32 " bytes, expected %" PRIu32, wc->byte_len,
                 hg->o.V);
        return violation(t, q, s, false, 0, why);
    }
    q->nrecv++;
    mark_dirty(t, qi);
    (*found)++;
    return requester_got(t, qi, s, p);
}

/* ------------------------------------------------------------ responder */

/* The request for slot s of QP qi is there (payload p): check it and write
 * the response into the response slot. */
static int responder_got(struct hg_thread *t, uint32_t qi, uint32_t s, const uint8_t *p)
{
    struct hg *hg = t->hg;
    const struct hg_opts *o = &hg->o;
    struct hg_qp *q = &t->qps[qi];
    char why[200];
    if (s >= o->R) {
        snprintf(why, sizeof(why), "request names slot %" PRIu32 " of %" PRIu32, s, o->R);
        return violation(t, q, s, true, 0, why);
    }
    uint64_t tag = hg_tag(q->uses[s], s, o->R);
    touch(t, p, o->L, 0, 1, false);
    uint32_t bad = hg_check_request(p, o->L, tag, q->link, s, why, sizeof(why));
    if (bad)
        return violation(t, q, s, true, bad, why);
    q->uses[s]++;
    t->checked++;
    t->bytes_checked += o->L;
    t->responses++;
    uint8_t *m = resp_slot(hg, q, s);
    hg_put_hdr(m + 5, tag, q->link, s);
    touch(t, m, 5 + HG_HDR_BYTES, 0, 1, true);
    if (hg_protos[o->proto].resp == HG_WRITE) {
        hg_frame_set(m, o->V);
        touch(t, m + 5 + o->V, 1, 0, 1, true);
    }
    pend_push(t, q, s);
    mark_dirty(t, qi);
    return 0;
}

static int respond(struct hg_thread *t, uint32_t qi)
{
    struct hg *hg = t->hg;
    const struct hg_opts *o = &hg->o;
    struct hg_qp *q = &t->qps[qi];
    bool write = hg_protos[o->proto].resp == HG_WRITE;
    while (q->npend) {
        uint32_t n = o->post_list ? q->npend : 1;
        if (sq_room(t, q, n))
            return 1;
        for (uint32_t j = 0; j < n; j++) {
            uint32_t s = q->pend[(q->phead + j) % o->R];
            uint8_t *m = resp_slot(hg, q, s);
            struct ibv_send_wr *w = &t->wr[j];
            struct ibv_sge *g = &t->sge[j];
            uint64_t seq = ++q->sq_posted;
            memset(w, 0, sizeof(*w));
            *g = (struct ibv_sge){.addr = (uint64_t)(uintptr_t)(write ? m : m + 5),
                                  .length = write ? hg_resp_slot_bytes(o) : o->V,
                                  .lkey = t->mr->lkey};
            w->sg_list = g;
            w->num_sge = 1;
            w->next = j + 1 < n ? &t->wr[j + 1] : NULL;
            w->wr_id = wr_id(HG_WR_SQ, qi, seq);
            w->send_flags = seq % t->sig_every == 0 ? IBV_SEND_SIGNALED : 0;
            if (write) {
                w->opcode = IBV_WR_RDMA_WRITE;
                w->wr.rdma.remote_addr = q->peer_addr + resp_off(hg, s);
                w->wr.rdma.rkey = q->peer_rkey;
            } else {
                w->opcode = IBV_WR_SEND;
            }
        }
        q->phead = (q->phead + n) % o->R;
        q->npend -= n;
        if (post_send(t, q, n))
            return 1;
    }
    return 0;
}

static int responder_scan(struct hg_thread *t, uint32_t *found)
{
    struct hg *hg = t->hg;
    uint32_t L = hg->o.L, R = hg->o.R;
    char why[120];
    t->scans++;
    for (uint32_t qi = 0; qi < t->nqps; qi++) {
        struct hg_qp *q = &t->qps[qi];
        touch(t, req_slot(hg, q, 0) + 4, 1, hg_req_slot_bytes(&hg->o), R, false);
        for (uint32_t s = 0; s < R; s++) {
            uint8_t *m = req_slot(hg, q, s);
            if (m[4] != HG_MARKER)
                continue;
            enum hg_frame_state st = hg_frame_poll(m, L);
            if (st == HG_FRAME_PARTIAL)
                continue;
            if (st == HG_FRAME_BAD_LEN) {
                snprintf(why, sizeof(why),
                         "first marker there but the length field is not %" PRIu32, L);
                return violation(t, q, s, true, 1, why);
            }
            touch(t, m, 5, 0, 1, false); /* the length field */
            int rc = responder_got(t, qi, s, m + 5);
            if (rc)
                return rc;
            hg_zero(m, hg_req_slot_bytes(&hg->o));
            touch(t, m, hg_req_slot_bytes(&hg->o), 0, 1, true);
            (*found)++;
        }
    }
    t->slots_scanned += (uint64_t)t->nqps * R;
    return 0;
}

static int responder_wc(struct hg_thread *t, const struct ibv_wc *wc, uint32_t *found)
{
    struct hg *hg = t->hg;
    enum hg_wr_kind kind = (enum hg_wr_kind)(wc->wr_id >> HG_WR_KIND_SHIFT);
    uint32_t qi = (uint32_t)(wc->wr_id >> HG_WR_QP_SHIFT) & ((1u << 22) - 1);
    uint64_t v = wc->wr_id & HG_WR_VAL_MASK;
    struct hg_qp *q = &t->qps[qi];
    if (kind == HG_WR_SQ) {
        q->sq_done = v;
        return 0;
    }
    /* a SEND request in receive buffer v */
    const uint8_t *p = req_slot(hg, q, (uint32_t)v);
    uint64_t tag;
    uint32_t link, s;
    hg_get_hdr(p, &tag, &link, &s);
    if (wc->byte_len != hg->o.L) {
        char why[96];
        snprintf(why, sizeof(why), "received %" PRIu32 " bytes, expected %" PRIu32, wc->byte_len,
                 hg->o.L);
        return violation(t, q, s, true, 0, why);
    }
    q->nrecv++;
    mark_dirty(t, qi);
    (*found)++;
    return responder_got(t, qi, s, p);
}

/* ------------------------------------------------------------ both */

/* One turn: poll the CQ once, then scan the slots the peer WRITEs into.
 * *found counts the messages taken; *polled the completions. */
static int poll_once(struct hg_thread *t, uint32_t *found, int *polled)
{
    struct hg *hg = t->hg;
    struct ibv_wc wc[HG_POLL_BATCH];
    if (t->requesting)
        observe(t);
    int n = ibv_poll_cq(t->cq, HG_POLL_BATCH, wc);
    if (n < 0) {
        fprintf(stderr, "%s node %" PRIu32 ": ibv_poll_cq failed\n", hg->prog, hg->o.node);
        return 1;
    }
    *polled = n;
    for (int i = 0; i < n; i++) {
        int rc = wc_ok(t, &wc[i]);
        if (rc == 0)
            rc = t->requesting ? requester_wc(t, &wc[i], found) : responder_wc(t, &wc[i], found);
        if (rc)
            return rc;
    }
    int rc = 0;
    if (t->requesting && hg_protos[hg->o.proto].resp == HG_WRITE)
        rc = requester_scan(t, found);
    else if (!t->requesting && hg_protos[hg->o.proto].req == HG_WRITE)
        rc = responder_scan(t, found);
    touch_charge(t);
    return rc;
}

/* Post what the turn found: receives to repost, then requests / responses. */
static int flush(struct hg_thread *t)
{
    bool recvs = takes_sends(t);
    while (t->ndirty) {
        uint32_t qi = t->dirty[t->dhead];
        t->dhead = (t->dhead + 1) % t->nqps;
        t->ndirty--;
        struct hg_qp *q = &t->qps[qi];
        q->dirty = false;
        if (recvs && !t->stopping && repost_recvs(t, q, !t->requesting))
            return 1;
        if (q->npend && (t->requesting ? issue(t, qi) : respond(t, qi)))
            return 1;
    }
    touch_charge(t);
    return 0;
}

static uint64_t outstanding(const struct hg_thread *t)
{
    uint64_t n = 0;
    for (uint32_t qi = 0; qi < t->nqps; qi++)
        n += t->qps[qi].outstanding;
    return n;
}

void hg_requester_run(void *arg)
{
    struct hg_thread *t = arg;
    struct hg *hg = t->hg;
    t->t0_ns = hg->start_ns + hg->o.warmup_ns;
    t->t1_ns = t->t0_ns + hg->o.duration_ns;
    t->obs_prev_ns = UINT64_MAX;
    t->round1_ns = UINT64_MAX;
    t->now = host_now_ns();
    for (uint32_t qi = 0; qi < t->nqps; qi++) {
        for (uint32_t s = 0; s < hg->o.R; s++)
            pend_push(t, &t->qps[qi], s);
        mark_dirty(t, qi);
    }
    int rc = flush(t);
    while (rc == 0) {
        t->now = host_now_ns();
        if (!t->stopping && t->now >= t->t1_ns)
            t->stopping = true;
        if (t->stopping && outstanding(t) == 0)
            break;
        uint32_t found = 0;
        int polled = 0;
        rc = poll_once(t, &found, &polled);
        if (rc == 0 && t->ndirty)
            rc = flush(t);
        if (rc == 0 && !found && !polled)
            host_relax();
    }
    t->rc = rc;
}

void hg_responder_run(void *arg)
{
    struct hg_thread *t = arg;
    struct hg *hg = t->hg;
    int rc = 0;
    while (rc == 0 && !atomic_load(&hg->stop)) {
        uint32_t found = 0;
        int polled = 0;
        rc = poll_once(t, &found, &polled);
        if (rc == 0 && t->ndirty)
            rc = flush(t);
        if (rc == 0 && !found && !polled)
            host_relax();
    }
    t->rc = rc;
}
