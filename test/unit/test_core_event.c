/* Event queue: (time, seq) order with FIFO ties, move, cancel, the
 * self-rescheduling fast path, and a randomised comparison against a
 * reference model with the invariant checker after every step. */
#include <stdlib.h>

#include "../../sim/sim.h"
#include "test.h"

struct rec {
    struct sim_event ev;
    int id;
    int *log;
    size_t *n_log;
};

static void rec_fire(struct sim *sim, struct sim_event *ev)
{
    (void)sim;
    struct rec *r = ev->ctx;
    r->log[(*r->n_log)++] = r->id;
}

static void test_order_and_ties(void)
{
    struct sim *sim = sim_create(1);
    int log[16];
    size_t n = 0;
    struct rec r[6];
    sim_time_t at[6] = {50, 10, 50, 10, 30, 50};
    for (int i = 0; i < 6; i++) {
        r[i] = (struct rec){.id = i, .log = log, .n_log = &n};
        sim_event_init(&r[i].ev, rec_fire, &r[i], "rec");
        sim_schedule_at(sim, &r[i].ev, at[i]);
    }
    CHECK_EQ_U64(sim_events_pending(sim), 6);
    CHECK(sim_run(sim, SIM_TIME_NEVER) == SIM_RUN_DONE);
    int want[6] = {1, 3, 4, 0, 2, 5}; /* by time, equal times in scheduling order */
    CHECK_EQ_U64(n, 6);
    for (int i = 0; i < 6; i++)
        CHECK_EQ_U64(log[i], want[i]);
    CHECK_EQ_U64(sim_now(sim), 50);
    CHECK_EQ_U64(sim_events_executed(sim), 6);
    sim_destroy(sim);
}

static void test_cancel_and_move(void)
{
    struct sim *sim = sim_create(1);
    int log[16];
    size_t n = 0;
    struct rec r[4];
    for (int i = 0; i < 4; i++) {
        r[i] = (struct rec){.id = i, .log = log, .n_log = &n};
        sim_event_init(&r[i].ev, rec_fire, &r[i], "rec");
        sim_schedule_at(sim, &r[i].ev, (sim_time_t)(i + 1) * 100);
    }
    sim_cancel(sim, &r[1].ev);
    CHECK(!sim_event_pending(&r[1].ev));
    sim_cancel(sim, &r[1].ev);            /* idle: no-op */
    sim_schedule_at(sim, &r[3].ev, 50);   /* move earlier */
    sim_schedule_at(sim, &r[0].ev, 1000); /* move later */
    sim_check_invariants(sim);
    CHECK_EQ_U64(sim_events_pending(sim), 3);
    CHECK(sim_run(sim, 250) == SIM_RUN_TIME_LIMIT);
    CHECK_EQ_U64(sim_now(sim), 250);
    CHECK_EQ_U64(n, 1);
    CHECK_EQ_U64(log[0], 3);
    CHECK(sim_run(sim, SIM_TIME_NEVER) == SIM_RUN_DONE);
    CHECK_EQ_U64(n, 3);
    CHECK_EQ_U64(log[1], 2);
    CHECK_EQ_U64(log[2], 0);
    CHECK_EQ_U64(sim_now(sim), 1000);
    sim_destroy(sim);
}

/* A periodic event that reschedules itself (the ghost fast path) while
 * another event cancels it. */
struct ticker {
    struct sim_event ev;
    int ticks;
};

static void tick(struct sim *sim, struct sim_event *ev)
{
    struct ticker *t = ev->ctx;
    t->ticks++;
    CHECK(!sim_event_pending(ev)); /* not pending inside its own callback */
    sim_schedule_in(sim, ev, 10);
    CHECK(sim_event_pending(ev));
}

static void stop_ticker(struct sim *sim, void *a, void *b)
{
    (void)b;
    sim_cancel(sim, &((struct ticker *)a)->ev);
}

static void test_periodic_and_call_in(void)
{
    struct sim *sim = sim_create(1);
    struct ticker t = {.ticks = 0};
    sim_event_init(&t.ev, tick, &t, "tick");
    sim_schedule_at(sim, &t.ev, 0);
    sim_call_in(sim, 95, stop_ticker, &t, NULL);
    CHECK(sim_run(sim, SIM_TIME_NEVER) == SIM_RUN_DONE);
    CHECK_EQ_U64(t.ticks, 10); /* 0,10,...,90 */
    CHECK_EQ_U64(sim_now(sim), 95);
    sim_destroy(sim);
}

/* Randomised: schedule, move, cancel and run against a reference list. */
struct rnd_ev {
    struct sim_event ev;
    sim_time_t when;
    uint64_t order; /* reference tie-break: last (re)schedule */
    bool pending;
};

static struct rnd_ev *g_evs;
static size_t g_n;
static sim_time_t g_last_time;
static uint64_t g_last_order;
static unsigned g_bad;
/* inside callbacks too (when g_inner): schedule, move (also to now: the
 * now-FIFO), cancel and self-reschedule from within an event */
static struct sim_rng *g_rng;
static uint64_t *g_order;
static bool g_inner;
static bool g_burst;
static unsigned
    g_bad_horizon; /* times spread over 3 buckets: hundreds per bucket (the merge sort) */

static void rnd_op(struct sim *sim, struct rnd_ev *e)
{
    if (sim_rng_below(g_rng, 4) == 0) {
        sim_cancel(sim, &e->ev);
        e->pending = false;
    } else {
        /* few distinct delays, so ties are frequent: 0 (due now), within
         * one wheel bucket (1.024 ns), a few buckets, around the wheel's
         * horizon (~4.2 us) and past it (into the heap) */
        static const sim_time_t delays[] = {0,       100,     700,     1024,      2047,
                                            300000,  4194303, 4194304, 4195000,   9000000,
                                            9000000, 2000000, 1000000, 123456789, 100};
        e->when = sim_now(sim) + delays[sim_rng_below(g_rng, sizeof(delays) / sizeof(delays[0]))];
        if (g_burst)
            e->when = sim_now(sim) + 5000 + sim_rng_below(g_rng, 3000);
        e->order = (*g_order)++;
        e->pending = true;
        e->ev.owner = (uint32_t)sim_rng_below(g_rng, 3); /* anything, host 0, host 1 */
        sim_schedule_at(sim, &e->ev, e->when);
    }
}

static void rnd_fire(struct sim *sim, struct sim_event *ev)
{
    struct rnd_ev *e = ev->ctx;
    /* It must be the reference minimum among pending events. */
    for (size_t i = 0; i < g_n; i++) {
        struct rnd_ev *o = &g_evs[i];
        if (o != e && o->pending &&
            (o->when < e->when || (o->when == e->when && o->order < e->order)))
            g_bad++;
    }
    if (e->when != sim_now(sim) || e->when < g_last_time ||
        (e->when == g_last_time && e->order < g_last_order))
        g_bad++;
    g_last_time = e->when;
    g_last_order = e->order;
    e->pending = false;
    if (g_inner && *g_order < 200000)
        for (uint64_t k = sim_rng_below(g_rng, 3); k > 0; k--) {
            struct rnd_ev *o = &g_evs[sim_rng_below(g_rng, g_n)];
            rnd_op(sim, o); /* o may be e itself: the ghost path */
            sim_check_invariants(sim);
        }
}

/* wheel: 0 the default thresholds, 1 always on, 2 on at 40 pending and off
 * below 20 (switching often, also from inside callbacks) */
static void test_random_against_reference(bool inner, bool burst, int wheel)
{
    struct sim *sim = sim_create(7);
    if (wheel == 1)
        sim_queue_wheel_thresholds(sim, 0, 0);
    else if (wheel == 2)
        sim_queue_wheel_thresholds(sim, 40, 20);
    struct sim_rng rng;
    sim_rng_seed(&rng, 7, "test");
    g_n = burst ? 2000 : 300;
    g_burst = burst;
    g_evs = calloc(g_n, sizeof(*g_evs));
    uint64_t order = 0;
    g_rng = &rng;
    g_order = &order;
    g_inner = inner;
    g_bad = 0;
    g_last_time = 0;
    g_last_order = 0;
    for (size_t i = 0; i < g_n; i++)
        sim_event_init(&g_evs[i].ev, rnd_fire, &g_evs[i], "rnd");
    for (int round = 0; round < (burst ? 20 : 200); round++) {
        for (int k = 0; k < (burst ? 1500 : 20); k++) {
            rnd_op(sim, &g_evs[sim_rng_below(&rng, g_n)]);
            if (!burst || k % 250 == 0)
                sim_check_invariants(sim);
        }
        size_t want = 0;
        for (size_t i = 0; i < g_n; i++)
            want += g_evs[i].pending;
        CHECK_EQ_U64(sim_events_pending(sim), want);
        /* sim_horizon for host 0 against every pending event: host 1's
         * (owner 2) count a lookahead later */
        for (int li = 0; li < 2; li++) {
            sim_time_t la = li ? 5000000 : 2000, ref = SIM_TIME_NEVER;
            for (size_t i = 0; i < g_n; i++)
                if (g_evs[i].pending) {
                    sim_time_t t = g_evs[i].when + (g_evs[i].ev.owner == 2 ? la : 0);
                    ref = t < ref ? t : ref;
                }
            if (sim_horizon(sim, 0, la) != ref)
                g_bad_horizon++;
        }
        sim_run(sim, sim_now(sim) + (round % 3 ? 300 : 3000000));
        sim_check_invariants(sim);
    }
    sim_run(sim, SIM_TIME_NEVER);
    CHECK_EQ_U64(g_bad, 0);
    CHECK_EQ_U64(g_bad_horizon, 0);
    CHECK_EQ_U64(sim_events_pending(sim), 0);
    free(g_evs);
    sim_destroy(sim);
}

static void test_bench_runs(void)
{
    double wall = -1;
    CHECK(sim_bench_hold(1000, 20000, 3, &wall) == 0);
    CHECK(wall >= 0);
}

static void test_bytes_to_ps(void)
{
    CHECK_EQ_U64(sim_bytes_to_ps(1, 8000000000ull), 1000); /* 1 B at 8 Gb/s = 1 ns */
    CHECK_EQ_U64(sim_bytes_to_ps(1500, 100000000000ull), 120000);
    CHECK_EQ_U64(sim_bytes_to_ps(1, 3), 2666666666667ull); /* rounded up */
    CHECK_EQ_U64(sim_bytes_to_ps(1ull << 40, 100000000000ull), 87960930222080ull);
}

int main(void)
{
    test_order_and_ties();
    test_cancel_and_move();
    test_periodic_and_call_in();
    for (int wheel = 0; wheel < 3; wheel++) {
        test_random_against_reference(false, false, wheel);
        test_random_against_reference(true, false, wheel);
        test_random_against_reference(false, true, wheel);
    }
    test_bench_runs();
    test_bytes_to_ps();
    return test_summary();
}
