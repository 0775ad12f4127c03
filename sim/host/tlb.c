/* A core's data TLBs (contract in tlb.h, the model and its sources in
 * docs/host.md "TLB").
 *
 * Defaults (host_mem_params_default), Skylake-SP like the RB2 testbed's
 * Xeon Gold 5118; the entries and ways are those of the Intel 64 and IA-32
 * Architectures Optimization Reference Manual (248966), Table 2-15
 * ("Skylake microarchitecture TLB parameters"; Skylake-SP has the client
 * core's TLBs): DTLB 64 entries for 4 KiB pages and 32 for 2 MiB, 4-way;
 * STLB 1536 entries shared by 4 KiB and 2 MiB pages, 12-way.  The
 * latencies are in mem.c.  LRU inside a set (the hardware's pseudo-LRU is
 * not published). */
#include "tlb.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "mem.h"

#define HOST_TLB_L1_WAYS 4  /* Table 2-15: DTLB 4-way */
#define HOST_TLB_ST_WAYS 12 /* Table 2-15: STLB 12-way */

int host_tlb_init(struct host_tlb *t, const struct host_mem_params *p, uint32_t cores)
{
    memset(t, 0, sizeof(*t));
    t->l1_4k_entries = p->tlb_l1_4k;
    t->l1_2m_entries = p->tlb_l1_2m;
    t->st_entries = p->tlb_stlb;
    t->cores = cores;
    t->core = calloc(cores ? cores : 1, sizeof(*t->core));
    return t->core ? 0 : ENOMEM;
}

static void level_free(struct host_tlb_level *l)
{
    free(l->key);
    free(l->n);
    memset(l, 0, sizeof(*l));
}

void host_tlb_fini(struct host_tlb *t)
{
    for (uint32_t c = 0; t->core && c < t->cores; c++) {
        level_free(&t->core[c].l1_4k);
        level_free(&t->core[c].l1_2m);
        level_free(&t->core[c].st);
    }
    free(t->core);
    t->core = NULL;
}

/* entries in sets of `ways` (fewer entries than ways: one set of them). */
static int level_init(struct host_tlb_level *l, uint32_t entries, uint32_t ways)
{
    if (!entries)
        return 0; /* no such level: every lookup hits */
    l->ways = entries < ways ? entries : ways;
    l->sets = entries / l->ways;
    l->key = calloc((size_t)l->sets * l->ways, sizeof(*l->key));
    l->n = calloc(l->sets, sizeof(*l->n));
    if (!l->key || !l->n) {
        level_free(l);
        return ENOMEM;
    }
    return 0;
}

/* Looks key up in set `vpn mod sets` and makes it the most recently used
 * of its set (inserting it, and dropping the set's least recently used, on
 * a miss).  The key tells the page sizes apart in the STLB; the set comes
 * from the page number alone, as the hardware indexes by it. */
static bool level_access(struct host_tlb_level *l, uint64_t vpn, uint64_t key)
{
    if (!l->sets)
        return true;
    /* vpn mod sets: a mask when sets is a power of two (the default
     * DTLB's 16, STLB's 128), a 32-bit division when vpn fits (a 64-bit
     * one costs several times more), the same set either way */
    uint32_t s = !(l->sets & (l->sets - 1)) ? (uint32_t)vpn & (l->sets - 1)
                 : vpn >> 32                ? (uint32_t)(vpn % l->sets)
                                            : (uint32_t)vpn % l->sets;
    uint64_t *k = &l->key[(size_t)s * l->ways];
    uint32_t n = l->n[s], j = 0;
    while (j < n && k[j] != key)
        j++;
    bool hit = j < n;
    if (!hit) {
        if (n < l->ways)
            l->n[s] = (uint8_t)++n;
        j = n - 1; /* the slot to reuse: the LRU one, or the new one */
    }
    memmove(k + 1, k, j * sizeof(*k));
    k[0] = key;
    return hit;
}

enum host_tlb_hit host_tlb_lookup(struct host_tlb *t, uint32_t core, uint64_t vpn, bool huge)
{
    if (core >= t->cores)
        return HOST_TLB_L1;
    struct host_tlb_core *c = &t->core[core];
    uint64_t last = (vpn << 1 | huge) + 1;
    if (c->last == last)
        return HOST_TLB_L1;
    c->last = last;
    if (!c->inited) {
        c->inited = true;
        if (level_init(&c->l1_4k, t->l1_4k_entries, HOST_TLB_L1_WAYS) ||
            level_init(&c->l1_2m, t->l1_2m_entries, HOST_TLB_L1_WAYS) ||
            level_init(&c->st, t->st_entries, HOST_TLB_ST_WAYS)) {
            level_free(&c->l1_4k);
            level_free(&c->l1_2m);
            level_free(&c->st);
            c->oom = true;
        }
    }
    if (c->oom || level_access(huge ? &c->l1_2m : &c->l1_4k, vpn, vpn))
        return HOST_TLB_L1;
    /* vpn < 2^52: the top bit is free to mark a 2 MiB page's key */
    uint64_t key = huge ? vpn | (uint64_t)1 << 63 : vpn;
    return level_access(&c->st, vpn, key) ? HOST_TLB_STLB : HOST_TLB_WALK;
}
