/* RIMA workloads (protocols/rima/workload.c): the memcached distribution of
 * the RIMA paper's Figure 2 (mean 231 B, 1 KB = 95.6th percentile, 5.4 KB =
 * 99.9th, max 1 MB), determinism per seed, transforms, arrivals, and the
 * slab / equi-spaced bins. */
#include <math.h>

#include "protocols/rima/workload.h"
#include "test.h"

#define NEAR(a, b, tol) CHECK(fabs((double)(a) - (double)(b)) <= (tol))

static void test_memcached_points(void)
{
    struct wl_size_dist d;
    wl_dist_memcached(&d, 1);
    NEAR(wl_dist_mean(&d), 231.0, 0.5);
    NEAR(wl_dist_cdf(&d, 1024), 0.956, 1e-9);
    NEAR(wl_dist_cdf(&d, 5530), 0.999, 1e-9);
    CHECK_EQ_U64(wl_dist_quantile(&d, 0.956), 1024);
    CHECK_EQ_U64(wl_dist_quantile(&d, 0.999), 5530);
    CHECK_EQ_U64(wl_dist_max(&d), 1u << 20);
    CHECK(wl_dist_cdf(&d, 1023) < 0.956);
    CHECK(wl_dist_cdf(&d, 1u << 20) == 1.0);
    /* CDF non-decreasing over the table */
    size_t n;
    const struct wl_cdf_point *p = wl_memcached_cdf(&n);
    int mono = 1;
    for (size_t i = 1; i < n; i++)
        mono &= p[i].size_bytes > p[i - 1].size_bytes && p[i].cdf >= p[i - 1].cdf;
    CHECK(mono);
}

static void test_memcached_sampling(void)
{
    struct wl_size_dist a, b;
    wl_dist_memcached(&a, 42);
    wl_dist_memcached(&b, 42);
    enum { N = 400000 };
    double sum = 0;
    unsigned le1k = 0, le5k = 0, same = 1;
    uint32_t mx = 0;
    for (unsigned i = 0; i < N; i++) {
        uint32_t s = wl_dist_sample(&a);
        same &= s == wl_dist_sample(&b);
        sum += s;
        le1k += s <= 1024;
        le5k += s <= 5530;
        if (s > mx)
            mx = s;
    }
    CHECK(same);
    /* the mean of a heavy tail converges slowly: 5 % */
    NEAR(sum / N, 231.0, 231.0 * 0.05);
    NEAR((double)le1k / N, 0.956, 0.002);
    NEAR((double)le5k / N, 0.999, 0.0003);
    CHECK(mx <= 1u << 20);
    /* another seed gives another sequence */
    wl_dist_memcached(&a, 42);
    wl_dist_memcached(&b, 43);
    unsigned diff = 0;
    for (unsigned i = 0; i < 100; i++)
        diff += wl_dist_sample(&a) != wl_dist_sample(&b);
    CHECK(diff > 50);
}

static void test_transforms(void)
{
    struct wl_size_dist d;
    wl_dist_memcached(&d, 7);
    wl_dist_set_transform(&d, 1.0, 16384);
    CHECK_EQ_U64(wl_dist_max(&d), 16384);
    double m16 = wl_dist_mean(&d);
    CHECK(m16 < 231.0 && m16 > 200.0);
    uint32_t mx = 0;
    for (int i = 0; i < 100000; i++) {
        uint32_t s = wl_dist_sample(&d);
        mx = s > mx ? s : mx;
    }
    CHECK(mx <= 16384);
    wl_dist_set_transform(&d, 2.0, 16384);
    double m2 = wl_dist_mean(&d);
    CHECK_EQ_U64(wl_dist_max(&d), 32768); /* truncate, then scale */
    wl_dist_set_transform(&d, 0.5, 16384);
    double mh = wl_dist_mean(&d);
    CHECK_EQ_U64(wl_dist_max(&d), 8192);
    CHECK(m2 > 1.99 * m16 && m2 < 2.0 * m16 + 0.01); /* exact doubling */
    CHECK(mh > 0.5 * m16 && mh < 0.5 * m16 + 1);
    /* x0.5: P(size <= 512) = P(original <= 1024) */
    NEAR(wl_dist_cdf(&d, 512), 0.956, 1e-9);
}

static void test_other_dists(void)
{
    struct wl_size_dist d;
    char err[256];
    wl_dist_fixed(&d, 300, 1);
    CHECK_EQ_U64(wl_dist_sample(&d), 300);
    NEAR(wl_dist_mean(&d), 300, 1e-9);
    CHECK(wl_dist_uniform(&d, 10, 0, 1) == -1);
    CHECK(wl_dist_uniform(&d, 10, 20, 1) == 0);
    NEAR(wl_dist_mean(&d), 15.0, 1e-9);
    NEAR(wl_dist_cdf(&d, 9), 0.0, 1e-12);
    NEAR(wl_dist_cdf(&d, 14), 5.0 / 11.0, 1e-12);
    int inrange = 1;
    for (int i = 0; i < 10000; i++) {
        uint32_t s = wl_dist_sample(&d);
        inrange &= s >= 10 && s <= 20;
    }
    CHECK(inrange);
    CHECK(wl_dist_parse(&d, "list:64:3,4KiB:1", 5, err, sizeof err) == 0);
    NEAR(wl_dist_mean(&d), 0.75 * 64 + 0.25 * 4096, 1e-9);
    NEAR(wl_dist_cdf(&d, 64), 0.75, 1e-12);
    NEAR(wl_dist_cdf(&d, 4095), 0.75, 1e-12);
    unsigned n64 = 0, other = 0;
    for (int i = 0; i < 40000; i++) {
        uint32_t s = wl_dist_sample(&d);
        n64 += s == 64;
        other += s != 64 && s != 4096;
    }
    CHECK_EQ_U64(other, 0);
    NEAR(n64 / 40000.0, 0.75, 0.01);
    CHECK(wl_dist_parse(&d, "list:64", 5, err, sizeof err) == -1);
    CHECK_STR_CONTAINS(err, "SIZE:WEIGHT");
    CHECK(wl_dist_parse(&d, "list:64:0", 5, err, sizeof err) == -1);
    CHECK(wl_dist_parse(&d, "list:64:1,64:2", 5, err, sizeof err) == -1);
    CHECK(wl_dist_parse(&d, "gauss", 5, err, sizeof err) == -1);
    CHECK_STR_CONTAINS(err, "unknown distribution");
    CHECK(wl_dist_parse(&d, "uniform:5:2", 5, err, sizeof err) == -1);
    CHECK(wl_dist_parse(&d, "fixed:2KiB", 5, err, sizeof err) == 0);
    CHECK_EQ_U64(wl_dist_sample(&d), 2048);
}

static void test_arrivals(void)
{
    struct wl_arrival a, b;
    CHECK(wl_arrival_poisson(&a, 0, 1) == -1);
    CHECK(wl_arrival_poisson(&a, 1e6, 9) == 0);
    CHECK(wl_arrival_poisson(&b, 1e6, 9) == 0);
    double t = 0;
    int same = 1;
    for (int i = 0; i < 100000; i++) {
        double g = wl_arrival_next_gap_ns(&a, 100);
        same &= g == wl_arrival_next_gap_ns(&b, 100);
        t += g;
    }
    CHECK(same);
    NEAR(t / 100000, 1000.0, 15.0); /* mean gap 1 us at 1 M/s */
    /* bursty: 8 messages of 1000 B at 8 Gb/s (1 us each), 0.5 M msg/s
     * long-run (mean gap 2 us) */
    CHECK(wl_arrival_bursty(&a, 5e5, 8e9, 8, 1000, 3) == 0);
    CHECK(wl_arrival_bursty(&b, 1e6, 8e9, 8, 1000, 3) == -1); /* = line rate */
    t = 0;
    int inburst_ok = 1;
    for (int i = 0; i < 80000; i++) {
        double g = wl_arrival_next_gap_ns(&a, 1000);
        if (i % 8 != 7)
            inburst_ok &= g == 1000.0;
        t += g;
    }
    CHECK(inburst_ok);
    NEAR(t / 80000, 2000.0, 40.0);
}

static void test_bins(void)
{
    uint32_t cls[WL_SLAB_MAX_CLASSES];
    size_t n = wl_slab_classes(1.25, 1u << 20, cls, WL_SLAB_MAX_CLASSES);
    CHECK_EQ_U64(n, 42); /* Section 2.2 */
    CHECK_EQ_U64(cls[0], 96);
    CHECK_EQ_U64(cls[1], 120);
    CHECK_EQ_U64(cls[2], 152);
    CHECK_EQ_U64(cls[40], 771184); /* memcached 1.4: slab class 41 */
    CHECK_EQ_U64(cls[41], 1048576);

    struct wl_size_dist d;
    struct wl_bin bins[64];
    wl_dist_memcached(&d, 1);
    CHECK_EQ_U64(wl_bins_equispaced(&d, 4, bins, 64), 4);
    CHECK_EQ_U64(bins[0].lo_bytes, 1);
    CHECK_EQ_U64(bins[0].hi_bytes, 262144);
    CHECK_EQ_U64(bins[3].hi_bytes, 1048576);
    CHECK_EQ_U64(bins[3].buf_bytes, 1048576);
    double tot = 0;
    for (int i = 0; i < 4; i++)
        tot += bins[i].prob;
    NEAR(tot, 1.0, 1e-12);
    CHECK_EQ_U64(wl_bin_of(bins, 4, 1), 0);
    CHECK_EQ_U64(wl_bin_of(bins, 4, 262144), 0);
    CHECK_EQ_U64(wl_bin_of(bins, 4, 262145), 1);

    /* slab merge: 42 classes, one bin each */
    CHECK_EQ_U64(wl_bins_slab(&d, 42, bins, 64), 42);
    CHECK_EQ_U64(bins[0].hi_bytes, 96);
    NEAR(bins[0].prob, wl_dist_cdf(&d, 96), 1e-12);
    /* 2 bins: min-max split; hand check: the cut is where the CDF crosses
     * 0.5 - the first bin is the class ending at or after the median, or
     * the one before it, whichever has the smaller maximum */
    CHECK_EQ_U64(wl_bins_slab(&d, 2, bins, 64), 2);
    double m2 = fmax(bins[0].prob, bins[1].prob);
    CHECK(m2 >= 0.5 && m2 < 0.75);
    CHECK_EQ_U64(bins[1].hi_bytes, 1u << 20);
    CHECK_EQ_U64(bins[1].lo_bytes, bins[0].hi_bytes + 1);
    /* a hand case: list 100:1,200:1,300:1,400:1 over classes 96,120,...:
     * non-empty classes (..120], (..240], (..304], (..480] with 1/4 each;
     * 2 bins -> {120,240} and {304,480} */
    char err[128];
    CHECK(wl_dist_parse(&d, "list:100:1,200:1,300:1,400:1", 1, err, sizeof err) == 0);
    CHECK_EQ_U64(wl_bins_slab(&d, 2, bins, 64), 2);
    CHECK_EQ_U64(bins[0].lo_bytes, 1);
    CHECK_EQ_U64(bins[0].hi_bytes, 240);
    CHECK_EQ_U64(bins[1].hi_bytes, 400); /* clipped to the max size */
    NEAR(bins[0].prob, 0.5, 1e-12);
    NEAR(bins[1].prob, 0.5, 1e-12);
    /* more bins than non-empty classes: one per class */
    CHECK_EQ_U64(wl_bins_slab(&d, 10, bins, 64), 4);
    /* balance messages vs bytes: 100 B x 0.5, 200 B x 0.3, 400 B x 0.2 ->
     * classes (..120] 0.5, (..240] 0.3, (..400] 0.2.  Messages: {120} {240,
     * 400} (max 0.5).  Bytes: {120,240} {400}: max(0.8 x 240, 0.2 x 400) =
     * 192 beats max(0.5 x 120, 0.5 x 400) = 200. */
    CHECK(wl_dist_parse(&d, "list:100:0.5,200:0.3,400:0.2", 1, err, sizeof err) == 0);
    CHECK_EQ_U64(wl_bins_slab(&d, 2, bins, 64), 2);
    CHECK_EQ_U64(bins[0].hi_bytes, 120);
    CHECK_EQ_U64(bins[1].hi_bytes, 400);
    CHECK_EQ_U64(wl_bins_slab_balanced(&d, 2, WL_BALANCE_BYTES, bins, 64), 2);
    CHECK_EQ_U64(bins[0].hi_bytes, 240);
    CHECK_EQ_U64(bins[1].lo_bytes, 241);
    NEAR(bins[0].prob, 0.8, 1e-12);
}

int main(void)
{
    test_memcached_points();
    test_memcached_sampling();
    test_transforms();
    test_other_dists();
    test_arrivals();
    test_bins();
    return test_summary();
}
