/* Ring buffer, detached bell (Taranov et al., Section 4.3 "Detached
 * bell"; Table 2): the sender WRITEs [len][message] at the head of the
 * receiver's circular ring, then WRITEs the new head into a bell word
 * outside the ring; the receiver polls the bell and parses the records up
 * to it.  Two requests per message that must arrive in order (in-order
 * messages).  The sender learns the processed tail from the receiver's
 * ack WRITE (Section 6).  Mechanics: family_ring.c. */
#include "protocols/taranov/ch_internal.h"

static int open_variant(struct chan *c)
{
    return ring_open(c, RING_DETACHED);
}

const struct chan_ops chan_ring_detached = {
    .name = "ring-detached",
    .family = "ring",
    .paper_section = "4.3",
    .features = {.zero_copy_send = true, /* ✓b: the length header is a scatter entry */
                 .zero_copy_recv = false,
                 .variable_size = true,
                 .blocking_recv = false,
                 .shared = false,
                 .multi_reader = false,
                 .in_order = CHAN_NEEDS_MESSAGES,
                 .opcodes = 1u << IBV_WR_RDMA_WRITE,
                 .ordered = true},
    .open = open_variant,
    .send = ring_send,
    .test_send = ring_test_send,
    .recv = ring_recv,
    .free_region = ring_free,
    .close = ring_close,
};
