/* One direction of a cable: a drop-tail queue that serialises frames at the
 * line rate, followed by a propagation pipe (htsim's Queue + Pipe).
 *
 *   link_send -> [queue: drop-tail by bytes] -> serialiser (tx_ev)
 *             -> [pipe: FIFO of (arrival time, pkt)] (pipe_ev) -> sink.rx
 *
 * Two intrusive events per link, whatever the load: `tx_ev` fires when the
 * frame being serialised has left, `pipe_ev` when the oldest frame in the
 * pipe reaches the far end.  Frames leave the serialiser in order and the
 * delay is constant, so pipe arrival times are increasing and a ring buffer
 * is enough.
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
 * queue, as DCQCN's switches do); the draw uses the link's RNG stream. */
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
    struct sim *sim;
    char *name;
    struct link_params p;
    struct pkt_pool *pool;
    struct fabric_sink sink;

    /* queue: a FIFO per priority + control; `tx` is the frame on the wire */
    struct link_fifo q[PKT_PRIOS + 1];
    uint16_t nonempty; /* bit i: q[i] holds a frame */
    struct pkt *tx;
    uint64_t queued_bytes; /* queue + tx, wire bytes */
    struct sim_event tx_ev;
    sim_time_t tx_start_ps; /* when `tx`'s first bit went onto the wire */
    sim_time_t free_at_ps;  /* when the wire last became free */

    /* PFC: pause state of this link's transmitter, set by frames that
     * arrive on its peer (the other direction of the cable) */
    struct link *peer;
    sim_time_t paused_until[PKT_PRIOS];
    struct sim_event resume_ev;
    uint8_t lossless; /* priorities exempt from drop-tail */
    bool ecn_on;
    struct link_ecn ecn;
    link_deq_fn deq_fn; /* a frame left the queue (sent or dropped) */
    void *deq_ctx;

    /* pipe: ring of frames in flight */
    struct pipe_slot *pipe;
    size_t pipe_cap, pipe_head, pipe_n;
    struct sim_event pipe_ev;

    sim_cb_fn idle_fn;
    void *idle_a, *idle_b;

    /* impairments and failures */
    struct prob loss, corrupt;
    struct sim_rng rng;
    bool up;
    uint32_t fail_epoch;
    uint32_t trace_id;

    struct link_tap_entry taps[LINK_MAX_TAPS];
    unsigned n_taps;

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
static void pipe_arrive(struct sim *sim, struct sim_event *ev);
static void resume_fn(struct sim *sim, struct sim_event *ev);

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
    if (l->tx)
        pkt_free(l->pool, l->tx);
    for (size_t i = 0; i < l->pipe_n; i++)
        pkt_free(l->pool, l->pipe[(l->pipe_head + i) % l->pipe_cap].pkt);
    free(l->pipe);
    free(l->name);
    free(l);
}

void link_connect(struct link *l, struct fabric_sink sink)
{
    l->sink = sink;
}

const struct link_counters *link_get_counters(const struct link *l)
{
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

int link_add_capture(struct link *l, struct pcap_writer *w, enum link_tap where)
{
    if (!w || l->n_taps == LINK_MAX_TAPS || (where != LINK_TAP_TX && where != LINK_TAP_RX)) {
        errno = w ? ENOSPC : EINVAL;
        return -1;
    }
    l->taps[l->n_taps++] = (struct link_tap_entry){w, where};
    return 0;
}

bool link_is_up(const struct link *l)
{
    return l->up;
}

void link_set_up(struct link *l, bool up)
{
    if (up == l->up)
        return;
    l->up = up;
    if (up)
        return;
    /* Down: the cable's contents are lost (slots of the old epoch are
     * dropped when they reach the end), the queue is flushed; the frame on
     * the wire finishes and is dropped in tx_done. */
    l->fail_epoch++;
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
bool link_idle(const struct link *l)
{
    return l->tx == NULL && !l->nonempty;
}
uint64_t link_queued_bytes(const struct link *l)
{
    return l->queued_bytes;
}

void link_set_idle_hook(struct link *l, sim_cb_fn fn, void *a, void *b)
{
    l->idle_fn = fn;
    l->idle_a = a;
    l->idle_b = b;
}

/* The FIFO to serve next: control frames, then the highest priority
 * that is not paused; -1 if none (then, if frames wait for a pause to
 * expire, resume_ev is set for the earliest expiry). */
static int pick_fifo(struct link *l)
{
    if (l->nonempty & (1u << LINK_CTRL))
        return LINK_CTRL;
    sim_time_t now = sim_now(l->sim), wake = SIM_TIME_NEVER;
    for (int c = PKT_PRIOS - 1; c >= 0; c--) {
        if (!(l->nonempty & (1u << c)))
            continue;
        if (l->paused_until[c] <= now)
            return c;
        if (l->paused_until[c] < wake)
            wake = l->paused_until[c];
    }
    if (wake != SIM_TIME_NEVER)
        sim_schedule_at(l->sim, &l->resume_ev, wake);
    return -1;
}

/* Take the next frame onto the wire; false if none may go. */
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
    l->tx = p;
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
    if (p->head_ps && p->head_ps < now) {
        start = p->head_ps > l->free_at_ps ? p->head_ps : l->free_at_ps;
        if (c < PKT_PRIOS && start < l->paused_until[c])
            start = l->paused_until[c];
        if (start > now)
            start = now;
    }
    sim_time_t end = start + ser_ps > now ? start + ser_ps : now;
    l->tx_start_ps = start;
    l->c.busy_ps += ser_ps;
    sim_schedule_at(l->sim, &l->tx_ev, end);
    return true;
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
    if (!l->tx)
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
    if (!l->tx)
        tx_start(l);
}

static void resume_fn(struct sim *sim, struct sim_event *ev)
{
    (void)sim;
    struct link *l = ev->ctx;
    if (!l->tx)
        tx_start(l);
}

static void pipe_push(struct link *l, sim_time_t arrive_ps, struct pkt *p, bool corrupt)
{
    if (l->pipe_n == l->pipe_cap) {
        size_t cap = l->pipe_cap ? 2 * l->pipe_cap : 16;
        struct pipe_slot *np = malloc(cap * sizeof(*np));
        if (!np) {
            fprintf(stderr, "rnicsim: link %s: out of memory\n", l->name);
            abort();
        }
        for (size_t i = 0; i < l->pipe_n; i++)
            np[i] = l->pipe[(l->pipe_head + i) % l->pipe_cap];
        free(l->pipe);
        l->pipe = np;
        l->pipe_cap = cap;
        l->pipe_head = 0;
    }
    l->pipe[(l->pipe_head + l->pipe_n) % l->pipe_cap] =
        (struct pipe_slot){arrive_ps, p, l->fail_epoch, corrupt};
    l->pipe_n++;
    if (!sim_event_pending(&l->pipe_ev))
        sim_schedule_at(l->sim, &l->pipe_ev, arrive_ps);
}

/* The last bit of `tx` has left: into the pipe (unless the link is down or
 * the frame is lost), then the next frame (or tell the sender the link
 * went idle). */
static void tx_done(struct sim *sim, struct sim_event *ev)
{
    struct link *l = ev->ctx;
    struct pkt *p = l->tx;
    uint64_t wire = pkt_wire_bytes(p);
    l->tx = NULL;
    l->queued_bytes -= wire;
    l->free_at_ps = sim_now(sim);
    /* the far end sees the first bit one cable delay after it left */
    p->head_ps = l->tx_start_ps + l->p.delay_ps;
    if (l->deq_fn)
        l->deq_fn(l->deq_ctx, p);
    if (p->kind == PKT_PFC)
        l->c.pfc_frames_sent++;
    if (sim_trace_on(sim, TRACE_G_FABRIC)) { /* the frame on the wire; the queue it left */
        sim_trace(sim, &(struct trace_rec){.kind = TRACE_SPAN,
                                           .track = TRK_LINK,
                                           .node = l->trace_id,
                                           .t0_ps = l->tx_start_ps,
                                           .dur_ps = sim_now(sim) - l->tx_start_ps,
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
    if (!l->up) {
        drop(l, p, DROP_DOWN);
    } else {
        l->c.pkts_sent++;
        l->c.bytes_sent += wire;
        tap(l, LINK_TAP_TX, p, false);
        if (draw(l, &l->loss))
            drop(l, p, DROP_LOST);
        else
            pipe_push(l, sim_time_add(sim_now(sim), l->p.delay_ps), p, draw(l, &l->corrupt));
    }
    if (!tx_start(l) && !l->nonempty && l->idle_fn)
        l->idle_fn(sim, l->idle_a, l->idle_b);
}

/* The oldest frame in the pipe reaches the far end. */
static void pipe_arrive(struct sim *sim, struct sim_event *ev)
{
    struct link *l = ev->ctx;
    struct pipe_slot s = l->pipe[l->pipe_head];
    l->pipe_head = (l->pipe_head + 1) % l->pipe_cap;
    l->pipe_n--;
    if (l->pipe_n)
        sim_schedule_at(sim, &l->pipe_ev, l->pipe[l->pipe_head].arrive_ps);
    if (!l->up || s.epoch != l->fail_epoch) {
        drop(l, s.pkt, DROP_DOWN); /* in the cable when it failed */
        return;
    }
    tap(l, LINK_TAP_RX, s.pkt, s.corrupt);
    if (s.corrupt)
        drop(l, s.pkt, DROP_CORRUPT);  /* the receiver's ICRC check fails */
    else if (s.pkt->kind == PKT_PFC) { /* MAC control: consumed by the receiving port */
        if (l->peer)
            pfc_apply(l->peer, s.pkt);
        pkt_free(l->pool, s.pkt);
    } else if (l->sink.rx)
        l->sink.rx(sim, l->sink.ctx, s.pkt);
    else /* unconnected far end: the frame is lost, counted as a drop */
        drop(l, s.pkt, DROP_UNCONNECTED);
}
