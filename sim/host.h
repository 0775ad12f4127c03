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

#include "noise.h"
#include "sim.h"

struct nic;
struct host;

/* CPU time charged for verbs calls and declared work (host profile).  Each
 * default's source is in host.c. */
struct host_cpu_params {
    sim_time_t post_send_ps;     /* ibv_post_send, per call (barrier + doorbell store): latency */
    sim_time_t post_send_wqe_ps; /* ibv_post_send, per WR (building and writing the WQE) */
    /* Occupancy, not latency: after a doorbell (or BlueFlame) MMIO store the
     * thread's write-combining path drains for this long; the thread's next
     * doorbell waits until it has (sim/host.c, host_doorbell). */
    sim_time_t doorbell_gap_ps;
    sim_time_t post_recv_ps;     /* ibv_post_recv, per WR */
    sim_time_t poll_cq_ps;       /* one ibv_poll_cq call */
    sim_time_t poll_cqe_ps;      /* extra per CQE returned */
    sim_time_t control_verb_ps;  /* create/modify/destroy/reg_mr (non data path) */
    sim_time_t mr_pin_page_ps;   /* ibv_reg_mr: pinning one page of the region */
    sim_time_t mr_unpin_page_ps; /* ibv_dereg_mr: unpinning one page */
    uint64_t memcpy_bytes_per_s; /* host_memcpy cost */
    sim_time_t wakeup_ps;        /* a parked poller notices new data (median) */
    uint32_t wakeup_noise;       /* its variation: a noise preset (sim/noise.h), 0 = none */
};

void host_cpu_params_default(struct host_cpu_params *p);

struct host {
    struct sim *sim;
    uint32_t id;
    char name[32];
    struct host_cpu_params cpu;
    struct nic *nic;
    /* The device this host is the CPU of when it is not a server (the
     * control-plane CPU of a programmable switch, sim/pswitch), else NULL. */
    void *device;
    struct sim_waitq relax_wq; /* host_relax(): woken by any DMA write / CQE / local proc */
    struct sim_waitq cqe_wq;   /* empty ibv_poll_cq(): woken by any CQE on this host */
    uint64_t dma_writes_landed, cqes_landed;
    /* Changes a parked thread could observe: DMA writes and CQEs landed and
     * CPU time charged by any thread of the host (host_park compares). */
    uint64_t activity_gen;
    struct noise wakeup_noise; /* draws for cpu.wakeup_ps (stream "noise/wakeup/<name>") */
    uint32_t n_threads;        /* threads spawned so far (host_thread.tl_index) */
};

/* Per-process state of a program running on a host (the sim_proc user
 * pointer).  The poll heuristic: an empty ibv_poll_cq of a CQ the same
 * thread already polled empty with no other verbs or host_* call in between
 * (`other_calls` unchanged) is a spin loop, so the thread
 * parks on host->relax_wq until something it could observe changes, then
 * is charged the elapsed time in one step. */
#define HOST_EMPTY_CQS_MAX 8 /* CQs one polling loop may alternate between */

struct host_thread {
    struct host *host;
    void *program;            /* owned by the runner (tools/rnicsim) */
    uint64_t other_calls;     /* verbs / host_* calls other than poll_cq */
    uint64_t empty_poll_mark; /* other_calls + 1 when empty_cqs was started; 0 = none */
    /* CQs polled empty since then (no other call in between): a loop that
     * polls several CQs has spun once it comes back to one of them. */
    const void *empty_cqs[HOST_EMPTY_CQS_MAX];
    unsigned n_empty_cqs;
    char why[128];         /* blocking point shown in deadlock reports */
    sim_time_t db_free_ps; /* host_doorbell: the thread's MMIO path is free from then */
    /* Lost-wakeup guard: host->activity_gen when this thread last looked at
     * memory or a CQ (a poll, or waking from host_park), and how many of the
     * increments since were its own charges.  If anything else changed since
     * (a CQE landed while its poll was being charged), host_park returns at
     * once instead of parking: the thread has not seen it yet. */
    uint64_t seen_gen, own_gen;
    uint32_t tl_index; /* its index on the host: its track in traces (TRK_THREAD) */
};

void host_init(struct host *h, struct sim *sim, uint32_t id, const char *name,
               const struct host_cpu_params *cpu);
void host_dma_landed(struct host *h);
void host_cqe_landed(struct host *h);
/* The thread / host of the running process (NULL outside a simulated
 * process, e.g. in unit tests that drive the NIC directly). */
struct host_thread *host_thread_current(void);
struct host *host_of_current(void);
/* Start a process running fn(arg) on host h (its user pointer is a new
 * host_thread owned by the simulator run; freed with the sim). */
struct sim_proc *host_spawn(struct host *h, const char *name, sim_proc_fn fn, void *arg,
                            void *program, size_t stack_bytes);
/* Record a call other than an empty poll (resets the poll heuristic). */
void host_note_call(void);
/* Charge `ps` of CPU time to the running process (sleeps it).  Before
 * giving up the CPU it wakes this host's host_relax() waiters, since the
 * running thread may have written memory they poll. */
void host_charge(sim_time_t ps);
/* The running thread is about to store a doorbell: wait (charged as CPU
 * time) until its previous doorbell store has drained
 * (host_cpu_params.doorbell_gap_ps). */
void host_doorbell(void);
/* Park the running process on h->relax_wq (host_relax and spinning polls),
 * unless something it could observe changed since its last observation
 * (host_observed); then it returns at once. */
void host_park(const char *why);
/* Trace (TRACE_G_HOST, sim/trace.h): a span of thread t from t0_ps to
 * t1_ps named `call` (a string valid during the call), with the other
 * fields of *r (qpn, len, val, status: the call's arguments and result).
 * Callers test sim_trace_on(sim, TRACE_G_HOST) first. */
struct trace_rec;
void host_trace_call(struct host_thread *t, sim_time_t t0_ps, sim_time_t t1_ps, const char *call,
                     struct trace_rec *r);
/* The running thread looked at memory / a CQ now (ibv_poll_cq calls it
 * where it reads the CQ). */
void host_observed(void);

#endif /* RNICSIM_HOST_H */
