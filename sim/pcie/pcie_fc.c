/* Pools held until known release times: tags and flow-control credits
 * (contract in pcie_fc.h). */
#include "pcie_fc.h"

#include <stdlib.h>
#include <string.h>

void fc_pool_init(struct fc_pool *p, uint64_t hdr_cap, uint64_t data_cap)
{
    memset(p, 0, sizeof(*p));
    p->hdr_cap = hdr_cap;
    p->data_cap = data_cap;
}

void fc_pool_free(struct fc_pool *p)
{
    free(p->g);
    free(p->heap);
    p->g = NULL;
    p->heap = NULL;
    p->size = p->len = p->head = 0;
    p->free_slot = 0;
}

static sim_time_t max3(sim_time_t x, sim_time_t y, sim_time_t z)
{
    sim_time_t m = x > y ? x : y;
    return m > z ? m : z;
}

static sim_time_t grp_release(const struct fc_group *g, uint64_t j)
{
    if (j + 1 >= g->n)
        return g->t_last;
    return max3(g->a + j * g->s, g->b + j * g->s2, g->c);
}

/* Largest j (of the non-last units, j <= n - 2) with release(j) <= t, or
 * -1 (as UINT64_MAX) when there is none. */
static uint64_t grp_last_released(const struct fc_group *g, sim_time_t t)
{
    if (g->n < 2 || g->c > t || g->a > t || g->b > t)
        return UINT64_MAX;
    uint64_t j = g->n - 2;
    if (g->s && (t - g->a) / g->s < j)
        j = (t - g->a) / g->s;
    if (g->s2 && (t - g->b) / g->s2 < j)
        j = (t - g->b) / g->s2;
    return j;
}

/* Release the units of g due by t; returns true when all are released. */
static int grp_release_until(struct fc_pool *p, struct fc_group *g, sim_time_t t)
{
    if (g->i >= g->n)
        return 1;
    uint64_t j = grp_last_released(g, t);
    if (j != UINT64_MAX && j + 1 > g->i) {
        uint64_t k = j + 1 - g->i;
        p->hdr_out -= k;
        p->data_out -= k * g->data_each;
        g->i = (uint32_t)(j + 1);
    }
    if (g->i + 1 < g->n || g->t_last > t)
        return 0;
    /* the last unit */
    p->hdr_out--;
    p->data_out -= g->data_last;
    g->i = g->n;
    return 1;
}

void fc_pool_set_unordered(struct fc_pool *p)
{
    p->unordered = 1;
}

/* ---------------------------------------------------------------- unordered: heap */

/* Entry k of the 4-ary heap (pcie_fc.h): children 4k+1 .. 4k+4 sit at
 * heap[4k+4 .. 4k+7], one line. */
enum { HEAP_PAD = 3, HEAP_D = 4 };
#define HEAP(p, k) ((p)->heap[(k) + HEAP_PAD])

/* A line-aligned copy of `old` (`n_old` bytes) grown to `n_new` bytes. */
static void *grow_aligned(void *old, size_t n_old, size_t n_new)
{
    void *m = aligned_alloc(64, (n_new + 63) & ~(size_t)63);
    if (!m)
        return NULL;
    if (old)
        memcpy(m, old, n_old);
    free(old);
    return m;
}

static void heap_sift_up(struct fc_pool *p, size_t i, struct fc_heap_ent e)
{
    while (i > 0) {
        size_t parent = (i - 1) / HEAP_D;
        if (HEAP(p, parent).next <= e.next)
            break;
        HEAP(p, i) = HEAP(p, parent);
        i = parent;
    }
    HEAP(p, i) = e;
}

static void heap_sift_down(struct fc_pool *p, size_t i, struct fc_heap_ent e)
{
    size_t n = p->len;
    for (;;) {
        size_t c = HEAP_D * i + 1;
        if (c >= n)
            break;
        size_t end = c + HEAP_D < n ? c + HEAP_D : n;
        size_t m = c;
        for (size_t k = c + 1; k < end; k++)
            if (HEAP(p, k).next < HEAP(p, m).next)
                m = k;
        if (e.next <= HEAP(p, m).next)
            break;
        HEAP(p, i) = HEAP(p, m);
        i = m;
    }
    HEAP(p, i) = e;
}

static void unordered_release_until(struct fc_pool *p, sim_time_t t)
{
    while (p->len && HEAP(p, 0).next <= t) {
        size_t slot = HEAP(p, 0).slot;
        struct fc_group *g = &p->g[slot];
        if (!grp_release_until(p, g, t)) {
            HEAP(p, 0).next = grp_release(g, g->i);
            heap_sift_down(p, 0, HEAP(p, 0));
            continue;
        }
        g->i = (uint32_t)p->free_slot; /* the slot is free: chain it */
        p->free_slot = slot + 1;
        p->len--;
        if (p->len)
            heap_sift_down(p, 0, HEAP(p, p->len));
    }
}

static int unordered_push(struct fc_pool *p, const struct fc_group *g)
{
    if (!p->free_slot) {
        size_t nsize = p->size ? 2 * p->size : 16;
        struct fc_group *ng = grow_aligned(p->g, p->size * sizeof(*ng), nsize * sizeof(*ng));
        if (!ng)
            return -1;
        p->g = ng;
        struct fc_heap_ent *nh =
            grow_aligned(p->heap, p->size ? (p->size + HEAP_PAD) * sizeof(*nh) : 0,
                         (nsize + HEAP_PAD) * sizeof(*nh));
        if (!nh)
            return -1;
        p->heap = nh;
        for (size_t k = nsize; k-- > p->size;) {
            p->g[k].i = (uint32_t)p->free_slot;
            p->free_slot = k + 1;
        }
        p->size = nsize;
    }
    size_t slot = p->free_slot - 1;
    p->free_slot = p->g[slot].i;
    p->g[slot] = *g;
    heap_sift_up(p, p->len++, (struct fc_heap_ent){grp_release(g, g->i), slot});
    return 0;
}

/* ---------------------------------------------------------------- both */

void fc_pool_release_until(struct fc_pool *p, sim_time_t t)
{
    if (p->unordered) {
        unordered_release_until(p, t);
        return;
    }
    while (p->len) {
        struct fc_group *g = &p->g[p->head];
        if (!grp_release_until(p, g, t))
            break;
        p->head = (p->head + 1) & (p->size - 1);
        p->len--;
    }
}

sim_time_t fc_pool_next_release(const struct fc_pool *p)
{
    if (!p->len)
        return SIM_TIME_NEVER;
    if (p->unordered)
        return HEAP(p, 0).next;
    const struct fc_group *g = &p->g[p->head];
    return g->i < g->n ? grp_release(g, g->i) : SIM_TIME_NEVER;
}

uint64_t fc_pool_hdr_free(const struct fc_pool *p, uint64_t extra_hdr)
{
    if (!p->hdr_cap)
        return UINT64_MAX;
    uint64_t held = p->hdr_out + extra_hdr;
    return held >= p->hdr_cap ? 0 : p->hdr_cap - held;
}

int fc_pool_fits(const struct fc_pool *p, uint64_t extra_hdr, uint64_t hdr, uint64_t data)
{
    if (p->hdr_cap && p->hdr_out + extra_hdr + hdr > p->hdr_cap)
        return 0;
    if (p->data_cap && p->data_out + data > p->data_cap)
        return 0;
    return 1;
}

sim_time_t fc_pool_wait(struct fc_pool *p, sim_time_t t, uint64_t data)
{
    for (;;) {
        fc_pool_release_until(p, t);
        if (fc_pool_fits(p, 0, 1, data) || !p->len)
            return t;
        sim_time_t next = fc_pool_next_release(p);
        if (next > t)
            t = next;
    }
}

int fc_pool_push(struct fc_pool *p, const struct fc_group *g)
{
    if (p->unordered) {
        if (g->i < g->n && unordered_push(p, g))
            return -1;
        p->hdr_out += g->n;
        p->data_out += (uint64_t)(g->n - 1) * g->data_each + g->data_last;
        return 0;
    }
    if (p->len == p->size) {
        size_t nsize = p->size ? 2 * p->size : 16;
        struct fc_group *ng = grow_aligned(NULL, 0, nsize * sizeof(*ng));
        if (!ng)
            return -1;
        for (size_t i = 0; i < p->len; i++)
            ng[i] = p->g[(p->head + i) & (p->size - 1)];
        free(p->g);
        p->g = ng;
        p->size = nsize;
        p->head = 0;
    }
    p->g[(p->head + p->len) & (p->size - 1)] = *g;
    p->len++;
    p->hdr_out += g->n;
    p->data_out += (uint64_t)(g->n - 1) * g->data_each + g->data_last;
    return 0;
}
