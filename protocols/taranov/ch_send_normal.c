/* Send/Recv, normal (Taranov et al., Section 4.1 "Normal"; Table 2 row 1).
 * The sender SENDs from its own memory (zero-copy on send); the receiver
 * pre-posts `slots` RECEIVEs of max_msg_bytes on its private receive queue
 * and copies nothing (a received region is the receive buffer until
 * chan_free reposts it), but it cannot choose where a message lands (not
 * zero-copy on receive, Section 3).  One HRT, one request per message,
 * blocking receive on the completion channel, needs nothing in order.
 * Flow control: the receiver SENDs its count of reposted receives into a
 * credit receive of the sender (family_send.c), so SEND is the only opcode
 * and the channel runs on EFA SRD (no WRITE). */
#include "protocols/taranov/ch_internal.h"

static int open_normal(struct chan *c)
{
    return sr_open(c, SR_NORMAL);
}

const struct chan_ops chan_send_normal = {
    .name = "send-normal",
    .family = "send-recv",
    .paper_section = "4.1",
    .features =
        {
            .zero_copy_send = true,
            .zero_copy_recv = false,
            .variable_size = false,
            .blocking_recv = true,
            .shared = false,
            .multi_reader = false,
            .in_order = CHAN_NEEDS_NOTHING,
            .opcodes = 1u << IBV_WR_SEND,
            .ordered = false, /* taken in completion order; a completion names its buffer */
        },
    .open = open_normal,
    .send = sr_send,
    .test_send = sr_test_send,
    .recv = sr_recv,
    .free_region = sr_free,
    .close = sr_close,
};
