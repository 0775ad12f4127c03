/* Internal state of the rima_* layer (protocols/rima/rima.h), shared by
 * rima.c (API, hardware mode, the head tracker) and rima_sw.c (the software
 * emulation over FETCH_AND_ADD + WRITE_WITH_IMM).  Not for programs. */
#ifndef RNICSIM_PROTOCOLS_RIMA_PRIV_H
#define RNICSIM_PROTOCOLS_RIMA_PRIV_H

#include <stdbool.h>
#include <stdint.h>

#include "protocols/rima/rima.h"
#include "rnicsim/rima.h"

/* SW imm: the low 32 bits of the 8-aligned position, kind in the low 3
 * bits (the position's low bits are zero). */
enum rima_sw_kind {
    RIMA_SW_IMM_MSG = 1,  /* a message at the position, byte_len = length */
    RIMA_SW_IMM_PAD = 2,  /* an abandoned reservation: 8-byte record at the
                             position holds its length */
    RIMA_SW_IMM_ZERO = 4, /* a zero-length message (no reservation) */
};
#define RIMA_SW_KIND_MASK 7u
#define RIMA_SW_PAD_RECORD_BYTES 8u

enum { RIMA_STASH_WCS = 16 };

/* A consumed (or padding) interval [start, end) of the queue, waiting for
 * the head to reach it. */
struct rima_ival {
    uint64_t start, end;
};

struct rima_aq {
    enum rima_mode mode;
    struct ibv_pd *pd;
    struct ibv_cq *cq;
    uint64_t region_bytes;
    uint8_t *buf;
    /* head tracker (both modes): monotonic head position, min-heap of done
     * intervals by start */
    uint64_t head_pos, head_published;
    struct rima_ival *done;
    uint32_t done_n, done_cap;
    uint64_t delivered, delivered_bytes, consumed, pad_bytes, peak_pending;
    /* completions taken off the CQ, not yet handed out (rima_wc_peek): a
     * poll that meets a bad one returns what it gathered first and keeps
     * the bad one for the next call, which reports it */
    struct ibv_wc stash[RIMA_STASH_WCS];
    int stash_i, stash_n;
    /* HW */
    struct ibv_aq *hw;
    /* SW */
    struct ibv_mr *region_mr;
    uint8_t *ctrl; /* tail word @0, head word @8 (one page) */
    struct ibv_mr *ctrl_mr;
    struct ibv_srq *srq;
    uint32_t recv_depth, recv_missing;
};

/* Heap of done intervals; rima_head_advance moves head_pos over the done
 * prefix (rima.c). */
int rima_done_push(struct rima_aq *aq, uint64_t start, uint64_t end);
void rima_head_advance(struct rima_aq *aq);
void rima_hw_publish_head(struct rima_aq *aq);
/* The next receiver completion of aq->cq, left in the stash (1; *wc points
 * at it; rima_wc_take consumes it), none (0) or ibv_poll_cq failed (-1).
 * An empty stash is refilled with at most `want` completions, only while
 * *may_poll: a poll that returns fewer clears it (an ibv_poll_cq on an
 * empty CQ may park the caller, so one call polls an empty CQ once). */
int rima_wc_peek(struct rima_aq *aq, int want, struct ibv_wc **wc, bool *may_poll);
void rima_wc_take(struct rima_aq *aq);
/* Monotonic position of a queue offset / 32-bit position, relative to the
 * head (every unconsumed message lies in [head, head + region)). */
uint64_t rima_pos_from_low32(const struct rima_aq *aq, uint32_t low);

/* rima_sw.c */
int rima_sw_aq_create(struct rima_aq *aq, const struct rima_aq_opts *opts);
void rima_sw_aq_destroy(struct rima_aq *aq);
int rima_sw_poll_aq(struct rima_aq *aq, int n, struct rima_msg *out);
void rima_sw_publish_head(struct rima_aq *aq);

/* ------------------------------------------------------------ sender */

enum rima_slot_state {
    RIMA_SLOT_FREE,
    RIMA_SLOT_WAIT_FAA,     /* needs a reservation */
    RIMA_SLOT_FAA_INFLIGHT, /* FETCH_AND_ADD posted */
    RIMA_SLOT_RESERVED,     /* position known, WRITE not yet posted */
    RIMA_SLOT_INFLIGHT,     /* WRITE_WITH_IMM (SW) or APPEND (HW) posted */
    RIMA_SLOT_DONE,         /* completed, waiting to be retired in order */
};

struct rima_slot {
    enum rima_slot_state state;
    uint64_t wr_id;
    unsigned int flags;
    struct ibv_sge sge[RIMA_MAX_SGE];
    int num_sge;
    uint32_t len, span; /* message bytes; reserved bytes (SW: len rounded to 8) */
    uint32_t gen;       /* sender epoch of the slot's current FAA */
    uint64_t pos;
    enum ibv_wc_status status;
};

/* An abandoned SW reservation to announce with a padding record. */
struct rima_dead {
    uint64_t pos, span;
};

struct rima_sender {
    enum rima_mode mode;
    struct ibv_qp *qp;
    struct ibv_cq *cq;
    struct rima_aq_remote dst;
    uint32_t window, sq_depth, sq_used;
    struct rima_slot *slots;                           /* ring of `window` */
    uint64_t post_idx, faa_idx, write_idx, retire_idx; /* monotonic slot counters */
    uint32_t epoch;
    /* scratch memory registered on the sender's PD: FAA results (2 x window
     * words), padding records (2 x window words), the head READ word,
     * inline staging (window x RIMA_INLINE_MAX) */
    uint8_t *scratch;
    struct ibv_mr *scratch_mr;
    uint32_t nfaa, nrec;
    uint32_t *faa_free, faa_free_n; /* free FAA result words */
    uint32_t *rec_free, rec_free_n;
    uint32_t *faa_span; /* span each in-flight FAA added */
    struct rima_dead *dead;
    uint32_t dead_n, dead_cap;
    uint64_t cached_head;
    bool read_inflight;
    bool recovering; /* after a straddle: one FAA at a time until the oldest
                        unwritten append holds a reservation that fits */
    int failed;      /* errno once a completion failed */
    /* completions to hand out (signaled or failed appends, in order) */
    struct rima_send_wc *ready;
    uint32_t ready_n;
    struct rima_sender_stats st;
};

int rima_sw_sender_init(struct rima_sender *s, struct ibv_pd *pd);
int rima_sw_progress(struct rima_sender *s);
int rima_sender_retire(struct rima_sender *s); /* rima.c */

#endif
