/* The memory of a host: NUMA placement, the cache-line state between the
 * CPUs and the NIC, the inter-socket link (docs/host.md "Memory").
 *
 * Lines.  A sparse map holds, per 4 KiB page that a CPU or the NIC's DMA
 * touched, the state of its 64 lines: which core accessed each last (and
 * that core's access count then), whether that core wrote it, and whether
 * the NIC wrote it since.  A CPU access to a line costs, by that state:
 *
 *   written by the NIC since        the NIC socket's LLC with DDIO (while
 *                                   fewer than ddio_bytes were written
 *                                   after it), else memory
 *   this core's, accessed less than l1 / l2 / llc bytes of lines ago
 *                                   an L1 / L2 / LLC hit
 *   another core's, modified        a core-to-core transfer
 *   another core's, clean           an LLC hit
 *   never accessed, or aged out     memory
 *
 * and across sockets (the line or the memory on the other socket than the
 * core) remote_cache / remote_dram instead.  So: a line the NIC wrote
 * costs a miss when the CPU reads it; a pointer the CPU writes in the same
 * line as a word the NIC writes (false sharing) misses after every DMA
 * write; an unaligned message spans one line more.  Misses of one access
 * overlap up to host.mem.mlp at a time (a core's line fill buffers);
 * hits do not.  Capacity is approximated by age: a line is still in a
 * cache while fewer lines than the cache holds were accessed since - a
 * count of accesses, not of distinct lines, so it errs towards misses.
 *
 * The map records the NIC's writes only on hosts whose programs use the
 * model (the first host_alloc, host_touch or host_memcpy creates it), so
 * other runs pay one pointer test per DMA write.  Cost: one hash lookup
 * per 4 KiB page per DMA write, and per line a CPU access touches.
 *
 * Buffers placed with host_alloc on a socket are a sorted range list;
 * everything else lives on the NIC's socket (what a program gets that
 * allocates on the NIC's node, as the RB2 and Huang et al. setups do).
 * The NIC's DMA to or from the other socket's memory crosses the
 * inter-socket link: dma_hop per traversal (one for a write, two for a
 * read) and the link's rate per direction as a queue.
 *
 * Defaults (host_mem_params_default), a Skylake-SP server like the RB2
 * testbed's Xeon Gold 5118:
 *  - l1 32 KiB, l1_hit 2 ns; l2 1 MiB, l2_hit 6 ns: Skylake-SP L1D and
 *    L2 sizes; 4 and 14 cycles (AnandTech, "Intel Skylake-EP vs AMD EPYC
 *    7000", lmbench random load latency) at 2.3 GHz.
 *  - llc 16.5 MiB: Xeon Gold 5118 (Intel ARK); llc_hit 26 ns: AnandTech,
 *    same test, 25-27 ns for 16-32 MB on Skylake-SP.
 *  - dram 90 ns: AnandTech, same test, 89-91 ns (DDR4-2666).
 *  - remote_dram 150 ns: lmbench lat_mem_rd from socket 0 to node 1's
 *    memory on a dual Xeon Platinum 8180 (Skylake-SP), 144-154 ns
 *    (Intel community forum, "An interesting issue when testing
 *    inter-socket latency on skylake processor").
 *  - c2c 60 ns, remote_cache 120 ns: estimates; a modified line moves
 *    between cores through the mesh (more than an LLC hit, less than
 *    memory), and across sockets through UPI (less than remote memory).
 *  - mlp 10: ten line fill buffers per core since Nehalem (Intel
 *    optimization manual); 10 x 64 B / 90 ns = 7.1 GB/s, the memcpy rate
 *    one core reaches (CALIBRATION "Host": ~7 GB/s).
 *  - ddio true, ddio 3 MiB: Intel DDIO writes into 2 of the LLC's 11 ways
 *    by default (Farshin et al., "Reexamining Direct Cache Access to
 *    Optimize I/O Intensive Applications for Multi-hundred-gigabit
 *    Networks", USENIX ATC'20): 2/11 of 16.5 MiB.
 *  - dma_hop 50 ns: a DMA read from the remote socket takes about 100 ns
 *    more (pcie-bench, Neugebauer et al. SIGCOMM'18; CALIBRATION "PCIe"),
 *    two traversals.
 *  - socket_link 166.4 Gb/s: one UPI link at 10.4 GT/s (Xeon Gold 5118,
 *    Intel ARK), 2 bytes per transfer = 20.8 GB/s per direction. */
#include "mem.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu.h"

void host_mem_params_default(struct host_mem_params *p)
{
    p->l1_bytes = 32 * 1024;
    p->l2_bytes = 1024 * 1024;
    p->llc_bytes = 16896 * 1024;
    p->l1_ps = 2 * SIM_NS;
    p->l2_ps = 6 * SIM_NS;
    p->llc_ps = 26 * SIM_NS;
    p->dram_ps = 90 * SIM_NS;
    p->c2c_ps = 60 * SIM_NS;
    p->mlp = 10;
    p->ddio = true;
    p->ddio_bytes = 3 * 1024 * 1024;
    p->remote_dram_ps = 150 * SIM_NS;
    p->remote_cache_ps = 120 * SIM_NS;
    p->dma_hop_ps = 50 * SIM_NS;
    p->socket_link_bps = 166400000000ull;
    /* the TLBs (entries: tlb.c); latencies at 2.3 GHz: the second level
     * 12 cycles, a page walk whose page-table line is in the caches about
     * 20 cycles more (Haswell, measured by PC Watch, "Haswell" review 2013,
     * D-TLB graphs 105-107; Skylake's TLBs are the same size) */
    p->tlb_l1_4k = 64;
    p->tlb_l1_2m = 32;
    p->tlb_stlb = 1536;
    p->tlb_stlb_hit_ps = 5 * SIM_NS;
    p->tlb_walk_ps = 9 * SIM_NS;
}

int host_mem_params_check(const struct host_mem_params *p, char *why, size_t why_len)
{
    if (!p->mlp)
        snprintf(why, why_len, "host.mem.mlp: must be at least 1");
    else if (p->l1_bytes < HOST_LINE_BYTES || p->l2_bytes < p->l1_bytes ||
             p->llc_bytes < p->l2_bytes)
        snprintf(why, why_len,
                 "host.mem.l1, l2, llc: expected 64 B <= l1 <= l2 <= llc, got %llu, %llu, %llu",
                 (unsigned long long)p->l1_bytes, (unsigned long long)p->l2_bytes,
                 (unsigned long long)p->llc_bytes);
    else if (!p->socket_link_bps)
        snprintf(why, why_len, "host.numa.link_rate: must be more than 0");
    else
        return 0;
    return -1;
}

/* ---------------------------------------------------------------- the map */

static uint32_t slot_of(const struct host_mem *m, uintptr_t page)
{
    return (uint32_t)(((uint64_t)page * 0x9E3779B97F4A7C15ull) >> 32) & (m->nslots - 1);
}

static int map_grow(struct host_mem *m)
{
    uint32_t n = m->nslots ? 2 * m->nslots : 1024;
    uint32_t *s = calloc(n, sizeof(*s));
    if (!s)
        return ENOMEM;
    free(m->slots);
    m->slots = s;
    m->nslots = n;
    for (uint32_t e = 0; e < m->npages; e++) {
        uint32_t i = slot_of(m, m->pages[e].page);
        while (m->slots[i])
            i = (i + 1) & (n - 1);
        m->slots[i] = e + 1;
    }
    return 0;
}

/* The slot holding `page`, or the empty slot where it would go. */
static uint32_t map_find(const struct host_mem *m, uintptr_t page)
{
    uint32_t i = slot_of(m, page);
    while (m->slots[i] && m->pages[m->slots[i] - 1].page != page)
        i = (i + 1) & (m->nslots - 1);
    return i;
}

static struct host_line_page *page_get_slow(struct host_mem *m, uintptr_t page);

/* The entry of `page`, created when new (NULL: out of memory); the last
 * page looked up is found without hashing. */
static inline struct host_line_page *page_get(struct host_mem *m, uintptr_t page)
{
    if (m->last && m->pages[m->last - 1].page == page)
        return &m->pages[m->last - 1];
    return page_get_slow(m, page);
}

static struct host_line_page *page_get_slow(struct host_mem *m, uintptr_t page)
{
    if (2 * (m->npages + 1) > m->nslots && map_grow(m))
        return NULL;
    uint32_t i = map_find(m, page);
    if (!m->slots[i]) {
        if (m->npages == m->cap_pages) {
            uint32_t cap = m->cap_pages ? 2 * m->cap_pages : 256;
            struct host_line_page *np = realloc(m->pages, cap * sizeof(*np));
            if (!np)
                return NULL;
            m->pages = np;
            m->cap_pages = cap;
        }
        struct host_line_page *pg = &m->pages[m->npages];
        memset(pg, 0, sizeof(*pg));
        memset(pg->owner, HOST_LINE_NONE, sizeof(pg->owner));
        pg->page = page;
        pg->vid = m->next_vid++;
        pg->socket = (uint8_t)host_mem_socket_of(m, page << HOST_PAGE_SHIFT);
        m->slots[i] = ++m->npages;
    }
    m->last = m->slots[i];
    return &m->pages[m->slots[i] - 1];
}

/* Remove `page` (linear probing: shift the cluster back). */
static void page_drop(struct host_mem *m, uintptr_t page)
{
    if (!m->nslots)
        return;
    uint32_t i = map_find(m, page), mask = m->nslots - 1;
    if (!m->slots[i])
        return;
    uint32_t e = m->slots[i] - 1;
    m->slots[i] = 0;
    for (uint32_t j = (i + 1) & mask; m->slots[j]; j = (j + 1) & mask) {
        uint32_t k = slot_of(m, m->pages[m->slots[j] - 1].page);
        bool move = i <= j ? (k <= i || k > j) : (k <= i && k > j);
        if (move) {
            m->slots[i] = m->slots[j];
            m->slots[j] = 0;
            i = j;
        }
    }
    /* the last entry fills the hole */
    uint32_t last = m->npages - 1;
    if (e != last) {
        m->pages[e] = m->pages[last];
        m->slots[map_find(m, m->pages[e].page)] = e + 1;
    }
    m->npages--;
    m->last = 0;
}

/* ---------------------------------------------------------------- setup */

struct host_mem *host_mem_get(struct host *h)
{
    if (h->mem)
        return h->mem;
    struct host_mem *m = calloc(1, sizeof(*m));
    const struct host_topo_params *tp = &h->cpu.topo;
    if (!m)
        return NULL;
    m->p = &h->cpu.mem;
    m->nic_socket = tp->nic_socket;
    m->cores_per_socket = tp->cores_per_socket;
    m->cores = tp->sockets * tp->cores_per_socket;
    m->core_seq = calloc(m->cores, sizeof(*m->core_seq));
    m->all_huge = h->hugepages;
    m->range_gen = 1;
    if (!m->core_seq || map_grow(m) || host_tlb_init(&m->tlb, m->p, m->cores)) {
        host_tlb_fini(&m->tlb);
        free(m->core_seq);
        free(m->slots);
        free(m);
        return NULL;
    }
    h->mem = m;
    return m;
}

void host_mem_free(struct host *h)
{
    struct host_mem *m = h->mem;
    if (!m)
        return;
    free(m->slots);
    free(m->pages);
    free(m->core_seq);
    free(m->ranges);
    host_tlb_fini(&m->tlb);
    free(m);
    h->mem = NULL;
}

/* ---------------------------------------------------------------- NUMA ranges */

/* Index of the last range starting at or before addr, or nranges. */
static uint32_t range_at(const struct host_mem *m, uintptr_t addr)
{
    uint32_t lo = 0, hi = m->nranges;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (m->ranges[mid].start <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo ? lo - 1 : m->nranges;
}

uint32_t host_mem_socket_of(const struct host_mem *m, uintptr_t addr)
{
    uint32_t r = range_at(m, addr);
    if (r < m->nranges && addr < m->ranges[r].end)
        return m->ranges[r].socket;
    return m->nic_socket;
}

/* Forget the line state of [start, end) (memory given back or placed anew). */
static void drop_pages(struct host_mem *m, uintptr_t start, uintptr_t end)
{
    for (uintptr_t pg = start >> HOST_PAGE_SHIFT; pg <= (end - 1) >> HOST_PAGE_SHIFT; pg++)
        page_drop(m, pg);
}

int host_mem_add_range(struct host_mem *m, uintptr_t start, size_t len, uint32_t socket, bool huge)
{
    if (!len)
        return 0;
    if (m->nranges == m->cap_ranges) {
        uint32_t cap = m->cap_ranges ? 2 * m->cap_ranges : 16;
        struct host_mem_range *r = realloc(m->ranges, cap * sizeof(*r));
        if (!r)
            return ENOMEM;
        m->ranges = r;
        m->cap_ranges = cap;
    }
    uint32_t at = range_at(m, start);
    at = at == m->nranges ? 0 : at + 1;
    memmove(&m->ranges[at + 1], &m->ranges[at], (m->nranges - at) * sizeof(*m->ranges));
    /* TLB addresses: ranges from 1 TiB up, each on a 2 MiB boundary */
    if (!m->next_vstart)
        m->next_vstart = (uint64_t)1 << 40;
    m->ranges[at] = (struct host_mem_range){start, start + len, socket, huge, m->next_vstart};
    m->next_vstart += ((uint64_t)len + (1u << 21) - 1) & ~(((uint64_t)1 << 21) - 1);
    m->nranges++;
    if (socket != m->nic_socket)
        m->nremote++;
    if (!++m->range_gen) /* 0 marks a page never worked out */
        m->range_gen = 1;
    drop_pages(m, start, start + len);
    return 0;
}

bool host_mem_range_huge(const struct host_mem *m, uintptr_t addr, size_t len)
{
    if (m->all_huge)
        return true;
    uint32_t r = range_at(m, addr);
    return r < m->nranges && m->ranges[r].huge && addr < m->ranges[r].end &&
           len <= m->ranges[r].end - addr;
}

void host_mem_remove_range(struct host_mem *m, uintptr_t start)
{
    uint32_t r = range_at(m, start);
    if (r >= m->nranges || m->ranges[r].start != start)
        return;
    drop_pages(m, m->ranges[r].start, m->ranges[r].end);
    if (m->ranges[r].socket != m->nic_socket)
        m->nremote--;
    memmove(&m->ranges[r], &m->ranges[r + 1], (m->nranges - r - 1) * sizeof(*m->ranges));
    m->nranges--;
    if (!++m->range_gen) /* 0 marks a page never worked out */
        m->range_gen = 1;
}

/* ---------------------------------------------------------------- DMA */

/* Lines [first, last] of a page as a mask (0 <= first <= last < 64). */
static uint64_t line_mask(unsigned first, unsigned last)
{
    uint64_t hi = last == 63 ? ~0ull : (1ull << (last + 1)) - 1;
    return hi & ~((1ull << first) - 1);
}

void host_mem_dma_write(struct host_mem *m, uintptr_t addr, size_t len)
{
    if (!len)
        return;
    uintptr_t first = addr >> HOST_LINE_SHIFT, last = (addr + len - 1) >> HOST_LINE_SHIFT;
    for (uintptr_t pgn = first >> 6; pgn <= last >> 6; pgn++) {
        struct host_line_page *pg = page_get(m, pgn);
        if (!pg)
            return; /* out of memory: the lines stay as they were */
        unsigned a = pgn == first >> 6 ? (unsigned)(first & 63) : 0;
        unsigned b = pgn == last >> 6 ? (unsigned)(last & 63) : 63;
        uint64_t mask = line_mask(a, b);
        pg->dma |= mask;
        pg->dirty &= ~mask;
        m->dma_lines += (uint64_t)__builtin_popcountll(mask);
        pg->dma_seq = m->dma_lines;
    }
}

/* ---------------------------------------------------------------- CPU accesses */

enum line_class { LC_HIT, LC_MISS, LC_DMA, LC_C2C };

/* The latency of one line for core c of socket sc, and its class; sets
 * *remote when the other socket serves it. */
static sim_time_t line_cost(const struct host_mem *m, const struct host_line_page *pg, unsigned i,
                            uint32_t c, uint32_t sc, enum line_class *cls, bool *remote)
{
    const struct host_mem_params *p = m->p;
    uint64_t bit = 1ull << i;
    uint32_t home = pg->socket;
    sim_time_t mem = sc == home ? p->dram_ps : p->remote_dram_ps;
    *remote = false;
    if (pg->dma & bit) {
        *cls = LC_DMA;
        if (p->ddio && home == m->nic_socket &&
            m->dma_lines - pg->dma_seq < p->ddio_bytes / HOST_LINE_BYTES) {
            *remote = sc != m->nic_socket;
            return *remote ? p->remote_cache_ps : p->llc_ps;
        }
        *remote = sc != home;
        return mem;
    }
    uint32_t o = pg->owner[i];
    *cls = LC_MISS;
    if (o == HOST_LINE_NONE) {
        *remote = sc != home;
        return mem;
    }
    uint32_t age = m->core_seq[o] - pg->seq[i], so = o / m->cores_per_socket;
    if (o == c) {
        if (age < p->l1_bytes / HOST_LINE_BYTES) {
            *cls = LC_HIT;
            return p->l1_ps;
        }
        if (age < p->l2_bytes / HOST_LINE_BYTES) {
            *cls = LC_HIT;
            return p->l2_ps;
        }
        if (age < p->llc_bytes / HOST_LINE_BYTES)
            return p->llc_ps;
        *remote = sc != home;
        return mem;
    }
    if (age < p->llc_bytes / HOST_LINE_BYTES) {
        *remote = so != sc;
        if ((pg->dirty & bit) && age < p->l2_bytes / HOST_LINE_BYTES) {
            *cls = LC_C2C;
            return *remote ? p->remote_cache_ps : p->c2c_ps;
        }
        return *remote ? p->remote_cache_ps : p->llc_ps;
    }
    *remote = sc != home;
    return mem;
}

/* The root complex's merge of one partially written line (see
 * host_mem_dma_rmw): 0 if the line is in the NIC socket's LLC, else the
 * latency of reading it from where it is. */
static sim_time_t rmw_line(const struct host_mem *m, uintptr_t line)
{
    const struct host_mem_params *p = m->p;
    uintptr_t pgn = line >> 6;
    unsigned i = (unsigned)(line & 63);
    uint32_t slot = map_find(m, pgn);
    uint32_t home = m->slots[slot] ? m->pages[m->slots[slot] - 1].socket
                                   : host_mem_socket_of(m, pgn << HOST_PAGE_SHIFT);
    sim_time_t mem = home == m->nic_socket ? p->dram_ps : p->remote_dram_ps;
    if (!p->ddio || !m->slots[slot])
        return mem; /* no DDIO: merged at the memory; never touched: cold */
    const struct host_line_page *pg = &m->pages[m->slots[slot] - 1];
    uint64_t bit = 1ull << i;
    if (pg->dma & bit)
        return home == m->nic_socket && m->dma_lines - pg->dma_seq < p->ddio_bytes / HOST_LINE_BYTES
                   ? 0
                   : mem;
    uint32_t o = pg->owner[i];
    if (o == HOST_LINE_NONE || m->core_seq[o] - pg->seq[i] >= p->llc_bytes / HOST_LINE_BYTES)
        return mem;
    return o / m->cores_per_socket == m->nic_socket ? 0 : p->remote_cache_ps;
}

sim_time_t host_mem_dma_rmw(const struct host_mem *m, uintptr_t addr, size_t len)
{
    if (!len)
        return 0;
    uintptr_t first = addr >> HOST_LINE_SHIFT, last = (addr + len - 1) >> HOST_LINE_SHIFT;
    bool head = addr & (HOST_LINE_BYTES - 1), tail = (addr + len) & (HOST_LINE_BYTES - 1);
    sim_time_t t = 0;
    if (head || (first == last && tail))
        t += rmw_line(m, first);
    if (tail && last != first)
        t += rmw_line(m, last);
    return t;
}

/* Walks the lines of [addr, addr + len) for core c: the cost of each, in
 * order, then the line's new state. */
struct walk {
    sim_time_t hits_ps, miss_sum_ps, miss_max_ps;
    sim_time_t first_miss_ps; /* latency of the first line that missed */
    bool any_remote_mem;      /* a line of memory on another socket than the core */
    bool oom;
    sim_time_t tlb_ps; /* translations outside the DTLB: STLB lookups, page walks */
    uint64_t last_vpn; /* the page translated last (vpn << 1 | huge, + 1; 0: none yet) */
};

/* Page-table lines live in the line map at addresses no program has (above
 * any user address): the PTE of 4 KiB page v at PT_BASE + 8 v, the PDE of
 * 2 MiB page v at PD_BASE + 8 v; 8 entries a line. */
#define HOST_PT_BASE ((uintptr_t)1 << 60)
#define HOST_PD_BASE ((uintptr_t)3 << 59)

static void line_touch(struct host_mem *m, struct host_line_page *pg, unsigned i, uint32_t c,
                       bool write);

/* The address the TLB sees for the 4 KiB page pg: in a host_alloc range,
 * the range's deterministic address plus the offset; elsewhere the page's
 * touch-order number from 16 TiB up (so pages of malloc memory share
 * 2 MiB pages in the order they were first touched).  *huge: the page is
 * part of a 2 MiB page (its range's, or every page's with
 * host.hugepages). */
static uint64_t vpage_find(const struct host_mem *m, const struct host_line_page *pg, bool *huge)
{
    uintptr_t a = pg->page << HOST_PAGE_SHIFT;
    uint32_t r = range_at(m, a);
    *huge = m->all_huge;
    if (r < m->nranges && a < m->ranges[r].end) {
        *huge = *huge || m->ranges[r].huge;
        return m->ranges[r].vstart + (a - m->ranges[r].start);
    }
    return ((uint64_t)1 << 44) + ((uint64_t)pg->vid << HOST_PAGE_SHIFT);
}

/* vpage_find, kept in the page until the ranges change (it depends on the
 * page and the ranges only). */
static inline uint64_t vpage_of(const struct host_mem *m, struct host_line_page *pg, bool *huge)
{
    if (pg->vgen != m->range_gen) {
        pg->vpage = vpage_find(m, pg, &pg->vhuge);
        pg->vgen = m->range_gen;
    }
    *huge = pg->vhuge;
    return pg->vpage;
}

/* Core c of socket sc translates the page of vpn: nothing in the DTLB, an
 * STLB lookup, or that and a page walk, which reads its page-table line
 * through the caches (a line from further than the L2 costs the
 * difference). */
static void tlb_charge(struct host *h, struct host_mem *m, uint32_t c, uint32_t sc, uint64_t vpn,
                       bool huge, struct walk *w)
{
    const struct host_mem_params *p = m->p;
    enum host_tlb_hit r = host_tlb_lookup(&m->tlb, c, vpn, huge);
    if (r == HOST_TLB_L1)
        return;
    h->cnt.tlb_l1_misses++;
    w->tlb_ps += p->tlb_stlb_hit_ps;
    if (r == HOST_TLB_STLB)
        return;
    h->cnt.tlb_walks++;
    w->tlb_ps += p->tlb_walk_ps;
    uintptr_t pte = (huge ? HOST_PD_BASE : HOST_PT_BASE) + (uintptr_t)vpn * 8;
    struct host_line_page *pg = page_get(m, pte >> HOST_PAGE_SHIFT);
    if (!pg) {
        w->oom = true;
        return;
    }
    unsigned i = (unsigned)((pte >> HOST_LINE_SHIFT) & 63);
    enum line_class cls;
    bool remote;
    sim_time_t lat = line_cost(m, pg, i, c, sc, &cls, &remote);
    if (lat > p->l2_ps)
        w->tlb_ps += lat - p->l2_ps;
    line_touch(m, pg, i, c, false);
}

/* The line's new state after core c read (or wrote) it. */
static void line_touch(struct host_mem *m, struct host_line_page *pg, unsigned i, uint32_t c,
                       bool write)
{
    uint64_t bit = 1ull << i;
    if (write || pg->owner[i] != c)
        pg->dirty = write ? pg->dirty | bit : pg->dirty & ~bit;
    pg->dma &= ~bit;
    pg->owner[i] = (uint8_t)c;
    pg->seq[i] = m->core_seq[c]++;
}

/* Lines a..b of page pg, in order, for core c of socket sc: each line's
 * cost as line_cost gives it, then its new state as line_touch leaves it.
 * The lines are distinct, so a line's cost depends only on its own state
 * before the run and on core c's access count, which grows by one a line:
 * the costs are worked out first, from locals (a store into owner[] may
 * alias anything, so a loop that also stored would reload every field a
 * line), and the new states are written for the whole run after.
 * lines_run_ref is the line-by-line form: single lines take it, and every
 * run does with host_mem.line_by_line (test_host_lines_run compares the
 * two on random states). */
static void lines_run(struct host *h, struct host_mem *m, struct host_line_page *pg, unsigned a,
                      unsigned b, uint32_t c, uint32_t sc, bool write, struct walk *w)
{
    const struct host_mem_params *p = m->p;
    const uint32_t n = b - a + 1;
    const uint64_t seg = line_mask(a, b);
    const uint32_t home = pg->socket;
    const uint32_t base = m->core_seq[c];
    const uint64_t dma = pg->dma, dirty = pg->dirty;
    const sim_time_t mem = sc == home ? p->dram_ps : p->remote_dram_ps;
    const bool mem_remote = sc != home;
    const uint64_t l1_lines = p->l1_bytes / HOST_LINE_BYTES;
    const uint64_t l2_lines = p->l2_bytes / HOST_LINE_BYTES;
    const uint64_t llc_lines = p->llc_bytes / HOST_LINE_BYTES;
    /* the cost of a line the NIC wrote: the same for every such line of the page */
    sim_time_t dma_lat = mem;
    bool dma_remote = mem_remote;
    if (dma & seg) {
        if (p->ddio && home == m->nic_socket &&
            m->dma_lines - pg->dma_seq < p->ddio_bytes / HOST_LINE_BYTES) {
            dma_remote = sc != m->nic_socket;
            dma_lat = dma_remote ? p->remote_cache_ps : p->llc_ps;
        } else {
            dma_remote = mem_remote;
            dma_lat = mem;
        }
    }
    uint64_t n_hit = 0, n_remote = 0, n_dma = 0, n_c2c = 0;
    sim_time_t hits = 0, miss_sum = 0, miss_max = w->miss_max_ps, first = w->first_miss_ps;
    uint64_t notmine = 0; /* lines whose owner was not c */
    if ((dma & seg) == seg) {
        /* every line the NIC's: one cost n times */
        n_dma = n;
        n_remote = dma_remote ? n : 0;
        miss_sum = (sim_time_t)n * dma_lat;
        if (!first)
            first = dma_lat;
        if (dma_lat > miss_max)
            miss_max = dma_lat;
        for (unsigned i = a; i <= b; i++)
            if (pg->owner[i] != c)
                notmine |= 1ull << i;
    } else {
        for (unsigned i = a; i <= b; i++) {
            const uint64_t bit = 1ull << i;
            const uint32_t o = pg->owner[i];
            sim_time_t lat;
            bool remote = false, hit = false;
            if (o != c)
                notmine |= bit;
            if (dma & bit) {
                n_dma++;
                lat = dma_lat;
                remote = dma_remote;
            } else if (o == HOST_LINE_NONE) {
                lat = mem;
                remote = mem_remote;
            } else if (o == c) {
                uint32_t age = base + (i - a) - pg->seq[i];
                if (age < l1_lines) {
                    hit = true;
                    lat = p->l1_ps;
                } else if (age < l2_lines) {
                    hit = true;
                    lat = p->l2_ps;
                } else if (age < llc_lines) {
                    lat = p->llc_ps;
                } else {
                    lat = mem;
                    remote = mem_remote;
                }
            } else {
                uint32_t age = m->core_seq[o] - pg->seq[i];
                if (age < llc_lines) {
                    remote = o / m->cores_per_socket != sc;
                    if ((dirty & bit) && age < l2_lines) {
                        n_c2c++;
                        lat = remote ? p->remote_cache_ps : p->c2c_ps;
                    } else {
                        lat = remote ? p->remote_cache_ps : p->llc_ps;
                    }
                } else {
                    lat = mem;
                    remote = mem_remote;
                }
            }
            n_remote += remote;
            if (hit) {
                n_hit++;
                hits += lat;
            } else {
                if (!first)
                    first = lat;
                miss_sum += lat;
                if (lat > miss_max)
                    miss_max = lat;
            }
        }
    }
    h->cnt.lines_touched += n;
    h->cnt.lines_remote += n_remote;
    h->cnt.lines_hit += n_hit;
    h->cnt.lines_dma_miss += n_dma;
    h->cnt.lines_c2c += n_c2c;
    w->hits_ps += hits;
    w->miss_sum_ps += miss_sum;
    w->miss_max_ps = miss_max;
    w->first_miss_ps = first;
    /* the new states, as line_touch leaves them line by line */
    pg->dirty = write ? dirty | seg : dirty & ~notmine;
    pg->dma = dma & ~seg;
    memset(&pg->owner[a], (int)(uint8_t)c, n);
    for (uint32_t k = 0; k < n; k++)
        pg->seq[a + k] = base + k;
    m->core_seq[c] = base + n;
}

/* lines_run line by line, as the model is written (docs/host.md): each
 * line's cost from its state, then its new state, in order. */
static inline void lines_run_ref(struct host *h, struct host_mem *m, struct host_line_page *pg,
                                 unsigned a, unsigned b, uint32_t c, uint32_t sc, bool write,
                                 struct walk *w)
{
    for (unsigned i = a; i <= b; i++) {
        enum line_class cls;
        bool remote;
        sim_time_t lat = line_cost(m, pg, i, c, sc, &cls, &remote);
        h->cnt.lines_touched++;
        if (remote)
            h->cnt.lines_remote++;
        if (cls == LC_HIT) {
            h->cnt.lines_hit++;
            w->hits_ps += lat;
        } else {
            if (cls == LC_DMA)
                h->cnt.lines_dma_miss++;
            else if (cls == LC_C2C)
                h->cnt.lines_c2c++;
            if (!w->first_miss_ps)
                w->first_miss_ps = lat;
            w->miss_sum_ps += lat;
            if (lat > w->miss_max_ps)
                w->miss_max_ps = lat;
        }
        line_touch(m, pg, i, c, write);
    }
}

static void walk_lines(struct host *h, struct host_mem *m, uint32_t c, uint32_t sc, uintptr_t addr,
                       size_t len, bool write, struct walk *w)
{
    uintptr_t first = addr >> HOST_LINE_SHIFT, last = (addr + len - 1) >> HOST_LINE_SHIFT;
    for (uintptr_t pgn = first >> 6; pgn <= last >> 6; pgn++) {
        struct host_line_page *pg = page_get(m, pgn);
        if (!pg) {
            w->oom = true;
            return;
        }
        if (pg->socket != sc)
            w->any_remote_mem = true;
        bool huge;
        uint64_t va = vpage_of(m, pg, &huge);
        uint64_t vpn = va >> (huge ? 21 : HOST_PAGE_SHIFT);
        if (w->last_vpn != (vpn << 1 | huge) + 1) {
            w->last_vpn = (vpn << 1 | huge) + 1;
            tlb_charge(h, m, c, sc, vpn, huge, w);
            pg = page_get(m, pgn); /* the walk may have moved the map */
            if (!pg) {
                w->oom = true;
                return;
            }
        }
        unsigned a = pgn == first >> 6 ? (unsigned)(first & 63) : 0;
        unsigned b = pgn == last >> 6 ? (unsigned)(last & 63) : 63;
        if (a == b || m->line_by_line) /* one line (a scan's slot): nothing to batch */
            lines_run_ref(h, m, pg, a, b, c, sc, write, w);
        else
            lines_run(h, m, pg, a, b, c, sc, write, w);
    }
}

sim_time_t host_mem_access(struct host *h, uint32_t core, uint32_t socket, uintptr_t addr,
                           size_t len, bool write)
{
    struct host_mem *m = host_mem_get(h);
    if (!m || !len)
        return 0;
    struct walk w = {0};
    walk_lines(h, m, core, socket, addr, len, write, &w);
    sim_time_t overlapped = w.miss_sum_ps / m->p->mlp;
    return w.tlb_ps + w.hits_ps + (overlapped > w.miss_max_ps ? overlapped : w.miss_max_ps);
}

void host_mem_access_acc(struct host *h, uint32_t core, uint32_t socket, uintptr_t addr, size_t len,
                         bool write, sim_time_t *hits_ps, sim_time_t *miss_sum_ps,
                         sim_time_t *miss_max_ps)
{
    struct host_mem *m = host_mem_get(h);
    if (!m || !len)
        return;
    struct walk w = {0};
    walk_lines(h, m, core, socket, addr, len, write, &w);
    *hits_ps += w.hits_ps;
    *miss_sum_ps += w.miss_sum_ps;
    if (w.miss_max_ps > *miss_max_ps)
        *miss_max_ps = w.miss_max_ps;
}

void host_mem_access_acc_n(struct host *h, uint32_t core, uint32_t socket, uintptr_t addr,
                           size_t len, size_t stride, size_t count, bool write, sim_time_t *hits_ps,
                           sim_time_t *miss_sum_ps, sim_time_t *miss_max_ps)
{
    struct host_mem *m = host_mem_get(h);
    if (!m || !len)
        return;
    /* One walk for all: the sums and the maximum add up as over separate
     * walks, and the page translated last carries over — after any
     * lookup that page is the DTLB's most recently used of its set
     * (host_tlb_lookup), so looking it up again at the next access, as a
     * separate walk would, changes nothing and costs nothing. */
    struct walk w = {0};
    for (size_t i = 0; i < count; i++)
        walk_lines(h, m, core, socket, addr + i * stride, len, write, &w);
    *hits_ps += w.hits_ps;
    *miss_sum_ps += w.miss_sum_ps;
    if (w.miss_max_ps > *miss_max_ps)
        *miss_max_ps = w.miss_max_ps;
}

sim_time_t host_mem_overlap(struct host *h, sim_time_t miss_sum_ps, sim_time_t miss_max_ps)
{
    struct host_mem *m = host_mem_get(h);
    sim_time_t overlapped = m ? miss_sum_ps / m->p->mlp : miss_sum_ps;
    return overlapped > miss_max_ps ? overlapped : miss_max_ps;
}

sim_time_t host_mem_copy(struct host *h, uint32_t core, uint32_t socket, uintptr_t dst,
                         uintptr_t src, size_t len)
{
    return host_mem_copy_loop(h, core, socket, dst, src, len, 0);
}

sim_time_t host_mem_copy_loop(struct host *h, uint32_t core, uint32_t socket, uintptr_t dst,
                              uintptr_t src, size_t len, uint32_t ps_per_byte)
{
    struct host_mem *m = host_mem_get(h);
    const struct host_cpu_params *cp = &h->cpu;
    if (!len)
        return 0;
    sim_time_t bw = cp->memcpy_bytes_per_s ? sim_bytes_to_ps(len, cp->memcpy_bytes_per_s * 8) : 0;
    /* a loop slower than the memory streams: the loop's issue rate
     * bounds the copy, the lines stream behind it */
    sim_time_t loop = sim_time_mul((sim_time_t)len, ps_per_byte);
    if (!m) /* no line map (out of memory): the stream or the loop alone */
        return loop > bw ? loop : bw;
    struct walk ws = {0}, wd = {0};
    walk_lines(h, m, core, socket, src, len, false, &ws);
    walk_lines(h, m, core, socket, dst, len, true, &wd);
    /* Little's law: a core's copy streams at mlp lines per memory latency,
     * so memory on the other socket streams slower by the latency ratio */
    if ((ws.any_remote_mem || wd.any_remote_mem) && m->p->dram_ps)
        bw = (sim_time_t)((__uint128_t)bw * m->p->remote_dram_ps / m->p->dram_ps);
    if (loop > bw)
        bw = loop;
    sim_time_t first = ws.first_miss_ps > wd.first_miss_ps ? ws.first_miss_ps : wd.first_miss_ps;
    return bw + first + ws.tlb_ps + wd.tlb_ps;
}
