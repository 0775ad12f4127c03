/* The event queue: a 4-ary min-heap of (time, seq) keys with back-pointers
 * (heap_index) in the events, so a pending event can be moved or cancelled
 * in O(log n).  A 4-ary heap halves the depth of a binary one and keeps the
 * four children of a node in one or two cache lines (Larkin, Sen & Tarjan,
 * "A back-to-basics empirical study of priority queues", 2014). */
#include <stdlib.h>
#include <string.h>

#include "sim_internal.h"

#define HEAP_ARITY 4

/* Slots hold (time, event): 16 bytes, so the four children of a node
 * fill exactly one 64-byte cache line (LaMarca & Ladner, "The influence of
 * caches on the performance of heaps", 1996).  The sequence number is read
 * from the event only when two times are equal. */
static inline bool ent_less(const struct sim_heap_ent *a, const struct sim_heap_ent *b)
{
    return a->time < b->time || (a->time == b->time && a->ev->seq < b->ev->seq);
}

static inline void heap_place(struct sim *sim, size_t i, struct sim_heap_ent e)
{
    sim->heap[i] = e;
    if (e.ev != sim->ghost || i != 0)
        e.ev->heap_index = (uint32_t)i;
}

static void sift_up(struct sim *sim, size_t i, struct sim_heap_ent e)
{
    while (i > 0) {
        size_t parent = (i - 1) / HEAP_ARITY;
        if (!ent_less(&e, &sim->heap[parent]))
            break;
        heap_place(sim, i, sim->heap[parent]);
        i = parent;
    }
    heap_place(sim, i, e);
}

/* With random keys the branches of a sift are unpredictable and its loads
 * miss the cache once the heap outgrows L2, so the smallest child is chosen
 * with conditional moves and the grandchildren's lines are prefetched while
 * the children are compared (the 4 lines hold all 16 grandchildren). */
static void sift_down(struct sim *sim, size_t i, struct sim_heap_ent e)
{
    size_t n = sim->n;
    struct sim_heap_ent *h = sim->heap;
    for (;;) {
        size_t first = i * HEAP_ARITY + 1;
        if (first >= n)
            break;
        size_t grand = first * HEAP_ARITY + 1;
        if (grand < n) {
            __builtin_prefetch(&h[grand]);
            __builtin_prefetch(&h[grand + 4]);
            __builtin_prefetch(&h[grand + 8]);
            __builtin_prefetch(&h[grand + 12]);
        }
        size_t best = first;
        sim_time_t best_t = h[first].time;
        size_t last = first + HEAP_ARITY < n ? first + HEAP_ARITY : n;
        for (size_t c = first + 1; c < last; c++) {
            sim_time_t t = h[c].time;
            bool lt = t < best_t;
            if (__builtin_expect(t == best_t, 0))
                lt = h[c].ev->seq < h[best].ev->seq;
            best = lt ? c : best;
            best_t = lt ? t : best_t;
        }
        if (!ent_less(&h[best], &e))
            break;
        heap_place(sim, i, h[best]);
        i = best;
    }
    heap_place(sim, i, e);
}

/* The slots are placed 3 slots past a cache-line boundary, so that the
 * children of every node (4i+1 .. 4i+4) fill exactly one line. */
enum { HEAP_LINE = 64, HEAP_SHIFT = 3 };

static void heap_grow(struct sim *sim)
{
    size_t cap = sim->cap ? sim->cap * 2 : 1024;
    size_t bytes = (cap + HEAP_SHIFT + 1) * sizeof(struct sim_heap_ent);
    bytes = (bytes + HEAP_LINE - 1) / HEAP_LINE * HEAP_LINE;
    char *mem = aligned_alloc(HEAP_LINE, bytes);
    if (!mem) {
        fprintf(stderr, "rnicsim: out of memory growing the event queue to %zu events\n", cap);
        abort();
    }
    struct sim_heap_ent *h = (struct sim_heap_ent *)mem + HEAP_SHIFT;
    if (sim->n)
        memcpy(h, sim->heap, sim->n * sizeof(*h));
    if (sim->heap)
        free(sim->heap - HEAP_SHIFT);
    sim->heap = h;
    sim->cap = cap;
}

/* Remove the entry at index i (not the ghost). */
static void heap_remove_at(struct sim *sim, size_t i)
{
    sim->heap[i].ev->heap_index = SIM_EVENT_IDLE;
    sim->n--;
    if (i == sim->n)
        return;
    struct sim_heap_ent last = sim->heap[sim->n];
    if (i > 0 && ent_less(&last, &sim->heap[(i - 1) / HEAP_ARITY]))
        sift_up(sim, i, last);
    else
        sift_down(sim, i, last);
}

void sim_heap_pop_root(struct sim *sim)
{
    sim->n--;
    if (sim->n > 0)
        sift_down(sim, 0, sim->heap[sim->n]);
}

/* Does not touch the events: their owners may already be gone (components
 * are destroyed before the simulator). */
void sim_heap_free(struct sim *sim)
{
    if (sim->heap)
        free(sim->heap - HEAP_SHIFT);
    sim->heap = NULL;
    sim->n = sim->cap = 0;
}

void sim_event_init(struct sim_event *ev, sim_event_fn fn, void *ctx, const char *name)
{
    memset(ev, 0, sizeof(*ev));
    ev->fn = fn;
    ev->ctx = ctx;
    ev->name = name;
    ev->heap_index = SIM_EVENT_IDLE;
}

void sim_schedule_at(struct sim *sim, struct sim_event *ev, sim_time_t when)
{
    if (when < sim->now) {
        fprintf(stderr,
                "rnicsim: internal error: event '%s' scheduled in the past (%llu < %llu ps)\n",
                ev->name ? ev->name : "?", (unsigned long long)when, (unsigned long long)sim->now);
        abort();
    }
    struct sim_heap_ent e = {when, ev};
    ev->time = when;
    ev->seq = sim->seq++;
    if (ev->heap_index != SIM_EVENT_IDLE) {
        /* Move: a later key sinks, an earlier one rises. */
        size_t i = ev->heap_index;
        if (ent_less(&e, &sim->heap[i]))
            sift_up(sim, i, e);
        else
            sift_down(sim, i, e);
        return;
    }
    if (ev == sim->ghost) {
        /* The running event reschedules itself: it still sits in the root
         * with the smallest key, so re-key it and sift it down once. */
        sim->ghost = NULL;
        sift_down(sim, 0, e);
        return;
    }
    if (sim->n == sim->cap)
        heap_grow(sim);
    sift_up(sim, sim->n++, e);
}

void sim_schedule_in(struct sim *sim, struct sim_event *ev, sim_time_t delay_ps)
{
    sim_schedule_at(sim, ev, sim_time_add(sim->now, delay_ps));
}

void sim_cancel(struct sim *sim, struct sim_event *ev)
{
    if (ev->heap_index == SIM_EVENT_IDLE)
        return;
    heap_remove_at(sim, ev->heap_index);
}

void sim_check_invariants(const struct sim *sim)
{
    for (size_t i = 0; i < sim->n; i++) {
        const struct sim_heap_ent *e = &sim->heap[i];
        const char *what = NULL;
        if (e->ev->heap_index != i && !(i == 0 && e->ev == sim->ghost))
            what = "heap_index does not point back at the slot";
        else if (e->ev->time != e->time)
            what = "slot key differs from the event's key";
        else if (i > 0 && ent_less(e, &sim->heap[(i - 1) / HEAP_ARITY]))
            what = "slot is smaller than its parent";
        else if (e->time < sim->now)
            what = "event is in the past";
        if (what) {
            fprintf(stderr, "rnicsim: event queue invariant broken at slot %zu (event '%s'): %s\n",
                    i, e->ev->name ? e->ev->name : "?", what);
            abort();
        }
    }
}
