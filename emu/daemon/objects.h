/* rnicsimd: a client connection and the verbs objects it owns (shared by
 * client.c and rings.c).
 *
 * A client is one verbs context of one process.  Its objects live in the
 * daemon as objects of the verbs shim (verbs_shim/) opened on the
 * client's simulated host; the client names them by handle (an index in
 * `objs`, 1-based), never by pointer, so it can only reach its own. */
#ifndef RNICSIM_EMU_OBJECTS_H
#define RNICSIM_EMU_OBJECTS_H

#include "emu/daemon/emu.h"
#include "verbs_shim/shim.h"

enum emu_obj_kind { OBJ_FREE, OBJ_PD, OBJ_MR, OBJ_CHANNEL, OBJ_CQ, OBJ_QP, OBJ_SRQ, OBJ_AH };

struct emu_channel {
    int wr_fd;     /* write end of the event pipe (the client reads the other) */
    uint32_t refs; /* CQs using it */
    uint64_t dropped;
};

struct emu_cq {
    struct ibv_cq *cq; /* the shim's */
    struct nic_cq *ncq;
    struct emu_channel *channel;
    uint64_t cookie;
    struct emu_cq_shm *shm;
    size_t shm_bytes;
    uint32_t depth;
    uint32_t refs;      /* QPs using it */
    bool event_pending; /* the NIC fired the arm: deliver after forwarding */
    uint64_t overruns;
};

struct emu_srq {
    struct ibv_srq *srq;
    struct emu_srq_shm *shm;
    size_t shm_bytes;
    uint64_t cookie;
    uint64_t taken; /* ring entries moved into the NIC's SRQ */
    uint32_t depth, max_sge;
};

struct emu_qp {
    struct ibv_qp *qp;
    struct nic_qp *nqp;
    struct emu_cq *send_cq, *recv_cq;
    struct emu_srq *srq;
    struct emu_qp_shm *shm;
    size_t shm_bytes;
    uint32_t sq_depth, rq_depth;
    uint64_t sq_taken, rq_taken; /* ring entries moved into the NIC's queues */
};

struct emu_obj {
    enum emu_obj_kind kind;
    union {
        struct ibv_pd *pd;
        struct ibv_mr *mr;
        struct emu_channel *channel;
        struct emu_cq *cq;
        struct emu_qp *qp;
        struct emu_srq *srq;
        struct ibv_ah *ah;
    } u;
};

struct emu_client {
    struct emu *emu;
    struct emu_client *next;
    char name[64]; /* "h1/pid 1234" */
    int fd;
    ev_io io_w;
    int db_fd; /* doorbell eventfd */
    ev_io db_w;
    int async_wr; /* write end of the async event pipe */
    pid_t pid;
    uint32_t host;
    bool attached;
    /* the agent: a process on the client's host that runs its control
     * calls in simulated time (control verbs cost what the host profile
     * says) and tears everything down when the client goes */
    struct sim_proc *agent;
    struct sim_waitq agent_wq;
    bool have_req, closing, crashed, agent_done, io_stopped;
    uint32_t inflight;   /* injected events not yet run (the client is freed after) */
    uint64_t dma_faults; /* DMA into its memory that failed (it unmapped registered pages) */
    struct emu_wc *wc;   /* DMA writes gathered for one process_vm_writev (remote_mem.c) */
    struct emu_req req;
    struct ibv_context *ctx;
    struct emu_obj *objs;
    uint32_t nobjs;
};

/* Drop a client that broke the protocol (or died): its connection is
 * closed and its agent tears its objects down. */
void emu_client_fail(struct emu_client *c, const char *why);
/* Start watching the client's doorbell eventfd (client.c). */
void emu_client_watch_doorbell(struct emu_client *c);
/* Write the DMA writes gathered for the client (remote_mem.c): at the end
 * of every step of the model, before its CQEs go out. */
int emu_remote_flush(struct emu_client *c);
/* ... of every client: a CQE of one may report data placed in another's
 * memory (a sender's completion after the receiver's placement). */
void emu_remote_flush_all(struct emu *e);
void emu_remote_free(struct emu_client *c);
/* A CQ was created: its NIC notifications come to the daemon (rings.c). */
void emu_rings_cq_created(struct emu_client *c, struct emu_cq *ecq);

#endif /* RNICSIM_EMU_OBJECTS_H */
