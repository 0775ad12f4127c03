/* Packet pool (sim/pkt.c): payload buffers in size classes.  Every class
 * holds what it is chosen for and the smallest one is chosen; bytes
 * survive a buffer growing into a larger class and a clone; a freed
 * packet's buffer is reused by the next packet of its class, not carved
 * anew; a pool without payloads hands out none; and a packet costs its
 * header plus its class, not the largest MTU. */
#include <string.h>

#include "../../sim/pkt.h"
#include "test.h"

static void fill(uint8_t *b, uint32_t len, uint8_t seed)
{
    for (uint32_t i = 0; i < len; i++)
        b[i] = (uint8_t)(seed + 7 * i);
}

static bool same(const uint8_t *b, uint32_t len, uint8_t seed)
{
    for (uint32_t i = 0; i < len; i++)
        if (b[i] != (uint8_t)(seed + 7 * i))
            return false;
    return true;
}

/* Every length 1..4096 gets a class that holds it, the classes never
 * shrink as the length grows, and a class wastes less than half of
 * itself past the first (64 B) one. */
static void test_classes(void)
{
    uint32_t prev = 0;
    bool ok = true;
    for (uint32_t len = 1; len <= PKT_MAX_PAYLOAD_BYTES; len++) {
        uint32_t c = pkt_payload_class_bytes(len);
        if (c < len || c < prev || c % 64 || (len > 64 && c - len >= c / 2 + 1))
            ok = false;
        prev = c;
    }
    CHECK(ok);
    CHECK_EQ_U64(pkt_payload_class_bytes(0), 0);
    CHECK_EQ_U64(pkt_payload_class_bytes(36), 64);
    CHECK_EQ_U64(pkt_payload_class_bytes(371), 384); /* a Huang value response */
    CHECK_EQ_U64(pkt_payload_class_bytes(385), 512);
    CHECK_EQ_U64(pkt_payload_class_bytes(4096), 4096);
    CHECK_EQ_U64(pkt_payload_class_bytes(4097), 0);
}

/* Bytes written into a small buffer are still there after the packet
 * grows into a larger class, and in a clone. */
static void test_bytes_preserved(void)
{
    struct pkt_pool *pool = pkt_pool_create();
    struct pkt *p = pkt_alloc(pool);
    CHECK(p->payload == NULL);
    uint8_t *b = pkt_payload_reserve(pool, p, 40);
    CHECK(b != NULL && b == p->payload);
    fill(b, 40, 3);
    p->payload_len = 40;
    CHECK(pkt_payload_reserve(pool, p, 64) == b); /* same class: kept */
    uint8_t *g = pkt_payload_reserve(pool, p, 3000);
    CHECK(g != b);
    CHECK(same(g, 40, 3));
    fill(g, 3000, 9);
    p->payload_len = 3000;
    struct pkt *c = pkt_clone(pool, p);
    CHECK(c->payload != NULL && c->payload != p->payload);
    CHECK(c->id != p->id);
    CHECK_EQ_U64(c->payload_len, 3000);
    CHECK(same(c->payload, 3000, 9));
    CHECK(pkt_payload_reserve(pool, p, 10) == g); /* a smaller need keeps the buffer */
    pkt_free(pool, p);
    CHECK(same(c->payload, 3000, 9)); /* the clone's bytes are its own */
    pkt_free(pool, c);
    pkt_pool_destroy(pool);
}

/* A freed packet's buffer goes back to its class: a steady stream of
 * alloc/reserve/free carves buffers once, and headers cost what the pool
 * says, far from the 4 KiB inline payload they used to carry. */
static void test_reuse_and_cost(void)
{
    struct pkt_pool *pool = pkt_pool_create();
    CHECK(pkt_pool_pkt_bytes(pool) <= 256);
    struct pkt *live[100];
    for (int i = 0; i < 100; i++) {
        live[i] = pkt_alloc(pool);
        fill(pkt_payload_reserve(pool, live[i], 371), 371, (uint8_t)i);
        live[i]->payload_len = 371;
    }
    uint64_t carved = pkt_pool_payload_bytes(pool);
    CHECK_EQ_U64(carved, 100 * 384);
    uint64_t pkts = pkt_pool_allocated(pool);
    bool ok = true;
    for (int round = 0; round < 50; round++) {
        for (int i = 0; i < 100; i++) {
            if (!same(live[i]->payload, 371, (uint8_t)(i + round)))
                ok = false;
            pkt_free(pool, live[i]);
        }
        for (int i = 0; i < 100; i++) {
            live[i] = pkt_alloc(pool);
            CHECK(live[i]->payload == NULL && live[i]->payload_len == 0);
            fill(pkt_payload_reserve(pool, live[i], 300 + (uint32_t)i % 84), 371,
                 (uint8_t)(i + round + 1));
            live[i]->payload_len = 371;
        }
    }
    CHECK(ok);
    CHECK_EQ_U64(pkt_pool_payload_bytes(pool), carved);
    CHECK_EQ_U64(pkt_pool_allocated(pool), pkts);
    for (int i = 0; i < 100; i++)
        pkt_free(pool, live[i]);
    pkt_pool_destroy(pool);
}

static void test_headers_only(void)
{
    struct pkt_pool *pool = pkt_pool_create_headers_only();
    CHECK(!pkt_pool_carries_payload(pool));
    struct pkt *p = pkt_alloc(pool);
    CHECK(p->no_bytes);
    CHECK(pkt_payload_reserve(pool, p, 4096) == NULL);
    p->payload_len = 4096;
    struct pkt *c = pkt_clone(pool, p);
    CHECK(c->payload == NULL && c->payload_len == 4096);
    CHECK_EQ_U64(pkt_pool_payload_bytes(pool), 0);
    pkt_free(pool, p);
    pkt_free(pool, c);
    pkt_pool_destroy(pool);
}

int main(void)
{
    test_classes();
    test_bytes_preserved();
    test_reuse_and_cost();
    test_headers_only();
    return test_summary();
}
