/* The analytic part of the RIMA memory-footprint study (Xue et al., RIMA,
 * Section 3.2.1 and Table 4; Section 4.1 "Sizing of Active Buffers
 * (Measured) and Reserve Pools (Calculated)").
 *
 *   active buffer = lambda x W x s      (lambda x W measured: the messages
 *                                        outstanding at the receiver)
 *     SRQ:  s = the bin's buffer size (every message takes a whole buffer)
 *     RIMA: s = the actual message size
 *   reserve pool
 *     SRQ bin [lo, hi], buffers of buf: msgrate(lo) x L x buf
 *     RIMA:                             line rate x L
 *
 * msgrate(s): the paper takes 137 M msg/s for payloads of 8 B or less
 * (Mellanox InfiniBand performance page, reference [23]) and scales it
 * "linearly as a function of the message size so that the loss of bandwidth
 * for smaller messages compared to the line rate reduces with larger
 * messages and vanishes for the largest message": the bandwidth efficiency
 * e(s) = achieved / line rate goes linearly from e(8 B) = 137e6 x 8 x 8 /
 * line to 1 at the largest size, and msgrate(s) = e(s) x line / (8 s),
 * never above the 8-B rate.  Check: a single SRQ (bin 1 B .. 1 MiB) gets
 * 137e6 x 1 ms x 1 MiB = 143.7 GB (the paper: 143 GB); a bin 1025 B ..
 * 1 MiB at 56 Gb/s gets 1.127 GB, x 32 processes = 33.6 GiB (the paper:
 * 33.6 GB, Section 5.2.1); RIMA 56 Gb/s x 1 ms = 7 MB (the paper: 7 MB). */
#ifndef RNICSIM_PROTOCOLS_RIMA_FOOTPRINT_MODEL_H
#define RNICSIM_PROTOCOLS_RIMA_FOOTPRINT_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "protocols/rima/workload.h"

struct fp_model {
    double line_rate_bps;    /* Table 4: 56 Gb/s (ConnectX-3 FDR) */
    double small_msgrate_ps; /* Section 4.1: 137 M msg/s ... */
    uint32_t small_bytes;    /* ... for payloads of 8 B or less */
    uint32_t largest_bytes;  /* where the bandwidth loss vanishes: the
                                distribution's largest message */
    double alloc_latency_s;  /* L: 1 ms (Section 5.2.1, measured) */
};

/* The paper's parameters for a distribution whose largest message is
 * largest_bytes, at the given line rate. */
void fp_model_default(struct fp_model *m, double line_rate_bps, uint32_t largest_bytes);

/* Worst-case message rate (messages / s) for messages of size_bytes. */
double fp_msgrate(const struct fp_model *m, uint32_t size_bytes);
/* Reserve pool of one SRQ bin: msgrate(lo) x L x buf. */
double fp_srq_reserve_bytes(const struct fp_model *m, uint32_t lo_bytes, uint32_t buf_bytes);
/* Sum over bins. */
double fp_srq_reserve_total_bytes(const struct fp_model *m, const struct wl_bin *bins, size_t n);
/* RIMA: line rate x L. */
double fp_rima_reserve_bytes(const struct fp_model *m);
/* Active buffer of SRQ bins when `outstanding` messages wait, spread as the
 * bins' probabilities (the model's lambda x W x s per bin). */
double fp_srq_active_model_bytes(const struct wl_bin *bins, size_t n, double outstanding);

#endif
