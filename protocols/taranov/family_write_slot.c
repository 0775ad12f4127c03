/* Write slot family mechanics (Taranov et al., Section 4.2): the sender
 * WRITEs a message into a fixed-size mailbox slot of the receiver; the
 * variants differ in how the receiver learns of it.
 *
 * Receiver memory: `slots` slots of slot_bytes (max_msg_bytes rounded up
 * to 64; + 8 for the inlined trailer), and for the detached bell an array
 * of `slots` 8-byte bells.  Point-to-point variants put message k into slot
 * k mod slots; the receiver takes the slots in that order (detached,
 * inlined) or as the completions name them (IMM), and acknowledges, with a
 * WRITE into the sender's ack word (Section 6), how many slots in sequence
 * it has freed: the sender's credit.
 *
 *   WS_DETACHED  data WRITE to the slot, then an 8-byte WRITE of len + 1
 *                to the slot's bell (two requests, needs in-order
 *                messages: the bell must land after the data);
 *   WS_INLINED   one WRITE of [data][len u32][bell u32 = 1] that ends at
 *                the slot's end (data right-aligned, so data and trailer are
 *                contiguous and the bell is at a fixed place); the
 *                receiver polls the bell and clears it (needs in-order
 *                bytes: the bell is the last byte written);
 *   WS_IMM       WRITE_WITH_IMM, imm = slot; the receive completion
 *                carries the length (byte_len); needs nothing in order;
 *   WS_RESERVE   N senders share the slots ("reserve slot", O(1) memory in
 *                N): a sender asks for a slot with a bufferless
 *                SEND_WITH_IMM, the receiver grants one with a bufferless
 *                SEND_WITH_IMM (imm = slot) when it has a free one
 *                (otherwise the request waits, first come first served;
 *                one request per message, asked when the message is sent),
 *                the sender WRITE_WITH_IMMs the message into it; freeing
 *                the region unlocks the slot.  3 HRT, >= 2 requests on the
 *                sender, 1 on the receiver (Table 2). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <rnicsim/host.h>

#include "protocols/common/pages.h"
#include "protocols/taranov/ch_internal.h"

enum {
    WS_BLOB = 32,
    WS_TRAILER = 8, /* inlined: len u32, bell u32 */
    WS_ACK_SQ = 16, /* receiver's send queue: ack WRITEs (at most 8 outstanding) + slack */
};

#define WS_REQ_IMM 0xffffffffu /* reserve: a request's immediate */

struct ws {
    enum ws_variant v;
    size_t slot_bytes;
    uint32_t window; /* reserve: messages a sender may have in flight */
    struct ibv_comp_channel *cch;
    /* sender */
    struct ibv_cq *scq, *srcq;
    struct chan_qp q;
    struct chan_ack ack;
    uint64_t sent, done;
    uint64_t slots_addr, bells_addr; /* receiver's memory */
    uint32_t rkey;
    uint32_t *trailers; /* inlined: one 8-byte trailer per slot */
    struct ibv_mr *tmr;
    uint32_t *grants; /* reserve: granted slots not used yet (FIFO) */
    uint32_t g_head, g_tail, requested, used;
    /* receiver */
    uint32_t nq;
    struct chan_qp *qs;
    struct ibv_cq **ack_cqs;
    struct ibv_cq *rcq;
    struct chan_ack *acks;
    uint8_t *mem; /* slots, then bells */
    size_t mem_bytes;
    struct ibv_mr *mr;
    uint64_t next;                /* positional: next message (slot next % slots) */
    uint8_t *freed;               /* per slot: freed but not yet acknowledged in sequence */
    uint32_t *free_slots, n_free; /* reserve: stack of free slots */
    uint32_t *pend, p_head, p_tail, p_cap; /* reserve: senders waiting (FIFO) */
};

static volatile uint64_t *bell_of(struct ws *w, struct chan *c, uint64_t slot)
{
    return (volatile uint64_t *)(w->mem + (size_t)c->cfg.slots * w->slot_bytes + slot * 8);
}

static int open_sender(struct chan *c, struct ws *w)
{
    uint32_t depth = 2 * c->cfg.slots + 8;
    w->scq = ibv_create_cq(c->ctx, (int)(2 * depth), NULL, NULL, 0);
    w->srcq = w->v == WS_RESERVE ? ibv_create_cq(c->ctx, (int)(2 * w->window + 8), NULL, NULL, 0)
                                 : w->scq;
    if (!w->scq || !w->srcq)
        return chan_fail(c, ENOMEM, "ibv_create_cq: %s", strerror(errno));
    int rc = chan_qp_create(c, &w->q, w->scq, w->srcq, NULL, depth, 2 * w->window + 2, 0);
    if (rc < 0)
        return rc;
    if (w->v == WS_RESERVE) {
        w->grants = calloc(w->window + 1, sizeof(*w->grants));
        if (!w->grants)
            return chan_fail(c, ENOMEM, "no memory");
        if ((rc = chan_post_recv0(c, w->q.qp, 2 * w->window + 2)) < 0)
            return rc;
    }
    if (w->v == WS_INLINED) {
        size_t bytes = (size_t)c->cfg.slots * WS_TRAILER;
        w->trailers = pages_zalloc(bytes);
        if (!w->trailers)
            return chan_fail(c, ENOMEM, "no memory");
        w->tmr = ibv_reg_mr(c->pd, w->trailers, bytes, IBV_ACCESS_LOCAL_WRITE);
        if (!w->tmr)
            return chan_fail(c, errno ? errno : ENOMEM, "ibv_reg_mr: %s", strerror(errno));
    }
    uint64_t addr = 0;
    uint32_t rkey = 0;
    if ((rc = chan_ack_init_sender(c, &w->ack, &addr, &rkey)) < 0)
        return rc;
    uint8_t mine[WS_BLOB] = {0}, theirs[WS_BLOB];
    memcpy(mine, &addr, 8);
    memcpy(mine + 8, &rkey, 4);
    char link[16];
    rc = chan_qp_connect(c, &w->q, chan_link_name(link, sizeof(link), c->cfg.id), mine, theirs,
                         WS_BLOB);
    if (rc < 0)
        return rc;
    memcpy(&w->slots_addr, theirs, 8);
    memcpy(&w->bells_addr, theirs + 8, 8);
    memcpy(&w->rkey, theirs + 16, 4);
    return 0;
}

static int open_receiver(struct chan *c, struct ws *w)
{
    uint32_t n = c->cfg.senders, slots = c->cfg.slots;
    w->nq = n;
    w->qs = calloc(n, sizeof(*w->qs));
    w->ack_cqs = calloc(n, sizeof(*w->ack_cqs));
    w->acks = calloc(n, sizeof(*w->acks));
    w->freed = calloc(slots, 1);
    w->free_slots = calloc(slots, sizeof(*w->free_slots));
    w->p_cap = n * w->window + 1;
    w->pend = calloc(w->p_cap, sizeof(*w->pend));
    if (!w->qs || !w->ack_cqs || !w->acks || !w->freed || !w->free_slots || !w->pend)
        return chan_fail(c, ENOMEM, "no memory");
    for (uint32_t i = 0; i < slots; i++)
        w->free_slots[i] = slots - 1 - i; /* pop gives slot 0 first */
    w->n_free = slots;
    w->mem_bytes = (size_t)slots * w->slot_bytes + (size_t)slots * 8;
    w->mem_bytes = (w->mem_bytes + 4095) / 4096 * 4096;
    void *p = pages_zalloc(w->mem_bytes);
    if (!p)
        return chan_fail(c, ENOMEM, "no memory for %zu bytes of slots", w->mem_bytes);
    w->mem = p;
    w->mr = ibv_reg_mr(c->pd, p, w->mem_bytes, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    if (!w->mr)
        return chan_fail(c, errno ? errno : ENOMEM, "ibv_reg_mr: %s", strerror(errno));
    bool cq_based = w->v == WS_IMM || w->v == WS_RESERVE;
    if (cq_based && c->cfg.blocking) {
        w->cch = ibv_create_comp_channel(c->ctx);
        if (!w->cch)
            return chan_fail(c, errno ? errno : ENOMEM, "ibv_create_comp_channel: %s",
                             strerror(errno));
    }
    uint32_t per_qp = w->v == WS_RESERVE ? 2 * w->window + 2 : (w->v == WS_IMM ? slots : 1);
    w->rcq = ibv_create_cq(c->ctx, (int)(n * per_qp + 16), NULL, w->cch, 0);
    if (!w->rcq)
        return chan_fail(c, ENOMEM, "ibv_create_cq: %s", strerror(errno));
    for (uint32_t i = 0; i < n; i++) {
        uint32_t sq = w->v == WS_RESERVE ? w->window + WS_ACK_SQ : WS_ACK_SQ;
        w->ack_cqs[i] = ibv_create_cq(c->ctx, (int)(sq + 4), NULL, NULL, 0);
        if (!w->ack_cqs[i])
            return chan_fail(c, ENOMEM, "ibv_create_cq: %s", strerror(errno));
        int rc = chan_qp_create(c, &w->qs[i], w->ack_cqs[i], w->rcq, NULL, sq, per_qp, 0);
        if (rc < 0)
            return rc;
        if (cq_based && (rc = chan_post_recv0(c, w->qs[i].qp, per_qp)) < 0)
            return rc;
    }
    for (uint32_t i = 0; i < n; i++) {
        uint8_t mine[WS_BLOB] = {0}, theirs[WS_BLOB];
        uint64_t slots_addr = (uint64_t)(uintptr_t)w->mem;
        uint64_t bells_addr = slots_addr + (uint64_t)slots * w->slot_bytes;
        memcpy(mine, &slots_addr, 8);
        memcpy(mine + 8, &bells_addr, 8);
        memcpy(mine + 16, &w->mr->rkey, 4);
        char link[16];
        int rc = chan_qp_connect(c, &w->qs[i], chan_link_name(link, sizeof(link), i), mine, theirs,
                                 WS_BLOB);
        if (rc < 0)
            return rc;
        uint64_t addr;
        uint32_t rkey;
        memcpy(&addr, theirs, 8);
        memcpy(&rkey, theirs + 8, 4);
        chan_ack_init_receiver(&w->acks[i], addr, rkey);
    }
    return 0;
}

int ws_open(struct chan *c, enum ws_variant v)
{
    struct ws *w = calloc(1, sizeof(*w));
    if (!w)
        return chan_fail(c, ENOMEM, "no memory");
    c->impl = w;
    w->v = v;
    if (c->cfg.max_msg_bytes == 0 || c->cfg.max_msg_bytes > (1u << 30))
        return chan_fail(c, EINVAL, "%s: max_msg_bytes must be 1..1 GiB", c->ops->name);
    w->slot_bytes = chan_align8(c->cfg.max_msg_bytes + (v == WS_INLINED ? WS_TRAILER : 0));
    w->slot_bytes = (w->slot_bytes + 63) / 64 * 64;
    w->window = 1;
    if (v == WS_RESERVE) {
        /* each sender may have slots / senders messages in flight (at least
         * one), which bounds the receive queues; slots are granted first
         * come first served (the paper notes one sender could take them
         * all) */
        w->window = c->cfg.slots / c->cfg.senders;
        if (w->window == 0)
            w->window = 1;
    }
    return c->cfg.role == CHAN_SENDER ? open_sender(c, w) : open_receiver(c, w);
}

/* ---------------------------------------------------------------- sender */

/* reserve: ask for a slot when a message needs one and none is granted or
 * asked for (one reservation per message: the paper's 3 HRT), then take
 * grants from the receive CQ. */
static int reserve_progress(struct chan *c, struct ws *w, bool need)
{
    /* ask first: the simulator parks a thread at its second empty poll in
     * a row, which must not come before the request is out */
    if (need && w->g_head == w->g_tail && w->requested == w->used) {
        struct ibv_send_wr wr = {.wr_id = 0,
                                 .opcode = IBV_WR_SEND_WITH_IMM,
                                 .send_flags = IBV_SEND_SIGNALED,
                                 .imm_data = WS_REQ_IMM};
        int rc = chan_post_send(c, w->q.qp, &wr);
        if (rc < 0)
            return rc;
        w->requested++;
    }
    struct ibv_wc wc[8];
    int n = chan_poll_cq(c, w->srcq, 8, wc);
    if (n < 0)
        return chan_fail(c, EIO, "%s: ibv_poll_cq failed", c->ops->name);
    for (int i = 0; i < n; i++) {
        if (wc[i].status != IBV_WC_SUCCESS)
            return chan_fail(c, EIO, "%s: grant completion: %s", c->ops->name,
                             ibv_wc_status_str(wc[i].status));
        uint32_t slot = wc[i].imm_data;
        if (slot >= c->cfg.slots)
            return chan_fail(c, EIO, "%s: grant of slot %u (of %u)", c->ops->name, slot,
                             c->cfg.slots);
        w->grants[w->g_tail] = slot;
        w->g_tail = (w->g_tail + 1) % (w->window + 1);
        int rc = chan_post_recv0(c, w->q.qp, 1);
        if (rc < 0)
            return rc;
    }
    return 0;
}

int ws_send(struct chan *c, const struct chan_region *r, uint64_t *handle)
{
    struct ws *w = c->impl;
    if (r->len > c->cfg.max_msg_bytes)
        return chan_fail(c, EMSGSIZE, "%s: message of %zu bytes (max %zu)", c->ops->name, r->len,
                         c->cfg.max_msg_bytes);
    int n = chan_poll_send_cq(c, w->scq, &w->done);
    if (n < 0)
        return n;
    uint32_t slot;
    if (w->v == WS_RESERVE) {
        if (w->sent - w->done >= w->window) /* bounds the receiver's receive queue */
            return CHAN_AGAIN;
        int rc = reserve_progress(c, w, true);
        if (rc < 0)
            return rc;
        if (w->g_head == w->g_tail)
            return CHAN_AGAIN;
        slot = w->grants[w->g_head];
        w->g_head = (w->g_head + 1) % (w->window + 1);
        w->used++;
        if (c->cfg.reserve_delay_ns)
            host_compute(c->cfg.reserve_delay_ns); /* test hook: a slow writer */
    } else {
        if (w->sent - chan_ack_get(&w->ack, 1) >= c->cfg.slots)
            return CHAN_AGAIN;
        slot = (uint32_t)(w->sent % c->cfg.slots);
    }
    uint64_t slot_addr = w->slots_addr + (uint64_t)slot * w->slot_bytes;
    struct ibv_sge sg[2] = {
        {.addr = (uint64_t)(uintptr_t)r->addr, .length = (uint32_t)r->len, .lkey = r->lkey}};
    struct ibv_send_wr wr = {.wr_id = w->sent + 1,
                             .sg_list = sg,
                             .num_sge = r->len ? 1 : 0,
                             .opcode = IBV_WR_RDMA_WRITE,
                             .send_flags = IBV_SEND_SIGNALED};
    wr.wr.rdma.rkey = w->rkey;
    wr.wr.rdma.remote_addr = slot_addr;
    switch (w->v) {
    case WS_DETACHED: {
        /* data, then the bell (len + 1, never 0) from the stack, inline */
        uint64_t bell = (uint64_t)r->len + 1;
        struct ibv_sge bsge = {.addr = (uint64_t)(uintptr_t)&bell, .length = 8, .lkey = 0};
        struct ibv_send_wr bwr = {.wr_id = w->sent + 1,
                                  .sg_list = &bsge,
                                  .num_sge = 1,
                                  .opcode = IBV_WR_RDMA_WRITE,
                                  .send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE};
        bwr.wr.rdma.rkey = w->rkey;
        bwr.wr.rdma.remote_addr = w->bells_addr + (uint64_t)slot * 8;
        wr.wr_id = 0;
        wr.send_flags = 0;
        wr.next = &bwr;
        if (r->len == 0)
            wr = bwr;
        int rc = chan_post_send(c, w->q.qp, &wr);
        if (rc < 0)
            return rc;
        break;
    }
    case WS_INLINED: {
        uint32_t *t = w->trailers + 2 * slot;
        t[0] = (uint32_t)r->len;
        t[1] = 1;
        sg[wr.num_sge].addr = (uint64_t)(uintptr_t)t;
        sg[wr.num_sge].length = WS_TRAILER;
        sg[wr.num_sge].lkey = w->tmr->lkey;
        wr.num_sge++;
        wr.wr.rdma.remote_addr = slot_addr + w->slot_bytes - WS_TRAILER - r->len;
        int rc = chan_post_send(c, w->q.qp, &wr);
        if (rc < 0)
            return rc;
        break;
    }
    case WS_IMM:
    case WS_RESERVE: {
        wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
        wr.imm_data = slot;
        int rc = chan_post_send(c, w->q.qp, &wr);
        if (rc < 0)
            return rc;
        break;
    }
    }
    *handle = ++w->sent;
    return 0;
}

int ws_test_send(struct chan *c, uint64_t handle)
{
    struct ws *w = c->impl;
    if (w->done < handle) {
        int n = chan_poll_send_cq(c, w->scq, &w->done);
        if (n < 0)
            return n;
    }
    return w->done >= handle ? 0 : CHAN_AGAIN;
}

/* ---------------------------------------------------------------- receiver */

static uint32_t sender_of_qpn(const struct ws *w, uint32_t qpn)
{
    for (uint32_t i = 0; i < w->nq; i++)
        if (w->qs[i].qp->qp_num == qpn)
            return i;
    return UINT32_MAX;
}

static int grant(struct chan *c, struct ws *w, uint32_t sender, uint32_t slot)
{
    struct chan_qp *q = &w->qs[sender];
    uint64_t dummy = 0;
    int n;
    while ((n = chan_poll_send_cq(c, q->scq, &dummy)) > 0) /* reap earlier grants */
        ;
    if (n < 0)
        return n;
    struct ibv_send_wr wr = {.wr_id = 0,
                             .opcode = IBV_WR_SEND_WITH_IMM,
                             .send_flags = IBV_SEND_SIGNALED,
                             .imm_data = slot},
                       *bad = NULL;
    int err = ibv_post_send(q->qp, &wr, &bad);
    if (err)
        return chan_fail(c, err, "%s: grant: ibv_post_send: %s", c->ops->name, strerror(err));
    return 0;
}

static int recv_cq(struct chan *c, struct ws *w, struct chan_region *out)
{
    for (;;) {
        struct ibv_wc wc;
        int n = chan_poll_cq(c, w->rcq, 1, &wc);
        if (n == 0 && w->cch)
            n = chan_cq_block(c, w->cch, w->rcq, &wc);
        if (n < 0)
            return n == -1 ? chan_fail(c, EIO, "%s: ibv_poll_cq failed", c->ops->name) : n;
        if (n == 0)
            return CHAN_AGAIN;
        if (wc.status != IBV_WC_SUCCESS)
            return chan_fail(c, EIO, "%s: receive completion: %s", c->ops->name,
                             ibv_wc_status_str(wc.status));
        uint32_t sender = sender_of_qpn(w, wc.qp_num);
        if (sender == UINT32_MAX)
            return chan_fail(c, EIO, "%s: completion of an unknown QP", c->ops->name);
        int rc = chan_post_recv0(c, w->qs[sender].qp, 1);
        if (rc < 0)
            return rc;
        if (w->v == WS_RESERVE && wc.opcode == IBV_WC_RECV) { /* a reservation request */
            if (w->n_free > 0) {
                rc = grant(c, w, sender, w->free_slots[--w->n_free]);
            } else {
                w->pend[w->p_tail] = sender;
                w->p_tail = (w->p_tail + 1) % w->p_cap;
            }
            if (rc < 0)
                return rc;
            continue;
        }
        uint32_t slot = wc.imm_data;
        if (wc.opcode != IBV_WC_RECV_RDMA_WITH_IMM || slot >= c->cfg.slots ||
            wc.byte_len > c->cfg.max_msg_bytes)
            return chan_fail(c, EIO, "%s: unexpected completion (opcode %d, imm %u, %u bytes)",
                             c->ops->name, (int)wc.opcode, slot, wc.byte_len);
        out->addr = w->mem + (size_t)slot * w->slot_bytes;
        out->len = wc.byte_len;
        out->lkey = w->mr->lkey;
        out->priv = slot | ((uint64_t)sender << 32);
        return 0;
    }
}

int ws_recv(struct chan *c, struct chan_region *out)
{
    struct ws *w = c->impl;
    if (w->v == WS_IMM || w->v == WS_RESERVE)
        return recv_cq(c, w, out);
    uint32_t slot = (uint32_t)(w->next % c->cfg.slots);
    uint8_t *s = w->mem + (size_t)slot * w->slot_bytes;
    size_t len;
    if (w->v == WS_DETACHED) {
        uint64_t bell = *bell_of(w, c, slot);
        if (bell == 0)
            return CHAN_AGAIN;
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        len = (size_t)(bell - 1);
        out->addr = s;
    } else { /* WS_INLINED: trailer at the slot's end */
        volatile uint32_t *t = (volatile uint32_t *)(s + w->slot_bytes - WS_TRAILER);
        if (t[1] == 0)
            return CHAN_AGAIN;
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        len = t[0];
        if (len > c->cfg.max_msg_bytes)
            return chan_fail(c, EBADMSG, "%s: slot %u says %zu bytes (max %zu)", c->ops->name, slot,
                             len, c->cfg.max_msg_bytes);
        out->addr = s + w->slot_bytes - WS_TRAILER - len;
    }
    if (len > c->cfg.max_msg_bytes)
        return chan_fail(c, EBADMSG, "%s: bell of slot %u says %zu bytes", c->ops->name, slot, len);
    out->len = len;
    out->lkey = w->mr->lkey;
    out->priv = slot;
    w->next++;
    return 0;
}

int ws_free(struct chan *c, struct chan_region *r)
{
    struct ws *w = c->impl;
    uint32_t slot = (uint32_t)r->priv, sender = (uint32_t)(r->priv >> 32);
    if (slot >= c->cfg.slots || sender >= w->nq)
        return chan_fail(c, EINVAL, "%s: not a received region", c->ops->name);
    uint8_t *s = w->mem + (size_t)slot * w->slot_bytes;
    if (w->v == WS_DETACHED)
        *bell_of(w, c, slot) = 0; /* clear the bell to reuse the slot */
    else if (w->v == WS_INLINED)
        memset(s + w->slot_bytes - WS_TRAILER, 0, WS_TRAILER);
    if (w->v == WS_RESERVE) { /* unlock: to a waiting sender, or back to the pool */
        if (w->p_head != w->p_tail) {
            uint32_t to = w->pend[w->p_head];
            w->p_head = (w->p_head + 1) % w->p_cap;
            return grant(c, w, to, slot);
        }
        w->free_slots[w->n_free++] = slot;
        return 0;
    }
    /* acknowledge the slots freed in sequence (the sender reuses slot k mod
     * slots only when message k - slots is freed) */
    struct chan_ack *a = &w->acks[0];
    w->freed[slot] = 1;
    while (w->freed[a->value[1] % c->cfg.slots]) {
        w->freed[a->value[1] % c->cfg.slots] = 0;
        a->value[1]++;
    }
    uint64_t every[CHAN_ACK_WORDS] = {0, c->cfg.slots / 2 ? c->cfg.slots / 2 : 1};
    return chan_ack_flush(c, a, &w->qs[0], every);
}

void ws_close(struct chan *c)
{
    struct ws *w = c->impl;
    if (!w)
        return;
    chan_qp_destroy(&w->q);
    chan_ack_destroy(&w->ack);
    for (uint32_t i = 0; w->qs && i < w->nq; i++)
        chan_qp_destroy(&w->qs[i]);
    for (uint32_t i = 0; w->ack_cqs && i < w->nq; i++)
        if (w->ack_cqs[i])
            ibv_destroy_cq(w->ack_cqs[i]);
    if (w->srcq && w->srcq != w->scq)
        ibv_destroy_cq(w->srcq);
    if (w->scq)
        ibv_destroy_cq(w->scq);
    if (w->rcq)
        ibv_destroy_cq(w->rcq);
    if (w->cch)
        ibv_destroy_comp_channel(w->cch);
    if (w->tmr)
        ibv_dereg_mr(w->tmr);
    if (w->mr)
        ibv_dereg_mr(w->mr);
    free(w->mem);
    free(w->trailers);
    free(w->grants);
    free(w->qs);
    free(w->ack_cqs);
    free(w->acks);
    free(w->freed);
    free(w->free_slots);
    free(w->pend);
    free(w);
    c->impl = NULL;
}
