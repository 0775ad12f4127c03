/* UC (unreliable connected) at the verbs level:
 *
 *  - SEND, SEND_WITH_IMM, RDMA WRITE and WRITE_WITH_IMM of several packets
 *    (1 KiB path MTU) arrive intact; the sender completes each WR when its
 *    last packet has left, without any ACK coming back; READ and atomics
 *    are refused at post time (EINVAL);
 *  - a lost packet loses its message and only that one: dropping the
 *    MIDDLE packet of message 2 and the FIRST packet of message 4 of six
 *    delivers 1, 3, 5 and 6, each into the next posted receive (a lost
 *    message consumes none);
 *  - under 1% and 10% random loss some messages are lost, none is
 *    corrupted or delivered twice, they stay in order, and messages after
 *    a loss still arrive. */
#include <arpa/inet.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "fixture.h"
#include "sim/nic/opcode.h"
#include "test.h"

enum {
    MAX_MSG = 3 * 1024 + 100,
    SLOT = 4096,
    N_STREAM = 300,
    OFF_WRITE = 1 << 20,
};

static uint8_t pat(uint32_t seq, uint32_t i)
{
    return (uint8_t)((seq * 37u + i * 11u + (i >> 9)) ^ 0xc3);
}

static void fill(uint8_t *p, uint32_t seq, uint32_t len)
{
    for (uint32_t i = 0; i < len; i++)
        p[i] = pat(seq, i);
}

static bool same(const uint8_t *p, uint32_t seq, uint32_t len)
{
    for (uint32_t i = 0; i < len; i++)
        if (p[i] != pat(seq, i))
            return false;
    return true;
}

static uint32_t msg_len(uint32_t seq)
{
    return 1 + (seq * 2654435761u >> 9) % MAX_MSG;
}

static struct fx_rc_opts uc_opts(void)
{
    struct fx_rc_opts o;
    fx_rc_default_opts(&o);
    o.qp_type = IBV_QPT_UC;
    o.max_send_wr = 512;
    o.max_recv_wr = 512;
    o.cq_depth = 1024;
    o.buf_bytes = 4 << 20;
    return o;
}

static struct fx *uc_fx(uint64_t seed)
{
    struct nic_params np;
    nic_params_default(&np);
    np.max_mtu = IBV_MTU_1024;
    return fx_create(seed, &np);
}

static int post_imm(struct fx_rc *rc, enum ibv_wr_opcode op, uint64_t id, size_t off, uint32_t len,
                    size_t roff, uint32_t imm)
{
    struct ibv_sge sge = {.addr = (uintptr_t)(rc->buf + off), .length = len, .lkey = rc->mr->lkey};
    struct ibv_send_wr wr = {.wr_id = id,
                             .sg_list = &sge,
                             .num_sge = 1,
                             .opcode = op,
                             .send_flags = IBV_SEND_SIGNALED,
                             .imm_data = htonl(imm)};
    wr.wr.rdma.remote_addr = rc->remote.addr + roff;
    wr.wr.rdma.rkey = rc->remote.rkey;
    struct ibv_send_wr *bad = NULL;
    return ibv_post_send(rc->qp, &wr, &bad);
}

/* ---------------------------------------------------------------- basic operations */

struct basic {
    struct fx *fx;
    struct fx_rc c, s;
    struct ibv_wc rwc[3];
    bool write_ok, send_ok, send_imm_ok;
    int read_rc, atomic_rc;
    uint64_t acks;
};

static void basic_client(void *arg)
{
    struct basic *b = arg;
    struct fx_rc *rc = &b->c;
    struct fx_rc_opts o = uc_opts();
    CHECK(fx_rc_open(b->fx, rc, &o) == 0);
    CHECK(fx_rc_connect(rc, "ucb/c", "ucb/s") == 0);
    fx_barrier(b->fx, "ucb/ready", "c", "s");
    fill(rc->buf, 1, 3000);
    fill(rc->buf + 8192, 2, 2500);
    fill(rc->buf + OFF_WRITE, 3, 5000);
    CHECK(fx_post(rc, IBV_WR_SEND, 1, 0, 3000, 0, IBV_SEND_SIGNALED) == 0);
    CHECK(post_imm(rc, IBV_WR_SEND_WITH_IMM, 2, 8192, 2500, 0, 0xfeed) == 0);
    CHECK(fx_post(rc, IBV_WR_RDMA_WRITE, 3, OFF_WRITE, 5000, OFF_WRITE, IBV_SEND_SIGNALED) == 0);
    CHECK(post_imm(rc, IBV_WR_RDMA_WRITE_WITH_IMM, 4, OFF_WRITE, 1000, OFF_WRITE + 8192, 0xbeef) ==
          0);
    b->read_rc = fx_post(rc, IBV_WR_RDMA_READ, 5, 0, 64, 0, IBV_SEND_SIGNALED);
    b->atomic_rc = fx_post(rc, IBV_WR_ATOMIC_FETCH_AND_ADD, 6, 0, 8, 0, IBV_SEND_SIGNALED);
    for (uint64_t id = 1; id <= 4; id++) {
        struct ibv_wc wc;
        CHECK(fx_poll_one(rc->scq, &wc) == 1);
        CHECK_EQ_U64(wc.status, IBV_WC_SUCCESS);
        CHECK_EQ_U64(wc.wr_id, id);
        CHECK_EQ_U64(wc.opcode, id <= 2 ? IBV_WC_SEND : IBV_WC_RDMA_WRITE);
    }
    fx_barrier(b->fx, "ucb/end", "c", "s");
}

static void basic_server(void *arg)
{
    struct basic *b = arg;
    struct fx_rc *rc = &b->s;
    struct fx_rc_opts o = uc_opts();
    CHECK(fx_rc_open(b->fx, rc, &o) == 0);
    CHECK(fx_rc_connect(rc, "ucb/s", "ucb/c") == 0);
    for (unsigned i = 0; i < 3; i++)
        CHECK(fx_post_recv(rc, 10 + i, (size_t)i * SLOT, SLOT) == 0);
    fx_barrier(b->fx, "ucb/ready", "s", "c");
    for (unsigned i = 0; i < 3; i++)
        CHECK(fx_poll_one(rc->rcq, &b->rwc[i]) == 1);
    b->send_ok = same(rc->buf, 1, 3000);
    b->send_imm_ok = same(rc->buf + SLOT, 2, 2500);
    b->write_ok = same(rc->buf + OFF_WRITE, 3, 5000) && same(rc->buf + OFF_WRITE + 8192, 3, 1000);
    fx_barrier(b->fx, "ucb/end", "s", "c");
}

static void test_basic(void)
{
    struct basic b;
    memset(&b, 0, sizeof(b));
    b.fx = uc_fx(1);
    CHECK(fx_run_pair(b.fx, "c", basic_client, "s", basic_server, &b) == SIM_RUN_DONE);
    CHECK_EQ_U64(b.read_rc, EINVAL);   /* UC has no READ ... */
    CHECK_EQ_U64(b.atomic_rc, EINVAL); /* ... and no atomics */
    CHECK_EQ_U64(b.rwc[0].status, IBV_WC_SUCCESS);
    CHECK_EQ_U64(b.rwc[0].wr_id, 10);
    CHECK_EQ_U64(b.rwc[0].opcode, IBV_WC_RECV);
    CHECK_EQ_U64(b.rwc[0].byte_len, 3000);
    CHECK_EQ_U64(b.rwc[0].wc_flags, 0);
    CHECK_EQ_U64(b.rwc[1].wr_id, 11);
    CHECK_EQ_U64(b.rwc[1].byte_len, 2500);
    CHECK(b.rwc[1].wc_flags & IBV_WC_WITH_IMM);
    CHECK_EQ_U64(ntohl(b.rwc[1].imm_data), 0xfeed);
    CHECK_EQ_U64(b.rwc[2].wr_id, 12);
    CHECK_EQ_U64(b.rwc[2].opcode, IBV_WC_RECV_RDMA_WITH_IMM);
    CHECK_EQ_U64(b.rwc[2].byte_len, 1000);
    CHECK_EQ_U64(ntohl(b.rwc[2].imm_data), 0xbeef);
    CHECK(b.send_ok && b.send_imm_ok && b.write_ok);
    /* no ACK, no NAK ever */
    for (unsigned i = 0; i < 2; i++) {
        const struct nic_counters *c = nic_get_counters(b.fx->nic[i]);
        CHECK_EQ_U64(c->acks_tx + c->naks_tx + c->acks_rx + c->naks_rx, 0);
    }
    /* 3 + 3 + 5 + 1 packets at 1 KiB */
    CHECK_EQ_U64(nic_get_counters(b.fx->nic[0])->pkts_tx, 12);
    fx_destroy(b.fx);
}

/* ---------------------------------------------------------------- chosen drops */

struct chosen {
    struct fx *fx;
    struct fx_rc c, s;
    uint32_t first_psn;
    struct ibv_wc rwc[6];
    int n_rwc;
    bool bytes_ok[6];
};

/* Messages of 3 packets each (3000 B at 1 KiB): drop the MIDDLE packet of
 * message 1 and the FIRST packet of message 3 (0-based). */
static bool drop_chosen(struct fx *fx, unsigned node, const struct pkt *p, void *arg)
{
    (void)fx;
    struct chosen *c = arg;
    if (node != 1 || p->opcode >> 5 != 1) /* UC requests arriving at the server */
        return false;
    uint32_t k = (uint32_t)nic_psn_diff(p->psn, c->first_psn);
    return k == 3 * 1 + 1 || k == 3 * 3 + 0;
}

static void chosen_client(void *arg)
{
    struct chosen *c = arg;
    struct fx_rc *rc = &c->c;
    struct fx_rc_opts o = uc_opts();
    CHECK(fx_rc_open(c->fx, rc, &o) == 0);
    c->first_psn = rc->local.psn;
    CHECK(fx_rc_connect(rc, "ucc/c", "ucc/s") == 0);
    fx_barrier(c->fx, "ucc/ready", "c", "s");
    for (uint32_t m = 0; m < 6; m++) {
        fill(rc->buf + m * SLOT, m, 3000);
        CHECK(post_imm(rc, IBV_WR_SEND_WITH_IMM, m, m * SLOT, 3000, 0, m) == 0);
    }
    for (uint32_t m = 0; m < 6; m++) {
        struct ibv_wc wc;
        CHECK(fx_poll_one(rc->scq, &wc) == 1);
        CHECK_EQ_U64(wc.status, IBV_WC_SUCCESS); /* the sender never knows */
        CHECK_EQ_U64(wc.wr_id, m);
    }
    fx_barrier(c->fx, "ucc/end", "c", "s");
}

static void chosen_server(void *arg)
{
    struct chosen *c = arg;
    struct fx_rc *rc = &c->s;
    struct fx_rc_opts o = uc_opts();
    CHECK(fx_rc_open(c->fx, rc, &o) == 0);
    CHECK(fx_rc_connect(rc, "ucc/s", "ucc/c") == 0);
    for (unsigned i = 0; i < 6; i++)
        CHECK(fx_post_recv(rc, i, (size_t)i * SLOT, SLOT) == 0);
    fx_barrier(c->fx, "ucc/ready", "s", "c");
    for (c->n_rwc = 0; c->n_rwc < 4; c->n_rwc++) {
        struct ibv_wc *w = &c->rwc[c->n_rwc];
        CHECK(fx_poll_one(rc->rcq, w) == 1);
        c->bytes_ok[c->n_rwc] = same(rc->buf + w->wr_id * SLOT, ntohl(w->imm_data), w->byte_len);
    }
    fx_barrier(c->fx, "ucc/end", "s", "c");
    sim_proc_sleep(50 * SIM_US);
    struct ibv_wc extra;
    CHECK_EQ_U64(ibv_poll_cq(rc->rcq, 1, &extra), 0); /* nothing else came */
}

static void test_chosen_drops(void)
{
    struct chosen c;
    memset(&c, 0, sizeof(c));
    c.fx = uc_fx(2);
    fx_set_drop_fn(c.fx, drop_chosen, &c);
    CHECK(fx_run_pair(c.fx, "c", chosen_client, "s", chosen_server, &c) == SIM_RUN_DONE);
    static const uint32_t want[4] = {0, 2, 4, 5};
    for (unsigned i = 0; i < 4; i++) {
        CHECK_EQ_U64(c.rwc[i].status, IBV_WC_SUCCESS);
        CHECK_EQ_U64(ntohl(c.rwc[i].imm_data), want[i]);
        CHECK_EQ_U64(c.rwc[i].wr_id, i); /* lost messages consumed no receive */
        CHECK_EQ_U64(c.rwc[i].byte_len, 3000);
        CHECK(c.bytes_ok[i]);
    }
    CHECK_EQ_U64(c.fx->dropped[1], 2);
    const struct nic_counters *sc = nic_get_counters(c.fx->nic[1]);
    CHECK_EQ_U64(sc->uc_msg_drops, 2);
    /* message 1: its LAST arrived after the gap; message 3: MIDDLE and LAST */
    CHECK_EQ_U64(sc->rx_drops, 1 + 2);
    fx_destroy(c.fx);
}

/* ---------------------------------------------------------------- random loss */

struct stream {
    struct fx *fx;
    struct fx_rc c, s;
    bool use_write;
    bool sender_done;
    uint32_t got, in_order, bytes_ok, bad_status, last_seq, max_seq;
    uint32_t sends_ok;
};

static void stream_client(void *arg)
{
    struct stream *st = arg;
    struct fx_rc *rc = &st->c;
    struct fx_rc_opts o = uc_opts();
    CHECK(fx_rc_open(st->fx, rc, &o) == 0);
    CHECK(fx_rc_connect(rc, "ucs/c", "ucs/s") == 0);
    fx_barrier(st->fx, "ucs/ready", "c", "s");
    uint32_t posted = 0, done = 0;
    while (done < N_STREAM) {
        while (posted < N_STREAM && posted - done < 32) {
            uint32_t len = msg_len(posted);
            size_t off = (size_t)posted * SLOT;
            fill(rc->buf + off, posted, len);
            int r = st->use_write ? post_imm(rc, IBV_WR_RDMA_WRITE_WITH_IMM, posted, off, len,
                                             OFF_WRITE + off, posted)
                                  : post_imm(rc, IBV_WR_SEND_WITH_IMM, posted, off, len, 0, posted);
            CHECK(r == 0);
            posted++;
        }
        struct ibv_wc wc;
        CHECK(fx_poll_one(rc->scq, &wc) == 1);
        st->sends_ok += wc.status == IBV_WC_SUCCESS && wc.wr_id == done;
        done++;
    }
    st->sender_done = true;
    fx_barrier(st->fx, "ucs/end", "c", "s");
}

static void stream_server(void *arg)
{
    struct stream *st = arg;
    struct fx_rc *rc = &st->s;
    struct fx_rc_opts o = uc_opts();
    CHECK(fx_rc_open(st->fx, rc, &o) == 0);
    CHECK(fx_rc_connect(rc, "ucs/s", "ucs/c") == 0);
    /* one receive per message: a loss never starves the next one */
    for (uint32_t i = 0; i < N_STREAM; i++)
        CHECK(fx_post_recv(rc, i, (size_t)(i % 128) * SLOT, SLOT) == 0);
    fx_barrier(st->fx, "ucs/ready", "s", "c");
    bool drained = false;
    int64_t prev = -1;
    for (;;) {
        struct ibv_wc wc;
        int n = ibv_poll_cq(rc->rcq, 1, &wc);
        if (n == 1) {
            st->got++;
            if (wc.status != IBV_WC_SUCCESS) {
                st->bad_status++;
                continue;
            }
            uint32_t seq = ntohl(wc.imm_data);
            st->in_order += (int64_t)seq > prev; /* strictly increasing: no duplicate */
            prev = seq;
            st->max_seq = seq;
            const uint8_t *data = st->use_write ? rc->buf + OFF_WRITE + (size_t)seq * SLOT
                                                : rc->buf + (wc.wr_id % 128) * SLOT;
            st->bytes_ok += wc.byte_len == msg_len(seq) && same(data, seq, wc.byte_len);
            continue;
        }
        if (drained)
            break;
        host_note_call();      /* not a spin: we sleep, so the poll heuristic must not park */
        if (st->sender_done) { /* let the last packets land, then take what is left */
            sim_proc_sleep(100 * SIM_US);
            drained = true;
            continue;
        }
        sim_proc_sleep(2 * SIM_US);
    }
    fx_barrier(st->fx, "ucs/end", "s", "c");
}

static void run_stream(double loss, uint64_t seed, bool use_write)
{
    struct stream st;
    memset(&st, 0, sizeof(st));
    st.fx = uc_fx(seed);
    st.use_write = use_write;
    fx_set_loss_all(st.fx, loss);
    enum sim_run_result rr = fx_run_pair(st.fx, "c", stream_client, "s", stream_server, &st);
    CHECK_EQ_U64(rr, SIM_RUN_DONE);
    CHECK_EQ_U64(st.sends_ok, N_STREAM); /* every WR completes at the sender */
    CHECK_EQ_U64(st.bad_status, 0);
    CHECK(st.got < N_STREAM);           /* some messages were lost ... */
    CHECK(st.got > N_STREAM / 2);       /* ... not most */
    CHECK_EQ_U64(st.in_order, st.got);  /* in order, none twice */
    CHECK_EQ_U64(st.bytes_ok, st.got);  /* none corrupted */
    CHECK(st.max_seq >= N_STREAM - 10); /* later ones still arrive */
    const struct nic_counters *sc = nic_get_counters(st.fx->nic[1]);
    /* the responder saw some of the losses (those that cut a message; a
     * whole lost message is invisible to it) */
    CHECK(sc->uc_msg_drops > 0 && sc->uc_msg_drops <= N_STREAM - st.got);
    printf("UC %s, loss %.0f%%: %u of %u messages delivered, %" PRIu64 " packets dropped\n",
           use_write ? "WRITE_WITH_IMM" : "SEND_WITH_IMM", loss * 100, st.got, N_STREAM,
           st.fx->dropped[1]);
    fx_destroy(st.fx);
}

int main(void)
{
    test_basic();
    test_chosen_drops();
    run_stream(0.01, 31, false);
    run_stream(0.10, 32, false);
    run_stream(0.01, 33, true);
    run_stream(0.10, 34, true);
    return test_summary();
}
