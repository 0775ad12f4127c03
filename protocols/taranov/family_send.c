/* Send/Recv family mechanics (Taranov et al., Section 4.1): the sender
 * SENDs, the receiver pre-posts fixed-size RECEIVEs.  Variants:
 *   SR_NORMAL      one sender, the receiver's own receive queue of `slots`
 *                  buffers of max_msg_bytes;
 *   SR_SHARED      N senders, one shared receive queue (SRQ) of `slots`
 *                  buffers (memory O(1) in N);
 *   SR_BUFFERLESS  N senders, SEND_WITH_IMM of 0 bytes carrying the 4-byte
 *                  message in the immediate, receives without buffers.
 * Flow control (Section 4.1: "systems often explicitly inform peers about
 * the number of posted RECEIVE requests"): the receiver SENDs the number
 * of messages it has freed (reposted receives) back into one of the
 * credit receives the sender keeps posted (chan_ack in SEND mode: a
 * monotonic counter, the sender keeps the largest seen, as SENDs may
 * arrive out of order on EFA SRD), so the family needs SEND only (Table 2
 * "Requests: Send") and runs on transports without WRITE (efa-acks; it
 * WROTE the count before); a sender keeps at most `quota` messages unfreed: slots
 * (normal, bufferless: per sender receive queue) or slots / senders
 * (shared: the SRQ's buffers divided among the senders, so no RECEIVE is
 * ever missing - an RNR on InfiniBand would stall the connection). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <rnicsim/host.h>

#include "protocols/common/pages.h"
#include "protocols/taranov/ch_internal.h"

/* SR_ACK_SQ: the receiver's send queue holds ack SENDs (at most 8
 * outstanding, chan_ack_flush) + slack. */
enum { SR_BLOB = 16, SR_ACK_SQ = 16 };

struct sr {
    enum sr_variant v;
    uint32_t quota; /* messages a sender may have unfreed */
    struct ibv_comp_channel *cch;
    struct ibv_cq *rcq;
    /* sender */
    struct ibv_cq *scq, *ccq; /* ccq: credit receives (chan_ack_post_recvs) */
    struct chan_qp q;
    struct chan_ack ack;
    uint64_t sent, done;
    /* receiver: one QP (and send CQ for its acks) per sender */
    uint32_t nq;
    struct chan_qp *qs;
    struct ibv_cq **ack_cqs;
    struct chan_ack *acks;
    struct ibv_srq *srq;
    uint8_t *buf;
    struct ibv_mr *mr;
    uint32_t nbuf;       /* receive buffers (or, bufferless, receive WRs) */
    uint32_t *imm;       /* bufferless: the immediate of each receive WR */
    uint64_t *sender_of; /* bufferless/normal: the QP a WR is posted to */
};

static void blob_put(uint8_t *b, uint64_t addr, uint32_t rkey)
{
    memset(b, 0, SR_BLOB);
    memcpy(b, &addr, 8);
    memcpy(b + 8, &rkey, 4);
}
static void blob_get(const uint8_t *b, uint64_t *addr, uint32_t *rkey)
{
    memcpy(addr, b, 8);
    memcpy(rkey, b + 8, 4);
}

/* Post receive WR `idx` (its buffer, or none) to the SRQ or to QP s. */
static int post_recv(struct chan *c, struct sr *s, uint32_t idx, uint32_t sender)
{
    struct ibv_sge sge = {0};
    struct ibv_recv_wr wr = {.wr_id = idx, .sg_list = NULL, .num_sge = 0};
    if (s->v != SR_BUFFERLESS) {
        sge.addr = (uint64_t)(uintptr_t)(s->buf + (size_t)idx * c->cfg.max_msg_bytes);
        sge.length = (uint32_t)c->cfg.max_msg_bytes;
        sge.lkey = s->mr->lkey;
        wr.sg_list = &sge;
        wr.num_sge = 1;
    }
    struct ibv_recv_wr *bad = NULL;
    int err =
        s->srq ? ibv_post_srq_recv(s->srq, &wr, &bad) : ibv_post_recv(s->qs[sender].qp, &wr, &bad);
    if (err)
        return chan_fail(c, err, "%s: post receive: %s", c->ops->name, strerror(err));
    if (s->sender_of)
        s->sender_of[idx] = sender;
    return 0;
}

static int open_sender(struct chan *c, struct sr *s)
{
    s->scq = ibv_create_cq(c->ctx, (int)(2 * s->quota + 16), NULL, NULL, 0);
    if (!s->scq)
        return chan_fail(c, ENOMEM, "ibv_create_cq: %s", strerror(errno));
    s->ccq = ibv_create_cq(c->ctx, CHAN_ACK_RECVS + 4, NULL, NULL, 0);
    if (!s->ccq)
        return chan_fail(c, ENOMEM, "ibv_create_cq: %s", strerror(errno));
    int rc = chan_qp_create(c, &s->q, s->scq, s->ccq, NULL, 2 * s->quota + 8, CHAN_ACK_RECVS, 0);
    if (rc < 0)
        return rc;
    uint64_t addr;
    uint32_t rkey;
    if ((rc = chan_ack_init_sender(c, &s->ack, &addr, &rkey)) < 0 ||
        (rc = chan_ack_post_recvs(c, &s->ack, s->q.qp, s->ccq)) < 0)
        return rc;
    uint8_t mine[SR_BLOB], theirs[SR_BLOB];
    blob_put(mine, addr, rkey);
    char link[16];
    return chan_qp_connect(c, &s->q, chan_link_name(link, sizeof(link), c->cfg.id), mine, theirs,
                           SR_BLOB);
}

static int open_receiver(struct chan *c, struct sr *s)
{
    uint32_t n = c->cfg.senders;
    s->nq = n;
    s->qs = calloc(n, sizeof(*s->qs));
    s->ack_cqs = calloc(n, sizeof(*s->ack_cqs));
    s->acks = calloc(n, sizeof(*s->acks));
    if (!s->qs || !s->ack_cqs || !s->acks)
        return chan_fail(c, ENOMEM, "no memory");
    /* receive WRs: a buffer each (normal, shared) or none (bufferless,
     * `slots` per sender) */
    s->nbuf = s->v == SR_SHARED ? c->cfg.slots : c->cfg.slots * n;
    if (s->v == SR_BUFFERLESS) {
        s->imm = calloc(s->nbuf, sizeof(*s->imm));
        if (!s->imm)
            return chan_fail(c, ENOMEM, "no memory");
    } else {
        size_t bytes = (size_t)s->nbuf * c->cfg.max_msg_bytes;
        bytes = (bytes + PAGES_BYTES - 1) / PAGES_BYTES * PAGES_BYTES;
        void *p = pages_zalloc(bytes);
        if (!p)
            return chan_fail(c, ENOMEM, "no memory for %zu bytes of receive buffers", bytes);
        s->buf = p;
        s->mr = ibv_reg_mr(c->pd, p, bytes, IBV_ACCESS_LOCAL_WRITE);
        if (!s->mr)
            return chan_fail(c, errno ? errno : ENOMEM, "ibv_reg_mr: %s", strerror(errno));
    }
    s->sender_of = calloc(s->nbuf, sizeof(*s->sender_of));
    if (!s->sender_of)
        return chan_fail(c, ENOMEM, "no memory");
    if (c->cfg.blocking) {
        s->cch = ibv_create_comp_channel(c->ctx);
        if (!s->cch)
            return chan_fail(c, errno ? errno : ENOMEM, "ibv_create_comp_channel: %s",
                             strerror(errno));
    }
    s->rcq = ibv_create_cq(c->ctx, (int)(s->nbuf + 16), NULL, s->cch, 0);
    if (!s->rcq)
        return chan_fail(c, ENOMEM, "ibv_create_cq: %s", strerror(errno));
    if (s->v == SR_SHARED) {
        struct ibv_srq_init_attr sa = {.attr = {.max_wr = s->nbuf, .max_sge = 1}};
        s->srq = ibv_create_srq(c->pd, &sa);
        if (!s->srq)
            return chan_fail(c, errno ? errno : ENOMEM, "ibv_create_srq (%u WRs): %s", s->nbuf,
                             strerror(errno));
    }
    uint32_t per_qp = s->v == SR_SHARED ? 1 : c->cfg.slots;
    for (uint32_t i = 0; i < n; i++) {
        s->ack_cqs[i] = ibv_create_cq(c->ctx, SR_ACK_SQ + 4, NULL, NULL, 0);
        if (!s->ack_cqs[i])
            return chan_fail(c, ENOMEM, "ibv_create_cq: %s", strerror(errno));
        int rc = chan_qp_create(c, &s->qs[i], s->ack_cqs[i], s->rcq, s->srq, SR_ACK_SQ, per_qp, 0);
        if (rc < 0)
            return rc;
    }
    /* all receives are posted before any sender can connect */
    for (uint32_t i = 0; i < s->nbuf; i++) {
        int rc = post_recv(c, s, i, s->v == SR_SHARED ? 0 : i / c->cfg.slots);
        if (rc < 0)
            return rc;
    }
    for (uint32_t i = 0; i < n; i++) {
        uint8_t mine[SR_BLOB], theirs[SR_BLOB];
        blob_put(mine, 0, 0);
        char link[16];
        int rc = chan_qp_connect(c, &s->qs[i], chan_link_name(link, sizeof(link), i), mine, theirs,
                                 SR_BLOB);
        if (rc < 0)
            return rc;
        uint64_t addr;
        uint32_t rkey;
        blob_get(theirs, &addr, &rkey);
        chan_ack_init_receiver(&s->acks[i], addr, rkey);
        chan_ack_use_send(&s->acks[i]);
    }
    return 0;
}

int sr_open(struct chan *c, enum sr_variant v)
{
    struct sr *s = calloc(1, sizeof(*s));
    if (!s)
        return chan_fail(c, ENOMEM, "no memory");
    c->impl = s;
    s->v = v;
    if (v == SR_BUFFERLESS) {
        if (c->cfg.max_msg_bytes == 0)
            c->cfg.max_msg_bytes = 4;
        if (c->cfg.max_msg_bytes != 4)
            return chan_fail(c, EINVAL, "%s: messages are the 4-byte immediate (max size 4)",
                             c->ops->name);
    } else if (c->cfg.max_msg_bytes == 0 || c->cfg.max_msg_bytes > (1u << 30)) {
        return chan_fail(c, EINVAL, "%s: max_msg_bytes must be 1..1 GiB", c->ops->name);
    }
    s->quota = c->cfg.slots;
    if (v == SR_SHARED) {
        s->quota = c->cfg.slots / c->cfg.senders;
        if (s->quota == 0)
            return chan_fail(c, EINVAL, "%s: %u slots cannot be shared by %u senders", c->ops->name,
                             c->cfg.slots, c->cfg.senders);
    }
    return c->cfg.role == CHAN_SENDER ? open_sender(c, s) : open_receiver(c, s);
}

int sr_send(struct chan *c, const struct chan_region *r, uint64_t *handle)
{
    struct sr *s = c->impl;
    if (r->len > c->cfg.max_msg_bytes || (s->v == SR_BUFFERLESS && r->len != 4))
        return chan_fail(c, EMSGSIZE, "%s: message of %zu bytes (max %zu)", c->ops->name, r->len,
                         c->cfg.max_msg_bytes);
    int n = chan_poll_send_cq(c, s->scq, &s->done);
    if (n < 0)
        return n;
    /* credit: receives the receiver has (re)posted for us.  The credit
     * receives are polled only when the credit looks used up: a second
     * empty poll in a row parks the thread (verbs_shim/cq.c), which must
     * not happen before a post that can go ahead. */
    bool no_credit = s->sent - chan_ack_get(&s->ack, 1) >= s->quota;
    if (no_credit) {
        if ((n = chan_ack_poll(c, &s->ack)) < 0)
            return n;
        no_credit = s->sent - chan_ack_get(&s->ack, 1) >= s->quota;
    }
    if (no_credit || s->sent - s->done >= 2 * s->quota)
        return CHAN_AGAIN;
    struct ibv_sge sge = {
        .addr = (uint64_t)(uintptr_t)r->addr, .length = (uint32_t)r->len, .lkey = r->lkey};
    struct ibv_send_wr wr = {
        .wr_id = s->sent + 1,
        .sg_list = &sge,
        .num_sge = 1,
        .opcode = IBV_WR_SEND,
        .send_flags = IBV_SEND_SIGNALED,
    };
    if (s->v == SR_BUFFERLESS) {
        uint32_t imm;
        memcpy(&imm, r->addr, 4);
        wr.opcode = IBV_WR_SEND_WITH_IMM;
        wr.imm_data = imm; /* the message's 4 bytes as they are in memory */
        wr.sg_list = NULL;
        wr.num_sge = 0;
    }
    int err = chan_post_send(c, s->q.qp, &wr);
    if (err)
        return err;
    *handle = ++s->sent;
    return 0;
}

int sr_test_send(struct chan *c, uint64_t handle)
{
    struct sr *s = c->impl;
    if (s->done >= handle)
        return 0;
    int n = chan_poll_send_cq(c, s->scq, &s->done);
    if (n < 0)
        return n;
    return s->done >= handle ? 0 : CHAN_AGAIN;
}

static uint32_t sender_of_qpn(const struct sr *s, uint32_t qpn)
{
    for (uint32_t i = 0; i < s->nq; i++)
        if (s->qs[i].qp->qp_num == qpn)
            return i;
    return UINT32_MAX;
}

int sr_recv(struct chan *c, struct chan_region *out)
{
    struct sr *s = c->impl;
    struct ibv_wc wc;
    int n = chan_poll_cq(c, s->rcq, 1, &wc);
    if (n == 0 && s->cch)
        n = chan_cq_block(c, s->cch, s->rcq, &wc);
    if (n < 0)
        return chan_fail(c, EIO, "%s: ibv_poll_cq failed", c->ops->name);
    if (n == 0)
        return CHAN_AGAIN;
    if (wc.status != IBV_WC_SUCCESS)
        return chan_fail(c, EIO, "%s: receive completion: %s", c->ops->name,
                         ibv_wc_status_str(wc.status));
    uint32_t sender = sender_of_qpn(s, wc.qp_num);
    if (sender == UINT32_MAX || wc.wr_id >= s->nbuf)
        return chan_fail(c, EIO, "%s: completion of an unknown QP or WR", c->ops->name);
    uint32_t idx = (uint32_t)wc.wr_id;
    if (s->v == SR_BUFFERLESS) {
        if (!(wc.wc_flags & IBV_WC_WITH_IMM))
            return chan_fail(c, EIO, "%s: a receive without immediate", c->ops->name);
        s->imm[idx] = wc.imm_data;
        out->addr = &s->imm[idx];
        out->len = 4;
        out->lkey = 0;
    } else {
        out->addr = s->buf + (size_t)idx * c->cfg.max_msg_bytes;
        out->len = wc.byte_len;
        out->lkey = s->mr->lkey;
    }
    out->priv = idx | ((uint64_t)sender << 32);
    return 0;
}

int sr_free(struct chan *c, struct chan_region *r)
{
    struct sr *s = c->impl;
    uint32_t idx = (uint32_t)r->priv, sender = (uint32_t)(r->priv >> 32);
    if (idx >= s->nbuf || sender >= s->nq)
        return chan_fail(c, EINVAL, "%s: not a received region", c->ops->name);
    int rc = post_recv(c, s, idx, s->v == SR_SHARED ? 0 : (uint32_t)s->sender_of[idx]);
    if (rc < 0)
        return rc;
    struct chan_ack *a = &s->acks[sender];
    a->value[1]++;
    uint64_t every[CHAN_ACK_WORDS] = {0, s->quota / 2 ? s->quota / 2 : 1};
    return chan_ack_flush(c, a, &s->qs[sender], every);
}

void sr_close(struct chan *c)
{
    struct sr *s = c->impl;
    if (!s)
        return;
    chan_qp_destroy(&s->q);
    chan_ack_destroy(&s->ack);
    for (uint32_t i = 0; s->qs && i < s->nq; i++)
        chan_qp_destroy(&s->qs[i]);
    for (uint32_t i = 0; s->ack_cqs && i < s->nq; i++)
        if (s->ack_cqs[i])
            ibv_destroy_cq(s->ack_cqs[i]);
    if (s->srq)
        ibv_destroy_srq(s->srq);
    if (s->scq)
        ibv_destroy_cq(s->scq);
    if (s->ccq)
        ibv_destroy_cq(s->ccq);
    if (s->rcq)
        ibv_destroy_cq(s->rcq);
    if (s->cch)
        ibv_destroy_comp_channel(s->cch);
    if (s->mr)
        ibv_dereg_mr(s->mr);
    free(s->buf);
    free(s->imm);
    free(s->sender_of);
    free(s->qs);
    free(s->ack_cqs);
    free(s->acks);
    free(s);
    c->impl = NULL;
}
