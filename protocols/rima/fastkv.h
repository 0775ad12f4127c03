/* FastKV: a key-value cache over RDMA (Xue et al., RIMA, Section 4.1 and
 * 5.2) with the request transports the paper compares: SEND/RECV into one
 * SRQ of maximum-size buffers in footprint-priority mode (Table 5), RIMA
 * appends (hardware or the software emulation), and the large-message
 * alternatives of Table 6 rows 3-5.  docs/rima-perf.md is the manual. */
#ifndef RNICSIM_PROTOCOLS_RIMA_FASTKV_H
#define RNICSIM_PROTOCOLS_RIMA_FASTKV_H

#include <stdbool.h>

/* fastkv --server --id=S | --client --id=C  [options]: see --help. */
int fastkv_main(int argc, char **argv);
/* largemsg: fastkv with the defaults of the Table 6 study (every request a
 * SET whose value has the memcached size, --transport=split-alloc). */
int largemsg_main(int argc, char **argv);
/* Both entry points: largemsg selects the Table 6 defaults. */
int fastkv_run(int argc, char **argv, bool largemsg);

#endif
