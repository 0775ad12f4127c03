/* XRC (sim/nic/xrc.c, verbs_shim/xrc.c): domains, XRC SRQs with their own
 * CQ and number, an XRC_SEND initiator on h0 and an XRC_RECV target on h1.
 *   api    ibv_open_xrcd / ibv_create_srq_ex / ibv_create_qp_ex argument
 *          errors, domains shared through a file, close while in use,
 *          the XRC rows of the modify-QP mask table, posting on XRC QPs.
 *   data   a two-packet SEND, a SEND with immediate and an RDMA WRITE
 *          through the target into SRQ a1: the data, the CQE on the SRQ's
 *          CQ (wc.qp_num the target, src_qp the initiator), the write
 *          checked against the SRQ's PD.
 *   errors a SEND naming the SRQ of another domain, then (after both QPs
 *          are reset and reconnected) a number no SRQ has: NAK-Invalid
 *          Request, IBV_WC_REM_INV_REQ_ERR at the initiator, the target in
 *          ERR, the receive WQEs untouched. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test.h"
#include "verbs/fixture.h"

/* verbs.h's inline ibv_close_xrcd calls through verbs_get_ctx() without a
 * NULL check, which -Wnull-dereference flags in rdma-core's own header */
#pragma GCC diagnostic ignored "-Wnull-dereference"

struct tgt_info {
    uint32_t qpn, srqn_a1, srqn_b1, rkey;
    uint64_t addr;
    union ibv_gid gid;
};
struct ini_info {
    uint32_t qpn;
    union ibv_gid gid;
};

static struct {
    struct fx *fx;
    struct fx_rc h0, h1;
} g;

enum { MSG_BYTES = 6000, PSN = 0x100 };

static void ah(struct ibv_ah_attr *a, const union ibv_gid *gid)
{
    memset(a, 0, sizeof(*a));
    a->is_global = 1;
    a->grh.dgid = *gid;
    a->grh.hop_limit = 64;
    a->port_num = 1;
}

/* RESET -> INIT -> RTR -> RTS with the XRC masks of xsrq_pingpong.c. */
static int connect(struct ibv_qp *qp, bool tgt, uint32_t dest_qpn, const union ibv_gid *gid)
{
    struct ibv_qp_attr a = {.qp_state = IBV_QPS_RESET};
    if (ibv_modify_qp(qp, &a, IBV_QP_STATE))
        return 1;
    a = (struct ibv_qp_attr){.qp_state = IBV_QPS_INIT,
                             .port_num = 1,
                             .qp_access_flags = tgt ? IBV_ACCESS_REMOTE_WRITE : 0};
    if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
        return 2;
    a = (struct ibv_qp_attr){.qp_state = IBV_QPS_RTR,
                             .path_mtu = IBV_MTU_4096,
                             .dest_qp_num = dest_qpn,
                             .rq_psn = PSN,
                             .min_rnr_timer = 12};
    ah(&a.ah_attr, gid);
    int m = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
    int resp = IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
    /* the initiator's row has no responder attributes, the target needs them */
    if (ibv_modify_qp(qp, &a, tgt ? m : m | resp) != EINVAL)
        return 3;
    if (ibv_modify_qp(qp, &a, tgt ? m | resp : m))
        return 4;
    a = (struct ibv_qp_attr){
        .qp_state = IBV_QPS_RTS, .timeout = 14, .retry_cnt = 7, .rnr_retry = 7, .sq_psn = PSN};
    m = IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_SQ_PSN;
    int req = IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
    /* the target's RTR->RTS has no requester attributes */
    if (ibv_modify_qp(qp, &a, tgt ? m | req : m) != EINVAL)
        return 5;
    if (ibv_modify_qp(qp, &a, tgt ? m : m | req))
        return 6;
    return 0;
}

static int post_send(struct ibv_qp *qp, enum ibv_wr_opcode op, uint64_t wr_id, uint32_t len,
                     uint32_t srqn, uint64_t raddr, uint32_t rkey)
{
    struct ibv_sge sge = {.addr = (uintptr_t)g.h0.buf, .length = len, .lkey = g.h0.mr->lkey};
    struct ibv_send_wr wr = {.wr_id = wr_id,
                             .sg_list = &sge,
                             .num_sge = 1,
                             .opcode = op,
                             .send_flags = IBV_SEND_SIGNALED,
                             .imm_data = htobe32(0x1234)},
                       *bad;
    wr.qp_type.xrc.remote_srqn = srqn;
    wr.wr.rdma.remote_addr = raddr;
    wr.wr.rdma.rkey = rkey;
    return ibv_post_send(qp, &wr, &bad);
}

static int post_srq(struct ibv_srq *srq, uint64_t wr_id, size_t off, uint32_t len)
{
    struct ibv_sge sge = {
        .addr = (uintptr_t)(g.h1.buf + off), .length = len, .lkey = g.h1.mr->lkey};
    struct ibv_recv_wr wr = {.wr_id = wr_id, .sg_list = &sge, .num_sge = 1}, *bad;
    return ibv_post_srq_recv(srq, &wr, &bad);
}

static struct ibv_srq *xrc_srq(struct ibv_xrcd *x, struct ibv_cq *cq, uint32_t mask)
{
    struct ibv_srq_init_attr_ex a = {
        .attr = {.max_wr = 8, .max_sge = 1},
        .comp_mask = mask,
        .srq_type = IBV_SRQT_XRC,
        .pd = g.h1.pd,
        .xrcd = x,
        .cq = cq,
    };
    return ibv_create_srq_ex(g.h1.ctx, &a);
}

static struct ibv_xrcd *open_xrcd(int fd, int oflags, uint32_t mask)
{
    struct ibv_xrcd_init_attr a = {.comp_mask = mask, .fd = fd, .oflags = oflags};
    errno = 0;
    return ibv_open_xrcd(g.h1.ctx, &a);
}

static void target(void *arg)
{
    (void)arg;
    const uint32_t both = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS;
    const uint32_t srq_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD |
                              IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ;
    CHECK(fx_rc_open(g.fx, &g.h1, NULL) == 0);

    /* ---- domains */
    CHECK(!open_xrcd(-1, O_CREAT, IBV_XRCD_INIT_ATTR_FD) && errno == EINVAL);
    CHECK(!open_xrcd(-1, O_CREAT, both | IBV_XRCD_INIT_ATTR_RESERVED) && errno == EOPNOTSUPP);
    CHECK(!open_xrcd(1 << 20, O_CREAT, both) && errno == EBADF);
    char path[] = "/tmp/rnicsim_xrc_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    CHECK(!open_xrcd(fd, 0, both) && errno == EAGAIN); /* none yet, no O_CREAT */
    struct ibv_xrcd *f1 = open_xrcd(fd, O_CREAT, both);
    struct ibv_xrcd *f2 = open_xrcd(fd, 0, both); /* the same domain */
    CHECK(f1 && f2);
    CHECK(!open_xrcd(fd, O_CREAT | O_EXCL, both) && errno == EINVAL);
    struct ibv_srq *fs = xrc_srq(f1, g.h1.rcq, srq_mask);
    CHECK(fs != NULL);
    CHECK(ibv_close_xrcd(f1) == 0);     /* f2 keeps the domain */
    CHECK(ibv_close_xrcd(f2) == EBUSY); /* ... which the SRQ uses */
    CHECK(ibv_destroy_srq(fs) == 0);
    CHECK(ibv_close_xrcd(f2) == 0);
    close(fd);
    unlink(path);

    struct ibv_xrcd *xa = open_xrcd(-1, O_CREAT, both), *xb = open_xrcd(-1, O_CREAT, both);
    CHECK(xa && xb);

    /* ---- XRC SRQs */
    errno = 0;
    CHECK(!xrc_srq(xa, g.h1.rcq, srq_mask & ~IBV_SRQ_INIT_ATTR_CQ) && errno == EINVAL);
    errno = 0;
    CHECK(!xrc_srq(NULL, g.h1.rcq, srq_mask) && errno == EINVAL);
    struct ibv_srq_init_attr_ex tm = {.attr = {.max_wr = 8, .max_sge = 1},
                                      .comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD,
                                      .srq_type = IBV_SRQT_TM,
                                      .pd = g.h1.pd};
    errno = 0;
    CHECK(!ibv_create_srq_ex(g.h1.ctx, &tm) && errno == EOPNOTSUPP);
    struct ibv_srq *a1 = xrc_srq(xa, g.h1.rcq, srq_mask), *b1 = xrc_srq(xb, g.h1.rcq, srq_mask);
    CHECK(a1 && b1);
    struct tgt_info ti = {
        .addr = (uintptr_t)g.h1.buf, .rkey = g.h1.mr->rkey, .gid = g.h1.local.gid};
    CHECK(ibv_get_srq_num(a1, &ti.srqn_a1) == 0 && ibv_get_srq_num(b1, &ti.srqn_b1) == 0);
    CHECK(ti.srqn_a1 != ti.srqn_b1);
    CHECK(ibv_destroy_cq(g.h1.rcq) == EBUSY); /* the SRQs' CQ */
    CHECK(ibv_close_xrcd(xa) == EBUSY);

    /* ---- the target QP */
    struct ibv_qp_init_attr_ex qa = {
        .qp_type = IBV_QPT_XRC_RECV, .comp_mask = IBV_QP_INIT_ATTR_PD, .pd = g.h1.pd};
    errno = 0;
    CHECK(!ibv_create_qp_ex(g.h1.ctx, &qa) && errno == EINVAL); /* no domain */
    qa = (struct ibv_qp_init_attr_ex){
        .qp_type = IBV_QPT_XRC_RECV, .comp_mask = IBV_QP_INIT_ATTR_XRCD, .xrcd = xa};
    struct ibv_qp *tq = ibv_create_qp_ex(g.h1.ctx, &qa);
    CHECK(tq && tq->qp_type == IBV_QPT_XRC_RECV && !tq->pd && !tq->recv_cq && !tq->srq);
    struct ibv_recv_wr rwr = {0}, *rbad;
    CHECK(ibv_post_recv(tq, &rwr, &rbad) == ENOMEM); /* no receive queue */
    ti.qpn = tq->qp_num;
    fx_put(g.fx, "tgt", &ti, sizeof(ti));
    struct ini_info ii;
    fx_get(g.fx, "ini", &ii, sizeof(ii));
    CHECK(connect(tq, true, ii.qpn, &ii.gid) == 0);
    for (unsigned i = 0; i < 4; i++) {
        CHECK(post_srq(a1, 0xa100 + i, (size_t)i * 8192, 8192) == 0);
        CHECK(post_srq(b1, 0xb100 + i, (size_t)i * 8192, 8192) == 0);
    }
    fx_barrier(g.fx, "up", "t", "i");

    /* ---- data: SEND (two packets), SEND with immediate into a1 */
    struct ibv_wc wc;
    for (unsigned i = 0; i < 2; i++) {
        CHECK(fx_poll_one(g.h1.rcq, &wc) == 1);
        CHECK(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RECV);
        CHECK_EQ_U64(wc.wr_id, 0xa100 + i);
        CHECK_EQ_U64(wc.qp_num, tq->qp_num);
        CHECK_EQ_U64(wc.src_qp, ii.qpn);
        CHECK_EQ_U64(wc.byte_len, i ? 16 : MSG_BYTES);
        CHECK(i == 0 || ((wc.wc_flags & IBV_WC_WITH_IMM) && wc.imm_data == htobe32(0x1234)));
    }
    bool same = true;
    for (unsigned k = 0; k < MSG_BYTES; k++)
        same &= g.h1.buf[k] == (uint8_t)(k * 7 + 1);
    CHECK(same);
    fx_barrier(g.fx, "sent", "t", "i");
    /* the RDMA WRITE through the target (checked against a1's PD) landed */
    fx_barrier(g.fx, "written", "t", "i");
    CHECK(memcmp(g.h1.buf + 65536, g.h0.buf, 100) == 0);

    /* ---- errors: another domain's SRQ, then a number no SRQ has */
    const struct nic_counters *nc = nic_get_counters(g.fx->nic[1]);
    fx_barrier(g.fx, "bad1", "t", "i");
    CHECK_EQ_U64(nc->xrc_bad_srqn, 1);
    struct ibv_qp_attr qattr;
    struct ibv_qp_init_attr qinit;
    CHECK(ibv_query_qp(tq, &qattr, IBV_QP_STATE, &qinit) == 0 && qattr.qp_state == IBV_QPS_ERR);
    CHECK(connect(tq, true, ii.qpn, &ii.gid) == 0);
    fx_barrier(g.fx, "again", "t", "i");
    fx_barrier(g.fx, "bad2", "t", "i");
    CHECK_EQ_U64(nc->xrc_bad_srqn, 2);
    CHECK(ibv_poll_cq(g.h1.rcq, 1, &wc) == 0); /* nothing delivered, nothing flushed */

    CHECK(ibv_destroy_srq(a1) == 0); /* the target only forgets it */
    CHECK(ibv_destroy_qp(tq) == 0);
    CHECK(ibv_destroy_srq(b1) == 0);
    CHECK(ibv_close_xrcd(xa) == 0 && ibv_close_xrcd(xb) == 0);
    fx_rc_close(&g.h1);
}

static void initiator(void *arg)
{
    (void)arg;
    CHECK(fx_rc_open(g.fx, &g.h0, NULL) == 0);
    for (unsigned k = 0; k < MSG_BYTES; k++)
        g.h0.buf[k] = (uint8_t)(k * 7 + 1);
    /* ibv_create_qp_ex with only a PD is ibv_create_qp (verbs.h) */
    struct ibv_qp_init_attr_ex qa = {.qp_type = IBV_QPT_XRC_SEND,
                                     .send_cq = g.h0.scq,
                                     .cap = {.max_send_wr = 8, .max_send_sge = 1},
                                     .comp_mask = IBV_QP_INIT_ATTR_PD,
                                     .pd = g.h0.pd};
    struct ibv_qp *iq = ibv_create_qp_ex(g.h0.ctx, &qa);
    CHECK(iq && iq->qp_type == IBV_QPT_XRC_SEND && !iq->recv_cq && qa.cap.max_recv_wr == 0);
    struct ini_info ii = {.qpn = iq->qp_num, .gid = g.h0.local.gid};
    fx_put(g.fx, "ini", &ii, sizeof(ii));
    struct tgt_info ti;
    fx_get(g.fx, "tgt", &ti, sizeof(ti));
    CHECK(connect(iq, false, ti.qpn, &ti.gid) == 0);
    fx_barrier(g.fx, "up", "i", "t");

    struct ibv_wc wc;
    CHECK(post_send(iq, IBV_WR_SEND, 1, MSG_BYTES, ti.srqn_a1, 0, 0) == 0);
    CHECK(post_send(iq, IBV_WR_SEND_WITH_IMM, 2, 16, ti.srqn_a1, 0, 0) == 0);
    for (unsigned i = 0; i < 2; i++) {
        CHECK(fx_poll_one(g.h0.scq, &wc) == 1);
        CHECK(wc.status == IBV_WC_SUCCESS && wc.wr_id == i + 1 && wc.qp_num == iq->qp_num);
    }
    fx_barrier(g.fx, "sent", "i", "t");
    CHECK(post_send(iq, IBV_WR_RDMA_WRITE, 3, 100, ti.srqn_a1, ti.addr + 65536, ti.rkey) == 0);
    CHECK(fx_poll_one(g.h0.scq, &wc) == 1 && wc.status == IBV_WC_SUCCESS);
    fx_barrier(g.fx, "written", "i", "t");

    CHECK(post_send(iq, IBV_WR_SEND, 4, 64, ti.srqn_b1, 0, 0) == 0); /* other domain */
    CHECK(fx_poll_one(g.h0.scq, &wc) == 1);
    CHECK(wc.wr_id == 4 && wc.status == IBV_WC_REM_INV_REQ_ERR);
    fx_barrier(g.fx, "bad1", "i", "t");
    CHECK(connect(iq, false, ti.qpn, &ti.gid) == 0);
    fx_barrier(g.fx, "again", "i", "t");
    CHECK(post_send(iq, IBV_WR_SEND, 5, 64, 0xabcdef, 0, 0) == 0); /* no such SRQ */
    CHECK(fx_poll_one(g.h0.scq, &wc) == 1);
    CHECK(wc.wr_id == 5 && wc.status == IBV_WC_REM_INV_REQ_ERR);
    fx_barrier(g.fx, "bad2", "i", "t");
    CHECK(ibv_destroy_qp(iq) == 0);
    fx_rc_close(&g.h0);
}

int main(void)
{
    g.fx = fx_create(5, NULL);
    fx_spawn(g.fx, 1, "target", target, NULL);
    fx_spawn(g.fx, 0, "initiator", initiator, NULL);
    CHECK(fx_run(g.fx) == SIM_RUN_DONE);
    fx_destroy(g.fx);
    return test_summary();
}
