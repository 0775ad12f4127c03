/* The uni-directional RDMA channels of Taranov et al., "Efficient RDMA
 * Communication Protocols" (Sections 4-6, Table 2), behind one API: the
 * paper's Sender / Receiver API (Section 6, "Implementation details") in C.
 *
 *   sender:   chan_send(r) -> handle;  chan_test_send(handle)
 *   receiver: chan_recv(&r) ... chan_free(&r)                 (copying)
 *             chan_can_recv(&opt); chan_recv_into(&opt, dst) -> handle;
 *             chan_test_recv(handle)                          (zero-copy)
 *
 * Each channel is one file protocols/taranov/ch_<family>_<variant>.c that
 * defines one `const struct chan_ops chan_<family>_<variant>` and cites its
 * paper subsection in its header comment; chan_registry[] (channel.c) lists
 * them all.  Only verbs and host_* calls (protocols/README.md rules), so
 * every channel builds against the system libibverbs too.
 *
 * Set-up: every endpoint of a channel is one struct chan.  A channel has one
 * receiver and cfg.senders senders (1 for point-to-point channels; N for
 * the shared channels, N:1) or, for the read-ring channels, one sender and
 * cfg.receivers readers (1:N).  Endpoints find each other through host_oob
 * keys prefixed with cfg.name; chan_open() returns when the endpoint is
 * connected (it blocks on the peers' out-of-band data).
 *
 * Return convention: 0 = done, CHAN_AGAIN (> 0) = not now (no room, nothing
 * arrived, not finished; call again, with host_relax() or a CQ poll in the
 * loop), < 0 = -errno for a real error (the channel is then broken).
 * -EBADMSG (added, tar-write): the receiver found its own framing corrupt
 * (a bell or length word that cannot be right): what a transport that
 * reorders what the channel relies on produces. */
#ifndef RNICSIM_TARANOV_CHANNEL_H
#define RNICSIM_TARANOV_CHANNEL_H

#include <infiniband/verbs.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CHAN_AGAIN 1

enum chan_role { CHAN_SENDER, CHAN_RECEIVER };

/* What a channel declares about itself (Table 2's feature columns).  The
 * counting columns (half round trips, requests per message) are NOT
 * declared: the table2 tool measures them from the simulator's trace. */
/* CHAN_NEEDS_BYTES_AND_MESSAGES added (tar-write): Table 2 "Messages, Bytes"
 * (ring, inlined bell without zeroing). */
enum chan_order_need {
    CHAN_NEEDS_NOTHING,
    CHAN_NEEDS_MESSAGES,
    CHAN_NEEDS_BYTES,
    CHAN_NEEDS_BYTES_AND_MESSAGES
};
struct chan_features {
    bool zero_copy_send, zero_copy_recv;
    bool variable_size;            /* messages of any size up to max_msg_bytes */
    bool blocking_recv;            /* the receiver can sleep on a completion channel */
    bool shared;                   /* N:1 (many senders, one receiver) supported */
    bool multi_reader;             /* 1:N (read ring: many readers) supported */
    enum chan_order_need in_order; /* Table 2 "In-order" */
    /* Opcodes the channel posts (bit (1 << IBV_WR_*)), so a transport that
     * lacks one is reported "not runnable" instead of run. */
    uint32_t opcodes;
    /* Added (tar-write): the receiver hands one sender's messages out in
     * the order that sender sent them (positional receivers: slot/ring
     * polling, or completions taken in sequence).  False: any order (a
     * completion names its message); the driver then checks exactly-once
     * only. */
    bool ordered;
};

struct chan_config {
    const char *name; /* out-of-band key prefix, unique per channel */
    enum chan_role role;
    uint32_t id;             /* this sender's (or reader's) index, 0.. */
    uint32_t senders;        /* N for N:1; 1 otherwise */
    uint32_t receivers;      /* N readers for 1:N read rings; 1 otherwise */
    size_t max_msg_bytes;    /* largest message (slot size for slot channels) */
    uint32_t slots;          /* slots / receive buffers / outstanding messages */
    size_t ring_bytes;       /* ring channels: ring size (multiple of 4 KiB) */
    bool device_memory;      /* shared ring: head/tail counters in NIC memory */
    bool prefetch;           /* read ring: prefetch the next chunk */
    bool zero_copy;          /* receiver uses chan_recv_into */
    bool blocking;           /* receiver blocks on a completion channel */
    uint32_t mtu_bytes;      /* path MTU, 0 = the port's active MTU */
    struct ibv_context *ctx; /* device to use (NULL: open the first one) */
    /* Added (tar-write): test hook for shared channels: a sender waits this
     * long between reserving space (FETCH_AND_ADD / slot grant) and writing
     * its message (a "slow writer"); 0 = no delay. */
    uint64_t reserve_delay_ns;
};

/* A message as the API passes it: addr/len inside memory registered with
 * lkey (chan_alloc gives such memory), or, for a received region, inside
 * the channel's own receive memory until chan_free. */
struct chan_region {
    void *addr;
    size_t len;
    uint32_t lkey;
    uint64_t priv; /* channel-private (which slot / receive buffer) */
};
/* What chan_can_recv says about the next message (zero-copy receive). */
struct chan_region_option {
    size_t len;
    uint64_t priv;
};

struct chan;
struct chan_ops {
    const char *name;          /* e.g. "ring-imm"; what --channel= takes */
    const char *family;        /* "send-recv", "write-slot", "ring", "shared-ring",
                                  "read-slot", "read-ring" */
    const char *paper_section; /* e.g. "4.3" */
    struct chan_features features;
    int (*open)(struct chan *c);
    int (*send)(struct chan *c, const struct chan_region *r, uint64_t *handle);
    int (*test_send)(struct chan *c, uint64_t handle);
    int (*recv)(struct chan *c, struct chan_region *out);
    int (*free_region)(struct chan *c, struct chan_region *r);
    int (*can_recv)(struct chan *c, struct chan_region_option *opt); /* NULL if no zero-copy recv */
    int (*recv_into)(struct chan *c, const struct chan_region_option *opt,
                     const struct chan_region *dst, uint64_t *handle);
    int (*test_recv)(struct chan *c, uint64_t handle);
    void (*close)(struct chan *c);
};

/* The endpoint.  Common state here; the channel keeps its own in `impl`. */
struct chan {
    const struct chan_ops *ops;
    struct chan_config cfg;
    struct ibv_context *ctx;
    struct ibv_pd *pd;
    bool own_ctx;
    void *impl;
    char err[160]; /* why the last call failed */
    /* Added (tar-write): the last attempt polled a CQ (set by
     * chan_poll_cq, cleared by chan_relax, which looks at it). */
    bool polled;
};

extern const struct chan_ops *const chan_registry[]; /* NULL-terminated */
const struct chan_ops *chan_find(const char *name);

/* Open / close an endpoint of channel `ops` (pd and device opened here
 * unless cfg->ctx is given). */
int chan_open(struct chan *c, const struct chan_ops *ops, const struct chan_config *cfg);
void chan_close(struct chan *c);

/* Registered memory a sender sends from / a zero-copy receiver receives
 * into. */
int chan_alloc(struct chan *c, size_t len, struct chan_region *r);
void chan_release(struct chan *c, struct chan_region *r);

static inline int chan_send(struct chan *c, const struct chan_region *r, uint64_t *h)
{
    return c->ops->send(c, r, h);
}
static inline int chan_test_send(struct chan *c, uint64_t h)
{
    return c->ops->test_send(c, h);
}
static inline int chan_recv(struct chan *c, struct chan_region *out)
{
    return c->ops->recv(c, out);
}
static inline int chan_free(struct chan *c, struct chan_region *r)
{
    return c->ops->free_region(c, r);
}

/* Added (tar-write): what a caller does between attempts that returned
 * CHAN_AGAIN: host_relax(), unless the attempt polled a CQ (chan_poll_cq),
 * in which case nothing: the next attempt's poll is the spin (the
 * simulator parks at the second empty poll in a row and re-polls after
 * the wake-up).  (host_relax() after a CQ poll used to lose a completion
 * that landed while the poll's CPU time was charged; sim/host.c no longer
 * parks then, so this rule is now only the cheaper choice.)  A channel whose
 * attempt polls must poll again on the next attempt in the same state.  Loop: while ((rc =
 * chan_recv(c, &r)) == CHAN_AGAIN) chan_relax(c); */
void chan_relax(struct chan *c);

/* ------------------------------------------------------------------------
 * Helpers for channel implementations (added by tar-write; channel.c).
 * ------------------------------------------------------------------------ */

/* Set c->err (printf-style) and return -err (err > 0, an errno value). */
int chan_fail(struct chan *c, int err, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* ibv_post_send on qp; a refusal fails the channel ("<name>: ibv_post_send:
 * <reason>") and returns -err. */
int chan_post_send(struct chan *c, struct ibv_qp *qp, struct ibv_send_wr *wr);
/* n zero-length receives on qp (WRITE_WITH_IMM / SEND_WITH_IMM targets). */
int chan_post_recv0(struct chan *c, struct ibv_qp *qp, uint32_t n);

/* One RC QP of an endpoint, connected to one peer endpoint. */
struct chan_qp {
    struct ibv_qp *qp;
    struct ibv_cq *scq, *rcq; /* not owned: the channel creates its CQs */
    uint32_t max_inline;      /* granted inline size */
};

/* Create an RC QP on c->pd and move it to INIT (so receives can be posted
 * before chan_qp_connect) with the given CQs (srq may be NULL).
 * Asks for max_inline bytes of inline data (64 if 0) and 4 SGEs per send
 * WR.  Returns 0 or -errno (c->err says why). */
int chan_qp_create(struct chan *c, struct chan_qp *q, struct ibv_cq *scq, struct ibv_cq *rcq,
                   struct ibv_srq *srq, uint32_t max_send_wr, uint32_t max_recv_wr,
                   uint32_t max_inline);
/* Connect q with the peer endpoint through host_oob: the keys are
 * "<cfg.name>/<link>/<side>" where side is "snd" for a sender and "rcv"
 * for a receiver (a reader of the read channels counts as "rcv"), so the
 * two ends of one link must use the same `link` string (e.g. "s3" for
 * sender 3 of an N:1 channel).  Along with the QP data each side publishes
 * `blob_bytes` bytes of `mine` (addresses, rkeys: whatever the channel
 * needs; both sides must agree on the length) and gets the peer's into
 * `theirs`.  Moves the QP INIT -> RTR -> RTS (INIT with remote READ, WRITE
 * and atomic access, done by chan_qp_create), rnr_retry 7 (infinite), 16
 * outstanding READs/atomics (or the device maximum), then waits until the
 * peer is in RTS too (key "<cfg.name>/<link>/<side>/rts").  Blocks until
 * the peer has published. */
int chan_qp_connect(struct chan *c, struct chan_qp *q, const char *link, const void *mine,
                    void *theirs, size_t blob_bytes);
void chan_qp_destroy(struct chan_qp *q);

/* The link name of sender `id` of a channel ("s<id>"), into buf. */
const char *chan_link_name(char *buf, size_t len, uint32_t id);

/* ibv_poll_cq that records in c->polled that a CQ was polled: channels
 * poll through it so chan_relax can wait correctly. */
int chan_poll_cq(struct chan *c, struct ibv_cq *cq, int n, struct ibv_wc *wc);

/* Poll up to 16 completions of `cq`; every successful one whose wr_id is
 * not 0 raises *done to at least that wr_id (wr_ids of signalled WRs are
 * increasing sequence numbers, so *done = the last completed one).
 * Returns the number polled (>= 0) or -EIO on an error completion. */
int chan_poll_send_cq(struct chan *c, struct ibv_cq *cq, uint64_t *done);

/* Virtually circular memory (Section 4, "Software tricks"): ring_bytes of
 * physical memory (a memfd, zero-filled) mapped twice back to back, so
 * base[i] and base[i + ring_bytes] are the same byte and any access of up
 * to ring_bytes starting inside the ring is contiguous.  ring_bytes must be
 * a positive multiple of the page size.  Register [base, base + 2 *
 * ring_bytes) as one MR.  Returns NULL with errno set on failure. */
void *chan_ring_map(size_t ring_bytes);
void chan_ring_unmap(void *base, size_t ring_bytes);

/* Round up to a multiple of 8 (record alignment of the ring channels). */
static inline uint64_t chan_align8(uint64_t v)
{
    return (v + 7u) & ~(uint64_t)7u;
}

/* Acknowledgement channel of the ring / slot channels (Section 6: the
 * receiver writes its processed tail back to the sender with a WRITE, as
 * "write slot, inlined bell"): CHAN_ACK_WORDS monotonic 64-bit counters
 * (e.g. [0] = bytes freed, [1] = messages freed) that the receiver WRITEs
 * (inline) into registered memory of the sender.  The sender reads them
 * with chan_ack_get (volatile loads, no work request). */
#define CHAN_ACK_WORDS 2
struct chan_ack {
    /* sender side */
    volatile uint64_t *words; /* CHAN_ACK_WORDS, registered with mr */
    struct ibv_mr *mr;
    /* receiver side */
    uint64_t remote_addr;
    uint32_t rkey;
    uint64_t value[CHAN_ACK_WORDS]; /* what the receiver has freed */
    uint64_t sent[CHAN_ACK_WORDS];  /* what it has written back */
    uint64_t posted, done;          /* ack WRITEs (or SENDs) posted / completed */
    /* Added (efa-acks): credits returned with SEND instead of WRITE, for
     * transports without WRITE (EFA SRD, docs/ordering.md) and for the
     * Send/Recv channels, which then need nothing but SEND (Table 2).  The
     * receiver SENDs value[] (16 bytes, inline) into one of CHAN_ACK_RECVS
     * receives the sender keeps posted; SENDs may arrive out of order
     * (SRD), so the sender keeps the largest value of each word seen. */
    bool by_send;
    struct ibv_qp *rqp; /* sender: QP the credit receives are posted to */
    struct ibv_cq *rcq; /* sender: their completions (nothing else) */
    uint64_t *rbuf;     /* sender: CHAN_ACK_RECVS x CHAN_ACK_WORDS words */
    struct ibv_mr *rmr;
};
/* Credit receives a SEND-mode sender keeps posted (estimate: the receiver
 * sends a credit only after a word advanced by its threshold, slots / 2
 * messages in the Send/Recv channels, so at most ~3 are in flight between
 * two polls of the sender; RNR retry covers a burst beyond 16). */
#define CHAN_ACK_RECVS 16
/* Sender: allocate and register the words; (addr, rkey) to publish. */
int chan_ack_init_sender(struct chan *c, struct chan_ack *a, uint64_t *addr, uint32_t *rkey);
/* Receiver: where to write (the sender's published addr/rkey). */
void chan_ack_init_receiver(struct chan_ack *a, uint64_t addr, uint32_t rkey);
/* Receiver: write value[] back if some word i advanced by at least
 * every[i] since the last write (every[i] == 0: by anything).  Keeps at
 * most 8 ack WRITEs outstanding on q (polls q->scq, so q->scq must hold
 * only ack completions or completions chan_poll_send_cq may count).
 * 0 or -errno. */
int chan_ack_flush(struct chan *c, struct chan_ack *a, struct chan_qp *q,
                   const uint64_t every[CHAN_ACK_WORDS]);
static inline uint64_t chan_ack_get(const struct chan_ack *a, int i)
{
    return a->words[i];
}
void chan_ack_destroy(struct chan_ack *a);

/* Added (efa-acks): SEND mode.  Sender, after chan_ack_init_sender and
 * before connecting qp (INIT is enough): post CHAN_ACK_RECVS credit
 * receives on qp, whose receive completions go to rcq (only there: rcq
 * must hold nothing else).  0 or -errno. */
int chan_ack_post_recvs(struct chan *c, struct chan_ack *a, struct ibv_qp *qp, struct ibv_cq *rcq);
/* Sender: take the credits that arrived (largest per word into words[],
 * so chan_ack_get sees them), re-post their receives.  Polls rcq (through
 * chan_poll_cq).  Returns how many arrived (>= 0) or -errno; 0 if a is
 * not in SEND mode. */
int chan_ack_poll(struct chan *c, struct chan_ack *a);
/* Receiver: chan_ack_flush SENDs value[] instead of WRITEing it (the peer
 * must have called chan_ack_post_recvs). */
static inline void chan_ack_use_send(struct chan_ack *a)
{
    a->by_send = true;
}

#endif /* RNICSIM_TARANOV_CHANNEL_H */
