/* A core's data TLBs (docs/host.md "TLB"): the first-level DTLB and the
 * second-level STLB, set-associative with LRU inside a set.  A page is
 * 4 KiB or 2 MiB, region by region (host_alloc_huge, or all memory with
 * host.hugepages): the DTLB has one array per page size, the STLB holds
 * both sizes.
 * A CPU access to a page the DTLB does not hold costs an STLB lookup; one
 * the STLB does not hold either costs a page walk, whose page-table line
 * goes through the cache model like any line (sim/host/mem.c).  Internal
 * to the host model. */
#ifndef RNICSIM_HOST_TLB_H
#define RNICSIM_HOST_TLB_H

#include <stdbool.h>
#include <stdint.h>

struct host_mem_params;

/* One set-associative level: key k lives in set k mod sets, the set's
 * keys most recently used first. */
struct host_tlb_level {
    uint32_t sets, ways;
    uint64_t *key; /* sets x ways */
    uint8_t *n;    /* keys held per set */
};

struct host_tlb_core {
    struct host_tlb_level l1_4k, l1_2m, st;
    bool inited, oom; /* levels allocated on the core's first lookup; out of memory */
    /* the core's last lookup ((vpn << 1 | huge) + 1; 0: none): after any
     * lookup that page is the most recently used of its DTLB set, so
     * looking it up again hits the DTLB and changes nothing (a scan loop
     * translates the same page for every slot) */
    uint64_t last;
};

struct host_tlb {
    uint32_t l1_4k_entries, l1_2m_entries, st_entries;
    uint32_t cores;
    struct host_tlb_core *core; /* allocated on a core's first lookup */
};

enum host_tlb_hit { HOST_TLB_L1, HOST_TLB_STLB, HOST_TLB_WALK };

/* Returns 0, or ENOMEM. */
int host_tlb_init(struct host_tlb *t, const struct host_mem_params *p, uint32_t cores);
void host_tlb_fini(struct host_tlb *t);
/* Core `core` translates the page `vpn` (address >> 12, or >> 21 when
 * huge): where the translation was found; it is then in both levels.  A
 * core without memory for its TLB (ENOMEM) counts every lookup as a DTLB
 * hit. */
enum host_tlb_hit host_tlb_lookup(struct host_tlb *t, uint32_t core, uint64_t vpn, bool huge);

#endif /* RNICSIM_HOST_TLB_H */
