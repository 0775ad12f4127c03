/* PCIe TLP model: link rates per generation, effective rate, TLP counts and
 * wire bytes, exact timings of single operations, calibration against the
 * pcie-bench latency points, throughput of large transfers, ordering of
 * posted writes, and the events per operation (the tag / credit / relaxed
 * ordering model is tested in test_pcie_tlp.c).  Expected values are
 * computed here from the PCIe facts, independently of pcie.c. */
#include <math.h>
#include <stdlib.h>

#include "sim/noise.h"
#include "sim/pcie/pcie.h"
#include "test.h"

#define CHECK_NEAR(a, b, tol)                                                                      \
    do {                                                                                           \
        double a__ = (double)(a), b__ = (double)(b);                                               \
        if (fabs(a__ - b__) <= (double)(tol)) {                                                    \
            test_passed_++;                                                                        \
        } else {                                                                                   \
            test_failed_++;                                                                        \
            fprintf(stderr, "%s:%d: CHECK failed: %s ~ %s (%.3f vs %.3f, tol %.3f)\n", __FILE__,   \
                    __LINE__, #a, #b, a__, b__, (double)(tol));                                    \
        }                                                                                          \
    } while (0)

/* ---------------------------------------------------------------- helpers */

/* Completion recorder: done(a = slot) stores the time; `order` the sequence. */
struct rec {
    sim_time_t t[64];
    int order[64];
    int n_done;
};

static struct rec R;

static void rec_done(struct sim *sim, void *a, void *b)
{
    (void)b;
    int i = (int)(intptr_t)a;
    R.t[i] = sim_now(sim);
    R.order[R.n_done++] = i;
}

static void rec_reset(void)
{
    memset(&R, 0, sizeof(R));
}

/* Serialisation of `bytes` at `rate_bps`, ceil to ps (the model's rounding),
 * computed in floating point here. */
static sim_time_t ser(uint64_t bytes, double rate_bps)
{
    return (sim_time_t)ceil((double)bytes * 8.0 * 1e12 / rate_bps - 1e-6);
}

static double expected_raw_bps(unsigned gen, unsigned lanes)
{
    static const double gtps[] = {0, 2.5e9, 5e9, 8e9, 16e9, 32e9};
    double enc = gen <= 2 ? 8.0 / 10.0 : 128.0 / 130.0;
    return gtps[gen] * enc * lanes;
}

/* ---------------------------------------------------------------- rates */

static void test_rates(void)
{
    struct pcie_params p;
    pcie_params_default(&p);
    CHECK_EQ_U64(p.gen, 3);
    CHECK_EQ_U64(p.lanes, 16);
    CHECK_EQ_U64(p.mps_bytes, 256);
    CHECK_EQ_U64(p.mrrs_bytes, 512);
    CHECK_EQ_U64(p.mwr_hdr_bytes, 24);
    CHECK_EQ_U64(p.cpld_hdr_bytes, 20);

    static const unsigned lanes[] = {1, 2, 4, 8, 16};
    for (unsigned gen = 1; gen <= 5; gen++)
        for (unsigned i = 0; i < 5; i++) {
            p.gen = gen;
            p.lanes = lanes[i];
            CHECK_NEAR(pcie_link_rate_bps(&p), expected_raw_bps(gen, lanes[i]), 1.0);
        }
    /* the spec numbers, literally */
    p.gen = 1, p.lanes = 1;
    CHECK_EQ_U64(pcie_link_rate_bps(&p), 2000000000ull);
    p.gen = 2, p.lanes = 8;
    CHECK_EQ_U64(pcie_link_rate_bps(&p), 32000000000ull);
    p.gen = 3, p.lanes = 1;
    CHECK_EQ_U64(pcie_link_rate_bps(&p), 7876923076ull); /* 7.877 Gb/s per lane */
    p.gen = 3, p.lanes = 16;
    CHECK_EQ_U64(pcie_link_rate_bps(&p), 126030769230ull); /* "x16 raw 126 Gb/s" */
    p.gen = 5, p.lanes = 16;
    CHECK_EQ_U64(pcie_link_rate_bps(&p), 504123076923ull);
    /* invalid configurations */
    p.gen = 0;
    CHECK_EQ_U64(pcie_link_rate_bps(&p), 0);
    p.gen = 6;
    CHECK_EQ_U64(pcie_link_rate_bps(&p), 0);
    p.gen = 3, p.lanes = 0;
    CHECK_EQ_U64(pcie_link_rate_bps(&p), 0);
    struct sim *sim = sim_create(1);
    CHECK(pcie_link_create(sim, "bad", &p) == NULL);
    p.gen = 3, p.lanes = 16, p.dllp_overhead_permil = 1000;
    CHECK(pcie_link_create(sim, "bad", &p) == NULL);
    sim_destroy(sim);

    /* effective rate: CALIBRATION x16 113.7 Gb/s at MPS 256 */
    pcie_params_default(&p);
    double eff = (double)pcie_effective_rate_bps(&p);
    CHECK_NEAR(eff / 1e9, 113.7, 0.05);
    CHECK_NEAR(eff, 126030769230.0 * 0.902, 1.0);
    /* and the derived CALIBRATION rows: writes >= 256 B 104, reads 105.5,
     * 64 B writes 82.7 Gb/s (payload share of each TLP) */
    CHECK_NEAR(eff * 256 / 280 / 1e9, 104.0, 0.15);
    CHECK_NEAR(eff * 256 / 276 / 1e9, 105.5, 0.15);
    CHECK_NEAR(eff * 64 / 88 / 1e9, 82.7, 0.1);
    /* x8 with the x8 overhead of the same model: 57.9 Gb/s */
    p.lanes = 8;
    p.dllp_overhead_permil = 81;
    CHECK_NEAR((double)pcie_effective_rate_bps(&p) / 1e9, 57.9, 0.05);
}

/* ---------------------------------------------------------------- TLP counts */

struct count_case {
    uint64_t bytes;
    uint64_t wr_tlps;  /* ceil(bytes / MPS 256) */
    uint64_t rd_reqs;  /* ceil(bytes / MRRS 512) */
    uint64_t rd_cplds; /* per request ceil(req / 256), summed */
};

static const struct count_case count_cases[] = {
    {1, 1, 1, 1}, {256, 1, 1, 1}, {257, 2, 1, 2}, {4096, 16, 8, 16}, {1048576, 4096, 2048, 4096},
};

static void test_counts(void)
{
    struct pcie_params p;
    pcie_params_default(&p);
    for (size_t i = 0; i < sizeof(count_cases) / sizeof(count_cases[0]); i++) {
        const struct count_case *k = &count_cases[i];
        struct sim *sim = sim_create(1);
        struct pcie_link *l = pcie_link_create(sim, "t.pcie", &p);
        pcie_dma_write(l, k->bytes, NULL, NULL, NULL);
        const struct pcie_counters *c = pcie_link_counters(l);
        CHECK_EQ_U64(c->dma_writes, 1);
        CHECK_EQ_U64(c->tlp_up, k->wr_tlps);
        CHECK_EQ_U64(c->bytes_up, k->bytes + 24 * k->wr_tlps);
        CHECK_EQ_U64(c->payload_up, k->bytes);
        CHECK_EQ_U64(c->tlp_down, 0);
        sim_run(sim, SIM_TIME_NEVER);
        pcie_link_destroy(l);

        l = pcie_link_create(sim, "t.pcie", &p);
        pcie_dma_read(l, k->bytes, NULL, NULL, NULL);
        c = pcie_link_counters(l);
        CHECK_EQ_U64(c->dma_reads, 1);
        CHECK_EQ_U64(c->tlp_up, k->rd_reqs);
        CHECK_EQ_U64(c->bytes_up, 24 * k->rd_reqs);
        CHECK_EQ_U64(c->payload_up, 0);
        CHECK_EQ_U64(c->tlp_down, k->rd_cplds);
        CHECK_EQ_U64(c->bytes_down, k->bytes + 20 * k->rd_cplds);
        CHECK_EQ_U64(c->payload_down, k->bytes);
        sim_run(sim, SIM_TIME_NEVER);
        pcie_link_destroy(l);
        sim_destroy(sim);
    }

    /* MMIO: an 8 B doorbell and a 64 B BlueFlame WQE are one TLP each */
    struct sim *sim = sim_create(1);
    struct pcie_link *l = pcie_link_create(sim, "t.pcie", &p);
    pcie_mmio_write(l, 8, NULL, NULL, NULL);
    pcie_mmio_write(l, 64, NULL, NULL, NULL);
    const struct pcie_counters *c = pcie_link_counters(l);
    CHECK_EQ_U64(c->mmio_writes, 2);
    CHECK_EQ_U64(c->tlp_down, 2);
    CHECK_EQ_U64(c->bytes_down, 8 + 24 + 64 + 24);
    CHECK_EQ_U64(c->tlp_up, 0);
    sim_run(sim, SIM_TIME_NEVER);
    pcie_link_destroy(l);
    sim_destroy(sim);
}

/* ---------------------------------------------------------------- timings */

/* Time of one operation issued at t = 0 on an idle link. */
enum op_kind { OP_READ, OP_WRITE, OP_MMIO };

static sim_time_t one_op(const struct pcie_params *p, enum op_kind k, uint64_t bytes,
                         uint64_t *events)
{
    struct sim *sim = sim_create(1);
    struct pcie_link *l = pcie_link_create(sim, "t.pcie", p);
    rec_reset();
    if (k == OP_READ)
        pcie_dma_read(l, bytes, rec_done, (void *)(intptr_t)0, NULL);
    else if (k == OP_WRITE)
        pcie_dma_write(l, bytes, rec_done, (void *)(intptr_t)0, NULL);
    else
        pcie_mmio_write(l, bytes, rec_done, (void *)(intptr_t)0, NULL);
    CHECK(sim_run(sim, SIM_TIME_NEVER) == SIM_RUN_DONE);
    CHECK_EQ_U64(R.n_done, 1);
    if (events)
        *events = sim_events_executed(sim);
    pcie_link_destroy(l);
    sim_destroy(sim);
    return R.t[0];
}

static void test_exact_timings(void)
{
    struct pcie_params p;
    pcie_params_default(&p);
    double eff = (double)pcie_effective_rate_bps(&p); /* checked in test_rates */
    sim_time_t L = p.read_latency_ps;
    /* Read fetch rate: MRd j's data are ready L after it arrived plus the
     * fetch of requests 0..j, one after the other.  A 2 KiB read (4 MRds):
     * the last request's data at 24 B + L + 4 x F(512), then its 2 CplDs. */
    sim_time_t F512 = sim_bytes_to_ps(512, p.read_fetch_bps);
    CHECK_EQ_U64(one_op(&p, OP_READ, 2048, NULL), ser(24, eff) + L + 4 * F512 + 2 * ser(276, eff));
    /* 64 B: one request, fetched in F(64) */
    CHECK_EQ_U64(one_op(&p, OP_READ, 64, NULL),
                 ser(24, eff) + L + sim_bytes_to_ps(64, p.read_fetch_bps) + ser(84, eff));
    /* the rest of this test is the link's arithmetic without the fetch */
    p.read_fetch_bps = 0;

    /* 1 B write: one MWr of 25 B, then write latency */
    CHECK_EQ_U64(one_op(&p, OP_WRITE, 1, NULL), ser(25, eff) + p.write_latency_ps);
    /* 257 B write: 280 B + 25 B TLPs */
    CHECK_EQ_U64(one_op(&p, OP_WRITE, 257, NULL),
                 ser(280, eff) + ser(25, eff) + p.write_latency_ps);
    /* 8 B doorbell: 32 B down + MMIO latency */
    CHECK_EQ_U64(one_op(&p, OP_MMIO, 8, NULL), ser(32, eff) + p.mmio_latency_ps);
    /* 64 B read: MRd 24 B, latency, CplD 84 B */
    CHECK_EQ_U64(one_op(&p, OP_READ, 64, NULL), ser(24, eff) + L + ser(84, eff));
    /* 257 B read: one MRd, CplDs of 256 and 1 B */
    CHECK_EQ_U64(one_op(&p, OP_READ, 257, NULL), ser(24, eff) + L + ser(276, eff) + ser(21, eff));
    /* 4 KiB read: 8 MRds; the first's completions start at 24 B + L and the
     * 16 CplDs of 276 B then stream back to back (each request's data are
     * ready long before the down direction frees) */
    CHECK_EQ_U64(one_op(&p, OP_READ, 4096, NULL), ser(24, eff) + L + 16 * ser(276, eff));
    /* 513 B read: the second MRd carries 1 B; its completion (21 B) is ready
     * at 2x24 B + L, after the first's 2 CplDs?  2*ser(276) > ser(24), so it
     * follows them back to back */
    CHECK_EQ_U64(one_op(&p, OP_READ, 513, NULL),
                 ser(24, eff) + L + 2 * ser(276, eff) + ser(21, eff));

    /* An MRRS smaller than MPS (128 < 256): each request is one CplD; the
     * request spacing (24 B) is shorter than a 148 B completion, so the
     * completions still stream back to back. */
    struct pcie_params q = p;
    q.mrrs_bytes = 128;
    CHECK_EQ_U64(one_op(&q, OP_READ, 1024, NULL), ser(24, eff) + L + 8 * ser(148, eff));
    /* Completions smaller than requests: with MPS 4 (a 24 B completion per
     * 4 B, MRRS 4), 24 B MRd vs 24 B CplD: equal spacing, the last one is
     * ready exactly when the down direction frees. */
    q = p;
    q.mrrs_bytes = 4;
    q.mps_bytes = 4;
    q.cpld_hdr_bytes = 20;
    CHECK_EQ_U64(one_op(&q, OP_READ, 40, NULL), ser(24, eff) + L + 10 * ser(24, eff));
    /* Requests slower than completions (MRd 40 B, CplD 21 B): the down
     * direction waits for each request; done = last MRd + L + its CplD. */
    q = p;
    q.mrrs_bytes = 1;
    q.mps_bytes = 1;
    q.mwr_hdr_bytes = 40;
    CHECK_EQ_U64(one_op(&q, OP_READ, 5, NULL), 5 * ser(40, eff) + L + ser(21, eff));

    /* Events: with tags and credits unlimited a 1 MiB read is 2 events,
     * with free tags a 4 KiB read too; a write (any size) and an MMIO 1 */
    uint64_t ev = 0;
    q = p;
    q.tags = 0;
    q.fc_nph_credits = 0;
    one_op(&q, OP_READ, 1 << 20, &ev);
    CHECK_EQ_U64(ev, 2); /* first completion ready; done */
    one_op(&p, OP_READ, 4096, &ev);
    CHECK_EQ_U64(ev, 2);
    /* default tags (256) and NPH credits (72): each of the 2048 MRds past
     * the first 72 waits (a pump event and a group-ready event each), same
     * end time */
    sim_time_t t_lim = one_op(&p, OP_READ, 1 << 20, &ev);
    printf("1 MiB read, default tags/credits: %llu events\n", (unsigned long long)ev);
    CHECK(ev > 2 && ev <= 2 * 2048);
    CHECK_EQ_U64(t_lim, one_op(&q, OP_READ, 1 << 20, NULL));
    one_op(&p, OP_WRITE, 1 << 20, &ev);
    CHECK_EQ_U64(ev, 1);
    one_op(&p, OP_MMIO, 64, &ev);
    CHECK_EQ_U64(ev, 1);
}

/* ---------------------------------------------------------------- calibration */

static void test_calibration(void)
{
    struct pcie_params p;
    pcie_params_default(&p);
    /* default x16: 64 B read near the 546 ns pcie-bench median */
    sim_time_t t64 = one_op(&p, OP_READ, 64, NULL);
    CHECK_NEAR(sim_ps_to_ns(t64), 546.0, 10.0);

    /* the measurement link, Gen3 x8 (57.9 Gb/s): read_latency and the read
     * fetch rate were fitted to the 64 B and 2 KiB points (pcie.c); the
     * 256 B and 1 KiB points were not fitted and land within 1.5 %.  The
     * model values are those quoted in docs/pcie.md (so a change shows). */
    p.lanes = 8;
    p.dllp_overhead_permil = 81;
    static const struct {
        uint64_t bytes;
        double measured_ns, model_ns;
    } pts[] = {{64, 546, 545.9}, {256, 626, 623.0}, {1024, 853, 863.5}, {2048, 1133, 1132.9}};
    for (size_t i = 0; i < 4; i++) {
        double ns = sim_ps_to_ns(one_op(&p, OP_READ, pts[i].bytes, NULL));
        printf("read %5llu B on Gen3 x8: model %.1f ns, pcie-bench %.0f ns (%+.1f %%)\n",
               (unsigned long long)pts[i].bytes, ns, pts[i].measured_ns,
               100.0 * (ns - pts[i].measured_ns) / pts[i].measured_ns);
        CHECK_NEAR(ns, pts[i].model_ns, 0.5);
        CHECK_NEAR(ns, pts[i].measured_ns, 0.015 * pts[i].measured_ns);
    }
    /* A stream of reads (pcie_dma_read_chain_k) is fetched like one read:
     * two chained 1 KiB reads end when one 2 KiB read would. */
    struct sim *sim = sim_create(1);
    struct pcie_link *l = pcie_link_create(sim, "t.pcie", &p);
    sim_time_t chain = 0;
    rec_reset();
    pcie_dma_read_chain_k(l, PCIE_K_OTHER, 0, 1024, &chain, rec_done, (void *)(intptr_t)0, NULL);
    pcie_dma_read_chain_k(l, PCIE_K_OTHER, 0, 1024, &chain, rec_done, (void *)(intptr_t)1, NULL);
    CHECK(sim_run(sim, SIM_TIME_NEVER) == SIM_RUN_DONE);
    CHECK_NEAR(sim_ps_to_ns(R.t[1]), 1132.9, 1.0);
    pcie_link_destroy(l);
    sim_destroy(sim);
}

/* ---------------------------------------------------------------- read noise */

/* pcie-bench's LAT_DMA_RD: one read at a time, each issued when the last
 * completed; `n` latencies into lat[] (sorted). */
struct serial_reads {
    struct pcie_link *l;
    uint64_t bytes;
    sim_time_t t0, *lat;
    unsigned n, done;
};

static void serial_next(struct sim *sim, void *a, void *b)
{
    (void)b;
    struct serial_reads *s = a;
    if (s->t0 || s->done) /* a read completed */
        s->lat[s->done++] = sim_now(sim) - s->t0;
    if (s->done == s->n)
        return;
    s->t0 = sim_now(sim);
    pcie_dma_read_k(s->l, PCIE_K_OTHER, 0, s->bytes, serial_next, s, NULL);
}

static int cmp_time(const void *a, const void *b)
{
    sim_time_t x = *(const sim_time_t *)a, y = *(const sim_time_t *)b;
    return x < y ? -1 : x > y;
}

static void serial_run(const struct pcie_params *p, uint64_t seed, uint64_t bytes, sim_time_t *lat,
                       unsigned n)
{
    struct sim *sim = sim_create(seed);
    struct serial_reads s = {
        .l = pcie_link_create(sim, "t.pcie", p), .bytes = bytes, .lat = lat, .n = n};
    CHECK(s.l != NULL);
    sim_call_in(sim, 1, serial_next, &s, NULL);
    CHECK(sim_run(sim, SIM_TIME_NEVER) == SIM_RUN_DONE);
    CHECK(s.done == n);
    qsort(lat, n, sizeof(*lat), cmp_time);
    pcie_link_destroy(s.l);
    sim_destroy(sim);
}

static unsigned preset_index(const char *name)
{
    for (unsigned i = 0; noise_preset_names[i]; i++)
        if (strcmp(noise_preset_names[i], name) == 0)
            return i;
    return 0;
}

/* pcie.read_noise "pcie-read" on the measurement link (Gen3 x8): fitted to
 * pcie-bench's 64 B host-warm min / p50 / p99 (520 / 547 / 573 ns, Xeon
 * E5-2620 v3); its p99.9 (600 ns) and the 2 KiB reads' spread (p99 - p50
 * 13 ns, p99.9 - p50 26 ns) were not fitted.  Same seed: the same draws. */
static void test_read_noise(void)
{
    enum { N = 20000 };
    static sim_time_t a[N], b[N];
    struct pcie_params p;
    pcie_params_default(&p);
    p.lanes = 8;
    p.dllp_overhead_permil = 81;
    serial_run(&p, 7, 64, a, N); /* off: every read the same */
    CHECK_EQ_U64(a[0], a[N - 1]);
    CHECK(pcie_params_check(&p, (char[64]){0}, 64) == 0);

    p.read_noise = preset_index("pcie-read");
    CHECK(p.read_noise != 0);
    serial_run(&p, 7, 64, a, N);
    double p50 = sim_ps_to_ns(a[N / 2]), p99 = sim_ps_to_ns(a[N * 99 / 100]);
    double p999 = sim_ps_to_ns(a[N * 999 / 1000]), mn = sim_ps_to_ns(a[0]);
    printf("64 B reads with pcie-read: min %.0f p50 %.0f p99 %.0f p99.9 %.0f ns "
           "(pcie-bench 520 / 547 / 573 / 600)\n",
           mn, p50, p99, p999);
    CHECK_NEAR(p50, 546.0, 3.0);      /* the median stays the fitted one */
    CHECK(mn >= 546.0 - 27.0 - 1.0);  /* never more than `fast` below it */
    CHECK_NEAR(p99 - p50, 26.0, 4.0); /* fitted */
    CHECK_NEAR(p999, 600.0, 0.05 * 600.0);
    serial_run(&p, 7, 64, b, N); /* the same seed: byte-identical */
    CHECK(memcmp(a, b, sizeof(a)) == 0);
    serial_run(&p, 8, 64, b, N);
    CHECK(memcmp(a, b, sizeof(a)) != 0);

    serial_run(&p, 7, 2048, a, N); /* one draw per read: no wider at 2 KiB */
    double s99 = sim_ps_to_ns(a[N * 99 / 100] - a[N / 2]);
    printf("2 KiB reads: p50 %.0f ns, p99 - p50 %.0f ns (pcie-bench 1147, +13)\n",
           sim_ps_to_ns(a[N / 2]), s99);
    CHECK(s99 <= 30.0);

    char why[160];
    p.read_noise = preset_index("os-tick-250hz"); /* an interruption source */
    CHECK(pcie_params_check(&p, why, sizeof(why)) != 0);
    struct sim *sim = sim_create(1);
    CHECK(pcie_link_create(sim, "x", &p) == NULL);
    sim_destroy(sim);
}

/* ---------------------------------------------------------------- throughput */

static int n_reads_done;
static void count_done(struct sim *sim, void *a, void *b)
{
    (void)sim, (void)a, (void)b;
    n_reads_done++;
}

static void test_throughput(void)
{
    struct pcie_params p;
    pcie_params_default(&p);
    p.read_fetch_bps = 0; /* one long read: the link's limit (fetch: test_calibration) */
    double eff = (double)pcie_effective_rate_bps(&p);
    double bits = 8.0 * (1 << 20);

    /* one 1 MiB read: limited by CplD serialisation (256 of every 276 B) */
    double t = (double)one_op(&p, OP_READ, 1 << 20, NULL) / 1e12;
    double rate = bits / t;
    printf("1 MiB read: %.2f Gb/s (link payload limit %.2f)\n", rate / 1e9, eff * 256 / 276 / 1e9);
    CHECK(rate <= eff * 256 / 276);
    CHECK(rate > 0.99 * eff * 256 / 276);

    /* one 1 MiB write: 256 of every 280 B */
    t = (double)one_op(&p, OP_WRITE, 1 << 20, NULL) / 1e12;
    rate = bits / t;
    printf("1 MiB write: %.2f Gb/s (link payload limit %.2f)\n", rate / 1e9, eff * 256 / 280 / 1e9);
    CHECK(rate <= eff * 256 / 280);
    CHECK(rate > 0.99 * eff * 256 / 280);

    /* 64 reads of 4 KiB issued together: the down direction never idles
     * after the first completion: done = 24 B + L + 64*16 CplDs */
    struct sim *sim = sim_create(1);
    struct pcie_link *l = pcie_link_create(sim, "t.pcie", &p);
    rec_reset();
    for (int i = 0; i < 64; i++)
        pcie_dma_read(l, 4096, rec_done, (void *)(intptr_t)i, NULL);
    sim_run(sim, SIM_TIME_NEVER);
    CHECK_EQ_U64(R.n_done, 64);
    CHECK_EQ_U64(R.t[63], ser(24, eff) + p.read_latency_ps + 64 * 16 * ser(276, eff));
    CHECK_EQ_U64(R.t[0], ser(24, eff) + p.read_latency_ps + 16 * ser(276, eff));
    for (int i = 0; i < 64; i++)
        CHECK_EQ_U64(R.order[i], i);
    pcie_link_destroy(l);
    sim_destroy(sim);
    /* With the default read fetch rate (30.4 Gb/s per read), 256 reads of
     * 4 KiB in flight still reach the link's read rate: reads are fetched
     * in parallel and the gaps in one read's completions serve others. */
    pcie_params_default(&p);
    sim = sim_create(1);
    l = pcie_link_create(sim, "t.pcie", &p);
    n_reads_done = 0;
    for (int i = 0; i < 256; i++)
        pcie_dma_read(l, 4096, count_done, NULL, NULL);
    CHECK(sim_run(sim, SIM_TIME_NEVER) == SIM_RUN_DONE);
    CHECK_EQ_U64(n_reads_done, 256);
    double rate4k = 256.0 * 4096 * 8 / ((double)sim_now(sim) / 1e12);
    printf("256 x 4 KiB reads, fetch rate 30.4 Gb/s per read: %.2f Gb/s\n", rate4k / 1e9);
    CHECK(rate4k > 0.9 * eff * 256 / 276 && rate4k <= eff * 256 / 276);
    pcie_link_destroy(l);
    sim_destroy(sim);
}

/* ---------------------------------------------------------------- ordering */

static struct pcie_link *g_link;

static void issue_write_later(struct sim *sim, void *a, void *b)
{
    (void)sim;
    pcie_dma_write(g_link, (uint64_t)(uintptr_t)b, rec_done, a, NULL);
}

static void issue_mmio_later(struct sim *sim, void *a, void *b)
{
    (void)sim;
    pcie_mmio_write(g_link, (uint64_t)(uintptr_t)b, rec_done, a, NULL);
}

static void test_ordering(void)
{
    struct pcie_params p;
    pcie_params_default(&p);
    p.read_fetch_bps = 0; /* the link's ordering rules alone */
    double eff = (double)pcie_effective_rate_bps(&p);

    /* writes of mixed sizes, issued together and while earlier ones are in
     * flight, complete in issue order and at strictly increasing times */
    struct sim *sim = sim_create(1);
    g_link = pcie_link_create(sim, "t.pcie", &p);
    rec_reset();
    static const uint64_t sizes[] = {1 << 20, 8, 4096, 64, 0, 1, 256, 257};
    int n = 0;
    for (; n < 8; n++)
        pcie_dma_write(g_link, sizes[n], rec_done, (void *)(intptr_t)n, NULL);
    /* more, issued at 1 us and 50 us while the 1 MiB write is in flight */
    for (int k = 0; k < 4; k++, n++)
        sim_call_in(sim, (k < 2 ? 1 : 50) * SIM_US, issue_write_later, (void *)(intptr_t)n,
                    (void *)(uintptr_t)(k % 2 ? 64 : 8192));
    sim_run(sim, SIM_TIME_NEVER);
    CHECK_EQ_U64(R.n_done, n);
    for (int i = 0; i < n; i++)
        CHECK_EQ_U64(R.order[i], i);
    for (int i = 1; i < n; i++)
        CHECK(R.t[i] > R.t[i - 1]);
    /* the 8 B write right behind 1 MiB: waits for all 4096 TLPs */
    CHECK_EQ_U64(R.t[1], 4096 * ser(280, eff) + ser(32, eff) + p.write_latency_ps);
    pcie_link_destroy(g_link);
    sim_destroy(sim);

    /* a read issued after a write returns after the write is visible; with a
     * write latency longer than the read path, the read waits for it */
    struct pcie_params q = p;
    q.write_latency_ps = 5 * SIM_US;
    sim = sim_create(1);
    g_link = pcie_link_create(sim, "t.pcie", &q);
    rec_reset();
    pcie_dma_write(g_link, 64, rec_done, (void *)(intptr_t)0, NULL);
    pcie_dma_read(g_link, 64, rec_done, (void *)(intptr_t)1, NULL);
    sim_run(sim, SIM_TIME_NEVER);
    CHECK_EQ_U64(R.n_done, 2);
    CHECK_EQ_U64(R.order[0], 0);
    CHECK_EQ_U64(R.t[0], ser(88, eff) + q.write_latency_ps);
    CHECK_EQ_U64(R.t[1], R.t[0] + ser(84, eff));
    pcie_link_destroy(g_link);
    sim_destroy(sim);

    /* a doorbell issued while a 4 KiB read is outstanding is not held up by
     * completions that do not exist yet; one issued while they stream waits */
    sim = sim_create(1);
    g_link = pcie_link_create(sim, "t.pcie", &p);
    rec_reset();
    pcie_dma_read(g_link, 4096, rec_done, (void *)(intptr_t)0, NULL);
    sim_call_in(sim, 100 * SIM_NS, issue_mmio_later, (void *)(intptr_t)1, (void *)(uintptr_t)8);
    sim_time_t cpl_start = ser(24, eff) + p.read_latency_ps;
    sim_call_in(sim, cpl_start + 10 * SIM_NS, issue_mmio_later, (void *)(intptr_t)2,
                (void *)(uintptr_t)8);
    sim_run(sim, SIM_TIME_NEVER);
    CHECK_EQ_U64(R.n_done, 3);
    CHECK_EQ_U64(R.t[1], 100 * SIM_NS + ser(32, eff) + p.mmio_latency_ps);
    CHECK_EQ_U64(R.t[0], cpl_start + 16 * ser(276, eff));
    CHECK_EQ_U64(R.t[2], R.t[0] + ser(32, eff) + p.mmio_latency_ps);
    pcie_link_destroy(g_link);
    sim_destroy(sim);

    /* directions are independent: a 1 MiB write does not slow a 64 B MMIO */
    sim = sim_create(1);
    g_link = pcie_link_create(sim, "t.pcie", &p);
    rec_reset();
    pcie_dma_write(g_link, 1 << 20, rec_done, (void *)(intptr_t)0, NULL);
    pcie_mmio_write(g_link, 64, rec_done, (void *)(intptr_t)1, NULL);
    sim_run(sim, SIM_TIME_NEVER);
    CHECK_EQ_U64(R.t[1], ser(88, eff) + p.mmio_latency_ps);
    pcie_link_destroy(g_link);
    sim_destroy(sim);
}

int main(void)
{
    test_rates();
    test_counts();
    test_exact_timings();
    test_calibration();
    test_read_noise();
    test_throughput();
    test_ordering();
    return test_summary();
}
