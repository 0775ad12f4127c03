/* Seeded noise sources: timing variation drawn from named distributions
 * that come from published measurements (docs/noise.md).
 *
 * A model block that has a cost with run-to-run variation on hardware (a
 * polling thread noticing new data, later an OS interrupting a thread)
 * keeps one `struct noise` per source instance and adds a draw to the
 * cost.  Draws are signed offsets with median zero for the body of a
 * distribution, so the calibrated constants of the profiles stay the
 * medians they were fitted to (perftest's "typical" is a median) while
 * the tail above them comes from the distribution; noise_apply clamps
 * the sum at zero.
 *
 * Every source draws from its own sim_rng stream, named by the caller
 * (e.g. "noise/wakeup/h3"), so turning one on does not move the draws of
 * any other, and a run is byte-identical for a given seed.
 *
 * Distributions (struct noise_dist):
 *   NOISE_NONE         always 0 (off)
 *   NOISE_LOGNORMAL    fast * exp(sigma Z) - fast: median 0, never below
 *                      -fast, 99th percentile +p99 (sigma from p99/fast)
 *   NOISE_EXPONENTIAL  Exp(mean): a non-negative extra delay
 *   NOISE_UNIFORM      uniform in [lo, hi]
 * each optionally with a rare spike: with probability spike_p per draw an
 * extra Exp(spike_mean) delay (interrupts, preemption, SMIs).
 *
 * One kind is not drawn per cost but is a function of time: interruptions
 * of a CPU (OS timer ticks) that take it away from whatever runs on it.
 *   NOISE_PERIODIC     the CPU is stalled during [phase + k period,
 *                      phase + k period + stall) for every k >= 0; the
 *                      phase is drawn once, uniform in [0, period), from
 *                      the source's stream (so CPUs are not in lock step)
 * A CPU model asks how long work takes around the stalls
 * (noise_busy_end), how much of an interval they took (noise_stalled_ps)
 * and when a thread that was waiting can run again (noise_resume); all
 * three are pure functions of the phase, so a computation whose speed
 * changes midway can be re-planned exactly (sim/host/cpu.c).
 * Presets (noise_presets[]) name the published ones; parameter tables
 * refer to them by name (noise_preset_names, "none" first). */
#ifndef RNICSIM_SIM_NOISE_H
#define RNICSIM_SIM_NOISE_H

#include <stdbool.h>
#include <stdint.h>

#include "sim.h"

enum noise_kind {
    NOISE_NONE,
    NOISE_LOGNORMAL,
    NOISE_EXPONENTIAL,
    NOISE_UNIFORM,
    NOISE_PERIODIC,
};

struct noise_dist {
    enum noise_kind kind;
    double a_ps;          /* lognormal: fast; exponential: mean; uniform: lo; periodic: period */
    double b_ps;          /* lognormal: p99 above the median; uniform: hi; periodic: stall */
    double spike_p;       /* probability of a spike per draw (0 = none) */
    double spike_mean_ps; /* mean of a spike's extra delay (exponential) */
};

/* A published distribution with a name. */
struct noise_preset {
    const char *name;
    struct noise_dist dist;
    const char *source; /* where it comes from, what it was fitted to */
};
extern const struct noise_preset noise_presets[];
extern const unsigned noise_presets_count;
/* The preset names in table order, NULL-terminated ("none" is index 0):
 * an enum parameter stores the index. */
extern const char *const noise_preset_names[];

struct noise {
    struct noise_dist d;
    double sigma; /* lognormal shape, derived */
    struct sim_rng rng;
    /* NOISE_PERIODIC, derived: period, stall and this instance's phase */
    sim_time_t period_ps, stall_ps, phase_ps;
};

/* Set `n` up to draw from `d` on the stream (sim seed, stream_name). */
void noise_init(struct noise *n, const struct sim *sim, const struct noise_dist *d,
                const char *stream_name);
/* Whether preset `idx` draws a delay (a distribution, not one of the
 * interruption sources): what a per-operation noise parameter accepts.
 * Out of range: false. */
bool noise_preset_is_delay(unsigned idx);
/* Its name for a message ("?" out of range). */
const char *noise_preset_name(unsigned idx);
/* The same from preset number `idx` (out of range: none). */
void noise_init_preset(struct noise *n, const struct sim *sim, unsigned idx,
                       const char *stream_name);
static inline bool noise_on(const struct noise *n)
{
    return n->d.kind != NOISE_NONE || n->d.spike_p > 0;
}
/* One draw: a signed offset in ps (0 for NOISE_PERIODIC, which is not
 * drawn per cost). */
int64_t noise_draw_ps(struct noise *n);
static inline bool noise_periodic(const struct noise *n)
{
    return n->d.kind == NOISE_PERIODIC;
}
/* NOISE_PERIODIC (other kinds: no stalls, so a, b - a, start + busy, t):
 * the stall time inside [a, b); the end of `busy` ps of work started at
 * `start` when the stalls take the CPU away; `t`, or the end of the stall
 * that covers t. */
sim_time_t noise_stalled_ps(const struct noise *n, sim_time_t a, sim_time_t b);
sim_time_t noise_busy_end(const struct noise *n, sim_time_t start, sim_time_t busy);
sim_time_t noise_resume(const struct noise *n, sim_time_t t);
/* base + one draw, at least 0 (base unchanged and no draw when off). */
static inline sim_time_t noise_apply(struct noise *n, sim_time_t base)
{
    if (!noise_on(n))
        return base;
    int64_t d = noise_draw_ps(n);
    if (d < 0 && (uint64_t)(-d) >= base)
        return 0;
    return (sim_time_t)((int64_t)base + d);
}

#endif /* RNICSIM_SIM_NOISE_H */
