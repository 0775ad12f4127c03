/* The 7 read-based channels of Taranov et al. (protocols/taranov/ch_read_*.c,
 * Sections 4.5, 4.6 and 6) over IB RC on simulated hosts, through the
 * channel API (chan_open, chan_send, chan_recv / chan_can_recv ...):
 *
 *  - stream: a stream of variable-size messages (every size from 1 byte to
 *    max_msg_bytes in a pseudo-random order) arrives intact, in order, with
 *    the right lengths; the slots and rings are small, so every slot is
 *    reused and every ring wraps many times;
 *  - zero-copy receive (can_recv / recv_into / test_recv) gives the same
 *    data, and read-slot-inlined's zero-copy send (composing the message in
 *    its slot) too;
 *  - blocking receivers (completion channel) for the notify channels and
 *    the indirect read;
 *  - 1:N read rings with 3 readers, one of them slow: every reader gets
 *    every message exactly once and intact, the sender is held back
 *    (CHAN_AGAIN) and never has more than the ring in flight beyond the
 *    slowest reader's tail;
 *  - prefetching on and off give the same data, and prefetching needs
 *    fewer READs when messages queue up;
 *  - one-way latency of a 64-byte message per channel (printed) and READs
 *    per message against Table 2 (>= 1 or 2, 1 with the notify channels);
 *  - bad configurations and oversized messages are refused with errno.
 *
 * The programs run as simulated processes; <rnicsim/host.h> is provided
 * here over the fixture (out-of-band board, relax = park on the host). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rnicsim/host.h>

#include "fixture.h"
#include "protocols/taranov/channel.h"
#include "protocols/taranov/read_common.h"
#include "test.h"

extern const struct chan_ops chan_read_slot_detached, chan_read_slot_inlined, chan_read_slot_notify,
    chan_read_slot_indirect, chan_read_ring_detached, chan_read_ring_inlined, chan_read_ring_notify;

static const struct chan_ops *const all_ops[] = {
    &chan_read_slot_detached, &chan_read_slot_inlined,  &chan_read_slot_notify,
    &chan_read_slot_indirect, &chan_read_ring_detached, &chan_read_ring_inlined,
    &chan_read_ring_notify,
};
#define N_OPS (sizeof(all_ops) / sizeof(all_ops[0]))

/* ---------------------------------------------------------------- <rnicsim/host.h> over the
 * fixture */

static struct fx *g_fx;

uint64_t host_now_ns(void)
{
    struct sim_proc *p = sim_proc_current();
    return p ? sim_now(sim_proc_sim(p)) / SIM_NS : 0;
}
void host_compute(uint64_t ns)
{
    host_charge(ns * SIM_NS);
}
void *host_memcpy(void *dst, const void *src, size_t n)
{
    if (n)
        memcpy(dst, src, n);
    return dst;
}
void host_relax(void)
{
    host_park("host_relax()");
}
int host_thread_start(void (*fn)(void *arg), void *arg)
{
    (void)fn;
    (void)arg;
    errno = ENOSYS;
    return -1;
}
int host_thread_join(int handle)
{
    (void)handle;
    errno = ESRCH;
    return -1;
}
int host_oob_put(const char *key, const void *buf, size_t len)
{
    fx_put(g_fx, key, buf, len);
    return 0;
}
int host_oob_get(const char *key, void *buf, size_t len)
{
    fx_get(g_fx, key, buf, len);
    return 0;
}
const char *host_name(void)
{
    struct host *h = host_of_current();
    return h ? h->name : "";
}
void host_report(const char *table, const struct host_kv *kv, size_t n)
{
    (void)table;
    (void)kv;
    (void)n;
}

/* ---------------------------------------------------------------- a run */

enum { MAX_READERS = 3 };

struct run {
    const struct chan_ops *ops;
    struct chan_config cfg; /* name, sizes; role / id set per side */
    uint32_t msgs;
    bool fixed_size;         /* every message max_msg_bytes long */
    bool inplace_send;       /* read-slot-inlined: compose in the slot */
    bool recv_relax;         /* receiver host_relax()es on CHAN_AGAIN */
    uint64_t gap_ns;         /* sender: pause before each message */
    uint64_t start_delay_ns; /* receivers start late (messages queue up) */
    uint64_t slow_ns[MAX_READERS];
    /* results */
    int err_send, err_recv[MAX_READERS];
    char why[MAX_READERS + 1][200];
    uint64_t got[MAX_READERS], bad[MAX_READERS], hash[MAX_READERS], reads[MAX_READERS];
    uint64_t lat_ns[MAX_READERS], lat_n[MAX_READERS];
    uint64_t sender_again, ring_violations;
    bool try_oversize;
    int oversize_err;
};

struct prog_arg {
    struct run *r;
    uint32_t id;
};

static size_t msg_size(const struct run *r, uint32_t i)
{
    if (r->fixed_size)
        return r->cfg.max_msg_bytes;
    /* every size 1..max appears, in a scrambled order */
    return 1 + ((uint64_t)i * 2654435761u) % r->cfg.max_msg_bytes;
}

static uint8_t pat(uint32_t i, size_t j)
{
    return (uint8_t)(i * 131u + j * 7u + (j >> 8) + 1u);
}

static void fill(const struct run *r, uint8_t *p, uint32_t i, size_t len)
{
    for (size_t j = 0; j < len; j++)
        p[j] = pat(i, j);
    if (r->gap_ns && len >= 8) { /* latency runs: the send time in front */
        uint64_t t = host_now_ns();
        memcpy(p, &t, 8);
    }
}

/* 0 if message i is intact; counts latency. */
static int verify(struct run *r, uint32_t id, const uint8_t *p, size_t len, uint32_t i)
{
    size_t want = msg_size(r, i), from = 0;
    if (len != want)
        return -1;
    if (r->gap_ns && len >= 8) {
        uint64_t t;
        memcpy(&t, p, 8);
        uint64_t now = host_now_ns();
        if (t > now)
            return -1;
        r->lat_ns[id] += now - t;
        r->lat_n[id]++;
        from = 8;
    }
    for (size_t j = from; j < len; j++)
        if (p[j] != pat(i, j))
            return -1;
    for (size_t j = from; j < len; j++)
        r->hash[id] = (r->hash[id] ^ p[j]) * 1099511628211ull;
    return 0;
}

static void sender_prog(void *arg)
{
    struct prog_arg *pa = arg;
    struct run *r = pa->r;
    struct chan c;
    struct chan_config cfg = r->cfg;
    cfg.role = CHAN_SENDER;
    cfg.id = 0;
    int err = chan_open(&c, r->ops, &cfg);
    if (err) {
        r->err_send = err;
        snprintf(r->why[MAX_READERS], sizeof(r->why[0]), "open: %s", c.err);
        chan_close(&c);
        return;
    }
    uint32_t pool_n = cfg.slots; /* zero-copy senders keep a buffer until acknowledged */
    struct chan_region pool;
    CHECK(chan_alloc(&c, pool_n * cfg.max_msg_bytes, &pool) == 0);
    uint64_t *handles = calloc(pool_n, sizeof(uint64_t));
    for (uint32_t i = 0; i < r->msgs && !err; i++) {
        uint32_t b = i % pool_n;
        while (handles[b] && (err = chan_test_send(&c, handles[b])) == CHAN_AGAIN)
            host_relax();
        if (err)
            break;
        if (r->gap_ns)
            host_compute(r->gap_ns);
        struct chan_region m = pool;
        m.addr = (uint8_t *)pool.addr + (size_t)b * cfg.max_msg_bytes;
        m.len = msg_size(r, i);
        if (r->inplace_send) {
            struct chan_region slot;
            while ((err = chan_read_slot_inlined_buffer(&c, &slot)) == CHAN_AGAIN)
                host_relax();
            if (err)
                break;
            CHECK(slot.len == cfg.max_msg_bytes);
            m.addr = slot.addr;
            m.lkey = slot.lkey;
        }
        fill(r, m.addr, i, m.len);
        while ((err = chan_send(&c, &m, &handles[b])) == CHAN_AGAIN) {
            r->sender_again++;
            host_relax();
        }
        if (!err && !strcmp(r->ops->family, "read-ring")) {
            /* never more than the ring beyond the slowest reader's tail */
            struct rd_ring *g = c.impl;
            if (g->head - g->min_tail > g->R)
                r->ring_violations++;
        }
    }
    for (uint32_t b = 0; b < pool_n && !err; b++)
        while (handles[b] && (err = chan_test_send(&c, handles[b])) == CHAN_AGAIN)
            host_relax();
    if (err) {
        r->err_send = err;
        snprintf(r->why[MAX_READERS], sizeof(r->why[0]), "send: %s", c.err);
    } else if (r->try_oversize) {
        /* a message above max_msg_bytes is refused (and says why) */
        struct chan_region big = pool;
        big.len = cfg.max_msg_bytes + 1;
        uint64_t h;
        r->oversize_err = chan_send(&c, &big, &h);
        CHECK(strstr(c.err, "max_msg_bytes") != NULL);
    }
    free(handles);
    chan_release(&c, &pool);
    chan_close(&c);
}

static void receiver_prog(void *arg)
{
    struct prog_arg *pa = arg;
    struct run *r = pa->r;
    uint32_t id = pa->id;
    struct chan c;
    struct chan_config cfg = r->cfg;
    cfg.role = CHAN_RECEIVER;
    cfg.id = id;
    int err = chan_open(&c, r->ops, &cfg);
    if (err) {
        r->err_recv[id] = err;
        snprintf(r->why[id], sizeof(r->why[0]), "open: %s", c.err);
        chan_close(&c);
        return;
    }
    struct chan_region dst = {0};
    if (cfg.zero_copy)
        CHECK(chan_alloc(&c, cfg.max_msg_bytes, &dst) == 0);
    if (r->start_delay_ns)
        host_compute(r->start_delay_ns);
    for (uint32_t i = 0; i < r->msgs && !err; i++) {
        if (cfg.zero_copy) {
            struct chan_region_option opt;
            while ((err = c.ops->can_recv(&c, &opt)) == CHAN_AGAIN)
                if (r->recv_relax)
                    host_relax();
            if (err)
                break;
            uint64_t h;
            struct chan_region d = dst;
            if ((err = c.ops->recv_into(&c, &opt, &d, &h)))
                break;
            while ((err = c.ops->test_recv(&c, h)) == CHAN_AGAIN)
                if (r->recv_relax)
                    host_relax();
            if (err)
                break;
            /* the indirect read does not report lengths (fixed size) */
            size_t len = r->ops == &chan_read_slot_indirect ? msg_size(r, i) : opt.len;
            if (verify(r, id, dst.addr, len, i))
                r->bad[id]++;
            memset(dst.addr, 0, dst.len); /* the next message must bring its own bytes */
        } else {
            struct chan_region m;
            while ((err = chan_recv(&c, &m)) == CHAN_AGAIN)
                if (r->recv_relax)
                    host_relax();
            if (err)
                break;
            if (verify(r, id, m.addr, m.len, i))
                r->bad[id]++;
            if ((err = chan_free(&c, &m)))
                break;
        }
        r->got[id]++;
        if (r->slow_ns[id])
            host_compute(r->slow_ns[id]);
    }
    if (err) {
        r->err_recv[id] = err;
        snprintf(r->why[id], sizeof(r->why[0]), "recv: %s", c.err);
    }
    if (!strcmp(r->ops->family, "read-ring"))
        r->reads[id] = ((struct rd_ring *)c.impl)->reads;
    else
        r->reads[id] = ((struct rd_slot *)c.impl)->reads;
    if (cfg.zero_copy)
        chan_release(&c, &dst);
    chan_close(&c);
}

/* Run r with `readers` receivers; true if everything arrived intact. */
static bool run_one(struct run *r, uint32_t readers, const char *what)
{
    r->cfg.receivers = readers;
    r->cfg.senders = 1;
    if (!r->cfg.name)
        r->cfg.name = "rd";
    struct fx *fx = fx_create_n(7, readers + 1, NULL);
    g_fx = fx;
    struct prog_arg pa[MAX_READERS + 1];
    pa[0] = (struct prog_arg){r, 0};
    fx_spawn(fx, 0, "sender", sender_prog, &pa[0]);
    for (uint32_t k = 0; k < readers; k++) {
        pa[k + 1] = (struct prog_arg){r, k};
        fx_spawn(fx, k + 1, "reader", receiver_prog, &pa[k + 1]);
    }
    enum sim_run_result res = fx_run(fx);
    fx_destroy(fx);
    g_fx = NULL;
    bool ok = res == SIM_RUN_DONE && r->err_send == 0;
    if (r->err_send)
        fprintf(stderr, "%s %s: sender: %s\n", r->ops->name, what, r->why[MAX_READERS]);
    for (uint32_t k = 0; k < readers; k++) {
        if (r->err_recv[k])
            fprintf(stderr, "%s %s: reader %u: %s\n", r->ops->name, what, k, r->why[k]);
        ok = ok && !r->err_recv[k] && r->got[k] == r->msgs && r->bad[k] == 0;
    }
    if (!ok)
        fprintf(stderr, "%s %s: run %d, got %" PRIu64 " of %u, %" PRIu64 " bad\n", r->ops->name,
                what, (int)res, r->got[0], r->msgs, r->bad[0]);
    return ok;
}

static bool is_ring(const struct chan_ops *o)
{
    return !strcmp(o->family, "read-ring");
}

static void base_cfg(struct run *r, const struct chan_ops *o)
{
    memset(r, 0, sizeof(*r));
    r->ops = o;
    r->cfg.name = "rd";
    r->cfg.max_msg_bytes = 1024;
    r->cfg.slots = 4;
    r->cfg.ring_bytes = 8192; /* 2 pages: 150 messages of ~520 B wrap it ~10 times */
    r->msgs = 150;
}

/* ---------------------------------------------------------------- tests */

static void test_stream(void)
{
    for (size_t k = 0; k < N_OPS; k++) {
        struct run r;
        base_cfg(&r, all_ops[k]);
        r.recv_relax = true; /* as the taranov driver does */
        r.try_oversize = true;
        CHECK(run_one(&r, 1, "stream"));
        CHECK_EQ_U64(r.oversize_err, -EMSGSIZE);
        CHECK_EQ_U64(r.got[0], r.msgs);
        CHECK_EQ_U64(r.bad[0], 0);
        /* READs per message (Table 2): >= 1 on the slot channels, >= 2 on
         * the inlined ring without prefetching, exactly 1 after a
         * notification; the detached ring fetches every record up to the
         * head with one READ (fewer than one per message); the indirect
         * read has none (the sender WRITEs) */
        const struct chan_ops *o = all_ops[k];
        if (o == &chan_read_slot_indirect)
            CHECK_EQ_U64(r.reads[0], 0);
        else if (o == &chan_read_slot_notify || o == &chan_read_ring_notify)
            CHECK_EQ_U64(r.reads[0], r.msgs);
        else if (o == &chan_read_ring_inlined)
            CHECK(r.reads[0] >= 2 * r.msgs);
        else if (o == &chan_read_ring_detached)
            CHECK(r.reads[0] >= 2);
        else
            CHECK(r.reads[0] >= r.msgs);
        /* the slots / the ring were reused many times over */
        uint64_t bytes = 0;
        for (uint32_t i = 0; i < r.msgs; i++)
            bytes += msg_size(&r, i);
        if (is_ring(all_ops[k]))
            CHECK(bytes > 5 * r.cfg.ring_bytes);
        else
            CHECK(r.msgs > 10 * r.cfg.slots);
    }
}

static void test_zero_copy(void)
{
    for (size_t k = 0; k < N_OPS; k++) {
        struct run r, c;
        base_cfg(&r, all_ops[k]);
        r.cfg.zero_copy = true;
        r.inplace_send = all_ops[k] == &chan_read_slot_inlined;
        CHECK(all_ops[k]->features.zero_copy_recv && all_ops[k]->can_recv);
        CHECK(run_one(&r, 1, "zero-copy"));
        base_cfg(&c, all_ops[k]);
        CHECK(run_one(&c, 1, "copy"));
        CHECK(r.hash[0] == c.hash[0]); /* the same bytes either way */
    }
}

static void test_blocking(void)
{
    const struct chan_ops *bl[] = {&chan_read_slot_notify, &chan_read_slot_indirect,
                                   &chan_read_ring_notify};
    for (size_t k = 0; k < 3; k++) {
        CHECK(bl[k]->features.blocking_recv);
        struct run r;
        base_cfg(&r, bl[k]);
        r.cfg.blocking = true;
        r.gap_ns = 3000; /* the receiver really has to sleep */
        r.msgs = 40;
        CHECK(run_one(&r, 1, "blocking"));
    }
}

static void test_one_to_n(void)
{
    const struct chan_ops *rings[] = {&chan_read_ring_detached, &chan_read_ring_inlined,
                                      &chan_read_ring_notify};
    for (size_t k = 0; k < 3; k++) {
        CHECK(rings[k]->features.multi_reader);
        for (int prefetch = 0; prefetch < 2; prefetch++) {
            struct run r;
            base_cfg(&r, rings[k]);
            r.cfg.slots = 64; /* the ring's bytes, not the slots, hold the sender back */
            r.cfg.prefetch = prefetch;
            r.msgs = 120;
            r.slow_ns[1] = 4000; /* reader 1 takes 4 us per message */
            CHECK(run_one(&r, 3, "1:3"));
            for (uint32_t id = 0; id < 3; id++) {
                CHECK_EQ_U64(r.got[id], r.msgs);
                CHECK_EQ_U64(r.bad[id], 0);
                CHECK(r.hash[id] == r.hash[0]);
            }
            CHECK(r.sender_again > 0); /* the slow reader held the sender back */
            CHECK_EQ_U64(r.ring_violations, 0);
        }
    }
}

static void test_prefetch(void)
{
    const struct chan_ops *rings[] = {&chan_read_ring_inlined, &chan_read_ring_detached};
    for (size_t k = 0; k < 2; k++) {
        struct run on, off;
        base_cfg(&on, rings[k]);
        on.cfg.slots = 64;
        on.cfg.max_msg_bytes = 256;
        on.cfg.ring_bytes = 16384;
        on.msgs = 100;
        on.start_delay_ns = 20000; /* messages queue up before the reader starts */
        off = on;
        on.cfg.prefetch = true;
        CHECK(run_one(&on, 1, "prefetch"));
        CHECK(run_one(&off, 1, "no prefetch"));
        CHECK(on.hash[0] == off.hash[0]);
        fprintf(stderr,
                "%s: READs for %u queued messages: %" PRIu64 " with prefetch, %" PRIu64
                " without\n",
                rings[k]->name, on.msgs, on.reads[0], off.reads[0]);
        if (rings[k] == &chan_read_ring_inlined) {
            /* without: bell + payload per message; with: mostly one READ */
            CHECK(off.reads[0] >= 2 * off.msgs);
            CHECK(on.reads[0] < off.reads[0] * 3 / 4);
        } else {
            /* the detached bell always fetches up to the head (4.6) */
            CHECK(on.reads[0] < on.msgs);
        }
    }
}

static void test_latency(void)
{
    printf("one-way latency of a 64 B message (idle channel, IB RC, fixture NIC defaults):\n");
    for (size_t k = 0; k < N_OPS; k++) {
        struct run r;
        base_cfg(&r, all_ops[k]);
        r.cfg.max_msg_bytes = 64;
        r.fixed_size = true;
        r.gap_ns = 20000;
        r.msgs = 20;
        CHECK(run_one(&r, 1, "latency"));
        CHECK_EQ_U64(r.lat_n[0], r.msgs);
        double lat_us = r.lat_n[0] ? (double)r.lat_ns[0] / (double)r.lat_n[0] / 1000.0 : 0;
        double reads = (double)r.reads[0] / r.msgs;
        printf("  %-20s %6.2f us  %5.2f READs/message\n", all_ops[k]->name, lat_us, reads);
        CHECK(lat_us > 0.5 && lat_us < 30);
    }
}

/* Ping-pong (Section 6: a channel per direction): each side frees what it
 * received and then waits for its own send to complete, with nobody
 * polling in between - the acknowledgements must not wait for more. */
struct pp_st {
    const struct chan_ops *ops;
    uint32_t iters;
    int err[2];
    uint32_t echoed;
    uint64_t rtt_ns;
};

static int pp_open(struct chan *c, const struct chan_ops *o, const char *name, enum chan_role role)
{
    struct chan_config cfg = {
        .name = name, .role = role, .max_msg_bytes = 256, .slots = 4, .ring_bytes = 4096};
    return chan_open(c, o, &cfg);
}

static int pp_recv(struct chan *c, struct chan_region *m)
{
    int err;
    while ((err = chan_recv(c, m)) == CHAN_AGAIN)
        host_relax();
    return err;
}

static int pp_wait(struct chan *c, uint64_t h)
{
    int err;
    while ((err = chan_test_send(c, h)) == CHAN_AGAIN)
        host_relax();
    return err;
}

static int pp_send(struct chan *c, struct chan_region *m, uint64_t *h)
{
    int err;
    while ((err = chan_send(c, m, h)) == CHAN_AGAIN)
        host_relax();
    return err;
}

static void pp_client(void *arg)
{
    struct pp_st *p = arg;
    struct chan fwd, back;
    struct chan_region buf, got;
    int err = pp_open(&fwd, p->ops, "pf", CHAN_SENDER);
    if (!err)
        err = pp_open(&back, p->ops, "pb", CHAN_RECEIVER);
    if (!err)
        err = chan_alloc(&fwd, 256, &buf);
    for (uint32_t i = 0; i < p->iters && !err; i++) {
        uint64_t h, t0 = host_now_ns();
        buf.len = 1 + (i * 37u) % 256;
        memset(buf.addr, (int)(i + 1), buf.len);
        if ((err = pp_send(&fwd, &buf, &h)) || (err = pp_recv(&back, &got)))
            break;
        p->rtt_ns += host_now_ns() - t0;
        bool ok = got.len == buf.len;
        for (size_t j = 0; ok && j < got.len; j++)
            ok = ((uint8_t *)got.addr)[j] == (uint8_t)(i + 1);
        p->echoed += ok;
        if ((err = chan_free(&back, &got)) || (err = pp_wait(&fwd, h)))
            break;
    }
    p->err[0] = err;
    chan_release(&fwd, &buf);
    chan_close(&back);
    chan_close(&fwd);
}

static void pp_server(void *arg)
{
    struct pp_st *p = arg;
    struct chan fwd, back;
    struct chan_region buf, got;
    int err = pp_open(&fwd, p->ops, "pf", CHAN_RECEIVER);
    if (!err)
        err = pp_open(&back, p->ops, "pb", CHAN_SENDER);
    if (!err)
        err = chan_alloc(&back, 256, &buf);
    for (uint32_t i = 0; i < p->iters && !err; i++) {
        uint64_t h;
        if ((err = pp_recv(&fwd, &got)))
            break;
        memcpy(buf.addr, got.addr, got.len);
        buf.len = got.len;
        if ((err = chan_free(&fwd, &got)) || (err = pp_send(&back, &buf, &h)) ||
            (err = pp_wait(&back, h)))
            break;
    }
    p->err[1] = err;
    chan_release(&back, &buf);
    chan_close(&fwd);
    chan_close(&back);
}

static void test_pingpong(void)
{
    for (size_t k = 0; k < N_OPS; k++) {
        struct pp_st p = {.ops = all_ops[k], .iters = 30};
        struct fx *fx = fx_create(3, NULL);
        g_fx = fx;
        enum sim_run_result res = fx_run_pair(fx, "client", pp_client, "server", pp_server, &p);
        fx_destroy(fx);
        g_fx = NULL;
        if (res != SIM_RUN_DONE || p.echoed != p.iters)
            fprintf(stderr, "%s ping-pong: run %d, %u of %u echoed, errors %d %d\n",
                    all_ops[k]->name, (int)res, p.echoed, p.iters, p.err[0], p.err[1]);
        CHECK(res == SIM_RUN_DONE);
        CHECK_EQ_U64(p.echoed, p.iters);
        CHECK(p.err[0] == 0 && p.err[1] == 0);
    }
}

struct bad_st {
    struct fx *fx;
    int open_err[4], send_err;
};

static void bad_prog(void *arg)
{
    struct bad_st *b = arg;
    struct chan c;
    struct chan_config cfg = {.name = "bad", .role = CHAN_SENDER, .slots = 4, .ring_bytes = 5000};
    b->open_err[0] = chan_open(&c, &chan_read_ring_inlined, &cfg); /* not pages */
    chan_close(&c);
    cfg = (struct chan_config){.name = "bad", .role = CHAN_SENDER, .slots = 4, .receivers = 2};
    b->open_err[1] = chan_open(&c, &chan_read_slot_detached, &cfg); /* slots are 1:1 */
    chan_close(&c);
    cfg = (struct chan_config){
        .name = "bad", .role = CHAN_RECEIVER, .slots = 4, .id = 3, .receivers = 2};
    b->open_err[2] = chan_open(&c, &chan_read_ring_notify, &cfg); /* id >= readers */
    chan_close(&c);
    cfg = (struct chan_config){
        .name = "bad", .role = CHAN_SENDER, .slots = 4, .max_msg_bytes = 8192, .ring_bytes = 8192};
    b->open_err[3] = chan_open(&c, &chan_read_ring_detached, &cfg); /* too big a message */
    chan_close(&c);
}

static void test_bad_input(void)
{
    struct bad_st b = {.fx = fx_create(1, NULL)};
    g_fx = b.fx;
    fx_spawn(b.fx, 0, "bad", bad_prog, &b);
    CHECK(fx_run(b.fx) == SIM_RUN_DONE);
    for (int k = 0; k < 4; k++)
        CHECK_EQ_U64(b.open_err[k], -EINVAL);
    fx_destroy(b.fx);
    g_fx = NULL;
}

int main(void)
{
    test_bad_input();
    test_stream();
    test_pingpong();
    test_zero_copy();
    test_blocking();
    test_one_to_n();
    test_prefetch();
    test_latency();
    return test_summary();
}
