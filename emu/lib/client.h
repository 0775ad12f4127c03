/* The drop-in libibverbs.so.1 (emulation mode): internal header.
 *
 * A program that loads this library instead of rdma-core's talks to
 * rnicsimd (emu/proto.h): control verbs are calls over the daemon's
 * socket, the data path is shared-memory rings and a doorbell.  The
 * objects handed to the program are the real verbs.h structs; the QP, SRQ
 * and AH are the verbs shim's own objects (verbs_shim/shim.h), so the
 * shim's post.c - linked into this library - checks each work request and
 * builds the NIC's WQE exactly as in simulation; only the functions it
 * calls to reach the NIC (nic_sq_append, nic_sq_doorbell, nic_rq_append,
 * nic_get_params, nic_note_wr_refused: data.c) are this library's: they
 * write the shared rings and ring the doorbell. */
#ifndef RNICSIM_EMU_LIB_CLIENT_H
#define RNICSIM_EMU_LIB_CLIENT_H

#include <pthread.h>
#include <stdbool.h>

#include "emu/proto.h"
#include "verbs_shim/shim.h"

#define cl_container_of(ptr, type, member) ((type *)(void *)((char *)(ptr)-offsetof(type, member)))

struct cl_context;

/* What post.c knows as the NIC: its parameters (the daemon's) and the
 * context whose doorbell it rings. */
struct nic {
    struct nic_params p;
    struct cl_context *ctx;
};

struct cl_device {
    struct ibv_device dev;
    char host[32];
    __be64 guid;
};

struct cl_context {
    int fd;    /* the connection (SOCK_SEQPACKET) */
    int db_fd; /* doorbell eventfd */
    pthread_mutex_t call_lock;
    struct nic nic;
    uint32_t node_id, n_nodes;
    struct ibv_port_attr port;
    struct verbs_context vctx; /* last: the program gets &vctx.context */
};

struct cl_pd {
    struct ibv_pd pd;
    uint32_t handle;
};

struct cl_mr {
    struct ibv_mr mr;
    uint32_t handle;
};

struct cl_channel {
    struct ibv_comp_channel ch;
    uint32_t handle;
};

struct cl_cq {
    struct ibv_cq cq;
    uint32_t handle;
    struct emu_cq_shm *shm;
    size_t shm_bytes;
    uint32_t depth;
    uint64_t cons;
    pthread_spinlock_t lock;
    uint32_t events_delivered; /* by ibv_get_cq_event (ibv_destroy_cq waits for their acks) */
};

struct cl_srq {
    struct shim_srq ssrq; /* ssrq.srq is the program's */
    uint32_t handle;
    struct emu_srq_shm *shm;
    size_t shm_bytes;
    uint32_t depth;
    uint64_t tail;
    pthread_spinlock_t lock;
};

struct cl_qp {
    struct shim_qp sqp; /* sqp.qp is the program's; post.c works on this */
    struct nic_qp nqp;  /* what post.c reads of the NIC's QP: state, Q_Key, nic */
    uint32_t handle;
    struct emu_qp_shm *shm;
    size_t shm_bytes;
    uint64_t sq_tail, rq_tail;
    pthread_spinlock_t sq_lock, rq_lock;
};

struct cl_ah {
    struct shim_ah sah; /* sah.ah is the program's; sah.node names the destination */
    uint32_t handle;
};

static inline struct cl_context *cl_ctx(struct ibv_context *c)
{
    return cl_container_of(c, struct cl_context, vctx.context);
}

/* ---------------------------------------------------------------- conn.c */

/* Connect to the daemon (NULL with errno and a message on stderr). */
int cl_connect(char *why, size_t why_len);
/* One call: send `q`, wait for the reply; up to `max_fds` descriptors
 * passed back land in fds (the rest closed).  Returns the reply's rc, or
 * EIO if the daemon is gone. */
int cl_call_fd(int fd, const struct emu_req *q, struct emu_rep *r, int *fds, int max_fds,
               int *nfds);
int cl_call(struct cl_context *ctx, struct emu_req *q, struct emu_rep *r, int *fds, int max_fds,
            int *nfds);
/* Map a ring the daemon passed (closes fd). */
void *cl_map(int fd, size_t bytes);
/* The same line once per process. */
void cl_warn_once(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---------------------------------------------------------------- data.c */

/* The legacy ops the inline data-path calls jump through, and the
 * extended ones that exist. */
void cl_context_set_ops(struct cl_context *ctx);
int cl_query_port_ex(struct ibv_context *context, uint8_t port_num, struct ibv_port_attr *attr,
                     size_t len);
int cl_query_device_ex(struct ibv_context *context, const struct ibv_query_device_ex_input *input,
                       struct ibv_device_attr_ex *attr, size_t attr_size);

#endif /* RNICSIM_EMU_LIB_CLIENT_H */
