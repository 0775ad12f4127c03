/* ps_count: an in-network traffic counter, the example switch program of
 * docs/pswitch.md. */
#ifndef RNICSIM_PS_COUNT_H
#define RNICSIM_PS_COUNT_H

int ps_count_main(int argc, char **argv);

#endif /* RNICSIM_PS_COUNT_H */
