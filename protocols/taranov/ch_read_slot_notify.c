/* Read slot, notify receiver (Taranov et al., Section 4.5, Table 2).
 *
 * The sender actively informs the receiver about a message it can fetch:
 * one SEND (16 bytes, inline) carrying the message's address, rkey and
 * length; the receiver then READs the message from the sender's memory:
 * 3 half round trips, 1 request on each side, zero-copy on both sides
 * (the sender's region is registered for remote READ on first use, a
 * zero-copy receiver READs into its destination), any size up to
 * max_msg_bytes.  The notification is a receive completion, so the
 * receiver can block on a completion channel (cfg.blocking).  The receiver
 * keeps cfg.slots receives posted and writes the number of processed
 * messages back into the sender's memory; the sender keeps at most
 * cfg.slots messages unprocessed (so a notification always finds a
 * receive) and chan_test_send completes once its message is processed. */
#include <errno.h>

#include "protocols/taranov/channel.h"
#include "protocols/taranov/read_common.h"

struct rsn_note {
    uint64_t addr;
    uint32_t rkey, len;
};
#define RSN_NOTE_BYTES sizeof(struct rsn_note)

static int rsn_post_initial(struct chan *c, struct rd_slot *s)
{
    for (uint32_t k = 0; k < c->cfg.slots; k++) {
        int err = rd_post_recv(c, &s->ep, 0, RD_WR_ID(RD_WR_RECV, k), s->mem + k * RSN_NOTE_BYTES,
                               RSN_NOTE_BYTES, s->mem_mr->lkey);
        if (err)
            return err;
    }
    return 0;
}

static int rsn_open(struct chan *c)
{
    int err = rd_check_cfg(c, false);
    if (err)
        return err;
    struct rd_slot_layout l = {
        .send_table_bytes = 0, /* only the ack line */
        .send_access = IBV_ACCESS_REMOTE_WRITE,
        .recv_bytes = c->cfg.slots * (RSN_NOTE_BYTES + c->cfg.max_msg_bytes),
        .recv_access = 0,
        .recv_wr = c->cfg.slots,
        .stride = c->cfg.max_msg_bytes,
        .ack_every = true, /* chan_test_send waits for it (zero-copy send) */
        .post_initial = rsn_post_initial,
    };
    return rd_slot_open(c, &l);
}

static int rsn_send(struct chan *c, const struct chan_region *r, uint64_t *handle)
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
    struct rsn_note note = {.addr = (uintptr_t)r->addr, .rkey = mr->rkey, .len = (uint32_t)r->len};
    struct ibv_sge sge = {.addr = (uintptr_t)&note, .length = RSN_NOTE_BYTES, .lkey = 0};
    int err = rd_post(c, &s->ep, 0, IBV_WR_SEND, RD_WR_ID(RD_WR_CTL, ++s->ep.next_id), &sge, 1, 0,
                      0, 0, IBV_SEND_INLINE);
    if (err)
        return err;
    s->sent++;
    if (handle)
        *handle = s->sent;
    return 0;
}

static int rsn_learn(struct chan *c, struct rd_slot *s)
{
    if (s->have_cur)
        return 0;
    struct ibv_wc wc;
    int err = rd_poll_recv(c, &s->ep, false, &wc);
    if (err == CHAN_AGAIN) {
        /* nothing new: acknowledge what is processed before waiting (the
         * sender may be waiting for its buffers) */
        err = rd_slot_ack(c, s);
        if (!err)
            err = c->cfg.blocking ? rd_poll_recv(c, &s->ep, true, &wc) : CHAN_AGAIN;
    }
    if (err)
        return err;
    uint64_t k = RD_WR_N(wc.wr_id);
    if (wc.opcode != IBV_WC_RECV || wc.byte_len != RSN_NOTE_BYTES || k >= c->cfg.slots)
        return rd_fail(c, EPROTO, "malformed notification");
    const struct rsn_note *n = (const struct rsn_note *)(const void *)(s->mem + k * RSN_NOTE_BYTES);
    if (n->len > c->cfg.max_msg_bytes)
        return rd_fail(c, EPROTO, "notification names a message above max_msg_bytes");
    s->cur_addr = n->addr;
    s->cur_rkey = n->rkey;
    s->cur_len = n->len;
    s->have_cur = true;
    /* the notification is consumed: its receive goes back at once */
    return rd_post_recv(c, &s->ep, 0, wc.wr_id, s->mem + k * RSN_NOTE_BYTES, RSN_NOTE_BYTES,
                        s->mem_mr->lkey);
}

static int rsn_recv(struct chan *c, struct chan_region *out)
{
    return rd_slot_recv_learned(c, rsn_learn, (size_t)c->cfg.slots * RSN_NOTE_BYTES, out);
}

static int rsn_can_recv(struct chan *c, struct chan_region_option *opt)
{
    return rd_slot_can_recv_learned(c, rsn_learn, opt);
}

const struct chan_ops chan_read_slot_notify = {
    .name = "read-slot-notify",
    .family = "read-slot",
    .paper_section = "4.5",
    .features =
        {
            .zero_copy_send = true,
            .zero_copy_recv = true,
            .variable_size = true,
            .blocking_recv = true,
            .shared = false,
            .multi_reader = false,
            .in_order = CHAN_NEEDS_NOTHING,
            .ordered = true,
            .opcodes = (1u << IBV_WR_SEND) | (1u << IBV_WR_RDMA_READ) | (1u << IBV_WR_RDMA_WRITE),
        },
    .open = rsn_open,
    .send = rsn_send,
    .test_send = rd_slot_test_send_acked,
    .recv = rsn_recv,
    .free_region = rd_slot_free,
    .can_recv = rsn_can_recv,
    .recv_into = rd_slot_recv_into,
    .test_recv = rd_slot_test_recv,
    .close = rd_slot_close,
};
