/* RC under random packet loss (the fixture's loss hook drops packets at
 * both NICs' ingress, data and ACKs alike, with probability 1% and 10%):
 *
 *  - SENDs of mixed sizes (1 B .. 3 path MTUs, 1 KiB MTU) each arrive
 *    exactly once and in order, bytes verified, every send completion
 *    successful and in posting order;
 *  - WRITEs (plain and with immediate) land every byte; the immediates
 *    arrive exactly once, in order;
 *  - READs of mixed sizes return the right bytes;
 *  - FETCH_ADDs and CMP_SWAPs return the right old values and are applied
 *    exactly once (a lost atomic ACK makes the requester resend; the
 *    responder replays the saved result instead of executing again).
 *
 * The expected values are computed from the sequence numbers, not read
 * back from the model. */
#include <arpa/inet.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixture.h"
#include "sim/trace.h"
#include "test.h"

enum {
    N_SEND = 300,
    N_WRITE = 200,
    N_READ = 100,
    N_ATOMIC = 200,
    WINDOW = 16,
    SLOT_BYTES = 16 * 1024,
    N_RECV_SLOTS = 32,
    BUF_BYTES = 4 << 20,
    OFF_SRC = 0,                         /* client: SEND sources, one slot per window entry */
    OFF_WRITE = 1 << 20,                 /* both: WRITE region */
    OFF_READ = 3 << 20,                  /* server: READ source; client: READ target */
    OFF_RESULTS = (3 << 20) + (1 << 19), /* client: atomic results */
    OFF_COUNTER = BUF_BYTES - 64,        /* server: the atomic target */
    MAX_MSG = 3 * 1024 + 100,            /* 1 KiB path MTU: up to 4 packets */
};

static uint32_t msg_len(uint32_t seq, uint32_t salt)
{
    uint32_t h = (seq + salt) * 2654435761u;
    return 1 + (h >> 7) % MAX_MSG;
}

static uint8_t pat(uint32_t seq, uint32_t i)
{
    return (uint8_t)((seq * 131u + i * 7u + (i >> 8)) ^ 0x5a);
}

static void fill_msg(uint8_t *p, uint32_t seq, uint32_t len)
{
    for (uint32_t i = 0; i < len; i++)
        p[i] = pat(seq, i);
}

static bool check_msg(const uint8_t *p, uint32_t seq, uint32_t len)
{
    for (uint32_t i = 0; i < len; i++)
        if (p[i] != pat(seq, i))
            return false;
    return true;
}

/* WRITE k goes to OFF_WRITE + write_off(k) */
static uint32_t write_off(uint32_t k)
{
    uint32_t off = 0;
    for (uint32_t i = 0; i < k; i++)
        off += (msg_len(i, 7) + 63u) & ~63u;
    return off;
}

struct run {
    struct fx *fx;
    double loss;
    struct fx_rc client, server;
    /* results */
    uint32_t sends_ok, sends_in_order, recvs_ok, recvs_in_order, extra_recvs;
    uint32_t writes_ok, imms_in_order, imms_seen, writes_bytes_ok;
    uint32_t reads_ok, reads_bytes_ok;
    uint32_t atomics_ok, atomics_old_ok;
    uint64_t counter_final;
    bool client_done, server_done;
};

static struct fx_rc_opts loss_opts(void)
{
    struct fx_rc_opts o;
    fx_rc_default_opts(&o);
    o.buf_bytes = BUF_BYTES;
    o.max_send_wr = 128;
    o.max_recv_wr = 128;
    o.cq_depth = 512;
    o.timeout = 8; /* 4.096 us * 2^8 = 1.05 ms: tail losses recover quickly */
    o.retry_cnt = 7;
    o.rnr_retry = 7;
    o.min_rnr_timer = 1; /* 10 us */
    o.max_rd_atomic = 4;
    return o;
}

static int post_wr(struct fx_rc *rc, struct ibv_send_wr *wr)
{
    struct ibv_send_wr *bad = NULL;
    return ibv_post_send(rc->qp, wr, &bad);
}

/* Take one send completion: it must be the next WR in posting order. */
static void expect_send(struct run *r, struct fx_rc *rc, uint64_t want_id, uint32_t *ok,
                        uint32_t *in_order)
{
    struct ibv_wc wc;
    if (fx_poll_one(rc->scq, &wc) != 1)
        return;
    if (wc.status == IBV_WC_SUCCESS)
        (*ok)++;
    else {
        fprintf(stderr, "send wr %" PRIu64 ": %s\n", wc.wr_id, ibv_wc_status_str(wc.status));
        if (sim_trace_enabled(r->fx->sim)) {
            sim_trace_dump(r->fx->sim, stderr, 600);
            sim_trace_enable(r->fx->sim, 0);
        }
    }
    if (wc.wr_id == want_id)
        (*in_order)++;
}

static void client(void *arg)
{
    struct run *r = arg;
    struct fx_rc *rc = &r->client;
    struct fx_rc_opts o = loss_opts();
    CHECK(fx_rc_open(r->fx, rc, &o) == 0);
    CHECK(fx_rc_connect(rc, "loss/client", "loss/server") == 0);
    fx_barrier(r->fx, "loss/ready", "client", "server");

    /* 1. SENDs, up to WINDOW outstanding */
    uint32_t posted = 0, done = 0;
    while (done < N_SEND) {
        while (posted < N_SEND && posted - done < WINDOW) {
            uint32_t len = msg_len(posted, 0);
            size_t off = OFF_SRC + (size_t)(posted % WINDOW) * SLOT_BYTES;
            fill_msg(rc->buf + off, posted, len);
            CHECK(fx_post(rc, IBV_WR_SEND, posted, off, len, 0, IBV_SEND_SIGNALED) == 0);
            posted++;
        }
        expect_send(r, rc, done, &r->sends_ok, &r->sends_in_order);
        done++;
    }

    /* 2. WRITEs, every third with an immediate (= its index) */
    for (uint32_t k = 0; k < N_WRITE; k++)
        fill_msg(rc->buf + OFF_WRITE + write_off(k), 1000 + k, msg_len(k, 7));
    posted = done = 0;
    uint32_t write_order = 0;
    while (done < N_WRITE) {
        while (posted < N_WRITE && posted - done < WINDOW) {
            uint32_t off = OFF_WRITE + write_off(posted);
            struct ibv_sge sge = {.addr = (uintptr_t)(rc->buf + off),
                                  .length = msg_len(posted, 7),
                                  .lkey = rc->mr->lkey};
            struct ibv_send_wr wr = {.wr_id = posted,
                                     .sg_list = &sge,
                                     .num_sge = 1,
                                     .opcode = posted % 3 == 0 ? IBV_WR_RDMA_WRITE_WITH_IMM
                                                               : IBV_WR_RDMA_WRITE,
                                     .send_flags = IBV_SEND_SIGNALED,
                                     .imm_data = htonl(posted)};
            wr.wr.rdma.remote_addr = rc->remote.addr + off;
            wr.wr.rdma.rkey = rc->remote.rkey;
            CHECK(post_wr(rc, &wr) == 0);
            posted++;
        }
        expect_send(r, rc, done, &r->writes_ok, &write_order);
        done++;
    }
    CHECK_EQ_U64(write_order, N_WRITE);

    /* 3. READs of the server's pattern */
    fx_barrier(r->fx, "loss/read", "client", "server");
    memset(rc->buf + OFF_READ, 0, 1 << 19);
    posted = done = 0;
    uint32_t read_ok_order = 0;
    while (done < N_READ) {
        while (posted < N_READ && posted - done < WINDOW) {
            uint32_t off = OFF_READ + posted * 4096;
            CHECK(fx_post(rc, IBV_WR_RDMA_READ, posted, off, msg_len(posted, 3), off,
                          IBV_SEND_SIGNALED) == 0);
            posted++;
        }
        expect_send(r, rc, done, &r->reads_ok, &read_ok_order);
        done++;
    }
    CHECK_EQ_U64(read_ok_order, N_READ);
    for (uint32_t k = 0; k < N_READ; k++)
        r->reads_bytes_ok += check_msg(rc->buf + OFF_READ + k * 4096, 2000 + k, msg_len(k, 3));

    /* 4. atomics on the server's counter (starts at 0): FETCH_ADD +1, with
     * a CMP_SWAP (old -> old + 1) every fourth; either way op k sees k. */
    posted = done = 0;
    uint32_t atomic_order = 0;
    while (done < N_ATOMIC) {
        while (posted < N_ATOMIC && posted - done < WINDOW) {
            struct ibv_sge sge = {.addr = (uintptr_t)(rc->buf + OFF_RESULTS + 8 * posted),
                                  .length = 8,
                                  .lkey = rc->mr->lkey};
            bool cas = posted % 4 == 3;
            struct ibv_send_wr wr = {
                .wr_id = posted,
                .sg_list = &sge,
                .num_sge = 1,
                .opcode = cas ? IBV_WR_ATOMIC_CMP_AND_SWP : IBV_WR_ATOMIC_FETCH_AND_ADD,
                .send_flags = IBV_SEND_SIGNALED,
            };
            wr.wr.atomic.remote_addr = rc->remote.addr + OFF_COUNTER;
            wr.wr.atomic.rkey = rc->remote.rkey;
            wr.wr.atomic.compare_add = cas ? posted : 1;
            wr.wr.atomic.swap = posted + 1u;
            CHECK(post_wr(rc, &wr) == 0);
            posted++;
        }
        expect_send(r, rc, done, &r->atomics_ok, &atomic_order);
        done++;
    }
    CHECK_EQ_U64(atomic_order, N_ATOMIC);
    for (uint32_t k = 0; k < N_ATOMIC; k++) {
        uint64_t old;
        memcpy(&old, rc->buf + OFF_RESULTS + 8 * k, 8);
        r->atomics_old_ok += old == k;
    }
    fx_barrier(r->fx, "loss/end", "client", "server");
    r->client_done = true;
}

static void server(void *arg)
{
    struct run *r = arg;
    struct fx_rc *rc = &r->server;
    struct fx_rc_opts o = loss_opts();
    CHECK(fx_rc_open(r->fx, rc, &o) == 0);
    CHECK(fx_rc_connect(rc, "loss/server", "loss/client") == 0);
    for (uint32_t i = 0; i < N_RECV_SLOTS; i++)
        CHECK(fx_post_recv(rc, i, (size_t)i * SLOT_BYTES, SLOT_BYTES) == 0);
    for (uint32_t k = 0; k < N_READ; k++)
        fill_msg(rc->buf + OFF_READ + k * 4096, 2000 + k, msg_len(k, 3));
    fx_barrier(r->fx, "loss/ready", "server", "client");

    /* SENDs: in order, exactly once, each repost keeps the ring full */
    struct ibv_wc wc;
    for (uint32_t seq = 0; seq < N_SEND; seq++) {
        if (fx_poll_one(rc->rcq, &wc) != 1)
            break;
        uint32_t slot = (uint32_t)wc.wr_id;
        if (wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RECV)
            r->recvs_ok++;
        if (wc.byte_len == msg_len(seq, 0) &&
            check_msg(rc->buf + (size_t)slot * SLOT_BYTES, seq, wc.byte_len))
            r->recvs_in_order++;
        CHECK(fx_post_recv(rc, slot, (size_t)slot * SLOT_BYTES, SLOT_BYTES) == 0);
    }
    /* WRITE immediates: N_WRITE / 3 rounded up, in order */
    for (uint32_t k = 0; k < N_WRITE; k += 3) {
        if (fx_poll_one(rc->rcq, &wc) != 1)
            break;
        r->imms_seen++;
        if (wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM &&
            (wc.wc_flags & IBV_WC_WITH_IMM) && ntohl(wc.imm_data) == k)
            r->imms_in_order++;
        uint32_t slot = (uint32_t)wc.wr_id;
        CHECK(fx_post_recv(rc, slot, (size_t)slot * SLOT_BYTES, SLOT_BYTES) == 0);
    }
    fx_barrier(r->fx, "loss/read", "server", "client");
    for (uint32_t k = 0; k < N_WRITE; k++)
        r->writes_bytes_ok +=
            check_msg(rc->buf + OFF_WRITE + write_off(k), 1000 + k, msg_len(k, 7));
    fx_barrier(r->fx, "loss/end", "server", "client");
    /* nothing more may arrive: no duplicate receive completions */
    r->extra_recvs = (uint32_t)ibv_poll_cq(rc->rcq, 1, &wc);
    memcpy(&r->counter_final, rc->buf + OFF_COUNTER, 8);
    r->server_done = true;
}

static void run_loss(double loss, uint64_t seed)
{
    struct nic_params np;
    nic_params_default(&np);
    np.max_mtu = IBV_MTU_1024; /* more packets per message */
    struct run r;
    memset(&r, 0, sizeof(r));
    r.loss = loss;
    r.fx = fx_create(seed, &np);
    fx_set_loss_all(r.fx, loss);
    if (getenv("LOSS_TRACE"))
        sim_trace_enable(r.fx->sim, 4000);
    CHECK(fx_run_pair(r.fx, "client", client, "server", server, &r) == SIM_RUN_DONE);
    CHECK(r.client_done && r.server_done);
    CHECK_EQ_U64(r.sends_ok, N_SEND);
    CHECK_EQ_U64(r.sends_in_order, N_SEND);
    CHECK_EQ_U64(r.recvs_ok, N_SEND);
    CHECK_EQ_U64(r.recvs_in_order, N_SEND);
    CHECK_EQ_U64(r.writes_ok, N_WRITE);
    CHECK_EQ_U64(r.imms_seen, (N_WRITE + 2) / 3);
    CHECK_EQ_U64(r.imms_in_order, (N_WRITE + 2) / 3);
    CHECK_EQ_U64(r.writes_bytes_ok, N_WRITE);
    CHECK_EQ_U64(r.reads_ok, N_READ);
    CHECK_EQ_U64(r.reads_bytes_ok, N_READ);
    CHECK_EQ_U64(r.atomics_ok, N_ATOMIC);
    CHECK_EQ_U64(r.atomics_old_ok, N_ATOMIC);
    CHECK_EQ_U64(r.counter_final, N_ATOMIC); /* each applied exactly once */
    CHECK_EQ_U64(r.extra_recvs, 0);
    if (getenv("LOSS_TRACE") && r.reads_ok != N_READ)
        sim_trace_dump(r.fx->sim, stderr, 400);
    uint64_t dropped = r.fx->dropped[0] + r.fx->dropped[1];
    uint64_t arrived = r.fx->arrived[0] + r.fx->arrived[1];
    const struct nic_counters *cc = nic_get_counters(r.fx->nic[0]);
    const struct nic_counters *sc = nic_get_counters(r.fx->nic[1]);
    /* the loss really happened, at about the rate asked */
    CHECK(dropped > 0);
    CHECK((double)dropped > 0.5 * loss * (double)arrived);
    CHECK((double)dropped < 1.5 * loss * (double)arrived + 5);
    /* and was repaired by go-back-N: sequence NAKs went out */
    CHECK(sc->naks_tx > 0);
    printf("loss %.0f%%: %" PRIu64 " of %" PRIu64 " packets dropped, client %" PRIu64
           " pkts sent (%" PRIu64 " NAKs rx), server %" PRIu64 " NAKs tx, %.3f ms simulated\n",
           loss * 100, dropped, arrived, cc->pkts_tx, cc->naks_rx, sc->naks_tx,
           sim_ps_to_ns(sim_now(r.fx->sim)) / 1e6);
    fx_destroy(r.fx);
}

int main(void)
{
    run_loss(0.01, 11);
    run_loss(0.01, 12);
    run_loss(0.10, 21);
    run_loss(0.10, 22);
    /* LOSS_SEEDS=n LOSS_RATE=p: n more seeds (a stress run, not in ctest) */
    const char *n = getenv("LOSS_SEEDS");
    const char *rate = getenv("LOSS_RATE");
    for (int i = 0; n && i < atoi(n); i++)
        run_loss(rate ? atof(rate) : 0.10, 1000 + (uint64_t)i);
    return test_summary();
}
