/* hostbench: the effects of the host model end to end (docs/host.md):
 * threads on hyper-threads and shared CPUs, and a write-twice ping-pong
 * whose receiver reads each message and advances a pointer, with the
 * message's alignment, the pointer's line, the buffers' socket and the
 * threads' CPUs as options.  Written against <infiniband/verbs.h> and
 * <rnicsim/host.h> only, so it also builds for real hardware. */
#ifndef RNICSIM_PROTOCOLS_HOSTBENCH_H
#define RNICSIM_PROTOCOLS_HOSTBENCH_H

/* Entry point, an ordinary main().  0 on success, 1 on a verbs error or a
 * wrong message, 2 on a usage error.  `--help` lists the options. */
int hostbench_main(int argc, char **argv);

#endif /* RNICSIM_PROTOCOLS_HOSTBENCH_H */
