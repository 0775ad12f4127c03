/* Histograms (exact nearest-rank percentiles, buckets) and RNG streams. */
#include <stdlib.h>

#include "../../sim/sim.h"
#include "test.h"

static void test_percentiles(void)
{
    struct sim_hist h;
    sim_hist_init(&h);
    CHECK_EQ_U64(sim_hist_percentile(&h, 50), 0);
    /* 1..10 inserted in reverse: nearest rank p50 = 5, p90 = 9, p99 = 10 */
    for (uint64_t v = 10; v >= 1; v--)
        sim_hist_add(&h, v * 100);
    CHECK_EQ_U64(sim_hist_count(&h), 10);
    CHECK_EQ_U64(sim_hist_percentile(&h, 50), 500);
    CHECK_EQ_U64(sim_hist_percentile(&h, 90), 900);
    CHECK_EQ_U64(sim_hist_percentile(&h, 91), 1000);
    CHECK_EQ_U64(sim_hist_percentile(&h, 99), 1000);
    CHECK_EQ_U64(sim_hist_percentile(&h, 100), 1000);
    CHECK_EQ_U64(sim_hist_percentile(&h, 10), 100);
    CHECK_EQ_U64(sim_hist_percentile(&h, 10.5), 200);
    CHECK(sim_hist_mean(&h) == 550.0);
    CHECK_EQ_U64(h.min, 100);
    CHECK_EQ_U64(h.max, 1000);
    /* adding after a percentile query re-sorts */
    sim_hist_add(&h, 1);
    CHECK_EQ_U64(sim_hist_percentile(&h, 1), 1);
    sim_hist_free(&h);

    /* random samples against a sorted copy */
    struct sim_rng r;
    sim_rng_seed(&r, 42, "hist");
    sim_hist_init(&h);
    uint64_t *ref = malloc(1001 * sizeof(*ref));
    for (int i = 0; i < 1001; i++) {
        ref[i] = sim_rng_below(&r, 1000000);
        sim_hist_add(&h, ref[i]);
    }
    for (int i = 1; i < 1001; i++) /* insertion sort, independent of qsort */
        for (int j = i; j > 0 && ref[j - 1] > ref[j]; j--) {
            uint64_t t = ref[j];
            ref[j] = ref[j - 1];
            ref[j - 1] = t;
        }
    CHECK_EQ_U64(sim_hist_percentile(&h, 50), ref[500]);   /* ceil(500.5) = 501st */
    CHECK_EQ_U64(sim_hist_percentile(&h, 99), ref[990]);   /* ceil(990.99) = 991st */
    CHECK_EQ_U64(sim_hist_percentile(&h, 99.9), ref[999]); /* ceil(999.999) = 1000th */
    CHECK_EQ_U64(sim_hist_percentile(&h, 100), ref[1000]);
    free(ref);
    sim_hist_free(&h);
}

static void test_buckets(void)
{
    for (uint64_t v = 0; v < 8; v++)
        CHECK_EQ_U64(sim_hist_bucket(v), v);
    CHECK_EQ_U64(sim_hist_bucket(8), 8);
    CHECK_EQ_U64(sim_hist_bucket(15), 15);
    CHECK_EQ_U64(sim_hist_bucket(16), 16);
    CHECK_EQ_U64(sim_hist_bucket(17), 16); /* 16..17 share a bucket */
    CHECK_EQ_U64(sim_hist_bucket(18), 17);
    unsigned bad = 0, prev = 0;
    for (uint64_t v = 1; v < (1ull << 62); v = v * 3 / 2 + 1) {
        unsigned b = sim_hist_bucket(v);
        if (b < prev || b >= 64 * 8 || sim_hist_bucket_low(b) > v ||
            (b + 1 < 64 * 8 && sim_hist_bucket_low(b + 1) <= v))
            bad++;
        prev = b;
    }
    CHECK_EQ_U64(bad, 0);
    CHECK(sim_hist_bucket(UINT64_MAX) < 64 * 8);
}

static void test_rng(void)
{
    struct sim_rng a, b, c;
    sim_rng_seed(&a, 1, "nic0");
    sim_rng_seed(&b, 1, "nic0");
    sim_rng_seed(&c, 1, "nic1");
    unsigned same = 0, diff = 0;
    for (int i = 0; i < 100; i++) {
        uint64_t x = sim_rng_u64(&a), y = sim_rng_u64(&b), z = sim_rng_u64(&c);
        same += x == y;
        diff += x != z;
    }
    CHECK_EQ_U64(same, 100);
    CHECK_EQ_U64(diff, 100);
    /* different seeds differ */
    sim_rng_seed(&a, 1, "x");
    sim_rng_seed(&b, 2, "x");
    CHECK(sim_rng_u64(&a) != sim_rng_u64(&b));
    /* below(n) in range and roughly uniform (chi-square, 10 bins) */
    unsigned bins[10] = {0};
    bool in_range = true;
    for (int i = 0; i < 100000; i++) {
        uint64_t v = sim_rng_below(&a, 10);
        in_range &= v < 10;
        bins[v < 10 ? v : 0]++;
    }
    CHECK(in_range);
    double chi = 0;
    for (int i = 0; i < 10; i++)
        chi += (bins[i] - 10000.0) * (bins[i] - 10000.0) / 10000.0;
    CHECK(chi < 27.9); /* p = 0.001 critical value, 9 degrees of freedom */
    double u_min = 1, u_max = 0, u_sum = 0;
    for (int i = 0; i < 100000; i++) {
        double u = sim_rng_uniform(&a);
        u_min = u < u_min ? u : u_min;
        u_max = u > u_max ? u : u_max;
        u_sum += u;
    }
    CHECK(u_min >= 0.0 && u_max < 1.0);
    CHECK(u_sum / 100000 > 0.49 && u_sum / 100000 < 0.51);
    CHECK_EQ_U64(sim_rng_below(&a, 1), 0);
    CHECK_EQ_U64(sim_rng_below(&a, 0), 0);
}

int main(void)
{
    test_percentiles();
    test_buckets();
    test_rng();
    return test_summary();
}
