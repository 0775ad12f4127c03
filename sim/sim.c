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
    sim_queue_init(sim);
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
    return sim->n + sim->zq_live + sim->wheel_live;
}
sim_time_t sim_next_event_time(const struct sim *sim)
{
    return sim_queue_next_time(sim);
}

uint64_t sim_switches(const struct sim *sim)
{
    return sim->switches;
}

uint64_t sim_scheduled(const struct sim *sim)
{
    return sim->seq;
}

sim_time_t sim_horizon(const struct sim *sim, uint32_t host, sim_time_t lookahead_ps)
{
    return sim_queue_horizon(sim, host, lookahead_ps); /* event.c: it walks every structure */
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
        /* Events due now wait in the now-FIFO; wheel events of this same
         * instant were scheduled before them (smaller seq) and go first. */
        struct sim_event *ev;
        if (sim->zq_live) {
            ev = sim_wheel_peek(sim, sim->now);
            if (ev && ev->time == sim->now)
                sim_wheel_pop(sim);
            else
                ev = sim_zq_pop(sim);
        } else {
            ev = sim_wheel_peek(sim, until);
            if (!ev) {
                if (sim->n || sim->wheel_live) { /* the next event is past `until` */
                    sim->now = until;
                    return SIM_RUN_TIME_LIMIT;
                }
                return live_processes(sim) ? SIM_RUN_DEADLOCK : SIM_RUN_DONE;
            }
            if (ev->time > until) {
                sim->now = until;
                return SIM_RUN_TIME_LIMIT;
            }
            sim_wheel_pop(sim);
            sim->now = ev->time;
        }
        ev->fn(sim, ev);
        sim->executed++;
        if (sim->progress_fn && sim->executed >= sim->progress_next) {
            sim->progress_next = sim->executed + sim->progress_every;
            sim->progress_fn(sim, sim->progress_arg);
        }
#ifndef NDEBUG
        /* The full check is O(pending events) (+ the wheel's 64 bitmap
         * words): every k-th event with k the power of two >= that work /
         * 64, so it costs at most ~64 slot checks per event (a run with
         * 4096 QPs' timers pending took 280 s under ASan instead of 2.4 s
         * with a check after every event).  A broken heap or a misfiled
         * wheel entry stays broken until its event runs, so a sampled
         * check still finds it. */
        if (sim->check_evq) {
            uint64_t period = 1, work = sim_events_pending(sim) + 16;
            while (period * 64 < work)
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
