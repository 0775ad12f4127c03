/* A simulated host: CPU cost model, the processes (programs) it runs, its
 * memory (real memory of the simulator process) and its RNIC.
 *
 * Memory visibility: every DMA write the NIC performs into host memory
 * (payload, CQE) calls host_dma_landed() at the simulated instant the data
 * become visible; that wakes processes parked in host_relax().  Every CQE
 * additionally calls host_cqe_landed(), waking processes parked in an empty
 * ibv_poll_cq(). */
#ifndef RNICSIM_HOST_H
#define RNICSIM_HOST_H

#include <stdint.h>

#include "sim.h"

struct nic;
struct host;

/* CPU time charged for verbs calls and declared work (host profile).  Each
 * default's source is in host.c. */
struct host_cpu_params {
    sim_time_t post_send_ps;      /* ibv_post_send, per WR (incl. WQE write) */
    sim_time_t post_recv_ps;      /* ibv_post_recv, per WR */
    sim_time_t poll_cq_ps;        /* one ibv_poll_cq call */
    sim_time_t poll_cqe_ps;       /* extra per CQE returned */
    sim_time_t control_verb_ps;   /* create/modify/destroy/reg_mr (non data path) */
    uint64_t memcpy_bytes_per_s;  /* host_memcpy cost */
    sim_time_t wakeup_ps;         /* a parked poller notices new data */
};

void host_cpu_params_default(struct host_cpu_params *p);

struct host {
    struct sim *sim;
    uint32_t id;
    char name[32];
    struct host_cpu_params cpu;
    struct nic *nic;
    struct sim_waitq relax_wq; /* host_relax(): woken by any DMA write / CQE / local proc */
    struct sim_waitq cqe_wq;   /* empty ibv_poll_cq(): woken by any CQE on this host */
    uint64_t dma_writes_landed, cqes_landed;
};

void host_init(struct host *h, struct sim *sim, uint32_t id, const char *name,
               const struct host_cpu_params *cpu);
void host_dma_landed(struct host *h);
void host_cqe_landed(struct host *h);
/* The host of the running process (NULL outside a simulated process). */
struct host *host_of_current(void);
/* Charge `ps` of CPU time to the running process (sleeps it). */
void host_charge(sim_time_t ps);

#endif /* RNICSIM_HOST_H */
