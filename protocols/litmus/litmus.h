/* Ordering litmus protocols: small uni-directional channels (Taranov et al.,
 * Section 4) whose receiver validates every message, so that a transport or
 * DMA mode that reorders bytes or messages the protocol depends on makes
 * the run fail visibly.  Written against <infiniband/verbs.h> and
 * <rnicsim/host.h> only, like perftest.  docs/ordering.md explains them and
 * `rnicsim check-order` runs them many times. */
#ifndef RNICSIM_PROTOCOLS_LITMUS_H
#define RNICSIM_PROTOCOLS_LITMUS_H

/* Entry point, an ordinary main().  Returns 0 when every message was valid,
 * 1 on an ordering violation (the receiver found it, or the sender was told
 * so by the receiver), 2 on a usage, setup or transport error.  `--help`
 * lists the options. */
int litmus_main(int argc, char **argv);

#endif /* RNICSIM_PROTOCOLS_LITMUS_H */
