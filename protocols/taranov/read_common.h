/* Shared plumbing of the read-based channels of Taranov et al. (Sections
 * 4.5, 4.6 and the bi-directional set-up of Section 6): one endpoint with
 * one RC QP per peer (a read-ring sender has cfg.receivers of them), the
 * out-of-band exchange of connection data, posting and completion
 * bookkeeping, a small registration cache for zero-copy regions, the
 * in-order release of received messages, the virtually circular mapping
 * of a ring (the same pages mapped twice back to back, Section 4 "Software
 * tricks"; channel.c's chan_ring_map), and the read slot and read ring
 * cores the channel files build on.
 *
 * Only verbs and host_* calls (protocols/README.md), all state in structs. */
#ifndef RNICSIM_TARANOV_READ_COMMON_H
#define RNICSIM_TARANOV_READ_COMMON_H

#include <infiniband/verbs.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "protocols/taranov/channel.h"

enum {
    RD_MAX_PEERS = 16,      /* readers of one read ring (Figure 9b uses 4) */
    RD_CACHE_MRS = 64,      /* zero-copy regions registered on the fly */
    RD_LINE_BYTES = 64,     /* one cache line per control word (no false sharing) */
    RD_INLINE_BYTES = 64,   /* max_inline_data asked for: control words go inline */
    RD_SEND_WR = 64,        /* send queue depth per QP (estimate: > any window used) */
    RD_SLOTS_DEFAULT = 16,  /* cfg.slots = 0 (the paper allows 16 outstanding, 6.3) */
    RD_MSG_DEFAULT = 4096,  /* cfg.max_msg_bytes = 0 (estimate: one page) */
    RD_RING_DEFAULT = 65536 /* cfg.ring_bytes = 0 (estimate: 16 pages) */
};

/* Work-request ids: kind in the top byte, a counter below. */
enum rd_wr_kind { RD_WR_CTL = 1, RD_WR_READ = 2, RD_WR_DATA = 3, RD_WR_RECV = 4 };
#define RD_WR_ID(kind, n) (((uint64_t)(kind) << 56) | ((n) & ((UINT64_C(1) << 56) - 1)))
#define RD_WR_KIND(id) ((unsigned)((id) >> 56))
#define RD_WR_N(id) ((id) & ((UINT64_C(1) << 56) - 1))

/* Connection data on the out-of-band board (fits the 128-byte values of
 * the test fixture's board). */
struct rd_wire {
    uint32_t qpn, psn;
    uint16_t lid;
    uint16_t pad16;
    uint32_t param; /* channel-defined check (slot or ring size) */
    uint8_t gid[16];
    uint64_t addr[3];
    uint32_t rkey[3];
    uint32_t pad32;
};

/* One side of a channel: `npeers` RC QPs on one send CQ and one recv CQ. */
struct rd_ep {
    struct ibv_cq *scq, *rcq;
    struct ibv_comp_channel *cch; /* blocking receive (cfg.blocking) */
    uint32_t npeers;
    struct ibv_qp *qp[RD_MAX_PEERS];
    struct rd_wire remote[RD_MAX_PEERS];
    uint32_t outstanding[RD_MAX_PEERS]; /* posted, completion not yet seen */
    uint64_t done[RD_WR_RECV + 1];      /* highest counter completed per kind */
    uint64_t next_id;                   /* counter of RD_WR_CTL ids */
    bool armed;
    struct rd_mr_cache {
        struct ibv_mr *mr[RD_CACHE_MRS];
        unsigned n, next;
    } cache;
};

/* errno-style failure: records the reason in c->err, returns -err. */
int rd_fail(struct chan *c, int err, const char *what);

/* Defaults (0 in the config) and sanity of the sizes; -EINVAL on nonsense. */
int rd_check_cfg(struct chan *c, bool ring);

/* CQs (+ completion channel if `channel`), `npeers` QPs in RESET.  recv_wr
 * is the receive queue depth of each QP. */
int rd_ep_open(struct chan *c, struct rd_ep *ep, uint32_t npeers, uint32_t recv_wr, bool channel);
/* Publish `local` (QP fields filled here) for peer i under
 * "<name>/<me><id>", fetch the peer's from "<name>/<peer><id>", and bring
 * QP i to RTS.  me/peer: 's' (data sender) or 'r' (receiver / reader). */
int rd_ep_connect(struct chan *c, struct rd_ep *ep, uint32_t i, uint32_t id, struct rd_wire *local);
/* Out-of-band "ready" of a receiver (its receives are posted): put / get. */
int rd_ready_put(struct chan *c, uint32_t id);
int rd_ready_get(struct chan *c, uint32_t id);
void rd_ep_close(struct rd_ep *ep);

/* One work request on peer i's QP.  All are signaled (their completions
 * keep the send-queue accounting); sge may be NULL (nsge 0). */
int rd_post(struct chan *c, struct rd_ep *ep, uint32_t i, enum ibv_wr_opcode op, uint64_t wr_id,
            struct ibv_sge *sge, int nsge, uint64_t raddr, uint32_t rkey, uint32_t imm,
            unsigned flags);
/* A small control word written inline (the "write slot, inlined bell"
 * back-channel of Section 6). */
int rd_write_ctl(struct chan *c, struct rd_ep *ep, uint32_t i, const void *src, uint32_t len,
                 uint64_t raddr, uint32_t rkey);
/* Reap send completions: without waiting (drain) or until the kind's
 * counter reaches n (wait).  A failed completion is an error. */
int rd_drain(struct chan *c, struct rd_ep *ep);
int rd_wait(struct chan *c, struct rd_ep *ep, enum rd_wr_kind kind, uint64_t n);
/* A zero-SGE receive (bufferless notifications) / one SGE receive. */
int rd_post_recv(struct chan *c, struct rd_ep *ep, uint32_t i, uint64_t wr_id, void *addr,
                 uint32_t len, uint32_t lkey);
/* Next receive completion: 0 with *wc, CHAN_AGAIN (nothing, non-blocking),
 * or < 0.  With block, sleeps on the completion channel. */
int rd_poll_recv(struct chan *c, struct rd_ep *ep, bool block, struct ibv_wc *wc);

/* An asynchronous polling READ.  A polling receiver that finds nothing
 * posts the next poll before it returns CHAN_AGAIN, so that READ's landing
 * (DMA writes and a CQE on this host) wakes a caller that host_relax()es
 * before calling again; the next call waits for that READ (one round trip
 * at most) and looks at what it brought.  `tag` says what the READ was
 * for; a poll of another tag in flight is waited for and dropped. */
struct rd_apoll {
    uint64_t n;   /* READ counter in flight, 0: none */
    uint64_t to;  /* channel's note (e.g. the end of the range read) */
    unsigned tag; /* what it reads */
};
int rd_apoll_start(struct chan *c, struct rd_ep *ep, struct rd_apoll *p, unsigned tag,
                   uint64_t *reads, void *local, uint32_t len, uint32_t lkey, uint64_t raddr,
                   uint32_t rkey);
/* 0: the poll of `tag` in flight has completed (waits for it; p->n is 0
 * again); CHAN_AGAIN: none of this tag posted; < 0 error. */
int rd_apoll_check(struct chan *c, struct rd_ep *ep, struct rd_apoll *p, unsigned tag);
/* Wait for a poll in flight (close). */
void rd_apoll_finish(struct chan *c, struct rd_ep *ep, struct rd_apoll *p);

/* The MR covering [addr, addr+len) with `access`, registered on first use
 * (the zero-copy regions the API passes carry only an lkey). */
struct ibv_mr *rd_cache_reg(struct chan *c, struct rd_ep *ep, void *addr, size_t len, int access);

/* Virtually circular buffer: `bytes` (multiple of the page size) of
 * memory visible at base[0, bytes) and again at base[bytes, 2 bytes). */
struct rd_circ {
    uint8_t *base;
    size_t bytes;
};
int rd_circ_map(struct chan *c, struct rd_circ *m, size_t bytes);
void rd_circ_unmap(struct rd_circ *m);

/* In-order release of up to `n` held messages freed in any order:
 * rd_rel_hold gives the index of the next held one, rd_rel_free marks one
 * and returns how many of the oldest became releasable. */
struct rd_release {
    uint32_t n;
    uint64_t held, released; /* counters */
    bool *freed;
};
int rd_rel_init(struct rd_release *r, uint32_t n);
void rd_rel_destroy(struct rd_release *r);
static inline bool rd_rel_full(const struct rd_release *r)
{
    return r->held - r->released >= r->n;
}
static inline uint64_t rd_rel_hold(struct rd_release *r)
{
    return r->held++;
}
/* -EINVAL if idx is not held; else the number newly released (oldest first). */
int rd_rel_free(struct rd_release *r, uint64_t idx);

/* Ring records (read ring family): an 8-byte header [len | seq << 32]
 * before the payload, records 8-byte aligned. */
#define RD_HDR_BYTES 8u
static inline size_t rd_align8(size_t n)
{
    return (n + 7u) & ~(size_t)7u;
}
static inline uint64_t rd_bell(uint64_t msg_index, uint32_t len)
{
    /* seq = index + 1 modulo 2^32, never 0 (0 is "no message") */
    uint32_t seq = (uint32_t)(msg_index % 0xffffffffu) + 1u;
    return ((uint64_t)seq << 32) | len;
}

/* ---------------------------------------------------------------- read ring core
 *
 * The three read ring channels (Section 4.6) share the sender's ring
 * (records [hdr][payload], virtually circular), its flow control (the
 * sender's tail is the smallest processed tail its readers wrote back,
 * Section 6) and the reader's staging mirror; they differ in how the
 * sender publishes a record and how a reader learns about it. */
struct rd_ring;
struct rd_ring_variant {
    /* extra bytes the sender keeps free after a record (inlined: the next
     * bell it clears) */
    size_t tail_gap_bytes;
    bool notify; /* readers post receives for notifications */
    /* sender: make record `idx` at ring position `start` visible */
    int (*publish)(struct chan *c, struct rd_ring *g, uint64_t idx, uint64_t start, uint32_t len);
    /* reader: learn the length of the record at g->pos into g->cur_len
     * (g->have_cur), staging what it reads; CHAN_AGAIN if there is none */
    int (*learn)(struct chan *c, struct rd_ring *g);
};

struct rd_ring {
    const struct rd_ring_variant *v;
    struct rd_ep ep;
    struct rd_circ mem; /* sender: the ring; reader: the staging mirror */
    struct ibv_mr *mem_mr, *ctl_mr;
    uint8_t *ctl; /* sender: head @0, reader i's tail @64 (1 + i); reader: head copy @0 */
    size_t R;     /* ring bytes */
    /* the sender's ring, as seen by a reader */
    uint64_t r_ring, r_head, r_tail;
    uint32_t r_ring_rkey, r_ctl_rkey;
    /* sender */
    uint64_t head, sent, acked, min_tail;
    uint64_t *ends; /* record end of message i at [i % slots] */
    /* reader */
    uint64_t pos, staged_end, known_head, msgs, released_pos, reported, reported_msgs, reads;
    struct rd_apoll poll; /* the bell / head READ in flight */
    bool have_cur;
    uint32_t cur_len;
    struct rd_release rel;
    uint64_t *held_end; /* record end of held message i at [i % slots] */
    uint64_t *zc_wait;  /* zero-copy: DATA counter message i waits for */
    uint32_t notif_reposts;
};

int rd_ring_open(struct chan *c, const struct rd_ring_variant *v);
void rd_ring_close(struct chan *c);
int rd_ring_send(struct chan *c, const struct chan_region *r, uint64_t *handle);
int rd_ring_test_send(struct chan *c, uint64_t handle);
int rd_ring_recv(struct chan *c, struct chan_region *out);
int rd_ring_free(struct chan *c, struct chan_region *r);
int rd_ring_can_recv(struct chan *c, struct chan_region_option *opt);
int rd_ring_recv_into(struct chan *c, const struct chan_region_option *opt,
                      const struct chan_region *dst, uint64_t *handle);
int rd_ring_test_recv(struct chan *c, uint64_t handle);
/* Reader: READ remote ring bytes [from, to) into the staging mirror and
 * wait for them (to - from <= ring bytes). */
int rd_ring_stage(struct chan *c, struct rd_ring *g, uint64_t from, uint64_t to);
/* The header word at ring position `pos` of the ring / mirror. */
static inline volatile uint64_t *rd_ring_word(struct rd_ring *g, uint64_t pos)
{
    return (volatile uint64_t *)(void *)(g->mem.base + pos % g->R);
}
/* ---------------------------------------------------------------- read slot core
 *
 * The four read slot channels (Section 4.5): the sender's table (slots of
 * data, bells, descriptors or requests, and the receiver's ack word in its
 * last cache line), the receiver's buffers, and the acknowledgement of
 * processed messages written back by the receiver (the second channel
 * Section 6 pairs with every uni-directional channel). */
struct rd_slot {
    struct rd_ep ep;
    uint8_t *mem; /* sender: table + ack line; receiver: its buffers */
    size_t mem_bytes, stride;
    struct ibv_mr *mem_mr;
    uint8_t *hdr; /* receiver: landing place of bells / descriptors */
    struct ibv_mr *hdr_mr;
    uint64_t r_addr, r_ack; /* receiver: the sender's table and ack word */
    uint32_t r_rkey;
    uint64_t r_buf; /* sender (indirect read): the receiver's buffers */
    uint32_t r_buf_rkey;
    uint64_t sent, recvd, reads, ack_sent;
    struct rd_apoll poll; /* the bell / slot READ in flight */
    struct rd_release rel;
    uint64_t *zc_wait; /* zero-copy: DATA counter message i waits for */
    bool have_cur;     /* a bell / descriptor / notification learnt */
    uint64_t cur_addr;
    uint32_t cur_rkey, cur_len;
    bool sender_writes; /* indirect read: the sender WRITEs the data */
    bool ack_every;     /* acknowledge every processed message */
    void *priv;         /* channel state */
};
struct rd_slot_layout {
    size_t send_table_bytes; /* the sender's table (the ack line is added) */
    int send_access;         /* its remote access */
    size_t recv_bytes;       /* the receiver's buffers */
    int recv_access;
    uint32_t recv_wr; /* receives per QP on the receiver (0: none) */
    size_t stride;
    bool sender_writes; /* indirect read */
    bool ack_every;     /* zero-copy sender: acknowledge each message (else half-window batches) */
    size_t priv_bytes;  /* zeroed channel state in rd_slot.priv */
    int (*post_initial)(struct chan *c, struct rd_slot *s); /* receiver, before "ready" */
};
int rd_slot_open(struct chan *c, const struct rd_slot_layout *l);
/* Sender: close waits for the receiver to acknowledge everything sent
 * (done_kind 0) or for the DATA completions (indirect read). */
void rd_slot_close(struct chan *c);
/* Sender: the ack word the receiver writes. */
uint64_t rd_slot_acked(struct rd_slot *s);
/* Receiver: READ [raddr, raddr+len) into local memory; returns the
 * counter to wait for (kind RD_WR_READ or RD_WR_DATA), 0 on error. */
int rd_slot_read(struct chan *c, struct rd_slot *s, enum rd_wr_kind kind, void *local, uint32_t len,
                 uint32_t lkey, uint64_t raddr, uint32_t rkey, uint64_t *n);
/* Receiver: write the processed count back now if it moved (a polling
 * receiver that found nothing: the sender may wait for its buffers). */
int rd_slot_ack(struct chan *c, struct rd_slot *s);
/* Receiver: message `idx` is processed; acknowledges in order. */
int rd_slot_release(struct chan *c, struct rd_slot *s, uint64_t idx);
int rd_slot_test_recv(struct chan *c, uint64_t handle);
int rd_slot_free(struct chan *c, struct chan_region *r);
int rd_slot_test_send_acked(struct chan *c, uint64_t handle);
/* Receiver of a channel that first learns where the next message is (its
 * length and address into s->cur_*, s->have_cur): the copying receive, the
 * zero-copy can_recv / recv_into, shared by read-slot-detached and
 * read-slot-notify.  The copying receive reads message k into slot
 * k mod slots of the receive buffers at s->mem + bufs_off. */
typedef int (*rd_slot_learn_fn)(struct chan *c, struct rd_slot *s);
int rd_slot_recv_learned(struct chan *c, rd_slot_learn_fn learn, size_t bufs_off,
                         struct chan_region *out);
int rd_slot_can_recv_learned(struct chan *c, rd_slot_learn_fn learn,
                             struct chan_region_option *opt);
int rd_slot_recv_into(struct chan *c, const struct chan_region_option *opt,
                      const struct chan_region *dst, uint64_t *handle);

/* The read slot "inlined bell" sender: the payload area of the next slot,
 * so a message composed there is sent without a copy (zero-copy send);
 * CHAN_AGAIN while that slot is still held by the receiver. */
int chan_read_slot_inlined_buffer(struct chan *c, struct chan_region *out);

#endif /* RNICSIM_TARANOV_READ_COMMON_H */
