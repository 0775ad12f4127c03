/* API surface of the shim: device list inside and outside a simulated
 * process, device/port/GID/P_Key queries, the provider shape (verbs_context
 * size, abi_compat, NULL extended ops, EOPNOTSUPP fallbacks), status
 * strings equal to rdma-core's, completion channels (exactly one event per
 * arm, a real pollable fd), EBUSY on destroy with dependants, and errno on
 * misuse. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fixture.h"
#include "test.h"

struct state {
    struct fx *fx;
    struct fx_rc client, server;
};

static bool fd_readable(int fd)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    return poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

static void check_device_and_queries(struct state *s)
{
    int n = -1;
    struct ibv_device **list = ibv_get_device_list(&n);
    CHECK(list != NULL);
    CHECK_EQ_U64(n, 1);
    if (!list || n != 1)
        return;
    CHECK(list[1] == NULL);
    CHECK(strcmp(ibv_get_device_name(list[0]), "rnicsim0") == 0);
    CHECK_EQ_U64(list[0]->node_type, IBV_NODE_CA);
    CHECK_EQ_U64(list[0]->transport_type, IBV_TRANSPORT_IB);
    CHECK(ibv_get_device_guid(list[0]) != 0);
    struct ibv_context *ctx = ibv_open_device(list[0]);
    ibv_free_device_list(list); /* the open context keeps the device */
    CHECK(ctx != NULL);
    if (!ctx)
        return;
    CHECK(strcmp(ctx->device->name, "rnicsim0") == 0);

    /* provider shape */
    CHECK(ctx->abi_compat == __VERBS_ABI_IS_EXTENDED);
    struct verbs_context *vctx = verbs_get_ctx(ctx);
    CHECK(vctx != NULL);
    if (vctx)
        CHECK_EQ_U64(vctx->sz, sizeof(struct verbs_context));
    CHECK(verbs_get_ctx_op(ctx, query_port) != NULL);
    CHECK(verbs_get_ctx_op(ctx, create_cq_ex) != NULL); /* cq.c (test_ext_verbs.c) */
    CHECK(verbs_get_ctx_op(ctx, create_qp_ex) != NULL); /* qp_ex.c */
    CHECK(verbs_get_ctx_op(ctx, open_xrcd) != NULL);    /* XRC: xrc.c (test_xrc.c) */
    CHECK(verbs_get_ctx_op(ctx, alloc_dm) != NULL);     /* device memory: dm.c */
    CHECK(verbs_get_ctx_op(ctx, alloc_td) == NULL);
    CHECK(ctx->ops.post_send && ctx->ops.post_recv && ctx->ops.post_srq_recv && ctx->ops.poll_cq &&
          ctx->ops.req_notify_cq);
    CHECK(fd_readable(ctx->async_fd) == false);
    struct ibv_cq_init_attr_ex cqa = {.cqe = 16, .wc_flags = IBV_WC_EX_WITH_CVLAN};
    errno = 0;
    CHECK(ibv_create_cq_ex(ctx, &cqa) == NULL); /* no VLANs in the model */
    CHECK_EQ_U64(errno, EOPNOTSUPP);

    /* device */
    struct ibv_device_attr da;
    CHECK(ibv_query_device(ctx, &da) == 0);
    const struct nic_params *p = &s->fx->nicp;
    CHECK_EQ_U64(da.max_qp_wr, p->max_qp_wr);
    CHECK_EQ_U64(da.max_sge, p->max_sge);
    CHECK_EQ_U64(da.max_cqe, p->max_cqe);
    CHECK_EQ_U64(da.max_qp_rd_atom, p->max_qp_rd_atom);
    CHECK_EQ_U64(da.max_qp_init_rd_atom, p->max_qp_rd_atom);
    CHECK_EQ_U64(da.atomic_cap, IBV_ATOMIC_HCA);
    CHECK_EQ_U64(da.page_size_cap, 4096);
    CHECK_EQ_U64(da.phys_port_cnt, 1);
    CHECK(strcmp(da.fw_ver, "rnicsim") == 0);
    CHECK(da.node_guid == ibv_get_device_guid(ctx->device));
    struct ibv_device_attr_ex dax;
    CHECK(ibv_query_device_ex(ctx, NULL, &dax) == 0); /* legacy fallback path */
    CHECK_EQ_U64(dax.orig_attr.max_qp_wr, p->max_qp_wr);

    /* port: inline extended path and the exported fallback */
    struct ibv_port_attr pa;
    memset(&pa, 0x5a, sizeof(pa));
    CHECK(ibv_query_port(ctx, 1, &pa) == 0);
    CHECK_EQ_U64(pa.state, IBV_PORT_ACTIVE);
    CHECK_EQ_U64(pa.link_layer, IBV_LINK_LAYER_ETHERNET);
    CHECK_EQ_U64(pa.lid, 0);
    CHECK_EQ_U64(pa.max_mtu, p->max_mtu);
    CHECK_EQ_U64(pa.active_mtu, p->max_mtu);
    CHECK_EQ_U64(pa.gid_tbl_len, 1);
    CHECK_EQ_U64(pa.port_cap_flags2, 0);
    CHECK(pa.flags & IBV_QPF_GRH_REQUIRED);
    if (p->port_rate_bps == 100000000000ull) {
        CHECK_EQ_U64(pa.active_width, 2);  /* 4X */
        CHECK_EQ_U64(pa.active_speed, 32); /* EDR: 4 x 25 Gb/s */
    }
    CHECK_EQ_U64(ibv_query_port(ctx, 2, &pa), EINVAL);
    struct ibv_port_attr pb;
    memset(&pb, 0x5a, sizeof(pb));
    CHECK((ibv_query_port)(ctx, 1, (struct _compat_ibv_port_attr *)(void *)&pb) == 0);
    CHECK_EQ_U64(pb.state, IBV_PORT_ACTIVE);
    CHECK_EQ_U64(pb.port_cap_flags2, 0x5a5a); /* beyond the compat layout: untouched */

    /* GID and P_Key */
    union ibv_gid gid, want;
    nic_gid_of_node(0, &want);
    CHECK(ibv_query_gid(ctx, 1, 0, &gid) == 0);
    CHECK(memcmp(&gid, &want, sizeof(gid)) == 0);
    errno = 0;
    CHECK(ibv_query_gid(ctx, 1, 1, &gid) == -1);
    CHECK_EQ_U64(errno, EINVAL);
    struct ibv_gid_entry ge;
    CHECK(ibv_query_gid_ex(ctx, 1, 0, &ge, 0) == 0);
    CHECK(memcmp(&ge.gid, &want, sizeof(want)) == 0);
    CHECK_EQ_U64(ge.gid_type, IBV_GID_TYPE_ROCE_V2);
    CHECK_EQ_U64(ge.port_num, 1);
    CHECK_EQ_U64(ibv_query_gid_ex(ctx, 1, 1, &ge, 0), EINVAL);
    /* caller's entry larger than ours: tail zeroed; smaller: only a prefix */
    uint8_t big[sizeof(struct ibv_gid_entry) + 16];
    memset(big, 0xcc, sizeof(big));
    CHECK(_ibv_query_gid_ex(ctx, 1, 0, (struct ibv_gid_entry *)(void *)big, 0, sizeof(big)) == 0);
    CHECK_EQ_U64(big[sizeof(big) - 1], 0);
    uint8_t small[24];
    memset(small, 0xcc, sizeof(small));
    CHECK(_ibv_query_gid_ex(ctx, 1, 0, (struct ibv_gid_entry *)(void *)small, 0, 16) == 0);
    CHECK(memcmp(small, &want, 16) == 0);
    CHECK_EQ_U64(small[16], 0xcc);
    __be16 pkey = 0;
    CHECK(ibv_query_pkey(ctx, 1, 0, &pkey) == 0);
    CHECK_EQ_U64(be16toh(pkey), 0xffff);
    CHECK(ibv_query_pkey(ctx, 1, 1, &pkey) == -1);

    /* misuse */
    errno = 0;
    CHECK(ibv_alloc_pd(NULL) == NULL);
    CHECK_EQ_U64(errno, EINVAL);
    struct ibv_pd *pd = ibv_alloc_pd(ctx);
    CHECK(pd != NULL);
    uint8_t *buf = aligned_alloc(4096, 8192);
    errno = 0;
    CHECK(ibv_reg_mr(pd, buf, 8192, IBV_ACCESS_REMOTE_WRITE) == NULL);
    CHECK_EQ_U64(errno, EINVAL);
    errno = 0;
    CHECK(ibv_reg_mr(pd, buf, 8192, IBV_ACCESS_ON_DEMAND) == NULL);
    CHECK_EQ_U64(errno, EOPNOTSUPP);
    int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_RELAXED_ORDERING; /* -> ibv_reg_mr_iova2 */
    struct ibv_mr *mr = ibv_reg_mr(pd, buf, 8192, access);
    CHECK(mr != NULL);
    if (mr) {
        CHECK(mr->addr == buf && mr->length == 8192 && mr->pd == pd && mr->context == ctx);
    }
    errno = 0;
    CHECK(ibv_reg_mr_iova(pd, buf, 4096, 0x10001, IBV_ACCESS_LOCAL_WRITE) == NULL);
    CHECK_EQ_U64(errno, EINVAL); /* page offsets differ */
    errno = 0;
    CHECK(ibv_create_cq(ctx, 0, NULL, NULL, 0) == NULL);
    CHECK_EQ_U64(errno, EINVAL);
    errno = 0;
    CHECK(ibv_create_cq(ctx, (int)p->max_cqe + 1, NULL, NULL, 0) == NULL);
    CHECK_EQ_U64(errno, EINVAL);
    struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
    CHECK(cq != NULL);
    CHECK_EQ_U64(cq->cqe, 16);
    struct ibv_qp_init_attr ia = {
        .send_cq = cq,
        .recv_cq = cq,
        .cap = {.max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1},
        .qp_type = IBV_QPT_RAW_PACKET};
    errno = 0;
    CHECK(ibv_create_qp(pd, &ia) == NULL); /* a valid type the model lacks */
    CHECK_EQ_U64(errno, EOPNOTSUPP);
    ia.qp_type = IBV_QPT_DRIVER;
    errno = 0;
    CHECK(ibv_create_qp(pd, &ia) == NULL);
    CHECK_EQ_U64(errno, EOPNOTSUPP);
    ia.qp_type = IBV_QPT_RC;
    ia.send_cq = NULL;
    errno = 0;
    CHECK(ibv_create_qp(pd, &ia) == NULL);
    CHECK_EQ_U64(errno, EINVAL);
    ia.send_cq = cq;
    ia.cap.max_send_wr = p->max_qp_wr + 1;
    errno = 0;
    CHECK(ibv_create_qp(pd, &ia) == NULL);
    CHECK_EQ_U64(errno, EINVAL);
    ia.cap.max_send_wr = 4;
    ia.cap.max_inline_data = p->max_inline_bytes + 1;
    errno = 0;
    CHECK(ibv_create_qp(pd, &ia) == NULL);
    CHECK_EQ_U64(errno, EINVAL);
    ia.cap.max_inline_data = 0;
    struct ibv_qp *qp = ibv_create_qp(pd, &ia);
    CHECK(qp != NULL);
    CHECK_EQ_U64(ia.cap.max_inline_data, p->max_inline_bytes); /* granted, written back */
    if (qp) {
        CHECK_EQ_U64(qp->state, IBV_QPS_RESET);
        CHECK(qp->qp_num != 0 && qp->qp_num <= 0xffffff);
    }
    errno = 0;
    CHECK(ibv_alloc_mw(pd, IBV_MW_TYPE_1) == NULL);
    CHECK_EQ_U64(errno, EOPNOTSUPP);
    /* destroy with dependants */
    CHECK_EQ_U64(ibv_dealloc_pd(pd), EBUSY);
    CHECK_EQ_U64(ibv_destroy_cq(cq), EBUSY);
    CHECK(ibv_destroy_qp(qp) == 0);
    CHECK(ibv_destroy_cq(cq) == 0);
    CHECK_EQ_U64(ibv_dealloc_pd(pd), EBUSY); /* the MR */
    CHECK(ibv_dereg_mr(mr) == 0);
    CHECK(ibv_dealloc_pd(pd) == 0);
    free(buf);
    CHECK_EQ_U64(ibv_dealloc_pd(NULL), EINVAL);
    CHECK_EQ_U64(ibv_destroy_cq(NULL), EINVAL);
    CHECK(ibv_close_device(ctx) == 0);
}

/* Completion channel on the client's send CQ: one event per arm, for the
 * next CQE; nothing without an arm; the fd is readable exactly while an
 * event is queued. */
static void check_channel(struct state *s, struct fx_rc *rc)
{
    int fd = rc->channel->fd;
    CHECK(fd >= 0);
    CHECK(fcntl(fd, F_GETFD) >= 0);
    CHECK(!fd_readable(fd));
    CHECK_EQ_U64(ibv_destroy_comp_channel(rc->channel), EBUSY);

    struct ibv_cq *ev_cq = NULL;
    void *ev_ctx = NULL;
    struct ibv_wc wc;
    /* arm, one WRITE -> exactly one event */
    CHECK(ibv_req_notify_cq(rc->scq, 0) == 0);
    CHECK(fx_post(rc, IBV_WR_RDMA_WRITE, 1, 0, 64, 0, IBV_SEND_SIGNALED) == 0);
    CHECK(ibv_get_cq_event(rc->channel, &ev_cq, &ev_ctx) == 0);
    CHECK(ev_cq == rc->scq);
    CHECK(ev_ctx == rc);
    CHECK(!fd_readable(fd));
    ibv_ack_cq_events(ev_cq, 1);
    CHECK_EQ_U64(rc->scq->comp_events_completed, 1);
    CHECK(ibv_poll_cq(rc->scq, 1, &wc) == 1);
    CHECK_EQ_U64(wc.status, IBV_WC_SUCCESS);

    /* no arm: a completion arrives but no event */
    CHECK(fx_post(rc, IBV_WR_RDMA_WRITE, 2, 0, 64, 0, IBV_SEND_SIGNALED) == 0);
    CHECK(fx_poll_one(rc->scq, &wc) == 1);
    CHECK(!fd_readable(fd));

    /* arm once, two completions -> one event */
    CHECK(ibv_req_notify_cq(rc->scq, 0) == 0);
    CHECK(fx_post(rc, IBV_WR_RDMA_WRITE, 3, 0, 64, 0, IBV_SEND_SIGNALED) == 0);
    CHECK(fx_post(rc, IBV_WR_RDMA_WRITE, 4, 0, 64, 0, IBV_SEND_SIGNALED) == 0);
    CHECK(fx_poll_one(rc->scq, &wc) == 1);
    CHECK(fx_poll_one(rc->scq, &wc) == 1);
    CHECK(fd_readable(fd));
    CHECK(ibv_get_cq_event(rc->channel, &ev_cq, &ev_ctx) == 0);
    CHECK(!fd_readable(fd));
    ibv_ack_cq_events(ev_cq, 1);
    /* the queue is empty: outside the simulation this would block; the fd
     * says so */
    CHECK(!fd_readable(fd));
    (void)s;
}

static void client(void *arg)
{
    struct state *s = arg;
    check_device_and_queries(s);
    struct fx_rc_opts o;
    fx_rc_default_opts(&o);
    o.use_channel = true;
    CHECK(fx_rc_open(s->fx, &s->client, &o) == 0);
    CHECK(fx_rc_connect(&s->client, "api/client", "api/server") == 0);
    check_channel(s, &s->client);
    fx_barrier(s->fx, "api/done", "client", "server");
    fx_rc_close(&s->client);
}

static void server(void *arg)
{
    struct state *s = arg;
    CHECK(fx_rc_open(s->fx, &s->server, NULL) == 0);
    CHECK(fx_rc_connect(&s->server, "api/server", "api/client") == 0);
    fx_barrier(s->fx, "api/done", "server", "client");
    fx_rc_close(&s->server);
}

static void check_strings(void)
{
    static const struct {
        enum ibv_wc_status st;
        const char *text;
    } wc[] = {
        {IBV_WC_SUCCESS, "success"},
        {IBV_WC_LOC_LEN_ERR, "local length error"},
        {IBV_WC_LOC_PROT_ERR, "local protection error"},
        {IBV_WC_WR_FLUSH_ERR, "Work Request Flushed Error"},
        {IBV_WC_REM_ACCESS_ERR, "remote access error"},
        {IBV_WC_RETRY_EXC_ERR, "transport retry counter exceeded"},
        {IBV_WC_RNR_RETRY_EXC_ERR, "RNR retry counter exceeded"},
        {IBV_WC_TM_RNDV_INCOMPLETE, "TM software rendezvous"},
        {(enum ibv_wc_status)99, "unknown"},
    };
    for (size_t i = 0; i < sizeof(wc) / sizeof(wc[0]); i++)
        CHECK(strcmp(ibv_wc_status_str(wc[i].st), wc[i].text) == 0);
    CHECK(strcmp(ibv_node_type_str(IBV_NODE_CA), "InfiniBand channel adapter") == 0);
    CHECK(strcmp(ibv_node_type_str(IBV_NODE_UNKNOWN), "unknown") == 0);
    CHECK(strcmp(ibv_port_state_str(IBV_PORT_ACTIVE), "active") == 0);
    CHECK(strcmp(ibv_port_state_str(IBV_PORT_NOP), "no state change (NOP)") == 0);
    CHECK(strcmp(ibv_event_type_str(IBV_EVENT_COMM_EST), "communication established") == 0);
    CHECK(strcmp(ibv_event_type_str(IBV_EVENT_WQ_FATAL), "WQ fatal") == 0);
    CHECK(strcmp(ibv_event_type_str((enum ibv_event_type)40), "unknown") == 0);
    CHECK_EQ_U64(ibv_rate_to_mult(IBV_RATE_10_GBPS), 4);
    CHECK(ibv_rate_to_mult(IBV_RATE_100_GBPS) == -1);
    CHECK_EQ_U64(ibv_rate_to_mbps(IBV_RATE_100_GBPS), 103125);
    CHECK_EQ_U64(ibv_rate_to_mbps(IBV_RATE_25_GBPS), 25781);
}

int main(void)
{
    check_strings();
    struct state s;
    memset(&s, 0, sizeof(s));
    s.fx = fx_create(4, NULL);

    /* outside a simulated process: an empty list, not a crash */
    int n = -1;
    struct ibv_device **list = ibv_get_device_list(&n);
    CHECK(list != NULL);
    CHECK_EQ_U64(n, 0);
    if (list) {
        CHECK(list[0] == NULL);
        ibv_free_device_list(list);
    }
    CHECK_EQ_U64(ibv_fork_init(), 0);
    CHECK_EQ_U64(ibv_is_fork_initialized(), IBV_FORK_UNNEEDED);

    enum sim_run_result r = fx_run_pair(s.fx, "client", client, "server", server, &s);
    CHECK_EQ_U64(r, SIM_RUN_DONE);
    if (r != SIM_RUN_DONE)
        sim_deadlock_report(s.fx->sim, stderr);
    fx_destroy(s.fx);
    return test_summary();
}
