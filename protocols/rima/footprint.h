/* footprint: the RIMA memory-footprint study (issue 5; Xue et al., RIMA,
 * Sections 4.1 and 5.1, Figures 3-7).  See footprint.c and
 * docs/rima-footprint.md. */
#ifndef RNICSIM_PROTOCOLS_RIMA_FOOTPRINT_H
#define RNICSIM_PROTOCOLS_RIMA_FOOTPRINT_H

/* Entry point, an ordinary main().  0 on success, 1 on a setup, verbs or
 * completion error, 2 on a usage error or a message that did not verify.
 * `--help` lists the options. */
int footprint_main(int argc, char **argv);

#endif
