/* LRU cache with miss status holding registers (contract in cache.h; how the
 * NIC uses it in docs/nic.md "Caches inside the RNIC"). */
#include "cache.h"

#include "../trace.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NO_SLOT UINT32_MAX

static uint32_t key_hash(uint64_t key)
{
    key ^= key >> 33;
    key *= 0xff51afd7ed558ccdull;
    key ^= key >> 33;
    return (uint32_t)key;
}

/* Slots allocated at first: small caches get all their slots at once. */
#define CACHE_INITIAL_SLOTS 1024u

static void hash_insert(struct nic_cache *c, uint64_t key, uint32_t slot);

/* Make room for `want` slots (<= cap): the slot arrays and a hash table
 * of a power of two >= 2 * want entries, rebuilt from the slots.  Sizes
 * are computed in 64 bits (cap may be up to 2^32 - 1).  0 or ENOMEM (the
 * cache is unchanged then). */
static int cache_grow(struct nic_cache *c, uint32_t want)
{
    uint64_t hsize = 4;
    while (hsize < 2 * (uint64_t)want)
        hsize *= 2;
    if (hsize > UINT32_MAX)
        return ENOMEM; /* slot numbers are 32-bit, UINT32_MAX means empty */
    uint64_t *k = realloc(c->slot_key, (size_t)want * sizeof(*k));
    if (k)
        c->slot_key = k;
    uint32_t *p = k ? realloc(c->prev, (size_t)want * sizeof(*p)) : NULL;
    if (p)
        c->prev = p;
    uint32_t *nx = p ? realloc(c->next, (size_t)want * sizeof(*nx)) : NULL;
    if (nx)
        c->next = nx;
    uint32_t *h = nx ? malloc((size_t)hsize * sizeof(*h)) : NULL;
    if (!h)
        return ENOMEM;
    free(c->hash);
    c->hash = h;
    memset(c->hash, 0xff, (size_t)hsize * sizeof(*c->hash));
    c->hash_mask = (uint32_t)(hsize - 1);
    c->alloc = want;
    for (uint32_t s = 0; s < c->n; s++)
        hash_insert(c, c->slot_key[s], s);
    return 0;
}

int nic_cache_init(struct nic_cache *c, struct sim *sim, const char *name, uint32_t cap,
                   uint32_t max_misses, nic_cache_fetch_fn fetch, void *owner)
{
    memset(c, 0, sizeof(*c));
    c->sim = sim;
    c->name = name;
    c->cap = cap;
    c->max_misses = max_misses ? max_misses : 1;
    c->fetch = fetch;
    c->owner = owner;
    c->lru_head = c->lru_tail = NO_SLOT;
    if (!cap)
        return 0;
    if (cache_grow(c, cap < CACHE_INITIAL_SLOTS ? cap : CACHE_INITIAL_SLOTS)) {
        nic_cache_fini(c);
        return ENOMEM;
    }
    return 0;
}

int nic_cache_set_ways(struct nic_cache *c, uint32_t ways)
{
    if (!c->cap || !ways || ways >= c->cap)
        return 0;
    if (ways > UINT16_MAX)
        ways = UINT16_MAX;
    uint32_t sets = c->cap / ways;
    uint64_t *k = calloc((size_t)sets * ways, sizeof(*k));
    uint16_t *n = calloc(sets, sizeof(*n));
    if (!k || !n) {
        free(k);
        free(n);
        return ENOMEM;
    }
    c->ways = ways;
    c->n_sets = sets;
    c->cap = sets * ways;
    c->sa_key = k;
    c->sa_n = n;
    /* the fully associative structures are not used */
    free(c->slot_key);
    free(c->prev);
    free(c->next);
    free(c->hash);
    c->slot_key = NULL;
    c->prev = c->next = c->hash = NULL;
    return 0;
}

void nic_cache_set_random(struct nic_cache *c, const char *stream_name)
{
    c->random_repl = true;
    sim_rng_stream(c->sim, &c->rng, stream_name);
}

void nic_cache_fini(struct nic_cache *c)
{
    free(c->sa_key);
    free(c->sa_n);
    free(c->slot_key);
    free(c->prev);
    free(c->next);
    free(c->hash);
    for (uint32_t i = 0; i < c->n_mshr; i++)
        for (struct nic_cache_waiter *w = c->mshr[i].head, *nx; w; w = nx) {
            nx = w->next;
            free(w);
        }
    free(c->mshr);
    for (struct nic_cache_waiter *w = c->free_waiters, *nx; w; w = nx) {
        nx = w->next;
        free(w);
    }
    memset(c, 0, sizeof(*c));
}

/* ---------------------------------------------------------------- resident set */

static uint32_t hash_find(const struct nic_cache *c, uint64_t key)
{
    for (uint32_t h = key_hash(key) & c->hash_mask;; h = (h + 1) & c->hash_mask) {
        uint32_t s = c->hash[h];
        if (s == NO_SLOT)
            return NO_SLOT;
        if (c->slot_key[s] == key)
            return s;
    }
}

static void hash_insert(struct nic_cache *c, uint64_t key, uint32_t slot)
{
    uint32_t h = key_hash(key) & c->hash_mask;
    while (c->hash[h] != NO_SLOT)
        h = (h + 1) & c->hash_mask;
    c->hash[h] = slot;
}

/* Linear-probing deletion by backward shift (no tombstones). */
static void hash_remove(struct nic_cache *c, uint64_t key)
{
    uint32_t h = key_hash(key) & c->hash_mask;
    while (c->hash[h] != NO_SLOT && c->slot_key[c->hash[h]] != key)
        h = (h + 1) & c->hash_mask;
    if (c->hash[h] == NO_SLOT)
        return;
    uint32_t hole = h;
    for (uint32_t j = (hole + 1) & c->hash_mask; c->hash[j] != NO_SLOT;
         j = (j + 1) & c->hash_mask) {
        uint32_t home = key_hash(c->slot_key[c->hash[j]]) & c->hash_mask;
        /* move j into the hole unless its home lies cyclically in (hole, j] */
        bool stays = hole <= j ? (home > hole && home <= j) : (home > hole || home <= j);
        if (!stays) {
            c->hash[hole] = c->hash[j];
            hole = j;
        }
    }
    c->hash[hole] = NO_SLOT;
}

static void lru_unlink(struct nic_cache *c, uint32_t s)
{
    if (c->prev[s] != NO_SLOT)
        c->next[c->prev[s]] = c->next[s];
    else
        c->lru_head = c->next[s];
    if (c->next[s] != NO_SLOT)
        c->prev[c->next[s]] = c->prev[s];
    else
        c->lru_tail = c->prev[s];
}

static void lru_push_front(struct nic_cache *c, uint32_t s)
{
    c->prev[s] = NO_SLOT;
    c->next[s] = c->lru_head;
    if (c->lru_head != NO_SLOT)
        c->prev[c->lru_head] = s;
    c->lru_head = s;
    if (c->lru_tail == NO_SLOT)
        c->lru_tail = s;
}

/* ---------------------------------------------------------------- set-associative */

uint32_t nic_cache_set_of(const struct nic_cache *c, uint64_t key)
{
    return c->n_sets ? key_hash(key) % c->n_sets : 0;
}

static uint64_t *sa_set(const struct nic_cache *c, uint64_t key, uint16_t **n)
{
    uint32_t set = nic_cache_set_of(c, key);
    *n = &c->sa_n[set];
    return &c->sa_key[(size_t)set * c->ways];
}

/* Position of key in its set, or -1. */
static int sa_find(const struct nic_cache *c, uint64_t key, uint64_t **set, uint16_t **n)
{
    *set = sa_set(c, key, n);
    for (int i = 0; i < **n; i++)
        if ((*set)[i] == key)
            return i;
    return -1;
}

/* Move entry i of the set to the front (most recently used). */
static void sa_touch(uint64_t *set, int i)
{
    uint64_t k = set[i];
    memmove(set + 1, set, (size_t)i * sizeof(*set));
    set[0] = k;
}

static void sa_insert(struct nic_cache *c, uint64_t key)
{
    uint64_t *set;
    uint16_t *n;
    if (sa_find(c, key, &set, &n) >= 0)
        return;
    if (*n == c->ways) {
        c->c.evictions++;
        if (c->random_repl) { /* a random entry of the set goes */
            uint32_t v = (uint32_t)sim_rng_below(&c->rng, c->ways);
            memmove(set + 1, set, (size_t)v * sizeof(*set));
            set[0] = key;
            return;
        }
        (*n)--; /* the least recently used entry of the set goes */
    }
    memmove(set + 1, set, (size_t)*n * sizeof(*set));
    set[0] = key;
    (*n)++;
}

static void insert_key(struct nic_cache *c, uint64_t key)
{
    if (c->ways) {
        sa_insert(c, key);
        return;
    }
    if (hash_find(c, key) != NO_SLOT)
        return;
    uint32_t s;
    if (c->n == c->alloc && c->alloc < c->cap) {
        uint64_t want = 2 * (uint64_t)c->alloc;
        if (cache_grow(c, want < c->cap ? (uint32_t)want : c->cap)) {
            fprintf(stderr, "rnicsim: cache %s: out of memory\n", c->name);
            abort();
        }
    }
    if (c->n < c->cap) {
        s = c->n++;
    } else {
        s = c->lru_tail;
        lru_unlink(c, s);
        hash_remove(c, c->slot_key[s]);
        c->c.evictions++;
    }
    c->slot_key[s] = key;
    hash_insert(c, key, s);
    lru_push_front(c, s);
}

bool nic_cache_contains(const struct nic_cache *c, uint64_t key)
{
    if (!c->cap)
        return true;
    for (uint32_t i = 0; i < c->n_mshr; i++)
        if (c->mshr[i].key == key)
            return false;
    if (c->ways) {
        uint64_t *set;
        uint16_t *n;
        return sa_find(c, key, &set, &n) >= 0;
    }
    return hash_find(c, key) != NO_SLOT;
}

void nic_cache_insert(struct nic_cache *c, uint64_t key)
{
    if (!c->cap)
        return;
    for (uint32_t i = 0; i < c->n_mshr; i++)
        if (c->mshr[i].key == key)
            return; /* being fetched: it will be there */
    insert_key(c, key);
}

void nic_cache_invalidate(struct nic_cache *c, uint64_t key)
{
    if (!c->cap)
        return;
    if (c->ways) {
        uint64_t *set;
        uint16_t *n;
        int i = sa_find(c, key, &set, &n);
        if (i >= 0) {
            memmove(set + i, set + i + 1, (size_t)(*n - i - 1) * sizeof(*set));
            (*n)--;
        }
        return;
    }
    uint32_t s = hash_find(c, key);
    if (s == NO_SLOT)
        return;
    lru_unlink(c, s);
    hash_remove(c, key);
    /* move the last used slot into the hole so slots stay [0, n) */
    uint32_t last = --c->n;
    if (s != last) {
        uint64_t k = c->slot_key[last];
        uint32_t p = c->prev[last], nx = c->next[last];
        hash_remove(c, k);
        c->slot_key[s] = k;
        c->prev[s] = p;
        c->next[s] = nx;
        if (p != NO_SLOT)
            c->next[p] = s;
        else
            c->lru_head = s;
        if (nx != NO_SLOT)
            c->prev[nx] = s;
        else
            c->lru_tail = s;
        hash_insert(c, k, s);
    }
}

uint64_t nic_cache_invalidate_if(struct nic_cache *c, bool (*match)(uint64_t key, const void *arg),
                                 const void *arg)
{
    uint64_t gone = 0;
    if (!c->cap)
        return 0;
    if (c->ways) {
        for (uint32_t s = 0; s < c->n_sets; s++) {
            uint64_t *set = &c->sa_key[(size_t)s * c->ways];
            uint16_t keep = 0;
            for (uint16_t i = 0; i < c->sa_n[s]; i++)
                if (match && !match(set[i], arg))
                    set[keep++] = set[i];
            gone += c->sa_n[s] - keep;
            c->sa_n[s] = keep;
        }
        return gone;
    }
    /* fully associative: collect, then remove one by one */
    for (uint32_t s = c->lru_head; s != NO_SLOT;) {
        uint32_t nx = c->next[s];
        if (!match || match(c->slot_key[s], arg)) {
            nic_cache_invalidate(c, c->slot_key[s]);
            gone++;
            nx = c->lru_head; /* slots moved: start again (rare, control path) */
        }
        s = nx;
    }
    return gone;
}

uint32_t nic_cache_lru_keys(const struct nic_cache *c, uint64_t *keys, uint32_t n)
{
    uint32_t i = 0;
    if (c->ways) {
        for (uint32_t s = 0; s < c->n_sets; s++)
            for (uint32_t j = 0; j < c->sa_n[s] && i < n; j++)
                keys[i++] = c->sa_key[(size_t)s * c->ways + j];
        return i;
    }
    for (uint32_t s = c->lru_head; s != NO_SLOT && i < n; s = c->next[s])
        keys[i++] = c->slot_key[s];
    return i;
}

/* ---------------------------------------------------------------- misses */

static struct nic_cache_waiter *waiter_get(struct nic_cache *c)
{
    struct nic_cache_waiter *w = c->free_waiters;
    if (w) {
        c->free_waiters = w->next;
        return w;
    }
    w = malloc(sizeof(*w));
    if (!w) {
        fprintf(stderr, "rnicsim: cache %s: out of memory\n", c->name);
        abort();
    }
    return w;
}

static void add_waiter(struct nic_cache *c, struct nic_cache_mshr *m, sim_cb_fn fn, void *a,
                       void *b)
{
    struct nic_cache_waiter *w = waiter_get(c);
    w->next = NULL;
    w->fn = fn;
    w->a = a;
    w->b = b;
    if (m->tail)
        m->tail->next = w;
    else
        m->head = w;
    m->tail = w;
}

static void start_fetch(struct nic_cache *c, struct nic_cache_mshr *m)
{
    m->busy = true;
    m->queued = false;
    c->in_flight++;
    if (c->in_flight > c->c.max_in_flight)
        c->c.max_in_flight = c->in_flight;
    c->fetch(c, m->key, c->owner);
}

/* Trace: a lookup of `key` (hit, joined a miss in flight, missed), or the
 * miss's fetch from t0 to now. */
static __attribute__((noinline, cold)) void cache_trace(struct nic_cache *c, uint64_t key,
                                                        const char *what, bool miss, sim_time_t t0)
{
    sim_time_t now = sim_now(c->sim);
    sim_trace(c->sim, &(struct trace_rec){.kind = t0 == now ? TRACE_INSTANT : TRACE_SPAN,
                                          .track = TRK_CACHE,
                                          .unit = c->trace_id,
                                          .node = c->trace_node,
                                          .t0_ps = t0,
                                          .dur_ps = now - t0,
                                          .addr = key,
                                          .qpn = c->trace_id == TRC_QPC || c->trace_id == TRC_RDC
                                                     ? (uint32_t)key
                                                     : 0,
                                          .flags = miss ? TRACE_F_MISS : 0,
                                          .where = what});
}

bool nic_cache_access(struct nic_cache *c, uint64_t key, sim_cb_fn fn, void *a, void *b)
{
    if (!c->cap)
        return true;
    for (uint32_t i = 0; i < c->n_mshr; i++)
        if (c->mshr[i].key == key) {
            c->c.merged++;
            add_waiter(c, &c->mshr[i], fn, a, b);
            if (sim_trace_on(c->sim, TRACE_G_CACHE))
                cache_trace(c, key, "miss (fetch in flight)", true, sim_now(c->sim));
            return false;
        }
    if (c->ways) {
        uint64_t *set;
        uint16_t *n;
        int i = sa_find(c, key, &set, &n);
        if (i >= 0) {
            c->c.hits++;
            if (i)
                sa_touch(set, i);
            if (sim_trace_on(c->sim, TRACE_G_CACHE))
                cache_trace(c, key, "hit", false, sim_now(c->sim));
            return true;
        }
    } else {
        uint32_t s = hash_find(c, key);
        if (s != NO_SLOT) {
            c->c.hits++;
            if (c->lru_head != s) {
                lru_unlink(c, s);
                lru_push_front(c, s);
            }
            if (sim_trace_on(c->sim, TRACE_G_CACHE))
                cache_trace(c, key, "hit", false, sim_now(c->sim));
            return true;
        }
    }
    c->c.misses++;
    if (c->n_mshr == c->cap_mshr) {
        uint32_t cap = c->cap_mshr ? 2 * c->cap_mshr : 8;
        struct nic_cache_mshr *nm = realloc(c->mshr, cap * sizeof(*nm));
        if (!nm) {
            fprintf(stderr, "rnicsim: cache %s: out of memory\n", c->name);
            abort();
        }
        c->mshr = nm;
        c->cap_mshr = cap;
    }
    struct nic_cache_mshr *m = &c->mshr[c->n_mshr++];
    *m = (struct nic_cache_mshr){.key = key, .t0_ps = sim_now(c->sim)};
    if (sim_trace_on(c->sim, TRACE_G_CACHE))
        cache_trace(c, key, "miss", true, m->t0_ps);
    add_waiter(c, m, fn, a, b);
    if (c->in_flight < c->max_misses) {
        start_fetch(c, m);
    } else {
        m->queued = true;
        c->c.queued++;
    }
    return false;
}

void nic_cache_filled(struct nic_cache *c, uint64_t key)
{
    uint32_t i = 0;
    while (i < c->n_mshr && !(c->mshr[i].key == key && c->mshr[i].busy))
        i++;
    if (i == c->n_mshr)
        return; /* not a fetch of ours: ignore */
    struct nic_cache_waiter *w = c->mshr[i].head;
    if (sim_trace_on(c->sim, TRACE_G_CACHE))
        cache_trace(c, key, "fetch", true, c->mshr[i].t0_ps);
    /* remove the MSHR, keeping the order of the others (FIFO of queued) */
    memmove(&c->mshr[i], &c->mshr[i + 1], (c->n_mshr - i - 1) * sizeof(*c->mshr));
    c->n_mshr--;
    c->in_flight--;
    insert_key(c, key);
    for (uint32_t j = 0; j < c->n_mshr && c->in_flight < c->max_misses; j++)
        if (c->mshr[j].queued)
            start_fetch(c, &c->mshr[j]);
    while (w) {
        struct nic_cache_waiter *nx = w->next;
        sim_cb_fn fn = w->fn;
        void *a = w->a, *b = w->b;
        w->next = c->free_waiters;
        c->free_waiters = w;
        fn(c->sim, a, b);
        w = nx;
    }
}
