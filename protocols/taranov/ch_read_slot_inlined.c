/* Read slot, inlined bell (Taranov et al., Section 4.5, Table 2).
 *
 * cfg.slots fixed-size mailboxes of max_msg_bytes in the sender's memory,
 * each with a bell inlined at its start ([len | seq << 32], seq = message
 * index + 1).  The sender puts a message into the next free slot - in
 * place, with no copy, when it was composed in the slot's payload area
 * (chan_read_slot_inlined_buffer), else copied there - and then (release
 * fence) sets the bell.  The receiver fetches the whole slot with one READ
 * and checks the bell: >= 2 half round trips, >= 1 READ per message (one
 * more for every poll that finds the bell unset).  The READ returns the
 * bell before the payload and the sender set the bell after the payload,
 * so a set bell means a complete message.  Not variable-size: every poll
 * moves a whole slot.  A zero-copy receiver READs the bell alone and then
 * the payload straight into its destination (2 READs).  The receiver
 * writes the number of processed messages back into the sender's memory,
 * which frees slots and completes chan_test_send. */
#include <errno.h>
#include <stdatomic.h>

#include <rnicsim/host.h>

#include "protocols/taranov/channel.h"
#include "protocols/taranov/read_common.h"

#define RSI_HDR_BYTES 16u

extern const struct chan_ops chan_read_slot_inlined;

static int rsi_open(struct chan *c)
{
    int err = rd_check_cfg(c, false);
    if (err)
        return err;
    size_t stride =
        (RSI_HDR_BYTES + c->cfg.max_msg_bytes + RD_LINE_BYTES - 1) / RD_LINE_BYTES * RD_LINE_BYTES;
    struct rd_slot_layout l = {
        .send_table_bytes = c->cfg.slots * stride,
        .send_access = IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE,
        .recv_bytes = c->cfg.slots * stride,
        .recv_access = 0,
        .stride = stride,
    };
    return rd_slot_open(c, &l);
}

int chan_read_slot_inlined_buffer(struct chan *c, struct chan_region *out)
{
    struct rd_slot *s = c->impl;
    if (c->ops != &chan_read_slot_inlined || c->cfg.role != CHAN_SENDER)
        return rd_fail(c, EINVAL, "not a read-slot-inlined sender");
    if (s->sent - rd_slot_acked(s) >= c->cfg.slots)
        return CHAN_AGAIN;
    out->addr = s->mem + (s->sent % c->cfg.slots) * s->stride + RSI_HDR_BYTES;
    out->len = c->cfg.max_msg_bytes;
    out->lkey = s->mem_mr->lkey;
    out->priv = s->sent;
    return 0;
}

static int rsi_send(struct chan *c, const struct chan_region *r, uint64_t *handle)
{
    struct rd_slot *s = c->impl;
    if (c->cfg.role != CHAN_SENDER)
        return rd_fail(c, EINVAL, "send on a receiver");
    if (r->len > c->cfg.max_msg_bytes)
        return rd_fail(c, EMSGSIZE, "message above the slot size (max_msg_bytes)");
    if (s->sent - rd_slot_acked(s) >= c->cfg.slots)
        return CHAN_AGAIN;
    uint8_t *slot = s->mem + (s->sent % c->cfg.slots) * s->stride;
    if (r->addr != slot + RSI_HDR_BYTES)
        host_memcpy(slot + RSI_HDR_BYTES, r->addr, r->len);
    atomic_thread_fence(memory_order_release);
    *(volatile uint64_t *)(void *)slot = rd_bell(s->sent, (uint32_t)r->len);
    s->sent++;
    if (handle)
        *handle = s->sent;
    return rd_drain(c, &s->ep);
}

static bool rsi_bell(struct chan *c, struct rd_slot *s, const uint8_t *hdr)
{
    uint64_t bell = *(const volatile uint64_t *)(const void *)hdr;
    if ((bell >> 32) != (rd_bell(s->recvd, 0) >> 32) || (uint32_t)bell > c->cfg.max_msg_bytes)
        return false;
    s->cur_len = (uint32_t)bell;
    return true;
}

/* Poll the next slot: all of it into its mirror (copying receiver) or
 * its bell alone (zero-copy receiver). */
enum { RSI_POLL_SLOT = 1, RSI_POLL_BELL = 2 };
static int rsi_post(struct chan *c, struct rd_slot *s, unsigned tag)
{
    uint64_t k = s->recvd % c->cfg.slots;
    bool slot = tag == RSI_POLL_SLOT;
    return rd_apoll_start(
        c, &s->ep, &s->poll, tag, &s->reads, slot ? s->mem + k * s->stride : s->hdr,
        slot ? (uint32_t)(RSI_HDR_BYTES + c->cfg.max_msg_bytes) : 8,
        slot ? s->mem_mr->lkey : s->hdr_mr->lkey, s->r_addr + k * s->stride, s->r_rkey);
}

static int rsi_test_send(struct chan *c, uint64_t handle)
{
    /* the message is in its slot (copied there, or composed in place):
     * the caller's buffer is free at once; the slot comes back with the
     * receiver's acknowledgement (chan_send says CHAN_AGAIN until then) */
    struct rd_slot *s = c->impl;
    if (handle == 0 || handle > s->sent)
        return rd_fail(c, EINVAL, "unknown send handle");
    return 0;
}

static int rsi_recv(struct chan *c, struct chan_region *out)
{
    struct rd_slot *s = c->impl;
    if (c->cfg.role != CHAN_RECEIVER)
        return rd_fail(c, EINVAL, "recv on a sender");
    if (rd_rel_full(&s->rel))
        return CHAN_AGAIN;
    uint64_t k = s->recvd % c->cfg.slots;
    uint8_t *buf = s->mem + k * s->stride;
    int err = s->poll.n ? 0 : rsi_post(c, s, RSI_POLL_SLOT);
    if (!err)
        err = rd_apoll_check(c, &s->ep, &s->poll, RSI_POLL_SLOT);
    if (err)
        return err;
    if (!rsi_bell(c, s, buf)) {
        err = rsi_post(c, s, RSI_POLL_SLOT); /* keep a poll in flight */
        return err ? err : CHAN_AGAIN;
    }
    out->addr = buf + RSI_HDR_BYTES;
    out->len = s->cur_len;
    out->lkey = s->mem_mr->lkey;
    out->priv = rd_rel_hold(&s->rel);
    s->recvd++;
    return 0;
}

static int rsi_can_recv(struct chan *c, struct chan_region_option *opt)
{
    struct rd_slot *s = c->impl;
    if (c->cfg.role != CHAN_RECEIVER)
        return rd_fail(c, EINVAL, "can_recv on a sender");
    if (rd_rel_full(&s->rel))
        return CHAN_AGAIN;
    if (!s->have_cur) {
        int err = s->poll.n ? 0 : rsi_post(c, s, RSI_POLL_BELL);
        if (!err)
            err = rd_apoll_check(c, &s->ep, &s->poll, RSI_POLL_BELL);
        if (err)
            return err;
        if (!rsi_bell(c, s, s->hdr)) {
            err = rsi_post(c, s, RSI_POLL_BELL); /* keep a poll in flight */
            return err ? err : CHAN_AGAIN;
        }
        s->have_cur = true;
    }
    opt->len = s->cur_len;
    opt->priv = s->recvd;
    return 0;
}

static int rsi_recv_into(struct chan *c, const struct chan_region_option *opt,
                         const struct chan_region *dst, uint64_t *handle)
{
    struct rd_slot *s = c->impl;
    if (!s->have_cur || opt->priv != s->recvd)
        return rd_fail(c, EINVAL, "option is not the next message (call can_recv)");
    if (dst->len < s->cur_len)
        return rd_fail(c, EMSGSIZE, "destination smaller than the message");
    uint64_t n = 0;
    if (s->cur_len) {
        uint64_t raddr = s->r_addr + (s->recvd % c->cfg.slots) * s->stride + RSI_HDR_BYTES;
        int err =
            rd_slot_read(c, s, RD_WR_DATA, dst->addr, s->cur_len, dst->lkey, raddr, s->r_rkey, &n);
        if (err)
            return err;
    }
    uint64_t idx = rd_rel_hold(&s->rel);
    s->zc_wait[idx % c->cfg.slots] = n;
    s->have_cur = false;
    s->recvd++;
    *handle = idx + 1;
    return 0;
}

const struct chan_ops chan_read_slot_inlined = {
    .name = "read-slot-inlined",
    .family = "read-slot",
    .paper_section = "4.5",
    .features =
        {
            .zero_copy_send = true, /* compose in chan_read_slot_inlined_buffer; else one copy */
            .zero_copy_recv = true,
            .variable_size = false, /* fixed slots: each READ moves a whole slot */
            .blocking_recv = false,
            .shared = false,
            .multi_reader = false,
            .in_order = CHAN_NEEDS_NOTHING,
            .ordered = true,
            .opcodes = (1u << IBV_WR_RDMA_READ) | (1u << IBV_WR_RDMA_WRITE), /* + ack write-back */
        },
    .open = rsi_open,
    .send = rsi_send,
    .test_send = rsi_test_send,
    .recv = rsi_recv,
    .free_region = rd_slot_free,
    .can_recv = rsi_can_recv,
    .recv_into = rsi_recv_into,
    .test_recv = rd_slot_test_recv,
    .close = rd_slot_close,
};
