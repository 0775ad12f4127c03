/* Shared ring buffer, IMM capabilities (Taranov et al., Section 4.4
 * "IMM-based"; Table 2, "this work"): N senders share one circular ring.
 * A sender reserves room with a FETCH_AND_ADD on the receiver's head
 * counter, READs the tail word when the reservation may overlap
 * unprocessed messages (Section 6: "read slot inlined bell"), then
 * WRITE_WITH_IMMs the message with imm = offset / 8, so the receiver takes
 * messages in any order and a slow writer blocks nobody (its region only
 * holds the tail back).  3 HRT, >= 2 requests per message.
 * cfg.device_memory puts head and tail in NIC device memory (Section 6.3).
 * Mechanics: family_ring.c. */
#include "protocols/taranov/ch_internal.h"

static int open_variant(struct chan *c)
{
    return ring_open(c, RING_SHARED_IMM);
}

const struct chan_ops chan_shared_ring_imm = {
    .name = "shared-ring-imm",
    .family = "shared-ring",
    .paper_section = "4.4",
    .features = {.zero_copy_send = true,
                 .zero_copy_recv = false,
                 .variable_size = true,
                 .blocking_recv = true,
                 .shared = true,
                 .multi_reader = false,
                 .in_order = CHAN_NEEDS_NOTHING,
                 .opcodes = (1u << IBV_WR_RDMA_WRITE_WITH_IMM) |
                            (1u << IBV_WR_ATOMIC_FETCH_AND_ADD) | (1u << IBV_WR_RDMA_READ),
                 .ordered = false /* messages of slow writers are passed by others */},
    .open = open_variant,
    .send = ring_send,
    .test_send = ring_test_send,
    .recv = ring_recv,
    .free_region = ring_free,
    .close = ring_close,
};
