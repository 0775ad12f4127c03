/* rima_stream: N senders append a deterministic stream of mixed-size
 * messages to one append queue (protocols/rima/rima.h, hardware or software
 * mode); the server checks every message exactly once.  README section
 * "rima_stream" in protocols/README.md. */
#ifndef RNICSIM_PROTOCOLS_RIMA_STREAM_H
#define RNICSIM_PROTOCOLS_RIMA_STREAM_H

/* Entry point, an ordinary main().  0 = every message valid, 1 = a
 * violation (the server found one, or the client was told), 2 = usage,
 * setup or transport error. */
int rima_stream_main(int argc, char **argv);

#endif
