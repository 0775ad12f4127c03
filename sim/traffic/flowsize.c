/* Flow-size distributions of datacenter workloads (flowsize.h).
 *
 * web-search: the DCTCP paper's measured web-search cluster (Alizadeh et
 *   al., "Data Center TCP", SIGCOMM 2010, Fig. 4 "background flows"), the
 *   distribution pFabric (SIGCOMM 2013) and HPCC (SIGCOMM 2019) evaluate
 *   with.  Points as HPCC's simulator tabulates them
 *   (traffic_gen/WebSearch_distribution.txt of alibaba-edu/High-Precision-
 *   Congestion-Control): 15 % of flows <= 10 KB, 70 % <= 1 MB, the largest
 *   30 MB; mean 1.7 MB.
 * fb-hadoop: Facebook's Hadoop cluster (Roy et al., "Inside the Social
 *   Network's (Datacenter) Network", SIGCOMM 2015, Fig. 6), HPCC's second
 *   workload (traffic_gen/FbHdp_distribution.txt of the same repository):
 *   mostly small flows (60 % <= 1 KB), the largest 10 MB; mean 120 KB.
 * data-mining: the data-mining cluster VL2 measured (Greenberg et al.,
 *   "VL2: A Scalable and Flexible Data Center Network", SIGCOMM 2009,
 *   Fig. 2, flow sizes), the second workload of pFabric (Alizadeh et al.,
 *   SIGCOMM 2013, Fig. 5; also PIAS, NSDI 2015).  Points as pFabric's ns-2
 *   scripts tabulate it in 1460-byte packets (CDF_vl2.tcl, as distributed
 *   with the PIAS and MQ-ECN ns-2 code of HKUST-SING, which give its mean
 *   as 5117 x 1460 B): half of the flows are one packet, 80 % at most 7,
 *   the largest 666,667 packets (973 MB); mean 7.47 MB, nearly all bytes
 *   in the 5 % of flows above 3 MB.
 *
 * Sampling: u uniform in [0, 1), find the segment whose CDF range holds u,
 * interpolate linearly in bytes (HPCC's custom_rand.py does the same). */
#include "flowsize.h"

#include <math.h>

const char *const flowsize_dist_names[] = {"fixed", "web-search", "fb-hadoop", "data-mining", NULL};

static const struct flowsize_point web_search[] = {
    {0, 0.00},       {10000, 0.15},   {20000, 0.20},    {30000, 0.30},
    {50000, 0.40},   {80000, 0.53},   {200000, 0.60},   {1000000, 0.70},
    {2000000, 0.80}, {5000000, 0.90}, {10000000, 0.97}, {30000000, 1.00},
};

static const struct flowsize_point fb_hadoop[] = {
    {0, 0.00},      {100, 0.01},    {200, 0.02},      {300, 0.05},     {350, 0.15},
    {400, 0.20},    {500, 0.30},    {600, 0.40},      {700, 0.50},     {1000, 0.60},
    {2000, 0.67},   {7000, 0.70},   {30000, 0.72},    {50000, 0.82},   {80000, 0.87},
    {120000, 0.90}, {300000, 0.95}, {1000000, 0.975}, {2000000, 0.99}, {10000000, 1.00},
};

#define PKT_1460(n) ((uint64_t)(n)*1460) /* pFabric's table counts 1460 B packets */
static const struct flowsize_point data_mining[] = {
    {PKT_1460(1), 0.00},    {PKT_1460(1), 0.50},     {PKT_1460(2), 0.60},
    {PKT_1460(3), 0.70},    {PKT_1460(7), 0.80},     {PKT_1460(267), 0.90},
    {PKT_1460(2107), 0.95}, {PKT_1460(66667), 0.99}, {PKT_1460(666667), 1.00},
};

const struct flowsize_point *flowsize_table(enum flowsize_dist d, size_t *n)
{
    switch (d) {
    case FLOWSIZE_WEB_SEARCH:
        *n = sizeof(web_search) / sizeof(web_search[0]);
        return web_search;
    case FLOWSIZE_FB_HADOOP:
        *n = sizeof(fb_hadoop) / sizeof(fb_hadoop[0]);
        return fb_hadoop;
    case FLOWSIZE_DATA_MINING:
        *n = sizeof(data_mining) / sizeof(data_mining[0]);
        return data_mining;
    case FLOWSIZE_FIXED:
    case FLOWSIZE_DIST_COUNT:
        break;
    }
    *n = 0;
    return NULL;
}

double flowsize_mean(enum flowsize_dist d, uint64_t fixed_bytes)
{
    size_t n;
    const struct flowsize_point *t = flowsize_table(d, &n);
    if (!t)
        return (double)fixed_bytes;
    double m = 0;
    for (size_t i = 1; i < n; i++)
        m += (t[i].cdf - t[i - 1].cdf) * ((double)t[i].bytes + (double)t[i - 1].bytes) / 2;
    return m;
}

uint64_t flowsize_max(enum flowsize_dist d, uint64_t fixed_bytes)
{
    size_t n;
    const struct flowsize_point *t = flowsize_table(d, &n);
    return t ? t[n - 1].bytes : fixed_bytes;
}

uint64_t flowsize_sample(enum flowsize_dist d, uint64_t fixed_bytes, struct sim_rng *rng)
{
    size_t n;
    const struct flowsize_point *t = flowsize_table(d, &n);
    if (!t)
        return fixed_bytes;
    double u = sim_rng_uniform(rng);
    size_t i = 1;
    while (i < n - 1 && u >= t[i].cdf)
        i++;
    double span = t[i].cdf - t[i - 1].cdf;
    double f = span > 0 ? (u - t[i - 1].cdf) / span : 1.0;
    double v = (double)t[i - 1].bytes + f * ((double)t[i].bytes - (double)t[i - 1].bytes);
    uint64_t b = (uint64_t)llround(v);
    return b ? b : 1;
}

double flowsize_cdf(enum flowsize_dist d, uint64_t fixed_bytes, uint64_t bytes)
{
    size_t n;
    const struct flowsize_point *t = flowsize_table(d, &n);
    if (!t)
        return bytes >= fixed_bytes ? 1.0 : 0.0;
    if (bytes >= t[n - 1].bytes)
        return 1.0;
    if (bytes < t[0].bytes) /* data-mining's smallest flow is a whole packet */
        return 0.0;
    size_t i = 1;
    while (i < n && bytes > t[i].bytes)
        i++;
    double w = (double)(t[i].bytes - t[i - 1].bytes);
    double f = w > 0 ? (double)(bytes - t[i - 1].bytes) / w : 1.0;
    return t[i - 1].cdf + f * (t[i].cdf - t[i - 1].cdf);
}
