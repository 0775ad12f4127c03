/* A device-memory FETCH_AND_ADD posted right behind a WRITE on the same QP
 * (the shared ring's pattern, Taranov et al. Sec. 4.4 / 6.3: reserve with
 * FETCH_AND_ADD on a head counter in NIC device memory, WRITE the record,
 * reserve the next one ...).  Every sender posts, on ONE QP, pairs
 * WRITE (64 B into the receiver's host memory) + FETCH_AND_ADD (on one
 * 8-byte counter in the receiver's device memory), several pairs
 * outstanding, with one and with two senders on the same counter.
 * Asserts: every work request completes (the run does not deadlock), the
 * fetched originals of all senders together are exactly 0 .. total-1, the
 * counter ends at the total, and every WRITE's bytes are in place.
 *
 * Regression test for the report "a device-memory FETCH_AND_ADD posted
 * right behind a WRITE on the same QP never gets its response (2 shared-ring
 * senders with --dm deadlocked)".  Finding: the NIC was never at fault.
 * Reproduced at commit ac4c6bb (the shared rings' FETCH_AND_ADD moved back
 * onto the WRITE QP, 2 senders, --dm): the run "deadlocked" with every
 * work request of both senders completed and every CQE landed in host
 * memory (h1/h2: wqes 3, cqes_written 3, cqes_landed 3); both senders were
 * parked in host_relax().  The cause was the channel layer's lost wakeup:
 * chan_relax() called host_relax() after a CQ poll that had returned a
 * completion, so a CQE landing while that poll's CPU time was being
 * charged woke nobody.  With the counters in device memory the FETCH_AND_ADD
 * response comes back one PCIe round trip sooner (no PCIe read-modify-
 * write at the responder), which is what put it inside that window.  Fixed
 * by 488058b (chan_relax skips host_relax after any poll of the attempt;
 * applying only that change to ac4c6bb makes the run complete) and
 * independently hardened in the host model by 1c33118 (host_park).  So no
 * change in sim/nic; this test pins down that the NIC side - per-address
 * atomic serialisation (atomic.c), the ACK-after-placement rule (dma.c,
 * resp.c), the translation FIFO (xlate.c) - answers every device-memory
 * atomic queued behind WRITEs on one QP, with one or two QPs contending. */
#include <stdlib.h>
#include <string.h>

#include "fixture.h"
#include "test.h"

enum { MAX_SENDERS = 2, N_PAIRS = 48, WINDOW = 4, REC_BYTES = 64, DM_BYTES = 64 };

struct dm_info {
    uint32_t rkey;
    uint32_t pad;
};

struct state {
    struct fx *fx;
    unsigned n_senders;
    bool dm_write; /* the WRITEs go to device memory too (else host memory) */
    struct fx_rc server[MAX_SENDERS], client[MAX_SENDERS];
    bool seen[MAX_SENDERS * N_PAIRS];
    unsigned dup;
    unsigned completed[MAX_SENDERS];
    sim_time_t elapsed_ps[MAX_SENDERS];
    unsigned id_next;
};

struct sender_arg {
    struct state *s;
    unsigned id;
};

static void sender(void *arg)
{
    struct sender_arg *sa = arg;
    struct state *s = sa->s;
    struct fx_rc *rc = &s->client[sa->id];
    struct fx_rc_opts o;
    fx_rc_default_opts(&o);
    o.max_rd_atomic = 16;
    CHECK(fx_rc_open(s->fx, rc, &o) == 0);
    char me[32], peer[32];
    snprintf(me, sizeof(me), "dmo/c%u", sa->id);
    snprintf(peer, sizeof(peer), "dmo/s%u", sa->id);
    CHECK(fx_rc_connect(rc, me, peer) == 0);
    struct dm_info di;
    fx_get(s->fx, "dmo/info", &di, sizeof(di));

    /* local layout: [0, N_PAIRS * 8) FAA results, then the records */
    uint8_t *res = rc->buf, *rec = rc->buf + 8 * N_PAIRS;
    memset(res, 0xff, 8 * N_PAIRS);
    for (unsigned k = 0; k < N_PAIRS; k++)
        for (unsigned i = 0; i < REC_BYTES; i++)
            rec[k * REC_BYTES + i] = (uint8_t)(sa->id * 131 + k * 7 + i);
    sim_time_t t0 = sim_now(s->fx->sim);
    unsigned posted = 0, done_wr = 0, done_faa = 0;
    uint64_t next_id = 0; /* RC: send completions come in posting order */
    while (done_faa < N_PAIRS || done_wr < N_PAIRS) {
        while (posted < N_PAIRS && posted - done_faa < WINDOW) {
            unsigned k = posted;
            struct ibv_sge sw = {.addr = (uintptr_t)(rec + k * REC_BYTES),
                                 .length = REC_BYTES,
                                 .lkey = rc->mr->lkey};
            struct ibv_sge sf = {
                .addr = (uintptr_t)(res + 8 * k), .length = 8, .lkey = rc->mr->lkey};
            struct ibv_send_wr wr[2], *bad;
            memset(wr, 0, sizeof(wr));
            wr[0] = (struct ibv_send_wr){.wr_id = 2 * k,
                                         .next = &wr[1],
                                         .sg_list = &sw,
                                         .num_sge = 1,
                                         .opcode = IBV_WR_RDMA_WRITE,
                                         .send_flags = IBV_SEND_SIGNALED};
            if (s->dm_write) {
                /* the other sender's half of the device memory stays untouched */
                wr[0].wr.rdma.remote_addr = 8 + (uint64_t)sa->id * 8;
                sw.length = 8;
                wr[0].wr.rdma.rkey = di.rkey;
            } else {
                wr[0].wr.rdma.remote_addr =
                    rc->remote.addr + ((uint64_t)sa->id * N_PAIRS + k) * REC_BYTES;
                wr[0].wr.rdma.rkey = rc->remote.rkey;
            }
            wr[1] = (struct ibv_send_wr){.wr_id = 2 * k + 1,
                                         .sg_list = &sf,
                                         .num_sge = 1,
                                         .opcode = IBV_WR_ATOMIC_FETCH_AND_ADD,
                                         .send_flags = IBV_SEND_SIGNALED};
            wr[1].wr.atomic.remote_addr = 0; /* zero-based: the counter */
            wr[1].wr.atomic.rkey = di.rkey;
            wr[1].wr.atomic.compare_add = 1;
            CHECK(ibv_post_send(rc->qp, &wr[0], &bad) == 0);
            posted++;
        }
        struct ibv_wc wc[8];
        int n;
        while ((n = ibv_poll_cq(rc->scq, 8, wc)) == 0)
            ;
        CHECK(n > 0);
        if (n < 0)
            break;
        for (int i = 0; i < n; i++) {
            CHECK_EQ_U64(wc[i].status, IBV_WC_SUCCESS);
            CHECK_EQ_U64(wc[i].wr_id, next_id);
            next_id = wc[i].wr_id + 1;
            if (wc[i].wr_id & 1) {
                uint64_t orig;
                memcpy(&orig, res + 8 * (wc[i].wr_id / 2), 8);
                if (orig < (uint64_t)s->n_senders * N_PAIRS && !s->seen[orig])
                    s->seen[orig] = true;
                else
                    s->dup++;
                done_faa++;
            } else {
                done_wr++;
            }
        }
    }
    s->completed[sa->id] = done_faa;
    s->elapsed_ps[sa->id] = sim_now(s->fx->sim) - t0;
    fx_barrier(s->fx, me, "done", "srv");
    fx_rc_close(rc);
}

static void server(void *arg)
{
    struct state *s = arg;
    struct fx_rc_opts o;
    fx_rc_default_opts(&o);
    o.max_rd_atomic = 16;
    CHECK(fx_rc_open(s->fx, &s->server[0], &o) == 0);
    for (unsigned i = 1; i < s->n_senders; i++)
        CHECK(fx_rc_open_shared(&s->server[i], &s->server[0], NULL) == 0);
    struct ibv_alloc_dm_attr a = {.length = DM_BYTES};
    struct ibv_dm *dm = ibv_alloc_dm(s->server[0].pd->context, &a);
    CHECK(dm != NULL);
    if (!dm)
        abort();
    uint8_t zero[DM_BYTES] = {0};
    CHECK(ibv_memcpy_to_dm(dm, 0, zero, DM_BYTES) == 0);
    struct ibv_mr *mr =
        ibv_reg_dm_mr(s->server[0].pd, dm, 0, DM_BYTES,
                      IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                          IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_ZERO_BASED);
    CHECK(mr != NULL);
    if (!mr)
        abort();
    for (unsigned i = 0; i < s->n_senders; i++) {
        char me[32], peer[32];
        snprintf(me, sizeof(me), "dmo/s%u", i);
        snprintf(peer, sizeof(peer), "dmo/c%u", i);
        CHECK(fx_rc_connect(&s->server[i], me, peer) == 0);
    }
    struct dm_info di = {.rkey = mr->rkey};
    fx_put(s->fx, "dmo/info", &di, sizeof(di));
    for (unsigned i = 0; i < s->n_senders; i++) {
        char peer[32];
        snprintf(peer, sizeof(peer), "dmo/c%u", i);
        fx_barrier(s->fx, peer, "srv", "done");
    }
    uint64_t ctr = 0;
    CHECK(ibv_memcpy_from_dm(&ctr, dm, 0, 8) == 0);
    CHECK_EQ_U64(ctr, (uint64_t)s->n_senders * N_PAIRS);
    if (!s->dm_write) {
        unsigned bad = 0;
        for (unsigned id = 0; id < s->n_senders; id++)
            for (unsigned k = 0; k < N_PAIRS; k++)
                for (unsigned i = 0; i < REC_BYTES; i++)
                    bad += s->server[0].buf[(id * N_PAIRS + k) * REC_BYTES + i] !=
                           (uint8_t)(id * 131 + k * 7 + i);
        CHECK_EQ_U64(bad, 0);
    }
    CHECK(ibv_dereg_mr(mr) == 0);
    CHECK(ibv_free_dm(dm) == 0);
    for (unsigned i = s->n_senders; i-- > 1;)
        fx_rc_close(&s->server[i]);
    fx_rc_close(&s->server[0]);
}

static void run(unsigned n_senders, bool dm_write)
{
    struct state *s = calloc(1, sizeof(*s));
    if (!s)
        abort();
    struct sender_arg sa[MAX_SENDERS];
    s->fx = fx_create_n(21, 1 + n_senders, NULL);
    s->n_senders = n_senders;
    s->dm_write = dm_write;
    fx_spawn(s->fx, 0, "server", server, s);
    for (unsigned i = 0; i < n_senders; i++) {
        sa[i] = (struct sender_arg){s, i};
        fx_spawn(s->fx, 1 + i, "sender", sender, &sa[i]);
    }
    enum sim_run_result r = fx_run(s->fx);
    printf("%u sender(s), WRITE to %s memory + device-memory FAA on one QP: %s, ", n_senders,
           dm_write ? "device" : "host", r == SIM_RUN_DONE ? "done" : "NOT DONE");
    CHECK_EQ_U64(r, SIM_RUN_DONE);
    if (r != SIM_RUN_DONE)
        sim_deadlock_report(s->fx->sim, stderr);
    unsigned seen = 0;
    for (unsigned i = 0; i < n_senders * N_PAIRS; i++)
        seen += s->seen[i];
    printf("%u of %u FAA originals seen, %u duplicates\n", seen, n_senders * N_PAIRS, s->dup);
    CHECK_EQ_U64(seen, n_senders * N_PAIRS);
    CHECK_EQ_U64(s->dup, 0);
    for (unsigned i = 0; i < n_senders; i++) {
        CHECK_EQ_U64(s->completed[i], N_PAIRS);
        /* answered promptly, not after a retransmission timeout (4.096 us
         * * 2^14 = 67 ms): 48 pairs take tens of microseconds */
        printf("  sender %u: %.2f us\n", i, sim_ps_to_us(s->elapsed_ps[i]));
        CHECK(s->elapsed_ps[i] > 0 && s->elapsed_ps[i] < 1000 * SIM_US);
    }
    fx_destroy(s->fx);
    free(s);
}

int main(void)
{
    run(1, false);
    run(2, false);
    run(1, true);
    run(2, true);
    return test_summary();
}
