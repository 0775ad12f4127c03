/* Device memory through the real verbs API (verbs_shim/dm.c, sim/nic/dm.c):
 *  - API: ibv_alloc_dm within and past nic.dm_size (ENOMEM), length 0 and
 *    unknown comp_mask (EINVAL), ibv_reg_dm_mr without ZERO_BASED or out of
 *    bounds (EINVAL), ibv_memcpy_to/from_dm round trip and out-of-range
 *    (EFAULT), ibv_free_dm while an MR uses it (EBUSY), the space coming
 *    back after a free;
 *  - RDMA WRITE, READ and FETCH_AND_ADD on a device-memory MR of the peer:
 *    data correct, and no payload crosses the server's PCIe link (the
 *    server's payload_wr / payload_rd / atomic TLP counters do not move,
 *    its NIC counts device-memory accesses instead);
 *  - contention: 64 FETCH_AND_ADDs on one 8-byte counter, 16 outstanding,
 *    are several times faster when the counter is in device memory than in
 *    host memory (each host-memory one is a PCIe read-modify-write). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fixture.h"
#include "test.h"

enum { DM_BYTES = 4096, N_FAA = 64 };

struct dm_info {
    uint32_t rkey;
    uint32_t pad;
};

struct state {
    struct fx *fx;
    struct fx_rc client, server;
    sim_time_t faa_host_ps, faa_dm_ps;
};

static void test_api(struct fx_rc *rc)
{
    struct ibv_context *ctx = rc->pd->context;
    struct ibv_device_attr_ex dx;
    CHECK(ibv_query_device_ex(ctx, NULL, &dx) == 0);
    CHECK_EQ_U64(dx.max_dm_size, 128 * 1024); /* nic.dm_size */
    CHECK(dx.orig_attr.max_qp > 0);
    struct ibv_alloc_dm_attr a = {.length = 0};
    errno = 0;
    CHECK(ibv_alloc_dm(ctx, &a) == NULL && errno == EINVAL);
    a.length = 64;
    a.comp_mask = 1u << 7;
    errno = 0;
    CHECK(ibv_alloc_dm(ctx, &a) == NULL && errno == EINVAL);
    a.comp_mask = 0;
    /* nic.dm_size is 128 KiB by default: 128 KiB + 1 does not fit */
    a.length = 128 * 1024 + 1;
    errno = 0;
    CHECK(ibv_alloc_dm(ctx, &a) == NULL && errno == ENOMEM);
    a.length = 96 * 1024;
    struct ibv_dm *big = ibv_alloc_dm(ctx, &a);
    CHECK(big != NULL);
    a.length = 64 * 1024; /* 96 + 64 > 128: no room left */
    errno = 0;
    CHECK(ibv_alloc_dm(ctx, &a) == NULL && errno == ENOMEM);
    a.length = 32 * 1024; /* exactly what is left */
    struct ibv_dm *rest = ibv_alloc_dm(ctx, &a);
    CHECK(rest != NULL);
    if (!big || !rest)
        return;

    /* memcpy round trip and bounds */
    uint8_t out[256], in[256];
    for (unsigned i = 0; i < sizeof(out); i++)
        out[i] = (uint8_t)(i * 7 + 3);
    CHECK(ibv_memcpy_to_dm(big, 1000, out, sizeof(out)) == 0);
    memset(in, 0, sizeof(in));
    CHECK(ibv_memcpy_from_dm(in, big, 1000, sizeof(in)) == 0);
    CHECK(memcmp(in, out, sizeof(in)) == 0);
    CHECK(ibv_memcpy_to_dm(big, 96 * 1024 - 8, out, 16) == EFAULT);
    CHECK(ibv_memcpy_from_dm(in, big, 96 * 1024, 1) == EFAULT);

    /* registration */
    int acc = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
    errno = 0;
    CHECK(ibv_reg_dm_mr(rc->pd, big, 0, 4096, (unsigned)acc) == NULL && errno == EINVAL);
    errno = 0;
    CHECK(ibv_reg_dm_mr(rc->pd, big, 96 * 1024 - 100, 4096,
                        (unsigned)acc | IBV_ACCESS_ZERO_BASED) == NULL &&
          errno == EINVAL);
    struct ibv_mr *mr = ibv_reg_dm_mr(rc->pd, big, 0, 4096, (unsigned)acc | IBV_ACCESS_ZERO_BASED);
    CHECK(mr != NULL);
    CHECK(ibv_free_dm(big) == EBUSY);
    CHECK(ibv_dereg_mr(mr) == 0);
    CHECK(ibv_free_dm(big) == 0);
    /* the space is back */
    a.length = 96 * 1024;
    big = ibv_alloc_dm(ctx, &a);
    CHECK(big != NULL);
    if (big)
        CHECK(ibv_free_dm(big) == 0);
    CHECK(ibv_free_dm(rest) == 0);
}

static uint64_t pcie_kind(struct fx *fx, unsigned node, enum pcie_kind k)
{
    return pcie_link_counters(fx->pcie[node])->kind_tlps[k];
}

/* N_FAA fetch-and-adds of 1 on remote (addr, rkey), 16 outstanding, posted
 * as lists of 8 (so the client's CPU is not what limits the rate); the
 * returned originals must be 0 .. N_FAA-1 in some order (each add seen). */
static sim_time_t faa_burst(struct state *s, uint64_t addr, uint32_t rkey)
{
    struct fx_rc *rc = &s->client;
    sim_time_t t0 = sim_now(s->fx->sim);
    unsigned posted = 0, done = 0;
    bool seen[N_FAA] = {false};
    while (done < N_FAA) {
        while (posted < N_FAA && posted - done <= 8) {
            struct ibv_sge sge[8];
            struct ibv_send_wr wr[8], *bad;
            for (unsigned i = 0; i < 8; i++) {
                unsigned k = posted + i;
                sge[i] = (struct ibv_sge){
                    .addr = (uintptr_t)(rc->buf + 8 * k), .length = 8, .lkey = rc->mr->lkey};
                wr[i] = (struct ibv_send_wr){.wr_id = k,
                                             .next = i < 7 ? &wr[i + 1] : NULL,
                                             .sg_list = &sge[i],
                                             .num_sge = 1,
                                             .opcode = IBV_WR_ATOMIC_FETCH_AND_ADD,
                                             .send_flags = IBV_SEND_SIGNALED};
                wr[i].wr.atomic.remote_addr = addr;
                wr[i].wr.atomic.rkey = rkey;
                wr[i].wr.atomic.compare_add = 1;
            }
            CHECK(ibv_post_send(rc->qp, &wr[0], &bad) == 0);
            posted += 8;
        }
        struct ibv_wc wc[16];
        int n;
        while ((n = ibv_poll_cq(rc->scq, 16, wc)) == 0)
            ;
        for (int i = 0; i < n; i++) {
            CHECK_EQ_U64(wc[i].status, IBV_WC_SUCCESS);
            uint64_t orig;
            memcpy(&orig, rc->buf + 8 * wc[i].wr_id, 8);
            if (orig < N_FAA)
                seen[orig] = true;
            done++;
        }
    }
    unsigned n_seen = 0;
    for (unsigned i = 0; i < N_FAA; i++)
        n_seen += seen[i];
    CHECK_EQ_U64(n_seen, N_FAA);
    return sim_now(s->fx->sim) - t0;
}

static void client(void *arg)
{
    struct state *s = arg;
    struct fx_rc_opts o;
    fx_rc_default_opts(&o);
    o.max_rd_atomic = 16;
    CHECK(fx_rc_open(s->fx, &s->client, &o) == 0);
    CHECK(fx_rc_connect(&s->client, "dm/client", "dm/server") == 0);
    struct fx_rc *rc = &s->client;
    test_api(rc);
    struct dm_info di;
    fx_get(s->fx, "dm/info", &di, sizeof(di));

    /* WRITE 4 KiB into the server's device memory, READ it back */
    for (unsigned i = 0; i < DM_BYTES; i++)
        rc->buf[i] = (uint8_t)(i ^ 0x5a);
    struct ibv_sge sge = {.addr = (uintptr_t)rc->buf, .length = DM_BYTES, .lkey = rc->mr->lkey};
    struct ibv_send_wr wr = {.wr_id = 1,
                             .sg_list = &sge,
                             .num_sge = 1,
                             .opcode = IBV_WR_RDMA_WRITE,
                             .send_flags = IBV_SEND_SIGNALED},
                       *bad;
    wr.wr.rdma.remote_addr = 0; /* zero-based */
    wr.wr.rdma.rkey = di.rkey;
    uint64_t wr0 = pcie_kind(s->fx, 1, PCIE_K_PAYLOAD_WR);
    uint64_t rd0 = pcie_kind(s->fx, 1, PCIE_K_PAYLOAD_RD);
    uint64_t at0 = pcie_kind(s->fx, 1, PCIE_K_ATOMIC);
    uint64_t dm0 = nic_get_counters(s->fx->nic[1])->dm_accesses;
    CHECK(ibv_post_send(rc->qp, &wr, &bad) == 0);
    struct ibv_wc wc;
    CHECK(fx_poll_one(rc->scq, &wc) == 1);
    CHECK_EQ_U64(wc.status, IBV_WC_SUCCESS);
    sge.addr = (uintptr_t)(rc->buf + DM_BYTES);
    wr.wr_id = 2;
    wr.opcode = IBV_WR_RDMA_READ;
    CHECK(ibv_post_send(rc->qp, &wr, &bad) == 0);
    CHECK(fx_poll_one(rc->scq, &wc) == 1);
    CHECK_EQ_U64(wc.status, IBV_WC_SUCCESS);
    CHECK(memcmp(rc->buf, rc->buf + DM_BYTES, DM_BYTES) == 0);
    fx_barrier(s->fx, "dm/written", "client", "server");

    /* contended atomics: host-memory counter, then device-memory counter */
    memset(rc->buf, 0xff, 8 * N_FAA);
    s->faa_host_ps = faa_burst(s, s->client.remote.addr, s->client.remote.rkey);
    memset(rc->buf, 0xff, 8 * N_FAA);
    s->faa_dm_ps = faa_burst(s, DM_BYTES, di.rkey);
    /* nothing of the server's device-memory traffic crossed its PCIe link */
    CHECK_EQ_U64(pcie_kind(s->fx, 1, PCIE_K_PAYLOAD_WR), wr0);
    CHECK_EQ_U64(pcie_kind(s->fx, 1, PCIE_K_PAYLOAD_RD), rd0);
    /* the host-memory ones only: MRd + CplD + MWr each */
    CHECK_EQ_U64(pcie_kind(s->fx, 1, PCIE_K_ATOMIC), at0 + 3 * N_FAA);
    CHECK(nic_get_counters(s->fx->nic[1])->dm_accesses >= dm0 + 2 + 2 * N_FAA);
    fx_barrier(s->fx, "dm/done", "client", "server");
    fx_rc_close(rc);
}

static void server(void *arg)
{
    struct state *s = arg;
    struct fx_rc_opts o;
    fx_rc_default_opts(&o);
    o.max_rd_atomic = 16;
    CHECK(fx_rc_open(s->fx, &s->server, &o) == 0);
    CHECK(fx_rc_connect(&s->server, "dm/server", "dm/client") == 0);
    struct fx_rc *rc = &s->server;
    memset(rc->buf, 0, 8); /* the host-memory counter at offset 0 */
    struct ibv_alloc_dm_attr a = {.length = DM_BYTES + 8};
    struct ibv_dm *dm = ibv_alloc_dm(rc->pd->context, &a);
    CHECK(dm != NULL);
    if (!dm)
        abort(); /* the rest of the run depends on it */
    uint64_t zero = 0;
    CHECK(ibv_memcpy_to_dm(dm, DM_BYTES, &zero, 8) == 0);
    struct ibv_mr *mr =
        ibv_reg_dm_mr(rc->pd, dm, 0, DM_BYTES + 8,
                      IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                          IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_ZERO_BASED);
    CHECK(mr != NULL);
    struct dm_info di = {.rkey = mr ? mr->rkey : 0};
    fx_put(s->fx, "dm/info", &di, sizeof(di));
    fx_barrier(s->fx, "dm/written", "server", "client");
    uint8_t got[DM_BYTES];
    CHECK(ibv_memcpy_from_dm(got, dm, 0, DM_BYTES) == 0);
    unsigned bad = 0;
    for (unsigned i = 0; i < DM_BYTES; i++)
        bad += got[i] != (uint8_t)(i ^ 0x5a);
    CHECK_EQ_U64(bad, 0);
    fx_barrier(s->fx, "dm/done", "server", "client");
    uint64_t host_ctr, dm_ctr;
    memcpy(&host_ctr, rc->buf, 8);
    CHECK(ibv_memcpy_from_dm(&dm_ctr, dm, DM_BYTES, 8) == 0);
    CHECK_EQ_U64(host_ctr, N_FAA);
    CHECK_EQ_U64(dm_ctr, N_FAA);
    CHECK(ibv_dereg_mr(mr) == 0);
    CHECK(ibv_free_dm(dm) == 0);
    fx_rc_close(rc);
}

int main(void)
{
    struct state s;
    memset(&s, 0, sizeof(s));
    s.fx = fx_create(9, NULL);
    enum sim_run_result r = fx_run_pair(s.fx, "client", client, "server", server, &s);
    CHECK_EQ_U64(r, SIM_RUN_DONE);
    if (r != SIM_RUN_DONE)
        sim_deadlock_report(s.fx->sim, stderr);
    printf("%u FAA on one counter, 16 outstanding: host memory %.2f us, device memory %.2f us "
           "(%.1fx)\n",
           N_FAA, sim_ps_to_us(s.faa_host_ps), sim_ps_to_us(s.faa_dm_ps),
           s.faa_dm_ps ? (double)s.faa_host_ps / (double)s.faa_dm_ps : 0.0);
    /* one client with 16 in flight: device memory is limited by the
     * client's round trip, host memory by one PCIe read per FAA (the next
     * one starts once the previous result write is issued: PCIe ordering) */
    CHECK(s.faa_dm_ps > 0 && 10 * s.faa_host_ps >= 25 * s.faa_dm_ps);
    fx_destroy(s.fx);
    return test_summary();
}
