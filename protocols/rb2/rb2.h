/* RB²: the RDMA distributed ring buffer of Sun et al. (ICDCS'24), and the
 * rival DRBs the paper compares it with, as configurations of one library.
 *
 * One DRB = one sender, one receiver, one RC QP between their hosts.  The
 * receiver's ring RB_R is a registered array of `units` units of
 * `unit_bytes`; with a sender-side ring (C4 "both") the sender keeps RB_S,
 * the same array, and unit i of RB_S is WRITten to unit i of RB_R.
 * RB² uses one unit per 64 B-multiple slot (slot-to-slot, C5); the
 * back-to-back rivals use 8-byte units, so messages lie one after another.
 * Every message starts with an 8-byte header (payload length, units it
 * spans, flags): "message size" in the evaluation is header + payload.
 *
 * Pointers (units, modulo the ring): sender tail / synced_tail / esc_tail /
 * local_head, receiver head / synced_head / local_tail (paper Fig. 2); the
 * thresholds α (pointer advancement), β (slot transmission), γ (lazy push)
 * count messages.  Algorithm 1 with the errata of the build spec resolved
 * is in rb2.c.  The whole Table I design space is a struct rb2_config:
 *
 *   head sync  lazy push (WRITE head every γ reads) | lazy pull (READ head
 *              every γ writes or when full) | active push (γ = 1)
 *   tail sync  write twice (data WRITE, then tail WRITE) | poll CQ
 *              (WRITE_WITH_IMM, imm = units published) | poll message
 *              (the receiver spins on the header and the last byte of
 *              the message: needs front-to-back placement) | length word
 *              (FaRM as the paper modified it: data WRITE, then a WRITE
 *              of the header; the receiver spins on the header)
 *   batching   α / β / elastic threshold (text reading, as printed, off);
 *              max_inflight > 0: SocksDirect's batching (every data WRITE
 *              signaled, at most that many in flight, the rest batched)
 *   memory     zero copy, cache-friendly layout, huge pages, NUMA-aware
 *              allocation (buffers on the NIC's socket, the caller pins
 *              its thread: rb2_numa_cpu).
 *
 * Written against <infiniband/verbs.h> and <rnicsim/host.h> only, so it
 * builds against real rdma-core as well (real_rb2). */
#ifndef RNICSIM_PROTOCOLS_RB2_H
#define RNICSIM_PROTOCOLS_RB2_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "protocols/common/rc_conn.h"

#define RB2_HDR_BYTES 8u
#define RB2_LINE_BYTES 64u
#define RB2_TRAILER_BYTES 8u
#define RB2_MAX_INLINE 220u /* perftest's WRITE inline size; ConnectX-5 takes it */
#define RB2_PEND_MAX                                                                               \
    8 /* WRs one call posts at most, as one list */ /* poll message: the last byte of the          \
                                                       message's last 8 */

/* RB2_HEAD_PULL_FULL: the sender READs the receiver's head only when it
 * finds the ring full (L5RDMA's VirtualRDMARingBuffer::waitUntilSendFree:
 * a signaled READ of the remote read position, spun on until it completes). */
enum rb2_head_sync {
    RB2_HEAD_LAZY_PUSH,
    RB2_HEAD_LAZY_PULL,
    RB2_HEAD_ACTIVE_PUSH,
    RB2_HEAD_PULL_FULL
};
enum rb2_tail_sync { RB2_TAIL_WRITE_TWICE, RB2_TAIL_POLL_CQ, RB2_TAIL_POLL_MSG, RB2_TAIL_LEN_WORD };
/* RB2_ELASTIC_BLOCK: no elastic threshold, read as a fixed threshold
 * whose sender waits for the previous tail WRITE's completion before the
 * next advancement (the spec's M4 is RB2_ELASTIC_OFF: post regardless). */
enum rb2_elastic { RB2_ELASTIC_TEXT, RB2_ELASTIC_AS_PRINTED, RB2_ELASTIC_OFF, RB2_ELASTIC_BLOCK };

/* Results of rb2_write / rb2_read (negative: errno-style failure). */
enum { RB2_OK = 0, RB2_FULL = 1, RB2_EMPTY = 2 };

struct rb2_config {
    uint32_t units;       /* ring size in units (RB_R and RB_S) */
    uint32_t unit_bytes;  /* 64·k: slot-to-slot; 8: back-to-back */
    uint32_t alpha, beta; /* pointer advancement, slot transmission (messages) */
    uint32_t gamma;       /* lazy push / pull threshold (messages) */
    enum rb2_head_sync head;
    enum rb2_tail_sync tail;
    enum rb2_elastic elastic;
    uint32_t max_inflight;        /* > 0: SocksDirect batching, every data WRITE signaled */
    bool sender_ring;             /* C4: a ring on both sides (false: receiver only, FaRM) */
    bool sync_send;               /* receiver only: a write returns when its WRITEs completed */
    bool zero_copy;               /* rb2_write_zc / rb2_read_zc without a copy */
    bool cache_friendly;          /* pointers in lines of their own, ring 64 B-aligned */
    bool hugepages;               /* ring memory on 2 MiB pages (host_alloc_huge) */
    bool numa_aware;              /* buffers on the NIC's socket (else the other one) */
    uint32_t sw_ns;               /* CPU time of the layer's logic per call that moves a message */
    uint32_t div_ns;              /* CPU time of one 64-bit division (ring index, units) */
    uint32_t sq_depth;            /* send queue depth (a signaled WR at least every half) */
    uint32_t inline_bytes;        /* data WRITEs of at most this many bytes go inline (<= 220) */
    bool post_each;               /* one ibv_post_send per WR (default; else one list per call) */
    bool zero_read;               /* the receiver zeroes every message it processed (L5RDMA's
                                   * receive(): std::fill over header, payload and trailer) */
    uint32_t copy_in_ps_per_byte; /* > 0: the sender's copy into the ring is a loop of
                                   * one-byte stores issuing one byte every this many ps
                                   * (L5RDMA's send(): std::copy into volatile uint8_t *);
                                   * 0: memcpy */
};

/* RB²'s published configuration: α 32, β 16, γ 32, lazy push, write
 * twice, elastic (text), zero copy, cache-friendly, huge pages, NUMA-aware,
 * slots of `slot_bytes` (a multiple of 64). */
void rb2_config_default(struct rb2_config *c, uint32_t slot_bytes, uint32_t slots);
/* Check a configuration: NULL, or why it is invalid. */
const char *rb2_config_check(const struct rb2_config *c);

/* Called with the address of the message's payload in the ring (zero-copy). */
typedef void (*rb2_fill_fn)(void *arg, uint8_t *payload, uint32_t len);
typedef int (*rb2_consume_fn)(void *arg, const uint8_t *payload, uint32_t len);

struct rb2_tx;
struct rb2_rx;

/* A DRB link: one RC QP between two programs, carrying a DRB from this
 * side to the peer (tx) and/or from the peer to this side (rx).  Both
 * sides open it with the same config and opposite `has_tx`/`has_rx`. */
struct rb2 {
    const char *prog;
    struct rb2_config cfg;
    struct rc_conn conn;
    uint8_t *region; /* host_alloc: control lines, RB_S, RB_R, staging */
    size_t region_bytes;
    int socket; /* where region lives */
    struct rb2_tx *tx;
    struct rb2_rx *rx;
    /* send-queue accounting (shared by tx and rx, which both post) */
    uint64_t wr_posted, wr_done, wr_last_signaled;
    uint32_t data_inflight; /* SocksDirect: signaled data WRITEs not completed */
    uint64_t rq_posted;     /* receive WQEs posted (poll CQ) */
    /* WRs queued for rb2_submit (one at a time with post_each, else one call's as a list) */
    struct ibv_send_wr pend[RB2_PEND_MAX];
    struct ibv_sge pend_sge[RB2_PEND_MAX];
    int npend;
    /* counters */
    uint64_t writes_posted, tail_syncs, tail_syncs_deferred, head_syncs, pulls;
    uint64_t full_waits, bytes_copied, last_tx_units;
    uint32_t divs; /* divisions done since the last rb2_charge */
    int failed;    /* a completion error was seen */
    int violation; /* a message header was not as the sender wrote it */
};

/* Open the link: device, memory, QP, out-of-band exchange under
 * "<name>/server|client", connection.  `is_server` picks the key names.
 * 0, or -1 after printing why. */
int rb2_open(struct rb2 *rb, const char *prog, const char *name, bool is_server,
             const struct rb2_config *cfg, bool has_tx, bool has_rx);
void rb2_close(struct rb2 *rb);

/* Sender.  RB2_OK, RB2_FULL (nothing done) or -1 (failure).  rb2_write
 * copies `len` bytes into the ring (with zero_copy off, or always when the
 * caller has the message in its own buffer); rb2_write_zc lets `fill`
 * write the payload in place (zero_copy on; with it off, fill writes into
 * a scratch buffer that is then copied, as a non-zero-copy layer does). */
int rb2_write(struct rb2 *rb, const void *msg, uint32_t len);
int rb2_write_zc(struct rb2 *rb, uint32_t len, rb2_fill_fn fill, void *arg);
/* Publish everything written: transmit and advance the tail now. */
int rb2_flush(struct rb2 *rb);
/* Wait until every posted WRITE completed (end of stream). */
int rb2_drain(struct rb2 *rb);

/* Receiver.  RB2_OK, RB2_EMPTY or -1.  rb2_read copies the payload out
 * (cap: room in buf; -1 with a message when it does not fit); rb2_read_zc
 * hands the payload in the ring to `consume` (a non-zero result of it is
 * returned as -1). */
int rb2_read(struct rb2 *rb, void *buf, uint32_t cap, uint32_t *len);
int rb2_read_zc(struct rb2 *rb, rb2_consume_fn consume, void *arg);

/* Body of a loop that got RB2_FULL or RB2_EMPTY: wait until the peer may
 * have moved (host_relax, or the CQ poll of the poll-CQ receiver). */
void rb2_idle(struct rb2 *rb);

/* The pointers (positions in units since the start; the ring index is
 * the position modulo the ring), for tests and diagnostics.  local_head
 * and local_tail are the control words as the peer's NIC last wrote them
 * (the receiver's own cached local_tail may lag: it reads the word only
 * when it finds the ring empty).  last_tx_units: units of the last data
 * transmission. */
struct rb2_state {
    uint64_t tail, synced_tail, esc_tail, local_head;
    uint64_t head, synced_head, local_tail;
    uint64_t last_tx_units;
};
void rb2_get_state(struct rb2 *rb, struct rb2_state *st);

/* The CPU a NUMA-aware (or, numa_aware off, a deliberately wrong) thread
 * should run on: the `k`-th core of the NIC's socket (the other socket).
 * -1 when the host has one socket. */
int rb2_numa_cpu(const struct rb2_config *cfg, int k);

#endif
