/* Seeded noise sources (sim/noise.c, docs/noise.md):
 *  - lognormal: median 0, p99 at +p99, never below -fast;
 *  - exponential: mean as given, never negative; uniform within [lo, hi];
 *  - spikes: about spike_p of the draws carry an extra delay;
 *  - the same (seed, stream) gives the same draws; another stream or seed
 *    other draws; "none" never draws and noise_apply leaves the base;
 *  - noise_apply clamps at zero; the preset table and names agree;
 *  - periodic interruptions (OS ticks): the end of work around the
 *    stalls, the stall time of an interval and the resume time, by hand
 *    for a known phase; the phase is the same per (seed, stream) and
 *    another for another seed. */
#include <stdlib.h>
#include <string.h>

#include "../../sim/noise.h"
#include "test.h"

enum { N = 200000 };

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static int64_t *draws(struct noise *n)
{
    int64_t *v = malloc(N * sizeof(*v));
    for (int i = 0; i < N; i++)
        v[i] = noise_draw_ps(n);
    qsort(v, N, sizeof(*v), cmp_i64);
    return v;
}

static void test_lognormal(struct sim *sim)
{
    struct noise_dist d = {NOISE_LOGNORMAL, 50000, 220000, 0, 0};
    struct noise n;
    noise_init(&n, sim, &d, "t/ln");
    CHECK(noise_on(&n));
    int64_t *v = draws(&n);
    int64_t p50 = v[N / 2], p99 = v[N * 99 / 100];
    CHECK(p50 > -2000 && p50 < 2000);       /* median 0 (+-2 ns) */
    CHECK(p99 > 210000 && p99 < 230000);    /* +220 ns (+-10) */
    CHECK(v[0] >= -50000 && v[0] < -40000); /* never faster than -fast */
    free(v);
}

static void test_exp_uniform_spike(struct sim *sim)
{
    struct noise n;
    noise_init(&n, sim, &(struct noise_dist){NOISE_EXPONENTIAL, 100000, 0, 0, 0}, "t/exp");
    double sum = 0;
    int neg = 0;
    for (int i = 0; i < N; i++) {
        int64_t x = noise_draw_ps(&n);
        sum += (double)x;
        neg += x < 0;
    }
    CHECK(neg == 0);
    CHECK(sum / N > 98000 && sum / N < 102000);

    noise_init(&n, sim, &(struct noise_dist){NOISE_UNIFORM, -3000, 7000, 0, 0}, "t/uni");
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    for (int i = 0; i < N; i++) {
        int64_t x = noise_draw_ps(&n);
        lo = x < lo ? x : lo;
        hi = x > hi ? x : hi;
    }
    CHECK(lo >= -3000 && lo < -2900 && hi <= 7000 && hi > 6900);

    /* spikes only: 1 % of draws, mean 1 us */
    noise_init(&n, sim, &(struct noise_dist){NOISE_NONE, 0, 0, 0.01, 1000000}, "t/spk");
    CHECK(noise_on(&n));
    int spikes = 0;
    for (int i = 0; i < N; i++)
        spikes += noise_draw_ps(&n) != 0;
    CHECK(spikes > N / 100 * 9 / 10 && spikes < N / 100 * 11 / 10);
}

static void test_streams_and_apply(void)
{
    struct sim *a = sim_create(7), *b = sim_create(7), *c = sim_create(8);
    struct noise na, nb, nc, nd;
    noise_init_preset(&na, a, 1, "noise/wakeup/h0");
    noise_init_preset(&nb, b, 1, "noise/wakeup/h0");
    noise_init_preset(&nc, c, 1, "noise/wakeup/h0");
    noise_init_preset(&nd, a, 1, "noise/wakeup/h1");
    int same = 0, diff_seed = 0, diff_stream = 0;
    for (int i = 0; i < 1000; i++) {
        int64_t x = noise_draw_ps(&na), y = noise_draw_ps(&nb);
        same += x == y;
        diff_seed += noise_draw_ps(&nc) != y;
        diff_stream += noise_draw_ps(&nd) != x;
    }
    CHECK_EQ_U64(same, 1000);
    CHECK(diff_seed > 990 && diff_stream > 990);

    /* none: no draw, the base unchanged */
    struct noise off;
    noise_init_preset(&off, a, 0, "x");
    CHECK(!noise_on(&off));
    CHECK_EQ_U64(noise_apply(&off, 12345), 12345);
    /* clamp at zero: a base of 0 never goes negative */
    int zero = 0;
    for (int i = 0; i < 1000; i++)
        zero += noise_apply(&na, 0) == 0;
    CHECK(zero > 400 && zero < 1000); /* about half the draws are negative */
    /* presets: names in table order, "none" first */
    CHECK(noise_presets_count >= 2);
    for (unsigned i = 0; i < noise_presets_count; i++)
        CHECK(noise_preset_names[i] && strcmp(noise_preset_names[i], noise_presets[i].name) == 0);
    CHECK(noise_preset_names[noise_presets_count] == NULL);
    CHECK(strcmp(noise_preset_names[0], "none") == 0);
    sim_destroy(a);
    sim_destroy(b);
    sim_destroy(c);
}

/* Ticks every 4 ms lasting 5 us, phase 1 ms: stalls [1, 1.005), [5,
 * 5.005), [9, 9.005) ms ... */
static void test_periodic(struct sim *sim)
{
    struct noise n;
    noise_init(&n, sim, &(struct noise_dist){NOISE_PERIODIC, 4e9, 5e6, 0, 0}, "t/tick");
    CHECK(noise_on(&n) && noise_periodic(&n));
    CHECK(n.phase_ps < 4 * SIM_MS);
    CHECK(noise_draw_ps(&n) == 0); /* not drawn per cost */
    n.phase_ps = 1 * SIM_MS;
    /* 10 ms of work from 0: 1 ms, stall, 3.995 ms, stall, 3.995 ms, stall,
     * the last 1.01 ms: ends at 10.015 ms */
    CHECK_EQ_U64(noise_busy_end(&n, 0, 10 * SIM_MS), 10015 * SIM_US);
    CHECK_EQ_U64(noise_stalled_ps(&n, 0, 10015 * SIM_US), 15 * SIM_US);
    /* work that ends exactly where a stall starts does not wait for it */
    CHECK_EQ_U64(noise_busy_end(&n, 0, 1 * SIM_MS), 1 * SIM_MS);
    /* work starting inside a stall starts when it ends */
    CHECK_EQ_U64(noise_busy_end(&n, 5002 * SIM_US, 1 * SIM_US), 5006 * SIM_US);
    CHECK_EQ_U64(noise_stalled_ps(&n, 5002 * SIM_US, 9002 * SIM_US), 3 * SIM_US + 2 * SIM_US);
    CHECK_EQ_U64(noise_resume(&n, 5002 * SIM_US), 5005 * SIM_US);
    CHECK_EQ_U64(noise_resume(&n, 5005 * SIM_US), 5005 * SIM_US);
    CHECK_EQ_U64(noise_resume(&n, 500 * SIM_US), 500 * SIM_US);
    /* the presets: 4 ms / 5 us and 1 ms / 5 us */
    unsigned i250 = 0, i1000 = 0;
    for (unsigned i = 0; noise_preset_names[i]; i++) {
        if (!strcmp(noise_preset_names[i], "os-tick-250hz"))
            i250 = i;
        if (!strcmp(noise_preset_names[i], "os-tick-1000hz"))
            i1000 = i;
    }
    CHECK(i250 && i1000);
    noise_init_preset(&n, sim, i250, "t/os");
    CHECK_EQ_U64(n.period_ps, 4 * SIM_MS);
    CHECK_EQ_U64(n.stall_ps, 5 * SIM_US);
    sim_time_t phase_a = n.phase_ps;
    noise_init_preset(&n, sim, i1000, "t/os");
    CHECK_EQ_U64(n.period_ps, 1 * SIM_MS);
    /* determinism per seed: the same seed and stream, the same phase */
    struct sim *again = sim_create(1), *other = sim_create(2);
    noise_init_preset(&n, again, i250, "t/os");
    CHECK_EQ_U64(n.phase_ps, phase_a);
    noise_init_preset(&n, other, i250, "t/os");
    CHECK(n.phase_ps != phase_a);
    sim_destroy(again);
    sim_destroy(other);
    /* degenerate: a stall as long as the period is none */
    noise_init(&n, sim, &(struct noise_dist){NOISE_PERIODIC, 1e6, 1e6, 0, 0}, "t/x");
    CHECK(!noise_on(&n));
    CHECK_EQ_U64(noise_busy_end(&n, 7, 5), 12);
}

int main(void)
{
    struct sim *sim = sim_create(1);
    test_periodic(sim);
    test_lognormal(sim);
    test_exp_uniform_spike(sim);
    sim_destroy(sim);
    test_streams_and_apply();
    return test_summary();
}
