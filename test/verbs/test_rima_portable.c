/* The portable append-queue layer protocols/rima (rima.h,
 * docs/rima-portable.md) at the verbs level.  rima.c and rima_sw.c are
 * compiled into this test (the verbs tests link only the verbs library).
 *
 *  - errors: rima_aq_create with NULL pd / cq / opts, region 0, a SW region
 *    not a multiple of 8 or above 4 GiB, an unknown mode, a HW region not a
 *    multiple of 4 KiB, IBV_AQ_F_RESET_ON_EMPTY -> EINVAL; RIMA_HW on a
 *    device without append queues (rima.tpt_entries = 0) -> EOPNOTSUPP,
 *    where RIMA_AUTO falls back to SW; rima_remote_decode of a bad magic /
 *    mode -> EINVAL and an encode/decode round trip; rima_sender_create
 *    with NULL pd / qp / cq / dst, region 0, mode 0, window > 4096 ->
 *    EINVAL; rima_post_append with 5 SGEs, an unknown flag, a message
 *    longer than the region, IBV_SEND_INLINE above RIMA_INLINE_MAX ->
 *    EINVAL; a full window -> ENOMEM; rima_aq_consume of NULL, of a message
 *    beyond the queue, and twice -> EINVAL;
 *  - exchange, both modes: one sender appends messages of 24, 0, 16, 32,
 *    8 and 32 bytes (SW, region 64 B: both 32s straddle the end and are
 *    reserved again; 32 = the SW maximum, half the region) or 1000, 0,
 *    3000, 2048, 100, 2000 bytes (HW, region 4 KiB: the 2048 goes to
 *    offset 0 after padding) with a window of 2; the receiver gets each
 *    once, in order, intact, inside the region, with the sender's QP; the
 *    sender gets one completion per append in order, and ENOMEM when its
 *    window is full; the stats count them;
 *  - a bad completion mid-batch (HW): the good ones before it are returned,
 *    the error comes with the next call, the completions after it with the
 *    one after (nothing dropped);
 *  - a hole (HW: the receiving QP fails mid-message): not delivered, the
 *    head moves over it once the next message is consumed. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <rnicsim/rima.h>

#include "fixture.h"
#include "protocols/rima/rima.c"
#include "protocols/rima/rima_sw.c"
#include "test.h"

/* ---------------------------------------------------------------- errors */

struct err_st {
    struct fx *fx;
    struct fx_rc rc;
    bool no_hw; /* the device has no append queues */
};

static void err_prog(void *arg)
{
    struct err_st *s = arg;
    CHECK(fx_rc_open(s->fx, &s->rc, NULL) == 0);
    struct ibv_pd *pd = s->rc.pd;
    struct ibv_cq *cq = s->rc.rcq;
    struct rima_aq_opts o = {.mode = RIMA_SW, .region_bytes = 4096};

    errno = 0;
    CHECK(!rima_aq_create(NULL, cq, &o) && errno == EINVAL);
    errno = 0;
    CHECK(!rima_aq_create(pd, NULL, &o) && errno == EINVAL);
    errno = 0;
    CHECK(!rima_aq_create(pd, cq, NULL) && errno == EINVAL);
    enum rima_mode modes[] = {RIMA_SW, RIMA_HW, RIMA_AUTO};
    for (int i = 0; i < 3; i++) {
        o = (struct rima_aq_opts){.mode = modes[i], .region_bytes = 0};
        errno = 0;
        CHECK(!rima_aq_create(pd, cq, &o) && errno == EINVAL);
    }
    o = (struct rima_aq_opts){.mode = RIMA_SW, .region_bytes = 12};
    errno = 0;
    CHECK(!rima_aq_create(pd, cq, &o) && errno == EINVAL);
    o.region_bytes = RIMA_SW_MAX_REGION_BYTES + 8;
    errno = 0;
    CHECK(!rima_aq_create(pd, cq, &o) && errno == EINVAL);
    o = (struct rima_aq_opts){.mode = (enum rima_mode)9, .region_bytes = 4096};
    errno = 0;
    CHECK(!rima_aq_create(pd, cq, &o) && errno == EINVAL);

    o = (struct rima_aq_opts){.mode = RIMA_HW, .region_bytes = 12345};
    errno = 0;
    CHECK(!rima_aq_create(pd, cq, &o) && errno == (s->no_hw ? EOPNOTSUPP : EINVAL));
    o = (struct rima_aq_opts){
        .mode = RIMA_HW, .region_bytes = 4096, .flags = IBV_AQ_F_RESET_ON_EMPTY};
    errno = 0;
    CHECK(!rima_aq_create(pd, cq, &o) && errno == EINVAL);
    o = (struct rima_aq_opts){.mode = RIMA_HW, .region_bytes = 4096};
    struct rima_aq *hw = rima_aq_create(pd, cq, &o);
    if (s->no_hw) {
        CHECK(!hw && errno == EOPNOTSUPP);
    } else {
        CHECK(hw && rima_aq_mode(hw) == RIMA_HW);
        CHECK(hw && rima_aq_destroy(hw) == 0);
    }
    o.mode = RIMA_AUTO;
    struct rima_aq *aq = rima_aq_create(pd, cq, &o);
    CHECK(aq != NULL);
    if (!aq)
        return;
    CHECK(rima_aq_mode(aq) == (s->no_hw ? RIMA_SW : RIMA_HW));
    CHECK(rima_aq_consume(aq, NULL) == EINVAL);
    struct rima_msg far = {.pos = 8192, .span = 8, .len = 8};
    CHECK(rima_aq_consume(aq, &far) == EINVAL);
    CHECK(rima_aq_destroy(aq) == 0);
    CHECK(rima_aq_destroy(NULL) == EINVAL);

    /* the descriptor */
    struct rima_aq_remote r = {.mode = RIMA_SW,
                               .aq_num = 7,
                               .region_addr = 0x123456789aull,
                               .region_bytes = 1u << 20,
                               .region_rkey = 0xabcd,
                               .ctrl_addr = 0xfedcba98ull,
                               .ctrl_rkey = 0x55aa},
                          back;
    uint8_t wire[RIMA_REMOTE_BYTES];
    rima_remote_encode(&r, wire);
    CHECK(rima_remote_decode(wire, &back) == 0);
    /* field by field: the struct's padding bytes are unspecified (an
     * automatic object's initializer need not zero them; under ASan they
     * held stack garbage and a memcmp failed) */
    CHECK(r.mode == back.mode && r.aq_num == back.aq_num && r.region_addr == back.region_addr &&
          r.region_bytes == back.region_bytes && r.region_rkey == back.region_rkey &&
          r.ctrl_addr == back.ctrl_addr && r.ctrl_rkey == back.ctrl_rkey);
    wire[0] ^= 1;
    errno = 0;
    CHECK(rima_remote_decode(wire, &back) == -1 && errno == EINVAL);
    wire[0] ^= 1;
    wire[5] = 0; /* mode AUTO is never exported */
    errno = 0;
    CHECK(rima_remote_decode(wire, &back) == -1 && errno == EINVAL);

    /* the sender (the QP stays in RESET: nothing reaches the wire) */
    struct ibv_qp *qp = s->rc.qp;
    struct ibv_cq *scq = s->rc.scq;
    struct rima_sender_opts so = {.window = 2};
    errno = 0;
    CHECK(!rima_sender_create(NULL, qp, scq, &r, &so) && errno == EINVAL);
    errno = 0;
    CHECK(!rima_sender_create(pd, NULL, scq, &r, &so) && errno == EINVAL);
    errno = 0;
    CHECK(!rima_sender_create(pd, qp, NULL, &r, &so) && errno == EINVAL);
    errno = 0;
    CHECK(!rima_sender_create(pd, qp, scq, NULL, &so) && errno == EINVAL);
    struct rima_aq_remote bad = r;
    bad.region_bytes = 0;
    errno = 0;
    CHECK(!rima_sender_create(pd, qp, scq, &bad, &so) && errno == EINVAL);
    bad = r;
    bad.mode = RIMA_AUTO;
    errno = 0;
    CHECK(!rima_sender_create(pd, qp, scq, &bad, &so) && errno == EINVAL);
    bad = r;
    bad.region_bytes = 12;
    errno = 0;
    CHECK(!rima_sender_create(pd, qp, scq, &bad, &so) && errno == EINVAL);
    struct rima_sender_opts big = {.window = 5000};
    errno = 0;
    CHECK(!rima_sender_create(pd, qp, scq, &r, &big) && errno == EINVAL);
    struct rima_sender *snd = rima_sender_create(pd, qp, scq, &r, &so);
    CHECK(snd != NULL);
    if (snd) {
        struct ibv_sge sg[5];
        for (int i = 0; i < 5; i++)
            sg[i] = (struct ibv_sge){(uintptr_t)s->rc.buf, 8, s->rc.mr->lkey};
        CHECK(rima_post_append(snd, 1, sg, 5, 0) == EINVAL);
        CHECK(rima_post_append(snd, 1, sg, -1, 0) == EINVAL);
        CHECK(rima_post_append(snd, 1, NULL, 1, 0) == EINVAL);
        CHECK(rima_post_append(snd, 1, sg, 1, IBV_SEND_FENCE) == EINVAL);
        struct ibv_sge huge = {(uintptr_t)s->rc.buf, (1u << 20) + 8, s->rc.mr->lkey};
        CHECK(rima_post_append(snd, 1, &huge, 1, 0) == EINVAL);
        struct ibv_sge inl = {(uintptr_t)s->rc.buf, RIMA_INLINE_MAX + 1, s->rc.mr->lkey};
        CHECK(rima_post_append(snd, 1, &inl, 1, IBV_SEND_INLINE) == EINVAL);
        CHECK(rima_post_append(NULL, 1, sg, 1, 0) == EINVAL);
        struct ibv_sge half = {(uintptr_t)s->rc.buf, (1u << 19) + 1, s->rc.mr->lkey};
        CHECK(rima_post_append(snd, 1, &half, 1, 0) == EINVAL); /* SW: > region / 2 */
        CHECK_EQ_U64(rima_sender_outstanding(snd), 0);
        CHECK(rima_sender_destroy(snd) == 0);
    }
    fx_rc_close(&s->rc);
}

static void test_errors(bool no_hw)
{
    struct nic_params np;
    nic_params_default(&np);
    if (no_hw)
        np.rima_tpt_entries = 0;
    struct err_st s = {.fx = fx_create(1, &np), .no_hw = no_hw};
    fx_spawn(s.fx, 0, "errors", err_prog, &s);
    CHECK(fx_run(s.fx) == SIM_RUN_DONE);
    fx_destroy(s.fx);
}

/* ---------------------------------------------------------------- exchange */

enum { EX_MSGS = 6 };

struct ex_st {
    struct fx *fx;
    enum rima_mode mode;
    uint64_t region;
    uint32_t lens[EX_MSGS];
    struct fx_rc srv, q, cli;
    struct rima_aq *aq;
    uint8_t wire[RIMA_REMOTE_BYTES];
    uint32_t got, in_order, intact, inside, right_qp;
    uint32_t sent_ok, enomem, done_sender;
    struct rima_aq_stats st;
};

static uint8_t ex_byte(unsigned m, uint32_t i)
{
    return (uint8_t)(m * 29u + i * 3u + 1u);
}

static void ex_server(void *arg)
{
    struct ex_st *s = arg;
    CHECK(fx_rc_open(s->fx, &s->srv, NULL) == 0);
    struct rima_aq_opts o = {.mode = s->mode, .region_bytes = s->region, .recv_depth = 8};
    s->aq = rima_aq_create(s->srv.pd, s->srv.rcq, &o);
    CHECK(s->aq != NULL);
    if (!s->aq)
        return;
    CHECK(rima_aq_mode(s->aq) == s->mode);
    struct ibv_qp_init_attr ia;
    memset(&ia, 0, sizeof(ia));
    rima_aq_qp_init_attr(s->aq, &ia);
    CHECK((s->mode == RIMA_SW) == (ia.srq != NULL));
    CHECK(fx_rc_open_shared(&s->q, &s->srv, ia.srq) == 0);
    CHECK(fx_rc_connect(&s->q, "ex/s", "ex/c") == 0);
    struct rima_aq_remote r;
    memset(&r, 0, sizeof(r));
    CHECK(rima_aq_export(s->aq, &r) == 0);
    CHECK(r.mode == s->mode && r.region_bytes == s->region);
    rima_remote_encode(&r, s->wire);
    fx_put(s->fx, "ex/aq", s->wire, sizeof(s->wire));
    uint8_t *base = rima_aq_buf(s->aq);
    while (s->got < EX_MSGS) {
        struct rima_msg m;
        int n = rima_poll_aq(s->aq, 1, &m);
        CHECK(n >= 0);
        if (n < 0)
            break;
        if (n == 0)
            continue;
        unsigned k = s->got++;
        s->in_order += m.len == s->lens[k];
        s->inside += m.addr == base + m.offset && m.offset + m.len <= s->region;
        s->right_qp += m.qp_num == s->q.qp->qp_num && m.src_qp == s->cli.qp->qp_num;
        bool ok = m.len == s->lens[k];
        for (uint32_t i = 0; ok && i < m.len; i++)
            ok = m.addr[i] == ex_byte(k, i);
        s->intact += ok;
        CHECK(rima_aq_consume(s->aq, &m) == 0);
        if (m.len)
            CHECK(rima_aq_consume(s->aq, &m) == EINVAL); /* twice */
    }
    CHECK(rima_aq_query(s->aq, &s->st) == 0);
    fx_barrier(s->fx, "ex/end", "s", "c");
    fx_rc_close(&s->q);
    CHECK(rima_aq_destroy(s->aq) == 0);
    fx_rc_close(&s->srv);
}

static void ex_client(void *arg)
{
    struct ex_st *s = arg;
    CHECK(fx_rc_open(s->fx, &s->cli, NULL) == 0);
    CHECK(fx_rc_connect(&s->cli, "ex/c", "ex/s") == 0);
    uint8_t wire[RIMA_REMOTE_BYTES];
    struct rima_aq_remote r;
    memset(&r, 0, sizeof(r));
    fx_get(s->fx, "ex/aq", wire, sizeof(wire));
    CHECK(rima_remote_decode(wire, &r) == 0);
    struct rima_sender_opts so = {.window = 2};
    struct rima_sender *snd = rima_sender_create(s->cli.pd, s->cli.qp, s->cli.scq, &r, &so);
    CHECK(snd != NULL);
    if (!snd)
        return;
    unsigned posted = 0, done = 0;
    while (done < EX_MSGS) {
        while (posted < EX_MSGS) {
            if (rima_sender_outstanding(snd) == 2) { /* the window is full */
                struct ibv_sge sge = {(uintptr_t)s->cli.buf + 3 * 8192, 8, s->cli.mr->lkey};
                s->enomem += rima_post_append(snd, 99, &sge, 1, IBV_SEND_SIGNALED) == ENOMEM;
                break;
            }
            uint8_t *p = s->cli.buf + (size_t)(posted % 2) * 8192;
            for (uint32_t i = 0; i < s->lens[posted]; i++)
                p[i] = ex_byte(posted, i);
            struct ibv_sge sge = {(uintptr_t)p, s->lens[posted], s->cli.mr->lkey};
            CHECK(rima_post_append(snd, 100 + posted, &sge, 1, IBV_SEND_SIGNALED) == 0);
            posted++;
        }
        struct rima_send_wc wc[4];
        int n = rima_poll_sender(snd, 4, wc);
        CHECK(n >= 0);
        if (n < 0)
            break;
        for (int i = 0; i < n; i++) {
            s->sent_ok += wc[i].status == IBV_WC_SUCCESS && wc[i].wr_id == 100 + done &&
                          wc[i].byte_len == s->lens[done];
            done++;
        }
    }
    s->done_sender = done;
    CHECK_EQ_U64(rima_sender_outstanding(snd), 0);
    fx_barrier(s->fx, "ex/end", "c", "s");
    CHECK(rima_sender_destroy(snd) == 0);
    fx_rc_close(&s->cli);
}

static void test_exchange(enum rima_mode mode, uint64_t region, const uint32_t *lens)
{
    struct ex_st s;
    memset(&s, 0, sizeof(s));
    s.fx = fx_create(1, NULL);
    s.mode = mode;
    s.region = region;
    memcpy(s.lens, lens, sizeof(s.lens));
    fx_spawn(s.fx, 1, "server", ex_server, &s);
    fx_spawn(s.fx, 0, "client", ex_client, &s);
    CHECK(fx_run(s.fx) == SIM_RUN_DONE);
    CHECK_EQ_U64(s.got, EX_MSGS);
    CHECK_EQ_U64(s.in_order, EX_MSGS);
    CHECK_EQ_U64(s.intact, EX_MSGS);
    CHECK_EQ_U64(s.inside, EX_MSGS);
    CHECK_EQ_U64(s.right_qp, EX_MSGS);
    CHECK_EQ_U64(s.done_sender, EX_MSGS);
    CHECK_EQ_U64(s.sent_ok, EX_MSGS);
    CHECK(s.enomem > 0); /* window 2, 6 messages */
    uint64_t bytes = 0;
    for (int i = 0; i < EX_MSGS; i++)
        bytes += lens[i];
    CHECK_EQ_U64(s.st.messages, EX_MSGS);
    CHECK_EQ_U64(s.st.consumed, EX_MSGS);
    CHECK_EQ_U64(s.st.bytes, bytes);
    CHECK(s.st.head_pos >= bytes);
    CHECK(s.st.mode == mode);
    if (mode == RIMA_SW) {
        CHECK(s.st.footprint_bytes >= region + 4096);
        CHECK(s.st.pad_bytes >= 64); /* two abandoned 32-byte reservations */
    } else {
        /* 4096 - 4000 before the 2048, 4096 - 2148 before the 2000 */
        CHECK_EQ_U64(s.st.pad_bytes, 96 + 1948);
        CHECK_EQ_U64(s.st.head_pos, 2 * 4096 + 2000);
    }
    printf("%s: head at %" PRIu64 ", %" PRIu64 " padding bytes\n", mode == RIMA_SW ? "sw" : "hw",
           s.st.head_pos, s.st.pad_bytes);
    fx_destroy(s.fx);
}

/* ---------------------------------------------------------------- a bad completion mid-batch */

struct mid_st {
    struct fx *fx;
    struct fx_rc srv, cli;
    int r1, r2, r3, e2;
    struct rima_msg m1, m3;
};

static void mid_client(void *arg)
{
    struct mid_st *s = arg;
    CHECK(fx_rc_open(s->fx, &s->cli, NULL) == 0);
    CHECK(fx_rc_connect(&s->cli, "m/c", "m/s") == 0);
    uint32_t aqn = 0;
    fx_get(s->fx, "m/aqn", &aqn, sizeof(aqn));
    memset(s->cli.buf, 0xa1, 300);
    struct ibv_sge sge = {(uintptr_t)s->cli.buf, 300, s->cli.mr->lkey};
    struct ibv_send_wr wr = {.wr_id = 1, .sg_list = &sge, .num_sge = 1};
    struct ibv_send_wr *bad = NULL;
    ibv_wr_append(&wr, aqn);
    CHECK(ibv_post_send(s->cli.qp, &wr, &bad) == 0);
    /* a SEND whose receive completion lands on the AQ's CQ too: not an append */
    CHECK(fx_post(&s->cli, IBV_WR_SEND, 2, 0, 64, 0, 0) == 0);
    sge.length = 500;
    wr.wr_id = 3;
    CHECK(ibv_post_send(s->cli.qp, &wr, &bad) == 0);
    fx_put(s->fx, "m/sent", NULL, 0);
    fx_barrier(s->fx, "m/end", "client", "server");
    fx_rc_close(&s->cli);
}

/* HW mode: the AQ's CQ holds an append (300 B), a foreign receive
 * completion, an append (500 B).  rima_poll_aq(8) returns the first append
 * (it used to fail the whole batch with EPROTO and drop it), the next call
 * reports EPROTO, the one after returns the second append. */
static void mid_server(void *arg)
{
    struct mid_st *s = arg;
    CHECK(fx_rc_open(s->fx, &s->srv, NULL) == 0);
    struct rima_aq_opts o = {.mode = RIMA_HW, .region_bytes = 1u << 16};
    struct rima_aq *aq = rima_aq_create(s->srv.pd, s->srv.rcq, &o);
    CHECK(aq != NULL);
    if (!aq)
        return;
    struct rima_aq_remote r;
    CHECK(rima_aq_export(aq, &r) == 0);
    fx_put(s->fx, "m/aqn", &r.aq_num, sizeof(r.aq_num));
    CHECK(fx_rc_connect(&s->srv, "m/s", "m/c") == 0);
    CHECK(fx_post_recv(&s->srv, 9, 0, 4096) == 0);
    fx_get(s->fx, "m/sent", NULL, 0);
    sim_proc_sleep(100 * SIM_US); /* all three completions are in the CQ */
    struct rima_msg out[8];
    s->r1 = rima_poll_aq(aq, 8, out);
    s->m1 = out[0];
    errno = 0;
    s->r2 = rima_poll_aq(aq, 8, out);
    s->e2 = errno;
    s->r3 = rima_poll_aq(aq, 8, out);
    s->m3 = out[0];
    fx_barrier(s->fx, "m/end", "server", "client");
    CHECK(rima_aq_destroy(aq) == 0);
    fx_rc_close(&s->srv);
}

static void test_mid_batch_error(void)
{
    static struct mid_st s;
    memset(&s, 0, sizeof(s));
    s.fx = fx_create(5, NULL);
    CHECK(fx_run_pair(s.fx, "server", mid_server, "client", mid_client, &s) == SIM_RUN_DONE);
    CHECK_EQ_U64(s.r1, 1);
    CHECK_EQ_U64(s.m1.offset, 0);
    CHECK_EQ_U64(s.m1.len, 300);
    CHECK_EQ_U64(s.r2, (uint64_t)-1);
    CHECK_EQ_U64(s.e2, EPROTO);
    CHECK_EQ_U64(s.r3, 1);
    CHECK_EQ_U64(s.m3.offset, 300);
    CHECK_EQ_U64(s.m3.len, 500);
    fx_destroy(s.fx);
}

/* ---------------------------------------------------------------- holes (HW) */

struct phole_st {
    struct fx *fx;
    struct fx_rc srv, srv2, cli, cli2;
    int r1;
    struct rima_msg m;
    uint64_t head_pos, delivered;
};

enum { PH_BIG = 1 << 20, PH_SMALL = 100 };

static void phole_client(void *arg)
{
    struct phole_st *s = arg;
    CHECK(fx_rc_open(s->fx, &s->cli, NULL) == 0);
    CHECK(fx_rc_open(s->fx, &s->cli2, NULL) == 0);
    CHECK(fx_rc_connect(&s->cli, "ph/c1", "ph/s1") == 0);
    CHECK(fx_rc_connect(&s->cli2, "ph/c2", "ph/s2") == 0);
    uint32_t aqn = 0;
    fx_get(s->fx, "ph/aqn", &aqn, sizeof(aqn));
    struct ibv_sge sge = {(uintptr_t)s->cli.buf, PH_BIG, s->cli.mr->lkey};
    struct ibv_send_wr wr = {.wr_id = 1, .sg_list = &sge, .num_sge = 1};
    struct ibv_send_wr *bad = NULL;
    ibv_wr_append(&wr, aqn);
    CHECK(ibv_post_send(s->cli.qp, &wr, &bad) == 0);
    fx_get(s->fx, "ph/go", NULL, 0);
    memset(s->cli2.buf, 0x5c, PH_SMALL);
    struct ibv_sge sge2 = {(uintptr_t)s->cli2.buf, PH_SMALL, s->cli2.mr->lkey};
    struct ibv_send_wr wr2 = {.wr_id = 2, .sg_list = &sge2, .num_sge = 1};
    ibv_wr_append(&wr2, aqn);
    CHECK(ibv_post_send(s->cli2.qp, &wr2, &bad) == 0);
    fx_barrier(s->fx, "ph/end", "client", "server");
    fx_rc_close(&s->cli2);
    fx_rc_close(&s->cli);
}

/* HW mode: a 1 MiB append whose receiving QP is put in error after its
 * first packet leaves a hole the NIC announces with IBV_WC_WR_FLUSH_ERR;
 * rima_poll_aq does not deliver it, treats it as consumed padding, and
 * returns the next message (100 B at 1 MiB); consuming that moves the head
 * over both (it waited forever before). */
static void phole_server(void *arg)
{
    struct phole_st *s = arg;
    CHECK(fx_rc_open(s->fx, &s->srv, NULL) == 0);
    CHECK(fx_rc_open_shared(&s->srv2, &s->srv, NULL) == 0);
    struct ibv_cq *cq = ibv_create_cq(s->srv.ctx, 64, NULL, NULL, 0);
    struct rima_aq_opts o = {.mode = RIMA_HW, .region_bytes = 4u << 20};
    struct rima_aq *aq = cq ? rima_aq_create(s->srv.pd, cq, &o) : NULL;
    CHECK(aq != NULL);
    if (!aq)
        return;
    struct rima_aq_remote r;
    CHECK(rima_aq_export(aq, &r) == 0);
    fx_put(s->fx, "ph/aqn", &r.aq_num, sizeof(r.aq_num));
    CHECK(fx_rc_connect(&s->srv, "ph/s1", "ph/c1") == 0);
    CHECK(fx_rc_connect(&s->srv2, "ph/s2", "ph/c2") == 0);
    struct ibv_aq_attr qa = {0};
    while (ibv_query_aq(aq->hw, &qa) == 0 && qa.messages == 0)
        sim_proc_sleep(SIM_US);
    struct ibv_qp_attr err = {.qp_state = IBV_QPS_ERR};
    CHECK(ibv_modify_qp(s->srv.qp, &err, IBV_QP_STATE) == 0);
    fx_put(s->fx, "ph/go", NULL, 0);
    sim_proc_sleep(50 * SIM_US); /* the flush CQE and the 100 B append are in */
    struct rima_msg out[4];
    s->r1 = rima_poll_aq(aq, 4, out);
    s->m = out[0];
    if (s->r1 == 1)
        CHECK(rima_aq_consume(aq, &out[0]) == 0);
    struct rima_aq_stats st;
    CHECK(rima_aq_query(aq, &st) == 0);
    s->head_pos = st.head_pos;
    s->delivered = st.messages;
    fx_barrier(s->fx, "ph/end", "server", "client");
    CHECK(rima_aq_destroy(aq) == 0);
    fx_rc_close(&s->srv2);
    CHECK(ibv_destroy_cq(cq) == 0);
    fx_rc_close(&s->srv);
}

static void test_hole_hw(void)
{
    static struct phole_st s;
    memset(&s, 0, sizeof(s));
    s.fx = fx_create(9, NULL);
    CHECK(fx_run_pair(s.fx, "server", phole_server, "client", phole_client, &s) == SIM_RUN_DONE);
    CHECK_EQ_U64(s.r1, 1);
    CHECK_EQ_U64(s.m.offset, PH_BIG);
    CHECK_EQ_U64(s.m.len, PH_SMALL);
    CHECK_EQ_U64(s.delivered, 1);
    CHECK_EQ_U64(s.head_pos, PH_BIG + PH_SMALL);
    fx_destroy(s.fx);
}

int main(void)
{
    test_errors(false);
    test_errors(true);
    static const uint32_t sw_lens[EX_MSGS] = {24, 0, 16, 32, 8, 32};
    static const uint32_t hw_lens[EX_MSGS] = {1000, 0, 3000, 2048, 100, 2000};
    test_exchange(RIMA_SW, 64, sw_lens);
    test_exchange(RIMA_HW, 4096, hw_lens);
    test_mid_batch_error();
    test_hole_hw();
    return test_summary();
}
