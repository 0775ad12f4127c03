/* Packet pool: packets are allocated in slabs and recycled through a free
 * list, so the data path never calls malloc.  Destroying the pool frees
 * every packet, including those still in flight when a run ends. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "pkt.h"

enum { PKT_SLAB = 64, PKT_LINE = 64 };

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

struct pkt_pool {
    struct pkt *free;
    char **slabs;
    size_t n_slabs, cap_slabs;
    uint64_t next_id;
    size_t stride; /* bytes per packet: whole, or the header part only */
    bool payload;
};

struct pkt_pool *pkt_pool_create(void)
{
    struct pkt_pool *pool = calloc(1, sizeof(struct pkt_pool));
    if (pool) {
        pool->stride = line_round(sizeof(struct pkt));
        pool->payload = true;
    }
    return pool;
}

struct pkt_pool *pkt_pool_create_headers_only(void)
{
    struct pkt_pool *pool = calloc(1, sizeof(struct pkt_pool));
    if (pool) {
        pool->stride = line_round(offsetof(struct pkt, payload));
        pool->payload = false;
    }
    return pool;
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

void pkt_pool_destroy(struct pkt_pool *pool)
{
    if (!pool)
        return;
    for (size_t i = 0; i < pool->n_slabs; i++)
        free(pool->slabs[i]);
    free(pool->slabs);
    free(pool);
}

static void pool_grow(struct pkt_pool *pool)
{
    if (pool->n_slabs == pool->cap_slabs) {
        size_t cap = pool->cap_slabs ? pool->cap_slabs * 2 : 16;
        char **s = realloc(pool->slabs, cap * sizeof(*s));
        if (!s)
            goto oom;
        pool->slabs = s;
        pool->cap_slabs = cap;
    }
    char *slab = aligned_alloc(PKT_LINE, PKT_SLAB * pool->stride);
    if (!slab)
        goto oom;
    pool->slabs[pool->n_slabs++] = slab;
    for (size_t i = 0; i < PKT_SLAB; i++) {
        struct pkt *p = (struct pkt *)(void *)(slab + i * pool->stride);
        p->next = pool->free;
        pool->free = p;
    }
    return;
oom:
    fprintf(stderr, "rnicsim: out of memory for packets\n");
    abort();
}

struct pkt *pkt_alloc(struct pkt_pool *pool)
{
    if (!pool->free)
        pool_grow(pool);
    struct pkt *p = pool->free;
    pool->free = p->next;
    memset(p, 0, offsetof(struct pkt, payload));
    p->id = ++pool->next_id;
    p->no_bytes = !pool->payload;
    return p;
}

void pkt_free(struct pkt_pool *pool, struct pkt *p)
{
    p->next = pool->free;
    pool->free = p;
}

struct pkt *pkt_clone(struct pkt_pool *pool, const struct pkt *p)
{
    struct pkt *c = pkt_alloc(pool);
    uint64_t id = c->id;
    bool no_bytes = c->no_bytes;
    memcpy(c, p, offsetof(struct pkt, payload) + (no_bytes || p->no_bytes ? 0 : p->payload_len));
    c->id = id;
    c->no_bytes = no_bytes;
    c->next = NULL;
    c->in_port = 0;
    return c;
}
