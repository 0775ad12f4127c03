/* Ring buffer, IMM capabilities (Taranov et al., Section 4.3 "IMM-based";
 * Table 2): one WRITE_WITH_IMM of the message at the head of the circular
 * ring; the immediate carries the offset / 8 and the completion the length,
 * so the receiver can block and needs nothing in order.  Mechanics:
 * family_ring.c. */
#include "protocols/taranov/ch_internal.h"

static int open_variant(struct chan *c)
{
    return ring_open(c, RING_IMM);
}

const struct chan_ops chan_ring_imm = {
    .name = "ring-imm",
    .family = "ring",
    .paper_section = "4.3",
    .features = {.zero_copy_send = true,
                 .zero_copy_recv = false,
                 .variable_size = true,
                 .blocking_recv = true,
                 .shared = false,
                 .multi_reader = false,
                 .in_order = CHAN_NEEDS_NOTHING,
                 .opcodes = 1u << IBV_WR_RDMA_WRITE_WITH_IMM,
                 .ordered = false /* a completion names its offset */},
    .open = open_variant,
    .send = ring_send,
    .test_send = ring_test_send,
    .recv = ring_recv,
    .free_region = ring_free,
    .close = ring_close,
};
