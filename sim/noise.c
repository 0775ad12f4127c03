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
    /* The root complex's time to answer a DMA read (pcie.read_noise): the
     * spread of pcie-bench's 64 B DMA-read latency, host-warm (8 KiB
     * window), on the NFP6000 + Xeon E5-2620 v3 host whose median (546 ns)
     * pcie.read_latency is fitted to (github.com/pcie-bench/data,
     * nfp6000-1.2GHz_hsw-Xeon-E5-2620v3_dell-t630/lat_dma_details_cdf.txt,
     * 16.7 M samples, 13.3 ns timer): min 520, p50 547, p99 573, p99.9
     * 600 ns, so at most 27 ns faster than the median and p99 +26 ns.
     * The lognormal then gives p99.9 +40 ns (measured +53).  Not fitted:
     * the same host's 2 KiB reads (p50 1147, p99 1160, p99.9 1173: the
     * spread does not grow with size, as one draw per read has it) and the
     * Broadwell E5-2630 v4 host (p50 560, p99 573, p99.9 587). */
    {"pcie-read",
     {NOISE_LOGNORMAL, 27 * NS, 26 * NS, 0, 0},
     "fitted: pcie-bench 64 B DMA read, host-warm, Xeon E5-2620 v3 (min/p50/p99)"},
    /* OS interruptions of a CPU (host.os.noise, docs/host.md "OS noise"):
     * the periodic scheduling-clock tick of a kernel without nohz_full.
     * Period: CONFIG_HZ, 250 in Debian's and Ubuntu's kernels (the RB2
     * testbed runs Ubuntu 18.04), 1000 in RHEL's.  Cost per tick: Tsafrir
     * (ExpCS'07, "The context-switch overhead inflicted by hardware
     * interrupts") measured the tick's direct + indirect (cache) overhead
     * at 0.5-1.5 % of a CPU at 1000 Hz, i.e. 5-15 us per tick, falling
     * with processor speed: the low end, 5 us. */
    {"os-tick-250hz",
     {NOISE_PERIODIC, 4e6 * NS, 5e3 * NS, 0, 0} /* 4 ms, 5 us */,
     "Linux tick at CONFIG_HZ=250 (Debian/Ubuntu), 5 us each (Tsafrir, ExpCS'07: 0.5-1.5 % at 1 "
     "kHz)"},
    {"os-tick-1000hz",
     {NOISE_PERIODIC, 1e6 * NS, 5e3 * NS, 0, 0} /* 1 ms, 5 us */,
     "Linux tick at CONFIG_HZ=1000 (RHEL), 5 us each (Tsafrir, ExpCS'07: 0.5-1.5 % at 1 kHz)"},
};
const unsigned noise_presets_count = sizeof(noise_presets) / sizeof(noise_presets[0]);

const char *const noise_preset_names[] = {"none",          "poll-wakeup",    "pcie-read",
                                          "os-tick-250hz", "os-tick-1000hz", NULL};

_Static_assert(sizeof(noise_preset_names) / sizeof(noise_preset_names[0]) ==
                   sizeof(noise_presets) / sizeof(noise_presets[0]) + 1,
               "noise_preset_names must list every preset, in order");

void noise_init(struct noise *n, const struct sim *sim, const struct noise_dist *d,
                const char *stream_name)
{
    n->d = *d;
    n->sigma = 0;
    n->period_ps = n->stall_ps = n->phase_ps = 0;
    if (d->kind == NOISE_LOGNORMAL && d->a_ps > 0 && d->b_ps > 0)
        n->sigma = log(1.0 + d->b_ps / d->a_ps) / NOISE_Z99;
    else if (d->kind == NOISE_LOGNORMAL)
        n->d.kind = NOISE_NONE; /* degenerate: no spread */
    sim_rng_stream(sim, &n->rng, stream_name);
    if (d->kind == NOISE_PERIODIC) {
        n->period_ps = d->a_ps >= 1 ? (sim_time_t)llround(d->a_ps) : 0;
        n->stall_ps = d->b_ps >= 1 ? (sim_time_t)llround(d->b_ps) : 0;
        if (!n->period_ps || !n->stall_ps || n->stall_ps >= n->period_ps) {
            n->d.kind = NOISE_NONE; /* degenerate: never, or always, stalled */
            n->period_ps = n->stall_ps = 0;
        } else {
            n->phase_ps = sim_rng_below(&n->rng, n->period_ps);
        }
        n->d.spike_p = 0; /* not drawn per cost */
    }
}

/* Stall time in [0, t). */
static sim_time_t stalled_upto(const struct noise *n, sim_time_t t)
{
    if (t <= n->phase_ps)
        return 0;
    sim_time_t k = (t - n->phase_ps) / n->period_ps, r = (t - n->phase_ps) % n->period_ps;
    return k * n->stall_ps + (r < n->stall_ps ? r : n->stall_ps);
}

sim_time_t noise_stalled_ps(const struct noise *n, sim_time_t a, sim_time_t b)
{
    if (!noise_periodic(n) || b <= a)
        return 0;
    return stalled_upto(n, b) - stalled_upto(n, a);
}

/* W(t) = t - stalled_upto(t), the CPU time available in [0, t), grows by
 * period - stall per period; its smallest inverse gives the end. */
sim_time_t noise_busy_end(const struct noise *n, sim_time_t start, sim_time_t busy)
{
    if (!noise_periodic(n) || !busy)
        return start + busy;
    sim_time_t target = start - stalled_upto(n, start) + busy;
    if (target <= n->phase_ps)
        return target;
    sim_time_t per = n->period_ps - n->stall_ps, x = target - n->phase_ps;
    sim_time_t k = x / per, r = x % per;
    if (r == 0)
        return n->phase_ps + k * n->period_ps; /* ends as stall k begins */
    return n->phase_ps + k * n->period_ps + n->stall_ps + r;
}

sim_time_t noise_resume(const struct noise *n, sim_time_t t)
{
    if (!noise_periodic(n) || t < n->phase_ps)
        return t;
    sim_time_t r = (t - n->phase_ps) % n->period_ps;
    return r < n->stall_ps ? t + (n->stall_ps - r) : t;
}

bool noise_preset_is_delay(unsigned idx)
{
    return idx < noise_presets_count && noise_presets[idx].dist.kind != NOISE_PERIODIC;
}

const char *noise_preset_name(unsigned idx)
{
    return idx < noise_presets_count ? noise_presets[idx].name : "?";
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
    case NOISE_PERIODIC:
        return 0; /* a function of time, not a draw */
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
