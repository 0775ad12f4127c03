/* The simulator object and its event loop. */
#include <stdlib.h>
#include <string.h>

#include "sim_internal.h"

struct sim_call {
    struct sim_event ev;
    sim_cb_fn fn;
    void *a, *b;
    struct sim_call *next_free;
};

enum { SIM_CALL_SLAB = 256 };

struct sim *sim_create(uint64_t seed)
{
    struct sim *sim = calloc(1, sizeof(*sim));
    if (!sim)
        return NULL;
    sim->seed = seed;
#ifndef NDEBUG
    const char *chk = getenv("RNICSIM_CHECK_EVQ");
    sim->check_evq = chk && *chk && strcmp(chk, "0") != 0;
#endif
    return sim;
}

void sim_destroy(struct sim *sim)
{
    if (!sim)
        return;
    sim_procs_free(sim);
    sim_trace_enable(sim, 0);
    sim_heap_free(sim);
    for (size_t i = 0; i < sim->n_call_slabs; i++)
        free(sim->call_slabs[i]);
    free(sim->call_slabs);
    free(sim);
}

sim_time_t sim_now(const struct sim *sim)
{
    return sim->now;
}
uint64_t sim_seed(const struct sim *sim)
{
    return sim->seed;
}
uint64_t sim_events_executed(const struct sim *sim)
{
    return sim->executed;
}
size_t sim_events_pending(const struct sim *sim)
{
    return sim->n - (sim->ghost ? 1 : 0);
}
sim_time_t sim_next_event_time(const struct sim *sim)
{
    if (!sim->ghost)
        return sim->n ? sim->heap[0].time : SIM_TIME_NEVER;
    /* heap[0] is the event being executed: the next one is the earliest
     * of its children (4-ary heap: 1..4) */
    sim_time_t t = SIM_TIME_NEVER;
    for (size_t i = 1; i <= 4 && i < sim->n; i++)
        if (sim->heap[i].time < t)
            t = sim->heap[i].time;
    return t;
}

uint64_t sim_switches(const struct sim *sim)
{
    return sim->switches;
}

/* Heap entries are visited from the root; a subtree whose root is not
 * earlier than the best bound so far cannot improve it (every entry is
 * later than its parent), so only the events of [first, first +
 * lookahead) are looked at. */
sim_time_t sim_horizon(const struct sim *sim, uint32_t host, sim_time_t lookahead_ps)
{
    size_t stack[128];
    size_t n = 0;
    sim_time_t best = SIM_TIME_NEVER;
    if (sim->n)
        stack[n++] = 0;
    while (n) {
        size_t i = stack[--n];
        const struct sim_heap_ent *e = &sim->heap[i];
        if (e->time >= best)
            continue;
        if (!(sim->ghost && i == 0)) {
            uint32_t owner = e->ev->owner;
            sim_time_t t = owner && owner != host + 1 && e->time < SIM_TIME_NEVER - lookahead_ps
                               ? e->time + lookahead_ps
                               : e->time;
            if (t < best)
                best = t;
        }
        for (size_t c = 4 * i + 1; c <= 4 * i + 4 && c < sim->n; c++) {
            if (n == sizeof(stack) / sizeof(stack[0]))
                return sim_next_event_time(sim); /* too many to look at: no lookahead */
            stack[n++] = c;
        }
    }
    return best;
}

void sim_stop(struct sim *sim)
{
    sim->stop = true;
}

void sim_set_progress(struct sim *sim, uint64_t every_events, sim_progress_fn fn, void *arg)
{
    sim->progress_every = every_events;
    sim->progress_next = sim->executed + every_events;
    sim->progress_fn = fn;
    sim->progress_arg = arg;
}

const char *sim_run_result_str(enum sim_run_result r)
{
    switch (r) {
    case SIM_RUN_DONE:
        return "done";
    case SIM_RUN_DEADLOCK:
        return "deadlock";
    case SIM_RUN_TIME_LIMIT:
        return "time limit";
    case SIM_RUN_STOPPED:
        return "stopped";
    }
    return "?";
}

/* ---------------------------------------------------------------- one-off calls */

static void call_fire(struct sim *sim, struct sim_event *ev)
{
    struct sim_call *c = ev->ctx;
    sim_cb_fn fn = c->fn;
    void *a = c->a, *b = c->b;
    /* Free before calling, so fn can reuse it at once. */
    c->next_free = sim->call_free;
    sim->call_free = c;
    fn(sim, a, b);
}

static void call_slab_new(struct sim *sim)
{
    if (sim->n_call_slabs == sim->cap_call_slabs) {
        size_t cap = sim->cap_call_slabs ? sim->cap_call_slabs * 2 : 16;
        void **s = realloc(sim->call_slabs, cap * sizeof(*s));
        if (!s)
            goto oom;
        sim->call_slabs = s;
        sim->cap_call_slabs = cap;
    }
    struct sim_call *slab = calloc(SIM_CALL_SLAB, sizeof(*slab));
    if (!slab)
        goto oom;
    sim->call_slabs[sim->n_call_slabs++] = slab;
    for (size_t i = 0; i < SIM_CALL_SLAB; i++) {
        sim_event_init(&slab[i].ev, call_fire, &slab[i], "call");
        slab[i].next_free = sim->call_free;
        sim->call_free = &slab[i];
    }
    return;
oom:
    fprintf(stderr, "rnicsim: out of memory for one-off events\n");
    abort();
}

void sim_call_in(struct sim *sim, sim_time_t delay_ps, sim_cb_fn fn, void *a, void *b)
{
    if (!sim->call_free)
        call_slab_new(sim);
    struct sim_call *c = sim->call_free;
    sim->call_free = c->next_free;
    c->fn = fn;
    c->a = a;
    c->b = b;
    sim_schedule_at(sim, &c->ev, sim_time_add(sim->now, delay_ps));
}

/* ---------------------------------------------------------------- the loop */

static bool live_processes(const struct sim *sim);

enum sim_run_result sim_run(struct sim *sim, sim_time_t until)
{
    sim->stop = false;
    for (;;) {
        if (sim->stop)
            return SIM_RUN_STOPPED;
        if (sim->n == 0)
            return live_processes(sim) ? SIM_RUN_DEADLOCK : SIM_RUN_DONE;
        struct sim_heap_ent top = sim->heap[0];
        if (top.time > until) {
            sim->now = until;
            return SIM_RUN_TIME_LIMIT;
        }
        sim->now = top.time;
        struct sim_event *ev = top.ev;
        ev->heap_index = SIM_EVENT_IDLE;
        sim->ghost = ev;
        ev->fn(sim, ev);
        if (sim->ghost) { /* not rescheduled by its callback */
            sim->ghost = NULL;
            sim_heap_pop_root(sim);
        }
        sim->executed++;
        if (sim->progress_fn && sim->executed >= sim->progress_next) {
            sim->progress_next = sim->executed + sim->progress_every;
            sim->progress_fn(sim, sim->progress_arg);
        }
#ifndef NDEBUG
        /* The full check is O(pending events): after every event while
         * the queue is small, then every k-th event with k the power of
         * two >= pending / 64, so it costs at most ~64 slot checks per
         * event (a run with 4096 QPs' timers pending took 280 s under ASan
         * instead of 2.4 s with a check after every event).  A broken heap
         * stays broken, so a sampled check still finds it. */
        if (sim->check_evq) {
            uint64_t period = 1;
            while (period * 64 < sim->n)
                period <<= 1;
            if ((sim->executed & (period - 1)) == 0)
                sim_check_invariants(sim);
        }
#endif
    }
}

static bool live_processes(const struct sim *sim)
{
    return sim_procs_live(sim);
}
