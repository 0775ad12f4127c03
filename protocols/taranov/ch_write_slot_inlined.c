/* Write slot, inlined bell (Taranov et al., Section 4.2 "Inlined bell";
 * Table 2): one WRITE of [message][len u32][bell u32 = 1] ending at the end
 * of slot k mod slots (the message right-aligned so it and the trailer are
 * contiguous and the bell sits at a fixed place); the receiver polls the
 * bell, and clears it after processing to reuse the slot.  The bell is the
 * last byte written, so the channel needs in-order bytes.  Mechanics:
 * family_write_slot.c. */
#include "protocols/taranov/ch_internal.h"

static int open_variant(struct chan *c)
{
    return ws_open(c, WS_INLINED);
}

const struct chan_ops chan_write_slot_inlined = {
    .name = "write-slot-inlined",
    .family = "write-slot",
    .paper_section = "4.2",
    .features = {.zero_copy_send = true, /* ✓b: the trailer is a second scatter entry */
                 .zero_copy_recv = true,
                 .variable_size = false,
                 .blocking_recv = false,
                 .shared = false,
                 .multi_reader = false,
                 .in_order = CHAN_NEEDS_BYTES,
                 .opcodes = 1u << IBV_WR_RDMA_WRITE,
                 .ordered = true},
    .open = open_variant,
    .send = ws_send,
    .test_send = ws_test_send,
    .recv = ws_recv,
    .free_region = ws_free,
    .close = ws_close,
};
