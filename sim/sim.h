/* rnicsim discrete-event core: time, events, processes, wait queues, RNG,
 * statistics.  Everything below sim/ builds on this header only.
 *
 * Conventions
 *  - Time is integer picoseconds (sim_time_t).  Names carry units: _ps, _ns.
 *  - A `struct sim *` is passed explicitly; there is no global simulator.
 *    The only per-thread state is the currently running process, which the
 *    verbs API and the portability header need because their signatures
 *    (inherited from libibverbs / POSIX) carry no simulator pointer.
 *  - Events are intrusive: a component embeds `struct sim_event` and schedules
 *    only its *next* event (htsim style).  For one-off callbacks with two
 *    arguments use sim_call_in(), which takes events from a free list.
 *  - Ties are broken by a global sequence number (FIFO), so runs repeat.
 */
#ifndef RNICSIM_SIM_H
#define RNICSIM_SIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* ---------------------------------------------------------------- time */

typedef uint64_t sim_time_t; /* picoseconds */

#define SIM_PS ((sim_time_t)1)
#define SIM_NS ((sim_time_t)1000)
#define SIM_US ((sim_time_t)1000000)
#define SIM_MS ((sim_time_t)1000000000)
#define SIM_S ((sim_time_t)1000000000000)
#define SIM_TIME_NEVER UINT64_MAX
/* Bounds on the times a scenario can give (docs/robustness.md): the
 * latest instant a run can name (stop_time, failure times), about 13.3
 * days, and the largest duration of one hardware step (a latency, a
 * timeout, a cost), one hour.  With now <= SIM_TIME_LIMIT_PS, sums of a
 * few thousand durations stay far below 2^64; the schedulers saturate
 * anyway (sim_time_add), so no parameter can wrap the clock. */
#define SIM_TIME_LIMIT_PS ((sim_time_t)1 << 60)
#define SIM_DURATION_MAX_PS ((sim_time_t)3600 * SIM_S)

/* a + b, or SIM_TIME_NEVER if that does not fit (an event that far away
 * never happens within a run). */
static inline sim_time_t sim_time_add(sim_time_t a, sim_time_t b)
{
    sim_time_t s = a + b;
    return s < a ? SIM_TIME_NEVER : s;
}

/* n * t, saturating like sim_time_add (n repetitions of a cost). */
static inline sim_time_t sim_time_mul(uint64_t n, sim_time_t t)
{
    if (t && n > SIM_TIME_NEVER / t)
        return SIM_TIME_NEVER;
    return n * t;
}

/* Serialisation time of `bytes` at `rate_bps` bits per second, rounded up
 * to a whole picosecond.  Exact integer arithmetic (no floating point), so
 * results do not depend on the compiler's FP contraction choices. */
static inline sim_time_t sim_bytes_to_ps(uint64_t bytes, uint64_t rate_bps)
{
    __extension__ typedef unsigned __int128 u128;
    if (!rate_bps)
        return SIM_TIME_NEVER; /* nothing moves at 0 b/s */
    u128 num = (u128)bytes * 8u * 1000000000000ull;
    u128 t = (num + rate_bps - 1) / rate_bps;
    return t > SIM_TIME_NEVER ? SIM_TIME_NEVER : (sim_time_t)t;
}

static inline double sim_ps_to_ns(sim_time_t t)
{
    return (double)t / 1000.0;
}
static inline double sim_ps_to_us(sim_time_t t)
{
    return (double)t / 1e6;
}

/* ---------------------------------------------------------------- events */

struct sim;
struct sim_event;

typedef void (*sim_event_fn)(struct sim *sim, struct sim_event *ev);
/* Generic two-argument callback used by one-off calls and by the PCIe /
 * fabric completion hooks. */
typedef void (*sim_cb_fn)(struct sim *sim, void *a, void *b);

#define SIM_EVENT_IDLE UINT32_MAX

struct sim_event {
    sim_time_t time;     /* when it fires (valid while pending) */
    uint64_t seq;        /* tie-break: FIFO among equal times */
    sim_event_fn fn;     /* callback */
    void *ctx;           /* owner, for the callback */
    uint32_t heap_index; /* position in the heap; SIM_EVENT_IDLE if not queued */
    uint32_t owner;      /* 1 + the host of the process it resumes; 0: anything */
    const char *name;    /* static string, for traces and the invariant checker */
};

void sim_event_init(struct sim_event *ev, sim_event_fn fn, void *ctx, const char *name);
/* Schedule (or move, if already pending) `ev` to absolute time `when`
 * (>= sim_now).  Moving gives it a fresh sequence number. */
void sim_schedule_at(struct sim *sim, struct sim_event *ev, sim_time_t when);
void sim_schedule_in(struct sim *sim, struct sim_event *ev, sim_time_t delay_ps);
/* Remove a pending event in O(log n); no-op if it is idle.
 * An event's memory must stay valid until its callback returns (do not
 * free it in its own callback and schedule a new event at that address). */
void sim_cancel(struct sim *sim, struct sim_event *ev);
static inline bool sim_event_pending(const struct sim_event *ev)
{
    return ev->heap_index != SIM_EVENT_IDLE;
}
/* One-off call of fn(sim, a, b) after `delay_ps`.  Not cancellable. */
void sim_call_in(struct sim *sim, sim_time_t delay_ps, sim_cb_fn fn, void *a, void *b);

/* ---------------------------------------------------------------- the simulator */

enum sim_run_result {
    SIM_RUN_DONE,       /* queue empty; every non-daemon process finished */
    SIM_RUN_DEADLOCK,   /* queue empty; some non-daemon process is blocked */
    SIM_RUN_TIME_LIMIT, /* the next event is past `until` */
    SIM_RUN_STOPPED,    /* sim_stop() was called */
};

struct sim *sim_create(uint64_t seed);
void sim_destroy(struct sim *sim); /* frees processes (their stacks) too */
sim_time_t sim_now(const struct sim *sim);
uint64_t sim_seed(const struct sim *sim);
uint64_t sim_events_executed(const struct sim *sim);
size_t sim_events_pending(const struct sim *sim);
/* Time of the earliest pending event; SIM_TIME_NEVER when none (a pacer
 * that runs the queue against a real clock sleeps until then). */
sim_time_t sim_next_event_time(const struct sim *sim);
/* Run events in (time, seq) order until one of the results above. */
enum sim_run_result sim_run(struct sim *sim, sim_time_t until);
void sim_stop(struct sim *sim);
/* Time of the earliest pending event other than the one being executed
 * (SIM_TIME_NEVER if none): a running process may account CPU time up to
 * there without yielding, since nothing else can happen before it. */
sim_time_t sim_next_event_time(const struct sim *sim);
/* Conservative lookahead for a process of host `host`: the earliest time
 * at which a pending event could change what it observes, counting an
 * event that resumes a process of another host (event owner) as
 * `lookahead_ps` later (the least time anything that process does takes
 * to reach another host) and every other event as immediate. */
sim_time_t sim_horizon(const struct sim *sim, uint32_t host, sim_time_t lookahead_ps);
/* Context switches into processes so far (a cache of sim_horizon stays
 * valid while this does not change). */
uint64_t sim_switches(const struct sim *sim);
/* Events scheduled so far: with sim_switches(), a key that changes
 * whenever the pending events may have changed under a running process
 * (it schedules one, or another process ran). */
uint64_t sim_scheduled(const struct sim *sim);
const char *sim_run_result_str(enum sim_run_result r);
/* Print one line per unfinished non-daemon process with the point where
 * it is blocked ("  h1/perftest#0: ibv_poll_cq(cq 3): CQ empty"), or
 * "busy" / "ready to run".  The caller prints the heading (a deadlock, or a
 * time limit reached with programs running). */
void sim_deadlock_report(const struct sim *sim, FILE *out);
/* Tuning / tests: the event queue's calendar wheel turns on when its heap
 * holds on_at events and off when fewer than off_below are pending (0, 0:
 * always on).  Defaults SIM_WHEEL_ON_AT / SIM_WHEEL_OFF_BELOW (event.c). */
void sim_queue_wheel_thresholds(struct sim *sim, uint32_t on_at, uint32_t off_below);
/* Debug builds: check heap order and index back-pointers; abort on error.
 * Called after every event when NDEBUG is not defined and the
 * RNICSIM_CHECK_EVQ environment variable is set, and by the unit tests. */
void sim_check_invariants(const struct sim *sim);

/* The first member of the simulator, read by inline fast paths: which
 * groups of trace records (sim/trace.h, enum trace_group) someone listens
 * to.  0 when nothing is traced, so a call site that tests it costs one
 * load and one branch. */
struct sim_head {
    uint32_t trace_groups;
};
static inline uint32_t sim_trace_groups(const struct sim *sim)
{
    return ((const struct sim_head *)(const void *)sim)->trace_groups;
}

/* Optional progress callback, called about every `every_events` events. */
typedef void (*sim_progress_fn)(struct sim *sim, void *arg);
void sim_set_progress(struct sim *sim, uint64_t every_events, sim_progress_fn fn, void *arg);

/* ---------------------------------------------------------------- processes */

/* A process is a coroutine on its own stack (with a guard page below it).
 * It runs only when the event loop switches to it and gives control back
 * when it blocks (sleep, wait queue) or returns. */
struct sim_proc;
typedef void (*sim_proc_fn)(void *arg);

#define SIM_PROC_DEFAULT_STACK_BYTES ((size_t)256 * 1024)

/* Create a process that starts at sim_now (scheduled, FIFO).  Returns NULL
 * with errno set if the stack cannot be mapped. */
struct sim_proc *sim_proc_create(struct sim *sim, const char *name, sim_proc_fn fn, void *arg,
                                 size_t stack_bytes);
/* Called on the scheduler's stack just before `p` resumes (in = true) and
 * just after it gives the CPU back (in = false): what a process-private
 * view of global state (errno, stdout, getopt's variables) needs to be
 * swapped in and out (posix/). */
typedef void (*sim_switch_hook_fn)(void *arg, bool in);
void sim_proc_set_switch_hook(struct sim_proc *p, sim_switch_hook_fn fn, void *arg);
/* The host the process runs on (sim_horizon): its wake-ups are tagged. */
void sim_proc_set_host(struct sim_proc *p, uint32_t host);
/* End a process that is not running (parked, sleeping or not yet started):
 * it leaves its wait queue, its wake-up is cancelled, joiners are woken and
 * its stack is released.  Nothing of its own code runs any more (an exit()
 * of another thread of the same program). */
void sim_proc_kill(struct sim_proc *p);
/* Take `p` off the wait queue it is blocked on and resume it now, as if
 * its deadline had passed (sim_waitq_wait_until returns false).  Returns
 * false if it was not waiting on a queue.  (A simulated signal.) */
bool sim_proc_interrupt(struct sim_proc *p);
/* Daemon processes do not keep the run alive and are not reported as
 * deadlocked (servers that loop forever). */
void sim_proc_set_daemon(struct sim_proc *p, bool daemon);
/* The process running now, or NULL when the event loop itself is running. */
struct sim_proc *sim_proc_current(void);
struct sim *sim_proc_sim(const struct sim_proc *p);
const char *sim_proc_name(const struct sim_proc *p);
bool sim_proc_finished(const struct sim_proc *p);
void sim_proc_set_user(struct sim_proc *p, void *user); /* e.g. the host it runs on */
void *sim_proc_user(const struct sim_proc *p);
/* Memory free()d together with the process when the simulator is destroyed. */
void sim_proc_set_user_owned(struct sim_proc *p, void *owned);
/* Block the current process for `delay_ps` of simulated time. */
void sim_proc_sleep(sim_time_t delay_ps);
/* Give other events at the same instant a chance to run (FIFO). */
void sim_proc_yield(void);
/* Move the wake-up of `p`, which is sleeping in sim_proc_sleep, to the
 * absolute time `when` (>= sim_now): a CPU whose speed changes while a
 * thread computes on it (sim/host/cpu.c).  Returns false, doing nothing,
 * when `p` is not sleeping. */
bool sim_proc_resched(struct sim_proc *p, sim_time_t when);
/* Processes waiting for `p` to finish (host_thread_join). */
void sim_proc_join(struct sim_proc *p);

/* ---------------------------------------------------------------- wait queues */

struct sim_waitq {
    struct sim_proc *head, *tail;
    const char *name;
};

void sim_waitq_init(struct sim_waitq *wq, const char *name);
/* Block the current process until woken.  `why` is shown in deadlock
 * reports (static or long-lived string). */
void sim_waitq_wait(struct sim_waitq *wq, const char *why);
/* Same, but also wake at absolute time `deadline`.  Returns true if woken
 * by the queue, false on timeout. */
bool sim_waitq_wait_until(struct sim_waitq *wq, sim_time_t deadline, const char *why);
/* Woken processes resume at sim_now, in the order they started waiting. */
void sim_waitq_wake_all(struct sim *sim, struct sim_waitq *wq);
void sim_waitq_wake_one(struct sim *sim, struct sim_waitq *wq);
static inline bool sim_waitq_empty(const struct sim_waitq *wq)
{
    return wq->head == NULL;
}

/* ---------------------------------------------------------------- random numbers */

/* xoshiro256** seeded through splitmix64.  Each component derives its own
 * stream from (scenario seed, component name), so adding a component does
 * not change the draws of the others. */
struct sim_rng {
    uint64_t s[4];
};

void sim_rng_seed(struct sim_rng *r, uint64_t seed, const char *stream_name);
void sim_rng_stream(const struct sim *sim, struct sim_rng *r, const char *stream_name);
uint64_t sim_rng_u64(struct sim_rng *r);
double sim_rng_uniform(struct sim_rng *r);             /* [0, 1) */
uint64_t sim_rng_below(struct sim_rng *r, uint64_t n); /* [0, n), unbiased */

/* ---------------------------------------------------------------- statistics */

/* A histogram of non-negative integer samples (e.g. latencies in ps).
 * Keeps every sample so percentiles are exact (nearest-rank definition:
 * the smallest sample with at least p% of samples <= it), plus log-linear
 * buckets (8 sub-buckets per power of two) for plots. */
struct sim_hist {
    uint64_t *samples;
    size_t n, cap;
    bool sorted;
    uint64_t min, max;
    long double sum;
    uint64_t buckets[64 * 8];
};

void sim_hist_init(struct sim_hist *h);
void sim_hist_free(struct sim_hist *h);
void sim_hist_add(struct sim_hist *h, uint64_t v);
size_t sim_hist_count(const struct sim_hist *h);
double sim_hist_mean(const struct sim_hist *h);
uint64_t sim_hist_percentile(struct sim_hist *h, double p); /* 0 < p <= 100; 0 if empty */
/* Index of the log-linear bucket holding v, and that bucket's lower bound. */
unsigned sim_hist_bucket(uint64_t v);
uint64_t sim_hist_bucket_low(unsigned b);

/* ---------------------------------------------------------------- benchmark */

/* Hold model on the bare event queue: `pending` events, `ops` executions
 * (each reschedules itself a random 0..2 us later).  Returns 0 and the
 * wall time of the run, or -1 if out of memory.  Used by `rnicsim bench`. */
int sim_bench_hold(size_t pending, uint64_t ops, uint64_t seed, double *wall_s);

#endif /* RNICSIM_SIM_H */
