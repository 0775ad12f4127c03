/* A completion that lands while a program's empty ibv_poll_cq is being
 * charged must not be lost when the program then calls host_relax():
 *
 *     for (;;) { if (ibv_poll_cq(cq, 1, &wc)) break; host_relax(); }
 *
 * The server's polls cost 50 us here, so the client's SEND (posted 10 us
 * after the barrier) lands during the first poll's charge.  Nothing lands
 * afterwards, so a host_relax() that parked regardless would deadlock; it
 * must see that the CQ changed since the poll looked and return at once
 * (sim/host.c, host_park).
 *
 * And the spin heuristic must not take two empty polls of *different* CQs
 * for a spin loop: a program that checks its receive CQ, then its send CQ,
 * then posts the request whose answer it waits for, must not be parked
 * before the post (nothing would ever wake it). */
#include <stdio.h>
#include <string.h>

#include "fixture.h"
#include "sim/host.h"
#include "test.h"

struct state {
    struct fx *fx;
    struct fx_rc client, server;
    sim_time_t t_sent_ps, t_got_ps;
    int relaxes;
};

static void client(void *arg)
{
    struct state *s = arg;
    CHECK(fx_rc_open(s->fx, &s->client, NULL) == 0);
    CHECK(fx_rc_connect(&s->client, "lw/client", "lw/server") == 0);
    fx_barrier(s->fx, "lw/ready", "client", "server");
    host_charge(10 * SIM_US); /* 10 us: inside the server's first 50 us poll */
    memcpy(s->client.buf, "wake", 4);
    s->t_sent_ps = sim_now(s->fx->sim);
    CHECK(fx_post(&s->client, IBV_WR_SEND, 0, 0, 4, 0, IBV_SEND_SIGNALED) == 0);
    struct ibv_wc wc;
    CHECK(fx_poll_one(s->client.scq, &wc) == 1);
    CHECK_EQ_U64(wc.status, IBV_WC_SUCCESS);
    fx_rc_close(&s->client);
}

static void server(void *arg)
{
    struct state *s = arg;
    CHECK(fx_rc_open(s->fx, &s->server, NULL) == 0);
    CHECK(fx_rc_connect(&s->server, "lw/server", "lw/client") == 0);
    CHECK(fx_post_recv(&s->server, 0, 0, 64) == 0);
    fx_barrier(s->fx, "lw/ready", "server", "client");
    struct ibv_wc wc;
    for (;;) {
        if (ibv_poll_cq(s->server.rcq, 1, &wc) == 1)
            break;
        s->relaxes++;
        host_park("host_relax()"); /* what host_relax() does */
    }
    s->t_got_ps = sim_now(s->fx->sim);
    CHECK_EQ_U64(wc.status, IBV_WC_SUCCESS);
    CHECK(memcmp(s->server.buf, "wake", 4) == 0);
    fx_rc_close(&s->server);
}

struct two {
    struct fx *fx;
    struct fx_rc client, server;
    int done;
};

static void two_client(void *arg)
{
    struct two *s = arg;
    CHECK(fx_rc_open(s->fx, &s->client, NULL) == 0);
    CHECK(fx_rc_connect(&s->client, "tc/client", "tc/server") == 0);
    fx_barrier(s->fx, "tc/ready", "client", "server");
    struct ibv_wc wc;
    /* check both CQs once (both empty), then post: not a spin */
    CHECK(ibv_poll_cq(s->client.rcq, 1, &wc) == 0);
    CHECK(ibv_poll_cq(s->client.scq, 1, &wc) == 0);
    memcpy(s->client.buf, "next", 4);
    CHECK(fx_post(&s->client, IBV_WR_SEND, 7, 0, 4, 0, IBV_SEND_SIGNALED) == 0);
    CHECK(fx_poll_one(s->client.scq, &wc) == 1);
    CHECK_EQ_U64(wc.wr_id, 7);
    s->done = 1;
    fx_rc_close(&s->client);
}

static void two_server(void *arg)
{
    struct two *s = arg;
    CHECK(fx_rc_open(s->fx, &s->server, NULL) == 0);
    CHECK(fx_rc_connect(&s->server, "tc/server", "tc/client") == 0);
    CHECK(fx_post_recv(&s->server, 0, 0, 64) == 0);
    fx_barrier(s->fx, "tc/ready", "server", "client");
    struct ibv_wc wc;
    CHECK(fx_poll_one(s->server.rcq, &wc) == 1);
    CHECK(memcmp(s->server.buf, "next", 4) == 0);
    fx_rc_close(&s->server);
}

int main(void)
{
    {
        struct two t = {0};
        t.fx = fx_create(2, NULL);
        CHECK(fx_run_pair(t.fx, "client", two_client, "server", two_server, &t) == SIM_RUN_DONE);
        CHECK(t.done == 1);
        fx_destroy(t.fx);
    }
    struct state s = {0};
    s.fx = fx_create(1, NULL);
    s.fx->hosts[1].cpu.poll_cq_ps = 50 * SIM_US;
    CHECK(fx_run_pair(s.fx, "client", client, "server", server, &s) == SIM_RUN_DONE);
    /* One empty poll, one host_relax that returned at once, then the poll
     * that took the CQE: found within two poll charges of the send. */
    CHECK_EQ_U64((uint64_t)s.relaxes, 1);
    CHECK(s.t_got_ps > s.t_sent_ps);
    CHECK(s.t_got_ps - s.t_sent_ps < 100 * SIM_US);
    fx_destroy(s.fx);
    return test_summary();
}
