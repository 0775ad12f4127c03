/* The CPUs of a host (docs/host.md "CPUs"): sockets of cores, cores of one
 * or two hardware threads, and the threads of the programs placed on them.
 * Internal to the host model; programs see it through <rnicsim/host.h>
 * (host_pin_cpu, host_cpus, ...), verbs and the host_* calls through
 * host_charge / host_park (sim/host.c). */
#ifndef RNICSIM_HOST_CPU_H
#define RNICSIM_HOST_CPU_H

#include "../host.h"

/* One hardware thread (what Linux calls a CPU). */
struct host_vcpu {
    struct host *host;
    uint32_t id;   /* Linux numbering: smt * (sockets x cores) + socket x cores + core */
    uint32_t core; /* physical core, host-wide: socket x cores_per_socket + core */
    uint32_t socket;
    struct host_vcpu *sibling;             /* the other hardware thread of the core, or NULL */
    struct host_thread *cur;               /* the thread holding it (NULL: idle) */
    struct host_thread *rq_head, *rq_tail; /* READY threads, in turn order */
    uint32_t n_ready;
    uint32_t n_parked;         /* of cur and the READY threads: spinning in host_park */
    uint32_t n_placed;         /* live threads placed here (blocked ones too): placement load */
    sim_time_t slice_start_ps; /* `cur` got it then (its switch included) */
    sim_time_t switch_done_ps; /* the context switch onto `cur` ends then */
    struct sim_event slice_ev;
    struct noise os_noise; /* OS interruptions of this CPU (host.os.noise) */
};

void host_topo_params_default(struct host_topo_params *p);
int host_topo_params_check(const struct host_topo_params *p, char *why, size_t why_len);

/* Hardware threads of a host with these parameters. */
static inline uint32_t host_topo_ncpus(const struct host_topo_params *p)
{
    return p->sockets * p->cores_per_socket * p->threads_per_core;
}
/* Socket / core of hardware thread `cpu` (no range check). */
static inline uint32_t host_topo_cpu_socket(const struct host_topo_params *p, uint32_t cpu)
{
    return (cpu % (p->sockets * p->cores_per_socket)) / p->cores_per_socket;
}
static inline uint32_t host_topo_cpu_core(const struct host_topo_params *p, uint32_t cpu)
{
    return cpu % (p->sockets * p->cores_per_socket);
}

/* Create the hardware threads (on the host's first thread). ENOMEM. */
int host_sched_setup(struct host *h);
void host_sched_fini(struct host *h);
/* Place a new thread: on hardware thread `cpu` (pinned), or chosen
 * (cpu < 0) among those of `socket` (< 0: all): an idle core on the NIC's
 * socket, then an idle core elsewhere, then an idle hyper-thread, then the
 * hardware thread with the fewest threads.  It becomes runnable there.
 * 0, or EINVAL for a cpu / socket the host does not have. */
int host_sched_place(struct host_thread *t, int cpu, int socket);
/* The thread finished / blocks in the kernel / is woken from it. */
void host_sched_exit(struct host_thread *t);
void host_sched_block(struct host_thread *t);
void host_sched_unblock(struct host_thread *t);
/* Pin the running thread to hardware thread `cpu` (moving it there).
 * 0, or EINVAL. */
int host_sched_pin(struct host_thread *t, int cpu);
/* `work_ps` of CPU work by the running thread, at the speed of one core
 * alone; `stretch`: the work slows while the sibling hyper-thread is busy
 * (instructions) or not (waiting for the memory system). */
void host_sched_run(struct host_thread *t, sim_time_t work_ps, bool stretch);
/* Wait until the thread holds its hardware thread again and the OS is not
 * interrupting it (a spinner that was woken notices only then). */
void host_sched_acquire(struct host_thread *t);
/* host_park: the thread starts / stops spinning. */
void host_sched_spin(struct host_thread *t, bool spinning);

#endif /* RNICSIM_HOST_CPU_H */
