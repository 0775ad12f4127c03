/* State of the simulator shared by the core's files (event.c, sim.c,
 * proc.c).  Nothing outside the sim/ folder includes this. */
#ifndef RNICSIM_SIM_INTERNAL_H
#define RNICSIM_SIM_INTERNAL_H

#include "sim.h"
#include "trace.h"

/* A heap slot keeps a copy of its event's time, so sifting compares
 * contiguous memory instead of chasing event pointers (see event.c). */
struct sim_heap_ent {
    sim_time_t time;
    struct sim_event *ev;
};

struct sim_call; /* one-off callback (sim_call_in), free-listed */

struct sim {
    struct sim_head head; /* first: read through sim_trace_groups() (sim.h) */
    sim_time_t now;
    uint64_t seq;
    uint64_t seed;
    uint64_t executed;
    bool stop;
    bool check_evq; /* RNICSIM_CHECK_EVQ set (debug builds only) */

    /* 4-ary min-heap on (time, seq) */
    struct sim_heap_ent *heap;
    size_t n, cap;
    /* The event being executed stays in heap[0] as a "ghost" (heap_index
     * IDLE) until its callback returns; if the callback reschedules it, the
     * root is re-keyed and sifted down once instead of pop + push. */
    struct sim_event *ghost;

    struct sim_call *call_free;
    void **call_slabs;
    size_t n_call_slabs, cap_call_slabs;

    /* processes, in creation order */
    struct sim_proc **procs;
    size_t n_procs, cap_procs;
    void *main_sp;                 /* scheduler context while a process runs */
    uint64_t switches;             /* switches into processes (sim_switches) */
    const void *main_stack_bottom; /* for the ASan fiber annotations */
    size_t main_stack_size;

    /* event trace (trace.c): the ring, and a streaming sink */
    struct trace_rec *trace;
    size_t trace_cap;
    uint64_t trace_total;
    trace_sink_fn sink_fn;
    void *sink_arg;
    uint32_t sink_groups;

    uint64_t progress_every, progress_next;
    sim_progress_fn progress_fn;
    void *progress_arg;
};

/* event.c */
void sim_heap_pop_root(struct sim *sim);
void sim_heap_free(struct sim *sim);
/* proc.c */
void sim_procs_free(struct sim *sim);
/* True if a non-daemon process has not finished. */
bool sim_procs_live(const struct sim *sim);

#endif
