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
    p->g = NULL;
    p->size = p->len = p->head = 0;
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
        g->i = j + 1;
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
    p->min_next = SIM_TIME_NEVER;
}

void fc_pool_release_until(struct fc_pool *p, sim_time_t t)
{
    if (p->unordered && t < p->min_next)
        return; /* nothing is due in any group */
    while (p->len) {
        struct fc_group *g = &p->g[p->head];
        if (!grp_release_until(p, g, t))
            break;
        p->head = (p->head + 1) & (p->size - 1);
        p->len--;
    }
    if (!p->unordered)
        return;
    sim_time_t next = SIM_TIME_NEVER;
    for (size_t k = 0; k < p->len; k++) {
        struct fc_group *g = &p->g[(p->head + k) & (p->size - 1)];
        if (k)
            grp_release_until(p, g, t);
        if (g->i < g->n) {
            sim_time_t r = grp_release(g, g->i);
            if (r < next)
                next = r;
        }
    }
    p->min_next = next;
}

sim_time_t fc_pool_next_release(const struct fc_pool *p)
{
    if (p->unordered)
        return p->len ? p->min_next : SIM_TIME_NEVER;
    sim_time_t best = SIM_TIME_NEVER;
    for (size_t k = 0; k < p->len; k++) {
        const struct fc_group *g = &p->g[(p->head + k) & (p->size - 1)];
        if (g->i < g->n) {
            sim_time_t r = grp_release(g, g->i);
            if (r < best)
                best = r;
        }
        if (!p->unordered)
            break;
    }
    return best;
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
    if (p->len == p->size) {
        size_t nsize = p->size ? 2 * p->size : 16;
        struct fc_group *ng = malloc(nsize * sizeof(*ng));
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
    if (p->unordered && g->i < g->n) {
        sim_time_t r = grp_release(g, g->i);
        if (r < p->min_next)
            p->min_next = r;
    }
    p->hdr_out += g->n;
    p->data_out += (g->n - 1) * g->data_each + g->data_last;
    return 0;
}
