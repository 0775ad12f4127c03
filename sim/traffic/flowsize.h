/* Flow sizes of datacenter workloads: the empirical flow-size CDFs that
 * the DCTCP, pFabric and HPCC evaluations use, as tables of (bytes,
 * cumulative fraction) points, sampled by inverse transform with linear
 * interpolation between points (the way HPCC's traffic generator reads
 * them).  flowsize.c gives each table's source. */
#ifndef RNICSIM_TRAFFIC_FLOWSIZE_H
#define RNICSIM_TRAFFIC_FLOWSIZE_H

#include <stddef.h>
#include <stdint.h>

#include "../sim.h"

enum flowsize_dist {
    FLOWSIZE_FIXED,       /* every flow has the same size */
    FLOWSIZE_WEB_SEARCH,  /* DCTCP web search (Alizadeh et al., SIGCOMM 2010) */
    FLOWSIZE_FB_HADOOP,   /* Facebook Hadoop (Roy et al., SIGCOMM 2015) */
    FLOWSIZE_DATA_MINING, /* VL2 data mining (Greenberg et al., SIGCOMM 2009), as pFabric uses it */
    FLOWSIZE_DIST_COUNT
};
extern const char
    *const flowsize_dist_names[]; /* "fixed", "web-search", "fb-hadoop", "data-mining", NULL */

struct flowsize_point {
    uint64_t bytes;
    double cdf; /* fraction of flows of at most `bytes`, 0..1 */
};

/* The table of a distribution (not FIXED); n points, the first at cdf 0,
 * the last at cdf 1, non-decreasing. */
const struct flowsize_point *flowsize_table(enum flowsize_dist d, size_t *n);
/* Mean of the piecewise-linear distribution (FIXED: fixed_bytes). */
double flowsize_mean(enum flowsize_dist d, uint64_t fixed_bytes);
/* Largest size the distribution produces (FIXED: fixed_bytes). */
uint64_t flowsize_max(enum flowsize_dist d, uint64_t fixed_bytes);
/* One flow size (at least 1 byte). */
uint64_t flowsize_sample(enum flowsize_dist d, uint64_t fixed_bytes, struct sim_rng *rng);
/* The CDF at `bytes` (linear between points). */
double flowsize_cdf(enum flowsize_dist d, uint64_t fixed_bytes, uint64_t bytes);

#endif
