/* RIMA workloads: size distributions, arrivals, bins (workload.h). */
#include "protocols/rima/workload.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <strings.h>

#include "protocols/common/rc_conn.h"

/* ------------------------------------------------------------------ RNG */

void wl_rng_seed(struct wl_rng *r, uint64_t seed)
{
    r->state = seed;
}

uint64_t wl_rng_next(struct wl_rng *r)
{
    uint64_t z = (r->state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

double wl_rng_unit(struct wl_rng *r)
{
    return (double)((wl_rng_next(r) >> 11) + 1) * (1.0 / 9007199254740992.0);
}

/* ------------------------------------------------- the memcached CDF */

/* Figure 2 of the RIMA paper (Facebook memcached tuple sizes, from
 * Atikoglu et al., "Workload Analysis of a Large-Scale Key-Value Store",
 * SIGMETRICS'12).  What the paper gives is kept exactly: the mean is
 * 231 B (Section 2.2), 1 KB is the 95.6th percentile and 5.4 KB (5530 B)
 * the 99.9th (Section 5.2.1), the maximum is 1 MB (Section 2.2).  Where the
 * paper is silent the shape is Atikoglu's ETC value-size model (their
 * Table 5 / Section 5.2): the discrete probabilities of sizes 0..14 (size 0
 * counted as 1 B: Figure 2 starts at 1 B) scaled together to total p0, and
 * above 14 B a generalized Pareto body 1 - (1 + k (x-15)/sigma)^(-1/k).
 * The three free numbers (p0, k, sigma) were solved so that the two
 * percentile anchors hold exactly and the mean of this table is 231 B:
 * p0 = 0.39663 (ETC: 0.44155), k = 0.34132 (ETC: 0.348238),
 * sigma = 238.478 (ETC: 214.476).  Above 15 B the points are 4 per octave
 * (16 x 2^(j/4)) plus the anchors; sizes between two points are equally
 * likely.  Everything above 1 MiB (< 1e-9 of the mass) is put at 1 MiB. */
static const struct wl_cdf_point memcached_cdf[] = {
    {1, 0.005236943271},      {2, 0.165309548924},      {3, 0.248301176513},
    {4, 0.248462866013},      {5, 0.273075601114},      {6, 0.273659479866},
    {7, 0.279103026388},      {8, 0.279309629639},      {9, 0.286828191420},
    {10, 0.294346753201},     {11, 0.375092693280},     {12, 0.375919106283},
    {13, 0.378847482795},     {14, 0.396633327868},     {15, 0.396633327868},
    {16, 0.399156307166},     {19, 0.406640857659},     {23, 0.416427001429},
    {27, 0.425997868480},     {32, 0.437667700767},     {38, 0.451255274003},
    {45, 0.466556655802},     {54, 0.485400561733},     {64, 0.505305807581},
    {76, 0.527852441990},     {91, 0.554139229510},     {108, 0.581611776898},
    {128, 0.611102646986},    {152, 0.642925892110},    {181, 0.676888281932},
    {215, 0.711410780435},    {256, 0.746769447940},    {304, 0.781159974526},
    {362, 0.814851795271},    {431, 0.846462639540},    {512, 0.874985888666},
    {609, 0.900526014489},    {724, 0.922505727460},    {861, 0.940966602681},
    {1024, 0.956000000000},   {1218, 0.967897373515},   {1448, 0.977024351601},
    {1722, 0.983878449853},   {2048, 0.988890226974},   {2435, 0.992464340748},
    {2896, 0.994968427707},   {3444, 0.996685176899},   {4096, 0.997842988555},
    {4871, 0.998611160088},   {5530, 0.999000000000},   {5793, 0.999114368793},
    {6889, 0.999439821120},   {8192, 0.999648188592},   {9742, 0.999780463066},
    {11585, 0.999863733648},  {13777, 0.999915816635},  {16384, 0.999948201052},
    {19484, 0.999968233941},  {23170, 0.999980574105},  {27554, 0.999988150434},
    {32768, 0.999992787263},  {38968, 0.999995617203},  {46341, 0.999997340768},
    {55109, 0.999998388564},  {65536, 0.999999024549},  {77936, 0.999999410065},
    {92682, 0.999999643487},  {110218, 0.999999784688}, {131072, 0.999999870035},
    {155872, 0.999999921588}, {185364, 0.999999952709}, {220436, 0.999999971488},
    {262144, 0.999999982814}, {311744, 0.999999989644}, {370728, 0.999999993760},
    {440872, 0.999999996241}, {524288, 0.999999997736}, {623487, 0.999999998637},
    {741455, 0.999999999179}, {881744, 0.999999999506}, {1048576, 1.000000000000},
};

const struct wl_cdf_point *wl_memcached_cdf(size_t *n)
{
    *n = sizeof memcached_cdf / sizeof memcached_cdf[0];
    return memcached_cdf;
}

/* ------------------------------------------------------- distributions */

static void dist_init(struct wl_size_dist *d, enum wl_dist_kind kind, uint64_t seed)
{
    memset(d, 0, sizeof *d);
    d->kind = kind;
    d->scale = 1.0;
    wl_rng_seed(&d->rng, seed);
}

void wl_dist_memcached(struct wl_size_dist *d, uint64_t seed)
{
    size_t n;
    const struct wl_cdf_point *p = wl_memcached_cdf(&n);
    dist_init(d, WL_DIST_MEMCACHED, seed);
    memcpy(d->points, p, n * sizeof *p);
    d->n_points = n;
}

void wl_dist_fixed(struct wl_size_dist *d, uint32_t bytes, uint64_t seed)
{
    dist_init(d, WL_DIST_FIXED, seed);
    d->fixed_bytes = bytes ? bytes : 1;
    /* (s-1, s-1] carries nothing, (s-1, s] everything */
    d->points[0] = (struct wl_cdf_point){d->fixed_bytes - 1, 0.0};
    d->points[1] = (struct wl_cdf_point){d->fixed_bytes, 1.0};
    d->n_points = 2;
}

int wl_dist_uniform(struct wl_size_dist *d, uint32_t lo_bytes, uint32_t hi_bytes, uint64_t seed)
{
    if (lo_bytes < 1 || lo_bytes > hi_bytes) {
        errno = EINVAL;
        return -1;
    }
    dist_init(d, WL_DIST_UNIFORM, seed);
    d->lo_bytes = lo_bytes;
    d->hi_bytes = hi_bytes;
    /* (lo-1, lo-1] carries nothing, then (lo-1, hi] uniformly. */
    d->points[0] = (struct wl_cdf_point){lo_bytes - 1, 0.0};
    d->points[1] = (struct wl_cdf_point){hi_bytes, 1.0};
    d->n_points = 2;
    return 0;
}

static int cmp_point(const void *a, const void *b)
{
    const struct wl_cdf_point *x = a, *y = b;
    return (x->size_bytes > y->size_bytes) - (x->size_bytes < y->size_bytes);
}

int wl_dist_list(struct wl_size_dist *d, const char *spec, uint64_t seed, char *err, size_t errlen)
{
    char buf[1024];
    if (!spec || strlen(spec) >= sizeof buf) {
        snprintf(err, errlen, "size list missing or longer than %zu characters", sizeof buf - 1);
        return -1;
    }
    strcpy(buf, spec);
    dist_init(d, WL_DIST_LIST, seed);
    /* The list is exact sizes, so each size is its own segment (size-1,
     * size]: a zero-probability point at size-1 precedes it. */
    struct wl_cdf_point items[WL_LIST_MAX];
    size_t n = 0;
    double total = 0;
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *colon = strchr(tok, ':');
        if (!colon) {
            snprintf(err, errlen, "size list item '%s': expected SIZE:WEIGHT", tok);
            return -1;
        }
        *colon = '\0';
        uint64_t size;
        char *end;
        errno = 0;
        double w = strtod(colon + 1, &end);
        if (!rc_conn_parse_size(tok, &size) || size < 1 || size > UINT32_MAX) {
            snprintf(err, errlen, "size list item '%s': bad size (1..4GiB-1)", tok);
            return -1;
        }
        if (end == colon + 1 || *end || errno || !(w >= 0) || !isfinite(w)) {
            snprintf(err, errlen, "size list item '%s': bad weight '%s'", tok, colon + 1);
            return -1;
        }
        if (n == WL_LIST_MAX) {
            snprintf(err, errlen, "size list: more than %d items", WL_LIST_MAX);
            return -1;
        }
        for (size_t i = 0; i < n; i++)
            if (items[i].size_bytes == size) {
                snprintf(err, errlen, "size list: size %" PRIu64 " given twice", size);
                return -1;
            }
        items[n++] = (struct wl_cdf_point){(uint32_t)size, w};
        total += w;
    }
    if (n == 0 || !(total > 0)) {
        snprintf(err, errlen, "size list: no item with a positive weight");
        return -1;
    }
    qsort(items, n, sizeof items[0], cmp_point);
    double c = 0;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t s = items[i].size_bytes;
        if (s > 1 && (k == 0 || d->points[k - 1].size_bytes < s - 1))
            d->points[k++] = (struct wl_cdf_point){s - 1, c};
        c += items[i].cdf / total;
        d->points[k++] = (struct wl_cdf_point){s, i + 1 == n ? 1.0 : c};
    }
    d->n_points = k;
    return 0;
}

int wl_dist_parse(struct wl_size_dist *d, const char *spec, uint64_t seed, char *err, size_t errlen)
{
    uint64_t a, b;
    if (!spec) {
        snprintf(err, errlen, "no distribution given");
        return -1;
    }
    if (strcmp(spec, "memcached") == 0) {
        wl_dist_memcached(d, seed);
        return 0;
    }
    if (strncmp(spec, "fixed:", 6) == 0) {
        if (!rc_conn_parse_size(spec + 6, &a) || a < 1 || a > UINT32_MAX) {
            snprintf(err, errlen, "distribution '%s': bad size", spec);
            return -1;
        }
        wl_dist_fixed(d, (uint32_t)a, seed);
        return 0;
    }
    if (strncmp(spec, "uniform:", 8) == 0) {
        char tmp[64];
        const char *colon = strchr(spec + 8, ':');
        size_t len = colon ? (size_t)(colon - (spec + 8)) : 0;
        if (!colon || len >= sizeof tmp) {
            snprintf(err, errlen, "distribution '%s': expected uniform:LO:HI", spec);
            return -1;
        }
        memcpy(tmp, spec + 8, len);
        tmp[len] = '\0';
        if (!rc_conn_parse_size(tmp, &a) || !rc_conn_parse_size(colon + 1, &b) || a < 1 || a > b ||
            b > UINT32_MAX) {
            snprintf(err, errlen, "distribution '%s': need 1 <= LO <= HI < 4GiB", spec);
            return -1;
        }
        return wl_dist_uniform(d, (uint32_t)a, (uint32_t)b, seed);
    }
    if (strncmp(spec, "list:", 5) == 0)
        return wl_dist_list(d, spec + 5, seed, err, errlen);
    snprintf(err, errlen,
             "unknown distribution '%s' (memcached, fixed:N, uniform:LO:HI, list:S:W,...)", spec);
    return -1;
}

void wl_dist_set_transform(struct wl_size_dist *d, double scale, uint32_t max_bytes)
{
    d->scale = scale > 0 ? scale : 1.0;
    d->max_bytes = max_bytes;
}

/* Truncate first, then scale (Section 5.1.3 scales "the truncated
 * memcached distribution"): ceil(min(raw, max) x scale), at least 1. */
static uint32_t transform(const struct wl_size_dist *d, uint32_t raw)
{
    double v = raw;
    if (d->max_bytes && v > d->max_bytes)
        v = d->max_bytes;
    if (d->scale != 1.0)
        v = ceil(v * d->scale);
    if (v < 1)
        v = 1;
    if (v > UINT32_MAX)
        v = UINT32_MAX;
    return (uint32_t)v;
}

uint32_t wl_dist_quantile(const struct wl_size_dist *d, double p)
{
    if (d->kind == WL_DIST_FIXED)
        return d->fixed_bytes;
    size_t lo = 0, hi = d->n_points - 1;
    if (p > d->points[hi].cdf)
        p = d->points[hi].cdf;
    while (lo < hi) { /* first point with cdf >= p */
        size_t mid = (lo + hi) / 2;
        if (d->points[mid].cdf >= p)
            hi = mid;
        else
            lo = mid + 1;
    }
    uint32_t prev = lo ? d->points[lo - 1].size_bytes : 0;
    double cprev = lo ? d->points[lo - 1].cdf : 0.0;
    uint32_t x = d->points[lo].size_bytes;
    double span = d->points[lo].cdf - cprev;
    if (!(span > 0) || x == prev)
        return x;
    double f = (p - cprev) / span;
    uint64_t y = prev + (uint64_t)ceil(f * (double)(x - prev));
    if (y <= prev)
        y = prev + 1;
    if (y > x)
        y = x;
    return (uint32_t)y;
}

uint32_t wl_dist_sample(struct wl_size_dist *d)
{
    return transform(d, wl_dist_quantile(d, wl_rng_unit(&d->rng)));
}

/* Untransformed P(X <= y) for an integer y. */
static double raw_cdf(const struct wl_size_dist *d, uint64_t y)
{
    double cprev = 0;
    uint32_t prev = 0;
    for (size_t i = 0; i < d->n_points; i++) {
        const struct wl_cdf_point *pt = &d->points[i];
        if (y <= prev)
            return cprev;
        if (y < pt->size_bytes)
            return cprev + (pt->cdf - cprev) * (double)(y - prev) / (double)(pt->size_bytes - prev);
        prev = pt->size_bytes;
        cprev = pt->cdf;
    }
    return 1.0;
}

double wl_dist_cdf(const struct wl_size_dist *d, uint64_t bytes)
{
    if (bytes == 0)
        return 0.0;
    /* ceil(min(X, M) s) <= b  <=>  min(X, M) <= floor(b / s) (integers) */
    double y = d->scale == 1.0 ? (double)bytes : floor((double)bytes / d->scale + 1e-9);
    if (d->max_bytes && y >= d->max_bytes)
        return 1.0;
    return raw_cdf(d, (uint64_t)y);
}

double wl_dist_mean(const struct wl_size_dist *d)
{
    double mean = 0, cprev = 0;
    uint32_t prev = 0;
    uint64_t m = d->max_bytes ? d->max_bytes : UINT64_MAX;
    for (size_t i = 0; i < d->n_points; i++) {
        const struct wl_cdf_point *pt = &d->points[i];
        double mass = pt->cdf - cprev;
        uint32_t x = pt->size_bytes;
        if (mass > 0 && x > prev) {
            uint64_t len = x - prev;
            /* E[min(X, M)] for X uniform over prev+1..x, closed form */
            double sum;
            if (m > x)
                sum = ((double)prev + 1 + x) / 2.0 * (double)len;
            else if (m <= prev + 1)
                sum = (double)m * (double)len;
            else
                sum = ((double)prev + 1 + (double)m) / 2.0 * (double)(m - prev) +
                      (double)m * (double)(x - m);
            double e = sum / (double)len;
            if (d->scale != 1.0) {
                if (len <= 65536) { /* exact */
                    double t = 0;
                    for (uint64_t v = prev + 1; v <= x; v++)
                        t += transform(d, (uint32_t)v);
                    e = t / (double)len;
                } else { /* long segment: the ceil adds within 0.5 B */
                    e = e * d->scale + 0.5;
                }
            }
            mean += mass * e;
        }
        prev = x;
        cprev = pt->cdf;
    }
    return mean;
}

uint32_t wl_dist_max(const struct wl_size_dist *d)
{
    return transform(d, d->points[d->n_points - 1].size_bytes);
}

/* ------------------------------------------------------------ arrivals */

int wl_arrival_poisson(struct wl_arrival *a, double rate_per_s, uint64_t seed)
{
    if (!(rate_per_s > 0)) {
        errno = EINVAL;
        return -1;
    }
    memset(a, 0, sizeof *a);
    a->kind = WL_ARRIVAL_POISSON;
    a->rate_per_s = rate_per_s;
    wl_rng_seed(&a->rng, seed);
    return 0;
}

int wl_arrival_bursty(struct wl_arrival *a, double rate_per_s, double line_rate_bps,
                      uint32_t burst_len, double mean_size_bytes, uint64_t seed)
{
    if (!(rate_per_s > 0) || !(line_rate_bps > 0) || burst_len < 1 || !(mean_size_bytes > 0) ||
        rate_per_s >= line_rate_bps / (8.0 * mean_size_bytes)) {
        errno = EINVAL;
        return -1;
    }
    memset(a, 0, sizeof *a);
    a->kind = WL_ARRIVAL_BURSTY;
    a->rate_per_s = rate_per_s;
    a->line_rate_bps = line_rate_bps;
    a->burst_len = burst_len;
    a->mean_size_bytes = mean_size_bytes;
    wl_rng_seed(&a->rng, seed);
    return 0;
}

double wl_arrival_next_gap_ns(struct wl_arrival *a, uint32_t size_bytes)
{
    if (a->kind == WL_ARRIVAL_POISSON)
        return -log(wl_rng_unit(&a->rng)) * 1e9 / a->rate_per_s;
    /* Bursty: inside a burst the next message follows this one at the line
     * rate; after the burst's last one an exponential idle gap whose mean
     * makes K messages per (K x mean x 8 / line + idle) = the rate. */
    double wire_ns = (double)size_bytes * 8.0 * 1e9 / a->line_rate_bps;
    if (++a->in_burst < a->burst_len)
        return wire_ns;
    a->in_burst = 0;
    double k = a->burst_len;
    double idle_mean_ns =
        k * 1e9 / a->rate_per_s - k * a->mean_size_bytes * 8.0 * 1e9 / a->line_rate_bps;
    return wire_ns - log(wl_rng_unit(&a->rng)) * idle_mean_ns;
}

/* ------------------------------------------------------------- bins */

size_t wl_slab_classes(double factor, uint32_t item_size_max, uint32_t *out, size_t max)
{
    if (!(factor > 1.0) || item_size_max < 96 || max < 1)
        return 0;
    size_t n = 0;
    double size = 96; /* sizeof(item) 48 + settings.chunk_size 48 */
    while (n + 1 < max && size <= item_size_max / factor) {
        uint64_t s = (uint64_t)size;
        if (s % 8)
            s += 8 - s % 8; /* CHUNK_ALIGN_BYTES */
        out[n++] = (uint32_t)s;
        size = (double)s * factor;
    }
    out[n++] = item_size_max;
    return n;
}

size_t wl_bins_from_bounds(const struct wl_size_dist *d, const uint32_t *bounds, size_t n,
                           struct wl_bin *out, size_t max)
{
    uint32_t dmax = wl_dist_max(d);
    size_t k = 0;
    uint32_t lo = 1;
    for (size_t i = 0; i < n && k < max && lo <= dmax; i++) {
        if (bounds[i] < lo)
            continue;
        uint32_t hi = bounds[i] < dmax ? bounds[i] : dmax;
        if (i + 1 == n)
            hi = dmax; /* the last bin takes everything left */
        out[k] = (struct wl_bin){lo, hi, hi, wl_dist_cdf(d, hi) - wl_dist_cdf(d, lo - 1)};
        k++;
        lo = hi + 1;
    }
    if (k && lo <= dmax) { /* bounds ended early: widen the last bin */
        out[k - 1].hi_bytes = out[k - 1].buf_bytes = dmax;
        out[k - 1].prob = 1.0 - wl_dist_cdf(d, out[k - 1].lo_bytes - 1);
    }
    return k;
}

size_t wl_bins_equispaced(const struct wl_size_dist *d, size_t n, struct wl_bin *out, size_t max)
{
    uint32_t dmax = wl_dist_max(d);
    if (n < 1 || n > max || n > dmax || n > WL_BINS_MAX)
        return 0;
    uint32_t bounds[WL_BINS_MAX];
    for (size_t i = 0; i < n; i++)
        bounds[i] = (uint32_t)(((uint64_t)(i + 1) * dmax + n - 1) / n);
    return wl_bins_from_bounds(d, bounds, n, out, max);
}

size_t wl_bins_slab(const struct wl_size_dist *d, size_t n, struct wl_bin *out, size_t max)
{
    return wl_bins_slab_balanced(d, n, WL_BALANCE_MESSAGES, out, max);
}

size_t wl_bins_slab_balanced(const struct wl_size_dist *d, size_t n, enum wl_balance balance,
                             struct wl_bin *out, size_t max)
{
    uint32_t classes[WL_SLAB_MAX_CLASSES];
    /* memcached defaults: -f 1.25, -I 1m (Section 2.2: 42 classes) */
    size_t nc = wl_slab_classes(1.25, 1u << 20, classes, WL_SLAB_MAX_CLASSES);
    struct wl_bin cls[WL_SLAB_MAX_CLASSES];
    size_t m = wl_bins_from_bounds(d, classes, nc, cls, WL_SLAB_MAX_CLASSES);
    /* drop classes nobody uses (merge them into the next one) */
    size_t k = 0;
    for (size_t i = 0; i < m; i++) {
        if (cls[i].prob <= 0 && i + 1 < m) {
            cls[i + 1].lo_bytes = cls[i].lo_bytes;
            continue;
        }
        cls[k++] = cls[i];
    }
    m = k;
    if (n < 1 || max < 1 || m == 0)
        return 0;
    if (n > m)
        n = m;
    if (n > max)
        n = max;
    /* best[j][i]: the smallest possible largest bin weight when the first
     * i classes form j bins; cut[j][i] the start of the last bin.  Weight
     * of classes c..i-1 as one bin: its probability, or (bytes) its
     * probability x its buffer (the largest class). */
    double best[WL_SLAB_MAX_CLASSES + 1][WL_SLAB_MAX_CLASSES + 1];
    size_t cut[WL_SLAB_MAX_CLASSES + 1][WL_SLAB_MAX_CLASSES + 1];
    double prefix[WL_SLAB_MAX_CLASSES + 1];
    prefix[0] = 0;
    for (size_t i = 0; i < m; i++)
        prefix[i + 1] = prefix[i] + cls[i].prob;
    for (size_t j = 0; j <= n; j++)
        for (size_t i = 0; i <= m; i++)
            best[j][i] = (double)INFINITY;
    best[0][0] = 0;
    for (size_t j = 1; j <= n; j++)
        for (size_t i = j; i <= m; i++)
            for (size_t c = j - 1; c < i; c++) {
                double w = prefix[i] - prefix[c];
                if (balance == WL_BALANCE_BYTES)
                    w *= cls[i - 1].buf_bytes;
                double v = fmax(best[j - 1][c], w);
                if (v < best[j][i]) {
                    best[j][i] = v;
                    cut[j][i] = c;
                }
            }
    size_t ends[WL_SLAB_MAX_CLASSES + 1];
    size_t i = m;
    for (size_t j = n; j >= 1; j--) {
        ends[j - 1] = i;
        i = cut[j][i];
    }
    size_t start = 0;
    for (size_t j = 0; j < n; j++) {
        size_t e = ends[j];
        out[j] = (struct wl_bin){cls[start].lo_bytes, cls[e - 1].hi_bytes, cls[e - 1].buf_bytes,
                                 prefix[e] - prefix[start]};
        start = e;
    }
    return n;
}

size_t wl_bin_of(const struct wl_bin *bins, size_t n, uint32_t size_bytes)
{
    size_t lo = 0, hi = n - 1;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (bins[mid].hi_bytes >= size_bytes)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}
