/* Read ring buffer, notify receiver (Taranov et al., Section 4.6; Figure
 * 9b; Section 6 for the 1:N set-up).
 *
 * The sender copies a record ([len | seq << 32] header, payload) into its
 * RDMA-readable, virtually circular ring and informs each reader with a
 * bufferless SEND_WITH_IMM (Section 4.1) whose immediate is the message
 * length; a reader knows where the record starts (right after the previous
 * one) and READs the payload, into its staging mirror or (zero-copy)
 * straight into the destination: 3 half round trips, 1 request on each
 * side per message.  Readers keep cfg.slots zero-length receives posted
 * and the sender keeps at most cfg.slots messages unprocessed, so a
 * notification always finds a receive.  A reader can block on the
 * completion channel of its receive CQ (cfg.blocking).  Readers write
 * their processed tail back; the sender keeps the smallest. */
#include <endian.h>
#include <stdatomic.h>

#include "protocols/taranov/channel.h"
#include "protocols/taranov/read_common.h"

static int rn_publish(struct chan *c, struct rd_ring *g, uint64_t idx, uint64_t start, uint32_t len)
{
    *rd_ring_word(g, start) = rd_bell(idx, len);
    atomic_thread_fence(memory_order_release);
    for (uint32_t i = 0; i < c->cfg.receivers; i++) {
        int err = rd_post(c, &g->ep, i, IBV_WR_SEND_WITH_IMM, RD_WR_ID(RD_WR_CTL, ++g->ep.next_id),
                          NULL, 0, 0, 0, len, 0);
        if (err)
            return err;
    }
    return 0;
}

static int rn_learn(struct chan *c, struct rd_ring *g)
{
    struct ibv_wc wc;
    int err = rd_poll_recv(c, &g->ep, c->cfg.blocking, &wc);
    if (err)
        return err;
    if (!(wc.wc_flags & IBV_WC_WITH_IMM) || wc.opcode != IBV_WC_RECV)
        return rd_fail(c, EPROTO, "notification without immediate data");
    /* the receive is free again: repost it before anything else */
    if ((err = rd_post_recv(c, &g->ep, 0, wc.wr_id, NULL, 0, 0)))
        return err;
    g->cur_len = be32toh(wc.imm_data);
    if (g->staged_end < g->pos + RD_HDR_BYTES)
        g->staged_end = g->pos + RD_HDR_BYTES; /* the header is not needed */
    return 0;
}

static const struct rd_ring_variant rn_variant = {
    .tail_gap_bytes = 0,
    .notify = true,
    .publish = rn_publish,
    .learn = rn_learn,
};

static int rn_open(struct chan *c)
{
    return rd_ring_open(c, &rn_variant);
}

const struct chan_ops chan_read_ring_notify = {
    .name = "read-ring-notify",
    .family = "read-ring",
    .paper_section = "4.6",
    .features =
        {
            .zero_copy_send = false,
            .zero_copy_recv = true,
            .variable_size = true,
            .blocking_recv = true,
            .shared = false,
            .multi_reader = true,
            .in_order = CHAN_NEEDS_NOTHING,
            .ordered = true,
            .opcodes =
                (1u << IBV_WR_RDMA_READ) | (1u << IBV_WR_RDMA_WRITE) | (1u << IBV_WR_SEND_WITH_IMM),
        },
    .open = rn_open,
    .send = rd_ring_send,
    .test_send = rd_ring_test_send,
    .recv = rd_ring_recv,
    .free_region = rd_ring_free,
    .can_recv = rd_ring_can_recv,
    .recv_into = rd_ring_recv_into,
    .test_recv = rd_ring_test_recv,
    .close = rd_ring_close,
};
