/* Write slot, detached bell (Taranov et al., Section 4.2 "Detached bell";
 * Table 2): the sender WRITEs the message into slot k mod slots of the
 * receiver, then WRITEs an 8-byte bell (len + 1) into the slot's bell
 * outside the slot; the receiver polls the bells in slot order.  Two
 * requests per message that must arrive in order (in-order messages).
 * Zero-copy both ways: the sender writes from its region, the receiver
 * gets the region in the slot.  Mechanics: family_write_slot.c. */
#include "protocols/taranov/ch_internal.h"

static int open_variant(struct chan *c)
{
    return ws_open(c, WS_DETACHED);
}

const struct chan_ops chan_write_slot_detached = {
    .name = "write-slot-detached",
    .family = "write-slot",
    .paper_section = "4.2",
    .features = {.zero_copy_send = true,
                 .zero_copy_recv = true,
                 .variable_size = false,
                 .blocking_recv = false, /* (✓/X): the bell here is a polled WRITE */
                 .shared = false,
                 .multi_reader = false,
                 .in_order = CHAN_NEEDS_MESSAGES,
                 .opcodes = 1u << IBV_WR_RDMA_WRITE,
                 .ordered = true},
    .open = open_variant,
    .send = ws_send,
    .test_send = ws_test_send,
    .recv = ws_recv,
    .free_region = ws_free,
    .close = ws_close,
};
