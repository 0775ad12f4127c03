/* Ring buffer family mechanics (Taranov et al., Sections 4.3 and 4.4).
 *
 * The receiver's ring is ring_bytes of memory mapped twice back to back
 * (chan_ring_map, Section 4 "Software tricks"), registered as one MR, so a
 * record that runs past the end is one contiguous WRITE.  Positions are
 * monotonic 64-bit byte counts; position p lives at ring offset p mod R.
 * Records are 8-byte aligned:
 *
 *   RING_DETACHED        [len u32][0 u32][data]          WRITE, then an
 *                        8-byte WRITE of the new head into the bell
 *   RING_IMM             [data]                          WRITE_WITH_IMM,
 *                        imm = offset / 8, length = byte_len
 *   RING_INLINED_ZERO    [len + 1 u32][0 u32][data][1 u64]   one WRITE
 *                        (Figure 1); the receiver zeroes it after use
 *   RING_INLINED_NOZERO  reversed (Figure 2): message k is written *below*
 *                        message k - 1: one WRITE of [0 u64][data][len + 1
 *                        u64] ending where message k - 1 starts, so its
 *                        length word lands on k - 1's zero word (set) and
 *                        its zero word clears the bell of message k + 1;
 *                        nothing is zeroed by the receiver
 *   RING_SHARED_IMM      as RING_IMM, the position reserved by a
 *                        FETCH_AND_ADD on the receiver's head counter
 *   RING_SHARED_INLINED  as RING_INLINED_ZERO, reserved the same way
 *
 * Flow control: point-to-point senders learn the receiver's processed tail
 * (and count of freed messages) from the ack words the receiver WRITEs
 * back (Section 6, "write slot inlined bell" style); shared-ring senders
 * READ the tail word when they run out of room (Section 6, "read slot
 * inlined bell"), so the receiver never posts a work request for them.
 * Shared-ring senders post FETCH_AND_ADD and READ on a second QP of their
 * own (link "s<id>-ctl"), the WRITEs on the first: the reservation and
 * tail channel is a channel of its own, as in Section 6.  (A run with
 * --dm and 2 senders on one QP once deadlocked; that was a lost wakeup in
 * the simulator's host model, fixed in sim/host.c, not the NIC:
 * test/verbs/test_dm_atomic_order.c and docs/taranov-eval-b.md.)
 * With cfg.device_memory the head and tail counters of a shared ring are in
 * NIC device memory (ibv_alloc_dm, zero-based MR; Section 6.3).
 *
 * The receiver may free regions in any order; the tail advances over the
 * freed prefix (a map from ring offset / 8 to record size). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rnicsim/host.h>

#include "protocols/common/pages.h"
#include "protocols/taranov/ch_internal.h"

enum {
    RING_BLOB = 48,
    RING_ACK_SQ = 16, /* receiver's send queue: ack WRITEs (at most 8 outstanding) + slack */
    RING_HDR = 8,
    RING_TRAILER = 8,
    RING_HBYTES = 32, /* sender's per-message header area */
};
#define RING_OP_BIT (1ull << 63) /* wr_id of FETCH_AND_ADD / READ */
#define RING_FREED (1u << 31)
/* Default ring when cfg.ring_bytes is 0: 64 KiB (estimate: a few hundred
 * small messages, as the paper's 16-outstanding experiments need). */
#define RING_DEFAULT_BYTES (64u * 1024u)

enum ring_send_state { RS_IDLE, RS_FAA, RS_CHECK, RS_READ };

struct ring {
    enum ring_variant v;
    bool shared, imm, zeroing;
    uint64_t R;
    struct ibv_comp_channel *cch;
    /* sender */
    struct ibv_cq *scq;
    struct chan_qp q;
    struct chan_qp qc; /* shared: the reservation / tail QP (FETCH_AND_ADD, READ) */
    struct chan_ack ack;
    uint64_t head; /* p2p: next position */
    uint64_t sent, done;
    uint64_t ring_addr, bell_addr, head_addr, tail_addr;
    uint32_t rkey, ctr_rkey;
    uint8_t *hdrs; /* per outstanding message: [header 8][zeros 8][trailer 8][-] */
    bool op_done;  /* shared: the FAA / READ in flight has completed */
    struct ibv_mr *hmr;
    uint64_t *op; /* shared: FAA / READ result (registered, in hmr) */
    enum ring_send_state st;
    uint64_t pos, rec, known_tail;
    size_t pending_len;
    /* receiver */
    uint32_t nq;
    struct chan_qp *qs, *qcs; /* qcs: shared: each sender's reservation QP */
    struct ibv_cq **ack_cqs;
    struct chan_ack *acks;
    struct ibv_cq *rcq;
    uint8_t *base; /* 2R virtual */
    struct ibv_mr *mr;
    volatile uint64_t *ctr; /* [0] bell (detached) or head, [1] tail (host memory) */
    struct ibv_mr *cmr;
    void *ctr_mem; /* what g->ctr points to */
    struct ibv_dm *dm;
    struct ibv_mr *dmr;
    uint64_t recv_pos, tail;
    uint32_t *rec_sz; /* R / 8 entries */
    uint8_t *zeros;   /* zeroing variants: R / 2 zero bytes to clear records from */
    uint64_t msgs_freed;
};

static uint64_t rec_bytes(const struct ring *g, size_t len)
{
    uint64_t a = chan_align8(len);
    switch (g->v) {
    case RING_DETACHED:
        return RING_HDR + a;
    case RING_IMM:
    case RING_SHARED_IMM:
        return a ? a : 8;
    case RING_INLINED_ZERO:
    case RING_SHARED_INLINED:
        return RING_HDR + a + RING_TRAILER;
    case RING_INLINED_NOZERO:
        return 8 + a; /* plus the 8-byte zero word that overlaps the next record */
    }
    return a;
}

/* ---------------------------------------------------------------- open */

static int open_sender(struct chan *c, struct ring *g)
{
    uint32_t slots = c->cfg.slots, depth = 2 * slots + 8;
    g->scq = ibv_create_cq(c->ctx, (int)(depth + 8), NULL, NULL, 0);
    if (!g->scq)
        return chan_fail(c, ENOMEM, "ibv_create_cq: %s", strerror(errno));
    int rc = chan_qp_create(c, &g->q, g->scq, g->scq, NULL, depth, 1, 0);
    if (rc < 0)
        return rc;
    size_t hbytes = (size_t)slots * RING_HBYTES + 64;
    g->hdrs = pages_zalloc(hbytes);
    if (!g->hdrs)
        return chan_fail(c, ENOMEM, "no memory");
    g->op = (uint64_t *)(g->hdrs + (size_t)slots * RING_HBYTES);
    g->hmr = ibv_reg_mr(c->pd, g->hdrs, hbytes, IBV_ACCESS_LOCAL_WRITE);
    if (!g->hmr)
        return chan_fail(c, errno ? errno : ENOMEM, "ibv_reg_mr: %s", strerror(errno));
    uint64_t addr = 0;
    uint32_t rkey = 0;
    if (!g->shared && (rc = chan_ack_init_sender(c, &g->ack, &addr, &rkey)) < 0)
        return rc;
    uint8_t mine[RING_BLOB] = {0}, theirs[RING_BLOB];
    memcpy(mine, &addr, 8);
    memcpy(mine + 8, &rkey, 4);
    char link[16];
    rc = chan_qp_connect(c, &g->q, chan_link_name(link, sizeof(link), c->cfg.id), mine, theirs,
                         RING_BLOB);
    if (rc < 0)
        return rc;
    if (g->shared) { /* FETCH_AND_ADD and READ on a QP of their own */
        uint8_t none[8] = {0}, peer[8];
        char cl[24];
        snprintf(cl, sizeof(cl), "%s-ctl", link);
        if ((rc = chan_qp_create(c, &g->qc, g->scq, g->scq, NULL, 8, 1, 0)) < 0 ||
            (rc = chan_qp_connect(c, &g->qc, cl, none, peer, sizeof(none))) < 0)
            return rc;
    }
    memcpy(&g->ring_addr, theirs, 8);
    memcpy(&g->bell_addr, theirs + 8, 8); /* detached: bell; shared: head counter */
    memcpy(&g->tail_addr, theirs + 16, 8);
    memcpy(&g->rkey, theirs + 24, 4);
    memcpy(&g->ctr_rkey, theirs + 28, 4);
    g->head_addr = g->bell_addr;
    return 0;
}

static int open_receiver(struct chan *c, struct ring *g)
{
    uint32_t n = c->cfg.senders;
    g->nq = n;
    g->qs = calloc(n, sizeof(*g->qs));
    g->ack_cqs = calloc(n, sizeof(*g->ack_cqs));
    g->acks = calloc(n, sizeof(*g->acks));
    g->qcs = calloc(n, sizeof(*g->qcs));
    g->rec_sz = calloc(g->R / 8, sizeof(*g->rec_sz));
    if (!g->qs || !g->qcs || !g->ack_cqs || !g->acks || !g->rec_sz)
        return chan_fail(c, ENOMEM, "no memory");
    if (g->zeroing && !(g->zeros = pages_zalloc(g->R / 2)))
        return chan_fail(c, ENOMEM, "no memory");
    g->base = chan_ring_map(g->R);
    if (!g->base)
        return chan_fail(c, errno ? errno : ENOMEM, "%s: circular mapping of %llu bytes: %s",
                         c->ops->name, (unsigned long long)g->R, strerror(errno));
    g->mr = ibv_reg_mr(c->pd, g->base, 2 * g->R, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    if (!g->mr)
        return chan_fail(c, errno ? errno : ENOMEM, "ibv_reg_mr (ring): %s", strerror(errno));
    void *p = NULL;
    if (posix_memalign(&p, 64, 64) != 0)
        return chan_fail(c, ENOMEM, "no memory");
    memset(p, 0, 64);
    g->ctr = p;
    g->ctr_mem = p;
    g->cmr = ibv_reg_mr(c->pd, p, 64,
                        IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                            IBV_ACCESS_REMOTE_ATOMIC);
    if (!g->cmr)
        return chan_fail(c, errno ? errno : ENOMEM, "ibv_reg_mr (counters): %s", strerror(errno));
    uint64_t ctr_addr = (uint64_t)(uintptr_t)p;
    uint32_t ctr_rkey = g->cmr->rkey;
    if (g->shared && c->cfg.device_memory) {
        struct ibv_alloc_dm_attr da = {.length = 64};
        g->dm = ibv_alloc_dm(c->ctx, &da);
        if (!g->dm)
            return chan_fail(c, errno ? errno : ENOMEM, "%s: ibv_alloc_dm(64): %s", c->ops->name,
                             strerror(errno));
        uint64_t zero[8] = {0};
        int err = ibv_memcpy_to_dm(g->dm, 0, zero, sizeof(zero));
        if (err)
            return chan_fail(c, err, "ibv_memcpy_to_dm: %s", strerror(err));
        g->dmr =
            ibv_reg_dm_mr(c->pd, g->dm, 0, 64,
                          IBV_ACCESS_ZERO_BASED | IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                              IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
        if (!g->dmr)
            return chan_fail(c, errno ? errno : EINVAL, "ibv_reg_dm_mr: %s", strerror(errno));
        ctr_addr = 0; /* zero-based: offsets into the device memory */
        ctr_rkey = g->dmr->rkey;
    }
    if (g->imm && c->cfg.blocking) {
        g->cch = ibv_create_comp_channel(c->ctx);
        if (!g->cch)
            return chan_fail(c, errno ? errno : ENOMEM, "ibv_create_comp_channel: %s",
                             strerror(errno));
    }
    uint32_t per_qp = g->imm ? c->cfg.slots : 1;
    g->rcq = ibv_create_cq(c->ctx, (int)(n * per_qp + 16), NULL, g->cch, 0);
    if (!g->rcq)
        return chan_fail(c, ENOMEM, "ibv_create_cq: %s", strerror(errno));
    for (uint32_t i = 0; i < n; i++) {
        g->ack_cqs[i] = ibv_create_cq(c->ctx, RING_ACK_SQ + 4, NULL, NULL, 0);
        if (!g->ack_cqs[i])
            return chan_fail(c, ENOMEM, "ibv_create_cq: %s", strerror(errno));
        int rc = chan_qp_create(c, &g->qs[i], g->ack_cqs[i], g->rcq, NULL, RING_ACK_SQ, per_qp, 0);
        if (rc < 0)
            return rc;
        if (g->imm && (rc = chan_post_recv0(c, g->qs[i].qp, per_qp)) < 0)
            return rc;
    }
    for (uint32_t i = 0; i < n; i++) {
        uint8_t mine[RING_BLOB] = {0}, theirs[RING_BLOB];
        uint64_t ring_addr = (uint64_t)(uintptr_t)g->base, tail_addr = ctr_addr + 8;
        memcpy(mine, &ring_addr, 8);
        memcpy(mine + 8, &ctr_addr, 8);
        memcpy(mine + 16, &tail_addr, 8);
        memcpy(mine + 24, &g->mr->rkey, 4);
        memcpy(mine + 28, &ctr_rkey, 4);
        char link[16];
        int rc = chan_qp_connect(c, &g->qs[i], chan_link_name(link, sizeof(link), i), mine, theirs,
                                 RING_BLOB);
        if (rc < 0)
            return rc;
        uint64_t addr;
        uint32_t rkey;
        memcpy(&addr, theirs, 8);
        memcpy(&rkey, theirs + 8, 4);
        chan_ack_init_receiver(&g->acks[i], addr, rkey);
        if (g->shared) {
            uint8_t none[8] = {0}, peer[8];
            char cl[24];
            snprintf(cl, sizeof(cl), "%s-ctl", link);
            if ((rc = chan_qp_create(c, &g->qcs[i], g->ack_cqs[i], g->ack_cqs[i], NULL, 1, 1, 0)) <
                    0 ||
                (rc = chan_qp_connect(c, &g->qcs[i], cl, none, peer, sizeof(none))) < 0)
                return rc;
        }
    }
    return 0;
}

int ring_open(struct chan *c, enum ring_variant v)
{
    struct ring *g = calloc(1, sizeof(*g));
    if (!g)
        return chan_fail(c, ENOMEM, "no memory");
    c->impl = g;
    g->v = v;
    g->shared = v == RING_SHARED_IMM || v == RING_SHARED_INLINED;
    g->imm = v == RING_IMM || v == RING_SHARED_IMM;
    g->zeroing = v == RING_INLINED_ZERO || v == RING_SHARED_INLINED;
    g->R = c->cfg.ring_bytes ? c->cfg.ring_bytes : RING_DEFAULT_BYTES;
    if (g->R % 4096 != 0 || g->R > (1ull << 34))
        return chan_fail(c, EINVAL, "%s: ring_bytes %llu is not a multiple of 4 KiB (<= 16 GiB)",
                         c->ops->name, (unsigned long long)g->R);
    if (c->cfg.max_msg_bytes == 0 || rec_bytes(g, c->cfg.max_msg_bytes) + 8 > g->R / 2)
        return chan_fail(c, EINVAL,
                         "%s: max_msg_bytes %zu must be > 0 and its record fit half the ring "
                         "(%llu bytes)",
                         c->ops->name, c->cfg.max_msg_bytes, (unsigned long long)g->R);
    if (c->cfg.device_memory && !g->shared)
        return chan_fail(c, EINVAL, "%s: device_memory is for the shared rings", c->ops->name);
    return c->cfg.role == CHAN_SENDER ? open_sender(c, g) : open_receiver(c, g);
}

/* ---------------------------------------------------------------- sender */

static int poll_send(struct chan *c, struct ring *g)
{
    struct ibv_wc wc[16];
    int n = chan_poll_cq(c, g->scq, 16, wc);
    if (n < 0)
        return chan_fail(c, EIO, "%s: ibv_poll_cq failed", c->ops->name);
    for (int i = 0; i < n; i++) {
        if (wc[i].status != IBV_WC_SUCCESS)
            return chan_fail(c, EIO, "%s: send completion: %s (wr_id %llx)", c->ops->name,
                             ibv_wc_status_str(wc[i].status), (unsigned long long)wc[i].wr_id);
        if (wc[i].wr_id & RING_OP_BIT)
            g->op_done = true;
        else if (wc[i].wr_id > g->done)
            g->done = wc[i].wr_id;
    }
    return n;
}

/* Shared rings: reserve [pos, pos + rec) with FETCH_AND_ADD on the head,
 * then READ the tail until the reservation fits.  CHAN_AGAIN while a
 * request is in flight, 0 when g->pos is writable. */
static int reserve(struct chan *c, struct ring *g, size_t len)
{
    int n = poll_send(c, g);
    if (n < 0)
        return n;
    for (;;) {
        switch (g->st) {
        case RS_IDLE: {
            g->rec = rec_bytes(g, len);
            g->pending_len = len;
            struct ibv_sge sge = {
                .addr = (uint64_t)(uintptr_t)g->op, .length = 8, .lkey = g->hmr->lkey};
            struct ibv_send_wr wr = {.wr_id = RING_OP_BIT | 1,
                                     .sg_list = &sge,
                                     .num_sge = 1,
                                     .opcode = IBV_WR_ATOMIC_FETCH_AND_ADD,
                                     .send_flags = IBV_SEND_SIGNALED};
            wr.wr.atomic.remote_addr = g->head_addr;
            wr.wr.atomic.rkey = g->ctr_rkey;
            wr.wr.atomic.compare_add = g->rec;
            int rc = chan_post_send(c, g->qc.qp, &wr);
            if (rc < 0)
                return rc;
            g->st = RS_FAA;
            return CHAN_AGAIN;
        }
        case RS_FAA:
        case RS_READ:
            if (!g->op_done)
                return CHAN_AGAIN;
            g->op_done = false;
            if (g->st == RS_FAA)
                g->pos = *g->op;
            else if (*g->op > g->known_tail)
                g->known_tail = *g->op;
            g->st = RS_CHECK;
            break;
        case RS_CHECK: {
            if (g->pos + g->rec <= g->known_tail + g->R)
                return 0;
            struct ibv_sge sge = {
                .addr = (uint64_t)(uintptr_t)g->op, .length = 8, .lkey = g->hmr->lkey};
            struct ibv_send_wr wr = {.wr_id = RING_OP_BIT | 2,
                                     .sg_list = &sge,
                                     .num_sge = 1,
                                     .opcode = IBV_WR_RDMA_READ,
                                     .send_flags = IBV_SEND_SIGNALED};
            wr.wr.rdma.remote_addr = g->tail_addr;
            wr.wr.rdma.rkey = g->ctr_rkey;
            int rc = chan_post_send(c, g->qc.qp, &wr);
            if (rc < 0)
                return rc;
            g->st = RS_READ;
            return CHAN_AGAIN;
        }
        }
    }
}

int ring_send(struct chan *c, const struct chan_region *r, uint64_t *handle)
{
    struct ring *g = c->impl;
    if (r->len > c->cfg.max_msg_bytes)
        return chan_fail(c, EMSGSIZE, "%s: message of %zu bytes (max %zu)", c->ops->name, r->len,
                         c->cfg.max_msg_bytes);
    uint32_t slots = c->cfg.slots;
    uint64_t pos, rec = rec_bytes(g, r->len);
    if (g->shared) {
        if (g->st != RS_IDLE && r->len != g->pending_len)
            return chan_fail(c, EINVAL,
                             "%s: call send again with the same region after "
                             "CHAN_AGAIN",
                             c->ops->name);
        if (g->st == RS_IDLE && g->sent - g->done >= slots) {
            int n = poll_send(c, g);
            if (n < 0)
                return n;
            if (g->sent - g->done >= slots)
                return CHAN_AGAIN;
        }
        int rc = reserve(c, g, r->len);
        if (rc != 0)
            return rc;
        pos = g->pos;
        g->st = RS_IDLE;
        if (c->cfg.reserve_delay_ns)
            host_compute(c->cfg.reserve_delay_ns); /* test hook: a slow writer */
    } else {
        int n = poll_send(c, g);
        if (n < 0)
            return n;
        uint64_t extra = g->v == RING_INLINED_NOZERO ? 8 : 0; /* the next record's zero word */
        if (g->sent - g->done >= slots || g->sent - chan_ack_get(&g->ack, 1) >= slots ||
            g->head + rec + extra > chan_ack_get(&g->ack, 0) + g->R)
            return CHAN_AGAIN;
        pos = g->head;
        g->head += rec;
    }
    uint8_t *h = g->hdrs + (size_t)(g->sent % slots) * RING_HBYTES; /* [8..16) stays 0 */
    uint32_t hl = g->hmr->lkey;
    uint64_t a = chan_align8(r->len), off = pos % g->R;
    struct ibv_sge sg[4];
    int ns = 0;
    struct ibv_send_wr wr = {.wr_id = g->sent + 1,
                             .sg_list = sg,
                             .opcode = IBV_WR_RDMA_WRITE,
                             .send_flags = IBV_SEND_SIGNALED};
    wr.wr.rdma.rkey = g->rkey;
    wr.wr.rdma.remote_addr = g->ring_addr + off;
#define SGE(p, l, k)                                                                               \
    do {                                                                                           \
        if ((l) > 0)                                                                               \
            sg[ns++] = (struct ibv_sge){                                                           \
                .addr = (uint64_t)(uintptr_t)(p), .length = (uint32_t)(l), .lkey = (k)};           \
    } while (0)
    switch (g->v) {
    case RING_DETACHED: {
        uint32_t hdr[2] = {(uint32_t)r->len, 0};
        memcpy(h, hdr, 8);
        SGE(h, 8, hl);
        SGE(r->addr, r->len, r->lkey);
        uint64_t bell = g->head; /* the new head, after this record */
        struct ibv_sge bsge = {.addr = (uint64_t)(uintptr_t)&bell, .length = 8, .lkey = 0};
        struct ibv_send_wr bwr = {.wr_id = g->sent + 1,
                                  .sg_list = &bsge,
                                  .num_sge = 1,
                                  .opcode = IBV_WR_RDMA_WRITE,
                                  .send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE};
        bwr.wr.rdma.remote_addr = g->bell_addr;
        bwr.wr.rdma.rkey = g->ctr_rkey;
        wr.num_sge = ns;
        wr.wr_id = 0;
        wr.send_flags = 0;
        wr.next = &bwr;
        int rc = chan_post_send(c, g->q.qp, &wr);
        if (rc < 0)
            return rc;
        break;
    }
    case RING_IMM:
    case RING_SHARED_IMM:
        SGE(r->addr, r->len, r->lkey);
        wr.num_sge = ns;
        wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
        wr.imm_data = (uint32_t)(off / 8);
        if (chan_post_send(c, g->q.qp, &wr) < 0)
            return -EIO;
        break;
    case RING_INLINED_ZERO:
    case RING_SHARED_INLINED: {
        uint32_t hdr[2] = {(uint32_t)r->len + 1, 0};
        uint64_t one = 1;
        memcpy(h, hdr, 8);
        memcpy(h + 16, &one, 8);
        SGE(h, 8, hl);                 /* the length: the bell */
        SGE(r->addr, r->len, r->lkey); /* the message, zero-copy */
        SGE(h + 8, a - r->len, hl);    /* padding to 8 bytes */
        SGE(h + 16, 8, hl);            /* the completion "one" */
        wr.num_sge = ns;
        if (chan_post_send(c, g->q.qp, &wr) < 0)
            return -EIO;
        break;
    }
    case RING_INLINED_NOZERO: {
        /* ends at the ring offset of -pos, in the upper copy of the ring */
        uint64_t end = g->R + (g->R - off) % g->R;
        uint64_t lenw = (uint64_t)r->len + 1;
        memset(h, 0, 8);
        memcpy(h + 16, &lenw, 8);
        SGE(h, 8, hl); /* zero: clears the next message's bell */
        SGE(r->addr, r->len, r->lkey);
        SGE(h + 8, a - r->len, hl); /* padding */
        SGE(h + 16, 8, hl);         /* len + 1: this message's bell */
        wr.num_sge = ns;
        wr.wr.rdma.remote_addr = g->ring_addr + end - 16 - a;
        if (chan_post_send(c, g->q.qp, &wr) < 0)
            return -EIO;
        break;
    }
    }
#undef SGE
    *handle = ++g->sent;
    return 0;
}

int ring_test_send(struct chan *c, uint64_t handle)
{
    struct ring *g = c->impl;
    if (g->done >= handle)
        return 0;
    int n = poll_send(c, g);
    if (n < 0)
        return n;
    return g->done >= handle ? 0 : CHAN_AGAIN;
}

/* ---------------------------------------------------------------- receiver */

static uint8_t *at(const struct ring *g, uint64_t pos)
{
    return g->base + pos % g->R;
}

static int deliver(struct chan *c, struct ring *g, uint64_t pos, uint8_t *addr, size_t len,
                   uint64_t rec, uint32_t sender, struct chan_region *out)
{
    if (len > c->cfg.max_msg_bytes || rec > g->R / 2)
        return chan_fail(c, EBADMSG, "%s: record at %llu says %zu bytes (max %zu)", c->ops->name,
                         (unsigned long long)pos, len, c->cfg.max_msg_bytes);
    g->rec_sz[(pos % g->R) / 8] = (uint32_t)rec;
    out->addr = addr;
    out->len = len;
    out->lkey = g->mr->lkey;
    out->priv = pos | ((uint64_t)sender << 48);
    return 0;
}

static uint32_t sender_of_qpn(const struct ring *g, uint32_t qpn)
{
    for (uint32_t i = 0; i < g->nq; i++)
        if (g->qs[i].qp->qp_num == qpn)
            return i;
    return UINT32_MAX;
}

int ring_recv(struct chan *c, struct chan_region *out)
{
    struct ring *g = c->impl;
    uint64_t p = g->recv_pos;
    switch (g->v) {
    case RING_DETACHED: {
        uint64_t bell = __atomic_load_n(&g->ctr[0], __ATOMIC_ACQUIRE);
        if (bell <= p)
            return CHAN_AGAIN;
        uint32_t len;
        memcpy(&len, at(g, p), 4);
        uint64_t rec = RING_HDR + chan_align8(len);
        g->recv_pos += rec;
        return deliver(c, g, p, at(g, p) + RING_HDR, len, rec, 0, out);
    }
    case RING_INLINED_ZERO:
    case RING_SHARED_INLINED: {
        volatile uint32_t *hdr = (volatile uint32_t *)at(g, p);
        uint32_t v = hdr[0];
        if (v == 0)
            return CHAN_AGAIN;
        size_t len = v - 1;
        if (len > c->cfg.max_msg_bytes)
            return chan_fail(c, EBADMSG, "%s: header at %llu says %zu bytes (max %zu)",
                             c->ops->name, (unsigned long long)p, len, c->cfg.max_msg_bytes);
        uint64_t a = chan_align8(len);
        volatile uint64_t *done = (volatile uint64_t *)(at(g, p) + RING_HDR + a);
        if (*done == 0)
            return CHAN_AGAIN; /* length there, message not complete yet */
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        g->recv_pos += RING_HDR + a + RING_TRAILER;
        return deliver(c, g, p, at(g, p) + RING_HDR, len, RING_HDR + a + RING_TRAILER, 0, out);
    }
    case RING_INLINED_NOZERO: {
        uint64_t end = g->R + (g->R - p % g->R) % g->R;
        volatile uint64_t *bell = (volatile uint64_t *)(g->base + end - 8);
        uint64_t v = *bell;
        if (v == 0)
            return CHAN_AGAIN;
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        size_t len = (size_t)(v - 1);
        if (len > c->cfg.max_msg_bytes)
            return chan_fail(c, EBADMSG, "%s: bell at %llu says %zu bytes (max %zu)", c->ops->name,
                             (unsigned long long)p, len, c->cfg.max_msg_bytes);
        uint64_t a = chan_align8(len);
        g->recv_pos += 8 + a;
        return deliver(c, g, p, g->base + end - 8 - a, len, 8 + a, 0, out);
    }
    case RING_IMM:
    case RING_SHARED_IMM: {
        struct ibv_wc wc;
        int n = chan_poll_cq(c, g->rcq, 1, &wc);
        if (n == 0 && g->cch)
            n = chan_cq_block(c, g->cch, g->rcq, &wc);
        if (n < 0)
            return chan_fail(c, EIO, "%s: ibv_poll_cq failed", c->ops->name);
        if (n == 0)
            return CHAN_AGAIN;
        if (wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_RECV_RDMA_WITH_IMM)
            return chan_fail(c, EIO, "%s: receive completion: %s (opcode %d)", c->ops->name,
                             ibv_wc_status_str(wc.status), (int)wc.opcode);
        uint32_t sender = sender_of_qpn(g, wc.qp_num);
        if (sender == UINT32_MAX)
            return chan_fail(c, EIO, "%s: completion of an unknown QP", c->ops->name);
        int rc = chan_post_recv0(c, g->qs[sender].qp, 1);
        if (rc < 0)
            return rc;
        uint64_t off = (uint64_t)wc.imm_data * 8;
        if (off >= g->R)
            return chan_fail(c, EIO, "%s: immediate %u is outside the ring", c->ops->name,
                             wc.imm_data);
        /* the absolute position: the one in [tail, tail + R) at this offset */
        uint64_t pos = g->tail + (off + g->R - g->tail % g->R) % g->R;
        size_t len = wc.byte_len;
        return deliver(c, g, pos, at(g, pos), len, len ? chan_align8(len) : 8, sender, out);
    }
    }
    return CHAN_AGAIN;
}

int ring_free(struct chan *c, struct chan_region *r)
{
    struct ring *g = c->impl;
    uint64_t pos = r->priv & ((1ull << 48) - 1);
    uint32_t sender = (uint32_t)(r->priv >> 48);
    uint32_t *e = &g->rec_sz[(pos % g->R) / 8];
    if (sender >= g->nq || *e == 0 || (*e & RING_FREED))
        return chan_fail(c, EINVAL, "%s: not a received region", c->ops->name);
    if (g->zeroing) /* Figure 1: unset every bell and completion of the record; the
                       CPU cost is charged like a copy (host_memcpy) */
        host_memcpy(at(g, pos), g->zeros, *e);
    *e |= RING_FREED;
    uint64_t old_tail = g->tail;
    for (;;) {
        uint32_t *t = &g->rec_sz[(g->tail % g->R) / 8];
        if (!(*t & RING_FREED))
            break;
        uint32_t rec = *t & ~RING_FREED;
        *t = 0;
        g->tail += rec;
        g->msgs_freed++;
    }
    if (g->tail == old_tail)
        return 0;
    if (g->shared) { /* senders READ it when they need room */
        if (g->dm) {
            int err = ibv_memcpy_to_dm(g->dm, 8, &g->tail, 8);
            if (err)
                return chan_fail(c, err, "ibv_memcpy_to_dm: %s", strerror(err));
        } else {
            __atomic_store_n(&g->ctr[1], g->tail, __ATOMIC_RELEASE);
        }
        return 0;
    }
    struct chan_ack *a = &g->acks[0];
    a->value[0] = g->tail;
    a->value[1] = g->msgs_freed;
    uint64_t every[CHAN_ACK_WORDS] = {g->R / 4, c->cfg.slots / 2 ? c->cfg.slots / 2 : 1};
    return chan_ack_flush(c, a, &g->qs[0], every);
}

void ring_close(struct chan *c)
{
    struct ring *g = c->impl;
    if (!g)
        return;
    chan_qp_destroy(&g->q);
    chan_qp_destroy(&g->qc);
    chan_ack_destroy(&g->ack);
    for (uint32_t i = 0; g->qs && i < g->nq; i++)
        chan_qp_destroy(&g->qs[i]);
    for (uint32_t i = 0; g->qcs && i < g->nq; i++)
        chan_qp_destroy(&g->qcs[i]);
    for (uint32_t i = 0; g->ack_cqs && i < g->nq; i++)
        if (g->ack_cqs[i])
            ibv_destroy_cq(g->ack_cqs[i]);
    if (g->scq)
        ibv_destroy_cq(g->scq);
    if (g->rcq)
        ibv_destroy_cq(g->rcq);
    if (g->cch)
        ibv_destroy_comp_channel(g->cch);
    if (g->hmr)
        ibv_dereg_mr(g->hmr);
    if (g->mr)
        ibv_dereg_mr(g->mr);
    if (g->cmr)
        ibv_dereg_mr(g->cmr);
    if (g->dmr)
        ibv_dereg_mr(g->dmr);
    if (g->dm)
        ibv_free_dm(g->dm);
    chan_ring_unmap(g->base, g->R);
    free(g->ctr_mem);
    free(g->hdrs);
    free(g->qs);
    free(g->qcs);
    free(g->ack_cqs);
    free(g->acks);
    free(g->rec_sz);
    free(g->zeros);
    free(g);
    c->impl = NULL;
}
