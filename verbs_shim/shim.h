/* Internal header of the verbs shim: the libibverbs API implemented over the
 * simulated RNIC (sim/nic/nic.h).
 *
 * The shim plays the part of an rdma-core provider plus the kernel's uverbs
 * layer: every public object (struct ibv_pd, ibv_cq, ...) is the first
 * member of a shim object that also holds the NIC-side object and the
 * bookkeeping the kernel would keep (use counts for EBUSY, the completion
 * channel's event queue).  The application only ever sees the public
 * member; shim code gets back to its object with container_of.
 *
 * The context is shaped like a provider context (VERBS_ABI.md): a whole
 * struct verbs_context lives at the end of struct shim_context, the
 * application is handed &vctx.context, abi_compat is the extended-ABI
 * marker and vctx.sz covers every extended op, so verbs_get_ctx_op() works
 * and returns NULL for the ops left unimplemented. */
#ifndef RNICSIM_VERBS_SHIM_H
#define RNICSIM_VERBS_SHIM_H

#include <infiniband/verbs.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sim/host.h"
#include "sim/nic/nic.h"
#include "sim/sim.h"

#define shim_container_of(ptr, type, member)                                                       \
    ((type *)(void *)((char *)(ptr)-offsetof(type, member)))

/* Fixed facts of the simulated device (not hardware parameters of the
 * model: these are what the device reports about itself). */
enum {
    SHIM_PORT_NUM = 1,         /* one physical port, numbered 1 as on real HCAs */
    SHIM_GID_TBL_LEN = 1,      /* GID index 0: the RoCEv2 IPv4-mapped GID */
    SHIM_PKEY_TBL_LEN = 1,     /* RoCE ports have the default P_Key only */
    SHIM_NUM_COMP_VECTORS = 1, /* one completion EQ */
};
#define SHIM_DEFAULT_PKEY 0xffffu
/* Largest message (port max_msg_sz): 1 GiB, what mlx5 reports. */
#define SHIM_MAX_MSG_BYTES (1u << 30)

/* ---------------------------------------------------------------- objects */

struct shim_device {
    struct ibv_device dev; /* what ibv_get_device_list hands out */
    struct nic *nic;
    unsigned refs; /* device lists and open contexts holding it */
};

struct shim_async_event_node;

struct shim_context {
    struct shim_device *sdev;
    struct nic *nic;
    struct host *host;
    uint32_t n_pds, n_cqs, n_channels;
    uint32_t next_pd_handle, next_cq_handle, next_ah_handle;
    /* asynchronous events (ibv_get_async_event), FIFO; ctx->async_fd is an
     * eventfd in semaphore mode that counts them */
    struct shim_async_event_node *async_head, *async_tail;
    struct sim_waitq async_wq;
    /* libmlx4's BlueFlame lock (host.cpu.bf_lock_context): free from then,
     * last held by core - 1 */
    sim_time_t bf_free_ps;
    uint32_t bf_core;
    /* dedicated BlueFlame registers in use (host.cpu.bf_dedicated) */
    uint32_t bf_dedic_used;
    struct verbs_context vctx; /* must be last: context is its last member */
};

struct shim_pd {
    struct ibv_pd pd;
    struct shim_context *ctx;
    struct nic_pd *npd;
    uint32_t n_mrs, n_qps, n_ahs, n_srqs;
};

struct shim_mr {
    struct ibv_mr mr;
    struct shim_pd *pd;
    struct nic_mr *nmr;
};

struct shim_cq;

struct shim_channel {
    struct ibv_comp_channel ch; /* ch.fd: eventfd (semaphore mode), one count per queued event */
    struct shim_context *ctx;
    struct shim_cq **q; /* FIFO ring of CQs with a pending event */
    size_t q_head, q_len, q_cap;
    struct sim_waitq wq; /* processes blocked in ibv_get_cq_event */
};

struct shim_cq {
    /* an ibv_cq_ex begins with the fields of an ibv_cq (ibv_cq_ex_to_cq) */
    union {
        struct ibv_cq cq;
        struct ibv_cq_ex cqx;
    };
    bool is_ex;
    uint64_t wc_flags; /* ibv_create_cq_ex: what the read_* ops may read */
    struct ibv_wc cur; /* the CQE between start_poll and end_poll */
    sim_time_t cur_ps; /* when it became visible */
    struct shim_context *ctx;
    struct nic_cq *ncq;
    struct shim_channel *channel;
    uint32_t n_qps;
    uint32_t events_delivered; /* by ibv_get_cq_event; acked ones in cq.comp_events_completed */
    struct sim_waitq ack_wq;   /* ibv_destroy_cq waiting for acks */
};

struct shim_srq {
    struct ibv_srq srq;
    struct shim_context *ctx;
    struct shim_pd *pd;
    struct nic_srq *nsrq;
    uint32_t max_wr, max_sge; /* what was granted */
    uint32_t n_qps;
    /* XRC SRQ (xrc.c): its completion queue; NULL: a basic SRQ */
    struct shim_cq *cq;
};

/* XRC domain (xrc.c). */
struct shim_xrcd {
    struct ibv_xrcd xrcd;
    struct shim_context *ctx;
    struct nic_xrcd *nxrcd; /* the NIC counts its users (close -> EBUSY) */
};

/* One work request being built with the ibv_wr_* calls (qp_ex.c). */
struct shim_wr_ent {
    struct ibv_send_wr wr;
    struct ibv_sge sge[NIC_MAX_SGE];
    size_t inline_off; /* its inline bytes in the batch's buffer */
};

struct shim_wr_batch {
    struct shim_wr_ent *ents;
    unsigned n, cap;
    char *inline_buf;
    size_t inline_len, inline_cap;
    int err; /* the first error, reported by wr_complete */
    bool open;
};

struct shim_qp {
    /* ibv_qp_to_qp_ex hands out &qpx (its first member is the ibv_qp) */
    union {
        struct ibv_qp qp;
        struct ibv_qp_ex qpx;
    };
    bool is_ex; /* created with ibv_create_qp_ex and send_ops_flags */
    uint64_t send_ops_flags;
    struct shim_wr_batch batch;
    struct shim_context *ctx;
    struct shim_pd *pd;
    struct shim_cq *send_cq, *recv_cq;
    struct shim_srq *srq; /* NULL: the QP has its own receive queue */
    struct nic_qp *nqp;
    struct ibv_qp_cap cap; /* what was granted */
    bool sq_sig_all;
    bool bf_dedicated; /* posts through a BlueFlame register of its own: no lock */
};

struct shim_ah {
    struct ibv_ah ah;
    struct shim_pd *pd;
    struct ibv_ah_attr attr;
    uint32_t node; /* fabric node the AH resolves to (UD sends) */
};

static inline struct shim_context *shim_ctx(struct ibv_context *c)
{
    return shim_container_of(c, struct shim_context, vctx.context);
}
static inline struct shim_pd *shim_pd(struct ibv_pd *p)
{
    return shim_container_of(p, struct shim_pd, pd);
}
static inline struct shim_mr *shim_mr(struct ibv_mr *m)
{
    return shim_container_of(m, struct shim_mr, mr);
}
static inline struct shim_cq *shim_cq(struct ibv_cq *c)
{
    return shim_container_of(c, struct shim_cq, cq);
}
static inline struct shim_qp *shim_qp(struct ibv_qp *q)
{
    return shim_container_of(q, struct shim_qp, qp);
}
static inline struct shim_srq *shim_srq(struct ibv_srq *s)
{
    return shim_container_of(s, struct shim_srq, srq);
}
static inline struct shim_xrcd *shim_xrcd(struct ibv_xrcd *x)
{
    return shim_container_of(x, struct shim_xrcd, xrcd);
}
static inline struct shim_ah *shim_ah(struct ibv_ah *a)
{
    return shim_container_of(a, struct shim_ah, ah);
}
static inline struct shim_channel *shim_channel(struct ibv_comp_channel *c)
{
    return shim_container_of(c, struct shim_channel, ch);
}

/* The destination of an address vector, or -1 if no node of the fabric
 * answers to it (the caller's EINVAL): a GID (mandatory on a RoCE port:
 * GRH required), or on an InfiniBand port (nic.link_layer ib) a unicast
 * LID, 0x0001..0xBFFF (IBA 4.1.1).  As the kernel's own InfiniBand
 * drivers check an AH and a QP's path (qib_check_ah, rvt_modify_qp; mlx4 /
 * mlx5 leave it to the firmware): an SL above 15, DLID 0 (reserved), a
 * multicast DLID (0xC000..0xFFFE) without a GRH and the permissive LID
 * 0xFFFF are refused.  (qib accepts an AH to the permissive LID, which
 * only directed-route subnet management on QP0 uses; rnicsim has no QP0,
 * and refuses it.) */
static inline int64_t shim_av_node(const struct nic *nic, const struct ibv_ah_attr *ah)
{
    bool ib = nic_get_params(nic)->link_layer == NIC_LINK_IB;
    if (ib && ah->sl > 15) /* 4 bits in the LRH (RoCE providers mask it) */
        return -1;
    if (ah->is_global)
        return ah->grh.sgid_index < SHIM_GID_TBL_LEN ? nic_node_from_gid(&ah->grh.dgid) : -1;
    if (!ib || ah->dlid == 0 || ah->dlid >= 0xc000)
        return -1;
    return (int64_t)ah->dlid - 1;
}

/* ---------------------------------------------------------------- cost.c-like helpers (device.c)
 */

/* A control-path verb (create/modify/query/destroy): note the call for the
 * poll heuristic and charge host.cpu.control_verb_ps to the running process
 * (nothing outside a simulated process). */
/* A control verb's CPU cost (host.cpu.control_verb), recorded as a span
 * named after the calling function in a trace (TRACE_G_HOST). */
void shim_charge_control_named(const char *call);
#define shim_charge_control() shim_charge_control_named(__func__)

/* ---------------------------------------------------------------- dm.c */

/* verbs_context ops: ibv_alloc_dm, ibv_free_dm, ibv_reg_dm_mr. */
struct ibv_dm *shim_alloc_dm(struct ibv_context *context, struct ibv_alloc_dm_attr *attr);
int shim_free_dm(struct ibv_dm *dm);
struct ibv_mr *shim_reg_dm_mr(struct ibv_pd *pd, struct ibv_dm *dm, uint64_t dm_offset,
                              size_t length, unsigned int access);

/* ---------------------------------------------------------------- device.c */

/* Drop one reference to a device; frees it at zero. */
void shim_device_put(struct shim_device *sdev);
struct shim_device *shim_device_get(struct shim_device *sdev);
/* Port attributes of the (single) port, full current struct. */
void shim_port_attr(const struct shim_context *ctx, struct ibv_port_attr *attr);
/* verbs_context op: ibv_query_device_ex (max_dm_size from nic.dm_size). */
int shim_query_device_ex(struct ibv_context *context, const struct ibv_query_device_ex_input *input,
                         struct ibv_device_attr_ex *attr, size_t attr_size);
/* The node GUID (network byte order) derived from the fabric node id. */
__be64 shim_node_guid(const struct nic *nic);
/* verbs_context.query_port: copies min(port_attr_len, ours), zeroes the rest. */
/* qp.c: ibv_modify_qp_rate_limit (the NIC's per-QP pacing, sim/nic/ratelimit.c) */
int shim_modify_qp_rate_limit(struct ibv_qp *qp, struct ibv_qp_rate_limit_attr *attr);
int shim_query_port_ex(struct ibv_context *context, uint8_t port_num,
                       struct ibv_port_attr *port_attr, size_t port_attr_len);
int shim_query_device_attr(struct ibv_context *context, struct ibv_device_attr *attr);

/* ---------------------------------------------------------------- context.c */

/* Fills the legacy ops table and the extended entries that exist. */
void shim_context_set_ops(struct shim_context *sctx);

/* ---------------------------------------------------------------- cq.c */

int shim_poll_cq(struct ibv_cq *cq, int num_entries, struct ibv_wc *wc);
int shim_req_notify_cq(struct ibv_cq *cq, int solicited_only);

/* ---------------------------------------------------------------- post.c */

int shim_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad_wr);
/* Post a list all-or-nothing (ibv_wr_complete): 0, or the errno of the
 * first WR that is refused, with nothing posted. */
int shim_post_send_batch(struct shim_qp *sqp, struct ibv_send_wr *wr);
int shim_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad_wr);
/* Is `op` an opcode a send queue of type `t` takes (the IBA table; RIMA
 * append on RC)?  Also what emulation mode checks a client's WQEs with. */
bool shim_send_opcode_ok(enum ibv_qp_type t, enum ibv_wr_opcode op);
/* Build the NIC's receive WQE from `wr` (at most max_sge SGEs): 0 or EINVAL. */
int shim_recv_wqe(const struct ibv_recv_wr *wr, uint32_t max_sge, struct nic_recv_wqe *wqe);

/* ---------------------------------------------------------------- srq.c */

int shim_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad_wr);
/* ibv_create_srq, or an XRC SRQ when xrcd and cq are given (xrc.c). */
struct ibv_srq *shim_srq_create(struct ibv_pd *pd, struct ibv_srq_init_attr *init,
                                struct shim_xrcd *xrcd, struct shim_cq *cq);

/* ---------------------------------------------------------------- xrc.c */

/* The verbs_context XRC entries (open/close_xrcd, create_srq_ex,
 * get_srq_num). */
void shim_xrc_ops(struct shim_context *sctx);
/* An XRC target QP of domain `sx` (init->cap zeroed: no queues). */
struct shim_qp *shim_qp_create_xrc_tgt(struct shim_xrcd *sx, struct ibv_qp_init_attr *init);
/* NIC callback of a QP gone to error with its overrun CQ (qp.c). */
void shim_qp_fatal(struct sim *sim, void *a, void *b);

/* ---------------------------------------------------------------- qp.c */

/* ibv_create_qp with the caller's attributes (cap written back).  An XRC
 * target QP (IBV_QPT_XRC_RECV) is made with pd NULL, `xrcd` its domain
 * and `ctx` the context (ibv_create_qp_ex with IBV_QP_INIT_ATTR_XRCD);
 * every other QP with xrcd NULL, ctx NULL. */
struct shim_qp *shim_qp_create(struct ibv_context *ctx, struct ibv_pd *pd,
                               struct ibv_qp_init_attr *init, struct ibv_xrcd *xrcd);

/* ---------------------------------------------------------------- qp_ex.c */

/* verbs_context.create_qp_ex: PD, send_ops_flags (the ibv_wr_* API). */
struct ibv_qp *shim_create_qp_ex(struct ibv_context *context, struct ibv_qp_init_attr_ex *attr);
/* Free the ibv_wr_* batch of a QP being destroyed. */
void shim_wr_batch_free(struct shim_qp *sqp);

/* ---------------------------------------------------------------- cq.c */

/* verbs_context.create_cq_ex */
struct ibv_cq_ex *shim_create_cq_ex(struct ibv_context *context, struct ibv_cq_init_attr_ex *attr);

/* Is `mask` acceptable for cur -> next of an RC, UC or UD QP (the
 * kernel's ib_modify_qp_is_ok)?  Exposed for the state tests. */
bool shim_modify_qp_is_ok(enum ibv_qp_state cur, enum ibv_qp_state next, enum ibv_qp_type type,
                          int mask);

/* ---------------------------------------------------------------- async.c */

/* Queue an asynchronous event on a context (wakes ibv_get_async_event and
 * makes ctx->async_fd readable).  Returns 0 or ENOMEM. */
int shim_async_event_post(struct shim_context *sctx, const struct ibv_async_event *ev);
/* Drop the queued (not yet taken) events whose element is `obj`, a QP, CQ
 * or SRQ being destroyed. */
void shim_async_drop(struct shim_context *sctx, const void *obj);
/* Free queued events and close the fd (ibv_close_device). */
void shim_async_teardown(struct shim_context *sctx);

#endif /* RNICSIM_VERBS_SHIM_H */
