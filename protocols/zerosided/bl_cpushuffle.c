/* zs_cpushuffle: the CPU-to-CPU shuffle baselines of Jasny et al. Fig. 9
 * -- DFI, MPI all-to-all and Spark with UCX -- on the same workers and
 * tuples as the zero-sided shuffle (zs_pu --role=worker): W worker threads
 * (4 per node), each producing --bytes of tuples whose key sends each to
 * one of the W workers, and consuming what the others send it.  Every
 * tuple is checked at its target, as in the zero-sided runs.
 *
 *   zs_cpushuffle --flow=NAME --system=dfi|mpi|spark --workers=W --index=I [--rings=K]
 *                 --tuple=SIZE --bytes=SIZE [--segment=SIZE] [--segments=S] [--block=SIZE]
 *
 * The CPU costs every system pays alike: writing a tuple and reading one
 * (a copy at the host's memcpy rate), and the verbs calls (the host
 * profile).  What each adds:
 *
 *  dfi    DFI's shuffle flow (Thostrup et al., "DFI: The Data Flow
 *         Interface", SIGMOD Record 2022): per target a local segment
 *         buffer; each tuple pushed costs DFI_PUSH_NS; a full segment is
 *         RDMA-WRITten into the target's ring for this source with a footer
 *         (count, sequence) that lands last; the target polls its rings'
 *         footers and writes its consumed count back (credits) every half
 *         ring.
 *  mpi    MPI_Alltoallv, pairwise exchange (MPICH's algorithm for large
 *         messages): iterations of W rounds; round r sends the block for
 *         worker me+r and waits for the one from me-r (a rendezvous WRITE
 *         with a footer), each message costing MPI_MSG_NS of the library;
 *         tuples are partitioned into the blocks first.
 *  spark  Spark 3.0's sort-based shuffle with the UCX plugin: a map stage
 *         that serialises every record into per-reducer blocks
 *         (SER_RECORD_NS + SER_BYTE_NS per byte), a stage barrier, then a
 *         reduce stage that fetches every block with an RDMA READ after a
 *         block-manager request (FETCH_REQ_NS), 4 fetches in flight, and
 *         deserialises (the same cost again).
 *
 * The constants are estimates (stated in docs/zero-sided.md with the
 * reasons); they are the overhead model the build spec allows for Spark
 * and the library costs of DFI and MPI. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocols/common/pages.h"
#include "protocols/common/rc_conn.h"
#include "protocols/zerosided/zs.h"
#include "protocols/zerosided/zs_switch.h"
#include "protocols/zerosided/zs_verbs.h"
#include "rnicsim/host.h"

#define PROG "zs_cpushuffle"
#define MAX_W 64
#define FOOTER_BYTES 16u

/* Library overheads (estimates; docs/zero-sided.md). */
#define DFI_PUSH_NS 5      /* DFI push(): bounds check, copy call, segment bookkeeping */
#define MPI_MSG_NS 1000    /* one MPI_Isend / MPI_Irecv pair matched and progressed */
#define SER_RECORD_NS 40   /* Kryo-serialising one record (and as much to deserialise) */
#define SER_BYTE_PS 300    /* ... per byte: 0.3 ns */
#define FETCH_REQ_NS 20000 /* one shuffle block request through Spark's block manager + UCX */
#define SPARK_FETCHES 4    /* blocks in flight per reducer */

enum sys { S_DFI, S_MPI, S_SPARK };

struct wk {
    const char *flow;
    int sys;
    uint32_t workers, index, tuple;
    uint64_t bytes, items;
    uint32_t seg, segs, block;
    struct zv_dev dev;
    struct ibv_cq *cq;
    struct ibv_qp *qp[MAX_W];
    struct zv_ep peer[MAX_W]; /* peer j's region (its QP towards me) */
    uint8_t *mem;
    size_t mem_bytes;
    struct ibv_mr *mr;
    /* layout of mem */
    size_t recv_off, recv_slot; /* W slots of recv_slot bytes: what source j sends me */
    size_t send_off, send_slot; /* W staging slots */
    size_t credit_off;          /* W u64: consumed counts my targets write back */
    /* checks, as the zero-sided consumer does */
    uint64_t next_seq[MAX_W], got_items, got_bytes, hash_from[MAX_W];
    uint64_t sent_seq[MAX_W], sent_hash[MAX_W];
    uint64_t t_start, t_first, t_last;
    bool violation;
    uint32_t signalled;
    uint32_t sources;     /* --sources (dfi only): senders-only workers below, receivers above */
    uint64_t target_rate; /* receivers that stand for GPU kernels: bytes / s, no CPU copy */
};

static void copy_cost(uint64_t bytes, uint8_t *scratch, const uint8_t *src)
{
    /* the host's memcpy rate through host_memcpy, at most 256 KiB at a time */
    while (bytes) {
        uint64_t n = bytes > (256u << 10) ? (256u << 10) : bytes;
        host_memcpy(scratch, src, n);
        bytes -= n;
    }
}

/* ---------------------------------------------------------------- tuples */

/* Workers [0, sources) only send, [sources, workers) only receive
 * (--sources; 0: every worker does both). */
static bool sends(const struct wk *w, uint32_t j)
{
    return !w->sources || j < w->sources;
}
static bool receives(const struct wk *w, uint32_t j)
{
    return !w->sources || j >= w->sources;
}

static uint32_t dest_of(const struct wk *w, uint64_t k)
{
    uint32_t first = w->sources, n = w->workers - w->sources;
    return first + zs_key_dest(w->index, k, n);
}

static void tuple_write(struct wk *w, uint8_t *at, uint32_t dest)
{
    zs_item_fill(at, w->tuple, w->index, dest, w->sent_seq[dest]);
    w->sent_hash[dest] += zs_item_key(w->index, dest, w->sent_seq[dest]);
    w->sent_seq[dest]++;
}

static void take(struct wk *w, const uint8_t *t)
{
    uint32_t pr;
    uint64_t seq;
    if (w->violation)
        return;
    if (!w->t_first)
        w->t_first = host_now_ns();
    if (!zs_item_check(t, w->tuple, w->index, &pr, &seq) || pr >= w->workers ||
        seq != w->next_seq[pr]) {
        w->violation = true;
        fprintf(stderr,
                PROG ": VIOLATION: worker %u: tuple from %u sequence %" PRIu64 " (expected %" PRIu64
                     ")\n",
                w->index, pr, seq, pr < w->workers ? w->next_seq[pr] : 0);
        struct host_kv kv[] = {{"consumer", w->index}, {"producer", pr}, {"seq", (double)seq}};
        host_report("order_violation", kv, 3);
        return;
    }
    w->next_seq[pr]++;
    w->hash_from[pr] += zs_item_key(pr, w->index, seq);
    w->got_items++;
    w->got_bytes += w->tuple;
    w->t_last = host_now_ns();
}

/* ---------------------------------------------------------------- posting */

enum { WR_SEG = 1, WR_CREDIT = 2, WR_BLOCK = 3 };

static int write_to(struct wk *w, uint32_t j, const void *local, uint32_t len, uint64_t roff,
                    bool inl, uint32_t kind)
{
    struct ibv_sge sge = {(uintptr_t)local, len, w->mr->lkey};
    struct ibv_send_wr wr = {.wr_id = (uint64_t)kind << 32 | j,
                             .sg_list = &sge,
                             .num_sge = 1,
                             .opcode = IBV_WR_RDMA_WRITE,
                             .send_flags = IBV_SEND_SIGNALED | (inl ? IBV_SEND_INLINE : 0)};
    wr.wr.rdma.remote_addr = w->peer[j].addr + roff;
    wr.wr.rdma.rkey = w->peer[j].rkey;
    struct ibv_send_wr *bad;
    int err = ibv_post_send(w->qp[j], &wr, &bad);
    if (err) {
        fprintf(stderr, PROG ": worker %u: post: %s\n", w->index, strerror(err));
        return -1;
    }
    w->signalled++;
    return 0;
}

/* Reap completions (their wr_ids into done[], at most 16); -1 on an
 * error completion. */
static int reap(struct wk *w, uint64_t *done)
{
    struct ibv_wc wc[16];
    int n = ibv_poll_cq(w->cq, 16, wc);
    for (int i = 0; i < n; i++) {
        if (wc[i].status != IBV_WC_SUCCESS) {
            fprintf(stderr, PROG ": worker %u: %s\n", w->index, ibv_wc_status_str(wc[i].status));
            return -1;
        }
        if (done)
            done[i] = wc[i].wr_id;
    }
    w->signalled -= (uint32_t)(n > 0 ? n : 0);
    return n;
}

static uint64_t footer_seq(const uint8_t *slot_end)
{
    uint64_t v;
    memcpy(&v, slot_end - 8, 8);
    return v;
}

/* ---------------------------------------------------------------- DFI */

struct dfi_src {   /* per target: two staging segments, one filling while the other is sent */
    uint32_t fill; /* tuples in the filling segment */
    uint32_t sent; /* segments sent */
    uint32_t cur;  /* the filling segment (0 / 1) */
    bool busy[2];  /* a segment's WRITE is unfinished */
    bool end_sent; /* the segment carrying the end marker went out */
};

static int run_dfi(struct wk *w, uint8_t *scratch)
{
    uint32_t per_seg = (w->seg - FOOTER_BYTES) / w->tuple;
    struct dfi_src src[MAX_W];
    uint32_t next_in[MAX_W] = {0}, ended = 0, ends_sent = 0, consumed_since[MAX_W] = {0};
    bool ended_from[MAX_W] = {0};
    memset(src, 0, sizeof(src));
    uint64_t k = 0;
    volatile uint64_t *credit = (volatile uint64_t *)(void *)(w->mem + w->credit_off);
    uint32_t n_src = w->sources ? w->sources : w->workers;
    uint32_t n_dst = w->workers - w->sources;
    bool me_sends = sends(w, w->index), me_receives = receives(w, w->index);
    if (!me_sends)
        w->items = 0;
    while ((me_receives && ended < n_src) || (me_sends && ends_sent < n_dst) || w->signalled) {
        bool did = false;
        uint64_t pushed = 0;
        /* source: up to one segment's worth of tuples */
        for (uint32_t n = 0; n < per_seg && k < w->items; n++) {
            uint32_t d = dest_of(w, k);
            struct dfi_src *s = &src[d];
            if (s->fill == per_seg || s->busy[s->cur])
                break; /* waiting for credits / the NIC: serve as a target meanwhile */
            tuple_write(w,
                        w->mem + w->send_off + d * w->send_slot + (size_t)s->cur * w->seg +
                            (size_t)s->fill * w->tuple,
                        d);
            s->fill++;
            k++;
            pushed++;
            did = true;
        }
        host_compute(pushed * DFI_PUSH_NS); /* this round's pushes, at once */
        bool last = k == w->items;
        for (uint32_t d = w->sources; me_sends && d < w->workers; d++) {
            struct dfi_src *s = &src[d];
            bool want = s->fill == per_seg || (last && !s->end_sent);
            if (!want || s->busy[s->cur] || s->sent - credit[d] >= w->segs)
                continue;
            /* the segment: tuples, then the footer {count, end, sequence} */
            uint8_t *seg = w->mem + w->send_off + d * w->send_slot + (size_t)s->cur * w->seg;
            uint32_t footer[2] = {s->fill, last ? 1u : 0u};
            uint64_t seqno = (uint64_t)s->sent + 1;
            memcpy(seg + w->seg - FOOTER_BYTES, footer, 8);
            memcpy(seg + w->seg - 8, &seqno, 8);
            copy_cost((uint64_t)s->fill * w->tuple, scratch, seg);
            if (write_to(w, d, seg, w->seg,
                         w->recv_off + (size_t)w->index * w->recv_slot +
                             (size_t)(s->sent % w->segs) * w->seg,
                         false, WR_SEG | s->cur << 8))
                return 1;
            s->busy[s->cur] = true;
            s->cur ^= 1;
            s->sent++;
            s->fill = 0;
            if (last) {
                s->end_sent = true;
                ends_sent++;
            }
            did = true;
        }
        /* target: every source's next segment */
        for (uint32_t s = 0; me_receives && s < n_src; s++) {
            if (ended_from[s])
                continue;
            uint8_t *slot = w->mem + w->recv_off + (size_t)s * w->recv_slot +
                            (size_t)(next_in[s] % w->segs) * w->seg;
            if (footer_seq(slot + w->seg) != (uint64_t)next_in[s] + 1)
                continue;
            uint32_t footer[2];
            memcpy(footer, slot + w->seg - FOOTER_BYTES, 8);
            for (uint32_t i = 0; i < footer[0]; i++)
                take(w, slot + (size_t)i * w->tuple);
            if (w->target_rate) /* a GPU kernel consumes it */
                host_compute((uint64_t)footer[0] * w->tuple * 1000000000ull / w->target_rate);
            else
                copy_cost((uint64_t)footer[0] * w->tuple, scratch, slot);
            memset(slot + w->seg - 8, 0, 8);
            next_in[s]++;
            if (footer[1]) {
                ended_from[s] = true;
                ended++;
            }
            if (++consumed_since[s] >= w->segs / 2 || footer[1]) { /* credits back */
                uint64_t c = next_in[s];
                memcpy(scratch, &c, 8);
                if (write_to(w, s, scratch, 8, w->credit_off + (size_t)w->index * 8, true,
                             WR_CREDIT))
                    return 1;
                consumed_since[s] = 0;
            }
            did = true;
        }
        uint64_t done[16];
        int r = reap(w, done);
        if (r < 0)
            return 1;
        for (int i = 0; i < r; i++)
            if (((done[i] >> 32) & 0xff) == WR_SEG) /* its staging segment is free again */
                src[(uint32_t)done[i]].busy[(done[i] >> 40) & 1] = false;
        did |= r > 0;
        if (w->violation)
            return 1;
        if (!did)
            host_relax();
    }
    return 0;
}

/* ---------------------------------------------------------------- MPI */

static int run_mpi(struct wk *w, uint8_t *scratch)
{
    uint32_t per_block = (w->block - FOOTER_BYTES) / w->tuple;
    /* each iteration: W x per_block / 2 tuples on average per block (the
     * blocks are sized twice the mean; a full block keeps its excess for
     * the next iteration) */
    uint64_t per_iter = (uint64_t)w->workers * per_block / 2;
    uint64_t k = 0;
    uint32_t fill[MAX_W] = {0};
    for (uint64_t it = 0;; it++) {
        bool more = k < w->items;
        /* partition: this iteration's tuples into the W send blocks */
        uint64_t stop = k + per_iter < w->items ? k + per_iter : w->items;
        uint64_t partitioned = 0;
        while (k < stop) {
            uint32_t d = dest_of(w, k);
            if (fill[d] == per_block)
                break; /* an unlucky block filled up: the rest waits an iteration */
            uint8_t *blk = w->mem + w->send_off + (size_t)d * w->send_slot;
            tuple_write(w, blk + (size_t)fill[d] * w->tuple, d);
            fill[d]++;
            k++;
            partitioned++;
        }
        copy_cost(partitioned * w->tuple, scratch, w->mem + w->send_off);
        bool last = !more || k == w->items;
        uint32_t parity = (uint32_t)(it & 1);
        /* pairwise rounds */
        for (uint32_t r = 0; r < w->workers; r++) {
            uint32_t to = (w->index + r) % w->workers;
            uint32_t from = (w->index + w->workers - r) % w->workers;
            uint8_t *blk = w->mem + w->send_off + (size_t)to * w->send_slot;
            uint32_t footer[2] = {fill[to], last ? 1u : 0u};
            uint64_t seqno = it + 1;
            memcpy(blk + w->block - FOOTER_BYTES, footer, 8);
            memcpy(blk + w->block - 8, &seqno, 8);
            host_compute(MPI_MSG_NS);
            if (write_to(w, to, blk, w->block,
                         w->recv_off + (size_t)w->index * w->recv_slot + (size_t)parity * w->block,
                         false, WR_BLOCK))
                return 1;
            fill[to] = 0;
            uint8_t *in =
                w->mem + w->recv_off + (size_t)from * w->recv_slot + (size_t)parity * w->block;
            while (footer_seq(in + w->block) != it + 1) {
                if (reap(w, NULL) < 0)
                    return 1;
                host_relax();
            }
            uint32_t got[2];
            memcpy(got, in + w->block - FOOTER_BYTES, 8);
            for (uint32_t i = 0; i < got[0]; i++)
                take(w, in + (size_t)i * w->tuple);
            copy_cost((uint64_t)got[0] * w->tuple, scratch, in);
            if (w->violation)
                return 1;
            /* the send buffer is reused next iteration: wait for the WRITE */
            while (w->signalled)
                if (reap(w, NULL) < 0)
                    return 1;
        }
        /* everyone agrees when to stop: every worker sends in every
         * iteration until all are done (the footer's "last" bits) */
        uint32_t one = 1;
        char key[128];
        if (last) {
            snprintf(key, sizeof(key), "cs/%s/mpi_last/%u/%" PRIu64, w->flow, w->index, it);
            host_oob_put(key, &one, sizeof(one));
        }
        snprintf(key, sizeof(key), "cs/%s/mpi_iter/%u/%" PRIu64, w->flow, w->index, it);
        uint32_t mine = last;
        host_oob_put(key, &mine, sizeof(mine));
        bool all = true;
        for (uint32_t j = 0; j < w->workers; j++) {
            uint32_t v = 0;
            snprintf(key, sizeof(key), "cs/%s/mpi_iter/%u/%" PRIu64, w->flow, j, it);
            host_oob_get(key, &v, sizeof(v));
            all &= v == 1;
        }
        if (all)
            break;
    }
    return 0;
}

/* ---------------------------------------------------------------- Spark */

static void ser_cost(uint64_t records, uint32_t tuple)
{
    host_compute(records * SER_RECORD_NS + records * tuple * SER_BYTE_PS / 1000);
}

static int run_spark(struct wk *w, uint8_t *scratch)
{
    (void)scratch;
    /* map stage: serialise every record into its reducer's block */
    uint32_t fill[MAX_W] = {0};
    for (uint64_t k = 0; k < w->items; k++) {
        uint32_t d = dest_of(w, k);
        if ((uint64_t)(fill[d] + 1) * w->tuple > w->send_slot) {
            fprintf(stderr, PROG ": spark: a map block outgrew its buffer\n");
            return 1;
        }
        tuple_write(w, w->mem + w->send_off + (size_t)d * w->send_slot + (size_t)fill[d] * w->tuple,
                    d);
        fill[d]++;
    }
    ser_cost(w->items, w->tuple);
    char key[128];
    for (uint32_t d = 0; d < w->workers; d++) { /* the map output's index */
        snprintf(key, sizeof(key), "cs/%s/sp/%u/%u", w->flow, w->index, d);
        uint32_t n = fill[d];
        host_oob_put(key, &n, sizeof(n));
    }
    /* the stage barrier: the reduce stage starts when every map task ended */
    uint32_t one = 1;
    snprintf(key, sizeof(key), "cs/%s/sp_mapped/%u", w->flow, w->index);
    host_oob_put(key, &one, sizeof(one));
    for (uint32_t j = 0; j < w->workers; j++) {
        snprintf(key, sizeof(key), "cs/%s/sp_mapped/%u", w->flow, j);
        host_oob_get(key, &one, sizeof(one));
    }
    /* reduce stage: fetch my block from every mapper */
    uint32_t next = 0, inflight = 0, done = 0;
    uint32_t cnt[MAX_W];
    while (done < w->workers) {
        while (inflight < SPARK_FETCHES && next < w->workers) {
            uint32_t m = (w->index + next) % w->workers;
            snprintf(key, sizeof(key), "cs/%s/sp/%u/%u", w->flow, m, w->index);
            host_oob_get(key, &cnt[m], sizeof(cnt[m]));
            host_compute(FETCH_REQ_NS);
            uint32_t len = cnt[m] * w->tuple;
            uint8_t *dst = w->mem + w->recv_off + (size_t)m * w->recv_slot;
            struct ibv_sge sge = {(uintptr_t)dst, len ? len : 1, w->mr->lkey};
            struct ibv_send_wr wr = {.wr_id = m,
                                     .sg_list = &sge,
                                     .num_sge = 1,
                                     .opcode = IBV_WR_RDMA_READ,
                                     .send_flags = IBV_SEND_SIGNALED};
            wr.wr.rdma.remote_addr =
                w->peer[m].addr + w->send_off + (size_t)w->index * w->send_slot;
            wr.wr.rdma.rkey = w->peer[m].rkey;
            struct ibv_send_wr *bad;
            int err = ibv_post_send(w->qp[m], &wr, &bad);
            if (err) {
                fprintf(stderr, PROG ": spark fetch: %s\n", strerror(err));
                return 1;
            }
            inflight++;
            next++;
        }
        struct ibv_wc wc[8];
        int n = ibv_poll_cq(w->cq, 8, wc);
        for (int i = 0; i < n; i++) {
            if (wc[i].status != IBV_WC_SUCCESS) {
                fprintf(stderr, PROG ": spark fetch: %s\n", ibv_wc_status_str(wc[i].status));
                return 1;
            }
            uint32_t m = (uint32_t)wc[i].wr_id;
            const uint8_t *blk = w->mem + w->recv_off + (size_t)m * w->recv_slot;
            for (uint32_t t = 0; t < cnt[m]; t++)
                take(w, blk + (size_t)t * w->tuple);
            ser_cost(cnt[m], w->tuple); /* deserialise */
            inflight--;
            done++;
        }
        if (w->violation)
            return 1;
    }
    return 0;
}

/* ---------------------------------------------------------------- set-up */

struct wk_thread {
    struct wk *w;
    int rc;
};

static int worker_run(struct wk *w)
{
    int rc = 1;
    uint8_t *scratch = pages_alloc(256u << 10);
    if (!scratch || zv_open(&w->dev, PROG))
        goto out;
    w->items = (w->bytes + w->tuple - 1) / w->tuple;
    /* the memory: W receive slots, W staging slots, W credit words */
    uint64_t per_dest = (w->items / w->workers + 1) * w->tuple * 2 + 4096;
    switch (w->sys) {
    case S_DFI:
        w->recv_slot = (size_t)w->segs * w->seg;
        w->send_slot = 2 * (size_t)w->seg;
        break;
    case S_MPI:
        w->recv_slot = 2 * (size_t)w->block;
        w->send_slot = w->block;
        break;
    default: /* spark: the whole map output, and the fetched blocks */
        w->recv_slot = per_dest;
        w->send_slot = per_dest;
        break;
    }
    w->recv_off = 0;
    w->send_off = w->recv_off + w->workers * w->recv_slot;
    w->credit_off = w->send_off + w->workers * w->send_slot;
    w->mem_bytes = w->credit_off + w->workers * 8;
    if (posix_memalign((void **)&w->mem, 4096, w->mem_bytes))
        goto out;
    memset(w->mem, 0, w->mem_bytes);
    w->mr = ibv_reg_mr(w->dev.pd, w->mem, w->mem_bytes,
                       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
    w->cq = ibv_create_cq(w->dev.ctx, 4096, NULL, NULL, 0);
    if (!w->mr || !w->cq)
        goto out;
    char key[128];
    for (uint32_t j = 0; j < w->workers; j++) {
        if (!(w->qp[j] = zv_qp(&w->dev, w->cq, w->cq, IBV_QPT_RC, 256, 1)))
            goto out;
        snprintf(key, sizeof(key), "cs/%s/%u->%u", w->flow, w->index, j);
        zv_ep_put(key, &w->dev, w->qp[j], w->mr, 1);
    }
    for (uint32_t j = 0; j < w->workers; j++) {
        snprintf(key, sizeof(key), "cs/%s/%u->%u", w->flow, j, w->index);
        if (zv_ep_get(key, &w->peer[j]) ||
            zv_rc_up(w->qp[j], w->peer[j].gid, w->peer[j].qpn, 1, 1, IBV_MTU_1024)) {
            fprintf(stderr, PROG ": worker %u: connecting to %u failed\n", w->index, j);
            goto out;
        }
    }
    /* start together */
    uint32_t one = 1;
    snprintf(key, sizeof(key), "cs/%s/up/%u", w->flow, w->index);
    host_oob_put(key, &one, sizeof(one));
    for (uint32_t j = 0; j < w->workers; j++) {
        snprintf(key, sizeof(key), "cs/%s/up/%u", w->flow, j);
        host_oob_get(key, &one, sizeof(one));
    }
    w->t_start = host_now_ns();
    rc = w->sys == S_DFI   ? run_dfi(w, scratch)
         : w->sys == S_MPI ? run_mpi(w, scratch)
                           : run_spark(w, scratch);
    /* compare with what the sources sent */
    for (uint32_t j = 0; j < w->workers && rc == 0; j++) {
        uint64_t st[2] = {w->sent_seq[j], w->sent_hash[j]};
        snprintf(key, sizeof(key), "cs/%s/stat/%u/%u", w->flow, w->index, j);
        host_oob_put(key, st, sizeof(st));
    }
    for (uint32_t j = 0; j < w->workers && rc == 0; j++) {
        uint64_t st[2];
        snprintf(key, sizeof(key), "cs/%s/stat/%u/%u", w->flow, j, w->index);
        host_oob_get(key, st, sizeof(st));
        if (st[0] != w->next_seq[j] || st[1] != w->hash_from[j]) {
            fprintf(stderr,
                    PROG ": VIOLATION: worker %u got %" PRIu64 " tuples of %" PRIu64 " from %u\n",
                    w->index, w->next_seq[j], st[0], j);
            rc = 1;
        }
    }
    if (rc == 0) {
        double secs = (double)(w->t_last - w->t_start) * 1e-9;
        struct host_kv kv[] = {{"consumer", w->index},
                               {"items", (double)w->got_items},
                               {"bytes", (double)w->got_bytes},
                               {"t_start_ns", (double)w->t_start},
                               {"t_first_ns", (double)w->t_first},
                               {"t_last_ns", (double)w->t_last},
                               {"first_bytes", 0},
                               {"gbps", secs > 0 ? (double)w->got_bytes * 8 / secs / 1e9 : 0}};
        host_report("zs_consumer", kv, sizeof(kv) / sizeof(kv[0]));
        struct host_kv oc[] = {{"messages_checked", (double)w->got_items}};
        host_report("order_check", oc, 1);
    }
    /* keep the QPs until everyone is done */
    snprintf(key, sizeof(key), "cs/%s/done/%u", w->flow, w->index);
    host_oob_put(key, &one, sizeof(one));
    for (uint32_t j = 0; j < w->workers; j++) {
        snprintf(key, sizeof(key), "cs/%s/done/%u", w->flow, j);
        host_oob_get(key, &one, sizeof(one));
    }
out:
    for (uint32_t j = 0; j < MAX_W; j++)
        if (w->qp[j])
            ibv_destroy_qp(w->qp[j]);
    if (w->mr)
        ibv_dereg_mr(w->mr);
    if (w->cq)
        ibv_destroy_cq(w->cq);
    zv_close(&w->dev);
    free(w->mem);
    free(scratch);
    free(w);
    return rc;
}

static void worker_thread(void *arg)
{
    struct wk_thread *t = arg;
    t->rc = worker_run(t->w);
}

int zs_cpushuffle_main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"flow", required_argument, 0, 'f'},
        {"system", required_argument, 0, 'y'},
        {"workers", required_argument, 0, 'w'},
        {"index", required_argument, 0, 'i'},
        {"rings", required_argument, 0, 'k'},
        {"tuple", required_argument, 0, 't'},
        {"bytes", required_argument, 0, 'b'},
        {"segment", required_argument, 0, 's'},
        {"segments", required_argument, 0, 'S'},
        {"block", required_argument, 0, 'B'},
        {"sources", required_argument, 0, 'o'},
        {"role", required_argument, 0, 'r'},
        {"node", required_argument, 0, 'n'},
        {"target-rate", required_argument, 0, 'T'},
        {0, 0, 0, 0},
    };
    static const char *const systems[] = {"dfi", "mpi", "spark", NULL};
    struct wk proto;
    memset(&proto, 0, sizeof(proto));
    proto.sys = -1;
    proto.tuple = 16;
    proto.seg = 8192;
    proto.segs = 16;
    proto.block = 64 << 10;
    uint32_t k = 1;
    uint64_t v;
    int o, role = 0, node = -1;
    while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (o) {
        case 'f':
            proto.flow = optarg;
            break;
        case 'y':
            proto.sys = -1;
            for (int i = 0; systems[i]; i++)
                if (!strcmp(optarg, systems[i]))
                    proto.sys = i;
            if (proto.sys < 0)
                goto bad;
            break;
        case 'w':
            if (!rc_conn_parse_uint(optarg, 1, MAX_W, &v))
                goto bad;
            proto.workers = (uint32_t)v;
            break;
        case 'i':
            if (!rc_conn_parse_uint(optarg, 0, MAX_W - 1, &v))
                goto bad;
            proto.index = (uint32_t)v;
            break;
        case 'k':
            if (!rc_conn_parse_uint(optarg, 1, MAX_W, &v))
                goto bad;
            k = (uint32_t)v;
            break;
        case 't':
            if (!rc_conn_parse_uint(optarg, ZS_MIN_ITEM_BYTES, 1u << 20, &v))
                goto bad;
            proto.tuple = (uint32_t)v;
            break;
        case 'b':
            if (!rc_conn_parse_uint(optarg, 1, 1ull << 36, &proto.bytes))
                goto bad;
            break;
        case 's':
            if (!rc_conn_parse_uint(optarg, 64, 1u << 24, &v))
                goto bad;
            proto.seg = (uint32_t)v;
            break;
        case 'S':
            if (!rc_conn_parse_uint(optarg, 2, 4096, &v))
                goto bad;
            proto.segs = (uint32_t)v;
            break;
        case 'B':
            if (!rc_conn_parse_uint(optarg, 64, 1u << 28, &v))
                goto bad;
            proto.block = (uint32_t)v;
            break;
        case 'o':
            if (!rc_conn_parse_uint(optarg, 1, MAX_W - 1, &v))
                goto bad;
            proto.sources = (uint32_t)v;
            break;
        case 'r':
            role = !strcmp(optarg, "source") ? 1 : !strcmp(optarg, "target") ? 2 : 0;
            break;
        case 'n':
            if (!rc_conn_parse_uint(optarg, 0, MAX_W - 1, &v))
                goto bad;
            node = (int)v;
            break;
        case 'T':
            if (!rc_conn_parse_rate(optarg, &proto.target_rate))
                goto bad;
            break;
        default:
            return 1;
        }
    }
    /* --node=I with --rings=K: sources I*K.., targets sources + I*K.. */
    if (node >= 0)
        proto.index = (role == 2 ? proto.sources : 0) + (uint32_t)node * k;
    /* a worker beyond this run's (fewer nodes): nothing to do */
    if (proto.workers && (proto.index >= proto.workers ||
                          (role == 1 && proto.sources && proto.index >= proto.sources)))
        return 0;
    if (proto.sources && (proto.sys != S_DFI || proto.sources >= proto.workers)) {
        fprintf(stderr, PROG ": --sources needs --system=dfi and fewer than --workers\n");
        return 1;
    }
    if (!proto.flow || proto.sys < 0 || !proto.workers || (!proto.bytes && role != 2) ||
        proto.index + k > proto.workers || proto.tuple + FOOTER_BYTES > proto.seg ||
        proto.tuple + FOOTER_BYTES > proto.block) {
        fprintf(stderr, PROG ": needs --flow --system --workers --bytes, a tuple smaller than "
                             "a segment / block, and --index + --rings <= --workers\n");
        return 1;
    }
    struct wk_thread t[MAX_W];
    int th[MAX_W];
    for (uint32_t i = 0; i < k; i++) {
        t[i].w = malloc(sizeof(struct wk));
        if (!t[i].w)
            return 1;
        *t[i].w = proto;
        t[i].w->index = proto.index + i;
    }
    for (uint32_t i = 1; i < k; i++)
        th[i] = host_thread_start(worker_thread, &t[i]);
    int rc = worker_run(t[0].w);
    for (uint32_t i = 1; i < k; i++) {
        if (th[i] < 0 || host_thread_join(th[i]))
            rc = 1;
        else
            rc |= t[i].rc;
    }
    return rc;
bad:
    fprintf(stderr, PROG ": bad option value '%s'\n", optarg);
    return 1;
}
