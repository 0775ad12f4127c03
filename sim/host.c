/* The simulated host: CPU cost model and the wait queues through which
 * parked pollers learn that memory they might read has changed.  Every
 * CPU cost goes through the CPU model of sim/host/cpu.c; the memory model
 * (sim/host/mem.c) is reached through host_dma_wrote / host_dma_numa_delay
 * from the NIC and through <rnicsim/host.h> from programs. */
#include "host.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace.h"
#include "host/cpu.h"
#include "host/mem.h"

/* Defaults.  Posting is split into what delays the post (latency) and
 * what only limits how often a thread can post (occupancy):
 *  - post_send_ps + post_send_wqe_ps: the CPU time of the call (memory
 *    barrier, building the WQE, the doorbell / BlueFlame store).  Fitted
 *    (docs/validation.md row lat-cx4-send-32-m4096) to the one-way 32 B
 *    ib_send_lat of ConnectX-4 EDR back to back, 0.83 us: 60 ns per call +
 *    20 ns per WR leaves the rest of that figure to the NIC, PCIe and wire
 *    model; checked on the other latency rows.
 *  - doorbell_gap_ps: the write-combining store of a doorbell drains to
 *    PCIe before the same core can issue the next one (x86 sfence after
 *    the BlueFlame copy, rdma-core mlx5 post_send).  Fitted to
 *    CALIBRATION.md "one QP, no doorbell batching ~2.6 M writes/s"
 *    (perftest issue 132: ib_write_bw 2.64 Mpps): 1 / 2.64 M = 379 ns
 *    between doorbells of one thread.  With post lists one doorbell covers
 *    many WRs, so the NIC's 133 ns per WQE (7.5 M/s) becomes the limit.
 *  - post_provider: mlx5 (rdma-core providers/mlx5 flushes after every
 *    post, so doorbell_gap_ps applies to all); mlx4 (libmlx4) flushes
 *    only a single BlueFlame-eligible WR and rings an uncached doorbell
 *    for the rest (verbs_shim/post.c post_is_blueflame).
 *  - uc_doorbell_gap_ps: that uncached store's occupancy, estimate: a
 *    posted uncached store is done once the root complex takes it (no
 *    PCIe round trip), half of pcie.mmio_latency (200 ns); no Ivy Bridge
 *    measurement found (docs/huang_mechanisms.md).
 * Other data-path costs are the order of magnitude measured for mlx5
 * userspace verbs (an empty poll ~20-50 ns); each is settable per scenario
 * (host.cpu.*).  memcpy: CALIBRATION.md "Host" row, ~7 GB/s per core. */
void host_cpu_params_default(struct host_cpu_params *p)
{
    p->post_send_ps = 60 * SIM_NS;
    p->post_send_wqe_ps = 20 * SIM_NS;
    p->doorbell_gap_ps = 379 * SIM_NS;
    /* mlx5 (ConnectX-4 and later) gives threads their own BlueFlame
     * registers; libmlx4 (ConnectX-3) posts under one lock per context */
    p->bf_lock_context = false;
    /* rdma-core's mlx5 provider flushes the BlueFlame register after every
     * post (mlx5_post_send: mmio_flush_writes()), so doorbell_gap_ps applies
     * to every post and the uncached store below is unused */
    p->post_provider = HOST_PROVIDER_MLX5;
    p->bf_dedicated = 0; /* with bf_lock_context: rdma-core's libmlx4 locks every QP */
    p->uc_doorbell_gap_ps = 100 * SIM_NS;
    p->post_recv_ps = 80 * SIM_NS;
    p->poll_cq_ps = 30 * SIM_NS;
    p->poll_cqe_ps = 20 * SIM_NS;
    p->control_verb_ps = 2 * SIM_US;
    /* Registration (docs/nic.md "Memory registration"): fitted to one
     * ibv_reg_mr of 256 GB through libfabric's verbs provider taking "more
     * than 20 seconds" (github.com/ofiwg/libfabric issue 4738): 20 s less
     * the NIC commands (nic.cmd_proc per nic.mtt_per_cmd pages), over
     * 67.1 M pages of 4 KiB = 292 ns per page (validate row reg-256g-
     * libfabric; checked on UCX issue 10719 and Mooncake PR 855).
     * Unpinning: Mooncake PR 855 measured deregistration at 0.239x the
     * registration of the same 500 GB (11.754 s vs 49.198 s): 71 ns. */
    p->mr_pin_page_ps = 292 * SIM_NS;
    p->mr_unpin_page_ps = 71 * SIM_NS;
    p->memcpy_bytes_per_s = 7000000000ull;
    p->wakeup_ps = 50 * SIM_NS;
    /* Clock reads and system calls: measured on the development machine
     * (AMD EPYC VM, Linux 6.18, glibc 2.36; loops of 10^6): vDSO
     * clock_gettime(CLOCK_MONOTONIC) 24 ns, rdtsc 9.7 ns, getppid through
     * syscall(2) 275 ns, pthread_mutex_lock + unlock 6.9 ns. */
    p->clock_read_ps = 24 * SIM_NS;
    p->tsc_read_ps = 10 * SIM_NS;
    p->syscall_ps = 275 * SIM_NS;
    p->lock_ps = 7 * SIM_NS;
    /* Management network: estimate.  Kernel TCP between two datacenter
     * hosts takes tens of microseconds per round trip (Xue et al., RIMA,
     * §1: RDMA's latency is ~50x shorter than TCP's; with ~1 us RDMA
     * one-way that is ~50 us round trip), on a 10 GbE management port. */
    p->mgmt_latency_ps = 25 * SIM_US;
    p->mgmt_rate_bps = 10000000000ull;
    p->wakeup_noise = 0; /* none; the calibrated profiles turn it on (docs/noise.md) */
    host_topo_params_default(&p->topo);
    host_mem_params_default(&p->mem);
}

int host_params_check(const struct host_cpu_params *p, char *why, size_t why_len)
{
    if (!noise_preset_is_delay(p->wakeup_noise)) {
        snprintf(why, why_len,
                 "host.cpu.wakeup_noise: '%s' is an interruption source, not a distribution of "
                 "a wakeup (use it as host.os.noise)",
                 noise_preset_name(p->wakeup_noise));
        return -1;
    }
    return host_topo_params_check(&p->topo, why, why_len) ||
                   host_mem_params_check(&p->mem, why, why_len)
               ? -1
               : 0;
}

int host_init(struct host *h, struct sim *sim, uint32_t id, const char *name,
              const struct host_cpu_params *cpu)
{
    memset(h, 0, sizeof(*h));
    h->sim = sim;
    h->id = id;
    snprintf(h->name, sizeof(h->name), "%s", name);
    h->cpu = *cpu;
    sim_waitq_init(&h->relax_wq, "host_relax");
    sim_waitq_init(&h->cqe_wq, "ibv_poll_cq");
    char stream[64];
    snprintf(stream, sizeof(stream), "noise/wakeup/%s", h->name);
    noise_init_preset(&h->wakeup_noise, sim, cpu->wakeup_noise, stream);
    sim_waitq_init(&h->fd_wq, "poll");
    return 0;
}

void host_fd_activity(struct host *h)
{
    if (!sim_waitq_empty(&h->fd_wq))
        sim_waitq_wake_all(h->sim, &h->fd_wq);
}

void host_fini(struct host *h)
{
    host_sched_fini(h);
    host_mem_free(h);
}

void host_dma_wrote(struct host *h, const void *addr, size_t len)
{
    if (h->mem)
        host_mem_dma_write(h->mem, (uintptr_t)addr, len);
}

sim_time_t host_dma_rmw_ps(struct host *h, const void *addr, size_t len)
{
    return h->mem ? host_mem_dma_rmw(h->mem, (uintptr_t)addr, len) : 0;
}

sim_time_t host_dma_numa_delay(struct host *h, const void *addr, size_t len, bool write)
{
    struct host_mem *m = h->mem;
    if (!m || !m->nremote || !len || host_mem_socket_of(m, (uintptr_t)addr) == m->nic_socket)
        return 0;
    const struct host_mem_params *p = &h->cpu.mem;
    sim_time_t now = sim_now(h->sim), *free_ps = &m->link_free_ps[write ? 0 : 1];
    sim_time_t start = *free_ps > now ? *free_ps : now;
    *free_ps = start + sim_bytes_to_ps(len, p->socket_link_bps);
    h->cnt.dma_remote++;
    h->cnt.dma_link_wait_ps += start - now;
    return (start - now) + (write ? p->dma_hop_ps : 2 * p->dma_hop_ps);
}

bool host_mem_is_remote(const struct host *h, const void *addr)
{
    const struct host_mem *m = h->mem;
    return m && m->nremote && host_mem_socket_of(m, (uintptr_t)addr) != m->nic_socket;
}

bool host_mem_huge(const struct host *h, const void *addr, size_t len)
{
    return h && h->mem && host_mem_range_huge(h->mem, (uintptr_t)addr, len);
}

sim_time_t host_mmio_numa_delay(struct host *h)
{
    if (!h->n_remote_threads)
        return 0;
    struct host_thread *t = host_thread_current();
    if (!t || t->host != h || !t->vcpu || t->vcpu->socket == h->cpu.topo.nic_socket)
        return 0;
    return h->cpu.mem.dma_hop_ps;
}

sim_time_t host_remote_line_extra(void)
{
    struct host_thread *t = host_thread_current();
    if (!t || !t->host->n_remote_threads || !t->vcpu ||
        t->vcpu->socket == t->host->cpu.topo.nic_socket)
        return 0;
    const struct host_mem_params *p = &t->host->cpu.mem;
    return p->remote_cache_ps > p->llc_ps ? p->remote_cache_ps - p->llc_ps : 0;
}

void host_dma_landed(struct host *h)
{
    h->dma_writes_landed++;
    h->activity_gen++;
    if (!sim_waitq_empty(&h->relax_wq))
        sim_waitq_wake_all(h->sim, &h->relax_wq);
}

void host_cqe_landed(struct host *h)
{
    h->cqes_landed++;
    h->activity_gen++;
    if (!sim_waitq_empty(&h->cqe_wq))
        sim_waitq_wake_all(h->sim, &h->cqe_wq);
    if (!sim_waitq_empty(&h->relax_wq))
        sim_waitq_wake_all(h->sim, &h->relax_wq);
}

struct host_thread *host_thread_current(void)
{
    struct sim_proc *p = sim_proc_current();
    return p ? (struct host_thread *)sim_proc_user(p) : NULL;
}

struct host *host_of_current(void)
{
    struct host_thread *t = host_thread_current();
    return t ? t->host : NULL;
}

struct spawn_ctx {
    struct host_thread thread;
    sim_proc_fn fn;
    void *arg;
};

/* A thread runs only on its hardware thread: it may have been placed
 * behind others (time slices). */
static void spawn_trampoline(void *arg)
{
    struct spawn_ctx *c = arg;
    host_sched_acquire(&c->thread);
    c->fn(c->arg);
    host_sched_exit(&c->thread);
}

struct sim_proc *host_spawn(struct host *h, const char *name, sim_proc_fn fn, void *arg,
                            void *program, size_t stack_bytes)
{
    return host_spawn_on(h, name, fn, arg, program, stack_bytes, -1, -1);
}

struct sim_proc *host_spawn_on(struct host *h, const char *name, sim_proc_fn fn, void *arg,
                               void *program, size_t stack_bytes, int cpu, int socket)
{
    if (host_sched_setup(h)) {
        errno = ENOMEM;
        return NULL;
    }
    if (cpu >= (int)h->nvcpus || socket >= (int)h->cpu.topo.sockets) {
        errno = EINVAL;
        return NULL;
    }
    /* The context lives as long as the process: it is freed by the
     * simulator together with the process (sim_proc_set_user_owned). */
    struct spawn_ctx *c = calloc(1, sizeof(*c));
    if (!c) {
        errno = ENOMEM;
        return NULL;
    }
    c->thread.host = h;
    c->thread.program = program;
    c->thread.tl_index = h->n_threads++;
    c->thread.next_key = c->thread.horizon_key = UINT64_MAX;
    c->thread.bind_socket = -1;
    sim_waitq_init(&c->thread.cpu_wq, "cpu");
    c->fn = fn;
    c->arg = arg;
    struct sim_proc *p = sim_proc_create(h->sim, name, spawn_trampoline, c, stack_bytes);
    if (!p) {
        free(c);
        return NULL;
    }
    c->thread.proc = p;
    sim_proc_set_user(p, &c->thread);
    sim_proc_set_user_owned(p, c);
    if (sim_trace_on(h->sim, TRACE_G_HOST)) /* names the thread's track */
        sim_trace(h->sim, &(struct trace_rec){.kind = TRACE_INSTANT,
                                              .track = TRK_THREAD,
                                              .node = h->id,
                                              .unit = c->thread.tl_index,
                                              .t0_ps = sim_now(h->sim),
                                              .where = sim_proc_name(p)});
    sim_proc_set_host(p, h->id);
    host_sched_place(&c->thread, cpu, socket); /* checked above: cannot fail */
    return p;
}

void host_note_call(void)
{
    struct host_thread *t = host_thread_current();
    if (!t)
        return;
    t->other_calls++;
    t->entries++;
    t->next_key = t->horizon_key = UINT64_MAX; /* the call may schedule events */
    if (t->owed_ps)
        host_charge(0);
    if (t->on_enter)
        t->on_enter(t);
}

void host_charge(sim_time_t ps)
{
    struct host_thread *t = host_thread_current();
    if (!t)
        return;
    ps += t->owed_ps;
    t->owed_ps = 0;
    t->entries++;
    t->host->activity_gen++;
    t->own_gen++;
    t->quiet = false;
    if (!sim_waitq_empty(&t->host->relax_wq))
        sim_waitq_wake_all(t->host->sim, &t->host->relax_wq);
    if (ps)
        host_sched_run(t, ps, true);
}

void host_charge_private(sim_time_t ps)
{
    struct host_thread *t = host_thread_current();
    if (!t)
        return;
    ps += t->owed_ps;
    t->owed_ps = 0;
    t->entries++;
    if (ps)
        host_sched_run(t, ps, true);
}

/* host_charge_soon pays at the latest after this much owed time. */
#define HOST_OWED_MAX_PS (10 * SIM_US)

void host_charge_soon(sim_time_t ps)
{
    struct host_thread *t = host_thread_current();
    if (!t)
        return;
    t->owed_ps += ps;
    t->entries++;
    struct host *h = t->host;
    struct sim *sim = h->sim;
    /* >=: an event at exactly now + owed must run before this thread, as
     * it would if the thread had slept (its wake-up would queue after).
     * Paying early is always exact; the cap bounds how long a loop of such
     * calls runs without giving the CPU back (the spin watchdog watches
     * context switches). */
    sim_time_t until = sim_now(sim) + t->owed_ps;
    if (t->owed_ps >= HOST_OWED_MAX_PS) {
        host_charge(0);
        return;
    }
    /* Both bounds are cached while no event was scheduled and no other
     * process ran (a clock loop asks at every read; a cancelled event only
     * makes a cached bound early, and paying early is exact). */
    uint64_t key = sim_switches(sim) + sim_scheduled(sim);
    if (t->next_key != key) {
        t->next_ps = sim_next_event_time(sim);
        t->next_key = key;
    }
    if (until < t->next_ps)
        return;
    if (h->lookahead_ps) {
        /* the next events may be other hosts' processes: their actions
         * reach this host lookahead_ps later at the earliest */
        if (t->horizon_key != key) {
            t->horizon_ps = sim_horizon(sim, h->id, h->lookahead_ps);
            t->horizon_key = key;
        }
        if (until < t->horizon_ps)
            return;
    }
    host_charge(0);
}

sim_time_t host_now_ps(void)
{
    struct sim_proc *p = sim_proc_current();
    if (!p)
        return 0;
    struct host_thread *t = sim_proc_user(p);
    return sim_now(sim_proc_sim(p)) + (t ? t->owed_ps : 0);
}

static void thread_observed(struct host_thread *t)
{
    t->seen_gen = t->host->activity_gen;
    t->own_gen = 0;
}

/* After a park the thread starts a new turn of whatever loop it is in: the
 * CQs it polled empty before say nothing about the next turn (something
 * landed, possibly in a CQ it polls later in the loop). */
static void thread_new_turn(struct host_thread *t)
{
    thread_observed(t);
    t->empty_poll_mark = 0;
    t->n_empty_cqs = 0;
}

void host_observed(void)
{
    struct host_thread *t = host_thread_current();
    if (t)
        thread_observed(t);
}

const char *const host_post_provider_names[] = {"mlx5", "mlx4", "mlx4-ofed", NULL};

/* The running thread's doorbell store: wait until its previous one has
 * drained, then occupy the path for gap_ps. */
static void doorbell_store(sim_time_t gap_ps)
{
    struct host_thread *t = host_thread_current();
    if (!t)
        return;
    sim_time_t now = sim_now(t->host->sim);
    if (now < t->db_free_ps) {
        sim_proc_sleep(t->db_free_ps - now); /* spinning in the store fence */
        now = t->db_free_ps;
    }
    t->db_free_ps = now + gap_ps;
}

void host_doorbell(void)
{
    struct host_thread *t = host_thread_current();
    if (!t || !t->host->cpu.doorbell_gap_ps)
        return;
    doorbell_store(t->host->cpu.doorbell_gap_ps);
}

void host_doorbell_uc(void)
{
    struct host_thread *t = host_thread_current();
    if (!t || (!t->host->cpu.uc_doorbell_gap_ps && !t->host->cpu.doorbell_gap_ps))
        return;
    doorbell_store(t->host->cpu.uc_doorbell_gap_ps);
}

void host_doorbell_locked(sim_time_t *lock_free_ps, uint32_t *last_core)
{
    struct host_thread *t = host_thread_current();
    if (!t || !t->host->cpu.doorbell_gap_ps)
        return;
    const struct host_cpu_params *cp = &t->host->cpu;
    sim_time_t now = sim_now(t->host->sim);
    sim_time_t start = t->db_free_ps > *lock_free_ps ? t->db_free_ps : *lock_free_ps;
    if (start < now)
        start = now;
    uint32_t core = t->vcpu ? t->vcpu->core + 1 : 1;
    sim_time_t hold = cp->doorbell_gap_ps;
    if (*last_core && *last_core != core) /* the lock's line moves to this core */
        hold = sim_time_add(hold, cp->mem.c2c_ps);
    /* taken in the order of asking (a ticket): reserved before waiting */
    *last_core = core;
    t->db_free_ps = *lock_free_ps = sim_time_add(start, hold);
    if (now < start)
        sim_proc_sleep(start - now); /* spinning on the lock */
}

void host_trace_call(struct host_thread *t, sim_time_t t0_ps, sim_time_t t1_ps, const char *call,
                     struct trace_rec *r)
{
    struct host *h = t->host;
    r->track = TRK_THREAD;
    r->node = h->id;
    r->unit = t->tl_index;
    r->where = call;
    sim_trace_span(h->sim, r, t0_ps, t1_ps - t0_ps);
}

void host_park(const char *why)
{
    struct host_thread *t = host_thread_current();
    if (!t)
        return;
    if (t->owed_ps)
        host_charge(0);
    if (t->host->activity_gen - t->seen_gen > t->own_gen) {
        /* Something landed (or a sibling ran) since this thread last looked,
         * e.g. during the charge of its last poll: nothing would wake it for
         * that, so let it look again first. */
        thread_new_turn(t);
        return;
    }
    snprintf(t->why, sizeof(t->why), "%s", why);
    /* This thread may have written memory a sibling thread spins on
     * (unless it only waited since it last woke: t->quiet). */
    if (!t->quiet && !sim_waitq_empty(&t->host->relax_wq))
        sim_waitq_wake_all(t->host->sim, &t->host->relax_wq);
    sim_time_t t0 = sim_now(t->host->sim);
    host_sched_spin(t, true); /* spinning: it keeps its hardware thread busy */
    sim_waitq_wait(&t->host->relax_wq, t->why);
    host_sched_spin(t, false);
    thread_new_turn(t);
    t->quiet = true;
    /* it notices on its CPU: after its time slice comes, and any OS
     * interruption ends; reading the line across sockets costs more */
    host_sched_acquire(t);
    sim_time_t wake =
        noise_apply(&t->host->wakeup_noise, t->host->cpu.wakeup_ps) + host_remote_line_extra();
    if (wake)
        host_sched_run(t, wake, true);
    if (sim_trace_on(t->host->sim, TRACE_G_HOST)) /* parked, then woke up */
        host_trace_call(t, t0, sim_now(t->host->sim), t->why, &(struct trace_rec){0});
    if (t->on_enter)
        t->on_enter(t);
}

void host_block_begin(void)
{
    struct host_thread *t = host_thread_current();
    if (!t || t->blocked)
        return;
    t->blocked = true;
    host_sched_block(t);
}

void host_block_end(void)
{
    struct host_thread *t = host_thread_current();
    if (!t || !t->blocked)
        return;
    t->blocked = false;
    host_sched_unblock(t);
    host_sched_acquire(t);
}
