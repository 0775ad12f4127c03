/* The event queue: (time, seq) order, FIFO among equal times.
 *
 * Three structures, each event in at most one (ev->heap_index says where):
 *
 *   now-FIFO   events due at the current instant, scheduled with no delay:
 *              they carry the newest sequence numbers, so they run after
 *              every other event of this instant, in the order scheduled;
 *   wheel      (only while many events are pending: SIM_WHEEL_ON_AT below)
 *              a calendar of SIM_WHEEL_BUCKETS buckets of 2^SIM_WHEEL_SHIFT
 *              ps each covering the next ~4 us (Brown, "Calendar queues",
 *              CACM 1988): an event goes into the bucket of its time, O(1);
 *              a bucket is sorted by (time, seq) when the clock reaches it
 *              and then drained in order (a dozen entries per bucket at the
 *              densities of a fabric run); events scheduled into the
 *              clock's bucket after that wait in a small binary heap beside
 *              it (the near heap), cancelled ones leave a hole;
 *   heap       a 4-ary min-heap with back-pointers for events beyond the
 *              wheel's horizon (timers of microseconds to milliseconds);
 *              they move into the wheel as its horizon reaches them.
 *
 * Why: the 4-ary heap alone cost ~370 instructions per event at 10-80k
 * pending events (30% of a 1024-host permutation's instructions, most of
 * it sifting past events that are nanoseconds apart); the wheel costs an
 * append and a share of a small sort.  docs/core.md has the numbers.
 *
 * The order is exactly the heap's: nothing depends on which structure an
 * event sat in.  A moved or cancelled event's wheel entry is taken out at
 * once (found by a scan of its bucket), so no entry outlives its event. */
#include <stdlib.h>
#include <string.h>

#include "sim_internal.h"

#define HEAP_ARITY 4
/* The wheel is used only while many events are pending (docs/core.md "When
 * the wheel is on"): with a dozen pending, as in a two-host run, the heap
 * is two levels in L1 while the wheel's appends and sorts touch a new
 * bucket every nanosecond of simulated time (27 % of a 64 B WRITE stream's
 * cycles).  Hysteresis keeps a run near the boundary from switching at
 * every event; measured in docs/core.md. */
#define SIM_WHEEL_ON_AT 512
#define SIM_WHEEL_OFF_BELOW 128
#define WHEEL_W ((sim_time_t)1 << SIM_WHEEL_SHIFT)
#define WHEEL_MASK (SIM_WHEEL_BUCKETS - 1)

static void *xmalloc(size_t bytes)
{
    void *p = malloc(bytes);
    if (!p) {
        fprintf(stderr, "rnicsim: out of memory growing the event queue\n");
        abort();
    }
    return p;
}

/* ---------------------------------------------------------------- the heap */

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

static void heap_push(struct sim *sim, struct sim_event *ev)
{
    if (sim->n == sim->cap)
        heap_grow(sim);
    sift_up(sim, sim->n++, (struct sim_heap_ent){ev->time, ev});
}

/* Remove the entry at index i. */
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

/* ---------------------------------------------------------------- the now-FIFO */

static void zq_push(struct sim *sim, struct sim_event *ev)
{
    if (sim->zq_n == sim->zq_cap) {
        size_t cap = sim->zq_cap ? 2 * sim->zq_cap : 256;
        struct sim_event **nq = xmalloc(cap * sizeof(*nq));
        for (size_t i = 0; i < sim->zq_n; i++) {
            nq[i] = sim->zq[(sim->zq_head + i) & (sim->zq_cap - 1)];
            if (nq[i])
                nq[i]->heap_index = SIM_EVENT_IN_ZQ | (uint32_t)i;
        }
        free(sim->zq);
        sim->zq = nq;
        sim->zq_cap = cap;
        sim->zq_head = 0;
    }
    size_t slot = (sim->zq_head + sim->zq_n++) & (sim->zq_cap - 1);
    sim->zq[slot] = ev;
    ev->heap_index = SIM_EVENT_IN_ZQ | (uint32_t)slot;
    sim->zq_live++;
}

/* Take a pending event out of the FIFO (its slot stays, empty). */
static void zq_remove(struct sim *sim, struct sim_event *ev)
{
    sim->zq[ev->heap_index & ~SIM_EVENT_IN_ZQ] = NULL;
    ev->heap_index = SIM_EVENT_IDLE;
    if (--sim->zq_live == 0)
        sim->zq_n = 0; /* only empty slots left */
}

struct sim_event *sim_zq_pop(struct sim *sim)
{
    while (sim->zq_n) {
        struct sim_event *ev = sim->zq[sim->zq_head];
        sim->zq_head = (sim->zq_head + 1) & (sim->zq_cap - 1);
        sim->zq_n--;
        if (ev) {
            ev->heap_index = SIM_EVENT_IDLE;
            sim->zq_live--;
            return ev;
        }
    }
    return NULL;
}

/* ---------------------------------------------------------------- the wheel */

static inline size_t wheel_idx(sim_time_t t)
{
    return (size_t)(t >> SIM_WHEEL_SHIFT) & WHEEL_MASK;
}

/* First time past the wheel: events from here on go to the heap. */
static inline sim_time_t wheel_end(const struct sim *sim)
{
    sim_time_t span = (sim_time_t)SIM_WHEEL_BUCKETS << SIM_WHEEL_SHIFT;
    return sim->wheel_start > SIM_TIME_NEVER - span ? SIM_TIME_NEVER : sim->wheel_start + span;
}

static inline bool went_less(const struct sim_went *a, const struct sim_went *b)
{
    return a->time < b->time || (a->time == b->time && a->seq < b->seq);
}

/* An entry at position k of its bucket (ev->heap_index says where). */
static inline void went_place(struct sim_bucket *b, uint32_t k, struct sim_went e)
{
    b->e[k] = e;
    e.ev->heap_index = SIM_EVENT_IN_WHEEL | k;
}

static __attribute__((noinline)) void bucket_grow(struct sim_bucket *b, uint32_t more)
{
    uint32_t cap = b->cap ? 2 * b->cap : 8;
    while (cap < b->n + more)
        cap *= 2;
    if (cap > SIM_EVENT_IN_NEAR) {
        fprintf(stderr, "rnicsim: over 2^29 events in one nanosecond\n");
        abort();
    }
    struct sim_went *ne = xmalloc(cap * sizeof(*ne));
    if (b->n)
        memcpy(ne, b->e, b->n * sizeof(*ne));
    free(b->e);
    b->e = ne;
    b->cap = cap;
}

/* Room for `more` entries: inlined where events are scheduled, the
 * growth out of line. */
static inline void bucket_reserve(struct sim_bucket *b, uint32_t more)
{
    if (b->n + more > b->cap)
        bucket_grow(b, more);
}

/* ---- the near heap: events scheduled into the clock's bucket after it
 * was sorted (a binary heap; a few entries) */

static inline void near_place(struct sim *sim, uint32_t k, struct sim_went e)
{
    sim->near.e[k] = e;
    e.ev->heap_index = SIM_EVENT_IN_NEAR | k;
}

static void near_sift_up(struct sim *sim, uint32_t k, struct sim_went e)
{
    while (k > 0) {
        uint32_t parent = (k - 1) / 2;
        if (!went_less(&e, &sim->near.e[parent]))
            break;
        near_place(sim, k, sim->near.e[parent]);
        k = parent;
    }
    near_place(sim, k, e);
}

static void near_sift_down(struct sim *sim, uint32_t k, struct sim_went e)
{
    uint32_t n = sim->near.n;
    for (;;) {
        uint32_t c = 2 * k + 1;
        if (c >= n)
            break;
        if (c + 1 < n && went_less(&sim->near.e[c + 1], &sim->near.e[c]))
            c++;
        if (!went_less(&sim->near.e[c], &e))
            break;
        near_place(sim, k, sim->near.e[c]);
        k = c;
    }
    near_place(sim, k, e);
}

static void near_remove_at(struct sim *sim, uint32_t k)
{
    sim->near.e[k].ev->heap_index = SIM_EVENT_IDLE;
    if (--sim->near.n == k)
        return;
    struct sim_went last = sim->near.e[sim->near.n];
    if (k > 0 && went_less(&last, &sim->near.e[(k - 1) / 2]))
        near_sift_up(sim, k, last);
    else
        near_sift_down(sim, k, last);
}

/* ---- the wheel proper */

static void wheel_insert(struct sim *sim, struct sim_event *ev)
{
    size_t i = wheel_idx(ev->time);
    struct sim_went e = {ev->time, ev->seq, ev};
    sim->wheel_live++;
    if (i == sim->wheel_cur) { /* the clock's bucket, already sorted */
        bucket_reserve(&sim->near, 1);
        near_sift_up(sim, sim->near.n++, e);
        return;
    }
    struct sim_bucket *b = &sim->wheel[i];
    bucket_reserve(b, 1);
    sim->wheel_bits[i / 64] |= 1ull << (i % 64);
    sim->wheel_words |= 1ull << (i / 64);
    went_place(b, b->n++, e);
}

/* Take a pending event's entry out (the clock's bucket: a hole, skipped). */
static void wheel_remove(struct sim *sim, struct sim_event *ev)
{
    uint32_t h = ev->heap_index;
    sim->wheel_live--;
    if (h & SIM_EVENT_IN_NEAR) {
        near_remove_at(sim, h & ~SIM_EVENT_IN_NEAR);
        return;
    }
    size_t i = wheel_idx(ev->time);
    struct sim_bucket *b = &sim->wheel[i];
    uint32_t k = h & ~SIM_EVENT_IN_WHEEL;
    ev->heap_index = SIM_EVENT_IDLE;
    if (i == sim->wheel_cur) {
        b->e[k].ev = NULL;
        return;
    }
    if (--b->n != k)
        went_place(b, k, b->e[b->n]);
}

/* Sort the clock's bucket by (time, seq): insertion sort for a few entries,
 * else a bottom-up merge sort through the scratch array. */
static void bucket_sort(struct sim *sim, struct sim_bucket *b)
{
    uint32_t n = b->n;
    if (n <= 24) {
        for (uint32_t i = 1; i < n; i++) {
            struct sim_went e = b->e[i];
            uint32_t j = i;
            for (; j > 0 && went_less(&e, &b->e[j - 1]); j--)
                b->e[j] = b->e[j - 1];
            b->e[j] = e;
        }
    } else {
        if (sim->scratch_cap < n) {
            free(sim->scratch);
            sim->scratch_cap = n;
            sim->scratch = xmalloc(n * sizeof(*sim->scratch));
        }
        struct sim_went *src = b->e, *dst = sim->scratch;
        for (uint32_t i = 0; i < n; i += 8) { /* runs of 8 by insertion */
            uint32_t end = i + 8 < n ? i + 8 : n;
            for (uint32_t a = i + 1; a < end; a++) {
                struct sim_went e = src[a];
                uint32_t j = a;
                for (; j > i && went_less(&e, &src[j - 1]); j--)
                    src[j] = src[j - 1];
                src[j] = e;
            }
        }
        for (uint32_t w = 8; w < n; w *= 2) {
            for (uint32_t lo = 0; lo < n; lo += 2 * w) {
                uint32_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
                uint32_t x = lo, y = mid, k = lo;
                while (x < mid && y < hi)
                    dst[k++] = went_less(&src[y], &src[x]) ? src[y++] : src[x++];
                while (x < mid)
                    dst[k++] = src[x++];
                while (y < hi)
                    dst[k++] = src[y++];
            }
            struct sim_went *t = src;
            src = dst;
            dst = t;
        }
        if (src != b->e)
            memcpy(b->e, src, n * sizeof(*src));
    }
    for (uint32_t k = 0; k < n; k++)
        b->e[k].ev->heap_index = SIM_EVENT_IN_WHEEL | k;
}

/* The next non-empty bucket after the current one, within the wheel;
 * SIZE_MAX if none. */
_Static_assert(SIM_WHEEL_BUCKETS == 64 * 64, "wheel_words summarises the occupancy in one word");

/* From `step` buckets after the clock's (the start of an occupancy word),
 * the step of the first word that holds any bucket, or SIM_WHEEL_BUCKETS
 * (wheel_words, rotated so that bit 0 is that word). */
static inline size_t wheel_skip_words(const struct sim *sim, size_t step)
{
    if (step >= SIM_WHEEL_BUCKETS)
        return SIM_WHEEL_BUCKETS;
    unsigned w = (unsigned)(((sim->wheel_cur + step) & WHEEL_MASK) / 64);
    uint64_t rot = (sim->wheel_words >> w) | (sim->wheel_words << ((64 - w) & 63));
    if (!rot)
        return SIM_WHEEL_BUCKETS;
    step += 64 * (size_t)__builtin_ctzll(rot);
    return step < SIM_WHEEL_BUCKETS ? step : SIM_WHEEL_BUCKETS;
}

static inline size_t next_bucket(const struct sim *sim)
{
    size_t cur = sim->wheel_cur;
    for (size_t step = 1; step < SIM_WHEEL_BUCKETS;) {
        size_t i = (cur + step) & WHEEL_MASK;
        uint64_t word = sim->wheel_bits[i / 64] >> (i % 64);
        if (word)
            return step + (size_t)__builtin_ctzll(word) < SIM_WHEEL_BUCKETS
                       ? (cur + step + (size_t)__builtin_ctzll(word)) & WHEEL_MASK
                       : SIZE_MAX;
        step = wheel_skip_words(sim, step + 64 - i % 64);
    }
    return SIZE_MAX;
}

/* Move the clock's bucket forward to the next one that holds events
 * (bringing heap events the horizon now covers into the wheel) and sort
 * it.  False when nothing is pending in the wheel or the heap, or the next
 * bucket starts after `limit` (the wheel never runs ahead of the clock by
 * more than the bucket of the next event to run).  The clock's bucket is
 * drained (its sorted run and the near heap are empty). */
static bool wheel_advance(struct sim *sim, sim_time_t limit)
{
    size_t j = next_bucket(sim);
    sim_time_t start;
    if (j != SIZE_MAX)
        start = sim->wheel_start + (sim_time_t)((j - sim->wheel_cur) & WHEEL_MASK) * WHEEL_W;
    else if (sim->n)
        start = sim->heap[0].time & ~(WHEEL_W - 1);
    else
        return false;
    if (start > limit)
        return false;
    struct sim_bucket *old = &sim->wheel[sim->wheel_cur];
    old->n = 0;
    sim->wheel_pos = 0;
    if (old->cap > 64) { /* a burst's array: not kept for the next lap */
        free(old->e);
        old->e = NULL;
        old->cap = 0;
    }
    sim->wheel_bits[sim->wheel_cur / 64] &= ~(1ull << (sim->wheel_cur % 64));
    if (!sim->wheel_bits[sim->wheel_cur / 64])
        sim->wheel_words &= ~(1ull << (sim->wheel_cur / 64));
    sim->wheel_start = start;
    sim->wheel_cur = SIZE_MAX; /* heap events land in their buckets, unsorted */
    sim_time_t end = wheel_end(sim);
    while (sim->n && sim->heap[0].time < end) {
        struct sim_event *ev = sim->heap[0].ev;
        heap_remove_at(sim, 0);
        wheel_insert(sim, ev);
    }
    sim->wheel_cur = wheel_idx(start);
    bucket_sort(sim, &sim->wheel[sim->wheel_cur]);
    return true;
}

/* The earliest of the sorted run (skipping holes) and the near heap. */
static inline struct sim_went *wheel_front(struct sim *sim, bool *from_near)
{
    struct sim_bucket *b = &sim->wheel[sim->wheel_cur];
    while (sim->wheel_pos < b->n && !b->e[sim->wheel_pos].ev)
        sim->wheel_pos++;
    struct sim_went *r = sim->wheel_pos < b->n ? &b->e[sim->wheel_pos] : NULL;
    *from_near = false;
    if (sim->near.n && (!r || went_less(&sim->near.e[0], r))) {
        r = &sim->near.e[0];
        *from_near = true;
    }
    return r;
}

/* Turn the wheel on: its clock's bucket is the current instant's (empty,
 * as if sorted and drained), and the heap's events within its horizon move
 * into it.  Every bucket is empty while the wheel is off. */
static void wheel_enable(struct sim *sim)
{
    sim->wheel_on = true;
    sim->wheel_start = sim->now & ~(WHEEL_W - 1);
    sim->wheel_cur = wheel_idx(sim->now);
    sim->wheel_pos = 0;
    sim_time_t end = wheel_end(sim);
    while (sim->n && sim->heap[0].time < end) {
        struct sim_event *ev = sim->heap[0].ev;
        heap_remove_at(sim, 0);
        wheel_insert(sim, ev);
    }
}

/* Turn it off, its clock's bucket drained (sorted run and near heap
 * empty): the other buckets' events move into the heap, keeping their
 * (time, seq) keys. */
static void wheel_disable(struct sim *sim)
{
    struct sim_bucket *cur = &sim->wheel[sim->wheel_cur];
    cur->n = 0; /* consumed entries and holes only */
    sim->wheel_pos = 0;
    sim->wheel_bits[sim->wheel_cur / 64] &= ~(1ull << (sim->wheel_cur % 64));
    for (size_t word = 0; word < SIM_WHEEL_BUCKETS / 64; word++) {
        for (uint64_t bits = sim->wheel_bits[word]; bits; bits &= bits - 1) {
            struct sim_bucket *b = &sim->wheel[word * 64 + (size_t)__builtin_ctzll(bits)];
            for (uint32_t k = 0; k < b->n; k++) /* no holes outside the clock's bucket */
                heap_push(sim, b->e[k].ev);
            b->n = 0;
            if (b->cap > 64) {
                free(b->e);
                b->e = NULL;
                b->cap = 0;
            }
        }
        sim->wheel_bits[word] = 0;
    }
    sim->wheel_words = 0;
    sim->wheel_live = 0;
    sim->wheel_on = false;
}

void sim_queue_wheel_thresholds(struct sim *sim, uint32_t on_at, uint32_t off_below)
{
    sim->wheel_on_at = on_at;
    sim->wheel_off_below = off_below;
    if (!sim->wheel_on && sim->n >= on_at)
        wheel_enable(sim);
}

struct sim_event *sim_wheel_peek(struct sim *sim, sim_time_t limit)
{
    if (!sim->wheel_on)
        return sim->n ? sim->heap[0].ev : NULL;
    for (;;) {
        bool near;
        struct sim_went *r = wheel_front(sim, &near);
        if (r)
            return r->ev;
        if (sim->n + sim->wheel_live < sim->wheel_off_below) {
            wheel_disable(sim);
            return sim->n ? sim->heap[0].ev : NULL;
        }
        if (!wheel_advance(sim, limit))
            return NULL;
    }
}

void sim_wheel_pop(struct sim *sim)
{
    if (!sim->wheel_on) {
        if (sim->n)
            heap_remove_at(sim, 0);
        return;
    }
    bool near;
    struct sim_went *r = wheel_front(sim, &near);
    if (!r)
        return; /* (callers peek first) */
    sim->wheel_live--;
    if (near) {
        near_remove_at(sim, 0);
        return;
    }
    r->ev->heap_index = SIM_EVENT_IDLE;
    sim->wheel_pos++;
}

sim_time_t sim_queue_next_time(const struct sim *sim)
{
    if (sim->zq_live)
        return sim->now;
    const struct sim_bucket *b = &sim->wheel[sim->wheel_cur];
    sim_time_t t = SIM_TIME_NEVER;
    for (size_t k = sim->wheel_pos; k < b->n; k++)
        if (b->e[k].ev) {
            t = b->e[k].time;
            break;
        }
    if (sim->near.n && sim->near.e[0].time < t)
        t = sim->near.e[0].time;
    if (t != SIM_TIME_NEVER)
        return t;
    size_t j = next_bucket(sim);
    if (j != SIZE_MAX) { /* not sorted yet: its smallest */
        const struct sim_bucket *nb = &sim->wheel[j];
        for (uint32_t k = 0; k < nb->n; k++)
            t = nb->e[k].time < t ? nb->e[k].time : t;
        return t;
    }
    return sim->n ? sim->heap[0].time : SIM_TIME_NEVER;
}

/* ---------------------------------------------------------------- set-up */

void sim_queue_init(struct sim *sim)
{
    sim->wheel = calloc(SIM_WHEEL_BUCKETS, sizeof(*sim->wheel));
    if (!sim->wheel) {
        fprintf(stderr, "rnicsim: out of memory for the event queue\n");
        abort();
    }
    sim->wheel_on_at = SIM_WHEEL_ON_AT;
    sim->wheel_off_below = SIM_WHEEL_OFF_BELOW;
}

/* Does not touch the events: their owners may already be gone (components
 * are destroyed before the simulator). */
/* An event's bound for sim_horizon: later by the lookahead when it
 * resumes a process of another host. */
static inline void horizon_see(const struct sim_event *ev, sim_time_t time, uint32_t host,
                               sim_time_t lookahead_ps, sim_time_t *best)
{
    if (time >= *best)
        return;
    uint32_t owner = ev->owner;
    sim_time_t t = owner && owner != host + 1 ? sim_time_add(time, lookahead_ps) : time;
    if (t < *best)
        *best = t;
}

/* Every structure is visited in time order where it has one, and left as
 * soon as its next event is not earlier than the best bound so far (no
 * later event can improve it): only the events of [first, first +
 * lookahead) are looked at. */
sim_time_t sim_queue_horizon(const struct sim *sim, uint32_t host, sim_time_t lookahead_ps)
{
    sim_time_t best = SIM_TIME_NEVER;
    for (size_t i = 0; i < sim->zq_n; i++) {
        const struct sim_event *ev = sim->zq[(sim->zq_head + i) & (sim->zq_cap - 1)];
        if (ev)
            horizon_see(ev, ev->time, host, lookahead_ps, &best);
    }
    if (sim->wheel) {
        const struct sim_bucket *b = &sim->wheel[sim->wheel_cur];
        for (size_t k = sim->wheel_pos; k < b->n && b->e[k].time < best; k++)
            if (b->e[k].ev)
                horizon_see(b->e[k].ev, b->e[k].time, host, lookahead_ps, &best);
        for (uint32_t k = 0; k < sim->near.n; k++)
            horizon_see(sim->near.e[k].ev, sim->near.e[k].time, host, lookahead_ps, &best);
        /* the later buckets that hold events, in time order (skipping
         * empty ones 64 at a time on the occupancy bits, as next_bucket
         * does: a lookahead of 400 ns spans 400 buckets, and programs in
         * clock loops ask for the horizon at every context switch) */
        for (size_t step = 1; step < SIM_WHEEL_BUCKETS;) {
            if (sim->wheel_start + (sim_time_t)step * WHEEL_W >= best)
                break;
            size_t i = (sim->wheel_cur + step) & WHEEL_MASK;
            uint64_t word = sim->wheel_bits[i / 64] >> (i % 64);
            if (!word) {
                step = wheel_skip_words(sim, step + 64 - i % 64);
                continue;
            }
            step += (size_t)__builtin_ctzll(word);
            if (step >= SIM_WHEEL_BUCKETS || sim->wheel_start + (sim_time_t)step * WHEEL_W >= best)
                break;
            const struct sim_bucket *nb = &sim->wheel[(sim->wheel_cur + step) & WHEEL_MASK];
            for (uint32_t k = 0; k < nb->n; k++)
                horizon_see(nb->e[k].ev, nb->e[k].time, host, lookahead_ps, &best);
            step++;
        }
    }
    /* the heap: a subtree whose root is not earlier than the bound cannot
     * improve it (every entry is later than its parent) */
    size_t stack[128], n = 0;
    if (sim->n)
        stack[n++] = 0;
    while (n) {
        size_t i = stack[--n];
        const struct sim_heap_ent *e = &sim->heap[i];
        if (e->time >= best)
            continue;
        horizon_see(e->ev, e->time, host, lookahead_ps, &best);
        for (size_t c = HEAP_ARITY * i + 1; c <= HEAP_ARITY * i + HEAP_ARITY && c < sim->n; c++) {
            if (n == sizeof(stack) / sizeof(stack[0]))
                return sim_queue_next_time(sim); /* too many to look at: no lookahead */
            stack[n++] = c;
        }
    }
    return best;
}

void sim_heap_free(struct sim *sim)
{
    if (sim->heap)
        free(sim->heap - HEAP_SHIFT);
    sim->heap = NULL;
    sim->n = sim->cap = 0;
    free(sim->zq);
    sim->zq = NULL;
    sim->zq_head = sim->zq_n = sim->zq_cap = sim->zq_live = 0;
    if (sim->wheel)
        for (size_t i = 0; i < SIM_WHEEL_BUCKETS; i++)
            free(sim->wheel[i].e);
    free(sim->wheel);
    free(sim->near.e);
    free(sim->scratch);
    memset(&sim->near, 0, sizeof(sim->near));
    sim->scratch = NULL;
    sim->scratch_cap = 0;
    sim->wheel = NULL;
    sim->wheel_live = 0;
}

void sim_event_init(struct sim_event *ev, sim_event_fn fn, void *ctx, const char *name)
{
    memset(ev, 0, sizeof(*ev));
    ev->fn = fn;
    ev->ctx = ctx;
    ev->name = name;
    ev->heap_index = SIM_EVENT_IDLE;
}

/* Out of whichever structure holds it. */
static void unqueue(struct sim *sim, struct sim_event *ev)
{
    uint32_t h = ev->heap_index;
    if (h == SIM_EVENT_IDLE)
        return;
    if (h & SIM_EVENT_IN_ZQ)
        zq_remove(sim, ev);
    else if (h & (SIM_EVENT_IN_WHEEL | SIM_EVENT_IN_NEAR))
        wheel_remove(sim, ev);
    else
        heap_remove_at(sim, h);
}

void sim_schedule_at(struct sim *sim, struct sim_event *ev, sim_time_t when)
{
    if (when < sim->now) {
        fprintf(stderr,
                "rnicsim: internal error: event '%s' scheduled in the past (%llu < %llu ps)\n",
                ev->name ? ev->name : "?", (unsigned long long)when, (unsigned long long)sim->now);
        abort();
    }
    unqueue(sim, ev);
    ev->time = when;
    ev->seq = sim->seq++;
    if (when == sim->now) {
        zq_push(sim, ev);
    } else if (sim->wheel_on && when < wheel_end(sim)) {
        wheel_insert(sim, ev);
    } else {
        heap_push(sim, ev);
        if (!sim->wheel_on && sim->n >= sim->wheel_on_at)
            wheel_enable(sim);
    }
}

void sim_schedule_in(struct sim *sim, struct sim_event *ev, sim_time_t delay_ps)
{
    sim_schedule_at(sim, ev, sim_time_add(sim->now, delay_ps));
}

void sim_cancel(struct sim *sim, struct sim_event *ev)
{
    unqueue(sim, ev);
}

void sim_check_invariants(const struct sim *sim)
{
    const char *what = NULL;
    const struct sim_event *bad = NULL;
    sim_time_t end = wheel_end(sim);
    for (size_t i = 0; i < sim->n && !what; i++) {
        const struct sim_heap_ent *e = &sim->heap[i];
        bad = e->ev;
        if (e->ev->heap_index != i)
            what = "heap_index does not point back at the slot";
        else if (e->ev->time != e->time)
            what = "slot key differs from the event's key";
        else if (i > 0 && ent_less(e, &sim->heap[(i - 1) / HEAP_ARITY]))
            what = "slot is smaller than its parent";
        else if (sim->wheel_on && e->time < end)
            what = "heap event is within the wheel's horizon";
    }
    for (size_t word = 0; word < SIM_WHEEL_BUCKETS / 64 && !what; word++)
        if (!sim->wheel_bits[word] != !(sim->wheel_words & (1ull << word)))
            what = "wheel_words disagrees with the bucket occupancy bits";
    size_t live = 0;
    /* Only the marked buckets and the clock's: an entry in an unmarked
     * bucket shows as a count below wheel_live (checked after), and the
     * check costs 64 words + the pending entries, not 4,096 buckets. */
    for (size_t word = 0; word < SIM_WHEEL_BUCKETS / 64 && !what; word++) {
        uint64_t bits = sim->wheel_bits[word];
        if (sim->wheel_cur / 64 == word)
            bits |= 1ull << (sim->wheel_cur % 64);
        for (; bits && !what; bits &= bits - 1) {
            size_t i = word * 64 + (size_t)__builtin_ctzll(bits);
            const struct sim_bucket *b = &sim->wheel[i];
            bool cur = i == sim->wheel_cur;
            /* bucket i covers [bstart, bstart + W) */
            sim_time_t bstart =
                sim->wheel_start + (sim_time_t)((i - sim->wheel_cur) & WHEEL_MASK) * WHEEL_W;
            const struct sim_went *prev = NULL;
            for (uint32_t k = cur ? (uint32_t)sim->wheel_pos : 0; k < b->n && !what; k++) {
                const struct sim_went *e = &b->e[k];
                if (!e->ev && cur)
                    continue; /* a hole left by a cancellation */
                bad = e->ev;
                if (e->ev->heap_index != (SIM_EVENT_IN_WHEEL | k))
                    what = "wheel entry's event does not point back at it";
                else if (e->ev->time != e->time || e->ev->seq != e->seq)
                    what = "wheel entry's key differs from the event's key";
                else if (e->time < bstart || e->time - bstart >= WHEEL_W)
                    what = "wheel entry in the wrong bucket";
                else if (e->time < sim->now)
                    what = "event is in the past";
                else if (cur && prev && went_less(e, prev))
                    what = "the clock's bucket is out of order";
                prev = e;
                live++;
            }
        }
    }
    for (uint32_t k = 0; k < sim->near.n && !what; k++) {
        const struct sim_went *e = &sim->near.e[k];
        bad = e->ev;
        if (e->ev->heap_index != (SIM_EVENT_IN_NEAR | k))
            what = "near-heap entry's event does not point back at it";
        else if (e->ev->time != e->time || e->ev->seq != e->seq)
            what = "near-heap entry's key differs from the event's key";
        else if (wheel_idx(e->time) != sim->wheel_cur || e->time < sim->now)
            what = "near-heap entry outside the clock's bucket";
        else if (k > 0 && went_less(e, &sim->near.e[(k - 1) / 2]))
            what = "the near heap is out of order";
        live++;
    }
    if (!what && !sim->wheel_on &&
        (sim->wheel_live || sim->wheel_words || sim->near.n || sim->wheel[sim->wheel_cur].n))
        what = "the wheel is off but holds entries";
    if (!what && live != sim->wheel_live) {
        fprintf(stderr,
                "rnicsim: event queue invariant broken: the wheel's marked buckets and near heap "
                "hold %zu events, it counts %zu (an entry in an unmarked bucket?)\n",
                live, sim->wheel_live);
        abort();
    }
    live = 0;
    uint64_t last_seq = 0;
    for (size_t i = 0; i < sim->zq_n && !what; i++) {
        size_t slot = (sim->zq_head + i) & (sim->zq_cap - 1);
        const struct sim_event *ev = sim->zq[slot];
        if (!ev)
            continue;
        bad = ev;
        if (ev->heap_index != (SIM_EVENT_IN_ZQ | (uint32_t)slot))
            what = "now-FIFO entry's heap_index does not point back at its slot";
        else if (ev->time != sim->now)
            what = "now-FIFO entry is not due now";
        else if (live && ev->seq <= last_seq)
            what = "now-FIFO entries out of sequence order";
        last_seq = ev->seq;
        live++;
    }
    if (what) {
        fprintf(stderr, "rnicsim: event queue invariant broken (event '%s'): %s\n",
                bad && bad->name ? bad->name : "?", what);
        abort();
    }
    if (live != sim->zq_live) {
        fprintf(stderr,
                "rnicsim: event queue invariant broken: now-FIFO holds %zu events, counts %zu\n",
                live, sim->zq_live);
        abort();
    }
}
