/* Link impairments and failures: random loss at 1% and 10% within binomial
 * bounds, corruption counted apart from loss (dropped at the far end, after
 * the cable), per-seed determinism and independence of the streams,
 * probabilities 0 and 1, parameter checks, and a link going down and up
 * (queue flushed, cable contents lost, a self-pacing sender kept running,
 * delivery resuming). */
#include <math.h>
#include <stdlib.h>

#include "sim/fabric/fabric.h"
#include "sim/trace.h"
#include "test.h"

#define RATE_100G 100000000000ull
#define FRAME 1066 /* 1086 B on the wire: 86.88 ns at 100 Gb/s */
#define SER_PS 86880

struct sink_log {
    uint64_t n;
    uint64_t hash; /* order-sensitive hash of the delivered ids */
    uint64_t last_id;
    bool in_order;
    sim_time_t last_t;
};

static void sink_rx(struct sim *sim, void *ctx, struct pkt *p)
{
    struct sink_log *s = ctx;
    if (s->n && p->id <= s->last_id)
        s->in_order = false;
    s->last_id = p->id;
    s->hash = (s->hash ^ p->id) * 0x100000001b3ull;
    s->n++;
    s->last_t = sim_now(sim);
}

struct rig {
    struct sim *sim;
    struct pkt_pool *pool;
    struct link *l;
    struct sink_log log;
    uint64_t next_id;
};

static void rig_init(struct rig *r, uint64_t seed, const char *name, double loss, double corrupt)
{
    memset(r, 0, sizeof(*r));
    r->sim = sim_create(seed);
    r->pool = pkt_pool_create();
    struct link_params lp = {.rate_bps = RATE_100G,
                             .delay_ps = SIM_US,
                             .queue_bytes = 0,
                             .loss_prob = loss,
                             .corrupt_prob = corrupt};
    r->l = link_create(r->sim, name, &lp, r->pool);
    r->log.in_order = true;
    link_connect(r->l, (struct fabric_sink){.rx = sink_rx, .ctx = &r->log});
}

static void rig_fini(struct rig *r)
{
    link_destroy(r->l);
    pkt_pool_destroy(r->pool);
    sim_destroy(r->sim);
}

static void rig_send(struct rig *r, unsigned n)
{
    for (unsigned i = 0; i < n; i++) {
        struct pkt *p = pkt_alloc(r->pool);
        p->frame_bytes = FRAME;
        p->id = ++r->next_id;
        link_send(r->l, p);
    }
}

/* |x - n p| <= 5 sigma of Binomial(n, p): fails with probability < 1e-6
 * for a correct model, while a rate off by 10% is caught at these n. */
static bool binomial_ok(uint64_t x, uint64_t n, double p)
{
    double mean = (double)n * p, sd = sqrt((double)n * p * (1.0 - p));
    return fabs((double)x - mean) <= 5.0 * sd;
}

static void test_loss_rates(void)
{
    const unsigned n = 100000;
    const double probs[] = {0.01, 0.10};
    for (int k = 0; k < 2; k++) {
        for (uint64_t seed = 1; seed <= 3; seed++) {
            struct rig r;
            rig_init(&r, seed, "a->b", probs[k], 0.0);
            rig_send(&r, n);
            sim_run(r.sim, SIM_TIME_NEVER);
            const struct link_counters *c = link_get_counters(r.l);
            CHECK(binomial_ok(c->pkts_lost, n, probs[k]));
            CHECK_EQ_U64(c->pkts_lost + r.log.n, n);
            CHECK_EQ_U64(c->pkts_dropped, c->pkts_lost);
            CHECK_EQ_U64(c->bytes_dropped, c->pkts_lost * (FRAME + 20));
            CHECK_EQ_U64(c->pkts_corrupted, 0);
            CHECK_EQ_U64(c->pkts_dropped_overflow + c->pkts_dropped_down, 0);
            /* a lost frame occupied the wire: every frame was sent */
            CHECK_EQ_U64(c->pkts_sent, n);
            CHECK_EQ_U64(c->busy_ps, (uint64_t)n * SER_PS);
            CHECK(r.log.in_order);
            if (seed == 1)
                printf("loss %.0f%%: %" PRIu64 " of %u lost (expected %.0f +- %.0f)\n",
                       probs[k] * 100, c->pkts_lost, n, n * probs[k],
                       5 * sqrt(n * probs[k] * (1 - probs[k])));
            rig_fini(&r);
        }
    }
}

static void test_corruption(void)
{
    const unsigned n = 100000;
    struct rig r;
    rig_init(&r, 7, "a->b", 0.02, 0.05);
    /* every drop is also an event-trace record naming its reason */
    CHECK(sim_trace_enable(r.sim, 1u << 16) == 0);
    rig_send(&r, n);
    sim_run(r.sim, SIM_TIME_NEVER);
    const struct link_counters *c = link_get_counters(r.l);
    CHECK(binomial_ok(c->pkts_lost, n, 0.02));
    /* corruption is drawn for the frames that were not lost */
    CHECK(binomial_ok(c->pkts_corrupted, n - c->pkts_lost, 0.05));
    CHECK_EQ_U64(r.log.n + c->pkts_lost + c->pkts_corrupted, n);
    CHECK_EQ_U64(c->pkts_dropped, c->pkts_lost + c->pkts_corrupted);
    /* drop records name the reason */
    uint64_t lost_rec = 0, corrupt_rec = 0;
    for (size_t i = 0; i < sim_trace_count(r.sim); i++) {
        const struct trace_rec *t = sim_trace_get(r.sim, i);
        if (t->kind != TRACE_PKT_DROP)
            continue;
        lost_rec += strstr(t->where, "loss") != NULL;
        corrupt_rec += strstr(t->where, "ICRC") != NULL;
    }
    CHECK_EQ_U64(lost_rec + corrupt_rec, c->pkts_lost + c->pkts_corrupted);
    CHECK(lost_rec > 0 && corrupt_rec > 0);
    rig_fini(&r);

    /* a corrupted frame crosses the cable before it is dropped: with
     * probability 1 the last drop happens at send + serialisation + delay */
    rig_init(&r, 7, "a->b", 0.0, 1.0);
    rig_send(&r, 1);
    sim_run(r.sim, SIM_TIME_NEVER);
    CHECK_EQ_U64(link_get_counters(r.l)->pkts_corrupted, 1);
    CHECK_EQ_U64(sim_now(r.sim), SER_PS + SIM_US);
    CHECK_EQ_U64(r.log.n, 0);
    rig_fini(&r);
    /* a lost frame vanishes when it leaves the serialiser */
    rig_init(&r, 7, "a->b", 1.0, 0.0);
    rig_send(&r, 1);
    sim_run(r.sim, SIM_TIME_NEVER);
    CHECK_EQ_U64(link_get_counters(r.l)->pkts_lost, 1);
    CHECK_EQ_U64(sim_now(r.sim), SER_PS);
    rig_fini(&r);
}

static void test_determinism(void)
{
    uint64_t h[3], lost[3];
    uint64_t seeds[3] = {5, 5, 6};
    for (int i = 0; i < 3; i++) {
        struct rig r;
        rig_init(&r, seeds[i], "node0->sw0", 0.1, 0.01);
        rig_send(&r, 20000);
        sim_run(r.sim, SIM_TIME_NEVER);
        h[i] = r.log.hash;
        lost[i] = link_get_counters(r.l)->pkts_lost;
        rig_fini(&r);
    }
    CHECK_EQ_U64(h[0], h[1]); /* same seed: the same frames dropped */
    CHECK_EQ_U64(lost[0], lost[1]);
    CHECK(h[0] != h[2]); /* another seed: other frames */

    /* the stream is the link's own: another link's traffic in the same
     * simulation does not change which frames this one drops */
    struct rig r;
    rig_init(&r, 5, "node0->sw0", 0.1, 0.01);
    struct link_params lp = {.rate_bps = RATE_100G, .loss_prob = 0.5};
    struct link *other = link_create(r.sim, "other", &lp, r.pool);
    for (int k = 0; k < 5000; k++) {
        struct pkt *p = pkt_alloc(r.pool);
        p->frame_bytes = 100;
        link_send(other, p);
    }
    rig_send(&r, 20000);
    sim_run(r.sim, SIM_TIME_NEVER);
    CHECK_EQ_U64(r.log.hash, h[0]);
    link_destroy(other);
    rig_fini(&r);

    /* probability 0 never draws (and so never drops) */
    rig_init(&r, 5, "a->b", 0.0, 0.0);
    rig_send(&r, 1000);
    sim_run(r.sim, SIM_TIME_NEVER);
    CHECK_EQ_U64(r.log.n, 1000);
    CHECK_EQ_U64(link_get_counters(r.l)->pkts_dropped, 0);
    rig_fini(&r);
}

static void test_params(void)
{
    struct sim *sim = sim_create(1);
    struct pkt_pool *pool = pkt_pool_create();
    struct link_params lp = {.rate_bps = RATE_100G, .loss_prob = 1.5};
    CHECK(link_create(sim, "bad", &lp, pool) == NULL);
    lp.loss_prob = -0.1;
    CHECK(link_create(sim, "bad", &lp, pool) == NULL);
    lp.loss_prob = (double)NAN;
    CHECK(link_create(sim, "bad", &lp, pool) == NULL);
    lp.loss_prob = 0.0;
    lp.corrupt_prob = 2.0;
    CHECK(link_create(sim, "bad", &lp, pool) == NULL);
    lp.corrupt_prob = 1.0;
    struct link *l = link_create(sim, "ok", &lp, pool);
    CHECK(l != NULL);
    CHECK(link_get_params(l)->corrupt_prob == 1.0);
    struct link_params np = lp;
    np.rate_bps = 0;
    CHECK(link_set_params(l, &np) == -1);
    np.rate_bps = 10000000000ull;
    np.corrupt_prob = 0.0;
    np.delay_ps = 7 * SIM_NS;
    CHECK(link_set_params(l, &np) == 0);
    CHECK_EQ_U64(link_get_params(l)->rate_bps, 10000000000ull);
    struct sink_log log = {.in_order = true};
    link_connect(l, (struct fabric_sink){.rx = sink_rx, .ctx = &log});
    struct pkt *p = pkt_alloc(pool);
    p->frame_bytes = 105; /* 125 B at 10 Gb/s = 100 ns */
    link_send(l, p);
    sim_run(sim, SIM_TIME_NEVER);
    CHECK_EQ_U64(log.n, 1);
    CHECK_EQ_U64(log.last_t, 107 * SIM_NS);
    link_destroy(l);
    pkt_pool_destroy(pool);
    sim_destroy(sim);
}

/* A sender that keeps the link busy through the idle hook, one frame at a
 * time (like the NIC), while the link fails and recovers. */
struct pacer {
    struct rig *r;
    unsigned left;
    uint64_t idle_calls;
};

static void pacer_idle(struct sim *sim, void *a, void *b)
{
    (void)sim;
    (void)b;
    struct pacer *pc = a;
    pc->idle_calls++;
    if (pc->left) {
        pc->left--;
        rig_send(pc->r, 1);
        link_want_idle(pc->r->l); /* and asks for the next transition */
    }
}

static void test_link_down_up(void)
{
    struct rig r;
    rig_init(&r, 1, "a->b", 0.0, 0.0);
    /* 10 frames queued at t=0; 1 us of cable holds ~11 frames.  At 500 ns
     * frames 1..5 are in the cable, 6 on the wire, 7..10 queued. */
    rig_send(&r, 10);
    sim_run(r.sim, 500 * SIM_NS);
    CHECK(link_is_up(r.l));
    link_set_up(r.l, false);
    CHECK(!link_is_up(r.l));
    const struct link_counters *c = link_get_counters(r.l);
    CHECK_EQ_U64(c->pkts_dropped_down, 4);            /* the queue, at once */
    CHECK_EQ_U64(link_queued_bytes(r.l), FRAME + 20); /* the frame on the wire */
    sim_run(r.sim, SIM_TIME_NEVER);
    CHECK_EQ_U64(r.log.n, 0); /* the cable's contents are lost */
    CHECK_EQ_U64(c->pkts_dropped_down, 10);
    CHECK_EQ_U64(c->pkts_sent, 5); /* frames 1..5 had left */
    CHECK_EQ_U64(c->pkts_dropped, 10);
    CHECK(link_idle(r.l));

    /* while down, a self-pacing sender keeps going (the link serialises
     * into the void and calls the idle hook), nothing arrives */
    struct pacer pc = {.r = &r, .left = 99};
    link_set_idle_hook(r.l, pacer_idle, &pc, NULL);
    sim_time_t t0 = sim_now(r.sim);
    rig_send(&r, 1);
    CHECK(link_want_idle(r.l));
    sim_run(r.sim, t0 + 50 * SER_PS + 1);
    CHECK(pc.idle_calls >= 49);
    CHECK_EQ_U64(r.log.n, 0);
    /* up again: frames sent from now on arrive, those in the cable from
     * before do not exist (sent while down they never entered it) */
    link_set_up(r.l, true);
    sim_run(r.sim, SIM_TIME_NEVER);
    CHECK_EQ_U64(pc.left, 0);
    CHECK_EQ_U64(r.log.n + c->pkts_dropped_down, 110);
    CHECK(r.log.n >= 49 && r.log.n <= 51);
    CHECK(r.log.in_order);
    rig_fini(&r);

    /* a frame in the cable during a short outage is lost even if the link
     * is up again when it would have arrived */
    rig_init(&r, 1, "a->b", 0.0, 0.0);
    rig_send(&r, 1);
    sim_run(r.sim, SER_PS + 100 * SIM_NS);
    link_set_up(r.l, false);
    link_set_up(r.l, true);
    sim_run(r.sim, SIM_TIME_NEVER);
    CHECK_EQ_U64(r.log.n, 0);
    CHECK_EQ_U64(link_get_counters(r.l)->pkts_dropped_down, 1);
    rig_fini(&r);
}

int main(void)
{
    test_loss_rates();
    test_corruption();
    test_determinism();
    test_params();
    test_link_down_up();
    return test_summary();
}
