/* Real-hardware implementation of <rnicsim/host.h> (tools/real/host_posix.c):
 * configuration hook for programs that have their own main(). */
#ifndef RNICSIM_HOST_POSIX_H
#define RNICSIM_HOST_POSIX_H

/* Tell the out-of-band layer the program's arguments: `--server` makes this
 * process serve the key/value board, `--client` connects to
 * $RNICSIM_OOB_SERVER (host[:port]) or else to the last argument that is not
 * an option (the perftest convention `prog --client HOST`).  Optional: when
 * never called, the same rules are applied to /proc/self/cmdline at the first
 * host_oob_* call. */
void host_posix_set_args(int argc, char **argv);

#endif /* RNICSIM_HOST_POSIX_H */
