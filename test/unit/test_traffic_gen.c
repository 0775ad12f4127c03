/* The traffic generator's distributions (sim/traffic/flowsize.c): sampled
 * flow sizes follow each CDF (at every table point the empirical CDF is
 * within 5 sigma of the table's, sizes being whole bytes), their mean is the table's
 * (within 5 standard errors; web search, FB Hadoop, VL2 data mining); and Poisson
 * arrivals of a real run on a star (payload: none) come at the rate the
 * load asks, with exponential gaps (coefficient of variation ~1), every
 * flow finishing with a slowdown >= 1. */
#include <math.h>
#include <stdlib.h>

#include "sim/traffic/traffic.h"
#include "test.h"

static void test_cdf(enum flowsize_dist d)
{
    struct sim_rng rng;
    sim_rng_seed(&rng, 42, flowsize_dist_names[d]);
    const int n = 200000;
    size_t np;
    const struct flowsize_point *t = flowsize_table(d, &np);
    uint64_t *below = calloc(np, sizeof(*below));
    double sum = 0;
    for (int i = 0; i < n; i++) {
        uint64_t s = flowsize_sample(d, 0, &rng);
        sum += (double)s;
        for (size_t k = 0; k < np; k++)
            below[k] += s <= t[k].bytes;
    }
    double worst = 0;
    for (size_t k = 1; k < np; k++) {
        /* sizes are rounded to whole bytes: P(size <= b) = F(b + 1/2) */
        double emp = (double)below[k] / n;
        double p = (flowsize_cdf(d, 0, t[k].bytes) + flowsize_cdf(d, 0, t[k].bytes + 1)) / 2;
        double sd = sqrt(p * (1 - p) / n) + 1e-9;
        double z = fabs(emp - p) / sd;
        worst = z > worst ? z : worst;
        CHECK(p >= 1.0 ? emp == 1.0 : z <= 5);
    }
    /* the sample mean within 5 standard errors of the table's mean (a
     * segment is uniform between its points: E[X^2] = dF (a^2 + ab + b^2) / 3;
     * data-mining's 1 % of flows between 97 and 973 MB make it ~2 %) */
    double m2 = 0;
    for (size_t k = 1; k < np; k++) {
        double a = (double)t[k - 1].bytes, b = (double)t[k].bytes;
        m2 += (t[k].cdf - t[k - 1].cdf) * (a * a + a * b + b * b) / 3;
    }
    double mean = sum / n, want = flowsize_mean(d, 0), se = sqrt((m2 - want * want) / n);
    printf("%s: %d samples, worst CDF deviation %.2f sd, mean %.0f B (table %.0f B, %.2f se)\n",
           flowsize_dist_names[d], n, worst, mean, want, fabs(mean - want) / se);
    CHECK(fabs(mean - want) <= 5 * se);
    CHECK_EQ_U64(flowsize_max(d, 0), t[np - 1].bytes);
    free(below);
}

static void test_poisson_run(void)
{
    struct sim *sim = sim_create(9);
    struct pkt_pool *pool = pkt_pool_create_headers_only();
    struct topo_params tp;
    fabric_defaults(&tp);
    tp.n_nodes = 8;
    struct topology *topo = topo_create(sim, &tp, pool);
    struct host hosts[8];
    struct pcie_link *pcie[8];
    struct nic *nics[8];
    struct host_cpu_params cpu;
    host_cpu_params_default(&cpu);
    struct pcie_params pp;
    pcie_params_default(&pp);
    struct nic_params np;
    nic_params_default(&np);
    for (uint32_t i = 0; i < 8; i++) {
        host_init(&hosts[i], sim, i, "h", &cpu);
        pcie[i] = pcie_link_create(sim, "pcie", &pp);
        nics[i] = nic_create(sim, &hosts[i], i, &np, pcie[i], pool);
        hosts[i].nic = nics[i];
        nic_attach_uplink(nics[i], topo_uplink(topo, i));
        topo_attach(topo, i, nic_sink(nics[i]));
    }
    struct traffic_params p;
    traffic_params_default(&p);
    p.pattern = TRAFFIC_POISSON;
    p.sizes = FLOWSIZE_FB_HADOOP;
    p.load = 0.3;
    p.duration_ps = 2 * SIM_MS;
    char why[256];
    struct traffic *t = traffic_create(sim, nics, 8, topo, &p, why, sizeof(why));
    CHECK(t != NULL);
    if (!t)
        return;
    traffic_start(t, NULL, NULL, NULL);
    sim_run(sim, SIM_TIME_NEVER);
    size_t n;
    const struct traffic_flow *f = traffic_flows(t, &n);
    /* expected: per host load x 100 Gb/s / (8 x mean size) flows per second */
    double rate = 0.3 * 100e9 / (8.0 * flowsize_mean(FLOWSIZE_FB_HADOOP, 0));
    double want = rate * 2e-3 * 8;
    double gaps = 0, gaps2 = 0;
    uint64_t ng = 0;
    for (uint32_t h = 0; h < 8; h++) {
        sim_time_t last = 0;
        for (size_t i = 0; i < n; i++) {
            if (f[i].src != h)
                continue;
            if (last) {
                double g = (double)(f[i].start_ps - last);
                gaps += g;
                gaps2 += g * g;
                ng++;
            }
            last = f[i].start_ps;
        }
    }
    double mg = gaps / (double)ng, cv = sqrt(gaps2 / (double)ng - mg * mg) / mg;
    struct traffic_stats st;
    traffic_stats(t, &st);
    printf("poisson: %zu flows in 2 ms (expected %.0f), mean gap %.2f us (expected %.2f), CV %.2f, "
           "slowdown p50 %.2f p99 %.2f\n",
           n, want, mg / 1e6, 1e6 / rate, cv, st.bucket[TRAFFIC_BUCKETS].slow_p50,
           st.bucket[TRAFFIC_BUCKETS].slow_p99);
    CHECK(fabs((double)n - want) <= 5 * sqrt(want));
    CHECK(fabs(cv - 1.0) < 0.15);
    CHECK_EQ_U64(traffic_unfinished(t), 0);
    CHECK_EQ_U64(st.failed, 0);
    for (size_t i = 0; i < n; i++)
        CHECK(f[i].end_ps > f[i].start_ps && f[i].end_ps - f[i].start_ps >= f[i].ideal_ps);
    traffic_destroy(t);
    for (uint32_t i = 0; i < 8; i++) {
        nic_destroy(nics[i]);
        pcie_link_destroy(pcie[i]);
    }
    topo_destroy(topo);
    sim_destroy(sim);
    pkt_pool_destroy(pool);
}

int main(void)
{
    test_cdf(FLOWSIZE_WEB_SEARCH);
    test_cdf(FLOWSIZE_FB_HADOOP);
    test_cdf(FLOWSIZE_DATA_MINING);
    /* data mining as pFabric tabulates it: half the flows one 1460 B
     * packet, mean 5117 packets (its scripts' meanFlowSize = 5117 * 1460) */
    CHECK(flowsize_cdf(FLOWSIZE_DATA_MINING, 0, 1459) == 0.0);
    CHECK(flowsize_cdf(FLOWSIZE_DATA_MINING, 0, 1460) == 0.5);
    CHECK(fabs(flowsize_mean(FLOWSIZE_DATA_MINING, 0) / 1460 - 5117) < 1);
    test_poisson_run();
    return test_summary();
}
