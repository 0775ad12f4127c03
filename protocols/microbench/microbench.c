/* microbench: the hardware microbenchmark sweeps of issue 4.
 *
 * One --server program serves --clients=K client programs (--client
 * --id=0..K-1).  Every client connects --qps=N RC QPs to the server (the
 * server has N*K).  A client keeps --outstanding=M work requests in flight
 * in all, handed to its QPs round robin, --post-list=P WRs chained per
 * ibv_post_send (one doorbell), --burst=B such posts to one QP before the
 * next, at most --depth per QP; it runs --warmup
 * untimed then --iters timed operations of --test:
 *
 *   write, read  RDMA WRITE / READ of --size bytes at the server; the remote
 *                address of successive operations walks through the
 *                server's MR of --working-set bytes (--access=seq: stride
 *                max(size, 64), client i starting at i/K of it; random: a
 *                xorshift64 seeded by --id), so a large working set misses
 *                the NIC's translation cache;
 *   send         SEND of --size bytes into receives the server keeps posted
 *                on every QP (2 x depth each, reposted as they complete, the
 *                buffers walking the working set the same way);
 *   faa, cas     FETCH_AND_ADD(1) / COMPARE_AND_SWAP(last value seen, +1) on
 *                one 8-byte counter at the server: N*K QPs contending for
 *                one address.
 *
 * --target=dm puts the server's target (working set or counter) in device
 * memory: ibv_alloc_dm + ibv_reg_dm_mr with IBV_ACCESS_ZERO_BASED (remote
 * addresses are offsets), written with ibv_memcpy_to_dm and read back with
 * ibv_memcpy_from_dm.
 *
 * Verification: data carry a pattern that depends on the byte's offset in
 * the target modulo 4096 (so a source / landing area of 4096 + size bytes
 * serves every address).  write: the server checks a sample of every
 * client's operations (recomputing their addresses); read: the client
 * checks its landing area; send: the server checks every byte_len and a
 * sample of the received buffers; faa: the server checks that the counter
 * is K x (warmup + iters) and clients that every fetched value is below
 * it; cas: the server checks the counter equals the number of successful
 * CASes the clients counted.  A mismatch prints "VERIFY FAILED" and both
 * sides exit 2.
 *
 * Results: every client reports its own row in table "microbench_client";
 * the server one aggregate row in table "microbench" (one row per run, so a
 * sweep gets one CSV row per run): ops = K x iters, mops = ops / (latest end
 * - earliest start over the clients' timed phases, collected out of band),
 * avg_lat_us = post to polled completion of the signaled WRs.
 *
 * Out of band (prefix --name): "<name>/server" and "<name>/client/<i>"
 * (GID, LID, rkey, address, options hash; the client's QPN array),
 * "<name>/server/qpn/<i>" (the server QPNs of client i),
 * "<name>/result/<i>" (a client's timed-phase numbers) and star barriers
 * "<name>/sync/<k>/c<i>" -> "<name>/sync/<k>/s" that carry each side's
 * status, so a failure anywhere stops everyone.
 *
 * No globals: several instances run as coroutines in one simulator process.
 * The options (parsing, checks, the hash) are in microbench_opts.c. */
#include "protocols/microbench/microbench.h"

#include <errno.h>
#include <infiniband/verbs.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocols/common/rc_conn.h"
#include "protocols/microbench/microbench_priv.h"
#include "rnicsim/host.h"

#define MB_POLL_BATCH 32
#define MB_PATTERN_PERIOD 4096u /* the data pattern repeats every 4 KiB */
#define MB_VERIFY_SAMPLES 256   /* write: operations checked per client */
#define MB_RECV_VERIFY_EVERY 97 /* send: every 97th receive is checked */
#define MB_WRID_QP_SHIFT 40     /* wr_id = qp index << 40 | per-QP sequence */
#define MB_SERVER_INFO_BYTES 64
#define MB_CLIENT_HDR_BYTES 32
#define MB_RESULT_BYTES 64
#define MB_KEY_MAX (RC_CONN_NAME_MAX + 48)

/* One client QP's flow control: WRs get per-QP sequence numbers 1, 2, ...;
 * a completion of sequence s retires every WR of the QP up to s (RC
 * completes a send queue in order). */
struct mb_qp_flow {
    uint64_t posted, completed;
};

/* The numbers a client sends the server after its timed phase. */
struct mb_result {
    uint64_t ops, start_ns, end_ns, lat_sum_ns, lat_count, cas_successes;
};

struct mb {
    struct mb_opts o;
    const char *prog;
    struct rc_conn conn; /* device, PD, port, GID, MTU, the client's MR/buffer */
    struct ibv_device_attr dev;
    struct ibv_cq *cq; /* one CQ for sends and receives */
    struct ibv_qp **qps;
    uint32_t nqps;     /* N (client) or N*K (server) */
    uint32_t depth;    /* max_send_wr of a client QP */
    uint32_t rq_depth; /* receives per server QP (send test) */
    uint32_t *peer_qpn;
    uint32_t max_inline;
    uint8_t rd_atomic;
    bool atomic_ok;
    int access;
    uint64_t stride, nslots, span; /* the walk: nslots x stride = span bytes */
    /* server target */
    struct ibv_dm *dm;
    struct ibv_mr *target_mr;
    uint8_t *target; /* host target, or the staging copy of the DM */
    uint64_t target_bytes;
    uint64_t recv_walk_k;  /* send: receives posted so far (their walk) */
    uint64_t recv_rng;     /* send, random: the server's walk state */
    uint64_t recv_checked; /* send: receive buffers verified */
    /* client data path */
    uint64_t data_bytes; /* pattern area: 4096 + size */
    uint64_t fetch_off;  /* atomics: 8 bytes per (QP, slot) */
    struct mb_qp_flow *flow;
    uint64_t *post_ns;    /* [qp * depth + seq % depth] */
    uint64_t *cas_expect; /* [qp * depth + seq % depth] */
    struct ibv_sge *sge;  /* one post list (heap: coroutine stacks are small) */
    struct ibv_send_wr *wr;
    uint64_t inflight;
    uint64_t lat_sum_ns, lat_count;
    uint64_t cas_last_seen, cas_successes;
    uint64_t rng;    /* client's random walk state */
    uint64_t walk_k; /* client's operations so far (their walk) */
    uint64_t last_addr;
    struct mb_result res;
    uint32_t sync_seq;
    bool no_device;     /* nothing to run on: stop at once, as perftest */
    bool server_failed; /* the server published a failed set-up and left */
};

/* ------------------------------------------------------------ helpers */

/* Byte at offset x of the target, as every writer and the server's
 * pre-fill lay it out (period 4096: the source area has 4096 + size). */
static uint8_t mb_pattern(uint64_t x)
{
    uint32_t i = (uint32_t)(x % MB_PATTERN_PERIOD);
    return (uint8_t)((i * 167u + 0x3du) ^ (i >> 7));
}

/* xorshift64 (Marsaglia 2003), deterministic per seed. */
static uint64_t mb_xorshift(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    *s = x;
    return x;
}

static uint64_t mb_seed(uint64_t id)
{
    /* golden-ratio multiplier; the constant keeps the state non-zero */
    return (id + 1) * 0x9e3779b97f4a7c15ull ^ 0x2545f4914f6cdd1dull;
}

/* Remote offset of operation k of a walker (k counts from 0, warmup
 * included).  seq: walker w of `walkers` starts at w/walkers of the slots. */
static uint64_t mb_walk(const struct mb *mb, uint64_t k, uint64_t walker, uint64_t walkers,
                        uint64_t *rng)
{
    if (mb_tests[mb->o.test].atomic)
        return 0;
    uint64_t slot;
    if (mb->o.access == MB_RANDOM)
        slot = mb_xorshift(rng) % mb->nslots;
    else
        slot = (walker * mb->nslots / walkers + k) % mb->nslots;
    return slot * mb->stride;
}

/* ------------------------------------------------------------ out of band */

static int mb_put(struct mb *mb, const char *key, const void *buf, size_t len)
{
    return rc_conn_oob_put(mb->prog, key, buf, len);
}

static int mb_get(struct mb *mb, const char *key, void *buf, size_t len)
{
    return rc_conn_oob_get(mb->prog, key, buf, len);
}

/* Star barrier: clients put their status, the server collects all and
 * puts the largest; everyone returns the largest status of the run (or 1
 * when the exchange itself failed). */
static int mb_barrier(struct mb *mb, int status)
{
    return rc_conn_star_barrier(mb->prog, mb->o.name, mb->sync_seq++,
                                mb->o.role == RC_CONN_ROLE_SERVER, 0, mb->o.clients, mb->o.id,
                                status);
}

/* ------------------------------------------------------------ resources */

static uint32_t mb_psn(uint32_t qpn, enum rc_conn_role role)
{
    /* as rc_conn_exchange: deterministic 24-bit PSN (perftest draws one) */
    return (qpn * 2654435761u + (uint32_t)role) & 0xffffffu;
}

static int mb_open(struct mb *mb)
{
    struct rc_conn *c = &mb->conn;
    if (rc_conn_open_device(c)) {
        mb->no_device = true;
        return 1;
    }
    if (rc_conn_query(c, &mb->dev, (uint32_t)mb->o.mtu_bytes))
        return 1;
    uint32_t rd = mb->dev.max_qp_rd_atom > 0 ? (uint32_t)mb->dev.max_qp_rd_atom : 1;
    if (mb->dev.max_qp_init_rd_atom > 0 && (uint32_t)mb->dev.max_qp_init_rd_atom < rd)
        rd = (uint32_t)mb->dev.max_qp_init_rd_atom;
    mb->rd_atomic = (uint8_t)(rd > 255 ? 255 : rd);
    mb->atomic_ok = mb->dev.atomic_cap != IBV_ATOMIC_NONE;
    if (mb_tests[mb->o.test].atomic && !mb->atomic_ok) {
        fprintf(stderr, "%s: the device has no atomics (atomic_cap NONE)\n", mb->prog);
        return 1;
    }
    mb->access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                 (mb->atomic_ok ? IBV_ACCESS_REMOTE_ATOMIC : 0);
    if (mb->dev.max_qp > 0 && mb->nqps > (uint32_t)mb->dev.max_qp) {
        fprintf(stderr, "%s: %u QPs exceed the device's max_qp %d\n", mb->prog, mb->nqps,
                mb->dev.max_qp);
        return 1;
    }
    uint32_t need = mb->depth > mb->rq_depth ? mb->depth : mb->rq_depth;
    if (mb->dev.max_qp_wr > 0 && need > (uint32_t)mb->dev.max_qp_wr) {
        fprintf(stderr, "%s: queue depth %u exceeds the device's max_qp_wr %d\n", mb->prog, need,
                mb->dev.max_qp_wr);
        return 1;
    }
    mb->conn.pd = ibv_alloc_pd(c->ctx);
    if (!mb->conn.pd) {
        fprintf(stderr, "%s: ibv_alloc_pd: %s\n", mb->prog, strerror(errno));
        return 1;
    }
    return 0;
}

/* The CQ and nqps QPs (state RESET).  One CQ: a client never receives, the
 * server never sends. */
static int mb_create_qps(struct mb *mb, uint64_t cqe, uint32_t max_send_wr, uint32_t max_recv_wr,
                         uint32_t want_inline)
{
    if (mb->dev.max_cqe > 0 && cqe > (uint64_t)mb->dev.max_cqe) {
        fprintf(stderr, "%s: a CQ of %" PRIu64 " entries exceeds the device's max_cqe %d\n",
                mb->prog, cqe, mb->dev.max_cqe);
        return 1;
    }
    mb->cq = ibv_create_cq(mb->conn.ctx, (int)cqe, NULL, NULL, 0);
    if (!mb->cq) {
        fprintf(stderr, "%s: ibv_create_cq(%" PRIu64 "): %s\n", mb->prog, cqe, strerror(errno));
        return 1;
    }
    mb->qps = calloc(mb->nqps, sizeof(*mb->qps));
    mb->peer_qpn = calloc(mb->nqps, sizeof(*mb->peer_qpn));
    if (!mb->qps || !mb->peer_qpn) {
        fprintf(stderr, "%s: out of memory for %u QPs\n", mb->prog, mb->nqps);
        return 1;
    }
    for (uint32_t i = 0; i < mb->nqps; i++) {
        struct ibv_qp_init_attr ia = {
            .send_cq = mb->cq,
            .recv_cq = mb->cq,
            .cap = {.max_send_wr = max_send_wr,
                    .max_recv_wr = max_recv_wr,
                    .max_send_sge = 1,
                    .max_recv_sge = 1,
                    .max_inline_data = want_inline},
            .qp_type = IBV_QPT_RC,
        };
        mb->qps[i] = ibv_create_qp(mb->conn.pd, &ia);
        if (!mb->qps[i]) {
            fprintf(stderr, "%s: ibv_create_qp #%u of %u: %s\n", mb->prog, i, mb->nqps,
                    strerror(errno));
            return 1;
        }
        if (i == 0)
            mb->max_inline = ia.cap.max_inline_data;
    }
    return 0;
}

/* RESET -> INIT -> RTR -> RTS of every QP against peer_qpn[], through
 * rc_conn_connect (the conn struct lends its port, MTU and peer address). */
static int mb_connect_all(struct mb *mb, const uint8_t peer_gid[16], uint16_t peer_lid,
                          enum rc_conn_role peer_role)
{
    struct rc_conn *c = &mb->conn;
    memcpy(c->peer.gid, peer_gid, 16);
    c->peer.lid = peer_lid;
    int rc = 0;
    for (uint32_t i = 0; i < mb->nqps && rc == 0; i++) {
        c->qp = mb->qps[i];
        c->local.psn = mb_psn(mb->qps[i]->qp_num, mb->o.role);
        c->peer.qpn = mb->peer_qpn[i];
        c->peer.psn = mb_psn(mb->peer_qpn[i], peer_role);
        rc = rc_conn_connect(c, mb->access, mb->rd_atomic) ? 1 : 0;
    }
    c->qp = NULL; /* the QPs are ours, not rc_conn_close's */
    return rc;
}

/* Server target: host memory registered as one MR, or device memory
 * registered zero-based.  target_bytes is rounded up to 64. */
static int mb_server_target(struct mb *mb)
{
    uint64_t bytes = (mb->span + 63) & ~(uint64_t)63;
    mb->target_bytes = bytes;
    void *mem = NULL;
    if (posix_memalign(&mem, 4096, (size_t)bytes) != 0) {
        fprintf(stderr, "%s: cannot allocate %" PRIu64 " bytes\n", mb->prog, bytes);
        return 1;
    }
    mb->target = mem;
    memset(mb->target, 0, (size_t)bytes);
    if (mb->o.test == MB_READ)
        for (uint64_t x = 0; x < bytes; x++)
            mb->target[x] = mb_pattern(x);
    if (mb->o.target == MB_HOST) {
        mb->target_mr = ibv_reg_mr(mb->conn.pd, mb->target, (size_t)bytes, mb->access);
        if (!mb->target_mr) {
            fprintf(stderr, "%s: ibv_reg_mr(%" PRIu64 " bytes): %s\n", mb->prog, bytes,
                    strerror(errno));
            return 1;
        }
        return 0;
    }
    struct ibv_alloc_dm_attr da = {.length = (size_t)bytes, .log_align_req = 6};
    mb->dm = ibv_alloc_dm(mb->conn.ctx, &da);
    if (!mb->dm) {
        int e = errno;
        fprintf(stderr, "%s: ibv_alloc_dm(%" PRIu64 " bytes): %s (errno %d)\n", mb->prog, bytes,
                strerror(e), e);
        return 1;
    }
    int err = ibv_memcpy_to_dm(mb->dm, 0, mb->target, (size_t)bytes);
    if (err) {
        fprintf(stderr, "%s: ibv_memcpy_to_dm: %s (%d)\n", mb->prog, strerror(err), err);
        return 1;
    }
    mb->target_mr = ibv_reg_dm_mr(mb->conn.pd, mb->dm, 0, (size_t)bytes,
                                  (unsigned)mb->access | IBV_ACCESS_ZERO_BASED);
    if (!mb->target_mr) {
        int e = errno;
        fprintf(stderr, "%s: ibv_reg_dm_mr(%" PRIu64 " bytes): %s (errno %d)\n", mb->prog, bytes,
                strerror(e), e);
        return 1;
    }
    return 0;
}

/* Copy target bytes [off, off+len) into dst (device memory: read back). */
static int mb_read_target(struct mb *mb, uint64_t off, void *dst, size_t len)
{
    if (!mb->dm) {
        memcpy(dst, mb->target + off, len);
        return 0;
    }
    int err = ibv_memcpy_from_dm(dst, mb->dm, off, len);
    if (err) {
        fprintf(stderr, "%s: ibv_memcpy_from_dm: %s (%d)\n", mb->prog, strerror(err), err);
        return 1;
    }
    return 0;
}

static void mb_close(struct mb *mb)
{
    for (uint32_t i = 0; mb->qps && i < mb->nqps; i++)
        if (mb->qps[i])
            ibv_destroy_qp(mb->qps[i]);
    if (mb->cq)
        ibv_destroy_cq(mb->cq);
    if (mb->target_mr)
        ibv_dereg_mr(mb->target_mr);
    if (mb->dm)
        ibv_free_dm(mb->dm);
    rc_conn_close(&mb->conn); /* client MR, PD, device, client buffer */
    free(mb->qps);
    free(mb->peer_qpn);
    free(mb->target);
    free(mb->flow);
    free(mb->post_ns);
    free(mb->cas_expect);
    free(mb->sge);
    free(mb->wr);
}

/* ------------------------------------------------------------ completions */

static int mb_wc_check(struct mb *mb, const struct ibv_wc *wc)
{
    if (wc->status == IBV_WC_SUCCESS)
        return 0;
    fprintf(stderr, "%s: completion failed on QP 0x%x: %s (status %d, vendor 0x%x)\n", mb->prog,
            wc->qp_num, ibv_wc_status_str(wc->status), (int)wc->status, wc->vendor_err);
    return 1;
}

/* Blocking poll: at least one completion into wc[]; returns the count or
 * -1 after printing why. */
static int mb_poll(struct mb *mb, struct ibv_wc *wc)
{
    int n;
    do {
        n = ibv_poll_cq(mb->cq, MB_POLL_BATCH, wc);
    } while (n == 0);
    if (n < 0)
        fprintf(stderr, "%s: ibv_poll_cq failed\n", mb->prog);
    return n;
}

/* ------------------------------------------------------------ client */

/* Atomic WR (q, seq) is done: check / account its fetched value. */
static int mb_atomic_done(struct mb *mb, uint32_t q, uint64_t seq)
{
    uint64_t slot = (uint64_t)q * mb->depth + seq % mb->depth;
    uint64_t got;
    memcpy(&got, mb->conn.buf + mb->fetch_off + slot * 8, 8);
    uint64_t limit = mb->o.clients * (mb->o.warmup + mb->o.iters);
    if (mb->o.test == MB_FAA) {
        if (got >= limit) {
            fprintf(stderr,
                    "%s: VERIFY FAILED: FETCH_AND_ADD returned %" PRIu64 ", but only %" PRIu64
                    " adds are made in all\n",
                    mb->prog, got, limit);
            return 2;
        }
        return 0;
    }
    uint64_t expect = mb->cas_expect[slot];
    uint64_t seen = got;
    if (got == expect) { /* swapped: the counter is now expect + 1 */
        mb->cas_successes++;
        seen = expect + 1;
    }
    if (seen > mb->cas_last_seen)
        mb->cas_last_seen = seen;
    return 0;
}

/* Retire everything one completion covers. */
static int mb_client_wc(struct mb *mb, const struct ibv_wc *wc, bool timed)
{
    if (mb_wc_check(mb, wc))
        return 1;
    uint32_t q = (uint32_t)(wc->wr_id >> MB_WRID_QP_SHIFT);
    uint64_t seq = wc->wr_id & ((1ull << MB_WRID_QP_SHIFT) - 1);
    if (q >= mb->nqps) {
        fprintf(stderr, "%s: completion with unknown wr_id 0x%" PRIx64 "\n", mb->prog, wc->wr_id);
        return 1;
    }
    struct mb_qp_flow *f = &mb->flow[q];
    if (seq <= f->completed || seq > f->posted) {
        fprintf(stderr,
                "%s: completion of QP %u seq %" PRIu64 " out of order (done %" PRIu64
                ", posted %" PRIu64 ")\n",
                mb->prog, q, seq, f->completed, f->posted);
        return 1;
    }
    if (mb_tests[mb->o.test].atomic)
        for (uint64_t s = f->completed + 1; s <= seq; s++) {
            int rc = mb_atomic_done(mb, q, s);
            if (rc)
                return rc;
        }
    if (timed) {
        mb->lat_sum_ns += host_now_ns() - mb->post_ns[(uint64_t)q * mb->depth + seq % mb->depth];
        mb->lat_count++;
    }
    mb->inflight -= seq - f->completed;
    f->completed = seq;
    return 0;
}

static int mb_client_poll(struct mb *mb, bool timed)
{
    struct ibv_wc wc[MB_POLL_BATCH];
    int n = mb_poll(mb, wc);
    if (n < 0)
        return 1;
    for (int i = 0; i < n; i++) {
        int rc = mb_client_wc(mb, &wc[i], timed);
        if (rc)
            return rc;
    }
    return 0;
}

/* One phase (warmup or timed) of n operations.  Batches of P WRs go to the
 * QPs round robin, B batches in a row to each (--burst: a program that
 * posts all of one QP's WRs, then the next QP's); with --rounds every WR of
 * a round (B batches to each of the N QPs) completes before the next round
 * starts (a program that posts to all its QPs, then polls each of them).
 * A WR is signaled when its per-QP sequence is a multiple of C, when the
 * next batch would not fit its QP or the client's window (so every wait
 * has a signaled WR to wait for), when it ends its QP's burst of a round
 * (--rounds), or when it is the last WR its QP gets in the phase. */
static int mb_client_phase(struct mb *mb, uint64_t n, bool timed)
{
    const struct mb_test_info *t = &mb_tests[mb->o.test];
    uint64_t P = mb->o.post_list, N = mb->nqps, M = mb->o.outstanding, D = mb->depth;
    uint64_t B = mb->o.burst;
    struct ibv_sge *sge = mb->sge;
    struct ibv_send_wr *wr = mb->wr;
    uint64_t k = 0;
    for (uint64_t b = 0; k < n; b++) {
        uint32_t q = (uint32_t)(b / B % N);
        /* the batch this QP gets next: the next one, or after the others' bursts */
        uint64_t b_next = b % B == B - 1 ? b + (N - 1) * B + 1 : b + 1;
        uint64_t p = n - k < P ? n - k : P;
        struct mb_qp_flow *f = &mb->flow[q];
        bool round_start = mb->o.rounds && b > 0 && b % (B * N) == 0;
        while (f->posted - f->completed + p > D || mb->inflight + p > M ||
               (round_start && mb->inflight > 0)) {
            int rc = mb_client_poll(mb, timed);
            if (rc)
                return rc;
        }
        uint64_t now = host_now_ns();
        if (timed && k == 0)
            mb->res.start_ns = now;
        for (uint64_t j = 0; j < p; j++) {
            uint64_t seq = f->posted + 1 + j;
            uint64_t slot = (uint64_t)q * D + seq % D;
            uint64_t qp_after = f->posted - f->completed + j + 1;
            uint64_t all_after = mb->inflight + j + 1;
            bool last_on_qp = j == p - 1 && b_next * P >= n;
            /* the wait before the next batch needs a signalled WR to wait
             * for: the last of this batch (RC completes in order) */
            bool batch_end = j == p - 1;
            bool round_end = mb->o.rounds && batch_end && b % B == B - 1;
            bool sig = seq % mb->o.signal_every == 0 ||
                       (batch_end && (qp_after + P > D || all_after + P > M)) || last_on_qp ||
                       round_end;
            uint64_t raddr = mb_walk(mb, mb->walk_k++, mb->o.id, mb->o.clients, &mb->rng);
            mb->last_addr = raddr;
            struct ibv_sge *s = &sge[j];
            struct ibv_send_wr *w = &wr[j];
            memset(w, 0, sizeof(*w));
            s->lkey = mb->conn.mr->lkey;
            s->length = (uint32_t)mb->o.size;
            s->addr = (uint64_t)(uintptr_t)mb->conn.buf;
            if (t->remote_addr) {
                s->addr += raddr % MB_PATTERN_PERIOD; /* pattern of this offset */
                w->wr.rdma.remote_addr = mb->conn.peer.addr + raddr;
                w->wr.rdma.rkey = mb->conn.peer.rkey;
            }
            if (t->atomic) {
                s->addr = (uint64_t)(uintptr_t)(mb->conn.buf + mb->fetch_off + slot * 8);
                w->wr.atomic.remote_addr = mb->conn.peer.addr;
                w->wr.atomic.rkey = mb->conn.peer.rkey;
                if (mb->o.test == MB_FAA) {
                    w->wr.atomic.compare_add = 1;
                } else {
                    mb->cas_expect[slot] = mb->cas_last_seen;
                    w->wr.atomic.compare_add = mb->cas_last_seen;
                    w->wr.atomic.swap = mb->cas_last_seen + 1;
                }
            }
            w->wr_id = (uint64_t)q << MB_WRID_QP_SHIFT | seq;
            w->sg_list = s;
            w->num_sge = 1;
            w->opcode = t->opcode;
            w->send_flags =
                (sig ? IBV_SEND_SIGNALED : 0) | (mb->o.inline_data ? IBV_SEND_INLINE : 0);
            w->next = j + 1 < p ? &wr[j + 1] : NULL;
            mb->post_ns[slot] = now;
        }
        struct ibv_send_wr *bad = NULL;
        int err = ibv_post_send(mb->qps[q], wr, &bad);
        if (err) {
            fprintf(stderr, "%s: ibv_post_send (QP %u, %" PRIu64 " WRs): %s\n", mb->prog, q, p,
                    strerror(err));
            return 1;
        }
        f->posted += p;
        mb->inflight += p;
        k += p;
    }
    while (mb->inflight > 0) {
        int rc = mb_client_poll(mb, timed);
        if (rc)
            return rc;
    }
    if (timed)
        mb->res.end_ns = host_now_ns();
    return 0;
}

/* read: every byte of the landing area is the pattern or untouched (0),
 * and the last operation's bytes are all there. */
static int mb_client_verify(struct mb *mb)
{
    if (mb->o.test != MB_READ)
        return 0;
    const uint8_t *p = mb->conn.buf;
    uint64_t last = mb->last_addr % MB_PATTERN_PERIOD;
    for (uint64_t j = 0; j < mb->data_bytes; j++) {
        uint8_t want = mb_pattern(j);
        bool in_last = j >= last && j < last + mb->o.size;
        if (p[j] != want && (in_last || p[j] != 0)) {
            fprintf(stderr,
                    "%s: VERIFY FAILED: read landing byte %" PRIu64 " is 0x%02x, expected 0x%02x\n",
                    mb->prog, j, p[j], want);
            return 2;
        }
    }
    return 0;
}

static int mb_client_setup(struct mb *mb)
{
    struct rc_conn *c = &mb->conn;
    uint64_t N = mb->o.qps, M = mb->o.outstanding;
    mb->nqps = (uint32_t)N;
    mb->depth = (uint32_t)(mb->o.depth ? mb->o.depth : (M + N - 1) / N);
    if (mb->depth < mb->o.post_list)
        mb->depth = (uint32_t)mb->o.post_list;
    mb->rng = mb_seed(mb->o.id);
    int rc = mb_open(mb);
    if (rc)
        return rc;
    /* Buffer: the pattern area (source of writes and sends, landing area
     * of reads), then 8 bytes per (QP, slot) for fetched atomics. */
    mb->data_bytes = MB_PATTERN_PERIOD + mb->o.size;
    mb->fetch_off = (mb->data_bytes + 63) & ~(uint64_t)63;
    uint64_t fetch_bytes = mb_tests[mb->o.test].atomic ? N * mb->depth * 8 : 0;
    if (rc_conn_alloc_buf(c, (size_t)(mb->fetch_off + fetch_bytes)))
        return 1;
    if (mb->o.test != MB_READ)
        for (uint64_t j = 0; j < mb->data_bytes; j++)
            c->buf[j] = mb_pattern(j);
    c->mr = ibv_reg_mr(c->pd, c->buf, c->buf_bytes, mb->access);
    if (!c->mr) {
        fprintf(stderr, "%s: ibv_reg_mr: %s\n", mb->prog, strerror(errno));
        return 1;
    }
    mb->flow = calloc(N, sizeof(*mb->flow));
    mb->post_ns = calloc(N * mb->depth, sizeof(*mb->post_ns));
    mb->cas_expect = calloc(N * mb->depth, sizeof(*mb->cas_expect));
    mb->sge = calloc(mb->o.post_list, sizeof(*mb->sge));
    mb->wr = calloc(mb->o.post_list, sizeof(*mb->wr));
    if (!mb->flow || !mb->post_ns || !mb->cas_expect || !mb->sge || !mb->wr) {
        fprintf(stderr, "%s: out of memory\n", mb->prog);
        return 1;
    }
    uint32_t want_inline = mb->o.inline_data ? (uint32_t)mb->o.size : 0;
    rc = mb_create_qps(mb, M + 1, mb->depth, 1, want_inline);
    if (rc)
        return rc;
    if (mb->o.inline_data && mb->max_inline < mb->o.size) {
        fprintf(stderr, "%s: --inline: the QP inlines %u bytes, less than --size=%" PRIu64 "\n",
                mb->prog, mb->max_inline, mb->o.size);
        return 2;
    }
    return 0;
}

/* Server info ("<name>/server", 64 bytes): opts_hash@0 lid@4 atomic_ok@6
 * status@7 rkey@8 gid@16 addr@32 span@40.  Client info ("<name>/client/<i>",
 * 32 bytes): opts_hash@0 lid@4 status@6 nqps@8 id@12 gid@16.  QPN arrays
 * ("<name>/client/<i>/qpn", "<name>/server/qpn/<i>"): N x 4 bytes.  Both
 * sides publish theirs even after a failed set-up (status != 0), so the
 * peers stop cleanly instead of waiting forever. */
static int mb_put_qpns(struct mb *mb, const char *key, struct ibv_qp **qps, uint32_t n)
{
    uint8_t *w = calloc(n, 4);
    if (!w)
        return 1;
    for (uint32_t i = 0; qps && i < n; i++)
        rc_conn_put_le(w + 4 * (size_t)i, qps[i] ? qps[i]->qp_num : 0, 4);
    int rc = mb_put(mb, key, w, 4 * (size_t)n) ? 1 : 0;
    free(w);
    return rc;
}

static int mb_get_qpns(struct mb *mb, const char *key, uint32_t *out, uint32_t n)
{
    uint8_t *w = malloc(4 * (size_t)n);
    if (!w)
        return 1;
    int rc = mb_get(mb, key, w, 4 * (size_t)n) ? 1 : 0;
    for (uint32_t i = 0; rc == 0 && i < n; i++)
        out[i] = (uint32_t)rc_conn_get_le(w + 4 * (size_t)i, 4);
    free(w);
    return rc;
}

static int mb_client_exchange(struct mb *mb, int status)
{
    struct rc_conn *c = &mb->conn;
    char key[MB_KEY_MAX];
    uint8_t w[MB_CLIENT_HDR_BYTES] = {0};
    uint32_t N = (uint32_t)mb->o.qps;
    rc_conn_put_le(w + 0, mb_opts_hash(&mb->o), 4);
    rc_conn_put_le(w + 4, c->port.lid, 2);
    w[6] = (uint8_t)status;
    rc_conn_put_le(w + 8, N, 4);
    rc_conn_put_le(w + 12, mb->o.id, 4);
    memcpy(w + 16, c->gid.raw, 16);
    snprintf(key, sizeof(key), "%s/client/%" PRIu64 "/qpn", mb->o.name, mb->o.id);
    if (mb_put_qpns(mb, key, mb->qps, N))
        return 1;
    snprintf(key, sizeof(key), "%s/client/%" PRIu64, mb->o.name, mb->o.id);
    if (mb_put(mb, key, w, sizeof(w)))
        return 1;
    uint8_t s[MB_SERVER_INFO_BYTES];
    snprintf(key, sizeof(key), "%s/server", mb->o.name);
    if (mb_get(mb, key, s, sizeof(s)))
        return 1;
    if (s[7]) {
        fprintf(stderr, "%s: the server failed to set up (status %d)\n", mb->prog, s[7]);
        mb->server_failed = true;
        return 1;
    }
    if (status)
        return status;
    if ((uint32_t)rc_conn_get_le(s, 4) != mb_opts_hash(&mb->o)) {
        fprintf(stderr, "%s: the server and this client were given different options\n", mb->prog);
        return 2;
    }
    c->peer.lid = (uint16_t)rc_conn_get_le(s + 4, 2);
    c->peer.rkey = (uint32_t)rc_conn_get_le(s + 8, 4);
    memcpy(c->peer.gid, s + 16, 16);
    c->peer.addr = rc_conn_get_le(s + 32, 8);
    c->peer.buf_bytes = rc_conn_get_le(s + 40, 8);
    snprintf(key, sizeof(key), "%s/server/qpn/%" PRIu64, mb->o.name, mb->o.id);
    if (mb_get_qpns(mb, key, mb->peer_qpn, N))
        return 1;
    return mb_connect_all(mb, c->peer.gid, c->peer.lid, RC_CONN_ROLE_SERVER);
}

static void mb_client_report(struct mb *mb)
{
    const struct mb_result *r = &mb->res;
    double ns = r->end_ns > r->start_ns ? (double)(r->end_ns - r->start_ns) : 1.0;
    double mops = (double)r->ops * 1e3 / ns;
    double gbps = (double)r->ops * (double)mb->o.size * 8.0 / ns;
    double lat = r->lat_count ? (double)r->lat_sum_ns / ((double)r->lat_count * 1e3) : 0.0;
    struct host_kv kv[] = {
        {"id", (double)mb->o.id},
        {"qps", (double)mb->o.qps},
        {"size_bytes", (double)mb->o.size},
        {"ops", (double)r->ops},
        {"mops", mops},
        {"gbps", gbps},
        {"avg_lat_us", lat},
        {"cas_successes", (double)mb->cas_successes},
    };
    host_report("microbench_client", kv, sizeof(kv) / sizeof(kv[0]));
    printf("%s client %" PRIu64 ": %s %" PRIu64 " B x %" PRIu64 " ops over %" PRIu64
           " QPs: %.4f Mops, %.3f Gb/s, avg latency %.3f us\n",
           mb->prog, mb->o.id, mb_tests[mb->o.test].name, mb->o.size, r->ops, mb->o.qps, mops, gbps,
           lat);
}

static int mb_client_main(struct mb *mb)
{
    char key[MB_KEY_MAX];
    int rc = mb_client_setup(mb);
    rc = mb_client_exchange(mb, rc);
    if (mb->server_failed)
        return rc;                /* the server does not wait for a barrier */
    int all = mb_barrier(mb, rc); /* 1: every QP is RTS */
    if (all)
        return rc ? rc : all;
    rc = mb_client_phase(mb, mb->o.warmup, false);
    all = mb_barrier(mb, rc); /* 2: warm */
    if (all)
        return rc ? rc : all;
    rc = mb_client_phase(mb, mb->o.iters, true);
    if (rc == 0)
        rc = mb_client_verify(mb);
    mb->res.ops = mb->o.iters;
    mb->res.lat_sum_ns = mb->lat_sum_ns;
    mb->res.lat_count = mb->lat_count;
    mb->res.cas_successes = mb->cas_successes;
    uint8_t w[MB_RESULT_BYTES] = {0};
    const uint64_t *fields[] = {&mb->res.ops,        &mb->res.start_ns,  &mb->res.end_ns,
                                &mb->res.lat_sum_ns, &mb->res.lat_count, &mb->res.cas_successes};
    for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++)
        rc_conn_put_le(w + 8 * i, *fields[i], 8);
    snprintf(key, sizeof(key), "%s/result/%" PRIu64, mb->o.name, mb->o.id);
    if (rc == 0 && mb_put(mb, key, w, sizeof(w)))
        rc = 1;
    all = mb_barrier(mb, rc); /* 3: every client done */
    if (all)
        return rc ? rc : all;
    all = mb_barrier(mb, 0); /* 4: the server verified */
    if (all)
        return all;
    mb_client_report(mb);
    return 0;
}

/* ------------------------------------------------------------ server */

/* Post receive #k of the walk on QP q (send test). */
static int mb_post_recv(struct mb *mb, uint32_t q)
{
    uint64_t off = mb_walk(mb, mb->recv_walk_k++, 0, 1, &mb->recv_rng);
    struct ibv_sge sge = {.addr = (mb->dm ? 0 : (uint64_t)(uintptr_t)mb->target) + off,
                          .length = (uint32_t)mb->o.size,
                          .lkey = mb->target_mr->lkey};
    struct ibv_recv_wr wr = {.wr_id = (uint64_t)q << MB_WRID_QP_SHIFT | (off / mb->stride),
                             .sg_list = &sge,
                             .num_sge = 1},
                       *bad = NULL;
    int err = ibv_post_recv(mb->qps[q], &wr, &bad);
    if (err) {
        fprintf(stderr, "%s: ibv_post_recv (QP %u): %s\n", mb->prog, q, strerror(err));
        return 1;
    }
    return 0;
}

/* Send test: receive `total` messages, checking each length and a sample
 * of the contents (a SEND carries the pattern from offset 0), reposting. */
static int mb_server_receive(struct mb *mb, uint64_t total, uint64_t *received)
{
    struct ibv_wc wc[MB_POLL_BATCH];
    uint8_t *tmp = mb->dm ? malloc((size_t)mb->o.size) : NULL;
    if (mb->dm && !tmp)
        return 1;
    int rc = 0;
    while (rc == 0 && *received < total) {
        int n = mb_poll(mb, wc);
        if (n < 0) {
            rc = 1;
            break;
        }
        for (int i = 0; i < n && rc == 0; i++) {
            if ((rc = mb_wc_check(mb, &wc[i])) != 0)
                break;
            uint32_t q = (uint32_t)(wc[i].wr_id >> MB_WRID_QP_SHIFT);
            uint64_t off = (wc[i].wr_id & ((1ull << MB_WRID_QP_SHIFT) - 1)) * mb->stride;
            if (wc[i].opcode != IBV_WC_RECV || wc[i].byte_len != mb->o.size || q >= mb->nqps) {
                fprintf(stderr,
                        "%s: VERIFY FAILED: receive completion opcode %d, %u bytes (expected "
                        "%" PRIu64 ")\n",
                        mb->prog, (int)wc[i].opcode, wc[i].byte_len, mb->o.size);
                rc = 2;
                break;
            }
            if ((*received)++ % MB_RECV_VERIFY_EVERY == 0) {
                const uint8_t *p = mb->target + off;
                if (mb->dm) {
                    if ((rc = mb_read_target(mb, off, tmp, (size_t)mb->o.size)) != 0)
                        break;
                    p = tmp;
                }
                for (uint64_t j = 0; j < mb->o.size; j++)
                    if (p[j] != mb_pattern(j)) {
                        fprintf(stderr,
                                "%s: VERIFY FAILED: received message byte %" PRIu64
                                " is 0x%02x, expected 0x%02x\n",
                                mb->prog, j, p[j], mb_pattern(j));
                        rc = 2;
                        break;
                    }
                mb->recv_checked++;
            }
            if (rc == 0)
                rc = mb_post_recv(mb, q);
        }
    }
    free(tmp);
    return rc;
}

/* After every client finished: the counter (atomics) or a sample of every
 * client's written regions (write). */
static int mb_server_verify(struct mb *mb, uint64_t cas_successes)
{
    if (mb_tests[mb->o.test].atomic) {
        uint64_t got;
        if (mb_read_target(mb, 0, &got, 8))
            return 1;
        uint64_t want =
            mb->o.test == MB_FAA ? mb->o.clients * (mb->o.warmup + mb->o.iters) : cas_successes;
        if (got != want) {
            fprintf(stderr, "%s: VERIFY FAILED: %s counter is %" PRIu64 ", expected %" PRIu64 "\n",
                    mb->prog, mb_tests[mb->o.test].name, got, want);
            return 2;
        }
        printf("%s server: %s counter %" PRIu64 " verified\n", mb->prog, mb_tests[mb->o.test].name,
               got);
        return 0;
    }
    if (mb->o.test != MB_WRITE)
        return 0;
    uint64_t total = mb->o.warmup + mb->o.iters;
    uint64_t step = total > MB_VERIFY_SAMPLES ? total / MB_VERIFY_SAMPLES : 1;
    uint8_t *tmp = malloc((size_t)mb->o.size);
    if (!tmp)
        return 1;
    int rc = 0;
    uint64_t checked = 0;
    for (uint64_t c = 0; c < mb->o.clients && rc == 0; c++) {
        uint64_t rng = mb_seed(c);
        for (uint64_t k = 0; k < total && rc == 0; k++) {
            uint64_t off = mb_walk(mb, k, c, mb->o.clients, &rng);
            if (k % step != 0 && k != total - 1)
                continue;
            if ((rc = mb_read_target(mb, off, tmp, (size_t)mb->o.size)) != 0)
                break;
            for (uint64_t j = 0; j < mb->o.size; j++)
                if (tmp[j] != mb_pattern(off + j)) {
                    fprintf(stderr,
                            "%s: VERIFY FAILED: client %" PRIu64 " operation %" PRIu64
                            " (offset %" PRIu64 "): byte %" PRIu64 " is 0x%02x, expected 0x%02x\n",
                            mb->prog, c, k, off, j, tmp[j], mb_pattern(off + j));
                    rc = 2;
                    break;
                }
            checked++;
        }
    }
    free(tmp);
    if (rc == 0)
        printf("%s server: %" PRIu64 " written regions verified\n", mb->prog, checked);
    return rc;
}

static int mb_server_setup(struct mb *mb)
{
    uint64_t N = mb->o.qps, K = mb->o.clients;
    uint64_t D = mb->o.depth ? mb->o.depth : (mb->o.outstanding + N - 1) / N;
    if (D < mb->o.post_list)
        D = mb->o.post_list;
    mb->nqps = (uint32_t)(N * K);
    mb->depth = (uint32_t)D;
    /* A client has at most D SENDs in flight per QP; twice that many
     * receives let it reuse them before we repost (no RNR NAK). */
    mb->rq_depth = mb->o.test == MB_SEND ? (uint32_t)(2 * D) : 1;
    mb->recv_rng = mb_seed(K); /* not any client's seed */
    int rc = mb_open(mb);
    if (rc)
        return rc;
    if ((rc = mb_server_target(mb)) != 0)
        return rc;
    uint64_t cqe = mb->o.test == MB_SEND ? (uint64_t)mb->nqps * mb->rq_depth : 1;
    return mb_create_qps(mb, cqe, 1, mb->rq_depth, 0);
}

static int mb_server_exchange(struct mb *mb, int status)
{
    struct rc_conn *c = &mb->conn;
    char key[MB_KEY_MAX];
    uint32_t N = (uint32_t)mb->o.qps;
    uint8_t s[MB_SERVER_INFO_BYTES] = {0};
    rc_conn_put_le(s + 0, mb_opts_hash(&mb->o), 4);
    rc_conn_put_le(s + 4, c->port.lid, 2);
    s[6] = mb->atomic_ok;
    s[7] = (uint8_t)status;
    rc_conn_put_le(s + 8, mb->target_mr ? mb->target_mr->rkey : 0, 4);
    memcpy(s + 16, c->gid.raw, 16);
    /* zero-based device memory: remote addresses are offsets */
    rc_conn_put_le(s + 32, mb->dm ? 0 : (uint64_t)(uintptr_t)mb->target, 8);
    rc_conn_put_le(s + 40, mb->span, 8);
    for (uint64_t i = 0; i < mb->o.clients; i++) {
        snprintf(key, sizeof(key), "%s/server/qpn/%" PRIu64, mb->o.name, i);
        if (mb_put_qpns(mb, key, mb->qps ? mb->qps + i * N : NULL, N))
            return 1;
    }
    snprintf(key, sizeof(key), "%s/server", mb->o.name);
    if (mb_put(mb, key, s, sizeof(s)))
        return 1;
    if (status)
        return status; /* published: the clients stop without a barrier */
    int rc = status;
    for (uint64_t i = 0; i < mb->o.clients; i++) {
        uint8_t w[MB_CLIENT_HDR_BYTES];
        snprintf(key, sizeof(key), "%s/client/%" PRIu64, mb->o.name, i);
        if (mb_get(mb, key, w, sizeof(w)))
            return 1;
        if (rc)
            continue; /* collect every client's info, then fail */
        if (w[6]) {
            fprintf(stderr, "%s: client %" PRIu64 " failed to set up (status %d)\n", mb->prog, i,
                    w[6]);
            rc = 1;
            continue;
        }
        if ((uint32_t)rc_conn_get_le(w, 4) != mb_opts_hash(&mb->o)) {
            fprintf(stderr, "%s: client %" PRIu64 " was given different options\n", mb->prog, i);
            rc = 2;
            continue;
        }
        uint16_t lid = (uint16_t)rc_conn_get_le(w + 4, 2);
        snprintf(key, sizeof(key), "%s/client/%" PRIu64 "/qpn", mb->o.name, i);
        if (mb_get_qpns(mb, key, mb->peer_qpn + i * N, N))
            return 1;
        /* connect this client's QPs now: each client has its own GID and LID */
        struct ibv_qp **all = mb->qps;
        uint32_t *peers = mb->peer_qpn, nall = mb->nqps;
        mb->qps = all + i * N;
        mb->peer_qpn = peers + i * N;
        mb->nqps = N;
        rc = mb_connect_all(mb, w + 16, lid, RC_CONN_ROLE_CLIENT);
        mb->qps = all;
        mb->peer_qpn = peers;
        mb->nqps = nall;
    }
    for (uint32_t q = 0; rc == 0 && q < mb->nqps && mb->o.test == MB_SEND; q++)
        for (uint32_t r = 0; r < mb->rq_depth && rc == 0; r++)
            rc = mb_post_recv(mb, q);
    return rc;
}

static void mb_server_report(struct mb *mb, const struct mb_result *r, uint64_t n)
{
    uint64_t start = UINT64_MAX, end = 0, ops = 0, lat_sum = 0, lat_n = 0;
    for (uint64_t i = 0; i < n; i++) {
        start = r[i].start_ns < start ? r[i].start_ns : start;
        end = r[i].end_ns > end ? r[i].end_ns : end;
        ops += r[i].ops;
        lat_sum += r[i].lat_sum_ns;
        lat_n += r[i].lat_count;
    }
    double ns = end > start ? (double)(end - start) : 1.0;
    double mops = (double)ops * 1e3 / ns;
    double gbps = (double)ops * (double)mb->o.size * 8.0 / ns;
    double lat = lat_n ? (double)lat_sum / ((double)lat_n * 1e3) : 0.0;
    struct host_kv kv[] = {
        {"clients", (double)mb->o.clients},
        {"qps", (double)mb->o.qps},
        {"size_bytes", (double)mb->o.size},
        {"post_list", (double)mb->o.post_list},
        {"outstanding", (double)mb->o.outstanding},
        {"working_set_bytes", (double)mb->o.working_set},
        {"target_dm", mb->o.target == MB_DM ? 1.0 : 0.0},
        {"ops", (double)ops},
        {"mops", mops},
        {"gbps", gbps},
        {"avg_lat_us", lat},
        {"depth", (double)mb->depth},
        {"signal_every", (double)mb->o.signal_every},
        {"span_us", ns / 1e3},
    };
    host_report("microbench", kv, sizeof(kv) / sizeof(kv[0]));
    printf("%s server: %s %" PRIu64 " B, %" PRIu64 " clients x %" PRIu64 " QPs, %" PRIu64
           " outstanding, post list %" PRIu64 ", working set %" PRIu64 " B (%s): %" PRIu64
           " ops, %.4f Mops, %.3f Gb/s, avg latency %.3f us\n",
           mb->prog, mb_tests[mb->o.test].name, mb->o.size, mb->o.clients, mb->o.qps,
           mb->o.outstanding, mb->o.post_list, mb->o.working_set, mb_target_names[mb->o.target],
           ops, mops, gbps, lat);
}

static int mb_server_main(struct mb *mb)
{
    char key[MB_KEY_MAX];
    uint64_t K = mb->o.clients, received = 0;
    int rc = mb_server_setup(mb);
    if (rc && mb->no_device)
        return rc; /* no client can be served (real hardware only) */
    if (rc) {      /* publish the failure: the clients stop without a barrier */
        mb_server_exchange(mb, rc);
        return rc;
    }
    rc = mb_server_exchange(mb, 0);
    int all = mb_barrier(mb, rc); /* 1: every QP is RTS */
    if (all)
        return rc ? rc : all;
    if (mb->o.test == MB_SEND)
        rc = mb_server_receive(mb, K * mb->o.warmup, &received);
    all = mb_barrier(mb, rc); /* 2: warm */
    if (all)
        return rc ? rc : all;
    if (mb->o.test == MB_SEND)
        rc = mb_server_receive(mb, K * (mb->o.warmup + mb->o.iters), &received);
    all = mb_barrier(mb, rc); /* 3: every client done */
    if (all)
        return rc ? rc : all;
    struct mb_result *res = calloc(K, sizeof(*res));
    if (!res)
        rc = 1;
    uint64_t cas = 0;
    for (uint64_t i = 0; rc == 0 && i < K; i++) {
        uint8_t w[MB_RESULT_BYTES];
        snprintf(key, sizeof(key), "%s/result/%" PRIu64, mb->o.name, i);
        if (mb_get(mb, key, w, sizeof(w))) {
            rc = 1;
            break;
        }
        uint64_t *fields[] = {&res[i].ops,        &res[i].start_ns,  &res[i].end_ns,
                              &res[i].lat_sum_ns, &res[i].lat_count, &res[i].cas_successes};
        for (size_t f = 0; f < sizeof(fields) / sizeof(fields[0]); f++)
            *fields[f] = rc_conn_get_le(w + 8 * f, 8);
        cas += res[i].cas_successes;
    }
    if (rc == 0)
        rc = mb_server_verify(mb, cas);
    if (rc == 0 && mb->o.test == MB_SEND)
        printf("%s server: %" PRIu64 " receives, %" PRIu64 " buffers verified\n", mb->prog,
               received, mb->recv_checked);
    all = mb_barrier(mb, rc); /* 4: verified */
    if (all == 0)
        mb_server_report(mb, res, K);
    free(res);
    return rc ? rc : all;
}

int microbench_main(int argc, char **argv)
{
    struct mb *mb = calloc(1, sizeof(*mb));
    if (!mb)
        return 1;
    int rc = mb_parse_args(argc, argv, &mb->o);
    if (rc) {
        free(mb);
        return rc < 0 ? 0 : rc;
    }
    mb->prog = argc > 0 && argv[0] ? argv[0] : "microbench";
    rc_conn_init(&mb->conn, mb->prog, mb->o.role, mb->o.name);
    /* The walk: nslots slots of stride bytes (atomics: one 64-byte slot). */
    mb->stride = mb->o.size > MB_MIN_STRIDE ? mb->o.size : MB_MIN_STRIDE;
    mb->nslots = mb_tests[mb->o.test].atomic ? 1 : mb->o.working_set / mb->stride;
    if (mb->nslots == 0)
        mb->nslots = 1; /* working set >= size but < 64: one slot */
    mb->span = mb_tests[mb->o.test].atomic ? MB_MIN_STRIDE : mb->o.working_set;
    rc = mb->o.role == RC_CONN_ROLE_SERVER ? mb_server_main(mb) : mb_client_main(mb);
    if (rc == 0)
        printf("%s %s: done\n", mb->prog, mb->o.role == RC_CONN_ROLE_SERVER ? "server" : "client");
    mb_close(mb);
    free(mb);
    return rc;
}
