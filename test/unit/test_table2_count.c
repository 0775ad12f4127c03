/* The per-message counting of `rnicsim table2` (tools/rnicsim/table2_count.h)
 * on synthetic traces: half round trips as same-direction runs of request
 * and response packets (ACK-only excluded, a response first in the window
 * counts its request), work requests per host between two marks, marks
 * found by text and value; and the trace records of the hooks themselves
 * (sim_trace_mark, sim_trace_post). */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "../../sim/trace.h"
#include "../../tools/rnicsim/table2_count.h"
#include "test.h"

/* IBA RC opcodes used below (IBA Table 35). */
enum {
    SEND_ONLY = 0x04,
    WRITE_FIRST = 0x06,
    WRITE_LAST = 0x08,
    WRITE_ONLY = 0x0a,
    WRITE_ONLY_IMM = 0x0b,
    READ_REQ = 0x0c,
    READ_RESP_FIRST = 0x0d,
    READ_RESP_LAST = 0x0f,
    READ_RESP_ONLY = 0x10,
    ACK = 0x11,
    ATOMIC_ACK = 0x12,
    FETCH_ADD = 0x14,
    UC_WRITE_ONLY = 0x2a,
};

static struct trace_rec tx(sim_time_t t, uint32_t node, uint8_t opcode)
{
    return (struct trace_rec){.t_ps = t, .kind = TRACE_PKT_TX, .node = node, .opcode = opcode};
}

static struct trace_rec post(uint32_t node, uint8_t opcode)
{
    return (struct trace_rec){.kind = TRACE_POST, .node = node, .opcode = opcode};
}

static struct trace_rec mark(uint32_t node, const char *text, uint64_t v)
{
    return (struct trace_rec){.kind = TRACE_NOTE, .node = node, .where = text, .addr = v};
}

int main(void)
{
    /* One WRITE (3 packets) and its ACK: 1 HRT. */
    struct trace_rec w[] = {tx(10, 0, WRITE_FIRST), tx(11, 0, 0x07), tx(12, 0, WRITE_LAST),
                            tx(20, 1, ACK)};
    CHECK_EQ_U64(t2_count_hrt(w, 4, 0, 1, UINT32_MAX, 0, 100), 1);
    /* The window cuts: nothing in [0, 5]. */
    CHECK_EQ_U64(t2_count_hrt(w, 4, 0, 1, UINT32_MAX, 0, 5), 0);

    /* Detached bell: data WRITE, bell WRITE, ACKs in between: still 1. */
    struct trace_rec d[] = {tx(10, 0, WRITE_ONLY), tx(15, 1, ACK), tx(16, 0, WRITE_ONLY),
                            tx(25, 1, ACK)};
    CHECK_EQ_U64(t2_count_hrt(d, 4, 0, 1, UINT32_MAX, 0, 100), 1);

    /* Shared ring: FETCH_AND_ADD, atomic ACK, WRITE_WITH_IMM: 3. */
    struct trace_rec s[] = {tx(10, 0, FETCH_ADD), tx(20, 1, ATOMIC_ACK), tx(30, 0, WRITE_ONLY_IMM),
                            tx(40, 1, ACK)};
    CHECK_EQ_U64(t2_count_hrt(s, 4, 0, 1, UINT32_MAX, 0, 100), 3);

    /* Read slot, notify receiver: SEND, READ request, READ response (2
     * packets): 3. */
    struct trace_rec n[] = {tx(10, 0, SEND_ONLY), tx(15, 1, ACK), tx(20, 1, READ_REQ),
                            tx(30, 0, READ_RESP_FIRST), tx(31, 0, READ_RESP_LAST)};
    CHECK_EQ_U64(t2_count_hrt(n, 5, 0, 1, UINT32_MAX, 0, 100), 3);

    /* A polling reader: the READ left before the window, its response is
     * the first packet in it: 2 (the request counts). */
    struct trace_rec p[] = {tx(5, 1, READ_REQ), tx(30, 0, READ_RESP_ONLY)};
    CHECK_EQ_U64(t2_count_hrt(p, 2, 0, 1, UINT32_MAX, 10, 100), 2);
    CHECK_EQ_U64(t2_count_hrt(p, 2, 0, 1, UINT32_MAX, 0, 100), 2); /* both in: the same */
    /* ... polling twice (an empty READ, then the one that finds it): 4. */
    struct trace_rec p2[] = {tx(20, 1, READ_REQ), tx(30, 0, READ_RESP_ONLY), tx(40, 1, READ_REQ),
                             tx(50, 0, READ_RESP_ONLY)};
    CHECK_EQ_U64(t2_count_hrt(p2, 4, 0, 1, UINT32_MAX, 0, 100), 4);

    /* A late acknowledgement: the receiver's plain WRITE (its tail) leaves
     * at the start of the next message's window, then the SEND and the
     * READ: 4 runs with it, 3 without (ack_node = the receiver).  A WRITE
     * with immediate from the receiver is no acknowledgement. */
    struct trace_rec l[] = {tx(5, 1, WRITE_ONLY), tx(8, 0, ACK),       tx(10, 0, SEND_ONLY),
                            tx(15, 1, ACK),       tx(20, 1, READ_REQ), tx(30, 0, READ_RESP_ONLY)};
    CHECK_EQ_U64(t2_count_hrt(l, 6, 0, 1, UINT32_MAX, 0, 100), 4);
    CHECK_EQ_U64(t2_count_hrt(l, 6, 0, 1, 1, 0, 100), 3);
    CHECK_EQ_U64(t2_count_hrt(l, 6, 0, 1, 0, 0, 100), 4); /* the sender's WRITEs count */
    struct trace_rec li[] = {tx(5, 1, WRITE_ONLY_IMM), tx(10, 0, SEND_ONLY)};
    CHECK_EQ_U64(t2_count_hrt(li, 2, 0, 1, 1, 0, 100), 2);
    CHECK(t2_is_plain_write(WRITE_FIRST) && t2_is_plain_write(WRITE_ONLY));
    CHECK(!t2_is_plain_write(WRITE_ONLY_IMM) && !t2_is_plain_write(UC_WRITE_ONLY));

    /* Other nodes' packets are not counted; UC has no ACK opcode to drop
     * (0x31 = UC SEND_ONLY_IMM... is a request). */
    struct trace_rec o[] = {tx(10, 0, WRITE_ONLY), tx(12, 2, WRITE_ONLY), tx(20, 1, ACK),
                            tx(30, 0, UC_WRITE_ONLY)};
    CHECK_EQ_U64(t2_count_hrt(o, 4, 0, 1, UINT32_MAX, 0, 100), 1);
    CHECK(t2_is_ack_only(ACK));
    CHECK(!t2_is_ack_only(ATOMIC_ACK));
    CHECK(!t2_is_ack_only(0x31)); /* UC opcode 0x11 is not an ACK */
    CHECK(t2_is_response(READ_RESP_ONLY));
    CHECK(t2_is_response(ATOMIC_ACK));
    CHECK(!t2_is_response(READ_REQ));

    /* Posts between marks, by index: the sender posted a WRITE and a
     * receive, the receiver a receive after its recv mark. */
    struct trace_rec q[] = {mark(0, "t2-send", 1),    post(0, 1 /* IBV_WR_RDMA_WRITE_WITH_IMM */),
                            post(0, TRACE_POST_RECV), post(1, 4 /* another host's */),
                            mark(1, "t2-recv", 1),    post(1, TRACE_POST_RECV),
                            mark(1, "t2-done", 1),    post(0, 0 /* IBV_WR_RDMA_WRITE */)};
    size_t qs = t2_find_mark(q, 8, 0, "t2-send", 1), qr = t2_find_mark(q, 8, 1, "t2-recv", 1),
           qd = t2_find_mark(q, 8, 1, "t2-done", 1);
    CHECK_EQ_U64(qs, 0);
    CHECK_EQ_U64(qr, 4);
    CHECK_EQ_U64(qd, 6);
    CHECK_EQ_U64(t2_find_mark(q, 8, 0, "t2-send", 2), SIZE_MAX); /* other value */
    CHECK_EQ_U64(t2_find_mark(q, 8, 1, "t2-send", 1), SIZE_MAX); /* other node */
    CHECK_EQ_U64(t2_find_mark(q, 8, 0, "t2-sen", 1), SIZE_MAX);  /* prefix only */
    struct t2_posts ps = t2_count_posts(q, 8, 0, qs, qd);
    CHECK_EQ_U64(ps.net, 1);
    CHECK_EQ_U64(ps.write, 0); /* a WRITE_WITH_IMM */
    CHECK_EQ_U64(ps.recv, 1);
    struct t2_posts pr = t2_count_posts(q, 8, 1, qs, qr);
    CHECK_EQ_U64(pr.net, 1);
    CHECK_EQ_U64(pr.recv, 0);
    struct t2_posts pf = t2_count_posts(q, 8, 1, qr, qd);
    CHECK_EQ_U64(pf.net, 0);
    CHECK_EQ_U64(pf.recv, 1);

    /* The hooks write what the counting reads. */
    struct sim *sim = sim_create(1);
    CHECK(sim_trace_enable(sim, 16) == 0);
    sim_trace_mark(sim, 3, "t2-send", 7);
    sim_trace_post(sim, 3, 0x101, 0 /* IBV_WR_RDMA_WRITE */, 64, 0);
    sim_trace_post(sim, 3, 0x101, TRACE_POST_RECV, 128, 0);
    CHECK_EQ_U64(sim_trace_count(sim), 3);
    struct trace_rec got[3];
    for (size_t i = 0; i < 3; i++)
        got[i] = *sim_trace_get(sim, i);
    CHECK_EQ_U64(t2_find_mark(got, 3, 3, "t2-send", 7), 0);
    CHECK_EQ_U64(got[1].kind, TRACE_POST);
    CHECK_EQ_U64(got[1].qpn, 0x101);
    CHECK_EQ_U64(got[1].len, 64);
    struct t2_posts h = t2_count_posts(got, 3, 3, 0, 3);
    CHECK_EQ_U64(h.net, 1);
    CHECK_EQ_U64(h.write, 1); /* the IBV_WR_RDMA_WRITE */
    CHECK_EQ_U64(h.recv, 1);
    char buf[1024] = {0};
    FILE *f = fmemopen(buf, sizeof(buf) - 1, "w");
    sim_trace_dump(sim, f, 0);
    fclose(f);
    CHECK_STR_CONTAINS(buf, "value 7  (t2-send)");
    CHECK_STR_CONTAINS(buf, "post      node 3  qpn 257 opcode 255 len 128  (ibv_post_recv)");
    sim_destroy(sim);
    return test_summary();
}
