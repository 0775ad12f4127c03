/* RIMA append queues at the verbs level (include/rnicsim/rima.h,
 * sim/nic/aq.c, docs/rima.md):
 *
 *  - basic: one sender appends a 100 B and a 5000 B message (2 packets at
 *    MTU 4096); the receiver gets one IBV_WC_RECV_APPEND per message with
 *    wr_id = offset, byte_len, qp_num, src_qp, and the bytes at the offset;
 *    the sender gets IBV_WC_APPEND. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <rnicsim/rima.h>

#include "fixture.h"
#include "test.h"

/* ---------------------------------------------------------------- helpers */

static int post_append(struct fx_rc *rc, uint32_t aqn, uint64_t wr_id, size_t off, uint32_t len,
                       unsigned flags)
{
    struct ibv_sge sge = {.addr = (uintptr_t)(rc->buf + off), .length = len, .lkey = rc->mr->lkey};
    struct ibv_send_wr wr = {
        .wr_id = wr_id, .sg_list = &sge, .num_sge = 1, .send_flags = flags | IBV_SEND_SIGNALED};
    ibv_wr_append(&wr, aqn);
    struct ibv_send_wr *bad = NULL;
    return ibv_post_send(rc->qp, &wr, &bad);
}

/* Payload byte i of message m of sender s: recognisable everywhere. */
static uint8_t pat(unsigned s, unsigned m, uint32_t i)
{
    return (uint8_t)(s * 71u + m * 13u + i * 7u + (i >> 8));
}

static void fill(uint8_t *p, unsigned s, unsigned m, uint32_t len)
{
    for (uint32_t i = 0; i < len; i++)
        p[i] = pat(s, m, i);
}

static bool intact(const uint8_t *p, unsigned s, unsigned m, uint32_t len)
{
    for (uint32_t i = 0; i < len; i++)
        if (p[i] != pat(s, m, i))
            return false;
    return true;
}

/* ---------------------------------------------------------------- basic */

struct basic_st {
    struct fx *fx;
    struct fx_rc srv, cl;
    bool recv_ok[2], send_ok[2];
};

static void basic_client(void *arg)
{
    struct basic_st *s = arg;
    CHECK(fx_rc_open(s->fx, &s->cl, NULL) == 0);
    CHECK(fx_rc_connect(&s->cl, "b/c", "b/s") == 0);
    uint32_t aqn = 0;
    fx_get(s->fx, "b/aqn", &aqn, sizeof(aqn));
    const uint32_t len[2] = {100, 5000};
    for (unsigned m = 0; m < 2; m++) {
        fill(s->cl.buf + 8192u * m, 0, m, len[m]);
        CHECK(post_append(&s->cl, aqn, 10 + m, 8192u * m, len[m], 0) == 0);
    }
    for (unsigned m = 0; m < 2; m++) {
        struct ibv_wc wc;
        CHECK(fx_poll_one(s->cl.scq, &wc) == 1);
        s->send_ok[m] =
            wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_APPEND && wc.wr_id == 10 + m;
    }
    fx_barrier(s->fx, "b/end", "client", "server");
    fx_rc_close(&s->cl);
}

static void basic_server(void *arg)
{
    struct basic_st *s = arg;
    CHECK(fx_rc_open(s->fx, &s->srv, NULL) == 0);
    struct ibv_aq_init_attr ia = {.cq = s->srv.rcq,
                                  .attr = {.region_bytes = 1 << 20, .chunk_bytes = 1 << 18}};
    struct ibv_aq *aq = ibv_create_aq(s->srv.pd, &ia);
    CHECK(aq != NULL);
    if (!aq)
        return;
    fx_put(s->fx, "b/aqn", &aq->aq_num, sizeof(aq->aq_num));
    CHECK(fx_rc_connect(&s->srv, "b/s", "b/c") == 0);
    const uint32_t len[2] = {100, 5000};
    uint64_t expect_off = 0;
    for (unsigned m = 0; m < 2; m++) {
        struct ibv_wc wc;
        CHECK(fx_poll_one(s->srv.rcq, &wc) == 1);
        s->recv_ok[m] = wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RECV_APPEND &&
                        wc.wr_id == expect_off && wc.byte_len == len[m] &&
                        wc.qp_num == s->srv.qp->qp_num && wc.src_qp == s->cl.qp->qp_num &&
                        intact(aq->buf + wc.wr_id, 0, m, len[m]);
        expect_off += len[m];
    }
    struct ibv_aq_attr qa;
    CHECK(ibv_query_aq(aq, &qa) == 0);
    CHECK_EQ_U64(qa.tail, 5100);
    CHECK_EQ_U64(qa.used_bytes, 5100);
    CHECK_EQ_U64(qa.messages, 2);
    CHECK_EQ_U64(qa.bytes, 5100);
    fx_barrier(s->fx, "b/end", "server", "client");
    CHECK(ibv_destroy_aq(aq) == 0);
    fx_rc_close(&s->srv);
}

static void test_basic(void)
{
    struct basic_st s = {.fx = fx_create(1, NULL)};
    fx_spawn(s.fx, 0, "server", basic_server, &s);
    fx_spawn(s.fx, 1, "client", basic_client, &s);
    CHECK(fx_run(s.fx) == SIM_RUN_DONE);
    for (unsigned m = 0; m < 2; m++) {
        CHECK(s.recv_ok[m]);
        CHECK(s.send_ok[m]);
    }
    fx_destroy(s.fx);
}

int main(void)
{
    test_basic();
    return test_summary();
}
