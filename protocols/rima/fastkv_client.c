/* fastkv's client (fastkv.c has the overview): set-up, issuing requests,
 * their responses, the loop and the drain. */
#include "protocols/rima/fastkv_priv.h"

/* ------------------------------------------------------------ client */

enum fk_wr_kind { FK_WR_SEND = 1, FK_WR_FAA, FK_WR_WRITE, FK_WR_DONE };
#define FK_WR(kind, slot) ((uint64_t)(kind) << 32 | (slot))

static uint64_t fk_slot_bytes(const struct fk *f)
{
    return f->o.max_msg;
}
static uint64_t fk_rslot_bytes(const struct fk *f)
{
    return f->o.max_msg + 64;
}

int fk_client_setup(struct fk *f)
{
    struct fk_client *c = &f->c;
    const struct fk_opts *o = &f->o;
    uint64_t S = o->servers, W = o->window;
    bool rima = fk_transports[o->transport].rima;
    f->npeers = (uint32_t)S;
    f->cq = fk_cq(f, 2 * W + 16);
    if (!f->cq)
        return 1;
    c->qps = calloc(S, sizeof(*c->qps));
    c->scqs = calloc(S, sizeof(*c->scqs));
    c->snd = calloc(S, sizeof(*c->snd));
    c->presend_busy = calloc(S, sizeof(*c->presend_busy));
    c->slots = calloc(W, sizeof(*c->slots));
    c->keys = calloc(o->keys, sizeof(*c->keys));
    c->total = o->warmup + o->requests;
    c->lat_all = calloc(o->requests, sizeof(uint64_t));
    c->lat_large = calloc(o->requests, sizeof(uint64_t));
    if (!c->qps || !c->scqs || !c->snd || !c->presend_busy || !c->slots || !c->keys ||
        !c->lat_all || !c->lat_large)
        return 1;
    c->win = fk_client_window(o, o->id);
    c->res.window = c->win;
    if (!rima && !(f->scq = fk_cq(f, S * (2 * W + 4) + 16)))
        return 1;
    int la = IBV_ACCESS_LOCAL_WRITE;
    if (fk_alloc_mr(f, W * fk_slot_bytes(f) + W * 8, la, &c->sbuf, &c->sbuf_mr) ||
        fk_alloc_mr(f, W * fk_rslot_bytes(f), la, &c->rbuf, &c->rbuf_mr))
        return 1;
    c->srq = fk_srq(f, W);
    if (!c->srq)
        return 1;
    for (uint64_t i = 0; i < W; i++)
        if (fk_post_recv(f, c->srq, c->rbuf, fk_rslot_bytes(f), c->rbuf_mr->lkey, i))
            return 1;
    for (uint64_t s = 0; s < S; s++) {
        if (rima && !(c->scqs[s] = fk_cq(f, 2 * W + 8)))
            return 1;
        if (!(c->qps[s] =
                  fk_qp(f, rima ? c->scqs[s] : f->scq, f->cq, c->srq, (uint32_t)(2 * W + 4))))
            return 1;
    }
    struct fk_conn_hdr mine = {0};
    int rc = fk_exchange_connect(f, c->qps, &mine);
    if (rc)
        return rc;
    if (rima)
        for (uint64_t s = 0; s < S; s++) {
            struct rima_aq_remote rem;
            if (rima_remote_decode(f->peer[s].rima_remote, &rem)) {
                fprintf(stderr, "%s: server %" PRIu64 " sent a bad RIMA descriptor\n", f->prog, s);
                return 1;
            }
            struct rima_sender_opts so = {.window = (uint32_t)W, .sq_depth = (uint32_t)(2 * W + 4)};
            c->snd[s] = rima_sender_create(f->conn.pd, c->qps[s], c->scqs[s], &rem, &so);
            if (!c->snd[s]) {
                fprintf(stderr, "%s: rima_sender_create: %s\n", f->prog, strerror(errno));
                return 1;
            }
        }
    char key[FK_KEY_MAX];
    for (uint64_t s = 0; s < S; s++) {
        uint8_t one = 0;
        snprintf(key, sizeof(key), "%s/ready/s%" PRIu64, o->name, s);
        if (fk_get(f, key, &one, 1))
            return 1;
    }
    /* Workload: sizes of Figure 2 truncated to one message, Poisson
     * arrivals, keys: all seeded by (seed, client id). */
    char err[160];
    uint64_t seed = fk_mix(o->seed * 0x100000001b3ull + o->id);
    if (wl_dist_parse(&c->dist, o->dist, seed, err, sizeof(err))) {
        fprintf(stderr, "%s: --dist=%s: %s\n", f->prog, o->dist, err);
        return 2;
    }
    wl_dist_set_transform(&c->dist, 1.0, (uint32_t)(o->max_msg - FK_REQ_BYTES));
    if (o->rate > 0 && wl_arrival_poisson(&c->arrival, o->rate, seed ^ 0xa5a5a5a5ull)) {
        fprintf(stderr, "%s: bad --rate\n", f->prog);
        return 2;
    }
    wl_rng_seed(&c->rng, seed ^ 0x5bd1e995ull);
    return 0;
}

/* Draw the next request: a key of this client not in flight, GET or SET,
 * value size. */
static void fk_draw(struct fk *f)
{
    struct fk_client *c = &f->c;
    const struct fk_opts *o = &f->o;
    uint32_t k = (uint32_t)(wl_rng_next(&c->rng) % o->keys);
    while (c->keys[k].inflight) /* at most window keys are: terminates */
        k = (uint32_t)((k + 1) % o->keys);
    c->next_key = k;
    c->next_get = wl_rng_unit(&c->rng) <= o->get_ratio && o->get_ratio > 0;
    c->next_len = c->next_get ? 0 : wl_dist_sample(&c->dist);
    if (o->rate > 0) {
        double gap = wl_arrival_next_gap_ns(&c->arrival, c->next_len + FK_REQ_BYTES);
        c->next_arrival_ns =
            (c->issued == 0 ? host_now_ns() : c->next_arrival_ns) + (uint64_t)(gap + 0.5);
    }
    c->have_next = true;
}

static int fk_post(struct fk *f, struct ibv_qp *qp, struct ibv_send_wr *wr)
{
    struct ibv_send_wr *bad = NULL;
    int err = ibv_post_send(qp, wr, &bad);
    if (err)
        fprintf(stderr, "%s: ibv_post_send: %s\n", f->prog, strerror(err));
    return err ? 1 : 0;
}

/* The whole request of slot j (header + value) to server s by
 * WRITE_WITH_IMM at raddr. */
static int fk_write_imm(struct fk *f, uint32_t j, uint32_t s, uint64_t raddr, uint32_t rkey,
                        uint32_t imm)
{
    struct fk_client *c = &f->c;
    struct ibv_sge sge = {.addr = (uintptr_t)(c->sbuf + j * fk_slot_bytes(f)),
                          .length = FK_REQ_BYTES + c->slots[j].len,
                          .lkey = c->sbuf_mr->lkey};
    struct ibv_send_wr wr = {.wr_id = FK_WR(FK_WR_WRITE, j),
                             .sg_list = &sge,
                             .num_sge = 1,
                             .opcode = IBV_WR_RDMA_WRITE_WITH_IMM,
                             .send_flags = IBV_SEND_SIGNALED,
                             .imm_data = (__be32)imm};
    wr.wr.rdma.remote_addr = raddr;
    wr.wr.rdma.rkey = rkey;
    c->slots[j].phase = FK_WAIT_RESP;
    return fk_post(f, c->qps[s], &wr);
}

static int fk_faa(struct fk *f, uint32_t j, uint32_t s)
{
    struct fk_client *c = &f->c;
    uint64_t add =
        ((uint64_t)FK_REQ_BYTES + c->slots[j].len + FK_ALIGN - 1) & ~(uint64_t)(FK_ALIGN - 1);
    struct ibv_sge sge = {.addr = (uintptr_t)(c->sbuf + f->o.window * fk_slot_bytes(f) + j * 8),
                          .length = 8,
                          .lkey = c->sbuf_mr->lkey};
    struct ibv_send_wr wr = {.wr_id = FK_WR(FK_WR_FAA, j),
                             .sg_list = &sge,
                             .num_sge = 1,
                             .opcode = IBV_WR_ATOMIC_FETCH_AND_ADD,
                             .send_flags = IBV_SEND_SIGNALED};
    wr.wr.atomic.remote_addr = f->peer[s].ctrl_addr + f->o.clients * FK_WORDS_PER_CLIENT * 8;
    wr.wr.atomic.rkey = f->peer[s].ctrl_rkey;
    wr.wr.atomic.compare_add = add;
    c->slots[j].phase = FK_WAIT_FAA;
    return fk_post(f, c->qps[s], &wr);
}

/* Try to issue the drawn request; false (nothing done) when its server has
 * no free presend slot or the client no free window slot. */
static int fk_issue(struct fk *f, bool *issued)
{
    struct fk_client *c = &f->c;
    const struct fk_opts *o = &f->o;
    enum fk_transport t = o->transport;
    uint64_t key = fk_client_key(o->id, c->next_key);
    uint32_t s = fk_key_server(key, o->servers);
    uint32_t msg = FK_REQ_BYTES + c->next_len;
    bool large = !c->next_get && msg > o->small_max;
    *issued = false;
    if (c->inflight >= c->win || (t == FK_SPLIT_PRESEND && large && c->presend_busy[s]))
        return 0;
    /* A response can overtake the completion of its append: the layer's
     * window (W) counts appends not yet completed, so wait for it too. */
    if (fk_transports[t].rima && rima_sender_outstanding(c->snd[s]) >= o->window)
        return 0;
    uint32_t j = 0;
    while (j < o->window && c->slots[j].phase != FK_FREE)
        j++;
    if (j == o->window)
        return 0;
    struct fk_key *k = &c->keys[c->next_key];
    struct fk_slot *sl = &c->slots[j];
    *sl = (struct fk_slot){.phase = FK_WAIT_RESP,
                           .key_idx = c->next_key,
                           .server = s,
                           .len = c->next_len,
                           .version = c->next_get ? k->version : k->version + 1,
                           .op = c->next_get ? FK_OP_GET : FK_OP_SET,
                           .large = large,
                           .timed = c->issued >= o->warmup,
                           .t0_ns = o->rate > 0 ? c->next_arrival_ns : host_now_ns()};
    uint8_t *p = c->sbuf + j * fk_slot_bytes(f);
    struct fk_req q = {
        .op = sl->op, .client = (uint32_t)o->id, .slot = j, .value_len = sl->len, .key = key};
    if (!c->next_get) {
        fk_fill(p + FK_REQ_BYTES, sl->len, key, sl->version);
        q.checksum = fk_fnv(p + FK_REQ_BYTES, sl->len);
    }
    bool rts = large && t == FK_SPLIT_ALLOC;
    if (rts)
        q.op = FK_OP_RTS;
    memcpy(p, &q, sizeof(q)); /* RTS: the header alone asks for a buffer (GRANT: SET) */
    k->inflight = true;
    c->issued++;
    c->inflight++;
    if (c->inflight > c->res.peak_inflight)
        c->res.peak_inflight = c->inflight;
    c->have_next = false;
    *issued = true;
    if (fk_transports[t].rima) {
        struct ibv_sge sge = {.addr = (uintptr_t)p, .length = msg, .lkey = c->sbuf_mr->lkey};
        int err = rima_post_append(c->snd[s], j, &sge, 1, IBV_SEND_SIGNALED);
        if (err)
            fprintf(stderr, "%s: rima_post_append: %s\n", f->prog, strerror(err));
        return err ? 1 : 0;
    }
    if (large && t == FK_SPLIT_FAA)
        return fk_faa(f, j, s);
    if (large && t == FK_SPLIT_PRESEND) {
        c->presend_busy[s] = true;
        return fk_write_imm(f, j, s, f->peer[s].big_addr + o->id * o->max_msg, f->peer[s].big_rkey,
                            (uint32_t)FK_IMM_PRESEND << FK_IMM_KIND_SHIFT | (uint32_t)o->id);
    }
    if (rts)
        sl->phase = FK_WAIT_GRANT;
    struct ibv_sge sge = {
        .addr = (uintptr_t)p, .length = rts ? FK_REQ_BYTES : msg, .lkey = c->sbuf_mr->lkey};
    struct ibv_send_wr wr = {.wr_id = FK_WR(FK_WR_SEND, j),
                             .sg_list = &sge,
                             .num_sge = 1,
                             .opcode = IBV_WR_SEND,
                             .send_flags = IBV_SEND_SIGNALED};
    return fk_post(f, c->qps[s], &wr);
}

static int fk_fail(struct fk *f)
{
    f->status = 2;
    f->c.res.failed = 1;
    return 0;
}

/* A response in receive buffer r. */
static int fk_client_resp(struct fk *f, const struct ibv_wc *wc)
{
    struct fk_client *c = &f->c;
    const struct fk_opts *o = &f->o;
    uint64_t r = wc->wr_id;
    const uint8_t *p = c->rbuf + r * fk_rslot_bytes(f);
    struct fk_resp rs;
    memcpy(&rs, p, sizeof(rs));
    if (wc->byte_len < FK_RESP_BYTES || rs.slot >= o->window ||
        c->slots[rs.slot].phase == FK_FREE) {
        fprintf(stderr, "%s: VERIFY FAILED: bad response (%u bytes, slot %u)\n", f->prog,
                wc->byte_len, rs.slot);
        return 2;
    }
    uint32_t j = rs.slot;
    struct fk_slot *sl = &c->slots[j];
    struct fk_key *k = &c->keys[sl->key_idx];
    uint64_t key = fk_client_key(o->id, sl->key_idx);
    int rc = fk_post_recv(f, c->srq, c->rbuf, fk_rslot_bytes(f), c->rbuf_mr->lkey, r);
    if (rc)
        return rc;
    if (rs.status == FK_ST_GRANT) {
        if (sl->phase != FK_WAIT_GRANT) {
            fprintf(stderr, "%s: VERIFY FAILED: unexpected GRANT for slot %u\n", f->prog, j);
            return 2;
        }
        struct fk_req q;
        uint8_t *sp = c->sbuf + j * fk_slot_bytes(f);
        memcpy(&q, sp, sizeof(q));
        q.op = FK_OP_SET;
        memcpy(sp, &q, sizeof(q));
        return fk_write_imm(f, j, sl->server, rs.addr, rs.rkey,
                            (uint32_t)FK_IMM_ALLOC << FK_IMM_KIND_SHIFT | rs.grant);
    }
    if (rs.key != key) {
        fprintf(stderr, "%s: VERIFY FAILED: response for key %#" PRIx64 ", asked %#" PRIx64 "\n",
                f->prog, rs.key, key);
        fk_fail(f); /* the slot is retired all the same, below */
    }
    switch (rs.key != key ? 0u : rs.status) {
    case FK_ST_HIT: {
        int64_t bad = -1;
        if (sl->op != FK_OP_GET || k->version == 0 || rs.value_len != k->len ||
            wc->byte_len != FK_RESP_BYTES + k->len ||
            (bad = fk_check(p + FK_RESP_BYTES, k->len, key, k->version)) >= 0 ||
            fk_fnv(p + FK_RESP_BYTES, k->len) != rs.checksum) {
            fprintf(stderr,
                    "%s: VERIFY FAILED: GET key %#" PRIx64 " returned %u bytes (stored %u, "
                    "version %u), first bad byte %" PRId64 "\n",
                    f->prog, key, rs.value_len, k->len, k->version, bad);
            fk_fail(f); /* retire the slot all the same */
            break;
        }
        c->res.hits++;
        c->res.bytes += k->len;
        break;
    }
    case FK_ST_MISS:
        if (sl->op != FK_OP_GET || k->version != 0) {
            fprintf(stderr, "%s: VERIFY FAILED: GET key %#" PRIx64 " missed, version %u stored\n",
                    f->prog, key, k->version);
            fk_fail(f); /* retire the slot all the same */
            break;
        }
        break;
    case FK_ST_STORED:
    case FK_ST_NOT_STORED:
        if (sl->op != FK_OP_SET) {
            fk_fail(f);
            break;
        }
        k->version = rs.status == FK_ST_STORED ? sl->version : 0;
        k->len = sl->len;
        c->res.bytes += sl->len;
        break;
    case 0: /* wrong key, reported above */
        break;
    default:
        fprintf(stderr, "%s: VERIFY FAILED: the server reports status %u for key %#" PRIx64 "\n",
                f->prog, rs.status, key);
        fk_fail(f); /* retire the slot all the same */
        break;
    }
    uint64_t now = host_now_ns();
    if (sl->timed) {
        uint64_t lat = now - sl->t0_ns;
        if (c->res.requests == 0 || sl->t0_ns < c->res.start_ns)
            c->res.start_ns = sl->t0_ns;
        c->res.end_ns = now;
        c->res.requests++;
        c->lat_all[c->n_all++] = lat;
        if (sl->large)
            c->lat_large[c->n_large++] = lat;
        c->res.large += sl->large;
        c->res.sets += sl->op == FK_OP_SET;
        c->res.gets += sl->op == FK_OP_GET;
    }
    if (sl->large && o->transport == FK_SPLIT_PRESEND)
        c->presend_busy[sl->server] = false;
    k->inflight = false;
    sl->phase = FK_FREE;
    c->inflight--;
    c->completed++;
    return 0;
}

/* Send completions (srq / split): FAA results start the WRITE. */
static int fk_client_scq(struct fk *f, bool *progressed)
{
    struct fk_client *c = &f->c;
    struct ibv_wc wc[FK_POLL_BATCH];
    int n = fk_poll(f->scq, FK_POLL_BATCH, wc);
    for (int i = 0; i < n; i++) {
        if (!fk_wc_ok(f, &wc[i]))
            return 1;
        *progressed = true;
        if (wc[i].wr_id >> 32 != FK_WR_FAA)
            continue;
        uint32_t j = (uint32_t)wc[i].wr_id;
        struct fk_slot *sl = &c->slots[j];
        uint64_t old = 0;
        memcpy(&old, c->sbuf + f->o.window * fk_slot_bytes(f) + j * 8, 8);
        uint64_t ring = f->peer[sl->server].big_bytes, off = old % ring;
        if (off + FK_REQ_BYTES + sl->len > ring) { /* would straddle the end: skip it */
            c->res.faa_retries++;
            if (fk_faa(f, j, sl->server))
                return 1;
            continue;
        }
        if (fk_write_imm(f, j, sl->server, f->peer[sl->server].big_addr + off,
                         f->peer[sl->server].big_rkey,
                         (uint32_t)FK_IMM_FAA << FK_IMM_KIND_SHIFT | (uint32_t)(off / FK_ALIGN)))
            return 1;
    }
    return n < 0 ? 1 : 0;
}

int fk_client_loop(struct fk *f)
{
    struct fk_client *c = &f->c;
    const struct fk_opts *o = &f->o;
    struct ibv_wc wc[FK_POLL_BATCH];
    struct rima_send_wc swc[FK_POLL_BATCH];
    bool rima = fk_transports[o->transport].rima;
    while (c->completed < c->total || c->inflight) {
        bool progressed = false;
        while (f->status == 0 && c->issued < c->total) {
            if (!c->have_next)
                fk_draw(f);
            if (o->rate > 0 && c->next_arrival_ns > host_now_ns())
                break;
            bool issued = false;
            if (fk_issue(f, &issued))
                return 1;
            if (!issued)
                break;
            progressed = true;
        }
        if (f->status && c->inflight == 0)
            break;
        int n = fk_poll(f->cq, FK_POLL_BATCH, wc);
        if (n < 0)
            return 1;
        for (int i = 0; i < n; i++) {
            if (!fk_wc_ok(f, &wc[i]))
                return 1;
            int rc = fk_client_resp(f, &wc[i]);
            if (rc)
                return rc;
        }
        progressed |= n > 0;
        if (rima) {
            for (uint64_t s = 0; s < o->servers; s++) {
                (void)host_now_ns(); /* no park inside (fk_idle) */
                int m = rima_poll_sender(c->snd[s], FK_POLL_BATCH, swc);
                if (m < 0) {
                    fprintf(stderr, "%s: rima_poll_sender: %s\n", f->prog, strerror(errno));
                    return 1;
                }
                for (int i = 0; i < m; i++)
                    if (swc[i].status != IBV_WC_SUCCESS) {
                        fprintf(stderr, "%s: append failed: %s\n", f->prog,
                                ibv_wc_status_str(swc[i].status));
                        return 1;
                    }
                progressed |= m > 0;
            }
        } else if (fk_client_scq(f, &progressed)) {
            return 1;
        }
        if (!progressed && o->rate > 0 && c->inflight == 0 && c->have_next &&
            c->issued < c->total) {
            uint64_t now = host_now_ns(); /* nothing to wait for but the next arrival */
            if (c->next_arrival_ns > now)
                host_compute(c->next_arrival_ns - now);
            continue;
        }
        if (!progressed && o->rate > 0 && c->have_next && c->issued < c->total) {
            uint64_t now = host_now_ns(); /* do not sleep past the next arrival */
            if (c->next_arrival_ns > now && c->next_arrival_ns - now < f->idle_ns)
                f->idle_ns = c->next_arrival_ns - now;
        }
        fk_idle(f, progressed);
    }
    return 0;
}

/* Tell every server this client is done (status + 1 in its done word). */
int fk_client_done(struct fk *f)
{
    struct fk_client *c = &f->c;
    uint64_t word = (uint64_t)f->status + 1;
    uint8_t *src = c->sbuf + f->o.window * fk_slot_bytes(f); /* FAA results area, now idle */
    memcpy(src, &word, 8);
    for (uint64_t s = 0; s < f->o.servers; s++) {
        struct ibv_sge sge = {.addr = (uintptr_t)src, .length = 8, .lkey = c->sbuf_mr->lkey};
        struct ibv_send_wr wr = {.wr_id = FK_WR(FK_WR_DONE, 0),
                                 .sg_list = &sge,
                                 .num_sge = 1,
                                 .opcode = IBV_WR_RDMA_WRITE,
                                 .send_flags = IBV_SEND_SIGNALED};
        wr.wr.rdma.remote_addr = f->peer[s].ctrl_addr + f->o.id * FK_WORDS_PER_CLIENT * 8;
        wr.wr.rdma.rkey = f->peer[s].ctrl_rkey;
        struct ibv_cq *cq = c->scqs[s] ? c->scqs[s] : f->scq;
        if (fk_post(f, c->qps[s], &wr))
            return 1;
        for (;;) { /* wait for this WRITE (earlier completions were consumed) */
            struct ibv_wc wc;
            int n = ibv_poll_cq(cq, 1, &wc); /* the only CQ watched here: may park */
            if (n < 0 || (n == 1 && !fk_wc_ok(f, &wc)))
                return 1;
            if (n == 1 && wc.wr_id == FK_WR(FK_WR_DONE, 0))
                break;
        }
    }
    return 0;
}

/* Wait until the RIMA layer has no append of ours in flight. */
int fk_client_drain(struct fk *f)
{
    struct rima_send_wc swc[FK_POLL_BATCH];
    for (uint64_t s = 0; s < f->o.servers; s++)
        while (f->c.snd[s] && rima_sender_outstanding(f->c.snd[s]) > 0) {
            (void)host_now_ns();
            int m = rima_poll_sender(f->c.snd[s], FK_POLL_BATCH, swc);
            if (m < 0)
                return 1;
            fk_idle(f, m > 0);
        }
    return 0;
}
