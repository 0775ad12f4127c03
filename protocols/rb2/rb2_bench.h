/* rb2: the evaluation driver of RB² and its rival DRBs (rb2_bench.c). */
#ifndef RNICSIM_PROTOCOLS_RB2_BENCH_H
#define RNICSIM_PROTOCOLS_RB2_BENCH_H

int rb2_main(int argc, char **argv);

#endif
