/* The analytic footprint model (protocols/rima/footprint_model.c) against
 * hand-computed values: a 2-bin toy case, and the paper's own numbers
 * (Section 5.1.1: single SRQ reserve 143 GB, RIMA 7 MB; Section 5.2.1:
 * the > 1 KB bin of 32 processes 33.6 GB). */
#include <math.h>

#include "protocols/rima/footprint_model.h"
#include "test.h"

#define NEAR(a, b, tol) CHECK(fabs((double)(a) - (double)(b)) <= (tol))

static void test_toy(void)
{
    /* line 8 Gb/s = 1e9 B/s; 100 M msg/s at 8 B -> e(8) = 100e6 x 64 / 8e9
     * = 0.8; largest message 1000 B; L = 1 ms. */
    struct fp_model m = {8e9, 100e6, 8, 1000, 1e-3};
    NEAR(fp_msgrate(&m, 1), 100e6, 1e-6);
    NEAR(fp_msgrate(&m, 8), 100e6, 1e-6);
    /* e(101) = 0.8 + 0.2 x 93 / 992 = 0.81875; 0.81875 x 1e9 / 101 */
    NEAR(fp_msgrate(&m, 101), 8106435.6435644, 1e-3);
    NEAR(fp_msgrate(&m, 1000), 1e6, 1e-6); /* the line rate */
    /* bins (1..100] buf 100 p 0.9, (101..1000] buf 1000 p 0.1 */
    struct wl_bin bins[2] = {{1, 100, 100, 0.9}, {101, 1000, 1000, 0.1}};
    NEAR(fp_srq_reserve_bytes(&m, 1, 100), 10e6, 1e-3);             /* 100e6 x 1e-3 x 100 */
    NEAR(fp_srq_reserve_bytes(&m, 101, 1000), 8106435.64356, 1e-3); /* x 1e-3 x 1000 */
    NEAR(fp_srq_reserve_total_bytes(&m, bins, 2), 18106435.64356, 1e-3);
    NEAR(fp_rima_reserve_bytes(&m), 1e6, 1e-6);
    /* 100 outstanding: 90 x 100 + 10 x 1000 */
    NEAR(fp_srq_active_model_bytes(bins, 2, 100), 19000, 1e-6);
}

static void test_paper_numbers(void)
{
    struct fp_model m;
    fp_model_default(&m, 56e9, 1u << 20);
    /* single SRQ: 137e6 x 1e-3 x 1 MiB */
    NEAR(fp_srq_reserve_bytes(&m, 1, 1u << 20), 143654912000.0, 1.0);
    NEAR(fp_rima_reserve_bytes(&m), 7e6, 1e-6);
    /* the 1025 B .. 1 MiB bin, 32 processes: 33.6 GiB */
    NEAR(fp_srq_reserve_bytes(&m, 1025, 1u << 20) * 32 / 1073741824.0, 33.589, 0.001);
}

int main(void)
{
    test_toy();
    test_paper_numbers();
    return test_summary();
}
