/* Ring buffer, inlined bell with zeroing (Taranov et al., Section 4.3,
 * Figure 1; Table 2): one WRITE of [len + 1][message][1] at the head; the
 * receiver polls the length, then the completion word after the message,
 * and after processing zeroes the record so no stale bell or completion
 * is seen on the next lap.  Needs in-order bytes (the completion word must
 * land last).  Mechanics: family_ring.c. */
#include "protocols/taranov/ch_internal.h"

static int open_variant(struct chan *c)
{
    return ring_open(c, RING_INLINED_ZERO);
}

const struct chan_ops chan_ring_inlined_zero = {
    .name = "ring-inlined-zero",
    .family = "ring",
    .paper_section = "4.3",
    .features = {.zero_copy_send = true, /* ✓b: header, padding, trailer are scatter entries */
                 .zero_copy_recv = false,
                 .variable_size = true,
                 .blocking_recv = false,
                 .shared = false,
                 .multi_reader = false,
                 .in_order = CHAN_NEEDS_BYTES,
                 .opcodes = 1u << IBV_WR_RDMA_WRITE,
                 .ordered = true},
    .open = open_variant,
    .send = ring_send,
    .test_send = ring_test_send,
    .recv = ring_recv,
    .free_region = ring_free,
    .close = ring_close,
};
