/* The NIC's LRU cache with miss status holding registers (sim/nic/cache.c):
 * LRU order and eviction, hit/miss/merge counters, the miss cost charged
 * to the waiter (it runs exactly one fetch latency later), merged misses
 * fetched once, the bound on fetches in flight (queued misses start in
 * FIFO order as slots free), invalidation, and capacity 0 = no model. */
#include <stdlib.h>

#include "sim/nic/cache.h"
#include "test.h"

#define FETCH_PS (600 * SIM_NS)

static unsigned n_fetches;
static uint64_t fetch_keys[64];

static void fetch_land(struct sim *sim, void *a, void *b)
{
    (void)sim;
    nic_cache_filled(a, (uint64_t)(uintptr_t)b);
}

static void fetch(struct nic_cache *c, uint64_t key, void *owner)
{
    (void)owner;
    fetch_keys[n_fetches++ % 64] = key;
    sim_call_in(c->sim, FETCH_PS, fetch_land, c, (void *)(uintptr_t)key);
}

struct waiter_log {
    sim_time_t t[64];
    uintptr_t who[64];
    unsigned n;
};
static struct waiter_log W;

static void waiter(struct sim *sim, void *a, void *b)
{
    (void)b;
    if (W.n < 64) {
        W.t[W.n] = sim_now(sim);
        W.who[W.n] = (uintptr_t)a;
    }
    W.n++;
}

static void reset(void)
{
    n_fetches = 0;
    memset(&W, 0, sizeof(W));
}

/* The set a key maps to (the test looks inside the cache). */
static uint64_t *sa_set_of(struct nic_cache *c, uint64_t key, uint16_t **n)
{
    uint32_t s = nic_cache_set_of(c, key);
    *n = &c->sa_n[s];
    return &c->sa_key[(size_t)s * c->ways];
}

static void test_lru_order_and_eviction(void)
{
    reset();
    struct sim *sim = sim_create(1);
    struct nic_cache c;
    CHECK(nic_cache_init(&c, sim, "t", 3, 8, fetch, NULL) == 0);
    /* fill 1, 2, 3: three misses, each fetched once */
    for (uint64_t k = 1; k <= 3; k++)
        CHECK(!nic_cache_access(&c, k, waiter, (void *)(uintptr_t)k, NULL));
    sim_run(sim, SIM_TIME_NEVER);
    CHECK_EQ_U64(n_fetches, 3);
    CHECK_EQ_U64(c.c.misses, 3);
    CHECK_EQ_U64(W.n, 3);
    uint64_t keys[8];
    CHECK_EQ_U64(nic_cache_lru_keys(&c, keys, 8), 3);
    CHECK_EQ_U64(keys[0], 3); /* MRU first */
    CHECK_EQ_U64(keys[2], 1);
    /* touch 1: it becomes MRU, 2 is now LRU */
    CHECK(nic_cache_access(&c, 1, waiter, NULL, NULL));
    CHECK_EQ_U64(c.c.hits, 1);
    nic_cache_lru_keys(&c, keys, 8);
    CHECK_EQ_U64(keys[0], 1);
    CHECK_EQ_U64(keys[2], 2);
    /* a fourth key evicts the LRU one (2), not 1 or 3 */
    CHECK(!nic_cache_access(&c, 4, waiter, NULL, NULL));
    sim_run(sim, SIM_TIME_NEVER);
    CHECK_EQ_U64(c.c.evictions, 1);
    CHECK(!nic_cache_contains(&c, 2));
    CHECK(nic_cache_contains(&c, 1));
    CHECK(nic_cache_contains(&c, 3));
    CHECK(nic_cache_contains(&c, 4));
    CHECK(nic_cache_access(&c, 3, waiter, NULL, NULL));
    CHECK(!nic_cache_access(&c, 2, waiter, NULL, NULL)); /* evicted: a miss again */
    CHECK_EQ_U64(c.c.misses, 5);
    sim_run(sim, SIM_TIME_NEVER);
    /* 2 came back and evicted the LRU entry, 1 (4 and 3 were used since) */
    CHECK(!nic_cache_contains(&c, 1));
    nic_cache_fini(&c);
    sim_destroy(sim);
}

static void test_miss_cost_and_merge(void)
{
    reset();
    struct sim *sim = sim_create(1);
    struct nic_cache c;
    CHECK(nic_cache_init(&c, sim, "t", 16, 8, fetch, NULL) == 0);
    CHECK(!nic_cache_access(&c, 7, waiter, (void *)1, NULL));
    sim_run(sim, 100 * SIM_NS);
    /* a second access while the fetch is in flight merges: no new fetch,
     * and it is served by the same arrival, after the first waiter */
    CHECK(!nic_cache_access(&c, 7, waiter, (void *)2, NULL));
    sim_run(sim, SIM_TIME_NEVER);
    CHECK_EQ_U64(n_fetches, 1);
    CHECK_EQ_U64(c.c.misses, 1);
    CHECK_EQ_U64(c.c.merged, 1);
    CHECK_EQ_U64(W.n, 2);
    CHECK_EQ_U64(W.t[0], FETCH_PS); /* the miss cost is the fetch */
    CHECK_EQ_U64(W.t[1], FETCH_PS);
    CHECK_EQ_U64(W.who[0], 1);
    CHECK_EQ_U64(W.who[1], 2);
    CHECK(nic_cache_access(&c, 7, waiter, NULL, NULL));
    nic_cache_fini(&c);
    sim_destroy(sim);
}

static void test_bounded_misses(void)
{
    reset();
    struct sim *sim = sim_create(1);
    struct nic_cache c;
    CHECK(nic_cache_init(&c, sim, "t", 64, 2, fetch, NULL) == 0);
    for (uintptr_t k = 10; k < 15; k++)
        CHECK(!nic_cache_access(&c, k, waiter, (void *)k, NULL));
    /* only two fetches start; the other three queue */
    CHECK_EQ_U64(n_fetches, 2);
    CHECK_EQ_U64(c.c.queued, 3);
    sim_run(sim, SIM_TIME_NEVER);
    CHECK_EQ_U64(n_fetches, 5);
    CHECK_EQ_U64(c.c.max_in_flight, 2);
    CHECK_EQ_U64(W.n, 5);
    /* served in FIFO order, two per fetch latency: 600, 600, 1200, 1200, 1800 ns */
    for (unsigned i = 0; i < 5; i++) {
        CHECK_EQ_U64(W.who[i], 10 + i);
        CHECK_EQ_U64(W.t[i], (i / 2 + 1) * FETCH_PS);
    }
    nic_cache_fini(&c);
    sim_destroy(sim);
}

static void test_invalidate_and_many_keys(void)
{
    reset();
    struct sim *sim = sim_create(1);
    struct nic_cache c;
    CHECK(nic_cache_init(&c, sim, "t", 100, 1000, fetch, NULL) == 0);
    /* 1000 keys through a 100-entry cache: the last 100 stay, in order */
    for (uint64_t k = 0; k < 1000; k++) {
        nic_cache_access(&c, k * 4096, waiter, NULL, NULL);
        sim_run(sim, SIM_TIME_NEVER);
    }
    CHECK_EQ_U64(c.n, 100);
    CHECK_EQ_U64(c.c.evictions, 900);
    unsigned present = 0;
    for (uint64_t k = 0; k < 1000; k++)
        present += nic_cache_contains(&c, k * 4096);
    CHECK_EQ_U64(present, 100);
    CHECK(nic_cache_contains(&c, 999 * 4096));
    CHECK(!nic_cache_contains(&c, 899 * 4096));
    /* invalidating half of them keeps the rest findable */
    for (uint64_t k = 900; k < 1000; k += 2)
        nic_cache_invalidate(&c, k * 4096);
    CHECK_EQ_U64(c.n, 50);
    present = 0;
    for (uint64_t k = 900; k < 1000; k++)
        present += nic_cache_contains(&c, k * 4096);
    CHECK_EQ_U64(present, 50);
    uint64_t keys[128];
    CHECK_EQ_U64(nic_cache_lru_keys(&c, keys, 128), 50);
    CHECK_EQ_U64(keys[0], 999 * 4096);
    nic_cache_fini(&c);
    sim_destroy(sim);
}

static void test_capacity_zero_is_off(void)
{
    reset();
    struct sim *sim = sim_create(1);
    struct nic_cache c;
    CHECK(nic_cache_init(&c, sim, "t", 0, 1, fetch, NULL) == 0);
    for (uint64_t k = 0; k < 10; k++)
        CHECK(nic_cache_access(&c, k, waiter, NULL, NULL));
    CHECK_EQ_U64(n_fetches, 0);
    CHECK_EQ_U64(c.c.misses, 0);
    nic_cache_fini(&c);
    sim_destroy(sim);
}

/* Hit rate of a cyclic walk over `ws` keys (after one warm pass). */
static double cyclic_hit_rate(uint32_t cap, uint32_t ways, uint32_t ws, bool random)
{
    struct sim *sim = sim_create(1);
    struct nic_cache c;
    CHECK(nic_cache_init(&c, sim, "t", cap, 1000, fetch, NULL) == 0);
    CHECK(nic_cache_set_ways(&c, ways) == 0);
    if (random)
        nic_cache_set_random(&c, "t.repl");
    for (int pass = 0; pass < 3; pass++) {
        if (pass == 1)
            c.c.hits = c.c.misses = 0;
        for (uint64_t k = 0; k < ws; k++)
            if (!nic_cache_access(&c, k * 7919 + 13, waiter, NULL, NULL))
                sim_run(sim, SIM_TIME_NEVER);
    }
    double r = (double)c.c.hits / (double)(c.c.hits + c.c.misses);
    nic_cache_fini(&c);
    sim_destroy(sim);
    return r;
}

/* Set-associative: LRU inside a set, and a hit rate that declines
 * gradually with the working set instead of falling off a cliff. */
static void test_set_associative(void)
{
    reset();
    struct sim *sim = sim_create(1);
    struct nic_cache c;
    CHECK(nic_cache_init(&c, sim, "t", 64, 8, fetch, NULL) == 0);
    CHECK(nic_cache_set_ways(&c, 4) == 0);
    CHECK_EQ_U64(c.n_sets, 16);
    CHECK_EQ_U64(c.cap, 64);
    /* five keys of one set: the least recently used of the first four goes */
    uint64_t same[5];
    unsigned found = 0;
    for (uint64_t k = 0; found < 5; k++) {
        nic_cache_access(&c, k, waiter, NULL, NULL); /* learn the set of key 0 */
        sim_run(sim, SIM_TIME_NEVER);
        uint16_t *n;
        uint64_t *set0 = sa_set_of(&c, 0, &n);
        uint64_t *setk = sa_set_of(&c, k, &n);
        if (set0 == setk)
            same[found++] = k;
    }
    for (unsigned i = 0; i < 4; i++)
        CHECK(nic_cache_contains(&c, same[i]) || i == 0);
    nic_cache_access(&c, same[1], waiter, NULL, NULL); /* refresh 1 */
    nic_cache_access(&c, same[4], waiter, NULL, NULL); /* evicts the set's LRU */
    sim_run(sim, SIM_TIME_NEVER);
    CHECK(nic_cache_contains(&c, same[1]));
    CHECK(nic_cache_contains(&c, same[4]));
    nic_cache_invalidate(&c, same[4]);
    CHECK(!nic_cache_contains(&c, same[4]));
    nic_cache_fini(&c);
    sim_destroy(sim);

    /* cyclic walks over 1024 entries: fully associative LRU is all hits
     * below capacity and none above (the cliff); 8-way LRU has conflict
     * misses before it is full but still thrashes above; 8-way random
     * replacement declines gradually and monotonically */
    CHECK(cyclic_hit_rate(1024, 0, 900, false) == 1.0);
    CHECK(cyclic_hit_rate(1024, 0, 1200, false) == 0.0);
    double h_lru = cyclic_hit_rate(1024, 8, 1024, false);
    CHECK(h_lru < 1.0 && h_lru > 0.5);
    CHECK(cyclic_hit_rate(1024, 8, 2048, false) < 0.01);
    double prev = 1.0;
    static const uint32_t ws[] = {256, 768, 1024, 1280, 2048, 4096};
    for (unsigned i = 0; i < 6; i++) {
        double h = cyclic_hit_rate(1024, 8, ws[i], true);
        printf("8-way random, 1024 entries, cyclic working set %4u: hit rate %.3f\n", ws[i], h);
        CHECK(h <= prev + 1e-9);
        prev = h;
        if (ws[i] == 1280)
            CHECK(h > 0.5); /* LRU: 0.06 */
        if (ws[i] == 2048)
            CHECK(h > 0.1); /* LRU: 0 */
    }
}

int main(void)
{
    test_set_associative();
    test_lru_order_and_eviction();
    test_miss_cost_and_merge();
    test_bounded_misses();
    test_invalidate_and_many_keys();
    test_capacity_zero_is_off();
    return test_summary();
}
