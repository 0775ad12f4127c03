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
 * loop), < 0 = -errno for a real error (the channel is then broken). */
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
enum chan_order_need { CHAN_NEEDS_NOTHING, CHAN_NEEDS_MESSAGES, CHAN_NEEDS_BYTES };
struct chan_features {
    bool zero_copy_send, zero_copy_recv;
    bool variable_size;     /* messages of any size up to max_msg_bytes */
    bool blocking_recv;     /* the receiver can sleep on a completion channel */
    bool shared;            /* N:1 (many senders, one receiver) supported */
    bool multi_reader;      /* 1:N (read ring: many readers) supported */
    enum chan_order_need in_order; /* Table 2 "In-order" */
    /* Opcodes the channel posts (bit (1 << IBV_WR_*)), so a transport that
     * lacks one is reported "not runnable" instead of run. */
    uint32_t opcodes;
};

struct chan_config {
    const char *name;        /* out-of-band key prefix, unique per channel */
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
    const char *name;   /* e.g. "ring-imm"; what --channel= takes */
    const char *family; /* "send-recv", "write-slot", "ring", "shared-ring",
                           "read-slot", "read-ring" */
    const char *paper_section; /* e.g. "4.3" */
    struct chan_features features;
    int (*open)(struct chan *c);
    int (*send)(struct chan *c, const struct chan_region *r, uint64_t *handle);
    int (*test_send)(struct chan *c, uint64_t handle);
    int (*recv)(struct chan *c, struct chan_region *out);
    int (*free_region)(struct chan *c, struct chan_region *r);
    int (*can_recv)(struct chan *c, struct chan_region_option *opt);   /* NULL if no zero-copy recv */
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
static inline int chan_test_send(struct chan *c, uint64_t h) { return c->ops->test_send(c, h); }
static inline int chan_recv(struct chan *c, struct chan_region *out) { return c->ops->recv(c, out); }
static inline int chan_free(struct chan *c, struct chan_region *r) { return c->ops->free_region(c, r); }

#endif /* RNICSIM_TARANOV_CHANNEL_H */
