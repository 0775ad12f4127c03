/* Doorbell batching: a post list of 8 WRs rings the send doorbell once;
 * the same 8 WRs posted one by one ring it 8 times.  All complete, and the
 * list completes sooner (one post call's CPU cost instead of eight). */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "fixture.h"
#include "test.h"

struct state {
    struct fx *fx;
    struct fx_rc client, server;
    uint64_t db_list, db_single;
    sim_time_t t_list_ps, t_single_ps;
};

enum { N_WR = 8 };

static void run_batch(struct state *s, struct fx_rc *rc, bool as_list, uint64_t *doorbells,
                      sim_time_t *elapsed)
{
    struct ibv_sge sge[N_WR];
    struct ibv_send_wr wr[N_WR], *bad = NULL;
    for (int i = 0; i < N_WR; i++) {
        sge[i] = (struct ibv_sge){
            .addr = (uintptr_t)rc->buf + 256u * (unsigned)i, .length = 256, .lkey = rc->mr->lkey};
        wr[i] = (struct ibv_send_wr){.wr_id = (uint64_t)i,
                                     .sg_list = &sge[i],
                                     .num_sge = 1,
                                     .opcode = IBV_WR_RDMA_WRITE,
                                     .send_flags = IBV_SEND_SIGNALED,
                                     .next = as_list && i < N_WR - 1 ? &wr[i + 1] : NULL};
        wr[i].wr.rdma.remote_addr = rc->remote.addr + 256u * (unsigned)i;
        wr[i].wr.rdma.rkey = rc->remote.rkey;
    }
    const struct nic_counters *c = nic_get_counters(s->fx->nic[0]);
    uint64_t before = c->doorbells;
    sim_time_t t0 = sim_now(s->fx->sim);
    if (as_list) {
        CHECK(ibv_post_send(rc->qp, &wr[0], &bad) == 0);
    } else {
        for (int i = 0; i < N_WR; i++)
            CHECK(ibv_post_send(rc->qp, &wr[i], &bad) == 0);
    }
    struct ibv_wc wc;
    for (int i = 0; i < N_WR; i++) {
        CHECK(fx_poll_one(rc->scq, &wc) == 1);
        CHECK_EQ_U64(wc.status, IBV_WC_SUCCESS);
        CHECK_EQ_U64(wc.wr_id, (uint64_t)i);
    }
    *elapsed = sim_now(s->fx->sim) - t0;
    /* counted when the MMIO write reaches the NIC, so read after the CQEs */
    *doorbells = c->doorbells - before;
}

static void client(void *arg)
{
    struct state *s = arg;
    CHECK(fx_rc_open(s->fx, &s->client, NULL) == 0);
    CHECK(fx_rc_connect(&s->client, "db/client", "db/server") == 0);
    uint64_t warm_db;
    sim_time_t warm_ps;
    /* warm the QP-context and translation caches (cold misses would add
     * PCIe round trips to whichever run goes first) */
    run_batch(s, &s->client, false, &warm_db, &warm_ps);
    run_batch(s, &s->client, true, &s->db_list, &s->t_list_ps);
    run_batch(s, &s->client, false, &s->db_single, &s->t_single_ps);
    fx_barrier(s->fx, "db/done", "client", "server");
    fx_rc_close(&s->client);
}

static void server(void *arg)
{
    struct state *s = arg;
    CHECK(fx_rc_open(s->fx, &s->server, NULL) == 0);
    CHECK(fx_rc_connect(&s->server, "db/server", "db/client") == 0);
    fx_barrier(s->fx, "db/done", "server", "client");
    fx_rc_close(&s->server);
}

int main(void)
{
    struct state s;
    memset(&s, 0, sizeof(s));
    s.fx = fx_create(6, NULL);
    enum sim_run_result r = fx_run_pair(s.fx, "client", client, "server", server, &s);
    CHECK_EQ_U64(r, SIM_RUN_DONE);
    if (r != SIM_RUN_DONE)
        sim_deadlock_report(s.fx->sim, stderr);
    CHECK_EQ_U64(s.db_list, 1);
    CHECK_EQ_U64(s.db_single, N_WR);
    /* One post call for the list (300 + 8 x 85 ns of CPU) against eight
     * (8 x 385 ns): batching must finish first even though the list's WQEs
     * are fetched by DMA instead of riding the doorbell (BlueFlame). */
    CHECK(s.t_list_ps < s.t_single_ps);
    printf("8 WRITEs x 256 B: list %" PRIu64 " doorbell(s) %.1f ns; one by one %" PRIu64
           " doorbells %.1f ns\n",
           s.db_list, sim_ps_to_ns(s.t_list_ps), s.db_single, sim_ps_to_ns(s.t_single_ps));
    fx_destroy(s.fx);
    return test_summary();
}
