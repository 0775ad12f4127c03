/* The classic "hold model" benchmark of an event queue (Jones, CACM 1986):
 * keep `pending` events in the queue; each executed event schedules one
 * more at now + a random increment.  It measures the event loop and the
 * heap alone, with no model code. */
#include <stdlib.h>
#include <time.h>

#include "sim_internal.h"

struct hold_ev {
    struct sim_event ev;
};

struct hold_ctx {
    struct sim_rng rng;
    uint64_t left;
};

static struct hold_ctx hold;

static void hold_fire(struct sim *sim, struct sim_event *ev)
{
    if (--hold.left == 0) {
        sim_stop(sim);
        return;
    }
    /* Exponential-ish increments, mean ~1 us, in whole picoseconds:
     * uniform in [0, 2 us) keeps the draw cheap and the mean fixed. */
    sim_schedule_at(sim, ev, sim_now(sim) + sim_rng_below(&hold.rng, 2 * SIM_US));
}

static double wall_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int sim_bench_hold(size_t pending, uint64_t ops, uint64_t seed, double *wall_s)
{
    struct sim *sim = sim_create(seed);
    struct hold_ev *evs = calloc(pending ? pending : 1, sizeof(*evs));
    if (!sim || !evs) {
        free(evs);
        sim_destroy(sim);
        return -1;
    }
    sim->check_evq = false; /* a benchmark measures the queue, not the checker */
    sim_rng_stream(sim, &hold.rng, "bench-hold");
    hold.left = ops;
    for (size_t i = 0; i < pending; i++) {
        sim_event_init(&evs[i].ev, hold_fire, NULL, "hold");
        sim_schedule_at(sim, &evs[i].ev, sim_rng_below(&hold.rng, 2 * SIM_US));
    }
    double t0 = wall_now();
    sim_run(sim, SIM_TIME_NEVER);
    double t1 = wall_now();
    if (wall_s)
        *wall_s = t1 - t0;
    sim_destroy(sim);
    free(evs);
    return 0;
}
