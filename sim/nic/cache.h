/* A NIC-internal cache of fixed-size entries held in host memory (the
 * QP-context cache, the MPT and MTT translation caches, the requester's
 * read-context cache): set-associative with LRU replacement inside a set
 * (fully associative LRU when `ways` is 0 or covers the capacity), with
 * miss status holding registers so that concurrent misses on one entry are
 * fetched once, and a bound on the misses in flight.
 *
 * Set-associative: entry key k lives in set hash(k) mod (cap / ways); a
 * miss in a full set evicts that set's least recently used entry, or (with
 * the random policy) an entry of the set chosen by the cache's own random
 * stream - which keeps hitting some of a cyclic working set larger than the
 * cache, where LRU misses on every access.  So keys
 * collide before the cache is full and the hit rate falls gradually as the
 * working set grows towards and past the capacity, as on hardware (a fully
 * associative LRU cache has no misses below capacity and almost only misses
 * above it: a cliff).
 *
 * The cache only models timing: what it "holds" is a set of keys.  A miss
 * is fetched by the owner's `fetch` function (a PCIe read of entry_bytes in
 * the NIC; a fixed delay in unit tests), which must call nic_cache_filled()
 * when the entry has arrived.  Waiters of a miss are called back in the
 * order they asked, after the entry is inserted.
 *
 *   nic_cache_access(c, key, fn, a, b)
 *     hit (key present, no fetch pending)   -> true, LRU position refreshed
 *     key being fetched                      -> false; fn(a, b) when it lands
 *     miss, fewer than max_misses in flight  -> fetch now; false; fn later
 *     miss, max_misses in flight             -> queued (FIFO) until one lands
 *
 * Capacity 0 turns the model off: every access hits and nothing is
 * counted as a miss.  All operations are O(1) expected (hash of the keys
 * with linear probing, doubly linked LRU list over a slot array); the MSHR
 * table is scanned linearly (it has max_misses entries). */
#ifndef RNICSIM_NIC_CACHE_H
#define RNICSIM_NIC_CACHE_H

#include <stdbool.h>
#include <stdint.h>

#include "../sim.h"

struct nic_cache;
/* Start fetching the entry `key`; call nic_cache_filled(c, key) when done,
 * from a later event (never from inside this call). */
typedef void (*nic_cache_fetch_fn)(struct nic_cache *c, uint64_t key, void *owner);

struct nic_cache_counters {
    uint64_t hits, misses;  /* accesses; a miss is counted once per fetch */
    uint64_t merged;        /* accesses that joined a fetch in flight */
    uint64_t evictions;     /* entries dropped to make room */
    uint64_t queued;        /* misses that waited for a free miss slot */
    uint64_t max_in_flight; /* most fetches in flight at once */
};

struct nic_cache_waiter {
    struct nic_cache_waiter *next;
    sim_cb_fn fn;
    void *a, *b;
};

struct nic_cache_mshr {
    uint64_t key;
    sim_time_t t0_ps; /* the miss (traces) */
    bool busy;        /* fetch in flight */
    bool queued;      /* waiting for a miss slot */
    struct nic_cache_waiter *head, *tail;
};

struct nic_cache {
    struct sim *sim;
    const char *name;
    uint32_t cap;     /* entries; 0 = no cache model */
    uint32_t ways;    /* set-associative: entries per set (0 = fully associative) */
    uint32_t n_sets;  /* cap / ways (set-associative) */
    uint64_t *sa_key; /* set s: sa_key[s * ways .. + sa_n[s]), most recently used first */
    uint16_t *sa_n;
    bool random_repl; /* replacement inside a set: random (else LRU) */
    struct sim_rng rng;
    uint32_t max_misses; /* fetches in flight at most (>= 1) */
    nic_cache_fetch_fn fetch;
    void *owner;

    /* the resident set: slots [0, n) of `alloc` allocated (grown by
     * doubling up to cap, so memory follows what is cached, not the
     * capacity), with an LRU list (head = MRU) */
    uint64_t *slot_key;
    uint32_t *prev, *next;
    uint32_t n, alloc, lru_head, lru_tail;
    /* key -> slot, linear probing, size a power of two >= 2 * alloc */
    uint32_t *hash; /* UINT32_MAX = empty */
    uint32_t hash_mask;

    /* misses: fetching, then queued for a slot in FIFO order */
    struct nic_cache_mshr *mshr;
    uint32_t n_mshr, cap_mshr;
    uint32_t in_flight;
    struct nic_cache_waiter *free_waiters;

    struct nic_cache_counters c;
    /* traces (sim/trace.h, TRACE_G_CACHE): the NIC and which cache */
    uint32_t trace_node;
    uint8_t trace_id; /* enum trace_cache */
};

/* Returns 0, or ENOMEM. */
int nic_cache_init(struct nic_cache *c, struct sim *sim, const char *name, uint32_t cap,
                   uint32_t max_misses, nic_cache_fetch_fn fetch, void *owner);
void nic_cache_fini(struct nic_cache *c);
/* Make the cache set-associative with `ways` entries per set (call right
 * after init; 0 or >= capacity keeps it fully associative).  The capacity
 * is rounded down to a multiple of `ways`.  Returns 0, or ENOMEM. */
int nic_cache_set_ways(struct nic_cache *c, uint32_t ways);
/* Replace a random entry of a full set (drawn from the stream
 * `stream_name` of the simulation's seed) instead of the LRU one. */
void nic_cache_set_random(struct nic_cache *c, const char *stream_name);
bool nic_cache_access(struct nic_cache *c, uint64_t key, sim_cb_fn fn, void *a, void *b);
/* The entry fetched for `key` arrived: insert it (evicting the LRU entry
 * if full), start the next queued fetch, call the waiters in order. */
void nic_cache_filled(struct nic_cache *c, uint64_t key);
/* Present (and not being fetched)?  Does not touch the LRU order. */
bool nic_cache_contains(const struct nic_cache *c, uint64_t key);
/* The NIC wrote entry `key` itself (it created the state): present now,
 * without a fetch; may evict.  Counted neither as a hit nor as a miss. */
void nic_cache_insert(struct nic_cache *c, uint64_t key);
/* Drop `key` if present (the object it describes went away). */
void nic_cache_invalidate(struct nic_cache *c, uint64_t key);
/* Drop every entry for which match(key, arg) is true (all with NULL);
 * O(capacity).  Returns how many went. */
uint64_t nic_cache_invalidate_if(struct nic_cache *c, bool (*match)(uint64_t key, const void *arg),
                                 const void *arg);
/* The set `key` maps to (set-associative caches; tests). */
uint32_t nic_cache_set_of(const struct nic_cache *c, uint64_t key);
/* Keys from most to least recently used, up to n of them (tests; for a
 * set-associative cache: set by set, each from most recently used). */
uint32_t nic_cache_lru_keys(const struct nic_cache *c, uint64_t *keys, uint32_t n);

#endif /* RNICSIM_NIC_CACHE_H */
