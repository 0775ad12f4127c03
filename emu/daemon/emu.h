/* rnicsimd, the emulation-mode daemon: internal interfaces.
 *
 * Reading order: emu.h -> pace.c (the wall-clock pacer on libev: the
 * simulator's event queue run against CLOCK_MONOTONIC) -> client.c
 * (connections, the per-client agent process, the control calls) ->
 * rings.c (the data path: doorbells, send/receive rings into the NIC
 * model, CQEs and events out to the client) -> remote_mem.c (the NIC's
 * DMA into the client's registered memory) -> main.c (command line,
 * scenario, results). */
#ifndef RNICSIM_EMU_DAEMON_H
#define RNICSIM_EMU_DAEMON_H

#include <ev.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "emu/proto.h"
#include "sim/sim.h"
#include "tools/rnicsim/rnicsim.h"

struct emu_client;

/* How well the pacer kept up with the wall clock (pace.c). */
struct emu_pace_stats {
    uint64_t batches; /* runs of the event loop over the events due */
    uint64_t events;  /* simulator events executed */
    /* per step: wall time at its start - time of its first event, in the
     * log-linear buckets of sim_hist_bucket (counts only: a daemon runs
     * for days, so the samples are not kept) */
    uint64_t late_buckets[64 * 8];
    uint64_t late_n;
    sim_time_t late_max_ps;
    uint64_t behind_batches;  /* batches stopped by the budget with events still due */
    sim_time_t max_behind_ps; /* largest wall - simulated time seen after such a batch */
    double behind_s;          /* wall seconds spent with events overdue */
    uint64_t sleeps, spins;   /* waits in epoll vs busy-waits for a near event */
};

struct emu {
    struct scenario *scn;
    struct world *w;
    struct sim *sim;
    struct ev_loop *loop;
    /* socket */
    char *sock_path, *sock_dir;
    int listen_fd;
    ev_io listen_w;
    /* pacing */
    int timer_fd; /* timerfd (CLOCK_MONOTONIC, absolute): the next event */
    ev_io timer_w;
    ev_signal sigint_w, sigterm_w;
    uint64_t t0_ns;     /* CLOCK_MONOTONIC of simulated time 0 */
    sim_time_t spin_ps; /* busy-wait instead of sleeping when the next event is closer */
    sim_time_t poll_ps; /* keep polling the doorbells this long after activity */
    sim_time_t stop_ps; /* stop here (SIM_TIME_NEVER: until a signal) */
    uint64_t budget_ns; /* longest batch before the loop looks at its sockets again */
    uint64_t last_activity_ns;
    uint64_t batch_deadline_ns;
    bool stopping;
    int stop_signal;
    struct emu_pace_stats stats;
    double wall_start_s;
    /* clients */
    struct emu_client *clients;
    uint64_t clients_served, clients_crashed, protocol_errors;
    uint64_t dma_faults; /* DMA to client memory that failed (unmapped since registration) */
    bool verbose;
};

/* ---------------------------------------------------------------- pace.c */

/* CLOCK_MONOTONIC in ns. */
uint64_t emu_mono_ns(void);
/* The wall clock as simulated time (ps since the daemon started). */
sim_time_t emu_wall_ps(const struct emu *e);
/* Run fn(sim, a, b) as a simulator event at the current wall time: how
 * every input from a client enters the model (in wall-clock order). */
void emu_inject(struct emu *e, sim_cb_fn fn, void *a, void *b);
/* The main loop: returns when stopping (signal, stop time). */
int emu_pace_loop(struct emu *e);
void emu_pace_report(const struct emu *e, FILE *out);

/* ---------------------------------------------------------------- client.c */

int emu_listen(struct emu *e, const char *path, char *why, size_t why_len);
void emu_clients_close_all(struct emu *e);
/* At exit: let every agent tear its client's objects down, free all. */
void emu_clients_free_all(struct emu *e);
/* Before every batch: take what every client wrote into its rings
 * (receive rings have no doorbell, as on hardware). */
void emu_clients_drain(struct emu *e);
/* After every batch: forward CQEs and events, publish queue state, free
 * clients whose agent has finished. */
void emu_after_batch(struct emu *e);

/* ---------------------------------------------------------------- rings.c */

struct emu_cq;
struct emu_qp;
struct emu_srq;

/* Take every WQE the client wrote since the last look into the NIC
 * model's queues (send WQEs are rung); false on a protocol violation
 * (the client is then dropped). */
bool emu_rings_drain(struct emu_client *c);
/* Forward CQEs, fire completion events, publish QP/SRQ state. */
void emu_rings_publish(struct emu_client *c);
/* Take a pending arm request of every CQ of the client. */
void emu_rings_arm(struct emu_client *c);

/* ---------------------------------------------------------------- remote_mem.c */

/* The accessor of MRs registered by client processes (process_vm_readv /
 * writev into the client's address space). */
extern const struct nic_host_mem emu_remote_mem;
/* 0 if [addr, addr+len) of process `pid` is mapped (writable too when
 * `write`), else EFAULT: what pinning the pages would say. */
int emu_check_mapped(pid_t pid, uint64_t addr, uint64_t len, bool write);

/* ---------------------------------------------------------------- main.c */

/* `rnicsimd FILE.yaml [options]` and `rnicsim emulate FILE.yaml [options]`. */
int emulate_main(const char *prog, int argc, char **argv);

#endif /* RNICSIM_EMU_DAEMON_H */
