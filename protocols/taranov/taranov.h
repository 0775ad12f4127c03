/* taranov: driver of the Taranov et al. uni-directional channels
 * (protocols/taranov/channel.h): streams checked messages through one
 * channel, or ping-pongs through a pair (docs/taranov.md).  Exit status 0
 * = every message valid, 1 = a message failed its check (VIOLATION), 2 =
 * usage, set-up or transport error.  `--help` lists the options, `--list`
 * the channels. */
#ifndef RNICSIM_PROTOCOLS_TARANOV_H
#define RNICSIM_PROTOCOLS_TARANOV_H

int taranov_main(int argc, char **argv);

#endif /* RNICSIM_PROTOCOLS_TARANOV_H */
