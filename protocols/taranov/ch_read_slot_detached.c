/* Read slot, detached bell (Taranov et al., Section 4.5, Table 2).
 *
 * The sender writes into a detached bell a descriptor of the message -
 * its address, rkey and length, and last (release fence) a sequence
 * number - and leaves the message where it is: the receiver READs the
 * bell and, once it shows the expected sequence number, READs the record
 * from the address the bell names (pointer traversal): >= 4 half round
 * trips, >= 2 READs per message, zero-copy on both sides (the sender's
 * region is registered for remote READ on first use; a zero-copy receiver
 * READs straight into its destination), any size up to max_msg_bytes.
 * cfg.slots bells let that many messages be outstanding; the receiver
 * writes the number of messages it has processed back into the sender's
 * memory, which frees bells and completes chan_test_send (the sender's
 * region must stay untouched until then).
 *
 * Bell: seq (u64) at offset 0, then addr (u64), rkey, len (u32): the READ
 * returns the sequence number before the fields the sender wrote first. */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "protocols/taranov/channel.h"
#include "protocols/taranov/read_common.h"

struct rsd_bell {
    uint64_t seq;
    uint64_t addr;
    uint32_t rkey, len;
    uint64_t pad;
};
#define RSD_BELL_BYTES sizeof(struct rsd_bell)

static int rsd_open(struct chan *c)
{
    int err = rd_check_cfg(c, false);
    if (err)
        return err;
    struct rd_slot_layout l = {
        .send_table_bytes = c->cfg.slots * RSD_BELL_BYTES,
        .send_access = IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE,
        .recv_bytes = c->cfg.slots * c->cfg.max_msg_bytes,
        .recv_access = 0,
        .stride = c->cfg.max_msg_bytes,
        .ack_every = true, /* chan_test_send waits for it (zero-copy send) */
    };
    return rd_slot_open(c, &l);
}

static int rsd_send(struct chan *c, const struct chan_region *r, uint64_t *handle)
{
    struct rd_slot *s = c->impl;
    if (c->cfg.role != CHAN_SENDER)
        return rd_fail(c, EINVAL, "send on a receiver");
    if (r->len > c->cfg.max_msg_bytes)
        return rd_fail(c, EMSGSIZE, "message above max_msg_bytes");
    if (s->sent - rd_slot_acked(s) >= c->cfg.slots)
        return CHAN_AGAIN;
    struct ibv_mr *mr =
        rd_cache_reg(c, &s->ep, r->addr, r->len, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
    if (!mr)
        return -EIO;
    volatile struct rsd_bell *b =
        (volatile struct rsd_bell *)(void *)(s->mem + (s->sent % c->cfg.slots) * RSD_BELL_BYTES);
    b->addr = (uintptr_t)r->addr;
    b->rkey = mr->rkey;
    b->len = (uint32_t)r->len;
    atomic_thread_fence(memory_order_release);
    b->seq = s->sent + 1;
    s->sent++;
    if (handle)
        *handle = s->sent;
    return rd_drain(c, &s->ep);
}

static int rsd_post(struct chan *c, struct rd_slot *s)
{
    return rd_apoll_start(c, &s->ep, &s->poll, 1, &s->reads, s->hdr, RSD_BELL_BYTES,
                          s->hdr_mr->lkey, s->r_addr + (s->recvd % c->cfg.slots) * RSD_BELL_BYTES,
                          s->r_rkey);
}

/* The next bell (asynchronous poll); CHAN_AGAIN while it does not show the
 * next message. */
static int rsd_learn(struct chan *c, struct rd_slot *s)
{
    if (s->have_cur)
        return 0;
    int err = s->poll.n ? 0 : rsd_post(c, s);
    if (!err)
        err = rd_apoll_check(c, &s->ep, &s->poll, 1);
    if (err)
        return err;
    const volatile struct rsd_bell *b = (const volatile struct rsd_bell *)(void *)s->hdr;
    if (b->seq != s->recvd + 1) {
        /* nothing new: acknowledge what is processed (the sender may be
         * waiting for its buffers) and keep a poll in flight */
        err = rd_slot_ack(c, s);
        if (!err)
            err = rsd_post(c, s);
        return err ? err : CHAN_AGAIN;
    }
    if (b->len > c->cfg.max_msg_bytes)
        return rd_fail(c, EPROTO, "bell names a message above max_msg_bytes");
    s->cur_addr = b->addr;
    s->cur_rkey = b->rkey;
    s->cur_len = b->len;
    s->have_cur = true;
    return 0;
}

static int rsd_recv(struct chan *c, struct chan_region *out)
{
    return rd_slot_recv_learned(c, rsd_learn, 0, out);
}

static int rsd_can_recv(struct chan *c, struct chan_region_option *opt)
{
    return rd_slot_can_recv_learned(c, rsd_learn, opt);
}

const struct chan_ops chan_read_slot_detached = {
    .name = "read-slot-detached",
    .family = "read-slot",
    .paper_section = "4.5",
    .features =
        {
            .zero_copy_send = true,
            .zero_copy_recv = true,
            .variable_size = true,
            .blocking_recv = false, /* the receiver polls the bell with READs */
            .shared = false,
            .multi_reader = false,
            .in_order = CHAN_NEEDS_NOTHING,
            .ordered = true,
            .opcodes = (1u << IBV_WR_RDMA_READ) | (1u << IBV_WR_RDMA_WRITE), /* + ack write-back */
        },
    .open = rsd_open,
    .send = rsd_send,
    .test_send = rd_slot_test_send_acked,
    .recv = rsd_recv,
    .free_region = rd_slot_free,
    .can_recv = rsd_can_recv,
    .recv_into = rd_slot_recv_into,
    .test_recv = rd_slot_test_recv,
    .close = rd_slot_close,
};
