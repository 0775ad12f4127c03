/* RC operations end to end over the model: every opcode moves the right
 * bytes (including a 1 MiB multi-packet WRITE and an inline SEND whose
 * source is overwritten right after posting), immediates arrive with
 * IBV_WC_WITH_IMM, atomics return the old value and update the target,
 * and only signaled WRs produce send completions. */
#include <arpa/inet.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "fixture.h"
#include "test.h"

struct state {
    struct fx *fx;
    struct fx_rc client, server;
    sim_time_t write8_latency_ps, write1m_ps;
};

enum {
    OFF_SEND = 0,
    OFF_WRITE = 64 * 1024,
    WRITE_BYTES = 1 << 20,
    OFF_READ = (1 << 20) + 128 * 1024,
    READ_BYTES = 64 * 1024,
    OFF_ATOMIC = (1 << 20) + 256 * 1024,
    OFF_ATOMIC_RESULT = OFF_ATOMIC + 64,
    OFF_INLINE = OFF_ATOMIC + 4096,
    OFF_SMALL = OFF_ATOMIC + 8192,
};

static uint8_t pattern(size_t i, unsigned seed)
{
    return (uint8_t)((i * 131u + seed * 17u) >> 2);
}

static void fill(uint8_t *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        p[i] = pattern(i, seed);
}

static bool check_pattern(const uint8_t *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != pattern(i, seed))
            return false;
    return true;
}

static void expect_send_cqe(struct fx_rc *rc, uint64_t wr_id, enum ibv_wc_opcode op)
{
    struct ibv_wc wc;
    CHECK(fx_poll_one(rc->scq, &wc) == 1);
    CHECK_EQ_U64(wc.status, IBV_WC_SUCCESS);
    CHECK_EQ_U64(wc.wr_id, wr_id);
    CHECK_EQ_U64(wc.opcode, op);
    CHECK_EQ_U64(wc.qp_num, rc->qp->qp_num);
}

static void client(void *arg)
{
    struct state *s = arg;
    struct fx_rc *rc = &s->client;
    CHECK(fx_rc_open(s->fx, rc, NULL) == 0);
    CHECK(fx_rc_connect(rc, "ops/client", "ops/server") == 0);
    fx_barrier(s->fx, "ops/ready", "client", "server");

    /* 1. SEND 4 KiB, 2. SEND_WITH_IMM 100 B */
    fill(rc->buf + OFF_SEND, 4096, 1);
    CHECK(fx_post(rc, IBV_WR_SEND, 1, OFF_SEND, 4096, 0, IBV_SEND_SIGNALED) == 0);
    expect_send_cqe(rc, 1, IBV_WC_SEND);
    struct ibv_sge sge = {
        .addr = (uintptr_t)(rc->buf + OFF_SEND), .length = 100, .lkey = rc->mr->lkey};
    struct ibv_send_wr wr = {.wr_id = 2,
                             .sg_list = &sge,
                             .num_sge = 1,
                             .opcode = IBV_WR_SEND_WITH_IMM,
                             .send_flags = IBV_SEND_SIGNALED,
                             .imm_data = htonl(0x12345678)};
    struct ibv_send_wr *bad = NULL;
    CHECK(ibv_post_send(rc->qp, &wr, &bad) == 0);
    expect_send_cqe(rc, 2, IBV_WC_SEND);

    /* 3. RDMA WRITE 1 MiB (256 packets at 4 KiB MTU) */
    fill(rc->buf + OFF_WRITE, WRITE_BYTES, 3);
    sim_time_t t0 = sim_now(s->fx->sim);
    CHECK(fx_post(rc, IBV_WR_RDMA_WRITE, 3, OFF_WRITE, WRITE_BYTES, OFF_WRITE, IBV_SEND_SIGNALED) ==
          0);
    expect_send_cqe(rc, 3, IBV_WC_RDMA_WRITE);
    s->write1m_ps = sim_now(s->fx->sim) - t0;
    fx_barrier(s->fx, "ops/write", "client", "server");

    /* 4. RDMA WRITE WITH IMM (consumes a receive) */
    fill(rc->buf + OFF_SMALL, 512, 4);
    wr = (struct ibv_send_wr){.wr_id = 4,
                              .sg_list = &sge,
                              .num_sge = 1,
                              .opcode = IBV_WR_RDMA_WRITE_WITH_IMM,
                              .send_flags = IBV_SEND_SIGNALED,
                              .imm_data = htonl(0xabcdef01)};
    sge = (struct ibv_sge){
        .addr = (uintptr_t)(rc->buf + OFF_SMALL), .length = 512, .lkey = rc->mr->lkey};
    wr.wr.rdma.remote_addr = rc->remote.addr + OFF_SMALL;
    wr.wr.rdma.rkey = rc->remote.rkey;
    CHECK(ibv_post_send(rc->qp, &wr, &bad) == 0);
    expect_send_cqe(rc, 4, IBV_WC_RDMA_WRITE);

    /* 5. RDMA READ 64 KiB of what the server prepared */
    fx_barrier(s->fx, "ops/read", "client", "server");
    CHECK(fx_post(rc, IBV_WR_RDMA_READ, 5, OFF_READ, READ_BYTES, OFF_READ, IBV_SEND_SIGNALED) == 0);
    expect_send_cqe(rc, 5, IBV_WC_RDMA_READ);
    CHECK(check_pattern(rc->buf + OFF_READ, READ_BYTES, 5));

    /* 6. atomics on the server's 8-byte slot (initially 100) */
    struct ibv_sge asge = {
        .addr = (uintptr_t)(rc->buf + OFF_ATOMIC_RESULT), .length = 8, .lkey = rc->mr->lkey};
    struct ibv_send_wr awr = {.wr_id = 6,
                              .sg_list = &asge,
                              .num_sge = 1,
                              .opcode = IBV_WR_ATOMIC_FETCH_AND_ADD,
                              .send_flags = IBV_SEND_SIGNALED};
    awr.wr.atomic.remote_addr = rc->remote.addr + OFF_ATOMIC;
    awr.wr.atomic.rkey = rc->remote.rkey;
    awr.wr.atomic.compare_add = 5;
    CHECK(ibv_post_send(rc->qp, &awr, &bad) == 0);
    expect_send_cqe(rc, 6, IBV_WC_FETCH_ADD);
    uint64_t old;
    memcpy(&old, rc->buf + OFF_ATOMIC_RESULT, 8);
    CHECK_EQ_U64(old, 100);
    awr.wr_id = 7;
    awr.opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
    awr.wr.atomic.compare_add = 105;
    awr.wr.atomic.swap = 7;
    CHECK(ibv_post_send(rc->qp, &awr, &bad) == 0);
    expect_send_cqe(rc, 7, IBV_WC_COMP_SWAP);
    memcpy(&old, rc->buf + OFF_ATOMIC_RESULT, 8);
    CHECK_EQ_U64(old, 105);
    awr.wr_id = 8; /* compare fails: returns 7, target unchanged */
    awr.wr.atomic.compare_add = 1;
    awr.wr.atomic.swap = 9;
    CHECK(ibv_post_send(rc->qp, &awr, &bad) == 0);
    expect_send_cqe(rc, 8, IBV_WC_COMP_SWAP);
    memcpy(&old, rc->buf + OFF_ATOMIC_RESULT, 8);
    CHECK_EQ_U64(old, 7);
    fx_barrier(s->fx, "ops/atomic", "client", "server");

    /* 7. inline SEND: the source is overwritten right after posting */
    struct ibv_qp_attr qa;
    struct ibv_qp_init_attr qia;
    CHECK(ibv_query_qp(rc->qp, &qa, IBV_QP_CAP, &qia) == 0);
    uint32_t inl = qa.cap.max_inline_data < 64 ? qa.cap.max_inline_data : 64;
    CHECK(inl > 0);
    fill(rc->buf + OFF_INLINE, inl, 7);
    CHECK(fx_post(rc, IBV_WR_SEND, 9, OFF_INLINE, inl, 0, IBV_SEND_SIGNALED | IBV_SEND_INLINE) ==
          0);
    memset(rc->buf + OFF_INLINE, 0xee, inl);
    expect_send_cqe(rc, 9, IBV_WC_SEND);
    fx_put(s->fx, "ops/inline_len", &inl, sizeof(inl));

    /* 8. unsignaled + signaled: only the signaled WR completes */
    sim_time_t t1 = sim_now(s->fx->sim);
    CHECK(fx_post(rc, IBV_WR_RDMA_WRITE, 10, OFF_SMALL, 8, OFF_SMALL, 0) == 0);
    s->write8_latency_ps = 0;
    CHECK(fx_post(rc, IBV_WR_RDMA_WRITE, 11, OFF_SMALL, 8, OFF_SMALL, 0) == 0);
    CHECK(fx_post(rc, IBV_WR_RDMA_WRITE, 12, OFF_SMALL, 8, OFF_SMALL, IBV_SEND_SIGNALED) == 0);
    expect_send_cqe(rc, 12, IBV_WC_RDMA_WRITE);
    struct ibv_wc wc;
    CHECK(ibv_poll_cq(rc->scq, 1, &wc) == 0);
    (void)t1;

    /* latency of one signaled 8-byte WRITE, post to CQE */
    t1 = sim_now(s->fx->sim);
    CHECK(fx_post(rc, IBV_WR_RDMA_WRITE, 13, OFF_SMALL, 8, OFF_SMALL, IBV_SEND_SIGNALED) == 0);
    expect_send_cqe(rc, 13, IBV_WC_RDMA_WRITE);
    s->write8_latency_ps = sim_now(s->fx->sim) - t1;

    fx_barrier(s->fx, "ops/done", "client", "server");
    fx_rc_close(rc);
}

static void server(void *arg)
{
    struct state *s = arg;
    struct fx_rc *rc = &s->server;
    CHECK(fx_rc_open(s->fx, rc, NULL) == 0);
    CHECK(fx_rc_connect(rc, "ops/server", "ops/client") == 0);
    uint64_t init = 100;
    memcpy(rc->buf + OFF_ATOMIC, &init, 8);
    for (uint64_t i = 0; i < 4; i++)
        CHECK(fx_post_recv(rc, 100 + i, OFF_SEND + i * 8192, 8192) == 0);
    fx_barrier(s->fx, "ops/ready", "server", "client");

    struct ibv_wc wc;
    /* 1. SEND */
    CHECK(fx_poll_one(rc->rcq, &wc) == 1);
    CHECK_EQ_U64(wc.status, IBV_WC_SUCCESS);
    CHECK_EQ_U64(wc.wr_id, 100);
    CHECK_EQ_U64(wc.opcode, IBV_WC_RECV);
    CHECK_EQ_U64(wc.byte_len, 4096);
    CHECK(!(wc.wc_flags & IBV_WC_WITH_IMM));
    CHECK_EQ_U64(wc.qp_num, rc->qp->qp_num);
    CHECK(check_pattern(rc->buf + OFF_SEND, 4096, 1));
    /* 2. SEND_WITH_IMM */
    CHECK(fx_poll_one(rc->rcq, &wc) == 1);
    CHECK_EQ_U64(wc.status, IBV_WC_SUCCESS);
    CHECK_EQ_U64(wc.wr_id, 101);
    CHECK_EQ_U64(wc.opcode, IBV_WC_RECV);
    CHECK_EQ_U64(wc.byte_len, 100);
    CHECK(wc.wc_flags & IBV_WC_WITH_IMM);
    CHECK_EQ_U64(ntohl(wc.imm_data), 0x12345678);

    /* 3. the 1 MiB WRITE landed (no receive consumed) */
    fx_barrier(s->fx, "ops/write", "server", "client");
    CHECK(check_pattern(rc->buf + OFF_WRITE, WRITE_BYTES, 3));
    CHECK(ibv_poll_cq(rc->rcq, 1, &wc) == 0);

    /* 4. WRITE_WITH_IMM consumes receive 102 */
    CHECK(fx_poll_one(rc->rcq, &wc) == 1);
    CHECK_EQ_U64(wc.status, IBV_WC_SUCCESS);
    CHECK_EQ_U64(wc.wr_id, 102);
    CHECK_EQ_U64(wc.opcode, IBV_WC_RECV_RDMA_WITH_IMM);
    CHECK_EQ_U64(wc.byte_len, 512);
    CHECK(wc.wc_flags & IBV_WC_WITH_IMM);
    CHECK_EQ_U64(ntohl(wc.imm_data), 0xabcdef01);
    CHECK(check_pattern(rc->buf + OFF_SMALL, 512, 4));

    /* 5. data for the READ */
    fill(rc->buf + OFF_READ, READ_BYTES, 5);
    fx_barrier(s->fx, "ops/read", "server", "client");

    /* 6. the atomic target ends at 7 */
    fx_barrier(s->fx, "ops/atomic", "server", "client");
    uint64_t v;
    memcpy(&v, rc->buf + OFF_ATOMIC, 8);
    CHECK_EQ_U64(v, 7);

    /* 7. inline SEND carries the bytes as they were at post time */
    CHECK(fx_poll_one(rc->rcq, &wc) == 1);
    CHECK_EQ_U64(wc.status, IBV_WC_SUCCESS);
    CHECK_EQ_U64(wc.wr_id, 103);
    uint32_t inl = 0;
    fx_get(s->fx, "ops/inline_len", &inl, sizeof(inl));
    CHECK_EQ_U64(wc.byte_len, inl);
    CHECK(check_pattern(rc->buf + OFF_SEND + 3 * 8192, inl, 7));

    fx_barrier(s->fx, "ops/done", "server", "client");
    fx_rc_close(rc);
}

int main(void)
{
    struct state s;
    memset(&s, 0, sizeof(s));
    s.fx = fx_create(1, NULL);
    enum sim_run_result r = fx_run_pair(s.fx, "client", client, "server", server, &s);
    CHECK_EQ_U64(r, SIM_RUN_DONE);
    if (r != SIM_RUN_DONE)
        sim_deadlock_report(s.fx->sim, stderr);
    printf("8-byte RDMA WRITE post->CQE: %.1f ns; 1 MiB WRITE: %.1f us (%.1f Gb/s)\n",
           sim_ps_to_ns(s.write8_latency_ps), sim_ps_to_us(s.write1m_ps),
           s.write1m_ps ? (double)WRITE_BYTES * 8.0 / ((double)s.write1m_ps / 1e12) / 1e9 : 0.0);
    printf("events: %" PRIu64 "\n", sim_events_executed(s.fx->sim));
    fx_destroy(s.fx);
    return test_summary();
}
