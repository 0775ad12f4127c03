/* The timeline of a run (docs/timeline.md): the event trace's records
 * (sim/trace.h) streamed to a Chrome trace-event / Perfetto JSON file
 * (`--timeline FILE`) and/or printed as text (`--trace`), with filters by
 * host, QP and time window and a bound on the file's size.
 *
 * Tracks: one process per host with a thread per program thread, per NIC
 * engine, per NIC cache and per PCIe direction; one "fabric" process with a
 * thread per link direction.  Work requests are followed by flow arrows
 * from ibv_post_send to the ibv_poll_cq that returns their completion. */
#ifndef RNICSIM_TIMELINE_H
#define RNICSIM_TIMELINE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "sim/sim.h"

struct world;
struct timeline;

/* One --timeline-qps entry: QP `qpn` on host `host` (-1: on any host). */
struct tl_qp_sel {
    int64_t host;
    uint32_t qpn;
};

struct timeline_opts {
    const char *json_path; /* --timeline FILE (NULL: none) */
    bool text;             /* --trace: one line per record on stdout */
    uint64_t max_bytes;    /* --timeline-max: the JSON file stops growing here */
    /* filters (the arguments as given; checked by timeline_check_opts) */
    const char *hosts;  /* "h0,h2" */
    const char *qps;    /* "0x100,h1:0x101" */
    const char *window; /* "10us:50us", "10us:" */
};

#define TIMELINE_DEFAULT_MAX_BYTES ((uint64_t)256 << 20)

/* If argv[*i] is one of the timeline options (--timeline FILE, --trace,
 * --timeline-hosts/-qps/-window/-max VALUE, also as --opt=VALUE), take it
 * (advancing *i past its value) and return 1; 0 if it is not one; -1
 * with a message in `why` if its value is missing or bad. */
int timeline_parse_opt(int argc, char **argv, int *i, struct timeline_opts *o, char *why,
                       size_t why_len);
/* The options as command-line words (for a child run): appends to argv
 * from *n on (at most 10 words). */
void timeline_opts_argv(const struct timeline_opts *o, const char **argv, size_t *n, char *max_buf,
                        size_t max_len);
/* True if any output is asked for. */
static inline bool timeline_wanted(const struct timeline_opts *o)
{
    return o && (o->json_path || o->text);
}
/* Check the --timeline file can be written (check_output_path) and the
 * filters against a scenario of `nhosts` hosts: 0, or -1 with a message
 * ("--timeline-hosts: unknown host 'h9' (the scenario has h0..h3)"). */
int timeline_check_opts(const struct timeline_opts *o, size_t nhosts, char *why, size_t why_len);
/* Start listening to the simulator of `w` (before any program runs).  NULL
 * with `why` if the file cannot be created.  `label` goes into the file's
 * metadata (scenario name and seed). */
struct timeline *timeline_start(struct world *w, const struct timeline_opts *o, const char *label,
                                char *why, size_t why_len);
/* Stop listening, close the JSON (a complete file even after the size
 * bound was hit) and say on stderr if it was cut.  Returns 0, or -1 if the
 * file could not be written (message on stderr). */
int timeline_finish(struct timeline *tl);

#endif
