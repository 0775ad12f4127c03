/* The QP state machine as the kernel enforces it, for RC (and, transition
 * by transition, UC and UD): every standard
 * transition with its required mask succeeds; dropping any required bit
 * or adding a bit that is neither required nor optional is EINVAL and
 * leaves the state unchanged; transitions outside the table are EINVAL;
 * any state can go to RESET and ERR; attribute values are checked; and
 * ibv_query_qp reflects what was set. */
#include <stdio.h>
#include <string.h>

#include "fixture.h"
#include "test.h"

/* The kernel's RC rows (drivers/infiniband/core/verbs.c qp_state_table),
 * restated here independently of verbs_shim/qp.c. */
#define REQ_INIT (IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)
#define OPT_INIT 0
#define REQ_RTR                                                                                    \
    (IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |   \
     IBV_QP_MIN_RNR_TIMER)
#define OPT_RTR (IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX)
#define REQ_RTS                                                                                    \
    (IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC)
#define OPT_RTS                                                                                    \
    (IBV_QP_CUR_STATE | IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_MIN_RNR_TIMER |             \
     IBV_QP_PATH_MIG_STATE)
#define ALL_BITS ((IBV_QP_RATE_LIMIT << 1) - 1)

/* Required / optional bits of the three standard transitions per QP type,
 * from the same kernel table: UC has no RDMA-read depths, retry counts or
 * RNR timer; UD no path at all, a Q_Key from RESET->INIT on, and only
 * SQ_PSN required at RTR->RTS. */
struct qpt_masks {
    enum ibv_qp_type type;
    const char *name;
    int req_init, opt_init, req_rtr, opt_rtr, req_rts, opt_rts;
};
static const struct qpt_masks RC_MASKS = {IBV_QPT_RC, "RC",    REQ_INIT, OPT_INIT,
                                          REQ_RTR,    OPT_RTR, REQ_RTS,  OPT_RTS};
static const struct qpt_masks UC_MASKS = {
    IBV_QPT_UC,
    "UC",
    IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS,
    0,
    IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN,
    IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX,
    IBV_QP_SQ_PSN,
    IBV_QP_CUR_STATE | IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PATH_MIG_STATE,
};
static const struct qpt_masks UD_MASKS = {
    IBV_QPT_UD,
    "UD",
    IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY,
    0,
    0,
    IBV_QP_PKEY_INDEX | IBV_QP_QKEY,
    IBV_QP_SQ_PSN,
    IBV_QP_CUR_STATE | IBV_QP_QKEY,
};

struct env {
    struct fx *fx;
    struct ibv_context *ctx;
    struct ibv_pd *pd;
    struct ibv_cq *cq;
    union ibv_gid peer_gid;
    struct ibv_device_attr dev;
    struct ibv_port_attr port;
    unsigned qps_made;
    const struct qpt_masks *m; /* the QP type under test */
};

static struct ibv_qp *new_qp(struct env *e)
{
    struct ibv_qp_init_attr ia = {
        .send_cq = e->cq,
        .recv_cq = e->cq,
        .cap = {.max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 2, .max_recv_sge = 2},
        .qp_type = e->m->type,
    };
    struct ibv_qp *qp = ibv_create_qp(e->pd, &ia);
    CHECK(qp != NULL);
    e->qps_made++;
    return qp;
}

static void init_attr(struct ibv_qp_attr *a)
{
    memset(a, 0, sizeof(*a));
    a->qp_state = IBV_QPS_INIT;
    a->port_num = 1;
    a->qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
    a->qkey = 0x11111111;
}

static void rtr_attr(const struct env *e, struct ibv_qp_attr *a)
{
    init_attr(a); /* keeps port/access valid for optional bits */
    a->qp_state = IBV_QPS_RTR;
    a->path_mtu = IBV_MTU_1024;
    a->dest_qp_num = 0x123;
    a->rq_psn = 0x4567;
    a->max_dest_rd_atomic = 1;
    a->min_rnr_timer = 12;
    a->ah_attr.is_global = 1;
    a->ah_attr.grh.dgid = e->peer_gid;
    a->ah_attr.grh.hop_limit = 64;
    a->ah_attr.port_num = 1;
}

static void rts_attr(const struct env *e, struct ibv_qp_attr *a)
{
    rtr_attr(e, a);
    a->qp_state = IBV_QPS_RTS;
    a->cur_qp_state = IBV_QPS_RTR;
    a->timeout = 14;
    a->retry_cnt = 7;
    a->rnr_retry = 7;
    a->sq_psn = 0x89ab;
    a->max_rd_atomic = 1;
}

static enum ibv_qp_state state_of(struct ibv_qp *qp)
{
    struct ibv_qp_attr a;
    struct ibv_qp_init_attr ia;
    CHECK(ibv_query_qp(qp, &a, IBV_QP_STATE, &ia) == 0);
    return a.qp_state;
}

/* Take a fresh QP to `target` (RESET, INIT, RTR or RTS) the standard way. */
static void bring(struct env *e, struct ibv_qp *qp, enum ibv_qp_state target)
{
    struct ibv_qp_attr a;
    if (target >= IBV_QPS_INIT) {
        init_attr(&a);
        CHECK(ibv_modify_qp(qp, &a, IBV_QP_STATE | e->m->req_init) == 0);
    }
    if (target >= IBV_QPS_RTR) {
        rtr_attr(e, &a);
        CHECK(ibv_modify_qp(qp, &a, IBV_QP_STATE | e->m->req_rtr) == 0);
    }
    if (target >= IBV_QPS_RTS) {
        rts_attr(e, &a);
        CHECK(ibv_modify_qp(qp, &a, IBV_QP_STATE | e->m->req_rts) == 0);
    }
    CHECK_EQ_U64(state_of(qp), target);
}

/* For the transition from->to with (req, opt): the standard mask works;
 * each required bit removed -> EINVAL; each optional bit added works
 * (except ALT_PATH, banned on RoCE); every other bit added -> EINVAL.
 * The state is unchanged after each failure. */
static void check_transition(struct env *e, enum ibv_qp_state from, enum ibv_qp_state to, int req,
                             int opt)
{
    struct ibv_qp_attr a;
    if (to == IBV_QPS_INIT)
        init_attr(&a);
    else if (to == IBV_QPS_RTR)
        rtr_attr(e, &a);
    else
        rts_attr(e, &a);

    struct ibv_qp *qp = new_qp(e);
    bring(e, qp, from);
    CHECK(ibv_modify_qp(qp, &a, IBV_QP_STATE | req) == 0);
    CHECK_EQ_U64(state_of(qp), to);
    CHECK_EQ_U64(qp->state, to);
    CHECK(ibv_destroy_qp(qp) == 0);

    for (int bit = 1; bit <= ALL_BITS; bit <<= 1) {
        if (bit == IBV_QP_STATE)
            continue;
        int mask;
        int want;
        if (req & bit) {
            mask = IBV_QP_STATE | (req & ~bit);
            want = EINVAL;
        } else if (opt & bit) {
            mask = IBV_QP_STATE | req | bit;
            want = bit == IBV_QP_ALT_PATH ? EINVAL : 0;
        } else {
            mask = IBV_QP_STATE | req | bit;
            want = EINVAL;
        }
        qp = new_qp(e);
        bring(e, qp, from);
        int rc = ibv_modify_qp(qp, &a, mask);
        if (rc != want)
            fprintf(stderr, "  %s %d->%d mask bit 0x%x: got %d want %d\n", e->m->name, from, to,
                    bit, rc, want);
        CHECK_EQ_U64(rc, want);
        CHECK_EQ_U64(state_of(qp), want ? from : to);
        CHECK(ibv_destroy_qp(qp) == 0);
    }
}

static void expect_modify(struct env *e, enum ibv_qp_state from, struct ibv_qp_attr *a, int mask,
                          int want, const char *what)
{
    struct ibv_qp *qp = new_qp(e);
    bring(e, qp, from);
    int rc = ibv_modify_qp(qp, a, mask);
    if (rc != want)
        fprintf(stderr, "  %s: got %d want %d\n", what, rc, want);
    CHECK_EQ_U64(rc, want);
    CHECK(ibv_destroy_qp(qp) == 0);
}

static void program(void *arg)
{
    struct env *e = arg;
    int n = 0;
    struct ibv_device **list = ibv_get_device_list(&n);
    CHECK(n == 1);
    e->ctx = ibv_open_device(list[0]);
    ibv_free_device_list(list);
    e->pd = ibv_alloc_pd(e->ctx);
    e->cq = ibv_create_cq(e->ctx, 64, NULL, NULL, 0);
    CHECK(e->ctx && e->pd && e->cq);
    CHECK(ibv_query_device(e->ctx, &e->dev) == 0);
    CHECK(ibv_query_port(e->ctx, 1, &e->port) == 0);
    nic_gid_of_node(1, &e->peer_gid);

    /* UC and UD: the three standard transitions with their own masks, bit by
     * bit (a bit another type needs, e.g. QKEY on UC or ACCESS_FLAGS on UD,
     * is EINVAL) */
    static const struct qpt_masks *const unrel[] = {&UC_MASKS, &UD_MASKS};
    for (unsigned i = 0; i < 2; i++) {
        e->m = unrel[i];
        check_transition(e, IBV_QPS_RESET, IBV_QPS_INIT, e->m->req_init, e->m->opt_init);
        check_transition(e, IBV_QPS_INIT, IBV_QPS_RTR, e->m->req_rtr, e->m->opt_rtr);
        check_transition(e, IBV_QPS_RTR, IBV_QPS_RTS, e->m->req_rts, e->m->opt_rts);
        /* RTS <-> SQD, to ERR and RESET */
        struct ibv_qp *qp = new_qp(e);
        bring(e, qp, IBV_QPS_RTS);
        struct ibv_qp_attr sa = {.qp_state = IBV_QPS_SQD};
        CHECK(ibv_modify_qp(qp, &sa, IBV_QP_STATE) == 0);
        sa.qp_state = IBV_QPS_RTS;
        CHECK(ibv_modify_qp(qp, &sa, IBV_QP_STATE) == 0);
        sa.qp_state = IBV_QPS_ERR;
        CHECK(ibv_modify_qp(qp, &sa, IBV_QP_STATE) == 0);
        sa.qp_state = IBV_QPS_RESET;
        CHECK(ibv_modify_qp(qp, &sa, IBV_QP_STATE) == 0);
        CHECK_EQ_U64(state_of(qp), IBV_QPS_RESET);
        CHECK(ibv_destroy_qp(qp) == 0);
    }
    /* UD keeps its Q_Key; a UC QP has none to query */
    {
        e->m = &UD_MASKS;
        struct ibv_qp *qp = new_qp(e);
        bring(e, qp, IBV_QPS_RTS);
        struct ibv_qp_attr q;
        struct ibv_qp_init_attr qi;
        CHECK(ibv_query_qp(qp, &q, IBV_QP_QKEY, &qi) == 0);
        CHECK_EQ_U64(q.qkey, 0x11111111);
        CHECK_EQ_U64(q.sq_psn, 0x89ab);
        CHECK_EQ_U64(qi.qp_type, IBV_QPT_UD);
        CHECK(ibv_destroy_qp(qp) == 0);
    }
    e->m = &RC_MASKS;

    /* the three standard transitions, bit by bit */
    check_transition(e, IBV_QPS_RESET, IBV_QPS_INIT, REQ_INIT, OPT_INIT);
    check_transition(e, IBV_QPS_INIT, IBV_QPS_RTR, REQ_RTR, OPT_RTR);
    check_transition(e, IBV_QPS_RTR, IBV_QPS_RTS, REQ_RTS, OPT_RTS);

    struct ibv_qp_attr a;
    /* transitions outside the table */
    rtr_attr(e, &a);
    expect_modify(e, IBV_QPS_RESET, &a, IBV_QP_STATE | REQ_RTR, EINVAL, "RESET->RTR");
    rts_attr(e, &a);
    expect_modify(e, IBV_QPS_RESET, &a, IBV_QP_STATE | REQ_RTS, EINVAL, "RESET->RTS");
    expect_modify(e, IBV_QPS_INIT, &a, IBV_QP_STATE | REQ_RTS, EINVAL, "INIT->RTS");
    init_attr(&a);
    expect_modify(e, IBV_QPS_RTR, &a, IBV_QP_STATE | REQ_INIT, EINVAL, "RTR->INIT");
    expect_modify(e, IBV_QPS_RTS, &a, IBV_QP_STATE | REQ_INIT, EINVAL, "RTS->INIT");
    rtr_attr(e, &a);
    expect_modify(e, IBV_QPS_RTS, &a, IBV_QP_STATE | REQ_RTR, EINVAL, "RTS->RTR");

    /* same-state modifies */
    init_attr(&a);
    expect_modify(e, IBV_QPS_RESET, &a, 0, 0, "RESET->RESET (empty mask)");
    expect_modify(e, IBV_QPS_INIT, &a, IBV_QP_STATE | IBV_QP_ACCESS_FLAGS, 0, "INIT->INIT");
    a.qp_state = IBV_QPS_RTS;
    expect_modify(e, IBV_QPS_RTS, &a, IBV_QP_STATE | IBV_QP_ACCESS_FLAGS, 0, "RTS->RTS");
    expect_modify(e, IBV_QPS_RTS, &a, IBV_QP_ACCESS_FLAGS, 0, "RTS, no STATE bit");
    expect_modify(e, IBV_QPS_RTS, &a, IBV_QP_STATE | IBV_QP_PATH_MTU, EINVAL, "RTS->RTS mtu");

    /* CUR_STATE: only from RTR/RTS/SQD/SQE, and it must be the truth */
    init_attr(&a);
    a.cur_qp_state = IBV_QPS_RESET;
    expect_modify(e, IBV_QPS_RESET, &a, IBV_QP_STATE | IBV_QP_CUR_STATE | REQ_INIT, EINVAL,
                  "CUR_STATE from RESET");
    rts_attr(e, &a);
    a.cur_qp_state = IBV_QPS_INIT;
    expect_modify(e, IBV_QPS_RTR, &a, IBV_QP_STATE | IBV_QP_CUR_STATE | REQ_RTS, EINVAL,
                  "CUR_STATE lies");

    /* to ERR and RESET from everywhere; back from ERR to RESET and reuse */
    for (enum ibv_qp_state st = IBV_QPS_RESET; st <= IBV_QPS_RTS; st++) {
        struct ibv_qp *qp = new_qp(e);
        bring(e, qp, st);
        a.qp_state = IBV_QPS_ERR;
        CHECK(ibv_modify_qp(qp, &a, IBV_QP_STATE) == 0);
        CHECK_EQ_U64(state_of(qp), IBV_QPS_ERR);
        init_attr(&a);
        CHECK_EQ_U64(ibv_modify_qp(qp, &a, IBV_QP_STATE | REQ_INIT), EINVAL);
        a.qp_state = IBV_QPS_RESET;
        CHECK(ibv_modify_qp(qp, &a, IBV_QP_STATE) == 0);
        CHECK_EQ_U64(state_of(qp), IBV_QPS_RESET);
        bring(e, qp, IBV_QPS_RTS);
        a.qp_state = IBV_QPS_RESET;
        CHECK(ibv_modify_qp(qp, &a, IBV_QP_STATE) == 0);
        CHECK_EQ_U64(state_of(qp), IBV_QPS_RESET);
        CHECK(ibv_destroy_qp(qp) == 0);
    }
    /* RTS <-> SQD */
    {
        struct ibv_qp *qp = new_qp(e);
        bring(e, qp, IBV_QPS_RTS);
        a.qp_state = IBV_QPS_SQD;
        CHECK(ibv_modify_qp(qp, &a, IBV_QP_STATE) == 0);
        CHECK_EQ_U64(state_of(qp), IBV_QPS_SQD);
        a.qp_state = IBV_QPS_RTS;
        CHECK(ibv_modify_qp(qp, &a, IBV_QP_STATE) == 0);
        CHECK_EQ_U64(state_of(qp), IBV_QPS_RTS);
        CHECK(ibv_destroy_qp(qp) == 0);
    }

    /* attribute values */
    init_attr(&a);
    a.port_num = 2;
    expect_modify(e, IBV_QPS_RESET, &a, IBV_QP_STATE | REQ_INIT, EINVAL, "port 2");
    init_attr(&a);
    a.pkey_index = 1;
    expect_modify(e, IBV_QPS_RESET, &a, IBV_QP_STATE | REQ_INIT, EINVAL, "pkey index 1");
    rtr_attr(e, &a);
    a.path_mtu = (enum ibv_mtu)(e->port.max_mtu + 1);
    expect_modify(e, IBV_QPS_INIT, &a, IBV_QP_STATE | REQ_RTR, EINVAL, "path_mtu > max");
    rtr_attr(e, &a);
    a.max_dest_rd_atomic = (uint8_t)(e->dev.max_qp_rd_atom + 1);
    expect_modify(e, IBV_QPS_INIT, &a, IBV_QP_STATE | REQ_RTR, EINVAL, "max_dest_rd_atomic");
    rtr_attr(e, &a);
    a.ah_attr.is_global = 0;
    expect_modify(e, IBV_QPS_INIT, &a, IBV_QP_STATE | REQ_RTR, EINVAL, "AV without GRH");
    rtr_attr(e, &a);
    memset(&a.ah_attr.grh.dgid, 0, sizeof(a.ah_attr.grh.dgid));
    a.ah_attr.grh.dgid.raw[0] = 0xfe;
    a.ah_attr.grh.dgid.raw[1] = 0x80;
    a.ah_attr.grh.dgid.raw[15] = 0x77;
    expect_modify(e, IBV_QPS_INIT, &a, IBV_QP_STATE | REQ_RTR, EINVAL, "unknown DGID");
    rtr_attr(e, &a);
    a.ah_attr.port_num = 3;
    expect_modify(e, IBV_QPS_INIT, &a, IBV_QP_STATE | REQ_RTR, EINVAL, "AV port 3");
    rts_attr(e, &a);
    a.timeout = 32;
    expect_modify(e, IBV_QPS_RTR, &a, IBV_QP_STATE | REQ_RTS, EINVAL, "timeout 32");
    rts_attr(e, &a);
    a.retry_cnt = 8;
    expect_modify(e, IBV_QPS_RTR, &a, IBV_QP_STATE | REQ_RTS, EINVAL, "retry_cnt 8");
    rts_attr(e, &a);
    a.rnr_retry = 8;
    expect_modify(e, IBV_QPS_RTR, &a, IBV_QP_STATE | REQ_RTS, EINVAL, "rnr_retry 8");
    rts_attr(e, &a);
    a.max_rd_atomic = (uint8_t)(e->dev.max_qp_init_rd_atom + 1);
    expect_modify(e, IBV_QPS_RTR, &a, IBV_QP_STATE | REQ_RTS, EINVAL, "max_rd_atomic");
    init_attr(&a);
    expect_modify(e, IBV_QPS_RESET, &a, IBV_QP_STATE | REQ_INIT | (1 << 27), EOPNOTSUPP,
                  "unknown mask bit");
    {
        struct ibv_qp *qp = new_qp(e);
        CHECK_EQ_U64(ibv_modify_qp(qp, NULL, IBV_QP_STATE), EINVAL);
        CHECK(ibv_destroy_qp(qp) == 0);
    }

    /* ibv_query_qp reflects the attributes */
    {
        struct ibv_qp *qp = new_qp(e);
        bring(e, qp, IBV_QPS_RTS);
        struct ibv_qp_attr q;
        struct ibv_qp_init_attr qi;
        memset(&q, 0xa5, sizeof(q));
        CHECK(ibv_query_qp(qp, &q, IBV_QP_STATE | IBV_QP_CAP | IBV_QP_DEST_QPN, &qi) == 0);
        CHECK_EQ_U64(q.qp_state, IBV_QPS_RTS);
        CHECK_EQ_U64(q.dest_qp_num, 0x123);
        CHECK_EQ_U64(q.path_mtu, IBV_MTU_1024);
        CHECK_EQ_U64(q.sq_psn, 0x89ab);
        CHECK_EQ_U64(q.rq_psn, 0x4567);
        CHECK_EQ_U64(q.timeout, 14);
        CHECK_EQ_U64(q.retry_cnt, 7);
        CHECK_EQ_U64(q.port_num, 1);
        CHECK_EQ_U64(q.cap.max_send_wr, 8);
        CHECK_EQ_U64(q.cap.max_send_sge, 2);
        CHECK_EQ_U64(qi.qp_type, IBV_QPT_RC);
        CHECK(qi.send_cq == e->cq && qi.recv_cq == e->cq);
        CHECK(ibv_destroy_qp(qp) == 0);
    }

    CHECK(ibv_destroy_cq(e->cq) == 0);
    CHECK(ibv_dealloc_pd(e->pd) == 0);
    CHECK(ibv_close_device(e->ctx) == 0);
}

int main(void)
{
    struct env e;
    memset(&e, 0, sizeof(e));
    e.fx = fx_create(3, NULL);
    fx_spawn(e.fx, 0, "states", program, &e);
    enum sim_run_result r = fx_run(e.fx);
    CHECK_EQ_U64(r, SIM_RUN_DONE);
    if (r != SIM_RUN_DONE)
        sim_deadlock_report(e.fx->sim, stderr);
    printf("%u QPs created; simulated time %.1f us\n", e.qps_made,
           sim_ps_to_us(sim_now(e.fx->sim)));
    fx_destroy(e.fx);
    return test_summary();
}
