/* The memory model of a host (sim/host/mem.c, docs/host.md "Memory") on
 * the C defaults (L1 2 ns, L2 6 ns, LLC 26 ns, memory 90 ns, another
 * core's modified line 60 ns, the other socket's memory 150 ns and caches
 * 120 ns, 10 misses overlapped, DDIO into 3 MiB of the LLC, the socket
 * link 50 ns per traversal at 166.4 Gb/s; cores 0-11 on socket 0, 12-23
 * on socket 1, the NIC on socket 0), each cost by hand:
 *  - a line never touched is a memory access, then an L1 hit;
 *  - a line the NIC wrote is an LLC hit with DDIO (memory without, or
 *    once 3 MiB more were written after it);
 *  - false sharing: a pointer the CPU writes misses after the NIC writes
 *    another word of its line;
 *  - a 128 B message spans 2 lines aligned, 3 unaligned;
 *  - misses of one access overlap 10 at a time, hits do not;
 *  - another core's modified line, on the same and the other socket;
 *  - NUMA: the other socket's memory from a core, the copy rate, the
 *    NIC's DMA (a write crosses the link once, a read twice, back-to-back
 *    transfers queue at the link rate). */
#include <stdlib.h>
#include <string.h>

#include "../../sim/host.h"
#include "../../sim/host/mem.h"
#include "test.h"

#define NS SIM_NS

static uint8_t *buf; /* 8 MiB of page-aligned memory to name lines */
static uintptr_t at(size_t off)
{
    return (uintptr_t)buf + off;
}

struct rig {
    struct sim *sim;
    struct host h;
};

static void rig_init(struct rig *r, bool ddio)
{
    struct host_cpu_params p;
    host_cpu_params_default(&p);
    p.mem.ddio = ddio;
    /* no TLB: these tests price the lines alone (test_tlb prices it) */
    p.mem.tlb_l1_4k = p.mem.tlb_l1_2m = p.mem.tlb_stlb = 0;
    r->sim = sim_create(1);
    host_init(&r->h, r->sim, 0, "h0", &p);
    CHECK(host_mem_get(&r->h) != NULL);
}

static void rig_fini(struct rig *r)
{
    sim_destroy(r->sim);
    host_fini(&r->h);
}

static sim_time_t rd(struct rig *r, uint32_t core, size_t off, size_t len)
{
    return host_mem_access(&r->h, core, core / 12, at(off), len, false);
}

static sim_time_t wr(struct rig *r, uint32_t core, size_t off, size_t len)
{
    return host_mem_access(&r->h, core, core / 12, at(off), len, true);
}

static void test_lines(void)
{
    struct rig r;
    rig_init(&r, true);
    /* never touched: memory; then this core's L1 */
    CHECK_EQ_U64(rd(&r, 0, 0, 8), 90 * NS);
    CHECK_EQ_U64(rd(&r, 0, 0, 8), 2 * NS);
    /* the NIC writes the line: an LLC hit (DDIO), then L1 again */
    host_dma_wrote(&r.h, (void *)at(0), 64);
    CHECK_EQ_U64(rd(&r, 0, 0, 8), 26 * NS);
    CHECK_EQ_U64(rd(&r, 0, 0, 8), 2 * NS);
    CHECK_EQ_U64(r.h.cnt.lines_dma_miss, 1);
    /* DDIO capacity: 3 MiB more written by the NIC after it -> memory */
    host_dma_wrote(&r.h, (void *)at(4096), 64);
    host_dma_wrote(&r.h, (void *)at(1 << 20), 3u << 20);
    CHECK_EQ_U64(rd(&r, 0, 4096, 8), 90 * NS);
    CHECK_EQ_U64(rd(&r, 0, (4u << 20) - 64, 8), 26 * NS); /* the newest: still in the LLC */
    rig_fini(&r);

    /* without DDIO the NIC's writes go to memory */
    rig_init(&r, false);
    CHECK_EQ_U64(rd(&r, 0, 0, 8), 90 * NS);
    host_dma_wrote(&r.h, (void *)at(0), 8);
    CHECK_EQ_U64(rd(&r, 0, 0, 8), 90 * NS);
    rig_fini(&r);
}

static void test_false_sharing_and_alignment(void)
{
    struct rig r;
    rig_init(&r, true);
    /* the CPU's pointer at offset 0 (written: memory, then L1 hits) */
    CHECK_EQ_U64(wr(&r, 0, 0, 8), 90 * NS);
    CHECK_EQ_U64(wr(&r, 0, 0, 8), 2 * NS);
    /* the NIC writes the word next to it (offset 8): the pointer misses */
    host_dma_wrote(&r.h, (void *)at(8), 8);
    CHECK_EQ_U64(wr(&r, 0, 0, 8), 26 * NS);
    /* in its own line (cache-friendly) the pointer stays a hit */
    CHECK_EQ_U64(wr(&r, 0, 128, 8), 90 * NS);
    host_dma_wrote(&r.h, (void *)at(192), 8);
    CHECK_EQ_U64(wr(&r, 0, 128, 8), 2 * NS);

    /* a 128 B message the NIC wrote: aligned 2 lines, at offset 32 3 */
    uint64_t before = r.h.cnt.lines_dma_miss;
    host_dma_wrote(&r.h, (void *)at(8192), 128);
    rd(&r, 0, 8192, 128);
    CHECK_EQ_U64(r.h.cnt.lines_dma_miss - before, 2);
    before = r.h.cnt.lines_dma_miss;
    host_dma_wrote(&r.h, (void *)at(12288 + 32), 128);
    rd(&r, 0, 12288 + 32, 128);
    CHECK_EQ_U64(r.h.cnt.lines_dma_miss - before, 3);

    /* overlap: 20 NIC-written lines cost max(26, 20 x 26 / 10) = 52 ns;
     * 20 lines in L1 cost 20 x 2 = 40 ns */
    host_dma_wrote(&r.h, (void *)at(16384), 20 * 64);
    CHECK_EQ_U64(rd(&r, 0, 16384, 20 * 64), 52 * NS);
    CHECK_EQ_U64(rd(&r, 0, 16384, 20 * 64), 40 * NS);
    /* L2 by age: 600 other lines since (more than L1's 512) -> 6 ns */
    rd(&r, 0, 65536, 600 * 64);
    CHECK_EQ_U64(rd(&r, 0, 16384, 8), 6 * NS);
    rig_fini(&r);
}

static void test_cores_and_sockets(void)
{
    struct rig r;
    rig_init(&r, true);
    /* core 0 modifies a line; core 1 (same socket) reads it: 60 ns; core
     * 12 (socket 1) then reads core 1's clean copy: 120 ns */
    wr(&r, 0, 0, 8);
    CHECK_EQ_U64(rd(&r, 1, 0, 8), 60 * NS);
    CHECK_EQ_U64(rd(&r, 12, 0, 8), 120 * NS);
    CHECK_EQ_U64(r.h.cnt.lines_c2c, 1);
    /* a clean line of another core of the socket: the LLC */
    rd(&r, 0, 4096, 8);
    CHECK_EQ_U64(rd(&r, 2, 4096, 8), 26 * NS);

    /* memory on socket 1: from core 0 150 ns, from core 12 90 ns */
    CHECK(host_mem_add_range(r.h.mem, at(1 << 20), 1 << 20, 1, false) == 0);
    CHECK_EQ_U64(rd(&r, 0, 1 << 20, 8), 150 * NS);
    CHECK_EQ_U64(rd(&r, 12, (1 << 20) + 4096, 8), 90 * NS);
    /* the NIC's writes there skip DDIO (not the NIC's socket): memory */
    host_dma_wrote(&r.h, (void *)at((1 << 20) + 4096), 8);
    CHECK_EQ_U64(rd(&r, 12, (1 << 20) + 4096, 8), 90 * NS);
    CHECK(host_mem_socket_of(r.h.mem, at(1 << 20)) == 1);
    CHECK(host_mem_socket_of(r.h.mem, at(0)) == 0);
    host_mem_remove_range(r.h.mem, at(1 << 20));
    CHECK(host_mem_socket_of(r.h.mem, at(1 << 20)) == 0);
    rig_fini(&r);
}

static void test_copy(void)
{
    struct rig r;
    rig_init(&r, true);
    /* 4 KiB at 7 GB/s = ceil(4096 x 8e12 / 56e9) = 585143 ps; first use:
     * + the first miss (90 ns memory on both sides) */
    sim_time_t bw = 585143;
    CHECK_EQ_U64(host_mem_copy(&r.h, 0, 0, at(8192), at(0), 4096), bw + 90 * NS);
    CHECK_EQ_U64(host_mem_copy(&r.h, 0, 0, at(8192), at(0), 4096), bw); /* L1/L2 now */
    /* the NIC rewrites the source: + one LLC miss */
    host_dma_wrote(&r.h, (void *)at(0), 4096);
    CHECK_EQ_U64(host_mem_copy(&r.h, 0, 0, at(8192), at(0), 4096), bw + 26 * NS);
    /* the destination on the other socket: 150 / 90 of the time, plus its
     * first miss (150 ns) */
    CHECK(host_mem_add_range(r.h.mem, at(1 << 20), 4096, 1, false) == 0);
    CHECK_EQ_U64(host_mem_copy(&r.h, 0, 0, at(1 << 20), at(0), 4096),
                 bw * 150 / 90 + 150 * NS); /* 975238 */
    /* a one-byte-store loop at 543 ps a byte is slower than memcpy's
     * stream: 4096 x 543 ps, plus the first misses as for memcpy */
    CHECK_EQ_U64(host_mem_copy_loop(&r.h, 0, 0, at(16384), at(0), 4096, 543),
                 4096ull * 543 + 90 * NS);
    CHECK_EQ_U64(host_mem_copy_loop(&r.h, 0, 0, at(16384), at(0), 4096, 543), 4096ull * 543);
    /* a loop faster than the stream: the stream bounds it (= memcpy) */
    CHECK_EQ_U64(host_mem_copy_loop(&r.h, 0, 0, at(16384), at(0), 4096, 100), bw);
    rig_fini(&r);
}

static void test_dma_numa(void)
{
    struct rig r;
    rig_init(&r, true);
    /* nothing on the other socket: no delay */
    CHECK_EQ_U64(host_dma_numa_delay(&r.h, (void *)at(0), 64, true), 0);
    CHECK(host_mem_add_range(r.h.mem, at(1 << 20), 4 << 20, 1, false) == 0);
    CHECK_EQ_U64(host_dma_numa_delay(&r.h, (void *)at(0), 64, true), 0);
    /* a write crosses once, a read twice */
    CHECK_EQ_U64(host_dma_numa_delay(&r.h, (void *)at(1 << 20), 64, true), 50 * NS);
    CHECK_EQ_U64(host_dma_numa_delay(&r.h, (void *)at(1 << 20), 64, false), 100 * NS);
    /* back to back at one instant: the 64 B write above held the link for
     * ceil(512e12 / 166.4e9) = 3077 ps, 1 MiB holds it for
     * ceil(8388608e12 / 166.4e9) = 50412308 ps; each waits for those
     * before it */
    sim_time_t w0 = host_dma_numa_delay(&r.h, (void *)at(1 << 20), 1 << 20, true);
    sim_time_t w1 = host_dma_numa_delay(&r.h, (void *)at(2 << 20), 64, true);
    CHECK_EQ_U64(w0, 3077 + 50 * NS);
    CHECK_EQ_U64(w1, 3077 + 50412308 + 50 * NS);
    CHECK_EQ_U64(r.h.cnt.dma_remote, 4);
    CHECK(host_mem_is_remote(&r.h, (void *)at(1 << 20)));
    CHECK(!host_mem_is_remote(&r.h, (void *)at(0)));
    rig_fini(&r);
}

/* The map grows and shrinks: many pages, then all forgotten. */
static void test_map(void)
{
    struct rig r;
    rig_init(&r, true);
    host_dma_wrote(&r.h, (void *)at(0), 8u << 20); /* 2048 pages */
    CHECK_EQ_U64(r.h.mem->npages, 2048);
    CHECK_EQ_U64(rd(&r, 0, (8u << 20) - 64, 8), 26 * NS);               /* the newest lines */
    CHECK(host_mem_add_range(r.h.mem, at(0), 8u << 20, 0, false) == 0); /* placed anew */
    CHECK_EQ_U64(r.h.mem->npages, 0);
    CHECK_EQ_U64(rd(&r, 0, 4096 * 7, 8), 90 * NS);
    rig_fini(&r);
}

/* The root complex's merge of a NIC write's partly covered lines
 * (host_mem_dma_rmw): none for whole lines or lines in the NIC socket's
 * LLC; memory, or the other socket's memory or caches, otherwise. */
static void test_dma_rmw(void)
{
    struct rig r;
    rig_init(&r, true);
    const struct host_mem *m = r.h.mem;
    CHECK_EQ_U64(host_mem_dma_rmw(m, at(0), 64), 0);             /* one whole line */
    CHECK_EQ_U64(host_mem_dma_rmw(m, at(0), 4096), 0);           /* whole lines */
    CHECK_EQ_U64(host_mem_dma_rmw(m, at(0), 8), 90 * NS);        /* never touched: memory */
    CHECK_EQ_U64(host_mem_dma_rmw(m, at(32), 128), 2 * 90 * NS); /* both ends partial */
    CHECK_EQ_U64(host_mem_dma_rmw(m, at(32), 32), 90 * NS);      /* one line, its end */
    host_dma_wrote(&r.h, (void *)at(0), 256);                    /* DDIO: in the LLC */
    CHECK_EQ_U64(host_mem_dma_rmw(m, at(32), 128), 0);
    rd(&r, 0, 8192, 64); /* a core of socket 0 read it */
    CHECK_EQ_U64(host_mem_dma_rmw(m, at(8192 + 8), 8), 0);
    rd(&r, 12, 12288, 64);                                         /* a core of socket 1 */
    CHECK_EQ_U64(host_mem_dma_rmw(m, at(12288 + 8), 8), 120 * NS); /* the other socket's cache */
    CHECK(host_mem_add_range(r.h.mem, at(1 << 20), 1 << 20, 1, false) == 0);
    CHECK_EQ_U64(host_mem_dma_rmw(m, at((1 << 20) + 8), 8), 150 * NS); /* its memory */
    rig_fini(&r);
    rig_init(&r, false); /* no DDIO: always merged at the memory */
    host_dma_wrote(&r.h, (void *)at(0), 256);
    CHECK_EQ_U64(host_mem_dma_rmw(r.h.mem, at(32), 128), 2 * 90 * NS);
    rig_fini(&r);
}

/* The cores' TLBs (sim/host/tlb.c) on the defaults: DTLB 64 entries of
 * 4 KiB pages (16 sets of 4) or 32 of 2 MiB, STLB 1536 (128 sets of 12),
 * an STLB hit 5 ns, a page walk 9 ns plus its page-table line beyond the
 * L2's 6 ns. */
static void test_tlb(void)
{
    struct rig r;
    struct host_cpu_params p;
    host_cpu_params_default(&p);
    r.sim = sim_create(1);
    host_init(&r.h, r.sim, 0, "h0", &p);
    CHECK(host_mem_get(&r.h) != NULL);
    CHECK(host_mem_add_range(r.h.mem, at(0), 8u << 20, 0, false) == 0);
    /* first line of page 0: memory 90 + STLB 5 + walk 9 + its PTE line
     * from memory (90 - 6) */
    CHECK_EQ_U64(rd(&r, 0, 0, 8), 90 * NS + 5 * NS + 9 * NS + 84 * NS);
    CHECK_EQ_U64(rd(&r, 0, 0, 8), 2 * NS); /* L1, DTLB */
    /* page 1: its PTE shares page 0's line (8 PTEs a line), now in L1 */
    CHECK_EQ_U64(rd(&r, 0, 4096, 8), 90 * NS + 14 * NS);
    /* pages 2..64: page 64 is the fifth of DTLB set 0 (pages 0, 16, 32,
     * 48): page 0 falls out of the DTLB, not the STLB */
    for (int pg = 2; pg <= 64; pg++)
        rd(&r, 0, (size_t)pg * 4096, 8);
    CHECK_EQ_U64(rd(&r, 0, 0, 8), 2 * NS + 5 * NS);
    CHECK_EQ_U64(r.h.cnt.tlb_walks, 65);
    CHECK_EQ_U64(r.h.cnt.tlb_l1_misses, 66);
    /* one access over pages 99 and 100 translates both: 2 lines of memory
     * overlapped (90) + 2 walks, their PTEs in one new line (96-103) */
    CHECK_EQ_U64(rd(&r, 0, 100 * 4096 - 64, 128), 90 * NS + 2 * 14 * NS + 84 * NS);
    /* another core has its own TLB: page 0 walks again (PTE line in
     * core 0's L1: an LLC hit for core 1, + 20) */
    CHECK_EQ_U64(rd(&r, 1, 64, 8), 90 * NS + 14 * NS + 20 * NS);
    /* a copy pays its pages' translations too: 4 KiB from page 200 to
     * page 300, both new: bw + first miss + 2 walks (PTE lines new:
     * + 84 each) */
    CHECK_EQ_U64(host_mem_copy(&r.h, 0, 0, at(300 * 4096), at(200 * 4096), 4096),
                 585143 + 90 * NS + 2 * (14 + 84) * NS);
    rig_fini(&r);

    /* 2 MiB pages: the range starts a 2 MiB page; lines 1 MiB apart share
     * it, the next 2 MiB is another page whose PDE shares the line */
    host_init(&r.h, r.sim = sim_create(1), 0, "h0", &p);
    r.h.hugepages = true;
    CHECK(host_mem_get(&r.h) != NULL);
    CHECK(host_mem_add_range(r.h.mem, at(0), 8u << 20, 0, false) == 0);
    CHECK_EQ_U64(rd(&r, 0, 0, 8), 90 * NS + 14 * NS + 84 * NS);
    CHECK_EQ_U64(rd(&r, 0, 1 << 20, 8), 90 * NS);
    CHECK_EQ_U64(rd(&r, 0, 2 << 20, 8), 90 * NS + 14 * NS);
    CHECK_EQ_U64(r.h.cnt.tlb_walks, 2);
    CHECK(host_mem_range_huge(r.h.mem, at(4096), 64));
    rig_fini(&r);

    /* Page size per range (host_alloc_huge): a 4 MiB range on 2 MiB pages
     * and a 4 MiB range on 4 KiB pages in one host.  The huge range walks
     * once per 2 MiB as above; the other once per 4 KiB.  (Here the two
     * sizes' page numbers never coincide; the STLB's size tag is checked
     * directly after this block.) */
    host_init(&r.h, r.sim = sim_create(1), 0, "h0", &p);
    CHECK(host_mem_get(&r.h) != NULL);
    CHECK(host_mem_add_range(r.h.mem, at(0), 4u << 20, 0, true) == 0);
    CHECK(host_mem_add_range(r.h.mem, at(4u << 20), 4u << 20, 0, false) == 0);
    CHECK(host_mem_range_huge(r.h.mem, at(4096), (4u << 20) - 4096));
    CHECK(!host_mem_range_huge(r.h.mem, at(4096), 4u << 20)); /* runs into the 4 KiB range */
    CHECK(!host_mem_range_huge(r.h.mem, at(5u << 20), 64));
    CHECK_EQ_U64(rd(&r, 0, 0, 8), 90 * NS + 14 * NS + 84 * NS);
    CHECK_EQ_U64(rd(&r, 0, 1 << 20, 8), 90 * NS);
    CHECK_EQ_U64(rd(&r, 0, 2 << 20, 8), 90 * NS + 14 * NS);
    CHECK_EQ_U64(r.h.cnt.tlb_walks, 2);
    /* the 4 KiB range: its first page walks (PTE line new: + 84), the
     * next 4 KiB walks again (its PTE in the line now in L1) */
    CHECK_EQ_U64(rd(&r, 0, 4u << 20, 8), 90 * NS + 14 * NS + 84 * NS);
    CHECK_EQ_U64(rd(&r, 0, (4u << 20) + 4096, 8), 90 * NS + 14 * NS);
    CHECK_EQ_U64(r.h.cnt.tlb_walks, 4);
    /* both 2 MiB pages are still in the 2 MiB DTLB: no lookup beyond it */
    CHECK_EQ_U64(rd(&r, 0, 64, 8), 90 * NS);
    CHECK_EQ_U64(r.h.cnt.tlb_walks, 4);
    /* memory past the huge range's end is not on its pages */
    host_mem_remove_range(r.h.mem, at(4u << 20));
    CHECK(!host_mem_range_huge(r.h.mem, at(5u << 20), 64));
    rig_fini(&r);

    /* The STLB holds both page sizes with a size tag: a 4 KiB lookup of a
     * page number a 2 MiB translation also has does not hit it. */
    struct host_mem_params mp;
    host_mem_params_default(&mp);
    struct host_tlb t;
    CHECK(host_tlb_init(&t, &mp, 1) == 0);
    CHECK(host_tlb_lookup(&t, 0, 5, true) == HOST_TLB_WALK);
    CHECK(host_tlb_lookup(&t, 0, 5, true) == HOST_TLB_L1);
    CHECK(host_tlb_lookup(&t, 0, 5, false) == HOST_TLB_WALK);
    CHECK(host_tlb_lookup(&t, 0, 5, false) == HOST_TLB_L1);
    host_tlb_fini(&t);
}

int main(void)
{
    if (posix_memalign((void **)&buf, 4096, 8u << 20))
        return 1;
    test_lines();
    test_false_sharing_and_alignment();
    test_cores_and_sockets();
    test_copy();
    test_dma_numa();
    test_map();
    test_dma_rmw();
    test_tlb();
    free(buf);
    return test_summary();
}
