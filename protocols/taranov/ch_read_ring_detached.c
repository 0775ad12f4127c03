/* Read ring buffer, detached bell (Taranov et al., Section 4.6; Figure 9b;
 * Section 6 for the 1:N set-up).
 *
 * The sender copies a record ([len | seq << 32] header, payload) into its
 * RDMA-readable, virtually circular ring, and then (release fence) stores
 * the new head offset in the detached bell, a word outside the ring.  A
 * reader READs the bell; when the head moved past its position it READs
 * all new bytes up to the head in one request, so it prefetches every
 * record published so far (Section 6.3: "the detached bell allowed the
 * clients to prefetch multiple records") - >= 4 half round trips and >= 2
 * READs per message, fewer per message under load.  A zero-copy reader
 * without cfg.prefetch READs only the header and then the payload straight
 * into its destination.  Readers write their processed tail back; the
 * sender keeps the smallest.  No ordering is needed: the two READs are
 * issued one after the other. */
#include <errno.h>
#include <stdatomic.h>

#include "protocols/taranov/channel.h"
#include "protocols/taranov/read_common.h"

static int rdt_publish(struct chan *c, struct rd_ring *g, uint64_t idx, uint64_t start,
                       uint32_t len)
{
    (void)c;
    *rd_ring_word(g, start) = rd_bell(idx, len);
    atomic_thread_fence(memory_order_release);
    *(volatile uint64_t *)(void *)g->ctl = start + RD_HDR_BYTES + rd_align8(len); /* the bell */
    return 0;
}

static int rdt_header(struct chan *c, struct rd_ring *g)
{
    uint64_t hdr = *rd_ring_word(g, g->pos);
    if ((hdr >> 32) != (rd_bell(g->msgs, 0) >> 32))
        return rd_fail(c, EPROTO, "record header below the head has a wrong sequence number");
    g->cur_len = (uint32_t)hdr;
    return 0;
}

static int rdt_post(struct chan *c, struct rd_ring *g)
{
    return rd_apoll_start(c, &g->ep, &g->poll, 1, &g->reads, g->ctl, 8, g->ctl_mr->lkey, g->r_head,
                          g->r_ctl_rkey);
}

static int rdt_learn(struct chan *c, struct rd_ring *g)
{
    if (g->staged_end >= g->pos + RD_HDR_BYTES)
        return rdt_header(c, g);
    if (g->known_head <= g->pos) {
        int err = g->poll.n ? 0 : rdt_post(c, g);
        if (!err)
            err = rd_apoll_check(c, &g->ep, &g->poll, 1);
        if (err)
            return err;
        g->known_head = *(volatile uint64_t *)(void *)g->ctl;
        if (g->known_head <= g->pos) {
            err = rdt_post(c, g); /* keep a poll in flight: its completion wakes the caller */
            return err ? err : CHAN_AGAIN;
        }
        if (g->known_head - g->released_pos > g->R)
            return rd_fail(c, EPROTO, "head beyond the ring");
    }
    uint64_t from = g->staged_end > g->pos ? g->staged_end : g->pos;
    uint64_t to = (c->cfg.prefetch || !c->cfg.zero_copy) ? g->known_head : g->pos + RD_HDR_BYTES;
    int err = rd_ring_stage(c, g, from, to);
    return err ? err : rdt_header(c, g);
}

static const struct rd_ring_variant rdt_variant = {
    .tail_gap_bytes = 0,
    .notify = false,
    .publish = rdt_publish,
    .learn = rdt_learn,
};

static int rdt_open(struct chan *c)
{
    return rd_ring_open(c, &rdt_variant);
}

const struct chan_ops chan_read_ring_detached = {
    .name = "read-ring-detached",
    .family = "read-ring",
    .paper_section = "4.6",
    .features =
        {
            .zero_copy_send = false,
            .zero_copy_recv = true, /* with prefetching the staged bytes are copied (note d) */
            .variable_size = true,
            .blocking_recv = false,
            .shared = false,
            .multi_reader = true,
            .in_order = CHAN_NEEDS_NOTHING,
            .ordered = true,
            .opcodes = (1u << IBV_WR_RDMA_READ) | (1u << IBV_WR_RDMA_WRITE),
        },
    .open = rdt_open,
    .send = rd_ring_send,
    .test_send = rd_ring_test_send,
    .recv = rd_ring_recv,
    .free_region = rd_ring_free,
    .can_recv = rd_ring_can_recv,
    .recv_into = rd_ring_recv_into,
    .test_recv = rd_ring_test_recv,
    .close = rd_ring_close,
};
