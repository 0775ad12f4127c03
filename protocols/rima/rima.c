/* The portable append-queue layer (rima.h): the API, the hardware mode over
 * the verbs of <rnicsim/rima.h>, the head tracker both modes share, and the
 * sender's slot ring.  The software emulation is in rima_sw.c;
 * docs/rima-portable.md explains both.
 *
 * Hardware verbs and the real rdma-core build: under RNICSIM_REAL_VERBS the
 * hardware verbs do not exist (the system libibverbs has no ibv_create_aq,
 * a provider rejects IBV_WR_APPEND), so nothing here references them:
 * RIMA_AUTO means SW and RIMA_HW fails with EOPNOTSUPP.  In the simulator
 * a device without append queues (profile rima.tpt_entries = 0) answers
 * ibv_create_aq with EOPNOTSUPP: RIMA_AUTO then means SW as well. */
#include "protocols/rima/rima.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "protocols/rima/rima_priv.h"
#include "rnicsim/host.h"

#ifndef RNICSIM_REAL_VERBS
#define RIMA_HAVE_HW 1
#else
#define RIMA_HAVE_HW 0
#endif

/* wr_id of the layer's own send WRs: kind in the top 4 bits. */
#define RIMA_WR_KIND_SHIFT 60

/* ------------------------------------------------------------ encoding */

static void put_le(uint8_t *p, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_le(const uint8_t *p, int bytes)
{
    uint64_t v = 0;
    for (int i = 0; i < bytes; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

#define RIMA_REMOTE_MAGIC 0x414d4952u /* "RIMA" little-endian */
#define RIMA_REMOTE_VERSION 1u

void rima_remote_encode(const struct rima_aq_remote *in, uint8_t out[RIMA_REMOTE_BYTES])
{
    memset(out, 0, RIMA_REMOTE_BYTES);
    put_le(out + 0, RIMA_REMOTE_MAGIC, 4);
    out[4] = RIMA_REMOTE_VERSION;
    out[5] = (uint8_t)in->mode;
    put_le(out + 8, in->aq_num, 4);
    put_le(out + 12, in->region_rkey, 4);
    put_le(out + 16, in->region_addr, 8);
    put_le(out + 24, in->region_bytes, 8);
    put_le(out + 32, in->ctrl_addr, 8);
    put_le(out + 40, in->ctrl_rkey, 4);
}

int rima_remote_decode(const uint8_t in[RIMA_REMOTE_BYTES], struct rima_aq_remote *out)
{
    if (!in || !out || get_le(in, 4) != RIMA_REMOTE_MAGIC || in[4] != RIMA_REMOTE_VERSION ||
        (in[5] != RIMA_HW && in[5] != RIMA_SW)) {
        errno = EINVAL;
        return -1;
    }
    memset(out, 0, sizeof(*out));
    out->mode = (enum rima_mode)in[5];
    out->aq_num = (uint32_t)get_le(in + 8, 4);
    out->region_rkey = (uint32_t)get_le(in + 12, 4);
    out->region_addr = get_le(in + 16, 8);
    out->region_bytes = get_le(in + 24, 8);
    out->ctrl_addr = get_le(in + 32, 8);
    out->ctrl_rkey = (uint32_t)get_le(in + 40, 4);
    return 0;
}

/* ------------------------------------------------------------ head tracker */

static void heap_swap(struct rima_ival *a, struct rima_ival *b)
{
    struct rima_ival t = *a;
    *a = *b;
    *b = t;
}

int rima_done_push(struct rima_aq *aq, uint64_t start, uint64_t end)
{
    if (aq->done_n == aq->done_cap) {
        uint32_t cap = aq->done_cap ? aq->done_cap * 2 : 64;
        struct rima_ival *d = realloc(aq->done, cap * sizeof(*d));
        if (!d)
            return ENOMEM;
        aq->done = d;
        aq->done_cap = cap;
    }
    uint32_t i = aq->done_n++;
    aq->done[i] = (struct rima_ival){start, end};
    while (i > 0 && aq->done[(i - 1) / 2].start > aq->done[i].start) {
        heap_swap(&aq->done[(i - 1) / 2], &aq->done[i]);
        i = (i - 1) / 2;
    }
    return 0;
}

static void heap_pop(struct rima_aq *aq)
{
    aq->done[0] = aq->done[--aq->done_n];
    uint32_t i = 0;
    for (;;) {
        uint32_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < aq->done_n && aq->done[l].start < aq->done[m].start)
            m = l;
        if (r < aq->done_n && aq->done[r].start < aq->done[m].start)
            m = r;
        if (m == i)
            break;
        heap_swap(&aq->done[i], &aq->done[m]);
        i = m;
    }
}

#if RIMA_HAVE_HW
/* HW wrap padding: the NIC puts a message that does not fit before the end
 * of the region at offset 0, and the bytes from the tail to the end become
 * padding, which no completion announces.  The head stuck at x (inside a
 * lap) with a consumed message at the lap's end B either waits for a
 * message still arriving at x, or faces the padding [x, B).  The NIC's
 * counters tell which: every byte the tail has passed is a message byte
 * (ibv_query_aq: bytes, counted when the tail advances) or padding, at most
 * one padding per lap, and the tail is within one lap of the head, so
 *     padding before B = (tail - bytes - padding skipped so far) mod R
 * and [x, B) is padding exactly when that is B - x.  (Reset on empty would
 * move the tail behind the layer's back: rima_aq_create refuses it.) */
static bool hw_gap_is_padding(struct rima_aq *aq, uint64_t lap_end)
{
    struct ibv_aq_attr a;
    memset(&a, 0, sizeof(a));
    if (ibv_query_aq(aq->hw, &a) != 0)
        return false;
    uint64_t r = aq->region_bytes;
    uint64_t pad = (a.tail % r + (r - a.bytes % r) + (r - aq->pad_bytes % r)) % r;
    return pad == lap_end - aq->head_pos;
}
#endif

void rima_head_advance(struct rima_aq *aq)
{
    uint64_t old = aq->head_pos;
    for (;;) {
        while (aq->done_n && aq->done[0].start <= aq->head_pos) {
            if (aq->done[0].end > aq->head_pos)
                aq->head_pos = aq->done[0].end;
            heap_pop(aq);
        }
        if (!aq->done_n || aq->mode != RIMA_HW)
            break;
#if RIMA_HAVE_HW
        uint64_t r = aq->region_bytes, lap_end = (aq->head_pos / r + 1) * r;
        if (aq->head_pos % r != 0 && aq->done[0].start == lap_end &&
            hw_gap_is_padding(aq, lap_end)) {
            aq->pad_bytes += lap_end - aq->head_pos;
            aq->head_pos = lap_end;
            continue;
        }
#endif
        break;
    }
    if (aq->head_pos == old)
        return;
    if (aq->mode == RIMA_SW)
        rima_sw_publish_head(aq); /* a store into host memory: at once */
    else if (aq->head_pos - aq->head_published >= aq->region_bytes / 4)
        rima_hw_publish_head(aq); /* else at the next rima_poll_aq */
}

/* HW: the head goes to the NIC with ibv_modify_aq (an MMIO doorbell write,
 * the cost of a posted PCIe write per call), so it is written once per
 * rima_poll_aq call, or when a quarter of the region was consumed since
 * the last write, not per consumed message. */
void rima_hw_publish_head(struct rima_aq *aq)
{
#if RIMA_HAVE_HW
    if (aq->mode != RIMA_HW || aq->head_pos == aq->head_published)
        return;
    struct ibv_aq_attr a;
    memset(&a, 0, sizeof(a));
    a.head = aq->head_pos % aq->region_bytes;
    if (ibv_modify_aq(aq->hw, &a, IBV_AQ_HEAD) == 0)
        aq->head_published = aq->head_pos;
#else
    (void)aq;
#endif
}

uint64_t rima_pos_from_low32(const struct rima_aq *aq, uint32_t low)
{
    return aq->head_pos + (uint32_t)(low - (uint32_t)aq->head_pos);
}

/* ------------------------------------------------------------ the queue */

#if RIMA_HAVE_HW
static int hw_aq_create(struct rima_aq *aq, const struct rima_aq_opts *o, bool quiet_fallback)
{
    if (o->flags & IBV_AQ_F_RESET_ON_EMPTY)
        return EINVAL; /* the layer tracks monotonic positions (hw_gap_is_padding) */
    struct ibv_aq_init_attr ia;
    memset(&ia, 0, sizeof(ia));
    ia.cq = aq->cq;
    ia.aq_context = aq;
    ia.attr.region_bytes = o->region_bytes;
    ia.attr.chunk_bytes = o->chunk_bytes;
    ia.attr.flags = o->flags;
    aq->hw = ibv_create_aq(aq->pd, &ia);
    if (!aq->hw)
        return errno ? errno : EINVAL;
    (void)quiet_fallback;
    aq->buf = aq->hw->buf;
    aq->region_bytes = aq->hw->region_bytes;
    return 0;
}
#endif

struct rima_aq *rima_aq_create(struct ibv_pd *pd, struct ibv_cq *cq, const struct rima_aq_opts *o)
{
    if (!pd || !cq || !o || o->region_bytes == 0 ||
        (o->mode != RIMA_AUTO && o->mode != RIMA_HW && o->mode != RIMA_SW)) {
        errno = EINVAL;
        return NULL;
    }
    struct rima_aq *aq = calloc(1, sizeof(*aq));
    if (!aq) {
        errno = ENOMEM;
        return NULL;
    }
    aq->pd = pd;
    aq->cq = cq;
    aq->region_bytes = o->region_bytes;
    int err = EOPNOTSUPP;
#if RIMA_HAVE_HW
    if (o->mode == RIMA_HW || o->mode == RIMA_AUTO) {
        aq->mode = RIMA_HW;
        err = hw_aq_create(aq, o, o->mode == RIMA_AUTO);
        /* AUTO: no append queues on this device -> the software path */
        if (err == EOPNOTSUPP && o->mode == RIMA_AUTO)
            err = -1;
    } else {
        err = -1;
    }
#else
    if (o->mode != RIMA_HW)
        err = -1; /* AUTO and SW: the software path */
#endif
    if (err == -1) {
        aq->mode = RIMA_SW;
        err = rima_sw_aq_create(aq, o);
    }
    if (err) {
        rima_sw_aq_destroy(aq);
        free(aq);
        errno = err;
        return NULL;
    }
    return aq;
}

int rima_aq_destroy(struct rima_aq *aq)
{
    if (!aq)
        return EINVAL;
    int err = 0;
#if RIMA_HAVE_HW
    if (aq->hw)
        err = ibv_destroy_aq(aq->hw);
    if (err)
        return err;
#endif
    rima_sw_aq_destroy(aq);
    free(aq->done);
    free(aq);
    return err;
}

enum rima_mode rima_aq_mode(const struct rima_aq *aq)
{
    return aq->mode;
}

uint8_t *rima_aq_buf(const struct rima_aq *aq)
{
    return aq->buf;
}

void rima_aq_qp_init_attr(const struct rima_aq *aq, struct ibv_qp_init_attr *attr)
{
    if (aq->mode == RIMA_SW) {
        attr->srq = aq->srq;
        attr->recv_cq = aq->cq;
        attr->cap.max_recv_wr = 0;
        attr->cap.max_recv_sge = 0;
    }
}

int rima_aq_export(const struct rima_aq *aq, struct rima_aq_remote *out)
{
    if (!aq || !out)
        return EINVAL;
    memset(out, 0, sizeof(*out));
    out->mode = aq->mode;
    out->region_addr = (uint64_t)(uintptr_t)aq->buf;
    out->region_bytes = aq->region_bytes;
#if RIMA_HAVE_HW
    if (aq->mode == RIMA_HW) {
        out->aq_num = aq->hw->aq_num;
        return 0;
    }
#endif
    out->region_rkey = aq->region_mr->rkey;
    out->ctrl_addr = (uint64_t)(uintptr_t)aq->ctrl;
    out->ctrl_rkey = aq->ctrl_mr->rkey;
    return 0;
}

int rima_wc_peek(struct rima_aq *aq, int want, struct ibv_wc **wc, bool *may_poll)
{
    if (aq->stash_i == aq->stash_n) {
        aq->stash_i = aq->stash_n = 0;
        if (!*may_poll)
            return 0;
        if (want > RIMA_STASH_WCS)
            want = RIMA_STASH_WCS;
        if (want < 1)
            want = 1;
        int k = ibv_poll_cq(aq->cq, want, aq->stash);
        if (k < want)
            *may_poll = false;
        if (k <= 0)
            return k < 0 ? -1 : 0;
        aq->stash_n = k;
    }
    *wc = &aq->stash[aq->stash_i];
    return 1;
}

void rima_wc_take(struct rima_aq *aq)
{
    aq->stash_i++;
}

#if RIMA_HAVE_HW
/* One receiver completion: 0 and *m filled (*delivered) or not (a hole,
 * consumed like padding); else an errno and nothing changed. */
static int hw_wc(struct rima_aq *aq, const struct ibv_wc *wc, struct rima_msg *m, bool *delivered)
{
    *delivered = false;
    if (wc->status == IBV_WC_WR_FLUSH_ERR && wc->opcode == IBV_WC_RECV_APPEND &&
        wc->wr_id < aq->region_bytes) {
        /* a hole: the tail moved for a message whose sender or receiving
         * QP failed before its last packet (rnicsim/rima.h); its bytes are
         * consumed at once, like padding, and it is not delivered */
        uint64_t pos =
            aq->head_pos +
            (wc->wr_id + aq->region_bytes - aq->head_pos % aq->region_bytes) % aq->region_bytes;
        if (wc->byte_len) {
            int err = rima_done_push(aq, pos, pos + wc->byte_len);
            if (err)
                return err;
            rima_head_advance(aq);
        }
        return 0;
    }
    if (wc->status != IBV_WC_SUCCESS)
        return EIO;
    if (wc->opcode != IBV_WC_RECV_APPEND || wc->wr_id >= aq->region_bytes)
        return EPROTO;
    *delivered = true;
    m->offset = wc->wr_id;
    m->addr = aq->buf + m->offset;
    m->len = wc->byte_len;
    m->qp_num = wc->qp_num;
    m->src_qp = wc->src_qp;
    m->pos = aq->head_pos +
             (m->offset + aq->region_bytes - aq->head_pos % aq->region_bytes) % aq->region_bytes;
    m->span = m->len;
    aq->delivered++;
    aq->delivered_bytes += m->len;
    if (m->pos + m->span - aq->head_pos > aq->peak_pending)
        aq->peak_pending = m->pos + m->span - aq->head_pos;
    return 0;
}

/* A bad completion after good ones: those are returned, the bad one stays
 * in the stash and the next call reports it (consuming it). */
static int hw_poll_aq(struct rima_aq *aq, int n, struct rima_msg *out)
{
    int got = 0;
    bool may_poll = true;
    while (got < n) {
        struct ibv_wc *wc = NULL;
        int k = rima_wc_peek(aq, n - got, &wc, &may_poll);
        if (k == 0)
            break;
        bool delivered = false;
        int err = k < 0 ? EIO : hw_wc(aq, wc, &out[got], &delivered);
        if (err) {
            if (got)
                return got;
            if (k > 0)
                rima_wc_take(aq);
            errno = err;
            return -1;
        }
        rima_wc_take(aq);
        got += delivered;
    }
    return got;
}
#endif

int rima_poll_aq(struct rima_aq *aq, int n, struct rima_msg *out)
{
    if (!aq || n < 0 || (n > 0 && !out)) {
        errno = EINVAL;
        return -1;
    }
#if RIMA_HAVE_HW
    if (aq->mode == RIMA_HW) {
        rima_hw_publish_head(aq);
        return hw_poll_aq(aq, n, out);
    }
#endif
    return rima_sw_poll_aq(aq, n, out);
}

int rima_aq_consume(struct rima_aq *aq, const struct rima_msg *msg)
{
    if (!aq || !msg || msg->pos < aq->head_pos ||
        msg->pos + msg->span > aq->head_pos + aq->region_bytes)
        return EINVAL;
    aq->consumed++;
    if (msg->span == 0)
        return 0; /* a zero-length message holds no bytes */
    int err = rima_done_push(aq, msg->pos, msg->pos + msg->span);
    if (err)
        return err;
    rima_head_advance(aq);
    return 0;
}

int rima_aq_query(struct rima_aq *aq, struct rima_aq_stats *out)
{
    if (!aq || !out)
        return EINVAL;
    memset(out, 0, sizeof(*out));
    out->mode = aq->mode;
    out->region_bytes = aq->region_bytes;
    out->messages = aq->delivered;
    out->bytes = aq->delivered_bytes;
    out->consumed = aq->consumed;
    out->pad_bytes = aq->pad_bytes;
    out->head_pos = aq->head_pos;
    out->peak_pending_bytes = aq->peak_pending;
    out->recv_depth = aq->recv_depth;
#if RIMA_HAVE_HW
    if (aq->mode == RIMA_HW) {
        struct ibv_aq_attr a;
        memset(&a, 0, sizeof(a));
        int err = ibv_query_aq(aq->hw, &a);
        if (err)
            return err;
        out->footprint_bytes = a.committed_bytes;
        out->rnr_naks = a.rnr_naks;
        return 0;
    }
#endif
    /* SW: the whole region is registered (pinned), plus the control page
     * and the receive WQEs (16 B each for a zero-SGE receive, estimate) */
    out->footprint_bytes = aq->region_bytes + 4096 + (uint64_t)aq->recv_depth * 16;
    return 0;
}

/* ------------------------------------------------------------ sender */

struct rima_sender *rima_sender_create(struct ibv_pd *pd, struct ibv_qp *qp, struct ibv_cq *cq,
                                       const struct rima_aq_remote *dst,
                                       const struct rima_sender_opts *o)
{
    uint32_t window = o && o->window ? o->window : 64;
    if (!pd || !qp || !cq || !dst || dst->region_bytes == 0 || window > 4096 ||
        (dst->mode != RIMA_HW && dst->mode != RIMA_SW)) {
        errno = EINVAL;
        return NULL;
    }
    if (dst->mode == RIMA_HW && !RIMA_HAVE_HW) {
        errno = EOPNOTSUPP;
        return NULL;
    }
    struct rima_sender *s = calloc(1, sizeof(*s));
    if (!s) {
        errno = ENOMEM;
        return NULL;
    }
    s->mode = dst->mode;
    s->qp = qp;
    s->cq = cq;
    s->dst = *dst;
    s->window = window;
    s->sq_depth = o && o->sq_depth ? o->sq_depth : 2 * window + 2;
    s->slots = calloc(window, sizeof(*s->slots));
    s->ready = calloc(window, sizeof(*s->ready));
    int err = s->slots && s->ready ? 0 : ENOMEM;
    if (!err && s->mode == RIMA_SW)
        err = rima_sw_sender_init(s, pd);
    if (err) {
        rima_sender_destroy(s);
        errno = err;
        return NULL;
    }
    return s;
}

int rima_sender_destroy(struct rima_sender *s)
{
    if (!s)
        return EINVAL;
    int err = 0;
    if (s->scratch_mr)
        err = ibv_dereg_mr(s->scratch_mr);
    free(s->scratch);
    free(s->faa_free);
    free(s->rec_free);
    free(s->faa_span);
    free(s->dead);
    free(s->slots);
    free(s->ready);
    free(s);
    return err;
}

uint32_t rima_sender_outstanding(const struct rima_sender *s)
{
    return (uint32_t)(s->post_idx - s->retire_idx);
}

void rima_sender_query(const struct rima_sender *s, struct rima_sender_stats *out)
{
    *out = s->st;
}

#if RIMA_HAVE_HW
static int hw_post(struct rima_sender *s, struct rima_slot *sl, uint32_t idx)
{
    struct ibv_send_wr wr, *bad = NULL;
    memset(&wr, 0, sizeof(wr));
    wr.wr_id = ((uint64_t)1 << RIMA_WR_KIND_SHIFT) | idx;
    wr.sg_list = sl->sge;
    wr.num_sge = sl->num_sge;
    wr.send_flags = (sl->flags & (IBV_SEND_INLINE | IBV_SEND_SOLICITED)) | IBV_SEND_SIGNALED;
    ibv_wr_append(&wr, s->dst.aq_num);
    int err = ibv_post_send(s->qp, &wr, &bad);
    if (err)
        return err;
    sl->state = RIMA_SLOT_INFLIGHT;
    s->sq_used++;
    return 0;
}
#endif

int rima_post_append(struct rima_sender *s, uint64_t wr_id, const struct ibv_sge *sg_list,
                     int num_sge, unsigned int flags)
{
    if (!s || num_sge < 0 || num_sge > RIMA_MAX_SGE || (num_sge > 0 && !sg_list) ||
        (flags & ~(unsigned)(IBV_SEND_SIGNALED | IBV_SEND_INLINE | IBV_SEND_SOLICITED)))
        return EINVAL;
    if (s->failed)
        return EIO;
    uint64_t len = 0;
    for (int i = 0; i < num_sge; i++)
        len += sg_list[i].length;
    /* HW: the NIC keeps one byte of the ring free (<rnicsim/rima.h>) */
    if (len >= s->dst.region_bytes || len > UINT32_MAX)
        return EINVAL;
    if ((flags & IBV_SEND_INLINE) && len > RIMA_INLINE_MAX)
        return EINVAL;
    /* SW: at most half the region, so that a message whose reservation
     * straddles the end fits at the next try (rima_sw.c) */
    if (s->mode == RIMA_SW && len > s->dst.region_bytes / 2)
        return EINVAL;
    if (s->post_idx - s->retire_idx >= s->window ||
        (s->mode == RIMA_HW && s->sq_used >= s->sq_depth))
        return ENOMEM;
    uint32_t idx = (uint32_t)(s->post_idx % s->window);
    struct rima_slot *sl = &s->slots[idx];
    memset(sl, 0, sizeof(*sl));
    sl->wr_id = wr_id;
    sl->flags = flags;
    sl->num_sge = num_sge;
    if (num_sge)
        memcpy(sl->sge, sg_list, (size_t)num_sge * sizeof(*sg_list));
    sl->len = (uint32_t)len;
    sl->span =
        (uint32_t)((len + RIMA_SW_ALIGN_BYTES - 1) / RIMA_SW_ALIGN_BYTES * RIMA_SW_ALIGN_BYTES);
    sl->state = RIMA_SLOT_WAIT_FAA;
    s->st.appends++;
#if RIMA_HAVE_HW
    if (s->mode == RIMA_HW) {
        int err = hw_post(s, sl, idx);
        if (err)
            return err;
        s->post_idx++;
        return 0;
    }
#endif
    if ((flags & IBV_SEND_INLINE) && len) {
        /* copy now: the caller may reuse its buffer when this returns */
        uint8_t *stage = s->scratch + (size_t)(2 * s->window + 2 * s->window + 1) * 8 +
                         (size_t)idx * RIMA_INLINE_MAX;
        uint32_t off = 0;
        for (int i = 0; i < num_sge; i++) {
            memcpy(stage + off, (const void *)(uintptr_t)sg_list[i].addr, sg_list[i].length);
            off += sg_list[i].length;
        }
        sl->num_sge = 1;
        sl->sge[0].addr = (uint64_t)(uintptr_t)stage;
        sl->sge[0].length = sl->len;
        sl->sge[0].lkey = s->scratch_mr->lkey;
    }
    s->post_idx++;
    int err = rima_sw_progress(s);
    return err;
}

/* Complete slots in posting order: hand out the signaled (and failed) ones. */
int rima_sender_retire(struct rima_sender *s)
{
    while (s->retire_idx < s->post_idx) {
        struct rima_slot *sl = &s->slots[s->retire_idx % s->window];
        if (sl->state != RIMA_SLOT_DONE)
            break;
        if ((sl->flags & IBV_SEND_SIGNALED) || sl->status != IBV_WC_SUCCESS)
            s->ready[s->ready_n++] = (struct rima_send_wc){
                .wr_id = sl->wr_id, .status = sl->status, .byte_len = sl->len};
        sl->state = RIMA_SLOT_FREE;
        s->retire_idx++;
    }
    return 0;
}

int rima_sw_handle_wc(struct rima_sender *s, const struct ibv_wc *wc);

int rima_poll_sender(struct rima_sender *s, int n, struct rima_send_wc *out)
{
    if (!s || n < 0 || (n > 0 && !out)) {
        errno = EINVAL;
        return -1;
    }
    struct ibv_wc wc[16];
    int k;
    do {
        k = ibv_poll_cq(s->cq, 16, wc);
        if (k < 0) {
            errno = EIO;
            return -1;
        }
        for (int i = 0; i < k; i++) {
            s->sq_used--;
            uint64_t kind = wc[i].wr_id >> RIMA_WR_KIND_SHIFT;
            if (s->mode == RIMA_HW || kind == 1) {
                struct rima_slot *sl =
                    &s->slots[(wc[i].wr_id & ((1ull << RIMA_WR_KIND_SHIFT) - 1)) % s->window];
                sl->state = RIMA_SLOT_DONE;
                sl->status = wc[i].status;
                if (wc[i].status != IBV_WC_SUCCESS && !s->failed)
                    s->failed = EIO;
                continue;
            }
            int err = rima_sw_handle_wc(s, &wc[i]);
            if (err) {
                errno = err;
                return -1;
            }
        }
    } while (k == 16);
    if (s->mode == RIMA_SW && !s->failed) {
        int err = rima_sw_progress(s);
        if (err) {
            errno = err;
            return -1;
        }
    }
    rima_sender_retire(s);
    int m = (int)s->ready_n < n ? (int)s->ready_n : n;
    if (m) {
        memcpy(out, s->ready, (size_t)m * sizeof(*out));
        memmove(s->ready, s->ready + m, (s->ready_n - (uint32_t)m) * sizeof(*out));
        s->ready_n -= (uint32_t)m;
    }
    return m;
}
