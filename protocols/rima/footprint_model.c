/* The analytic footprint model (footprint_model.h). */
#include "protocols/rima/footprint_model.h"

void fp_model_default(struct fp_model *m, double line_rate_bps, uint32_t largest_bytes)
{
    m->line_rate_bps = line_rate_bps;
    m->small_msgrate_ps = 137e6; /* Section 4.1, reference [23] */
    m->small_bytes = 8;
    m->largest_bytes = largest_bytes;
    m->alloc_latency_s = 1e-3; /* Section 5.2.1: kalloc + mlock, 1 ms */
}

double fp_msgrate(const struct fp_model *m, uint32_t size_bytes)
{
    if (size_bytes <= m->small_bytes || m->largest_bytes <= m->small_bytes)
        return m->small_msgrate_ps;
    double e_small = m->small_msgrate_ps * m->small_bytes * 8.0 / m->line_rate_bps;
    if (e_small > 1.0)
        e_small = 1.0;
    double s = size_bytes > m->largest_bytes ? m->largest_bytes : size_bytes;
    double e = e_small +
               (1.0 - e_small) * (s - m->small_bytes) / (double)(m->largest_bytes - m->small_bytes);
    double rate = e * m->line_rate_bps / (8.0 * size_bytes);
    return rate < m->small_msgrate_ps ? rate : m->small_msgrate_ps;
}

double fp_srq_reserve_bytes(const struct fp_model *m, uint32_t lo_bytes, uint32_t buf_bytes)
{
    return fp_msgrate(m, lo_bytes) * m->alloc_latency_s * (double)buf_bytes;
}

double fp_srq_reserve_total_bytes(const struct fp_model *m, const struct wl_bin *bins, size_t n)
{
    double sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += fp_srq_reserve_bytes(m, bins[i].lo_bytes, bins[i].buf_bytes);
    return sum;
}

double fp_rima_reserve_bytes(const struct fp_model *m)
{
    return m->line_rate_bps / 8.0 * m->alloc_latency_s;
}

double fp_srq_active_model_bytes(const struct wl_bin *bins, size_t n, double outstanding)
{
    double sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += outstanding * bins[i].prob * (double)bins[i].buf_bytes;
    return sum;
}
