/* Counting Table 2's per-message columns from event-trace records
 * (`rnicsim table2`, docs/taranov-table2.md).  Pure functions over an
 * array of struct trace_rec, so test/unit/test_table2_count.c can feed
 * them a synthetic trace.
 *
 * Half round trips (HRT) of a window [from, to]: the packets the two
 * hosts' NICs transmitted in the window (pkt-tx records, oldest first),
 * without ACK-only packets (IBA opcode ACKNOWLEDGE, which carry no request
 * or response), grouped into maximal runs of the same direction; each run
 * is one HRT.  A READ request and its response are 2 HRT, a FETCH_AND_ADD
 * (request, atomic ACK) then a WRITE 3.  If the first packet in the window
 * is a response (READ response or atomic ACK), its request left before the
 * window (a receiver that was already polling) and is counted as one more
 * HRT, so a message found by a READ costs 2 however early the READ left.
 * Acknowledgement traffic can be left out: plain RDMA WRITE packets (no
 * immediate) sent by `ack_node`, the receiver, which in these channels are
 * its credit / tail returns (Section 6's acknowledgement channel, which
 * the paper does not count), possibly sent late, on the receiver's next
 * receive call.
 *
 * Requests: TRACE_POST records of one host in a window, split into network
 * requests (ibv_post_send WRs: what the paper's "# Requests" counts) and
 * receive WRs (ibv_post_recv / ibv_post_srq_recv: no network request). */
#ifndef RNICSIM_TABLE2_COUNT_H
#define RNICSIM_TABLE2_COUNT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sim/trace.h"

/* IBA BTH opcodes (IBA 9.2, Table 35): transport in bits 7..5 (RC 0, UC 1,
 * RD 2, UD 3), operation in bits 4..0. */
#define T2_IBA_OP(opcode) ((opcode)&0x1fu)
#define T2_IBA_TRANSPORT(opcode) ((opcode) >> 5)
#define T2_IBA_OP_READ_RESP_FIRST 0x0du /* .. 0x10 READ responses */
#define T2_IBA_OP_READ_RESP_ONLY 0x10u
#define T2_IBA_OP_ACK 0x11u         /* ACKNOWLEDGE: ACK-only (or NAK) */
#define T2_IBA_OP_ATOMIC_ACK 0x12u  /* carries the atomic's original value */
#define T2_IBA_OP_WRITE_FIRST 0x06u /* .. 0x0a: RDMA WRITE without immediate */
#define T2_IBA_OP_WRITE_ONLY 0x0au

/* An ACK-only packet of RC / RD (UC and UD have no ACKNOWLEDGE). */
static inline bool t2_is_ack_only(uint8_t opcode)
{
    return opcode < 0x80 && (T2_IBA_TRANSPORT(opcode) == 0 || T2_IBA_TRANSPORT(opcode) == 2) &&
           T2_IBA_OP(opcode) == T2_IBA_OP_ACK;
}

/* A response that answers a request (READ response, atomic ACK). */
static inline bool t2_is_response(uint8_t opcode)
{
    uint8_t op = T2_IBA_OP(opcode);
    return opcode < 0x80 && T2_IBA_TRANSPORT(opcode) == 0 &&
           ((op >= T2_IBA_OP_READ_RESP_FIRST && op <= T2_IBA_OP_READ_RESP_ONLY) ||
            op == T2_IBA_OP_ATOMIC_ACK);
}

/* A plain RDMA WRITE packet (RC, no immediate). */
static inline bool t2_is_plain_write(uint8_t opcode)
{
    uint8_t op = T2_IBA_OP(opcode);
    return opcode < 0x80 && T2_IBA_TRANSPORT(opcode) == 0 && op >= T2_IBA_OP_WRITE_FIRST &&
           op <= T2_IBA_OP_WRITE_ONLY;
}

/* HRT between nodes a and b in [from_ps, to_ps] (file comment); plain
 * WRITEs of `ack_node` are not counted (UINT32_MAX: count everything). */
static inline uint32_t t2_count_hrt(const struct trace_rec *recs, size_t n, uint32_t a, uint32_t b,
                                    uint32_t ack_node, sim_time_t from_ps, sim_time_t to_ps)
{
    uint32_t runs = 0;
    int64_t last_dir = -1;
    bool first = true;
    for (size_t i = 0; i < n; i++) {
        const struct trace_rec *r = &recs[i];
        if (r->kind != TRACE_PKT_TX || r->t_ps < from_ps || r->t_ps > to_ps)
            continue;
        if ((r->node != a && r->node != b) || t2_is_ack_only(r->opcode))
            continue;
        if (r->node == ack_node && t2_is_plain_write(r->opcode))
            continue;
        if (first && t2_is_response(r->opcode))
            runs++; /* its request left before the window */
        first = false;
        if ((int64_t)r->node != last_dir) {
            runs++;
            last_dir = r->node;
        }
    }
    return runs;
}

struct t2_posts {
    uint32_t net;   /* ibv_post_send WRs */
    uint32_t write; /* ... of which plain RDMA WRITEs (IBV_WR_RDMA_WRITE) */
    uint32_t recv;  /* ibv_post_recv / ibv_post_srq_recv WRs */
};
#define T2_WR_RDMA_WRITE 0u /* IBV_WR_RDMA_WRITE */

/* Work requests `node` posted between records `from` and `to` (indexes,
 * exclusive both: the marks themselves).  Marks and posts of one host are
 * in program order in the trace, so index windows are exact even where
 * times are equal. */
static inline struct t2_posts t2_count_posts(const struct trace_rec *recs, size_t n, uint32_t node,
                                             size_t from, size_t to)
{
    struct t2_posts p = {0, 0, 0};
    for (size_t i = from + 1; i < to && i < n; i++) {
        const struct trace_rec *r = &recs[i];
        if (r->kind != TRACE_POST || r->node != node)
            continue;
        if (r->opcode == TRACE_POST_RECV || r->opcode == TRACE_POST_SRQ_RECV)
            p.recv++;
        else
            p.net++;
        if (r->opcode == T2_WR_RDMA_WRITE)
            p.write++;
    }
    return p;
}

/* The index of the mark `text` with `value` on `node` (TRACE_NOTE from
 * host_trace_mark), or SIZE_MAX.  Compares the text, not the pointer. */
static inline size_t t2_find_mark(const struct trace_rec *recs, size_t n, uint32_t node,
                                  const char *text, uint64_t value)
{
    for (size_t i = 0; i < n; i++) {
        const struct trace_rec *r = &recs[i];
        if (r->kind != TRACE_NOTE || r->node != node || r->addr != value || !r->where)
            continue;
        const char *p = r->where, *q = text;
        while (*p && *p == *q) {
            p++;
            q++;
        }
        if (*p == *q)
            return i;
    }
    return SIZE_MAX;
}

#endif /* RNICSIM_TABLE2_COUNT_H */
