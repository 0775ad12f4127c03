/* Verbs corner cases of issue 14, each as real hardware and rdma-core
 * answer it (docs/verbs.md):
 *
 *  - CQ overrun: 8 signalled SENDs into a send CQ of 4 entries that
 *    nobody polls.  The CQ goes to error: IBV_EVENT_CQ_ERR on the context
 *    (element = that CQ), then IBV_EVENT_QP_FATAL for the QP completing
 *    into it, which is now in ERR (ibv_query_qp); the 4 CQEs that fitted
 *    can still be polled and nothing more arrives (before: completions
 *    were dropped silently and the QP went on);
 *  - ibv_get_async_event on an async_fd set O_NONBLOCK with nothing
 *    queued: -1 with errno EAGAIN (before: it blocked, a deadlock);
 *  - EFA SRD: a SEND with IBV_SEND_FENCE or IBV_SEND_SOLICITED is refused
 *    with EINVAL (rdma-core efa_post_send_validate accepts only SIGNALED
 *    and INLINE); SIGNALED | INLINE is posted;
 *  - EFA SRD and 1RMA send-queue slots: a QP with 4 send slots posts 4
 *    WRs whose first one is delayed (its packets dropped until the others
 *    completed); once the 3 later ones completed (out of order) three new
 *    WRs fit at once, as the EFA provider frees a slot per completion in
 *    any order (before: ENOMEM until the first one completed). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixture.h"
#include "sim/nic/opcode.h"
#include "test.h"

/* ---------------------------------------------------------------- CQ overrun */

struct overrun {
    struct fx *fx;
    struct fx_rc c, s;
    int ev1, ev2;
    const void *el1, *el2;
    int polled, later;
    enum ibv_qp_state state;
};

static void overrun_client(void *arg)
{
    struct overrun *t = arg;
    struct fx_rc_opts o;
    fx_rc_default_opts(&o);
    o.cq_depth = 4;
    o.max_send_wr = 16;
    CHECK(fx_rc_open(t->fx, &t->c, &o) == 0);
    CHECK(fx_rc_connect(&t->c, "ov/c", "ov/s") == 0);
    fx_barrier(t->fx, "ov/ready", "c", "s");
    for (uint32_t i = 0; i < 8; i++)
        CHECK(fx_post(&t->c, IBV_WR_SEND, i, 64 * i, 64, 0, IBV_SEND_SIGNALED) == 0);
    struct ibv_async_event ev;
    CHECK(ibv_get_async_event(t->c.ctx, &ev) == 0);
    t->ev1 = ev.event_type;
    t->el1 = ev.element.cq;
    ibv_ack_async_event(&ev);
    CHECK(ibv_get_async_event(t->c.ctx, &ev) == 0);
    t->ev2 = ev.event_type;
    t->el2 = ev.element.qp;
    ibv_ack_async_event(&ev);
    struct ibv_qp_attr a;
    struct ibv_qp_init_attr ia;
    CHECK(ibv_query_qp(t->c.qp, &a, IBV_QP_STATE, &ia) == 0);
    t->state = a.qp_state;
    sim_proc_sleep(100 * SIM_US); /* everything that could arrive has */
    struct ibv_wc wc[16];
    t->polled = ibv_poll_cq(t->c.scq, 16, wc);
    sim_proc_sleep(100 * SIM_US);
    t->later = ibv_poll_cq(t->c.scq, 16, wc);
    fx_barrier(t->fx, "ov/done", "c", "s");
}

static void overrun_server(void *arg)
{
    struct overrun *t = arg;
    struct fx_rc_opts o;
    fx_rc_default_opts(&o);
    CHECK(fx_rc_open(t->fx, &t->s, &o) == 0);
    CHECK(fx_rc_connect(&t->s, "ov/s", "ov/c") == 0);
    for (uint32_t i = 0; i < 8; i++)
        CHECK(fx_post_recv(&t->s, i, 64 * i, 64) == 0);
    fx_barrier(t->fx, "ov/ready", "s", "c");
    fx_barrier(t->fx, "ov/done", "s", "c");
}

static void test_cq_overrun(void)
{
    struct overrun *t = calloc(1, sizeof(*t));
    t->fx = fx_create(1, NULL);
    CHECK(fx_run_pair(t->fx, "client", overrun_client, "server", overrun_server, t) ==
          SIM_RUN_DONE);
    CHECK_EQ_U64(t->ev1, IBV_EVENT_CQ_ERR);
    CHECK(t->el1 == t->c.scq);
    CHECK_EQ_U64(t->ev2, IBV_EVENT_QP_FATAL);
    CHECK(t->el2 == t->c.qp);
    CHECK_EQ_U64(t->state, IBV_QPS_ERR);
    CHECK_EQ_U64(t->polled, 4); /* what fitted before the overrun */
    CHECK_EQ_U64(t->later, 0);  /* the CQ takes nothing more */
    CHECK_EQ_U64(t->c.scq->async_events_completed, 1);
    CHECK_EQ_U64(t->c.qp->events_completed, 1);
    fx_destroy(t->fx);
    free(t);
}

/* ---------------------------------------------------------------- non-blocking async fd */

struct nonblock {
    struct fx *fx;
    int rc, err;
};

static void nonblock_prog(void *arg)
{
    struct nonblock *t = arg;
    struct ibv_device **l = ibv_get_device_list(NULL);
    struct ibv_context *ctx = ibv_open_device(l[0]);
    ibv_free_device_list(l);
    int fl = fcntl(ctx->async_fd, F_GETFL);
    CHECK(fcntl(ctx->async_fd, F_SETFL, fl | O_NONBLOCK) == 0);
    struct ibv_async_event ev;
    errno = 0;
    t->rc = ibv_get_async_event(ctx, &ev);
    t->err = errno;
    ibv_close_device(ctx);
}

static void test_async_nonblock(void)
{
    struct nonblock t = {.fx = fx_create(2, NULL)};
    fx_spawn(t.fx, 0, "prog", nonblock_prog, &t);
    CHECK(fx_run(t.fx) == SIM_RUN_DONE); /* not a deadlock */
    CHECK_EQ_U64(t.rc, (uint64_t)-1);
    CHECK_EQ_U64(t.err, EAGAIN);
    fx_destroy(t.fx);
}

/* ---------------------------------------------------------------- EFA send flags */

struct flags {
    struct fx *fx;
    struct fx_rc c, s;
    int fence, solicited, ok;
};

static void flags_client(void *arg)
{
    struct flags *t = arg;
    CHECK(fx_rc_open(t->fx, &t->c, NULL) == 0);
    CHECK(fx_rc_connect(&t->c, "fl/c", "fl/s") == 0);
    fx_barrier(t->fx, "fl/ready", "c", "s");
    t->fence = fx_post(&t->c, IBV_WR_SEND, 1, 0, 32, 0, IBV_SEND_SIGNALED | IBV_SEND_FENCE);
    t->solicited = fx_post(&t->c, IBV_WR_SEND, 2, 0, 32, 0, IBV_SEND_SIGNALED | IBV_SEND_SOLICITED);
    t->ok = fx_post(&t->c, IBV_WR_SEND, 3, 0, 32, 0, IBV_SEND_SIGNALED | IBV_SEND_INLINE);
    struct ibv_wc wc;
    CHECK(fx_poll_one(t->c.scq, &wc) == 1 && wc.wr_id == 3 && wc.status == IBV_WC_SUCCESS);
    fx_barrier(t->fx, "fl/done", "c", "s");
}

static void flags_server(void *arg)
{
    struct flags *t = arg;
    CHECK(fx_rc_open(t->fx, &t->s, NULL) == 0);
    CHECK(fx_rc_connect(&t->s, "fl/s", "fl/c") == 0);
    CHECK(fx_post_recv(&t->s, 0, 0, 64) == 0);
    fx_barrier(t->fx, "fl/ready", "s", "c");
    struct ibv_wc wc;
    CHECK(fx_poll_one(t->s.rcq, &wc) == 1 && wc.status == IBV_WC_SUCCESS);
    fx_barrier(t->fx, "fl/done", "s", "c");
}

static void test_efa_flags(void)
{
    struct nic_params np;
    nic_params_default(&np);
    np.transport = NIC_TRANSPORT_EFA_SRD;
    struct flags *t = calloc(1, sizeof(*t));
    t->fx = fx_create(3, &np);
    CHECK(fx_run_pair(t->fx, "client", flags_client, "server", flags_server, t) == SIM_RUN_DONE);
    CHECK_EQ_U64(t->fence, EINVAL);
    CHECK_EQ_U64(t->solicited, EINVAL);
    CHECK_EQ_U64(t->ok, 0);
    fx_destroy(t->fx);
    free(t);
}

/* ---------------------------------------------------------------- SQ slots out of order */

struct slots {
    struct fx *fx;
    struct fx_rc c, s;
    enum nic_transport tr;
    enum ibv_wr_opcode op;
    bool hold_first; /* drop the first WR's request packets */
    uint32_t first_psn;
    int early[3], late[3];
    int completed, failed;
};

static bool drop_first(struct fx *fx, unsigned node, const struct pkt *p, void *arg)
{
    (void)fx;
    struct slots *t = arg;
    return t->hold_first && node == 1 && p->src_node == 0 && p->psn == t->first_psn;
}

static void slots_client(void *arg)
{
    struct slots *t = arg;
    struct fx_rc_opts o;
    fx_rc_default_opts(&o);
    o.max_send_wr = 4;
    CHECK(fx_rc_open(t->fx, &t->c, &o) == 0);
    CHECK(fx_rc_connect(&t->c, "sl/c", "sl/s") == 0);
    fx_barrier(t->fx, "sl/ready", "c", "s");
    t->first_psn = t->c.local.psn;
    t->hold_first = true;
    for (uint32_t i = 0; i < 4; i++)
        CHECK(fx_post(&t->c, t->op, i, 64 * i, 64, 64 * i, IBV_SEND_SIGNALED) == 0);
    /* the three later ones complete first */
    for (int k = 0; k < 3; k++) {
        struct ibv_wc wc;
        CHECK(fx_poll_one(t->c.scq, &wc) == 1);
        CHECK(wc.status == IBV_WC_SUCCESS && wc.wr_id != 0);
        t->completed++;
    }
    /* their slots are free although WR 0 has not completed */
    for (uint32_t i = 0; i < 3; i++)
        t->early[i] =
            fx_post(&t->c, t->op, 10 + i, 64 * (4 + i), 64, 64 * (4 + i), IBV_SEND_SIGNALED);
    t->hold_first = false; /* WR 0 goes through on a retry (SRD) or fails (1RMA) */
    for (int k = 0; k < 4; k++) {
        struct ibv_wc wc;
        CHECK(fx_poll_one(t->c.scq, &wc) == 1);
        if (wc.status == IBV_WC_SUCCESS)
            t->completed++;
        else
            t->failed++;
    }
    t->late[0] = fx_post(&t->c, t->op, 20, 0, 64, 0, IBV_SEND_SIGNALED);
    struct ibv_wc wc;
    CHECK(fx_poll_one(t->c.scq, &wc) == 1 && wc.wr_id == 20);
    fx_barrier(t->fx, "sl/done", "c", "s");
}

static void slots_server(void *arg)
{
    struct slots *t = arg;
    struct fx_rc_opts o;
    fx_rc_default_opts(&o);
    CHECK(fx_rc_open(t->fx, &t->s, &o) == 0);
    CHECK(fx_rc_connect(&t->s, "sl/s", "sl/c") == 0);
    fx_barrier(t->fx, "sl/ready", "s", "c");
    fx_barrier(t->fx, "sl/done", "s", "c");
}

static void test_slots(enum nic_transport tr, enum ibv_wr_opcode op)
{
    struct nic_params np;
    nic_params_default(&np);
    np.transport = tr;
    struct slots *t = calloc(1, sizeof(*t));
    t->tr = tr;
    t->op = op;
    t->fx = fx_create(4, &np);
    fx_set_drop_fn(t->fx, drop_first, t);
    CHECK(fx_run_pair(t->fx, "client", slots_client, "server", slots_server, t) == SIM_RUN_DONE);
    for (int i = 0; i < 3; i++)
        CHECK_EQ_U64(t->early[i], 0); /* before: ENOMEM */
    CHECK_EQ_U64(t->late[0], 0);
    CHECK_EQ_U64(t->completed + t->failed, 7);
    fx_destroy(t->fx);
    free(t);
}

int main(void)
{
    test_cq_overrun();
    test_async_nonblock();
    test_efa_flags();
    test_slots(NIC_TRANSPORT_EFA_SRD, IBV_WR_RDMA_READ);
    test_slots(NIC_TRANSPORT_ONERMA, IBV_WR_RDMA_WRITE);
    return test_summary();
}
