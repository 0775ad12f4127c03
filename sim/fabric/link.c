/* One direction of a cable: a drop-tail queue that serialises frames at the
 * line rate, followed by a propagation pipe (htsim's Queue + Pipe).
 *
 *   link_send -> [queue: drop-tail by bytes] -> serialiser
 *             -> [pipe: FIFO of (arrival time, pkt)] (pipe_ev) -> sink.rx
 *
 * One event per frame.  When a frame starts serialising its whole timing is
 * known (start, end = start + serialisation, arrival = end + delay), so it
 * goes into the pipe at once and `pipe_ev` delivers it at its arrival.  What
 * happens when its last bit leaves (the end: the queue's bytes go down,
 * counters, the TX tap, the loss draw, the dequeue hook, starting the next
 * frame, the idle transition) needs an event of its own only when something
 * depends on that instant; then `tx_ev` fires at the end ("eager").  Else
 * the end is processed by whoever touches the link next at or after it
 * (settle(): link_send, a pause, a query, the frame's own arrival), with
 * the same result.  The end is eager when a frame waits behind (it starts
 * then), a sender asked to hear of the idle transition (link_want_idle),
 * a TX tap writes it, loss is drawn, the link is down, or the lazy hook
 * says so (a switch's PFC accounting, which settles its ports' lazy ends
 * before it admits a frame: switch.c).  Frames leave the serialiser in
 * order and the delay is constant, so pipe arrival times are increasing
 * and a ring buffer is enough; the frame whose end is pending is always
 * the ring's newest.  At one instant a frame that ends then has left
 * (settle() takes ends <= now).
 *
 * Queue accounting counts wire bytes (frame + preamble/SFD + IFG) and
 * includes the frame being serialised, so `queue_bytes` bounds the whole
 * egress buffer.
 *
 * Impairments, decided when the last bit leaves the serialiser:
 *   - link down: the frame is dropped there (it was never really sent);
 *   - loss (loss_prob): the frame is counted as sent and vanishes;
 *   - corruption (corrupt_prob): the frame crosses the pipe marked corrupt
 *     and is dropped at the far end, where its ICRC check fails.
 * Each draw is one 64-bit number from the link's RNG stream (named after
 * the link) compared with p * 2^64, so runs repeat exactly per seed, and a
 * link with both probabilities 0 draws nothing.  A failure also loses what
 * is in the cable: pipe slots remember the failure epoch they were sent in.
 *
 * Priorities, PFC and ECN.  The queue is one FIFO per 802.1p priority
 * (pkt.prio) plus one for MAC control frames (PFC pauses), which go first;
 * then the highest priority with a frame that is not paused.  A PFC frame
 * reaching the far end is not delivered: it pauses (or resumes) the
 * priorities it names on the link going the other way (link_set_peer),
 * for its quanta x 512 bit times.  A link whose frames are all paused is
 * not idle (the idle hook is not called), so a NIC feeding it stops.
 * Lossless priorities (link_set_lossless) are never dropped by the
 * drop-tail limit: the switch's PFC accounting bounds them (pfc.c).  ECN
 * (link_set_ecn): a frame of an ECN-capable transport is marked CE on
 * enqueue with a probability rising linearly from 0 at kmin to pmax at kmax
 * bytes of its priority's queue, 1 above kmax (RED on the instantaneous
 * queue, as DCQCN's switches do); the draw uses the link's RNG stream.
 *
 * Credits (link_set_credits; InfiniBand's link-level flow control, IBA
 * vol. 1 7.9): the receiver at the far end has a buffer per priority
 * (VL) counted in 64-byte blocks, and this transmitter may start a frame
 * of a credited priority only if its blocks fit in what the receiver has
 * not given back.  Credit is one more condition on the choice of the
 * FIFO to serve (pick_fifo), next to the pause state, so a transmitter
 * without credit is not idle and a NIC feeding it stops, as under PFC.
 * Returns (link_credit_return) reach the transmitter one cable delay
 * after the receiver frees the blocks; they wait in a FIFO (times
 * increasing: the delay is constant) and are taken in lazily, when the
 * transmitter next picks a frame, so an unblocked link has no events for
 * them.  Why not PFC's machinery (pfc.c): InfiniBand's receiver never
 * sends XOFF/XON; the sender counts blocks against a limit the receiver
 * advertised, so nothing is in flight beyond the buffer (no headroom, no
 * threshold, never a drop) and the receiver's state is only "blocks
 * freed". */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fabric.h"
#include "pcap.h"
#include "../trace.h"

struct pipe_slot {
    sim_time_t arrive_ps;
    struct pkt *pkt;
    uint32_t epoch; /* l->fail_epoch when it entered the cable */
    bool corrupt;
};

/* A credit return on its way to the transmitter. */
struct credit_ret {
    sim_time_t at_ps;
    uint32_t blocks;
    uint8_t prio;
};

struct link_tap_entry {
    struct pcap_writer *w;
    enum link_tap where;
};

/* A probability as an integer threshold: an event happens when a uniform
 * 64-bit draw is below `thr`, or always. */
struct prob {
    uint64_t thr;
    bool always;
};

/* One FIFO of the queue. */
struct link_fifo {
    struct pkt *head, *tail;
    uint64_t bytes; /* wire bytes queued (not counting the frame on the wire) */
};
#define LINK_CTRL PKT_PRIOS /* index of the MAC-control FIFO */

struct link {
    /* what every frame touches first */
    struct sim *sim;
    struct pkt_pool *pool;
    struct link_params p;
    struct fabric_sink sink;
    uint16_t nonempty; /* bit i: q[i] holds a frame */
    bool up;
    bool tx_pending;  /* the pipe's newest frame has not had its end processed */
    bool tx_eager;    /* ... and tx_ev is set for it */
    bool idle_wanted; /* call the idle hook at the next transition to idle */
    uint8_t lossless; /* priorities exempt from drop-tail */
    bool ecn_on;
    uint32_t fail_epoch;
    sim_time_t tx_end_ps;   /* the pending frame's last bit leaves then */
    sim_time_t tx_start_ps; /* its first bit left (the timeline's span) */
    sim_time_t free_at_ps;  /* when the wire last became free */
    uint64_t queued_bytes;  /* queue + the frame being serialised, wire bytes */
    uint64_t idle_count;    /* transitions to idle */
    /* pipe: ring of frames in flight, pipe_cap a power of two */
    struct pipe_slot *pipe;
    size_t pipe_cap, pipe_head, pipe_n;
    struct sim_event pipe_ev, tx_ev;
    link_deq_fn deq_fn; /* a frame left the queue (sent or dropped) */
    void *deq_ctx;
    link_lazy_fn lazy_fn; /* a frame's end is about to be left lazy */
    void *lazy_ctx;
    unsigned lazy_cookie;
    struct prob loss, corrupt;

    char *name;
    /* queue: a FIFO per priority + control */
    struct link_fifo q[PKT_PRIOS + 1];

    /* PFC: pause state of this link's transmitter, set by frames that
     * arrive on its peer (the other direction of the cable) */
    struct link *peer;
    sim_time_t paused_until[PKT_PRIOS];
    struct sim_event resume_ev;
    struct link_ecn ecn;

    /* credit-based flow control (link_set_credits) */
    uint8_t credit_mask;             /* credited priorities; 0 = off */
    bool credit_blocked;             /* frames wait and none has credit */
    uint64_t credit_limit;           /* blocks per priority */
    uint64_t credit_used[PKT_PRIOS]; /* blocks sent and not given back (here) */
    struct credit_ret *cret;         /* returns on their way: ring, cret_cap a power of two */
    size_t cret_cap, cret_head, cret_n;
    sim_time_t credit_wait_since;

    sim_cb_fn idle_fn;
    void *idle_a, *idle_b;

    /* impairments and failures */
    struct sim_rng rng;
    uint32_t trace_id;

    struct link_tap_entry taps[LINK_MAX_TAPS];
    unsigned n_taps, n_tx_taps;

    struct link_counters c;
};

enum drop_reason { DROP_OVERFLOW, DROP_LOST, DROP_CORRUPT, DROP_DOWN, DROP_UNCONNECTED };

/* Static strings for trace records (trace_rec.where). */
static const char *const drop_where[] = {
    [DROP_OVERFLOW] = "link overflow (drop-tail)", [DROP_LOST] = "link loss",
    [DROP_CORRUPT] = "link corruption (ICRC)",     [DROP_DOWN] = "link down",
    [DROP_UNCONNECTED] = "link unconnected",
};

static bool prob_valid(double p)
{
    return p >= 0.0 && p <= 1.0; /* false for NaN */
}

static struct prob prob_from(double p)
{
    if (!(p > 0.0))
        return (struct prob){0, false};
    if (p >= 1.0)
        return (struct prob){0, true};
    /* exact: p < 1, so p * 2^64 < 2^64 and the conversion truncates */
    return (struct prob){(uint64_t)(p * 18446744073709551616.0), false};
}

static bool draw(struct link *l, const struct prob *pr)
{
    if (pr->always)
        return true;
    return pr->thr && sim_rng_u64(&l->rng) < pr->thr;
}

static void drop(struct link *l, struct pkt *p, enum drop_reason why)
{
    uint64_t wire = pkt_wire_bytes(p);
    l->c.pkts_dropped++;
    l->c.bytes_dropped += wire;
    switch (why) {
    case DROP_OVERFLOW:
        l->c.pkts_dropped_overflow++;
        break;
    case DROP_LOST:
        l->c.pkts_lost++;
        break;
    case DROP_CORRUPT:
        l->c.pkts_corrupted++;
        break;
    case DROP_DOWN:
        l->c.pkts_dropped_down++;
        break;
    case DROP_UNCONNECTED:
        break;
    }
    if (sim_trace_on(l->sim, TRACE_G_CORE))
        sim_trace(l->sim, &(struct trace_rec){.kind = TRACE_PKT_DROP,
                                              .track = TRK_LINK,
                                              .opcode = p->opcode,
                                              .node = l->trace_id,
                                              .qpn = p->dest_qpn,
                                              .psn = p->psn,
                                              .len = p->payload_len,
                                              .unit = p->dst_node,
                                              .peer = p->src_node,
                                              .peer_qpn = p->src_qpn,
                                              .where = drop_where[why]});
    pkt_free(l->pool, p);
}

/* Traces (TRACE_G_FABRIC): the queue's bytes changed. */
static void trace_queue(struct link *l)
{
    sim_trace(l->sim, &(struct trace_rec){.kind = TRACE_COUNTER,
                                          .track = TRK_LINK,
                                          .node = l->trace_id,
                                          .t0_ps = sim_now(l->sim),
                                          .val = l->queued_bytes,
                                          .where = l->name});
}

static void tap(struct link *l, enum link_tap where, const struct pkt *p, bool corrupt)
{
    for (unsigned i = 0; i < l->n_taps; i++)
        if (l->taps[i].where == where)
            pcap_write_pkt(l->taps[i].w, sim_now(l->sim), p, corrupt);
}

static void tx_done(struct sim *sim, struct sim_event *ev);
static void credit_lost(struct link *l, const struct pkt *p);
static void pipe_arrive(struct sim *sim, struct sim_event *ev);
static void resume_fn(struct sim *sim, struct sim_event *ev);
static void settle(struct link *l);

static bool params_valid(const struct link_params *p)
{
    return p->rate_bps > 0 && prob_valid(p->loss_prob) && prob_valid(p->corrupt_prob);
}

struct link *link_create(struct sim *sim, const char *name, const struct link_params *p,
                         struct pkt_pool *pool)
{
    if (!sim || !p || !params_valid(p))
        return NULL;
    struct link *l = calloc(1, sizeof(*l));
    if (!l)
        return NULL;
    l->name = strdup(name ? name : "link");
    if (!l->name) {
        free(l);
        return NULL;
    }
    l->sim = sim;
    l->p = *p;
    l->pool = pool;
    l->loss = prob_from(p->loss_prob);
    l->corrupt = prob_from(p->corrupt_prob);
    sim_rng_stream(sim, &l->rng, l->name);
    l->up = true;
    sim_event_init(&l->tx_ev, tx_done, l, "link.tx");
    sim_event_init(&l->pipe_ev, pipe_arrive, l, "link.pipe");
    sim_event_init(&l->resume_ev, resume_fn, l, "link.pfc_resume");
    return l;
}

void link_destroy(struct link *l)
{
    if (!l)
        return;
    sim_cancel(l->sim, &l->tx_ev);
    sim_cancel(l->sim, &l->pipe_ev);
    sim_cancel(l->sim, &l->resume_ev);
    for (unsigned c = 0; c <= PKT_PRIOS; c++)
        for (struct pkt *p = l->q[c].head, *next; p; p = next) {
            next = p->next;
            pkt_free(l->pool, p);
        }
    for (size_t i = 0; i < l->pipe_n; i++) /* the frame on the wire is the newest */
        pkt_free(l->pool, l->pipe[(l->pipe_head + i) & (l->pipe_cap - 1)].pkt);
    free(l->pipe);
    free(l->cret);
    free(l->name);
    free(l);
}

void link_connect(struct link *l, struct fabric_sink sink)
{
    l->sink = sink;
}

const struct link_counters *link_get_counters(const struct link *l)
{
    /* the counters of now: a lazy end that is due counts (the link itself
     * is not const: it has only not caught up) */
    settle((struct link *)(uintptr_t)l);
    return &l->c;
}
const char *link_name(const struct link *l)
{
    return l->name;
}
const struct link_params *link_get_params(const struct link *l)
{
    return &l->p;
}

int link_set_params(struct link *l, const struct link_params *p)
{
    if (!p || !params_valid(p)) {
        errno = EINVAL;
        return -1;
    }
    settle(l);
    l->p = *p;
    l->loss = prob_from(p->loss_prob);
    l->corrupt = prob_from(p->corrupt_prob);
    return 0;
}

void link_set_trace_id(struct link *l, uint32_t id)
{
    l->trace_id = id;
}
uint32_t link_trace_id(const struct link *l)
{
    return l->trace_id;
}

static void arm(struct link *l);

int link_add_capture(struct link *l, struct pcap_writer *w, enum link_tap where)
{
    if (!w || l->n_taps == LINK_MAX_TAPS || (where != LINK_TAP_TX && where != LINK_TAP_RX)) {
        errno = w ? ENOSPC : EINVAL;
        return -1;
    }
    l->taps[l->n_taps++] = (struct link_tap_entry){w, where};
    if (where == LINK_TAP_TX) {
        l->n_tx_taps++;
        settle(l);
        arm(l); /* the frame on the wire is written at its end */
    }
    return 0;
}

bool link_is_up(const struct link *l)
{
    return l->up;
}

/* ---------------------------------------------------------------- the serialiser */

/* The pipe's newest slot: the frame whose end is pending. */
static struct pipe_slot *newest(struct link *l)
{
    return &l->pipe[(l->pipe_head + l->pipe_n - 1) & (l->pipe_cap - 1)];
}

/* The frame on the wire was dropped at its end: out of the pipe. */
static void pipe_drop_newest(struct link *l)
{
    if (--l->pipe_n == 0)
        sim_cancel(l->sim, &l->pipe_ev);
}

/* The end of the pending frame (its last bit left at tx_end_ps): what
 * tx_done did at that instant, but the next frame and the idle
 * transition, which are the caller's. */
static void tx_finish(struct link *l)
{
    struct pipe_slot *s = newest(l);
    struct pkt *p = s->pkt;
    uint64_t wire = pkt_wire_bytes(p);
    l->tx_pending = false;
    l->tx_eager = false;
    l->queued_bytes -= wire;
    l->free_at_ps = l->tx_end_ps;
    if (l->deq_fn)
        l->deq_fn(l->deq_ctx, p);
    if (p->kind == PKT_PFC)
        l->c.pfc_frames_sent++;
    if (sim_trace_on(l->sim, TRACE_G_FABRIC)) { /* the frame on the wire; the queue it left */
        sim_trace(l->sim, &(struct trace_rec){.kind = TRACE_SPAN,
                                              .track = TRK_LINK,
                                              .node = l->trace_id,
                                              .t0_ps = l->tx_start_ps,
                                              .dur_ps = l->tx_end_ps - l->tx_start_ps,
                                              .opcode = p->opcode,
                                              .status = p->kind,
                                              .psn = p->psn,
                                              .qpn = p->dest_qpn,
                                              .unit = p->dst_node,
                                              .peer = p->src_node,
                                              .peer_qpn = p->src_qpn,
                                              .len = p->payload_len,
                                              .val = wire,
                                              .flags = p->ecn == PKT_ECN_CE ? 1 : 0,
                                              .where = l->name});
        trace_queue(l);
    }
    if (!l->up) { /* serialised into a failed link */
        pipe_drop_newest(l);
        credit_lost(l, p);
        drop(l, p, DROP_DOWN);
        return;
    }
    l->c.pkts_sent++;
    l->c.bytes_sent += wire;
    tap(l, LINK_TAP_TX, p, false);
    if (draw(l, &l->loss)) {
        pipe_drop_newest(l);
        credit_lost(l, p);
        drop(l, p, DROP_LOST);
        return;
    }
    s->corrupt = draw(l, &l->corrupt);
    s->epoch = l->fail_epoch; /* it entered the cable now */
}

/* A lazy end that is due (<= now) is processed now; with nothing queued
 * behind it, the link goes idle then. */
static void settle(struct link *l)
{
    if (!l->tx_pending || l->tx_eager || l->tx_end_ps > sim_now(l->sim))
        return;
    tx_finish(l);
    l->idle_count++;
}

/* The pending end gets its event (something now depends on its instant). */
static void arm(struct link *l)
{
    if (!l->tx_pending || l->tx_eager)
        return;
    l->tx_eager = true;
    sim_schedule_at(l->sim, &l->tx_ev, l->tx_end_ps);
}

void link_settle(struct link *l)
{
    settle(l);
}
void link_arm(struct link *l)
{
    settle(l);
    arm(l);
}
bool link_lazy_pending(const struct link *l)
{
    return l->tx_pending && !l->tx_eager;
}
sim_time_t link_pending_end(const struct link *l)
{
    return l->tx_pending ? l->tx_end_ps : 0;
}
void link_set_lazy_hook(struct link *l, link_lazy_fn fn, void *ctx, unsigned cookie)
{
    l->lazy_fn = fn;
    l->lazy_ctx = ctx;
    l->lazy_cookie = cookie;
}

void link_set_up(struct link *l, bool up)
{
    if (up == l->up)
        return;
    settle(l);
    l->up = up;
    if (up)
        return;
    /* Down: the cable's contents are lost (slots of the old epoch are
     * dropped when they reach the end), the queue is flushed; the frame on
     * the wire finishes and is dropped at its end (tx_finish). */
    l->fail_epoch++;
    arm(l);
    for (unsigned c = 0; c <= PKT_PRIOS; c++) {
        for (struct pkt *p = l->q[c].head, *next; p; p = next) {
            next = p->next;
            l->queued_bytes -= pkt_wire_bytes(p);
            if (l->deq_fn)
                l->deq_fn(l->deq_ctx, p);
            drop(l, p, DROP_DOWN);
        }
        l->q[c] = (struct link_fifo){0};
    }
    l->nonempty = 0;
}

/* The pending frame's end has not been processed, and it is not due yet
 * (or its event has not run): the wire is busy. */
static bool busy(const struct link *l)
{
    return l->tx_pending && (l->tx_eager || l->tx_end_ps > sim_now(l->sim));
}

bool link_idle(const struct link *l)
{
    return !busy(l) && !l->nonempty;
}
uint64_t link_queued_bytes(const struct link *l)
{
    if (l->tx_pending && !busy(l)) /* lazily gone */
        return l->queued_bytes -
               pkt_wire_bytes(l->pipe[(l->pipe_head + l->pipe_n - 1) & (l->pipe_cap - 1)].pkt);
    return l->queued_bytes;
}

void link_set_idle_hook(struct link *l, sim_cb_fn fn, void *a, void *b)
{
    l->idle_fn = fn;
    l->idle_a = a;
    l->idle_b = b;
}

bool link_want_idle(struct link *l)
{
    settle(l);
    if (!busy(l) && !l->nonempty)
        return false; /* idle now */
    l->idle_wanted = true;
    arm(l);
    return true;
}

uint64_t link_idle_count(struct link *l)
{
    settle(l);
    return l->idle_count;
}

/* ---------------------------------------------------------------- credits */

static bool credited(const struct link *l, const struct pkt *p)
{
    return (l->credit_mask >> p->prio & 1u) && p->kind != PKT_PFC;
}
static uint32_t credit_blocks(const struct pkt *p)
{
    return (p->frame_bytes + LINK_CREDIT_BLOCK_BYTES - 1) / LINK_CREDIT_BLOCK_BYTES;
}

/* Returns that have reached the transmitter by now are its credit again. */
static void credit_absorb(struct link *l)
{
    sim_time_t now = sim_now(l->sim);
    while (l->cret_n && l->cret[l->cret_head].at_ps <= now) {
        const struct credit_ret *r = &l->cret[l->cret_head];
        l->credit_used[r->prio] -=
            r->blocks < l->credit_used[r->prio] ? r->blocks : l->credit_used[r->prio];
        l->cret_head = (l->cret_head + 1) & (l->cret_cap - 1);
        l->cret_n--;
    }
}

static void credit_push(struct link *l, const struct pkt *p)
{
    if (l->cret_n == l->cret_cap) {
        size_t cap = l->cret_cap ? 2 * l->cret_cap : 64;
        struct credit_ret *n = malloc(cap * sizeof(*n));
        if (!n) {
            fprintf(stderr, "rnicsim: link %s: out of memory\n", l->name);
            abort();
        }
        for (size_t i = 0; i < l->cret_n; i++)
            n[i] = l->cret[(l->cret_head + i) & (l->cret_cap - 1)];
        free(l->cret);
        l->cret = n;
        l->cret_cap = cap;
        l->cret_head = 0;
    }
    sim_time_t at = sim_time_add(sim_now(l->sim), l->p.delay_ps);
    l->cret[(l->cret_head + l->cret_n) & (l->cret_cap - 1)] =
        (struct credit_ret){at, credit_blocks(p), p->prio};
    l->cret_n++;
    /* a transmitter waiting for credit looks again when it arrives */
    if (l->credit_blocked && (!sim_event_pending(&l->resume_ev) || l->resume_ev.time > at))
        sim_schedule_at(l->sim, &l->resume_ev, at);
}

void link_set_credits(struct link *l, uint8_t prio_mask, uint64_t limit_bytes)
{
    l->credit_mask = limit_bytes ? prio_mask : 0;
    l->credit_limit = limit_bytes / LINK_CREDIT_BLOCK_BYTES;
}

void link_credit_return(struct link *l, const struct pkt *p)
{
    if (credited(l, p))
        credit_push(l, p);
}

/* A credited frame the far end will never receive (lost, corrupt, the
 * link down): its blocks come back as if the receiver had freed them now
 * (IBA 7.9.4: the credit counters resynchronise). */
static void credit_lost(struct link *l, const struct pkt *p)
{
    if (credited(l, p))
        credit_push(l, p);
}

uint64_t link_credit_limit_bytes(const struct link *l)
{
    return l->credit_mask ? l->credit_limit * LINK_CREDIT_BLOCK_BYTES : 0;
}

sim_time_t link_credit_wait_ps(const struct link *l)
{
    sim_time_t open = l->credit_blocked ? sim_now(l->sim) - l->credit_wait_since : 0;
    return l->c.credit_wait_ps + open;
}

uint64_t link_credit_used_bytes(struct link *l, unsigned prio)
{
    if (prio >= PKT_PRIOS)
        return 0;
    credit_absorb(l);
    return l->credit_used[prio] * LINK_CREDIT_BLOCK_BYTES;
}

/* The FIFO to serve next: control frames, then the highest priority
 * that is not paused and, if credited, has credit for its head frame; -1
 * if none (then, if frames wait for a pause to expire or for credit on
 * its way, resume_ev is set for the earliest of them). */
static int pick_fifo(struct link *l)
{
    if (l->nonempty & (1u << LINK_CTRL))
        return LINK_CTRL;
    sim_time_t now = sim_now(l->sim), wake = SIM_TIME_NEVER;
    bool starved = false;
    if (l->credit_mask)
        credit_absorb(l);
    for (int c = PKT_PRIOS - 1; c >= 0; c--) {
        if (!(l->nonempty & (1u << c)))
            continue;
        if (l->paused_until[c] > now) {
            if (l->paused_until[c] < wake)
                wake = l->paused_until[c];
            continue;
        }
        if ((l->credit_mask >> c & 1u) &&
            l->credit_used[c] + credit_blocks(l->q[c].head) > l->credit_limit) {
            starved = true;
            if (l->cret_n && l->cret[l->cret_head].at_ps < wake)
                wake = l->cret[l->cret_head].at_ps;
            continue;
        }
        return c;
    }
    if (starved && !l->credit_blocked) {
        l->credit_blocked = true;
        l->credit_wait_since = now;
        l->c.credit_stalls++;
    }
    if (wake != SIM_TIME_NEVER)
        sim_schedule_at(l->sim, &l->resume_ev, wake);
    return -1;
}

static void pipe_push(struct link *l, sim_time_t arrive_ps, struct pkt *p)
{
    if (l->pipe_n == l->pipe_cap) {
        size_t cap = l->pipe_cap ? 2 * l->pipe_cap : 16;
        struct pipe_slot *np = malloc(cap * sizeof(*np));
        if (!np) {
            fprintf(stderr, "rnicsim: link %s: out of memory\n", l->name);
            abort();
        }
        for (size_t i = 0; i < l->pipe_n; i++)
            np[i] = l->pipe[(l->pipe_head + i) & (l->pipe_cap - 1)];
        free(l->pipe);
        l->pipe = np;
        l->pipe_cap = cap;
        l->pipe_head = 0;
    }
    l->pipe[(l->pipe_head + l->pipe_n) & (l->pipe_cap - 1)] =
        (struct pipe_slot){arrive_ps, p, l->fail_epoch, false};
    if (l->pipe_n++ == 0)
        sim_schedule_at(l->sim, &l->pipe_ev, arrive_ps);
}

/* Take the next frame onto the wire (the link is not busy); false if none
 * may go.  Its timing is known now: into the pipe at once. */
static bool tx_start(struct link *l)
{
    int c = l->nonempty ? pick_fifo(l) : -1;
    if (c < 0)
        return false;
    struct link_fifo *q = &l->q[c];
    struct pkt *p = q->head;
    q->head = p->next;
    if (!q->head) {
        q->tail = NULL;
        l->nonempty &= (uint16_t) ~(1u << c);
    }
    p->next = NULL;
    uint64_t wire = pkt_wire_bytes(p);
    q->bytes -= wire;
    bool was_starved = l->credit_blocked;
    if (l->credit_blocked) {
        l->credit_blocked = false;
        l->c.credit_wait_ps += sim_now(l->sim) - l->credit_wait_since;
    }
    if (c < PKT_PRIOS && (l->credit_mask >> c & 1u)) {
        l->credit_used[c] += credit_blocks(p);
        if (l->credit_used[c] * LINK_CREDIT_BLOCK_BYTES > l->c.max_credit_used_bytes)
            l->c.max_credit_used_bytes = l->credit_used[c] * LINK_CREDIT_BLOCK_BYTES;
    }
    sim_time_t ser_ps = sim_bytes_to_ps(wire, l->p.rate_bps);
    /* Cut-through (docs/fabric.md "Cut-through"): a frame whose head was
     * available before now (pkt.head_ps, set by a cut-through switch or a
     * NIC streaming its payload from PCIe) starts when its head was there
     * if the wire was free by then (and its priority not paused), but its
     * last bit never leaves before now, when it was all here: start =
     * max(head, free_at, paused_until), end = max(start + ser, now).  A
     * frame without an earlier head (head_ps 0 or >= now) is
     * store-and-forward. */
    sim_time_t now = sim_now(l->sim), start = now;
    /* (a frame that waited for credit starts when the credit came: now) */
    if (p->head_ps && p->head_ps < now && !was_starved) {
        start = p->head_ps > l->free_at_ps ? p->head_ps : l->free_at_ps;
        if (c < PKT_PRIOS && start < l->paused_until[c])
            start = l->paused_until[c];
        if (start > now)
            start = now;
    }
    sim_time_t end = sim_time_add(start, ser_ps);
    end = end > now ? end : now;
    l->c.busy_ps += ser_ps;
    /* the far end sees the first bit one cable delay after it left */
    p->head_ps = sim_time_add(start, l->p.delay_ps);
    pipe_push(l, sim_time_add(end, l->p.delay_ps), p);
    l->tx_pending = true;
    l->tx_start_ps = start;
    l->tx_end_ps = end;
    l->tx_eager = false;
    /* traced: every frame's end at its instant, so that the timeline's
     * records come in time order */
    bool eager = l->nonempty || l->idle_wanted || l->n_tx_taps || !l->up || l->loss.thr ||
                 l->loss.always || sim_trace_on(l->sim, TRACE_G_FABRIC);
    if (eager || (l->lazy_fn && !l->lazy_fn(l->lazy_ctx, l->lazy_cookie, p))) {
        l->tx_eager = true;
        sim_schedule_at(l->sim, &l->tx_ev, end);
    }
    return true;
}

/* The pending frame's end, at its instant: then the next frame, or the
 * transition to idle. */
static void tx_done(struct sim *sim, struct sim_event *ev)
{
    struct link *l = ev->ctx;
    tx_finish(l);
    if (tx_start(l) || l->nonempty)
        return; /* busy again, or frames wait for a pause to end: not idle */
    l->idle_count++;
    if (l->idle_wanted) {
        l->idle_wanted = false;
        if (l->idle_fn)
            l->idle_fn(sim, l->idle_a, l->idle_b);
    }
}

static void enqueue(struct link *l, unsigned c, struct pkt *p, uint64_t wire)
{
    struct link_fifo *q = &l->q[c];
    p->next = NULL;
    if (q->tail)
        q->tail->next = p;
    else
        q->head = p;
    q->tail = p;
    q->bytes += wire;
    l->nonempty |= (uint16_t)(1u << c);
    l->queued_bytes += wire;
    if (l->queued_bytes > l->c.max_queue_bytes)
        l->c.max_queue_bytes = l->queued_bytes;
    if (sim_trace_on(l->sim, TRACE_G_FABRIC))
        trace_queue(l);
    if (l->tx_pending)
        arm(l); /* it starts when the frame on the wire has left */
    else
        tx_start(l);
}

/* RED-style marking on the instantaneous queue of the frame's priority. */
static void ecn_mark(struct link *l, struct pkt *p)
{
    uint64_t qb = l->q[p->prio].bytes;
    if (qb <= l->ecn.kmin_bytes)
        return;
    bool mark = true;
    if (qb < l->ecn.kmax_bytes) {
        double prob = l->ecn.pmax * (double)(qb - l->ecn.kmin_bytes) /
                      (double)(l->ecn.kmax_bytes - l->ecn.kmin_bytes);
        mark = sim_rng_uniform(&l->rng) < prob;
    }
    if (mark) {
        p->ecn = PKT_ECN_CE;
        l->c.ecn_marked++;
    }
}

bool link_send(struct link *l, struct pkt *p)
{
    settle(l);
    uint64_t wire = pkt_wire_bytes(p);
    if (l->p.queue_bytes && !(l->lossless & (1u << p->prio)) &&
        l->queued_bytes + wire > l->p.queue_bytes) {
        if (l->deq_fn)
            l->deq_fn(l->deq_ctx, p);
        drop(l, p, DROP_OVERFLOW);
        return false;
    }
    if (l->ecn_on && p->ecn == PKT_ECN_ECT0)
        ecn_mark(l, p);
    enqueue(l, p->prio, p, wire);
    return true;
}

void link_send_ctrl(struct link *l, struct pkt *p)
{
    settle(l);
    enqueue(l, LINK_CTRL, p, pkt_wire_bytes(p));
}

void link_set_peer(struct link *l, struct link *peer)
{
    l->peer = peer;
}
struct link *link_peer(const struct link *l)
{
    return l->peer;
}
void link_set_lossless(struct link *l, uint8_t prio_mask)
{
    l->lossless = prio_mask;
}
void link_set_ecn(struct link *l, const struct link_ecn *e)
{
    l->ecn_on = e != NULL;
    if (e)
        l->ecn = *e;
}
void link_set_dequeue_hook(struct link *l, link_deq_fn fn, void *ctx)
{
    l->deq_fn = fn;
    l->deq_ctx = ctx;
}
uint64_t link_prio_queued_bytes(const struct link *l, unsigned prio)
{
    return prio < PKT_PRIOS ? l->q[prio].bytes : 0;
}
bool link_prio_paused(const struct link *l, unsigned prio)
{
    return prio < PKT_PRIOS && l->paused_until[prio] > sim_now(l->sim);
}

/* A PFC frame reached this link's transmitter (through its peer). */
static void pfc_apply(struct link *l, const struct pkt *f)
{
    settle(l);
    sim_time_t now = sim_now(l->sim);
    for (unsigned c = 0; c < PKT_PRIOS; c++) {
        if (!(f->pfc_enable & (1u << c)))
            continue;
        if (f->pfc_quanta[c]) {
            /* one quantum = 512 bit times at this link's rate */
            l->paused_until[c] =
                now + sim_bytes_to_ps((uint64_t)f->pfc_quanta[c] * 64, l->p.rate_bps);
            l->c.pfc_xoff_rx++;
        } else {
            l->paused_until[c] = 0;
            l->c.pfc_xon_rx++;
        }
        if (sim_trace_on(l->sim, TRACE_G_FABRIC)) /* status = the priority, val = until */
            sim_trace(l->sim, &(struct trace_rec){.kind = TRACE_INSTANT,
                                                  .track = TRK_LINK,
                                                  .node = l->trace_id,
                                                  .t0_ps = now,
                                                  .status = (uint16_t)c,
                                                  .val = l->paused_until[c],
                                                  .flags = f->pfc_quanta[c] ? 1 : 0,
                                                  .where = l->name});
    }
    if (!l->tx_pending)
        tx_start(l);
}

static void resume_fn(struct sim *sim, struct sim_event *ev)
{
    (void)sim;
    struct link *l = ev->ctx;
    settle(l);
    if (!l->tx_pending)
        tx_start(l);
}

/* The oldest frame in the pipe reaches the far end. */
static void pipe_arrive(struct sim *sim, struct sim_event *ev)
{
    struct link *l = ev->ctx;
    if (l->tx_pending && l->pipe_n == 1 && l->tx_end_ps <= sim_now(sim)) {
        /* No cable delay: the frame arriving is the one whose end is due
         * now.  Its end first (and the next frame, if one waits). */
        struct pkt *arriving = l->pipe[l->pipe_head].pkt;
        if (l->tx_eager) {
            sim_cancel(sim, &l->tx_ev);
            tx_done(sim, &l->tx_ev);
        } else {
            settle(l);
        }
        if (!l->pipe_n || l->pipe[l->pipe_head].pkt != arriving)
            return; /* dropped at its end */
    }
    struct pipe_slot s = l->pipe[l->pipe_head];
    l->pipe_head = (l->pipe_head + 1) & (l->pipe_cap - 1);
    l->pipe_n--;
    if (l->pipe_n)
        sim_schedule_at(sim, &l->pipe_ev, l->pipe[l->pipe_head].arrive_ps);
    if (!l->up || s.epoch != l->fail_epoch) {
        credit_lost(l, s.pkt);
        drop(l, s.pkt, DROP_DOWN); /* in the cable when it failed */
        return;
    }
    tap(l, LINK_TAP_RX, s.pkt, s.corrupt);
    if (s.corrupt) {
        credit_lost(l, s.pkt);
        drop(l, s.pkt, DROP_CORRUPT);    /* the receiver's ICRC check fails */
    } else if (s.pkt->kind == PKT_PFC) { /* MAC control: consumed by the receiving port */
        if (l->peer)
            pfc_apply(l->peer, s.pkt);
        pkt_free(l->pool, s.pkt);
    } else if (l->sink.rx)
        l->sink.rx(sim, l->sink.ctx, s.pkt);
    else { /* unconnected far end: the frame is lost, counted as a drop */
        credit_lost(l, s.pkt);
        drop(l, s.pkt, DROP_UNCONNECTED);
    }
}
