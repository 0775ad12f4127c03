/* Write slot + reserve slot (Taranov et al., Section 4.2 "Reserve slot";
 * Table 2): N senders share the receiver's slots (O(1) memory in N).  A
 * sender reserves a slot through a two-way bufferless exchange (a
 * SEND_WITH_IMM request, the receiver's SEND_WITH_IMM grant naming a free
 * slot, first come first served; one reservation per message, at most
 * slots / N messages in flight per sender), then
 * WRITE_WITH_IMMs the message into it; the receiver unlocks the slot when
 * the region is freed.  3 HRT, >= 2 requests on the sender, 1 (the grant)
 * on the receiver.  Mechanics: family_write_slot.c. */
#include "protocols/taranov/ch_internal.h"

static int open_variant(struct chan *c)
{
    return ws_open(c, WS_RESERVE);
}

const struct chan_ops chan_write_slot_reserve = {
    .name = "write-slot-reserve",
    .family = "write-slot",
    .paper_section = "4.2",
    .features = {.zero_copy_send = true,
                 .zero_copy_recv = true,
                 .variable_size = false,
                 .blocking_recv = true, /* (✓/X): this implementation notifies with IMM */
                 .shared = true,
                 .multi_reader = false,
                 .in_order = CHAN_NEEDS_NOTHING, /* (No/Yes): IMM notification needs nothing */
                 .opcodes = (1u << IBV_WR_SEND_WITH_IMM) | (1u << IBV_WR_RDMA_WRITE_WITH_IMM),
                 .ordered = false},
    .open = open_variant,
    .send = ws_send,
    .test_send = ws_test_send,
    .recv = ws_recv,
    .free_region = ws_free,
    .close = ws_close,
};
