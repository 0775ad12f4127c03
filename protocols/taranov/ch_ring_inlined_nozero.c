/* Ring buffer, inlined bell without zeroing (Taranov et al., Section 4.3,
 * Figure 2; Table 2, "this work"): the ring is filled downwards.  Message k
 * is one WRITE of [0][message][len + 1] that ends where message k - 1
 * starts: its length word overwrites k - 1's leading zero word and is k's
 * bell, its own leading zero word unsets the bell of message k + 1 (stale
 * from the previous lap).  The receiver never zeroes memory.  Needs
 * in-order bytes (the bell is the highest address written) and in-order
 * messages (a later message's bell must not be cleared by an earlier
 * message's zero word).  Mechanics: family_ring.c. */
#include "protocols/taranov/ch_internal.h"

static int open_variant(struct chan *c)
{
    return ring_open(c, RING_INLINED_NOZERO);
}

const struct chan_ops chan_ring_inlined_nozero = {
    .name = "ring-inlined-nozero",
    .family = "ring",
    .paper_section = "4.3",
    .features = {.zero_copy_send = true,
                 .zero_copy_recv = false,
                 .variable_size = true,
                 .blocking_recv = false,
                 .shared = false,
                 .multi_reader = false,
                 .in_order = CHAN_NEEDS_BYTES_AND_MESSAGES, /* Table 2: "Messages, Bytes" */
                 .opcodes = 1u << IBV_WR_RDMA_WRITE,
                 .ordered = true},
    .open = open_variant,
    .send = ring_send,
    .test_send = ring_test_send,
    .recv = ring_recv,
    .free_region = ring_free,
    .close = ring_close,
};
