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

/* The calendar wheel (event.c): buckets of 2^SIM_WHEEL_SHIFT ps (~1 ns),
 * SIM_WHEEL_BUCKETS of them (~4.2 us ahead of the clock's bucket). */
#define SIM_WHEEL_SHIFT 10
#define SIM_WHEEL_BUCKETS 4096
struct sim_went {
    sim_time_t time;
    uint64_t seq;
    struct sim_event *ev;
};
struct sim_bucket {
    struct sim_went *e;
    uint32_t n, cap;
};

struct sim {
    struct sim_head head; /* first: read through sim_trace_groups() (sim.h) */
    sim_time_t now;
    uint64_t seq;
    uint64_t seed;
    uint64_t executed;
    bool stop;
    bool check_evq; /* RNICSIM_CHECK_EVQ set (debug builds only) */

    /* 4-ary min-heap on (time, seq): events past the wheel's horizon */
    struct sim_heap_ent *heap;
    size_t n, cap;

    /* the wheel: bucket wheel_cur covers [wheel_start, + 2^SHIFT) and is
     * sorted; the others follow in order, unordered inside */
    struct sim_bucket *wheel;
    uint64_t wheel_bits[SIM_WHEEL_BUCKETS / 64]; /* bucket may hold entries */
    uint64_t wheel_words; /* bit w: wheel_bits[w] is not 0 (64 words: one word) */
    sim_time_t wheel_start;
    size_t wheel_cur, wheel_pos, wheel_live; /* the clock's bucket is drained from wheel_pos */
    /* Off (every timed event in the heap) while few are pending: turned on
     * when the heap reaches wheel_on_at events, off again when the clock's
     * bucket is drained with fewer than wheel_off_below pending (event.c) */
    bool wheel_on;
    uint32_t wheel_on_at, wheel_off_below;
    struct sim_bucket near;   /* binary heap: scheduled into it since */
    struct sim_went *scratch; /* for sorting a bucket */
    size_t scratch_cap;

    /* Events due now (scheduled with no delay): a FIFO beside the heap
     * (event.c).  They carry the newest sequence numbers, so they run after
     * every heap event of the same instant and in the order scheduled: the
     * (time, seq) order of the heap, without its O(log n).  A slot is NULL
     * once its event was cancelled or moved. */
    struct sim_event **zq;
    size_t zq_head, zq_n, zq_cap, zq_live; /* ring: zq_cap a power of two */

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
/* heap_index of an event in the now-FIFO: this bit + its ring slot; in
 * the wheel: SIM_EVENT_IN_WHEEL + its slot in the bucket of its time, or
 * SIM_EVENT_IN_NEAR + its slot in the near heap; in the heap: its slot
 * (below all three) */
#define SIM_EVENT_IN_ZQ 0x80000000u
#define SIM_EVENT_IN_WHEEL 0x40000000u
#define SIM_EVENT_IN_NEAR 0x20000000u
void sim_queue_init(struct sim *sim);
/* The next event of the now-FIFO, taken out of it (NULL if empty). */
struct sim_event *sim_zq_pop(struct sim *sim);
/* The earliest event of the wheel and heap (left in place), or NULL when
 * none is due in a bucket starting at or before `limit`; sim_wheel_pop
 * takes it out. */
struct sim_event *sim_wheel_peek(struct sim *sim, sim_time_t limit);
void sim_wheel_pop(struct sim *sim);
/* Time of the earliest pending event (SIM_TIME_NEVER: none). */
sim_time_t sim_queue_next_time(const struct sim *sim);
/* sim_horizon over the now-FIFO, the wheel (its clock's bucket, near heap
 * and later buckets in time order) and the heap. */
sim_time_t sim_queue_horizon(const struct sim *sim, uint32_t host, sim_time_t lookahead_ps);
void sim_heap_free(struct sim *sim);
/* proc.c */
void sim_procs_free(struct sim *sim);
/* True if a non-daemon process has not finished. */
bool sim_procs_live(const struct sim *sim);

#endif
