/* RIMA workloads (issue 5): message-size distributions, arrival processes
 * and the size bins that map messages to receive queues.
 *
 * Xue, Vijaykumar, Thottethodi, "Network Interface Architecture for Remote
 * Indirect Memory Access (RIMA) in Datacenters", TACO 2020: Figure 2 (the
 * Facebook memcached tuple-size distribution), Section 4.1 (memcached's slab
 * classes as bins, equi-spaced bins), Section 5.1 (truncation at 16 KB,
 * scaling by 0.5x / 2x).
 *
 * Plain C11, no globals: every generator is a struct with its own seeded
 * RNG, so several instances run side by side (coroutines) and the same seed
 * gives the same sequence.  Sizes are in bytes, times in nanoseconds. */
#ifndef RNICSIM_PROTOCOLS_RIMA_WORKLOAD_H
#define RNICSIM_PROTOCOLS_RIMA_WORKLOAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ------------------------------------------------------------------ RNG */

/* splitmix64 (Steele, Lea, Flood 2014): a 64-bit state, full period, good
 * enough for workload generation and trivially seedable. */
struct wl_rng {
    uint64_t state;
};

void wl_rng_seed(struct wl_rng *r, uint64_t seed);
uint64_t wl_rng_next(struct wl_rng *r);
/* Uniform in (0, 1], 53-bit resolution (never 0, so -log(u) is finite). */
double wl_rng_unit(struct wl_rng *r);

/* ------------------------------------------------------- size distributions */

enum wl_dist_kind {
    WL_DIST_MEMCACHED, /* the built-in empirical CDF of Figure 2 */
    WL_DIST_FIXED,     /* always `fixed_bytes` */
    WL_DIST_UNIFORM,   /* uniform integer in [lo_bytes, hi_bytes] */
    WL_DIST_LIST,      /* user list of size:weight */
};

#define WL_LIST_MAX 64
#define WL_MEMCACHED_MAX_BYTES (1u << 20) /* Section 2.2: "the maximum is 1 MB" */
#define WL_MEMCACHED_MEAN_BYTES 231.0     /* Section 2.2: "about 231 B" */

/* One point of an empirical CDF: P(size <= size_bytes) = cdf.  The sizes
 * between the previous point and this one are equally likely. */
struct wl_cdf_point {
    uint32_t size_bytes;
    double cdf;
};

struct wl_size_dist {
    enum wl_dist_kind kind;
    uint32_t fixed_bytes, lo_bytes, hi_bytes;
    /* WL_DIST_LIST / WL_DIST_MEMCACHED: the CDF the sampler inverts. */
    struct wl_cdf_point points[WL_LIST_MAX + 96];
    size_t n_points;
    /* Post-processing of every draw: size = ceil(min(draw, max_bytes) x
     * scale), at least 1 byte (max_bytes 0 = no truncation): truncate, then
     * scale, as Section 5.1.3 scales the truncated distribution. */
    double scale;
    uint32_t max_bytes;
    struct wl_rng rng;
};

/* The built-in memcached CDF (read only; n points, the last at 1 MiB). */
const struct wl_cdf_point *wl_memcached_cdf(size_t *n);

void wl_dist_memcached(struct wl_size_dist *d, uint64_t seed);
void wl_dist_fixed(struct wl_size_dist *d, uint32_t bytes, uint64_t seed);
/* -1 (EINVAL) unless 1 <= lo <= hi. */
int wl_dist_uniform(struct wl_size_dist *d, uint32_t lo_bytes, uint32_t hi_bytes, uint64_t seed);
/* "64:0.5,4KiB:0.25,1MiB:0.25": sizes (rnicsim size syntax: K/KiB/M/MiB)
 * and non-negative weights (normalised; at least one > 0).  Returns 0, or -1
 * with a message in err (errlen bytes). */
int wl_dist_list(struct wl_size_dist *d, const char *spec, uint64_t seed, char *err, size_t errlen);
/* Parse a distribution name: "memcached", "fixed:N", "uniform:LO:HI",
 * "list:S:W,S:W,...".  Returns 0 or -1 with a message in err. */
int wl_dist_parse(struct wl_size_dist *d, const char *spec, uint64_t seed, char *err,
                  size_t errlen);
/* Truncate at max_bytes (0 = none), then scale by `scale` (> 0). */
void wl_dist_set_transform(struct wl_size_dist *d, double scale, uint32_t max_bytes);

/* Draw one size (>= 1). */
uint32_t wl_dist_sample(struct wl_size_dist *d);
/* The untransformed quantile: smallest size whose CDF >= p (0 < p <= 1). */
uint32_t wl_dist_quantile(const struct wl_size_dist *d, double p);
/* P(size <= bytes) after the transform (exact, from the CDF). */
double wl_dist_cdf(const struct wl_size_dist *d, uint64_t bytes);
/* Exact mean after the transform (sum over the CDF's segments). */
double wl_dist_mean(const struct wl_size_dist *d);
/* Largest size a draw can have after the transform. */
uint32_t wl_dist_max(const struct wl_size_dist *d);

/* ------------------------------------------------------------ arrivals */

enum wl_arrival_kind {
    WL_ARRIVAL_POISSON, /* exponential gaps, mean 1e9 / rate_per_s ns */
    WL_ARRIVAL_BURSTY,  /* on/off: burst_len messages back to back at the line
                           rate, then an exponential idle gap chosen so that
                           the long-run rate is rate_per_s */
};

struct wl_arrival {
    enum wl_arrival_kind kind;
    double rate_per_s;      /* long-run mean message rate */
    double line_rate_bps;   /* bursty: back-to-back spacing = size x 8 / line */
    uint32_t burst_len;     /* bursty: messages per burst (K) */
    uint32_t in_burst;      /* position in the current burst */
    double mean_size_bytes; /* bursty: used to size the idle gap */
    struct wl_rng rng;
};

/* -1 (EINVAL) unless rate > 0. */
int wl_arrival_poisson(struct wl_arrival *a, double rate_per_s, uint64_t seed);
/* -1 (EINVAL) unless rate > 0, line_rate > 0, burst_len >= 1 and the rate
 * is below what back-to-back messages of mean size at the line rate give. */
int wl_arrival_bursty(struct wl_arrival *a, double rate_per_s, double line_rate_bps,
                      uint32_t burst_len, double mean_size_bytes, uint64_t seed);
/* Gap in ns before the next message, whose size is size_bytes. */
double wl_arrival_next_gap_ns(struct wl_arrival *a, uint32_t size_bytes);

/* ------------------------------------------------------------- bins */

/* A bin: messages of lo_bytes..hi_bytes go to one queue whose buffers are
 * buf_bytes (= hi_bytes). */
struct wl_bin {
    uint32_t lo_bytes, hi_bytes, buf_bytes;
    double prob; /* fraction of messages (from the distribution's CDF) */
};

#define WL_SLAB_MAX_CLASSES 64
#define WL_BINS_MAX 4096

/* memcached's slab classes (slabs.c: slabs_init): the first chunk is 96 B
 * (48-B item header + the default -n 48 minimum), each next one x factor
 * rounded up to 8 B, while size <= item_size_max / factor; the last class is
 * item_size_max.  Defaults 1.25 and 1 MiB give the 42 classes of Section 2.2.
 * Returns the number of classes (sizes ascending into out), or 0 on bad
 * input. */
size_t wl_slab_classes(double factor, uint32_t item_size_max, uint32_t *out, size_t max);

/* Bins from consecutive upper bounds: bin i covers (bounds[i-1], bounds[i]]
 * (bin 0 from 1), clipped to the distribution's max; probabilities from d.
 * Bins that would start beyond the max are dropped.  Returns the count. */
size_t wl_bins_from_bounds(const struct wl_size_dist *d, const uint32_t *bounds, size_t n,
                           struct wl_bin *out, size_t max);
/* n equal-width bins over [1, max size of d] (Section 4.1's equi-spaced
 * option).  Returns the count (n), or 0 on bad input. */
size_t wl_bins_equispaced(const struct wl_size_dist *d, size_t n, struct wl_bin *out, size_t max);
/* memcached's slab classes (factor 1.25, 1 MiB) clipped to d, with the
 * classes that get no messages dropped, then adjacent classes merged into
 * n bins so the largest bin's probability is as small as possible (the
 * "merge adjacent bins to balance the queue sizes" of Section 5.1.2; exact
 * min-max partition by dynamic programming, ties to the earliest cut).
 * n larger than the number of non-empty classes gives one bin per class.
 * Returns the count. */
size_t wl_bins_slab(const struct wl_size_dist *d, size_t n, struct wl_bin *out, size_t max);
/* What wl_bins_slab_balanced equalises across bins: the fraction of
 * messages (wl_bins_slab), or the bytes of buffers they hold (probability x
 * the bin's buffer size, i.e. each queue's share of the active buffer). */
enum wl_balance { WL_BALANCE_MESSAGES, WL_BALANCE_BYTES };
size_t wl_bins_slab_balanced(const struct wl_size_dist *d, size_t n, enum wl_balance balance,
                             struct wl_bin *out, size_t max);
/* Index of the bin a size falls in (the first with hi >= size); n - 1 for
 * sizes beyond the last bin. */
size_t wl_bin_of(const struct wl_bin *bins, size_t n, uint32_t size_bytes);

#endif
