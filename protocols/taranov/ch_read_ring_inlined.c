/* Read ring buffer, inlined bell (Taranov et al., Section 4.6, Figure 3;
 * Figure 10 for prefetching; Section 6 for the 1:N set-up).
 *
 * The sender writes a message *locally* into an RDMA-readable, virtually
 * circular ring in three steps: it copies the payload after an 8-byte bell,
 * clears the bell after the message (the next record's), and then writes
 * the bell before the message ([len | seq << 32], seq = message index + 1
 * so a stale bell of an earlier lap never matches), with a release fence
 * between the steps.  Each of cfg.receivers readers READs the bell at its
 * position and then the message (>= 4 half round trips, >= 2 READs); with
 * cfg.prefetch a reader READs the bell and the next chunk (one maximal
 * message) in one request, which takes one READ (2 HRT) when the message
 * was already there.  A reader writes its processed tail back into the
 * sender's memory (a "write slot, inlined bell" back-channel); the sender
 * never overwrites bytes before the smallest tail of its readers.
 *
 * Bells are read in the same READ as the bytes after them: the READ
 * returns the bell before the message bytes, and the sender set the bell
 * after the bytes, so a set bell means the message read is complete. */
#include <stdatomic.h>

#include "protocols/taranov/channel.h"
#include "protocols/taranov/read_common.h"

static int ri_publish(struct chan *c, struct rd_ring *g, uint64_t idx, uint64_t start, uint32_t len)
{
    (void)c;
    uint64_t next = start + RD_HDR_BYTES + rd_align8(len);
    *rd_ring_word(g, next) = 0; /* the next record's bell: not yet */
    atomic_thread_fence(memory_order_release);
    *rd_ring_word(g, start) = rd_bell(idx, len);
    return 0;
}

static bool ri_bell_ok(struct rd_ring *g)
{
    uint64_t bell = *rd_ring_word(g, g->pos);
    if ((bell >> 32) != (rd_bell(g->msgs, 0) >> 32))
        return false;
    g->cur_len = (uint32_t)bell;
    return true;
}

/* Post the poll of the bell at the reader's position: the bell, plus the
 * next chunk when prefetching, never over messages the application still
 * holds in the mirror. */
static int ri_post(struct chan *c, struct rd_ring *g)
{
    size_t room = g->R - RD_HDR_BYTES - (size_t)(g->pos - g->released_pos);
    size_t ahead = c->cfg.prefetch ? rd_align8(c->cfg.max_msg_bytes) : 0;
    if (ahead > room)
        ahead = room;
    g->poll.to = g->pos + RD_HDR_BYTES + ahead;
    return rd_apoll_start(c, &g->ep, &g->poll, 1, &g->reads, g->mem.base + g->pos % g->R,
                          (uint32_t)(RD_HDR_BYTES + ahead), g->mem_mr->lkey,
                          g->r_ring + g->pos % g->R, g->r_ring_rkey);
}

static int ri_learn(struct chan *c, struct rd_ring *g)
{
    if (g->staged_end >= g->pos + RD_HDR_BYTES && ri_bell_ok(g))
        return 0; /* prefetched by an earlier READ */
    int err = g->poll.n ? 0 : ri_post(c, g);
    if (!err)
        err = rd_apoll_check(c, &g->ep, &g->poll, 1);
    if (err)
        return err;
    g->staged_end = g->poll.to;
    if (ri_bell_ok(g))
        return 0;
    g->staged_end = g->pos; /* nothing there yet: what was read is stale */
    err = ri_post(c, g);    /* keep a poll in flight: its completion wakes the caller */
    return err ? err : CHAN_AGAIN;
}

static const struct rd_ring_variant ri_variant = {
    .tail_gap_bytes = RD_HDR_BYTES, /* the cleared bell after the last record */
    .notify = false,
    .publish = ri_publish,
    .learn = ri_learn,
};

static int ri_open(struct chan *c)
{
    return rd_ring_open(c, &ri_variant);
}

const struct chan_ops chan_read_ring_inlined = {
    .name = "read-ring-inlined",
    .family = "read-ring",
    .paper_section = "4.6",
    .features =
        {
            .zero_copy_send = false, /* the sender copies into its ring */
            .zero_copy_recv = true,  /* READ into the destination (prefetched bytes are copied) */
            .variable_size = true,
            .blocking_recv = false, /* readers poll with READs */
            .shared = false,
            .multi_reader = true,
            .in_order = CHAN_NEEDS_NOTHING,
            .ordered = true,
            .opcodes = (1u << IBV_WR_RDMA_READ) | (1u << IBV_WR_RDMA_WRITE), /* + tail write-back */
        },
    .open = ri_open,
    .send = rd_ring_send,
    .test_send = rd_ring_test_send,
    .recv = rd_ring_recv,
    .free_region = rd_ring_free,
    .can_recv = rd_ring_can_recv,
    .recv_into = rd_ring_recv_into,
    .test_recv = rd_ring_test_recv,
    .close = rd_ring_close,
};
