/* The built-in traffic generator: datacenter workloads (permutation,
 * incast, all-to-all, Poisson flow arrivals with the standard flow-size
 * distributions) carried out as RDMA WRITEs over RC queue pairs through
 * the real NIC model (doorbells, WQE fetch, payload DMA, go-back-N, ACKs,
 * CQEs over PCIe) -- without a program, a process or a polling loop per
 * flow.  It posts work requests straight into the NICs (nic.h) and learns
 * of completions from CQ notification callbacks, so a million flows cost
 * what their packets cost.
 *
 * A flow is a transfer of `size` bytes from one host to another, posted as
 * WRITEs of at most message_bytes with at most `depth` outstanding on its
 * QP.  Its flow-completion time (FCT) runs from its arrival (first post)
 * to the send CQE of its last message, i.e. the ACK of its last byte, as
 * an RDMA application sees it.  Its slowdown is FCT / the FCT it would have
 * alone in the fabric (ideal_ps: its bytes at the path's bottleneck rate
 * plus the one-way time of its last packet and the return of the ACK; the
 * NIC's own processing and PCIe time are not in the ideal, so they show as
 * slowdown).  docs/traffic.md has the whole story. */
#ifndef RNICSIM_TRAFFIC_H
#define RNICSIM_TRAFFIC_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "../fabric/fabric.h"
#include "../nic/nic.h"
#include "../sim.h"
#include "flowsize.h"

enum traffic_pattern {
    TRAFFIC_PERMUTATION, /* every host sends to one other host, each receives from one */
    TRAFFIC_INCAST,      /* `senders` hosts send to one receiver at once */
    TRAFFIC_ALL_TO_ALL,  /* every host sends to every other host at once */
    TRAFFIC_POISSON,     /* per host: Poisson arrivals at a load, random destinations */
    TRAFFIC_PATTERN_COUNT
};
extern const char *const traffic_pattern_names[]; /* "permutation", "incast", ... NULL */

struct traffic_params {
    enum traffic_pattern pattern;
    enum flowsize_dist sizes; /* FIXED: size_bytes */
    uint64_t size_bytes;
    uint32_t qps_per_host;  /* permutation, incast, all-to-all: one transfer split over N QPs */
    uint32_t senders;       /* incast: fan-in (distinct hosts, not the receiver) */
    uint32_t receiver;      /* incast: the receiving node */
    double load;            /* poisson: offered load per host, fraction of its link rate */
    uint64_t max_flows;     /* poisson: flows in all at most (0: no limit) */
    sim_time_t duration_ps; /* poisson: arrivals in [start, start + duration) */
    sim_time_t start_ps;    /* when the pattern starts */
    uint64_t message_bytes; /* a flow's WRITEs are at most this long (<= 1 GiB) */
    uint32_t depth;         /* WRITEs of one flow outstanding at most */
    uint32_t mtu_bytes;     /* path MTU of the QPs (256..4096) */
    uint8_t ack_timeout;    /* IBA local ACK timeout exponent: 4.096 us x 2^t */
    uint8_t traffic_class;  /* priority of the QPs' packets (PFC class) */
    bool verify;            /* check every flow's bytes at the receiver (needs payloads) */
    sim_time_t window_from_ps, window_to_ps; /* Jain's index over this window (to > from) */
};

/* Defaults: permutation of 1 MiB flows, 1 QP per host, 4 KiB MTU, whole
 * flows as one WRITE, timeout exponent 14 (perftest's default). */
void traffic_params_default(struct traffic_params *p);

struct traffic;

/* Set up the generator over `n_hosts` NICs (node i = nics[i]) of a
 * fabric `topo` (for the ideal FCTs).  Hosts' PDs, MRs and CQs are
 * created now; QPs when a host pair first needs one.  NULL with a reason
 * in `why` on bad parameters. */
struct traffic *traffic_create(struct sim *sim, struct nic *const *nics, uint32_t n_hosts,
                               struct topology *topo, const struct traffic_params *p, char *why,
                               size_t why_len);
void traffic_destroy(struct traffic *t);
/* Schedule the arrivals.  `done_fn(sim, a, b)` is called when the last
 * flow completes (and no more will arrive). */
void traffic_start(struct traffic *t, sim_cb_fn done_fn, void *a, void *b);

struct traffic_flow {
    uint32_t src, dst;
    uint64_t size;
    sim_time_t start_ps, end_ps; /* end_ps 0: not finished */
    sim_time_t ideal_ps;
    uint64_t done_bytes;   /* bytes of completed WRITEs */
    uint64_t window_bytes; /* ... completed inside the fairness window */
    bool failed;           /* a WRITE completed in error */
};
const struct traffic_flow *traffic_flows(const struct traffic *t, size_t *n);
/* Flows that arrived and have not finished. */
uint64_t traffic_unfinished(const struct traffic *t);
/* QPs created (two per connection). */
uint64_t traffic_qps(const struct traffic *t);
const struct traffic_params *traffic_get_params(const struct traffic *t);
/* Data check: flows verified, and flows whose bytes differed. */
void traffic_verify_counts(const struct traffic *t, uint64_t *checked, uint64_t *bad);

/* FCT statistics per flow-size bucket (bucket B_NONE = every flow). */
enum { TRAFFIC_BUCKETS = 5 };
extern const uint64_t traffic_bucket_max_bytes[TRAFFIC_BUCKETS]; /* upper bounds, inclusive */
struct traffic_stats {
    uint64_t flows, unfinished, failed;
    struct {
        uint64_t flows;
        sim_time_t fct_p50_ps, fct_p95_ps, fct_p99_ps, fct_max_ps;
        double slow_p50, slow_p95, slow_p99, slow_mean;
    } bucket[TRAFFIC_BUCKETS + 1]; /* [TRAFFIC_BUCKETS] = all flows */
    double jain; /* Jain's fairness index of window_bytes over the flows (window set), else 0 */
    sim_time_t last_end_ps;
};
void traffic_stats(const struct traffic *t, struct traffic_stats *s);
/* One CSV line per flow (src,dst,size,start_ns,fct_ns,ideal_ns,slowdown). */
int traffic_write_flows_csv(const struct traffic *t, FILE *f);

#endif /* RNICSIM_TRAFFIC_H */
