/* Read slot, indirect read (Taranov et al., Section 4.5, Table 2).
 *
 * The pull channel turned around: the receiver pre-allocates a receive
 * buffer and sends its address to the sender, and the sender uses a write
 * slot channel to write the message into that buffer: 2 half round trips
 * (the address travels ahead of the message), 1 request on each side,
 * zero-copy on both sides, fixed-size buffers (not variable-size).
 *
 * Second channels used here: the receiver's requests go into cfg.slots
 * request slots in the sender's memory with a WRITE each ("write slot,
 * inlined bell": the sequence number is the last word of the 32-byte
 * request, so it needs in-order bytes within the WRITE, Table 2 note a);
 * the sender polls them locally (passive) and answers request k with one
 * WRITE_WITH_IMM (imm = k) into the announced buffer (a "write slot with
 * IMM": no order needed, and the receiver can block on its completion
 * channel, cfg.blocking).  A copying receiver announces its cfg.slots
 * buffers at open (or, with cfg.zero_copy set, at its first chan_recv)
 * and again each time one is freed; a zero-copy receiver announces the
 * destination of each chan_recv_into (registered on first use); there the
 * message length is not reported (fixed-size channel). */
#include <endian.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "protocols/taranov/channel.h"
#include "protocols/taranov/read_common.h"

struct rsx_req {
    uint64_t addr;
    uint32_t rkey, cap;
    uint64_t pad;
    uint64_t seq; /* last: the inlined bell */
};
#define RSX_REQ_BYTES sizeof(struct rsx_req)

enum rsx_mode { RSX_UNDECIDED, RSX_COPYING, RSX_ZERO_COPY };
struct rsx_state {
    enum rsx_mode mode; /* fixed by the receiver's first call */
    uint64_t reqs;      /* requests announced */
    uint32_t req_buf[]; /* copying receiver: buffer of request k at [k % slots] */
};

static int rsx_announce(struct chan *c, struct rd_slot *s, void *addr, uint32_t rkey, size_t cap,
                        uint32_t buf)
{
    struct rsx_state *x = s->priv;
    struct rsx_req q = {
        .addr = (uintptr_t)addr, .rkey = rkey, .cap = (uint32_t)cap, .seq = x->reqs + 1};
    x->req_buf[x->reqs % c->cfg.slots] = buf;
    uint64_t raddr = s->r_addr + (x->reqs % c->cfg.slots) * RSX_REQ_BYTES;
    x->reqs++;
    return rd_write_ctl(c, &s->ep, 0, &q, RSX_REQ_BYTES, raddr, s->r_rkey);
}

/* The first receive call decides: chan_recv announces the channel's own
 * buffers (copying), chan_can_recv announces destinations one by one
 * (zero-copy); mixing them is refused. */
static int rsx_mode(struct chan *c, struct rd_slot *s, enum rsx_mode want)
{
    struct rsx_state *x = s->priv;
    if (x->mode == want)
        return 0;
    if (x->mode != RSX_UNDECIDED)
        return rd_fail(c, EINVAL, "chan_recv and chan_can_recv mixed on one receiver");
    x->mode = want;
    if (want == RSX_ZERO_COPY)
        return 0;
    for (uint32_t k = 0; k < c->cfg.slots; k++) {
        int err = rsx_announce(c, s, s->mem + k * s->stride, s->mem_mr->rkey, s->stride, k);
        if (err)
            return err;
    }
    return 0;
}

static int rsx_post_initial(struct chan *c, struct rd_slot *s)
{
    for (uint32_t k = 0; k < c->cfg.slots; k++) {
        int err = rd_post_recv(c, &s->ep, 0, RD_WR_ID(RD_WR_RECV, k), NULL, 0, 0);
        if (err)
            return err;
    }
    /* a copying receiver announces its buffers right away */
    return c->cfg.zero_copy ? 0 : rsx_mode(c, s, RSX_COPYING);
}

static int rsx_open(struct chan *c)
{
    int err = rd_check_cfg(c, false);
    if (err)
        return err;
    struct rd_slot_layout l = {
        .send_table_bytes = c->cfg.slots * RSX_REQ_BYTES,
        .send_access = IBV_ACCESS_REMOTE_WRITE,
        .recv_bytes = c->cfg.slots * c->cfg.max_msg_bytes,
        .recv_access = IBV_ACCESS_REMOTE_WRITE,
        .recv_wr = c->cfg.slots,
        .stride = c->cfg.max_msg_bytes,
        .sender_writes = true,
        .priv_bytes = sizeof(struct rsx_state) + c->cfg.slots * sizeof(uint32_t),
        .post_initial = rsx_post_initial,
    };
    return rd_slot_open(c, &l);
}

static int rsx_send(struct chan *c, const struct chan_region *r, uint64_t *handle)
{
    struct rd_slot *s = c->impl;
    if (c->cfg.role != CHAN_SENDER)
        return rd_fail(c, EINVAL, "send on a receiver");
    const volatile struct rsx_req *q =
        (const volatile struct rsx_req *)(const void *)(s->mem +
                                                        (s->sent % c->cfg.slots) * RSX_REQ_BYTES);
    /* look before any CQ poll: a caller that host_relax()es on CHAN_AGAIN
     * must not miss the request landing while a poll is charged */
    if (q->seq != s->sent + 1)
        return CHAN_AGAIN; /* the receiver has not asked for a message yet */
    atomic_thread_fence(memory_order_acquire);
    if (r->len > q->cap || r->len > c->cfg.max_msg_bytes)
        return rd_fail(c, EMSGSIZE, "message larger than the receiver's buffer");
    struct ibv_sge sge = {.addr = (uintptr_t)r->addr, .length = (uint32_t)r->len, .lkey = r->lkey};
    int err = rd_post(c, &s->ep, 0, IBV_WR_RDMA_WRITE_WITH_IMM, RD_WR_ID(RD_WR_DATA, s->sent + 1),
                      &sge, r->len ? 1 : 0, q->addr, q->rkey, (uint32_t)s->sent, 0);
    if (err)
        return err;
    s->sent++;
    if (handle)
        *handle = s->sent;
    return 0;
}

static int rsx_test_send(struct chan *c, uint64_t handle)
{
    struct rd_slot *s = c->impl;
    if (handle == 0 || handle > s->sent)
        return rd_fail(c, EINVAL, "unknown send handle");
    /* the WRITE is on the wire: wait for its completion (bounded) rather
     * than say CHAN_AGAIN after an empty CQ poll */
    return rd_wait(c, &s->ep, RD_WR_DATA, handle);
}

/* The next message's completion (in request order). */
static int rsx_arrival(struct chan *c, struct rd_slot *s, struct ibv_wc *wc)
{
    int err = rd_poll_recv(c, &s->ep, c->cfg.blocking, wc);
    if (err)
        return err;
    if (wc->opcode != IBV_WC_RECV_RDMA_WITH_IMM || !(wc->wc_flags & IBV_WC_WITH_IMM) ||
        be32toh(wc->imm_data) != (uint32_t)s->recvd)
        return rd_fail(c, EPROTO, "completion is not the next requested message");
    s->recvd++;
    return rd_post_recv(c, &s->ep, 0, wc->wr_id, NULL, 0, 0);
}

static int rsx_recv(struct chan *c, struct chan_region *out)
{
    struct rd_slot *s = c->impl;
    struct rsx_state *x = s->priv;
    if (c->cfg.role != CHAN_RECEIVER)
        return rd_fail(c, EINVAL, "recv on a sender");
    int err = rsx_mode(c, s, RSX_COPYING);
    if (err)
        return err;
    uint64_t k = s->recvd;
    struct ibv_wc wc;
    err = rsx_arrival(c, s, &wc);
    if (err)
        return err;
    uint32_t b = x->req_buf[k % c->cfg.slots];
    out->addr = s->mem + (size_t)b * s->stride;
    out->len = wc.byte_len;
    out->lkey = s->mem_mr->lkey;
    out->priv = b;
    return 0;
}

static int rsx_free(struct chan *c, struct chan_region *r)
{
    struct rd_slot *s = c->impl;
    if (r->priv >= c->cfg.slots)
        return rd_fail(c, EINVAL, "not a region of this channel");
    /* the buffer is free again: ask for the next message into it */
    return rsx_announce(c, s, s->mem + r->priv * s->stride, s->mem_mr->rkey, s->stride,
                        (uint32_t)r->priv);
}

static int rsx_can_recv(struct chan *c, struct chan_region_option *opt)
{
    struct rd_slot *s = c->impl;
    struct rsx_state *x = s->priv;
    if (c->cfg.role != CHAN_RECEIVER)
        return rd_fail(c, EINVAL, "can_recv on a sender");
    int err = rsx_mode(c, s, RSX_ZERO_COPY);
    if (err)
        return err;
    if (x->reqs - s->recvd >= c->cfg.slots)
        return CHAN_AGAIN;
    opt->len = c->cfg.max_msg_bytes; /* fixed size: any message fits a buffer this big */
    opt->priv = x->reqs;
    return 0;
}

static int rsx_recv_into(struct chan *c, const struct chan_region_option *opt,
                         const struct chan_region *dst, uint64_t *handle)
{
    struct rd_slot *s = c->impl;
    struct rsx_state *x = s->priv;
    if (opt->priv != x->reqs || x->reqs - s->recvd >= c->cfg.slots)
        return rd_fail(c, EINVAL, "option is not the next request (call can_recv)");
    if (dst->len < c->cfg.max_msg_bytes)
        return rd_fail(c, EMSGSIZE, "destination smaller than max_msg_bytes");
    struct ibv_mr *mr = rd_cache_reg(c, &s->ep, dst->addr, dst->len,
                                     IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    if (!mr)
        return -EIO;
    int err = rsx_announce(c, s, dst->addr, mr->rkey, dst->len, 0);
    if (err)
        return err;
    *handle = x->reqs;
    return 0;
}

static int rsx_test_recv(struct chan *c, uint64_t handle)
{
    struct rd_slot *s = c->impl;
    struct rsx_state *x = s->priv;
    if (handle == 0 || handle > x->reqs)
        return rd_fail(c, EINVAL, "unknown receive handle");
    while (s->recvd < handle) {
        struct ibv_wc wc;
        int err = rsx_arrival(c, s, &wc);
        if (err)
            return err;
    }
    return rd_drain(c, &s->ep);
}

const struct chan_ops chan_read_slot_indirect = {
    .name = "read-slot-indirect",
    .family = "read-slot",
    .paper_section = "4.5",
    .features =
        {
            .zero_copy_send = true,
            .zero_copy_recv = true,
            .variable_size = false, /* buffers of max_msg_bytes */
            .blocking_recv = true,
            .shared = false,
            .multi_reader = false,
            .in_order = CHAN_NEEDS_BYTES, /* the request's inlined bell */
            .ordered = true,
            .opcodes = (1u << IBV_WR_RDMA_WRITE) | (1u << IBV_WR_RDMA_WRITE_WITH_IMM),
        },
    .open = rsx_open,
    .send = rsx_send,
    .test_send = rsx_test_send,
    .recv = rsx_recv,
    .free_region = rsx_free,
    .can_recv = rsx_can_recv,
    .recv_into = rsx_recv_into,
    .test_recv = rsx_test_recv,
    .close = rd_slot_close,
};
