/* rnicsimd: the simulator's event queue paced against the wall clock.
 *
 * The NIC, PCIe and fabric models are the ones a simulated run uses; they
 * only know the scheduler of sim/sim.h (now, schedule, cancel).  Here its
 * queue is run against CLOCK_MONOTONIC: simulated time 0 is the moment the
 * daemon started, and an event runs when its simulated time has come on
 * the wall clock - never earlier.  Between events the daemon waits in
 * libev (epoll) for the clients' sockets and doorbells, with a timerfd
 * armed at the next event (libev's own timers have millisecond
 * resolution under epoll; a timerfd has the kernel's hrtimer resolution);
 * an event closer than --spin is waited for by polling instead, since a
 * sleep and wake-up costs several microseconds.  Every input from a client
 * (a doorbell, a control call) becomes an event at the wall-clock time it
 * was read (emu_inject), so the model sees inputs in the order they
 * happened and never before they happened.
 *
 * Falling behind.  A step runs every event that is due; when the model
 * needs more CPU than the simulated time it covers (many packets, a big
 * fabric), events run late, in order: simulated time then trails the wall
 * clock, inputs are stamped with the (later) wall time, and the model
 * catches up when the load drops.  Durations inside the model stay exact;
 * what a client measures with its own clock stretches.  A step stops after
 * --budget of wall time to look at the sockets again.  How late events
 * ran is measured: per step, the wall time at its start minus the time of
 * its first event (the wake-up lateness), and after a step cut short, how
 * far simulated time trails the wall clock; emu_pace_report prints both. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "emu/daemon/emu.h"

uint64_t emu_mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

sim_time_t emu_wall_ps(const struct emu *e)
{
    return (emu_mono_ns() - e->t0_ns) * SIM_NS;
}

void emu_inject(struct emu *e, sim_cb_fn fn, void *a, void *b)
{
    sim_time_t now = sim_now(e->sim), wall = emu_wall_ps(e);
    sim_call_in(e->sim, wall > now ? wall - now : 0, fn, a, b);
}

/* sim_run's progress hook: a step that overruns its budget stops so the
 * loop can read its sockets (the events left are simply overdue). */
static void budget_check(struct sim *sim, void *arg)
{
    struct emu *e = arg;
    if (emu_mono_ns() > e->batch_deadline_ns)
        sim_stop(sim);
}

/* Run every event due now; returns true if events are still overdue. */
static bool run_due(struct emu *e)
{
    sim_time_t next = sim_next_event_time(e->sim);
    sim_time_t wall = emu_wall_ps(e);
    if (next == SIM_TIME_NEVER || next > wall)
        return false;
    uint64_t start_ns = emu_mono_ns();
    e->batch_deadline_ns = start_ns + e->budget_ns;
    emu_clients_drain(e); /* receive rings have no doorbell: the NIC looks now */
    e->stats.late_buckets[sim_hist_bucket(wall - next)]++;
    e->stats.late_n++;
    if (wall - next > e->stats.late_max_ps)
        e->stats.late_max_ps = wall - next;
    uint64_t ev0 = sim_events_executed(e->sim);
    sim_time_t until = wall < e->stop_ps ? wall : e->stop_ps;
    enum sim_run_result res = sim_run(e->sim, until);
    e->stats.batches++;
    e->stats.events += sim_events_executed(e->sim) - ev0;
    emu_after_batch(e);
    if (res != SIM_RUN_STOPPED)
        return false;
    sim_time_t w2 = emu_wall_ps(e), now = sim_now(e->sim);
    e->stats.behind_batches++;
    if (w2 > now && w2 - now > e->stats.max_behind_ps)
        e->stats.max_behind_ps = w2 - now;
    e->stats.behind_s += (double)(emu_mono_ns() - start_ns) * 1e-9;
    return true;
}

/* Arm the timerfd at simulated time `t` (0 disarms). */
static void timer_at(struct emu *e, sim_time_t t)
{
    struct itimerspec its;
    memset(&its, 0, sizeof(its));
    if (t != SIM_TIME_NEVER) {
        uint64_t ns = e->t0_ns + (t + SIM_NS - 1) / SIM_NS;
        if (ns == 0)
            ns = 1;
        its.it_value.tv_sec = (time_t)(ns / 1000000000ull);
        its.it_value.tv_nsec = (long)(ns % 1000000000ull);
    }
    timerfd_settime(e->timer_fd, TFD_TIMER_ABSTIME, &its, NULL);
}

static void timer_cb(struct ev_loop *loop, ev_io *w, int revents)
{
    (void)loop;
    (void)revents;
    struct emu *e = w->data;
    uint64_t v;
    ssize_t n = read(e->timer_fd, &v, sizeof(v)); /* clears it; the loop runs what is due */
    (void)n;
}

static void signal_cb(struct ev_loop *loop, ev_signal *w, int revents)
{
    (void)loop;
    (void)revents;
    struct emu *e = w->data;
    e->stopping = true;
    e->stop_signal = w->signum;
}

int emu_pace_loop(struct emu *e)
{
    e->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
    if (e->timer_fd < 0) {
        fprintf(stderr, "rnicsimd: timerfd_create: %s\n", strerror(errno));
        return -1;
    }
    ev_io_init(&e->timer_w, timer_cb, e->timer_fd, EV_READ);
    e->timer_w.data = e;
    ev_io_start(e->loop, &e->timer_w);
    ev_signal_init(&e->sigint_w, signal_cb, SIGINT);
    ev_signal_init(&e->sigterm_w, signal_cb, SIGTERM);
    e->sigint_w.data = e->sigterm_w.data = e;
    ev_signal_start(e->loop, &e->sigint_w);
    ev_signal_start(e->loop, &e->sigterm_w);
    sim_set_progress(e->sim, 64, budget_check, e);

    while (!e->stopping) {
        bool overdue = run_due(e);
        sim_time_t wall = emu_wall_ps(e);
        if (wall >= e->stop_ps) {
            e->stopping = true;
            break;
        }
        sim_time_t next = sim_next_event_time(e->sim);
        bool near = next != SIM_TIME_NEVER && (next <= wall || next - wall <= e->spin_ps);
        bool polling = e->poll_ps && (emu_mono_ns() - e->last_activity_ns) * SIM_NS < e->poll_ps;
        if (overdue || near || polling) {
            e->stats.spins++;
            ev_run(e->loop, EVRUN_NOWAIT);
            if (!overdue)
                sched_yield(); /* a client may need this CPU to post what comes next */
            continue;
        }
        sim_time_t wake = next < e->stop_ps ? next : e->stop_ps;
        timer_at(e, wake);
        e->stats.sleeps++;
        ev_run(e->loop, EVRUN_ONCE);
    }
    timer_at(e, SIM_TIME_NEVER);
    return 0;
}

/* The upper end of the bucket holding the p-th percentile (at most the
 * largest sample). */
static sim_time_t late_percentile(const struct emu_pace_stats *s, double p)
{
    if (!s->late_n)
        return 0;
    uint64_t want = (uint64_t)((double)s->late_n * p / 100.0 + 0.999999), seen = 0;
    for (unsigned b = 0; b < 64 * 8; b++) {
        seen += s->late_buckets[b];
        if (seen >= want) {
            sim_time_t hi = b + 1 < 64 * 8 ? sim_hist_bucket_low(b + 1) : s->late_max_ps;
            return hi < s->late_max_ps ? hi : s->late_max_ps;
        }
    }
    return s->late_max_ps;
}

void emu_pace_report(const struct emu *e, FILE *out)
{
    const struct emu_pace_stats *s = &e->stats;
    fprintf(out,
            "rnicsimd: pacing: %" PRIu64 " steps, %" PRIu64 " events; an event ran after its "
            "time by (per step) p50 <= %.1f us, p99 <= %.1f us, max %.1f us\n",
            s->batches, s->events, sim_ps_to_us(late_percentile(s, 50)),
            sim_ps_to_us(late_percentile(s, 99)), sim_ps_to_us(s->late_max_ps));
    fprintf(out,
            "rnicsimd: pacing: fell behind in %" PRIu64 " steps (%.3f s in all, at most %.1f us "
            "behind the wall clock); %" PRIu64 " sleeps, %" PRIu64 " polls\n",
            s->behind_batches, s->behind_s, sim_ps_to_us(s->max_behind_ps), s->sleeps, s->spins);
}
