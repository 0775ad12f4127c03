/* fastkv's server (fastkv.c has the overview): the store, the requests,
 * the allocator threads, set-up and loop. */
#include "protocols/rima/fastkv_priv.h"

/* ------------------------------------------------------------ server: store */

static unsigned fk_class(uint32_t len)
{
    unsigned c = FK_SLAB_MIN_SHIFT;
    while ((1ull << c) < len)
        c++;
    return c;
}

/* A chunk of class cls from its free list or the bump pointer; false when
 * the arena is full. */
static bool fk_chunk_alloc(struct fk_server *s, unsigned cls, uint64_t *off)
{
    if (s->free_head[cls]) {
        *off = s->free_head[cls] - 1;
        memcpy(&s->free_head[cls], s->arena + *off, 8);
        return true;
    }
    uint64_t size = 1ull << cls;
    if (s->arena_top + size > s->arena_bytes)
        return false;
    *off = s->arena_top;
    s->arena_top += size;
    return true;
}

static void fk_chunk_free(struct fk_server *s, unsigned cls, uint64_t off)
{
    memcpy(s->arena + off, &s->free_head[cls], 8);
    s->free_head[cls] = off + 1;
}

static struct fk_item *fk_lookup(struct fk_server *s, uint64_t key, bool insert)
{
    uint64_t mask = s->table_cap - 1;
    struct fk_item *tomb = NULL;
    for (uint64_t i = fk_mix(key) & mask, n = 0; n < s->table_cap; i = (i + 1) & mask, n++) {
        struct fk_item *it = &s->table[i];
        if (it->key == key && it->used)
            return it;
        if (it->key == 0) /* never used: the key is absent */
            return insert ? (tomb ? tomb : it) : NULL;
        if (!it->used && !tomb)
            tomb = it;
    }
    return insert ? tomb : NULL;
}

/* ------------------------------------------------------------ server: requests */

/* Send a response to `client`: header + optional value from the arena.
 * The header slot is freed on the send completion (wr_id = its index). */
static int fk_respond(struct fk *f, uint32_t client, const struct fk_resp *r, uint64_t val_off,
                      uint32_t val_len)
{
    struct fk_server *s = &f->s;
    if (s->hdr_top == 0) {
        fprintf(stderr, "%s: out of response headers\n", f->prog);
        return 1;
    }
    uint32_t h = s->hdr_free[--s->hdr_top];
    memcpy(s->hdrs + (uint64_t)h * FK_HDR_SLOT_BYTES, r, sizeof(*r));
    struct ibv_sge sge[2] = {
        {.addr = (uintptr_t)(s->hdrs + (uint64_t)h * FK_HDR_SLOT_BYTES),
         .length = FK_RESP_BYTES,
         .lkey = s->hdrs_mr->lkey},
        {.addr = (uintptr_t)(s->arena + val_off), .length = val_len, .lkey = s->arena_mr->lkey},
    };
    struct ibv_send_wr wr = {.wr_id = h,
                             .sg_list = sge,
                             .num_sge = val_len ? 2 : 1,
                             .opcode = IBV_WR_SEND,
                             .send_flags = IBV_SEND_SIGNALED},
                       *bad = NULL;
    int err = ibv_post_send(s->qps[client], &wr, &bad);
    if (err) {
        fprintf(stderr, "%s: ibv_post_send (response): %s\n", f->prog, strerror(err));
        return 1;
    }
    return 0;
}

/* One request message p[0..len) (already counted as outstanding).  The
 * caller releases the receive buffer after this returns; GET values are
 * sent from the arena, SET values are copied into it. */
static int fk_serve(struct fk *f, const uint8_t *p, uint32_t len)
{
    struct fk_server *s = &f->s;
    struct fk_req q;
    if (len < FK_REQ_BYTES) {
        fprintf(stderr, "%s: VERIFY FAILED: a %u-byte request (header %u)\n", f->prog, len,
                FK_REQ_BYTES);
        return 2;
    }
    memcpy(&q, p, sizeof(q));
    if (q.client >= f->o.clients || q.slot >= f->o.window ||
        (q.op == FK_OP_SET && q.value_len != len - FK_REQ_BYTES) ||
        (q.op != FK_OP_SET && q.op != FK_OP_GET && q.op != FK_OP_RTS) ||
        q.key >> 32 != (uint64_t)q.client + 1 || fk_key_server(q.key, f->o.servers) != f->o.id) {
        fprintf(stderr,
                "%s: VERIFY FAILED: malformed request (op %u client %u slot %u len %u/%u key "
                "%#" PRIx64 ")\n",
                f->prog, q.op, q.client, q.slot, q.value_len, len, q.key);
        return 2;
    }
    s->res.requests++;
    struct fk_resp r = {.slot = q.slot, .key = q.key};
    if (q.op == FK_OP_GET) {
        struct fk_item *it = fk_lookup(s, q.key, false);
        if (!it) {
            r.status = FK_ST_MISS;
            return fk_respond(f, q.client, &r, 0, 0);
        }
        r.status = FK_ST_HIT;
        r.value_len = it->len;
        r.checksum = it->checksum;
        return fk_respond(f, q.client, &r, it->off, it->len);
    }
    if (q.op == FK_OP_RTS) { /* split-alloc: wait for a buffer (fk_alloc_*) */
        uint64_t g = 0;
        while (g < s->ngrants && s->grants[g].busy)
            g++;
        if (g == s->ngrants || q.value_len + FK_REQ_BYTES > f->o.max_msg) {
            fprintf(stderr, "%s: bad request-to-send (grants %" PRIu64 ", len %u)\n", f->prog,
                    s->ngrants, q.value_len);
            return 2;
        }
        s->grants[g] = (struct fk_grant){
            .client = q.client, .slot = q.slot, .len = q.value_len + FK_REQ_BYTES, .busy = true};
        s->alloc_queue[s->aq_tail++ % s->ngrants] = (uint32_t)g;
        s->res.requests--; /* counted when the message itself arrives */
        return 0;
    }
    /* SET */
    const uint8_t *v = p + FK_REQ_BYTES;
    uint32_t sum = fk_fnv(v, q.value_len);
    if (sum != q.checksum) {
        fprintf(stderr,
                "%s: VERIFY FAILED: SET of key %#" PRIx64 " (%u bytes) arrived with checksum "
                "%08x, sent %08x\n",
                f->prog, q.key, q.value_len, sum, q.checksum);
        r.status = FK_ST_ERROR;
        f->status = 2;
        return fk_respond(f, q.client, &r, 0, 0);
    }
    struct fk_item *it = fk_lookup(s, q.key, true);
    if (!it) {
        fprintf(stderr, "%s: hash table full\n", f->prog);
        return 1;
    }
    if (it->used) {
        fk_chunk_free(s, it->cls, it->off);
        it->used = false;
        s->items--;
    }
    unsigned cls = fk_class(q.value_len ? q.value_len : 1);
    uint64_t off = 0;
    if (cls > FK_SLAB_MAX_SHIFT || !fk_chunk_alloc(s, cls, &off)) {
        r.status = FK_ST_NOT_STORED; /* the old value is gone too */
        it->key = it->key ? it->key : 1;
        return fk_respond(f, q.client, &r, 0, 0);
    }
    host_memcpy(s->arena + off, v, q.value_len); /* the memcpy cost W of Table 4 */
    if (f->o.inject_every && q.value_len && ++s->injected % f->o.inject_every == 0)
        s->arena[off + q.value_len / 2] ^= 0x10; /* after the checksum was taken */
    *it = (struct fk_item){.key = q.key,
                           .off = off,
                           .len = q.value_len,
                           .checksum = sum,
                           .cls = (uint8_t)cls,
                           .used = true};
    s->items++;
    r.status = FK_ST_STORED;
    return fk_respond(f, q.client, &r, 0, 0);
}

/* ------------------------------------------------------------ server: allocator threads */

/* Table 6 row 3: an allocation takes --alloc-ns of host time before the
 * buffer exists (Section 5.2.1: kalloc + mlock, 0.97 ms median, 1 ms used),
 * then the exact size is allocated and registered. */
static void fk_allocator_thread(void *arg)
{
    struct fk_allocator *a = arg;
    struct fk_server *s = a->srv;
    for (;;) {
        int st;
        while ((st = atomic_load(&a->state)) != FK_ALLOC_JOB && st != FK_ALLOC_EXIT)
            host_relax();
        if (st == FK_ALLOC_EXIT)
            return;
        struct fk_grant *g = &s->grants[a->grant];
        host_compute(a->alloc_ns);
        /* A buffer of its own for this message, from host_alloc: page
         * aligned, seen by the host model at a deterministic address, and
         * forgotten by it again when host_free gives it back.  (A plain
         * mmap'd block was page aligned too, but the host model kept the
         * line state of its pages after munmap: the next grant mapped at
         * the same address, as the kernel does under glibc but not under
         * ASan's allocator, found them warm, and the run's results
         * depended on the allocator.) */
        size_t bytes = fk_grant_map_bytes(g->len);
        void *mem = host_alloc(bytes, HOST_SOCKET_LOCAL);
        if (mem) {
            g->mr = ibv_reg_mr(s->arena_mr->pd, mem, bytes,
                               IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
            if (g->mr)
                g->buf = mem;
            else
                host_free(mem, bytes);
        }
        a->failed = !g->mr;
        atomic_store(&a->state, FK_ALLOC_DONE);
    }
}

/* Hand queued grants to idle allocators; send GRANTs for finished ones. */
static int fk_alloc_progress(struct fk *f, bool *progressed)
{
    struct fk_server *s = &f->s;
    for (uint64_t i = 0; i < f->o.alloc_threads; i++) {
        struct fk_allocator *a = &s->alloc[i];
        int st = atomic_load(&a->state);
        if (st == FK_ALLOC_DONE) {
            struct fk_grant *g = &s->grants[a->grant];
            if (a->failed) {
                fprintf(stderr, "%s: on-demand allocation of %u bytes failed\n", f->prog, g->len);
                return 1;
            }
            s->large_bytes += ((uint64_t)g->len + 63) & ~(uint64_t)63;
            if (s->large_bytes > s->large_bytes_peak)
                s->large_bytes_peak = s->large_bytes;
            s->res.allocs++;
            struct fk_resp r = {.status = FK_ST_GRANT,
                                .slot = g->slot,
                                .addr = (uintptr_t)g->buf,
                                .rkey = g->mr->rkey,
                                .grant = a->grant};
            atomic_store(&a->state, FK_ALLOC_IDLE);
            st = FK_ALLOC_IDLE;
            *progressed = true;
            if (fk_respond(f, g->client, &r, 0, 0))
                return 1;
        }
        if (st == FK_ALLOC_IDLE && s->aq_head != s->aq_tail) {
            a->grant = s->alloc_queue[s->aq_head++ % s->ngrants];
            atomic_store(&a->state, FK_ALLOC_JOB);
            *progressed = true;
        }
    }
    return 0;
}

/* ------------------------------------------------------------ server: setup and loop */

int fk_server_setup(struct fk *f)
{
    struct fk_server *s = &f->s;
    const struct fk_opts *o = &f->o;
    enum fk_transport t = o->transport;
    uint64_t C = o->clients, W = o->window;
    f->npeers = (uint32_t)C;
    int ra = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
    if (!fk_transports[t].rima) {
        s->nbufs = t == FK_SRQ ? fk_srq_buffers(o) : C * W;
        s->buf_bytes = t == FK_SRQ ? o->max_msg : o->small_max;
    }
    f->cq = fk_cq(f, s->nbufs + C * (W + 4) + 64);
    f->scq = fk_cq(f, C * (2 * W + 4) + 64);
    if (!f->cq || !f->scq)
        return 1;
    if (fk_transports[t].rima) {
        struct rima_aq_opts ao = {.mode = t == FK_RIMA ? RIMA_HW : RIMA_SW,
                                  .region_bytes = o->aq_region_bytes,
                                  .recv_depth = (uint32_t)(C * W + 16)};
        s->aq = rima_aq_create(f->conn.pd, f->cq, &ao);
        if (!s->aq) {
            fprintf(stderr, "%s: rima_aq_create(%s, %" PRIu64 " bytes): %s\n", f->prog,
                    t == FK_RIMA ? "hw" : "sw", o->aq_region_bytes, strerror(errno));
            return 1;
        }
    } else {
        s->srq = fk_srq(f, s->nbufs);
        if (!s->srq || fk_alloc_mr(f, s->nbufs * s->buf_bytes, ra, &s->rbuf, &s->rbuf_mr))
            return 1;
        for (uint64_t i = 0; i < s->nbufs; i++)
            if (fk_post_recv(f, s->srq, s->rbuf, s->buf_bytes, s->rbuf_mr->lkey, i))
                return 1;
    }
    if (fk_alloc_mr(f, (C * FK_WORDS_PER_CLIENT + 8) * 8, f->access, (uint8_t **)&s->ctrl,
                    &s->ctrl_mr))
        return 1;
    if (t == FK_SPLIT_FAA || t == FK_SPLIT_PRESEND) {
        s->big_bytes = t == FK_SPLIT_FAA ? o->shared_bytes : C * o->max_msg;
        if (fk_alloc_mr(f, s->big_bytes, ra, &s->big, &s->big_mr))
            return 1;
    }
    s->arena_bytes = o->store_bytes;
    if (fk_alloc_mr(f, s->arena_bytes, IBV_ACCESS_LOCAL_WRITE, &s->arena, &s->arena_mr))
        return 1;
    s->table_cap = 64;
    while (s->table_cap < 2 * C * o->keys)
        s->table_cap <<= 1;
    s->table = calloc(s->table_cap, sizeof(*s->table));
    s->nhdr = C * (W + 1) + 16;
    s->hdr_free = calloc(s->nhdr, sizeof(*s->hdr_free));
    if (!s->table || !s->hdr_free ||
        fk_alloc_mr(f, s->nhdr * FK_HDR_SLOT_BYTES, IBV_ACCESS_LOCAL_WRITE, &s->hdrs, &s->hdrs_mr))
        return 1;
    for (uint64_t i = 0; i < s->nhdr; i++)
        s->hdr_free[s->hdr_top++] = (uint32_t)(s->nhdr - 1 - i);
    if (t == FK_SPLIT_ALLOC) {
        s->ngrants = C * W;
        s->grants = calloc(s->ngrants, sizeof(*s->grants));
        s->alloc_queue = calloc(s->ngrants, sizeof(*s->alloc_queue));
        s->alloc = calloc(o->alloc_threads, sizeof(*s->alloc));
        if (!s->grants || !s->alloc_queue || !s->alloc)
            return 1;
        for (uint64_t i = 0; i < o->alloc_threads; i++) {
            s->alloc[i].srv = s;
            s->alloc[i].alloc_ns = o->alloc_ns;
            atomic_init(&s->alloc[i].state, FK_ALLOC_IDLE);
            s->alloc[i].handle = host_thread_start(fk_allocator_thread, &s->alloc[i]);
            if (s->alloc[i].handle < 0) {
                fprintf(stderr, "%s: host_thread_start: %s\n", f->prog, strerror(errno));
                return 1;
            }
        }
    }
    s->qps = calloc(C, sizeof(*s->qps));
    if (!s->qps)
        return 1;
    for (uint64_t i = 0; i < C; i++)
        if (!(s->qps[i] = fk_qp(f, f->scq, f->cq, s->srq, (uint32_t)(2 * W + 4))))
            return 1;
    struct fk_conn_hdr mine = {.ctrl_rkey = s->ctrl_mr->rkey,
                               .ctrl_addr = (uintptr_t)s->ctrl,
                               .big_rkey = s->big_mr ? s->big_mr->rkey : 0,
                               .big_addr = (uintptr_t)s->big,
                               .big_bytes = s->big_bytes};
    if (s->aq) {
        struct rima_aq_remote rem;
        if (rima_aq_export(s->aq, &rem)) {
            fprintf(stderr, "%s: rima_aq_export: %s\n", f->prog, strerror(errno));
            return 1;
        }
        rima_remote_encode(&rem, mine.rima_remote);
    }
    int rc = fk_exchange_connect(f, s->qps, &mine);
    if (rc)
        return rc;
    char key[FK_KEY_MAX];
    snprintf(key, sizeof(key), "%s/ready/s%" PRIu64, o->name, o->id);
    uint8_t one = 1;
    return fk_put(f, key, &one, 1);
}

/* Footprint of this server's receive memory (Section 5.1: what holds
 * incoming messages). */
void fk_server_footprint(struct fk *f)
{
    struct fk_server *s = &f->s;
    s->res.small_bytes = s->nbufs * s->buf_bytes;
    s->res.posted_bytes = s->res.small_bytes;
    switch (f->o.transport) {
    case FK_SPLIT_ALLOC:
        s->res.large_bytes_peak = s->large_bytes_peak;
        break;
    case FK_SPLIT_FAA:
    case FK_SPLIT_PRESEND:
        s->res.large_bytes_peak = s->big_bytes;
        break;
    case FK_RIMA:
    case FK_RIMA_SW:
        s->res.large_bytes_peak = s->aq_peak_footprint;
        break;
    default:
        break;
    }
    s->res.footprint_bytes = s->res.small_bytes + s->res.large_bytes_peak;
    s->res.peak_outstanding = s->peak_outstanding;
}

static void fk_outstanding(struct fk_server *s, int delta)
{
    s->outstanding = (uint64_t)((int64_t)s->outstanding + delta);
    if (s->outstanding > s->peak_outstanding)
        s->peak_outstanding = s->outstanding;
}

/* A receive completion of the request SRQ (srq / split). */
static int fk_server_recv(struct fk *f, const struct ibv_wc *wc)
{
    struct fk_server *s = &f->s;
    uint64_t b = wc->wr_id;
    int rc = 0;
    if (wc->opcode == IBV_WC_RECV) {
        fk_outstanding(s, +1);
        rc = fk_serve(f, s->rbuf + b * s->buf_bytes, wc->byte_len);
        const struct fk_req *q = (const void *)(s->rbuf + b * s->buf_bytes);
        if (rc == 0 && q->op != FK_OP_RTS)
            fk_outstanding(s, -1);
    } else if (wc->opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
        uint32_t imm = (uint32_t)wc->imm_data;
        uint32_t kind = imm >> FK_IMM_KIND_SHIFT, idx = imm & FK_IMM_INDEX_MASK;
        const uint8_t *p = NULL;
        struct fk_grant *g = NULL;
        if (kind == FK_IMM_ALLOC && f->o.transport == FK_SPLIT_ALLOC && idx < s->ngrants &&
            s->grants[idx].busy && s->grants[idx].len == wc->byte_len) {
            g = &s->grants[idx];
            p = g->buf;
        } else if (kind == FK_IMM_FAA && f->o.transport == FK_SPLIT_FAA &&
                   (uint64_t)idx * FK_ALIGN + wc->byte_len <= s->big_bytes) {
            p = s->big + (uint64_t)idx * FK_ALIGN;
            fk_outstanding(s, +1);
        } else if (kind == FK_IMM_PRESEND && f->o.transport == FK_SPLIT_PRESEND &&
                   idx < f->o.clients && wc->byte_len <= f->o.max_msg) {
            p = s->big + (uint64_t)idx * f->o.max_msg;
            fk_outstanding(s, +1);
        } else {
            fprintf(stderr, "%s: VERIFY FAILED: unexpected immediate %#x (%u bytes)\n", f->prog,
                    imm, wc->byte_len);
            return 2;
        }
        rc = fk_serve(f, p, wc->byte_len);
        fk_outstanding(s, -1);
        if (g) {
            ibv_dereg_mr(g->mr);
            host_free(g->buf, fk_grant_map_bytes(g->len));
            s->large_bytes -= ((uint64_t)g->len + 63) & ~(uint64_t)63;
            *g = (struct fk_grant){0};
        }
    } else {
        fprintf(stderr, "%s: unexpected receive opcode %d\n", f->prog, (int)wc->opcode);
        return 1;
    }
    if (rc)
        return rc;
    return fk_post_recv(f, s->srq, s->rbuf, s->buf_bytes, s->rbuf_mr->lkey, b);
}

/* Peak of the append queue's footprint (HW: committed chunks; SW: the
 * region, control page and receive WQEs). */
static void fk_aq_sample(struct fk_server *s)
{
    struct rima_aq_stats st;
    if (s->aq && rima_aq_query(s->aq, &st) == 0 && st.footprint_bytes > s->aq_peak_footprint)
        s->aq_peak_footprint = st.footprint_bytes;
}

int fk_server_loop(struct fk *f)
{
    struct fk_server *s = &f->s;
    struct ibv_wc wc[FK_POLL_BATCH];
    struct rima_msg msg[FK_POLL_BATCH];
    volatile uint64_t *done = s->ctrl;
    for (;;) {
        bool progressed = false;
        if (s->aq) {
            (void)host_now_ns(); /* no park inside (fk_idle) */
            int n = rima_poll_aq(s->aq, FK_POLL_BATCH, msg);
            if (n < 0) {
                fprintf(stderr, "%s: rima_poll_aq: %s\n", f->prog, strerror(errno));
                return 1;
            }
            for (int i = 0; i < n; i++) {
                fk_outstanding(s, +1);
                int rc = fk_serve(f, msg[i].addr, msg[i].len);
                fk_outstanding(s, -1);
                if (rc)
                    return rc;
                int err = rima_aq_consume(s->aq, &msg[i]);
                if (err) {
                    fprintf(stderr, "%s: rima_aq_consume: %s\n", f->prog, strerror(err));
                    return 1;
                }
            }
            if (n > 0) {
                /* ibv_query_aq is a control-path verb (costs host time):
                 * sample the committed bytes every 64th busy poll and at
                 * the end (fk_aq_sample). */
                if (s->aq_samples++ % 64 == 0)
                    fk_aq_sample(s);
                progressed = true;
            }
        } else {
            int n = fk_poll(f->cq, FK_POLL_BATCH, wc);
            if (n < 0) {
                fprintf(stderr, "%s: ibv_poll_cq failed\n", f->prog);
                return 1;
            }
            for (int i = 0; i < n; i++) {
                if (!fk_wc_ok(f, &wc[i]))
                    return 1;
                int rc = fk_server_recv(f, &wc[i]);
                if (rc)
                    return rc;
            }
            progressed |= n > 0;
        }
        int n = fk_poll(f->scq, FK_POLL_BATCH, wc);
        for (int i = 0; i < n; i++) {
            if (!fk_wc_ok(f, &wc[i]))
                return 1;
            s->hdr_free[s->hdr_top++] = (uint32_t)wc[i].wr_id;
        }
        progressed |= n > 0;
        if (s->alloc && fk_alloc_progress(f, &progressed))
            return 1;
        if (!progressed) {
            uint64_t c = 0;
            while (c < f->o.clients && done[c * FK_WORDS_PER_CLIENT])
                c++;
            if (c == f->o.clients && s->hdr_top == s->nhdr && s->outstanding == 0)
                break;
        }
        fk_idle(f, progressed);
    }
    fk_aq_sample(s);
    for (uint64_t c = 0; c < f->o.clients; c++) {
        uint64_t st = done[c * FK_WORDS_PER_CLIENT] - 1;
        if (st > (uint64_t)f->status)
            f->status = (int)st;
    }
    return 0;
}
