/* Shared ring buffer, inlined bell with zeroing (Taranov et al., Section
 * 4.4; Table 2, "this work"): N senders reserve room with FETCH_AND_ADD on
 * the head (and READ the tail when short of room), then write the
 * Figure 1 record [len + 1][message][1].  The receiver processes records
 * in offset order only, so a slow writer delays (never corrupts) the
 * messages behind it; it zeroes each record after use.  Needs in-order
 * bytes.  cfg.device_memory puts head and tail in NIC device memory.
 * Mechanics: family_ring.c. */
#include "protocols/taranov/ch_internal.h"

static int open_variant(struct chan *c)
{
    return ring_open(c, RING_SHARED_INLINED);
}

const struct chan_ops chan_shared_ring_inlined = {
    .name = "shared-ring-inlined",
    .family = "shared-ring",
    .paper_section = "4.4",
    .features = {.zero_copy_send = true, /* ✓b */
                 .zero_copy_recv = false,
                 .variable_size = true,
                 .blocking_recv = false,
                 .shared = true,
                 .multi_reader = false,
                 .in_order = CHAN_NEEDS_BYTES,
                 .opcodes = (1u << IBV_WR_RDMA_WRITE) | (1u << IBV_WR_ATOMIC_FETCH_AND_ADD) |
                            (1u << IBV_WR_RDMA_READ),
                 .ordered = true /* offset order; one sender reserves in sequence */},
    .open = open_variant,
    .send = ring_send,
    .test_send = ring_test_send,
    .recv = ring_recv,
    .free_region = ring_free,
    .close = ring_close,
};
