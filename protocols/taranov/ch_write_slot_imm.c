/* Write slot, IMM capabilities (Taranov et al., Section 4.2 "IMM-based";
 * Table 2): one WRITE_WITH_IMM into the slot; the immediate encodes the
 * slot and the receive completion the length, so the receiver can block
 * on the completion channel and needs nothing in order.  The receiver
 * posts buffer-less RECEIVEs (one per slot).  Mechanics:
 * family_write_slot.c. */
#include "protocols/taranov/ch_internal.h"

static int open_variant(struct chan *c)
{
    return ws_open(c, WS_IMM);
}

const struct chan_ops chan_write_slot_imm = {
    .name = "write-slot-imm",
    .family = "write-slot",
    .paper_section = "4.2",
    .features = {.zero_copy_send = true,
                 .zero_copy_recv = true,
                 .variable_size = false,
                 .blocking_recv = true,
                 .shared = false,
                 .multi_reader = false,
                 .in_order = CHAN_NEEDS_NOTHING,
                 .opcodes = 1u << IBV_WR_RDMA_WRITE_WITH_IMM,
                 .ordered = false /* a completion names its slot */},
    .open = open_variant,
    .send = ws_send,
    .test_send = ws_test_send,
    .recv = ws_recv,
    .free_region = ws_free,
    .close = ws_close,
};
