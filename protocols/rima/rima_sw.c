/* The software append queue (rima.h, RIMA_SW): RIMA emulated with standard
 * verbs, as Section 5.2.1 / Table 6 row 4 of Xue et al. describe ("space
 * creation requires a remote RDMA fetch-and-add ... and a local RDMA
 * atomic at the receiver" over the I/O bus).  docs/rima-portable.md.
 *
 * Receiver memory: the region (REMOTE_WRITE) and one control page
 * (REMOTE_ATOMIC | REMOTE_READ) with two 64-bit words:
 *   tail @0  monotonic byte position of the next reservation; senders
 *            advance it with FETCH_AND_ADD(span), span = length rounded up
 *            to 8 bytes; offset = position mod region;
 *   head @8  monotonic position of the oldest unconsumed byte, written by
 *            the receiver when the consumed prefix grows; senders READ it.
 *
 * Sender, per append (in posting order, several in flight):
 *   1. FETCH_AND_ADD(tail, span) -> position p (offset o = p mod R).
 *   2. If o + span > R (it would straddle the end) the reservation is
 *      abandoned: as the hardware rule (docs/rima.md) the message must be
 *      contiguous, and the bytes up to the end are padding.  The sender
 *      announces the abandoned reservation with a padding record (8-byte
 *      WRITE_WITH_IMM at o holding the span, imm kind PAD), and reserves
 *      again.  To keep the per-sender order of the hardware (RC delivers
 *      one QP's appends in order), every later append of this sender that
 *      already holds a reservation is abandoned too and re-reserved after
 *      it (an epoch number tells stale FAA results apart).  Until the
 *      abandoned append holds a reservation that fits, the sender has one
 *      FAA in flight ("recovering"): its next reservation then starts at
 *      most span - 8 bytes into the next lap unless other senders moved the
 *      tail meanwhile, and since a SW message is at most half the region
 *      (rima_post_append: EINVAL above) it fits.  Without that, the stale
 *      FAAs of the later appends could shift every retry by a multiple of
 *      the region and straddle forever.
 *   3. Flow control: the message may be written only when p + span <=
 *      head + R, head being the sender's cached copy of the head word
 *      (monotonic, so a stale copy is conservative); otherwise the sender
 *      READs the head word (one READ at a time) until it is.  A sender thus
 *      waits, never overwrites unconsumed bytes, and never backs out of a
 *      reservation (the receiver's head could not pass it).
 *   4. RDMA WRITE_WITH_IMM of the message at o, imm = low 32 bits of p |
 *      kind MSG (zero-length messages: no reservation, a 0-byte
 *      WRITE_WITH_IMM with kind ZERO).
 * WRITEs are posted in posting order, so one sender's messages complete
 * at the receiver in the order they were posted.
 *
 * Receiver: every WRITE_WITH_IMM consumes one zero-length receive of the
 * queue's SRQ (replenished by rima_poll_aq); the position is rebuilt from
 * the 32-bit imm relative to the head (every unconsumed reservation lies in
 * [head, head + R), R <= 4 GiB); padding records go straight into the head
 * tracker as consumed intervals. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "protocols/rima/rima_priv.h"
#include "rnicsim/host.h"

#define RIMA_WR_KIND_SHIFT 60
enum rima_wr_kind {
    RIMA_WR_WRITE = 1, /* low bits: slot index */
    RIMA_WR_FAA = 2,   /* [59:40] gen, [39:20] slot index, [19:0] FAA word */
    RIMA_WR_PAD = 3,   /* low bits: record word */
    RIMA_WR_READ = 4,
};
#define RIMA_WR_FIELD_MASK ((1ull << 20) - 1)

/* ------------------------------------------------------------ receiver */

static int sw_post_recvs(struct rima_aq *aq, uint32_t n)
{
    struct ibv_recv_wr wr[32], *bad = NULL;
    while (n) {
        uint32_t k = n < 32 ? n : 32;
        for (uint32_t i = 0; i < k; i++) {
            memset(&wr[i], 0, sizeof(wr[i]));
            wr[i].num_sge = 0;
            wr[i].next = i + 1 < k ? &wr[i + 1] : NULL;
        }
        int err = ibv_post_srq_recv(aq->srq, wr, &bad);
        if (err)
            return err;
        n -= k;
    }
    return 0;
}

int rima_sw_aq_create(struct rima_aq *aq, const struct rima_aq_opts *o)
{
    if (o->region_bytes % RIMA_SW_ALIGN_BYTES || o->region_bytes > RIMA_SW_MAX_REGION_BYTES)
        return EINVAL;
    aq->recv_depth = o->recv_depth ? o->recv_depth : 512;
    aq->region_bytes = o->region_bytes;
    if (posix_memalign((void **)&aq->buf, 4096, o->region_bytes) ||
        posix_memalign((void **)&aq->ctrl, 4096, 4096))
        return ENOMEM;
    memset(aq->buf, 0, o->region_bytes);
    memset(aq->ctrl, 0, 4096);
    aq->region_mr = ibv_reg_mr(aq->pd, aq->buf, o->region_bytes,
                               IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    if (!aq->region_mr)
        return errno ? errno : ENOMEM;
    aq->ctrl_mr =
        ibv_reg_mr(aq->pd, aq->ctrl, 4096,
                   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
    if (!aq->ctrl_mr)
        return errno ? errno : ENOMEM;
    struct ibv_srq_init_attr sa;
    memset(&sa, 0, sizeof(sa));
    sa.attr.max_wr = aq->recv_depth;
    sa.attr.max_sge = 1;
    aq->srq = ibv_create_srq(aq->pd, &sa);
    if (!aq->srq)
        return errno ? errno : ENOMEM;
    return sw_post_recvs(aq, aq->recv_depth);
}

void rima_sw_aq_destroy(struct rima_aq *aq)
{
    if (aq->srq)
        ibv_destroy_srq(aq->srq);
    if (aq->ctrl_mr)
        ibv_dereg_mr(aq->ctrl_mr);
    if (aq->region_mr)
        ibv_dereg_mr(aq->region_mr);
    if (aq->mode == RIMA_SW)
        free(aq->buf);
    free(aq->ctrl);
    aq->srq = NULL;
    aq->ctrl_mr = aq->region_mr = NULL;
    aq->ctrl = NULL;
    if (aq->mode == RIMA_SW)
        aq->buf = NULL;
}

void rima_sw_publish_head(struct rima_aq *aq)
{
    /* An aligned 8-byte store: a sender's READ sees the old or the new head. */
    volatile uint64_t *w = (volatile uint64_t *)(void *)(aq->ctrl + 8);
    *w = aq->head_pos;
}

static uint64_t load_le64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static void store_le64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* One receiver completion: 0 and *m filled (*delivered) or not (padding);
 * else an errno and nothing changed. */
static int sw_wc(struct rima_aq *aq, const struct ibv_wc *wc, struct rima_msg *m, bool *delivered)
{
    *delivered = false;
    if (wc->status != IBV_WC_SUCCESS)
        return EIO;
    if (wc->opcode != IBV_WC_RECV_RDMA_WITH_IMM)
        return EPROTO;
    uint32_t imm = ntohl(wc->imm_data);
    uint32_t kind = imm & RIMA_SW_KIND_MASK;
    uint64_t pos = rima_pos_from_low32(aq, imm & ~RIMA_SW_KIND_MASK);
    uint64_t off = pos % aq->region_bytes;
    if (kind == RIMA_SW_IMM_PAD) {
        uint64_t span = load_le64(aq->buf + off);
        if (wc->byte_len != RIMA_SW_PAD_RECORD_BYTES || span == 0 || span > aq->region_bytes)
            return EPROTO;
        int err = rima_done_push(aq, pos, pos + span);
        if (err)
            return err;
        aq->pad_bytes += span;
        rima_head_advance(aq);
        return 0;
    }
    struct rima_msg v;
    memset(&v, 0, sizeof(v));
    v.len = wc->byte_len;
    v.qp_num = wc->qp_num;
    v.src_qp = wc->src_qp;
    if (kind == RIMA_SW_IMM_ZERO) {
        if (v.len != 0)
            return EPROTO;
        v.pos = aq->head_pos; /* holds no bytes */
    } else if (kind == RIMA_SW_IMM_MSG) {
        v.pos = pos;
        v.offset = off;
        v.span = (v.len + RIMA_SW_ALIGN_BYTES - 1) / RIMA_SW_ALIGN_BYTES * RIMA_SW_ALIGN_BYTES;
        if (off + v.span > aq->region_bytes)
            return EPROTO;
    } else {
        return EPROTO;
    }
    v.addr = aq->buf + v.offset;
    *m = v;
    *delivered = true;
    aq->delivered++;
    aq->delivered_bytes += v.len;
    if (v.pos + v.span - aq->head_pos > aq->peak_pending)
        aq->peak_pending = v.pos + v.span - aq->head_pos;
    return 0;
}

/* A bad completion after good ones: those are returned, the bad one stays
 * in the stash (rima_wc_peek) and the next call reports it. */
int rima_sw_poll_aq(struct rima_aq *aq, int n, struct rima_msg *out)
{
    int got = 0;
    bool may_poll = true;
    while (got < n) {
        struct ibv_wc *wc = NULL;
        int k = rima_wc_peek(aq, n - got, &wc, &may_poll);
        if (k == 0)
            break;
        bool delivered = false;
        int err = k < 0 ? EIO : sw_wc(aq, wc, &out[got], &delivered);
        if (err && got)
            break; /* reported by the next call */
        if (k > 0) {
            rima_wc_take(aq);
            aq->recv_missing++;
        }
        if (err) {
            errno = err;
            return -1;
        }
        got += delivered;
    }
    /* replenish in batches of a quarter of the depth (or when asked) */
    if (aq->recv_missing && (aq->recv_missing >= aq->recv_depth / 4 || got == 0)) {
        int err = sw_post_recvs(aq, aq->recv_missing);
        if (err) {
            errno = err;
            return -1;
        }
        aq->recv_missing = 0;
    }
    return got;
}

/* ------------------------------------------------------------ sender */

static uint8_t *faa_word(struct rima_sender *s, uint32_t i)
{
    return s->scratch + (size_t)i * 8;
}

static uint8_t *rec_word(struct rima_sender *s, uint32_t i)
{
    return s->scratch + (size_t)(s->nfaa + i) * 8;
}

static uint8_t *head_word(struct rima_sender *s)
{
    return s->scratch + (size_t)(s->nfaa + s->nrec) * 8;
}

int rima_sw_sender_init(struct rima_sender *s, struct ibv_pd *pd)
{
    if (s->dst.region_bytes % RIMA_SW_ALIGN_BYTES || s->dst.region_bytes > RIMA_SW_MAX_REGION_BYTES)
        return EINVAL;
    s->nfaa = 2 * s->window;
    s->nrec = 2 * s->window;
    size_t bytes = (size_t)(s->nfaa + s->nrec + 1) * 8 + (size_t)s->window * RIMA_INLINE_MAX;
    if (posix_memalign((void **)&s->scratch, 4096, bytes))
        return ENOMEM;
    memset(s->scratch, 0, bytes);
    s->faa_free = malloc(s->nfaa * sizeof(uint32_t));
    s->faa_span = calloc(s->nfaa, sizeof(uint32_t));
    s->rec_free = malloc(s->nrec * sizeof(uint32_t));
    if (!s->faa_free || !s->faa_span || !s->rec_free)
        return ENOMEM;
    for (uint32_t i = 0; i < s->nfaa; i++)
        s->faa_free[s->faa_free_n++] = s->nfaa - 1 - i;
    for (uint32_t i = 0; i < s->nrec; i++)
        s->rec_free[s->rec_free_n++] = s->nrec - 1 - i;
    s->scratch_mr = ibv_reg_mr(pd, s->scratch, bytes, IBV_ACCESS_LOCAL_WRITE);
    if (!s->scratch_mr)
        return errno ? errno : ENOMEM;
    return 0;
}

static int dead_push(struct rima_sender *s, uint64_t pos, uint64_t span)
{
    if (s->dead_n == s->dead_cap) {
        uint32_t cap = s->dead_cap ? 2 * s->dead_cap : 16;
        struct rima_dead *d = realloc(s->dead, cap * sizeof(*d));
        if (!d)
            return ENOMEM;
        s->dead = d;
        s->dead_cap = cap;
    }
    s->dead[s->dead_n++] = (struct rima_dead){pos, span};
    s->st.dead_reservations++;
    return 0;
}

int rima_sw_handle_wc(struct rima_sender *s, const struct ibv_wc *wc);

int rima_sw_handle_wc(struct rima_sender *s, const struct ibv_wc *wc)
{
    uint64_t kind = wc->wr_id >> RIMA_WR_KIND_SHIFT;
    uint64_t f = wc->wr_id & ((1ull << RIMA_WR_KIND_SHIFT) - 1);
    if (wc->status != IBV_WC_SUCCESS && !s->failed)
        s->failed = EIO;
    switch ((enum rima_wr_kind)kind) {
    case RIMA_WR_FAA: {
        uint32_t word = (uint32_t)(f & RIMA_WR_FIELD_MASK);
        uint32_t idx = (uint32_t)((f >> 20) & RIMA_WR_FIELD_MASK);
        uint32_t gen = (uint32_t)(f >> 40);
        uint64_t pos = load_le64(faa_word(s, word));
        uint32_t span = s->faa_span[word];
        s->faa_free[s->faa_free_n++] = word;
        struct rima_slot *sl = &s->slots[idx % s->window];
        if (wc->status != IBV_WC_SUCCESS) {
            if (sl->state == RIMA_SLOT_FAA_INFLIGHT) {
                sl->state = RIMA_SLOT_DONE;
                sl->status = wc->status;
            }
            return 0;
        }
        if (sl->state == RIMA_SLOT_FAA_INFLIGHT && sl->gen == (gen & RIMA_WR_FIELD_MASK)) {
            sl->pos = pos;
            sl->state = RIMA_SLOT_RESERVED;
            return 0;
        }
        return dead_push(s, pos, span); /* abandoned while in flight */
    }
    case RIMA_WR_PAD:
        s->rec_free[s->rec_free_n++] = (uint32_t)f;
        return 0;
    case RIMA_WR_READ:
        s->read_inflight = false;
        if (wc->status == IBV_WC_SUCCESS) {
            uint64_t h = load_le64(head_word(s));
            if (h > s->cached_head)
                s->cached_head = h;
        }
        return 0;
    case RIMA_WR_WRITE:
        break; /* handled by rima_poll_sender */
    }
    return 0;
}

static int post_one(struct rima_sender *s, struct ibv_send_wr *wr)
{
    struct ibv_send_wr *bad = NULL;
    int err = ibv_post_send(s->qp, wr, &bad);
    if (err)
        return err;
    s->sq_used++;
    return 0;
}

static int post_head_read(struct rima_sender *s)
{
    if (s->read_inflight || s->sq_used >= s->sq_depth)
        return 0;
    struct ibv_sge sge = {
        .addr = (uint64_t)(uintptr_t)head_word(s), .length = 8, .lkey = s->scratch_mr->lkey};
    struct ibv_send_wr wr;
    memset(&wr, 0, sizeof(wr));
    wr.wr_id = (uint64_t)RIMA_WR_READ << RIMA_WR_KIND_SHIFT;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_RDMA_READ;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.rdma.remote_addr = s->dst.ctrl_addr + 8;
    wr.wr.rdma.rkey = s->dst.ctrl_rkey;
    int err = post_one(s, &wr);
    if (!err) {
        s->read_inflight = true;
        s->st.head_reads++;
    }
    return err;
}

/* Space [pos, pos + bytes) may be written: it does not reach unconsumed
 * bytes of the previous lap. */
static bool room(const struct rima_sender *s, uint64_t pos, uint64_t bytes)
{
    return pos + bytes <= s->cached_head + s->dst.region_bytes;
}

static int issue_faas(struct rima_sender *s, bool *progress)
{
    while (s->faa_idx < s->post_idx) {
        uint32_t idx = (uint32_t)(s->faa_idx % s->window);
        struct rima_slot *sl = &s->slots[idx];
        if (sl->span == 0) { /* zero-length: no reservation */
            sl->state = RIMA_SLOT_RESERVED;
            s->faa_idx++;
            *progress = true;
            continue;
        }
        if (!s->faa_free_n || s->sq_used >= s->sq_depth)
            return 0;
        if (s->recovering && s->faa_idx > s->write_idx)
            return 0; /* the oldest one first, alone */
        uint32_t word = s->faa_free[--s->faa_free_n];
        s->faa_span[word] = sl->span;
        sl->gen = s->epoch & RIMA_WR_FIELD_MASK;
        struct ibv_sge sge = {.addr = (uint64_t)(uintptr_t)faa_word(s, word),
                              .length = 8,
                              .lkey = s->scratch_mr->lkey};
        struct ibv_send_wr wr;
        memset(&wr, 0, sizeof(wr));
        wr.wr_id = ((uint64_t)RIMA_WR_FAA << RIMA_WR_KIND_SHIFT) | ((uint64_t)sl->gen << 40) |
                   ((uint64_t)idx << 20) | word;
        wr.sg_list = &sge;
        wr.num_sge = 1;
        wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
        wr.send_flags = IBV_SEND_SIGNALED;
        wr.wr.atomic.remote_addr = s->dst.ctrl_addr;
        wr.wr.atomic.rkey = s->dst.ctrl_rkey;
        wr.wr.atomic.compare_add = sl->span;
        int err = post_one(s, &wr);
        if (err) {
            s->faa_free[s->faa_free_n++] = word;
            return err;
        }
        sl->state = RIMA_SLOT_FAA_INFLIGHT;
        s->st.faa++;
        s->faa_idx++;
        *progress = true;
    }
    return 0;
}

/* The append at write_idx straddles the end: abandon its reservation and
 * every later one, and reserve again from write_idx (new epoch). */
static int abandon_from_write_idx(struct rima_sender *s)
{
    s->epoch++;
    s->recovering = true;
    for (uint64_t j = s->write_idx; j < s->faa_idx; j++) {
        struct rima_slot *sl = &s->slots[j % s->window];
        if (sl->state == RIMA_SLOT_RESERVED && sl->span) {
            int err = dead_push(s, sl->pos, sl->span);
            if (err)
                return err;
        }
        /* FAA_INFLIGHT ones are recognised as stale by their epoch */
        if (sl->state == RIMA_SLOT_RESERVED || sl->state == RIMA_SLOT_FAA_INFLIGHT)
            sl->state = RIMA_SLOT_WAIT_FAA;
    }
    s->faa_idx = s->write_idx;
    return 0;
}

static int issue_writes(struct rima_sender *s, bool *progress)
{
    while (s->write_idx < s->faa_idx) {
        uint32_t idx = (uint32_t)(s->write_idx % s->window);
        struct rima_slot *sl = &s->slots[idx];
        if (sl->state != RIMA_SLOT_RESERVED)
            return 0;
        uint64_t off = sl->pos % s->dst.region_bytes;
        if (sl->span && off + sl->span > s->dst.region_bytes) {
            *progress = true;
            return abandon_from_write_idx(s);
        }
        if (sl->span && !room(s, sl->pos, sl->span)) {
            s->st.flow_waits += !s->read_inflight;
            return post_head_read(s);
        }
        if (s->sq_used >= s->sq_depth)
            return 0;
        struct ibv_send_wr wr;
        memset(&wr, 0, sizeof(wr));
        wr.wr_id = ((uint64_t)RIMA_WR_WRITE << RIMA_WR_KIND_SHIFT) | idx;
        wr.sg_list = sl->num_sge ? sl->sge : NULL;
        wr.num_sge = sl->num_sge;
        wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
        wr.send_flags = IBV_SEND_SIGNALED | (sl->flags & IBV_SEND_SOLICITED);
        uint32_t kind = sl->span ? RIMA_SW_IMM_MSG : RIMA_SW_IMM_ZERO;
        wr.imm_data = htonl(((uint32_t)sl->pos & ~RIMA_SW_KIND_MASK) | kind);
        wr.wr.rdma.remote_addr = s->dst.region_addr + (sl->span ? off : 0);
        wr.wr.rdma.rkey = s->dst.region_rkey;
        int err = post_one(s, &wr);
        if (err)
            return err;
        sl->state = RIMA_SLOT_INFLIGHT;
        s->st.writes++;
        s->write_idx++;
        s->recovering = false;
        *progress = true;
    }
    return 0;
}

static int issue_pads(struct rima_sender *s, bool *progress)
{
    while (s->dead_n) {
        struct rima_dead d = s->dead[0];
        if (!room(s, d.pos, RIMA_SW_PAD_RECORD_BYTES)) {
            s->st.flow_waits += !s->read_inflight;
            return post_head_read(s);
        }
        if (!s->rec_free_n || s->sq_used >= s->sq_depth)
            return 0;
        uint32_t rec = s->rec_free[--s->rec_free_n];
        store_le64(rec_word(s, rec), d.span);
        struct ibv_sge sge = {.addr = (uint64_t)(uintptr_t)rec_word(s, rec),
                              .length = RIMA_SW_PAD_RECORD_BYTES,
                              .lkey = s->scratch_mr->lkey};
        struct ibv_send_wr wr;
        memset(&wr, 0, sizeof(wr));
        wr.wr_id = ((uint64_t)RIMA_WR_PAD << RIMA_WR_KIND_SHIFT) | rec;
        wr.sg_list = &sge;
        wr.num_sge = 1;
        wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
        wr.send_flags = IBV_SEND_SIGNALED;
        wr.imm_data = htonl(((uint32_t)d.pos & ~RIMA_SW_KIND_MASK) | RIMA_SW_IMM_PAD);
        wr.wr.rdma.remote_addr = s->dst.region_addr + d.pos % s->dst.region_bytes;
        wr.wr.rdma.rkey = s->dst.region_rkey;
        int err = post_one(s, &wr);
        if (err) {
            s->rec_free[s->rec_free_n++] = rec;
            return err;
        }
        memmove(s->dead, s->dead + 1, (s->dead_n - 1) * sizeof(*s->dead));
        s->dead_n--;
        *progress = true;
    }
    return 0;
}

/* After a failed completion (the QP is in error): appends never posted
 * complete with a flush error so the caller sees every one of them. */
static void flush_unposted(struct rima_sender *s)
{
    for (uint64_t j = s->retire_idx; j < s->post_idx; j++) {
        struct rima_slot *sl = &s->slots[j % s->window];
        if (sl->state == RIMA_SLOT_WAIT_FAA || sl->state == RIMA_SLOT_RESERVED) {
            sl->state = RIMA_SLOT_DONE;
            sl->status = IBV_WC_WR_FLUSH_ERR;
        }
    }
}

int rima_sw_progress(struct rima_sender *s)
{
    if (s->failed) {
        flush_unposted(s);
        return 0;
    }
    bool progress = true;
    while (progress) {
        progress = false;
        int err = issue_pads(s, &progress);
        if (!err)
            err = issue_faas(s, &progress);
        if (!err)
            err = issue_writes(s, &progress);
        if (err)
            return err;
    }
    return 0;
}
