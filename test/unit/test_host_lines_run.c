/* The host model's runs of lines (sim/host/mem.c lines_run) against the
 * model line by line (host_mem.line_by_line, the form docs/host.md states):
 * two hosts get the same random sequence of NIC writes, CPU reads and
 * writes by cores of both sockets (aligned or not, within a page or over
 * several; one at a time and as a scan of slots), copies, and buffers
 * placed on the other socket; after every
 * step the costs returned, the host's counters and the state of every
 * line of every page (owner, its access count, modified, written by the
 * NIC), the cores' access counts and the NIC's write count must be the
 * same.  Caches of a few lines, a small DDIO share and few TLB entries
 * make every class of line (L1 / L2 / LLC hit, aged out, another core's
 * clean or modified line, the NIC's with and without DDIO, the other
 * socket's) and page walks occur; the mix over the seeds is checked to
 * include them.  Then the TLB's set index against LRU sets written out
 * here (test_tlb_sets). */
#include <stdlib.h>
#include <string.h>

#include "../../sim/host.h"
#include "../../sim/host/mem.h"
#include "../../sim/host/tlb.h"
#include "test.h"

#define REGION_BYTES (64u * 4096u) /* 64 pages: lines recur often */

static uint8_t *buf;

static uint64_t rng_state;
static struct host_counters mix; /* over all seeds */
static uint64_t rnd(void)
{
    /* xorshift64* */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545F4914F6CDD1Dull;
}
static uint64_t rnd_below(uint64_t n)
{
    return rnd() % n;
}

struct rig {
    struct sim *sim;
    struct host h;
};

static void rig_init(struct rig *r, const struct host_cpu_params *p, bool line_by_line)
{
    r->sim = sim_create(1);
    host_init(&r->h, r->sim, 0, "h0", p);
    CHECK(host_mem_get(&r->h) != NULL);
    r->h.mem->line_by_line = line_by_line;
}

static void rig_fini(struct rig *r)
{
    sim_destroy(r->sim);
    host_fini(&r->h);
}

/* Everything the two models keep must be equal: 0 if so. */
static int state_differs(const struct rig *a, const struct rig *b)
{
    const struct host_mem *ma = a->h.mem, *mb = b->h.mem;
    if (memcmp(&a->h.cnt, &b->h.cnt, sizeof(a->h.cnt)))
        return 1;
    if (ma->npages != mb->npages || ma->dma_lines != mb->dma_lines)
        return 2;
    if (memcmp(ma->core_seq, mb->core_seq, ma->cores * sizeof(*ma->core_seq)))
        return 3;
    for (uint32_t e = 0; e < ma->npages; e++) {
        const struct host_line_page *x = &ma->pages[e], *y = &mb->pages[e];
        if (x->page != y->page || x->dma != y->dma || x->dirty != y->dirty ||
            x->dma_seq != y->dma_seq || x->socket != y->socket ||
            memcmp(x->owner, y->owner, sizeof(x->owner)) || memcmp(x->seq, y->seq, sizeof(x->seq)))
            return 4;
    }
    return 0;
}

/* One seed: `steps` random steps on both hosts. */
static void run_seed(uint64_t seed, int steps)
{
    rng_state = seed * 0x9E3779B97F4A7C15ull + 1;
    struct host_cpu_params p;
    host_cpu_params_default(&p);
    /* caches of a few lines so that ages cross every bound */
    p.mem.l1_bytes = 64u << rnd_below(6);                  /* 1-32 lines */
    p.mem.l2_bytes = p.mem.l1_bytes << (1 + rnd_below(4)); /* 2-16x */
    p.mem.llc_bytes = p.mem.l2_bytes << (1 + rnd_below(5));
    p.mem.ddio = rnd_below(4) != 0;
    p.mem.ddio_bytes = 64u << rnd_below(10);
    p.mem.mlp = 1 + (uint32_t)rnd_below(12);
    p.mem.tlb_l1_4k = 4;
    p.mem.tlb_l1_2m = 2;
    p.mem.tlb_stlb = 12;
    struct rig fast, ref;
    rig_init(&fast, &p, false);
    rig_init(&ref, &p, true);
    uint32_t cores = fast.h.mem->cores, per_socket = fast.h.mem->cores_per_socket;
    bool ranged = false;
    for (int step = 0; step < steps; step++) {
        uint64_t op = rnd_below(100);
        /* half of the steps in 4 pages, so that lines are met again soon */
        size_t off = rnd_below(REGION_BYTES >> (rnd_below(2) ? 0 : 4));
        size_t max = REGION_BYTES - off;
        /* mostly short (a slot's marker, a header), some pages long */
        size_t len = rnd_below(3) ? 1 + rnd_below(300) : 1 + rnd_below(5 * 4096);
        if (len > max)
            len = max;
        if (op < 25) {
            host_dma_wrote(&fast.h, buf + off, len);
            host_dma_wrote(&ref.h, buf + off, len);
        } else if (op < 90) {
            /* a few cores do most of the work, so lines stay theirs */
            uint32_t core = rnd_below(3) ? (uint32_t)rnd_below(3) : (uint32_t)rnd_below(cores);
            uint32_t socket = rnd_below(8) ? core / per_socket : 1 - core / per_socket;
            bool write = rnd_below(2);
            sim_time_t tf =
                host_mem_access(&fast.h, core, socket, (uintptr_t)buf + off, len, write);
            sim_time_t tr = host_mem_access(&ref.h, core, socket, (uintptr_t)buf + off, len, write);
            if (tf != tr) {
                CHECK_EQ_U64(tf, tr);
                fprintf(stderr, "seed %" PRIu64 " step %d: access %zu+%zu core %u\n", seed, step,
                        off, len, core);
                break;
            }
        } else if (op < 93) {
            /* a scan: `count` slots `stride` apart, accumulated */
            uint32_t core = (uint32_t)rnd_below(3);
            size_t stride = 1 + rnd_below(3 * 4096), count = 1 + rnd_below(16);
            if (len > 512)
                len = 1 + len % 512;
            if (off + (count - 1) * stride + len > REGION_BYTES)
                count = 1 + (REGION_BYTES - off - len) / stride;
            bool write = rnd_below(4) == 0;
            sim_time_t f[3] = {0, 0, 0}, r[3] = {0, 0, 0};
            host_mem_access_acc_n(&fast.h, core, core / per_socket, (uintptr_t)buf + off, len,
                                  stride, count, write, &f[0], &f[1], &f[2]);
            host_mem_access_acc_n(&ref.h, core, core / per_socket, (uintptr_t)buf + off, len,
                                  stride, count, write, &r[0], &r[1], &r[2]);
            if (memcmp(f, r, sizeof(f))) {
                CHECK_EQ_U64(f[0], r[0]);
                CHECK_EQ_U64(f[1], r[1]);
                CHECK_EQ_U64(f[2], r[2]);
                fprintf(stderr, "seed %" PRIu64 " step %d: scan\n", seed, step);
                break;
            }
        } else if (op < 97) {
            /* a copy, by memcpy or by a byte loop (its cost has the first miss) */
            size_t dst = rnd_below(REGION_BYTES - len + 1);
            uint32_t core = (uint32_t)rnd_below(3), ps = rnd_below(2) ? 0 : 1000;
            sim_time_t tf = host_mem_copy_loop(&fast.h, core, core / per_socket,
                                               (uintptr_t)buf + dst, (uintptr_t)buf + off, len, ps);
            sim_time_t tr = host_mem_copy_loop(&ref.h, core, core / per_socket,
                                               (uintptr_t)buf + dst, (uintptr_t)buf + off, len, ps);
            if (tf != tr) {
                CHECK_EQ_U64(tf, tr);
                fprintf(stderr, "seed %" PRIu64 " step %d: copy\n", seed, step);
                break;
            }
        } else if (!ranged) {
            /* a quarter of the region on the other socket */
            CHECK(host_mem_add_range(fast.h.mem, (uintptr_t)buf + REGION_BYTES / 4,
                                     REGION_BYTES / 4, 1, false) == 0);
            CHECK(host_mem_add_range(ref.h.mem, (uintptr_t)buf + REGION_BYTES / 4, REGION_BYTES / 4,
                                     1, false) == 0);
            ranged = true;
        } else {
            host_mem_remove_range(fast.h.mem, (uintptr_t)buf + REGION_BYTES / 4);
            host_mem_remove_range(ref.h.mem, (uintptr_t)buf + REGION_BYTES / 4);
            ranged = false;
        }
        int d = state_differs(&fast, &ref);
        if (d) {
            CHECK_EQ_U64(d, 0);
            fprintf(stderr, "seed %" PRIu64 " step %d (op %" PRIu64 " at %zu+%zu): state differs\n",
                    seed, step, op, off, len);
            break;
        }
    }
    CHECK_EQ_U64(state_differs(&fast, &ref), 0);
    const struct host_counters *c = &fast.h.cnt;
    mix.lines_touched += c->lines_touched;
    mix.lines_hit += c->lines_hit;
    mix.lines_dma_miss += c->lines_dma_miss;
    mix.lines_remote += c->lines_remote;
    mix.tlb_walks += c->tlb_walks;
    rig_fini(&fast);
    rig_fini(&ref);
}

/* The TLB's set index (tlb.c level_access: a mask, a 32-bit or a 64-bit
 * division by the set count) against LRU sets written out here with
 * vpn % sets: random page numbers below and above 2^32, set counts that
 * are powers of two and not, both page sizes. */
#define REF_MAX_KEYS 4096
struct ref_level {
    uint32_t sets, ways;
    uint64_t key[REF_MAX_KEYS];
    uint32_t n[REF_MAX_KEYS];
};

static void ref_level_init(struct ref_level *l, uint32_t entries, uint32_t ways)
{
    memset(l, 0, sizeof(*l));
    if (!entries)
        return;
    l->ways = entries < ways ? entries : ways;
    l->sets = entries / l->ways;
}

static bool ref_level_access(struct ref_level *l, uint64_t vpn, uint64_t key)
{
    if (!l->sets)
        return true;
    uint64_t *k = &l->key[(vpn % l->sets) * l->ways];
    uint32_t *n = &l->n[vpn % l->sets], j = 0;
    while (j < *n && k[j] != key)
        j++;
    bool hit = j < *n;
    if (!hit) {
        if (*n < l->ways)
            ++*n;
        j = *n - 1;
    }
    for (; j; j--)
        k[j] = k[j - 1];
    k[0] = key;
    return hit;
}

static void test_tlb_sets(void)
{
    static const uint32_t shapes[][3] = {{64, 32, 1536}, {64, 32, 512}, {48, 24, 1000},
                                         {16, 8, 12},    {64, 0, 0},    {60, 30, 1530}};
    static struct ref_level r4k, r2m, rst;
    uint64_t walks = 0, stlb = 0;
    for (size_t sh = 0; sh < sizeof(shapes) / sizeof(shapes[0]); sh++) {
        struct host_mem_params mp;
        host_mem_params_default(&mp);
        mp.tlb_l1_4k = shapes[sh][0];
        mp.tlb_l1_2m = shapes[sh][1];
        mp.tlb_stlb = shapes[sh][2];
        struct host_tlb t;
        CHECK(host_tlb_init(&t, &mp, 1) == 0);
        ref_level_init(&r4k, mp.tlb_l1_4k, 4);
        ref_level_init(&r2m, mp.tlb_l1_2m, 4);
        ref_level_init(&rst, mp.tlb_stlb, 12);
        rng_state = 1000 + sh;
        unsigned bad = 0;
        for (int i = 0; i < 200000 && !bad; i++) {
            /* pages of a few regions, some above 2^32 (16 TiB up) */
            uint64_t vpn = (rnd_below(2) ? (uint64_t)1 << 32 : (uint64_t)1 << 28) +
                           rnd_below(4) * 0x10000 + rnd_below(3000);
            bool huge = rnd_below(8) == 0;
            if (huge)
                vpn >>= 9;
            enum host_tlb_hit want = HOST_TLB_L1;
            /* host_tlb_lookup's repeat of the last page is a DTLB hit that
             * changes nothing: the reference does the same access, a hit */
            if (!ref_level_access(huge ? &r2m : &r4k, vpn, vpn)) {
                uint64_t key = huge ? vpn | (uint64_t)1 << 63 : vpn;
                want = ref_level_access(&rst, vpn, key) ? HOST_TLB_STLB : HOST_TLB_WALK;
            }
            enum host_tlb_hit got = host_tlb_lookup(&t, 0, vpn, huge);
            walks += got == HOST_TLB_WALK;
            stlb += got == HOST_TLB_STLB;
            if (got != want) {
                bad = 1;
                CHECK_EQ_U64(got, want);
                fprintf(stderr, "TLB shape %zu, lookup %d (vpn %" PRIu64 ")\n", sh, i, vpn);
            }
        }
        CHECK(!bad);
        host_tlb_fini(&t);
    }
    CHECK(walks > 10000);
    CHECK(stlb > 10000);
}

int main(void)
{
    if (posix_memalign((void **)&buf, 4096, REGION_BYTES))
        return 1;
    uint64_t c2c = 0;
    for (uint64_t seed = 1; seed <= 40; seed++) {
        unsigned failed = test_failed_;
        run_seed(seed, 3000);
        if (test_failed_ != failed)
            break;
    }
    /* the mix reached every class of line */
    printf("lines %" PRIu64 ": hit %" PRIu64 ", NIC's %" PRIu64 ", other socket %" PRIu64
           "; page walks %" PRIu64 "\n",
           mix.lines_touched, mix.lines_hit, mix.lines_dma_miss, mix.lines_remote, mix.tlb_walks);
    CHECK(mix.lines_hit > 10000);
    CHECK(mix.lines_dma_miss > mix.lines_touched / 20);
    CHECK(mix.lines_remote > mix.lines_touched / 20);
    CHECK(mix.tlb_walks > 1000);
    CHECK(mix.lines_touched > mix.lines_hit + mix.lines_dma_miss + mix.lines_remote);
    /* another core's modified lines, checked once over a run with large
     * caches (with a few lines they age out before another core reads) */
    {
        struct host_cpu_params p;
        host_cpu_params_default(&p);
        struct rig fast, ref;
        rig_init(&fast, &p, false);
        rig_init(&ref, &p, true);
        rng_state = 77;
        for (int step = 0; step < 2000; step++) {
            size_t off = rnd_below(REGION_BYTES - 512), len = 1 + rnd_below(512);
            uint32_t core = (uint32_t)rnd_below(4) * 7; /* 0, 7 on socket 0; 14, 21 on 1 */
            bool write = rnd_below(2);
            sim_time_t tf =
                host_mem_access(&fast.h, core, core / 12, (uintptr_t)buf + off, len, write);
            sim_time_t tr =
                host_mem_access(&ref.h, core, core / 12, (uintptr_t)buf + off, len, write);
            if (tf != tr || state_differs(&fast, &ref)) {
                CHECK_EQ_U64(tf, tr);
                CHECK_EQ_U64(state_differs(&fast, &ref), 0);
                break;
            }
        }
        c2c = fast.h.cnt.lines_c2c;
        CHECK(c2c > 0);
        CHECK(fast.h.cnt.lines_remote > 0);
        rig_fini(&fast);
        rig_fini(&ref);
    }
    test_tlb_sets();
    free(buf);
    return test_summary();
}
