/* Hardware microbenchmark sweeps (issue 4): message size, number of QPs,
 * MR working set, atomics contention on one address (host or device
 * memory), doorbell batching.  One --server serves --clients=K client
 * programs, each connecting --qps=N RC QPs to it.  Written against
 * <infiniband/verbs.h> and <rnicsim/host.h> only, so the same file runs in
 * the simulator and on real RNICs. */
#ifndef RNICSIM_PROTOCOLS_MICROBENCH_H
#define RNICSIM_PROTOCOLS_MICROBENCH_H

/* Entry point, an ordinary main().  Returns 0 on success, 1 on a setup,
 * verbs or completion error (device memory not supported included), 2 on
 * a usage error or when the data / the atomic counter did not verify.
 * `--help` lists the options. */
int microbench_main(int argc, char **argv);

#endif /* RNICSIM_PROTOCOLS_MICROBENCH_H */
