/* Work queues grow as posting needs (sim/nic/qp.c): a QP's rings start
 * with 8 slots and double up to max_send_wr / max_recv_wr, which stay the
 * limits ibv_post_send / ibv_post_recv answer with ENOMEM (and *bad_wr at
 * the first WR that does not fit), as on a ring allocated whole.
 *  - client: max_send_wr 100 (not a power of two).  3 SENDs complete
 *    first, so the ring's head is off slot 0; then one list of 101 inline
 *    SENDs: ENOMEM at the 101st, the ring grew 8 -> 16 -> 32 -> 64 -> 100
 *    under the posted WRs, wrapped; each completes in order with its
 *    wr_id and carries its own bytes (a slot's inline buffer moved with
 *    it).  Then the rest in lists of 37 as completions free slots: the
 *    indices wrap the grown ring at every offset, still in order.
 *  - server: max_recv_wr 50.  3 receives taken first, then one list of
 *    51: ENOMEM at the 51st; then it reposts as messages land, and checks
 *    every message's bytes and wr_id in posting order. */
#include <stdio.h>
#include <string.h>

#include "fixture.h"
#include "test.h"

enum {
    SQ_DEPTH = 100,
    RQ_DEPTH = 50,
    FIRST = 3, /* messages before the long lists */
    MSG_BYTES = 24,
    N_MSGS = 400,
    BATCH = 37,
    SLOT = 64, /* receive i lands in slot i % RQ_DEPTH of the buffer */
};

struct state {
    struct fx *fx;
    struct fx_rc client, server;
};

static void msg_bytes(char *b, uint32_t i)
{
    memset(b, 0, MSG_BYTES);
    snprintf(b, MSG_BYTES, "message %05u of %u", i, (unsigned)N_MSGS);
}

/* A list of n inline SENDs, messages first..first+n-1. */
static int post_sends(struct fx_rc *rc, uint32_t first, uint32_t n, struct ibv_send_wr **bad)
{
    static struct ibv_send_wr wr[SQ_DEPTH + 1];
    static struct ibv_sge sge[SQ_DEPTH + 1];
    static char bytes[SQ_DEPTH + 1][MSG_BYTES];
    for (uint32_t k = 0; k < n; k++) {
        msg_bytes(bytes[k], first + k);
        sge[k] = (struct ibv_sge){.addr = (uintptr_t)bytes[k], .length = MSG_BYTES, .lkey = 0};
        wr[k] = (struct ibv_send_wr){.wr_id = first + k,
                                     .sg_list = &sge[k],
                                     .num_sge = 1,
                                     .opcode = IBV_WR_SEND,
                                     .send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE,
                                     .next = k + 1 < n ? &wr[k + 1] : NULL};
    }
    int rc_ = ibv_post_send(rc->qp, &wr[0], bad);
    /* inline: the bytes were copied at post; scribbling on them now
     * must not change what is sent */
    for (uint32_t k = 0; k < n; k++)
        memset(bytes[k], 0xee, MSG_BYTES);
    if (rc_ && *bad)
        return (int)(*bad - &wr[0]) + 1000 * rc_;
    return rc_;
}

static void client(void *arg)
{
    struct state *s = arg;
    struct fx_rc *rc = &s->client;
    struct fx_rc_opts o;
    fx_rc_default_opts(&o);
    o.max_send_wr = SQ_DEPTH;
    o.max_inline = 64;
    o.cq_depth = 512;
    CHECK(fx_rc_open(s->fx, rc, &o) == 0);
    CHECK(fx_rc_connect(rc, "client", "server") == 0);
    fx_barrier(s->fx, "first recvs posted", "client", "server");
    struct ibv_send_wr *bad = NULL;
    bool in_order = true, ok = true;
    CHECK(post_sends(rc, 0, FIRST, &bad) == 0);
    uint32_t posted = FIRST, done = 0;
    for (; done < FIRST; done++) {
        struct ibv_wc wc;
        CHECK(fx_poll_one(rc->scq, &wc) == 1);
        in_order = in_order && wc.wr_id == done && wc.status == IBV_WC_SUCCESS;
    }
    fx_barrier(s->fx, "long recv list posted", "client", "server");
    /* ENOMEM at WR index 100 of the list */
    CHECK_EQ_U64(post_sends(rc, FIRST, SQ_DEPTH + 1, &bad), 1000 * ENOMEM + SQ_DEPTH);
    posted += SQ_DEPTH;
    while (done < N_MSGS) {
        struct ibv_wc wc;
        CHECK(fx_poll_one(rc->scq, &wc) == 1);
        in_order = in_order && wc.wr_id == done;
        ok = ok && wc.status == IBV_WC_SUCCESS;
        done++;
        uint32_t room = SQ_DEPTH - (posted - done);
        if (posted < N_MSGS && room >= BATCH) {
            uint32_t n = N_MSGS - posted < BATCH ? N_MSGS - posted : BATCH;
            CHECK(post_sends(rc, posted, n, &bad) == 0);
            posted += n;
        }
    }
    CHECK(in_order);
    CHECK(ok);
    fx_barrier(s->fx, "done", "client", "server");
    fx_rc_close(rc);
}

static void server(void *arg)
{
    struct state *s = arg;
    struct fx_rc *rc = &s->server;
    struct fx_rc_opts o;
    fx_rc_default_opts(&o);
    o.max_recv_wr = RQ_DEPTH;
    o.cq_depth = 512;
    CHECK(fx_rc_open(s->fx, rc, &o) == 0);
    CHECK(fx_rc_connect(rc, "server", "client") == 0);
    for (uint32_t i = 0; i < FIRST; i++)
        CHECK(fx_post_recv(rc, i, (size_t)i * SLOT, SLOT) == 0);
    fx_barrier(s->fx, "first recvs posted", "server", "client");
    bool in_order = true, bytes_ok = true;
    for (uint32_t i = 0; i < N_MSGS; i++) {
        if (i == FIRST) { /* the long list: receives FIRST .. FIRST + RQ_DEPTH */
            static struct ibv_recv_wr rwr[RQ_DEPTH + 1];
            static struct ibv_sge sge[RQ_DEPTH + 1];
            struct ibv_recv_wr *rbad = NULL;
            for (uint32_t k = 0; k <= RQ_DEPTH; k++) {
                uint64_t id = FIRST + k;
                sge[k] = (struct ibv_sge){.addr = (uintptr_t)rc->buf + (id % RQ_DEPTH) * SLOT,
                                          .length = SLOT,
                                          .lkey = rc->mr->lkey};
                rwr[k] = (struct ibv_recv_wr){.wr_id = id,
                                              .sg_list = &sge[k],
                                              .num_sge = 1,
                                              .next = k < RQ_DEPTH ? &rwr[k + 1] : NULL};
            }
            CHECK_EQ_U64(ibv_post_recv(rc->qp, &rwr[0], &rbad), ENOMEM);
            CHECK(rbad == &rwr[RQ_DEPTH]);
            fx_barrier(s->fx, "long recv list posted", "server", "client");
        }
        struct ibv_wc wc;
        CHECK(fx_poll_one(rc->rcq, &wc) == 1);
        in_order =
            in_order && wc.wr_id == i && wc.status == IBV_WC_SUCCESS && wc.byte_len == MSG_BYTES;
        char want[MSG_BYTES];
        msg_bytes(want, i);
        bytes_ok =
            bytes_ok && memcmp(rc->buf + (uint64_t)(i % RQ_DEPTH) * SLOT, want, MSG_BYTES) == 0;
        /* past the long list the slot is free again: its next receive */
        if (i >= FIRST && i + RQ_DEPTH < N_MSGS)
            CHECK(fx_post_recv(rc, i + RQ_DEPTH, (size_t)(i % RQ_DEPTH) * SLOT, SLOT) == 0);
    }
    CHECK(in_order);
    CHECK(bytes_ok);
    fx_barrier(s->fx, "done", "server", "client");
    fx_rc_close(rc);
}

int main(void)
{
    struct state s;
    memset(&s, 0, sizeof(s));
    s.fx = fx_create(3, NULL);
    enum sim_run_result r = fx_run_pair(s.fx, "client", client, "server", server, &s);
    CHECK_EQ_U64(r, SIM_RUN_DONE);
    if (r != SIM_RUN_DONE)
        sim_deadlock_report(s.fx->sim, stderr);
    fx_destroy(s.fx);
    return test_summary();
}
