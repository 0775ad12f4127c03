/* The extended verbs the third-party programs use (verbs_shim/qp_ex.c,
 * cq.c, compat.c):
 *
 *  - ibv_create_qp_ex with send_ops_flags and the ibv_wr_* builders: a
 *    batch of RDMA WRITE, inline SEND (source overwritten right after
 *    ibv_wr_set_inline_data) and RDMA READ completes in order with the
 *    right data; an opcode the QP was not created for, too many SGEs, or
 *    ibv_wr_complete without ibv_wr_start is refused with nothing posted;
 *    ibv_wr_abort drops a batch; creation refuses what the model lacks
 *    (BIND_MW: EOPNOTSUPP, create_flags: EOPNOTSUPP, no PD: EINVAL);
 *    ibv_qp_to_qp_ex of a plain QP is NULL;
 *  - ibv_create_cq_ex: start_poll / next_poll / end_poll, the read_*
 *    ops, completion timestamps in nanoseconds of the 1 GHz HCA clock that
 *    ibv_query_device_ex announces; ENOENT when empty; CVLAN refused;
 *  - ibv_resize_cq: larger is fine, below the CQEs waiting is EINVAL;
 *  - what rdma-core answers for absent features: memory windows
 *    (EOPNOTSUPP); multicast on an RC QP (EINVAL); the GID type,
 *    GID table, P_Key index and rate conversions. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>

#include "fixture.h"
#include "test.h"

/* <infiniband/driver.h> is not installed by libibverbs-dev */
enum gid_type_sysfs { GID_TYPE_SYSFS_IB_ROCE_V1, GID_TYPE_SYSFS_ROCE_V2 };
int ibv_query_gid_type(struct ibv_context *context, uint8_t port_num, unsigned int index,
                       enum gid_type_sysfs *type);

enum { OFF_W = 0, OFF_INL = 65536, OFF_R = 131072, OFF_RECV = 262144, W_BYTES = 4096 };

struct state {
    struct fx *fx;
    struct fx_rc client, server;
};

static uint8_t pat(size_t i, unsigned seed)
{
    return (uint8_t)(i * 13 + seed * 7 + (i >> 8));
}

static void expect(struct ibv_cq *cq, uint64_t wr_id, enum ibv_wc_opcode op)
{
    struct ibv_wc wc;
    CHECK(fx_poll_one(cq, &wc) == 1);
    CHECK_EQ_U64(wc.status, IBV_WC_SUCCESS);
    CHECK_EQ_U64(wc.wr_id, wr_id);
    CHECK_EQ_U64(wc.opcode, op);
}

static struct ibv_qp *create_ex(struct fx_rc *rc, uint64_t ops, uint32_t mask, uint32_t cflags)
{
    struct ibv_qp_init_attr_ex a = {
        .send_cq = rc->scq,
        .recv_cq = rc->rcq,
        .cap = {.max_send_wr = 64,
                .max_recv_wr = 64,
                .max_send_sge = 2,
                .max_recv_sge = 1,
                .max_inline_data = 64},
        .qp_type = IBV_QPT_RC,
        .comp_mask = mask,
        .pd = rc->pd,
        .send_ops_flags = ops,
        .create_flags = cflags,
    };
    return ibv_create_qp_ex(rc->ctx, &a);
}

static void misc_queries(struct fx_rc *rc)
{
    struct ibv_mw *mw = ibv_alloc_mw(rc->pd, IBV_MW_TYPE_1);
    CHECK(mw == NULL && errno == EOPNOTSUPP);
    union ibv_gid g;
    CHECK(ibv_query_gid(rc->ctx, 1, 0, &g) == 0);
    CHECK_EQ_U64(ibv_attach_mcast(rc->qp, &g, 0), EINVAL); /* multicast is UD's */
    enum gid_type_sysfs type = GID_TYPE_SYSFS_IB_ROCE_V1;
    CHECK(ibv_query_gid_type(rc->ctx, 1, 0, &type) == 0);
    CHECK_EQ_U64(type, GID_TYPE_SYSFS_ROCE_V2);
    CHECK(ibv_query_gid_type(rc->ctx, 1, 5, &type) == -1 && errno == EINVAL);
    struct ibv_gid_entry ents[4];
    CHECK_EQ_U64(ibv_query_gid_table(rc->ctx, ents, 4, 0), 1);
    CHECK_EQ_U64(ents[0].gid_type, IBV_GID_TYPE_ROCE_V2);
    CHECK(memcmp(&ents[0].gid, &g, sizeof(g)) == 0);
    CHECK_EQ_U64(ibv_get_pkey_index(rc->ctx, 1, htons(0xffff)), 0);
    CHECK(ibv_get_pkey_index(rc->ctx, 1, htons(0x1234)) < 0);
    CHECK_EQ_U64(mult_to_ibv_rate(4), IBV_RATE_10_GBPS);
    CHECK_EQ_U64(mult_to_ibv_rate(3), IBV_RATE_MAX);
    CHECK_EQ_U64(mbps_to_ibv_rate(25781), IBV_RATE_25_GBPS);
    struct ibv_device_attr_ex dx;
    CHECK(ibv_query_device_ex(rc->ctx, NULL, &dx) == 0);
    CHECK_EQ_U64(dx.completion_timestamp_mask, UINT64_MAX);
    CHECK_EQ_U64(dx.hca_core_clock, 1000000);
}

static void client(void *arg)
{
    struct state *s = arg;
    struct fx_rc *rc = &s->client;
    CHECK(fx_rc_open(s->fx, rc, NULL) == 0);
    struct ibv_qp *plain = rc->qp;
    CHECK(ibv_qp_to_qp_ex(plain) == NULL); /* made by ibv_create_qp */
    CHECK(ibv_destroy_qp(plain) == 0);
    const uint32_t m = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
    errno = 0;
    CHECK(create_ex(rc, IBV_QP_EX_WITH_BIND_MW, m, 0) == NULL && errno == EOPNOTSUPP);
    CHECK(create_ex(rc, IBV_QP_EX_WITH_SEND, m | IBV_QP_INIT_ATTR_CREATE_FLAGS, 1) == NULL &&
          errno == EOPNOTSUPP);
    CHECK(create_ex(rc, IBV_QP_EX_WITH_SEND, IBV_QP_INIT_ATTR_SEND_OPS_FLAGS, 0) == NULL &&
          errno == EINVAL);
    rc->qp = create_ex(rc,
                       IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_READ |
                           IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD,
                       m, 0);
    CHECK(rc->qp != NULL);
    rc->local.qpn = rc->qp->qp_num; /* what fx_rc_connect publishes */
    struct ibv_qp_ex *x = ibv_qp_to_qp_ex(rc->qp);
    CHECK(x != NULL && &x->qp_base == rc->qp);
    CHECK(fx_rc_connect(rc, "ext/client", "ext/server") == 0);
    misc_queries(rc);
    fx_barrier(s->fx, "ext/ready", "client", "server");

    /* one batch: WRITE 4 KiB, inline SEND 64 B, READ 4 KiB */
    for (size_t i = 0; i < W_BYTES; i++)
        rc->buf[OFF_W + i] = pat(i, 1);
    for (size_t i = 0; i < 64; i++)
        rc->buf[OFF_INL + i] = pat(i, 2);
    ibv_wr_start(x);
    x->wr_id = 1;
    x->wr_flags = IBV_SEND_SIGNALED;
    ibv_wr_rdma_write(x, rc->remote.rkey, rc->remote.addr + OFF_W);
    ibv_wr_set_sge(x, rc->mr->lkey, (uintptr_t)(rc->buf + OFF_W), W_BYTES);
    x->wr_id = 2;
    ibv_wr_send(x);
    ibv_wr_set_inline_data(x, rc->buf + OFF_INL, 64);
    memset(rc->buf + OFF_INL, 0xee, 64); /* copied when set: not what is sent */
    x->wr_id = 3;
    ibv_wr_rdma_read(x, rc->remote.rkey, rc->remote.addr + OFF_R);
    ibv_wr_set_sge(x, rc->mr->lkey, (uintptr_t)(rc->buf + OFF_R), W_BYTES);
    CHECK_EQ_U64(ibv_wr_complete(x), 0);
    expect(rc->scq, 1, IBV_WC_RDMA_WRITE);
    expect(rc->scq, 2, IBV_WC_SEND);
    expect(rc->scq, 3, IBV_WC_RDMA_READ);
    bool read_ok = true;
    for (size_t i = 0; i < W_BYTES; i++)
        read_ok = read_ok && rc->buf[OFF_R + i] == pat(i, 3);
    CHECK(read_ok);

    /* refused batches post nothing */
    struct ibv_wc wc;
    ibv_wr_start(x);
    x->wr_id = 4;
    ibv_wr_send(x);
    ibv_wr_set_sge(x, rc->mr->lkey, (uintptr_t)rc->buf, 8);
    ibv_wr_atomic_cmp_swp(x, rc->remote.rkey, rc->remote.addr, 0, 1); /* not in send_ops_flags */
    CHECK_EQ_U64(ibv_wr_complete(x), EOPNOTSUPP);
    ibv_wr_start(x);
    ibv_wr_send(x);
    struct ibv_sge many[3] = {{0}};
    ibv_wr_set_sge_list(x, 3, many); /* max_send_sge is 2 */
    CHECK_EQ_U64(ibv_wr_complete(x), EINVAL);
    CHECK_EQ_U64(ibv_wr_complete(x), EINVAL); /* no ibv_wr_start */
    ibv_wr_start(x);
    ibv_wr_send(x);
    ibv_wr_set_sge(x, rc->mr->lkey, (uintptr_t)rc->buf, 8);
    ibv_wr_abort(x);
    CHECK(ibv_poll_cq(rc->scq, 1, &wc) == 0);

    /* two SENDs for the server's extended CQ */
    ibv_wr_start(x);
    x->wr_id = 5;
    ibv_wr_send(x);
    char first[] = "first", second[] = "second!";
    ibv_wr_set_inline_data(x, first, 5);
    x->wr_id = 6;
    ibv_wr_send(x);
    ibv_wr_set_inline_data(x, second, 7);
    CHECK_EQ_U64(ibv_wr_complete(x), 0);
    expect(rc->scq, 5, IBV_WC_SEND);
    expect(rc->scq, 6, IBV_WC_SEND);
    fx_barrier(s->fx, "ext/sent", "client", "server");

    /* ibv_resize_cq: three CQEs waiting */
    CHECK_EQ_U64(ibv_resize_cq(rc->scq, 512), 0);
    CHECK_EQ_U64(rc->scq->cqe, 512);
    for (uint64_t i = 0; i < 3; i++) {
        ibv_wr_start(x);
        x->wr_id = 10 + i;
        ibv_wr_rdma_write(x, rc->remote.rkey, rc->remote.addr + OFF_W);
        ibv_wr_set_sge(x, rc->mr->lkey, (uintptr_t)(rc->buf + OFF_W), 64);
        CHECK_EQ_U64(ibv_wr_complete(x), 0);
    }
    sim_proc_sleep(100 * SIM_US); /* all three complete, none polled */
    CHECK_EQ_U64(ibv_resize_cq(rc->scq, 2), EINVAL);
    CHECK_EQ_U64(ibv_resize_cq(rc->scq, 0), EINVAL);
    CHECK_EQ_U64(ibv_resize_cq(rc->scq, 3), 0);
    for (uint64_t i = 0; i < 3; i++)
        expect(rc->scq, 10 + i, IBV_WC_RDMA_WRITE);
    fx_barrier(s->fx, "ext/done", "client", "server");
    fx_rc_close(rc);
}

static void server(void *arg)
{
    struct state *s = arg;
    struct fx_rc *rc = &s->server;
    CHECK(fx_rc_open(s->fx, rc, NULL) == 0);
    CHECK(ibv_destroy_qp(rc->qp) == 0);
    CHECK(ibv_destroy_cq(rc->rcq) == 0);
    struct ibv_cq_init_attr_ex ca = {.cqe = 64, .wc_flags = IBV_WC_EX_WITH_CVLAN};
    errno = 0;
    CHECK(ibv_create_cq_ex(rc->ctx, &ca) == NULL && errno == EOPNOTSUPP);
    ca.wc_flags =
        IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_QP_NUM | IBV_WC_EX_WITH_COMPLETION_TIMESTAMP;
    struct ibv_cq_ex *cx = ibv_create_cq_ex(rc->ctx, &ca);
    CHECK(cx != NULL);
    if (!cx)
        return;
    rc->rcq = ibv_cq_ex_to_cq(cx);
    struct ibv_qp_init_attr qa = {
        .send_cq = rc->scq,
        .recv_cq = rc->rcq,
        .cap = {.max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1, .max_recv_sge = 1},
        .qp_type = IBV_QPT_RC};
    rc->qp = ibv_create_qp(rc->pd, &qa);
    CHECK(rc->qp != NULL);
    rc->local.qpn = rc->qp->qp_num;
    CHECK(fx_rc_connect(rc, "ext/server", "ext/client") == 0);
    for (size_t i = 0; i < W_BYTES; i++)
        rc->buf[OFF_R + i] = pat(i, 3);
    for (uint64_t i = 0; i < 3; i++)
        CHECK(fx_post_recv(rc, 100 + i, OFF_RECV + i * 256, 256) == 0);
    struct ibv_poll_cq_attr pa = {0};
    CHECK_EQ_U64(ibv_start_poll(cx, &pa), ENOENT); /* nothing yet */
    fx_barrier(s->fx, "ext/ready", "server", "client");

    /* the inline SEND of the first batch */
    int rc_poll;
    while ((rc_poll = ibv_start_poll(cx, &pa)) == ENOENT) {
    }
    CHECK_EQ_U64(rc_poll, 0);
    CHECK_EQ_U64(cx->status, IBV_WC_SUCCESS);
    CHECK_EQ_U64(cx->wr_id, 100);
    CHECK_EQ_U64(ibv_wc_read_opcode(cx), IBV_WC_RECV);
    CHECK_EQ_U64(ibv_wc_read_byte_len(cx), 64);
    CHECK_EQ_U64(ibv_wc_read_qp_num(cx), rc->qp->qp_num);
    uint64_t ts0 = ibv_wc_read_completion_ts(cx);
    uint64_t now_ns = 1000000000000ull + sim_now(s->fx->sim) / SIM_NS;
    CHECK(ts0 <= now_ns && ts0 + 10000 > now_ns); /* within the last 10 us */
    ibv_end_poll(cx);
    bool inl_ok = true;
    for (size_t i = 0; i < 64; i++)
        inl_ok = inl_ok && rc->buf[OFF_RECV + i] == pat(i, 2);
    CHECK(inl_ok);
    bool w_ok = true;
    for (size_t i = 0; i < W_BYTES; i++)
        w_ok = w_ok && rc->buf[OFF_W + i] == pat(i, 1);
    CHECK(w_ok);

    /* two CQEs in one start/next/end round */
    fx_barrier(s->fx, "ext/sent", "server", "client");
    CHECK_EQ_U64(ibv_start_poll(cx, &pa), 0);
    CHECK_EQ_U64(cx->wr_id, 101);
    CHECK_EQ_U64(ibv_wc_read_byte_len(cx), 5);
    uint64_t ts1 = ibv_wc_read_completion_ts(cx);
    CHECK_EQ_U64(ibv_next_poll(cx), 0);
    CHECK_EQ_U64(cx->wr_id, 102);
    CHECK_EQ_U64(ibv_wc_read_byte_len(cx), 7);
    uint64_t ts2 = ibv_wc_read_completion_ts(cx);
    CHECK(ts0 < ts1 && ts1 <= ts2);
    CHECK_EQ_U64(ibv_next_poll(cx), ENOENT);
    ibv_end_poll(cx);
    CHECK(memcmp(rc->buf + OFF_RECV + 256, "first", 5) == 0);
    CHECK(memcmp(rc->buf + OFF_RECV + 512, "second!", 7) == 0);
    struct ibv_poll_cq_attr bad = {.comp_mask = 1};
    CHECK_EQ_U64(ibv_start_poll(cx, &bad), EINVAL);
    fx_barrier(s->fx, "ext/done", "server", "client");
    fx_rc_close(rc);
}

int main(void)
{
    struct state s = {0};
    s.fx = fx_create(1, NULL);
    CHECK(fx_run_pair(s.fx, "client", client, "server", server, &s) == SIM_RUN_DONE);
    fx_destroy(s.fx);
    return test_summary();
}
