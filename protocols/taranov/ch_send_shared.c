/* Send/Recv, shared receive (Taranov et al., Section 4.1 "Shared
 * receive"; Table 2 row 2).  As the normal channel, but N senders' QPs
 * share one SRQ of `slots` receive buffers, so the receiver's memory does
 * not grow with N (O(1) for N:1).  Each sender may have slots / N messages
 * unfreed (its credit, returned by the receiver's ack SEND), so the SRQ
 * never runs dry - on InfiniBand a missing RECEIVE would stall the sender
 * (RNR).  One HRT, one request, blocking receive, needs nothing in order. */
#include "protocols/taranov/ch_internal.h"

static int open_shared(struct chan *c)
{
    return sr_open(c, SR_SHARED);
}

const struct chan_ops chan_send_shared = {
    .name = "send-shared",
    .family = "send-recv",
    .paper_section = "4.1",
    .features =
        {
            .zero_copy_send = true,
            .zero_copy_recv = false,
            .variable_size = false,
            .blocking_recv = true,
            .shared = true,
            .multi_reader = false,
            .in_order = CHAN_NEEDS_NOTHING,
            .opcodes = 1u << IBV_WR_SEND,
            .ordered = false,
        },
    .open = open_shared,
    .send = sr_send,
    .test_send = sr_test_send,
    .recv = sr_recv,
    .free_region = sr_free,
    .close = sr_close,
};
