/* ibv_rereg_mr and the cost of memory registration (verbs_shim/mr.c,
 * sim/nic/mr.c; docs/nic.md "Memory registration"):
 *  - bad input gives IBV_REREG_MR_ERR_INPUT with errno EINVAL and leaves
 *    the MR as it was: unknown flags, CHANGE_TRANSLATION without an
 *    address or length, access bits without CHANGE_ACCESS, remote write
 *    without local write, a PD of no device;
 *  - CHANGE_TRANSLATION: the keys stay, mr->addr/length follow, the peer's
 *    RDMA WRITE with the same rkey lands in the new buffer and not the old
 *    one, and the NIC's cached translations of the MR are invalidated;
 *  - cost: registering 1 MiB costs over 4x what 64 KiB costs, and
 *    re-registering onto 1 MiB over 2x re-registering onto 64 KiB (which
 *    unpins the 1 MiB): per-page pinning and translation commands; and
 *    deregistering costs less than registering;
 *  - CHANGE_TRANSLATION onto memory on 2 MiB pages: the MR is placed anew
 *    as a fresh registration would be (its wire address at the start of a
 *    huge page plus the buffer's offset in its 4 KiB page);
 *  - CHANGE_PD: mr->pd follows; the new PD cannot be freed while the MR
 *    is in it (EBUSY);
 *  - CHANGE_ACCESS: without REMOTE_WRITE the peer's WRITE completes with
 *    IBV_WC_REM_ACCESS_ERR. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fixture.h"
#include "sim/host/mem.h"
#include "test.h"

enum { SMALL = 64 * 1024, BIG = 1024 * 1024, MSG = 4096 };

struct target {
    uint64_t addr;
    uint32_t rkey;
    uint32_t pad;
};

struct state {
    struct fx *fx;
    struct fx_rc client, server;
};

static sim_time_t now(struct state *s)
{
    return sim_now(s->fx->sim);
}

static void bad_input(struct ibv_mr *mr, uint8_t *other)
{
    void *addr = mr->addr;
    size_t len = mr->length;
    uint32_t lkey = mr->lkey, rkey = mr->rkey;
    int acc = IBV_ACCESS_LOCAL_WRITE;
    errno = 0;
    CHECK(ibv_rereg_mr(mr, 1 << 7, NULL, NULL, 0, 0) == IBV_REREG_MR_ERR_INPUT && errno == EINVAL);
    errno = 0;
    CHECK(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL, NULL, SMALL, 0) ==
              IBV_REREG_MR_ERR_INPUT &&
          errno == EINVAL);
    errno = 0;
    CHECK(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL, other, 0, 0) ==
              IBV_REREG_MR_ERR_INPUT &&
          errno == EINVAL);
    errno = 0;
    CHECK(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL, other, SMALL, acc) ==
              IBV_REREG_MR_ERR_INPUT &&
          errno == EINVAL);
    errno = 0;
    CHECK(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0, IBV_ACCESS_REMOTE_WRITE) ==
              IBV_REREG_MR_ERR_INPUT &&
          errno == EINVAL);
    errno = 0;
    CHECK(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_PD, NULL, NULL, 0, 0) == IBV_REREG_MR_ERR_INPUT &&
          errno == EINVAL);
    CHECK(mr->addr == addr && mr->length == len && mr->lkey == lkey && mr->rkey == rkey);
}

static void server(void *arg)
{
    struct state *s = arg;
    CHECK(fx_rc_open(s->fx, &s->server, NULL) == 0);
    CHECK(fx_rc_connect(&s->server, "rr/server", "rr/client") == 0);
    struct fx_rc *rc = &s->server;
    struct nic *nic = s->fx->nic[1];
    uint8_t *a = aligned_alloc(4096, BIG), *b = aligned_alloc(4096, BIG),
            *c = aligned_alloc(4096, BIG);
    if (!a || !b || !c)
        abort();
    memset(a, 0, BIG);
    memset(b, 0, BIG);
    memset(c, 0, BIG);
    int acc = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;

    /* registration cost: per page */
    sim_time_t t0 = now(s);
    struct ibv_mr *m = ibv_reg_mr(rc->pd, c, SMALL, acc);
    sim_time_t t1 = now(s);
    CHECK(m && ibv_dereg_mr(m) == 0);
    sim_time_t t2 = now(s);
    m = ibv_reg_mr(rc->pd, c, BIG, acc);
    sim_time_t t3 = now(s);
    CHECK(m && ibv_dereg_mr(m) == 0);
    sim_time_t t4 = now(s);
    sim_time_t reg_small = t1 - t0, reg_big = t3 - t2, dereg_big = t4 - t3;
    printf("reg 64 KiB %.2f us, 1 MiB %.2f us; dereg 1 MiB %.2f us\n", sim_ps_to_us(reg_small),
           sim_ps_to_us(reg_big), sim_ps_to_us(dereg_big));
    CHECK(reg_big > 4 * reg_small);
    CHECK(dereg_big > 0 && dereg_big < reg_big);

    struct ibv_mr *mr = ibv_reg_mr(rc->pd, a, SMALL, acc);
    CHECK(mr != NULL);
    if (!mr)
        abort();
    bad_input(mr, b);
    uint32_t lkey = mr->lkey, rkey = mr->rkey;

    /* re-registration cost: per page too */
    t0 = now(s);
    CHECK(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL, c, BIG, 0) == 0);
    t1 = now(s);
    CHECK(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL, b, SMALL, 0) == 0);
    t2 = now(s);
    printf("rereg to 1 MiB %.2f us, to 64 KiB %.2f us\n", sim_ps_to_us(t1 - t0),
           sim_ps_to_us(t2 - t1));
    CHECK(t1 - t0 > 2 * (t2 - t1));
    CHECK(mr->addr == b && mr->length == SMALL && mr->lkey == lkey && mr->rkey == rkey);

    /* the peer writes through the same rkey: it lands in b */
    struct target tg = {.addr = (uintptr_t)b, .rkey = rkey};
    fx_put(s->fx, "rr/target", &tg, sizeof(tg));
    fx_barrier(s->fx, "rr/written", "server", "client");
    unsigned in_b = 0, in_a = 0;
    for (unsigned i = 0; i < MSG; i++) {
        in_b += b[i] == (uint8_t)(i * 13 + 1);
        in_a += a[i] != 0;
    }
    CHECK_EQ_U64(in_b, MSG);
    CHECK_EQ_U64(in_a, 0);
    /* the NIC had b's translation cached from that WRITE: a rereg drops it */
    uint64_t inv0 = nic_get_counters(nic)->xlate_invalidated;
    CHECK(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL, b, SMALL, 0) == 0);
    CHECK(nic_get_counters(nic)->xlate_invalidated > inv0);

    /* CHANGE_TRANSLATION onto a huge-page buffer: new pages of another
     * size, so a new wire address (xlate.c counts the MR's MTT lines on
     * it); the old placement would keep b's 4 KiB-page offset */
    enum { HUGE = 2 * 1024 * 1024 };
    uint8_t *h = aligned_alloc(HUGE, 2 * HUGE);
    if (!h)
        abort();
    CHECK(host_mem_add_range(host_mem_get(&s->fx->hosts[1]), (uintptr_t)h, 2 * HUGE, 0, true) == 0);
    CHECK(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL, h + 100, SMALL, 0) == 0);
    uint64_t wire = 0;
    CHECK(nic_wire_va(nic, mr->rkey, (uintptr_t)(h + 100), &wire));
    CHECK_EQ_U64(wire & (HUGE - 1), 100);
    CHECK(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL, b, SMALL, 0) == 0);
    CHECK(nic_wire_va(nic, mr->rkey, (uintptr_t)b, &wire));
    CHECK_EQ_U64(wire & 4095, (uintptr_t)b & 4095);
    host_mem_remove_range(host_mem_get(&s->fx->hosts[1]), (uintptr_t)h);
    free(h);

    /* CHANGE_PD */
    struct ibv_pd *pd2 = ibv_alloc_pd(rc->ctx);
    CHECK(pd2 != NULL);
    CHECK(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_PD, pd2, NULL, 0, 0) == 0);
    CHECK(mr->pd == pd2);
    CHECK(ibv_dealloc_pd(pd2) == EBUSY);
    CHECK(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_PD, rc->pd, NULL, 0, 0) == 0);
    CHECK(mr->pd == rc->pd);
    CHECK(ibv_dealloc_pd(pd2) == 0);

    /* CHANGE_ACCESS: no remote write any more */
    CHECK(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
                       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ) == 0);
    fx_barrier(s->fx, "rr/ro", "server", "client");
    fx_barrier(s->fx, "rr/done", "server", "client");
    CHECK(b[0] == 1); /* the refused WRITE left it alone */
    CHECK(ibv_dereg_mr(mr) == 0);
    fx_rc_close(rc);
    free(a);
    free(b);
    free(c);
}

static void client(void *arg)
{
    struct state *s = arg;
    CHECK(fx_rc_open(s->fx, &s->client, NULL) == 0);
    CHECK(fx_rc_connect(&s->client, "rr/client", "rr/server") == 0);
    struct fx_rc *rc = &s->client;
    struct target tg;
    fx_get(s->fx, "rr/target", &tg, sizeof(tg));
    for (unsigned i = 0; i < MSG; i++)
        rc->buf[i] = (uint8_t)(i * 13 + 1);
    struct ibv_sge sge = {.addr = (uintptr_t)rc->buf, .length = MSG, .lkey = rc->mr->lkey};
    struct ibv_send_wr wr = {.wr_id = 1,
                             .sg_list = &sge,
                             .num_sge = 1,
                             .opcode = IBV_WR_RDMA_WRITE,
                             .send_flags = IBV_SEND_SIGNALED},
                       *bad;
    wr.wr.rdma.remote_addr = tg.addr;
    wr.wr.rdma.rkey = tg.rkey;
    CHECK(ibv_post_send(rc->qp, &wr, &bad) == 0);
    struct ibv_wc wc;
    CHECK(fx_poll_one(rc->scq, &wc) == 1);
    CHECK_EQ_U64(wc.status, IBV_WC_SUCCESS);
    fx_barrier(s->fx, "rr/written", "client", "server");
    fx_barrier(s->fx, "rr/ro", "client", "server");
    memset(rc->buf, 0xee, MSG);
    CHECK(ibv_post_send(rc->qp, &wr, &bad) == 0);
    CHECK(fx_poll_one(rc->scq, &wc) == 1);
    CHECK_EQ_U64(wc.status, IBV_WC_REM_ACCESS_ERR);
    fx_barrier(s->fx, "rr/done", "client", "server");
    fx_rc_close(rc);
}

int main(void)
{
    struct state s = {0};
    s.fx = fx_create(1, NULL);
    CHECK(fx_run_pair(s.fx, "client", client, "server", server, &s) == SIM_RUN_DONE);
    fx_destroy(s.fx);
    return test_summary();
}
