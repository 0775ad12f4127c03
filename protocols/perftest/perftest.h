/* perftest-style latency and bandwidth driver (RDMA WRITE, READ, SEND,
 * FETCH_AND_ADD) written against <infiniband/verbs.h> and <rnicsim/host.h>
 * only, so the same file runs in the simulator and on real RNICs. */
#ifndef RNICSIM_PROTOCOLS_PERFTEST_H
#define RNICSIM_PROTOCOLS_PERFTEST_H

/* Entry point, an ordinary main().  Returns 0 on success, 1 on a usage,
 * setup or transport error, 2 when received data did not match what the
 * peer sent (verification failure). `--help` lists the options. */
int perftest_main(int argc, char **argv);

#endif /* RNICSIM_PROTOCOLS_PERFTEST_H */
