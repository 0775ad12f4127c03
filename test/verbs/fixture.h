/* Verbs-level test fixture: a simulation of N hosts (default 2) on a star
 * fabric, each with PCIe and an RNIC, programs run as simulated processes,
 * an in-simulation rendezvous board for connection data, and helpers that
 * build an RC pair (device, PD, MR, CQs, QP, INIT/RTR/RTS) so each test
 * is short.
 *
 * Typical use:
 *     struct fx *fx = fx_create(1, NULL);
 *     CHECK(fx_run_pair(fx, "client", client_fn, "server", server_fn, &state) ==
 *           SIM_RUN_DONE);   (fx_spawn + fx_run for other layouts)
 *     fx_destroy(fx);
 * and inside a program:
 *     struct fx_rc *rc = &state->rc[0];
 *     fx_rc_open(fx, rc, NULL);
 *     fx_rc_connect(fx, rc, "pair0/client", "pair0/server");
 *
 * The same endpoint helpers build UC and UD pairs (fx_rc_opts.qp_type):
 * the transitions use that type's required masks, and a UD endpoint gets
 * an address handle to its peer (rc->ah) that fx_post uses.
 *
 * Loss injection (a test hook between the fabric and each NIC, independent
 * of the fabric's own loss model): fx_set_loss drops packets arriving at a
 * node with probability p, drawn from a per-node sim_rng stream derived
 * from the seed (so runs repeat); fx_set_drop_fn drops whatever a callback
 * chooses (by opcode, PSN, index, ...).  Drops are counted and traced
 * (TRACE_PKT_DROP, "fx loss hook"). */
#ifndef RNICSIM_TEST_VERBS_FIXTURE_H
#define RNICSIM_TEST_VERBS_FIXTURE_H

#include <infiniband/verbs.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sim/fabric/fabric.h"
#include "sim/host.h"
#include "sim/nic/nic.h"
#include "sim/pcie/pcie.h"
#include "sim/pkt.h"
#include "sim/sim.h"

enum { FX_MAX_HOSTS = 4, FX_MAX_KEYS = 64, FX_MAX_VALUE_BYTES = 128, FX_MAX_RCS = 32 };

struct fx_kv {
    char key[48];
    uint8_t value[FX_MAX_VALUE_BYTES];
    size_t len;
};

struct fx_rc;
struct fx;

/* Return true to drop packet `p` arriving at node `node`. */
typedef bool (*fx_drop_fn)(struct fx *fx, unsigned node, const struct pkt *p, void *arg);

struct fx_port {
    struct fx *fx;
    unsigned node;
};

struct fx {
    struct sim *sim;
    struct pkt_pool *pool;
    struct topology *topo;
    unsigned n_hosts;
    struct host hosts[FX_MAX_HOSTS];
    struct pcie_link *pcie[FX_MAX_HOSTS];
    struct nic *nic[FX_MAX_HOSTS];
    struct nic_params nicp;
    /* rendezvous board */
    struct fx_kv kv[FX_MAX_KEYS];
    unsigned n_kv;
    struct sim_waitq kv_wq;
    /* RC endpoints still open (closed by fx_destroy if a test left them) */
    struct fx_rc *rcs[FX_MAX_RCS];
    /* loss hook at each node's ingress */
    struct fx_port port[FX_MAX_HOSTS];
    struct fabric_sink nic_in[FX_MAX_HOSTS];
    double loss[FX_MAX_HOSTS];
    struct sim_rng loss_rng[FX_MAX_HOSTS];
    fx_drop_fn drop_fn;
    void *drop_arg;
    uint64_t arrived[FX_MAX_HOSTS], dropped[FX_MAX_HOSTS];
};

/* Drop packets arriving at `node` with probability p (0 = none, 1 = all). */
void fx_set_loss(struct fx *fx, unsigned node, double p);
/* The same at every node. */
void fx_set_loss_all(struct fx *fx, double p);
/* Drop what fn chooses (NULL: none); applied before the random loss. */
void fx_set_drop_fn(struct fx *fx, fx_drop_fn fn, void *arg);

/* Two hosts; `np` overrides the NIC defaults (NULL = nic_params_default). */
struct fx *fx_create(uint64_t seed, const struct nic_params *np);
struct fx *fx_create_n(uint64_t seed, unsigned n_hosts, const struct nic_params *np);
/* Run fn(arg) as a program on host `h`. */
struct sim_proc *fx_spawn(struct fx *fx, unsigned h, const char *name, sim_proc_fn fn, void *arg);
/* sim_run until everything finished (or 10 s of simulated time). */
enum sim_run_result fx_run(struct fx *fx);
/* The usual pair: fn0 on host 0, fn1 on host 1, both given arg, then
 * fx_run; a deadlock prints the simulator's report of who waits for what. */
enum sim_run_result fx_run_pair(struct fx *fx, const char *name0, sim_proc_fn fn0,
                                const char *name1, sim_proc_fn fn1, void *arg);
void fx_destroy(struct fx *fx);

/* Rendezvous (inside programs): put stores a copy; get blocks until the
 * key exists and copies min(len, stored) bytes. */
void fx_put(struct fx *fx, const char *key, const void *buf, size_t len);
void fx_get(struct fx *fx, const char *key, void *buf, size_t len);
/* A two-party barrier: put "<name>/<me>", get "<name>/<peer>". */
void fx_barrier(struct fx *fx, const char *name, const char *me, const char *peer);

/* ---------------------------------------------------------------- RC pair */

struct fx_ep_info {
    uint32_t qpn;
    uint32_t psn;
    union ibv_gid gid;
    uint64_t addr;
    uint32_t rkey;
    uint32_t pad;
};

struct fx_rc_opts {
    enum ibv_qp_type qp_type; /* IBV_QPT_RC (default), IBV_QPT_UC or IBV_QPT_UD */
    uint32_t qkey;            /* UD: the QP's Q_Key (default 0x11111111) */
    /* RC: timeout, retry_cnt, rnr_retry, min_rnr_timer (defaults 14, 7, 7,
     * 12) and max_rd_atomic = max_dest_rd_atomic (default 1) */
    uint8_t timeout, retry_cnt, rnr_retry, min_rnr_timer, max_rd_atomic;
    size_t buf_bytes; /* registered buffer (default 2 MiB) */
    int access;       /* MR access (default LOCAL_WRITE|REMOTE_*) */
    int qp_access;    /* QP access flags (default REMOTE_WRITE|READ|ATOMIC) */
    uint32_t max_send_wr, max_recv_wr, max_send_sge, max_recv_sge, max_inline;
    int cq_depth; /* default 256 */
    bool sq_sig_all;
    bool use_channel; /* create a completion channel for both CQs */
};

struct fx_rc {
    struct fx *fx;
    struct ibv_context *ctx;
    struct ibv_pd *pd;
    struct ibv_mr *mr;
    struct ibv_comp_channel *channel;
    struct ibv_cq *scq, *rcq;
    struct ibv_qp *qp;
    uint8_t *buf;
    size_t buf_bytes;
    struct fx_ep_info local, remote;
    struct fx_rc_opts opts;
    struct ibv_ah *ah; /* UD: to the peer (made by fx_rc_to_rtr) */
    bool shared;       /* made by fx_rc_open_shared: owns only qp and ah */
};

void fx_rc_default_opts(struct fx_rc_opts *o);
/* Open device, PD, MR over a fresh buffer, send and recv CQs, a QP of
 * opts.qp_type in RESET.  `o` NULL = defaults (RC).  Returns 0 or an
 * errno. */
int fx_rc_open(struct fx *fx, struct fx_rc *rc, const struct fx_rc_opts *o);
/* Another endpoint on the device, PD, MR and CQs of `base` (same options),
 * with a QP of its own in RESET, attached to `srq` if not NULL.  Close it
 * (fx_rc_close destroys only its QP and AH) before `base`.  Returns 0 or
 * an errno. */
int fx_rc_open_shared(struct fx_rc *rc, struct fx_rc *base, struct ibv_srq *srq);
/* The three standard transitions with the kernel's required masks for
 * the endpoint's QP type (UD: RTR also creates rc->ah to `remote`). */
int fx_rc_to_init(struct fx_rc *rc);
int fx_rc_to_rtr(struct fx_rc *rc, const struct fx_ep_info *remote);
int fx_rc_to_rts(struct fx_rc *rc);
/* Publish local info under `me`, fetch `peer`'s, INIT/RTR/RTS. */
int fx_rc_connect(struct fx_rc *rc, const char *me, const char *peer);
/* Destroy everything fx_rc_open made (any process, or outside one). */
void fx_rc_close(struct fx_rc *rc);

/* Spin on ibv_poll_cq until one CQE arrives (the parking heuristic makes
 * this cheap); returns the poll result (1, or <0). */
int fx_poll_one(struct ibv_cq *cq, struct ibv_wc *wc);
/* Post one WR of `opcode` on rc (local SGE [off, off+len) of rc->buf,
 * remote address remote.addr + roff; UD: to the peer through rc->ah with
 * the peer's QPN and opts.qkey).  Returns ibv_post_send's result. */
int fx_post(struct fx_rc *rc, enum ibv_wr_opcode opcode, uint64_t wr_id, size_t off, uint32_t len,
            uint64_t roff, unsigned flags);
int fx_post_recv(struct fx_rc *rc, uint64_t wr_id, size_t off, uint32_t len);

/* Replace the star by the topology `tp` (tp->n_nodes must be the number
 * of hosts), wired through the same loss hooks.  Call right after
 * fx_create, before any program runs.  Returns 0 or EINVAL. */
int fx_use_topology(struct fx *fx, const struct topo_params *tp);

/* ---------------------------------------------------------------- memory watcher */

/* A process on host `h` that calls fn(arg) once at start and then at every
 * instant a DMA write or a CQE lands in that host's memory (it waits on
 * the host's relax queue, so no CPU time is charged and it sees memory as
 * it is at that simulated instant), until fx_watch_stop; then once more.
 * The caller owns `w`.  Used to catch orderings: a flag byte visible
 * before earlier bytes, a CQE visible before its data. */
typedef void (*fx_watch_fn)(void *arg);
struct fx_watch {
    struct fx *fx;
    unsigned host;
    fx_watch_fn fn;
    void *arg;
    bool stop, done;
    uint64_t calls;
};
void fx_watch_start(struct fx *fx, struct fx_watch *w, unsigned h, fx_watch_fn fn, void *arg);
/* From any process: the watcher makes its last call and returns. */
void fx_watch_stop(struct fx_watch *w);
/* The NIC's view of a CQ (its ring: CQEs [0, prod) have become visible). */
struct nic_cq *fx_nic_cq(struct ibv_cq *cq);

#endif /* RNICSIM_TEST_VERBS_FIXTURE_H */
