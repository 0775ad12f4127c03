/* The memory of a host (docs/host.md "Memory"): which socket each buffer
 * lives on, the state of the cache lines that the CPUs and the NIC's DMA
 * touched, and the inter-socket link the NIC's DMA crosses to reach the
 * other socket's memory.  Internal to the host model; programs see it
 * through <rnicsim/host.h> (host_alloc, host_touch, host_memcpy). */
#ifndef RNICSIM_HOST_MEM_H
#define RNICSIM_HOST_MEM_H

#include "../host.h"
#include "tlb.h"

#define HOST_LINE_BYTES 64u
#define HOST_LINE_SHIFT 6
#define HOST_PAGE_SHIFT 12 /* one map entry: the 64 lines of a 4 KiB page */
#define HOST_LINE_NONE 0xffu

/* The 64 lines of one 4 KiB page that the CPUs or the NIC touched. */
struct host_line_page {
    uintptr_t page;   /* address >> HOST_PAGE_SHIFT */
    uint64_t dma;     /* lines last written by the NIC, not read by a CPU since */
    uint64_t dirty;   /* lines last written by a CPU (modified in its owner's caches) */
    uint64_t dma_seq; /* host DMA line count after the page's last DMA write (DDIO age) */
    uint8_t socket;   /* the memory's socket */
    bool vhuge;       /* vpage, vhuge: the page as the TLB sees it (vpage_of in mem.c), */
    uint32_t vid;     /* the page's number in touch order (its TLB page outside ranges) */
    uint64_t
        vgen; /* valid while vgen == host_mem.range_gen (0: not worked out; 64 bits: never wraps) */
    uint64_t vpage;
    uint8_t owner[64]; /* core that last accessed each line, HOST_LINE_NONE: never */
    uint32_t seq[64];  /* the owner's access count then (capacity age) */
};

/* A buffer placed on a socket (host_alloc). */
struct host_mem_range {
    uintptr_t start, end;
    uint32_t socket;
    bool huge; /* on 2 MiB pages (host_alloc_huge) */
    /* where the TLB sees it: a deterministic address on a 2 MiB boundary
     * (the simulator's own addresses move with ASLR, 4 KiB-granular) */
    uint64_t vstart;
};

struct host_mem {
    const struct host_mem_params *p;
    uint32_t nic_socket, cores, cores_per_socket;
    /* the line map: open addressing (linear probing) over entries */
    uint32_t *slots; /* entry index + 1; 0 = empty */
    uint32_t nslots; /* a power of two */
    struct host_line_page *pages;
    uint32_t npages, cap_pages;
    uint32_t last;      /* entry index + 1 of the last page looked up (0: none) */
    uint64_t dma_lines; /* lines the NIC wrote so far (DDIO age clock) */
    uint32_t *core_seq; /* per core: lines accessed so far (capacity age clock) */
    /* buffers on sockets, sorted by start, and how many are away from the NIC */
    struct host_mem_range *ranges;
    uint32_t nranges, cap_ranges, nremote;
    uint64_t next_vstart; /* the next range's vstart */
    uint64_t range_gen;   /* bumped when the ranges change (a page's vpage is then stale) */
    uint32_t next_vid;    /* the next page's vid */
    /* the inter-socket link: free from then, per direction (to, from the
     * NIC's socket) */
    sim_time_t link_free_ps[2];
    struct host_tlb tlb; /* the cores' data TLBs */
    bool all_huge;       /* every page 2 MiB (host.hugepages) */
    /* price every run of lines line by line, as docs/host.md states the
     * model: the reference test_host_lines_run holds the runs to (the
     * same costs, counters and line states); never set by a run */
    bool line_by_line;
};

void host_mem_params_default(struct host_mem_params *p);
int host_mem_params_check(const struct host_mem_params *p, char *why, size_t why_len);

/* The host's memory model, created on first use (ENOMEM). */
struct host_mem *host_mem_get(struct host *h);
void host_mem_free(struct host *h);

/* Socket of the memory at addr: its host_alloc range, else the NIC's. */
uint32_t host_mem_socket_of(const struct host_mem *m, uintptr_t addr);
/* Record / forget a buffer on a socket (huge: on 2 MiB pages).  0, or
 * ENOMEM. */
int host_mem_add_range(struct host_mem *m, uintptr_t start, size_t len, uint32_t socket, bool huge);
void host_mem_remove_range(struct host_mem *m, uintptr_t start);
/* Is all of [addr, addr + len) on 2 MiB pages (one huge range, or every
 * page with host.hugepages)? */
bool host_mem_range_huge(const struct host_mem *m, uintptr_t addr, size_t len);

/* A core of `socket` reads (write: writes) [addr, addr + len) in order:
 * returns its CPU time (hits in sequence, misses overlapped up to
 * host.mem.mlp at a time) and updates the lines. */
sim_time_t host_mem_access(struct host *h, uint32_t core, uint32_t socket, uintptr_t addr,
                           size_t len, bool write);
/* The same, accumulated: adds the lines' latencies to *hits_ps (hits, in
 * sequence) and *miss_sum_ps / *miss_max_ps (misses, to be overlapped by
 * the caller: max(max, sum / mlp)). */
void host_mem_access_acc(struct host *h, uint32_t core, uint32_t socket, uintptr_t addr, size_t len,
                         bool write, sim_time_t *hits_ps, sim_time_t *miss_sum_ps,
                         sim_time_t *miss_max_ps);
/* host_mem_access_acc of [addr + i stride, + len) for i = 0 .. count - 1,
 * in order: the same costs and line states as `count` calls, for the
 * price of one (a scan loop over message slots). */
void host_mem_access_acc_n(struct host *h, uint32_t core, uint32_t socket, uintptr_t addr,
                           size_t len, size_t stride, size_t count, bool write, sim_time_t *hits_ps,
                           sim_time_t *miss_sum_ps, sim_time_t *miss_max_ps);
/* max(miss_max_ps, miss_sum_ps / host.mem.mlp) */
sim_time_t host_mem_overlap(struct host *h, sim_time_t miss_sum_ps, sim_time_t miss_max_ps);
/* memcpy(dst, src, len) by that core: len at host.cpu.memcpy_rate
 * (slower when either side is on another socket than the core) plus the
 * first miss of each side that is not in the core's caches. */
sim_time_t host_mem_copy(struct host *h, uint32_t core, uint32_t socket, uintptr_t dst,
                         uintptr_t src, size_t len);
/* The same copy done by a loop that stores one byte at a time (a copy
 * into a volatile destination: no memmove, no vector or merged stores),
 * which issues at most one byte every `ps_per_byte` ps: the streaming
 * term is the slower of the two, the first misses as for memcpy. */
sim_time_t host_mem_copy_loop(struct host *h, uint32_t core, uint32_t socket, uintptr_t dst,
                              uintptr_t src, size_t len, uint32_t ps_per_byte);
/* The root complex's read-modify-write time for a NIC write of
 * [addr, addr + len): its first and last lines when the write covers them
 * only partly, each 0 if in the NIC socket's LLC (DDIO merges it there),
 * else the latency of reading it (memory, or the other socket's cache). */
sim_time_t host_mem_dma_rmw(const struct host_mem *m, uintptr_t addr, size_t len);
/* The NIC wrote [addr, addr + len). */
void host_mem_dma_write(struct host_mem *m, uintptr_t addr, size_t len);

#endif /* RNICSIM_HOST_MEM_H */
