/* A 64 B RDMA WRITE stream on one QP, posted in lists of 64 (every 64th
 * WR signalled) and refilled from the completion callback, the way
 * perftest's ib_write_bw runs with a post list.
 *
 * Checks the simulated message rate against the per-QP send-engine limit
 * (1 / wqe_proc_ps = 7.5 M/s with the defaults: CALIBRATION.md, NICs "one
 * QP ... with post lists of 128, ~7.5 M/s"), then against the receiver's
 * processing units when they are the bottleneck (pus / rx_pkt_proc_ps),
 * and reports how fast the
 * simulator runs (simulated packets per second of wall time; docs/nic.md
 * quotes a Release-build figure). */
#include <stdio.h>
#include <time.h>

#include "nic_harness.h"
#include "test.h"

enum { DEPTH = 1024, BATCH = 64, MSG = 64 };

struct drv {
    struct nh_ep *a, *b;
    uint64_t posted, completed, target, post_errors, bad_cqes;
    sim_time_t t_first_cqe, t_last_cqe;
    uint64_t completed_at_first;
};

static void refill(struct drv *d)
{
    struct nic_qp *qp = d->a->qp;
    while (d->posted < d->target && qp->sq_tail - qp->sq_comp + BATCH <= DEPTH) {
        for (unsigned i = 0; i < BATCH; i++) {
            d->posted++;
            unsigned flags = d->posted % BATCH == 0 ? IBV_SEND_SIGNALED : 0;
            size_t off = (d->posted % 1024) * MSG;
            if (nh_append(d->a, IBV_WR_RDMA_WRITE, d->posted, off, MSG, d->b, off, flags))
                d->post_errors++;
        }
        nic_sq_doorbell(qp); /* one doorbell per post list */
    }
}

static void on_cqe(struct sim *sim, void *a, void *b)
{
    (void)b;
    struct drv *d = a;
    struct ibv_wc wc[16];
    int n;
    while ((n = nic_cq_poll(d->a->scq, 16, wc)) > 0) {
        for (int i = 0; i < n; i++) {
            if (wc[i].status != IBV_WC_SUCCESS)
                d->bad_cqes++;
            d->completed += BATCH;
        }
    }
    if (!d->t_first_cqe) {
        d->t_first_cqe = sim_now(sim);
        d->completed_at_first = d->completed;
    }
    d->t_last_cqe = sim_now(sim);
    refill(d);
    nic_cq_arm(d->a->scq, false);
}

/* Stream `target` WRITEs with NIC parameters `np`; returns the steady
 * message rate (per second of simulated time). */
static double run_stream(const struct nic_params *np, uint64_t target, bool report)
{
    struct nh *h = nh_create(np);
    struct nh_ep a, b;
    nh_ep_open(h, 0, &a, 1 << 20, DEPTH, 4096);
    nh_ep_open(h, 1, &b, 1 << 20, DEPTH, 4096);
    struct nh_conn c;
    nh_conn_default(&c);
    nh_ep_connect(&a, &b, &c);
    nh_ep_connect(&b, &a, &c);

    struct drv d = {.a = &a, .b = &b, .target = target};
    nic_cq_set_notify(a.scq, on_cqe, &d, NULL);
    nic_cq_arm(a.scq, false);
    refill(&d);

    struct timespec w0, w1;
    clock_gettime(CLOCK_MONOTONIC, &w0);
    enum sim_run_result r = sim_run(h->sim, 10 * SIM_S);
    clock_gettime(CLOCK_MONOTONIC, &w1);
    double wall_s = (double)(w1.tv_sec - w0.tv_sec) + (double)(w1.tv_nsec - w0.tv_nsec) * 1e-9;

    CHECK_EQ_U64(r, SIM_RUN_DONE);
    CHECK_EQ_U64(d.completed, d.target);
    CHECK_EQ_U64(d.post_errors, 0);
    CHECK_EQ_U64(d.bad_cqes, 0);
    /* every byte of the last window landed */
    CHECK(memcmp(a.buf, b.buf, 1024 * MSG) == 0);

    const struct nic_counters *ca = nic_get_counters(h->nic[0]);
    const struct nic_counters *cb = nic_get_counters(h->nic[1]);
    uint64_t pkts = ca->pkts_tx + cb->pkts_tx;
    double sim_s = (double)(d.t_last_cqe - d.t_first_cqe) * 1e-12;
    double rate = (double)(d.completed - d.completed_at_first) / sim_s;
    CHECK_EQ_U64(ca->pkts_tx, d.target);
    if (report)
        printf("simulated %" PRIu64 " packets (%" PRIu64 " data + %" PRIu64 " ACKs), %" PRIu64
               " events in %.3f s wall: %.2f M packets/s, %.2f M events/s\n",
               pkts, ca->pkts_tx, cb->pkts_tx, sim_events_executed(h->sim), wall_s,
               (double)pkts / wall_s / 1e6, (double)sim_events_executed(h->sim) / wall_s / 1e6);
    nh_ep_close(&a);
    nh_ep_close(&b);
    nh_destroy(h);
    return rate;
}

int main(void)
{
    struct nic_params np;
    nic_params_default(&np);
    double rate = run_stream(&np, 400000, true);
    double limit = 1e12 / (double)np.wqe_proc_ps;
    printf("64 B WRITE, one QP, post lists of %d: %.2f M msg/s simulated (send engine limit "
           "%.2f M/s); %.2f Gb/s of payload\n",
           BATCH, rate / 1e6, limit / 1e6, rate * MSG * 8 / 1e9);
    CHECK(rate > 0.9 * limit && rate <= 1.01 * limit);

    /* The receiver's processing units set the rate when they are fewer or
     * slower: 2 units x 800 ns = 2.5 M packets/s, below the send engine's
     * 7.5 M/s. */
    np.pus = 2;
    np.rx_pkt_proc_ps = 800 * SIM_NS;
    double slow = run_stream(&np, 40000, false);
    double rx_limit = 2e12 / (double)np.rx_pkt_proc_ps;
    printf("with 2 processing units of 800 ns: %.2f M msg/s (receive limit %.2f M/s)\n", slow / 1e6,
           rx_limit / 1e6);
    CHECK(slow > 0.9 * rx_limit && slow <= 1.01 * rx_limit);
    return test_summary();
}
