/* Fabric link: exact serialisation + propagation of single frames, burst
 * rate, FIFO order, drop-tail by bytes, the idle hook (once per transition,
 * and a sender pacing itself on it), and the counters.  Expected times are
 * computed here from the Ethernet facts (frame + 20 B preamble/SFD/IFG). */
#include <stdlib.h>

#include "sim/fabric/fabric.h"
#include "test.h"

#define RATE_100G 100000000000ull

struct rx_log {
    uint64_t n;
    uint64_t ids[4096];
    sim_time_t t[4096];
};

static void rx_record(struct sim *sim, void *ctx, struct pkt *p)
{
    struct rx_log *log = ctx;
    if (log->n < 4096) {
        log->ids[log->n] = p->id;
        log->t[log->n] = sim_now(sim);
    }
    log->n++;
    /* the test's packets are freed by the pool at the end */
}

static struct pkt *mk(struct pkt_pool *pool, uint32_t frame_bytes, uint64_t id)
{
    struct pkt *p = pkt_alloc(pool);
    p->frame_bytes = frame_bytes;
    p->id = id;
    return p;
}

struct fixture {
    struct sim *sim;
    struct pkt_pool *pool;
    struct link *l;
    struct rx_log log;
};

static void fx_init(struct fixture *f, uint64_t rate, sim_time_t delay, uint64_t queue_bytes)
{
    memset(f, 0, sizeof(*f));
    f->sim = sim_create(1);
    f->pool = pkt_pool_create();
    struct link_params lp = {.rate_bps = rate, .delay_ps = delay, .queue_bytes = queue_bytes};
    f->l = link_create(f->sim, "a->b", &lp, f->pool);
    link_connect(f->l, (struct fabric_sink){.rx = rx_record, .ctx = &f->log});
}

static void fx_fini(struct fixture *f)
{
    link_destroy(f->l);
    pkt_pool_destroy(f->pool);
    sim_destroy(f->sim);
}

static void test_single_frame(void)
{
    /* 1066 B frame + 20 B = 1086 B on the wire; at 100 Gb/s that is
     * 1086 * 8 / 100e9 s = 86.88 ns; then 5 ns of cable */
    struct fixture f;
    fx_init(&f, RATE_100G, 5 * SIM_NS, 0);
    CHECK_STR_CONTAINS(link_name(f.l), "a->b");
    CHECK(link_idle(f.l));
    CHECK(link_send(f.l, mk(f.pool, 1066, 7)));
    CHECK(!link_idle(f.l));
    CHECK_EQ_U64(link_queued_bytes(f.l), 1086);
    CHECK(sim_run(f.sim, SIM_TIME_NEVER) == SIM_RUN_DONE);
    CHECK_EQ_U64(f.log.n, 1);
    CHECK_EQ_U64(f.log.ids[0], 7);
    CHECK_EQ_U64(f.log.t[0], 86880 + 5000);
    CHECK(link_idle(f.l));
    CHECK_EQ_U64(link_queued_bytes(f.l), 0);
    const struct link_counters *c = link_get_counters(f.l);
    CHECK_EQ_U64(c->pkts_sent, 1);
    CHECK_EQ_U64(c->bytes_sent, 1086);
    CHECK_EQ_U64(c->busy_ps, 86880);
    CHECK_EQ_U64(c->pkts_dropped, 0);
    CHECK_EQ_U64(c->max_queue_bytes, 1086);
    /* events: one, the arrival; nothing depends on the instant the last
     * bit left (its end is processed lazily, link.c) */
    CHECK_EQ_U64(sim_events_executed(f.sim), 1);
    fx_fini(&f);

    /* a minimum frame (64 B -> 84 B on the wire) at 25 Gb/s, no delay:
     * 84 * 8 / 25e9 = 26.88 ns */
    fx_init(&f, 25000000000ull, 0, 0);
    CHECK(link_send(f.l, mk(f.pool, 64, 1)));
    sim_run(f.sim, SIM_TIME_NEVER);
    CHECK_EQ_U64(f.log.t[0], 26880);
    fx_fini(&f);

    /* rounding: a 61 B wire frame at 3 Gb/s = 162.666 ns -> 162667 ps */
    fx_init(&f, 3000000000ull, 1, 0);
    CHECK(link_send(f.l, mk(f.pool, 41, 1)));
    sim_run(f.sim, SIM_TIME_NEVER);
    CHECK_EQ_U64(f.log.t[0], 162667 + 1);
    fx_fini(&f);
}

static void test_burst(void)
{
    /* 1000 frames enqueued at t = 0 leave back to back: frame k arrives at
     * (k+1) * 86.88 ns + 5 ns, in order; the wire runs at exactly 100 Gb/s */
    struct fixture f;
    fx_init(&f, RATE_100G, 5 * SIM_NS, 0);
    const unsigned n = 1000;
    for (unsigned k = 0; k < n; k++)
        CHECK(link_send(f.l, mk(f.pool, 1066, k)));
    CHECK_EQ_U64(link_queued_bytes(f.l), (uint64_t)n * 1086);
    sim_run(f.sim, SIM_TIME_NEVER);
    CHECK_EQ_U64(f.log.n, n);
    unsigned bad_order = 0, bad_time = 0;
    for (unsigned k = 0; k < n; k++) {
        bad_order += f.log.ids[k] != k;
        bad_time += f.log.t[k] != (sim_time_t)(k + 1) * 86880 + 5000;
    }
    CHECK_EQ_U64(bad_order, 0);
    CHECK_EQ_U64(bad_time, 0);
    double secs = (double)(f.log.t[n - 1] - 5000) / 1e12;
    double gbps = (double)n * 1086 * 8 / secs / 1e9;
    CHECK(gbps > 99.999 && gbps < 100.001);
    const struct link_counters *c = link_get_counters(f.l);
    CHECK_EQ_U64(c->pkts_sent, n);
    CHECK_EQ_U64(c->bytes_sent, (uint64_t)n * 1086);
    CHECK_EQ_U64(c->busy_ps, (uint64_t)n * 86880);
    CHECK_EQ_U64(c->max_queue_bytes, (uint64_t)n * 1086);
    /* O(1) events per frame: its arrival, and its end when a frame waits
     * behind it (all but the last) */
    CHECK_EQ_U64(sim_events_executed(f.sim), 2 * n - 1);
    fx_fini(&f);

    /* a long cable holds many frames at once (pipe ring grows): 10 us of
     * delay = ~115 frames in flight */
    fx_init(&f, RATE_100G, 10 * SIM_US, 0);
    for (unsigned k = 0; k < 300; k++)
        link_send(f.l, mk(f.pool, 1066, k));
    sim_run(f.sim, SIM_TIME_NEVER);
    CHECK_EQ_U64(f.log.n, 300);
    CHECK_EQ_U64(f.log.ids[299], 299);
    CHECK_EQ_U64(f.log.t[299], 300ull * 86880 + 10 * SIM_US);
    fx_fini(&f);
}

static void test_drop_tail(void)
{
    /* 3 frames fit (3 * 1086 = 3258 <= 3500), the 4th and 5th do not; the
     * frame being serialised counts */
    struct fixture f;
    fx_init(&f, RATE_100G, 5 * SIM_NS, 3500);
    for (unsigned k = 0; k < 3; k++)
        CHECK(link_send(f.l, mk(f.pool, 1066, k)));
    CHECK(!link_send(f.l, mk(f.pool, 1066, 3)));
    CHECK(!link_send(f.l, mk(f.pool, 1066, 4)));
    /* a small frame still fits: 3258 + 84 <= 3500 */
    CHECK(link_send(f.l, mk(f.pool, 64, 5)));
    const struct link_counters *c = link_get_counters(f.l);
    CHECK_EQ_U64(c->pkts_dropped, 2);
    CHECK_EQ_U64(c->bytes_dropped, 2 * 1086);
    CHECK_EQ_U64(c->max_queue_bytes, 3 * 1086 + 84);
    CHECK(c->max_queue_bytes <= 3500);
    /* after one frame left, another fits */
    sim_run(f.sim, 86880);
    CHECK_EQ_U64(link_queued_bytes(f.l), 2 * 1086 + 84);
    CHECK(link_send(f.l, mk(f.pool, 1066, 6)));
    sim_run(f.sim, SIM_TIME_NEVER);
    CHECK_EQ_U64(f.log.n, 5);
    CHECK_EQ_U64(f.log.ids[3], 5);
    CHECK_EQ_U64(f.log.ids[4], 6);
    CHECK_EQ_U64(c->pkts_sent, 5);
    fx_fini(&f);

    /* a frame larger than the whole buffer is always dropped */
    fx_init(&f, RATE_100G, 0, 1000);
    CHECK(!link_send(f.l, mk(f.pool, 1066, 0)));
    CHECK(link_idle(f.l));
    fx_fini(&f);
}

/* ---------------------------------------------------------------- idle hook */

struct pacer {
    struct link *l;
    struct pkt_pool *pool;
    unsigned to_send, sent, idle_calls;
    sim_time_t idle_at[16];
};

static void pacer_idle(struct sim *sim, void *a, void *b)
{
    (void)b;
    struct pacer *s = a;
    if (s->idle_calls < 16)
        s->idle_at[s->idle_calls] = sim_now(sim);
    s->idle_calls++;
    if (s->sent < s->to_send) {
        link_send(s->l, mk(s->pool, 1066, s->sent));
        s->sent++;
        CHECK(link_want_idle(s->l)); /* busy: the hook comes at its end */
    }
}

static void send_later(struct sim *sim, void *a, void *b)
{
    (void)sim;
    struct pacer *s = a;
    (void)b;
    link_send(s->l, mk(s->pool, 1066, 100));
    link_send(s->l, mk(s->pool, 1066, 101));
    CHECK(link_want_idle(s->l));
}

static void test_idle_hook(void)
{
    struct fixture f;
    fx_init(&f, RATE_100G, 5 * SIM_NS, 0);
    struct pacer s = {.l = f.l, .pool = f.pool, .to_send = 0};
    link_set_idle_hook(f.l, pacer_idle, &s, NULL);
    CHECK(!link_want_idle(f.l)); /* idle now: nothing to wait for */
    /* three frames at once: one transition to idle, at 3 x 86.88 ns */
    for (unsigned k = 0; k < 3; k++)
        link_send(f.l, mk(f.pool, 1066, k));
    CHECK(link_want_idle(f.l));
    /* two more at 1 us: a second transition at 1 us + 2 x 86.88 ns */
    sim_call_in(f.sim, SIM_US, send_later, &s, NULL);
    sim_run(f.sim, SIM_TIME_NEVER);
    CHECK_EQ_U64(s.idle_calls, 2);
    CHECK_EQ_U64(s.idle_at[0], 3 * 86880);
    CHECK_EQ_U64(s.idle_at[1], SIM_US + 2 * 86880);
    CHECK_EQ_U64(f.log.n, 5);
    CHECK_EQ_U64(link_idle_count(f.l), 2);
    fx_fini(&f);

    /* not asked: no call, but the transitions are counted, lazily too: a
     * lone frame's end at 86.88 ns is known to a query after it */
    fx_init(&f, RATE_100G, 5 * SIM_NS, 0);
    struct pacer u = {.l = f.l, .pool = f.pool, .to_send = 0};
    link_set_idle_hook(f.l, pacer_idle, &u, NULL);
    link_send(f.l, mk(f.pool, 1066, 0));
    sim_run(f.sim, 86879);
    CHECK_EQ_U64(link_idle_count(f.l), 0);
    CHECK(!link_idle(f.l));
    CHECK_EQ_U64(link_queued_bytes(f.l), 1086);
    sim_run(f.sim, 86880);
    CHECK_EQ_U64(link_idle_count(f.l), 1);
    CHECK(link_idle(f.l));
    CHECK_EQ_U64(link_queued_bytes(f.l), 0);
    CHECK_EQ_U64(link_get_counters(f.l)->pkts_sent, 1);
    sim_run(f.sim, SIM_TIME_NEVER);
    CHECK_EQ_U64(u.idle_calls, 0);
    CHECK_EQ_U64(f.log.n, 1);
    fx_fini(&f);

    /* a sender that sends one frame per idle call keeps the wire full */
    fx_init(&f, RATE_100G, 5 * SIM_NS, 0);
    struct pacer q = {.l = f.l, .pool = f.pool, .to_send = 10, .sent = 1};
    link_set_idle_hook(f.l, pacer_idle, &q, NULL);
    link_send(f.l, mk(f.pool, 1066, 0));
    CHECK(link_want_idle(f.l));
    sim_run(f.sim, SIM_TIME_NEVER);
    CHECK_EQ_U64(f.log.n, 10);
    CHECK_EQ_U64(q.idle_calls, 10);
    CHECK_EQ_U64(f.log.t[9], 10 * 86880 + 5000);
    for (unsigned k = 0; k < 10; k++)
        CHECK_EQ_U64(f.log.ids[k], k);
    fx_fini(&f);
}

static void test_unconnected_and_destroy(void)
{
    struct sim *sim = sim_create(1);
    struct pkt_pool *pool = pkt_pool_create();
    struct link_params lp = {.rate_bps = RATE_100G, .delay_ps = SIM_US};
    CHECK(link_create(sim, "bad", &(struct link_params){.rate_bps = 0}, pool) == NULL);
    struct link *l = link_create(sim, "loose", &lp, pool);
    link_send(l, mk(pool, 100, 1));
    sim_run(sim, SIM_TIME_NEVER);
    CHECK_EQ_U64(link_get_counters(l)->pkts_sent, 1);
    CHECK_EQ_U64(link_get_counters(l)->pkts_dropped, 1); /* nobody at the far end */
    /* destroying a busy link frees its frames and cancels its events */
    for (unsigned k = 0; k < 50; k++)
        link_send(l, mk(pool, 1500, k));
    sim_run(sim, sim_now(sim) + 2 * SIM_US); /* ~16 sent, ~8 in the pipe, the rest queued */
    CHECK(link_get_counters(l)->pkts_sent > 5);
    CHECK(!link_idle(l));
    link_destroy(l);
    CHECK_EQ_U64(sim_events_pending(sim), 0);
    CHECK(sim_run(sim, SIM_TIME_NEVER) == SIM_RUN_DONE);
    pkt_pool_destroy(pool);
    sim_destroy(sim);
}

int main(void)
{
    test_single_frame();
    test_burst();
    test_drop_tail();
    test_idle_hook();
    test_unconnected_and_destroy();
    return test_summary();
}
