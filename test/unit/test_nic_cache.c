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

int main(void)
{
    test_lru_order_and_eviction();
    test_miss_cost_and_merge();
    test_bounded_misses();
    test_invalidate_and_many_keys();
    test_capacity_zero_is_off();
    return test_summary();
}
