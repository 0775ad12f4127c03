/* Emulation mode: what the drop-in libibverbs.so.1 (emu/lib) and the
 * daemon rnicsimd (emu/daemon) share.
 *
 * Shape (the rxe provider's): every verbs context is one connection on the
 * daemon's private Unix socket (SOCK_SEQPACKET: one message per call, file
 * descriptors passed with SCM_RIGHTS).  Control verbs are a request and a
 * reply on it; the daemon runs them through the verbs shim (verbs_shim/)
 * on the simulated host the client attached to, so their checks and
 * errnos are the shim's.  The data path does not use the socket: send and
 * receive queues and completion queues are rings in shared memory (a
 * memfd per object, mapped by both), and a post rings a doorbell (an
 * eventfd of the context) that the daemon watches.  Completion events
 * and asynchronous events are records written to a pipe whose read end is
 * the channel's fd / the context's async_fd, as the kernel's uverbs event
 * files are.
 *
 * Both sides are built from the same tree (EMU_PROTO_VERSION guards a
 * mismatch): the structs below are passed as they are, as are the
 * verbs.h structs and the NIC's WQE structs (sim/nic/nic.h). */
#ifndef RNICSIM_EMU_PROTO_H
#define RNICSIM_EMU_PROTO_H

#include <infiniband/verbs.h>
#include <stdatomic.h>
#include <stdint.h>

#include "sim/nic/nic.h"

#define EMU_PROTO_VERSION 2u
/* Environment of a client process. */
#define EMU_ENV_HOST "RNICSIM_HOST"     /* simulated host to attach to: h0, h1, ... */
#define EMU_ENV_SOCKET "RNICSIM_SOCKET" /* daemon socket (default: emu_default_socket) */
#define EMU_SOCKET_NAME "rnicsimd.sock"
#define EMU_DEVICE_NAME "rnicsim0"

/* The GID types ibv_query_gid_type reports (rdma-core's enum
 * ibv_gid_type_sysfs in driver.h, which libibverbs-dev does not install). */
enum emu_gid_type_sysfs { EMU_GID_TYPE_SYSFS_IB_ROCE_V1 = 0, EMU_GID_TYPE_SYSFS_ROCE_V2 = 1 };

/* ---------------------------------------------------------------- control messages */

enum emu_op {
    EMU_OP_HELLO = 1, /* attach to a host; open a context (open = 1) */
    EMU_OP_QUERY_DEVICE,
    EMU_OP_QUERY_PORT,
    EMU_OP_QUERY_GID,
    EMU_OP_QUERY_PKEY,
    EMU_OP_ALLOC_PD,
    EMU_OP_DEALLOC_PD,
    EMU_OP_REG_MR,
    EMU_OP_DEREG_MR,
    EMU_OP_CREATE_CHANNEL,
    EMU_OP_DESTROY_CHANNEL,
    EMU_OP_CREATE_CQ,
    EMU_OP_DESTROY_CQ,
    EMU_OP_CREATE_QP,
    EMU_OP_MODIFY_QP,
    EMU_OP_QUERY_QP,
    EMU_OP_DESTROY_QP,
    EMU_OP_CREATE_SRQ,
    EMU_OP_MODIFY_SRQ,
    EMU_OP_QUERY_SRQ,
    EMU_OP_DESTROY_SRQ,
    EMU_OP_CREATE_AH,
    EMU_OP_DESTROY_AH,
    EMU_OP_INIT_AH_FROM_WC,
    EMU_OP_WR_REFUSED, /* post_send refused a WR the NIC's transport lacks (no reply) */
    EMU_OP_COUNT,
};

struct emu_hello {
    uint32_t version;
    uint32_t open; /* 1: open a context (the connection stays); 0: device list only */
    char host[32];
};

struct emu_hello_rep {
    uint32_t version;
    uint32_t node_id;
    uint32_t n_nodes;
    uint32_t pad;
    __be64 node_guid;
    struct nic_params params;
    struct ibv_port_attr port;
};

/* Handles name the client's own objects in the daemon (1-based). */
struct emu_req {
    uint32_t op;
    uint32_t handle; /* the object the call is about */
    union {
        struct emu_hello hello;
        struct {
            uint32_t index; /* GID / P_Key index, port number, or a struct size */
            uint32_t flags;
        } query;
        struct {
            uint64_t addr, length, iova;
            uint32_t access;
        } reg_mr;
        struct {
            uint32_t channel; /* 0: none */
            uint32_t comp_vector;
            int32_t cqe;
            uint32_t pad;
            uint64_t cookie; /* returned in completion events: the client's ibv_cq */
        } create_cq;
        struct {
            uint32_t send_cq, recv_cq, srq;
            uint32_t qp_type;
            uint32_t sq_sig_all;
            struct ibv_qp_cap cap;
        } create_qp;
        struct {
            struct ibv_qp_attr attr;
            int32_t mask;
        } modify_qp;
        struct {
            struct ibv_srq_attr attr;
            int32_t mask;
            uint64_t cookie; /* the client's ibv_srq (async events) */
        } srq;
        struct ibv_ah_attr ah;
        struct {
            struct ibv_wc wc;
            uint8_t grh[40];
            uint8_t port;
        } ah_from_wc;
        struct {
            uint32_t opcode;
        } refused;
    } u;
};

struct emu_rep {
    int32_t rc; /* 0 or an errno */
    uint32_t handle;
    union {
        struct emu_hello_rep hello;
        struct ibv_device_attr_ex device;
        struct ibv_port_attr port;
        struct {
            union ibv_gid gid;
            uint32_t type; /* enum emu_gid_type_sysfs */
        } gid;
        uint16_t pkey;
        struct {
            uint32_t lkey, rkey;
        } mr;
        struct {
            uint32_t depth; /* ring entries */
        } cq;
        struct {
            uint32_t qpn;
            uint32_t sq_depth, rq_depth;
            struct ibv_qp_cap cap;
        } qp;
        struct {
            struct ibv_qp_attr attr;
            struct ibv_qp_init_attr init; /* cq/srq pointers: client fills */
        } query_qp;
        struct {
            uint32_t srqn, depth, max_sge;
        } srq_created;
        struct ibv_srq_attr srq;
        struct {
            uint32_t node;
        } ah;
        struct ibv_ah_attr ah_attr;
    } u;
};

/* ---------------------------------------------------------------- shared memory */

/* Published by the daemon / written by the client.  Indices count from
 * 0 since creation (or the last move to RESET) and never wrap in
 * practice (64 bits); slot = index % depth. */

/* A completion queue: the daemon forwards the CQEs the NIC model writes
 * into ring[] and then publishes prod; the client takes them and
 * publishes cons.  A CQE that finds the ring full is dropped and
 * `overflowed` set (a CQ overrun).  Arming (ibv_req_notify_cq) is one word
 * the client sets and the daemon takes: EMU_ARM_VALID, the solicited-only
 * bit, and prod as the client saw it, so the event is for the first CQE
 * the client could not have seen when it armed. */
struct emu_cq_shm {
    _Atomic uint64_t prod;
    _Atomic uint64_t cons;
    _Atomic uint64_t arm; /* (prod_seen << 2) | solicited << 1 | EMU_ARM_VALID; 0 = none */
    _Atomic uint32_t overflowed;
    uint32_t depth;
    struct ibv_wc ring[];
};
#define EMU_ARM_VALID 1u
#define EMU_ARM_SOLICITED 2u

/* A QP: the send ring of NIC WQEs (built and checked by the shim's
 * post.c in the client), the receive ring, and what the NIC model's state
 * is (published by the daemon after every step: a slot is free again once
 * the NIC completed its WQE). */
struct emu_qp_shm {
    _Atomic uint64_t sq_tail; /* client: WQEs written (doorbell record) */
    _Atomic uint64_t rq_tail;
    _Atomic uint64_t sq_comp; /* daemon: the NIC's sq_comp */
    _Atomic uint64_t rq_head; /* daemon: receive WQEs the NIC has taken */
    _Atomic uint32_t state;   /* daemon: enum ibv_qp_state of the NIC's QP */
    uint32_t sq_depth, rq_depth;
    uint32_t pad;
    /* struct emu_send_wqe sq[sq_depth]; struct nic_recv_wqe rq[rq_depth] */
};

/* A send WQE in the shared ring: the NIC's WQE (its inline_data pointer
 * means nothing across processes) and the inline payload after it. */
struct emu_send_wqe {
    struct nic_send_wqe w;
    uint8_t inline_bytes[NIC_MAX_INLINE_BYTES];
};

struct emu_srq_shm {
    _Atomic uint64_t tail; /* client */
    _Atomic uint64_t head; /* daemon: WQEs taken by the NIC's QPs */
    uint32_t depth;
    uint32_t pad;
    /* struct nic_recv_wqe ring[depth] */
};

static inline size_t emu_cq_shm_bytes(uint32_t depth)
{
    return sizeof(struct emu_cq_shm) + (size_t)depth * sizeof(struct ibv_wc);
}
static inline size_t emu_qp_shm_bytes(uint32_t sq_depth, uint32_t rq_depth)
{
    return sizeof(struct emu_qp_shm) + (size_t)sq_depth * sizeof(struct emu_send_wqe) +
           (size_t)rq_depth * sizeof(struct nic_recv_wqe);
}
static inline struct emu_send_wqe *emu_qp_sq(struct emu_qp_shm *q)
{
    return (struct emu_send_wqe *)(void *)(q + 1);
}
static inline struct nic_recv_wqe *emu_qp_rq(struct emu_qp_shm *q)
{
    return (struct nic_recv_wqe *)(void *)(emu_qp_sq(q) + q->sq_depth);
}
static inline size_t emu_srq_shm_bytes(uint32_t depth)
{
    return sizeof(struct emu_srq_shm) + (size_t)depth * sizeof(struct nic_recv_wqe);
}
static inline struct nic_recv_wqe *emu_srq_ring(struct emu_srq_shm *s)
{
    return (struct nic_recv_wqe *)(void *)(s + 1);
}

/* ---------------------------------------------------------------- event records */

/* One completion event (read from the channel's fd): the CQ's cookie. */
struct emu_comp_event {
    uint64_t cookie;
};

/* One asynchronous event (read from the context's async_fd). */
struct emu_async_event {
    uint32_t type; /* enum ibv_event_type */
    uint32_t pad;
    uint64_t cookie; /* the client's object (SRQ limit: its ibv_srq) */
};

#endif /* RNICSIM_EMU_PROTO_H */
