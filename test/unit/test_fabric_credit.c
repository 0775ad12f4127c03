/* Credit-based link-level flow control (link.c, link_set_credits; the
 * InfiniBand receive buffer of nic.rx_buffer): a transmitter stops when
 * the receiver's buffer is full and is not idle meanwhile, resumes one
 * cable delay after the receiver frees a frame's blocks (to the
 * picosecond), never puts more in the buffer than its size, loses and
 * reorders nothing; frames lost on the cable give their credit back (else
 * the link would stall for good); an uncredited priority passes a blocked
 * one; and a link without credits keeps its old timing. */
#include <stdlib.h>

#include "sim/fabric/fabric.h"
#include "test.h"

#define FRAME 1086u   /* wire bytes 1106: 88.48 ns at 100 Gb/s; 17 blocks of 64 B */
#define BLOCKS 1088u  /* what it holds of the receiver's buffer */
#define DELAY 100000u /* 100 ns of cable */
#define SER 88480u    /* its serialisation at 100 Gb/s */
#define NMAX 64

/* The receiver: holds what arrives until told to free it (then gives the
 * credit back on the link that brought it). */
struct rcv {
    struct sim *sim;
    struct pkt_pool *pool;
    struct link *in;
    struct pkt *held[NMAX];
    unsigned head, n; /* FIFO of held frames */
    uint64_t got, held_bytes, max_held, over, out_of_order;
    uint32_t next_psn;
    sim_time_t t[NMAX];
    sim_time_t auto_free_ps; /* >0: free each frame this long after it came */
};

static void rcv_free_one(struct sim *sim, void *a, void *b)
{
    (void)sim;
    (void)b;
    struct rcv *r = a;
    if (!r->n)
        return;
    struct pkt *p = r->held[r->head % NMAX];
    r->head++;
    r->n--;
    r->held_bytes -= BLOCKS;
    link_credit_return(r->in, p);
    pkt_free(r->pool, p);
}

static void rcv_rx(struct sim *sim, void *ctx, struct pkt *p)
{
    struct rcv *r = ctx;
    if (p->psn != r->next_psn)
        r->out_of_order++;
    r->next_psn = p->psn + 1;
    if (r->got < NMAX)
        r->t[r->got] = sim_now(sim);
    r->got++;
    r->held[(r->head + r->n) % NMAX] = p;
    r->n++;
    r->held_bytes += BLOCKS;
    if (r->held_bytes > r->max_held)
        r->max_held = r->held_bytes;
    if (r->held_bytes > link_credit_limit_bytes(r->in))
        r->over++;
    if (r->auto_free_ps)
        sim_call_in(sim, r->auto_free_ps, rcv_free_one, r, NULL);
}

static void noop(struct sim *sim, void *a, void *b)
{
    (void)sim;
    (void)a;
    (void)b;
}

static struct pkt *frame(struct pkt_pool *pool, uint32_t psn, uint8_t prio)
{
    struct pkt *p = pkt_alloc(pool);
    p->src_node = 0;
    p->dst_node = 1;
    p->frame_bytes = FRAME;
    p->prio = prio;
    p->psn = psn;
    return p;
}

struct bed {
    struct sim *sim;
    struct pkt_pool *pool;
    struct link *ab;
    struct rcv *r;
};

static struct bed bed_make(double loss)
{
    struct bed b;
    b.sim = sim_create(1);
    b.pool = pkt_pool_create();
    struct link_params lp = {.rate_bps = 100000000000ull, .delay_ps = DELAY, .loss_prob = loss};
    b.ab = link_create(b.sim, "a->b", &lp, b.pool);
    b.r = calloc(1, sizeof(*b.r));
    b.r->sim = b.sim;
    b.r->pool = b.pool;
    b.r->in = b.ab;
    link_connect(b.ab, (struct fabric_sink){.rx = rcv_rx, .ctx = b.r});
    return b;
}

static void bed_free(struct bed *b)
{
    while (b->r->n)
        rcv_free_one(b->sim, b->r, NULL);
    link_destroy(b->ab);
    pkt_pool_destroy(b->pool);
    sim_destroy(b->sim);
    free(b->r);
}

/* A buffer of 4 frames: the link stops after 4, waits (not idle), and each
 * freed frame lets exactly one more go, one cable delay later. */
static void test_stop_resume(void)
{
    struct bed b = bed_make(0);
    link_set_credits(b.ab, 1u << 0, 4 * BLOCKS);
    CHECK_EQ_U64(link_credit_limit_bytes(b.ab), 4 * BLOCKS);
    for (uint32_t i = 0; i < 10; i++)
        CHECK(link_send(b.ab, frame(b.pool, i, 0)));
    sim_run(b.sim, 10 * SIM_US);
    CHECK_EQ_U64(b.r->got, 4);
    CHECK_EQ_U64(b.r->t[0], DELAY + SER);
    CHECK_EQ_U64(b.r->t[3], DELAY + 4 * SER);
    CHECK(!link_idle(b.ab)); /* frames wait for credit: a NIC feeding it stops */
    CHECK_EQ_U64(link_credit_used_bytes(b.ab, 0), 4 * BLOCKS);
    CHECK_EQ_U64(link_get_counters(b.ab)->credit_stalls, 1);
    CHECK_EQ_U64(link_get_counters(b.ab)->max_credit_used_bytes, 4 * BLOCKS);
    /* the stall is still open: the counter has nothing yet, the accessor
     * (what the results file reports) counts it up to now */
    CHECK_EQ_U64(link_get_counters(b.ab)->credit_wait_ps, 0);
    CHECK_EQ_U64(link_credit_wait_ps(b.ab), b.r->t[3] - 4 * SER);
    /* the receiver frees one frame at t0 (the clock stopped at the last
     * event, the fourth arrival): its credit reaches the transmitter a
     * cable later, the fifth frame arrives a serialisation and a cable
     * after that */
    sim_time_t t0 = sim_now(b.sim);
    CHECK_EQ_U64(t0, b.r->t[3]);
    rcv_free_one(b.sim, b.r, NULL);
    sim_run(b.sim, 20 * SIM_US);
    CHECK_EQ_U64(b.r->got, 5);
    CHECK_EQ_U64(b.r->t[4], t0 + DELAY + SER + DELAY);
    CHECK_EQ_U64(link_get_counters(b.ab)->credit_stalls, 2);
    /* the transmitter waited from the fourth frame's end (4 x SER) to the
     * credit's arrival: counted when it resumed */
    CHECK_EQ_U64(link_get_counters(b.ab)->credit_wait_ps, t0 + DELAY - 4 * SER);
    /* ... and the fifth frame's end began a second stall, open now */
    CHECK_EQ_U64(link_credit_wait_ps(b.ab),
                 t0 + DELAY - 4 * SER + (b.r->t[4] - (t0 + DELAY + SER)));
    /* from now on the receiver frees each frame 1 us after it came */
    b.r->auto_free_ps = SIM_US;
    while (b.r->n)
        rcv_free_one(b.sim, b.r, NULL);
    sim_call_in(b.sim, 100 * SIM_US, noop, NULL, NULL); /* time for the last credits */
    sim_run(b.sim, SIM_TIME_NEVER);
    CHECK_EQ_U64(b.r->got, 10);
    CHECK_EQ_U64(b.r->out_of_order, 0);
    CHECK_EQ_U64(b.r->over, 0);
    CHECK_EQ_U64(b.r->max_held, 4 * BLOCKS);
    CHECK(link_idle(b.ab));
    CHECK_EQ_U64(link_credit_used_bytes(b.ab, 0), 0);
    CHECK_EQ_U64(link_get_counters(b.ab)->pkts_dropped, 0);
    bed_free(&b);
}

/* A slow receiver (frees each frame 500 ns after it came, a sixth of the
 * line rate) behind a 3-frame buffer: 200 frames all arrive, in order,
 * never more than 3 held; the rate is the receiver's, not the link's. */
static void test_slow_receiver(void)
{
    struct bed b = bed_make(0);
    link_set_credits(b.ab, 1u << 0, 3 * BLOCKS);
    b.r->auto_free_ps = 500 * SIM_NS;
    for (uint32_t i = 0; i < 200; i++)
        link_send(b.ab, frame(b.pool, i, 0));
    sim_run(b.sim, SIM_TIME_NEVER);
    CHECK_EQ_U64(b.r->got, 200);
    CHECK_EQ_U64(b.r->out_of_order, 0);
    CHECK_EQ_U64(b.r->over, 0);
    CHECK_EQ_U64(b.r->max_held, 3 * BLOCKS);
    /* each frame waits for the credit of the one three before it:
     * arrival(k) = arrival(k-3) + 500 ns + 2 cables + a serialisation */
    for (unsigned k = 3; k < NMAX; k++)
        CHECK_EQ_U64(b.r->t[k], b.r->t[k - 3] + 500 * SIM_NS + 2 * DELAY + SER);
    bed_free(&b);
}

/* Frames the cable loses never reach the receiver: their blocks come back
 * anyway, or the link would stop after the first two for good. */
static void test_lost_frames_return_credit(void)
{
    struct bed b = bed_make(1.0);
    link_set_credits(b.ab, 1u << 0, 2 * BLOCKS);
    for (uint32_t i = 0; i < 20; i++)
        link_send(b.ab, frame(b.pool, i, 0));
    sim_call_in(b.sim, 100 * SIM_US, noop, NULL, NULL); /* time for the last credits */
    sim_run(b.sim, SIM_TIME_NEVER);
    CHECK_EQ_U64(b.r->got, 0);
    CHECK_EQ_U64(link_get_counters(b.ab)->pkts_lost, 20);
    CHECK(link_idle(b.ab));
    CHECK_EQ_U64(link_credit_used_bytes(b.ab, 0), 0);
    bed_free(&b);
}

/* Credits per priority (per VL): priority 3, not credited, passes
 * priority 0 waiting for credit; without credits the timing is the plain
 * link's (back to back). */
static void test_priorities_and_off(void)
{
    struct bed b = bed_make(0);
    link_set_credits(b.ab, 1u << 0, BLOCKS);
    link_send(b.ab, frame(b.pool, 0, 0));
    link_send(b.ab, frame(b.pool, 1, 0)); /* no credit: waits */
    link_send(b.ab, frame(b.pool, 1, 3));
    sim_run(b.sim, 5 * SIM_US);
    CHECK_EQ_U64(b.r->got, 2); /* priority 0's first and priority 3's */
    CHECK_EQ_U64(b.r->t[1], DELAY + 2 * SER);
    bed_free(&b);

    b = bed_make(0);
    link_set_credits(b.ab, 1u << 0, 0); /* 0: off */
    for (uint32_t i = 0; i < 10; i++)
        link_send(b.ab, frame(b.pool, i, 0));
    sim_run(b.sim, SIM_TIME_NEVER);
    CHECK_EQ_U64(b.r->got, 10);
    CHECK_EQ_U64(b.r->t[9], DELAY + 10 * SER);
    CHECK_EQ_U64(link_credit_limit_bytes(b.ab), 0);
    CHECK_EQ_U64(link_get_counters(b.ab)->credit_stalls, 0);
    bed_free(&b);
}

/* A switch whose ingress ports run credits (pfc_params.credits: an
 * InfiniBand switch): node0 and node1 send 2000 frames each to node2
 * through a 64 KiB port buffer (drop-tail would lose ~half, as
 * test_fabric_pfc's incast shows).  Nothing is dropped, no pause frame is
 * sent, each sender's uplink never has more than the ingress buffer
 * (20,000 B) outstanding and waits for credit, and every frame arrives. */
static void free_count(struct sim *sim, void *ctx, struct pkt *p)
{
    (void)sim;
    struct rcv *r = ctx;
    r->got++;
    pkt_free(r->pool, p);
}

static void test_switch_credits(void)
{
    struct sim *sim = sim_create(1);
    struct pkt_pool *pool = pkt_pool_create();
    struct topo_params tp;
    fabric_defaults(&tp);
    tp.n_nodes = 3;
    tp.sw.port_buffer_bytes = 64 * 1024;
    tp.sw.pfc = (struct pfc_params){.enabled = true,
                                    .prio_mask = 1u << 3,
                                    .xoff_bytes = 20000,
                                    .xon_bytes = 15000,
                                    .quanta = 65535,
                                    .credits = true};
    struct topology *t = topo_create(sim, &tp, pool);
    struct rcv *r = calloc(1, sizeof(*r));
    r->pool = pool;
    topo_attach(t, 2, (struct fabric_sink){.rx = free_count, .ctx = r});
    for (uint32_t i = 0; i < 2000; i++) {
        struct pkt *a = frame(pool, i, 3), *b = frame(pool, i, 3);
        b->src_node = 1;
        a->dst_node = b->dst_node = 2;
        link_send(topo_uplink(t, 0), a);
        link_send(topo_uplink(t, 1), b);
    }
    sim_run(sim, SIM_TIME_NEVER);
    CHECK_EQ_U64(r->got, 4000);
    uint64_t drops = 0;
    for (unsigned i = 0; i < topo_n_links(t); i++)
        drops += link_get_counters(topo_link(t, i))->pkts_dropped;
    CHECK_EQ_U64(drops, 0);
    const struct switch_counters *c = switch_get_counters(topo_switch(t, 0));
    CHECK_EQ_U64(c->pfc_xoff_sent, 0);
    CHECK_EQ_U64(c->pfc_headroom_drops, 0);
    for (uint32_t n = 0; n < 2; n++) {
        const struct link_counters *u = link_get_counters(topo_uplink(t, n));
        CHECK_EQ_U64(link_credit_limit_bytes(topo_uplink(t, n)), 20000 / 64 * 64);
        CHECK(u->max_credit_used_bytes <= 20000);
        CHECK(u->max_credit_used_bytes > 20000 - 2 * BLOCKS); /* it filled */
        CHECK(u->credit_stalls > 0);
        CHECK_EQ_U64(u->pfc_xoff_rx, 0);
    }
    /* the egress to node2 held at most both ingress buffers */
    CHECK(link_get_counters(topo_downlink(t, 2))->max_queue_bytes <= 2 * 20000 + 2 * 1106);
    topo_destroy(t);
    pkt_pool_destroy(pool);
    sim_destroy(sim);
    free(r);
}

int main(void)
{
    test_switch_credits();
    test_stop_resume();
    test_slow_receiver();
    test_lost_frames_return_credit();
    test_priorities_and_off();
    return test_summary();
}
