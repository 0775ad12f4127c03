/* Histograms that keep every sample, so percentiles are exact
 * (nearest-rank), with log-linear buckets for plots. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim_internal.h"

void sim_hist_init(struct sim_hist *h)
{
    memset(h, 0, sizeof(*h));
    h->min = UINT64_MAX;
    h->sorted = true;
}

void sim_hist_free(struct sim_hist *h)
{
    free(h->samples);
    sim_hist_init(h);
}

unsigned sim_hist_bucket(uint64_t v)
{
    if (v < 8)
        return (unsigned)v;
    unsigned e = 63u - (unsigned)__builtin_clzll(v); /* >= 3 */
    unsigned sub = (unsigned)(v >> (e - 3)) & 7u;
    return (e - 2) * 8 + sub;
}

uint64_t sim_hist_bucket_low(unsigned b)
{
    if (b < 8)
        return b;
    unsigned e = b / 8 + 2, sub = b % 8;
    return (uint64_t)(8 + sub) << (e - 3);
}

void sim_hist_add(struct sim_hist *h, uint64_t v)
{
    if (h->n == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 256;
        uint64_t *s = realloc(h->samples, cap * sizeof(*s));
        if (!s) {
            fprintf(stderr, "rnicsim: out of memory for histogram samples\n");
            abort();
        }
        h->samples = s;
        h->cap = cap;
    }
    if (h->n && v < h->samples[h->n - 1])
        h->sorted = false;
    h->samples[h->n++] = v;
    if (v < h->min)
        h->min = v;
    if (v > h->max)
        h->max = v;
    h->sum += (long double)v;
    h->buckets[sim_hist_bucket(v)]++;
}

size_t sim_hist_count(const struct sim_hist *h)
{
    return h->n;
}

double sim_hist_mean(const struct sim_hist *h)
{
    return h->n ? (double)(h->sum / (long double)h->n) : 0.0;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

uint64_t sim_hist_percentile(struct sim_hist *h, double p)
{
    if (h->n == 0)
        return 0;
    if (!h->sorted) {
        qsort(h->samples, h->n, sizeof(*h->samples), cmp_u64);
        h->sorted = true;
    }
    if (p <= 0.0)
        return h->samples[0];
    /* nearest rank: ceil(p/100 * n), computed so that exact products (p=50,
     * n=10 -> 5) are not pushed up by rounding error */
    double r = p / 100.0 * (double)h->n;
    size_t rank = (size_t)ceil(r - 1e-9);
    if (rank < 1)
        rank = 1;
    if (rank > h->n)
        rank = h->n;
    return h->samples[rank - 1];
}
