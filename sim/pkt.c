/* Packet pool: packet headers and payload buffers are allocated in slabs
 * and recycled through free lists, so the data path never calls malloc.
 * A packet's bytes live in a buffer of the smallest size class that holds
 * them (pkt_payload_reserve), taken when the NIC addresses the packet and
 * returned with it: a staged 371-byte response costs a 192-byte header and
 * a 384-byte buffer, where a packet with an inline 4 KiB payload cost
 * 4,288 B whatever it carried (docs/performance.md "What a packet
 * costs").  Destroying the pool frees every slab, including the packets
 * still in flight when a run ends. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "pkt.h"

enum { PKT_SLAB = 64 };
#define PKT_LINE 64

/* Link-layer framings (docs/nic.md "Framing", where each number's source is
 * tabled):
 * - RoCEv2 (IBA Annex A17): Ethernet 14 + IPv4 20 + UDP 4791 8 before the
 *   BTH; Ethernet FCS 4 after the ICRC; IEEE 802.3 minimum frame 64 B;
 *   preamble + SFD 8 and minimum inter-frame gap 12 per frame.
 * - InfiniBand (IBA 7.7, 7.8, 8.3; Linux include/rdma/ib_pack.h
 *   IB_LRH_BYTES 8, IB_GRH_BYTES 40): LRH 8 (+ GRH 40 when the address
 *   vector is global), VCRC 2 after the ICRC, no minimum packet size, and
 *   the packet's start and end delimiters, 2 B of link time; UCX prices an
 *   IB packet as LRH + BTH + headers + ICRC 4 + VCRC 2 + delimiters 2
 *   (src/uct/ib/base/ib_iface.c, UCT_IB_DELIM_LEN). */
const struct pkt_framing_facts pkt_framings[PKT_FRAMINGS] = {
    [PKT_FRAMING_ROCEV2] = {"rocev2", PKT_ETH_HDR_BYTES + PKT_IPV4_HDR_BYTES + PKT_UDP_HDR_BYTES,
                            PKT_ETH_FCS_BYTES, 64, PKT_ETH_PREAMBLE_IFG_BYTES},
    [PKT_FRAMING_IB_LOCAL] = {"ib", PKT_IB_LRH_BYTES, PKT_IB_VCRC_BYTES, 0, PKT_IB_DELIM_BYTES},
    [PKT_FRAMING_IB_GLOBAL] = {"ib-grh", PKT_IB_LRH_BYTES + PKT_IB_GRH_BYTES, PKT_IB_VCRC_BYTES, 0,
                               PKT_IB_DELIM_BYTES},
};

/* Packets start on a cache line (pkt.h: the fabric's fields fill the first). */
static size_t line_round(size_t bytes)
{
    return (bytes + PKT_LINE - 1) / PKT_LINE * PKT_LINE;
}

/* Payload buffer size classes: whole cache lines, steps of at most a
 * half (so a buffer wastes less than a third of itself), up to the
 * largest IB path MTU.  A Huang value response (371 B) takes 384, a 36 B
 * request 64, a 4 KiB MTU packet 4096. */
enum { PKT_CLASSES = 12, PKT_CLASS_SLAB_BYTES = 64 * 1024 };
static const uint32_t class_bytes[PKT_CLASSES] = {64,  128,  192,  256,  384,  512,
                                                  768, 1024, 1536, 2048, 3072, 4096};
/* class_of[(len + 63) / 64]: the smallest class holding len bytes
 * (test_pkt_pool checks it against class_bytes) */
static const uint8_t class_of[PKT_MAX_PAYLOAD_BYTES / PKT_LINE + 1] = {
    0,  0,  1,  2,  3,  4,  4,  5,  5,  6,  6,  6,  6,  7,  7,  7,  7,  8,  8,  8,  8,  8,
    8,  8,  8,  9,  9,  9,  9,  9,  9,  9,  9,  10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10,
    10, 10, 10, 10, 10, 11, 11, 11, 11, 11, 11, 11, 11, 11, 11, 11, 11, 11, 11, 11, 11};

/* A free payload buffer holds the link to the next one. */
struct pkt_buf {
    struct pkt_buf *next;
};

/* Payload buffers: per class a free list and a region being carved.
 * Regions are mmap'd, PKT_REGION_BYTES each, and chained through their
 * first line; a page of a region costs memory once a buffer on it is
 * first used. */
struct pkt_bufs {
    struct pkt_buf *free[PKT_CLASSES];
    char *cur[PKT_CLASSES], *end[PKT_CLASSES];
    char *regions;          /* the chain: each region's first word is the next */
    uint64_t payload_bytes; /* buffer bytes carved from regions so far */
};

/* Where memory comes from.  Packet slabs and buffer regions are mmap'd,
 * not malloc'd: the pool's only heap blocks are this struct and the slab
 * table (as they were when packets held their payload inline and their
 * 278 KB slabs came from mmap through malloc), so the simulated programs'
 * malloc'd buffers, whose cache-line alignment the host model sees
 * (sim/host/mem.c), land where they did whatever the packets cost. */
struct pkt_pool {
    struct pkt *free;
    char **slabs; /* packet slabs, PKT_SLAB packets each */
    size_t n_slabs, cap_slabs;
    uint64_t next_id;
    uint32_t stride; /* bytes per packet header */
    bool payload;
    struct pkt_bufs *bufs; /* NULL in a pool without payloads */
};

enum { PKT_REGION_BYTES = 1 << 20 };

static _Noreturn void oom(void)
{
    fprintf(stderr, "rnicsim: out of memory for packets\n");
    abort();
}

static void *map_bytes(size_t bytes)
{
    void *m = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        oom();
    return m;
}

static struct pkt_pool *pool_create(bool payload)
{
    struct pkt_pool *pool = calloc(1, sizeof(struct pkt_pool));
    if (!pool)
        return NULL;
    /* the header only: payload bytes live in buffers of their class */
    pool->stride = (uint32_t)line_round(sizeof(struct pkt));
    pool->payload = payload;
    if (payload) {
        pool->bufs = map_bytes(sizeof(struct pkt_bufs)); /* zeroed */
    }
    return pool;
}

struct pkt_pool *pkt_pool_create(void)
{
    return pool_create(true);
}

struct pkt_pool *pkt_pool_create_headers_only(void)
{
    return pool_create(false);
}

bool pkt_pool_carries_payload(const struct pkt_pool *pool)
{
    return pool->payload;
}

size_t pkt_pool_pkt_bytes(const struct pkt_pool *pool)
{
    return pool->stride;
}

uint64_t pkt_pool_allocated(const struct pkt_pool *pool)
{
    return (uint64_t)pool->n_slabs * PKT_SLAB;
}

uint64_t pkt_pool_payload_bytes(const struct pkt_pool *pool)
{
    return pool->bufs ? pool->bufs->payload_bytes : 0;
}

uint32_t pkt_payload_class_bytes(uint32_t len)
{
    if (!len)
        return 0;
    return len > PKT_MAX_PAYLOAD_BYTES ? 0 : class_bytes[class_of[(len + PKT_LINE - 1) / PKT_LINE]];
}

void pkt_pool_destroy(struct pkt_pool *pool)
{
    if (!pool)
        return;
    for (size_t i = 0; i < pool->n_slabs; i++)
        munmap(pool->slabs[i], (size_t)PKT_SLAB * pool->stride);
    free(pool->slabs);
    if (pool->bufs) {
        for (char *r = pool->bufs->regions; r;) {
            char *next;
            memcpy(&next, r, sizeof(next));
            munmap(r, PKT_REGION_BYTES);
            r = next;
        }
        munmap(pool->bufs, sizeof(struct pkt_bufs));
    }
    free(pool);
}

static void pool_grow(struct pkt_pool *pool)
{
    if (pool->n_slabs == pool->cap_slabs) {
        size_t cap = pool->cap_slabs ? pool->cap_slabs * 2 : 16;
        char **s = realloc(pool->slabs, cap * sizeof(*s));
        if (!s)
            oom();
        pool->slabs = s;
        pool->cap_slabs = cap;
    }
    char *slab = map_bytes((size_t)PKT_SLAB * pool->stride);
    pool->slabs[pool->n_slabs++] = slab;
    for (size_t i = 0; i < PKT_SLAB; i++) {
        struct pkt *p = (struct pkt *)(void *)(slab + i * pool->stride);
        p->next = pool->free;
        pool->free = p;
    }
}

/* A buffer of class c from the free list, else carved from the region. */
static uint8_t *buf_take(struct pkt_bufs *b, uint32_t c)
{
    struct pkt_buf *f = b->free[c];
    if (f) {
        b->free[c] = f->next;
        return (uint8_t *)(void *)f;
    }
    if ((size_t)(b->end[c] - b->cur[c]) < class_bytes[c]) {
        char *r = map_bytes(PKT_REGION_BYTES);
        memcpy(r, &b->regions, sizeof(b->regions));
        b->regions = r;
        b->cur[c] = r + PKT_LINE; /* the first line holds the chain */
        b->end[c] = r + PKT_REGION_BYTES;
    }
    uint8_t *nb = (uint8_t *)b->cur[c];
    b->cur[c] += class_bytes[c];
    b->payload_bytes += class_bytes[c];
    return nb;
}

struct pkt *pkt_alloc(struct pkt_pool *pool)
{
    if (!pool->free)
        pool_grow(pool);
    struct pkt *p = pool->free;
    pool->free = p->next;
    memset(p, 0, offsetof(struct pkt, payload));
    p->payload = NULL;
    p->payload_class = 0;
    p->id = ++pool->next_id;
    p->no_bytes = !pool->payload;
    return p;
}

static void buf_release(struct pkt_pool *pool, struct pkt *p)
{
    if (!p->payload_class)
        return;
    struct pkt_buf *b = (struct pkt_buf *)(void *)p->payload;
    uint32_t c = p->payload_class - 1u;
    b->next = pool->bufs->free[c];
    pool->bufs->free[c] = b;
    p->payload = NULL;
    p->payload_class = 0;
}

uint8_t *pkt_payload_reserve(struct pkt_pool *pool, struct pkt *p, uint32_t len)
{
    if (!pool->payload || !len)
        return p->payload;
    if (len > PKT_MAX_PAYLOAD_BYTES) {
        fprintf(stderr, "rnicsim: internal error: a %u-byte packet payload (largest %u)\n", len,
                (unsigned)PKT_MAX_PAYLOAD_BYTES);
        abort();
    }
    uint32_t c = class_of[(len + PKT_LINE - 1) / PKT_LINE];
    if (p->payload_class > c)
        return p->payload; /* room already */
    uint8_t *nb = buf_take(pool->bufs, c);
    if (p->payload_class) { /* a smaller buffer: its bytes move along */
        uint32_t keep = p->payload_len < class_bytes[p->payload_class - 1u]
                            ? p->payload_len
                            : class_bytes[p->payload_class - 1u];
        memcpy(nb, p->payload, keep);
        buf_release(pool, p);
    }
    p->payload = nb;
    p->payload_class = (uint8_t)(c + 1);
    return nb;
}

void pkt_free(struct pkt_pool *pool, struct pkt *p)
{
    buf_release(pool, p);
    p->next = pool->free;
    pool->free = p;
}

struct pkt *pkt_clone(struct pkt_pool *pool, const struct pkt *p)
{
    struct pkt *c = pkt_alloc(pool);
    uint64_t id = c->id;
    bool no_bytes = c->no_bytes;
    memcpy(c, p, offsetof(struct pkt, payload));
    c->id = id;
    c->no_bytes = no_bytes;
    c->next = NULL;
    c->in_port = 0;
    if (!no_bytes && !p->no_bytes && p->payload_len && p->payload)
        memcpy(pkt_payload_reserve(pool, c, p->payload_len), p->payload, p->payload_len);
    return c;
}
