/* Huang & Ghandeharizadeh, "An Evaluation of RDMA-based Message Passing
 * Protocols": the five RC request/response protocols (SEND/SEND,
 * SEND/WRITE, WRITE/SEND, WRITE/WRITE, READ) over the M:1, 1:M and M:M
 * abstractions, with R pending requests per QP, S threads per node, value
 * size V and the marker framing of every WRITE checked (docs/huang.md).
 * One program per node (--node=I); written against <infiniband/verbs.h>
 * and <rnicsim/host.h> only, so the same files run in the simulator and on
 * real RNICs (real_huang, same options). */
#ifndef RNICSIM_PROTOCOLS_HUANG_H
#define RNICSIM_PROTOCOLS_HUANG_H

/* Entry point, an ordinary main().  Returns 0 on success, 1 on a set-up,
 * verbs or completion error or a torn / wrong message (an order_violation
 * row is reported), 2 on a usage error.  `--help` lists the options. */
int huang_main(int argc, char **argv);

#endif /* RNICSIM_PROTOCOLS_HUANG_H */
