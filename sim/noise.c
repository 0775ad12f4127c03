/* Seeded noise sources (noise.h, docs/noise.md). */
#include "noise.h"

#include <math.h>
#include <stddef.h>

/* z_0.99 of the standard normal distribution. */
#define NOISE_Z99 2.3263478740408408

#define NS 1000.0

/* The published distributions.  Each says what it was fitted to; the
 * figures it was not fitted to are rows of `rnicsim validate`
 * (docs/validation.md, category "latency distribution"). */
const struct noise_preset noise_presets[] = {
    {"none", {NOISE_NONE, 0, 0, 0, 0}, "no variation"},
    /* A spinning poller noticing new data (host.cpu.wakeup): the loop's
     * phase when the line changes, the cache miss that brings it in, and
     * now and then an interrupt.  Fitted to the ConnectX-5 ib_write_lat
     * 8 B distribution of perftest 39.0 on a Ryzen 7000 host, back to back
     * (github.com/morrismeyer/warpforge, holmes-lab/mark1/mellanox-perf/
     * CONNECTX5.md): t_min 0.93, t_typical 0.99, t_avg 1.00, p99 1.15,
     * p99.9 1.40 us; one sample is half a round trip with two wakeups in
     * it, so per wakeup: at most 50 ns faster than typical, p99 +220 ns,
     * 0.2 % spikes of mean 500 ns (validate rows lat-dist-cx5-write-*;
     * checked on ib_send_lat of the same report and on a ConnectX-3
     * ib_read_lat, rows lat-dist-cx5-send-* and lat-dist-cx3-read-*). */
    {"poll-wakeup",
     {NOISE_LOGNORMAL, 50 * NS, 220 * NS, 0.002, 500 * NS},
     "fitted: ConnectX-5 ib_write_lat 8 B p50/p99/p99.9 (warpforge CONNECTX5.md)"},
};
const unsigned noise_presets_count = sizeof(noise_presets) / sizeof(noise_presets[0]);

const char *const noise_preset_names[] = {"none", "poll-wakeup", NULL};

_Static_assert(sizeof(noise_preset_names) / sizeof(noise_preset_names[0]) ==
                   sizeof(noise_presets) / sizeof(noise_presets[0]) + 1,
               "noise_preset_names must list every preset, in order");

void noise_init(struct noise *n, const struct sim *sim, const struct noise_dist *d,
                const char *stream_name)
{
    n->d = *d;
    n->sigma = 0;
    if (d->kind == NOISE_LOGNORMAL && d->a_ps > 0 && d->b_ps > 0)
        n->sigma = log(1.0 + d->b_ps / d->a_ps) / NOISE_Z99;
    else if (d->kind == NOISE_LOGNORMAL)
        n->d.kind = NOISE_NONE; /* degenerate: no spread */
    sim_rng_stream(sim, &n->rng, stream_name);
}

void noise_init_preset(struct noise *n, const struct sim *sim, unsigned idx,
                       const char *stream_name)
{
    noise_init(n, sim, &noise_presets[idx < noise_presets_count ? idx : 0].dist, stream_name);
}

/* Uniform in (0, 1]: safe for log(). */
static double unit_open(struct sim_rng *r)
{
    return 1.0 - sim_rng_uniform(r);
}

static double std_normal(struct sim_rng *r)
{
    /* Box-Muller, one value per draw (two uniforms) */
    double u1 = unit_open(r), u2 = sim_rng_uniform(r);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

int64_t noise_draw_ps(struct noise *n)
{
    double x = 0;
    switch (n->d.kind) {
    case NOISE_NONE:
        break;
    case NOISE_LOGNORMAL:
        x = n->d.a_ps * (exp(n->sigma * std_normal(&n->rng)) - 1.0);
        break;
    case NOISE_EXPONENTIAL:
        x = -n->d.a_ps * log(unit_open(&n->rng));
        break;
    case NOISE_UNIFORM:
        x = n->d.a_ps + (n->d.b_ps - n->d.a_ps) * sim_rng_uniform(&n->rng);
        break;
    }
    if (n->d.spike_p > 0 && sim_rng_uniform(&n->rng) < n->d.spike_p)
        x += -n->d.spike_mean_ps * log(unit_open(&n->rng));
    /* a bound far beyond any published tail keeps the cast defined */
    if (x > 1e15)
        x = 1e15;
    if (x < -1e15)
        x = -1e15;
    return (int64_t)llround(x);
}
