/* The CPUs of a host: sockets, cores, hyper-threads, the threads placed on
 * them, time slices and OS interruptions (docs/host.md "CPUs").
 *
 * Every CPU cost of a thread - verbs calls, host_compute, host_memcpy,
 * host_touch, a spinning poller noticing new data - is work measured at
 * the speed of one core running one thread, and goes through
 * host_sched_run, which turns it into elapsed time:
 *
 *  - Hyper-threads.  While the other hardware thread of the core is busy
 *    (it holds a thread that computes or spins), work runs at
 *    host.cpu.ht_share_permil of full speed.  A thread computing when its
 *    sibling's state changes is re-planned exactly: the work done so far
 *    at the old speed is kept and the rest finishes at the new one
 *    (sim_proc_resched moves its wake-up).
 *  - Time slices.  Several runnable threads on one hardware thread take
 *    turns, as under Linux CFS: each turn lasts max(sched_latency / n,
 *    sched_min_granularity) for n runnable threads, and a switch costs
 *    ctx_switch.  A spinning thread (host_park) is runnable: it burns its
 *    turns.  A thread woken from a blocking wait (host_block_end)
 *    preempts the running one (CFS wakeup preemption: a sleeper's
 *    vruntime is behind), which takes the next turn.
 *  - OS interruptions (host.os.noise, a periodic sim/noise source per
 *    hardware thread): work stops during them, and a spinner woken during
 *    one notices at its end.
 *
 * Runnable means: holding the hardware thread (ON) or waiting for it
 * (READY).  A thread blocked in the kernel (host_block_begin) or finished
 * is OFF and leaves its hardware thread to the others.  Code of a program
 * runs only while its thread is ON: every path that resumes a thread
 * (a charge, a park, a spawn) first waits for its hardware thread.
 *
 * Cost: with one thread per core nothing of this runs beyond a few
 * comparisons; a charge is still one sim_proc_sleep.
 *
 * Defaults (host_topo_params_default), the host of the RB2 testbed (Sun
 * et al.: two 12-core 2.3 GHz Xeon Gold 5118, hyper-threading on):
 *  - sockets 2, cores_per_socket 12, threads_per_core 2: Intel ARK, Xeon
 *    Gold 5118; the NIC on socket 0 (the paper's NUMA-aware runs bind to
 *    "the NUMA node to which the RNIC belongs").
 *  - ht_share_permil 650: two busy hyper-threads of a core together do
 *    1.3x the work of one thread alone ("performance gains of up to 30 %
 *    on common server application benchmarks", Intel, "How to Determine
 *    the Effectiveness of Hyper-Threading Technology with an
 *    Application", citing Intel Technology Journal 6(1)), each 0.65 of a
 *    core; the Huang et al. spec expects 0.5-0.65.
 *  - sched_latency 24 ms, sched_min_granularity 3 ms: Linux CFS defaults
 *    (kernel/sched/fair.c: 6 ms and 0.75 ms, scaled by 1 + log2(CPUs),
 *    at most 8 CPUs, SCHED_TUNABLESCALING_LOG: x4 on any server).
 *  - ctx_switch 2 us: estimate; Li, Ding and Shen ("Quantifying the cost
 *    of context switch", ExpCS'07) measured 3.8 us direct cost on a 2 GHz
 *    Xeon, and faster cores halve it.
 *  - os_noise none: the calibrated latencies (poll-wakeup noise,
 *    docs/noise.md) come from tuned machines; os-tick-250hz turns the
 *    periodic tick on. */
#include "cpu.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../trace.h"

void host_topo_params_default(struct host_topo_params *p)
{
    p->sockets = 2;
    p->cores_per_socket = 12;
    p->threads_per_core = 2;
    p->nic_socket = 0;
    p->ht_share_permil = 650;
    p->sched_latency_ps = 24 * SIM_MS;
    p->sched_min_gran_ps = 3 * SIM_MS;
    p->ctx_switch_ps = 2 * SIM_US;
    p->os_noise = 0;
}

int host_topo_params_check(const struct host_topo_params *p, char *why, size_t why_len)
{
    if (p->sockets < 1 || p->sockets > HOST_MAX_SOCKETS)
        snprintf(why, why_len, "host.sockets: %u is not 1..%u", p->sockets, HOST_MAX_SOCKETS);
    else if (p->cores_per_socket < 1 || p->sockets * p->cores_per_socket > HOST_MAX_CORES)
        snprintf(why, why_len, "host.cores: %u per socket x %u sockets is not 1..%u cores",
                 p->cores_per_socket, p->sockets, HOST_MAX_CORES);
    else if (p->threads_per_core < 1 || p->threads_per_core > 2)
        snprintf(why, why_len, "host.threads_per_core: %u is not 1 or 2", p->threads_per_core);
    else if (p->nic_socket >= p->sockets)
        snprintf(why, why_len, "host.nic_socket: %u, but the host has sockets 0..%u", p->nic_socket,
                 p->sockets - 1);
    else if (p->ht_share_permil < 1 || p->ht_share_permil > 1000)
        snprintf(why, why_len, "host.cpu.ht_share_permil: %u is not 1..1000", p->ht_share_permil);
    else if (!p->sched_min_gran_ps)
        snprintf(why, why_len, "host.os.sched_min_granularity: must be more than 0");
    else if (p->ctx_switch_ps >= p->sched_min_gran_ps)
        snprintf(why, why_len,
                 "host.os.ctx_switch: must be shorter than host.os.sched_min_granularity");
    else if (p->os_noise >= noise_presets_count ||
             (p->os_noise && noise_preset_is_delay(p->os_noise)))
        snprintf(why, why_len,
                 "host.os.noise: '%s' is not an interruption source (os-tick-250hz, "
                 "os-tick-1000hz or none)",
                 noise_preset_name(p->os_noise));
    else
        return 0;
    return -1;
}

/* ---------------------------------------------------------------- setup */

static void slice_ev_fn(struct sim *sim, struct sim_event *ev);

int host_sched_setup(struct host *h)
{
    if (h->vcpus)
        return 0;
    const struct host_topo_params *p = &h->cpu.topo;
    uint32_t n = host_topo_ncpus(p), ncores = p->sockets * p->cores_per_socket;
    struct host_vcpu *v = calloc(n, sizeof(*v));
    if (!v)
        return ENOMEM;
    for (uint32_t i = 0; i < n; i++) {
        v[i].host = h;
        v[i].id = i;
        v[i].core = host_topo_cpu_core(p, i);
        v[i].socket = host_topo_cpu_socket(p, i);
        v[i].sibling = p->threads_per_core == 2 ? &v[(i + ncores) % n] : NULL;
        sim_event_init(&v[i].slice_ev, slice_ev_fn, &v[i], "cpu slice");
        char stream[64];
        snprintf(stream, sizeof(stream), "noise/os/%s.cpu%u", h->name, i);
        noise_init_preset(&v[i].os_noise, h->sim, p->os_noise, stream);
    }
    h->vcpus = v;
    h->nvcpus = n;
    return 0;
}

void host_sched_fini(struct host *h)
{
    for (uint32_t i = 0; i < h->nvcpus; i++)
        sim_cancel(h->sim, &h->vcpus[i].slice_ev); /* a run stopped mid-slice */
    free(h->vcpus);
    h->vcpus = NULL;
    h->nvcpus = 0;
}

/* ---------------------------------------------------------------- speed and planning */

static bool vcpu_busy(const struct host_vcpu *v)
{
    return v && v->cur;
}

static uint32_t thread_rate(const struct host_thread *t)
{
    const struct host_vcpu *v = t->vcpu;
    return t->stretch && vcpu_busy(v->sibling) ? t->host->cpu.topo.ht_share_permil : 1000;
}

/* A computation segment from now at the current speed: sets seg_*,
 * returns its end. */
static sim_time_t seg_plan(struct host_thread *t, sim_time_t now)
{
    struct host_vcpu *v = t->vcpu;
    t->rate_permil = thread_rate(t);
    sim_time_t busy = t->rate_permil == 1000
                          ? t->work_left_ps
                          : (t->work_left_ps * 1000 + t->rate_permil - 1) / t->rate_permil;
    t->seg_start_ps = now;
    t->seg_end_ps = noise_busy_end(&v->os_noise, now, busy);
    return t->seg_end_ps;
}

/* Take off work_left what the segment did up to now. */
static void seg_account(struct host_thread *t, sim_time_t now)
{
    struct host *h = t->host;
    sim_time_t done, el = now - t->seg_start_ps;
    sim_time_t stalled = noise_stalled_ps(&t->vcpu->os_noise, t->seg_start_ps, now);
    if (now >= t->seg_end_ps) {
        done = t->work_left_ps;
    } else {
        done = (el - stalled) * t->rate_permil / 1000;
        if (done > t->work_left_ps)
            done = t->work_left_ps;
    }
    h->cnt.os_stalls_ps += stalled;
    if (t->rate_permil != 1000)
        h->cnt.ht_shared_ps += done;
    t->work_left_ps -= done;
    t->seg_start_ps = now;
}

/* The speed of a computing thread may have changed: re-plan it. */
static void thread_replan(struct host_thread *t)
{
    if (!t || !t->charging)
        return;
    sim_time_t now = sim_now(t->host->sim);
    seg_account(t, now);
    sim_proc_resched(t->proc, seg_plan(t, now));
}

/* v went busy <-> idle: its sibling's computation changes speed. */
static void vcpu_busy_changed(struct host_vcpu *v)
{
    if (v->sibling)
        thread_replan(v->sibling->cur);
}

/* ---------------------------------------------------------------- turns */

static void rq_push(struct host_vcpu *v, struct host_thread *t, bool front)
{
    t->cpu_state = HOST_CPU_READY;
    if (front) {
        t->rq_next = v->rq_head;
        v->rq_head = t;
        if (!v->rq_tail)
            v->rq_tail = t;
    } else {
        t->rq_next = NULL;
        if (v->rq_tail)
            v->rq_tail->rq_next = t;
        else
            v->rq_head = t;
        v->rq_tail = t;
    }
    v->n_ready++;
}

static struct host_thread *rq_pop(struct host_vcpu *v)
{
    struct host_thread *t = v->rq_head;
    if (!t)
        return NULL;
    v->rq_head = t->rq_next;
    if (!v->rq_head)
        v->rq_tail = NULL;
    t->rq_next = NULL;
    v->n_ready--;
    return t;
}

static void rq_remove(struct host_vcpu *v, struct host_thread *t)
{
    struct host_thread **pp = &v->rq_head, *prev = NULL;
    while (*pp && *pp != t) {
        prev = *pp;
        pp = &(*pp)->rq_next;
    }
    if (!*pp)
        return;
    *pp = t->rq_next;
    if (v->rq_tail == t)
        v->rq_tail = prev;
    t->rq_next = NULL;
    v->n_ready--;
}

/* Turns matter while a READY thread waits and not every runnable thread
 * is spinning (rotating among spinners changes nothing; without this a
 * run whose threads all wait forever would never be seen as deadlocked). */
static bool turns_needed(const struct host_vcpu *v)
{
    return v->n_ready > 0 && v->n_parked < v->n_ready + 1;
}

/* The holder's turn ends after max(sched_latency / n, min_granularity)
 * for the n runnable threads of now (CFS recomputes the ideal runtime as
 * threads come and go). */
static sim_time_t slice_end(const struct host_vcpu *v)
{
    const struct host_topo_params *p = &v->host->cpu.topo;
    sim_time_t slice = p->sched_latency_ps / (v->n_ready + 1);
    if (slice < p->sched_min_gran_ps)
        slice = p->sched_min_gran_ps;
    return v->slice_start_ps + slice;
}

/* Keep the turn timer pending exactly while turns are needed. */
static void turns_update(struct host_vcpu *v)
{
    struct sim *sim = v->host->sim;
    if (v->cur && turns_needed(v)) {
        sim_time_t at = slice_end(v), now = sim_now(sim);
        at = at > now ? at : now;
        if (!sim_event_pending(&v->slice_ev) || v->slice_ev.time != at)
            sim_schedule_at(sim, &v->slice_ev, at);
    } else if (sim_event_pending(&v->slice_ev)) {
        sim_cancel(sim, &v->slice_ev);
    }
}

static void slice_start(struct host_vcpu *v, sim_time_t now)
{
    v->slice_start_ps = now;
    turns_update(v);
}

/* The first READY thread takes v (whose holder has been queued or has
 * left); none: v stays idle. */
static void take_head(struct host_vcpu *v, sim_time_t now)
{
    struct host_thread *n = rq_pop(v);
    v->cur = n;
    if (!n) {
        if (sim_event_pending(&v->slice_ev))
            sim_cancel(v->host->sim, &v->slice_ev);
        return;
    }
    n->cpu_state = HOST_CPU_ON;
    v->switch_done_ps = now + v->host->cpu.topo.ctx_switch_ps;
    v->host->cnt.ctx_switches++;
    slice_start(v, now);
    if (!sim_waitq_empty(&n->cpu_wq))
        sim_waitq_wake_all(v->host->sim, &n->cpu_wq);
}

/* Take v from its holder, which waits for a later turn: at the back (its
 * slice is over) or at the front (a woken thread preempts it).  A holder
 * that was computing is woken now to account the work it did. */
static void vcpu_preempt(struct host_vcpu *v, bool to_front, sim_time_t now)
{
    struct host_thread *t = v->cur;
    v->cur = NULL;
    rq_push(v, t, to_front);
    if (t->charging)
        sim_proc_resched(t->proc, now);
}

/* The slice of v's holder is over: the next thread's turn (v stays busy,
 * so the sibling's speed does not change). */
static void slice_ev_fn(struct sim *sim, struct sim_event *ev)
{
    struct host_vcpu *v = ev->ctx;
    sim_time_t now = sim_now(sim);
    if (!v->cur || !turns_needed(v))
        return;
    if (now < slice_end(v)) {
        sim_schedule_at(sim, &v->slice_ev, slice_end(v));
        return;
    }
    vcpu_preempt(v, false, now);
    take_head(v, now);
}

/* t becomes runnable on its hardware thread: takes it if idle; preempts
 * the holder if `preempt` (a woken sleeper); else waits its turn. */
static void make_runnable(struct host_thread *t, bool preempt, bool switch_cost)
{
    struct host_vcpu *v = t->vcpu;
    sim_time_t now = sim_now(t->host->sim);
    if (t->parked)
        v->n_parked++;
    if (!v->cur) {
        v->cur = t;
        t->cpu_state = HOST_CPU_ON;
        v->switch_done_ps = switch_cost ? now + t->host->cpu.topo.ctx_switch_ps : now;
        slice_start(v, now);
        vcpu_busy_changed(v);
    } else if (preempt) {
        vcpu_preempt(v, true, now);
        rq_push(v, t, true);
        take_head(v, now); /* t */
    } else {
        rq_push(v, t, false);
        turns_update(v);
    }
}

/* t leaves its hardware thread (blocks, finishes or moves). */
static void leave_cpu(struct host_thread *t)
{
    struct host_vcpu *v = t->vcpu;
    if (t->parked && t->cpu_state != HOST_CPU_OFF)
        v->n_parked--;
    if (t->cpu_state == HOST_CPU_READY) {
        rq_remove(v, t);
        turns_update(v);
    } else if (t->cpu_state == HOST_CPU_ON) {
        take_head(v, sim_now(t->host->sim));
        if (!v->cur)
            vcpu_busy_changed(v);
    }
    t->cpu_state = HOST_CPU_OFF;
}

/* ---------------------------------------------------------------- placement */

/* A thread comes to / leaves v; the host counts its threads away from the
 * NIC's socket (none: the NUMA paths need not look at the thread). */
static void vcpu_place(struct host_vcpu *v, int d)
{
    v->n_placed += (uint32_t)d;
    if (v->socket != v->host->cpu.topo.nic_socket)
        v->host->n_remote_threads += (uint32_t)d;
}

/* Lower is better: an idle core on the NIC's socket, an idle core, an
 * idle hyper-thread (NIC's socket first), then the least loaded. */
static uint64_t place_score(const struct host_vcpu *v, uint32_t nic_socket)
{
    uint64_t tier;
    if (v->n_placed == 0 && (!v->sibling || v->sibling->n_placed == 0))
        tier = v->socket == nic_socket ? 0 : 1;
    else if (v->n_placed == 0)
        tier = v->socket == nic_socket ? 2 : 3;
    else
        tier = 4 + 2 * (uint64_t)v->n_placed + (v->socket != nic_socket);
    return tier << 32 | v->id;
}

int host_sched_place(struct host_thread *t, int cpu, int socket)
{
    struct host *h = t->host;
    if (host_sched_setup(h))
        return ENOMEM;
    const struct host_topo_params *p = &h->cpu.topo;
    if (cpu >= (int)h->nvcpus || socket >= (int)p->sockets)
        return EINVAL;
    t->bind_socket = socket;
    struct host_vcpu *best = NULL;
    if (cpu >= 0) {
        best = &h->vcpus[cpu];
        t->pinned = true;
    } else {
        uint64_t bs = UINT64_MAX;
        for (uint32_t i = 0; i < h->nvcpus; i++) {
            struct host_vcpu *v = &h->vcpus[i];
            if (socket >= 0 && v->socket != (uint32_t)socket)
                continue;
            uint64_t s = place_score(v, p->nic_socket);
            if (s < bs) {
                bs = s;
                best = v;
            }
        }
    }
    if (!best)
        return EINVAL; /* no CPU on that socket (cannot happen: sockets have cores) */
    t->vcpu = best;
    vcpu_place(best, 1);
    snprintf(t->cpu_why, sizeof(t->cpu_why), "runnable, waiting for CPU %u (time-sliced)",
             best->id);
    make_runnable(t, false, false);
    return 0;
}

void host_sched_exit(struct host_thread *t)
{
    if (!t->vcpu)
        return;
    leave_cpu(t);
    vcpu_place(t->vcpu, -1);
}

void host_sched_block(struct host_thread *t)
{
    if (t->vcpu && t->cpu_state != HOST_CPU_OFF)
        leave_cpu(t);
}

void host_sched_unblock(struct host_thread *t)
{
    if (t->vcpu && t->cpu_state == HOST_CPU_OFF)
        make_runnable(t, true, false);
}

int host_sched_pin(struct host_thread *t, int cpu)
{
    struct host *h = t->host;
    if (cpu < 0 || (uint32_t)cpu >= h->nvcpus || !t->vcpu)
        return EINVAL;
    t->pinned = true;
    struct host_vcpu *to = &h->vcpus[cpu];
    if (to == t->vcpu)
        return 0;
    leave_cpu(t);
    vcpu_place(t->vcpu, -1);
    t->vcpu = to;
    vcpu_place(to, 1);
    snprintf(t->cpu_why, sizeof(t->cpu_why), "runnable, waiting for CPU %u (time-sliced)", to->id);
    make_runnable(t, false, true); /* a migration costs a switch */
    host_sched_acquire(t);
    return 0;
}

/* ---------------------------------------------------------------- running */

static void wait_turn(struct host_thread *t)
{
    struct host *h = t->host;
    for (;;) {
        if (t->cpu_state != HOST_CPU_ON) {
            sim_time_t t0 = sim_now(h->sim);
            h->cnt.slice_waits++;
            while (t->cpu_state != HOST_CPU_ON)
                sim_waitq_wait(&t->cpu_wq, t->cpu_why);
            h->cnt.slice_wait_ps += sim_now(h->sim) - t0;
            if (sim_trace_on(h->sim, TRACE_G_HOST)) /* the timeline's thread track */
                host_trace_call(t, t0, sim_now(h->sim), t->cpu_why, &(struct trace_rec){0});
            continue;
        }
        sim_time_t now = sim_now(h->sim);
        if (now < t->vcpu->switch_done_ps) {
            sim_proc_sleep(t->vcpu->switch_done_ps - now);
            continue; /* a woken thread may have preempted it meanwhile */
        }
        return;
    }
}

void host_sched_acquire(struct host_thread *t)
{
    if (!t->vcpu)
        return;
    for (;;) {
        wait_turn(t);
        sim_time_t now = sim_now(t->host->sim), r = noise_resume(&t->vcpu->os_noise, now);
        if (r == now)
            return;
        t->host->cnt.os_stalls_ps += r - now;
        sim_proc_sleep(r - now);
        if (sim_trace_on(t->host->sim, TRACE_G_HOST))
            host_trace_call(t, now, r, "OS interruption (host.os.noise)", &(struct trace_rec){0});
    }
}

void host_sched_run(struct host_thread *t, sim_time_t work_ps, bool stretch)
{
    if (!work_ps)
        return;
    if (!t->vcpu) { /* no CPU model (not placed): plain time */
        sim_proc_sleep(work_ps);
        return;
    }
    struct host *h = t->host;
    t->work_left_ps = work_ps;
    t->stretch = stretch;
    struct host_vcpu *v = t->vcpu;
    sim_time_t now = sim_now(h->sim);
    if (t->cpu_state == HOST_CPU_ON && now >= v->switch_done_ps && !v->n_ready &&
        !noise_periodic(&v->os_noise) && !(stretch && vcpu_busy(v->sibling))) {
        /* alone on a core: the work takes its time, unless the sibling
         * wakes meanwhile (thread_replan moves the wake-up) */
        t->rate_permil = 1000;
        t->seg_start_ps = now;
        t->seg_end_ps = now + work_ps;
        t->charging = true;
        sim_proc_sleep(work_ps);
        t->charging = false;
        if (sim_now(h->sim) >= t->seg_end_ps)
            return;
        seg_account(t, sim_now(h->sim));
    }
    while (t->work_left_ps) {
        wait_turn(t);
        now = sim_now(h->sim);
        sim_time_t end = seg_plan(t, now);
        t->charging = true;
        sim_proc_sleep(end - now);
        t->charging = false;
        seg_account(t, sim_now(h->sim));
    }
}

void host_sched_spin(struct host_thread *t, bool spinning)
{
    if (t->parked == spinning)
        return;
    t->parked = spinning;
    struct host_vcpu *v = t->vcpu;
    if (!v || t->cpu_state == HOST_CPU_OFF)
        return;
    if (spinning)
        v->n_parked++;
    else
        v->n_parked--;
    turns_update(v);
}
