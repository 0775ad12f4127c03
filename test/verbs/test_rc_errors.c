/* RC error paths: completion statuses for protection and length errors
 * (with the QP in ERR and the following WRs flushed), and the errno /
 * bad_wr answers of ibv_post_send / ibv_post_recv for misuse. */
#include <stdio.h>
#include <string.h>

#include "fixture.h"
#include "test.h"

enum scenario {
    SC_BAD_LKEY,
    SC_BAD_RKEY,
    SC_OUT_OF_BOUNDS,
    SC_NO_REMOTE_WRITE,
    SC_RECV_TOO_SMALL,
    SC_POST_ERRORS,
    SC_QUEUE_FULL,
    SC_COUNT,
};

static const char *const sc_names[SC_COUNT] = {
    [SC_BAD_LKEY] = "bad_lkey",         [SC_BAD_RKEY] = "bad_rkey",
    [SC_OUT_OF_BOUNDS] = "oob",         [SC_NO_REMOTE_WRITE] = "no_remote_write",
    [SC_RECV_TOO_SMALL] = "recv_small", [SC_POST_ERRORS] = "post_errors",
    [SC_QUEUE_FULL] = "queue_full",
};

struct state {
    struct fx *fx;
    struct fx_rc client[SC_COUNT], server[SC_COUNT];
};

static enum ibv_qp_state qp_state(struct ibv_qp *qp)
{
    struct ibv_qp_attr a;
    struct ibv_qp_init_attr ia;
    if (ibv_query_qp(qp, &a, IBV_QP_STATE, &ia))
        return IBV_QPS_UNKNOWN;
    return a.qp_state;
}

static void key(char *buf, size_t n, enum scenario sc, const char *who)
{
    snprintf(buf, n, "%s/%s", sc_names[sc], who);
}

static void connect_pair(struct state *s, struct fx_rc *rc, enum scenario sc, bool is_client,
                         const struct fx_rc_opts *o)
{
    char me[48], peer[48];
    key(me, sizeof(me), sc, is_client ? "client" : "server");
    key(peer, sizeof(peer), sc, is_client ? "server" : "client");
    CHECK(fx_rc_open(s->fx, rc, o) == 0);
    CHECK(fx_rc_connect(rc, me, peer) == 0);
}

static void done(struct state *s, enum scenario sc, bool is_client)
{
    char name[48];
    key(name, sizeof(name), sc, "done");
    fx_barrier(s->fx, name, is_client ? "client" : "server", is_client ? "server" : "client");
}

static void expect_status(struct ibv_cq *cq, uint64_t wr_id, enum ibv_wc_status st)
{
    struct ibv_wc wc;
    CHECK(fx_poll_one(cq, &wc) == 1);
    CHECK_EQ_U64(wc.wr_id, wr_id);
    CHECK_EQ_U64(wc.status, st);
    if (wc.status != st)
        fprintf(stderr, "  wr %llu: got \"%s\", want \"%s\"\n", (unsigned long long)wc.wr_id,
                ibv_wc_status_str(wc.status), ibv_wc_status_str(st));
}

/* A WRITE with a corrupted lkey fails locally; the two WRs behind it and
 * one posted after the failure are flushed. */
static void client_bad_lkey(struct fx_rc *rc)
{
    struct ibv_sge sg[3];
    struct ibv_send_wr wr[3], *bad = NULL;
    for (int i = 0; i < 3; i++) {
        sg[i] = (struct ibv_sge){
            .addr = (uintptr_t)rc->buf + 4096u * (unsigned)i, .length = 64, .lkey = rc->mr->lkey};
        wr[i] = (struct ibv_send_wr){.wr_id = 1 + (uint64_t)i,
                                     .sg_list = &sg[i],
                                     .num_sge = 1,
                                     .opcode = IBV_WR_RDMA_WRITE,
                                     .send_flags = IBV_SEND_SIGNALED,
                                     .next = i < 2 ? &wr[i + 1] : NULL};
        wr[i].wr.rdma.remote_addr = rc->remote.addr;
        wr[i].wr.rdma.rkey = rc->remote.rkey;
    }
    sg[0].lkey ^= 0x00ff0000u;
    CHECK(ibv_post_send(rc->qp, &wr[0], &bad) == 0);
    expect_status(rc->scq, 1, IBV_WC_LOC_PROT_ERR);
    expect_status(rc->scq, 2, IBV_WC_WR_FLUSH_ERR);
    expect_status(rc->scq, 3, IBV_WC_WR_FLUSH_ERR);
    CHECK_EQ_U64(qp_state(rc->qp), IBV_QPS_ERR);
    /* posting in ERR is accepted and flushed */
    CHECK(fx_post(rc, IBV_WR_RDMA_WRITE, 4, 0, 64, 0, IBV_SEND_SIGNALED) == 0);
    expect_status(rc->scq, 4, IBV_WC_WR_FLUSH_ERR);
}

static void client_remote_access(struct fx_rc *rc, enum scenario sc)
{
    struct ibv_sge sge = {.addr = (uintptr_t)rc->buf, .length = 100, .lkey = rc->mr->lkey};
    struct ibv_send_wr wr = {.wr_id = 7,
                             .sg_list = &sge,
                             .num_sge = 1,
                             .opcode = IBV_WR_RDMA_WRITE,
                             .send_flags = IBV_SEND_SIGNALED};
    wr.wr.rdma.remote_addr = rc->remote.addr;
    wr.wr.rdma.rkey = rc->remote.rkey;
    if (sc == SC_BAD_RKEY)
        wr.wr.rdma.rkey ^= 0x5a5a00u;
    if (sc == SC_OUT_OF_BOUNDS)
        wr.wr.rdma.remote_addr = rc->remote.addr + rc->buf_bytes - 10;
    struct ibv_send_wr *bad = NULL;
    CHECK(ibv_post_send(rc->qp, &wr, &bad) == 0);
    expect_status(rc->scq, 7, IBV_WC_REM_ACCESS_ERR);
    CHECK_EQ_U64(qp_state(rc->qp), IBV_QPS_ERR);
}

/* Misuse answered by errno at post time. */
static void client_post_errors(struct state *s, struct fx_rc *rc)
{
    struct ibv_sge sge[8];
    for (int i = 0; i < 8; i++)
        sge[i] = (struct ibv_sge){
            .addr = (uintptr_t)rc->buf + 64u * (unsigned)i, .length = 8, .lkey = rc->mr->lkey};
    struct ibv_send_wr wr = {.wr_id = 1, .sg_list = sge, .num_sge = 1, .opcode = IBV_WR_SEND};
    struct ibv_send_wr *bad = NULL;
    struct ibv_recv_wr rwr = {.wr_id = 1, .sg_list = sge, .num_sge = 1};
    struct ibv_recv_wr *rbad = NULL;

    /* RESET: send and receive refused */
    CHECK_EQ_U64(ibv_post_send(rc->qp, &wr, &bad), EINVAL);
    CHECK(bad == &wr);
    CHECK_EQ_U64(ibv_post_recv(rc->qp, &rwr, &rbad), EINVAL);
    CHECK(rbad == &rwr);
    /* INIT: receives allowed, sends not */
    CHECK(fx_rc_to_init(rc) == 0);
    bad = NULL;
    CHECK_EQ_U64(ibv_post_send(rc->qp, &wr, &bad), EINVAL);
    CHECK(bad == &wr);
    CHECK(ibv_post_recv(rc->qp, &rwr, &rbad) == 0);
    /* RTR: still no sends */
    char me[48], peer[48];
    key(me, sizeof(me), SC_POST_ERRORS, "client");
    key(peer, sizeof(peer), SC_POST_ERRORS, "server");
    fx_put(s->fx, me, &rc->local, sizeof(rc->local));
    fx_get(s->fx, peer, &rc->remote, sizeof(rc->remote));
    CHECK(fx_rc_to_rtr(rc, &rc->remote) == 0);
    bad = NULL;
    CHECK_EQ_U64(ibv_post_send(rc->qp, &wr, &bad), EINVAL);
    CHECK(bad == &wr);
    CHECK(fx_rc_to_rts(rc) == 0);

    /* RTS: argument errors */
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.wr.rdma.remote_addr = rc->remote.addr;
    wr.wr.rdma.rkey = rc->remote.rkey;
    wr.num_sge = (int)rc->opts.max_send_sge + 1; /* too many SGEs */
    bad = NULL;
    CHECK_EQ_U64(ibv_post_send(rc->qp, &wr, &bad), EINVAL);
    CHECK(bad == &wr);
    wr.num_sge = 1;
    wr.opcode = IBV_WR_SEND_WITH_INV; /* not an RC requester opcode here */
    CHECK_EQ_U64(ibv_post_send(rc->qp, &wr, &bad), EINVAL);
    wr.opcode = IBV_WR_RDMA_READ; /* inline READ */
    wr.send_flags = IBV_SEND_INLINE;
    CHECK_EQ_U64(ibv_post_send(rc->qp, &wr, &bad), EINVAL);
    wr.opcode = IBV_WR_RDMA_WRITE; /* inline above max_inline_data */
    struct ibv_qp_attr qa;
    struct ibv_qp_init_attr qia;
    CHECK(ibv_query_qp(rc->qp, &qa, IBV_QP_CAP, &qia) == 0);
    struct ibv_sge big = {
        .addr = (uintptr_t)rc->buf, .length = qa.cap.max_inline_data + 1, .lkey = rc->mr->lkey};
    wr.sg_list = &big;
    CHECK_EQ_U64(ibv_post_send(rc->qp, &wr, &bad), EINVAL);
    wr.sg_list = sge;
    wr.send_flags = 0;
    wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD; /* atomic needs one 8-byte SGE */
    sge[0].length = 4;
    CHECK_EQ_U64(ibv_post_send(rc->qp, &wr, &bad), EINVAL);
    wr.num_sge = 2;
    sge[0].length = 8;
    CHECK_EQ_U64(ibv_post_send(rc->qp, &wr, &bad), EINVAL);
    CHECK(ibv_post_send(rc->qp, NULL, &bad) == EINVAL);

    /* A list whose second WR is bad: the first is posted and completes. */
    struct ibv_send_wr w2[2] = {
        {.wr_id = 21,
         .sg_list = sge,
         .num_sge = 1,
         .opcode = IBV_WR_RDMA_WRITE,
         .send_flags = IBV_SEND_SIGNALED,
         .next = &w2[1]},
        {.wr_id = 22,
         .sg_list = sge,
         .num_sge = 9,
         .opcode = IBV_WR_RDMA_WRITE,
         .send_flags = IBV_SEND_SIGNALED},
    };
    for (int i = 0; i < 2; i++) {
        w2[i].wr.rdma.remote_addr = rc->remote.addr;
        w2[i].wr.rdma.rkey = rc->remote.rkey;
    }
    bad = NULL;
    CHECK_EQ_U64(ibv_post_send(rc->qp, &w2[0], &bad), EINVAL);
    CHECK(bad == &w2[1]);
    expect_status(rc->scq, 21, IBV_WC_SUCCESS);
    struct ibv_wc wc;
    CHECK(ibv_poll_cq(rc->scq, 1, &wc) == 0);
    CHECK_EQ_U64(qp_state(rc->qp), IBV_QPS_RTS);

    /* too many receive SGEs */
    rwr.num_sge = (int)rc->opts.max_recv_sge + 1;
    CHECK_EQ_U64(ibv_post_recv(rc->qp, &rwr, &rbad), EINVAL);
    CHECK(rbad == &rwr);
}

/* SQ with 4 slots, a list of 6: ENOMEM at the fifth, the first four run. */
static void client_queue_full(struct fx_rc *rc)
{
    struct ibv_sge sge = {.addr = (uintptr_t)rc->buf, .length = 64, .lkey = rc->mr->lkey};
    struct ibv_send_wr wr[6], *bad = NULL;
    for (int i = 0; i < 6; i++) {
        wr[i] = (struct ibv_send_wr){.wr_id = 30 + (uint64_t)i,
                                     .sg_list = &sge,
                                     .num_sge = 1,
                                     .opcode = IBV_WR_RDMA_WRITE,
                                     .send_flags = IBV_SEND_SIGNALED,
                                     .next = i < 5 ? &wr[i + 1] : NULL};
        wr[i].wr.rdma.remote_addr = rc->remote.addr;
        wr[i].wr.rdma.rkey = rc->remote.rkey;
    }
    CHECK_EQ_U64(ibv_post_send(rc->qp, &wr[0], &bad), ENOMEM);
    CHECK(bad == &wr[4]);
    for (int i = 0; i < 4; i++)
        expect_status(rc->scq, 30 + (uint64_t)i, IBV_WC_SUCCESS);
    /* RQ with 4 slots */
    struct ibv_recv_wr rwr[5], *rbad = NULL;
    for (int i = 0; i < 5; i++)
        rwr[i] = (struct ibv_recv_wr){.wr_id = 40 + (uint64_t)i,
                                      .sg_list = &sge,
                                      .num_sge = 1,
                                      .next = i < 4 ? &rwr[i + 1] : NULL};
    CHECK_EQ_U64(ibv_post_recv(rc->qp, &rwr[0], &rbad), ENOMEM);
    CHECK(rbad == &rwr[4]);
}

static void client(void *arg)
{
    struct state *s = arg;
    struct fx_rc_opts o;
    for (int sc = 0; sc < SC_COUNT; sc++) {
        struct fx_rc *rc = &s->client[sc];
        fx_rc_default_opts(&o);
        if (sc == SC_QUEUE_FULL)
            o.max_send_wr = o.max_recv_wr = 4;
        if (sc == SC_POST_ERRORS) {
            CHECK(fx_rc_open(s->fx, rc, &o) == 0);
            client_post_errors(s, rc);
        } else {
            connect_pair(s, rc, (enum scenario)sc, true, &o);
        }
        switch ((enum scenario)sc) {
        case SC_BAD_LKEY:
            client_bad_lkey(rc);
            break;
        case SC_BAD_RKEY:
        case SC_OUT_OF_BOUNDS:
        case SC_NO_REMOTE_WRITE:
            client_remote_access(rc, (enum scenario)sc);
            break;
        case SC_RECV_TOO_SMALL: {
            CHECK(fx_post(rc, IBV_WR_SEND, 50, 0, 64, 0, IBV_SEND_SIGNALED) == 0);
            struct ibv_wc wc;
            CHECK(fx_poll_one(rc->scq, &wc) == 1);
            CHECK_EQ_U64(wc.wr_id, 50);
            CHECK(wc.status != IBV_WC_SUCCESS);
            break;
        }
        case SC_POST_ERRORS:
            break;
        case SC_QUEUE_FULL:
            client_queue_full(rc);
            break;
        case SC_COUNT:
            break;
        }
        done(s, (enum scenario)sc, true);
        fx_rc_close(rc);
    }
}

static void server(void *arg)
{
    struct state *s = arg;
    struct fx_rc_opts o;
    for (int sc = 0; sc < SC_COUNT; sc++) {
        struct fx_rc *rc = &s->server[sc];
        fx_rc_default_opts(&o);
        if (sc == SC_NO_REMOTE_WRITE)
            o.access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ;
        connect_pair(s, rc, (enum scenario)sc, false, &o);
        if (sc == SC_RECV_TOO_SMALL) {
            CHECK(fx_post_recv(rc, 60, 0, 16) == 0);
            expect_status(rc->rcq, 60, IBV_WC_LOC_LEN_ERR);
            CHECK_EQ_U64(qp_state(rc->qp), IBV_QPS_ERR);
        }
        done(s, (enum scenario)sc, false);
        fx_rc_close(rc);
    }
}

int main(void)
{
    struct state s;
    memset(&s, 0, sizeof(s));
    s.fx = fx_create(2, NULL);
    enum sim_run_result r = fx_run_pair(s.fx, "client", client, "server", server, &s);
    CHECK_EQ_U64(r, SIM_RUN_DONE);
    if (r != SIM_RUN_DONE)
        sim_deadlock_report(s.fx->sim, stderr);
    fx_destroy(s.fx);
    return test_summary();
}
