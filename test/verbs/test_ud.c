/* UD (unreliable datagram) at the verbs level, on the RoCEv2 port:
 *
 *  - a SEND reaches the QP named by the WR (AH + remote QPN + Q_Key); the
 *    receive completes with byte_len = 40 + payload, IBV_WC_GRH, src_qp =
 *    the sender's QPN; the payload sits behind the 40-byte GRH slot, whose
 *    last 20 bytes are the IPv4 header (version 4, UDP, the sender's and
 *    our address, a valid checksum) and whose first 20 are zero, as mlx5
 *    writes it for RoCEv2/IPv4; ibv_create_ah_from_wc turns it into an AH
 *    back to the sender, and the reply arrives;
 *  - SEND_WITH_IMM carries the immediate; a full-MTU payload fits;
 *  - a wrong Q_Key is dropped by the responder (counted), a WR Q_Key with
 *    the high bit set means the QP's own Q_Key;
 *  - a payload above the port MTU completes with IBV_WC_LOC_LEN_ERR, sends
 *    nothing, flushes the WRs behind it and leaves the QP in SQE, where
 *    receives still work; SQE -> RTS sends again;
 *  - a receive shorter than 40 + payload completes with IBV_WC_LOC_LEN_ERR
 *    and the QP goes on; no receive posted: the datagram is dropped;
 *  - WRITE / READ / no AH are EINVAL at post time. */
#include <arpa/inet.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixture.h"
#include "sim/trace.h"
#include "test.h"

enum { SLOT = 8192, QKEY = 0x11111111, MTU = 4096 };

struct st {
    struct fx *fx;
    struct fx_rc c, s;
    int write_rc, read_rc, noah_rc;
    struct ibv_wc oversize_wc[2];
    enum ibv_qp_state after_oversize, after_recover;
    bool recv_in_sqe_ok, reply_ok, reply_grh_ok;
    uint32_t client_qpn, server_qpn;
};

static uint8_t pat(unsigned seed, unsigned i)
{
    return (uint8_t)(seed * 29u + i * 3u + (i >> 7));
}

static void fill(uint8_t *p, unsigned seed, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        p[i] = pat(seed, i);
}

static bool same(const uint8_t *p, unsigned seed, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        if (p[i] != pat(seed, i))
            return false;
    return true;
}

static struct fx_rc_opts ud_opts(void)
{
    struct fx_rc_opts o;
    fx_rc_default_opts(&o);
    o.qp_type = IBV_QPT_UD;
    o.qkey = QKEY;
    return o;
}

/* A UD SEND to the peer with an explicit Q_Key and optional immediate. */
static int ud_send(struct fx_rc *rc, uint64_t id, size_t off, uint32_t len, uint32_t qkey, bool imm,
                   uint32_t imm_val)
{
    struct ibv_sge sge = {.addr = (uintptr_t)(rc->buf + off), .length = len, .lkey = rc->mr->lkey};
    struct ibv_send_wr wr = {.wr_id = id,
                             .sg_list = &sge,
                             .num_sge = 1,
                             .opcode = imm ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND,
                             .send_flags = IBV_SEND_SIGNALED,
                             .imm_data = htonl(imm_val)};
    wr.wr.ud.ah = rc->ah;
    wr.wr.ud.remote_qpn = rc->remote.qpn;
    wr.wr.ud.remote_qkey = qkey;
    struct ibv_send_wr *bad = NULL;
    return ibv_post_send(rc->qp, &wr, &bad);
}

static void expect_sent(struct fx_rc *rc, uint64_t id)
{
    struct ibv_wc wc;
    CHECK(fx_poll_one(rc->scq, &wc) == 1);
    CHECK_EQ_U64(wc.wr_id, id);
    CHECK_EQ_U64(wc.status, IBV_WC_SUCCESS);
    CHECK_EQ_U64(wc.opcode, IBV_WC_SEND);
}

static uint16_t sum16(const uint8_t *h, unsigned n)
{
    uint32_t s = 0;
    for (unsigned i = 0; i < n; i += 2)
        s += (uint32_t)h[i] << 8 | h[i + 1];
    while (s >> 16)
        s = (s & 0xffff) + (s >> 16);
    return (uint16_t)s;
}

/* The GRH slot of a datagram from node `src` to node `dst` with `len`
 * bytes of payload (and an ImmDt if `imm`). */
static void check_grh(const uint8_t *g, unsigned src, unsigned dst, uint32_t len, bool imm)
{
    static const uint8_t zero[20];
    CHECK(memcmp(g, zero, 20) == 0);
    const uint8_t *ip = g + 20;
    CHECK_EQ_U64(ip[0], 0x45);
    CHECK_EQ_U64(ip[9], 17); /* UDP */
    /* IPv4 total length: IP 20 + UDP 8 + BTH 12 + DETH 8 (+ ImmDt 4) +
     * payload padded to 4 + ICRC 4 */
    uint32_t want = 20 + 8 + 12 + 8 + (imm ? 4 : 0) + ((len + 3) & ~3u) + 4;
    CHECK_EQ_U64((uint32_t)ip[2] << 8 | ip[3], want);
    const uint8_t sa[4] = {10, 0, 0, (uint8_t)(src + 1)}, da[4] = {10, 0, 0, (uint8_t)(dst + 1)};
    CHECK(memcmp(ip + 12, sa, 4) == 0);
    CHECK(memcmp(ip + 16, da, 4) == 0);
    CHECK_EQ_U64(sum16(ip, 20), 0xffff); /* header checksum valid */
}

static void client(void *arg)
{
    struct st *s = arg;
    struct fx_rc *rc = &s->c;
    struct fx_rc_opts o = ud_opts();
    CHECK(fx_rc_open(s->fx, rc, &o) == 0);
    CHECK(fx_rc_connect(rc, "ud/c", "ud/s") == 0);
    s->client_qpn = rc->qp->qp_num;
    CHECK(fx_post_recv(rc, 500, 0, SLOT) == 0); /* for the server's reply */
    fx_barrier(s->fx, "ud/ready", "c", "s");

    /* 1. SEND 1000 B; 2. SEND_WITH_IMM of a full MTU */
    fill(rc->buf + SLOT, 1, 1000);
    CHECK(ud_send(rc, 1, SLOT, 1000, QKEY, false, 0) == 0);
    expect_sent(rc, 1);
    fill(rc->buf + 2 * SLOT, 2, MTU);
    CHECK(ud_send(rc, 2, 2 * SLOT, MTU, QKEY, true, 0xabcd) == 0);
    expect_sent(rc, 2);
    /* the server's reply, through an AH made from our datagram */
    struct ibv_wc wc;
    CHECK(fx_poll_one(rc->rcq, &wc) == 1);
    s->reply_ok = wc.status == IBV_WC_SUCCESS && wc.wr_id == 500 &&
                  wc.byte_len == NIC_GRH_BYTES + 16 && (wc.wc_flags & IBV_WC_GRH) &&
                  wc.src_qp == rc->remote.qpn && same(rc->buf + NIC_GRH_BYTES, 9, 16);
    check_grh(rc->buf, 1, 0, 16, false);

    /* 3. wrong Q_Key (dropped at the server), then the high-bit Q_Key
     * (= the QP's, delivered); the sender completes both */
    fill(rc->buf + 3 * SLOT, 3, 200);
    CHECK(ud_send(rc, 3, 3 * SLOT, 200, 0x22222222, true, 3) == 0);
    expect_sent(rc, 3);
    fill(rc->buf + 4 * SLOT, 4, 300);
    CHECK(ud_send(rc, 4, 4 * SLOT, 300, 0x80000000u, true, 4) == 0);
    expect_sent(rc, 4);
    fx_barrier(s->fx, "ud/qkey", "c", "s");

    /* 4. post-time errors */
    s->write_rc = fx_post(rc, IBV_WR_RDMA_WRITE, 90, 0, 8, 0, IBV_SEND_SIGNALED);
    s->read_rc = fx_post(rc, IBV_WR_RDMA_READ, 91, 0, 8, 0, IBV_SEND_SIGNALED);
    struct ibv_ah *ah = rc->ah;
    rc->ah = NULL;
    s->noah_rc = fx_post(rc, IBV_WR_SEND, 92, 0, 8, 0, IBV_SEND_SIGNALED);
    rc->ah = ah;

    /* 5. oversize: MTU + 1 bytes -> LOC_LEN_ERR, the next WR flushed, SQE */
    CHECK(ud_send(rc, 10, 5 * SLOT, MTU + 1, QKEY, false, 0) == 0);
    CHECK(ud_send(rc, 11, 5 * SLOT, 100, QKEY, false, 0) == 0);
    for (unsigned i = 0; i < 2; i++)
        CHECK(fx_poll_one(rc->scq, &s->oversize_wc[i]) == 1);
    struct ibv_qp_attr qa;
    struct ibv_qp_init_attr qia;
    CHECK(ibv_query_qp(rc->qp, &qa, IBV_QP_STATE, &qia) == 0);
    s->after_oversize = qa.qp_state;
    /* in SQE the receive side works: the server sends, we receive */
    CHECK(fx_post_recv(rc, 501, 0, SLOT) == 0);
    fx_barrier(s->fx, "ud/sqe1", "c", "s");
    CHECK(fx_poll_one(rc->rcq, &wc) == 1);
    s->recv_in_sqe_ok = wc.status == IBV_WC_SUCCESS && wc.wr_id == 501 &&
                        wc.byte_len == NIC_GRH_BYTES + 32 && same(rc->buf + NIC_GRH_BYTES, 7, 32);
    fx_barrier(s->fx, "ud/sqe", "c", "s");
    /* SQE -> RTS and send again */
    qa.qp_state = IBV_QPS_RTS;
    qa.cur_qp_state = IBV_QPS_SQE;
    CHECK(ibv_modify_qp(rc->qp, &qa, IBV_QP_STATE | IBV_QP_CUR_STATE) == 0);
    CHECK(ibv_query_qp(rc->qp, &qa, IBV_QP_STATE, &qia) == 0);
    s->after_recover = qa.qp_state;
    fill(rc->buf + 6 * SLOT, 6, 100);
    CHECK(ud_send(rc, 12, 6 * SLOT, 100, QKEY, true, 12) == 0);
    expect_sent(rc, 12);

    /* 6. into a receive that is too short, then a normal one */
    fx_barrier(s->fx, "ud/short", "c", "s");
    CHECK(ud_send(rc, 13, 6 * SLOT, 100, QKEY, true, 13) == 0);
    expect_sent(rc, 13);
    fill(rc->buf + 7 * SLOT, 8, 20);
    CHECK(ud_send(rc, 14, 7 * SLOT, 20, QKEY, true, 14) == 0);
    expect_sent(rc, 14);
    /* 7. nothing posted at the server any more: dropped */
    fx_barrier(s->fx, "ud/none", "c", "s");
    CHECK(ud_send(rc, 15, 7 * SLOT, 20, QKEY, true, 15) == 0);
    expect_sent(rc, 15);
    fx_barrier(s->fx, "ud/end", "c", "s");
}

static void server(void *arg)
{
    struct st *s = arg;
    struct fx_rc *rc = &s->s;
    struct fx_rc_opts o = ud_opts();
    CHECK(fx_rc_open(s->fx, rc, &o) == 0);
    CHECK(fx_rc_connect(rc, "ud/s", "ud/c") == 0);
    s->server_qpn = rc->qp->qp_num;
    for (unsigned i = 0; i < 4; i++)
        CHECK(fx_post_recv(rc, i, (size_t)i * SLOT, SLOT) == 0);
    fx_barrier(s->fx, "ud/ready", "s", "c");

    /* 1. */
    struct ibv_wc wc;
    CHECK(fx_poll_one(rc->rcq, &wc) == 1);
    CHECK_EQ_U64(wc.status, IBV_WC_SUCCESS);
    CHECK_EQ_U64(wc.opcode, IBV_WC_RECV);
    CHECK_EQ_U64(wc.wr_id, 0);
    CHECK_EQ_U64(wc.byte_len, NIC_GRH_BYTES + 1000); /* the GRH counts */
    CHECK_EQ_U64(wc.wc_flags, IBV_WC_GRH);
    CHECK_EQ_U64(wc.src_qp, rc->remote.qpn);
    CHECK_EQ_U64(wc.qp_num, rc->qp->qp_num);
    CHECK(same(rc->buf + NIC_GRH_BYTES, 1, 1000));
    check_grh(rc->buf, 0, 1, 1000, false);
    /* the reply path from the datagram */
    struct ibv_ah_attr aa;
    CHECK(ibv_init_ah_from_wc(rc->ctx, 1, &wc, (struct ibv_grh *)(void *)rc->buf, &aa) == 0);
    CHECK(aa.is_global);
    CHECK(memcmp(aa.grh.dgid.raw, rc->remote.gid.raw, 16) == 0);
    CHECK_EQ_U64(aa.grh.hop_limit, 64);
    struct ibv_ah *back = ibv_create_ah_from_wc(rc->pd, &wc, (struct ibv_grh *)(void *)rc->buf, 1);
    CHECK(back != NULL);
    uint32_t reply_to = wc.src_qp;
    /* 2. */
    CHECK(fx_poll_one(rc->rcq, &wc) == 1);
    CHECK_EQ_U64(wc.status, IBV_WC_SUCCESS);
    CHECK_EQ_U64(wc.wr_id, 1);
    CHECK_EQ_U64(wc.byte_len, NIC_GRH_BYTES + MTU);
    CHECK_EQ_U64(wc.wc_flags, IBV_WC_GRH | IBV_WC_WITH_IMM);
    CHECK_EQ_U64(ntohl(wc.imm_data), 0xabcd);
    CHECK(same(rc->buf + SLOT + NIC_GRH_BYTES, 2, MTU));
    check_grh(rc->buf + SLOT, 0, 1, MTU, true);
    if (back) {
        fill(rc->buf + 6 * SLOT, 9, 16);
        struct ibv_sge sge = {
            .addr = (uintptr_t)(rc->buf + 6 * SLOT), .length = 16, .lkey = rc->mr->lkey};
        struct ibv_send_wr wr = {.wr_id = 600,
                                 .sg_list = &sge,
                                 .num_sge = 1,
                                 .opcode = IBV_WR_SEND,
                                 .send_flags = IBV_SEND_SIGNALED};
        wr.wr.ud.ah = back;
        wr.wr.ud.remote_qpn = reply_to;
        wr.wr.ud.remote_qkey = QKEY;
        struct ibv_send_wr *bad = NULL;
        CHECK(ibv_post_send(rc->qp, &wr, &bad) == 0);
        expect_sent(rc, 600);
        CHECK(ibv_destroy_ah(back) == 0);
    }
    /* 3. only the high-bit Q_Key datagram arrives */
    fx_barrier(s->fx, "ud/qkey", "s", "c");
    CHECK(fx_poll_one(rc->rcq, &wc) == 1);
    CHECK_EQ_U64(wc.wr_id, 2);
    CHECK_EQ_U64(ntohl(wc.imm_data), 4);
    CHECK_EQ_U64(wc.byte_len, NIC_GRH_BYTES + 300);
    CHECK(same(rc->buf + 2 * SLOT + NIC_GRH_BYTES, 4, 300));
    CHECK_EQ_U64(nic_get_counters(s->fx->nic[1])->qkey_drops, 1);

    /* 5. the oversize datagram sent nothing; the client, in SQE, receives */
    fx_barrier(s->fx, "ud/sqe1", "s", "c");
    fill(rc->buf + 6 * SLOT, 7, 32);
    CHECK(fx_post(rc, IBV_WR_SEND, 601, 6 * SLOT, 32, 0, IBV_SEND_SIGNALED) == 0);
    expect_sent(rc, 601);
    fx_barrier(s->fx, "ud/sqe", "s", "c");
    CHECK(fx_poll_one(rc->rcq, &wc) == 1); /* after SQE -> RTS */
    CHECK_EQ_U64(wc.wr_id, 3);
    CHECK_EQ_U64(ntohl(wc.imm_data), 12);
    CHECK_EQ_U64(wc.status, IBV_WC_SUCCESS);

    /* 6. a receive of 40 + 50 bytes for a 100-byte datagram */
    CHECK(fx_post_recv(rc, 4, 4 * SLOT, NIC_GRH_BYTES + 50) == 0);
    CHECK(fx_post_recv(rc, 5, 5 * SLOT, SLOT) == 0);
    fx_barrier(s->fx, "ud/short", "s", "c");
    CHECK(fx_poll_one(rc->rcq, &wc) == 1);
    CHECK_EQ_U64(wc.wr_id, 4);
    CHECK_EQ_U64(wc.status, IBV_WC_LOC_LEN_ERR);
    CHECK(fx_poll_one(rc->rcq, &wc) == 1);
    CHECK_EQ_U64(wc.wr_id, 5);
    CHECK_EQ_U64(wc.status, IBV_WC_SUCCESS); /* the QP went on */
    CHECK_EQ_U64(ntohl(wc.imm_data), 14);
    CHECK(same(rc->buf + 5 * SLOT + NIC_GRH_BYTES, 8, 20));
    /* 7. */
    fx_barrier(s->fx, "ud/none", "s", "c");
    fx_barrier(s->fx, "ud/end", "s", "c");
    sim_proc_sleep(20 * SIM_US);
    CHECK_EQ_U64(ibv_poll_cq(rc->rcq, 1, &wc), 0);
    CHECK_EQ_U64(nic_get_counters(s->fx->nic[1])->ud_no_recv, 1);
}

/* The reply path from a datagram without a GRH: on an InfiniBand port
 * (nic.link_layer ib) rdma-core gives a LID-routed AH from wc->slid; a
 * RoCE port needs the GRH (EINVAL). */
static void ah_from_wc_ib(void *arg)
{
    struct fx *fx = arg;
    struct fx_rc rc;
    CHECK(fx_rc_open(fx, &rc, NULL) == 0);
    struct ibv_wc wc = {.status = IBV_WC_SUCCESS, .opcode = IBV_WC_RECV, .slid = 2, .sl = 0};
    struct ibv_ah_attr aa;
    memset(&aa, 0xee, sizeof(aa));
    CHECK(ibv_init_ah_from_wc(rc.ctx, 1, &wc, NULL, &aa) == 0);
    CHECK(!aa.is_global);
    CHECK_EQ_U64(aa.dlid, 2);
    CHECK_EQ_U64(aa.port_num, 1);
    struct ibv_ah *ah = ibv_create_ah_from_wc(rc.pd, &wc, NULL, 1);
    CHECK(ah != NULL);
    if (ah)
        CHECK(ibv_destroy_ah(ah) == 0);
    fx_rc_close(&rc);
}

/* InfiniBand addressing corners, refused as the kernel's IB drivers refuse
 * them (qib_check_ah / rvt_modify_qp): an AH or a QP path to DLID 0, to a
 * multicast LID without a GRH (an AH with one is a multicast send), to the
 * permissive LID 0xFFFF (no QP0 here), with an SL above 15 -> EINVAL; the
 * largest unicast LID 0xBFFF and SL 15 are fine. */
static void ib_lid_corners(void *arg)
{
    struct fx *fx = arg;
    struct fx_rc rc;
    CHECK(fx_rc_open(fx, &rc, NULL) == 0);
    struct ibv_ah_attr aa = {.dlid = 2, .sl = 15, .port_num = 1};
    struct ibv_ah *ah = ibv_create_ah(rc.pd, &aa);
    CHECK(ah != NULL);
    if (ah)
        CHECK(ibv_destroy_ah(ah) == 0);
    aa.dlid = 0xbfff;
    CHECK((ah = ibv_create_ah(rc.pd, &aa)) != NULL);
    if (ah)
        CHECK(ibv_destroy_ah(ah) == 0);
    static const struct {
        uint16_t dlid;
        uint8_t sl;
    } bad[] = {{0, 0}, {0xc000, 0}, {0xc123, 0}, {0xfffe, 0}, {0xffff, 0}, {2, 16}};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        aa.dlid = bad[i].dlid;
        aa.sl = bad[i].sl;
        errno = 0;
        CHECK(ibv_create_ah(rc.pd, &aa) == NULL && errno == EINVAL);
    }
    /* with a GRH to a multicast GID the multicast DLID is fine */
    struct ibv_ah_attr mc = {.is_global = 1, .dlid = 0xc001, .port_num = 1};
    mc.grh.dgid.raw[10] = mc.grh.dgid.raw[11] = 0xff;
    mc.grh.dgid.raw[12] = 0xe0;
    mc.grh.dgid.raw[15] = 1;
    CHECK((ah = ibv_create_ah(rc.pd, &mc)) != NULL);
    if (ah)
        CHECK(ibv_destroy_ah(ah) == 0);
    /* a connected QP's path: RTR to such a DLID fails, the QP stays in INIT */
    CHECK(fx_rc_to_init(&rc) == 0);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct ibv_qp_attr a = {.qp_state = IBV_QPS_RTR,
                                .path_mtu = IBV_MTU_1024,
                                .dest_qp_num = rc.qp->qp_num,
                                .max_dest_rd_atomic = 1,
                                .min_rnr_timer = 12,
                                .ah_attr = {.dlid = bad[i].dlid, .sl = bad[i].sl, .port_num = 1}};
        CHECK_EQ_U64(ibv_modify_qp(rc.qp, &a,
                                   IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                                       IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
                                       IBV_QP_MIN_RNR_TIMER),
                     EINVAL);
        CHECK_EQ_U64(rc.qp->state, IBV_QPS_INIT);
    }
    fx_rc_close(&rc);
}

static void ah_from_wc_roce(void *arg)
{
    struct fx *fx = arg;
    struct fx_rc rc;
    CHECK(fx_rc_open(fx, &rc, NULL) == 0);
    struct ibv_wc wc = {.status = IBV_WC_SUCCESS, .opcode = IBV_WC_RECV, .slid = 2};
    struct ibv_ah_attr aa;
    errno = 0;
    CHECK(ibv_init_ah_from_wc(rc.ctx, 1, &wc, NULL, &aa) == -1 && errno == EINVAL);
    fx_rc_close(&rc);
}

/* The address vector's GRH fields travel with the datagram: on an
 * InfiniBand port a UD SEND through an AH with hop limit 7, traffic class
 * 0x48 and flow label 0x12345 arrives with exactly those in its GRH (IPVer
 * 6, PayLen, NxtHdr 0x1B, the GIDs), as no router is on the way. */
struct grh_st {
    struct fx *fx;
};

static void grh_sender(void *arg)
{
    struct grh_st *g = arg;
    struct fx_rc rc;
    struct fx_rc_opts o = ud_opts();
    CHECK(fx_rc_open(g->fx, &rc, &o) == 0);
    CHECK(fx_rc_connect(&rc, "gs", "gr") == 0);
    struct ibv_ah_attr aa = {.is_global = 1, .port_num = 1, .sl = 2};
    aa.grh.dgid = rc.remote.gid;
    aa.grh.hop_limit = 7;
    aa.grh.traffic_class = 0x48;
    aa.grh.flow_label = 0x12345;
    struct ibv_ah *ah = ibv_create_ah(rc.pd, &aa);
    CHECK(ah != NULL);
    if (ah) {
        if (rc.ah)
            ibv_destroy_ah(rc.ah);
        rc.ah = ah;
    }
    fx_barrier(g->fx, "grh/posted", "gs", "gr");
    CHECK(ud_send(&rc, 1, 0, 64, QKEY, false, 0) == 0);
    expect_sent(&rc, 1);
    fx_barrier(g->fx, "grh/done", "gs", "gr");
    fx_rc_close(&rc);
}

static void grh_receiver(void *arg)
{
    struct grh_st *g = arg;
    struct fx_rc rc;
    struct fx_rc_opts o = ud_opts();
    CHECK(fx_rc_open(g->fx, &rc, &o) == 0);
    CHECK(fx_rc_connect(&rc, "gr", "gs") == 0);
    CHECK(fx_post_recv(&rc, 9, 0, 40 + 64) == 0);
    fx_barrier(g->fx, "grh/posted", "gr", "gs");
    struct ibv_wc wc;
    CHECK(fx_poll_one(rc.rcq, &wc) == 1);
    CHECK_EQ_U64(wc.status, IBV_WC_SUCCESS);
    CHECK(wc.wc_flags & IBV_WC_GRH);
    CHECK_EQ_U64(wc.byte_len, 40 + 64);
    const uint8_t *h = rc.buf;
    uint32_t w0 = (uint32_t)h[0] << 24 | (uint32_t)h[1] << 16 | (uint32_t)h[2] << 8 | h[3];
    CHECK_EQ_U64(w0, 0x64812345u); /* IPVer 6, TClass 0x48, FlowLabel 0x12345 */
    CHECK_EQ_U64((uint32_t)h[4] << 8 | h[5], 12 + 8 + 64 + 4); /* PayLen: BTH .. ICRC */
    CHECK_EQ_U64(h[6], 0x1b);
    CHECK_EQ_U64(h[7], 7); /* HopLmt as the sender's AH set it */
    CHECK(memcmp(h + 8, rc.remote.gid.raw, 16) == 0);
    CHECK(memcmp(h + 24, rc.local.gid.raw, 16) == 0);
    fx_barrier(g->fx, "grh/done", "gr", "gs");
    fx_rc_close(&rc);
}

static void test_ah_from_wc_without_grh(void)
{
    struct nic_params np;
    nic_params_default(&np);
    np.link_layer = NIC_LINK_IB;
    struct fx *fx = fx_create(6, &np);
    fx_spawn(fx, 1, "ib", ah_from_wc_ib, fx);
    CHECK_EQ_U64(fx_run(fx), SIM_RUN_DONE);
    fx_destroy(fx);
    fx = fx_create(6, &np);
    fx_spawn(fx, 1, "lids", ib_lid_corners, fx);
    CHECK_EQ_U64(fx_run(fx), SIM_RUN_DONE);
    fx_destroy(fx);
    struct grh_st g = {.fx = fx_create(7, &np)};
    CHECK_EQ_U64(fx_run_pair(g.fx, "gs", grh_sender, "gr", grh_receiver, &g), SIM_RUN_DONE);
    fx_destroy(g.fx);
    fx = fx_create(6, NULL);
    fx_spawn(fx, 1, "roce", ah_from_wc_roce, fx);
    CHECK_EQ_U64(fx_run(fx), SIM_RUN_DONE);
    fx_destroy(fx);
}

int main(void)
{
    test_ah_from_wc_without_grh();
    struct st s;
    memset(&s, 0, sizeof(s));
    s.fx = fx_create(5, NULL);
    if (getenv("UD_TRACE"))
        sim_trace_enable(s.fx->sim, 200);
    enum sim_run_result rr = fx_run_pair(s.fx, "c", client, "s", server, &s);
    CHECK_EQ_U64(rr, SIM_RUN_DONE);
    if (getenv("UD_TRACE"))
        sim_trace_dump(s.fx->sim, stderr, 60);
    CHECK(s.reply_ok);
    CHECK_EQ_U64(s.write_rc, EINVAL);
    CHECK_EQ_U64(s.read_rc, EINVAL);
    CHECK_EQ_U64(s.noah_rc, EINVAL);
    CHECK_EQ_U64(s.oversize_wc[0].wr_id, 10);
    CHECK_EQ_U64(s.oversize_wc[0].status, IBV_WC_LOC_LEN_ERR);
    CHECK_EQ_U64(s.oversize_wc[0].vendor_err, 0x01);
    CHECK_EQ_U64(s.oversize_wc[1].wr_id, 11);
    CHECK_EQ_U64(s.oversize_wc[1].status, IBV_WC_WR_FLUSH_ERR);
    CHECK_EQ_U64(s.after_oversize, IBV_QPS_SQE);
    CHECK(s.recv_in_sqe_ok);
    CHECK_EQ_U64(s.after_recover, IBV_QPS_RTS);
    /* one datagram per packet, no ACKs: the client sent 1, 2, 3, 4, 12,
     * 13, 14, 15 (the oversize one and the flushed one never left) */
    const struct nic_counters *cc = nic_get_counters(s.fx->nic[0]);
    CHECK_EQ_U64(cc->pkts_tx, 8);
    CHECK_EQ_U64(cc->acks_rx + cc->acks_tx, 0);
    fx_destroy(s.fx);
    return test_summary();
}
