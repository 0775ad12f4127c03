/* Send/Recv, bufferless (Taranov et al., Section 4.1 "Bufferless"; Table 2
 * row 3): "sending an integer using payload-less messages with IMM data.
 * The receiver must still post RECEIVE requests ... but they may have no
 * buffers attached."  A message is exactly 4 bytes, carried in the
 * immediate of a 0-byte SEND_WITH_IMM; receives have no scatter entries.
 * The received region points at the channel's copy of the immediate.
 * Zero-copy and variable size do not apply (N/A in Table 2: declared
 * false); N senders are supported with receive queues but no buffers
 * (memory O(1) in N).  One HRT, one request, blocking receive, needs
 * nothing in order.  Credits return as SENDs (family_send.c), so the
 * channel posts SEND_WITH_IMM (messages) and SEND (credits). */
#include "protocols/taranov/ch_internal.h"

static int open_bufferless(struct chan *c)
{
    return sr_open(c, SR_BUFFERLESS);
}

const struct chan_ops chan_send_bufferless = {
    .name = "send-bufferless",
    .family = "send-recv",
    .paper_section = "4.1",
    .features =
        {
            .zero_copy_send = false,
            .zero_copy_recv = false,
            .variable_size = false,
            .blocking_recv = true,
            .shared = true,
            .multi_reader = false,
            .in_order = CHAN_NEEDS_NOTHING,
            .opcodes = (1u << IBV_WR_SEND_WITH_IMM) | (1u << IBV_WR_SEND), /* + credit SENDs */
            .ordered = false,
        },
    .open = open_bufferless,
    .send = sr_send,
    .test_send = sr_test_send,
    .recv = sr_recv,
    .free_region = sr_free,
    .close = sr_close,
};
