/* Emulation-mode test program (test/scenario/test_emulation.sh): DMA never
 * reaches memory outside a memory region.  An ordinary verbs program,
 * built against the system's <infiniband/verbs.h> and libibverbs, run
 * with the drop-in library on LD_LIBRARY_PATH against a running rnicsimd.
 *
 * Two processes (fork): h1 is the target, with a buffer of three pages of
 * which only the middle one is registered (remote write); h0 the
 * initiator.  Two RC connections, set up over pipes:
 *   QP 0: an RDMA WRITE inside the MR succeeds and its bytes arrive; then a
 *         SEND whose local SGE runs past the initiator's own MR completes
 *         with IBV_WC_LOC_PROT_ERR.
 *   QP 1: an RDMA WRITE that starts inside the target's MR and runs 32
 *         bytes past its end completes with IBV_WC_REM_ACCESS_ERR.
 * The target then checks that the pages around its MR are untouched.
 * Exit status 0 when every check holds; each failure prints a line. */
#include <infiniband/verbs.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define PAGE 4096
#define NQP 2

struct ends {
    uint32_t qpn[NQP];
    union ibv_gid gid;
    uint64_t addr;
    uint32_t rkey;
};

struct side {
    struct ibv_context *ctx;
    struct ibv_pd *pd;
    struct ibv_cq *cq;
    struct ibv_qp *qp[NQP];
    struct ibv_mr *mr;
    uint8_t *buf;
};

static int fail(const char *who, const char *what)
{
    fprintf(stderr, "dma_guard %s: %s\n", who, what);
    return 1;
}

static int open_side(const char *host, struct side *s, size_t mr_off, size_t mr_len, int access)
{
    setenv("RNICSIM_HOST", host, 1);
    int n = 0;
    struct ibv_device **l = ibv_get_device_list(&n);
    if (!l || n < 1)
        return fail(host, "no device");
    s->ctx = ibv_open_device(l[0]);
    ibv_free_device_list(l);
    if (!s->ctx)
        return fail(host, "open");
    s->pd = ibv_alloc_pd(s->ctx);
    s->cq = ibv_create_cq(s->ctx, 16, NULL, NULL, 0);
    s->buf = mmap(NULL, 3 * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (!s->pd || !s->cq || s->buf == MAP_FAILED)
        return fail(host, "pd/cq/buffer");
    memset(s->buf, 0xAA, 3 * PAGE);
    s->mr = ibv_reg_mr(s->pd, s->buf + mr_off, mr_len, access);
    if (!s->mr)
        return fail(host, "reg_mr");
    for (int i = 0; i < NQP; i++) {
        struct ibv_qp_init_attr ia = {
            .send_cq = s->cq,
            .recv_cq = s->cq,
            .cap = {.max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1},
            .qp_type = IBV_QPT_RC};
        s->qp[i] = ibv_create_qp(s->pd, &ia);
        struct ibv_qp_attr a = {
            .qp_state = IBV_QPS_INIT, .port_num = 1, .qp_access_flags = IBV_ACCESS_REMOTE_WRITE};
        if (!s->qp[i] ||
            ibv_modify_qp(s->qp[i], &a,
                          IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
            return fail(host, "qp to INIT");
    }
    return 0;
}

static int connect_side(const char *host, struct side *s, const struct ends *peer)
{
    for (int i = 0; i < NQP; i++) {
        struct ibv_qp_attr a = {.qp_state = IBV_QPS_RTR,
                                .path_mtu = IBV_MTU_1024,
                                .dest_qp_num = peer->qpn[i],
                                .rq_psn = 0,
                                .max_dest_rd_atomic = 1,
                                .min_rnr_timer = 12};
        a.ah_attr.is_global = 1;
        a.ah_attr.grh.dgid = peer->gid;
        a.ah_attr.grh.hop_limit = 1;
        a.ah_attr.port_num = 1;
        if (ibv_modify_qp(s->qp[i], &a,
                          IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                              IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
            return fail(host, "qp to RTR");
        struct ibv_qp_attr b = {.qp_state = IBV_QPS_RTS,
                                .timeout = 10,
                                .retry_cnt = 7,
                                .rnr_retry = 7,
                                .sq_psn = 0,
                                .max_rd_atomic = 1};
        if (ibv_modify_qp(s->qp[i], &b,
                          IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                              IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
            return fail(host, "qp to RTS");
    }
    return 0;
}

static void my_ends(struct side *s, struct ends *e)
{
    memset(e, 0, sizeof(*e));
    for (int i = 0; i < NQP; i++)
        e->qpn[i] = s->qp[i]->qp_num;
    ibv_query_gid(s->ctx, 1, 0, &e->gid);
    e->addr = (uintptr_t)s->mr->addr;
    e->rkey = s->mr->rkey;
}

/* One signaled WR on qp; the status of its completion (-1: none). */
static int post_wait(struct side *s, int qpi, enum ibv_wr_opcode op, void *laddr, uint32_t len,
                     uint64_t raddr, uint32_t rkey)
{
    struct ibv_sge sge = {.addr = (uintptr_t)laddr, .length = len, .lkey = s->mr->lkey};
    struct ibv_send_wr wr = {
        .wr_id = 7, .sg_list = &sge, .num_sge = 1, .opcode = op, .send_flags = IBV_SEND_SIGNALED};
    wr.wr.rdma.remote_addr = raddr;
    wr.wr.rdma.rkey = rkey;
    struct ibv_send_wr *bad;
    if (ibv_post_send(s->qp[qpi], &wr, &bad))
        return -1;
    struct ibv_wc wc;
    for (long spins = 0; spins < 200000000L; spins++) {
        int n = ibv_poll_cq(s->cq, 1, &wc);
        if (n < 0)
            return -1;
        if (n == 1)
            return (int)wc.status;
    }
    return -1;
}

static int target(int rd, int wr)
{
    struct side s;
    if (open_side("h1", &s, PAGE, PAGE,
                  IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ))
        return 1;
    memset(s.buf + PAGE, 0, PAGE);
    struct ends me, peer;
    my_ends(&s, &me);
    if (write(wr, &me, sizeof(me)) != sizeof(me) || read(rd, &peer, sizeof(peer)) != sizeof(peer))
        return fail("h1", "exchange");
    if (connect_side("h1", &s, &peer))
        return 1;
    char done;
    if (write(wr, "r", 1) != 1 || read(rd, &done, 1) != 1) /* the initiator's checks ran */
        return fail("h1", "sync");
    int rc = 0;
    for (int i = 0; i < PAGE; i++)
        if (s.buf[i] != 0xAA || s.buf[2 * PAGE + i] != 0xAA) {
            fprintf(stderr, "dma_guard h1: byte %d of the page %s the MR changed\n", i,
                    s.buf[i] != 0xAA ? "before" : "after");
            rc = 1;
            break;
        }
    for (int i = 0; i < 64; i++)
        if (s.buf[PAGE + 100 + i] != (uint8_t)(0x40 + i)) {
            rc = fail("h1", "the in-bounds RDMA WRITE did not arrive");
            break;
        }
    if (s.buf[2 * PAGE - 1] != 0)
        rc = fail("h1", "the out-of-bounds RDMA WRITE placed bytes inside the MR");
    if (!rc)
        printf("dma_guard h1: pages around the MR untouched, in-bounds data arrived\n");
    return rc;
}

static int initiator(int rd, int wr)
{
    struct side s;
    /* the initiator's MR: the middle page too */
    if (open_side("h0", &s, PAGE, PAGE, IBV_ACCESS_LOCAL_WRITE))
        return 1;
    struct ends me, peer;
    my_ends(&s, &me);
    if (read(rd, &peer, sizeof(peer)) != sizeof(peer) || write(wr, &me, sizeof(me)) != sizeof(me))
        return fail("h0", "exchange");
    if (connect_side("h0", &s, &peer))
        return 1;
    char ready;
    if (read(rd, &ready, 1) != 1)
        return fail("h0", "sync");
    int rc = 0;
    uint8_t *src = s.buf + PAGE;
    for (int i = 0; i < 64; i++)
        src[i] = (uint8_t)(0x40 + i);
    int st = post_wait(&s, 0, IBV_WR_RDMA_WRITE, src, 64, peer.addr + 100, peer.rkey);
    if (st != IBV_WC_SUCCESS) {
        fprintf(stderr, "dma_guard h0: in-bounds RDMA WRITE: status %d\n", st);
        rc = 1;
    }
    /* local SGE past the end of the initiator's MR */
    st = post_wait(&s, 0, IBV_WR_RDMA_WRITE, src + PAGE - 32, 64, peer.addr, peer.rkey);
    if (st != IBV_WC_LOC_PROT_ERR) {
        fprintf(stderr, "dma_guard h0: local SGE outside the MR: status %d, want %d\n", st,
                IBV_WC_LOC_PROT_ERR);
        rc = 1;
    }
    /* remote range past the end of the target's MR */
    st = post_wait(&s, 1, IBV_WR_RDMA_WRITE, src, 64, peer.addr + PAGE - 32, peer.rkey);
    if (st != IBV_WC_REM_ACCESS_ERR) {
        fprintf(stderr, "dma_guard h0: remote range outside the MR: status %d, want %d\n", st,
                IBV_WC_REM_ACCESS_ERR);
        rc = 1;
    }
    if (!rc)
        printf("dma_guard h0: in-bounds write ok, local SGE outside the MR -> "
               "IBV_WC_LOC_PROT_ERR, remote range outside the MR -> IBV_WC_REM_ACCESS_ERR\n");
    fflush(stdout);
    if (write(wr, "d", 1) != 1)
        rc = 1;
    return rc;
}

int main(void)
{
    int a[2], b[2];
    if (pipe(a) || pipe(b))
        return 2;
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0)
        return 2;
    if (pid == 0) {
        int trc = target(a[0], b[1]);
        fflush(stdout);
        _exit(trc);
    }
    int rc = initiator(b[0], a[1]);
    int st = 0;
    waitpid(pid, &st, 0);
    return rc || !WIFEXITED(st) || WEXITSTATUS(st) ? 1 : 0;
}
