/* The AWS EFA SRD personality (hardware.nic.transport = efa-srd) at the
 * verbs level: an unmodified RC-API program (RC QP, INIT/RTR/RTS, post,
 * poll) on NICs whose transport is NIC_TRANSPORT_EFA_SRD.
 *
 *  - post-time refusals: RDMA_WRITE, WRITE_WITH_IMM and both atomics are
 *    refused with EINVAL and one line on stderr naming the transport, the
 *    opcode and the QP; a SEND or READ larger than the port MTU likewise;
 *    in a post list the WRs before the refused one are posted and complete;
 *  - 300 SENDs (1 B .. 4 KiB, every fifth with immediate) each arrive
 *    exactly once with the right bytes; 100 READs return the right bytes;
 *  - out-of-order arrival: on a leaf-spine fabric (2 leaves, 4 spines,
 *    ECMP) each SRD packet carries a fresh flow hash, so the packets of
 *    one QP use every spine and arrive out of posting order; the same
 *    program on IB RC uses one spine and arrives in order;
 *  - loss: under 1% and 10% random loss on both NICs every message still
 *    arrives exactly once (retransmissions after the RTO, duplicates
 *    detected and dropped), every READ returns the right bytes;
 *  - RNR: a SEND to a QP without a posted receive is retried after the
 *    RNR timer and delivered once a receive is posted;
 *  - 100% loss: the SEND completes with IBV_WC_RETRY_EXC_ERR after
 *    retry_cnt + 1 RTOs, the QP stays in RTS, and a SEND after the loss
 *    is removed works;
 *  - ERR with ops in flight: of 16 SENDs the even ones complete (out of
 *    order with the odd ones, whose packets are dropped); moving the QP to
 *    ERR flushes exactly the eight odd ones, in posting order, once. */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fixture.h"
#include "sim/nic/opcode.h"
#include "test.h"

enum {
    SLOT = 4096,
    N_SEND = 300,
    N_READ = 100,
    OFF_READ = 2 << 20, /* READ source (server) / destination (client) region */
    MTU = 4096,
};

/* ---------------------------------------------------------------- helpers */

static uint8_t pat(uint32_t seq, uint32_t i)
{
    return (uint8_t)((seq * 37u + i * 11u + (i >> 9)) ^ 0x5a);
}

/* Message `seq`: its length and bytes (bytes 0..3 = seq when it fits). */
static uint32_t msg_len(uint32_t seq)
{
    return 1 + (seq * 2654435761u >> 7) % MTU;
}

static void fill(uint8_t *p, uint32_t seq, uint32_t len)
{
    for (uint32_t i = 0; i < len; i++)
        p[i] = pat(seq, i);
    if (len >= 4)
        memcpy(p, &seq, 4);
}

static bool same(const uint8_t *p, uint32_t seq, uint32_t len)
{
    for (uint32_t i = len >= 4 ? 4 : 0; i < len; i++)
        if (p[i] != pat(seq, i))
            return false;
    return len < 4 || memcmp(p, &seq, 4) == 0;
}

static struct fx_rc_opts efa_opts(void)
{
    struct fx_rc_opts o;
    fx_rc_default_opts(&o);
    o.max_send_wr = 512;
    o.max_recv_wr = 512;
    o.cq_depth = 1024;
    o.buf_bytes = 4 << 20;
    o.max_rd_atomic = 16;
    return o;
}

static struct fx *efa_fx(uint64_t seed, enum nic_transport t)
{
    struct nic_params np;
    nic_params_default(&np);
    np.transport = t;
    return fx_create(seed, &np);
}

static int post_wr(struct fx_rc *rc, enum ibv_wr_opcode op, uint64_t id, size_t off, uint32_t len,
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

/* stderr into a temporary file while a post runs (the shim's message). */
struct cap {
    int saved;
    FILE *tmp;
};

static void cap_begin(struct cap *c)
{
    fflush(stderr);
    c->tmp = tmpfile();
    c->saved = dup(2);
    dup2(fileno(c->tmp), 2);
}

static void cap_end(struct cap *c, char *buf, size_t len)
{
    fflush(stderr);
    dup2(c->saved, 2);
    close(c->saved);
    rewind(c->tmp);
    size_t n = fread(buf, 1, len - 1, c->tmp);
    buf[n] = 0;
    fclose(c->tmp);
}

/* ---------------------------------------------------------------- refusals */

struct refuse {
    struct fx *fx;
    struct fx_rc c, s;
    int rc_write, rc_write_imm, rc_faa, rc_cas, rc_big_send, rc_big_read, rc_mtu_send, rc_list;
    char msg_write[256], msg_faa[256], msg_big[256], msg_big_read[256], msg_list[256];
    bool list_bad_is_second;
    unsigned completions, ok;
    uint64_t ids;
    uint32_t qpn;
};

static int post_one_captured(struct fx_rc *rc, enum ibv_wr_opcode op, uint32_t len, char *msg,
                             size_t msg_len_)
{
    struct cap c;
    cap_begin(&c);
    int r = op == IBV_WR_ATOMIC_FETCH_AND_ADD || op == IBV_WR_ATOMIC_CMP_AND_SWP
                ? fx_post(rc, op, 99, 0, 8, 0, IBV_SEND_SIGNALED)
                : post_wr(rc, op, 99, 0, len, 0, 1);
    cap_end(&c, msg, msg_len_);
    return r;
}

static void refuse_client(void *arg)
{
    struct refuse *t = arg;
    struct fx_rc *rc = &t->c;
    struct fx_rc_opts o = efa_opts();
    CHECK(fx_rc_open(t->fx, rc, &o) == 0);
    CHECK(fx_rc_connect(rc, "ref/c", "ref/s") == 0);
    t->qpn = rc->qp->qp_num;
    fx_barrier(t->fx, "ref/ready", "c", "s");
    char scratch[256];
    t->rc_write = post_one_captured(rc, IBV_WR_RDMA_WRITE, 64, t->msg_write, sizeof(t->msg_write));
    t->rc_write_imm =
        post_one_captured(rc, IBV_WR_RDMA_WRITE_WITH_IMM, 64, scratch, sizeof(scratch));
    t->rc_faa =
        post_one_captured(rc, IBV_WR_ATOMIC_FETCH_AND_ADD, 8, t->msg_faa, sizeof(t->msg_faa));
    t->rc_cas = post_one_captured(rc, IBV_WR_ATOMIC_CMP_AND_SWP, 8, scratch, sizeof(scratch));
    t->rc_big_send = post_one_captured(rc, IBV_WR_SEND, MTU + 1, t->msg_big, sizeof(t->msg_big));
    t->rc_big_read =
        post_one_captured(rc, IBV_WR_RDMA_READ, MTU + 1, t->msg_big_read, sizeof(t->msg_big_read));
    /* a list: SEND (posted), WRITE (refused: bad_wr), SEND (not posted) */
    struct ibv_sge sge = {.addr = (uintptr_t)rc->buf, .length = 16, .lkey = rc->mr->lkey};
    struct ibv_send_wr w[3];
    memset(w, 0, sizeof(w));
    for (int i = 0; i < 3; i++) {
        w[i].wr_id = 10 + (uint64_t)i;
        w[i].sg_list = &sge;
        w[i].num_sge = 1;
        w[i].opcode = i == 1 ? IBV_WR_RDMA_WRITE : IBV_WR_SEND;
        w[i].send_flags = IBV_SEND_SIGNALED;
        w[i].wr.rdma.remote_addr = rc->remote.addr;
        w[i].wr.rdma.rkey = rc->remote.rkey;
        w[i].next = i < 2 ? &w[i + 1] : NULL;
    }
    struct ibv_send_wr *bad = NULL;
    struct cap c;
    cap_begin(&c);
    t->rc_list = ibv_post_send(rc->qp, w, &bad);
    cap_end(&c, t->msg_list, sizeof(t->msg_list));
    t->list_bad_is_second = bad == &w[1];
    /* exactly MTU bytes is one packet: accepted */
    t->rc_mtu_send = post_wr(rc, IBV_WR_SEND, 20, 0, MTU, 0, 0);
    for (int i = 0; i < 2; i++) {
        struct ibv_wc wc;
        if (fx_poll_one(rc->scq, &wc) != 1)
            break;
        t->completions++;
        t->ok += wc.status == IBV_WC_SUCCESS;
        t->ids += wc.wr_id;
    }
    fx_barrier(t->fx, "ref/done", "c", "s");
}

static void refuse_server(void *arg)
{
    struct refuse *t = arg;
    struct fx_rc *rc = &t->s;
    struct fx_rc_opts o = efa_opts();
    CHECK(fx_rc_open(t->fx, rc, &o) == 0);
    CHECK(fx_rc_connect(rc, "ref/s", "ref/c") == 0);
    for (int i = 0; i < 4; i++)
        CHECK(fx_post_recv(rc, (uint64_t)i, (size_t)i * SLOT, SLOT) == 0);
    fx_barrier(t->fx, "ref/ready", "s", "c");
    for (int i = 0; i < 2; i++) {
        struct ibv_wc wc;
        CHECK(fx_poll_one(rc->rcq, &wc) == 1);
        CHECK(wc.status == IBV_WC_SUCCESS);
    }
    fx_barrier(t->fx, "ref/done", "s", "c");
}

static void test_refusals(void)
{
    struct refuse t;
    memset(&t, 0, sizeof(t));
    t.fx = efa_fx(1, NIC_TRANSPORT_EFA_SRD);
    CHECK(fx_run_pair(t.fx, "client", refuse_client, "server", refuse_server, &t) == SIM_RUN_DONE);
    CHECK_EQ_U64(t.rc_write, EINVAL);
    CHECK_EQ_U64(t.rc_write_imm, EINVAL);
    CHECK_EQ_U64(t.rc_faa, EINVAL);
    CHECK_EQ_U64(t.rc_cas, EINVAL);
    CHECK_EQ_U64(t.rc_big_send, EINVAL);
    CHECK_EQ_U64(t.rc_big_read, EINVAL);
    char want[160];
    snprintf(want, sizeof(want),
             "rnicsim: efa-srd has no RDMA_WRITE (post_send on qp 0x%x refused, EINVAL)\n", t.qpn);
    CHECK(strcmp(t.msg_write, want) == 0);
    CHECK_STR_CONTAINS(t.msg_faa, "rnicsim: efa-srd has no ATOMIC_FETCH_AND_ADD");
    CHECK_STR_CONTAINS(t.msg_big, "efa-srd messages are single packets");
    CHECK_STR_CONTAINS(t.msg_big, "SEND of 4097 bytes > 4096");
    CHECK_STR_CONTAINS(t.msg_big_read, "RDMA_READ of 4097 bytes > 4096");
    CHECK_EQ_U64(t.rc_list, EINVAL);
    CHECK(t.list_bad_is_second);
    CHECK_STR_CONTAINS(t.msg_list, "has no RDMA_WRITE");
    CHECK_EQ_U64(t.rc_mtu_send, 0);
    /* the SEND before the refused WRITE and the MTU-sized SEND complete */
    CHECK_EQ_U64(t.completions, 2);
    CHECK_EQ_U64(t.ok, 2);
    CHECK_EQ_U64(t.ids, 10 + 20);
    fx_destroy(t.fx);
}

/* ---------------------------------------------------------------- SEND / READ stream */

struct stream {
    struct fx *fx;
    struct fx_rc c, s;
    unsigned n_send, n_read;
    /* server */
    uint32_t order[N_SEND];
    unsigned got, dup, bad, imm_ok, recv_err;
    uint8_t seen[N_SEND];
    /* client */
    unsigned send_ok, send_err, read_ok, read_bad, read_err;
    uint64_t send_ids;
    sim_time_t t_sends_ps;
};

static void stream_client(void *arg)
{
    struct stream *t = arg;
    struct fx_rc *rc = &t->c;
    struct fx_rc_opts o = efa_opts();
    CHECK(fx_rc_open(t->fx, rc, &o) == 0);
    CHECK(fx_rc_connect(rc, "st/c", "st/s") == 0);
    fx_barrier(t->fx, "st/ready", "c", "s");
    sim_time_t t0 = sim_now(t->fx->sim);
    /* post lists of 32: the NIC sends them back to back */
    struct ibv_sge sge[32];
    struct ibv_send_wr wr[32];
    for (uint32_t i0 = 0; i0 < t->n_send; i0 += 32) {
        uint32_t n = t->n_send - i0 < 32 ? t->n_send - i0 : 32;
        memset(wr, 0, sizeof(wr));
        for (uint32_t k = 0; k < n; k++) {
            uint32_t i = i0 + k, len = msg_len(i);
            fill(rc->buf + (size_t)i * SLOT, i, len);
            bool imm = i % 5 == 0;
            sge[k] = (struct ibv_sge){(uintptr_t)(rc->buf + (size_t)i * SLOT), len, rc->mr->lkey};
            wr[k].wr_id = i;
            wr[k].sg_list = &sge[k];
            wr[k].num_sge = 1;
            wr[k].opcode = imm ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND;
            wr[k].send_flags = IBV_SEND_SIGNALED;
            wr[k].imm_data = htonl(imm ? 0x10000 + i : 0);
            wr[k].next = k + 1 < n ? &wr[k + 1] : NULL;
        }
        struct ibv_send_wr *bad = NULL;
        CHECK(ibv_post_send(rc->qp, wr, &bad) == 0);
    }
    for (uint32_t i = 0; i < t->n_send; i++) {
        struct ibv_wc wc;
        if (fx_poll_one(rc->scq, &wc) != 1)
            break;
        if (wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_SEND)
            t->send_ok++;
        else
            t->send_err++;
        t->send_ids += wc.wr_id;
    }
    t->t_sends_ps = sim_now(t->fx->sim) - t0;
    for (uint32_t k = 0; k < t->n_read; k++) {
        uint32_t len = msg_len(1000 + k);
        CHECK(post_wr(rc, IBV_WR_RDMA_READ, 1000 + k, OFF_READ + (size_t)k * SLOT, len,
                      OFF_READ + (size_t)k * SLOT, 0) == 0);
    }
    for (uint32_t k = 0; k < t->n_read; k++) {
        struct ibv_wc wc;
        if (fx_poll_one(rc->scq, &wc) != 1)
            break;
        if (wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_RDMA_READ || wc.wr_id < 1000 ||
            wc.wr_id >= 1000 + t->n_read) {
            t->read_err++;
            continue;
        }
        uint32_t kk = (uint32_t)wc.wr_id - 1000;
        if (same(rc->buf + OFF_READ + (size_t)kk * SLOT, 1000 + kk, msg_len(1000 + kk)))
            t->read_ok++;
        else
            t->read_bad++;
    }
    fx_barrier(t->fx, "st/done", "c", "s");
}

static void stream_server(void *arg)
{
    struct stream *t = arg;
    struct fx_rc *rc = &t->s;
    struct fx_rc_opts o = efa_opts();
    CHECK(fx_rc_open(t->fx, rc, &o) == 0);
    CHECK(fx_rc_connect(rc, "st/s", "st/c") == 0);
    for (uint32_t i = 0; i < t->n_send; i++)
        CHECK(fx_post_recv(rc, i, (size_t)i * SLOT, SLOT) == 0);
    for (uint32_t k = 0; k < t->n_read; k++)
        fill(rc->buf + OFF_READ + (size_t)k * SLOT, 1000 + k, msg_len(1000 + k));
    fx_barrier(t->fx, "st/ready", "s", "c");
    for (uint32_t n = 0; n < t->n_send; n++) {
        struct ibv_wc wc;
        if (fx_poll_one(rc->rcq, &wc) != 1)
            break;
        if (wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_RECV) {
            t->recv_err++;
            continue;
        }
        const uint8_t *p = rc->buf + (size_t)wc.wr_id * SLOT;
        /* which message: bytes 0..3 (messages < 4 bytes are found by length + bytes) */
        uint32_t seq = UINT32_MAX;
        if (wc.byte_len >= 4) {
            memcpy(&seq, p, 4);
        } else {
            for (uint32_t i = 0; i < t->n_send && seq == UINT32_MAX; i++)
                if (!t->seen[i] && msg_len(i) == wc.byte_len && same(p, i, wc.byte_len))
                    seq = i;
        }
        if (seq >= t->n_send || msg_len(seq) != wc.byte_len || !same(p, seq, wc.byte_len)) {
            t->bad++;
            continue;
        }
        if (t->seen[seq]++) {
            t->dup++;
            continue;
        }
        if (seq % 5 == 0)
            t->imm_ok += (wc.wc_flags & IBV_WC_WITH_IMM) && ntohl(wc.imm_data) == 0x10000 + seq;
        else
            t->imm_ok += !(wc.wc_flags & IBV_WC_WITH_IMM);
        t->order[t->got++] = seq;
    }
    fx_barrier(t->fx, "st/done", "s", "c");
}

static unsigned descents(const uint32_t *order, unsigned n)
{
    unsigned d = 0;
    for (unsigned i = 1; i < n; i++)
        d += order[i] < order[i - 1];
    return d;
}

/* Check that every SEND arrived exactly once with its bytes and that the
 * READs returned theirs. */
static void check_stream(const struct stream *t, const char *what)
{
    (void)what;
    CHECK_EQ_U64(t->send_ok, t->n_send);
    CHECK_EQ_U64(t->send_err, 0);
    CHECK_EQ_U64(t->send_ids, (uint64_t)t->n_send * (t->n_send - 1) / 2);
    CHECK_EQ_U64(t->got, t->n_send);
    CHECK_EQ_U64(t->dup, 0);
    CHECK_EQ_U64(t->bad, 0);
    CHECK_EQ_U64(t->recv_err, 0);
    CHECK_EQ_U64(t->imm_ok, t->n_send);
    CHECK_EQ_U64(t->read_ok, t->n_read);
    CHECK_EQ_U64(t->read_bad + t->read_err, 0);
}

static void run_stream(struct stream *t)
{
    t->n_send = N_SEND;
    t->n_read = N_READ;
    CHECK(fx_run_pair(t->fx, "client", stream_client, "server", stream_server, t) == SIM_RUN_DONE);
}

static void test_stream_star(void)
{
    struct stream *t = calloc(1, sizeof(*t));
    t->fx = efa_fx(2, NIC_TRANSPORT_EFA_SRD);
    run_stream(t);
    check_stream(t, "star");
    const struct nic_counters *cc = nic_get_counters(t->fx->nic[0]);
    CHECK_EQ_U64(cc->srd_retransmits, 0);
    printf("efa star: %u SENDs in %.1f us, %u READs, %u descents in arrival order\n", t->n_send,
           sim_ps_to_us(t->t_sends_ps), t->n_read, descents(t->order, t->got));
    fx_destroy(t->fx);
    free(t);
}

/* 2 leaves x 4 spines, ECMP: per-packet flow hashes spray SRD. */
static void use_leaf_spine(struct fx *fx)
{
    struct topo_params tp;
    fabric_leaf_spine(&tp, 2, 4, 1);
    tp.sw.routing = ROUTE_ECMP;
    CHECK(fx_use_topology(fx, &tp) == 0);
}

/* Packets node 0 sent up each of the 4 spines. */
static void spine_counts(struct fx *fx, uint64_t n[4])
{
    for (unsigned s = 0; s < 4; s++) {
        char name[32];
        snprintf(name, sizeof(name), "leaf0->spine%u", s);
        struct link *l = topo_find_link(fx->topo, name);
        n[s] = l ? link_get_counters(l)->pkts_sent : 0;
    }
}

static void test_out_of_order(void)
{
    /* EFA SRD: sprayed, out of order */
    struct stream *t = calloc(1, sizeof(*t));
    t->fx = efa_fx(3, NIC_TRANSPORT_EFA_SRD);
    use_leaf_spine(t->fx);
    run_stream(t);
    check_stream(t, "leaf-spine");
    uint64_t sp[4];
    spine_counts(t->fx, sp);
    unsigned used = 0;
    for (unsigned s = 0; s < 4; s++)
        used += sp[s] > 20;
    CHECK_EQ_U64(used, 4); /* every path carries packets of the one QP */
    unsigned d = descents(t->order, t->got);
    CHECK(d > 10); /* messages arrived out of posting order */
    const struct topo_node_counters *nc = topo_node_counters(t->fx->topo, 1);
    CHECK(nc->pkts_reordered > 0);
    printf("efa leaf-spine: spines %" PRIu64 "/%" PRIu64 "/%" PRIu64 "/%" PRIu64
           " packets, %u of %u SENDs arrived before an earlier one, fabric reordered %" PRIu64
           " packets to node 1\n",
           sp[0], sp[1], sp[2], sp[3], d, t->got, nc->pkts_reordered);
    fx_destroy(t->fx);
    free(t);

    /* the same program on IB RC: one path per QP (ECMP on the QPNs), in order */
    t = calloc(1, sizeof(*t));
    t->fx = efa_fx(3, NIC_TRANSPORT_IB);
    use_leaf_spine(t->fx);
    run_stream(t);
    check_stream(t, "ib leaf-spine");
    spine_counts(t->fx, sp);
    used = 0;
    for (unsigned s = 0; s < 4; s++)
        used += sp[s] > 0;
    CHECK_EQ_U64(used, 1);
    CHECK_EQ_U64(descents(t->order, t->got), 0);
    fx_destroy(t->fx);
    free(t);
}

static void test_loss(double p, uint64_t seed)
{
    struct stream *t = calloc(1, sizeof(*t));
    t->fx = efa_fx(seed, NIC_TRANSPORT_EFA_SRD);
    fx_set_loss_all(t->fx, p);
    run_stream(t);
    check_stream(t, "loss");
    const struct nic_counters *cc = nic_get_counters(t->fx->nic[0]);
    const struct nic_counters *sc = nic_get_counters(t->fx->nic[1]);
    uint64_t arrived = t->fx->arrived[0] + t->fx->arrived[1];
    uint64_t dropped = t->fx->dropped[0] + t->fx->dropped[1];
    CHECK(dropped > 0);
    CHECK(cc->srd_retransmits >= t->fx->dropped[1] / 2); /* every lost request was sent again */
    double seen = (double)dropped / (double)arrived;
    CHECK(seen > p * 0.5 && seen < p * 1.6);
    if (p >= 0.05)
        CHECK(sc->srd_duplicates > 0); /* lost ACKs: resends dropped at the receiver */
    printf("efa loss %.0f%%: %" PRIu64 " of %" PRIu64 " packets dropped, %" PRIu64
           " retransmissions, %" PRIu64 " duplicates dropped, %u descents, %.1f us\n",
           p * 100, dropped, arrived, cc->srd_retransmits, sc->srd_duplicates,
           descents(t->order, t->got), sim_ps_to_us(sim_now(t->fx->sim)));
    fx_destroy(t->fx);
    free(t);
}

/* ---------------------------------------------------------------- RNR and retry exhaustion */

struct rnr {
    struct fx *fx;
    struct fx_rc c, s;
    struct ibv_wc wc1, wc2, wc3;
    sim_time_t t_post, t_done, t_fail;
    enum ibv_qp_state state_after;
    bool lossy;
};

static void rnr_client(void *arg)
{
    struct rnr *t = arg;
    struct fx_rc *rc = &t->c;
    struct fx_rc_opts o = efa_opts();
    o.retry_cnt = 3;
    CHECK(fx_rc_open(t->fx, rc, &o) == 0);
    CHECK(fx_rc_connect(rc, "rnr/c", "rnr/s") == 0);
    fx_barrier(t->fx, "rnr/ready", "c", "s");
    fill(rc->buf, 7, 100);
    t->t_post = sim_now(t->fx->sim);
    CHECK(post_wr(rc, IBV_WR_SEND, 1, 0, 100, 0, 0) == 0);
    CHECK(fx_poll_one(rc->scq, &t->wc1) == 1);
    t->t_done = sim_now(t->fx->sim);
    /* 100% loss: retry_cnt + 1 RTOs, then RETRY_EXC_ERR; the QP goes on */
    fx_set_loss_all(t->fx, 1.0);
    sim_time_t t0 = sim_now(t->fx->sim);
    CHECK(post_wr(rc, IBV_WR_SEND, 2, 0, 100, 0, 0) == 0);
    CHECK(fx_poll_one(rc->scq, &t->wc2) == 1);
    t->t_fail = sim_now(t->fx->sim) - t0;
    struct ibv_qp_attr a;
    struct ibv_qp_init_attr ia;
    CHECK(ibv_query_qp(rc->qp, &a, IBV_QP_STATE, &ia) == 0);
    t->state_after = a.qp_state;
    fx_set_loss_all(t->fx, 0.0);
    fill(rc->buf, 8, 100);
    CHECK(post_wr(rc, IBV_WR_SEND, 3, 0, 100, 0, 0) == 0);
    CHECK(fx_poll_one(rc->scq, &t->wc3) == 1);
    fx_barrier(t->fx, "rnr/done", "c", "s");
}

static void rnr_server(void *arg)
{
    struct rnr *t = arg;
    struct fx_rc *rc = &t->s;
    struct fx_rc_opts o = efa_opts();
    o.min_rnr_timer = 1; /* 0.01 ms (IBA Table 45) */
    CHECK(fx_rc_open(t->fx, rc, &o) == 0);
    CHECK(fx_rc_connect(rc, "rnr/s", "rnr/c") == 0);
    fx_barrier(t->fx, "rnr/ready", "s", "c");
    /* no receive for 35 us: the SEND is refused (RNR NAK) and retried */
    sim_proc_sleep(35 * SIM_US);
    CHECK(fx_post_recv(rc, 1, 0, SLOT) == 0);
    struct ibv_wc wc;
    CHECK(fx_poll_one(rc->rcq, &wc) == 1);
    CHECK(wc.status == IBV_WC_SUCCESS && wc.byte_len == 100 && same(rc->buf, 7, 100));
    CHECK(fx_post_recv(rc, 2, 0, SLOT) == 0);
    CHECK(fx_poll_one(rc->rcq, &wc) == 1);
    CHECK(wc.status == IBV_WC_SUCCESS && wc.wr_id == 2 && same(rc->buf, 8, 100));
    fx_barrier(t->fx, "rnr/done", "s", "c");
}

static void test_rnr_and_retry(void)
{
    struct rnr t;
    memset(&t, 0, sizeof(t));
    t.fx = efa_fx(4, NIC_TRANSPORT_EFA_SRD);
    CHECK(fx_run_pair(t.fx, "client", rnr_client, "server", rnr_server, &t) == SIM_RUN_DONE);
    CHECK(t.wc1.status == IBV_WC_SUCCESS && t.wc1.wr_id == 1);
    CHECK(t.t_done - t.t_post > 35 * SIM_US);  /* waited for the receive */
    CHECK(t.t_done - t.t_post < 100 * SIM_US); /* RNR timer 10 us, not the 100 us RTO */
    const struct nic_counters *sc = nic_get_counters(t.fx->nic[1]);
    CHECK(sc->srd_rnr_naks >= 3);
    CHECK(t.wc2.status == IBV_WC_RETRY_EXC_ERR && t.wc2.wr_id == 2);
    /* retry_cnt 3: 4 sends, 4 RTOs of 100 us */
    sim_time_t rto = nic_get_params(t.fx->nic[0])->srd_rto_ps;
    CHECK(t.t_fail >= 4 * rto && t.t_fail < 4 * rto + 10 * SIM_US);
    CHECK_EQ_U64(t.state_after, IBV_QPS_RTS);
    CHECK(t.wc3.status == IBV_WC_SUCCESS && t.wc3.wr_id == 3);
    printf("efa: RNR send done after %.1f us (%" PRIu64 " RNR NAKs); 100%% loss -> %s after %.1f us"
           "\n",
           sim_ps_to_us(t.t_done - t.t_post), sc->srd_rnr_naks, ibv_wc_status_str(t.wc2.status),
           sim_ps_to_us(t.t_fail));
    fx_destroy(t.fx);
}

/* ---------------------------------------------------------------- ERR with ops in flight */

struct flush {
    struct fx *fx;
    struct fx_rc c, s;
    unsigned ok, flushed, other, wrong_order, dup;
    uint8_t seen[16];
    uint64_t last_flushed;
    bool any_flushed;
};

/* drop the odd messages (sequence number = sq_psn + wr_id) at the receiver */
static bool drop_odd(struct fx *fx, unsigned node, const struct pkt *p, void *arg)
{
    (void)fx;
    const struct flush *t = arg;
    return node == 1 && p->opcode == NIC_OPCODE_SRD_SEND_ONLY &&
           ((p->psn - t->c.local.psn) & 0xffffff) % 2 == 1;
}

static void flush_client(void *arg)
{
    struct flush *t = arg;
    struct fx_rc *rc = &t->c;
    struct fx_rc_opts o = efa_opts();
    CHECK(fx_rc_open(t->fx, rc, &o) == 0);
    CHECK(fx_rc_connect(rc, "fl/c", "fl/s") == 0);
    fx_barrier(t->fx, "fl/ready", "c", "s");
    fx_set_drop_fn(t->fx, drop_odd, t);
    for (uint32_t i = 0; i < 16; i++)
        CHECK(post_wr(rc, IBV_WR_SEND, i, (size_t)i * SLOT, 100, 0, 0) == 0);
    /* the eight even ones complete (out of order with the odd ones) */
    for (int k = 0; k < 8; k++) {
        struct ibv_wc wc;
        CHECK(fx_poll_one(rc->scq, &wc) == 1);
        CHECK(wc.status == IBV_WC_SUCCESS && wc.wr_id % 2 == 0);
        t->seen[wc.wr_id % 16]++;
    }
    /* the odd ones are being resent: move the QP to ERR */
    struct ibv_qp_attr a = {.qp_state = IBV_QPS_ERR};
    CHECK(ibv_modify_qp(rc->qp, &a, IBV_QP_STATE) == 0);
    for (int k = 0; k < 8; k++) {
        struct ibv_wc wc;
        CHECK(fx_poll_one(rc->scq, &wc) == 1);
        if (wc.status != IBV_WC_WR_FLUSH_ERR || wc.wr_id % 2 != 1) {
            t->other++;
            continue;
        }
        if (t->any_flushed && wc.wr_id < t->last_flushed)
            t->wrong_order++;
        t->any_flushed = true;
        t->last_flushed = wc.wr_id;
        t->dup += t->seen[wc.wr_id % 16]++ != 0;
        t->flushed++;
    }
    /* nothing more comes */
    sim_proc_sleep(2 * SIM_MS);
    struct ibv_wc wc;
    CHECK_EQ_U64(ibv_poll_cq(rc->scq, 1, &wc), 0);
    fx_set_drop_fn(t->fx, NULL, NULL);
    fx_barrier(t->fx, "fl/done", "c", "s");
}

static void flush_server(void *arg)
{
    struct flush *t = arg;
    struct fx_rc *rc = &t->s;
    struct fx_rc_opts o = efa_opts();
    CHECK(fx_rc_open(t->fx, rc, &o) == 0);
    CHECK(fx_rc_connect(rc, "fl/s", "fl/c") == 0);
    for (uint32_t i = 0; i < 16; i++)
        CHECK(fx_post_recv(rc, i, (size_t)i * SLOT, SLOT) == 0);
    fx_barrier(t->fx, "fl/ready", "s", "c");
    for (int k = 0; k < 8; k++) {
        struct ibv_wc wc;
        CHECK(fx_poll_one(rc->rcq, &wc) == 1 && wc.status == IBV_WC_SUCCESS);
        t->ok++;
    }
    fx_barrier(t->fx, "fl/done", "s", "c");
}

static void test_err_flush(void)
{
    struct flush *t = calloc(1, sizeof(*t));
    t->fx = efa_fx(5, NIC_TRANSPORT_EFA_SRD);
    CHECK(fx_run_pair(t->fx, "client", flush_client, "server", flush_server, t) == SIM_RUN_DONE);
    CHECK_EQ_U64(t->ok, 8);
    CHECK_EQ_U64(t->flushed, 8); /* exactly the eight that had not completed */
    CHECK_EQ_U64(t->other, 0);
    CHECK_EQ_U64(t->wrong_order, 0); /* flushed in posting order */
    CHECK_EQ_U64(t->dup, 0);         /* no WR completes twice */
    fx_destroy(t->fx);
    free(t);
}

int main(void)
{
    test_refusals();
    test_stream_star();
    test_out_of_order();
    test_loss(0.01, 11);
    test_loss(0.10, 12);
    test_loss(0.10, 13);
    test_rnr_and_retry();
    test_err_flush();
    return test_summary();
}
