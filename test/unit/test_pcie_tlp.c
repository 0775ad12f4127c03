/* PCIe TLP-level model: per-kind TLP and byte counts against MPS/MRRS
 * arithmetic, the tag limit (single-stream read bandwidth bounded by
 * tags x MRRS / round trip), root-complex flow-control credits (posted and
 * non-posted), posted writes passing reads that wait for a tag, and the
 * ordering of reads after posted writes with and without relaxed ordering,
 * the NIC's cache fills passing its queued data reads.
 * Expected values are computed here from the PCIe facts, independently of
 * pcie.c. */
#include <math.h>
#include <stdlib.h>

#include "sim/pcie/pcie.h"
#include "test.h"

/* ---------------------------------------------------------------- helpers */

#define MAXREC 256

struct rec {
    sim_time_t t[MAXREC];
    int n_done;
};

static struct rec R;

static void rec_done(struct sim *sim, void *a, void *b)
{
    (void)b;
    R.t[(int)(intptr_t)a] = sim_now(sim);
    R.n_done++;
}

static void rec_reset(void)
{
    memset(&R, 0, sizeof(R));
}

static sim_time_t ser(uint64_t bytes, double rate_bps)
{
    return (sim_time_t)ceil((double)bytes * 8.0 * 1e12 / rate_bps - 1e-6);
}

static uint64_t ceil_div(uint64_t a, uint64_t b)
{
    return (a + b - 1) / b;
}

/* One read of `bytes` on an idle link with `p`; returns its time. */
static sim_time_t one_read(const struct pcie_params *p, uint64_t bytes, struct pcie_counters *out,
                           uint64_t *events)
{
    struct sim *sim = sim_create(1);
    struct pcie_link *l = pcie_link_create(sim, "t.pcie", p);
    rec_reset();
    pcie_dma_read_k(l, PCIE_K_PAYLOAD_RD, 0, bytes, rec_done, (void *)(intptr_t)0, NULL);
    CHECK(sim_run(sim, SIM_TIME_NEVER) == SIM_RUN_DONE);
    CHECK_EQ_U64(R.n_done, 1);
    if (out)
        *out = *pcie_link_counters(l);
    if (events)
        *events = sim_events_executed(sim);
    pcie_link_destroy(l);
    sim_destroy(sim);
    return R.t[0];
}

/* ---------------------------------------------------------------- counts by kind */

static void test_kind_counts(void)
{
    static const char *const names[] = {"payload_rd", "payload_wr", "wqe_fetch", "cqe",  "ctx_miss",
                                        "xlate_miss", "atomic",     "doorbell",  "other"};
    for (int k = 0; k < PCIE_K_COUNT; k++)
        CHECK(strcmp(pcie_kind_names[k], names[k]) == 0);

    /* (MPS, MRRS) pairs, sizes around the boundaries */
    static const uint32_t cfg[][2] = {{256, 512}, {128, 1024}, {512, 128}};
    static const uint64_t sizes[] = {0, 1, 64, 128, 129, 256, 511, 512, 513, 4096, 65537};
    for (size_t c = 0; c < 3; c++) {
        struct pcie_params p;
        pcie_params_default(&p);
        p.read_fetch_bps = 0; /* tags and credits alone (fetch: test_pcie_model) */
        p.mps_bytes = cfg[c][0];
        p.mrrs_bytes = cfg[c][1];
        uint64_t mps = p.mps_bytes, mrrs = p.mrrs_bytes;
        for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
            uint64_t n = sizes[i];
            struct sim *sim = sim_create(1);
            struct pcie_link *l = pcie_link_create(sim, "t.pcie", &p);
            pcie_dma_read_k(l, PCIE_K_WQE_FETCH, 0, n, NULL, NULL, NULL);
            pcie_dma_write_k(l, PCIE_K_CQE, 0, n, NULL, NULL, NULL);
            pcie_mmio_write_k(l, PCIE_K_DOORBELL, n, NULL, NULL, NULL);
            pcie_dma_read(l, n, NULL, NULL, NULL); /* kind "other" */
            const struct pcie_counters *k = pcie_link_counters(l);
            /* read: ceil(n / MRRS) MRds (one for 0 B), each answered by
             * ceil(req / MPS) CplDs (one for a 0 B request) */
            uint64_t reqs = n ? ceil_div(n, mrrs) : 1, cplds = 0;
            for (uint64_t r = 0; r < reqs; r++) {
                uint64_t rb = r + 1 < reqs ? mrrs : n - (reqs - 1) * mrrs;
                cplds += rb ? ceil_div(rb, mps) : 1;
            }
            uint64_t rd_tlps = reqs + cplds, rd_bytes = 24 * reqs + n + 20 * cplds;
            uint64_t wr_tlps = n ? ceil_div(n, mps) : 1, wr_bytes = n + 24 * wr_tlps;
            CHECK_EQ_U64(k->kind_tlps[PCIE_K_WQE_FETCH], rd_tlps);
            CHECK_EQ_U64(k->kind_bytes[PCIE_K_WQE_FETCH], rd_bytes);
            CHECK_EQ_U64(k->kind_tlps[PCIE_K_OTHER], rd_tlps);
            CHECK_EQ_U64(k->kind_bytes[PCIE_K_OTHER], rd_bytes);
            CHECK_EQ_U64(k->kind_tlps[PCIE_K_CQE], wr_tlps);
            CHECK_EQ_U64(k->kind_bytes[PCIE_K_CQE], wr_bytes);
            CHECK_EQ_U64(k->kind_tlps[PCIE_K_DOORBELL], wr_tlps);
            CHECK_EQ_U64(k->kind_bytes[PCIE_K_DOORBELL], wr_bytes);
            CHECK_EQ_U64(k->kind_tlps[PCIE_K_PAYLOAD_RD], 0);
            CHECK_EQ_U64(k->kind_bytes[PCIE_K_ATOMIC], 0);
            /* per kind adds up to the per-direction totals */
            uint64_t st = 0, sb = 0;
            for (int j = 0; j < PCIE_K_COUNT; j++)
                st += k->kind_tlps[j], sb += k->kind_bytes[j];
            CHECK_EQ_U64(st, k->tlp_up + k->tlp_down);
            CHECK_EQ_U64(sb, k->bytes_up + k->bytes_down);
            CHECK(sim_run(sim, SIM_TIME_NEVER) == SIM_RUN_DONE);
            pcie_link_destroy(l);
            sim_destroy(sim);
        }
    }
    /* an out-of-range kind counts as "other" */
    struct pcie_params p;
    pcie_params_default(&p);
    p.read_fetch_bps = 0; /* tags and credits alone (fetch: test_pcie_model) */
    struct sim *sim = sim_create(1);
    struct pcie_link *l = pcie_link_create(sim, "t.pcie", &p);
    pcie_dma_write_k(l, (enum pcie_kind)99, 0, 64, NULL, NULL, NULL);
    CHECK_EQ_U64(pcie_link_counters(l)->kind_tlps[PCIE_K_OTHER], 1);
    sim_run(sim, SIM_TIME_NEVER);
    pcie_link_destroy(l);
    sim_destroy(sim);
}

/* ---------------------------------------------------------------- tags */

static void test_tags(void)
{
    struct pcie_params p;
    pcie_params_default(&p);
    p.read_fetch_bps = 0; /* tags and credits alone (fetch: test_pcie_model) */
    p.fc_nph_credits = 0; /* tags alone */
    double eff = (double)pcie_effective_rate_bps(&p);
    sim_time_t L = p.read_latency_ps, mrd = ser(24, eff), C = 2 * ser(276, eff);
    double bits = 8.0 * (1 << 20);

    /* tags = 4, 1 MiB = 2048 MRds of 512 B: a tag comes back when the
     * request's 2 CplDs arrived; the next MRd then leaves, so each group of
     * 4 requests takes one round trip P = MRd + L + C:
     * end = 512 P + 3 C, and the rate is 4 x 512 B / P */
    struct pcie_counters c;
    p.tags = 4;
    sim_time_t t4 = one_read(&p, 1 << 20, &c, NULL);
    sim_time_t P = mrd + L + C;
    CHECK_EQ_U64(t4, 512 * P + 3 * C);
    double bound = 4 * 512 * 8.0 / ((double)P / 1e12);
    double rate4 = bits / ((double)t4 / 1e12);
    printf("tags=4: 1 MiB read %.2f us, %.2f Gb/s (tags x MRRS / round trip %.2f)\n",
           sim_ps_to_us(t4), rate4 / 1e9, bound / 1e9);
    CHECK(rate4 <= bound);
    CHECK(rate4 > 0.99 * bound);
    CHECK_EQ_U64(c.tag_stalls, 2048 - 4);
    CHECK_EQ_U64(c.credit_stalls, 0);
    CHECK_EQ_U64(c.kind_tlps[PCIE_K_PAYLOAD_RD], 2048 + 4096);

    /* tags = 8: twice the rate */
    p.tags = 8;
    sim_time_t t8 = one_read(&p, 1 << 20, &c, NULL);
    CHECK_EQ_U64(t8, 256 * P + 7 * C);
    printf("tags=8: 1 MiB read %.2f us, %.2f Gb/s\n", sim_ps_to_us(t8),
           bits / ((double)t8 / 1e12) / 1e9);
    /* enough tags (a round trip's worth: P / C = 15.5 -> 16) reach the link
     * limit: the same end time as unlimited tags */
    p.tags = 0;
    sim_time_t tinf = one_read(&p, 1 << 20, NULL, NULL);
    p.tags = 16;
    CHECK_EQ_U64(one_read(&p, 1 << 20, NULL, NULL), tinf);
    p.tags = 256;
    uint64_t ev = 0;
    CHECK_EQ_U64(one_read(&p, 1 << 20, &c, &ev), tinf);
    CHECK_EQ_U64(c.tag_stalls, 2048 - 256);
    printf("tags=256: 1 MiB read %.2f us, %.2f Gb/s, %llu events\n", sim_ps_to_us(tinf),
           bits / ((double)tinf / 1e12) / 1e9, (unsigned long long)ev);
    p.tags = 1; /* one request at a time, a 4 KiB read: 8 round trips */
    CHECK_EQ_U64(one_read(&p, 4096, NULL, NULL), 8 * P);
}

/* A posted write issued while a read waits for tags is not held behind
 * the waiting MRds (posted requests may pass non-posted ones). */
static void test_write_passes_waiting_read(void)
{
    struct pcie_params p;
    pcie_params_default(&p);
    p.read_fetch_bps = 0; /* tags and credits alone (fetch: test_pcie_model) */
    p.tags = 1;
    double eff = (double)pcie_effective_rate_bps(&p);
    struct sim *sim = sim_create(1);
    struct pcie_link *l = pcie_link_create(sim, "t.pcie", &p);
    rec_reset();
    pcie_dma_read(l, 4096, rec_done, (void *)(intptr_t)0, NULL);
    pcie_dma_write(l, 64, rec_done, (void *)(intptr_t)1, NULL);
    sim_run(sim, SIM_TIME_NEVER);
    CHECK_EQ_U64(R.n_done, 2);
    /* first MRd, then the write's 88 B */
    CHECK_EQ_U64(R.t[1], ser(24, eff) + ser(88, eff) + p.write_latency_ps);
    CHECK(R.t[1] < R.t[0]);
    pcie_link_destroy(l);
    sim_destroy(sim);
}

/* A link with one tag and meta_reads_first as given, its recorder reset. */
static struct pcie_link *one_tag_link(struct sim *sim, bool meta_first)
{
    struct pcie_params p;
    pcie_params_default(&p);
    p.read_fetch_bps = 0;
    p.tags = 1;
    p.meta_reads_first = meta_first;
    rec_reset();
    return pcie_link_create(sim, "t.pcie", &p);
}

/* pcie.meta_reads_first: context and translation cache fills go ahead of
 * queued data reads that have not started (in their own order), never
 * into a read whose MRds are partly out; off, reads go in issue order.
 * With one tag every MRd is a round trip of its own, so the completion
 * order is the issue order of the MRds. */
static void test_meta_reads_first(void)
{
    for (int on = 0; on <= 1; on++) {
        struct sim *sim = sim_create(1);
        struct pcie_link *l = one_tag_link(sim, on);
        /* 0: started (its first MRd holds the tag), 1: not started */
        pcie_dma_read_k(l, PCIE_K_PAYLOAD_RD, 0, 4096, rec_done, (void *)(intptr_t)0, NULL);
        pcie_dma_read_k(l, PCIE_K_PAYLOAD_RD, 0, 4096, rec_done, (void *)(intptr_t)1, NULL);
        pcie_dma_read_k(l, PCIE_K_CTX_MISS, 0, 64, rec_done, (void *)(intptr_t)2, NULL);
        pcie_dma_read_k(l, PCIE_K_XLATE_MISS, 0, 64, rec_done, (void *)(intptr_t)3, NULL);
        pcie_dma_read_k(l, PCIE_K_WQE_FETCH, 0, 64, rec_done, (void *)(intptr_t)4, NULL);
        CHECK(sim_run(sim, SIM_TIME_NEVER) == SIM_RUN_DONE);
        CHECK_EQ_U64(R.n_done, 5);
        CHECK(R.t[0] < R.t[1] && R.t[0] < R.t[2]); /* the started read is not split */
        CHECK(R.t[2] < R.t[3]);                    /* fills in their own order */
        CHECK(R.t[1] < R.t[4]);                    /* a WQE fetch is a data read */
        if (on)
            CHECK(R.t[3] < R.t[1]); /* both fills pass the read not started */
        else
            CHECK(R.t[1] < R.t[2] && R.t[3] < R.t[4]); /* issue order */
        pcie_link_destroy(l);
        sim_destroy(sim);
    }
    /* the head of the queue has not started (every tag held): a fill goes
     * before it */
    struct sim *sim = sim_create(1);
    struct pcie_link *l = one_tag_link(sim, true);
    pcie_dma_read_k(l, PCIE_K_PAYLOAD_RD, 0, 512, rec_done, (void *)(intptr_t)0, NULL);
    pcie_dma_read_k(l, PCIE_K_PAYLOAD_RD, 0, 512, rec_done, (void *)(intptr_t)1, NULL);
    pcie_dma_read_k(l, PCIE_K_XLATE_MISS, 0, 64, rec_done, (void *)(intptr_t)2, NULL);
    CHECK(sim_run(sim, SIM_TIME_NEVER) == SIM_RUN_DONE);
    CHECK_EQ_U64(R.n_done, 3);
    CHECK(R.t[0] < R.t[2] && R.t[2] < R.t[1]);
    pcie_link_destroy(l);
    sim_destroy(sim);
}

/* ---------------------------------------------------------------- credits */

static void test_credits(void)
{
    struct pcie_params p;
    pcie_params_default(&p);
    p.read_fetch_bps = 0; /* tags and credits alone (fetch: test_pcie_model) */
    double eff = (double)pcie_effective_rate_bps(&p);
    sim_time_t WL = p.write_latency_ps, L = p.read_latency_ps;

    /* posted headers: 2 credits, 16 writes of 64 B issued together.  Write j
     * (j >= 2) leaves when write j-2 is visible (its credit came back):
     * visible_j = visible_{j-2} + 88 B + WL */
    p.fc_ph_credits = 2;
    p.fc_pd_credits = 0;
    struct sim *sim = sim_create(1);
    struct pcie_link *l = pcie_link_create(sim, "t.pcie", &p);
    rec_reset();
    for (int j = 0; j < 16; j++)
        pcie_dma_write(l, 64, rec_done, (void *)(intptr_t)j, NULL);
    sim_run(sim, SIM_TIME_NEVER);
    CHECK_EQ_U64(R.n_done, 16);
    CHECK_EQ_U64(R.t[0], ser(88, eff) + WL);
    CHECK_EQ_U64(R.t[1], 2 * ser(88, eff) + WL);
    for (int j = 2; j < 16; j++)
        CHECK_EQ_U64(R.t[j], R.t[j - 2] + ser(88, eff) + WL);
    /* writes 2, 4, ..., 14 wait for credits; the odd ones get theirs back
     * exactly when the link frees (no wait beyond the FIFO) */
    CHECK_EQ_U64(pcie_link_counters(l)->credit_stalls, 7);
    pcie_link_destroy(l);
    sim_destroy(sim);

    /* posted data: 16 credits = one 256 B MWr; a 1 KiB write is 4 TLPs,
     * each waiting for the previous one to be visible */
    p.fc_ph_credits = 0;
    p.fc_pd_credits = 16;
    sim = sim_create(1);
    l = pcie_link_create(sim, "t.pcie", &p);
    rec_reset();
    pcie_dma_write(l, 1024, rec_done, (void *)(intptr_t)0, NULL);
    sim_run(sim, SIM_TIME_NEVER);
    CHECK_EQ_U64(R.t[0], 4 * (ser(280, eff) + WL));
    CHECK_EQ_U64(pcie_link_counters(l)->credit_stalls, 3);
    pcie_link_destroy(l);
    /* fewer data credits than one MPS-sized MWr needs: refused */
    p.fc_pd_credits = 15;
    CHECK(pcie_link_create(sim, "bad", &p) == NULL);
    sim_destroy(sim);

    /* non-posted headers: 4 credits, each back L after its MRd arrived:
     * MRd j (j >= 4) leaves at A_{j-4} + L, so 4 requests per MRd + L:
     * rate 4 x 512 B / (MRd + L) */
    pcie_params_default(&p);
    p.read_fetch_bps = 0; /* tags and credits alone (fetch: test_pcie_model) */
    p.tags = 0;
    p.fc_nph_credits = 4;
    struct pcie_counters c;
    sim_time_t t = one_read(&p, 1 << 20, &c, NULL);
    double bound = 4 * 512 * 8.0 / ((double)(ser(24, eff) + L) / 1e12);
    double rate = 8.0 * (1 << 20) / ((double)t / 1e12);
    printf("nph=4: 1 MiB read %.2f Gb/s (bound %.2f)\n", rate / 1e9, bound / 1e9);
    CHECK(rate <= bound);
    CHECK(rate > 0.99 * bound);
    CHECK_EQ_U64(c.credit_stalls, 2048 - 4);
    CHECK_EQ_U64(c.tag_stalls, 0);

    /* the defaults do not limit an unloaded Gen3 x16 link: 1 MiB read and
     * write and a train of 64 B writes take the same time as with infinite
     * credits and tags */
    struct pcie_params d, inf;
    pcie_params_default(&d);
    d.read_fetch_bps = 0; /* tags and credits alone (fetch: test_pcie_model) */
    inf = d;
    inf.tags = inf.fc_ph_credits = inf.fc_pd_credits = inf.fc_nph_credits = 0;
    CHECK_EQ_U64(one_read(&d, 1 << 20, &c, NULL), one_read(&inf, 1 << 20, NULL, NULL));
    /* every MRd past the first 72 waits, first for NPH credits, later
     * (256 outstanding) for tags, without loss of bandwidth */
    printf("defaults, 1 MiB read: %llu credit stalls, %llu tag stalls\n",
           (unsigned long long)c.credit_stalls, (unsigned long long)c.tag_stalls);
    CHECK_EQ_U64(c.credit_stalls + c.tag_stalls, 2048 - 72);
    CHECK(c.tag_stalls > 0);
    for (int v = 0; v < 2; v++) {
        sim = sim_create(1);
        l = pcie_link_create(sim, "t.pcie", v ? &inf : &d);
        rec_reset();
        pcie_dma_write(l, 1 << 20, rec_done, (void *)(intptr_t)0, NULL);
        for (int j = 1; j < 200; j++)
            pcie_dma_write(l, 64, rec_done, (void *)(intptr_t)j, NULL);
        sim_run(sim, SIM_TIME_NEVER);
        CHECK_EQ_U64(pcie_link_counters(l)->credit_stalls, 0);
        CHECK_EQ_U64(R.t[199], (4096 * ser(280, eff) + 199 * ser(88, eff)) + WL);
        pcie_link_destroy(l);
        sim_destroy(sim);
    }
}

/* ---------------------------------------------------------------- ordering */

static void test_relaxed_read(void)
{
    struct pcie_params p;
    pcie_params_default(&p);
    p.read_fetch_bps = 0;            /* tags and credits alone (fetch: test_pcie_model) */
    p.write_latency_ps = 5 * SIM_US; /* longer than the read path */
    double eff = (double)pcie_effective_rate_bps(&p);
    for (int relaxed = 0; relaxed < 2; relaxed++) {
        struct sim *sim = sim_create(1);
        struct pcie_link *l = pcie_link_create(sim, "t.pcie", &p);
        rec_reset();
        pcie_dma_write(l, 64, rec_done, (void *)(intptr_t)0, NULL);
        pcie_dma_read_k(l, PCIE_K_PAYLOAD_RD, relaxed ? PCIE_F_RELAXED : 0, 64, rec_done,
                        (void *)(intptr_t)1, NULL);
        sim_run(sim, SIM_TIME_NEVER);
        CHECK_EQ_U64(R.n_done, 2);
        CHECK_EQ_U64(R.t[0], ser(88, eff) + p.write_latency_ps);
        if (relaxed) /* data read before the write is visible */
            CHECK_EQ_U64(R.t[1], ser(88, eff) + ser(24, eff) + p.read_latency_ps + ser(84, eff));
        else
            CHECK_EQ_U64(R.t[1], R.t[0] + ser(84, eff));
        CHECK((R.t[1] < R.t[0]) == relaxed);
        pcie_link_destroy(l);
        sim_destroy(sim);
    }
    /* a relaxed write still holds back a later strict read */
    struct sim *sim = sim_create(1);
    struct pcie_link *l = pcie_link_create(sim, "t.pcie", &p);
    rec_reset();
    pcie_dma_write_k(l, PCIE_K_PAYLOAD_WR, PCIE_F_RELAXED, 64, rec_done, (void *)(intptr_t)0, NULL);
    pcie_dma_read(l, 64, rec_done, (void *)(intptr_t)1, NULL);
    sim_run(sim, SIM_TIME_NEVER);
    CHECK(R.t[1] > R.t[0]);
    pcie_link_destroy(l);
    sim_destroy(sim);
}

/* A deterministic mix of reads and writes of many sizes, some issued
 * later, with a small tag and credit budget so that reads wait: a strict
 * read's `done` is never before any earlier-issued write is visible; some
 * relaxed reads overtake. */
static struct pcie_link *g_link;
static int g_kind[MAXREC]; /* 0 write, 1 strict read, 2 relaxed read */
static uint64_t g_bytes[MAXREC];
static sim_time_t g_issued[MAXREC];

static void issue(struct sim *sim, void *a, void *b)
{
    (void)b;
    int i = (int)(intptr_t)a;
    g_issued[i] = sim_now(sim);
    if (g_kind[i] == 0)
        pcie_dma_write(g_link, g_bytes[i], rec_done, a, NULL);
    else
        pcie_dma_read_k(g_link, PCIE_K_PAYLOAD_RD, g_kind[i] == 2 ? PCIE_F_RELAXED : 0, g_bytes[i],
                        rec_done, a, NULL);
}

static void test_read_never_passes_write(void)
{
    struct pcie_params p;
    pcie_params_default(&p);
    p.read_fetch_bps = 0; /* tags and credits alone (fetch: test_pcie_model) */
    p.tags = 6;
    p.fc_nph_credits = 5;
    p.fc_ph_credits = 8;
    p.write_latency_ps = 900 * SIM_NS; /* writes slower than reads */
    struct sim *sim = sim_create(1);
    g_link = pcie_link_create(sim, "t.pcie", &p);
    rec_reset();
    uint64_t x = 12345;
    int n = 200;
    for (int i = 0; i < n; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        g_kind[i] = (int)((x >> 33) % 3);
        static const uint64_t sz[] = {0, 8, 64, 256, 257, 1024, 4096, 9000};
        g_bytes[i] = sz[(x >> 40) % 8];
        sim_call_in(sim, (sim_time_t)((x >> 20) % 50) * 100 * SIM_NS, issue, (void *)(intptr_t)i,
                    NULL);
    }
    sim_run(sim, SIM_TIME_NEVER);
    CHECK_EQ_U64(R.n_done, n);
    int violations = 0, overtakes = 0;
    for (int r = 0; r < n; r++) {
        if (g_kind[r] == 0)
            continue;
        for (int w = 0; w < n; w++) {
            /* issued before (same time: lower index is issued first, the
             * calls are FIFO at equal times) */
            if (g_kind[w] != 0 || g_issued[w] > g_issued[r] ||
                (g_issued[w] == g_issued[r] && w > r))
                continue;
            if (R.t[r] <= R.t[w]) {
                if (g_kind[r] == 1)
                    violations++;
                else
                    overtakes++;
            }
        }
    }
    printf("mixed: %d relaxed reads finished before an earlier write was visible\n", overtakes);
    CHECK_EQ_U64(violations, 0);
    CHECK(overtakes > 0);
    const struct pcie_counters *c = pcie_link_counters(g_link);
    CHECK(c->tag_stalls > 0);
    CHECK(c->credit_stalls > 0);
    pcie_link_destroy(g_link);
    sim_destroy(sim);
}

/* Partial-line writes (pcie_dma_write_rmw_ct_k): the root complex's merge
 * holds the write and every write after it, relaxed or not; a stream of
 * them runs at one write's TLPs plus its merge. */
static void test_partial_line_writes(void)
{
    struct pcie_params p;
    pcie_params_default(&p);
    double eff = (double)pcie_effective_rate_bps(&p);
    sim_time_t WL = p.write_latency_ps, RMW = 100 * SIM_NS;
    struct sim *sim = sim_create(1);
    struct pcie_link *l = pcie_link_create(sim, "t.pcie", &p);
    rec_reset();
    pcie_dma_write_rmw_ct_k(l, PCIE_K_PAYLOAD_WR, 0, 8, 0, RMW, rec_done, (void *)(intptr_t)0,
                            NULL);
    pcie_dma_write(l, 64, rec_done, (void *)(intptr_t)1, NULL);
    pcie_dma_write_k(l, PCIE_K_PAYLOAD_WR, PCIE_F_RELAXED, 64, rec_done, (void *)(intptr_t)2, NULL);
    sim_run(sim, SIM_TIME_NEVER);
    CHECK_EQ_U64(R.n_done, 3);
    /* 8 B: 32 B on the wire, then the merge */
    CHECK_EQ_U64(R.t[0], ser(32, eff) + RMW + WL);
    /* the next two arrive behind it and wait for the merge to end */
    CHECK_EQ_U64(R.t[1], ser(32, eff) + RMW + ser(88, eff) + WL);
    CHECK_EQ_U64(R.t[2], ser(32, eff) + RMW + 2 * ser(88, eff) + WL);
    CHECK_EQ_U64(pcie_link_counters(l)->rmw_writes, 1);
    CHECK_EQ_U64(pcie_link_counters(l)->rmw_ps, RMW);
    pcie_link_destroy(l);
    sim_destroy(sim);

    /* 4 KiB writes (16 MWr of 256 B: 4480 B on the wire) each merging two
     * lines from memory (2 x 90 ns): back to back, one lands every
     * 4480 B + 180 ns, not every 4480 B */
    sim = sim_create(1);
    l = pcie_link_create(sim, "t.pcie", &p);
    rec_reset();
    for (int j = 0; j < 8; j++)
        pcie_dma_write_rmw_ct_k(l, PCIE_K_PAYLOAD_WR, 0, 4096, 0, 180 * SIM_NS, rec_done,
                                (void *)(intptr_t)j, NULL);
    sim_run(sim, SIM_TIME_NEVER);
    CHECK_EQ_U64(R.n_done, 8);
    for (int j = 1; j < 8; j++)
        CHECK_EQ_U64(R.t[j] - R.t[j - 1], 16 * ser(280, eff) + 180 * SIM_NS);
    pcie_link_destroy(l);
    sim_destroy(sim);
}

int main(void)
{
    test_kind_counts();
    test_tags();
    test_write_passes_waiting_read();
    test_meta_reads_first();
    test_credits();
    test_relaxed_read();
    test_read_never_passes_write();
    test_partial_line_writes();
    return test_summary();
}
