/* largemsg: the large-message alternatives of Table 6 (Xue et al., RIMA,
 * Section 5.2.1) measured on FastKV's request path.
 *
 * It is fastkv (protocols/rima/fastkv.c) with the defaults of that study:
 * every request is a SET whose value has the memcached size of Figure 2
 * (--get-ratio=0: every request is a message of the distribution), and
 * --transport=split-alloc.  Messages of <= --small-max (1 KiB, the paper's
 * cutoff at the 95.6th percentile) go through an SRQ of 1-KiB buffers;
 * larger ones by
 *   split-alloc    row 3: rendezvous with on-demand allocation (1 ms),
 *   split-faa      row 4: remote FETCH_AND_ADD on a shared buffer's tail,
 *                  then WRITE_WITH_IMM,
 *   split-presend  row 5: WRITE_WITH_IMM into the sender's pre-allocated
 *                  slot (footprint = senders x slot),
 * against rima / rima-sw, which take every size into one append queue.
 * The row "fastkv" reports the latency percentiles of all messages and of
 * the large ones (lat_*, large_*) and the servers' receive footprint. */
#include "protocols/rima/fastkv.h"

int largemsg_main(int argc, char **argv)
{
    return fastkv_run(argc, argv, true);
}
