/* RB² and its rival DRBs: the library (rb2.h).
 *
 * Algorithm 1 of Sun et al. with the build spec's errata resolved:
 *  - the sender's fullness test uses local_head (the paper prints local_tail);
 *  - pointer advancement at tail − synced_tail ≥ α (the text once says β);
 *  - slot transmission at tail − esc_tail ≥ β with tail already advanced
 *    (the printed "> β" contradicts the worked example of Fig. 4);
 *  - elastic threshold: "text" defers the whole advancement while the
 *    previous tail WRITE is in flight and keeps slot-transmitting with β;
 *    "as_printed" transmits the data and moves synced_tail first and only
 *    skips the tail WRITE (the skipped messages are published by the next
 *    advancement, α messages later); "off" posts the tail WRITE every α.
 * Thresholds count messages; positions count units (a message spans one
 * or more, rb2.h).  Positions are 64-bit and only grow; the ring index is
 * the position modulo the ring. */
#include "protocols/rb2/rb2.h"

#include <arpa/inet.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocols/common/pages.h"
#include "rnicsim/host.h"

/* Control lines, in this order (each its own 64 B line when
 * cache_friendly, else packed 8 bytes apart into one line). */
enum rb2_ctrl {
    RB2_C_LOCAL_HEAD, /* sender: the receiver's head, written by its push / our pull */
    RB2_C_LOCAL_TAIL, /* receiver: the sender's tail, written by its tail WRITE */
    RB2_C_HEAD_SRC,   /* receiver: its head, the push source and pull target */
    RB2_C_TAIL_SRC,   /* sender: its tail, the tail WRITE source */
    RB2_C_TX_PTRS,    /* sender: tail, synced_tail, esc_tail */
    RB2_C_RX_PTRS,    /* receiver: head, synced_head */
    RB2_C_COUNT
};

/* Header flags (byte 6) and the mark in byte 7 that makes a header valid. */
#define RB2_F_WRAP 1u
#define RB2_MARK 0xa5u
#define RB2_TRAILER_MARK 0xffu

/* wr_id kinds (top byte) of the work requests the library posts. */
enum rb2_wr_kind { RB2_WR_DATA = 1, RB2_WR_TAIL, RB2_WR_HEAD, RB2_WR_PULL };
#define RB2_WR_ID(kind, seq) (((uint64_t)(kind) << 56) | (seq))
#define RB2_WR_SEQ(id) ((id) & ((1ull << 56) - 1))
#define RB2_WR_KIND(id) ((unsigned)((id) >> 56))

#define RB2_RQ_DEPTH 512u /* poll-CQ receive WQEs kept posted */

struct rb2_tx {
    uint8_t *ring;                        /* RB_S (sender_ring) or NULL */
    uint8_t *staging;                     /* receiver-only ring: the message being written */
    uint64_t tail, synced_tail, esc_tail; /* units */
    uint64_t msgs, msgs_synced, msgs_esc; /* messages (thresholds) */
    uint64_t published;                   /* units the receiver was told of (poll CQ) */
    uint64_t last_sync_wr;                /* seq of the last tail WRITE (0: none) */
    uint64_t pull_wr;                     /* seq of the outstanding pull READ (0: none) */
    uint64_t msgs_since_pull;
    uint64_t remote_ring, remote_local_tail, remote_head_src;
};

struct rb2_rx {
    uint8_t *ring;                          /* RB_R */
    uint64_t head, synced_head, local_tail; /* units (local_tail: poll CQ's count) */
    uint64_t msgs, msgs_synced;
    uint64_t remote_local_head;
};

/* ------------------------------------------------------------ config */

void rb2_config_default(struct rb2_config *c, uint32_t slot_bytes, uint32_t slots)
{
    *c = (struct rb2_config){
        .units = slots,
        .unit_bytes = slot_bytes,
        .alpha = 32, /* Sun et al., Sec. V-A configuration */
        .beta = 16,
        .gamma = 32,
        .head = RB2_HEAD_LAZY_PUSH,
        .tail = RB2_TAIL_WRITE_TWICE,
        .elastic = RB2_ELASTIC_TEXT,
        .sender_ring = true,
        .zero_copy = true,
        .cache_friendly = true,
        .hugepages = true,
        .numa_aware = true,
        .sw_ns = 20, /* estimate: ~50 instructions of pointer arithmetic and checks at 2.3 GHz */
        /* Agner Fog, "Instruction tables" (Skylake-X): DIV r64 latency
         * 35-88 clock cycles, the low end for small operands; 35 cycles at
         * the Xeon Gold 5118's 2.3 GHz.  Positions modulo the ring's size
         * (Algorithm 1: "all pointer arithmetics are performed in the
         * context of modulo slot count") and a message's units are
         * divisions by run-time values: a write does two (its units and
         * the tail's index, which is its slot's and the wrap test's), a
         * read two (the head's index, the units), a slot transmission
         * one (its first unit's index; a part past the ring's end starts
         * at 0).  Each is computed once a call and charged before the
         * post it addresses or at the end of the call that did it. */
        .div_ns = 15,
        .sq_depth = 128, /* perftest's tx-depth */
        /* one ibv_post_send per WR: Algorithm 1 issues the slot
         * transmission (lines 7-8) before it polls for the previous tail
         * WRITE's completion and then issues the tail WRITE (lines 10-12),
         * and the published write-twice code posts its two WRITEs with two
         * calls (L5RDMA's sendParanoid; SocksDirect's post_rdma_write posts
         * one WR a call).  On mlx5 each single small WR goes by BlueFlame;
         * a two-WR list would make the NIC fetch its WQEs by DMA. */
        .post_each = true,
    };
}

const char *rb2_config_check(const struct rb2_config *c)
{
    if (c->unit_bytes != 8 && (c->unit_bytes == 0 || c->unit_bytes % RB2_LINE_BYTES))
        return "unit size must be 8 (back-to-back) or a multiple of 64 (slots)";
    if (c->units < 4 || c->units > (1u << 28))
        return "ring must have 4 .. 2^28 units";
    if ((uint64_t)c->units * c->unit_bytes > (1ull << 30))
        return "ring larger than 1 GiB (the evaluation's largest is 128 x 1 MiB)";
    if (!c->alpha || !c->beta || !c->gamma || c->beta > c->alpha)
        return "need 1 <= beta <= alpha and gamma >= 1";
    if (c->inline_bytes > RB2_MAX_INLINE)
        return "inline data is at most 220 bytes (perftest's WRITE default)";
    if (c->copy_in_ps_per_byte > 100000)
        return "a byte-store copy loop is at most 100000 ps a byte";
    if (c->sq_depth < 8 || c->sq_depth > 8192)
        return "send queue depth must be 8 .. 8192";
    if (!c->sender_ring && (c->alpha != 1 || c->beta != 1 || c->tail != RB2_TAIL_LEN_WORD))
        return "a receiver-only ring (FaRM) sends each message at once with the length word";
    if (c->tail == RB2_TAIL_LEN_WORD && c->sender_ring)
        return "the length-word tail is FaRM's: it needs a receiver-only ring";
    if (c->max_inflight && c->tail != RB2_TAIL_POLL_CQ)
        return "SocksDirect batching (max in flight) goes with the poll-CQ tail";
    if (c->max_inflight >= c->sq_depth)
        return "max in flight must be below the send queue depth";
    return NULL;
}

/* ------------------------------------------------------------ layout */

static size_t rb2_ctrl_off(const struct rb2_config *c, enum rb2_ctrl k)
{
    return c->cache_friendly ? (size_t)k * RB2_LINE_BYTES : (size_t)k * 8;
}

static size_t rb2_ring_bytes(const struct rb2_config *c)
{
    return (size_t)c->units * c->unit_bytes;
}

/* Offsets of RB_S, RB_R and the staging buffer in the region.  Without
 * the cache-friendly structure the rings start 32 bytes past a line (the
 * paper's unaligned ring: a 128 B message spans 3 lines). */
struct rb2_layout {
    size_t ring_s, ring_r, staging, total;
};

static struct rb2_layout rb2_layout_of(const struct rb2_config *c, bool has_tx, bool has_rx)
{
    struct rb2_layout l = {0};
    size_t ring = (rb2_ring_bytes(c) + RB2_LINE_BYTES - 1) / RB2_LINE_BYTES * RB2_LINE_BYTES;
    size_t off = c->cache_friendly ? RB2_C_COUNT * RB2_LINE_BYTES : RB2_LINE_BYTES;
    size_t skew = c->cache_friendly ? 0 : 32;
    if (has_tx && c->sender_ring) {
        l.ring_s = off + skew;
        off += ring + RB2_LINE_BYTES;
    }
    if (has_rx) {
        l.ring_r = off + skew;
        off += ring + RB2_LINE_BYTES;
    }
    if (has_tx && !c->sender_ring) {
        l.staging = off + skew;
        off += ring + RB2_LINE_BYTES;
    }
    l.total = (off + 4095) / 4096 * 4096;
    return l;
}

static volatile uint64_t *rb2_ctrl(struct rb2 *rb, enum rb2_ctrl k)
{
    return (volatile uint64_t *)(void *)(rb->region + rb2_ctrl_off(&rb->cfg, k));
}

static uint64_t rb2_get_hdr_len(const uint8_t *h)
{
    return rc_conn_get_le(h, 4);
}

static uint32_t rb2_msg_units(struct rb2 *rb, uint32_t len)
{
    const struct rb2_config *c = &rb->cfg;
    uint64_t bytes = RB2_HDR_BYTES + (uint64_t)len + (c->tail == RB2_TAIL_POLL_MSG ? 8 : 0);
    rb->divs++;
    return (uint32_t)((bytes + c->unit_bytes - 1) / c->unit_bytes);
}

/* The ring index of position `pos` (pos mod units: a 64-bit division, the
 * ring's size being a run-time value). */
static uint64_t rb2_idx(struct rb2 *rb, uint64_t pos)
{
    rb->divs++;
    return pos % rb->cfg.units;
}

/* The CPU time of one call that moves a message: the layer's logic
 * (sw_ns) and the divisions its data path did so far (div_ns each). */
static void rb2_charge(struct rb2 *rb)
{
    host_compute(rb->cfg.sw_ns + (uint64_t)rb->divs * rb->cfg.div_ns);
    rb->divs = 0;
}

/* The divisions done since the last charge, charged where the program is:
 * before a post (they computed its addresses) and at the end of every call
 * (the last ones of a call, e.g. a Flush's slot transmission, are charged
 * by the call that did them, not by the next one, which may never come). */
static void rb2_charge_divs(struct rb2 *rb)
{
    if (rb->divs && rb->cfg.div_ns)
        host_compute((uint64_t)rb->divs * rb->cfg.div_ns);
    rb->divs = 0;
}

/* ------------------------------------------------------------ send queue */

static int rb2_complete(struct rb2 *rb, const struct ibv_wc *wc)
{
    if (wc->status != IBV_WC_SUCCESS) {
        fprintf(stderr, "%s: rb2: work request failed: %s\n", rb->prog,
                ibv_wc_status_str(wc->status));
        rb->failed = 1;
        return -1;
    }
    uint64_t seq = RB2_WR_SEQ(wc->wr_id);
    if (seq > rb->wr_done)
        rb->wr_done = seq;
    if (RB2_WR_KIND(wc->wr_id) == RB2_WR_DATA && rb->cfg.max_inflight && rb->data_inflight)
        rb->data_inflight--;
    if (rb->tx && RB2_WR_KIND(wc->wr_id) == RB2_WR_PULL && seq == rb->tx->pull_wr)
        rb->tx->pull_wr = 0;
    return 0;
}

/* Take the send CQEs there are; with `block`, at least one. */
static int rb2_submit(struct rb2 *rb);

static int rb2_poll_send(struct rb2 *rb, bool block)
{
    struct ibv_wc wc[16];
    if (block && rb2_submit(rb))
        return -1;
    for (;;) {
        int n = ibv_poll_cq(rb->conn.scq, 16, wc);
        if (n < 0) {
            fprintf(stderr, "%s: rb2: ibv_poll_cq failed\n", rb->prog);
            rb->failed = 1;
            return -1;
        }
        for (int i = 0; i < n; i++)
            if (rb2_complete(rb, &wc[i]))
                return -1;
        if (n > 0 || !block)
            return 0;
    }
}

/* Post the WRs queued so far: one WR at a time by default (post_each),
 * or, with post_each off (--post=list), the WRs of one call as one list
 * (one doorbell, no BlueFlame on mlx5 for a list of two). */
static int rb2_submit(struct rb2 *rb)
{
    rb2_charge_divs(rb);
    if (!rb->npend)
        return rb->failed ? -1 : 0;
    for (int i = 0; i < rb->npend; i++) {
        rb->pend[i].next = i + 1 < rb->npend ? &rb->pend[i + 1] : NULL;
        rb->pend[i].sg_list = rb->pend[i].num_sge ? &rb->pend_sge[i] : NULL;
    }
    struct ibv_send_wr *bad = NULL;
    int err = ibv_post_send(rb->conn.qp, rb->pend, &bad);
    rb->npend = 0;
    if (err) {
        fprintf(stderr, "%s: rb2: ibv_post_send: %s\n", rb->prog, strerror(err));
        rb->failed = 1;
        return -1;
    }
    return 0;
}

/* Queue one WR (posted by rb2_submit), waiting for room in the send queue
 * first; a signaled WR at least every sq_depth/2.  Returns its sequence
 * number, 0 on failure. */
static uint64_t rb2_post(struct rb2 *rb, struct ibv_send_wr *wr, enum rb2_wr_kind kind,
                         bool signaled)
{
    if (rb->failed)
        return 0;
    if (rb->npend == RB2_PEND_MAX && rb2_submit(rb))
        return 0;
    while (rb->wr_posted + 1 - rb->wr_done > rb->cfg.sq_depth - 1)
        if (rb2_poll_send(rb, true))
            return 0;
    uint64_t seq = ++rb->wr_posted;
    if (rb->cfg.max_inflight && kind == RB2_WR_DATA)
        signaled = true;
    if (signaled || seq - rb->wr_last_signaled >= rb->cfg.sq_depth / 2) {
        wr->send_flags |= IBV_SEND_SIGNALED;
        rb->wr_last_signaled = seq;
    }
    wr->wr_id = RB2_WR_ID(kind, seq);
    rb->pend[rb->npend] = *wr;
    if (wr->num_sge)
        rb->pend_sge[rb->npend] = wr->sg_list[0];
    rb->npend++;
    if (rb->cfg.post_each && rb2_submit(rb))
        return 0;
    if (kind == RB2_WR_DATA) {
        rb->writes_posted++;
        if (rb->cfg.max_inflight)
            rb->data_inflight++;
    }
    return seq;
}

static int rb2_post_recvs(struct rb2 *rb, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        struct ibv_recv_wr wr = {.wr_id = rb->rq_posted, .num_sge = 0}, *bad = NULL;
        int err = ibv_post_recv(rb->conn.qp, &wr, &bad);
        if (err) {
            fprintf(stderr, "%s: rb2: ibv_post_recv: %s\n", rb->prog, strerror(err));
            rb->failed = 1;
            return -1;
        }
        rb->rq_posted++;
    }
    return 0;
}

/* ------------------------------------------------------------ sender */

/* WRITE units [from, to) of RB_S to the same units of RB_R (one WR, or two
 * where the range wraps); the last one WITH_IMM carrying the units when
 * the tail is synchronised by the receiver's CQ. */
static int rb2_transmit(struct rb2 *rb, uint64_t from, uint64_t to)
{
    struct rb2_tx *tx = rb->tx;
    const struct rb2_config *c = &rb->cfg;
    if (from == to)
        return 0;
    uint64_t units = to - from;
    /* one division: the part past the ring's end starts at its index 0 */
    for (uint64_t idx = rb2_idx(rb, from); from < to; idx = 0) {
        uint64_t n = to - from;
        if (idx + n > c->units)
            n = c->units - idx;
        struct ibv_sge sge = {.addr = (uint64_t)(uintptr_t)(tx->ring + idx * c->unit_bytes),
                              .length = (uint32_t)(n * c->unit_bytes),
                              .lkey = rb->conn.mr->lkey};
        struct ibv_send_wr wr = {.sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE};
        if (sge.length <= c->inline_bytes)
            wr.send_flags = IBV_SEND_INLINE;
        wr.wr.rdma.remote_addr = tx->remote_ring + idx * c->unit_bytes;
        wr.wr.rdma.rkey = rb->conn.peer.rkey;
        if (c->tail == RB2_TAIL_POLL_CQ && from + n == to) {
            wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
            wr.imm_data = htonl((uint32_t)units);
        }
        if (!rb2_post(rb, &wr, RB2_WR_DATA, false))
            return -1;
        from += n;
    }
    if (c->tail == RB2_TAIL_POLL_CQ || c->tail == RB2_TAIL_POLL_MSG)
        tx->published = to;
    rb->last_tx_units = units;
    return 0;
}

/* The 2nd WRITE of write-twice: the tail into the receiver's local_tail. */
static int rb2_tail_write(struct rb2 *rb)
{
    struct rb2_tx *tx = rb->tx;
    volatile uint64_t *src = rb2_ctrl(rb, RB2_C_TAIL_SRC);
    *src = tx->tail;
    host_touch_write((void *)(uintptr_t)src, 8);
    struct ibv_sge sge = {.addr = (uint64_t)(uintptr_t)src, .length = 8, .lkey = rb->conn.mr->lkey};
    struct ibv_send_wr wr = {
        .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_INLINE};
    wr.wr.rdma.remote_addr = tx->remote_local_tail;
    wr.wr.rdma.rkey = rb->conn.peer.rkey;
    uint64_t seq = rb2_post(rb, &wr, RB2_WR_TAIL, true);
    if (!seq)
        return -1;
    tx->last_sync_wr = seq;
    tx->published = tx->tail;
    rb->tail_syncs++;
    return 0;
}

/* Lines 4-15 of the algorithm (build spec numbering), after tail++. */
static int rb2_after_write(struct rb2 *rb)
{
    struct rb2_tx *tx = rb->tx;
    const struct rb2_config *c = &rb->cfg;
    if (c->max_inflight) {
        /* SocksDirect: send what is batched while fewer than max_inflight
         * data WRITEs are in flight (each completion frees one) */
        if (rb2_poll_send(rb, false))
            return -1;
        if (rb->data_inflight < c->max_inflight) {
            if (rb2_transmit(rb, tx->esc_tail, tx->tail))
                return -1;
            tx->esc_tail = tx->synced_tail = tx->tail;
            tx->msgs_esc = tx->msgs_synced = tx->msgs;
        }
        return 0;
    }
    if (tx->msgs - tx->msgs_synced >= c->alpha) {
        bool busy = false;
        if (c->tail == RB2_TAIL_WRITE_TWICE && c->elastic != RB2_ELASTIC_OFF &&
            tx->last_sync_wr > rb->wr_done) {
            if (rb2_poll_send(rb, false))
                return -1;
            busy = tx->last_sync_wr > rb->wr_done;
            /* fixed threshold that waits: the advancement is not deferred
             * but the sender stops until the previous one completed */
            while (busy && c->elastic == RB2_ELASTIC_BLOCK) {
                if (rb2_poll_send(rb, true))
                    return -1;
                busy = tx->last_sync_wr > rb->wr_done;
            }
        }
        if (!busy || c->elastic == RB2_ELASTIC_AS_PRINTED) {
            if (rb2_transmit(rb, tx->esc_tail, tx->tail))
                return -1;
            tx->esc_tail = tx->synced_tail = tx->tail;
            tx->msgs_esc = tx->msgs_synced = tx->msgs;
            if (busy) {
                rb->tail_syncs_deferred++;
                return 0;
            }
            if (c->tail == RB2_TAIL_WRITE_TWICE)
                return rb2_tail_write(rb);
            return 0;
        }
        rb->tail_syncs_deferred++;
    }
    if (tx->msgs - tx->msgs_esc >= c->beta) {
        if (rb2_transmit(rb, tx->esc_tail, tx->tail))
            return -1;
        tx->esc_tail = tx->tail;
        tx->msgs_esc = tx->msgs;
    }
    return 0;
}

/* Lazy pull: READ the receiver's head into local_head (one at a time). */
static int rb2_pull(struct rb2 *rb)
{
    struct rb2_tx *tx = rb->tx;
    if (tx->pull_wr)
        return 0;
    struct ibv_sge sge = {.addr = (uint64_t)(uintptr_t)rb2_ctrl(rb, RB2_C_LOCAL_HEAD),
                          .length = 8,
                          .lkey = rb->conn.mr->lkey};
    struct ibv_send_wr wr = {.sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_READ};
    wr.wr.rdma.remote_addr = tx->remote_head_src;
    wr.wr.rdma.rkey = rb->conn.peer.rkey;
    uint64_t seq = rb2_post(rb, &wr, RB2_WR_PULL, true);
    if (!seq)
        return -1;
    tx->pull_wr = seq;
    rb->pulls++;
    return 0;
}

/* Room for a message of `units` at the tail (a wrap pad first if it would
 * cross the ring's end).  RB2_OK with the tail's ring index in *idx and
 * *pad set, RB2_FULL or -1.  The one division of the tail's index: the
 * message's slot is *idx, or 0 after a pad. */
static int rb2_reserve(struct rb2 *rb, uint32_t units, uint64_t *idx, uint64_t *pad)
{
    struct rb2_tx *tx = rb->tx;
    const struct rb2_config *c = &rb->cfg;
    *idx = rb2_idx(rb, tx->tail);
    *pad = *idx + units > c->units ? c->units - *idx : 0;
    if (units + *pad > c->units - 1)
        return -1;
    volatile uint64_t *lh = rb2_ctrl(rb, RB2_C_LOCAL_HEAD);
    host_touch((const void *)(uintptr_t)lh, 8);
    uint64_t local_head = *lh;
    if (tx->tail + *pad + units - local_head > c->units - 1) {
        rb->full_waits++;
        return RB2_FULL;
    }
    return RB2_OK;
}

/* Header: length (a wrap marker: the units it pads), the low 16 bits of
 * the units the message spans (a check), flags, the mark. */
static void rb2_put_hdr(uint8_t *h, uint32_t len, uint32_t units, uint8_t flags)
{
    rc_conn_put_le(h, len, 4);
    rc_conn_put_le(h + 4, units, 2);
    h[6] = flags;
    h[7] = RB2_MARK;
}

/* The receiver-only ring (FaRM): the message from the staging buffer (at
 * the offset it will have in the remote ring, `idx` units) to the remote
 * ring, then its header (one post each by default, one list with
 * --post=list); with sync_send the sender waits for both. */
static int rb2_farm_send(struct rb2 *rb, uint64_t idx, uint32_t len, uint32_t units)
{
    struct rb2_tx *tx = rb->tx;
    const struct rb2_config *c = &rb->cfg;
    uint64_t off = idx * c->unit_bytes;
    uint8_t *msg = tx->staging + off;
    struct ibv_sge d = {.addr = (uint64_t)(uintptr_t)(msg + RB2_HDR_BYTES),
                        .length = len,
                        .lkey = rb->conn.mr->lkey};
    struct ibv_sge h = {
        .addr = (uint64_t)(uintptr_t)msg, .length = RB2_HDR_BYTES, .lkey = rb->conn.mr->lkey};
    struct ibv_send_wr hw = {
        .sg_list = &h, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_INLINE};
    struct ibv_send_wr dw = {.sg_list = &d,
                             .num_sge = 1,
                             .opcode = IBV_WR_RDMA_WRITE,
                             .send_flags = len <= c->inline_bytes ? IBV_SEND_INLINE : 0};
    dw.wr.rdma.rkey = hw.wr.rdma.rkey = rb->conn.peer.rkey;
    dw.wr.rdma.remote_addr = tx->remote_ring + off + RB2_HDR_BYTES;
    hw.wr.rdma.remote_addr = tx->remote_ring + off;
    rb2_put_hdr(msg, len, units, 0);
    if (len && !rb2_post(rb, &dw, RB2_WR_DATA, false))
        return -1;
    uint64_t seq = rb2_post(rb, &hw, RB2_WR_TAIL, true);
    if (!seq)
        return -1;
    rb->tail_syncs++;
    while (c->sync_send && rb->wr_done < seq) /* the call returns when the message is there */
        if (rb2_poll_send(rb, true))
            return -1;
    return 0;
}

/* The layer's copy of a message into the sender's ring: memcpy, or a
 * loop of one-byte stores where the layer's code compiles to one.
 * L5RDMA's VirtualRDMARingBuffer::send(data, length) hands its lambda a
 * `volatile uint8_t *` into the ring and std::copy's into it; with a
 * volatile destination libstdc++ takes no memmove (before C++20 the
 * pointer's value_type keeps the volatile, so the types differ; since, its
 * memcpyable test excludes volatile), and the compiler may neither widen
 * nor merge the stores: g++ -O3 makes a loop of six instructions a byte
 * (load, store, two increments, compare-and-branch: five fused-domain
 * uops), which a 4-wide Skylake core issues at 1.25 cycles a byte. */
static void rb2_copy_in(const struct rb2_config *c, uint8_t *dst, const void *src, uint32_t len)
{
    if (c->copy_in_ps_per_byte)
        host_memcpy_bytewise(dst, src, len, c->copy_in_ps_per_byte);
    else
        host_memcpy(dst, src, len);
}

static int rb2_write_common(struct rb2 *rb, uint32_t len, const void *msg, rb2_fill_fn fill,
                            void *arg)
{
    struct rb2_tx *tx = rb->tx;
    const struct rb2_config *c = &rb->cfg;
    if (!tx || rb->failed) {
        errno = EINVAL;
        return -1;
    }
    /* a write that finds the ring full is part of the sender's wait (the
     * model times that wait): its divisions are not charged */
    uint32_t divs0 = rb->divs;
    uint32_t units = rb2_msg_units(rb, len);
    uint64_t idx, pad;
    int r = rb2_reserve(rb, units, &idx, &pad);
    if (r) {
        rb->divs = divs0;
        /* pull: retire a finished pull READ first (its completion is what
         * allows the next one); a READ that brought a head from before the
         * receiver's last reads would otherwise leave the sender waiting
         * for a pull it never issues */
        if (r == RB2_FULL && (c->head == RB2_HEAD_LAZY_PULL || c->head == RB2_HEAD_PULL_FULL) &&
            (rb2_poll_send(rb, false) || rb2_pull(rb)))
            return -1;
        return r;
    }
    rb2_charge(rb);
    uint8_t *ring = c->sender_ring ? tx->ring : NULL;
    if (pad) { /* the rest of the ring: a wrap marker the receiver skips */
        if (ring) {
            uint8_t *p = ring + idx * c->unit_bytes;
            rb2_put_hdr(p, (uint32_t)pad, (uint32_t)pad, RB2_F_WRAP);
            host_touch_write(p, RB2_HDR_BYTES);
        } else {
            /* FaRM: the header alone, straight to the receiver */
            uint8_t *p = tx->staging + idx * c->unit_bytes;
            rb2_put_hdr(p, (uint32_t)pad, (uint32_t)pad, RB2_F_WRAP);
            struct ibv_sge h = {
                .addr = (uint64_t)(uintptr_t)p, .length = RB2_HDR_BYTES, .lkey = rb->conn.mr->lkey};
            struct ibv_send_wr hw = {.sg_list = &h,
                                     .num_sge = 1,
                                     .opcode = IBV_WR_RDMA_WRITE,
                                     .send_flags = IBV_SEND_INLINE};
            hw.wr.rdma.rkey = rb->conn.peer.rkey;
            hw.wr.rdma.remote_addr = tx->remote_ring + idx * c->unit_bytes;
            if (!rb2_post(rb, &hw, RB2_WR_TAIL, false))
                return -1;
        }
        tx->tail += pad;
        idx = 0; /* the pad ends at the ring's end */
    }
    uint8_t *slot = (ring ? ring : tx->staging) + idx * c->unit_bytes;
    uint8_t *payload = slot + RB2_HDR_BYTES;
    if (msg) {
        rb2_copy_in(c, payload, msg, len);
        rb->bytes_copied += len;
    } else if (c->zero_copy) {
        fill(arg, payload, len);
    } else {
        /* a layer without zero copy: the producer fills a buffer of its
         * own, which the layer copies in */
        uint8_t *tmp = pages_alloc(len);
        if (!tmp) {
            errno = ENOMEM;
            return -1;
        }
        fill(arg, tmp, len);
        rb2_copy_in(c, payload, tmp, len);
        rb->bytes_copied += len;
        free(tmp);
    }
    rb2_put_hdr(slot, len, units, 0);
    host_touch_write(slot, RB2_HDR_BYTES);
    if (c->tail == RB2_TAIL_POLL_MSG) {
        uint8_t *last = slot + (size_t)units * c->unit_bytes - 1;
        *last = RB2_TRAILER_MARK;
        host_touch_write(last, 1);
    }
    tx->tail += units;
    tx->msgs++;
    host_touch_write(rb->region + rb2_ctrl_off(c, RB2_C_TX_PTRS), 24);
    if (!c->sender_ring) {
        if (rb2_farm_send(rb, idx, len, units))
            return -1;
        tx->esc_tail = tx->synced_tail = tx->tail;
        tx->msgs_esc = tx->msgs_synced = tx->msgs;
    } else if (rb2_after_write(rb)) {
        return -1;
    }
    if (c->head == RB2_HEAD_LAZY_PULL && ++tx->msgs_since_pull >= c->gamma) {
        tx->msgs_since_pull = 0;
        if (rb2_poll_send(rb, false) || rb2_pull(rb))
            return -1;
    }
    return RB2_OK;
}

int rb2_write(struct rb2 *rb, const void *msg, uint32_t len)
{
    if (!msg && len) {
        errno = EINVAL;
        return -1;
    }
    int r = rb2_write_common(rb, len, msg ? msg : "", NULL, NULL);
    return rb2_submit(rb) ? -1 : r;
}

int rb2_write_zc(struct rb2 *rb, uint32_t len, rb2_fill_fn fill, void *arg)
{
    int r = rb2_write_common(rb, len, NULL, fill, arg);
    return rb2_submit(rb) ? -1 : r;
}

static int rb2_flush_common(struct rb2 *rb);

int rb2_flush(struct rb2 *rb)
{
    int r = rb2_flush_common(rb);
    return rb2_submit(rb) ? -1 : r;
}

static int rb2_flush_common(struct rb2 *rb)
{
    struct rb2_tx *tx = rb->tx;
    if (!tx || rb->failed)
        return rb->failed ? -1 : 0;
    if (!rb->cfg.sender_ring)
        return 0; /* FaRM sends every message at once */
    if (rb->cfg.max_inflight) {
        while (tx->esc_tail != tx->tail) {
            if (rb2_poll_send(rb, rb->data_inflight >= rb->cfg.max_inflight))
                return -1;
            if (rb->data_inflight < rb->cfg.max_inflight) {
                if (rb2_transmit(rb, tx->esc_tail, tx->tail))
                    return -1;
                tx->esc_tail = tx->synced_tail = tx->tail;
                tx->msgs_esc = tx->msgs_synced = tx->msgs;
            }
        }
        return 0;
    }
    if (rb2_transmit(rb, tx->esc_tail, tx->tail))
        return -1;
    tx->esc_tail = tx->tail;
    tx->msgs_esc = tx->msgs;
    if (rb->cfg.tail == RB2_TAIL_WRITE_TWICE && tx->published != tx->tail) {
        tx->synced_tail = tx->tail;
        tx->msgs_synced = tx->msgs;
        return rb2_tail_write(rb);
    }
    tx->synced_tail = tx->tail;
    tx->msgs_synced = tx->msgs;
    return 0;
}

int rb2_drain(struct rb2 *rb)
{
    if (rb->failed)
        return -1;
    if (rb->wr_posted > rb->wr_last_signaled) {
        /* an empty signaled WRITE behind the unsignaled ones */
        struct ibv_send_wr wr = {.num_sge = 0, .opcode = IBV_WR_RDMA_WRITE};
        wr.wr.rdma.rkey = rb->conn.peer.rkey;
        wr.wr.rdma.remote_addr = rb->conn.peer.addr;
        if (!rb2_post(rb, &wr, RB2_WR_HEAD, true))
            return -1;
    }
    while (rb->wr_done < rb->wr_posted)
        if (rb2_poll_send(rb, true))
            return -1;
    return 0;
}

/* ------------------------------------------------------------ receiver */

/* Publish the head to the sender's local_head (push), or leave it in the
 * head word for the sender's pull. */
static int rb2_head_sync(struct rb2 *rb)
{
    struct rb2_rx *rx = rb->rx;
    const struct rb2_config *c = &rb->cfg;
    volatile uint64_t *src = rb2_ctrl(rb, RB2_C_HEAD_SRC);
    *src = rx->head;
    host_touch_write((void *)(uintptr_t)src, 8);
    uint32_t gamma = c->head == RB2_HEAD_ACTIVE_PUSH ? 1 : c->gamma;
    /* every γ messages, and (needed but unstated) whenever half the ring
     * was consumed since the last push: γ messages of more than one unit
     * may not fit in the ring, and the sender would wait for ever */
    if (c->head == RB2_HEAD_LAZY_PULL || c->head == RB2_HEAD_PULL_FULL ||
        (rx->msgs - rx->msgs_synced < gamma && rx->head - rx->synced_head < c->units / 2))
        return 0;
    struct ibv_sge sge = {.addr = (uint64_t)(uintptr_t)src, .length = 8, .lkey = rb->conn.mr->lkey};
    struct ibv_send_wr wr = {
        .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_INLINE};
    wr.wr.rdma.remote_addr = rx->remote_local_head;
    wr.wr.rdma.rkey = rb->conn.peer.rkey;
    if (rb2_poll_send(rb, false) || !rb2_post(rb, &wr, RB2_WR_HEAD, false))
        return -1;
    rx->synced_head = rx->head;
    rx->msgs_synced = rx->msgs;
    rb->head_syncs++;
    return 0;
}

/* Is there a message at the head?  Learns the tail by the configured
 * method.  1 yes (*units: the units the message spans where the poll
 * needed them, else 0), 0 no, -1 failure. */
static int rb2_rx_ready(struct rb2 *rb, uint8_t **slot, uint32_t *msg_units)
{
    struct rb2_rx *rx = rb->rx;
    const struct rb2_config *c = &rb->cfg;
    *msg_units = 0;
    /* the head's index: one division; past a wrap marker it is 0 */
    for (uint64_t idx = rb2_idx(rb, rx->head);;) {
        uint8_t *p = rx->ring + idx * c->unit_bytes;
        switch (c->tail) {
        case RB2_TAIL_WRITE_TWICE: {
            volatile uint64_t *lt = rb2_ctrl(rb, RB2_C_LOCAL_TAIL);
            if (rx->head == rx->local_tail) {
                host_touch((const void *)(uintptr_t)lt, 8);
                rx->local_tail = *lt;
                if (rx->head == rx->local_tail)
                    return 0;
            }
            break;
        }
        case RB2_TAIL_POLL_CQ:
            if (rx->head == rx->local_tail) {
                struct ibv_wc wc[16];
                int n = ibv_poll_cq(rb->conn.rcq, 16, wc);
                if (n < 0) {
                    rb->failed = 1;
                    return -1;
                }
                for (int i = 0; i < n; i++) {
                    if (wc[i].status != IBV_WC_SUCCESS ||
                        wc[i].opcode != IBV_WC_RECV_RDMA_WITH_IMM) {
                        fprintf(stderr, "%s: rb2: receive completion %s (opcode %d)\n", rb->prog,
                                ibv_wc_status_str(wc[i].status), (int)wc[i].opcode);
                        rb->failed = 1;
                        return -1;
                    }
                    rx->local_tail += ntohl(wc[i].imm_data);
                }
                /* the RQ replenished on the critical path, one per CQE */
                if (n > 0 && rb2_post_recvs(rb, (uint32_t)n))
                    return -1;
                if (rx->head == rx->local_tail)
                    return 0;
            }
            break;
        case RB2_TAIL_POLL_MSG:
        case RB2_TAIL_LEN_WORD: {
            volatile uint8_t *h = p;
            host_touch(p, RB2_HDR_BYTES);
            if (h[7] != RB2_MARK)
                return 0;
            if (c->tail == RB2_TAIL_POLL_MSG) {
                uint64_t len = rb2_get_hdr_len(p);
                uint32_t units = p[6] & RB2_F_WRAP ? (uint32_t)len
                                 : len < (uint64_t)c->units * c->unit_bytes
                                     ? rb2_msg_units(rb, (uint32_t)len)
                                     : 0;
                if (!units || units > c->units)
                    return 0; /* a header torn by an unordered placement: wait */
                volatile uint8_t *last = p + (size_t)units * c->unit_bytes - 1;
                if (!(p[6] & RB2_F_WRAP)) {
                    host_touch((const void *)(uintptr_t)last, 1);
                    if (*last != RB2_TRAILER_MARK)
                        return 0;
                    *msg_units = units;
                }
            }
            break;
        }
        }
        if (p[6] & RB2_F_WRAP) { /* skip the pad to the ring's start */
            uint32_t units = (uint32_t)rb2_get_hdr_len(p);
            if (c->tail == RB2_TAIL_POLL_MSG || c->tail == RB2_TAIL_LEN_WORD) {
                memset(p, 0, RB2_HDR_BYTES);
                host_touch_write(p, RB2_HDR_BYTES);
            }
            uint64_t step = units ? units : 1;
            rx->head += step;
            idx = idx + step == c->units ? 0 : rb2_idx(rb, rx->head);
            continue;
        }
        *slot = p;
        return 1;
    }
}

static int rb2_rx_done(struct rb2 *rb, uint8_t *slot, uint32_t units)
{
    struct rb2_rx *rx = rb->rx;
    const struct rb2_config *c = &rb->cfg;
    if (c->zero_read || c->tail == RB2_TAIL_POLL_MSG || c->tail == RB2_TAIL_LEN_WORD) {
        /* processed memory zeroed for the next lap's poll (L5 zeroes
         * every message it read, whatever the tail method) */
        size_t n = c->tail == RB2_TAIL_POLL_MSG || c->zero_read ? (size_t)units * c->unit_bytes
                                                                : RB2_HDR_BYTES;
        memset(slot, 0, n);
        host_touch_write(slot, n);
    }
    rx->head += units;
    rx->msgs++;
    host_touch_write(rb->region + rb2_ctrl_off(c, RB2_C_RX_PTRS), 16);
    return rb2_head_sync(rb);
}

static int rb2_read_common(struct rb2 *rb, void *buf, uint32_t cap, uint32_t *len,
                           rb2_consume_fn consume, void *arg)
{
    if (!rb->rx || rb->failed) {
        errno = EINVAL;
        return -1;
    }
    uint8_t *slot;
    uint32_t divs0 = rb->divs; /* an empty poll is the receiver's wait: not charged */
    uint32_t units;
    int r = rb2_rx_ready(rb, &slot, &units);
    if (r <= 0) {
        rb->divs = divs0;
        return r < 0 ? -1 : RB2_EMPTY;
    }
    rb2_charge(rb);
    host_touch(slot, RB2_HDR_BYTES);
    uint32_t n = (uint32_t)rb2_get_hdr_len(slot);
    if (!units) /* the poll did not need them */
        units = rb2_msg_units(rb, n);
    if (slot[7] != RB2_MARK || n > rb2_ring_bytes(&rb->cfg) ||
        rc_conn_get_le(slot + 4, 2) != (units & 0xffffu)) {
        fprintf(stderr,
                "%s: rb2: VIOLATION: bad header at unit %" PRIu64 " (length %" PRIu32
                ", units %" PRIu64 ")\n",
                rb->prog, rb->rx->head, n, rc_conn_get_le(slot + 4, 2));
        rb->failed = rb->violation = 1;
        return -1;
    }
    int cr = 0;
    if (consume && rb->cfg.zero_copy) {
        cr = consume(arg, slot + RB2_HDR_BYTES, n);
    } else {
        uint8_t *dst = buf;
        uint8_t *tmp = NULL;
        if (consume) {
            tmp = pages_alloc(n);
            if (!tmp) {
                errno = ENOMEM;
                return -1;
            }
            dst = tmp;
        } else if (n > cap) {
            fprintf(stderr, "%s: rb2: message of %" PRIu32 " bytes, buffer of %" PRIu32 "\n",
                    rb->prog, n, cap);
            errno = EMSGSIZE;
            return -1;
        }
        host_memcpy(dst, slot + RB2_HDR_BYTES, n);
        rb->bytes_copied += n;
        if (consume)
            cr = consume(arg, tmp, n);
        free(tmp);
        if (len)
            *len = n;
    }
    if (rb2_rx_done(rb, slot, units))
        return -1;
    return cr ? -1 : RB2_OK;
}

int rb2_read(struct rb2 *rb, void *buf, uint32_t cap, uint32_t *len)
{
    int r = rb2_read_common(rb, buf, cap, len, NULL, NULL);
    return rb2_submit(rb) ? -1 : r;
}

int rb2_read_zc(struct rb2 *rb, rb2_consume_fn consume, void *arg)
{
    int r = rb2_read_common(rb, NULL, 0, NULL, consume, arg);
    return rb2_submit(rb) ? -1 : r;
}

void rb2_idle(struct rb2 *rb)
{
    /* the poll-CQ receiver's empty ibv_poll_cq already waits */
    if (rb->rx && rb->cfg.tail == RB2_TAIL_POLL_CQ && !rb->tx)
        return;
    host_relax();
}

void rb2_get_state(struct rb2 *rb, struct rb2_state *st)
{
    memset(st, 0, sizeof(*st));
    if (rb->tx) {
        st->tail = rb->tx->tail;
        st->synced_tail = rb->tx->synced_tail;
        st->esc_tail = rb->tx->esc_tail;
        st->local_head = *rb2_ctrl(rb, RB2_C_LOCAL_HEAD);
    }
    if (rb->rx) {
        st->head = rb->rx->head;
        st->synced_head = rb->rx->synced_head;
        st->local_tail = rb->cfg.tail == RB2_TAIL_WRITE_TWICE ? *rb2_ctrl(rb, RB2_C_LOCAL_TAIL)
                                                              : rb->rx->local_tail;
    }
    st->last_tx_units = rb->last_tx_units;
}

/* ------------------------------------------------------------ set-up */

int rb2_numa_cpu(const struct rb2_config *cfg, int k)
{
    int sockets = host_sockets(), cpus = host_cpus();
    if (sockets < 2 && !cfg->numa_aware)
        return -1;
    int nic = host_nic_socket(NULL), want = cfg->numa_aware ? nic : (nic + 1) % sockets;
    int seen = 0;
    for (int cpu = 0; cpu < cpus; cpu++) {
        if (host_cpu_socket(cpu) != want || host_cpu_core(cpu) != cpu)
            continue;
        if (seen++ == k)
            return cpu;
    }
    return -1;
}

int rb2_open(struct rb2 *rb, const char *prog, const char *name, bool is_server,
             const struct rb2_config *cfg, bool has_tx, bool has_rx)
{
    memset(rb, 0, sizeof(*rb));
    rb->prog = prog;
    rb->cfg = *cfg;
    const char *why = rb2_config_check(cfg);
    if (why) {
        fprintf(stderr, "%s: rb2: %s\n", prog, why);
        return -1;
    }
    struct rc_conn *c = &rb->conn;
    rc_conn_init(c, prog, is_server ? RC_CONN_ROLE_SERVER : RC_CONN_ROLE_CLIENT, name);
    if (rc_conn_open_device(c) || rc_conn_query(c, NULL, 0))
        return -1;
    int nic = host_nic_socket(c->dev_name), sockets = host_sockets();
    rb->socket = cfg->numa_aware || sockets < 2 ? nic : (nic + 1) % sockets;
    struct rb2_layout l = rb2_layout_of(cfg, has_tx, has_rx);
    rb->region_bytes = l.total;
    /* huge pages: the NIC's page table and the cores' TLBs hold one entry
     * per 2 MiB of the rings (on real hardware transparent huge pages,
     * advised before the first touch) */
    rb->region =
        cfg->hugepages ? host_alloc_huge(l.total, rb->socket) : host_alloc(l.total, rb->socket);
    if (!rb->region) {
        fprintf(stderr, "%s: rb2: host_alloc(%zu, socket %d): %s\n", prog, l.total, rb->socket,
                strerror(errno));
        return -1;
    }
    c->buf = rb->region;
    c->buf_bytes = l.total;
    if (has_tx) {
        rb->tx = calloc(1, sizeof(*rb->tx));
        if (!rb->tx)
            return -1;
        rb->tx->ring = cfg->sender_ring ? rb->region + l.ring_s : NULL;
        rb->tx->staging = cfg->sender_ring ? NULL : rb->region + l.staging;
    }
    if (has_rx) {
        rb->rx = calloc(1, sizeof(*rb->rx));
        if (!rb->rx)
            return -1;
        rb->rx->ring = rb->region + l.ring_r;
    }
    int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
    uint32_t rq = has_rx && cfg->tail == RB2_TAIL_POLL_CQ ? RB2_RQ_DEPTH : 1;
    uint64_t words[] = {cfg->units,        cfg->unit_bytes,  cfg->alpha,         cfg->beta,
                        cfg->gamma,        cfg->head,        cfg->tail,          cfg->elastic,
                        cfg->max_inflight, cfg->sender_ring, cfg->cache_friendly};
    if (rc_conn_create_pd_mr(c, access) || rc_conn_create_cqs(c, cfg->sq_depth, rq + 1) ||
        rc_conn_create_qp(c, cfg->sq_depth, rq, RB2_MAX_INLINE, NULL) ||
        rc_conn_exchange(c, rc_conn_hash_words(words, sizeof(words) / sizeof(words[0])), 0))
        return -1;
    if (c->peer.opts_hash != c->local.opts_hash) {
        fprintf(stderr, "%s: rb2: the two sides of '%s' disagree on the ring configuration\n", prog,
                name);
        return -1;
    }
    /* the peer's ring offset: its layout has the opposite directions */
    struct rb2_layout pl = rb2_layout_of(cfg, has_rx, has_tx);
    if (rb->tx) {
        rb->tx->remote_ring = c->peer.addr + pl.ring_r;
        rb->tx->remote_local_tail = c->peer.addr + rb2_ctrl_off(cfg, RB2_C_LOCAL_TAIL);
        rb->tx->remote_head_src = c->peer.addr + rb2_ctrl_off(cfg, RB2_C_HEAD_SRC);
    }
    if (rb->rx)
        rb->rx->remote_local_head = c->peer.addr + rb2_ctrl_off(cfg, RB2_C_LOCAL_HEAD);
    if (rc_conn_connect(c, access, 1))
        return -1;
    if (rq > 1 && rb2_post_recvs(rb, rq)) /* the QP takes receives from INIT on */
        return -1;
    return 0;
}

void rb2_close(struct rb2 *rb)
{
    rb->conn.buf = NULL; /* host_alloc's, freed below */
    rc_conn_close(&rb->conn);
    if (rb->region)
        host_free(rb->region, rb->region_bytes);
    free(rb->tx);
    free(rb->rx);
    rb->region = NULL;
    rb->tx = NULL;
    rb->rx = NULL;
}
