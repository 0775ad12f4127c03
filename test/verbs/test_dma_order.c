/* DMA ordering at the verbs level (sim/nic/dma.c, docs/nic.md "DMA
 * ordering").  The receiver's memory is watched at every instant a DMA
 * write or a CQE lands there (fx_watch), so what is checked is what a
 * polling CPU could see:
 *
 *  - relaxed (nic.dma_ordering = relaxed): the last byte of a 16 KiB WRITE
 *    - the flag a "write slot, inlined bell" receiver polls - becomes
 *    visible while earlier bytes of the message are still missing;
 *  - strict (the default): over 256 messages that never happens;
 *  - in both modes every receive CQE (WRITE_WITH_IMM) is visible only
 *    after every byte of its message, and a READ's CQE after its data;
 *  - per MR: with a strict NIC, an MR registered with
 *    IBV_ACCESS_RELAXED_ORDERING gets reordered bytes, another MR written
 *    by the same stream does not;
 *  - detached bell (data WRITE, then an 8-byte bell WRITE) into a relaxed
 *    data MR: a bell through a plain MR is never visible before its data
 *    (strict writes do not pass relaxed ones), one through the relaxed MR
 *    is;
 *  - reads do not pass relaxed writes: a READ or FETCH_ADD right behind a
 *    relaxed WRITE of the same bytes sees the written values;
 *  - the same seed gives the same run, another seed another one. */
#include <arpa/inet.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixture.h"
#include "test.h"

enum {
    MSG = 16384,             /* four 4 KiB packets, 64 MPS chunks */
    REGION = 4u << 20,       /* bytes of one region of the receiver's buffer */
    MAX_MSGS = REGION / MSG, /* messages per region, each in its own slot */
    OUTSTANDING = 48,        /* send WRs in flight */
};

static uint8_t pat(uint32_t seq, uint32_t i)
{
    return (uint8_t)((seq * 131u + i * 7u + (i >> 8)) % 255u + 1u); /* never 0 */
}

static void fill(uint8_t *p, uint32_t seq, uint32_t len)
{
    for (uint32_t i = 0; i < len; i++)
        p[i] = pat(seq, i);
}

static uint32_t missing(const uint8_t *p, uint32_t seq, uint32_t len)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < len; i++)
        n += p[i] != pat(seq, i);
    return n;
}

/* Pattern of message k of region r. */
static uint32_t seq_of(unsigned r, uint32_t k)
{
    return r * 100000u + k + 1;
}

/* ---------------------------------------------------------------- the observer */

struct region_obs {
    uint8_t *base;
    uint32_t n;
    uint32_t next; /* first message whose last byte has not been seen */
    bool seen[MAX_MSGS];
    uint32_t flags_seen, flag_early, max_missing;
};

struct obs {
    struct sim *sim;
    struct region_obs r[2];
    unsigned n_regions;
    /* CQE check: receive CQEs of WRITE_WITH_IMM (imm = region << 16 | k) or
     * send CQEs of READs (wr_id = k, data at rbase + k * MSG) */
    struct nic_cq *cq;
    bool cq_is_read;
    uint8_t *rbase;
    uint64_t cq_seen;
    uint32_t cqe_checked, cqe_early;
    uint64_t digest;
};

static void mix(uint64_t *h, uint64_t v)
{
    *h = (*h ^ v) * 0x100000001b3ull;
}

static void observe(void *arg)
{
    struct obs *o = arg;
    for (unsigned r = 0; r < o->n_regions; r++) {
        struct region_obs *g = &o->r[r];
        for (uint32_t k = g->next; k < g->n && k < g->next + 8; k++) {
            const uint8_t *m = g->base + (size_t)k * MSG;
            if (g->seen[k] || m[MSG - 1] != pat(seq_of(r, k), MSG - 1))
                continue;
            g->seen[k] = true; /* the flag (last byte) just became visible */
            g->flags_seen++;
            uint32_t miss = missing(m, seq_of(r, k), MSG - 1);
            if (miss) {
                g->flag_early++;
                if (miss > g->max_missing)
                    g->max_missing = miss;
            }
        }
        while (g->next < g->n && g->seen[g->next])
            g->next++;
    }
    while (o->cq && o->cq_seen < o->cq->prod) {
        const struct ibv_wc *wc = &o->cq->ring[o->cq_seen % o->cq->depth];
        o->cq_seen++;
        if (wc->status != IBV_WC_SUCCESS)
            continue;
        const uint8_t *m;
        uint32_t seq;
        if (o->cq_is_read) {
            m = o->rbase + (size_t)wc->wr_id * MSG;
            seq = seq_of(0, (uint32_t)wc->wr_id);
        } else {
            uint32_t imm = ntohl(wc->imm_data);
            unsigned r = imm >> 16;
            m = o->r[r].base + (size_t)(imm & 0xffff) * MSG;
            seq = seq_of(r, imm & 0xffff);
        }
        o->cqe_checked++;
        if (missing(m, seq, MSG))
            o->cqe_early++; /* a CQE visible before all of its data */
    }
    mix(&o->digest, sim_now(o->sim));
    mix(&o->digest, o->r[0].flags_seen * 1000003ull + o->r[0].flag_early);
}

/* ---------------------------------------------------------------- WRITE stream */

struct run {
    struct fx *fx;
    struct fx_rc c, s;
    struct fx_watch w;
    struct obs o;
    uint32_t n;         /* messages per region */
    unsigned n_regions; /* 2: region 0 through a relaxed-ordering MR, region 1 not */
    bool ro_mr;
    struct ibv_mr *mr_ro;
    uint32_t ro_rkey;
    uint32_t send_in_order, recv_ok, data_ok;
};

static struct fx_rc_opts run_opts(void)
{
    struct fx_rc_opts o;
    fx_rc_default_opts(&o);
    o.buf_bytes = 2 * REGION + 4096;
    o.max_send_wr = 64;
    o.max_recv_wr = 2 * MAX_MSGS;
    o.cq_depth = 4 * MAX_MSGS;
    return o;
}

static void post_write_imm(struct fx_rc *rc, uint64_t id, size_t off, uint32_t rkey, uint32_t imm)
{
    struct ibv_sge sge = {.addr = (uintptr_t)(rc->buf + off), .length = MSG, .lkey = rc->mr->lkey};
    struct ibv_send_wr wr = {.wr_id = id,
                             .sg_list = &sge,
                             .num_sge = 1,
                             .opcode = IBV_WR_RDMA_WRITE_WITH_IMM,
                             .send_flags = IBV_SEND_SIGNALED,
                             .imm_data = htonl(imm)};
    wr.wr.rdma.remote_addr = rc->remote.addr + off;
    wr.wr.rdma.rkey = rkey;
    struct ibv_send_wr *bad = NULL;
    CHECK(ibv_post_send(rc->qp, &wr, &bad) == 0);
}

static void stream_client(void *arg)
{
    struct run *r = arg;
    struct fx_rc *rc = &r->c;
    struct fx_rc_opts o = run_opts();
    CHECK(fx_rc_open(r->fx, rc, &o) == 0);
    CHECK(fx_rc_connect(rc, "dma/c", "dma/s") == 0);
    uint32_t ro_rkey = 0;
    if (r->ro_mr)
        fx_get(r->fx, "dma/ro_rkey", &ro_rkey, sizeof(ro_rkey));
    for (unsigned g = 0; g < r->n_regions; g++)
        for (uint32_t k = 0; k < r->n; k++)
            fill(rc->buf + (size_t)g * REGION + (size_t)k * MSG, seq_of(g, k), MSG);
    fx_barrier(r->fx, "dma/ready", "c", "s");
    uint64_t posted = 0, done = 0, total = (uint64_t)r->n * r->n_regions;
    struct ibv_wc wc;
    while (done < total) {
        if (posted < total && posted - done < OUTSTANDING) {
            unsigned g = (unsigned)(posted % r->n_regions);
            uint32_t k = (uint32_t)(posted / r->n_regions);
            uint32_t rkey = (r->ro_mr && g == 0) ? ro_rkey : rc->remote.rkey;
            post_write_imm(rc, posted, (size_t)g * REGION + (size_t)k * MSG, rkey, g << 16 | k);
            posted++;
            continue;
        }
        CHECK(fx_poll_one(rc->scq, &wc) == 1);
        r->send_in_order += wc.status == IBV_WC_SUCCESS && wc.wr_id == done;
        done++;
    }
    fx_barrier(r->fx, "dma/end", "c", "s");
}

static void stream_server(void *arg)
{
    struct run *r = arg;
    struct fx_rc *rc = &r->s;
    struct fx_rc_opts o = run_opts();
    CHECK(fx_rc_open(r->fx, rc, &o) == 0);
    if (r->ro_mr) {
        r->mr_ro = ibv_reg_mr(rc->pd, rc->buf, REGION,
                              IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                                  IBV_ACCESS_RELAXED_ORDERING);
        CHECK(r->mr_ro != NULL);
        uint32_t rkey = r->mr_ro ? r->mr_ro->rkey : 0;
        fx_put(r->fx, "dma/ro_rkey", &rkey, sizeof(rkey));
    }
    CHECK(fx_rc_connect(rc, "dma/s", "dma/c") == 0);
    uint32_t total = r->n * r->n_regions;
    for (uint32_t i = 0; i < total; i++)
        CHECK(fx_post_recv(rc, i, 2 * REGION, 64) == 0);
    r->o.sim = r->fx->sim;
    r->o.n_regions = r->n_regions;
    for (unsigned g = 0; g < r->n_regions; g++) {
        r->o.r[g].base = rc->buf + (size_t)g * REGION;
        r->o.r[g].n = r->n;
    }
    r->o.cq = fx_nic_cq(rc->rcq);
    fx_watch_start(r->fx, &r->w, 1, observe, &r->o);
    fx_barrier(r->fx, "dma/ready", "s", "c");
    for (uint32_t i = 0; i < total; i++) {
        struct ibv_wc wc;
        CHECK(fx_poll_one(rc->rcq, &wc) == 1);
        r->recv_ok += wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM &&
                      wc.byte_len == MSG && wc.wr_id == i;
    }
    fx_watch_stop(&r->w);
    for (unsigned g = 0; g < r->n_regions; g++)
        for (uint32_t k = 0; k < r->n; k++)
            r->data_ok +=
                missing(rc->buf + (size_t)g * REGION + (size_t)k * MSG, seq_of(g, k), MSG) == 0;
    fx_barrier(r->fx, "dma/end", "s", "c");
    if (r->mr_ro)
        CHECK(ibv_dereg_mr(r->mr_ro) == 0);
}

/* Run the WRITE_WITH_IMM stream; the caller checks and destroys r->fx. */
static void run_stream(struct run *r, uint64_t seed, uint32_t dma_ordering, uint32_t n,
                       unsigned n_regions, bool ro_mr)
{
    memset(r, 0, sizeof(*r));
    struct nic_params np;
    nic_params_default(&np);
    np.dma_ordering = dma_ordering;
    r->fx = fx_create(seed, &np);
    r->n = n;
    r->n_regions = n_regions;
    r->ro_mr = ro_mr;
    enum sim_run_result rr = fx_run_pair(r->fx, "c", stream_client, "s", stream_server, r);
    CHECK_EQ_U64(rr, SIM_RUN_DONE);
    uint32_t total = n * n_regions;
    CHECK_EQ_U64(r->send_in_order, total);
    CHECK_EQ_U64(r->recv_ok, total);
    CHECK_EQ_U64(r->data_ok, total);
    CHECK(r->w.done);
    for (unsigned g = 0; g < n_regions; g++)
        CHECK_EQ_U64(r->o.r[g].flags_seen, n); /* every flag was caught landing */
    /* whatever the mode: no CQE before its data, and every CQE checked */
    CHECK_EQ_U64(r->o.cqe_checked, total);
    CHECK_EQ_U64(r->o.cqe_early, 0);
}

static void test_relaxed(void)
{
    struct run r;
    run_stream(&r, 1, NIC_DMA_RELAXED, 128, 1, false);
    const struct nic_counters *c = nic_get_counters(r.fx->nic[1]);
    printf("relaxed: %u of 128 last-byte flags visible before earlier bytes (up to %u bytes "
           "missing); %" PRIu64 " of %" PRIu64 " chunks overtaken; %" PRIu64
           " strict writes held\n",
           r.o.r[0].flag_early, r.o.r[0].max_missing, c->dma_ro_overtaken, c->dma_ro_chunks,
           c->dma_strict_waits);
    CHECK(r.o.r[0].flag_early > 0); /* the inlined bell rang before the data were there */
    CHECK_EQ_U64(c->dma_ro_chunks, 128 * (MSG / 256)); /* one chunk per 256 B MPS */
    CHECK(c->dma_ro_overtaken > 0);
    CHECK(c->dma_strict_waits > 0); /* some CQEs had to wait for relaxed data */
    fx_destroy(r.fx);
}

static void test_strict(void)
{
    struct run r;
    run_stream(&r, 2, NIC_DMA_STRICT, MAX_MSGS, 1, false);
    const struct nic_counters *c = nic_get_counters(r.fx->nic[1]);
    printf("strict: %u of %u last-byte flags visible before earlier bytes\n", r.o.r[0].flag_early,
           MAX_MSGS);
    CHECK_EQ_U64(r.o.r[0].flag_early, 0);
    CHECK_EQ_U64(c->dma_ro_chunks, 0);
    CHECK_EQ_U64(c->dma_ro_overtaken, 0);
    CHECK_EQ_U64(c->dma_strict_waits, 0);
    fx_destroy(r.fx);
}

/* A strict NIC; region 0 is written through an MR with
 * IBV_ACCESS_RELAXED_ORDERING, region 1 through a plain one, messages
 * alternating between them on one QP. */
static void test_per_mr(void)
{
    struct run r;
    run_stream(&r, 3, NIC_DMA_STRICT, 128, 2, true);
    const struct nic_counters *c = nic_get_counters(r.fx->nic[1]);
    printf("per MR: relaxed-ordering MR %u of 128 flags early, plain MR %u of 128\n",
           r.o.r[0].flag_early, r.o.r[1].flag_early);
    CHECK(r.o.r[0].flag_early > 0);
    CHECK_EQ_U64(r.o.r[1].flag_early, 0);
    CHECK_EQ_U64(c->dma_ro_chunks, 128 * (MSG / 256)); /* region 0's writes only */
    fx_destroy(r.fx);
}

/* Same seed, same run (observation instants included); another seed, another. */
static void test_determinism(void)
{
    struct run a, b, d;
    run_stream(&a, 7, NIC_DMA_RELAXED, 64, 1, false);
    run_stream(&b, 7, NIC_DMA_RELAXED, 64, 1, false);
    run_stream(&d, 8, NIC_DMA_RELAXED, 64, 1, false);
    CHECK(a.o.digest == b.o.digest);
    CHECK_EQ_U64(a.o.r[0].flag_early, b.o.r[0].flag_early);
    CHECK_EQ_U64(nic_get_counters(a.fx->nic[1])->dma_ro_overtaken,
                 nic_get_counters(b.fx->nic[1])->dma_ro_overtaken);
    CHECK_EQ_U64(sim_now(a.fx->sim), sim_now(b.fx->sim));
    CHECK(a.o.digest != d.o.digest);
    fx_destroy(a.fx);
    fx_destroy(b.fx);
    fx_destroy(d.fx);
}

/* ---------------------------------------------------------------- detached bell */

/* The "flag" protocol (write slot, detached bell): data WRITE k (16 KiB,
 * through a relaxed-ordering MR), then an 8-byte WRITE of k + 1 to the bell
 * of slot k.  A bell written through a plain MR is a strict write: it
 * never passes the relaxed data before it, so the receiver never sees a
 * bell before its data.  Through the relaxed MR it can pass them. */
enum { N_BELL = 128, OFF_BELL = REGION + 4096 };

struct bell {
    struct fx *fx;
    struct fx_rc c, s;
    struct fx_watch w;
    bool bell_relaxed;
    struct ibv_mr *mr_ro;
    uint8_t *base;
    bool seen[N_BELL];
    uint32_t bells_seen, bell_early;
};

static void bell_observe(void *arg)
{
    struct bell *b = arg;
    for (uint32_t k = 0; k < N_BELL; k++) {
        uint64_t v;
        memcpy(&v, b->base + OFF_BELL + 8 * k, 8);
        if (b->seen[k] || v != k + 1)
            continue;
        b->seen[k] = true;
        b->bells_seen++;
        b->bell_early += missing(b->base + (size_t)k * MSG, seq_of(0, k), MSG) != 0;
    }
}

static void bell_client(void *arg)
{
    struct bell *b = arg;
    struct fx_rc *rc = &b->c;
    struct fx_rc_opts o = run_opts();
    CHECK(fx_rc_open(b->fx, rc, &o) == 0);
    CHECK(fx_rc_connect(rc, "bell/c", "bell/s") == 0);
    uint32_t ro_rkey = 0;
    fx_get(b->fx, "bell/ro_rkey", &ro_rkey, sizeof(ro_rkey));
    for (uint32_t k = 0; k < N_BELL; k++) {
        fill(rc->buf + (size_t)k * MSG, seq_of(0, k), MSG);
        uint64_t v = k + 1;
        memcpy(rc->buf + OFF_BELL + 8 * k, &v, 8);
    }
    fx_barrier(b->fx, "bell/ready", "c", "s");
    struct ibv_wc wc;
    for (uint32_t k = 0; k < N_BELL; k++) {
        struct ibv_sge sd = {
            .addr = (uintptr_t)(rc->buf + (size_t)k * MSG), .length = MSG, .lkey = rc->mr->lkey};
        struct ibv_sge sb = {
            .addr = (uintptr_t)(rc->buf + OFF_BELL + 8 * k), .length = 8, .lkey = rc->mr->lkey};
        struct ibv_send_wr bell = {.wr_id = k,
                                   .sg_list = &sb,
                                   .num_sge = 1,
                                   .opcode = IBV_WR_RDMA_WRITE,
                                   .send_flags = IBV_SEND_SIGNALED};
        bell.wr.rdma.remote_addr = rc->remote.addr + OFF_BELL + 8 * k;
        bell.wr.rdma.rkey = b->bell_relaxed ? ro_rkey : rc->remote.rkey;
        struct ibv_send_wr data = {
            .wr_id = 1000 + k, .sg_list = &sd, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE};
        data.wr.rdma.remote_addr = rc->remote.addr + (size_t)k * MSG;
        data.wr.rdma.rkey = ro_rkey;
        data.next = &bell;
        struct ibv_send_wr *bad = NULL;
        CHECK(ibv_post_send(rc->qp, &data, &bad) == 0);
        CHECK(fx_poll_one(rc->scq, &wc) == 1 && wc.wr_id == k && wc.status == IBV_WC_SUCCESS);
    }
    fx_barrier(b->fx, "bell/end", "c", "s");
}

static void bell_server(void *arg)
{
    struct bell *b = arg;
    struct fx_rc *rc = &b->s;
    struct fx_rc_opts o = run_opts();
    CHECK(fx_rc_open(b->fx, rc, &o) == 0);
    /* the relaxed MR covers the data slots and the bells */
    b->mr_ro =
        ibv_reg_mr(rc->pd, rc->buf, 2 * REGION,
                   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_RELAXED_ORDERING);
    CHECK(b->mr_ro != NULL);
    uint32_t rkey = b->mr_ro ? b->mr_ro->rkey : 0;
    fx_put(b->fx, "bell/ro_rkey", &rkey, sizeof(rkey));
    CHECK(fx_rc_connect(rc, "bell/s", "bell/c") == 0);
    b->base = rc->buf;
    fx_watch_start(b->fx, &b->w, 1, bell_observe, b);
    fx_barrier(b->fx, "bell/ready", "s", "c");
    fx_barrier(b->fx, "bell/end", "s", "c");
    /* the last bell's ACK may reach the client before the bell is visible */
    for (unsigned i = 0; i < 100 && b->bells_seen < N_BELL; i++)
        sim_proc_sleep(SIM_US);
    fx_watch_stop(&b->w);
    if (b->mr_ro)
        CHECK(ibv_dereg_mr(b->mr_ro) == 0);
}

static uint32_t run_bell(bool bell_relaxed)
{
    struct bell b;
    memset(&b, 0, sizeof(b));
    b.fx = fx_create(5, NULL); /* strict NIC: only the MR decides */
    b.bell_relaxed = bell_relaxed;
    CHECK_EQ_U64(fx_run_pair(b.fx, "c", bell_client, "s", bell_server, &b), SIM_RUN_DONE);
    CHECK_EQ_U64(b.bells_seen, N_BELL);
    fx_destroy(b.fx);
    return b.bell_early;
}

static void test_bell(void)
{
    uint32_t strict_bell = run_bell(false), relaxed_bell = run_bell(true);
    printf("detached bell after relaxed data: bell through a plain MR %u of %u early, through "
           "the relaxed MR %u of %u\n",
           strict_bell, N_BELL, relaxed_bell, N_BELL);
    CHECK_EQ_U64(strict_bell, 0);
    CHECK(relaxed_bell > 0);
}

/* ---------------------------------------------------------------- READs */

enum { N_READ = 64, OFF_RW = 3u << 20 };

struct rd {
    struct fx *fx;
    struct fx_rc c, s;
    struct fx_watch w;
    struct obs o;
    uint32_t reads_ok, data_ok;
    bool rw_ok, faa_ok;
    uint64_t faa_orig;
};

static void rd_client(void *arg)
{
    struct rd *r = arg;
    struct fx_rc *rc = &r->c;
    struct fx_rc_opts o = run_opts();
    CHECK(fx_rc_open(r->fx, rc, &o) == 0);
    CHECK(fx_rc_connect(rc, "rd/c", "rd/s") == 0);
    r->o.sim = r->fx->sim;
    r->o.cq = fx_nic_cq(rc->scq);
    r->o.cq_is_read = true;
    r->o.rbase = rc->buf;
    fx_watch_start(r->fx, &r->w, 0, observe, &r->o);
    fx_barrier(r->fx, "rd/ready", "c", "s");
    /* N_READ READs of 16 KiB into [0, N_READ * MSG) of the local buffer */
    uint64_t posted = 0, done = 0;
    struct ibv_wc wc;
    while (done < N_READ) {
        if (posted < N_READ && posted - done < OUTSTANDING) {
            CHECK(fx_post(rc, IBV_WR_RDMA_READ, posted, posted * MSG, MSG, posted * MSG,
                          IBV_SEND_SIGNALED) == 0);
            posted++;
            continue;
        }
        CHECK(fx_poll_one(rc->scq, &wc) == 1);
        r->reads_ok += wc.status == IBV_WC_SUCCESS && wc.wr_id == done;
        done++;
    }
    fx_watch_stop(&r->w);
    for (uint32_t k = 0; k < N_READ; k++)
        r->data_ok += missing(rc->buf + (size_t)k * MSG, seq_of(0, k), MSG) == 0;
    /* a WRITE, then at once a READ of the same bytes and a FETCH_ADD on
     * its first word: they execute after the (relaxed) WRITE landed */
    fill(rc->buf + OFF_RW, 999, MSG);
    memset(rc->buf + OFF_RW + MSG, 0, MSG + 8);
    CHECK(fx_post(rc, IBV_WR_RDMA_WRITE, 100, OFF_RW, MSG, OFF_RW, 0) == 0);
    CHECK(fx_post(rc, IBV_WR_RDMA_READ, 101, OFF_RW + MSG, MSG, OFF_RW, IBV_SEND_SIGNALED) == 0);
    CHECK(fx_post(rc, IBV_WR_ATOMIC_FETCH_AND_ADD, 102, OFF_RW + 2 * MSG, 8, OFF_RW + MSG - 8,
                  IBV_SEND_SIGNALED) == 0);
    CHECK(fx_poll_one(rc->scq, &wc) == 1 && wc.wr_id == 101 && wc.status == IBV_WC_SUCCESS);
    CHECK(fx_poll_one(rc->scq, &wc) == 1 && wc.wr_id == 102 && wc.status == IBV_WC_SUCCESS);
    r->rw_ok = missing(rc->buf + OFF_RW + MSG, 999, MSG) == 0;
    memcpy(&r->faa_orig, rc->buf + OFF_RW + 2 * MSG, 8);
    uint64_t want;
    memcpy(&want, rc->buf + OFF_RW + MSG - 8, 8); /* the last word as written */
    r->faa_ok = r->faa_orig == want;
    fx_barrier(r->fx, "rd/end", "c", "s");
}

static void rd_server(void *arg)
{
    struct rd *r = arg;
    struct fx_rc *rc = &r->s;
    struct fx_rc_opts o = run_opts();
    CHECK(fx_rc_open(r->fx, rc, &o) == 0);
    CHECK(fx_rc_connect(rc, "rd/s", "rd/c") == 0);
    for (uint32_t k = 0; k < N_READ; k++)
        fill(rc->buf + (size_t)k * MSG, seq_of(0, k), MSG);
    fx_barrier(r->fx, "rd/ready", "s", "c");
    fx_barrier(r->fx, "rd/end", "s", "c");
}

/* READ responses placed with relaxed ordering (the requester's NIC): the
 * READ's CQE still comes after all of its data. */
static void test_read(void)
{
    struct rd r;
    memset(&r, 0, sizeof(r));
    struct nic_params np;
    nic_params_default(&np);
    np.dma_ordering = NIC_DMA_RELAXED;
    r.fx = fx_create(4, &np);
    CHECK_EQ_U64(fx_run_pair(r.fx, "c", rd_client, "s", rd_server, &r), SIM_RUN_DONE);
    CHECK_EQ_U64(r.reads_ok, N_READ);
    CHECK_EQ_U64(r.data_ok, N_READ);
    CHECK_EQ_U64(r.o.cqe_checked, N_READ);
    CHECK_EQ_U64(r.o.cqe_early, 0);
    CHECK(r.rw_ok);
    CHECK(r.faa_ok);
    const struct nic_counters *c = nic_get_counters(r.fx->nic[0]);
    CHECK(c->dma_ro_chunks >= N_READ * (MSG / 256)); /* the READ data went relaxed */
    CHECK(c->dma_ro_overtaken > 0);
    fx_destroy(r.fx);
}

int main(void)
{
    test_relaxed();
    test_strict();
    test_per_mr();
    test_bell();
    test_read();
    test_determinism();
    return test_summary();
}
